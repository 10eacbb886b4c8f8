/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The spec edit shared by `precreate` and the runtime shim (include/orh/cmd/serve.h): a driver,
 * it calls the decision and the spec's appliers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "orh/apply/netns.h"
#include "orh/cmd/ctx.h"
#include "orh/decide/decide.h"
#include "orh/cmd/serve.h"
#include "orh/apply/handoff.h"
#include "orh/node/inventory.h"
#include "orh/decide/plan.h"
#include "orh/base/sandbox.h"
#include "orh/apply/shimconf.h"
#include "orh/node/snapshot.h"
#include "orh/apply/supply.h"
#include "orh/apply/sysview.h"

static void push_all(struct orh_strv *dst, const struct orh_strv *src)
{
	for (size_t i = 0; i < src->n; i++)
		orh_strv_push(dst, orh_xstrdup(src->v[i]));
}

void orh_edit_result_free(struct orh_edit_result *res)
{
	orh_strv_free(&res->warnings);
	json_decref(res->snapshot);
	if (res->d)
		orh_decision_free(res->d);
	free(res->d);
	memset(res, 0, sizeof(*res));
}

bool orh_edit_must_fail(const struct orh_config *cfg, const struct orh_edit_result *res)
{
	return (cfg->on_error == ORH_ON_ERROR_FAIL && res->asked) || res->image_refuses;
}

/* The runtime applies process.rlimits with our own privileges: without
 * CAP_SYS_RESOURCE in the initial user namespace (rootless podman runs this hook in its
 * user namespace, where it holds the capability for nothing that counts here) it cannot
 * raise a hard limit, and a container would then fail to start because of us. The
 * decision asks only for what it can grant, and says so. */
static uint64_t memlock_ceiling(void)
{
	struct rlimit cur;

	if (orh_can_raise_hard_rlimits() || getrlimit(RLIMIT_MEMLOCK, &cur) < 0 ||
	    cur.rlim_max == RLIM_INFINITY)
		return 0;
	return cur.rlim_max ? (uint64_t)cur.rlim_max : 1;
}

/* The container's network namespace, when the spec names one made beforehand (podman,
 * CRI pods): its routes and addresses are known now. One the runtime creates is still
 * empty. */
struct netns_arg {
	const json_t *spec;
	struct orh_netns_info ni;
	struct in_addr gid_addrs[ORH_NETNS_MAX_ADDRS]; /* ni's on links that can hold a GID */
	size_t n_gid_addrs;
	struct stat st;                 /* the namespace read (its nsfs inode), when ni is */
	bool read;
	struct orh_strv *warnings;
	unsigned flags;
	int bundle_fd;                  /* the bundle (the shim), or -1 */
	int rootfd;                     /* its root, opened for the image checks, or -1 */
};

/* The image checks need the container's root: the shim has it in the bundle (the engine
 * mounted it before the runtime runs), and reads it where it serves the container alone
 * (no nccl-conf stage will run, which reads it itself). Never for a spec that mounts DRA
 * device metadata: the runtime mounts those files, so only the stage sees them (own_conf). */
