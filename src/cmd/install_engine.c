/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine `install` configures (include/orh/cmd/install.h): which one a host root holds and
 * where its files are, how it is restarted, and whether it has loaded the handler, as the
 * engine itself reports it.
 *
 * k3s and rke2 render their containerd's config.toml from a template at every start
 * (k3s pkg/agent/containerd/config.go: config-v3.toml.tmpl, else config.toml.tmpl, else
 * its built-in version 3 template), so the file to edit is the template, never the
 * rendered file. Their paths were read in their sources, not run here.
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

#include "orh/cmd/install.h"

#define ENGINE_OUTPUT_MAX_BYTES (8 * 1024 * 1024)
#define ENGINE_ASK_TIMEOUT_MS 60000
#define RENDERED_MAX_BYTES (1024 * 1024)

static const char *const containerd_bins[] = {
	"/usr/bin/containerd", "/usr/local/bin/containerd", "/usr/sbin/containerd",
	"/usr/local/sbin/containerd", NULL,
};
static const char *const k3s_bins[] = { "/var/lib/rancher/k3s/data/current/bin/containerd", NULL };
static const char *const rke2_bins[] = { "/var/lib/rancher/rke2/bin/containerd", NULL };
static const char *const crio_bins[] = { "/usr/bin/crio", "/usr/local/bin/crio", NULL };
static const char *const docker_bins[] = { "/usr/bin/docker", "/usr/local/bin/docker", NULL };

/* The sockets are named under /run: /var/run is often an absolute link to /run, which
 * under the root would lead out of it. dir: k3s's and rke2's directory of config.toml and
 * its templates. */
static const struct flavour {
	const char *name, *dir, *socket, *units; /* its config: dir's, else configure's default */
	enum orh_engine engine;
	enum orh_inst_restart restart;
	const char *const *bins;
} flavours[] = {
	{ "rke2", "/var/lib/rancher/rke2/agent/etc/containerd", "/run/k3s/containerd/containerd.sock",
	  "rke2-server rke2-agent", ORH_ENGINE_CONTAINERD,
	  ORH_RESTART_SYSTEMD, rke2_bins },
	{ "k3s", "/var/lib/rancher/k3s/agent/etc/containerd", "/run/k3s/containerd/containerd.sock",
	  "k3s k3s-agent", ORH_ENGINE_CONTAINERD,
	  ORH_RESTART_SYSTEMD, k3s_bins },
	{ "containerd", NULL, "/run/containerd/containerd.sock",
	  "containerd", ORH_ENGINE_CONTAINERD, ORH_RESTART_SIGNAL, containerd_bins },
	{ "crio", NULL, "/run/crio/crio.sock", "crio", ORH_ENGINE_CRIO,
	  ORH_RESTART_SYSTEMD, crio_bins },
	{ "docker", NULL, "/run/docker.sock", "docker",
	  ORH_ENGINE_DOCKER, ORH_RESTART_SIGNAL, docker_bins },
	{ "podman", NULL, NULL, NULL, ORH_ENGINE_PODMAN,
	  ORH_RESTART_NONE, NULL },
};

static const char *env_value(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static bool exists_under(const char *root, const char *path)
{
	_cleanup_free_ char *p = orh_xasprintf("%s%s", root, path);
	struct stat st;

	return lstat(p, &st) == 0;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && !strcmp(s + n - t, tail);
}

/* Is the version of the rendered config.toml under root 3? (k3s writes `version = 3` on
 * its first line; a line of that text anywhere counts.) */
static bool rendered_v3(const char *root, const char *rendered)
{
	_cleanup_free_ char *p = orh_xasprintf("%s%s", root, rendered);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *text = NULL;
	char *save = NULL;
	size_t len = 0;

	if (fd < 0 || orh_read_fd_all(fd, RENDERED_MAX_BYTES, &text, &len) < 0)
		return true; /* none yet: k3s's own default is version 3 */
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *v = orh_strstrip(l);

		if (orh_startswith(v, "version") && strchr(v, '='))
			return !strcmp(orh_strstrip(strchr(v, '=') + 1), "3");
	}
	return false;
}

/* k3s's or rke2's template: the one there (v3 first, as k3s reads them), else the one for
 * the version the rendered config has. */
static char *template_of(const char *root, const char *dir)
{
	_cleanup_free_ char *v3 = orh_xasprintf("%s/config-v3.toml.tmpl", dir);
	_cleanup_free_ char *v2 = orh_xasprintf("%s/config.toml.tmpl", dir);
	_cleanup_free_ char *rendered = orh_xasprintf("%s/config.toml", dir);

	if (exists_under(root, v3))
		return TAKE_PTR(v3);
	if (exists_under(root, v2))
		return TAKE_PTR(v2);
	return rendered_v3(root, rendered) ? TAKE_PTR(v3) : TAKE_PTR(v2);
}

