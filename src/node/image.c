/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image's RDMA userspace and NCCL (include/orh/image.h), read as the container's own
 * loader, libibverbs and Python would find them, from its root's fd.
 *
 * libibverbs (rdma-core's libibverbs/init.c, dynamic_driver.c): it reads every regular file
 * of /etc/libibverbs.d for "driver NAME" lines; a NAME is loaded as
 * <provider dir>/lib<NAME>-rdmav<N>.so, else lib<NAME>-rdmav<N>.so on the loader's path,
 * an absolute NAME as NAME-rdmav<N>.so; N is the private ABI its libibverbs.so.1 defines
 * (the version IBVERBS_PRIVATE_<N>, which a provider of that ABI needs).
 *
 * NCCL: apt's libnccl.so.2 names its version in its link's target (libnccl.so.2.X.Y); pip's
 * in its dist-info directory (nvidia_nccl_cu12-X.Y.Z.dist-info). PyTorch preloads pip's
 * from the first sys.path entry holding nvidia/nccl/lib: PYTHONPATH's, then the
 * environment's (a venv or conda, as PATH or VIRTUAL_ENV names it), then the system's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/image.h"
#include "orh/rootfs.h"
#include "image_elf.h"

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#elif defined(__powerpc64__)
#define MULTIARCH "powerpc64le-linux-gnu"
#else
#define MULTIARCH "unknown-linux-gnu"
#endif

/* The loader's own directories, searched after its cache (glibc's, with Debian's
 * multiarch ones first). */
static const char *const std_dirs[] = {
	"/lib/" MULTIARCH, "/usr/lib/" MULTIARCH, "/lib64", "/usr/lib64", "/lib", "/usr/lib",
};

#define CONFIG_DIR "/etc/libibverbs.d"
#define MAX_SITE_DIRS 12
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

/* ---- opening, counted ------------------------------------------------------------ */

struct reader {
	int rootfd;
	struct orh_image *img;
	const char *ld_library_path;  /* the container's LD_LIBRARY_PATH, or NULL */
	int cachefd;          /* the image's ld.so.cache; -1: none or broken */
	bool cache_tried;
};

static int open_file(struct reader *rd, const char *path, int *fd)
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
static bool exists(struct reader *rd, const char *path)
{
	int fd = -1;

	if (open_file(rd, path, &fd) < 0)
		return false;
	close(fd);
	return true;
}

/* The directory path, open for reading its entries (NULL where it is not there). */
static DIR *open_dir(struct reader *rd, const char *path)
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

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}
#define _cleanup_dir_ __attribute__((cleanup(closedirp)))

/* ---- the loader ---------------------------------------------------------------- */

/* Where the image's loader finds name: the container's LD_LIBRARY_PATH, its ld.so.cache,
 * then its own directories; the in-root path into out. */
