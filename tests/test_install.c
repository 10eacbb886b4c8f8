/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the installer's engine and files (src/cmd/install_engine.c,
 * src/cmd/install_files.c) on host roots made in /tmp: which engine and which file a root
 * holds (k3s's and rke2's templates, CONTAINERD_CONFIG and CONTAINERD_SOCKET), the node
 * config compared without configure's block, the undo that keeps the files and the purge.
 * No root needed. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/install.h"

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
