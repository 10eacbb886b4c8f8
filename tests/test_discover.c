/* SPDX-License-Identifier: Apache-2.0 */
/* Discovery on fake sysfs trees built by tests/mknode.py, and on damaged copies. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node_fixture.h"
#include "orh/node/inventory.h"
#include "orh/decide/plan.h"

static char root[256];
static struct orh_inventory inv;
static struct orh_err err;
/* The warnings of the last plan made from a plan-mode inventory: its GID reads' */
static struct orh_strv read_warnings;

static void make_node(const char *node)
{
	fixture_make_node(root, sizeof(root), "orh-disc", node);
}

static void cleanup(void)
{
	orh_inventory_free(&inv);
	orh_strv_free(&read_warnings);
	fixture_remove_node(root);
}

static void discover(enum orh_gid_scan mode)
{
	struct orh_discover_opts o = {
		.sysroot = root, .gid_scan = mode,
		.want = { .family = AF_INET, .roce_version = 2 }, .mad = mode == ORH_GIDS_ALL,
		.port_wanted = orh_plan_port_usable, /* as the decision asks */
		.gid_wanted = orh_plan_gid_wanted,
	};
	orh_inventory_free(&inv);
	cr_assert_eq(orh_discover(&o, &inv, &err), 0, "%s", err.msg);
}

static const struct orh_device *dev(const char *name)
{
	for (size_t i = 0; i < inv.n_devs; i++)
		if (!strcmp(inv.devs[i].name, name))
			return &inv.devs[i];
	cr_assert_fail("device %s not found", name);
	return NULL;
}

static bool warned(const char *needle)
{
	for (size_t i = 0; i < inv.warnings.n; i++)
		if (strstr(inv.warnings.v[i], needle))
			return true;
	for (size_t i = 0; i < read_warnings.n; i++)
		if (strstr(read_warnings.v[i], needle))
			return true;
	return false;
}

/* A plan's own warnings, leaving out those of the files read (a full scan reads every
 * entry and warns in discovery; a plan-mode one warns as it reads). */
static size_t decision_warnings(const struct orh_strv *w)
{
	size_t n = 0;

	for (size_t i = 0; i < w->n; i++)
		n += strncmp(w->v[i], "skipping '", 10) && strncmp(w->v[i], "ignoring '", 10);
	return n;
}

static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	cr_assert_not_null(f, "open %s", path);
	fputs(text, f);
	fclose(f);
}

TestSuite(discover, .fini = cleanup);

Test(discover, seed001_everything)
{
	char gid[40], ip[16];

	make_node("seed001-roce");
	discover(ORH_GIDS_ALL);
	cr_assert_eq(inv.n_devs, 9);
	cr_assert_eq(inv.warnings.n, 0, "unexpected warning: %s", inv.warnings.n ? inv.warnings.v[0] : "");
	cr_assert_str_eq(inv.default_route_if, "eth0");
	cr_assert(inv.rdma_cm.present);
	cr_assert_eq(inv.rdma_cm.major, 10);
	cr_assert_eq(inv.rdma_cm.minor, 58);
	cr_assert_str_eq(inv.uverbs_abi, "6");
	const struct orh_device *d = dev("mlx5_1");
	cr_assert_eq(d->vendor, 0x15b3);
	cr_assert_str_eq(d->driver, "mlx5_core");
	cr_assert_eq(d->node_type, 1);
	cr_assert_eq(strlen(d->pci), 12);
	cr_assert(d->uverbs.present);
	cr_assert_str_eq(d->uverbs.name, "uverbs1");
	cr_assert_eq(d->uverbs.major, 231);
	cr_assert_eq(d->uverbs.minor, 193);
	cr_assert_eq(d->n_ports, 1);
	const struct orh_port *p = &d->ports[0];
	cr_assert_eq(p->state, ORH_PORT_ACTIVE);
	cr_assert_str_eq(p->state_text, "ACTIVE");
	cr_assert_eq(p->phys_state, 5);
	cr_assert_eq(p->link_layer, ORH_LL_ETHERNET);
	cr_assert_str_eq(p->netdev, "eth1");
	cr_assert_eq(p->gid_tbl_len, 256);
	cr_assert_eq(p->n_gids, 4);
	cr_assert_eq(p->gid_slot, 0, "a full scan reads the table, no source needed");
	orh_format_gid(p->gids[3].raw, gid);
	cr_assert_str_eq(gid, "0000:0000:0000:0000:0000:ffff:190b:8002");
	cr_assert_eq(p->gids[3].type, ORH_GID_TYPE_ROCE_V2);
	cr_assert_eq(p->gids[2].type, ORH_GID_TYPE_IB_ROCE_V1);
	cr_assert(p->gids[3].ipv4_mapped);
	inet_ntop(AF_INET, &p->gids[3].ipv4, ip, sizeof(ip));
	cr_assert_str_eq(ip, "25.11.128.2");
	cr_assert_str_eq(p->gids[3].ndev, "eth1");
	cr_assert_not(p->gids[0].ipv4_mapped);
	cr_assert_eq(inv.n_netdevs, 9);
}

