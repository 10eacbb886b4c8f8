/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/apply/spec.c and jsonu64.c: one test per rule of the edit. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orh/decide/oci.h"
#include "orh/apply/spec.h"
#include "orh/apply/apply.h"

/* A plan as the planner makes it for a node with two HCAs. */
static struct orh_devnode nodes[] = {
	{ .path = "/dev/infiniband/uverbs0", .major = 231, .minor = 192, .mode = 0666,
	  .kind = ORH_CHARDEV_UVERBS },
	{ .path = "/dev/infiniband/uverbs1", .major = 231, .minor = 193, .mode = 0666,
	  .kind = ORH_CHARDEV_UVERBS },
	{ .path = "/dev/infiniband/rdma_cm", .major = 10, .minor = 58, .mode = 0666,
	  .kind = ORH_CHARDEV_RDMA_CM },
};
static struct orh_env_entry env[] = {
	{ "NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1", "rule 3" },
	{ "NCCL_IB_GID_INDEX", "3", "rule 4" },
	{ "NCCL_SOCKET_IFNAME", "=eth0", "rule 5" },
};

/* the decision's memlock that test_plan() goes with (orh_spec_opts.memlock) */
static struct orh_memlock_verdict ml;
static const struct orh_spec_opts ml_opts = { .memlock = &ml };

static struct orh_plan test_plan(uint64_t memlock)
{
	struct orh_plan p;

	memset(&p, 0, sizeof(p));
	p.nodes = nodes;
	p.n_nodes = ORH_ARRAY_SIZE(nodes);
	ml = (struct orh_memlock_verdict){ .set = true, .limit = memlock };
	p.env = env;
	p.n_env = ORH_ARRAY_SIZE(env);
	p.preset = ORH_PRESET_ROCE;
	return p;
}

static json_t *spec_of(const char *s)
{
	struct orh_err err = { 0 };
	json_t *spec = NULL;

	cr_assert_eq(orh_spec_parse(s, strlen(s), "test.json", &spec, &err), 0, "%s", err.msg);
	return spec;
}

/* The runtime's usual shape: deny-all first, capabilities present. */
static const char base_spec[] =
	"{\"ociVersion\":\"1.0.2\","
	"\"process\":{\"args\":[\"sh\"],\"env\":[\"PATH=/bin\",\"TERM=xterm\"],"
	"\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"hard\":1024,\"soft\":1024}],"
	"\"capabilities\":{\"bounding\":[\"CAP_CHOWN\"],\"effective\":[\"CAP_CHOWN\"],"
	"\"permitted\":[\"CAP_CHOWN\"],\"inheritable\":[],\"ambient\":[]}},"
	"\"linux\":{\"devices\":[{\"path\":\"/dev/fuse\",\"type\":\"c\",\"major\":10,\"minor\":229}],"
	"\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}]},"
	"\"namespaces\":[{\"type\":\"mount\"}]}}";

static char *dump(const json_t *spec)
{
	struct orh_err err = { 0 };
	char *s = NULL;

	cr_assert_eq(orh_spec_dump(spec, &s, NULL, &err), 0, "%s", err.msg);
	return s;
}

static json_t *find_by(const json_t *array, const char *key, const char *value)
{
	size_t i = 0;
	json_t *e = NULL;

	json_array_foreach(array, i, e) {
		const json_t *v = json_object_get(e, key);

		if (json_is_string(v) && !strcmp(json_string_value(v), value))
			return e;
	}
	return NULL;
}

static json_t *path(json_t *spec, const char *a, const char *b)
{
	json_t *x = json_object_get(spec, a);

	return b ? json_object_get(x, b) : x;
}

static json_int_t ival(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	cr_assert(json_is_integer(v), "'%s' is not an integer", key);
	return json_integer_value(v);
}

