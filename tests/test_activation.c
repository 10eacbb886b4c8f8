/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/decide/activation.c and facts.c: whether a container is served, from
 * its annotations, its process.env and the facts its spec gives. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide/activation.h"
#include "orh/decide/oci.h"

static json_t *ann(const char *s)
{
	json_error_t jerr;
	json_t *j = json_loads(s, 0, &jerr);

	cr_assert_not_null(j, "%s", jerr.text);
	return j;
}

/* The decision for annotations and a process.env (JSON texts, NULL: absent), with
 * request_env as given; what it warned about in *warnings (may be NULL). */
static int decide_env(enum orh_activation mode, bool request_env, const char *annotations,
		      const char *env, enum orh_activation_result *res,
		      struct orh_container_facts *facts, struct orh_strv *warnings,
		      struct orh_err *err)
{
	struct orh_config cfg;
	json_t *a = annotations ? ann(annotations) : NULL;
	json_t *e = env ? ann(env) : NULL;
	int r;

	memset(&cfg, 0, sizeof(cfg));
	cfg.activation = mode;
	cfg.request_env = request_env;
	memset(facts, 0, sizeof(*facts));
	r = orh_activation_decide(&cfg, a, e, res, NULL, facts, warnings, err);
	if (a)
		json_decref(a);
	if (e)
		json_decref(e);
	return r;
}

static int decide(enum orh_activation mode, const char *annotations,
		  enum orh_activation_result *res, struct orh_container_facts *facts,
		  struct orh_err *err)
{
	return decide_env(mode, true, annotations, NULL, res, facts, NULL, err);
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
	cr_assert_eq(orh_activation_decide(&cfg, a, NULL, &res, NULL, &facts, NULL, &err), 0);
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
	cr_assert_eq(orh_activation_decide(&cfg, NULL, NULL, &res, NULL, &facts, NULL, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	facts.devs[facts.n_devs++] = (struct orh_devnum){ 195, 0 };
	cr_assert_eq(orh_activation_decide(&cfg, NULL, NULL, &res, NULL, &facts, NULL, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP, "a GPU alone is no RDMA device");
	facts.devs[facts.n_devs++] = (struct orh_devnum){ 231, 193 };
	cr_assert_eq(orh_activation_decide(&cfg, NULL, NULL, &res, NULL, &facts, NULL, &err), 0);
	cr_assert_eq(res, ORH_ACT_DEFAULT);
}

/* ---- the same request in process.env (OCI_RDMA_HOOK_ENABLE, OCI_RDMA_HOOK_PRESET) ---- */

Test(activation_env, asks_like_the_annotation)
{
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_container_facts facts;
	struct orh_strv w = { 0 };
	struct orh_err err = { 0 };

	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, NULL,
				"[\"PATH=/bin\",\"OCI_RDMA_HOOK_ENABLE=true\"]", &res, &facts, &w,
				&err), 0, "%s", err.msg);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_not(facts.has_preset);
	/* the state's annotations are {} and the spec's absent: the env still asks */
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, "{}",
				"[\"OCI_RDMA_HOOK_ENABLE=true\"]", &res, &facts, &w, &err), 0);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(decide_env(ORH_ACTIVATE_ALWAYS, true, NULL,
				"[\"OCI_RDMA_HOOK_ENABLE=false\"]", &res, &facts, &w, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_eq(w.n, 0);
	/* other names, and names that only start or end alike, ask for nothing */
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, NULL,
				"[\"OCI_RDMA_HOOK_ENABLEX=true\",\"XOCI_RDMA_HOOK_ENABLE=true\","
				"\"oci_rdma_hook_enable=true\",\"PATH=/bin\"]", &res, &facts, &w,
				&err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, NULL, "[]", &res, &facts, &w, &err),
		     0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	/* a preset alone does not ask */
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, NULL,
				"[\"OCI_RDMA_HOOK_PRESET=roce\"]", &res, &facts, &w, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_eq(w.n, 0);
}

