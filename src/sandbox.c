/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Capabilities (libcap) and the seccomp allow-list of the hook. The allow-list
 * (seccomp-allow.h) is compiled into a BPF program at build time by libseccomp
 * (seccomp-gen.c, run by meson); here it is only handed to the kernel.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "orh/sandbox.h"
#include "seccomp-allow.h"
#include "seccomp-filter.h" /* generated: orh_seccomp_filter, ORH_SECCOMP_FILTER_* */

/* The live hook: create nodes (MKNOD), set their owner/mode and write root-owned files
 * in a rootfs owned by another user (CHOWN, FOWNER, DAC_OVERRIDE), bind-mount over a
 * read-only rootfs and enter the container's namespaces (SYS_ADMIN), raise another
 * process's RLIMIT_MEMLOCK (SYS_RESOURCE), read /proc/<pid> of the container
 * (SYS_PTRACE for ns links of a process that dropped dumpability; SYS_CHROOT, with
 * SYS_ADMIN, to setns() into its mount namespace).
 * The cgroup v2 grant (cgroup.c) needs, per bpf(2) command, in the initial user namespace:
 *   BPF_PROG_QUERY         NET_ADMIN before Linux 6.9 (6.1 refuses SYS_ADMIN alone);
 *                          NET_ADMIN or SYS_ADMIN since
 *   BPF_PROG_GET_FD_BY_ID  SYS_ADMIN (CAP_BPF is not enough, on every version)
 *   BPF_OBJ_GET_INFO_BY_FD the program's instructions: CAP_BPF or SYS_ADMIN
 *   BPF_PROG_LOAD          SYS_ADMIN, or CAP_BPF with NET_ADMIN
 *   BPF_PROG_ATTACH        no capability for a device program
 * so SYS_ADMIN and NET_ADMIN, and CAP_BPF adds nothing (docs/security.md). */
static const cap_value_t hook_caps[] = {
	CAP_MKNOD, CAP_CHOWN, CAP_FOWNER, CAP_DAC_OVERRIDE, CAP_SYS_ADMIN,
	CAP_SYS_RESOURCE, CAP_SYS_PTRACE, CAP_SYS_CHROOT, CAP_NET_ADMIN,
};

static bool started_with_sys_resource;
static bool caps_limited;

bool orh_caps_had_sys_resource(void)
{
	cap_t cur;
	cap_flag_value_t v = CAP_CLEAR;

	if (caps_limited)
		return started_with_sys_resource;
	cur = cap_get_proc();
	if (cur) {
		cap_get_flag(cur, CAP_SYS_RESOURCE, CAP_EFFECTIVE, &v);
		cap_free(cur);
	}
	return v == CAP_SET;
}

/* The initial user namespace maps every uid to itself: "0 0 4294967295". In any other
 * (rootless podman's, a user namespace of a container engine) a capability counts only
 * for what that namespace owns, and rlimits are not among it: the kernel checks
 * CAP_SYS_RESOURCE against the initial namespace to raise a hard limit. */
bool orh_in_initial_userns(void)
{
	char buf[128] = "";
	unsigned long long inside = 1, outside = 1, count = 0;
	FILE *f = fopen("/proc/self/uid_map", "re");
	bool initial = false;

	if (!f)
		return true; /* no user namespaces in this kernel */
	if (fgets(buf, sizeof(buf), f) &&
	    sscanf(buf, "%llu %llu %llu", &inside, &outside, &count) == 3)
		initial = inside == 0 && outside == 0 && count == 4294967295ULL &&
			  !fgets(buf, sizeof(buf), f);
	fclose(f);
	return initial;
}

bool orh_can_raise_hard_rlimits(void)
{
	static int cached = -1;

	if (cached < 0)
		cached = orh_caps_had_sys_resource() && orh_in_initial_userns();
	return cached;
}

