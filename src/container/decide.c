/* SPDX-License-Identifier: Apache-2.0 */
/* The one decision (include/orh/decide.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide.h"
#include "orh/apply.h"
#include "orh/node.h"

static void push_all(struct orh_strv *dst, const struct orh_strv *src)
{
	for (size_t i = 0; i < src->n; i++)
		orh_strv_push(dst, orh_xstrdup(src->v[i]));
}

/* by: the field of the request that decides enable (orh_activation_enable_field), or
 * NULL */
static void activation_why(const struct orh_decide_in *in, struct orh_decision *d,
			   const char *by)
{
	bool env = by && !strcmp(by, ORH_ENV_ENABLE);
	const char *w;

	if (in->requested)
		w = "the container was given a device of the CDI spec";
	else if (d->facts.sandbox)
		w = "a Kubernetes pod sandbox: never served";
	else if (d->act == ORH_ACT_REQUESTED)
		w = env ? "the container asked (" ORH_ENV_ENABLE "=true in process.env)"
			: "the container asked (" ORH_ANNOTATION_ENABLE "=true)";
	else if (d->act == ORH_ACT_DEFAULT && in->cfg->activation == ORH_ACTIVATE_DEVICES)
		w = "activation = devices, and the container holds RDMA device nodes";
	else if (d->act == ORH_ACT_DEFAULT)
		w = !in->spec ? "a container on the host network" : "activation = always";
	else if (by && !d->asked)
		w = env ? "the container opted out (" ORH_ENV_ENABLE "=false in process.env)"
			: "the container opted out (" ORH_ANNOTATION_ENABLE "=false)";
	else if (in->cfg->activation == ORH_ACTIVATE_DEVICES)
		w = "activation = devices, and the container holds no RDMA device node";
	else
		w = "activation = annotation, and the container did not ask";
	snprintf(d->why, sizeof(d->why), "%s", w);
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
	r = orh_node_plan(in->cfg, in->sysroot ? in->sysroot : "/", in->scan, &out->facts,
			  &out->inv, &out->plan, err);
	if (r < 0) {
		out->step = "discovery";
		return r;
	}
	out->have_plan = true;
	push_all(&out->warnings, &out->inv.warnings);
	push_all(&out->warnings, &out->plan.warnings);
	if (out->facts.n_devs_dropped)
		orh_strv_pushf(&out->warnings, "config.json: linux.devices lists more than %d "
			       "character devices; %zu were not looked at", ORH_FACTS_MAX_DEVS,
			       out->facts.n_devs_dropped);

	/* memlock: the user's limit wins; never ask for more than the applier can give */
	if (out->plan.set_memlock && in->spec && orh_spec_has_rlimit(in->spec, "RLIMIT_MEMLOCK")) {
		out->plan.set_memlock = false;
		out->memlock_user = true;
	}
	if (out->plan.set_memlock && in->memlock_ceiling &&
	    (out->plan.memlock == ORH_MEMLOCK_UNLIMITED ||
	     out->plan.memlock > in->memlock_ceiling)) {
		orh_strv_pushf(&out->warnings, "RLIMIT_MEMLOCK lowered to the hard limit %llu bytes: "
			       "the runtime cannot raise it here (no CAP_SYS_RESOURCE in the "
			       "initial user namespace)",
			       (unsigned long long)in->memlock_ceiling);
		out->plan.memlock = in->memlock_ceiling;
	}
	return 0;
}

void orh_decision_free(struct orh_decision *d)
{
	if (d->have_plan) {
		orh_plan_free(&d->plan);
		orh_inventory_free(&d->inv);
	}
	orh_strv_free(&d->warnings);
	memset(d, 0, sizeof(*d));
}
