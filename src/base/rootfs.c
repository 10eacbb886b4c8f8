/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Path resolution inside a container's root filesystem (mount.c binds into its mount
 * namespace). Paths are never resolved to a string: every step is an fd.
 *
 * A resolution may be tied to one mount (its mount id): the directory it hands back must
 * be on that mount, and a missing directory is made only inside a directory on that
 * mount. Only the directory where something is then created counts, not the mounts a
 * path passes through: nothing is written on the way.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/base/rootfs.h"

#define MAX_SYMLINKS 40
#define MAX_DEPTH 128

static bool fallback_used;

bool orh_rootfs_fallback_active(void)
{
	return fallback_used;
}

int orh_rootfs_open(const char *path, int *out, struct orh_err *err)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return orh_fail_errno(err, errno, "opening rootfs '%s'", path);
	*out = fd;
	return 0;
}

static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
	struct open_how how = { .flags = flags, .resolve = resolve };

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* ---- mounts ------------------------------------------------------------------- */

#define FDINFO_MAX 1024

/* The mount id of fd from /proc/self/fdinfo (Linux 3.15), for kernels whose statx has
 * no STATX_MNT_ID (before 5.8), and with the walk, which stands for such kernels. */
static int fdinfo_mount_id(int fd, uint64_t *id)
{
	char path[64], buf[FDINFO_MAX];
	unsigned long long v = 0;
	const char *p;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	n = orh_read_file_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	p = strncmp(buf, "mnt_id:", 7) == 0 ? buf : strstr(buf, "\nmnt_id:");
	if (!p)
		return -ENOTSUP;
	p = strchr(p, ':') + 1;
	while (*p == ' ' || *p == '\t')
		p++;
	if (orh_parse_uint(strndupa(p, strcspn(p, "\n")), UINT64_MAX, &v) < 0)
		return -EINVAL;
	*id = v;
	return 0;
}

int orh_fd_mount_id(int fd, uint64_t *id)
{
	struct statx stx;

	if (!orh_rootfs_fallback_active() &&
	    statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) == 0 &&
	    (stx.stx_mask & STATX_MNT_ID)) {
		*id = stx.stx_mnt_id;
		return 0;
	}
	return fdinfo_mount_id(fd, id);
}

/* 0 when fd is on mount mnt (or mnt is ORH_MOUNT_ANY); else -EXDEV with a message. */
static int check_mount(int fd, uint64_t mnt, const char *path, struct orh_err *err)
{
	uint64_t id = 0;
	int r;

	if (mnt == ORH_MOUNT_ANY)
		return 0;
	r = orh_fd_mount_id(fd, &id);
	if (r < 0)
		return orh_fail_errno(err, -r, "reading the mount of '/%s'", path);
	if (id != mnt)
		return orh_fail(err, EXDEV, "'/%s' is on another mount (a volume?)", path);
	return 0;
}

/* ---- fallback: one component at a time ---------------------------------------- */

struct walk {
	int fds[MAX_DEPTH];  /* fds[0] = root (borrowed), fds[1..n-1] owned */
	size_t n;
};

static void walk_free(struct walk *w)
{
	while (w->n > 1)
		close(w->fds[--w->n]);
}

/* Take the next component of `rest` into comp and drop it from `rest`. 1: comp holds
 * one; 0: nothing is left. */
static int walk_next(char *rest, const char *path, char comp[NAME_MAX + 1], struct orh_err *err)
{
	char *p = rest, *slash;

	while (*p == '/')
		p++;
	if (*p == '\0')
		return 0;
	slash = strchr(p, '/');
	if ((slash ? (size_t)(slash - p) : strlen(p)) > NAME_MAX)
		return orh_fail(err, ENAMETOOLONG, "resolving '%s': name too long", path);
	snprintf(comp, NAME_MAX + 1, "%.*s", (int)(slash ? slash - p : (int)strlen(p)), p);
	memmove(rest, slash ? slash : p + strlen(p), strlen(slash ? slash : "") + 1);
	return 1;
}

/* Open comp in the directory on top of the stack without following it, into *out. With
 * create, a missing comp is made first, only in a directory on mount mnt; with probe, it
 * is not made: 1 says it would be made in that directory. */
static int walk_open(const struct walk *w, const char *comp, const char *path, bool create,
		     bool probe, uint64_t mnt, int *out, struct orh_err *err)
{
	int dirfd = w->fds[w->n - 1];
	int fd = -1, r = 0;

	for (;;) {
		fd = openat(dirfd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT || !create)
			break;
		r = check_mount(dirfd, mnt, path, err);
		if (r == -EXDEV)
			r = orh_fail(err, EXDEV,
				     "resolving '/%s': '%s' is missing in a directory on "
				     "another mount (a volume?); not creating it there",
				     path, comp);
		if (r < 0 || probe)
			return r < 0 ? r : 1;
		if (mkdirat(dirfd, comp, 0755) < 0 && errno != EEXIST)
			return orh_fail_errno(err, errno, "creating '%s' in '%s'", comp, path);
	}
	if (fd < 0)
		return orh_fail_errno(err, errno, "resolving '%s' at '%s'", path, comp);
	*out = fd;
	return 0;
}