Test(activation_env, preset)
{
	enum orh_activation_result res = ORH_ACT_SKIP;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide_env(ORH_ACTIVATE_ALWAYS, true, NULL,
				"[\"OCI_RDMA_HOOK_PRESET=infiniband\"]", &res, &facts, NULL, &err),
		     0, "%s", err.msg);
	cr_assert_eq(res, ORH_ACT_DEFAULT);
	cr_assert(facts.has_preset);
	cr_assert_eq(facts.preset, ORH_PRESET_INFINIBAND);
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, NULL,
				"[\"OCI_RDMA_HOOK_ENABLE=true\",\"OCI_RDMA_HOOK_PRESET=none\"]",
				&res, &facts, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(facts.preset, ORH_PRESET_NONE);
	/* the annotation asks, the variable picks the preset: each field on its own */
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, "{\"oci-rdma-hook/enable\":\"true\"}",
				"[\"OCI_RDMA_HOOK_PRESET=erdma\"]", &res, &facts, NULL, &err), 0);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(facts.preset, ORH_PRESET_ERDMA);
}

Test(activation_env, the_annotation_wins_and_the_conflict_is_named)
{
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_container_facts facts;
	struct orh_strv w = { 0 };
	struct orh_err err = { 0 };

	cr_assert_eq(decide_env(ORH_ACTIVATE_ALWAYS, true, "{\"oci-rdma-hook/enable\":\"false\"}",
				"[\"OCI_RDMA_HOOK_ENABLE=true\"]", &res, &facts, &w, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_eq(w.n, 1);
	cr_assert_str_eq(w.v[0], "process.env entry 'OCI_RDMA_HOOK_ENABLE=true' ignored: the "
				 "annotation 'oci-rdma-hook/enable=false' is set, and wins");
	orh_strv_free(&w);

	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true,
				"{\"oci-rdma-hook/enable\":\"true\",\"oci-rdma-hook/preset\":\"roce\"}",
				"[\"OCI_RDMA_HOOK_ENABLE=false\",\"OCI_RDMA_HOOK_PRESET=none\"]", &res,
				&facts, &w, &err), 0, "%s", err.msg);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(facts.preset, ORH_PRESET_ROCE);
	cr_assert_eq(w.n, 2);
	cr_assert(strstr(w.v[0], "'OCI_RDMA_HOOK_ENABLE=false' ignored"), "%s", w.v[0]);
	cr_assert(strstr(w.v[1], "'OCI_RDMA_HOOK_PRESET=none' ignored: the annotation "
				 "'oci-rdma-hook/preset=roce' is set"), "%s", w.v[1]);
	orh_strv_free(&w);

	/* the losing variable is not checked: it is not used */
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, "{\"oci-rdma-hook/enable\":\"true\"}",
				"[\"OCI_RDMA_HOOK_ENABLE=/etc/passwd\"]", &res, &facts, &w, &err), 0);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(w.n, 1);
	orh_strv_free(&w);

	/* the same value twice is no conflict */
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, "{\"oci-rdma-hook/enable\":\"true\"}",
				"[\"OCI_RDMA_HOOK_ENABLE=true\"]", &res, &facts, &w, &err), 0);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(w.n, 0);
}

