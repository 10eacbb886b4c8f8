/* SPDX-License-Identifier: Apache-2.0 */
/* detect --verbs: what rdma-core's libibverbs reports, compared with sysfs. */
#ifndef ORH_VERBS_H
#define ORH_VERBS_H

#include <jansson.h>
#include <stdio.h>

#include "orh/inventory.h"

json_t *orh_verbs_compare_json(const struct orh_inventory *inv);
void orh_verbs_compare_print(const struct orh_inventory *inv, FILE *out);

#endif
