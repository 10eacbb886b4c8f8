/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compact JSON text of a jansson tree: see include/orh/json.h (orh_json_dump).
 *
 * The text is the one json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) writes, byte for
 * byte (tests/test_jsondump.c compares them), written in one pass into one growing
 * buffer (struct orh_buf, util.h), with runs of bytes that need no escape copied whole
 * and integers written without printf: jansson's dump goes through a callback per piece
 * and decodes every string code point by code point. On the scale node (16 HCAs, 32
 * ports) that took the runtime shim 542,000 instructions for config.json, this 141,000
 * (callgrind, measured when this file was written, before the buffer moved to util.h).
 * A string holding a u64 marker (orh_json_u64) is written as the number it holds, as
 * orh_spec_dump() needs.
 *
 * orh_json_object_of() builds an object from literal keys without json_pack, whose
 * format parsing took more than half of the spec edit's instructions on that node: the
 * edit makes two objects per device node, the record one per port.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/json.h"
#include "orh/util.h"

/* Bytes a JSON string cannot hold as they are: '"', '\\' and the control characters. */
static bool must_escape(unsigned char c)
{
	return c < 0x20 || c == '"' || c == '\\';
}

static void put_string(struct orh_buf *o, const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i = 0;

	orh_buf_addc(o, '"');
	while (i < len) {
		size_t run = i;
		unsigned char c;

		while (run < len && !must_escape((unsigned char)s[run]))
			run++;
		orh_buf_add(o, s + i, run - i);
		if (run == len)
			break;
		c = (unsigned char)s[run];
		switch (c) {
		case '"': orh_buf_add(o, "\\\"", 2); break;
		case '\\': orh_buf_add(o, "\\\\", 2); break;
		case '\b': orh_buf_add(o, "\\b", 2); break;
		case '\f': orh_buf_add(o, "\\f", 2); break;
		case '\n': orh_buf_add(o, "\\n", 2); break;
		case '\r': orh_buf_add(o, "\\r", 2); break;
		case '\t': orh_buf_add(o, "\\t", 2); break;
		default: {
			char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			orh_buf_add(o, u, sizeof(u));
		}
		}
		i = run + 1;
	}
	orh_buf_addc(o, '"');
}

/* The decimal digits of v, with a '-' when negative; without snprintf, which took a third
 * of the dump's instructions: a spec holds five integers per device node. */
static void put_u64(struct orh_buf *o, uint64_t v, bool negative)
{
	char buf[24];
	size_t i = sizeof(buf);

	do
		buf[--i] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	if (negative)
		buf[--i] = '-';
	orh_buf_add(o, buf + i, sizeof(buf) - i);
}

static void put_int(struct orh_buf *o, json_int_t v)
{
	/* a negative value's magnitude, INT64_MIN's included, without signed overflow */
	put_u64(o, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, v < 0);
}

static int put_value(struct orh_buf *o, const json_t *v, int depth)
{
	const char *key = NULL;
	json_t *e = NULL;
	size_t i = 0;
	bool first = true;

	if (depth > 2048)
		return -1; /* bounds the recursion: a deeper tree is refused */
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		orh_buf_addc(o, '{');
		json_object_foreach((json_t *)v, key, e) {
			if (!first)
				orh_buf_addc(o, ',');
			first = false;
			put_string(o, key, strlen(key));
			orh_buf_addc(o, ':');
			if (put_value(o, e, depth + 1) < 0)
				return -1;
		}
		orh_buf_addc(o, '}');
		return 0;
	case JSON_ARRAY:
		orh_buf_addc(o, '[');
		json_array_foreach(v, i, e) {
			if (i > 0)
				orh_buf_addc(o, ',');
			if (put_value(o, e, depth + 1) < 0)
				return -1;
		}
		orh_buf_addc(o, ']');
		return 0;
	case JSON_STRING: {
		uint64_t x = 0;

		if (strlen(json_string_value(v)) != json_string_length(v) && orh_json_get_u64(v, &x)) {
			put_u64(o, x, false);
			return 0;
		}
		put_string(o, json_string_value(v), json_string_length(v));
		return 0;
	}
	case JSON_INTEGER:
		put_int(o, json_integer_value(v));
		return 0;
	case JSON_TRUE:
		orh_buf_add(o, "true", 4);
		return 0;
	case JSON_FALSE:
		orh_buf_add(o, "false", 5);
		return 0;
	case JSON_NULL:
		orh_buf_add(o, "null", 4);
		return 0;
	case JSON_REAL: {
		/* rare in a spec or a record: jansson's own text for it */
		char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

		if (!t)
			return -1;
		orh_buf_add(o, t, strlen(t));
		orh_json_free_text(t);
		return 0;
	}
	}
	return -1;
}

char *orh_json_dump(const json_t *v, size_t *len)
{
	struct orh_buf o = { NULL, 0, 0 };

	orh_buf_reserve(&o, 4096);
	if (put_value(&o, v, 0) < 0) {
		free(o.p);
		return NULL;
	}
	o.p[o.n] = '\0';
	if (len)
		*len = o.n;
	return o.p;
}

json_t *orh_json_object_of(size_t n, const char *const *keys, json_t **vals)
{
	json_t *o = json_object();
	size_t i = 0;

	/* json_object_set_new_nocheck takes the value's reference, on failure too */
	while (o && i < n && vals[i] && json_object_set_new_nocheck(o, keys[i], vals[i]) == 0)
		i++;
	if (o && i == n)
		return o;
	for (size_t k = o && vals[i] ? i + 1 : i; k < n; k++)
		json_decref(vals[k]);
	json_decref(o);
	return NULL;
}
