/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The container's process, held for the whole hook, and the check that it is the
 * container the runtime is creating from the bundle.
 *
 * The OCI state names the process by a number, and a number names another process once
 * this one is reaped. So the number is turned into a pidfd once (pidfd_open), /proc/<pid>
 * is opened once after it, and after every step that reads /proc/<pid> or acts on the
 * number (prlimit) the pidfd's process is checked to be still there
 * (pidfd_send_signal(pidfd, 0)). A process keeps its number until it is reaped, and is
 * found through its pidfd until then: so what was read or done by number between
 * pidfd_open and a successful check was its own. A mount namespace is entered through
 * the pidfd itself (setns, mount.c), or through its ns/mnt before Linux 5.8.
 *
 * Which process: see orh_target_judge(), orh_target_open_started() for a process the NRI
 * plugin is named at StartContainer, and docs/security.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "orh/base/rootfs.h"
#include "orh/apply/target.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif


void orh_target_close(struct orh_target *t)
{
	if (t->pidfd >= 0)
		close(t->pidfd);
	if (t->procfd >= 0)
		close(t->procfd);
	t->pidfd = t->procfd = -1;
}

int orh_target_alive(const struct orh_target *t, const char *during, struct orh_err *err)
{
	int e;

	if (t->pidfd >= 0) {
		/* EPERM: it is there, the hook may not signal it (no CAP_KILL) */
		if (syscall(SYS_pidfd_send_signal, t->pidfd, 0, NULL, 0) == 0 || errno == EPERM)
			return 0;
		e = errno;
	} else {
		/* no pidfd (before Linux 5.3): the /proc/<pid> directory opened at the start
		 * holds the process the same way; its entries go once it is reaped */
		if (faccessat(t->procfd, "stat", F_OK, 0) == 0)
			return 0;
		e = errno == ENOENT ? ESRCH : errno;
	}
	if (e == ESRCH)
		return orh_fail(err, ESRCH,
				"pid %d exited while %s; its number may name another process now, "
				"so nothing more is done with it",
				(int)t->pid, during);
	return orh_fail_errno(err, e, "pid %d: checking that it is still there", (int)t->pid);
}

int orh_target_open(pid_t pid, struct orh_target *t, struct orh_err *err)
{
	char path[32];
	int r;

	*t = (struct orh_target){ .pid = pid, .pidfd = -1, .procfd = -1 };
	if (pid <= 0)
		return orh_fail(err, EINVAL, "the OCI state has no pid");
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd < 0 && errno != ENOSYS)
		return orh_fail(err, errno, "pid %d: %s", (int)pid,
				errno == ESRCH ? "no such process" : strerror(errno));
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	t->procfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->procfd < 0) {
		r = orh_fail_errno(err, errno, "opening '%s'", path);
		orh_target_close(t);
		return r;
	}
	/* opened after the pidfd, while its process lived: that process's directory */
	r = orh_target_alive(t, "its /proc directory was opened", err);
	if (r < 0)
		orh_target_close(t);
	return r;
}

int orh_target_read(const struct orh_target *t, const char *file, size_t max, char **out,
		    struct orh_err *err)
{
	_cleanup_close_ int fd = openat(t->procfd, file, O_RDONLY | O_CLOEXEC);
	char what[96];
	int r;

	snprintf(what, sizeof(what), "/proc/%d/%s was read", (int)t->pid, file);
	if (fd < 0) {
		int e = errno;

		/* a reaped process's entries are gone: say so rather than "no such file" */
		r = orh_target_alive(t, what, err);
		if (r < 0)
			return r;
		return orh_fail_errno(err, e, "opening '/proc/%d/%s'", (int)t->pid, file);
	}
	r = orh_read_fd_all(fd, max, out, NULL);
	if (r < 0)
		return orh_fail(err, r, "reading '/proc/%d/%s': %s", (int)t->pid, file,
				r == -EFBIG ? "larger than the limit" : strerror(-r));
	r = orh_target_alive(t, what, err);
	if (r < 0) {
		free(*out);
		*out = NULL;
	}
	return r;
}

/* ---- which process ------------------------------------------------------------ */

static struct orh_fileid fileid_of(const struct stat *st)
{
	return (struct orh_fileid){ .dev = st->st_dev, .ino = st->st_ino };
}

static bool fileid_eq(struct orh_fileid a, struct orh_fileid b)
{
	return a.dev == b.dev && a.ino == b.ino;
}

