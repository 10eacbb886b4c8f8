/* SPDX-License-Identifier: Apache-2.0 */
/* The one decision (include/orh/decide.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide.h"
#include "orh/gpu.h"
#include "orh/apply.h"

static void push_all(struct orh_strv *dst, const struct orh_strv *src)
{
	for (size_t i = 0; i < src->n; i++)
		orh_strv_push(dst, orh_xstrdup(src->v[i]));
}

/* Does the spec give the container GPUs (/dev/nvidiaN nodes, NVIDIA_VISIBLE_DEVICES)? */
static bool names_gpus(const struct orh_container_facts *f)
{
	for (size_t i = 0; i < f->n_devs; i++)
		if (f->devs[i].major == ORH_NVIDIA_MAJOR && f->devs[i].minor < 255)
			return true;
	return f->nvidia_visible;
}

/* A container that activation would serve, left out by request_scope = allocated: it
 * holds no uverbs node. Into d->why; false when that is not why. */
static bool scope_why(const struct orh_decide_in *in, struct orh_decision *d, const char *asked)
{
	const struct orh_config *cfg = in->cfg;
	const char *held = "no RDMA device node";

	if (d->act != ORH_ACT_SKIP || cfg->request_scope != ORH_SCOPE_ALLOCATED ||
	    orh_facts_hold_uverbs(&d->facts))
		return false;
	if (orh_facts_hold_rdma(&d->facts))
		held = "no uverbs node (umad and issm nodes are no HCA)";
	else if (names_gpus(&d->facts))
		held = "no RDMA device node (GPUs alone give no NIC: rule 9 does not apply)";
	if (d->asked)
		snprintf(d->why, sizeof(d->why), "%s, but request_scope = allocated and it holds %s",
			 asked, held);
	else if (cfg->activation == ORH_ACTIVATE_ALWAYS)
		snprintf(d->why, sizeof(d->why), "activation = always, but request_scope = "
			 "allocated and the container holds %s", held);
	else if (cfg->activation == ORH_ACTIVATE_DEVICES && orh_facts_hold_rdma(&d->facts))
		snprintf(d->why, sizeof(d->why), "activation = devices, but request_scope = "
			 "allocated and the container holds %s", held);
	else
		return false;
	return true;
}

/* by: the field of the request that decides enable (orh_activation_enable_field), or
 * NULL */
static void activation_why(const struct orh_decide_in *in, struct orh_decision *d,
			   const char *by)
{
	bool env = by && !strcmp(by, ORH_ENV_ENABLE);
	const char *asked = env ? "the container asked (" ORH_ENV_ENABLE "=true in process.env)"
				: "the container asked (" ORH_ANNOTATION_ENABLE "=true)";
	const char *w;

	if (in->requested)
		w = "the container was given a device of the CDI spec";
	else if (d->facts.sandbox)
		w = "a Kubernetes pod sandbox: never served";
	else if (d->act == ORH_ACT_REQUESTED)
		w = asked;
	else if (d->act == ORH_ACT_DEFAULT && in->cfg->activation == ORH_ACTIVATE_DEVICES)
		w = "activation = devices, and the container holds RDMA device nodes";
	else if (d->act == ORH_ACT_DEFAULT)
		w = !in->spec ? "a container on the host network" : "activation = always";
	else if (by && !d->asked)
		w = env ? "the container opted out (" ORH_ENV_ENABLE "=false in process.env)"
			: "the container opted out (" ORH_ANNOTATION_ENABLE "=false)";
	else if (scope_why(in, d, asked))
		return;
	else if (in->cfg->activation == ORH_ACTIVATE_DEVICES)
		w = "activation = devices, and the container holds no RDMA device node";
	else
		w = "activation = annotation, and the container did not ask";
	snprintf(d->why, sizeof(d->why), "%s", w);
}

/* Is a GPU subset possible at all (rule 9)? NVIDIA_VISIBLE_DEVICES, or /dev/nvidiaN nodes,
 * and no RDMA device of its own (rule 8 decides then). */
static bool gpus_matter(const struct orh_config *cfg, const struct orh_container_facts *f)
{
	return cfg->nic_affinity != ORH_AFFINITY_NONE && !orh_facts_hold_rdma(f) && names_gpus(f);
}

/* Which of the node's GPUs the container holds: its /dev/nvidiaN nodes when the spec
 * lists any (what it can open), else NVIDIA_VISIBLE_DEVICES. */
static enum orh_gpu_ask gpus_held(const struct orh_container_facts *f, const struct orh_gpus *g,
				  bool *held, struct orh_strv *warnings)
{
	size_t n_nodes = 0, n_held = 0;

	for (size_t i = 0; i < f->n_devs; i++) {
		const struct orh_gpu *gpu;

		if (f->devs[i].major != ORH_NVIDIA_MAJOR || f->devs[i].minor >= 255)
			continue;
		n_nodes++;
		gpu = orh_gpu_by_minor(g, f->devs[i].minor);
		if (!gpu) {
			orh_strv_pushf(warnings, "config.json: linux.devices lists /dev/nvidia%u, "
				       "which is no GPU of this node: every NIC is given",
				       f->devs[i].minor);
			return ORH_GPUS_UNKNOWN;
		}
		n_held += !held[gpu - g->v];
		held[gpu - g->v] = true;
	}
	if (n_nodes)
		return n_held == g->n ? ORH_GPUS_ALL : ORH_GPUS_SOME;
	return orh_gpus_resolve(g, f->nvidia_visible, held, warnings);
}

/* Rule 9's input: the GPUs the container holds, into d->gpus_held (left NULL unless a
 * subset of the node's). */
