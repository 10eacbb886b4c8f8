/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A CreateContainer request as the OCI spec the spec edit works on, and the edit's
 * result as a ContainerAdjustment (include/orh/cmd/nri.h). The runtime builds the real
 * spec itself after the plugins answered: the spec here holds what the decision reads
 * and what the edit compares with, and the adjustment is what the edit appended to it.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "orh/base/atomic.h"
#include "orh/base/json.h"
#include "orh/apply/ncclconf.h"
#include "orh/cmd/nri.h"
#include "orh/decide/oci.h"
#include "orh/apply/record.h"
#include "orh/apply/statedir.h"

/* The pod's annotations that reach the container's spec: ours, as the handler's
 * pod_annotations list (oci-rdma-hook/ and a star) passes them (a CRI container's own annotations
 * hold the kubelet's, not the pod's). */
#define POD_PREFIX "oci-rdma-hook/"

static json_t *strv_json(const struct orh_strv *sv)
{
	json_t *a = json_array();

	for (size_t i = 0; i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

static void set_nonempty(json_t *o, const char *key, const char *s)
{
	if (s && *s)
		json_object_set_new(o, key, json_string(s));
}

static json_t *annotations(const struct orh_nri_create *req)
{
	json_t *a = json_object();

	for (size_t i = 0; i < req->ctr.annotations.n; i++)
		json_object_set_new(a, req->ctr.annotations.v[i].key,
				    json_string(req->ctr.annotations.v[i].value));
	for (size_t i = 0; i < req->pod.annotations.n; i++) {
		const struct orh_nri_kv *kv = &req->pod.annotations.v[i];

		if (orh_startswith(kv->key, POD_PREFIX) && !json_object_get(a, kv->key))
			json_object_set_new(a, kv->key, json_string(kv->value));
	}
	return a;
}

static json_t *process(const struct orh_nri_container *c)
{
	json_t *p = json_object();

	json_object_set_new(p, "args", strv_json(&c->args));
	json_object_set_new(p, "env", strv_json(&c->env));
	if (c->has_user) {
		json_t *u = json_pack("{s:I, s:I}", "uid", (json_int_t)c->uid, "gid",
				      (json_int_t)c->gid);

		if (c->n_gids) {
			json_t *g = json_array();

			for (size_t i = 0; i < c->n_gids; i++)
				json_array_append_new(g, json_integer(c->gids[i]));
			json_object_set_new(u, "additionalGids", g);
		}
		json_object_set_new(p, "user", u);
	}
	if (c->n_rlimits) {
		json_t *a = json_array();

		for (size_t i = 0; i < c->n_rlimits; i++) {
			const struct orh_nri_rlimit *l = &c->rlimits[i];

			json_array_append_new(a, json_pack("{s:s, s:o, s:o}", "type",
							   l->type ? l->type : "", "hard",
							   orh_json_u64(l->hard), "soft",
							   orh_json_u64(l->soft)));
		}
		json_object_set_new(p, "rlimits", a);
	}
	return p;
}

static json_t *mounts(const struct orh_nri_container *c)
{
	json_t *a = json_array();

	for (size_t i = 0; i < c->n_mounts; i++) {
		const struct orh_nri_mount *m = &c->mounts[i];
		json_t *o = json_object();

		set_nonempty(o, "destination", m->destination);
		set_nonempty(o, "type", m->type);
		set_nonempty(o, "source", m->source);
		if (m->options.n)
			json_object_set_new(o, "options", strv_json(&m->options));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *hook_json(const struct orh_nri_hook *h)
{
	json_t *o = json_object();

	set_nonempty(o, "path", h->path);
	if (h->args.n)
		json_object_set_new(o, "args", strv_json(&h->args));
	if (h->env.n)
		json_object_set_new(o, "env", strv_json(&h->env));
	if (h->has_timeout)
		json_object_set_new(o, "timeout", json_integer(h->timeout));
	return o;
}

static json_t *hooks(const struct orh_nri_container *c)
{
	json_t *o = json_object();

	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++) {
		json_t *a;

		if (!c->hooks.n[k])
			continue;
		a = json_array();
		for (size_t i = 0; i < c->hooks.n[k]; i++)
			json_array_append_new(a, hook_json(&c->hooks.v[k][i]));
		json_object_set_new(o, orh_nri_hook_kinds[k], a);
	}
	return o;
}

static json_t *linux_json(const struct orh_nri_container *c)
{
	json_t *l = json_object(), *ns = json_array(), *devs = json_array(), *rules = json_array();

	for (size_t i = 0; i < c->namespaces.n; i++) {
		json_t *o = json_pack("{s:s}", "type", c->namespaces.v[i].key);

		set_nonempty(o, "path", c->namespaces.v[i].value);
		json_array_append_new(ns, o);
	}
	for (size_t i = 0; i < c->n_devices; i++) {
		const struct orh_nri_device *d = &c->devices[i];
		json_t *o = json_pack("{s:I, s:I}", "major", (json_int_t)d->major, "minor",
				      (json_int_t)d->minor);

		set_nonempty(o, "path", d->path);
		set_nonempty(o, "type", d->type);
		if (d->has_mode)
			json_object_set_new(o, "fileMode", json_integer(d->mode));
		if (d->has_uid)
			json_object_set_new(o, "uid", json_integer(d->uid));
		if (d->has_gid)
			json_object_set_new(o, "gid", json_integer(d->gid));
		json_array_append_new(devs, o);
	}
	for (size_t i = 0; i < c->n_rules; i++) {
		const struct orh_nri_rule *d = &c->rules[i];
		json_t *o = json_pack("{s:b}", "allow", d->allow);

		set_nonempty(o, "type", d->type);
		if (d->has_major)
			json_object_set_new(o, "major", json_integer(d->major));
		if (d->has_minor)
			json_object_set_new(o, "minor", json_integer(d->minor));
		set_nonempty(o, "access", d->access);
		json_array_append_new(rules, o);
	}
	json_object_set_new(l, "namespaces", ns);
	json_object_set_new(l, "devices", devs);
	json_object_set_new(l, "resources", json_pack("{s:o}", "devices", rules));
	return l;
}

json_t *orh_nri_spec(const struct orh_nri_create *req)
{
	const struct orh_nri_container *c = &req->ctr;

	return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "ociVersion", "1.0.2", "annotations",
			 annotations(req), "process", process(c), "mounts", mounts(c), "hooks",
			 hooks(c), "linux", linux_json(c));
}

/* The entries of after[path] past those of before[path], which must be the same: their
 * index in *from, the array in *out (NULL: none). */
static int added(const json_t *before, const json_t *after, const char *path, size_t *from,
		 const json_t **out, struct orh_err *err)
{
	const json_t *b = before, *a = after;
	char key[64];
	const char *p = path;

	*out = NULL;
	*from = 0;
	while (*p) {
		size_t n = strcspn(p, ".");

		if (n >= sizeof(key))
			return orh_fail(err, EINVAL, "'%s': too long a path", path);
		memcpy(key, p, n);
		key[n] = '\0';
		b = json_object_get(b, key);
		a = json_object_get(a, key);
		p += n + (p[n] == '.');
	}
	if (!a)
		return 0;
	if (!json_is_array(a) || (b && !json_is_array(b)))
		return orh_fail(err, EINVAL, "the spec edit left '%s' no array", path);
	for (size_t i = 0; i < json_array_size(b); i++)
		if (!json_equal(json_array_get(b, i), json_array_get(a, i)))
			return orh_fail(err, EINVAL,
					"the spec edit changed entry %zu of '%s': an adjustment "
					"only adds",
					i, path);
	*from = json_array_size(b);
	*out = a;
	return 0;
}

static char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? orh_xstrdup(s) : NULL;
}

static void jstrv(const json_t *o, const char *key, struct orh_strv *sv)
{
	const json_t *a = json_object_get(o, key), *v;
	size_t i;

	json_array_foreach(a, i, v)
		if (json_is_string(v))
			orh_strv_push(sv, orh_xstrdup(json_string_value(v)));
}

static int64_t jint(const json_t *o, const char *key, bool *has)
{
	const json_t *v = json_object_get(o, key);

	if (has)
		*has = json_is_integer(v);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* Grow an array of n elements for one more, zeroed: its address. */
#define ADD(arr, n)                                                                       \
	((arr) = orh_xgrow(arr, n, sizeof(*(arr))), memset(&(arr)[n], 0, sizeof(*(arr))),    \
	 &(arr)[(n)++])

static bool device_added(const struct orh_nri_adjust *adj, const json_t *rule)
{
	const char *type = json_string_value(json_object_get(rule, "type"));
	bool hm = false, hn = false;
	int64_t major = jint(rule, "major", &hm), minor = jint(rule, "minor", &hn);

	for (size_t i = 0; i < adj->n_devices; i++)
		if (hm && hn && type && adj->devices[i].type &&
		    !strcmp(type, adj->devices[i].type) && adj->devices[i].major == major &&
		    adj->devices[i].minor == minor)
			return true;
	return false;
}

static int diff_linux(const json_t *before, const json_t *after, struct orh_nri_adjust *adj,
		      struct orh_err *err)
{
	const json_t *a, *v;
	size_t from;
	int r = added(before, after, "linux.devices", &from, &a, err);

	for (size_t i = from; r == 0 && i < json_array_size(a); i++) {
		struct orh_nri_device *d = ADD(adj->devices, adj->n_devices);

		v = json_array_get(a, i);
		d->path = jstr(v, "path");
		d->type = jstr(v, "type");
		d->major = jint(v, "major", NULL);
		d->minor = jint(v, "minor", NULL);
		d->mode = (uint32_t)jint(v, "fileMode", &d->has_mode);
		d->uid = (uint32_t)jint(v, "uid", &d->has_uid);
		d->gid = (uint32_t)jint(v, "gid", &d->has_gid);
	}
	if (r == 0)
		r = added(before, after, "linux.resources.devices", &from, &a, err);
	for (size_t i = from; r == 0 && i < json_array_size(a); i++) {
		struct orh_nri_rule *d;

		v = json_array_get(a, i);
		if (device_added(adj, v))
			continue; /* the runtime allows a device added itself */
		d = ADD(adj->rules, adj->n_rules);
		d->allow = json_is_true(json_object_get(v, "allow"));
		d->type = jstr(v, "type");
		d->access = jstr(v, "access");
		d->major = jint(v, "major", &d->has_major);
		d->minor = jint(v, "minor", &d->has_minor);
	}
	return r;
}

static int diff_process(const json_t *before, const json_t *after, struct orh_nri_adjust *adj,
			struct orh_err *err)
{
	const json_t *a, *v;
	size_t from;
	int r = added(before, after, "process.env", &from, &a, err);

	for (size_t i = from; r == 0 && i < json_array_size(a); i++) {
		const char *e = json_string_value(json_array_get(a, i));
		const char *eq = e ? strchr(e, '=') : NULL;

		if (!eq)
			return orh_fail(err, EINVAL,
					"the spec edit added an entry to 'process.env' that is no "
					"NAME=VALUE");
		adj->env.v = orh_xgrow(adj->env.v, adj->env.n, sizeof(*adj->env.v));
		adj->env.v[adj->env.n].key = orh_xasprintf("%.*s", (int)(eq - e), e);
		adj->env.v[adj->env.n++].value = orh_xstrdup(eq + 1);
	}
	if (r == 0)
		r = added(before, after, "process.rlimits", &from, &a, err);
	for (size_t i = from; r == 0 && i < json_array_size(a); i++) {
		struct orh_nri_rlimit *l = ADD(adj->rlimits, adj->n_rlimits);

		v = json_array_get(a, i);
		l->type = jstr(v, "type");
		if (!orh_json_get_u64(json_object_get(v, "hard"), &l->hard) ||
		    !orh_json_get_u64(json_object_get(v, "soft"), &l->soft))
			return orh_fail(err, EINVAL, "the spec edit added an rlimit without "
				       "its values");
	}
	return r;
}

static int diff_mounts_hooks(const json_t *before, const json_t *after,
			     struct orh_nri_adjust *adj, struct orh_err *err)
{
	const json_t *a, *v;
	size_t from;
	int r = added(before, after, "mounts", &from, &a, err);

	for (size_t i = from; r == 0 && i < json_array_size(a); i++) {
		struct orh_nri_mount *m = ADD(adj->mounts, adj->n_mounts);

		v = json_array_get(a, i);
		m->destination = jstr(v, "destination");
		m->type = jstr(v, "type");
		m->source = jstr(v, "source");
		jstrv(v, "options", &m->options);
	}
	for (unsigned k = 0; r == 0 && k < ORH_NRI_HOOK_KINDS; k++) {
		char path[64];

		snprintf(path, sizeof(path), "hooks.%s", orh_nri_hook_kinds[k]);
		r = added(before, after, path, &from, &a, err);
		for (size_t i = from; r == 0 && i < json_array_size(a); i++) {
			struct orh_nri_hook *h = ADD(adj->hooks.v[k], adj->hooks.n[k]);

			v = json_array_get(a, i);
			h->path = jstr(v, "path");
			jstrv(v, "args", &h->args);
			jstrv(v, "env", &h->env);
			h->timeout = jint(v, "timeout", &h->has_timeout);
		}
	}
	return r;
}

int orh_nri_diff(const json_t *before, const json_t *after, struct orh_nri_adjust *adj,
		 struct orh_err *err)
{
	int r;

	memset(adj, 0, sizeof(*adj));
	r = diff_linux(before, after, adj, err);
	if (r == 0)
		r = diff_process(before, after, adj, err);
	if (r == 0)
		r = diff_mounts_hooks(before, after, adj, err);
	if (r < 0)
		orh_nri_adjust_free(adj);
	return r;
}

/* The spec's annotations (spec_ann, as annotations() made them) that are not the
 * container's own: the pod's it took, into the adjustment. */
static void pod_annotations(const struct orh_nri_create *req, const json_t *spec_ann,
			    struct orh_nri_adjust *adj)
{
	struct orh_nri_kvs *a = &adj->annotations;
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)spec_ann, key, v) {
		bool own = false;

		for (size_t i = 0; i < req->ctr.annotations.n && !own; i++)
			own = !strcmp(req->ctr.annotations.v[i].key, key);
		if (own || !json_is_string(v))
			continue;
		a->v = orh_xgrow(a->v, a->n, sizeof(*a->v));
		a->v[a->n].key = orh_xstrdup(key);
		a->v[a->n++].value = orh_xstrdup(json_string_value(v));
	}
}

