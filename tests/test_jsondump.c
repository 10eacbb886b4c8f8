/* SPDX-License-Identifier: Apache-2.0 */
/* orh_json_dump (src/base/jsondump.c): jansson's compact text, byte for byte, with u64
 * markers as numbers; orh_json_object_of; orh_json_stringn. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/base/json.h"
#include "orh/apply/spec.h"
#include "orh/base/util.h"

/* json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) and orh_json_dump(v) of the text doc. */
static void same_as_jansson(const char *doc)
{
	json_error_t jerr;
	json_t *v = json_loads(doc, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	char *want = NULL, *got = NULL;
	size_t len = 0;

	cr_assert_not_null(v, "%s: %s", doc, jerr.text);
	want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	got = orh_json_dump(v, &len);
	cr_assert_not_null(want);
	cr_assert_not_null(got);
	cr_assert_str_eq(got, want, "for %s", doc);
	cr_assert_eq(len, strlen(want));
	free(want);
	free(got);
	json_decref(v);
}

Test(jsondump, same_text_as_jansson)
{
	static const char *const docs[] = {
		"{}",
		"[]",
		"{\"a\":{},\"b\":[],\"c\":[{}],\"d\":[[[]]]}",
		"{\"z\":1,\"a\":2,\"m\":{\"y\":true,\"b\":false,\"n\":null}}",
		"[0,-1,9223372036854775807,-9223372036854775808,42]",
		"[1.5,-0.25,1e300,3.0,1e-7]",
		"\"plain\"",
		"\"q\\\"b\\\\s/\\u007f \\u00e9 \\u4e2d \\ud83d\\ude00\"",
		"{\"k\\n\\t\":\"v\\r\\b\\f\"}",
		"[\"nul \\u0000 inside\"]",
		"{\"ociVersion\":\"1.0.2\",\"process\":{\"args\":[\"sh\",\"-c\",\"echo \\\"$X\\\"\"],"
		"\"env\":[\"PATH=/usr/bin\",\"NCCL_IB_HCA=mlx5_0:1\"],\"cwd\":\"/\"},"
		"\"linux\":{\"devices\":[{\"path\":\"/dev/infiniband/uverbs0\",\"type\":\"c\","
		"\"major\":231,\"minor\":192,\"fileMode\":438,\"uid\":0,\"gid\":0}]}}",
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++)
		same_as_jansson(docs[i]);
}

Test(jsondump, every_control_character)
{
	char doc[8 * 32 + 8] = "[\"";

	for (unsigned c = 1; c < 0x20; c++) {
		size_t n = strlen(doc);

		snprintf(doc + n, sizeof(doc) - n, "\\u%04x", c);
	}
	strcat(doc, "\"]");
	same_as_jansson(doc);
}

Test(jsondump, markers_are_numbers)
{
	json_t *v = json_pack("{s:o, s:o, s:[o]}", "hard", orh_json_u64(UINT64_MAX), "soft",
			      orh_json_u64(7), "l", orh_json_u64((uint64_t)INT64_MAX + 1));
	char *s = orh_json_dump(v, NULL);

	cr_assert_str_eq(s, "{\"hard\":18446744073709551615,\"soft\":7,"
			    "\"l\":[9223372036854775808]}");
	free(s);
	json_decref(v);
}

Test(jsondump, object_of)
{
	static const char *const keys[] = { "b", "a", "c" };
	json_t *vals[] = { json_integer(1), json_string("x"), json_true() };
	json_t *bad[] = { json_integer(1), NULL, json_string("left over") };
	json_t *o = orh_json_object_of(3, keys, vals);
	char *s = orh_json_dump(o, NULL);

	cr_assert_str_eq(s, "{\"b\":1,\"a\":\"x\",\"c\":true}");
	free(s);
	json_decref(o);
	/* a NULL value (json_string of bad UTF-8, out of memory): no object, no leak (the
	 * sanitizer build checks the last) */
	cr_assert_null(orh_json_object_of(3, keys, bad));
}

/* orh_json_put_real writes what json_dumps writes of json_real(v): doubles of every
 * exponent the fast path takes and around it, with the ties of the 18th digit that glibc
 * rounds to even; NaN and the infinities refused, as json_real refuses them. */
Test(jsondump, reals_as_jansson_writes_them)
{
	static const double fixed[] = { 0.0, -0.0, 1.0, 0.5, 1e-5, 9.9999999999999991e-6, 1e-4,
					0.001, 0.1, 2.578940000385046, 218.6424189992249,
					12345678901.0078125, 12345678901.0234375, 999999999999.99988,
					1e12, 1e17, 1e300, 5e-324, 123.0, -47.25, 1e16 };
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	struct orh_buf o = { NULL, 0, 0 };

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]) + 20000; i++) {
		double v;
		json_t *j;
		char *want;

		if (i < sizeof(fixed) / sizeof(fixed[0])) {
			v = fixed[i];
		} else { /* random mantissas, exponents from 2^-24 to 2^44, both signs */
			uint64_t bits;

			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			bits = (seed >> 12) | ((uint64_t)(1023 - 24 + (seed >> 58) % 69) << 52) |
			       (seed & 1) << 63;
			if (i % 4 == 0) /* few bits: exact ties of the 18th digit */
				bits &= ~((1ULL << (20 + (seed >> 40) % 30)) - 1);
			memcpy(&v, &bits, sizeof(v));
		}
		j = json_real(v);
		want = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
		o.n = 0;
		cr_assert(orh_json_put_real(&o, v));
		cr_assert_str_eq(o.p, want, "%.17g", v);
		free(want);
		json_decref(j);
	}
	o.n = 0;
	cr_assert_not(orh_json_put_real(&o, NAN));
	cr_assert_not(orh_json_put_real(&o, INFINITY));
	cr_assert_eq(o.n, 0);
	free(o.p);
}

