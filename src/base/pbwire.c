/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The protocol buffers wire format, read and written (include/orh/base/pbwire.h). Pure: a
 * reader only looks at the buffer it was given, every length checked against its end.
 */
#include <errno.h>
#include <string.h>

#include "orh/base/pbwire.h"

int orh_pb_varint_get(const uint8_t *p, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < 10; i++) {
		if (i >= len)
			return -EBADMSG;
		/* the tenth byte holds bit 63 alone: more is an overflow */
		if (i == 9 && p[i] > 1)
			return -EBADMSG;
		v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*out = v;
			return (int)i + 1;
		}
	}
	return -EBADMSG;
}

size_t orh_pb_varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

void orh_pb_reader_init(struct orh_pb_reader *r, const void *buf, size_t len)
{
	r->p = buf;
	r->end = len ? r->p + len : r->p; /* no arithmetic on a NULL buffer of 0 bytes */
	r->depth = 0;
	r->budget = NULL;
}

void orh_pb_reader_init_bounded(struct orh_pb_reader *r, const void *buf, size_t len,
				struct orh_pb_budget *budget, size_t max)
{
	orh_pb_reader_init(r, buf, len);
	budget->left = budget->max = max;
	r->budget = budget;
}

static int bad(struct orh_err *err, const struct orh_pb_reader *r, const uint8_t *at,
	       const char *what)
{
	return orh_fail(err, EBADMSG, "malformed protobuf message: %s, %zu byte(s) before its end",
			what, (size_t)(r->end - at));
}

int orh_pb_next(struct orh_pb_reader *r, struct orh_pb_field *f, struct orh_err *err)
{
	const uint8_t *at = r->p;
	uint64_t key = 0, len = 0;
	int n;

	memset(f, 0, sizeof(*f));
	if (r->p >= r->end)
		return 0;
	n = orh_pb_varint_get(r->p, (size_t)(r->end - r->p), &key);
	if (n < 0)
		return bad(err, r, at, "a field's key is a truncated or overlong varint");
	r->p += n;
	if ((key >> 3) == 0 || (key >> 3) > ORH_PB_MAX_FIELD)
		return bad(err, r, at, "a field number out of range");
	f->num = (uint32_t)(key >> 3);
	f->wire = (enum orh_pb_wire)(key & 7);
	if (r->budget && r->budget->left == 0)
		return orh_fail(err, E2BIG, "more than %zu fields in the message", r->budget->max);
	if (r->budget)
		r->budget->left--;
	switch (key & 7) {
	case ORH_PB_VARINT:
		n = orh_pb_varint_get(r->p, (size_t)(r->end - r->p), &f->v);
		if (n < 0)
			return bad(err, r, at, "a truncated or overlong varint");
		r->p += n;
		return 1;
	case ORH_PB_FIXED64:
	case ORH_PB_FIXED32: {
		size_t w = (key & 7) == ORH_PB_FIXED64 ? 8 : 4;

		if ((size_t)(r->end - r->p) < w)
			return bad(err, r, at, "a truncated fixed-size field");
		f->v = 0;
		for (size_t i = 0; i < w; i++) /* little-endian on the wire */
			f->v |= (uint64_t)r->p[i] << (8 * i);
		r->p += w;
		return 1;
	}
	case ORH_PB_LEN:
		n = orh_pb_varint_get(r->p, (size_t)(r->end - r->p), &len);
		if (n < 0)
			return bad(err, r, at, "a length that is a truncated or overlong varint");
		r->p += n;
		if (len > (uint64_t)(r->end - r->p))
			return bad(err, r, at, "a length past the end of the message");
		f->data = r->p;
		f->len = (size_t)len;
		r->p += len;
		return 1;
	default:
		return bad(err, r, at, "a group or an unknown wire type");
	}
}

int orh_pb_sub(const struct orh_pb_reader *r, const struct orh_pb_field *f,
	       struct orh_pb_reader *sub, struct orh_err *err)
{
	if (f->wire != ORH_PB_LEN)
		return orh_fail(err, EBADMSG, "malformed protobuf message: field %u is no message",
				f->num);
	if (r->depth + 1 > ORH_PB_MAX_DEPTH)
		return orh_fail(err, EBADMSG,
				"malformed protobuf message: messages nested deeper than %d",
				ORH_PB_MAX_DEPTH);
	orh_pb_reader_init(sub, f->data, f->len);
	sub->depth = r->depth + 1;
	sub->budget = r->budget;
	return 0;
}

int orh_pb_string(const struct orh_pb_field *f, char **out, struct orh_err *err)
{
	if (f->wire != ORH_PB_LEN)
		return orh_fail(err, EBADMSG, "malformed protobuf message: field %u is no string",
				f->num);
	if (f->len && memchr(f->data, '\0', f->len))
		return orh_fail(err, EBADMSG,
				"malformed protobuf message: field %u holds a NUL byte", f->num);
	*out = orh_xmalloc(f->len + 1);
	if (f->len)
		memcpy(*out, f->data, f->len);
	(*out)[f->len] = '\0';
	return 0;
}

static void put_key(struct orh_buf *b, uint32_t num, enum orh_pb_wire wire)
{
	uint8_t tmp[10];

	orh_buf_add(b, (const char *)tmp, orh_pb_varint_put(tmp, ((uint64_t)num << 3) | wire));
}

void orh_pb_put_varint(struct orh_buf *b, uint32_t num, uint64_t v)
{
	uint8_t tmp[10];

	put_key(b, num, ORH_PB_VARINT);
	orh_buf_add(b, (const char *)tmp, orh_pb_varint_put(tmp, v));
}

void orh_pb_put_bytes(struct orh_buf *b, uint32_t num, const void *data, size_t len)
{
	uint8_t tmp[10];

	put_key(b, num, ORH_PB_LEN);
	orh_buf_add(b, (const char *)tmp, orh_pb_varint_put(tmp, len));
	if (len)
		orh_buf_add(b, data, len);
}

void orh_pb_put_string(struct orh_buf *b, uint32_t num, const char *s)
{
	orh_pb_put_bytes(b, num, s, strlen(s));
}

size_t orh_pb_begin(struct orh_buf *b, uint32_t num)
{
	put_key(b, num, ORH_PB_LEN);
	return b->n;
}

void orh_pb_end(struct orh_buf *b, size_t start)
{
	uint8_t tmp[10];
	size_t len = b->n - start, vn = orh_pb_varint_put(tmp, len);

	/* the message's fields move up to make room for their length in front of them */
	orh_buf_reserve(b, vn);
	memmove(b->p + start + vn, b->p + start, len);
	memcpy(b->p + start, tmp, vn);
	b->n += vn;
	b->p[b->n] = '\0';
}
