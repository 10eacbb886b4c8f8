/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /etc/nccl.conf inside the container.
 *
 * NCCL reads each line NAME=VALUE with setenv(name, value, 0): the process environment
 * always wins and the first definition in a file wins. So the image's lines are kept as
 * they are and ours are appended only for names the image does not define. Comment lines
 * carry no '=' (NCCL before 2.26.2 reads "#X=1" as a variable named "#X"). A marker block
 * lets a second run replace what the first one wrote; only a well-formed block is taken
 * for ours (the begin marker, NAME=VALUE lines, the end marker, nothing else between), so
 * that no line of the image is ever deleted.
 *
 * The file is written only on the container's root filesystem: where /etc or the file is
 * on another mount (a volume), that storage is left alone (cover_foreign).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/decide/decide.h"
#include "orh/apply/mount.h"
#include "orh/node/nccl_used.h"
#include "orh/apply/ncclconf.h"
#include "orh/base/rootfs.h"
#include "orh/apply/target.h"
#include "orh/base/atomic.h"
#include "orh/node/config.h"

#define NCCL_NAME_MAX 1023
#define NCCL_VALUE_MAX 1023

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = orh_xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* A line of the old text, without its newline. */
struct line {
	const char *s;
	size_t len;
};

static bool line_is(const struct line *l, const char *text)
{
	size_t n = strlen(text);

	/* tolerate a CR left by an editor */
	return (l->len == n || (l->len == n + 1 && l->s[n] == '\r')) &&
	       strncmp(l->s, text, n) == 0;
}

/* A line that a block of ours holds: NAME=VALUE as we write it (a CR left by an editor is
 * tolerated, as for the markers). */
static bool block_line(const struct line *l)
{
	const char *eq = memchr(l->s, '=', l->len);
	size_t len = l->len, nlen, vlen;
	char name[NCCL_NAME_MAX + 1];

	if (len && l->s[len - 1] == '\r')
		len--;
	if (!eq)
		return false;
	nlen = (size_t)(eq - l->s);
	vlen = len - nlen - 1;
	if (nlen > NCCL_NAME_MAX || vlen > NCCL_VALUE_MAX || memchr(eq + 1, '\r', vlen))
		return false;
	memcpy(name, l->s, nlen);
	name[nlen] = '\0';
	return orh_env_name_allowed(name);
}

/* The image's first line that defines name (the one NCCL takes), or NULL */
static const struct line *defining(const struct line *lines, size_t n, const bool *ours,
				   const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i < n; i++) {
		if (ours[i])
			continue;
		if (lines[i].len > nl && lines[i].s[nl] == '=' &&
		    strncmp(lines[i].s, name, nl) == 0)
			return &lines[i];
	}
	return NULL;
}

/* kept gets the image's line, without a trailing CR and at most 256 bytes of it */
static void note_kept(struct orh_strv *kept, const struct line *l)
{
	size_t len = l->len;

	if (!kept)
		return;
	if (len && l->s[len - 1] == '\r')
		len--;
	orh_strv_pushf(kept, "%.*s", (int)(len > 256 ? 256 : len), l->s);
}

/* The image's first line that defines an NCCL_DEBUG* name, or NULL */
static const struct line *image_debug(const struct line *lines, size_t n, const bool *ours)
{
	for (size_t i = 0; i < n; i++) {
		const char *eq = ours[i] ? NULL : memchr(lines[i].s, '=', lines[i].len);

		if (eq && orh_nccl_debug_name(lines[i].s, (size_t)(eq - lines[i].s)))
			return &lines[i];
	}
	return NULL;
}

int orh_ncclconf_merge(const char *old, size_t len, const struct orh_env_entry *env,
		       size_t n_env, char **out, size_t *n_added, struct orh_strv *kept,
		       struct orh_err *err)
{
	_cleanup_free_ struct line *lines = NULL;
	_cleanup_free_ bool *ours = NULL;
	struct buf b = { NULL, 0, 0 };
	size_t n = 0, added = 0, begin = SIZE_MAX;

