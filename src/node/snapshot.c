/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node snapshot (include/orh/node/snapshot.h): a plan-mode inventory, the GID entries its
 * planner read (discover_gids.c writes and restores that part) and the GPUs, as the text
 * of snapline.c in one JSON string. Its lines, each a kind and its fields:
 *
 *   orh-node 1
 *   dev NAME PCI PCI_PATH VENDOR DEVICE_ID DRIVER NODE_TYPE NUMA FW_VER NODE_GUID UVERBS(5)
 *   port NUM STATE STATE_TEXT PHYS PHYS_TEXT LINK_LAYER RATE NETDEV TBL_LEN SLOT UMAD(5)
 *        ISSM(5)                                     (of the last dev)
 *   pgid GID(4)                                      (of the last port)
 *   rdma_cm DEV(5) / abi TEXT / route IFNAME / netdev NAME OPERSTATE / warn TEXT
 *   src ... / sgid ... / swarn ...                   (discover_gids.c)
 *   gpus / gpu BDF UUID MINOR INDEX NUMA PCI_PATH DEVICE_ID CLASS MODEL / gpuwarn TEXT /
 *   gpuerr TEXT                                      (the GPUs were read: "gpus" first)
 *
 * Restoring checks every field's type and bounds and names the first bad one; it reads
 * nothing from the node but opens the sysroot for the GID entries still to be read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "discover_gids.h"
#include "snapline.h"
#include "sysfs.h"
#include "orh/base/json.h"
#include "orh/node/snapshot.h"

#define MAGIC "orh-node"
#define MAX_FIELDS 32
#define MAX_DEVICES 1024
#define MAX_PORTS 256

/* ---- writing ---- */

static void put_port(struct orh_buf *f, const struct orh_port *p)
{
	snap_kind(f, "port");
	snap_num(f, p->num);
	snap_num(f, p->state);
	snap_str(f, p->state_text);
	snap_num(f, p->phys_state);
	snap_str(f, p->phys_state_text);
	snap_num(f, p->link_layer);
	snap_str(f, p->rate);
	snap_str(f, p->netdev);
	snap_num(f, p->gid_tbl_len);
	snap_num(f, (long long)p->gid_slot);
	snap_chardev(f, &p->umad);
	snap_chardev(f, &p->issm);
	orh_buf_addc(f, '\n');
	for (size_t i = 0; i < p->n_gids; i++) {
		snap_kind(f, "pgid");
		snap_gid(f, &p->gids[i]);
		orh_buf_addc(f, '\n');
	}
}

static void put_device(struct orh_buf *f, const struct orh_device *d)
{
	snap_kind(f, "dev");
	snap_str(f, d->name);
	snap_str(f, d->pci);
	snap_str(f, d->pci_path);
	snap_num(f, d->vendor);
	snap_num(f, d->device_id);
	snap_str(f, d->driver);
	snap_num(f, d->node_type);
	snap_num(f, d->numa_node);
	snap_str(f, d->fw_ver);
	snap_str(f, d->node_guid);
	snap_chardev(f, &d->uverbs);
	orh_buf_addc(f, '\n');
	for (size_t i = 0; i < d->n_ports; i++)
		put_port(f, &d->ports[i]);
}

static void put_line(struct orh_buf *f, const char *kind, const char *text)
{
	snap_kind(f, kind);
	snap_str(f, text);
	orh_buf_addc(f, '\n');
}

static void put_gpus(struct orh_buf *f, const struct orh_gpus *g)
{
	snap_kind(f, "gpus\n");
	for (size_t i = 0; i < g->n; i++) {
		const struct orh_gpu *u = &g->v[i];

		snap_kind(f, "gpu");
		snap_str(f, u->bdf);
		snap_str(f, u->uuid);
		snap_num(f, u->minor);
		snap_num(f, u->index);
		snap_num(f, u->numa_node);
		snap_str(f, u->pci_path);
		snap_num(f, u->device_id);
		snap_num(f, u->pci_class);
		snap_str(f, u->model);
		orh_buf_addc(f, '\n');
	}
	for (size_t i = 0; i < g->warnings.n; i++)
		put_line(f, "gpuwarn", g->warnings.v[i]);
}

