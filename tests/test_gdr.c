/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPUDirect RDMA and the fail-closed pin, decided per container on the sample nodes
 * tests/nodes/gdr-*.json (tests/mknode.py with their "gpudirect" facts: the kernel's
 * release, /proc/driver/nvidia/version, the peer-memory files): the facts as
 * orh_gpudirect_read() reads them, the verdict and the settings of orh_decide() and
 * orh_decide_nccl() against an image NCCL version, the image refusal under
 * nccl_fail_closed, and the record's "nccl" object (the same text as tests/record_tree.c's
 * tree).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "node_fixture.h"
#include "orh/decide/decide.h"
#include "orh/apply/record.h"
#include "record_tree.h"

static char root[256];
static struct orh_config cfg;
static struct orh_decision d;
static struct orh_image img;
static struct orh_err err;
static json_t *spec;

static void setup(void)
{
	root[0] = '\0';
	orh_config_defaults(&cfg);
	memset(&d, 0, sizeof(d));
	memset(&img, 0, sizeof(img));
	memset(&err, 0, sizeof(err));
	/* a container that holds every GPU (NVIDIA_VISIBLE_DEVICES) */
	spec = json_pack("{s:{s:[s]}}", "process", "env", "NVIDIA_VISIBLE_DEVICES=all");
}

static void cleanup(void)
{
	orh_decision_free(&d);
	orh_config_free(&cfg);
	json_decref(spec);
	fixture_remove_node(root);
}

TestSuite(gdr, .init = setup, .fini = cleanup);

/* The decision on the sample node, then the NCCL verdicts again with an image whose NCCL
 * is version (NULL: the image not read), as orh_decide() does once it read the image. */
static void decide_on(const char *node, const char *version)
{
	struct orh_decide_in in = { .cfg = &cfg, .scan = ORH_GIDS_PLAN, .spec = spec };

	if (!root[0])
		fixture_make_node(root, sizeof(root), "orh-gdr", node);
	in.sysroot = root;
	orh_decision_free(&d);
	cr_assert_eq(orh_decide(&in, &d, &err), 0, "%s", err.msg);
	cr_assert(d.have_plan);
	cr_assert(d.node.have_gpudirect, "a container holding GPUs: the facts are read");
	if (!version)
		return;
	img.read = true;
	img.n_nccl = 1;
	snprintf(img.nccl[0].version, sizeof(img.nccl[0].version), "%s", version);
	cr_assert_eq(sscanf(version, "%u.%u.%u", &img.nccl[0].v[0], &img.nccl[0].v[1],
			    &img.nccl[0].v[2]), 3);
	orh_decide_nccl(&cfg, &d.node.gpudirect, &img, &d);
}

/* Remove rel from this test's node */
static void rm_in_root(const char *rel)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -r %s/%s", root, rel);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static const char *env(const char *name)
{
	const struct orh_env_entry *e = orh_plan_env_get(&d.plan, name);

	return e ? e->value : NULL;
}

static void has(const char *text, const char *part)
{
	cr_assert(strstr(text, part), "'%s' not in '%s'", part, text);
}

Test(gdr, driver_version_lines)
{
	struct orh_gpudirect g = { 0 };

	orh_gpudirect_parse_driver("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
				   "580.159.04  Release Build  (dvs-builder@U22)  Thu Oct  2\n"
				   "GCC version:  gcc version 12.2.0\n", &g);
	cr_assert(g.driver);
	cr_assert(g.driver_open);
	cr_assert_str_eq(g.driver_version, "580.159.04");
	orh_gpudirect_parse_driver("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
				   "Sat Aug 19 01:15:15 UTC 2023\n", &g);
	cr_assert_not(g.driver_open, "the proprietary module's line");
	cr_assert_str_eq(g.driver_version, "535.104.05");
	orh_gpudirect_parse_driver("NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.54.15\n"
				   "Open Kernel Module is not on the first line\n", &g);
	cr_assert_not(g.driver_open, "only the first line tells");
	cr_assert_str_eq(g.driver_version, "550.54.15");
	orh_gpudirect_parse_driver("garbage\n", &g);
	cr_assert(g.driver);
	cr_assert_not(g.driver_open);
	cr_assert_str_empty(g.driver_version);
}

