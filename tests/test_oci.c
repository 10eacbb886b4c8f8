/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/decide/oci.c: OCI state and config.json parsing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/decide/oci.h"

static int parse_state(const char *s, struct orh_oci_state *st, struct orh_err *err)
{
	return orh_oci_state_parse(s, strlen(s), st, err);
}

static json_t *spec_of(const char *s)
{
	struct orh_err err = { 0 };
	json_t *spec = NULL;
	int r = orh_spec_parse(s, strlen(s), "test.json", &spec, &err);

	cr_assert_eq(r, 0, "orh_spec_parse: %s", err.msg);
	return spec;
}

static int spec_err(const char *s, struct orh_err *err)
{
	json_t *spec = NULL;
	int r = orh_spec_parse(s, strlen(s), "test.json", &spec, err);

	cr_assert_null(spec);
	return r;
}

Test(oci_state, full)
{
	struct orh_oci_state st;
	struct orh_err err = { 0 };
	int r = parse_state("{\"ociVersion\":\"1.0.2\",\"id\":\"c1\",\"status\":\"creating\","
			    "\"pid\":4242,\"bundle\":\"/run/b/c1\","
			    "\"annotations\":{\"oci-rdma-hook/enable\":\"true\"}}",
			    &st, &err);

	cr_assert_eq(r, 0, "%s", err.msg);
	cr_assert_str_eq(st.id, "c1");
	cr_assert_str_eq(st.bundle, "/run/b/c1");
	cr_assert_str_eq(st.status, "creating");
	cr_assert_eq(st.pid, 4242);
	cr_assert_not_null(st.annotations);
	cr_assert_str_eq(json_string_value(json_object_get(st.annotations,
							   "oci-rdma-hook/enable")), "true");
	orh_oci_state_free(&st);
}

Test(oci_state, poststop_without_pid)
{
	struct orh_oci_state st;
	struct orh_err err = { 0 };
	int r = parse_state("{\"ociVersion\":\"1.0.2\",\"id\":\"c1\",\"status\":\"stopped\","
			    "\"bundle\":\"/b\"}", &st, &err);

	cr_assert_eq(r, 0, "%s", err.msg);
	cr_assert_eq(st.pid, 0);
	cr_assert_null(st.annotations);
	orh_oci_state_free(&st);
}

struct bad_case {
	const char *doc;
	const char *needle; /* must appear in the error message */
};

