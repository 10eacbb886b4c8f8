/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A container's view of the RDMA classes of sysfs (include/orh/apply/sysview.h), applied: the
 * view's directory on the host and its sweep, its bind mounts into a live container, or
 * into a spec.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orh/base/atomic.h"
#include "orh/apply/mount.h"
#include "orh/base/rootfs.h"
#include "orh/apply/sysview.h"

static int mkdir_p(const char *dir, struct orh_err *err)
{
	char path[PATH_MAX];

	if (orh_strlcpy(path, dir, sizeof(path)) < 0)
		return orh_fail(err, ENAMETOOLONG, "'%s' is too long", dir);
	for (char *p = path + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdirat(AT_FDCWD, path, 0755) < 0 && errno != EEXIST)
			return orh_fail_errno(err, errno, "creating '%s'", path);
		if (!c)
			return 0;
		*p = c;
	}
}

/* One class directory of the view, in the directory dfd: the kept symlinks, the files. */
static int fill_class(int dfd, const char *dir, const struct orh_sysview_class *c,
		      struct orh_err *err)
{
	for (size_t i = 0; i < c->n_links; i++)
		if (c->links[i].keep && symlinkat(c->links[i].target, dfd, c->links[i].name) < 0)
			return orh_fail_errno(err, errno, "creating '%s/%s'", dir, c->links[i].name);
	for (size_t i = 0; i < c->n_files; i++) {
		const struct orh_sysview_file *f = &c->files[i];
		_cleanup_close_ int fd =
			openat(dfd, f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			       0444);

		if (fd < 0 || orh_write_all(fd, f->data, f->len) < 0)
			return orh_fail_errno(err, errno, "writing '%s/%s'", dir, f->name);
	}
	return 0;
}

/* Remove a view, or a temporary one (a directory of directories of symlinks and files);
 * true when it is gone. */
static bool remove_tree(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	_cleanup_dir_ DIR *d = NULL;

	if (fd < 0)
		return false;
	fchmod(fd, 0755);
	if (!(d = fdopendir(fd))) {
		close(fd);
		return false;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno == EISDIR)
			remove_tree(dirfd(d), de->d_name);
	}
	return unlinkat(parent, name, AT_REMOVEDIR) == 0;
}

/* Take the views' lock, basefd's flock: shared (a build or a use), waiting up to
 * ORH_SYSVIEW_LOCK_WAIT_MS for a sweep to end, or exclusive (the sweep), never waiting.
 * 0 or -errno. */