json_t *orh_snapshot_build(const struct orh_inventory *inv, const struct orh_gpus *gpus,
			   const char *gpus_error)
{
	struct orh_buf text = { 0 }, *f = &text;
	json_t *node;

	snap_kind(f, MAGIC);
	snap_num(f, ORH_SNAPSHOT_VERSION);
	orh_buf_addc(f, '\n');
	for (size_t i = 0; i < inv->n_devs; i++)
		put_device(f, &inv->devs[i]);
	snap_kind(f, "rdma_cm");
	snap_chardev(f, &inv->rdma_cm);
	orh_buf_addc(f, '\n');
	put_line(f, "abi", inv->uverbs_abi);
	put_line(f, "route", inv->default_route_if);
	for (size_t i = 0; i < inv->n_netdevs; i++) {
		snap_kind(f, "netdev");
		snap_str(f, inv->netdevs[i].name);
		snap_str(f, inv->netdevs[i].operstate);
		orh_buf_addc(f, '\n');
	}
	for (size_t i = 0; i < inv->warnings.n; i++)
		put_line(f, "warn", inv->warnings.v[i]);
	disc_gids_snapshot(inv->gid_source, f);
	if (gpus)
		put_gpus(f, gpus);
	if (gpus_error)
		put_line(f, "gpuerr", gpus_error);
	node = orh_json_stringn(text.p, text.n);
	free(text.p);
	if (!node)
		return NULL;
	/* "o" takes node's reference, on failure too */
	return json_pack("{s:i, s:o}", "version", ORH_SNAPSHOT_VERSION, "node", node);
}

/* ---- reading ---- */

struct restore {
	struct snap_rd rd;
	struct orh_inventory *inv;
	struct orh_gpus *gpus;
	bool *gpus_read;
	char **gpus_error;
};

static int get_device(struct restore *st, char **fv, int nf)
{
	struct snap_rd *rd = &st->rd;
	struct orh_inventory *inv = st->inv;
	long long vendor = 0, devid = 0, type = 0, numa = 0;
	struct orh_device *d;

	if (inv->n_devs >= MAX_DEVICES)
		return snap_fail(rd, 0, "too many devices");
	inv->devs = orh_xgrow(inv->devs, inv->n_devs, sizeof(*inv->devs));
	d = &inv->devs[inv->n_devs++];
	memset(d, 0, sizeof(*d));
	if (snap_get_str(rd, fv, nf, 1, d->name, sizeof(d->name)) < 0 ||
	    snap_get_str(rd, fv, nf, 2, d->pci, sizeof(d->pci)) < 0 ||
	    snap_get_str(rd, fv, nf, 3, d->pci_path, sizeof(d->pci_path)) < 0 ||
	    snap_get_num(rd, fv, nf, 4, 0, 0xffff, &vendor) < 0 ||
	    snap_get_num(rd, fv, nf, 5, 0, 0xffff, &devid) < 0 ||
	    snap_get_str(rd, fv, nf, 6, d->driver, sizeof(d->driver)) < 0 ||
	    snap_get_num(rd, fv, nf, 7, -1, 255, &type) < 0 ||
	    snap_get_num(rd, fv, nf, 8, -1, 65535, &numa) < 0 ||
	    snap_get_str(rd, fv, nf, 9, d->fw_ver, sizeof(d->fw_ver)) < 0 ||
	    snap_get_str(rd, fv, nf, 10, d->node_guid, sizeof(d->node_guid)) < 0 ||
	    snap_get_chardev(rd, fv, nf, 11, &d->uverbs) < 0)
		return -EINVAL;
	d->vendor = (unsigned)vendor;
	d->device_id = (unsigned)devid;
	d->node_type = (int)type;
	d->numa_node = (int)numa;
	return 0;
}

static int get_port(struct restore *st, char **fv, int nf)
{
	struct snap_rd *rd = &st->rd;
	struct orh_device *d = st->inv->n_devs ? &st->inv->devs[st->inv->n_devs - 1] : NULL;
	long long num = 0, state = 0, phys = 0, ll = 0, len = 0, slot = 0;
	struct orh_port *p;

	if (!d || d->n_ports >= MAX_PORTS)
		return snap_fail(rd, 0, d ? "too many ports" : "before any dev line");
	d->ports = orh_xgrow(d->ports, d->n_ports, sizeof(*d->ports));
	p = &d->ports[d->n_ports++];
	memset(p, 0, sizeof(*p));
	if (snap_get_num(rd, fv, nf, 1, 0, 255, &num) < 0 ||
	    snap_get_num(rd, fv, nf, 2, -1, 255, &state) < 0 ||
	    snap_get_str(rd, fv, nf, 3, p->state_text, sizeof(p->state_text)) < 0 ||
	    snap_get_num(rd, fv, nf, 4, -1, 255, &phys) < 0 ||
	    snap_get_str(rd, fv, nf, 5, p->phys_state_text, sizeof(p->phys_state_text)) < 0 ||
	    snap_get_num(rd, fv, nf, 6, ORH_LL_UNKNOWN, ORH_LL_ETHERNET, &ll) < 0 ||
	    snap_get_str(rd, fv, nf, 7, p->rate, sizeof(p->rate)) < 0 ||
	    snap_get_str(rd, fv, nf, 8, p->netdev, sizeof(p->netdev)) < 0 ||
	    snap_get_num(rd, fv, nf, 9, 0, DISC_MAX_GIDS, &len) < 0 ||
	    snap_get_num(rd, fv, nf, 10, 0, MAX_DEVICES * MAX_PORTS, &slot) < 0 ||
	    snap_get_chardev(rd, fv, nf, 11, &p->umad) < 0 ||
	    snap_get_chardev(rd, fv, nf, 16, &p->issm) < 0)
		return -EINVAL;
	p->num = (unsigned)num;
	p->state = (int)state;
	p->phys_state = (int)phys;
	p->link_layer = (enum orh_link_layer)ll;
	p->gid_tbl_len = (unsigned)len;
	p->gid_slot = (size_t)slot;
	return 0;
}

