/* SPDX-License-Identifier: Apache-2.0 */
/*
 * containerd: where the handler goes (include/orh/cmd/configure.h). What containerd reads is
 * taken as containerd merges it (cd_view.c): the default runtime to chain is the effective
 * one (the NVIDIA runtime where nvidia-ctk made it the default), and:
 *   - containerd 1.x (config version 1 or 2) replaces an imported plugin table whole, the
 *     last file holding it winning. The handler is a marked block of the main file, which
 *     nvidia-ctk, run later, copies into its drop-in with the rest of the CRI table (from
 *     the file, or from `containerd config dump`), so both handlers stay. Where an imported
 *     file holds a CRI table without the handler as configure writes it, a drop-in of ours,
 *     named to come after nvidia-ctk's 99-nvidia.toml, carries the whole CRI table that
 *     containerd read before it, then the handler;
 *   - containerd 2.x (version 3 and 4) merges key by key: the handler alone, in the drop-in.
 * Either way the default runtime's own table is written where no file has it (a config
 * without containerd's built-in runc table stops the CRI plugin).
 *
 * The handler is found by what it is: the table named --handler whose BinaryName is the
 * shim, in any file, with or without configure's comments. One in the main file without
 * its marker lines (a TOML library rewrote the file) stays while it is right, else moves
 * into the block (1.x) or the drop-in (2.x); --undo cuts it out of every file, another
 * program's copy included. A k3s/rke2 template (config.toml.tmpl, which k3s renders at
 * every start) gets the handler appended, as containerd's base template has the rest.
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
	bool need;     /* the drop-in is written (else the handler is the main file's alone) */
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

/* Does s hold the handler as configure writes it (its runtime_type, annotations, shim and
 * SystemdCgroup), with or without configure's comments? */
