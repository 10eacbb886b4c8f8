/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A line scanner for the TOML that engine configs hold (include/orh/cmd/configure.h): every
 * key with its full path, the source text of its value and its line. It checks what it
 * needs to find keys and values; it is no validator (the engines check their own files:
 * `containerd config dump`, CRI-O at start).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "orh/cmd/configure.h"

struct scan {
	const char *p;      /* the next byte */
	const char *text;
	const char *name;
	unsigned line;
	const char *line_start;
	struct orh_err *err;
};

static int scan_fail(struct scan *s, const char *what)
{
	return orh_fail(s->err, EINVAL, "%s:%u: %s", s->name, s->line, what);
}

static void skip_blank(struct scan *s)
{
	while (*s->p == ' ' || *s->p == '\t')
		s->p++;
}

static void newline(struct scan *s)
{
	s->line++;
	s->line_start = s->p;
}

/* A basic string "..." from s->p (at the quote), appended decoded to out when out is
 * given. Only one line. */
static int scan_basic(struct scan *s, char **out)
{
	size_t cap = 16, n = 0;
	char *buf = out ? orh_xmalloc(cap) : NULL;

	for (s->p++; *s->p != '"'; s->p++) {
		char c = *s->p;

		if (c == '\0' || c == '\n') {
			free(buf);
			return scan_fail(s, "a string that does not end on its line");
		}
		if (c == '\\') {
			s->p++;
			switch (*s->p) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case '"': c = '"'; break;
			case '\\': c = '\\'; break;
			default:
				/* \uXXXX and the rest: kept as written (no key or value configure
				 * looks for uses them) */
				if (*s->p == '\0' || *s->p == '\n') {
					free(buf);
					return scan_fail(s, "a string that does not end on its line");
				}
				if (buf) {
					if (n + 3 > cap)
						buf = orh_xrealloc(buf, cap *= 2);
					buf[n++] = '\\';
				}
				c = *s->p;
			}
		}
		if (buf) {
			if (n + 3 > cap)
				buf = orh_xrealloc(buf, cap *= 2);
			buf[n++] = c;
		}
	}
	s->p++;
	if (buf) {
		buf[n] = '\0';
		*out = buf;
	}
	return 0;
}

static int scan_literal(struct scan *s, char **out)
{
	const char *start = ++s->p;

	while (*s->p != '\'') {
		if (*s->p == '\0' || *s->p == '\n')
			return scan_fail(s, "a string that does not end on its line");
		s->p++;
	}
	if (out)
		*out = strndup(start, (size_t)(s->p - start));
	s->p++;
	return 0;
}

static bool bare_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

/* A dotted key (bare, "quoted" or 'literal' segments) appended to path. */
static int scan_key(struct scan *s, char **path)
{
	for (;;) {
		char *seg = NULL;
		char *joined = NULL;
		int r = 0;

		skip_blank(s);
		if (*s->p == '"') {
			r = scan_basic(s, &seg);
		} else if (*s->p == '\'') {
			r = scan_literal(s, &seg);
		} else if (bare_char(*s->p)) {
			const char *start = s->p;

			while (bare_char(*s->p))
				s->p++;
			seg = strndup(start, (size_t)(s->p - start));
		} else {
			return scan_fail(s, "expected a key");
		}
		if (r < 0)
			return r;
		joined = *path ? orh_xasprintf("%s" ORH_TOML_SEP "%s", *path, seg) : seg;
		if (*path) {
			free(*path);
			free(seg);
		}
		*path = joined;
		skip_blank(s);
		if (*s->p != '.')
			return 0;
		s->p++;
	}
}

/* After a value or a header: blanks, maybe a comment, the end of the line. */
static int scan_eol(struct scan *s)
{
	skip_blank(s);
	if (*s->p == '\r')
		s->p++;
	if (*s->p == '#')
		while (*s->p && *s->p != '\n')
			s->p++;
	if (*s->p == '\n') {
		s->p++;
		newline(s);
		return 0;
	}
	if (*s->p == '\0')
		return 0;
	return scan_fail(s, "unexpected text after the value");
}

/* Past a multi-line string opened by three quotes q. */
static int skip_multiline(struct scan *s, char q)
{
	for (s->p += 3; *s->p; s->p++) {
		if (q == '"' && *s->p == '\\' && s->p[1]) {
			s->p++;
		} else if (s->p[0] == q && s->p[1] == q && s->p[2] == q) {
			s->p += 3;
			while (*s->p == q) /* up to two quotes of the content may end it */
				s->p++;
			return 0;
		}
		if (*s->p == '\n') {
			s->p++;
			newline(s);
			s->p--;
		}
	}
	return scan_fail(s, "a multi-line string that does not end");
}

