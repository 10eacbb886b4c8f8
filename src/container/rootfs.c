/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Path resolution inside a container's root filesystem, and bind mounts into its mount
 * namespace. Paths are never resolved to a string: every step is an fd.
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

#include "orh/apply.h"

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
		return orh_fail(err, errno, "opening rootfs '%s': %m", path);
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
#define MOUNTINFO_MAX (4 * 1024 * 1024)

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
		return orh_fail(err, -r, "reading the mount of '/%s': %s", path, strerror(-r));
	if (id != mnt)
		return orh_fail(err, EXDEV, "'/%s' is on another mount (a volume?)", path);
	return 0;
}

int orh_mount_is_shared(const struct orh_target *t, uint64_t mnt, bool *shared,
			struct orh_err *err)
{
	_cleanup_free_ char *text = NULL;
	char *line, *save = NULL;
	int r;

	r = orh_target_read(t, "mountinfo", MOUNTINFO_MAX, &text, err);
	if (r < 0)
		return r;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER" */
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f, *fsave = NULL;
		unsigned long long id = 0;

		f = strtok_r(line, " ", &fsave);
		if (!f || orh_parse_uint(f, UINT64_MAX, &id) < 0 || id != mnt)
			continue;
		for (int i = 0; i < 5 && f; i++)
			f = strtok_r(NULL, " ", &fsave);
		*shared = false;
		while (f && (f = strtok_r(NULL, " ", &fsave)) && strcmp(f, "-") != 0)
			*shared = *shared || orh_startswith(f, "shared:");
		return 0;
	}
	return orh_fail(err, ENOENT, "mount %" PRIu64 " is not in '/proc/%d/mountinfo'", mnt,
			(int)t->pid);
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

/* Resolve `path` from the root using a stack of directory fds; symlinks are read and
 * resolved against the stack, never followed by the kernel. With mnt, a directory is made
 * only in a directory on that mount, and the result must be on it. */
static int walk_resolve(int rootfd, const char *path, bool create, uint64_t mnt, int *out,
			struct orh_err *err)
{
	struct walk w = { .fds = { rootfd }, .n = 1 };
	_cleanup_free_ char *rest = orh_xstrdup(path);
	unsigned links = 0;
	int r = 0;

	for (;;) {
		char *p = rest, *slash, comp[NAME_MAX + 1];
		struct stat st;
		int fd;

		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		slash = strchr(p, '/');
		if ((slash ? (size_t)(slash - p) : strlen(p)) > NAME_MAX) {
			r = orh_fail(err, ENAMETOOLONG, "resolving '%s': name too long", path);
			goto out;
		}
		snprintf(comp, sizeof(comp), "%.*s", (int)(slash ? slash - p : (int)strlen(p)), p);
		memmove(rest, slash ? slash : p + strlen(p), strlen(slash ? slash : "") + 1);

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
	again:
		fd = openat(w.fds[w.n - 1], comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && create) {
			r = check_mount(w.fds[w.n - 1], mnt, path, err);
			if (r == -EXDEV)
				r = orh_fail(err, EXDEV,
					     "resolving '/%s': '%s' is missing in a directory on "
					     "another mount (a volume?); not creating it there",
					     path, comp);
			if (r < 0)
				goto out;
			if (mkdirat(w.fds[w.n - 1], comp, 0755) < 0 && errno != EEXIST) {
				r = orh_fail(err, errno, "creating '%s' in '%s': %m", comp, path);
				goto out;
			}
			goto again;
		}
		if (fd < 0) {
			r = orh_fail(err, errno, "resolving '%s' at '%s': %m", path, comp);
			goto out;
		}
		if (fstat(fd, &st) < 0) {
			r = orh_fail(err, errno, "stat of '%s' in '%s': %m", comp, path);
			close(fd);
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t len = readlinkat(fd, "", target, sizeof(target) - 1);
			char *joined;

			close(fd);
			if (len < 0) {
				r = orh_fail(err, errno, "reading link '%s' in '%s': %m", comp, path);
				goto out;
			}
			target[len] = '\0';
			if (++links > MAX_SYMLINKS) {
				r = orh_fail(err, ELOOP, "resolving '%s': too many symlinks", path);
				goto out;
			}
			if (target[0] == '/') {
				/* absolute: restart from the container's root */
				walk_free(&w);
			}
			joined = orh_xasprintf("%s/%s", target, rest);
			free(rest);
			rest = joined;
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
			r = orh_fail(err, errno, "reopening the root: %m");
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

static int in_root_open_dir(int rootfd, const char *path, int *out)
{
	int fd = sys_openat2(rootfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC,
			     RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);

	if (fd < 0)
		return -errno;
	*out = fd;
	return 0;
}

int orh_rootfs_dir(int rootfd, const char *path, bool create, uint64_t mnt, int *out,
		   struct orh_err *err)
{
	int r;

	while (*path == '/')
		path++;
	if (!fallback_used) {
		r = in_root_open_dir(rootfd, *path ? path : ".", out);
		/* EAGAIN: a ".." was resolved while a rename or a mount changed anywhere on
		 * the system; openat2 asks to try again */
		for (int i = 0; r == -EAGAIN && i < 8; i++)
			r = in_root_open_dir(rootfd, *path ? path : ".", out);
		if (r == 0) {
			r = check_mount(*out, mnt, path, err);
			if (r < 0)
				close(TAKE_FD(*out));
			return r;
		}
		if (r == -ENOSYS) {
			fallback_used = true;
		} else if (r == -EAGAIN) {
			/* still racing: the walk below does not depend on those counts */
		} else if (r != -ENOENT || !create) {
			return orh_fail(err, r, "resolving '/%s' in the container: %s", path,
					strerror(-r));
		}
		/* Something is missing: create it with the walk below, which resolves
		 * every component itself, symlinks included, inside the root. */
	}
	return walk_resolve(rootfd, path, create, mnt, out, err);
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
			return orh_fail(err, errno, "creating /dev in the container: %m");
		fd = openat(rootfd, "dev", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR))
		return orh_fail(err, errno, "the container's /dev is not a directory (a symlink?); "
					    "refusing to create device nodes");
	if (fd < 0)
		return orh_fail(err, errno, "opening the container's /dev: %m");
	*out = fd;
	return 0;
}

/* ---- bind mounts into the container's mount namespace ------------------------- */

static ssize_t read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static bool write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

int orh_run_in_child(int (*fn)(void *), void *arg, void *out, size_t out_size,
		     int *child_rc, struct orh_err *err)
{
	int pipefd[2] = { -1, -1 };
	int status = 0, code = 0;
	bool ok;
	pid_t child;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return orh_fail(err, errno, "pipe: %m");
	child = fork();
	if (child < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return orh_fail(err, errno, "fork: %m");
	}
	if (child == 0) {
		int rc;

		close(pipefd[0]);
		rc = fn(arg);
		if (!write_full(pipefd[1], &rc, sizeof(rc)) ||
		    (out_size && !write_full(pipefd[1], out, out_size)))
			_exit(2);
		_exit(0);
	}
	close(pipefd[1]);
	ok = read_full(pipefd[0], &code, sizeof(code)) == (ssize_t)sizeof(code) &&
	     (!out_size || read_full(pipefd[0], out, out_size) == (ssize_t)out_size);
	close(pipefd[0]);
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR)
			return orh_fail(err, errno, "waitpid: %m");
	}
	if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return orh_fail(err, EIO, "helper child failed (status 0x%x)", status);
	*child_rc = code;
	return 0;
}

