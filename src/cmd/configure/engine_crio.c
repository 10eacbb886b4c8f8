/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRI-O: a drop-in of configure's own in crio.conf.d (include/orh/cmd/configure.h), with the
 * handler and the paths of CRI-O's packaging; hooks_dir added to, never replaced. The
 * shim then executes CRI-O's runtime, named in the node config's runtime block.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engines_priv.h"

/* What configure takes from CRI-O's files. */
struct crio_node {
	char *dflt;          /* default_runtime, else the one installed */
	char *runtime;       /* its runtime_path, else where the packaging puts it */
	char *root;          /* its runtime_root */
	char *conmon;        /* its monitor_path, else the packaging's conmon */
	struct orh_strv hooks; /* hooks_dir as the node sets it (hooks_set) */
	bool hooks_set;
};

static void crio_node_free(struct crio_node *n)
{
	free(n->dflt);
	free(n->runtime);
	free(n->root);
	free(n->conmon);
	orh_strv_free(&n->hooks);
}

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

/* No file CRI-O reads may define the handler already. */
static int check_free(const struct orh_cfg_files *files, size_t first, const char *handler,
		      struct orh_err *err)
{
	_cleanup_free_ char *key = orh_toml_key("crio", "runtime", "runtimes", handler, NULL);
	int r = 0;

	for (size_t i = first; i < files->n && r >= 0; i++) {
		const struct orh_toml_entry *e;
		struct orh_toml t;

		r = cfg_scan(&files->v[i], false, &t, err);
		e = r >= 0 ? orh_toml_find_under(&t, key) : NULL;
		if (e)
			r = orh_fail(err, EEXIST, "%s:%u: runtime handler '%s' is defined already "
				     "(give configure another --handler, or remove it)",
				     files->v[i].path, e->line, handler);
		orh_toml_free(&t);
	}
	return r;
}

/* A key of the default runtime's table, as the last file sets it. */
static int runtime_key(const struct orh_cfg_files *files, size_t first, const char *dflt,
		       const char *name, char **out, struct orh_err *err)
{
	_cleanup_free_ char *key = orh_toml_key("crio", "runtime", "runtimes", dflt, name, NULL);
	int r = cfg_last_string(files, first, key, out, err);

	if (r >= 0 && *out && !**out)
		free(TAKE_PTR(*out));
	return r;
}

static int read_node(const struct orh_configure_req *req, const struct orh_cfg_reader *rd,
		     const struct orh_cfg_files *files, size_t first, struct crio_node *n,
		     struct orh_err *err)
{
	_cleanup_free_ char *key = orh_toml_key("crio", "runtime", "default_runtime", NULL);
	_cleanup_free_ char *hooks = orh_toml_key("crio", "runtime", "hooks_dir", NULL);
	int r = cfg_last_string(files, first, key, &n->dflt, err);

	/* CRI-O's default is crun since 1.31, runc before: take the one installed */
	if (r >= 0 && !n->dflt) {
		char *crun = crio_find(rd, "crun");

		n->dflt = orh_xstrdup(crun ? "crun" : "runc");
		free(crun);
	}
	if (r >= 0)
		r = runtime_key(files, first, n->dflt, "runtime_path", &n->runtime, err);
	if (r >= 0)
		r = runtime_key(files, first, n->dflt, "runtime_root", &n->root, err);
	if (r >= 0)
		r = runtime_key(files, first, n->dflt, "monitor_path", &n->conmon, err);
	if (r >= 0)
		r = cfg_last_array(files, first, hooks, &n->hooks, &n->hooks_set, err);
	if (r < 0)
		return r;
	if (req->runtime) {
		free(n->runtime);
		n->runtime = orh_xstrdup(req->runtime);
	} else if (!n->runtime) {
		n->runtime = crio_find(rd, n->dflt);
	}
	if (!n->runtime)
		return orh_fail(err, ENOENT, "%s: CRI-O's runtime '%s' is not found (give "
				"configure --runtime PATH)", cfg_engine_path(req), n->dflt);
	if (!n->conmon)
		n->conmon = crio_find(rd, "conmon");
	return 0;
}

static char *dropin_text(const struct orh_configure_req *req, struct crio_node *n)
{
	_cleanup_free_ char *shim = orh_toml_quote(req->shim), *hooks = NULL, *conmon = NULL;

	if (!n->hooks_set)
		orh_strv_push(&n->hooks, orh_xstrdup(ORH_ENGINE_HOOKS_DIR));
	if (!orh_strv_contains(&n->hooks, ORH_CONTAINERS_HOOKS_DIR)) {
		/* added to the list CRI-O reads now, never put in its place */
		_cleanup_free_ char *list = NULL;

		orh_strv_push(&n->hooks, orh_xstrdup(ORH_CONTAINERS_HOOKS_DIR));
		list = orh_toml_array(&n->hooks);
		hooks = orh_xasprintf("[crio.runtime]\nhooks_dir = %s\n", list);
	}
	if (n->conmon)
		conmon = orh_xasprintf("monitor_path = \"%s\"\n", n->conmon);
	return orh_xasprintf("# Written by `oci-rdma-hook configure --engine crio --handler %s`;\n"
			     "# `oci-rdma-hook configure --engine crio --undo` removes this file.\n"
			     "%s"
			     "[crio.runtime.runtimes.%s]\n"
			     "runtime_path = %s\n"
			     "runtime_type = \"oci\"\n"
			     "runtime_root = \"%s\"\n"
			     "%s",
			     req->handler, hooks ? hooks : "", req->handler, shim,
			     n->root ? n->root : n->dflt[0] == 'c' ? "/run/crun" : "/run/runc",
			     conmon ? conmon : "");
}

int cfg_crio(const struct orh_configure_req *req, const char *node_config,
	     const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
	     struct orh_strv *notes, struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xasprintf("%s.d", cfg_engine_path(req));
	_cleanup_free_ char *text = NULL;
	struct crio_node n = { 0 };
	size_t first = 0;
	int r;

	r = cfg_read_dropins(rd, cfg_engine_path(req), dir, true, files, &first, err);
	if (r >= 0 && req->undo)
		r = cfg_own_dropin(rd, dir, NULL, files, err);
	if (r < 0 || req->undo)
		return r < 0 ? r : cfg_node_runtime(req, node_config, rd, NULL, files, notes, err);
	r = check_free(files, first, req->handler, err);
	if (r >= 0)
		r = read_node(req, rd, files, first, &n, err);
	if (r >= 0) {
		text = dropin_text(req, &n);
		r = cfg_own_dropin(rd, dir, text, files, err);
	}
	if (r >= 0) {
		orh_strv_pushf(notes, "CRI-O: handler '%s' runs %s through the shim; restart crio "
			       "to load it", req->handler, n.runtime);
		/* CRI-O's runtime is rarely the runc in the shim's PATH: always named */
		r = cfg_node_runtime(req, node_config, rd, n.runtime, files, notes, err);
	}
	crio_node_free(&n);
	return r;
}
