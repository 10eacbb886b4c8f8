/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image checks' verdicts (orh_decide_image, src/decide/image_check.c) on a node built in
 * memory (two RoCE mlx5 NICs and, for some cases, a soft-RoCE device) and an image as the
 * reader would have read it, built in the test.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide/decide.h"
#include "plan_check.h"

static struct orh_config cfg;
static struct orh_inventory inv;
static struct orh_decision d;
static struct orh_image img;
static struct orh_err err;
static bool gid_differs; /* each port's GID at its own index: no common one */

static int gid_entry(void *arg, const struct orh_port *p, unsigned idx, struct orh_gid *g,
		     struct orh_strv *warnings)
{
	unsigned at = gid_differs ? 2 + p->num : 3;

	(void)arg;
	(void)warnings;
	if (idx > at)
		return -ENOENT;
	if (idx < at)
		return 0;
	fake_ipv4_gid(g, at, p->num);
	return 1;
}

static const struct orh_gid_reader reader = { .entry = gid_entry };

static void add_dev(const char *name, const char *driver, const char *pci, unsigned port)
{
	struct orh_device *dev = &inv.devs[inv.n_devs];
	struct orh_port *p = calloc(1, sizeof(*p));

	snprintf(dev->name, sizeof(dev->name), "%s", name);
	snprintf(dev->driver, sizeof(dev->driver), "%s", driver);
	snprintf(dev->pci, sizeof(dev->pci), "%s", pci);
	dev->numa_node = -1;
	dev->uverbs = (struct orh_chardev){ .major = 231, .minor = 192 + (unsigned)inv.n_devs,
					    .present = true };
	snprintf(dev->uverbs.name, sizeof(dev->uverbs.name), "uverbs%zu", inv.n_devs);
	p->num = port;
	p->state = ORH_PORT_ACTIVE;
	strcpy(p->state_text, "ACTIVE");
	p->link_layer = ORH_LL_ETHERNET;
	snprintf(p->netdev, sizeof(p->netdev), "eth%zu", inv.n_devs + 1);
	dev->ports = p;
	dev->n_ports = 1;
	inv.n_devs++;
}

