/* SPDX-License-Identifier: Apache-2.0 */
/* configure's TOML scanner, its block, and each engine's plan, on files held in memory. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orh-config.h"
#include "orh/configure.h"

/* ---- the TOML scanner ---- */

static const char *value_of(const struct orh_toml *t, const char *key)
{
	const struct orh_toml_entry *e = orh_toml_get(t, key);

	return e ? e->value : NULL;
}

Test(toml, keys_tables_and_values)
{
	const char *text =
		"version = 2 # a comment\n"
		"[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
		"  default_runtime_name = 'nvidia'\n"
		"  runtimes.runc.options.SystemdCgroup = true\n"
		"[[proxy_plugins]]\n"
		"list = [\n  \"a\", # one\n  'b',\n]\n"
		"inline = { a = \"]\", b = [1, 2] }\n"
		"text = \"\"\"\nx = 1\n\"\"\"\n"
		"\"quoted.key\" = \"v\\\"q\"\n";
	struct orh_err err = { 0 };
	struct orh_toml t;
	struct orh_strv sv = { 0 };
	char *s = NULL;
	bool b = false;

	cr_assert_eq(orh_toml_scan(text, "c.toml", &t, &err), 0, "%s", err.msg);
	cr_assert_str_eq(value_of(&t, "version"), "2");
	cr_assert_str_eq(value_of(&t, "plugins\x1fio.containerd.grpc.v1.cri\x1f" "containerd\x1f"
				  "default_runtime_name"), "'nvidia'");
	cr_assert(orh_toml_bool(value_of(&t, "plugins\x1fio.containerd.grpc.v1.cri\x1f" "containerd\x1f"
					 "runtimes\x1frunc\x1foptions\x1fSystemdCgroup"), &b));
	cr_assert(b);
	cr_assert(orh_toml_string_array(value_of(&t, "proxy_plugins\x1flist"), &sv));
	cr_assert_eq(sv.n, 2);
	cr_assert_str_eq(sv.v[0], "a");
	cr_assert_str_eq(sv.v[1], "b");
	cr_assert_str_eq(value_of(&t, "proxy_plugins\x1finline"), "{ a = \"]\", b = [1, 2] }");
	/* a multi-line string is one value: its "x = 1" is no key */
	cr_assert_null(value_of(&t, "proxy_plugins\x1fx"));
	cr_assert(orh_toml_string(value_of(&t, "proxy_plugins\x1fquoted.key"), &s));
	cr_assert_str_eq(s, "v\"q");
	cr_assert_eq(orh_toml_get(&t, "proxy_plugins\x1fquoted.key")->line, 14);
	free(s);
	orh_strv_free(&sv);
	orh_toml_free(&t);
}

