/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reading of the node of the spec edit that registered a container's nccl-conf stage
 * (the runtime shim's, the NRI plugin's), handed to that stage (src/apply/handoff.c), so
 * that the node is read once per container: the node snapshot (orh/node/snapshot.h) in
 * <run dir>/<container id>/node.json, a root-only directory nothing in a container or an
 * image can write. It is bound to the sysroot it was read through and to the spec that
 * registers the stage: the shim's to the config.json it wrote (its device and inode); the
 * NRI plugin's, whose answer the runtime makes into config.json only later, to a token
 * that the stage's hook entry carries in its environment (ORH_HANDOFF_ENV). The stage
 * takes it only when both are its own, and otherwise reads the node itself. The file is
 * the snapshot's JSON object without its "node" on its first line, then the node's text
 * (orh/node/snapshot.h's lines): the stage reads those without a JSON string's lexing.
 */
#ifndef ORH_APPLY_HANDOFF_H
#define ORH_APPLY_HANDOFF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include <sys/stat.h>

#include "orh/apply/netns.h"
#include "orh/decide/plan.h"
#include "orh/apply/statedir.h"
#include "orh/base/util.h"

#define ORH_HANDOFF_MAX_BYTES (4 * 1024 * 1024)

/* The variable of the nccl-conf stage's environment (its hook entry's env) that holds the
 * token its snapshot is bound to, and a new token: 32 hex digits from getrandom(). */
#define ORH_HANDOFF_ENV "OCI_RDMA_HOOK_HANDOFF"
#define ORH_HANDOFF_TOKEN_LEN 32
void orh_handoff_token(char out[ORH_HANDOFF_TOKEN_LEN + 1]);

/* Write <run_dir>/<id's state directory>/node.json (orh_state_dir_name()): snapshot
 * (taken) bound to sysroot and to <bundle>/config.json as it is now, or, where bundle is
 * NULL, to token. *created: the container's state directory was made here. */
int orh_handoff_write(const char *run_dir, const char *id, const char *bundle,
		      const char *token, const char *sysroot, json_t *snapshot, bool *created,
		      struct orh_err *err);

/* Remove <run_dir>/<id's state directory>/node.json, if there is one: an older one must
 * not outlive an edit that did not write it. */
void orh_handoff_drop(const char *run_dir, const char *id);

/* The snapshot in <state_dir>/node.json when it is bound to sysroot and to
 * <bundle>/config.json, or to token (the stage's ORH_HANDOFF_ENV, or NULL), is owned by
 * this user and writable by no other; NULL otherwise, with why ("" when there is none). */
json_t *orh_handoff_take(const char *state_dir, const char *bundle, const char *token,
			 const char *sysroot, char *why, size_t size);
/* The NRI plugin runs the container's nccl-conf stage itself at StartContainer, where the
 * runtime has created the container and not started it (no OCI hook): its CreateContainer
 * answer leaves <state dir>/nri-start (ORH_START_FILE, root's, 0600) holding the token
 * node.json is bound to. Written after node.json; the plugin at StartContainer, restarted
 * or not, runs the stage where it is there. */
int orh_handoff_start_mark(const char *run_dir, const char *id, const char *token,
			   struct orh_err *err);
/* Is the mark there (one faccessat: the plugin's own loop asks it of every container)? */
bool orh_handoff_start_marked(const char *run_dir, const char *id);
/* Its token into out; false where there is no mark of this user's alone holding one. */
bool orh_handoff_start_token(const char *run_dir, const char *id,
			     char out[ORH_HANDOFF_TOKEN_LEN + 1]);
/* Who read the node a snapshot taken holds, as the record says it: "by the NRI plugin"
 * (bound to a token), "by the runtime shim". */
const char *orh_handoff_reader(const json_t *snap);

/* The container's network as the shim read it by its path (the namespace's nsfs inode,
 * the default route's interface, the addresses rule 4 looks for: facts), and back: true
 * when snap holds the facts of the namespace ns (the stage's container's), filled into
 * *out for the decision; the addresses point into *addrs. */
json_t *orh_handoff_netns_json(const struct stat *ns, const struct orh_container_facts *facts);
bool orh_handoff_netns(const json_t *snap, const struct stat *ns, struct orh_netns_info *addrs,
		       struct orh_container_facts *out);

#endif
