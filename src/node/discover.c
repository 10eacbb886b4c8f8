/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Discovery: the node's RDMA devices, ports, GID tables, uverbs/umad/issm/rdma_cm
 * numbers (discover_chardev.c) and the default route, read from <sysroot>/sys and
 * <sysroot>/proc/net/route.
 *
 * Every value is read with a size limit. A missing or garbled file skips that one entry
 * with a warning naming the file; it never hides the rest of the node. Only what the
 * caller needs is read: unused GID entries cost one read, their type and netdev none.
 * In plan mode no GID table is scanned up front: the planner asks for the entries its
 * decision needs through the reader its caller passes it, and they are read then, once
 * each (discover_gids.c). Discovery applies no rule: which ports need more than their
 * state and link layer, and which GID entries need their type read, is the caller's to
 * say (opts->port_wanted, opts->gid_wanted: the planner's rules 1 and 4).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "discover_chardev.h"
#include "discover_gids.h"
#include "sysfs.h"

#define ROUTE_MAX (1024 * 1024)
#define MAX_DEVICES 1024
#define MAX_PORTS 256

static bool looks_like_pci(const char *s)
{
	unsigned a, b, c, d;
	char tail;

	return strlen(s) == 12 && sscanf(s, "%4x:%2x:%2x.%1x%c", &a, &b, &c, &d, &tail) == 4;
}

static void push_gid(struct orh_port *p, const struct orh_gid *g, size_t *cap)
{
	if (!p->netdev[0] && g->ndev[0])
		strcpy(p->netdev, g->ndev);
	if (p->n_gids == *cap) {
		*cap = *cap ? *cap * 2 : 8;
		p->gids = orh_xrealloc(p->gids, *cap * sizeof(*p->gids));
	}
	p->gids[p->n_gids++] = *g;
}

static void scan_gids(struct scan *sc, int portfd, const char *where, struct orh_port *p)
{
	struct orh_strv names = { 0 };
	size_t cap = 0;
	int r;

	r = disc_list_dir(portfd, "gids", &names);
	if (r < 0) {
		if (r != -ENOENT)
			disc_warn(sc, "skipping '%s/gids': %s", where, strerror(-r));
		return;
	}
	if (names.n > DISC_MAX_GIDS) {
		disc_warn(sc, "skipping '%s/gids': %zu entries, more than %d", where, names.n,
			  DISC_MAX_GIDS);
		orh_strv_free(&names);
		return;
	}
	p->gid_tbl_len = (unsigned)names.n;
	for (size_t i = 0; i < names.n; i++) {
		unsigned long long idx;
		struct orh_gid g;

		if (orh_parse_uint(names.v[i], DISC_MAX_GIDS, &idx) < 0) {
			disc_warn(sc, "skipping '%s/gids/%s': not a GID index", where, names.v[i]);
			continue;
		}
		if (disc_read_gid(sc, portfd, "", where, (unsigned)idx, true, &g) == 1)
			push_gid(p, &g, &cap);
	}
	orh_strv_free(&names);
}

/* The port's netdev when no GID names one (InfiniBand: the IPoIB interface). */
static void port_netdev_from_device(struct scan *sc, int devfd, struct orh_port *p)
{
	struct orh_strv nets = { 0 };

	if (disc_list_dir(devfd, "device/net", &nets) < 0 || nets.n == 0) {
		orh_strv_free(&nets);
		return;
	}
	for (size_t i = 0; i < nets.n && !p->netdev[0]; i++) {
		char path[128], buf[32];
		unsigned long long dp;

		if (!disc_valid_name(nets.v[i], IFNAMSIZ))
			continue;
		snprintf(path, sizeof(path), "device/net/%s/dev_port", nets.v[i]);
		if (disc_read_value(sc, devfd, path, buf, sizeof(buf)) > 0 &&
		    orh_parse_uint(buf, 1024, &dp) == 0 && dp + 1 == p->num)
			strcpy(p->netdev, nets.v[i]);
	}
	if (!p->netdev[0] && nets.n == 1 && disc_valid_name(nets.v[0], IFNAMSIZ))
		strcpy(p->netdev, nets.v[0]);
	orh_strv_free(&nets);
}

/* Read one port. Plan mode reads its few files through the device's directory, and
 * returns false for a port number the device does not have (probing); otherwise true. */
static bool scan_port(struct scan *sc, int devfd, const char *devwhere, struct orh_port *p)
{
	char path[96], where[512], buf[VALUE_MAX];
	_cleanup_close_ int portfd = -1;
	int dirfd = devfd;
	const char *wbase = disc_plan_mode(sc) ? devwhere : where; /* where path is relative to */
	size_t plen;
	ssize_t n;

	/* Warnings name <wbase>/<path>. Paths are built by hand: snprintf's cost shows in a
	 * hook that reads a few files a port. */
	p->state = p->phys_state = -1;
	orh_put_uint(stpcpy(path, "ports/"), p->num);
	if (disc_plan_mode(sc)) {
		strcat(path, "/");
	} else {
		snprintf(where, sizeof(where), "%s/ports/%u", devwhere, p->num);
		portfd = openat(devfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (portfd < 0) {
			disc_warn(sc, "skipping '%s': %s", where, strerror(errno));
			return true;
		}
		dirfd = portfd;
		path[0] = '\0';
	}
	plen = strlen(path);
#define PORT_FILE(name) (strcpy(path + plen, name), path) /* plen <= 10, names <= 10 */
	n = disc_read_value(sc, dirfd, PORT_FILE("state"), buf, sizeof(buf));
	if (n == -ENOENT && disc_plan_mode(sc)) {
		/* probing: is there such a port at all? */
		path[plen - 1] = '\0';
		if (faccessat(devfd, path, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
			return false;
		path[plen - 1] = '/';
	}
	if (n < 0)
		disc_warn(sc, "skipping '%s/%s': %s", wbase, path, disc_err_text(n));
	else if (orh_parse_port_state(buf, &p->state, p->state_text, sizeof(p->state_text)) < 0) {
		disc_warn(sc, "skipping '%s/%s': garbled value '%.32s'", wbase, path, buf);
		p->state = -1;
	}
	if (!disc_plan_mode(sc) &&
	    disc_read_required(sc, dirfd, where, "phys_state", buf, sizeof(buf)) &&
	    orh_parse_port_state(buf, &p->phys_state, p->phys_state_text,
				 sizeof(p->phys_state_text)) < 0) {
		disc_warn(sc, "skipping '%s/phys_state': garbled value '%.32s'", where, buf);
		p->phys_state = -1;
	}
	if (disc_read_required(sc, dirfd, wbase, PORT_FILE("link_layer"), buf, sizeof(buf)) &&
	    orh_parse_link_layer(buf, &p->link_layer) < 0)
		disc_warn(sc, "skipping '%s/%s': garbled value '%.32s'", wbase, path, buf);
#undef PORT_FILE
	if (!disc_plan_mode(sc)) {
		if (disc_read_value(sc, dirfd, "rate", buf, sizeof(buf)) > 0)
			orh_strlcpy(p->rate, buf, sizeof(p->rate));
		scan_gids(sc, dirfd, where, p);
	} else {
		/* A port the caller will not use needs nothing more; a RoCE port's GID
		 * entries are read when the planner asks for them. */
		if (sc->opts->port_wanted && !sc->opts->port_wanted(p))
			return true;
		if (p->link_layer == ORH_LL_ETHERNET) {
			disc_gids_track(sc, p, devfd, devwhere);
			disc_gids_netdev(sc, p, devfd);
		}
	}
	if (!p->netdev[0])
		port_netdev_from_device(sc, devfd, p);
	return true;
}

static void read_vendor(struct scan *sc, int devfd, const char *where, struct orh_device *d)
{
	char buf[VALUE_MAX];

	if (disc_read_value(sc, devfd, "device/vendor", buf, sizeof(buf)) >= 0 &&
	    orh_parse_hex_id(buf, &d->vendor) < 0)
		disc_warn(sc, "ignoring '%s/device/vendor': garbled value '%.32s'", where, buf);
}

/* Where the device sits in the PCI hierarchy, for NIC affinity to GPUs (affinity.c). */
static void read_topology(struct scan *sc, int devfd, const char *where, struct orh_device *d)
{
	char buf[VALUE_MAX];
	int r;

	snprintf(buf, sizeof(buf), "sys/class/infiniband/%s/device", d->name);
	r = disc_sysfs_path(sc->opts->sysroot, buf, d->pci_path, sizeof(d->pci_path));
	if (r < 0 && r != -ENOENT)
		disc_warn(sc, "ignoring '%s/device': %s", where,
			  r == -EXDEV ? "leads outside sys/" : strerror(-r));
	/* plan mode reads no device link else: the PCI address is the path's last part (a
	 * DRA claim's metadata names the device by it) */
	if (!d->pci[0] && r >= 0 && strrchr(d->pci_path, '/') &&
	    looks_like_pci(strrchr(d->pci_path, '/') + 1))
		orh_strlcpy(d->pci, strrchr(d->pci_path, '/') + 1, sizeof(d->pci));
	if (disc_read_value(sc, devfd, "device/numa_node", buf, sizeof(buf)) > 0 &&
	    orh_parse_numa_node(buf, &d->numa_node) < 0)
		disc_warn(sc, "ignoring '%s/device/numa_node': garbled value '%.32s'", where, buf);
}

static void scan_device_pci(struct scan *sc, int devfd, const char *where, struct orh_device *d)
{
	char buf[VALUE_MAX];

	d->numa_node = -1;
	disc_link_basename(devfd, "device/driver", d->driver, sizeof(d->driver));
	if (disc_plan_mode(sc)) {
		/* the plan needs the driver, and the vendor only when there is no driver link */
		if (!d->driver[0])
			read_vendor(sc, devfd, where, d);
		if (sc->opts->topology)
			read_topology(sc, devfd, where, d);
		return;
	}
	disc_link_basename(devfd, "device", buf, sizeof(buf));
	if (looks_like_pci(buf))
		strcpy(d->pci, buf);
	read_vendor(sc, devfd, where, d);
	if (disc_read_value(sc, devfd, "device/device", buf, sizeof(buf)) >= 0 &&
	    orh_parse_hex_id(buf, &d->device_id) < 0)
		disc_warn(sc, "ignoring '%s/device/device': garbled value '%.32s'", where, buf);
	read_topology(sc, devfd, where, d);
}

static int cmp_ports(const void *a, const void *b)
{
	const struct orh_port *x = a, *y = b;
	return (x->num > y->num) - (x->num < y->num);
}

static void scan_device(struct scan *sc, const char *name)
{
	struct orh_inventory *inv = sc->inv;
	char where[512], buf[VALUE_MAX];
	_cleanup_close_ int devfd = -1;
	struct orh_strv ports = { 0 };
	struct orh_device d = { 0 };
	int r;

	snprintf(where, sizeof(where), "%s/sys/class/infiniband/%s",
		 strcmp(sc->opts->sysroot, "/") ? sc->opts->sysroot : "", name);
	if (!disc_valid_name(name, sizeof(d.name))) {
		disc_warn(sc, "skipping '%s': not a usable device name", where);
		return;
	}
	snprintf(buf, sizeof(buf), "sys/class/infiniband/%s", name);
	devfd = openat(sc->root, buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (devfd < 0) {
		disc_warn(sc, "skipping '%s': %s", where, strerror(errno));
		return;
	}
	strcpy(d.name, name);
	d.node_type = -1;
	d.numa_node = -1;
	if (!disc_plan_mode(sc) && disc_read_value(sc, devfd, "node_type", buf, sizeof(buf)) >= 0 &&
	    orh_parse_port_state(buf, &d.node_type, NULL, 0) < 0) {
		disc_warn(sc, "ignoring '%s/node_type': garbled value '%.32s'", where, buf);
		d.node_type = -1;
	}
	if (!disc_plan_mode(sc) && disc_read_value(sc, devfd, "fw_ver", buf, sizeof(buf)) > 0)
		orh_strlcpy(d.fw_ver, buf, sizeof(d.fw_ver));
	if (!disc_plan_mode(sc) && disc_read_value(sc, devfd, "node_guid", buf, sizeof(buf)) > 0)
		orh_strlcpy(d.node_guid, buf, sizeof(d.node_guid));
	scan_device_pci(sc, devfd, where, &d);

	if (disc_plan_mode(sc)) {
		/* The kernel numbers a device's ports from 1 without gaps (a switch's port 0
		 * is never an HCA port): probe them in turn instead of listing ports/. */
		for (unsigned num = 1; num <= 255 && d.n_ports < MAX_PORTS; num++) {
			struct orh_port port = { .num = num };

			if (!scan_port(sc, devfd, where, &port))
				break;
			d.ports = orh_xgrow(d.ports, d.n_ports, sizeof(*d.ports));
			d.ports[d.n_ports++] = port;
		}
		goto ports_done;
	}
	r = disc_list_dir(devfd, "ports", &ports);
	if (r < 0)
		disc_warn(sc, "skipping '%s/ports': %s", where, strerror(-r));
	for (size_t i = 0; i < ports.n && d.n_ports < MAX_PORTS; i++) {
		unsigned long long num;

		if (orh_parse_uint(ports.v[i], 255, &num) < 0 || num == 0) {
			disc_warn(sc, "skipping '%s/ports/%s': not a port number", where,
				  ports.v[i]);
			continue;
		}
		d.ports = orh_xgrow(d.ports, d.n_ports, sizeof(*d.ports));
		memset(&d.ports[d.n_ports], 0, sizeof(*d.ports));
		d.ports[d.n_ports].num = (unsigned)num;
		scan_port(sc, devfd, where, &d.ports[d.n_ports]);
		d.n_ports++;
	}
	orh_strv_free(&ports);
ports_done:
	if (disc_gids_keeps(inv->gid_source, devfd))
		devfd = -1; /* kept for the ports' GID entries */
	if (d.n_ports > 1 && !disc_plan_mode(sc)) /* probed in order: sorted already */
		qsort(d.ports, d.n_ports, sizeof(*d.ports), cmp_ports);
	inv->devs = orh_xgrow(inv->devs, inv->n_devs, sizeof(*inv->devs));
	inv->devs[inv->n_devs++] = d;
}

static void scan_route(struct scan *sc, const char *rootname)
{
	_cleanup_close_ int fd = openat(sc->root, "proc/net/route", O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *text = NULL;
	unsigned best = ~0u;
	char *save = NULL;
	int lineno = 0;

	(*sc->reads)++;
	if (fd < 0) {
		disc_warn(sc, "skipping '%s/proc/net/route': %s", rootname, strerror(errno));
		return;
	}
	if (orh_read_fd_all(fd, ROUTE_MAX, &text, NULL) < 0) {
		disc_warn(sc, "skipping '%s/proc/net/route': unreadable or too large", rootname);
		return;
	}
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char ifname[IFNAMSIZ];
		bool is_default;
		unsigned metric;

		if (lineno++ == 0)
			continue; /* header */
		if (orh_parse_route_line(line, ifname, &is_default, &metric) < 0) {
			disc_warn(sc, "skipping '%s/proc/net/route' line %d: garbled", rootname,
				  lineno);
			continue;
		}
		if (is_default && metric < best && disc_valid_name(ifname, IFNAMSIZ)) {
			best = metric;
			strcpy(sc->inv->default_route_if, ifname);
		}
	}
}

static void add_netdev(struct scan *sc, const char *name)
{
	struct orh_inventory *inv = sc->inv;
	char path[128];
	struct orh_netdev nd = { 0 };

	if (!name[0])
		return;
	for (size_t i = 0; i < inv->n_netdevs; i++)
		if (strcmp(inv->netdevs[i].name, name) == 0)
			return;
	strcpy(nd.name, name);
	snprintf(path, sizeof(path), "sys/class/net/%s/operstate", name);
	if (disc_read_value(sc, sc->root, path, nd.operstate, sizeof(nd.operstate)) < 0)
		strcpy(nd.operstate, "missing");
	inv->netdevs = orh_xrealloc(inv->netdevs, (inv->n_netdevs + 1) * sizeof(*inv->netdevs));
	inv->netdevs[inv->n_netdevs++] = nd;
}

int orh_discover(const struct orh_discover_opts *opts, struct orh_inventory *inv,
		 struct orh_err *err)
{
	struct orh_discover_opts o = *opts;
	const char *rootname;
	struct orh_readbatch batch = { 0 };
	struct scan sc = { .opts = &o, .inv = inv, .root = -1, .batch = &batch,
			   .warnings = &inv->warnings, .reads = &inv->file_reads };
	struct orh_strv names = { 0 };
	int r;

	memset(inv, 0, sizeof(*inv));
	if (!o.sysroot || !*o.sysroot)
		o.sysroot = "/";
	rootname = strcmp(o.sysroot, "/") ? o.sysroot : "";
	sc.root = open(o.sysroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sc.root < 0)
		return orh_fail_errno(err, errno, "opening sysroot '%s'", o.sysroot);
	if (o.gid_scan == ORH_GIDS_PLAN) {
		inv->gid_source = disc_gids_open(&o, sc.root);
		/* flushed as GID entries are read, and at the end */
		sc.batch = disc_gids_batch(inv->gid_source);
	}

	r = disc_list_dir(sc.root, "sys/class/infiniband", &names);
	if (r < 0 && r != -ENOENT)
		disc_warn(&sc, "skipping '%s/sys/class/infiniband': %s", rootname, strerror(-r));
	for (size_t i = 0; i < names.n && inv->n_devs < MAX_DEVICES; i++)
		scan_device(&sc, names.v[i]);
	orh_strv_free(&names);

	if (inv->n_devs)
		disc_scan_chardevs(&sc, rootname);
	scan_route(&sc, rootname);
	if (o.gid_scan == ORH_GIDS_PLAN)
		return 0; /* net device states are for detect; the root stays open for GIDs */
	add_netdev(&sc, inv->default_route_if);
	for (size_t i = 0; i < inv->n_devs; i++)
		for (size_t p = 0; p < inv->devs[i].n_ports; p++)
			add_netdev(&sc, inv->devs[i].ports[p].netdev);
	orh_readbatch_flush(&batch);
	close(sc.root);
	return 0;
}

void orh_inventory_free(struct orh_inventory *inv)
{
	for (size_t i = 0; i < inv->n_devs; i++) {
		for (size_t p = 0; p < inv->devs[i].n_ports; p++)
			free(inv->devs[i].ports[p].gids);
		free(inv->devs[i].ports);
	}
	free(inv->devs);
	disc_gids_free(inv->gid_source);
	free(inv->netdevs);
	orh_strv_free(&inv->warnings);
	memset(inv, 0, sizeof(*inv));
}
