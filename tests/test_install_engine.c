/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for what the installer reads of the engine behind a host root's socket
 * (src/cmd/install_engine.c): not ready while nobody listens; the config the engine's
 * command line names (here this process's, which names none: containerd's default) against
 * the one configured; the shims of the containers that still run through the handler,
 * found by their bundle's options.json. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/cmd/install.h"

static char root[64];

static void setup(void)
{
	char p[256];

	snprintf(root, sizeof(root), "/tmp/orh-install-engine.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	unsetenv("CONTAINERD_CONFIG");
	unsetenv("CONTAINERD_SOCKET");
	snprintf(p, sizeof(p), "mkdir -p '%s/etc/containerd' '%s/run/containerd' && "
		 "echo 'version = 2' >'%s/etc/containerd/config.toml'", root, root, root);
	cr_assert_eq(system(p), 0);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
}

TestSuite(install_engine, .init = setup, .fini = teardown);

/* this process listening on the root's containerd socket: its fd */
static int listen_here(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/run/containerd/containerd.sock", root);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	cr_assert_eq(listen(fd, 4), 0);
	return fd;
}

Test(install_engine, not_ready_while_no_engine_listens)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };
	struct orh_err err = { 0 };
	char *what = NULL, *why = NULL;

	cr_assert_eq(orh_inst_engine_find(root, NULL, NULL, NULL, &e, &notes, &err), 0, "%s",
		     err.msg);
	cr_assert_str_eq(e.config, "/etc/containerd/config.toml");
	cr_assert_eq(orh_inst_engine_loaded(root, &e, "rdma", "/usr/bin/oci-rdma-runtime", &what,
					    &why, &err), 0, "%s", err.msg);
	cr_assert_null(what);
	cr_assert_not_null(strstr(why, "no engine listens on /run/containerd/containerd.sock"),
			   "%s", why);
	free(why);
	orh_inst_engine_free(&e);
	orh_strv_free(&notes);
}

