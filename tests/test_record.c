/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record (src/apply/record.c, record_text.c): the JSON text written from a decision and
 * a stage's results, the same as json_dumps() of the jansson tree it was built as before
 * (record_tree.c),
 * the checks of the container's own context on values, the parsing of /proc/<pid>/limits
 * and stat, the names of state directories, and the sweep of a run dir (a temporary
 * directory; no root needed).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "orh/apply/record.h"
#include "orh/apply/statedir.h"
#include "orh/apply/sweep.h"
#include "orh/apply/sysview.h"
#include "record_tree.h"

static struct orh_port ports[2];
static struct orh_device devs[2];
static struct orh_port_choice choices[2];
static struct orh_decision d;

/* mlx5_0 (uverbs0, 231:192) port 1 RoCE ACTIVE, used, GID index 3; mlx5_1 (uverbs1)
 * port 1 DOWN, left out. */
static void setup(void)
{
	memset(&d, 0, sizeof(d));
	memset(ports, 0, sizeof(ports));
	memset(devs, 0, sizeof(devs));
	for (int i = 0; i < 2; i++) {
		snprintf(devs[i].name, sizeof(devs[i].name), "mlx5_%d", i);
		devs[i].uverbs = (struct orh_chardev){ .major = 231, .minor = 192 + (unsigned)i,
						      .present = true };
		ports[i].num = 1;
		ports[i].link_layer = ORH_LL_ETHERNET;
		ports[i].state = i ? ORH_PORT_DOWN : ORH_PORT_ACTIVE;
		snprintf(ports[i].state_text, sizeof(ports[i].state_text), i ? "DOWN" : "ACTIVE");
		choices[i] = (struct orh_port_choice){ .dev = &devs[i], .port = &ports[i],
						       .used = !i, .gid_index = i ? -1 : 3 };
		snprintf(choices[i].reason, sizeof(choices[i].reason), i ? "not ACTIVE" : "ok");
	}
	d.act = ORH_ACT_REQUESTED;
	d.asked = true;
	snprintf(d.why, sizeof(d.why), "annotation oci-rdma-hook/enable=true");
	d.have_plan = true;
	d.plan.ports = choices;
	d.plan.n_ports = 2;
	d.memlock.set = true;
	d.memlock.limit = ORH_MEMLOCK_UNLIMITED;
	d.memlock.need = ORH_MEMLOCK_NEED;
	orh_strv_pushf(&d.warnings, "from the decision");
}

static void teardown(void)
{
	orh_strv_free(&d.warnings);
}

TestSuite(record, .init = setup, .fini = teardown);

Test(record, build_holds_what_was_done)
{
	struct orh_strv warn = { 0 }, kept = { 0 };
	struct orh_record_in in = {
		.id = "c1", .stage = "createRuntime", .pid = 42, .start_time = 777, .d = &d,
		.netns_if = "eth0", .nodes_created = 2, .nodes_kept = 1, .nodes_bound = 0,
		.cgroup = "granted", .memlock_known = true, .memlock_soft_before = 65536,
		.memlock_hard_before = 8388608, .memlock_soft_after = 8388608,
		.memlock_hard_after = 8388608, .memlock = "soft limit raised",
		.spec_devices = -1, .conf = "written", .conf_added = 3, .conf_bound_from = "",
		.conf_kept = &kept, .warnings = &warn, .n_steps = 1,
		.step_names = { "device nodes" }, .step_ms = { 1.5 }, .total_ms = 2.0,
		.ns = { .pid = 4026531836ULL, .mnt = 4026531841ULL },
		.sysfs_view = "0123456789abcdef",
	};
	json_t *rec, *p0;
	char *text;

	orh_strv_pushf(&warn, "from the stage");
	orh_strv_pushf(&kept, "NCCL_DEBUG=INFO");
	text = orh_record_text(&in, NULL);
	rec = json_loads(text, 0, NULL);
	free(text);
	cr_assert_str_eq(json_string_value(json_object_get(rec, "stage")), "createRuntime");
	cr_assert_eq(json_integer_value(json_object_get(rec, "pid")), 42);
	cr_assert_eq(json_integer_value(json_object_get(rec, "start_time")), 777);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(rec, "activation"),
							   "result")), "requested");
	p0 = json_array_get(json_object_get(json_object_get(rec, "plan"), "ports"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(p0, "hca")), "mlx5_0");
	cr_assert_eq(json_integer_value(json_object_get(p0, "gid_index")), 3);
	cr_assert_null(json_object_get(json_array_get(json_object_get(json_object_get(rec,
		"plan"), "ports"), 1), "gid_index"));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(rec, "plan"),
							   "netns_default_if")), "eth0");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(rec,
		"memlock"), "before"), "soft")), 65536);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(rec, "plan"),
							   "memlock")), "unlimited");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(json_object_get(rec,
		"nccl_conf"), "image_lines_kept"), 0)), "NCCL_DEBUG=INFO");
	cr_assert_eq(json_array_size(json_object_get(rec, "warnings")), 2);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(rec, "warnings"), 1)),
			 "from the stage");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(rec, "nodes"),
							"created")), 2);
	cr_assert_eq(json_integer_value(json_object_get(rec, "pid_ns")), 4026531836LL);
	cr_assert_eq(json_integer_value(json_object_get(rec, "mnt_ns")), 4026531841LL);
	cr_assert_str_eq(json_string_value(json_object_get(rec, "sysfs_view")),
			 ORH_SYSVIEW_DIR "/0123456789abcdef");
	json_decref(rec);
	orh_strv_free(&warn);
	orh_strv_free(&kept);
}

