/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NRI's messages as the plugin reads them (include/orh/cmd/nri.h; nri_encode.c writes them),
 * with the field numbers of pkg/api/api.proto. A field of a known number but another wire
 * type is an error; unknown fields are stepped over.
 */
#include <errno.h>
#include <string.h>

#include "orh/cmd/nri.h"
#include "orh/base/pbwire.h"

const char *const orh_nri_hook_kinds[ORH_NRI_HOOK_KINDS] = {
	"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

typedef struct orh_pb_reader rd_t;
typedef struct orh_pb_field fd_t;

static int str(const fd_t *f, char **s, struct orh_err *err)
{
	free(*s);
	*s = NULL;
	return orh_pb_string(f, s, err);
}

static int strv(const fd_t *f, struct orh_strv *sv, struct orh_err *err)
{
	char *s = NULL;
	int r = orh_pb_string(f, &s, err);

	if (r == 0)
		orh_strv_push(sv, s);
	return r;
}

static int u64(const fd_t *f, uint64_t *v, struct orh_err *err)
{
	return orh_pb_u64(f, v, err);
}

static int i64(const fd_t *f, int64_t *v, struct orh_err *err)
{
	uint64_t u = 0;
	int r = orh_pb_u64(f, &u, err);

	*v = (int64_t)u;
	return r;
}

static int u32(const fd_t *f, uint32_t *v, struct orh_err *err)
{
	uint64_t u = 0;
	int r = orh_pb_u64(f, &u, err);

	*v = (uint32_t)u;
	return r;
}

/* The value=1 of an Optional* wrapper message. */
static int optional(const rd_t *r, const fd_t *f, uint64_t *v, struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	*v = 0;
	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0)
		k = g.num == 1 ? u64(&g, v, err) : 0;
	return k;
}

/* A map<string, string> entry {key=1, value=2}, added to kvs. */
static int kv(const rd_t *r, const fd_t *f, struct orh_nri_kvs *kvs, struct orh_err *err)
{
	struct orh_nri_kv e = { 0 };
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0)
		k = g.num == 1 ? str(&g, &e.key, err) : g.num == 2 ? str(&g, &e.value, err) : 0;
	if (k < 0) {
		free(e.key);
		free(e.value);
		return k;
	}
	if (!e.key)
		e.key = orh_xstrdup("");
	if (!e.value)
		e.value = orh_xstrdup("");
	kvs->v = orh_xgrow(kvs->v, kvs->n, sizeof(*kvs->v));
	kvs->v[kvs->n++] = e;
	return 0;
}

/* Grow an array of n elements for one more, zeroed: its address. */
#define ADD(arr, n)                                                                       \
	((arr) = orh_xgrow(arr, n, sizeof(*(arr))), memset(&(arr)[n], 0, sizeof(*(arr))),    \
	 &(arr)[(n)++])

static int mount(const rd_t *r, const fd_t *f, struct orh_nri_mount *m, struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = str(&g, &m->destination, err);
			break;
		case 2:
			k = str(&g, &m->type, err);
			break;
		case 3:
			k = str(&g, &m->source, err);
			break;
		case 4:
			k = strv(&g, &m->options, err);
			break;
		default:
			k = 0;
		}
	}
	return k;
}

static int hook(const rd_t *r, const fd_t *f, struct orh_nri_hook *h, struct orh_err *err)
{
	uint64_t t = 0;
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = str(&g, &h->path, err);
			break;
		case 2:
			k = strv(&g, &h->args, err);
			break;
		case 3:
			k = strv(&g, &h->env, err);
			break;
		case 4:
			k = optional(&sub, &g, &t, err);
			h->has_timeout = true;
			h->timeout = (int64_t)t;
			break;
		default:
			k = 0;
		}
	}
	return k;
}

static int hooks(const rd_t *r, const fd_t *f, struct orh_nri_hooks *hs, struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		unsigned i = g.num - 1;

		k = i < ORH_NRI_HOOK_KINDS ? hook(&sub, &g, ADD(hs->v[i], hs->n[i]), err) : 0;
	}
	return k;
}

static int device(const rd_t *r, const fd_t *f, struct orh_nri_device *d, struct orh_err *err)
{
	uint64_t v = 0;
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = str(&g, &d->path, err);
			break;
		case 2:
			k = str(&g, &d->type, err);
			break;
		case 3:
			k = i64(&g, &d->major, err);
			break;
		case 4:
			k = i64(&g, &d->minor, err);
			break;
		case 5:
		case 6:
		case 7:
			k = optional(&sub, &g, &v, err);
			if (g.num == 5)
				d->has_mode = true, d->mode = (uint32_t)v;
			else if (g.num == 6)
				d->has_uid = true, d->uid = (uint32_t)v;
			else
				d->has_gid = true, d->gid = (uint32_t)v;
			break;
		default:
			k = 0;
		}
	}
	return k;
}

