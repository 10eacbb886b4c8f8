/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the NRI plugin speaks, without a socket: the protobuf wire format (orh/base/pbwire.h),
 * NRI's multiplexer and ttrpc (orh/base/ttrpc.h), and NRI's messages (orh/cmd/nri.h): round trips,
 * and malformed input refused with a message (truncated varints, lengths past the end,
 * nesting past the bound). Bytes written here by hand follow pkg/api/api.proto's numbers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orh/cmd/nri.h"
#include "orh/decide/oci.h"
#include "orh/base/pbwire.h"
#include "orh/base/ttrpc.h"

/* ---- the wire format ---------------------------------------------------------------- */

Test(pbwire, varint_round_trip)
{
	const uint64_t vals[] = { 0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX,
				  (uint64_t)INT64_MAX, UINT64_MAX };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(vals); i++) {
		uint8_t b[10];
		uint64_t v = 0;
		size_t n = orh_pb_varint_put(b, vals[i]);

		cr_assert_eq(orh_pb_varint_get(b, n, &v), (int)n);
		cr_assert_eq(v, vals[i]);
		/* one byte short is a truncation */
		cr_assert_eq(orh_pb_varint_get(b, n - 1, &v), -EBADMSG);
	}
	/* 300 is ac 02 on the wire */
	uint8_t b[10];

	cr_assert_eq(orh_pb_varint_put(b, 300), 2);
	cr_assert(b[0] == 0xac && b[1] == 0x02);
}

Test(pbwire, varint_overlong_refused)
{
	const uint8_t eleven[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0 };
	const uint8_t tenth_too_big[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2 };
	uint64_t v = 0;

	cr_assert_eq(orh_pb_varint_get(eleven, sizeof(eleven), &v), -EBADMSG);
	cr_assert_eq(orh_pb_varint_get(tenth_too_big, sizeof(tenth_too_big), &v), -EBADMSG);
}

Test(pbwire, fields_written_are_read_back)
{
	struct orh_buf b = { 0 };
	struct orh_pb_reader r, sub;
	struct orh_pb_field f;
	struct orh_err err = { 0 };
	char *s = NULL;
	size_t at;

	orh_pb_put_varint(&b, 1, 42);
	orh_pb_put_string(&b, 2, "hello");
	at = orh_pb_begin(&b, 3);
	orh_pb_put_varint(&b, 1, 7);
	orh_pb_put_bytes(&b, 15, "x", 1);
	orh_pb_end(&b, at);
	orh_pb_put_varint(&b, 536870911, 1);

	orh_pb_reader_init(&r, b.p, b.n);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert(f.num == 1 && f.wire == ORH_PB_VARINT && f.v == 42);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert_eq(orh_pb_string(&f, &s, &err), 0);
	cr_assert_str_eq(s, "hello");
	free(s);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert_eq(f.num, 3);
	cr_assert_eq(orh_pb_sub(&r, &f, &sub, &err), 0);
	cr_assert_eq(sub.depth, 1);
	cr_assert_eq(orh_pb_next(&sub, &f, &err), 1);
	cr_assert(f.num == 1 && f.v == 7);
	cr_assert_eq(orh_pb_next(&sub, &f, &err), 1);
	cr_assert(f.num == 15 && f.len == 1 && f.data[0] == 'x');
	cr_assert_eq(orh_pb_next(&sub, &f, &err), 0);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert_eq(f.num, 536870911);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 0);
	free(b.p);
}

Test(pbwire, a_long_nested_message_gets_a_long_length)
{
	struct orh_buf b = { 0 };
	struct orh_pb_reader r;
	struct orh_pb_field f;
	struct orh_err err = { 0 };
	char big[1000];
	size_t at;

	memset(big, 'a', sizeof(big));
	at = orh_pb_begin(&b, 1);
	orh_pb_put_bytes(&b, 2, big, sizeof(big));
	orh_pb_end(&b, at);
	orh_pb_reader_init(&r, b.p, b.n);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert_eq(f.len, 1000 + 1 + 2); /* tag, 2-byte length, the bytes */
	cr_assert_eq(orh_pb_next(&r, &f, &err), 0);
	free(b.p);
}

Test(pbwire, fixed_fields_are_stepped_over)
{
	const uint8_t m[] = { 0x09, 1, 2, 3, 4, 5, 6, 7, 8,  /* 1: fixed64 */
			      0x15, 1, 0, 0, 0,              /* 2: fixed32 = 1 */
			      0x18, 5 };                     /* 3: varint 5 */
	struct orh_pb_reader r;
	struct orh_pb_field f;
	struct orh_err err = { 0 };

	orh_pb_reader_init(&r, m, sizeof(m));
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert(f.wire == ORH_PB_FIXED64 && f.v == 0x0807060504030201ull);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert(f.wire == ORH_PB_FIXED32 && f.v == 1);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert(f.num == 3 && f.v == 5);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 0);
}