/* fd is the symlink comp; it is closed here. Its target goes in front of what is left of
 * the path (*rest), to be resolved against the stack; an absolute target empties the
 * stack down to the root. */
static int walk_link(struct walk *w, int fd, const char *comp, const char *path,
		     unsigned *links, char **rest, struct orh_err *err)
{
	char target[PATH_MAX];
	ssize_t len = readlinkat(fd, "", target, sizeof(target) - 1);
	char *joined;

	close(fd);
	if (len < 0)
		return orh_fail_errno(err, errno, "reading link '%s' in '%s'", comp, path);
	target[len] = '\0';
	if (++*links > MAX_SYMLINKS)
		return orh_fail(err, ELOOP, "resolving '%s': too many symlinks", path);
	if (target[0] == '/') {
		/* absolute: restart from the container's root */
		walk_free(w);
	}
	joined = orh_xasprintf("%s/%s", target, *rest);
	free(*rest);
	*rest = joined;
	return 0;
}

/* Resolve `path` from the root using a stack of directory fds; symlinks are read and
 * resolved against the stack, never followed by the kernel. With mnt, a directory is made
 * only in a directory on that mount, and the result must be on it. With probe (and
 * create), nothing is made: the walk stops at the first missing directory, and the result
 * is the one it would be made in. */
static int walk_resolve(int rootfd, const char *path, bool create, bool probe, uint64_t mnt,
			int *out, struct orh_err *err)
{
	struct walk w = { .fds = { rootfd }, .n = 1 };
	_cleanup_free_ char *rest = orh_xstrdup(path);
	unsigned links = 0;
	int r = 0;

	for (;;) {
		char comp[NAME_MAX + 1];
		struct stat st;
		int fd = -1;

		r = walk_next(rest, path, comp, err);
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			if (w.n > 1)
				close(w.fds[--w.n]);
			continue;
		}
		if (w.n >= MAX_DEPTH) {
			r = orh_fail(err, ELOOP, "resolving '%s': too deep", path);
			goto out;
		}
		r = walk_open(&w, comp, path, create, probe, mnt, &fd, err);
		if (r < 0)
			goto out;
		if (r > 0) /* probe: it would be made here */
			break;
		if (fstat(fd, &st) < 0) {
			r = orh_fail_errno(err, errno, "stat of '%s' in '%s'", comp, path);
			close(fd);
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			r = walk_link(&w, fd, comp, path, &links, &rest, err);
			if (r < 0)
				goto out;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			close(fd);
			r = orh_fail(err, ENOTDIR, "resolving '%s': '%s' is not a directory", path,
				     comp);
			goto out;
		}
		w.fds[w.n++] = fd;
	}
	r = check_mount(w.fds[w.n - 1], mnt, path, err);
	if (r < 0)
		goto out;
	if (w.n == 1) {
		r = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (r < 0) {
			r = orh_fail_errno(err, errno, "reopening the root");
			goto out;
		}
		*out = r;
		r = 0;
	} else {
		*out = w.fds[--w.n];
	}
out:
	walk_free(&w);
	return r;
}

/* ---- openat2 ------------------------------------------------------------------ */

/* How often openat2 is asked again after EAGAIN: a ".." (a relative link's) was resolved
 * while something was renamed or mounted anywhere on the system, and it asks to try
 * again. Past that the caller sees -EAGAIN (or takes the walk, where it has one). */
#define OPENAT2_EAGAIN_TRIES 64

/* openat2 of path inside the root, no magic links, asked again after EAGAIN: the fd, or
 * -errno. */
