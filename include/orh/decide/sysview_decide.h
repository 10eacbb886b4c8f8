/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which entries of the RDMA classes of sysfs a container given some of the node's devices
 * sees (src/decide/sysview_decide.c: pure). orh/apply/sysview.h tells the whole of the container's view.
 */
#ifndef ORH_DECIDE_SYSVIEW_DECIDE_H
#define ORH_DECIDE_SYSVIEW_DECIDE_H

#include <stdbool.h>

#include "orh/node/inventory.h"
#include "orh/decide/plan.h"
#include "orh/node/sysclass.h"

/* Which entries the container sees: those of the devices the plan gives it (the owners of
 * its device nodes). Sets keep, subset, the counts and id. Reads nothing. */
void orh_sysview_decide(struct orh_sysview *v, const struct orh_plan *plan);
/* Whether a view may be needed before the classes are read: the plan gives nodes, and
 * some device of the inventory owns none of them. false: the container is given every
 * device the node has (or nothing) and sees the host's view, with nothing read. */
bool orh_sysview_may_subset(const struct orh_plan *plan, const struct orh_inventory *inv);
/* Is s a view's id: 16 lowercase hex digits? */
bool orh_sysview_id_valid(const char *s);

#endif