static int rule(const rd_t *r, const fd_t *f, struct orh_nri_rule *d, struct orh_err *err)
{
	uint64_t v = 0;
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = u64(&g, &v, err); d->allow = v != 0;
			break;
		case 2:
			k = str(&g, &d->type, err);
			break;
		case 3:
		case 4:
			k = optional(&sub, &g, &v, err);
			if (g.num == 3)
				d->has_major = true, d->major = (int64_t)v;
			else
				d->has_minor = true, d->minor = (int64_t)v;
			break;
		case 5:
			k = str(&g, &d->access, err);
			break;
		default:
			k = 0;
		}
	}
	return k;
}

static int rlimit(const rd_t *r, const fd_t *f, struct orh_nri_rlimit *l, struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = str(&g, &l->type, err);
			break;
		case 2:
			k = u64(&g, &l->hard, err);
			break;
		case 3:
			k = u64(&g, &l->soft, err);
			break;
		default:
			k = 0;
		}
	}
	return k;
}

/* LinuxNamespace{type=1, path=2} as a type -> path entry. */
static int ns(const rd_t *r, const fd_t *f, struct orh_nri_kvs *kvs, struct orh_err *err)
{
	return kv(r, f, kvs, err);
}

/* LinuxResources: devices=7 alone. */
static int resources(const rd_t *r, const fd_t *f, struct orh_nri_rule **rules, size_t *n,
		     struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0)
		k = g.num == 7 ? rule(&sub, &g, ADD(*rules, *n), err) : 0;
	return k;
}

/* LinuxContainer{namespaces=1, devices=2, resources=3} */
static int linux_ctr(const rd_t *r, const fd_t *f, struct orh_nri_container *c,
		     struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = ns(&sub, &g, &c->namespaces, err);
			break;
		case 2:
			k = device(&sub, &g, ADD(c->devices, c->n_devices), err);
			break;
		case 3:
			k = resources(&sub, &g, &c->rules, &c->n_rules, err);
			break;
		default:
			k = 0;
		}
	}
	return k;
}

static void add_gid(struct orh_nri_container *c, uint64_t v)
{
	c->gids = orh_xgrow(c->gids, c->n_gids, sizeof(*c->gids));
	c->gids[c->n_gids++] = (uint32_t)v;
}

/* User{uid=1, gid=2, additional_gids=3 (packed, or one a field)} */
static int user(const rd_t *r, const fd_t *f, struct orh_nri_container *c, struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	c->has_user = true;
	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		k = 0;
		if (g.num == 1) {
			k = u32(&g, &c->uid, err);
		} else if (g.num == 2) {
			k = u32(&g, &c->gid, err);
		} else if (g.num == 3 && g.wire == ORH_PB_VARINT) {
			add_gid(c, g.v);
		} else if (g.num == 3) {
			uint64_t v = 0;

			if (g.wire != ORH_PB_LEN)
				return orh_fail(err, EBADMSG, "additional_gids: a bad wire type");
			for (size_t o = 0; o < g.len; o += (size_t)k) {
				k = orh_pb_varint_get(g.data + o, g.len - o, &v);
				if (k < 0)
					return orh_fail(err, EBADMSG,
							"additional_gids: a truncated varint");
				add_gid(c, v);
			}
			k = 0;
		}
	}
	return k;
}

/* The name of a field of Container or PodSandbox the plugin reads, for an error. */
static const char *field_name(bool ctr, uint32_t num)
{
	static const char *const ctr_names[] = {
		[1] = "id", [2] = "pod_sandbox_id", [3] = "name", [6] = "annotations",
		[7] = "args", [8] = "env", [9] = "mounts", [10] = "hooks", [11] = "linux",
		[13] = "rlimits", [21] = "user",
	};
	static const char *const pod_names[] = {
		[1] = "id", [2] = "name", [3] = "uid", [4] = "namespace", [6] = "annotations",
	};
	const char *const *v = ctr ? ctr_names : pod_names;
	size_t n = ctr ? ORH_ARRAY_SIZE(ctr_names) : ORH_ARRAY_SIZE(pod_names);

	return num < n && v[num] ? v[num] : "not read";
}

