/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Subcommands. main() parses the global options, loads the config and calls one of
 * these with the remaining arguments (argv[0] is the command name); `install` is
 * orh_cmd_install() (orh/cmd/install.h).
 * Each returns the process exit code (orh/base/log.h): 0 success, 1 runtime failure, 2
 * usage/config error.
 */
#ifndef ORH_CMD_COMMANDS_H
#define ORH_CMD_COMMANDS_H

#include <jansson.h>
#include <sys/types.h>

#include "orh/node/config.h"
#include "orh/cmd/ctx.h"
#include "orh/node/inventory.h"
#include "orh/base/log.h"
#include "orh/decide/plan.h"

int orh_cmd_detect(struct orh_ctx *ctx, int argc, char **argv);
int orh_cmd_env(struct orh_ctx *ctx, int argc, char **argv);
/* The records of the containers served (orh/apply/record.h): a table, or one. */
int orh_cmd_inspect(struct orh_ctx *ctx, int argc, char **argv);
/* Live hook stages: createRuntime, prestart, poststop; nccl-conf (the hook the spec edit
 * registers: only /etc/nccl.conf); cdi-createRuntime (the hook a CDI spec carries: the
 * memlock step and /etc/nccl.conf) and cdi-memlock (older CDI specs: the memlock step).
 * argv[0] is the stage. */
int orh_cmd_hook(struct orh_ctx *ctx, int argc, char **argv);
/* The nccl-conf stage of container id (its process pid, created and not started; spec as
 * the NRI plugin reads it from the runtime's StartContainer request), run by the plugin
 * instead of an OCI hook; token: the one its CreateContainer answer bound node.json to.
 * ORH_EXIT_OK, or ORH_EXIT_FAIL with why (the container is to fail: on_error = fail). */
int orh_hook_at_start(struct orh_ctx *ctx, const char *id, pid_t pid, json_t *spec,
		      const char *token, char *why, size_t size);
int orh_cmd_precreate(struct orh_ctx *ctx, int argc, char **argv);
/* Runtime shim: argv holds the runtime's arguments (argv[0] = "runtime"). */
int orh_cmd_runtime(struct orh_ctx *ctx, int argc, char **argv);
int orh_cmd_cdi(struct orh_ctx *ctx, int argc, char **argv);
/* precreate's refusal (src/cmd/cmd_refuse.c), for a driver about to fail the container:
 * write the spec `in` with the refusing hook (this binary's `refuse` stage, `reason`) to
 * stdout and return ORH_EXIT_OK, so that the runtime fails the container with the reason
 * in its error; when that cannot be done, log why and return ORH_EXIT_FAIL (podman then
 * fails it, with the exit status alone). */
int orh_precreate_refuse(const struct orh_ctx *ctx, const char *in, size_t in_len,
			 const char *reason);
/* `oci-rdma-hook refuse REASON`: the hook precreate puts first in a container it refuses:
 * argv[1] to stderr, exit 1. */
int orh_cmd_refuse(struct orh_ctx *ctx, int argc, char **argv);
/* An NRI plugin (src/cmd/cmd_nri.c): serves until SIGTERM or SIGINT. */
int orh_cmd_nri(struct orh_ctx *ctx, int argc, char **argv);
/* Register the hook with a container engine (src/cmd/configure/). */
int orh_cmd_configure(struct orh_ctx *ctx, int argc, char **argv);

#endif
