/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NRI's messages as the plugin writes them (include/orh/cmd/nri.h): its registration, its
 * answers to Configure and Synchronize, and the ContainerAdjustment of a CreateContainer,
 * each built as the struct protoc-c made from src/cmd/nri/api*.proto, pointing at the
 * plugin's own strings and arrays, and packed by protobuf-c. proto3 leaves out a field of its
 * default value; an Optional* wrapper is written whenever its value is set, 0 included. And
 * the header of a worker's output, the plugin's own, and a ttrpc Response as the
 * multiplexer's frames.
 */
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "orh/cmd/nri.h"
#include "orh/base/ttrpc.h"
#include "nri/api.pb-c.h"

/* m packed, appended to b. */
static void pack(struct orh_buf *b, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	orh_buf_reserve(b, n);
	b->n += protobuf_c_message_pack(m, (uint8_t *)b->p + b->n);
	b->p[b->n] = '\0';
}

void orh_nri_register_encode(struct orh_buf *b, const char *name, const char *idx)
{
	OrhNri__RegisterPluginRequest m = ORH_NRI__REGISTER_PLUGIN_REQUEST__INIT;

	m.plugin_name = (char *)name;
	m.plugin_idx = (char *)idx;
	m.nri_version = (char *)ORH_NRI_VERSION;
	pack(b, &m.base);
}

void orh_nri_configure_response_encode(struct orh_buf *b, int32_t events)
{
	OrhNri__ConfigureResponse m = ORH_NRI__CONFIGURE_RESPONSE__INIT;

	m.events = events;
	pack(b, &m.base);
}

void orh_nri_sync_response_encode(struct orh_buf *b, bool more)
{
	OrhNri__SynchronizeResponse m = ORH_NRI__SYNCHRONIZE_RESPONSE__INIT;

	m.more = more;
	pack(b, &m.base);
}

/* The memory an adjustment's generated structs take while it is packed: freed together. */
struct held {
	void **v;
	size_t n;
};

static void *hold(struct held *h, size_t size)
{
	h->v = orh_xgrow(h->v, h->n, sizeof(*h->v));
	return h->v[h->n++] = orh_xcalloc(1, size);
}

static void held_free(struct held *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i]);
	free(h->v);
}

/* An array of n pointers to structs of size, each set to init: the array. */
static void *structs(struct held *h, size_t n, size_t size, const void *init)
{
	void **v = n ? hold(h, n * sizeof(*v)) : NULL;

	for (size_t i = 0; i < n; i++)
		v[i] = memcpy(hold(h, size), init, size);
	return v;
}
#define STRUCTS(h, n, type, INIT) ((type **)structs(h, n, sizeof(type), &(type)INIT))

static OrhNri__KeyValue **kvs_to(struct held *h, const struct orh_nri_kvs *kvs)
{
	OrhNri__KeyValue **v = STRUCTS(h, kvs->n, OrhNri__KeyValue, ORH_NRI__KEY_VALUE__INIT);

	for (size_t i = 0; i < kvs->n; i++) {
		v[i]->key = kvs->v[i].key;
		v[i]->value = kvs->v[i].value;
	}
	return v;
}

static OrhNri__Mount **mounts_to(struct held *h, const struct orh_nri_mount *m, size_t n)
{
	OrhNri__Mount **v = STRUCTS(h, n, OrhNri__Mount, ORH_NRI__MOUNT__INIT);

	for (size_t i = 0; i < n; i++) {
		v[i]->destination = m[i].destination;
		v[i]->type = m[i].type;
		v[i]->source = m[i].source;
		v[i]->n_options = m[i].options.n;
		v[i]->options = m[i].options.v;
	}
	return v;
}

static OrhNri__Hook **hooks_to(struct held *h, const struct orh_nri_hook *hk, size_t n)
{
	OrhNri__Hook **v = STRUCTS(h, n, OrhNri__Hook, ORH_NRI__HOOK__INIT);

	for (size_t i = 0; i < n; i++) {
		v[i]->path = hk[i].path;
		v[i]->n_args = hk[i].args.n;
		v[i]->args = hk[i].args.v;
		v[i]->n_env = hk[i].env.n;
		v[i]->env = hk[i].env.v;
		if (hk[i].has_timeout) {
			v[i]->timeout = *STRUCTS(h, 1, OrhNri__OptionalInt,
						 ORH_NRI__OPTIONAL_INT__INIT);
			v[i]->timeout->value = hk[i].timeout;
		}
	}
	return v;
}