void orh_nri_adjust_drop_hooks(struct orh_nri_adjust *adj)
{
	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++) {
		for (size_t i = 0; i < adj->hooks.n[k]; i++) {
			free(adj->hooks.v[k][i].path);
			orh_strv_free(&adj->hooks.v[k][i].args);
			orh_strv_free(&adj->hooks.v[k][i].env);
		}
		free(adj->hooks.v[k]);
		adj->hooks.v[k] = NULL;
		adj->hooks.n[k] = 0;
	}
}

size_t orh_nri_adjust_hooks(const struct orh_nri_adjust *adj)
{
	size_t n = 0;

	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++)
		n += adj->hooks.n[k];
	return n;
}

/* The plan's settings NCCL reads from /etc/nccl.conf, but the capture's (no hook makes its
 * tmpfs in the container): the file's text, malloc'd. */
static int conf_text(const struct orh_plan *plan, char **text, size_t *added, bool *no_capture,
		     struct orh_err *err)
{
	_cleanup_free_ struct orh_env_entry *env = orh_xcalloc(plan->n_env + 1, sizeof(*env));
	size_t n = 0;

	*no_capture = false;
	for (size_t i = 0; i < plan->n_env; i++) {
		if (!orh_env_nccl_reads(plan->env[i].name))
			continue;
		if (orh_nccl_record_entry(&plan->env[i]))
			*no_capture = true;
		else
			env[n++] = plan->env[i];
	}
	return orh_ncclconf_merge(NULL, 0, env, n, text, added, NULL, err);
}

