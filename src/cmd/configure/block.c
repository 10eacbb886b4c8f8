/* SPDX-License-Identifier: Apache-2.0 */
/*
 * configure's own block inside a file it shares with the operator (include/orh/cmd/configure.h):
 * appended, replaced in place, or removed, byte for byte.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orh/cmd/configure.h"

#define BEGIN "# >>> oci-rdma-hook configure "
#define END "# <<< oci-rdma-hook configure "
#define NEW_FILE " (new file)"

/* The line starting at p: its length without the newline. */
static size_t line_len(const char *p)
{
	const char *nl = strchr(p, '\n');

	return nl ? (size_t)(nl - p) : strlen(p);
}

/* Is the line at p prefix id suffix, whatever blanks or CR end it (an editor's or another
 * program's rewrite may add them)? */
static bool line_is(const char *p, const char *prefix, const char *id, const char *suffix)
{
	size_t lp = strlen(prefix), li = strlen(id), ls = strlen(suffix), n = line_len(p);

	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	return n == lp + li + ls && !strncmp(p, prefix, lp) &&
	       !strncmp(p + lp, id, li) && !strncmp(p + lp + li, suffix, ls);
}

struct found {
	const char *begin;  /* the begin marker line */
	const char *end;    /* past the end marker line and its newline */
	bool new_file;
};

/* The block of id in text: 1 when found, 0 when not, -EINVAL when its end is missing. */
static int find_block(const char *text, const char *name, const char *id, struct found *f,
		      struct orh_err *err)
{
	unsigned line = 1;

	memset(f, 0, sizeof(*f));
	for (const char *p = text; *p; line++) {
		size_t n = line_len(p);

		if (line_is(p, BEGIN, id, "") || line_is(p, BEGIN, id, NEW_FILE)) {
			f->begin = p;
			f->new_file = line_is(p, BEGIN, id, NEW_FILE);
			for (const char *q = p + n; *q;) {
				q++; /* the newline */
				if (line_is(q, END, id, "")) {
					f->end = q + line_len(q);
					if (*f->end == '\n')
						f->end++;
					return 1;
				}
				q += line_len(q);
			}
			/* a begin marker that ends the file, nothing but blank lines after it:
			 * a block whose body and end marker went (an earlier configure's undo
			 * of a template it made left one so), taken as an empty block */
			if (!p[n + strspn(p + n, " \t\r\n")]) {
				f->end = p + strlen(p);
				return 1;
			}
			return orh_fail(err, EINVAL, "%s:%u: '%s%s' has no end marker line '%s%s'",
					name, line, BEGIN, id, END, id);
		}
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

static char *block_text(const struct orh_block *b, bool new_file)
{
	return orh_xasprintf(BEGIN "%s%s\n%s" END "%s\n", b->id, new_file ? NEW_FILE : "",
			     b->body, b->id);
}

int orh_block_install(const char *old, const char *name, const struct orh_block *b,
		      char **out, struct orh_err *err)
{
	_cleanup_free_ char *block = NULL;
	struct found f;
	int r;

	*out = NULL;
	if (!old) {
		block = block_text(b, true);
		*out = orh_xasprintf("%s%s%s", b->header, *b->header ? "\n" : "", block);
		return 0;
	}
	r = find_block(old, name, b->id, &f, err);
	if (r < 0)
		return r;
	if (r == 0) {
		block = block_text(b, false);
		*out = orh_xasprintf("%s\n%s", old, block);
		return 0;
	}
	block = block_text(b, f.new_file);
	if (strlen(block) == (size_t)(f.end - f.begin) && !strncmp(f.begin, block, strlen(block)))
		return 0; /* already there, as it would be written */
	*out = orh_xasprintf("%.*s%s%s", (int)(f.begin - old), old, block, f.end);
	return 0;
}

int orh_block_remove(const char *old, const char *name, const struct orh_block *b, char **out,
		     bool *remove, struct orh_err *err)
{
	const char *cut;
	struct found f;
	int r;

	*out = NULL;
	*remove = false;
	if (!old)
		return 0;
	r = find_block(old, name, b->id, &f, err);
	if (r <= 0)
		return r;
	/* the "\n" that install put before the block: the empty line before it (written LF or
	 * CRLF), or the end of the last line of a file that had no newline at its end, where
	 * the block ends the file; never the end of a line that text follows */
	cut = f.begin;
	if (cut - old >= 2 && cut[-1] == '\n' && cut[-2] == '\n')
		cut--;
	else if (cut - old >= 3 && cut[-1] == '\n' && cut[-2] == '\r' && cut[-3] == '\n')
		cut -= 2;
	else if (cut > old && cut[-1] == '\n' && *f.end == '\0')
		cut -= cut - old >= 2 && cut[-2] == '\r' ? 2 : 1;
	if (f.new_file && *f.end == '\0' && (size_t)(cut - old) == strlen(b->header) &&
	    !strncmp(old, b->header, strlen(b->header))) {
		*remove = true; /* made by configure, and nothing else is in it */
		return 1;
	}
	*out = orh_xasprintf("%.*s%s", (int)(cut - old), old, f.end);
	return 1;
}

/* The id of the begin marker line at p (without " (new file)" and the blanks or CR that end
 * the line), as a new string. */
static char *begin_id(const char *p)
{
	size_t n = line_len(p) - strlen(BEGIN);

	p += strlen(BEGIN);
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	if (n >= strlen(NEW_FILE) && !strncmp(p + n - strlen(NEW_FILE), NEW_FILE, strlen(NEW_FILE)))
		n -= strlen(NEW_FILE);
	return orh_xasprintf("%.*s", (int)n, p);
}

/* The line at or after p that is the end marker of id; NULL when there is none. */
static const char *end_after(const char *p, const char *id)
{
	while (*p) {
		if (line_is(p, END, id, ""))
			return p;
		p += line_len(p);
		if (*p)
			p++;
	}
	return NULL;
}

char *orh_block_strip_all(const char *old)
{
	size_t n = 0;
	char *out = orh_xmalloc(strlen(old) + 1);
	const char *end = NULL; /* inside a block: its end marker line */

	for (const char *p = old; *p;) {
		size_t len = line_len(p);

		/* a begin marker opens a block only where its own end marker (the same id)
		 * follows it: the lines after one without its end are the operator's, and
		 * are kept */
		if (!end && !strncmp(p, BEGIN, strlen(BEGIN))) {
			_cleanup_free_ char *id = begin_id(p);

			end = end_after(p + len, id);
		}
		if (!end) {
			memcpy(out + n, p, len);
			n += len;
			if (p[len] == '\n')
				out[n++] = '\n';
		}
		if (end == p)
			end = NULL;
		p += len;
		if (*p)
			p++;
	}
	out[n] = '\0';
	return out;
}

char *orh_block_body(const char *old, const struct orh_block *b)
{
	struct orh_err ignored = { 0 };
	const char *from, *to;
	struct found f;

	if (!old || find_block(old, "", b->id, &f, &ignored) <= 0)
		return NULL;
	from = f.begin + line_len(f.begin);
	from += *from == '\n';
	/* the end marker's line starts after the newline before it */
	to = f.end > old && f.end[-1] == '\n' ? f.end - 1 : f.end;
	while (to > from && to[-1] != '\n')
		to--;
	return orh_xasprintf("%.*s", (int)(to - from), from);
}
