/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request_scope (oci-rdma-hook.conf(5)): every activation x request_scope x request
 * through orh_decide, on the DGX-like sample node (tests/nodes/dgx-h100.json: mlx5_0..7
 * InfiniBand, uverbsN = 231:192+N, 8 GPUs two per PCIe switch). Who is served, with
 * which HCAs, and why not.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "node_fixture.h"
#include "orh/decide/decide.h"
#include "plan_check.h"

static char root[256];

static void make_node(void)
{
	fixture_make_node(root, sizeof(root), "orh-scope", "dgx-h100");
}

static void cleanup(void)
{
	fixture_remove_node(root);
}

TestSuite(scope, .init = make_node, .fini = cleanup);

#define ALL_IB "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
#define HELD_IB "=mlx5_2:1"

/* The containers: what their specs say. */
#define UVERBS2 "{\"path\":\"/dev/infiniband/uverbs2\",\"type\":\"c\",\"major\":231,\"minor\":194}"
#define RDMA_CM "{\"path\":\"/dev/infiniband/rdma_cm\",\"type\":\"c\",\"major\":10,\"minor\":61}"
#define UMAD2 "{\"path\":\"/dev/infiniband/umad2\",\"type\":\"c\",\"major\":231,\"minor\":2}"
#define ASKS "\"annotations\":{\"oci-rdma-hook/enable\":\"true\"}"

enum request { NOTHING, ANNOTATION, ENV, DEVICES, N_REQUESTS };

static const char *const specs[N_REQUESTS] = {
	[NOTHING] = "{\"process\":{\"env\":[\"PATH=/bin\"]}}",
	[ANNOTATION] = "{\"process\":{\"env\":[\"PATH=/bin\"]}," ASKS "}",
	[ENV] = "{\"process\":{\"env\":[\"PATH=/bin\",\"OCI_RDMA_HOOK_ENABLE=true\"]}}",
	/* a device plugin's allocation: mlx5_2's uverbs node and rdma_cm */
	[DEVICES] = "{\"process\":{\"env\":[\"PATH=/bin\"]},"
		    "\"linux\":{\"devices\":[" UVERBS2 "," RDMA_CM "]}}",
};
static const char *const request_names[N_REQUESTS] = { "nothing", "annotation", "env",
							"devices held" };

/* orh_decide for the spec text under activation and request_scope; *d to be freed. */
static int decide(enum orh_activation activation, enum orh_request_scope scope,
		  const char *spec_text, struct orh_decision *d, struct orh_err *err)
{
	struct orh_config cfg;
	json_error_t jerr;
	json_t *spec = json_loads(spec_text, 0, &jerr);
	struct orh_decide_in in = {
		.cfg = &cfg,
		.sysroot = root,
		.scan = ORH_GIDS_PLAN,
		.spec = spec,
	};
	int r;

	cr_assert_not_null(spec, "%s: %s", spec_text, jerr.text);
	orh_config_defaults(&cfg);
	cfg.activation = activation;
	cfg.request_scope = scope;
	r = orh_decide(&in, d, err);
	orh_config_free(&cfg);
	json_decref(spec);
	return r;
}

static const char *hca(const struct orh_decision *d)
{
	return d->have_plan ? plan_value(&d->plan, "NCCL_IB_HCA") : NULL;
}

/* What each container gets: the activation and NCCL_IB_HCA (NULL: left unchanged). */
struct outcome {
	enum orh_activation_result act;
	const char *hca;
};

#define SKIP { ORH_ACT_SKIP, NULL }
#define SERVED(act, h) { act, h }

