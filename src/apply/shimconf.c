/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim's own /etc/nccl.conf and its record (include/orh/apply/shimconf.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "orh/node/config.h"
#include "orh/base/rootfs.h"
#include "orh/apply/shimconf.h"

bool orh_shimconf_network_known(const json_t *spec, bool has_netns, const char *nspath,
				bool netns_read)
{
	const json_t *hooks = json_object_get(spec, "hooks");

	if (!has_netns)
		return true; /* the runtime's own, which the shim runs in */
	if (nspath)
		return netns_read;
	/* one the runtime makes holds only a loopback link that is down, until a hook sets it
	 * up: prestart hooks and createRuntime hooks before the stage (docker's
	 * libnetwork-setkey is one) */
	return json_array_size(json_object_get(hooks, "prestart")) == 0 &&
	       json_array_size(json_object_get(hooks, "createRuntime")) == 0;
}

/* Is `dir` (an in-root absolute path) the path or a directory above it? */
static bool above(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(dir, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int orh_shimconf_covered(int rootfd, const json_t *spec, const char **dest)
{
	char conf[PATH_MAX], at[PATH_MAX];
	const json_t *m;
	size_t i;
	int r = orh_rootfs_resolve(rootfd, "/etc/nccl.conf", conf, sizeof(conf));

	*dest = NULL;
	if (r < 0)
		return r;
	json_array_foreach(json_object_get(spec, "mounts"), i, m) {
		const char *d = json_string_value(json_object_get(m, "destination"));

		if (!d || d[0] != '/' || orh_rootfs_resolve(rootfd, d, at, sizeof(at)) < 0 ||
		    above(at, conf)) {
			*dest = d ? d : "(none)";
			return 1;
		}
	}
	return 0;
}

/* The plan's settings that NCCL reads from the file (the others are in process.env). */
static size_t nccl_settings(const struct orh_plan *plan, struct orh_env_entry *out)
{
	size_t n = 0;

	for (size_t i = 0; i < plan->n_env; i++)
		if (orh_env_nccl_reads(plan->env[i].name))
			out[n++] = plan->env[i];
	return n;
}

int orh_shimconf_write(int bundle_fd, const json_t *spec, const struct orh_plan *plan,
		       int *rootfd, struct orh_ncclconf_result *res, struct orh_err *err)
{
	const json_t *root = json_object_get(spec, "root");
	const char *path = json_string_value(json_object_get(root, "path"));
	_cleanup_free_ struct orh_env_entry *settings = NULL;
	const char *dest = NULL;
	size_t n;
	int r;

	*rootfd = -1;
	if (json_is_true(json_object_get(root, "readonly")))
		return orh_fail(err, EROFS, "the container's root filesystem is read-only");
	if (!path || !*path)
		return orh_fail(err, EINVAL, "config.json: field 'root.path' is missing");
	*rootfd = openat(bundle_fd, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*rootfd < 0)
		return orh_fail_errno(err, errno, "opening the root '%s'", path);
	r = orh_shimconf_covered(*rootfd, spec, &dest);
	if (r < 0)
		return orh_fail_errno(err, -r, "resolving /etc/nccl.conf in the root");
	if (r > 0)
		return orh_fail(err, EXDEV, "the spec mounts '%s' over /etc/nccl.conf or above it",
				dest);
	settings = orh_xcalloc(plan->n_env + 1, sizeof(*settings));
	n = nccl_settings(plan, settings);
	return orh_ncclconf_apply(*rootfd, NULL, false, NULL, settings, n, res, err);
}

bool orh_shimconf_memlock_short(const json_t *spec, const struct orh_decision *d, char *msg,
				size_t size)
{
	struct orh_record_in rec = { 0 };

	orh_record_spec(&rec, spec);
	return rec.spec_memlock_set &&
	       orh_check_memlock(rec.spec_memlock, d->memlock.need, msg, size);
}

int orh_shimconf_record(const char *state_dir, const struct orh_shimconf_rec *in,
			struct orh_strv *warnings, struct orh_err *err)
{
	struct orh_record_in rec = {
		.id = in->id,
		.stage = "runtime shim",
		.edited_by = "the runtime shim, which wrote /etc/nccl.conf itself (no nccl-conf "
			     "stage: it knew the container's network)",
		.d = in->d,
		.shim_ms = in->shim_ms,
		.netns_if = in->d->facts.netns_default_if,
		.nodes_created = -1,
		.conf = "written",
		.conf_added = in->conf->added,
		.conf_bound_from = "",
		.conf_kept = &in->conf->kept,
		.conf_record_off = in->conf->record_off,
		.warnings = warnings,
		.bundle = in->bundle_path,
		.bundle_config = in->config_st,
		.runtime_state = in->runtime_state,
		.total_ms = in->total_ms,
	};
	char msg[ORH_ERR_MAX - 64];

	if (in->d->checks.gpudirect[0])
		orh_strv_pushf(warnings, "%s", in->d->checks.gpudirect);
	if (in->d->checks.gid[0])
		orh_strv_pushf(warnings, "%s", in->d->checks.gid);
	if (orh_shimconf_memlock_short(in->spec, in->d, msg, sizeof(msg)))
		orh_strv_pushf(warnings, "%s", msg);
	orh_record_spec(&rec, in->spec);
	orh_ns_ids_read("/proc", &rec.ns);
	return orh_record_write(state_dir, &rec, err);
}
