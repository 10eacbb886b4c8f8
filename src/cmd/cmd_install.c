/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook install --root DIR [--engine E] [--engine-config PATH] [--handler NAME]
 *     [--shim PATH] [--runtime PATH] [--restart-mode signal|systemd|none] [--socket PATH]
 *     [--from DIR] [--once | --uninstall]
 *
 * The installer image's entrypoint (include/orh/install.h): puts the binary, the
 * oci-rdma-runtime link, the node config (only where none is) and the hooks.d files at
 * their installed paths under DIR, registers the hook with the engine found there
 * (configure's plan, every file read and written under DIR), restarts or signals that
 * engine, marks the node with a node-feature-discovery feature file, then waits. SIGTERM
 * or SIGINT undo it all: configure --undo, the engine restarted again, and every path the
 * manifest lists removed, an edited node config kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh-config.h"
#include "orh/install.h"

#define INST_SOURCE_MAX_BYTES (256 * 1024 * 1024)

static const char usage_text[] =
	"usage: oci-rdma-hook install --root DIR [--engine containerd|crio|docker|podman]\n"
	"           [--engine-config PATH] [--handler NAME] [--shim PATH] [--runtime PATH]\n"
	"           [--restart-mode signal|systemd|none] [--socket PATH] [--from DIR]\n"
	"           [--once | --uninstall]\n";

enum restart_mode { RESTART_DEFAULT, RESTART_SIGNAL, RESTART_SYSTEMD, RESTART_NONE };

struct inst_opts {
	const char *root;    /* "" for / */
	const char *from;    /* where the image holds the files: "" for / */
	const char *engine;  /* NULL: found under root */
	const char *socket;  /* NULL: the engine's */
	enum restart_mode restart;
	struct orh_configure_req req;
	bool once, uninstall;
};

/* What each engine is found by (its config, or its socket), its socket and its unit. The
 * sockets are named under /run: /var/run is often an absolute link to /run, which under
 * the root would lead out of it. */
static const struct {
	const char *name, *config, *socket, *unit;
	enum restart_mode restart;
} engines[] = {
	{ "containerd", "/etc/containerd/config.toml", "/run/containerd/containerd.sock",
	  "containerd", RESTART_SIGNAL },
	{ "crio", "/etc/crio/crio.conf", "/run/crio/crio.sock", "crio", RESTART_SYSTEMD },
	{ "docker", "/etc/docker/daemon.json", "/run/docker.sock", "docker", RESTART_SIGNAL },
	{ "podman", "/etc/containers/containers.conf", NULL, NULL, RESTART_NONE },
};

static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);

	if (!strcmp(argv[*i], name) && *i + 1 < argc)
		return argv[++*i];
	if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=')
		return argv[*i] + n + 1;
	return NULL;
}

static const char *parse_restart(const char *v, enum restart_mode *m)
{
	static const char *const names[] = { [RESTART_SIGNAL] = "signal",
					     [RESTART_SYSTEMD] = "systemd", [RESTART_NONE] = "none" };

	for (size_t i = RESTART_SIGNAL; i < ORH_ARRAY_SIZE(names); i++)
		if (!strcmp(v, names[i])) {
			*m = (enum restart_mode)i;
			return NULL;
		}
	return "--restart-mode is signal, systemd or none";
}

/* One option into o; NULL when argv[*i] is none of install's. */
static const char *parse_one(int argc, char **argv, int *i, struct inst_opts *o,
			     const char **problem)
{
	const char *v;

	if ((v = opt_value(argc, argv, i, "--root")))
		o->root = strcmp(v, "/") ? v : "";
	else if ((v = opt_value(argc, argv, i, "--from")))
		o->from = strcmp(v, "/") ? v : "";
	else if ((v = opt_value(argc, argv, i, "--engine")))
		o->engine = v;
	else if ((v = opt_value(argc, argv, i, "--engine-config")))
		o->req.engine_config = v;
	else if ((v = opt_value(argc, argv, i, "--handler")))
		o->req.handler = v;
	else if ((v = opt_value(argc, argv, i, "--shim")))
		o->req.shim = v;
	else if ((v = opt_value(argc, argv, i, "--runtime")))
		o->req.runtime = v;
	else if ((v = opt_value(argc, argv, i, "--socket")))
		o->socket = v;
	else if ((v = opt_value(argc, argv, i, "--restart-mode")))
		*problem = parse_restart(v, &o->restart);
	else if (!strcmp(argv[*i], "--once"))
		o->once = true, v = argv[*i];
	else if (!strcmp(argv[*i], "--uninstall"))
		o->uninstall = true, v = argv[*i];
	return v;
}