Test(spec_apply, devices_added_with_owner_and_mode)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);
	json_t *devs = NULL, *d = NULL;

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.devices, 3);
	devs = json_object_get(path(spec, "linux", NULL), "devices");
	cr_assert_eq(json_array_size(devs), 4);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(devs, 0), "path")),
			 "/dev/fuse", "existing entries stay first");
	d = find_by(devs, "path", "/dev/infiniband/uverbs1");
	cr_assert_not_null(d);
	cr_assert_str_eq(json_string_value(json_object_get(d, "type")), "c");
	cr_assert_eq(ival(d, "major"), 231);
	cr_assert_eq(ival(d, "minor"), 193);
	cr_assert_eq(ival(d, "fileMode"), 0666);
	cr_assert_eq(ival(d, "uid"), 0);
	cr_assert_eq(ival(d, "gid"), 0);
	d = find_by(devs, "path", "/dev/infiniband/rdma_cm");
	cr_assert_eq(ival(d, "major"), 10);
	cr_assert_eq(ival(d, "minor"), 58);
	json_decref(spec);
}

Test(spec_apply, device_listed_by_path_is_kept)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"linux\":{\"devices\":[{\"path\":\"/dev/infiniband/uverbs0\","
			       "\"type\":\"c\",\"major\":231,\"minor\":192,\"fileMode\":384}]}}");
	json_t *devs = NULL, *d = NULL;

	cr_assert_geq(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.devices, 2);
	devs = json_object_get(path(spec, "linux", NULL), "devices");
	cr_assert_eq(json_array_size(devs), 3);
	d = find_by(devs, "path", "/dev/infiniband/uverbs0");
	cr_assert_eq(ival(d, "fileMode"), 0600, "the user's entry is not rewritten");
	json_decref(spec);
}

/* An entry for a node's path with other numbers, or another type, is kept as the user
 * wrote it; a warning names the path, the spec's numbers and the node's. The same entry
 * with the node's numbers says nothing. */
Test(spec_apply, device_listed_with_other_numbers_is_named)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_strv warnings = { 0 };
	struct orh_spec_opts opts = { .warnings = &warnings, .memlock = &ml };
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"linux\":{\"devices\":["
			       "{\"path\":\"/dev/infiniband/uverbs1\",\"type\":\"c\","
			       "\"major\":231,\"minor\":250},"
			       "{\"path\":\"/dev/infiniband/rdma_cm\",\"type\":\"b\","
			       "\"major\":10,\"minor\":58},"
			       "{\"path\":\"/dev/infiniband/uverbs0\",\"type\":\"c\","
			       "\"major\":231,\"minor\":192}]}}");
	json_t *d = NULL;

	cr_assert_geq(orh_spec_apply_plan(spec, &plan, &opts, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(warnings.n, 2);
	cr_assert(strstr(warnings.v[0], "'/dev/infiniband/uverbs1' as c 231:250"), "%s",
		  warnings.v[0]);
	cr_assert(strstr(warnings.v[0], "the node's is c 231:193"), "%s", warnings.v[0]);
	cr_assert(strstr(warnings.v[1], "'/dev/infiniband/rdma_cm' as b 10:58, the node's is "
					"c 10:58"), "%s", warnings.v[1]);
	d = find_by(json_object_get(path(spec, "linux", NULL), "devices"), "path",
		    "/dev/infiniband/uverbs1");
	cr_assert_eq(ival(d, "minor"), 250, "the user's entry is not rewritten");
	orh_strv_free(&warnings);
	/* no warnings list: nothing to say it to, and nothing else changes */
	cr_assert_geq(orh_spec_apply_plan(spec, &plan, &ml_opts, NULL, &err), 0, "%s", err.msg);
	json_decref(spec);
}

Test(spec_apply, allow_rules_after_deny_all)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);
	json_t *rules = NULL, *r = NULL;

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.allow_rules, 3);
	rules = json_object_get(path(spec, "linux", "resources"), "devices");
	cr_assert_eq(json_array_size(rules), 4);
	cr_assert(json_is_false(json_object_get(json_array_get(rules, 0), "allow")),
		  "the runtime's deny-all stays first");
	for (size_t i = 1; i < 4; i++) {
		r = json_array_get(rules, i);
		cr_assert(json_is_true(json_object_get(r, "allow")));
		cr_assert_str_eq(json_string_value(json_object_get(r, "type")), "c");
		cr_assert_str_eq(json_string_value(json_object_get(r, "access")), "rwm");
		cr_assert_eq(ival(r, "major"), nodes[i - 1].major);
		cr_assert_eq(ival(r, "minor"), nodes[i - 1].minor);
	}
	json_decref(spec);
}