static const struct {
	enum orh_activation activation;
	const char *name;
	struct outcome node[N_REQUESTS], allocated[N_REQUESTS];
} matrix[] = {
	{ ORH_ACTIVATE_ALWAYS, "always",
	  .node = { SERVED(ORH_ACT_DEFAULT, ALL_IB), SERVED(ORH_ACT_REQUESTED, ALL_IB),
		    SERVED(ORH_ACT_REQUESTED, ALL_IB), SERVED(ORH_ACT_DEFAULT, HELD_IB) },
	  .allocated = { SKIP, SKIP, SKIP, SERVED(ORH_ACT_DEFAULT, HELD_IB) } },
	{ ORH_ACTIVATE_ANNOTATION, "annotation",
	  .node = { SKIP, SERVED(ORH_ACT_REQUESTED, ALL_IB), SERVED(ORH_ACT_REQUESTED, ALL_IB),
		    SKIP },
	  .allocated = { SKIP, SKIP, SKIP, SKIP } },
	{ ORH_ACTIVATE_DEVICES, "devices",
	  .node = { SKIP, SERVED(ORH_ACT_REQUESTED, ALL_IB), SERVED(ORH_ACT_REQUESTED, ALL_IB),
		    SERVED(ORH_ACT_DEFAULT, HELD_IB) },
	  .allocated = { SKIP, SKIP, SKIP, SERVED(ORH_ACT_DEFAULT, HELD_IB) } },
};

/* One cell of the matrix: the decision for request q under matrix[m] and scope. */
static void check_cell(size_t m, enum orh_request_scope scope, int q)
{
	bool allocated = scope == ORH_SCOPE_ALLOCATED;
	const struct outcome *want = allocated ? &matrix[m].allocated[q] : &matrix[m].node[q];
	const char *where = allocated ? "allocated" : "node";
	struct orh_decision d;
	struct orh_err err = { 0 };
	const char *got = NULL;

	cr_assert_eq(decide(matrix[m].activation, scope, specs[q], &d, &err), 0, "%s", err.msg);
	got = hca(&d);
	cr_assert_eq(d.act, want->act, "activation = %s, request_scope = %s, %s: act %d, not %d "
		     "(%s)", matrix[m].name, where, request_names[q], d.act, want->act, d.why);
	if (want->hca)
		cr_assert(got && !strcmp(got, want->hca), "activation = %s, request_scope = %s, "
			  "%s: NCCL_IB_HCA %s, not %s", matrix[m].name, where, request_names[q],
			  got ? got : "(none)", want->hca);
	else
		cr_assert_not(d.have_plan, "activation = %s, request_scope = %s, %s: the node "
			      "was read", matrix[m].name, where, request_names[q]);
	orh_decision_free(&d);
}

Test(scope, every_activation_scope_and_request)
{
	for (size_t m = 0; m < ORH_ARRAY_SIZE(matrix); m++)
		for (int q = 0; q < N_REQUESTS; q++) {
			check_cell(m, ORH_SCOPE_NODE, q);
			check_cell(m, ORH_SCOPE_ALLOCATED, q);
		}
}

/* Held and asked for: the request may pick a preset, never widen the devices. */
Test(scope, a_request_with_devices_held_picks_a_preset_and_keeps_to_them)
{
	static const char *const spec =
		"{\"process\":{\"env\":[\"PATH=/bin\"]},\"linux\":{\"devices\":[" UVERBS2 "]},"
		"\"annotations\":{\"oci-rdma-hook/enable\":\"true\","
		"\"oci-rdma-hook/preset\":\"none\"}}";

	for (int a = ORH_ACTIVATE_ALWAYS; a <= ORH_ACTIVATE_DEVICES; a++) {
		struct orh_decision d;
		struct orh_err err = { 0 };

		cr_assert_eq(decide(a, ORH_SCOPE_ALLOCATED, spec, &d, &err), 0, "%s", err.msg);
		cr_assert_eq(d.act, ORH_ACT_REQUESTED, "activation %d: %s", a, d.why);
		cr_assert_str_eq(hca(&d), HELD_IB, "activation %d", a);
		cr_assert_eq(d.plan.preset, ORH_PRESET_NONE, "activation %d", a);
		cr_assert_eq(d.plan.n_nodes, 2, "uverbs2 and rdma_cm, no other HCA's node");
		cr_assert_eq(d.plan.nodes[0].minor, 194);
		orh_decision_free(&d);
	}
}

