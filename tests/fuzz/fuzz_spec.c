/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the bundle's config.json reader, the questions asked of it, and the spec
 * edit of precreate and the runtime shim. Each input is parsed, edited with a plan
 * (orh_spec_apply_plan()), dumped, parsed and edited again:
 *  - every error carries a message, and a spec orh_spec_parse() accepted is always edited;
 *  - the dump is a JSON object that jansson reads strictly (no NUL escapes, no number it
 *    cannot hold), and that orh_spec_parse() accepts;
 *  - the second edit changes nothing (idempotence), and dumping again gives the same
 *    bytes; an edit that reports no change leaves the dump as it was.
 * And where the runtime shim's fast path tells a pod's sandbox from the same bytes, jansson
 * finds one too.
 * The plan is the full one (devices, unlimited memlock, variables, CAP_IPC_LOCK), then
 * one of 128 smaller ones chosen by a hash of the input, so the corpus stays plain JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/decide/activation.h"
#include "orh/decide/oci.h"
#include "orh/cmd/shimfast.h"
#include "orh/apply/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct orh_devnode nodes[] = {
	{ "/dev/infiniband/uverbs1", 231, 193, 0666, ORH_CHARDEV_UVERBS, NULL },
	{ "/dev/infiniband/rdma_cm", 10, 58, 0666, ORH_CHARDEV_RDMA_CM, NULL },
	{ "/dev/infiniband/uverbs8", 231, 200, 0666, ORH_CHARDEV_UVERBS, NULL },
};

static char n_hca[] = "NCCL_IB_HCA", v_hca[] = "=mlx5_1:1,mlx5_2:1";
static char n_if[] = "NCCL_SOCKET_IFNAME", v_if[] = "=eth0";
static char n_odd[] = "NCCL_TEST_ODD", v_odd[] = "a\"b\\c=d \xc3\xa9 \\u0000orh-u64:1";
static char n_gid[] = "NCCL_IB_GID_INDEX", v_gid[] = "3";
static struct orh_env_entry env[] = {
	{ n_hca, v_hca, NULL },
	{ n_if, v_if, NULL },
	{ n_odd, v_odd, NULL },
	{ n_gid, v_gid, NULL },
};

static const uint64_t memlocks[] = { 0, 64ULL << 20, ORH_MEMLOCK_UNLIMITED,
				     (uint64_t)INT64_MAX + 1 };

/* Plan sel: bits 0-1 the number of nodes, 2-3 memlock (none, 64 MiB, unlimited, just above
 * INT64_MAX), 4-5 how many variables from the third, 6 CAP_IPC_LOCK, 7 our nccl-conf and
 * poststop hooks; 0xff: everything. */
static void plan_of(unsigned sel, struct orh_plan *plan, struct orh_spec_opts *opts)
{
	static struct orh_memlock_verdict memlock;

	memset(&memlock, 0, sizeof(memlock));
	memset(plan, 0, sizeof(*plan));
	memset(opts, 0, sizeof(*opts));
	if ((sel >> 7) & 1) {
		static json_t *nccl_hook, *poststop_hook;

		if (!nccl_hook) {
			nccl_hook = json_pack("{s:s, s:[s, s], s:i}", "path", "/usr/bin/oci-rdma-hook",
					      "args", "oci-rdma-hook", "nccl-conf", "timeout", 30);
			poststop_hook = json_pack("{s:s, s:[s, s]}", "path", "/usr/bin/oci-rdma-hook",
						  "args", "oci-rdma-hook", "poststop");
		}
		opts->nccl_hook = nccl_hook;
		opts->poststop_hook = poststop_hook;
	}
	if (sel == 0xff) {
		plan->nodes = nodes;
		plan->n_nodes = ORH_ARRAY_SIZE(nodes);
		memlock.set = true;
		memlock.limit = ORH_MEMLOCK_UNLIMITED;
		opts->memlock = &memlock;
		plan->env = env;
		plan->n_env = ORH_ARRAY_SIZE(env);
		opts->add_ipc_lock = true;
		return;
	}
	plan->nodes = nodes;
	plan->n_nodes = sel & 3;
	if (plan->n_nodes > ORH_ARRAY_SIZE(nodes))
		plan->n_nodes = ORH_ARRAY_SIZE(nodes);
	memlock.set = ((sel >> 2) & 3) != 0;
	memlock.limit = memlocks[(sel >> 2) & 3];
	opts->memlock = &memlock;
	plan->n_env = (sel >> 4) & 3;
	plan->env = env + (ORH_ARRAY_SIZE(env) - plan->n_env);
	opts->add_ipc_lock = (sel >> 6) & 1;
}

