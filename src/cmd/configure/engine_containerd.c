/* SPDX-License-Identifier: Apache-2.0 */
/*
 * containerd: the handler in a drop-in of configure's own, imported by the main file
 * (include/orh/configure.h). What containerd reads is taken as containerd merges it
 * (cd_view.c): the default runtime to chain is the effective one (the NVIDIA runtime where
 * nvidia-ctk made it the default), and the drop-in holds what the merge needs:
 *   - containerd 1.x (config version 1 or 2) replaces an imported plugin table whole, so the
 *     drop-in carries the whole CRI table that containerd read before it, then the handler;
 *     it is named to come after nvidia-ctk's 99-nvidia.toml in the imported directory;
 *   - containerd 2.x (version 3 and 4) merges key by key: the handler alone.
 * Either way the default runtime's own table is written where no file has it (a config
 * without containerd's built-in runc table stops the CRI plugin).
 *
 * The handler is found by what it is: the table named --handler whose BinaryName is the
 * shim, in any file, with or without configure's comments. One left in the main file (a
 * block of an earlier configure, or the same after a TOML library rewrote the file) moves
 * into the drop-in. A k3s/rke2 template (config.toml.tmpl, which k3s renders at every
 * start) gets the handler appended, as containerd's base template has the rest.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cd_view.h"
#include "engines_priv.h"

struct cd_plan {
	struct cd_view v;
	char *dflt;    /* the effective default_runtime_name, else runc */
	char *binary;  /* its options.BinaryName */
	bool systemd;  /* its options.SystemdCgroup */
	bool missing;  /* no file has the default runtime's table */
	char *dropin;  /* where our drop-in is, or goes */
	char *glob;    /* what the main file's imports must gain for it; NULL: nothing */
	const struct orh_cfg_files *files; /* the plan's files, which the view indexes */
};

static void plan_free(struct cd_plan *p)
{
	cd_view_free(&p->v);
	free(p->dflt);
	free(p->binary);
	free(p->dropin);
	free(p->glob);
}

/* The file an entry of the merged view comes from. */
static const char *path_of(const struct cd_plan *p, const struct cd_ent *c)
{
	return p->files->v[p->v.src[c->src].fi].path;
}

static char *handler_rel(const char *handler)
{
	return orh_toml_key("containerd", "runtimes", handler, NULL);
}

/* Is the handler table of src ours (its BinaryName the shim)? -EEXIST when it is another's. */
static int src_handler(const struct cd_src *s, const struct orh_cfg_file *f,
		       const struct orh_configure_req *req, bool *found, struct orh_err *err)
{
	_cleanup_free_ char *rel = handler_rel(req->handler);
	_cleanup_free_ char *bin_rel = orh_toml_key(rel, "options", "BinaryName", NULL);
	const struct orh_toml_entry *e = cd_src_find_under(s, rel);
	const struct orh_toml_entry *b = cd_src_get(s, bin_rel);
	_cleanup_free_ char *bin = NULL;

	*found = e != NULL;
	if (!e)
		return 0;
	if (!b || !orh_toml_string(b->value, &bin) || strcmp(bin, req->shim))
		return orh_fail(err, EEXIST, "%s:%u: runtime handler '%s' is defined already, "
				"running %s (give configure another --handler, or remove it)",
				f->path, e->line, req->handler, bin ? bin : "another runtime");
	return 0;
}

/* Is the handler table at key (under one plugin's name) ours: its BinaryName the shim? */
static bool ours_at(const struct orh_toml *t, const char *key, const char *shim)
{
	_cleanup_free_ char *bkey = orh_toml_key(key, "options", "BinaryName", NULL);
	const struct orh_toml_entry *b = orh_toml_get(t, bkey);
	_cleanup_free_ char *bin = NULL;

	return b && orh_toml_string(b->value, &bin) && !strcmp(bin, shim);
}

/* text without the tables (and dotted keys) of our handler, under the CRI plugin's name of
 * any config version (a file's version and its tables' names may disagree). */
