/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NRI's messages as the plugin reads them (include/orh/cmd/nri.h; nri_encode.c writes them),
 * with the types protoc-c made from src/cmd/nri/api*.proto. Each message is read in three
 * steps:
 *  - check(): a walk of its wire format (orh/base/pbwire.h) guided by the generated
 *    descriptors, before protobuf-c sees a byte: every length within its buffer, nesting
 *    bounded; a key or length longer than protobuf-c reads (5 bytes), a field of a known
 *    number and another wire type, a string holding a NUL, and a message field not
 *    repeated sent twice (protobuf-c would merge them, in quadratic time) refused; the fields
 *    counted, those of the messages inside it and each element of a packed field with
 *    them, against ORH_NRI_FIELDS_MAX. An error names the field, as "container.linux field
 *    2 (devices)". Unknown fields are stepped over: nothing inside them checked or counted.
 *  - protobuf_c_message_unpack(), on input check() passed, through an allocator that hands
 *    out at most unpack_bytes() in all (twice the input, and 512 bytes a field counted):
 *    more than protobuf-c takes for any message check() lets through, and a bound on what a
 *    hostile one could make it take.
 *  - the generated structs copied into the plugin's own (nri.h), and freed. An empty
 *    singular string, which proto3 does not tell from an absent one, comes out NULL.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "orh/cmd/nri.h"
#include "orh/base/pbwire.h"
#include "nri/api.pb-c.h"

const char *const orh_nri_hook_kinds[ORH_NRI_HOOK_KINDS] = {
	"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

typedef ProtobufCMessageDescriptor desc_t;
typedef ProtobufCFieldDescriptor fdesc_t;

/* ---- the check before protobuf-c ----------------------------------------------------- */

static enum orh_pb_wire wire_of(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
	case PROTOBUF_C_TYPE_MESSAGE:
		return ORH_PB_LEN;
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
		return ORH_PB_FIXED32;
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return ORH_PB_FIXED64;
	default:
		return ORH_PB_VARINT;
	}
}

static const char *wire_name(enum orh_pb_wire w)
{
	return w == ORH_PB_VARINT ? "a varint" : w == ORH_PB_LEN ? "a length-delimited field" :
	       w == ORH_PB_FIXED32 ? "a 32-bit field" : "a 64-bit field";
}

/* A packed field's elements: each a varint or of the type's fixed size, each counted. */
static int check_packed(const fdesc_t *fd, const struct orh_pb_reader *r,
			const struct orh_pb_field *f, struct orh_err *err)
{
	enum orh_pb_wire w = wire_of(fd->type);
	size_t step = w == ORH_PB_FIXED32 ? 4 : 8;
	uint64_t v = 0;
	int k;

	for (size_t o = 0; o < f->len; o += (size_t)k) {
		if (r->budget && r->budget->left == 0)
			return orh_fail(err, E2BIG, "more than %zu fields in the message",
					r->budget->max);
		if (r->budget)
			r->budget->left--;
		if (w != ORH_PB_VARINT)
			k = f->len - o >= step ? (int)step : -EBADMSG;
		else
			k = orh_pb_varint_get(f->data + o, f->len - o, &v);
		if (k < 0)
			return orh_fail(err, EBADMSG, "a packed element truncated");
	}
	return 0;
}

static int check(const desc_t *d, struct orh_pb_reader *r, const char *path,
		 struct orh_err *err);

/* One field of a known number: its wire type, a string's bytes, a message inside (where an
 * error is named already: *named). */
static int check_field(const fdesc_t *fd, struct orh_pb_reader *r,
		       const struct orh_pb_field *f, const char *path, bool *named,
		       struct orh_err *err)
{
	enum orh_pb_wire w = wire_of(fd->type);
	struct orh_pb_reader sub;
	char inner[160];
	int k;

	if (f->wire != w && !(fd->label == PROTOBUF_C_LABEL_REPEATED && w != ORH_PB_LEN &&
			      f->wire == ORH_PB_LEN))
		return orh_fail(err, EBADMSG, "%s where the field takes %s", wire_name(f->wire),
				wire_name(w));
	if (f->wire == ORH_PB_LEN && w != ORH_PB_LEN)
		return check_packed(fd, r, f, err);
	if (fd->type == PROTOBUF_C_TYPE_STRING && f->len && memchr(f->data, '\0', f->len))
		return orh_fail(err, EBADMSG, "a string holding a NUL byte");
	if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
		return 0;
	k = orh_pb_sub(r, f, &sub, err);
	if (k < 0)
		return k;
	snprintf(inner, sizeof(inner), "%s%s%s", path, *path ? "." : "", fd->name);
	k = check(fd->descriptor, &sub, inner, err);
	*named = k < 0;
	return k;
}

