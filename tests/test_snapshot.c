/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node snapshot (src/node/snapshot.c) and its handoff (src/apply/handoff.c): on every
 * sample node of tests/nodes, a decision from the snapshot the shim would hand over,
 * written out and read back, equals the decision that reads the node, in its record form
 * (activation, given devices, plan, warnings), and reads nothing of the node when the
 * container's network is the one the shim saw. A container network the shim could not see
 * (its addresses known only in the stage) gets the plan of a decision that reads the node
 * with those facts. A bad field is named and the node is read instead. The handoff is
 * taken only when bound to the bundle's config.json and the sysroot, and when no one else
 * may write it. The node read step alone: through the sysroot, and a snapshot it cannot
 * restore.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node_fixture.h"
#include "orh/decide/decide.h"
#include "orh/apply/handoff.h"
#include "orh/apply/record.h"
#include "orh/node/snapshot.h"

static const char *const nodes[] = { "seed001-roce", "seed001-gpu", "dgx-h100", "erdma", "ib",
				      "mixed", "mixed-fabric", "nordma", "scale" };

/* A spec of the container: NVIDIA_VISIBLE_DEVICES as given (NULL: none). */
static json_t *spec_with_gpus(const char *visible)
{
	json_t *spec = json_loads("{\"process\":{\"env\":[\"PATH=/bin\"]},"
				  "\"linux\":{\"namespaces\":[{\"type\":\"network\"}]}}", 0, NULL);
	char var[64];

	cr_assert_not_null(spec);
	if (visible) {
		snprintf(var, sizeof(var), "NVIDIA_VISIBLE_DEVICES=%s", visible);
		json_array_append_new(json_object_get(json_object_get(spec, "process"), "env"),
				      json_string(var));
	}
	return spec;
}

/* The container network's facts: its default route and one IPv4 address (or none). */
struct netns {
	const char *default_if;
	const char *addr;
	struct in_addr a;
};

static int netns_facts(void *arg, struct orh_container_facts *facts, struct orh_err *err)
{
	struct netns *n = arg;

	(void)err;
	facts->own_netns = true;
	snprintf(facts->netns_default_if, sizeof(facts->netns_default_if), "%s", n->default_if);
	if (n->addr) {
		cr_assert_eq(inet_pton(AF_INET, n->addr, &n->a), 1);
		facts->addrs = &n->a;
		facts->n_addrs = 1;
	}
	return 0;
}

static void decide(const char *root, const json_t *spec, struct netns *n, const json_t *snap,
		   struct orh_decision *d)
{
	struct orh_config cfg;
	struct orh_err err = { 0 };
	struct orh_decide_in in;

	orh_config_defaults(&cfg);
	cfg.activation = ORH_ACTIVATE_ALWAYS;
	in = (struct orh_decide_in){ .cfg = &cfg, .sysroot = root, .scan = ORH_GIDS_PLAN,
				     .spec = spec, .container_facts = netns_facts, .arg = n,
				     .snapshot = snap, .snapshot_what = "node.json" };
	cr_assert_eq(orh_decide(&in, d, &err), 0, "%s", err.msg);
	orh_config_free(&cfg);
}

/* The decision as the record shows it, as text. */
static char *record_text(const struct orh_decision *d)
{
	struct orh_record_in in = { .stage = "nccl-conf", .d = d, .netns_if = "",
				    .nodes_created = -1, .spec_devices = -1 };
	char *line = orh_record_text(&in, NULL);
	json_t *rec = json_loads(line, 0, NULL);
	char *text;

	free(line);
	json_object_del(rec, "time_ms");
	json_object_del(rec, "node_read");
	text = json_dumps(rec, JSON_SORT_KEYS | JSON_INDENT(1));
	json_decref(rec);
	return text;
}

/* The two decisions are the same in their record form. */
static void same_records(const struct orh_decision *want, const struct orh_decision *got,
			 const char *what)
{
	char *w = record_text(want), *g = record_text(got);

	cr_assert_str_eq(g, w, "%s: the decision from the snapshot differs", what);
	free(w);
	free(g);
}

/* The snapshot the NRI plugin writes, through the file the stage takes (its node's text
 * after the object's line). */
