/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim serving a container alone (src/cmd/serve.c, src/apply/shimconf.c): the
 * edit that leaves the nccl-conf stage out or adds it after all (orh_spec_serve with
 * ORH_SERVE_CONF, orh_edit_add_stage) on the sample RoCE node
 * (tests/nodes/seed001-roce.json), and the record bound to the bundle's config.json in
 * place of a pid (orh_shimconf_record, orh_record_alive); a network namespace read by its
 * path (orh_netns_read). test_shimconf.c tests the file itself. Temporary directories
 * under /tmp; root only for the namespace (ip netns), skipped without.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "node_fixture.h"
#include "orh/cmd/commands.h"
#include "orh/cmd/serve.h"
#include "orh/apply/ncclconf.h"
#include "orh/apply/netns.h"
#include "orh/apply/record.h"
#include "orh/base/rootfs.h"
#include "orh/apply/shimconf.h"
#include "orh/apply/spec.h"
#include "hook_check.h"
#include "plan_check.h"
#include "shim_fixture.h"

TestSuite(shimserve, .init = shim_fixture_setup, .fini = shim_fixture_cleanup);

/* ---- 5. the edit ----------------------------------------------------------------- */

/* a spec as podman proposes it, without NCCL settings of the user */
#define SPEC(hooks, ns)                                                                    \
	"{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"},\"process\":{"           \
	"\"args\":[\"sh\"],\"env\":[\"PATH=/bin\"]},\"mounts\":[" M("/proc") "],"            \
	"\"linux\":{\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}]}" ns "}" \
	hooks "}"
#define NEW_NETNS ",\"namespaces\":[{\"type\":\"mount\"},{\"type\":\"network\"}]"
#define PRESTART ",\"hooks\":{\"prestart\":[{\"path\":\"/usr/libexec/netsetup\"}]}"
#define CREATE_RUNTIME ",\"hooks\":{\"createRuntime\":[{\"path\":\"/usr/libexec/setkey\"}]}"
#define OUR_LIVE_HOOK                                                                      \
	",\"hooks\":{\"createRuntime\":[{\"path\":\"/usr/libexec/oci/hooks.d/oci-rdma-hook\","  \
	"\"args\":[\"oci-rdma-hook\",\"createRuntime\"]}]}"

static void ctx_init(struct orh_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	orh_config_defaults(&ctx->cfg);
	ctx->cfg.activation = ORH_ACTIVATE_ALWAYS;
	ctx->cfg.memlock = 65536;
	ctx->sysroot = ctx->sysroot_opt = node;
	ctx->config_path = CONF;
	ctx->config_explicit = true;
}

/* The last hook of `stage` in spec runs this binary's `what` with --config and --sysroot */
#define assert_self_hook(spec, stage, what) check_self_hook(spec, stage, what, CONF, node)

static size_t n_hooks(const json_t *spec, const char *stage)
{
	return json_array_size(json_object_get(json_object_get(spec, "hooks"), stage));
}

/* orh_spec_serve of text into *spec; the result's own_conf */
static bool serve(struct orh_ctx *ctx, const char *text, unsigned flags, json_t **spec,
		  struct orh_edit_result *res)
{
	struct orh_err err = { 0 };

	*spec = parse(text);
	cr_assert_eq(orh_spec_serve(ctx, *spec, flags, res, &err), 0, "%s", err.msg);
	cr_assert_eq(res->activation, ORH_ACT_DEFAULT);
	cr_assert_eq(res->changes.devices, 9, "rdma_cm and uverbs1..8");
	cr_assert_gt(res->edits, 0);
	cr_assert_eq(res->own_conf, res->d != NULL, "own_conf goes with the decision");
	return res->own_conf;
}

Test(shimserve, a_spec_in_a_known_network_gets_no_nccl_conf_stage)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	json_t *spec;

	ctx_init(&ctx);
	/* the runtime's network */
	cr_assert(serve(&ctx, SPEC("", ""), ORH_SERVE_CONF | ORH_SERVE_SNAPSHOT, &spec, &res));
	cr_assert_not_null(res.d);
	cr_assert(res.d->have_plan);
	cr_assert_not_null(plan_value(&res.d->plan, "NCCL_IB_HCA"), "the plan, for the file");
	cr_assert_null(json_object_get(spec, "hooks"), "no hook at all");
	cr_assert_eq(res.changes.hooks, 0);
	cr_assert_null(res.snapshot, "no stage to hand the node to");
	/* the settings stay out of PID 1's environment */
	cr_assert_eq(json_array_size(json_object_get(json_object_get(spec, "process"), "env")),
		     1);
	orh_edit_result_free(&res);
	cr_assert_null(res.d);
	json_decref(spec);

	/* a new namespace that no hook sets up */
	cr_assert(serve(&ctx, SPEC("", NEW_NETNS), ORH_SERVE_CONF, &spec, &res));
	cr_assert_null(json_object_get(spec, "hooks"));
	orh_edit_result_free(&res);
	json_decref(spec);

	/* a poststop hook of someone else's changes nothing */
	cr_assert(serve(&ctx, SPEC(",\"hooks\":{\"poststop\":[{\"path\":\"/bin/true\"}]}",
				   NEW_NETNS), ORH_SERVE_CONF, &spec, &res));
	cr_assert_eq(n_hooks(spec, "poststop"), 1);
	cr_assert_eq(n_hooks(spec, "createRuntime"), 0);
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

