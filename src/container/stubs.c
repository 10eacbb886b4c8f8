/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholders replaced by the container modules. */
#include <stdio.h>

#include "orh/commands.h"

static int not_built(const char *what)
{
	fprintf(stderr, "oci-rdma-hook: %s: not available in this build\n", what);
	return ORH_EXIT_FAIL;
}

int orh_cmd_hook(struct orh_ctx *ctx, int argc, char **argv) { return not_built("hook"); }
int orh_cmd_precreate(struct orh_ctx *ctx, int argc, char **argv) { return not_built("precreate"); }
int orh_cmd_runtime(struct orh_ctx *ctx, int argc, char **argv) { return not_built("runtime"); }
int orh_cmd_cdi(struct orh_ctx *ctx, int argc, char **argv) { return not_built("cdi"); }
