/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook nri: an NRI plugin (github.com/containerd/nri), the command and its
 * connection. It connects to the runtime's socket, or, started by the runtime from its
 * plugin_path (NRI_PLUGIN_SOCKET: the number of the connection's fd it inherited, with
 * NRI_PLUGIN_NAME and NRI_PLUGIN_IDX; main() runs this command when the binary is started
 * with no argument and these set), uses that connection and logs to syslog too (the runtime
 * keeps no stderr of its plugins). It registers, then serves the connection: its frames read
 * and written, the messages handled (nri_handle.c) and each CreateContainer decided by a
 * worker (nri_workers.c) with a deadline, from the node the plugin keeps where it can
 * (nri_node.c: read when the plugin starts, again when it is old or the kernel says it
 * changed). What the runtime can make the plugin hold is
 * bounded: its connection is not read while more than ORH_NRI_OUT_MAX bytes of answers wait
 * for it to read them, or while every worker is busy; the lines its requests cause are
 * limited (nri_log.c). A lost connection is made again, waiting longer each time up to a
 * second, until SIGTERM or SIGINT ends the plugin (status 0); one the runtime handed over
 * ends it (the runtime starts its plugins again). SIGHUP reads the node again.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "orh/base/args.h"
#include "orh/cmd/commands.h"
#include "orh/base/json.h"
#include "orh/base/log.h"
#include "orh/cmd/nri_plugin.h"

#define DEFAULT_SOCKET "/var/run/nri/nri.sock"
#define DEFAULT_NAME "oci-rdma-hook"
#define DEFAULT_IDX "50"
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 1000

static volatile sig_atomic_t stopping, reread;

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

static void on_hup(int sig)
{
	(void)sig;
	reread = 1;
}

/* Read what came into the multiplexer. -1: the connection is done. */
static int on_input(struct orh_nri_conn *c)
{
	char buf[65536];
	struct orh_err err = { 0 };
	ssize_t n = read(c->fd, buf, sizeof(buf));

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -1;
	if (n == 0)
		return -1;
	if (orh_mux_feed(&c->in, buf, (size_t)n, &err) < 0) {
		orh_log(LOG_ERR, "nri: %s", err.msg);
		return -1;
	}
	return 0;
}

/* May the connection be read and another message handled: the runtime has read our answers
 * down to ORH_NRI_OUT_MAX, and a worker is free? */
static bool can_take(const struct orh_nri_conn *c)
{
	return c->out.n <= ORH_NRI_OUT_MAX && c->n_w < ORH_NRI_MAX_WORKERS;
}

static int on_output(struct orh_nri_conn *c)
{
	ssize_t n = send(c->fd, c->out.p, c->out.n, MSG_NOSIGNAL);

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -1;
	memmove(c->out.p, c->out.p + n, c->out.n - (size_t)n);
	c->out.n -= (size_t)n;
	if (c->out.n == 0 && c->out.cap > ORH_MUX_KEEP) { /* a backlog drained: given back */
		free(c->out.p);
		memset(&c->out, 0, sizeof(c->out));
	}
	return 0;
}

