/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook configure --engine containerd|crio|docker|podman [--engine-config PATH]
 *     [--handler NAME] [--shim PATH] [--runtime PATH] [--root DIR] [--dry-run | --check]
 *     [--undo]
 *
 * Registers the hook with an engine (oci-rdma-hook-registration(7), CONFIGURE). engines.c
 * decides what each file must hold; this file reads the files (every path resolved inside
 * --root, symlinks included), then prints the changes (--dry-run), tells whether there
 * are any (--check: exit 1 when the files are not as configure would leave them), or
 * writes them: each file replaced atomically, all of them or none, one configure at a
 * time on a root (lock.c: a lock file only this user may open, waited for a few seconds).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh-config.h"
#include "orh/base/args.h"
#include "orh/base/atomic.h"
#include "orh/cmd/commands.h"
#include "orh/cmd/configure.h"
#include "orh/cmd/install.h"
#include "orh/base/rootfs.h"

#include "lock.h"

#define ORH_ENGINE_CONFIG_MAX_BYTES (1024 * 1024)

static const char usage_text[] =
	"usage: oci-rdma-hook configure --engine containerd|crio|docker|podman\n"
	"           [--engine-config PATH] [--handler NAME] [--shim PATH] [--runtime PATH]\n"
	"           [--root DIR] [--dry-run | --check] [--undo]\n";

struct root {
	const char *dir; /* "" for / */
	int fd;          /* the root, O_PATH: every path resolves inside it */
};

/* The name of path under the root, for messages. */
static char *under(const struct root *rt, const char *path)
{
	return orh_xasprintf("%s%s", rt->dir, path);
}

/* Why path leads nowhere under the root, where orh_rootfs_resolve() says -ELOOP: the first
 * symbolic link on its way whose target does not exist, into err (ENOENT). False where
 * there is none (a loop of links). */
