/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Activation (src/decide/activation.c): whether a container is served, from the node
 * config, the container's request and the facts its spec gives, and the sentence that
 * says why.
 */
#ifndef ORH_ACTIVATION_H
#define ORH_ACTIVATION_H

#include <jansson.h>
#include <stdbool.h>

#include "orh/config.h"
#include "orh/oci.h"
#include "orh/plan.h"
#include "orh/util.h"

enum orh_activation_result {
	ORH_ACT_SKIP = 0,    /* leave the container exactly as it is */
	ORH_ACT_DEFAULT,     /* activated by node policy (activation = always) */
	ORH_ACT_REQUESTED,   /* the container asked (oci-rdma-hook/enable=true) */
};

/* Decide from the node config, the container's request and the facts its spec gives
 * (orh_container_facts_read, before: a pod sandbox is never served; activation = devices
 * serves a container holding RDMA nodes; request_scope = allocated serves none that holds
 * no uverbs node, whatever it asks, with a warning when it asked). The request is its
 * annotations (the spec's, or the state's) and, with cfg->request_env, its process.env
 * (env: the spec's process.env array, may be NULL). Each field is the annotation when
 * that is set, else the variable (the last entry of that name, as the runtime gives the
 * process); a variable that says otherwise, or that the config ignores, is named in a
 * warning pushed to *warnings (may be NULL). Fills facts->has_preset/preset. A bad value
 * is an error naming the annotation or the process.env entry. */
int orh_activation_decide(const struct orh_config *cfg, const json_t *annotations,
			  const json_t *env, enum orh_activation_result *out,
			  struct orh_container_facts *facts, struct orh_strv *warnings,
			  struct orh_err *err);
/* Did the container ask for RDMA (the enable field that wins is set and is not "false";
 * an unacceptable value counts as asking)? What on_error = fail applies to. */
bool orh_activation_asked(const struct orh_config *cfg, const json_t *annotations,
			  const json_t *env);
/* The same, and which field decides: ORH_ANNOTATION_ENABLE when the container carries
 * the annotation, ORH_ENV_ENABLE when only the variable (and cfg->request_env), NULL when
 * neither. With the field set and *asked false, the container opted out. */
const char *orh_activation_enable_field(const struct orh_config *cfg, const json_t *annotations,
					const json_t *env, bool *asked);
struct orh_decide_in;
struct orh_decision;
/* d->why: why the container is activated or not (in->requested: a CDI device; by: the
 * field of the request that decides enable, orh_activation_enable_field, or NULL). */
void orh_activation_why(const struct orh_decide_in *in, struct orh_decision *d,
		       const char *by);

#endif