Test(activation_env, the_last_entry_wins)
{
	enum orh_activation_result res = ORH_ACT_SKIP;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, true, NULL,
				"[\"OCI_RDMA_HOOK_ENABLE=false\",\"OCI_RDMA_HOOK_ENABLE=true\"]",
				&res, &facts, NULL, &err), 0);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(decide_env(ORH_ACTIVATE_ALWAYS, true, NULL,
				"[\"OCI_RDMA_HOOK_ENABLE=yes\",\"OCI_RDMA_HOOK_ENABLE=false\"]",
				&res, &facts, NULL, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
}

Test(activation_env, bad_values_name_the_entry)
{
	static const char *const bad[] = {
		"[\"OCI_RDMA_HOOK_ENABLE=yes\"]",
		"[\"OCI_RDMA_HOOK_ENABLE=TRUE\"]",
		"[\"OCI_RDMA_HOOK_ENABLE=\"]",
		"[\"OCI_RDMA_HOOK_ENABLE\"]",
		"[\"OCI_RDMA_HOOK_ENABLE=true \"]",
		"[\"OCI_RDMA_HOOK_PRESET=/usr/lib/libevil.so\"]",
		"[\"OCI_RDMA_HOOK_PRESET=../roce\"]",
		"[\"OCI_RDMA_HOOK_PRESET=roce,infiniband\"]",
		"[\"OCI_RDMA_HOOK_PRESET=nosuchpreset\"]",
		"[\"OCI_RDMA_HOOK_PRESET=\"]",
		"[\"OCI_RDMA_HOOK_PRESET\"]",
		"[\"OCI_RDMA_HOOK_PRESET=ROCE\"]",
		/* 64 bytes: read, and unknown */
		"[\"OCI_RDMA_HOOK_PRESET=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]",
		/* 65 bytes: not read */
		"[\"OCI_RDMA_HOOK_PRESET=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]",
	};
	static const char *const why[] = {
		"'OCI_RDMA_HOOK_ENABLE': value 'yes' is neither 'true' nor 'false'",
		"'OCI_RDMA_HOOK_ENABLE': value 'TRUE' is neither",
		"'OCI_RDMA_HOOK_ENABLE': value '' is neither",
		"'OCI_RDMA_HOOK_ENABLE': no value (not NAME=VALUE)",
		"'OCI_RDMA_HOOK_ENABLE': value 'true ' is neither",
		"'OCI_RDMA_HOOK_PRESET': unknown preset '/usr/lib/libevil.so'",
		"'OCI_RDMA_HOOK_PRESET': unknown preset '../roce'",
		"'OCI_RDMA_HOOK_PRESET': unknown preset 'roce,infiniband'",
		"'OCI_RDMA_HOOK_PRESET': unknown preset 'nosuchpreset'",
		"'OCI_RDMA_HOOK_PRESET': unknown preset ''",
		"'OCI_RDMA_HOOK_PRESET': no value",
		"'OCI_RDMA_HOOK_PRESET': unknown preset 'ROCE'",
		"'OCI_RDMA_HOOK_PRESET': unknown preset 'aaaa",
		"'OCI_RDMA_HOOK_PRESET': value is not acceptable",
	};

	for (size_t i = 0; i < ORH_ARRAY_SIZE(bad); i++) {
		enum orh_activation_result res = ORH_ACT_DEFAULT;
		struct orh_container_facts facts;
		struct orh_err err = { 0 };
		int r = decide_env(ORH_ACTIVATE_ALWAYS, true, NULL, bad[i], &res, &facts, NULL,
				   &err);

		cr_assert_eq(r, -EINVAL, "case %zu (%s): %d", i, bad[i], r);
		cr_assert_eq(res, ORH_ACT_SKIP, "case %zu", i);
		cr_assert_not(facts.has_preset, "case %zu", i);
		cr_assert(strstr(err.msg, "process.env entry "), "case %zu: %s", i, err.msg);
		cr_assert(strstr(err.msg, why[i]), "case %zu: '%s' lacks '%s'", i, err.msg, why[i]);
	}
}

Test(activation_env, opt_out_wins_over_bad_preset)
{
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide_env(ORH_ACTIVATE_ALWAYS, true, NULL,
				"[\"OCI_RDMA_HOOK_ENABLE=false\",\"OCI_RDMA_HOOK_PRESET=/etc/passwd\"]",
				&res, &facts, NULL, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_not(facts.has_preset);
}

Test(activation_env, request_env_no_reads_only_annotations)
{
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_container_facts facts;
	struct orh_strv w = { 0 };
	struct orh_err err = { 0 };

	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, false, NULL,
				"[\"OCI_RDMA_HOOK_ENABLE=true\"]", &res, &facts, &w, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP);
	cr_assert_eq(w.n, 1);
	cr_assert_str_eq(w.v[0], "process.env entry 'OCI_RDMA_HOOK_ENABLE' ignored: the node "
				 "config has request_env = no");
	orh_strv_free(&w);
	/* a bad value is not read, so not an error; the opt-out is not read either */
	cr_assert_eq(decide_env(ORH_ACTIVATE_ALWAYS, false, NULL,
				"[\"OCI_RDMA_HOOK_ENABLE=false\",\"OCI_RDMA_HOOK_PRESET=../x\"]",
				&res, &facts, &w, &err), 0, "%s", err.msg);
	cr_assert_eq(res, ORH_ACT_DEFAULT);
	cr_assert_not(facts.has_preset);
	cr_assert_eq(w.n, 2);
	orh_strv_free(&w);
	/* the annotations still count */
	cr_assert_eq(decide_env(ORH_ACTIVATE_ANNOTATION, false, "{\"oci-rdma-hook/enable\":\"true\"}",
				"[\"PATH=/bin\"]", &res, &facts, &w, &err), 0);
	cr_assert_eq(res, ORH_ACT_REQUESTED);
	cr_assert_eq(w.n, 0);
}

Test(activation_env, env_not_an_array)
{
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_container_facts facts;
	struct orh_err err = { 0 };

	cr_assert_eq(decide_env(ORH_ACTIVATE_ALWAYS, true, NULL, "{}", &res, &facts, NULL, &err),
		     -EINVAL);
	cr_assert(strstr(err.msg, "process.env"), "%s", err.msg);
	cr_assert_eq(res, ORH_ACT_SKIP);
}

static bool asked(bool request_env, const char *annotations, const char *env)
{
	struct orh_config cfg;
	json_t *a = annotations ? ann(annotations) : NULL;
	json_t *e = env ? ann(env) : NULL;
	bool r;

	memset(&cfg, 0, sizeof(cfg));
	cfg.activation = ORH_ACTIVATE_ANNOTATION;
	cfg.request_env = request_env;
	r = orh_activation_asked(&cfg, a, e);
	if (a)
		json_decref(a);
	if (e)
		json_decref(e);
	return r;
}

/* on_error = fail applies to a container that asked, by either means */
Test(activation_env, asked)
{
	cr_assert_not(asked(true, NULL, NULL));
	cr_assert_not(asked(true, "{}", "[\"PATH=/bin\"]"));
	cr_assert(asked(true, "{\"oci-rdma-hook/enable\":\"true\"}", NULL));
	cr_assert(asked(true, "{\"oci-rdma-hook/enable\":\"yes\"}", NULL));
	cr_assert_not(asked(true, "{\"oci-rdma-hook/enable\":\"false\"}", NULL));
	cr_assert(asked(true, NULL, "[\"OCI_RDMA_HOOK_ENABLE=true\"]"));
	cr_assert(asked(true, NULL, "[\"OCI_RDMA_HOOK_ENABLE=yes\"]"));
	cr_assert(asked(true, NULL, "[\"OCI_RDMA_HOOK_ENABLE\"]"));
	cr_assert_not(asked(true, NULL, "[\"OCI_RDMA_HOOK_ENABLE=false\"]"));
	cr_assert_not(asked(true, NULL, "[\"OCI_RDMA_HOOK_PRESET=roce\"]"));
	/* the annotation wins */
	cr_assert_not(asked(true, "{\"oci-rdma-hook/enable\":\"false\"}",
			    "[\"OCI_RDMA_HOOK_ENABLE=true\"]"));
	cr_assert(asked(true, "{\"oci-rdma-hook/enable\":\"true\"}",
			"[\"OCI_RDMA_HOOK_ENABLE=false\"]"));
	/* request_env = no: the variable is not a request */
	cr_assert_not(asked(false, NULL, "[\"OCI_RDMA_HOOK_ENABLE=true\"]"));
}

/* which field decides, for the log's "why" */
Test(activation_env, enable_field)
{
	struct orh_config cfg;
	json_t *a = ann("{\"oci-rdma-hook/enable\":\"false\"}");
	json_t *e = ann("[\"OCI_RDMA_HOOK_ENABLE=false\"]");
	bool is_asked = true;

	memset(&cfg, 0, sizeof(cfg));
	cfg.request_env = true;
	cr_assert_str_eq(orh_activation_enable_field(&cfg, a, e, &is_asked), ORH_ANNOTATION_ENABLE);
	cr_assert_not(is_asked);
	cr_assert_str_eq(orh_activation_enable_field(&cfg, NULL, e, &is_asked), ORH_ENV_ENABLE);
	cr_assert_not(is_asked);
	cr_assert_null(orh_activation_enable_field(&cfg, NULL, NULL, &is_asked));
	cfg.request_env = false;
	cr_assert_null(orh_activation_enable_field(&cfg, NULL, e, &is_asked));
	json_decref(a);
	json_decref(e);
}

Test(activation_env, a_pod_sandbox_is_never_served)
{
	struct orh_config cfg;
	struct orh_container_facts facts;
	enum orh_activation_result res = ORH_ACT_DEFAULT;
	struct orh_err err = { 0 };
	json_t *e = ann("[\"OCI_RDMA_HOOK_ENABLE=true\"]");

	memset(&cfg, 0, sizeof(cfg));
	cfg.request_env = true;
	memset(&facts, 0, sizeof(facts));
	facts.sandbox = true;
	cr_assert_eq(orh_activation_decide(&cfg, NULL, e, &res, NULL, &facts, NULL, &err), 0);
	cr_assert_eq(res, ORH_ACT_SKIP, "not even when its environment asks");
	json_decref(e);
}