Test(toml, errors_name_the_file_and_line)
{
	const struct {
		const char *text, *msg;
	} bad[] = {
		{ "a = 1\n[table\n", "c.toml:2: a table header without its ']'" },
		{ "a = \"open\n", "c.toml:1: a string that does not end on its line" },
		{ "a = 1\nb\n", "c.toml:2: expected '=' after the key" },
		{ "a = [1,\n2\n", "c.toml:3: an array or inline table that does not end" },
		{ "a = \"x\" y\n", "c.toml:1: unexpected text after the value" },
		{ "a =\n", "c.toml:1: a key without a value" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct orh_err err = { 0 };
		struct orh_toml t;

		cr_assert_eq(orh_toml_scan(bad[i].text, "c.toml", &t, &err), -EINVAL, "%s", bad[i].text);
		cr_assert_str_eq(err.msg, bad[i].msg);
	}
}

/* ---- the block ---- */

static const struct orh_block blk = { .id = "--engine x", .body = "[a]\nb = 1\n", .header = "v = 2\n" };

Test(block, append_then_remove_gives_back_the_bytes)
{
	const char *olds[] = { "", "x = 1\n", "x = 1", "# only a comment\n\n" };

	for (size_t i = 0; i < sizeof(olds) / sizeof(olds[0]); i++) {
		struct orh_err err = { 0 };
		char *with = NULL, *again = NULL, *without = NULL;
		bool remove = true;

		cr_assert_eq(orh_block_install(olds[i], "f", &blk, &with, &err), 0);
		cr_assert_not_null(with);
		cr_assert(!strncmp(with, olds[i], strlen(olds[i])), "the old text stays first");
		cr_assert_eq(orh_block_install(with, "f", &blk, &again, &err), 0);
		cr_assert_null(again, "a second install changes nothing");
		cr_assert_eq(orh_block_remove(with, "f", &blk, &without, &remove, &err), 1);
		cr_assert(!remove);
		cr_assert_str_eq(without, olds[i]);
		free(with);
		free(without);
	}
}

Test(block, new_file_is_removed_whole_unless_the_operator_added_to_it)
{
	struct orh_err err = { 0 };
	char *made = NULL, *out = NULL, *edited = NULL;
	bool remove = false;

	cr_assert_eq(orh_block_install(NULL, "f", &blk, &made, &err), 0);
	cr_assert_str_eq(made, "v = 2\n\n# >>> oci-rdma-hook configure --engine x (new file)\n"
			       "[a]\nb = 1\n# <<< oci-rdma-hook configure --engine x\n");
	cr_assert_eq(orh_block_remove(made, "f", &blk, &out, &remove, &err), 1);
	cr_assert(remove);
	cr_assert_null(out);
	edited = orh_xasprintf("%sextra = 1\n", made);
	cr_assert_eq(orh_block_remove(edited, "f", &blk, &out, &remove, &err), 1);
	cr_assert(!remove, "the operator's line is kept");
	cr_assert_str_eq(out, "v = 2\nextra = 1\n");
	free(made);
	free(edited);
	free(out);
}

Test(block, changed_block_is_replaced_in_place_and_a_broken_one_refused)
{
	struct orh_block other = blk;
	struct orh_err err = { 0 };
	char *with = NULL, *out = NULL;
	const char *broken = "a = 1\n# >>> oci-rdma-hook configure --engine x\n[a]\n";

	cr_assert_eq(orh_block_install("x = 1\n", "f", &blk, &with, &err), 0);
	other.body = "[a]\nb = 2\n";
	cr_assert_eq(orh_block_install(with, "f", &other, &out, &err), 0);
	cr_assert_str_eq(out, "x = 1\n\n# >>> oci-rdma-hook configure --engine x\n[a]\nb = 2\n"
			      "# <<< oci-rdma-hook configure --engine x\n");
	free(out);
	cr_assert_eq(orh_block_install(broken, "f", &blk, &out, &err), -EINVAL);
	cr_assert(strstr(err.msg, "f:2: ") == err.msg, "%s", err.msg);
	free(with);
}

/* Marker lines that gained CRLF or a trailing blank are still configure's: a re-run replaces
 * that block in place (one block), and --undo removes it. */
Test(block, markers_with_crlf_or_trailing_blanks_are_found)
{
	const char *edited = "x = 1\r\n\r\n# >>> oci-rdma-hook configure --engine x \r\n[a]\r\n"
			     "# <<< oci-rdma-hook configure --engine x\t\r\n";
	struct orh_err err = { 0 };
	char *out = NULL;
	bool remove = false;

	cr_assert_eq(orh_block_install(edited, "f", &blk, &out, &err), 0, "%s", err.msg);
	cr_assert_not_null(out);
	cr_assert_str_eq(out, "x = 1\r\n\r\n# >>> oci-rdma-hook configure --engine x\n[a]\nb = 1\n"
			      "# <<< oci-rdma-hook configure --engine x\n");
	free(out);
	cr_assert_eq(orh_block_remove(edited, "f", &blk, &out, &remove, &err), 1);
	cr_assert_str_eq(out, "x = 1\r\n");
	free(out);
}

/* A begin marker without its end is no block: the lines after it are the operator's. */
Test(block, strip_keeps_the_lines_after_a_begin_without_end)
{
	const char *text = "a = 1\n# >>> oci-rdma-hook configure --engine x\nimports = [\"b\"]\n";
	char *out = orh_block_strip_all(text);

	cr_assert_str_eq(out, text);
	free(out);
	out = orh_block_strip_all("a = 1\n# >>> oci-rdma-hook configure --engine x\n[a]\n"
				  "# <<< oci-rdma-hook configure --engine x\nc = 2\n");
	cr_assert_str_eq(out, "a = 1\nc = 2\n");
	free(out);
}

/* ---- engines, on files held in memory ---- */

struct fake_fs {
	const char *path[8];
	const char *text[8];
	const char *exe[8];
};

static int fake_read(void *arg, const char *path, char **out, struct orh_err *err)
{
	struct fake_fs *fs = arg;

	*out = NULL;
	for (size_t i = 0; i < 8 && fs->path[i]; i++)
		if (!strcmp(fs->path[i], path))
			*out = orh_xstrdup(fs->text[i]);
	return 0;
}

static int fake_list(void *arg, const char *dir, struct orh_strv *names, struct orh_err *err)
{
	struct fake_fs *fs = arg;
	size_t n = strlen(dir);

	for (size_t i = 0; i < 8 && fs->path[i]; i++)
		if (!strncmp(fs->path[i], dir, n) && fs->path[i][n] == '/' &&
		    !strchr(fs->path[i] + n + 1, '/'))
			orh_strv_push(names, orh_xstrdup(fs->path[i] + n + 1));
	return 0;
}

static bool fake_exe(void *arg, const char *path)
{
	struct fake_fs *fs = arg;

	for (size_t i = 0; i < 8 && fs->exe[i]; i++)
		if (!strcmp(fs->exe[i], path))
			return true;
	return false;
}

static int plan(struct fake_fs *fs, struct orh_configure_req *req, struct orh_cfg_files *files,
		struct orh_err *err)
{
	struct orh_cfg_reader rd = { fake_read, fake_list, fake_exe, fs, NULL };
	struct orh_strv notes = { 0 };
	int r;

	if (!req->shim)
		req->shim = "/usr/bin/oci-rdma-runtime";
	if (!req->handler)
		req->handler = "rdma";
	r = orh_configure_plan(req, "/etc/oci-rdma-hook/oci-rdma-hook.conf", &rd, files, &notes, err);
	orh_strv_free(&notes);
	return r;
}

static const struct orh_cfg_file *file(const struct orh_cfg_files *f, const char *path)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->v[i].path, path))
			return &f->v[i];
	return NULL;
}

