/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading what the runtime hands us: the OCI state (hook stdin) and the bundle's
 * config.json, and deciding whether a container is activated (src/container/oci.c).
 * orh_spec_load and orh_spec_load_at read the file; every other function is a pure
 * function of its inputs.
 */
#ifndef ORH_OCI_H
#define ORH_OCI_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "orh/config.h"
#include "orh/plan.h"
#include "orh/util.h"

#define ORH_STATE_MAX_BYTES (1024 * 1024)       /* hook stdin */
/* The whole state read: runtimes write the state and close the hook's stdin at once */
#define ORH_STATE_READ_TIMEOUT_MS 5000
#define ORH_SPEC_MAX_BYTES (16 * 1024 * 1024)   /* config.json */

#define ORH_ANNOTATION_ENABLE "oci-rdma-hook/enable"   /* "true" | "false" */
#define ORH_ANNOTATION_PRESET "oci-rdma-hook/preset"   /* a preset name */
/* The same request in process.env, for engines that cannot set an annotation (docker
 * before API 1.43) and for Kubernetes `env:`; an annotation that is set wins. */
#define ORH_ENV_ENABLE "OCI_RDMA_HOOK_ENABLE"
#define ORH_ENV_PRESET "OCI_RDMA_HOOK_PRESET"

struct orh_oci_state {
	char *id;
	char *bundle;
	char *status;
	pid_t pid;          /* 0 when absent (poststop) */
	json_t *annotations; /* owned reference, may be NULL */
};

int orh_oci_state_parse(const char *buf, size_t len, struct orh_oci_state *st,
			struct orh_err *err);
void orh_oci_state_free(struct orh_oci_state *st);

/* Read and parse <bundle>/config.json (bounded by ORH_SPEC_MAX_BYTES). */
int orh_spec_load(const char *bundle, json_t **spec, struct orh_err *err);
/* The one spec loader: dirfd/file, never through a symlink, a regular file of at most
 * ORH_SPEC_MAX_BYTES, parsed by orh_spec_parse (name in messages). */
int orh_spec_load_at(int dirfd, const char *file, const char *name, json_t **spec,
		     struct orh_err *err);
/* A config.json at any path (env --spec). */
int orh_spec_load_file(const char *path, json_t **spec, struct orh_err *err);
int orh_spec_parse(const char *buf, size_t len, const char *name, json_t **spec,
		   struct orh_err *err);

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
/* The spec's process.env (NULL when absent). */
const json_t *orh_spec_env(const json_t *spec);

/* The facts a spec gives about its container (include/orh/plan.h): linux.devices
 * character devices, NVIDIA_VISIBLE_DEVICES, whether it is a Kubernetes pod sandbox
 * (annotation io.kubernetes.cri.container-type or io.kubernetes.cri-o.ContainerType
 * "sandbox"; state_annotations are used when the spec has none). Only fields of *facts
 * that the spec decides are written. */
void orh_container_facts_read(const json_t *spec, const json_t *state_annotations,
			      struct orh_container_facts *facts);
/* Does the container hold a device node of RDMA's numbers (uverbs, umad, issm)? */
bool orh_facts_hold_rdma(const struct orh_container_facts *facts);
/* Does it hold a uverbs node (an HCA's verbs device, what rule 8 limits the plan to)?
 * What request_scope = allocated asks of a container it serves. */
bool orh_facts_hold_uverbs(const struct orh_container_facts *facts);

/* Is NAME set in the spec's process.env? */
bool orh_spec_env_has(const json_t *spec, const char *name);
/* The path of the network namespace the spec names (linux.namespaces type "network"
 * with a path), NULL when none is given. *has_netns tells whether the container gets
 * a network namespace of its own at all. */
int orh_spec_netns(const json_t *spec, bool *has_netns, const char **path);

#endif