Test(discover, plan_mode_reads_gid_entries_on_demand)
{
	const struct orh_port *p;
	struct orh_gid_reader rd;
	struct orh_strv warn = { 0 };
	struct orh_gid g;
	unsigned long before;

	make_node("seed001-roce");
	discover(ORH_GIDS_PLAN);
	p = &dev("mlx5_1")->ports[0];
	cr_assert_str_eq(p->netdev, "eth1"); /* from gid_attrs/ndevs/0 */
	cr_assert_eq(p->n_gids, 0, "discovery read %zu GID entries", p->n_gids);
	cr_assert_neq(p->gid_slot, 0);
	rd = orh_inventory_gids(&inv);
	before = orh_inventory_reads(&inv);
	cr_assert_eq(rd.entry(rd.arg, p, 3, &g, &warn), 1);
	cr_assert_eq(g.type, ORH_GID_TYPE_ROCE_V2);
	cr_assert(g.ipv4_mapped);
	cr_assert_eq(orh_inventory_reads(&inv), before + 2, "gids/3 and its type: %lu reads",
		     orh_inventory_reads(&inv) - before);
	cr_assert_eq(rd.entry(rd.arg, p, 3, &g, &warn), 1);
	cr_assert_eq(orh_inventory_reads(&inv), before + 2, "asked again, read again");
	cr_assert_eq(rd.entry(rd.arg, p, 0, &g, &warn), 1);
	cr_assert_eq(g.type, ORH_GID_TYPE_UNKNOWN, "a link-local entry needs no type");
	cr_assert_eq(orh_inventory_reads(&inv), before + 3);
	cr_assert_eq(rd.entry(rd.arg, p, 200, &g, &warn), 0, "unused");
	cr_assert_eq(rd.entry(rd.arg, p, 256, &g, &warn), -ENOENT);
	cr_assert_eq(rd.entry(rd.arg, p, 300, &g, &warn), -ENOENT);
	cr_assert_eq(warn.n, 0);
	/* what was read is kept by the reader: the inventory is as discovery left it */
	cr_assert_eq(p->n_gids, 0);
	cr_assert_eq(p->gid_tbl_len, 0);
}

/* A GID file that cannot be read is named in the warnings the planner passes. */
Test(discover, plan_mode_gid_warning_reaches_the_reader_caller)
{
	const struct orh_port *p;
	struct orh_gid_reader rd;
	struct orh_strv warn = { 0 };
	struct orh_gid g;

	make_node("seed001-roce");
	put("sys/class/infiniband/mlx5_1/ports/1/gids/3", "not a gid\n");
	discover(ORH_GIDS_PLAN);
	p = &dev("mlx5_1")->ports[0];
	rd = orh_inventory_gids(&inv);
	cr_assert_eq(rd.entry(rd.arg, p, 3, &g, &warn), 0);
	cr_assert_eq(warn.n, 1);
	cr_assert(strstr(warn.v[0], "mlx5_1/ports/1/gids/3"), "%s", warn.v[0]);
	cr_assert_eq(inv.warnings.n, 0, "the inventory's warnings are discovery's");
	orh_strv_free(&warn);
}

/* The plan from a plan-mode inventory (entries read on demand) is the plan from the
 * complete one; returns the files the plan-mode run read. */
