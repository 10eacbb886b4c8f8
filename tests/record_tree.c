/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record as a jansson tree, built as src/apply/record.c built it before the record's
 * text was written from values (src/apply/record_text.c): tests/test_record.c compares
 * json_dumps() of this tree with orh_record_text(), byte for byte.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "orh/base/json.h"
#include "orh/apply/record.h"
#include "orh/apply/sysview.h"
#include "record_tree.h"


/* A time as the record writes it: milliseconds to the microsecond (orh_json_put_ms()),
 * NULL for what it does not write. */
static json_t *ms_json(double v)
{
	if (!isfinite(v) || v >= 1e15 || v <= -1e15)
		return NULL;
	return json_real((double)(long long)(v * 1000 + (v < 0 ? -0.5 : 0.5)) / 1000);
}

static json_t *limit_json(uint64_t v)
{
	return v == UINT64_MAX ? json_string("unlimited") : json_integer((json_int_t)v);
}

static const char *act_name(enum orh_activation_result a)
{
	return a == ORH_ACT_REQUESTED ? "requested" : a == ORH_ACT_DEFAULT ? "default" : "skip";
}

static json_t *strv_json(const struct orh_strv *sv)
{
	json_t *a = json_array();

	for (size_t i = 0; sv && i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

/* Text from the image (a path, a file name), safe in the record: valid UTF-8, no control
 * characters (orh_text_escape). */
static json_t *image_text(const char *s)
{
	_cleanup_free_ char *t = orh_text_escape(s ? s : "");

	return json_string(t);
}

/* The image checks: what the image's libibverbs would load for each device given, its NCCL
 * copies (the one PyTorch loads marked), what was not read, and the reading's cost. */
static json_t *image_json(const struct orh_decision *d)
{
	const struct orh_image *img = &d->image;
	const struct orh_image_verdict *v = &d->image_verdict;
	json_t *o = json_object(), *devs = json_array(), *nccl = json_array();
	json_t *notes = json_array();

	json_object_set_new(o, "libibverbs", img->verbs[0] ? image_text(img->verbs) : json_null());
	if (img->verbs[0])
		json_object_set_new(o, "found_by", json_string(img->verbs_from_cache
							       ? "ld.so.cache"
							       : "the loader's directories"));
	json_object_set_new(o, "abi", img->abi ? json_integer(img->abi) : json_null());
	json_object_set_new(o, "driver_files", json_integer((json_int_t)img->n_driver_files));
	for (size_t i = 0; i < v->n_devs; i++) {
		const struct orh_image_provider *p = v->devs[i].found;
		json_t *e = json_pack("{s:s, s:o}", "device", v->devs[i].dev->name, "provider",
				      v->devs[i].provider ? json_string(v->devs[i].provider)
							  : json_null());

		json_object_set_new(e, "state", json_string(p ? orh_provider_state_name(p->state)
							     : "not judged (provider not known)"));
		if (p && p->config[0])
			json_object_set_new(e, "config", image_text(p->config));
		if (p && p->library[0])
			json_object_set_new(e, "library", image_text(p->library));
		if (p && p->other[0])
			json_object_set_new(e, "other_abi", json_pack("{s:o, s:i}", "library",
					    image_text(p->other), "abi", (int)p->other_abi));
		json_array_append_new(devs, e);
	}
	json_object_set_new(o, "devices", devs);
	json_object_set_new(o, "usable", json_integer((json_int_t)v->usable));
	for (size_t i = 0; i < img->n_nccl; i++) {
		const struct orh_image_nccl *c = &img->nccl[i];
		json_t *e = json_pack("{s:o, s:s, s:o, s:b}", "version",
				      c->version[0] ? json_string(c->version) : json_null(), "from",
				      c->from == ORH_NCCL_PIP ? "pip" : "library", "path",
				      image_text(c->path), "pytorch", c->pytorch);

		if (c->package[0])
			json_object_set_new(e, "package", image_text(c->package));
		json_array_append_new(nccl, e);
	}
	json_object_set_new(o, "nccl", nccl);
	for (size_t i = 0; i < img->notes.n; i++)
		json_array_append_new(notes, image_text(img->notes.v[i]));
	json_object_set_new(o, "notes", notes);
	if (d->supply.wanted) {
		const struct orh_supply *su = &d->supply;
		json_t *files = json_array(), *provs = json_array();

		for (size_t i = 0; i < su->n_files; i++)
			json_array_append_new(files, json_pack("{s:o, s:o}", "name",
					      image_text(su->files[i]->name), "from",
					      image_text(su->files[i]->host)));
		for (size_t i = 0; i < su->n_providers; i++)
			json_array_append_new(provs, json_string(su->providers[i]));
		json_object_set_new(o, "supply", json_pack("{s:b, s:b, s:o, s:o, s:o}", "given",
				    su->supply, "libibverbs", su->verbs, "files", files,
				    "providers", provs, "why_not", su->why_not[0] ?
				    image_text(su->why_not) : json_null()));
	}
	json_object_set_new(o, "opens", json_integer(img->opens));
	json_object_set_new(o, "time_ms", ms_json(img->ms));
	return o;
}

/* The plan: the HCAs used, the GID index per port, the socket interface, each port's
 * reason, the nodes and the memlock the decision sets. */
static json_t *plan_json(const struct orh_decision *d, const char *netns_if)
{
	const struct orh_plan *p = &d->plan;
	const struct orh_env_entry *ifname = orh_plan_env_get(p, "NCCL_SOCKET_IFNAME");
	static const char *const port_keys[] = { "hca", "port", "state", "used", "reason" };
	json_t *ports = json_array(), *nodes = json_array(), *o;

	for (size_t i = 0; i < p->n_ports; i++) {
		const struct orh_port_choice *c = &p->ports[i];
		json_t *vals[] = {
			json_string(c->dev->name), json_integer(c->port->num),
			json_string(c->port->state_text), json_boolean(c->used),
			json_string(c->reason),
		};
		const struct orh_dra_device *m = NULL;

		o = orh_json_object_of(ORH_ARRAY_SIZE(port_keys), port_keys, vals);
		if (o)
			json_object_set_new(o, "from", json_string(orh_port_source(d, c, &m)));
		if (o && m)
			json_object_set_new(o, "claim", json_pack("{s:s, s:b, s:s, s:s, s:s}",
				"name", m->from.claim, "template", m->from.template, "request",
				m->from.request, "driver", m->from.driver, "device", m->name));
		if (o && c->gid_index >= 0) {
			json_object_set_new(o, "gid_index", json_integer(c->gid_index));
			json_object_set_new(o, "gid_from_container",
					    json_boolean(c->gid_from_container));
		}
		json_array_append_new(ports, o);
	}
	for (size_t i = 0; i < p->n_nodes; i++)
		json_array_append_new(nodes, json_string(p->nodes[i].path));
	o = json_pack("{s:o, s:o, s:s, s:s}", "ports", ports, "nodes", nodes,
		      "preset", orh_preset_name(p->preset),
		      "socket_ifname", ifname ? ifname->value : "");
	json_object_set_new(o, "netns_default_if", json_string(netns_if ? netns_if : ""));
	if (d->memlock.set)
		json_object_set_new(o, "memlock", limit_json(d->memlock.limit));
	return o;
}

/* The character devices the spec gave the container (rule 8), by number. */
static json_t *given_json(const struct orh_container_facts *f)
{
	json_t *a = json_array();

	for (size_t i = 0; i < f->n_devs; i++) {
		char s[32];

		snprintf(s, sizeof(s), "%u:%u", f->devs[i].major, f->devs[i].minor);
		json_array_append_new(a, json_string(s));
	}
	return a;
}

static json_t *steps_json(const struct orh_record_in *in)
{
	json_t *o = json_object();

	for (size_t i = 0; i < in->n_steps && i < ORH_ARRAY_SIZE(in->step_names); i++)
		json_object_set_new(o, in->step_names[i], ms_json(in->step_ms[i]));
	return o;
}

static void set_nodes(json_t *rec, const struct orh_record_in *in)
{
	if (in->nodes_error)
		json_object_set_new(rec, "nodes", json_pack("{s:s}", "error", in->nodes_error));
	else if (in->nodes_created >= 0)
		json_object_set_new(rec, "nodes",
				    json_pack("{s:I, s:I, s:I}", "created",
					      (json_int_t)in->nodes_created, "kept",
					      (json_int_t)in->nodes_kept, "bound",
					      (json_int_t)in->nodes_bound));
}

static void set_memlock(json_t *rec, const struct orh_record_in *in)
{
	json_t *m = json_object();

	if (in->memlock)
		json_object_set_new(m, "step", json_string(in->memlock));
	if (in->memlock_known) {
		json_object_set_new(m, "before", json_pack("{s:o, s:o}",
			"soft", limit_json(in->memlock_soft_before),
			"hard", limit_json(in->memlock_hard_before)));
		json_object_set_new(m, "after", json_pack("{s:o, s:o}",
			"soft", limit_json(in->memlock_soft_after),
			"hard", limit_json(in->memlock_hard_after)));
	}
	if (in->spec_memlock_set)
		json_object_set_new(m, "in_spec", limit_json(in->spec_memlock));
	json_object_set_new(rec, "memlock", m);
}

static void set_conf(json_t *rec, const struct orh_record_in *in)
{
	json_t *c;

	if (!in->conf)
		return;
	c = json_pack("{s:s, s:s, s:I}", "path", "/etc/nccl.conf", "result", in->conf,
		      "added", (json_int_t)in->conf_added);
	if (in->conf_bound_from && *in->conf_bound_from)
		json_object_set_new(c, "bind_mounted_from", json_string(in->conf_bound_from));
	if (in->conf_record_off && *in->conf_record_off)
		json_object_set_new(c, "record_left_out", json_string(in->conf_record_off));
	if (in->conf_kept)
		json_object_set_new(c, "image_lines_kept", strv_json(in->conf_kept));
	json_object_set_new(rec, "nccl_conf", c);
}

json_t *record_tree_build(const struct orh_record_in *in)
{
	const struct orh_decision *d = in->d;
	json_t *rec, *warn;

	rec = json_pack("{s:i, s:s, s:s, s:I, s:I}", "version", ORH_RECORD_VERSION,
			"id", in->id ? in->id : "", "stage", in->stage,
			"pid", (json_int_t)in->pid, "start_time", (json_int_t)in->start_time);
	if (in->ns.pid)
		json_object_set_new(rec, "pid_ns", json_integer((json_int_t)in->ns.pid));
	if (in->ns.mnt)
		json_object_set_new(rec, "mnt_ns", json_integer((json_int_t)in->ns.mnt));
	if (in->edited_by)
		json_object_set_new(rec, "edited_by", json_string(in->edited_by));
	json_object_set_new(rec, "activation", json_pack("{s:s, s:s, s:b}", "result",
				act_name(d->act), "why", d->why, "asked", d->asked));
	json_object_set_new(rec, "given_devices", given_json(&d->facts));
	if (in->spec_devices >= 0)
		json_object_set_new(rec, "spec_devices", json_integer(in->spec_devices));
	if (d->have_plan) {
		json_object_set_new(rec, "plan", plan_json(d, in->netns_if));
		json_object_set_new(rec, "node_read", json_string(in->node_read ? in->node_read
						: in->node_from || in->bundle ? "by the runtime shim"
									      : "by this stage"));
	}
	if (in->node_from)
		json_object_set_new(rec, "node_from", json_string(in->node_from));
	if (d->have_plan && (d->nccl.gdr_judged || d->nccl.net_pinned || d->nccl.record_why[0])) {
		json_t *n = json_object();

		if (d->nccl.gdr_judged) {
			json_object_set_new(n, "gpudirect",
					    json_string(orh_gdr_by_name(d->nccl.gdr)));
			json_object_set_new(n, "gpudirect_why", json_string(d->nccl.gdr_why));
			json_object_set_new(n, "dmabuf_disabled", json_boolean(d->nccl.dmabuf_off));
		}
		json_object_set_new(n, "image_nccl",
				    json_string(d->nccl.nccl[0] ? d->nccl.nccl : "unknown"));
		json_object_set_new(n, "net_pinned", json_boolean(d->nccl.net_pinned));
		if (d->nccl.record_why[0])
			json_object_set_new(n, "record", json_string(d->nccl.record_why));
		json_object_set_new(rec, "nccl", n);
	}
	if (in->bundle && in->bundle_config) {
		json_t *b = json_pack("{s:s, s:I, s:I, s:I}", "path", in->bundle,
				      "config_dev", (json_int_t)in->bundle_config->st_dev,
				      "config_ino", (json_int_t)in->bundle_config->st_ino,
				      "since", (json_int_t)time(NULL));

		if (in->runtime_state)
			json_object_set_new(b, "runtime_state", json_string(in->runtime_state));
		json_object_set_new(rec, "bundle", b);
	}
	if (d->have_plan && d->image_verdict.checked)
		json_object_set_new(rec, "image", image_json(d));
	set_nodes(rec, in);
	if (in->sysfs_view[0])
		json_object_set_new(rec, "sysfs_view", json_pack("s++", ORH_SYSVIEW_DIR, "/",
								 in->sysfs_view));
	if (in->cgroup)
		json_object_set_new(rec, "cgroup", json_string(in->cgroup));
	set_memlock(rec, in);
	set_conf(rec, in);
	warn = strv_json(&d->warnings);
	for (size_t i = 0; d->have_plan && i < d->image_verdict.warnings.n; i++)
		json_array_append_new(warn, image_text(d->image_verdict.warnings.v[i]));
	for (size_t i = 0; in->warnings && i < in->warnings->n; i++)
		json_array_append_new(warn, json_string(in->warnings->v[i]));
	json_object_set_new(rec, "warnings", warn);
	json_object_set_new(rec, "time_ms", json_pack("{s:o, s:o}", "total", ms_json(in->total_ms),
						      "steps", steps_json(in)));
	if (in->shim_ms)
		json_object_set(json_object_get(rec, "time_ms"), "shim", (json_t *)in->shim_ms);
	return rec;
}

bool record_text_is_tree(const char *text, size_t len, const json_t *tree, char *why,
			 size_t size)
{
	json_error_t e;
	json_t *back = json_loadb(text, len, 0, &e);
	bool same = back && json_equal(back, (json_t *)tree);

	if (!back)
		snprintf(why, size, "not JSON: %s", e.text);
	else if (!same)
		snprintf(why, size, "another value than the tree's");
	json_decref(back);
	return same;
}
