/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NRI plugin's messages and conversions (github.com/containerd/nri, pkg/api/api.proto:
 * the part the plugin uses is src/cmd/nri/api*.proto, made into C by protoc-c). The structs
 * here are the plugin's own: src/cmd/nri_msg.c decodes the requests the plugin serves into
 * them, src/cmd/nri_encode.c encodes its answers from them, both through protobuf-c and
 * the generated descriptors; src/cmd/nri_spec.c turns a
 * CreateContainer request into the OCI spec the spec edit works on (orh/cmd/serve.h) and the
 * edit's result into the ContainerAdjustment the runtime applies; src/cmd/nri_limit.c counts
 * the lines the plugin logs. Pure: no socket here (src/cmd/cmd_nri.c).
 *
 * Only what the oldest runtimes served read is sent (CRI-O 1.30 bundles NRI v0.6.0,
 * containerd 2.0 and 2.1 v0.8.0): annotations, mounts, env, hooks, linux.devices,
 * linux.resources.devices (applied from v0.10 on; each device added brings its own rule in
 * every version) and rlimits (since v0.4.0). Of the request, Container.user (field 21)
 * comes from newer runtimes only: without it the spec has no process.user.
 */
#ifndef ORH_CMD_NRI_H
#define ORH_CMD_NRI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/cmd/ctx.h"
#include "orh/cmd/serve.h"
#include "orh/base/util.h"

#define ORH_NRI_PLUGIN_SERVICE "nri.pkg.api.v1alpha1.Plugin"
#define ORH_NRI_RUNTIME_SERVICE "nri.pkg.api.v1alpha1.Runtime"
/* the NRI version the plugin says it speaks at registration (the runtime logs it) */
#define ORH_NRI_VERSION "v0.8.0"
/* Event CREATE_CONTAINER (4): its bit in ConfigureResponse.events */
#define ORH_NRI_EVENT_CREATE_CONTAINER (1 << (4 - 1))
/* Event START_CONTAINER (6): the container created, its process not started yet */
#define ORH_NRI_EVENT_START_CONTAINER (1 << (6 - 1))
/* Event REMOVE_CONTAINER (11), and ContainerState CONTAINER_UNKNOWN (0): the state of a
 * container the runtime never created (one a validator of its rejected) */
#define ORH_NRI_EVENT_REMOVE 11
#define ORH_NRI_EVENT_REMOVE_CONTAINER (1 << (ORH_NRI_EVENT_REMOVE - 1))
#define ORH_NRI_STATE_UNKNOWN 0

struct orh_nri_kv {
	char *key, *value;
};

struct orh_nri_kvs {
	struct orh_nri_kv *v;
	size_t n;
};

struct orh_nri_mount {
	char *destination, *type, *source;
	struct orh_strv options;
};

struct orh_nri_hook {
	char *path;
	struct orh_strv args, env;
	bool has_timeout;
	int64_t timeout;
};

/* Hooks{prestart=1, create_runtime=2, create_container=3, start_container=4, poststart=5,
 * poststop=6}: index = field number - 1 */
enum { ORH_NRI_HOOK_KINDS = 6 };
extern const char *const orh_nri_hook_kinds[ORH_NRI_HOOK_KINDS]; /* the OCI spec's names */

struct orh_nri_hooks {
	struct orh_nri_hook *v[ORH_NRI_HOOK_KINDS];
	size_t n[ORH_NRI_HOOK_KINDS];
};

struct orh_nri_device {
	char *path, *type;
	int64_t major, minor;
	bool has_mode, has_uid, has_gid;
	uint32_t mode, uid, gid;
};

struct orh_nri_rule {  /* LinuxDeviceCgroup */
	bool allow;
	char *type, *access;
	bool has_major, has_minor;
	int64_t major, minor;
};

struct orh_nri_rlimit {
	char *type;
	uint64_t hard, soft;
};

struct orh_nri_pod {
	char *id, *name, *namespace, *uid;
	struct orh_nri_kvs annotations;
};

struct orh_nri_container {
	char *id, *pod_id, *name;
	struct orh_nri_kvs annotations, namespaces; /* namespaces: type -> path */
	struct orh_strv args, env;
	struct orh_nri_mount *mounts;
	size_t n_mounts;
	struct orh_nri_hooks hooks;
	struct orh_nri_device *devices;
	size_t n_devices;
	struct orh_nri_rule *rules;             /* linux.resources.devices */
	size_t n_rules;
	struct orh_nri_rlimit *rlimits;
	size_t n_rlimits;
	uint32_t pid;                           /* StartContainer: its created process */
	bool has_user;
	uint32_t uid, gid;
	uint32_t *gids;
	size_t n_gids;
};

struct orh_nri_create {  /* CreateContainerRequest{pod=1, container=2} */
	struct orh_nri_pod pod;
	struct orh_nri_container ctr;
};

