/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live OCI hook: createRuntime / prestart (same behaviour) give an activated
 * container its RDMA device nodes, the device cgroup grants, RLIMIT_MEMLOCK and an
 * /etc/nccl.conf; poststop removes what the hook left outside the container.
 * nccl-conf is the createRuntime hook that the spec edit (precreate, the runtime shim)
 * registers: the edit put the devices, grants and memlock into the spec, and this stage
 * writes /etc/nccl.conf alone, deciding from the runtime shim's reading of the node where
 * the shim left one (orh/handoff.h). cdi-createRuntime is the one the CDI spec (cmd_cdi.c)
 * carries: for every container given a device of the spec's kind (that request is the
 * activation) it applies the memlock step (CDI has no rlimit edit) and the sysfs view,
 * and writes /etc/nccl.conf; cdi-memlock, which CDI specs of earlier versions name, the
 * memlock step alone.
 *
 * A container given some of the node's devices gets a view of /sys/class/infiniband*
 * that shows only those (the last step; orh/sysview.h).
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

#include "orh/apply.h"
#include "orh/commands.h"
#include "orh/decide.h"
#include "orh/handoff.h"
#include "orh/oci.h"
#include "orh/plan.h"
#include "orh/record.h"
#include "orh/sandbox.h"
#include "orh/statedir.h"
#include "orh/sweep.h"
#include "orh/supply.h"
#include "orh/sysview.h"

struct hook {
	struct orh_ctx *ctx;
	const char *stage;
	struct orh_oci_state st;
	json_t *spec;
	struct orh_target target;   /* the container's process, held from its check on */
	int rootfd;                 /* its rootfs, as the check found it */
	bool readonly;              /* the spec's root.readonly */
	enum orh_activation_result act;
	struct orh_netns_info netns;
	struct orh_decision d;       /* the decision (decide.c); d.plan is what is applied */
	const char *step;            /* the step of the container callback under way */
	char state_dir[PATH_MAX];
	struct orh_record_in rec;    /* what this stage did, for its record.json */
	struct orh_strv rwarn;       /* the stage's warnings that the record holds */
	json_t *snap;                /* nccl-conf: the shim's reading of the node, or NULL */
	char snap_path[PATH_MAX];    /* where it was */
	double t0;                   /* monotonic ms at the start */
	double container_ms;         /* the decision's container callback took */
};

static const char *cid(const struct hook *h)
{
	return h->st.id ? h->st.id : "?";
}

#define NEXT_OTHERS "the container starts without this step, the others still run"
#define NEXT_NONE "the container starts unchanged"
#define NEXT_GONE "no other step runs"

/* Apply the on_error policy to a failed step: ORH_EXIT_FAIL fails the container, else
 * the log says what happens next (NEXT_*). */
static int failed_as(struct hook *h, const char *step, const struct orh_err *err,
		     const char *next)
{
	if (h->ctx->cfg.on_error == ORH_ON_ERROR_FAIL && h->act == ORH_ACT_REQUESTED) {
		orh_log(LOG_ERR, "container %s: %s: %s: %s; failing the container (on_error=fail)",
			cid(h), h->stage, step, err->msg);
		return ORH_EXIT_FAIL;
	}
	orh_log(LOG_WARNING, "container %s: %s: %s: %s; %s (on_error=warn)", cid(h), h->stage,
		step, err->msg, next);
	return ORH_EXIT_OK;
}

static int failed(struct hook *h, const char *step, const struct orh_err *err)
{
	return failed_as(h, step, err, NEXT_OTHERS);
}

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
		orh_log(LOG_INFO, "container %s: poststop: removed '%s'", cid(h), h->state_dir);
	else if (access(h->state_dir, F_OK) == 0)
		orh_log(LOG_WARNING, "container %s: poststop: '%s' stays (not empty, or not "
			"removable)", cid(h), h->state_dir);
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
			cid(h), soft, hard);
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
				cid(h), h->stage, v->name, v->source);
		out[n++] = *v;
	}
	return n;
}

