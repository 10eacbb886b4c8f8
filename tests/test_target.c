/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/apply/target.c: which process the hook works on (the pure
 * judge, case by case), and holding it (a pid that exits is seen to exit; /proc reads go
 * through the process held). No root needed; the e2e suites test it on real processes
 * and runc (security.sh, faults.sh). */
#include <criterion/criterion.h>
#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/apply/apply.h"

static const struct orh_fileid rootfs_id = { .dev = 8, .ino = 1234 };
static const struct orh_fileid host_root = { .dev = 8, .ino = 2 };

static int judge(const struct orh_target_view *v, struct orh_err *err)
{
	return orh_target_judge(4242, "/run/b/rootfs", v, err);
}

Test(target_judge, runc_before_pivot_root)
{
	struct orh_target_view v = {
		.root = host_root, .want = rootfs_id, .own_mntns = true,
		.seen = rootfs_id, .mount_point = true,
	};
	struct orh_err err = { 0 };

	cr_assert_eq(judge(&v, &err), 0, "%s", err.msg);
}

Test(target_judge, after_pivot_root)
{
	struct orh_target_view v = { .pivoted = true, .root = rootfs_id, .want = rootfs_id };
	struct orh_err err = { 0 };

	cr_assert_eq(judge(&v, &err), 0, "%s", err.msg);
}

Test(target_judge, another_container)
{
	struct orh_target_view v = {
		.pivoted = true, .root = { .dev = 8, .ino = 999 }, .want = rootfs_id,
	};
	struct orh_err err = { 0 };

	cr_assert_eq(judge(&v, &err), -EPERM);
	cr_assert(strstr(err.msg, "pid 4242 is not the container of this bundle: its root is "
				  "not root.path '/run/b/rootfs'"), "%s", err.msg);
}

Test(target_judge, host_process)
{
	/* its root and mount namespace are the hook's; nothing else is looked at */
	struct orh_target_view v = { .root = host_root, .want = rootfs_id, .seen = rootfs_id,
				     .mount_point = true };
	struct orh_err err = { 0 };

	cr_assert_eq(judge(&v, &err), -EPERM);
	cr_assert(strstr(err.msg, "pid 4242 is not the container of this bundle: it shares the "
				  "hook's mount namespace and root"), "%s", err.msg);
}

Test(target_judge, own_namespace_without_the_rootfs)
{
	struct orh_target_view v = { .root = host_root, .want = rootfs_id, .own_mntns = true };
	struct orh_err err = { 0 };

	v.seen_errno = ENOENT;
	cr_assert_eq(judge(&v, &err), -ENOENT);
	cr_assert(strstr(err.msg, "root.path '/run/b/rootfs' cannot be opened in its mount "
				  "namespace"), "%s", err.msg);
	v.seen_errno = 0;
	v.seen = (struct orh_fileid){ .dev = 9, .ino = 1234 };
	cr_assert_eq(judge(&v, &err), -EPERM);
	cr_assert(strstr(err.msg, "is another directory in its mount namespace"), "%s", err.msg);
}

Test(target_judge, rootfs_not_mounted_there)
{
	/* a process that made a mount namespace of its own (unshare -m, a service with
	 * PrivateTmp=) but is no container: the rootfs is not mounted in it */
	struct orh_target_view v = {
		.root = host_root, .want = rootfs_id, .own_mntns = true, .seen = rootfs_id,
	};
	struct orh_err err = { 0 };

	cr_assert_eq(judge(&v, &err), -EPERM);
	cr_assert(strstr(err.msg, "root.path '/run/b/rootfs' is not a mount point in its mount "
				  "namespace"), "%s", err.msg);
}

