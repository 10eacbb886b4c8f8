/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What `configure` changes for each engine (include/orh/configure.h): computed from the
 * text of the files read, written by nobody here.
 *
 * containerd: a handler block appended to config.toml. A drop-in through `imports` does
 *   not work in containerd 1.x: an imported file replaces each plugin's whole table
 *   (services/server/config mergeConfig), so a drop-in holding only the handler would
 *   drop every other CRI setting of the node.
 * CRI-O: a drop-in of its own in crio.conf.d.
 * docker: daemon.json, merged (every other key kept).
 * podman: a containers.conf.d drop-in whose hooks_dir adds the directory holding the
 *   precreate registration (read by nothing else) to what podman read before.
 * The runtime the shim executes (config key `runtime`) goes into a block of the node
 * config, only where it is not the `runc` the shim finds by itself.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "orh-config.h"
#include "orh/config.h"
#include "orh/configure.h"

#ifndef ORH_CONTAINERS_HOOKS_DIR
#define ORH_CONTAINERS_HOOKS_DIR "/usr/share/containers/oci/hooks.d"
#endif
#ifndef ORH_OWN_HOOKS_DIR
#define ORH_OWN_HOOKS_DIR "/usr/share/oci-rdma-hook/hooks.d"
#endif

/* Where the shim looks for a runtime named without a path (cmd_runtime.c) */
static const char *const shim_path[] = {
	"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
};

static const char *const engine_names[] = {
	[ORH_ENGINE_CONTAINERD] = "containerd",
	[ORH_ENGINE_CRIO] = "crio",
	[ORH_ENGINE_DOCKER] = "docker",
	[ORH_ENGINE_PODMAN] = "podman",
};

static const char *const engine_configs[] = {
	[ORH_ENGINE_CONTAINERD] = "/etc/containerd/config.toml",
	[ORH_ENGINE_CRIO] = "/etc/crio/crio.conf",
	[ORH_ENGINE_DOCKER] = "/etc/docker/daemon.json",
	[ORH_ENGINE_PODMAN] = "/etc/containers/containers.conf",
};

#define DROPIN_NAME "99-oci-rdma-hook.conf"
/* hooks_dir when no config sets it: containers/common's default for podman, CRI-O's */
#define ENGINE_HOOKS_DIR "/usr/share/containers/oci/hooks.d"

const char *orh_engine_name(enum orh_engine e)
{
	return engine_names[e];
}

int orh_engine_from_name(const char *s, enum orh_engine *e)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(engine_names); i++)
		if (!strcmp(s, engine_names[i])) {
			*e = (enum orh_engine)i;
			return 0;
		}
	return -EINVAL;
}

const char *orh_engine_default_config(enum orh_engine e)
{
	return engine_configs[e];
}

void orh_cfg_files_free(struct orh_cfg_files *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->v[i].path);
		free(f->v[i].old);
		free(f->v[i].new);
	}
	free(f->v);
	memset(f, 0, sizeof(*f));
}

/* Read path into a new entry of files. */
static int add_file(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		    const char *path, struct orh_cfg_file **out, struct orh_err *err)
{
	char *text = NULL;
	int r = rd->read(rd->arg, path, &text, err);

	if (r < 0)
		return r;
	files->v = orh_xgrow(files->v, files->n + 1, sizeof(*files->v));
	*out = &files->v[files->n++];
	**out = (struct orh_cfg_file){ .path = orh_xstrdup(path), .old = text };
	return 0;
}

static int scan_file(const struct orh_cfg_file *f, struct orh_toml *t, struct orh_err *err)
{
	return orh_toml_scan(f->old ? f->old : "", f->path, t, err);
}

/* A string value at key, or NULL; an error when the key holds something else. */
static int get_string(const struct orh_toml *t, const char *file, const char *key, char **out,
		      struct orh_err *err)
{
	const struct orh_toml_entry *e = orh_toml_get(t, key);

	*out = NULL;
	if (e && !orh_toml_string(e->value, out))
		return orh_fail(err, EINVAL, "%s:%u: '%s' is not a string", file, e->line,
				strrchr(key, ORH_TOML_SEP[0]) + 1);
	return 0;
}

