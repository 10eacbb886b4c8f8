/* SPDX-License-Identifier: Apache-2.0 */
/* Least privilege: once the filter is on, a forbidden system call fails; once the
 * capabilities are limited, an operation needing a dropped one fails. Each case runs in
 * its own process (Criterion forks per test). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/sandbox.h"

Test(sandbox, forbidden_syscalls_fail_once_the_filter_is_on)
{
	struct orh_err err = { 0 };
	char *argv[] = { "/bin/true", NULL };
	int fd;

	cr_assert_eq(orh_seccomp_confine(&err), 0, "%s", err.msg);
	errno = 0;
	cr_assert_eq(execve("/bin/true", argv, NULL), -1);
	cr_assert_eq(errno, EPERM);
#ifndef ORH_SANITIZED /* sanitizer builds allow ptrace for LeakSanitizer */
	errno = 0;
	cr_assert_eq(ptrace(PTRACE_TRACEME, 0, NULL, NULL), -1);
	cr_assert_eq(errno, EPERM);
#endif
	errno = 0;
	cr_assert_eq(chroot("/"), -1);
	cr_assert_eq(errno, EPERM);
	/* what the hook needs still works */
	fd = openat(AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "openat: %s", strerror(errno));
	close(fd);
}

Test(sandbox, allow_list_names_resolve)
{
	size_t n = 0;
	const char *const *names = orh_seccomp_allowed(&n);

	cr_assert_gt(n, 50);
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_neq(names[i], "execve");
#ifndef ORH_SANITIZED
		cr_assert_str_neq(names[i], "ptrace");
#endif
		cr_assert_str_neq(names[i], "init_module");
		cr_assert_str_neq(names[i], "chroot");
	}
}

Test(sandbox, pure_stages_hold_no_capability)
{
	struct orh_err err = { 0 };
	char path[] = "/tmp/orh-sandbox-XXXXXX";
	int fd = mkstemp(path);
	cap_t caps;
	cap_flag_value_t v = CAP_SET;

	cr_assert_geq(fd, 0);
	close(fd);
	chmod(path, 0);
	cr_assert_eq(orh_caps_limit(ORH_PRIVS_NONE, &err), 0, "%s", err.msg);
	caps = cap_get_proc();
	cap_get_flag(caps, CAP_DAC_OVERRIDE, CAP_EFFECTIVE, &v);
	cap_free(caps);
	cr_assert_eq(v, CAP_CLEAR);
	if (geteuid() == 0) {
		/* root without CAP_DAC_OVERRIDE cannot open a mode-000 file */
		errno = 0;
		cr_assert_eq(open(path, O_RDONLY), -1);
		cr_assert_eq(errno, EACCES);
	}
	cr_assert_eq(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
	unlink(path);
}

Test(sandbox, hook_stage_keeps_only_its_capabilities)
{
	struct orh_err err = { 0 };
	cap_t caps;
	cap_flag_value_t v = CAP_SET;

	cr_assert_eq(orh_caps_limit(ORH_PRIVS_HOOK, &err), 0, "%s", err.msg);
	caps = cap_get_proc();
	cap_get_flag(caps, CAP_NET_ADMIN, CAP_EFFECTIVE, &v);
	cr_assert_eq(v, CAP_CLEAR);
	cap_get_flag(caps, CAP_SYS_MODULE, CAP_PERMITTED, &v);
	cr_assert_eq(v, CAP_CLEAR);
	if (geteuid() == 0) {
		cap_get_flag(caps, CAP_MKNOD, CAP_EFFECTIVE, &v);
		cr_assert_eq(v, CAP_SET);
	}
	cap_free(caps);
}