/* orh_json_put_str refuses what json_string refuses (truncated and overlong sequences,
 * surrogates, past U+10FFFF, stray continuation bytes), writing nothing, and writes the
 * rest as json_dumps does. */
Test(jsondump, strings_as_json_string_takes_them)
{
	static const char *const strs[] = {
		"", "plain", "q\"b\\s/\x7f", "\x01\x1f\t\n", "\xc3\xa9", "\xe4\xb8\xad",
		"\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "a\xc3", "\xc3(", "\xc0\xaf", "\xc1\xbf",
		"\xe0\x80\xaf", "\xed\xa0\x80", "\xed\x9f\xbf", "\xf0\x8f\xbf\xbf",
		"\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\x80", "\xbf x", "\xff", "ok\xe4\xb8",
		"x\xe4\xb8\xadx\xf0\x9f\x98", "eth0\xfe", "\xef\xbf\xbf\xee\x80\x80",
	};
	struct orh_buf o = { NULL, 0, 0 };

	orh_buf_add(&o, "[", 1);
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		json_t *j = json_string(strs[i]);
		char *want = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		size_t before = o.n;

		cr_assert_eq(orh_json_put_str(&o, strs[i]), j != NULL, "string %zu", i);
		if (j)
			cr_assert_str_eq(o.p + before, want, "string %zu", i);
		else
			cr_assert_eq(o.n, before, "string %zu: something written", i);
		o.n = before;
		o.p[o.n] = '\0';
		free(want);
		json_decref(j);
	}
	cr_assert_not(orh_json_put_str(&o, NULL));
	free(o.p);
}

/* orh_json_stringn takes what json_stringn takes, and refuses what it refuses: each byte
 * sequence alone, and at each offset of a longer ASCII text (the word at a time scan). */
Test(jsondump, stringn_as_jansson_takes_it)
{
	static const char *const strs[] = {
		"", "plain", "nul\0in", "\x7f", "\xc3\xa9", "\xf0\x9f\x98\x80", "a\xc3", "\xc0\xaf",
		"\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80", "\xff", "eth0\xfe",
	};
	static const size_t lens[] = { 0, 5, 6, 1, 2, 4, 2, 2, 3, 4, 1, 1, 5 };
	char text[64];

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		for (size_t at = 0; at <= 17; at++) {
			size_t len = at + lens[i] + 9;
			json_t *want, *got;

			memset(text, 'x', sizeof(text));
			memcpy(text + at, strs[i], lens[i]);
			want = json_stringn(text, len);
			got = orh_json_stringn(text, len);
			cr_assert_eq(got != NULL, want != NULL, "string %zu at %zu", i, at);
			if (want) {
				cr_assert_eq(json_string_length(got), len, "string %zu at %zu", i, at);
				cr_assert(json_equal(got, want), "string %zu at %zu", i, at);
			}
			json_decref(want);
			json_decref(got);
		}
	}
}

/* The record's times: milliseconds to the microsecond, a half away from zero. */
Test(jsondump, a_time_in_milliseconds)
{
	static const struct {
		double v;
		const char *text;
	} cases[] = {
		{ 0, "0.000" },           { 1.5, "1.500" },        { 0.0004, "0.000" },
		{ 0.0005, "0.001" },      { 2.25, "2.250" },       { 123456.789, "123456.789" },
		{ -2.0005, "-2.001" },    { 1e-7, "0.000" },       { 999.9996, "1000.000" },
		{ 1e14, "100000000000000.000" },
	};
	struct orh_buf o = { 0 };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		o.n = 0;
		cr_assert(orh_json_put_ms(&o, cases[i].v));
		orh_buf_addc(&o, '\0');
		cr_assert_str_eq(o.p, cases[i].text, "%.17g", cases[i].v);
	}
	o.n = 0;
	cr_assert_not(orh_json_put_ms(&o, NAN));
	cr_assert_not(orh_json_put_ms(&o, -INFINITY));
	cr_assert_not(orh_json_put_ms(&o, 1e15));
	cr_assert_eq(o.n, 0);
	free(o.p);
}
