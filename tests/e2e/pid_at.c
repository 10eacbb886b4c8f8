/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pid_at PID COMMAND [ARGS...]: run COMMAND as a new process whose pid is PID (clone3
 * with set_tid; root), and wait for it, exiting with its status. The e2e tests use it to
 * give a container's pid, once that container is gone, to an unrelated process while
 * the hook runs: the reuse the hook must notice.
 */
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	pid_t want, child;
	struct clone_args args;
	int status = 0;

	if (argc < 3 || (want = (pid_t)atoi(argv[1])) <= 0) {
		fputs("usage: pid_at PID COMMAND [ARGS...]\n", stderr);
		return 2;
	}
	memset(&args, 0, sizeof(args));
	args.exit_signal = SIGCHLD;
	args.set_tid = (uint64_t)(uintptr_t)&want;
	args.set_tid_size = 1;
	child = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	if (child < 0) {
		fprintf(stderr, "pid_at: clone3 with pid %d: %s\n", (int)want, strerror(errno));
		return 1;
	}
	if (child == 0) {
		execvp(argv[2], argv + 2);
		fprintf(stderr, "pid_at: exec '%s': %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
