// SPDX-License-Identifier: Apache-2.0
// The pod sandbox's process for the CRI tests (tests/cri/mkimage.py packs it, static,
// into the local pause image): it sleeps until SIGTERM or SIGINT, and reaps any child
// reparented to it (as PID 1 of a pod sharing its PID namespace).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction term = { .sa_handler = stop };
	struct sigaction chld = { .sa_handler = reap, .sa_flags = SA_NOCLDSTOP | SA_RESTART };

	if (sigaction(SIGTERM, &term, NULL) || sigaction(SIGINT, &term, NULL) ||
	    sigaction(SIGCHLD, &chld, NULL))
		return 1;
	for (;;)
		pause();
	return 0;
}
