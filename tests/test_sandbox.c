/* SPDX-License-Identifier: Apache-2.0 */
/* Least privilege: once the filter is on, a forbidden system call fails; the filter
 * compiled at build time allows exactly the listed system calls; once the capabilities
 * are limited, an operation needing a dropped one fails. Each case runs in its own
 * process (Criterion forks per test). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/base/sandbox.h"

#if defined(__SANITIZE_ADDRESS__) || defined(ORH_SANITIZED)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

#define RET_EPERM (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))

/* Classic BPF as libseccomp emits it for rules without argument checks; any other
 * instruction, a jump past the end or running off it fails the test. Returns the
 * filter's action for `d`. */
static uint32_t bpf_run(const struct sock_filter *insns, size_t n, const struct seccomp_data *d)
{
	uint32_t a = 0;
	size_t pc = 0;

	while (pc < n) {
		const struct sock_filter *f = &insns[pc++];
		size_t skip = 0;

		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			cr_assert(f->k % 4 == 0 && f->k + 4 <= sizeof(*d), "insn %zu: load at %u",
				  pc - 1, f->k);
			memcpy(&a, (const char *)d + f->k, sizeof(a));
			break;
		case BPF_JMP | BPF_JA:
			skip = f->k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			skip = a == f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			skip = a > f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			skip = a >= f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			skip = (a & f->k) ? f->jt : f->jf;
			break;
		case BPF_RET | BPF_K:
			return f->k;
		default:
			cr_assert_fail("insn %zu: opcode 0x%04x is not one this evaluator knows",
				       pc - 1, f->code);
		}
		cr_assert_lt(pc + skip, n, "insn %zu: jump past the end", pc - 1);
		pc += skip;
	}
	cr_assert_fail("the filter ran off its end");
	return 0;
}

static uint32_t filter_action(const char *name, uint32_t arch)
{
	size_t n = 0;
	uint32_t filter_arch = 0;
	const struct sock_filter *insns = orh_seccomp_filter_insns(&n, &filter_arch);
	struct seccomp_data d = { .arch = arch };

	d.nr = seccomp_syscall_resolve_name_arch(filter_arch, name);
	cr_assert_geq(d.nr, 0, "%s is not a system call on this architecture", name);
	return bpf_run(insns, n, &d);
}

