/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the engines of `configure` share (include/orh/cmd/configure.h, engines_priv.h): their
 * names and files, reading a file into a plan, TOML look-ups, drop-in directories, the node
 * config's runtime block. Each engine's changes are computed from the text of the files
 * read; nothing here writes.
 *
 * The runtime the shim executes (node config key `runtime`) goes into a block of the node
 * config, only where it is not the `runc` the shim finds by itself.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "engines_priv.h"
#include "orh/node/config.h"


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

const char *cfg_engine_path(const struct orh_configure_req *req)
{
	return req->engine_config ? req->engine_config : orh_engine_default_config(req->engine);
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

int cfg_add_file(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
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

int cfg_scan(const struct orh_cfg_file *f, bool strip, struct orh_toml *t, struct orh_err *err)
{
	_cleanup_free_ char *own = f->old && strip ? orh_block_strip_all(f->old) : NULL;

	return orh_toml_scan(own ? own : f->old ? f->old : "", f->path, t, err);
}

int cfg_get_string(const struct orh_toml *t, const char *file, const char *key, char **out,
		      struct orh_err *err)
{
	const struct orh_toml_entry *e = orh_toml_get(t, key);

	*out = NULL;
	if (e && !orh_toml_string(e->value, out))
		return orh_fail(err, EINVAL, "%s:%u: '%s' is not a string", file, e->line,
				strrchr(key, ORH_TOML_SEP[0]) + 1);
	return 0;
}

int cfg_shim_runtime(const struct orh_cfg_reader *rd, const char *name, char **out,
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
	/* where the shim looks for it (ORH_RUNTIME_PATH) */
	for (const char *d = ORH_RUNTIME_PATH; *d;) {
		size_t n = strcspn(d, ":");
		char *p = orh_xasprintf("%.*s/%s", (int)n, d, name);

		if (rd->executable(rd->arg, p)) {
			*out = p;
			return 0;
		}
		free(p);
		d += n + (d[n] == ':');
	}
	return -ENOENT;
}

/* The node config's runtime block for this engine: in place when the shim must execute
 * `runtime` rather than the runc it finds itself (runtime NULL), unless the operator's own
 * lines set a runtime other than runc (a note says so, and nothing is written); removed
 * otherwise and on --undo. */
/* Another engine's runtime block in the node config must chain the same runtime (one
 * `runtime` serves every engine whose registration names none of its own). */
static int other_engines(const struct orh_configure_req *req, const struct orh_cfg_file *f,
			 const char *runtime, struct orh_err *err)
{
	for (size_t e = 0; e < ORH_ARRAY_SIZE(engine_names) && f->old; e++) {
		_cleanup_free_ char *id = orh_xasprintf("--engine %s", engine_names[e]);
		struct orh_block b = { .id = id };
		_cleanup_free_ char *body = e == req->engine ? NULL : orh_block_body(f->old, &b);
		const char *line = body ? strstr(body, "\nruntime = ") : NULL;
		size_t n;

		if (!line)
			continue;
		line += strlen("\nruntime = ");
		n = strcspn(line, "\r\n");
		if (strlen(runtime) != n || strncmp(line, runtime, n))
			return orh_fail(err, EEXIST, "%s: the shim executes %.*s for %s (configure's "
					"block); one node config runtime serves %s too, whose runtime "
					"is %s: give configure --runtime %.*s, or make the engines "
					"chain the same runtime", f->path, (int)n, line,
					engine_names[e], engine_names[req->engine], runtime, (int)n,
					line);
	}
	return 0;
}

int cfg_node_runtime(const struct orh_configure_req *req, const char *node_config,
			const struct orh_cfg_reader *rd, const char *runtime,
			struct orh_cfg_files *files, struct orh_strv *notes, struct orh_err *err)
{
	_cleanup_free_ char *id = orh_xasprintf("--engine %s", orh_engine_name(req->engine));
	_cleanup_free_ char *body = NULL;
	struct orh_block b = { .id = id, .header = "" };
	struct orh_cfg_file *f = NULL;
	bool remove = false;
	int r;

	r = cfg_add_file(rd, files, node_config, &f, err);
	if (r >= 0 && !req->undo && req->engine != ORH_ENGINE_DOCKER)
		r = other_engines(req, f, runtime ? runtime : "runc", err);
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


/* dir's files in lexical order into files: *.conf only, or (every) every file, directories
 * entered where they sort (CRI-O's walk of crio.conf.d); ours left out. */
static int read_dir(const struct orh_cfg_reader *rd, const char *dir, bool every,
		    struct orh_cfg_files *files, unsigned depth, struct orh_err *err)
{
	struct orh_strv names = { 0 };
	struct orh_cfg_file *f = NULL;
	int r;

	if (depth > 8)
		return orh_fail(err, ELOOP, "'%s': drop-in directories nested too deep", dir);
	r = rd->list(rd->arg, dir, &names, err);
	for (size_t i = 0; r >= 0 && i < names.n; i++) {
		size_t n = strlen(names.v[i]);
		_cleanup_free_ char *p = orh_xasprintf("%s/%s", dir, names.v[i]);

		if (!strcmp(names.v[i], ORH_DROPIN_NAME) && depth == 0)
			continue;
		if (every && rd->is_dir && rd->is_dir(rd->arg, p))
			r = read_dir(rd, p, every, files, depth + 1, err);
		else if (every || (n >= 6 && !strcmp(names.v[i] + n - 5, ".conf")))
			r = cfg_add_file(rd, files, p, &f, err);
	}
	orh_strv_free(&names);
	return r;
}

int cfg_read_dropins(const struct orh_cfg_reader *rd, const char *main_path,
		     const char *dir, bool every, struct orh_cfg_files *files, size_t *first,
		     struct orh_err *err)
{
	struct orh_cfg_file *f = NULL;
	int r;

	*first = files->n;
	if (main_path) {
		r = cfg_add_file(rd, files, main_path, &f, err);
		if (r < 0)
			return r;
	}
	return read_dir(rd, dir, every, files, 0, err);
}

int cfg_last_array(const struct orh_cfg_files *files, size_t first, const char *key,
		      struct orh_strv *out, bool *set, struct orh_err *err)
{
	*set = false;
	for (size_t i = first; i < files->n; i++) {
		const struct orh_toml_entry *e;
		struct orh_toml t;
		int r = cfg_scan(&files->v[i], false, &t, err);

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

int cfg_last_string(const struct orh_cfg_files *files, size_t first, const char *key,
		       char **out, struct orh_err *err)
{
	*out = NULL;
	for (size_t i = first; i < files->n; i++) {
		struct orh_toml t;
		char *s = NULL;
		int r = cfg_scan(&files->v[i], false, &t, err);

		if (r >= 0)
			r = cfg_get_string(&t, files->v[i].path, key, &s, err);
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

int cfg_own_file(const struct orh_cfg_reader *rd, const char *path, const char *text,
		 struct orh_cfg_files *files, struct orh_cfg_file **out, struct orh_err *err)
{
	struct orh_cfg_file *f = NULL;
	int r = 0;

	for (size_t i = 0; i < files->n && !f; i++)
		if (!strcmp(files->v[i].path, path))
			f = &files->v[i];
	if (!f)
		r = cfg_add_file(rd, files, path, &f, err);
	if (r < 0)
		return r;
	f->mkdir = true;
	if (!text)
		f->remove = f->old != NULL;
	else if (!f->old || strcmp(f->old, text))
		f->new = orh_xstrdup(text);
	*out = f;
	return 0;
}

bool cfg_file_exists(const struct orh_cfg_reader *rd, const char *path)
{
	struct orh_err ignored = { 0 };
	char *text = NULL;
	bool there = rd->read(rd->arg, path, &text, &ignored) >= 0 && text;

	free(text);
	return there;
}

bool cfg_dir_has_other(const struct orh_cfg_reader *rd, const char *glob, const char *name)
{
	const char *slash = strrchr(glob, '/');
	_cleanup_free_ char *dir = orh_xasprintf("%.*s", (int)(slash - glob), glob);
	struct orh_strv names = { 0 };
	struct orh_err err = { 0 };
	bool other = false;

	if (rd->list(rd->arg, *dir ? dir : "/", &names, &err) < 0)
		return true; /* unreadable: taken as in use */
	for (size_t i = 0; i < names.n; i++)
		if (strcmp(names.v[i], name) && fnmatch(slash + 1, names.v[i], FNM_PERIOD) == 0)
			other = true;
	orh_strv_free(&names);
	return other;
}

int cfg_own_dropin(const struct orh_cfg_reader *rd, const char *dir, const char *text,
		   struct orh_cfg_files *files, struct orh_err *err)
{
	_cleanup_free_ char *p = orh_xasprintf("%s/" ORH_DROPIN_NAME, dir);
	struct orh_cfg_file *f = NULL;

	return cfg_own_file(rd, p, text, files, &f, err);
}