/* The opt-out wins whatever was allocated. */
Test(scope, an_opt_out_wins_over_devices_held)
{
	static const char *const spec =
		"{\"linux\":{\"devices\":[" UVERBS2 "]},"
		"\"annotations\":{\"oci-rdma-hook/enable\":\"false\"}}";
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(ORH_ACTIVATE_ALWAYS, ORH_SCOPE_ALLOCATED, spec, &d, &err), 0);
	cr_assert_eq(d.act, ORH_ACT_SKIP);
	cr_assert(strstr(d.why, "opted out"), "%s", d.why);
	orh_decision_free(&d);
}

/* Why a container was not served, and the warning an asking one gets. */
Test(scope, why_not_served)
{
	static const struct {
		enum orh_activation activation;
		const char *spec, *why, *warning;
	} cases[] = {
		{ ORH_ACTIVATE_DEVICES, "{" ASKS "}",
		  "the container asked (oci-rdma-hook/enable=true), but request_scope = allocated "
		  "and it holds no RDMA device node",
		  "annotation 'oci-rdma-hook/enable=true' not served: request_scope = allocated" },
		{ ORH_ACTIVATE_ANNOTATION,
		  "{\"process\":{\"env\":[\"OCI_RDMA_HOOK_ENABLE=true\"]}}",
		  "the container asked (OCI_RDMA_HOOK_ENABLE=true in process.env), but "
		  "request_scope = allocated and it holds no RDMA device node",
		  "process.env entry 'OCI_RDMA_HOOK_ENABLE=true' not served" },
		{ ORH_ACTIVATE_ALWAYS, "{}",
		  "activation = always, but request_scope = allocated and the container holds no "
		  "RDMA device node", NULL },
		/* umad and issm are management access, not an HCA: not an allocation here */
		{ ORH_ACTIVATE_DEVICES, "{\"linux\":{\"devices\":[" UMAD2 "]}}",
		  "activation = devices, but request_scope = allocated and the container holds no "
		  "uverbs node (umad and issm nodes are no HCA)", NULL },
		{ ORH_ACTIVATE_DEVICES, "{\"linux\":{\"devices\":[" UMAD2 "]}," ASKS "}",
		  "but request_scope = allocated and it holds no uverbs node", "not served" },
		/* rule 9 needs no RDMA device; under allocated it does not apply */
		{ ORH_ACTIVATE_DEVICES,
		  "{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=2,3\"]}," ASKS "}",
		  "it holds no RDMA device node (GPUs alone give no NIC: rule 9 does not apply)",
		  "not served" },
		/* activation itself leaves these out: said as before */
		{ ORH_ACTIVATE_DEVICES, "{}",
		  "activation = devices, and the container holds no RDMA device node", NULL },
		{ ORH_ACTIVATE_ANNOTATION, "{\"linux\":{\"devices\":[" UVERBS2 "]}}",
		  "activation = annotation, and the container did not ask", NULL },
	};

	for (size_t i = 0; i < ORH_ARRAY_SIZE(cases); i++) {
		struct orh_decision d;
		struct orh_err err = { 0 };

		cr_assert_eq(decide(cases[i].activation, ORH_SCOPE_ALLOCATED, cases[i].spec, &d,
				    &err), 0, "case %zu: %s", i, err.msg);
		cr_assert_eq(d.act, ORH_ACT_SKIP, "case %zu", i);
		cr_assert(strstr(d.why, cases[i].why), "case %zu: '%s'", i, d.why);
		if (cases[i].warning)
			cr_assert(strv_mentions(&d.warnings, cases[i].warning),
				  "case %zu: no warning '%s'", i, cases[i].warning);
		else
			cr_assert_eq(d.warnings.n, 0, "case %zu: %s", i,
				     d.warnings.n ? d.warnings.v[0] : "");
		orh_decision_free(&d);
	}
}

