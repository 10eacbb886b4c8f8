/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook cdi [--output FILE]: a Container Device Interface spec for this node.
 * One device per HCA the plan uses (its uverbs node, its ports' umad/issm when the
 * config gives management devices, and rdma_cm), and one device "all" with every node.
 * No env edit: CDI env edits replace the container's own values, and what NCCL needs
 * depends on the container (its network namespace: NCCL_SOCKET_IFNAME; the devices it was
 * given: NCCL_IB_HCA). A spec-wide createRuntime hook, this very binary run as
 * "oci-rdma-hook [--config FILE] [--sysroot DIR] cdi-createRuntime" with the config file
 * and sysroot the spec was generated from (cmd_hook.c), applies the plan's memlock (CDI has
 * no rlimit edit) and writes the container's /etc/nccl.conf.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/base/args.h"
#include "orh/base/atomic.h"
#include "orh/base/json.h"
#include "orh/cmd/commands.h"
#include "orh/decide/decide.h"
#include "orh/cmd/serve.h"
#include "orh/node/inventory.h"
#include "orh/decide/plan.h"

/* 0.5.0 is the newest spec version podman 4.3 (Debian 12) accepts, and it has every
 * field used here; later consumers accept it too. */
#define ORH_CDI_VERSION "0.5.0"
#define ORH_CDI_KIND "rdma.oci-rdma-hook.io/hca"

/* CDI device names: letters, digits, '_', '-', '.', ':'; alphanumeric at both ends. */
static bool cdi_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if ((i == 0 || i == n - 1) && !alnum)
			return false;
		if (!alnum && c != '_' && c != '-' && c != '.' && c != ':')
			return false;
	}
	return true;
}

static json_t *node_json(const struct orh_devnode *n)
{
	return json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "path", n->path, "type", "c",
			 "major", (json_int_t)n->major, "minor", (json_int_t)n->minor,
			 "fileMode", (json_int_t)(n->mode & 07777), "permissions", "rwm");
}

/* The plan's rdma_cm node, which every device's entry carries too. */
static const struct orh_devnode *plan_rdma_cm(const struct orh_plan *plan)
{
	for (size_t i = 0; i < plan->n_nodes; i++)
		if (plan->nodes[i].kind == ORH_CHARDEV_RDMA_CM)
			return &plan->nodes[i];
	return NULL;
}

/* Add {name, containerEdits: {deviceNodes: nodes}}; steals nodes. */
static int add_device(json_t *devices, const char *name, json_t *nodes)
{
	json_t *d = json_pack("{s:s, s:{s:o}}", "name", name, "containerEdits", "deviceNodes",
			      nodes);

	if (!d)
		return -ENOMEM;
	return json_array_append_new(devices, d) < 0 ? -ENOMEM : 0;
}

/* The createRuntime hook every CDI container of our kind gets: the decision's memlock
 * (CDI has no rlimit edit) and /etc/nccl.conf, its NCCL_SOCKET_IFNAME from the container's
 * own network namespace (cmd_hook.c). */
static int cdi_hook(const struct orh_ctx *ctx, json_t **out, struct orh_err *err)
{
	int r = orh_self_hook(ctx, "cdi-createRuntime", out, err);

	if (r < 0)
		return r;
	/* CDI hooks name their stage; they carry no timeout */
	json_object_del(*out, "timeout");
	if (json_object_set_new(*out, "hookName", json_string("createRuntime")) < 0) {
		json_decref(*out);
		*out = NULL;
		return orh_fail(err, ENOMEM, "building the createRuntime hook: out of memory");
	}
	return 0;
}

/* Build the CDI document. Pure: a function of the plan and the hook
 * (stolen). */
static int cdi_build(const struct orh_plan *plan, json_t *hook,
		     json_t **out, struct orh_strv *warnings)
{
	json_t *doc = NULL, *devices = json_array(), *all = json_array();
	json_t *hooks = NULL;
	const struct orh_devnode *cm = plan_rdma_cm(plan);
	int r;

	*out = NULL;
	if (!devices || !all)
		goto oom;
	if (hook) {
		hooks = json_array();
		if (!hooks)
			goto oom;
		r = json_array_append_new(hooks, hook);
		hook = NULL; /* taken, or released on failure */
		if (r < 0)
			goto oom;
	}
	/* one entry per device the plan uses (it has the device's uverbs node): the nodes
	 * the plan gives that device, in plan order, and rdma_cm */
	for (size_t i = 0; i < plan->n_nodes; i++) {
		const struct orh_device *dev = plan->nodes[i].owner;
		json_t *nodes = NULL;
		bool failed = false;

		if (plan->nodes[i].kind != ORH_CHARDEV_UVERBS || !dev)
			continue;
		if (!cdi_name_ok(dev->name)) {
			orh_strv_pushf(warnings, "device '%s': not a valid CDI device name, only in \"all\"",
				       dev->name);
			continue;
		}
		nodes = json_array();
		if (!nodes)
			goto oom;
		for (size_t j = 0; j < plan->n_nodes; j++)
			if (plan->nodes[j].owner == dev)
				failed |= json_array_append_new(nodes, node_json(&plan->nodes[j])) < 0;
		if (cm)
			failed |= json_array_append_new(nodes, node_json(cm)) < 0;
		if (failed) {
			json_decref(nodes);
			goto oom;
		}
		if (add_device(devices, dev->name, nodes) < 0)
			goto oom;
	}
	for (size_t i = 0; i < plan->n_nodes; i++)
		if (json_array_append_new(all, node_json(&plan->nodes[i])) < 0)
			goto oom;
	r = add_device(devices, "all", all);
	all = NULL;
	if (r < 0)
		goto oom;
	/* "o*" leaves the key out when hooks is NULL */
	doc = json_pack("{s:s, s:s, s:o, s:{s:o*}}", "cdiVersion", ORH_CDI_VERSION, "kind",
			ORH_CDI_KIND, "devices", devices, "containerEdits", "hooks", hooks);
	if (!doc)
		return -ENOMEM; /* json_pack with "o" steals the references even on failure */
	*out = doc;
	return 0;
oom:
	json_decref(devices);
	json_decref(all);
	json_decref(hooks);
	json_decref(hook);
	return -ENOMEM;
}