	for (size_t i = 0; i < n_env; i++) {
		if (!orh_env_name_allowed(env[i].name))
			return orh_fail(err, EINVAL, "variable name '%.64s' cannot be written to "
						     "nccl.conf", env[i].name);
		if (!env[i].value || !orh_env_value_allowed(env[i].value))
			return orh_fail(err, EINVAL, "value of %s cannot be written to nccl.conf",
					env[i].name);
	}
	if (old && memchr(old, '\0', len))
		return orh_fail(err, EINVAL, "existing nccl.conf holds a NUL byte");

	/* split into lines */
	lines = orh_xcalloc(len / 1 + 1, sizeof(*lines));
	for (size_t off = 0; old && off < len;) {
		const char *nl = memchr(old + off, '\n', len - off);
		size_t l = nl ? (size_t)(nl - (old + off)) : len - off;

		lines[n++] = (struct line){ old + off, l };
		off += l + (nl ? 1 : 0);
	}
	/* mark an earlier run's blocks: only well-formed ones (see block_line) */
	ours = orh_xcalloc(n + 1, sizeof(*ours));
	for (size_t i = 0; i < n; i++) {
		if (line_is(&lines[i], ORH_NCCL_MARK_BEGIN)) {
			/* a begin marker inside an open block: the block starts again here */
			begin = i;
		} else if (begin != SIZE_MAX && line_is(&lines[i], ORH_NCCL_MARK_END)) {
			for (size_t k = begin; k <= i; k++)
				ours[k] = true;
			begin = SIZE_MAX;
		} else if (begin != SIZE_MAX && !block_line(&lines[i])) {
			begin = SIZE_MAX; /* not a line we write: the block is not ours */
		}
	}

	for (size_t i = 0; i < n; i++) {
		if (ours[i])
			continue;
		buf_add(&b, lines[i].s, lines[i].len);
		buf_add(&b, "\n", 1);
	}
	const struct line *debug = image_debug(lines, n, ours);
	bool debug_noted = false;

	for (size_t i = 0; i < n_env; i++) {
		const struct line *image;
		bool dup = false;

		for (size_t k = 0; k < i; k++)
			dup = dup || strcmp(env[k].name, env[i].name) == 0;
		if (dup)
			continue;
		/* the image sets NCCL's debug output: no capture at all */
		if (debug && orh_nccl_record_entry(&env[i])) {
			if (!debug_noted)
				note_kept(kept, debug);
			debug_noted = true;
			continue;
		}
		image = defining(lines, n, ours, env[i].name);
		if (image) {
			note_kept(kept, image);
			continue;
		}
		if (added++ == 0)
			buf_add(&b, ORH_NCCL_MARK_BEGIN "\n", strlen(ORH_NCCL_MARK_BEGIN) + 1);
		buf_add(&b, env[i].name, strlen(env[i].name));
		buf_add(&b, "=", 1);
		buf_add(&b, env[i].value, strlen(env[i].value));
		buf_add(&b, "\n", 1);
	}
	if (added)
		buf_add(&b, ORH_NCCL_MARK_END "\n", strlen(ORH_NCCL_MARK_END) + 1);
	if (!b.p)
		buf_add(&b, "", 0);
	*out = b.p;
	*n_added = added;
	return 0;
}

/* ---- applying it ----------------------------------------------------------------- */

/* Open /etc/nccl.conf as O_PATH without following it; *path_fd = -1 when absent. */
static int open_existing(int etcfd, int *path_fd, struct stat *st, struct orh_err *err)
{
	int fd = openat(etcfd, "nccl.conf", O_PATH | O_NOFOLLOW | O_CLOEXEC);

	*path_fd = -1;
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return orh_fail_errno(err, errno, "opening /etc/nccl.conf");
	if (fstat(fd, st) < 0) {
		int e = errno;

		close(fd);
		return orh_fail_errno(err, e, "stat of /etc/nccl.conf");
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return orh_fail(err, EPERM,
				"/etc/nccl.conf in the container is not a regular file (%s); "
				"refusing to touch it",
				S_ISLNK(st->st_mode)    ? "a symlink"
				: S_ISDIR(st->st_mode)  ? "a directory"
				: S_ISFIFO(st->st_mode) ? "a FIFO"
							: "a special file");
	}
	*path_fd = fd;
	return 0;
}

