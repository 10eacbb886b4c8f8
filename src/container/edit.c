/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The spec edit shared by `precreate` and the runtime shim (include/orh/edit.h), and
 * the atomic replacement of a file in a directory.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "orh/apply.h"
#include "orh/commands.h"
#include "orh/decide.h"
#include "orh/edit.h"
#include "orh/inventory.h"
#include "orh/plan.h"
#include "orh/sandbox.h"

static void push_all(struct orh_strv *dst, const struct orh_strv *src)
{
	for (size_t i = 0; i < src->n; i++)
		orh_strv_push(dst, orh_xstrdup(src->v[i]));
}

void orh_edit_result_free(struct orh_edit_result *res)
{
	orh_strv_free(&res->warnings);
	memset(res, 0, sizeof(*res));
}

bool orh_edit_must_fail(const struct orh_config *cfg, const struct orh_edit_result *res)
{
	return cfg->on_error == ORH_ON_ERROR_FAIL && res->asked;
}

/* The runtime applies process.rlimits with our own privileges: without
 * CAP_SYS_RESOURCE in the initial user namespace (rootless podman runs this hook in its
 * user namespace, where it holds the capability for nothing that counts here) it cannot
 * raise a hard limit, and a container would then fail to start because of us. The
 * decision asks only for what it can grant, and says so. */
static uint64_t memlock_ceiling(void)
{
	struct rlimit cur;

	if (orh_can_raise_hard_rlimits() || getrlimit(RLIMIT_MEMLOCK, &cur) < 0 ||
	    cur.rlim_max == RLIM_INFINITY)
		return 0;
	return cur.rlim_max ? (uint64_t)cur.rlim_max : 1;
}

/* The container's network namespace, when the spec names one made beforehand (podman,
 * CRI pods): its routes and addresses are known now. One the runtime creates is still
 * empty. */
struct netns_arg {
	const json_t *spec;
	struct orh_netns_info ni;
	struct orh_strv *warnings;
};

static int netns_facts(void *arg, struct orh_container_facts *facts, struct orh_err *err)
{
	struct netns_arg *a = arg;
	const char *nspath = NULL;
	bool has_netns = false;
	struct orh_err nerr = { 0 };
	int r = orh_spec_netns(a->spec, &has_netns, &nspath);

	if (r < 0)
		return orh_fail(err, r, "config.json: field 'linux.namespaces': bad network entry");
	facts->own_netns = has_netns;
	if (!has_netns || !nspath)
		return 0;
	if (orh_netns_read(nspath, &a->ni, &nerr) < 0) {
		orh_strv_pushf(a->warnings, "network namespace '%s' not read: %s", nspath, nerr.msg);
		return 0;
	}
	memcpy(facts->netns_default_if, a->ni.default_if, sizeof(facts->netns_default_if));
	facts->addrs = a->ni.addrs;
	facts->n_addrs = a->ni.n_addrs;
	return 0;
}

int orh_spec_edit(const struct orh_ctx *ctx, json_t *spec, struct orh_edit_result *res,
		  struct orh_err *err)
{
	json_t *nccl_hook = NULL, *poststop_hook = NULL;
	struct netns_arg na = { .spec = spec, .warnings = &res->warnings };
	struct orh_decide_in in = {
		.cfg = &ctx->cfg,
		.sysroot = ctx->sysroot,
		.scan = ORH_GIDS_PLAN,
		.spec = spec,
		.container_facts = netns_facts,
		.arg = &na,
		.memlock_ceiling = memlock_ceiling(),
	};
	struct orh_decision d;
	struct orh_spec_opts sopts;
	int r;