Test(gdr, the_facts_of_each_sample_node)
{
	struct orh_gpudirect g;

	fixture_make_node(root, sizeof(root), "orh-gdr", "gdr-peermem");
	orh_gpudirect_read(root, &g);
	cr_assert(g.read);
	cr_assert_str_eq(g.kernel, "5.15.0-91-generic");
	cr_assert(g.nv_mem && g.nv_mem_nc && g.peermem_module && g.peermem);
	cr_assert(g.driver && !g.driver_open);
	cr_assert_str_eq(g.driver_version, "535.104.05");
	fixture_remove_node(root);

	fixture_make_node(root, sizeof(root), "orh-gdr", "gdr-dmabuf");
	orh_gpudirect_read(root, &g);
	cr_assert_str_eq(g.kernel, "6.8.0-49-generic");
	cr_assert(!g.nv_mem && !g.nv_mem_nc && !g.peermem_module && !g.peermem);
	cr_assert(g.driver && g.driver_open);
	cr_assert_str_eq(g.driver_version, "580.159.04");
	fixture_remove_node(root);

	fixture_make_node(root, sizeof(root), "orh-gdr", "gdr-none");
	orh_gpudirect_read(root, &g);
	cr_assert_str_eq(g.kernel, "5.10.0-28-amd64");
	cr_assert_not(g.peermem);
	cr_assert(g.driver && !g.driver_open);
	rm_in_root("proc/driver/nvidia/version");
	orh_gpudirect_read(root, &g);
	cr_assert_not(g.driver, "no version file: no driver");
}

Test(gdr, peermem)
{
	decide_on("gdr-peermem", NULL);
	cr_assert(d.nccl.gdr_judged);
	cr_assert_eq(d.nccl.gdr, ORH_GDR_PEERMEM, "%s", d.nccl.gdr_why);
	has(d.nccl.gdr_why, "memory_peers/nv_mem");
	has(d.nccl.gdr_why, "proprietary kernel module");
	cr_assert_str_empty(d.checks.gpudirect, "no warning");
	cr_assert_str_empty(d.nccl.nccl, "the image was not read");
	/* nv_mem is looked for by every NCCL */
	decide_on("gdr-peermem", "2.12.12");
	cr_assert_eq(d.nccl.gdr, ORH_GDR_PEERMEM, "%s", d.nccl.gdr_why);
	cr_assert_str_eq(d.nccl.nccl, "2.12.12");
	cr_assert_null(env("NCCL_DMABUF_ENABLE"), "kernel 5.15: NCCL 2.12 has no DMA-BUF");
	cr_assert_null(env("NCCL_NET_GDR_LEVEL"));
}

/* DOCA's ib_core: nvidia_peermem loaded, no memory_peers entries; NCCL up to 2.22.3 does
 * not look at /sys/module/nvidia_peermem */
Test(gdr, peermem_module_only)
{
	fixture_make_node(root, sizeof(root), "orh-gdr", "gdr-peermem");
	rm_in_root("sys/kernel/mm/memory_peers");
	decide_on("gdr-peermem", "2.22.3");
	cr_assert_eq(d.nccl.gdr, ORH_GDR_NONE, "%s", d.nccl.gdr_why);
	has(d.nccl.gdr_why, "/sys/module/nvidia_peermem/version is there, but NCCL 2.22.3");
	has(d.nccl.gdr_why, "2.23.4");
	has(d.checks.gpudirect, "GPUDirect RDMA unavailable");
	decide_on("gdr-peermem", "2.23.4");
	cr_assert_eq(d.nccl.gdr, ORH_GDR_PEERMEM, "%s", d.nccl.gdr_why);
	has(d.nccl.gdr_why, "nvidia_peermem");
	cr_assert_str_empty(d.checks.gpudirect);
}

Test(gdr, dmabuf)
{
	decide_on("gdr-dmabuf", "2.28.9");
	cr_assert_eq(d.nccl.gdr, ORH_GDR_DMABUF, "%s", d.nccl.gdr_why);
	has(d.nccl.gdr_why, "by DMA-BUF: kernel 6.8.0-49-generic, the NVIDIA open kernel module "
			    "580.159.04, NCCL 2.28.9");
	cr_assert_str_empty(d.checks.gpudirect);
	cr_assert_null(env("NCCL_DMABUF_ENABLE"), "NCCL's default (1) is right");
	cr_assert_not(d.nccl.dmabuf_off);
	cr_assert_null(env("NCCL_NET"), "no pin without nccl_fail_closed");
}

