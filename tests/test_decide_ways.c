/* SPDX-License-Identifier: Apache-2.0 */
/*
 * orh_decide as the ways in call it (src/decide/decide.c), on the sample RoCE node read
 * through its sysroot (tests/nodes/seed001-roce.json: mlx5_0 the front-end NIC, mlx5_1..8
 * RoCE ports with GID index 3, uverbsN = 231:192+N, rdma_cm 10:58, default route eth0):
 * a container on the host network (no spec), a CDI device (the request), the container's
 * own facts read once it is activated and never before, each failing step named, the OCI
 * state's annotations, a pod sandbox, the memlock rules and a node without RDMA.
 * tests/test_decide.c decides on nodes built in memory (orh_decide_node); test_scope.c
 * covers activation x request_scope.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "node_fixture.h"
#include "orh/decide/decide.h"
#include "plan_check.h"

static char root[256];

static void make_node(void)
{
	fixture_make_node(root, sizeof(root), "orh-decide", "seed001-roce");
}

static void cleanup(void)
{
	fixture_remove_node(root);
}

TestSuite(decide_ways, .init = make_node, .fini = cleanup);

#define ALL_PORTS "=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1"
#define PLAIN "{\"process\":{\"env\":[\"PATH=/bin\"]}}"

/* The container facts callback: counts its calls, sets what it is given, or fails. */
struct facts_cb {
	int calls;
	const char *default_if; /* the container network's default route interface */
	int fail;               /* -errno to return */
};

static int container_facts(void *arg, struct orh_container_facts *facts, struct orh_err *err)
{
	struct facts_cb *cb = arg;

	cb->calls++;
	if (cb->fail)
		return orh_fail(err, -cb->fail, "reading the container's network: test failure");
	facts->own_netns = true;
	snprintf(facts->netns_default_if, sizeof(facts->netns_default_if), "%s", cb->default_if);
	return 0;
}

struct way {
	enum orh_activation activation;
	const char *sysroot;        /* NULL: the sample node */
	const char *spec;           /* JSON text, or NULL: no spec */
	const char *state_annotations;
	bool requested;
	struct facts_cb *cb;
	uint64_t memlock_ceiling;
	uint64_t memlock;           /* the config's; 0: the default (unlimited) */
};

/* orh_decide for w; *d to be freed */
static int decide(const struct way *w, struct orh_decision *d, struct orh_err *err)
{
	struct orh_config cfg;
	json_error_t jerr;
	json_t *spec = w->spec ? json_loads(w->spec, 0, &jerr) : NULL;
	json_t *state = w->state_annotations ? json_loads(w->state_annotations, 0, &jerr) : NULL;
	struct orh_decide_in in = {
		.cfg = &cfg,
		.sysroot = w->sysroot ? w->sysroot : root,
		.scan = ORH_GIDS_PLAN,
		.spec = spec,
		.state_annotations = state,
		.requested = w->requested,
		.container_facts = w->cb ? container_facts : NULL,
		.arg = w->cb,
		.memlock_ceiling = w->memlock_ceiling,
	};
	int r;

	cr_assert(!w->spec || spec, "%s: %s", w->spec, jerr.text);
	cr_assert(!w->state_annotations || state, "%s: %s", w->state_annotations, jerr.text);
	orh_config_defaults(&cfg);
	cfg.activation = w->activation;
	if (w->memlock)
		cfg.memlock = w->memlock;
	r = orh_decide(&in, d, err);
	orh_config_free(&cfg);
	json_decref(spec);
	json_decref(state);
	return r;
}

/* A served container's plan: the HCA list, the node's GID index, and `nodes` device nodes */
static void assert_served(const struct orh_decision *d, const char *hca, size_t nodes)
{
	cr_assert(d->have_plan, "served, but the node was not read (%s)", d->why);
	cr_assert_not(orh_plan_is_empty(&d->plan));
	cr_assert_str_eq(plan_value(&d->plan, "NCCL_IB_HCA"), hca);
	cr_assert_str_eq(plan_value(&d->plan, "NCCL_IB_GID_INDEX"), "3");
	cr_assert_eq(d->plan.n_nodes, nodes);
}

