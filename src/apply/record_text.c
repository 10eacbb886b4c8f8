/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record's JSON text (orh/apply/record.h: orh_record_text), written from the values of a
 * struct orh_record_in straight into one buffer, without a jansson tree: building the tree,
 * writing it and freeing it took the live hook 441,000 instructions on the scale node,
 * this 85,000 (callgrind, docs/PERFORMANCE.md): the tree was the most of the hook's work
 * that its floor does not do.
 *
 * The text is byte for byte what json_dumps(JSON_COMPACT) wrote of the tree the record was
 * built as before (tests/test_record.c keeps that builder and compares the two), its keys
 * in that order. Where the tree had no place for a value, the text has none either: a
 * string that is not valid UTF-8 (json_string() refuses it: an interface name, a line of
 * the image's /etc/nccl.conf), or a real that is NaN or infinite, leaves out its member or
 * its array element, or the whole object that json_pack() made with it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orh/base/json.h"
#include "orh/apply/record.h"
#include "orh/apply/sysview.h"

/* A comma before a member or an element, but the first of its object or array. */
static void sep(struct orh_buf *o)
{
	char c = o->p[o->n - 1];

	if (c != '{' && c != '[')
		orh_buf_addc(o, ',');
}

/* A member's key: k is its literal text, "\"name\":" */
static void key(struct orh_buf *o, const char *k, size_t n)
{
	sep(o);
	orh_buf_add(o, k, n);
}
#define KEY(o, name) key(o, "\"" name "\":", sizeof("\"" name "\":") - 1)

/* Take back what was written after mark: a member or an element left out. false. */
static bool undo(struct orh_buf *o, size_t mark)
{
	o->n = mark;
	o->p[mark] = '\0';
	return false;
}

/* literal text */
#define ADD(o, text) orh_buf_add(o, text, sizeof(text) - 1)

static void set_str_at(struct orh_buf *o, const char *k, size_t n, const char *s)
{
	size_t mark = o->n;

	key(o, k, n);
	if (!orh_json_put_str(o, s))
		undo(o, mark);
}
/* A string member, left out where s is NULL or not UTF-8 (json_object_set_new() of a
 * NULL value) */
#define SET_STR(o, name, s) set_str_at(o, "\"" name "\":", sizeof("\"" name "\":") - 1, s)

/* An array's string element, left out where s is not UTF-8 */
static void add_str(struct orh_buf *o, const char *s)
{
	size_t mark = o->n;

	sep(o);
	if (!orh_json_put_str(o, s))
		undo(o, mark);
}

static void put_bool(struct orh_buf *o, bool b)
{
	if (b)
		ADD(o, "true");
	else
		ADD(o, "false");
}

static void put_limit(struct orh_buf *o, uint64_t v)
{
	if (v == UINT64_MAX)
		ADD(o, "\"unlimited\"");
	else
		orh_json_put_int(o, (json_int_t)v);
}

/* Text from the image (a path, a file name), safe in the record: valid UTF-8, no control
 * characters (orh_text_escape). */
static bool put_image_text(struct orh_buf *o, const char *s)
{
	_cleanup_free_ char *t = orh_text_escape(s ? s : "");

	return orh_json_put_str(o, t);
}

static const char *act_name(enum orh_activation_result a)
{
	return a == ORH_ACT_REQUESTED ? "requested" : a == ORH_ACT_DEFAULT ? "default" : "skip";
}

/* version, id, stage, pid, start_time: false where the id or the stage is no string */
static bool put_head(struct orh_buf *o, const struct orh_record_in *in)
{
	orh_buf_addc(o, '{');
	KEY(o, "version");
	orh_json_put_int(o, ORH_RECORD_VERSION);
	KEY(o, "id");
	if (!orh_json_put_str(o, in->id ? in->id : ""))
		return false;
	KEY(o, "stage");
	if (!orh_json_put_str(o, in->stage))
		return false;
	KEY(o, "pid");
	orh_json_put_int(o, (json_int_t)in->pid);
	KEY(o, "start_time");
	orh_json_put_int(o, (json_int_t)in->start_time);
	if (in->ns.pid) {
		KEY(o, "pid_ns");
		orh_json_put_int(o, (json_int_t)in->ns.pid);
	}
	if (in->ns.mnt) {
		KEY(o, "mnt_ns");
		orh_json_put_int(o, (json_int_t)in->ns.mnt);
	}
	SET_STR(o, "edited_by", in->edited_by);
	return true;
}

static bool put_activation(struct orh_buf *o, const struct orh_decision *d)
{
	size_t mark = o->n;

	KEY(o, "activation");
	orh_buf_addc(o, '{');
	KEY(o, "result");
	orh_json_put_str(o, act_name(d->act));
	KEY(o, "why");
	if (!orh_json_put_str(o, d->why))
		return undo(o, mark);
	KEY(o, "asked");
	put_bool(o, d->asked);
	orh_buf_addc(o, '}');
	return true;
}

/* The character devices the spec gave the container (rule 8), by number: "major:minor". */
static void put_given(struct orh_buf *o, const struct orh_container_facts *f)
{
	KEY(o, "given_devices");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < f->n_devs; i++) {
		sep(o);
		orh_buf_addc(o, '"');
		orh_json_put_int(o, f->devs[i].major);
		orh_buf_addc(o, ':');
		orh_json_put_int(o, f->devs[i].minor);
		orh_buf_addc(o, '"');
	}
	orh_buf_addc(o, ']');
}

