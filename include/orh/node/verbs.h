/* SPDX-License-Identifier: Apache-2.0 */
/*
 * detect --verbs: what rdma-core's libibverbs reports, compared with sysfs.
 *
 * Only oci-rdma-hook-verbs links libibverbs (src/node/verbs.c built with ORH_HAVE_VERBS): the
 * hook runs at every container start, and libibverbs brings libnl, whose constructors
 * would run there every time, before the hook confines itself. The hook's detect --verbs
 * executes that build (cmd_detect.c).
 */
#ifndef ORH_NODE_VERBS_H
#define ORH_NODE_VERBS_H

#include <jansson.h>
#include <stdio.h>

#include "orh/node/inventory.h"

json_t *orh_verbs_compare_json(const struct orh_inventory *inv);
void orh_verbs_compare_print(const struct orh_inventory *inv, FILE *out);
/* Is libibverbs linked into this binary? */
bool orh_verbs_linked(void);

#endif
