/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live OCI hook: createRuntime / prestart (same behaviour) give an activated
 * container its RDMA device nodes, the device cgroup grants, RLIMIT_MEMLOCK and an
 * /etc/nccl.conf; poststop removes what the hook left outside the container.
 * nccl-conf is the createRuntime hook that the spec edit (precreate, the runtime shim)
 * registers: the edit put the devices, grants and memlock into the spec, and this stage
 * writes /etc/nccl.conf alone, deciding from the runtime shim's reading of the node where
 * the shim left one (orh/apply/handoff.h). cdi-createRuntime is the one the CDI spec (cmd_cdi.c)
 * carries: for every container given a device of the spec's kind (that request is the
 * activation) it applies the memlock step (CDI has no rlimit edit) and the sysfs view,
 * and writes /etc/nccl.conf; cdi-memlock, which CDI specs of earlier versions name, the
 * memlock step alone.
 *
 * A container given some of the node's devices gets a view of /sys/class/infiniband*
 * that shows only those (the last step; orh/apply/sysview.h).
 *
 * This file drives one run: it reads the OCI state and the spec, takes hold of the
 * container, decides, and hands the decision to the stages' steps (hook_stages.c), which
 * apply it and write the record; poststop removes the state directory. The NRI plugin runs
 * the nccl-conf stage itself at a container's StartContainer (orh_hook_at_start()): the
 * container's id, pid and spec come from the runtime's request instead of the OCI state and
 * the bundle, and the process is judged by its cgroups instead of root.path.
 *
 * Failure policy (config [containers] on_error): "warn" logs a failed step and goes on
 * with the others (device nodes, device cgroup, memlock, /etc/nccl.conf and the sysfs
 * view do not depend on each other; none runs once the container's process is gone),
 * then exits 0; "fail" exits 1 at the first failed step for containers that asked for RDMA
 * (oci-rdma-hook/enable=true, or OCI_RDMA_HOOK_ENABLE in process.env), or, for the cdi-*
 * stages, with the CDI device.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "orh/apply/apply.h"
#include "orh/cmd/commands.h"
#include "orh/decide/decide.h"
#include "orh/apply/handoff.h"
#include "orh/decide/oci.h"
#include "orh/decide/plan.h"
#include "orh/apply/record.h"
#include "orh/base/sandbox.h"
#include "orh/apply/statedir.h"
#include "orh/apply/sweep.h"
#include "orh/apply/supply.h"
#include "orh/apply/sysview.h"
#include "hook.h"
#include "hook_stages.h"

static int read_state(struct hook *h, struct orh_err *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	r = orh_read_fd_all_within(STDIN_FILENO, ORH_STATE_MAX_BYTES, ORH_STATE_READ_TIMEOUT_MS,
				   &buf, &len);
	if (r == -ETIMEDOUT)
		return orh_fail(err, r,
				"reading the OCI state from stdin: stdin still open after %d "
				"seconds (a runtime writes the state and closes it)",
				ORH_STATE_READ_TIMEOUT_MS / 1000);
	if (r < 0)
		return orh_fail_errno(err, r, "reading the OCI state from stdin");
	return orh_oci_state_parse(buf, len, &h->st, err);
}

static int poststop(struct hook *h)
{
	if (!orh_state_id_usable(h->st.id))
		return ORH_EXIT_OK;
	/* the entries the hook makes, then the directory; one the hook did not make, or
	 * anything else left in it, stays, for the sweep to find */
	if (orh_state_dir_remove(ORH_RUN_DIR, h->st.id))
		orh_log(LOG_INFO, "container %s: poststop: removed '%s'", orh_hook_cid(h), h->state_dir);
	else if (access(h->state_dir, F_OK) == 0)
		orh_log(LOG_WARNING, "container %s: poststop: '%s' stays (not empty, or not "
			"removable)", orh_hook_cid(h), h->state_dir);
	return ORH_EXIT_OK;
}

/* The container's rootfs path (absolute) and whether the spec wants it read-only. */
static int rootfs_of(const struct hook *h, char *out, size_t size, bool *readonly,
		     struct orh_err *err)
{
	const json_t *root = json_object_get(h->spec, "root");
	const char *path = json_string_value(json_object_get(root, "path"));
	int n;

	*readonly = json_is_true(json_object_get(root, "readonly"));
	if (!path || !*path)
		return orh_fail(err, EINVAL, "the spec has no root.path");
	if (path[0] == '/')
		n = snprintf(out, size, "%s", path);
	else
		n = snprintf(out, size, "%s/%s", h->st.bundle, path);
	if (n < 0 || (size_t)n >= size)
		return orh_fail(err, ENAMETOOLONG, "rootfs path too long");
	return 0;
}

/* Take hold of the state's pid and check that it is the container the runtime is
 * creating from this bundle (target.c): nothing is done for any other process. */
static int take_container(struct hook *h, struct orh_err *err)
{
	char rootfs[PATH_MAX];
	int r;

	if (h->at_start) {
		/* the runtime named the process; its root is the container's, as mounted */
		r = orh_target_open(h->st.pid, &h->target, err);
		return r < 0 ? r : orh_target_open_started(&h->target, h->st.id, &h->rootfd,
							   &h->readonly, err);
	}
	r = rootfs_of(h, rootfs, sizeof(rootfs), &h->readonly, err);
	if (r < 0)
		return r;
	r = orh_target_open(h->st.pid, &h->target, err);
	if (r < 0)
		return r;
	return orh_target_open_rootfs(&h->target, rootfs, &h->rootfd, err);
}

/* The decision's container callback, once the container is activated: take hold of it,
 * then read its network namespace (its process is in it by now, whether the runtime made
 * it or joined the spec's path: /proc/<pid>/net shows it). */
static int container_facts_read(struct hook *h, struct orh_container_facts *facts,
				struct orh_err *err)
{
	const char *ns_path = NULL;
	bool has_netns = false;
	struct stat st;
	int r;

	h->step = "state";
	if (h->st.pid <= 0)
		return orh_fail(err, EINVAL, "the OCI state has no pid");
	h->step = "container process";
	r = take_container(h, err);
	if (r < 0)
		return r;
	facts->has_root = true; /* the image checks read it */
	facts->rootfd = h->rootfd;
	h->step = "container network namespace";
	r = orh_spec_netns(h->spec, &has_netns, &ns_path);
	if (r < 0)
		return orh_fail(err, r, "reading linux.namespaces of the spec");
	if (!has_netns)
		return 0;
	/* the network the shim read by its path, if the container is in that one */
	if (h->snap && fstatat(h->target.procfd, "ns/net", &st, 0) == 0 &&
	    orh_handoff_netns(h->snap, &st, &h->netns, facts))
		return 0;
	r = orh_netns_read_target(&h->target, &h->netns, err);
	if (r < 0)
		return r;
	facts->own_netns = true;
	memcpy(facts->netns_default_if, h->netns.default_if, IFNAMSIZ);
	facts->addrs = h->netns.addrs;
	facts->n_addrs = h->netns.n_addrs;
	return 0;
}

/* The same, timed for the record. */
static int container_facts(void *arg, struct orh_container_facts *facts, struct orh_err *err)
{
	struct hook *h = arg;
	double t0 = orh_now_ms();
	int r = container_facts_read(h, facts, err);

	h->container_ms = orh_now_ms() - t0;
	orh_hook_record_step(h, "container and its network", t0);
	return r;
}

/* The spec-edit paths: the node as the runtime shim or the NRI plugin read it, when it
 * handed it over (orh/apply/handoff.h; the plugin's bound to the token in this stage's
 * environment); one it cannot take is a warning in the record, and the node is read. */
static void take_handoff(struct hook *h)
{
	char why[ORH_ERR_MAX];

	snprintf(h->snap_path, sizeof(h->snap_path), "%s/%s", h->state_dir, ORH_HANDOFF_FILE);
	h->snap = orh_handoff_take(h->state_dir, h->st.bundle,
				   h->at_start ? h->start_token : getenv(ORH_HANDOFF_ENV),
				   h->ctx->sysroot, why, sizeof(why));
	if (!h->snap && why[0])
		orh_strv_pushf(&h->rwarn, "the reading of the node handed over is not used "
			       "(%s); the node was read again", why);
}

/* The record's first steps: main's config and confinement (orh_ctx). */
static void record_startup(struct hook *h)
{
	const struct orh_ctx *c = h->ctx;

	if (!c->t_main || !c->t_config || !c->t_confined)
		return;
	h->rec.step_names[0] = "config";
	h->rec.step_ms[0] = c->t_config - c->t_main;
	h->rec.step_names[1] = "seccomp and capabilities";
	h->rec.step_ms[1] = c->t_confined - c->t_config;
	h->rec.n_steps = 2;
}

/* The decision for the container whose spec is loaded; the nccl-conf stage takes the
 * shim's reading of the node where there is one. */
static int decide(struct hook *h, struct orh_err *err)
{
	struct orh_decide_in in = {
		.cfg = &h->ctx->cfg,
		.sysroot = h->ctx->sysroot,
		.scan = ORH_GIDS_PLAN,
		.spec = h->spec,
		.state_annotations = h->st.annotations,
		/* only a container given a device of our CDI kind runs a cdi-* stage: that
		 * is its request */
		.requested = orh_startswith(h->stage, "cdi-"),
		.container_facts = container_facts,
		.arg = h,
	};
	double t0;
	int r;

	t0 = orh_now_ms();
	if (!strcmp(h->stage, "nccl-conf") && h->state_dir[0])
		take_handoff(h);
	in.snapshot = h->snap;
	in.snapshot_what = h->snap_path;
	r = orh_decide(&in, &h->d, err);
	/* the node (read, or the shim's node.json loaded) and the plan: the decision's time
	 * but the container callback's */
	orh_hook_record_step(h, "node and plan", t0 + h->container_ms);
	h->act = h->d.act;
	h->rec.node_from = h->d.node.from_snapshot ? h->snap_path : NULL;
	h->rec.node_read = h->d.node.from_snapshot ? orh_handoff_reader(h->snap) : NULL;
	h->rec.shim_ms = h->d.node.from_snapshot ? json_object_get(h->snap, "shim_ms") : NULL;
	h->rec.node_age_ms = h->d.node.from_snapshot ? json_object_get(h->snap, "node_age_ms")
						       : NULL;
	return r;
}

/* From the decision on, the spec loaded: the stage's steps for an activated container with
 * a plan. */
static int run_decided(struct hook *h)
{
	struct orh_err err = { 0 };
	bool conf_only = orh_startswith(h->stage, "cdi-") || !strcmp(h->stage, "nccl-conf");

	if (decide(h, &err) < 0)
		return orh_hook_failed_as(h, !strcmp(h->d.step, "container") ? h->step : h->d.step, &err,
				 NEXT_NONE);
	/* a request the decision ignored; what discovery skipped (a refused device number
	 * among it) and the GPUs' reading; the plan's; then the decision's own (memlock) */
	for (size_t i = 0; i < h->d.warnings.n; i++)
		orh_log(LOG_WARNING, "container %s: %s", orh_hook_cid(h), h->d.warnings.v[i]);
	if (h->act == ORH_ACT_SKIP) {
		orh_log(LOG_INFO, "container %s: not activated (%s); left unchanged", orh_hook_cid(h),
			h->d.why);
		return ORH_EXIT_OK;
	}
	if (orh_plan_is_empty(&h->d.plan)) {
		char why[ORH_ERR_MAX - 64];

		/* a container given devices whose ports are all down is told so */
		if (h->d.checks.ports_down[0])
			snprintf(why, sizeof(why), "%s", h->d.checks.ports_down);
		else
			orh_plan_why_empty(&h->d.plan, why, sizeof(why));
		/* a container that asked: on_error decides, as for a failed step */
		if (h->act == ORH_ACT_REQUESTED) {
			orh_fail(&err, ENODEV, "%s", why);
			return orh_hook_failed_as(h, "the plan", &err, NEXT_NONE);
		}
		orh_log(LOG_INFO, "container %s: %s; left unchanged", orh_hook_cid(h), why);
		return ORH_EXIT_OK;
	}
	return conf_only ? orh_hook_conf_stage(h) : orh_hook_apply(h);
}

static int run(struct hook *h)
{
	struct orh_err err = { 0 };
	double t0 = orh_now_ms();

	record_startup(h);
	if (read_state(h, &err) < 0) {
		orh_log(LOG_ERR, "%s: %s; nothing done", h->stage, err.msg);
		return ORH_EXIT_OK; /* cannot tell whether RDMA was requested */
	}
	if (orh_state_id_usable(h->st.id)) {
		_cleanup_free_ char *dir = orh_state_dir_path(ORH_RUN_DIR, h->st.id);

		snprintf(h->state_dir, sizeof(h->state_dir), "%s", dir);
	}
	if (h->ctx->config_failed) {
		orh_log(LOG_ERR, "container %s: %s: %s; container left unchanged", orh_hook_cid(h), h->stage,
			h->ctx->config_err.msg);
		return ORH_EXIT_OK;
	}
	if (!strcmp(h->stage, "poststop"))
		return poststop(h);

	if (!h->st.bundle || orh_spec_load(h->st.bundle, &h->spec, &err) < 0) {
		if (!h->st.bundle)
			orh_fail(&err, EINVAL, "the OCI state has no bundle");
		orh_log(LOG_ERR, "container %s: %s: %s; nothing done", orh_hook_cid(h), h->stage, err.msg);
		return ORH_EXIT_OK;
	}
	orh_hook_record_step(h, "state and spec", t0);
	return run_decided(h);
}

int orh_cmd_hook(struct orh_ctx *ctx, int argc, char **argv)
{
	struct hook h = { .ctx = ctx, .stage = argv[0], .target = { .pidfd = -1, .procfd = -1 },
			  .rootfd = -1, .rec = { .nodes_created = -1, .spec_devices = -1 },
			  .t0 = orh_now_ms() };
	int r;

	if (argc > 1) {
		orh_log(LOG_ERR, "%s: unexpected argument '%s'", argv[0], argv[1]);
		return ORH_EXIT_USAGE;
	}
	umask(022);
	r = run(&h);
	if (orh_rootfs_fallback_active())
		orh_log(LOG_INFO, "container %s: paths were resolved without openat2 (component walk)",
			orh_hook_cid(&h));
	if (orh_free_at_exit()) {
		orh_decision_free(&h.d);
		orh_strv_free(&h.rwarn);
		json_decref(h.snap);
		if (h.spec)
			json_decref(h.spec);
		orh_oci_state_free(&h.st);
	}
	if (h.rootfd >= 0)
		close(h.rootfd);
	orh_target_close(&h.target);
	return r;
}

int orh_hook_at_start(struct orh_ctx *ctx, const char *id, pid_t pid, json_t *spec,
		      const char *token, char *why, size_t size)
{
	struct hook h = { .ctx = ctx, .stage = "nccl-conf", .at_start = true,
			  .start_token = token, .spec = spec,
			  .target = { .pidfd = -1, .procfd = -1 }, .rootfd = -1,
			  .rec = { .nodes_created = -1, .spec_devices = -1 }, .t0 = orh_now_ms() };
	_cleanup_free_ char *dir = orh_state_dir_path(ORH_RUN_DIR, id);
	int r;

	h.st.id = (char *)id;
	h.st.pid = pid;
	if (dir)
		snprintf(h.state_dir, sizeof(h.state_dir), "%s", dir);
	r = run_decided(&h);
	if (r == ORH_EXIT_FAIL)
		snprintf(why, size, "%s", h.fail_msg[0] ? h.fail_msg : "the nccl-conf stage failed");
	if (orh_free_at_exit()) {
		orh_decision_free(&h.d);
		orh_strv_free(&h.rwarn);
		json_decref(h.snap);
	}
	if (h.rootfd >= 0)
		close(h.rootfd);
	orh_target_close(&h.target);
	return r;
}
