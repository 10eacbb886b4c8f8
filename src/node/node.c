/* SPDX-License-Identifier: Apache-2.0 */
/* Reading the node (include/orh/node/node.h): from the container's snapshot, else from the
 * node kept for any container where it was read as this read would, else through the
 * sysroot. */
#include <string.h>
#include <sys/stat.h>

#include "orh/node/node.h"
#include "orh/node/snapshot.h"

/* The node from a snapshot (what names it in errors): false, with why in serr, when it
 * cannot be used. */
static bool restore(const struct orh_node_read_opts *o, const json_t *snap, const char *what,
		    struct orh_node *n, struct orh_err *serr)
{
	return orh_snapshot_restore(snap, what, &o->discover, &n->inv, &n->gpus, &n->have_gpus,
				    &n->gpus_error, serr) == 0;
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

int orh_node_read(const struct orh_node_read_opts *o, struct orh_node *n, struct orh_err *err)
{
	const char *sysroot = o->discover.sysroot ? o->discover.sysroot : "/";
	struct orh_err gerr = { 0 }, serr = { 0 };
	bool have = false;
	int r;

	memset(n, 0, sizeof(*n));
	if (o->snapshot && o->discover.gid_scan == ORH_GIDS_PLAN) {
		have = n->from_snapshot = restore(o, o->snapshot, o->snapshot_what ?
						  o->snapshot_what : "snapshot", n, &serr);
		if (!have)
			orh_strv_pushf(&n->warnings, "%s; the node is read instead", serr.msg);
	} else if (!o->snapshot && cache_fits(o, sysroot)) {
		/* one that cannot be used is read: its reason is not the container's warning
		 * (it holds no GPUs: a container's are read below) */
		have = n->from_cache = restore(o, o->cache->snap, "the node kept", n, &serr);
	}
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
