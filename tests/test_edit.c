/* SPDX-License-Identifier: Apache-2.0 */
/*
 * orh_spec_serve (src/cmd/serve.c), the spec edit of precreate and the runtime shim, on
 * the sample RoCE node read through its sysroot (tests/nodes/seed001-roce.json: uverbs1..8
 * = 231:193..200 the RoCE ports', rdma_cm 10:58): what a served spec gets, a spec left
 * alone byte for byte, a refused request, the container's network namespace, and a second
 * edit that changes nothing. No root needed: the memlock asked for is what this process
 * could give. tests/spec-cli.sh runs the commands themselves; test_spec.c the edit of a
 * given plan (orh_spec_apply_plan).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "node_fixture.h"
#include "orh/cmd/commands.h"
#include "orh/cmd/serve.h"
#include "orh/base/sandbox.h"
#include "orh/apply/spec.h"
#include "hook_check.h"
#include "plan_check.h"

static char root[256];

static void make_node(void)
{
	fixture_make_node(root, sizeof(root), "orh-edit", "seed001-roce");
}

static void cleanup(void)
{
	fixture_remove_node(root);
}

TestSuite(edit, .init = make_node, .fini = cleanup);

#define CONF "/etc/orh-test/node.conf"
/* a spec as podman proposes it: the user's NCCL_IB_HCA, a deny-all device rule */
#define SPEC(annotations, extra)                                                          \
	"{\"ociVersion\":\"1.0.2\",\"process\":{\"args\":[\"sh\"],"                         \
	"\"env\":[\"PATH=/bin\",\"NCCL_IB_HCA=mine\"],\"capabilities\":{"                 \
	"\"bounding\":[\"CAP_CHOWN\"],\"effective\":[\"CAP_CHOWN\"],"                      \
	"\"permitted\":[\"CAP_CHOWN\"]}},\"linux\":{\"resources\":{\"devices\":[{"        \
	"\"allow\":false,\"access\":\"rwm\"}]}" extra "},\"annotations\":{" annotations "}}"

static void ctx_init(struct orh_ctx *ctx, enum orh_activation activation, const char *sysroot)
{
	memset(ctx, 0, sizeof(*ctx));
	orh_config_defaults(&ctx->cfg);
	ctx->cfg.activation = activation;
	ctx->cfg.memlock = 65536;
	ctx->sysroot = ctx->sysroot_opt = sysroot;
	ctx->config_path = CONF;
	ctx->config_explicit = true;
}

static void ctx_fini(struct orh_ctx *ctx)
{
	orh_config_free(&ctx->cfg);
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	cr_assert_not_null(j, "%s: %s", text, jerr.text);
	return j;
}

/* The memlock the edit may ask for: 64 KiB, or this process's hard limit when lower and
 * not raisable here */
