/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node snapshot's text (snapline.c): snapshot.c, and discover_gids.c for the GID
 * source's part, write and read their lines with these.
 */
#ifndef ORH_NODE_SNAPLINE_H
#define ORH_NODE_SNAPLINE_H

#include "orh/node/inventory.h"
#include "orh/base/util.h"

/* Where a restore is: a bad field is reported as "<what>: line N (KIND), field I: why". */
struct snap_rd {
	const char *what;
	struct orh_err *err;
	unsigned line;
	const char *kind;
};
int snap_fail(struct snap_rd *rd, int field, const char *why);
/* Append a line's kind (as it is), a tab and one field (escaped), a number, a device's 5
 * fields (name, major, minor, port, present), a GID entry's 4 (index, 32 hex digits, type,
 * net device). */
void snap_kind(struct orh_buf *b, const char *kind);
void snap_str(struct orh_buf *b, const char *s);
void snap_num(struct orh_buf *b, long long v);
void snap_chardev(struct orh_buf *b, const struct orh_chardev *c);
void snap_gid(struct orh_buf *b, const struct orh_gid *g);
/* Split a line (no newline) into at most max fields, unescaped in place; their number. */
int snap_split(char *line, char **fv, int max);
/* Field i of fv[0..nf): a string that fits, an integer in [min, max], a device from i on,
 * a GID entry from i on. */
int snap_get_str(struct snap_rd *rd, char **fv, int nf, int i, char *out, size_t size);
int snap_get_num(struct snap_rd *rd, char **fv, int nf, int i, long long min, long long max,
		 long long *out);
int snap_get_chardev(struct snap_rd *rd, char **fv, int nf, int i, struct orh_chardev *c);
int snap_get_gid(struct snap_rd *rd, char **fv, int nf, int i, struct orh_gid *g);

#endif