struct bind_args {
	const struct orh_target *t;
	int tree;
	int target;
};

/* Enter the target's mount namespace: through its pidfd (Linux 5.8), or its ns/mnt,
 * opened through the /proc directory the hook holds (a reaped process has none). */
static int enter_mntns(const struct orh_target *t)
{
	int fd, r;

	if (t->pidfd >= 0 && setns(t->pidfd, CLONE_NEWNS) == 0)
		return 0;
	if (t->pidfd >= 0 && errno != EINVAL)
		return -errno;
	fd = openat(t->procfd, "ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = setns(fd, CLONE_NEWNS) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* Runs in the child: 0, or a negative step marker | errno. */
static int bind_child(void *p)
{
	struct bind_args *a = p;
	int r = enter_mntns(a->t);

	if (r < 0)
		return -(1 << 16 | -r);
	if (syscall(SYS_move_mount, a->tree, "", a->target, "",
		    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return -(2 << 16 | errno);
	return 0;
}

int orh_bind_into_container(const struct orh_target *t, int src_fd, int target_fd,
			    bool readonly, struct orh_err *err)
{
	_cleanup_close_ int tree = -1;
	struct bind_args args;
	int rc = 0, r;

	tree = (int)syscall(SYS_open_tree, src_fd, "",
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return orh_fail(err, errno, "cloning the bind source: %m");
	if (readonly) {
		struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };

		if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr,
			    sizeof(attr)) < 0)
			return orh_fail(err, errno, "making the bind mount read-only: %m");
	}
	args = (struct bind_args){ .t = t, .tree = tree, .target = target_fd };
	r = orh_run_in_child(bind_child, &args, NULL, 0, &rc, err);
	if (r < 0)
		return orh_err_prefix(err, "bind mount into pid %d", (int)t->pid);
	if (rc < 0) {
		int e = (-rc) & 0xffff;

		if (((-rc) >> 16) == 1 && e == ESRCH &&
		    orh_target_alive(t, "its mount namespace was entered", err) < 0)
			return -ESRCH;
		return orh_fail(err, e, "%s: %s",
				((-rc) >> 16) == 1 ? "setns into the container's mount namespace"
						   : "move_mount onto the target",
				strerror(e));
	}
	return 0;
}
