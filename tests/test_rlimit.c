/* SPDX-License-Identifier: Apache-2.0 */
/*
 * orh_memlock_apply (src/apply/rlimit.c) on a child process that stands for the container,
 * started with limits of its own: raised to the plan's, never lowered, the soft limit
 * alone where the hard one cannot be raised (no CAP_SYS_RESOURCE: dropped here where it is
 * held), unlimited, and a process that is gone. What the child's limits are afterwards is
 * read back with prlimit(), independently of the code under test. No root needed but for
 * the unlimited case.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/node/config.h"
#include "orh/apply/rlimit.h"
#include "orh/base/sandbox.h"

#define KIB 1024ULL

static pid_t child = -1;
static struct orh_target target = { .pid = -1, .pidfd = -1, .procfd = -1 };

/* A child holding RLIMIT_MEMLOCK soft/hard (bytes), held as the target. */
static void start(rlim_t soft, rlim_t hard)
{
	struct orh_err err = { 0 };
	int fds[2];
	char ok = 0;

	cr_assert_eq(pipe(fds), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		struct rlimit rl = { .rlim_cur = soft, .rlim_max = hard };

		close(fds[0]);
		ok = setrlimit(RLIMIT_MEMLOCK, &rl) == 0 ? 'y' : 'n';
		if (write(fds[1], &ok, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(fds[1]);
	cr_assert_eq(read(fds[0], &ok, 1), 1);
	close(fds[0]);
	cr_assert_eq(ok, 'y', "the child could not set its limits %ju/%ju", (uintmax_t)soft,
		     (uintmax_t)hard);
	cr_assert_eq(orh_target_open(child, &target, &err), 0, "%s", err.msg);
}

/* End the child (reaped) */
static void stop(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	child = -1;
}

static void teardown(void)
{
	stop();
	orh_target_close(&target);
}

TestSuite(memlock, .fini = teardown);

/* The child's limits now, read with prlimit() */
static struct rlimit now(void)
{
	struct rlimit rl;

	cr_assert_eq(prlimit(child, RLIMIT_MEMLOCK, NULL, &rl), 0, "%s", strerror(errno));
	return rl;
}

/* This process's hard limit, as the hard limit of the children: they can keep it */
static rlim_t our_hard(void)
{
	struct rlimit rl;

	cr_assert_eq(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 256 * KIB)
		cr_skip_test("the hard memlock limit here (%ju bytes) is below 256 KiB",
			     (uintmax_t)rl.rlim_max);
	return rl.rlim_max;
}

/* Drop CAP_SYS_RESOURCE from this test's process (each test runs in a process of its own) */
static void drop_sys_resource(void)
{
	cap_t caps = cap_get_proc();
	cap_value_t v = CAP_SYS_RESOURCE;

	cr_assert_not_null(caps);
	cr_assert_eq(cap_set_flag(caps, CAP_EFFECTIVE, 1, &v, CAP_CLEAR), 0);
	cr_assert_eq(cap_set_proc(caps), 0, "%s", strerror(errno));
	cap_free(caps);
}

Test(memlock, the_soft_limit_is_raised_and_the_hard_one_kept)
{
	rlim_t hard = our_hard();
	struct orh_memlock_result res;
	struct orh_err err = { 0 };

	start(64 * KIB, hard);
	cr_assert_eq(orh_memlock_apply(&target, 128 * KIB, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.outcome, ORH_MEMLOCK_RAISED);
	cr_assert_eq(now().rlim_cur, 128 * KIB);
	cr_assert_eq(now().rlim_max, hard, "a hard limit above the plan's is never lowered");
	cr_assert_eq(res.soft, 128 * KIB);
	cr_assert_eq(res.hard, hard == RLIM_INFINITY ? UINT64_MAX : (uint64_t)hard);
}

Test(memlock, a_limit_is_never_lowered)
{
	rlim_t hard = our_hard();
	struct orh_memlock_result res;
	struct orh_err err = { 0 };

	start(128 * KIB, hard);
	cr_assert_eq(orh_memlock_apply(&target, 64 * KIB, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.outcome, ORH_MEMLOCK_ALREADY);
	cr_assert_eq(now().rlim_cur, 128 * KIB);
	cr_assert_eq(now().rlim_max, hard);
	cr_assert_eq(res.soft, 128 * KIB);
}

Test(memlock, without_cap_sys_resource_the_soft_limit_goes_up_to_the_hard_one)
{
	struct orh_memlock_result res;
	struct orh_err err = { 0 };

	our_hard();
	drop_sys_resource();
	start(64 * KIB, 256 * KIB);
	cr_assert_eq(orh_memlock_apply(&target, 1024 * KIB, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.outcome, ORH_MEMLOCK_SOFT_ONLY);
	cr_assert_eq(now().rlim_cur, 256 * KIB);
	cr_assert_eq(now().rlim_max, 256 * KIB);
	cr_assert_eq(res.soft, 256 * KIB);
	cr_assert_eq(res.hard, 256 * KIB);
}

Test(memlock, unlimited_with_cap_sys_resource)
{
	struct orh_memlock_result res;
	struct orh_err err = { 0 };

	if (!orh_can_raise_hard_rlimits())
		cr_skip_test("raising a hard limit needs CAP_SYS_RESOURCE");
	start(64 * KIB, 256 * KIB);
	cr_assert_eq(orh_memlock_apply(&target, ORH_MEMLOCK_UNLIMITED, &res, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(res.outcome, ORH_MEMLOCK_RAISED);
	cr_assert_eq(now().rlim_cur, RLIM_INFINITY);
	cr_assert_eq(now().rlim_max, RLIM_INFINITY);
	cr_assert_eq(res.soft, UINT64_MAX);
	cr_assert_eq(res.hard, UINT64_MAX);
}

Test(memlock, a_process_that_is_gone_is_not_touched)
{
	struct orh_memlock_result res;
	struct orh_err err = { 0 };
	char want[96];
	pid_t pid;

	start(64 * KIB, our_hard());
	pid = child;
	stop(); /* reaped: its number may be another process's now */
	cr_assert_eq(orh_memlock_apply(&target, 128 * KIB, &res, &err), -ESRCH);
	snprintf(want, sizeof(want), "pid %d exited while reading RLIMIT_MEMLOCK", (int)pid);
	cr_assert(strstr(err.msg, want), "%s", err.msg);
}
