/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stages' steps (hook_stages.h): what the decision gives, applied to the live
 * container (the device nodes, the device cgroup, the memlock, /etc/nccl.conf, the sysfs
 * view, the node's RDMA userspace), each step on its own under on_error = warn; the
 * checks in the container's own context; and its record.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/apply/apply.h"
#include "orh/apply/handoff.h"
#include "orh/apply/record.h"
#include "orh/base/sandbox.h"
#include "orh/apply/statedir.h"
#include "orh/apply/supply.h"
#include "orh/apply/sweep.h"
#include "orh/apply/sysview.h"
#include "hook_stages.h"

/* What the memlock step did, for the summary line; a warning of its own when the hard
 * limit could not be raised. */
static void memlock_text(const struct hook *h, const struct orh_memlock_result *m, char *out,
			 size_t size)
{
	char soft[32], hard[32];

	snprintf(soft, sizeof(soft), m->soft == UINT64_MAX ? "unlimited" : "%llu",
		 (unsigned long long)m->soft);
	snprintf(hard, sizeof(hard), m->hard == UINT64_MAX ? "unlimited" : "%llu",
		 (unsigned long long)m->hard);
	if (m->outcome == ORH_MEMLOCK_SOFT_ONLY)
		orh_log(LOG_WARNING,
			"container %s: memlock hard limit cannot be raised here (no "
			"CAP_SYS_RESOURCE); soft limit raised to the hard limit: %s/%s bytes",
			orh_hook_cid(h), soft, hard);
	snprintf(out, size, "memlock %s: %s/%s bytes",
		 m->outcome == ORH_MEMLOCK_ALREADY ? "already high enough"
		 : m->outcome == ORH_MEMLOCK_SOFT_ONLY ? "soft limit raised"
						       : "raised",
		 soft, hard);
}

/* The memlock step: the decision's memlock applied to the container's process (none where
 * the spec sets RLIMIT_MEMLOCK: the user's wins). `text` says what was done, for the
 * summary line ("" when nothing was to be done). */
static int apply_memlock(const struct hook *h, char *text, size_t size, struct orh_err *err)
{
	struct orh_memlock_result mres;
	int r;

	text[0] = '\0';
	if (h->d.memlock.user)
		snprintf(text, size, "the spec sets RLIMIT_MEMLOCK; left as given");
	if (!h->d.memlock.set)
		return 0;
	r = orh_memlock_apply(&h->target, h->d.memlock.limit, &mres, err);
	if (r < 0)
		return r;
	memlock_text(h, &mres, text, size);
	return 0;
}

/* The settings of /etc/nccl.conf, into out (n_env entries of the plan at most). NCCL's own
 * (NCCL_*) always; the others (UCX_*: orh_env_nccl_reads) only where the container's
 * environment could not be given them: the nccl-conf stage follows a spec edit that put
 * them into PID 1's environment. The live hook and the cdi-* stages write them there,
 * where NCCL exports them into its own process as it starts, and warn for each one the
 * container's environment lacks: other readers do not look in /etc/nccl.conf. */
static size_t conf_settings(const struct hook *h, struct orh_env_entry *out)
{
	bool edited = !strcmp(h->stage, "nccl-conf");
	size_t n = 0;

	for (size_t i = 0; i < h->d.plan.n_env; i++) {
		const struct orh_env_entry *v = &h->d.plan.env[i];

		if (!orh_env_nccl_reads(v->name) && edited)
			continue;
		if (!orh_env_nccl_reads(v->name) && !orh_spec_env_has(h->spec, v->name))
			orh_log(LOG_WARNING,
				"container %s: %s: %s (%s) is not in the container's environment: "
				"a hook cannot change the environment of a started process; "
				"/etc/nccl.conf holds it, which NCCL exports into its own process "
				"only (the runtime shim and precreate put it into the environment)",
				orh_hook_cid(h), h->stage, v->name, v->source);
		out[n++] = *v;
	}
	return n;
}

/* A container given some of the node's devices sees only those in /sys/class/infiniband,
 * infiniband_verbs and infiniband_mad (orh/apply/sysview.h; the decision's keep-set, d.sysview):
 * the view's directory, mounted over each of them that its /sys has. One given every
 * device is left as it is. */
static int apply_sysview(struct hook *h, struct orh_sysview_result *vres, struct orh_err *err)
{
	const struct orh_sysview *v = &h->d.sysview;
	char dir[PATH_MAX];
	int r;

	memset(vres, 0, sizeof(*vres));
	if (h->d.sysview_err.code) {
		*err = h->d.sysview_err;
		return -h->d.sysview_err.code;
	}
	if (!h->d.sysview_read || !v->subset)
		return 0; /* every device given: the classes were not read */
	r = orh_sysview_build(v, ORH_SYSVIEW_DIR, dir, sizeof(dir), err);
	if (r == 0) {
		/* the record names it, and its state directory links to it */
		memcpy(h->rec.sysfs_view, v->id, sizeof(h->rec.sysfs_view));
		r = orh_sysview_mount(&h->target, h->rootfd, v, dir, vres, err);
	}
	if (r == 0)
		orh_log(LOG_INFO, "container %s: %s: sysfs view: %zu of %zu devices; %u of "
			"/sys/class/infiniband* covered from '%s' (%u already, %u not in "
			"its /sys)", orh_hook_cid(h), h->stage, v->kept_devs, v->all_devs,
			vres->mounted, dir, vres->already, vres->missing);
	return r;
}

/* The node's RDMA userspace for an image that lacks a provider (image_supply; the
 * decision's d.supply), only on the container's own storage (orh_supply_give_live); where
 * it is not given, the record says why. */
static int apply_supply(struct hook *h, struct orh_supply_result *res, struct orh_err *err)
{
	const struct orh_supply *s = &h->d.supply;
	size_t n = 0;
	_cleanup_free_ struct orh_supply_mount *m =
		orh_supply_mounts(s, h->ctx->sysroot, ORH_SUPPLY_HOST_DIR, &n);
	int r = 0;

	memset(res, 0, sizeof(*res));
	if (!n)
		return 0;
	r = orh_supply_give_live(&h->target, h->rootfd, s, m, n, ORH_SUPPLY_HOST_DIR, res, err);
	if (r < 0)
		orh_supply_not_given(&h->d.supply, err);
	else
		orh_log(LOG_INFO, "container %s: %s: the node's RDMA userspace given: %zu "
			"files at " ORH_SUPPLY_DIR ", %zu driver file%s%s (%u mounted, %u "
			"already)%s", orh_hook_cid(h), h->stage, s->n_files, s->n_providers,
			s->n_providers == 1 ? "" : "s", s->verbs ? " and the loader's entry" : "",
			res->mounted, res->already, res->cache ? "; /etc/ld.so.cache rewritten "
			"with them first" : "");
	return r;
}

/* The container process's RLIMIT_MEMLOCK, from its /proc/<pid>/limits. */
static bool read_memlock(const struct hook *h, uint64_t *soft, uint64_t *hard)
{
	char buf[4096];

	return orh_read_file_at(h->target.procfd, "limits", buf, sizeof(buf)) >= 0 &&
	       orh_limits_memlock(buf, soft, hard) == 0;
}

/* Will it work, in the container's own context: a warning in the log and the record for
 * each check the decision found failing (orh_checks, then the image's), the image check's
 * refusal where the decision says so, then the memlock check, which
 * refuses the container where the decision says so (memlock_refuses) and else warns. The
 * memlock is the spec's where it sets one (the runtime applies it after this hook), else
 * the one the container's process holds after the memlock step. */
static int check_context(struct hook *h)
{
	char msg[ORH_CHECK_MAX];
	struct orh_err err = { 0 };
	bool known = h->rec.spec_memlock_set || h->rec.memlock_known;
	uint64_t soft = h->rec.spec_memlock_set ? h->rec.spec_memlock : h->rec.memlock_soft_after;

	if (h->d.checks.gpudirect[0])
		orh_strv_pushf(&h->rwarn, "%s", h->d.checks.gpudirect);
	if (h->d.checks.gid[0])
		orh_strv_pushf(&h->rwarn, "%s", h->d.checks.gid);
	/* the image's: the record takes them from the decision */
	for (size_t i = 0; i < h->d.image_verdict.warnings.n; i++)
		orh_log(LOG_WARNING, "container %s: %s: %s", orh_hook_cid(h), h->stage,
			h->d.image_verdict.warnings.v[i]);
	if (h->d.image_verdict.refuses) {
		orh_log(LOG_ERR, "container %s: %s: image check: %s; failing the container "
			"(%s)", orh_hook_cid(h), h->stage, h->d.image_verdict.refusal,
			h->ctx->cfg.on_error == ORH_ON_ERROR_FAIL ? "on_error=fail"
								   : "image_check=fail");
		snprintf(h->fail_msg, sizeof(h->fail_msg), "image check: %s",
			 h->d.image_verdict.refusal);
		return ORH_EXIT_FAIL;
	}
	if (known && orh_check_memlock(soft, h->d.memlock.need, msg, sizeof(msg))) {
		if (h->d.checks.memlock_refuses) {
			orh_fail(&err, EPERM, "%s", msg);
			return orh_hook_failed_as(h, "memlock check", &err, NEXT_NONE);
		}
		orh_strv_pushf(&h->rwarn, "%s", msg);
	}
	for (size_t i = 0; i < h->rwarn.n; i++)
		orh_log(LOG_WARNING, "container %s: %s: %s", orh_hook_cid(h), h->stage, h->rwarn.v[i]);
	return ORH_EXIT_OK;
}

/* The checks, then <state dir>/record.json; a record that cannot be written is a
 * warning (the container has what it was given). The first state directory of a
 * container sweeps those of containers that are gone (at most once a minute: a sweep
 * reads every record). */
static int finish(struct hook *h)
{
	char buf[1024];
	struct orh_err err = { 0 };
	int rc = check_context(h);

	if (rc != ORH_EXIT_OK || !h->state_dir[0])
		return rc;
	h->rec.id = orh_hook_cid(h);
	h->rec.stage = h->stage;
	h->rec.pid = h->st.pid;
	orh_ns_ids_read("/proc", &h->rec.ns);
	if (orh_read_file_at(h->target.procfd, "stat", buf, sizeof(buf)) >= 0)
		orh_stat_start_time(buf, &h->rec.start_time);
	h->rec.d = &h->d;
	h->rec.netns_if = h->netns.default_if;
	h->rec.warnings = &h->rwarn;
	/* from the process's start; the plugin's child at StartContainer, from its stage's */
	h->rec.total_ms = orh_now_ms() - (h->ctx->t_main && !h->at_start ? h->ctx->t_main : h->t0);
	if (access(h->state_dir, F_OK) < 0)
		orh_record_sweep(ORH_RUN_DIR, "/proc", h->st.id, ORH_RECORD_SWEEP_EVERY);
	if (orh_record_write(h->state_dir, &h->rec, &err) < 0)
		orh_log(LOG_WARNING, "container %s: %s: the record: %s", orh_hook_cid(h), h->stage, err.msg);
	return ORH_EXIT_OK;
}

/* What every stage's record holds after its steps: /etc/nccl.conf as written (res), the
 * memlock the container's process holds now; then the checks and the record (finish). */
static int record_after(struct hook *h, const struct orh_ncclconf_result *res)
{
	h->rec.conf_added = res->added;
	h->rec.conf_bound_from = res->bind_mounted ? res->generated : "";
	h->rec.memlock_known = h->rec.memlock_known &&
		read_memlock(h, &h->rec.memlock_soft_after, &h->rec.memlock_hard_after);
	h->rec.conf_kept = &res->kept;
	h->rec.conf_record_off = res->record_off;
	return finish(h);
}

/* The stages of one to four steps: nccl-conf gives the node's RDMA userspace where the
 * decision supplies it (image_supply) and writes /etc/nccl.conf, cdi-createRuntime applies
 * memlock and the sysfs view and then does the same (under on_error = warn a failed step
 * does not stop the next), cdi-memlock applies memlock alone; one line saying what was
 * done. */
static int conf_stage(struct hook *h, struct orh_ncclconf_result *res)
{
	struct orh_sysview_result vres;
	struct orh_supply_result sres;
	struct orh_err err = { 0 };
	_cleanup_free_ struct orh_env_entry *settings = NULL;
	size_t n_settings = 0;
	char memlock[192] = "";
	bool conf = strcmp(h->stage, "cdi-memlock") != 0;
	double t0 = orh_now_ms();

	h->rec.memlock_known = read_memlock(h, &h->rec.memlock_soft_before,
					    &h->rec.memlock_hard_before);
	orh_record_spec(&h->rec, h->spec);
	/* the NRI plugin's stage entry alone carries the handoff's token in its environment;
	 * the plugin runs the stage itself at StartContainer */
	if (h->at_start)
		h->rec.edited_by = "the NRI plugin's adjustment, its stage run by the plugin at "
				   "StartContainer";
	else if (!strcmp(h->stage, "nccl-conf"))
		h->rec.edited_by = getenv(ORH_HANDOFF_ENV) ? "the NRI plugin's adjustment"
							  : "spec edit (precreate or the runtime shim)";
	if (strcmp(h->stage, "nccl-conf") != 0 &&
	    apply_memlock(h, memlock, sizeof(memlock), &err) < 0) {
		if (orh_hook_failed(h, "memlock", &err) == ORH_EXIT_FAIL)
			return ORH_EXIT_FAIL;
		snprintf(memlock, sizeof(memlock), "memlock: failed");
	}
	/* a container given one device of the CDI spec sees only it in sysfs */
	if (!strcmp(h->stage, "cdi-createRuntime") && apply_sysview(h, &vres, &err) < 0 &&
	    orh_hook_failed(h, "sysfs view", &err) == ORH_EXIT_FAIL)
		return ORH_EXIT_FAIL;
	/* the node's RDMA userspace: mounted here where the spec edit did not read the image
	 * (a CDI spec is written before any image is known) */
	if (conf && apply_supply(h, &sres, &err) < 0 &&
	    orh_hook_failed(h, "the node's RDMA userspace", &err) == ORH_EXIT_FAIL)
		return ORH_EXIT_FAIL;
	settings = orh_xcalloc(h->d.plan.n_env + 1, sizeof(*settings));
	n_settings = conf ? conf_settings(h, settings) : 0;
	/* a CDI container given one device holds only its node: the plan (rule 8) names only
	 * that device's ports */
	if (conf && orh_ncclconf_apply(h->rootfd, &h->target, h->readonly,
				       h->state_dir[0] ? h->state_dir : NULL, settings,
				       n_settings, res, &err) < 0) {
		if (orh_hook_failed(h, "/etc/nccl.conf", &err) == ORH_EXIT_FAIL)
			return ORH_EXIT_FAIL;
		h->rec.conf = "failed";
	}
	orh_hook_record_step(h, "stage", t0);
	if (!conf)
		orh_log(LOG_INFO, "container %s: %s: %s", orh_hook_cid(h), h->stage,
			memlock[0] ? memlock : "the plan sets no memlock; left unchanged");
	else
		orh_log(LOG_INFO, "container %s: %s: %s%s/etc/nccl.conf: %zu settings added%s%s%s",
			orh_hook_cid(h), h->stage, memlock, memlock[0] ? "; " : "", res->added,
			res->bind_mounted ? ", bind-mounted from " : "",
			res->bind_mounted ? res->generated : "",
			res->foreign ? " over the file of another mount, which is left as it is"
				     : "");
	h->rec.memlock = memlock[0] ? memlock : NULL;
	if (conf && !h->rec.conf)
		h->rec.conf = "written";
	return record_after(h, res);
}

int orh_hook_conf_stage(struct hook *h)
{
	struct orh_ncclconf_result res = { 0 };
	int rc = conf_stage(h, &res);

	orh_ncclconf_result_free(&res);
	return rc;
}

/* What the steps of apply() did, for the summary line. */
struct applied {
	struct orh_devices_result dres;
	struct orh_cgroup_result cres;
	struct orh_ncclconf_result nres;
	struct orh_sysview_result vres;
	struct orh_supply_result sres;
	char memlock[192];
	bool userns;
	bool failed[6]; /* by step, in the order of steps[] */
};

static int step_devices(struct hook *h, struct applied *a, struct orh_err *err)
{
	const struct orh_plan *p = &h->d.plan;
	int r = orh_devices_apply(h->rootfd, &h->target, h->ctx->sysroot, p->nodes, p->n_nodes,
				  &a->dres, err);

	for (size_t i = 0; i < a->dres.warnings.n; i++)
		orh_log(LOG_WARNING, "container %s: %s", orh_hook_cid(h), a->dres.warnings.v[i]);
	orh_strv_free(&a->dres.warnings);
	return r;
}

/* In a user namespace (rootless podman) the runtime sets no device rules, and the hook
 * could change no cgroup it may rely on: the container's cgroup may be the root's. The
 * device nodes are what gives the access. */
static int step_cgroup(struct hook *h, struct applied *a, struct orh_err *err)
{
	if (a->userns) {
		orh_log(LOG_INFO, "container %s: device cgroup left alone: the hook runs in a user "
			"namespace (a rootless runtime applies no device rules)", orh_hook_cid(h));
		return 0;
	}
	return orh_cgroup_grant(&h->target, h->d.plan.nodes, h->d.plan.n_nodes, &a->cres, err);
}

static int step_memlock(struct hook *h, struct applied *a, struct orh_err *err)
{
	return apply_memlock(h, a->memlock, sizeof(a->memlock), err);
}

/* The /etc/nccl.conf step; no state directory for an id that cannot be a directory name. */
static int step_ncclconf(struct hook *h, struct applied *a, struct orh_err *err)
{
	_cleanup_free_ struct orh_env_entry *settings =
		orh_xcalloc(h->d.plan.n_env + 1, sizeof(*settings));
	size_t n = conf_settings(h, settings);

	return orh_ncclconf_apply(h->rootfd, &h->target, h->readonly,
				  h->state_dir[0] ? h->state_dir : NULL, settings, n, &a->nres,
				  err);
}

static int step_sysview(struct hook *h, struct applied *a, struct orh_err *err)
{
	return apply_sysview(h, &a->vres, err);
}

static int step_supply(struct hook *h, struct applied *a, struct orh_err *err)
{
	return apply_supply(h, &a->sres, err);
}

/* The live hook's steps. None depends on another: under on_error = warn a failed one is
 * skipped and the rest still run, unless the container's process is gone. */
static const struct {
	const char *name;
	int (*fn)(struct hook *h, struct applied *a, struct orh_err *err);
} steps[] = {
	{ "device nodes", step_devices },
	{ "device cgroup", step_cgroup },
	{ "memlock", step_memlock },
	{ "/etc/nccl.conf", step_ncclconf },
	{ "sysfs view", step_sysview },
	{ "the node's RDMA userspace", step_supply },
};

static int apply_steps(struct hook *h, struct applied *a)
{
	const char *cg;

	h->rec.memlock_known = read_memlock(h, &h->rec.memlock_soft_before,
					    &h->rec.memlock_hard_before);
	orh_record_spec(&h->rec, h->spec);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(steps); i++) {
		struct orh_err err = { 0 };
		double t0 = orh_now_ms();
		int r = steps[i].fn(h, a, &err);

		orh_hook_record_step(h, steps[i].name, t0);
		if (r < 0) {
			a->failed[i] = true;
			/* the container's process is gone (ESRCH, target.c): its number may name
			 * another process now, so no step goes on */
			bool gone = err.code == ESRCH;

			if (orh_hook_failed_as(h, steps[i].name, &err, gone ? NEXT_GONE : NEXT_OTHERS) ==
			    ORH_EXIT_FAIL)
				return ORH_EXIT_FAIL;
			if (gone)
				return ORH_EXIT_OK;
		}
	}
	cg = a->failed[1] ? "failed" : a->userns ? "left alone (user namespace)"
		: a->cres.v1 ? "granted" : "not used";
	/* one line for the whole start */
	orh_log(LOG_INFO,
		"container %s: %zu device nodes: %s%u created, %u already there, %u bound; "
		"device cgroup: v1 %s, v2 %s; %s%s/etc/nccl.conf: %s%zu settings added%s%s%s",
		orh_hook_cid(h), h->d.plan.n_nodes, a->failed[0] ? "failed; " : "", a->dres.created,
		a->dres.kept, a->dres.bound, cg,
		a->cres.v2_progs ? "programs extended" : a->cres.v2_open ? "no program" : "unchanged",
		a->failed[2] ? "memlock: failed" : a->memlock, a->failed[2] || a->memlock[0] ? "; " : "",
		a->failed[3] ? "failed; " : "", a->nres.added,
		a->nres.bind_mounted ? ", bind-mounted from " : "",
		a->nres.bind_mounted ? a->nres.generated : "",
		a->nres.foreign ? " over the file of another mount, which is left as it is" : "");
	h->rec.nodes_created = a->failed[0] ? -1L : (long)a->dres.created;
	h->rec.nodes_kept = a->dres.kept;
	h->rec.nodes_bound = a->dres.bound;
	h->rec.nodes_error = a->failed[0] ? "failed" : NULL;
	h->rec.cgroup = cg;
	h->rec.memlock = a->failed[2] ? "failed" : a->memlock[0] ? a->memlock : "left unchanged";
	h->rec.conf = a->failed[3] ? "failed" : "written";
	return record_after(h, &a->nres);
}

int orh_hook_apply(struct hook *h)
{
	struct applied a = { .userns = !orh_in_initial_userns() };
	int rc = apply_steps(h, &a);

	orh_ncclconf_result_free(&a.nres);
	return rc;
}