static void refused(const uint8_t *m, size_t n, const char *says)
{
	struct orh_pb_reader r;
	struct orh_pb_field f;
	struct orh_err err = { 0 };
	int k;

	orh_pb_reader_init(&r, m, n);
	while ((k = orh_pb_next(&r, &f, &err)) > 0)
		;
	cr_assert_eq(k, -EBADMSG, "accepted: %s", says);
	cr_assert(strstr(err.msg, says), "'%s' does not say '%s'", err.msg, says);
}

Test(pbwire, malformed_input_is_refused_with_what_was_wrong)
{
	const uint8_t trunc_key[] = { 0x80 };
	const uint8_t trunc_val[] = { 0x08, 0xff };
	const uint8_t past_end[] = { 0x12, 0x05, 'a', 'b' };
	const uint8_t trunc_len[] = { 0x12, 0x80 };
	const uint8_t field0[] = { 0x00, 0x01 };
	const uint8_t group[] = { 0x0b, 0x0c };
	const uint8_t wire7[] = { 0x0f };
	const uint8_t trunc_fixed[] = { 0x0d, 1, 2 };

	refused(trunc_key, sizeof(trunc_key), "key is a truncated");
	refused(trunc_val, sizeof(trunc_val), "truncated or overlong varint");
	refused(past_end, sizeof(past_end), "past the end");
	refused(trunc_len, sizeof(trunc_len), "a length that is a truncated");
	refused(field0, sizeof(field0), "field number out of range");
	refused(group, sizeof(group), "group");
	refused(wire7, sizeof(wire7), "unknown wire type");
	refused(trunc_fixed, sizeof(trunc_fixed), "truncated fixed-size");
}

Test(pbwire, nesting_is_bounded)
{
	struct orh_buf b = { 0 };
	size_t at[ORH_PB_MAX_DEPTH + 2];
	struct orh_pb_reader r[ORH_PB_MAX_DEPTH + 2];
	struct orh_pb_field f;
	struct orh_err err = { 0 };
	unsigned d;

	for (d = 0; d < ORH_PB_MAX_DEPTH + 2; d++)
		at[d] = orh_pb_begin(&b, 1);
	while (d-- > 0)
		orh_pb_end(&b, at[d]);
	orh_pb_reader_init(&r[0], b.p, b.n);
	for (d = 0; d < ORH_PB_MAX_DEPTH; d++) {
		cr_assert_eq(orh_pb_next(&r[d], &f, &err), 1);
		cr_assert_eq(orh_pb_sub(&r[d], &f, &r[d + 1], &err), 0, "depth %u: %s", d, err.msg);
	}
	cr_assert_eq(orh_pb_next(&r[d], &f, &err), 1);
	cr_assert_eq(orh_pb_sub(&r[d], &f, &r[d + 1], &err), -EBADMSG);
	cr_assert(strstr(err.msg, "nested deeper than 16"), "%s", err.msg);
	free(b.p);
}

Test(pbwire, a_string_with_a_nul_is_refused)
{
	const uint8_t m[] = { 0x0a, 0x03, 'a', 0, 'b' };
	struct orh_pb_reader r;
	struct orh_pb_field f;
	struct orh_err err = { 0 };
	char *s = NULL;

	orh_pb_reader_init(&r, m, sizeof(m));
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert_eq(orh_pb_string(&f, &s, &err), -EBADMSG);
	cr_assert_null(s);
	cr_assert(strstr(err.msg, "NUL"), "%s", err.msg);
}

/* A buffer of no bytes at NULL: an empty message, an empty field, with no arithmetic or
 * memchr() on the NULL pointer (the sanitizer build halts on one). */
Test(pbwire, an_empty_buffer_at_null_is_an_empty_message)
{
	struct orh_pb_field f;
	struct orh_pb_reader r;
	struct orh_err err = { 0 };
	struct orh_buf b = { 0 };
	char *s = NULL;

	orh_pb_reader_init(&r, NULL, 0);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 0);
	f = (struct orh_pb_field){ .num = 1, .wire = ORH_PB_LEN }; /* no data, length 0 */
	cr_assert_eq(orh_pb_string(&f, &s, &err), 0, "%s", err.msg);
	cr_assert_str_eq(s, "");
	free(s);
	orh_pb_put_bytes(&b, 2, NULL, 0);
	cr_assert(b.n == 2 && !memcmp(b.p, "\x12\x00", 2));
	free(b.p);
}

/* ---- the multiplexer and ttrpc -------------------------------------------------------- */

Test(ttrpc, header_fields_are_big_endian)
{
	const uint8_t p[10] = { 0, 0, 1, 2, 0, 0, 0, 7, 2, 1 };
	struct orh_ttrpc_hdr h;
	uint8_t out[10];

	orh_ttrpc_hdr_get(p, &h);
	cr_assert_eq(h.len, 258);
	cr_assert_eq(h.stream, 7);
	cr_assert_eq(h.type, ORH_TTRPC_RESPONSE);
	cr_assert_eq(h.flags, 1);
	orh_ttrpc_hdr_put(out, &h);
	cr_assert_eq(memcmp(out, p, 10), 0);
}