static unsigned long same_plan_both_ways(const char *what)
{
	struct orh_config cfg;
	struct orh_plan full, lazy;
	struct orh_inventory full_inv;
	struct orh_gid_reader gids;
	unsigned long reads;

	orh_config_defaults(&cfg);
	discover(ORH_GIDS_ALL);
	cr_assert_eq(orh_plan_build(&cfg, &inv, NULL, NULL, &full, &err), 0);
	/* the complete inventory stays alive beside the plan-mode one: full's port choices
	 * point into it, and the messages below name its devices and ports */
	full_inv = inv;
	memset(&inv, 0, sizeof(inv));
	discover(ORH_GIDS_PLAN);
	gids = orh_inventory_gids(&inv);
	cr_assert_eq(orh_plan_build(&cfg, &inv, &gids, NULL, &lazy, &err), 0);
	reads = orh_inventory_reads(&inv);
	/* two empty plans agree on nothing: every node but "nordma" has ports NCCL drives */
	if (strcmp(what, "nordma") != 0) {
		cr_assert_gt(full_inv.n_devs, 0, "%s: no device read", what);
		cr_assert_gt(full.n_ports, 0, "%s: the plan has no port", what);
		cr_assert_gt(full.n_env, 0, "%s: the plan sets no variable", what);
	} else {
		cr_assert_eq(full.n_ports, 0, "%s: a plan without RDMA has ports", what);
	}
	cr_assert_eq(full.n_env, lazy.n_env, "%s: %zu vs %zu variables", what, full.n_env, lazy.n_env);
	for (size_t i = 0; i < full.n_env; i++) {
		cr_assert_str_eq(full.env[i].name, lazy.env[i].name, "%s", what);
		cr_assert_str_eq(full.env[i].value, lazy.env[i].value, "%s: %s", what, full.env[i].name);
	}
	cr_assert_eq(full.n_nodes, lazy.n_nodes, "%s", what);
	for (size_t i = 0; i < full.n_nodes; i++)
		cr_assert_str_eq(full.nodes[i].path, lazy.nodes[i].path, "%s", what);
	cr_assert_eq(full.n_ports, lazy.n_ports, "%s", what);
	for (size_t i = 0; i < full.n_ports; i++) {
		cr_assert_eq(full.ports[i].used, lazy.ports[i].used, "%s: %s:%u", what,
			     full.ports[i].dev->name, full.ports[i].port->num);
		cr_assert_eq(full.ports[i].gid_index, lazy.ports[i].gid_index, "%s: %s:%u", what,
			     full.ports[i].dev->name, full.ports[i].port->num);
		cr_assert_str_eq(full.ports[i].reason, lazy.ports[i].reason, "%s", what);
	}
	cr_assert_eq(full.gid_index, lazy.gid_index, "%s", what);
	cr_assert_eq(full.gid_per_device, lazy.gid_per_device, "%s", what);
	cr_assert_eq(decision_warnings(&full.warnings), decision_warnings(&lazy.warnings), "%s",
		     what);
	orh_strv_free(&read_warnings);
	for (size_t i = 0; i < lazy.warnings.n; i++)
		orh_strv_push(&read_warnings, orh_xstrdup(lazy.warnings.v[i]));
	orh_plan_free(&full);
	orh_inventory_free(&full_inv);
	orh_plan_free(&lazy);
	orh_config_free(&cfg);
	return reads;
}

Test(discover, plan_mode_gives_the_same_plan_on_every_sample_node)
{
	static const char *const nodes[] = { "seed001-roce", "erdma", "ib", "mixed", "nordma", "scale",
					     "dgx-h100", "seed001-gpu" };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(nodes); i++) {
		make_node(nodes[i]);
		same_plan_both_ways(nodes[i]);
		cleanup();
		root[0] = '\0';
	}
}

Test(discover, plan_mode_gives_the_same_plan_on_a_damaged_node)
{
	make_node("seed001-roce");
	put("sys/class/infiniband/mlx5_4/ports/1/gids/3", "not-a-gid\n");
	put("sys/class/infiniband/mlx5_5/ports/1/gid_attrs/types/3", "RoCE v9\n");
	put("sys/class/infiniband/mlx5_6/ports/1/gid_attrs/ndevs/0", "bad name\n");
	same_plan_both_ways("damaged seed001");
	cr_assert(warned("mlx5_4/ports/1/gids/3': not a GID"));
	cr_assert(warned("mlx5_5/ports/1/gid_attrs/types/3': unknown GID type"));
}

