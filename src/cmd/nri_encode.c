/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NRI's messages as the plugin writes them (include/orh/cmd/nri.h): its registration, its
 * answers to Configure and Synchronize, and the ContainerAdjustment of a CreateContainer,
 * with the field numbers of pkg/api/api.proto. proto3 leaves out a field of its default
 * value; an Optional* wrapper is written whenever its value is set, 0 included. And the
 * header of a worker's output, the plugin's own, and a ttrpc Response as the multiplexer's
 * frames.
 */
#include <stdlib.h>
#include <string.h>

#include "orh/cmd/nri.h"
#include "orh/base/pbwire.h"
#include "orh/base/ttrpc.h"

void orh_nri_register_encode(struct orh_buf *b, const char *name, const char *idx)
{
	orh_pb_put_string(b, 1, name);
	orh_pb_put_string(b, 2, idx);
	orh_pb_put_string(b, 3, ORH_NRI_VERSION);
}

void orh_nri_configure_response_encode(struct orh_buf *b, int32_t events)
{
	orh_pb_put_varint(b, 2, (uint64_t)(int64_t)events);
}

void orh_nri_sync_response_encode(struct orh_buf *b, bool more)
{
	if (more) /* proto3 leaves false out */
		orh_pb_put_varint(b, 2, 1);
}

static void put_optional(struct orh_buf *b, uint32_t num, uint64_t v)
{
	size_t at = orh_pb_begin(b, num);

	if (v)
		orh_pb_put_varint(b, 1, v);
	orh_pb_end(b, at);
}

static void put_nonempty(struct orh_buf *b, uint32_t num, const char *s)
{
	if (s && *s)
		orh_pb_put_string(b, num, s);
}

static void put_mount(struct orh_buf *b, const struct orh_nri_mount *m)
{
	size_t at = orh_pb_begin(b, 3);

	put_nonempty(b, 1, m->destination);
	put_nonempty(b, 2, m->type);
	put_nonempty(b, 3, m->source);
	for (size_t i = 0; i < m->options.n; i++)
		orh_pb_put_string(b, 4, m->options.v[i]);
	orh_pb_end(b, at);
}

static void put_hook(struct orh_buf *b, uint32_t num, const struct orh_nri_hook *h)
{
	size_t at = orh_pb_begin(b, num);

	put_nonempty(b, 1, h->path);
	for (size_t i = 0; i < h->args.n; i++)
		orh_pb_put_string(b, 2, h->args.v[i]);
	for (size_t i = 0; i < h->env.n; i++)
		orh_pb_put_string(b, 3, h->env.v[i]);
	if (h->has_timeout)
		put_optional(b, 4, (uint64_t)h->timeout);
	orh_pb_end(b, at);
}

static void put_device(struct orh_buf *b, const struct orh_nri_device *d)
{
	size_t at = orh_pb_begin(b, 1);

	put_nonempty(b, 1, d->path);
	put_nonempty(b, 2, d->type);
	if (d->major)
		orh_pb_put_varint(b, 3, (uint64_t)d->major);
	if (d->minor)
		orh_pb_put_varint(b, 4, (uint64_t)d->minor);
	if (d->has_mode)
		put_optional(b, 5, d->mode);
	if (d->has_uid)
		put_optional(b, 6, d->uid);
	if (d->has_gid)
		put_optional(b, 7, d->gid);
	orh_pb_end(b, at);
}

static void put_rule(struct orh_buf *b, const struct orh_nri_rule *d)
{
	size_t at = orh_pb_begin(b, 7);

	if (d->allow)
		orh_pb_put_varint(b, 1, 1);
	put_nonempty(b, 2, d->type);
	if (d->has_major)
		put_optional(b, 3, (uint64_t)d->major);
	if (d->has_minor)
		put_optional(b, 4, (uint64_t)d->minor);
	put_nonempty(b, 5, d->access);
	orh_pb_end(b, at);
}

bool orh_nri_adjust_empty(const struct orh_nri_adjust *a)
{
	size_t hooks = 0;

	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++)
		hooks += a->hooks.n[k];
	return !a->annotations.n && !a->n_mounts && !a->env.n && !hooks && !a->n_devices &&
	       !a->n_rules && !a->n_rlimits;
}

void orh_nri_adjust_encode(struct orh_buf *b, const struct orh_nri_adjust *a)
{
	size_t at, hooks = 0;

	for (size_t i = 0; i < a->annotations.n; i++) {
		at = orh_pb_begin(b, 2);
		put_nonempty(b, 1, a->annotations.v[i].key);
		put_nonempty(b, 2, a->annotations.v[i].value);
		orh_pb_end(b, at);
	}
	for (size_t i = 0; i < a->n_mounts; i++)
		put_mount(b, &a->mounts[i]);
	for (size_t i = 0; i < a->env.n; i++) {
		at = orh_pb_begin(b, 4);
		put_nonempty(b, 1, a->env.v[i].key);
		put_nonempty(b, 2, a->env.v[i].value);
		orh_pb_end(b, at);
	}
	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++)
		hooks += a->hooks.n[k];
	if (hooks) {
		at = orh_pb_begin(b, 5);
		for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++)
			for (size_t i = 0; i < a->hooks.n[k]; i++)
				put_hook(b, k + 1, &a->hooks.v[k][i]);
		orh_pb_end(b, at);
	}
	if (a->n_devices || a->n_rules) {
		at = orh_pb_begin(b, 6);
		for (size_t i = 0; i < a->n_devices; i++)
			put_device(b, &a->devices[i]);
		if (a->n_rules) {
			size_t res = orh_pb_begin(b, 2);

			for (size_t i = 0; i < a->n_rules; i++)
				put_rule(b, &a->rules[i]);
			orh_pb_end(b, res);
		}
		orh_pb_end(b, at);
	}
	for (size_t i = 0; i < a->n_rlimits; i++) {
		at = orh_pb_begin(b, 7);
		put_nonempty(b, 1, a->rlimits[i].type);
		orh_pb_put_varint(b, 2, a->rlimits[i].hard);
		orh_pb_put_varint(b, 3, a->rlimits[i].soft);
		orh_pb_end(b, at);
	}
}

void orh_nri_create_response_encode(struct orh_buf *b, const struct orh_nri_adjust *adj)
{
	size_t at;

	if (orh_nri_adjust_empty(adj))
		return;
	at = orh_pb_begin(b, 1);
	orh_nri_adjust_encode(b, adj);
	orh_pb_end(b, at);
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