Test(install_engine, the_engine_reads_another_config_than_the_one_configured)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };
	struct orh_err err = { 0 };
	char *what = NULL, *why = NULL, want[256];
	int fd = listen_here();

	/* this process names no --config: containerd's default is what it reads */
	cr_assert_eq(orh_inst_engine_find(root, NULL, NULL, NULL, &e, &notes, &err), 0, "%s",
		     err.msg);
	cr_assert_str_eq(e.config, "/etc/containerd/config.toml");
	cr_assert_eq(notes.n, 0);
	orh_inst_engine_free(&e);
	setenv("CONTAINERD_CONFIG", "/etc/custom.toml", 1);
	cr_assert_eq(orh_inst_engine_find(root, NULL, NULL, NULL, &e, &notes, &err), 0, "%s",
		     err.msg);
	cr_assert_str_eq(e.config, "/etc/custom.toml");
	cr_assert_eq(orh_inst_engine_loaded(root, &e, "rdma", "/usr/bin/oci-rdma-runtime", &what,
					    &why, &err), 0, "%s", err.msg);
	cr_assert_null(what);
	snprintf(want, sizeof(want), "the engine behind /run/containerd/containerd.sock (pid %d, ",
		 (int)getpid());
	cr_assert_not_null(strstr(why, want), "%s", why);
	cr_assert_not_null(strstr(why, "reads /etc/containerd/config.toml (its command line), "
				  "not /etc/custom.toml, the file configured: set "
				  "CONTAINERD_CONFIG=/etc/containerd/config.toml"), "%s", why);
	free(why);
	orh_inst_engine_free(&e);
	/* a link to the file it reads (absolute, resolved inside the root) is that file: past
	 * that check, the binary behind the socket (this test's, which is no containerd) asked */
	cr_assert_eq(symlinkat("/etc/containerd/config.toml", AT_FDCWD,
			       strcat(strcpy(want, root), "/etc/link.toml")), 0);
	setenv("CONTAINERD_CONFIG", "/etc/link.toml", 1);
	cr_assert_eq(orh_inst_engine_find(root, NULL, NULL, NULL, &e, &notes, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(orh_inst_engine_loaded(root, &e, "rdma", "/usr/bin/oci-rdma-runtime", &what,
					    &why, &err), 0, "%s", err.msg);
	cr_assert_not_null(strstr(why, "containerd config dump (pid "), "%s", why);
	cr_assert_null(strstr(why, "its command line"), "%s", why);
	free(why);
	close(fd);
	orh_inst_engine_free(&e);
	orh_strv_free(&notes);
}

/* A process of comm containerd-shim (a shell run through a link of that name) whose
 * working directory is dir and whose command line names -address addr (none: NULL): its
 * pid. */
static pid_t fake_shim(const char *dir, const char *addr)
{
	char link[128];
	pid_t pid;

	snprintf(link, sizeof(link), "%s/containerd-shim-runc-v2", root);
	if (access(link, F_OK) < 0)
		cr_assert_eq(symlink("/bin/sh", link), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (setpgid(0, 0) < 0 || chdir(dir) < 0)
			_exit(1);
		/* (not the last command: the shell stays, with its name and command line) */
		execl(link, "containerd-shim-runc-v2", "-c", "sleep 60; :", "-namespace",
		      addr ? "-address" : "-id", addr ? addr : "x", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static bool has_line(const struct orh_strv *sv, const char *line)
{
	for (size_t i = 0; i < sv->n; i++)
		if (!strncmp(sv->v[i], line, strlen(line)))
			return true;
	return false;
}

/* the lines of users for /x/oci-rdma-runtime on e: is pid's there (bundle dir)? */
static bool counted(const struct orh_inst_engine *e, const char *shim, pid_t pid,
		    const char *dir)
{
	struct orh_strv users = { 0 };
	char line[256];
	bool r;

	orh_inst_engine_users(root, e, shim, &users);
	snprintf(line, sizeof(line), "shim pid %d, bundle %s", (int)pid, dir);
	r = has_line(&users, line);
	orh_strv_free(&users);
	return r;
}

Test(install_engine, the_shims_of_the_handler_are_found_by_their_bundle_and_socket)
{
	char ours[128], runc[128], sock[128], other[128], cmd[768];
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };
	struct orh_err err = { 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = listen_here(), ofd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t a, b, c, d;

	cr_assert_eq(orh_inst_engine_find(root, NULL, NULL, NULL, &e, &notes, &err), 0, "%s",
		     err.msg);
	snprintf(ours, sizeof(ours), "%s/bundle-ours", root);
	snprintf(runc, sizeof(runc), "%s/bundle-runc", root);
	snprintf(sock, sizeof(sock), "%s/run/containerd/containerd.sock", root);
	snprintf(other, sizeof(other), "%s/run/other.sock", root);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", other);
	cr_assert_eq(bind(ofd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(cmd, sizeof(cmd), "mkdir '%s' '%s' && "
		 "echo '{\"binary_name\":\"/x/oci-rdma-runtime\",\"systemd_cgroup\":true}' "
		 ">'%s/options.json' && echo '{\"systemd_cgroup\":true}' >'%s/options.json'",
		 ours, runc, ours, runc);
	cr_assert_eq(system(cmd), 0);
	a = fake_shim(ours, sock);  /* ours, on this engine */
	b = fake_shim(runc, sock);  /* runc's, on this engine */
	c = fake_shim(ours, other); /* ours, on another engine */
	d = fake_shim(ours, NULL);  /* ours, no -address: counted */
	usleep(300 * 1000);         /* each started */
	cr_expect(counted(&e, "/x/oci-rdma-runtime", a, ours), "ours on this engine not found");
	cr_expect(!counted(&e, "/x/oci-rdma-runtime", b, runc), "runc's counted");
	cr_expect(!counted(&e, "/x/oci-rdma-runtime", c, ours), "another engine's counted");
	cr_expect(counted(&e, "/x/oci-rdma-runtime", d, ours), "one with no -address not counted");
	cr_expect(!counted(&e, "/y/oci-rdma-runtime", a, ours), "another binary's counted");
	/* each with its sleep: their process groups */
	kill(-a, SIGKILL), kill(-b, SIGKILL), kill(-c, SIGKILL), kill(-d, SIGKILL);
	waitpid(a, NULL, 0), waitpid(b, NULL, 0), waitpid(c, NULL, 0), waitpid(d, NULL, 0);
	close(fd);
	close(ofd);
	orh_inst_engine_free(&e);
	orh_strv_free(&notes);
}