Test(shimserve, a_network_set_up_by_an_earlier_hook_keeps_the_stage)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	json_t *spec;

	ctx_init(&ctx);
	cr_assert_not(serve(&ctx, SPEC(PRESTART, NEW_NETNS), ORH_SERVE_CONF, &spec, &res));
	cr_assert_null(res.d);
	cr_assert_eq(res.changes.hooks, 2, "nccl-conf and poststop");
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	assert_self_hook(spec, "poststop", "poststop");
	cr_assert_eq(n_hooks(spec, "prestart"), 1, "the spec's own stays");
	orh_edit_result_free(&res);
	json_decref(spec);

	cr_assert_not(serve(&ctx, SPEC(CREATE_RUNTIME, NEW_NETNS),
			    ORH_SERVE_CONF | ORH_SERVE_NO_POSTSTOP | ORH_SERVE_SNAPSHOT, &spec,
			    &res));
	cr_assert_eq(n_hooks(spec, "createRuntime"), 2, "setkey, then the stage");
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert_eq(n_hooks(spec, "poststop"), 0);
	cr_assert_not_null(res.snapshot, "the node, for the stage");
	orh_edit_result_free(&res);
	json_decref(spec);

	/* a namespace by a path the shim could not read */
	cr_assert_not(serve(&ctx, SPEC("", ",\"namespaces\":[{\"type\":\"network\",\"path\":"
				   "\"/nonexistent/orh-netns\"}]"), ORH_SERVE_CONF, &spec, &res));
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert(strv_mentions(&res.warnings, "'/nonexistent/orh-netns' not read"));
	orh_edit_result_free(&res);
	json_decref(spec);

	/* without ORH_SERVE_CONF: the stage, as before */
	cr_assert_not(serve(&ctx, SPEC("", ""), ORH_SERVE_SNAPSHOT, &spec, &res));
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

Test(shimserve, a_spec_carrying_our_live_hook_is_left_to_it)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	json_t *spec;

	ctx_init(&ctx);
	cr_assert_not(serve(&ctx, SPEC(OUR_LIVE_HOOK, ""), ORH_SERVE_CONF, &spec, &res));
	cr_assert_null(res.d);
	cr_assert_eq(n_hooks(spec, "createRuntime"), 1, "the live hook writes the file");
	cr_assert_str_eq(json_string_value(json_object_get(
		json_array_get(json_object_get(json_object_get(spec, "hooks"), "createRuntime"), 0),
		"path")), "/usr/libexec/oci/hooks.d/oci-rdma-hook");
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

