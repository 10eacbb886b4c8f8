/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's fast path, its pure part (src/cmd/shim_fast.c): where runc's command is, which
 * commands pass through, the runtime cache's text and what matches it. The path itself, as
 * a process runs it, is tests/shim-fast.sh. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "orh-config.h"
#include "orh/node/config.h"
#include "orh/cmd/shimfast.h"

static int cmd_of(const char *const *args)
{
	char *argv[32];
	int argc = 0;

	for (; args[argc]; argc++)
		argv[argc] = (char *)args[argc];
	argv[argc] = NULL;
	return orh_shim_command(argc, argv);
}

Test(shimfast, the_command_after_the_global_options)
{
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "start", "id", NULL }), 1);
	/* containerd's go-runc */
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "--root", "/run/containerd/runc/k8s.io",
						   "--log", "/l.json", "--log-format", "json",
						   "start", "id", NULL }), 7);
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "--root=/r", "--debug", "kill", "id",
						   "9", NULL }), 3);
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "-root", "/r", "state", "id", NULL }),
		     3);
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "--systemd-cgroup", "create",
						   "--bundle", "b", "id", NULL }), 2);
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "--", "start", NULL }), 2);
	/* a value-taking option's value is not the command, even when it reads like one */
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "--log", "start", "create", NULL }), 3);
	/* no command */
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "--version", NULL }), 0);
	cr_assert_eq(cmd_of((const char *const[]){ "rt", "--root", NULL }), 0);
	cr_assert_eq(cmd_of((const char *const[]){ "rt", NULL }), 0);
}

Test(shimfast, the_global_options_that_take_a_value)
{
	const char *with[] = { "root", "log", "log-format", "criu", "rootless",
			       "cgroup-manager", "log-level" };
	const char *without[] = { "debug", "systemd-cgroup", "ro", "roots", "lo", "log-",
				  "log-formats", "" };

	for (size_t i = 0; i < sizeof(with) / sizeof(*with); i++)
		cr_assert(orh_shim_global_takes_value(with[i], strlen(with[i])), "%s", with[i]);
	for (size_t i = 0; i < sizeof(without) / sizeof(*without); i++)
		cr_assert_not(orh_shim_global_takes_value(without[i], strlen(without[i])), "%s",
			      without[i]);
	/* the name's length counts, not a NUL after it */
	cr_assert(orh_shim_global_takes_value("log=x", 3));
	cr_assert_not(orh_shim_global_takes_value("log=x", 2));
}

Test(shimfast, only_what_the_shim_edits_or_cleans_up_stays_on_the_ordinary_path)
{
	const char *pass[] = { "start", "state", "kill", "ps", "events", "pause", "resume",
			       "exec", "update", "features", "list" };

	for (size_t i = 0; i < sizeof(pass) / sizeof(*pass); i++)
		cr_assert(orh_shim_passes_through(pass[i]), "%s", pass[i]);
	cr_assert_not(orh_shim_passes_through("create"));
	cr_assert_not(orh_shim_passes_through("run"));
	cr_assert_not(orh_shim_passes_through("delete"));
}

Test(shimfast, a_cache_name_is_the_prefix_and_the_config_paths_hash)
{
	char a[40], b[40], c[40];

	orh_shim_cache_name("/etc/oci-rdma-hook/oci-rdma-hook.conf", a);
	orh_shim_cache_name("/etc/oci-rdma-hook/oci-rdma-hook.conf", b);
	orh_shim_cache_name("/etc/oci-rdma-hook/other.conf", c);
	cr_assert_str_eq(a, b);
	cr_assert_str_neq(a, c);
	cr_assert_eq(strlen(a), strlen(ORH_SHIM_CACHE_PREFIX) + 16);
	cr_assert_eq(strncmp(a, ORH_SHIM_CACHE_PREFIX, strlen(ORH_SHIM_CACHE_PREFIX)), 0);
}

