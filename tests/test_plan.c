/* SPDX-License-Identifier: Apache-2.0 */
/* Each planning rule (man oci-rdma-hook.conf(5), THE PLAN) on inventories built here. */
#include <arpa/inet.h>
#include <errno.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orh/decide/plan.h"
#include "plan_check.h"

static struct orh_config cfg;
static struct orh_inventory inv;
static struct orh_plan plan;
static struct orh_err err;

static void setup(void)
{
	orh_config_defaults(&cfg);
	memset(&inv, 0, sizeof(inv));
	memset(&plan, 0, sizeof(plan));
	strcpy(inv.default_route_if, "eth0");
	inv.rdma_cm = (struct orh_chardev){ .name = "rdma_cm", .major = 10, .minor = 58, .present = true };
}

static void teardown(void)
{
	orh_plan_free(&plan);
	orh_inventory_free(&inv);
	orh_config_free(&cfg);
}

TestSuite(plan, .init = setup, .fini = teardown);

static struct orh_device *add_dev(const char *name, unsigned vendor, const char *driver)
{
	struct orh_device *d;

	inv.devs = realloc(inv.devs, (inv.n_devs + 1) * sizeof(*inv.devs));
	d = &inv.devs[inv.n_devs];
	memset(d, 0, sizeof(*d));
	strcpy(d->name, name);
	d->vendor = vendor;
	strcpy(d->driver, driver);
	d->uverbs.present = true;
	d->uverbs.major = 231;
	d->uverbs.minor = 192 + (unsigned)inv.n_devs;
	snprintf(d->uverbs.name, sizeof(d->uverbs.name), "uverbs%zu", inv.n_devs);
	inv.n_devs++;
	return d;
}

static struct orh_port *add_port(struct orh_device *d, int state, enum orh_link_layer ll,
				 const char *netdev)
{
	struct orh_port *p;

	d->ports = realloc(d->ports, (d->n_ports + 1) * sizeof(*d->ports));
	p = &d->ports[d->n_ports];
	memset(p, 0, sizeof(*p));
	p->num = (unsigned)d->n_ports + 1;
	p->state = state;
	strcpy(p->state_text, state == 4 ? "ACTIVE" : "DOWN");
	p->link_layer = ll;
	strcpy(p->netdev, netdev);
	d->n_ports++;
	return p;
}

static void add_gid(struct orh_port *p, unsigned index, const char *gid, enum orh_gid_type t)
{
	struct orh_gid *g;

	p->gids = realloc(p->gids, (p->n_gids + 1) * sizeof(*p->gids));
	g = &p->gids[p->n_gids++];
	memset(g, 0, sizeof(*g));
	g->index = index;
	cr_assert_eq(orh_parse_gid(gid, g->raw), 0);
	g->type = t;
	strcpy(g->ndev, p->netdev);
	g->ipv4_mapped = g->raw[10] == 0xff && g->raw[11] == 0xff && g->raw[0] == 0;
	if (g->ipv4_mapped)
		memcpy(&g->ipv4, g->raw + 12, 4);
}

/* An IPv4-mapped entry for 25.11.x.y, x.y = host. */
static void add_ipv4(struct orh_port *p, unsigned index, unsigned host, enum orh_gid_type t)
{
	char gid[64];

	snprintf(gid, sizeof(gid), "0000:0000:0000:0000:0000:ffff:190b:%04x", host);
	add_gid(p, index, gid, t);
}

/* The standard RoCE layout: 0/1 link-local v1/v2, 2/3 IPv4 v1/v2 (seed 001). */
static struct orh_port *roce_port(struct orh_device *d, const char *netdev, unsigned last_octet)
{
	struct orh_port *p = add_port(d, 4, ORH_LL_ETHERNET, netdev);
	char ip4[64];

