/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading the node (src/node/node.c): the one step that reads what a decision is made
 * from (orh/decide/decide.h): the RDMA devices, the GPUs where a GPU subset is possible, what
 * GPUDirect RDMA needs for a container that holds GPUs; from the snapshot of an earlier
 * decision for the same container (the runtime shim's, orh/node/snapshot.h), else through the
 * sysroot. Reads only: the caller hands in what to read and the rules' tests discovery
 * asks (orh_discover_opts).
 */
#ifndef ORH_NODE_NODE_H
#define ORH_NODE_NODE_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "orh/node/gpu.h"
#include "orh/node/inventory.h"
#include "orh/base/util.h"

/* The node as read for no container in particular, kept for the next decisions (the NRI
 * plugin's: src/cmd/nri_node.c), with what it was read with: a plan-mode read whose
 * options are these restores it instead of reading the node; any other reads. Its GID
 * entries are those its planner read; the others are read when a decision asks. */
struct orh_node_cache {
	json_t *snap;                       /* orh/node/snapshot.h's */
	const char *sysroot;
	struct orh_gid_want want;
	bool mad, topology;
	double read_ms;                     /* orh_now_ms() when it was read */
	/* the directory sysroot named then (a link re-pointed since names another tree) */
	dev_t root_dev;
	ino_t root_ino;
};

struct orh_node_read_opts {
	struct orh_discover_opts discover;  /* its sysroot is every read's */
	bool gpus;                          /* read the GPUs (the driver's) */
	bool gpudirect;                     /* read what GPUDirect RDMA needs */
	/* the node as an earlier decision for this container read it, named `snapshot_what`
	 * in errors; NULL: read through the sysroot. Used in plan mode only; one that cannot
	 * be restored is a warning (the node's warnings), and the node is read. */
	const json_t *snapshot;
	const char *snapshot_what;
	/* without a snapshot: the node kept for any container, or NULL */
	const struct orh_node_cache *cache;
};

struct orh_node {
	struct orh_inventory inv;           /* when have_inv */
	bool have_inv;
	struct orh_gpus gpus;               /* when have_gpus */
	bool have_gpus;
	char *gpus_error;                   /* why the GPUs were not read, or NULL */
	struct orh_gpudirect gpudirect;     /* when have_gpudirect */
	bool have_gpudirect;
	bool from_snapshot;                 /* inv (and the GPUs, where it held them) came
					     * from opts->snapshot */
	bool from_cache;                    /* inv came from opts->cache */
	struct orh_strv warnings;           /* the snapshot's that was not used */
};

/* Read the node into *n (zeroed first; free it with orh_node_free() whatever the
 * result). -errno only when discovery fails (the sysroot cannot be opened). */
int orh_node_read(const struct orh_node_read_opts *opts, struct orh_node *n,
		  struct orh_err *err);
void orh_node_free(struct orh_node *n);

#endif