/* ORH_EXIT_OK, -1 after --help, or ORH_EXIT_USAGE (after saying why). */
static int parse_args(int argc, char **argv, struct inst_opts *o)
{
	const char *problem = NULL;

	for (int i = 1; i < argc && !problem; i++) {
		if (!strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return -1;
		}
		if (!parse_one(argc, argv, &i, o, &problem)) {
			fprintf(stderr, "oci-rdma-hook: install: unknown or incomplete argument "
				"'%s'\n%s", argv[i], usage_text);
			return ORH_EXIT_USAGE;
		}
	}
	if (!problem && !o->root)
		problem = "--root is required";
	else if (!problem && (*o->root != '/' && *o->root))
		problem = "--root is not an absolute path";
	else if (!problem && *o->from && *o->from != '/')
		problem = "--from is not an absolute path";
	else if (!problem && o->once && o->uninstall)
		problem = "--once and --uninstall exclude each other";
	else if (!problem && o->engine && orh_engine_from_name(o->engine, &o->req.engine) < 0)
		problem = "unknown engine";
	if (problem) {
		fprintf(stderr, "oci-rdma-hook: install: %s\n%s", problem, usage_text);
		return ORH_EXIT_USAGE;
	}
	return ORH_EXIT_OK;
}

static bool exists_under(const char *root, const char *path)
{
	_cleanup_free_ char *p = orh_xasprintf("%s%s", root, path);
	struct stat st;

	return lstat(p, &st) == 0;
}

/* The engine named, else the first whose config or socket is under root. */
static int find_engine(struct inst_opts *o, struct orh_err *err)
{
	for (size_t i = 0; !o->engine && i < ORH_ARRAY_SIZE(engines); i++)
		if (exists_under(o->root, engines[i].config) ||
		    (engines[i].socket && exists_under(o->root, engines[i].socket)))
			o->engine = engines[i].name;
	if (!o->engine)
		return orh_fail(err, ENOENT, "no engine under '%s/': none of containerd's, "
				"CRI-O's, docker's or podman's configs or sockets (give --engine)",
				o->root);
	return orh_engine_from_name(o->engine, &o->req.engine);
}

/* An install over an earlier one: the engine and handler it configured. */
static int same_engine(struct inst_opts *o, const struct orh_inst_manifest *m,
		       struct orh_err *err)
{
	o->req.handler = m->handler;
	o->req.engine_config = m->engine_config;
	if (orh_engine_from_name(m->engine, &o->req.engine) < 0)
		return orh_fail(err, EINVAL, "%s: unknown engine '%s'", ORH_INSTALL_MANIFEST,
				m->engine);
	return 0;
}

/* The engine's pid from its socket's peer credentials, then SIGHUP. An engine that does
 * not run (no socket, nobody listening) reads its config when it starts. */
static int signal_engine(const char *root, const char *sock, struct orh_strv *notes,
			 struct orh_err *err)
{
	_cleanup_free_ char *p = orh_xasprintf("%s%s", root, sock);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);

	if (fd < 0 || orh_strlcpy(sa.sun_path, p, sizeof(sa.sun_path)) < 0)
		return orh_fail(err, fd < 0 ? errno : ENAMETOOLONG, "socket '%s'", p);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno != ENOENT && errno != ECONNREFUSED)
			return orh_fail(err, errno, "connecting to '%s': %s", p, strerror(errno));
		orh_strv_pushf(notes, "no engine listens on %s: it reads its config when it "
			       "starts", sock);
		return 0;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return orh_fail(err, errno, "SO_PEERCRED of '%s': %s", p, strerror(errno));
	if (cred.pid <= 0)
		return orh_fail(err, ESRCH, "the process behind '%s' is outside this PID "
				"namespace (hostPID)", p);
	if (kill(cred.pid, SIGHUP) < 0)
		return orh_fail(err, errno, "SIGHUP to pid %d: %s", (int)cred.pid, strerror(errno));
	orh_strv_pushf(notes, "sent SIGHUP to pid %d (behind %s)", (int)cred.pid, sock);
	return 0;
}

