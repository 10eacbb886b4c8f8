/* SPDX-License-Identifier: Apache-2.0 */
/* The commands' one argument parser (src/base/args.c). No root needed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "orh/base/args.h"
#include "orh/base/log.h"
#include "orh/base/util.h"

struct parsed {
	const char *engine, *root, *id;
	bool undo;
};

static int parse(struct parsed *p, int argc, char **argv, bool positional)
{
	const struct orh_opt opts[] = {
		{ "--engine", &p->engine, NULL }, { "--root", &p->root, NULL },
		{ "--undo", NULL, &p->undo },
	};
	const struct orh_args a = { .cmd = "t", .usage = "usage: t\n",
				    .positional = positional ? &p->id : NULL };

	memset(p, 0, sizeof(*p));
	return orh_args_parse(&a, argc, argv, 1, opts, ORH_ARRAY_SIZE(opts), NULL);
}

Test(args, values_flags_and_one_positional)
{
	char *argv[] = { "t", "--engine", "containerd", "--root=/host", "--undo", "job+1" };
	struct parsed p;

	cr_assert_eq(parse(&p, 6, argv, true), 0);
	cr_assert_str_eq(p.engine, "containerd");
	cr_assert_str_eq(p.root, "/host");
	cr_assert(p.undo);
	cr_assert_str_eq(p.id, "job+1");
}

Test(args, unknown_incomplete_and_extra_arguments_are_refused)
{
	char *unknown[] = { "t", "--nope" };
	char *incomplete[] = { "t", "--engine" };
	char *flag_value[] = { "t", "--undo=yes" };
	char *positional[] = { "t", "x" };
	char *two[] = { "t", "x", "y" };
	char *prefix[] = { "t", "--engines=x" };
	struct parsed p;

	cr_assert_eq(parse(&p, 2, unknown, true), ORH_EXIT_USAGE);
	cr_assert_eq(parse(&p, 2, incomplete, true), ORH_EXIT_USAGE);
	cr_assert_eq(parse(&p, 2, flag_value, true), ORH_EXIT_USAGE);
	cr_assert_eq(parse(&p, 2, positional, false), ORH_EXIT_USAGE);
	cr_assert_eq(parse(&p, 3, two, true), ORH_EXIT_USAGE);
	cr_assert_eq(parse(&p, 2, prefix, true), ORH_EXIT_USAGE);
}

Test(args, help_and_stop)
{
	char *help[] = { "t", "--help" };
	char *cmd[] = { "t", "--root", "/r", "configure", "--undo" };
	const char *root = NULL;
	const struct orh_opt opts[] = { { "--root", &root, NULL } };
	const struct orh_args stop = { .stop = true };
	struct parsed p;
	int next = 0;

	cr_assert_eq(parse(&p, 2, help, false), -1);
	cr_assert_eq(orh_args_parse(&stop, 5, cmd, 1, opts, 1, &next), 0);
	cr_assert_eq(next, 3);
	cr_assert_str_eq(root, "/r");
}