/* A long message split into frames of at most 4096 bytes, fed back a few bytes at a time
 * with a frame of another connection between: the same message comes out, once. */
Test(ttrpc, a_message_split_into_frames_is_put_together_again)
{
	struct orh_buf out = { 0 };
	struct orh_mux_in in = { 0 };
	struct orh_ttrpc_msg m;
	struct orh_err err = { 0 };
	const uint8_t stray[] = { 0, 0, 0, 9, 0, 0, 0, 3, 'x', 'y', 'z' };
	size_t n = 10000, frames = 0;
	uint8_t *payload = malloc(n);

	for (size_t i = 0; i < n; i++)
		payload[i] = (uint8_t)(i * 7);
	orh_mux_put_msg(&out, ORH_MUX_PLUGIN, 5, ORH_TTRPC_RESPONSE, 0, payload, n);
	/* 10010 bytes of message: frames of 4096, 4096, 1818 */
	for (size_t off = 0; off < out.n; frames++) {
		const uint8_t *h = (const uint8_t *)out.p + off;
		uint32_t len = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | h[6] << 8 | h[7];

		cr_assert(h[3] == 1 && len <= ORH_MUX_FRAME_MAX, "frame %zu: %u bytes", frames,
			  len);
		off += ORH_MUX_HDR + len;
	}
	cr_assert_eq(frames, 3);
	cr_assert_eq(orh_mux_feed(&in, stray, sizeof(stray), &err), 0);
	for (size_t off = 0; off < out.n; off += 333) {
		size_t k = out.n - off < 333 ? out.n - off : 333;

		cr_assert_eq(orh_mux_feed(&in, out.p + off, k, &err), 0);
		if (off + k < out.n)
			cr_assert_eq(orh_mux_take(&in, &m, &err), 0, "whole too early at %zu", off);
	}
	cr_assert_eq(orh_mux_take(&in, &m, &err), 1);
	cr_assert_eq(m.conn, ORH_MUX_PLUGIN);
	cr_assert_eq(m.hdr.stream, 5);
	cr_assert_eq(m.len, n);
	cr_assert_eq(memcmp(m.payload, payload, n), 0);
	free(m.payload);
	cr_assert_eq(orh_mux_take(&in, &m, &err), 0);
	orh_mux_in_free(&in);
	free(out.p);
	free(payload);
}

/* A frame of n bytes of conn */
static void put_frame(struct orh_buf *out, uint32_t conn, const char *p, size_t n)
{
	const char h[8] = { 0, 0, 0, (char)conn, 0, 0, (char)(n >> 8), (char)n };

	orh_buf_add(out, h, 8);
	orh_buf_add(out, p, n);
}

/* Connection 2's message in two frames with one of connection 1 between: each stream is
 * put together on its own */
Test(ttrpc, two_connections_interleaved)
{
	struct orh_buf a = { 0 }, b = { 0 }, wire = { 0 };
	struct orh_mux_in in = { 0 };
	struct orh_ttrpc_msg m;
	struct orh_err err = { 0 };

	orh_mux_put_msg(&a, ORH_MUX_RUNTIME, 1, ORH_TTRPC_RESPONSE, 0, "one", 3);
	orh_mux_put_msg(&b, ORH_MUX_PLUGIN, 3, ORH_TTRPC_REQUEST, 1, "two", 3);
	/* a's message (after its frame header) cut after 5 bytes */
	put_frame(&wire, 2, a.p + 8, 5);
	orh_buf_add(&wire, b.p, b.n);
	cr_assert_eq(orh_mux_feed(&in, wire.p, wire.n, &err), 0);
	cr_assert_eq(orh_mux_take(&in, &m, &err), 1);
	cr_assert(m.conn == ORH_MUX_PLUGIN && m.hdr.stream == 3 && m.hdr.flags == 1);
	cr_assert_eq(memcmp(m.payload, "two", 3), 0);
	free(m.payload);
	cr_assert_eq(orh_mux_take(&in, &m, &err), 0);
	wire.n = 0;
	put_frame(&wire, 2, a.p + 13, a.n - 13);
	cr_assert_eq(orh_mux_feed(&in, wire.p, wire.n, &err), 0);
	cr_assert_eq(orh_mux_take(&in, &m, &err), 1);
	cr_assert(m.conn == ORH_MUX_RUNTIME && m.hdr.stream == 1 && m.hdr.type == 2);
	cr_assert_eq(memcmp(m.payload, "one", 3), 0);
	free(m.payload);
	orh_mux_in_free(&in);
	free(a.p);
	free(b.p);
	free(wire.p);
}

