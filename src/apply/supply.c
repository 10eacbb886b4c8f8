/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supply verdict applied (include/orh/apply/supply.h): mounts, as spec entries or into a
 * live container, and the container's loader cache.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/base/atomic.h"
#include "orh/apply/mount.h"
#include "orh/base/rootfs.h"
#include "orh/base/sandbox.h"
#include "orh/apply/supply.h"

#define SUPPLY_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

static void add(struct orh_supply_mount *out, size_t *n, const char *src, const char *dst)
{
	snprintf(out[*n].src, sizeof(out[*n].src), "%s", src);
	snprintf(out[*n].dst, sizeof(out[*n].dst), "%s", dst);
	(*n)++;
}

struct orh_supply_mount *orh_supply_mounts(const struct orh_supply *s, const char *sysroot,
					   const char *host_dir, size_t *count)
{
	char src[4096], dst[512];
	struct orh_supply_mount *out = NULL;
	size_t n = 0;

	*count = 0;
	if (!s->supply)
		return NULL;
	out = orh_xcalloc(ORH_SUPPLY_MAX_MOUNTS, sizeof(*out));
	/* the node's files: a sysroot of "/" adds nothing to their paths */
	if (!strcmp(sysroot, "/"))
		sysroot = "";
	for (size_t i = 0; i < s->n_files; i++) {
		snprintf(src, sizeof(src), "%s%s", sysroot, s->files[i]->host);
		snprintf(dst, sizeof(dst), ORH_SUPPLY_DIR "/%s", s->files[i]->name);
		add(out, &n, src, dst);
	}
	for (size_t i = 0; i < s->n_providers; i++) {
		snprintf(src, sizeof(src), "%s/%s.driver", host_dir, s->providers[i]);
		snprintf(dst, sizeof(dst), "/etc/libibverbs.d/oci-rdma-hook-%s.driver",
			 s->providers[i]);
		add(out, &n, src, dst);
	}
	if (s->verbs) {
		snprintf(src, sizeof(src), "%s/ld.so.conf", host_dir);
		add(out, &n, src, ORH_SUPPLY_CONF);
	}
	*count = n;
	return out;
}

/* host_dir/name with text, unless it holds that already. */
static int host_file(int dirfd, const char *host_dir, const char *name, const char *text,
		     struct orh_err *err)
{
	char buf[256];
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t got = -1;

	if (fd >= 0) {
		got = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (got == (ssize_t)strlen(text) && !memcmp(buf, text, (size_t)got))
		return 0;
	if (orh_write_atomic(dirfd, name, text, strlen(text), 0644, err) < 0)
		return orh_err_prefix(err, "writing '%s/%s'", host_dir, name);
	return 0;
}

int orh_supply_host_files(const struct orh_supply *s, const char *host_dir,
			  struct orh_err *err)
{
	_cleanup_close_ int dirfd = -1;
	char path[4096], text[256], name[64];
	int r = 0;

	if (!s->supply)
		return 0;
	/* its parent first (the run directory), then the directory itself */
	snprintf(path, sizeof(path), "%s", host_dir);
	if (strrchr(path, '/') && strrchr(path, '/') != path) {
		*strrchr(path, '/') = '\0';
		if (mkdirat(AT_FDCWD, path, 0755) < 0 && errno != EEXIST)
			return orh_fail_errno(err, errno, "creating '%s'", path);
	}
	if (mkdirat(AT_FDCWD, host_dir, 0755) < 0 && errno != EEXIST)
		return orh_fail_errno(err, errno, "creating '%s'", host_dir);
	dirfd = open(host_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", host_dir);
	for (size_t i = 0; r == 0 && i < s->n_providers; i++) {
		/* libibverbs loads an absolute name as NAME-rdmav<N>.so */
		snprintf(text, sizeof(text), "driver " ORH_SUPPLY_DIR "/lib%s\n", s->providers[i]);
		snprintf(name, sizeof(name), "%s.driver", s->providers[i]);
		r = host_file(dirfd, host_dir, name, text, err);
	}
	if (r == 0 && s->verbs)
		r = host_file(dirfd, host_dir, "ld.so.conf", ORH_SUPPLY_DIR "\n", err);
	return r;
}

static bool spec_mounts_at(const json_t *mounts, const char *dst)
{
	size_t i;
	const json_t *m;

	json_array_foreach(mounts, i, m) {
		const char *d = json_string_value(json_object_get(m, "destination"));

		if (d && !strcmp(d, dst))
			return true;
	}
	return false;
}

int orh_supply_spec_mounts(json_t *spec, const struct orh_supply_mount *m, size_t n,
			   struct orh_err *err)
{
	json_t *mounts = json_object_get(spec, "mounts");
	int added = 0;

