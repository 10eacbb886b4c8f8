/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Subcommands. main() parses the global options, loads the config and calls one of
 * these with the remaining arguments (argv[0] is the command name); `refuse` is
 * orh_cmd_refuse() (orh/refuse.h), `install` orh_cmd_install() (orh/install.h).
 * Each returns the process exit code (orh/log.h): 0 success, 1 runtime failure, 2
 * usage/config error.
 */
#ifndef ORH_COMMANDS_H
#define ORH_COMMANDS_H

#include <jansson.h>

#include "orh/config.h"
#include "orh/ctx.h"
#include "orh/inventory.h"
#include "orh/log.h"
#include "orh/plan.h"

int orh_cmd_detect(struct orh_ctx *ctx, int argc, char **argv);
int orh_cmd_env(struct orh_ctx *ctx, int argc, char **argv);
/* The records of the containers served (orh/record.h): a table, or one. */
int orh_cmd_inspect(struct orh_ctx *ctx, int argc, char **argv);
/* Live hook stages: createRuntime, prestart, poststop; nccl-conf (the hook the spec edit
 * registers: only /etc/nccl.conf); cdi-createRuntime (the hook a CDI spec carries: the
 * memlock step and /etc/nccl.conf) and cdi-memlock (older CDI specs: the memlock step).
 * argv[0] is the stage. */
int orh_cmd_hook(struct orh_ctx *ctx, int argc, char **argv);
int orh_cmd_precreate(struct orh_ctx *ctx, int argc, char **argv);
/* Runtime shim: argv holds the runtime's arguments (argv[0] = "runtime"). */
int orh_cmd_runtime(struct orh_ctx *ctx, int argc, char **argv);
int orh_cmd_cdi(struct orh_ctx *ctx, int argc, char **argv);
/* Register the hook with a container engine (src/cmd/configure/). */
int orh_cmd_configure(struct orh_ctx *ctx, int argc, char **argv);

#endif