/* Serve one connection until it is lost or the plugin is stopped. */
static void serve(struct orh_nri_conn *c, const char *name, const char *idx,
		  const sigset_t *run_mask)
{
	orh_nri_register(c, name, idx);
	while (!stopping) {
		struct pollfd p[3 + ORH_NRI_MAX_WORKERS];
		double now = orh_now_ms(), next = orh_nri_node_due(), flush;
		struct timespec ts, *tsp = NULL;
		size_t polled = c->n_w, n_ev;
		int ev[2], r;

		p[0] = (struct pollfd){ .fd = c->fd, .events = (can_take(c) ? POLLIN : 0) |
							      (c->out.n ? POLLOUT : 0) };
		for (size_t i = 0; i < c->n_w; i++) {
			p[1 + i] = (struct pollfd){ .fd = c->w[i].fd, .events = POLLIN };
			if (next < 0 || c->w[i].deadline < next)
				next = c->w[i].deadline;
		}
		n_ev = orh_nri_node_fds(c->ctx, ev);
		for (size_t i = 0; i < n_ev; i++)
			p[1 + c->n_w + i] = (struct pollfd){ .fd = ev[i], .events = POLLIN };
		flush = orh_nri_resident_due(); /* a resident worker to start again */
		if (flush >= 0 && (next < 0 || next > flush))
			next = flush;
		if (orh_nri_workers_dying() && (next < 0 || next > now + 1000))
			next = now + 1000; /* look for the killed ones that have ended */
		flush = orh_nri_log_flush(now, false); /* a count to log */
		if (flush >= 0 && (next < 0 || next > flush))
			next = flush;
		if (next >= 0) {
			double ms = next > now ? next - now : 0;

			ts.tv_sec = (time_t)(ms / 1000);
			ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
			tsp = &ts;
		}
		r = ppoll(p, 1 + c->n_w + n_ev, tsp, run_mask);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && (p[0].revents & (POLLERR | POLLNVAL)))
			break;
		if (r > 0 && (p[0].revents & POLLOUT) && on_output(c) < 0)
			break;
		if (r > 0 && (p[0].revents & (POLLIN | POLLHUP)) && on_input(c) < 0)
			break;
		/* from the last polled: orh_nri_worker_end() moves the last into the place it
		 * frees, one polled and seen to already */
		for (size_t i = 0; r > 0 && i < n_ev; i++)
			if (p[1 + polled + i].revents)
				orh_nri_node_event(c->ctx, ev[i]);
		for (size_t i = polled; r > 0 && i-- > 0;)
			if (p[1 + i].revents)
				orh_nri_worker_input(c, i);
		now = orh_now_ms();
		if (reread) {
			reread = 0;
			orh_log(LOG_INFO, "nri: SIGHUP: reading the node again");
			orh_nri_node_read(c->ctx);
		}
		orh_nri_node_tick(c->ctx, now);
		for (size_t i = c->n_w; i-- > 0;)
			if (c->w[i].deadline <= now)
				orh_nri_worker_end(c, i, true, true);
		/* the messages read, as far as the answers waiting and the workers free allow */
		if (orh_nri_dispatch(c, can_take) < 0)
			break;
		orh_nri_resident_tick(c, now, orh_nri_resident_decide);
		orh_nri_workers_reap();
		orh_nri_log_flush(now, false);
	}
	/* a lost connection takes the decisions under way with it: nobody waits for them */
	while (c->n_w)
		orh_nri_worker_end(c, c->n_w - 1, false, true);
	orh_nri_resident_stop();
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (orh_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) < 0)
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* The socket the runtime handed a plugin it started (NRI_PLUGIN_SOCKET), or -1. */
static int inherited(void)
{
	const char *env = getenv("NRI_PLUGIN_SOCKET");
	unsigned long long v = 0;
	int fd;

	if (!env || orh_parse_uint(env, 1 << 20, &v) < 0)
		return -1;
	fd = (int)v;
	unsetenv("NRI_PLUGIN_SOCKET");
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -1;
	return fd;
}

static const char usage[] =
	"Usage: oci-rdma-hook nri [--socket PATH] [--config FILE] [--sysroot DIR] [--name NAME]\n"
	"                         [--idx NN]\n"
	"Serve as an NRI plugin (default socket " DEFAULT_SOCKET ", name " DEFAULT_NAME
	",\nindex " DEFAULT_IDX "); SIGTERM or SIGINT ends it, SIGHUP makes it read the node\n"
	"again.\n";