Test(decide_ways, host_network_without_a_spec)
{
	struct way w = { .activation = ORH_ACTIVATE_ANNOTATION };
	struct orh_decision d;
	struct orh_err err = { 0 };

	/* env, detect and cdi: no spec, whatever activation says */
	cr_assert_eq(decide(&w, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(d.act, ORH_ACT_DEFAULT);
	cr_assert_str_eq(d.why, "a container on the host network");
	cr_assert_eq(d.activation.reason, ORH_WHY_HOST);
	cr_assert_not(d.asked);
	assert_served(&d, ALL_PORTS, 9);
	cr_assert_str_eq(plan_value(&d.plan, "NCCL_SOCKET_IFNAME"), "=eth0");
	orh_decision_free(&d);
}

Test(decide_ways, a_cdi_device_is_the_request)
{
	struct way w = { .activation = ORH_ACTIVATE_ANNOTATION, .spec = PLAIN, .requested = true };
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(&w, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(d.act, ORH_ACT_REQUESTED);
	cr_assert_str_eq(d.why, "the container was given a device of the CDI spec");
	cr_assert_eq(d.activation.reason, ORH_WHY_CDI);
	assert_served(&d, ALL_PORTS, 9);
	orh_decision_free(&d);
}

Test(decide_ways, not_activated_reads_neither_the_container_nor_the_node)
{
	struct facts_cb cb = { .default_if = "eth9" };
	/* a sysroot that does not exist: discovery would fail */
	struct way w = { .activation = ORH_ACTIVATE_ANNOTATION, .sysroot = "/nonexistent/orh",
			 .spec = PLAIN, .cb = &cb };
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(&w, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(d.act, ORH_ACT_SKIP);
	cr_assert_str_eq(d.why, "activation = annotation, and the container did not ask");
	cr_assert_eq(d.activation.reason, ORH_WHY_NOT_ASKED);
	cr_assert_eq(cb.calls, 0, "the container's facts were read for a container left alone");
	cr_assert_not(d.have_plan);
	orh_decision_free(&d);
}

Test(decide_ways, the_containers_facts_are_read_once_before_the_plan)
{
	struct facts_cb cb = { .default_if = "net7" };
	struct way w = { .activation = ORH_ACTIVATE_ALWAYS, .spec = PLAIN, .cb = &cb };
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(&w, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(cb.calls, 1);
	cr_assert_eq(d.act, ORH_ACT_DEFAULT);
	cr_assert_str_eq(d.why, "activation = always");
	assert_served(&d, ALL_PORTS, 9);
	/* rule 5 took the container network's interface the callback gave, not the node's */
	cr_assert_str_eq(plan_value(&d.plan, "NCCL_SOCKET_IFNAME"), "=net7");
	orh_decision_free(&d);
}

Test(decide_ways, each_failing_step_is_named)
{
	struct facts_cb cb = { .fail = -EIO };
	struct way callback = { .activation = ORH_ACTIVATE_ALWAYS, .spec = PLAIN, .cb = &cb };
	struct way request = { .activation = ORH_ACTIVATE_ANNOTATION,
			       .spec = "{\"process\":{\"env\":[]},"
				       "\"annotations\":{\"oci-rdma-hook/enable\":\"yes\"}}" };
	struct way discovery = { .activation = ORH_ACTIVATE_ALWAYS, .spec = PLAIN,
				 .sysroot = "/nonexistent/orh" };
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(&callback, &d, &err), -EIO);
	cr_assert_str_eq(d.step, "container");
	cr_assert(strstr(err.msg, "test failure"), "%s", err.msg);
	cr_assert_not(d.have_plan);
	orh_decision_free(&d);

	err = (struct orh_err){ 0 };
	cr_assert_lt(decide(&request, &d, &err), 0);
	cr_assert_str_eq(d.step, "the request");
	cr_assert_str_eq(d.why, "a bad request");
	cr_assert_eq(d.activation.reason, ORH_WHY_BAD_REQUEST);
	cr_assert_eq(d.act, ORH_ACT_REQUESTED, "a bad value counts as asking (on_error = fail)");
	cr_assert(strstr(err.msg, "oci-rdma-hook/enable"), "%s", err.msg);
	orh_decision_free(&d);

	err = (struct orh_err){ 0 };
	cr_assert_lt(decide(&discovery, &d, &err), 0);
	cr_assert_str_eq(d.step, "discovery");
	cr_assert(strstr(err.msg, "/nonexistent/orh"), "the error names the sysroot: %s", err.msg);
	orh_decision_free(&d);
}

Test(decide_ways, the_states_annotations_stand_in_for_the_specs)
{
	struct way none = { .activation = ORH_ACTIVATE_ANNOTATION, .spec = PLAIN,
			    .state_annotations = "{\"oci-rdma-hook/enable\":\"true\"}" };
	/* the spec's own annotations, when it has them, are the ones looked at */
	struct way own = { .activation = ORH_ACTIVATE_ANNOTATION,
			   .spec = "{\"process\":{\"env\":[]},\"annotations\":{\"x\":\"y\"}}",
			   .state_annotations = "{\"oci-rdma-hook/enable\":\"true\"}" };
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(&none, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(d.act, ORH_ACT_REQUESTED);
	cr_assert(d.asked);
	cr_assert_str_eq(d.why, "the container asked (oci-rdma-hook/enable=true)");
	assert_served(&d, ALL_PORTS, 9);
	orh_decision_free(&d);

	cr_assert_eq(decide(&own, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(d.act, ORH_ACT_SKIP);
	cr_assert_not(d.have_plan);
	orh_decision_free(&d);
}

Test(decide_ways, a_pod_sandbox_is_never_served)
{
	struct way w = {
		.activation = ORH_ACTIVATE_ALWAYS,
		.spec = "{\"process\":{\"env\":[]},\"annotations\":{"
			"\"io.kubernetes.cri.container-type\":\"sandbox\","
			"\"oci-rdma-hook/enable\":\"true\"}}",
	};
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(&w, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(d.act, ORH_ACT_SKIP);
	cr_assert_str_eq(d.why, "a Kubernetes pod sandbox: never served");
	cr_assert_eq(d.activation.reason, ORH_WHY_SANDBOX);
	cr_assert_not(d.have_plan);
	orh_decision_free(&d);
}

Test(decide_ways, the_users_memlock_wins_and_the_ceiling_holds)
{
	struct way user = {
		.activation = ORH_ACTIVATE_ALWAYS,
		.spec = "{\"process\":{\"env\":[],\"rlimits\":[{\"type\":\"RLIMIT_MEMLOCK\","
			"\"soft\":65536,\"hard\":65536}]}}",
	};
	struct way ceiling = { .activation = ORH_ACTIVATE_ALWAYS, .spec = PLAIN,
			       .memlock_ceiling = 1 << 20 };
	struct way below = { .activation = ORH_ACTIVATE_ALWAYS, .spec = PLAIN,
			     .memlock_ceiling = 1 << 20, .memlock = 512 << 10 };
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(&user, &d, &err), 0, "%s", err.msg);
	cr_assert(d.memlock.user);
	cr_assert_not(d.memlock.set, "the spec's RLIMIT_MEMLOCK is the user's: not replaced");
	assert_served(&d, ALL_PORTS, 9);
	orh_decision_free(&d);

	/* the default, unlimited, is more than the applier can give: its ceiling, and why */
	cr_assert_eq(decide(&ceiling, &d, &err), 0, "%s", err.msg);
	cr_assert_not(d.memlock.user);
	cr_assert(d.memlock.set);
	cr_assert_eq(d.memlock.limit, 1 << 20);
	cr_assert_eq(d.memlock.need, 1 << 20, "the check holds it to what it set");
	cr_assert(strv_mentions(&d.warnings, "RLIMIT_MEMLOCK lowered to the hard limit 1048576"));
	orh_decision_free(&d);

	/* under the ceiling: the config's, no warning */
	cr_assert_eq(decide(&below, &d, &err), 0, "%s", err.msg);
	cr_assert(d.memlock.set);
	cr_assert_eq(d.memlock.limit, 512 << 10);
	cr_assert_not(strv_mentions(&d.warnings, "RLIMIT_MEMLOCK lowered"));
	orh_decision_free(&d);
}

Test(decide_ways, a_container_holding_uverbs3_gets_its_port)
{
	struct way w = {
		.activation = ORH_ACTIVATE_ANNOTATION,
		.spec = "{\"process\":{\"env\":[\"OCI_RDMA_HOOK_ENABLE=true\"]},\"linux\":{"
			"\"devices\":[{\"path\":\"/dev/infiniband/uverbs3\",\"type\":\"c\","
			"\"major\":231,\"minor\":195}]}}",
	};
	struct orh_decision d;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(&w, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(d.act, ORH_ACT_REQUESTED);
	cr_assert_str_eq(d.why, "the container asked (OCI_RDMA_HOOK_ENABLE=true in process.env)");
	cr_assert_eq(d.activation.reason, ORH_WHY_ASKED);
	cr_assert(d.activation.by_env);
	/* rule 8: its own device's port, its node and rdma_cm */
	assert_served(&d, "=mlx5_3:1", 2);
	orh_decision_free(&d);
}

Test(decide_ways, a_node_without_rdma_gives_an_empty_plan)
{
	char nordma[256];
	struct way w = { .activation = ORH_ACTIVATE_ALWAYS, .sysroot = nordma, .spec = PLAIN };
	struct orh_decision d;
	struct orh_err err = { 0 };

	fixture_make_node(nordma, sizeof(nordma), "orh-decide-nordma", "nordma");
	cr_assert_eq(decide(&w, &d, &err), 0, "%s", err.msg);
	cr_assert_eq(d.act, ORH_ACT_DEFAULT);
	cr_assert(d.have_plan, "the node was read");
	cr_assert(orh_plan_is_empty(&d.plan), "nothing to give: the container is left unchanged");
	cr_assert_eq(d.plan.n_nodes, 0);
	cr_assert_null(plan_value(&d.plan, "NCCL_IB_HCA"));
	orh_decision_free(&d);
	fixture_remove_node(nordma);
}