static const struct flavour *flavour_named(const char *name)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(flavours); i++)
		if (!strcmp(flavours[i].name, name))
			return &flavours[i];
	return NULL;
}

bool orh_inst_engine_known(const char *name)
{
	return flavour_named(name) != NULL;
}

/* The flavour a containerd config path belongs to: k3s's or rke2's directory, else plain. */
static const struct flavour *flavour_of_path(const char *path)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(flavours); i++) {
		size_t n = flavours[i].dir ? strlen(flavours[i].dir) : 0;

		if (n && !strncmp(path, flavours[i].dir, n) && path[n] == '/')
			return &flavours[i];
	}
	return flavour_named("containerd");
}

/* The first flavour whose files or socket are under root. */
static const struct flavour *flavour_found(const char *root)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(flavours); i++) {
		const struct flavour *f = &flavours[i];
		_cleanup_free_ char *rendered =
			f->dir ? orh_xasprintf("%s/config.toml", f->dir) : NULL;

		if ((f->dir && exists_under(root, f->dir) && exists_under(root, rendered)) ||
		    (!f->dir && exists_under(root, orh_engine_default_config(f->engine))) ||
		    (f->socket && !f->dir && exists_under(root, f->socket)))
			return f;
	}
	return NULL;
}

/* e's config and rendered file: a template for k3s and rke2 (a rendered config.toml given
 * is taken as its directory's), the config given, else the flavour's. */
static void set_config(const char *root, const struct flavour *f, const char *config,
		       struct orh_inst_engine *e, struct orh_strv *notes)
{
	_cleanup_free_ char *dir = NULL;

	if (config && f->dir && !ends_with(config, ".tmpl")) {
		orh_strv_pushf(notes, "%s is rendered by %s at every start: its template is "
			       "edited instead", config, f->name);
		config = NULL;
	}
	if (config)
		e->config = orh_xstrdup(config);
	else
		e->config = f->dir ? template_of(root, f->dir)
				   : orh_xstrdup(orh_engine_default_config(f->engine));
	if (!ends_with(e->config, ".tmpl")) {
		e->rendered = orh_xstrdup(e->config);
		return;
	}
	dir = orh_xstrdup(e->config);
	*strrchr(dir, '/') = '\0';
	e->rendered = orh_xasprintf("%s/config.toml", dir);
}

int orh_inst_engine_find(const char *root, const char *flavour, const char *config,
			 const char *socket, struct orh_inst_engine *e, struct orh_strv *notes,
			 struct orh_err *err)
{
	const char *env_config = env_value("CONTAINERD_CONFIG");
	const char *env_socket = env_value("CONTAINERD_SOCKET");
	const struct flavour *f = NULL;

	memset(e, 0, sizeof(*e));
	if (flavour && !(f = flavour_named(flavour)))
		return orh_fail(err, EINVAL, "unknown engine '%s'", flavour);
	if (!f && (config || env_config || env_socket))
		f = flavour_of_path(config ? config : env_config ? env_config : "");
	if (!f)
		f = flavour_found(root);
	if (!f)
		return orh_fail(err, ENOENT, "no engine under '%s/': none of rke2's, k3s's, "
				"containerd's, CRI-O's, docker's or podman's configs or sockets "
				"(give --engine)", root);
	if (f->engine == ORH_ENGINE_CONTAINERD && !config)
		config = env_config;
	if (f->engine == ORH_ENGINE_CONTAINERD && !socket)
		socket = env_socket;
	if (config && config[0] != '/')
		return orh_fail(err, EINVAL, "the engine config '%s' is not an absolute path",
				config);
	e->engine = f->engine;
	e->flavour = f->name;
	e->units = f->units;
	e->restart = f->restart;
	e->binaries = f->bins;
	e->socket = socket ? orh_xstrdup(socket) : f->socket ? orh_xstrdup(f->socket) : NULL;
	set_config(root, f, config, e, notes);
	return 0;
}

void orh_inst_engine_free(struct orh_inst_engine *e)
{
	free(e->config);
	free(e->rendered);
	free(e->socket);
	memset(e, 0, sizeof(*e));
}

/* The PID behind the socket under root: > 0, 0 where nobody listens, -errno. */
static int peer_pid(const char *root, const char *sock, struct orh_err *err)
{
	_cleanup_free_ char *p = orh_xasprintf("%s%s", root, sock);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);

	if (fd < 0 || orh_strlcpy(sa.sun_path, p, sizeof(sa.sun_path)) < 0)
		return orh_fail(err, fd < 0 ? errno : ENAMETOOLONG, "socket '%s'", p);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == ENOENT || errno == ECONNREFUSED)
			return 0;
		return orh_fail_errno(err, errno, "connecting to '%s'", p);
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return orh_fail_errno(err, errno, "SO_PEERCRED of '%s'", p);
	if (cred.pid <= 0)
		return orh_fail(err, ESRCH, "the process behind '%s' is outside this PID "
				"namespace (hostPID)", p);
	return cred.pid;
}

