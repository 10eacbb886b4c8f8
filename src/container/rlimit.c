/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RLIMIT_MEMLOCK of the container's init. The runtime applies only the rlimit types the
 * spec lists, after the hooks ran, so a prlimit() on a type the spec leaves out survives
 * into the workload; when the spec lists RLIMIT_MEMLOCK, the user's value wins and the
 * caller does not call us.
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "orh/apply.h"
#include "orh/config.h"

bool orh_spec_has_rlimit(const json_t *spec, const char *type)
{
	const json_t *rl = json_object_get(json_object_get(spec, "process"), "rlimits");
	size_t i;
	const json_t *e;

	if (!json_is_array(rl))
		return false;
	json_array_foreach(rl, i, e) {
		const char *t = json_string_value(json_object_get(e, "type"));

		if (t && strcmp(t, type) == 0)
			return true;
	}
	return false;
}

static uint64_t to_u64(rlim_t v)
{
	return v == RLIM_INFINITY ? UINT64_MAX : (uint64_t)v;
}

int orh_memlock_apply(pid_t pid, uint64_t limit, struct orh_memlock_result *res,
		      struct orh_err *err)
{
	rlim_t want = limit == ORH_MEMLOCK_UNLIMITED ? RLIM_INFINITY : (rlim_t)limit;
	struct rlimit cur, next;

	*res = (struct orh_memlock_result){ 0 };
	if (prlimit(pid, RLIMIT_MEMLOCK, NULL, &cur) < 0)
		return orh_fail(err, errno, "reading RLIMIT_MEMLOCK of pid %d: %m", (int)pid);
	/* never lower a limit (RLIM_INFINITY is the largest rlim_t) */
	next.rlim_cur = cur.rlim_cur > want ? cur.rlim_cur : want;
	next.rlim_max = cur.rlim_max > want ? cur.rlim_max : want;
	if (next.rlim_cur == cur.rlim_cur && next.rlim_max == cur.rlim_max) {
		res->outcome = ORH_MEMLOCK_ALREADY;
		goto done;
	}
	if (prlimit(pid, RLIMIT_MEMLOCK, &next, NULL) == 0) {
		res->outcome = ORH_MEMLOCK_RAISED;
		cur = next;
		goto done;
	}
	if (errno != EPERM)
		return orh_fail(err, errno, "setting RLIMIT_MEMLOCK of pid %d: %m", (int)pid);
	/* no CAP_SYS_RESOURCE: the soft limit can still go up to the hard one */
	next.rlim_max = cur.rlim_max;
	next.rlim_cur = want < cur.rlim_max ? want : cur.rlim_max;
	if (next.rlim_cur < cur.rlim_cur)
		next.rlim_cur = cur.rlim_cur;
	if (next.rlim_cur != cur.rlim_cur && prlimit(pid, RLIMIT_MEMLOCK, &next, NULL) < 0)
		return orh_fail(err, errno, "raising the soft RLIMIT_MEMLOCK of pid %d: %m",
				(int)pid);
	cur = next;
	res->outcome = ORH_MEMLOCK_SOFT_ONLY;
done:
	res->soft = to_u64(cur.rlim_cur);
	res->hard = to_u64(cur.rlim_max);
	return 0;
}
