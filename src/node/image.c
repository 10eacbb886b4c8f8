/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image's RDMA userspace and NCCL (include/orh/node/image.h), read as the container's own
 * loader, libibverbs and Python would find them, from its root's fd: the provider each
 * device needs, libibverbs and its providers here; the files reached through
 * image_read.c, NCCL through image_nccl.c.
 *
 * libibverbs (rdma-core's libibverbs/init.c, dynamic_driver.c): it reads every regular file
 * of /etc/libibverbs.d for "driver NAME" lines; a NAME is loaded as
 * <provider dir>/lib<NAME>-rdmav<N>.so, else lib<NAME>-rdmav<N>.so on the loader's path,
 * an absolute NAME as NAME-rdmav<N>.so; N is the private ABI its libibverbs.so.1 defines
 * (the version IBVERBS_PRIVATE_<N>, which a provider of that ABI needs).
  */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/node/image.h"
#include "orh/base/rootfs.h"
#include "image_elf.h"
#include "image_nccl.h"
#include "image_read.h"

#define CONFIG_DIR "/etc/libibverbs.d"
#define MAX_ENV_DIRS 8

static const struct {
	const char *driver;   /* the kernel driver of the device (its PCI function's) */
	const char *provider;
} by_driver[] = {
	{ "mlx5_core", "mlx5" },   { "mlx4_core", "mlx4" },   { "erdma", "erdma" },
	{ "efa", "efa" },          { "irdma", "irdma" },      { "i40e", "irdma" },
	{ "ice", "irdma" },        { "bnxt_en", "bnxt_re" },  { "qede", "qedr" },
	{ "hns3", "hns" },         { "hns_roce_hw_v2", "hns" }, { "mana", "mana" },
	{ "cxgb4", "cxgb4" },      { "vmw_pvrdma", "vmw_pvrdma" }, { "hfi1", "hfi1verbs" },
	{ "ib_qib", "ipathverbs" }, { "ib_mthca", "mthca" },  { "be2net", "ocrdma" },
	{ "ocrdma", "ocrdma" },
};

/* PCI vendors whose devices have one provider: where the driver link is not read. */
static const struct {
	unsigned vendor;
	const char *provider;
} by_vendor[] = {
	{ 0x15b3, "mlx5" },  /* Mellanox/NVIDIA: mlx4 is told by its driver */
	{ 0x1ded, "erdma" }, /* Alibaba */
	{ 0x1d0f, "efa" },   /* Amazon */
};

const char *orh_image_provider_of(const struct orh_device *dev)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(by_driver); i++)
		if (!strcmp(dev->driver, by_driver[i].driver))
			return by_driver[i].provider;
	if (dev->driver[0])
		return NULL;
	for (size_t i = 0; dev->pci[0] && i < ORH_ARRAY_SIZE(by_vendor); i++)
		if (dev->vendor == by_vendor[i].vendor)
			return by_vendor[i].provider;
	/* a device of no bus: soft-RoCE and soft-iWARP, which rdma-core matches by the
	 * kernel's driver id; their names are the kernel's "rxe"/"siw" ones or chosen
	 * at `rdma link add`, where the prefix is the convention */
	if (!dev->pci[0] && orh_startswith(dev->name, "rxe"))
		return "rxe";
	if (!dev->pci[0] && orh_startswith(dev->name, "siw"))
		return "siw";
	return NULL;
}

const char *orh_provider_state_name(enum orh_provider_state s)
{
	switch (s) {
	case ORH_PROVIDER_FOUND:
		return "found";
	case ORH_PROVIDER_NO_VERBS:
		return "missing: no libibverbs";
	case ORH_PROVIDER_NO_CONFIG:
		return "missing: no driver file";
	case ORH_PROVIDER_NO_LIBRARY:
		return "missing: no provider library";
	case ORH_PROVIDER_ABI_MISMATCH:
		return "ABI mismatch";
	}
	return "?";
}

/* ---- libibverbs and its providers ------------------------------------------------- */

/* The "driver NAME" lines of one config file's text, in order, into names. */
static void driver_lines(char *text, struct orh_strv *names, struct orh_strv *files,
			 const char *file)
{
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *p = line + strspn(line, " \t"), *end;

		if (strncmp(p, "driver", 6) || (p[6] != ' ' && p[6] != '\t'))
			continue;
		p += 6 + strspn(p + 6, " \t");
		end = p + strcspn(p, " \t\r#");
		*end = '\0';
		if (!*p)
			continue;
		orh_strv_pushf(names, "%s", p);
		orh_strv_pushf(files, "%s", file);
	}
}

/* Every regular file of the config dir, as libibverbs reads them; names and the file of
 * each. */
