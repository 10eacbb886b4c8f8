/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook [--config FILE] [--sysroot DIR] COMMAND [ARGS...]
 * Called as oci-rdma-runtime it is the runtime shim (see oci-rdma-hook(8)).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "orh-config.h"
#include "orh/base/args.h"
#include "orh/cmd/commands.h"
#include "orh/cmd/install.h"
#include "orh/base/json.h"
#include "orh/apply/refuse.h"
#include "orh/base/sandbox.h"

static void usage(FILE *f)
{
	fputs("Usage: oci-rdma-hook [--config FILE] [--sysroot DIR] COMMAND [ARGS...]\n"
	      "\n"
	      "Commands:\n"
	      "  detect [--json] [--verbs]   the node's RDMA inventory and what the plan uses\n"
	      "  env [--explain] [--spec F]  the NAME=VALUE lines a container on this node gets\n"
	      "  inspect [ID] [--json]       the records of the containers served (--run-dir DIR)\n"
	      "  createRuntime | prestart    OCI hook: give the container devices, memlock, NCCL settings\n"
	      "  poststop                    OCI hook: clean up\n"
	      "  nccl-conf                   OCI hook the spec edit adds: only /etc/nccl.conf\n"
	      "  cdi-createRuntime           OCI hook of the CDI spec: memlock and /etc/nccl.conf\n"
	      "  precreate                   podman precreate hook: edit the spec on stdin\n"
	      "  refuse REASON               OCI hook: fail with REASON (precreate adds it to a\n"
	      "                              container it refuses)\n"
	      "  runtime ARGS...             runtime shim (also as 'oci-rdma-runtime')\n"
	      "  cdi [--output FILE]         print a CDI spec for this node\n"
	      "  configure --engine E [...]  register with containerd, crio, docker or podman\n"
	      "                              (--engine-config, --handler, --shim, --runtime,\n"
	      "                              --root, --dry-run, --check, --undo)\n"
	      "  install --root DIR [...]    the installer image's entrypoint: install under DIR,\n"
	      "                              configure the engine; on SIGTERM undo the engine's\n"
	      "                              config, keeping the files (--purge removes them)\n"
	      "  nri [--socket PATH] [...]   an NRI plugin: serve CRI containers through the\n"
	      "                              runtime's NRI socket (--config, --sysroot, --name,\n"
	      "                              --idx); SIGTERM ends it\n"
	      "\n"
	      "Options:\n"
	      "  --config FILE   node config (default " ORH_DEFAULT_CONFIG ")\n"
	      "  --sysroot DIR   read DIR/sys and DIR/proc/net/route instead of /sys and /proc\n"
	      "  --help, --version\n",
	      f);
}

enum confine {
	CONFINE_NONE,    /* the runtime shim (it executes the real runtime, fully privileged),
			  * configure and install (they write the engines' files) */
	CONFINE_HOOK_CAPS, /* the hook's capabilities, no seccomp filter: the NRI plugin (it
			    * connects, forks a process a container, reads the pod's network
			    * namespace and makes the sysfs view's directories) */
	CONFINE_READ,    /* CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH alone, no seccomp filter:
			  * inspect (it reads the capture of what NCCL used in a container) */
	CONFINE_CAPS,    /* no capability at all */
	CONFINE_FILTER,  /* no capability, and the seccomp allow-list */
	CONFINE_HOOK,    /* the hook's capabilities, and the seccomp allow-list */
};

struct command {
	const char *name;
	int (*fn)(struct orh_ctx *, int, char **);
	bool container_path; /* runs for a container: tolerate a broken config */
	enum confine confine;
};

static const struct command commands[] = {
	{ "detect", orh_cmd_detect, false, CONFINE_CAPS },
	{ "env", orh_cmd_env, false, CONFINE_FILTER },
	{ "inspect", orh_cmd_inspect, false, CONFINE_READ },
	{ "createRuntime", orh_cmd_hook, true, CONFINE_HOOK },
	{ "prestart", orh_cmd_hook, true, CONFINE_HOOK },
	{ "poststop", orh_cmd_hook, true, CONFINE_HOOK },
	{ "nccl-conf", orh_cmd_hook, true, CONFINE_HOOK },
	{ "cdi-createRuntime", orh_cmd_hook, true, CONFINE_HOOK },
	{ "cdi-memlock", orh_cmd_hook, true, CONFINE_HOOK },
	{ "precreate", orh_cmd_precreate, true, CONFINE_FILTER },
	{ "refuse", orh_cmd_refuse, false, CONFINE_FILTER },
	{ "runtime", orh_cmd_runtime, true, CONFINE_NONE },
	{ "cdi", orh_cmd_cdi, false, CONFINE_CAPS },
	{ "configure", orh_cmd_configure, false, CONFINE_NONE },
	{ "install", orh_cmd_install, false, CONFINE_NONE },
	{ "nri", orh_cmd_nri, false, CONFINE_HOOK_CAPS },
};