/* The runtime an engine names, as the shim must be told it: NULL for runc (the shim finds
 * it itself), an absolute path as it is, another bare name where the shim would look.
 * -ENOENT when a bare name is nowhere. */
static int shim_runtime(const struct orh_cfg_reader *rd, const char *name, char **out,
			struct orh_strv *notes)
{
	*out = NULL;
	if (!name || !*name || !strcmp(name, "runc"))
		return 0;
	if (name[0] == '/') {
		if (!rd->executable(rd->arg, name))
			orh_strv_pushf(notes, "the runtime %s is not (yet) installed", name);
		*out = orh_xstrdup(name);
		return 0;
	}
	for (size_t i = 0; i < ORH_ARRAY_SIZE(shim_path); i++) {
		char *p = orh_xasprintf("%s/%s", shim_path[i], name);

		if (rd->executable(rd->arg, p)) {
			*out = p;
			return 0;
		}
		free(p);
	}
	return -ENOENT;
}

/* The node config's runtime block for this engine: in place when the shim must execute
 * `runtime` (an absolute path) rather than the runc it finds itself (runtime NULL);
 * removed otherwise and on --undo. */
static int node_runtime(const struct orh_configure_req *req, const char *node_config,
			const struct orh_cfg_reader *rd, const char *runtime,
			struct orh_cfg_files *files, struct orh_strv *notes, struct orh_err *err)
{
	_cleanup_free_ char *id = orh_xasprintf("--engine %s", orh_engine_name(req->engine));
	_cleanup_free_ char *body = NULL;
	struct orh_block b = { .id = id, .header = "" };
	struct orh_cfg_file *f = NULL;
	bool remove = false;
	int r;

	r = add_file(rd, files, node_config, &f, err);
	if (r < 0)
		return r;
	if (!req->undo && runtime) {
		_cleanup_free_ char *own = f->old ? orh_block_strip_all(f->old) : NULL;
		struct orh_config cfg;
		struct orh_err perr = { 0 };

		orh_config_defaults(&cfg);
		r = own ? orh_config_parse_string(&cfg, node_config, own, &perr) : 0;
		if (r >= 0 && strcmp(cfg.runtime, "runc")) {
			orh_strv_pushf(notes, "%s sets runtime = %s, which the shim executes; "
				       "the engine's runtime is %s", node_config, cfg.runtime, runtime);
			orh_config_free(&cfg);
			return 0;
		}
		orh_config_free(&cfg);
		if (r < 0)
			return orh_fail(err, EINVAL, "%s", perr.msg);
		body = orh_xasprintf("# The runtime the shim executes: the one %s ran before.\n"
				     "[containers]\nruntime = %s\n",
				     orh_engine_name(req->engine), runtime);
		b.body = body;
		orh_strv_pushf(notes, "the shim executes %s (%s)", runtime, node_config);
		return orh_block_install(f->old, f->path, &b, &f->new, err);
	}
	r = orh_block_remove(f->old, f->path, &b, &f->new, &remove, err);
	f->remove = remove;
	return r;
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

/* ---- containerd ---- */

static int containerd_plan(const struct orh_configure_req *req, const char *node_config,
			   const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
			   struct orh_strv *notes, struct orh_err *err)
{
	const char *path = req->engine_config ? req->engine_config : engine_configs[req->engine];
	_cleanup_free_ char *id = orh_xasprintf("--engine containerd --handler %s", req->handler);
	_cleanup_free_ char *plugin = NULL, *runtimes = NULL, *key = NULL, *dflt = NULL;
	_cleanup_free_ char *binary = NULL, *runtime = NULL, *body = NULL, *shim = NULL;
	const struct orh_toml_entry *e;
	struct orh_block b = { .id = id, .header = "version = 2\n" };
	struct orh_cfg_file *f = NULL;
	struct orh_toml t;
	bool systemd = false, remove = false;
	long version = 2;
	int r;