/* Move GID entry `from` of <dev>'s port 1 to index `to`, leaving `from` unused (the zero
 * GID; its type and ndev unreadable, as the kernel's EINVAL: an empty file here). */
static void move_gid(const char *dev, unsigned from, unsigned to)
{
	static const char *const files[] = { "gids", "gid_attrs/types", "gid_attrs/ndevs" };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(files); i++) {
		char rel[256], text[128] = "";
		FILE *f;

		snprintf(rel, sizeof(rel), "%s/sys/class/infiniband/%s/ports/1/%s/%u", root, dev,
			 files[i], from);
		f = fopen(rel, "r");
		cr_assert_not_null(f, "open %s", rel);
		cr_assert_not_null(fgets(text, sizeof(text), f), "read %s", rel);
		fclose(f);
		snprintf(rel, sizeof(rel), "sys/class/infiniband/%s/ports/1/%s/%u", dev, files[i], to);
		put(rel, text);
		snprintf(rel, sizeof(rel), "sys/class/infiniband/%s/ports/1/%s/%u", dev, files[i], from);
		put(rel, i == 0 ? "0000:0000:0000:0000:0000:0000:0000:0000\n" : "");
	}
}

static const char *lazy_env(const char *name)
{
	static char value[64];
	struct orh_config cfg;
	struct orh_plan plan;
	struct orh_gid_reader gids;
	const struct orh_env_entry *e;

	orh_config_defaults(&cfg);
	discover(ORH_GIDS_PLAN);
	gids = orh_inventory_gids(&inv);
	cr_assert_eq(orh_plan_build(&cfg, &inv, &gids, NULL, &plan, &err), 0);
	e = orh_plan_env_get(&plan, name);
	snprintf(value, sizeof(value), "%s", e ? e->value : "(unset)");
	orh_plan_free(&plan);
	orh_config_free(&cfg);
	return value;
}

/* The kernel puts a new GID at the lowest free index and frees an entry's slot when its
 * address goes (drivers/infiniband/core/cache.c): a table can hold its only wanted entry
 * after any run of unused ones. No search may stop at an unused entry. */
Test(discover, wanted_entries_past_unused_ones_are_found)
{
	static const char *const fabric[] = { "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4",
					      "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8" };

	make_node("seed001-roce");
	/* every fabric port: link-local 0/1, unused 2..199, IPv4 v1/v2 at 200/201 */
	for (size_t i = 0; i < ORH_ARRAY_SIZE(fabric); i++) {
		move_gid(fabric[i], 2, 200);
		move_gid(fabric[i], 3, 201);
	}
	same_plan_both_ways("entries past a hole");
	cr_assert_str_eq(lazy_env("NCCL_IB_GID_INDEX"), "201");
	/* one port's wanted entry further on, at 250 (199..249 unused after 201's v1 at
	 * 200): no index fits all, each port takes its own, as the full scan says */
	move_gid("mlx5_5", 201, 250);
	same_plan_both_ways("one port further on");
	cr_assert_str_eq(lazy_env("NCCL_IB_GID_INDEX"), "(unset)");
	cr_assert_str_eq(lazy_env("NCCL_IB_ROCE_VERSION_NUM"), "2");
	/* the last entry of the table, and nothing before it but link-local ones */
	move_gid("mlx5_5", 250, 255);
	move_gid("mlx5_5", 200, 254);
	same_plan_both_ways("the table's last entry");
	cr_assert_str_eq(lazy_env("NCCL_IB_GID_INDEX"), "(unset)");
}

Test(discover, scale_node_read_budget)
{
	unsigned long reads;

	make_node("scale");
	discover(ORH_GIDS_ALL);
	cr_assert_eq(inv.n_devs, 16);
	cr_assert_eq(inv.devs[15].n_ports, 2);
	cr_assert_eq(inv.devs[0].ports[0].n_gids, 50);
	cr_assert_lt(inv.file_reads, 12000, "%lu reads", inv.file_reads);
	/* 32 ports x (state, link layer, netdev, gids/3 and its type) + the first port's
	 * walk to index 3 + 16 uverbs x (ibdev, dev, its sys/dev/char link) + rdma_cm (dev,
	 * link) + the route + 16 probes for a third port that is not there: the plan reads
	 * what it decides on */
	reads = same_plan_both_ways("scale");
	cr_assert_leq(reads, 32 * 5 + 4 + 16 * 3 + 2 + 1 + 16, "%lu reads", reads);
}

