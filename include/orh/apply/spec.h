/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Editing a container's config.json before the runtime creates the container: the one
 * way to change PID 1's environment and rlimits (precreate hook, runtime shim). Pure
 * functions of their inputs (src/apply/spec.c). The JSON helpers it uses, integers above
 * INT64_MAX among them, are orh/base/json.h's.
 */
#ifndef ORH_APPLY_SPEC_H
#define ORH_APPLY_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/decide/decide.h"
#include "orh/base/json.h"
#include "orh/decide/plan.h"
#include "orh/base/util.h"

/* The name our hooks run under (args[0]; the binary's name). */
#define ORH_HOOK_NAME "oci-rdma-hook"

struct orh_spec_opts {
	bool add_ipc_lock;  /* add CAP_IPC_LOCK to bounding/effective/permitted */
	/* OCI hook entries ({path, args, timeout}) of this binary's `nccl-conf` and
	 * `poststop` stages, or NULL (borrowed) */
	const json_t *nccl_hook;
	const json_t *poststop_hook;
	struct orh_strv *warnings; /* where to say what was kept that may not work; or NULL */
	/* the decision's memlock (orh_decision.memlock), or NULL: none set */
	const struct orh_memlock_verdict *memlock;
};

/* What orh_spec_apply_plan() changed, for the log line of the driver. */
struct orh_spec_changes {
	unsigned devices;        /* linux.devices entries added */
	unsigned allow_rules;    /* linux.resources.devices rules added */
	bool memlock;            /* process.rlimits RLIMIT_MEMLOCK added */
	unsigned hooks;          /* hooks (nccl-conf, poststop) added */
	unsigned caps;           /* capability sets CAP_IPC_LOCK was added to */
	unsigned env;            /* process.env entries added (settings NCCL does not read) */
	unsigned sysfs;          /* mounts added over /sys/class/infiniband* (the sysfs
				  * view of the devices given: orh/apply/sysview.h) */
};

/*
 * Apply plan to spec (a parsed config.json), in place:
 *  - linux.devices: {type "c", path, major, minor, fileMode, uid 0, gid 0} for each plan
 *    node whose path is not listed yet; an entry already there is kept as it is, with a
 *    warning (opts->warnings) when it is not the node's type and numbers;
 *  - linux.resources.devices: {allow, type "c", major, minor, access "rwm"} appended (after
 *    the runtime's deny-all) unless the same rule is there;
 *  - process.rlimits: RLIMIT_MEMLOCK {soft, hard} when opts->memlock is set, unless an
 *    RLIMIT_MEMLOCK entry is there already (the decision's, from an earlier edit: the
 *    decision sets none where the spec had one);
 *  - hooks.createRuntime: opts->nccl_hook, and hooks.poststop: opts->poststop_hook, when
 *    the plan has NCCL settings, unless one of our hooks is there for that stage already
 *    (podman's hooks.d adds the live createRuntime hook and poststop). NCCL's own settings
 *    (NCCL_*) are never put into process.env: the hook writes them into /etc/nccl.conf,
 *    where the container's own environment and the image's own file win, and where
 *    processes started with exec find them too;
 *  - process.env: "NAME=VALUE" for each setting NCCL does not read itself (UCX_*:
 *    orh_env_nccl_reads), whose readers look only in the environment, unless process.env
 *    sets NAME already (the image's or the user's value stands);
 *  - CAP_IPC_LOCK in process.capabilities.{bounding,effective,permitted} when
 *    opts->add_ipc_lock and the spec has a capabilities object (a spec without one keeps
 *    every capability of the runtime's default and is left alone).
 * Idempotent: applying the same plan twice gives the spec of one application.
 * Returns the number of edits (0: the spec is unchanged) or -errno; changes may be NULL.
 */
int orh_spec_apply_plan(json_t *spec, const struct orh_plan *plan,
			const struct orh_spec_opts *opts, struct orh_spec_changes *changes,
			struct orh_err *err);
/* Does the spec carry a hook of ours that writes /etc/nccl.conf (createRuntime, prestart or
 * nccl-conf, in hooks.createRuntime or hooks.prestart: podman's hooks.d registers the live
 * hook itself)? */
bool orh_spec_has_our_live_hook(const json_t *spec);
/* Add a copy of the nccl-conf hook entry to hooks.createRuntime, as orh_spec_apply_plan()
 * does, unless orh_spec_has_our_live_hook(); *added says whether it was. */
int orh_spec_add_nccl_hook(json_t *spec, const json_t *hook, bool *added, struct orh_err *err);

/* Serialise a spec (orh_json_dump: integers above INT64_MAX as plain numbers); *out is
 * malloc'd and NUL-terminated. */
int orh_spec_dump(const json_t *spec, char **out, size_t *len, struct orh_err *err);

#endif
