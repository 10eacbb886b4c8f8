/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RLIMIT_MEMLOCK of the container's init. The runtime applies only the rlimit types the
 * spec lists, after the hooks ran, so a prlimit() on a type the spec leaves out survives
 * into the workload; when the spec lists RLIMIT_MEMLOCK, the user's value wins: the
 * decision sets no memlock (orh_decision.memlock) and the caller does not call us.
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "orh/apply/rlimit.h"
#include "orh/apply/target.h"
#include "orh/node/config.h"

static uint64_t to_u64(rlim_t v)
{
	return v == RLIM_INFINITY ? UINT64_MAX : (uint64_t)v;
}

/* prlimit() on the target's number; then the target must still be there, or the call
 * may have been another process's (the error says so). */
static int target_prlimit(const struct orh_target *t, const struct rlimit *set,
			  struct rlimit *get, const char *doing, struct orh_err *err)
{
	int r = prlimit(t->pid, RLIMIT_MEMLOCK, set, get);
	int e = errno;
	int alive = orh_target_alive(t, doing, err);

	if (alive < 0)
		return alive;
	if (r < 0)
		return orh_fail_errno(err, e, "%s of pid %d", doing, (int)t->pid);
	return 0;
}

int orh_memlock_apply(const struct orh_target *t, uint64_t limit,
		      struct orh_memlock_result *res, struct orh_err *err)
{
	rlim_t want = limit == ORH_MEMLOCK_UNLIMITED ? RLIM_INFINITY : (rlim_t)limit;
	struct rlimit cur, next;
	int r;

	*res = (struct orh_memlock_result){ 0 };
	r = target_prlimit(t, NULL, &cur, "reading RLIMIT_MEMLOCK", err);
	if (r < 0)
		return r;
	/* never lower a limit (RLIM_INFINITY is the largest rlim_t) */
	next.rlim_cur = cur.rlim_cur > want ? cur.rlim_cur : want;
	next.rlim_max = cur.rlim_max > want ? cur.rlim_max : want;
	if (next.rlim_cur == cur.rlim_cur && next.rlim_max == cur.rlim_max) {
		res->outcome = ORH_MEMLOCK_ALREADY;
		goto done;
	}
	r = target_prlimit(t, &next, NULL, "setting RLIMIT_MEMLOCK", err);
	if (r == 0) {
		res->outcome = ORH_MEMLOCK_RAISED;
		cur = next;
		goto done;
	}
	if (r != -EPERM)
		return r;
	/* no CAP_SYS_RESOURCE: the soft limit can still go up to the hard one */
	next.rlim_max = cur.rlim_max;
	next.rlim_cur = want < cur.rlim_max ? want : cur.rlim_max;
	if (next.rlim_cur < cur.rlim_cur)
		next.rlim_cur = cur.rlim_cur;
	if (next.rlim_cur != cur.rlim_cur) {
		r = target_prlimit(t, &next, NULL, "raising the soft RLIMIT_MEMLOCK", err);
		if (r < 0)
			return r;
	}
	cur = next;
	res->outcome = ORH_MEMLOCK_SOFT_ONLY;
done:
	res->soft = to_u64(cur.rlim_cur);
	res->hard = to_u64(cur.rlim_max);
	return 0;
}
