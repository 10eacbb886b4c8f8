/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision from a node built in memory (orh_decide_node): nothing is read from any
 * sysfs tree. Two PCIe switches, each with one GPU and one RoCE NIC, plus a GID reader
 * of the test's own.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide/decide.h"
#include "plan_check.h"

static struct orh_config cfg;
static struct orh_inventory inv;
static struct orh_gpus gpus;
static struct orh_decision d;
static struct orh_err err;
static unsigned reads;

static const char *const nic_paths[] = {
	"devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:01.0/0000:13:00.0",
	"devices/pci0000:90/0000:90:01.0/0000:91:00.0/0000:92:01.0/0000:93:00.0",
};
static const char *const gpu_paths[] = {
	"devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:02.0/0000:14:00.0",
	"devices/pci0000:90/0000:90:01.0/0000:91:00.0/0000:92:02.0/0000:94:00.0",
};

/* Entry 3 of every port is its IPv4 RoCE v2 GID (10.0.0.<port's device>). */
static int gid_entry(void *arg, const struct orh_port *p, unsigned idx, struct orh_gid *g,
		     struct orh_strv *warnings)
{
	(void)arg;
	(void)warnings;
	reads++;
	if (idx > 3)
		return -ENOENT;
	if (idx < 3)
		return 0;
	fake_ipv4_gid(g, 3, p->num);
	return 1;
}

static const struct orh_gid_reader reader = { .entry = gid_entry };

static void setup(void)
{
	memset(&inv, 0, sizeof(inv));
	memset(&gpus, 0, sizeof(gpus));
	memset(&d, 0, sizeof(d));
	memset(&err, 0, sizeof(err));
	reads = 0;
	orh_config_defaults(&cfg);
	inv.devs = calloc(2, sizeof(*inv.devs));
	inv.n_devs = 2;
	for (size_t i = 0; i < 2; i++) {
		struct orh_device *dev = &inv.devs[i];
		struct orh_port *p = calloc(1, sizeof(*p));

		snprintf(dev->name, sizeof(dev->name), "mlx5_%zu", i);
		strcpy(dev->driver, "mlx5_core");
		dev->numa_node = (int)i;
		strcpy(dev->pci_path, nic_paths[i]);
		dev->uverbs = (struct orh_chardev){ .major = 231, .minor = 192 + (unsigned)i,
						    .present = true };
		snprintf(dev->uverbs.name, sizeof(dev->uverbs.name), "uverbs%zu", i);
		p->num = 1;
		p->state = ORH_PORT_ACTIVE;
		strcpy(p->state_text, "ACTIVE");
		p->link_layer = ORH_LL_ETHERNET;
		snprintf(p->netdev, sizeof(p->netdev), "eth%zu", i + 1);
		dev->ports = p;
		dev->n_ports = 1;
	}
	inv.rdma_cm = (struct orh_chardev){ .name = "rdma_cm", .major = 10, .minor = 58,
					    .present = true };
	strcpy(inv.default_route_if, "eno1");
	orh_strv_push(&inv.warnings, orh_xstrdup("skipping 'x': a discovery warning"));
	gpus.v = calloc(2, sizeof(*gpus.v));
	gpus.n = 2;
	for (size_t i = 0; i < 2; i++) {
		snprintf(gpus.v[i].bdf, sizeof(gpus.v[i].bdf), "0000:%s:00.0", i ? "94" : "14");
		gpus.v[i].index = (unsigned)i;
		gpus.v[i].minor = (int)i;
		gpus.v[i].numa_node = (int)i;
		strcpy(gpus.v[i].pci_path, gpu_paths[i]);
	}
}

static void teardown(void)
{
	orh_plan_free(&d.plan);
	free(d.gpus_held);
	orh_strv_free(&d.warnings);
	orh_inventory_free(&inv);
	orh_gpus_free(&gpus);
	orh_config_free(&cfg);
}

TestSuite(decide_node, .init = setup, .fini = teardown);

static void decide(uint64_t ceiling)
{
	struct orh_node_view node = { .inv = &inv, .gids = &reader, .gpus = &gpus };

	cr_assert_eq(orh_decide_node(&cfg, &node, ceiling, &d, &err), 0, "%s", err.msg);
}

