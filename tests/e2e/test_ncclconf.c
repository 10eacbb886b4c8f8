/* SPDX-License-Identifier: Apache-2.0 */
/* The pure part of src/apply/ncclconf.c: merging the plan into /etc/nccl.conf. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orh/apply/apply.h"

#define B ORH_NCCL_MARK_BEGIN "\n"
#define E ORH_NCCL_MARK_END "\n"

static struct orh_env_entry env3[] = {
	{ .name = "NCCL_IB_HCA", .value = "=mlx5_1:1,mlx5_2:1" },
	{ .name = "NCCL_IB_GID_INDEX", .value = "3" },
	{ .name = "NCCL_IB_TIMEOUT", .value = "22" },
};

static char *merge(const char *old, const struct orh_env_entry *env, size_t n, size_t *added)
{
	struct orh_err err = { 0 };
	char *out = NULL;
	size_t dummy = 0;
	int r = orh_ncclconf_merge(old, old ? strlen(old) : 0, env, n, &out,
				   added ? added : &dummy, NULL, &err);

	cr_assert_eq(r, 0, "merge failed: %s", err.msg);
	cr_assert_not_null(out);
	return out;
}

static void no_eq_in_comments(const char *text)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);

		if (l[0] == '#')
			cr_assert_null(memchr(l, '=', len), "comment line with '=': %.*s", (int)len, l);
	}
}

Test(ncclconf, no_file)
{
	size_t added = 0;
	char *t = merge(NULL, env3, 3, &added);

	cr_assert_str_eq(t, B "NCCL_IB_HCA==mlx5_1:1,mlx5_2:1\nNCCL_IB_GID_INDEX=3\n"
			     "NCCL_IB_TIMEOUT=22\n" E);
	cr_assert_eq(added, 3);
	no_eq_in_comments(t);
	free(t);
}

Test(ncclconf, image_lines_kept_and_win)
{
	size_t added = 0;
	/* no trailing newline; a comment; a CRLF line; a name with a blank is another name */
	char *t = merge("NCCL_IB_TIMEOUT=14\n# tuned by the image\nNCCL_DEBUG=INFO\r\n"
			"NCCL_IB_HCA =mlx5_0",
			env3, 3, &added);

	cr_assert_str_eq(t, "NCCL_IB_TIMEOUT=14\n# tuned by the image\nNCCL_DEBUG=INFO\r\n"
			    "NCCL_IB_HCA =mlx5_0\n" B "NCCL_IB_HCA==mlx5_1:1,mlx5_2:1\n"
			    "NCCL_IB_GID_INDEX=3\n" E);
	cr_assert_eq(added, 2);
	free(t);
}