/* Every field of the message r reads, of type d: 0, or -errno with err naming the field
 * where it stopped, path (the fields that led to it, "" for the outermost) first. */
static int check(const desc_t *d, struct orh_pb_reader *r, const char *path,
		 struct orh_err *err)
{
	const fdesc_t *fd;
	const uint8_t *at = r->p;
	struct orh_pb_field f;
	bool named = false;
	uint64_t key = 0, once = 0; /* the singular messages met, by index (< 64 fields) */
	int k;

	while ((k = orh_pb_next(r, &f, err)) > 0) {
		/* protobuf-c reads a key, and a length, of 5 bytes at most: an overlong one is
		 * refused here, in every field it scans (unknown ones too) */
		k = orh_pb_varint_get(at, (size_t)(r->end - at), &key);
		if (k > 5 || (f.wire == ORH_PB_LEN && f.data - at - k > 5)) {
			k = orh_fail(err, EBADMSG, "an overlong key or length (over 5 bytes)");
			break;
		}
		at = r->p;
		fd = protobuf_c_message_descriptor_get_field(d, f.num);
		/* protobuf-c merges a singular message sent again into the first, copying the
		 * arrays gathered so far each time: quadratic, and no encoder sends one twice */
		if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE &&
		    fd->label != PROTOBUF_C_LABEL_REPEATED) {
			uint64_t bit = 1ull << ((size_t)(fd - d->fields) & 63);

			if (once & bit) {
				k = orh_fail(err, EBADMSG, "sent twice (a message, not repeated)");
				break;
			}
			once |= bit;
		}
		k = fd ? check_field(fd, r, &f, path, &named, err) : 0;
		if (named)
			return k;
		if (k < 0)
			break;
	}
	if (k == 0)
		return 0;
	if (f.num == 0) /* its key could not be read */
		return *path ? orh_err_prefix(err, "%s", path) : k;
	fd = protobuf_c_message_descriptor_get_field(d, f.num);
	return orh_err_prefix(err, "%s%sfield %u (%s)", path, *path ? " " : "", f.num,
			      fd ? fd->name : "not read");
}

/* ---- protobuf-c's unpack, bounded ----------------------------------------------------- */

struct alloc_budget {
	size_t left;
	bool spent, failed;     /* past the bound; malloc() failed */
};

static void *take(void *data, size_t size)
{
	struct alloc_budget *a = data;
	void *p;

	if (size > a->left) {
		a->spent = true;
		return NULL;
	}
	p = malloc(size ? size : 1);
	if (p)
		a->left -= size;
	else
		a->failed = true;
	return p;
}

static void give(void *data, void *p)
{
	free(p);
}

static size_t unpack_bytes(size_t n, size_t fields)
{
	return 2 * n + 512 * (fields + 1);
}

/* The message p[0..n) of type d into *out (protobuf_c_message_free_unpacked(*out, NULL)
 * frees it: what take() hands out is malloc's):
 * check(), its fields bounded by max, then protobuf-c. -EBADMSG, -E2BIG or -ENOMEM with
 * err prefixed with the message's name. */
static int unpack(const desc_t *d, const void *p, size_t n, size_t max, ProtobufCMessage **out,
		  struct orh_err *err)
{
	struct orh_pb_budget fields;
	struct orh_pb_reader r;
	struct alloc_budget a = { 0 };
	ProtobufCAllocator alloc = { .alloc = take, .free = give, .allocator_data = &a };
	int k;