static void read_config_dir(struct image_reader *rd, struct orh_strv *names, struct orh_strv *files)
{
	_cleanup_dir_ DIR *dir = orh_image_open_dir(rd, CONFIG_DIR);
	struct dirent *de;
	size_t seen = 0;

	if (!dir)
		return;
	while ((de = readdir(dir)) && seen < ORH_IMAGE_MAX_DIRENTS) {
		char path[ORH_IMAGE_PATH_MAX], buf[ORH_IMAGE_DRIVER_FILE_MAX + 1];
		_cleanup_close_ int fd = -1;
		struct stat st;
		ssize_t n;

		seen++;
		/* libibverbs reads every regular file, hidden ones too */
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (rd->img->n_driver_files >= ORH_IMAGE_MAX_DRIVER_FILES) {
			orh_strv_pushf(&rd->img->notes, "%s: more than %d files: the rest not read",
				       CONFIG_DIR, ORH_IMAGE_MAX_DRIVER_FILES);
			break;
		}
		snprintf(path, sizeof(path), CONFIG_DIR "/%s", de->d_name);
		if (orh_image_open_file(rd, path, &fd) < 0)
			continue;
		rd->img->n_driver_files++;
		if (fstat(fd, &st) < 0 || st.st_size > ORH_IMAGE_DRIVER_FILE_MAX) {
			orh_strv_pushf(&rd->img->notes, "'%s' is larger than %d bytes: not read",
				       path, ORH_IMAGE_DRIVER_FILE_MAX);
			continue;
		}
		n = read(fd, buf, ORH_IMAGE_DRIVER_FILE_MAX);
		if (n < 0)
			continue;
		buf[n] = '\0';
		driver_lines(buf, names, files, path);
	}
}

/* The provider dirs to look in: where libibverbs is, then MOFED's and Debian's. */
static size_t provider_dirs(const struct orh_image *img, char dirs[3][ORH_IMAGE_PATH_MAX])
{
	static const char *const known[] = { "/usr/lib64/libibverbs",
					     "/usr/lib/" MULTIARCH "/libibverbs" };
	size_t n = 0;

	if (img->provider_dir[0])
		snprintf(dirs[n++], ORH_IMAGE_PATH_MAX, "%s", img->provider_dir);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(known); i++)
		if (strcmp(known[i], img->provider_dir))
			snprintf(dirs[n++], ORH_IMAGE_PATH_MAX, "%s", known[i]);
	return n;
}

/* lib<name>-rdmav<N>.so, any N, in the directory dir: the first other ABI found. */
static bool other_abi(struct image_reader *rd, const char *dir, const char *name,
		      struct orh_image_provider *p)
{
	_cleanup_dir_ DIR *d = orh_image_open_dir(rd, dir);
	char prefix[64];
	struct dirent *de;
	size_t seen = 0;

	if (!d)
		return false;
	snprintf(prefix, sizeof(prefix), "lib%s-rdmav", name);
	while ((de = readdir(d)) && seen++ < ORH_IMAGE_MAX_DIRENTS) {
		unsigned v = 0;
		int end = 0;

		if (strncmp(de->d_name, prefix, strlen(prefix)) ||
		    sscanf(de->d_name + strlen(prefix), "%u.so%n", &v, &end) != 1 ||
		    de->d_name[strlen(prefix) + (size_t)end] != '\0')
			continue;
		snprintf(p->other, sizeof(p->other), "%s/%s", dir, de->d_name);
		p->other_abi = v;
		return true;
	}
	return false;
}

/* Does the provider library at path load with this libibverbs: the private ABI it needs
 * is the one libibverbs defines (where both are told). */
static bool library_fits(struct image_reader *rd, const char *path, struct orh_image_provider *p)
{
	_cleanup_close_ int fd = -1;
	unsigned need = 0;
	int r;

	if (orh_image_open_file(rd, path, &fd) < 0)
		return false;
	snprintf(p->library, sizeof(p->library), "%s", path);
	r = rd->img->abi ? orh_elf_private_abi(fd, false, &need, &rd->img->cost) : 0;
	/* a need not told (not an ELF file read here, or past its budget): libibverbs tries */
	if (!rd->img->abi || orh_image_over(rd->img, r, path) || r < 0 || need == rd->img->abi)
		return true;
	snprintf(p->other, sizeof(p->other), "%s", path);
	p->other_abi = need;
	return false;
}