static int drop_handler(const char *text, const char *path,
			const struct orh_configure_req *req, char **out, struct orh_err *err)
{
	_cleanup_free_ char *keep = NULL;
	char *keys[3] = { NULL, NULL, NULL };
	struct orh_toml t;
	size_t n = strlen(text), o = 0;
	int r = orh_toml_scan(text, path, &t, err);

	*out = NULL;
	if (r < 0)
		return r;
	for (long v = 1; v <= 3; v++) {
		keys[v - 1] = orh_toml_key("plugins", cd_plugin_of(v), "containerd", "runtimes",
					   req->handler, NULL);
		if (!ours_at(&t, keys[v - 1], req->shim))
			keys[v - 1][0] = '\0'; /* not ours there: kept */
	}
	keep = orh_xmalloc(n + 1);
	memset(keep, 1, n);
	for (size_t i = 0; i < t.n; i++) {
		const struct orh_toml_entry *e = &t.v[i];
		size_t end = e->end;
		bool under = false;

		for (size_t k = 0; k < 3; k++)
			under |= keys[k][0] && cd_rel_under(e->key, keys[k]);
		if (!under)
			continue;
		if (!e->value) { /* a header: up to the next header */
			end = n;
			for (size_t k = i + 1; k < t.n; k++)
				if (!t.v[k].value) {
					end = t.v[k].start;
					break;
				}
		}
		memset(keep + e->start, 0, end - e->start);
	}
	orh_toml_free(&t);
	for (size_t k = 0; k < 3; k++)
		free(keys[k]);
	*out = orh_xmalloc(n + 1);
	for (size_t i = 0; i < n; i++)
		if (keep[i])
			(*out)[o++] = text[i];
	(*out)[o] = '\0';
	return 0;
}

/* ---- the main file's imports ---- */

/* The directory of an import entry whose last part is a pattern that our drop-in's name
 * matches (its directory a plain path), as a new string; else NULL. */
static char *import_dir(const char *from, const char *entry)
{
	const char *slash = strrchr(from, '/');
	_cleanup_free_ char *abs = entry[0] == '/' ? orh_xstrdup(entry)
		: orh_xasprintf("%.*s/%s", (int)(slash - from), from, entry);
	char *base = strrchr(abs, '/');

	*base++ = '\0';
	if (!strpbrk(base, "*?[") || strpbrk(abs, "*?[") || fnmatch(base, CD_DROPIN, FNM_PERIOD))
		return NULL;
	return orh_xstrdup(*abs ? abs : "/");
}

/* Where our drop-in goes: where it is, else the first directory the main file imports with
 * a pattern its name matches (nvidia-ctk's conf.d), else conf.d beside the main file, whose
 * glob is then added to the imports. */
static void place_dropin(struct cd_plan *p, const struct orh_cfg_files *files,
			 const char *main_path)
{
	const struct orh_toml_entry *e = orh_toml_get(&p->v.src[0].t, "imports");
	struct orh_strv imports = { 0 };
	const char *slash = strrchr(main_path, '/');

	for (size_t i = 0; i < p->v.n && !p->dropin; i++)
		if (p->v.src[i].ours)
			p->dropin = orh_xstrdup(files->v[p->v.src[i].fi].path);
	if (e && !p->dropin)
		(void)orh_toml_string_array(e->value, &imports);
	for (size_t i = 0; i < imports.n && !p->dropin; i++) {
		_cleanup_free_ char *dir = import_dir(main_path, imports.v[i]);

		if (dir)
			p->dropin = orh_xasprintf("%s/" CD_DROPIN, dir);
	}
	orh_strv_free(&imports);
	if (p->dropin)
		return;
	p->dropin = orh_xasprintf("%.*s/conf.d/" CD_DROPIN, (int)(slash - main_path), main_path);
	p->glob = orh_xasprintf("%.*s/conf.d/*.toml", (int)(slash - main_path), main_path);
}

/* The end of the line configure adds where a file has no imports (so that --undo gives
 * back a file without the key, rather than an empty list). */
#define IMPORTS_ADDED " # added by oci-rdma-hook configure"
/* A main file configure made where there was none; --undo removes it only while it holds
 * nothing else (an operator's own "version = 2" file stays). */
#define MADE_BY_US "# Made by oci-rdma-hook configure, to import its drop-in.\nversion = 2\n"

/* text with entry added to its top-level imports (a new line after `version` where it
 * has none; a new file when text is NULL). */