int orh_cmd_nri(struct orh_ctx *ctx, int argc, char **argv)
{
	/* a runtime that starts the plugin itself names it in the environment */
	const char *env_name = getenv("NRI_PLUGIN_NAME"), *env_idx = getenv("NRI_PLUGIN_IDX");
	const char *sock = DEFAULT_SOCKET, *name = env_name && *env_name ? env_name : DEFAULT_NAME;
	const char *idx = env_idx && *env_idx ? env_idx : DEFAULT_IDX;
	const char *config = NULL, *sysroot = NULL;
	const struct orh_opt opts[] = {
		{ "--socket", &sock, NULL },   { "--config", &config, NULL },
		{ "--sysroot", &sysroot, NULL }, { "--name", &name, NULL },
		{ "--idx", &idx, NULL },
	};
	const struct orh_args a = { .cmd = "nri", .usage = usage };
	_cleanup_free_ char *id = NULL;
	struct sigaction sa = { .sa_handler = on_stop }, hup = { .sa_handler = on_hup };
	sigset_t block, run_mask;
	unsigned backoff = BACKOFF_FIRST_MS;
	int fd = inherited(), last_err = 0;
	bool once = fd >= 0;
	int r = orh_args_parse(&a, argc, argv, 1, opts, ORH_ARRAY_SIZE(opts), NULL);

	if (r)
		return r < 0 ? ORH_EXIT_OK : r;
	if (strlen(idx) != 2 || idx[0] < '0' || idx[0] > '9' || idx[1] < '0' || idx[1] > '9') {
		fprintf(stderr, "oci-rdma-hook: nri: --idx '%s': two digits wanted\n", idx);
		return ORH_EXIT_USAGE;
	}
	if (config) {
		ctx->config_path = config;
		ctx->config_explicit = true;
	}
	if (sysroot)
		ctx->sysroot = ctx->sysroot_opt = sysroot;
	if (orh_nri_config_reload(ctx) < 0) {
		fprintf(stderr, "oci-rdma-hook: nri: %s\n", ctx->config_err.msg);
		return ORH_EXIT_USAGE;
	}
	orh_json_seed(); /* before the first worker */
	orh_nri_node_read(ctx);
	/* a runtime that started the plugin does not keep its stderr */
	if (once)
		orh_log_open("oci-rdma-hook", true);
	orh_nri_stage_probe();
	if (orh_nri_stage_not_here() && ctx->cfg.nri_stage == ORH_NRI_STAGE_START)
		orh_log(LOG_INFO, "nri: nri_stage = start, but %s: the containers' nccl-conf "
			"stage is given as an OCI hook, which the runtime runs",
			orh_nri_stage_not_here());
	id = orh_xasprintf("%s-%s", idx, name);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &run_mask);
	sigdelset(&run_mask, SIGTERM);
	sigdelset(&run_mask, SIGINT);
	sigdelset(&run_mask, SIGHUP);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &hup, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* a block of 128 KiB or more is mapped apart and unmapped when freed: the buffers of a
	 * large message or backlog give their memory back (glibc would raise this bound
	 * after the first such block is freed, and keep the next ones in its heap) */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);

	while (!stopping) {
		struct orh_nri_conn c = { .ctx = ctx, .id = id, .next_stream = 1,
					  .timeout_ms = ORH_NRI_DEFAULT_TIMEOUT_MS };
		struct timespec ts;

		if (!once)
			fd = connect_to(sock);
		if (fd < 0) {
			if (fd != last_err)
				orh_log(LOG_WARNING, "nri: connecting to '%s': %s: trying again",
					sock, strerror(-fd));
			last_err = fd;
			ts.tv_sec = backoff / 1000;
			ts.tv_nsec = (long)(backoff % 1000) * 1000000;
			ppoll(NULL, 0, &ts, &run_mask);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		orh_log(LOG_INFO, "nri: connected to %s: registering as %s-%s",
			once ? "the runtime that started the plugin" : sock, idx, name);
		last_err = 0;
		backoff = BACKOFF_FIRST_MS;
		c.fd = fd;
		serve(&c, name, idx, &run_mask);
		close(fd);
		orh_mux_in_free(&c.in);
		free(c.out.p);
		if (!stopping)
			orh_log(LOG_WARNING, "nri: the connection to the runtime is lost: %s",
				once ? "the runtime starts the plugin again" : "connecting again");
		if (once)
			break;
	}
	orh_nri_log_flush(orh_now_ms(), true);
	if (stopping)
		orh_log(LOG_INFO, "nri: stopped");
	return ORH_EXIT_OK;
}
