/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Applying the supply verdict (src/apply/supply.c; the verdict: struct orh_supply,
 * orh/decide/decide.h): the node's libraries bind-mounted read-only into ORH_SUPPLY_DIR of the
 * container, a driver file for each provider in its /etc/libibverbs.d naming the library
 * there by path, and, where libibverbs itself is given, an entry for ORH_SUPPLY_DIR in
 * /etc/ld.so.conf.d and the container's /etc/ld.so.cache rewritten with its libraries
 * first. The driver files and the loader's entry are written once on the node, under
 * ORH_SUPPLY_HOST_DIR, the same for every container; the live hook mounts them into the
 * container, the spec edit adds them as mounts.
 */
#ifndef ORH_APPLY_SUPPLY_H
#define ORH_APPLY_SUPPLY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "orh/decide/decide.h"
#include "orh/apply/target.h"
#include "orh/base/util.h"

#ifndef ORH_SUPPLY_HOST_DIR
#define ORH_SUPPLY_HOST_DIR "/run/oci-rdma-hook/.supply"
#endif
#define ORH_SUPPLY_CONF "/etc/ld.so.conf.d/00-oci-rdma-hook.conf"
#define ORH_SUPPLY_MAX_MOUNTS (ORH_SUPPLY_MAX_FILES + ORH_IMAGE_MAX_PROVIDERS + 1)

struct orh_supply_mount {
	char src[4096];   /* on the node */
	char dst[512];    /* in the container */
};

/* The mounts of s: its files (under sysroot on the node), the driver files and the
 * loader's entry (under host_dir, written there by orh_supply_host_files()). An array of
 * *n (free() it), NULL with *n 0 where s gives nothing. */
struct orh_supply_mount *orh_supply_mounts(const struct orh_supply *s, const char *sysroot,
					   const char *host_dir, size_t *n);
/* Write the driver files and the loader's entry s needs under host_dir (made when
 * missing); a file already there with that content is left as it is. */
int orh_supply_host_files(const struct orh_supply *s, const char *host_dir,
			  struct orh_err *err);
/* Only the container's own storage is written (docs/security.md, 3): before anything is
 * made, every mount point of m (its directory found or made on the root's own mount, and
 * a file there already either the spec's mount of the node's file or on that mount) and,
 * where s gives libibverbs, /etc and its ld.so.cache on that mount too; the root's mount
 * not a shared one (a mount made in it would reach its peers, the host's included). 0, or
 * -EXDEV (and another -errno) with a message naming the path and the mount: then nothing
 * is to be made. */
int orh_supply_check_live(const struct orh_target *t, int rootfd, const struct orh_supply *s,
			  const struct orh_supply_mount *m, size_t n, struct orh_err *err);
/* The same for the spec edit, before the container exists (rootfd: the spec's root): each
 * destination of m (and /etc/ld.so.cache where s gives libibverbs) resolved in the root as
 * the runtime resolves it, neither in nor under a mount of the spec (a volume; m's own
 * entries aside) nor on another mount than the root's, and linux.rootfsPropagation not
 * shared. 0 or -EXDEV (another -errno where a path cannot be resolved) with a message. */
int orh_supply_check_spec(int rootfd, const json_t *spec, const struct orh_supply *s,
			  const struct orh_supply_mount *m, size_t n, struct orh_err *err);
/* The spec edit: a read-only bind mount for each (a destination the spec mounts already
 * is left to the spec). The number added. */
int orh_supply_spec_mounts(json_t *spec, const struct orh_supply_mount *m, size_t n,
			   struct orh_err *err);

struct orh_supply_result {
	unsigned mounted;     /* bind mounts made */
	unsigned already;     /* the same file was there (the spec edit's mount) */
	bool cache;           /* /etc/ld.so.cache rewritten */
	/* by the index of the mount: made by orh_supply_mount_live, its mount point too */
	bool ours[ORH_SUPPLY_MAX_MOUNTS];
	bool made[ORH_SUPPLY_MAX_MOUNTS];
};
/* The live hook: each a read-only bind mount into the container (its mount point made in
 * its root, as a runtime makes one, only on the root's own mount). Where one fails, those
 * made go again (orh_supply_undo). */
int orh_supply_mount_live(const struct orh_target *t, int rootfd,
			  const struct orh_supply_mount *m, size_t n,
			  struct orh_supply_result *res, struct orh_err *err);
/* Undo what orh_supply_mount_live made (res): its mounts detached in the container's mount
 * namespace, the empty mount points it made removed. Best effort: nothing to report. */
void orh_supply_undo(const struct orh_target *t, int rootfd, const struct orh_supply_mount *m,
		     size_t n, struct orh_supply_result *res);
/* /etc/ld.so.cache of the container with the supplied libibverbs and its libraries found
 * first (orh_ldcache_merge()), written by a child in the container's mount namespace with
 * no capability left (under the seccomp filter the hook runs under). */
int orh_supply_ldcache(const struct orh_target *t, int rootfd, const struct orh_supply *s,
		       struct orh_supply_result *res, struct orh_err *err);

/* The live hook's whole supply: the node's files under host_dir
 * (orh_supply_host_files), orh_supply_check_live, then the mounts and the cache; nothing
 * is made in the container where the check refuses, and the mounts go again where the
 * cache cannot be written. */
int orh_supply_give_live(const struct orh_target *t, int rootfd, const struct orh_supply *s,
			 const struct orh_supply_mount *m, size_t n, const char *host_dir,
			 struct orh_supply_result *res, struct orh_err *err);
/* For the record: s was not given, and err says why (its why_not, "not given: ..."). */
void orh_supply_not_given(struct orh_supply *s, const struct orh_err *err);

#endif
