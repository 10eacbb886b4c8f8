/* SPDX-License-Identifier: Apache-2.0 */
/*
 * orh_nri_serve (src/cmd/nri_spec.c): a CreateContainer request, the spec edit every way
 * in makes, and the ContainerAdjustment that comes of it, on the sample nodes read through
 * their sysroot: seed001-roce (uverbs1..8 = 231:193..200 the RoCE ports', rdma_cm 10:58),
 * dgx-h100 (GPUs 2 and 3 near mlx5_2 and mlx5_3) and nordma. And orh_nri_diff() itself:
 * an edit that changed an entry cannot be an adjustment.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "node_fixture.h"
#include "orh/cmd/nri.h"

#define CONF "/etc/orh-test/node.conf"

/* the sample node of a test, made by the test (only the one it needs), removed after it */
static char node[256];

static const char *make_node(const char *name)
{
	fixture_make_node(node, sizeof(node), "orh-nri", name);
	return node;
}

static void cleanup(void)
{
	if (node[0])
		fixture_remove_node(node);
	node[0] = '\0';
}

TestSuite(nri_serve, .fini = cleanup);

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

static void kv_add(struct orh_nri_kvs *kvs, const char *k, const char *v)
{
	kvs->v = orh_xgrow(kvs->v, kvs->n, sizeof(*kvs->v));
	kvs->v[kvs->n].key = orh_xstrdup(k);
	kvs->v[kvs->n++].value = orh_xstrdup(v);
}

/* A request as a CRI runtime gives it: a pod, a container of it with PATH, in the pod's
 * network namespace (a path that does not exist here: a warning, not an error) */
static void req_init(struct orh_nri_create *req)
{
	memset(req, 0, sizeof(*req));
	req->pod.id = orh_xstrdup("pod1");
	req->pod.name = orh_xstrdup("trainer");
	req->pod.namespace = orh_xstrdup("ml");
	req->ctr.id = orh_xstrdup("ctr1");
	req->ctr.name = orh_xstrdup("main");
	orh_strv_push(&req->ctr.args, orh_xstrdup("sleep"));
	orh_strv_push(&req->ctr.env, orh_xstrdup("PATH=/bin"));
	kv_add(&req->ctr.annotations, "io.kubernetes.cri.container-type", "container");
	req->ctr.has_user = true;
}

static void add_device(struct orh_nri_create *req, const char *path, int64_t major,
		       int64_t minor)
{
	struct orh_nri_container *c = &req->ctr;

	c->devices = orh_xgrow(c->devices, c->n_devices, sizeof(*c->devices));
	memset(&c->devices[c->n_devices], 0, sizeof(*c->devices));
	c->devices[c->n_devices].path = orh_xstrdup(path);
	c->devices[c->n_devices].type = orh_xstrdup("c");
	c->devices[c->n_devices].major = major;
	c->devices[c->n_devices++].minor = minor;
}

static const struct orh_nri_device *dev_at(const struct orh_nri_adjust *a, int64_t major,
					   int64_t minor)
{
	for (size_t i = 0; i < a->n_devices; i++)
		if (a->devices[i].major == major && a->devices[i].minor == minor)
			return &a->devices[i];
	return NULL;
}

static size_t count_uverbs(const struct orh_nri_adjust *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->n_devices; i++)
		n += orh_startswith(a->devices[i].path, "/dev/infiniband/uverbs");
	return n;
}

/* The hook entry's last argument, the stage it runs */
static const char *stage(const struct orh_nri_hook *h)
{
	return h->args.n ? h->args.v[h->args.n - 1] : "";
}

struct served {
	struct orh_nri_adjust adj;
	struct orh_edit_result res;
	struct orh_err err;
	int r;
};

static void serve(struct orh_ctx *ctx, struct orh_nri_create *req, struct served *s)
{
	memset(s, 0, sizeof(*s));
	s->r = orh_nri_serve(ctx, req, &s->adj, &s->res, &s->err);
}

static void served_free(struct orh_ctx *ctx, struct orh_nri_create *req, struct served *s)
{
	orh_nri_adjust_free(&s->adj);
	orh_edit_result_free(&s->res);
	orh_nri_create_free(req);
	orh_config_free(&ctx->cfg);
}

/* The pod asked (its annotation): the RoCE ports' devices, rdma_cm, memlock, the
 * nccl-conf and poststop hooks; its NCCL settings in no environment entry */
