/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the installer's engine and files (src/cmd/install_engine.c,
 * src/cmd/install_files.c) on host roots made in /tmp: which engine and which file a root
 * holds (k3s's and rke2's templates, CONTAINERD_CONFIG and CONTAINERD_SOCKET), the node
 * config compared without configure's block, the undo that keeps the files and the purge;
 * configure under a root as install runs it: its lock (which nobody else can hold, waited
 * for a few seconds, its holder named), a link to nothing named as such, --engine-config
 * written clean into containerd's imports, renames racing openat2. Root needed only to
 * lock the root directory as nobody. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "orh/cmd/install.h"

#define K3S "/var/lib/rancher/k3s/agent/etc/containerd"
#define RKE2 "/var/lib/rancher/rke2/agent/etc/containerd"

static char root[64];

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/orh-install.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	unsetenv("CONTAINERD_CONFIG");
	unsetenv("CONTAINERD_SOCKET");
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
}

/* text at the host path under root, its directories made */
static void put(const char *path, const char *text)
{
	char cmd[512];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s%s')\"", root, path);
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s%s", root, path);
	f = fopen(cmd, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static bool there(const char *path)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s%s", root, path);
	return lstat(p, &st) == 0;
}

static void find(const char *flavour, struct orh_inst_engine *e, struct orh_strv *notes)
{
	struct orh_err err = { 0 };

	cr_assert_eq(orh_inst_engine_find(root, flavour, NULL, NULL, e, notes, &err), 0, "%s",
		     err.msg);
}

TestSuite(install, .init = setup, .fini = teardown);

Test(install, k3s_v3_rendered_no_template)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };

	put(K3S "/config.toml", "version = 3\n");
	find(NULL, &e, &notes);
	cr_assert_str_eq(e.flavour, "k3s");
	cr_assert_str_eq(e.config, K3S "/config-v3.toml.tmpl");
	cr_assert_str_eq(e.rendered, K3S "/config.toml");
	cr_assert_str_eq(e.socket, "/run/k3s/containerd/containerd.sock");
	cr_assert_eq(e.engine, ORH_ENGINE_CONTAINERD);
	cr_assert_eq(e.restart, ORH_RESTART_SYSTEMD);
	orh_inst_engine_free(&e);
	orh_strv_free(&notes);
}

Test(install, k3s_v2_rendered_and_existing_templates)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };

	put(K3S "/config.toml", "# generated\nversion = 2\n");
	find(NULL, &e, &notes);
	cr_assert_str_eq(e.config, K3S "/config.toml.tmpl");
	orh_inst_engine_free(&e);
	/* a template there wins over the rendered file's version; v3 first, as k3s reads them */
	put(K3S "/config.toml", "version = 3\n");
	put(K3S "/config.toml.tmpl", ORH_INSTALL_TEMPLATE_BASE);
	find(NULL, &e, &notes);
	cr_assert_str_eq(e.config, K3S "/config.toml.tmpl");
	orh_inst_engine_free(&e);
	put(K3S "/config-v3.toml.tmpl", ORH_INSTALL_TEMPLATE_BASE);
	find(NULL, &e, &notes);
	cr_assert_str_eq(e.config, K3S "/config-v3.toml.tmpl");
	orh_inst_engine_free(&e);
	orh_strv_free(&notes);
}

Test(install, rke2_before_plain_containerd)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };

	put("/etc/containerd/config.toml", "version = 2\n");
	put(RKE2 "/config.toml", "version = 2\n");
	find(NULL, &e, &notes);
	cr_assert_str_eq(e.flavour, "rke2");
	cr_assert_str_eq(e.config, RKE2 "/config.toml.tmpl");
	cr_assert_str_eq(e.socket, "/run/k3s/containerd/containerd.sock");
	cr_assert_str_eq(e.units, "rke2-server rke2-agent");
	orh_inst_engine_free(&e);
	orh_strv_free(&notes);
}

