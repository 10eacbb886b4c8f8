/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Capabilities and the seccomp allow-list of the hook. Capabilities are read and set with
 * capget(2)/capset(2) themselves, not libcap: libcap's constructor probes the kernel's
 * highest capability with a system call a bit, and would do it at every container start,
 * for sets this file reads and writes in a few lines. The allow-list (seccomp-allow.h) is
 * compiled into a BPF program at build time by libseccomp (seccomp-gen.c, run by meson);
 * here it is only handed to the kernel.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "orh/base/sandbox.h"
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
static const unsigned hook_caps[] = {
	CAP_MKNOD, CAP_CHOWN, CAP_FOWNER, CAP_DAC_OVERRIDE, CAP_SYS_ADMIN,
	CAP_SYS_RESOURCE, CAP_SYS_PTRACE, CAP_SYS_CHROOT, CAP_NET_ADMIN,
};

static const unsigned read_caps[] = { CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH };

static bool started_with_sys_resource;
static bool caps_limited;

/* The effective, permitted and inheritable sets of this process (capabilities 0-63). */
struct capsets {
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
};

static int capsets_get(struct capsets *c)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };

	memset(c, 0, sizeof(*c));
	return syscall(SYS_capget, &h, c->d) < 0 ? -errno : 0;
}

static int capsets_set(struct capsets *c)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };

	return syscall(SYS_capset, &h, c->d) < 0 ? -errno : 0;
}

static bool capsets_has(const struct capsets *c, unsigned cap, bool permitted)
{
	const struct __user_cap_data_struct *w = &c->d[cap / 32];

	return cap < 32 * _LINUX_CAPABILITY_U32S_3 &&
	       ((permitted ? w->permitted : w->effective) >> (cap % 32) & 1);
}

bool orh_caps_had_sys_resource(void)
{
	struct capsets cur;

	if (caps_limited)
		return started_with_sys_resource;
	return capsets_get(&cur) == 0 && capsets_has(&cur, CAP_SYS_RESOURCE, false);
}

bool orh_caps_effective(unsigned cap)
{
	struct capsets cur;

	return capsets_get(&cur) == 0 && capsets_has(&cur, cap, false);
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
	const unsigned *caps = stage == ORH_PRIVS_HOOK ? hook_caps : read_caps;
	size_t n = stage == ORH_PRIVS_HOOK ? ORH_ARRAY_SIZE(hook_caps)
		   : stage == ORH_PRIVS_READ ? ORH_ARRAY_SIZE(read_caps) : 0;
	struct capsets cur, want;
	int r = capsets_get(&cur);

	if (r < 0)
		return orh_fail_errno(err, -r, "capabilities: cannot read the process's sets");
	started_with_sys_resource = capsets_has(&cur, CAP_SYS_RESOURCE, false);
	caps_limited = true;
	(void)orh_can_raise_hard_rlimits(); /* while /proc may still be read */

	/* effective = permitted = the stage's capabilities that the process holds (the sets
	 * can only shrink); inheritable empty */
	memset(&want, 0, sizeof(want));
	for (size_t i = 0; i < n; i++) {
		unsigned c = caps[i];

		if (!capsets_has(&cur, c, true))
			continue;
		want.d[c / 32].effective |= 1u << (c % 32);
		want.d[c / 32].permitted |= 1u << (c % 32);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return orh_fail_errno(err, errno, "prctl(PR_SET_NO_NEW_PRIVS)");
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	r = capsets_set(&want);
	if (r < 0)
		return orh_fail_errno(err, -r, "capabilities: cannot set");
	return 0;
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
		return orh_fail_errno(err, errno, "seccomp: prctl(PR_SET_NO_NEW_PRIVS)");
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
		return 0;
	if (errno == ENOSYS && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0)
		return 0; /* a kernel before 3.17 */
	return orh_fail_errno(err, errno, "seccomp: cannot load the filter (%u instructions, %s)",
			      prog.len, ORH_SECCOMP_FILTER_ARCH_NAME);
}