static int lock_views(int basefd, bool exclusive)
{
	const struct timespec step = { 0, 10 * 1000 * 1000 };

	for (unsigned waited = 0;; waited += 10) {
		if (flock(basefd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (exclusive || waited >= ORH_SYSVIEW_LOCK_WAIT_MS)
			return -EWOULDBLOCK;
		nanosleep(&step, NULL);
	}
}

static int fill_view(int tmpfd, const char *tmp, const struct orh_sysview *v,
		     struct orh_err *err)
{
	for (size_t k = 0; k < ORH_SYSVIEW_N_CLASSES; k++) {
		const char *name = orh_sysview_classes[k];
		_cleanup_close_ int cfd = -1;
		int r;

		if (!v->cls[k].present)
			continue;
		if (mkdirat(tmpfd, name, 0755) < 0)
			return orh_fail_errno(err, errno, "creating '%s/%s'", tmp, name);
		cfd = openat(tmpfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0)
			return orh_fail_errno(err, errno, "opening '%s/%s'", tmp, name);
		r = fill_class(cfd, tmp, &v->cls[k], err);
		if (r < 0)
			return r;
		if (fchmod(cfd, 0555) < 0)
			return orh_fail_errno(err, errno, "making '%s/%s' read-only", tmp, name);
	}
	return 0;
}

int orh_sysview_build(const struct orh_sysview *v, const char *base, char *dir, size_t size,
		      struct orh_err *err)
{
	_cleanup_close_ int basefd = -1;
	_cleanup_close_ int tmpfd = -1;
	char tmp[32];
	struct stat st;
	int r;

	if (snprintf(dir, size, "%s/%s", base, v->id) >= (int)size)
		return orh_fail(err, ENAMETOOLONG, "'%s' is too long", base);
	r = mkdir_p(base, err);
	if (r < 0)
		return r;
	basefd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (basefd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", base);
	/* held until the return (basefd's close): no sweep runs between here and the view's
	 * new mtime or its rename into place */
	r = lock_views(basefd, false);
	if (r < 0)
		return orh_fail_errno(err, -r, "locking '%s' against its sweep", base);
	if (fstatat(basefd, v->id, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		/* made before: its name is its content; used from now on, which the sweep
		 * reads from its mtime until a record links to it */
		if (utimensat(basefd, v->id, NULL, AT_SYMLINK_NOFOLLOW) < 0)
			return orh_fail_errno(err, errno, "marking '%s' as used", dir);
		return 0;
	}
	snprintf(tmp, sizeof(tmp), ".tmp-%d", (int)getpid());
	remove_tree(basefd, tmp); /* one a killed run of this pid left */
	if (mkdirat(basefd, tmp, 0755) < 0)
		return orh_fail_errno(err, errno, "creating '%s/%s'", base, tmp);
	tmpfd = openat(basefd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = tmpfd < 0 ? orh_fail_errno(err, errno, "opening '%s/%s'", base, tmp)
		      : fill_view(tmpfd, base, v, err);
	if (r == 0 && renameat(basefd, tmp, basefd, v->id) < 0 && errno != EEXIST &&
	    errno != ENOTEMPTY)
		r = orh_fail_errno(err, errno, "renaming '%s/%s' to '%s'", base, tmp, dir);
	remove_tree(basefd, tmp); /* gone when renamed; else another run made it first */
	return r;
}

int orh_sysview_link(const char *base, const char *owner, const char *id,
		     struct orh_err *err)
{
	_cleanup_close_ int basefd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int linksfd = -1;
	char target[32];
	struct orh_replace how = { .type = S_IFLNK, .data = target, .what = owner };
	int r;

	snprintf(target, sizeof(target), "../%.16s", id);
	if (basefd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", base);
	r = lock_views(basefd, false);
	if (r < 0)
		return orh_fail_errno(err, -r, "locking '%s' against its sweep", base);
	if (mkdirat(basefd, ORH_SYSVIEW_LINKS, 0755) < 0 && errno != EEXIST)
		return orh_fail_errno(err, errno, "creating '%s/" ORH_SYSVIEW_LINKS "'", base);
	linksfd = openat(basefd, ORH_SYSVIEW_LINKS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			 O_CLOEXEC);
	if (linksfd < 0)
		return orh_fail_errno(err, errno, "opening '%s/" ORH_SYSVIEW_LINKS "'", base);
	return orh_replace_at(linksfd, owner, &how, err);
}

/* The links of base (basefd): each whose state directory is gone (in runfd) is removed, and
 * so is a temporary one a killed writer left; the views the others name go into used. */
static void sweep_links(int runfd, int basefd, struct orh_strv *used)
{
	int fd = openat(basefd, ORH_SYSVIEW_LINKS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	_cleanup_dir_ DIR *d = NULL;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		char target[32];
		const char *id;
		struct stat st;
		ssize_t n;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		id = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
		/* (under the lock no link is being written: a temporary one is a killed one's) */
		if (de->d_name[0] == '.' ||
		    fstatat(runfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode)) {
			unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (orh_sysview_id_valid(id) && !orh_strv_contains(used, id))
			orh_strv_pushf(used, "%s", id);
	}
}

int orh_sysview_sweep(int runfd, const char *base, unsigned unused_for)
{
	_cleanup_close_ int basefd = openat(runfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					    O_CLOEXEC);
	struct orh_strv used = { 0 };
	int fd = -1, removed = 0;
	struct dirent *de;
	char dead[32];
	_cleanup_dir_ DIR *d = NULL;

	/* none yet, or a build or a link at work: the next sweep */
	if (basefd < 0 || lock_views(basefd, true) < 0)
		return 0;
	sweep_links(runfd, basefd, &used);
	fd = openat(basefd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		orh_strv_free(&used);
		return 0;
	}
	snprintf(dead, sizeof(dead), ".dead-%d", (int)getpid());
	while ((de = readdir(d))) {
		struct stat st;

		/* a build or a sweep killed before its end: under the lock none is at work */
		if (orh_startswith(de->d_name, ".tmp-") || orh_startswith(de->d_name, ".dead-")) {
			removed += remove_tree(basefd, de->d_name);
			continue;
		}
		if (!orh_sysview_id_valid(de->d_name) || orh_strv_contains(&used, de->d_name) ||
		    fstatat(basefd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || time(NULL) - st.st_mtime <= (time_t)unused_for)
			continue;
		/* out of its name first: a sweep killed halfway leaves no part of a view where
		 * a build would take it for whole */
		if (renameat(basefd, de->d_name, basefd, dead) == 0)
			removed += remove_tree(basefd, dead);
	}
	orh_strv_free(&used);
	return removed;
}

/* ---- the live hook ---------------------------------------------------------------- */

#define VIEW_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

/* The class's directory in the container's /sys, to be covered by the view's: *target and
 * *src open, or both -1 where it needs no mount (res counts why). */
static int class_target(const struct orh_target *t, int rootfd, const char *dir,
			const char *name, int *src, int *target, struct orh_sysview_result *res,
			struct orh_err *err)
{
	_cleanup_free_ char *path = orh_xasprintf("/sys/class/%s", name);
	_cleanup_free_ char *from = orh_xasprintf("%s/%s", dir, name);
	struct orh_err look = { 0 };
	struct stat sst, tst;
	uint64_t mnt = 0;
	bool shared = true;
	int r;

	*src = *target = -1;
	r = orh_rootfs_dir(rootfd, path, false, ORH_MOUNT_ANY, target, &look);
	if (r == -ENOENT || r == -ENOTDIR) {
		res->missing++; /* the container's /sys has no such class: nothing to hide */
		return 0;
	}
	if (r < 0)
		return orh_fail(err, -r, "%s", look.msg);
	r = orh_fd_mount_id(*target, &mnt);
	if (r < 0)
		r = orh_fail_errno(err, -r, "reading the mount of %s", path);
	else
		r = orh_mount_is_shared(t, mnt, &shared, err);
	if (r == 0 && shared)
		r = orh_fail(err, EXDEV, "%s is on a shared mount: a mount over it would reach "
				    "the mount's peers, the host's included", path);
	if (r == 0) {
		*src = open(from, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (*src < 0)
			r = orh_fail_errno(err, errno, "opening '%s'", from);
	}
	if (r == 0 && fstat(*src, &sst) == 0 && fstat(*target, &tst) == 0 &&
	    sst.st_dev == tst.st_dev && sst.st_ino == tst.st_ino)
		res->already++; /* the spec's mount of this view (precreate before this hook) */
	else if (r == 0)
		return 0;
	if (*src >= 0)
		close(*src);
	close(*target);
	*src = *target = -1;
	return r;
}

int orh_sysview_mount(const struct orh_target *t, int rootfd, const struct orh_sysview *v,
		      const char *dir, struct orh_sysview_result *res, struct orh_err *err)
{
	int src[ORH_SYSVIEW_N_CLASSES], target[ORH_SYSVIEW_N_CLASSES];
	size_t k = 0, done = 0;
	int r = 0;

	memset(res, 0, sizeof(*res));
	for (size_t i = 0; i < ORH_SYSVIEW_N_CLASSES && r == 0; i++) {
		if (!v->cls[i].present)
			continue;
		r = class_target(t, rootfd, dir, orh_sysview_classes[i], &src[k], &target[k],
				 res, err);
		if (r == 0 && src[k] >= 0)
			k++;
	}
	/* every class from one child, which enters the container's namespace once */
	if (r == 0 && k) {
		r = orh_bind_many_into_container(t, src, target, k, VIEW_ATTRS, &done, err);
		if (r < 0)
			orh_err_prefix(err, "mounting the view '%s' over /sys/class", dir);
		res->mounted = (unsigned)done;
	}
	for (size_t i = 0; i < k; i++) {
		close(src[i]);
		close(target[i]);
	}
	return r;
}

/* ---- the spec edit ----------------------------------------------------------------- */

static bool is_bind(const json_t *m)
{
	const char *type = json_string_value(json_object_get(m, "type"));
	const json_t *o = NULL;
	size_t i = 0;

	if (type && !strcmp(type, "bind"))
		return true;
	json_array_foreach(json_object_get(m, "options"), i, o) {
		const char *s = json_string_value(o);

		if (s && (!strcmp(s, "bind") || !strcmp(s, "rbind")))
			return true;
	}
	return false;
}

/* How far dest ("/sys/class") leads to path ("/sys/class/infiniband"): the length of
 * dest when it is path or a directory above it, else 0. */
static size_t above(const char *dest, const char *path)
{
	size_t n = strlen(dest);

	while (n > 1 && dest[n - 1] == '/')
		n--;
	if (strncmp(dest, path, n) != 0 || (path[n] && path[n] != '/' && n > 1))
		return 0;
	return n;
}

/* Will the container's /sys have path? Decided by the last mount at or above it. */
static bool will_have(const json_t *mounts, const char *path,
		      const struct orh_sysview_probe *probe, bool *mounted_there)
{
	const json_t *m = NULL, *last = NULL;
	size_t i = 0, last_n = 0;

	*mounted_there = false;
	json_array_foreach(mounts, i, m) {
		const char *dest = json_string_value(json_object_get(m, "destination"));
		size_t n = dest ? above(dest, path) : 0;

		if (!n)
			continue;
		if (!path[n])
			*mounted_there = true;
		last = m;
		last_n = n;
	}
	if (!last || *mounted_there)
		return false;
	const char *type = json_string_value(json_object_get(last, "type"));
	const char *src = json_string_value(json_object_get(last, "source"));
	_cleanup_free_ char *host = NULL;

	if (is_bind(last) && src && src[0] == '/')
		host = orh_xasprintf("%s%s", src, path + last_n);
	else if (type && !strcmp(type, "sysfs"))
		host = orh_xasprintf("%s", path);
	return host && probe->exists(probe->arg, host);
}

int orh_sysview_spec_mounts(json_t *spec, const struct orh_sysview *v, const char *dir,
			    const struct orh_sysview_probe *probe, struct orh_err *err)
{
	json_t *mounts = json_object_get(spec, "mounts");
	int added = 0;

	if (!json_is_array(mounts))
		return mounts && !json_is_null(mounts)
			       ? orh_fail(err, EINVAL, "config.json: field 'mounts' is not an array")
			       : 0;
	for (size_t k = 0; k < ORH_SYSVIEW_N_CLASSES; k++) {
		_cleanup_free_ char *path = orh_xasprintf("/sys/class/%s", orh_sysview_classes[k]);
		_cleanup_free_ char *src = orh_xasprintf("%s/%s", dir, orh_sysview_classes[k]);
		bool there = false;
		json_t *m = NULL;

		if (!v->cls[k].present || !will_have(mounts, path, probe, &there))
			continue;
		m = json_pack("{s:s, s:s, s:s, s:[s, s, s, s, s]}", "destination", path, "type",
			      "bind", "source", src, "options", "bind", "ro", "nosuid", "nodev",
			      "noexec");
		if (!m || json_array_append_new(mounts, m) < 0)
			return orh_fail(err, ENOMEM, "config.json: adding to 'mounts'");
		added++;
	}
	return added;
}

static bool host_exists(void *arg, const char *path)
{
	struct stat st;

	(void)arg;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

struct orh_sysview_probe orh_sysview_host_probe(void)
{
	return (struct orh_sysview_probe){ .exists = host_exists, .arg = NULL };
}