/* The DRA claim a port's HCA came from (orh_port_source()). */
static void put_claim(struct orh_buf *o, const struct orh_dra_device *m)
{
	KEY(o, "claim");
	orh_buf_addc(o, '{');
	SET_STR(o, "name", m->from.claim);
	KEY(o, "template");
	put_bool(o, m->from.template);
	SET_STR(o, "request", m->from.request);
	SET_STR(o, "driver", m->from.driver);
	SET_STR(o, "device", m->name);
	orh_buf_addc(o, '}');
}

/* One port of the plan; left out where a string of it is not UTF-8. */
static bool put_port(struct orh_buf *o, const struct orh_decision *d,
		     const struct orh_port_choice *c)
{
	const struct orh_dra_device *claim = NULL;
	const char *from = orh_port_source(d, c, &claim);
	size_t mark = o->n;

	sep(o);
	orh_buf_addc(o, '{');
	KEY(o, "hca");
	if (!orh_json_put_str(o, c->dev->name))
		return undo(o, mark);
	KEY(o, "port");
	orh_json_put_int(o, c->port->num);
	KEY(o, "state");
	if (!orh_json_put_str(o, c->port->state_text))
		return undo(o, mark);
	KEY(o, "used");
	put_bool(o, c->used);
	KEY(o, "reason");
	if (!orh_json_put_str(o, c->reason))
		return undo(o, mark);
	SET_STR(o, "from", from);
	if (claim)
		put_claim(o, claim);
	if (c->gid_index >= 0) {
		KEY(o, "gid_index");
		orh_json_put_int(o, c->gid_index);
		KEY(o, "gid_from_container");
		put_bool(o, c->gid_from_container);
	}
	orh_buf_addc(o, '}');
	return true;
}

/* The plan: the HCAs used, the GID index per port, the socket interface, each port's
 * reason, the nodes and the memlock the decision sets. */