/* What went wrong in a field of Container or PodSandbox, prefixed with its name. */
static int in_field(struct orh_err *err, bool ctr, const fd_t *g)
{
	if (g->num == 0) /* its key could not be read */
		return orh_err_prefix(err, "%s", ctr ? "container" : "pod");
	return orh_err_prefix(err, "%s field %u (%s)", ctr ? "container" : "pod", g->num,
			      field_name(ctr, g->num));
}

static int container(const rd_t *r, const fd_t *f, struct orh_nri_container *c,
		     struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = str(&g, &c->id, err);
			break;
		case 2:
			k = str(&g, &c->pod_id, err);
			break;
		case 3:
			k = str(&g, &c->name, err);
			break;
		case 6:
			k = kv(&sub, &g, &c->annotations, err);
			break;
		case 7:
			k = strv(&g, &c->args, err);
			break;
		case 8:
			k = strv(&g, &c->env, err);
			break;
		case 9:
			k = mount(&sub, &g, ADD(c->mounts, c->n_mounts), err);
			break;
		case 10:
			k = hooks(&sub, &g, &c->hooks, err);
			break;
		case 11:
			k = linux_ctr(&sub, &g, c, err);
			break;
		case 13:
			k = rlimit(&sub, &g, ADD(c->rlimits, c->n_rlimits), err);
			break;
		case 21:
			k = user(&sub, &g, c, err);
			break;
		default:
			k = 0;
		}
	}
	return k < 0 ? in_field(err, true, &g) : k;
}

static int pod(const rd_t *r, const fd_t *f, struct orh_nri_pod *p, struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = str(&g, &p->id, err);
			break;
		case 2:
			k = str(&g, &p->name, err);
			break;
		case 3:
			k = str(&g, &p->uid, err);
			break;
		case 4:
			k = str(&g, &p->namespace, err);
			break;
		case 6:
			k = kv(&sub, &g, &p->annotations, err);
			break;
		default:
			k = 0;
		}
	}
	return k < 0 ? in_field(err, false, &g) : k;
}

int orh_nri_create_decode(const void *p, size_t n, struct orh_nri_create *req,
			  struct orh_err *err)
{
	struct orh_pb_budget budget;
	rd_t r;
	fd_t f;
	int k;

	memset(req, 0, sizeof(*req));
	orh_pb_reader_init_bounded(&r, p, n, &budget, ORH_NRI_FIELDS_MAX);
	while ((k = orh_pb_next(&r, &f, err)) > 0) {
		k = f.num == 1 ? pod(&r, &f, &req->pod, err) :
		    f.num == 2 ? container(&r, &f, &req->ctr, err) : 0;
		if (k < 0)
			break;
	}
	if (k == 0 && !req->ctr.id)
		k = orh_fail(err, EBADMSG, "no container id");
	if (k < 0) {
		orh_nri_create_free(req);
		return orh_err_prefix(err, "CreateContainerRequest");
	}
	return 0;
}

static void kvs_free(struct orh_nri_kvs *kvs)
{
	for (size_t i = 0; i < kvs->n; i++) {
		free(kvs->v[i].key);
		free(kvs->v[i].value);
	}
	free(kvs->v);
	memset(kvs, 0, sizeof(*kvs));
}

static void mounts_free(struct orh_nri_mount *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(m[i].destination);
		free(m[i].type);
		free(m[i].source);
		orh_strv_free(&m[i].options);
	}
	free(m);
}

static void hooks_free(struct orh_nri_hooks *hs)
{
	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++) {
		for (size_t i = 0; i < hs->n[k]; i++) {
			free(hs->v[k][i].path);
			orh_strv_free(&hs->v[k][i].args);
			orh_strv_free(&hs->v[k][i].env);
		}
		free(hs->v[k]);
	}
	memset(hs, 0, sizeof(*hs));
}

static void devices_free(struct orh_nri_device *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(d[i].path);
		free(d[i].type);
	}
	free(d);
}

static void rules_free(struct orh_nri_rule *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(d[i].type);
		free(d[i].access);
	}
	free(d);
}

static void rlimits_free(struct orh_nri_rlimit *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i].type);
	free(l);
}

