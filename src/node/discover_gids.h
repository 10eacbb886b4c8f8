/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plan mode's GID source (discover_gids.c; see orh_inventory_gids): discover.c opens it and
 * tracks ports in it, snapshot.c writes and restores its part of a node snapshot.
 */
#ifndef ORH_NODE_DISCOVER_GIDS_H
#define ORH_NODE_DISCOVER_GIDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "orh/node/inventory.h"
#include "snapline.h"
#include "sysfs.h"

struct orh_gid_source *disc_gids_open(const struct orh_discover_opts *opts, int root);
struct orh_readbatch *disc_gids_batch(struct orh_gid_source *src);
/* Is devfd the directory the source kept open last (the scan must not close it)? */
bool disc_gids_keeps(const struct orh_gid_source *src, int devfd);
/* Record how to read port p's entries later (sets p->gid_slot). */
void disc_gids_track(struct scan *sc, struct orh_port *p, int devfd, const char *devwhere);
/* A tracked RoCE port's net device: the ndev of its first used entry. */
void disc_gids_netdev(struct scan *sc, struct orh_port *p, int devfd);
void disc_gids_free(struct orh_gid_source *src);

/* What the source has read: "src", "sgid" and "swarn" lines, the tracked ports in slot
 * order; and back, a line at a time, into a source opened for the sysroot. */
void disc_gids_snapshot(const struct orh_gid_source *src, struct orh_buf *f);
size_t disc_gids_count(const struct orh_gid_source *src); /* the ports it tracks */
int disc_gids_restore_line(struct orh_gid_source *src, struct snap_rd *rd, char **fv, int nf);

#endif
