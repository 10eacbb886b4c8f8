/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for what a kept undo needs to be finished later (src/cmd/install_files.c's
 * manifest lines, src/cmd/install_finish.c): how the engine was configured and the pending
 * mark saved and read back, a bad line named, the install lock (refused at once without
 * wait, the holder's directory named) and the wait for a process's exit. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "orh/cmd/install.h"

static char root[64];

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/orh-finish.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
}

static char *manifest_text(void)
{
	static char buf[4096];
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s%s", root, ORH_INSTALL_MANIFEST);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void write_manifest(const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "mkdir -p '%s/var/lib/oci-rdma-hook'", root);
	cr_assert_eq(system(path), 0);
	snprintf(path, sizeof(path), "%s%s", root, ORH_INSTALL_MANIFEST);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

TestSuite(install_finish, .init = setup, .fini = teardown);

Test(install_finish, how_it_was_configured_and_pending_are_saved_and_read)
{
	struct orh_inst_manifest m = { 0 }, back = { 0 };
	struct orh_err err = { 0 };

	m.engine = strdup("containerd");
	m.handler = strdup("rdma");
	m.engine_config = strdup("/etc/containerd/v3.toml");
	m.shim = strdup("/opt/x/oci-rdma-runtime");
	m.socket = strdup("/run/custom/containerd.sock");
	m.restart = strdup("signal");
	m.pending = true;
	orh_inst_add_file(&m, ORH_INSTALL_FINISH_LOG);
	cr_assert_eq(orh_inst_save(root, &m, &err), 0, "%s", err.msg);
	cr_assert(strstr(manifest_text(), "\nshim /opt/x/oci-rdma-runtime\n"
					  "socket /run/custom/containerd.sock\nrestart signal\n"
					  "pending\n"),
		  "%s", manifest_text());
	cr_assert_eq(orh_inst_load(root, &back, &err), 0, "%s", err.msg);
	cr_assert_str_eq(back.shim, "/opt/x/oci-rdma-runtime");
	cr_assert_str_eq(back.socket, "/run/custom/containerd.sock");
	cr_assert_str_eq(back.restart, "signal");
	cr_assert(back.pending);
	cr_assert(orh_inst_has(&back, ORH_INSTALL_FINISH_LOG));
	orh_inst_free(&back);

	/* the engine's part undone: none of it is written, pending included */
	free(m.engine);
	m.engine = NULL;
	cr_assert_eq(orh_inst_save(root, &m, &err), 0, "%s", err.msg);
	cr_assert_null(strstr(manifest_text(), "shim "));
	cr_assert_null(strstr(manifest_text(), "pending"));
	cr_assert_eq(orh_inst_load(root, &back, &err), 0, "%s", err.msg);
	cr_assert(!back.pending && !back.shim && !back.socket);
	orh_inst_free(&back);
	orh_inst_free(&m);
}

Test(install_finish, a_manifest_of_before_has_none_of_them)
{
	struct orh_inst_manifest m = { 0 };
	struct orh_err err = { 0 };

	write_manifest("# old\nengine containerd rdma -\nf /usr/local/bin/oci-rdma-hook\n");
	cr_assert_eq(orh_inst_load(root, &m, &err), 0, "%s", err.msg);
	cr_assert_str_eq(m.engine, "containerd");
	cr_assert(!m.pending && !m.shim && !m.socket && !m.restart);
	cr_assert_eq(m.n, 1);
	orh_inst_free(&m);
}

Test(install_finish, a_line_without_its_value_is_named)
{
	const char *bad[] = { "engine containerd rdma -\nshim\n", "engine containerd rdma -\nshim \n",
			      "engine containerd rdma -\nsocket /a b\n" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct orh_inst_manifest m = { 0 };
		struct orh_err err = { 0 };

		write_manifest(bad[i]);
		cr_assert_eq(orh_inst_load(root, &m, &err), -EINVAL, "%s", bad[i]);
		cr_assert(strstr(err.msg, ORH_INSTALL_MANIFEST ":2: "), "%s", err.msg);
	}
}

Test(install_finish, the_lock_is_refused_at_once_without_wait)
{
	struct orh_err err = { 0 };
	int a = -1, b = -1;

	/* nothing installed: nothing to lock */
	cr_assert_eq(orh_inst_lock(root, false, &a, &err), 0, "%s", err.msg);
	cr_assert_eq(a, -1);
	write_manifest("");
	cr_assert_eq(orh_inst_lock(root, false, &a, &err), 0, "%s", err.msg);
	cr_assert_geq(a, 0);
	/* a second open file description: flock holds per description */
	cr_assert_eq(orh_inst_lock(root, false, &b, &err), -EWOULDBLOCK);
	cr_assert_eq(b, -1);
	cr_assert(strstr(err.msg, "another install runs") && strstr(err.msg, "/var/lib/oci-rdma-hook"),
		  "%s", err.msg);
	close(a);
	cr_assert_eq(orh_inst_lock(root, false, &b, &err), 0, "%s", err.msg);
	cr_assert_geq(b, 0);
	close(b);
}

Test(install_finish, the_wait_for_an_exit, .timeout = 30)
{
	pid_t child = fork();
	struct timespec t0, t1;

	cr_assert_geq(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	/* it runs: the wait gives up after its timeout */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert(!orh_inst_wait_exit(child, 1));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_geq(t1.tv_sec - t0.tv_sec, 1);
	/* it exits (a zombie until reaped: the wait sees it gone) */
	kill(child, SIGKILL);
	cr_assert(orh_inst_wait_exit(child, 10));
	waitpid(child, NULL, 0);
	/* one that is gone */
	cr_assert(orh_inst_wait_exit(child, 10));
}
