/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The container's /etc/nccl.conf: the plan's settings merged with the image's
 * (src/apply/ncclconf.c).
 */
#ifndef ORH_APPLY_NCCLCONF_H
#define ORH_APPLY_NCCLCONF_H

#include <limits.h>
#include <stdbool.h>

#include "orh/decide/plan.h"
#include "orh/apply/target.h"
#include "orh/base/util.h"

#define ORH_NCCL_CONF_MAX_BYTES (1024 * 1024)
#define ORH_NCCL_MARK_BEGIN "# oci-rdma-hook begin: generated at container start, do not edit"
#define ORH_NCCL_MARK_END "# oci-rdma-hook end"

/* Merge env into the text of an existing /etc/nccl.conf (old may be NULL): every line of
 * the image is kept except a block an earlier run wrote (a well-formed one only: the begin
 * marker, NAME=VALUE lines, the end marker; a begin marker without its end, or any other
 * line between the markers, makes the lines the image's), and
 * NAME=VALUE is appended in a new block for each name the image does not define.
 * Returns the new text (malloc'd, NUL-terminated); *n_added = lines appended; kept (may be
 * NULL) gets the image's line for each name of env that the image defines (the line NCCL
 * takes, so the plan's value is not added). Where the image defines any NCCL_DEBUG* name,
 * none of the capture's entries (orh_nccl_record_entry) is added, and kept gets that
 * line once: the image's debug settings stay as they are. Entries with names or values that cannot be
 * written as NCCL reads them are an error. */
int orh_ncclconf_merge(const char *old, size_t len, const struct orh_env_entry *env,
		       size_t n_env, char **out, size_t *n_added, struct orh_strv *kept,
		       struct orh_err *err);

struct orh_ncclconf_result {
	size_t added;
	bool bind_mounted;          /* read-only rootfs: generated file bound over it */
	bool foreign;               /* ... over a file on another mount than the root's */
	char generated[PATH_MAX];   /* the generated file outside the container, or "" */
	struct orh_strv kept;       /* the image's NAME=VALUE lines that stand in for the
				     * plan's (orh_ncclconf_merge); orh_ncclconf_result_free */
	/* why the capture's entries of the plan (orh_nccl_record_entry) were not written: no
	 * capture directory could be had (ensure_record_dir); "" where they were, or none */
	char record_off[192];
	bool in_place;              /* the file in the root was replaced ... */
	char *was;                  /* ... and held this text before (NULL: there was none) */
};

/* The capture's entries of env (orh_nccl_record_entry) are written only where the capture
 * directory (ORH_NCCL_RECORD_DIR) is a tmpfs mounted in the target, mode 1777: found so
 * (the spec's mount, an earlier stage's), or made: the directory on the root's own mount,
 * the tmpfs (1 MiB, nosuid, nodev, noexec) mounted on it unless the mount below it is
 * shared. Otherwise they are left out, and res->record_off says why: NCCL, finding no
 * directory for NCCL_DEBUG_FILE, would write its lines to the workload's stdout.
 * Write the merged /etc/nccl.conf into the rootfs (orh_replace_at: a temporary file in
 * /etc, renamed over the old one); a file that already holds the merged text is left as it
 * is. With readonly (spec root.readonly) or on EROFS, a new <state_dir>/nccl.conf is made
 * the same way, with the owner and the permission bits of the file it covers, and
 * bind-mounted read-only over /etc/nccl.conf in the mount namespace of the target (an
 * empty file is made as the mount point where there is none). Anything but a regular file
 * at /etc/nccl.conf is refused. Nothing is written on another mount than the root's:
 * where /etc or the file is on one (a volume), an existing file is covered the same way
 * unless that mount is shared, and no file is made there (-EXDEV). Without a target (the
 * runtime shim, before the container exists) only the in-place write is made: -EROFS and
 * -EXDEV where it cannot be. */
int orh_ncclconf_apply(int rootfd, const struct orh_target *t, bool readonly,
		       const char *state_dir, const struct orh_env_entry *env, size_t n_env,
		       struct orh_ncclconf_result *res, struct orh_err *err);
/* Put back what orh_ncclconf_apply() replaced in place (res->in_place): the text the file
 * held, or no file where there was none. 0 or -errno with err filled. */
int orh_ncclconf_undo(int rootfd, struct orh_ncclconf_result *res, struct orh_err *err);
void orh_ncclconf_result_free(struct orh_ncclconf_result *res);

#endif