	r = add_file(rd, files, path, &f, err);
	if (r < 0)
		return r;
	if (req->undo) {
		r = orh_block_remove(f->old, f->path, &b, &f->new, &remove, err);
		f->remove = remove;
		return r < 0 ? r : node_runtime(req, node_config, rd, NULL, files, notes, err);
	}
	/* what the operator wrote, without a block of ours */
	{
		_cleanup_free_ char *own = f->old ? orh_block_strip_all(f->old) : NULL;
		struct orh_cfg_file view = { .path = f->path, .old = own };

		r = scan_file(&view, &t, err);
		if (r < 0)
			return r;
	}
	e = orh_toml_get(&t, "version");
	if (f->old && !e) {
		version = 1;
	} else if (e) {
		char *end = NULL;

		version = strtol(e->value, &end, 10);
		if (*end || version < 1 || version > 3) {
			r = orh_fail(err, EINVAL, "%s:%u: version '%s' is not 1, 2 or 3", path,
				     e->line, e->value);
			orh_toml_free(&t);
			return r;
		}
	}
	plugin = orh_toml_key("plugins", version == 1 ? "cri" : version == 2 ?
			      "io.containerd.grpc.v1.cri" : "io.containerd.cri.v1.runtime", NULL);
	runtimes = orh_toml_key(plugin, "containerd", "runtimes", NULL);
	key = orh_toml_key(runtimes, req->handler, NULL);
	e = orh_toml_find_under(&t, key);
	if (e)
		r = orh_fail(err, EEXIST, "%s:%u: runtime handler '%s' is defined already "
			     "(give configure another --handler, or remove it)", path, e->line,
			     req->handler);
	e = r < 0 ? NULL : orh_toml_get(&t, runtimes);
	if (e)
		r = orh_fail(err, EINVAL, "%s:%u: the runtimes are an inline table, which "
			     "cannot be extended: write them as [tables]", path, e->line);
	if (r < 0) {
		orh_toml_free(&t);
		return r;
	}
	free(key);
	key = orh_toml_key(plugin, "containerd", "default_runtime_name", NULL);
	r = get_string(&t, path, key, &dflt, err);
	if (r >= 0) {
		free(key);
		key = orh_toml_key(runtimes, dflt ? dflt : "runc", "options", "BinaryName", NULL);
		r = get_string(&t, path, key, &binary, err);
	}
	if (r >= 0) {
		free(key);
		key = orh_toml_key(runtimes, dflt ? dflt : "runc", "options", "SystemdCgroup", NULL);
		e = orh_toml_get(&t, key);
		if (e && !orh_toml_bool(e->value, &systemd))
			r = orh_fail(err, EINVAL, "%s:%u: SystemdCgroup '%s' is not true or false",
				     path, e->line, e->value);
	}
	orh_toml_free(&t);
	if (r < 0)
		return r;

	if (req->runtime)
		runtime = orh_xstrdup(req->runtime);
	else if (shim_runtime(rd, binary, &runtime, notes) < 0)
		return orh_fail(err, ENOENT, "%s: BinaryName '%s' of handler '%s' is not found "
				"(give configure --runtime PATH)", path, binary, dflt ? dflt : "runc");
	shim = orh_toml_quote(req->shim);
	{
		_cleanup_free_ char *table = NULL;

		/* the table's header as the engine's documentation writes it */
		table = orh_xasprintf("plugins.\"%s\".containerd.runtimes.%s",
				      version == 1 ? "cri" : version == 2 ?
				      "io.containerd.grpc.v1.cri" : "io.containerd.cri.v1.runtime",
				      req->handler);
		if (version == 1) {
			char *t1 = orh_xasprintf("plugins.cri.containerd.runtimes.%s", req->handler);

			free(table);
			table = t1;
		}
		body = orh_xasprintf("[%s]\n"
				     "  runtime_type = \"io.containerd.runc.v2\"\n"
				     "  pod_annotations = [\"oci-rdma-hook/*\"]\n"
				     "[%s.options]\n"
				     "  BinaryName = %s\n"
				     "  SystemdCgroup = %s\n",
				     table, table, shim, systemd ? "true" : "false");
	}
	b.body = body;
	r = orh_block_install(f->old, f->path, &b, &f->new, err);
	if (r < 0)
		return r;
	orh_strv_pushf(notes, "containerd: handler '%s' (config version %ld, SystemdCgroup = %s "
		       "as handler '%s'); restart containerd to load it", req->handler, version,
		       systemd ? "true" : "false", dflt ? dflt : "runc");
	return node_runtime(req, node_config, rd, runtime, files, notes, err);
}

/* ---- TOML drop-in directories (CRI-O, podman) ---- */

/* The files an engine reads before ours: main (may be absent), then dir's *.conf in
 * order, without ours. Each becomes an entry of files (read-only). */
static int read_dropins(const struct orh_cfg_reader *rd, const char *main_path,
			const char *dir, struct orh_cfg_files *files, size_t *first,
			struct orh_err *err)
{
	struct orh_strv names = { 0 };
	struct orh_cfg_file *f = NULL;
	int r;