/* Past an array [...] (over lines, with comments) or an inline table {...} (one line). */
static int skip_nested(struct scan *s)
{
	int depth = 0;

	do {
		int r = 0;

		switch (*s->p) {
		case '\0':
			return scan_fail(s, "an array or inline table that does not end");
		case '[':
		case '{':
			depth++;
			s->p++;
			break;
		case ']':
		case '}':
			depth--;
			s->p++;
			break;
		case '"':
			r = s->p[1] == '"' && s->p[2] == '"' ? skip_multiline(s, '"') : scan_basic(s, NULL);
			break;
		case '\'':
			r = s->p[1] == '\'' && s->p[2] == '\'' ? skip_multiline(s, '\'')
								: scan_literal(s, NULL);
			break;
		case '#':
			while (*s->p && *s->p != '\n')
				s->p++;
			break;
		case '\n':
			s->p++;
			newline(s);
			break;
		default:
			s->p++;
		}
		if (r < 0)
			return r;
	} while (depth > 0);
	return 0;
}

/* The value's source text, from s->p; s->p ends past it. */
static int scan_value(struct scan *s, char **value)
{
	const char *start = s->p;
	int r = 0;

	if (*s->p == '"' || *s->p == '\'') {
		char q = *s->p;

		if (s->p[1] == q && s->p[2] == q)
			r = skip_multiline(s, q);
		else
			r = q == '"' ? scan_basic(s, NULL) : scan_literal(s, NULL);
	} else if (*s->p == '[' || *s->p == '{') {
		r = skip_nested(s);
	} else {
		while (*s->p && *s->p != '\n' && *s->p != '#')
			s->p++;
		while (s->p > start && (s->p[-1] == ' ' || s->p[-1] == '\t' || s->p[-1] == '\r'))
			s->p--;
		if (s->p == start)
			return scan_fail(s, "a key without a value");
	}
	if (r < 0)
		return r;
	*value = strndup(start, (size_t)(s->p - start));
	return 0;
}

static void push(struct orh_toml *t, char *key, char *value, unsigned line, size_t start)
{
	t->v = orh_xgrow(t->v, t->n + 1, sizeof(*t->v));
	t->v[t->n++] = (struct orh_toml_entry){
		.key = key, .value = value, .line = line, .start = start,
	};
}

/* The last entry pushed ends where the scan is now (past its line's newline). */
static void mark_end(struct orh_toml *t, const struct scan *s)
{
	if (t->n)
		t->v[t->n - 1].end = (size_t)(s->p - s->text);
}

int orh_toml_scan(const char *text, const char *name, struct orh_toml *out, struct orh_err *err)
{
	struct scan s = { .p = text, .text = text, .name = name, .line = 1, .line_start = text,
			  .err = err };
	_cleanup_free_ char *table = NULL;
	int r = 0;

	memset(out, 0, sizeof(*out));
	while (*s.p && r >= 0) {
		unsigned line = s.line;
		size_t start = (size_t)(s.line_start - text);
		char *key = NULL, *value = NULL;

		skip_blank(&s);
		if (*s.p == '#' || *s.p == '\n' || *s.p == '\r' || *s.p == '\0') {
			r = scan_eol(&s);
			continue;
		}
		if (s.p[0] == '{' && s.p[1] == '{') {
			/* a Go template action on a line of its own (k3s's config.toml.tmpl): not
			 * TOML, passed over whole */
			while (*s.p && *s.p != '\n')
				s.p++;
			r = scan_eol(&s);
			continue;
		}
		if (*s.p == '[') {
			bool array = s.p[1] == '[';

			s.p += array ? 2 : 1;
			r = scan_key(&s, &key);
			if (r >= 0 && (*s.p != ']' || (array && s.p[1] != ']')))
				r = scan_fail(&s, "a table header without its ']'");
			if (r < 0) {
				free(key);
				break;
			}
			s.p += array ? 2 : 1;
			free(table);
			table = orh_xstrdup(key);
			push(out, key, NULL, line, start);
			out->v[out->n - 1].array = array;
			r = scan_eol(&s);
			mark_end(out, &s);
			continue;
		}
		if (table)
			key = orh_xstrdup(table);
		r = scan_key(&s, &key);
		if (r >= 0 && *s.p != '=')
			r = scan_fail(&s, "expected '=' after the key");
		if (r >= 0) {
			s.p++;
			skip_blank(&s);
			r = scan_value(&s, &value);
		}
		if (r < 0) {
			free(key);
			break;
		}
		push(out, key, value, line, start);
		r = scan_eol(&s);
		mark_end(out, &s);
	}
	if (r < 0)
		orh_toml_free(out);
	return r;
}