static bool loader_find(struct reader *rd, const char *name, char *out, size_t size,
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
			if (exists(rd, out))
				return true;
		}
		p += len + (p[len] == ':');
	}
	if (!rd->cache_tried) {
		rd->cache_tried = true;
		if (open_file(rd, "/etc/ld.so.cache", &rd->cachefd) < 0)
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
		} else if (r == 1 && out[0] == '/' && exists(rd, out)) {
			*from_cache = true;
			return true;
		}
	}
	for (size_t i = 0; i < ORH_ARRAY_SIZE(std_dirs); i++) {
		snprintf(out, size, "%s/%s", std_dirs[i], name);
		if (exists(rd, out))
			return true;
	}
	out[0] = '\0';
	return false;
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
static void read_config_dir(struct reader *rd, struct orh_strv *names, struct orh_strv *files)
{
	_cleanup_dir_ DIR *dir = open_dir(rd, CONFIG_DIR);
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
		if (open_file(rd, path, &fd) < 0)
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
static bool other_abi(struct reader *rd, const char *dir, const char *name,
		      struct orh_image_provider *p)
{
	_cleanup_dir_ DIR *d = open_dir(rd, dir);
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
static bool library_fits(struct reader *rd, const char *path, struct orh_image_provider *p)
{
	_cleanup_close_ int fd = -1;
	unsigned need = 0;
	int r;

	if (open_file(rd, path, &fd) < 0)
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

static void find_provider(struct reader *rd, const char *name, const struct orh_strv *names,
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
		if (loader_find(rd, path, found, sizeof(found), &cache) &&
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

static void read_verbs(struct reader *rd, const char *const *providers, size_t n)
{
	struct orh_image *img = rd->img;
	_cleanup_close_ int fd = -1;
	struct orh_strv names = { 0 }, files = { 0 };
	const char *slash;
	int r;

	if (loader_find(rd, "libibverbs.so.1", img->verbs, sizeof(img->verbs),
			&img->verbs_from_cache)) {
		if (open_file(rd, img->verbs, &fd) == 0) {
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

/* ---- NCCL -------------------------------------------------------------------------- */

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
static void nccl_library(struct reader *rd)
{
	char path[ORH_IMAGE_PATH_MAX], target[ORH_IMAGE_PATH_MAX];
	struct orh_image_nccl *c;
	const char *base;
	bool cache;

	if (!loader_find(rd, "libnccl.so.2", path, sizeof(path), &cache) ||
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
static void nccl_pip(struct reader *rd, const char *site)
{
	_cleanup_dir_ DIR *d = open_dir(rd, site);
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
static void python_dirs(struct reader *rd, const char *dir, const char *const *kinds,
			size_t n_kinds, struct orh_strv *sites)
{
	_cleanup_dir_ DIR *d = open_dir(rd, dir);
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

static const char *env_get(const char *const *env, size_t n, const char *name)
{
	size_t len = strlen(name);
	const char *v = NULL;

	/* the last entry of a name is the one the process gets */
	for (size_t i = 0; i < n; i++)
		if (env[i] && !strncmp(env[i], name, len) && env[i][len] == '=')
			v = env[i] + len + 1;
	return v;
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
static void site_dirs(struct reader *rd, const char *const *env, size_t n_env,
		      struct orh_strv *sites)
{
	static const char *const site[] = { "site-packages" };
	static const char *const local[] = { "dist-packages", "site-packages" };
	const char *pp = env_get(env, n_env, "PYTHONPATH");
	const char *venv = env_get(env, n_env, "VIRTUAL_ENV");
	const char *path = env_get(env, n_env, "PATH");
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

static void read_nccl(struct reader *rd, const char *const *env, size_t n_env)
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

void orh_image_read(int rootfd, const char *const *providers, size_t n_providers,
		    const char *const *env, size_t n_env, struct orh_image *img)
{
	struct reader rd = { .rootfd = rootfd, .img = img, .cachefd = -1 };
	double t0 = orh_now_ms();
	const char *ldp = env_get(env, n_env, "LD_LIBRARY_PATH");
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
	read_nccl(&rd, env, n_env);
	if (rd.cachefd >= 0)
		close(rd.cachefd);
	img->ms = orh_now_ms() - t0;
}

void orh_image_free(struct orh_image *img)
{
	orh_strv_free(&img->notes);
	memset(img, 0, sizeof(*img));
}

/* ---- supply: the node's own stack -------------------------------------------------- */

/* glibc's own libraries: the image has them where it has glibc, never supplied */
static bool of_glibc(const char *name)
{
	static const char *const glibc[] = {
		"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
		"libresolv.so.2", "libutil.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
		"ld64.so.2", "ld-linux.so.2",
	};

	for (size_t i = 0; i < ORH_ARRAY_SIZE(glibc); i++)
		if (!strcmp(name, glibc[i]))
			return true;
	return false;
}

/* f->host's needs: its glibc version into f, its other libraries into hs->deps (each
 * once, found as the node's loader finds them), which are read in turn by the caller. */
static bool file_needs(struct reader *rd, struct orh_host_stack *hs, struct orh_supply_file *f,
		       bool of_verbs)
{
	_cleanup_close_ int fd = -1;
	struct orh_elf_deps deps;
	int r;

	if (open_file(rd, f->host, &fd) < 0) {
		snprintf(hs->why, sizeof(hs->why), "'%s' cannot be opened", f->host);
		return false;
	}
	r = orh_elf_deps(fd, &deps, &rd->img->cost);
	if (r < 0) {
		snprintf(hs->why, sizeof(hs->why), "'%s': %s%s", f->host,
			 r == -E2BIG ? "more libraries needed than are read" : r == -EDQUOT ?
			 "reading stopped at the budget of " : "not an ELF library read here",
			 r == -EDQUOT ? rd->img->cost.over : "");
		orh_image_over(rd->img, r, f->host);
		return false;
	}
	f->glibc = deps.glibc_needs;
	for (size_t i = 0; i < deps.n_needed; i++) {
		const char *name = deps.needed[i];
		struct orh_supply_file *d;
		bool seen = !strcmp(name, "libibverbs.so.1") || of_glibc(name), cache;

		for (size_t k = 0; k < hs->n_deps && !seen; k++) {
			seen = !strcmp(hs->deps[k].name, name);
			hs->deps[k].of_verbs = hs->deps[k].of_verbs || (seen && of_verbs);
		}
		if (seen)
			continue;
		if (hs->n_deps >= ORH_SUPPLY_MAX_DEPS) {
			snprintf(hs->why, sizeof(hs->why), "'%s' needs more than %d libraries",
				 f->host, ORH_SUPPLY_MAX_DEPS);
			return false;
		}
		d = &hs->deps[hs->n_deps];
		if (!loader_find(rd, name, d->host, sizeof(d->host), &cache)) {
			snprintf(hs->why, sizeof(hs->why), "'%s' needs %s, which the node's loader "
				 "does not find", f->host, name);
			return false;
		}
		snprintf(d->name, sizeof(d->name), "%s", name);
		d->of_verbs = of_verbs;
		hs->n_deps++;
	}
	return true;
}

void orh_supply_read(int hostfd, int rootfd, const char *const *providers, size_t n,
		     const char *const *env, size_t n_env, struct orh_host_stack *hs)
{
	struct reader host = { .rootfd = hostfd, .cachefd = -1 };
	struct reader image = { .rootfd = rootfd, .cachefd = -1 };
	struct orh_image scratch = { 0 };
	_cleanup_close_ int fd = -1;
	struct orh_elf_deps deps;
	bool ok, cache;
	int r;

	memset(hs, 0, sizeof(*hs));
	hs->read = true;
	orh_image_read(hostfd, providers, n, NULL, 0, &hs->host);
	host.img = &hs->host;
	if (hs->host.verbs[0]) {
		snprintf(hs->verbs.host, sizeof(hs->verbs.host), "%s", hs->host.verbs);
		snprintf(hs->verbs.name, sizeof(hs->verbs.name), "libibverbs.so.1");
		hs->verbs.of_verbs = true;
	}
	ok = !hs->verbs.host[0] || file_needs(&host, hs, &hs->verbs, true);
	for (size_t i = 0; ok && i < hs->host.n_providers; i++) {
		const struct orh_image_provider *p = &hs->host.providers[i];
		struct orh_supply_file *f = &hs->providers[i];

		if (p->state != ORH_PROVIDER_FOUND || !hs->host.abi)
			continue;
		snprintf(f->host, sizeof(f->host), "%s", p->library);
		snprintf(f->name, sizeof(f->name), "lib%s-rdmav%u.so", p->name, hs->host.abi);
		ok = file_needs(&host, hs, f, false);
	}
	/* the libraries' own: hs->deps grows as it is walked */
	for (size_t i = 0; ok && i < hs->n_deps; i++)
		ok = file_needs(&host, hs, &hs->deps[i], hs->deps[i].of_verbs);
	if (host.cachefd >= 0)
		close(host.cachefd);

	/* the image's glibc: its libc.so.6, as its loader finds it */
	image.img = &scratch;
	image.ld_library_path = env_get(env, n_env, "LD_LIBRARY_PATH");
	if (loader_find(&image, "libc.so.6", hs->image_libc, sizeof(hs->image_libc), &cache) &&
	    open_file(&image, hs->image_libc, &fd) == 0) {
		r = orh_elf_deps(fd, &deps, &scratch.cost);
		if (r == 0)
			hs->image_glibc = deps.glibc_defines;
		orh_image_over(image.img, r, hs->image_libc);
	}
	if (image.cachefd >= 0)
		close(image.cachefd);
	/* the image's libc.so.6, or its cache, past a budget: unreadable, and why */
	snprintf(hs->image_over, sizeof(hs->image_over), "%s", scratch.over);
	hs->host.opens += scratch.opens;
	orh_image_free(&scratch);
}

void orh_supply_free(struct orh_host_stack *hs)
{
	orh_image_free(&hs->host);
	memset(hs, 0, sizeof(*hs));
}
