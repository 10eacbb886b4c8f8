/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook precreate: podman's hooks.d "precreate" stage. The proposed config.json
 * comes on stdin; the full (possibly modified) config goes to stdout. A container that
 * is not activated, or whose edit failed under on_error = warn, gets its input back
 * byte for byte. One refused under on_error = fail comes back with a first createRuntime
 * hook that fails it with the reason, where the runtime's error shows it (refuse.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/cmd/commands.h"
#include "orh/cmd/serve.h"
#include "orh/apply/refuse.h"

static void log_result(const struct orh_edit_result *res, const char *what)
{
	for (size_t i = 0; i < res->warnings.n; i++)
		orh_log(LOG_WARNING, "%s", res->warnings.v[i]);
	if (res->edits > 0)
		orh_log(LOG_INFO,
			"%s: %u device(s), %u cgroup rule(s), memlock %s, %u hook(s) added (NCCL "
			"settings go to /etc/nccl.conf), %u other setting(s) added to the "
			"environment, CAP_IPC_LOCK added to %u set(s)",
			what, res->changes.devices, res->changes.allow_rules,
			res->changes.memlock ? "set" : "unchanged", res->changes.hooks,
			res->changes.env, res->changes.caps);
}

int orh_cmd_precreate(struct orh_ctx *ctx, int argc, char **argv)
{
	_cleanup_free_ char *in = NULL;
	_cleanup_free_ char *out = NULL;
	struct orh_edit_result res;
	struct orh_err err = { 0 };
	json_t *spec = NULL;
	size_t in_len = 0, out_len = 0;
	int r, rc = ORH_EXIT_OK;

	memset(&res, 0, sizeof(res));
	if (argc > 1) {
		fprintf(stderr, "oci-rdma-hook: precreate: unexpected argument '%s'\n", argv[1]);
		return ORH_EXIT_USAGE;
	}
	r = orh_read_fd_all(STDIN_FILENO, ORH_SPEC_MAX_BYTES, &in, &in_len);
	if (r < 0) {
		/* Nothing to pass through: podman gets no config back and fails. */
		orh_log(LOG_ERR, "precreate: reading config.json from stdin: %s", strerror(-r));
		return ORH_EXIT_FAIL;
	}
	if (ctx->config_failed) {
		orh_log(LOG_ERR, "precreate: %s: container left unchanged", ctx->config_err.msg);
		goto pass;
	}
	r = orh_spec_parse(in, in_len, "config.json (stdin)", &spec, &err);
	if (r < 0) {
		orh_log(LOG_ERR, "precreate: %s: container left unchanged", err.msg);
		goto pass;
	}
	r = orh_spec_serve(ctx, spec, 0, &res, &err);
	if (r < 0) {
		if (orh_edit_must_fail(&ctx->cfg, &res)) {
			orh_log(LOG_ERR, "precreate: %s", err.msg);
			rc = orh_precreate_refuse(ctx, in, in_len, err.msg);
			goto done;
		}
		orh_log(LOG_WARNING, "precreate: %s: container left unchanged", err.msg);
		goto pass;
	}
	log_result(&res, "precreate");
	if (res.edits == 0)
		goto pass;
	r = orh_spec_dump(spec, &out, &out_len, &err);
	if (r < 0) {
		orh_log(LOG_ERR, "precreate: %s", err.msg);
		if (orh_edit_must_fail(&ctx->cfg, &res)) {
			rc = orh_precreate_refuse(ctx, in, in_len, err.msg);
			goto done;
		}
		goto pass;
	}
	r = orh_write_all(STDOUT_FILENO, out, out_len);
	goto written;
pass:
	r = orh_write_all(STDOUT_FILENO, in, in_len);
written:
	if (r < 0) {
		orh_log(LOG_ERR, "precreate: writing the config to stdout: %s", strerror(-r));
		rc = ORH_EXIT_FAIL;
	}
done:
	if (spec)
		json_decref(spec);
	orh_edit_result_free(&res);
	return rc;
}