static int get_port_gid(struct restore *st, char **fv, int nf)
{
	struct orh_device *d = st->inv->n_devs ? &st->inv->devs[st->inv->n_devs - 1] : NULL;
	struct orh_port *p = d && d->n_ports ? &d->ports[d->n_ports - 1] : NULL;

	if (!p || p->n_gids >= DISC_MAX_GIDS)
		return snap_fail(&st->rd, 0, p ? "too many entries" : "before any port line");
	p->gids = orh_xgrow(p->gids, p->n_gids, sizeof(*p->gids));
	return snap_get_gid(&st->rd, fv, nf, 1, &p->gids[p->n_gids++]);
}

static int get_gpu(struct restore *st, char **fv, int nf)
{
	struct snap_rd *rd = &st->rd;
	long long minor = 0, index = 0, numa = 0, devid = 0, cls = 0;
	struct orh_gpu *u;

	if (!*st->gpus_read || st->gpus->n >= ORH_GPU_MAX)
		return snap_fail(rd, 0, *st->gpus_read ? "too many GPUs" : "before the gpus line");
	st->gpus->v = orh_xgrow(st->gpus->v, st->gpus->n, sizeof(*st->gpus->v));
	u = &st->gpus->v[st->gpus->n++];
	memset(u, 0, sizeof(*u));
	if (snap_get_str(rd, fv, nf, 1, u->bdf, sizeof(u->bdf)) < 0 ||
	    snap_get_str(rd, fv, nf, 2, u->uuid, sizeof(u->uuid)) < 0 ||
	    snap_get_num(rd, fv, nf, 3, -1, 1 << 20, &minor) < 0 ||
	    snap_get_num(rd, fv, nf, 4, 0, ORH_GPU_MAX, &index) < 0 ||
	    snap_get_num(rd, fv, nf, 5, -1, 65535, &numa) < 0 ||
	    snap_get_str(rd, fv, nf, 6, u->pci_path, sizeof(u->pci_path)) < 0 ||
	    snap_get_num(rd, fv, nf, 7, 0, 0xffff, &devid) < 0 ||
	    snap_get_num(rd, fv, nf, 8, 0, 0xffffff, &cls) < 0 ||
	    snap_get_str(rd, fv, nf, 9, u->model, sizeof(u->model)) < 0)
		return -EINVAL;
	u->minor = (int)minor;
	u->index = (unsigned)index;
	u->numa_node = (int)numa;
	u->device_id = (unsigned)devid;
	u->pci_class = (unsigned)cls;
	return 0;
}

static int get_netdev(struct restore *st, char **fv, int nf)
{
	struct orh_inventory *inv = st->inv;
	struct orh_netdev *n;

	inv->netdevs = orh_xgrow(inv->netdevs, inv->n_netdevs, sizeof(*inv->netdevs));
	n = &inv->netdevs[inv->n_netdevs++];
	memset(n, 0, sizeof(*n));
	if (snap_get_str(&st->rd, fv, nf, 1, n->name, sizeof(n->name)) < 0 ||
	    snap_get_str(&st->rd, fv, nf, 2, n->operstate, sizeof(n->operstate)) < 0)
		return -EINVAL;
	return 0;
}