/* A wrapper of value v: OptionalFileMode and OptionalUInt32 alike. */
static OrhNri__OptionalUInt32 *u32_to(struct held *h, const ProtobufCMessageDescriptor *d,
				      uint32_t v)
{
	OrhNri__OptionalUInt32 *o = *STRUCTS(h, 1, OrhNri__OptionalUInt32,
					     ORH_NRI__OPTIONAL_UINT32__INIT);

	o->base.descriptor = d;
	o->value = v;
	return o;
}

static OrhNri__LinuxDevice **devices_to(struct held *h, const struct orh_nri_device *d, size_t n)
{
	OrhNri__LinuxDevice **v = STRUCTS(h, n, OrhNri__LinuxDevice,
					  ORH_NRI__LINUX_DEVICE__INIT);

	for (size_t i = 0; i < n; i++) {
		v[i]->path = d[i].path;
		v[i]->type = d[i].type;
		v[i]->major = d[i].major;
		v[i]->minor = d[i].minor;
		if (d[i].has_mode)
			v[i]->file_mode = (OrhNri__OptionalFileMode *)u32_to(h,
					  &orh_nri__optional_file_mode__descriptor, d[i].mode);
		if (d[i].has_uid)
			v[i]->uid = u32_to(h, &orh_nri__optional_uint32__descriptor, d[i].uid);
		if (d[i].has_gid)
			v[i]->gid = u32_to(h, &orh_nri__optional_uint32__descriptor, d[i].gid);
	}
	return v;
}

static OrhNri__OptionalInt64 *i64_to(struct held *h, int64_t v)
{
	OrhNri__OptionalInt64 *o = *STRUCTS(h, 1, OrhNri__OptionalInt64,
					    ORH_NRI__OPTIONAL_INT64__INIT);

	o->value = v;
	return o;
}

static OrhNri__LinuxDeviceCgroup **rules_to(struct held *h, const struct orh_nri_rule *r,
					    size_t n)
{
	OrhNri__LinuxDeviceCgroup **v = STRUCTS(h, n, OrhNri__LinuxDeviceCgroup,
						ORH_NRI__LINUX_DEVICE_CGROUP__INIT);

	for (size_t i = 0; i < n; i++) {
		v[i]->allow = r[i].allow;
		v[i]->type = r[i].type;
		v[i]->access = r[i].access;
		if (r[i].has_major)
			v[i]->major = i64_to(h, r[i].major);
		if (r[i].has_minor)
			v[i]->minor = i64_to(h, r[i].minor);
	}
	return v;
}

static OrhNri__POSIXRlimit **rlimits_to(struct held *h, const struct orh_nri_rlimit *l, size_t n)
{
	OrhNri__POSIXRlimit **v = STRUCTS(h, n, OrhNri__POSIXRlimit,
					  ORH_NRI__POSIXRLIMIT__INIT);

	for (size_t i = 0; i < n; i++) {
		v[i]->type = l[i].type;
		v[i]->hard = l[i].hard;
		v[i]->soft = l[i].soft;
	}
	return v;
}

static size_t hooks_of(const struct orh_nri_adjust *a)
{
	size_t hooks = 0;

	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++)
		hooks += a->hooks.n[k];
	return hooks;
}

bool orh_nri_adjust_empty(const struct orh_nri_adjust *a)
{
	return !a->annotations.n && !a->n_mounts && !a->env.n && !hooks_of(a) &&
	       !a->n_devices && !a->n_rules && !a->n_rlimits;
}