Test(shimserve, the_stage_is_added_after_all_where_the_shim_cannot_write)
{
	const unsigned flags = ORH_SERVE_CONF | ORH_SERVE_SNAPSHOT | ORH_SERVE_NO_POSTSTOP;
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_err err = { 0 };
	json_t *spec, *once;
	int edits;

	ctx_init(&ctx);
	cr_assert(serve(&ctx, SPEC("", ""), flags, &spec, &res));
	cr_assert_null(res.snapshot);
	edits = res.edits;
	cr_assert_eq(orh_edit_add_stage(&ctx, spec, flags, &res, &err), 0, "%s", err.msg);
	cr_assert_not(res.own_conf);
	cr_assert_eq(res.changes.hooks, 1, "nccl-conf alone");
	cr_assert_eq(n_hooks(spec, "createRuntime"), 1);
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert_eq(n_hooks(spec, "poststop"), 0);
	cr_assert_not_null(res.snapshot, "the node, for the stage");
	cr_assert_eq(res.edits, edits + 1, "the hook is an edit: config.json is written");
	/* a second time: no second hook */
	once = json_deep_copy(spec);
	cr_assert_eq(orh_edit_add_stage(&ctx, spec, flags, &res, &err), 0, "%s", err.msg);
	cr_assert(json_equal(spec, once));
	cr_assert_eq(res.changes.hooks, 1);
	json_decref(once);
	orh_edit_result_free(&res);
	json_decref(spec);

	/* without ORH_SERVE_SNAPSHOT: no node handed over */
	cr_assert(serve(&ctx, SPEC("", ""), ORH_SERVE_CONF, &spec, &res));
	cr_assert_eq(orh_edit_add_stage(&ctx, spec, ORH_SERVE_CONF, &res, &err), 0, "%s", err.msg);
	cr_assert_not(res.own_conf);
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert_eq(n_hooks(spec, "poststop"), 0, "never a poststop hook");
	cr_assert_null(res.snapshot);
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

/* ---- 6. the record --------------------------------------------------------------- */

/* <tmp>/<rel>/config.json replaced by a new file (a new inode) */
static void replace_config(const char *rel, const char *text)
{
	char name[PATH_MAX], newname[PATH_MAX];

	snprintf(name, sizeof(name), "%s/config.json", rel);
	snprintf(newname, sizeof(newname), "%s/config.json.new", rel);
	put_file(newname, text, 0600);
	cr_assert_eq(rename(at_tmp(newname), at_tmp(name)), 0);
}

Test(shimserve, the_record_is_bound_to_the_bundles_config_json)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_ncclconf_result conf;
	struct orh_err err = { 0 };
	struct orh_strv warnings = { 0 };
	struct stat st, before;
	json_t *spec, *rec, *b;
	char *text, bundle[PATH_MAX];
	int bfd = make_bundle(), rootfd = -1;

	/* the shim's way: serve, write the file, write config.json, record */
	ctx_init(&ctx);
	cr_assert(serve(&ctx, SPEC("", ""), ORH_SERVE_CONF | ORH_SERVE_NO_POSTSTOP, &spec, &res));
	cr_assert_eq(orh_shimconf_write(bfd, spec, &res.d->plan, &rootfd, &conf, &err), 0, "%s",
		     err.msg);
	cr_assert_gt(conf.added, 0);
	text = get_file("b/rootfs/etc/nccl.conf");
	cr_assert_not_null(text);
	cr_assert(strstr(text, "\nNCCL_IB_HCA="), "%s", text);
	free(text);
	text = json_dumps(spec, 0);
	put_file("b/config.json", text, 0600);
	free(text);
	snprintf(bundle, sizeof(bundle), "%s/b", tmp);
	cr_assert_eq(stat(at_tmp("b/config.json"), &st), 0);
	cr_assert_eq(orh_shimconf_record(at_tmp("run/ctr1"), &(struct orh_shimconf_rec){
			     .id = "ctr1", .bundle_path = bundle, .sysroot = node,
			     .config_st = &st, .d = res.d, .spec = spec, .conf = &conf,
			     .total_ms = 1.5 }, &warnings, &err), 0, "%s", err.msg);

	rec = orh_record_load_at(AT_FDCWD, at_tmp("run/ctr1/" ORH_RECORD_FILE));
	cr_assert_not_null(rec);
	cr_assert_str_eq(json_string_value(json_object_get(rec, "id")), "ctr1");
	cr_assert_str_eq(json_string_value(json_object_get(rec, "stage")), "runtime shim");
	cr_assert(json_is_integer(json_object_get(rec, "pid")));
	cr_assert_eq(json_integer_value(json_object_get(rec, "pid")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(rec, "node_read")),
			 "by the runtime shim");
	b = json_object_get(rec, "bundle");
	cr_assert_str_eq(json_string_value(json_object_get(b, "path")), bundle);
	cr_assert_eq(json_integer_value(json_object_get(b, "config_dev")), (json_int_t)st.st_dev);
	cr_assert_eq(json_integer_value(json_object_get(b, "config_ino")), (json_int_t)st.st_ino);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(rec, "nccl_conf"),
							   "result")), "written");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(rec, "nccl_conf"),
							"added")), (json_int_t)conf.added);

	/* alive while config.json is the one recorded, rewritten in place or not */
	cr_assert(orh_record_alive(rec, "/proc"));
	put_file("b/config.json", "{}", 0600);
	cr_assert(orh_record_alive(rec, "/proc"), "the same file");
	/* a new config.json: another container in the same bundle */
	before = st;
	replace_config("b", "{}");
	cr_assert_eq(stat(at_tmp("b/config.json"), &st), 0);
	cr_assert_neq(st.st_ino, before.st_ino);
	cr_assert_not(orh_record_alive(rec, "/proc"));
	cr_assert_eq(unlink(at_tmp("b/config.json")), 0);
	cr_assert_not(orh_record_alive(rec, "/proc"), "no config.json");
	/* the bundle gone */
	cr_assert_eq(rename(at_tmp("b"), at_tmp("b.gone")), 0);
	cr_assert_not(orh_record_alive(rec, "/proc"));

	/* a record with no pid and no bundle: never alive */
	json_object_del(rec, "bundle");
	cr_assert_not(orh_record_alive(rec, "/proc"));
	json_decref(rec);

	/* bound to the runtime's state of the container as well (`runc run` leaves the
	 * bundle): alive while that is there, or while the record is young (the runtime makes
	 * it after the shim) */
	cr_assert_eq(rename(at_tmp("b.gone"), at_tmp("b")), 0);
	replace_config("b", "{}");
	cr_assert_eq(stat(at_tmp("b/config.json"), &st), 0);
	mkdirs("runc/ctr2");
	cr_assert_eq(orh_shimconf_record(at_tmp("run/ctr2"), &(struct orh_shimconf_rec){
			     .id = "ctr2", .bundle_path = bundle, .sysroot = node,
			     .runtime_state = at_tmp("runc/ctr2"), .config_st = &st, .d = res.d,
			     .spec = spec, .conf = &conf, .total_ms = 1.5 }, &warnings, &err),
		     0, "%s", err.msg);
	rec = orh_record_load_at(AT_FDCWD, at_tmp("run/ctr2/" ORH_RECORD_FILE));
	cr_assert_not_null(rec);
	b = json_object_get(rec, "bundle");
	cr_assert_str_eq(json_string_value(json_object_get(b, "runtime_state")),
			 at_tmp("runc/ctr2"));
	cr_assert(orh_record_alive(rec, "/proc"));
	cr_assert_eq(rmdir(at_tmp("runc/ctr2")), 0);
	cr_assert(orh_record_alive(rec, "/proc"), "a young record: the runtime is making it");
	json_object_set_new(b, "since", json_integer(json_integer_value(
		json_object_get(b, "since")) - ORH_RECORD_RUNTIME_GRACE));
	cr_assert_not(orh_record_alive(rec, "/proc"), "the runtime's state is gone");
	mkdirs("runc/ctr2");
	cr_assert(orh_record_alive(rec, "/proc"));

	json_decref(rec);
	orh_strv_free(&warnings);
	orh_ncclconf_result_free(&conf);
	close(rootfd);
	close(bfd);
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

