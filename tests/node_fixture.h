/* SPDX-License-Identifier: Apache-2.0 */
/* A sample node of tests/nodes written by tests/mknode.py into /dev/shm, for the unit
 * tests that discover through a sysroot (test_discover.c, test_gpu.c). */
#ifndef ORH_TEST_NODE_FIXTURE_H
#define ORH_TEST_NODE_FIXTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* Write tests/nodes/<node>.json into a fresh directory /dev/shm/<prefix>-XXXXXX (root). */
static inline void fixture_make_node(char *root, size_t size, const char *prefix,
				     const char *node)
{
	const char *src = getenv("ORH_SRCDIR");
	char cmd[1024];

	cr_assert_not_null(src, "ORH_SRCDIR is not set (run through meson test)");
	snprintf(root, size, "/dev/shm/%s-XXXXXX", prefix);
	cr_assert_not_null(mkdtemp(root));
	snprintf(cmd, sizeof(cmd), "python3 %s/tests/mknode.py --force %s/tests/nodes/%s.json %s",
		 src, src, node, root);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

/* Remove what fixture_make_node wrote (nothing when root is empty). */
static inline void fixture_remove_node(const char *root)
{
	char cmd[512];

	if (!root[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", root);
}

#endif