	*first = files->n;
	if (main_path) {
		r = add_file(rd, files, main_path, &f, err);
		if (r < 0)
			return r;
	}
	r = rd->list(rd->arg, dir, &names, err);
	for (size_t i = 0; r >= 0 && i < names.n; i++) {
		size_t n = strlen(names.v[i]);
		_cleanup_free_ char *p = NULL;

		if (n < 6 || strcmp(names.v[i] + n - 5, ".conf") || !strcmp(names.v[i], DROPIN_NAME))
			continue;
		p = orh_xasprintf("%s/%s", dir, names.v[i]);
		r = add_file(rd, files, p, &f, err);
	}
	orh_strv_free(&names);
	return r;
}

/* The last string array set at key in files[first..], or false. */
static int last_array(const struct orh_cfg_files *files, size_t first, const char *key,
		      struct orh_strv *out, bool *set, struct orh_err *err)
{
	*set = false;
	for (size_t i = first; i < files->n; i++) {
		const struct orh_toml_entry *e;
		struct orh_toml t;
		int r = scan_file(&files->v[i], &t, err);

		if (r < 0)
			return r;
		e = orh_toml_get(&t, key);
		if (e) {
			orh_strv_free(out);
			if (!orh_toml_string_array(e->value, out)) {
				r = orh_fail(err, EINVAL, "%s:%u: '%s' is not an array of strings",
					     files->v[i].path, e->line,
					     strrchr(key, ORH_TOML_SEP[0]) + 1);
				orh_toml_free(&t);
				return r;
			}
			*set = true;
		}
		orh_toml_free(&t);
	}
	return 0;
}

/* The last string set at key in files[first..] (NULL when none). */
static int last_string(const struct orh_cfg_files *files, size_t first, const char *key,
		       char **out, struct orh_err *err)
{
	*out = NULL;
	for (size_t i = first; i < files->n; i++) {
		struct orh_toml t;
		char *s = NULL;
		int r = scan_file(&files->v[i], &t, err);

		if (r >= 0)
			r = get_string(&t, files->v[i].path, key, &s, err);
		orh_toml_free(&t);
		if (r < 0)
			return r;
		if (s) {
			free(*out);
			*out = s;
		}
	}
	return 0;
}

/* Our drop-in: written whole, or removed on --undo. */
static int own_dropin(const struct orh_cfg_reader *rd, const char *dir, const char *text,
		      struct orh_cfg_files *files, struct orh_err *err)
{
	_cleanup_free_ char *p = orh_xasprintf("%s/" DROPIN_NAME, dir);
	struct orh_cfg_file *f = NULL;
	int r = add_file(rd, files, p, &f, err);

	if (r < 0)
		return r;
	f->mkdir = true;
	if (!text)
		f->remove = f->old != NULL;
	else if (!f->old || strcmp(f->old, text))
		f->new = orh_xstrdup(text);
	return 0;
}

static char *dir_of(const char *path, const char *suffix)
{
	return orh_xasprintf("%s%s", path, suffix);
}

/* ---- CRI-O ---- */

/* Where CRI-O's packages (cri-o/packaging) and distributions put a program. */
static char *crio_find(const struct orh_cfg_reader *rd, const char *name)
{
	const char *const where[] = { "/usr/libexec/crio/", "/usr/bin/crio-", "/usr/local/bin/",
				      "/usr/bin/", "/usr/sbin/" };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(where); i++) {
		char *p = orh_xasprintf("%s%s", where[i], name);

		if (rd->executable(rd->arg, p))
			return p;
		free(p);
	}
	return NULL;
}