Test(nri_serve, annotated_pod)
{
	struct orh_ctx ctx;
	struct orh_nri_create req;
	struct served s;

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, make_node("seed001-roce"));
	req_init(&req);
	kv_add(&req.pod.annotations, "oci-rdma-hook/enable", "true");
	serve(&ctx, &req, &s);
	cr_assert_eq(s.r, 0, "%s", s.err.msg);
	cr_assert_eq(count_uverbs(&s.adj), 8);
	for (int m = 193; m <= 200; m++)
		cr_assert_not_null(dev_at(&s.adj, 231, m), "uverbs 231:%d", m);
	cr_assert_not_null(dev_at(&s.adj, 10, 58));
	cr_assert_str_eq(dev_at(&s.adj, 10, 58)->path, "/dev/infiniband/rdma_cm");
	cr_assert_str_eq(dev_at(&s.adj, 10, 58)->type, "c");
	cr_assert_eq(s.adj.n_rules, 0, "a device added brings its own rule");
	cr_assert_eq(s.adj.n_rlimits, 1);
	cr_assert_str_eq(s.adj.rlimits[0].type, "RLIMIT_MEMLOCK");
	cr_assert(s.adj.rlimits[0].hard == 65536 && s.adj.rlimits[0].soft == 65536);
	cr_assert_eq(s.adj.hooks.n[1], 1); /* createRuntime */
	cr_assert_str_eq(stage(&s.adj.hooks.v[1][0]), "nccl-conf");
	cr_assert_eq(s.adj.hooks.n[5], 1); /* poststop */
	cr_assert_str_eq(stage(&s.adj.hooks.v[5][0]), "poststop");
	/* the stages decide again from the container's spec: the pod's request goes there */
	cr_assert_eq(s.adj.annotations.n, 1);
	cr_assert_str_eq(s.adj.annotations.v[0].key, "oci-rdma-hook/enable");
	cr_assert_str_eq(s.adj.annotations.v[0].value, "true");
	for (size_t i = 0; i < s.adj.env.n; i++)
		cr_assert_not(orh_startswith(s.adj.env.v[i].key, "NCCL_"), "%s",
			      s.adj.env.v[i].key);
	served_free(&ctx, &req, &s);
}

/* A device plugin gave it uverbs2 (231:194): under activation = devices it is served
 * with that port alone; uverbs2 is not added again, no other uverbs is */
Test(nri_serve, device_plugin_uverbs2)
{
	struct orh_ctx ctx;
	struct orh_nri_create req;
	struct served s;

	ctx_init(&ctx, ORH_ACTIVATE_DEVICES, make_node("seed001-roce"));
	req_init(&req);
	add_device(&req, "/dev/infiniband/uverbs2", 231, 194);
	serve(&ctx, &req, &s);
	cr_assert_eq(s.r, 0, "%s", s.err.msg);
	cr_assert_eq(count_uverbs(&s.adj), 0, "only the device it holds");
	cr_assert_not_null(dev_at(&s.adj, 10, 58), "rdma_cm");
	cr_assert_eq(s.adj.hooks.n[1], 1);
	cr_assert_eq(s.adj.n_rlimits, 1);
	served_free(&ctx, &req, &s);
}

/* GPUs 2 and 3 by NVIDIA_VISIBLE_DEVICES on the DGX-like node: the NICs under their
 * switch, mlx5_2 and mlx5_3 (uverbs2 and uverbs3) */
Test(nri_serve, gpu_env_gets_the_nics_near_its_gpus)
{
	struct orh_ctx ctx;
	struct orh_nri_create req;
	struct served s;

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, make_node("dgx-h100"));
	req_init(&req);
	kv_add(&req.ctr.annotations, "oci-rdma-hook/enable", "true");
	orh_strv_push(&req.ctr.env, orh_xstrdup("NVIDIA_VISIBLE_DEVICES=2,3"));
	serve(&ctx, &req, &s);
	cr_assert_eq(s.r, 0, "%s", s.err.msg);
	cr_assert_eq(count_uverbs(&s.adj), 2);
	cr_assert_eq(s.adj.annotations.n, 0, "its own annotation is in its spec already");
	for (size_t i = 0; i < s.adj.n_devices; i++)
		if (orh_startswith(s.adj.devices[i].path, "/dev/infiniband/uverbs"))
			cr_assert(!strcmp(s.adj.devices[i].path, "/dev/infiniband/uverbs2") ||
				  !strcmp(s.adj.devices[i].path, "/dev/infiniband/uverbs3"),
				  "%s", s.adj.devices[i].path);
	served_free(&ctx, &req, &s);
}

/* A container of another user is served the same: the devices and the memlock its
 * user needs (the runtime sets the rlimit, whoever runs in it) */
Test(nri_serve, non_root)
{
	struct orh_ctx ctx;
	struct orh_nri_create req;
	struct served s;

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, make_node("seed001-roce"));
	req_init(&req);
	req.ctr.uid = req.ctr.gid = 1000;
	kv_add(&req.pod.annotations, "oci-rdma-hook/enable", "true");
	serve(&ctx, &req, &s);
	cr_assert_eq(s.r, 0, "%s", s.err.msg);
	cr_assert_eq(count_uverbs(&s.adj), 8);
	cr_assert(s.adj.n_rlimits == 1 && s.adj.rlimits[0].soft == 65536);
	served_free(&ctx, &req, &s);
}