	add_gid(p, 0, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c920", ORH_GID_TYPE_IB_ROCE_V1);
	add_gid(p, 1, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c920", ORH_GID_TYPE_ROCE_V2);
	snprintf(ip4, sizeof(ip4), "0000:0000:0000:0000:0000:ffff:190b:80%02x", last_octet);
	add_gid(p, 2, ip4, ORH_GID_TYPE_IB_ROCE_V1);
	add_gid(p, 3, ip4, ORH_GID_TYPE_ROCE_V2);
	return p;
}

static void build(const struct orh_container_facts *facts)
{
	cr_assert_eq(orh_plan_build(&cfg, &inv, NULL, facts, &plan, &err), 0, "%s", err.msg);
}

static const char *env(const char *name)
{
	return plan_value(&plan, name);
}

static bool warned(const char *needle)
{
	return strv_mentions(&plan.warnings, needle);
}

/* Device mlx5_<i> (Mellanox, mlx5_core); its net device's name, eth<i + 1>, in nd. */
static struct orh_device *nth_dev(unsigned i, char nd[16])
{
	char name[16];

	snprintf(name, sizeof(name), "mlx5_%u", i);
	snprintf(nd, 16, "eth%u", i + 1);
	return add_dev(name, 0x15b3, "mlx5_core");
}

/* n dual-port devices (2n ports) of the standard layout. */
static void dual_port_devs(unsigned n)
{
	char nd[16];

	for (unsigned i = 0; i < n; i++) {
		struct orh_device *d = nth_dev(i, nd);

		roce_port(d, nd, i);
		roce_port(d, nd, i);
	}
}

/* The 9-NIC node of seed 001. */
static void seed001(void)
{
	char name[16], nd[16];

	for (unsigned i = 0; i < 9; i++) {
		snprintf(name, sizeof(name), "mlx5_%u", i);
		snprintf(nd, sizeof(nd), "eth%u", i);
		roce_port(add_dev(name, 0x15b3, "mlx5_core"), nd, (2 + 0x20 * i) & 0xff);
	}
}

/* A reader that says every RoCE port's entry 7 is its IPv4 RoCE v2 GID, and warns once
 * for each entry asked for past it. */
struct fake_reader {
	unsigned asked;
};

static int fake_entry(void *arg, const struct orh_port *p, unsigned idx, struct orh_gid *g,
		      struct orh_strv *warnings)
{
	struct fake_reader *f = arg;

	f->asked++;
	if (idx > 7) {
		orh_strv_pushf(warnings, "fake: entry %u of %u asked", idx, p->num);
		return -ENOENT;
	}
	if (idx < 7)
		return 0;
	fake_ipv4_gid(g, idx, p->num);
	return 1;
}

/* The planner reads GID entries through the reader its caller passes, and nothing else:
 * the inventory's own tables (index 3) are not looked at. */
Test(plan, gid_entries_come_from_the_callers_reader)
{
	struct fake_reader f = { 0 };
	struct orh_gid_reader rd = { .entry = fake_entry, .arg = &f };

	seed001();
	cr_assert_eq(orh_plan_build(&cfg, &inv, &rd, NULL, &plan, &err), 0, "%s", err.msg);
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "7");
	cr_assert_eq(plan.gid_index, 7);
	cr_assert_gt(f.asked, 0);
	orh_plan_free(&plan);
	/* an entry the reader cannot give: the port is left out, and its warning is the plan's */
	f = (struct fake_reader){ 0 };
	cfg.gid_family = AF_INET6;
	cr_assert_eq(orh_plan_build(&cfg, &inv, &rd, NULL, &plan, &err), 0, "%s", err.msg);
	cr_assert_null(env("NCCL_IB_GID_INDEX"));
	cr_assert_eq(plan.gid_index, -1);
	cr_assert(warned("fake: entry 8 of 1 asked"));
}

Test(plan, seed001_front_end_nic_and_gid_3)
{
	seed001();
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"),
			 "=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1");
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "3");
	cr_assert_str_eq(env("NCCL_SOCKET_IFNAME"), "=eth0");
	cr_assert_str_eq(env("NCCL_IB_TIMEOUT"), "22");
	cr_assert_str_eq(env("NCCL_IB_QPS_PER_CONNECTION"), "8");
	cr_assert_eq(plan.preset, ORH_PRESET_ROCE);
	cr_assert_not(plan.ports[0].used);
	cr_assert(strstr(plan.ports[0].reason, "default route"));
	/* 8 uverbs + rdma_cm, memlock unlimited */
	cr_assert_eq(plan.n_nodes, 9);
	cr_assert_str_eq(plan.nodes[0].path, "/dev/infiniband/uverbs1");
	cr_assert_eq(plan.nodes[0].minor, 193);
	cr_assert_str_eq(plan.nodes[8].path, "/dev/infiniband/rdma_cm");
	/* each node names its device; the choices point into the inventory */
	cr_assert_eq(plan.nodes[0].kind, ORH_CHARDEV_UVERBS);
	cr_assert_eq(plan.nodes[0].owner, &inv.devs[1]);
	cr_assert_eq(plan.nodes[8].kind, ORH_CHARDEV_RDMA_CM);
	cr_assert_null(plan.nodes[8].owner);
	cr_assert_eq(plan.n_ports, 9);
	for (size_t k = 0; k < plan.n_ports; k++) {
		cr_assert_eq(plan.ports[k].dev, &inv.devs[k]);
		cr_assert_eq(plan.ports[k].port, &inv.devs[k].ports[0]);
	}
	/* rule 4's index is a field of the plan, not only an env line */
	cr_assert_eq(plan.gid_index, 3);
	cr_assert_not(plan.gid_per_device);
	cr_assert(plan.set_memlock);
	cr_assert_eq(plan.memlock, ORH_MEMLOCK_UNLIMITED);
	/* order: HCA, GID, socket, preset */
	cr_assert_str_eq(plan.env[0].name, "NCCL_IB_HCA");
	cr_assert_str_eq(plan.env[1].name, "NCCL_IB_GID_INDEX");
	cr_assert_str_eq(plan.env[2].name, "NCCL_SOCKET_IFNAME");
}

