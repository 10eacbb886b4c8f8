/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The context main() hands each command: the node config it loaded and where the node is
 * read (--sysroot). The appliers that register a hook of this very binary read it too:
 * the hook entry carries the same --config and --sysroot (src/cmd/selfhook.c).
 */
#ifndef ORH_CMD_CTX_H
#define ORH_CMD_CTX_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "orh/node/config.h"
#include "orh/base/util.h"

struct orh_node_cache;

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
	/* the runtime shim, for the runtime cache of its fast path (orh/cmd/shimfast.h): the
	 * config file read, its stat the same before and after (config_st), or not there
	 * before nor after, or neither for sure */
	enum { ORH_CONFIG_UNSURE, ORH_CONFIG_READ, ORH_CONFIG_ABSENT } config_seen;
	struct stat config_st;
	/* monotonic ms (orh_now_ms) at main's start, after the config, after the confinement
	 * (0: none): the record's first steps */
	double t_main, t_config, t_confined;
	/* the NRI plugin's node read for no container in particular (src/cmd/nri_node.c),
	 * which its decisions use where they would read the node alike; NULL elsewhere */
	const struct orh_node_cache *node_cache;
};

/* An OCI hook entry {path, args, timeout} that runs this binary's `stage` with the
 * --config and --sysroot this process was given (absolute). */
int orh_self_hook(const struct orh_ctx *ctx, const char *stage, json_t **out,
		  struct orh_err *err);

#endif