static bool dangling_link(const struct root *rt, const char *path, struct orh_err *err)
{
	char prefix[PATH_MAX], target[PATH_MAX];
	size_t i = 0, n = strlen(path);

	if (n >= sizeof(prefix))
		return false;
	while (i < n) {
		_cleanup_close_ int dirfd = -1, fd = -1;
		struct orh_err ignored = { 0 };
		char name[NAME_MAX + 1];
		struct stat st;
		int r;

		i += strspn(path + i, "/");
		i += strcspn(path + i, "/");
		memcpy(prefix, path, i);
		prefix[i] = '\0';
		if (orh_rootfs_parent(rt->fd, prefix, false, ORH_MOUNT_ANY, &dirfd, name,
				      &ignored) < 0 || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return false;
		if (!S_ISLNK(st.st_mode))
			continue;
		r = orh_rootfs_open_file(rt->fd, prefix, &fd, &st);
		if (r == -ELOOP)
			return false;
		if (r != -ENOENT)
			continue;
		if (orh_rootfs_readlink(rt->fd, prefix, target, sizeof(target)) < 0)
			return false;
		orh_fail(err, ENOENT, "'%s' is a symbolic link to '%s', which does not exist",
			 prefix, target);
		return true;
	}
	return false;
}

/* path resolved inside the root, as the engine would read it (symlinks followed, absolute
 * ones from the root, never above it): its parent directory (O_PATH) and final name.
 * Without openat2 the final name is taken as it is. *dangling (where given) tells a
 * symbolic link to nothing on the way (ENOENT too) from a missing directory. */
static int resolve(const struct root *rt, const char *path, bool create, int *dirfd,
		   char name[NAME_MAX + 1], bool *dangling, struct orh_err *err)
{
	char real[PATH_MAX];
	int r = orh_rootfs_resolve(rt->fd, path, real, sizeof(real));

	if (dangling)
		*dangling = false;
	if (r == -ENOSYS) {
		snprintf(real, sizeof(real), "%s", path);
	} else if (r == -ELOOP && dangling_link(rt, path, err)) {
		if (dangling)
			*dangling = true;
		return orh_err_prefix(err, "resolving '%s' under '%s'", path,
				      *rt->dir ? rt->dir : "/");
	} else if (r < 0) {
		return orh_fail_errno(err, -r, "resolving '%s' under '%s'", path,
				*rt->dir ? rt->dir : "/");
	}
	r = orh_rootfs_parent(rt->fd, real, create, ORH_MOUNT_ANY, dirfd, name, err);
	return r < 0 ? orh_err_prefix(err, "under '%s'", *rt->dir ? rt->dir : "/") : 0;
}

static int read_under(void *arg, const char *path, char **out, struct orh_err *err)
{
	const struct root *rt = arg;
	_cleanup_free_ char *p = under(rt, path);
	_cleanup_close_ int dirfd = -1, fd = -1;
	char name[NAME_MAX + 1];
	bool dangling = false;
	struct stat st;
	size_t len = 0;
	int r;

	*out = NULL;
	r = resolve(rt, path, false, &dirfd, name, &dangling, err);
	if (r == -ENOENT && !dangling)
		return 0;
	if (r < 0)
		return r;
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", p);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return orh_fail(err, EINVAL, "'%s' is not a regular file", p);
	r = orh_read_fd_all(fd, ORH_ENGINE_CONFIG_MAX_BYTES, out, &len);
	if (r < 0)
		return orh_fail_errno(err, r, "reading '%s'", p);
	if (strlen(*out) != len) {
		free(TAKE_PTR(*out));
		return orh_fail(err, EINVAL, "'%s' holds a NUL byte", p);
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_under(void *arg, const char *dir, struct orh_strv *names, struct orh_err *err)
{
	const struct root *rt = arg;
	_cleanup_free_ char *p = under(rt, dir);
	_cleanup_close_ int pfd = -1;
	struct orh_err ignored = { 0 };
	struct dirent *de;
	DIR *d;
	int fd;

	if (orh_rootfs_dir(rt->fd, dir, false, ORH_MOUNT_ANY, &pfd, &ignored) < 0)
		return 0; /* no such directory: nothing in it */
	fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return orh_fail_errno(err, errno, "reading directory '%s'", p);
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			orh_strv_push(names, orh_xstrdup(de->d_name));
	closedir(d);
	if (names->n)
		qsort(names->v, names->n, sizeof(*names->v), cmp_str);
	return 0;
}

static bool stat_under(const struct root *rt, const char *path, struct stat *st)
{
	_cleanup_close_ int dirfd = -1;
	struct orh_err ignored = { 0 };
	char name[NAME_MAX + 1];

	return resolve(rt, path, false, &dirfd, name, NULL, &ignored) == 0 &&
	       fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool executable_under(void *arg, const char *path)
{
	struct stat st;

	return stat_under(arg, path, &st) && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

static bool is_dir_under(void *arg, const char *path)
{
	struct stat st;

	return stat_under(arg, path, &st) && S_ISDIR(st.st_mode);
}

/* One change, written under the root (its directories made where missing). */
static int apply(const struct root *rt, const struct orh_cfg_file *f, const char *text,
		 bool remove, struct orh_err *err)
{
	_cleanup_free_ char *p = under(rt, f->path);
	_cleanup_close_ int pfd = -1, dirfd = -1;
	char name[NAME_MAX + 1];
	bool dangling = false;
	int r = resolve(rt, f->path, !remove, &pfd, name, &dangling, err);

	if (r == -ENOENT && remove && !dangling)
		return 0;
	if (r < 0)
		return r;
	dirfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return orh_fail_errno(err, errno, "opening the directory of '%s'", p);
	if (remove) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return orh_fail_errno(err, errno, "removing '%s'", p);
		return fsync(dirfd) < 0 ? orh_fail(err, errno, "fsync of the directory of '%s'", p)
					: 0;
	}
	r = orh_write_atomic(dirfd, name, text, strlen(text), 0644, err);
	return r < 0 ? orh_err_prefix(err, "writing '%s'", p) : 0;
}

/* Every change of the plan, or none: on a failure, the files already written get their
 * old text back (a file configure created is removed). */
static int apply_all(const struct root *rt, const struct orh_cfg_files *files,
		     struct orh_strv *done, struct orh_err *err)
{
	size_t i;
	int r = 0;

	for (i = 0; i < files->n && r >= 0; i++) {
		const struct orh_cfg_file *f = &files->v[i];

		if (f->new || f->remove)
			r = apply(rt, f, f->new, f->remove, err);
		if (r >= 0 && (f->new || f->remove))
			orh_strv_pushf(done, "%s %s%s", f->remove ? "removed" :
				       f->old ? "changed" : "created", rt->dir, f->path);
	}
	if (r >= 0)
		return r;
	for (size_t k = 0; k + 1 < i; k++) {
		const struct orh_cfg_file *f = &files->v[k];
		struct orh_err ignored = { 0 };

		if (f->new || f->remove)
			(void)apply(rt, f, f->old, !f->old, &ignored);
	}
	orh_strv_free(done);
	return r;
}

/* The root's fd and its lock (lock.c: a file only this user may open, waited for a few
 * seconds at most). optional: a run that writes nothing goes on without the lock where
 * this process may not make or open its file. */
static int open_root(struct root *rt, bool optional, struct orh_cfg_lock *lock,
		     struct orh_err *err)
{
	int r = orh_rootfs_open(*rt->dir ? rt->dir : "/", &rt->fd, err);

	return r < 0 ? r : orh_configure_lock(rt->fd, rt->dir, optional, lock, err);
}

/* What --dry-run prints for one file: an appended tail as such, else the whole text. */
static void show(const struct root *rt, const struct orh_cfg_file *f)
{
	_cleanup_free_ char *p = under(rt, f->path);
	size_t n = f->old ? strlen(f->old) : 0;

	if (f->remove)
		printf("# %s: remove\n", p);
	else if (f->old && !strncmp(f->new, f->old, n))
		printf("# %s: append\n%s", p, f->new + n);
	else
		printf("# %s: %s\n%s", p, f->old ? "replace with" : "create", f->new);
}

/* The command line into req; ORH_EXIT_OK, -1 after --help printed the usage, or
 * ORH_EXIT_USAGE (after saying why). */
enum mode { MODE_WRITE, MODE_DRY_RUN, MODE_CHECK };

static int parse_args(int argc, char **argv, struct orh_configure_req *req, const char **root,
		      enum mode *mode)
{
	const char *engine = NULL, *problem = NULL, *handler = NULL, *dir = NULL;
	bool dry_run = false, check = false;
	const struct orh_opt opts[] = {
		{ "--engine", &engine, NULL },	{ "--engine-config", &req->engine_config, NULL },
		{ "--handler", &handler, NULL },	{ "--shim", &req->shim, NULL },
		{ "--runtime", &req->runtime, NULL }, { "--root", &dir, NULL },
		{ "--dry-run", NULL, &dry_run },	{ "--check", NULL, &check },
		{ "--undo", NULL, &req->undo },
	};
	const struct orh_args a = { .cmd = "configure", .usage = usage_text };
	int r = orh_args_parse(&a, argc, argv, 1, opts, ORH_ARRAY_SIZE(opts), NULL);

	if (r)
		return r;
	if (handler)
		req->handler = handler;
	if (dir)
		*root = strcmp(dir, "/") ? dir : "";
	*mode = check ? MODE_CHECK : dry_run ? MODE_DRY_RUN : MODE_WRITE;
	if (dry_run && check)
		problem = "--dry-run and --check exclude each other";
	else if (!engine)
		problem = "--engine is required";
	else if (orh_engine_from_name(engine, &req->engine) < 0)
		problem = "unknown engine";
	else if (handler && req->engine == ORH_ENGINE_PODMAN)
		problem = "podman runs the hooks, not a runtime handler: --handler is for "
			  "containerd, crio and docker";
	else if (**root && **root != '/')
		problem = "--root is not an absolute path";
	else if (req->engine_config && req->engine_config[0] != '/')
		problem = "--engine-config is not an absolute path";
	if (problem) {
		fprintf(stderr, "oci-rdma-hook: configure: %s\n%s", problem, usage_text);
		return ORH_EXIT_USAGE;
	}
	return ORH_EXIT_OK;
}

static bool handler_name_ok(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > 63 || h[0] == '-' || h[n - 1] == '-')
		return false;
	for (; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= '0' && *h <= '9') || *h == '-'))
			return false;
	return true;
}

/* The absolute path without its "." components and repeated slashes, a new string; NULL
 * where it has a ".." component (which a symbolic link before it makes mean something else
 * than the path without both). */
static char *clean_path(const char *path)
{
	struct orh_buf b = { 0 };

	for (const char *p = path; *p;) {
		size_t len;

		p += strspn(p, "/");
		len = strcspn(p, "/");
		if (len == 2 && !strncmp(p, "..", 2)) {
			free(b.p);
			return NULL;
		}
		if (len > 0 && !(len == 1 && *p == '.')) {
			orh_buf_addc(&b, '/');
			orh_buf_add(&b, p, len);
		}
		p += len;
	}
	return b.n ? b.p : orh_xstrdup("/");
}

int orh_configure_plan(const struct orh_configure_req *req_in, const char *node_config,
		       const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		       struct orh_strv *notes, struct orh_err *err)
{
	struct orh_configure_req r = *req_in, *req = &r;
	_cleanup_free_ char *config = NULL;

	memset(files, 0, sizeof(*files));
	/* the path is written into what the engine reads (containerd's imports): clean */
	if (req->engine_config && !(config = clean_path(req->engine_config)))
		return orh_fail(err, EINVAL, "engine config '%s' has a '..' component: give "
				"the path without it", req->engine_config);
	if (config)
		req->engine_config = config;
	if (req->engine != ORH_ENGINE_PODMAN && !handler_name_ok(req->handler))
		return orh_fail(err, EINVAL, "handler '%s': not a RuntimeClass handler name "
				"(lower-case letters, digits, '-'; at most 63)", req->handler);
	if (req->shim[0] != '/')
		return orh_fail(err, EINVAL, "shim '%s' is not an absolute path", req->shim);
	if (req->runtime && req->runtime[0] != '/')
		return orh_fail(err, EINVAL, "runtime '%s' is not an absolute path", req->runtime);
	switch (req->engine) {
	case ORH_ENGINE_CONTAINERD:
		return cfg_containerd(req, node_config, rd, files, notes, err);
	case ORH_ENGINE_CRIO:
		return cfg_crio(req, node_config, rd, files, notes, err);
	case ORH_ENGINE_DOCKER:
		return cfg_docker(req, node_config, rd, files, notes, err);
	case ORH_ENGINE_PODMAN:
		return cfg_podman(req, rd, files, notes, err);
	}
	return orh_fail(err, EINVAL, "unknown engine");
}

/* The plan for req under rt, locked against another configure or install of that root. */
static int plan_under(struct root *rt, const struct orh_configure_req *req,
		      const char *node_config, bool read_only, struct orh_cfg_lock *lock,
		      struct orh_cfg_files *files, struct orh_strv *notes, struct orh_err *err)
{
	struct orh_cfg_reader rd = { .read = read_under, .list = list_under,
				     .executable = executable_under, .arg = rt,
				     .is_dir = is_dir_under };
	int r = open_root(rt, read_only, lock, err);

	return r < 0 ? r : orh_configure_plan(req, node_config, &rd, files, notes, err);
}

int orh_cmd_configure(struct orh_ctx *ctx, int argc, char **argv)
{
	struct orh_configure_req req = { .handler = "rdma", .shim = ORH_BINDIR "/oci-rdma-runtime" };
	struct orh_cfg_files files = { 0 };
	struct orh_strv notes = { 0 }, done = { 0 };
	struct orh_err err = { 0 };
	struct root rt = { .dir = "", .fd = -1 };
	enum mode mode = MODE_WRITE;
	struct orh_cfg_lock lock = ORH_CFG_LOCK_INIT;
	int r;
	size_t changed = 0;

	r = parse_args(argc, argv, &req, &rt.dir, &mode);
	if (r != ORH_EXIT_OK)
		return r < 0 ? ORH_EXIT_OK : r; /* -1: --help */
	r = plan_under(&rt, &req, ctx->config_path, mode != MODE_WRITE, &lock, &files, &notes,
		       &err);
	for (size_t i = 0; r >= 0 && i < files.n; i++)
		if (files.v[i].new || files.v[i].remove) {
			changed++;
			if (mode == MODE_DRY_RUN)
				show(&rt, &files.v[i]);
			else if (mode == MODE_CHECK)
				printf("# %s%s: %s\n", rt.dir, files.v[i].path,
				       files.v[i].remove ? "to be removed" : "not as configure "
				       "would write it");
		}
	if (r >= 0 && mode == MODE_WRITE)
		r = apply_all(&rt, &files, &done, &err);
	for (size_t i = 0; i < done.n; i++)
		printf("%s\n", done.v[i]);
	if (r < 0) {
		fprintf(stderr, "oci-rdma-hook: configure: %s\n", err.msg);
	} else {
		for (size_t i = 0; i < notes.n && !req.undo; i++)
			fprintf(stderr, "oci-rdma-hook: configure: %s\n", notes.v[i]);
		if (!changed)
			fprintf(stderr, "oci-rdma-hook: configure: nothing to change\n");
	}
	if (rt.fd >= 0)
		close(rt.fd);
	orh_configure_unlock(&lock);
	orh_cfg_files_free(&files);
	orh_strv_free(&notes);
	orh_strv_free(&done);
	if (r < 0)
		return err.code == EINVAL || err.code == EEXIST ? ORH_EXIT_USAGE : ORH_EXIT_FAIL;
	return mode == MODE_CHECK && changed ? ORH_EXIT_FAIL : ORH_EXIT_OK;
}

/* What `install` runs: the plan for req with every file read under root ("" for /), then
 * every change written there, or none. changed gets "created|changed|removed PATH" (PATH
 * as the host knows it) for each file written or removed. */
int orh_configure_under(const char *root, const struct orh_configure_req *req,
			const char *node_config, struct orh_strv *changed, struct orh_strv *notes,
			struct orh_err *err)
{
	struct orh_cfg_files files = { 0 };
	struct root rt = { .dir = root, .fd = -1 };
	struct orh_strv done = { 0 };
	struct orh_cfg_lock lock = ORH_CFG_LOCK_INIT;
	int r = plan_under(&rt, req, node_config, false, &lock, &files, notes, err);

	if (r >= 0)
		r = apply_all(&rt, &files, &done, err);
	for (size_t i = 0; i < done.n; i++) {
		const char *sp = strchr(done.v[i], ' ');

		orh_strv_pushf(changed, "%.*s %s", (int)(sp - done.v[i]), done.v[i],
			       sp + 1 + strlen(root));
	}
	if (rt.fd >= 0)
		close(rt.fd);
	orh_configure_unlock(&lock);
	orh_cfg_files_free(&files);
	orh_strv_free(&done);
	return r;
}

/* What the installer's watch runs: configure's --check under root, in process. files gets
 * the plan (every file read, new or remove set on each that is not as configure would
 * leave it); nothing is written. */
int orh_configure_check_under(const char *root, const struct orh_configure_req *req,
			      const char *node_config, struct orh_cfg_files *files,
			      struct orh_strv *notes, struct orh_err *err)
{
	struct root rt = { .dir = root, .fd = -1 };
	struct orh_cfg_lock lock = ORH_CFG_LOCK_INIT;
	int r = plan_under(&rt, req, node_config, true, &lock, files, notes, err);

	if (rt.fd >= 0)
		close(rt.fd);
	orh_configure_unlock(&lock);
	return r;
}