Test(plan, rule1_only_active_and_known_link_layers)
{
	roce_port(add_dev("mlx5_0", 0x15b3, "mlx5_core"), "eth1", 2);
	struct orh_port *down = roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth2", 3);
	down->state = 1;
	strcpy(down->state_text, "DOWN");
	add_port(add_dev("efa_0", 0x1d0f, "efa"), 4, ORH_LL_UNKNOWN, "eth3");
	struct orh_device *nouv = add_dev("mlx5_3", 0x15b3, "mlx5_core");
	roce_port(nouv, "eth4", 4);
	nouv->uverbs.present = false;
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_0:1");
	cr_assert(strstr(plan.ports[1].reason, "DOWN"));
	cr_assert(strstr(plan.ports[2].reason, "Unknown"));
	cr_assert(strstr(plan.ports[3].reason, "uverbs"));
}

Test(plan, rule1_include_and_exclude_win)
{
	seed001();
	cr_assert_eq(orh_config_parse_string(&cfg, "c", "[node]\ninclude = mlx5_0, mlx5_2:1, mlx5_3\nexclude = mlx5_3\n", &err), 0);
	build(NULL);
	/* mlx5_0 is kept although it carries the default route: the operator named it. */
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_2:1");
	cr_assert(strstr(plan.ports[3].reason, "exclude"));
	cr_assert(strstr(plan.ports[4].reason, "include"));
}

Test(plan, rule2_single_nic_on_default_route_is_kept)
{
	roce_port(add_dev("mlx5_0", 0x15b3, "mlx5_core"), "eth0", 2);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_0:1");
}

Test(plan, rule2_can_be_turned_off)
{
	seed001();
	cfg.skip_default_route_nic = false;
	build(NULL);
	cr_assert(orh_startswith(env("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1"));
}

Test(plan, rule2_not_for_erdma)
{
	struct orh_device *a = add_dev("rocep26s0", 0x1ded, "erdma");
	struct orh_port *p = add_port(a, 4, ORH_LL_ETHERNET, "eth0");
	add_gid(p, 0, "fe80:0000:0000:0000:0216:3eff:fe10:f8b0", ORH_GID_TYPE_ROCE_V2);
	add_gid(p, 1, "0000:0000:0000:0000:0000:ffff:c0a8:0880", ORH_GID_TYPE_ROCE_V2);
	struct orh_device *b = add_dev("rocep156s0", 0x1ded, "erdma");
	p = add_port(b, 4, ORH_LL_ETHERNET, "eth1");
	add_gid(p, 0, "fe80:0000:0000:0000:0216:3eff:fe2c:b8f3", ORH_GID_TYPE_ROCE_V2);
	add_gid(p, 1, "0000:0000:0000:0000:0000:ffff:c0a8:0981", ORH_GID_TYPE_ROCE_V2);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=rocep26s0:1,rocep156s0:1");
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "1");
	cr_assert_eq(plan.preset, ORH_PRESET_ERDMA);
	cr_assert_str_eq(env("NCCL_IB_QPS_PER_CONNECTION"), "8");
	cr_assert_str_eq(env("NCCL_MIN_NCHANNELS"), "16");
	cr_assert_str_eq(env("NCCL_NET_PLUGIN"), "none");
	cr_assert_null(env("NCCL_IB_TIMEOUT"));
}

