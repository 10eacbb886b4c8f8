/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device cgroup grants for the plan's nodes, v1 and v2 (src/apply/cgroup.c).
 */
#ifndef ORH_APPLY_CGROUP_H
#define ORH_APPLY_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "orh/decide/plan.h"
#include "orh/apply/target.h"
#include "orh/base/util.h"

struct orh_cgroup_result {
	bool v1;            /* devices.allow written */
	unsigned v2_progs;  /* BPF device programs replaced in the v2 cgroup */
	bool v2_open;       /* v2 cgroup has no device program: nothing to grant */
};

/* Allow "c MAJ:MIN rwm" for each node to the cgroups of the target (its
 * /proc/<pid>/cgroup): cgroup v1 devices controller when mounted, and the cgroup v2 BPF
 * device programs when any. */
int orh_cgroup_grant(const struct orh_target *t, const struct orh_devnode *nodes, size_t n,
		     struct orh_cgroup_result *res, struct orh_err *err);
/* The v2 part on an open cgroup directory fd (tests). *replaced = programs swapped. */
int orh_cgroup_v2_grant_fd(int cgfd, const struct orh_devnode *nodes, size_t n,
			   unsigned *replaced, bool *open, struct orh_err *err);

#endif
