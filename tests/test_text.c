/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for orh_text_escape() (src/base/util.c): text from images and specs, as logs
 * and inspect print it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "orh/util.h"

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