static json_t *handed_over(const struct orh_decision *d)
{
	json_t *snap = orh_snapshot_build(&d->node.inv, d->node.have_gpus ? &d->node.gpus : NULL,
					    d->node.gpus_error);
	char dir[64] = "/dev/shm/orh-handed-XXXXXX", state[96], why[ORH_ERR_MAX];
	char token[ORH_HANDOFF_TOKEN_LEN + 1];
	struct orh_err err = { 0 };
	bool created = false;
	json_t *back;

	cr_assert_not_null(snap);
	cr_assert_not_null(mkdtemp(dir));
	orh_handoff_token(token);
	cr_assert_eq(orh_handoff_write(dir, "c1", NULL, token, "/", snap, &created, &err), 0,
		     "%s", err.msg);
	snprintf(state, sizeof(state), "%s/c1", dir);
	back = orh_handoff_take(state, NULL, token, "/", why, sizeof(why));
	cr_assert_not_null(back, "%s", why);
	cr_assert(orh_state_dir_remove(dir, "c1"));
	cr_assert_eq(rmdir(dir), 0);
	return back;
}

static void same_from_snapshot(const char *node, const char *visible, struct netns *shim,
			       struct netns *stage, bool no_reads)
{
	char root[256];
	struct orh_decision read = { 0 }, restored = { 0 }, direct = { 0 };
	json_t *spec = spec_with_gpus(visible), *snap;
	char what[128];

	fixture_make_node(root, sizeof(root), "orh-snapshot", node);
	decide(root, spec, shim, NULL, &read);
	cr_assert(read.have_plan, "%s: no plan", node);
	snap = handed_over(&read);
	decide(root, spec, stage, snap, &restored);
	cr_assert(restored.node.from_snapshot, "%s: the snapshot was not used", node);
	if (no_reads)
		cr_assert_eq(orh_inventory_reads(&restored.node.inv), 0,
			     "%s: the stage read %lu files", node, orh_inventory_reads(&restored.node.inv));
	/* what a decision that reads the node with the stage's facts decides */
	decide(root, spec, stage, NULL, &direct);
	snprintf(what, sizeof(what), "%s (%s)", node, visible ? visible : "no GPUs");
	same_records(&direct, &restored, what);
	/* two decisions that read nothing would agree too: this one read the node's devices,
	 * and, on a node with RDMA, planned its ports */
	cr_assert(direct.have_plan, "%s: the node was not read", what);
	cr_assert_eq(restored.node.inv.n_devs, direct.node.inv.n_devs, "%s", what);
	if (strcmp(node, "nordma") != 0) {
		cr_assert_gt(direct.node.inv.n_devs, 0, "%s: no device read", what);
		cr_assert_gt(direct.plan.n_ports, 0, "%s: the plan has no port", what);
	}
	json_decref(snap);
	json_decref(spec);
	orh_decision_free(&read);
	orh_decision_free(&restored);
	orh_decision_free(&direct);
	fixture_remove_node(root);
}

Test(snapshot, every_sample_node_decides_the_same_from_the_snapshot)
{
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		struct netns n = { .default_if = "eth0" };

		same_from_snapshot(nodes[i], NULL, &n, &n, true);
	}
}

/* rule 9: the GPUs travel with the snapshot */
Test(snapshot, a_gpu_subset_decides_the_same_from_the_snapshot)
{
	struct netns n = { .default_if = "eth0" };

	same_from_snapshot("dgx-h100", "2,3", &n, &n, true);
	same_from_snapshot("seed001-gpu", "0", &n, &n, true);
}

/* The shim saw a network the runtime had not made yet; the stage sees the container's
 * address, which one of the ports' GID entries holds (seed001-roce: mlx5_1's 25.11.128.2):
 * the plan is the one for those facts, its GID entries read where the snapshot lacks them. */
Test(snapshot, a_container_network_the_shim_could_not_see_is_planned_for)
{
	struct netns shim = { .default_if = "" };
	struct netns stage = { .default_if = "eth0", .addr = "25.11.128.2" };

	same_from_snapshot("seed001-roce", NULL, &shim, &stage, false);
}

/* The first port's state, a number, made a word, signed, spaced, empty, or past what a
 * number holds: each is named, and the node is read instead. */