static void root_facts(struct netns_arg *a, struct orh_container_facts *facts)
{
	const char *path = json_string_value(json_object_get(json_object_get(a->spec, "root"),
							     "path"));
	const char *nspath = NULL;
	bool has_netns = false;

	if (a->bundle_fd < 0 || !path || !(a->flags & ORH_SERVE_CONF) ||
	    orh_spec_has_our_live_hook(a->spec) || orh_spec_dra_meta_mounts(a->spec, NULL, 0) ||
	    orh_spec_netns(a->spec, &has_netns, &nspath) < 0 ||
	    !orh_shimconf_network_known(a->spec, has_netns, nspath, a->read))
		return;
	a->rootfd = openat(a->bundle_fd, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (a->rootfd < 0) {
		orh_strv_pushf(a->warnings, "the image is not checked: opening the root '%s': %s",
			       path, strerror(errno));
		return;
	}
	facts->has_root = true;
	facts->rootfd = a->rootfd;
}

/* Does a stage read the container's network where the edit cannot? Every caller but the
 * NRI plugin without hooks (ORH_SERVE_CONF and no snapshot to hand over) registers the
 * nccl-conf stage wherever it does not write /etc/nccl.conf itself (own_conf). */
static bool stage_reads_network(unsigned flags)
{
	return !(flags & ORH_SERVE_CONF) || (flags & ORH_SERVE_SNAPSHOT);
}

/* The network is read later, by the stage, in the namespace the container runs in: one
 * not readable from here (the NRI plugin without the host's PID namespace: /proc/PID/ns/net
 * of another), or one the runtime makes and a hook sets up. Rule 5 then waits for it, and
 * nothing is said: the stage decides NCCL_SOCKET_IFNAME. */
static void network_later(struct netns_arg *a, struct orh_container_facts *facts,
			  const char *nspath)
{
	facts->netns_later = stage_reads_network(a->flags) &&
			     !orh_shimconf_network_known(a->spec, true, nspath, a->read);
}

static int read_netns(struct netns_arg *a, struct orh_container_facts *facts,
		      struct orh_err *err)
{
	const char *nspath = NULL;
	bool has_netns = false;
	struct orh_err nerr = { 0 };
	int r = orh_spec_netns(a->spec, &has_netns, &nspath);

	if (r < 0)
		return orh_fail(err, r, "config.json: field 'linux.namespaces': bad network entry");
	facts->own_netns = has_netns;
	if (!has_netns)
		return 0;
	if (!nspath) {
		network_later(a, facts, NULL);
		return 0;
	}
	if (stat(nspath, &a->st) < 0 || orh_netns_read(nspath, &a->ni, &nerr) < 0) {
		network_later(a, facts, nspath);
		if (!facts->netns_later)
			orh_strv_pushf(a->warnings, "network namespace '%s' not read: %s", nspath,
				       nerr.msg[0] ? nerr.msg : strerror(errno));
		return 0;
	}
	a->read = true;
	memcpy(facts->netns_default_if, a->ni.default_if, sizeof(facts->netns_default_if));
	/* rule 4 looks for the container's address in the GID tables only where it can be:
	 * a veth's (a pod's bridge network) never is, and looking costs a whole table a port */
	for (size_t i = 0; i < a->ni.n_addrs; i++)
		if (!a->ni.no_gid[i])
			a->gid_addrs[a->n_gid_addrs++] = a->ni.addrs[i];
	facts->addrs = a->gid_addrs;
	facts->n_addrs = a->n_gid_addrs;
	return 0;
}

static int netns_facts(void *arg, struct orh_container_facts *facts, struct orh_err *err)
{
	struct netns_arg *a = arg;
	int r = read_netns(a, facts, err);

	if (r == 0)
		root_facts(a, facts);
	return r;
}

/* A container given some of the node's devices sees only those in sysfs (the decision's
 * keep-set, d->sysview): the view's directory made on the host, its bind mounts added to
 * the spec. One that cannot be made is a warning: the container still gets the devices.
 * Returns the mounts added. */
static int add_sysview(json_t *spec, const struct orh_decision *d, struct orh_edit_result *res)
{
	const struct orh_sysview *v = &d->sysview;
	struct orh_sysview_probe probe;
	struct orh_err e = { 0 };
	char dir[PATH_MAX];
	int r = 0;

	if (d->sysview_err.code) {
		e = d->sysview_err;
		r = -1;
		goto out;
	}
	if (!d->sysview_read || !v->subset)
		return 0; /* every device given: the classes were not read */
	probe = orh_sysview_host_probe();
	if (snprintf(dir, sizeof(dir), "%s/%s", ORH_SYSVIEW_DIR, v->id) >= (int)sizeof(dir)) {
		r = orh_fail(&e, ENAMETOOLONG, "'%s' is too long", ORH_SYSVIEW_DIR);
		goto out;
	}
	/* the mounts first: a container whose /sys will not have the classes needs no
	 * directory */
	r = orh_sysview_spec_mounts(spec, v, dir, &probe, &e);
	if (r > 0 && orh_sysview_build(v, ORH_SYSVIEW_DIR, dir, sizeof(dir), &e) < 0) {
		json_t *mounts = json_object_get(spec, "mounts");

		for (int i = 0; i < r; i++)
			json_array_remove(mounts, json_array_size(mounts) - 1);
		r = -1;
	}
	if (r >= 0)
		res->changes.sysfs = (unsigned)r;
out:
	if (r < 0)
		orh_strv_pushf(&res->warnings, "the sysfs view of the devices given is not made "
			       "(/sys/class/infiniband* show every device of the node): %s", e.msg);
	return r < 0 ? 0 : r;
}

/* The node's RDMA userspace for an image that lacks a provider (d->supply, where the
 * shim read the container's root): the driver files and the loader's entry written on the
 * node, a read-only bind mount of each file added to the spec. One that cannot be written,
 * or a destination off the container's own storage (orh_supply_check_spec), is a warning
 * and the spec gets none of them. Returns the mounts added. */
static int add_supply(const struct orh_ctx *ctx, json_t *spec, const struct orh_decision *d,
		      int rootfd, struct orh_edit_result *res)
{
	size_t n = 0;
	_cleanup_free_ struct orh_supply_mount *m =
		orh_supply_mounts(&d->supply, ctx->sysroot, ORH_SUPPLY_HOST_DIR, &n);
	struct orh_err e = { 0 };
	int r;

	if (!n)
		return 0;
	/* only the container's own storage: no destination in a volume of the spec */
	r = rootfd < 0 ? orh_fail(&e, EBADF, "the container's root is not open")
		       : orh_supply_check_spec(rootfd, spec, &d->supply, m, n, &e);
	if (r == 0)
		r = orh_supply_host_files(&d->supply, ORH_SUPPLY_HOST_DIR, &e);
	if (r == 0)
		r = orh_supply_spec_mounts(spec, m, n, &e);
	if (r < 0) {
		orh_strv_pushf(&res->warnings, "the node's RDMA userspace is not given: %s", e.msg);
		return 0;
	}
	return r;
}

/* The hook entries of the nccl-conf stage (with a new token in its environment under
 * ORH_SERVE_TOKEN, into token) and, unless the caller removes the state directory itself
 * (ORH_SERVE_NO_POSTSTOP), of poststop. */
static int stage_hooks(const struct orh_ctx *ctx, unsigned flags, char *token,
		       json_t **nccl_hook, json_t **poststop_hook, struct orh_err *err)
{
	int r = orh_self_hook(ctx, "nccl-conf", nccl_hook, err);

	if (r == 0 && (flags & ORH_SERVE_TOKEN)) {
		orh_handoff_token(token);
		json_object_set_new(*nccl_hook, "env", json_pack("[s++]", ORH_HANDOFF_ENV, "=",
								 token));
	}
	if (r == 0 && !(flags & ORH_SERVE_NO_POSTSTOP))
		r = orh_self_hook(ctx, "poststop", poststop_hook, err);
	return r;
}

/* The node as the decision read it, for the nccl-conf stage (orh/node/snapshot.h), with the
 * container's network where it was read by its path (na, or NULL), and the age of the
 * node kept that it restored (cache, or NULL), which the stage's record shows. */
static json_t *snapshot_of(const struct orh_decision *d, const struct netns_arg *na,
			   const struct orh_node_cache *cache)
{
	json_t *snap = orh_snapshot_build(&d->node.inv, d->node.have_gpus ? &d->node.gpus : NULL,
					    d->node.gpus_error);

	if (d->node.from_cache && cache)
		json_object_set_new(snap, "node_age_ms",
				    json_integer((json_int_t)(orh_now_ms() - cache->read_ms)));
	if (na && na->read) /* the container's network, for a stage that is in the same one */
		json_object_set_new(snap, "netns", orh_handoff_netns_json(&na->st, &d->facts));
	return snap;
}

/* May the caller write /etc/nccl.conf itself (ORH_SERVE_CONF)? Where the network the stage
 * would see is the one decided on, no hook of ours in the spec writes the file, and, for the
 * shim (a bundle), the spec mounts no DRA device metadata (the stage reads it in the
 * container's mounts: rule 9; the NRI plugin without hooks decides without it). */
static bool own_conf(unsigned flags, const json_t *spec, const struct netns_arg *na)
{
	const char *nspath = NULL;
	bool has_netns = false;

	return (flags & ORH_SERVE_CONF) && !orh_spec_has_our_live_hook(spec) &&
	       !(na->bundle_fd >= 0 && orh_spec_dra_meta_mounts(spec, NULL, 0)) &&
	       orh_spec_netns(spec, &has_netns, &nspath) == 0 &&
	       orh_shimconf_network_known(spec, has_netns, nspath, na->read);
}

int orh_spec_serve(const struct orh_ctx *ctx, json_t *spec, unsigned flags,
		   struct orh_edit_result *res, struct orh_err *err)
{
	return orh_spec_serve_at(ctx, spec, -1, flags, res, err);
}

int orh_spec_serve_at(const struct orh_ctx *ctx, json_t *spec, int bundle_fd, unsigned flags,
		      struct orh_edit_result *res, struct orh_err *err)
{
	json_t *nccl_hook = NULL, *poststop_hook = NULL;
	struct netns_arg na = { .spec = spec, .warnings = &res->warnings, .flags = flags,
				.bundle_fd = bundle_fd, .rootfd = -1 };
	struct orh_decide_in in = {
		.cfg = &ctx->cfg,
		.sysroot = ctx->sysroot,
		.scan = ORH_GIDS_PLAN,
		.spec = spec,
		.container_facts = netns_facts,
		.arg = &na,
		.memlock_ceiling = memlock_ceiling(),
		.node_cache = ctx->node_cache,
	};
	/* on the heap: the caller that writes /etc/nccl.conf keeps it (res->d) */
	struct orh_decision *d = orh_xcalloc(1, sizeof(*d));
	struct orh_spec_opts sopts;
	int r;

	memset(res, 0, sizeof(*res));
	r = orh_decide(&in, d, err);
	res->asked = d->asked;
	res->activation = d->act;
	orh_strlcpy(res->why, d->why, sizeof(res->why));
	push_all(&res->warnings, &d->warnings);
	if (r < 0 || !d->have_plan)
		goto out;
	/* the image checks, where the shim read the container's root */
	push_all(&res->warnings, &d->image_verdict.warnings);
	if (d->image_verdict.refuses) {
		res->image_refuses = true;
		r = orh_fail(err, EPERM, "image check: %s", d->image_verdict.refusal);
		goto out;
	}
	if (orh_plan_is_empty(&d->plan)) {
		char why[ORH_ERR_MAX - 64];

		/* a container that asked and gets nothing: an error, which on_error = fail
		 * turns into a refusal (orh_edit_must_fail); others start as they are */
		orh_plan_why_empty(&d->plan, why, sizeof(why));
		if (d->act != ORH_ACT_SKIP && d->asked)
			r = orh_fail(err, ENODEV, "%s", why);
		goto out;
	}
	res->preset = d->plan.preset;
	/* the node's libibverbs given: the nccl-conf stage rewrites the container's loader
	 * cache, which the shim does not */
	res->own_conf = d->plan.n_env > 0 && !d->supply.verbs && own_conf(flags, spec, &na);
	if (d->plan.n_env > 0 && !res->own_conf) {
		r = stage_hooks(ctx, flags, res->token, &nccl_hook, &poststop_hook, err);
		if (r < 0)
			goto out;
	}
	memset(&sopts, 0, sizeof(sopts));
	sopts.add_ipc_lock = ctx->cfg.add_ipc_lock;
	sopts.warnings = &res->warnings;
	sopts.memlock = &d->memlock;
	sopts.nccl_hook = nccl_hook;
	sopts.poststop_hook = poststop_hook;
	r = orh_spec_apply_plan(spec, &d->plan, &sopts, &res->changes, err);
	if (r >= 0) {
		res->edits = r + add_sysview(spec, d, res) + add_supply(ctx, spec, d, na.rootfd, res);
		r = 0;
	}
	if (r >= 0 && (flags & ORH_SERVE_SNAPSHOT) && nccl_hook)
		res->snapshot = snapshot_of(d, &na, ctx->node_cache);
out:
	if (na.rootfd >= 0)
		close(TAKE_FD(na.rootfd));
	json_decref(nccl_hook);
	json_decref(poststop_hook);
	if (r >= 0 && res->own_conf)
		res->d = TAKE_PTR(d);
	res->own_conf = res->d != NULL;
	if (d)
		orh_decision_free(d);
	free(d);
	return r;
}

int orh_edit_add_stage(const struct orh_ctx *ctx, json_t *spec, unsigned flags,
		       struct orh_edit_result *res, struct orh_err *err)
{
	json_t *nccl_hook = NULL, *poststop_hook = NULL;
	bool added = false;
	int r = stage_hooks(ctx, flags | ORH_SERVE_NO_POSTSTOP, res->token, &nccl_hook,
			    &poststop_hook, err);

	if (r == 0)
		r = orh_spec_add_nccl_hook(spec, nccl_hook, &added, err);
	if (r == 0 && added && (flags & ORH_SERVE_SNAPSHOT) && res->d && !res->snapshot)
		res->snapshot = snapshot_of(res->d, NULL, ctx->node_cache);
	res->changes.hooks += added;
	res->edits += added; /* the spec changed: config.json must be written */
	res->own_conf = false;
	json_decref(nccl_hook);
	json_decref(poststop_hook);
	return r;
}
