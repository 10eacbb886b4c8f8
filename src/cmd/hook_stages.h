/* SPDX-License-Identifier: Apache-2.0 */
/* The stages' steps (src/cmd/hook_stages.c): the decision applied to the live container,
 * then the checks in its context and its record. */
#ifndef ORH_CMD_HOOK_STAGES_H
#define ORH_CMD_HOOK_STAGES_H

#include "hook.h"

/* createRuntime and prestart: the device nodes, the device cgroup, the memlock,
 * /etc/nccl.conf, the sysfs view and the node's RDMA userspace, each on its own under
 * on_error = warn; then the checks and the record. An exit code. */
int orh_hook_apply(struct hook *h);
/* nccl-conf, cdi-createRuntime and cdi-memlock: their one to four steps, then the checks
 * and the record. An exit code. */
int orh_hook_conf_stage(struct hook *h);

#endif
