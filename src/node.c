/* SPDX-License-Identifier: Apache-2.0 */
#include "orh/node.h"

int orh_node_plan(const struct orh_config *cfg, const char *sysroot, enum orh_gid_scan scan,
		  const struct orh_container_facts *facts, struct orh_inventory *inv,
		  struct orh_plan *plan, struct orh_err *err)
{
	struct orh_discover_opts opts = {
		.sysroot = sysroot,
		.gid_scan = scan,
		.want = { .family = cfg->gid_family, .roce_version = cfg->roce_version },
		/* detect shows the management devices; a plan reads them only to give them */
		.mad = scan == ORH_GIDS_ALL || cfg->management_devices,
	};
	int r;

	if (facts && facts->n_addrs) {
		opts.want.addrs = facts->addrs;
		opts.want.n_addrs = facts->n_addrs;
	}
	r = orh_discover(&opts, inv, err);
	if (r < 0)
		return r;
	r = orh_plan_build(cfg, inv, facts, plan, err);
	if (r < 0)
		orh_inventory_free(inv);
	return r;
}