Test(record, memlock_check)
{
	char msg[256];

	cr_assert(orh_check_memlock(1 << 20, ORH_MEMLOCK_NEED, msg, sizeof(msg)));
	cr_assert(strstr(msg, "1048576 bytes"), "%s", msg);
	cr_assert_not(orh_check_memlock(8 << 20, ORH_MEMLOCK_NEED, msg, sizeof(msg)));
	cr_assert_not(orh_check_memlock(UINT64_MAX, ORH_MEMLOCK_NEED, msg, sizeof(msg)));
}

Test(record, ports_down_only_when_every_given_port_is)
{
	char msg[256];

	cr_assert_not(orh_check_ports_down(&d, msg, sizeof(msg)), "nothing given");
	choices[1].given = true; /* uverbs1, 231:193 (rule 8: given_devices()) */
	cr_assert(orh_check_ports_down(&d, msg, sizeof(msg)));
	cr_assert(strstr(msg, "mlx5_1:1 DOWN"), "%s", msg);
	choices[0].given = true;
	cr_assert_not(orh_check_ports_down(&d, msg, sizeof(msg)), "one given port is ACTIVE");
}

Test(record, gid_for_the_container_address)
{
	struct in_addr a = { 0 };
	char msg[256];

	cr_assert_not(orh_check_gid(&d, msg, sizeof(msg)), "host network");
	d.facts.own_netns = true;
	d.facts.addrs = &a;
	d.facts.n_addrs = 1;
	snprintf(d.facts.netns_default_if, IFNAMSIZ, "eth0");
	cr_assert(orh_check_gid(&d, msg, sizeof(msg)));
	cr_assert(strstr(msg, "eth0"), "%s", msg);
	choices[0].gid_from_container = true;
	cr_assert_not(orh_check_gid(&d, msg, sizeof(msg)));
	ports[0].link_layer = ORH_LL_INFINIBAND;
	choices[0].gid_from_container = false;
	cr_assert_not(orh_check_gid(&d, msg, sizeof(msg)), "InfiniBand has no GID to choose");
}