/* Asked nothing: no edit, an empty adjustment, the reason for the log */
Test(nri_serve, asked_nothing_gets_nothing)
{
	struct orh_ctx ctx;
	struct orh_nri_create req;
	struct served s;

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, make_node("seed001-roce"));
	req_init(&req);
	kv_add(&req.pod.annotations, "io.example/other", "true");
	serve(&ctx, &req, &s);
	cr_assert_eq(s.r, 0, "%s", s.err.msg);
	cr_assert(orh_nri_adjust_empty(&s.adj));
	cr_assert_eq(s.res.edits, 0);
	cr_assert(strstr(s.res.why, "did not ask"), "%s", s.res.why);
	served_free(&ctx, &req, &s);
}

/* The container's own annotation wins over its pod's */
Test(nri_serve, the_containers_annotation_wins)
{
	struct orh_ctx ctx;
	struct orh_nri_create req;
	struct served s;

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, make_node("seed001-roce"));
	req_init(&req);
	kv_add(&req.pod.annotations, "oci-rdma-hook/enable", "true");
	kv_add(&req.ctr.annotations, "oci-rdma-hook/enable", "false");
	serve(&ctx, &req, &s);
	cr_assert_eq(s.r, 0, "%s", s.err.msg);
	cr_assert(orh_nri_adjust_empty(&s.adj));
	served_free(&ctx, &req, &s);
}

/* on_error = fail: asked on a node with nothing to give is an error that refuses it; under
 * warn it is an error the driver turns into an empty answer */
Test(nri_serve, on_error_fail_refuses_one_that_asked)
{
	struct orh_ctx ctx;
	struct orh_nri_create req;
	struct served s;

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, make_node("nordma"));
	ctx.cfg.on_error = ORH_ON_ERROR_FAIL;
	req_init(&req);
	kv_add(&req.pod.annotations, "oci-rdma-hook/enable", "true");
	serve(&ctx, &req, &s);
	cr_assert_lt(s.r, 0);
	cr_assert(s.err.msg[0]);
	cr_assert(orh_edit_must_fail(&ctx.cfg, &s.res));
	cr_assert(orh_nri_adjust_empty(&s.adj));
	served_free(&ctx, &req, &s);

	ctx_init(&ctx, ORH_ACTIVATE_ANNOTATION, node);
	req_init(&req);
	kv_add(&req.pod.annotations, "oci-rdma-hook/enable", "true");
	serve(&ctx, &req, &s);
	cr_assert_lt(s.r, 0);
	cr_assert_not(orh_edit_must_fail(&ctx.cfg, &s.res));
	served_free(&ctx, &req, &s);
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	cr_assert_not_null(j, "%s: %s", text, jerr.text);
	return j;
}

Test(nri_serve, diff_takes_what_was_appended)
{
	json_t *before = parse("{\"process\":{\"env\":[\"A=1\"]},\"linux\":{\"devices\":[],"
			       "\"resources\":{\"devices\":[{\"allow\":false}]}}}");
	json_t *after = parse("{\"process\":{\"env\":[\"A=1\",\"UCX_TLS=rc\"],\"rlimits\":[{"
			      "\"type\":\"RLIMIT_MEMLOCK\",\"hard\":5,\"soft\":4}]},"
			      "\"linux\":{\"devices\":[{\"path\":\"/dev/x\",\"type\":\"c\","
			      "\"major\":1,\"minor\":2}],\"resources\":{\"devices\":[{\"allow\":"
			      "false},{\"allow\":true,\"type\":\"c\",\"major\":1,\"minor\":2,"
			      "\"access\":\"rwm\"},{\"allow\":true,\"type\":\"c\",\"major\":3,"
			      "\"minor\":4,\"access\":\"rw\"}]}},\"mounts\":[{\"destination\":"
			      "\"/sys/class/infiniband\",\"source\":\"/run/v\",\"options\":"
			      "[\"bind\"]}]}");
	struct orh_nri_adjust a;
	struct orh_err err = { 0 };

	cr_assert_eq(orh_nri_diff(before, after, &a, &err), 0, "%s", err.msg);
	cr_assert(a.env.n == 1 && !strcmp(a.env.v[0].key, "UCX_TLS") &&
		  !strcmp(a.env.v[0].value, "rc"));
	cr_assert(a.n_rlimits == 1 && a.rlimits[0].hard == 5 && a.rlimits[0].soft == 4);
	cr_assert(a.n_devices == 1 && a.devices[0].major == 1 && !a.devices[0].has_mode);
	/* the rule of the device added is the runtime's to add; the other one is sent */
	cr_assert(a.n_rules == 1 && a.rules[0].major == 3 && a.rules[0].allow);
	cr_assert(a.n_mounts == 1 && a.mounts[0].options.n == 1);
	orh_nri_adjust_free(&a);
	json_decref(after);

	after = parse("{\"process\":{\"env\":[\"A=2\"]}}");
	cr_assert_eq(orh_nri_diff(before, after, &a, &err), -EINVAL);
	cr_assert(strstr(err.msg, "changed entry 0 of 'process.env'"), "%s", err.msg);
	json_decref(after);
	json_decref(before);
}
