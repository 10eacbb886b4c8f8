/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record (src/apply/record.c): the JSON built from a decision and a stage's results,
 * the checks of the container's own context on values, the parsing of /proc/<pid>/limits
 * and stat, and the sweep of a run dir (a temporary directory; no root needed).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "orh/record.h"

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
	d.plan.set_memlock = true;
	d.plan.memlock = ORH_MEMLOCK_UNLIMITED;
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
	};
	json_t *rec, *p0;

	orh_strv_pushf(&warn, "from the stage");
	orh_strv_pushf(&kept, "NCCL_DEBUG=INFO");
	rec = orh_record_build(&in);
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
	json_decref(rec);
	orh_strv_free(&warn);
	orh_strv_free(&kept);
}

Test(record, memlock_need_and_check)
{
	char msg[256];

	cr_assert_eq(orh_record_memlock_need(&d.plan), ORH_MEMLOCK_NEED);
	d.plan.memlock = 4 << 20;
	cr_assert_eq(orh_record_memlock_need(&d.plan), 4 << 20);
	cr_assert(orh_check_memlock(1 << 20, ORH_MEMLOCK_NEED, msg, sizeof(msg)));
	cr_assert(strstr(msg, "1048576 bytes"), "%s", msg);
	cr_assert_not(orh_check_memlock(8 << 20, ORH_MEMLOCK_NEED, msg, sizeof(msg)));
	cr_assert_not(orh_check_memlock(UINT64_MAX, ORH_MEMLOCK_NEED, msg, sizeof(msg)));
}

Test(record, ports_down_only_when_every_given_port_is)
{
	char msg[256];

	cr_assert_not(orh_check_ports_down(&d, msg, sizeof(msg)), "nothing given");
	d.facts.devs[0] = (struct orh_devnum){ 231, 193 };
	d.facts.n_devs = 1;
	cr_assert(orh_check_ports_down(&d, msg, sizeof(msg)));
	cr_assert(strstr(msg, "mlx5_1:1 DOWN"), "%s", msg);
	d.facts.devs[1] = (struct orh_devnum){ 231, 192 };
	d.facts.n_devs = 2;
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

Test(record, gpudirect)
{
	char msg[256];

	cr_assert_not(orh_check_gpudirect(false, false, "4.19.0", msg, sizeof(msg)));
	cr_assert_not(orh_check_gpudirect(true, true, "4.19.0", msg, sizeof(msg)));
	cr_assert_not(orh_check_gpudirect(true, false, "5.12.0", msg, sizeof(msg)));
	cr_assert_not(orh_check_gpudirect(true, false, "6.1.0-18-amd64", msg, sizeof(msg)));
	cr_assert(orh_check_gpudirect(true, false, "5.11.22", msg, sizeof(msg)));
	cr_assert(strstr(msg, "5.11.22"), "%s", msg);
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

/* A run dir: "alive" (this process, its start time), "gone" (a pid with another start
 * time), "fresh" (no record, new), "orphan" (no record, old), "foreign" (gone, holds a
 * file not ours), "link" (a symlink to a directory of a gone record). */
Test(record, sweep_removes_only_the_dead_and_ours)
{
	char run[] = "/tmp/orh-rec-XXXXXX", other[] = "/tmp/orh-rec-other-XXXXXX", p[512],
	     stat_text[1024];
	unsigned long long me = 0;
	struct timeval old[2] = { { 1000, 0 }, { 1000, 0 } };
	int fd;

	cr_assert_not_null(mkdtemp(run));
	cr_assert_not_null(mkdtemp(other));
	fd = open("/proc/self/stat", O_RDONLY);
	stat_text[read(fd, stat_text, sizeof(stat_text) - 1)] = '\0';
	close(fd);
	cr_assert_eq(orh_stat_start_time(stat_text, &me), 0);
	const char *names[] = { "alive", "gone", "fresh", "orphan", "foreign" };
	for (size_t i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/%s", run, names[i]);
		cr_assert_eq(mkdir(p, 0700), 0);
	}
	snprintf(p, sizeof(p), "{\"pid\": %d, \"start_time\": %llu}", getpid(), me);
	char rec[512];
	snprintf(rec, sizeof(rec), "%s/alive/record.json", run);
	write_file(rec, p);
	snprintf(p, sizeof(p), "{\"pid\": %d, \"start_time\": %llu}", getpid(), me + 1);
	snprintf(rec, sizeof(rec), "%s/gone/record.json", run);
	write_file(rec, p);
	snprintf(rec, sizeof(rec), "%s/gone/nccl.conf", run);
	write_file(rec, "NCCL_IB_HCA=mlx5_0\n");
	snprintf(rec, sizeof(rec), "%s/foreign/record.json", run);
	write_file(rec, "{\"pid\": 1, \"start_time\": 1}");
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
	const char *gone = "{\"pid\": 1, \"start_time\": 1}";
	struct stat st;

	cr_assert_not_null(mkdtemp(run));
	snprintf(p, sizeof(p), "%s/g1", run);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/g1/record.json", run);
	write_file(p, gone);
	cr_assert_eq(orh_record_sweep(run, "/proc", NULL, ORH_RECORD_SWEEP_EVERY), 1);
	snprintf(p, sizeof(p), "%s/%s", run, ORH_RECORD_SWEPT);
	cr_assert_eq(stat(p, &st), 0, "the sweep left no mark");
	snprintf(p, sizeof(p), "%s/g2", run);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/g2/record.json", run);
	write_file(p, gone);
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
	json_t *rec = json_pack("{s:s}", "id", "c1"), *back;
	struct stat st;

	cr_assert_not_null(mkdtemp(run));
	snprintf(dir, sizeof(dir), "%s/c1", run);
	cr_assert_eq(orh_record_write(dir, rec, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_record_write(dir, rec, &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/record.json", dir);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0644);
	back = json_load_file(path, 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(back, "id")), "c1");
	json_decref(back);
	json_decref(rec);
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