/* ContainerAdjustment: what the plugin answers CreateContainer with */
struct orh_nri_adjust {
	/* the pod's oci-rdma-hook/ annotations the decision took: the container's spec
	 * carries them, for the nccl-conf stage that decides again from it */
	struct orh_nri_kvs annotations;
	struct orh_nri_mount *mounts;
	size_t n_mounts;
	struct orh_nri_kvs env;
	struct orh_nri_hooks hooks;
	struct orh_nri_device *devices;
	size_t n_devices;
	struct orh_nri_rule *rules;
	size_t n_rules;
	struct orh_nri_rlimit *rlimits;
	size_t n_rlimits;
};

/* The fields of a request read at most (a CreateContainerRequest's, and every other's), the
 * messages inside it counted with it (every env entry, annotation, mount and its options,
 * each element of a packed field, ...): what a decision holds of one request stays bounded
 * (its bytes are: ORH_TTRPC_MSG_MAX). protobuf-c unpacks a request only once these are
 * counted, through an allocator that hands out at most twice the request's bytes and 512
 * bytes a field (src/cmd/nri_msg.c). */
#define ORH_NRI_FIELDS_MAX (1u << 16)

/* The requests: -EBADMSG with what was wrong (err, naming the field) for a malformed one;
 * -E2BIG, naming the field where it stopped, for one of more than ORH_NRI_FIELDS_MAX
 * fields (or one whose unpacking would take more than its allocator's bound). Unknown
 * fields are stepped over. */
int orh_nri_create_decode(const void *p, size_t n, struct orh_nri_create *req,
			  struct orh_err *err);
/* StartContainerRequest: the container's id alone (malloc'd), read without unpacking the
 * rest; NULL where the message holds none, or one that cannot be a state directory's
 * name's length */
char *orh_nri_start_id(const void *p, size_t n);
/* StartContainerRequest: the same fields, the container's pid with them */
int orh_nri_start_decode(const void *p, size_t n, struct orh_nri_create *req,
			 struct orh_err *err);
void orh_nri_create_free(struct orh_nri_create *req);
/* ConfigureRequest: the plugin's config (the text of plugin_config_path's file, for a plugin
 * the runtime started), the runtime's name and version (each may come back NULL) and its
 * request timeout in milliseconds (0 when not said). */
struct orh_nri_configure {
	char *config, *runtime_name, *runtime_version;
	int64_t request_timeout_ms;
};
int orh_nri_configure_decode(const void *p, size_t n, struct orh_nri_configure *req,
			     struct orh_err *err);
void orh_nri_configure_free(struct orh_nri_configure *req);
/* SynchronizeRequest: its `more` alone (the pods and containers are not needed). */
int orh_nri_sync_decode(const void *p, size_t n, bool *more, struct orh_err *err);

/* The answers, appended to b (nri_encode.c). */
void orh_nri_register_encode(struct orh_buf *b, const char *name, const char *idx);
void orh_nri_configure_response_encode(struct orh_buf *b, int32_t events);
void orh_nri_sync_response_encode(struct orh_buf *b, bool more);
/* CreateContainerResponse{adjust=1}: an empty adjustment is an empty response. */
void orh_nri_create_response_encode(struct orh_buf *b, const struct orh_nri_adjust *adj);
/* ContainerAdjustment alone (what the CreateContainerResponse's field 1 holds), and back:
 * the black-box test's fake runtime and the unit tests read it. */
void orh_nri_adjust_encode(struct orh_buf *b, const struct orh_nri_adjust *adj);
int orh_nri_adjust_decode(const void *p, size_t n, struct orh_nri_adjust *adj,
			  struct orh_err *err);
bool orh_nri_adjust_empty(const struct orh_nri_adjust *adj);
/* The hooks of every kind the adjustment adds (nri_spec.c). */
size_t orh_nri_adjust_hooks(const struct orh_nri_adjust *adj);
/* The adjustment's hooks dropped: without hooks (a stage the edit registered where the
 * plugin could not write the file itself), or with the stage run by the plugin at
 * StartContainer. */
void orh_nri_adjust_drop_hooks(struct orh_nri_adjust *adj);
void orh_nri_adjust_free(struct orh_nri_adjust *adj);

/* A ttrpc Response on the plugin's connection of the multiplexer, as frames appended to
 * out: code, msg (NULL: none) and payload (NULL: empty) (nri_encode.c). */
void orh_nri_respond(struct orh_buf *out, uint32_t stream, int32_t code, const char *msg,
		     const struct orh_buf *payload);

/* The header a worker of the plugin writes before its answer (nri_encode.c): one byte, 1
 * when a late answer refuses the container, then the container's name for the log and a
 * NUL. _get: the header's length at the start of p[0..n) (0 until it is whole; the name is
 * p + 1) and *refuse_late. */
void orh_nri_worker_head_put(struct orh_buf *b, bool refuse_late, const char *what);
size_t orh_nri_worker_head_get(const char *p, size_t n, bool *refuse_late);