/* SIGHUP to the PID behind the socket. An engine that does not run (no socket, nobody
 * listening) reads its config when it starts. */
static int signal_engine(const char *root, struct orh_inst_engine *e, struct orh_strv *notes,
			 struct orh_err *err)
{
	int pid = peer_pid(root, e->socket, err);

	if (pid < 0)
		return pid;
	if (pid == 0) {
		orh_strv_pushf(notes, "no engine listens on %s: it reads its config when it "
			       "starts", e->socket);
		return 0;
	}
	if (kill(pid, SIGHUP) < 0)
		return orh_fail_errno(err, errno, "SIGHUP to pid %d", pid);
	e->signalled = pid;
	e->listened = true;
	orh_strv_pushf(notes, "sent SIGHUP to pid %d (behind %s)", pid, e->socket);
	return 0;
}

/* The child's side of run_under: root as /, SIGTERM and SIGINT unblocked, stdout to out,
 * then the first of the argv0 candidates that can be executed. */
static void child_exec(const char *root, int out, const char *const *bins, char **argv)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(out, STDOUT_FILENO) < 0 || (*root && chroot(root) < 0) || chdir("/") < 0)
		_exit(126);
	alarm(ENGINE_ASK_TIMEOUT_MS / 1000);
	for (; *bins; bins++) {
		argv[0] = (char *)*bins;
		execv(*bins, argv);
	}
	_exit(127);
}

/* argv run chrooted into root (argv[0] the first of bins there), its stdout in *out. The
 * exit status, or -errno. */
static int run_under(const char *root, const char *const *bins, char **argv, char **out,
		     struct orh_err *err)
{
	_cleanup_close_ int rd = -1;
	int fds[2], status = 0, r;
	size_t len = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return orh_fail_errno(err, errno, "pipe");
	pid = fork();
	if (pid == 0)
		child_exec(root, fds[1], bins, argv);
	close(fds[1]);
	rd = fds[0];
	if (pid < 0)
		return orh_fail_errno(err, errno, "fork");
	r = orh_read_fd_all_within(rd, ENGINE_OUTPUT_MAX_BYTES, ENGINE_ASK_TIMEOUT_MS, out, &len);
	if (r < 0)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return orh_fail_errno(err, -r, "reading the output of %s", argv[1]);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* chroot ROOT systemctl try-restart UNIT, for each of e's units: a unit that runs is
 * restarted, one that does not is left, one the host does not have (status 5: k3s-agent on
 * a k3s server) is skipped. A root without systemctl gets a note: its engine is restarted
 * by hand, and is not ready until then. */
static int systemd_restart(const char *root, struct orh_inst_engine *e, struct orh_strv *notes,
			   struct orh_err *err)
{
	static const char *const bins[] = { "/usr/bin/systemctl", "/bin/systemctl", NULL };
	_cleanup_free_ char *units = orh_xstrdup(e->units);
	char *save = NULL;
	int pid = e->socket ? peer_pid(root, e->socket, err) : 0;

	if (pid < 0)
		return pid;
	e->listened = pid > 0;
	for (char *u = strtok_r(units, " ", &save); u; u = strtok_r(NULL, " ", &save)) {
		_cleanup_free_ char *out = NULL;
		char *argv[] = { "systemctl", "try-restart", u, NULL };
		int status = run_under(root, bins, argv, &out, err);

		if (status < 0)
			return status;
		if (status == 127) {
			orh_strv_pushf(notes, "no systemctl under '%s/': restart %s by hand", root,
				       e->units);
			return 0;
		}
		if (status && status != 5)
			return orh_fail(err, ECHILD, "systemctl try-restart %s under '%s/': "
					"status %d", u, root, status);
		if (!status)
			orh_strv_pushf(notes, "systemctl try-restart %s (restarted where it runs)",
				       u);
	}
	return 0;
}

int orh_inst_engine_restart(const char *root, struct orh_inst_engine *e,
			    enum orh_inst_restart mode, struct orh_strv *notes,
			    struct orh_err *err)
{
	enum orh_inst_restart m = mode ? mode : e->restart;

