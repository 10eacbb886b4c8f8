/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for orh_text_escape() (src/base/util.c): text from images and specs, as logs
 * and inspect print it; and orh_fail_errno(), the error text of an errno. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orh/base/util.h"

static void escapes_to(const char *in, const char *want)
{
	char *got = orh_text_escape(in);

	cr_assert_str_eq(got, want, "'%s'", in);
	free(got);
}

/* C0 controls (ESC, BEL, CR, newline, tab), DEL and C1 (U+009B, CSI) become \xHH. */
Test(text, control_characters_are_escaped)
{
	escapes_to("NCCL_X=\x1b]0;title\x07\r\nforged",
		   "NCCL_X=\\x1b]0;title\\x07\\x0d\\x0aforged");
	escapes_to("a\tb\x7f", "a\\x09b\\x7f");
	escapes_to("\xc2\x9b" "31m", "\\xc2\\x9b31m");
}

/* Text stays as it is: ASCII, UTF-8 of two to four bytes, a backslash. */
Test(text, text_is_kept)
{
	escapes_to("", "");
	escapes_to("plain text: mlx5_0:1 /dev/infiniband", "plain text: mlx5_0:1 /dev/infiniband");
	escapes_to("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0",
		   "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0");
	escapes_to("a\\x1b", "a\\x1b");
}

/* Bytes that are not well-formed UTF-8 are escaped one by one: a lone continuation byte,
 * a cut sequence, an overlong form, a surrogate, past U+10FFFF. */
Test(text, malformed_utf8_is_escaped)
{
	escapes_to("\x9b", "\\x9b");
	escapes_to("\xe2\x82", "\\xe2\\x82");
	escapes_to("\xc0\xaf", "\\xc0\\xaf");
	escapes_to("\xed\xa0\x80", "\\xed\\xa0\\x80");
	escapes_to("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
	escapes_to("ok\xff", "ok\\xff");
}

/* orh_fail_errno() (src/base/util.c): orh_fail()'s message with ": " and the errno's text
 * after it, whatever the code's sign; a message too long keeps its start. */
Test(text, fail_errno_appends_the_errno_text)
{
	struct orh_err err = { 0 };
	char want[ORH_ERR_MAX], *longer = NULL;

	cr_assert_eq(orh_fail_errno(&err, -ENOENT, "opening '%s'", "x"), -ENOENT);
	snprintf(want, sizeof(want), "opening 'x': %s", strerror(ENOENT));
	cr_assert_str_eq(err.msg, want);
	cr_assert_eq(err.code, ENOENT);
	cr_assert_eq(orh_fail_errno(&err, EACCES, "reading"), -EACCES);
	snprintf(want, sizeof(want), "reading: %s", strerror(EACCES));
	cr_assert_str_eq(err.msg, want);
	longer = malloc(ORH_ERR_MAX + 10);
	memset(longer, 'a', ORH_ERR_MAX + 9);
	longer[ORH_ERR_MAX + 9] = '\0';
	orh_fail_errno(&err, EIO, "%s", longer);
	cr_assert_eq(strlen(err.msg), ORH_ERR_MAX - 1);
	cr_assert_eq(strspn(err.msg, "a"), ORH_ERR_MAX - 1);
	free(longer);
}