Test(plan, rule3_exact_names_avoid_prefix_match)
{
	roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	struct orh_device *d10 = add_dev("mlx5_10", 0x15b3, "mlx5_core");
	roce_port(d10, "eth10", 3);
	cr_assert_eq(orh_config_parse_string(&cfg, "c", "[node]\nexclude = mlx5_10\n", &err), 0);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_1:1");
}

Test(plan, rule3_at_most_32_entries)
{
	dual_port_devs(17);
	build(NULL);
	size_t commas = 0;
	for (const char *s = env("NCCL_IB_HCA"); *s; s++)
		commas += *s == ',';
	cr_assert_eq(commas, 31);
	cr_assert(warned("at most 32"));
}

Test(plan, rule4_differing_indices_leave_gid_unset)
{
	struct orh_port *a = roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	struct orh_port *b = add_port(add_dev("mlx5_2", 0x15b3, "mlx5_core"), 4, ORH_LL_ETHERNET, "eth2");
	(void)a;
	add_gid(b, 0, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c921", ORH_GID_TYPE_IB_ROCE_V1);
	add_gid(b, 1, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c921", ORH_GID_TYPE_ROCE_V2);
	add_ipv4(b, 5, 0x8022, ORH_GID_TYPE_ROCE_V2);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_2:1");
	cr_assert_null(env("NCCL_IB_GID_INDEX"));
	cr_assert_str_eq(env("NCCL_IB_ROCE_VERSION_NUM"), "2");
	cr_assert_str_eq(env("NCCL_IB_ADDR_FAMILY"), "AF_INET");
	cr_assert(warned("mlx5_1:1=3, mlx5_2:1=5"));
}

Test(plan, rule4_port_without_wanted_gid_is_left_out)
{
	roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	struct orh_port *b = add_port(add_dev("mlx5_2", 0x15b3, "mlx5_core"), 4, ORH_LL_ETHERNET, "eth2");
	add_gid(b, 0, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c921", ORH_GID_TYPE_ROCE_V2);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_1:1");
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "3");
	cr_assert(warned("mlx5_2:1 left out"));
}

Test(plan, rule4_version_and_family_configurable)
{
	roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	cfg.roce_version = 1;
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "2");
}

Test(plan, rule4_container_address_wins)
{
	struct orh_port *p = roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	struct in_addr a;
	struct orh_container_facts f = { .own_netns = true, .netns_default_if = "net1" };

	add_ipv4(p, 4, 0x80f0, ORH_GID_TYPE_IB_ROCE_V1);
	add_ipv4(p, 5, 0x80f0, ORH_GID_TYPE_ROCE_V2);
	inet_pton(AF_INET, "25.11.128.240", &a);
	f.addrs = &a;
	f.n_addrs = 1;
	build(&f);
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "5");
	cr_assert_str_eq(env("NCCL_SOCKET_IFNAME"), "=net1");
	cr_assert(strstr(orh_plan_env_get(&plan, "NCCL_IB_GID_INDEX")->source, "container"));
}

Test(plan, rule4_infiniband_has_no_index)
{
	struct orh_device *d = add_dev("mlx5_0", 0x15b3, "mlx5_core");
	struct orh_port *p = add_port(d, 4, ORH_LL_INFINIBAND, "ib0");
	add_gid(p, 0, "fe80:0000:0000:0000:0c42:a103:0065:1234", ORH_GID_TYPE_IB_ROCE_V1);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_0:1");
	cr_assert_null(env("NCCL_IB_GID_INDEX"));
	cr_assert_eq(plan.preset, ORH_PRESET_INFINIBAND);
	cr_assert_null(env("NCCL_IB_TIMEOUT"));
	cr_assert_str_eq(env("NCCL_SOCKET_IFNAME"), "=eth0");
}

