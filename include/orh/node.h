/* SPDX-License-Identifier: Apache-2.0 */
/* Discover the node and plan for one container: the step every command shares. */
#ifndef ORH_NODE_H
#define ORH_NODE_H

#include "orh/config.h"
#include "orh/inventory.h"
#include "orh/plan.h"

/* Discover the node under `sysroot` (ORH_GIDS_PLAN reads only what the plan needs;
 * ORH_GIDS_ALL everything, for detect) and build the plan for a container described by
 * `facts` (NULL: the host network). On success the caller frees both inv and plan; on
 * failure neither needs freeing. */
int orh_node_plan(const struct orh_config *cfg, const char *sysroot, enum orh_gid_scan scan,
		  const struct orh_container_facts *facts, struct orh_inventory *inv,
		  struct orh_plan *plan, struct orh_err *err);

#endif
