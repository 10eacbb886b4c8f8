/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook inspect [ID] [--json] [--run-dir DIR]: the records of the containers the
 * hook served (orh/apply/record.h), as a table, or one (ID or a unique prefix of it) in full.
 * First it sweeps the state directories of containers that no longer exist, and the sysfs
 * views no container links to (orh/apply/statedir.h). The text it prints is escaped
 * (orh_text_escape): what a record quotes from an image or a spec stays text.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/base/args.h"
#include "orh/cmd/commands.h"
#include "orh/decide/decide.h"
#include "orh/base/json.h"
#include "orh/node/nccl_used.h"
#include "orh/apply/record.h"
#include "orh/base/rootfs.h"
#include "orh/apply/statedir.h"
#include "orh/apply/sweep.h"

/* What inspect looks from: the proc tree and this process's namespaces. */
struct view {
	const char *proc;
	struct orh_ns_ids here;
};

static json_t *load_record(const char *run_dir, const char *id)
{
	_cleanup_free_ char *dir = orh_state_dir_path(run_dir, id);
	char path[PATH_MAX];

	if (!dir)
		return NULL;
	snprintf(path, sizeof(path), "%s/" ORH_RECORD_FILE, dir);
	return orh_record_load_at(AT_FDCWD, path);
}

/* Print s escaped, in a column of width bytes at least (and prec at most: -1 none), then
 * end. */
static void print_text(const char *s, int width, int prec, const char *end)
{
	_cleanup_free_ char *t = orh_text_escape(s ? s : "");

	printf("%-*.*s%s", width, prec < 0 ? (int)strlen(t) : prec, t, end);
}

/* The record's container's liveness, into the record ("alive": true, false, or null where
 * it cannot be told from here); the table's word for it. */
static const char *set_alive(json_t *rec, const struct view *v)
{
	enum orh_alive a = orh_record_liveness(rec, v->proc, &v->here);

	json_object_set_new(rec, "alive", a == ORH_ALIVE_UNKNOWN ? json_null()
							       : json_boolean(a == ORH_ALIVE_YES));
	return a == ORH_ALIVE_UNKNOWN ? "?" : a == ORH_ALIVE_YES ? "yes" : "no";
}

/* Did the record's plan use a port (the container was given RDMA)? */
static bool rdma_given(const json_t *rec)
{
	const json_t *ports = json_object_get(json_object_get(rec, "plan"), "ports"), *p;
	size_t i;

	json_array_foreach(ports, i, p)
		if (json_is_true(json_object_get(p, "used")))
			return true;
	return false;
}

static json_t *comm_json(const struct orh_nccl_comm *c)
{
	json_t *hcas = json_array();
	char t[96];

	orh_nccl_transports_text(c->transports, t, sizeof(t));
	for (size_t k = 0; k < c->n_hcas; k++)
		json_array_append_new(hcas, json_string(c->hcas[k]));
	return json_pack("{s:s, s:I, s:I, s:I, s:s, s:s, s:o, s:I}", "comm_id", c->comm_id,
			 "rank", (json_int_t)c->rank, "nranks", (json_int_t)c->nranks, "pid",
			 (json_int_t)c->pid, "network", c->network[0] ? c->network : "-",
			 "transports", t[0] ? t : "-", "hcas", hcas, "connections",
			 (json_int_t)c->channels);
}

/* The table's word for what NCCL used: the flag first, then the network transport */
static const char *used_word(unsigned bits, bool flagged)
{
	return flagged ? "Socket!" : (bits & ORH_NCCL_T_IB_GDR) ? "IB+GDR"
		: (bits & ORH_NCCL_T_IB) ? "IB" : (bits & ORH_NCCL_T_SOCKET) ? "Socket"
		: (bits & ORH_NCCL_T_NET_OTHER) ? "NET" : (bits & ORH_NCCL_T_P2P) ? "P2P"
		: (bits & ORH_NCCL_T_SHM) ? "SHM" : "-";
}

/* What NCCL used in a running container, read through its root (/proc/PID/root, the
 * capture directory alone, bounded: orh_nccl_used_read), into rec's "nccl_used"; the
 * decision's flag (RDMA given, NET/Socket used) into its warnings. The table's word. */
