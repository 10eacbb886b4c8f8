/* SPDX-License-Identifier: Apache-2.0 */
/*
 * configure and install take turns on a root (lock.h). The lock is a file only the
 * process's own user may open: .oci-rdma-hook-configure.lock in the root's /run, where the
 * root has one (a host; the installer's host root, whose /run is the host's), else, a
 * scratch root, .oci-rdma-hook-configure-DEV-INO.lock in this process's own /run, named
 * after the root directory's device and inode. Nobody else can open it, so nobody else can
 * hold it (a lock on the root directory itself, which anyone may open and lock, let any
 * user stall every run). The directory must be the user's or root's and writable by no one
 * else; the file a regular file of the user's, mode 0600, opened O_NOFOLLOW.
 *
 * A run tries the lock every LOCK_POLL_MS for ORH_CONFIGURE_LOCK_WAIT_MS at most, then names
 * the pid that holds it (from /proc/locks, else the pid the holder wrote into the file) and
 * gives up. The holder removes the file before it lets go, so nothing is left behind; a run
 * that then gets the lock of a file no longer at that name opens the name again.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "lock.h"
#include "orh/base/rootfs.h"

#define LOCK_NAME ".oci-rdma-hook-configure"
#define LOCK_POLL_MS 50
/* /proc/locks: a line a lock, short; lines read at most */
#define LOCKS_LINE_MAX 256
#define LOCKS_LINES_MAX 100000

/* An error that lets a run that writes nothing go on without the lock. */
static bool not_ours_to_make(int code)
{
	return code == EACCES || code == EPERM || code == EROFS;
}

/* The directory of the lock (lk->dirfd, O_PATH, checked), the file's name, and its path
 * for messages. */
static int lock_dir(int rootfd, const char *dir, struct orh_cfg_lock *lk, char **path,
		    struct orh_err *err)
{
	struct orh_err ignored = { 0 };
	struct stat st;