Test(record, proc_files)
{
	const char *limits =
		"Limit                     Soft Limit           Hard Limit           Units     \n"
		"Max core file size        0                    unlimited            bytes     \n"
		"Max locked memory         8388608              unlimited            bytes     \n";
	uint64_t soft = 0, hard = 0;
	unsigned long long t = 0;

	cr_assert_eq(orh_limits_memlock(limits, &soft, &hard), 0);
	cr_assert_eq(soft, 8388608);
	cr_assert_eq(hard, UINT64_MAX);
	cr_assert_eq(orh_limits_memlock("Max core file size 0 0\n", &soft, &hard), -EINVAL);
	cr_assert_eq(orh_stat_start_time("12 (a b) c) S 1 12 12 0 -1 4194560 100 0 0 0 0 0 0 0 "
					 "20 0 1 0 98765 1000 ...", &t), 0);
	cr_assert_eq(t, 98765);
	cr_assert_eq(orh_stat_start_time("12 (x) S 1", &t), -EINVAL);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* This process's start time. */
static unsigned long long my_start_time(void)
{
	unsigned long long me = 0;
	char text[1024];
	int fd = open("/proc/self/stat", O_RDONLY);

	text[read(fd, text, sizeof(text) - 1)] = '\0';
	close(fd);
	cr_assert_eq(orh_stat_start_time(text, &me), 0);
	return me;
}

/* A record of this format, written in this process's pid namespace, of the process pid
 * with start time t (this process and its own: alive; another time: gone), at
 * run/name/record.json (the directory made). */
static void put_record(const char *run, const char *name, long pid, unsigned long long t)
{
	struct orh_ns_ids here;
	char p[512], text[256];

	orh_ns_ids_read("/proc", &here);
	snprintf(p, sizeof(p), "%s/%s", run, name);
	cr_assert_eq(mkdir(p, 0700), 0, "%s", p);
	snprintf(p, sizeof(p), "%s/%s/record.json", run, name);
	snprintf(text, sizeof(text), "{\"version\": %d, \"pid\": %ld, \"start_time\": %llu, "
		 "\"pid_ns\": %llu}", ORH_RECORD_VERSION, pid, t, here.pid);
	write_file(p, text);
}

static bool there(const char *run, const char *name)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", run, name);
	return access(p, F_OK) == 0;
}

static void remove_run(const char *run)
{
	char p[512];

	snprintf(p, sizeof(p), "chmod -R u+w '%s'; rm -rf '%s'", run, run);
	cr_assert_eq(system(p), 0);
}

/* A run dir: "alive" (this process, its start time), "gone" (a pid with another start
 * time), "fresh" (no record, new), "orphan" (no record, old), "foreign" (gone, holds a
 * file not ours), "link" (a symlink to a directory of a gone record). */
Test(record, sweep_removes_only_the_dead_and_ours)
{
	char run[] = "/tmp/orh-rec-XXXXXX", other[] = "/tmp/orh-rec-other-XXXXXX", p[512];
	unsigned long long me = my_start_time();
	struct timeval old[2] = { { 1000, 0 }, { 1000, 0 } };

	cr_assert_not_null(mkdtemp(run));
	cr_assert_not_null(mkdtemp(other));
	const char *names[] = { "alive", "gone", "fresh", "orphan", "foreign" };
	put_record(run, "alive", getpid(), me);
	put_record(run, "gone", getpid(), me + 1);
	put_record(run, "foreign", 1, 1);
	snprintf(p, sizeof(p), "%s/fresh", run);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/orphan", run);
	cr_assert_eq(mkdir(p, 0700), 0);
	char rec[512];
	snprintf(rec, sizeof(rec), "%s/gone/nccl.conf", run);
	write_file(rec, "NCCL_IB_HCA=mlx5_0\n");
	snprintf(rec, sizeof(rec), "%s/foreign/notours", run);
	write_file(rec, "x");
	snprintf(rec, sizeof(rec), "%s/orphan", run);
	cr_assert_eq(utimes(rec, old), 0);
	snprintf(rec, sizeof(rec), "%s/record.json", other);
	write_file(rec, "{\"pid\": 1, \"start_time\": 1}");
	snprintf(rec, sizeof(rec), "%s/link", run);
	cr_assert_eq(symlink(other, rec), 0);

	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, 0), 2);
	for (size_t i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/%s", run, names[i]);
		bool gone = !strcmp(names[i], "gone") || !strcmp(names[i], "orphan");
		cr_assert_eq(access(p, F_OK) != 0, gone, "%s", names[i]);
	}
	snprintf(rec, sizeof(rec), "%s/foreign/notours", run);
	cr_assert_eq(access(rec, F_OK), 0, "a file not ours stays");
	snprintf(rec, sizeof(rec), "%s/record.json", other);
	cr_assert_eq(access(rec, F_OK), 0, "a symlink is not followed");
	snprintf(p, sizeof(p), "rm -rf '%s' '%s'", run, other);
	cr_assert_eq(system(p), 0);
}

/* A container start's sweep runs at most once in its interval: the first one marks the
 * run dir (ORH_RECORD_SWEPT), one right after it reads nothing, and one that must run
 * (inspect's) does. */
