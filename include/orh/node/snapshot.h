/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node as one decision read it (src/node/snapshot.c): the inventory in plan mode,
 * the GID entries its planner read, and the GPUs. The runtime shim keeps it for the
 * container's nccl-conf stage (orh/apply/handoff.h), so that the node is read once per
 * container. Restored, it answers the planner as the node did: an entry the shim's
 * planner read comes back with the warnings its read gave; one it did not read is read
 * from the sysroot then (a container network the shim could not see yet may ask for
 * others).
 */
#ifndef ORH_NODE_SNAPSHOT_H
#define ORH_NODE_SNAPSHOT_H

#include <jansson.h>
#include <stdbool.h>

#include "orh/node/gpu.h"
#include "orh/node/inventory.h"
#include "orh/base/util.h"

#define ORH_SNAPSHOT_VERSION 1

/* The snapshot of a plan-mode inventory after planning, with the GPUs when they were
 * read (gpus NULL: not read; gpus_error: why they could not be, or NULL). */
json_t *orh_snapshot_build(const struct orh_inventory *inv, const struct orh_gpus *gpus,
			   const char *gpus_error);

/* The node of a snapshot: *inv as orh_discover() would have filled it in plan mode with
 * opts (whose sysroot later GID reads go through), *gpus and *gpus_read when the
 * snapshot holds the GPUs, *gpus_error (owned, or NULL). `what` names the snapshot in
 * errors, which also name the field. On failure nothing is left to free. */
int orh_snapshot_restore(const json_t *snap, const char *what,
			 const struct orh_discover_opts *opts, struct orh_inventory *inv,
			 struct orh_gpus *gpus, bool *gpus_read, char **gpus_error,
			 struct orh_err *err);

#endif
