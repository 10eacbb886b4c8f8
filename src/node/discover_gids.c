/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GID entries on demand (plan mode). Discovery reads no GID table up front; it records,
 * per RoCE port it is asked about, how to read the port's entries later (the GID source,
 * owned by the inventory). The planner reads through the reader its caller passes it
 * (orh_inventory_gids): each entry is read the first time it is asked for and kept
 * here, so the inventory itself stays as discovery left it. What was read, with the
 * warnings the planner's reads gave, goes into a node snapshot (snapshot.c) and comes
 * back from one: a restored entry gives its warnings again the first time it is read.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "discover_gids.h"
#include "snapline.h"
#include "sysfs.h"

/* Per tracked port: how to read its entries, and what has been read. */
struct orh_port_gids {
	int devfd;                 /* the device's directory (the source owns it), or -1:
				    * opened by `rel` from the sysroot for each read */
	char *rel;                 /* sys/class/infiniband/<dev>, when devfd is -1 */
	char prefix[16];           /* ports/<n>/ */
	char *where;               /* <sysroot>/sys/class/infiniband/<dev>/ports/<n> */
	uint8_t *seen;             /* per index: 0 not read, 1 unused or unreadable, 2 in use */
	size_t n_seen;
	unsigned end;              /* the table's length once known, else UINT_MAX */
	struct orh_gid *gids;      /* the entries in use read so far, ascending index */
	size_t n_gids, cap;
	struct gid_warn *warns;    /* the warnings of the planner's reads, by entry */
	size_t n_warns;
};

struct gid_warn {
	unsigned idx;
	char *text;
	bool replay;               /* restored: given again at the entry's first read */
};

struct orh_gid_source {
	struct orh_discover_opts opts; /* sysroot points to `sysroot` below */
	char *sysroot;
	const char *rootname;      /* sysroot, or "" for "/": the prefix of warnings' paths */
	int root;
	int fds[256];              /* device directories held open for later reads */
	size_t n_fds;
	struct orh_readbatch batch;
	struct orh_port_gids *ports;
	size_t n_ports;
	unsigned long file_reads;  /* reads made for the planner, after discovery */
};

struct orh_gid_source *disc_gids_open(const struct orh_discover_opts *opts, int root)
{
	struct orh_gid_source *src = orh_xcalloc(1, sizeof(*src));

	src->sysroot = orh_xstrdup(opts->sysroot);
	src->rootname = strcmp(src->sysroot, "/") ? src->sysroot : "";
	src->opts = *opts;
	src->opts.sysroot = src->sysroot;
	src->opts.port_wanted = NULL;
	src->root = root;
	return src;
}

struct orh_readbatch *disc_gids_batch(struct orh_gid_source *src)
{
	return &src->batch;
}

bool disc_gids_keeps(const struct orh_gid_source *src, int devfd)
{
	return src && src->n_fds && src->fds[src->n_fds - 1] == devfd;
}

void disc_gids_track(struct scan *sc, struct orh_port *p, int devfd, const char *devwhere)
{
	struct orh_gid_source *src = sc->inv->gid_source;
	struct orh_port_gids *lz;
	size_t len = strlen(devwhere);

	src->ports = orh_xgrow(src->ports, src->n_ports, sizeof(*src->ports));
	lz = &src->ports[src->n_ports++];
	memset(lz, 0, sizeof(*lz));
	/* every page a hook touches costs it a fault: the strings take what they need */
	lz->devfd = -1;
	if (disc_gids_keeps(src, devfd))
		lz->devfd = devfd; /* the device's other port kept it */
	else if (src->n_fds < ORH_ARRAY_SIZE(src->fds))
		lz->devfd = src->fds[src->n_fds++] = devfd;
	if (lz->devfd < 0)
		lz->rel = orh_xstrdup(devwhere + strlen(src->rootname) + 1);
	strcpy(orh_put_uint(stpcpy(lz->prefix, "ports/"), p->num), "/");
	lz->where = orh_xmalloc(len + sizeof("/ports/255"));
	orh_put_uint(stpcpy(stpcpy(lz->where, devwhere), "/ports/"), p->num);
	lz->end = UINT_MAX;
	p->gid_slot = src->n_ports;
}

