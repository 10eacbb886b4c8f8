/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NRI's connection multiplexer and ttrpc's framing and envelope (include/orh/base/ttrpc.h):
 * pure functions of the bytes given.
 */
#include <errno.h>
#include <string.h>

#include "orh/base/pbwire.h"
#include "orh/base/ttrpc.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

void orh_ttrpc_hdr_get(const uint8_t *p, struct orh_ttrpc_hdr *h)
{
	h->len = be32(p);
	h->stream = be32(p + 4);
	h->type = p[8];
	h->flags = p[9];
}

void orh_ttrpc_hdr_put(uint8_t *p, const struct orh_ttrpc_hdr *h)
{
	put_be32(p, h->len);
	put_be32(p + 4, h->stream);
	p[8] = h->type;
	p[9] = h->flags;
}

int orh_mux_feed(struct orh_mux_in *m, const void *buf, size_t n, struct orh_err *err)
{
	const uint8_t *p = buf;

	while (n > 0) {
		if (m->left == 0 && m->hdr_n < ORH_MUX_HDR) {
			size_t k = ORH_MUX_HDR - m->hdr_n < n ? ORH_MUX_HDR - m->hdr_n : n;

			memcpy(m->hdr + m->hdr_n, p, k);
			m->hdr_n += k;
			p += k;
			n -= k;
			if (m->hdr_n < ORH_MUX_HDR)
				break;
			m->conn = be32(m->hdr);
			m->left = be32(m->hdr + 4);
			if (m->left > ORH_TTRPC_HDR + ORH_TTRPC_MSG_MAX)
				return orh_fail(err, EPROTO,
						"a multiplexer frame of %u bytes: longer than any "
						"message", m->left);
			if (m->left == 0) {
				m->hdr_n = 0;
				continue;
			}
		}
		size_t k = m->left < n ? m->left : n;

		if (m->conn == ORH_MUX_PLUGIN || m->conn == ORH_MUX_RUNTIME)
			orh_buf_add(&m->stream[m->conn - 1], (const char *)p, k);
		p += k;
		n -= k;
		m->left -= (uint32_t)k;
		if (m->left == 0)
			m->hdr_n = 0;
	}
	return 0;
}

/* Drop the bytes of a stream already handed out once they are most of it; a stream all
 * handed out gives its memory back when it grew past ORH_MUX_KEEP (a large message). */
static void compact(struct orh_buf *s, size_t *taken)
{
	if (*taken == 0 || *taken < s->n / 2)
		return;
	if (*taken == s->n && s->cap > ORH_MUX_KEEP) {
		free(s->p);
		memset(s, 0, sizeof(*s));
		*taken = 0;
		return;
	}
	memmove(s->p, s->p + *taken, s->n - *taken);
	s->n -= *taken;
	s->p[s->n] = '\0';
	*taken = 0;
}

int orh_mux_take(struct orh_mux_in *m, struct orh_ttrpc_msg *msg, struct orh_err *err)
{
	memset(msg, 0, sizeof(*msg));
	for (unsigned c = 0; c < 2; c++) {
		struct orh_buf *s = &m->stream[c];
		size_t have = s->n - m->taken[c];
		const uint8_t *p;

		if (have < ORH_TTRPC_HDR) /* (a stream of nothing yet has no buffer) */
			continue;
		p = (const uint8_t *)s->p + m->taken[c];
		orh_ttrpc_hdr_get(p, &msg->hdr);
		if (msg->hdr.len > ORH_TTRPC_MSG_MAX)
			return orh_fail(err, EMSGSIZE,
					"a ttrpc message of %u bytes on connection %u: more than "
					"%u", msg->hdr.len, c + 1, ORH_TTRPC_MSG_MAX);
		if (have - ORH_TTRPC_HDR < msg->hdr.len)
			continue;
		msg->conn = c + 1;
		msg->len = msg->hdr.len;
		msg->payload = orh_xmalloc(msg->len + 1);
		memcpy(msg->payload, p + ORH_TTRPC_HDR, msg->len);
		m->taken[c] += ORH_TTRPC_HDR + msg->len;
		compact(s, &m->taken[c]);
		return 1;
	}
	return 0;
}

void orh_mux_in_free(struct orh_mux_in *m)
{
	free(m->stream[0].p);
	free(m->stream[1].p);
	memset(m, 0, sizeof(*m));
}

/* One frame of conn: its header and n bytes. */
static void frame(struct orh_buf *out, uint32_t conn, const uint8_t *p, size_t n)
{
	uint8_t h[ORH_MUX_HDR];

	put_be32(h, conn);
	put_be32(h + 4, (uint32_t)n);
	orh_buf_add(out, (const char *)h, sizeof(h));
	orh_buf_add(out, (const char *)p, n);
}

