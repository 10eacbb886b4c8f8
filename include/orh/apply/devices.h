/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device nodes of the plan in a container's /dev (src/apply/devices.c).
 */
#ifndef ORH_APPLY_DEVICES_H
#define ORH_APPLY_DEVICES_H

#include <stdbool.h>

#include "orh/decide/plan.h"
#include "orh/apply/target.h"
#include "orh/base/util.h"

struct orh_devices_result {
	unsigned created;   /* mknod'ed */
	unsigned kept;      /* already present with the right type and numbers */
	unsigned bound;     /* bind-mounted from the host (mknod gave EPERM) */
	struct orh_strv warnings; /* device nodes found with other numbers; the caller frees */
};

/* Make each node in the container, in order, stopping at the first that fails: mknod
 * with the plan's numbers and mode under a temporary name, renamed over the old entry
 * (orh_replace_at); on EPERM bind-mount <host_root>/<path>, after checking its st_rdev,
 * onto an empty file made the same way. The target is needed only for that bind mount.
 * Existing correct nodes are left alone; a directory in the way is an -EISDIR error; any
 * other entry is replaced, with a warning in res->warnings (filled on failure too) when
 * it is a device node of other numbers (the spec's, or the image's). Nodes are made only
 * on the mount of the container's /dev (orh_rootfs_devdir): a node whose directory is on
 * another mount is kept when it is already right, and is otherwise an -EXDEV error. */
int orh_devices_apply(int rootfd, const struct orh_target *t, const char *host_root,
		      const struct orh_devnode *nodes, size_t n, struct orh_devices_result *res,
		      struct orh_err *err);

#endif
