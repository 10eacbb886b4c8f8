/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Path resolution inside a container's root filesystem (src/base/rootfs.c). Every path
 * is resolved from one rootfs directory fd with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS), or by a component-by-component walk (O_NOFOLLOW at each step,
 * symlinks resolved against a stack of directory fds, never above the root) where
 * openat2 is missing and where directories must be created; the final operation is a
 * *at() call on the parent directory fd with a single name that is never followed.
 */
#ifndef ORH_BASE_ROOTFS_H
#define ORH_BASE_ROOTFS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "orh/base/util.h"

/* True once the component walk replaced openat2 (which failed with ENOSYS). */
bool orh_rootfs_fallback_active(void);

/* Open a trusted host directory as a rootfs fd (O_PATH | O_DIRECTORY). */
int orh_rootfs_open(const char *path, int *out, struct orh_err *err);

/* "Any mount" where a mount id is asked for (mount ids start at 0). */
#define ORH_MOUNT_ANY UINT64_MAX

/* The mount id of the file behind fd (statx STATX_MNT_ID, or /proc/self/fdinfo where
 * statx has none and with the walk). 0 or -errno. */
int orh_fd_mount_id(int fd, uint64_t *id);
/* Resolve directory `path` inside the root (symlinks resolved as the container would,
 * never leaving the root). With `create`, missing directories are made with mode 0755.
 * With mnt (a mount id, or ORH_MOUNT_ANY), the directory must be on that mount and a missing
 * one is made only inside a directory on it: -EXDEV otherwise, nothing created there.
 * *out is an O_PATH directory fd. */
int orh_rootfs_dir(int rootfd, const char *path, bool create, uint64_t mnt, int *out,
		   struct orh_err *err);
/* Would orh_rootfs_dir(rootfd, path, true, mnt, ...) make or find `path` on mount mnt?
 * The same resolution with nothing made: 0 where `path` is a directory on mnt, or where the
 * first directory missing on its way would be made in a directory on mnt (*out: that
 * directory, O_PATH); -EXDEV where either is on another mount. */
int orh_rootfs_dir_probe(int rootfd, const char *path, uint64_t mnt, int *out,
			 struct orh_err *err);
/* Resolve the parent of `path` (see orh_rootfs_dir) and copy the final component, which
 * the caller must act on with *at() calls that do not follow it. */
int orh_rootfs_parent(int rootfd, const char *path, bool create, uint64_t mnt, int *dirfd,
		      char name[NAME_MAX + 1], struct orh_err *err);
/* Where `path` leads inside the root: the longest part of it that exists resolved as the
 * runtime resolves a mount's destination (symlinks followed, never above the root), the
 * missing rest appended as written; the result is an absolute in-root path. -ENOSYS where
 * openat2 is missing (the caller must then assume the worst), -EINVAL for a ".." in the
 * missing rest, -ELOOP where a symlink on the way leads nowhere, another -errno when it
 * cannot be told (-EAGAIN: renames elsewhere raced openat2's ".." 64 times in a row). */
int orh_rootfs_resolve(int rootfd, const char *path, char *out, size_t size);
/* The container's /dev: the root's own "dev" (made when missing), never through a
 * symlink, and whatever the runtime mounted on it (its tmpfs). */
int orh_rootfs_devdir(int rootfd, int *out, struct orh_err *err);

/* Open the regular file `path` inside the root for reading (O_RDONLY | O_NONBLOCK): every
 * symlink on the way, the last one too, resolved as the container would, never above the
 * root. Nothing but a regular file is opened for reading (found first with O_PATH, then
 * reopened): -EINVAL for a FIFO, a device or a socket, -EISDIR for a directory. *st is
 * the file's. 0 or -errno. */
int orh_rootfs_open_file(int rootfd, const char *path, int *out, struct stat *st);
/* The target of the symlink `path` inside the root (its directory resolved as
 * orh_rootfs_dir() does, the link itself not followed), into out. Its length or -errno
 * (-EINVAL: not a symlink; -ENAMETOOLONG: longer than size - 1). */
int orh_rootfs_readlink(int rootfd, const char *path, char *out, size_t size);

#endif