static bool put_plan(struct orh_buf *o, const struct orh_decision *d, const char *netns_if)
{
	const struct orh_plan *p = &d->plan;
	const struct orh_env_entry *ifname = orh_plan_env_get(p, "NCCL_SOCKET_IFNAME");
	size_t mark = o->n;

	KEY(o, "plan");
	orh_buf_addc(o, '{');
	KEY(o, "ports");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < p->n_ports; i++)
		put_port(o, d, &p->ports[i]);
	orh_buf_addc(o, ']');
	KEY(o, "nodes");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < p->n_nodes; i++)
		add_str(o, p->nodes[i].path);
	orh_buf_addc(o, ']');
	KEY(o, "preset");
	if (!orh_json_put_str(o, orh_preset_name(p->preset)))
		return undo(o, mark);
	KEY(o, "socket_ifname");
	if (!orh_json_put_str(o, ifname ? ifname->value : ""))
		return undo(o, mark);
	SET_STR(o, "netns_default_if", netns_if ? netns_if : "");
	if (d->memlock.set) {
		KEY(o, "memlock");
		put_limit(o, d->memlock.limit);
	}
	orh_buf_addc(o, '}');
	return true;
}

/* The NCCL verdicts (struct orh_nccl_verdict): GPUDirect RDMA for a container holding
 * GPUs, how or why not, against which NCCL; the settings written for them. */
static void put_nccl(struct orh_buf *o, const struct orh_nccl_verdict *v)
{
	if (!v->gdr_judged && !v->net_pinned && !v->record_why[0])
		return;
	KEY(o, "nccl");
	orh_buf_addc(o, '{');
	if (v->gdr_judged) {
		SET_STR(o, "gpudirect", orh_gdr_by_name(v->gdr));
		SET_STR(o, "gpudirect_why", v->gdr_why);
		KEY(o, "dmabuf_disabled");
		put_bool(o, v->dmabuf_off);
	}
	SET_STR(o, "image_nccl", v->nccl[0] ? v->nccl : "unknown");
	KEY(o, "net_pinned");
	put_bool(o, v->net_pinned);
	if (v->record_why[0])
		SET_STR(o, "record", v->record_why);
	orh_buf_addc(o, '}');
}

static bool put_bundle(struct orh_buf *o, const struct orh_record_in *in)
{
	size_t mark = o->n;

	KEY(o, "bundle");
	orh_buf_addc(o, '{');
	KEY(o, "path");
	if (!orh_json_put_str(o, in->bundle))
		return undo(o, mark);
	KEY(o, "config_dev");
	orh_json_put_int(o, (json_int_t)in->bundle_config->st_dev);
	KEY(o, "config_ino");
	orh_json_put_int(o, (json_int_t)in->bundle_config->st_ino);
	KEY(o, "since");
	orh_json_put_int(o, (json_int_t)time(NULL));
	SET_STR(o, "runtime_state", in->runtime_state);
	orh_buf_addc(o, '}');
	return true;
}

/* What the image's libibverbs would load for one device given. */
static bool put_image_dev(struct orh_buf *o, const struct orh_image_dev *dv)
{
	const struct orh_image_provider *p = dv->found;
	size_t mark = o->n, m;

	sep(o);
	orh_buf_addc(o, '{');
	KEY(o, "device");
	if (!orh_json_put_str(o, dv->dev->name))
		return undo(o, mark);
	KEY(o, "provider");
	if (!dv->provider)
		ADD(o, "null");
	else if (!orh_json_put_str(o, dv->provider))
		return undo(o, mark);
	SET_STR(o, "state", p ? orh_provider_state_name(p->state)
			      : "not judged (provider not known)");
	m = o->n;
	if (p && p->config[0]) {
		KEY(o, "config");
		if (!put_image_text(o, p->config))
			undo(o, m);
	}
	m = o->n;
	if (p && p->library[0]) {
		KEY(o, "library");
		if (!put_image_text(o, p->library))
			undo(o, m);
	}
	m = o->n;
	if (p && p->other[0]) {
		KEY(o, "other_abi");
		orh_buf_addc(o, '{');
		KEY(o, "library");
		if (!put_image_text(o, p->other)) {
			undo(o, m);
		} else {
			KEY(o, "abi");
			orh_json_put_int(o, (int)p->other_abi);
			orh_buf_addc(o, '}');
		}
	}
	orh_buf_addc(o, '}');
	return true;
}