	if (!n)
		return 0;
	if (!mounts) {
		mounts = json_array();
		json_object_set_new(spec, "mounts", mounts);
	}
	if (!json_is_array(mounts))
		return orh_fail(err, EINVAL, "config.json: field 'mounts' is not an array");
	for (size_t i = 0; i < n; i++) {
		if (spec_mounts_at(mounts, m[i].dst))
			continue;
		json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s,s,s,s]}",
							"destination", m[i].dst, "type", "bind",
							"source", m[i].src, "options", "rbind", "ro",
							"nosuid", "nodev"));
		added++;
	}
	return added;
}

/* ---- only the container's own storage -------------------------------------------- */

/* Is path (an in-root absolute path) dir or under it? Both as orh_rootfs_resolve() writes
 * them: no "." or "..", no repeated or trailing slash. */
static bool under(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	if (!strcmp(dir, "/"))
		return true;
	return !strncmp(dir, path, n) && (path[n] == '\0' || path[n] == '/');
}

/* " (mount N at 'P')" for the mount of fd in t's namespace, into out, for a message: P as
 * the container will see it (below its root's mount point, which is the runtime's path of
 * the root before it pivots). */
static void mount_name(const struct orh_target *t, int fd, uint64_t rootmnt, char *out,
		       size_t size)
{
	char point[512] = "", rootpoint[512] = "";
	struct orh_err look = { 0 };
	const char *p = point;
	uint64_t id = 0;
	bool shared = false;
	size_t n;

	out[0] = '\0';
	if (orh_fd_mount_id(fd, &id) < 0)
		return;
	if (!t || orh_mount_info(t, id, &shared, point, sizeof(point), &look) < 0) {
		snprintf(out, size, " (mount %" PRIu64 ")", id);
		return;
	}
	n = orh_mount_info(t, rootmnt, &shared, rootpoint, sizeof(rootpoint), &look) == 0
		    ? strlen(rootpoint) : 0;
	if (n > 1 && !strncmp(point, rootpoint, n) && point[n] == '/')
		p = point + n;
	snprintf(out, size, " (mount %" PRIu64 " at '%s')", id, p);
}

/* The directory dir of the container's root is found, or would be made, on the root's own
 * mount (rootmnt): else -EXDEV naming dir and the mount it leads onto. */
static int own_dir(const struct orh_target *t, int rootfd, uint64_t rootmnt, const char *dir,
		   struct orh_err *err)
{
	_cleanup_close_ int fd = -1;
	struct orh_err look = { 0 };
	char where[600] = "";
	int r = orh_rootfs_dir_probe(rootfd, dir, rootmnt, &fd, &look);

	if (r == 0)
		return 0;
	if (r != -EXDEV)
		return orh_fail(err, -r, "%s", look.msg);
	if (orh_rootfs_dir_probe(rootfd, dir, ORH_MOUNT_ANY, &fd, &look) == 0)
		mount_name(t, fd, rootmnt, where, sizeof(where));
	return orh_fail(err, EXDEV, "'%s' leads onto another mount than the container's root "
			"filesystem%s (a volume?): nothing is made or written there", dir, where);
}

/* What is at path in the container's root already, where the supply would mount over it
 * (src_fd, the node's file: the spec's mount of it is there already) or replace it
 * (src_fd -1): a file of another mount (a volume's) is neither. 0 where nothing is there. */