Test(discover, erdma_node)
{
	make_node("erdma");
	discover(ORH_GIDS_ALL);
	cr_assert_eq(inv.n_devs, 2);
	const struct orh_device *a = dev("rocep26s0");
	cr_assert_eq(a->vendor, 0x1ded);
	cr_assert_str_eq(a->driver, "erdma");
	cr_assert_eq(a->ports[0].state, ORH_PORT_ACTIVE);
	cr_assert_eq(dev("rocep156s0")->ports[0].state, ORH_PORT_DOWN);
	cr_assert_eq(a->ports[0].gids[1].index, 1);
	cr_assert(a->ports[0].gids[1].ipv4_mapped);
}

Test(discover, infiniband_node_with_mad)
{
	make_node("ib");
	discover(ORH_GIDS_ALL);
	const struct orh_device *d = dev("mlx5_0");
	cr_assert_eq(d->ports[0].link_layer, ORH_LL_INFINIBAND);
	cr_assert_str_eq(d->ports[0].netdev, "ib0");
	cr_assert(d->ports[0].umad.present);
	cr_assert_eq(d->ports[0].umad.major, 231);
	cr_assert(d->ports[0].issm.present);
	cr_assert_eq(d->ports[0].issm.minor, d->ports[0].umad.minor + 64);
	cr_assert_eq(d->ports[0].gids[0].type == ORH_GID_TYPE_ROCE_V2, false);
	cr_assert_str_eq(d->ports[0].gids[0].ndev, "");
}

Test(discover, no_rdma_node)
{
	make_node("nordma");
	discover(ORH_GIDS_ALL);
	cr_assert_eq(inv.n_devs, 0);
	cr_assert_eq(inv.warnings.n, 0);
	cr_assert_not(inv.rdma_cm.present);
	cr_assert_str_eq(inv.default_route_if, "eth0");
}

Test(discover, missing_sysroot_is_an_error)
{
	struct orh_discover_opts o = { .sysroot = "/nonexistent-orh-root" };
	cr_assert_lt(orh_discover(&o, &inv, &err), 0);
	cr_assert(strstr(err.msg, "/nonexistent-orh-root"));
}