/* A container given some of the node's devices sees only those in /sys/class/infiniband,
 * infiniband_verbs and infiniband_mad (orh/sysview.h; the decision's keep-set, d.sysview):
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
			"its /sys)", cid(h), h->stage, v->kept_devs, v->all_devs,
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
			"already)%s", cid(h), h->stage, s->n_files, s->n_providers,
			s->n_providers == 1 ? "" : "s", s->verbs ? " and the loader's entry" : "",
			res->mounted, res->already, res->cache ? "; /etc/ld.so.cache rewritten "
			"with them first" : "");
	return r;
}

static void record_step(struct hook *h, const char *name, double t0)
{
	struct orh_record_in *r = &h->rec;

	if (r->n_steps < ORH_ARRAY_SIZE(r->step_names)) {
		r->step_names[r->n_steps] = name;
		r->step_ms[r->n_steps++] = orh_now_ms() - t0;
	}
}

/* The container process's RLIMIT_MEMLOCK, from its /proc/<pid>/limits. */
static bool read_memlock(const struct hook *h, uint64_t *soft, uint64_t *hard)
{
	char buf[4096];

	return orh_read_file_at(h->target.procfd, "limits", buf, sizeof(buf)) >= 0 &&
	       orh_limits_memlock(buf, soft, hard) == 0;
}