static int crio_plan(const struct orh_configure_req *req, const char *node_config,
		     const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		     struct orh_strv *notes, struct orh_err *err)
{
	const char *path = req->engine_config ? req->engine_config : engine_configs[req->engine];
	_cleanup_free_ char *dir = dir_of(path, ".d");
	_cleanup_free_ char *dflt = NULL, *key = NULL, *runtime = NULL, *root = NULL;
	_cleanup_free_ char *conmon = NULL, *text = NULL, *hooks = NULL, *shim = NULL;
	_cleanup_free_ char *conmon_line = NULL, *hooks_table = NULL;
	struct orh_strv dirs = { 0 };
	bool hooks_set = false;
	size_t first = 0;
	int r;

	r = read_dropins(rd, path, dir, files, &first, err);
	if (r >= 0 && req->undo)
		r = own_dropin(rd, dir, NULL, files, err);
	if (r < 0 || req->undo)
		return r < 0 ? r : node_runtime(req, node_config, rd, NULL, files, notes, err);
	for (size_t i = first; i < files->n; i++) {
		const struct orh_toml_entry *e;
		struct orh_toml t;

		key = orh_toml_key("crio", "runtime", "runtimes", req->handler, NULL);
		r = scan_file(&files->v[i], &t, err);
		e = r >= 0 ? orh_toml_find_under(&t, key) : NULL;
		if (e)
			r = orh_fail(err, EEXIST, "%s:%u: runtime handler '%s' is defined already "
				     "(give configure another --handler, or remove it)",
				     files->v[i].path, e->line, req->handler);
		orh_toml_free(&t);
		free(TAKE_PTR(key));
		if (r < 0)
			return r;
	}
	key = orh_toml_key("crio", "runtime", "default_runtime", NULL);
	r = last_string(files, first, key, &dflt, err);
	free(TAKE_PTR(key));
	if (r < 0)
		return r;
	/* CRI-O's default is crun since 1.31, runc before: take the one installed */
	if (!dflt) {
		char *crun = crio_find(rd, "crun");

		dflt = orh_xstrdup(crun ? "crun" : "runc");
		free(crun);
	}
	key = orh_toml_key("crio", "runtime", "runtimes", dflt, "runtime_path", NULL);
	r = last_string(files, first, key, &runtime, err);
	free(TAKE_PTR(key));
	if (r >= 0 && runtime && !*runtime)
		free(TAKE_PTR(runtime));
	if (r >= 0) {
		key = orh_toml_key("crio", "runtime", "runtimes", dflt, "runtime_root", NULL);
		r = last_string(files, first, key, &root, err);
		free(TAKE_PTR(key));
	}
	if (r >= 0) {
		key = orh_toml_key("crio", "runtime", "runtimes", dflt, "monitor_path", NULL);
		r = last_string(files, first, key, &conmon, err);
		free(TAKE_PTR(key));
	}
	if (r >= 0) {
		key = orh_toml_key("crio", "runtime", "hooks_dir", NULL);
		r = last_array(files, first, key, &dirs, &hooks_set, err);
		free(TAKE_PTR(key));
	}
	if (r < 0) {
		orh_strv_free(&dirs);
		return r;
	}
	if (req->runtime) {
		free(runtime);
		runtime = orh_xstrdup(req->runtime);
	} else if (!runtime) {
		runtime = crio_find(rd, dflt);
	}
	if (!runtime) {
		orh_strv_free(&dirs);
		return orh_fail(err, ENOENT, "%s: CRI-O's runtime '%s' is not found (give "
				"configure --runtime PATH)", path, dflt);
	}
	if (!conmon || !*conmon) {
		free(conmon);
		conmon = crio_find(rd, "conmon");
	}
	if (!hooks_set)
		orh_strv_push(&dirs, orh_xstrdup(ENGINE_HOOKS_DIR));
	if (!orh_strv_contains(&dirs, ORH_CONTAINERS_HOOKS_DIR)) {
		/* added to the list CRI-O reads now, never put in its place */
		orh_strv_push(&dirs, orh_xstrdup(ORH_CONTAINERS_HOOKS_DIR));
		hooks = orh_toml_array(&dirs);
		hooks_table = orh_xasprintf("[crio.runtime]\nhooks_dir = %s\n", hooks);
	}
	orh_strv_free(&dirs);
	shim = orh_toml_quote(req->shim);
	if (conmon)
		conmon_line = orh_xasprintf("monitor_path = \"%s\"\n", conmon);
	text = orh_xasprintf("# Written by `oci-rdma-hook configure --engine crio --handler %s`;\n"
			     "# `oci-rdma-hook configure --engine crio --undo` removes this file.\n"
			     "%s"
			     "[crio.runtime.runtimes.%s]\n"
			     "runtime_path = %s\n"
			     "runtime_type = \"oci\"\n"
			     "runtime_root = \"%s\"\n"
			     "%s",
			     req->handler, hooks_table ? hooks_table : "", req->handler, shim,
			     root ? root : dflt[0] == 'c' ? "/run/crun" : "/run/runc",
			     conmon_line ? conmon_line : "");
	r = own_dropin(rd, dir, text, files, err);
	if (r < 0)
		return r;
	orh_strv_pushf(notes, "CRI-O: handler '%s' runs %s through the shim; restart crio to "
		       "load it", req->handler, runtime);
	/* CRI-O's runtime is rarely the runc in the shim's PATH: always named */
	return node_runtime(req, node_config, rd, runtime, files, notes, err);
}

