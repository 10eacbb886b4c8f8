/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Subcommands. main() parses the global options, loads the config and calls one of
 * these with the remaining arguments (argv[0] is the command name).
 * Each returns the process exit code: 0 success, 1 runtime failure, 2 usage/config error.
 */
#ifndef ORH_COMMANDS_H
#define ORH_COMMANDS_H

#include <jansson.h>

#include "orh/config.h"
#include "orh/inventory.h"
#include "orh/plan.h"

#define ORH_EXIT_OK 0
#define ORH_EXIT_FAIL 1
#define ORH_EXIT_USAGE 2

struct orh_ctx {
	struct orh_config cfg;
	const char *sysroot;     /* --sysroot, else cfg.sysroot, else "/" */
	const char *config_path; /* the config file used (may not exist) */
	bool config_explicit;    /* config_path was given (--config), not the default */
	const char *sysroot_opt; /* the --sysroot given, NULL when none */
	/* Container-path commands (hook stages, precreate, runtime) are started with a
	 * broken config too: they must then leave the container unchanged (log the
	 * error, exit 0 / pass the spec through / exec the runtime untouched). */
	bool config_failed;
	struct orh_err config_err;
	/* monotonic ms (orh_now_ms) at main's start, after the config, after the confinement
	 * (0: none): the record's first steps */
	double t_main, t_config, t_confined;
};

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
/* The hook precreate puts first in a container it refuses: argv[1] to stderr, exit 1. */
int orh_cmd_refuse(struct orh_ctx *ctx, int argc, char **argv);
/* Runtime shim: argv holds the runtime's arguments (argv[0] = "runtime"). */
int orh_cmd_runtime(struct orh_ctx *ctx, int argc, char **argv);
int orh_cmd_cdi(struct orh_ctx *ctx, int argc, char **argv);
/* Register the hook with a container engine (src/cmd/configure/). */
int orh_cmd_configure(struct orh_ctx *ctx, int argc, char **argv);

/* An OCI hook entry {path, args, timeout} that runs this binary's `stage` with the
 * --config and --sysroot this process was given (absolute). */
int orh_self_hook(const struct orh_ctx *ctx, const char *stage, json_t **out,
		  struct orh_err *err);

/* A subcommand's boolean flags: every argv[1..] must be one of flags[].name, which sets
 * its *value. Anything else is reported as "<argv[0]>: unknown argument" and gives
 * ORH_EXIT_USAGE; otherwise 0. */
struct orh_flag {
	const char *name;
	bool *value;
};
int orh_parse_flags(int argc, char **argv, const struct orh_flag *flags, size_t n);

/* Logging for command drivers (src/base/log.c): stderr and, for the container paths (hook
 * stages, precreate, the runtime shim), syslog. One line a message: its control
 * characters are escaped (orh_text_escape), whatever their source. */
void orh_log_open(const char *ident, bool use_syslog);
void orh_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