/* One NCCL copy of the image. */
static bool put_image_nccl(struct orh_buf *o, const struct orh_image_nccl *c)
{
	size_t mark = o->n, m;

	sep(o);
	orh_buf_addc(o, '{');
	KEY(o, "version");
	if (!c->version[0])
		ADD(o, "null");
	else if (!orh_json_put_str(o, c->version))
		return undo(o, mark);
	KEY(o, "from");
	orh_json_put_str(o, c->from == ORH_NCCL_PIP ? "pip" : "library");
	KEY(o, "path");
	if (!put_image_text(o, c->path))
		return undo(o, mark);
	KEY(o, "pytorch");
	put_bool(o, c->pytorch);
	m = o->n;
	if (c->package[0]) {
		KEY(o, "package");
		if (!put_image_text(o, c->package))
			undo(o, m);
	}
	orh_buf_addc(o, '}');
	return true;
}

/* image_supply: whether the node's stack was given, which files from where, or why not. */
static void put_supply(struct orh_buf *o, const struct orh_supply *s)
{
	size_t m;

	KEY(o, "supply");
	orh_buf_addc(o, '{');
	KEY(o, "given");
	put_bool(o, s->supply);
	KEY(o, "libibverbs");
	put_bool(o, s->verbs);
	KEY(o, "files");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < s->n_files; i++) {
		m = o->n;
		sep(o);
		orh_buf_addc(o, '{');
		KEY(o, "name");
		if (!put_image_text(o, s->files[i]->name)) {
			undo(o, m);
			continue;
		}
		KEY(o, "from");
		if (!put_image_text(o, s->files[i]->host)) {
			undo(o, m);
			continue;
		}
		orh_buf_addc(o, '}');
	}
	orh_buf_addc(o, ']');
	KEY(o, "providers");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < s->n_providers; i++)
		add_str(o, s->providers[i]);
	orh_buf_addc(o, ']');
	m = o->n;
	KEY(o, "why_not");
	if (!s->why_not[0])
		ADD(o, "null");
	else if (!put_image_text(o, s->why_not))
		undo(o, m);
	orh_buf_addc(o, '}');
}

/* The image checks: what the image's libibverbs would load for each device given, its NCCL
 * copies (the one PyTorch loads marked), what was not read, whether the node's stack was
 * given (image_supply), and the reading's cost. */
static void put_image(struct orh_buf *o, const struct orh_decision *d)
{
	const struct orh_image *img = &d->image;
	const struct orh_image_verdict *v = &d->image_verdict;
	size_t m;

	KEY(o, "image");
	orh_buf_addc(o, '{');
	m = o->n;
	KEY(o, "libibverbs");
	if (!img->verbs[0])
		ADD(o, "null");
	else if (!put_image_text(o, img->verbs))
		undo(o, m);
	if (img->verbs[0]) {
		KEY(o, "found_by");
		orh_json_put_str(o, img->verbs_from_cache ? "ld.so.cache"
							  : "the loader's directories");
	}
	KEY(o, "abi");
	if (img->abi)
		orh_json_put_int(o, img->abi);
	else
		ADD(o, "null");
	KEY(o, "driver_files");
	orh_json_put_int(o, (json_int_t)img->n_driver_files);
	KEY(o, "devices");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < v->n_devs; i++)
		put_image_dev(o, &v->devs[i]);
	orh_buf_addc(o, ']');
	KEY(o, "usable");
	orh_json_put_int(o, (json_int_t)v->usable);
	KEY(o, "nccl");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < img->n_nccl; i++)
		put_image_nccl(o, &img->nccl[i]);
	orh_buf_addc(o, ']');
	KEY(o, "notes");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < img->notes.n; i++) {
		m = o->n;
		sep(o);
		if (!put_image_text(o, img->notes.v[i]))
			undo(o, m);
	}
	orh_buf_addc(o, ']');
	if (d->supply.wanted)
		put_supply(o, &d->supply);
	KEY(o, "opens");
	orh_json_put_int(o, img->opens);
	m = o->n;
	KEY(o, "time_ms");
	if (!orh_json_put_ms(o, img->ms))
		undo(o, m);
	orh_buf_addc(o, '}');
}