static void setup(void)
{
	memset(&inv, 0, sizeof(inv));
	memset(&d, 0, sizeof(d));
	memset(&img, 0, sizeof(img));
	gid_differs = false;
	orh_config_defaults(&cfg);
	inv.devs = calloc(3, sizeof(*inv.devs));
	add_dev("mlx5_0", "mlx5_core", "0000:13:00.0", 1);
	add_dev("mlx5_3", "mlx5_core", "0000:93:00.0", 2);
	inv.rdma_cm = (struct orh_chardev){ .name = "rdma_cm", .major = 10, .minor = 58,
					    .present = true };
	strcpy(inv.default_route_if, "eno1");
	img.read = true;
	strcpy(img.verbs, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
	img.abi = 34;
}

static void teardown(void)
{
	/* orh_decide_node() builds the plan; the decision owns it only once orh_decide()
	 * has marked it (have_plan) */
	if (!d.have_plan)
		orh_plan_free(&d.plan);
	orh_decision_free(&d);
	orh_image_free(&img);
	orh_inventory_free(&inv);
	orh_config_free(&cfg);
}

TestSuite(image_check, .init = setup, .fini = teardown);

static void decide(enum orh_activation_result act)
{
	struct orh_node_view node = { .inv = &inv, .gids = &reader };

	d.act = act;
	cr_assert_eq(orh_decide_node(&cfg, &node, 0, &d, &err), 0, "%s", err.msg);
	orh_decide_image(&cfg, &img, NULL, &d);
}

static void provider(const char *name, enum orh_provider_state state)
{
	struct orh_image_provider *p = &img.providers[img.n_providers++];

	snprintf(p->name, sizeof(p->name), "%s", name);
	p->state = state;
	snprintf(p->config, sizeof(p->config), "/etc/libibverbs.d/%s.driver", name);
	snprintf(p->library, sizeof(p->library),
		 "/usr/lib/x86_64-linux-gnu/libibverbs/lib%s-rdmav34.so", name);
	if (state == ORH_PROVIDER_ABI_MISMATCH) {
		snprintf(p->other, sizeof(p->other),
			 "/usr/lib/x86_64-linux-gnu/libibverbs/lib%s-rdmav25.so", name);
		p->other_abi = 25;
	}
	if (state == ORH_PROVIDER_NO_CONFIG)
		p->config[0] = '\0';
}

static void nccl(const char *version, enum orh_nccl_from from, bool pytorch)
{
	struct orh_image_nccl *c = &img.nccl[img.n_nccl++];

	snprintf(c->version, sizeof(c->version), "%s", version);
	cr_assert_eq(sscanf(version, "%u.%u.%u", &c->v[0], &c->v[1], &c->v[2]), 3);
	c->from = from;
	c->pytorch = pytorch;
	snprintf(c->path, sizeof(c->path), "%s",
		 from == ORH_NCCL_PIP ? "/opt/venv/lib/python3.12/site-packages/"
					"nvidia_nccl_cu12-2.23.4.dist-info"
				      : "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
}

static const char *warning(const char *needle)
{
	for (size_t i = 0; i < d.image_verdict.warnings.n; i++)
		if (strstr(d.image_verdict.warnings.v[i], needle))
			return d.image_verdict.warnings.v[i];
	return NULL;
}

Test(image_check, a_provider_found_gives_no_warning)
{
	provider("mlx5", ORH_PROVIDER_FOUND);
	decide(ORH_ACT_DEFAULT);
	cr_assert(d.image_verdict.checked);
	cr_assert_eq(d.image_verdict.n_devs, 2);
	cr_assert_eq(d.image_verdict.usable, 2);
	cr_assert_eq(d.image_verdict.warnings.n, 0);
	cr_assert_not(d.image_verdict.refuses);
	cr_assert_str_eq(d.image_verdict.devs[1].provider, "mlx5");
	cr_assert_eq(d.image_verdict.devs[1].found, &img.providers[0]);
}

Test(image_check, no_provider_says_what_follows_and_what_to_install)
{
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	decide(ORH_ACT_DEFAULT);
	cr_assert_eq(d.image_verdict.usable, 0);
	cr_assert_eq(d.image_verdict.warnings.n, 1);
	cr_assert(warning("NCCL in this container will not use mlx5_0, mlx5_3: the image has no "
			  "provider for mlx5"), "%s", d.image_verdict.warnings.v[0]);
	cr_assert(warning("install rdma-core's provider for mlx5"));
	cr_assert(warning("ibverbs-providers"));
	/* it did not ask: a warning, never a refusal */
	cr_assert_not(d.image_verdict.refuses);
}

Test(image_check, no_libibverbs_at_all)
{
	img.verbs[0] = '\0';
	provider("mlx5", ORH_PROVIDER_NO_VERBS);
	decide(ORH_ACT_DEFAULT);
	cr_assert(warning("will not use mlx5_0, mlx5_3: the image has no provider for mlx5 (it "
			  "has no libibverbs.so.1"));
	cr_assert(warning("libibverbs1 ibverbs-providers"));
}

Test(image_check, a_named_provider_without_its_library_names_both_paths)
{
	provider("mlx5", ORH_PROVIDER_NO_LIBRARY);
	decide(ORH_ACT_DEFAULT);
	cr_assert(warning("(/etc/libibverbs.d/mlx5.driver names it, /usr/lib/x86_64-linux-gnu/"
			  "libibverbs/libmlx5-rdmav34.so is not there)"));
}

Test(image_check, an_abi_mismatch_names_both_abis)
{
	provider("mlx5", ORH_PROVIDER_ABI_MISMATCH);
	decide(ORH_ACT_DEFAULT);
	cr_assert(warning("the image's provider for mlx5 does not fit its libibverbs (/usr/lib/"
			  "x86_64-linux-gnu/libibverbs/libmlx5-rdmav25.so is of private ABI 25, "
			  "/usr/lib/x86_64-linux-gnu/libibverbs.so.1 loads ABI 34)"));
}

Test(image_check, under_on_error_fail_a_container_that_asked_and_can_use_nothing_is_refused)
{
	cfg.on_error = ORH_ON_ERROR_FAIL;
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	decide(ORH_ACT_REQUESTED);
	cr_assert(d.image_verdict.refuses);
	cr_assert(strstr(d.image_verdict.refusal, "the image can use none of the RDMA devices "
			 "given: NCCL in this container will not use mlx5_0, mlx5_3"), "%s",
		  d.image_verdict.refusal);
}

Test(image_check, image_check_warn_keeps_on_error_fail_from_refusing)
{
	cfg.on_error = ORH_ON_ERROR_FAIL;
	cfg.image_check = ORH_IMAGE_CHECK_WARN;
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	decide(ORH_ACT_REQUESTED);
	cr_assert_not(d.image_verdict.refuses);
	cr_assert_eq(d.image_verdict.warnings.n, 1);
}

Test(image_check, image_check_fail_refuses_under_on_error_warn)
{
	cfg.image_check = ORH_IMAGE_CHECK_FAIL;
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	decide(ORH_ACT_REQUESTED);
	cr_assert(d.image_verdict.refuses);
}

Test(image_check, one_usable_device_is_enough_not_to_refuse)
{
	cfg.on_error = ORH_ON_ERROR_FAIL;
	add_dev("rxe0", "", "", 1);
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	provider("rxe", ORH_PROVIDER_FOUND);
	decide(ORH_ACT_REQUESTED);
	cr_assert_eq(d.image_verdict.n_devs, 3);
	cr_assert_eq(d.image_verdict.usable, 1);
	cr_assert_not(d.image_verdict.refuses);
	cr_assert(warning("will not use mlx5_0, mlx5_3:"));
	cr_assert_not(warning("rxe0"));
}

Test(image_check, off_reads_and_says_nothing)
{
	cfg.image_check = ORH_IMAGE_CHECK_OFF;
	cfg.on_error = ORH_ON_ERROR_FAIL;
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	decide(ORH_ACT_REQUESTED);
	cr_assert_not(d.image_verdict.checked);
	cr_assert_eq(d.image_verdict.warnings.n, 0);
	cr_assert_not(d.image_verdict.refuses);
}

Test(image_check, nccl_below_the_nodes_minimum)
{
	provider("mlx5", ORH_PROVIDER_FOUND);
	cfg.nccl_min[0] = 2;
	cfg.nccl_min[1] = 19;
	cfg.nccl_min[2] = 3;
	nccl("2.18.1", ORH_NCCL_LIBRARY, false);
	nccl("2.19.3", ORH_NCCL_PIP, true);
	decide(ORH_ACT_DEFAULT);
	cr_assert_eq(d.image_verdict.warnings.n, 1);
	cr_assert(warning("NCCL 2.18.1 in this image (/usr/lib/x86_64-linux-gnu/libnccl.so.2) is "
			  "older than the node's minimum 2.19.3 (nccl_min)"), "%s",
		  d.image_verdict.warnings.v[0]);
}

Test(image_check, nccl_2_21_to_2_25_where_the_plan_leaves_the_gid_index_to_nccl)
{
	gid_differs = true;
	provider("mlx5", ORH_PROVIDER_FOUND);
	nccl("2.23.4", ORH_NCCL_PIP, true);
	nccl("2.26.2", ORH_NCCL_LIBRARY, false);
	nccl("2.20.5", ORH_NCCL_LIBRARY, false);
	decide(ORH_ACT_DEFAULT);
	cr_assert_eq(d.plan.gid_index, -1, "the ports' indices differ");
	cr_assert_eq(d.image_verdict.warnings.n, 1);
	cr_assert(warning("NCCL 2.23.4 in this image (pip's, /opt/venv/lib/python3.12/"
			  "site-packages/nvidia_nccl_cu12-2.23.4.dist-info, the copy PyTorch "
			  "loads) chooses the GID index itself here"), "%s",
		  d.image_verdict.warnings.v[0]);
	cr_assert(warning("use NCCL 2.26.2 or newer, or give the container fewer devices"));
}

Test(image_check, nccl_2_23_with_a_common_gid_index_is_not_warned)
{
	provider("mlx5", ORH_PROVIDER_FOUND);
	nccl("2.23.4", ORH_NCCL_PIP, true);
	decide(ORH_ACT_DEFAULT);
	cr_assert_eq(d.plan.gid_index, 3);
	cr_assert_eq(d.image_verdict.warnings.n, 0);
}

Test(image_check, a_path_from_the_image_is_escaped_in_the_warning)
{
	provider("mlx5", ORH_PROVIDER_NO_LIBRARY);
	strcpy(img.providers[0].config, "/etc/libibverbs.d/\x1b[31mred");
	decide(ORH_ACT_DEFAULT);
	cr_assert(warning("/etc/libibverbs.d/\\x1b[31mred names it"), "%s",
		  d.image_verdict.warnings.v[0]);
}

/* ---- image_supply: the node's stack given ------------------------------------------- */

static struct orh_host_stack hs;

static void host_file(struct orh_supply_file *f, const char *host, const char *name,
		      unsigned glibc, bool of_verbs)
{
	snprintf(f->host, sizeof(f->host), "%s", host);
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->glibc = glibc;
	f->of_verbs = of_verbs;
}

/* The node: Debian's rdma-core (ABI 34) with mlx5 (state), libnl for libibverbs; its
 * libraries need glibc `need`; the image's libc.so.6 defines up to `image_glibc`. */
static void node_stack(enum orh_provider_state state, unsigned need, unsigned image_glibc)
{
	struct orh_image_provider *p;

	memset(&hs, 0, sizeof(hs));
	hs.read = true;
	hs.host.read = true;
	hs.host.abi = 34;
	strcpy(hs.host.verbs, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
	p = &hs.host.providers[hs.host.n_providers++];
	strcpy(p->name, "mlx5");
	p->state = state;
	strcpy(p->library, "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so");
	host_file(&hs.verbs, hs.host.verbs, "libibverbs.so.1", need, true);
	if (state == ORH_PROVIDER_FOUND)
		host_file(&hs.providers[0], p->library, "libmlx5-rdmav34.so", 21400, false);
	host_file(&hs.deps[hs.n_deps++], "/usr/lib/x86_64-linux-gnu/libnl-3.so.200",
		  "libnl-3.so.200", 21400, true);
	strcpy(hs.image_libc, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	hs.image_glibc = image_glibc;
}

static void decide_supply(enum orh_activation_result act)
{
	decide(act);
	orh_decide_image(&cfg, &img, &hs, &d);
}

/* An image with no libibverbs at all. */
static void image_without_verbs(void)
{
	img.verbs[0] = '\0';
	img.abi = 0;
	img.n_providers = 0;
	provider("mlx5", ORH_PROVIDER_NO_VERBS);
}

/* The next case of one test: a new decision. */
static void again(void)
{
	/* the decision owns the plan only once orh_decide() marks it, as teardown() says */
	if (!d.have_plan)
		orh_plan_free(&d.plan);
	orh_decision_free(&d);
	memset(&d, 0, sizeof(d));
}

static bool supplies(const char *name)
{
	for (size_t i = 0; i < d.supply.n_files; i++)
		if (!strcmp(d.supply.files[i]->name, name))
			return true;
	return false;
}

Test(image_check, supply_provider_alone_where_the_image_libibverbs_fits)
{
	cfg.image_supply = true;
	cfg.image_check = ORH_IMAGE_CHECK_FAIL;
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	node_stack(ORH_PROVIDER_FOUND, 23400, 23600);
	decide_supply(ORH_ACT_REQUESTED);
	cr_assert(d.supply.wanted && d.supply.supply, "%s", d.supply.why_not);
	cr_assert_not(d.supply.verbs, "the image's libibverbs has the node's ABI");
	cr_assert_eq(d.supply.n_files, 1);
	cr_assert(supplies("libmlx5-rdmav34.so"));
	cr_assert_eq(d.supply.n_providers, 1);
	cr_assert_str_eq(d.supply.providers[0], "mlx5");
	cr_assert_eq(d.image_verdict.usable, 2);
	cr_assert_null(warning("will not use"), "%s", warning("will not use"));
	cr_assert_not(d.image_verdict.refuses);
}

Test(image_check, supply_libibverbs_too_where_the_image_has_none_or_another_abi)
{
	cfg.image_supply = true;
	image_without_verbs();
	node_stack(ORH_PROVIDER_FOUND, 23400, 23600);
	decide_supply(ORH_ACT_REQUESTED);
	cr_assert(d.supply.supply && d.supply.verbs, "%s", d.supply.why_not);
	cr_assert_eq(d.supply.n_files, 3);
	cr_assert(supplies("libibverbs.so.1") && supplies("libmlx5-rdmav34.so") &&
		  supplies("libnl-3.so.200"));

	/* an image libibverbs of ABI 25: the node's whole stack again */
	again();
	memset(&img, 0, sizeof(img));
	img.read = true;
	strcpy(img.verbs, "/usr/lib64/libibverbs.so.1");
	img.abi = 25;
	provider("mlx5", ORH_PROVIDER_ABI_MISMATCH);
	decide_supply(ORH_ACT_REQUESTED);
	cr_assert(d.supply.supply && d.supply.verbs, "%s", d.supply.why_not);
	cr_assert(supplies("libibverbs.so.1"));
}

Test(image_check, supply_refused_where_the_image_glibc_is_older)
{
	const char *w;

	cfg.image_supply = true;
	cfg.image_check = ORH_IMAGE_CHECK_FAIL;
	image_without_verbs();
	node_stack(ORH_PROVIDER_FOUND, 23800, 22800);
	decide_supply(ORH_ACT_REQUESTED);
	cr_assert(d.supply.wanted);
	cr_assert_not(d.supply.supply);
	cr_assert_eq(d.supply.n_files, 0);
	w = warning("is not given to this container (image_supply = yes)");
	cr_assert_not_null(w);
	cr_assert(strstr(w, "libibverbs.so.1 needs GLIBC_2.38, and the image's "
			    "/usr/lib/x86_64-linux-gnu/libc.so.6 has GLIBC_2.28 at most"), "%s", w);
	cr_assert_not_null(warning("NCCL in this container will not use mlx5_0, mlx5_3"));
	cr_assert(d.image_verdict.refuses, "no usable device: refused under image_check = fail");

	/* no glibc at all (a static or musl image) */
	again();
	node_stack(ORH_PROVIDER_FOUND, 23800, 0);
	decide_supply(ORH_ACT_REQUESTED);
	cr_assert_not(d.supply.supply);
	cr_assert(strstr(d.supply.why_not, "the image has no glibc its loader finds"), "%s",
		  d.supply.why_not);
}

Test(image_check, supply_none_where_the_node_has_no_provider_or_the_image_its_own)
{
	cfg.image_supply = true;
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	node_stack(ORH_PROVIDER_NO_LIBRARY, 23400, 23600);
	decide_supply(ORH_ACT_REQUESTED);
	cr_assert_not(d.supply.supply);
	cr_assert(strstr(d.supply.why_not, "the node has no provider for mlx5 either"), "%s",
		  d.supply.why_not);

	/* the image's own stack works: never overridden */
	again();
	img.n_providers = 0;
	provider("mlx5", ORH_PROVIDER_FOUND);
	node_stack(ORH_PROVIDER_FOUND, 23400, 23600);
	decide_supply(ORH_ACT_REQUESTED);
	cr_assert_not(d.supply.wanted);
	cr_assert_not(d.supply.supply);

	/* image_supply not set: the verdict of before */
	again();
	img.n_providers = 0;
	provider("mlx5", ORH_PROVIDER_NO_CONFIG);
	cfg.image_supply = false;
	decide_supply(ORH_ACT_REQUESTED);
	cr_assert_not(d.supply.wanted);
	cr_assert_not_null(warning("NCCL in this container will not use mlx5_0"));
}

Test(image_check, a_file_read_past_its_budget_is_warned_of_naming_it_and_the_budget)
{
	struct orh_host_stack stack = { .read = true };

	provider("mlx5", ORH_PROVIDER_FOUND);
	snprintf(img.over, sizeof(img.over), "'/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-"
		 "rdmav34.so': reading stopped at the budget of 2048 entries walked in one file");
	decide(ORH_ACT_DEFAULT);
	cr_assert_eq(d.image_verdict.warnings.n, 1);
	cr_assert(warning("the image was read in part: '/usr/lib/x86_64-linux-gnu/libibverbs/"
			  "libmlx5-rdmav34.so': reading stopped at the budget of 2048 entries "
			  "walked in one file; that file was taken as unreadable"), "%s",
		  d.image_verdict.warnings.v[0]);
	/* the image's libc.so.6, read for the supply */
	img.over[0] = '\0';
	snprintf(stack.image_over, sizeof(stack.image_over), "'/usr/lib/x86_64-linux-gnu/"
		 "libc.so.6': reading stopped at the budget of 2048 entries walked in one file");
	orh_decide_image(&cfg, &img, &stack, &d);
	cr_assert_eq(d.image_verdict.warnings.n, 1);
	cr_assert(warning("the image's glibc was not read: '/usr/lib/x86_64-linux-gnu/libc.so.6': "
			  "reading stopped at the budget of 2048 entries walked in one file"));
}
