/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One parser for the command lines of oci-rdma-hook's own commands (include/orh/base/args.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orh/base/args.h"
#include "orh/base/log.h"
#include "orh/base/util.h"

/* The option arg names (with its "=VALUE" where it has one), else NULL. */
static const struct orh_opt *find(const char *arg, const struct orh_opt *opts, size_t n,
				  const char **inline_value)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(opts[i].name);

		if (strncmp(arg, opts[i].name, len))
			continue;
		if (arg[len] == '\0') {
			*inline_value = NULL;
			return &opts[i];
		}
		if (arg[len] == '=' && opts[i].value) {
			*inline_value = arg + len + 1;
			return &opts[i];
		}
	}
	return NULL;
}

static int bad(const struct orh_args *a, const char *arg)
{
	_cleanup_free_ char *text = orh_text_escape(arg);

	fprintf(stderr, "oci-rdma-hook: %s%sunknown or incomplete argument '%s'\n%s",
		a->cmd ? a->cmd : "", a->cmd ? ": " : "", text, a->usage ? a->usage : "");
	return ORH_EXIT_USAGE;
}

int orh_args_parse(const struct orh_args *a, int argc, char **argv, int first,
		   const struct orh_opt *opts, size_t n, int *next)
{
	int i = first;

	for (; i < argc; i++) {
		const char *arg = argv[i], *v = NULL;
		const struct orh_opt *o;

		if (a->usage && !strcmp(arg, "--help")) {
			fputs(a->usage, stdout);
			return -1;
		}
		if (arg[0] != '-' || arg[1] == '\0') {
			if (a->stop)
				break;
			if (!a->positional || *a->positional)
				return bad(a, arg);
			*a->positional = arg;
			continue;
		}
		o = find(arg, opts, n, &v);
		if (!o)
			return bad(a, arg);
		if (o->flag) {
			*o->flag = true;
			continue;
		}
		if (!v && i + 1 >= argc)
			return bad(a, arg);
		*o->value = v ? v : argv[++i];
	}
	if (next)
		*next = i;
	return 0;
}
