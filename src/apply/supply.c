/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supply verdict applied (include/orh/supply.h): mounts, as spec entries or into a
 * live container, and the container's loader cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/atomic.h"
#include "orh/mount.h"
#include "orh/rootfs.h"
#include "orh/sandbox.h"
#include "orh/supply.h"

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

/* The mount point of dst in the container's root: a regular file, made empty where there
 * is none (as a runtime makes one); *out an O_PATH fd to it. */
static int mount_point(int rootfd, const char *dst, int *out, struct orh_err *err)
{
	_cleanup_close_ int dirfd = -1;
	char name[NAME_MAX + 1];
	struct stat st;
	int r = orh_rootfs_parent(rootfd, dst, true, ORH_MOUNT_ANY, &dirfd, name, err);
	int fd;

	if (r < 0)
		return r;
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	else if (errno != EEXIST)
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

int orh_supply_mount_live(const struct orh_target *t, int rootfd,
			  const struct orh_supply_mount *m, size_t n,
			  struct orh_supply_result *res, struct orh_err *err)
{
	int src[ORH_SUPPLY_MAX_MOUNTS], target[ORH_SUPPLY_MAX_MOUNTS];
	const char *what[ORH_SUPPLY_MAX_MOUNTS];
	size_t k = 0, done = 0;
	int r = 0;

	memset(res, 0, sizeof(*res));
	for (size_t i = 0; i < n && i < ORH_SUPPLY_MAX_MOUNTS && r == 0; i++) {
		struct stat sst, tst;
		int fd = open(m[i].src, O_RDONLY | O_CLOEXEC), tfd = -1;

		if (fd < 0) {
			r = orh_fail_errno(err, errno, "opening '%s'", m[i].src);
			break;
		}
		r = mount_point(rootfd, m[i].dst, &tfd, err);
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
	}
	return r;
}

/* ---- the loader's cache --------------------------------------------------------- */

struct cache_args {
	const struct orh_target *t;
	int rootfd;
	const struct orh_supply *s;
	char msg[256];
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
		/* a cache its loader does not read either: ours alone */
		r = orh_ldcache_merge(-1, add, n, &data, &len, &why);
	}
	if (r < 0)
		return cache_fail(a, -r, "building the cache");
	r = orh_rootfs_parent(a->rootfd, "/etc/ld.so.cache", false, ORH_MOUNT_ANY, &dirfd, name, &err);
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
	r = orh_run_in_child(cache_child, &a, a.msg, sizeof(a.msg), &rc, err);
	if (r < 0)
		return orh_err_prefix(err, "rewriting /etc/ld.so.cache");
	if (rc < 0)
		return orh_fail(err, -rc, "rewriting /etc/ld.so.cache: %s", a.msg);
	res->cache = true;
	return 0;
}