static int own_entry(const struct orh_target *t, int rootfd, uint64_t rootmnt,
		     const char *path, int src_fd, struct orh_err *err)
{
	_cleanup_close_ int dirfd = -1, fd = -1;
	char name[NAME_MAX + 1], where[600] = "";
	struct orh_err look = { 0 };
	struct stat st, sst;
	uint64_t id = 0;
	int r = orh_rootfs_parent(rootfd, path, false, rootmnt, &dirfd, name, &look);

	if (r == -ENOENT)
		return 0; /* its directory is made on the root's mount (own_dir) */
	if (r < 0)
		return orh_fail(err, -r, "%s", look.msg);
	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0 || fstat(fd, &st) < 0)
		return orh_fail_errno(err, errno, "opening %s", path);
	if (src_fd >= 0 && fstat(src_fd, &sst) == 0 && sst.st_dev == st.st_dev &&
	    sst.st_ino == st.st_ino)
		return 0; /* the spec's mount of the node's file */
	if (src_fd >= 0 && !S_ISREG(st.st_mode))
		return orh_fail(err, EEXIST, "%s is there and not a regular file: not mounted "
				"over", path);
	r = orh_fd_mount_id(fd, &id);
	if (r < 0)
		return orh_fail_errno(err, -r, "reading the mount of %s", path);
	if (id == rootmnt)
		return 0;
	mount_name(t, fd, rootmnt, where, sizeof(where));
	return orh_fail(err, EXDEV, "%s is a file of another mount than the container's root "
			"filesystem%s (a volume?): not %s", path, where,
			src_fd >= 0 ? "mounted over" : "replaced");
}

/* The directory part of dst, into dir. */
static void dir_of(const char *dst, char *dir, size_t size)
{
	const char *slash = strrchr(dst, '/');

	snprintf(dir, size, "%.*s", slash && slash != dst ? (int)(slash - dst) : 1, dst);
}

int orh_supply_check_live(const struct orh_target *t, int rootfd, const struct orh_supply *s,
			  const struct orh_supply_mount *m, size_t n, struct orh_err *err)
{
	char dir[512], point[512] = "";
	uint64_t rootmnt = 0;
	bool shared = true;
	int r = orh_fd_mount_id(rootfd, &rootmnt);

	if (r < 0)
		return orh_fail_errno(err, -r, "reading the mount of the container's root");
	r = orh_mount_info(t, rootmnt, &shared, point, sizeof(point), err);
	if (r < 0)
		return r;
	if (shared)
		return orh_fail(err, EXDEV, "the container's root filesystem is a shared mount "
				"(mount %" PRIu64 " at '%s'): a mount made in it would reach the "
				"mount's peers, the host's included; nothing is mounted", rootmnt,
				point);
	for (size_t i = 0; i < n; i++) {
		_cleanup_close_ int src = open(m[i].src, O_PATH | O_CLOEXEC);

		if (src < 0)
			return orh_fail_errno(err, errno, "opening '%s'", m[i].src);
		dir_of(m[i].dst, dir, sizeof(dir));
		r = own_dir(t, rootfd, rootmnt, dir, err);
		if (r == 0)
			r = own_entry(t, rootfd, rootmnt, m[i].dst, src, err);
		if (r < 0)
			return r;
	}
	if (!s->verbs)
		return 0;
	r = own_dir(t, rootfd, rootmnt, "/etc", err);
	return r < 0 ? r : own_entry(t, rootfd, rootmnt, "/etc/ld.so.cache", -1, err);
}

/* Where each mount of the spec lands in the root (orh_rootfs_resolve), into at[k]: "" for
 * one that may land anywhere as far as can be told (no absolute destination, or one that
 * cannot be resolved), "\1" for one of m's own (an earlier edit of this spec: no volume). */
static void spec_mounts_resolved(int rootfd, const json_t *mounts,
				 const struct orh_supply_mount *m, size_t n, char (*at)[PATH_MAX])
{
	const json_t *x;
	size_t k;

	json_array_foreach(mounts, k, x) {
		const char *d = json_string_value(json_object_get(x, "destination"));
		const char *src = json_string_value(json_object_get(x, "source"));
		bool ours = false;

		for (size_t j = 0; d && src && j < n; j++)
			ours = ours || (!strcmp(d, m[j].dst) && !strcmp(src, m[j].src));
		at[k][0] = ours ? 1 : '\0';
		if (!ours && d && d[0] == '/' && orh_rootfs_resolve(rootfd, d, at[k], PATH_MAX) < 0)
			at[k][0] = '\0';
	}
}

