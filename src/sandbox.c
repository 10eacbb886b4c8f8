/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities (libcap) and the seccomp allow-list (libseccomp) of the hook. */
#include <errno.h>
#include <seccomp.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include "orh/sandbox.h"

/* The live hook: create nodes (MKNOD), set their owner/mode and write root-owned files
 * in a rootfs owned by another user (CHOWN, FOWNER, DAC_OVERRIDE), bind-mount over a
 * read-only rootfs and enter the container's namespaces (SYS_ADMIN), raise another
 * process's RLIMIT_MEMLOCK (SYS_RESOURCE), replace the device cgroup's BPF program
 * (SYS_ADMIN; BPF where the kernel splits it out), read /proc/<pid> of the container
 * (SYS_PTRACE for ns links of a process that dropped dumpability; SYS_CHROOT, with
 * SYS_ADMIN, to setns() into its mount namespace). */
static const cap_value_t hook_caps[] = {
	CAP_MKNOD, CAP_CHOWN, CAP_FOWNER, CAP_DAC_OVERRIDE, CAP_SYS_ADMIN,
	CAP_SYS_RESOURCE, CAP_SYS_PTRACE, CAP_SYS_CHROOT,
#ifdef CAP_BPF
	CAP_BPF,
#endif
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

int orh_caps_limit(enum orh_stage_privs stage, struct orh_err *err)
{
	cap_t cur, want;
	int r = 0;

	started_with_sys_resource = orh_caps_had_sys_resource();
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
	/* memory, time, identity, signals, exit */
	"brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "futex", "getrandom",
	"clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
	"getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "kill", "tgkill",
	"exit", "exit_group", "set_robust_list", "rseq", "set_tid_address", "uname",
	"prctl", "capget", "capset", "sched_yield", "restart_syscall", "sysinfo",
	/* files, relative to directory fds */
	"read", "write", "pread64", "pwrite64", "readv", "writev", "lseek", "close",
	"openat", "openat2", "open", "fstat", "newfstatat", "statx", "stat", "lstat",
	"getdents64", "readlinkat", "readlink", "mkdirat", "mknodat", "fchmodat", "fchmod",
	"fchownat", "fchown", "renameat", "renameat2", "unlinkat", "fsync", "fdatasync",
	"fcntl", "dup", "dup2", "dup3", "pipe2", "ioctl", "faccessat", "faccessat2",
	"access", "umask", "getcwd", "flock", "ftruncate", "poll", "ppoll",
	/* children that enter the container's namespaces */
	"clone", "clone3", "fork", "vfork", "wait4", "waitid", "setns", "unshare",
	"mount", "umount2", "open_tree", "move_mount", "mount_setattr",
	/* rtnetlink in the container's netns; syslog */
	"socket", "bind", "connect", "sendto", "recvfrom", "sendmsg", "recvmsg",
	"getsockname", "setsockopt", "getsockopt",
	/* device cgroup (BPF on cgroup v2), memlock */
	"bpf", "prlimit64", "getrlimit", "setrlimit",
#if defined(__SANITIZE_ADDRESS__) || defined(ORH_SANITIZED)
	/* sanitizer builds only (tests): LeakSanitizer stops the world with ptrace at exit */
	"ptrace", "sched_getaffinity", "sched_setaffinity", "getpgid", "getdents",
#endif
};

const char *const *orh_seccomp_allowed(size_t *n)
{
	*n = ORH_ARRAY_SIZE(allowed);
	return allowed;
}

int orh_seccomp_confine(struct orh_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	int r;

	if (!ctx)
		return orh_fail(err, ENOMEM, "seccomp: cannot create a filter");
	for (size_t i = 0; i < ORH_ARRAY_SIZE(allowed); i++) {
		int nr = seccomp_syscall_resolve_name(allowed[i]);

		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		if (r < 0) {
			seccomp_release(ctx);
			return orh_fail(err, r, "seccomp: cannot allow %s", allowed[i]);
		}
	}
	r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r < 0)
		return orh_fail(err, r, "seccomp: cannot load the filter: %s", strerror(-r));
	return 0;
}
