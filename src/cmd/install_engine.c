/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine `install` configures (include/orh/cmd/install.h): which one a host root holds and
 * where its files are, how it is restarted, and whether it has loaded the handler, as the
 * engine behind its socket reports it (for containerd, that process's own binary and
 * config, read through /proc); the shims of the containers that still run through it.
 *
 * k3s and rke2 render their containerd's config.toml from a template at every start
 * (k3s pkg/agent/containerd/config.go: config-v3.toml.tmpl, else config.toml.tmpl, else
 * its built-in version 3 template), so the file to edit is the template, never the
 * rendered file. Their paths were read in their sources, not run here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/base/rootfs.h"
#include "orh/cmd/install.h"

#define ENGINE_OUTPUT_MAX_BYTES (8 * 1024 * 1024)
#define ENGINE_ASK_TIMEOUT_MS 60000
#define RENDERED_MAX_BYTES (1024 * 1024)
#define CMDLINE_MAX_BYTES (256 * 1024)
#define OPTIONS_MAX_BYTES (64 * 1024)

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
		return orh_fail(err, ESRCH, "the engine behind %s is outside this PID namespace: "
				"the installer needs the host's (the DaemonSet's hostPID: true) to "
				"signal it and to read what it runs", sock);
	return cred.pid;
}

/* The engine behind a socket as /proc shows it (through the host's PID namespace, and
 * CAP_SYS_PTRACE for a process of more capabilities: the DaemonSet's hostPID and caps). */
struct engine_proc {
	int pid;
	int exe;            /* /proc/PID/exe opened O_PATH: exactly the binary that runs */
	char *exe_path;     /* where that binary was, as the engine's mount namespace names it */
	struct orh_strv argv;
	char *config;       /* the config its command line names (--config, -c), else the default */
};

static void engine_proc_free(struct engine_proc *p)
{
	if (p->exe >= 0)
		close(p->exe);
	free(p->exe_path);
	orh_strv_free(&p->argv);
	free(p->config);
	memset(p, 0, sizeof(*p));
	p->exe = -1;
}

/* The value of containerd's flag --config (or -c) in argv: Go's flag syntax, one or two
 * dashes, the value after '=' or as the next word. NULL where argv has none. */
static const char *config_flag(const struct orh_strv *argv)
{
	for (size_t i = 1; i < argv->n; i++) {
		const char *a = argv->v[i], *eq;
		size_t n;

		if (a[0] != '-' || !strcmp(a, "--"))
			continue;
		a += a[1] == '-' ? 2 : 1;
		eq = strchr(a, '=');
		n = eq ? (size_t)(eq - a) : strlen(a);
		if ((n == 6 && !strncmp(a, "config", 6)) || (n == 1 && a[0] == 'c'))
			return eq ? eq + 1 : i + 1 < argv->n ? argv->v[i + 1] : NULL;
	}
	return NULL;
}

