/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device nodes inside the container: /dev/infiniband/uverbsN, rdma_cm (and umad/issm
 * when the plan has them). mknod where we may; bind-mount the host's node where mknod is
 * not permitted (user namespaces). Every node is made under a temporary name and renamed
 * to its own (orh_replace_at), over whatever else holds the name: renameat never follows
 * the destination. A node with the right numbers already there is kept.
 *
 * Nodes are made only on the container's /dev (the runtime's tmpfs, or the rootfs's own
 * directory): where /dev/infiniband leads onto another mount (a volume of host storage),
 * a node already there with the right numbers is kept and nothing is made.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "orh/apply/devices.h"
#include "orh/apply/mount.h"
#include "orh/base/rootfs.h"
#include "orh/apply/target.h"
#include "orh/base/atomic.h"

/* Put a new entry (a character device, or an empty file as a mount point) at dfd/name,
 * root:root: made under a temporary name, then renamed over whatever is there (renameat
 * never follows the destination). *mknod_errno tells the caller why mknod failed. The
 * caller has set the umask to 0, so that a node has its exact mode at creation (no chmod
 * by name afterwards). */
static int make_entry(int dfd, const char *name, bool chardev, const struct orh_devnode *n,
		      int *mknod_errno, struct orh_err *err)
{
	struct orh_replace how = {
		.type = chardev ? S_IFCHR : S_IFREG,
		.rdev = makedev(n->major, n->minor),
		.mode = (mode_t)(n->mode & 07777),
		.chown = true,
		.what = n->path,
	};
	int r = orh_replace_at(dfd, name, &how, err);

	if (r < 0 && chardev && mknod_errno)
		*mknod_errno = how.create_errno; /* the caller decides about EPERM */
	return r;
}

static int replace_with(int dfd, const char *name, bool chardev, const struct orh_devnode *n,
			struct orh_err *err)
{
	return make_entry(dfd, name, chardev, n, NULL, err);
}

static int bind_host_node(int dfd, const char *name, const struct orh_target *t,
			  int hostfd, const struct orh_devnode *n, struct orh_err *err)
{
	_cleanup_close_ int src = -1;
	_cleanup_close_ int target = -1;
	struct stat st;
	int r;

	src = openat(hostfd, n->path[0] == '/' ? n->path + 1 : n->path,
		     O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0)
		return orh_fail_errno(err, errno, "opening host node '%s'", n->path);
	if (fstat(src, &st) < 0)
		return orh_fail_errno(err, errno, "stat of host node '%s'", n->path);
	if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(n->major, n->minor))
		return orh_fail(err, ENODEV,
				"host node '%s' is not the character device %u:%u; not binding it",
				n->path, n->major, n->minor);

	target = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (target < 0 || fstat(target, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (target >= 0)
			close(TAKE_FD(target));
		r = replace_with(dfd, name, false, n, err);
		if (r < 0)
			return r;
		target = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (target < 0)
			return orh_fail_errno(err, errno, "opening mount point '%s'", n->path);
		if (fstat(target, &st) < 0 || !S_ISREG(st.st_mode))
			return orh_fail(err, EEXIST, "mount point '%s' was replaced; refusing",
					n->path);
	}
	r = orh_bind_into_container(t, src, target, false, err);
	if (r < 0)
		return orh_err_prefix(err, "binding host node '%s'", n->path);
	return 0;
}

/* The directory a node goes in, opened once for all the nodes that share it. */
struct parent {
	int fd;
	char path[PATH_MAX];
	bool foreign; /* on another mount than the container's /dev: make nothing there */
	bool empty;   /* it held no entry when opened: a node made first there needs no look */
};

static bool no_entry(const char *name, void *arg)
{
	(void)name;
	*(bool *)arg = false;
	return false;
}

/* Whether the directory holds no entry (one listing: a directory the walk has just made,
 * or the runtime's /dev/infiniband with no node yet, spares a stat of each node's name).
 * false where it cannot be listed. */
static bool dir_empty(int fd)
{
	bool empty = true;

	return orh_dir_each(fd, ".", no_entry, &empty) == 0 && empty;
}

/* Open the directory of node n, on the mount of the container's /dev (devmnt) or, where
 * it leads onto another mount, only to look there. */
static int open_parent(int rootfd, uint64_t devmnt, const struct orh_devnode *n,
		       struct parent *parent, char name[NAME_MAX + 1], struct orh_err *err)
{
	struct orh_err look = { 0 };
	int r = orh_rootfs_parent(rootfd, n->path, true, devmnt, &parent->fd, name, err);

	parent->foreign = false;
	if (r == -EXDEV && orh_rootfs_parent(rootfd, n->path, false, ORH_MOUNT_ANY, &parent->fd,
					     name, &look) == 0) {
		parent->foreign = true;
		r = 0;
	}
	parent->empty = r == 0 && !parent->foreign && dir_empty(parent->fd);
	return r;
}

