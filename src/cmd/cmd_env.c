/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook env [--explain] [--spec FILE]: exactly the NAME=VALUE lines a container
 * gets: one on the host network that asked for nothing, or the container of a config.json
 * (what it was given, what it asked; its network namespace when the spec names one made
 * beforehand is not read). --explain writes the decision whole to stderr: the activation
 * and its reason, each setting's rule, the ports, the devices, the memlock, the memlock
 * check, the sysfs view's keep-set, the checks, the warnings.
 */
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "orh/base/args.h"
#include "orh/cmd/commands.h"
#include "orh/decide/decide.h"

/* The decision's activation: its result and reason code. */
static void explain_activation(const struct orh_decision *d)
{
	const struct orh_activation_why *w = &d->activation;

	fprintf(stderr, "# activation: %s (%s%s)\n",
		d->act == ORH_ACT_REQUESTED ? "requested" : d->act == ORH_ACT_DEFAULT ? "default"
										     : "skip",
		orh_activation_reason_name(w->reason), w->by_env ? ", by process.env" : "");
}

/* The node's GPUDirect facts as read (orh_gpudirect_read()), and the NCCL verdicts. */
static void explain_nccl(const struct orh_decision *d)
{
	const struct orh_gpudirect *g = &d->node.gpudirect;
	const struct orh_nccl_verdict *v = &d->nccl;

	if (d->node.have_gpudirect)
		fprintf(stderr, "# GPUDirect facts: kernel %s; NVIDIA driver %s%s; peer memory: "
			"memory_peers/nv_mem %s, memory_peers/nv_mem_nc %s, module nvidia_peermem "
			"%s\n", g->read ? g->kernel : "(not read)",
			!g->driver ? "none (no /proc/driver/nvidia/version)"
			: g->driver_version[0] ? g->driver_version : "(version not told)",
			!g->driver ? "" : g->driver_open ? ", open kernel module"
							 : ", proprietary kernel module",
			g->nv_mem ? "yes" : "no", g->nv_mem_nc ? "yes" : "no",
			g->peermem_module ? "yes" : "no");
	if (v->gdr_judged)
		fprintf(stderr, "# GPUDirect RDMA: %s, %s (the image's NCCL: %s)\n",
			orh_gdr_by_name(v->gdr), v->gdr_why, v->nccl[0] ? v->nccl : "not known");
	if (v->net_pinned)
		fprintf(stderr, "# nccl_fail_closed: NCCL_NET=IB: NCCL fails rather than run over "
			"sockets\n");
}

/* The verdicts the appliers act on besides the plan: the memlock check, the sysfs view's
 * keep-set, the checks. */
static void explain_verdicts(const struct orh_decision *d)
{
	const struct orh_sysview *v = &d->sysview;
	const struct orh_sysview_class *ib = &v->cls[0];

	fprintf(stderr, "# memlock check: the container's soft limit is held to %llu bytes; "
		"below it %s\n", (unsigned long long)d->memlock.need,
		d->checks.memlock_refuses ? "the container is refused (on_error = fail, it asked)"
					  : "a warning");
	if (d->sysview_err.code) {
		fprintf(stderr, "# sysfs view: not made (every device shows): %s\n",
			d->sysview_err.msg);
	} else if (d->sysview_read && v->subset) {
		fprintf(stderr, "# sysfs view %s: %zu of %zu devices kept:", v->id, v->kept_devs,
			v->all_devs);
		for (size_t i = 0; i < ib->n_links; i++)
			if (ib->links[i].keep)
				fprintf(stderr, " %s", ib->links[i].name);
		fprintf(stderr, "\n");
	} else if (d->plan.n_nodes > 0) {
		fprintf(stderr, "# sysfs view: none: /sys/class/infiniband* show every device, "
			"all of them given\n");
	}
	if (d->checks.gpudirect[0])
		fprintf(stderr, "# check GPUDirect: %s\n", d->checks.gpudirect);
	if (d->checks.gid[0])
		fprintf(stderr, "# check GID: %s\n", d->checks.gid);
	if (d->checks.ports_down[0])
		fprintf(stderr, "# check ports: %s\n", d->checks.ports_down);
	if (!d->checks.gpudirect[0] && !d->checks.gid[0] && !d->checks.ports_down[0])
		fprintf(stderr, "# checks: GPUDirect, GID and ports pass\n");
	explain_nccl(d);
}