Test(record, sweep_of_a_container_start_runs_once_a_minute)
{
	char run[] = "/tmp/orh-rec-XXXXXX", p[512];
	struct stat st;

	cr_assert_not_null(mkdtemp(run));
	put_record(run, "g1", 1, 1);
	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, ORH_RECORD_SWEEP_EVERY), 1);
	snprintf(p, sizeof(p), "%s/%s", run, ORH_RECORD_SWEPT);
	cr_assert_eq(stat(p, &st), 0, "the sweep left no mark");
	put_record(run, "g2", 1, 1);
	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, ORH_RECORD_SWEEP_EVERY), 0);
	snprintf(p, sizeof(p), "%s/g2", run);
	cr_assert_eq(access(p, F_OK), 0, "a sweep within the minute ran");
	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, 0), 1);
	cr_assert_neq(access(p, F_OK), 0, "the sweep that must run did not");
	snprintf(p, sizeof(p), "rm -rf '%s'", run);
	cr_assert_eq(system(p), 0);
}

Test(record, write_is_atomic_and_readable)
{
	char run[] = "/tmp/orh-rec-w-XXXXXX", dir[256], path[300];
	struct orh_err err = { 0 };
	struct orh_record_in rec = { .id = "c1", .stage = "createRuntime", .d = &d,
				     .nodes_created = -1, .spec_devices = -1 };
	json_t *back;
	struct stat st;

	cr_assert_not_null(mkdtemp(run));
	snprintf(dir, sizeof(dir), "%s/c1", run);
	cr_assert_eq(orh_record_write(dir, &rec, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_record_write(dir, &rec, &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/record.json", dir);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0644);
	back = json_load_file(path, 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(back, "id")), "c1");
	json_decref(back);
	snprintf(path, sizeof(path), "rm -rf '%s'", run);
	cr_assert_eq(system(path), 0);
}

Test(record, the_state_entries_the_hook_makes)
{
	cr_assert(orh_state_entry_ours("nccl.conf"));
	cr_assert(orh_state_entry_ours("record.json"));
	cr_assert(orh_state_entry_ours(".nccl.conf.orh-Ab12Cd"));
	cr_assert(orh_state_entry_ours(".record.json.orh-Ab12Cd"));
	cr_assert_not(orh_state_entry_ours("not-ours"));
	cr_assert_not(orh_state_entry_ours("nccl.conf.bak"));
	cr_assert_not(orh_state_entry_ours(".nccl.conf"));
	cr_assert_not(orh_state_entry_ours("decision.json"));
}

/* The ids runc accepts name a state directory; one starting with a dot gets a name of its
 * own (the run dir's own entries start with one), and back. */
Test(record, container_ids_as_runc_accepts_them)
{
	char name[NAME_MAX + 1], id[NAME_MAX + 1], longest[NAME_MAX + 2];
	const char *good[] = { "job+1.a_b-c", "A", "..x", ".hidden", "a..b", "0123-_+." };
	const char *bad[] = { "", ".", "..", "a/b", "a b", "a:b", "é", "a\nb" };
	char *path;

	for (size_t i = 0; i < ORH_ARRAY_SIZE(good); i++)
		cr_assert(orh_state_id_usable(good[i]), "%s", good[i]);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(bad); i++)
		cr_assert_not(orh_state_id_usable(bad[i]), "%s", bad[i]);
	memset(longest, 'a', NAME_MAX);
	longest[NAME_MAX] = '\0';
	cr_assert(orh_state_id_usable(longest));
	longest[NAME_MAX] = 'a';
	longest[NAME_MAX + 1] = '\0';
	cr_assert_not(orh_state_id_usable(longest), "longer than a file name");

	cr_assert(orh_state_dir_name("job+1.a_b-c", name));
	cr_assert_str_eq(name, "job+1.a_b-c");
	cr_assert(orh_state_dir_name(".sysfs", name));
	cr_assert_str_eq(name, "@sysfs");
	cr_assert(orh_state_id_of_dir(name, id));
	cr_assert_str_eq(id, ".sysfs");
	cr_assert(orh_state_id_of_dir("job+1.a_b-c", id));
	cr_assert_str_eq(id, "job+1.a_b-c");
	cr_assert_not(orh_state_id_of_dir(".swept", id), "the run dir's own");
	cr_assert_not(orh_state_id_of_dir(".sysfs", id), "the run dir's own");
	cr_assert_not(orh_state_dir_name("..", name));
	path = orh_state_dir_path("/run/x", "..y");
	cr_assert_str_eq(path, "/run/x/@.y");
	free(path);
	cr_assert_null(orh_state_dir_path("/run/x", "a/b"));
}

/* A fake proc tree whose self/ns/pid and self/ns/mnt are files of its own: what a process
 * of another pid namespace with its own /proc (unshare -p -f --mount-proc) sees. */
static void fake_proc(char *proc)
{
	char p[512];

	snprintf(p, sizeof(p), "mkdir -p %s/self/ns && touch %s/self/ns/pid %s/self/ns/mnt",
		 proc, proc, proc);
	cr_assert_eq(system(p), 0);
}

/* From another pid namespace the sweep removes no record's directory, gone or not, and
 * their liveness is unknown there; a record of another format version, or one that names
 * no namespace, is never swept, not even from the writer's. */
Test(record, a_record_of_another_namespace_or_version_is_never_swept)
{
	char run[] = "/tmp/orh-rec-ns-XXXXXX", proc[] = "/tmp/orh-rec-proc-XXXXXX", p[512];
	unsigned long long me = my_start_time();
	struct orh_ns_ids here, there_ns;
	json_t *rec;

	cr_assert_not_null(mkdtemp(run));
	cr_assert_not_null(mkdtemp(proc));
	fake_proc(proc);
	put_record(run, "alive", getpid(), me);
	put_record(run, "gone", getpid(), me + 1);
	orh_ns_ids_read(proc, &there_ns);
	orh_ns_ids_read("/proc", &here);
	cr_assert_neq(there_ns.pid, here.pid);

	cr_assert_eq(orh_record_sweep(run, proc, NULL, 0), 0);
	cr_assert(there(run, "alive") && there(run, "gone"), "removed from another namespace");
	snprintf(p, sizeof(p), "%s/alive/record.json", run);
	rec = orh_record_load_at(AT_FDCWD, p);
	cr_assert_eq(orh_record_liveness(rec, proc, &there_ns), ORH_ALIVE_UNKNOWN);
	cr_assert_eq(orh_record_liveness(rec, "/proc", &here), ORH_ALIVE_YES);
	json_decref(rec);

	snprintf(p, sizeof(p), "%s/v2", run);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/v2/record.json", run);
	char text[256];
	snprintf(text, sizeof(text), "{\"version\": %d, \"pid\": 1, \"start_time\": 1, "
		 "\"pid_ns\": %llu}", ORH_RECORD_VERSION + 1, here.pid);
	write_file(p, text);
	snprintf(p, sizeof(p), "%s/nons", run);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/nons/record.json", run);
	write_file(p, "{\"version\": 1, \"pid\": 1, \"start_time\": 1}");

	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, 0), 1, "the writer's sweeps the gone");
	cr_assert(there(run, "alive") && !there(run, "gone"));
	cr_assert(there(run, "v2"), "a version it does not know");
	cr_assert(there(run, "nons"), "a record that names no namespace");
	remove_run(run);
	remove_run(proc);
}