/* chroot ROOT systemctl restart UNIT */
static int systemd_restart(const char *root, const char *unit, struct orh_strv *notes,
			   struct orh_err *err)
{
	int status = 0;
	pid_t pid = fork();

	if (pid < 0)
		return orh_fail(err, errno, "fork: %s", strerror(errno));
	if (pid == 0) {
		char *argv[] = { "systemctl", "restart", (char *)unit, NULL };

		if ((*root && chroot(root) < 0) || chdir("/") < 0)
			_exit(126);
		execv("/usr/bin/systemctl", argv);
		execv("/bin/systemctl", argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return orh_fail(err, ECHILD, "systemctl restart %s under '%s/': status %d", unit,
				root, status);
	orh_strv_pushf(notes, "restarted %s (systemctl)", unit);
	return 0;
}

static int restart_engine(const struct inst_opts *o, struct orh_strv *notes, struct orh_err *err)
{
	size_t e = o->req.engine;
	enum restart_mode m = o->restart ? o->restart : engines[e].restart;
	const char *sock = o->socket ? o->socket : engines[e].socket;

	if (m == RESTART_SIGNAL && !sock)
		return orh_fail(err, EINVAL, "%s has no socket to find it by", engines[e].name);
	if (m == RESTART_SIGNAL)
		return signal_engine(o->root, sock, notes, err);
	if (m == RESTART_SYSTEMD && engines[e].unit)
		return systemd_restart(o->root, engines[e].unit, notes, err);
	return 0;
}

static int read_source(const char *path, char **out, size_t *len, struct orh_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	int r;

	if (fd < 0)
		return orh_fail(err, errno, "opening '%s': %s", path, strerror(errno));
	r = orh_read_fd_all(fd, INST_SOURCE_MAX_BYTES, out, len);
	return r < 0 ? orh_fail(err, r, "reading '%s': %s", path, strerror(-r)) : 0;
}

/* One file of the image (the binary: this process's own) put at its path under root. */
static int put_file(const struct inst_opts *o, struct orh_inst_manifest *m, char kind,
		    const char *path, unsigned mode, struct orh_err *err)
{
	_cleanup_free_ char *src = kind == 'b' ? orh_xstrdup("/proc/self/exe")
					      : orh_xasprintf("%s%s", o->from, path);
	_cleanup_free_ char *data = NULL;
	const char *what = NULL;
	size_t len = 0;
	int r;

	r = read_source(src, &data, &len, err);
	if (r >= 0)
		r = orh_inst_put(o->root, m, kind == 'b' ? 'f' : kind, path, data, len, mode,
				 &what, err);
	if (r >= 0)
		printf("%s %s\n", what, path);
	return r;
}

static int put_files(const struct inst_opts *o, struct orh_inst_manifest *m, const char *conf,
		     struct orh_err *err)
{
	const char *what = NULL;
	int r;

	r = put_file(o, m, 'b', ORH_BINDIR "/oci-rdma-hook", 0755, err);
	if (r >= 0)
		r = orh_inst_link(o->root, m, ORH_BINDIR "/oci-rdma-runtime", "oci-rdma-hook",
				  &what, err);
	if (r >= 0)
		printf("%s %s\n", what, ORH_BINDIR "/oci-rdma-runtime");
	if (r >= 0)
		r = put_file(o, m, 'c', conf, 0644, err);
	if (r >= 0)
		r = put_file(o, m, 'f', ORH_CONTAINERS_HOOKS_DIR "/oci-rdma-hook.json", 0644, err);
	if (r >= 0)
		r = put_file(o, m, 'f', ORH_CONTAINERS_HOOKS_DIR "/oci-rdma-hook-poststop.json",
			     0644, err);
	if (r >= 0)
		r = put_file(o, m, 'f', ORH_OWN_HOOKS_DIR "/oci-rdma-hook-precreate.json", 0644,
			     err);
	return r;
}

static void print_lines(const char *prefix, struct orh_strv *lines)
{
	for (size_t i = 0; i < lines->n; i++)
		printf("%s%s\n", prefix, lines->v[i]);
	fflush(stdout);
	orh_strv_free(lines);
}

/* configure for the engine, the engine restarted where a file changed, the node marked. */
static int configure_engine(const struct inst_opts *o, struct orh_inst_manifest *m,
			    const char *conf, struct orh_err *err)
{
	_cleanup_free_ char *label = orh_xasprintf(ORH_INSTALL_LABEL "=%s\n",
						  o->req.handler);
	struct orh_strv changed = { 0 }, notes = { 0 };
	const char *what = NULL;
	int r;

	if (!m->engine) {
		m->engine = orh_xstrdup(orh_engine_name(o->req.engine));
		m->handler = orh_xstrdup(o->req.handler);
		m->engine_config = o->req.engine_config ? orh_xstrdup(o->req.engine_config) : NULL;
	}
	r = orh_inst_save(o->root, m, err);
	if (r >= 0)
		r = orh_configure_under(o->root, &o->req, conf, &changed, &notes, err);
	if (r >= 0 && changed.n)
		r = restart_engine(o, &notes, err);
	print_lines("", &changed);
	print_lines("note: ", &notes);
	if (r >= 0)
		r = orh_inst_put(o->root, m, 'f', ORH_INSTALL_FEATURE_FILE, label, strlen(label),
				 0644, &what, err);
	if (r >= 0)
		printf("%s %s\n", what, ORH_INSTALL_FEATURE_FILE);
	return r;
}

/* Undo what m records: configure --undo, the engine restarted, the files removed. */
static int undo(struct inst_opts *o, struct orh_inst_manifest *m, const char *conf,
		struct orh_err *err)
{
	_cleanup_free_ char *src = orh_xasprintf("%s%s", o->from, conf);
	_cleanup_free_ char *dflt = NULL;
	struct orh_strv changed = { 0 }, notes = { 0 };
	struct orh_err noconf = { 0 };
	size_t len = 0;
	int r = 0;

	if (m->engine) {
		o->req.undo = true;
		o->req.handler = m->handler;
		o->req.engine_config = m->engine_config;
		r = orh_engine_from_name(m->engine, &o->req.engine);
		if (r < 0)
			return orh_fail(err, EINVAL, "%s: unknown engine '%s'",
					ORH_INSTALL_MANIFEST, m->engine);
		r = orh_configure_under(o->root, &o->req, conf, &changed, &notes, err);
		if (r >= 0 && changed.n)
			r = restart_engine(o, &notes, err);
		print_lines("", &changed);
		print_lines("note: ", &notes);
	}
	/* without the image's config, every node config counts as edited and stays */
	if (r >= 0 && read_source(src, &dflt, &len, &noconf) < 0)
		dflt = NULL, len = 0;
	if (r >= 0)
		r = orh_inst_remove_all(o->root, m, dflt ? dflt : "", dflt ? len : 1, &changed,
					err);
	print_lines("", &changed);
	return r;
}

static void on_signal(int sig)
{
}

static int wait_for_stop(sigset_t *set)
{
	int sig = 0;

	printf("installed; waiting for SIGTERM to undo it\n");
	fflush(stdout);
	while (sigwait(set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
		;
	printf("signal %d: undoing the installation\n", sig);
	return sig;
}

int orh_cmd_install(struct orh_ctx *ctx, int argc, char **argv)
{
	struct inst_opts o = { .from = "", .req = { .handler = "rdma",
						    .shim = ORH_BINDIR "/oci-rdma-runtime" } };
	struct orh_inst_manifest m = { 0 };
	struct orh_err err = { 0 };
	sigset_t set;
	int r;

	r = parse_args(argc, argv, &o);
	if (r != ORH_EXIT_OK)
		return r < 0 ? ORH_EXIT_OK : r; /* -1: --help */
	/* a SIGTERM during the install is taken after it, then undoes it */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* a handler, too: as a container's PID 1 it gets no signal left at SIG_DFL */
	sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_signal }, NULL);
	sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_signal }, NULL);
	r = orh_inst_load(o.root, &m, &err);
	if (r >= 0 && !o.uninstall) {
		/* the engine first: nothing is put on a host where none is found */
		r = m.engine ? same_engine(&o, &m, &err) : find_engine(&o, &err);
		if (r >= 0)
			r = put_files(&o, &m, ctx->config_path, &err);
		if (r >= 0)
			r = configure_engine(&o, &m, ctx->config_path, &err);
	}
	if (r >= 0 && !o.once && !o.uninstall)
		wait_for_stop(&set);
	if (r >= 0 && !o.once)
		r = undo(&o, &m, ctx->config_path, &err);
	if (r < 0)
		fprintf(stderr, "oci-rdma-hook: install: %s\n", err.msg);
	orh_inst_free(&m);
	return r < 0 ? ORH_EXIT_FAIL : ORH_EXIT_OK;
}
