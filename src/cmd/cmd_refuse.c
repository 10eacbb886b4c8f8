/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Refusing a container where podman shows why (include/orh/apply/refuse.h): precreate's refusal,
 * the spec written back with a first createRuntime hook of this binary's `refuse` stage
 * (the appliers in src/apply/refuse.c), and `oci-rdma-hook refuse REASON`, that hook.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/cmd/commands.h"
#include "orh/base/log.h"
#include "orh/decide/oci.h"
#include "orh/apply/refuse.h"

/* How long the refusing hook waits for the runtime's state on stdin: it only drains it,
 * so that the runtime's write does not fail before the hook's exit status is read. */
#define REFUSE_STATE_TIMEOUT_MS 2000

int orh_precreate_refuse(const struct orh_ctx *ctx, const char *in, size_t in_len,
			 const char *reason)
{
	_cleanup_free_ char *out = NULL;
	_cleanup_free_ char *why = orh_xasprintf("precreate: %s; failing the container "
						 "(on_error=fail)", reason);
	struct orh_ctx bare = *ctx;
	struct orh_err err = { 0 };
	json_t *hook = NULL;
	size_t out_len = 0;
	int r;

	/* `refuse` reads no config: no --config or --sysroot for it */
	bare.config_explicit = false;
	bare.sysroot_opt = NULL;
	r = orh_self_hook(&bare, "refuse", &hook, &err);
	if (r >= 0 && json_array_append_new(json_object_get(hook, "args"), orh_json_text(why)) < 0)
		r = orh_fail(&err, ENOMEM, "out of memory");
	if (r >= 0)
		r = orh_spec_add_refusal(in, in_len, TAKE_PTR(hook), &out, &out_len, &err);
	if (r < 0) {
		json_decref(hook);
		orh_log(LOG_ERR, "precreate: adding the refusing hook: %s", err.msg);
		return ORH_EXIT_FAIL;
	}
	r = orh_write_all(STDOUT_FILENO, out, out_len);
	if (r < 0) {
		orh_log(LOG_ERR, "precreate: writing the config to stdout: %s", strerror(-r));
		return ORH_EXIT_FAIL;
	}
	return ORH_EXIT_OK;
}

/* `oci-rdma-hook refuse REASON`: the createRuntime hook that precreate puts first in a
 * refused container's spec. The reason goes to stderr, where runc's error shows it. */
int orh_cmd_refuse(struct orh_ctx *ctx, int argc, char **argv)
{
	_cleanup_free_ char *state = NULL;
	_cleanup_free_ char *why = orh_text_escape(
		argc > 1 ? argv[1] : "the container was refused (see the system log)");
	size_t len = 0;

	(void)ctx;
	(void)orh_read_fd_all_within(STDIN_FILENO, ORH_STATE_MAX_BYTES, REFUSE_STATE_TIMEOUT_MS,
				     &state, &len);
	fprintf(stderr, "oci-rdma-hook: error: %s\n", why);
	return ORH_EXIT_FAIL;
}
