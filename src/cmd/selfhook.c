/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OCI hook entries that run this very binary: what the spec edit (precreate, the runtime
 * shim) and the CDI spec register so that the runtime calls one of our stages later, with
 * the config file and sysroot this process was started with.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "orh/cmd/ctx.h"
#include "orh/apply/spec.h"

/* How long the runtime lets one of our stages run, as in the shipped hooks.d files. */
#define ORH_SELF_HOOK_TIMEOUT 30

/* `path` made absolute against the working directory, symlinks kept: the hook runs in
 * the runtime's working directory, not ours. */
static int absolute(const char *path, char **out, struct orh_err *err)
{
	char cwd[PATH_MAX];

	if (path[0] == '/') {
		*out = orh_xstrdup(path);
		return 0;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return orh_fail_errno(err, errno,
				      "making '%s' absolute: getting the working directory", path);
	*out = orh_xasprintf("%s/%s", cwd, path);
	return 0;
}

int orh_self_hook(const struct orh_ctx *ctx, const char *stage, json_t **out,
		  struct orh_err *err)
{
	static const char deleted[] = " (deleted)";
	char self[PATH_MAX];
	_cleanup_free_ char *config = NULL;
	_cleanup_free_ char *sysroot = NULL;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self));
	size_t len;
	json_t *args = NULL;
	int r;

	*out = NULL;
	if (n < 0)
		return orh_fail_errno(err, errno, "reading '/proc/self/exe'");
	if ((size_t)n >= sizeof(self))
		return orh_fail(err, ENAMETOOLONG, "reading '/proc/self/exe': path too long");
	self[n] = '\0';
	len = (size_t)n;
	if (self[0] != '/' ||
	    (len >= sizeof(deleted) - 1 && !strcmp(self + len - (sizeof(deleted) - 1), deleted)))
		return orh_fail(err, ENOENT,
				"this binary ('%s') is no longer where it was started from", self);
	/* --config only when a file was named (without it the stage reads the default file,
	 * as this process did); --sysroot only when one was given (else it comes from that
	 * same config) */
	if (ctx->config_explicit && (r = absolute(ctx->config_path, &config, err)) < 0)
		return r;
	if (ctx->sysroot_opt && (r = absolute(ctx->sysroot_opt, &sysroot, err)) < 0)
		return r;
	args = json_pack("[s]", ORH_HOOK_NAME);
	if (!args ||
	    (config && (json_array_append_new(args, json_string("--config")) < 0 ||
			json_array_append_new(args, json_string(config)) < 0)) ||
	    (sysroot && (json_array_append_new(args, json_string("--sysroot")) < 0 ||
			 json_array_append_new(args, json_string(sysroot)) < 0)) ||
	    json_array_append_new(args, json_string(stage)) < 0) {
		json_decref(args);
		return orh_fail(err, EINVAL,
				"building the %s hook: out of memory, or a path not in UTF-8", stage);
	}
	*out = json_pack("{s:s, s:o, s:i}", "path", self, "args", args, "timeout",
			 ORH_SELF_HOOK_TIMEOUT);
	if (!*out)
		return orh_fail(err, EINVAL,
				"building the %s hook: out of memory, or a path not in UTF-8", stage);
	return 0;
}