/* The adjustment as the generated struct *m, its parts held in h. */
static void adjust_to(struct held *h, const struct orh_nri_adjust *a,
		      OrhNri__ContainerAdjustment *m)
{
	const struct orh_nri_hooks *hs = &a->hooks;

	m->n_annotations = a->annotations.n;
	m->annotations = kvs_to(h, &a->annotations);
	m->n_mounts = a->n_mounts;
	m->mounts = mounts_to(h, a->mounts, a->n_mounts);
	m->n_env = a->env.n;
	m->env = kvs_to(h, &a->env);
	if (hooks_of(a)) {
		OrhNri__Hooks *g = *STRUCTS(h, 1, OrhNri__Hooks, ORH_NRI__HOOKS__INIT);

		g->n_prestart = hs->n[0];
		g->prestart = hooks_to(h, hs->v[0], hs->n[0]);
		g->n_create_runtime = hs->n[1];
		g->create_runtime = hooks_to(h, hs->v[1], hs->n[1]);
		g->n_create_container = hs->n[2];
		g->create_container = hooks_to(h, hs->v[2], hs->n[2]);
		g->n_start_container = hs->n[3];
		g->start_container = hooks_to(h, hs->v[3], hs->n[3]);
		g->n_poststart = hs->n[4];
		g->poststart = hooks_to(h, hs->v[4], hs->n[4]);
		g->n_poststop = hs->n[5];
		g->poststop = hooks_to(h, hs->v[5], hs->n[5]);
		m->hooks = g;
	}
	if (a->n_devices || a->n_rules) {
		m->linux = *STRUCTS(h, 1, OrhNri__LinuxContainerAdjustment,
				    ORH_NRI__LINUX_CONTAINER_ADJUSTMENT__INIT);
		m->linux->n_devices = a->n_devices;
		m->linux->devices = devices_to(h, a->devices, a->n_devices);
	}
	if (a->n_rules) {
		m->linux->resources = *STRUCTS(h, 1, OrhNri__LinuxResources,
					       ORH_NRI__LINUX_RESOURCES__INIT);
		m->linux->resources->n_devices = a->n_rules;
		m->linux->resources->devices = rules_to(h, a->rules, a->n_rules);
	}
	m->n_rlimits = a->n_rlimits;
	m->rlimits = rlimits_to(h, a->rlimits, a->n_rlimits);
}

void orh_nri_adjust_encode(struct orh_buf *b, const struct orh_nri_adjust *a)
{
	OrhNri__ContainerAdjustment m = ORH_NRI__CONTAINER_ADJUSTMENT__INIT;
	struct held h = { 0 };

	adjust_to(&h, a, &m);
	pack(b, &m.base);
	held_free(&h);
}

void orh_nri_create_response_encode(struct orh_buf *b, const struct orh_nri_adjust *adj)
{
	OrhNri__CreateContainerResponse m = ORH_NRI__CREATE_CONTAINER_RESPONSE__INIT;
	OrhNri__ContainerAdjustment g = ORH_NRI__CONTAINER_ADJUSTMENT__INIT;
	struct held h = { 0 };

	if (orh_nri_adjust_empty(adj))
		return;
	adjust_to(&h, adj, &g);
	m.adjust = &g;
	pack(b, &m.base);
	held_free(&h);
}

void orh_nri_worker_head_put(struct orh_buf *b, bool refuse_late, const char *what)
{
	orh_buf_addc(b, refuse_late ? 1 : 0);
	orh_buf_add(b, what, strlen(what) + 1);
}

size_t orh_nri_worker_head_get(const char *p, size_t n, bool *refuse_late)
{
	const char *nul = n >= 2 ? memchr(p + 1, '\0', n - 1) : NULL;

	if (!nul)
		return 0;
	*refuse_late = p[0] == 1;
	return (size_t)(nul - p) + 1;
}

void orh_nri_respond(struct orh_buf *out, uint32_t stream, int32_t code, const char *msg,
		     const struct orh_buf *payload)
{
	struct orh_buf b = { 0 };

	orh_ttrpc_response_encode(&b, code, msg, payload ? payload->p : NULL,
				  payload ? payload->n : 0);
	orh_mux_put_msg(out, ORH_MUX_PLUGIN, stream, ORH_TTRPC_RESPONSE, 0, b.p, b.n);
	free(b.p);
}