/* request_scope = node: a GPU subset gets the NICs near it (rule 9), and a container
 * holding only a umad node is served with every HCA, as before the key existed. */
Test(scope, node_scope_keeps_rule_9_and_umad_alone)
{
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(ORH_ACTIVATE_DEVICES, ORH_SCOPE_NODE,
			    "{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=2,3\"]}," ASKS "}", &d,
			    &err), 0, "%s", err.msg);
	cr_assert_str_eq(hca(&d), "=mlx5_2:1,mlx5_3:1", "%s", d.why);
	orh_decision_free(&d);
	cr_assert_eq(decide(ORH_ACTIVATE_DEVICES, ORH_SCOPE_NODE,
			    "{\"linux\":{\"devices\":[" UMAD2 "]}}", &d, &err), 0, "%s", err.msg);
	cr_assert_str_eq(hca(&d), ALL_IB, "%s", d.why);
	orh_decision_free(&d);
}

/* A DRA claim's NIC: the driver's CDI spec names the HCA's uverbs node, which containerd's
 * CRI plugin puts into linux.devices (and the device cgroup) before the NRI plugin or the
 * runtime sees the spec, with the claim's KEP-5304 metadata file mounted. It counts as the
 * container's allocation, as a device plugin's node does: matched by major:minor (here
 * mlx5_2's, at another path in the container), the mount and the annotations not read. A
 * GPU the claim also holds (a CDI /dev/nvidia2) does not widen it (rule 8, not rule 9). */
Test(scope, a_cdi_device_of_a_dra_claim_is_the_allocation)
{
#define DRA_SPEC(extra_dev)                                                                   \
	"{\"process\":{\"env\":[\"PATH=/bin\"]},"                                             \
	"\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","              \
	"\"io.kubernetes.cri.container-name\":\"work\"},"                                    \
	"\"mounts\":[{\"destination\":\"/var/run/kubernetes.io/dra-device-attributes/"        \
	"resourceclaimtemplates/rdma/nic/rdma.orh.test-metadata.json\",\"type\":\"bind\","    \
	"\"source\":\"/var/lib/kubelet/plugins/rdma.orh.test/metadata/u/nic.json\","          \
	"\"options\":[\"ro\",\"bind\"]}],"                                                    \
	"\"linux\":{\"devices\":[{\"path\":\"/dev/infiniband/uverbs0\",\"type\":\"c\","       \
	"\"major\":231,\"minor\":194,\"fileMode\":8630,\"uid\":0,\"gid\":0}" extra_dev "],"   \
	"\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"},"                   \
	"{\"allow\":true,\"type\":\"c\",\"major\":231,\"minor\":194,\"access\":\"rw\"}]}}}"
	static const char *const specs_dra[] = {
		DRA_SPEC(""),
		DRA_SPEC(",{\"path\":\"/dev/nvidia2\",\"type\":\"c\",\"major\":195,\"minor\":2}"),
	};
#undef DRA_SPEC

	for (size_t i = 0; i < ORH_ARRAY_SIZE(specs_dra); i++)
		for (int a = ORH_ACTIVATE_ALWAYS; a <= ORH_ACTIVATE_DEVICES; a++) {
			struct orh_decision d;
			struct orh_err err = { 0 };
			bool served = a != ORH_ACTIVATE_ANNOTATION;

			cr_assert_eq(decide(a, ORH_SCOPE_ALLOCATED, specs_dra[i], &d, &err), 0,
				     "spec %zu, activation %d: %s", i, a, err.msg);
			cr_assert_eq(d.act, served ? ORH_ACT_DEFAULT : ORH_ACT_SKIP,
				     "spec %zu, activation %d: %s", i, a, d.why);
			if (served) {
				cr_assert_str_eq(hca(&d), HELD_IB, "spec %zu, activation %d", i, a);
				cr_assert_eq(d.plan.n_nodes, 2, "spec %zu: the held node and rdma_cm", i);
			}
			orh_decision_free(&d);
		}
}