/* ---- podman ---- */

static int podman_plan(const struct orh_configure_req *req, const struct orh_cfg_reader *rd,
		       struct orh_cfg_files *files, struct orh_strv *notes, struct orh_err *err)
{
	const char *path = req->engine_config ? req->engine_config : engine_configs[req->engine];
	_cleanup_free_ char *dir = dir_of(path, ".d");
	_cleanup_free_ char *key = NULL, *list = NULL, *text = NULL;
	struct orh_cfg_file *f = NULL;
	struct orh_strv dirs = { 0 };
	bool set = false;
	size_t first = 0;
	int r;

	/* containers.conf is read after the distribution's defaults file */
	first = files->n;
	r = add_file(rd, files, "/usr/share/containers/containers.conf", &f, err);
	if (r >= 0) {
		size_t rest = 0;

		r = read_dropins(rd, path, dir, files, &rest, err);
	}
	if (r < 0 || req->undo)
		return r < 0 ? r : own_dropin(rd, dir, NULL, files, err);
	key = orh_toml_key("engine", "hooks_dir", NULL);
	r = last_array(files, first, key, &dirs, &set, err);
	if (r < 0) {
		orh_strv_free(&dirs);
		return r;
	}
	if (!set)
		orh_strv_push(&dirs, orh_xstrdup(ENGINE_HOOKS_DIR));
	/* createRuntime and poststop (a build installed elsewhere than the package) */
	if (!orh_strv_contains(&dirs, ORH_CONTAINERS_HOOKS_DIR))
		orh_strv_push(&dirs, orh_xstrdup(ORH_CONTAINERS_HOOKS_DIR));
	if (!orh_strv_contains(&dirs, ORH_OWN_HOOKS_DIR))
		orh_strv_push(&dirs, orh_xstrdup(ORH_OWN_HOOKS_DIR));
	list = orh_toml_array(&dirs);
	orh_strv_free(&dirs);
	text = orh_xasprintf("# Written by `oci-rdma-hook configure --engine podman`;\n"
			     "# `oci-rdma-hook configure --engine podman --undo` removes this file.\n"
			     "# The directories podman read before, and the one holding\n"
			     "# oci-rdma-hook's precreate registration, which only podman reads.\n"
			     "[engine]\n"
			     "hooks_dir = %s\n",
			     list);
	r = own_dropin(rd, dir, text, files, err);
	if (r >= 0)
		orh_strv_pushf(notes, "podman: hooks_dir gains %s (precreate); it applies to the "
			       "next podman command", ORH_OWN_HOOKS_DIR);
	return r;
}

/* ---- docker ---- */

