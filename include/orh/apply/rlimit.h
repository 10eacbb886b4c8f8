/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RLIMIT_MEMLOCK of the container's process (src/apply/rlimit.c).
 */
#ifndef ORH_APPLY_RLIMIT_H
#define ORH_APPLY_RLIMIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/apply/target.h"
#include "orh/base/util.h"

enum orh_memlock_outcome {
	ORH_MEMLOCK_RAISED = 0,   /* soft and hard raised to the plan's limit (a higher one kept) */
	ORH_MEMLOCK_SOFT_ONLY,    /* hard limit could not be raised (EPERM): soft raised to the
				   * plan's limit, at most to the hard one */
	ORH_MEMLOCK_ALREADY,      /* the limits were already at least the plan's */
};

struct orh_memlock_result {
	enum orh_memlock_outcome outcome;
	uint64_t soft;      /* the limits now (RLIM_INFINITY as UINT64_MAX) */
	uint64_t hard;
};

/* Raise RLIMIT_MEMLOCK of the target to limit (ORH_MEMLOCK_UNLIMITED = infinity).
 * Never lowers a limit. prlimit() takes a number: the target is checked to be still
 * there after each call. */
int orh_memlock_apply(const struct orh_target *t, uint64_t limit,
		      struct orh_memlock_result *res, struct orh_err *err);

#endif
