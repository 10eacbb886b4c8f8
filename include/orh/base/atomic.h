/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replacing one entry of a directory atomically (src/base/atomic.c): the new entry is made
 * under a temporary name in the same directory, given its owner, mode and content, then
 * renamed over the old one, so that whoever looks at the name sees the old entry or the
 * complete new one, never a part. Every file and node the binary writes goes through it,
 * none is written in place: the runtime shim's config.json, `cdi --output`, configure's
 * and install's files (orh_write_atomic), the container's /etc/nccl.conf, the copy of it
 * generated under /run/oci-rdma-hook (a new file each time: a copy mounted into a
 * container keeps its content), the record, the sweep's mark and a state directory's link
 * to its sysfs view there, and every device node. Two writes are no replacement: an
 * empty /etc/nccl.conf made with O_EXCL as a mount point where there is none, and the line
 * the runtime shim appends to runc's --log. (seccomp-gen, the build tool that runs on the
 * build machine, writes its header aside and renames it too.)
 */
#ifndef ORH_BASE_ATOMIC_H
#define ORH_BASE_ATOMIC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "orh/base/util.h"

/* What orh_replace_at() puts at dirfd/name, and how. A zeroed struct with .type set is an
 * empty file of mode 0, written without fsync. */
struct orh_replace {
	mode_t type;          /* S_IFREG: a file; S_IFCHR: a character device of number rdev;
			       * S_IFLNK: a symlink whose target is the string data */
	dev_t rdev;
	mode_t mode;          /* permission bits: a file gets them exactly (fchmod); a node
			       * from mknodat, under the caller's umask (no chmod by name); a
			       * symlink has none */
	bool chown;           /* give the entry uid:gid */
	bool chown_eperm_ok;  /* an EPERM of that chown is no failure (an unprivileged writer:
			       * the entry stays the writer's) */
	uid_t uid;
	gid_t gid;
	const void *data;     /* a file's content: these len bytes, then what fill() writes */
	size_t len;
	int (*fill)(int fd, void *arg, struct orh_err *err); /* 0 or -errno with err filled */
	void *arg;
	bool durable;         /* fsync the file before the rename, and the directory after it */
	bool sweep;           /* first remove what killed writers left: entries of this type
			       * named as this function names its temporaries for `name`.
			       * Only where no other writer may be at work in the directory
			       * at the same time (a bundle; not a rootfs containers share) */
	const char *what;     /* what messages call the entry (the path its user knows);
			       * name when NULL */
	int create_errno;     /* out: the errno with which the temporary entry could not be
			       * made (the caller may have another way: a read-only /etc, a
			       * mknod that is not permitted), else 0 */
};

/* Replace dirfd/name (a plain name, no '/') with the entry `how` describes: made as
 * ".NAME.orh-<16 hex digits>" (a new random suffix while the name is taken; NAME cut to
 * 200 bytes), owner, mode and content set on it, then renamed over name (renameat never
 * follows the destination). On every failure before the rename the temporary entry is
 * removed and name is left as it was. 0 or -errno with err filled. */
int orh_replace_at(int dirfd, const char *name, struct orh_replace *how, struct orh_err *err);

/* Replace dirfd/name with data: a file whose mode, and owner when we may, are copied from
 * the regular file it replaces (else `mode`), fsync, renameat, fsync of the directory;
 * temporaries a killed writer left for this name are removed first. For files no other
 * writer touches at the same time (a bundle's config.json, a CDI spec). */
int orh_write_atomic(int dirfd, const char *name, const char *data, size_t len,
		     unsigned mode, struct orh_err *err);

#endif
