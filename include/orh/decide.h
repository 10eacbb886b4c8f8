/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one decision (src/decide/decide.c): what a container on this node gets, for
 * every way in — the live hook and its nccl-conf and cdi-* stages, precreate, the shim,
 * cdi, env and detect. Each caller hands in what it knows; the decision reads the node
 * (discovery, through the sysroot, or the snapshot of an earlier decision for the same
 * container: the shim's, for its nccl-conf stage) and nothing of the container but what
 * the caller's callback reads, and only once the container is activated. Appliers apply
 * the result.
 */
#ifndef ORH_DECIDE_H
#define ORH_DECIDE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/gpu.h"
#include "orh/inventory.h"
#include "orh/activation.h"
#include "orh/config.h"
#include "orh/oci.h"
#include "orh/plan.h"
#include "orh/util.h"

struct orh_decide_in {
	const struct orh_config *cfg;
	const char *sysroot;              /* "/" or a fake tree */
	enum orh_gid_scan scan;           /* ORH_GIDS_ALL for detect, else ORH_GIDS_PLAN */
	/* the container's spec, or NULL for a container on the host network that asked for
	 * nothing (env, detect, cdi) */
	const json_t *spec;
	const json_t *state_annotations;  /* the OCI state's, used when the spec has none */
	bool requested;                   /* the way in is the request (a CDI device) */
	/* Facts that need the container itself (its network namespace): called once it is
	 * activated, before discovery; NULL when there are none. */
	int (*container_facts)(void *arg, struct orh_container_facts *facts,
			       struct orh_err *err);
	void *arg;
	/* the most memlock the applier can give (a runtime without CAP_SYS_RESOURCE in the
	 * initial user namespace: its hard limit); 0: no ceiling */
	uint64_t memlock_ceiling;
	/* the node as an earlier decision for this container read it (orh/snapshot.h), named
	 * `snapshot_what` in errors; NULL: read the node through the sysroot. A snapshot that
	 * cannot be restored is a warning, and the node is read. */
	const json_t *snapshot;
	const char *snapshot_what;
};

struct orh_decision {
	enum orh_activation_result act;
	char why[192];                    /* why it is activated or not */
	bool asked;                       /* it asked: orh_activation_asked() */
	struct orh_container_facts facts;
	struct orh_inventory inv;         /* when have_plan */
	struct orh_plan plan;             /* when have_plan (points into inv) */
	bool have_plan;                   /* the node was read: inv and plan are the decision's */
	/* facts.user_memlock: the user's limit wins, plan.set_memlock is false */
	bool memlock_user;
	/* the activation's warnings, then discovery's (the inventory's, then the GPUs'), then
	 * the plan's, then the decision's own */
	struct orh_strv warnings;
	/* on failure, the step: "the request" (a bad oci-rdma-hook/ annotation or
	 * OCI_RDMA_HOOK_ variable), "container" (the callback), "discovery" */
	const char *step;
	/* the GPUs the container holds, when a subset of the node's (facts.gpus_held points
	 * here; rule 9) */
	bool *gpus_held;
	/* the node's GPUs, when they were read (facts.gpus points here), else why not
	 * (gpus_error, or NULL: not needed) */
	struct orh_gpus gpus;
	bool have_gpus;
	char *gpus_error;
	bool from_snapshot;               /* the node came from in->snapshot */
};

/*
 * The node as the decision sees it: read once (orh_decide reads it through the sysroot),
 * then only looked at.
 */
struct orh_node_view {
	const struct orh_inventory *inv;
	const struct orh_gid_reader *gids; /* how the planner reads GID entries; NULL: inv's
					    * own tables (orh_gids_in_memory) */
	const struct orh_gpus *gpus;       /* NULL: not read (no GPU subset is possible) */
	const char *gpus_error;            /* why they could not be read, or NULL */
};

/* The decision for an activated container from what was read: the GPUs the container
 * holds (rule 9's input), the plan, every warning (node->inv's first),
 * and the memlock rules (the user's limit wins; never more than memlock_ceiling, 0: no
 * ceiling). d->facts is its input, filled by the activation step; d->plan points into
 * node->inv. Reads nothing but GID entries, through node->gids. */
int orh_decide_node(const struct orh_config *cfg, const struct orh_node_view *node,
		    uint64_t memlock_ceiling, struct orh_decision *d, struct orh_err *err);

/* Decide. act == ORH_ACT_SKIP: leave the container as it is (have_plan false). A
 * container is left unchanged too when the plan is empty (orh_plan_is_empty). -errno
 * on failure, out->step naming the step; *out is then partly filled (act, why) and must
 * be freed. */
int orh_decide(const struct orh_decide_in *in, struct orh_decision *out, struct orh_err *err);
void orh_decision_free(struct orh_decision *d);

#endif