static void explain_plan(const struct orh_ctx *ctx, const struct orh_decision *d)
{
	const struct orh_plan *plan = &d->plan;

	fprintf(stderr, "# config: %s\n", ctx->cfg.path ? ctx->cfg.path : "built-in defaults");
	fprintf(stderr, "# activated: %s\n", d->why);
	explain_activation(d);
	fprintf(stderr, "# preset: %s\n", orh_preset_name(plan->preset));
	for (size_t i = 0; i < plan->n_env; i++)
		fprintf(stderr, "%s=%s  <- %s  -> %s\n", plan->env[i].name, plan->env[i].value,
			plan->env[i].source,
			orh_env_nccl_reads(plan->env[i].name)
				? "/etc/nccl.conf"
				: "PID 1's environment (shim, precreate); /etc/nccl.conf only, with "
				  "a warning (live hook, CDI)");
	for (size_t i = 0; i < plan->n_ports; i++)
		fprintf(stderr, "# %s:%u %s: %s\n", plan->ports[i].dev->name, plan->ports[i].port->num,
			plan->ports[i].used ? "used" : "left out", plan->ports[i].reason);
	for (size_t i = 0; i < plan->n_nodes; i++)
		fprintf(stderr, "# device %s c %u:%u\n", plan->nodes[i].path, plan->nodes[i].major,
			plan->nodes[i].minor);
	if (d->memlock.set && d->memlock.limit == ORH_MEMLOCK_UNLIMITED)
		fprintf(stderr, "# memlock: unlimited\n");
	else if (d->memlock.set)
		fprintf(stderr, "# memlock: %llu bytes%s\n", (unsigned long long)d->memlock.limit,
			d->memlock.lowered ? " (lowered to what the applier can give)" : "");
	else if (d->memlock.user)
		fprintf(stderr, "# memlock: the spec sets RLIMIT_MEMLOCK; left as given\n");
	explain_verdicts(d);
	if (orh_plan_is_empty(plan) && d->asked && ctx->cfg.on_error == ORH_ON_ERROR_FAIL)
		fprintf(stderr, "# no usable RDMA port: the container asked, and on_error = fail "
			"refuses it\n");
	else if (orh_plan_is_empty(plan) && d->asked)
		fprintf(stderr, "# no usable RDMA port: the container asked; it starts unchanged, "
			"with a warning (on_error = warn)\n");
	else if (orh_plan_is_empty(plan))
		fprintf(stderr, "# no usable RDMA port: containers are left unchanged\n");
	for (size_t i = 0; i < d->warnings.n; i++)
		fprintf(stderr, "warning: %s\n", d->warnings.v[i]);
}

int orh_cmd_env(struct orh_ctx *ctx, int argc, char **argv)
{
	struct orh_decision d;
	struct orh_err err = { 0 };
	json_t *spec = NULL;
	const char *spec_path = NULL;
	bool explain = false;
	int r, rc = ORH_EXIT_OK;

	const struct orh_opt opts[] = { { "--explain", NULL, &explain },
					{ "--spec", &spec_path, NULL } };
	const struct orh_args a = { .cmd = "env" };

	if (orh_args_parse(&a, argc, argv, 1, opts, ORH_ARRAY_SIZE(opts), NULL))
		return ORH_EXIT_USAGE;
	if (spec_path && orh_spec_load_file(spec_path, &spec, &err) < 0) {
		orh_log(LOG_ERR, "env: %s", err.msg);
		return ORH_EXIT_FAIL;
	}
	struct orh_decide_in in = {
		.cfg = &ctx->cfg,
		.sysroot = ctx->sysroot,
		.scan = ORH_GIDS_PLAN,
		.spec = spec,
	};
	r = orh_decide(&in, &d, &err);
	if (r < 0) {
		orh_log(LOG_ERR, "env: %s: %s", d.step ? d.step : "decision", err.msg);
		rc = ORH_EXIT_FAIL;
		goto out;
	}
	if (!d.have_plan) {
		if (!explain)
			goto out;
		fprintf(stderr, "# not activated: %s; the container is left unchanged\n", d.why);
		explain_activation(&d);
		for (size_t i = 0; i < d.warnings.n; i++)
			fprintf(stderr, "warning: %s\n", d.warnings.v[i]);
		goto out;
	}
	for (size_t i = 0; i < d.plan.n_env; i++)
		printf("%s=%s\n", d.plan.env[i].name, d.plan.env[i].value);
	if (explain)
		explain_plan(ctx, &d);
out:
	orh_decision_free(&d);
	if (spec)
		json_decref(spec);
	return rc;
}
