/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook configure --engine containerd|crio|docker|podman [--engine-config PATH]
 *     [--handler NAME] [--shim PATH] [--runtime PATH] [--root DIR] [--dry-run] [--undo]
 *
 * Registers the hook with an engine (oci-rdma-hook-registration(7), CONFIGURE). engines.c
 * decides what each file must hold; this file reads the files (under --root), then prints
 * the changes (--dry-run) or writes them, each file replaced atomically.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "orh-config.h"
#include "orh/atomic.h"
#include "orh/commands.h"
#include "orh/configure.h"
#include "orh/install.h"

#define ORH_ENGINE_CONFIG_MAX_BYTES (1024 * 1024)

static const char usage_text[] =
	"usage: oci-rdma-hook configure --engine containerd|crio|docker|podman\n"
	"           [--engine-config PATH] [--handler NAME] [--shim PATH] [--runtime PATH]\n"
	"           [--root DIR] [--dry-run] [--undo]\n";

struct root {
	const char *dir; /* "" for / */
};

static char *under(const struct root *rt, const char *path)
{
	return orh_xasprintf("%s%s", rt->dir, path);
}

static int read_under(void *arg, const char *path, char **out, struct orh_err *err)
{
	_cleanup_free_ char *p = under(arg, path);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	size_t len = 0;
	int r;

	*out = NULL;
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return orh_fail(err, errno, "opening '%s': %s", p, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return orh_fail(err, EINVAL, "'%s' is not a regular file", p);
	r = orh_read_fd_all(fd, ORH_ENGINE_CONFIG_MAX_BYTES, out, &len);
	if (r < 0)
		return orh_fail(err, r, "reading '%s': %s", p, strerror(-r));
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
	_cleanup_free_ char *p = under(arg, dir);
	DIR *d = opendir(p);
	struct dirent *de;

	if (!d && errno == ENOENT)
		return 0;
	if (!d)
		return orh_fail(err, errno, "reading directory '%s': %s", p, strerror(errno));
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			orh_strv_push(names, orh_xstrdup(de->d_name));
	closedir(d);
	if (names->n)
		qsort(names->v, names->n, sizeof(*names->v), cmp_str);
	return 0;
}

static bool executable_under(void *arg, const char *path)
{
	_cleanup_free_ char *p = under(arg, path);
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

static bool is_dir_under(void *arg, const char *path)
{
	_cleanup_free_ char *p = under(arg, path);
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p of path's directory, under the root. */
static int make_parent(const struct root *rt, const char *path, struct orh_err *err)
{
	_cleanup_free_ char *p = under(rt, path);
	char *slash = strrchr(p, '/');

	if (!slash || slash == p)
		return 0;
	*slash = '\0';
	for (char *q = p + 1; *q; q++) {
		if (*q != '/')
			continue;
		*q = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return orh_fail(err, errno, "creating '%s': %s", p, strerror(errno));
		*q = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return orh_fail(err, errno, "creating '%s': %s", p, strerror(errno));
	return 0;
}

static int apply(const struct root *rt, const struct orh_cfg_file *f, struct orh_err *err)
{
	_cleanup_free_ char *p = under(rt, f->path);
	char *slash = strrchr(p, '/');
	_cleanup_close_ int dirfd = -1;
	int r;

	if (!f->old && f->new) {
		r = make_parent(rt, f->path, err);
		if (r < 0)
			return r;
	}
	*slash = '\0';
	dirfd = open(slash == p ? "/" : p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return orh_fail(err, errno, "opening '%s': %s", p, strerror(errno));
	if (f->remove) {
		if (unlinkat(dirfd, slash + 1, 0) < 0 && errno != ENOENT)
			return orh_fail(err, errno, "removing '%s/%s': %s", p, slash + 1,
					strerror(errno));
		return fsync(dirfd) < 0 ? orh_fail(err, errno, "fsync '%s'", p) : 0;
	}
	r = orh_write_atomic(dirfd, slash + 1, f->new, strlen(f->new), 0644, err);
	return r < 0 ? orh_err_prefix(err, "writing '%s/%s'", p, slash + 1) : 0;
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

static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);

	if (!strcmp(argv[*i], name) && *i + 1 < argc)
		return argv[++*i];
	if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=')
		return argv[*i] + n + 1;
	return NULL;
}

/* The command line into req; ORH_EXIT_OK, -1 after --help printed the usage, or
 * ORH_EXIT_USAGE (after saying why). */
static int parse_args(int argc, char **argv, struct orh_configure_req *req, const char **root,
		      bool *dry_run)
{
	const char *engine = NULL, *problem = NULL;
	bool handler_given = false;

	for (int i = 1; i < argc; i++) {
		const char *v;

		if ((v = opt_value(argc, argv, &i, "--engine"))) {
			engine = v;
		} else if ((v = opt_value(argc, argv, &i, "--engine-config"))) {
			req->engine_config = v;
		} else if ((v = opt_value(argc, argv, &i, "--handler"))) {
			req->handler = v;
			handler_given = true;
		} else if ((v = opt_value(argc, argv, &i, "--shim"))) {
			req->shim = v;
		} else if ((v = opt_value(argc, argv, &i, "--runtime"))) {
			req->runtime = v;
		} else if ((v = opt_value(argc, argv, &i, "--root"))) {
			*root = strcmp(v, "/") ? v : "";
		} else if (!strcmp(argv[i], "--dry-run")) {
			*dry_run = true;
		} else if (!strcmp(argv[i], "--undo")) {
			req->undo = true;
		} else if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return -1;
		} else {
			fprintf(stderr, "oci-rdma-hook: configure: unknown or incomplete argument "
				"'%s'\n%s", argv[i], usage_text);
			return ORH_EXIT_USAGE;
		}
	}
	if (!engine)
		problem = "--engine is required";
	else if (orh_engine_from_name(engine, &req->engine) < 0)
		problem = "unknown engine";
	else if (handler_given && req->engine == ORH_ENGINE_PODMAN)
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

int orh_cmd_configure(struct orh_ctx *ctx, int argc, char **argv)
{
	struct orh_configure_req req = { .handler = "rdma", .shim = ORH_BINDIR "/oci-rdma-runtime" };
	struct orh_cfg_files files = { 0 };
	struct orh_strv notes = { 0 };
	struct orh_err err = { 0 };
	struct root rt = { .dir = "" };
	struct orh_cfg_reader rd = { .read = read_under, .list = list_under,
				     .executable = executable_under, .arg = &rt,
				     .is_dir = is_dir_under };
	bool dry_run = false;
	size_t changed = 0;
	int r;

	r = parse_args(argc, argv, &req, &rt.dir, &dry_run);
	if (r != ORH_EXIT_OK)
		return r < 0 ? ORH_EXIT_OK : r; /* -1: --help */
	r = orh_configure_plan(&req, ctx->config_path, &rd, &files, &notes, &err);
	for (size_t i = 0; r >= 0 && i < files.n; i++) {
		const struct orh_cfg_file *f = &files.v[i];

		if (!f->new && !f->remove)
			continue;
		changed++;
		if (dry_run)
			show(&rt, f);
		else
			r = apply(&rt, f, &err);
		if (r >= 0 && !dry_run)
			printf("%s %s%s\n", f->remove ? "removed" : f->old ? "changed" : "created",
			       rt.dir, f->path);
	}
	if (r < 0) {
		fprintf(stderr, "oci-rdma-hook: configure: %s\n", err.msg);
	} else {
		for (size_t i = 0; i < notes.n && !req.undo; i++)
			fprintf(stderr, "oci-rdma-hook: configure: %s\n", notes.v[i]);
		if (!changed)
			fprintf(stderr, "oci-rdma-hook: configure: nothing to change\n");
	}
	orh_cfg_files_free(&files);
	orh_strv_free(&notes);
	return r < 0 ? (err.code == EINVAL || err.code == EEXIST ? ORH_EXIT_USAGE : ORH_EXIT_FAIL)
		     : ORH_EXIT_OK;
}

/* What `install` runs: the plan for req with every file read under root ("" for /), then
 * each change written there. changed gets the host path of each file written or removed. */
int orh_configure_under(const char *root, const struct orh_configure_req *req,
			const char *node_config, struct orh_strv *changed, struct orh_strv *notes,
			struct orh_err *err)
{
	struct orh_cfg_files files = { 0 };
	struct root rt = { .dir = root };
	struct orh_cfg_reader rd = { .read = read_under, .list = list_under,
				     .executable = executable_under, .arg = &rt,
				     .is_dir = is_dir_under };
	int r;

	r = orh_configure_plan(req, node_config, &rd, &files, notes, err);
	for (size_t i = 0; r >= 0 && i < files.n; i++) {
		const struct orh_cfg_file *f = &files.v[i];

		if (!f->new && !f->remove)
			continue;
		r = apply(&rt, f, err);
		if (r >= 0)
			orh_strv_pushf(changed, "%s %s", f->remove ? "removed" :
				       f->old ? "changed" : "created", f->path);
	}
	orh_cfg_files_free(&files);
	return r;
}