void orh_mux_put_msg(struct orh_buf *out, uint32_t conn, uint32_t stream, uint8_t type,
		     uint8_t flags, const void *payload, size_t len)
{
	struct orh_ttrpc_hdr h = { .len = (uint32_t)len, .stream = stream, .type = type,
				   .flags = flags };
	struct orh_buf msg = { 0 };
	uint8_t hb[ORH_TTRPC_HDR];

	orh_ttrpc_hdr_put(hb, &h);
	orh_buf_add(&msg, (const char *)hb, sizeof(hb));
	if (len)
		orh_buf_add(&msg, payload, len);
	for (size_t off = 0; off < msg.n; off += ORH_MUX_FRAME_MAX) {
		size_t k = msg.n - off < ORH_MUX_FRAME_MAX ? msg.n - off : ORH_MUX_FRAME_MAX;

		frame(out, conn, (const uint8_t *)msg.p + off, k);
	}
	free(msg.p);
}

int orh_ttrpc_request_decode(const void *p, size_t n, struct orh_ttrpc_request *req,
			     struct orh_err *err)
{
	struct orh_pb_reader r;
	struct orh_pb_field f;
	char **s;
	int k;

	memset(req, 0, sizeof(*req));
	orh_pb_reader_init(&r, p, n);
	while ((k = orh_pb_next(&r, &f, err)) > 0) {
		switch (f.num) {
		case 1:
		case 2:
			s = f.num == 1 ? &req->service : &req->method;
			free(*s);
			*s = NULL;
			k = orh_pb_string(&f, s, err);
			break;
		case 3:
			if (f.wire != ORH_PB_LEN) {
				k = orh_fail(err, EBADMSG, "ttrpc request: payload is no bytes");
				break;
			}
			req->payload = f.data;
			req->payload_len = f.len;
			break;
		case 4:
			if (f.wire == ORH_PB_VARINT)
				req->timeout_nano = (int64_t)f.v;
			break;
		default: /* metadata (5) and what a later ttrpc adds: not needed */
			break;
		}
		if (k < 0)
			break;
	}
	if (k == 0 && (!req->service || !req->method))
		k = orh_fail(err, EBADMSG, "ttrpc request: no %s",
			     req->service ? "method" : "service");
	if (k < 0) {
		orh_ttrpc_request_free(req);
		return orh_err_prefix(err, "ttrpc request");
	}
	return 0;
}

void orh_ttrpc_request_free(struct orh_ttrpc_request *req)
{
	free(req->service);
	free(req->method);
	memset(req, 0, sizeof(*req));
}

void orh_ttrpc_request_encode(struct orh_buf *b, const char *service, const char *method,
			      const void *payload, size_t len)
{
	orh_pb_put_string(b, 1, service);
	orh_pb_put_string(b, 2, method);
	if (len)
		orh_pb_put_bytes(b, 3, payload, len);
}

static int status_decode(const struct orh_pb_reader *parent, const struct orh_pb_field *sf,
			 struct orh_ttrpc_response *res, struct orh_err *err)
{
	struct orh_pb_reader r;
	struct orh_pb_field f;
	int k = orh_pb_sub(parent, sf, &r, err);

	if (k < 0)
		return k;
	while ((k = orh_pb_next(&r, &f, err)) > 0) {
		if (f.num == 1 && f.wire == ORH_PB_VARINT) {
			res->code = (int32_t)f.v;
		} else if (f.num == 2) { /* details (3) are not read */
			free(res->message);
			res->message = NULL;
			if (orh_pb_string(&f, &res->message, err) < 0)
				return -EBADMSG;
		}
	}
	return k;
}

int orh_ttrpc_response_decode(const void *p, size_t n, struct orh_ttrpc_response *res,
			      struct orh_err *err)
{
	struct orh_pb_reader r;
	struct orh_pb_field f;
	int k;

	memset(res, 0, sizeof(*res));
	orh_pb_reader_init(&r, p, n);
	while ((k = orh_pb_next(&r, &f, err)) > 0) {
		if (f.num == 1) {
			k = status_decode(&r, &f, res, err);
		} else if (f.num == 2) {
			if (f.wire != ORH_PB_LEN) {
				k = orh_fail(err, EBADMSG, "payload is no bytes");
			} else {
				res->payload = f.data;
				res->payload_len = f.len;
			}
		}
		if (k < 0)
			break;
	}
	if (k < 0) {
		orh_ttrpc_response_free(res);
		return orh_err_prefix(err, "ttrpc response");
	}
	return 0;
}

void orh_ttrpc_response_free(struct orh_ttrpc_response *res)
{
	free(res->message);
	memset(res, 0, sizeof(*res));
}

void orh_ttrpc_response_encode(struct orh_buf *b, int32_t code, const char *message,
			       const void *payload, size_t len)
{
	size_t st = orh_pb_begin(b, 1);

	if (code != ORH_RPC_OK) {
		orh_pb_put_varint(b, 1, (uint64_t)(int64_t)code);
		if (message && *message)
			orh_pb_put_string(b, 2, message);
	}
	orh_pb_end(b, st);
	if (len)
		orh_pb_put_bytes(b, 2, payload, len);
}
