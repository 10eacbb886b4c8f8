/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The undo an installer kept for running containers, finished later (include/orh/cmd/
 * install.h, ORH_INSTALL_FINISH_LOG), and the lock that keeps installs on one root apart.
 *
 * On containerd, an installer's undo that finds containers still running through the
 * handler leaves the engine's config as it is (containerd 2.x needs the handler to exec
 * into them) and marks the manifest "pending". The runtime shim's `delete` of a container
 * (orh_inst_finish_later(), called by src/cmd/cmd_runtime.c) then starts, detached from
 * it, `oci-rdma-hook install --root ROOT --uninstall --after-pid PPID`: PPID is the
 * engine's shim that called it, which exits once the pod's last container is gone. That
 * uninstall waits for it (orh_inst_wait_exit()), then does what `install --uninstall`
 * does: the engine reverted unless containers still run through the handler, in which case
 * the next delete tries again.
 *
 * ROOT is the root the shim was installed under: its own binary is ROOT ORH_BINDIR
 * "/oci-rdma-hook", as install puts it; a shim run from anywhere else finishes nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "orh-config.h"
#include "orh/base/log.h"
#include "orh/cmd/install.h"

#define INST_LOCK_WAIT_S 30

int orh_inst_lock(const char *root, bool wait, int *fd, struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xasprintf("%s" ORH_INSTALL_MANIFEST, root);
	int waited = 0;

	*strrchr(dir, '/') = '\0';
	*fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (*fd < 0 && errno == ENOENT)
		return 0; /* nothing installed here yet: nothing to keep apart from */
	if (*fd < 0)
		return orh_fail_errno(err, errno, "opening '%s' to lock it", dir);
	while (flock(*fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		if (e != EWOULDBLOCK && e != EINTR) {
			close(TAKE_FD(*fd));
			return orh_fail_errno(err, e, "locking '%s'", dir);
		}
		if (!wait || waited >= INST_LOCK_WAIT_S * 1000) {
			close(TAKE_FD(*fd));
			return orh_fail(err, EWOULDBLOCK, "another install runs on the root '%s/' "
					"(it held the lock of '%s'%s)", root, dir,
					wait ? " all the time waited" : "");
		}
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
		waited += 100;
	}
	return 0;
}

bool orh_inst_wait_exit(long pid, unsigned timeout_s)
{
	long long left = (long long)timeout_s * 1000;
	int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);

	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		int n;

		while ((n = poll(&p, 1, (int)left)) < 0 && errno == EINTR)
			;
		close(pfd);
		return n != 0;
	}
	if (errno == ESRCH)
		return true;
	/* a kernel without pidfd_open: asked every 100 ms */
	for (; left > 0; left -= 100) {
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			return true;
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
	}
	return false;
}

/* The root this binary was installed under (see above), or NULL. */
static char *installed_root(void)
{
	static const char tail[] = ORH_BINDIR "/oci-rdma-hook";
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t t = sizeof(tail) - 1;

	if (n <= 0 || (size_t)n < t || (size_t)n >= sizeof(exe) - 1)
		return NULL;
	exe[n] = '\0';
	if (strcmp(exe + n - t, tail))
		return NULL;
	exe[n - t] = '\0';
	return orh_xstrdup(exe);
}

/* The detached uninstall: its output appended to the finish log, nothing of the shim's
 * open (the engine waits for the end of the pipes it gave the shim), the environment's
 * node config and sysroot dropped (install reads the root's own). Does not return. */
static void exec_finisher(const char *root, long ppid)
{
	_cleanup_free_ char *log = orh_xasprintf("%s" ORH_INSTALL_FINISH_LOG, root);
	char pid[24];
	char *argv[] = { "oci-rdma-hook", "install", "--root", *root ? (char *)root : "/",
			 "--uninstall", "--after-pid", pid, NULL };
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int out = open(log, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	snprintf(pid, sizeof(pid), "%ld", ppid);
	if (null < 0)
		_exit(127);
	if (out < 0)
		out = null;
	dup2(null, STDIN_FILENO);
	dup2(out, STDOUT_FILENO);
	dup2(out, STDERR_FILENO);
	syscall(SYS_close_range, 3U, ~0U, 0U);
	unsetenv("OCI_RDMA_HOOK_CONFIG");
	unsetenv("OCI_RDMA_HOOK_SYSROOT");
	sigprocmask(SIG_SETMASK, &(sigset_t){ 0 }, NULL);
	execv("/proc/self/exe", argv);
	_exit(127);
}

void orh_inst_finish_later(void)
{
	_cleanup_free_ char *root = installed_root();
	struct orh_inst_manifest m = { 0 };
	struct orh_err err = { 0 };
	long ppid = (long)getppid();
	bool pending;
	pid_t child;

	if (!root)
		return;
	if (orh_inst_load(root, &m, &err) < 0) {
		orh_log(LOG_WARNING, "the kept undo: %s", err.msg);
		return;
	}
	pending = m.engine && m.pending;
	orh_inst_free(&m);
	if (!pending)
		return;
	child = fork();
	if (child == 0) {
		setsid();
		if (fork() == 0)
			exec_finisher(root, ppid);
		_exit(0);
	}
	if (child < 0) {
		orh_log(LOG_WARNING, "the kept undo: fork: %s", strerror(errno));
		return;
	}
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	orh_log(LOG_INFO, "the kept undo of '%s/': install --uninstall started, once pid %ld "
		"exits (its output: %s%s)", root, ppid, root, ORH_INSTALL_FINISH_LOG);
}