static const char *env(const char *name)
{
	return plan_value(&d.plan, name);
}

static bool warned(const char *needle)
{
	return strv_mentions(&d.warnings, needle);
}

Test(decide_node, every_nic_without_a_gpu_subset)
{
	decide(0);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
	cr_assert_str_eq(env("NCCL_IB_GID_INDEX"), "3");
	cr_assert_gt(reads, 0, "GID entries come from the reader passed in");
	cr_assert(warned("a discovery warning"), "the inventory's warnings are the decision's");
	cr_assert_null(d.gpus_held);
}

Test(decide_node, gpu_subset_gets_the_nic_under_its_switch)
{
	d.facts.nvidia_visible = "1";
	decide(0);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_1:1");
	cr_assert_not(d.plan.ports[0].used);
	cr_assert(strstr(d.plan.ports[0].reason, "rule 9"), "%s", d.plan.ports[0].reason);
	cr_assert_eq(d.plan.n_nodes, 2, "uverbs1 and rdma_cm only");
	cr_assert_eq(d.plan.nodes[0].owner, &inv.devs[1]);
	cr_assert_eq(d.plan.nodes[0].minor, 193);
}

Test(decide_node, gpus_unreadable_give_every_nic_with_a_warning)
{
	struct orh_node_view node = { .inv = &inv, .gids = &reader, .gpus_error = "no driver" };

	d.facts.nvidia_visible = "1";
	cr_assert_eq(orh_decide_node(&cfg, &node, 0, &d, &err), 0, "%s", err.msg);
	cr_assert_str_eq(env("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
	cr_assert(warned("GPUs not read (no driver): every NIC is given"));
}

Test(decide_node, memlock_ceiling_and_the_users_limit)
{
	decide(64 << 20);
	cr_assert(d.memlock.set);
	cr_assert(d.memlock.lowered);
	cr_assert_eq(d.memlock.limit, 64 << 20, "lowered to the ceiling");
	cr_assert_eq(d.memlock.need, ORH_MEMLOCK_NEED);
	cr_assert(warned("RLIMIT_MEMLOCK lowered to the hard limit 67108864 bytes"));
	orh_plan_free(&d.plan);
	orh_strv_free(&d.warnings);
	d.facts.user_memlock = true;
	memset(&d.memlock, 0, sizeof(d.memlock));
	decide(64 << 20);
	cr_assert_not(d.memlock.set, "the spec's own limit wins");
	cr_assert(d.memlock.user);
	cr_assert_not(warned("lowered"));
}

Test(decide_node, the_checks_are_the_decisions)
{
	struct orh_gpudirect gd = { .read = true, .peermem = false, .kernel = "5.10.0" };
	struct orh_node_view node = { .inv = &inv, .gids = &reader, .gpudirect = &gd };

	d.facts.nvidia_visible = "0";
	d.act = ORH_ACT_REQUESTED;
	cfg.on_error = ORH_ON_ERROR_FAIL;
	cr_assert_eq(orh_decide_node(&cfg, &node, 0, &d, &err), 0, "%s", err.msg);
	cr_assert(strstr(d.checks.gpudirect, "GPUDirect RDMA unavailable"), "%s",
		  d.checks.gpudirect);
	cr_assert(strstr(d.checks.gpudirect, "(5.10.0)"), "%s", d.checks.gpudirect);
	cr_assert_str_empty(d.checks.gid, "the host's network: nothing to check");
	cr_assert_str_empty(d.checks.ports_down, "nothing given");
	cr_assert(d.checks.memlock_refuses, "it asked, on_error = fail");
	cr_assert_not(warned("GPUDirect"), "a check is no warning of the plan");
	orh_plan_free(&d.plan);
	orh_strv_free(&d.warnings);
	gd.peermem = gd.peermem_module = true;
	d.act = ORH_ACT_DEFAULT;
	cr_assert_eq(orh_decide_node(&cfg, &node, 0, &d, &err), 0, "%s", err.msg);
	cr_assert_str_empty(d.checks.gpudirect, "nvidia_peermem is loaded");
	cr_assert_not(d.checks.memlock_refuses, "activated by the node: a warning");
}
