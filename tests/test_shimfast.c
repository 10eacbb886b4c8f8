/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's fast path, its pure part (src/cmd/shim_fast.c): where runc's command is, which
 * commands pass through, the runtime cache's text and what matches it. The path itself, as
 * a process runs it, is tests/shim-fast.sh. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/stat.h>

#include "orh/shimfast.h"

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

Test(shimfast, the_cache_matches_its_config_as_read_and_nothing_else)
{
	const char *conf = "/etc/oci-rdma-hook/oci-rdma-hook.conf";
	struct stat st = st_of(77, 1200, 1700000000, 9), other;
	char text[ORH_SHIM_CACHE_MAX], copy[ORH_SHIM_CACHE_MAX];
	size_t n = orh_shim_cache_text(conf, &st, "/usr/sbin/runc", text, sizeof(text));
	const char *rt;

	cr_assert_gt(n, 0);
	cr_assert_eq(text[n - 1], '\n');
	memcpy(copy, text, n + 1);
	rt = orh_shim_cache_match(copy, n, conf, &st);
	cr_assert_not_null(rt);
	cr_assert_str_eq(rt, "/usr/sbin/runc");
	/* the config changed since: another inode, size, mtime or ctime */
	other = st_of(78, 1200, 1700000000, 9);
	memcpy(copy, text, n + 1);
	cr_assert_null(orh_shim_cache_match(copy, n, conf, &other));
	other = st_of(77, 1201, 1700000000, 9);
	memcpy(copy, text, n + 1);
	cr_assert_null(orh_shim_cache_match(copy, n, conf, &other));
	other = st_of(77, 1200, 1700000001, 9);
	memcpy(copy, text, n + 1);
	cr_assert_null(orh_shim_cache_match(copy, n, conf, &other));
	other = st_of(77, 1200, 1700000000, 10);
	memcpy(copy, text, n + 1);
	cr_assert_null(orh_shim_cache_match(copy, n, conf, &other));
	/* another config's */
	memcpy(copy, text, n + 1);
	cr_assert_null(orh_shim_cache_match(copy, n, "/etc/other.conf", &st));
	/* cut short, or with more after the runtime's line */
	memcpy(copy, text, n + 1);
	cr_assert_null(orh_shim_cache_match(copy, n - 1, conf, &st));
	memcpy(copy, text, n + 1);
	strcat(copy, "/bin/sh\n");
	cr_assert_null(orh_shim_cache_match(copy, strlen(copy), conf, &st));
}

Test(shimfast, a_runtime_that_is_not_one_absolute_line_is_never_cached)
{
	struct stat st = st_of(1, 2, 3, 4);
	char text[ORH_SHIM_CACHE_MAX], small[48];

	cr_assert_eq(orh_shim_cache_text("/c", &st, "runc", text, sizeof(text)), 0);
	cr_assert_eq(orh_shim_cache_text("/c", &st, "/usr/sbin/runc\n/bin/sh", text,
					 sizeof(text)), 0);
	cr_assert_eq(orh_shim_cache_text("/c\n/d", &st, "/usr/sbin/runc", text, sizeof(text)),
		     0);
	cr_assert_eq(orh_shim_cache_text("/c", &st, "/usr/sbin/runc", small, sizeof(small)), 0);
}