/* Read the file behind an O_PATH fd (reopened through /proc/self/fd: the same inode). */
static int read_existing(int path_fd, char **text, size_t *len, struct orh_err *err)
{
	char proc[64];
	_cleanup_close_ int fd = -1;
	int r;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path_fd);
	fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return orh_fail_errno(err, errno, "reopening /etc/nccl.conf");
	r = orh_read_fd_all(fd, ORH_NCCL_CONF_MAX_BYTES, text, len);
	if (r < 0)
		return orh_fail_errno(err, r, "reading /etc/nccl.conf");
	return 0;
}

/* dirfd's nccl.conf replaced by text (orh_replace_at: a new file, renamed over the old
 * entry), with the owner and the mode bits in `keep` of the file it stands for (old_st), or
 * 0644 and the hook's own owner when there was none. *create_errno: why the temporary file
 * could not be made, else 0. */
static int replace_conf(int dirfd, const char *text, const struct stat *old_st, mode_t keep,
			const char *what, int *create_errno, struct orh_err *err)
{
	struct orh_replace how = {
		.type = S_IFREG,
		.mode = old_st ? old_st->st_mode & keep : 0644,
		.chown = old_st != NULL,
		.uid = old_st ? old_st->st_uid : 0,
		.gid = old_st ? old_st->st_gid : 0,
		.data = text,
		.len = strlen(text),
		.what = what,
	};
	int r = orh_replace_at(dirfd, "nccl.conf", &how, err);

	*create_errno = how.create_errno;
	return r;
}

/* Replace /etc/nccl.conf (replace_conf: a new file renamed over it, never written in place)
 * with the owner and the mode of the file it replaces, or 0644 when there was none. -EROFS
 * is returned with err unset so that the caller can take the bind-mount path. */
static int write_in_place(int etcfd, const char *text, const struct stat *old_st,
			  struct orh_err *err)
{
	int create_errno = 0;
	int r = replace_conf(etcfd, text, old_st, 07777, "/etc/nccl.conf", &create_errno, err);

	if (r < 0 && create_errno == EROFS) {
		orh_err_clear(err);
		return -EROFS;
	}
	return r;
}

static int mkdir_host(const char *dir, struct orh_err *err)
{
	char path[PATH_MAX];

	if (orh_strlcpy(path, dir, sizeof(path)) < 0)
		return orh_fail(err, ENAMETOOLONG, "state dir '%s' too long", dir);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdirat(AT_FDCWD, path, 0755) < 0 && errno != EEXIST)
			return orh_fail_errno(err, errno, "creating '%s'", path);
		*p = '/';
	}
	if (mkdirat(AT_FDCWD, path, 0700) < 0 && errno != EEXIST)
		return orh_fail_errno(err, errno, "creating '%s'", path);
	return 0;
}

/* The generated copy in state_dir: a new file each time (replace_conf), with the owner
 * and the permission bits of the file it covers (old_st). *out: the new file, opened to be
 * bound. */
