/* SPDX-License-Identifier: Apache-2.0 */
/*
 * docker: the runtime merged into daemon.json, every other key kept
 * (include/orh/cmd/configure.h). JSON has no comments, and dockerd refuses keys it does not
 * know: configure's entry is told by its name and the shim's path. The runtime docker
 * ran before is the entry's runtimeArgs (the shim's first argument), not the node
 * config's, which another engine may set.
 */
#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "engines_priv.h"
#include "orh/node/config.h"
#include "orh/base/json.h"

static char *dump(const json_t *root)
{
	_cleanup_json_text_ char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

	return orh_xasprintf("%s\n", text);
}

/* daemon.json as an object, its runtimes (NULL when none) and our entry (NULL when none,
 * an error when another runtime has the name). */
static int load(const struct orh_cfg_file *f, const struct orh_configure_req *req, json_t **root,
		json_t **runtimes, json_t **mine, struct orh_err *err)
{
	json_error_t jerr;

	*root = f->old ? json_loads(f->old, JSON_REJECT_DUPLICATES, &jerr) : json_object();
	if (!*root)
		return orh_fail(err, EINVAL, "%s:%d: %s", f->path, jerr.line, jerr.text);
	if (!json_is_object(*root))
		return orh_fail(err, EINVAL, "%s: not a JSON object", f->path);
	*runtimes = json_object_get(*root, "runtimes");
	if (*runtimes && !json_is_object(*runtimes))
		return orh_fail(err, EINVAL, "%s: field 'runtimes' is not an object", f->path);
	*mine = *runtimes ? json_object_get(*runtimes, req->handler) : NULL;
	if (*mine) {
		const char *path = json_string_value(json_object_get(*mine, "path"));

		if (!path || strcmp(path, req->shim))
			return orh_fail(err, EEXIST, "%s: runtimes.%s is another runtime (give "
					"configure another --handler, or remove it)", f->path,
					req->handler);
	}
	return 0;
}

/* The runtime dockerd runs by default: default-runtime's path, else runc. */
static int default_runtime(const struct orh_configure_req *req, const struct orh_cfg_reader *rd,
			   const char *path, const json_t *root, const json_t *runtimes,
			   char **out, struct orh_strv *notes, struct orh_err *err)
{
	const char *dflt = json_string_value(json_object_get(root, "default-runtime"));
	const char *p = dflt && runtimes ?
		json_string_value(json_object_get(json_object_get(runtimes, dflt), "path")) : NULL;

	if (req->runtime) {
		*out = orh_xstrdup(req->runtime);
		return 0;
	}
	if (cfg_shim_runtime(rd, p, out, notes) < 0)
		return orh_fail(err, ENOENT, "%s: runtimes.%s.path '%s' is not found", path, dflt, p);
	return 0;
}

int cfg_docker(const struct orh_configure_req *req, const char *node_config,
	       const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
	       struct orh_strv *notes, struct orh_err *err)
{
	_cleanup_free_ char *runtime = NULL;
	json_t *root = NULL, *runtimes = NULL, *mine = NULL;
	struct orh_cfg_file *f = NULL;
	int r;

	r = cfg_add_file(rd, files, cfg_engine_path(req), &f, err);
	if (r >= 0)
		r = load(f, req, &root, &runtimes, &mine, err);
	if (r >= 0 && req->undo && mine) {
		json_object_del(runtimes, req->handler);
		if (json_object_size(runtimes) == 0)
			json_object_del(root, "runtimes");
		/* written again even when nothing is left ({}, which dockerd reads as no file):
		 * JSON holds no mark of who made the file, and an operator's {} stays */
		f->new = dump(root);
	}
	if (r < 0 || req->undo) {
		json_decref(root);
		return r < 0 ? r : cfg_node_runtime(req, node_config, rd, NULL, files, notes, err);
	}
	r = default_runtime(req, rd, f->path, root, runtimes, &runtime, notes, err);
	if (r >= 0) {
		/* the runtime docker ran before rides in the entry's own arguments, so that
		 * another engine's runtime in the node config is not docker's */
		json_t *entry = json_pack("{s:s}", "path", req->shim);

		if (runtime)
			json_object_set_new(entry, "runtimeArgs",
					    json_pack("[s+]", ORH_RUNTIME_ARG, runtime));
		if (!runtimes) {
			runtimes = json_object();
			json_object_set_new(root, "runtimes", runtimes);
		}
		if (!mine || !json_equal(mine, entry)) {
			json_object_set(runtimes, req->handler, entry);
			f->new = dump(root);
		}
		json_decref(entry);
	}
	json_decref(root);
	if (r < 0)
		return r;
	orh_strv_pushf(notes, "docker: runtime '%s' (docker run --runtime %s), executing %s; "
		       "reload dockerd (SIGHUP, or systemctl reload docker) to load it",
		       req->handler, req->handler, runtime ? runtime : "runc");
	/* (a runtime block of an earlier configure of docker goes) */
	return cfg_node_runtime(req, node_config, rd, NULL, files, notes, err);
}
