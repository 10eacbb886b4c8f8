/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image's files as its own loader would reach them (image_read.h), from its root's fd:
 * each open counted, and a library looked up as glibc's loader does, LD_LIBRARY_PATH, then
 * /etc/ld.so.cache (image_cache.c), then the loader's own directories.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/base/rootfs.h"
#include "image_elf.h"
#include "image_read.h"

/* The loader's own directories, searched after its cache (glibc's, with Debian's
 * multiarch ones first). */
static const char *const std_dirs[] = {
	"/lib/" MULTIARCH, "/usr/lib/" MULTIARCH, "/lib64", "/usr/lib64", "/lib", "/usr/lib",
};



int orh_image_open_file(struct image_reader *rd, const char *path, int *fd)
{
	struct stat st;
	int r;

	rd->img->opens++;
	r = orh_rootfs_open_file(rd->rootfd, path, fd, &st);
	if (r == -EINVAL)
		orh_strv_pushf(&rd->img->notes, "'%s' is not a regular file: not read", path);
	return r;
}

/* Is path there (a file, through any link inside the root)? */
bool orh_image_exists(struct image_reader *rd, const char *path)
{
	int fd = -1;

	if (orh_image_open_file(rd, path, &fd) < 0)
		return false;
	close(fd);
	return true;
}

/* The directory path, open for reading its entries (NULL where it is not there). */
DIR *orh_image_open_dir(struct image_reader *rd, const char *path)
{
	struct orh_err err = { 0 };
	_cleanup_close_ int pfd = -1;
	int fd;
	DIR *d;

	rd->img->opens++;
	if (orh_rootfs_dir(rd->rootfd, path, false, ORH_MOUNT_ANY, &pfd, &err) < 0)
		return NULL;
	rd->img->opens++;
	fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}


/* Where the image's loader finds name: the container's LD_LIBRARY_PATH, its ld.so.cache,
 * then its own directories; the in-root path into out. */
bool orh_image_loader_find(struct image_reader *rd, const char *name, char *out, size_t size,
			bool *from_cache)
{
	const char *why = NULL;
	int r;

	*from_cache = false;
	/* LD_LIBRARY_PATH first, as the loader searches it (its absolute entries) */
	for (const char *p = rd->ld_library_path; p && *p;) {
		size_t len = strcspn(p, ":");

		if (p[0] == '/' && len + 1 + strlen(name) < size) {
			snprintf(out, size, "%.*s/%s", (int)len, p, name);
			if (orh_image_exists(rd, out))
				return true;
		}
		p += len + (p[len] == ':');
	}
	if (!rd->cache_tried) {
		rd->cache_tried = true;
		if (orh_image_open_file(rd, "/etc/ld.so.cache", &rd->cachefd) < 0)
			rd->cachefd = -1;
	}
	if (rd->cachefd >= 0) {
		r = orh_ldcache_lookup(rd->cachefd, name, out, size, &rd->img->cost, &why);
		if (r < 0) {
			if (!orh_image_over(rd->img, r, "/etc/ld.so.cache"))
				orh_strv_pushf(&rd->img->notes, "/etc/ld.so.cache: %s: the "
					       "loader's own directories were searched",
					       why ? why : "not readable");
			close(rd->cachefd);
			rd->cachefd = -1;
		} else if (r == 1 && out[0] == '/' && orh_image_exists(rd, out)) {
			*from_cache = true;
			return true;
		}
	}
	for (size_t i = 0; i < ORH_ARRAY_SIZE(std_dirs); i++) {
		snprintf(out, size, "%s/%s", std_dirs[i], name);
		if (orh_image_exists(rd, out))
			return true;
	}
	out[0] = '\0';
	return false;
}

const char *orh_image_env_get(const char *const *env, size_t n, const char *name)
{
	size_t len = strlen(name);
	const char *v = NULL;

	/* the last entry of a name is the one the process gets */
	for (size_t i = 0; i < n; i++)
		if (env[i] && !strncmp(env[i], name, len) && env[i][len] == '=')
			v = env[i] + len + 1;
	return v;
}