/* Every stale directory goes within ceil(N / ORH_RECORD_SWEEP_MAX) sweeps, however many
 * live ones there are: 400 live and 100 gone, mixed, take 2. */
Test(record, the_sweep_is_fair)
{
	char run[] = "/tmp/orh-rec-fair-XXXXXX", name[32];
	unsigned long long me = my_start_time();
	size_t left = 0;

	cr_assert_not_null(mkdtemp(run));
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "c%03d", i);
		put_record(run, name, getpid(), i % 5 == 2 ? me + 1 : me);
	}
	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, 0) +
		     orh_record_sweep(run, "/proc", NULL, 0), 100);
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "c%03d", i);
		cr_assert_eq(there(run, name), i % 5 != 2, "%s", name);
		left += there(run, name);
	}
	cr_assert_eq(left, 400);
	remove_run(run);
}

/* FIFOs where the sweep, inspect or a stage reads (the mark, a record) hold none of them:
 * a regular file alone is opened, without blocking. */
Test(record, nothing_in_the_run_dir_blocks, .timeout = 30)
{
	char run[] = "/tmp/orh-rec-fifo-XXXXXX", p[512];
	struct stat st;

	cr_assert_not_null(mkdtemp(run));
	snprintf(p, sizeof(p), "%s/%s", run, ORH_RECORD_SWEPT);
	cr_assert_eq(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/c1", run);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/c1/record.json", run);
	cr_assert_eq(mkfifo(p, 0600), 0);
	cr_assert_null(orh_record_load_at(AT_FDCWD, p));
	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, ORH_RECORD_SWEEP_EVERY), 0);
	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, 0), 0);
	snprintf(p, sizeof(p), "%s/%s", run, ORH_RECORD_SWEPT);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISREG(st.st_mode), "the mark is a file again");
	remove_run(run);
}

