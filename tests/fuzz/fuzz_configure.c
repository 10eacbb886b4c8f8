/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: `configure --engine containerd` on a node whose config.toml is the input up
 * to its first NUL byte, and whose conf.d/50-site.toml (read where the main file imports
 * it) is the rest. Every error carries a message. A plan that succeeds leaves a drop-in,
 * else (containerd 1.x, where no drop-in is needed; a k3s template) the main file, that
 * scans as TOML where the input did, and then holds the handler's table once; run again on
 * the files it wrote, the plan changes nothing; --undo on those files takes the handler out
 * of the drop-in and the main file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/cmd/configure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAIN "/etc/containerd/config.toml"
#define SITE "/etc/containerd/conf.d/50-site.toml"
#define NODE "/etc/oci-rdma-hook/oci-rdma-hook.conf"
#define SHIM "/usr/bin/oci-rdma-runtime"

#define SLOTS 8

struct node {
	char *path[SLOTS]; /* [0] the main file, [1] the site's; then what configure wrote */
	char *text[SLOTS];
};

static int node_read(void *arg, const char *path, char **out, struct orh_err *err)
{
	struct node *n = arg;

	*out = NULL;
	for (size_t i = 0; i < SLOTS; i++)
		if (n->path[i] && n->text[i] && !strcmp(n->path[i], path))
			*out = orh_xstrdup(n->text[i]);
	return 0;
}

static int node_list(void *arg, const char *dir, struct orh_strv *names, struct orh_err *err)
{
	struct node *n = arg;

	size_t len = strlen(dir);

	for (size_t i = 1; i < SLOTS; i++)
		if (n->path[i] && n->text[i] && !strncmp(n->path[i], dir, len) &&
		    n->path[i][len] == '/' && !strchr(n->path[i] + len + 1, '/'))
			orh_strv_push(names, orh_xstrdup(n->path[i] + len + 1));
	return 0;
}

static bool node_exe(void *arg, const char *path)
{
	return true;
}

static int plan(struct node *n, bool undo, struct orh_cfg_files *files)
{
	struct orh_cfg_reader rd = { node_read, node_list, node_exe, n, NULL };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .handler = "rdma",
					 .shim = SHIM, .undo = undo };
	struct orh_strv notes = { 0 };
	struct orh_err err = { 0 };
	int r = orh_configure_plan(&req, NODE, &rd, files, &notes, &err);

	if (r < 0 && !err.msg[0])
		abort(); /* an error without a message */
	orh_strv_free(&notes);
	return r;
}

/* The node after files were written (a new path takes a free slot). */
static void apply(struct node *n, const struct orh_cfg_files *files)
{
	for (size_t i = 0; i < files->n; i++) {
		const struct orh_cfg_file *f = &files->v[i];
		size_t k = 0;

		if (!f->new && !f->remove)
			continue;
		while (k < SLOTS && n->path[k] && strcmp(n->path[k], f->path))
			k++;
		if (k == SLOTS)
			abort(); /* more files than any plan writes */
		if (!n->path[k])
			n->path[k] = orh_xstrdup(f->path);
		free(n->text[k]);
		n->text[k] = f->remove ? NULL : orh_xstrdup(f->new);
	}
}

/* The text of configure's drop-in, wherever it went; NULL when there is none. */
static const char *dropin(const struct node *n)
{
	for (size_t i = 2; i < SLOTS; i++)
		if (n->path[i] && n->text[i] && strstr(n->path[i], "/99-oci-rdma-hook.toml"))
			return n->text[i];
	return NULL;
}

/* Does a main file's text hold our handler: a table rdma whose BinaryName is the shim,
 * under any config version's plugin? */
static bool has_handler(const char *text)
{
	static const char *const plugins[] = { "cri", "io.containerd.grpc.v1.cri",
					       "io.containerd.cri.v1.runtime" };
	struct orh_err err = { 0 };
	struct orh_toml t;
	bool found = false;

	if (!text || orh_toml_scan(text, MAIN, &t, &err) < 0)
		return false;
	for (size_t i = 0; i < 3; i++) {
		char *key = orh_toml_key("plugins", plugins[i], "containerd", "runtimes", "rdma",
					 "options", "BinaryName", NULL);
		const struct orh_toml_entry *e = orh_toml_get(&t, key);
		char *bin = NULL;

		if (e && orh_toml_string(e->value, &bin) && !strcmp(bin, SHIM))
			found = true;
		free(bin);
		free(key);
	}
	orh_toml_free(&t);
	return found;
}

/* How many tables [... .containerd.runtimes.rdma] a scan holds. */
static size_t handler_tables(const struct orh_toml *t)
{
	static const char tail[] = ORH_TOML_SEP "containerd" ORH_TOML_SEP "runtimes" ORH_TOML_SEP
				   "rdma";
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++) {
		size_t len = strlen(t->v[i].key);

		n += !t->v[i].value && len >= sizeof(tail) - 1 &&
		     !strcmp(t->v[i].key + len - (sizeof(tail) - 1), tail);
	}
	return n;
}

/* A line that is a template action: k3s's template, which gets the handler itself. */
static bool is_template(const char *text)
{
	for (const char *p = text; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "") {
		p += strspn(p, " \t");
		if (p[0] == '{' && p[1] == '{')
			return true;
	}
	return false;
}

static bool changes(const struct orh_cfg_files *files)
{
	for (size_t i = 0; i < files->n; i++)
		if (files->v[i].new || files->v[i].remove)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = orh_xmalloc(size + 2);
	struct node n = { .path = { orh_xstrdup(MAIN), orh_xstrdup(SITE) } };
	struct orh_cfg_files files = { 0 };
	struct orh_toml t;
	struct orh_err err = { 0 };
	bool tmpl, main_scans;

	memcpy(in, data, size);
	in[size] = in[size + 1] = '\0';
	n.text[0] = orh_xstrdup(in);
	if (strlen(in) < size)
		n.text[1] = orh_xstrdup(in + strlen(in) + 1);
	tmpl = is_template(in);
	main_scans = orh_toml_scan(in, MAIN, &t, &err) >= 0;
	if (main_scans)
		orh_toml_free(&t);
	if (plan(&n, false, &files) >= 0) {
		bool scanned = !tmpl || main_scans;
		const char *written;

		apply(&n, &files);
		orh_cfg_files_free(&files);
		/* a template (k3s) gets the handler itself, a config its drop-in or (1.x) its
		 * main file */
		written = tmpl || !dropin(&n) ? n.text[0] : dropin(&n);
		if (!written || (scanned && orh_toml_scan(written, "written", &t, &err) < 0))
			abort(); /* nothing written, or a file that does not scan (that did) */
		if (scanned && handler_tables(&t) != 1)
			abort(); /* the handler's table not once */
		if (scanned)
			orh_toml_free(&t);
		if (plan(&n, false, &files) < 0 || changes(&files))
			abort(); /* a second run changes something */
		orh_cfg_files_free(&files);
		if (plan(&n, true, &files) < 0)
			abort();
		apply(&n, &files);
		if (dropin(&n) || has_handler(n.text[0]))
			abort(); /* --undo left the handler */
	}
	orh_cfg_files_free(&files);
	for (size_t i = 0; i < SLOTS; i++) {
		free(n.path[i]);
		free(n.text[i]);
	}
	free(in);
	return 0;
}