Test(ttrpc, oversized_frames_and_messages_are_refused)
{
	const uint8_t frame[] = { 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff };
	const uint8_t msg[] = { 0, 0, 0, 1, 0, 0, 0, 10, 0x01, 0, 0, 0, 0, 0, 0, 1, 1, 0 };
	struct orh_mux_in in = { 0 };
	struct orh_ttrpc_msg m;
	struct orh_err err = { 0 };

	cr_assert_eq(orh_mux_feed(&in, frame, sizeof(frame), &err), -EPROTO);
	orh_mux_in_free(&in);
	/* a ttrpc header saying 16 MiB + 1 */
	cr_assert_eq(orh_mux_feed(&in, msg, sizeof(msg), &err), 0);
	cr_assert_eq(orh_mux_take(&in, &m, &err), -EMSGSIZE);
	cr_assert(strstr(err.msg, "more than"), "%s", err.msg);
	orh_mux_in_free(&in);
}

Test(ttrpc, request_and_response_round_trip)
{
	struct orh_buf b = { 0 };
	struct orh_ttrpc_request rq;
	struct orh_ttrpc_response rs;
	struct orh_err err = { 0 };

	orh_ttrpc_request_encode(&b, "svc", "Method", "pay", 3);
	/* timeout_nano = 5 and metadata {k: v}: read, and tolerated */
	orh_pb_put_varint(&b, 4, 5);
	orh_pb_put_bytes(&b, 5, "\x0a\x01k\x12\x01v", 6);
	cr_assert_eq(orh_ttrpc_request_decode(b.p, b.n, &rq, &err), 0, "%s", err.msg);
	cr_assert_str_eq(rq.service, "svc");
	cr_assert_str_eq(rq.method, "Method");
	cr_assert(rq.payload_len == 3 && !memcmp(rq.payload, "pay", 3));
	cr_assert_eq(rq.timeout_nano, 5);
	orh_ttrpc_request_free(&rq);
	b.n = 0;

	orh_ttrpc_response_encode(&b, ORH_RPC_UNKNOWN, "why", NULL, 0);
	cr_assert_eq(orh_ttrpc_response_decode(b.p, b.n, &rs, &err), 0, "%s", err.msg);
	cr_assert_eq(rs.code, ORH_RPC_UNKNOWN);
	cr_assert_str_eq(rs.message, "why");
	cr_assert_eq(rs.payload_len, 0);
	orh_ttrpc_response_free(&rs);
	b.n = 0;

	/* OK: an empty status, then the payload */
	orh_ttrpc_response_encode(&b, ORH_RPC_OK, NULL, "ab", 2);
	cr_assert_eq(b.n, 2 + 4);
	cr_assert_eq(memcmp(b.p, "\x0a\x00\x12\x02" "ab", 6), 0);
	cr_assert_eq(orh_ttrpc_response_decode(b.p, b.n, &rs, &err), 0, "%s", err.msg);
	cr_assert(rs.code == 0 && !rs.message && rs.payload_len == 2);
	orh_ttrpc_response_free(&rs);
	free(b.p);
}

Test(ttrpc, a_request_without_a_method_is_refused)
{
	struct orh_buf b = { 0 };
	struct orh_ttrpc_request rq;
	struct orh_err err = { 0 };

	orh_pb_put_string(&b, 1, "svc");
	cr_assert_eq(orh_ttrpc_request_decode(b.p, b.n, &rq, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "no method"), "%s", err.msg);
	cr_assert_null(rq.service);
	free(b.p);
}

/* The empty buffers of the multiplexer and ttrpc: nothing fed yet, an empty frame, a
 * message of no payload, requests and responses of no bytes at NULL. */
Test(ttrpc, empty_buffers_at_null)
{
	const uint8_t empty_frame[] = { 0, 0, 0, 1, 0, 0, 0, 0 };
	struct orh_mux_in in = { 0 };
	struct orh_ttrpc_msg m;
	struct orh_ttrpc_request rq;
	struct orh_ttrpc_response rs;
	struct orh_err err = { 0 };
	struct orh_buf out = { 0 };

	cr_assert_eq(orh_mux_take(&in, &m, &err), 0);
	cr_assert_eq(orh_mux_feed(&in, NULL, 0, &err), 0);
	cr_assert_eq(orh_mux_feed(&in, empty_frame, sizeof(empty_frame), &err), 0);
	cr_assert_eq(orh_mux_take(&in, &m, &err), 0);
	orh_mux_put_msg(&out, ORH_MUX_PLUGIN, 3, ORH_TTRPC_RESPONSE, 0, NULL, 0);
	cr_assert_eq(out.n, ORH_MUX_HDR + ORH_TTRPC_HDR);
	cr_assert_eq(orh_mux_feed(&in, out.p, out.n, &err), 0);
	cr_assert_eq(orh_mux_take(&in, &m, &err), 1);
	cr_assert(m.hdr.stream == 3 && m.len == 0);
	free(m.payload);
	cr_assert_eq(orh_mux_take(&in, &m, &err), 0);
	orh_mux_in_free(&in);
	out.n = 0;

	cr_assert_eq(orh_ttrpc_request_decode(NULL, 0, &rq, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "no service"), "%s", err.msg);
	cr_assert_eq(orh_ttrpc_response_decode(NULL, 0, &rs, &err), 0, "%s", err.msg);
	cr_assert(rs.code == ORH_RPC_OK && !rs.message && rs.payload_len == 0);
	orh_ttrpc_request_encode(&out, "s", "m", NULL, 0);
	orh_ttrpc_response_encode(&out, ORH_RPC_OK, NULL, NULL, 0);
	cr_assert_eq(out.n, 3 + 3 + 2);
	free(out.p);
}

