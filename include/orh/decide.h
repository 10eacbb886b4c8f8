/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one decision (src/container/decide.c): what a container on this node gets, for
 * every way in — the live hook and its nccl-conf and cdi-* stages, precreate, the shim,
 * cdi, env and detect. Each caller hands in what it knows; the decision reads the node
 * (discovery, through the sysroot) and nothing of the container but what the caller's
 * callback reads, and only once the container is activated. Appliers apply the result.
 */
#ifndef ORH_DECIDE_H
#define ORH_DECIDE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/config.h"
#include "orh/inventory.h"
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
};

struct orh_decision {
	enum orh_activation_result act;
	char why[192];                    /* why it is activated or not */
	bool asked;                       /* it asked: orh_activation_asked() */
	struct orh_container_facts facts;
	struct orh_inventory inv;         /* when have_plan */
	struct orh_plan plan;             /* when have_plan */
	bool have_plan;
	/* the spec sets RLIMIT_MEMLOCK: the user's limit wins, plan.set_memlock is false */
	bool memlock_user;
	/* discovery's warnings, then the plan's, then the decision's own */
	struct orh_strv warnings;
	/* on failure, the step: "the request" (a bad oci-rdma-hook/ annotation or
	 * OCI_RDMA_HOOK_ variable), "container" (the callback), "discovery" */
	const char *step;
	/* rule 9: per device, near the container's GPUs and why not (facts point here) */
	bool *nic_near;
	char (*nic_why)[224];
};

/* Decide. act == ORH_ACT_SKIP: leave the container as it is (have_plan false). A
 * container is left unchanged too when the plan is empty (orh_plan_is_empty). -errno
 * on failure, out->step naming the step; *out is then partly filled (act, why) and must
 * be freed. */
int orh_decide(const struct orh_decide_in *in, struct orh_decision *out, struct orh_err *err);
void orh_decision_free(struct orh_decision *d);

#endif