static void find_provider(struct image_reader *rd, const char *name, const struct orh_strv *names,
			  const struct orh_strv *files, struct orh_image_provider *p)
{
	char dirs[3][ORH_IMAGE_PATH_MAX], path[ORH_IMAGE_PATH_MAX], found[ORH_IMAGE_PATH_MAX];
	char suffix[32];
	const char *given = NULL;
	size_t nd;
	bool cache;

	snprintf(p->name, sizeof(p->name), "%s", name);
	if (!rd->img->verbs[0]) {
		p->state = ORH_PROVIDER_NO_VERBS;
		return;
	}
	/* the config names it: "driver mlx5", or an absolute ".../libmlx5" */
	for (size_t i = 0; i < names->n && !given; i++) {
		const char *base = strrchr(names->v[i], '/');

		base = base ? base + 1 : names->v[i];
		bool absolute = names->v[i][0] == '/' && orh_startswith(base, "lib") &&
				!strcmp(base + 3, name);

		if (!strcmp(names->v[i], name) || absolute) {
			given = names->v[i];
			snprintf(p->config, sizeof(p->config), "%s", files->v[i]);
		}
	}
	if (!given) {
		p->state = ORH_PROVIDER_NO_CONFIG;
		return;
	}
	if (rd->img->abi)
		snprintf(suffix, sizeof(suffix), "-rdmav%u.so", rd->img->abi);
	else
		snprintf(suffix, sizeof(suffix), "-rdmav*.so");
	nd = provider_dirs(rd->img, dirs);
	if (given[0] == '/') {
		snprintf(path, sizeof(path), "%s%s", given, suffix);
		snprintf(p->library, sizeof(p->library), "%s", path);
		p->state = rd->img->abi && library_fits(rd, path, p) ? ORH_PROVIDER_FOUND
			 : p->other[0] ? ORH_PROVIDER_ABI_MISMATCH : ORH_PROVIDER_NO_LIBRARY;
		return;
	}
	snprintf(p->library, sizeof(p->library), "%s/lib%s%s", dirs[0], name, suffix);
	if (rd->img->abi) {
		for (size_t i = 0; i < nd; i++) {
			snprintf(path, sizeof(path), "%s/lib%s%s", dirs[i], name, suffix);
			if (library_fits(rd, path, p)) {
				p->state = ORH_PROVIDER_FOUND;
				return;
			}
		}
		snprintf(path, sizeof(path), "lib%s%s", name, suffix);
		if (orh_image_loader_find(rd, path, found, sizeof(found), &cache) &&
		    library_fits(rd, found, p)) {
			p->state = ORH_PROVIDER_FOUND;
			return;
		}
	}
	/* none of this ABI: one of another, or (ABI not told) any */
	for (size_t i = 0; i < nd && !p->other[0]; i++)
		other_abi(rd, dirs[i], name, p);
	if (!rd->img->abi && p->other[0]) {
		orh_strlcpy(p->library, p->other, sizeof(p->library));
		p->other[0] = '\0';
		p->state = ORH_PROVIDER_FOUND;
		return;
	}
	p->state = p->other[0] ? ORH_PROVIDER_ABI_MISMATCH : ORH_PROVIDER_NO_LIBRARY;
}

static void read_verbs(struct image_reader *rd, const char *const *providers, size_t n)
{
	struct orh_image *img = rd->img;
	_cleanup_close_ int fd = -1;
	struct orh_strv names = { 0 }, files = { 0 };
	const char *slash;
	int r;

	if (orh_image_loader_find(rd, "libibverbs.so.1", img->verbs, sizeof(img->verbs),
			&img->verbs_from_cache)) {
		if (orh_image_open_file(rd, img->verbs, &fd) == 0) {
			r = orh_elf_private_abi(fd, true, &img->abi, &img->cost);
			if (r < 0 && !orh_image_over(rd->img, r, img->verbs))
				orh_strv_pushf(&img->notes, "'%s': %s: its private ABI is not told",
					       img->verbs, r == -ENOENT ? "no IBVERBS_PRIVATE_ "
					       "version" : "not an ELF file read here");
		}
		/* the provider dir beside it: <its directory>/libibverbs */
		slash = strrchr(img->verbs, '/');
		snprintf(img->provider_dir, sizeof(img->provider_dir), "%.*s/libibverbs",
			 (int)(slash ? slash - img->verbs : 0), img->verbs);
		read_config_dir(rd, &names, &files);
	}
	for (size_t i = 0; i < n && img->n_providers < ORH_IMAGE_MAX_PROVIDERS; i++) {
		bool seen = false;

		for (size_t k = 0; k < img->n_providers; k++)
			seen = seen || !strcmp(img->providers[k].name, providers[i]);
		if (!seen)
			find_provider(rd, providers[i], &names, &files,
				      &img->providers[img->n_providers++]);
	}
	orh_strv_free(&names);
	orh_strv_free(&files);
}

void orh_image_read(int rootfd, const char *const *providers, size_t n_providers,
		    const char *const *env, size_t n_env, struct orh_image *img)
{
	struct image_reader rd = { .rootfd = rootfd, .img = img, .cachefd = -1 };
	double t0 = orh_now_ms();
	const char *ldp = orh_image_env_get(env, n_env, "LD_LIBRARY_PATH");
	char dirs[512];

	/* where the loader looks first: at most MAX_ENV_DIRS entries of LD_LIBRARY_PATH */
	if (ldp) {
		snprintf(dirs, sizeof(dirs), "%s", ldp);
		for (size_t i = 0, k = 0; dirs[i]; i++)
			if (dirs[i] == ':' && ++k >= MAX_ENV_DIRS)
				dirs[i] = '\0';
		rd.ld_library_path = dirs;
	}

	memset(img, 0, sizeof(*img));
	img->read = true;
	read_verbs(&rd, providers, n_providers);
	orh_image_nccl_read(&rd, env, n_env);
	if (rd.cachefd >= 0)
		close(rd.cachefd);
	img->ms = orh_now_ms() - t0;
}

void orh_image_free(struct orh_image *img)
{
	orh_strv_free(&img->notes);
	memset(img, 0, sizeof(*img));
}
