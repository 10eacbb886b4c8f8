/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node snapshot (include/orh/snapshot.h): a plan-mode inventory, the GID entries its
 * planner read (discover_gids.c writes and restores that part, and the GID entries' form)
 * and the GPUs, as JSON.
 * Restoring checks every field's type and bounds and names the first bad one; it reads
 * nothing from the node but opens the sysroot for the GID entries still to be read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "discover_priv.h"
#include "orh/snapshot.h"

/* ---- writing ---- */

static json_t *chardev_json(const struct orh_chardev *c)
{
	return json_pack("[s, I, I, I, b]", c->name, (json_int_t)c->major, (json_int_t)c->minor,
			 (json_int_t)c->port, c->present);
}

static json_t *strv_json(const struct orh_strv *sv)
{
	json_t *a = json_array();

	for (size_t i = 0; i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

static json_t *port_json(const struct orh_port *p)
{
	json_t *gids = json_array();

	for (size_t i = 0; i < p->n_gids; i++)
		json_array_append_new(gids, disc_gid_json(&p->gids[i]));
	return json_pack("{s:I, s:i, s:s, s:i, s:s, s:i, s:s, s:s, s:I, s:I, s:o, s:o, s:o}",
			 "num", (json_int_t)p->num, "state", p->state, "state_text",
			 p->state_text, "phys_state", p->phys_state, "phys_state_text",
			 p->phys_state_text, "link_layer", (int)p->link_layer, "rate", p->rate,
			 "netdev", p->netdev, "gid_tbl_len", (json_int_t)p->gid_tbl_len,
			 "gid_slot", (json_int_t)p->gid_slot, "umad", chardev_json(&p->umad),
			 "issm", chardev_json(&p->issm), "gids", gids);
}

static json_t *device_json(const struct orh_device *d)
{
	json_t *ports = json_array();

	for (size_t i = 0; i < d->n_ports; i++)
		json_array_append_new(ports, port_json(&d->ports[i]));
	return json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:i, s:i, s:s, s:s, s:o, s:o}",
			 "name", d->name, "pci", d->pci, "pci_path", d->pci_path, "vendor",
			 (json_int_t)d->vendor, "device_id", (json_int_t)d->device_id, "driver",
			 d->driver, "node_type", d->node_type, "numa_node", d->numa_node,
			 "fw_ver", d->fw_ver, "node_guid", d->node_guid, "uverbs",
			 chardev_json(&d->uverbs), "ports", ports);
}

static json_t *inventory_json(const struct orh_inventory *inv)
{
	json_t *devs = json_array(), *netdevs = json_array();

	for (size_t i = 0; i < inv->n_devs; i++)
		json_array_append_new(devs, device_json(&inv->devs[i]));
	for (size_t i = 0; i < inv->n_netdevs; i++)
		json_array_append_new(netdevs, json_pack("[s, s]", inv->netdevs[i].name,
							 inv->netdevs[i].operstate));
	return json_pack("{s:o, s:o, s:s, s:s, s:o, s:o, s:o}", "devices", devs, "rdma_cm",
			 chardev_json(&inv->rdma_cm), "uverbs_abi", inv->uverbs_abi,
			 "default_route_if", inv->default_route_if, "netdevs", netdevs,
			 "warnings", strv_json(&inv->warnings), "gid_source",
			 disc_gids_snapshot(inv->gid_source));
}

static json_t *gpus_json(const struct orh_gpus *g)
{
	json_t *v = json_array();

	for (size_t i = 0; i < g->n; i++) {
		const struct orh_gpu *u = &g->v[i];

		json_array_append_new(v, json_pack("{s:s, s:s, s:i, s:I, s:i, s:s, s:I, s:I, s:s}",
			"bdf", u->bdf, "uuid", u->uuid, "minor", u->minor, "index",
			(json_int_t)u->index, "numa_node", u->numa_node, "pci_path", u->pci_path,
			"device_id", (json_int_t)u->device_id, "pci_class", (json_int_t)u->pci_class,
			"model", u->model));
	}
	return json_pack("{s:o, s:o}", "v", v, "warnings", strv_json(&g->warnings));
}

json_t *orh_snapshot_build(const struct orh_inventory *inv, const struct orh_gpus *gpus,
			   const char *gpus_error)
{
	return json_pack("{s:i, s:o, s:o, s:o}", "version", ORH_SNAPSHOT_VERSION, "inventory",
			 inventory_json(inv), "gpus", gpus ? gpus_json(gpus) : json_null(),
			 "gpus_error", gpus_error ? json_string(gpus_error) : json_null());
}

/* ---- reading ---- */

/* A string field that fits `size` (with its NUL). */
static int get_str(struct snap_rd *rd, const json_t *o, const char *at, const char *key,
		   char *out, size_t size)
{
	const json_t *v = json_object_get(o, key);
	char field[128];

	snprintf(field, sizeof(field), "%s.%s", at, key);
	if (!json_is_string(v))
		return snap_fail(rd, field, "missing or not a string");
	if (orh_strlcpy(out, json_string_value(v), size) < 0 ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return snap_fail(rd, field, "too long, or holds a NUL");
	return 0;
}

/* An integer field in [min, max]. */
static int get_int(struct snap_rd *rd, const json_t *o, const char *at, const char *key,
		   json_int_t min, json_int_t max, json_int_t *out)
{
	const json_t *v = json_object_get(o, key);
	char field[128];

	snprintf(field, sizeof(field), "%s.%s", at, key);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return snap_fail(rd, field, "missing, or not an integer in range");
	*out = json_integer_value(v);
	return 0;
}

static int get_chardev(struct snap_rd *rd, const json_t *o, const char *at, const char *key,
		       struct orh_chardev *c)
{
	json_int_t major = 0, minor = 0, port = 0;
	const char *name = NULL;
	int present = 0;
	char field[128];

	snprintf(field, sizeof(field), "%s.%s", at, key);
	if (json_unpack(json_object_get(o, key), "[s, I, I, I, b]", &name, &major, &minor, &port,
			&present) < 0 || major < 0 || major > 0xfff || minor < 0 || minor > 0xfffff ||
	    port < 0 || port > 255 || orh_strlcpy(c->name, name, sizeof(c->name)) < 0)
		return snap_fail(rd, field, "not [name, major, minor, port, present]");
	c->major = (unsigned)major;
	c->minor = (unsigned)minor;
	c->port = (unsigned)port;
	c->present = present;
	return 0;
}

static int get_strv(struct snap_rd *rd, const json_t *o, const char *at, const char *key,
		    struct orh_strv *out)
{
	const json_t *a = json_object_get(o, key), *v;
	char field[128];
	size_t i;

	snprintf(field, sizeof(field), "%s.%s", at, key);
	if (!json_is_array(a))
		return snap_fail(rd, field, "missing or not an array");
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return snap_fail(rd, field, "holds a value that is not a string");
		orh_strv_push(out, orh_xstrdup(json_string_value(v)));
	}
	return 0;
}

static int get_port(struct snap_rd *rd, const json_t *o, const char *at, size_t n_slots,
		    struct orh_port *p)
{
	json_int_t num = 0, state = 0, phys = 0, ll = 0, len = 0, slot = 0;
	const json_t *gids = json_object_get(o, "gids"), *g;
	char field[128];
	size_t i;

	if (!json_is_object(o))
		return snap_fail(rd, at, "not an object");
	if (get_int(rd, o, at, "num", 0, 255, &num) < 0 ||
	    get_int(rd, o, at, "state", -1, 255, &state) < 0 ||
	    get_str(rd, o, at, "state_text", p->state_text, sizeof(p->state_text)) < 0 ||
	    get_int(rd, o, at, "phys_state", -1, 255, &phys) < 0 ||
	    get_str(rd, o, at, "phys_state_text", p->phys_state_text,
		    sizeof(p->phys_state_text)) < 0 ||
	    get_int(rd, o, at, "link_layer", ORH_LL_UNKNOWN, ORH_LL_ETHERNET, &ll) < 0 ||
	    get_str(rd, o, at, "rate", p->rate, sizeof(p->rate)) < 0 ||
	    get_str(rd, o, at, "netdev", p->netdev, sizeof(p->netdev)) < 0 ||
	    get_int(rd, o, at, "gid_tbl_len", 0, DISC_MAX_GIDS, &len) < 0 ||
	    get_int(rd, o, at, "gid_slot", 0, (json_int_t)n_slots, &slot) < 0 ||
	    get_chardev(rd, o, at, "umad", &p->umad) < 0 ||
	    get_chardev(rd, o, at, "issm", &p->issm) < 0)
		return -EINVAL;
	p->num = (unsigned)num;
	p->state = (int)state;
	p->phys_state = (int)phys;
	p->link_layer = (enum orh_link_layer)ll;
	p->gid_tbl_len = (unsigned)len;
	p->gid_slot = (size_t)slot;
	snprintf(field, sizeof(field), "%s.gids", at);
	if (!json_is_array(gids) || json_array_size(gids) > DISC_MAX_GIDS)
		return snap_fail(rd, field, "missing or not an array of GID entries");
	p->gids = orh_xcalloc(json_array_size(gids) + 1, sizeof(*p->gids));
	json_array_foreach(gids, i, g) {
		snprintf(field, sizeof(field), "%s.gids[%zu]", at, i);
		if (disc_gid_from_json(rd, field, g, &p->gids[p->n_gids]) < 0)
			return -EINVAL;
		p->n_gids++;
	}
	return 0;
}

static int get_device(struct snap_rd *rd, const json_t *o, const char *at, size_t n_slots,
		      struct orh_device *d)
{
	json_int_t vendor = 0, devid = 0, type = 0, numa = 0;
	const json_t *ports = json_object_get(o, "ports"), *p;
	char field[128];
	size_t i;

	if (!json_is_object(o))
		return snap_fail(rd, at, "not an object");
	if (get_str(rd, o, at, "name", d->name, sizeof(d->name)) < 0 ||
	    get_str(rd, o, at, "pci", d->pci, sizeof(d->pci)) < 0 ||
	    get_str(rd, o, at, "pci_path", d->pci_path, sizeof(d->pci_path)) < 0 ||
	    get_int(rd, o, at, "vendor", 0, 0xffff, &vendor) < 0 ||
	    get_int(rd, o, at, "device_id", 0, 0xffff, &devid) < 0 ||
	    get_str(rd, o, at, "driver", d->driver, sizeof(d->driver)) < 0 ||
	    get_int(rd, o, at, "node_type", -1, 255, &type) < 0 ||
	    get_int(rd, o, at, "numa_node", -1, 65535, &numa) < 0 ||
	    get_str(rd, o, at, "fw_ver", d->fw_ver, sizeof(d->fw_ver)) < 0 ||
	    get_str(rd, o, at, "node_guid", d->node_guid, sizeof(d->node_guid)) < 0 ||
	    get_chardev(rd, o, at, "uverbs", &d->uverbs) < 0)
		return -EINVAL;
	d->vendor = (unsigned)vendor;
	d->device_id = (unsigned)devid;
	d->node_type = (int)type;
	d->numa_node = (int)numa;
	snprintf(field, sizeof(field), "%s.ports", at);
	if (!json_is_array(ports) || json_array_size(ports) > 256)
		return snap_fail(rd, field, "missing or not an array of at most 256 ports");
	d->ports = orh_xcalloc(json_array_size(ports) + 1, sizeof(*d->ports));
	json_array_foreach(ports, i, p) {
		snprintf(field, sizeof(field), "%s.ports[%zu]", at, i);
		if (get_port(rd, p, field, n_slots, &d->ports[d->n_ports++]) < 0)
			return -EINVAL;
	}
	return 0;
}

static int get_netdevs(struct snap_rd *rd, const json_t *o, struct orh_inventory *inv)
{
	const json_t *a = json_object_get(o, "netdevs"), *v;
	size_t i;

	if (!json_is_array(a))
		return snap_fail(rd, "inventory.netdevs", "missing or not an array");
	inv->netdevs = orh_xcalloc(json_array_size(a) + 1, sizeof(*inv->netdevs));
	json_array_foreach(a, i, v) {
		struct orh_netdev *n = &inv->netdevs[inv->n_netdevs++];
		const char *name = NULL, *state = NULL;

		if (json_unpack((json_t *)v, "[s, s]", &name, &state) < 0 ||
		    orh_strlcpy(n->name, name, sizeof(n->name)) < 0 ||
		    orh_strlcpy(n->operstate, state, sizeof(n->operstate)) < 0)
			return snap_fail(rd, "inventory.netdevs", "not [name, operstate] pairs");
	}
	return 0;
}

static int get_inventory(struct snap_rd *rd, const json_t *o, struct orh_inventory *inv)
{
	const json_t *devs = json_object_get(o, "devices"), *src = json_object_get(o, "gid_source");
	const json_t *d;
	char field[64];
	size_t i;

	if (!json_is_object(o))
		return snap_fail(rd, "inventory", "missing or not an object");
	if (!json_is_array(devs) || json_array_size(devs) > 1024)
		return snap_fail(rd, "inventory.devices", "missing or not an array");
	if (!json_is_array(src))
		return snap_fail(rd, "inventory.gid_source", "missing or not an array");
	inv->devs = orh_xcalloc(json_array_size(devs) + 1, sizeof(*inv->devs));
	json_array_foreach(devs, i, d) {
		snprintf(field, sizeof(field), "inventory.devices[%zu]", i);
		if (get_device(rd, d, field, json_array_size(src), &inv->devs[inv->n_devs++]) < 0)
			return -EINVAL;
	}
	if (get_chardev(rd, o, "inventory", "rdma_cm", &inv->rdma_cm) < 0 ||
	    get_str(rd, o, "inventory", "uverbs_abi", inv->uverbs_abi,
		    sizeof(inv->uverbs_abi)) < 0 ||
	    get_str(rd, o, "inventory", "default_route_if", inv->default_route_if,
		    sizeof(inv->default_route_if)) < 0 ||
	    get_netdevs(rd, o, inv) < 0 ||
	    get_strv(rd, o, "inventory", "warnings", &inv->warnings) < 0)
		return -EINVAL;
	return disc_gids_restore(inv->gid_source, rd, src);
}

static int get_gpu(struct snap_rd *rd, const json_t *o, const char *at, struct orh_gpu *u)
{
	json_int_t minor = 0, index = 0, numa = 0, devid = 0, cls = 0;

	if (!json_is_object(o))
		return snap_fail(rd, at, "not an object");
	if (get_str(rd, o, at, "bdf", u->bdf, sizeof(u->bdf)) < 0 ||
	    get_str(rd, o, at, "uuid", u->uuid, sizeof(u->uuid)) < 0 ||
	    get_int(rd, o, at, "minor", -1, 1 << 20, &minor) < 0 ||
	    get_int(rd, o, at, "index", 0, ORH_GPU_MAX, &index) < 0 ||
	    get_int(rd, o, at, "numa_node", -1, 65535, &numa) < 0 ||
	    get_str(rd, o, at, "pci_path", u->pci_path, sizeof(u->pci_path)) < 0 ||
	    get_int(rd, o, at, "device_id", 0, 0xffff, &devid) < 0 ||
	    get_int(rd, o, at, "pci_class", 0, 0xffffff, &cls) < 0 ||
	    get_str(rd, o, at, "model", u->model, sizeof(u->model)) < 0)
		return -EINVAL;
	u->minor = (int)minor;
	u->index = (unsigned)index;
	u->numa_node = (int)numa;
	u->device_id = (unsigned)devid;
	u->pci_class = (unsigned)cls;
	return 0;
}

static int get_gpus(struct snap_rd *rd, const json_t *o, struct orh_gpus *g)
{
	const json_t *v = json_object_get(o, "v"), *u;
	char field[64];
	size_t i;

	if (!json_is_object(o) || !json_is_array(v) || json_array_size(v) > ORH_GPU_MAX)
		return snap_fail(rd, "gpus", "not an object whose v is an array of GPUs");
	g->v = orh_xcalloc(json_array_size(v) + 1, sizeof(*g->v));
	json_array_foreach(v, i, u) {
		snprintf(field, sizeof(field), "gpus.v[%zu]", i);
		if (get_gpu(rd, u, field, &g->v[g->n++]) < 0)
			return -EINVAL;
	}
	return get_strv(rd, o, "gpus", "warnings", &g->warnings);
}

int orh_snapshot_restore(const json_t *snap, const char *what,
			 const struct orh_discover_opts *opts, struct orh_inventory *inv,
			 struct orh_gpus *gpus, bool *gpus_read, char **gpus_error,
			 struct orh_err *err)
{
	struct snap_rd rd = { .what = what, .err = err };
	const json_t *gv = json_object_get(snap, "gpus"), *ge = json_object_get(snap, "gpus_error");
	struct orh_discover_opts o = *opts;
	int root, r;

	memset(inv, 0, sizeof(*inv));
	memset(gpus, 0, sizeof(*gpus));
	*gpus_read = false;
	*gpus_error = NULL;
	if (json_integer_value(json_object_get(snap, "version")) != ORH_SNAPSHOT_VERSION)
		return snap_fail(&rd, "version", "missing, or not a version this build reads");
	if (!o.sysroot)
		o.sysroot = "/";
	o.gid_scan = ORH_GIDS_PLAN;
	root = open(o.sysroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return orh_fail(err, errno, "opening sysroot '%s': %s", o.sysroot, strerror(errno));
	inv->gid_source = disc_gids_open(&o, root);
	r = get_inventory(&rd, json_object_get(snap, "inventory"), inv);
	if (r == 0 && gv && !json_is_null(gv)) {
		r = get_gpus(&rd, gv, gpus);
		*gpus_read = r == 0;
	}
	if (r == 0 && ge && !json_is_null(ge)) {
		if (json_is_string(ge))
			*gpus_error = orh_xstrdup(json_string_value(ge));
		else
			r = snap_fail(&rd, "gpus_error", "not a string or null");
	}
	if (r < 0) {
		orh_inventory_free(inv);
		orh_gpus_free(gpus);
		free(*gpus_error);
		*gpus_error = NULL;
		*gpus_read = false;
	}
	return r;
}