static int docker_plan(const struct orh_configure_req *req, const char *node_config,
		       const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		       struct orh_strv *notes, struct orh_err *err)
{
	const char *path = req->engine_config ? req->engine_config : engine_configs[req->engine];
	_cleanup_free_ char *runtime = NULL;
	struct orh_cfg_file *f = NULL;
	json_t *root = NULL, *runtimes = NULL, *mine = NULL;
	json_error_t jerr;
	int r;

	r = add_file(rd, files, path, &f, err);
	if (r < 0)
		return r;
	root = f->old ? json_loads(f->old, JSON_REJECT_DUPLICATES, &jerr) : json_object();
	if (!root)
		return orh_fail(err, EINVAL, "%s:%d: %s", path, jerr.line, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return orh_fail(err, EINVAL, "%s: not a JSON object", path);
	}
	runtimes = json_object_get(root, "runtimes");
	if (runtimes && !json_is_object(runtimes)) {
		json_decref(root);
		return orh_fail(err, EINVAL, "%s: field 'runtimes' is not an object", path);
	}
	mine = runtimes ? json_object_get(runtimes, req->handler) : NULL;
	if (mine) {
		json_t *want = json_string(req->shim);
		bool ours = json_equal(json_object_get(mine, "path"), want);

		json_decref(want);
		if (!ours) {
			json_decref(root);
			return orh_fail(err, EEXIST, "%s: runtimes.%s is another runtime (give "
					"configure another --handler, or remove it)", path,
					req->handler);
		}
	}
	if (req->undo) {
		if (mine) {
			json_object_del(runtimes, req->handler);
			if (json_object_size(runtimes) == 0)
				json_object_del(root, "runtimes");
			if (json_object_size(root) == 0)
				f->remove = true;
			else
				f->new = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		}
		json_decref(root);
		return node_runtime(req, node_config, rd, NULL, files, notes, err);
	}
	{
		/* the runtime dockerd runs by default: default-runtime's path, else runc */
		const char *dflt = json_string_value(json_object_get(root, "default-runtime"));
		const char *p = dflt && runtimes ?
			json_string_value(json_object_get(json_object_get(runtimes, dflt), "path")) :
			NULL;

		if (req->runtime) {
			runtime = orh_xstrdup(req->runtime);
		} else if (shim_runtime(rd, p, &runtime, notes) < 0) {
			json_decref(root);
			return orh_fail(err, ENOENT, "%s: runtimes.%s.path '%s' is not found", path,
					dflt, p);
		}
	}
	if (!mine) {
		if (!runtimes) {
			runtimes = json_object();
			json_object_set_new(root, "runtimes", runtimes);
		}
		json_object_set_new(runtimes, req->handler, json_pack("{s:s}", "path", req->shim));
		f->new = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	}
	json_decref(root);
	if (f->new) {
		char *nl = orh_xasprintf("%s\n", f->new);

		free(f->new);
		f->new = nl;
	}
	orh_strv_pushf(notes, "docker: runtime '%s' (docker run --runtime %s); reload dockerd "
		       "(SIGHUP, or systemctl reload docker) to load it", req->handler, req->handler);
	return node_runtime(req, node_config, rd, runtime, files, notes, err);
}

int orh_configure_plan(const struct orh_configure_req *req, const char *node_config,
		       const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		       struct orh_strv *notes, struct orh_err *err)
{
	memset(files, 0, sizeof(*files));
	if (req->engine != ORH_ENGINE_PODMAN && !handler_name_ok(req->handler))
		return orh_fail(err, EINVAL, "handler '%s': not a RuntimeClass handler name "
				"(lower-case letters, digits, '-'; at most 63)", req->handler);
	if (req->shim[0] != '/')
		return orh_fail(err, EINVAL, "shim '%s' is not an absolute path", req->shim);
	if (req->runtime && req->runtime[0] != '/')
		return orh_fail(err, EINVAL, "runtime '%s' is not an absolute path", req->runtime);
	switch (req->engine) {
	case ORH_ENGINE_CONTAINERD:
		return containerd_plan(req, node_config, rd, files, notes, err);
	case ORH_ENGINE_CRIO:
		return crio_plan(req, node_config, rd, files, notes, err);
	case ORH_ENGINE_DOCKER:
		return docker_plan(req, node_config, rd, files, notes, err);
	case ORH_ENGINE_PODMAN:
		return podman_plan(req, rd, files, notes, err);
	}
	return orh_fail(err, EINVAL, "unknown engine");
}