/* The container's /etc/nccl.conf written by the plugin into its state directory
 * (<run dir>/<id>/nccl.conf, 0644) and bind-mounted read-only over /etc/nccl.conf by the
 * adjustment; its record there, saying it was served without hooks (why) and what was not
 * done. 0, or -errno with err: then nothing of it is in the adjustment. */
static int hookless_conf(const struct orh_nri_create *req, const char *why, const json_t *spec,
			 struct orh_edit_result *res, struct orh_nri_adjust *adj,
			 struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_state_dir_path(ORH_RUN_DIR, req->ctr.id);
	_cleanup_free_ char *text = NULL, *path = NULL, *by = NULL, *off = NULL;
	_cleanup_close_ int dirfd = -1;
	struct orh_strv kept = { 0 };
	struct orh_nri_mount *m;
	size_t added = 0;
	bool created = false, no_capture = false;
	int r;

	if (!dir)
		return orh_fail(err, EINVAL, "the container id '%s' cannot name a state directory",
				req->ctr.id ? req->ctr.id : "");
	r = conf_text(&res->d->plan, &text, &added, &no_capture, err);
	if (r == 0 && (dirfd = orh_state_dir_open(dir, &created, err)) < 0)
		r = dirfd;
	if (r == 0)
		r = orh_replace_at(dirfd, "nccl.conf", &(struct orh_replace){
			.type = S_IFREG, .mode = 0644, .data = text, .len = strlen(text),
			.sweep = true }, err);
	if (r < 0)
		return orh_err_prefix(err, "/etc/nccl.conf not written");
	path = orh_xasprintf("%s/nccl.conf", dir);
	by = orh_xasprintf("the NRI plugin, served without hooks (%s): it wrote /etc/nccl.conf "
			   "itself and the runtime bind-mounts it read-only", why);
	off = no_capture ? orh_xstrdup(ORH_NRI_NOT_DONE "the NCCL debug capture (no hook makes "
				       "its directory in the container)") : orh_xstrdup("");
	orh_strv_pushf(&res->warnings, ORH_NRI_NOT_DONE "%s", ORH_NRI_NOT_DONE_LIST);
	{
		struct orh_record_in rec = {
			.id = req->ctr.id,
			.stage = "NRI plugin",
			.edited_by = by,
			.d = res->d,
			.node_read = "by the NRI plugin",
			.netns_if = res->d->facts.netns_default_if,
			.nodes_created = -1,
			.conf = "written",
			.conf_added = added,
			.conf_bound_from = path,
			.conf_kept = &kept,
			.conf_record_off = off,
			.warnings = &res->warnings,
		};

		/* no pid, no bundle, no namespaces: the record's container cannot be told
		 * there or gone from it, and no sweep takes its directory: the plugin removes it
		 * at RemoveContainer */
		orh_record_spec(&rec, spec);
		r = orh_record_write(dir, &rec, err);
	}
	if (r < 0) {
		orh_state_dir_remove(ORH_RUN_DIR, req->ctr.id);
		return orh_err_prefix(err, "the record not written");
	}
	m = ADD(adj->mounts, adj->n_mounts);
	m->destination = orh_xstrdup("/etc/nccl.conf");
	m->type = orh_xstrdup("bind");
	m->source = TAKE_PTR(path);
	orh_strv_push(&m->options, orh_xstrdup("bind"));
	orh_strv_push(&m->options, orh_xstrdup("ro"));
	orh_strv_push(&m->options, orh_xstrdup("nosuid"));
	orh_strv_push(&m->options, orh_xstrdup("nodev"));
	orh_strv_push(&m->options, orh_xstrdup("noexec"));
	return 0;
}