/* ---- NRI's messages --------------------------------------------------------------------- */

/* kv {key=1, value=2} as field num */
static void put_kv(struct orh_buf *b, uint32_t num, const char *k, const char *v)
{
	size_t at = orh_pb_begin(b, num);

	orh_pb_put_string(b, 1, k);
	orh_pb_put_string(b, 2, v);
	orh_pb_end(b, at);
}

/* A CreateContainerRequest as a runtime sends it, field numbers from api.proto, with
 * fields the plugin does not read (labels, state, image) among them. */
static void create_request(struct orh_buf *b)
{
	size_t pod = orh_pb_begin(b, 1), ctr, lin, dev, res, rule, rl, user, hooks, hook, m, o;

	orh_pb_put_string(b, 1, "pod-id");
	orh_pb_put_string(b, 2, "trainer");
	orh_pb_put_string(b, 3, "pod-uid");
	orh_pb_put_string(b, 4, "ml");
	put_kv(b, 5, "label", "x");
	put_kv(b, 6, "oci-rdma-hook/enable", "true");
	put_kv(b, 6, "other", "pod's own");
	orh_pb_end(b, pod);
	ctr = orh_pb_begin(b, 2);
	orh_pb_put_string(b, 1, "ctr-id");
	orh_pb_put_string(b, 2, "pod-id");
	orh_pb_put_string(b, 3, "main");
	orh_pb_put_varint(b, 4, 1);
	put_kv(b, 6, "io.kubernetes.cri.container-type", "container");
	orh_pb_put_string(b, 7, "sleep");
	orh_pb_put_string(b, 7, "1");
	orh_pb_put_string(b, 8, "PATH=/bin");
	orh_pb_put_string(b, 8, "NVIDIA_VISIBLE_DEVICES=2,3");
	m = orh_pb_begin(b, 9);
	orh_pb_put_string(b, 1, "/etc/hosts");
	orh_pb_put_string(b, 2, "bind");
	orh_pb_put_string(b, 3, "/var/lib/hosts");
	orh_pb_put_string(b, 4, "rbind");
	orh_pb_put_string(b, 4, "ro");
	orh_pb_end(b, m);
	hooks = orh_pb_begin(b, 10);
	hook = orh_pb_begin(b, 2);
	orh_pb_put_string(b, 1, "/usr/bin/other-hook");
	orh_pb_put_string(b, 2, "other-hook");
	o = orh_pb_begin(b, 4);
	orh_pb_put_varint(b, 1, 9);
	orh_pb_end(b, o);
	orh_pb_end(b, hook);
	orh_pb_end(b, hooks);
	lin = orh_pb_begin(b, 11);
	put_kv(b, 1, "network", "/var/run/netns/cni-1");
	dev = orh_pb_begin(b, 2);
	orh_pb_put_string(b, 1, "/dev/infiniband/uverbs2");
	orh_pb_put_string(b, 2, "c");
	orh_pb_put_varint(b, 3, 231);
	orh_pb_put_varint(b, 4, 194);
	o = orh_pb_begin(b, 5);
	orh_pb_put_varint(b, 1, 0666);
	orh_pb_end(b, o);
	o = orh_pb_begin(b, 6); /* uid 0: an empty OptionalUInt32, present */
	orh_pb_end(b, o);
	orh_pb_end(b, dev);
	res = orh_pb_begin(b, 3);
	rule = orh_pb_begin(b, 7);
	orh_pb_put_string(b, 5, "rwm");
	orh_pb_end(b, rule);
	rule = orh_pb_begin(b, 7);
	orh_pb_put_varint(b, 1, 1);
	orh_pb_put_string(b, 2, "c");
	o = orh_pb_begin(b, 3);
	orh_pb_put_varint(b, 1, 231);
	orh_pb_end(b, o);
	o = orh_pb_begin(b, 4);
	orh_pb_put_varint(b, 1, 194);
	orh_pb_end(b, o);
	orh_pb_put_string(b, 5, "rw");
	orh_pb_end(b, rule);
	orh_pb_end(b, res);
	orh_pb_put_string(b, 5, "/kubepods/x");
	orh_pb_end(b, lin);
	rl = orh_pb_begin(b, 13);
	orh_pb_put_string(b, 1, "RLIMIT_NOFILE");
	orh_pb_put_varint(b, 2, 4096);
	orh_pb_put_varint(b, 3, 1024);
	orh_pb_end(b, rl);
	user = orh_pb_begin(b, 21);
	orh_pb_put_varint(b, 1, 1000);
	orh_pb_put_varint(b, 2, 100);
	orh_pb_put_bytes(b, 3, "\x05\x06", 2); /* packed additional gids */
	orh_pb_end(b, user);
	o = orh_pb_begin(b, 22); /* image: not read */
	orh_pb_put_string(b, 1, "img");
	orh_pb_end(b, o);
	orh_pb_end(b, ctr);
}

