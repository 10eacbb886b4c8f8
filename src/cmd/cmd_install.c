/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook install --root DIR [--engine E] [--engine-config PATH] [--handler NAME]
 *     [--shim PATH] [--runtime PATH] [--restart-mode signal|systemd|none] [--socket PATH]
 *     [--from DIR] [--node-config FILE] [--ready-file FILE] [--ready-timeout SECONDS]
 *     [--once | --uninstall [--after-pid PID] | --purge]
 * oci-rdma-hook install --probe [--ready-file FILE]
 *
 * The installer image's entrypoint (include/orh/cmd/install.h): puts the binary, the
 * oci-rdma-runtime link, the node config (--node-config: the DaemonSet's ConfigMap) and
 * the hooks.d files at their installed paths under DIR, registers the hook with the engine
 * found there (configure's plan, every file read and written under DIR), restarts or
 * signals that engine, and once the engine reports the handler loaded writes the ready
 * file (what --probe, the DaemonSet's readinessProbe, checks) and the node-feature-discovery
 * feature file. Then it reconciles until a signal (reconcile(); install_watch.c): the
 * engine's config directories watched with inotify, configure's check run a second after a
 * change and every ORH_INST_RESYNC_S seconds, and a drift (another tool changed what
 * configure wrote, or the default runtime it chains) re-asserted at a bounded pace: the
 * ready file removed, configure again, the engine restarted, ready once it reports the
 * handler. SIGTERM or SIGINT undo the engine's part: the feature file
 * and the ready file removed, configure --undo, the engine restarted again; on containerd,
 * while a container of the handler still runs (handler_in_use()), the engine's config is
 * kept for it instead, and the manifest marked pending: the runtime shim's delete of a
 * container starts `--uninstall --after-pid` (install_finish.c), which reverts it once none
 * runs; so does a --uninstall by hand. Runs on one root take turns (orh_inst_lock()). The
 * binary,
 * the link, the hooks.d files and the node config stay for the containers that still run
 * through them; --purge removes them too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orh-config.h"
#include "orh/base/args.h"
#include "orh/base/atomic.h"
#include "orh/cmd/install.h"
#include "install_args.h"

#define INST_SOURCE_MAX_BYTES (256 * 1024 * 1024)

static int read_source(const char *path, char **out, size_t *len, struct orh_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	int r;

	if (fd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", path);
	r = orh_read_fd_all(fd, INST_SOURCE_MAX_BYTES, out, len);
	return r < 0 ? orh_fail_errno(err, r, "reading '%s'", path) : 0;
}

/* The file src of the image put at path under root. */
static int put_file(const struct inst_opts *o, struct orh_inst_manifest *m, char kind,
		    const char *src, const char *path, unsigned mode, struct orh_err *err)
{
	_cleanup_free_ char *data = NULL;
	const char *what = NULL;
	size_t len = 0;
	int r;

	r = read_source(src, &data, &len, err);
	if (r >= 0)
		r = orh_inst_put(o->root, m, kind, path, data, len, mode, &what, err);
	if (r >= 0 && kind == 'c' && !strcmp(what, "kept"))
		printf("kept %s (there before the installer: %s is not installed)\n", path, src);
	else if (r >= 0)
		printf("%s %s\n", what, path);
	return r;
}

/* A file of the image at its own path under --from (the binary: this process's own). */
static int put_own(const struct inst_opts *o, struct orh_inst_manifest *m, const char *path,
		   unsigned mode, struct orh_err *err)
{
	_cleanup_free_ char *src = orh_xasprintf("%s%s", o->from, path);

	return put_file(o, m, 'f', src, path, mode, err);
}

static int put_files(const struct inst_opts *o, struct orh_inst_manifest *m, const char *conf,
		     struct orh_err *err)
{
	_cleanup_free_ char *conf_src = o->node_config ? orh_xstrdup(o->node_config)
						       : orh_xasprintf("%s%s", o->from, conf);
	const char *what = NULL;
	int r;

	r = put_file(o, m, 'f', "/proc/self/exe", ORH_BINDIR "/oci-rdma-hook", 0755, err);
	if (r >= 0)
		r = orh_inst_link(o->root, m, ORH_BINDIR "/oci-rdma-runtime", "oci-rdma-hook",
				  &what, err);
	if (r >= 0)
		printf("%s %s\n", what, ORH_BINDIR "/oci-rdma-runtime");
	if (r >= 0)
		r = put_file(o, m, 'c', conf_src, conf, 0644, err);
	if (r >= 0)
		r = put_own(o, m, ORH_CONTAINERS_HOOKS_DIR "/oci-rdma-hook.json", 0644, err);
	if (r >= 0)
		r = put_own(o, m, ORH_CONTAINERS_HOOKS_DIR "/oci-rdma-hook-poststop.json", 0644,
			    err);
	if (r >= 0)
		r = put_own(o, m, ORH_OWN_HOOKS_DIR "/oci-rdma-hook-precreate.json", 0644, err);
	return r;
}

/* A k3s or rke2 template where none is: k3s's base template and nothing else, which
 * renders as no template does; configure then appends to it. */
static int put_template(const struct inst_opts *o, struct orh_inst_manifest *m,
			const struct orh_inst_engine *e, struct orh_err *err)
{
	_cleanup_free_ char *p = orh_xasprintf("%s%s", o->root, e->config);
	const char *what = NULL;
	size_t len = strlen(e->config);
	int r;

	if (len < 5 || strcmp(e->config + len - 5, ".tmpl") || access(p, F_OK) == 0)
		return 0;
	r = orh_inst_put(o->root, m, 't', e->config, ORH_INSTALL_TEMPLATE_BASE,
			 strlen(ORH_INSTALL_TEMPLATE_BASE), 0644, &what, err);
	if (r >= 0)
		printf("%s %s\n", what, e->config);
	return r;
}

static void print_lines(const char *prefix, struct orh_strv *lines)
{
	for (size_t i = 0; i < lines->n; i++)
		printf("%s%s\n", prefix, lines->v[i]);
	fflush(stdout);
	orh_strv_free(lines);
}

/* The lines of sv joined by ", ": a new string. */
static char *join(const struct orh_strv *sv)
{
	struct orh_buf b = { 0 };

	for (size_t i = 0; i < sv->n; i++) {
		if (i)
			orh_buf_add(&b, ", ", 2);
		orh_buf_add(&b, sv->v[i], strlen(sv->v[i]));
	}
	return b.p ? b.p : orh_xstrdup("");
}

/* Did configure change a file the engine reads (not only the node config)? */
static bool engine_changed(const struct orh_strv *changed, const char *conf)
{
	for (size_t i = 0; i < changed->n; i++) {
		const char *path = strchr(changed->v[i], ' ');

		if (path && strcmp(path + 1, conf))
			return true;
	}
	return false;
}

/* The directories in the engine config's directory under root, by name. */
static void subdirs(const char *root, const char *config, struct orh_strv *names)
{
	_cleanup_free_ char *dir = orh_xasprintf("%s%s", root, config);
	struct dirent *de;
	DIR *d;

	*strrchr(dir, '/') = '\0';
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		struct stat st;
		bool is_dir = de->d_type == DT_DIR ||
			      (de->d_type == DT_UNKNOWN &&
			       fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			       S_ISDIR(st.st_mode));

		if (is_dir && de->d_name[0] != '.')
			orh_strv_push(names, orh_xstrdup(de->d_name));
	}
	if (d)
		closedir(d);
}

/* The directories configure made beside the engine's config (a drop-in directory: those
 * in after and not in before), recorded for the undo. */
static int record_dirs(const struct inst_opts *o, struct orh_inst_manifest *m,
		       const char *config, const struct orh_strv *before, struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xstrdup(config);
	struct orh_strv after = { 0 };
	size_t n = m->n;

	*strrchr(dir, '/') = '\0';
	subdirs(o->root, config, &after);
	for (size_t i = 0; i < after.n; i++)
		if (!orh_strv_contains(before, after.v[i])) {
			_cleanup_free_ char *p = orh_xasprintf("%s/%s", dir, after.v[i]);

			if (!orh_inst_has(m, p))
				orh_inst_add_dir(m, p);
		}
	orh_strv_free(&after);
	return m->n == n ? 0 : orh_inst_save(o->root, m, err);
}

/* configure for the engine (--undo with o->req.undo), then the engine restarted where a
 * file it reads changed; a k3s template install made and configure emptied again is
 * removed before that restart. what (where given): the lines of the files written, joined
 * by ", " ("" where none was). */
static int configure_engine(const struct inst_opts *o, struct orh_inst_manifest *m,
			    struct orh_inst_engine *e, const char *conf, char **what,
			    struct orh_err *err)
{
	struct orh_strv changed = { 0 }, notes = { 0 }, done = { 0 }, before = { 0 };
	struct orh_configure_req req = o->req;
	bool restart;
	int r;

	req.engine = e->engine;
	req.engine_config = e->config;
	subdirs(o->root, e->config, &before);
	r = orh_configure_under(o->root, &req, conf, &changed, &notes, err);
	if (r >= 0 && !req.undo)
		r = record_dirs(o, m, e->config, &before, err);
	orh_strv_free(&before);
	restart = engine_changed(&changed, conf);
	if (what)
		*what = join(&changed);
	print_lines("", &changed);
	if (r >= 0 && req.undo)
		r = orh_inst_undo_kind(o->root, m, 't', ORH_INSTALL_TEMPLATE_BASE, &done, err);
	print_lines("", &done);
	if (r >= 0 && restart)
		r = orh_inst_engine_restart(o->root, e, o->restart, &notes, err);
	print_lines("note: ", &notes);
	return r;
}

static int write_ready(const char *path, const char *text, struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xstrdup(path);
	_cleanup_close_ int dirfd = -1;
	char *slash = strrchr(dir, '/');

	if (!slash || slash == dir)
		return orh_fail(err, EINVAL, "--ready-file '%s' is not a path in a directory",
				path);
	*slash = '\0';
	for (char *q = dir + 1; *q; q++)
		if (*q == '/') {
			*q = '\0';
			mkdir(dir, 0755);
			*q = '/';
		}
	mkdir(dir, 0755);
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", dir);
	return orh_write_atomic(dirfd, slash + 1, text, strlen(text), 0644, err);
}

/* The engine reports the handler: the ready file, then the feature file that labels the
 * node. */
static int mark_ready(const struct inst_opts *o, struct orh_inst_manifest *m, const char *what,
		      struct orh_err *err)
{
	_cleanup_free_ char *label = orh_xasprintf(ORH_INSTALL_LABEL "=%s\n", o->req.handler);
	_cleanup_free_ char *text = orh_xasprintf("%s\n", what);
	const char *done = NULL;
	int r;

	printf("ready: %s\n", what);
	fflush(stdout); /* said before the probe can see it */
	r = write_ready(o->ready_file, text, err);
	if (r >= 0)
		r = orh_inst_put(o->root, m, 's', ORH_INSTALL_FEATURE_FILE, label, strlen(label),
				 0644, &done, err);
	if (r >= 0)
		printf("%s %s\n", done, ORH_INSTALL_FEATURE_FILE);
	fflush(stdout);
	return r;
}

/* Ask the engine until it reports the handler, then mark_ready. --once: for at most
 * --ready-timeout seconds; else until a signal, which sets *stopped. 0 or -errno. */
static int await_loaded(const struct inst_opts *o, struct orh_inst_manifest *m,
			const struct orh_inst_engine *e, sigset_t *set, bool *stopped,
			struct orh_err *err)
{
	_cleanup_free_ char *last = NULL;
	time_t end = time(NULL) + o->ready_timeout;
	struct timespec pause = { .tv_sec = 2 };
	int r, sig;

	for (;;) {
		_cleanup_free_ char *what = NULL;
		char *why = NULL;

		r = orh_inst_engine_loaded(o->root, e, o->req.handler, o->req.shim, &what, &why,
					   err);
		if (r != 0)
			return r < 0 ? r : mark_ready(o, m, what, err);
		if (!last || strcmp(last, why))
			printf("not ready: %s\n", why);
		fflush(stdout);
		free(last);
		last = why;
		if (o->once && time(NULL) >= end)
			return orh_fail(err, ETIMEDOUT, "not ready after %u s: %s",
					o->ready_timeout, last);
		sig = sigtimedwait(set, NULL, &pause);
		if (sig == SIGTERM || sig == SIGINT) {
			printf("signal %d: undoing the installation\n", sig);
			*stopped = true;
			return 0;
		}
	}
}

/* How the engine is configured, in m (saved with its next entry): what a later undo needs
 * where it runs without these arguments (install_finish.c). A pending undo is over. */
static int record_how(const struct inst_opts *o, struct orh_inst_manifest *m,
		      const struct orh_inst_engine *e, struct orh_err *err)
{
	const char *v[] = { o->req.shim, e->socket,
			    o->restart ? orh_inst_restart_names[o->restart] : NULL };
	char **to[] = { &m->shim, &m->socket, &m->restart };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(v); i++) {
		if (v[i] && (!*v[i] || v[i][strcspn(v[i], " \t\n")]))
			return orh_fail(err, EINVAL, "the %s '%s' has a blank or is empty: the "
					"manifest cannot record it", i ? "socket" : "shim", v[i]);
		free(*to[i]);
		*to[i] = v[i] ? orh_xstrdup(v[i]) : NULL;
	}
	m->pending = false;
	return 0;
}

static int install(struct inst_opts *o, struct orh_inst_manifest *m, struct orh_inst_engine *e,
		   const char *conf, sigset_t *set, bool *stopped, struct orh_err *err)
{
	struct orh_strv notes = { 0 };
	int r;

	/* the engine first: nothing is put on a host where none is found */
	if (m->engine)
		o->req.handler = m->handler;
	r = orh_inst_engine_find(o->root, m->engine ? m->engine : o->engine,
				 m->engine ? m->engine_config : o->req.engine_config, o->socket, e,
				 &notes, err);
	print_lines("note: ", &notes);
	if (r < 0)
		return r;
	printf("engine %s: %s\n", e->flavour, e->config);
	if (!m->engine) {
		m->engine = orh_xstrdup(e->flavour);
		m->handler = orh_xstrdup(o->req.handler);
		m->engine_config = orh_xstrdup(e->config);
	}
	r = record_how(o, m, e, err);
	if (r >= 0)
		r = put_files(o, m, conf, err);
	if (r >= 0)
		r = put_template(o, m, e, err);
	if (r >= 0)
		r = configure_engine(o, m, e, conf, NULL, err);
	if (r >= 0)
		r = await_loaded(o, m, e, set, stopped, err);
	return r;
}

/* Do containers still run through the handler of containerd's e (orh_inst_engine_users)?
 * Then the undo leaves the engine's config as it is, and says so: containerd 2.x finds a
 * pod's handler in its config to exec into its containers. --purge reverts it anyway,
 * warning that they lose their shim. */
static bool handler_in_use(const struct inst_opts *o, const struct orh_inst_manifest *m,
			   const struct orh_inst_engine *e)
{
	struct orh_strv users = { 0 };
	size_t n;

	if (e->engine != ORH_ENGINE_CONTAINERD)
		return false;
	n = orh_inst_engine_users(o->root, e, o->req.shim, &users);
	if (n && o->purge)
		printf("warning: %zu containers still run through the handler '%s' (%s): the "
		       "purge removes it and its shim, and their exec, stop and delete fail\n", n,
		       m->handler, users.v[0]);
	else if (n)
		printf("kept the handler '%s' in %s: %zu containers still run through it (%s); "
		       "containerd 2.x execs into them only while its config names the handler. "
		       "The runtime shim's delete of the last of them reverts it (install "
		       "--uninstall --after-pid, its output in %s%s), as does install --uninstall "
		       "once none runs\n", m->handler, e->config, n, users.v[0], o->root,
		       ORH_INSTALL_FINISH_LOG);
	for (size_t i = 1; n && i < users.n; i++)
		printf("still running through the handler: %s\n", users.v[i]);
	orh_strv_free(&users);
	fflush(stdout);
	return n && !o->purge;
}

/* Undo what m records of the engine: the ready file and the node's label first (no new pod
 * comes), then configure --undo and the engine restarted, unless containers still run
 * through the handler (handler_in_use: the engine's part is kept, the manifest still names
 * it). The files stay. */
static int undo(struct inst_opts *o, struct orh_inst_manifest *m, const char *conf,
		struct orh_err *err)
{
	struct orh_inst_engine e = { 0 };
	struct orh_strv done = { 0 }, notes = { 0 };
	bool kept = false;
	int r;

	if (!o->after_pid && unlink(o->ready_file) == 0)
		printf("removed %s\n", o->ready_file);
	r = orh_inst_undo_kind(o->root, m, 's', NULL, &done, err);
	print_lines("", &done);
	if (r >= 0 && m->engine) {
		o->req.undo = true;
		o->req.handler = m->handler;
		r = orh_inst_engine_find(o->root, m->engine, m->engine_config, o->socket, &e,
					 &notes, err);
		print_lines("note: ", &notes);
		kept = r >= 0 && handler_in_use(o, m, &e);
		if (r >= 0 && !kept)
			r = configure_engine(o, m, &e, conf, NULL, err);
		orh_inst_engine_free(&e);
	}
	if (r >= 0 && m->engine && !kept) {
		free(TAKE_PTR(m->engine));
		free(TAKE_PTR(m->handler));
		free(TAKE_PTR(m->engine_config));
		free(TAKE_PTR(m->shim));
		free(TAKE_PTR(m->socket));
		free(TAKE_PTR(m->restart));
		m->pending = false;
		r = orh_inst_save(o->root, m, err);
	} else if (r >= 0 && kept && !m->pending) {
		/* for the runtime shim's delete: the finish's log goes with the purge */
		m->pending = true;
		if (!orh_inst_has(m, ORH_INSTALL_FINISH_LOG))
			orh_inst_add_file(m, ORH_INSTALL_FINISH_LOG);
		r = orh_inst_save(o->root, m, err);
	}
	if (r >= 0 && m->n && !o->purge)
		printf("kept the binary, the hooks.d files and the node config for the containers "
		       "that run through them (install --purge removes them)\n");
	return r;
}

static int purge(const struct inst_opts *o, struct orh_inst_manifest *m, struct orh_err *err)
{
	struct orh_strv done = { 0 };
	int r = orh_inst_remove_all(o->root, m, &done, err);

	print_lines("", &done);
	return r;
}

static int probe(const struct inst_opts *o)
{
	char buf[4096] = "";

	if (orh_read_file_at(AT_FDCWD, o->ready_file, buf, sizeof(buf)) < 0) {
		fprintf(stderr, "oci-rdma-hook: install: not ready (no %s)\n", o->ready_file);
		return ORH_EXIT_FAIL;
	}
	fputs(buf, stdout);
	return ORH_EXIT_OK;
}

static void on_signal(int sig)
{
}

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* configure's check for the engine: drifted gets the files that are not as configure would
 * leave them, dirs the directories to watch. 0 or -errno. */
static int check_node(const struct inst_opts *o, const struct orh_inst_engine *e,
		      const char *conf, struct orh_strv *drifted, struct orh_strv *dirs,
		      struct orh_err *err)
{
	struct orh_configure_req req = o->req;
	struct orh_cfg_files files = { 0 };
	struct orh_strv notes = { 0 };
	int r;

	req.engine = e->engine;
	req.engine_config = e->config;
	r = orh_configure_check_under(o->root, &req, conf, &files, &notes, err);
	if (r >= 0)
		orh_inst_drift(&files, drifted);
	orh_inst_watch_dirs(&files, e->config, dirs);
	orh_cfg_files_free(&files);
	orh_strv_free(&notes);
	return r;
}

/* The ready file removed (the readinessProbe fails) with a line saying why. */
static void mark_not_ready(const struct inst_opts *o, bool *ready, const char *why)
{
	if (*ready)
		unlink(o->ready_file);
	printf("not ready: %s\n", why);
	*ready = false;
}

struct rec {
	struct orh_inst_watch w;
	struct orh_inst_pace pace;
	struct orh_strv seen; /* the entries changed since the last check */
	long long due;        /* when the next check runs (mono_ms) */
	bool ready, limited;
};

/* One check, and where the node drifted, a re-assert (configure, the engine restarted as
 * at the start, then ready once it reports the handler), unless the pace puts it off. */
static int check_once(struct inst_opts *o, struct orh_inst_manifest *m,
		      struct orh_inst_engine *e, const char *conf, struct rec *c, sigset_t *set,
		      bool *stopped, struct orh_err *err)
{
	struct orh_strv drifted = { 0 }, dirs = { 0 };
	_cleanup_free_ char *list = NULL, *seen = NULL, *what = NULL, *why = NULL;
	long long now = mono_ms();
	unsigned wait;
	int r;

	c->due = now + ORH_INST_RESYNC_S * 1000LL;
	r = check_node(o, e, conf, &drifted, &dirs, err);
	if (orh_inst_watch_set(&c->w, o->root, &dirs, err) < 0 && r >= 0)
		r = -1;
	orh_strv_free(&dirs);
	list = join(&drifted);
	seen = c->seen.n ? join(&c->seen) : orh_xstrdup("none seen: the periodic check");
	if (r < 0) {
		why = orh_xasprintf("the check failed: %s", err->msg);
		mark_not_ready(o, &c->ready, why);
	} else if (drifted.n && c->ready) {
		why = orh_xasprintf("drifted: %s not as configure would leave them (changed: %s)",
				    list, seen);
		mark_not_ready(o, &c->ready, why);
	}
	orh_strv_free(&drifted);
	orh_strv_free(&c->seen);
	fflush(stdout);
	if (r < 0 || (!*list && c->ready))
		return 0;
	if (*list && (wait = orh_inst_pace_wait(&c->pace, now / 1000))) {
		if (!c->limited)
			printf("rate-limited: the engine's config changed again %lld s after the "
			       "last re-assert; the next in %u s (re-asserts at least %u s apart, "
			       "the gap doubled while it keeps changing)\n",
			       now / 1000 - c->pace.last, wait, c->pace.gap);
		fflush(stdout);
		c->limited = true;
		c->due = now + wait * 1000LL;
		return 0;
	}
	c->limited = false;
	if (*list) {
		orh_inst_pace_done(&c->pace, now / 1000);
		r = configure_engine(o, m, e, conf, &what, err);
		if (r < 0) {
			printf("re-assert failed: %s\n", err->msg);
			fflush(stdout);
			return 0;
		}
		printf("re-asserted: %s (drifted: %s)\n", *what ? what : "nothing left to write",
		       list);
		fflush(stdout); /* said before the ready file is back */
	}
	r = await_loaded(o, m, e, set, stopped, err);
	c->ready = r >= 0 && !*stopped;
	if (r < 0)
		printf("not ready: %s\n", err->msg);
	fflush(stdout);
	/* its own writes and the engine's restart: looked at again in a second */
	c->due = mono_ms() + 1000;
	return 0;
}

/* Until SIGTERM or SIGINT: the engine's config directories watched, and configure's check
 * run a second after a change (and every ORH_INST_RESYNC_S s); a drift is re-asserted. */
static int reconcile(struct inst_opts *o, struct orh_inst_manifest *m, struct orh_inst_engine *e,
		     const char *conf, sigset_t *set, struct orh_err *err)
{
	_cleanup_close_ int sfd = signalfd(-1, set, SFD_CLOEXEC | SFD_NONBLOCK);
	struct rec c = { .w = { .fd = -1 }, .ready = true, .due = mono_ms() };
	bool stopped = false;
	int r = 0;

	if (sfd < 0)
		return orh_fail_errno(err, errno, "signalfd");
	printf("installed; waiting for SIGTERM to undo it\n");
	printf("watching the engine's config (%s, its imports and drop-ins), checked again a "
	       "second after a change and every %d s\n", e->config, ORH_INST_RESYNC_S);
	fflush(stdout);
	while (r >= 0 && !stopped) {
		struct pollfd pfd[2] = { { .fd = sfd, .events = POLLIN },
					 { .fd = c.w.fd, .events = POLLIN } };
		long long now = mono_ms();
		struct signalfd_siginfo si;

		if (poll(pfd, 2, c.due > now ? (int)(c.due - now) : 0) < 0 && errno != EINTR)
			return orh_fail_errno(err, errno, "poll");
		if ((pfd[0].revents & POLLIN) && read(sfd, &si, sizeof(si)) == sizeof(si) &&
		    (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)) {
			printf("signal %u: undoing the installation\n", si.ssi_signo);
			break;
		}
		if (pfd[1].revents & POLLIN) {
			bool seen_before = c.seen.n > 0;

			if (orh_inst_watch_read(&c.w, &c.seen))
				orh_strv_push(&c.seen, orh_xstrdup("(inotify's queue overflowed)"));
			/* a second for the writer to finish, counted from its first change */
			if (!seen_before && c.due > mono_ms() + 1000 && !c.limited)
				c.due = mono_ms() + 1000;
		}
		if (mono_ms() >= c.due)
			r = check_once(o, m, e, conf, &c, set, &stopped, err);
	}
	orh_inst_watch_free(&c.w);
	orh_strv_free(&c.seen);
	return r;
}

/* The shim and, for an undo, the socket and the restart mode the manifest recorded, where
 * the arguments name none. */
static void how_recorded(struct inst_opts *o, const struct orh_inst_manifest *m)
{
	bool undo = o->uninstall || o->purge;

	if (!o->req.shim)
		o->req.shim = undo && m->shim ? m->shim : ORH_BINDIR "/oci-rdma-runtime";
	if (undo && !o->socket)
		o->socket = m->socket;
	if (undo && !o->restart && m->restart && orh_inst_parse_restart(m->restart, &o->restart))
		printf("note: the manifest's restart mode '%s' is none of signal, systemd and "
		       "none: the engine's own is used\n", m->restart);
}

/* --uninstall --after-pid (install_finish.c): once that process exited, the undo an
 * installer kept, unless another install runs on the root or none is pending. */
static int finish_after(struct inst_opts *o, const char *conf)
{
	_cleanup_close_ int lock = -1;
	struct orh_inst_manifest m = { 0 };
	struct orh_err err = { 0 };
	char when[64] = "";
	time_t now = time(NULL);
	int r;

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	printf("%s: the undo kept for running containers, once pid %ld exits\n", when,
	       o->after_pid);
	fflush(stdout);
	if (!orh_inst_wait_exit(o->after_pid, INST_AFTER_PID_WAIT_S)) {
		printf("pid %ld still runs after %d s: left pending, for a later delete\n",
		       o->after_pid, INST_AFTER_PID_WAIT_S);
		return ORH_EXIT_OK;
	}
	/* the engine removes the pod after its shim exits: a restart then would fail that
	 * removal (its client retries, but an engine's CLI does not) */
	sleep(INST_AFTER_PID_SETTLE_S);
	r = orh_inst_lock(o->root, false, &lock, &err);
	if (r == -EWOULDBLOCK) {
		printf("another install runs on '%s/': the undo is left to it\n", o->root);
		return ORH_EXIT_OK;
	}
	if (r >= 0)
		r = orh_inst_load(o->root, &m, &err);
	if (r >= 0 && !(m.engine && m.pending))
		printf("no undo pending under '%s/': nothing to finish\n", o->root);
	else if (r >= 0) {
		how_recorded(o, &m);
		r = undo(o, &m, conf, &err);
	}
	fflush(stdout);
	if (r < 0)
		fprintf(stderr, "oci-rdma-hook: install: %s\n", err.msg);
	orh_inst_free(&m);
	return r < 0 ? ORH_EXIT_FAIL : ORH_EXIT_OK;
}

int orh_cmd_install(struct orh_ctx *ctx, int argc, char **argv)
{
	struct inst_opts o = { .from = "", .ready_file = INST_READY_FILE,
			       .ready_timeout = INST_READY_TIMEOUT, .req = { .handler = "rdma" } };
	struct orh_inst_manifest m = { 0 };
	struct orh_inst_engine e = { 0 };
	struct orh_err err = { 0 };
	_cleanup_close_ int lock = -1;
	bool stopped = false;
	sigset_t set;
	int r;

	r = orh_inst_parse_args(argc, argv, &o);
	if (r != ORH_EXIT_OK)
		return r < 0 ? ORH_EXIT_OK : r; /* -1: --help */
	if (o.probe)
		return probe(&o);
	/* a SIGTERM during the install is taken after it, then undoes it */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* a handler, too: as a container's PID 1 it gets no signal left at SIG_DFL */
	sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_signal }, NULL);
	sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_signal }, NULL);
	if (o.after_pid)
		return finish_after(&o, ctx->config_path);
	/* one an earlier container of this pod left: not ready until the engine says so */
	unlink(o.ready_file);
	r = orh_inst_lock(o.root, true, &lock, &err);
	if (r >= 0)
		r = orh_inst_load(o.root, &m, &err);
	if (r >= 0)
		how_recorded(&o, &m);
	if (r >= 0 && !o.uninstall && !o.purge)
		r = install(&o, &m, &e, ctx->config_path, &set, &stopped, &err);
	if (r >= 0 && !o.once && !o.uninstall && !o.purge && !stopped)
		r = reconcile(&o, &m, &e, ctx->config_path, &set, &err);
	if (r >= 0 && !o.once)
		r = undo(&o, &m, ctx->config_path, &err);
	if (r >= 0 && o.purge)
		r = purge(&o, &m, &err);
	fflush(stdout);
	if (r < 0)
		fprintf(stderr, "oci-rdma-hook: install: %s\n", err.msg);
	orh_inst_engine_free(&e);
	orh_inst_free(&m);
	return r < 0 ? ORH_EXIT_FAIL : ORH_EXIT_OK;
}
