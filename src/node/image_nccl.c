/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL in the image (image_nccl.h): apt's libnccl.so.2 names its version in its link's
 * target (libnccl.so.2.X.Y); pip's in its dist-info directory
 * (nvidia_nccl_cu12-X.Y.Z.dist-info). PyTorch preloads pip's from the first sys.path entry
 * holding nvidia/nccl/lib: PYTHONPATH's, then the environment's (a venv or conda, as PATH
 * or VIRTUAL_ENV names it), then the system's.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "orh/base/rootfs.h"
#include "image_nccl.h"

#define MAX_SITE_DIRS 12
#define MAX_ENV_DIRS 8


static bool parse_version(const char *s, struct orh_image_nccl *c)
{
	int end = 0;

	if (sscanf(s, "%u.%u.%u%n", &c->v[0], &c->v[1], &c->v[2], &end) != 3)
		return false;
	snprintf(c->version, sizeof(c->version), "%u.%u.%u", c->v[0], c->v[1], c->v[2]);
	return true;
}

static struct orh_image_nccl *nccl_add(struct orh_image *img)
{
	if (img->n_nccl >= ORH_IMAGE_MAX_NCCL)
		return NULL;
	memset(&img->nccl[img->n_nccl], 0, sizeof(img->nccl[0]));
	return &img->nccl[img->n_nccl++];
}

/* apt's (or a CUDA image's): libnccl.so.2 where the loader finds it, its version in the
 * name of the file its link leads to. */
static void nccl_library(struct image_reader *rd)
{
	char path[ORH_IMAGE_PATH_MAX], target[ORH_IMAGE_PATH_MAX];
	struct orh_image_nccl *c;
	const char *base;
	bool cache;

	if (!orh_image_loader_find(rd, "libnccl.so.2", path, sizeof(path), &cache) ||
	    !(c = nccl_add(rd->img)))
		return;
	c->from = ORH_NCCL_LIBRARY;
	snprintf(c->path, sizeof(c->path), "%s", path);
	rd->img->opens++;
	if (orh_rootfs_readlink(rd->rootfd, path, target, sizeof(target)) < 0)
		return;
	base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	if (orh_startswith(base, "libnccl.so."))
		parse_version(base + strlen("libnccl.so."), c);
}

/* pip's in one sys.path directory: nvidia_nccl_cuNN-X.Y.Z.dist-info. */
static void nccl_pip(struct image_reader *rd, const char *site)
{
	_cleanup_dir_ DIR *d = orh_image_open_dir(rd, site);
	struct dirent *de;
	size_t seen = 0;

	if (!d)
		return;
	while ((de = readdir(d)) && seen++ < ORH_IMAGE_MAX_DIRENTS) {
		const char *dash = strchr(de->d_name, '-');
		size_t n = strlen(de->d_name);
		struct orh_image_nccl c = { .from = ORH_NCCL_PIP };
		struct orh_image_nccl *slot;

		if (!orh_startswith(de->d_name, "nvidia_nccl_cu") || !dash ||
		    n < strlen(".dist-info") || strcmp(de->d_name + n - 10, ".dist-info") ||
		    (size_t)(dash - de->d_name) >= sizeof(c.package) ||
		    !parse_version(dash + 1, &c))
			continue;
		snprintf(c.package, sizeof(c.package), "%.*s", (int)(dash - de->d_name),
			 de->d_name);
		snprintf(c.path, sizeof(c.path), "%s/%s", site, de->d_name);
		slot = nccl_add(rd->img);
		if (slot)
			*slot = c;
	}
}

/* The python3.X directories in dir (a venv's or the system's lib): their site-packages
 * or dist-packages into sites. */
static void python_dirs(struct image_reader *rd, const char *dir, const char *const *kinds,
			size_t n_kinds, struct orh_strv *sites)
{
	_cleanup_dir_ DIR *d = orh_image_open_dir(rd, dir);
	struct dirent *de;
	size_t seen = 0;

	if (!d)
		return;
	while ((de = readdir(d)) && seen++ < ORH_IMAGE_MAX_DIRENTS && sites->n < MAX_SITE_DIRS) {
		if (!orh_startswith(de->d_name, "python3"))
			continue;
		for (size_t k = 0; k < n_kinds; k++)
			orh_strv_pushf(sites, "%s/%s/%s", dir, de->d_name, kinds[k]);
	}
}