Test(spec_apply, resources_created_when_absent)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{}");
	json_t *rules = NULL;

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &ml_opts, NULL, &err), 0, "%s", err.msg);
	rules = json_object_get(path(spec, "linux", "resources"), "devices");
	cr_assert_eq(json_array_size(rules), 3);
	cr_assert_eq(json_array_size(json_object_get(path(spec, "linux", NULL), "devices")), 3);
	json_decref(spec);
}

Test(spec_apply, memlock_added)
{
	struct orh_plan plan = test_plan(64ULL << 30);
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);
	json_t *rl = NULL;

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 0, "%s", err.msg);
	cr_assert(ch.memlock);
	rl = find_by(path(spec, "process", "rlimits"), "type", "RLIMIT_MEMLOCK");
	cr_assert_not_null(rl);
	cr_assert_eq(ival(rl, "soft"), 64LL << 30);
	cr_assert_eq(ival(rl, "hard"), 64LL << 30);
	cr_assert_not_null(find_by(path(spec, "process", "rlimits"), "type", "RLIMIT_NOFILE"));
	json_decref(spec);
}

Test(spec_apply, memlock_unlimited_is_written_as_uint64_max)
{
	struct orh_plan plan = test_plan(ORH_MEMLOCK_UNLIMITED);
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"process\":{}}");
	char *s = NULL;

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &ml_opts, NULL, &err), 0, "%s", err.msg);
	s = dump(spec);
	cr_assert_not_null(strstr(s, "{\"type\":\"RLIMIT_MEMLOCK\",\"hard\":18446744073709551615,"
				     "\"soft\":18446744073709551615}"), "%s", s);
	cr_assert_null(strstr(s, "orh-u64"), "%s", s);
	free(s);
	json_decref(spec);
}

Test(spec_apply, memlock_of_the_user_stands)
{
	struct orh_plan plan = test_plan(ORH_MEMLOCK_UNLIMITED);
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"process\":{\"rlimits\":[{\"type\":\"RLIMIT_MEMLOCK\","
			       "\"hard\":65536,\"soft\":65536}]}}");
	json_t *rl = NULL;

	cr_assert_geq(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_not(ch.memlock);
	rl = path(spec, "process", "rlimits");
	cr_assert_eq(json_array_size(rl), 1);
	cr_assert_eq(ival(json_array_get(rl, 0), "hard"), 65536);
	json_decref(spec);
}

Test(spec_apply, memlock_not_set_by_plan)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);

	ml.set = false;
	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_not(ch.memlock);
	cr_assert_null(find_by(path(spec, "process", "rlimits"), "type", "RLIMIT_MEMLOCK"));
	json_decref(spec);
}

/* The hooks the spec edit registers, as orh_self_hook() makes them. */
static json_t *hook_of(const char *stage)
{
	return json_pack("{s:s, s:[s, s, s, s], s:i}", "path", "/usr/bin/oci-rdma-hook", "args",
			 "oci-rdma-hook", "--config", "/etc/x.conf", stage, "timeout", 30);
}

static size_t count_ours(json_t *spec, const char *list, const char *stage)
{
	json_t *l = json_object_get(json_object_get(spec, "hooks"), list), *e = NULL;
	size_t i = 0, n = 0;

	json_array_foreach(l, i, e) {
		json_t *args = json_object_get(e, "args");
		const char *last = json_string_value(json_array_get(args, json_array_size(args) - 1));

		if (last && !strcmp(last, stage))
			n++;
	}
	return n;
}

Test(spec_apply, nccl_settings_go_through_the_hook_not_the_environment)
{
	struct orh_plan plan = test_plan(1 << 20);
	json_t *nh = hook_of("nccl-conf"), *ph = hook_of("poststop");
	struct orh_spec_opts opts = { .nccl_hook = nh, .poststop_hook = ph, .memlock = &ml };
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);
	json_t *e = NULL;

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.hooks, 2);
	e = path(spec, "process", "env");
	cr_assert_eq(json_array_size(e), 2, "PID 1's environment is the user's alone");
	cr_assert_eq(count_ours(spec, "createRuntime", "nccl-conf"), 1);
	cr_assert_eq(count_ours(spec, "poststop", "poststop"), 1);
	cr_assert(json_equal(json_array_get(path(spec, "hooks", "createRuntime"), 0), nh));
	json_decref(nh);
	json_decref(ph);
	json_decref(spec);
}