static void insert_gid(struct orh_port_gids *lz, const struct orh_gid *g)
{
	size_t at = lz->n_gids;

	while (at > 0 && lz->gids[at - 1].index > g->index)
		at--;
	if (lz->n_gids == lz->cap) {
		lz->cap = lz->cap ? lz->cap * 2 : 2; /* the plan reads one or two entries of most ports */
		lz->gids = orh_xrealloc(lz->gids, lz->cap * sizeof(*lz->gids));
	}
	memmove(&lz->gids[at + 1], &lz->gids[at], (lz->n_gids - at) * sizeof(*lz->gids));
	lz->gids[at] = *g;
	lz->n_gids++;
}

static const struct orh_gid *find_gid(const struct orh_gid *gids, size_t n, unsigned idx)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (gids[mid].index == idx)
			return &gids[mid];
		if (gids[mid].index < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int orh_gids_in_memory(void *arg, const struct orh_port *p, unsigned idx, struct orh_gid *g,
		       struct orh_strv *warnings)
{
	unsigned end = p->gid_tbl_len;
	const struct orh_gid *have;

	(void)arg;
	(void)warnings;
	if (p->n_gids && p->gids[p->n_gids - 1].index >= end)
		end = p->gids[p->n_gids - 1].index + 1;
	if (idx >= end)
		return -ENOENT;
	have = find_gid(p->gids, p->n_gids, idx);
	if (have)
		*g = *have;
	return have ? 1 : 0;
}

static void keep_warnings(struct orh_port_gids *lz, unsigned idx, const struct orh_strv *w,
			  size_t from)
{
	for (size_t i = from; w && i < w->n; i++) {
		lz->warns = orh_xgrow(lz->warns, lz->n_warns, sizeof(*lz->warns));
		lz->warns[lz->n_warns++] = (struct gid_warn){ .idx = idx,
							      .text = orh_xstrdup(w->v[i]) };
	}
}

static void replay_warnings(struct orh_port_gids *lz, unsigned idx, struct orh_strv *w)
{
	for (size_t i = 0; i < lz->n_warns; i++)
		if (lz->warns[i].idx == idx && lz->warns[i].replay) {
			lz->warns[i].replay = false;
			if (w)
				orh_strv_push(w, orh_xstrdup(lz->warns[i].text));
		}
}

/* Entry idx of a tracked port, read from the sysroot once; warnings and reads go where
 * the scan says. need_ndev: also read the entry's net device. */
static int source_entry(struct orh_gid_source *src, struct scan *sc, struct orh_port_gids *lz,
			unsigned idx, bool need_ndev, struct orh_gid *g)
{
	const struct orh_gid *have;
	size_t n_warned = sc->warnings ? sc->warnings->n : 0;
	int r;

	if (idx >= lz->end || idx >= DISC_MAX_GIDS)
		return -ENOENT;
	if (idx < lz->n_seen && lz->seen[idx]) {
		replay_warnings(lz, idx, sc->warnings);
		have = lz->seen[idx] == 2 ? find_gid(lz->gids, lz->n_gids, idx) : NULL;
		if (have)
			*g = *have;
		return have ? 1 : 0;
	}
	if (lz->devfd >= 0) {
		r = disc_read_gid(sc, lz->devfd, lz->prefix, lz->where, idx, need_ndev, g);
	} else {
		_cleanup_close_ int fd = openat(src->root, lz->rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0) {
			disc_warn(sc, "skipping '%s': %s", lz->where, strerror(errno));
			r = 0;
		} else {
			r = disc_read_gid(sc, fd, lz->prefix, lz->where, idx, need_ndev, g);
		}
	}
	if (!sc->inv) /* the planner's read (discovery's warnings are the inventory's) */
		keep_warnings(lz, idx, sc->warnings, n_warned);
	if (r == -ENOENT) {
		lz->end = idx;
		return -ENOENT;
	}
	if (idx >= lz->n_seen) {
		size_t n = lz->n_seen ? lz->n_seen : 16;

		while (n <= idx)
			n *= 2;
		lz->seen = orh_xrealloc(lz->seen, n);
		memset(lz->seen + lz->n_seen, 0, n - lz->n_seen);
		lz->n_seen = n;
	}
	lz->seen[idx] = r == 1 ? 2 : 1;
	if (r == 1)
		insert_gid(lz, g);
	return r;
}

/* The planner's reader in plan mode. */
static int source_read(void *arg, const struct orh_port *p, unsigned idx, struct orh_gid *g,
		       struct orh_strv *warnings)
{
	struct orh_gid_source *src = arg;
	struct scan sc = { .opts = &src->opts, .root = src->root, .batch = &src->batch,
			   .warnings = warnings, .reads = &src->file_reads };

	if (!p->gid_slot || p->gid_slot > src->n_ports)
		return orh_gids_in_memory(NULL, p, idx, g, warnings);
	return source_entry(src, &sc, &src->ports[p->gid_slot - 1], idx, !p->netdev[0], g);
}

struct orh_gid_reader orh_inventory_gids(const struct orh_inventory *inv)
{
	if (inv->gid_source)
		return (struct orh_gid_reader){ .entry = source_read, .arg = inv->gid_source };
	return (struct orh_gid_reader){ .entry = orh_gids_in_memory };
}

unsigned long orh_inventory_reads(const struct orh_inventory *inv)
{
	return inv->file_reads + (inv->gid_source ? inv->gid_source->file_reads : 0);
}

/* A RoCE port's net device is the ndev of its first used entry: entry 0, the default
 * GID, on a live port (an unused entry's ndev cannot be read). */
void disc_gids_netdev(struct scan *sc, struct orh_port *p, int devfd)
{
	struct orh_gid_source *src = sc->inv->gid_source;
	struct orh_port_gids *lz = &src->ports[p->gid_slot - 1];
	char path[64], buf[VALUE_MAX];

	orh_put_uint(stpcpy(stpcpy(path, lz->prefix), "gid_attrs/ndevs/"), 0);
	if (disc_read_value(sc, devfd, path, buf, sizeof(buf)) > 0 && disc_valid_name(buf, IFNAMSIZ)) {
		strcpy(p->netdev, buf);
		return;
	}
	for (unsigned idx = 0; idx < DISC_MAX_GIDS && !p->netdev[0]; idx++) {
		struct orh_gid g;
		int r = source_entry(src, sc, lz, idx, true, &g);

		if (r < 0)
			break;
		if (r == 1) {
			if (g.ndev[0])
				strcpy(p->netdev, g.ndev);
			break;
		}
	}
}

void disc_gids_free(struct orh_gid_source *src)
{
	if (!src)
		return;
	orh_readbatch_flush(&src->batch);
	for (size_t i = 0; i < src->n_ports; i++) {
		free(src->ports[i].seen);
		free(src->ports[i].rel);
		free(src->ports[i].where);
		free(src->ports[i].gids);
		for (size_t k = 0; k < src->ports[i].n_warns; k++)
			free(src->ports[i].warns[k].text);
		free(src->ports[i].warns);
	}
	free(src->ports);
	for (size_t i = 0; i < src->n_fds; i++)
		close(src->fds[i]);
	if (src->root >= 0)
		close(src->root);
	free(src->sysroot);
	free(src);
}

/* ---- the node snapshot's part (snapshot.c): what the source has read ---- */

/* "src WHERE REL PREFIX END SEEN", then "sgid" for each entry in use read, and "swarn IDX
 * TEXT" for each warning a read gave the planner. */
static void put_port(struct orh_buf *f, const struct orh_gid_source *src,
		     const struct orh_port_gids *lz)
{
	size_t root_len = strlen(src->rootname) + 1, where_len = strlen(lz->where);
	/* where is <rootname>/<rel>/ports/<n>, and "/ports/<n>" is as long as the prefix */
	_cleanup_free_ char *rel = NULL, *seen = NULL;
	size_t n_seen = lz->n_seen;

	if (!lz->rel && where_len > root_len + strlen(lz->prefix)) {
		size_t n = where_len - root_len - strlen(lz->prefix);

		rel = orh_xmalloc(n + 1);
		memcpy(rel, lz->where + root_len, n);
		rel[n] = '\0';
	}
	while (n_seen > 0 && !lz->seen[n_seen - 1])
		n_seen--;
	seen = orh_xmalloc(n_seen + 1);
	for (size_t i = 0; i < n_seen; i++)
		seen[i] = (char)('0' + lz->seen[i]);
	seen[n_seen] = '\0';
	snap_kind(f, "src");
	snap_str(f, lz->where);
	snap_str(f, lz->rel ? lz->rel : rel ? rel : "");
	snap_str(f, lz->prefix);
	snap_num(f, lz->end == UINT_MAX ? -1 : (long long)lz->end);
	snap_str(f, seen);
	orh_buf_addc(f, '\n');
	for (size_t i = 0; i < lz->n_gids; i++) {
		snap_kind(f, "sgid");
		snap_gid(f, &lz->gids[i]);
		orh_buf_addc(f, '\n');
	}
	for (size_t i = 0; i < lz->n_warns; i++) {
		snap_kind(f, "swarn");
		snap_num(f, lz->warns[i].idx);
		snap_str(f, lz->warns[i].text);
		orh_buf_addc(f, '\n');
	}
}

size_t disc_gids_count(const struct orh_gid_source *src)
{
	return src ? src->n_ports : 0;
}

void disc_gids_snapshot(const struct orh_gid_source *src, struct orh_buf *f)
{
	for (size_t i = 0; src && i < src->n_ports; i++)
		put_port(f, src, &src->ports[i]);
}

static int restore_src(struct orh_gid_source *src, struct snap_rd *rd, char **fv, int nf)
{
	struct orh_port_gids *lz;
	long long end = 0;
	size_t n;

	src->ports = orh_xgrow(src->ports, src->n_ports, sizeof(*src->ports));
	lz = &src->ports[src->n_ports++];
	memset(lz, 0, sizeof(*lz));
	lz->devfd = -1;
	lz->where = orh_xstrdup(nf > 1 ? fv[1] : "");
	lz->rel = orh_xstrdup(nf > 2 ? fv[2] : "");
	if (nf < 6 || !*lz->where)
		return snap_fail(rd, nf < 6 ? nf : 1, "missing");
	if (!*lz->rel || lz->rel[0] == '/' || strstr(lz->rel, ".."))
		return snap_fail(rd, 2, "not a path under the sysroot");
	if (snap_get_str(rd, fv, nf, 3, lz->prefix, sizeof(lz->prefix)) < 0 ||
	    snap_get_num(rd, fv, nf, 4, -1, DISC_MAX_GIDS, &end) < 0)
		return -EINVAL;
	lz->end = end < 0 ? UINT_MAX : (unsigned)end;
	n = strlen(fv[5]);
	if (n > DISC_MAX_GIDS || strspn(fv[5], "012") != n)
		return snap_fail(rd, 5, "not a string of 0, 1 and 2");
	lz->n_seen = n;
	lz->seen = orh_xcalloc(n + 1, 1);
	for (size_t i = 0; i < n; i++)
		lz->seen[i] = (uint8_t)(fv[5][i] - '0');
	return 0;
}

int disc_gids_restore_line(struct orh_gid_source *src, struct snap_rd *rd, char **fv, int nf)
{
	struct orh_port_gids *lz = src->n_ports ? &src->ports[src->n_ports - 1] : NULL;
	struct orh_gid g;
	long long idx = 0;

	if (!strcmp(fv[0], "src"))
		return restore_src(src, rd, fv, nf);
	if (!lz)
		return snap_fail(rd, 0, "before any src line");
	if (!strcmp(fv[0], "sgid")) {
		if (snap_get_gid(rd, fv, nf, 1, &g) < 0)
			return -EINVAL;
		if (g.index >= lz->n_seen || lz->seen[g.index] != 2)
			return snap_fail(rd, 1, "an entry the source has not read");
		insert_gid(lz, &g);
		return 0;
	}
	if (snap_get_num(rd, fv, nf, 1, 0, DISC_MAX_GIDS - 1, &idx) < 0)
		return -EINVAL;
	if (nf < 3)
		return snap_fail(rd, 2, "missing");
	lz->warns = orh_xgrow(lz->warns, lz->n_warns, sizeof(*lz->warns));
	lz->warns[lz->n_warns++] = (struct gid_warn){ .idx = (unsigned)idx,
						      .text = orh_xstrdup(fv[2]), .replay = true };
	return 0;
}