/* The lines of a kind the plugin logs (nri_limit.c): at most burst of them in a window of
 * window_ms, the others counted. The caller's clock, in milliseconds. */
struct orh_nri_limit {
	const char *what;       /* the lines, for the line that counts them */
	unsigned burst;
	double window_ms;
	double start;           /* the window's start */
	unsigned n;             /* lines logged in it */
	unsigned long dropped;  /* lines counted in it */
};
/* May one more line be logged at now (true), or is it counted (false)? A window over with
 * lines counted in it counts on until orh_nri_limit_end() says how many. */
bool orh_nri_limit_take(struct orh_nri_limit *l, double now);
/* Once the window is over at now (at once with force): the lines it counted (0: none), and
 * a new window from now. */
unsigned long orh_nri_limit_end(struct orh_nri_limit *l, double now, bool force);

/* nri_spec.c: the OCI spec of a CreateContainer request (a new document): the
 * container's annotations with the pod's oci-rdma-hook/ ones it does not set itself (as
 * the handler's pod_annotations passes them), process args, env, user and rlimits,
 * mounts, hooks, linux.namespaces, linux.devices, linux.resources.devices. */
json_t *orh_nri_spec(const struct orh_nri_create *req);
/* What the spec edit changed from before to after (both OCI specs, before the one
 * orh_nri_spec() made), as an adjustment: the devices, rules, rlimits, env entries,
 * mounts and hooks after has and before does not. -EINVAL for a change an adjustment
 * cannot carry (an entry changed or removed). */
int orh_nri_diff(const json_t *before, const json_t *after, struct orh_nri_adjust *adj,
		 struct orh_err *err);

/* Is a container that gets no decision refused: on_error = fail, and it asked for RDMA? */
bool orh_nri_refuses(const struct orh_config *cfg, const struct orh_nri_create *req);
/* "container ID (NAME, pod NAMESPACE/NAME)", for the log: at most max bytes, cut with
 * "..." (the names are the runtime's, unbounded). */
char *orh_nri_describe(const struct orh_nri_create *req, size_t max);

/* Serve one CreateContainer: the spec (orh_nri_spec), the spec edit (orh_spec_serve),
 * the adjustment (orh_nri_diff), and, for a container served, the pod's oci-rdma-hook/
 * annotations that the decision read (the stages read the container's spec, where the
 * runtime does not put the pod's annotations). 0 with adj filled (empty: nothing given) and res the
 * edit's result for the log, or -errno with err when the edit failed or its result
 * cannot be an adjustment; the caller refuses the container only when
 * orh_edit_must_fail(). */
int orh_nri_serve(const struct orh_ctx *ctx, const struct orh_nri_create *req,
		  struct orh_nri_adjust *adj, struct orh_edit_result *res, struct orh_err *err);
/* The same, without hooks where hookless (the reason, for the record) is not NULL: no
 * nccl-conf stage; where the edit lets the plugin write /etc/nccl.conf itself (the
 * container's network known now, res->d), the plan's settings NCCL reads from the file are
 * written to <run dir>/<id>/nccl.conf, bind-mounted read-only over /etc/nccl.conf by the
 * adjustment, and the container's record written beside it (stage "NRI plugin", its
 * edited_by saying "served without hooks (<hookless>)"); what hooks would have done and
 * the plugin cannot goes into res->warnings (and the record), each "not done without
 * hooks: ...". A file or record that cannot be written is such a warning too; the devices,
 * environment and rlimits are given all the same. */
#define ORH_NRI_NOT_DONE "not done without hooks: "
#define ORH_NRI_NOT_DONE_LIST                                                             \
	"the image's own /etc/nccl.conf (the plugin's copy covers it), the image checks and "    \
	"the node's RDMA userspace for the image (the container's root is not read), the "       \
	"checks of the running container (its memlock, device nodes and GIDs)"
int orh_nri_serve_as(const struct orh_ctx *ctx, const struct orh_nri_create *req,
		     const char *hookless, struct orh_nri_adjust *adj,
		     struct orh_edit_result *res, struct orh_err *err);
/* A RemoveContainerRequest{pod=1, container=2}, or with event_msg a StateChangeEvent{event=1,
 * pod=2, container=3} (how runtimes before the call's own send it), checked and unpacked as
 * every request is (nri_msg.c): of the Container, its id (malloc'd; NULL for an event other
 * than REMOVE_CONTAINER), state (4) and created_at (14: 0 where the runtime never created
 * it, or does not say). -EBADMSG, -E2BIG or -ENOMEM with err naming the message and field. */
struct orh_nri_removed {
	char *id;
	int state;
	int64_t created_at;
};
int orh_nri_removed_decode(const void *p, size_t n, bool event_msg,
			   struct orh_nri_removed *rm, struct orh_err *err);

#endif