int orh_caps_limit(enum orh_stage_privs stage, struct orh_err *err)
{
	cap_t cur, want;
	int r = 0;

	started_with_sys_resource = orh_caps_had_sys_resource();
	(void)orh_can_raise_hard_rlimits(); /* while /proc may still be read */
	caps_limited = true;
	cur = cap_get_proc();
	want = cap_init();

	if (!cur || !want) {
		r = orh_fail(err, errno ? errno : ENOMEM, "capabilities: cannot read the process's sets");
		goto out;
	}
	if (stage == ORH_PRIVS_HOOK) {
		for (size_t i = 0; i < ORH_ARRAY_SIZE(hook_caps); i++) {
			cap_flag_value_t have = CAP_CLEAR;

			/* keep only what we hold: the sets can only shrink */
			if (cap_get_flag(cur, hook_caps[i], CAP_PERMITTED, &have) < 0 || have != CAP_SET)
				continue;
			if (cap_set_flag(want, CAP_EFFECTIVE, 1, &hook_caps[i], CAP_SET) < 0 ||
			    cap_set_flag(want, CAP_PERMITTED, 1, &hook_caps[i], CAP_SET) < 0) {
				r = orh_fail(err, errno, "capabilities: cannot build the set");
				goto out;
			}
		}
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		r = orh_fail(err, errno, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
		goto out;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (cap_set_proc(want) < 0)
		r = orh_fail(err, errno, "capabilities: cannot set: %s", strerror(errno));
out:
	if (cur)
		cap_free(cur);
	if (want)
		cap_free(want);
	return r;
}

static const char *const allowed[] = {
	ORH_SECCOMP_ALLOW,
#if defined(__SANITIZE_ADDRESS__) || defined(ORH_SANITIZED)
	ORH_SECCOMP_ALLOW_SANITIZER,
#endif
};

/* The filter was compiled for the list above: a build with the sanitizer's system calls
 * in one and not the other would fail at the first ptrace of LeakSanitizer, or allow
 * what it need not. */
#if (defined(__SANITIZE_ADDRESS__) || defined(ORH_SANITIZED)) != ORH_SECCOMP_FILTER_SANITIZER
#error "seccomp-filter.h is for another sanitizer setting: use meson's -Db_sanitize, not CFLAGS"
#endif

/* ... and for the architecture the compiler builds for (where we can tell it). */
#if defined(__x86_64__) && defined(__ILP32__)
#error "x32 is not supported: meson calls it x86_64, and the seccomp filter would be for x86_64"
#elif defined(__x86_64__)
#define ORH_CC_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__i386__)
#define ORH_CC_AUDIT_ARCH AUDIT_ARCH_I386
#elif defined(__aarch64__) && !defined(__ILP32__)
#define ORH_CC_AUDIT_ARCH AUDIT_ARCH_AARCH64
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ORH_CC_AUDIT_ARCH AUDIT_ARCH_PPC64LE
#elif defined(__s390x__)
#define ORH_CC_AUDIT_ARCH AUDIT_ARCH_S390X
#elif defined(__riscv) && __riscv_xlen == 64
#define ORH_CC_AUDIT_ARCH AUDIT_ARCH_RISCV64
#endif
#ifdef ORH_CC_AUDIT_ARCH
_Static_assert(ORH_SECCOMP_FILTER_ARCH == ORH_CC_AUDIT_ARCH,
	       "seccomp-filter.h was generated for " ORH_SECCOMP_FILTER_ARCH_NAME
	       ", not for the architecture this file is compiled for (meson's host machine)");
#endif

const char *const *orh_seccomp_allowed(size_t *n)
{
	*n = ORH_ARRAY_SIZE(allowed);
	return allowed;
}

const struct sock_filter *orh_seccomp_filter_insns(size_t *n, uint32_t *arch)
{
	*n = ORH_ARRAY_SIZE(orh_seccomp_filter);
	*arch = ORH_SECCOMP_FILTER_ARCH;
	return orh_seccomp_filter;
}

int orh_seccomp_confine(struct orh_err *err)
{
	struct sock_fprog prog = {
		.len = ORH_ARRAY_SIZE(orh_seccomp_filter),
		.filter = (struct sock_filter *)orh_seccomp_filter,
	};

	/* required for an unprivileged filter; orh_caps_limit() set it already, unless
	 * a caller confines without it */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return orh_fail(err, errno, "seccomp: prctl(PR_SET_NO_NEW_PRIVS): %s",
				strerror(errno));
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
		return 0;
	if (errno == ENOSYS && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0)
		return 0; /* a kernel before 3.17 */
	return orh_fail(err, errno, "seccomp: cannot load the filter (%u instructions, %s): %s",
			prog.len, ORH_SECCOMP_FILTER_ARCH_NAME, strerror(errno));
}