	*out = NULL;
	orh_pb_reader_init_bounded(&r, p, n, &fields, max);
	k = check(d, &r, "", err);
	if (k < 0)
		return orh_err_prefix(err, "%s", d->short_name);
	a.left = unpack_bytes(n, fields.max - fields.left);
	*out = protobuf_c_message_unpack(d, &alloc, n, n ? p : (const uint8_t *)"");
	if (!*out && a.spent)
		return orh_fail(err, E2BIG, "%s: more than %zu bytes to unpack", d->short_name,
				unpack_bytes(n, fields.max - fields.left));
	if (!*out && a.failed)
		return orh_fail(err, ENOMEM, "%s: cannot unpack: out of memory", d->short_name);
	if (!*out) /* what check() let through and protobuf-c did not: never seen */
		return orh_fail(err, EBADMSG, "%s: refused by protobuf-c", d->short_name);
	return 0;
}

/* ---- the generated structs into the plugin's own -------------------------------------- */

static char *dup_set(const char *s)
{
	return s && *s ? orh_xstrdup(s) : NULL;
}

static void strv_from(struct orh_strv *sv, char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		orh_strv_push(sv, orh_xstrdup(v[i]));
}

/* Grow an array of n elements for one more, zeroed: its address. */
#define ADD(arr, n)                                                                       \
	((arr) = orh_xgrow(arr, n, sizeof(*(arr))), memset(&(arr)[n], 0, sizeof(*(arr))),    \
	 &(arr)[(n)++])

static void kvs_from(struct orh_nri_kvs *kvs, OrhNri__KeyValue *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct orh_nri_kv *e = ADD(kvs->v, kvs->n);

		e->key = orh_xstrdup(v[i]->key);
		e->value = orh_xstrdup(v[i]->value);
	}
}

static void mounts_from(struct orh_nri_mount **m, size_t *nm, OrhNri__Mount *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct orh_nri_mount *o = ADD(*m, *nm);

		o->destination = dup_set(v[i]->destination);
		o->type = dup_set(v[i]->type);
		o->source = dup_set(v[i]->source);
		strv_from(&o->options, v[i]->options, v[i]->n_options);
	}
}

static void hooks_from(struct orh_nri_hooks *hs, const OrhNri__Hooks *g)
{
	OrhNri__Hook *const *v[ORH_NRI_HOOK_KINDS] = {
		g->prestart, g->create_runtime, g->create_container, g->start_container,
		g->poststart, g->poststop,
	};
	size_t n[ORH_NRI_HOOK_KINDS] = {
		g->n_prestart, g->n_create_runtime, g->n_create_container, g->n_start_container,
		g->n_poststart, g->n_poststop,
	};

	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++) {
		for (size_t i = 0; i < n[k]; i++) {
			struct orh_nri_hook *h = ADD(hs->v[k], hs->n[k]);

			h->path = dup_set(v[k][i]->path);
			strv_from(&h->args, v[k][i]->args, v[k][i]->n_args);
			strv_from(&h->env, v[k][i]->env, v[k][i]->n_env);
			h->has_timeout = v[k][i]->timeout != NULL;
			h->timeout = h->has_timeout ? v[k][i]->timeout->value : 0;
		}
	}
}

static void devices_from(struct orh_nri_device **d, size_t *nd, OrhNri__LinuxDevice *const *v,
			 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct orh_nri_device *o = ADD(*d, *nd);

		o->path = dup_set(v[i]->path);
		o->type = dup_set(v[i]->type);
		o->major = v[i]->major;
		o->minor = v[i]->minor;
		o->has_mode = v[i]->file_mode != NULL;
		o->mode = o->has_mode ? v[i]->file_mode->value : 0;
		o->has_uid = v[i]->uid != NULL;
		o->uid = o->has_uid ? v[i]->uid->value : 0;
		o->has_gid = v[i]->gid != NULL;
		o->gid = o->has_gid ? v[i]->gid->value : 0;
	}
}

/* LinuxResources: its device cgroup rules */
static void rules_from(struct orh_nri_rule **r, size_t *nr, const OrhNri__LinuxResources *res)
{
	for (size_t i = 0; res && i < res->n_devices; i++) {
		const OrhNri__LinuxDeviceCgroup *g = res->devices[i];
		struct orh_nri_rule *o = ADD(*r, *nr);

		o->allow = g->allow;
		o->type = dup_set(g->type);
		o->access = dup_set(g->access);
		o->has_major = g->major != NULL;
		o->major = o->has_major ? g->major->value : 0;
		o->has_minor = g->minor != NULL;
		o->minor = o->has_minor ? g->minor->value : 0;
	}
}

