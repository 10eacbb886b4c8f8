/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Least privilege for the hook (src/base/sandbox.c): keep only the capabilities a stage
 * needs (capget/capset), and confine the process to the system calls the hook makes
 * (a seccomp allow-list that libseccomp compiles at build time, src/base/seccomp-gen.c;
 * everything else fails with EPERM). Both are applied before the hook parses anything a
 * container supplied.
 */
#ifndef ORH_BASE_SANDBOX_H
#define ORH_BASE_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orh/base/util.h"

enum orh_stage_privs {
	ORH_PRIVS_NONE = 0,   /* no capability at all: detect, env, precreate, refuse, cdi */
	ORH_PRIVS_HOOK,       /* the live hook: mknod, chown, mount, setns, cgroup, bpf, rlimit */
	ORH_PRIVS_READ,       /* inspect: CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH, to read what
			       * NCCL wrote in a container through /proc/PID/root */
};

/* Keep exactly the capabilities of `stage` in the effective and permitted sets, empty the
 * inheritable and ambient sets, and set no_new_privs. Not having one of them (an
 * unprivileged test run) is not an error: the set only ever shrinks. */
int orh_caps_limit(enum orh_stage_privs stage, struct orh_err *err);

/* Did the process hold CAP_SYS_RESOURCE before orh_caps_limit()? (The runtime that
 * will apply the spec's rlimits has the privileges the process started with.) */
bool orh_caps_had_sys_resource(void);
/* Does this process hold cap in its effective set now? */
bool orh_caps_effective(unsigned cap);
/* Is this process in the initial user namespace (not rootless podman's, say)? */
bool orh_in_initial_userns(void);
/* Can this process raise a hard rlimit (and so can a runtime started with its
 * privileges)? CAP_SYS_RESOURCE, and the initial user namespace. */
bool orh_can_raise_hard_rlimits(void);

/* Install the seccomp allow-list of the hook (and set no_new_privs, which it needs).
 * Inherited by children and kept over execve, so the runtime shim never calls it before
 * it executes the runtime. */
int orh_seccomp_confine(struct orh_err *err);

/* The names of the allowed system calls (for docs/security.md and tests). */
const char *const *orh_seccomp_allowed(size_t *n);

/* The BPF program orh_seccomp_confine() loads (generated at build time from the names
 * above): `*n` instructions, made for the AUDIT_ARCH_* value `*arch` (tests). */
struct sock_filter;
const struct sock_filter *orh_seccomp_filter_insns(size_t *n, uint32_t *arch);

#endif