static struct stat st_of(long ino, long size, long mtime, long ctime_ns)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_dev = 2049;
	st.st_ino = (ino_t)ino;
	st.st_size = size;
	st.st_mtim.tv_sec = mtime;
	st.st_mtim.tv_nsec = 5;
	st.st_ctim.tv_sec = mtime;
	st.st_ctim.tv_nsec = ctime_ns;
	return st;
}

/* The files as the fake stat sees them now: a path and its stat, or not there. */
static struct fake {
	const char *path;
	struct stat st;
	bool there;
} now[8];

static int fake_stat(const char *path, struct stat *st, void *arg)
{
	(void)arg;
	for (size_t i = 0; i < sizeof(now) / sizeof(*now); i++)
		if (now[i].path && !strcmp(now[i].path, path)) {
			if (!now[i].there)
				return -1;
			*st = now[i].st;
			return 0;
		}
	return -1;
}

#define CONF "/etc/oci-rdma-hook/oci-rdma-hook.conf"

/* The text for CONF as now[0] has it, the paths of now[1..n_paths] (a directory, or a
 * candidate passed over where its path names a runtime) and rt. */
static size_t text_now(size_t n_paths, const char *rt, char *out, size_t size)
{
	struct orh_shim_cache_path paths[8];

	for (size_t i = 0; i < n_paths; i++)
		paths[i] = (struct orh_shim_cache_path){
			.kind = strstr(now[1 + i].path, "/orh-rt") ? 'F' : 'D',
			.path = now[1 + i].path, .st = now[1 + i].there ? &now[1 + i].st : NULL };
	return orh_shim_cache_text(&(struct orh_shim_cache){
		.config_path = CONF, .config_st = now[0].there ? &now[0].st : NULL,
		.paths = paths, .n_paths = n_paths, .runtime = rt }, out, size);
}

static const char *match(const char *text, size_t n, const char *conf)
{
	static char copy[ORH_SHIM_CACHE_MAX];

	memcpy(copy, text, n + 1);
	return orh_shim_cache_match(copy, n, conf, fake_stat, NULL);
}

static void reset(void)
{
	memset(now, 0, sizeof(now));
	now[0] = (struct fake){ CONF, st_of(77, 1200, 1700000000, 9), true };
	now[1] = (struct fake){ "/usr/local/sbin", st_of(10, 4096, 1600000000, 1), true };
	now[2] = (struct fake){ "/usr/local/bin", st_of(11, 4096, 1600000000, 2), false };
	now[3] = (struct fake){ "/usr/sbin", st_of(12, 4096, 1600000000, 3), true };
}

Test(shimfast, the_cache_matches_its_config_as_read_and_nothing_else)
{
	char text[ORH_SHIM_CACHE_MAX];
	size_t n;
	const char *rt;

	reset();
	n = text_now(0, "/usr/sbin/runc", text, sizeof(text));
	cr_assert_gt(n, 0);
	cr_assert_eq(text[n - 1], '\n');
	rt = match(text, n, CONF);
	cr_assert_not_null(rt);
	cr_assert_str_eq(rt, "/usr/sbin/runc");
	/* the config changed since: another inode, size, mtime or ctime; gone */
	now[0].st = st_of(78, 1200, 1700000000, 9);
	cr_assert_null(match(text, n, CONF));
	now[0].st = st_of(77, 1201, 1700000000, 9);
	cr_assert_null(match(text, n, CONF));
	now[0].st = st_of(77, 1200, 1700000001, 9);
	cr_assert_null(match(text, n, CONF));
	now[0].st = st_of(77, 1200, 1700000000, 10);
	cr_assert_null(match(text, n, CONF));
	reset();
	now[0].there = false;
	cr_assert_null(match(text, n, CONF));
	/* another config's; cut short; more after the runtime's line */
	reset();
	cr_assert_null(match(text, n, "/etc/other.conf"));
	cr_assert_null(match(text, n - 1, CONF));
	{
		char more[ORH_SHIM_CACHE_MAX];

		memcpy(more, text, n + 1);
		strcat(more, "R /bin/sh\n");
		cr_assert_null(match(more, strlen(more), CONF));
	}
}

