/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim's own /etc/nccl.conf (src/apply/shimconf.c). Where the shim knows the
 * network the container will have when its createRuntime hooks run, it writes the file
 * into the bundle's root filesystem itself, before the runtime reads config.json, and the
 * edit registers no nccl-conf stage: the container starts with one program less (no hook
 * for the runtime to run). It knows that network when the container stays in the
 * runtime's own (no network namespace in the spec), joins a namespace the spec names by
 * its path (a pod's: the shim read it), or gets a new one that nothing sets up before
 * createRuntime (no prestart or createRuntime hook in the spec): then it is empty, as the
 * stage would find it. Everywhere else, and wherever the file cannot be written in place
 * (a read-only root, a mount of the spec over /etc or the file, /etc or the file on
 * another mount), the nccl-conf stage does it, as before.
 */
#ifndef ORH_APPLY_SHIMCONF_H
#define ORH_APPLY_SHIMCONF_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "orh/decide/decide.h"
#include "orh/apply/ncclconf.h"
#include "orh/apply/record.h"
#include "orh/base/util.h"

/* Will the container's network at createRuntime be the one the decision saw? has_netns,
 * nspath: the spec's network namespace (orh_spec_netns); netns_read: the shim read the
 * one at nspath. Pure. */
bool orh_shimconf_network_known(const json_t *spec, bool has_netns, const char *nspath,
				bool netns_read);

/* Does a mount of the spec land on /etc/nccl.conf or on a directory above it, as the
 * runtime resolves both inside the root (rootfd)? *dest: the first such mount's
 * destination. A destination that cannot be resolved counts as one that does. 1, 0, or
 * -errno when /etc/nccl.conf itself cannot be resolved. */
int orh_shimconf_covered(int rootfd, const json_t *spec, const char **dest);

/* Write the plan's NCCL settings into /etc/nccl.conf of the spec's root (root.path, relative
 * to the bundle dirfd): in place only, as the nccl-conf stage writes it
 * (orh_ncclconf_apply). -EROFS for a read-only root, -EXDEV where a mount of the spec
 * covers the file or the file is on another mount; nothing written on any error. *rootfd:
 * the root, open (for orh_ncclconf_undo), or -1. */
int orh_shimconf_write(int bundle_fd, const json_t *spec, const struct orh_plan *plan,
		       int *rootfd, struct orh_ncclconf_result *res, struct orh_err *err);

/* Is the memlock the spec sets below what RDMA needs (orh_check_memlock, d->memlock.need)?
 * The warning in msg. Where the decision says so (d->checks.memlock_refuses), the shim
 * refuses it, as the stage would. */
bool orh_shimconf_memlock_short(const json_t *spec, const struct orh_decision *d, char *msg,
				size_t size);

/* The shim's record of a container it served alone (the record.json the stage would
 * write): the decision, what the spec holds, the file, the checks of the container's
 * context that can be made before it runs (the decision's GID and GPUDirect verdicts, the
 * spec's memlock against the need; their warnings also into *warnings), bound to the
 * bundle's config.json
 * (bundle_path, its stat) and to the runtime's state directory of the container
 * (runtime_state, or NULL) in place of a pid. 0 or -errno with err filled. */
struct orh_shimconf_rec {
	const char *id, *bundle_path, *runtime_state;
	const char *sysroot;               /* not read: the decision read the node */
	const struct stat *config_st;
	const struct orh_decision *d;
	const json_t *spec;
	const struct orh_ncclconf_result *conf;
	const json_t *shim_ms;
	double total_ms;
};
int orh_shimconf_record(const char *state_dir, const struct orh_shimconf_rec *in,
			struct orh_strv *warnings, struct orh_err *err);

#endif