int orh_target_judge(pid_t pid, const char *rootfs, const struct orh_target_view *v,
		     struct orh_err *err)
{
	if (v->pivoted) {
		/* after pivot_root, chroot, or a mount namespace made with the rootfs as its
		 * root (crun's open_tree(OPEN_TREE_NAMESPACE)): its root is root.path */
		if (fileid_eq(v->root, v->want))
			return 0;
		return orh_fail(err, EPERM,
				"pid %d is not the container of this bundle: its root is not "
				"root.path '%s' (dev %llu inode %llu; root.path: dev %llu "
				"inode %llu)",
				(int)pid, rootfs, (unsigned long long)v->root.dev,
				(unsigned long long)v->root.ino, (unsigned long long)v->want.dev,
				(unsigned long long)v->want.ino);
	}
	/* before pivot_root: the runtime has made its mount namespace and mounted root.path
	 * in it; a host process shares the hook's */
	if (!v->own_mntns)
		return orh_fail(err, EPERM,
				"pid %d is not the container of this bundle: it shares the hook's "
				"mount namespace and root, as a host process does (a container is "
				"created in a mount namespace of its own)",
				(int)pid);
	if (v->seen_errno)
		return orh_fail_errno(err, v->seen_errno,
				      "pid %d is not the container of this bundle: root.path '%s' "
				      "cannot be opened in its mount namespace",
				      (int)pid, rootfs);
	if (!fileid_eq(v->seen, v->want))
		return orh_fail(err, EPERM,
				"pid %d is not the container of this bundle: root.path '%s' is "
				"another directory in its mount namespace",
				(int)pid, rootfs);
	if (!v->mount_point)
		return orh_fail(err, EPERM,
				"pid %d is not the container of this bundle: root.path '%s' is not "
				"a mount point in its mount namespace (the runtime mounts it there "
				"before createRuntime)",
				(int)pid, rootfs);
	return 0;
}

/* Compare two absolute paths, ignoring repeated slashes, "." components and a trailing
 * slash (a root.path joined to its bundle may have them; mountinfo has none). */
static bool same_path(const char *a, const char *b)
{
	for (;;) {
		size_t la, lb;

		while (*a == '/' || (a[0] == '.' && (a[1] == '/' || !a[1]) && a[-1] == '/'))
			a++;
		while (*b == '/' || (b[0] == '.' && (b[1] == '/' || !b[1]) && b[-1] == '/'))
			b++;
		if (!*a || !*b)
			return !*a && !*b;
		la = strcspn(a, "/");
		lb = strcspn(b, "/");
		if (la != lb || strncmp(a, b, la) != 0)
			return false;
		a += la;
		b += lb;
	}
}

bool orh_mountinfo_has_mount_point(char *text, const char *path)
{
	for (char *line = text; line && *line;) {
		char *end = strchr(line, '\n'), *f = line;

		if (end)
			*end = '\0';
		/* the fifth field: mount ID, parent ID, major:minor, root, mount point */
		for (int i = 0; i < 4 && f; i++) {
			f = strchr(f, ' ');
			f = f ? f + 1 : NULL;
		}
		if (f) {
			char *sp = strchr(f, ' ');

			if (sp)
				*sp = '\0';
			orh_unescape_octal(f);
			if (f[0] == '/' && path[0] == '/' && same_path(f, path))
				return true;
		}
		line = end ? end + 1 : NULL;
	}
	return false;
}

/* Is `path` a mount point in /proc/<pid>/mountinfo? For kernels without STATX_MNT_ID
 * (before 5.8). */
static int listed_as_mount_point(const struct orh_target *t, const char *path, bool *out,
				 struct orh_err *err)
{
	_cleanup_free_ char *text = NULL;
	int r = orh_target_read(t, "mountinfo", ORH_MOUNTINFO_MAX, &text, err);

	if (r < 0)
		return r;
	*out = orh_mountinfo_has_mount_point(text, path);
	return 0;
}

/* Is the directory behind fd the root of a mount (its mount is not its parent's)? */
static int is_mount_point(const struct orh_target *t, int fd, const char *path, bool *out,
			  struct orh_err *err)
{
	struct statx self, parent;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &self) < 0)
		return orh_fail_errno(err, errno,
				      "statx of root.path '%s' in pid %d's mount namespace", path,
				      (int)t->pid);
	if (!(self.stx_mask & STATX_MNT_ID))
		return listed_as_mount_point(t, path, out, err);
	if (statx(fd, "..", AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &parent) < 0)
		return orh_fail_errno(err, errno,
				      "statx of the parent of root.path '%s' in pid %d's mount "
				      "namespace",
				      path, (int)t->pid);
	*out = self.stx_mnt_id != parent.stx_mnt_id;
	return 0;
}

/* The process's root, an O_PATH directory fd into *fd, and whether it is the caller's
 * root (*ours). */
static int open_root(const struct orh_target *t, int *fd, struct stat *st, bool *ours,
		     struct orh_err *err)
{
	struct stat self;
	int r;

	*fd = openat(t->procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0 || fstat(*fd, st) < 0) {
		int e = errno;

		r = orh_target_alive(t, "its root was opened", err);
		return r < 0 ? r : orh_fail_errno(err, e, "opening '/proc/%d/root'", (int)t->pid);
	}
	if (stat("/", &self) < 0)
		return orh_fail_errno(err, errno, "stat of '/'");
	*ours = fileid_eq(fileid_of(st), fileid_of(&self));
	return 0;
}

