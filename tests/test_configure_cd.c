/* SPDX-License-Identifier: Apache-2.0 */
/* configure's plan for containerd (src/cmd/configure/engine_containerd.c), on files held in
 * memory. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orh-config.h"
#include "orh/cmd/configure.h"
#include "configure_fake.h"

#define CRI3 "[plugins.\"io.containerd.cri.v1.runtime\""

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
	/* containerd 1.x, no file imported: the handler in the main file's block, no drop-in */
	cr_assert_null(ours);
	cr_assert(!strncmp(cd->new, fs.text[0], strlen(fs.text[0])), "%s", cd->new);
	cr_assert_str_eq(cd->new + strlen(fs.text[0]),
			 "\n# >>> oci-rdma-hook configure --engine containerd --handler rdma\n"
			 CRI ".containerd.runtimes.rdma]\n"
			 "  runtime_type = \"io.containerd.runc.v2\"\n"
			 "  pod_annotations = [\"oci-rdma-hook/*\"]\n\n"
			 CRI ".containerd.runtimes.rdma.options]\n"
			 "  BinaryName = \"/usr/bin/oci-rdma-runtime\"\n  SystemdCgroup = true\n"
			 "# <<< oci-rdma-hook configure --engine containerd --handler rdma\n");
	node = file(&files, CD_NODE);
	cr_assert(strstr(node->new, "\n[containers]\nruntime = /usr/local/nvidia/toolkit/nvidia-container-runtime\n"),
		  "%s", node->new);
	orh_cfg_files_free(&files);
}

/* No config.toml, or a minimal one: the main file's block has containerd's runc table too,
 * since a file that defines runtimes without the default's stops the CRI plugin. */
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
		cr_assert_null(ours);
		cr_assert_null(strstr(cd->new, "imports"), "%s", cd->new);
		cr_assert(strstr(cd->new, i ? "\n\n# >>> oci-rdma-hook configure --engine "
				 "containerd --handler rdma\n" CRI ".containerd.runtimes.runc]\n"
				 : "version = 2\n\n# >>> oci-rdma-hook configure --engine containerd "
				 "--handler rdma (new file)\n" CRI ".containerd.runtimes.runc]\n"),
			  "%s", cd->new);
		cr_assert(strstr(cd->new, CRI ".containerd.runtimes.rdma]\n"), "%s", cd->new);
		cr_assert_eq(!!strstr(cd->new, "sandbox_image = \"pause:3.9\""), i == 1, "%s",
			     cd->new);
		orh_cfg_files_free(&files);
	}
}

/* nvidia-ctk's drop-in layout: the default runtime is the merged one, the main file gains
 * the handler's block (its glob covers ours), the drop-in carries nvidia's CRI table. */
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
	cr_assert(strstr(file(&files, CD_MAIN)->new, "\n# >>> oci-rdma-hook configure"));
	cr_assert_null(strstr(file(&files, CD_MAIN)->new, "imports = [\"/etc/containerd/conf.d/*"
			      ".toml\", "));
	ours = file(&files, CD_OURS);
	/* 1.x: the imported table replaced the main file's (no snapshotter) */
	cr_assert_null(strstr(ours->new, "snapshotter"), "%s", ours->new);
	cr_assert(strstr(ours->new, "  BinaryName = \"/opt/nvidia-container-runtime\"\n"));
	cr_assert_null(strstr(ours->new, ".runtimes.runc]"), "%s", ours->new);
	cr_assert(strstr(file(&files, CD_NODE)->new, "runtime = /opt/nvidia-container-runtime\n"));
	orh_cfg_files_free(&files);
}

/* nvidia-ctk 1.18 imported config.d (a glob of .toml files): where a file there holds a CRI
 * table, the drop-in goes there, and the imports are unchanged. */