static char *imports_add(const char *text, const struct orh_toml *t, const char *entry)
{
	_cleanup_free_ char *q = orh_toml_quote(entry);
	const struct orh_toml_entry *e, *v;

	if (!text)
		return orh_xasprintf(MADE_BY_US "imports = [%s]" IMPORTS_ADDED "\n", q);
	e = orh_toml_get(t, "imports");
	v = orh_toml_get(t, "version");
	if (e) {
		struct orh_strv list = { 0 };
		bool there = orh_toml_string_array(e->value, &list) &&
			     orh_strv_contains(&list, entry);
		const char *val = strstr(text + e->start, e->value);
		const char *close = val + strlen(e->value) - 1; /* its ']' */
		const char *prev = close - 1;

		while (prev > val && (*prev == ' ' || *prev == '\t' || *prev == '\n' || *prev == '\r'))
			prev--;
		orh_strv_free(&list);
		if (there) /* already imported: nothing to add */
			return orh_xstrdup(text);
		return orh_xasprintf("%.*s%s%s%s", (int)(close - text), text,
				     *prev == '[' || *prev == ',' ? "" : ", ", q, close);
	}
	if (v) /* (after the version line, which may be the last, without its newline) */
		return orh_xasprintf("%.*s%simports = [%s]" IMPORTS_ADDED "\n%s", (int)v->end, text,
				     v->end && text[v->end - 1] != '\n' ? "\n" : "", q,
				     text + v->end);
	return orh_xasprintf("imports = [%s]" IMPORTS_ADDED "\n%s", q, text);
}

/* text without entry in its imports: the line where configure added it, else the entry. */
static char *imports_remove(const char *text, const struct orh_toml *t, const char *entry)
{
	const struct orh_toml_entry *e = orh_toml_get(t, "imports");
	_cleanup_free_ char *q = orh_toml_quote(entry);
	struct orh_strv list = { 0 };
	const char *val, *at;
	char *out = NULL;

	if (!e || !orh_toml_string_array(e->value, &list) || !orh_strv_contains(&list, entry)) {
		orh_strv_free(&list);
		return NULL;
	}
	val = strstr(text + e->start, e->value);
	if (list.n == 1 && strstr(text + e->start, IMPORTS_ADDED) &&
	    strstr(text + e->start, IMPORTS_ADDED) < text + e->end) {
		out = orh_xasprintf("%.*s%s", (int)e->start, text, text + e->end);
	} else if (list.n == 1) {
		out = orh_xasprintf("%.*s[]%s", (int)(val - text), text, val + strlen(e->value));
	} else if ((at = strstr(val, q)) && at < val + strlen(e->value)) {
		const char *from = at, *to = at + strlen(q);

		if (strncmp(to, ", ", 2) == 0)
			to += 2; /* the first of several */
		else if (from - val >= 2 && strncmp(from - 2, ", ", 2) == 0)
			from -= 2;
		out = orh_xasprintf("%.*s%s", (int)(from - text), text, to);
	}
	orh_strv_free(&list);
	return out;
}

/* ---- what the plan reads ---- */

static int read_default(struct cd_plan *p, const char *path, struct orh_err *err)
{
	_cleanup_free_ char *dkey = orh_toml_key("containerd", "default_runtime_name", NULL);
	_cleanup_free_ char *rt = NULL, *bkey = NULL, *skey = NULL;
	const struct cd_ent *d = cd_view_get(&p->v, dkey), *b, *s;
	bool found = false;

	if (d && !orh_toml_string(d->e->value, &p->dflt))
		return orh_fail(err, EINVAL, "%s:%u: 'default_runtime_name' is not a string",
				path_of(p, d), d->e->line);
	if (!p->dflt || !*p->dflt) {
		free(p->dflt);
		p->dflt = orh_xstrdup("runc");
	}
	rt = orh_toml_key("containerd", "runtimes", NULL);
	b = cd_view_get(&p->v, rt);
	if (b)
		return orh_fail(err, EINVAL, "%s:%u: the runtimes are an inline table, which "
				"cannot be extended: write them as [tables]",
				path_of(p, b), b->e->line);
	free(rt);
	rt = orh_toml_key("containerd", "runtimes", p->dflt, NULL);
	for (size_t i = 0; i < p->v.nents; i++)
		found |= cd_rel_under(p->v.ents[i].rel, rt);
	p->missing = !found;
	if (p->missing && strcmp(p->dflt, "runc"))
		return orh_fail(err, EINVAL, "%s: default_runtime_name '%s' names no runtime in "
				"any file containerd reads", path, p->dflt);
	bkey = orh_toml_key(rt, "options", "BinaryName", NULL);
	skey = orh_toml_key(rt, "options", "SystemdCgroup", NULL);
	b = cd_view_get(&p->v, bkey);
	s = cd_view_get(&p->v, skey);
	if (b && !orh_toml_string(b->e->value, &p->binary))
		return orh_fail(err, EINVAL, "%s:%u: 'BinaryName' is not a string",
				path_of(p, b), b->e->line);
	if (s && !orh_toml_bool(s->e->value, &p->systemd))
		return orh_fail(err, EINVAL, "%s:%u: SystemdCgroup '%s' is not true or false",
				path_of(p, s), s->e->line, s->e->value);
	return 0;
}