Test(install, containerd_environment)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };

	put("/etc/crio/crio.conf", "");
	setenv("CONTAINERD_CONFIG", "/etc/custom/containerd.toml", 1);
	setenv("CONTAINERD_SOCKET", "/run/custom.sock", 1);
	find(NULL, &e, &notes);
	cr_assert_str_eq(e.flavour, "containerd");
	cr_assert_str_eq(e.config, "/etc/custom/containerd.toml");
	cr_assert_str_eq(e.rendered, "/etc/custom/containerd.toml");
	cr_assert_str_eq(e.socket, "/run/custom.sock");
	orh_inst_engine_free(&e);
	/* the environment is containerd's: an engine named otherwise does not take it */
	find("crio", &e, &notes);
	cr_assert_str_eq(e.config, "/etc/crio/crio.conf");
	cr_assert_str_eq(e.socket, "/run/crio/crio.sock");
	orh_inst_engine_free(&e);
	orh_strv_free(&notes);
}

Test(install, rendered_k3s_config_given_is_its_template)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };

	put(K3S "/config.toml", "version = 3\n");
	setenv("CONTAINERD_CONFIG", K3S "/config.toml", 1);
	find(NULL, &e, &notes);
	cr_assert_str_eq(e.flavour, "k3s");
	cr_assert_str_eq(e.config, K3S "/config-v3.toml.tmpl");
	cr_assert_eq(notes.n, 1);
	cr_assert_not_null(strstr(notes.v[0], "its template is edited instead"));
	orh_inst_engine_free(&e);
	orh_strv_free(&notes);
}

Test(install, no_engine)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };
	struct orh_err err = { 0 };

	cr_assert_eq(orh_inst_engine_find(root, NULL, NULL, NULL, &e, &notes, &err), -ENOENT);
	cr_assert_not_null(strstr(err.msg, "give --engine"));
	cr_assert_eq(orh_inst_engine_find(root, "lxd", NULL, NULL, &e, &notes, &err), -EINVAL);
}

Test(install, podman_is_ready_at_once)
{
	struct orh_inst_engine e;
	struct orh_strv notes = { 0 };
	struct orh_err err = { 0 };
	char *what = NULL, *why = NULL;

	find("podman", &e, &notes);
	cr_assert_eq(orh_inst_engine_loaded(root, &e, "rdma", "/usr/bin/oci-rdma-runtime", &what,
					    &why, &err), 1);
	cr_assert_null(why);
	free(what);
	orh_inst_engine_free(&e);
}

Test(install, node_config_without_configures_block)
{
	static const char conf[] = "[containers]\nactivation = devices\n";
	struct orh_inst_manifest m = { 0 };
	struct orh_err err = { 0 };
	const char *what = NULL;
	char block[256];

	cr_assert_eq(orh_inst_put(root, &m, 'c', "/etc/orh/node.conf", conf, strlen(conf), 0644,
				  &what, &err), 0, "%s", err.msg);
	cr_assert_str_eq(what, "created");
	/* configure's runtime block appended: still the same node config */
	snprintf(block, sizeof(block), "%s\n# >>> oci-rdma-hook configure --engine containerd\n"
		 "[containers]\nruntime = /usr/bin/nvidia-container-runtime\n"
		 "# <<< oci-rdma-hook configure --engine containerd\n", conf);
	put("/etc/orh/node.conf", block);
	cr_assert_eq(orh_inst_put(root, &m, 'c', "/etc/orh/node.conf", conf, strlen(conf), 0644,
				  &what, &err), 0);
	cr_assert_str_eq(what, "unchanged");
	/* edited on the node: the source's is put back */
	put("/etc/orh/node.conf", "[containers]\nactivation = always\n");
	cr_assert_eq(orh_inst_put(root, &m, 'c', "/etc/orh/node.conf", conf, strlen(conf), 0644,
				  &what, &err), 0);
	cr_assert_str_eq(what, "updated");
	orh_inst_free(&m);
	/* one that was there before the installer is kept */
	put("/etc/orh/other.conf", "[containers]\nactivation = always\n");
	cr_assert_eq(orh_inst_put(root, &m, 'c', "/etc/orh/other.conf", conf, strlen(conf), 0644,
				  &what, &err), 0);
	cr_assert_str_eq(what, "kept");
	orh_inst_free(&m);
}