Test(engines, containerd_dropin_goes_where_the_main_file_imports)
{
	struct fake_fs fs = { .path = { CD_MAIN, "/etc/containerd/config.d/50-nvidia.toml" },
			      .text = { "version = 2\nimports = [\"config.d/*.toml\"]\n",
					"version = 2\n" CRI "]\n  sandbox_image = \"x\"\n" } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(!strncmp(file(&files, CD_MAIN)->new, fs.text[0], strlen(fs.text[0])));
	cr_assert_not_null(file(&files, "/etc/containerd/config.d/99-oci-rdma-hook.toml"));
	orh_cfg_files_free(&files);
}

/* The glob configure adds to the imports for its drop-in (containerd 2.x) brings in the
 * files already in conf.d: they are read as containerd will read them (a broken one is an
 * error naming it). */
Test(engines, containerd_reads_what_its_new_import_brings_in)
{
	struct fake_fs fs = {
		.path = { CD_MAIN, "/etc/containerd/conf.d/50-site.toml" },
		.text = { "version = 3\n",
			  "version = 3\n" CRI3 ".containerd]\n  default_runtime_name = \"crun\"\n"
			  CRI3 ".containerd.runtimes.crun.options]\n  BinaryName = \"/usr/bin/crun\"\n" },
		.exe = { "/usr/bin/crun" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(strstr(file(&files, CD_MAIN)->new, "imports = [\"/etc/containerd/conf.d/*.toml\"]"));
	cr_assert(strstr(file(&files, CD_OURS)->new, CRI3 ".containerd.runtimes.rdma]"));
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
 * with CRLF line ends) is left as it is where the handler is right (containerd 1.x keeps it
 * in the main file); where it is not, a re-run moves it into the block, one table; --undo
 * leaves no handler at all. */
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
	/* without its annotations: not as configure writes it */
	const char *wrong = "version = 2\n" CRI ".containerd.runtimes.rdma.options]\n"
			    "  BinaryName = \"/usr/bin/oci-rdma-runtime\"\n"
			    CRI ".containerd.runtimes.runc]\n";
	struct fake_fs fs = { .path = { CD_MAIN }, .text = { rewritten } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *cd;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_null(file(&files, CD_MAIN)->new, "%s", file(&files, CD_MAIN)->new);
	cr_assert_null(file(&files, CD_OURS));
	orh_cfg_files_free(&files);
	req.shim = "/opt/oci-rdma-runtime"; /* another shim: this table is not right, nor ours */
	cr_assert_eq(plan(&fs, &req, &files, &err), -EEXIST);
	orh_cfg_files_free(&files);
	fs.text[0] = wrong;
	req.shim = NULL;
	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cd = file(&files, CD_MAIN);
	cr_assert_eq(count(cd->new, ".runtimes.rdma]"), 1, "%s", cd->new);
	cr_assert(strstr(cd->new, "# >>> oci-rdma-hook configure"), "%s", cd->new);
	cr_assert(strstr(cd->new, "pod_annotations = [\"oci-rdma-hook/*\"]"), "%s", cd->new);
	cr_assert_null(file(&files, CD_OURS));
	orh_cfg_files_free(&files);
	fs.text[0] = rewritten;
	req.undo = true;
	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_null(strstr(file(&files, CD_MAIN)->new, "runtimes.rdma"));
	cr_assert(strstr(file(&files, CD_MAIN)->new, CRI ".containerd.runtimes.runc]\r\n"));
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
	req.undo = true;
	{
		struct orh_cfg_files undo;

		cr_assert_eq(plan(&fs, &req, &undo, &err), 0, "%s", err.msg);
		cd = file(&undo, CD_MAIN);
		cr_assert_not(cd->remove);
		cr_assert_str_eq(cd->new, "version = 2\n");
		cr_assert_null(file(&undo, CD_OURS));
		orh_cfg_files_free(&undo);
	}
	orh_cfg_files_free(&files);
}

/* The operator's imports are the operator's: containerd 1.x with conf.d imported and empty
 * (no drop-in needed) keeps both imports, and --undo gives the file back byte for byte. */
Test(engines, containerd_keeps_the_operators_imports)
{
	static const char main_text[] = "version = 2\n"
					"imports = [\"/etc/containerd/conf.d/*.toml\", \"more/*.toml\"]\n";
	struct fake_fs fs = { .path = { CD_MAIN }, .text = { main_text } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD };
	struct orh_cfg_files files, undo;
	struct orh_err err = { 0 };
	const struct orh_cfg_file *cd;

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cd = file(&files, CD_MAIN);
	cr_assert(!strncmp(cd->new, main_text, strlen(main_text)), "%s", cd->new);
	cr_assert_null(file(&files, CD_OURS));
	fs.text[0] = cd->new;
	req.undo = true;
	cr_assert_eq(plan(&fs, &req, &undo, &err), 0, "%s", err.msg);
	cd = file(&undo, CD_MAIN);
	cr_assert_not(cd->remove);
	cr_assert_str_eq(cd->new, main_text);
	orh_cfg_files_free(&undo);
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

/* A template configure made (k3s with a rendered config and no template): its begin marker
 * says "(new file)"; a re-run finds it and changes nothing, --undo removes the file. */
Test(engines, containerd_k3s_template_configure_made)
{
	const char *v3 = "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl";
	struct fake_fs fs = { .path = { "/x" } };
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .engine_config = v3 };
	struct orh_cfg_files files, again;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(strstr(file(&files, v3)->new, "{{ template \"base\" . }}\n\n# >>> oci-rdma-hook "
			 "configure --engine containerd --handler rdma (new file)\n"), "%s",
		  file(&files, v3)->new);
	fs.path[0] = v3;
	fs.text[0] = file(&files, v3)->new;
	cr_assert_eq(plan(&fs, &req, &again, &err), 0, "%s", err.msg);
	cr_assert_null(file(&again, v3)->new, "%s", file(&again, v3)->new);
	cr_assert_not(file(&again, v3)->remove);
	orh_cfg_files_free(&again);
	req.undo = true;
	cr_assert_eq(plan(&fs, &req, &again, &err), 0, "%s", err.msg);
	cr_assert(file(&again, v3)->remove);
	orh_cfg_files_free(&again);
	orh_cfg_files_free(&files);
}

/* containerd 1.x, a copy of the handler in another program's drop-in (nvidia-ctk copied the
 * main file's CRI table, or containerd's merged one, into it): as configure writes it, that
 * table is what containerd reads, and no drop-in of ours is needed (one left by an earlier
 * run goes); --undo cuts the copy out of that file, and nothing else of it. */
#define NV_DROPIN "/etc/containerd/conf.d/99-nvidia.toml"
#define NV_HEAD "version = 2\n\n[plugins]\n\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n" \
		"    sandbox_image = \"pause\"\n\n" \
		"    [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n" \
		"      default_runtime_name = \"nvidia\"\n\n" \
		"      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n" \
		"        runtime_type = \"io.containerd.runc.v2\"\n\n"
#define NV_RUNC "      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n" \
		"        runtime_type = \"io.containerd.runc.v2\"\n"
#define NV_RDMA(systemd) \
	"      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.rdma]\n" \
	"        base_runtime_spec = \"\"\n        pod_annotations = [\"oci-rdma-hook/*\"]\n" \
	"        runtime_type = \"io.containerd.runc.v2\"\n\n" \
	"        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.rdma.options]\n" \
	"          BinaryName = \"/usr/bin/oci-rdma-runtime\"\n" \
	"          SystemdCgroup = " systemd "\n\n"
Test(engines, containerd_a_copy_of_the_handler_in_another_drop_in)
{
	const char *nv = NV_HEAD NV_RDMA("false") NV_RUNC;
	struct fake_fs fs = {
		.path = { CD_MAIN, NV_DROPIN, CD_OURS },
		.text = { "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n", nv,
			  "version = 2\n" CRI ".containerd.runtimes.rdma.options]\n"
			  "  BinaryName = \"/usr/bin/oci-rdma-runtime\"\n" },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .runtime = "/x" };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(file(&files, CD_OURS)->remove);
	cr_assert_null(file(&files, NV_DROPIN)->new);
	cr_assert(strstr(file(&files, CD_MAIN)->new, "\n# >>> oci-rdma-hook configure"));
	orh_cfg_files_free(&files);
	/* the copy with another SystemdCgroup: ours is needed again, read after nvidia's */
	fs.text[1] = NV_HEAD NV_RDMA("true") NV_RUNC;
	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert(strstr(file(&files, CD_OURS)->new, "default_runtime_name = \"nvidia\""));
	orh_cfg_files_free(&files);
	fs.text[1] = nv;
	req.undo = true;
	cr_assert_eq(plan(&fs, &req, &files, &err), 0, "%s", err.msg);
	cr_assert_str_eq(file(&files, NV_DROPIN)->new, NV_HEAD NV_RUNC);
	cr_assert(file(&files, CD_OURS)->remove);
	orh_cfg_files_free(&files);
}

/* containerd 1.x: a file read after the drop-in whose tables are all below the CRI plugin's
 * (no [plugins."io.containerd.grpc.v1.cri"] header of its own) replaces it all the same. */
Test(engines, containerd_refuses_a_later_file_by_any_cri_table)
{
	struct fake_fs fs = {
		.path = { CD_MAIN, "/etc/containerd/conf.d/99-zz.toml", NV_DROPIN },
		.text = { "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n",
			  "version = 2\n" CRI ".containerd]\n  snapshotter = \"native\"\n",
			  NV_HEAD NV_RUNC },
	};
	struct orh_configure_req req = { .engine = ORH_ENGINE_CONTAINERD, .runtime = "/x" };
	struct orh_cfg_files files;
	struct orh_err err = { 0 };

	cr_assert_eq(plan(&fs, &req, &files, &err), -EINVAL);
	cr_assert(strstr(err.msg, "/etc/containerd/conf.d/99-zz.toml:2: read after "), "%s",
		  err.msg);
	orh_cfg_files_free(&files);
}
