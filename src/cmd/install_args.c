/* SPDX-License-Identifier: Apache-2.0 */
/* The command line of `oci-rdma-hook install` (install_args.h): read and checked, nothing
 * done. */
#include <stdio.h>
#include <string.h>

#include "orh/base/args.h"
#include "install_args.h"

const char *const orh_inst_restart_names[4] = { [ORH_RESTART_SIGNAL] = "signal",
					      [ORH_RESTART_SYSTEMD] = "systemd",
					      [ORH_RESTART_NONE] = "none" };

static const char usage_text[] =
	"usage: oci-rdma-hook install --root DIR\n"
	"           [--engine containerd|k3s|rke2|crio|docker|podman] [--engine-config PATH]\n"
	"           [--handler NAME] [--shim PATH] [--runtime PATH]\n"
	"           [--restart-mode signal|systemd|none] [--socket PATH] [--from DIR]\n"
	"           [--node-config FILE] [--ready-file FILE] [--ready-timeout SECONDS]\n"
	"           [--once | --uninstall [--after-pid PID] | --purge]\n"
	"       oci-rdma-hook install --probe [--ready-file FILE]\n";

const char *orh_inst_parse_restart(const char *v, enum orh_inst_restart *m)
{
	for (size_t i = ORH_RESTART_SIGNAL; i < ORH_ARRAY_SIZE(orh_inst_restart_names); i++)
		if (!strcmp(v, orh_inst_restart_names[i])) {
			*m = (enum orh_inst_restart)i;
			return NULL;
		}
	return "--restart-mode is signal, systemd or none";
}

static const char *parse_timeout(const char *v, unsigned *out)
{
	unsigned long long n = 0;

	if (orh_parse_uint(v, 86400, &n) < 0)
		return "--ready-timeout is a number of seconds (at most 86400)";
	*out = (unsigned)n;
	return NULL;
}

static const char *check_args(const struct inst_opts *o)
{
	if (o->probe)
		return NULL;
	if (!o->root)
		return "--root is required";
	if (*o->root != '/' && *o->root)
		return "--root is not an absolute path";
	if (*o->from && *o->from != '/')
		return "--from is not an absolute path";
	if (o->once + o->uninstall + o->purge > 1)
		return "--once, --uninstall and --purge exclude each other";
	if (o->after_pid && !o->uninstall)
		return "--after-pid goes with --uninstall";
	if (o->req.engine_config && o->req.engine_config[0] != '/')
		return "--engine-config is not an absolute path";
	if (o->engine && !orh_inst_engine_known(o->engine))
		return "unknown engine";
	return NULL;
}

int orh_inst_parse_args(int argc, char **argv, struct inst_opts *o)
{
	const char *problem = NULL, *root = NULL, *from = NULL, *timeout = NULL, *restart = NULL;
	const char *after = NULL;
	unsigned long long pid = 0;
	const struct orh_opt opts[] = {
		{ "--root", &root, NULL },		{ "--from", &from, NULL },
		{ "--engine", &o->engine, NULL },	{ "--engine-config", &o->req.engine_config, NULL },
		{ "--handler", &o->req.handler, NULL }, { "--shim", &o->req.shim, NULL },
		{ "--runtime", &o->req.runtime, NULL }, { "--socket", &o->socket, NULL },
		{ "--node-config", &o->node_config, NULL },
		{ "--ready-file", &o->ready_file, NULL },
		{ "--ready-timeout", &timeout, NULL },	{ "--restart-mode", &restart, NULL },
		{ "--once", NULL, &o->once },		{ "--uninstall", NULL, &o->uninstall },
		{ "--purge", NULL, &o->purge },		{ "--probe", NULL, &o->probe },
		{ "--after-pid", &after, NULL },
	};
	const struct orh_args a = { .cmd = "install", .usage = usage_text };
	int r = orh_args_parse(&a, argc, argv, 1, opts, ORH_ARRAY_SIZE(opts), NULL);

	if (r)
		return r;
	if (root)
		o->root = strcmp(root, "/") ? root : "";
	if (from)
		o->from = strcmp(from, "/") ? from : "";
	if (timeout)
		problem = parse_timeout(timeout, &o->ready_timeout);
	if (restart && !problem)
		problem = orh_inst_parse_restart(restart, &o->restart);
	if (after && !problem && (orh_parse_uint(after, 1U << 22, &pid) < 0 || !pid))
		problem = "--after-pid is a process ID";
	o->after_pid = (long)pid;
	if (!problem)
		problem = check_args(o);
	if (problem) {
		fprintf(stderr, "oci-rdma-hook: install: %s\n%s", problem, usage_text);
		return ORH_EXIT_USAGE;
	}
	return ORH_EXIT_OK;
}