Test(ncclconf, the_image_lines_that_stand_in_for_the_plans_are_named)
{
	struct orh_err err = { 0 };
	struct orh_strv kept = { 0 };
	char *out = NULL;
	size_t added = 0;
	const char *old = "NCCL_IB_GID_INDEX=1\r\nNCCL_IB_TIMEOUT=14\nNCCL_IB_TIMEOUT=18\n"
			  "NCCL_DEBUG=INFO\n";

	cr_assert_eq(orh_ncclconf_merge(old, strlen(old), env3, 3, &out, &added, &kept, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(added, 1, "NCCL_IB_HCA alone");
	/* the plan's order; the first definition (the one NCCL takes), without its CR */
	cr_assert_eq(kept.n, 2);
	cr_assert_str_eq(kept.v[0], "NCCL_IB_GID_INDEX=1");
	cr_assert_str_eq(kept.v[1], "NCCL_IB_TIMEOUT=14");
	free(out);
	orh_strv_free(&kept);

	/* no file: nothing kept */
	cr_assert_eq(orh_ncclconf_merge(NULL, 0, env3, 3, &out, &added, &kept, &err), 0);
	cr_assert_eq(kept.n, 0);
	cr_assert_eq(added, 3);
	free(out);
}

Test(ncclconf, commented_definition_does_not_count)
{
	char *t = merge("#NCCL_IB_GID_INDEX=0\n", env3 + 1, 1, NULL);

	cr_assert_str_eq(t, "#NCCL_IB_GID_INDEX=0\n" B "NCCL_IB_GID_INDEX=3\n" E);
	free(t);
}

Test(ncclconf, second_run_replaces_block)
{
	struct orh_env_entry changed[] = { { .name = "NCCL_IB_GID_INDEX", .value = "5" } };
	char *once = merge("NCCL_DEBUG=INFO\n", env3, 3, NULL);
	char *twice = merge(once, env3, 3, NULL);
	char *other = merge(once, changed, 1, NULL);

	cr_assert_str_eq(twice, once, "a second run must give the same file");
	cr_assert_str_eq(other, "NCCL_DEBUG=INFO\n" B "NCCL_IB_GID_INDEX=5\n" E);
	free(once);
	free(twice);
	free(other);
}

Test(ncclconf, block_with_image_lines_after_it)
{
	char *t = merge("A_X=1\n" B "NCCL_IB_GID_INDEX=1\n" E "NCCL_IB_TIMEOUT=18\n", env3, 3, NULL);

	cr_assert_str_eq(t, "A_X=1\nNCCL_IB_TIMEOUT=18\n" B "NCCL_IB_HCA==mlx5_1:1,mlx5_2:1\n"
			    "NCCL_IB_GID_INDEX=3\n" E);
	free(t);
}

Test(ncclconf, unterminated_block_is_kept)
{
	/* a begin marker without an end is not ours to delete */
	char *t = merge(B "NCCL_IB_GID_INDEX=1\n", env3 + 1, 1, NULL);

	cr_assert_str_eq(t, B "NCCL_IB_GID_INDEX=1\n");
	free(t);
}

/* An image file that holds our begin marker and no end marker, merged twice (createRuntime
 * and prestart both registered): the second run must not take the image's lines for a
 * block of ours. */
Test(ncclconf, begin_without_end_survives_two_runs)
{
	const char *image = B "NCCL_DEBUG=WARN\nNCCL_IB_HCA=mine\n";
	char *once = merge(image, env3, 3, NULL);
	char *twice = merge(once, env3, 3, NULL);

	cr_assert_str_eq(once, B "NCCL_DEBUG=WARN\nNCCL_IB_HCA=mine\n" B "NCCL_IB_GID_INDEX=3\n"
			       "NCCL_IB_TIMEOUT=22\n" E);
	cr_assert_str_eq(twice, once, "the second run must keep the image's lines");
	free(once);
	free(twice);
}

/* Only a block of begin marker, NAME=VALUE lines and end marker is ours: anything else
 * between the markers makes it the image's. */
Test(ncclconf, only_well_formed_blocks_are_ours)
{
	static const char *const kept[] = {
		B "# the image's comment\nNCCL_IB_GID_INDEX=1\n" E,
		B "NCCL_IB_GID_INDEX=1\n\n" E,
		B "NCCL_IB_GID_INDEX=1\nnot a setting\n" E,
		B "NCCL IB=1\n" E,
		E "NCCL_IB_GID_INDEX=1\n" B,
	};

	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		char *t = merge(kept[i], env3 + 2, 1, NULL);
		char *want = NULL;

		cr_assert_geq(asprintf(&want, "%s" B "NCCL_IB_TIMEOUT=22\n" E, kept[i]), 0);
		cr_assert_str_eq(t, want, "case %zu: the image's lines must be kept", i);
		free(want);
		free(t);
	}
}

Test(ncclconf, begin_inside_an_open_block_starts_it_again)
{
	char *t = merge(B "A_X=1\n# mine\n" B "NCCL_IB_GID_INDEX=1\n" E "A_Y=2\n", env3 + 1, 1,
			NULL);

	cr_assert_str_eq(t, B "A_X=1\n# mine\nA_Y=2\n" B "NCCL_IB_GID_INDEX=3\n" E);
	free(t);
}

Test(ncclconf, nothing_to_add)
{
	size_t added = 7;
	char *t = merge("NCCL_IB_GID_INDEX=0\n", env3 + 1, 1, &added);

	cr_assert_str_eq(t, "NCCL_IB_GID_INDEX=0\n");
	cr_assert_eq(added, 0);
	free(t);
	t = merge(NULL, NULL, 0, &added);
	cr_assert_str_eq(t, "");
	free(t);
}

Test(ncclconf, refuses_what_nccl_cannot_read)
{
	static char long_value[1100];
	struct orh_env_entry bad[][1] = {
		{ { .name = "NCCL_X", .value = "a\nNCCL_Y=1" } },
		{ { .name = "NCCL_X", .value = "a\r" } },
		{ { .name = "NCCL=X", .value = "1" } },
		{ { .name = "#NCCL_X", .value = "1" } },
		{ { .name = "", .value = "1" } },
		{ { .name = "NCCL_X", .value = long_value } },
		{ { .name = "NCCL_X", .value = NULL } },
	};

	memset(long_value, 'v', sizeof(long_value) - 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct orh_err err = { 0 };
		char *out = NULL;
		size_t added = 0;

		cr_assert_eq(orh_ncclconf_merge(NULL, 0, bad[i], 1, &out, &added, NULL, &err), -EINVAL,
			     "case %zu must be refused", i);
		cr_assert_null(out);
		cr_assert_neq(err.msg[0], '\0');
	}
}

Test(ncclconf, nul_in_old_file_refused)
{
	struct orh_err err = { 0 };
	char *out = NULL;
	size_t added = 0;

	cr_assert_eq(orh_ncclconf_merge("A=1\0B=2\n", 8, env3, 1, &out, &added, NULL, &err), -EINVAL);
	cr_assert_null(out);
}