Test(plan, rule5_socket_ifname_sources)
{
	roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	cfg.socket_ifname = strdup("bond0");
	build(NULL);
	cr_assert_str_eq(env("NCCL_SOCKET_IFNAME"), "=bond0");
	orh_plan_free(&plan);
	free(cfg.socket_ifname);
	cfg.socket_ifname = NULL;
	inv.default_route_if[0] = '\0';
	build(NULL);
	cr_assert_null(env("NCCL_SOCKET_IFNAME"));
	cr_assert(warned("no default route"));
}

Test(plan, rule6_config_sets_overrides_and_removes)
{
	seed001();
	cr_assert_eq(orh_config_parse_string(&cfg, "lingjun.conf",
		"[env]\nNCCL_IB_TC = 136\nNCCL_IB_SL = 5\nNCCL_IB_TIMEOUT = 23\nNCCL_IB_QPS_PER_CONNECTION =\n", &err), 0);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_TC"), "136");
	cr_assert_str_eq(env("NCCL_IB_SL"), "5");
	cr_assert_str_eq(env("NCCL_IB_TIMEOUT"), "23");
	cr_assert_null(env("NCCL_IB_QPS_PER_CONNECTION"));
	cr_assert_str_eq(orh_plan_env_get(&plan, "NCCL_IB_TC")->source, "lingjun.conf:2");
}

Test(plan, rule6_preset_choice)
{
	seed001();
	cfg.preset = ORH_PRESET_NONE;
	build(NULL);
	cr_assert_null(env("NCCL_IB_TIMEOUT"));
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "3");
	orh_plan_free(&plan);
	struct orh_container_facts f = { .has_preset = true, .preset = ORH_PRESET_ERDMA };
	build(&f);
	cr_assert_str_eq(env("NCCL_MIN_NCHANNELS"), "16");
}

Test(plan, rule7_no_usable_device_empty_plan)
{
	struct orh_port *p = roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	p->state = 1;
	cr_assert_eq(orh_config_parse_string(&cfg, "c", "[env]\nNCCL_DEBUG = INFO\n", &err), 0);
	build(NULL);
	cr_assert(orh_plan_is_empty(&plan));
	cr_assert_eq(plan.n_env, 0);
	cr_assert_eq(plan.n_nodes, 0);
	cr_assert_not(plan.set_memlock);
}

Test(plan, rule7_no_devices_at_all)
{
	build(NULL);
	cr_assert(orh_plan_is_empty(&plan));
}

Test(plan, management_devices_opt_in)
{
	struct orh_device *d = add_dev("mlx5_0", 0x15b3, "mlx5_core");
	struct orh_port *p = add_port(d, 4, ORH_LL_INFINIBAND, "ib0");
	p->umad = (struct orh_chardev){ .name = "umad0", .major = 231, .minor = 0, .port = 1, .present = true };
	p->issm = (struct orh_chardev){ .name = "issm0", .major = 231, .minor = 64, .port = 1, .present = true };
	build(NULL);
	cr_assert_eq(plan.n_nodes, 2); /* uverbs0, rdma_cm */
	orh_plan_free(&plan);
	cfg.management_devices = true;
	build(NULL);
	cr_assert_eq(plan.n_nodes, 4);
	cr_assert_str_eq(plan.nodes[1].path, "/dev/infiniband/umad0");
	cr_assert_eq(plan.nodes[1].mode, 0600);
	cr_assert_eq(plan.nodes[2].minor, 64);
}

Test(plan, missing_rdma_cm_warns)
{
	roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	inv.rdma_cm.present = false;
	build(NULL);
	cr_assert_eq(plan.n_nodes, 1);
	cr_assert(warned("rdma_cm"));
}

Test(plan, memlock_from_config)
{
	roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	cfg.memlock = 1ULL << 30;
	build(NULL);
	cr_assert_eq(plan.memlock, 1ULL << 30);
}

Test(plan, rule4_only_ports_in_nccl_ib_hca_decide_the_index)
{
	dual_port_devs(16);
	/* a 33rd port, beyond NCCL_IB_HCA's 32 entries, with its IPv4 v2 GID at index 5 */
	struct orh_port *p = add_port(add_dev("mlx5_16", 0x15b3, "mlx5_core"), 4, ORH_LL_ETHERNET, "eth17");
	add_gid(p, 0, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c9ff", ORH_GID_TYPE_ROCE_V2);
	add_ipv4(p, 5, 0x80ff, ORH_GID_TYPE_ROCE_V2);
	build(NULL);
	cr_assert(warned("mlx5_16:1 left out: NCCL_IB_HCA holds at most 32 entries"));
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "3");
	cr_assert_null(env("NCCL_IB_ROCE_VERSION_NUM"));
}

