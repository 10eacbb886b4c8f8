/* SPDX-License-Identifier: Apache-2.0 */
/*
 * containerd: a handler block appended to config.toml (include/orh/configure.h). A
 * drop-in through `imports` does not work in containerd 1.x: an imported file replaces
 * each plugin's whole table, so a drop-in holding only the handler would drop every other
 * CRI setting of the node.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engines_priv.h"

/* What configure takes from the operator's config.toml. */
struct cd_node {
	long version;       /* 1, 2 or 3 */
	const char *plugin; /* the CRI runtime plugin's name in that version */
	char *dflt;         /* default_runtime_name; NULL: runc */
	char *binary;       /* that handler's options.BinaryName */
	bool systemd;       /* its options.SystemdCgroup */
};

static void cd_node_free(struct cd_node *n)
{
	free(n->dflt);
	free(n->binary);
}

static int read_version(const struct orh_toml *t, const struct orh_cfg_file *f,
			struct cd_node *n, struct orh_err *err)
{
	const struct orh_toml_entry *e = orh_toml_get(t, "version");
	char *end = NULL;

	/* no file: a new one, version 2, which 1.x reads and 2.x migrates at load */
	n->version = f->old && !e ? 1 : 2;
	if (e) {
		n->version = strtol(e->value, &end, 10);
		if (*end || n->version < 1 || n->version > 3)
			return orh_fail(err, EINVAL, "%s:%u: version '%s' is not 1, 2 or 3", f->path,
					e->line, e->value);
	}
	n->plugin = n->version == 1 ? "cri" : n->version == 2 ? "io.containerd.grpc.v1.cri"
							    : "io.containerd.cri.v1.runtime";
	return 0;
}

/* The handler must be new, and the runtimes a table it can be added to. */
static int check_free(const struct orh_toml *t, const char *path, const char *runtimes,
		      const char *handler, struct orh_err *err)
{
	_cleanup_free_ char *key = orh_toml_key(runtimes, handler, NULL);
	const struct orh_toml_entry *e = orh_toml_find_under(t, key);

	if (e)
		return orh_fail(err, EEXIST, "%s:%u: runtime handler '%s' is defined already "
				"(give configure another --handler, or remove it)", path, e->line,
				handler);
	e = orh_toml_get(t, runtimes);
	if (e)
		return orh_fail(err, EINVAL, "%s:%u: the runtimes are an inline table, which "
				"cannot be extended: write them as [tables]", path, e->line);
	return 0;
}

static int read_node(const struct orh_cfg_file *f, const char *handler, struct cd_node *n,
		     struct orh_err *err)
{
	_cleanup_free_ char *runtimes = NULL, *key = NULL;
	const struct orh_toml_entry *e;
	struct orh_toml t;
	int r = cfg_scan(f, true, &t, err);

	if (r < 0)
		return r;
	r = read_version(&t, f, n, err);
	if (r >= 0) {
		runtimes = orh_toml_key("plugins", n->plugin, "containerd", "runtimes", NULL);
		r = check_free(&t, f->path, runtimes, handler, err);
	}
	if (r >= 0) {
		key = orh_toml_key("plugins", n->plugin, "containerd", "default_runtime_name", NULL);
		r = cfg_get_string(&t, f->path, key, &n->dflt, err);
	}
	if (r >= 0) {
		free(key);
		key = orh_toml_key(runtimes, n->dflt ? n->dflt : "runc", "options", "BinaryName", NULL);
		r = cfg_get_string(&t, f->path, key, &n->binary, err);
	}
	if (r >= 0) {
		free(key);
		key = orh_toml_key(runtimes, n->dflt ? n->dflt : "runc", "options", "SystemdCgroup", NULL);
		e = orh_toml_get(&t, key);
		if (e && !orh_toml_bool(e->value, &n->systemd))
			r = orh_fail(err, EINVAL, "%s:%u: SystemdCgroup '%s' is not true or false",
				     f->path, e->line, e->value);
	}
	orh_toml_free(&t);
	return r;
}

/* The handler's tables, their headers as containerd's documentation writes them. */
static char *handler_body(const struct cd_node *n, const struct orh_configure_req *req)
{
	_cleanup_free_ char *shim = orh_toml_quote(req->shim);
	_cleanup_free_ char *table = n->version == 1 ?
		orh_xasprintf("plugins.cri.containerd.runtimes.%s", req->handler) :
		orh_xasprintf("plugins.\"%s\".containerd.runtimes.%s", n->plugin, req->handler);

	return orh_xasprintf("[%s]\n"
			     "  runtime_type = \"io.containerd.runc.v2\"\n"
			     "  pod_annotations = [\"oci-rdma-hook/*\"]\n"
			     "[%s.options]\n"
			     "  BinaryName = %s\n"
			     "  SystemdCgroup = %s\n",
			     table, table, shim, n->systemd ? "true" : "false");
}

int cfg_containerd(const struct orh_configure_req *req, const char *node_config,
		   const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		   struct orh_strv *notes, struct orh_err *err)
{
	_cleanup_free_ char *id = orh_xasprintf("--engine containerd --handler %s", req->handler);
	_cleanup_free_ char *runtime = NULL, *body = NULL;
	struct orh_block b = { .id = id, .header = "version = 2\n" };
	struct cd_node n = { 0 };
	struct orh_cfg_file *f = NULL;
	bool remove = false;
	int r;

	r = cfg_add_file(rd, files, cfg_engine_path(req), &f, err);
	if (r < 0)
		return r;
	if (req->undo) {
		r = orh_block_remove(f->old, f->path, &b, &f->new, &remove, err);
		f->remove = remove;
		return r < 0 ? r : cfg_node_runtime(req, node_config, rd, NULL, files, notes, err);
	}
	r = read_node(f, req->handler, &n, err);
	if (r >= 0 && req->runtime)
		runtime = orh_xstrdup(req->runtime);
	else if (r >= 0 && cfg_shim_runtime(rd, n.binary, &runtime, notes) < 0)
		r = orh_fail(err, ENOENT, "%s: BinaryName '%s' of handler '%s' is not found "
			     "(give configure --runtime PATH)", f->path, n.binary,
			     n.dflt ? n.dflt : "runc");
	if (r >= 0) {
		b.body = body = handler_body(&n, req);
		r = orh_block_install(f->old, f->path, &b, &f->new, err);
	}
	if (r >= 0)
		orh_strv_pushf(notes, "containerd: handler '%s' (config version %ld, SystemdCgroup = "
			       "%s as handler '%s'); restart containerd to load it", req->handler,
			       n.version, n.systemd ? "true" : "false", n.dflt ? n.dflt : "runc");
	cd_node_free(&n);
	return r < 0 ? r : cfg_node_runtime(req, node_config, rd, runtime, files, notes, err);
}