static uint64_t memlock_want(void)
{
	struct rlimit rl;

	cr_assert_eq(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	if (orh_can_raise_hard_rlimits() || rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= 65536)
		return 65536;
	return rl.rlim_max ? rl.rlim_max : 1;
}

/* Does the array hold an object with these members (type "c" device or allow rule)? */
static bool has_dev(const json_t *arr, const char *path, unsigned major, unsigned minor)
{
	size_t i;
	const json_t *e;

	json_array_foreach(arr, i, e) {
		const char *p = json_string_value(json_object_get(e, "path"));

		if ((!path || (p && !strcmp(p, path))) &&
		    json_integer_value(json_object_get(e, "major")) == major &&
		    json_integer_value(json_object_get(e, "minor")) == minor)
			return true;
	}
	return false;
}

/* The last hook of `stage` in spec runs this binary's `what` with --config and --sysroot */
#define assert_self_hook(spec, stage, what) check_self_hook(spec, stage, what, CONF, root)

static void assert_memlock(const json_t *spec, uint64_t want)
{
	const json_t *rl = json_object_get(json_object_get(spec, "process"), "rlimits");
	const json_t *e = json_array_get(rl, 0);
	uint64_t soft = 0, hard = 0;

	cr_assert_eq(json_array_size(rl), 1);
	cr_assert_str_eq(json_string_value(json_object_get(e, "type")), "RLIMIT_MEMLOCK");
	cr_assert(orh_json_get_u64(json_object_get(e, "soft"), &soft));
	cr_assert(orh_json_get_u64(json_object_get(e, "hard"), &hard));
	cr_assert_eq(soft, want);
	cr_assert_eq(hard, want);
}

Test(edit, a_served_spec_gets_the_plan)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_err err = { 0 };
	json_t *spec = parse(SPEC("", ""));
	json_t *env = parse("[\"PATH=/bin\",\"NCCL_IB_HCA=mine\"]");
	const json_t *linux_ = json_object_get(spec, "linux");
	const json_t *devs, *rules;

	ctx_init(&ctx, ORH_ACTIVATE_ALWAYS, root);
	cr_assert_eq(orh_spec_serve(&ctx, spec, 0, &res, &err), 0, "%s", err.msg);
	devs = json_object_get(linux_, "devices");
	rules = json_object_get(json_object_get(linux_, "resources"), "devices");
	cr_assert_eq(res.activation, ORH_ACT_DEFAULT);
	cr_assert_gt(res.edits, 0);
	cr_assert_eq(res.changes.devices, 9, "rdma_cm and uverbs1..8");
	cr_assert_eq(res.changes.allow_rules, 9);
	cr_assert_eq(res.changes.hooks, 2, "nccl-conf and poststop");
	cr_assert(res.changes.memlock);
	cr_assert_eq(res.preset, ORH_PRESET_ROCE);
	cr_assert(has_dev(devs, "/dev/infiniband/uverbs1", 231, 193));
	cr_assert(has_dev(devs, "/dev/infiniband/uverbs8", 231, 200));
	cr_assert(has_dev(devs, "/dev/infiniband/rdma_cm", 10, 58));
	cr_assert_not(has_dev(devs, "/dev/infiniband/uverbs0", 231, 192), "mlx5_0 is left out");
	cr_assert(has_dev(rules, NULL, 231, 193));
	cr_assert_eq(json_is_false(json_object_get(json_array_get(rules, 0), "allow")), true,
		     "the deny-all rule stays first");
	assert_memlock(spec, memlock_want());
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	assert_self_hook(spec, "poststop", "poststop");
	/* the plan's settings go to /etc/nccl.conf (the hook), never into PID 1's env */
	cr_assert(json_equal(json_object_get(json_object_get(spec, "process"), "env"), env));
	orh_edit_result_free(&res);
	json_decref(env);
	json_decref(spec);
	ctx_fini(&ctx);
}

Test(edit, a_second_edit_changes_nothing)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_err err = { 0 };
	json_t *spec = parse(SPEC("", ""));
	json_t *once;

	ctx_init(&ctx, ORH_ACTIVATE_ALWAYS, root);
	cr_assert_eq(orh_spec_serve(&ctx, spec, 0, &res, &err), 0, "%s", err.msg);
	cr_assert_gt(res.edits, 0);
	orh_edit_result_free(&res);
	once = json_deep_copy(spec);
	cr_assert_eq(orh_spec_serve(&ctx, spec, 0, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.edits, 0, "the edit of an edited spec added %d things", res.edits);
	cr_assert(json_equal(spec, once));
	orh_edit_result_free(&res);
	json_decref(once);
	json_decref(spec);
	ctx_fini(&ctx);
}

/* orh_spec_serve leaves text's spec as it was; its activation and result code */
static int left_alone(struct orh_ctx *ctx, const char *text, struct orh_edit_result *res,
		      struct orh_err *err)
{
	json_t *spec = parse(text);
	json_t *before = json_deep_copy(spec);
	int r = orh_spec_serve(ctx, spec, 0, res, err);

	cr_assert_eq(res->edits, 0);
	cr_assert(json_equal(spec, before), "%s: the spec was changed", text);
	json_decref(before);
	json_decref(spec);
	return r;
}

Test(edit, a_spec_not_served_is_left_as_it_was)
{
	char nordma[256];
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_err err = { 0 };

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, root);
	cr_assert_eq(left_alone(&ctx, SPEC("", ""), &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.activation, ORH_ACT_SKIP, "not asked, under activation = annotation");
	orh_edit_result_free(&res);

	ctx_fini(&ctx);
	ctx_init(&ctx, ORH_ACTIVATE_ALWAYS, root);
	cr_assert_eq(left_alone(&ctx, SPEC("\"oci-rdma-hook/enable\":\"false\"", ""), &res, &err),
		     0, "%s", err.msg);
	cr_assert_eq(res.activation, ORH_ACT_SKIP, "opted out");
	cr_assert_not(res.asked);
	orh_edit_result_free(&res);

	/* activated, on a node with nothing to give */
	fixture_make_node(nordma, sizeof(nordma), "orh-edit-nordma", "nordma");
	ctx_fini(&ctx);
	ctx_init(&ctx, ORH_ACTIVATE_ALWAYS, nordma);
	cr_assert_eq(left_alone(&ctx, SPEC("", ""), &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.activation, ORH_ACT_DEFAULT);
	orh_edit_result_free(&res);
	fixture_remove_node(nordma);
	ctx_fini(&ctx);
}

Test(edit, a_bad_request_is_an_error_that_fails_only_under_on_error_fail)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_err err = { 0 };

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, root);
	cr_assert_lt(left_alone(&ctx, SPEC("\"oci-rdma-hook/enable\":\"yes\"", ""), &res, &err), 0);
	cr_assert(strstr(err.msg, "oci-rdma-hook/enable"), "%s", err.msg);
	cr_assert(res.asked, "a bad value is a request");
	cr_assert_not(orh_edit_must_fail(&ctx.cfg, &res), "on_error = warn");
	ctx.cfg.on_error = ORH_ON_ERROR_FAIL;
	cr_assert(orh_edit_must_fail(&ctx.cfg, &res));
	orh_edit_result_free(&res);
	ctx_fini(&ctx);
}

