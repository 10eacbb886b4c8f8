/* SPDX-License-Identifier: Apache-2.0 */
/* configure's TOML scanner, its block, and each engine's plan, on files held in memory. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orh-config.h"
#include "orh/cmd/configure.h"
#include "configure_fake.h"

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
	orh_strv_free(&sv);
	/* comments between an array's values, a comma after one too */
	cr_assert(orh_toml_string_array("[\"a\" # x\n, 'b', # y\n\"c\" #\n]", &sv));
	cr_assert_eq(sv.n, 3);
	cr_assert_str_eq(sv.v[2], "c");
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

/* A begin marker that ends the file (blank lines at most after it) is a block whose body
 * and end went: replaced by a re-run, removed by an undo (the file with it, where configure
 * made the file); one with lines after it is still refused. */
Test(block, a_begin_marker_at_the_end_is_an_empty_block)
{
	const char *stray[] = { "v = 2\n\n# >>> oci-rdma-hook configure --engine x (new file)",
				"v = 2\n\n# >>> oci-rdma-hook configure --engine x (new file)\n\n" };
	struct orh_err err = { 0 };
	char *out = NULL;
	bool remove = false;

	for (size_t i = 0; i < 2; i++) {
		cr_assert_eq(orh_block_install(stray[i], "f", &blk, &out, &err), 0, "%s", err.msg);
		cr_assert_str_eq(out, "v = 2\n\n# >>> oci-rdma-hook configure --engine x (new file)\n"
				      "[a]\nb = 1\n# <<< oci-rdma-hook configure --engine x\n");
		free(out);
		cr_assert_eq(orh_block_remove(stray[i], "f", &blk, &out, &remove, &err), 1);
		cr_assert(remove);
		cr_assert_null(out);
	}
	cr_assert_eq(orh_block_install("v = 2\n# >>> oci-rdma-hook configure --engine x\n[b]\n", "f",
				       &blk, &out, &err), -EINVAL);
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
	/* a begin marker ends only at the end marker of its own id: one of another id before
	 * a block leaves the lines between them */
	out = orh_block_strip_all("# >>> oci-rdma-hook configure --engine y\nimports = []\n"
				  "# >>> oci-rdma-hook configure --engine x (new file)\n[a]\n"
				  "# <<< oci-rdma-hook configure --engine x\n");
	cr_assert_str_eq(out, "# >>> oci-rdma-hook configure --engine y\nimports = []\n");
	free(out);
}

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