static int apply_one(int rootfd, uint64_t devmnt, const struct orh_target *t, int hostfd,
		     struct parent *parent, const struct orh_devnode *n, bool made_before,
		     struct orh_devices_result *res, struct orh_err *err)
{
	const char *slash = strrchr(n->path, '/');
	size_t dirlen = slash ? (size_t)(slash - n->path) + 1 : 0;
	char name[NAME_MAX + 1];
	struct stat st;
	int mknod_errno = 0;
	int dfd, r;

	if (parent->fd < 0 || dirlen >= sizeof(parent->path) || slash[1] == '\0' ||
	    strncmp(parent->path, n->path, dirlen) || parent->path[dirlen] != '\0') {
		if (parent->fd >= 0)
			close(TAKE_FD(parent->fd));
		r = open_parent(rootfd, devmnt, n, parent, name, err);
		if (r < 0)
			return orh_err_prefix(err, "device '%s'", n->path);
		if (dirlen < sizeof(parent->path) && slash && slash[1] != '\0')
			snprintf(parent->path, sizeof(parent->path), "%.*s", (int)dirlen, n->path);
		else
			parent->path[0] = '\0'; /* odd path: no reuse */
	} else if (orh_strlcpy(name, slash + 1, sizeof(name)) < 0 || !strcmp(name, ".") ||
		   !strcmp(name, "..")) {
		return orh_fail(err, EINVAL, "device '%s': path '%s' has no usable final name",
				n->path, n->path);
	}
	dfd = parent->fd;
	if (parent->foreign) {
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode) &&
		    st.st_rdev == makedev(n->major, n->minor)) {
			res->kept++;
			return 0;
		}
		return orh_fail(err, EXDEV,
				"device '%s': its directory is on another mount than the "
				"container's /dev (a volume?); no device node is made there",
				n->path);
	}
	/* what is there already: kept when it is the node, else replaced (nothing is there
	 * in a directory that was empty, but a node of this path made before) */
	if (parent->empty && !made_before) {
		/* nothing to look at */
	} else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(n->major, n->minor)) {
			res->kept++;
			return 0;
		}
		if (S_ISDIR(st.st_mode))
			return orh_fail(err, EISDIR, "device '%s': a directory is in the way",
					n->path);
		/* runc made it from a spec entry with other numbers (or the image has it):
		 * the grant is for the node's numbers, so it could not work as it is */
		if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
			orh_strv_pushf(&res->warnings,
				       "'%s' was %c %u:%u, the node's is c %u:%u: replaced",
				       n->path, S_ISCHR(st.st_mode) ? 'c' : 'b', major(st.st_rdev),
				       minor(st.st_rdev), n->major, n->minor);
	} else if (errno != ENOENT) {
		return orh_fail_errno(err, errno, "device '%s': stat", n->path);
	}

	r = make_entry(dfd, name, true, n, &mknod_errno, err);
	if (r == 0) {
		res->created++;
		return 0;
	}
	if (mknod_errno != EPERM)
		return r;
	if (hostfd < 0)
		return orh_fail(err, EPERM, "mknod '%s': not permitted and no host node to bind",
				n->path);
	r = bind_host_node(dfd, name, t, hostfd, n, err);
	if (r < 0)
		return r;
	res->bound++;
	return 0;
}

int orh_devices_apply(int rootfd, const struct orh_target *t, const char *host_root,
		      const struct orh_devnode *nodes, size_t n, struct orh_devices_result *res,
		      struct orh_err *err)
{
	_cleanup_close_ int hostfd = -1;
	_cleanup_close_ int devfd = -1;
	struct parent parent = { .fd = -1 };
	uint64_t devmnt = 0;
	mode_t old_umask;
	int r = 0;

	*res = (struct orh_devices_result){ 0 };
	if (n == 0)
		return 0;
	r = orh_rootfs_devdir(rootfd, &devfd, err);
	if (r < 0)
		return r;
	r = orh_fd_mount_id(devfd, &devmnt);
	if (r < 0)
		return orh_fail_errno(err, -r, "reading the mount of the container's /dev");
	if (host_root && t)
		hostfd = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	old_umask = umask(0);
	for (size_t i = 0; i < n && r == 0; i++) {
		bool made_before = false;

		for (size_t j = 0; j < i && !made_before; j++)
			made_before = !strcmp(nodes[j].path, nodes[i].path);
		r = apply_one(rootfd, devmnt, t, hostfd, &parent, &nodes[i], made_before, res,
			      err);
	}
	umask(old_umask);
	if (parent.fd >= 0)
		close(parent.fd);
	return r;
}
