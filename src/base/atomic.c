/* SPDX-License-Identifier: Apache-2.0 */
/* The atomic replacement of a directory entry (include/orh/base/atomic.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "orh/base/atomic.h"

/* ".NAME.orh-": the prefix of every temporary name of NAME (its first 200 bytes); 16 hex
 * digits follow. Built by hand: a container's start makes a few dozen of them, and
 * snprintf() took ten times the instructions. Returns the end of the prefix. */
static char *tmp_prefix(char buf[NAME_MAX + 1], const char *name)
{
	size_t n = strnlen(name, 200);

	buf[0] = '.';
	memcpy(buf + 1, name, n);
	return stpcpy(buf + 1 + n, ".orh-");
}

struct stale {
	int dirfd;
	char prefix[NAME_MAX + 1];
	size_t plen;
	mode_t type;
};

static bool remove_if_stale(const char *name, void *arg)
{
	struct stale *s = arg;
	struct stat st;

	if (!strncmp(name, s->prefix, s->plen) && strlen(name) == s->plen + 16 &&
	    fstatat(s->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (st.st_mode & S_IFMT) == s->type)
		unlinkat(s->dirfd, name, 0);
	return true;
}

/* Remove what a writer killed between creating its temporary entry and the rename left
 * behind: only entries of exactly that form and of the type this writer makes. */
static void remove_stale_temps(int dirfd, const char *name, mode_t type)
{
	struct stale s = { .dirfd = dirfd, .type = type };

	s.plen = (size_t)(tmp_prefix(s.prefix, name) - s.prefix);
	orh_dir_each(dirfd, ".", remove_if_stale, &s);
}

/* The 64 bits of the next temporary name: splitmix64 over a seed that getrandom() gives
 * once a process, and again after a name was taken (a forked child shares its parent's
 * sequence until then). A device node, a file or a link made during a container's start
 * takes one call fewer each: the hook makes a few dozen. getrandom() never waits here
 * (GRND_NONBLOCK): a container started before the kernel's pool is ready gets a seed from
 * the pid and the try instead. */
static uint64_t temp_bits(bool reseed, int tries)
{
	static uint64_t seed, count;
	static bool seeded;
	uint64_t z;

	if (!seeded || reseed) {
		uint64_t rnd = 0;

		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
			rnd = seed ^ ((uint64_t)getpid() << 32 | (unsigned)tries);
		seed = rnd;
		seeded = true;
	}
	z = seed + ++count * 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Make the temporary entry under a free name in tmp: a file (its fd in *fd) or a node. */
static int create_temp(int dirfd, const char *name, struct orh_replace *how, const char *what,
		       char tmp[NAME_MAX + 1], int *fd, struct orh_err *err)
{
	for (int tries = 0;; tries++) {
		uint64_t rnd = temp_bits(tries > 0, tries);
		char *hex = tmp_prefix(tmp, name);
		int r, e;

		for (int i = 0; i < 16; i++)
			hex[i] = "0123456789abcdef"[(rnd >> (60 - 4 * i)) & 15];
		hex[16] = '\0';
		if (how->type == S_IFCHR) {
			r = mknodat(dirfd, tmp, S_IFCHR | (how->mode & 07777), how->rdev);
		} else if (how->type == S_IFLNK) {
			r = symlinkat(how->data, dirfd, tmp);
		} else {
			/* root-only until it has its owner and mode, and only then the content */
			*fd = openat(dirfd, tmp,
				     O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
			r = *fd;
		}
		if (r >= 0)
			return 0;
		e = errno;
		if (e == EEXIST && tries < 9)
			continue;
		how->create_errno = e;
		if (how->type == S_IFCHR)
			return orh_fail_errno(err, e, "mknod '%s' (%u:%u)", what, major(how->rdev),
					      minor(how->rdev));
		return orh_fail_errno(err, e, "'%s': creating the temporary %s '%s'", what,
				      how->type == S_IFLNK ? "symlink" : "file", tmp);
	}
}

/* Owner, mode and content of the temporary entry. */
static int fill_temp(int dirfd, const char *tmp, int fd, const struct orh_replace *how,
		     const char *what, struct orh_err *err)
{
	int r;

	if (how->chown) {
		r = how->type != S_IFREG
			    ? fchownat(dirfd, tmp, how->uid, how->gid, AT_SYMLINK_NOFOLLOW)
			    : fchown(fd, how->uid, how->gid);
		if (r < 0 && !(errno == EPERM && how->chown_eperm_ok))
			return orh_fail_errno(err, errno, "setting the owner of '%s'", what);
	}
	if (how->type != S_IFREG)
		return 0;
	if (fchmod(fd, how->mode & 07777) < 0)
		return orh_fail_errno(err, errno, "setting the mode of '%s'", what);
	r = orh_write_all(fd, how->data, how->len);
	if (r < 0)
		return orh_fail_errno(err, r, "writing '%s'", what);
	if (how->fill) {
		r = how->fill(fd, how->arg, err);
		if (r < 0)
			return r;
	}
	if (how->durable && fsync(fd) < 0)
		return orh_fail_errno(err, errno, "'%s': fsync", what);
	return 0;
}

int orh_replace_at(int dirfd, const char *name, struct orh_replace *how, struct orh_err *err)
{
	const char *what = how->what ? how->what : name;
	_cleanup_close_ int fd = -1;
	char tmp[NAME_MAX + 1];
	int r;

	how->create_errno = 0;
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
	    strlen(name) > NAME_MAX)
		return orh_fail(err, EINVAL, "'%s': not a plain file name", name);
	if (how->type != S_IFREG && !(how->type == S_IFCHR && !how->len && !how->fill) &&
	    !(how->type == S_IFLNK && how->data && !how->fill))
		return orh_fail(err, EINVAL, "'%s': neither a file, a device node nor a symlink",
				what);
	if (how->sweep)
		remove_stale_temps(dirfd, name, how->type);
	r = create_temp(dirfd, name, how, what, tmp, &fd, err);
	if (r < 0)
		return r;
	r = fill_temp(dirfd, tmp, fd, how, what, err);
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = orh_fail_errno(err, errno, "renaming '%s' over '%s'", tmp, what);
	if (r < 0) {
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	/* The rename is durable once the directory is (an O_PATH dirfd cannot be synced:
	 * EBADF, as EINVAL where the file system does not support it). */
	if (how->durable && fsync(dirfd) < 0 && errno != EINVAL && errno != EBADF)
		return orh_fail_errno(err, errno, "fsync of the directory of '%s'", what);
	return 0;
}

int orh_write_atomic(int dirfd, const char *name, const char *data, size_t len,
		     unsigned mode, struct orh_err *err)
{
	struct orh_replace how = {
		.type = S_IFREG,
		.mode = mode,
		.chown_eperm_ok = true,
		.data = data,
		.len = len,
		.durable = true,
		.sweep = true,
	};
	struct stat old;

	if (strchr(name, '/') || strlen(name) > NAME_MAX - 24)
		return orh_fail(err, EINVAL, "'%s': not a plain file name", name);
	if (fstatat(dirfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISREG(old.st_mode))
			return orh_fail(err, EINVAL, "'%s' exists and is not a regular file", name);
		how.chown = true;
		how.uid = old.st_uid;
		how.gid = old.st_gid;
		how.mode = old.st_mode & 07777;
	}
	return orh_replace_at(dirfd, name, &how, err);
}