static void rlimits_from(struct orh_nri_rlimit **l, size_t *nl, OrhNri__POSIXRlimit *const *v,
			 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct orh_nri_rlimit *o = ADD(*l, *nl);

		o->type = dup_set(v[i]->type);
		o->hard = v[i]->hard;
		o->soft = v[i]->soft;
	}
}

static void container_from(struct orh_nri_container *c, const OrhNri__Container *g)
{
	c->id = dup_set(g->id);
	c->pod_id = dup_set(g->pod_sandbox_id);
	c->name = dup_set(g->name);
	kvs_from(&c->annotations, g->annotations, g->n_annotations);
	strv_from(&c->args, g->args, g->n_args);
	strv_from(&c->env, g->env, g->n_env);
	mounts_from(&c->mounts, &c->n_mounts, g->mounts, g->n_mounts);
	if (g->hooks)
		hooks_from(&c->hooks, g->hooks);
	rlimits_from(&c->rlimits, &c->n_rlimits, g->rlimits, g->n_rlimits);
	c->pid = g->pid;
	if (g->linux) {
		/* LinuxNamespace{type, path} as a type -> path entry */
		for (size_t i = 0; i < g->linux->n_namespaces; i++) {
			struct orh_nri_kv *e = ADD(c->namespaces.v, c->namespaces.n);

			e->key = orh_xstrdup(g->linux->namespaces[i]->type);
			e->value = orh_xstrdup(g->linux->namespaces[i]->path);
		}
		devices_from(&c->devices, &c->n_devices, g->linux->devices, g->linux->n_devices);
		rules_from(&c->rules, &c->n_rules, g->linux->resources);
	}
	if (g->user) {
		c->has_user = true;
		c->uid = g->user->uid;
		c->gid = g->user->gid;
		for (size_t i = 0; i < g->user->n_additional_gids; i++)
			*ADD(c->gids, c->n_gids) = g->user->additional_gids[i];
	}
}

/* CreateContainerRequest and StartContainerRequest: the same two fields */
static int container_request_decode(const ProtobufCMessageDescriptor *desc, const char *what,
				    const void *p, size_t n, struct orh_nri_create *req,
				    struct orh_err *err)
{
	ProtobufCMessage *m = NULL;
	const OrhNri__CreateContainerRequest *g;
	int k;

	memset(req, 0, sizeof(*req));
	k = unpack(desc, p, n, ORH_NRI_FIELDS_MAX, &m, err);
	if (k < 0)
		return k;
	/* the generated structs of the two messages are laid out alike: base, pod, container */
	g = (const OrhNri__CreateContainerRequest *)m;
	if (g->pod) {
		req->pod.id = dup_set(g->pod->id);
		req->pod.name = dup_set(g->pod->name);
		req->pod.uid = dup_set(g->pod->uid);
		req->pod.namespace = dup_set(g->pod->namespace_);
		kvs_from(&req->pod.annotations, g->pod->annotations, g->pod->n_annotations);
	}
	if (g->container)
		container_from(&req->ctr, g->container);
	protobuf_c_message_free_unpacked(m, NULL);
	if (!req->ctr.id) {
		orh_nri_create_free(req);
		return orh_fail(err, EBADMSG, "%s: no container id", what);
	}
	return 0;
}

int orh_nri_create_decode(const void *p, size_t n, struct orh_nri_create *req,
			  struct orh_err *err)
{
	return container_request_decode(&orh_nri__create_container_request__descriptor,
					"CreateContainerRequest", p, n, req, err);
}

char *orh_nri_start_id(const void *p, size_t n)
{
	struct orh_pb_reader r, c;
	struct orh_pb_field f;
	struct orh_err err;
	const uint8_t *id = NULL;
	size_t len = 0;
	char *out;

	/* StartContainerRequest{container = 2{id = 1}}: the last of each, as protobuf reads */
	orh_pb_reader_init(&r, p, n);
	while (orh_pb_next(&r, &f, &err) == 1) {
		if (f.num != 2 || f.wire != ORH_PB_LEN || orh_pb_sub(&r, &f, &c, &err) < 0)
			continue;
		while (orh_pb_next(&c, &f, &err) == 1)
			if (f.num == 1 && f.wire == ORH_PB_LEN) {
				id = f.data;
				len = f.len;
			}
	}
	if (!id || !len || len > NAME_MAX || memchr(id, '\0', len))
		return NULL;
	out = orh_xmalloc(len + 1);
	memcpy(out, id, len);
	out[len] = '\0';
	return out;
}

