/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The protocol buffers wire format (src/base/pbwire.c), read and written by hand: ttrpc's
 * envelope (orh/base/ttrpc.h), read and written; the NRI plugin's messages (orh/cmd/nri.h),
 * checked and counted before protobuf-c unpacks them.
 * A reader walks the fields of one message in a buffer it does not own; every length is
 * checked against that buffer, unknown fields are stepped over, and a message inside
 * another is read with a reader one level deeper (ORH_PB_MAX_DEPTH at most). A reader may be
 * given a bound on the fields it and the readers below it read, all together
 * (struct orh_pb_budget). Groups (wire types 3 and 4) are refused. The writer appends to a
 * struct orh_buf. A buffer of no bytes may be NULL.
 */
#ifndef ORH_BASE_PBWIRE_H
#define ORH_BASE_PBWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orh/base/util.h"

enum orh_pb_wire {
	ORH_PB_VARINT = 0,
	ORH_PB_FIXED64 = 1,
	ORH_PB_LEN = 2,
	ORH_PB_FIXED32 = 5,
};

/* how deep messages inside messages are read: NRI's deepest is 6 */
#define ORH_PB_MAX_DEPTH 16
/* the largest field number protobuf allows (2^29 - 1) */
#define ORH_PB_MAX_FIELD 536870911u

/* The fields a message may still have read of it: shared by a reader and every reader below
 * it (orh_pb_sub()). */
struct orh_pb_budget {
	size_t left, max;
};

struct orh_pb_reader {
	const uint8_t *p, *end;
	unsigned depth;
	struct orh_pb_budget *budget; /* NULL: no bound */
};

struct orh_pb_field {
	uint32_t num;
	enum orh_pb_wire wire;
	uint64_t v;             /* VARINT, FIXED32, FIXED64: the value */
	const uint8_t *data;    /* LEN: the bytes, within the reader's buffer */
	size_t len;
};

/* A reader of the message in buf[0..len), with no bound on its fields. */
void orh_pb_reader_init(struct orh_pb_reader *r, const void *buf, size_t len);
/* The same, reading at most max fields, the messages inside it counted with it. */
void orh_pb_reader_init_bounded(struct orh_pb_reader *r, const void *buf, size_t len,
				struct orh_pb_budget *budget, size_t max);
/* The next field into *f: 1, or 0 at the end of the message, or -EBADMSG (a varint
 * truncated or longer than 10 bytes, a length past the end, field number 0 or above
 * ORH_PB_MAX_FIELD, a group or an unknown wire type), with what was wrong and where in
 * err, or -E2BIG when the reader's budget is spent (f->num is then that field's number). */
int orh_pb_next(struct orh_pb_reader *r, struct orh_pb_field *f, struct orh_err *err);
/* A reader of the message a LEN field holds, one level deeper than r: -EBADMSG when that
 * is deeper than ORH_PB_MAX_DEPTH or f is no LEN field. */
int orh_pb_sub(const struct orh_pb_reader *r, const struct orh_pb_field *f,
	       struct orh_pb_reader *sub, struct orh_err *err);
/* A LEN field's bytes as a new NUL-terminated string: -EBADMSG when they hold a NUL (no
 * NRI string does) or f is no LEN field. */
int orh_pb_string(const struct orh_pb_field *f, char **out, struct orh_err *err);

/* The varint at p[0..len): its length in bytes (1..10), or -EBADMSG when truncated or
 * longer than 10 bytes. */
int orh_pb_varint_get(const uint8_t *p, size_t len, uint64_t *out);
/* v as a varint at out (room for 10): its length. */
size_t orh_pb_varint_put(uint8_t *out, uint64_t v);

/* The writer: each appends one field to b. A field of proto3's default value (0, false,
 * "") is written too: the callers leave those out themselves where proto3 would. */
void orh_pb_put_varint(struct orh_buf *b, uint32_t num, uint64_t v);
void orh_pb_put_bytes(struct orh_buf *b, uint32_t num, const void *data, size_t len);
void orh_pb_put_string(struct orh_buf *b, uint32_t num, const char *s);
/* A message inside the one being written: orh_pb_begin() returns where it starts, to be
 * handed to orh_pb_end() once its fields are written (the length goes in front of them). */
size_t orh_pb_begin(struct orh_buf *b, uint32_t num);
void orh_pb_end(struct orh_buf *b, size_t start);

#endif
