/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NRI plugin's resident worker (include/orh/cmd/nri_plugin.h): one child of the plugin
 * that decides CreateContainer requests one after another, so that a pod's start pays no
 * process of its own for its decision (a fork, its page copies, its exit). It is started
 * when the plugin is idle (no decision under way), has read the node (nri_node.c) and
 * holds the config it serves with; it then holds the same node and config as a worker
 * forked at that moment would. Each request: the plugin sends a header, the write end of a
 * new pipe (SCM_RIGHTS) and the request's bytes; the worker answers through that pipe as a
 * one-shot worker does (nri_workers.c) and closes it, so that the plugin's handling of an
 * answer, its deadline included, is the same. A request while it is busy, or larger than
 * RESIDENT_MSG_MAX, is decided by a one-shot worker. Late (killed by the plugin, as a
 * one-shot worker is, whether it was ended before or not), or dead without an answer: it is
 * reaped here, and started again once the plugin is idle, a second later; a request it
 * died on in time is decided again by a one-shot worker (nri_workers.c). It is ended (its
 * socket closed: it exits once its request is answered) when the plugin reads the node
 * again, takes a config from Configure, stops giving hooks (nri_hooks = auto), loses its
 * connection, or after RESIDENT_MAX requests. orh_nri_worker_child() starts either kind of
 * worker's child.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/cmd/commands.h"
#include "orh/cmd/nri_plugin.h"

#define RESIDENT_MAX 1000
#define RESIDENT_MSG_MAX (1u << 20)
#define RESPAWN_EVERY_MS 1000

struct req_head {
	uint32_t len;
	uint8_t loud;
};

/* Ended ones not waited for yet (one exits once it has answered the request it holds):
 * reaped by orh_nri_resident_tick() */
static pid_t ended[16];
static size_t n_ended;

static struct {
	pid_t pid;
	int sock;
	bool busy;
	unsigned served;
	unsigned gen;           /* this worker's; a request's answer names it */
	double not_before;      /* no new one before */
} r = { .sock = -1 };

/* Read exactly n bytes (0), or the end or an error (-1). */
static int read_exact(int fd, void *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t k = read(fd, (char *)p + got, n - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

static void __attribute__((noreturn)) resident_main(struct orh_ctx *ctx, int sock,
						  orh_nri_decide_fn decide)
{
	for (unsigned n = 0; n < RESIDENT_MAX; n++) {
		struct req_head h;
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *cm;
		uint8_t *p;
		ssize_t k;
		int fd = -1;

		do
			k = recvmsg(sock, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);
		while (k < 0 && errno == EINTR);
		if (k != (ssize_t)sizeof(h))
			break;
		cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
		if (fd < 0 || h.len > RESIDENT_MSG_MAX)
			break;
		p = orh_xmalloc(h.len ? h.len : 1);
		if (read_exact(sock, p, h.len) < 0)
			break;
		decide(ctx, p, h.len, fd, h.loud);
		free(p);
	}
	_exit(ORH_EXIT_OK);
}

void orh_nri_worker_child(int conn)
{
	sigset_t none;

	close(conn);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

double orh_nri_resident_due(void)
{
	if (n_ended) /* look for the ended ones that have exited */
		return orh_now_ms() + 1000;
	return r.pid || !r.not_before ? -1 : r.not_before;
}

static void reap(void)
{
	for (size_t i = n_ended; i-- > 0;)
		if (waitpid(ended[i], NULL, WNOHANG) != 0)
			ended[i] = ended[--n_ended];
}

void orh_nri_resident_stop(void)
{
	if (!r.pid)
		return;
	/* it exits once it has answered the request it holds, if any */
	close(r.sock);
	if (n_ended == ORH_ARRAY_SIZE(ended)) { /* no room left: wait for it */
		kill(r.pid, SIGKILL);
		while (waitpid(r.pid, NULL, 0) < 0 && errno == EINTR)
			;
	} else {
		ended[n_ended++] = r.pid;
	}
	r.pid = 0;
	r.sock = -1;
	r.busy = false;
	r.gen++;
}

void orh_nri_resident_tick(struct orh_nri_conn *c, double now, orh_nri_decide_fn decide)
{
	int sv[2];
	pid_t pid;

	reap();
	if (r.pid || c->n_w || now < r.not_before || !c->ctx->node_cache)
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r.not_before = now + RESPAWN_EVERY_MS;
		return;
	}
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		signal(SIGHUP, SIG_DFL);
		orh_nri_worker_child(c->fd);
		resident_main(c->ctx, sv[1], decide);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		r.not_before = now + RESPAWN_EVERY_MS;
		return;
	}
	r.pid = pid;
	r.sock = sv[0];
	r.served = 0;
	r.gen++;
}

int orh_nri_resident_take(const struct orh_ttrpc_request *rq, bool loud, unsigned *gen,
			  pid_t *pid)
{
	struct req_head h = { .len = (uint32_t)rq->payload_len, .loud = loud };
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	int fds[2];
	ssize_t k;

	if (!r.pid || r.busy || rq->payload_len > RESIDENT_MSG_MAX)
		return -1;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fds[1], sizeof(int));
	do
		k = sendmsg(r.sock, &mh, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	close(fds[1]);
	if (k != (ssize_t)sizeof(h) ||
	    orh_write_all(r.sock, rq->payload, rq->payload_len) < 0 ||
	    fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
		/* it is gone, or its socket is: a one-shot worker decides */
		close(fds[0]);
		orh_nri_resident_stop();
		return -1;
	}
	r.busy = true;
	*gen = r.gen;
	*pid = r.pid;
	return fds[0];
}

void orh_nri_resident_done(unsigned gen, bool answered)
{
	if (gen != r.gen || !r.pid)
		return;
	r.busy = false;
	if (!answered) { /* late (killed by the caller) or dead: not again for a while */
		orh_nri_resident_stop();
		r.not_before = orh_now_ms() + RESPAWN_EVERY_MS;
		return;
	}
	if (++r.served >= RESIDENT_MAX)
		orh_nri_resident_stop();
}
