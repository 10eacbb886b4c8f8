/* SPDX-License-Identifier: Apache-2.0 */
/*
 * detect --verbs: open each device libibverbs lists, query its ports and GIDs, and
 * report every difference from what sysfs said. Where libibverbs lists nothing (no
 * kernel driver or no userspace provider), say so and carry on.
 */
#include <arpa/inet.h>
#include <string.h>

#include "orh-config.h"
#include "orh/node/verbs.h"

#ifdef ORH_HAVE_VERBS
#include <infiniband/verbs.h>

bool orh_verbs_linked(void)
{
	return true;
}

static const struct orh_device *find(const struct orh_inventory *inv, const char *name)
{
	for (size_t i = 0; i < inv->n_devs; i++)
		if (!strcmp(inv->devs[i].name, name))
			return &inv->devs[i];
	return NULL;
}

static enum orh_link_layer ll_of(uint8_t ll)
{
	return ll == IBV_LINK_LAYER_INFINIBAND ? ORH_LL_INFINIBAND
	       : ll == IBV_LINK_LAYER_ETHERNET ? ORH_LL_ETHERNET
					       : ORH_LL_UNKNOWN;
}

static void compare_port(struct ibv_context *ctx, const struct orh_device *d,
			 const struct orh_port *p, json_t *diffs)
{
	struct ibv_port_attr attr;

	if (ibv_query_port(ctx, (uint8_t)p->num, &attr)) {
		json_array_append_new(diffs, json_sprintf("%s:%u: ibv_query_port failed", d->name, p->num));
		return;
	}
	if ((int)attr.state != p->state)
		json_array_append_new(diffs, json_sprintf("%s:%u: state sysfs %d, verbs %d", d->name,
							  p->num, p->state, (int)attr.state));
	if (ll_of(attr.link_layer) != p->link_layer)
		json_array_append_new(diffs, json_sprintf("%s:%u: link layer sysfs %s, verbs %s", d->name,
							  p->num, orh_link_layer_name(p->link_layer),
							  orh_link_layer_name(ll_of(attr.link_layer))));
	for (size_t g = 0; g < p->n_gids; g++) {
		union ibv_gid gid;
		if (ibv_query_gid(ctx, (uint8_t)p->num, (int)p->gids[g].index, &gid) == 0 &&
		    memcmp(gid.raw, p->gids[g].raw, 16) != 0)
			json_array_append_new(diffs, json_sprintf("%s:%u: GID %u differs", d->name,
								  p->num, p->gids[g].index));
	}
}

json_t *orh_verbs_compare_json(const struct orh_inventory *inv)
{
	json_t *out = json_object(), *diffs = json_array(), *seen = json_array();
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n == 0) {
		json_object_set_new(out, "available", json_false());
		json_object_set_new(out, "note", json_string(
			"libibverbs lists no device (no kernel driver or userspace provider here): "
			"nothing to compare"));
		if (list)
			ibv_free_device_list(list);
		json_decref(diffs);
		json_decref(seen);
		return out;
	}
	for (int i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);
		const struct orh_device *d = find(inv, name);
		struct ibv_context *ctx;

		json_array_append_new(seen, json_string(name));
		if (!d) {
			json_array_append_new(diffs, json_sprintf("%s: listed by libibverbs, not in sysfs scan", name));
			continue;
		}
		ctx = ibv_open_device(list[i]);
		if (!ctx) {
			json_array_append_new(diffs, json_sprintf("%s: ibv_open_device failed", name));
			continue;
		}
		for (size_t p = 0; p < d->n_ports; p++)
			compare_port(ctx, d, &d->ports[p], diffs);
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	json_object_set_new(out, "available", json_true());
	json_object_set_new(out, "devices", seen);
	json_object_set_new(out, "differences", diffs);
	return out;
}
#else
bool orh_verbs_linked(void)
{
	return false;
}

json_t *orh_verbs_compare_json(const struct orh_inventory *inv)
{
	(void)inv;
	return json_pack("{s:b, s:s}", "available", 0, "note",
			 "no libibverbs in this binary, and no oci-rdma-hook-verbs (" ORH_VERBS_HELPER
			 ") to run: nothing to compare");
}
#endif

void orh_verbs_compare_print(const struct orh_inventory *inv, FILE *out)
{
	json_t *r = orh_verbs_compare_json(inv);
	json_t *diffs = json_object_get(r, "differences");
	size_t i;
	json_t *v;

	fprintf(out, "\nlibibverbs: ");
	if (!json_is_true(json_object_get(r, "available"))) {
		fprintf(out, "%s\n", json_string_value(json_object_get(r, "note")));
	} else if (json_array_size(diffs) == 0) {
		fprintf(out, "%zu device(s), all agree with sysfs\n",
			json_array_size(json_object_get(r, "devices")));
	} else {
		fprintf(out, "%zu difference(s) from sysfs:\n", json_array_size(diffs));
		json_array_foreach(diffs, i, v)
			fprintf(out, "  %s\n", json_string_value(v));
	}
	json_decref(r);
}