/* install's files as it puts them: a binary, a node config, a template, the feature file */
static void installed(struct orh_inst_manifest *m)
{
	static const char *const files[][2] = {
		{ "f", "/opt/orh/bin/oci-rdma-hook" }, { "c", "/opt/orh/etc/node.conf" },
		{ "t", K3S "/config-v3.toml.tmpl" }, { "s", "/etc/nfd/features.d/orh" },
	};
	struct orh_err err = { 0 };
	const char *what = NULL;

	for (size_t i = 0; i < ORH_ARRAY_SIZE(files); i++) {
		const char *text = files[i][0][0] == 't' ? ORH_INSTALL_TEMPLATE_BASE : "x\n";

		cr_assert_eq(orh_inst_put(root, m, files[i][0][0], files[i][1], text, strlen(text),
					  0644, &what, &err), 0, "%s", err.msg);
	}
}

Test(install, undo_keeps_the_files_purge_removes_them)
{
	struct orh_inst_manifest m = { 0 }, again = { 0 };
	struct orh_strv done = { 0 };
	struct orh_err err = { 0 };

	installed(&m);
	cr_assert_eq(orh_inst_undo_kind(root, &m, 's', NULL, &done, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_inst_undo_kind(root, &m, 't', ORH_INSTALL_TEMPLATE_BASE, &done, &err), 0);
	cr_assert(!there("/etc/nfd"), "the feature file and the directories made for it go");
	cr_assert(!there("/var/lib/rancher"), "the template made, holding the base alone, goes");
	cr_assert(there("/opt/orh/bin/oci-rdma-hook") && there("/opt/orh/etc/node.conf"));
	/* the manifest on disk lists what is kept, and nothing removed */
	cr_assert_eq(orh_inst_load(root, &again, &err), 0);
	cr_assert(orh_inst_has(&again, "/opt/orh/bin/oci-rdma-hook"));
	cr_assert(orh_inst_has(&again, "/opt/orh/etc/node.conf"));
	cr_assert(!orh_inst_has(&again, "/etc/nfd/features.d/orh"));
	cr_assert(!orh_inst_has(&again, "/etc/nfd"));
	cr_assert(!orh_inst_has(&again, K3S "/config-v3.toml.tmpl"));
	cr_assert_eq(orh_inst_remove_all(root, &again, &done, &err), 0, "%s", err.msg);
	cr_assert(!there("/opt") && !there("/var"), "the purge leaves nothing the installer made");
	orh_inst_free(&m);
	orh_inst_free(&again);
	orh_strv_free(&done);
}

Test(install, an_edited_template_stays)
{
	struct orh_inst_manifest m = { 0 };
	struct orh_strv done = { 0 };
	struct orh_err err = { 0 };

	installed(&m);
	put(K3S "/config-v3.toml.tmpl", ORH_INSTALL_TEMPLATE_BASE "[plugins.x]\n");
	cr_assert_eq(orh_inst_undo_kind(root, &m, 't', ORH_INSTALL_TEMPLATE_BASE, &done, &err), 0);
	cr_assert(there(K3S "/config-v3.toml.tmpl"));
	cr_assert(!orh_inst_has(&m, K3S "/config-v3.toml.tmpl"), "no longer the installer's");
	cr_assert_eq(orh_inst_remove_all(root, &m, &done, &err), 0, "%s", err.msg);
	cr_assert(there(K3S "/config-v3.toml.tmpl"), "the purge leaves it too");
	orh_inst_free(&m);
	orh_strv_free(&done);
}

/* --root is a root: where the host root's /etc is an absolute link (to a directory outside
 * the root), install writes, and its purge removes, inside the root only. */
Test(install, absolute_links_resolve_inside_the_root)
{
	char outside[64], path[160], inside[160];
	struct orh_inst_manifest m = { 0 };
	struct orh_strv done = { 0 };
	struct orh_err err = { 0 };
	const char *what = NULL;
	struct stat st;

	snprintf(outside, sizeof(outside), "%s-outside", root);
	cr_assert_eq(mkdir(outside, 0755), 0);
	snprintf(path, sizeof(path), "%s/etc", root);
	cr_assert_eq(symlink(outside, path), 0);
	cr_assert_eq(orh_inst_put(root, &m, 'c', "/etc/orh/node.conf", "x\n", 2, 0644, &what,
				  &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/orh/node.conf", outside);
	snprintf(inside, sizeof(inside), "%s%s/orh/node.conf", root, outside);
	cr_assert_neq(stat(path, &st), 0, "written outside the root");
	cr_assert_eq(stat(inside, &st), 0, "not written where the link leads inside the root");
	/* a file outside of that name is never the one removed */
	snprintf(path, sizeof(path), "%s/orh", outside);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/orh/node.conf", outside);
	cr_assert_eq(close(open(path, O_CREAT | O_WRONLY, 0644)), 0);
	cr_assert_eq(orh_inst_remove_all(root, &m, &done, &err), 0, "%s", err.msg);
	cr_assert_eq(stat(path, &st), 0, "removed outside the root");
	cr_assert_neq(stat(inside, &st), 0, "the purge left it inside the root");
	snprintf(path, sizeof(path), "rm -rf '%s'", outside);
	cr_assert_eq(system(path), 0);
	orh_inst_free(&m);
	orh_strv_free(&done);
}

/* ---- configure under a root (orh_configure_under, as install runs it) ---- */

#define CONF "/etc/oci-rdma-hook/oci-rdma-hook.conf"
#define LOCK "/run/.oci-rdma-hook-configure.lock"

/* configure for containerd under root; 0 or -errno with err */
static int cfg_under(const char *engine_config, struct orh_err *err)
{
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD,
					 .engine_config = engine_config, .handler = "rdma",
					 .shim = "/usr/bin/oci-rdma-runtime" };
	struct orh_strv changed = { 0 }, notes = { 0 };
	int r = orh_configure_under(root, &req, CONF, &changed, &notes, err);

	orh_strv_free(&changed);
	orh_strv_free(&notes);
	return r;
}

static long long ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A child that holds what hold() takes, told its result on *rep (one byte), and lets go
 * when *go closes (the test's end, or its death). */
static pid_t holder(bool (*hold)(void), int *rep, int *go)
{
	int a[2], b[2];
	pid_t pid;
	char c;

	cr_assert_eq(pipe(a), 0);
	cr_assert_eq(pipe(b), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(a[0]);
		close(b[1]);
		c = hold() ? 'y' : 'n';
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(a[1]);
	close(b[0]);
	*rep = a[0];
	*go = b[1];
	return pid;
}

static void let_go(pid_t pid, int rep, int go)
{
	close(go);
	close(rep);
	waitpid(pid, NULL, 0);
}

/* as nobody: the root directory locked, which anyone may do */
static bool hold_root_as_nobody(void)
{
	int d;

	if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
	    setresuid(65534, 65534, 65534) < 0)
		return false;
	d = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return d >= 0 && flock(d, LOCK_EX | LOCK_NB) == 0;
}

/* as nobody: the lock file opened (made where missing), to lock it */
static bool open_lock_as_nobody(void)
{
	char p[128];

	if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
	    setresuid(65534, 65534, 65534) < 0)
		return false;
	snprintf(p, sizeof(p), "%s" LOCK, root);
	return open(p, O_RDONLY | O_CREAT | O_CLOEXEC, 0644) >= 0 || errno != EACCES;
}

/* Any user may open and lock the root directory: that stalls no configure or install; the
 * lock file, nobody may open or make, and a run leaves none behind. */
Test(install, nobody_cannot_stall_configure, .timeout = 20)
{
	struct orh_err err = { 0 };
	int rep = -1, go = -1;
	char c = 0, p[128];
	long long t;
	pid_t pid;

	snprintf(p, sizeof(p), "%s" LOCK, root);
	if (geteuid() != 0)
		cr_skip_test("becoming nobody needs root");
	cr_assert_eq(chmod(root, 0755), 0);
	put("/run/.keep", "");
	cr_assert_eq(cfg_under(NULL, &err), 0, "%s", err.msg);
	pid = holder(hold_root_as_nobody, &rep, &go);
	cr_assert_eq(read(rep, &c, 1), 1);
	cr_assert_eq(c, 'y', "nobody could not lock the root directory");
	t = ms_now();
	cr_assert_eq(cfg_under(NULL, &err), 0, "%s", err.msg);
	cr_assert_lt(ms_now() - t, 2000, "configure waited for nobody's lock");
	let_go(pid, rep, go);
	cr_assert(!there(LOCK), "the run left its lock file");
	for (int held = 0; held < 2; held++) {
		if (held) /* as a run makes it */
			put(LOCK, "1\n");
		if (held)
			cr_assert_eq(chmod(p, 0600), 0);
		pid = holder(open_lock_as_nobody, &rep, &go);
		cr_assert_eq(read(rep, &c, 1), 1);
		let_go(pid, rep, go);
		cr_assert_eq(c, 'n', "nobody opened or made the lock file (%s there)",
			     held ? "one" : "none");
	}
}

static bool hold_lock(void)
{
	char p[128];
	int f;

	snprintf(p, sizeof(p), "%s" LOCK, root);
	f = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	return f >= 0 && flock(f, LOCK_EX | LOCK_NB) == 0;
}

/* Another run that holds the lock: this one waits a few seconds, then gives up naming its
 * pid and the lock file. */
Test(install, a_held_lock_is_waited_for_then_named, .timeout = 60)
{
	struct orh_err err = { 0 };
	int rep = -1, go = -1;
	char want[128], c = 0;
	long long t;
	pid_t pid;
	int r;

	put("/run/.keep", "");
	pid = holder(hold_lock, &rep, &go);
	cr_assert_eq(read(rep, &c, 1), 1);
	cr_assert_eq(c, 'y', "the holder could not take the lock");
	t = ms_now();
	r = cfg_under(NULL, &err);
	t = ms_now() - t;
	let_go(pid, rep, go);
	cr_assert_lt(r, 0, "configure ran while another held the lock");
	cr_assert(t >= 4000 && t < 8000, "gave up after %lld ms, not after about 5 s", t);
	snprintf(want, sizeof(want), "pid %d;", (int)pid);
	cr_assert(strstr(err.msg, want), "the holder's pid is not named: %s", err.msg);
	snprintf(want, sizeof(want), "'%s" LOCK "'", root);
	cr_assert(strstr(err.msg, want), "the lock file is not named: %s", err.msg);
	cr_assert(!there("/etc/containerd/config.toml"), "it wrote without the lock");
	/* let go: the next run takes it at once, and removes it at its end */
	cr_assert_eq(cfg_under(NULL, &err), 0, "%s", err.msg);
	cr_assert(!there(LOCK), "the run left its lock file");
}

/* A lock file others may open (or in a directory others may write) is not used. */
Test(install, a_lock_others_may_open_is_refused)
{
	struct orh_err err = { 0 };
	char p[128];

	put(LOCK, "");
	snprintf(p, sizeof(p), "%s" LOCK, root);
	cr_assert_eq(chmod(p, 0644), 0);
	cr_assert_lt(cfg_under(NULL, &err), 0, "a lock file of mode 0644 used");
	cr_assert(strstr(err.msg, p) && strstr(err.msg, "mode 0600"), "%s", err.msg);
	cr_assert_eq(chmod(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/run", root);
	cr_assert_eq(chmod(p, 0777), 0);
	cr_assert_lt(cfg_under(NULL, &err), 0, "a lock in a directory anyone may write used");
	cr_assert(strstr(err.msg, "not locking there"), "%s", err.msg);
	cr_assert(!there("/etc/containerd/config.toml"), "it wrote without the lock");
}

/* A /run of mode 1777 (as in a VM's or a container's root): another user's file or link at
 * the lock's name is removed by root, which then locks with a file of its own; the link's
 * target is left as it was. */
Test(install, a_sticky_run_is_locked_in_after_another_users_entry_is_removed)
{
	struct orh_err err = { 0 };
	char p[128], run[128], target[128];
	struct stat st;

	if (geteuid() != 0)
		cr_skip_test("needs root (chown, the sticky directory's rule)");
	put("/run/.keep", "");
	put("/target", "untouched\n");
	snprintf(run, sizeof(run), "%s/run", root);
	cr_assert_eq(chmod(run, 01777), 0);
	snprintf(p, sizeof(p), "%s" LOCK, root);
	snprintf(target, sizeof(target), "%s/target", root);
	cr_assert_eq(symlink(target, p), 0);
	cr_assert_eq(lchown(p, 65534, 65534), 0);
	cr_assert_eq(cfg_under(NULL, &err), 0, "%s", err.msg);
	cr_assert(there("/etc/containerd/config.toml"));
	cr_assert_eq(stat(target, &st), 0);
	cr_assert_eq(st.st_size, 10, "the link's target was written");
	cr_assert(!there(LOCK), "the lock file left behind");
	put(LOCK, "x\n");
	cr_assert_eq(chown(p, 65534, 65534), 0);
	cr_assert_eq(cfg_under(NULL, &err), 0, "%s", err.msg);
	cr_assert(!there(LOCK), "another user's file kept at the lock's name");
	/* without the sticky bit, a directory anyone may write is still refused */
	cr_assert_eq(chmod(run, 0777), 0);
	cr_assert_lt(cfg_under(NULL, &err), 0);
	cr_assert(strstr(err.msg, "not locking there"), "%s", err.msg);
}

/* A symbolic link to nothing on the way is named as such, not as a loop of links. */
Test(install, a_dangling_link_is_named)
{
	struct orh_err err = { 0 };
	char p[160];

	put("/run/.keep", "");
	put("/etc/.keep", "");
	snprintf(p, sizeof(p), "%s/etc/containerd", root);
	cr_assert_eq(symlink("../nodir", p), 0);
	cr_assert_lt(cfg_under(NULL, &err), 0);
	cr_assert(strstr(err.msg, "'/etc/containerd' is a symbolic link to '../nodir', which "
			 "does not exist"), "%s", err.msg);
	cr_assert_eq(unlink(p), 0);
	put("/etc/containerd/.keep", "");
	snprintf(p, sizeof(p), "%s/etc/containerd/config.toml", root);
	cr_assert_eq(symlink("/etc/nope", p), 0);
	cr_assert_lt(cfg_under(NULL, &err), 0);
	cr_assert(strstr(err.msg, "'/etc/containerd/config.toml' is a symbolic link to "
			 "'/etc/nope', which does not exist"), "%s", err.msg);
	cr_assert_eq(err.code, ENOENT);
}

/* --engine-config goes into containerd's imports: clean, and never with a "..". */
Test(install, the_engine_config_written_into_imports_is_clean)
{
	struct orh_err err = { 0 };
	char p[160], text[512];
	FILE *f;

	put("/run/.keep", "");
	/* (version 3: the handler goes into the drop-in, whose glob goes into the imports) */
	put("/etc/containerd/config.toml", "version = 3\n");
	cr_assert_lt(cfg_under("/etc/containerd/../containerd/config.toml", &err), 0,
		     "a path with '..' taken");
	cr_assert(strstr(err.msg, "'..'"), "%s", err.msg);
	cr_assert(!there("/etc/containerd/conf.d"), "the refused run wrote");
	cr_assert_eq(cfg_under("/etc//containerd/./config.toml", &err), 0, "%s", err.msg);
	snprintf(p, sizeof(p), "%s/etc/containerd/config.toml", root);
	f = fopen(p, "r");
	cr_assert_not_null(f);
	text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
	fclose(f);
	cr_assert(strstr(text, "imports = [\"/etc/containerd/conf.d/*.toml\"]"), "%s", text);
	cr_assert(there("/etc/containerd/conf.d/99-oci-rdma-hook.toml"));
}

/* openat2 says EAGAIN where a ".." is resolved while anything on the system is renamed: a
 * root reached through a relative link, with renames all the while, fails no run. */
#define RACE_MS 3000
Test(install, renames_all_the_while_fail_no_run, .timeout = 120)
{
	struct orh_err err = { 0 }, last = { 0 };
	char a[128], b[128], p[160], c = 0;
	int failed = 0, runs = 0, up[2];
	cpu_set_t cpus;
	long long t;
	pid_t pid;

	put("/run/.keep", "");
	put("/srv/cd/config.toml", "version = 3\n");
	snprintf(p, sizeof(p), "%s/etc", root);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/etc/containerd", root);
	cr_assert_eq(symlink("../srv/cd", p), 0);
	snprintf(a, sizeof(a), "%s/a", root);
	snprintf(b, sizeof(b), "%s/b", root);
	cr_assert_eq(mkdir(a, 0755), 0);
	cr_assert_eq(pipe(up), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	/* the renames on one CPU, the runs on another, where there are two */
	CPU_ZERO(&cpus);
	CPU_SET(pid == 0 ? 0 : 1, &cpus);
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1)
		(void)sched_setaffinity(0, sizeof(cpus), &cpus);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (bool told = false;; told = true)
			if (rename(a, b) < 0 || rename(b, a) < 0 || (!told && write(up[1], "y", 1) != 1))
				_exit(1);
	}
	close(up[1]);
	cr_assert_eq(read(up[0], &c, 1), 1, "the renames did not start");
	close(up[0]);
	for (t = ms_now(); runs < 300 || ms_now() - t < RACE_MS; runs++)
		if (cfg_under(NULL, &err) < 0) {
			failed++;
			last = err;
		}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_assert_eq(failed, 0, "%d of %d runs failed, the last: %s", failed, runs, last.msg);
	cr_assert(there("/srv/cd/conf.d/99-oci-rdma-hook.toml"));
}

/* The re-asserts' pace: the first at once, then at least 10 s apart, the gap doubled while
 * they keep coming (to 320 s), back to 10 s after a quiet minute past the gap. */
Test(install_watch, the_pace_of_the_re_asserts)
{
	struct orh_inst_pace p = { 0 };
	unsigned gaps[] = { 10, 20, 40, 80, 160, 320, 320 };
	long long t = 1000;

	cr_assert_eq(orh_inst_pace_wait(&p, t), 0, "the first re-assert waits");
	orh_inst_pace_done(&p, t);
	cr_assert_eq(orh_inst_pace_wait(&p, t + 3), 7);
	cr_assert_eq(orh_inst_pace_wait(&p, t + 10), 0);
	for (size_t i = 1; i < ORH_ARRAY_SIZE(gaps); i++) {
		t += p.gap;
		orh_inst_pace_done(&p, t);
		cr_assert_eq(p.gap, gaps[i], "re-assert %zu: gap %u, not %u", i, p.gap, gaps[i]);
		cr_assert_eq(orh_inst_pace_wait(&p, t + 1), gaps[i] - 1);
	}
	t += p.gap + ORH_INST_PACE_QUIET_S - 1;
	orh_inst_pace_done(&p, t);
	cr_assert_eq(p.gap, 320, "a re-assert within the quiet time after the gap: still 320");
	t += p.gap + ORH_INST_PACE_QUIET_S;
	orh_inst_pace_done(&p, t);
	cr_assert_eq(p.gap, 10, "after a quiet minute past the gap: back to 10, not %u", p.gap);
}

/* the check under root: the files not as configure would leave them, the directories to
 * watch */
static size_t drift_under(struct orh_strv *drifted, struct orh_strv *dirs)
{
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .handler = "rdma",
					 .shim = "/usr/bin/oci-rdma-runtime" };
	struct orh_cfg_files files = { 0 };
	struct orh_strv notes = { 0 };
	struct orh_err err = { 0 };
	size_t n;

	cr_assert_eq(orh_configure_check_under(root, &req, CONF, &files, &notes, &err), 0,
		     "%s", err.msg);
	n = orh_inst_drift(&files, drifted);
	orh_inst_watch_dirs(&files, "/etc/containerd/config.toml", dirs);
	orh_cfg_files_free(&files);
	orh_strv_free(&notes);
	return n;
}

/* The directories to watch: the engine's file's, each file's the plan read, each import's
 * (absolute, or relative to the config's directory) where no file matches it yet */
Test(install_watch, the_directories_to_watch)
{
	struct orh_cfg_file v[] = {
		{ .path = "/etc/containerd/config.toml",
		  .old = "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\", \"more/*.toml\"]\n" },
		{ .path = "/etc/containerd/conf.d/99-nvidia.toml", .old = "version = 2\n" },
		{ .path = CONF },
	};
	const char *want[] = { "/etc/containerd", "/etc/containerd/conf.d", "/etc/containerd/more",
			       "/etc/oci-rdma-hook" };
	struct orh_cfg_files files = { .v = v, .n = ORH_ARRAY_SIZE(v) };
	struct orh_strv dirs = { 0 };

	orh_inst_watch_dirs(&files, "/etc/containerd/config.toml", &dirs);
	cr_assert_eq(dirs.n, ORH_ARRAY_SIZE(want), "%zu directories", dirs.n);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(want); i++)
		cr_assert(orh_strv_contains(&dirs, want[i]), "%s is not watched", want[i]);
	orh_strv_free(&dirs);
}

/* nvidia-ctk making nvidia the default after configure: the node config, which names the
 * runtime the handler chains, is drifted; configure again, and nothing is */
Test(install_watch, a_new_default_runtime_is_drift, .init = setup, .fini = teardown)
{
	struct orh_strv drifted = { 0 }, dirs = { 0 };
	struct orh_err err = { 0 };
	char p[512];
	FILE *f;

	put("/etc/containerd/config.toml", "version = 2\n");
	cr_assert_eq(cfg_under(NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(drift_under(&drifted, &dirs), 0, "just configured, drifted: %s",
		     drifted.n ? drifted.v[0] : "");
	snprintf(p, sizeof(p), "%s/etc/containerd/config.toml", root);
	f = fopen(p, "a");
	cr_assert_not_null(f);
	fputs("\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
	      "  default_runtime_name = \"nvidia\"\n"
	      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
	      "  runtime_type = \"io.containerd.runc.v2\"\n"
	      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n"
	      "  BinaryName = \"/usr/bin/nvidia-container-runtime\"\n", f);
	fclose(f);
	cr_assert_geq(drift_under(&drifted, &dirs), 1);
	cr_assert(orh_strv_contains(&drifted, CONF), "the node config is not named drifted");
	orh_strv_free(&drifted);
	cr_assert_eq(cfg_under(NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(drift_under(&drifted, &dirs), 0, "configured again, drifted: %s",
		     drifted.n ? drifted.v[0] : "");
	orh_strv_free(&drifted);
	orh_strv_free(&dirs);
}

/* The watch names a file renamed into a watched directory, and one made in a directory
 * that did not exist when it was first set, once set again */
Test(install_watch, the_watch_sees_a_file_renamed_in, .init = setup, .fini = teardown)
{
	struct orh_inst_watch w = { .fd = -1 };
	struct orh_strv dirs = { 0 }, changed = { 0 };
	struct orh_err err = { 0 };
	char a[512], b[512];

	put("/etc/containerd/config.toml", "version = 2\n");
	orh_strv_push(&dirs, orh_xstrdup("/etc/containerd"));
	orh_strv_push(&dirs, orh_xstrdup("/etc/containerd/conf.d"));
	cr_assert_eq(orh_inst_watch_set(&w, root, &dirs, &err), 0, "%s", err.msg);
	cr_assert_not(orh_inst_watch_read(&w, &changed));
	cr_assert_eq(changed.n, 0);
	put("/etc/containerd/new.tmp", "version = 2\n");
	snprintf(a, sizeof(a), "%s/etc/containerd/new.tmp", root);
	snprintf(b, sizeof(b), "%s/etc/containerd/config.toml", root);
	cr_assert_eq(rename(a, b), 0);
	orh_inst_watch_read(&w, &changed);
	cr_assert(orh_strv_contains(&changed, "/etc/containerd/config.toml"));
	orh_strv_free(&changed);
	put("/etc/containerd/conf.d/99-nvidia.toml", "version = 2\n");
	orh_inst_watch_read(&w, &changed);
	cr_assert_not(orh_strv_contains(&changed, "/etc/containerd/conf.d/99-nvidia.toml"),
		      "a directory made after the watch was set is not watched yet");
	cr_assert_eq(orh_inst_watch_set(&w, root, &dirs, &err), 0, "%s", err.msg);
	put("/etc/containerd/conf.d/99-nvidia.toml", "version = 3\n");
	orh_inst_watch_read(&w, &changed);
	cr_assert(orh_strv_contains(&changed, "/etc/containerd/conf.d/99-nvidia.toml"));
	orh_strv_free(&changed);
	orh_strv_free(&dirs);
	orh_inst_watch_free(&w);
}