/* Every file containerd reads: no other runtime under the handler's name. */
static int check_handlers(const struct cd_plan *p, const struct orh_cfg_files *files,
			  const struct orh_configure_req *req, struct orh_strv *notes,
			  struct orh_err *err)
{
	for (size_t i = 0; i < p->v.n; i++) {
		const struct orh_cfg_file *f = &files->v[p->v.src[i].fi];
		bool found = false;
		int r;

		if (p->v.src[i].ours)
			continue;
		r = src_handler(&p->v.src[i], f, req, &found, err);
		if (r < 0)
			return r;
		if (found && i > 0 && !req->undo)
			orh_strv_pushf(notes, "%s holds handler '%s' too (another program copied "
				       "containerd's merged config there)", f->path, req->handler);
		if (found && i > 0 && req->undo)
			orh_strv_pushf(notes, "%s still holds handler '%s': another program wrote it "
				       "there, and configure leaves that file alone", f->path,
				       req->handler);
	}
	return 0;
}

/* The handler's tables (and the default runtime's, where no file has it). */
static void put_handler(FILE *out, const struct cd_plan *p, const struct orh_configure_req *req)
{
	const char *plugin = cd_plugin_of(p->v.version);
	_cleanup_free_ char *shim = orh_toml_quote(req->shim);

	if (p->missing)
		fprintf(out, "\n[plugins.\"%s\".containerd.runtimes.runc]\n"
			"  runtime_type = \"io.containerd.runc.v2\"\n", plugin);
	fprintf(out, "\n[plugins.\"%s\".containerd.runtimes.%s]\n"
		"  runtime_type = \"io.containerd.runc.v2\"\n"
		"  pod_annotations = [\"oci-rdma-hook/*\"]\n"
		"\n[plugins.\"%s\".containerd.runtimes.%s.options]\n"
		"  BinaryName = %s\n"
		"  SystemdCgroup = %s\n",
		plugin, req->handler, plugin, req->handler, shim, p->systemd ? "true" : "false");
}

static int dropin_text(const struct cd_plan *p, const struct orh_configure_req *req,
		       char **out, struct orh_err *err)
{
	_cleanup_free_ char *skip = handler_rel(req->handler);
	size_t len = 0;
	FILE *f = open_memstream(out, &len);
	int r = 0;

	if (!f)
		abort();
	fprintf(f, "# Written by `oci-rdma-hook configure --engine containerd --handler %s`;\n"
		"# `oci-rdma-hook configure --engine containerd --undo` removes this file.\n",
		req->handler);
	if (!p->v.merge_keys)
		fputs("# containerd 1.x replaces an imported plugin table whole: this file holds\n"
		      "# the CRI table that containerd read before it, then the handler.\n", f);
	fprintf(f, "version = %ld\n", p->v.version);
	if (!p->v.merge_keys)
		r = cd_view_emit(&p->v, cd_plugin_of(p->v.version), skip, f, err);
	put_handler(f, p, req);
	fclose(f);
	if (r < 0)
		free(TAKE_PTR(*out));
	return r;
}

/* containerd 1.x: a file read after our drop-in that holds a CRI table replaces ours, and
 * the handler with it. Refused, naming it. */
static int check_after(const struct cd_plan *p, struct orh_err *err)
{
	const char *slash = strrchr(p->dropin, '/');
	size_t dirlen = (size_t)(slash - p->dropin);

	for (size_t i = 1; i < p->v.n && !p->v.merge_keys; i++) {
		const char *path = p->files->v[p->v.src[i].fi].path;
		const struct orh_toml_entry *e = cd_src_find_under(&p->v.src[i], "");

		if (p->v.src[i].ours || !e || strncmp(path, p->dropin, dirlen + 1) ||
		    strchr(path + dirlen + 1, '/') || strcmp(path + dirlen + 1, CD_DROPIN) < 0)
			continue;
		return orh_fail(err, EINVAL, "%s:%u: read after %s, its CRI table replaces that "
				"one on containerd 1.x, and the handler with it (rename it to sort "
				"before " CD_DROPIN ")", path, e->line, p->dropin);
	}
	return 0;
}

