/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unsigned 64-bit integers through jansson (signed 64-bit only): see include/orh/base/json.h.
 *
 * A literal above INT64_MAX becomes the string "\0orh-u64:<digits>" before parsing, and
 * orh_json_dump() (jsondump.c) writes such a string as <digits>. orh_json_u64_count()
 * refuses NUL in any other string of a parsed document, so a marker is one made here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "orh/base/json.h"
#include "orh/base/util.h"

#define MARK "orh-u64:"
#define MARK_LEN (sizeof(MARK) - 1)

json_t *orh_json_u64(uint64_t v)
{
	char s[1 + MARK_LEN + 21];
	int n = 0;

	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	n = snprintf(s, sizeof(s), "%c" MARK "%" PRIu64, '\0', v);
	return json_stringn(s, (size_t)n);
}

static bool marker_value(const char *s, size_t len, uint64_t *v)
{
	unsigned long long x = 0;
	char digits[24];

	if (len < 1 + MARK_LEN + 1 || len - 1 - MARK_LEN >= sizeof(digits) || s[0] != '\0' ||
	    memcmp(s + 1, MARK, MARK_LEN) != 0)
		return false;
	memcpy(digits, s + 1 + MARK_LEN, len - 1 - MARK_LEN);
	digits[len - 1 - MARK_LEN] = '\0';
	if (orh_parse_uint(digits, UINT64_MAX, &x) < 0)
		return false;
	*v = x;
	return true;
}

bool orh_json_get_u64(const json_t *j, uint64_t *v)
{
	if (json_is_integer(j)) {
		if (json_integer_value(j) < 0)
			return false;
		*v = (uint64_t)json_integer_value(j);
		return true;
	}
	if (json_is_string(j))
		return marker_value(json_string_value(j), json_string_length(j), v);
	return false;
}

/* An integer literal (no fraction, no exponent) of only digits, above INT64_MAX and at
 * most UINT64_MAX. Anything else stays for jansson to accept or refuse. */
static bool is_big_u64(const char *p, size_t n)
{
	static const char max[] = "18446744073709551615";
	static const char lim[] = "9223372036854775807";

	if (n == 0 || (n > 1 && p[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	if (n < sizeof(lim) - 1 || n > sizeof(max) - 1)
		return false;
	if (n == sizeof(lim) - 1 && memcmp(p, lim, n) <= 0)
		return false;
	if (n == sizeof(max) - 1 && memcmp(p, max, n) > 0)
		return false;
	return true;
}

int orh_json_u64_escape(const char *buf, size_t len, char **out, size_t *out_len,
			size_t *n_markers)
{
	static const char open_mark[] = "\"\\u0000" MARK;
	struct orh_buf o = { NULL, 0, 0 };
	size_t copied = 0, i = 0;

	*out = NULL;
	*out_len = 0;
	*n_markers = 0;
	while (i < len) {
		char c = buf[i];
		size_t start = i, end = 0;

		if (c == '"') {
			/* the string ends at the first quote after an even number of
			 * backslashes (each escapes the byte after it) */
			size_t s0 = ++i;

			while (i < len) {
				const char *q = memchr(buf + i, '"', len - i);
				size_t at = q ? (size_t)(q - buf) : len, bs = 0;

				while (q && at - bs > s0 && buf[at - bs - 1] == '\\')
					bs++;
				i = at + 1;
				if (bs % 2 == 0)
					break;
			}
			continue;
		}
		if (!(c == '-' || (c >= '0' && c <= '9'))) {
			i++;
			continue;
		}
		/* A number token: sign, digits, fraction, exponent. */
		for (end = i + 1; end < len; end++) {
			char d = buf[end];

			if (!((d >= '0' && d <= '9') || d == '.' || d == 'e' || d == 'E' ||
			      d == '+' || d == '-'))
				break;
		}
		i = end;
		if (!is_big_u64(buf + start, end - start))
			continue;
		orh_buf_add(&o, buf + copied, start - copied);
		orh_buf_add(&o, open_mark, sizeof(open_mark) - 1);
		orh_buf_add(&o, buf + start, end - start);
		orh_buf_add(&o, "\"", 1);
		copied = end;
		(*n_markers)++;
	}
	if (!o.p)
		return 0;
	orh_buf_add(&o, buf + copied, len - copied);
	*out = o.p;
	*out_len = o.n;
	return 0;
}

int orh_json_u64_count(const json_t *j, size_t *n_markers)
{
	const char *key = NULL;
	json_t *v = NULL;
	size_t i = 0;
	int r = 0;

	switch (json_typeof(j)) {
	case JSON_STRING: {
		uint64_t x = 0;

		if (strlen(json_string_value(j)) == json_string_length(j))
			return 0;
		if (!marker_value(json_string_value(j), json_string_length(j), &x))
			return -EINVAL;
		(*n_markers)++;
		return 0;
	}
	case JSON_OBJECT:
		json_object_foreach((json_t *)j, key, v) {
			r = orh_json_u64_count(v, n_markers);
			if (r < 0)
				return r;
		}
		return 0;
	case JSON_ARRAY:
		json_array_foreach(j, i, v) {
			r = orh_json_u64_count(v, n_markers);
			if (r < 0)
				return r;
		}
		return 0;
	default:
		return 0;
	}
}