Test(plan, rule4_lowest_index_that_fits_every_port)
{
	/* a's first wanted entry is 3 and b's is 5, but both hold one at 5 */
	struct orh_port *a = roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	struct orh_port *b = add_port(add_dev("mlx5_2", 0x15b3, "mlx5_core"), 4, ORH_LL_ETHERNET, "eth2");
	add_ipv4(a, 5, 0x8030, ORH_GID_TYPE_ROCE_V2);
	add_ipv4(a, 7, 0x8031, ORH_GID_TYPE_ROCE_V2);
	add_gid(b, 0, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c921", ORH_GID_TYPE_ROCE_V2);
	add_ipv4(b, 3, 0x8022, ORH_GID_TYPE_IB_ROCE_V1);
	add_ipv4(b, 5, 0x8022, ORH_GID_TYPE_ROCE_V2);
	add_ipv4(b, 7, 0x8023, ORH_GID_TYPE_ROCE_V2);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "5");
	cr_assert_null(env("NCCL_IB_ROCE_VERSION_NUM"));
	cr_assert_eq(plan.ports[0].gid_index, 5);
	cr_assert_eq(plan.ports[1].gid_index, 5);
	cr_assert_eq(plan.warnings.n, 0);
}

Test(plan, rule4_the_order_of_ports_does_not_change_the_index)
{
	/* the same two tables as above, b first: the search visits every port until one
	 * index holds for all, wherever it starts */
	struct orh_port *b = add_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), 4, ORH_LL_ETHERNET, "eth1");
	struct orh_port *a = roce_port(add_dev("mlx5_2", 0x15b3, "mlx5_core"), "eth2", 2);
	struct orh_port *c = roce_port(add_dev("mlx5_3", 0x15b3, "mlx5_core"), "eth3", 3);
	add_gid(b, 0, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c921", ORH_GID_TYPE_ROCE_V2);
	add_ipv4(b, 5, 0x8022, ORH_GID_TYPE_ROCE_V2);
	add_ipv4(b, 9, 0x8023, ORH_GID_TYPE_ROCE_V2);
	add_ipv4(a, 9, 0x8030, ORH_GID_TYPE_ROCE_V2);
	add_ipv4(c, 7, 0x8040, ORH_GID_TYPE_ROCE_V2);
	add_ipv4(c, 9, 0x8041, ORH_GID_TYPE_ROCE_V2);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "9");
}

Test(plan, rule4_port_without_any_wanted_gid_does_not_block_the_others)
{
	/* b has nothing wanted; a and c agree on 5 only, though a's first is 3 */
	struct orh_port *a = roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	struct orh_port *b = add_port(add_dev("mlx5_2", 0x15b3, "mlx5_core"), 4, ORH_LL_ETHERNET, "eth2");
	struct orh_port *c = add_port(add_dev("mlx5_3", 0x15b3, "mlx5_core"), 4, ORH_LL_ETHERNET, "eth3");
	add_ipv4(a, 5, 0x8030, ORH_GID_TYPE_ROCE_V2);
	add_gid(b, 0, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c921", ORH_GID_TYPE_ROCE_V2);
	add_ipv4(b, 3, 0x8022, ORH_GID_TYPE_IB_ROCE_V1);
	add_ipv4(c, 5, 0x8040, ORH_GID_TYPE_ROCE_V2);
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_1:1,mlx5_3:1");
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "5");
	cr_assert(warned("mlx5_2:1 left out: its GID table has no IPv4 RoCE v2 entry"));
}

