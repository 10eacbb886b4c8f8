/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading what the runtime hands us: the OCI state (hook stdin) and the bundle's
 * config.json (src/decide/oci.c), and the facts a spec gives about its container
 * (src/decide/facts.c). orh_spec_load, orh_spec_load_at and orh_spec_load_file read the
 * file; every other function is a pure function of its inputs.
 */
#ifndef ORH_DECIDE_OCI_H
#define ORH_DECIDE_OCI_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "orh/node/config.h"
#include "orh/decide/plan.h"
#include "orh/base/util.h"

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

/* Does the spec's process.rlimits list `type` ("RLIMIT_MEMLOCK")? */
bool orh_spec_has_rlimit(const json_t *spec, const char *type);
/* The spec's process.env (NULL when absent). */
const json_t *orh_spec_env(const json_t *spec);

/* The facts a spec gives about its container (include/orh/decide/plan.h): linux.devices
 * character devices, NVIDIA_VISIBLE_DEVICES, process.rlimits' RLIMIT_MEMLOCK, whether it
 * is a Kubernetes pod sandbox (annotation io.kubernetes.cri.container-type or
 * io.kubernetes.cri-o.ContainerType "sandbox"; state_annotations are used when the spec
 * has none). Only fields of *facts
 * that the spec decides are written. */
void orh_container_facts_read(const json_t *spec, const json_t *state_annotations,
			      struct orh_container_facts *facts);
/* The annotations by which the CRI implementations mark a pod's sandbox: containerd's CRI
 * plugin and CRI-O, ORH_SANDBOX_KEYS names in one string literal, each ended by a NUL (an
 * empty name after the last). A string each user copies into its own array, not a table
 * of pointers: the runtime shim's fast path (src/cmd/shim_fast.c) reads it too, before the
 * C library has relocated anything, and refers to no symbol outside its own object. */
#define ORH_SANDBOX_KEYS 2
#define ORH_SANDBOX_KEYS_TEXT \
	"io.kubernetes.cri.container-type\0" \
	"io.kubernetes.cri-o.ContainerType\0"
/* Does the container hold a device node of RDMA's fixed numbers (uverbs, umad, issm)? */
bool orh_facts_hold_rdma(const struct orh_container_facts *facts);
/* Does it hold a uverbs node of the fixed numbers (an HCA's verbs device, what rule 8
 * limits the plan to)? What request_scope = allocated asks of a container it serves. */
bool orh_facts_hold_uverbs(const struct orh_container_facts *facts);
/* Does the spec give the container GPUs (/dev/nvidiaN nodes, NVIDIA_VISIBLE_DEVICES)? */
bool orh_facts_name_gpus(const struct orh_container_facts *facts);
/* Does the container hold GPUs (the GPUDirect check's test): a /dev/nvidiaN node other than
 * nvidiactl given, or NVIDIA_VISIBLE_DEVICES naming some (set, and not "void" or
 * "none")? */
bool orh_facts_hold_gpus(const struct orh_container_facts *facts);

/* A name of NCCL's debug output (its first len bytes): NCCL_DEBUG, NCCL_DEBUG_SUBSYS,
 * NCCL_DEBUG_FILE and every other NCCL_DEBUG* (the user's, never overridden: one set
 * anywhere turns the capture of what NCCL used off; facts.c) */
bool orh_nccl_debug_name(const char *name, size_t len);
/* Is NAME set in the spec's process.env? */
bool orh_spec_env_has(const json_t *spec, const char *name);
/* The destinations of the spec's mounts that are KEP-5304 device metadata files
 * (orh_dra_meta_path(): a DRA driver's CDI spec mounts them): the first max into out (NULL
 * with max 0: only counted), pointing into the spec. Returns how many there are. */
size_t orh_spec_dra_meta_mounts(const json_t *spec, const char **out, size_t max);
/* The path of the network namespace the spec names (linux.namespaces type "network"
 * with a path), NULL when none is given. *has_netns tells whether the container gets
 * a network namespace of its own at all. */
int orh_spec_netns(const json_t *spec, bool *has_netns, const char **path);

#endif