static size_t count(const char *text, const char *what)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, what)); p++)
		n++;
	return n;
}

#define CD_MAIN "/etc/containerd/config.toml"
#define CD_OURS "/etc/containerd/conf.d/99-oci-rdma-hook.toml"
#define CD_NODE "/etc/oci-rdma-hook/oci-rdma-hook.conf"
#define CRI "[plugins.\"io.containerd.grpc.v1.cri\""

Test(engines, containerd_copies_systemd_cgroup_and_the_nvidia_runtime)
{
	struct fake_fs fs = {
		.path = { CD_MAIN, CD_NODE },
		.text = { "version = 2\n"
			  CRI ".containerd]\n"
			  "default_runtime_name = \"nvidia\"\n"
			  CRI ".containerd.runtimes.nvidia.options]\n"
			  "BinaryName = \"/usr/local/nvidia/toolkit/nvidia-container-runtime\"\n"
			  "SystemdCgroup = true\n",
			  "[node]\n" },
		.exe = { "/usr/local/nvidia/toolkit/nvidia-container-runtime" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *cd, *ours, *node;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cd = file(&files, CD_MAIN);
	ours = file(&files, CD_OURS);
	/* the main file gains the import of conf.d, right after its version line */
	cr_assert_str_eq(cd->new, "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"] # added "
			 "by oci-rdma-hook configure\n"
			 CRI ".containerd]\ndefault_runtime_name = \"nvidia\"\n"
			 CRI ".containerd.runtimes.nvidia.options]\n"
			 "BinaryName = \"/usr/local/nvidia/toolkit/nvidia-container-runtime\"\n"
			 "SystemdCgroup = true\n");
	/* the drop-in: the CRI table read before it (1.x replaces it whole), then the handler */
	cr_assert(strstr(ours->new, CRI ".containerd]\n  default_runtime_name = \"nvidia\"\n"),
		  "%s", ours->new);
	cr_assert(strstr(ours->new, CRI ".containerd.runtimes.rdma.options]\n"
			 "  BinaryName = \"/usr/bin/oci-rdma-runtime\"\n  SystemdCgroup = true\n"),
		  "%s", ours->new);
	cr_assert(strstr(ours->new, "pod_annotations = [\"oci-rdma-hook/*\"]"));
	node = file(&files, CD_NODE);
	cr_assert(strstr(node->new, "\n[containers]\nruntime = /usr/local/nvidia/toolkit/nvidia-container-runtime\n"),
		  "%s", node->new);
	orh_cfg_files_free(&files);
}

/* No config.toml, or a minimal one: the drop-in has containerd's runc table too, since a
 * file that defines runtimes without the default's stops the CRI plugin. */
Test(engines, containerd_without_a_config_keeps_the_default_runtime)
{
	const char *mains[] = { NULL, "version = 2\n" CRI "]\n  sandbox_image = \"pause:3.9\"\n" };

	for (size_t i = 0; i < 2; i++) {
		struct fake_fs fs = { .path = { mains[i] ? CD_MAIN : "/x" }, .text = { mains[i] } };
		struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
		struct orh_cfg_files files;
		struct orh_err err = { 0 };
		const struct orh_cfg_file *cd, *ours;

		cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
		cd = file(&files, CD_MAIN);
		ours = file(&files, CD_OURS);
		cr_assert(strstr(cd->new, "imports = [\"/etc/containerd/conf.d/*.toml\"] # added by "
				 "oci-rdma-hook configure\n"), "%s",
			  cd->new);
		cr_assert(strstr(ours->new, CRI ".containerd.runtimes.runc]\n"
				 "  runtime_type = \"io.containerd.runc.v2\"\n"), "%s", ours->new);
		cr_assert(strstr(ours->new, CRI ".containerd.runtimes.rdma]\n"), "%s", ours->new);
		cr_assert_eq(!!strstr(ours->new, "sandbox_image = \"pause:3.9\""), i == 1, "%s",
			     ours->new);
		orh_cfg_files_free(&files);
	}
}

/* nvidia-ctk's drop-in layout: the default runtime is the merged one, nothing changes in
 * the main file (its glob covers ours), the drop-in carries nvidia's CRI table. */
Test(engines, containerd_reads_the_imports_as_containerd_merges_them)
{
	struct fake_fs fs = {
		.path = { CD_MAIN, "/etc/containerd/conf.d/99-nvidia.toml" },
		.text = { "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n"
			  CRI ".containerd]\n  snapshotter = \"overlayfs\"\n",
			  "version = 2\n" CRI ".containerd]\n  default_runtime_name = \"nvidia\"\n"
			  CRI ".containerd.runtimes.nvidia]\n  runtime_type = \"io.containerd.runc.v2\"\n"
			  CRI ".containerd.runtimes.nvidia.options]\n"
			  "  BinaryName = \"/opt/nvidia-container-runtime\"\n" },
		.exe = { "/opt/nvidia-container-runtime" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *ours;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_null(file(&files, CD_MAIN)->new);
	ours = file(&files, CD_OURS);
	/* 1.x: the imported table replaced the main file's (no snapshotter) */
	cr_assert_null(strstr(ours->new, "snapshotter"), "%s", ours->new);
	cr_assert(strstr(ours->new, "  BinaryName = \"/opt/nvidia-container-runtime\"\n"));
	cr_assert_null(strstr(ours->new, ".runtimes.runc]"), "%s", ours->new);
	cr_assert(strstr(file(&files, CD_NODE)->new, "runtime = /opt/nvidia-container-runtime\n"));
	orh_cfg_files_free(&files);
}

/* nvidia-ctk 1.18 imported config.d (a glob of .toml files): the drop-in goes there, the
 * main file unchanged. */
Test(engines, containerd_dropin_goes_where_the_main_file_imports)
{
	struct fake_fs fs = { .path = { CD_MAIN },
			      .text = { "version = 2\nimports = [\"config.d/*.toml\"]\n" } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_null(file(&files, CD_MAIN)->new, "%s", file(&files, CD_MAIN)->new);
	cr_assert_not_null(file(&files, "/etc/containerd/config.d/99-oci-rdma-hook.toml"));
	orh_cfg_files_free(&files);
}

/* The glob configure adds to the imports brings in the files already in conf.d: they are
 * read as containerd will read them (a broken one is an error naming it). */
Test(engines, containerd_reads_what_its_new_import_brings_in)
{
	struct fake_fs fs = {
		.path = { CD_MAIN, "/etc/containerd/conf.d/50-site.toml" },
		.text = { "version = 2\n",
			  "version = 2\n" CRI ".containerd]\n  default_runtime_name = \"crun\"\n"
			  CRI ".containerd.runtimes.crun.options]\n  BinaryName = \"/usr/bin/crun\"\n" },
		.exe = { "/usr/bin/crun" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(strstr(file(&files, CD_OURS)->new, "default_runtime_name = \"crun\""));
	cr_assert(strstr(file(&files, CD_NODE)->new, "runtime = /usr/bin/crun\n"));
	orh_cfg_files_free(&files);
	fs.text[1] = "7\n?";
	cr_assert_lt(plan(&fs, &req, &files, &err), 0);
	cr_assert(strstr(err.msg, "/etc/containerd/conf.d/50-site.toml:1: "), "%s", err.msg);
	orh_cfg_files_free(&files);
}

/* containerd 1.x: a CRI table in a file read after the drop-in would replace it whole. */
Test(engines, containerd_refuses_a_file_read_after_its_dropin)
{
	struct fake_fs fs = {
		.path = { CD_MAIN, "/etc/containerd/conf.d/zz-site.toml" },
		.text = { "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n",
			  "version = 2\n" CRI "]\n  sandbox_image = \"x\"\n" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), -EINVAL);
	cr_assert(strstr(err.msg, "/etc/containerd/conf.d/zz-site.toml:2: read after "), "%s",
		  err.msg);
	orh_cfg_files_free(&files);
}

/* containerd 2.x merges key by key: the drop-in holds the handler alone. */
Test(engines, containerd_2_gets_the_handler_alone)
{
	struct fake_fs fs = {
		.path = { CD_MAIN },
		.text = { "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd]\n"
			  "  default_runtime_name = 'runc'\n"
			  "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n"
			  "  runtime_type = 'io.containerd.runc.v2'\n" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *ours;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	ours = file(&files, CD_OURS);
	cr_assert(strstr(ours->new, "version = 3\n"));
	cr_assert_null(strstr(ours->new, "default_runtime_name"), "%s", ours->new);
	cr_assert(strstr(ours->new,
			 "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.rdma]\n"));
	orh_cfg_files_free(&files);
}

/* The handler is found by what it is: a file rewritten without configure's comments (and
 * with CRLF line ends) keeps one handler on a re-run, which moves it into the drop-in, and
 * --undo leaves no handler at all. */
Test(engines, containerd_finds_its_handler_by_what_it_is)
{
	const char *rewritten =
		"version = 2\r\n"
		CRI ".containerd.runtimes.rdma]\r\n"
		"  pod_annotations = [\"oci-rdma-hook/*\"]\r\n"
		"  runtime_type = \"io.containerd.runc.v2\"\r\n"
		CRI ".containerd.runtimes.rdma.options]\r\n"
		"  BinaryName = \"/usr/bin/oci-rdma-runtime\"\r\n"
		CRI ".containerd.runtimes.runc]\r\n"
		"  runtime_type = \"io.containerd.runc.v2\"\r\n";
	struct fake_fs fs = { .path = { CD_MAIN }, .text = { rewritten } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *cd;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cd = file(&files, CD_MAIN);
	cr_assert_null(strstr(cd->new, "runtimes.rdma"), "%s", cd->new);
	cr_assert(strstr(cd->new, CRI ".containerd.runtimes.runc]\r\n"), "%s", cd->new);
	/* one handler table, in the drop-in */
	cr_assert_eq(count(file(&files, CD_OURS)->new, ".runtimes.rdma]"), 1);
	orh_cfg_files_free(&files);
	req.undo = true;
	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_null(strstr(file(&files, CD_MAIN)->new, "runtimes.rdma"));
	cr_assert_not(file(&files, CD_OURS)->new);
	orh_cfg_files_free(&files);
}

/* --undo removes a main file only where configure made it: an operator's own "version = 2"
 * file stays. */
Test(engines, containerd_undo_keeps_the_operators_file)
{
	struct fake_fs fs = { .path = { CD_MAIN }, .text = { "version = 2\n" } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *cd;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	fs.text[0] = file(&files, CD_MAIN)->new;
	fs.path[1] = CD_OURS;
	fs.text[1] = file(&files, CD_OURS)->new;
	req.undo = true;
	{
		struct orh_cfg_files undo;

		cr_assert_eq(plan(&fs, &req, &undo, &err), 0, "%s", err.msg);
		cd = file(&undo, CD_MAIN);
		cr_assert_not(cd->remove);
		cr_assert_str_eq(cd->new, "version = 2\n");
		cr_assert(file(&undo, CD_OURS)->remove);
		orh_cfg_files_free(&undo);
	}
	orh_cfg_files_free(&files);
}

/* k3s's templates: the handler under the plugin of the version k3s renders them with. */
Test(engines, containerd_k3s_templates)
{
	const char *v3 = "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl";
	const char *v2 = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl";
	struct fake_fs fs = { .path = { v3, v2 }, .text = { "{{ template \"base\" . }}\n",
							   "{{ template \"base\" . }}\n" } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .engine_config = v3 };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(strstr(file(&files, v3)->new, "{{ template \"base\" . }}\n\n# >>> "));
	cr_assert(strstr(file(&files, v3)->new,
			 "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.rdma]"));
	orh_cfg_files_free(&files);
	req.engine_config = v2;
	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(strstr(file(&files, v2)->new, CRI ".containerd.runtimes.rdma]"));
	orh_cfg_files_free(&files);
}

/* A template whose handler table lost its marker lines: a re-run moves it into the block
 * (one table: containerd refuses a table defined twice), and --undo takes it out. */
Test(engines, containerd_k3s_template_with_a_loose_handler)
{
	const char *tmpl = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl";
	const char *loose = "{{ template \"base\" . }}\n"
			    CRI ".containerd.runtimes.rdma.options]\n"
			    "  BinaryName = \"/usr/bin/oci-rdma-runtime\"\n";
	struct fake_fs fs = { .path = { tmpl }, .text = { loose } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .engine_config = tmpl };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_eq(count(file(&files, tmpl)->new, ".runtimes.rdma.options]"), 1, "%s",
		     file(&files, tmpl)->new);
	cr_assert(strstr(file(&files, tmpl)->new, "# >>> oci-rdma-hook configure"));
	orh_cfg_files_free(&files);
	req.undo = true;
	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_str_eq(file(&files, tmpl)->new, "{{ template \"base\" . }}\n");
	orh_cfg_files_free(&files);
}

/* A template's handler takes SystemdCgroup, and the shim its runtime, from the config k3s
 * rendered beside it (k3s's runc lives in its data directory). */
Test(engines, containerd_k3s_template_reads_the_rendered_config)
{
	const char *tmpl = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl";
	const char *runc = "/var/lib/rancher/k3s/data/current/bin/runc";
	struct fake_fs fs = {
		.path = { tmpl, "/var/lib/rancher/k3s/agent/etc/containerd/config.toml" },
		.text = { "{{ template \"base\" . }}\n",
			  "version = 2\n" CRI ".containerd.runtimes.runc]\n"
			  "  runtime_type = \"io.containerd.runc.v2\"\n"
			  CRI ".containerd.runtimes.runc.options]\n"
			  "  BinaryName = \"/var/lib/rancher/k3s/data/current/bin/runc\"\n"
			  "  SystemdCgroup = true\n" },
		.exe = { runc },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .engine_config = tmpl };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(strstr(file(&files, tmpl)->new, "  SystemdCgroup = true\n"), "%s",
		  file(&files, tmpl)->new);
	cr_assert(strstr(file(&files, CD_NODE)->new,
			 "runtime = /var/lib/rancher/k3s/data/current/bin/runc\n"));
	cr_assert_null(file(&files, "/var/lib/rancher/k3s/agent/etc/containerd/config.toml")->new);
	orh_cfg_files_free(&files);
}

Test(engines, containerd_refuses_what_it_cannot_extend)
{
	const struct {
		const char *text, *msg;
	} bad[] = {
		{ "version = 2\n" CRI ".containerd.runtimes.rdma]\n",
		  "/etc/containerd/config.toml:2: runtime handler 'rdma' is defined already" },
		{ "version = 2\n" CRI ".containerd.runtimes.rdma.options]\nBinaryName = \"/usr/bin/runc\"\n",
		  "/etc/containerd/config.toml:2: runtime handler 'rdma' is defined already, "
		  "running /usr/bin/runc" },
		{ "version = 2\n" CRI ".containerd]\nruntimes = {}\n",
		  "/etc/containerd/config.toml:3: the runtimes are an inline table" },
		{ "version = 5\n", "/etc/containerd/config.toml:1: version '5' is not 1, 2, 3 or 4" },
		{ "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n"
		  "SystemdCgroup = \"yes\"\n",
		  "/etc/containerd/config.toml:3: SystemdCgroup '\"yes\"' is not true or false" },
		{ "version = 2\n" CRI ".containerd]\ndefault_runtime_name = \"kata\"\n",
		  "/etc/containerd/config.toml: default_runtime_name 'kata' names no runtime" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fake_fs fs = { .path = { CD_MAIN }, .text = { bad[i].text } };
		struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
		struct orh_cfg_files files;
		struct orh_err err = { 0 };

		cr_assert_lt(plan(&fs, &req, &files, &err), 0, "%s", bad[i].text);
		cr_assert(!strncmp(err.msg, bad[i].msg, strlen(bad[i].msg)), "%s", err.msg);
		orh_cfg_files_free(&files);
	}
}

/* CRI-O reads every file of crio.conf.d, not only *.conf: nvidia-ctk's 99-nvidia.toml
 * makes its runtime the default, and the shim chains that one. */
Test(engines, crio_reads_every_dropin_file)
{
	struct fake_fs fs = {
		.path = { "/etc/crio/crio.conf", "/etc/crio/crio.conf.d/99-nvidia.toml" },
		.text = { "[crio.runtime]\ndefault_runtime = \"crun\"\n",
			  "[crio.runtime]\ndefault_runtime = \"nvidia\"\n"
			  "[crio.runtime.runtimes.nvidia]\n"
			  "runtime_path = \"/usr/local/nvidia/toolkit/nvidia-container-runtime\"\n"
			  "runtime_root = \"/run/nvidia\"\n" },
		.exe = { "/usr/bin/crun", "/usr/local/nvidia/toolkit/nvidia-container-runtime" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CRIO };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *d;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	d = file(&files, "/etc/crio/crio.conf.d/99-oci-rdma-hook.conf");
	cr_assert(strstr(d->new, "runtime_root = \"/run/nvidia\"\n"), "%s", d->new);
	cr_assert(strstr(file(&files, CD_NODE)->new,
			 "runtime = /usr/local/nvidia/toolkit/nvidia-container-runtime\n"));
	/* ours sorts after nvidia's, so its handler table is the last word */
	cr_assert_gt(strcmp("99-oci-rdma-hook.conf", "99-nvidia.toml"), 0);
	orh_cfg_files_free(&files);
}

/* Two engines on one node keep their runtimes: containerd's default (nvidia) goes into
 * the node config, docker's own default rides in its entry's runtimeArgs. */
Test(engines, two_engines_keep_their_runtimes)
{
	struct fake_fs fs = {
		.path = { "/etc/docker/daemon.json", CD_NODE },
		.text = { "{\"default-runtime\": \"kata\", "
			  "\"runtimes\": {\"kata\": {\"path\": \"/opt/kata-runtime\"}}}",
			  "[node]\n# >>> oci-rdma-hook configure --engine containerd\n"
			  "[containers]\nruntime = /opt/nvidia-container-runtime\n"
			  "# <<< oci-rdma-hook configure --engine containerd\n" },
		.exe = { "/opt/kata-runtime" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_DOCKER };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *d;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	d = file(&files, "/etc/docker/daemon.json");
	cr_assert(strstr(d->new, "\"runtimeArgs\": [\n        \"--orh-runtime=/opt/kata-runtime\"\n"),
		  "%s", d->new);
	cr_assert_null(file(&files, CD_NODE)->new, "%s", file(&files, CD_NODE)->new);
	orh_cfg_files_free(&files);
}

/* containerd and CRI-O share the node config's runtime: a second engine that chains
 * another one is refused, naming both. */
Test(engines, one_node_config_runtime_is_not_overwritten)
{
	struct fake_fs fs = {
		.path = { "/etc/crio/crio.conf", CD_NODE },
		.text = { "[crio.runtime]\ndefault_runtime = \"crun\"\n",
			  "[node]\n\n# >>> oci-rdma-hook configure --engine containerd\n"
			  "[containers]\nruntime = /opt/nvidia-container-runtime\n"
			  "# <<< oci-rdma-hook configure --engine containerd\n" },
		.exe = { "/usr/bin/crun" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CRIO };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), -EEXIST, "%s", err.msg);
	cr_assert(strstr(err.msg, "executes /opt/nvidia-container-runtime for containerd"), "%s",
		  err.msg);
	cr_assert(strstr(err.msg, "whose runtime is /usr/bin/crun"), "%s", err.msg);
	orh_cfg_files_free(&files);
	req.runtime = "/opt/nvidia-container-runtime";
	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	orh_cfg_files_free(&files);
}

Test(engines, crio_adds_to_the_nodes_hooks_dir)
{
	struct fake_fs fs = {
		.path = { "/etc/crio/crio.conf", "/etc/crio/crio.conf.d/10-a.conf" },
		.text = { "[crio.runtime]\nhooks_dir = [\"/x\"]\n",
			  "[crio.runtime]\nhooks_dir = [\"/site/hooks.d\"]\ndefault_runtime = \"runc\"\n" },
		.exe = { "/usr/bin/crio-runc", "/usr/libexec/crio/conmon" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CRIO };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *d;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	d = file(&files, "/etc/crio/crio.conf.d/99-oci-rdma-hook.conf");
	cr_assert_not_null(d->new);
	cr_assert(strstr(d->new, "hooks_dir = [\"/site/hooks.d\", \"" ORH_CONTAINERS_HOOKS_DIR "\"]\n"),
		  "%s", d->new);
	cr_assert(strstr(d->new, "runtime_root = \"/run/runc\"\nmonitor_path = \"/usr/libexec/crio/conmon\"\n"));
	cr_assert(strstr(file(&files, "/etc/oci-rdma-hook/oci-rdma-hook.conf")->new,
			 "runtime = /usr/bin/crio-runc\n"));
	orh_cfg_files_free(&files);
}

Test(engines, docker_keeps_every_key_and_refuses_another_runtime_of_the_name)
{
	struct fake_fs fs = {
		.path = { "/etc/docker/daemon.json" },
		.text = { "{\"b\": 1, \"a\": [2], \"runtimes\": {\"x\": {\"path\": \"/x\"}}}" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_DOCKER };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_str_eq(file(&files, "/etc/docker/daemon.json")->new,
			 "{\n  \"b\": 1,\n  \"a\": [\n    2\n  ],\n  \"runtimes\": {\n"
			 "    \"x\": {\n      \"path\": \"/x\"\n    },\n"
			 "    \"rdma\": {\n      \"path\": \"/usr/bin/oci-rdma-runtime\"\n    }\n  }\n}\n");
	orh_cfg_files_free(&files);
	req.handler = "x";
	cr_assert_eq(plan(&fs, &req, &files, &err), -EEXIST);
	cr_assert_str_eq(err.msg, "/etc/docker/daemon.json: runtimes.x is another runtime (give "
			 "configure another --handler, or remove it)");
	orh_cfg_files_free(&files);
}

/* --undo of an operator's daemon.json of {} alone gives back {}: JSON holds no mark of who
 * made a file, so configure never removes it. */
Test(engines, docker_undo_keeps_an_empty_daemon_json)
{
	struct fake_fs fs = { .path = { "/etc/docker/daemon.json" }, .text = { "{}\n" } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_DOCKER };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	fs.text[0] = file(&files, "/etc/docker/daemon.json")->new;
	req.undo = true;
	{
		struct orh_cfg_files undo;

		cr_assert_eq(plan(&fs, &req, &undo, &err), 0, "%s", err.msg);
		cr_assert_not(file(&undo, "/etc/docker/daemon.json")->remove);
		cr_assert_str_eq(file(&undo, "/etc/docker/daemon.json")->new, "{}\n");
		orh_cfg_files_free(&undo);
	}
	orh_cfg_files_free(&files);
}

Test(engines, podman_keeps_the_list_it_read_and_adds_the_precreate_directory)
{
	struct fake_fs fs = {
		.path = { "/usr/share/containers/containers.conf", "/etc/containers/containers.conf.d/50-a.conf" },
		.text = { "[engine]\nhooks_dir = [\"/usr/share/containers/oci/hooks.d\"]\n",
			  "[engine]\nhooks_dir = [\"/a\", \"" ORH_CONTAINERS_HOOKS_DIR "\"]\n" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_PODMAN };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(strstr(file(&files, "/etc/containers/containers.conf.d/99-oci-rdma-hook.conf")->new,
			 "hooks_dir = [\"/a\", \"" ORH_CONTAINERS_HOOKS_DIR "\", \"" ORH_OWN_HOOKS_DIR "\"]\n"));
	orh_cfg_files_free(&files);
}

Test(engines, bad_requests)
{
	struct fake_fs fs = { 0 };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .handler = "RDMA" };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), -EINVAL);
	cr_assert(strstr(err.msg, "handler 'RDMA': not a RuntimeClass handler name"));
	req = (struct orh_configure_req){ .engine = ORH_ENGINE_CONTAINERD, .shim = "bin/shim" };
	cr_assert_eq(plan(&fs, &req, &files, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "shim 'bin/shim' is not an absolute path");
}
