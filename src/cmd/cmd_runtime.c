/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim: `oci-rdma-runtime ARGS...` (argv[0] basename) or
 * `oci-rdma-hook runtime ARGS...`. It takes runc's command line; on `create` and `run`
 * it edits <bundle>/config.json (atomically) before the real runtime reads it, then it
 * executes the real runtime (config key `runtime`) with the arguments it was given.
 * Every other command passes straight through. A container that is not activated keeps
 * its config.json byte for byte. Where the shim knows the network the container will have
 * (orh/apply/shimconf.h: a pod's namespace by its path, the host's, a new one no hook sets up),
 * it writes /etc/nccl.conf into the bundle's root itself, before config.json, and the
 * container's record; the edit then registers no hook at all. Elsewhere the edit
 * registers the nccl-conf stage, and the node as the shim read it goes to that stage
 * through the container's state directory (orh/apply/handoff.h). Both are keyed by the
 * container id, the command's last argument as the engines give it (containerd's go-runc,
 * CRI-O). The edit registers no poststop hook: on `delete` the shim removes the
 * container's state directory itself, and where an installer's undo was kept for running
 * containers, starts its finish (orh_inst_finish_later()). When the shim itself fails a command, the reason
 * also goes to runc's --log file, where the engine reads the runtime's error (refuse.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/base/atomic.h"
#include "orh/cmd/commands.h"
#include "orh/cmd/install.h"
#include "orh/cmd/serve.h"
#include "orh/apply/handoff.h"
#include "orh/apply/record.h"
#include "orh/apply/refuse.h"
#include "orh/apply/shimconf.h"
#include "orh/cmd/shimfast.h"
#include "orh/apply/statedir.h"
#include "orh/apply/sweep.h"

struct runtime_args {
	int cmd;              /* index of the command in argv, 0 when none */
	const char *bundle;   /* --bundle/-b of create/run, "." when not given */
	const char *id;       /* the command's last argument, NULL when it cannot be an id */
	const char *log;      /* the global --log, NULL when not given */
	const char *log_format; /* the global --log-format, NULL when not given */
	const char *root;     /* the global --root (the runtime's state), NULL when not given */
};

/* "--name=value", "-name value", "--name value" (urfave/cli accepts one or two dashes).
 * Sets *name_len and *inline_value (NULL when the value is the next argument). */
static void split_flag(const char *arg, const char **name, size_t *name_len,
		       const char **inline_value)
{
	const char *eq = NULL;

	arg += arg[1] == '-' ? 2 : 1;
	eq = strchr(arg, '=');
	*name = arg;
	*name_len = eq ? (size_t)(eq - arg) : strlen(arg);
	*inline_value = eq ? eq + 1 : NULL;
}

static bool flag_is(const char *name, size_t len, const char *want)
{
	return strlen(want) == len && strncmp(name, want, len) == 0;
}

/* The command as orh_shim_command() finds it (the fast path finds it the same way), and
 * the global options before it that the shim needs. */
static void parse_args(int argc, char **argv, struct runtime_args *ra)
{
	int i = 1, end;

	memset(ra, 0, sizeof(*ra));
	ra->bundle = ".";
	ra->cmd = orh_shim_command(argc, argv);
	end = ra->cmd ? ra->cmd : argc;
	for (; i < end; i++) {
		const char *name = NULL, *val = NULL;
		size_t len = 0;

		if (strcmp(argv[i], "--") == 0)
			break;
		split_flag(argv[i], &name, &len, &val);
		if (orh_shim_global_takes_value(name, len) && !val && i + 1 < end)
			val = argv[++i];
		if (flag_is(name, len, "log"))
			ra->log = val;
		else if (flag_is(name, len, "log-format"))
			ra->log_format = val;
		else if (flag_is(name, len, "root"))
			ra->root = val;
	}
	if (!ra->cmd)
		return;
	i = ra->cmd;
	if (argc - 1 > i && orh_state_id_usable(argv[argc - 1]) && argv[argc - 1][0] != '-')
		ra->id = argv[argc - 1];
	if (!strcmp(argv[i], "create") || !strcmp(argv[i], "run"))
		ra->bundle = orh_shim_bundle(argc, argv, i);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The paths find_runtime()'s answer depends on, for the runtime cache: each directory it
 * looked in, with its stat taken before it looked, and each candidate it passed over there
 * (the runtime's name in the directory, but not taken), with the stat it decided on (have
 * false: not there, or a link to nothing). */
struct lookup {
	char kind[ORH_SHIM_CACHE_PATHS]; /* 'D' a directory, 'F' a candidate */
	char *paths[ORH_SHIM_CACHE_PATHS];
	struct stat st[ORH_SHIM_CACHE_PATHS];
	bool have[ORH_SHIM_CACHE_PATHS];
	size_t n;
	bool complete; /* every path it depends on is listed */
};

static void lookup_free(struct lookup *lk)
{
	for (size_t i = 0; i < lk->n; i++)
		free(lk->paths[i]);
}

/* One more path the lookup depends on, its stat (or its absence) with it. */
static void lookup_add(struct lookup *lk, char kind, const char *path, const struct stat *st)
{
	if (lk->n >= ORH_SHIM_CACHE_PATHS) {
		lk->complete = false;
		return;
	}
	lk->kind[lk->n] = kind;
	lk->have[lk->n] = st != NULL;
	if (st)
		lk->st[lk->n] = *st;
	lk->paths[lk->n++] = orh_xstrdup(path);
}

/* Find the real runtime: an absolute path from the config as it is, else the name in
 * ORH_RUNTIME_PATH (the directories looked in go to lk). Never ourselves (a shim
 * registered under the runtime's name). */
static int find_runtime(const char *runtime, char **out, struct lookup *lk,
			struct orh_err *err)
{
	_cleanup_free_ char *dirs = NULL;
	struct stat self, st;
	bool have_self = stat("/proc/self/exe", &self) == 0;
	char *save = NULL;

	*out = NULL;
	lk->complete = true;
	if (!runtime || !*runtime)
		runtime = "runc";
	if (strchr(runtime, '/')) {
		if (runtime[0] != '/')
			return orh_fail(err, EINVAL, "runtime '%s' is not an absolute path", runtime);
		if (stat(runtime, &st) < 0)
			return orh_fail_errno(err, errno, "runtime '%s'", runtime);
		if (have_self && same_file(&self, &st))
			return orh_fail(err, ELOOP, "runtime '%s' is this shim itself", runtime);
		*out = orh_xstrdup(runtime);
		return 0;
	}
	dirs = orh_xstrdup(ORH_RUNTIME_PATH);
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		_cleanup_free_ char *p = orh_xasprintf("%s/%s", d, runtime);
		struct stat dst, lst;
		bool found;

		lookup_add(lk, 'D', d, stat(d, &dst) == 0 ? &dst : NULL);
		found = stat(p, &st) == 0;
		if (found && S_ISREG(st.st_mode) && access(p, X_OK) == 0 &&
		    !(have_self && same_file(&self, &st))) {
			*out = TAKE_PTR(p);
			return 0;
		}
		/* passed over: one that becomes usable (made executable, a dangling link's
		 * target made) changes no directory, so it is in the cache itself */
		if (found || lstat(p, &lst) == 0)
			lookup_add(lk, 'F', p, found ? &st : NULL);
	}
	return orh_fail(err, ENOENT, "runtime '%s' not found in %s", runtime, ORH_RUNTIME_PATH);
}

/* The runtime caches of configs that are gone (a node config moved, a test's): removed
 * whenever a cache is written, so that they stay as many as the configs in use. */
static void cache_sweep(int dirfd)
{
	DIR *dir = fdopendir(fcntl(dirfd, F_DUPFD_CLOEXEC, 3));
	struct dirent *de;

	while (dir && (de = readdir(dir))) {
		char text[ORH_SHIM_CACHE_MAX];
		const char *config;
		ssize_t n;

		if (strncmp(de->d_name, ORH_SHIM_CACHE_PREFIX, strlen(ORH_SHIM_CACHE_PREFIX)))
			continue;
		n = orh_read_file_at(dirfd, de->d_name, text, sizeof(text));
		config = n > 0 ? orh_shim_cache_config(text, (size_t)n) : NULL;
		if (config && access(config, F_OK) < 0 && errno == ENOENT)
			unlinkat(dirfd, de->d_name, 0);
	}
	if (dir)
		closedir(dir);
}

/* The runtime cache of the fast path (orh/cmd/shimfast.h): the runtime found, for the node
 * config as it was read (whole and unchanged, or not there) and the paths the lookup
 * depended on; left as it is where it says that already. None for a runtime named on the
 * command line, a broken config, or a shim that is not root's. One that cannot be written
 * costs only the fast path, and is not logged (a read-only /run would log at every
 * command). */
static void cache_runtime(const struct orh_ctx *ctx, bool from_arg, const struct lookup *lk,
			  const char *runtime)
{
	char text[ORH_SHIM_CACHE_MAX], old[ORH_SHIM_CACHE_MAX], name[40];
	struct orh_shim_cache_path paths[ORH_SHIM_CACHE_PATHS];
	_cleanup_close_ int dirfd = -1;
	struct orh_err err = { 0 };
	struct stat st;
	size_t len;
	ssize_t n;

	if (from_arg || ctx->config_failed || ctx->config_seen == ORH_CONFIG_UNSURE ||
	    !lk->complete || geteuid() != 0)
		return;
	for (size_t i = 0; i < lk->n; i++)
		paths[i] = (struct orh_shim_cache_path){ .kind = lk->kind[i], .path = lk->paths[i],
							 .st = lk->have[i] ? &lk->st[i] : NULL };
	len = orh_shim_cache_text(&(struct orh_shim_cache){
		.config_path = ctx->config_path,
		.config_st = ctx->config_seen == ORH_CONFIG_READ ? &ctx->config_st : NULL,
		.paths = paths, .n_paths = lk->n, .runtime = runtime }, text, sizeof(text));
	if (!len)
		return;
	/* made as the first state directory makes it, if no container was served yet */
	if (mkdir(ORH_RUN_DIR, 0755) < 0 && errno != EEXIST)
		return;
	dirfd = open(ORH_RUN_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return;
	orh_shim_cache_name(ctx->config_path, name);
	n = orh_read_file_at(dirfd, name, old, sizeof(old));
	/* the fast path takes only a root's file no one else may write */
	if (n == (ssize_t)len && !memcmp(old, text, len) &&
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == 0 && !(st.st_mode & 022))
		return;
	/* root's, 0644, whatever was there; what a killed writer left is removed first (a
	 * shim writing the same cache at that moment then fails to, and the next one will) */
	if (orh_replace_at(dirfd, name, &(struct orh_replace){
		    .type = S_IFREG, .mode = 0644, .chown = true, .data = text, .len = len,
		    .sweep = true }, &err) == 0)
		cache_sweep(dirfd);
}

/* steps[name] = the milliseconds since t; returns now. */
static double step(json_t *steps, const char *name, double t)
{
	double now = orh_now_ms();

	json_object_set_new(steps, name, json_real(now - t));
	return now;
}

/* The node as the shim read it, for the container's nccl-conf stage; one that cannot be
 * written is a warning (that stage then reads the node itself). */
static void hand_off(const struct orh_ctx *ctx, const struct runtime_args *ra,
		     struct orh_edit_result *res, json_t *steps)
{
	struct orh_err err = { 0 };
	bool created = false;

	if (!ra->id)
		return;
	/* the shim's time, for the stage's record */
	json_object_set_new(steps, "config", json_real(ctx->t_config - ctx->t_main));
	json_object_set_new(res->snapshot, "shim_ms", json_pack("{s:O, s:f}", "steps", steps,
		"until the handoff", orh_now_ms() - ctx->t_main));
	if (orh_handoff_write(ORH_RUN_DIR, ra->id, ra->bundle, NULL, ctx->sysroot,
			      TAKE_PTR(res->snapshot), &created, &err) < 0) {
		orh_log(LOG_WARNING, "container %s: %s; its nccl-conf stage reads the node itself",
			ra->id, err.msg);
		orh_handoff_drop(ORH_RUN_DIR, ra->id);
	}
	/* the first state directory of a container sweeps those of containers gone (at most
	 * once a minute) */
	if (created)
		orh_record_sweep(ORH_RUN_DIR, "/proc", ra->id, ORH_RECORD_SWEEP_EVERY);
}

/* The shim serves the container alone (res->own_conf): /etc/nccl.conf into its root now.
 * Where that cannot be done, the edit registers the nccl-conf stage after all, which
 * writes it the way the container's root needs. */
static int write_conf(struct orh_ctx *ctx, const struct runtime_args *ra, int dirfd,
		      json_t *spec, unsigned flags, struct orh_edit_result *res, int *rootfd,
		      struct orh_ncclconf_result *conf, struct orh_err *err)
{
	struct orh_err cerr = { 0 };
	char msg[ORH_ERR_MAX - 64];

	if (res->d->checks.memlock_refuses &&
	    orh_shimconf_memlock_short(spec, res->d, msg, sizeof(msg)))
		return orh_fail(err, EPERM, "%s", msg); /* the stage would refuse it */
	if (orh_shimconf_write(dirfd, spec, &res->d->plan, rootfd, conf, &cerr) == 0)
		return 0;
	orh_log(LOG_INFO, "container %s: /etc/nccl.conf is left to the nccl-conf stage: %s",
		ra->id, cerr.msg);
	return orh_edit_add_stage(ctx, spec, flags, res, err);
}

/* Where the runtime keeps the container's state while the container exists: --root, or
 * the default root of runc and crun (as root); NULL for a runtime whose default is not
 * known. */
static char *runtime_state(const struct orh_ctx *ctx, const struct runtime_args *ra)
{
	const char *rt = ctx->cfg.runtime ? ctx->cfg.runtime : "runc";
	const char *base = strrchr(rt, '/') ? strrchr(rt, '/') + 1 : rt;
	const char *root = ra->root;

	if (!root && !strcmp(base, "runc"))
		root = "/run/runc";
	else if (!root && !strcmp(base, "crun"))
		root = "/run/crun";
	return root ? orh_xasprintf("%s/%s", root, ra->id) : NULL;
}

/* The record of a container the shim served alone, bound to the config.json it wrote and
 * to the runtime's state of the container; one that cannot be written is a warning. The
 * first state directory of a container sweeps those of containers gone (at most once a
 * minute). */
static void record_own(struct orh_ctx *ctx, const struct runtime_args *ra, int dirfd,
		       const json_t *spec, const struct orh_edit_result *res,
		       const struct orh_ncclconf_result *conf, json_t *steps)
{
	_cleanup_free_ char *dir = orh_state_dir_path(ORH_RUN_DIR, ra->id);
	_cleanup_free_ char *bundle = ra->bundle[0] == '/' ? orh_xstrdup(ra->bundle)
							   : realpath(ra->bundle, NULL);
	_cleanup_free_ char *rstate = runtime_state(ctx, ra);
	struct orh_strv warnings = { 0 };
	struct orh_err err = { 0 };
	struct stat st;
	bool created = access(dir, F_OK) < 0;
	json_t *shim_ms;

	if (!bundle || fstatat(dirfd, "config.json", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		orh_log(LOG_WARNING, "container %s: no record: the bundle: %m", ra->id);
		return;
	}
	json_object_set_new(steps, "config", json_real(ctx->t_config - ctx->t_main));
	shim_ms = json_pack("{s:O, s:f}", "steps", steps, "until the record",
			    orh_now_ms() - ctx->t_main);
	if (orh_shimconf_record(dir, &(struct orh_shimconf_rec){
		    .id = ra->id, .bundle_path = bundle, .runtime_state = rstate,
		    .sysroot = ctx->sysroot,
		    .config_st = &st, .d = res->d, .spec = spec, .conf = conf,
		    .shim_ms = shim_ms, .total_ms = orh_now_ms() - ctx->t_main },
				&warnings, &err) < 0)
		orh_log(LOG_WARNING, "container %s: the record: %s", ra->id, err.msg);
	for (size_t i = 0; i < warnings.n; i++)
		orh_log(LOG_WARNING, "container %s: %s", ra->id, warnings.v[i]);
	orh_strv_free(&warnings);
	json_decref(shim_ms);
	if (created)
		orh_record_sweep(ORH_RUN_DIR, "/proc", ra->id, ORH_RECORD_SWEEP_EVERY);
}

/* Edit <bundle>/config.json. Returns 0 also when nothing was changed; -errno with err
 * filled on a failure, *fatal telling whether the container must then fail. Nothing is
 * left half-done: /etc/nccl.conf written for a config.json that could not be is put
 * back. */
static int edit_bundle(struct orh_ctx *ctx, const struct runtime_args *ra, bool *fatal,
		       struct orh_err *err)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_close_ int rootfd = -1;
	_cleanup_free_ char *out = NULL;
	_cleanup_free_ char *name = orh_xasprintf("%s/config.json", ra->bundle);
	struct orh_ncclconf_result conf = { 0 };
	struct orh_err uerr = { 0 };
	struct orh_edit_result res;
	unsigned flags = ra->id ? ORH_SERVE_SNAPSHOT | ORH_SERVE_NO_POSTSTOP | ORH_SERVE_CONF : 0;
	json_t *spec = NULL, *steps = json_object();
	size_t out_len = 0;
	double t = orh_now_ms();
	int r;

	*fatal = false;
	memset(&res, 0, sizeof(res));
	dirfd = open(ra->bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		r = orh_fail_errno(err, errno, "opening bundle '%s'", ra->bundle);
	else
		r = orh_spec_load_at(dirfd, "config.json", name, &spec, err);
	if (r < 0)
		goto out;
	t = step(steps, "config.json read", t);
	r = orh_spec_serve_at(ctx, spec, dirfd, flags, &res, err);
	t = step(steps, "node, plan and spec edit", t);
	for (size_t i = 0; r >= 0 && i < res.warnings.n; i++)
		orh_log(LOG_WARNING, "%s", res.warnings.v[i]);
	if (r >= 0 && res.own_conf) {
		r = write_conf(ctx, ra, dirfd, spec, flags, &res, &rootfd, &conf, err);
		t = step(steps, "/etc/nccl.conf", t);
	}
	if (r >= 0 && res.edits > 0)
		r = orh_spec_dump(spec, &out, &out_len, err);
	if (r >= 0 && res.edits > 0)
		r = orh_write_atomic(dirfd, "config.json", out, out_len, 0600, err);
	step(steps, "config.json write", t);
	if (r < 0 && conf.in_place && orh_ncclconf_undo(rootfd, &conf, &uerr) < 0)
		orh_log(LOG_ERR, "container %s: %s", ra->id, uerr.msg);
	if (r >= 0 && res.own_conf)
		record_own(ctx, ra, dirfd, spec, &res, &conf, steps);
	else if (r >= 0 && res.snapshot)
		hand_off(ctx, ra, &res, steps);
	if (r < 0)
		*fatal = orh_edit_must_fail(&ctx->cfg, &res);
out:
	json_decref(steps);
	json_decref(spec);
	orh_ncclconf_result_free(&conf);
	orh_edit_result_free(&res);
	return r;
}

/* The shim fails the command: the reason to stderr and syslog, and, as runc would write
 * it, to the caller's --log file, whose last error containerd and docker report. */
static int refuse(const struct runtime_args *ra, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int refuse(const struct runtime_args *ra, const char *fmt, ...)
{
	_cleanup_free_ char *why = NULL;
	char msg[ORH_ERR_MAX + 128];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	orh_log(LOG_ERR, "%s", msg);
	if (!ra->log)
		return ORH_EXIT_FAIL;
	why = orh_xasprintf("oci-rdma-runtime: %s", msg);
	r = orh_runc_log_append(ra->log, ra->log_format, why);
	if (r < 0) /* the refusal stands; only its explanation is lost */
		orh_log(LOG_WARNING, "writing the reason to the runtime log '%s': %s", ra->log,
			strerror(-r));
	return ORH_EXIT_FAIL;
}

int orh_cmd_runtime(struct orh_ctx *ctx, int argc, char **argv)
{
	_cleanup_free_ char *runtime = NULL;
	struct runtime_args ra;
	struct orh_err err = { 0 };
	struct lookup lk = { 0 };
	char **args = NULL;
	bool fatal = false;
	int r = 0;

	/* The runtime an engine's registration names for itself (docker's runtimeArgs): the
	 * first argument, never passed on. It wins over the node config's `runtime`, so that
	 * engines chaining different runtimes share one node config. */
	bool from_arg = argc > 1 && !strncmp(argv[1], ORH_RUNTIME_ARG, strlen(ORH_RUNTIME_ARG));

	if (from_arg) {
		free(ctx->cfg.runtime);
		ctx->cfg.runtime = orh_xstrdup(argv[1] + strlen(ORH_RUNTIME_ARG));
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	parse_args(argc, argv, &ra);
	if (ra.cmd > 0 && (!strcmp(argv[ra.cmd], "create") || !strcmp(argv[ra.cmd], "run"))) {
		/* During create, the runtime's stderr is often the container's own stderr
		 * (containerd's shim passes the container's stdio): what does not stop the
		 * container goes to syslog only (the log's lines are all the shim writes) */
		bool was = orh_log_stderr(false);

		if (ctx->config_failed)
			orh_log(LOG_ERR, "%s: container left unchanged", ctx->config_err.msg);
		else
			r = edit_bundle(ctx, &ra, &fatal, &err);
		if (r < 0 && !fatal)
			orh_log(LOG_WARNING, "%s: container left unchanged", err.msg);
		orh_log_stderr(was);
		if (r < 0 && fatal)
			return refuse(&ra, "%s; failing the container (on_error=fail)", err.msg);
	}
	/* behind the shim no poststop hook runs: the container's state directory goes with
	 * it (a container started with `run` is left to the next state directory's sweep) */
	if (ra.cmd > 0 && !strcmp(argv[ra.cmd], "delete") && ra.id)
		orh_state_dir_remove(ORH_RUN_DIR, ra.id);
	/* an installer's undo kept for the containers that ran through the handler: finished
	 * once they are gone (orh/cmd/install.h) */
	if (ra.cmd > 0 && !strcmp(argv[ra.cmd], "delete"))
		orh_inst_finish_later();
	r = find_runtime(ctx->cfg.runtime, &runtime, &lk, &err);
	if (r == 0)
		cache_runtime(ctx, from_arg, &lk, runtime);
	lookup_free(&lk);
	if (r < 0)
		return refuse(&ra, "%s", err.msg);
	args = orh_xcalloc((size_t)argc + 1, sizeof(*args));
	args[0] = runtime;
	for (int i = 1; i < argc; i++)
		args[i] = argv[i];
	execv(runtime, args);
	r = errno;
	free(args);
	return refuse(&ra, "executing runtime '%s': %s", runtime, strerror(r));
}