Test(plan, rule4_a_port_left_out_lets_the_next_one_into_nccl_ib_hca)
{
	char nd[16];

	/* 32 ports, the 5th without a wanted GID, then a 33rd that fits: it takes the place */
	for (unsigned i = 0; i < 33; i++) {
		struct orh_device *d = nth_dev(i, nd);
		if (i == 4) {
			struct orh_port *p = add_port(d, 4, ORH_LL_ETHERNET, nd);
			add_gid(p, 0, "fe80:0000:0000:0000:eaeb:d3ff:fecc:c9ff", ORH_GID_TYPE_ROCE_V2);
		} else {
			roce_port(d, nd, i);
		}
	}
	build(NULL);
	cr_assert(warned("mlx5_4:1 left out: its GID table has no"));
	cr_assert_not(warned("NCCL_IB_HCA holds at most"));
	cr_assert(strstr(env("NCCL_IB_HCA"), ",mlx5_32:1"));
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "3");
}

Test(plan, rule4_container_entries_must_agree_too)
{
	/* the container's address sits at 5 on one port and 7 on the other: no single index */
	struct orh_port *a = roce_port(add_dev("mlx5_1", 0x15b3, "mlx5_core"), "eth1", 2);
	struct orh_port *b = roce_port(add_dev("mlx5_2", 0x15b3, "mlx5_core"), "eth2", 3);
	struct in_addr addrs[2];
	struct orh_container_facts f = { .own_netns = true, .netns_default_if = "net1" };

	add_ipv4(a, 5, 0x80f0, ORH_GID_TYPE_ROCE_V2);
	add_ipv4(b, 5, 0x80e0, ORH_GID_TYPE_ROCE_V2);
	add_ipv4(b, 7, 0x80f1, ORH_GID_TYPE_ROCE_V2);
	inet_pton(AF_INET, "25.11.128.240", &addrs[0]);
	inet_pton(AF_INET, "25.11.128.241", &addrs[1]);
	f.addrs = addrs;
	f.n_addrs = 2;
	build(&f);
	cr_assert_null(env("NCCL_IB_GID_INDEX"));
	cr_assert(warned("mlx5_1:1=5, mlx5_2:1=7"));
	cr_assert(plan.ports[0].gid_from_container);
	cr_assert(plan.ports[1].gid_from_container);
}

/* Rule 4's search against the definition, on random tables: the lowest index wanted on
 * every port that has any wanted entry, else no NCCL_IB_GID_INDEX. */
Test(plan, rule4_search_matches_the_definition_on_random_tables)
{
	unsigned seed = 12345;

	for (int round = 0; round < 300; round++) {
		unsigned n_ports = 1 + (unsigned)(rand_r(&seed) % 6);
		bool wanted[6][16] = { { false } };
		char nd[16], gid[64];
		int expect = -1;

		teardown();
		setup();
		for (unsigned i = 0; i < n_ports; i++) {
			struct orh_port *p = add_port(nth_dev(i, nd), 4, ORH_LL_ETHERNET, nd);
			for (unsigned idx = 0; idx < 16; idx++) {
				unsigned roll = (unsigned)rand_r(&seed) % 10;

				if (roll > 5)
					continue; /* unused */
				snprintf(gid, sizeof(gid), "0000:0000:0000:0000:0000:ffff:0a00:%02x%02x", i, idx);
				wanted[i][idx] = roll < 3;
				add_gid(p, idx, gid, roll < 3 ? ORH_GID_TYPE_ROCE_V2 : ORH_GID_TYPE_IB_ROCE_V1);
			}
			p->gid_tbl_len = 16;
		}
		for (unsigned idx = 0; idx < 16 && expect < 0; idx++) {
			bool all = true, any_port = false;

			for (unsigned i = 0; i < n_ports; i++) {
				bool has_any = false;

				for (unsigned j = 0; j < 16; j++)
					has_any |= wanted[i][j];
				if (!has_any)
					continue; /* left out */
				any_port = true;
				all &= wanted[i][idx];
			}
			if (any_port && all)
				expect = (int)idx;
		}
		build(NULL);
		if (expect < 0) {
			cr_assert_null(env("NCCL_IB_GID_INDEX"), "round %d: got %s", round,
				       env("NCCL_IB_GID_INDEX"));
		} else {
			cr_assert_not_null(env("NCCL_IB_GID_INDEX"), "round %d: expected %d", round, expect);
			cr_assert_eq(atoi(env("NCCL_IB_GID_INDEX")), expect, "round %d", round);
		}
		for (size_t k = 0; k < plan.n_ports; k++)
			if (plan.ports[k].used)
				cr_assert(wanted[k][plan.ports[k].gid_index], "round %d: port %zu index %d not wanted",
					  round, k, plan.ports[k].gid_index);
	}
}