int orh_nri_start_decode(const void *p, size_t n, struct orh_nri_create *req,
			 struct orh_err *err)
{
	_Static_assert(offsetof(OrhNri__StartContainerRequest, pod) ==
			       offsetof(OrhNri__CreateContainerRequest, pod) &&
		       offsetof(OrhNri__StartContainerRequest, container) ==
			       offsetof(OrhNri__CreateContainerRequest, container),
		       "StartContainerRequest read as CreateContainerRequest");
	return container_request_decode(&orh_nri__start_container_request__descriptor,
					"StartContainerRequest", p, n, req, err);
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
	ProtobufCMessage *m = NULL;
	const OrhNri__ConfigureRequest *g;
	int k;

	memset(req, 0, sizeof(*req));
	k = unpack(&orh_nri__configure_request__descriptor, p, n, ORH_NRI_FIELDS_MAX, &m, err);
	if (k < 0)
		return k;
	g = (const OrhNri__ConfigureRequest *)m;
	req->config = dup_set(g->config);
	req->runtime_name = dup_set(g->runtime_name);
	req->runtime_version = dup_set(g->runtime_version);
	req->request_timeout_ms = g->request_timeout;
	protobuf_c_message_free_unpacked(m, NULL);
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
	ProtobufCMessage *m = NULL;
	int k;

	*more = false;
	k = unpack(&orh_nri__synchronize_request__descriptor, p, n, ORH_NRI_FIELDS_MAX, &m, err);
	if (k < 0)
		return k;
	*more = ((const OrhNri__SynchronizeRequest *)m)->more;
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}

/* nri.h's numbers of the API's, which the runtime's messages carry */
_Static_assert(ORH_NRI_EVENT_REMOVE == ORH_NRI__EVENT__REMOVE_CONTAINER, "Event");
_Static_assert(ORH_NRI_STATE_UNKNOWN == ORH_NRI__CONTAINER_STATE__CONTAINER_UNKNOWN,
	       "ContainerState");

int orh_nri_removed_decode(const void *p, size_t n, bool event_msg,
			   struct orh_nri_removed *rm, struct orh_err *err)
{
	ProtobufCMessage *m = NULL;
	const OrhNri__Container *g;
	int k;

	memset(rm, 0, sizeof(*rm));
	k = unpack(event_msg ? &orh_nri__state_change_event__descriptor
			     : &orh_nri__remove_container_request__descriptor,
		   p, n, ORH_NRI_FIELDS_MAX, &m, err);
	if (k < 0)
		return k;
	if (event_msg)
		g = ((const OrhNri__StateChangeEvent *)m)->event == ORH_NRI__EVENT__REMOVE_CONTAINER
			    ? ((const OrhNri__StateChangeEvent *)m)->container
			    : NULL;
	else
		g = ((const OrhNri__RemoveContainerRequest *)m)->container;
	if (g) {
		rm->id = dup_set(g->id);
		rm->state = (int)g->state;
		rm->created_at = g->created_at;
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}

int orh_nri_adjust_decode(const void *p, size_t n, struct orh_nri_adjust *a,
			  struct orh_err *err)
{
	ProtobufCMessage *m = NULL;
	const OrhNri__ContainerAdjustment *g;
	int k;

	memset(a, 0, sizeof(*a));
	k = unpack(&orh_nri__container_adjustment__descriptor, p, n, ORH_NRI_FIELDS_MAX, &m, err);
	if (k < 0)
		return k;
	g = (const OrhNri__ContainerAdjustment *)m;
	kvs_from(&a->annotations, g->annotations, g->n_annotations);
	mounts_from(&a->mounts, &a->n_mounts, g->mounts, g->n_mounts);
	kvs_from(&a->env, g->env, g->n_env);
	if (g->hooks)
		hooks_from(&a->hooks, g->hooks);
	if (g->linux) {
		devices_from(&a->devices, &a->n_devices, g->linux->devices, g->linux->n_devices);
		rules_from(&a->rules, &a->n_rules, g->linux->resources);
	}
	rlimits_from(&a->rlimits, &a->n_rlimits, g->rlimits, g->n_rlimits);
	protobuf_c_message_free_unpacked(m, NULL);
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
