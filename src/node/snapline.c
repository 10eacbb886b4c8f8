/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node snapshot's text (snapshot.c, discover_gids.c): one record a line, a kind then
 * fields, separated by tabs; a field's backslash, tab and newline are written \\, \t, \n.
 * A parse is one pass over one buffer: no allocation a field, which is what a container
 * start can afford (a JSON tree of the same node took longer to parse than the node took
 * to read). Numbers and a GID's hex digits are written and read here, not by printf and
 * strtoll: the NRI plugin writes the snapshot and its stage reads it at every container
 * start (120 lines of 10 fields on average on a node of 32 ports).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapline.h"
#include "sysfs.h"

int snap_fail(struct snap_rd *rd, int field, const char *why)
{
	return orh_fail(rd->err, EINVAL, "%s: line %u (%s), field %d: %s", rd->what, rd->line,
			rd->kind ? rd->kind : "?", field, why);
}

void snap_kind(struct orh_buf *b, const char *kind)
{
	orh_buf_add(b, kind, strlen(kind));
}

void snap_str(struct orh_buf *b, const char *s)
{
	orh_buf_addc(b, '\t');
	while (*s) {
		size_t plain = strcspn(s, "\\\t\n");

		orh_buf_add(b, s, plain);
		s += plain;
		if (!*s)
			break;
		orh_buf_addc(b, '\\');
		orh_buf_addc(b, *s == '\t' ? 't' : *s == '\n' ? 'n' : '\\');
		s++;
	}
}

void snap_num(struct orh_buf *b, long long v)
{
	char buf[24], *p = buf + sizeof(buf);
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	*--p = '\t';
	orh_buf_add(b, p, (size_t)(buf + sizeof(buf) - p));
}

void snap_chardev(struct orh_buf *b, const struct orh_chardev *c)
{
	snap_str(b, c->name);
	snap_num(b, c->major);
	snap_num(b, c->minor);
	snap_num(b, c->port);
	snap_num(b, c->present);
}

void snap_gid(struct orh_buf *b, const struct orh_gid *g)
{
	char hex[33];

	for (int i = 0; i < 16; i++) {
		hex[2 * i] = "0123456789abcdef"[g->raw[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[g->raw[i] & 15];
	}
	hex[32] = '\0';
	snap_num(b, g->index);
	snap_str(b, hex);
	snap_num(b, g->type);
	snap_str(b, g->ndev);
}

/* Undo snap_str's escapes in place. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (*s == '\\' && s[1]) {
			s++;
			*w++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

int snap_split(char *line, char **fv, int max)
{
	int n = 0;

	for (char *p = line; p && n < max; n++) {
		/* a tab in a field is written \t: every tab ends a field */
		char *tab = strchr(p, '\t'), *esc;

		if (tab)
			*tab = '\0';
		esc = strchr(p, '\\');
		if (esc) /* what comes before the first escape stays as it is */
			unescape(esc);
		fv[n] = p;
		p = tab ? tab + 1 : NULL;
	}
	return n;
}

int snap_get_str(struct snap_rd *rd, char **fv, int nf, int i, char *out, size_t size)
{
	if (i >= nf)
		return snap_fail(rd, i, "missing");
	if (orh_strlcpy(out, fv[i], size) < 0)
		return snap_fail(rd, i, "too long");
	return 0;
}

int snap_get_num(struct snap_rd *rd, char **fv, int nf, int i, long long min, long long max,
		 long long *out)
{
	const char *s;
	unsigned long long u = 0;
	size_t nd = 0;
	bool neg;

	if (i >= nf)
		return snap_fail(rd, i, "missing");
	s = fv[i];
	neg = *s == '-';
	s += neg;
	/* decimal digits as snap_num writes them: at most 19, so that u cannot wrap */
	for (; s[nd]; nd++) {
		if (s[nd] < '0' || s[nd] > '9' || nd >= 19)
			return snap_fail(rd, i, "not an integer in range");
		u = u * 10 + (unsigned)(s[nd] - '0');
	}
	if (nd == 0 || u > (unsigned long long)LLONG_MAX)
		return snap_fail(rd, i, "not an integer in range");
	*out = neg ? -(long long)u : (long long)u;
	if (*out < min || *out > max)
		return snap_fail(rd, i, "not an integer in range");
	return 0;
}

int snap_get_chardev(struct snap_rd *rd, char **fv, int nf, int i, struct orh_chardev *c)
{
	long long major = 0, minor = 0, port = 0, present = 0;

	if (snap_get_str(rd, fv, nf, i, c->name, sizeof(c->name)) < 0 ||
	    snap_get_num(rd, fv, nf, i + 1, 0, 0xfff, &major) < 0 ||
	    snap_get_num(rd, fv, nf, i + 2, 0, 0xfffff, &minor) < 0 ||
	    snap_get_num(rd, fv, nf, i + 3, 0, 255, &port) < 0 ||
	    snap_get_num(rd, fv, nf, i + 4, 0, 1, &present) < 0)
		return -EINVAL;
	c->major = (unsigned)major;
	c->minor = (unsigned)minor;
	c->port = (unsigned)port;
	c->present = present;
	return 0;
}

int snap_get_gid(struct snap_rd *rd, char **fv, int nf, int i, struct orh_gid *g)
{
	long long idx = 0, type = 0;
	char hex[33];

	memset(g, 0, sizeof(*g));
	if (snap_get_num(rd, fv, nf, i, 0, DISC_MAX_GIDS - 1, &idx) < 0 ||
	    snap_get_str(rd, fv, nf, i + 1, hex, sizeof(hex)) < 0 ||
	    snap_get_num(rd, fv, nf, i + 2, ORH_GID_TYPE_UNKNOWN, ORH_GID_TYPE_ROCE_V2, &type) < 0 ||
	    snap_get_str(rd, fv, nf, i + 3, g->ndev, sizeof(g->ndev)) < 0)
		return -EINVAL;
	if (strlen(hex) != 32 || strspn(hex, "0123456789abcdef") != 32)
		return snap_fail(rd, i + 1, "not 32 hex digits");
	for (int k = 0; k < 32; k++) {
		char c = hex[k];
		unsigned d = c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10);

		g->raw[k / 2] = (uint8_t)(g->raw[k / 2] << 4 | d);
	}
	g->index = (unsigned)idx;
	g->type = (enum orh_gid_type)type;
	disc_gid_fill_ipv4(g);
	return 0;
}
