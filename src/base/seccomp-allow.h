/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The system calls the hook may make once it is confined (docs/security.md), by name.
 * One list for two readers: src/base/seccomp-gen.c compiles it into the BPF filter at build
 * time, src/base/sandbox.c hands it out through orh_seccomp_allowed(). Names that do not
 * exist on an architecture are left out of that architecture's filter.
 */
#ifndef ORH_SECCOMP_ALLOW_H
#define ORH_SECCOMP_ALLOW_H

/* clang-format off */
#define ORH_SECCOMP_ALLOW							\
	/* memory, time, identity, signals, exit */				\
	"brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "futex", "getrandom", \
	"clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday", "time",	\
	"getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid",	\
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "kill", "tgkill", \
	"exit", "exit_group", "set_robust_list", "rseq", "set_tid_address", "uname",	\
	"prctl", "capget", "capset", "sched_yield", "restart_syscall", "sysinfo",	\
	/* files, relative to directory fds */					\
	"read", "write", "pread64", "pwrite64", "readv", "writev", "lseek", "close",	\
	"close_range",								\
	"openat", "openat2", "open", "fstat", "newfstatat", "statx", "stat", "lstat",	\
	"fstatfs",								\
	"getdents64", "readlinkat", "readlink", "mkdirat", "mknodat", "fchmodat", "fchmod", \
	"symlinkat", "utimensat",						\
	"fchownat", "fchown", "renameat", "renameat2", "unlinkat", "fsync", "fdatasync", \
	"fcntl", "dup", "dup2", "dup3", "pipe2", "ioctl", "faccessat", "faccessat2",	\
	"access", "umask", "getcwd", "flock", "ftruncate", "poll", "ppoll",		\
	/* children that enter the container's namespaces */			\
	"clone", "clone3", "fork", "vfork", "wait4", "waitid", "setns", "unshare",	\
	"mount", "umount2", "open_tree", "move_mount", "mount_setattr",		\
	"fsopen", "fsconfig", "fsmount",					\
	/* rtnetlink in the container's netns; syslog */			\
	"socket", "bind", "connect", "sendto", "recvfrom", "sendmsg", "recvmsg",	\
	"getsockname", "setsockopt", "getsockopt",					\
	/* the container's process, held by a pidfd */				\
	"pidfd_open", "pidfd_send_signal",					\
	/* device cgroup (BPF on cgroup v2), memlock */				\
	"bpf", "prlimit64", "getrlimit", "setrlimit"

/* Sanitizer builds only (tests; meson's b_sanitize, which defines ORH_SANITIZED):
 * LeakSanitizer stops the world with ptrace at exit. Never in a release build. */
#define ORH_SECCOMP_ALLOW_SANITIZER						\
	"ptrace", "sched_getaffinity", "sched_setaffinity", "getpgid", "getdents"
/* clang-format on */

#endif
