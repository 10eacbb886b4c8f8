/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command lines of oci-rdma-hook's own commands (src/base/args.c): one parser, driven by
 * a table of options. "--name VALUE" and "--name=VALUE" for an option with a value, "--name"
 * for a flag. (The runtime shim reads runc's command line, another program's grammar:
 * src/cmd/cmd_runtime.c.)
 */
#ifndef ORH_BASE_ARGS_H
#define ORH_BASE_ARGS_H

#include <stdbool.h>
#include <stddef.h>

struct orh_opt {
	const char *name;    /* "--engine" */
	const char **value;  /* an option with a value: where it goes; NULL for a flag */
	bool *flag;          /* a flag: set when given; NULL for an option with a value */
};

struct orh_args {
	const char *cmd;          /* in messages: "oci-rdma-hook: CMD: ..."; NULL: none */
	const char *usage;        /* printed after an error, and to stdout for --help; NULL:
				   * --help is not handled here */
	const char **positional;  /* where the one argument that is no option goes; NULL:
				   * none is allowed */
	bool stop;                /* stop at the first argument that is no option (*next) */
};

/* Parse argv[first..] against opts. 0 when done (with stop, *next is the first argument
 * left), -1 after --help printed the usage, ORH_EXIT_USAGE after saying on stderr which
 * argument is unknown or incomplete (the argument escaped, then the usage). */
int orh_args_parse(const struct orh_args *a, int argc, char **argv, int first,
		   const struct orh_opt *opts, size_t n, int *next);

#endif