void orh_toml_free(struct orh_toml *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].key);
		free(t->v[i].value);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}

const struct orh_toml_entry *orh_toml_get(const struct orh_toml *t, const char *key)
{
	const struct orh_toml_entry *found = NULL;

	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].value && !strcmp(t->v[i].key, key))
			found = &t->v[i];
	return found;
}

const struct orh_toml_entry *orh_toml_find_under(const struct orh_toml *t, const char *key)
{
	size_t n = strlen(key);

	for (size_t i = 0; i < t->n; i++)
		if (!strncmp(t->v[i].key, key, n) &&
		    (t->v[i].key[n] == '\0' || t->v[i].key[n] == ORH_TOML_SEP[0]))
			return &t->v[i];
	return NULL;
}

bool orh_toml_string(const char *value, char **out)
{
	struct orh_err err = { 0 };
	struct scan s = { .p = value, .text = value, .name = "", .err = &err };
	char *str = NULL;
	int r;

	if (*value == '"' && strncmp(value, "\"\"\"", 3))
		r = scan_basic(&s, &str);
	else if (*value == '\'' && strncmp(value, "'''", 3))
		r = scan_literal(&s, &str);
	else
		return false;
	if (r < 0 || *s.p != '\0') {
		free(str);
		return false;
	}
	*out = str;
	return true;
}

bool orh_toml_bool(const char *value, bool *out)
{
	if (!strcmp(value, "true"))
		*out = true;
	else if (!strcmp(value, "false"))
		*out = false;
	else
		return false;
	return true;
}

/* Past blanks, line ends and comments, as an array may hold them between its values. */
static void skip_blank_and_comments(const char **p)
{
	while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r' || **p == '#') {
		if (**p == '#')
			while (**p && **p != '\n')
				(*p)++;
		else
			(*p)++;
	}
}

bool orh_toml_string_array(const char *value, struct orh_strv *out)
{
	struct orh_err err = { 0 };
	struct scan s = { .p = value, .text = value, .name = "", .err = &err };

	if (*s.p++ != '[')
		return false;
	for (;;) {
		char *str = NULL;
		int r;

		skip_blank_and_comments(&s.p);
		if (*s.p == ']')
			return s.p[1] == '\0';
		if (*s.p == '"' && strncmp(s.p, "\"\"\"", 3))
			r = scan_basic(&s, &str);
		else if (*s.p == '\'' && strncmp(s.p, "'''", 3))
			r = scan_literal(&s, &str);
		else
			return false;
		if (r < 0)
			return false;
		orh_strv_push(out, str);
		skip_blank_and_comments(&s.p); /* (a comment may come before the comma) */
		if (*s.p == ',')
			s.p++;
		else if (*s.p != ']')
			return false;
	}
}

char *orh_toml_key(const char *first, ...)
{
	char *key = orh_xstrdup(first);
	const char *seg;
	va_list ap;

	va_start(ap, first);
	while ((seg = va_arg(ap, const char *))) {
		char *k = orh_xasprintf("%s" ORH_TOML_SEP "%s", key, seg);

		free(key);
		key = k;
	}
	va_end(ap);
	return key;
}

char *orh_toml_quote(const char *s)
{
	size_t n = 0;
	char *out = orh_xmalloc(2 * strlen(s) + 3);

	out[n++] = '"';
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			out[n++] = '\\';
		out[n++] = *s;
	}
	out[n++] = '"';
	out[n] = '\0';
	return out;
}

char *orh_toml_array(const struct orh_strv *sv)
{
	char *out = orh_xstrdup("[");

	for (size_t i = 0; i < sv->n; i++) {
		_cleanup_free_ char *q = orh_toml_quote(sv->v[i]);
		char *next = orh_xasprintf("%s%s%s", out, i ? ", " : "", q);

		free(out);
		out = next;
	}
	char *done = orh_xasprintf("%s]", out);

	free(out);
	return done;
}