void orh_nri_create_free(struct orh_nri_create *req)
{
	struct orh_nri_container *c = &req->ctr;

	free(req->pod.id);
	free(req->pod.name);
	free(req->pod.uid);
	free(req->pod.namespace);
	kvs_free(&req->pod.annotations);
	free(c->id);
	free(c->pod_id);
	free(c->name);
	kvs_free(&c->annotations);
	kvs_free(&c->namespaces);
	orh_strv_free(&c->args);
	orh_strv_free(&c->env);
	mounts_free(c->mounts, c->n_mounts);
	hooks_free(&c->hooks);
	devices_free(c->devices, c->n_devices);
	rules_free(c->rules, c->n_rules);
	rlimits_free(c->rlimits, c->n_rlimits);
	free(c->gids);
	memset(req, 0, sizeof(*req));
}

int orh_nri_configure_decode(const void *p, size_t n, struct orh_nri_configure *req,
			     struct orh_err *err)
{
	rd_t r;
	fd_t f;
	int k;

	memset(req, 0, sizeof(*req));
	orh_pb_reader_init(&r, p, n);
	while ((k = orh_pb_next(&r, &f, err)) > 0) {
		switch (f.num) {
		case 1:
			k = str(&f, &req->config, err);
			break;
		case 2:
			k = str(&f, &req->runtime_name, err);
			break;
		case 3:
			k = str(&f, &req->runtime_version, err);
			break;
		case 5:
			k = i64(&f, &req->request_timeout_ms, err);
			break;
		default:
			k = 0;
		}
		if (k < 0)
			break;
	}
	if (k < 0) {
		orh_nri_configure_free(req);
		return orh_err_prefix(err, "ConfigureRequest");
	}
	return 0;
}

void orh_nri_configure_free(struct orh_nri_configure *req)
{
	free(req->config);
	free(req->runtime_name);
	free(req->runtime_version);
	memset(req, 0, sizeof(*req));
}

int orh_nri_sync_decode(const void *p, size_t n, bool *more, struct orh_err *err)
{
	uint64_t v = 0;
	rd_t r;
	fd_t f;
	int k;

	*more = false;
	orh_pb_reader_init(&r, p, n);
	while ((k = orh_pb_next(&r, &f, err)) > 0) {
		if (f.num == 3) {
			k = u64(&f, &v, err);
			*more = v != 0;
		}
		if (k < 0)
			break;
	}
	return k < 0 ? orh_err_prefix(err, "SynchronizeRequest") : 0;
}

/* LinuxContainerAdjustment{devices=1, resources=2} */
static int linux_adj(const rd_t *r, const fd_t *f, struct orh_nri_adjust *a, struct orh_err *err)
{
	rd_t sub;
	fd_t g;
	int k = orh_pb_sub(r, f, &sub, err);

	while (k == 0 && (k = orh_pb_next(&sub, &g, err)) > 0) {
		switch (g.num) {
		case 1:
			k = device(&sub, &g, ADD(a->devices, a->n_devices), err);
			break;
		case 2:
			k = resources(&sub, &g, &a->rules, &a->n_rules, err);
			break;
		default:
			k = 0;
		}
	}
	return k;
}

int orh_nri_adjust_decode(const void *p, size_t n, struct orh_nri_adjust *a,
			  struct orh_err *err)
{
	rd_t r;
	fd_t f;
	int k;

	memset(a, 0, sizeof(*a));
	orh_pb_reader_init(&r, p, n);
	while ((k = orh_pb_next(&r, &f, err)) > 0) {
		switch (f.num) {
		case 2:
			k = kv(&r, &f, &a->annotations, err);
			break;
		case 3:
			k = mount(&r, &f, ADD(a->mounts, a->n_mounts), err);
			break;
		case 4:
			k = kv(&r, &f, &a->env, err);
			break;
		case 5:
			k = hooks(&r, &f, &a->hooks, err);
			break;
		case 6:
			k = linux_adj(&r, &f, a, err);
			break;
		case 7:
			k = rlimit(&r, &f, ADD(a->rlimits, a->n_rlimits), err);
			break;
		default:
			k = 0;
		}
		if (k < 0)
			break;
	}
	if (k < 0) {
		orh_nri_adjust_free(a);
		return orh_err_prefix(err, "ContainerAdjustment");
	}
	return 0;
}

void orh_nri_adjust_free(struct orh_nri_adjust *a)
{
	kvs_free(&a->annotations);
	mounts_free(a->mounts, a->n_mounts);
	kvs_free(&a->env);
	hooks_free(&a->hooks);
	devices_free(a->devices, a->n_devices);
	rules_free(a->rules, a->n_rules);
	rlimits_free(a->rlimits, a->n_rlimits);
	memset(a, 0, sizeof(*a));
}