/* ---- the main file ---- */

/* The main file's new text: our earlier block and handler tables out, the import in (or
 * out, on --undo, where no other file is under it). NULL: unchanged. */
static int main_text(const struct cd_plan *p, struct orh_cfg_file *f,
		     const struct orh_configure_req *req, const struct orh_cfg_reader *rd,
		     struct orh_err *err)
{
	_cleanup_free_ char *id = orh_xasprintf("--engine containerd --handler %s", req->handler);
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;
	struct orh_block blk = { .id = id, .header = "version = 2\n" };
	struct orh_toml t;
	bool remove = false;
	int r;

	if (!f->old) {
		if (!req->undo && p->glob)
			f->new = imports_add(NULL, NULL, p->glob);
		return 0;
	}
	r = orh_block_remove(f->old, f->path, &blk, &a, &remove, err);
	if (r >= 0)
		r = drop_handler(a ? a : f->old, f->path, req, &b, err);
	if (r >= 0)
		r = orh_toml_scan(b, f->path, &t, err);
	if (r < 0)
		return r;
	if (!req->undo && p->glob) {
		c = imports_add(b, &t, p->glob);
	} else if (req->undo) {
		const char *slash = strrchr(f->path, '/');
		_cleanup_free_ char *glob = orh_xasprintf("%.*s/conf.d/*.toml",
							  (int)(slash - f->path), f->path);

		if (!cfg_dir_has_other(rd, glob, CD_DROPIN))
			c = imports_remove(b, &t, glob);
	}
	orh_toml_free(&t);
	if (remove || (c && !strcmp(c, MADE_BY_US))) {
		f->remove = true;
		return 0;
	}
	if (!c)
		c = TAKE_PTR(b);
	if (strcmp(c, f->old))
		f->new = TAKE_PTR(c);
	return 0;
}

/* ---- a k3s/rke2 template ---- */

/* A template (k3s, rke2): its name, or a line that is a template action. */
static bool is_template(const struct orh_cfg_file *f)
{
	size_t n = strlen(f->path);

	if (n > 5 && !strcmp(f->path + n - 5, ".tmpl"))
		return true;
	for (const char *p = f->old; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "") {
		p += strspn(p, " \t");
		if (p[0] == '{' && p[1] == '{')
			return true;
	}
	return false;
}

static int cd_template(const struct orh_configure_req *req, struct orh_cfg_file *f,
		       struct cd_plan *p, struct orh_strv *notes, struct orh_err *err)
{
	_cleanup_free_ char *id = orh_xasprintf("--engine containerd --handler %s", req->handler);
	_cleanup_free_ char *body = NULL, *without = NULL, *unblocked = NULL;
	struct orh_block blk = { .id = id, .header = "{{ template \"base\" . }}\n" };
	bool loose = false;
	const char *base = strrchr(f->path, '/');
	/* k3s renders config-v3.toml.tmpl with its version 3 base */
	long version = base && !strcmp(base + 1, "config-v3.toml.tmpl") ? 3 : 2;
	struct cd_src s = { .version = version };
	size_t len = 0;
	FILE *out;
	int r = cfg_scan(f, true, &s.t, err);

	if (r >= 0)
		r = src_handler(&s, f, req, &(bool){ false }, err);
	orh_toml_free(&s.t);
	if (r < 0)
		return r;
	/* the template without our block, then without a table of ours outside it (one that
	 * lost its marker lines) */
	if (f->old) {
		bool remove = false;

		r = orh_block_remove(f->old, f->path, &blk, &unblocked, &remove, err);
		if (r >= 0)
			r = drop_handler(unblocked ? unblocked : f->old, f->path, req, &without,
					 err);
		if (r < 0)
			return r;
		if (req->undo && remove && !strcmp(without, blk.header)) {
			f->remove = true;
			return 0;
		}
	}
	if (req->undo) {
		if (f->old && strcmp(without, f->old))
			f->new = TAKE_PTR(without);
		return 0;
	}
	/* a table of ours that had lost its markers moves into the block */
	loose = f->old && strcmp(without, unblocked ? unblocked : f->old);
	out = open_memstream(&body, &len);
	if (!out)
		abort();
	p->v.version = version;
	put_handler(out, p, req);
	fclose(out);
	blk.body = body + 1; /* without its first blank line */
	r = orh_block_install(loose ? without : f->old, f->path, &blk, &f->new, err);
	if (r >= 0 && loose && !f->new)
		f->new = TAKE_PTR(without);
	if (r >= 0)
		orh_strv_pushf(notes, "containerd: handler '%s' in the template %s (k3s and rke2 "
			       "render it at their next start)", req->handler, f->path);
	return r;
}