Test(snapshot, a_bad_field_is_named_and_the_node_is_read)
{
	static const char *const bad[] = { "x", "+4", " 4", "4 ", "", "-", "4x",
					   "18446744073709551620", "99999999999999999999" };
	char root[256];
	struct orh_decision read = { 0 };
	struct netns n = { .default_if = "eth0" };
	json_t *spec = spec_with_gpus(NULL), *snap;
	char *text;
	const char *at;

	fixture_make_node(root, sizeof(root), "orh-snapshot", "seed001-roce");
	decide(root, spec, &n, NULL, &read);
	snap = handed_over(&read);
	text = strdup(json_string_value(json_object_get(snap, "node")));
	at = strstr(text, "\nport\t1\t4\t");
	cr_assert_not_null(at, "%s", text);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct orh_decision restored = { 0 };
		char *changed = NULL;
		bool named = false;

		cr_assert_gt(asprintf(&changed, "%.*s%s%s", (int)(at + 8 - text), text, bad[k],
				      at + 9), 0);
		json_object_set_new(snap, "node", json_string(changed));
		decide(root, spec, &n, snap, &restored);
		cr_assert_not(restored.node.from_snapshot, "'%s' taken", bad[k]);
		cr_assert(restored.have_plan);
		for (size_t i = 0; i < restored.warnings.n; i++)
			named |= strstr(restored.warnings.v[i], "node.json: line ") &&
				 strstr(restored.warnings.v[i], " (port), field 2: not an integer");
		cr_assert(named, "'%s': no warning names the field: %s", bad[k],
			  restored.warnings.n ? restored.warnings.v[0] : "(none)");
		cr_assert_eq(restored.plan.n_ports, read.plan.n_ports);
		free(changed);
		orh_decision_free(&restored);
	}
	free(text);
	json_decref(snap);
	json_decref(spec);
	orh_decision_free(&read);
	fixture_remove_node(root);
}

/* A GID entry whose read warned in the shim warns again in the stage, once. */
/* The node read step alone (orh_node_read()): through the sysroot, with what GPUDirect
 * needs; a snapshot it cannot restore is a warning, and the node is read. */
Test(snapshot, the_node_read_step)
{
	char root[PATH_MAX];
	json_t *bad = json_pack("{s:s}", "node", "not a snapshot");
	struct orh_node_read_opts o = {
		.discover = { .gid_scan = ORH_GIDS_PLAN },
		.gpudirect = true,
		.snapshot_what = "node.json",
	};
	struct orh_node n;
	struct orh_err err = { 0 };

	fixture_make_node(root, sizeof(root), "orh-snapshot", "seed001-roce");
	o.discover.sysroot = root;
	cr_assert_eq(orh_node_read(&o, &n, &err), 0, "%s", err.msg);
	cr_assert(n.have_inv);
	cr_assert_gt(n.inv.n_devs, 0);
	cr_assert(n.have_gpudirect);
	cr_assert_not(n.have_gpus, "not asked for");
	cr_assert_not(n.from_snapshot);
	cr_assert_eq(n.warnings.n, 0);
	orh_node_free(&n);
	o.snapshot = bad;
	cr_assert_eq(orh_node_read(&o, &n, &err), 0, "%s", err.msg);
	cr_assert(n.have_inv);
	cr_assert_not(n.from_snapshot);
	cr_assert_eq(n.warnings.n, 1);
	cr_assert(strstr(n.warnings.v[0], "node.json") &&
		  strstr(n.warnings.v[0], "; the node is read instead"), "%s", n.warnings.v[0]);
	orh_node_free(&n);
	json_decref(bad);
	fixture_remove_node(root);
}

Test(snapshot, a_warning_of_a_gid_read_comes_back_once)
{
	char root[256], path[512];
	struct orh_decision read = { 0 }, restored = { 0 };
	struct netns n = { .default_if = "eth0" };
	json_t *spec = spec_with_gpus(NULL), *snap;
	size_t hits = 0;
	int fd;

	fixture_make_node(root, sizeof(root), "orh-snapshot", "seed001-roce");
	/* mlx5_1's entry 3 (its IPv4 RoCE v2 GID): a type the kernel never writes */
	snprintf(path, sizeof(path), "%s/sys/class/infiniband/mlx5_1/ports/1/gid_attrs/types/3",
		 root);
	fd = open(path, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(write(fd, "RoCE v9\n", 8), 8);
	close(fd);
	decide(root, spec, &n, NULL, &read);
	for (size_t i = 0; i < read.warnings.n; i++)
		hits += strstr(read.warnings.v[i], "types/3") != NULL;
	cr_assert_geq(hits, 1, "the shim's decision gave no warning for the entry");
	snap = handed_over(&read);
	decide(root, spec, &n, snap, &restored);
	same_records(&read, &restored, "seed001-roce, a GID read that warned");
	json_decref(snap);
	json_decref(spec);
	orh_decision_free(&read);
	orh_decision_free(&restored);
	fixture_remove_node(root);
}

static char run_dir[64], bundle[64];

static void write_conf(void)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/config.json.new", bundle);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("{}", f);
	fclose(f);
	cr_assert_eq(rename(path, strcat(strcpy((char[128]){ 0 }, bundle), "/config.json")), 0);
}