static bool handler_right(const struct cd_src *s, const struct orh_configure_req *req,
			  bool systemd)
{
	_cleanup_free_ char *rel = handler_rel(req->handler);
	_cleanup_free_ char *tk = orh_toml_key(rel, "runtime_type", NULL);
	_cleanup_free_ char *ak = orh_toml_key(rel, "pod_annotations", NULL);
	_cleanup_free_ char *bk = orh_toml_key(rel, "options", "BinaryName", NULL);
	_cleanup_free_ char *sk = orh_toml_key(rel, "options", "SystemdCgroup", NULL);
	const struct orh_toml_entry *t = cd_src_get(s, tk), *a = cd_src_get(s, ak);
	const struct orh_toml_entry *b = cd_src_get(s, bk), *c = cd_src_get(s, sk);
	_cleanup_free_ char *type = NULL, *bin = NULL;
	struct orh_strv ann = { 0 };
	bool sys = false, right;

	right = t && orh_toml_string(t->value, &type) && !strcmp(type, "io.containerd.runc.v2") &&
		b && orh_toml_string(b->value, &bin) && !strcmp(bin, req->shim) &&
		(c ? orh_toml_bool(c->value, &sys) : true) && sys == systemd && a &&
		orh_toml_string_array(a->value, &ann) && orh_strv_contains(&ann, "oci-rdma-hook/*");
	orh_strv_free(&ann);
	return right;
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

/* containerd 1.x: is the drop-in needed? The main file holds the handler (so that a tool
 * that rewrites the CRI table from that file, as nvidia-ctk does into its drop-in, carries
 * it along); a file read after the main file that holds a CRI table replaces the main
 * file's, so the drop-in, read last, carries the merged table and the handler, unless that
 * file has the handler already as configure writes it (another program copied it there).
 * containerd 2.x: always (the drop-in holds the handler alone). */
static bool dropin_needed(const struct cd_plan *p, const struct orh_configure_req *req)
{
	size_t last = 0;

	if (p->v.merge_keys)
		return true;
	for (size_t i = 1; i < p->v.n; i++)
		if (!p->v.src[i].ours && cd_src_find_under(&p->v.src[i], ""))
			last = i;
	return last > 0 && (p->missing || !handler_right(&p->v.src[last], req, p->systemd));
}

/* Where our drop-in goes: where it is, else (where it is needed) the first directory the
 * main file imports with a pattern its name matches (nvidia-ctk's conf.d), else conf.d
 * beside the main file, whose glob is then added to the imports. */
static void place_dropin(struct cd_plan *p, const struct orh_cfg_files *files,
			 const char *main_path)
{
	const struct orh_toml_entry *e = orh_toml_get(&p->v.src[0].t, "imports");
	struct orh_strv imports = { 0 };
	const char *slash = strrchr(main_path, '/');

	for (size_t i = 0; i < p->v.n && !p->dropin; i++)
		if (p->v.src[i].ours)
			p->dropin = orh_xstrdup(files->v[p->v.src[i].fi].path);
	if (!p->need)
		return;
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

/* text without entry in its imports where configure made that line (IMPORTS_ADDED, the
 * entry alone in it); NULL otherwise. An entry in a list the operator wrote stays: the
 * operator's own import of the same directory cannot be told from one configure appended,
 * and an import of a directory holding nothing else imports nothing. */
static char *imports_remove(const char *text, const struct orh_toml *t, const char *entry)
{
	const struct orh_toml_entry *e = orh_toml_get(t, "imports");
	struct orh_strv list = { 0 };
	const char *mark;
	char *out = NULL;

	if (!e || !orh_toml_string_array(e->value, &list) || !orh_strv_contains(&list, entry)) {
		orh_strv_free(&list);
		return NULL;
	}
	mark = strstr(text + e->start, IMPORTS_ADDED);
	if (list.n == 1 && mark && mark < text + e->end)
		out = orh_xasprintf("%.*s%s", (int)e->start, text, text + e->end);
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

/* Every file containerd reads: no other runtime under the handler's name. A copy of ours
 * in another program's file (nvidia-ctk --config-source=command copies containerd's merged
 * config into its drop-in) is noted; on --undo its tables are cut out of that file, found by
 * their BinaryName, every other byte of it kept. */
static int check_handlers(const struct cd_plan *p, struct orh_cfg_files *files,
			  const struct orh_configure_req *req, struct orh_strv *notes,
			  struct orh_err *err)
{
	for (size_t i = 0; i < p->v.n; i++) {
		struct orh_cfg_file *f = &files->v[p->v.src[i].fi];
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
		if (found && i > 0 && req->undo) {
			r = drop_handler(f->old, f->path, req, &f->new, err);
			if (r < 0)
				return r;
			if (!strcmp(f->new, f->old))
				free(TAKE_PTR(f->new));
			else
				orh_strv_pushf(notes, "%s: handler '%s' taken out (another program "
					       "had copied it there)", f->path, req->handler);
		}
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

/* The handler's tables as configure's block holds them (without the first blank line). */
static char *handler_body(const struct cd_plan *p, const struct orh_configure_req *req)
{
	char *body = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&body, &len);

	if (!out)
		abort();
	put_handler(out, p, req);
	fclose(out);
	memmove(body, body + 1, len);
	return body;
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

/* Does text, as containerd's TOML reads it, hold the handler of configure's block? (Not
 * where a value above the block is left open, an array without its ']'.) */
static int main_reads_block(const char *text, const char *path, const struct cd_plan *p,
			    const struct orh_configure_req *req, struct orh_err *err)
{
	_cleanup_free_ char *key = orh_toml_key("plugins", cd_plugin_of(p->v.version),
						"containerd", "runtimes", req->handler, NULL);
	struct orh_toml t;
	bool ok;
	int r = orh_toml_scan(text, path, &t, err);

	if (r < 0)
		return r;
	ok = ours_at(&t, key, req->shim);
	orh_toml_free(&t);
	if (!ok)
		return orh_fail(err, EINVAL, "%s: the handler's tables at the end of the file would "
				"not be read as tables (a value above them is left open)", path);
	return 0;
}

/* The main file's new text. containerd 1.x: the handler in configure's block (a handler of
 * ours outside it, whose marker lines a TOML library's rewrite dropped, moves into it, or
 * stays where it is right as it is). 2.x and --undo: our block and handler tables out. The
 * import in where the drop-in is new; out, where no drop-in is written and no other file is
 * under it. NULL: unchanged. */
static int main_text(const struct cd_plan *p, struct orh_cfg_file *f,
		     const struct orh_configure_req *req, const struct orh_cfg_reader *rd,
		     struct orh_err *err)
{
	_cleanup_free_ char *id = orh_xasprintf("--engine containerd --handler %s", req->handler);
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *body = NULL, *nw = NULL;
	struct orh_block blk = { .id = id, .header = "version = 2\n" };
	bool keep = !req->undo && !p->v.merge_keys, remove = false, loose;
	const char *rest;
	struct orh_toml t;
	int r, found;

	if (keep)
		blk.body = body = handler_body(p, req);
	if (!f->old) {
		if (keep)
			return orh_block_install(NULL, f->path, &blk, &f->new, err);
		if (!req->undo && p->glob)
			f->new = imports_add(NULL, NULL, p->glob);
		return 0;
	}
	r = found = orh_block_remove(f->old, f->path, &blk, &a, &remove, err);
	if (r >= 0 && remove) /* a file configure made, its header alone without the block */
		a = orh_xstrdup(blk.header);
	if (r >= 0)
		r = drop_handler(a ? a : f->old, f->path, req, &b, err);
	if (r >= 0)
		r = orh_toml_scan(b, f->path, &t, err);
	if (r < 0)
		return r;
	if (!req->undo && p->glob) {
		c = imports_add(b, &t, p->glob);
	} else if (!p->need) {
		const char *slash = strrchr(f->path, '/');
		_cleanup_free_ char *glob = orh_xasprintf("%.*s/conf.d/*.toml",
							  (int)(slash - f->path), f->path);

		if (!cfg_dir_has_other(rd, glob, CD_DROPIN))
			c = imports_remove(b, &t, glob);
	}
	orh_toml_free(&t);
	rest = c ? c : b;
	loose = strcmp(b, a ? a : f->old);
	if (req->undo && ((remove && !strcmp(rest, blk.header)) || !strcmp(rest, MADE_BY_US))) {
		f->remove = true;
		return 0;
	}
	if (keep && !found && loose && !c && !p->missing &&
	    handler_right(&p->v.src[0], req, p->systemd))
		return 0; /* ours, right, without the marker lines */
	if (keep) {
		r = orh_block_install(loose || c ? rest : f->old, f->path, &blk, &nw, err);
		if (r >= 0 && nw)
			r = main_reads_block(nw, f->path, p, req, err);
		if (r < 0 || !nw)
			return r;
		rest = nw;
	}
	if (strcmp(rest, f->old))
		f->new = orh_xstrdup(rest);
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
	int r = cfg_scan(f, true, &s.t, err);

	if (r >= 0)
		r = src_handler(&s, f, req, &(bool){ false }, err);
	orh_toml_free(&s.t);
	if (r < 0)
		return r;
	/* the template without our block, then without a table of ours outside it (one that
	 * lost its marker lines); a template configure made holds its header alone without
	 * the block (orh_block_remove() says remove, and gives no text) */
	if (f->old) {
		bool remove = false;

		r = orh_block_remove(f->old, f->path, &blk, &unblocked, &remove, err);
		if (r >= 0 && remove)
			unblocked = orh_xstrdup(blk.header);
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
	p->v.version = version;
	blk.body = body = handler_body(p, req);
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
	if (r >= 0 && !req->undo)
		r = read_default(&p, cfg_engine_path(req), err);
	if (r >= 0) {
		p.need = !req->undo && dropin_needed(&p, req);
		place_dropin(&p, files, cfg_engine_path(req));
	}
	/* the files the new import brings in are read as containerd will read them */
	if (r >= 0 && p.glob) {
		free(TAKE_PTR(p.dflt));
		free(TAKE_PTR(p.binary));
		p.systemd = p.missing = false;
		r = cd_view_import(rd, files, &p.v, p.glob, err);
		if (r >= 0)
			r = read_default(&p, cfg_engine_path(req), err);
	}
	if (r >= 0)
		r = check_handlers(&p, files, req, notes, err);
	if (r >= 0 && p.need)
		r = check_after(&p, err);
	if (r >= 0)
		r = main_text(&p, &files->v[p.v.src[0].fi], req, rd, err);
	if (r >= 0 && p.need)
		r = dropin_text(&p, req, &text, err);
	if (r >= 0 && p.dropin)
		r = cfg_own_file(rd, p.dropin, p.need ? text : NULL, files, &f, err);
	if (r >= 0 && !req->undo && req->runtime)
		runtime = orh_xstrdup(req->runtime);
	else if (r >= 0 && !req->undo && cfg_shim_runtime(rd, p.binary, &runtime, notes) < 0)
		r = orh_fail(err, ENOENT, "%s: BinaryName '%s' of handler '%s' is not found "
			     "(give configure --runtime PATH)", cfg_engine_path(req), p.binary,
			     p.dflt);
	if (r >= 0 && !req->undo)
		orh_strv_pushf(notes, "containerd: handler '%s' in %s (config version %ld, chaining "
			       "the default runtime '%s', SystemdCgroup = %s); restart containerd to "
			       "load it", req->handler, p.need ? p.dropin : cfg_engine_path(req),
			       p.v.version, p.dflt,
			       p.systemd ? "true" : "false");
	plan_free(&p);
	if (r < 0)
		return r;
	return cfg_node_runtime(req, node_config, rd, req->undo ? NULL : runtime, files, notes,
				err);
}