Test(edit, the_containers_network_namespace)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_err err = { 0 };
	json_t *spec = parse(SPEC("", ",\"namespaces\":[{\"type\":\"network\","
				       "\"path\":\"/nonexistent/orh-netns\"}]"));

	/* one it cannot read (the NRI plugin without the host's PID namespace: another's
	 * /proc/PID/ns/net), where the nccl-conf stage reads it later: the spec is served,
	 * the stage registered, and neither the namespace nor NCCL_SOCKET_IFNAME is said to be
	 * missing (the stage decides it in the namespace the container runs in) */
	ctx_init(&ctx, ORH_ACTIVATE_ALWAYS, root);
	cr_assert_eq(orh_spec_serve(&ctx, spec, 0, &res, &err), 0, "%s", err.msg);
	cr_assert_gt(res.edits, 0);
	cr_assert_eq(res.changes.devices, 9);
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert_not(strv_mentions(&res.warnings, "not read"));
	cr_assert_not(strv_mentions(&res.warnings, "NCCL_SOCKET_IFNAME"));
	orh_edit_result_free(&res);
	json_decref(spec);

	/* where no stage will run (the NRI plugin without hooks): said, and still served */
	spec = parse(SPEC("", ",\"namespaces\":[{\"type\":\"network\","
			      "\"path\":\"/nonexistent/orh-netns\"}]"));
	cr_assert_eq(orh_spec_serve(&ctx, spec, ORH_SERVE_CONF | ORH_SERVE_NO_POSTSTOP, &res,
				    &err), 0, "%s", err.msg);
	cr_assert_eq(res.changes.devices, 9);
	cr_assert(strv_mentions(&res.warnings, "network namespace '/nonexistent/orh-netns' not read"));
	orh_edit_result_free(&res);
	json_decref(spec);

	/* two network entries: the spec is refused, and left as it was */
	cr_assert_lt(left_alone(&ctx, SPEC("", ",\"namespaces\":[{\"type\":\"network\"},"
					       "{\"type\":\"network\"}]"), &res, &err), 0);
	cr_assert(strstr(err.msg, "linux.namespaces"), "%s", err.msg);
	orh_edit_result_free(&res);
	ctx_fini(&ctx);
}

Test(edit, what_the_spec_holds_already_is_kept)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_err err = { 0 };
	json_t *spec = parse(SPEC("", ",\"devices\":[{\"path\":\"/dev/infiniband/uverbs3\","
				       "\"type\":\"c\",\"major\":231,\"minor\":195}]"));
	json_t *process = json_object_get(spec, "process");
	json_t *user = parse("[{\"type\":\"RLIMIT_MEMLOCK\",\"soft\":4096,\"hard\":8192}]");

	json_object_set_new(process, "rlimits", json_deep_copy(user));
	ctx_init(&ctx, ORH_ACTIVATE_ALWAYS, root);
	ctx.cfg.add_ipc_lock = true;
	cr_assert_eq(orh_spec_serve(&ctx, spec, 0, &res, &err), 0, "%s", err.msg);
	/* rule 8: it holds uverbs3, so mlx5_3 alone: rdma_cm is the one node added */
	cr_assert_eq(res.changes.devices, 1);
	cr_assert(has_dev(json_object_get(json_object_get(spec, "linux"), "devices"),
			  "/dev/infiniband/rdma_cm", 10, 58));
	cr_assert_not(has_dev(json_object_get(json_object_get(spec, "linux"), "devices"),
			      "/dev/infiniband/uverbs1", 231, 193));
	/* the user's RLIMIT_MEMLOCK wins */
	cr_assert_not(res.changes.memlock);
	cr_assert(json_equal(json_object_get(process, "rlimits"), user));
	cr_assert_eq(res.changes.caps, 3, "CAP_IPC_LOCK in bounding, effective, permitted");
	orh_edit_result_free(&res);
	json_decref(user);
	json_decref(spec);
	ctx_fini(&ctx);
}
