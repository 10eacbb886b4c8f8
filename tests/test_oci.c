/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/container/oci.c: OCI state and config.json parsing, activation. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/oci.h"

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

static json_t *ann(const char *s)
{
	json_error_t jerr;
	json_t *j = json_loads(s, 0, &jerr);

	cr_assert_not_null(j, "%s", jerr.text);
	return j;
}

static int decide(enum orh_activation mode, const char *annotations,
		  enum orh_activation_result *res, struct orh_container_facts *facts,
		  struct orh_err *err)
{
	struct orh_config cfg;
	json_t *a = annotations ? ann(annotations) : NULL;
	int r;

	memset(&cfg, 0, sizeof(cfg));
	cfg.activation = mode;
	memset(facts, 0, sizeof(*facts));
	r = orh_activation_decide(&cfg, a, res, facts, err);
	if (a)
		json_decref(a);
	return r;
}

Test(activation, always_mode)
{
	enum orh_activation_result res = ORH_ACT_SKIP;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(ORH_ACTIVATE_ALWAYS, NULL, &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_DEFAULT);
	cr_assert_eq(decide(ORH_ACTIVATE_ALWAYS, "{}", &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_DEFAULT);
	cr_assert_eq(decide(ORH_ACTIVATE_ALWAYS, "{\"oci-rdma-hook/enable\":\"true\"}", &res,
			    &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(decide(ORH_ACTIVATE_ALWAYS, "{\"oci-rdma-hook/enable\":\"false\"}", &res,
			    &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
}

Test(activation, annotation_mode)
{
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(ORH_ACTIVATE_ANNOTATION, NULL, &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_eq(decide(ORH_ACTIVATE_ANNOTATION, "{\"other\":\"x\"}", &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	/* A preset alone does not ask for activation. */
	cr_assert_eq(decide(ORH_ACTIVATE_ANNOTATION, "{\"oci-rdma-hook/preset\":\"roce\"}", &res,
			    &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_eq(decide(ORH_ACTIVATE_ANNOTATION, "{\"oci-rdma-hook/enable\":\"true\"}", &res,
			    &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
}

Test(activation, opt_out_wins_over_bad_preset)
{
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(ORH_ACTIVATE_ALWAYS,
			    "{\"oci-rdma-hook/enable\":\"false\","
			    "\"oci-rdma-hook/preset\":\"/etc/passwd\"}", &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_not(facts.has_preset);
}

Test(activation, preset)
{
	enum orh_activation_result res = ORH_ACT_SKIP;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(ORH_ACTIVATE_ALWAYS, "{\"oci-rdma-hook/preset\":\"infiniband\"}",
			    &res, &facts, &err), 0, "%s", err.msg);
	cr_assert_eq(res, ORH_ACT_DEFAULT);
	cr_assert(facts.has_preset);
	cr_assert_eq(facts.preset, ORH_PRESET_INFINIBAND);

	cr_assert_eq(decide(ORH_ACTIVATE_ANNOTATION,
			    "{\"oci-rdma-hook/enable\":\"true\",\"oci-rdma-hook/preset\":\"none\"}",
			    &res, &facts, &err), 0, "%s", err.msg);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert(facts.has_preset);
	cr_assert_eq(facts.preset, ORH_PRESET_NONE);
}

Test(activation, bad_values_name_the_annotation)
{
	static const char *const bad[] = {
		"{\"oci-rdma-hook/enable\":\"yes\"}",
		"{\"oci-rdma-hook/enable\":\"TRUE\"}",
		"{\"oci-rdma-hook/enable\":true}",
		"{\"oci-rdma-hook/preset\":\"/usr/lib/libevil.so\"}",
		"{\"oci-rdma-hook/preset\":\"../roce\"}",
		"{\"oci-rdma-hook/preset\":\"roce,infiniband\"}",
		"{\"oci-rdma-hook/preset\":\"nosuchpreset\"}",
		"{\"oci-rdma-hook/preset\":\"\"}",
		"{\"oci-rdma-hook/preset\":\"ROCE\"}",
	};

	for (size_t i = 0; i < ORH_ARRAY_SIZE(bad); i++) {
		enum orh_activation_result res = ORH_ACT_DEFAULT;
		struct orh_container_facts facts;
		struct orh_err err = { 0 };
		int r = decide(ORH_ACTIVATE_ALWAYS, bad[i], &res, &facts, &err);

		cr_assert_eq(r, -EINVAL, "case %zu (%s): %d", i, bad[i], r);
		cr_assert_eq(res, ORH_ACT_SKIP, "case %zu", i);
		cr_assert_not(facts.has_preset, "case %zu", i);
		cr_assert_not_null(strstr(err.msg, "annotation 'oci-rdma-hook/"), "case %zu: %s",
				   i, err.msg);
	}
}

Test(activation, annotations_not_an_object)
{
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide(ORH_ACTIVATE_ALWAYS, "[]", &res, &facts, &err), -EINVAL);
	cr_assert_eq(res, ORH_ACT_SKIP);
}

/* ---- the facts a spec gives, and the activation rules that use them -------------- */

static void facts_of(const char *spec, struct orh_container_facts *f)
{
	json_t *j = ann(spec);

	memset(f, 0, sizeof(*f));
	orh_container_facts_read(j, NULL, f);
	/* nvidia_visible points into the spec: copy what the tests look at */
	json_decref(j);
}

Test(facts, devices_by_number_and_the_gpu_variable)
{
	struct orh_container_facts f;
	json_t *j = ann("{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=0\",\"A=1\","
			"\"NVIDIA_VISIBLE_DEVICES=2,3\"]},\"linux\":{\"devices\":["
			"{\"path\":\"/dev/infiniband/uverbs2\",\"type\":\"c\",\"major\":231,\"minor\":194},"
			"{\"path\":\"/dev/sda\",\"type\":\"b\",\"major\":8,\"minor\":0},"
			"{\"path\":\"/dev/x\",\"type\":\"c\",\"major\":-1,\"minor\":0},"
			"{\"path\":\"/dev/nvidia3\",\"type\":\"c\",\"major\":195,\"minor\":3}]}}");

	memset(&f, 0, sizeof(f));
	orh_container_facts_read(j, NULL, &f);
	cr_assert_eq(f.n_devs, 2, "block and malformed entries are not facts");
	cr_assert_eq(f.devs[0].major, 231);
	cr_assert_eq(f.devs[0].minor, 194);
	cr_assert_eq(f.devs[1].major, 195);
	cr_assert_str_eq(f.nvidia_visible, "2,3", "the last definition wins");
	cr_assert(orh_facts_hold_rdma(&f));
	cr_assert_not(f.sandbox);
	json_decref(j);
}

Test(facts, pod_sandboxes_of_containerd_and_cri_o)
{
	struct orh_container_facts f;

	facts_of("{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\"}}", &f);
	cr_assert(f.sandbox);
	facts_of("{\"annotations\":{\"io.kubernetes.cri-o.ContainerType\":\"sandbox\"}}", &f);
	cr_assert(f.sandbox);
	facts_of("{\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\"}}", &f);
	cr_assert_not(f.sandbox);
	facts_of("{}", &f);
	cr_assert_not(f.sandbox);
}

Test(activation, a_pod_sandbox_is_never_served)
{
	struct orh_config cfg;
	struct orh_container_facts facts;
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_err err = { 0 };
	json_t *a = ann("{\"oci-rdma-hook/enable\":\"true\"}");

	memset(&cfg, 0, sizeof(cfg));
	memset(&facts, 0, sizeof(facts));
	facts.sandbox = true;
	cr_assert_eq(orh_activation_decide(&cfg, a, &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP, "not even when it asks");
	json_decref(a);
}

Test(activation, devices_mode_serves_containers_holding_rdma_nodes)
{
	struct orh_config cfg;
	struct orh_container_facts facts;
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_err err = { 0 };

	memset(&cfg, 0, sizeof(cfg));
	cfg.activation = ORH_ACTIVATE_DEVICES;
	memset(&facts, 0, sizeof(facts));
	cr_assert_eq(orh_activation_decide(&cfg, NULL, &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	facts.devs[facts.n_devs++] = (struct orh_devnum){ 195, 0 };
	cr_assert_eq(orh_activation_decide(&cfg, NULL, &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP, "a GPU alone is no RDMA device");
	facts.devs[facts.n_devs++] = (struct orh_devnum){ 231, 193 };
	cr_assert_eq(orh_activation_decide(&cfg, NULL, &res, &facts, &err), 0);
	cr_assert_eq(res, ORH_ACT_DEFAULT);
}