static int write_output(const char *file, const char *data, size_t len, struct orh_err *err)
{
	_cleanup_free_ char *d = orh_xstrdup(file);
	_cleanup_free_ char *b = orh_xstrdup(file);
	_cleanup_close_ int dirfd = -1;
	const char *dir = dirname(d);
	const char *base = basename(b);
	int r;

	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return orh_fail_errno(err, errno, "opening directory '%s'", dir);
	r = orh_write_atomic(dirfd, base, data, len, 0644, err);
	if (r < 0)
		return orh_err_prefix(err, "writing '%s'", file);
	return 0;
}

int orh_cmd_cdi(struct orh_ctx *ctx, int argc, char **argv)
{
	struct orh_decide_in in = {
		.cfg = &ctx->cfg, .sysroot = ctx->sysroot, .scan = ORH_GIDS_PLAN,
	};
	struct orh_decision d;
	const struct orh_plan *plan = &d.plan;
	struct orh_strv warnings = { 0 };
	struct orh_err err = { 0 };
	_cleanup_json_text_ char *text = NULL;
	const char *output = NULL;
	json_t *doc = NULL, *hook = NULL;
	int r, rc = ORH_EXIT_OK;

	const struct orh_opt opts[] = { { "--output", &output, NULL } };
	const struct orh_args a = { .cmd = "cdi" };

	if (orh_args_parse(&a, argc, argv, 1, opts, ORH_ARRAY_SIZE(opts), NULL))
		return ORH_EXIT_USAGE;
	if (output && !*output) {
		fprintf(stderr, "oci-rdma-hook: cdi: --output is empty\n");
		return ORH_EXIT_USAGE;
	}
	r = orh_decide(&in, &d, &err);
	if (r < 0) {
		orh_log(LOG_ERR, "cdi: %s", err.msg);
		orh_decision_free(&d);
		return ORH_EXIT_FAIL;
	}
	for (size_t i = 0; i < d.warnings.n; i++)
		orh_log(LOG_WARNING, "%s", d.warnings.v[i]);
	if (orh_plan_is_empty(plan) || plan->n_nodes == 0) {
		/* A CDI device without edits is invalid: write nothing rather than a spec
		 * that breaks the consumer's registry. */
		orh_log(LOG_ERR, "cdi: no usable RDMA port on this node: no spec written");
		rc = ORH_EXIT_FAIL;
		goto out;
	}

	if ((d.memlock.set || plan->n_env > 0) && cdi_hook(ctx, &hook, &err) < 0) {
		orh_log(LOG_ERR, "cdi: %s: no spec written", err.msg);
		rc = ORH_EXIT_FAIL;
		goto out;
	}
	r = cdi_build(plan, hook, &doc, &warnings);
	for (size_t i = 0; i < warnings.n; i++)
		orh_log(LOG_WARNING, "cdi: %s", warnings.v[i]);
	if (r < 0 || !(text = json_dumps(doc, JSON_INDENT(2)))) {
		orh_log(LOG_ERR, "cdi: building the spec: %s", strerror(ENOMEM));
		rc = ORH_EXIT_FAIL;
		goto out;
	}
	if (output) {
		_cleanup_free_ char *withnl = orh_xasprintf("%s\n", text);

		if (write_output(output, withnl, strlen(withnl), &err) < 0) {
			orh_log(LOG_ERR, "cdi: %s", err.msg);
			rc = ORH_EXIT_FAIL;
		}
	} else if (printf("%s\n", text) < 0 || fflush(stdout) != 0) {
		orh_log(LOG_ERR, "cdi: writing to stdout: %s", strerror(errno));
		rc = ORH_EXIT_FAIL;
	}
out:
	if (doc)
		json_decref(doc);
	orh_strv_free(&warnings);
	orh_decision_free(&d);
	return rc;
}