/* Settings NCCL does not read (UCX_*) go into PID 1's environment, unless the image or
 * the user set them; NCCL's own never do. A second edit adds nothing. */
Test(spec_apply, other_settings_go_into_the_environment)
{
	static struct orh_env_entry mixed[] = {
		{ "NCCL_IB_HCA", "=mlx5_0:1", "rule 3" },
		{ "UCX_TLS", "rc,sm", "node.conf:7" },
		{ "UCX_NET_DEVICES", "mlx5_0:1", "node.conf:8" },
	};
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"process\":{\"env\":[\"PATH=/bin\",\"UCX_NET_DEVICES=all\"]}}");
	json_t *once = NULL, *e = NULL;

	plan.env = mixed;
	plan.n_env = ORH_ARRAY_SIZE(mixed);
	plan.n_nodes = 0;
	ml.set = false;
	cr_assert_eq(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 1, "%s", err.msg);
	cr_assert_eq(ch.env, 1);
	e = path(spec, "process", "env");
	cr_assert_eq(json_array_size(e), 3);
	cr_assert_str_eq(json_string_value(json_array_get(e, 1)), "UCX_NET_DEVICES=all",
			 "the user's value stands");
	cr_assert_str_eq(json_string_value(json_array_get(e, 2)), "UCX_TLS=rc,sm");
	once = json_deep_copy(spec);
	cr_assert_eq(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 0, "%s", err.msg);
	cr_assert(json_equal(spec, once));
	json_decref(once);
	json_decref(spec);
	/* a spec without process.env gets one */
	spec = spec_of("{\"process\":{\"args\":[\"sh\"]}}");
	cr_assert_eq(orh_spec_apply_plan(spec, &plan, &ml_opts, &ch, &err), 2, "%s", err.msg);
	cr_assert_eq(json_array_size(path(spec, "process", "env")), 2);
	json_decref(spec);
}

/* podman's hooks.d adds the live hook and poststop before precreate runs: the edit then
 * adds neither, whichever options and stage the registered entries name */
Test(spec_apply, no_second_hook_where_ours_is_registered)
{
	struct orh_plan plan = test_plan(1 << 20);
	json_t *nh = hook_of("nccl-conf"), *ph = hook_of("poststop");
	struct orh_spec_opts opts = { .nccl_hook = nh, .poststop_hook = ph, .memlock = &ml };
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"hooks\":{\"prestart\":[{\"path\":\"/opt/x/oci-rdma-hook\","
			       "\"args\":[\"oci-rdma-hook\",\"prestart\"]}],\"poststop\":["
			       "{\"path\":\"/bin/other\",\"args\":[\"other\",\"poststop\"]},"
			       "{\"path\":\"/usr/bin/oci-rdma-hook\",\"args\":[\"oci-rdma-hook\","
			       "\"poststop\"]}]}}");

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.hooks, 0);
	cr_assert_null(path(spec, "hooks", "createRuntime"));
	cr_assert_eq(json_array_size(path(spec, "hooks", "poststop")), 2);
	json_decref(spec);
	/* another program's hook of the same stage does not count */
	spec = spec_of("{\"hooks\":{\"createRuntime\":[{\"path\":\"/usr/bin/nvidia-ctk\","
		       "\"args\":[\"nvidia-ctk\",\"hook\",\"createRuntime\"]}]}}");
	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.hooks, 2);
	cr_assert_eq(json_array_size(path(spec, "hooks", "createRuntime")), 2);
	json_decref(nh);
	json_decref(ph);
	json_decref(spec);
}

Test(spec_apply, no_hook_without_nccl_settings)
{
	struct orh_plan plan = test_plan(1 << 20);
	json_t *nh = hook_of("nccl-conf"), *ph = hook_of("poststop");
	struct orh_spec_opts opts = { .nccl_hook = nh, .poststop_hook = ph, .memlock = &ml };
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);

	plan.n_env = 0;
	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.hooks, 0);
	cr_assert_null(json_object_get(spec, "hooks"));
	json_decref(nh);
	json_decref(ph);
	json_decref(spec);
}