static bool system_bin(const char *dir)
{
	static const char *const sys[] = { "/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
					   "/usr/bin", "/sbin", "/bin" };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(sys); i++)
		if (!strcmp(dir, sys[i]))
			return true;
	return false;
}

/* sys.path's directories in the order Python puts them: PYTHONPATH's, the environment's
 * (VIRTUAL_ENV, then PATH's .../bin of a venv or conda, then /opt/conda), then the
 * system's. */
static void site_dirs(struct image_reader *rd, const char *const *env, size_t n_env,
		      struct orh_strv *sites)
{
	static const char *const site[] = { "site-packages" };
	static const char *const local[] = { "dist-packages", "site-packages" };
	const char *pp = orh_image_env_get(env, n_env, "PYTHONPATH");
	const char *venv = orh_image_env_get(env, n_env, "VIRTUAL_ENV");
	const char *path = orh_image_env_get(env, n_env, "PATH");
	char lib[ORH_IMAGE_PATH_MAX];
	size_t k = 0;

	for (const char *p = pp; p && *p && k < MAX_ENV_DIRS; k++) {
		size_t len = strcspn(p, ":");

		if (p[0] == '/' && len < ORH_IMAGE_PATH_MAX)
			orh_strv_pushf(sites, "%.*s", (int)len, p);
		p += len + (p[len] == ':');
	}
	if (venv && venv[0] == '/' && strlen(venv) < ORH_IMAGE_PATH_MAX - 8) {
		snprintf(lib, sizeof(lib), "%s/lib", venv);
		python_dirs(rd, lib, site, 1, sites);
	}
	k = 0;
	for (const char *p = path; p && *p && k < MAX_ENV_DIRS; k++) {
		size_t len = strcspn(p, ":");
		char dir[ORH_IMAGE_PATH_MAX];

		snprintf(dir, sizeof(dir), "%.*s", (int)len, p);
		/* a venv's or conda's bin: its lib/python3.X/site-packages (VIRTUAL_ENV's
		 * was read above) */
		if (dir[0] == '/' && len > 4 && len < ORH_IMAGE_PATH_MAX - 8 &&
		    !strcmp(dir + len - 4, "/bin") && !system_bin(dir) &&
		    (!venv || strncmp(dir, venv, len - 4) || venv[len - 4])) {
			snprintf(lib, sizeof(lib), "%.*s/lib", (int)(len - 4), dir);
			python_dirs(rd, lib, site, 1, sites);
		}
		p += len + (p[len] == ':');
	}
	python_dirs(rd, "/opt/conda/lib", site, 1, sites);
	python_dirs(rd, "/usr/local/lib", local, 2, sites);
	if (sites->n < MAX_SITE_DIRS)
		orh_strv_pushf(sites, "/usr/lib/python3/dist-packages");
}

void orh_image_nccl_read(struct image_reader *rd, const char *const *env, size_t n_env)
{
	struct orh_strv sites = { 0 };
	bool marked = false;

	site_dirs(rd, env, n_env, &sites);
	for (size_t i = 0; i < sites.n; i++) {
		bool again = false;

		for (size_t k = 0; k < i; k++)
			again = again || !strcmp(sites.v[k], sites.v[i]);
		if (!again)
			nccl_pip(rd, sites.v[i]);
	}
	orh_strv_free(&sites);
	nccl_library(rd);
	/* PyTorch: pip's copy first in sys.path, else the one the loader finds */
	for (size_t i = 0; i < rd->img->n_nccl && !marked; i++)
		if (rd->img->nccl[i].from == ORH_NCCL_PIP)
			marked = rd->img->nccl[i].pytorch = true;
	for (size_t i = 0; i < rd->img->n_nccl && !marked; i++)
		marked = rd->img->nccl[i].pytorch = true;
}
