/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim's reading of the node, handed to the same container's nccl-conf stage
 * (src/apply/handoff.c), so that the node is read once per container: the node snapshot
 * (orh/snapshot.h) in <run dir>/<container id>/node.json, a root-only directory nothing
 * in a container or an image can write. It is bound to the config.json the shim wrote
 * (its device and inode) and to the sysroot it read; the stage takes it only when both
 * are its own, and otherwise reads the node itself.
 */
#ifndef ORH_HANDOFF_H
#define ORH_HANDOFF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "orh/util.h"

#define ORH_HANDOFF_FILE "node.json"
#define ORH_HANDOFF_MAX_BYTES (4 * 1024 * 1024)

/* Write <run_dir>/<id>/node.json: snapshot (taken) bound to <bundle>/config.json as it
 * is now and to sysroot. *created: the container's state directory was made here. */
int orh_handoff_write(const char *run_dir, const char *id, const char *bundle,
		      const char *sysroot, json_t *snapshot, bool *created, struct orh_err *err);

/* Remove <run_dir>/<id>/node.json, if there is one: an older one must not outlive an
 * edit that did not write it. */
void orh_handoff_drop(const char *run_dir, const char *id);

/* The snapshot in <state_dir>/node.json when it is bound to <bundle>/config.json and to
 * sysroot, is owned by this user and writable by no other; NULL otherwise, with why
 * ("" when there is none). */
json_t *orh_handoff_take(const char *state_dir, const char *bundle, const char *sysroot,
			 char *why, size_t size);

#endif