Test(nri_msg, create_container_request_decoded)
{
	struct orh_buf b = { 0 };
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	const struct orh_nri_container *c = &req.ctr;

	create_request(&b);
	cr_assert_eq(orh_nri_create_decode(b.p, b.n, &req, &err), 0, "%s", err.msg);
	cr_assert_str_eq(req.pod.id, "pod-id");
	cr_assert_str_eq(req.pod.name, "trainer");
	cr_assert_str_eq(req.pod.namespace, "ml");
	cr_assert_eq(req.pod.annotations.n, 2);
	cr_assert_str_eq(c->id, "ctr-id");
	cr_assert_str_eq(c->name, "main");
	cr_assert_eq(c->annotations.n, 1);
	cr_assert(c->args.n == 2 && !strcmp(c->args.v[1], "1"));
	cr_assert(c->env.n == 2 && !strcmp(c->env.v[1], "NVIDIA_VISIBLE_DEVICES=2,3"));
	cr_assert(c->n_mounts == 1 && c->mounts[0].options.n == 2);
	cr_assert_eq(c->hooks.n[1], 1); /* createRuntime */
	cr_assert(c->hooks.v[1][0].has_timeout && c->hooks.v[1][0].timeout == 9);
	cr_assert_str_eq(c->namespaces.v[0].key, "network");
	cr_assert_str_eq(c->namespaces.v[0].value, "/var/run/netns/cni-1");
	cr_assert_eq(c->n_devices, 1);
	cr_assert(c->devices[0].major == 231 && c->devices[0].minor == 194);
	cr_assert(c->devices[0].has_mode && c->devices[0].mode == 0666);
	cr_assert(c->devices[0].has_uid && c->devices[0].uid == 0 && !c->devices[0].has_gid);
	cr_assert_eq(c->n_rules, 2);
	cr_assert(!c->rules[0].allow && !c->rules[0].has_major);
	cr_assert(c->rules[1].allow && c->rules[1].major == 231 && c->rules[1].minor == 194);
	cr_assert(c->n_rlimits == 1 && c->rlimits[0].hard == 4096 && c->rlimits[0].soft == 1024);
	cr_assert(c->has_user && c->uid == 1000 && c->gid == 100);
	cr_assert(c->n_gids == 2 && c->gids[0] == 5 && c->gids[1] == 6);
	orh_nri_create_free(&req);
	free(b.p);
}

/* Every prefix of the request is refused, or read as a shorter message: never read past. */
Test(nri_msg, truncated_requests_never_read_past_the_end)
{
	struct orh_buf b = { 0 };
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	size_t refused = 0;

	create_request(&b);
	for (size_t n = 0; n < b.n; n++) {
		char *copy = malloc(n ? n : 1);

		memcpy(copy, b.p, n);
		if (orh_nri_create_decode(copy, n, &req, &err) < 0) {
			refused++;
			cr_assert(strstr(err.msg, "CreateContainerRequest"), "%s", err.msg);
		} else {
			orh_nri_create_free(&req);
		}
		free(copy);
	}
	cr_assert_gt(refused, b.n / 2);
	free(b.p);
}

Test(nri_msg, a_bad_wire_type_names_the_field)
{
	struct orh_buf b = { 0 };
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	size_t ctr = orh_pb_begin(&b, 2);

	orh_pb_put_string(&b, 1, "id");
	orh_pb_put_varint(&b, 8, 3); /* env as a varint */
	orh_pb_end(&b, ctr);
	cr_assert_eq(orh_nri_create_decode(b.p, b.n, &req, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "container field 8"), "%s", err.msg);
	free(b.p);
}

/* A CreateContainerRequest of ORH_NRI_FIELDS_MAX fields is read; one more field is not,
 * and the error names the field where reading stopped. */