Test(target, a_process_that_exits_is_seen_to_exit)
{
	struct orh_target t;
	struct orh_err err = { 0 };
	char *text = NULL;
	pid_t child = fork();

	cr_assert_geq(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	cr_assert_eq(orh_target_open(child, &t, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_target_alive(&t, "testing", &err), 0, "%s", err.msg);
	cr_assert_eq(orh_target_read(&t, "stat", 4096, &text, &err), 0, "%s", err.msg);
	cr_assert(strstr(text, ") S ") || strstr(text, ") R "), "%s", text);
	free(text);
	text = NULL;

	kill(child, SIGKILL);
	/* a zombie still holds its number: it is there */
	cr_assert_eq(waitid(P_PID, (id_t)child, NULL, WEXITED | WNOWAIT), 0);
	cr_assert_eq(orh_target_alive(&t, "testing", &err), 0, "%s", err.msg);
	/* reaped: its number is free, and the hook must stop */
	cr_assert_eq(waitpid(child, NULL, 0), child);
	cr_assert_eq(orh_target_alive(&t, "the test reaped it", &err), -ESRCH);
	cr_assert(strstr(err.msg, "exited while the test reaped it"), "%s", err.msg);
	cr_assert_eq(orh_target_read(&t, "stat", 4096, &text, &err), -ESRCH, "%s", err.msg);
	cr_assert_null(text);
	orh_target_close(&t);
}

Test(target, a_pid_that_is_gone_is_refused)
{
	struct orh_target t;
	struct orh_err err = { 0 };
	pid_t child = fork();

	cr_assert_geq(child, 0);
	if (child == 0)
		_exit(0);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	cr_assert_eq(orh_target_open(child, &t, &err), -ESRCH);
	cr_assert(strstr(err.msg, "no such process"), "%s", err.msg);
	cr_assert_eq(t.pidfd, -1);
	cr_assert_eq(t.procfd, -1);
}

Test(target, its_own_parent_is_a_host_process)
{
	/* the test runs in the host's (its own) mount namespace: the hook's view of a host
	 * process, whatever bundle it is handed */
	struct orh_target t;
	struct orh_err err = { 0 };
	int fd = -1;

	cr_assert_eq(orh_target_open(getpid(), &t, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_target_open_rootfs(&t, "/tmp", &fd, &err), -EPERM);
	cr_assert(strstr(err.msg, "shares the hook's mount namespace and root"), "%s", err.msg);
	cr_assert_eq(fd, -1);
	orh_target_close(&t);
}

Test(target, mountinfo_mount_points)
{
	static const char text[] =
		"22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
		"410 22 254:0 /work/b/rootfs /work/b/rootfs rw,relatime - ext4 /dev/vda rw\n"
		"411 22 0:5 / /run/with\\040space rw - tmpfs tmpfs rw\n";
	char buf[sizeof(text)];

#define HAS(p) (memcpy(buf, text, sizeof(text)), orh_mountinfo_has_mount_point(buf, p))
	cr_assert(HAS("/work/b/rootfs"));
	cr_assert(HAS("/work/b/./rootfs/"), "'.' and a trailing slash do not count");
	cr_assert(HAS("//work//b/rootfs"));
	cr_assert(HAS("/run/with space"), "octal escapes are decoded");
	cr_assert(!HAS("/work/b"));
	cr_assert(!HAS("/work/b/rootfs/etc"));
	cr_assert(!HAS("/work/b/rootf"));
	cr_assert(!HAS("/work/b/../b/rootfs"), "'..' is a name here, not resolved");
	cr_assert(HAS("/"));
#undef HAS
}

/* Before Linux 5.3 there is no pidfd_open: the /proc/<pid> directory held from the start
 * does the same job (a seccomp filter makes pidfd_open fail with ENOSYS here). */
Test(target, without_pidfd_open)
{
	struct orh_target t;
	struct orh_err err = { 0 };
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	char *text = NULL;
	pid_t child;

	cr_assert_not_null(ctx);
	cr_assert_eq(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(pidfd_open), 0), 0);
	cr_assert_eq(seccomp_load(ctx), 0);
	seccomp_release(ctx);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	cr_assert_eq(orh_target_open(child, &t, &err), 0, "%s", err.msg);
	cr_assert_eq(t.pidfd, -1);
	cr_assert_eq(orh_target_alive(&t, "testing", &err), 0, "%s", err.msg);
	cr_assert_eq(orh_target_read(&t, "stat", 4096, &text, &err), 0, "%s", err.msg);
	free(text);
	text = NULL;
	kill(child, SIGKILL);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	cr_assert_eq(orh_target_alive(&t, "the test reaped it", &err), -ESRCH, "%s", err.msg);
	cr_assert_eq(orh_target_read(&t, "stat", 4096, &text, &err), -ESRCH, "%s", err.msg);
	orh_target_close(&t);
}