static void held_gpus(const struct orh_node_view *node, struct orh_decision *d)
{
	bool *held = orh_xcalloc(node->gpus->n + 1, sizeof(bool));

	if (gpus_held(&d->facts, node->gpus, held, &d->warnings) != ORH_GPUS_SOME) {
		free(held);
		return;
	}
	d->gpus_held = held;
	d->facts.gpus = node->gpus;
	d->facts.gpus_held = held;
}

int orh_decide_node(const struct orh_config *cfg, const struct orh_node_view *node,
		    uint64_t memlock_ceiling, struct orh_decision *d, struct orh_err *err)
{
	int r;

	push_all(&d->warnings, &node->inv->warnings);
	if (node->gpus_error)
		orh_strv_pushf(&d->warnings, "GPUs not read (%s): every NIC is given",
			       node->gpus_error);
	if (node->gpus)
		push_all(&d->warnings, &node->gpus->warnings);
	/* rule 9 (in the planner) needs the GPUs the container holds */
	if (node->gpus && gpus_matter(cfg, &d->facts))
		held_gpus(node, d);
	r = orh_plan_build(cfg, node->inv, node->gids, &d->facts, &d->plan, err);
	if (r < 0)
		return r;
	push_all(&d->warnings, &d->plan.warnings);
	if (d->facts.n_devs_dropped)
		orh_strv_pushf(&d->warnings, "config.json: linux.devices lists more than %d "
			       "character devices; %zu were not looked at", ORH_FACTS_MAX_DEVS,
			       d->facts.n_devs_dropped);
	/* memlock: the user's limit wins; never ask for more than the applier can give */
	if (d->plan.set_memlock && d->facts.user_memlock) {
		d->plan.set_memlock = false;
		d->memlock_user = true;
	}
	if (d->plan.set_memlock && memlock_ceiling &&
	    (d->plan.memlock == ORH_MEMLOCK_UNLIMITED || d->plan.memlock > memlock_ceiling)) {
		orh_strv_pushf(&d->warnings, "RLIMIT_MEMLOCK lowered to the hard limit %llu bytes: "
			       "the runtime cannot raise it here (no CAP_SYS_RESOURCE in the "
			       "initial user namespace)", (unsigned long long)memlock_ceiling);
		d->plan.memlock = memlock_ceiling;
	}
	return 0;
}

/* Read the node through the sysroot (discovery, and the GPUs when a GPU subset is
 * possible), then decide. */
static int read_and_decide(const struct orh_decide_in *in, struct orh_decision *out,
			   struct orh_err *err)
{
	const struct orh_config *cfg = in->cfg;
	const char *sysroot = in->sysroot ? in->sysroot : "/";
	bool gpus = gpus_matter(cfg, &out->facts);
	struct orh_discover_opts opts = {
		.sysroot = sysroot,
		.gid_scan = in->scan,
		.want = { .family = cfg->gid_family, .roce_version = cfg->roce_version },
		.mad = in->scan == ORH_GIDS_ALL || cfg->management_devices,
		.topology = gpus,
		.port_wanted = orh_plan_port_usable,
		.gid_wanted = orh_plan_gid_wanted,
	};
	struct orh_gid_reader gids;
	struct orh_gpus g = { 0 };
	struct orh_err gerr = { 0 };
	struct orh_node_view node = { .inv = &out->inv, .gids = &gids };
	int r;

	r = orh_discover(&opts, &out->inv, err);
	if (r < 0)
		return r;
	out->have_plan = true; /* the decision owns the inventory from here */
	gids = orh_inventory_gids(&out->inv);
	if (gpus) {
		if (orh_discover_gpus(sysroot, ORH_GPU_SCAN_DRIVER, &g, &gerr) < 0)
			node.gpus_error = gerr.msg;
		else
			node.gpus = &g;
	}
	r = orh_decide_node(cfg, &node, in->memlock_ceiling, out, err);
	orh_gpus_free(&g);
	return r;
}

int orh_decide(const struct orh_decide_in *in, struct orh_decision *out, struct orh_err *err)
{
	const json_t *annotations = NULL, *env = NULL;
	const char *by = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	if (in->spec) {
		annotations = json_object_get(in->spec, "annotations");
		if (!annotations)
			annotations = in->state_annotations;
		env = orh_spec_env(in->spec);
		orh_container_facts_read(in->spec, in->state_annotations, &out->facts);
		by = orh_activation_enable_field(in->cfg, annotations, env, &out->asked);
	}
	if (in->requested) {
		out->act = ORH_ACT_REQUESTED;
	} else if (!in->spec) {
		out->act = ORH_ACT_DEFAULT;
	} else {
		r = orh_activation_decide(in->cfg, annotations, env, &out->act, &out->facts,
					  &out->warnings, err);
		if (r < 0) {
			out->act = ORH_ACT_REQUESTED; /* it tried to ask */
			snprintf(out->why, sizeof(out->why), "a bad request");
			out->step = "the request";
			return r;
		}
	}
	activation_why(in, out, by);
	if (out->act == ORH_ACT_SKIP)
		return 0;

	if (in->container_facts) {
		r = in->container_facts(in->arg, &out->facts, err);
		if (r < 0) {
			out->step = "container";
			return r;
		}
	}
	r = read_and_decide(in, out, err);
	if (r < 0) {
		out->step = "discovery";
		return r;
	}
	return 0;
}

void orh_decision_free(struct orh_decision *d)
{
	free(d->gpus_held);
	if (d->have_plan) {
		orh_plan_free(&d->plan);
		orh_inventory_free(&d->inv);
	}
	orh_strv_free(&d->warnings);
	memset(d, 0, sizeof(*d));
}