/* A template's default runtime, as k3s last rendered it: config.toml beside the template,
 * where there is one (its SystemdCgroup for the handler, its BinaryName for the shim). */
static int rendered_default(struct cd_plan *p, const struct orh_cfg_reader *rd,
			    struct orh_cfg_files *files, const struct orh_configure_req *req,
			    char **runtime, struct orh_strv *notes, struct orh_err *err)
{
	const char *tmpl = files->v[p->v.src[0].fi].path;
	const char *slash = strrchr(tmpl, '/');
	_cleanup_free_ char *path = orh_xasprintf("%.*s/config.toml", (int)(slash - tmpl), tmpl);
	struct cd_plan r = { .files = files };
	int ret = 0;

	*runtime = NULL;
	if (req->undo || !cfg_file_exists(rd, path))
		return 0;
	ret = cd_view_read(rd, files, path, &r.v, err);
	if (ret >= 0)
		ret = read_default(&r, path, err);
	if (ret >= 0) {
		p->systemd = r.systemd;
		if (req->runtime)
			*runtime = orh_xstrdup(req->runtime);
		else if (cfg_shim_runtime(rd, r.binary, runtime, notes) < 0)
			ret = orh_fail(err, ENOENT, "%s: BinaryName '%s' is not found (give "
				       "configure --runtime PATH)", path, r.binary);
	}
	plan_free(&r);
	return ret;
}

int cfg_containerd(const struct orh_configure_req *req, const char *node_config,
		   const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		   struct orh_strv *notes, struct orh_err *err)
{
	_cleanup_free_ char *runtime = NULL, *text = NULL;
	struct cd_plan p = { .files = files };
	struct orh_cfg_file *f = NULL;
	int r;

	r = cd_view_read(rd, files, cfg_engine_path(req), &p.v, err);
	if (r >= 0 && is_template(&files->v[p.v.src[0].fi])) {
		r = rendered_default(&p, rd, files, req, &runtime, notes, err);
		if (r >= 0)
			r = cd_template(req, &files->v[p.v.src[0].fi], &p, notes, err);
		plan_free(&p);
		return r < 0 ? r : cfg_node_runtime(req, node_config, rd, runtime, files, notes,
						    err);
	}
	if (r >= 0) {
		place_dropin(&p, files, cfg_engine_path(req));
		/* the files the new import brings in are read as containerd will read them */
		if (p.glob && !req->undo)
			r = cd_view_import(rd, files, &p.v, p.glob, err);
	}
	if (r >= 0)
		r = check_handlers(&p, files, req, notes, err);
	if (r >= 0 && !req->undo)
		r = read_default(&p, cfg_engine_path(req), err);
	if (r >= 0 && !req->undo)
		r = check_after(&p, err);
	if (r >= 0)
		r = main_text(&p, &files->v[p.v.src[0].fi], req, rd, err);
	if (r >= 0 && !req->undo)
		r = dropin_text(&p, req, &text, err);
	if (r >= 0)
		r = cfg_own_file(rd, p.dropin, req->undo ? NULL : text, files, &f, err);
	if (r >= 0 && !req->undo && req->runtime)
		runtime = orh_xstrdup(req->runtime);
	else if (r >= 0 && !req->undo && cfg_shim_runtime(rd, p.binary, &runtime, notes) < 0)
		r = orh_fail(err, ENOENT, "%s: BinaryName '%s' of handler '%s' is not found "
			     "(give configure --runtime PATH)", cfg_engine_path(req), p.binary,
			     p.dflt);
	if (r >= 0 && !req->undo)
		orh_strv_pushf(notes, "containerd: handler '%s' in %s (config version %ld, chaining "
			       "the default runtime '%s', SystemdCgroup = %s); restart containerd to "
			       "load it", req->handler, p.dropin, p.v.version, p.dflt,
			       p.systemd ? "true" : "false");
	plan_free(&p);
	if (r < 0)
		return r;
	return cfg_node_runtime(req, node_config, rd, req->undo ? NULL : runtime, files, notes,
				err);
}
