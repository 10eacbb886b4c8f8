/* SPDX-License-Identifier: Apache-2.0 */
/* The command line of `oci-rdma-hook install` (src/cmd/install_args.c): its options, read
 * and checked there, for the command (cmd_install.c), whose --after-pid finishes a kept
 * undo (install_finish.c). */
#ifndef ORH_CMD_INSTALL_ARGS_H
#define ORH_CMD_INSTALL_ARGS_H

#include <stdbool.h>

#include "orh/cmd/install.h"

/* In the installer's own filesystem: the DaemonSet mounts an emptyDir there. */
#define INST_READY_FILE "/run/oci-rdma-hook-installer/ready"
#define INST_READY_TIMEOUT 120
/* How long --after-pid waits for the process to exit. */
#define INST_AFTER_PID_WAIT_S 120
/* Then how long it leaves the engine to finish with the pod before it may restart it. */
#define INST_AFTER_PID_SETTLE_S 5

struct inst_opts {
	const char *root;        /* "" for / */
	const char *from;        /* where the image holds the files: "" for / */
	const char *engine;      /* NULL: found under root */
	const char *socket;      /* NULL: the engine's */
	const char *node_config; /* NULL: the image's */
	const char *ready_file;
	unsigned ready_timeout;  /* --once: how long the engine may take to load the handler */
	enum orh_inst_restart restart;
	struct orh_configure_req req;
	long after_pid;          /* --after-pid: 0 for none */
	bool once, uninstall, purge, probe;
};

/* Each restart mode's name, by its value (none for ORH_RESTART_DEFAULT). */
extern const char *const orh_inst_restart_names[4];

/* The mode named v in *m: NULL, or what is wrong. */
const char *orh_inst_parse_restart(const char *v, enum orh_inst_restart *m);
/* ORH_EXIT_OK, -1 after --help, or ORH_EXIT_USAGE (after saying why). */
int orh_inst_parse_args(int argc, char **argv, struct inst_opts *o);

#endif