static void handoff_dirs(void)
{
	strcpy(run_dir, "/dev/shm/orh-handoff-XXXXXX");
	strcpy(bundle, "/dev/shm/orh-bundle-XXXXXX");
	cr_assert_not_null(mkdtemp(run_dir));
	cr_assert_not_null(mkdtemp(bundle));
	write_conf();
}

static void handoff_cleanup(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", run_dir, bundle);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(handoff, .init = handoff_dirs, .fini = handoff_cleanup);

static json_t *take_as(const char *token, const char *sysroot, char *why, size_t size)
{
	char state[128];

	snprintf(state, sizeof(state), "%s/c1", run_dir);
	return orh_handoff_take(state, bundle, token, sysroot, why, size);
}

static json_t *take(const char *sysroot, char *why, size_t size)
{
	return take_as(NULL, sysroot, why, size);
}

Test(handoff, it_is_taken_only_where_bound_and_only_ours)
{
	struct orh_err err = { 0 };
	char why[256], path[160];
	bool created = false;
	json_t *got;

	cr_assert_null(take("/", why, sizeof(why)));
	cr_assert_str_empty(why, "none written, yet: %s", why);
	cr_assert_eq(orh_handoff_write(run_dir, "c1", bundle, NULL, "/",
				       json_pack("{s:i}", "version", 1), &created, &err), 0, "%s",
		     err.msg);
	cr_assert(created);
	got = take("/", why, sizeof(why));
	cr_assert_not_null(got, "%s", why);
	json_decref(got);
	/* another sysroot */
	cr_assert_null(take("/other", why, sizeof(why)));
	cr_assert(strstr(why, "sysroot"), "%s", why);
	/* writable by others */
	snprintf(path, sizeof(path), "%s/c1/%s", run_dir, ORH_HANDOFF_FILE);
	cr_assert_eq(chmod(path, 0622), 0);
	cr_assert_null(take("/", why, sizeof(why)));
	cr_assert(strstr(why, "not this user's alone"), "%s", why);
	cr_assert_eq(chmod(path, 0600), 0);
	/* a config.json that is not the file the shim wrote */
	write_conf();
	cr_assert_null(take("/", why, sizeof(why)));
	cr_assert(strstr(why, "config.json"), "%s", why);
	/* dropped */
	orh_handoff_drop(run_dir, "c1");
	cr_assert_neq(access(path, F_OK), 0);
	cr_assert(orh_state_entry_ours(ORH_HANDOFF_FILE));
}

/* The NRI plugin's: bound to the token of the stage's hook entry (the runtime writes
 * config.json later), taken by the stage that holds that token and no other; a token of
 * another creation, or none, is not, nor is another sysroot. */
Test(handoff, the_nri_plugins_is_bound_to_its_token)
{
	struct orh_err err = { 0 };
	char why[256], token[ORH_HANDOFF_TOKEN_LEN + 1], other[ORH_HANDOFF_TOKEN_LEN + 1];
	bool created = false;
	json_t *got;

	orh_handoff_token(token);
	orh_handoff_token(other);
	cr_assert_eq(strlen(token), ORH_HANDOFF_TOKEN_LEN);
	cr_assert_str_neq(token, other);
	cr_assert_eq(orh_handoff_write(run_dir, "c1", NULL, token, "/",
				       json_pack("{s:i}", "version", 1), &created, &err), 0, "%s",
		     err.msg);
	got = take_as(token, "/", why, sizeof(why));
	cr_assert_not_null(got, "%s", why);
	cr_assert_str_eq(orh_handoff_reader(got), "by the NRI plugin");
	json_decref(got);
	cr_assert_null(take_as(other, "/", why, sizeof(why)));
	cr_assert(strstr(why, "another creation"), "%s", why);
	cr_assert_null(take_as(NULL, "/", why, sizeof(why)));
	cr_assert(strstr(why, ORH_HANDOFF_ENV), "%s", why);
	cr_assert_null(take_as(token, "/other", why, sizeof(why)));
	cr_assert(strstr(why, "sysroot"), "%s", why);
	/* the shim's, bound to config.json, whatever the stage's environment holds */
	cr_assert_eq(orh_handoff_write(run_dir, "c1", bundle, NULL, "/",
				       json_pack("{s:i}", "version", 1), &created, &err), 0, "%s",
		     err.msg);
	got = take_as(token, "/", why, sizeof(why));
	cr_assert_not_null(got, "%s", why);
	cr_assert_str_eq(orh_handoff_reader(got), "by the runtime shim");
	json_decref(got);
}

/* Writes the file as the writer would (mode 0600 kept: it is there already). */
static void put_file(const char *path, const char *bytes, size_t len)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fwrite(bytes, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

/* The file: the snapshot's object without its node on the first line, the node's text as it
 * is after it, taken back whole. A first line that is not a JSON object, a text with a NUL
 * or not UTF-8, or one after an object that has its node, is not taken, and why names the
 * file; a file of one JSON object with its node is. */
Test(handoff, the_nodes_text_follows_the_objects_line)
{
	static const char text[] = "orh-node\t1\nroute\teth0\nwarn\ta \\t b\n";
	struct orh_err err = { 0 };
	char why[512], path[160], token[ORH_HANDOFF_TOKEN_LEN + 1], head[160], buf[1024];
	bool created = false;
	json_t *got, *obj;
	char *nl;
	ssize_t len;
	int fd, n;
	struct {
		const char *what, *tail;
		size_t tail_len;
	} bad[] = {
		{ "a NUL in the text", "orh-node\t1\n\0route\teth0\n", 23 },
		{ "not UTF-8", "orh-node\t1\nroute\t\xff\n", 19 },
	};

	orh_handoff_token(token);
	cr_assert_eq(orh_handoff_write(run_dir, "c1", NULL, token, "/",
				       json_pack("{s:i, s:s}", "version", 1, "node", text),
				       &created, &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/c1/%s", run_dir, ORH_HANDOFF_FILE);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	len = read(fd, buf, sizeof(buf));
	close(fd);
	cr_assert_gt(len, 0);
	nl = memchr(buf, '\n', (size_t)len);
	cr_assert_not_null(nl);
	obj = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
	cr_assert(json_is_object(obj), "%.*s", (int)len, buf);
	cr_assert_null(json_object_get(obj, "node"), "the node's text is in the object");
	cr_assert_str_eq(json_string_value(json_object_get(obj, "token")), token);
	json_decref(obj);
	cr_assert_eq((size_t)(buf + len - nl - 1), strlen(text));
	cr_assert_eq(memcmp(nl + 1, text, strlen(text)), 0, "%.*s", (int)len, buf);
	got = take_as(token, "/", why, sizeof(why));
	cr_assert_not_null(got, "%s", why);
	cr_assert_str_eq(json_string_value(json_object_get(got, "node")), text);
	json_decref(got);

	n = snprintf(head, sizeof(head), "{\"version\":1,\"token\":\"%s\",\"sysroot\":\"/\"}\n",
		     token);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		memcpy(buf, head, (size_t)n);
		memcpy(buf + n, bad[k].tail, bad[k].tail_len);
		put_file(path, buf, (size_t)n + bad[k].tail_len);
		cr_assert_null(take_as(token, "/", why, sizeof(why)), "%s: taken", bad[k].what);
		cr_assert(strstr(why, ORH_HANDOFF_FILE) && strstr(why, "first line"), "%s: %s",
			  bad[k].what, why);
	}
	/* a first line that is not an object, and an object that has its node already */
	n = snprintf(buf, sizeof(buf), "[\"%s\"]\n%s", token, text);
	put_file(path, buf, (size_t)n);
	cr_assert_null(take_as(token, "/", why, sizeof(why)));
	cr_assert(strstr(why, "first line"), "%s", why);
	n = snprintf(buf, sizeof(buf), "{\"version\":1,\"token\":\"%s\",\"sysroot\":\"/\","
		     "\"node\":\"orh-node\\t1\\n\"}\n%s", token, text);
	put_file(path, buf, (size_t)n);
	cr_assert_null(take_as(token, "/", why, sizeof(why)));
	cr_assert(strstr(why, "first line"), "%s", why);
	/* one JSON object with its node, and nothing after it */
	n = snprintf(buf, sizeof(buf), "{\"version\":1,\"token\":\"%s\",\"sysroot\":\"/\","
		     "\"node\":\"orh-node\\t1\\n\"}", token);
	put_file(path, buf, (size_t)n);
	got = take_as(token, "/", why, sizeof(why));
	cr_assert_not_null(got, "%s", why);
	cr_assert_str_eq(json_string_value(json_object_get(got, "node")), "orh-node\t1\n");
	json_decref(got);
}