static int passthrough(int in, int out)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (orh_write_all(out, buf, (size_t)n) < 0)
			return -1;
	}
	return 0;
}

/* Least privilege before anything a container supplied is read. A container path that
 * cannot be confined does nothing: the container starts as it would without us. */
static int confine(const struct command *cmd)
{
	struct orh_err err = { 0 };
	bool hook = cmd->confine == CONFINE_HOOK || cmd->confine == CONFINE_HOOK_CAPS;

	if (cmd->confine == CONFINE_NONE)
		return 0;
	if (orh_caps_limit(hook ? ORH_PRIVS_HOOK : cmd->confine == CONFINE_READ ? ORH_PRIVS_READ
						     : ORH_PRIVS_NONE, &err) < 0 ||
	    (cmd->confine >= CONFINE_FILTER && orh_seccomp_confine(&err) < 0)) {
		orh_log(LOG_ERR, "%s: %s", cmd->name, err.msg);
		return -1;
	}
	return 0;
}

static int load_config(struct orh_ctx *ctx, const char *config, const char *sysroot,
		       bool container_path)
{
	bool explicit = config != NULL;

	orh_config_defaults(&ctx->cfg);
	ctx->config_path = config ? config : ORH_DEFAULT_CONFIG;
	ctx->config_explicit = explicit;
	ctx->sysroot_opt = sysroot;
	if (orh_config_load(&ctx->cfg, ctx->config_path, explicit, &ctx->config_err) < 0) {
		if (!container_path) {
			fprintf(stderr, "oci-rdma-hook: %s\n", ctx->config_err.msg);
			orh_config_free(&ctx->cfg);
			return ORH_EXIT_USAGE;
		}
		ctx->config_failed = true;
		orh_config_free(&ctx->cfg);
		orh_config_defaults(&ctx->cfg);
	}
	ctx->sysroot = sysroot ? sysroot : ctx->cfg.sysroot ? ctx->cfg.sysroot : "/";
	return ORH_EXIT_OK;
}

/* The same file with the same content as far as stat() tells: what the runtime cache
 * keys on (orh/cmd/shimfast.h). */
static bool same_file_state(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Called as oci-rdma-runtime: the runtime shim. argv is the runtime's; the config comes
 * from the shim's own environment (set by the node operator in the runtime's registration). */
static int shim_main(int argc, char **argv)
{
	struct orh_ctx ctx = { .t_main = orh_now_ms() };
	const char *config = getenv("OCI_RDMA_HOOK_CONFIG");
	struct stat after;
	int before_errno, r;

	orh_log_open("oci-rdma-runtime", true);
	orh_json_arena_use();
	/* the file as read: the same before and after, or not there either time (the
	 * runtime cache keys on it) */
	before_errno = stat(config ? config : ORH_DEFAULT_CONFIG, &ctx.config_st) == 0 ? 0 : errno;
	r = load_config(&ctx, config, getenv("OCI_RDMA_HOOK_SYSROOT"), true);
	if (stat(ctx.config_path, &after) == 0)
		ctx.config_seen = !before_errno && same_file_state(&ctx.config_st, &after)
					  ? ORH_CONFIG_READ : ORH_CONFIG_UNSURE;
	else
		ctx.config_seen = before_errno == ENOENT && errno == ENOENT ? ORH_CONFIG_ABSENT
									  : ORH_CONFIG_UNSURE;
	ctx.t_config = orh_now_ms();
	if (r == ORH_EXIT_OK)
		r = orh_cmd_runtime(&ctx, argc, argv);
	orh_config_free(&ctx.cfg);
	return r;
}

/* The options before COMMAND, from argv[*i] on; *i is left on the first argument that is
 * not one. Returns -1 to go on, or the exit code when main is done (--help, --version, an
 * unknown or incomplete option). */