/* A record that names a sysfs view links its container to it; the sweep removes a view
 * once no container whose state directory is left links to it and it was not used lately:
 * that of a container gone goes after its directory, one in use stays. */
Test(record, views_are_swept_with_the_last_link)
{
	char run[] = "/tmp/orh-rec-view-XXXXXX", p[512], target[256] = "";
	const char *live = "aaaaaaaaaaaaaaaa", *dead = "bbbbbbbbbbbbbbbb";
	unsigned long long me = my_start_time();
	struct timeval old[2] = { { 1000, 0 }, { 1000, 0 } };
	struct orh_err err = { 0 };
	struct orh_ns_ids here;

	cr_assert_not_null(mkdtemp(run));
	orh_ns_ids_read("/proc", &here);
	for (int i = 0; i < 2; i++) {
		struct orh_record_in rec = { .id = i ? "gone" : "alive", .stage = "createRuntime",
					     .d = &d, .pid = getpid(), .start_time = me + (unsigned)i,
					     .ns = { .pid = here.pid }, .nodes_created = -1,
					     .spec_devices = -1 };

		memcpy(rec.sysfs_view, i ? dead : live, sizeof(rec.sysfs_view));
		/* a view, last used long ago */
		snprintf(p, sizeof(p), "mkdir -p %s/" ORH_SYSVIEW_SUBDIR "/%s/infiniband", run,
			 i ? dead : live);
		cr_assert_eq(system(p), 0);
		snprintf(p, sizeof(p), "%s/" ORH_SYSVIEW_SUBDIR "/%s", run, i ? dead : live);
		cr_assert_eq(utimes(p, old), 0);
		snprintf(p, sizeof(p), "%s/%s", run, i ? "gone" : "alive");
		cr_assert_eq(orh_record_write(p, &rec, &err), 0, "%s", err.msg);
	}
	snprintf(p, sizeof(p), "%s/" ORH_SYSVIEW_SUBDIR "/" ORH_SYSVIEW_LINKS "/alive", run);
	memset(target, 0, sizeof(target));
	cr_assert_gt(readlink(p, target, sizeof(target) - 1), 0);
	cr_assert_str_eq(target, "../aaaaaaaaaaaaaaaa");
	cr_assert_not(there(run, "alive/sysfs-view"), "nothing more in the state directory");

	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, 0), 2, "the gone and its view");
	cr_assert(there(run, "alive") && !there(run, "gone"));
	cr_assert(there(run, ORH_SYSVIEW_SUBDIR "/aaaaaaaaaaaaaaaa"), "linked from a live one");
	cr_assert_not(there(run, ORH_SYSVIEW_SUBDIR "/bbbbbbbbbbbbbbbb"));
	remove_run(run);
}

/* The view that the spec edit mounts is the record's. */
Test(record, the_spec_names_its_view)
{
	struct orh_record_in in = { 0 };
	json_t *spec = json_pack("{s:[{s:s, s:s}, {s:s, s:s}]}", "mounts", "destination",
				 "/proc", "source", "proc", "destination",
				 "/sys/class/infiniband", "source",
				 ORH_SYSVIEW_DIR "/0123456789abcdef/infiniband");

	orh_record_spec(&in, spec);
	cr_assert_str_eq(in.sysfs_view, "0123456789abcdef");
	json_decref(spec);
	spec = json_pack("{s:[{s:s, s:s}]}", "mounts", "destination", "/x", "source",
			 ORH_SYSVIEW_DIR "/nothex/infiniband");
	orh_record_spec(&in, spec);
	cr_assert_str_eq(in.sysfs_view, "");
	json_decref(spec);
}

/* The text orh_record_text() writes reads back as the tree the record was built as
 * (record_tree.c; times to the microsecond): with strings that need escapes, and with
 * strings that are not UTF-8 wherever a container, its image or the node can put one (an interface
 * name, a line of the image's /etc/nccl.conf, a path), left out as the tree left them
 * out; with reals that are not finite, steps named twice, the shim's time handed over. */