Test(shimfast, a_runtime_looked_up_holds_while_the_directories_before_it_do)
{
	char text[ORH_SHIM_CACHE_MAX];
	size_t n;

	reset();
	n = text_now(3, "/usr/sbin/runc", text, sizeof(text));
	cr_assert_gt(n, 0);
	cr_assert_str_eq(match(text, n, CONF), "/usr/sbin/runc");
	/* a runtime installed ahead of it: that directory's times change */
	now[1].st.st_mtim.tv_sec++;
	cr_assert_null(match(text, n, CONF));
	reset();
	now[2].there = true; /* a directory that was not there now is */
	cr_assert_null(match(text, n, CONF));
	reset();
	now[3].st.st_ctim.tv_nsec++;
	cr_assert_null(match(text, n, CONF));
	/* no config at all: the defaults, also as long as there is none */
	reset();
	now[0].there = false;
	n = text_now(3, "/usr/sbin/runc", text, sizeof(text));
	cr_assert_str_eq(match(text, n, CONF), "/usr/sbin/runc");
	now[0].there = true;
	cr_assert_null(match(text, n, CONF));
}

Test(shimfast, a_runtime_that_is_not_one_absolute_line_is_never_cached)
{
	char text[ORH_SHIM_CACHE_MAX], small[48];

	reset();
	cr_assert_eq(text_now(0, "runc", text, sizeof(text)), 0);
	cr_assert_eq(text_now(0, "/usr/sbin/runc\n/bin/sh", text, sizeof(text)), 0);
	cr_assert_eq(text_now(3, "/usr/sbin/runc", small, sizeof(small)), 0);
	now[1].path = "relative/dir";
	cr_assert_eq(text_now(3, "/usr/sbin/runc", text, sizeof(text)), 0);
	/* a kind that is neither a directory nor a candidate */
	reset();
	cr_assert_eq(orh_shim_cache_text(&(struct orh_shim_cache){
		.config_path = CONF, .config_st = &now[0].st, .runtime = "/usr/sbin/runc",
		.paths = &(struct orh_shim_cache_path){ .kind = 'R', .path = "/usr/sbin",
							.st = &now[3].st }, .n_paths = 1 },
		text, sizeof(text)), 0);
}

/* The lookup passed over /usr/local/sbin/orh-rt (not executable; a link to nothing) and
 * took /usr/sbin/orh-rt: one that becomes usable changes no directory, only itself. */
Test(shimfast, a_candidate_passed_over_that_changes_undoes_the_cache)
{
	char text[ORH_SHIM_CACHE_MAX];
	size_t n;

	reset();
	now[2] = (struct fake){ "/usr/local/sbin/orh-rt", st_of(20, 100, 1650000000, 4), true };
	now[3] = (struct fake){ "/usr/local/bin", st_of(11, 4096, 1600000000, 2), true };
	now[4] = (struct fake){ "/usr/sbin", st_of(12, 4096, 1600000000, 3), true };
	n = text_now(4, "/usr/sbin/orh-rt", text, sizeof(text));
	cr_assert_gt(n, 0);
	cr_assert(strstr(text, "\nF 2049 20 100 1650000000 5 1650000000 4 "
			       "/usr/local/sbin/orh-rt\n"), "%s", text);
	cr_assert_str_eq(match(text, n, CONF), "/usr/sbin/orh-rt");
	/* made executable: its ctime changes */
	now[2].st.st_ctim.tv_nsec++;
	cr_assert_null(match(text, n, CONF));
	/* replaced by another file */
	now[2].st = st_of(21, 100, 1650000000, 4);
	cr_assert_null(match(text, n, CONF));
	/* a link to nothing when the cache was written, to a file now */
	reset();
	now[2] = (struct fake){ "/usr/local/sbin/orh-rt", st_of(20, 100, 1650000000, 4), false };
	now[3] = (struct fake){ "/usr/sbin", st_of(12, 4096, 1600000000, 3), true };
	n = text_now(3, "/usr/sbin/orh-rt", text, sizeof(text));
	cr_assert(strstr(text, "\n- /usr/local/sbin/orh-rt\n"), "%s", text);
	cr_assert_str_eq(match(text, n, CONF), "/usr/sbin/orh-rt");
	now[2].there = true;
	cr_assert_null(match(text, n, CONF));
}

