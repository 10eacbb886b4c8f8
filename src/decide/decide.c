/* SPDX-License-Identifier: Apache-2.0 */
/* The one decision (include/orh/decide/decide.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "orh/decide/activation.h"
#include "orh/decide/decide.h"
#include "orh/base/rootfs.h"
#include "orh/node/drameta.h"
#include "orh/node/gpu.h"

static void push_all(struct orh_strv *dst, const struct orh_strv *src)
{
	for (size_t i = 0; i < src->n; i++)
		orh_strv_push(dst, orh_xstrdup(src->v[i]));
}

/* Is a GPU subset possible at all (rule 9)? nic_affinity not none, NVIDIA_VISIBLE_DEVICES
 * or /dev/nvidiaN nodes, and no RDMA device of its own (rule 8 decides then). */
static bool gpus_matter(const struct orh_config *cfg, const struct orh_container_facts *f)
{
	return cfg->nic_affinity != ORH_AFFINITY_NONE && !orh_facts_hold_rdma(f) && orh_facts_name_gpus(f);
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

/* The memlock rule: rule 7's limit (the config's, for a container given something), unless
 * the spec sets RLIMIT_MEMLOCK (the user's limit wins); never more than the applier can
 * give (ceiling, 0: none), with a warning. The need the memlock check holds the container
 * to: ORH_MEMLOCK_NEED, or the limit set where that is smaller. */
static void decide_memlock(const struct orh_plan *plan, const struct orh_container_facts *f,
			   uint64_t ceiling, struct orh_decision *d)
{
	struct orh_memlock_verdict *m = &d->memlock;

	m->set = plan->set_memlock && !f->user_memlock;
	m->user = plan->set_memlock && f->user_memlock;
	m->limit = m->set ? plan->memlock : 0;
	if (m->set && ceiling && (m->limit == ORH_MEMLOCK_UNLIMITED || m->limit > ceiling)) {
		orh_strv_pushf(&d->warnings, "RLIMIT_MEMLOCK lowered to the hard limit %llu bytes: "
			       "the runtime cannot raise it here (no CAP_SYS_RESOURCE in the "
			       "initial user namespace)", (unsigned long long)ceiling);
		m->limit = ceiling;
		m->lowered = true;
	}
	m->need = m->set && m->limit < ORH_MEMLOCK_NEED ? m->limit : ORH_MEMLOCK_NEED;
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
	/* rule 9 (in the planner) needs the GPUs the container holds, or those of its claims */
	if (node->gpus && gpus_matter(cfg, &d->facts))
		held_gpus(node, d);
	if (node->gpus && d->dra.n && cfg->nic_affinity != ORH_AFFINITY_NONE) {
		d->facts.gpus = node->gpus;
		d->facts.dra = &d->dra;
	}
	r = orh_plan_build(cfg, node->inv, node->gids, &d->facts, &d->plan, err);
	if (r < 0)
		return r;
	push_all(&d->warnings, &d->plan.warnings);
	if (d->facts.n_devs_dropped)
		orh_strv_pushf(&d->warnings, "config.json: linux.devices lists more than %d "
			       "character devices; %zu were not looked at", ORH_FACTS_MAX_DEVS,
			       d->facts.n_devs_dropped);
	decide_memlock(&d->plan, &d->facts, memlock_ceiling, d);
	orh_decide_checks(cfg, d);
	orh_decide_nccl(cfg, node->gpudirect, NULL, d);
	return 0;
}

/* The sysfs view's keep-set: a container given some of the node's devices sees only those
 * in the RDMA classes of sysfs; the classes are read for it (through the sysroot) only
 * then. One given every device (or nothing) sees the host's, with nothing read. */
static void decide_sysview(const char *sysroot, struct orh_decision *d)
{
	if (!orh_sysview_may_subset(&d->plan, &d->node.inv))
		return;
	if (orh_sysview_read(sysroot, &d->sysview, &d->sysview_err) < 0)
		return;
	d->sysview_read = true;
	orh_sysview_decide(&d->sysview, &d->plan);
}

/* The image checks: the container's root read (orh_image_read(): the providers of the
 * devices the plan gives, where its Python looks from its process.env), then judged. */
static void decide_image(const struct orh_decide_in *in, struct orh_decision *d)
{
	const char *providers[ORH_IMAGE_MAX_PROVIDERS];
	const char **env = NULL;
	const json_t *jenv = in->spec ? orh_spec_env(in->spec) : NULL, *e;
	size_t n = 0, n_env = 0, i;

	if (!d->facts.has_root || in->cfg->image_check == ORH_IMAGE_CHECK_OFF ||
	    orh_plan_is_empty(&d->plan))
		return;
	for (i = 0; i < d->plan.n_ports && n < ORH_IMAGE_MAX_PROVIDERS; i++) {
		const char *p = d->plan.ports[i].used ? orh_image_provider_of(d->plan.ports[i].dev)
						       : NULL;
		bool seen = false;

		for (size_t k = 0; p && k < n; k++)
			seen = seen || !strcmp(providers[k], p);
		if (p && !seen)
			providers[n++] = p;
	}
	env = orh_xcalloc(json_array_size(jenv) + 1, sizeof(*env));
	json_array_foreach(jenv, i, e)
		if (json_is_string(e))
			env[n_env++] = json_string_value(e);
	orh_image_read(d->facts.rootfd, providers, n, env, n_env, &d->image);
	/* the node's own stack, where it may be given: image_supply, and a provider the
	 * image lacks (the verdict tells) */
	orh_decide_image(in->cfg, &d->image, NULL, d);
	if (d->supply.wanted) {
		int hostfd = open(in->sysroot, O_PATH | O_DIRECTORY | O_CLOEXEC);

		d->host_stack = orh_xcalloc(1, sizeof(*d->host_stack));
		if (hostfd >= 0) {
			orh_supply_read(hostfd, d->facts.rootfd, providers, n, env, n_env,
					d->host_stack);
			close(hostfd);
		}
		orh_decide_image(in->cfg, &d->image, d->host_stack, d);
	}
	free(env);
}

/* The container's DRA claims' device metadata (KEP-5304): where its root is held, it holds
 * uverbs nodes and its spec mounts metadata files, those files read through its root, each
 * only where something is mounted on it (not the root's own filesystem: the image's). */
static void decide_dra(const struct orh_decide_in *in, struct orh_decision *d)
{
	const char *paths[ORH_DRA_META_MAX_FILES + 1];
	uint64_t mnt = 0;
	size_t n;

	if (!d->facts.has_root || !in->spec || !orh_facts_hold_uverbs(&d->facts))
		return;
	n = orh_spec_dra_meta_mounts(in->spec, paths, ORH_ARRAY_SIZE(paths));
	if (n && orh_fd_mount_id(d->facts.rootfd, &mnt) < 0) {
		orh_strv_pushf(&d->warnings, "DRA device metadata not read: the mount of the "
			       "container's root is not known");
		return;
	}
	orh_dra_meta_read(d->facts.rootfd, mnt, paths, n < ORH_ARRAY_SIZE(paths) ? n
			  : ORH_ARRAY_SIZE(paths), &d->dra, &d->warnings);
}

/* Read the node (orh_node_read(): from the caller's snapshot, else through the sysroot;
 * the GPUs when a GPU subset is possible or DRA metadata was read; what GPUDirect needs,
 * for a container holding GPUs); then decide from it, and the sysfs view's keep-set last
 * (the classes are read for a container given a subset only). */
static int read_and_decide(const struct orh_decide_in *in, struct orh_decision *out,
			   struct orh_err *err)
{
	const struct orh_config *cfg = in->cfg;
	const char *sysroot = in->sysroot ? in->sysroot : "/";
	bool gpus = gpus_matter(cfg, &out->facts) ||
		    (out->dra.n && cfg->nic_affinity != ORH_AFFINITY_NONE);
	struct orh_node_read_opts opts = {
		.discover = {
			.sysroot = sysroot,
			.gid_scan = in->scan,
			.want = { .family = cfg->gid_family, .roce_version = cfg->roce_version },
			.mad = in->scan == ORH_GIDS_ALL || cfg->management_devices,
			.topology = gpus || out->dra.n, /* the PCI addresses the metadata names */
			.port_wanted = orh_plan_port_usable,
			.gid_wanted = orh_plan_gid_wanted,
		},
		.gpus = gpus,
		.gpudirect = orh_facts_hold_gpus(&out->facts),
		/* a snapshot's devices have PCI addresses only where its reading placed GPUs
		 * (topology): a decision with DRA metadata to match reads the node itself */
		.snapshot = out->dra.n ? NULL : in->snapshot,
		.snapshot_what = in->snapshot_what,
		.cache = out->dra.n ? NULL : in->node_cache,
	};
	struct orh_node *n = &out->node;
	struct orh_gid_reader gids;
	struct orh_node_view node = { .inv = &n->inv, .gids = &gids };
	int r = orh_node_read(&opts, n, err);

	push_all(&out->warnings, &n->warnings);
	if (r < 0)
		return r;
	out->have_plan = true; /* the decision owns the node from here */
	gids = orh_inventory_gids(&n->inv);
	if (gpus) {
		node.gpus = n->have_gpus ? &n->gpus : NULL;
		node.gpus_error = n->gpus_error;
	}
	if (n->have_gpudirect)
		node.gpudirect = &n->gpudirect;
	r = orh_decide_node(cfg, &node, in->memlock_ceiling, out, err);
	if (r == 0) {
		decide_sysview(sysroot, out);
		decide_image(in, out);
		/* the NCCL verdicts again, with the image's NCCL version */
		if (out->image.read)
			orh_decide_nccl(cfg, node.gpudirect, &out->image, out);
	}
	return r;
}

int orh_decide(const struct orh_decide_in *in, struct orh_decision *out, struct orh_err *err)
{
	const json_t *annotations = NULL, *env = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	if (in->spec) {
		annotations = json_object_get(in->spec, "annotations");
		if (!annotations)
			annotations = in->state_annotations;
		env = orh_spec_env(in->spec);
		orh_container_facts_read(in->spec, in->state_annotations, &out->facts);
		orh_activation_enable_field(in->cfg, annotations, env, &out->asked);
	}
	if (in->requested) {
		out->act = ORH_ACT_REQUESTED;
		out->activation.reason = ORH_WHY_CDI;
	} else if (!in->spec) {
		/* a container on the host network that asked for nothing (env, detect, cdi) */
		out->act = ORH_ACT_DEFAULT;
		out->activation.reason = in->cfg->activation == ORH_ACTIVATE_DEVICES
						 ? ORH_WHY_DEVICES : ORH_WHY_HOST;
	} else {
		r = orh_activation_decide(in->cfg, annotations, env, &out->act, &out->activation,
					  &out->facts, &out->warnings, err);
		if (r < 0) {
			out->act = ORH_ACT_REQUESTED; /* it tried to ask */
			orh_activation_sentence(&out->activation, out->why, sizeof(out->why));
			out->step = "the request";
			return r;
		}
	}
	orh_activation_sentence(&out->activation, out->why, sizeof(out->why));
	if (out->act == ORH_ACT_SKIP)
		return 0;

	if (in->container_facts) {
		r = in->container_facts(in->arg, &out->facts, err);
		if (r < 0) {
			out->step = "container";
			return r;
		}
	}
	decide_dra(in, out);
	r = read_and_decide(in, out, err);
	if (r < 0) {
		out->step = "discovery";
		return r;
	}
	return 0;
}

const char *orh_port_source(const struct orh_decision *d, const struct orh_port_choice *c,
			    const struct orh_dra_device **claim)
{
	*claim = NULL;
	if (!c->given)
		return "node";
	*claim = orh_dra_meta_find(&d->dra, c->dev->pci);
	return *claim ? "claim" : "devices";
}

void orh_decision_free(struct orh_decision *d)
{
	free(d->gpus_held);
	orh_dra_meta_free(&d->dra);
	if (d->have_plan)
		orh_plan_free(&d->plan);
	orh_node_free(&d->node);
	orh_sysview_free(&d->sysview);
	orh_image_free(&d->image);
	if (d->host_stack)
		orh_supply_free(d->host_stack);
	free(d->host_stack);
	orh_strv_free(&d->image_verdict.warnings);
	orh_strv_free(&d->warnings);
	memset(d, 0, sizeof(*d));
}
