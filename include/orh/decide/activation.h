/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Activation (src/decide/activation.c): whether a container is served, from the node
 * config, the container's request and the facts its spec gives, and the sentence that
 * says why.
 */
#ifndef ORH_DECIDE_ACTIVATION_H
#define ORH_DECIDE_ACTIVATION_H

#include <jansson.h>
#include <stdbool.h>

#include "orh/node/config.h"
#include "orh/decide/oci.h"
#include "orh/decide/plan.h"
#include "orh/base/util.h"

enum orh_activation_result {
	ORH_ACT_SKIP = 0,    /* leave the container exactly as it is */
	ORH_ACT_DEFAULT,     /* activated by node policy (activation = always) */
	ORH_ACT_REQUESTED,   /* the container asked (oci-rdma-hook/enable=true) */
};

/* Why a container is activated or not: decided with the result (orh_activation_decide(),
 * and orh_decide() for the ways in without a spec or with a CDI device), its sentence from
 * a table (orh_activation_sentence()). */
enum orh_activation_reason {
	ORH_WHY_NOT_ASKED = 0,       /* activation = annotation, and it did not ask */
	ORH_WHY_CDI,                 /* given a device of the CDI spec */
	ORH_WHY_SANDBOX,             /* a Kubernetes pod sandbox: never served */
	ORH_WHY_ASKED,               /* it asked (the enable field, by_env says which) */
	ORH_WHY_DEVICES,             /* activation = devices, and it holds RDMA nodes */
	ORH_WHY_HOST,                /* no spec: a container on the host network */
	ORH_WHY_ALWAYS,              /* activation = always */
	ORH_WHY_OPTED_OUT,           /* its enable field says false */
	ORH_WHY_SCOPE_ASKED,         /* it asked, but request_scope = allocated (held says) */
	ORH_WHY_SCOPE_ALWAYS,        /* activation = always, but request_scope = allocated */
	ORH_WHY_SCOPE_DEVICES,       /* activation = devices, but request_scope = allocated */
	ORH_WHY_NO_DEVICES,          /* activation = devices, and it holds no RDMA node */
	ORH_WHY_BAD_REQUEST,         /* a bad oci-rdma-hook/ annotation or variable */
};
/* What a container left out by request_scope = allocated holds. */
enum orh_activation_held {
	ORH_HELD_NO_RDMA = 0,        /* no RDMA device node */
	ORH_HELD_NO_UVERBS,          /* umad or issm nodes only */
	ORH_HELD_GPUS_ONLY,          /* GPUs, no RDMA device node */
};
struct orh_activation_why {
	enum orh_activation_reason reason;
	bool by_env;                 /* ASKED, OPTED_OUT, SCOPE_ASKED: the process.env
				      * variable decided, not the annotation */
	enum orh_activation_held held; /* SCOPE_*: what it holds */
};
/* The reason's name, as env --explain shows it ("asked", "sandbox", ...). */
const char *orh_activation_reason_name(enum orh_activation_reason r);
/* The sentence of why (its table), into out. */
void orh_activation_sentence(const struct orh_activation_why *why, char *out, size_t size);

/* Decide from the node config, the container's request and the facts its spec gives
 * (orh_container_facts_read, before: a pod sandbox is never served; activation = devices
 * serves a container holding RDMA nodes; request_scope = allocated serves none that holds
 * no uverbs node, whatever it asks, with a warning when it asked). The request is its
 * annotations (the spec's, or the state's) and, with cfg->request_env, its process.env
 * (env: the spec's process.env array, may be NULL). Each field is the annotation when
 * that is set, else the variable (the last entry of that name, as the runtime gives the
 * process); a variable that says otherwise, or that the config ignores, is named in a
 * warning pushed to *warnings (may be NULL). Fills facts->has_preset/preset, and *why
 * (may be NULL) with the reason. A bad value is an error naming the annotation or the
 * process.env entry. */
int orh_activation_decide(const struct orh_config *cfg, const json_t *annotations,
			  const json_t *env, enum orh_activation_result *out,
			  struct orh_activation_why *why, struct orh_container_facts *facts,
			  struct orh_strv *warnings, struct orh_err *err);
/* Did the container ask for RDMA (the enable field that wins is set and is not "false";
 * an unacceptable value counts as asking)? What on_error = fail applies to. */
bool orh_activation_asked(const struct orh_config *cfg, const json_t *annotations,
			  const json_t *env);
/* The same, and which field decides: ORH_ANNOTATION_ENABLE when the container carries
 * the annotation, ORH_ENV_ENABLE when only the variable (and cfg->request_env), NULL when
 * neither. With the field set and *asked false, the container opted out. */
const char *orh_activation_enable_field(const struct orh_config *cfg, const json_t *annotations,
					const json_t *env, bool *asked);

#endif
