/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The spec edit as the precreate hook and the runtime shim perform it: the decision
 * (orh_decide: activation from the spec's annotations and process.env, the node read, the
 * plan for this container), then its plan written into the spec (src/cmd/serve.c). The
 * shim writes the result with orh_write_atomic() (orh/base/atomic.h).
 */
#ifndef ORH_CMD_SERVE_H
#define ORH_CMD_SERVE_H

#include <jansson.h>
#include <stdbool.h>

#include "orh/decide/activation.h"
#include "orh/decide/decide.h"
#include "orh/node/config.h"
#include "orh/apply/handoff.h"
#include "orh/decide/oci.h"
#include "orh/apply/spec.h"
#include "orh/base/util.h"

struct orh_edit_result {
	enum orh_activation_result activation;
	bool asked;                     /* it asked: orh_activation_asked() */
	char why[192];                  /* why it is served or not (orh_decision.why) */
	int edits;                      /* orh_spec_apply_plan()'s count; 0: spec unchanged */
	struct orh_spec_changes changes;
	enum orh_preset preset;         /* the plan's preset when activated */
	struct orh_strv warnings;       /* the decision's warnings and the network namespace's,
					 * for the driver's log */
	/* the node as the decision read it (orh/node/snapshot.h), when asked for and the edit
	 * registered the nccl-conf stage: for that stage (orh/apply/handoff.h); else NULL */
	json_t *snapshot;
	/* ORH_SERVE_TOKEN: the token the stage's hook entry carries, to bind snapshot to */
	char token[ORH_HANDOFF_TOKEN_LEN + 1];
	/* ORH_SERVE_CONF: the caller writes /etc/nccl.conf itself (orh/apply/shimconf.h), and the
	 * edit registered no nccl-conf stage; d is the decision, the caller's to read */
	bool own_conf;
	struct orh_decision *d;
	/* the image checks refuse the container (orh_decision.image_verdict.refuses: it
	 * asked and can use none of its devices, under on_error or image_check = fail) */
	bool image_refuses;
};

/* Serve the container a spec describes, in the spec (precreate, the runtime shim): the
 * decision (orh_decide), then its plan written into the spec (orh_spec_apply_plan). 0
 * with res->edits == 0 leaves spec untouched (not activated, or no usable RDMA port for a
 * container that did not ask; one that asked gets -ENODEV with the reason). On an error
 * the spec may be partly edited: the caller must then use the original document. */
struct orh_ctx;
/* What the caller does itself: the runtime shim and the NRI plugin, which know the
 * container id. */
enum orh_serve_flags {
	ORH_SERVE_SNAPSHOT = 1 << 0,    /* hand the node to the nccl-conf stage (res->snapshot) */
	ORH_SERVE_NO_POSTSTOP = 1 << 1, /* remove the state directory at `delete`: register no
					 * poststop hook */
	ORH_SERVE_CONF = 1 << 2,        /* write /etc/nccl.conf, where the container's network
					 * is known now (orh_shimconf_network_known) and no hook
					 * of ours in the spec does: res->own_conf */
	ORH_SERVE_TOKEN = 1 << 3,       /* the nccl-conf stage's hook entry carries a new token
					 * in its environment (ORH_HANDOFF_ENV, res->token), for
					 * a caller that binds the snapshot to it (the NRI
					 * plugin: the runtime writes config.json after it) */
};
int orh_spec_serve(const struct orh_ctx *ctx, json_t *spec, unsigned flags,
		   struct orh_edit_result *res, struct orh_err *err);
/* The same for the runtime shim, whose bundle (bundle_fd, or -1) holds the container's
 * root: where the shim serves the container alone (ORH_SERVE_CONF, no nccl-conf stage),
 * the decision reads the image there (the image checks), its warnings in res->warnings,
 * its refusal an error (-EPERM, res->image_refuses). */
int orh_spec_serve_at(const struct orh_ctx *ctx, json_t *spec, int bundle_fd, unsigned flags,
		      struct orh_edit_result *res, struct orh_err *err);
/* The caller could not write /etc/nccl.conf after all (res->own_conf): register the
 * nccl-conf stage in the spec as orh_spec_serve() would have (no poststop hook), with the
 * node for it (res->snapshot) under ORH_SERVE_SNAPSHOT; res->own_conf becomes false. */
int orh_edit_add_stage(const struct orh_ctx *ctx, json_t *spec, unsigned flags,
		       struct orh_edit_result *res, struct orh_err *err);
void orh_edit_result_free(struct orh_edit_result *res);
/* Must a failed edit fail the container (config on_error = fail and it asked, or the
 * image checks refuse it)? */
bool orh_edit_must_fail(const struct orh_config *cfg, const struct orh_edit_result *res);

#endif
