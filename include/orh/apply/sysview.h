/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The container's view of the RDMA classes of sysfs: /sys/class/infiniband,
 * /sys/class/infiniband_verbs and /sys/class/infiniband_mad. A container given some of
 * the node's devices sees only those: each class directory is covered by a read-only
 * directory holding, for each entry kept, a symlink of the host's name and relative target
 * (../../devices/..., which resolves in the container's own /sys), and copies of the
 * class's regular files (abi_version). A container given every device sees the host's
 * directories unchanged.
 *   reading the host's entries  orh_sysview_read()    src/node/sysclass.c  orh/node/sysclass.h
 *   which entries are kept      orh_sysview_decide()  src/decide/sysview_decide.c (pure)
 *                                                     orh/decide/sysview_decide.h
 *   the directory, the mounts   orh_sysview_build(), orh_sysview_mount(),
 *                               orh_sysview_spec_mounts()  src/apply/sysview.c  (here)
 */
#ifndef ORH_APPLY_SYSVIEW_H
#define ORH_APPLY_SYSVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "orh/decide/sysview_decide.h"
#include "orh/apply/target.h"
#include "orh/base/util.h"

/* Where the views are made: one directory per view, named by its id, shared by every
 * container that gets the same view (made once, never changed: its name is its content).
 * In the run dir (orh/apply/record.h) under a name no state directory has (those of container
 * ids that start with a dot do not either: orh_state_dir_name()). The sweep of the run dir
 * removes a view that no container links to once it has not been made or used for a
 * while (orh/apply/statedir.h). */
#define ORH_SYSVIEW_SUBDIR ".sysfs"
#ifndef ORH_SYSVIEW_DIR
#define ORH_SYSVIEW_DIR "/run/oci-rdma-hook/" ORH_SYSVIEW_SUBDIR
#endif
/* In base, the directory of the containers' links to the views they use (a name no view
 * has): one symlink per container, named by its state directory (orh_sysview_link()). */
#define ORH_SYSVIEW_LINKS ".links"
/* A build or a use of a view and the sweep exclude each other (flock(2) of base: shared,
 * exclusive); a build waits this long at most for a sweep to end. */
#define ORH_SYSVIEW_LOCK_WAIT_MS 5000

/* Make the view's directory under base (made when missing): base/<id>/<class>/ for each
 * class the host has, read-only (directories 0555, files 0444), made under a temporary
 * name (".tmp-<pid>") and renamed into place; one that exists already is used as it is,
 * its mtime set to now (it is in use: the sweep keeps it). Under base's shared lock. dir
 * gets its path. */
int orh_sysview_build(const struct orh_sysview *v, const char *base, char *dir, size_t size,
		      struct orh_err *err);
/* Link the container whose state directory is named owner to view id:
 * base/ORH_SYSVIEW_LINKS/<owner>, a symlink to ../<id>, made (or replaced) under base's
 * shared lock. 0 or -errno with err filled. */
int orh_sysview_link(const char *base, const char *owner, const char *id,
		     struct orh_err *err);
/* The sweep of runfd/base, under its exclusive lock, or not at all while a build or a link
 * holds it: removes each link whose state directory (in runfd) is gone, then each view
 * that no link names and whose mtime is more than unused_for seconds old (renamed to
 * ".dead-<pid>" first, then removed), and what a killed build or sweep left (".tmp-*",
 * ".dead-*": none is at work under the lock). Returns how many entries it removed. */
int orh_sysview_sweep(int runfd, const char *base, unsigned unused_for);

struct orh_sysview_result {
	unsigned mounted;            /* class directories covered */
	unsigned missing;            /* classes the container's /sys lacks: nothing to hide */
	unsigned already;            /* covered by this view already (a spec mount of it) */
};

/* The live hook: bind dir/<class> read-only (nosuid, nodev, noexec) over each class
 * directory the container's /sys has, in its mount namespace, unless that is the view's
 * own directory already (the spec edit mounted it). A class directory on a shared mount
 * is refused (the mount would reach its peers, the host's included). */
int orh_sysview_mount(const struct orh_target *t, int rootfd, const struct orh_sysview *v,
		      const char *dir, struct orh_sysview_result *res, struct orh_err *err);

/* The spec edit: a bind mount {destination /sys/class/<class>, source dir/<class>,
 * options bind, ro, nosuid, nodev, noexec} appended to the spec's mounts for each class
 * the container's /sys will have: the last mount of the spec at or above that path is a
 * sysfs whose host /sys/class/<class> exists, or a bind whose source holds the rest of the
 * path (probe->exists says whether a host path exists). A spec that mounts that
 * destination already is left so. Returns the number of mounts added, or -errno. */
struct orh_sysview_probe {
	bool (*exists)(void *arg, const char *host_path);
	void *arg;
};
int orh_sysview_spec_mounts(json_t *spec, const struct orh_sysview *v, const char *dir,
			    const struct orh_sysview_probe *probe, struct orh_err *err);
/* The probe of the running host: stat(2). */
struct orh_sysview_probe orh_sysview_host_probe(void);

#endif
