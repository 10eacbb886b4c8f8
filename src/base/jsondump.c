/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compact JSON text, as jansson writes it: see include/orh/base/json.h (orh_json_dump and the
 * orh_json_put_* writers).
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
 * The record (src/apply/record_text.c), the project's own format, is written with the
 * orh_json_put_* writers from its values, without a tree: a string that is not valid
 * UTF-8, which json_string() refuses, is refused here by the same rules (jansson's
 * utf.c); its times are milliseconds to the microsecond, written from an integer
 * (orh_json_put_ms()). A real of a spec keeps jansson's "%.17g", which reads back as the
 * same double.
 *
 * orh_json_object_of() builds an object from literal keys without json_pack, whose
 * format parsing took more than half of the spec edit's instructions on that node: the
 * edit makes two objects per device node.
 *
 * orh_json_stringn() makes the string of a node snapshot's text (about 9 KB on that node)
 * without jansson's UTF-8 check of each byte where every byte is ASCII, which the check
 * passes: 56,000 instructions of the NRI plugin's worker and as many of the nccl-conf
 * stage went to that check (callgrind, when this was written).
 */
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orh/base/json.h"
#include "orh/base/util.h"

/* What a JSON string does with each byte: COPY as it is, ESCAPE ('"', '\\' and the control
 * characters), LEAD (the first byte of a UTF-8 sequence of 2 to 4 bytes: copied, checked
 * where the string's validity is not known), BAD (a byte no valid sequence starts with:
 * continuation bytes, 0xC0, 0xC1, 0xF5 and above). */
enum { COPY, ESCAPE, LEAD, BAD };
static const unsigned char byte_class[256] = {
	[0 ... 0x1f] = ESCAPE, ['"'] = ESCAPE, ['\\'] = ESCAPE,
	[0x80 ... 0xc1] = BAD, [0xc2 ... 0xf4] = LEAD, [0xf5 ... 0xff] = BAD,
};

/* The length of the valid UTF-8 sequence at s (of at most len bytes), whose first byte is
 * a LEAD, or 0: jansson's utf8_check_first() and utf8_check_full(), which refuse
 * truncated sequences, overlong forms, UTF-16 surrogates and code points past U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t len)
{
	size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
	uint32_t cp = s[0] & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);

	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp < (n == 2 ? 0x80u : n == 3 ? 0x800u : 0x10000u))
		return 0;
	return n;
}

/* s as a JSON string; with check, false and nothing written where s is not valid UTF-8. */
static bool put_string(struct orh_buf *o, const char *s, size_t len, bool check)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, start = o->n;

	orh_buf_addc(o, '"');
	while (i < len) {
		size_t run = i, n;
		unsigned char c;

		while (run < len) {
			c = byte_class[u[run]];
			if (c == COPY || (c != ESCAPE && !check)) {
				run++;
			} else if (c == LEAD && (n = utf8_seq(u + run, len - run)) != 0) {
				run += n;
			} else {
				break;
			}
		}
		orh_buf_add(o, s + i, run - i);
		if (run == len)
			break;
		c = u[run];
		if (byte_class[c] != ESCAPE) {
			o->n = start; /* not UTF-8: what json_string() refuses */
			o->p[start] = '\0';
			return false;
		}
		switch (c) {
		case '"': orh_buf_add(o, "\\\"", 2); break;
		case '\\': orh_buf_add(o, "\\\\", 2); break;
		case '\b': orh_buf_add(o, "\\b", 2); break;
		case '\f': orh_buf_add(o, "\\f", 2); break;
		case '\n': orh_buf_add(o, "\\n", 2); break;
		case '\r': orh_buf_add(o, "\\r", 2); break;
		case '\t': orh_buf_add(o, "\\t", 2); break;
		default: {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			orh_buf_add(o, e, sizeof(e));
		}
		}
		i = run + 1;
	}
	orh_buf_addc(o, '"');
	return true;
}

bool orh_json_put_str(struct orh_buf *o, const char *s)
{
	return s && put_string(o, s, strlen(s), /* check= */ true);
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

void orh_json_put_int(struct orh_buf *o, json_int_t v)
{
	/* a negative value's magnitude, INT64_MIN's included, without signed overflow */
	put_u64(o, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, v < 0);
}

bool orh_json_put_ms(struct orh_buf *o, double v)
{
	char buf[32], *p = buf + sizeof(buf);
	long long t;
	unsigned long long u;

	/* |v| * 1000 within a long long, with room: larger is no time a step takes */
	if (!isfinite(v) || v >= 1e15 || v <= -1e15)
		return false;
	/* to the nearest microsecond, a half away from zero (no libm in the static hook) */
	t = (long long)(v * 1000 + (v < 0 ? -0.5 : 0.5));
	u = t < 0 ? (unsigned long long)-t : (unsigned long long)t;
	for (int i = 0; i < 3; i++, u /= 10)
		*--p = (char)('0' + u % 10);
	*--p = '.';
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (t < 0)
		*--p = '-';
	orh_buf_add(o, p, (size_t)(buf + sizeof(buf) - p));
	return true;
}

bool orh_json_put_real(struct orh_buf *o, double v)
{
	char buf[64];
	size_t n;
	char *e;

	if (!isfinite(v))
		return false; /* what json_real() refuses */
	{
		int r = snprintf(buf, sizeof(buf) - 3, "%.17g", v);
		const char point = localeconv()->decimal_point[0];

		if (r < 0 || (size_t)r >= sizeof(buf) - 3)
			return false;
		n = (size_t)r;
		if (point != '.' && strchr(buf, point))
			*strchr(buf, point) = '.';
	}
	/* jsonp_dtostr(): a '.' or an 'e' so that it reads back as a real, and the exponent
	 * without a '+' or leading zeros */
	if (!strchr(buf, '.') && !strchr(buf, 'e')) {
		memcpy(buf + n, ".0", 3);
		n += 2;
	}
	e = strchr(buf, 'e');
	if (e) {
		char *start = e + 1, *end = e + 2;

		if (*start == '-')
			start++;
		while (*end == '0')
			end++;
		if (end != start) {
			memmove(start, end, n - (size_t)(end - buf) + 1);
			n -= (size_t)(end - start);
		}
	}
	orh_buf_add(o, buf, n);
	return true;
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
			put_string(o, key, strlen(key), /* check= */ false);
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
		put_string(o, json_string_value(v), json_string_length(v), false);
		return 0;
	}
	case JSON_INTEGER:
		orh_json_put_int(o, json_integer_value(v));
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
	case JSON_REAL:
		return orh_json_put_real(o, json_real_value(v)) ? 0 : -1;
	}
	return -1;
}

int orh_json_put_value(struct orh_buf *o, const json_t *v)
{
	return put_value(o, v, 0);
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

json_t *orh_json_stringn(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	uint64_t high = 0;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, u + i, sizeof(w));
		high |= w;
	}
	for (; i < len; i++)
		high |= u[i];
	return high & 0x8080808080808080ULL ? json_stringn(s, len) : json_stringn_nocheck(s, len);
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