Test(spec_apply, hooks_of_the_wrong_type_are_errors)
{
	struct orh_plan plan = test_plan(1 << 20);
	json_t *nh = hook_of("nccl-conf");
	struct orh_spec_opts opts = { .nccl_hook = nh, .memlock = &ml };
	struct orh_err err = { 0 };
	/* built by hand: orh_spec_parse() refuses it already, naming the field */
	json_t *spec = json_pack("{s:{s:{}}}", "hooks", "createRuntime");
	const char *text = "{\"hooks\":{\"createRuntime\":{}}}";
	json_t *parsed = NULL;

	cr_assert_eq(orh_spec_apply_plan(spec, &plan, &opts, NULL, &err), -EINVAL);
	cr_assert_not_null(strstr(err.msg, "hooks.createRuntime"), "%s", err.msg);
	memset(&err, 0, sizeof(err));
	cr_assert_eq(orh_spec_parse(text, strlen(text), "c.json", &parsed, &err), -EINVAL);
	cr_assert_not_null(strstr(err.msg, "hooks.createRuntime"), "%s", err.msg);
	json_decref(nh);
	json_decref(spec);
}

static bool has_cap(json_t *spec, const char *set)
{
	json_t *a = json_object_get(path(spec, "process", "capabilities"), set);
	size_t i = 0, n = 0;
	json_t *e = NULL;

	json_array_foreach(a, i, e)
		if (!strcmp(json_string_value(e), "CAP_IPC_LOCK"))
			n++;
	cr_assert_leq(n, 1, "CAP_IPC_LOCK listed %zu times in %s", n, set);
	return n == 1;
}

Test(spec_apply, ipc_lock_when_configured)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_spec_opts opts = { .add_ipc_lock = true, .memlock = &ml };
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.caps, 3);
	cr_assert(has_cap(spec, "bounding"));
	cr_assert(has_cap(spec, "effective"));
	cr_assert(has_cap(spec, "permitted"));
	cr_assert_not(has_cap(spec, "inheritable"));
	cr_assert_not(has_cap(spec, "ambient"));
	json_decref(spec);
}

Test(spec_apply, ipc_lock_not_without_option)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_spec_opts opts = { .add_ipc_lock = false, .memlock = &ml };
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.caps, 0);
	cr_assert_not(has_cap(spec, "bounding"));
	json_decref(spec);
}

Test(spec_apply, ipc_lock_never_creates_a_capability_set)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_spec_opts opts = { .add_ipc_lock = true, .memlock = &ml };
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"process\":{\"env\":[]}}");

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.caps, 0);
	cr_assert_null(path(spec, "process", "capabilities"),
		       "no capabilities object means the runtime keeps its default set");
	json_decref(spec);
}

/* "process": null is no process object, as orh_spec_parse() reads it: CAP_IPC_LOCK alone
 * leaves such a spec alone instead of refusing it (found by fuzz-spec). */
Test(spec_apply, ipc_lock_with_null_process_changes_nothing)
{
	struct orh_plan plan;
	struct orh_spec_opts opts = { .add_ipc_lock = true, .memlock = &ml };
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"process\":null}");
	char *s = NULL;

	memset(&plan, 0, sizeof(plan));
	cr_assert_eq(orh_spec_apply_plan(spec, &plan, &opts, NULL, &err), 0, "%s", err.msg);
	s = dump(spec);
	cr_assert_str_eq(s, "{\"process\":null}");
	free(s);
	json_decref(spec);
}

