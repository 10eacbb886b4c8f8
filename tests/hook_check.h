/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A check test_edit.c and test_shimserve.c share: the hook a spec edit registered runs this
 * test binary's own path (orh_self_hook) with the context's --config and --sysroot.
 */
#ifndef ORH_HOOK_CHECK_H
#define ORH_HOOK_CHECK_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <unistd.h>

#include "orh/cmd/commands.h"

/* The last hook of `stage` in spec runs this binary's `what` with --config conf and
 * --sysroot sysroot. */
static inline void check_self_hook(const json_t *spec, const char *stage, const char *what,
				   const char *conf, const char *sysroot)
{
	const json_t *hooks = json_object_get(json_object_get(spec, "hooks"), stage);
	const json_t *h = json_array_get(hooks, json_array_size(hooks) - 1);
	const json_t *args = json_object_get(h, "args");
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	cr_assert_gt(n, 0);
	self[n] = '\0';
	cr_assert_not_null(h, "no %s hook", stage);
	cr_assert_str_eq(json_string_value(json_object_get(h, "path")), self);
	cr_assert_eq(json_array_size(args), 6);
	cr_assert_str_eq(json_string_value(json_array_get(args, 0)), ORH_HOOK_NAME);
	cr_assert_str_eq(json_string_value(json_array_get(args, 1)), "--config");
	cr_assert_str_eq(json_string_value(json_array_get(args, 2)), conf);
	cr_assert_str_eq(json_string_value(json_array_get(args, 3)), "--sysroot");
	cr_assert_str_eq(json_string_value(json_array_get(args, 4)), sysroot);
	cr_assert_str_eq(json_string_value(json_array_get(args, 5)), what);
}

#endif