/* Parse text (len bytes) as the precreate hook and the shim do; NULL when refused. */
static json_t *parse(const char *text, size_t len)
{
	struct orh_err err = { 0 };
	json_t *spec = NULL;

	if (orh_spec_parse(text, len, "config.json", &spec, &err) < 0) {
		if (err.msg[0] == '\0')
			abort();
		return NULL;
	}
	return spec;
}

static char *dump(const json_t *spec, size_t *len)
{
	struct orh_err err = { 0 };
	char *out = NULL;

	if (orh_spec_dump(spec, &out, len, &err) < 0)
		abort(); /* a spec orh_spec_parse() accepted always serialises */
	return out;
}

/* Strict JSON: jansson with its defaults (no NUL escape), integers read as reals so
 * that values up to 2^64-1 count; the document is an object. */
static void assert_valid_json(const char *text, size_t len)
{
	json_error_t jerr;
	json_t *j = json_loadb(text, len, JSON_DECODE_INT_AS_REAL | JSON_REJECT_DUPLICATES, &jerr);

	if (!j || !json_is_object(j))
		abort();
	json_decref(j);
}

/* parse -> apply -> dump -> parse -> apply: the second apply changes nothing. */
static void round_trip(const uint8_t *data, size_t size, unsigned sel)
{
	struct orh_plan plan;
	struct orh_spec_opts opts;
	struct orh_err err = { 0 };
	json_t *spec = parse((const char *)data, size), *again = NULL;
	char *before = NULL, *first = NULL, *second = NULL;
	size_t before_len = 0, first_len = 0, second_len = 0;
	int r;

	if (!spec)
		return;
	plan_of(sel, &plan, &opts);
	before = dump(spec, &before_len);
	r = orh_spec_apply_plan(spec, &plan, &opts, NULL, &err);
	if (r < 0)
		abort(); /* orh_spec_parse() checked every part the edit touches */
	first = dump(spec, &first_len);
	assert_valid_json(first, first_len);
	if (r == 0 && (first_len != before_len || memcmp(first, before, first_len) != 0))
		abort(); /* "no edit" and yet the spec changed */
	again = parse(first, first_len);
	if (!again)
		abort(); /* the edited spec must be one the hook itself accepts */
	memset(&err, 0, sizeof(err));
	if (orh_spec_apply_plan(again, &plan, &opts, NULL, &err) != 0)
		abort(); /* not idempotent, or the edit refuses its own output */
	second = dump(again, &second_len);
	if (second_len != first_len || memcmp(second, first, first_len) != 0)
		abort();
	free(before);
	free(first);
	free(second);
	if (again)
		json_decref(again);
	json_decref(spec);
}

static unsigned hash(const uint8_t *data, size_t size)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 16777619u;
	return (h ^ (h >> 16)) & 0x7f;
}

/* The runtime shim's fast path tells a sandbox from the text (orh_shim_spec_sandbox());
 * where it does, jansson's reading of the same bytes (the laxest: a key twice, the last
 * wins) fails or finds a sandbox too. */
static void sandbox_agrees(const uint8_t *data, size_t size)
{
	struct orh_container_facts facts = { 0 };
	json_t *j;

	if (!orh_shim_spec_sandbox((const char *)data, size))
		return;
	j = json_loadb((const char *)data, size, 0, NULL);
	if (!j)
		return;
	orh_container_facts_read(j, NULL, &facts);
	if (!facts.sandbox)
		abort();
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *spec = NULL;
	struct orh_config cfg;
	struct orh_container_facts facts = { 0 };
	enum orh_activation_result act;
	struct orh_strv warnings = { 0 };
	struct orh_err err = { 0 };
	bool has_netns = false;
	const char *path = NULL;

	sandbox_agrees(data, size);
	spec = parse((const char *)data, size);
	if (!spec)
		return 0;
	orh_config_defaults(&cfg);
	orh_activation_decide(&cfg, json_object_get(spec, "annotations"), orh_spec_env(spec), &act,
			      NULL, &facts, &warnings, &err);
	orh_activation_asked(&cfg, json_object_get(spec, "annotations"), orh_spec_env(spec));
	orh_strv_free(&warnings);
	orh_spec_env_has(spec, "NCCL_IB_HCA");
	orh_spec_netns(spec, &has_netns, &path);
	orh_config_free(&cfg);
	json_decref(spec);

	round_trip(data, size, 0xff);
	round_trip(data, size, hash(data, size));
	return 0;
}
