/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every discovery file reads sysfs through (sysfs.c): the state of one scan, and the
 * helpers that read a value, list a directory and warn. Internal to discovery;
 * include/orh/node/inventory.h is its interface.
 */
#ifndef ORH_NODE_SYSFS_H
#define ORH_NODE_SYSFS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "orh/node/inventory.h"

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

/* Fill g->ipv4_mapped and g->ipv4 from g->raw (snapline.c restores entries with it). */
void disc_gid_fill_ipv4(struct orh_gid *g);

#endif