/* What the spec holds (for the spec-edit paths, what the edit put there). */
static void record_spec(struct hook *h)
{
	orh_record_spec(&h->rec, h->spec);
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
		orh_log(LOG_WARNING, "container %s: %s: %s", cid(h), h->stage,
			h->d.image_verdict.warnings.v[i]);
	if (h->d.image_verdict.refuses) {
		orh_log(LOG_ERR, "container %s: %s: image check: %s; failing the container "
			"(%s)", cid(h), h->stage, h->d.image_verdict.refusal,
			h->ctx->cfg.on_error == ORH_ON_ERROR_FAIL ? "on_error=fail"
								   : "image_check=fail");
		return ORH_EXIT_FAIL;
	}
	if (known && orh_check_memlock(soft, h->d.memlock.need, msg, sizeof(msg))) {
		if (h->d.checks.memlock_refuses) {
			orh_fail(&err, EPERM, "%s", msg);
			return failed_as(h, "memlock check", &err, NEXT_NONE);
		}
		orh_strv_pushf(&h->rwarn, "%s", msg);
	}
	for (size_t i = 0; i < h->rwarn.n; i++)
		orh_log(LOG_WARNING, "container %s: %s: %s", cid(h), h->stage, h->rwarn.v[i]);
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
	h->rec.id = cid(h);
	h->rec.stage = h->stage;
	h->rec.pid = h->st.pid;
	orh_ns_ids_read("/proc", &h->rec.ns);
	if (orh_read_file_at(h->target.procfd, "stat", buf, sizeof(buf)) >= 0)
		orh_stat_start_time(buf, &h->rec.start_time);
	h->rec.d = &h->d;
	h->rec.netns_if = h->netns.default_if;
	h->rec.warnings = &h->rwarn;
	h->rec.total_ms = orh_now_ms() - (h->ctx->t_main ? h->ctx->t_main : h->t0);
	if (access(h->state_dir, F_OK) < 0)
		orh_record_sweep(ORH_RUN_DIR, "/proc", h->st.id, ORH_RECORD_SWEEP_EVERY);
	if (orh_record_write(h->state_dir, &h->rec, &err) < 0)
		orh_log(LOG_WARNING, "container %s: %s: the record: %s", cid(h), h->stage, err.msg);
	return ORH_EXIT_OK;
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
	record_spec(h);
	if (!strcmp(h->stage, "nccl-conf"))
		h->rec.edited_by = "spec edit (precreate or the runtime shim)";
	if (strcmp(h->stage, "nccl-conf") != 0 &&
	    apply_memlock(h, memlock, sizeof(memlock), &err) < 0) {
		if (failed(h, "memlock", &err) == ORH_EXIT_FAIL)
			return ORH_EXIT_FAIL;
		snprintf(memlock, sizeof(memlock), "memlock: failed");
	}
	/* a container given one device of the CDI spec sees only it in sysfs */
	if (!strcmp(h->stage, "cdi-createRuntime") && apply_sysview(h, &vres, &err) < 0 &&
	    failed(h, "sysfs view", &err) == ORH_EXIT_FAIL)
		return ORH_EXIT_FAIL;
	/* the node's RDMA userspace: mounted here where the spec edit did not read the image
	 * (a CDI spec is written before any image is known) */
	if (conf && apply_supply(h, &sres, &err) < 0 &&
	    failed(h, "the node's RDMA userspace", &err) == ORH_EXIT_FAIL)
		return ORH_EXIT_FAIL;
	settings = orh_xcalloc(h->d.plan.n_env + 1, sizeof(*settings));
	n_settings = conf ? conf_settings(h, settings) : 0;
	/* a CDI container given one device holds only its node: the plan (rule 8) names only
	 * that device's ports */
	if (conf && orh_ncclconf_apply(h->rootfd, &h->target, h->readonly,
				       h->state_dir[0] ? h->state_dir : NULL, settings,
				       n_settings, res, &err) < 0) {
		if (failed(h, "/etc/nccl.conf", &err) == ORH_EXIT_FAIL)
			return ORH_EXIT_FAIL;
		h->rec.conf = "failed";
	}
	record_step(h, "stage", t0);
	if (!conf)
		orh_log(LOG_INFO, "container %s: %s: %s", cid(h), h->stage,
			memlock[0] ? memlock : "the plan sets no memlock; left unchanged");
	else
		orh_log(LOG_INFO, "container %s: %s: %s%s/etc/nccl.conf: %zu settings added%s%s%s",
			cid(h), h->stage, memlock, memlock[0] ? "; " : "", res->added,
			res->bind_mounted ? ", bind-mounted from " : "",
			res->bind_mounted ? res->generated : "",
			res->foreign ? " over the file of another mount, which is left as it is"
				     : "");
	h->rec.memlock = memlock[0] ? memlock : NULL;
	if (conf && !h->rec.conf)
		h->rec.conf = "written";
	h->rec.conf_added = res->added;
	h->rec.conf_bound_from = res->bind_mounted ? res->generated : "";
	h->rec.memlock_known = h->rec.memlock_known &&
		read_memlock(h, &h->rec.memlock_soft_after, &h->rec.memlock_hard_after);
	h->rec.conf_kept = &res->kept;
	h->rec.conf_record_off = res->record_off;
	return finish(h);
}

static int apply_conf_stage(struct hook *h)
{
	struct orh_ncclconf_result res = { 0 };
	int rc = conf_stage(h, &res);

	orh_ncclconf_result_free(&res);
	return rc;
}

/* Take hold of the state's pid and check that it is the container the runtime is
 * creating from this bundle (target.c): nothing is done for any other process. */