	if (orh_rootfs_dir(rootfd, "/run", false, ORH_MOUNT_ANY, &lk->dirfd, &ignored) == 0) {
		snprintf(lk->name, sizeof(lk->name), LOCK_NAME ".lock");
		*path = orh_xasprintf("%s/run/%s", dir, lk->name);
	} else {
		if (fstat(rootfd, &st) < 0)
			return orh_fail_errno(err, errno, "stat of '%s'", *dir ? dir : "/");
		snprintf(lk->name, sizeof(lk->name), LOCK_NAME "-%" PRIx64 "-%" PRIu64 ".lock",
			 (uint64_t)st.st_dev, (uint64_t)st.st_ino);
		*path = orh_xasprintf("/run/%s", lk->name);
		lk->dirfd = open("/run", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (lk->dirfd < 0)
			return orh_fail_errno(err, errno, "opening '/run' for '%s'", *path);
	}
	if (fstat(lk->dirfd, &st) < 0)
		return orh_fail_errno(err, errno, "stat of the directory of '%s'", *path);
	/* writable by others only with the sticky bit (a /run of mode 1777, as /tmp): there
	 * no one else can remove or rename the lock file; one of another user at its name is
	 * removed by root (open_lock) */
	lk->sticky = (st.st_mode & (S_IWGRP | S_IWOTH)) && (st.st_mode & S_ISVTX);
	if ((st.st_uid != geteuid() && st.st_uid != 0) ||
	    ((st.st_mode & (S_IWGRP | S_IWOTH)) && !lk->sticky))
		return orh_fail(err, EPERM, "the directory of '%s' is not uid %u's or root's "
				"alone, nor sticky (owner %u, mode %04o): not locking there", *path,
				(unsigned)geteuid(), (unsigned)st.st_uid, st.st_mode & 07777);
	return 0;
}

/* The pid that holds the flock of what is at the lock's name: from /proc/locks (pids as
 * this process's namespace sees them), else the one the holder wrote there; 0 when neither
 * tells. */
static long lock_holder(const struct orh_cfg_lock *lk)
{
	_cleanup_close_ int fd = openat(lk->dirfd, lk->name, O_RDONLY | O_NOFOLLOW | O_NOCTTY |
					O_NONBLOCK | O_CLOEXEC);
	char line[LOCKS_LINE_MAX], buf[32];
	unsigned long long v = 0;
	struct stat st;
	long pid = 0;
	ssize_t n;
	FILE *f;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	f = fopen("/proc/locks", "re");
	for (int i = 0; f && !pid && i < LOCKS_LINES_MAX && fgets(line, sizeof(line), f); i++) {
		char kind[16] = "";
		unsigned maj = 0, min = 0;
		unsigned long long ino = 0;
		long p = 0;

		/* "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; a waiter's has "->" */
		if (sscanf(line, "%*[^:]: %15s %*s %*s %ld %x:%x:%llu", kind, &p, &maj, &min,
			   &ino) == 5 && !strcmp(kind, "FLOCK") && p > 0 &&
		    maj == major(st.st_dev) && min == minor(st.st_dev) && ino == st.st_ino)
			pid = p;
	}
	if (f)
		fclose(f);
	if (pid)
		return pid;
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return orh_parse_uint(buf, INT32_MAX, &v) < 0 ? 0 : (long)v;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The file at the lock's name, opened (made where missing) and checked, into lk->fd. */
static int open_lock(struct orh_cfg_lock *lk, const char *path, struct stat *st,
		     struct orh_err *err)
{
	/* in a sticky directory, another user's file at the name is removed, a few times at
	 * most (root may; what another user makes there in between is refused below) */
	for (int tries = 0;; tries++) {
		lk->fd = openat(lk->dirfd, lk->name,
				O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
				0600);
		if (lk->fd < 0 && !(lk->sticky && (errno == EACCES || errno == ELOOP) && tries < 3))
			return orh_fail_errno(err, errno, "opening '%s'", path);
		if (lk->fd >= 0 && fstat(lk->fd, st) < 0)
			return orh_fail_errno(err, errno, "stat of '%s'", path);
		if (lk->fd >= 0 && S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
		    !(st->st_mode & 077))
			return 0;
		if (!lk->sticky || geteuid() != 0 || tries >= 3)
			break;
		/* another user's entry (its owner alone could remove it, and root) */
		if (lk->fd >= 0)
			close(TAKE_FD(lk->fd));
		if (unlinkat(lk->dirfd, lk->name, 0) < 0 && errno != ENOENT)
			return orh_fail_errno(err, errno, "removing '%s', another user's", path);
	}
	if (lk->fd < 0)
		return orh_fail(err, EPERM, "'%s' is not a regular file of uid %u: not locking "
				"with it", path, (unsigned)geteuid());
	return orh_fail(err, EPERM, "'%s' is not a regular file of uid %u with mode 0600 "
			"(owner %u, mode %04o): not locking with it", path,
			(unsigned)geteuid(), (unsigned)st->st_uid, st->st_mode & 07777);
}

/* lk->fd's flock, before deadline: 1 when taken, 0 when the file was no longer at the
 * lock's name by then (its holder removed it), or -errno. */
static int take(struct orh_cfg_lock *lk, const struct stat *st, long long deadline,
		const char *dir, const char *path, struct orh_err *err)
{
	const struct timespec poll = { .tv_nsec = LOCK_POLL_MS * 1000000L };
	struct stat at;
	long holder;

	while (flock(lk->fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return orh_fail_errno(err, errno, "locking '%s'", path);
		if (now_ms() >= deadline) {
			holder = lock_holder(lk);
			if (holder > 0)
				return orh_fail(err, EWOULDBLOCK, "another configure or install of "
						"'%s' holds '%s': pid %ld; gave up after %d s",
						*dir ? dir : "/", path, holder,
						ORH_CONFIGURE_LOCK_WAIT_MS / 1000);
			return orh_fail(err, EWOULDBLOCK, "another process holds '%s' (its pid "
					"unknown); gave up on '%s' after %d s", path,
					*dir ? dir : "/", ORH_CONFIGURE_LOCK_WAIT_MS / 1000);
		}
		nanosleep(&poll, NULL);
	}
	return fstatat(lk->dirfd, lk->name, &at, AT_SYMLINK_NOFOLLOW) == 0 &&
	       at.st_dev == st->st_dev && at.st_ino == st->st_ino;
}

int orh_configure_lock(int rootfd, const char *dir, bool optional, struct orh_cfg_lock *lk,
		       struct orh_err *err)
{
	long long deadline = now_ms() + ORH_CONFIGURE_LOCK_WAIT_MS;
	_cleanup_free_ char *path = NULL;
	char pid[32];
	struct stat st;
	int n, r;

	*lk = (struct orh_cfg_lock)ORH_CFG_LOCK_INIT;
	r = lock_dir(rootfd, dir, lk, &path, err);
	for (; r >= 0; close(TAKE_FD(lk->fd))) {
		r = open_lock(lk, path, &st, err);
		if (r >= 0)
			r = take(lk, &st, deadline, dir, path, err);
		if (r > 0)
			break;
	}
	if (r < 0) {
		orh_configure_unlock(lk); /* its file closed already, not held: only the directory */
		return optional && not_ours_to_make(-r) ? 0 : r;
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(lk->fd, 0) < 0 || pwrite(lk->fd, pid, (size_t)n, 0) != n) {
		r = orh_fail_errno(err, errno, "writing the pid into '%s'", path);
		orh_configure_unlock(lk);
		return r;
	}
	return 0;
}

void orh_configure_unlock(struct orh_cfg_lock *lk)
{
	if (lk->fd >= 0) {
		/* held: the name is still this file's */
		(void)unlinkat(lk->dirfd, lk->name, 0);
		close(TAKE_FD(lk->fd));
	}
	if (lk->dirfd >= 0)
		close(TAKE_FD(lk->dirfd));
}