static void same_as_tree(const struct orh_record_in *in, int c)
{
	for (int tries = 0; tries < 3; tries++) {
		time_t t0 = time(NULL); /* a bundle's "since" is the time of writing */
		json_t *tree = record_tree_build(in);
		size_t len = 0;
		char *got = orh_record_text(in, &len), why[256] = "";

		if (time(NULL) != t0) {
			json_decref(tree);
			free(got);
			continue;
		}
		cr_assert_eq(got == NULL, tree == NULL, "case %d: %s", c, got ? got : "(none)");
		if (got) {
			cr_assert(record_text_is_tree(got, len, tree, why, sizeof(why)),
				  "case %d: %s: %s", c, why, got);
			cr_assert_eq(len, strlen(got));
		}
		json_decref(tree);
		free(got);
		return;
	}
	cr_assert_fail("case %d: the clock moved in every try", c);
}

Test(record, text_is_the_trees_text)
{
	static const char *const bad[] = { "eth\xff", "\xc0\xaf", "a\xed\xa0\x80", "x\xe4\xb8" };
	static const char *const nasty = "q\"b\\s\n\t\x01\x1f\x7f \xc3\xa9 \xf0\x9f\x98\x80 /";
	struct orh_strv warn = { 0 }, kept = { 0 };
	struct orh_devnode nodes[3] = { { .path = "/dev/infiniband/uverbs0" },
					{ .path = "/dev/infiniband/rdma\xff" },
					{ .path = "/dev/infiniband/q\"" } };
	char ifname[16] = "";
	struct orh_env_entry env[1] = { { .name = "NCCL_SOCKET_IFNAME", .value = ifname } };
	struct stat st = { .st_dev = 2049, .st_ino = 1234567 };
	json_t *shim = json_pack("{s:{s:f}, s:f, s:s}", "steps", "node", 0.25, "until the record",
				 1.0 / 3, "n", nasty);
	struct orh_image_provider prov[2] = {
		{ .name = "mlx5", .state = ORH_PROVIDER_ABI_MISMATCH, .config = "/etc/x\x01",
		  .library = "/usr/lib/libmlx5-rdmav34.so\xff", .other = "/o\n", .other_abi = 25 },
		{ .name = "rxe", .state = ORH_PROVIDER_FOUND },
	};

	orh_strv_pushf(&warn, "%s", nasty);
	orh_strv_pushf(&warn, "%s", bad[0]);
	orh_strv_pushf(&warn, "last");
	orh_strv_pushf(&kept, "NCCL_DEBUG=INFO # \"x\"\t\\");
	orh_strv_pushf(&kept, "%s", bad[1]);
	orh_strv_pushf(&kept, "NCCL_IB_HCA=mlx5_0");
	orh_strv_pushf(&d.warnings, "%s", bad[2]);
	orh_strv_pushf(&d.warnings, "%s", nasty);
	orh_strv_pushf(&d.image_verdict.warnings, "image: %s %s", nasty, bad[3]);
	orh_strv_pushf(&d.image.notes, "note %s", bad[0]);
	d.plan.nodes = nodes;
	d.plan.n_nodes = 3;
	d.plan.env = env;
	d.plan.n_env = 1;
	d.facts.devs[0] = (struct orh_devnum){ .major = 231, .minor = 192 };
	d.facts.devs[1] = (struct orh_devnum){ .major = 4294967295u, .minor = 0 };
	d.facts.n_devs = 2;
	d.memlock.limit = 1ULL << 63; /* past INT64_MAX: written as the tree's integer */
	d.image_verdict.checked = true;
	d.image_verdict.devs[0] = (struct orh_image_dev){ &devs[0], "mlx5", &prov[0] };
	d.image_verdict.devs[1] = (struct orh_image_dev){ &devs[1], NULL, NULL };
	d.image_verdict.devs[2] = (struct orh_image_dev){ &devs[1], "rxe", &prov[1] };
	d.image_verdict.n_devs = 3;
	snprintf(d.image.verbs, sizeof(d.image.verbs), "/usr/lib/libibverbs.so.1\xfe");
	d.image.abi = 34;
	d.image.nccl[0] = (struct orh_image_nccl){ .version = "2.28.3", .path = "/p\x02\xff",
						   .package = "nvidia_nccl_cu12", .from =
						   ORH_NCCL_PIP, .pytorch = true };
	d.image.nccl[1] = (struct orh_image_nccl){ .version = "2.\xff", .path = "/lib" };
	d.image.nccl[2] = (struct orh_image_nccl){ .path = "/lib2" };
	d.image.n_nccl = 3;
	d.image.opens = 16;
	d.image.ms = 0.0123;
	/* image_supply: files from the node, one name that is not UTF-8 */
	{
		static struct orh_supply_file files[3] = {
			{ .host = "/usr/lib/libibverbs.so.1", .name = "libibverbs.so.1" },
			{ .host = "/usr/lib/q\"\x01", .name = "libnl-3.so.200" },
			{ .host = "/usr/lib/x", .name = "lib\xffrxe-rdmav34.so" },
		};

		d.supply.wanted = true;
		d.supply.supply = true;
		d.supply.verbs = true;
		for (size_t i = 0; i < 3; i++)
			d.supply.files[d.supply.n_files++] = &files[i];
		d.supply.providers[d.supply.n_providers++] = "rxe";
		d.supply.providers[d.supply.n_providers++] = "mlx\xff";
	}
	for (int c = 0; c < 12; c++) {
		struct orh_record_in in = {
			.id = "c\"1\\", .stage = "createRuntime", .pid = 42, .start_time = 777,
			.d = &d, .netns_if = c % 2 ? bad[0] : nasty, .nodes_created = 17,
			.nodes_kept = 0, .nodes_bound = 1, .cgroup = c % 3 ? "failed: \x1b[31m"
								      : bad[1],
			.memlock_known = true, .memlock_soft_before = 65536,
			.memlock_hard_before = UINT64_MAX, .memlock_soft_after = UINT64_MAX,
			.memlock_hard_after = UINT64_MAX, .memlock = c % 2 ? "raised" : bad[2],
			.spec_devices = c % 4 ? 3 : -1, .spec_memlock_set = c % 2,
			.spec_memlock = 1ULL << 40, .conf = c % 5 ? "written" : bad[3],
			.conf_added = 5, .conf_bound_from = c % 2 ? bad[0] : "/run/x", .conf_kept =
			&kept, .warnings = &warn, .n_steps = 5, .step_names = { "config", "nodes",
			c == 3 ? bad[1] : "config", "x", "nodes" }, .step_ms = { 0.5, 1e-7, 2.25,
			c == 4 ? NAN : 123456.789, 3 }, .total_ms = c == 5 ? INFINITY : 9.75,
			.ns = { .pid = 4026531836ULL, .mnt = c % 2 ? 0 : 18446744073709551615ULL },
			.edited_by = c % 3 ? "spec edit" : bad[0], .node_from = c % 2 ? "/run/n" :
			bad[3], .bundle = c % 4 == 1 ? bad[2] : nasty, .bundle_config = &st,
			.runtime_state = c % 2 ? bad[3] : "/run/runc/c1", .nodes_error = c == 6 ?
			nasty : c == 7 ? bad[0] : NULL, .sysfs_view = "0123456789abcdef",
			.shim_ms = c % 2 ? shim : NULL,
		};

		/* the places whose bad string takes an object or the whole record with it */
		snprintf(devs[0].name, sizeof(devs[0].name), c == 8 ? "mlx5\xff" : "mlx5_0");
		snprintf(ports[1].state_text, sizeof(ports[1].state_text), c == 9 ? "\xc3" : "DOWN");
		snprintf(d.why, sizeof(d.why), "%s", c == 10 ? bad[0] : nasty);
		snprintf(ifname, sizeof(ifname), "%s", c == 11 ? bad[1] : "=eth0");
		d.image_verdict.devs[2].provider = c == 9 ? bad[2] : "rxe";
		/* and the supply refused, with its reason */
		d.supply.supply = c % 2;
		snprintf(d.supply.why_not, sizeof(d.supply.why_not), "%s", c % 2 ? "" :
			 c % 4 ? nasty : bad[1]);
		same_as_tree(&in, c);
		if (c == 1) {
			size_t len = 0;
			char *got = orh_record_text(&in, &len);

			cr_assert(got && strstr(got, "\"supply\":{\"given\":true,\"libibverbs\":true,"
						"\"files\":[{\"name\":\"libibverbs.so.1\",\"from\":"
						"\"/usr/lib/libibverbs.so.1\"}"), "%s", got);
			free(got);
		}
		in.id = bad[c % 4];
		same_as_tree(&in, c + 100);
	}
	d.plan.nodes = NULL;
	d.plan.env = NULL;
	memset(&d.supply, 0, sizeof(d.supply));
	orh_strv_free(&d.image_verdict.warnings);
	orh_strv_free(&d.image.notes);
	orh_strv_free(&warn);
	orh_strv_free(&kept);
	json_decref(shim);
}