static int in_root_openat2(int rootfd, const char *path, int flags)
{
	int fd = sys_openat2(rootfd, path, flags | O_CLOEXEC,
			     RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);

	for (int i = 0; fd < 0 && errno == EAGAIN && i < OPENAT2_EAGAIN_TRIES; i++)
		fd = sys_openat2(rootfd, path, flags | O_CLOEXEC,
				 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
	return fd < 0 ? -errno : fd;
}

static int in_root_open_dir(int rootfd, const char *path, int *out)
{
	int fd = in_root_openat2(rootfd, path, O_PATH | O_DIRECTORY);

	if (fd < 0)
		return fd;
	*out = fd;
	return 0;
}

/* path (no leading '/') as one directory of the root, by openat2, tied to the mount mnt:
 * 0 with *out; 1 where the walk must take over (openat2 missing, still racing after its
 * tries, or, where missing is true, a component missing); else -errno with err. */
static int open_dir_tied(int rootfd, const char *path, bool missing, uint64_t mnt, int *out,
			 struct orh_err *err)
{
	int r;

	if (fallback_used)
		return 1;
	r = in_root_open_dir(rootfd, *path ? path : ".", out);
	if (r == 0) {
		r = check_mount(*out, mnt, path, err);
		if (r < 0)
			close(TAKE_FD(*out));
		return r;
	}
	if (r == -ENOSYS)
		fallback_used = true;
	/* EAGAIN still: the walk does not depend on those counts; a missing component: the
	 * walk resolves every component itself, symlinks included, inside the root */
	if (r == -ENOSYS || r == -EAGAIN || (r == -ENOENT && missing))
		return 1;
	return orh_fail_errno(err, r, "resolving '/%s' in the container", path);
}

int orh_rootfs_dir(int rootfd, const char *path, bool create, uint64_t mnt, int *out,
		   struct orh_err *err)
{
	int r;

	while (*path == '/')
		path++;
	r = open_dir_tied(rootfd, path, create, mnt, out, err);
	return r <= 0 ? r : walk_resolve(rootfd, path, create, false, mnt, out, err);
}

int orh_rootfs_dir_probe(int rootfd, const char *path, uint64_t mnt, int *out,
			 struct orh_err *err)
{
	int r;

	while (*path == '/')
		path++;
	r = open_dir_tied(rootfd, path, true, mnt, out, err);
	return r <= 0 ? r : walk_resolve(rootfd, path, true, true, mnt, out, err);
}

int orh_rootfs_parent(int rootfd, const char *path, bool create, uint64_t mnt, int *dirfd,
		      char name[NAME_MAX + 1], struct orh_err *err)
{
	char dir[PATH_MAX];
	char *slash;

	if (orh_strlcpy(dir, path, sizeof(dir)) < 0)
		return orh_fail(err, ENAMETOOLONG, "path '%s' too long", path);
	while ((slash = strrchr(dir, '/')) && slash[1] == '\0' && slash != dir)
		*slash = '\0';
	slash = strrchr(dir, '/');
	if (orh_strlcpy(name, slash ? slash + 1 : dir, NAME_MAX + 1) < 0 || name[0] == '\0' ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return orh_fail(err, EINVAL, "path '%s' has no usable final name", path);
	if (slash)
		slash[1] = '\0';
	else
		dir[0] = '\0';
	return orh_rootfs_dir(rootfd, dir, create, mnt, dirfd, err);
}

int orh_rootfs_devdir(int rootfd, int *out, struct orh_err *err)
{
	int fd = openat(rootfd, "dev", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT) {
		if (mkdirat(rootfd, "dev", 0755) < 0 && errno != EEXIST)
			return orh_fail_errno(err, errno, "creating /dev in the container");
		fd = openat(rootfd, "dev", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR))
		return orh_fail(err, errno, "the container's /dev is not a directory (a symlink?); "
					    "refusing to create device nodes");
	if (fd < 0)
		return orh_fail_errno(err, errno, "opening the container's /dev");
	*out = fd;
	return 0;
}

/* ---- where a path leads ---------------------------------------------------------- */

/* The host path of an fd, from /proc/self/fd. */
static int fd_path(int fd, char *out, size_t size)
{
	char proc[64];
	ssize_t n;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, out, size);
	if (n < 0)
		return -errno;
	if ((size_t)n >= size)
		return -ENAMETOOLONG;
	out[n] = '\0';
	return 0;
}

/* Does path lead where it says: no symlink on its way, as far as it exists? Then it
 * resolves to itself (lexically cleaned of "." and repeated slashes) and no more need be
 * asked: one system call, where most destinations are plain directories. */
static bool plain_path(int rootfd, const char *path, char *out, size_t size)
{
	int fd = sys_openat2(rootfd, path, O_PATH | O_CLOEXEC,
			     RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	size_t n = 0;

	if (fd >= 0)
		close(fd);
	else if (errno != ENOENT)
		return false;
	for (const char *p = path; *p;) {
		size_t len;

		while (*p == '/')
			p++;
		len = strcspn(p, "/");
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return false;
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (n + 1 + len + 1 > size)
				return false;
			out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = '\0';
	return true;
}

int orh_rootfs_resolve(int rootfd, const char *path, char *out, size_t size)
{
	char root[PATH_MAX], head[PATH_MAX], at[PATH_MAX];
	const char *rest = "";
	size_t rlen;
	int fd = -1, r;

	if (fallback_used || orh_strlcpy(head, path, sizeof(head)) < 0)
		return -ENOSYS;
	if (plain_path(rootfd, path, out, size))
		return 0;
	r = fd_path(rootfd, root, sizeof(root));
	if (r < 0)
		return r;
	rlen = strcmp(root, "/") ? strlen(root) : 0;
	for (;;) {
		char *slash;

		/* (after EAGAIN asked again; past that, -EAGAIN: no walk to fall back on) */
		fd = in_root_openat2(rootfd, *head ? head : "/", O_PATH);
		if (fd != -ENOENT)
			break;
		/* missing: the runtime makes it, with what is above it resolved */
		slash = strrchr(head, '/');
		if (!slash)
			return -ENOENT;
		rest = path + (slash - head);
		*slash = '\0';
	}
	if (fd < 0)
		return fd;
	if (*rest) {
		/* the first "missing" name is there but leads nowhere (a dangling symlink): the
		 * runtime would follow it, and make what it names; that is not told here */
		char name[NAME_MAX + 1];
		const char *c = rest + strspn(rest, "/");
		size_t n = strcspn(c, "/");
		struct stat st;

		if (n > 0 && n <= NAME_MAX) {
			memcpy(name, c, n);
			name[n] = '\0';
			if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
				close(fd);
				return -ELOOP;
			}
		}
	}
	r = fd_path(fd, at, sizeof(at));
	close(fd);
	if (r < 0)
		return r;
	if (strncmp(at, root, rlen) != 0 || (at[rlen] != '/' && at[rlen] != '\0'))
		return -EXDEV; /* not under the root as this process sees it */
	/* the missing rest is made as it is written: a ".." in it is not resolved here */
	if (strstr(rest, "/..") || snprintf(out, size, "%s%s", at[rlen] ? at + rlen : "/",
					     rest) >= (int)size)
		return -EINVAL;
	if (out[0] == '/' && out[1] == '/')
		memmove(out, out + 1, strlen(out));
	return 0;
}

/* ---- files to read ---------------------------------------------------------------- */

/* The component walk's open of a file: the parent resolved in the root, the last name
 * opened without following it; a symlink there starts again from its target. */
static int walk_open_path(int rootfd, const char *path, int *out)
{
	_cleanup_free_ char *cur = orh_xstrdup(path);

	for (unsigned links = 0; links <= MAX_SYMLINKS; links++) {
		char name[NAME_MAX + 1], target[PATH_MAX];
		struct orh_err err = { 0 };
		_cleanup_close_ int dirfd = -1;
		struct stat st;
		const char *slash;
		ssize_t len;
		int fd;

		if (orh_rootfs_parent(rootfd, cur, false, ORH_MOUNT_ANY, &dirfd, name, &err) < 0)
			return -err.code;
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		if (fstat(fd, &st) < 0 || !S_ISLNK(st.st_mode)) {
			*out = fd;
			return 0;
		}
		len = readlinkat(fd, "", target, sizeof(target) - 1);
		close(fd);
		if (len <= 0)
			return len < 0 ? -errno : -ENOENT;
		target[len] = '\0';
		slash = strrchr(cur, '/');
		if (target[0] == '/' || !slash) {
			free(cur);
			cur = orh_xstrdup(target);
		} else {
			char *next = orh_xasprintf("%.*s/%s", (int)(slash - cur), cur, target);

			free(cur);
			cur = next;
		}
	}
	return -ELOOP;
}

int orh_rootfs_open_file(int rootfd, const char *path, int *out, struct stat *st)
{
	char proc[64];
	_cleanup_close_ int pfd = -1;
	struct stat again;
	int fd, r = 0;

	while (*path == '/')
		path++;
	if (!fallback_used) {
		pfd = in_root_openat2(rootfd, path, O_PATH);
		if (pfd == -ENOSYS)
			fallback_used = true;
		else if (pfd < 0)
			return pfd;
	}
	if (pfd < 0) {
		r = walk_open_path(rootfd, path, &pfd);
		if (r < 0)
			return r;
	}
	if (fstat(pfd, st) < 0)
		return -errno;
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	/* the same inode, now for reading: no name is looked up again */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &again) < 0 || again.st_ino != st->st_ino || again.st_dev != st->st_dev) {
		close(fd);
		return -ESTALE;
	}
	*out = fd;
	return 0;
}

int orh_rootfs_readlink(int rootfd, const char *path, char *out, size_t size)
{
	char name[NAME_MAX + 1];
	struct orh_err err = { 0 };
	_cleanup_close_ int dirfd = -1;
	ssize_t len;

	if (orh_rootfs_parent(rootfd, path, false, ORH_MOUNT_ANY, &dirfd, name, &err) < 0)
		return -err.code;
	len = readlinkat(dirfd, name, out, size);
	if (len < 0)
		return -errno;
	if ((size_t)len >= size)
		return -ENAMETOOLONG;
	out[len] = '\0';
	return (int)len;
}