/* Is the process's mount namespace the caller's? */
static int mntns_ours(const struct orh_target *t, bool *ours, struct orh_err *err)
{
	struct stat its, self;

	if (fstatat(t->procfd, "ns/mnt", &its, 0) < 0 || stat("/proc/self/ns/mnt", &self) < 0)
		return orh_fail_errno(err, errno, "stat of the mount namespace of pid %d",
				      (int)t->pid);
	*ours = fileid_eq(fileid_of(&its), fileid_of(&self));
	return 0;
}

int orh_target_open_rootfs(const struct orh_target *t, const char *rootfs, int *out,
			   struct orh_err *err)
{
	struct orh_target_view v = { 0 };
	struct stat st;
	_cleanup_close_ int proot = -1;
	_cleanup_close_ int seen = -1;
	bool same;
	int r;

	if (!rootfs || rootfs[0] != '/')
		return orh_fail(err, EINVAL, "rootfs path '%s' is not absolute",
				rootfs ? rootfs : "");
	/* root.path as the runtime means it: the hook runs in the runtime's namespaces */
	if (stat(rootfs, &st) < 0)
		return orh_fail_errno(err, errno, "stat of root.path '%s'", rootfs);
	v.want = fileid_of(&st);
	r = open_root(t, &proot, &st, &same, err);
	if (r < 0)
		return r;
	v.root = fileid_of(&st);
	v.pivoted = !same;
	if (!v.pivoted) {
		r = mntns_ours(t, &same, err);
		if (r < 0)
			return r;
		v.own_mntns = !same;
	}
	if (!v.pivoted && v.own_mntns) {
		/* the runtime's own path, looked up in the container's mount namespace (its
		 * symlinks too: resolved under its root, not the hook's) */
		struct orh_err lookup = { 0 };

		r = orh_rootfs_dir(proot, rootfs, false, ORH_MOUNT_ANY, &seen, &lookup);
		if (r < 0)
			v.seen_errno = -r;
		else if (fstat(seen, &st) < 0)
			return orh_fail_errno(err, errno,
					      "stat of root.path '%s' in pid %d's mount namespace",
					      rootfs, (int)t->pid);
		else
			v.seen = fileid_of(&st);
		if (seen >= 0 && fileid_eq(v.seen, v.want)) {
			r = is_mount_point(t, seen, rootfs, &v.mount_point, err);
			if (r < 0)
				return r;
		}
	}
	/* what was read is its own */
	r = orh_target_alive(t, "its root and mount namespace were read", err);
	if (r < 0)
		return r;
	r = orh_target_judge(t->pid, rootfs, &v, err);
	if (r < 0)
		return r;
	*out = v.pivoted ? TAKE_FD(proot) : TAKE_FD(seen);
	return 0;
}

/* Does a line of /proc/<pid>/cgroup text name id in its path: as a whole component
 * ("/ID"), or as the runtimes' scope names hold it ("-ID.scope")? */
static bool cgroups_name(const char *text, const char *id)
{
	size_t n = strlen(id);

	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n'), *path = strchr(line, ':');

		path = path ? strchr(path + 1, ':') : NULL;
		if (!end)
			end = line + strlen(line);
		for (const char *p = path ? path + 1 : NULL; p && p + n <= end; p++)
			if ((p[-1] == '/' || p[-1] == '-') && !memcmp(p, id, n) &&
			    (p + n == end || p[n] == '/' || !strncmp(p + n, ".scope", 6)))
				return true;
		line = *end ? end + 1 : NULL;
	}
	return false;
}

int orh_target_open_started(const struct orh_target *t, const char *id, int *out,
			    bool *readonly, struct orh_err *err)
{
	_cleanup_free_ char *cgroups = NULL;
	_cleanup_close_ int proot = -1;
	bool root_ours, mntns_same;
	struct statfs fs;
	struct stat st;
	int r;

	r = open_root(t, &proot, &st, &root_ours, err);
	if (r < 0)
		return r;
	if (fstatfs(proot, &fs) < 0)
		return orh_fail_errno(err, errno, "statfs of '/proc/%d/root'", (int)t->pid);
	r = mntns_ours(t, &mntns_same, err);
	if (r == 0)
		r = orh_target_read(t, "cgroup", 64 * 1024, &cgroups, err);
	if (r < 0)
		return r;
	r = orh_target_alive(t, "its root and mount namespace were read", err);
	if (r < 0)
		return r;
	/* the runtimes name a container's cgroup by its id (containerd's ".../ID" and
	 * "cri-containerd-ID.scope", CRI-O's "crio-ID.scope"): a pid of another namespace's
	 * numbering, or a stale one, names another process */
	if (!id || strlen(id) < 8 || !cgroups_name(cgroups, id))
		return orh_fail(err, EPERM,
				"pid %d is not container %s: none of its cgroups names the container",
				(int)t->pid, id ? id : "?");
	if (root_ours || mntns_same)
		return orh_fail(err, EPERM,
				"pid %d is not a created container: it shares this process's %s, "
				"as a host process does",
				(int)t->pid, root_ours ? "root" : "mount namespace");
	*readonly = (fs.f_flags & ST_RDONLY) != 0;
	*out = TAKE_FD(proot);
	return 0;
}