Test(shimfast, a_cache_of_the_first_version_is_not_taken)
{
	char text[] = "oci-rdma-runtime cache 1\n- " CONF "\nR /usr/sbin/runc\n";

	reset();
	now[0].there = false;
	cr_assert_null(orh_shim_cache_match(text, strlen(text), CONF, fake_stat, NULL));
	memcpy(text + strlen("oci-rdma-runtime cache "), "2", 1);
	cr_assert_str_eq(orh_shim_cache_match(text, strlen(text), CONF, fake_stat, NULL),
			 "/usr/sbin/runc");
}

Test(shimfast, the_sweep_reads_the_config_a_cache_was_written_for)
{
	char text[ORH_SHIM_CACHE_MAX];
	size_t n;

	reset();
	n = text_now(2, "/usr/sbin/runc", text, sizeof(text));
	cr_assert_str_eq(orh_shim_cache_config(text, n), CONF);
	cr_assert_null(orh_shim_cache_config((char[]){ "not a cache\n" }, 12));
}

static bool sandbox(const char *json)
{
	return orh_shim_spec_sandbox(json, strlen(json));
}

Test(shimfast, a_sandbox_is_told_by_its_annotation_at_the_top)
{
	/* containerd's CRI (compact, as it writes config.json) and CRI-O (indented) */
	cr_assert(sandbox("{\"ociVersion\":\"1.1.0\",\"process\":{\"args\":[\"/pause\"],"
			  "\"env\":[\"PATH=/bin\"]},\"annotations\":{\"io.kubernetes.cri."
			  "container-type\":\"sandbox\",\"io.kubernetes.cri.sandbox-id\":\"ab\"},"
			  "\"linux\":{\"sysctl\":{}}}"));
	cr_assert(sandbox("{\n \"annotations\": {\n  \"a\": [1, {\"b\": \"}\\\"]\"}],\n"
			  "  \"io.kubernetes.cri-o.ContainerType\": \"sandbox\"\n }\n}\n"));
	cr_assert(sandbox("{\"annotations\":5,\"annotations\":{\"io.kubernetes.cri."
			  "container-type\":\"sandbox\"}}")); /* the last wins, as in jansson */
}

Test(shimfast, anything_else_is_not_told_a_sandbox)
{
	const char *no[] = {
		/* a workload container */
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\"}}",
		"{\"annotations\":{}}",
		"{}",
		/* the key elsewhere than the top's annotations */
		"{\"linux\":{\"sysctl\":{\"io.kubernetes.cri.container-type\":\"sandbox\"}}}",
		"{\"annotations\":{\"x\":{\"io.kubernetes.cri.container-type\":\"sandbox\"}}}",
		"{\"process\":{\"env\":[\"io.kubernetes.cri.container-type\",\"sandbox\"]}}",
		/* not a string, or not the word */
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":[\"sandbox\"]}}",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandboxes\"}}",
		/* unsure: an escape in a key or the value, a key twice, annotations twice */
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\","
		"\"io.kubernetes.cri.container\\u002dtype\":\"container\"}}",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbo\\u0078\"}}",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\","
		"\"io.kubernetes.cri.container-type\":\"container\"}}",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\"},"
		"\"annotations\":{}}",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\"},"
		"\"annotation\\u0073\":{}}",
		/* not JSON, cut short, more after it */
		"",
		"[\"annotations\"]",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\"}",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\"}} {}",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\"},\"x\":tru}",
		"{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sand\nbox\"}}",
	};

	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
		cr_assert_not(sandbox(no[i]), "%s", no[i]);
}