/* /proc/PID/cmdline into argv. 0 or -errno. */
static int read_cmdline(int pid, struct orh_strv *argv, struct orh_err *err)
{
	_cleanup_free_ char *path = orh_xasprintf("/proc/%d/cmdline", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r;

	if (fd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", path);
	r = orh_read_fd_all(fd, CMDLINE_MAX_BYTES, &text, &len);
	if (r < 0)
		return orh_fail_errno(err, -r, "reading '%s'", path);
	for (size_t o = 0; o < len; o += strlen(text + o) + 1)
		orh_strv_push(argv, orh_xstrdup(text + o));
	if (!argv->n)
		return orh_fail(err, ESRCH, "'%s' is empty: pid %d has exited", path, pid);
	return 0;
}

/* A link of /proc/PID (exe, cwd) read: a new string, NULL with errno set. */
static char *proc_link(int pid, const char *name)
{
	_cleanup_free_ char *path = orh_xasprintf("/proc/%d/%s", pid, name);
	char buf[4096];
	ssize_t n = readlink(path, buf, sizeof(buf) - 1);

	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return orh_xstrdup(buf);
}

/* The engine behind e's socket under root: its PID, its binary and the config its command
 * line names. 1, or 0 with *why saying what keeps it from being read (nobody listens, a
 * PID outside this namespace, a binary the installer may not open), or -errno. */
static int engine_proc_read(const char *root, const struct orh_inst_engine *e,
			    struct engine_proc *p, char **why, struct orh_err *err)
{
	_cleanup_free_ char *exe = NULL, *cwd = NULL;
	const char *config = NULL;
	int r;

	p->exe = -1;
	p->pid = peer_pid(root, e->socket, err);
	if (p->pid == -ESRCH) {
		*why = orh_xstrdup(err->msg);
		return 0;
	}
	if (p->pid < 0)
		return p->pid;
	if (p->pid == 0) {
		*why = orh_xasprintf("no engine listens on %s (one started later reads the config "
				     "as configured; not ready until it does)", e->socket);
		return 0;
	}
	exe = orh_xasprintf("/proc/%d/exe", p->pid);
	p->exe = open(exe, O_PATH | O_CLOEXEC);
	if (p->exe < 0) {
		*why = orh_xasprintf("the engine behind %s is pid %d, whose binary (%s) the "
				     "installer may not open: %s%s", e->socket, p->pid, exe,
				     strerror(errno), errno == EACCES || errno == EPERM ?
				     " (it needs CAP_SYS_PTRACE: the DaemonSet's capabilities)" : "");
		return 0;
	}
	p->exe_path = proc_link(p->pid, "exe");
	r = read_cmdline(p->pid, &p->argv, err);
	if (r == -ESRCH || r == -ENOENT) {
		*why = orh_xstrdup(err->msg);
		return 0;
	}
	if (r < 0)
		return r;
	config = config_flag(&p->argv);
	if (!config)
		config = orh_engine_default_config(e->engine);
	if (*config == '/') {
		p->config = orh_xstrdup(config);
		return 1;
	}
	cwd = proc_link(p->pid, "cwd");
	if (!cwd) {
		*why = orh_xasprintf("pid %d behind %s names its config '%s' relative to its "
				     "working directory, which the installer may not read: %s",
				     p->pid, e->socket, config, strerror(errno));
		return 0;
	}
	p->config = orh_xasprintf("%s/%s", strcmp(cwd, "/") ? cwd : "", config);
	return 1;
}

/* containerd with no config named: the one the engine behind the socket reads (its command
 * line's --config), where one listens and the installer can see it; else the default. */
static int engine_config(const char *root, const struct flavour *f, struct orh_inst_engine *e,
			 struct orh_strv *notes, struct orh_err *err)
{
	struct engine_proc p = { .exe = -1 };
	_cleanup_free_ char *why = NULL;
	int r = engine_proc_read(root, e, &p, &why, err);

	if (r > 0 && strcmp(p.config, orh_engine_default_config(e->engine)))
		orh_strv_pushf(notes, "the engine behind %s (pid %d) reads %s (its command line): "
			       "that file is configured", e->socket, p.pid, p.config);
	set_config(root, f, r > 0 ? p.config : NULL, e, notes);
	engine_proc_free(&p);
	return r < 0 ? r : 0;
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
	if (!config && !f->dir && f->engine == ORH_ENGINE_CONTAINERD)
		return engine_config(root, f, e, notes, err);
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

/* SIGHUP to the PID behind the socket. An engine that does not run (no socket, nobody
 * listening) reads its config when it starts. */
static int signal_engine(const char *root, struct orh_inst_engine *e, struct orh_strv *notes,
			 struct orh_err *err)
{
	int pid = peer_pid(root, e->socket, err);

	if (pid == -ESRCH) {
		orh_strv_pushf(notes, "not signalled: %s", err->msg);
		return 0;
	}
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
 * then exe (a binary opened before the chroot, argv[0] as given; an ELF file: a script's
 * interpreter could not open an O_CLOEXEC descriptor), else the first of the argv0
 * candidates that can be executed. */
static void child_exec(const char *root, int out, int exe, const char *const *bins,
		       char **argv)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(out, STDOUT_FILENO) < 0 || (*root && chroot(root) < 0) || chdir("/") < 0)
		_exit(126);
	alarm(ENGINE_ASK_TIMEOUT_MS / 1000);
	if (exe >= 0) {
		execveat(exe, "", argv, environ, AT_EMPTY_PATH);
		_exit(127);
	}
	for (; *bins; bins++) {
		argv[0] = (char *)*bins;
		execv(*bins, argv);
	}
	_exit(127);
}

/* argv run chrooted into root (exe where it is >= 0, else argv[0] the first of bins
 * there), its stdout in *out. The exit status, or -errno. */
static int run_under(const char *root, int exe, const char *const *bins, char **argv,
		     char **out, struct orh_err *err)
{
	_cleanup_close_ int rd = -1;
	int fds[2], status = 0, r;
	size_t len = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return orh_fail_errno(err, errno, "pipe");
	pid = fork();
	if (pid == 0)
		child_exec(root, fds[1], exe, bins, argv);
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

	if (pid < 0 && pid != -ESRCH)
		return pid;
	e->listened = pid > 0;
	for (char *u = strtok_r(units, " ", &save); u; u = strtok_r(NULL, " ", &save)) {
		_cleanup_free_ char *out = NULL;
		char *argv[] = { "systemctl", "try-restart", u, NULL };
		int status = run_under(root, -1, bins, argv, &out, err);

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

/* Are a and b (host paths) one file under root (a link to the other, resolved in it)? */
static bool same_file_under(const char *root, const char *a, const char *b)
{
	_cleanup_close_ int rfd = -1, fa = -1, fb = -1;
	struct orh_err err = { 0 };
	struct stat sa, sb;

	return orh_rootfs_open(*root ? root : "/", &rfd, &err) == 0 &&
	       orh_rootfs_open_file(rfd, a, &fa, &sa) == 0 &&
	       orh_rootfs_open_file(rfd, b, &fb, &sb) == 0 && sa.st_ino == sb.st_ino &&
	       sa.st_dev == sb.st_dev;
}

/* Does the engine behind e's socket read what was configured? containerd: 1 with p filled
 * (its binary, its config: e's rendered file), 0 with *why saying what is not so; CRI-O
 * and docker are asked through the socket: one listening is enough. -errno. */
static int engine_here(const char *root, const struct orh_inst_engine *e, struct engine_proc *p,
		       char **why, struct orh_err *err)
{
	int r;

	if (e->engine != ORH_ENGINE_CONTAINERD) {
		r = peer_pid(root, e->socket, err);
		if (r == 0)
			*why = orh_xasprintf("no engine listens on %s", e->socket);
		return r == -ESRCH ? 1 : r < 0 ? r : r > 0;
	}
	r = engine_proc_read(root, e, p, why, err);
	if (r <= 0)
		return r;
	if (strcmp(p->config, e->rendered) && !same_file_under(root, p->config, e->rendered)) {
		*why = orh_xasprintf("the engine behind %s (pid %d, %s) reads %s (its command "
				     "line), not %s, the file configured: set CONTAINERD_CONFIG=%s "
				     "in the installer's environment (or give --engine-config %s)",
				     e->socket, p->pid, p->exe_path ? p->exe_path : "?", p->config,
				     e->rendered, p->config, p->config);
		return 0;
	}
	return 1;
}

int orh_inst_engine_loaded(const char *root, const struct orh_inst_engine *e,
			   const char *handler, const char *shim, char **what, char **why,
			   struct orh_err *err)
{
	_cleanup_free_ char *out = NULL, *sock = NULL, *by = NULL;
	struct engine_proc p = { .exe = -1 };
	char *argv[8] = { NULL };
	const char *asked = e->engine == ORH_ENGINE_CONTAINERD ? "containerd config dump" :
			    e->engine == ORH_ENGINE_CRIO ? "crio status config" : "docker info";
	const char *read = e->rendered;
	int r = 0, status;

	*what = *why = NULL;
	*why = engine_back(root, e, &r, err);
	if (r < 0 || *why)
		return r;
	if (e->engine == ORH_ENGINE_PODMAN) {
		*what = orh_xstrdup("podman reads its config at each run");
		return 1;
	}
	r = engine_here(root, e, &p, why, err);
	if (r <= 0) {
		engine_proc_free(&p);
		return r;
	}
	if (e->engine == ORH_ENGINE_CONTAINERD) {
		/* the binary that runs, with the argv[0] it runs as (k3s's binary tells its
		 * commands by it), on the config it reads */
		argv[0] = p.argv.v[0], argv[1] = "--config", argv[2] = p.config;
		argv[3] = "config", argv[4] = "dump";
		read = p.config;
		by = orh_xasprintf(" (pid %d: %s)", p.pid, p.exe_path ? p.exe_path : p.argv.v[0]);
	} else if (e->engine == ORH_ENGINE_CRIO) {
		argv[1] = "status", argv[2] = "--socket", argv[3] = e->socket, argv[4] = "config";
	} else {
		sock = orh_xasprintf("unix://%s", e->socket);
		argv[1] = "-H", argv[2] = sock, argv[3] = "info", argv[4] = "--format";
		argv[5] = "{{json .Runtimes}}";
	}
	status = run_under(root, p.exe, e->binaries, argv, &out, err);
	if (status > 0)
		*why = orh_xasprintf("%s%s under '%s/' failed (status %d%s)", asked, by ? by : "",
				     root, status, status != 127 ? "" :
				     p.exe >= 0 ? ": the engine's binary could not be executed" :
				     ": no binary found");
	else if (status == 0 && !ask_matches(e, out, handler, shim))
		*why = orh_xasprintf("%s of %s has no handler '%s' with %s%s", asked, read,
				     handler, shim, by ? by : "");
	else if (status == 0)
		*what = orh_xasprintf("%s of %s has handler '%s' with %s%s", asked, read, handler,
				      shim, by ? by : "");
	engine_proc_free(&p);
	return status < 0 ? status : *what != NULL;
}

/* Does the runc v2 shim pid run with shim: does its working directory (the bundle of its
 * first task) hold the options.json it was created with, whose binary_name (the handler's
 * BinaryName) is shim? 1, 0, or -errno where it cannot be read. */
static int shim_serves(int pid, const char *shim)
{
	_cleanup_free_ char *path = orh_xasprintf("/proc/%d/cwd/options.json", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *text = NULL;
	json_t *o, *b;
	size_t len = 0;
	int r;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno; /* none: runc, the default */
	r = orh_read_fd_all(fd, OPTIONS_MAX_BYTES, &text, &len);
	if (r < 0)
		return r;
	o = json_loadb(text, len, 0, NULL);
	b = json_object_get(o, "binary_name");
	r = json_is_string(b) && !strcmp(json_string_value(b), shim);
	json_decref(o);
	return r;
}

/* Is the shim pid one of the engine behind sock under root: the socket its command line's
 * -address names, as its own root shows it, the same socket? A shim whose command line
 * names none, or whose socket cannot be looked at, counts (said in *note). */
static bool shim_of(const char *root, const char *sock, int pid, const char **note)
{
	_cleanup_free_ char *ours = orh_xasprintf("%s%s", root, sock), *theirs = NULL;
	struct orh_strv argv = { 0 };
	struct orh_err err = { 0 };
	const char *addr = NULL;
	struct stat a, b;
	bool same = true;

	*note = NULL;
	if (read_cmdline(pid, &argv, &err) < 0)
		return false; /* gone */
	for (size_t i = 1; i + 1 < argv.n && !addr; i++)
		if (!strcmp(argv.v[i], "-address") || !strcmp(argv.v[i], "--address"))
			addr = argv.v[i + 1];
	if (!addr)
		*note = "its command line names no -address";
	theirs = addr ? orh_xasprintf("/proc/%d/root%s", pid, addr) : NULL;
	if (addr && stat(theirs, &b) < 0)
		*note = errno == ENOENT ? NULL : "its engine's socket cannot be looked at";
	if (addr && !*note)
		same = stat(ours, &a) == 0 && stat(theirs, &b) == 0 && a.st_dev == b.st_dev &&
		       a.st_ino == b.st_ino;
	orh_strv_free(&argv);
	return same;
}

size_t orh_inst_engine_users(const char *root, const struct orh_inst_engine *e,
			     const char *shim, struct orh_strv *users)
{
	struct dirent *de;
	DIR *d = opendir("/proc");
	size_t n = 0;

	while (d && (de = readdir(d))) {
		char comm[64] = "", *end = NULL;
		_cleanup_free_ char *cpath = NULL, *bundle = NULL;
		long pid = strtol(de->d_name, &end, 10);
		const char *note = NULL;
		int r;

		if (pid <= 0 || *end)
			continue;
		cpath = orh_xasprintf("/proc/%ld/comm", pid);
		if (orh_read_file_at(AT_FDCWD, cpath, comm, sizeof(comm)) < 0 ||
		    !orh_startswith(comm, "containerd-shim"))
			continue;
		r = shim_serves((int)pid, shim);
		if (r == 0 || (e->socket && !shim_of(root, e->socket, (int)pid, &note)))
			continue;
		bundle = proc_link((int)pid, "cwd");
		if (r > 0)
			orh_strv_pushf(users, "shim pid %ld, bundle %s%s%s", pid, bundle ? bundle : "?",
				       note ? ": counted, " : "", note ? note : "");
		else
			orh_strv_pushf(users, "shim pid %ld, whose bundle the installer may not "
				       "read (%s): counted", pid, strerror(-r));
		n++;
	}
	if (d)
		closedir(d);
	return n;
}