static bool put_nodes(struct orh_buf *o, const struct orh_record_in *in)
{
	size_t mark = o->n;

	if (in->nodes_error) {
		KEY(o, "nodes");
		ADD(o, "{\"error\":");
		if (!orh_json_put_str(o, in->nodes_error))
			return undo(o, mark);
		orh_buf_addc(o, '}');
	} else if (in->nodes_created >= 0) {
		KEY(o, "nodes");
		ADD(o, "{\"created\":");
		orh_json_put_int(o, in->nodes_created);
		ADD(o, ",\"kept\":");
		orh_json_put_int(o, in->nodes_kept);
		ADD(o, ",\"bound\":");
		orh_json_put_int(o, in->nodes_bound);
		orh_buf_addc(o, '}');
	}
	return true;
}

static void put_memlock(struct orh_buf *o, const struct orh_record_in *in)
{
	KEY(o, "memlock");
	orh_buf_addc(o, '{');
	SET_STR(o, "step", in->memlock);
	if (in->memlock_known) {
		KEY(o, "before");
		ADD(o, "{\"soft\":");
		put_limit(o, in->memlock_soft_before);
		ADD(o, ",\"hard\":");
		put_limit(o, in->memlock_hard_before);
		ADD(o, "},\"after\":{\"soft\":");
		put_limit(o, in->memlock_soft_after);
		ADD(o, ",\"hard\":");
		put_limit(o, in->memlock_hard_after);
		orh_buf_addc(o, '}');
	}
	if (in->spec_memlock_set) {
		KEY(o, "in_spec");
		put_limit(o, in->spec_memlock);
	}
	orh_buf_addc(o, '}');
}

static bool put_conf(struct orh_buf *o, const struct orh_record_in *in)
{
	size_t mark = o->n;

	if (!in->conf)
		return true;
	KEY(o, "nccl_conf");
	ADD(o, "{\"path\":\"/etc/nccl.conf\",\"result\":");
	if (!orh_json_put_str(o, in->conf))
		return undo(o, mark);
	KEY(o, "added");
	orh_json_put_int(o, (json_int_t)in->conf_added);
	if (in->conf_bound_from && *in->conf_bound_from)
		SET_STR(o, "bind_mounted_from", in->conf_bound_from);
	if (in->conf_record_off && *in->conf_record_off)
		SET_STR(o, "record_left_out", in->conf_record_off);
	if (in->conf_kept) {
		KEY(o, "image_lines_kept");
		orh_buf_addc(o, '[');
		for (size_t i = 0; i < in->conf_kept->n; i++)
			add_str(o, in->conf_kept->v[i]);
		orh_buf_addc(o, ']');
	}
	orh_buf_addc(o, '}');
	return true;
}

static void put_warnings(struct orh_buf *o, const struct orh_record_in *in)
{
	const struct orh_decision *d = in->d;

	KEY(o, "warnings");
	orh_buf_addc(o, '[');
	for (size_t i = 0; i < d->warnings.n; i++)
		add_str(o, d->warnings.v[i]);
	for (size_t i = 0; d->have_plan && i < d->image_verdict.warnings.n; i++) {
		size_t m = o->n;

		sep(o);
		if (!put_image_text(o, d->image_verdict.warnings.v[i]))
			undo(o, m);
	}
	for (size_t i = 0; in->warnings && i < in->warnings->n; i++)
		add_str(o, in->warnings->v[i]);
	orh_buf_addc(o, ']');
}

/* Step i's place among the steps as an object set name by name holds them: a step whose
 * name an earlier one took (or a name or a value the object refuses) has none; the value
 * is the last one set under that name. */