static int parse_options(int argc, char **argv, int *i, const char **config,
			 const char **sysroot)
{
	bool help = false, version = false;
	const struct orh_opt opts[] = {
		{ "--help", NULL, &help }, { "-h", NULL, &help }, { "--version", NULL, &version },
		{ "--config", config, NULL }, { "--sysroot", sysroot, NULL },
	};
	const struct orh_args a = { .stop = true };

	if (orh_args_parse(&a, argc, argv, *i, opts, ORH_ARRAY_SIZE(opts), i)) {
		usage(stderr);
		return ORH_EXIT_USAGE;
	}
	if (help)
		usage(stdout);
	else if (version)
		puts("oci-rdma-hook " ORH_VERSION);
	return help || version ? ORH_EXIT_OK : -1;
}

/* Started by a runtime as one of its NRI plugins: NRI_PLUGIN_SOCKET (the fd of its
 * connection), NRI_PLUGIN_NAME and NRI_PLUGIN_IDX in the environment. */
static bool nri_started(void)
{
	const char *v[] = { getenv("NRI_PLUGIN_SOCKET"), getenv("NRI_PLUGIN_NAME"),
			    getenv("NRI_PLUGIN_IDX") };

	return v[0] && *v[0] && v[1] && *v[1] && v[2] && *v[2];
}

int main(int argc, char **argv)
{
	struct orh_ctx ctx = { .t_main = orh_now_ms() };
	const char *config = NULL, *sysroot = NULL;
	const char *base = argv[0] ? strrchr(argv[0], '/') : NULL;
	const struct command *cmd = NULL;
	int i = 1, r;

	base = base ? base + 1 : argv[0] ? argv[0] : "";
	if (!strcmp(base, "oci-rdma-runtime"))
		return shim_main(argc, argv);

	r = parse_options(argc, argv, &i, &config, &sysroot);
	if (r >= 0)
		return r;
	if (argc == 1 && nri_started()) {
		/* started by the runtime from its NRI plugin_path, under any name: the plugin */
		static char *nri_argv[] = { "nri", NULL };

		argv = nri_argv;
		argc = 1;
		i = 0;
	}
	if (i >= argc) {
		usage(stderr);
		return ORH_EXIT_USAGE;
	}
	for (size_t c = 0; c < ORH_ARRAY_SIZE(commands); c++)
		if (!strcmp(argv[i], commands[c].name))
			cmd = &commands[c];
	if (!cmd) {
		fprintf(stderr, "oci-rdma-hook: unknown command '%s' (see --help)\n", argv[i]);
		return ORH_EXIT_USAGE;
	}
	orh_log_open("oci-rdma-hook", cmd->container_path);
	if (cmd->container_path)
		orh_json_arena_use(); /* it serves one container and exits */
	if (cmd->fn == orh_cmd_configure) {
		/* the node config is one of the files it edits (under --root): not loaded */
		ctx.config_path = config ? config : ORH_DEFAULT_CONFIG;
		ctx.config_explicit = config != NULL;
		orh_config_defaults(&ctx.cfg);
		r = orh_cmd_configure(&ctx, argc - i, argv + i);
		orh_config_free(&ctx.cfg);
		return r;
	}
	if (cmd->fn == orh_cmd_refuse) {
		/* no config: the refusal and its reason stand whatever the config holds, and
		 * whether the confinement could be had or not (it only prints) */
		confine(cmd);
		return orh_cmd_refuse(&ctx, argc - i, argv + i);
	}
	r = load_config(&ctx, config, sysroot, cmd->container_path);
	if (r != ORH_EXIT_OK)
		return r;
	ctx.t_config = orh_now_ms();
	r = confine(cmd);
	ctx.t_confined = orh_now_ms();
	if (r < 0) {
		orh_config_free(&ctx.cfg);
		if (!cmd->container_path)
			return ORH_EXIT_FAIL;
		/* the container starts as without us; precreate hands the spec back as is */
		if (cmd->fn == orh_cmd_precreate && passthrough(STDIN_FILENO, STDOUT_FILENO) < 0)
			return ORH_EXIT_FAIL;
		return ORH_EXIT_OK;
	}
	r = cmd->fn(&ctx, argc - i, argv + i);
	orh_config_free(&ctx.cfg);
	return r;
}