static const char *set_nccl_used(json_t *rec, const struct view *v, bool alive)
{
	_cleanup_close_ int rootfd = -1;
	struct orh_nccl_used *u = NULL;
	struct orh_err err = { 0 };
	json_t *pid = json_object_get(rec, "pid"), *out, *comms;
	unsigned bits = 0;
	char path[PATH_MAX], flag[256];
	bool flagged;
	const char *word;

	if (!alive || !json_is_integer(pid) || json_integer_value(pid) <= 0)
		return "-";
	snprintf(path, sizeof(path), "%s/%lld/root", v->proc, (long long)json_integer_value(pid));
	u = orh_xcalloc(1, sizeof(*u));
	if (orh_rootfs_open(path, &rootfd, &err) < 0 || orh_nccl_used_read(rootfd, u, &err) < 0) {
		const char *why = err.code == ENOENT ? "none: no " ORH_NCCL_RECORD_DIR
							" in the container" : err.msg;

		json_object_set_new(rec, "nccl_used", json_pack("{s:s}", "capture", why));
		free(u);
		return "-";
	}
	comms = json_array();
	for (size_t i = 0; i < u->n_comms; i++) {
		bits |= u->comms[i].transports;
		json_array_append_new(comms, comm_json(&u->comms[i]));
	}
	flagged = orh_nccl_used_flag(u, rdma_given(rec), flag, sizeof(flag));
	out = json_pack("{s:s, s:I, s:b, s:o, s:I, s:b}", "capture", ORH_NCCL_RECORD_DIR, "files",
			(json_int_t)u->files, "truncated", u->truncated, "communicators", comms,
			"communicators_left_out", (json_int_t)u->comms_dropped, "socket_with_rdma",
			flagged);
	json_object_set_new(rec, "nccl_used", out);
	if (flagged) {
		json_t *w = json_object_get(rec, "warnings");

		if (!json_is_array(w)) {
			w = json_array();
			json_object_set_new(rec, "warnings", w);
		}
		json_array_append_new(w, json_string(flag));
	}
	word = used_word(bits, flagged);
	free(u);
	return word;
}

/* The HCA ports the plan uses: the first, and how many more ("mlx5_1:1 +7"). */
static void hcas(const json_t *rec, char *out, size_t size)
{
	const json_t *ports = json_object_get(json_object_get(rec, "plan"), "ports"), *p;
	size_t i, used = 0;

	snprintf(out, size, "-");
	json_array_foreach(ports, i, p) {
		if (!json_is_true(json_object_get(p, "used")))
			continue;
		if (used++ == 0)
			snprintf(out, size, "%s:%lld", json_string_value(json_object_get(p, "hca")),
				 (long long)json_integer_value(json_object_get(p, "port")));
	}
	if (used > 1)
		snprintf(out + strlen(out), size - strlen(out), " +%zu", used - 1);
}

/* One record, readable: a line per value, named by its path ("plan.ports[1].hca"). */
static void print_flat(const char *prefix, const json_t *v)
{
	char name[256];
	const char *key;
	const json_t *e;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, e) {
			snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", key);
			print_flat(name, e);
		}
		return;
	}
	if (json_is_array(v)) {
		if (json_array_size(v) == 0)
			print_text(prefix, 0, -1, ": -\n");
		json_array_foreach(v, i, e) {
			snprintf(name, sizeof(name), "%s[%zu]", prefix, i);
			print_flat(name, e);
		}
		return;
	}
	_cleanup_json_text_ char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY);

	print_text(prefix, 0, -1, ": ");
	print_text(json_is_string(v) ? json_string_value(v) : text ? text : "?", 0, -1, "\n");
}

static const char *str_of(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "?";
}

/* Where each HCA port the plan uses came from (the record's plan.ports[].from and claim):
 * "hca mlx5_1:1: claim rdma (of a template), request nic, driver ..., device mlx5-1" */
static void print_sources(const json_t *rec)
{
	const json_t *ports = json_object_get(json_object_get(rec, "plan"), "ports"), *p;
	char name[160], text[1200];
	size_t i;

	json_array_foreach(ports, i, p) {
		const json_t *c = json_object_get(p, "claim");

		if (!json_is_true(json_object_get(p, "used")))
			continue;
		snprintf(name, sizeof(name), "hca %s:%lld", str_of(p, "hca"),
			 (long long)json_integer_value(json_object_get(p, "port")));
		if (json_is_object(c))
			snprintf(text, sizeof(text), "claim %s%s, request %s, driver %s, device %s",
				 str_of(c, "name"), json_is_true(json_object_get(c, "template"))
				 ? " (of a template)" : "", str_of(c, "request"),
				 str_of(c, "driver"), str_of(c, "device"));
		else
			snprintf(text, sizeof(text), "%s", str_of(p, "from"));
		print_text(name, 0, -1, ": ");
		print_text(text, 0, -1, "\n");
	}
}