Test(spec_apply, idempotent)
{
	struct orh_plan plan = test_plan(ORH_MEMLOCK_UNLIMITED);
	json_t *nh = hook_of("nccl-conf"), *ph = hook_of("poststop");
	struct orh_spec_opts opts = { .add_ipc_lock = true, .nccl_hook = nh, .poststop_hook = ph,
				      .memlock = &ml };
	struct orh_spec_changes ch;
	struct orh_err err = { 0 };
	json_t *spec = spec_of(base_spec);
	char *once = NULL, *twice = NULL;

	cr_assert_gt(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	once = dump(spec);
	cr_assert_eq(orh_spec_apply_plan(spec, &plan, &opts, &ch, &err), 0, "%s", err.msg);
	cr_assert_eq(ch.devices + ch.allow_rules + ch.hooks + ch.caps, 0);
	cr_assert_not(ch.memlock);
	twice = dump(spec);
	cr_assert_str_eq(once, twice);
	free(once);
	free(twice);
	json_decref(nh);
	json_decref(ph);
	json_decref(spec);
}

Test(spec_apply, empty_plan_changes_nothing)
{
	struct orh_plan plan;
	struct orh_spec_opts opts = { .add_ipc_lock = false, .memlock = &ml };
	struct orh_err err = { 0 };
	json_t *spec = spec_of("{\"ociVersion\":\"1.0.2\"}");
	char *s = NULL;

	memset(&plan, 0, sizeof(plan));
	cr_assert_eq(orh_spec_apply_plan(spec, &plan, &opts, NULL, &err), 0);
	s = dump(spec);
	cr_assert_str_eq(s, "{\"ociVersion\":\"1.0.2\"}");
	free(s);
	json_decref(spec);
}

Test(spec_apply, wrong_types_are_errors)
{
	struct orh_plan plan = test_plan(1 << 20);
	struct orh_err err = { 0 };
	json_t *spec = json_pack("{s:{s:i}}", "linux", "devices", 3);

	cr_assert_eq(orh_spec_apply_plan(spec, &plan, &ml_opts, NULL, &err), -EINVAL);
	cr_assert_not_null(strstr(err.msg, "linux.devices"), "%s", err.msg);
	json_decref(spec);
}

/* ---- jsonu64.c ----------------------------------------------------------------- */

Test(json_u64, big_numbers_round_trip)
{
	static const char in[] =
		"{\"process\":{\"rlimits\":[{\"type\":\"RLIMIT_MEMLOCK\",\"hard\":18446744073709551615,"
		"\"soft\":9223372036854775808},{\"type\":\"RLIMIT_NOFILE\",\"hard\":9223372036854775807,"
		"\"soft\":-5}]},\"s\":\"18446744073709551615\",\"f\":1.5e3}";
	json_t *spec = spec_of(in);
	json_t *rl = json_array_get(path(spec, "process", "rlimits"), 0);
	uint64_t v = 0;
	char *s = NULL;

	cr_assert(orh_json_get_u64(json_object_get(rl, "hard"), &v));
	cr_assert_eq(v, UINT64_MAX);
	cr_assert(orh_json_get_u64(json_object_get(rl, "soft"), &v));
	cr_assert_eq(v, 9223372036854775808ULL);
	rl = json_array_get(path(spec, "process", "rlimits"), 1);
	cr_assert(json_is_integer(json_object_get(rl, "hard")), "INT64_MAX stays an integer");
	cr_assert_not(orh_json_get_u64(json_object_get(rl, "soft"), &v));
	cr_assert_str_eq(json_string_value(json_object_get(spec, "s")), "18446744073709551615",
			 "a string that looks like a number is left alone");
	s = dump(spec);
	cr_assert_not_null(strstr(s, "\"hard\":18446744073709551615,\"soft\":9223372036854775808}"),
			   "%s", s);
	cr_assert_not_null(strstr(s, "\"hard\":9223372036854775807,\"soft\":-5}"), "%s", s);
	cr_assert_not_null(strstr(s, "\"s\":\"18446744073709551615\""), "%s", s);
	free(s);
	json_decref(spec);
}

Test(json_u64, too_big_is_refused)
{
	static const char in[] = "{\"a\":18446744073709551616}";
	struct orh_err err = { 0 };
	json_t *spec = NULL;

	cr_assert_eq(orh_spec_parse(in, strlen(in), "t.json", &spec, &err), -EINVAL);
	cr_assert_null(spec);
	cr_assert_not_null(strstr(err.msg, "t.json"), "%s", err.msg);
}

Test(json_u64, forged_marker_is_refused)
{
	static const char forged[] = "{\"a\":\"\\u0000orh-u64:5\"}";
	static const char forged2[] = "{\"a\":\"\\u0000\\u006frh-u64:5\"}";
	static const char nul[] = "{\"a\":\"x\\u0000y\"}";
	struct orh_err err = { 0 };
	json_t *spec = NULL;

	cr_assert_eq(orh_spec_parse(forged, strlen(forged), "t.json", &spec, &err), -EINVAL);
	cr_assert_null(spec);
	cr_assert_eq(orh_spec_parse(forged2, strlen(forged2), "t.json", &spec, &err), -EINVAL);
	cr_assert_eq(orh_spec_parse(nul, strlen(nul), "t.json", &spec, &err), -EINVAL);
	cr_assert_not_null(strstr(err.msg, "NUL"), "%s", err.msg);
}

Test(json_u64, numbers_inside_strings_untouched)
{
	static const char in[] = "{\"a\":\"x\\\"18446744073709551615\\\\\",\"b\":[18446744073709551615]}";
	json_t *spec = spec_of(in);
	char *s = NULL;

	cr_assert_str_eq(json_string_value(json_object_get(spec, "a")),
			 "x\"18446744073709551615\\");
	s = dump(spec);
	cr_assert_str_eq(s, in);
	free(s);
	json_decref(spec);
}

Test(json_u64, make)
{
	json_t *a = orh_json_u64(42), *b = orh_json_u64(UINT64_MAX);
	uint64_t v = 0;

	cr_assert(json_is_integer(a));
	cr_assert(json_is_string(b));
	cr_assert(orh_json_get_u64(b, &v));
	cr_assert_eq(v, UINT64_MAX);
	json_decref(a);
	json_decref(b);
}

/* /proc/<pid>/net/fib_trie and route, as the live hook reads a container's namespace */
Test(spec, netns_facts_from_proc_net)
{
	static const char trie[] =
		"Main:\n"
		"  +-- 0.0.0.0/0 3 0 5\n"
		"     |-- 0.0.0.0\n"
		"        /0 universe UNICAST\n"
		"     +-- 127.0.0.0/8 2 0 2\n"
		"        +-- 127.0.0.0/31 1 0 0\n"
		"           |-- 127.0.0.0\n"
		"              /8 host LOCAL\n"
		"           |-- 127.0.0.1\n"
		"              /32 host LOCAL\n"
		"     +-- 10.88.0.0/16 2 0 2\n"
		"        |-- 10.88.0.0\n"
		"           /16 link UNICAST\n"
		"        |-- 10.88.0.7\n"
		"           /32 host LOCAL\n"
		"        |-- 10.88.255.255\n"
		"           /32 link BROADCAST\n"
		"     |-- 25.11.128.240\n"
		"        /32 host LOCAL\n"
		"Local:\n"
		"  +-- 0.0.0.0/0 3 0 5\n"
		"     |-- 10.88.0.7\n"
		"        /32 host LOCAL\n"
		"     |-- 25.11.128.240\n"
		"        /32 host LOCAL\n";
	static const char route[] =
		"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
		"net1\t00000000\t0100580A\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
		"eth0\t00000000\t0100580A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
		"eth0\t0000580A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";
	struct orh_netns_info ni;
	char a[16], b[16];

	memset(&ni, 0, sizeof(ni));
	orh_netns_parse_fib_trie(trie, &ni);
	cr_assert_eq(ni.n_addrs, 2, "%zu addresses", ni.n_addrs);
	inet_ntop(AF_INET, &ni.addrs[0], a, sizeof(a));
	inet_ntop(AF_INET, &ni.addrs[1], b, sizeof(b));
	cr_assert_str_eq(a, "10.88.0.7");
	cr_assert_str_eq(b, "25.11.128.240");
	orh_netns_parse_route(route, &ni);
	cr_assert_str_eq(ni.default_if, "eth0", "the lowest metric wins");
	orh_netns_parse_route("Iface\tDestination\n", &ni);
	cr_assert_str_eq(ni.default_if, "");
	orh_netns_parse_fib_trie("garbage\n|-- not-an-address\n/32 host LOCAL\n", &ni);
	cr_assert_eq(ni.n_addrs, 0);
}