Test(gdr, image_nccl_too_old_for_dmabuf)
{
	decide_on("gdr-dmabuf", "2.12.12");
	cr_assert_eq(d.nccl.gdr, ORH_GDR_NONE, "%s", d.nccl.gdr_why);
	has(d.nccl.gdr_why, "no peer-memory module is loaded");
	has(d.nccl.gdr_why, "NCCL 2.12.12 predates NET/IB's DMA-BUF (2.13)");
	has(d.checks.gpudirect, "GPUDirect RDMA unavailable: the container holds GPUs");
	decide_on("gdr-dmabuf", "2.13.4");
	cr_assert_eq(d.nccl.gdr, ORH_GDR_DMABUF, "%s", d.nccl.gdr_why);
	cr_assert_null(env("NCCL_DMABUF_ENABLE"), "DMA-BUF works here: NCCL 2.13 may probe");
}

Test(gdr, neither)
{
	decide_on("gdr-none", NULL);
	cr_assert_eq(d.nccl.gdr, ORH_GDR_NONE, "%s", d.nccl.gdr_why);
	has(d.nccl.gdr_why, "no peer-memory module is loaded");
	has(d.nccl.gdr_why, "the kernel (5.10.0-28-amd64) is older than 5.12");
	has(d.checks.gpudirect, "GPUDirect RDMA unavailable");
	cr_assert_null(env("NCCL_DMABUF_ENABLE"), "the image's NCCL is not known");
	/* NCCL 2.13's probe takes the old kernel's EPROTONOSUPPORT for support */
	decide_on("gdr-none", "2.13.4");
	cr_assert_str_eq(env("NCCL_DMABUF_ENABLE"), "0");
	cr_assert(d.nccl.dmabuf_off);
	has(orh_plan_env_get(&d.plan, "NCCL_DMABUF_ENABLE")->source, "NCCL 2.13's DMA-BUF probe");
	decide_on("gdr-none", "2.14.3");
	cr_assert_null(env("NCCL_DMABUF_ENABLE"), "2.14 probes right: its default stands");
	cr_assert_not(d.nccl.dmabuf_off);
}

Test(gdr, the_operators_env_wins)
{
	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", "[containers]\n"
					     "nccl_fail_closed = yes\n[env]\n"
					     "NCCL_DMABUF_ENABLE = 1\nNCCL_NET = Socket\n", &err),
		     0, "%s", err.msg);
	decide_on("gdr-none", "2.13.4");
	cr_assert_str_eq(env("NCCL_DMABUF_ENABLE"), "1", "the config's [env] stands");
	cr_assert_not(d.nccl.dmabuf_off);
	cr_assert_str_eq(env("NCCL_NET"), "Socket");
	cr_assert_not(d.nccl.net_pinned);
}

Test(gdr, a_container_without_gpus_is_not_judged)
{
	json_decref(spec);
	spec = json_pack("{s:{s:[s]}}", "process", "env", "PATH=/bin");
	fixture_make_node(root, sizeof(root), "orh-gdr", "gdr-none");
	{
		struct orh_decide_in in = { .cfg = &cfg, .scan = ORH_GIDS_PLAN, .spec = spec,
					    .sysroot = root };

		cr_assert_eq(orh_decide(&in, &d, &err), 0, "%s", err.msg);
	}
	cr_assert_not(d.nccl.gdr_judged);
	cr_assert_str_empty(d.checks.gpudirect);
}

Test(gdr, fail_closed_pins_the_network)
{
	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", "[containers]\nnccl_fail_closed = "
					     "yes\n", &err), 0, "%s", err.msg);
	cr_assert(cfg.nccl_fail_closed);
	decide_on("gdr-dmabuf", "2.28.9");
	cr_assert_str_eq(env("NCCL_NET"), "IB");
	cr_assert(d.nccl.net_pinned);
	has(orh_plan_env_get(&d.plan, "NCCL_NET")->source, "nccl_fail_closed");
	cr_assert_not_null(env("NCCL_IB_HCA"), "the plan gives mlx5_1");
	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	decide_on("gdr-dmabuf", "2.28.9");
	cr_assert_null(env("NCCL_NET"), "off by default: NCCL may fall back to sockets");
	cr_assert_not(d.nccl.net_pinned);
}

