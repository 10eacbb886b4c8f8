/* SPDX-License-Identifier: Apache-2.0 */
/* One run of the hook for one container (src/cmd/hook.c): its state, shared by the
 * driver (cmd_hook.c) and the stages' steps (hook_stages.c). */
#ifndef ORH_CMD_HOOK_H
#define ORH_CMD_HOOK_H

#include <limits.h>
#include <stdbool.h>

#include "orh/apply/apply.h"
#include "orh/cmd/commands.h"
#include "orh/decide/decide.h"
#include "orh/decide/oci.h"
#include "orh/apply/record.h"

struct hook {
	struct orh_ctx *ctx;
	const char *stage;
	struct orh_oci_state st;
	json_t *spec;
	struct orh_target target;   /* the container's process, held from its check on */
	int rootfd;                 /* its rootfs, as the check found it */
	bool readonly;              /* the spec's root.readonly */
	enum orh_activation_result act;
	struct orh_netns_info netns;
	struct orh_decision d;       /* the decision (decide.c); d.plan is what is applied */
	const char *step;            /* the step of the container callback under way */
	char state_dir[PATH_MAX];
	struct orh_record_in rec;    /* what this stage did, for its record.json */
	struct orh_strv rwarn;       /* the stage's warnings that the record holds */
	json_t *snap;                /* nccl-conf: the shim's reading of the node, or NULL */
	char snap_path[PATH_MAX];    /* where it was */
	bool at_start;               /* run by the NRI plugin at StartContainer (no bundle) */
	const char *start_token;     /* then: the token the plugin bound node.json to */
	char fail_msg[ORH_ERR_MAX];  /* the step that failed the container, and why */
	double t0;                   /* monotonic ms at the start */
	double container_ms;         /* the decision's container callback took */
};

/* What the log says happens after a failed step under on_error = warn. */
#define NEXT_OTHERS "the container starts without this step, the others still run"
#define NEXT_NONE "the container starts unchanged"
#define NEXT_GONE "no other step runs"

/* The container's id for the log ("?" before the state is read). */
const char *orh_hook_cid(const struct hook *h);
/* Apply the on_error policy to a failed step: ORH_EXIT_FAIL fails the container, else
 * the log says what happens next (NEXT_*). */
int orh_hook_failed_as(struct hook *h, const char *step, const struct orh_err *err,
		       const char *next);
/* The same, the other steps still running (NEXT_OTHERS). */
int orh_hook_failed(struct hook *h, const char *step, const struct orh_err *err);
/* A step's time since t0, in the record. */
void orh_hook_record_step(struct hook *h, const char *name, double t0);

#endif