Test(discover, empty_root_is_an_empty_node)
{
	snprintf(root, sizeof(root), "/dev/shm/orh-disc-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	discover(ORH_GIDS_ALL);
	cr_assert_eq(inv.n_devs, 0);
	cr_assert(warned("proc/net/route"));
}

Test(discover, garbage_in_one_file_skips_one_entry)
{
	make_node("seed001-roce");
	put("sys/class/infiniband/mlx5_2/ports/1/state", "ACTIVE-ish\n");
	put("sys/class/infiniband/mlx5_3/ports/1/link_layer", "Token Ring\n");
	put("sys/class/infiniband/mlx5_4/ports/1/gids/3", "not-a-gid\n");
	put("sys/class/infiniband/mlx5_5/ports/1/gid_attrs/types/3", "RoCE v9\n");
	put("sys/class/infiniband_verbs/uverbs6/dev", "231\n");
	put("sys/class/infiniband/mlx5_7/device/numa_node", "lots\n");
	discover(ORH_GIDS_ALL);
	cr_assert_eq(inv.n_devs, 9);
	cr_assert(warned("mlx5_2/ports/1/state': garbled"));
	cr_assert_eq(dev("mlx5_2")->ports[0].state, -1);
	cr_assert(warned("mlx5_3/ports/1/link_layer"));
	cr_assert(warned("mlx5_4/ports/1/gids/3': not a GID"));
	cr_assert_eq(dev("mlx5_4")->ports[0].n_gids, 3);
	cr_assert(warned("gid_attrs/types/3': unknown GID type"));
	cr_assert_eq(dev("mlx5_5")->ports[0].gids[3].type, ORH_GID_TYPE_UNKNOWN);
	cr_assert(warned("uverbs6/dev"));
	cr_assert_not(dev("mlx5_6")->uverbs.present);
	cr_assert(warned("numa_node"));
	/* the rest of the node is intact */
	cr_assert_eq(dev("mlx5_8")->ports[0].n_gids, 4);
	cr_assert(dev("mlx5_8")->uverbs.present);
	cr_assert_str_eq(inv.default_route_if, "eth0");
}

Test(discover, oversized_value_is_refused)
{
	char big[8192];

	make_node("seed001-roce");
	memset(big, 'A', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put("sys/class/infiniband/mlx5_1/ports/1/state", big);
	discover(ORH_GIDS_ALL);
	cr_assert(warned("mlx5_1/ports/1/state': value too long"));
}

Test(discover, vanished_device_and_missing_files)
{
	char path[512];

	make_node("seed001-roce");
	/* the class link of mlx5_3 now points nowhere: the device went away mid-scan */
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/mlx5_3", root);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(symlink("../../devices/gone/infiniband/mlx5_3", path), 0);
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/mlx5_4/ports/1/state", root);
	cr_assert_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/sys/class/misc/rdma_cm", root);
	cr_assert_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/proc/net/route", root);
	cr_assert_eq(unlink(path), 0);
	discover(ORH_GIDS_ALL);
	cr_assert_eq(inv.n_devs, 8);
	cr_assert(warned("mlx5_3"));
	cr_assert(warned("mlx5_4/ports/1/state'"));
	cr_assert(warned("rdma_cm"));
	cr_assert_not(inv.rdma_cm.present);
	cr_assert(warned("proc/net/route"));
	cr_assert_eq(inv.default_route_if[0], '\0');
}

Test(discover, fifo_instead_of_a_value_does_not_hang)
{
	char path[512];

	make_node("seed001-roce");
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/mlx5_1/ports/1/rate", root);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(mkfifo(path, 0644), 0);
	discover(ORH_GIDS_ALL);
	cr_assert_eq(dev("mlx5_1")->ports[0].rate[0], '\0');
	cr_assert_eq(dev("mlx5_1")->ports[0].n_gids, 4);
}

Test(discover, warnings_never_carry_control_characters)
{
	make_node("seed001-roce");
	put("sys/class/infiniband/mlx5_2/ports/1/state", "4: ACT\nIVE\x1b[31m\n");
	discover(ORH_GIDS_ALL);
	cr_assert(warned("mlx5_2/ports/1/state': garbled"));
	for (size_t i = 0; i < inv.warnings.n; i++)
		for (const char *c = inv.warnings.v[i]; *c; c++)
			cr_assert((unsigned char)*c >= 0x20 && *c != 0x7f, "control character in '%s'",
				  inv.warnings.v[i]);
}

static void relink(const char *rel, const char *target)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	cr_assert(unlink(path) == 0 || errno == ENOENT, "unlink %s", path);
	cr_assert_eq(symlink(target, path), 0, "symlink %s", path);
}

/* A number sysfs names for a uverbs or rdma_cm entry that is not an RDMA device number
 * (here /dev/kmsg's and /dev/null's) is refused with a warning naming the file and the
 * value; the rest of the node stays. */
Test(discover, device_numbers_outside_rdma_are_refused)
{
	make_node("seed001-roce");
	put("sys/class/infiniband_verbs/uverbs2/dev", "1:11\n");
	put("sys/class/misc/rdma_cm/dev", "1:3\n");
	for (int mode = ORH_GIDS_ALL; mode <= ORH_GIDS_PLAN; mode++) {
		discover(mode);
		cr_assert_not(dev("mlx5_2")->uverbs.present, "uverbs2 kept as 1:11");
		cr_assert(warned("sys/class/infiniband_verbs/uverbs2/dev': 1:11 is not"));
		cr_assert_not(inv.rdma_cm.present, "rdma_cm kept as 1:3");
		cr_assert(warned("sys/class/misc/rdma_cm/dev': 1:3 is not"));
		cr_assert(dev("mlx5_1")->uverbs.present);
		cr_assert(dev("mlx5_3")->uverbs.present);
		cr_assert_eq(inv.warnings.n, 2);
	}
}

/* Within RDMA's numbers, the kernel's reverse map /sys/dev/char/MAJ:MIN must lead back
 * to the entry that names the number. */
Test(discover, device_numbers_must_lead_back_to_their_entry)
{
	make_node("seed001-roce");
	put("sys/class/infiniband_verbs/uverbs2/dev", "231:192\n");  /* uverbs0's */
	put("sys/class/infiniband_verbs/uverbs3/dev", "231:223\n");  /* no such device */
	put("sys/class/misc/rdma_cm/dev", "10:200\n");               /* no such device */
	discover(ORH_GIDS_PLAN);
	cr_assert_not(dev("mlx5_2")->uverbs.present);
	cr_assert(warned("uverbs2/dev': 231:192 is the device of 'uverbs0'"));
	cr_assert_not(dev("mlx5_3")->uverbs.present);
	cr_assert(warned("uverbs3/dev': 231:223 is no device"));
	cr_assert(warned("sys/dev/char/231:223"));
	cr_assert_not(inv.rdma_cm.present);
	cr_assert(warned("rdma_cm/dev': 10:200 is no device"));
	cr_assert(dev("mlx5_4")->uverbs.present);
}

/* A reverse link that agrees with a wrong number does not make the number an RDMA one. */
Test(discover, a_forged_reverse_link_does_not_pass_a_foreign_number)
{
	make_node("seed001-roce");
	put("sys/class/infiniband_verbs/uverbs4/dev", "1:11\n");
	relink("sys/dev/char/1:11", "../../devices/pci0000:62/0000:62:02.0/0000:64:00.1/"
				    "infiniband_verbs/uverbs4");
	discover(ORH_GIDS_ALL);
	cr_assert_not(dev("mlx5_4")->uverbs.present);
	cr_assert(warned("uverbs4/dev': 1:11 is not"));
}

/* A uverbs number beyond the fixed minors is in the dynamic region the kernel registers
 * as "infiniband_verbs" in /proc/devices: accepted when /proc/devices says so. */
Test(discover, dynamic_uverbs_numbers_follow_proc_devices)
{
	static const char *const target =
		"../../devices/pci0000:e1/0000:e1:02.0/0000:e3:00.1/infiniband_verbs/uverbs8";
	char path[512];

	make_node("seed001-roce");
	put("sys/class/infiniband_verbs/uverbs8/dev", "240:8\n");
	relink("sys/dev/char/240:8", target);
	discover(ORH_GIDS_PLAN);
	cr_assert(dev("mlx5_8")->uverbs.present, "%s", inv.warnings.n ? inv.warnings.v[0] : "");
	cr_assert_eq(dev("mlx5_8")->uverbs.major, 240);
	cr_assert_eq(inv.warnings.n, 0);

	/* another module's dynamic major */
	put("proc/devices", "Character devices:\n  1 mem\n231 infiniband_verbs\n240 other\n\n"
			    "Block devices:\n240 infiniband_verbs\n");
	discover(ORH_GIDS_PLAN);
	cr_assert_not(dev("mlx5_8")->uverbs.present);
	cr_assert(warned("uverbs8/dev': 240:8 is not"));

	/* /proc/devices unreadable: a dynamic number cannot be checked */
	snprintf(path, sizeof(path), "%s/proc/devices", root);
	cr_assert_eq(unlink(path), 0);
	discover(ORH_GIDS_PLAN);
	cr_assert_not(dev("mlx5_8")->uverbs.present);
	cr_assert(warned("proc/devices"));
	cr_assert(dev("mlx5_7")->uverbs.present, "fixed numbers need no /proc/devices");
}

/* umad and issm numbers are checked the same way (and each in its own range). */
Test(discover, mad_numbers_are_checked)
{
	make_node("ib");
	put("sys/class/infiniband_mad/umad0/dev", "1:11\n");
	put("sys/class/infiniband_mad/issm1/dev", "231:1\n"); /* umad1's: not an issm number */
	discover(ORH_GIDS_ALL);
	cr_assert_not(dev("mlx5_0")->ports[0].umad.present);
	cr_assert(warned("umad0/dev': 1:11 is not"));
	cr_assert(dev("mlx5_0")->ports[0].issm.present);
	cr_assert_not(dev("mlx5_1")->ports[0].issm.present);
	cr_assert(warned("issm1/dev': 231:1 is not"));
	cr_assert(dev("mlx5_1")->ports[0].umad.present);
}