/* One line, by its kind. */
static int get_line(struct restore *st, char **fv, int nf)
{
	struct orh_inventory *inv = st->inv;
	const char *k = fv[0];

	if (!strcmp(k, "dev"))
		return get_device(st, fv, nf);
	if (!strcmp(k, "port"))
		return get_port(st, fv, nf);
	if (!strcmp(k, "pgid"))
		return get_port_gid(st, fv, nf);
	if (!strcmp(k, "rdma_cm"))
		return snap_get_chardev(&st->rd, fv, nf, 1, &inv->rdma_cm);
	if (!strcmp(k, "abi"))
		return snap_get_str(&st->rd, fv, nf, 1, inv->uverbs_abi, sizeof(inv->uverbs_abi));
	if (!strcmp(k, "route"))
		return snap_get_str(&st->rd, fv, nf, 1, inv->default_route_if,
				    sizeof(inv->default_route_if));
	if (!strcmp(k, "netdev"))
		return get_netdev(st, fv, nf);
	if (!strcmp(k, "src") || !strcmp(k, "sgid") || !strcmp(k, "swarn"))
		return disc_gids_restore_line(inv->gid_source, &st->rd, fv, nf);
	if (!strcmp(k, "gpus")) {
		*st->gpus_read = true;
		return 0;
	}
	if (!strcmp(k, "gpu"))
		return get_gpu(st, fv, nf);
	if (nf < 2)
		return snap_fail(&st->rd, nf, "missing");
	if (!strcmp(k, "warn"))
		orh_strv_push(&inv->warnings, orh_xstrdup(fv[1]));
	else if (!strcmp(k, "gpuwarn"))
		orh_strv_push(&st->gpus->warnings, orh_xstrdup(fv[1]));
	else if (!strcmp(k, "gpuerr") && !*st->gpus_error)
		*st->gpus_error = orh_xstrdup(fv[1]);
	else
		return snap_fail(&st->rd, 0, "not a kind of line this build reads");
	return 0;
}

/* Every port's GID slot names a tracked port (or none). */
static int slots_known(struct restore *st)
{
	size_t n_src = disc_gids_count(st->inv->gid_source);

	for (size_t i = 0; i < st->inv->n_devs; i++)
		for (size_t k = 0; k < st->inv->devs[i].n_ports; k++)
			if (st->inv->devs[i].ports[k].gid_slot > n_src) {
				st->rd.kind = "port";
				st->rd.line = 0;
				return snap_fail(&st->rd, 10, "names no src line");
			}
	return 0;
}

static int parse(struct restore *st, char *text)
{
	char *fv[MAX_FIELDS];
	long long version = 0;
	int r = 0;

	for (char *line = text; line && *line && r == 0;) {
		char *nl = strchr(line, '\n');
		int nf;

		if (nl)
			*nl = '\0';
		st->rd.line++;
		nf = snap_split(line, fv, MAX_FIELDS);
		st->rd.kind = fv[0];
		if (st->rd.line == 1)
			r = strcmp(fv[0], MAGIC) ? snap_fail(&st->rd, 0, "not " MAGIC)
			    : snap_get_num(&st->rd, fv, nf, 1, ORH_SNAPSHOT_VERSION,
					   ORH_SNAPSHOT_VERSION, &version);
		else
			r = get_line(st, fv, nf);
		line = nl ? nl + 1 : NULL;
	}
	if (r == 0 && st->rd.line == 0)
		r = orh_fail(st->rd.err, EINVAL, "%s: empty", st->rd.what);
	return r == 0 ? slots_known(st) : r;
}

int orh_snapshot_restore(const json_t *snap, const char *what,
			 const struct orh_discover_opts *opts, struct orh_inventory *inv,
			 struct orh_gpus *gpus, bool *gpus_read, char **gpus_error,
			 struct orh_err *err)
{
	struct restore st = { .rd = { .what = what, .err = err }, .inv = inv, .gpus = gpus,
			      .gpus_read = gpus_read, .gpus_error = gpus_error };
	const json_t *node = json_object_get(snap, "node");
	struct orh_discover_opts o = *opts;
	_cleanup_free_ char *text = NULL;
	int root, r;

	memset(inv, 0, sizeof(*inv));
	memset(gpus, 0, sizeof(*gpus));
	*gpus_read = false;
	*gpus_error = NULL;
	if (!json_is_string(node))
		return orh_fail(err, EINVAL, "%s: field 'node': missing or not a string", what);
	text = orh_xstrdup(json_string_value(node));
	if (!o.sysroot)
		o.sysroot = "/";
	o.gid_scan = ORH_GIDS_PLAN;
	root = open(o.sysroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return orh_fail_errno(err, errno, "opening sysroot '%s'", o.sysroot);
	inv->gid_source = disc_gids_open(&o, root);
	r = parse(&st, text);
	if (r < 0) {
		orh_inventory_free(inv);
		orh_gpus_free(gpus);
		free(*gpus_error);
		*gpus_error = NULL;
		*gpus_read = false;
	}
	return r;
}
