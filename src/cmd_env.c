/* SPDX-License-Identifier: Apache-2.0 */
/* oci-rdma-hook env [--explain]: exactly the NAME=VALUE lines a container gets. */
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "orh/commands.h"
#include "orh/node.h"

int orh_cmd_env(struct orh_ctx *ctx, int argc, char **argv)
{
	struct orh_inventory inv;
	struct orh_plan plan;
	struct orh_err err = { 0 };
	bool explain = false;

	const struct orh_flag flags[] = { { "--explain", &explain } };

	if (orh_parse_flags(argc, argv, flags, ORH_ARRAY_SIZE(flags)))
		return ORH_EXIT_USAGE;
	if (orh_node_plan(&ctx->cfg, ctx->sysroot, ORH_GIDS_PLAN, NULL, &inv, &plan, &err) < 0) {
		orh_log(LOG_ERR, "%s", err.msg);
		return ORH_EXIT_FAIL;
	}
	for (size_t i = 0; i < plan.n_env; i++)
		printf("%s=%s\n", plan.env[i].name, plan.env[i].value);
	if (explain) {
		fprintf(stderr, "# config: %s\n", ctx->cfg.path ? ctx->cfg.path : "built-in defaults");
		fprintf(stderr, "# preset: %s\n", orh_preset_name(plan.preset));
		for (size_t i = 0; i < plan.n_env; i++)
			fprintf(stderr, "%s=%s  <- %s\n", plan.env[i].name, plan.env[i].value,
				plan.env[i].source);
		for (size_t i = 0; i < plan.n_ports; i++)
			fprintf(stderr, "# %s:%u %s: %s\n", plan.ports[i].dev, plan.ports[i].port,
				plan.ports[i].used ? "used" : "left out", plan.ports[i].reason);
		for (size_t i = 0; i < plan.n_nodes; i++)
			fprintf(stderr, "# device %s c %u:%u\n", plan.nodes[i].path, plan.nodes[i].major,
				plan.nodes[i].minor);
		if (plan.set_memlock)
			fprintf(stderr, "# memlock: %s\n",
				plan.memlock == ORH_MEMLOCK_UNLIMITED ? "unlimited" : "set");
		if (orh_plan_is_empty(&plan))
			fprintf(stderr, "# no usable RDMA port: containers are left unchanged\n");
		orh_print_warnings(&inv, &plan);
	}
	orh_plan_free(&plan);
	orh_inventory_free(&inv);
	return ORH_EXIT_OK;
}