	memset(res, 0, sizeof(*res));
	r = orh_decide(&in, &d, err);
	res->asked = d.asked;
	res->activation = d.act;
	push_all(&res->warnings, &d.warnings);
	if (r < 0 || !d.have_plan || orh_plan_is_empty(&d.plan))
		goto out;
	res->preset = d.plan.preset;
	if (d.plan.n_env > 0) {
		r = orh_self_hook(ctx, "nccl-conf", &nccl_hook, err);
		if (r == 0)
			r = orh_self_hook(ctx, "poststop", &poststop_hook, err);
		if (r < 0)
			goto out;
	}
	memset(&sopts, 0, sizeof(sopts));
	sopts.add_ipc_lock = ctx->cfg.add_ipc_lock;
	sopts.warnings = &res->warnings;
	sopts.nccl_hook = nccl_hook;
	sopts.poststop_hook = poststop_hook;
	r = orh_spec_apply(spec, &d.plan, &sopts, &res->changes, err);
	if (r >= 0) {
		res->edits = r;
		r = 0;
	}
out:
	json_decref(nccl_hook);
	json_decref(poststop_hook);
	orh_decision_free(&d);
	return r;
}

/* Remove what a writer killed between creating its temporary file and the rename left
 * behind (".NAME.orh-XXXXXXXXXXXXXXXX"): only regular files of exactly that form. */
static void remove_stale_temps(int dirfd, const char *name)
{
	char prefix[NAME_MAX + 1];
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t plen;
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	snprintf(prefix, sizeof(prefix), ".%s.orh-", name);
	plen = strlen(prefix);
	while ((de = readdir(d))) {
		struct stat st;

		if (strncmp(de->d_name, prefix, plen) || strlen(de->d_name) != plen + 16)
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			unlinkat(dirfd, de->d_name, 0);
	}
	closedir(d);
}

int orh_write_atomic(int dirfd, const char *name, const char *data, size_t len,
		     unsigned mode, struct orh_err *err)
{
	_cleanup_close_ int fd = -1;
	char tmp[NAME_MAX + 1];
	struct stat old;
	uint64_t rnd = 0;
	bool have_old = false;
	int r = 0;

	if (strchr(name, '/') || strlen(name) > NAME_MAX - 24)
		return orh_fail(err, EINVAL, "'%s': not a plain file name", name);
	if (fstatat(dirfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISREG(old.st_mode))
			return orh_fail(err, EINVAL, "'%s' exists and is not a regular file", name);
		have_old = true;
		mode = old.st_mode & 07777;
	}
	remove_stale_temps(dirfd, name);
	for (int tries = 0; fd < 0; tries++) {
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			rnd ^= (uint64_t)getpid() << 32 | (unsigned)tries;
		snprintf(tmp, sizeof(tmp), ".%s.orh-%016llx", name, (unsigned long long)rnd);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && (errno != EEXIST || tries > 8))
			return orh_fail(err, errno, "creating '%s': %s", tmp, strerror(errno));
	}
	if (have_old && fchown(fd, old.st_uid, old.st_gid) < 0 && errno != EPERM) {
		r = orh_fail(err, errno, "'%s': fchown: %s", tmp, strerror(errno));
		goto fail;
	}
	if (fchmod(fd, mode) < 0) {
		r = orh_fail(err, errno, "'%s': fchmod: %s", tmp, strerror(errno));
		goto fail;
	}
	r = orh_write_all(fd, data, len);
	if (r < 0) {
		orh_fail(err, r, "writing '%s': %s", tmp, strerror(-r));
		goto fail;
	}
	if (fsync(fd) < 0) {
		r = orh_fail(err, errno, "'%s': fsync: %s", tmp, strerror(errno));
		goto fail;
	}
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		r = orh_fail(err, errno, "renaming '%s' to '%s': %s", tmp, name, strerror(errno));
		goto fail;
	}
	/* The rename is durable once the directory is. */
	if (fsync(dirfd) < 0 && errno != EINVAL && errno != EBADF)
		return orh_fail(err, errno, "fsync of the directory of '%s': %s", name,
				strerror(errno));
	return 0;
fail:
	unlinkat(dirfd, tmp, 0);
	return r;
}