int orh_nri_serve(const struct orh_ctx *ctx, const struct orh_nri_create *req,
		  struct orh_nri_adjust *adj, struct orh_edit_result *res, struct orh_err *err)
{
	return orh_nri_serve_as(ctx, req, NULL, adj, res, err);
}

int orh_nri_serve_as(const struct orh_ctx *ctx, const struct orh_nri_create *req,
		     const char *hookless, struct orh_nri_adjust *adj,
		     struct orh_edit_result *res, struct orh_err *err)
{
	json_t *spec = orh_nri_spec(req), *before = json_deep_copy(spec);
	/* without hooks: the plugin writes /etc/nccl.conf itself where the edit lets it (the
	 * container's network known now: the pod's namespace read by its path) */
	unsigned flags = hookless ? ORH_SERVE_CONF | ORH_SERVE_NO_POSTSTOP
				  : ORH_SERVE_SNAPSHOT | ORH_SERVE_TOKEN;
	int r;

	memset(adj, 0, sizeof(*adj));
	/* the memlock asked for is held to what this process could raise, as for the other
	 * ways in: a runtime beside it without CAP_SYS_RESOURCE (rootless) could raise no
	 * more, and would fail the container */
	/* the node read here goes to the nccl-conf stage (the caller writes it, res->snapshot),
	 * bound to the token of the stage's hook entry: the runtime writes config.json from
	 * the answer later */
	r = orh_spec_serve(ctx, spec, flags, res, err);
	if (r == 0 && res->edits > 0)
		r = orh_nri_diff(before, spec, adj, err);
	if (r == 0 && hookless && orh_nri_adjust_hooks(adj)) {
		/* a stage the edit registered: its file is not written */
		orh_nri_adjust_drop_hooks(adj);
		json_decref(res->snapshot);
		res->snapshot = NULL;
		orh_strv_pushf(&res->warnings, ORH_NRI_NOT_DONE "/etc/nccl.conf (the pod's network "
			       "is not known before its containers run: its namespace not read)");
	}
	if (r == 0 && hookless && res->d && req->ctr.id) {
		struct orh_err cerr = { 0 };

		if (hookless_conf(req, hookless, spec, res, adj, &cerr) < 0)
			orh_strv_pushf(&res->warnings, ORH_NRI_NOT_DONE "%s", cerr.msg);
	}
	if (r == 0 && !orh_nri_adjust_empty(adj))
		pod_annotations(req, json_object_get(before, "annotations"), adj);
	json_decref(spec);
	json_decref(before);
	return r;
}

bool orh_nri_refuses(const struct orh_config *cfg, const struct orh_nri_create *req)
{
	json_t *spec;
	bool r;

	if (cfg->on_error != ORH_ON_ERROR_FAIL)
		return false;
	spec = orh_nri_spec(req);
	r = orh_activation_asked(cfg, json_object_get(spec, "annotations"),
				 json_object_get(json_object_get(spec, "process"), "env"));
	json_decref(spec);
	return r;
}

char *orh_nri_describe(const struct orh_nri_create *req, size_t max)
{
	char *s = orh_xasprintf("container %s (%s, pod %s/%s)", req->ctr.id,
				req->ctr.name ? req->ctr.name : "?",
				req->pod.namespace ? req->pod.namespace : "?",
				req->pod.name ? req->pod.name : "?");

	if (max >= 4 && strlen(s) > max)
		memcpy(s + max - 3, "...", 4);
	return s;
}
