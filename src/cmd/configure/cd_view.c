/* SPDX-License-Identifier: Apache-2.0 */
/*
 * containerd's config as containerd reads it (engines_priv.h, struct cd_view): the main
 * file, then every file its `imports` name (globs expanded in sorted order, relative paths
 * taken from the importing file's directory, each file once), and the CRI runtime plugin's
 * table merged as containerd merges it: containerd 1.x replaces an imported plugin table
 * whole, 2.x (config version 3 and later) merges it key by key. Keys are compared below
 * the plugin's own table, whose name changed with the config version.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "cd_view.h"
#include "engines_priv.h"

#define CD_IMPORTS_MAX 64

const char *cd_plugin_of(long version)
{
	return version == 1 ? "cri" : version == 2 ? "io.containerd.grpc.v1.cri"
						   : "io.containerd.cri.v1.runtime";
}

static int read_version(const struct orh_toml *t, const char *path, long dflt, long *out,
			struct orh_err *err)
{
	const struct orh_toml_entry *e = orh_toml_get(t, "version");
	char *end = NULL;

	*out = dflt;
	if (!e)
		return 0;
	*out = strtol(e->value, &end, 10);
	if (*end || *out < 1 || *out > 4)
		return orh_fail(err, EINVAL, "%s:%u: version '%s' is not 1, 2, 3 or 4", path,
				e->line, e->value);
	return 0;
}

void cd_view_free(struct cd_view *v)
{
	for (size_t i = 0; i < v->n; i++)
		orh_toml_free(&v->src[i].t);
	free(v->src);
	free(v->ents);
	memset(v, 0, sizeof(*v));
}

static bool has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

static bool loaded(const struct cd_view *v, const struct orh_cfg_files *files, const char *p)
{
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(files->v[v->src[i].fi].path, p))
			return true;
	return false;
}

static int add_source(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		      struct cd_view *v, const char *path, struct orh_err *err);

/* Every file one import entry names, in the order containerd reads them. */
static int add_import(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		      struct cd_view *v, const char *from, const char *entry, struct orh_err *err)
{
	_cleanup_free_ char *abs = NULL, *dir = NULL;
	const char *base;
	struct orh_strv names = { 0 };
	int r = 0;

	if (entry[0] == '/') {
		abs = orh_xstrdup(entry);
	} else {
		const char *slash = strrchr(from, '/');

		abs = orh_xasprintf("%.*s/%s", (int)(slash - from), from, entry);
	}
	base = strrchr(abs, '/') + 1;
	dir = orh_xasprintf("%.*s", (int)(base - abs - 1), abs);
	if (has_glob(dir))
		return orh_fail(err, EINVAL, "%s: imports entry '%s' has a pattern in its directory, "
				"which configure does not follow", from, entry);
	if (!has_glob(base))
		return loaded(v, files, abs) ? 0 : add_source(rd, files, v, abs, err);
	r = rd->list(rd->arg, *dir ? dir : "/", &names, err);
	for (size_t i = 0; r >= 0 && i < names.n; i++) {
		_cleanup_free_ char *p = orh_xasprintf("%s/%s", dir, names.v[i]);

		if (fnmatch(base, names.v[i], FNM_PERIOD) == 0 && !loaded(v, files, p))
			r = add_source(rd, files, v, p, err);
	}
	orh_strv_free(&names);
	return r;
}

/* Read path into the view (its text scanned without configure's marked blocks), then the
 * files its imports name. */
static int add_source(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		      struct cd_view *v, const char *path, struct orh_err *err)
{
	struct orh_strv imports = { 0 };
	struct orh_cfg_file *f = NULL;
	struct cd_src *s;
	const char *base = strrchr(path, '/');
	const struct orh_toml_entry *e;
	int r;

	if (v->n >= CD_IMPORTS_MAX)
		return orh_fail(err, ELOOP, "%s: more than %d files imported", path,
				CD_IMPORTS_MAX);
	r = cfg_add_file(rd, files, path, &f, err);
	if (r < 0)
		return r;
	v->src = orh_xgrow(v->src, v->n + 1, sizeof(*v->src));
	s = &v->src[v->n++];
	*s = (struct cd_src){ .fi = files->n - 1, .ours = base && !strcmp(base + 1, CD_DROPIN) };
	r = cfg_scan(f, true, &s->t, err);
	if (r >= 0)
		r = read_version(&s->t, path, v->n == 1 ? (f->old ? 1 : 2) : v->version,
				 &s->version, err);
	if (r < 0)
		return r;
	if (v->n == 1)
		v->version = s->version;
	e = orh_toml_get(&s->t, "imports");
	if (!e || s->ours)
		return 0;
	if (!orh_toml_string_array(e->value, &imports)) {
		orh_strv_free(&imports);
		return orh_fail(err, EINVAL, "%s:%u: 'imports' is not an array of strings", path,
				e->line);
	}
	/* (the array belongs to this scan; the names are copied before the next read) */
	for (size_t i = 0; r >= 0 && i < imports.n; i++)
		r = add_import(rd, files, v, files->v[v->src[v->n - 1].fi].path, imports.v[i], err);
	orh_strv_free(&imports);
	return r;
}

/* The part of key below the plugin's table of a file of version ver, or NULL. */
static const char *below_plugin(const char *key, long ver)
{
	_cleanup_free_ char *prefix = orh_toml_key("plugins", cd_plugin_of(ver), NULL);
	size_t n = strlen(prefix);

	if (strncmp(key, prefix, n))
		return NULL;
	return key[n] == '\0' ? key + n : key[n] == ORH_TOML_SEP[0] ? key + n + 1 : NULL;
}