	e->signalled = 0;
	e->listened = false;
	if (m == ORH_RESTART_SIGNAL && !e->socket)
		return orh_fail(err, EINVAL, "%s has no socket to find it by", e->flavour);
	if (m == ORH_RESTART_SIGNAL)
		return signal_engine(root, e, notes, err);
	if (m == ORH_RESTART_SYSTEMD && e->units)
		return systemd_restart(root, e, notes, err);
	return 0;
}

/* Does text hold, under a table header equal to one of headers, the line key = value?
 * Quotes ' and " count alike (go-toml writes either). */
static bool toml_has(const char *text, const char *const *headers, const char *line_want)
{
	_cleanup_free_ char *copy = orh_xstrdup(text);
	char *save = NULL;
	bool in = false;

	for (char *q = copy; *q; q++)
		if (*q == '\'')
			*q = '"';
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		l = orh_strstrip(l);
		if (*l == '[') {
			in = false;
			for (size_t i = 0; headers[i]; i++)
				in = in || !strcmp(l, headers[i]);
		} else if (in && !strcmp(l, line_want)) {
			return true;
		}
	}
	return false;
}

/* How e's engine is asked, and what its answer must hold. */
static bool ask_matches(const struct orh_inst_engine *e, const char *out, const char *handler,
			const char *shim)
{
	_cleanup_free_ char *h1 = NULL, *h2 = NULL, *want = NULL;
	const char *headers[3] = { NULL };

	if (e->engine == ORH_ENGINE_DOCKER) {
		want = orh_xasprintf("\"%s\":{\"path\":\"%s\"", handler, shim);
		return strstr(out, want) != NULL;
	}
	if (e->engine == ORH_ENGINE_CRIO) {
		headers[0] = h1 = orh_xasprintf("[crio.runtime.runtimes.%s]", handler);
		want = orh_xasprintf("runtime_path = \"%s\"", shim);
	} else {
		h1 = orh_xasprintf("[plugins.\"%s\".containerd.runtimes.%s.options]",
				   "io.containerd.grpc.v1.cri", handler);
		h2 = orh_xasprintf("[plugins.\"%s\".containerd.runtimes.%s.options]",
				   "io.containerd.cri.v1.runtime", handler);
		headers[0] = h1;
		headers[1] = h2;
		want = orh_xasprintf("BinaryName = \"%s\"", shim);
	}
	return toml_has(out, headers, want);
}

/* The engine back where it was restarted: listening again, and for containerd, which
 * exits on SIGHUP, under another PID. NULL, or what is missing. */
static char *engine_back(const char *root, const struct orh_inst_engine *e, int *r,
			 struct orh_err *err)
{
	int pid = e->listened && e->socket ? peer_pid(root, e->socket, err) : 1;

	*r = pid < 0 ? pid : 0;
	if (pid == 0)
		return orh_xasprintf("no engine listens on %s since it was restarted", e->socket);
	if (pid > 0 && e->engine == ORH_ENGINE_CONTAINERD && pid == e->signalled)
		return orh_xasprintf("pid %d, signalled, still listens on %s", pid, e->socket);
	return NULL;
}

int orh_inst_engine_loaded(const char *root, const struct orh_inst_engine *e,
			   const char *handler, const char *shim, char **what, char **why,
			   struct orh_err *err)
{
	_cleanup_free_ char *out = NULL, *sock = NULL;
	char *argv[8] = { NULL };
	const char *asked = e->engine == ORH_ENGINE_CONTAINERD ? "containerd config dump" :
			    e->engine == ORH_ENGINE_CRIO ? "crio status config" : "docker info";
	int r = 0, status;

	*what = *why = NULL;
	*why = engine_back(root, e, &r, err);
	if (r < 0 || *why)
		return r;
	if (e->engine == ORH_ENGINE_PODMAN) {
		*what = orh_xstrdup("podman reads its config at each run");
		return 1;
	}
	if (e->engine == ORH_ENGINE_CONTAINERD) {
		argv[1] = "--config", argv[2] = e->rendered, argv[3] = "config", argv[4] = "dump";
	} else if (e->engine == ORH_ENGINE_CRIO) {
		argv[1] = "status", argv[2] = "--socket", argv[3] = e->socket, argv[4] = "config";
	} else {
		sock = orh_xasprintf("unix://%s", e->socket);
		argv[1] = "-H", argv[2] = sock, argv[3] = "info", argv[4] = "--format";
		argv[5] = "{{json .Runtimes}}";
	}
	status = run_under(root, e->binaries, argv, &out, err);
	if (status < 0)
		return status;
	if (status) {
		*why = orh_xasprintf("%s under '%s/' failed (status %d%s)", asked, root, status,
				     status == 127 ? ": no binary found" : "");
		return 0;
	}
	if (!ask_matches(e, out, handler, shim)) {
		*why = orh_xasprintf("%s of %s has no handler '%s' with %s", asked, e->rendered,
				     handler, shim);
		return 0;
	}
	*what = orh_xasprintf("%s of %s has handler '%s' with %s", asked, e->rendered, handler,
			      shim);
	return 1;
}