static bool step_value(const struct orh_record_in *in, size_t n, size_t i, double *ms)
{
	const char *name = in->step_names[i];

	if (!name || !isfinite(in->step_ms[i]))
		return false;
	for (size_t j = 0; j < i; j++)
		if (in->step_names[j] && !strcmp(in->step_names[j], name) &&
		    isfinite(in->step_ms[j]))
			return false;
	*ms = in->step_ms[i];
	for (size_t j = i + 1; j < n; j++)
		if (in->step_names[j] && !strcmp(in->step_names[j], name) &&
		    isfinite(in->step_ms[j]))
			*ms = in->step_ms[j];
	return true;
}

/* time_ms: the total, the steps, and the shim's time handed over. -1 where that cannot
 * be written (a tree json_dumps refuses). */
static int put_times(struct orh_buf *o, const struct orh_record_in *in)
{
	size_t n = in->n_steps < ORH_ARRAY_SIZE(in->step_names) ? in->n_steps
							       : ORH_ARRAY_SIZE(in->step_names);
	size_t mark = o->n;
	double ms = 0;

	KEY(o, "time_ms");
	ADD(o, "{\"total\":");
	if (!orh_json_put_ms(o, in->total_ms)) {
		undo(o, mark);
		return 0;
	}
	KEY(o, "steps");
	orh_buf_addc(o, '{');
	for (size_t i = 0; i < n; i++) {
		size_t m = o->n;

		if (!step_value(in, n, i, &ms))
			continue;
		sep(o);
		if (!orh_json_put_str(o, in->step_names[i])) {
			undo(o, m);
			continue;
		}
		orh_buf_addc(o, ':');
		orh_json_put_ms(o, ms);
	}
	orh_buf_addc(o, '}');
	if (in->shim_ms) {
		KEY(o, "shim");
		if (orh_json_put_value(o, in->shim_ms) < 0)
			return -1;
	}
	orh_buf_addc(o, '}');
	return 0;
}

char *orh_record_text(const struct orh_record_in *in, size_t *len)
{
	const struct orh_decision *d = in->d;
	struct orh_buf o = { NULL, 0, 0 };

	orh_buf_reserve(&o, 8192);
	if (!put_head(&o, in))
		goto refused;
	put_activation(&o, d);
	put_given(&o, &d->facts);
	if (in->spec_devices >= 0) {
		KEY(&o, "spec_devices");
		orh_json_put_int(&o, in->spec_devices);
	}
	if (d->have_plan) {
		put_plan(&o, d, in->netns_if);
		SET_STR(&o, "node_read", in->node_read ? in->node_read
					 : in->node_from || in->bundle ? "by the runtime shim"
								       : "by this stage");
	}
	SET_STR(&o, "node_from", in->node_from);
	if (in->node_age_ms && json_is_integer(in->node_age_ms)) {
		KEY(&o, "node_age_ms");
		orh_json_put_int(&o, json_integer_value(in->node_age_ms));
	}
	if (d->have_plan)
		put_nccl(&o, &d->nccl);
	if (in->bundle && in->bundle_config)
		put_bundle(&o, in);
	if (d->have_plan && d->image_verdict.checked)
		put_image(&o, d);
	put_nodes(&o, in);
	if (in->sysfs_view[0]) {
		char view[sizeof(ORH_SYSVIEW_DIR "/") + sizeof(in->sysfs_view)];

		memcpy(view, ORH_SYSVIEW_DIR "/", sizeof(ORH_SYSVIEW_DIR "/") - 1);
		memcpy(view + sizeof(ORH_SYSVIEW_DIR "/") - 1, in->sysfs_view,
		       sizeof(in->sysfs_view));
		view[sizeof(view) - 1] = '\0';
		SET_STR(&o, "sysfs_view", view);
	}
	SET_STR(&o, "cgroup", in->cgroup);
	put_memlock(&o, in);
	put_conf(&o, in);
	put_warnings(&o, in);
	if (put_times(&o, in) < 0)
		goto refused;
	orh_buf_addc(&o, '}');
	if (len)
		*len = o.n;
	return o.p;
refused:
	free(o.p);
	return NULL;
}