/* The CRI runtime plugin's entries as containerd merges them, ours left out. */
static void merge(struct cd_view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		const struct cd_src *s = &v->src[i];
		size_t before = v->nents;

		if (s->ours)
			continue;
		for (size_t k = 0; k < s->t.n; k++) {
			const char *rel = below_plugin(s->t.v[k].key, s->version);

			if (!rel)
				continue;
			v->ents = orh_xgrow(v->ents, v->nents + 1, sizeof(*v->ents));
			v->ents[v->nents++] = (struct cd_ent){ .e = &s->t.v[k], .rel = rel, .src = i };
		}
		if (!v->merge_keys && v->nents > before && before > 0) {
			/* containerd 1.x: this file's plugin table replaces the one before */
			memmove(v->ents, v->ents + before, (v->nents - before) * sizeof(*v->ents));
			v->nents -= before;
		}
	}
}

int cd_view_read(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		 const char *main_path, struct cd_view *v, struct orh_err *err)
{
	int r;

	memset(v, 0, sizeof(*v));
	r = add_source(rd, files, v, main_path, err);
	if (r < 0)
		return r;
	v->merge_keys = v->version >= 3;
	merge(v);
	return 0;
}

int cd_view_import(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		   struct cd_view *v, const char *entry, struct orh_err *err)
{
	int r = add_import(rd, files, v, files->v[v->src[0].fi].path, entry, err);

	if (r < 0)
		return r;
	free(v->ents);
	v->ents = NULL;
	v->nents = 0;
	merge(v);
	return 0;
}

const struct cd_ent *cd_view_get(const struct cd_view *v, const char *rel)
{
	const struct cd_ent *found = NULL;

	for (size_t i = 0; i < v->nents; i++)
		if (v->ents[i].e->value && !strcmp(v->ents[i].rel, rel))
			found = &v->ents[i];
	return found;
}

bool cd_rel_under(const char *rel, const char *prefix)
{
	size_t n = strlen(prefix);

	return !n || (!strncmp(rel, prefix, n) && (rel[n] == '\0' || rel[n] == ORH_TOML_SEP[0]));
}

/* ---- the plugin table as TOML text ---- */

static void put_segment(FILE *out, const char *seg)
{
	bool bare = *seg != '\0';

	for (const char *p = seg; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			bare = false;
	if (bare) {
		fputs(seg, out);
	} else {
		_cleanup_free_ char *q = orh_toml_quote(seg);

		fputs(q, out);
	}
}

/* [plugins."PLUGIN".a.b] for the table rel (segments joined by ORH_TOML_SEP) */
static void put_header(FILE *out, const char *plugin, const char *table, size_t len)
{
	fputs("\n[plugins.", out);
	put_segment(out, plugin);
	for (size_t i = 0; i < len;) {
		const char *sep = memchr(table + i, ORH_TOML_SEP[0], len - i);
		size_t n = sep ? (size_t)(sep - table - i) : len - i;
		_cleanup_free_ char *seg = orh_xasprintf("%.*s", (int)n, table + i);

		fputc('.', out);
		put_segment(out, seg);
		i += n + 1;
	}
	fputs("]\n", out);
}

/* The table an entry belongs to: a header's own path, a key's path without its last segment. */
static size_t table_len(const struct cd_ent *c)
{
	const char *last = strrchr(c->rel, ORH_TOML_SEP[0]);

	if (!c->e->value)
		return strlen(c->rel);
	return last ? (size_t)(last - c->rel) : 0;
}

int cd_view_emit(const struct cd_view *v, const char *plugin, const char *skip, FILE *out,
		 struct orh_err *err)
{
	bool *done = orh_xmalloc(v->nents + 1);
	int r = 0;

	memset(done, 0, v->nents + 1);
	for (size_t i = 0; i < v->nents && r >= 0; i++) {
		size_t len = table_len(&v->ents[i]);

		if (done[i] || cd_rel_under(v->ents[i].rel, skip))
			continue;
		if (v->ents[i].e->array) {
			r = orh_fail(err, EINVAL, "line %u: an array of tables in containerd's CRI "
				     "table, which configure cannot carry into its drop-in",
				     v->ents[i].e->line);
			break;
		}
		put_header(out, plugin, v->ents[i].rel, len);
		/* every key of this table, wherever it was written */
		for (size_t k = i; k < v->nents; k++) {
			const struct cd_ent *c = &v->ents[k];

			if (done[k] || table_len(c) != len || strncmp(c->rel, v->ents[i].rel, len) ||
			    cd_rel_under(c->rel, skip))
				continue;
			if (!c->e->value && strlen(c->rel) != len)
				continue;
			done[k] = true;
			if (!c->e->value)
				continue;
			fputs("  ", out);
			put_segment(out, c->rel + (len ? len + 1 : 0));
			fprintf(out, " = %s\n", c->e->value);
		}
	}
	free(done);
	return r;
}

const struct orh_toml_entry *cd_src_get(const struct cd_src *s, const char *rel)
{
	const struct orh_toml_entry *found = NULL;

	for (size_t i = 0; i < s->t.n; i++) {
		const char *r = below_plugin(s->t.v[i].key, s->version);

		if (r && s->t.v[i].value && !strcmp(r, rel))
			found = &s->t.v[i];
	}
	return found;
}

const struct orh_toml_entry *cd_src_find_under(const struct cd_src *s, const char *rel)
{
	for (size_t i = 0; i < s->t.n; i++) {
		const char *r = below_plugin(s->t.v[i].key, s->version);

		if (r && cd_rel_under(r, rel))
			return &s->t.v[i];
	}
	return NULL;
}