/* An annotation nested depth deep in arrays and objects by turns, beside the sandbox's. */
static bool sandbox_beside(unsigned depth, bool cut)
{
	static char json[16384];
	size_t n = 0;

	n += (size_t)sprintf(json + n, "{\"annotations\":{\"deep\":");
	for (unsigned i = 0; i < depth; i++)
		n += (size_t)sprintf(json + n, i % 2 ? "{\"k\":" : "[1,");
	n += (size_t)sprintf(json + n, "null");
	for (unsigned i = depth; i-- > (cut ? 1u : 0u);)
		json[n++] = i % 2 ? '}' : ']';
	n += (size_t)sprintf(json + n, ",\"io.kubernetes.cri.container-type\":\"sandbox\"}}");
	return orh_shim_spec_sandbox(json, n);
}

Test(shimfast, nesting_is_skipped_to_256_levels_and_unsure_beyond)
{
	cr_assert(sandbox_beside(1, false));
	cr_assert(sandbox_beside(2, false));
	cr_assert(sandbox_beside(255, false));
	cr_assert(sandbox_beside(256, false));
	cr_assert_not(sandbox_beside(257, false));
	cr_assert_not(sandbox_beside(1000, false));
	/* one level left open, one closed twice: not JSON */
	cr_assert_not(sandbox_beside(10, true));
	cr_assert_not(sandbox("{\"annotations\":{\"a\":[1]],\"io.kubernetes.cri."
			      "container-type\":\"sandbox\"}}"));
	cr_assert_not(sandbox("{\"annotations\":{\"a\":[1,{\"b\":2]},\"io.kubernetes.cri."
			      "container-type\":\"sandbox\"}}"));
	cr_assert_not(sandbox("{\"annotations\":{\"a\":{\"b\" 2},\"io.kubernetes.cri."
			      "container-type\":\"sandbox\"}}"));
	cr_assert(sandbox("{\"annotations\":{\"a\":[[],{},[{}],{\"b\":[]}],\"io.kubernetes."
			  "cri.container-type\":\"sandbox\"}}"));
}

Test(shimfast, the_bundle_of_a_create)
{
	char *a[] = { "rt", "--root", "/r", "create", "--bundle", "/b1", "--pid-file", "/p", "id",
		      NULL };
	char *b[] = { "rt", "create", "-b=/b2", "id", NULL };
	char *c[] = { "rt", "create", "--", "--bundle", "/no", NULL };
	char *d[] = { "rt", "run", "id", NULL };

	cr_assert_str_eq(orh_shim_bundle(9, a, 3), "/b1");
	cr_assert_str_eq(orh_shim_bundle(4, b, 1), "/b2");
	cr_assert_str_eq(orh_shim_bundle(5, c, 1), ".");
	cr_assert_str_eq(orh_shim_bundle(3, d, 1), ".");
}

Test(shimfast, the_config_is_the_first_of_its_variable_as_getenv_reads_it)
{
	char *env[] = { "PATH=/bin", "OCI_RDMA_HOOK_CONFIG=/etc/a.conf",
			"OCI_RDMA_HOOK_CONFIG=/etc/b.conf", NULL };
	char *none[] = { "PATH=/bin", "OCI_RDMA_HOOK_CONFIGX=/x", NULL };

	cr_assert_str_eq(orh_shim_config(env), "/etc/a.conf");
	cr_assert_str_eq(orh_shim_config(none), ORH_DEFAULT_CONFIG);
}