Test(nri_msg, fields_past_the_bound_are_refused_naming_the_field)
{
	struct orh_nri_create req;
	struct orh_err err = { 0 };

	for (size_t extra = 0; extra < 2; extra++) {
		struct orh_buf b = { 0 };
		size_t ctr = orh_pb_begin(&b, 2);
		int r;

		orh_pb_put_string(&b, 1, "id"); /* with field 2 itself: 2 fields */
		for (size_t i = 0; i < ORH_NRI_FIELDS_MAX - 2 + extra; i++)
			orh_pb_put_bytes(&b, 8, NULL, 0);
		orh_pb_end(&b, ctr);
		r = orh_nri_create_decode(b.p, b.n, &req, &err);
		if (!extra) {
			cr_assert_eq(r, 0, "%s", err.msg);
			cr_assert_eq(req.ctr.env.n, ORH_NRI_FIELDS_MAX - 2);
			orh_nri_create_free(&req);
		} else {
			cr_assert_eq(r, -E2BIG);
			cr_assert(strstr(err.msg, "CreateContainerRequest: container field 8 (env): "
					 "more than 65536 fields"), "%s", err.msg);
		}
		free(b.p);
	}
}

/* NRI's requests of no bytes at NULL: an empty message, read as one. */
Test(nri_msg, empty_requests_at_null)
{
	struct orh_nri_create req;
	struct orh_nri_configure cf;
	struct orh_nri_adjust a;
	struct orh_err err = { 0 };
	bool more = true;

	cr_assert_eq(orh_nri_create_decode(NULL, 0, &req, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "no container id"), "%s", err.msg);
	cr_assert_eq(orh_nri_configure_decode(NULL, 0, &cf, &err), 0, "%s", err.msg);
	cr_assert(!cf.runtime_name && cf.request_timeout_ms == 0);
	cr_assert_eq(orh_nri_sync_decode(NULL, 0, &more, &err), 0, "%s", err.msg);
	cr_assert_not(more);
	cr_assert_eq(orh_nri_adjust_decode(NULL, 0, &a, &err), 0, "%s", err.msg);
	cr_assert(orh_nri_adjust_empty(&a));
}

Test(nri_msg, configure_sync_register)
{
	struct orh_buf b = { 0 };
	struct orh_nri_configure cf;
	struct orh_err err = { 0 };
	bool more = false;

	orh_pb_put_string(&b, 1, "config text");
	orh_pb_put_string(&b, 2, "containerd");
	orh_pb_put_string(&b, 3, "v2.3.4");
	orh_pb_put_varint(&b, 4, 5000);
	orh_pb_put_varint(&b, 5, 2000);
	orh_pb_put_string(&b, 6, "v0.12.0");
	cr_assert_eq(orh_nri_configure_decode(b.p, b.n, &cf, &err), 0, "%s", err.msg);
	cr_assert_str_eq(cf.runtime_name, "containerd");
	cr_assert_str_eq(cf.runtime_version, "v2.3.4");
	cr_assert_eq(cf.request_timeout_ms, 2000);
	orh_nri_configure_free(&cf);
	b.n = 0;

	orh_nri_configure_response_encode(&b, ORH_NRI_EVENT_CREATE_CONTAINER);
	cr_assert_eq(b.n, 2);
	cr_assert_eq(memcmp(b.p, "\x10\x08", 2), 0); /* events=2: 0x8 */
	b.n = 0;

	orh_pb_put_varint(&b, 3, 1);
	cr_assert_eq(orh_nri_sync_decode(b.p, b.n, &more, &err), 0);
	cr_assert(more);
	b.n = 0;
	orh_nri_sync_response_encode(&b, true);
	cr_assert_eq(memcmp(b.p, "\x10\x01", 2), 0); /* more=2 */
	b.n = 0;
	orh_nri_sync_response_encode(&b, false);
	cr_assert_eq(b.n, 0);

	orh_nri_register_encode(&b, "oci-rdma-hook", "50");
	cr_assert_eq(memcmp(b.p, "\x0a\x0doci-rdma-hook\x12\x02" "50\x1a", 20), 0);
	free(b.p);
}

