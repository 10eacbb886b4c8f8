/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The container's mounts: whether one propagates (shared), and bind mounts into its
 * mount namespace, made by a child that enters it (the hook itself never changes its
 * own namespaces).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/apply/mount.h"
#include "orh/apply/target.h"

static int mount_line(const struct orh_target *t, uint64_t mnt, bool *shared, char *point,
		      size_t size, char *fstype, size_t fsize, struct orh_err *err)
{
	_cleanup_free_ char *text = NULL;
	char *line, *save = NULL;
	int r;

	r = orh_target_read(t, "mountinfo", ORH_MOUNTINFO_MAX, &text, err);
	if (r < 0)
		return r;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER" */
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f, *fsave = NULL;
		unsigned long long id = 0;

		f = strtok_r(line, " ", &fsave);
		if (!f || orh_parse_uint(f, UINT64_MAX, &id) < 0 || id != mnt)
			continue;
		for (int i = 0; i < 5 && f; i++) {
			f = strtok_r(NULL, " ", &fsave);
			if (i == 3 && f && point) /* its mount point, octal escapes as the kernel
						   * writes them */
				snprintf(point, size, "%s", f);
		}
		*shared = false;
		while (f && (f = strtok_r(NULL, " ", &fsave)) && strcmp(f, "-") != 0)
			*shared = *shared || orh_startswith(f, "shared:");
		if (fstype && fsize) {
			f = f ? strtok_r(NULL, " ", &fsave) : NULL;
			snprintf(fstype, fsize, "%s", f ? f : "");
		}
		return 0;
	}
	return orh_fail(err, ENOENT, "mount %" PRIu64 " is not in '/proc/%d/mountinfo'", mnt,
			(int)t->pid);
}

int orh_mount_info(const struct orh_target *t, uint64_t mnt, bool *shared, char *point,
		   size_t size, struct orh_err *err)
{
	return mount_line(t, mnt, shared, point, size, NULL, 0, err);
}

int orh_mount_fstype(const struct orh_target *t, uint64_t mnt, bool *shared, char *fstype,
		     size_t size, struct orh_err *err)
{
	return mount_line(t, mnt, shared, NULL, 0, fstype, size, err);
}

int orh_mount_is_shared(const struct orh_target *t, uint64_t mnt, bool *shared,
			struct orh_err *err)
{
	return orh_mount_info(t, mnt, shared, NULL, 0, err);
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
		return orh_fail_errno(err, errno, "pipe");
	child = fork();
	if (child < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return orh_fail_errno(err, errno, "fork");
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
			return orh_fail_errno(err, errno, "waitpid");
	}
	if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return orh_fail(err, EIO, "helper child failed (status 0x%x)", status);
	*child_rc = code;
	return 0;
}

struct bind_args {
	const struct orh_target *t;
	const int *trees;
	const int *targets;
	size_t n;
	size_t done;      /* out: the mounts made */
};

/* Enter the target's mount namespace: through its pidfd (Linux 5.8), or its ns/mnt,
 * opened through the /proc directory the hook holds (a reaped process has none). */
int orh_enter_mntns(const struct orh_target *t)
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

/* Runs in the child: 0, or a negative step marker | errno; every mount in one entry of
 * the namespace. */
static int bind_child(void *p)
{
	struct bind_args *a = p;
	int r = orh_enter_mntns(a->t);

	if (r < 0)
		return -(1 << 16 | -r);
	for (a->done = 0; a->done < a->n; a->done++)
		if (syscall(SYS_move_mount, a->trees[a->done], "", a->targets[a->done], "",
			    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			return -(2 << 16 | errno);
	return 0;
}

int orh_bind_into_container(const struct orh_target *t, int src_fd, int target_fd,
			    bool readonly, struct orh_err *err)
{
	return orh_bind_into_container_attr(t, src_fd, target_fd,
					    readonly ? MOUNT_ATTR_RDONLY : 0, err);
}

int orh_bind_into_container_attr(const struct orh_target *t, int src_fd, int target_fd,
				 uint64_t attr_set, struct orh_err *err)
{
	size_t done = 0;

	return orh_bind_many_into_container(t, &src_fd, &target_fd, 1, attr_set, &done, err);
}

int orh_bind_many_into_container(const struct orh_target *t, const int *src_fds,
				 const int *target_fds, size_t n, uint64_t attr_set, size_t *done,
				 struct orh_err *err)
{
	int trees[ORH_BIND_MAX];
	struct bind_args args;
	size_t made = 0;
	int rc = 0, r = 0;

	*done = 0;
	if (n > ORH_BIND_MAX)
		return orh_fail(err, E2BIG, "more than %d bind mounts at once", ORH_BIND_MAX);
	for (; made < n && r == 0; made++) {
		trees[made] = (int)syscall(SYS_open_tree, src_fds[made], "",
					   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (trees[made] < 0) {
			r = orh_fail_errno(err, errno, "cloning the bind source");
			break;
		}
		if (attr_set) {
			struct mount_attr attr = { .attr_set = attr_set };

			if (syscall(SYS_mount_setattr, trees[made], "", AT_EMPTY_PATH, &attr,
				    sizeof(attr)) < 0)
				r = orh_fail_errno(err, errno, "setting the bind mount's flags%s",
						   attr_set == MOUNT_ATTR_RDONLY ? " (read-only)" : "");
		}
	}
	if (r == 0) {
		args = (struct bind_args){ .t = t, .trees = trees, .targets = target_fds, .n = n };
		/* the child hands back how many it made: args.done, after its result */
		r = orh_run_in_child(bind_child, &args, &args.done, sizeof(args.done), &rc, err);
		if (r < 0)
			orh_err_prefix(err, "bind mount into pid %d", (int)t->pid);
		*done = r < 0 ? 0 : args.done;
	}
	for (size_t i = 0; i < made; i++)
		if (trees[i] >= 0)
			close(trees[i]);
	if (r < 0)
		return r;
	if (rc < 0) {
		int e = (-rc) & 0xffff;

		if (((-rc) >> 16) == 1 && e == ESRCH &&
		    orh_target_alive(t, "its mount namespace was entered", err) < 0)
			return -ESRCH;
		return orh_fail_errno(err, e, "%s",
				      ((-rc) >> 16) == 1 ?
				      "setns into the container's mount namespace" :
				      "move_mount onto the target");
	}
	return 0;
}

int orh_tmpfs_into_container(const struct orh_target *t, int target_fd, const char *size,
			     const char *mode, struct orh_err *err)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	_cleanup_close_ int mnt = -1;
	struct bind_args args;
	int rc = 0, r;

	if (fs < 0)
		return orh_fail_errno(err, errno, "fsopen(tmpfs)");
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", mode, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return orh_fail_errno(err, errno, "configuring a tmpfs (size=%s, mode=%s)", size,
				      mode);
	mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
			   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (mnt < 0)
		return orh_fail_errno(err, errno, "fsmount(tmpfs)");
	args = (struct bind_args){ .t = t, .trees = &mnt, .targets = &target_fd, .n = 1 };
	r = orh_run_in_child(bind_child, &args, &args.done, sizeof(args.done), &rc, err);
	if (r < 0) {
		orh_err_prefix(err, "tmpfs mount into pid %d", (int)t->pid);
		return r;
	}
	if (rc < 0)
		return orh_fail_errno(err, (-rc) & 0xffff, "%s",
				      ((-rc) >> 16) == 1 ?
				      "setns into the container's mount namespace" :
				      "move_mount of the tmpfs onto its directory");
	return 0;
}