static bool listed(const char *name)
{
	size_t n = 0;
	const char *const *names = orh_seccomp_allowed(&n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

Test(sandbox, forbidden_syscalls_fail_once_the_filter_is_on)
{
	struct orh_err err = { 0 };
	char *argv[] = { "/bin/true", NULL };
	int fd;

	cr_assert_eq(orh_seccomp_confine(&err), 0, "%s", err.msg);
	cr_assert_eq(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1); /* set by confine itself */
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

Test(sandbox, filter_is_for_this_architecture)
{
	size_t n = 0;
	uint32_t arch = 0;

	cr_assert_not_null(orh_seccomp_filter_insns(&n, &arch));
	cr_assert_gt(n, 10);
	cr_assert_leq(n, BPF_MAXINSNS);
	cr_assert_eq(arch, seccomp_arch_native(), "filter for 0x%x, running on 0x%x", arch,
		     seccomp_arch_native());
}

/* Every listed name that exists here is allowed, and every other system call number
 * fails with EPERM. */
Test(sandbox, filter_allows_exactly_the_list)
{
	size_t n = 0, len = 0, nallowed = 0;
	const char *const *names = orh_seccomp_allowed(&n);
	uint32_t arch = 0;
	const struct sock_filter *insns = orh_seccomp_filter_insns(&len, &arch);

	for (size_t i = 0; i < n; i++) {
		if (seccomp_syscall_resolve_name_arch(arch, names[i]) < 0)
			continue; /* not on this architecture */
		cr_assert_eq(filter_action(names[i], arch), SECCOMP_RET_ALLOW, "%s is not allowed",
			     names[i]);
		nallowed++;
	}
	cr_assert_gt(nallowed, 50);

	for (int nr = 0; nr < 1024; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(arch, nr);
		struct seccomp_data d = { .nr = nr, .arch = arch };
		uint32_t want = name && listed(name) ? SECCOMP_RET_ALLOW : RET_EPERM;
		uint32_t got = bpf_run(insns, len, &d);

		cr_assert_eq(got, want, "system call %d (%s): action 0x%x, not 0x%x", nr,
			     name ? name : "no name", got, want);
		free(name);
	}
}

/* What the live hook needs to hold the container's process (src/apply/target.c)
 * and act on it. */
Test(sandbox, filter_allows_what_the_hook_needs)
{
	static const char *const needed[] = {
		"pidfd_open", "pidfd_send_signal", "setns", "prlimit64", "statx", "faccessat",
		"poll", "clock_gettime",
	};
	uint32_t arch = 0;

	orh_seccomp_filter_insns(&(size_t){ 0 }, &arch);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(needed); i++) {
		cr_assert(listed(needed[i]), "%s is not in the allow-list", needed[i]);
		if (seccomp_syscall_resolve_name_arch(arch, needed[i]) < 0)
			continue; /* not on this architecture */
		cr_assert_eq(filter_action(needed[i], arch), SECCOMP_RET_ALLOW, "%s is not allowed",
			     needed[i]);
	}
}

Test(sandbox, filter_denies_what_the_hook_never_does)
{
	static const char *const forbidden[] = {
		"execve", "execveat", "chroot", "init_module", "finit_module", "reboot",
		"kexec_load", "pivot_root", "setuid", "process_vm_writev",
#if !SANITIZED
		"ptrace",
#endif
	};
	uint32_t arch = 0;

	orh_seccomp_filter_insns(&(size_t){ 0 }, &arch);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(forbidden); i++) {
		if (seccomp_syscall_resolve_name_arch(arch, forbidden[i]) < 0)
			continue; /* not on this architecture */
		cr_assert_eq(filter_action(forbidden[i], arch), RET_EPERM, "%s is not EPERM",
			     forbidden[i]);
	}
}

/* A system call made through another ABI (32-bit x86 on x86_64, x32, ...) is never
 * allowed, whatever its number. */
Test(sandbox, filter_denies_other_architectures)
{
	static const uint32_t arches[] = {
		AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM,
		AUDIT_ARCH_PPC64LE, AUDIT_ARCH_S390X, 0,
	};
	static const char *const x32_names[] = { "read", "openat", "close", "exit_group" };
	size_t n = 0;
	uint32_t arch = 0;
	const struct sock_filter *insns = orh_seccomp_filter_insns(&n, &arch);

	for (size_t i = 0; i < ORH_ARRAY_SIZE(arches); i++) {
		struct seccomp_data d = { .arch = arches[i] };

		if (arches[i] == arch)
			continue;
		for (d.nr = 0; d.nr < 1024; d.nr++)
			cr_assert_neq(bpf_run(insns, n, &d), SECCOMP_RET_ALLOW,
				      "arch 0x%x, system call %d: allowed", arches[i], d.nr);
	}
	if (arch != AUDIT_ARCH_X86_64)
		return;
	/* x32 system calls come with the x86_64 audit arch and bit 30 of the number set */
	for (size_t i = 0; i < ORH_ARRAY_SIZE(x32_names); i++) {
		struct seccomp_data d = {
			.nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X32, x32_names[i]),
			.arch = arch,
		};

		cr_assert_geq(d.nr, 0x40000000);
		cr_assert_neq(bpf_run(insns, n, &d), SECCOMP_RET_ALLOW, "x32 %s: allowed",
			      x32_names[i]);
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

Test(sandbox, inspect_keeps_only_ptrace_and_dac_read_search)
{
	/* inspect reads what NCCL wrote in a container through /proc/PID/root: exactly these */
	struct orh_err err = { 0 };
	cap_t before = cap_get_proc(), caps;

	cr_assert_eq(orh_caps_limit(ORH_PRIVS_READ, &err), 0, "%s", err.msg);
	caps = cap_get_proc();
	for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
		cap_flag_value_t had = CAP_CLEAR, eff = CAP_SET, prm = CAP_SET;
		bool listed = c == CAP_SYS_PTRACE || c == CAP_DAC_READ_SEARCH;

		cap_get_flag(before, c, CAP_PERMITTED, &had);
		cap_get_flag(caps, c, CAP_EFFECTIVE, &eff);
		cap_get_flag(caps, c, CAP_PERMITTED, &prm);
		cr_assert_eq(eff == CAP_SET, listed && had == CAP_SET, "capability %d effective: %d",
			     (int)c, (int)eff);
		cr_assert_eq(prm == CAP_SET, listed && had == CAP_SET, "capability %d permitted: %d",
			     (int)c, (int)prm);
	}
	if (geteuid() == 0) {
		cap_flag_value_t v = CAP_CLEAR;

		cap_get_flag(caps, CAP_SYS_PTRACE, CAP_EFFECTIVE, &v);
		cr_assert_eq(v, CAP_SET, "root keeps CAP_SYS_PTRACE for /proc/PID/root");
	}
	cr_assert_eq(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
	cap_free(before);
	cap_free(caps);
}

Test(sandbox, hook_stage_keeps_only_its_capabilities)
{
	/* exactly these, of those held: NET_ADMIN and SYS_ADMIN are what the cgroup v2
	 * grant's bpf(2) commands need on Linux 6.1 (src/base/sandbox.c); CAP_BPF is not kept */
	static const cap_value_t want[] = {
		CAP_MKNOD, CAP_CHOWN, CAP_FOWNER, CAP_DAC_OVERRIDE, CAP_SYS_ADMIN,
		CAP_SYS_RESOURCE, CAP_SYS_PTRACE, CAP_SYS_CHROOT, CAP_NET_ADMIN,
	};
	struct orh_err err = { 0 };
	cap_t before = cap_get_proc(), caps;

	cr_assert_eq(orh_caps_limit(ORH_PRIVS_HOOK, &err), 0, "%s", err.msg);
	caps = cap_get_proc();
	for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++) {
		cap_flag_value_t had = CAP_CLEAR, eff = CAP_SET, prm = CAP_SET;
		bool listed = false;

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			listed |= want[i] == c;
		cap_get_flag(before, c, CAP_PERMITTED, &had);
		cap_get_flag(caps, c, CAP_EFFECTIVE, &eff);
		cap_get_flag(caps, c, CAP_PERMITTED, &prm);
		cr_assert_eq(eff == CAP_SET, listed && had == CAP_SET, "capability %d effective: %d",
			     (int)c, (int)eff);
		cr_assert_eq(prm == CAP_SET, listed && had == CAP_SET, "capability %d permitted: %d",
			     (int)c, (int)prm);
	}
	if (geteuid() == 0) {
		cap_flag_value_t v = CAP_CLEAR;

		cap_get_flag(caps, CAP_NET_ADMIN, CAP_EFFECTIVE, &v);
		cr_assert_eq(v, CAP_SET, "root keeps CAP_NET_ADMIN for BPF_PROG_QUERY on 6.1");
	}
	cap_free(before);
	cap_free(caps);
}
