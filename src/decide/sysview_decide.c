/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which entries of the RDMA classes of sysfs a container sees (include/orh/decide/sysview_decide.h):
 * those of the devices the plan gives it. A pure function of the host's entries and the
 * plan.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide/sysview_decide.h"

static bool given(const struct orh_plan *plan, const char *dev)
{
	if (!dev[0])
		return false;
	for (size_t i = 0; i < plan->n_nodes; i++)
		if (plan->nodes[i].owner && !strcmp(plan->nodes[i].owner->name, dev))
			return true;
	return false;
}

/* FNV-1a, 64 bits, over a string and its terminating NUL (so that "ab","c" and "a","bc"
 * differ) */
static uint64_t hash(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	return hash(h, s, strlen(s) + 1);
}

void orh_sysview_decide(struct orh_sysview *v, const struct orh_plan *plan)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	bool any = plan->n_nodes > 0;

	v->subset = false;
	v->kept_devs = v->all_devs = 0;
	for (size_t k = 0; k < ORH_SYSVIEW_N_CLASSES; k++) {
		struct orh_sysview_class *c = &v->cls[k];

		if (!c->present)
			continue;
		h = hash_str(h, orh_sysview_classes[k]);
		for (size_t i = 0; i < c->n_links; i++) {
			struct orh_sysview_link *l = &c->links[i];

			l->keep = any && given(plan, l->ibdev);
			v->subset = v->subset || !l->keep;
			if (k == 0) {
				v->all_devs++;
				v->kept_devs += l->keep;
			}
			if (!l->keep)
				continue;
			h = hash_str(h, l->name);
			h = hash_str(h, l->target);
		}
		for (size_t i = 0; i < c->n_files; i++) {
			h = hash_str(h, c->files[i].name);
			h = hash(h, c->files[i].data, c->files[i].len);
			h = hash(h, "", 1);
		}
	}
	/* a container given nothing is not served: no view */
	v->subset = v->subset && any;
	snprintf(v->id, sizeof(v->id), "%016llx", (unsigned long long)h);
}

bool orh_sysview_id_valid(const char *s)
{
	return strlen(s) == 16 && strspn(s, "0123456789abcdef") == 16;
}

bool orh_sysview_may_subset(const struct orh_plan *plan, const struct orh_inventory *inv)
{
	if (plan->n_nodes == 0)
		return false;
	for (size_t d = 0; d < inv->n_devs; d++) {
		bool owns = false;

		for (size_t i = 0; i < plan->n_nodes && !owns; i++)
			owns = plan->nodes[i].owner == &inv->devs[d] ||
			       (plan->nodes[i].owner &&
				!strcmp(plan->nodes[i].owner->name, inv->devs[d].name));
		if (!owns)
			return true;
	}
	return false;
}