/* ---- the container's network read by its path ----------------------------------------- */

/* orh_netns_read() reads a namespace by its path in a child that shares this process's
 * memory and joins the namespace alone: the default route's interface and the address come
 * back, a veth's address marked as holding no GID, twice (this process's memory intact),
 * and this process is in its own namespace after; a path of another kind names the step
 * that failed. */
Test(shimserve, a_namespace_read_by_its_path_leaves_this_process_in_its_own)
{
	char ns[64], cmd[768], path[96], addr[2][INET_ADDRSTRLEN] = { "", "" };
	char ifname[2][IFNAMSIZ] = { "", "" };
	struct orh_netns_info info;
	struct orh_err err[2] = { { 0 }, { 0 } }, bad = { 0 };
	struct stat before, after;
	int r[2], setup;
	size_t n[2] = { 0, 0 };
	bool no_gid[2] = { false, false };

	if (geteuid() != 0 || system("ip -V >/dev/null 2>&1") != 0)
		cr_skip_test("root and ip(8) are needed");
	snprintf(ns, sizeof(ns), "orh-shimserve-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "ip netns add %s && ip -n %s link add orhv0 type veth peer name orhv1 && "
		 "ip -n %s addr add 10.213.97.2/24 dev orhv0 && ip -n %s link set orhv1 up && "
		 "ip -n %s link set orhv0 up && ip -n %s route add default via 10.213.97.1",
		 ns, ns, ns, ns, ns, ns);
	setup = system(cmd);
	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	cr_assert_eq(stat("/proc/self/ns/net", &before), 0);
	for (int i = 0; i < 2 && setup == 0; i++) {
		r[i] = orh_netns_read(path, &info, &err[i]);
		snprintf(ifname[i], sizeof(ifname[i]), "%s", info.default_if);
		n[i] = info.n_addrs;
		no_gid[i] = info.no_gid[0];
		inet_ntop(AF_INET, &info.addrs[0], addr[i], sizeof(addr[i]));
	}
	cr_assert_eq(stat("/proc/self/ns/net", &after), 0);
	snprintf(cmd, sizeof(cmd), "ip netns del %s", ns);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(setup, 0, "the namespace was not set up");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(r[i], 0, "read %d: %s", i + 1, err[i].msg);
		cr_assert_str_eq(ifname[i], "orhv0", "read %d", i + 1);
		cr_assert_eq(n[i], 1, "read %d", i + 1);
		cr_assert_str_eq(addr[i], "10.213.97.2", "read %d", i + 1);
		cr_assert(no_gid[i], "read %d: a veth's address holds no GID", i + 1);
	}
	cr_assert(before.st_dev == after.st_dev && before.st_ino == after.st_ino,
		  "this process is in another network namespace after the reads");
	cr_assert_lt(orh_netns_read("/proc/self/status", &info, &bad), 0);
	cr_assert(strstr(bad.msg, "'/proc/self/status': setns"), "%s", bad.msg);
	cr_assert_eq(info.n_addrs, 0);
}
