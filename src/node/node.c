/* SPDX-License-Identifier: Apache-2.0 */
/* Reading the node (include/orh/node/node.h): from the container's snapshot, else from the
 * node kept for any container where it was read as this read would, else through the
 * sysroot. */
#include <string.h>
#include <sys/stat.h>

#include "orh/node/node.h"
#include "orh/node/snapshot.h"

/* The node from the caller's snapshot; false (with a warning) when it cannot be used. */
static bool restore(const struct orh_node_read_opts *o, struct orh_node *n)
{
	struct orh_err serr = { 0 };

	if (orh_snapshot_restore(o->snapshot, o->snapshot_what ? o->snapshot_what : "snapshot",
				 &o->discover, &n->inv, &n->gpus, &n->have_gpus, &n->gpus_error,
				 &serr) < 0) {
		orh_strv_pushf(&n->warnings, "%s; the node is read instead", serr.msg);
		return false;
	}
	n->from_snapshot = true;
	return true;
}

/* May the cache stand for a read with these options (plan mode, the same sysroot naming
 * the same directory, GIDs wanted, management devices and topology)? */
static bool cache_fits(const struct orh_node_read_opts *o, const char *sysroot)
{
	const struct orh_node_cache *c = o->cache;
	struct stat st;

	return c && c->snap && o->discover.gid_scan == ORH_GIDS_PLAN && c->sysroot &&
	       !strcmp(c->sysroot, sysroot) && c->want.family == o->discover.want.family &&
	       c->want.roce_version == o->discover.want.roce_version &&
	       c->mad == o->discover.mad && c->topology == o->discover.topology &&
	       stat(sysroot, &st) == 0 && st.st_dev == c->root_dev && st.st_ino == c->root_ino;
}

/* The node from the cache; false when it cannot be restored (then it is read, and the
 * cache's reason is not the container's warning). */
static bool restore_cache(const struct orh_node_read_opts *o, struct orh_node *n)
{
	struct orh_err serr = { 0 };
	bool gpus_read = false;
	char *gpus_error = NULL;

	if (orh_snapshot_restore(o->cache->snap, "the node kept", &o->discover, &n->inv,
				 &n->gpus, &gpus_read, &gpus_error, &serr) < 0)
		return false;
	/* the GPUs are the container's to read: a cache holds none */
	if (gpus_read)
		orh_gpus_free(&n->gpus);
	free(gpus_error);
	n->from_cache = true;
	return true;
}

int orh_node_read(const struct orh_node_read_opts *o, struct orh_node *n, struct orh_err *err)
{
	const char *sysroot = o->discover.sysroot ? o->discover.sysroot : "/";
	struct orh_err gerr = { 0 };
	bool have = false;
	int r;

	memset(n, 0, sizeof(*n));
	if (o->snapshot && o->discover.gid_scan == ORH_GIDS_PLAN)
		have = restore(o, n);
	else if (!o->snapshot && cache_fits(o, sysroot))
		have = restore_cache(o, n);
	if (!have) {
		r = orh_discover(&o->discover, &n->inv, err);
		if (r < 0)
			return r;
	}
	n->have_inv = true;
	if (o->gpus && !n->have_gpus && !n->gpus_error) {
		if (orh_discover_gpus(sysroot, ORH_GPU_SCAN_DRIVER, &n->gpus, &gerr) < 0)
			n->gpus_error = orh_xstrdup(gerr.msg);
		else
			n->have_gpus = true;
	}
	if (o->gpudirect) {
		orh_gpudirect_read(sysroot, &n->gpudirect);
		n->have_gpudirect = true;
	}
	return 0;
}

void orh_node_free(struct orh_node *n)
{
	if (n->have_inv)
		orh_inventory_free(&n->inv);
	orh_gpus_free(&n->gpus);
	free(n->gpus_error);
	orh_strv_free(&n->warnings);
	memset(n, 0, sizeof(*n));
}