static int take_container(struct hook *h, struct orh_err *err)
{
	char rootfs[PATH_MAX];
	int r;

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
	record_step(h, "container and its network", t0);
	return r;
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
		orh_log(LOG_WARNING, "container %s: %s", cid(h), a->dres.warnings.v[i]);
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
			"namespace (a rootless runtime applies no device rules)", cid(h));
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
	record_spec(h);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(steps); i++) {
		struct orh_err err = { 0 };
		double t0 = orh_now_ms();
		int r = steps[i].fn(h, a, &err);

		record_step(h, steps[i].name, t0);
		if (r < 0) {
			a->failed[i] = true;
			/* the container's process is gone (ESRCH, target.c): its number may name
			 * another process now, so no step goes on */
			bool gone = err.code == ESRCH;

			if (failed_as(h, steps[i].name, &err, gone ? NEXT_GONE : NEXT_OTHERS) ==
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
		cid(h), h->d.plan.n_nodes, a->failed[0] ? "failed; " : "", a->dres.created,
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
	h->rec.conf_added = a->nres.added;
	h->rec.conf_bound_from = a->nres.bind_mounted ? a->nres.generated : "";
	h->rec.memlock_known = h->rec.memlock_known &&
		read_memlock(h, &h->rec.memlock_soft_after, &h->rec.memlock_hard_after);
	h->rec.conf_kept = &a->nres.kept;
	h->rec.conf_record_off = a->nres.record_off;
	return finish(h);
}

static int apply(struct hook *h)
{
	struct applied a = { .userns = !orh_in_initial_userns() };
	int rc = apply_steps(h, &a);

	orh_ncclconf_result_free(&a.nres);
	return rc;
}

/* The spec-edit paths: the node as the runtime shim or the NRI plugin read it, when it
 * handed it over (orh/handoff.h; the plugin's bound to the token in this stage's
 * environment); one it cannot take is a warning in the record, and the node is read. */
static void take_handoff(struct hook *h)
{
	char why[ORH_ERR_MAX];

	snprintf(h->snap_path, sizeof(h->snap_path), "%s/%s", h->state_dir, ORH_HANDOFF_FILE);
	h->snap = orh_handoff_take(h->state_dir, h->st.bundle, getenv(ORH_HANDOFF_ENV),
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
	record_step(h, "node and plan", t0 + h->container_ms);
	h->act = h->d.act;
	h->rec.node_from = h->d.node.from_snapshot ? h->snap_path : NULL;
	h->rec.node_read = h->d.node.from_snapshot ? orh_handoff_reader(h->snap) : NULL;
	h->rec.shim_ms = h->d.node.from_snapshot ? json_object_get(h->snap, "shim_ms") : NULL;
	return r;
}

static int run(struct hook *h)
{
	struct orh_err err = { 0 };
	bool conf_only = orh_startswith(h->stage, "cdi-") || !strcmp(h->stage, "nccl-conf");
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
		orh_log(LOG_ERR, "container %s: %s: %s; container left unchanged", cid(h), h->stage,
			h->ctx->config_err.msg);
		return ORH_EXIT_OK;
	}
	if (!strcmp(h->stage, "poststop"))
		return poststop(h);

	if (!h->st.bundle || orh_spec_load(h->st.bundle, &h->spec, &err) < 0) {
		if (!h->st.bundle)
			orh_fail(&err, EINVAL, "the OCI state has no bundle");
		orh_log(LOG_ERR, "container %s: %s: %s; nothing done", cid(h), h->stage, err.msg);
		return ORH_EXIT_OK;
	}
	record_step(h, "state and spec", t0);
	if (decide(h, &err) < 0)
		return failed_as(h, !strcmp(h->d.step, "container") ? h->step : h->d.step, &err,
				 NEXT_NONE);
	/* a request the decision ignored; what discovery skipped (a refused device number
	 * among it) and the GPUs' reading; the plan's; then the decision's own (memlock) */
	for (size_t i = 0; i < h->d.warnings.n; i++)
		orh_log(LOG_WARNING, "container %s: %s", cid(h), h->d.warnings.v[i]);
	if (h->act == ORH_ACT_SKIP) {
		orh_log(LOG_INFO, "container %s: not activated (%s); left unchanged", cid(h),
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
			return failed_as(h, "the plan", &err, NEXT_NONE);
		}
		orh_log(LOG_INFO, "container %s: %s; left unchanged", cid(h), why);
		return ORH_EXIT_OK;
	}
	return conf_only ? apply_conf_stage(h) : apply(h);
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
			cid(&h));
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