Test(oci_state, bad_inputs)
{
	static const struct bad_case cases[] = {
		{ "", "empty" },
		{ "[]", "not a JSON object" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\"", "line" },
		{ "{\"id\":\"x\",\"bundle\":\"/b\"}", "'ociVersion'" },
		{ "{\"ociVersion\":\"1\",\"bundle\":\"/b\"}", "'id'" },
		{ "{\"ociVersion\":\"1\",\"id\":7,\"bundle\":\"/b\"}", "'id' is not a string" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\"}", "'bundle'" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\",\"bundle\":\"rel/b\"}", "absolute" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\",\"bundle\":\"/b\",\"pid\":\"1\"}",
		  "'pid' is not an integer" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\",\"bundle\":\"/b\",\"pid\":-1}", "'pid'" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\",\"bundle\":\"/b\",\"pid\":9999999999}",
		  "'pid'" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\",\"id\":\"y\",\"bundle\":\"/b\"}",
		  "duplicate" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\",\"bundle\":\"/b\",\"annotations\":[]}",
		  "'annotations' is not an object" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\",\"bundle\":\"/b\",\"annotations\":{\"a\":1}}",
		  "'annotations.a'" },
		{ "{\"ociVersion\":\"1\",\"id\":\"x\",\"bundle\":\"/b\\u0000c\"}", "NUL" },
	};

	for (size_t i = 0; i < ORH_ARRAY_SIZE(cases); i++) {
		struct orh_oci_state st;
		struct orh_err err = { 0 };
		int r = parse_state(cases[i].doc, &st, &err);

		cr_assert_lt(r, 0, "case %zu accepted: %s", i, cases[i].doc);
		cr_assert_eq(-r, err.code, "case %zu", i);
		cr_assert_not_null(strstr(err.msg, "OCI state"), "case %zu: %s", i, err.msg);
		cr_assert_not_null(strstr(err.msg, cases[i].needle),
				   "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].needle);
	}
}

Test(oci_state, size_limit)
{
	size_t n = ORH_STATE_MAX_BYTES + 1;
	char *big = malloc(n);
	struct orh_oci_state st;
	struct orh_err err = { 0 };

	cr_assert_not_null(big);
	memset(big, ' ', n);
	cr_assert_eq(orh_oci_state_parse(big, n, &st, &err), -EFBIG);
	cr_assert_not_null(strstr(err.msg, "limit"), "%s", err.msg);
	free(big);
}

Test(oci_spec, types_checked)
{
	static const struct bad_case cases[] = {
		{ "{\"process\":[]}", "'process' is not an object" },
		{ "{\"process\":{\"env\":\"A=1\"}}", "'process.env' is not an array" },
		{ "{\"process\":{\"env\":[\"A=1\",2]}}", "'process.env[1]' is not a string" },
		{ "{\"process\":{\"rlimits\":[\"x\"]}}", "'process.rlimits[0]'" },
		{ "{\"process\":{\"capabilities\":{\"bounding\":[1]}}}",
		  "'process.capabilities.bounding[0]'" },
		{ "{\"linux\":{\"devices\":{}}}", "'linux.devices' is not an array" },
		{ "{\"linux\":{\"resources\":{\"devices\":[1]}}}", "'linux.resources.devices[0]'" },
		{ "{\"linux\":{\"namespaces\":[{\"type\":5}]}}", "'linux.namespaces[0].type'" },
		{ "{\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"path\":[]}]}}",
		  "'linux.namespaces[1].path' is not a string" },
		{ "{\"process\":{\"capabilities\":{\"ambient\":\"CAP_IPC_LOCK\"}}}",
		  "'process.capabilities.ambient' is not an array" },
		{ "{\"linux\":{\"resources\":[]}}", "'linux.resources' is not an object" },
		{ "{\"hooks\":{\"poststop\":[{}, \"x\"]}}", "'hooks.poststop[1]' is not an object" },
		{ "{\"hooks\":[]}", "'hooks' is not an object" },
		{ "{\"annotations\":{\"k\":true}}", "'annotations.k'" },
		{ "{\"a\":1,\"a\":2}", "duplicate" },
		{ "\"str\"", "expected" },
	};

	for (size_t i = 0; i < ORH_ARRAY_SIZE(cases); i++) {
		struct orh_err err = { 0 };
		int r = spec_err(cases[i].doc, &err);

		cr_assert_eq(r, -EINVAL, "case %zu: %d", i, r);
		cr_assert_not_null(strstr(err.msg, "test.json"), "case %zu: %s", i, err.msg);
		cr_assert_not_null(strstr(err.msg, cases[i].needle),
				   "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].needle);
	}
}

static char *make_bundle(const char *content)
{
	char tmpl[] = "/tmp/orh-test-bundle-XXXXXX";
	char *dir = mkdtemp(tmpl);
	char path[256];
	FILE *f = NULL;

	cr_assert_not_null(dir);
	if (content) {
		snprintf(path, sizeof(path), "%s/config.json", dir);
		f = fopen(path, "w");
		cr_assert_not_null(f);
		fputs(content, f);
		fclose(f);
	}
	return strdup(dir);
}

static void rm_bundle(char *dir)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/config.json", dir);
	unlink(path);
	rmdir(dir);
	free(dir);
}

Test(oci_spec, load_from_bundle)
{
	char *dir = make_bundle("{\"ociVersion\":\"1.0.2\",\"process\":{\"env\":[\"A=1\"]}}");
	struct orh_err err = { 0 };
	json_t *spec = NULL;

	cr_assert_eq(orh_spec_load(dir, &spec, &err), 0, "%s", err.msg);
	cr_assert(orh_spec_env_has(spec, "A"));
	json_decref(spec);
	rm_bundle(dir);
}

Test(oci_spec, load_errors_name_the_file)
{
	char *dir = make_bundle(NULL);
	struct orh_err err = { 0 };
	json_t *spec = NULL;

	cr_assert_eq(orh_spec_load(dir, &spec, &err), -ENOENT);
	cr_assert_not_null(strstr(err.msg, "config.json"), "%s", err.msg);
	rm_bundle(dir);

	dir = make_bundle("{\"process\":{\"env\":[1]}}");
	cr_assert_eq(orh_spec_load(dir, &spec, &err), -EINVAL);
	cr_assert_not_null(strstr(err.msg, "/config.json"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "process.env[0]"), "%s", err.msg);
	rm_bundle(dir);

	cr_assert_eq(orh_spec_load("/nonexistent-orh-bundle", &spec, &err), -ENOENT);
	cr_assert_not_null(strstr(err.msg, "/nonexistent-orh-bundle"), "%s", err.msg);
}

Test(oci_spec, load_refuses_fifo)
{
	char *dir = make_bundle(NULL);
	char path[256];
	struct orh_err err = { 0 };
	json_t *spec = NULL;

	snprintf(path, sizeof(path), "%s/config.json", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_eq(orh_spec_load(dir, &spec, &err), -EINVAL);
	cr_assert_not_null(strstr(err.msg, "regular file"), "%s", err.msg);
	rm_bundle(dir);
}

Test(oci_spec, env_has)
{
	json_t *spec = spec_of("{\"process\":{\"env\":[\"PATH=/bin\",\"NCCL_IB_HCA=mine\","
			       "\"NCCL_X\",\"NCCL_IB_GID_INDEX_EXTRA=1\"]}}");

	cr_assert(orh_spec_env_has(spec, "PATH"));
	cr_assert(orh_spec_env_has(spec, "NCCL_IB_HCA"));
	cr_assert(orh_spec_env_has(spec, "NCCL_X"));
	cr_assert_not(orh_spec_env_has(spec, "NCCL_IB_GID_INDEX"));
	cr_assert_not(orh_spec_env_has(spec, "NCCL_IB"));
	cr_assert_not(orh_spec_env_has(spec, ""));
	json_decref(spec);

	spec = spec_of("{}");
	cr_assert_not(orh_spec_env_has(spec, "PATH"));
	json_decref(spec);
}

Test(oci_spec, netns)
{
	bool has = true;
	const char *path = "x";
	json_t *spec = spec_of("{\"linux\":{\"namespaces\":[{\"type\":\"pid\"},"
			       "{\"type\":\"network\",\"path\":\"/run/netns/cni-1\"}]}}");

	cr_assert_eq(orh_spec_netns(spec, &has, &path), 0);
	cr_assert(has);
	cr_assert_str_eq(path, "/run/netns/cni-1");
	json_decref(spec);

	spec = spec_of("{\"linux\":{\"namespaces\":[{\"type\":\"network\"}]}}");
	cr_assert_eq(orh_spec_netns(spec, &has, &path), 0);
	cr_assert(has);
	cr_assert_null(path);
	json_decref(spec);

	spec = spec_of("{\"linux\":{\"namespaces\":[{\"type\":\"mount\"}]}}");
	cr_assert_eq(orh_spec_netns(spec, &has, &path), 0);
	cr_assert_not(has);
	cr_assert_null(path);
	json_decref(spec);

	spec = spec_of("{\"linux\":{\"namespaces\":[{\"type\":\"network\"},"
		       "{\"type\":\"network\"}]}}");
	cr_assert_eq(orh_spec_netns(spec, &has, &path), -EINVAL);
	json_decref(spec);
}