static void limit_text(const json_t *v, char *out, size_t size)
{
	if (json_is_string(v))
		snprintf(out, size, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(out, size, "%lld", (long long)json_integer_value(v));
	else
		snprintf(out, size, "-");
}

static void row(const json_t *rec, const char *alive, const char *nccl)
{
	const json_t *act = json_object_get(rec, "activation");
	const json_t *after = json_object_get(json_object_get(rec, "memlock"), "after");
	char h[256], ml[32];

	hcas(rec, h, sizeof(h));
	limit_text(json_object_get(after, "soft"), ml, sizeof(ml));
	print_text(json_string_value(json_object_get(rec, "id")), 16, 16, " ");
	print_text(json_string_value(json_object_get(rec, "stage")), 17, -1, " ");
	print_text(json_string_value(json_object_get(act, "result")), 10, -1, " ");
	print_text(h, 14, -1, " ");
	print_text(ml, 12, -1, " ");
	printf("%-8zu ", json_array_size(json_object_get(rec, "warnings")));
	print_text(nccl, 8, -1, " ");
	printf("%s\n", alive);
}

/* The ids of the state directories under run_dir (json array). */
static json_t *list_ids(const char *run_dir)
{
	DIR *dir = opendir(run_dir);
	json_t *ids = json_array();
	char id[NAME_MAX + 1];
	struct dirent *de;

	while (dir && (de = readdir(dir)))
		if (orh_state_id_of_dir(de->d_name, id))
			json_array_append_new(ids, json_string(id));
	if (dir)
		closedir(dir);
	return ids;
}

/* The one id that id_or_prefix is, or a prefix of: its index in ids, -1 none, -2 many. */
static int find_id(const json_t *ids, const char *want)
{
	size_t i, n = strlen(want);
	const json_t *v;
	int found = -1;

	json_array_foreach(ids, i, v) {
		if (!strcmp(json_string_value(v), want))
			return (int)i;
		if (!strncmp(json_string_value(v), want, n))
			found = found == -1 ? (int)i : -2;
	}
	return found;
}

static int show_one(const char *run_dir, const json_t *ids, const char *want, bool as_json,
		    const struct view *v)
{
	int k = find_id(ids, want);
	const char *id = json_string_value(json_array_get(ids, (size_t)(k < 0 ? 0 : k)));
	json_t *rec;

	if (k < 0) {
		_cleanup_free_ char *w = orh_text_escape(want);
		_cleanup_free_ char *d = orh_text_escape(run_dir);

		fprintf(stderr, "oci-rdma-hook: inspect: %s container id '%s' in '%s'\n",
			k == -1 ? "no record of a" : "more than one record for the", w, d);
		return ORH_EXIT_FAIL;
	}
	rec = load_record(run_dir, id);
	if (!rec) {
		_cleanup_free_ char *dir = orh_state_dir_path(run_dir, id);
		_cleanup_free_ char *d = orh_text_escape(dir ? dir : run_dir);

		fprintf(stderr, "oci-rdma-hook: inspect: '%s/" ORH_RECORD_FILE
			"': missing or not JSON\n", d);
		return ORH_EXIT_FAIL;
	}
	set_nccl_used(rec, v, !strcmp(set_alive(rec, v), "yes"));
	if (as_json) {
		json_dumpf(rec, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		print_flat("", rec);
		print_sources(rec);
	}
	json_decref(rec);
	return ORH_EXIT_OK;
}

static int show_all(const char *run_dir, const json_t *ids, bool as_json, const struct view *v)
{
	json_t *all = json_array(), *id;
	size_t i;

	if (!as_json)
		printf("%-16s %-17s %-10s %-14s %-12s %-8s %-8s %s\n", "ID", "WAY IN", "ACTIVATED",
		       "HCAS", "MEMLOCK", "WARNINGS", "NCCL", "ALIVE");
	json_array_foreach(ids, i, id) {
		json_t *rec = load_record(run_dir, json_string_value(id));
		const char *alive, *nccl;

		if (!rec)
			continue;
		alive = set_alive(rec, v);
		nccl = set_nccl_used(rec, v, !strcmp(alive, "yes"));
		if (!as_json)
			row(rec, alive, nccl);
		json_array_append_new(all, rec);
	}
	if (as_json) {
		json_dumpf(all, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	}
	json_decref(all);
	return ORH_EXIT_OK;
}

int orh_cmd_inspect(struct orh_ctx *ctx, int argc, char **argv)
{
	const char *run_dir = ORH_RUN_DIR, *id = NULL;
	struct view v = { .proc = "/proc" };
	bool as_json = false;
	json_t *ids;
	int rc;

	(void)ctx;
	const struct orh_opt opts[] = { { "--json", NULL, &as_json }, { "--run-dir", &run_dir, NULL } };
	const struct orh_args a = { .cmd = "inspect", .positional = &id };

	if (orh_args_parse(&a, argc, argv, 1, opts, ORH_ARRAY_SIZE(opts), NULL))
		return ORH_EXIT_USAGE;
	/* from another pid namespace (a pod without the host's pids) the records' pids mean
	 * nothing: the sweep removes none of theirs, and their liveness is unknown here */
	orh_record_sweep(run_dir, v.proc, NULL, 0);
	orh_ns_ids_read(v.proc, &v.here);
	ids = list_ids(run_dir);
	rc = id ? show_one(run_dir, ids, id, as_json, &v) : show_all(run_dir, ids, as_json, &v);
	json_decref(ids);
	return rc;
}