Test(gdr, fail_closed_gives_nothing_where_nothing_is_given)
{
	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", "[containers]\nnccl_fail_closed = "
					     "yes\n", &err), 0, "%s", err.msg);
	fixture_make_node(root, sizeof(root), "orh-gdr", "nordma");
	{
		struct orh_decide_in in = { .cfg = &cfg, .scan = ORH_GIDS_PLAN, .spec = spec,
					    .sysroot = root };

		cr_assert_eq(orh_decide(&in, &d, &err), 0, "%s", err.msg);
	}
	cr_assert(orh_plan_is_empty(&d.plan), "no RDMA: the container is left unchanged");
	cr_assert_not(d.nccl.net_pinned);
}

Test(gdr, bad_value_names_the_key)
{
	cr_assert_lt(orh_config_parse_string(&cfg, "t.conf", "[containers]\nnccl_fail_closed = "
					     "maybe\n", &err), 0);
	has(err.msg, "t.conf:2");
	has(err.msg, "nccl_fail_closed");
}

/* The image cannot load a provider for the device given: refused under nccl_fail_closed
 * and on_error = fail, even where image_check = warn; a warning otherwise */
Test(gdr, fail_closed_refuses_an_image_without_a_provider)
{
	static const char *const confs[] = {
		"[containers]\nimage_check = warn\non_error = fail\n",
		"[containers]\nimage_check = warn\non_error = fail\nnccl_fail_closed = yes\n",
		"[containers]\nimage_check = warn\nnccl_fail_closed = yes\n",
	};
	static const bool refuses[] = { false, true, false };

	for (size_t i = 0; i < 3; i++) {
		orh_config_free(&cfg);
		orh_config_defaults(&cfg);
		cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", confs[i], &err), 0, "%s",
			     err.msg);
		decide_on("gdr-dmabuf", NULL);
		d.act = ORH_ACT_REQUESTED;
		memset(&img, 0, sizeof(img));
		img.read = true;
		img.n_providers = 1;
		strcpy(img.providers[0].name, "mlx5");
		img.providers[0].state = ORH_PROVIDER_NO_VERBS;
		orh_decide_image(&cfg, &img, NULL, &d);
		cr_assert_eq(d.image_verdict.n_devs, 1);
		cr_assert_eq(d.image_verdict.usable, 0);
		cr_assert_eq(d.image_verdict.refuses, refuses[i], "case %zu", i);
		if (refuses[i])
			has(d.image_verdict.refusal, "(nccl_fail_closed)");
		orh_strv_free(&d.image_verdict.warnings);
	}
}

Test(gdr, the_record_says_it)
{
	struct orh_record_in in = { .id = "c1", .stage = "createRuntime", .d = &d,
				    .spec_devices = -1 };
	_cleanup_free_ char *text = NULL;
	json_t *rec, *n;

	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", "[containers]\nnccl_fail_closed = "
					     "yes\n", &err), 0, "%s", err.msg);
	decide_on("gdr-none", "2.13.4");
	text = orh_record_text(&in, NULL);
	cr_assert_not_null(text);
	rec = json_loads(text, 0, NULL);
	cr_assert_not_null(rec, "%s", text);
	n = json_object_get(rec, "nccl");
	cr_assert_str_eq(json_string_value(json_object_get(n, "gpudirect")), "none");
	has(json_string_value(json_object_get(n, "gpudirect_why")), "older than 5.12");
	cr_assert(json_is_true(json_object_get(n, "dmabuf_disabled")));
	cr_assert_str_eq(json_string_value(json_object_get(n, "image_nccl")), "2.13.4");
	cr_assert(json_is_true(json_object_get(n, "net_pinned")));
	json_decref(rec);
	/* the same value as the record's tree (tests/record_tree.c) */
	rec = record_tree_build(&in);
	cr_assert_not_null(rec);
	{
		char why[256] = "";

		cr_assert(record_text_is_tree(text, strlen(text), rec, why, sizeof(why)), "%s",
			  why);
	}
	json_decref(rec);
}