Test(nri_msg, adjustment_round_trip)
{
	struct orh_nri_device dev = { .path = "/dev/infiniband/uverbs0", .type = "c",
				      .major = 231, .minor = 192, .has_mode = true,
				      .mode = 0666, .has_uid = true, .has_gid = true };
	struct orh_nri_rule rule = { .allow = true, .type = "c", .access = "rwm",
				     .has_major = true, .major = 10, .has_minor = true,
				     .minor = 58 };
	struct orh_nri_rlimit rl = { .type = "RLIMIT_MEMLOCK", .hard = UINT64_MAX,
				     .soft = UINT64_MAX };
	struct orh_nri_kv env = { .key = "UCX_NET_DEVICES", .value = "mlx5_0:1" };
	struct orh_nri_mount mnt = { .destination = "/sys/class/infiniband", .type = "bind",
				     .source = "/run/x" };
	struct orh_nri_hook hook = { .path = "/usr/bin/oci-rdma-hook", .has_timeout = true,
				     .timeout = 30 };
	struct orh_nri_kv ann = { .key = "oci-rdma-hook/enable", .value = "true" };
	struct orh_nri_adjust a = { .annotations = { &ann, 1 }, .devices = &dev,
				    .n_devices = 1, .rules = &rule, .n_rules = 1,
				    .rlimits = &rl, .n_rlimits = 1, .env = { &env, 1 },
				    .mounts = &mnt, .n_mounts = 1 };
	struct orh_nri_adjust back;
	struct orh_buf b = { 0 };
	struct orh_pb_reader r;
	struct orh_pb_field f;
	struct orh_err err = { 0 };

	orh_strv_push(&mnt.options, orh_xstrdup("rbind"));
	orh_strv_push(&hook.args, orh_xstrdup("oci-rdma-hook"));
	orh_strv_push(&hook.args, orh_xstrdup("nccl-conf"));
	a.hooks.v[1] = &hook;
	a.hooks.n[1] = 1;
	cr_assert_not(orh_nri_adjust_empty(&a));
	orh_nri_create_response_encode(&b, &a);
	orh_pb_reader_init(&r, b.p, b.n);
	cr_assert_eq(orh_pb_next(&r, &f, &err), 1);
	cr_assert_eq(f.num, 1); /* CreateContainerResponse.adjust */
	cr_assert_eq(orh_nri_adjust_decode(f.data, f.len, &back, &err), 0, "%s", err.msg);
	cr_assert(back.annotations.n == 1 && !strcmp(back.annotations.v[0].value, "true"));
	cr_assert_eq(back.n_devices, 1);
	cr_assert_str_eq(back.devices[0].path, dev.path);
	cr_assert(back.devices[0].major == 231 && back.devices[0].minor == 192);
	cr_assert(back.devices[0].has_mode && back.devices[0].mode == 0666);
	cr_assert(back.devices[0].has_uid && back.devices[0].uid == 0 && back.devices[0].has_gid);
	cr_assert(back.n_rules == 1 && back.rules[0].allow && back.rules[0].major == 10 &&
		  back.rules[0].minor == 58 && !strcmp(back.rules[0].access, "rwm"));
	cr_assert(back.n_rlimits == 1 && back.rlimits[0].hard == UINT64_MAX);
	cr_assert(back.env.n == 1 && !strcmp(back.env.v[0].value, "mlx5_0:1"));
	cr_assert(back.n_mounts == 1 && back.mounts[0].options.n == 1);
	cr_assert(back.hooks.n[1] == 1 && back.hooks.v[1][0].timeout == 30 &&
		  back.hooks.v[1][0].args.n == 2);
	orh_nri_adjust_free(&back);
	orh_strv_free(&mnt.options);
	orh_strv_free(&hook.args);
	b.n = 0;

	/* nothing to adjust: an empty CreateContainerResponse */
	memset(&a, 0, sizeof(a));
	cr_assert(orh_nri_adjust_empty(&a));
	orh_nri_create_response_encode(&b, &a);
	cr_assert_eq(b.n, 0);
	free(b.p);
}

/* The spec a request becomes: what the decision reads, where the OCI spec has it. */
Test(nri_msg, request_becomes_the_oci_spec)
{
	struct orh_buf b = { 0 };
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	json_t *spec, *ann, *dev;
	const char *nspath = NULL;
	bool has_netns = false;

	create_request(&b);
	cr_assert_eq(orh_nri_create_decode(b.p, b.n, &req, &err), 0, "%s", err.msg);
	spec = orh_nri_spec(&req);
	ann = json_object_get(spec, "annotations");
	/* the pod's oci-rdma-hook/ annotation is taken, its others are not */
	cr_assert_str_eq(json_string_value(json_object_get(ann, "oci-rdma-hook/enable")), "true");
	cr_assert_null(json_object_get(ann, "other"));
	cr_assert_str_eq(json_string_value(json_object_get(ann,
			 "io.kubernetes.cri.container-type")), "container");
	cr_assert_eq(json_array_size(json_object_get(json_object_get(spec, "process"), "env")), 2);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(spec,
		     "process"), "user"), "uid")), 1000);
	cr_assert_eq(orh_spec_netns(spec, &has_netns, &nspath), 0);
	cr_assert(has_netns);
	cr_assert_str_eq(nspath, "/var/run/netns/cni-1");
	dev = json_array_get(json_object_get(json_object_get(spec, "linux"), "devices"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(dev, "path")),
			 "/dev/infiniband/uverbs2");
	cr_assert_eq(json_integer_value(json_object_get(dev, "minor")), 194);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(json_object_get(spec, "linux"),
		     "resources"), "devices")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(
			 json_object_get(spec, "hooks"), "createRuntime"), 0), "path")),
			 "/usr/bin/other-hook");
	json_decref(spec);
	orh_nri_create_free(&req);
	free(b.p);
}
