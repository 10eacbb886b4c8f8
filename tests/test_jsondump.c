/* SPDX-License-Identifier: Apache-2.0 */
/* orh_json_dump (src/base/jsondump.c): jansson's compact text, byte for byte, with u64
 * markers as numbers; orh_json_object_of. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/spec.h"

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