/* ---- rule 8: the devices the container was given ----------------------------------- */

static void give(struct orh_container_facts *f, unsigned major, unsigned minor)
{
	f->devs[f->n_devs++] = (struct orh_devnum){ major, minor };
}

Test(plan, rule8_given_uverbs_limits_the_plan_to_those_devices)
{
	struct orh_container_facts f = { 0 };

	seed001();
	give(&f, 231, 192 + 2);   /* mlx5_2's uverbs2 */
	give(&f, 10, 58);         /* rdma_cm */
	give(&f, 1, 3);           /* /dev/null: not RDMA */
	build(&f);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_2:1");
	cr_assert_eq(plan.n_nodes, 2, "uverbs2 and rdma_cm only, got %zu nodes", plan.n_nodes);
	cr_assert_str_eq(plan.nodes[0].path, "/dev/infiniband/uverbs2");
	cr_assert_str_eq(plan.nodes[1].path, "/dev/infiniband/rdma_cm");
	cr_assert_not_null(strstr(plan.ports[1].reason, "rule 8"), "%s", plan.ports[1].reason);
}

Test(plan, rule8_the_front_end_nic_given_by_a_plugin_is_kept)
{
	struct orh_container_facts f = { 0 };

	seed001();
	give(&f, 231, 192);       /* mlx5_0, the default route's NIC: rule 2 would drop it */
	build(&f);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_0:1");
}

Test(plan, rule8_unknown_uverbs_numbers_give_no_hca)
{
	struct orh_container_facts f = { 0 };

	seed001();
	give(&f, 231, 220);       /* a uverbs number of no device here */
	build(&f);
	cr_assert(orh_plan_is_empty(&plan), "another HCA's node or grant must never be given");
	cr_assert(warned("none of this node's devices"));
}

Test(plan, rule8_only_rdma_cm_or_other_devices_limit_nothing)
{
	struct orh_container_facts f = { 0 };

	seed001();
	give(&f, 10, 58);
	give(&f, 195, 0);         /* /dev/nvidia0 */
	build(&f);
	cr_assert_str_eq(env("NCCL_IB_HCA"),
			 "=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1");
}

/* ---- rule 10: one fabric --------------------------------------------------------- */

/* four dual-port NICs; one of them (mlx5_3) InfiniBand: six RoCE ports, two IB ports */
static void mixed_node(void)
{
	char nd[16];

	for (unsigned i = 0; i < 4; i++) {
		struct orh_device *d = nth_dev(i, nd);

		if (i == 3) {
			add_port(d, 4, ORH_LL_INFINIBAND, "");
			add_port(d, 4, ORH_LL_INFINIBAND, "");
		} else {
			roce_port(d, nd, i);
			roce_port(d, nd, i);
		}
	}
	strcpy(inv.default_route_if, "eno1");
}

Test(plan, rule10_the_larger_group_wins_and_the_rest_is_named)
{
	mixed_node();
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"),
			 "=mlx5_0:1,mlx5_0:2,mlx5_1:1,mlx5_1:2,mlx5_2:1,mlx5_2:2");
	cr_assert(warned("left out: mlx5_3:1,mlx5_3:2"));
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "3");
}

Test(plan, rule10_config_names_the_fabric)
{
	mixed_node();
	cfg.link_layer = ORH_FABRIC_INFINIBAND;
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_3:1,mlx5_3:2");
	cr_assert_null(env("NCCL_IB_GID_INDEX"), "InfiniBand ports have no GID index");
	cr_assert(warned("config link_layer"));
	cr_assert(warned("left out: mlx5_0:1"));
}

Test(plan, rule10_a_tie_goes_to_infiniband_and_one_kind_is_left_alone)
{
	char nd[16];

	roce_port(nth_dev(0, nd), nd, 0);
	add_port(nth_dev(1, nd), 4, ORH_LL_INFINIBAND, "");
	strcpy(inv.default_route_if, "eno1");
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_1:1");
	orh_plan_free(&plan);
	/* only one kind: no warning */
	cfg.link_layer = ORH_FABRIC_ETHERNET;
	build(NULL);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_0:1");
}