int orh_supply_check_spec(int rootfd, const json_t *spec, const struct orh_supply *s,
			  const struct orh_supply_mount *m, size_t n, struct orh_err *err)
{
	const json_t *linux_ = json_object_get(spec, "linux");
	const char *prop = json_string_value(json_object_get(linux_, "rootfsPropagation"));
	const json_t *mounts = json_object_get(spec, "mounts");
	size_t nm = json_array_size(mounts);
	_cleanup_free_ char (*mat)[PATH_MAX] = NULL;
	char dir[512];
	uint64_t rootmnt = 0;
	int r;

	if (prop && (!strcmp(prop, "shared") || !strcmp(prop, "rshared")))
		return orh_fail(err, EXDEV, "config.json: field 'linux.rootfsPropagation' is "
				"'%s': a mount made in the container's root would reach the host's "
				"mounts; nothing is mounted", prop);
	r = orh_fd_mount_id(rootfd, &rootmnt);
	if (r < 0)
		return orh_fail_errno(err, -r, "reading the mount of the container's root");
	mat = orh_xcalloc(nm + 1, sizeof(*mat));
	spec_mounts_resolved(rootfd, mounts, m, n, mat);
	for (size_t i = 0; i <= n; i++) {
		const char *dst = i < n ? m[i].dst : s->verbs ? "/etc/ld.so.cache" : NULL;
		char at[PATH_MAX];

		if (!dst)
			break;
		/* where the runtime will make it, as it resolves a mount's destination */
		r = orh_rootfs_resolve(rootfd, dst, at, sizeof(at));
		if (r < 0)
			return orh_fail(err, -r, "%s: where it leads in the container's root cannot "
					"be told (%s); not given by the spec", dst, strerror(-r));
		for (size_t k = 0; k < nm; k++) {
			const char *d = json_string_value(json_object_get(json_array_get(mounts, k),
									  "destination"));

			if (mat[k][0] != 1 && (!mat[k][0] || under(mat[k], at)))
				return orh_fail(err, EXDEV, "%s leads to '%s', in the spec's mount at "
						"'%s' (a volume?), not on the container's root "
						"filesystem: nothing is made or written there", dst,
						at, d ? d : "(none)");
		}
		dir_of(at, dir, sizeof(dir));
		r = own_dir(NULL, rootfd, rootmnt, dir, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The mount point of dst in the container's root, on its own mount (rootmnt): a regular
 * file, made empty where there is none (as a runtime makes one); *out an O_PATH fd to it. */
static int mount_point(int rootfd, uint64_t rootmnt, const char *dst, int *out, bool *made,
		       struct orh_err *err)
{
	_cleanup_close_ int dirfd = -1;
	char name[NAME_MAX + 1];
	struct stat st;
	int r = orh_rootfs_parent(rootfd, dst, true, rootmnt, &dirfd, name, err);
	int fd;

	*made = false;
	if (r < 0)
		return r;
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	*made = fd >= 0;
	if (fd < 0 && errno != EEXIST)
		return orh_fail_errno(err, errno, "creating the mount point %s", dst);
	*out = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (*out < 0)
		return orh_fail_errno(err, errno, "opening %s", dst);
	if (fstat(*out, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(*out);
		*out = -1;
		return orh_fail(err, EEXIST, "%s is there and not a regular file: not mounted "
				"over", dst);
	}
	return 0;
}

/* Remove the empty mount point mount_point() made at dst. */
static void unmake(int rootfd, uint64_t rootmnt, const char *dst)
{
	_cleanup_close_ int dirfd = -1;
	char name[NAME_MAX + 1];
	struct orh_err look = { 0 };
	struct stat st;

	if (orh_rootfs_parent(rootfd, dst, false, rootmnt, &dirfd, name, &look) == 0 &&
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size == 0)
		unlinkat(dirfd, name, 0);
}

int orh_supply_mount_live(const struct orh_target *t, int rootfd,
			  const struct orh_supply_mount *m, size_t n,
			  struct orh_supply_result *res, struct orh_err *err)
{
	int src[ORH_SUPPLY_MAX_MOUNTS], target[ORH_SUPPLY_MAX_MOUNTS];
	const char *what[ORH_SUPPLY_MAX_MOUNTS];
	size_t at[ORH_SUPPLY_MAX_MOUNTS];
	bool made = false;
	size_t k = 0, done = 0;
	uint64_t rootmnt = 0;
	int r = orh_fd_mount_id(rootfd, &rootmnt);

	memset(res, 0, sizeof(*res));
	if (r < 0)
		return orh_fail_errno(err, -r, "reading the mount of the container's root");
	for (size_t i = 0; i < n && i < ORH_SUPPLY_MAX_MOUNTS && r == 0; i++) {
		struct stat sst, tst;
		int fd = open(m[i].src, O_RDONLY | O_CLOEXEC), tfd = -1;

		if (fd < 0) {
			r = orh_fail_errno(err, errno, "opening '%s'", m[i].src);
			break;
		}
		r = mount_point(rootfd, rootmnt, m[i].dst, &tfd, &made, err);
		res->made[i] = made;
		if (r == 0 && fstat(fd, &sst) == 0 && fstat(tfd, &tst) == 0 &&
		    sst.st_dev == tst.st_dev && sst.st_ino == tst.st_ino) {
			res->already++; /* the spec's mount (precreate before this hook) */
			r = 1;
		}
		if (r != 0) {
			close(fd);
			if (tfd >= 0)
				close(tfd);
			r = r > 0 ? 0 : r;
			continue;
		}
		src[k] = fd;
		target[k] = tfd;
		at[k] = i;
		what[k++] = m[i].dst;
	}
	/* every mount from one child, which enters the container's namespace once */
	if (r == 0 && k) {
		r = orh_bind_many_into_container(t, src, target, k, SUPPLY_ATTRS, &done, err);
		if (r < 0 && done < k)
			orh_err_prefix(err, "mounting the node's file at %s", what[done]);
		res->mounted = (unsigned)done;
	}
	for (size_t i = 0; i < k; i++) {
		close(src[i]);
		close(target[i]);
		res->ours[at[i]] = i < done;
	}
	if (r < 0) /* nothing half-done: the mounts made go, and their mount points */
		orh_supply_undo(t, rootfd, m, n, res);
	return r;
}

/* ---- undone ----------------------------------------------------------------------- */

struct undo_args {
	const struct orh_target *t;
	int rootfd;
	uint64_t rootmnt;
	const struct orh_supply_mount *m;
	size_t n;
	const struct orh_supply_result *res;
	char msg[8];
};

/* In the child, in the container's mount namespace: each mount of ours at its destination
 * detached (its fd's magic link names the mount itself, no path is looked up again). */
static int undo_child(void *p)
{
	struct undo_args *a = p;
	int r = orh_enter_mntns(a->t);

	for (size_t i = 0; r == 0 && i < a->n && i < ORH_SUPPLY_MAX_MOUNTS; i++) {
		_cleanup_close_ int dirfd = -1, fd = -1;
		char name[NAME_MAX + 1], proc[64];
		struct orh_err look = { 0 };
		uint64_t id = 0;

		if (!a->res->ours[i] ||
		    orh_rootfs_parent(a->rootfd, a->m[i].dst, false, a->rootmnt, &dirfd, name,
				      &look) < 0)
			continue;
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || orh_fd_mount_id(fd, &id) < 0 || id == a->rootmnt)
			continue;
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		umount2(proc, MNT_DETACH);
	}
	return r;
}

void orh_supply_undo(const struct orh_target *t, int rootfd, const struct orh_supply_mount *m,
		     size_t n, struct orh_supply_result *res)
{
	struct undo_args a = { .t = t, .rootfd = rootfd, .m = m, .n = n, .res = res };
	struct orh_err err = { 0 };
	bool any = false;
	int rc = 0;

	if (orh_fd_mount_id(rootfd, &a.rootmnt) < 0)
		return;
	for (size_t i = 0; i < n && i < ORH_SUPPLY_MAX_MOUNTS; i++)
		any = any || res->ours[i];
	if (any)
		orh_run_in_child(undo_child, &a, a.msg, sizeof(a.msg), &rc, &err);
	for (size_t i = 0; i < n && i < ORH_SUPPLY_MAX_MOUNTS; i++) {
		if (res->made[i])
			unmake(rootfd, a.rootmnt, m[i].dst);
		res->ours[i] = res->made[i] = false;
	}
	res->mounted = 0;
}

/* ---- the loader's cache --------------------------------------------------------- */

struct cache_args {
	const struct orh_target *t;
	int rootfd;
	const struct orh_supply *s;
	uint64_t rootmnt;
	char msg[ORH_ERR_MAX];
};

static int cache_fail(struct cache_args *a, int e, const char *what)
{
	snprintf(a->msg, sizeof(a->msg), "%s: %s", what, strerror(e));
	return -e;
}

/* In the child: the container's mount namespace, then no capability. */
static int cache_child(void *p)
{
	struct cache_args *a = p;
	struct orh_ldcache_add add[ORH_SUPPLY_MAX_FILES + 1];
	char paths[ORH_SUPPLY_MAX_FILES][ORH_IMAGE_PATH_MAX];
	_cleanup_close_ int dirfd = -1, old = -1;
	_cleanup_free_ char *data = NULL;
	struct orh_replace how = { .type = S_IFREG, .mode = 0644, .durable = false };
	struct orh_err err = { 0 };
	char name[NAME_MAX + 1];
	const char *why = NULL;
	struct stat st;
	size_t len = 0, n = 0;
	int r = orh_enter_mntns(a->t);

	if (r < 0)
		return cache_fail(a, -r, "entering the container's mount namespace");
	if (orh_caps_limit(ORH_PRIVS_NONE, &err) < 0) {
		snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
		return -EPERM;
	}
	for (size_t i = 0; i < a->s->n_files; i++) {
		/* the libraries by their names; a provider is found by its driver file */
		if (strstr(a->s->files[i]->name, "-rdmav"))
			continue;
		snprintf(paths[i], sizeof(paths[i]), ORH_SUPPLY_DIR "/%s", a->s->files[i]->name);
		add[n].name = a->s->files[i]->name;
		add[n].path = paths[i];
		n++;
		/* NCCL opens "libibverbs.so" first: an image's development link of that name
		 * must not lead its loader to the image's own */
		if (!strcmp(a->s->files[i]->name, "libibverbs.so.1")) {
			add[n].name = "libibverbs.so";
			add[n].path = paths[i];
			n++;
		}
	}
	r = orh_rootfs_open_file(a->rootfd, "/etc/ld.so.cache", &old, &st);
	if (r < 0 && r != -ENOENT)
		return cache_fail(a, -r, "opening /etc/ld.so.cache");
	r = orh_ldcache_merge(old, add, n, &data, &len, &why);
	if (r == -EINVAL) {
		/* a cache its loader does not read either, or one that merged would be past the
		 * reader's limit: ours alone */
		r = orh_ldcache_merge(-1, add, n, &data, &len, &why);
	}
	if (r < 0)
		return cache_fail(a, -r, "building the cache");
	/* /etc of the container's own root filesystem, never another mount's */
	r = orh_rootfs_parent(a->rootfd, "/etc/ld.so.cache", false, a->rootmnt, &dirfd, name,
			      &err);
	if (r < 0) {
		snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
		return r;
	}
	how.data = data;
	how.len = len;
	how.what = "/etc/ld.so.cache";
	r = orh_replace_at(dirfd, name, &how, &err);
	if (r < 0) {
		snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
		return r;
	}
	return 0;
}

int orh_supply_ldcache(const struct orh_target *t, int rootfd, const struct orh_supply *s,
		       struct orh_supply_result *res, struct orh_err *err)
{
	struct cache_args a = { .t = t, .rootfd = rootfd, .s = s };
	int rc = 0, r;

	if (!s->supply || !s->verbs)
		return 0;
	r = orh_fd_mount_id(rootfd, &a.rootmnt);
	if (r < 0)
		return orh_fail_errno(err, -r, "reading the mount of the container's root");
	r = orh_run_in_child(cache_child, &a, a.msg, sizeof(a.msg), &rc, err);
	if (r < 0)
		return orh_err_prefix(err, "rewriting /etc/ld.so.cache");
	if (rc < 0)
		return orh_fail(err, -rc, "rewriting /etc/ld.so.cache: %s", a.msg);
	res->cache = true;
	return 0;
}

int orh_supply_give_live(const struct orh_target *t, int rootfd, const struct orh_supply *s,
			 const struct orh_supply_mount *m, size_t n, const char *host_dir,
			 struct orh_supply_result *res, struct orh_err *err)
{
	/* the node's files first (the same for every container), then only the container's
	 * own storage: everything checked before anything is made in it */
	int r = orh_supply_host_files(s, host_dir, err);

	memset(res, 0, sizeof(*res));
	if (r == 0)
		r = orh_supply_check_live(t, rootfd, s, m, n, err);
	if (r == 0)
		r = orh_supply_mount_live(t, rootfd, m, n, res, err);
	if (r == 0 && orh_supply_ldcache(t, rootfd, s, res, err) < 0) {
		orh_supply_undo(t, rootfd, m, n, res);
		r = -err->code;
	}
	return r;
}

void orh_supply_not_given(struct orh_supply *s, const struct orh_err *err)
{
	s->supply = false;
	snprintf(s->why_not, sizeof(s->why_not), "not given: %s", err->msg);
}
