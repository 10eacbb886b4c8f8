/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the parts of discovery share (discover.c, discover_chardev.c, discover_gids.c,
 * discover_gpu.c): the state of one scan and the helpers of sysfs.c that read a value, list
 * a directory and warn. Internal to discovery; include/orh/inventory.h is its interface.
 */
#ifndef ORH_DISCOVER_PRIV_H
#define ORH_DISCOVER_PRIV_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "orh/inventory.h"

#define VALUE_MAX 256 /* every sysfs attribute we read is far shorter */
#define DISC_MAX_GIDS 4096

struct scan {
	const struct orh_discover_opts *opts;
	struct orh_inventory *inv; /* NULL for GID reads after discovery */
	struct orh_strv *warnings; /* where disc_warn puts its lines */
	unsigned long *reads;      /* counts the files read */
	int root;                  /* sysroot dir fd */
	struct orh_readbatch *batch;
	struct orh_rdma_majors dyn; /* RDMA's dynamic majors (discover_chardev.c) */
	int dyn_state;             /* 0: /proc/devices not read yet, 1: read, -1: unreadable */
};

static inline bool disc_plan_mode(const struct scan *sc)
{
	return sc->opts->gid_scan == ORH_GIDS_PLAN;
}

/* ---- sysfs.c: reading sysfs, for every discovery file ---- */

/* Add a warning to sc->warnings (control characters made '?': one line each). */
void disc_warn(struct scan *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A read's error, as a warning says it ("value too long", strerror). */
const char *disc_err_text(ssize_t r);
/* Read one value; on failure return the error (no warning: callers decide). */
ssize_t disc_read_value(struct scan *sc, int dirfd, const char *path, char *buf, size_t max);
/* Read a value that must be there; warn naming <where>/<path> when it is not. */
bool disc_read_required(struct scan *sc, int dirfd, const char *where, const char *path,
			char *buf, size_t max);
/* List a directory's entries (no dot entries), sorted in version order. */
int disc_list_dir(int dirfd, const char *path, struct orh_strv *out);
/* The last component of a symlink's target; "" when not a link or not printable. */
void disc_link_basename(int dirfd, const char *path, char *out, size_t size);

/* A name of at most max-1 printable characters, no '/' (a sysfs entry, an interface). */
bool disc_valid_name(const char *s, size_t max);
/* Read GID entry idx of the port whose directory is <dirfd>/<prefix> ("" or
 * "ports/<n>/"); warnings name <where>/gids/<idx>. 1 when it is in use (filled), 0 when
 * unused or skipped, -ENOENT when there is no such entry. */
int disc_read_gid(struct scan *sc, int dirfd, const char *prefix, const char *where,
		  unsigned idx, bool need_ndev, struct orh_gid *g);

/* The real path of <sysroot>/<rel>, relative to <sysroot>/sys
 * ("devices/pci0000:1a/0000:1a:00.0"). -ENOENT when missing, -EXDEV when it leads outside
 * <sysroot>/sys, -ENAMETOOLONG when it does not fit. */
int disc_sysfs_path(const char *sysroot, const char *rel, char *out, size_t size);

/* discover_gids.c: plan mode's GID source (see orh_inventory_gids). */
struct orh_gid_source *disc_gids_open(const struct orh_discover_opts *opts, int root);
struct orh_readbatch *disc_gids_batch(struct orh_gid_source *src);
/* Is devfd the directory the source kept open last (the scan must not close it)? */
bool disc_gids_keeps(const struct orh_gid_source *src, int devfd);
/* Record how to read port p's entries later (sets p->gid_slot). */
void disc_gids_track(struct scan *sc, struct orh_port *p, int devfd, const char *devwhere);
/* A tracked RoCE port's net device: the ndev of its first used entry. */
void disc_gids_netdev(struct scan *sc, struct orh_port *p, int devfd);
void disc_gids_free(struct orh_gid_source *src);

/* ---- the node snapshot's text (snapline.c), and the GID source's part of it
 * (discover_gids.c); snapshot.c calls them ---- */

/* Where a restore is: a bad field is reported as "<what>: line N (KIND), field I: why". */
struct snap_rd {
	const char *what;
	struct orh_err *err;
	unsigned line;
	const char *kind;
};
int snap_fail(struct snap_rd *rd, int field, const char *why);
/* Write a tab and one field (escaped), a number, a device's 5 fields (name, major, minor,
 * port, present), a GID entry's 4 (index, 32 hex digits, type, net device). */
void snap_str(FILE *f, const char *s);
void snap_num(FILE *f, long long v);
void snap_chardev(FILE *f, const struct orh_chardev *c);
void snap_gid(FILE *f, const struct orh_gid *g);
/* Split a line (no newline) into at most max fields, unescaped in place; their number. */
int snap_split(char *line, char **fv, int max);
/* Field i of fv[0..nf): a string that fits, an integer in [min, max], a device from i on,
 * a GID entry from i on. */
int snap_get_str(struct snap_rd *rd, char **fv, int nf, int i, char *out, size_t size);
int snap_get_num(struct snap_rd *rd, char **fv, int nf, int i, long long min, long long max,
		 long long *out);
int snap_get_chardev(struct snap_rd *rd, char **fv, int nf, int i, struct orh_chardev *c);
int snap_get_gid(struct snap_rd *rd, char **fv, int nf, int i, struct orh_gid *g);
/* Fill g->ipv4_mapped and g->ipv4 from g->raw (sysfs.c). */
void disc_gid_fill_ipv4(struct orh_gid *g);
/* What the source has read: "src", "sgid" and "swarn" lines, the tracked ports in slot
 * order; and back, a line at a time, into a source opened for the sysroot. */
void disc_gids_snapshot(const struct orh_gid_source *src, FILE *f);
size_t disc_gids_count(const struct orh_gid_source *src); /* the ports it tracks */
int disc_gids_restore_line(struct orh_gid_source *src, struct snap_rd *rd, char **fv, int nf);

/* discover_chardev.c: the uverbs entries, umad/issm when opts->mad, and rdma_cm, of the
 * devices already in the inventory. rootname prefixes the paths in warnings. */
void disc_scan_chardevs(struct scan *sc, const char *rootname);

#endif
