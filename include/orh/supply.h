/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Applying the supply verdict (src/apply/supply.c; the verdict: struct orh_supply,
 * orh/decide.h): the node's libraries bind-mounted read-only into ORH_SUPPLY_DIR of the
 * container, a driver file for each provider in its /etc/libibverbs.d naming the library
 * there by path, and, where libibverbs itself is given, an entry for ORH_SUPPLY_DIR in
 * /etc/ld.so.conf.d and the container's /etc/ld.so.cache rewritten with its libraries
 * first. The driver files and the loader's entry are written once on the node, under
 * ORH_SUPPLY_HOST_DIR, the same for every container; the live hook mounts them into the
 * container, the spec edit adds them as mounts.
 */
#ifndef ORH_SUPPLY_H
#define ORH_SUPPLY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "orh/decide.h"
#include "orh/target.h"
#include "orh/util.h"

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
/* The spec edit: a read-only bind mount for each (a destination the spec mounts already
 * is left to the spec). The number added. */
int orh_supply_spec_mounts(json_t *spec, const struct orh_supply_mount *m, size_t n,
			   struct orh_err *err);

struct orh_supply_result {
	unsigned mounted;     /* bind mounts made */
	unsigned already;     /* the same file was there (the spec edit's mount) */
	bool cache;           /* /etc/ld.so.cache rewritten */
};
/* The live hook: each a read-only bind mount into the container (its mount point made in
 * its root, as a runtime makes one). */
int orh_supply_mount_live(const struct orh_target *t, int rootfd,
			  const struct orh_supply_mount *m, size_t n,
			  struct orh_supply_result *res, struct orh_err *err);
/* /etc/ld.so.cache of the container with the supplied libibverbs and its libraries found
 * first (orh_ldcache_merge()), written by a child in the container's mount namespace with
 * no capability left (under the seccomp filter the hook runs under). */
int orh_supply_ldcache(const struct orh_target *t, int rootfd, const struct orh_supply *s,
		       struct orh_supply_result *res, struct orh_err *err);

#endif