static int write_generated(const char *state_dir, const char *path, const char *text,
			   const struct stat *old_st, int *out, struct orh_err *err)
{
	_cleanup_close_ int dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int create_errno = 0;
	int r;

	if (dirfd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", state_dir);
	r = replace_conf(dirfd, text, old_st, 0777, path, &create_errno, err);
	if (r < 0)
		return r;
	*out = openat(dirfd, "nccl.conf", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (*out < 0)
		return orh_fail_errno(err, errno, "opening '%s'", path);
	return 0;
}

/* Read-only rootfs, or a file on another mount: generate the file outside and bind it
 * over /etc/nccl.conf. The copy has the owner and the permission bits of the file it
 * covers (old_st), so that it is never more readable in the container than the original.
 * -EAGAIN, with err unset, when there was no file and one has appeared since (another
 * hook on the same rootfs made its mount point): the caller looks again. */
static int bind_generated(int etcfd, int path_fd, const struct stat *old_st,
			  const struct orh_target *t, const char *state_dir, const char *text, struct orh_ncclconf_result *res,
			  struct orh_err *err)
{
	_cleanup_close_ int target = -1;
	_cleanup_close_ int gen = -1;
	struct stat st;
	int r;

	if (!state_dir || !*state_dir)
		return orh_fail(err, EROFS,
				"read-only rootfs and no state directory (the container id cannot "
				"name one)");
	if (path_fd >= 0) {
		target = fcntl(path_fd, F_DUPFD_CLOEXEC, 3);
		if (target < 0)
			return orh_fail_errno(err, errno, "dup");
	} else {
		/* a mount point is needed; runtimes create them the same way */
		int fd = openat(etcfd, "nccl.conf",
				O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

		if (fd < 0 && errno == EEXIST)
			return -EAGAIN; /* another hook on this rootfs made it since we looked */
		if (fd < 0)
			return orh_fail_errno(err, errno, "read-only rootfs without /etc/nccl.conf"
					      " to mount over");
		close(fd);
		target = openat(etcfd, "nccl.conf", O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (target < 0)
			return orh_fail_errno(err, errno, "opening /etc/nccl.conf");
		if (fstat(target, &st) < 0 || !S_ISREG(st.st_mode))
			return orh_fail(err, EPERM, "/etc/nccl.conf was replaced; refusing");
	}

	r = mkdir_host(state_dir, err);
	if (r < 0)
		return r;
	if (snprintf(res->generated, sizeof(res->generated), "%s/nccl.conf", state_dir) >=
	    (int)sizeof(res->generated))
		return orh_fail(err, ENAMETOOLONG, "state dir '%s' too long", state_dir);
	/* a new file each time: a copy an earlier start mounted somewhere keeps its content */
	r = write_generated(state_dir, res->generated, text, old_st, &gen, err);
	if (r < 0)
		return r;
	r = orh_bind_into_container(t, gen, target, true, err);
	if (r < 0)
		return orh_err_prefix(err, "mounting '%s' over /etc/nccl.conf", res->generated);
	res->bind_mounted = true;
	return 0;
}

/* /etc of the container on the mount of its root (rootmnt), made there when missing and
 * `create`; *foreign when /etc leads onto another mount (a volume), where nothing is
 * created: then it is only looked at. */
static int open_etc(int rootfd, uint64_t rootmnt, bool create, int *etcfd, bool *foreign,
		    struct orh_err *err)
{
	struct orh_err look = { 0 };
	int r = orh_rootfs_dir(rootfd, "/etc", create, rootmnt, etcfd, err);

	*foreign = false;
	if (r == 0)
		return 0;
	if (r != -EXDEV)
		return orh_err_prefix(err, "nccl.conf");
	if (orh_rootfs_dir(rootfd, "/etc", false, ORH_MOUNT_ANY, etcfd, &look) < 0)
		return orh_fail(err, EXDEV,
				"'/etc' leads onto another mount than the container's root "
				"filesystem (a volume?) where it does not exist; nothing is "
				"created on that mount");
	*foreign = true;
	return 0;
}

/* /etc/nccl.conf on another mount than the root's (mount filemnt, or /etc on one): that
 * storage is not the container's own and is never written. A file there is covered by the
 * generated copy when the mount does not propagate (a shared mount would carry the new
 * mount to its peers, the host's included); no file there means no mount point either. */
static int cover_foreign(int etcfd, int path_fd, const struct stat *st, uint64_t filemnt,
			 const struct orh_target *t, const char *state_dir, const char *text,
			 struct orh_ncclconf_result *res, struct orh_err *err)
{
	bool shared = true;
	int r;

	if (!t) /* written before the container exists: the nccl-conf stage covers it */
		return orh_fail(err, EXDEV, "/etc or /etc/nccl.conf is on another mount than "
				"the container's root filesystem");
	if (path_fd < 0)
		return orh_fail(err, EXDEV,
				"'/etc' is on another mount than the container's root filesystem "
				"(a volume?) and holds no nccl.conf; no file is created on that "
				"mount, /etc/nccl.conf is not written");
	r = orh_mount_is_shared(t, filemnt, &shared, err);
	if (r < 0)
		return r;
	if (shared)
		return orh_fail(err, EXDEV,
				"the file is on a shared mount (a volume with shared propagation): "
				"it is not written, and not covered, since a mount over it would "
				"reach the mount's peers on the host");
	res->foreign = true;
	return bind_generated(etcfd, path_fd, st, t, state_dir, text, res, err);
}

/* ---- the capture directory of what NCCL used ------------------------------------- */

#define RECORD_NAME "oci-rdma-hook-nccl" /* in /run: ORH_NCCL_RECORD_DIR */

static bool record_fail(char *why, size_t size, const char *what, const struct orh_err *e)
{
	snprintf(why, size, "%s%s%s", what, e && e->msg[0] ? ": " : "", e ? e->msg : "");
	return false;
}

/* Is ORH_NCCL_RECORD_DIR a tmpfs mounted in the target, mode 1777? Made where it can be
 * (orh/apply/ncclconf.h); else why into why. */
static bool ensure_record_dir(int rootfd, uint64_t rootmnt, const struct orh_target *t,
			      char *why, size_t size)
{
	_cleanup_close_ int runfd = -1, dirfd = -1;
	struct orh_err e = { 0 };
	uint64_t runmnt = 0, dirmnt = 0;
	char fstype[32] = "";
	bool shared = false;
	struct stat st;

	if (!t)
		return record_fail(why, size, "no container process to mount it in", NULL);
	if (orh_rootfs_dir(rootfd, "/run", false, ORH_MOUNT_ANY, &runfd, &e) < 0 ||
	    orh_fd_mount_id(runfd, &runmnt) < 0)
		return record_fail(why, size, "no /run in the container", &e);
	if (fstatat(runfd, RECORD_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return record_fail(why, size, "/run/" RECORD_NAME " cannot be looked at",
					   NULL);
		if (runmnt != rootmnt)
			return record_fail(why, size, "/run is another mount than the root's (a "
					   "volume or a tmpfs): nothing is made there", NULL);
		if (mkdirat(runfd, RECORD_NAME, 0755) < 0 && errno != EEXIST) {
			orh_fail_errno(&e, errno, "mkdir");
			return record_fail(why, size, "making /run/" RECORD_NAME, &e);
		}
	} else if (!S_ISDIR(st.st_mode)) {
		return record_fail(why, size, "/run/" RECORD_NAME " is not a directory", NULL);
	}
	dirfd = openat(runfd, RECORD_NAME, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0 || orh_fd_mount_id(dirfd, &dirmnt) < 0)
		return record_fail(why, size, "opening /run/" RECORD_NAME, NULL);
	if (dirmnt == runmnt) {
		if (orh_mount_is_shared(t, runmnt, &shared, &e) < 0)
			return record_fail(why, size, "reading the mount of /run", &e);
		if (shared)
			return record_fail(why, size, "the mount of /run is shared: a mount there "
					   "would reach its peers", NULL);
		if (orh_tmpfs_into_container(t, dirfd, ORH_NCCL_RECORD_TMPFS_SIZE, "1777", &e) < 0)
			return record_fail(why, size, "mounting its tmpfs", &e);
		close(TAKE_FD(dirfd));
		dirfd = openat(runfd, RECORD_NAME, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		if (dirfd < 0 || orh_fd_mount_id(dirfd, &dirmnt) < 0 || dirmnt == runmnt)
			return record_fail(why, size, "its tmpfs is not there once mounted", NULL);
	}
	if (orh_mount_fstype(t, dirmnt, &shared, fstype, sizeof(fstype), &e) < 0)
		return record_fail(why, size, "reading its mount", &e);
	if (strcmp(fstype, "tmpfs") != 0)
		return record_fail(why, size, "/run/" RECORD_NAME " is a mount that is not a "
				   "tmpfs", NULL);
	if (fstatat(dirfd, "", &st, AT_EMPTY_PATH) < 0 || (st.st_mode & 07777) != 01777)
		return record_fail(why, size, "/run/" RECORD_NAME " is not of mode 1777", NULL);
	return true;
}

static int apply_once(int rootfd, const struct orh_target *t, bool readonly, const char *state_dir,
		      const struct orh_env_entry *env, size_t n_env,
		      struct orh_ncclconf_result *res, struct orh_err *err)
{
	_cleanup_close_ int etcfd = -1;
	_cleanup_close_ int path_fd = -1;
	_cleanup_free_ char *old = NULL;
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ struct orh_env_entry *kept_env = NULL;
	uint64_t rootmnt = 0, filemnt = 0;
	bool foreign = false, capture = false;
	size_t old_len = 0, n_kept = 0;
	struct stat st = { 0 };
	int r;

	*res = (struct orh_ncclconf_result){ 0 };
	r = orh_fd_mount_id(rootfd, &rootmnt);
	if (r < 0)
		return orh_fail_errno(err, -r, "reading the mount of the container's root");
	r = open_etc(rootfd, rootmnt, !readonly, &etcfd, &foreign, err);
	if (r < 0)
		return r;
	r = open_existing(etcfd, &path_fd, &st, err);
	if (r < 0)
		return r;
	if (path_fd >= 0) {
		r = orh_fd_mount_id(path_fd, &filemnt);
		if (r < 0)
			return orh_fail_errno(err, -r, "reading the mount of /etc/nccl.conf");
		foreign = foreign || filemnt != rootmnt;
		r = read_existing(path_fd, &old, &old_len, err);
		if (r < 0)
			return r;
	}
	orh_strv_free(&res->kept); /* an earlier try's */
	for (size_t i = 0; i < n_env && !capture; i++)
		capture = orh_nccl_record_entry(&env[i]);
	if (capture && !ensure_record_dir(rootfd, rootmnt, t, res->record_off,
					  sizeof(res->record_off))) {
		kept_env = orh_xcalloc(n_env + 1, sizeof(*kept_env));
		for (size_t i = 0; i < n_env; i++)
			if (!orh_nccl_record_entry(&env[i]))
				kept_env[n_kept++] = env[i];
		env = kept_env;
		n_env = n_kept;
	}
	r = orh_ncclconf_merge(old, old_len, env, n_env, &text, &res->added, &res->kept, err);
	if (r < 0)
		return r;
	if (old && strcmp(old, text) == 0)
		return 0; /* already as it should be */
	if (foreign)
		return cover_foreign(etcfd, path_fd, &st, filemnt, t, state_dir, text, res, err);
	if (!readonly) {
		r = write_in_place(etcfd, text, path_fd >= 0 ? &st : NULL, err);
		if (r == 0) { /* what orh_ncclconf_undo puts back */
			res->in_place = true;
			res->was = TAKE_PTR(old);
		}
		if (r != -EROFS)
			return r;
	}
	if (!t)
		return orh_fail(err, EROFS, "the container's root filesystem is read-only");
	return bind_generated(etcfd, path_fd, path_fd >= 0 ? &st : NULL, t, state_dir, text, res,
			      err);
}

/* Hooks of several containers that share one rootfs may run at once: one that finds no
 * /etc/nccl.conf and then loses the creation of the mount point to another reads the file
 * again and merges into what is there now. */
#define APPLY_TRIES 3

int orh_ncclconf_apply(int rootfd, const struct orh_target *t, bool readonly,
		       const char *state_dir, const struct orh_env_entry *env, size_t n_env,
		       struct orh_ncclconf_result *res, struct orh_err *err)
{
	int r = -EAGAIN;

	for (int i = 0; i < APPLY_TRIES && r == -EAGAIN; i++)
		r = apply_once(rootfd, t, readonly, state_dir, env, n_env, res, err);
	if (r < 0)
		orh_strv_free(&res->kept);
	if (r == -EAGAIN)
		return orh_fail(err, EAGAIN, "/etc/nccl.conf kept appearing and disappearing "
					     "while the hook looked (%d tries); left alone",
				APPLY_TRIES);
	return r;
}

int orh_ncclconf_undo(int rootfd, struct orh_ncclconf_result *res, struct orh_err *err)
{
	_cleanup_close_ int etcfd = -1;
	struct stat st;
	int create_errno = 0;

	if (!res->in_place)
		return 0;
	if (orh_rootfs_dir(rootfd, "/etc", false, ORH_MOUNT_ANY, &etcfd, err) < 0)
		return orh_err_prefix(err, "putting /etc/nccl.conf back");
	if (!res->was) {
		if (unlinkat(etcfd, "nccl.conf", 0) < 0 && errno != ENOENT)
			return orh_fail_errno(err, errno, "removing /etc/nccl.conf");
	} else if (fstatat(etcfd, "nccl.conf", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		   replace_conf(etcfd, res->was, &st, 07777, "/etc/nccl.conf", &create_errno,
				err) < 0) {
		return err->msg[0] ? orh_err_prefix(err, "putting /etc/nccl.conf back")
				   : orh_fail_errno(err, errno, "putting /etc/nccl.conf back");
	}
	res->in_place = false;
	return 0;
}

void orh_ncclconf_result_free(struct orh_ncclconf_result *res)
{
	orh_strv_free(&res->kept);
	free(res->was);
	res->was = NULL;
}
