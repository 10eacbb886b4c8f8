/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook nri: an NRI plugin (github.com/containerd/nri). It connects to the
 * runtime's socket (or uses the one in NRI_PLUGIN_SOCKET, when the runtime started it),
 * registers, subscribes to CreateContainer alone and answers each with the adjustment of
 * the spec edit every other way in makes (orh_nri_serve, include/orh/nri.h). Each
 * CreateContainer is decided in a child process of its own while this one goes on
 * serving: an answer not ready by three quarters of the runtime's request timeout is
 * given up (the child killed) and the container gets nothing, or is refused when
 * on_error = fail and it asked. The child reads the request (this process only passes its
 * bytes on: a large one costs the event loop nothing), says which container it is, reads
 * the node config, and hands the node it read to the container's nccl-conf stage
 * (orh/handoff.h) before it answers. What the runtime can make the plugin hold is bounded:
 * its connection is not read while more than OUT_MAX bytes of answers wait for it to read
 * them, or while every worker is busy; the lines a runtime's requests cause are at most a
 * few in each LOG_WINDOW_MS, the others counted. A lost connection is made again, waiting
 * longer each time up to a second, until SIGTERM or SIGINT ends the plugin (status 0).
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "orh/args.h"
#include "orh/commands.h"
#include "orh/handoff.h"
#include "orh/nri.h"
#include "orh/record.h"
#include "orh/statedir.h"
#include "orh/ttrpc.h"

#define DEFAULT_SOCKET "/var/run/nri/nri.sock"
#define DEFAULT_NAME "oci-rdma-hook"
#define DEFAULT_IDX "50"
/* the runtime's request timeout when Configure does not say (NRI's default) */
#define DEFAULT_TIMEOUT_MS 2000
#define MAX_WORKERS 64
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 1000
/* the bytes of answers the runtime has not read yet above which its connection is not read
 * (nor another request taken) until they are down to it again */
#define OUT_MAX (1u << 20)
/* lines of a kind logged at most in a window: the runtime's requests' warnings, and the
 * containers' lines; the others are counted, and the count logged when the window ends */
#define LOG_WINDOW_MS 10000
#define PEER_BURST 5
#define CTR_BURST 100
/* A worker's output: its header (orh_nri_worker_head_put(), the name at most WHAT_MAX
 * bytes), then its answer: one byte (0: the response's payload follows, 1: a refusal's
 * reason follows), then its bytes */
#define WHAT_MAX 512
#define WORKER_OUT_MAX (WHAT_MAX + 2 + ORH_TTRPC_MSG_MAX + 1)

static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

static struct orh_nri_limit peer_lines = { .what = "warning(s) about the runtime's messages",
					  .burst = PEER_BURST, .window_ms = LOG_WINDOW_MS };
static struct orh_nri_limit ctr_lines = { .what = "container line(s)", .burst = CTR_BURST,
					 .window_ms = LOG_WINDOW_MS };
static struct orh_nri_limit *const limits[] = { &peer_lines, &ctr_lines };

/* Once a window is over (or now, when force): the count of its lines not logged. */
static void limit_flush(struct orh_nri_limit *l, double now, bool force)
{
	double secs = (now - l->start) / 1000;
	unsigned long k = orh_nri_limit_end(l, now, force);

	if (k)
		orh_log(LOG_WARNING, "nri: %lu more %s not logged in %.0f s (%u in %.0f s at most)",
			k, l->what, secs, l->burst, l->window_ms / 1000);
}

/* May one more line of this kind be logged now? */
static bool limit_take(struct orh_nri_limit *l)
{
	double now = orh_now_ms();

	limit_flush(l, now, false);
	return orh_nri_limit_take(l, now);
}

#define LIMITED_LOG(l, ...) do { if (limit_take(l)) orh_log(__VA_ARGS__); } while (0)
#define PEER_LOG(...) LIMITED_LOG(&peer_lines, __VA_ARGS__)
#define CTR_LOG(...) LIMITED_LOG(&ctr_lines, __VA_ARGS__)

/* In a worker: its lines are not logged (the containers' limit said so when it started). */
static bool quiet;

#define WORKER_LOG(...) do { if (!quiet) orh_log(__VA_ARGS__); } while (0)

struct worker {
	pid_t pid;
	int fd;                 /* the read end of its pipe */
	uint32_t stream;        /* the request's ttrpc stream */
	double deadline;        /* orh_now_ms() */
	bool refuse_late;       /* a late answer refuses: on_error = fail and it asked */
	char *what;             /* "container ID (NAME, pod NS/NAME)" for the log (orh_log
				 * escapes it), from its header */
	size_t head;            /* the header's bytes in out; 0 until it is whole */
	struct orh_buf out;
};

struct conn {
	struct orh_ctx *ctx;
	int fd;
	struct orh_mux_in in;
	struct orh_buf out;     /* frames not written yet */
	uint32_t next_stream;   /* the next stream of ours on the runtime's connection */
	uint32_t register_stream;
	int64_t timeout_ms;     /* the runtime's request timeout */
	struct worker w[MAX_WORKERS];
	size_t n_w;
};

static void respond(struct conn *c, uint32_t stream, int32_t code, const char *msg,
		    const struct orh_buf *payload)
{
	struct orh_buf b = { 0 };

	orh_ttrpc_response_encode(&b, code, msg, payload ? payload->p : NULL,
				  payload ? payload->n : 0);
	orh_mux_put_msg(&c->out, ORH_MUX_PLUGIN, stream, ORH_TTRPC_RESPONSE, 0, b.p, b.n);
	free(b.p);
}

static void call(struct conn *c, const char *method, const struct orh_buf *payload)
{
	struct orh_buf b = { 0 };

	orh_ttrpc_request_encode(&b, ORH_NRI_RUNTIME_SERVICE, method, payload->p, payload->n);
	c->register_stream = c->next_stream;
	/* flags 0, as ttrpc's own client sends a unary request */
	orh_mux_put_msg(&c->out, ORH_MUX_RUNTIME, c->next_stream, ORH_TTRPC_REQUEST, 0, b.p, b.n);
	c->next_stream += 2; /* a client's streams are odd and increasing */
	free(b.p);
}

static void log_served(const char *what, const struct orh_edit_result *res,
		       const struct orh_nri_adjust *adj)
{
	size_t hooks = 0;

	for (size_t i = 0; i < res->warnings.n; i++)
		WORKER_LOG(LOG_WARNING, "nri: %s: %s", what, res->warnings.v[i]);
	if (orh_nri_adjust_empty(adj)) {
		WORKER_LOG(LOG_INFO, "nri: %s: nothing given: %s", what,
			   res->why[0] ? res->why : "no RDMA device to give");
		return;
	}
	for (unsigned k = 0; k < ORH_NRI_HOOK_KINDS; k++)
		hooks += adj->hooks.n[k];
	WORKER_LOG(LOG_INFO,
		   "nri: %s: %zu device(s), %zu cgroup rule(s), memlock %s, %zu hook(s), %zu "
		   "environment setting(s), %zu mount(s) given",
		   what, adj->n_devices, adj->n_rules, adj->n_rlimits ? "set" : "unchanged", hooks,
		   adj->env.n, adj->n_mounts);
}

/* The node as the decision read it, for the container's nccl-conf stage, before the answer
 * that registers that stage goes out; one that cannot be written is a warning (the stage
 * then reads the node itself). The first state directory of a container sweeps those of
 * containers gone (at most once a minute). */
static void hand_off(const struct orh_ctx *ctx, const struct orh_nri_create *req,
		     const char *what, struct orh_edit_result *res)
{
	struct orh_err err = { 0 };
	bool created = false;

	if (orh_handoff_write(ORH_RUN_DIR, req->ctr.id, NULL, res->token, ctx->sysroot,
			      TAKE_PTR(res->snapshot), &created, &err) < 0) {
		WORKER_LOG(LOG_WARNING, "nri: %s: %s; its nccl-conf stage reads the node itself",
			   what, err.msg);
		orh_handoff_drop(ORH_RUN_DIR, req->ctr.id);
	}
	if (created)
		orh_record_sweep(ORH_RUN_DIR, "/proc", req->ctr.id, ORH_RECORD_SWEEP_EVERY);
}

/* The node config as it is now: each CreateContainer reads it again (a ConfigMap that
 * changed applies to the next container), and the sysroot it names unless --sysroot was
 * given. */
static int reload(struct orh_ctx *ctx)
{
	int r;

	orh_config_free(&ctx->cfg);
	orh_config_defaults(&ctx->cfg);
	orh_err_clear(&ctx->config_err);
	r = orh_config_load(&ctx->cfg, ctx->config_path, ctx->config_explicit, &ctx->config_err);
	if (r < 0) {
		orh_config_free(&ctx->cfg);
		orh_config_defaults(&ctx->cfg);
	}
	if (!ctx->sysroot_opt)
		ctx->sysroot = ctx->cfg.sysroot ? ctx->cfg.sysroot : "/";
	return r;
}

static void __attribute__((noreturn)) worker_exit(int fd, const struct orh_buf *out)
{
	_exit(orh_write_all(fd, out->p, out->n) < 0 ? ORH_EXIT_FAIL : ORH_EXIT_OK);
}

/* The child: read the request (at most ORH_NRI_FIELDS_MAX fields), read the node config,
 * write the header (the parent answers from it should the decision not end in time), decide,
 * hand the node to the nccl-conf stage, write the answer to fd, exit. */
static void __attribute__((noreturn))
worker_main(struct orh_ctx *ctx, const uint8_t *p, size_t n, int fd)
{
	struct orh_nri_create req;
	struct orh_edit_result res = { 0 };
	struct orh_nri_adjust adj = { 0 };
	struct orh_err err = { 0 };
	struct orh_buf out = { 0 };
	char *what;
	int r = orh_nri_create_decode(p, n, &req, &err);

	if (r < 0) {
		WORKER_LOG(LOG_ERR, "nri: a CreateContainer request not read: %s: nothing given",
			   err.msg);
		orh_nri_worker_head_put(&out, false, "a CreateContainer request not read");
		orh_buf_addc(&out, 0);
		worker_exit(fd, &out);
	}
	what = orh_nri_describe(&req, WHAT_MAX);
	if (reload(ctx) < 0) {
		/* no config to say on_error: the container starts as it would without us */
		WORKER_LOG(LOG_ERR, "nri: %s: nothing given: %s", what, ctx->config_err.msg);
		orh_nri_worker_head_put(&out, false, what);
		orh_buf_addc(&out, 0);
		worker_exit(fd, &out);
	}
	orh_nri_worker_head_put(&out, orh_nri_refuses(&ctx->cfg, &req), what);
	if (orh_write_all(fd, out.p, out.n) < 0)
		_exit(ORH_EXIT_FAIL);
	out.n = 0;
	r = orh_nri_serve(ctx, &req, &adj, &res, &err);
	if (r == 0 && res.snapshot && req.ctr.id)
		hand_off(ctx, &req, what, &res);

	if (r < 0 && orh_edit_must_fail(&ctx->cfg, &res)) {
		/* the runtime reads the reason as a protobuf string: UTF-8 */
		_cleanup_free_ char *why = orh_text_escape(err.msg);

		WORKER_LOG(LOG_ERR, "nri: %s: refused: %s", what, err.msg);
		orh_buf_addc(&out, 1);
		orh_buf_add(&out, why, strlen(why));
	} else {
		if (r < 0)
			WORKER_LOG(LOG_WARNING, "nri: %s: nothing given: %s", what, err.msg);
		else
			log_served(what, &res, &adj);
		orh_buf_addc(&out, 0);
		if (r == 0)
			orh_nri_create_response_encode(&out, &adj);
	}
	worker_exit(fd, &out);
}

static void worker_answer(struct conn *c, struct worker *w, bool late)
{
	char *ans = w->out.p + w->head;
	size_t n = w->head ? w->out.n - w->head : 0;

	if (late || n == 0) {
		/* killed, or it died before answering */
		CTR_LOG(LOG_ERR, "nri: %s: %s: %s", w->what,
			late ? "no decision within the runtime's request timeout" : "no decision",
			w->refuse_late ? "refused (on_error = fail)" : "nothing given");
		if (w->refuse_late)
			respond(c, w->stream, ORH_RPC_UNKNOWN,
				late ? "oci-rdma-hook: no decision in time for a container that "
				       "asked for RDMA (on_error = fail)" :
				       "oci-rdma-hook: no decision for a container that asked for "
				       "RDMA (on_error = fail)", NULL);
		else
			respond(c, w->stream, ORH_RPC_OK, NULL, NULL);
		return;
	}
	if (ans[0] == 1) {
		char *msg = orh_xasprintf("oci-rdma-hook: %s", ans + 1);

		respond(c, w->stream, ORH_RPC_UNKNOWN, msg, NULL);
		free(msg);
		return;
	}
	respond(c, w->stream, ORH_RPC_OK, NULL, &(struct orh_buf){ .p = ans + 1, .n = n - 1 });
}

/* Workers killed that have not ended yet: one in an uninterruptible sleep (a read of a
 * hung file system) dies only when it leaves it, and nobody waits for it. Each is reaped
 * when it has ended (reap()); until then it is a zombie at most, so its pid is never
 * another process's when it is signalled. */
static pid_t dying[256];
static size_t n_dying;

static void reap(void)
{
	for (size_t i = n_dying; i-- > 0;)
		if (waitpid(dying[i], NULL, WNOHANG) != 0)
			dying[i] = dying[--n_dying];
}

static void worker_end(struct conn *c, size_t i, bool answer, bool late)
{
	struct worker *w = &c->w[i];

	if (late) {
		pid_t r;

		kill(w->pid, SIGKILL);
		r = waitpid(w->pid, NULL, WNOHANG);
		if (r == 0 && n_dying < ORH_ARRAY_SIZE(dying))
			dying[n_dying++] = w->pid;
		else if (r == 0) /* no room left: wait for it */
			while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
				;
	} else {
		/* its pipe reached its end: it has written its answer and exits */
		while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (answer)
		worker_answer(c, w, late);
	close(w->fd);
	free(w->what);
	free(w->out.p);
	c->w[i] = c->w[--c->n_w];
}

/* No worker could be started (no pipe, no fork): the request is read here, bounded as a
 * worker reads it, and answered at once as a decision not made. */
static void not_decided(struct conn *c, uint32_t stream, const struct orh_ttrpc_request *rq,
			const char *why)
{
	struct worker none = { .stream = stream };
	struct orh_nri_create req;
	struct orh_err err = { 0 };

	if (orh_nri_create_decode(rq->payload, rq->payload_len, &req, &err) < 0) {
		none.what = orh_xasprintf("a CreateContainer request not read (%s)", err.msg);
	} else {
		none.what = orh_nri_describe(&req, WHAT_MAX);
		/* no config to say on_error: the container starts as it would without us */
		none.refuse_late = reload(c->ctx) == 0 && orh_nri_refuses(&c->ctx->cfg, &req);
		orh_nri_create_free(&req);
	}
	CTR_LOG(LOG_ERR, "nri: %s: not decided: %s", none.what, why);
	worker_answer(c, &none, false);
	free(none.what);
}

/* A worker for the request; the caller saw that one is free (can_take()). */
static void create_container(struct conn *c, uint32_t stream, const struct orh_ttrpc_request *rq)
{
	int64_t budget = c->timeout_ms;
	int fds[2] = { -1, -1 };
	struct worker *w;
	bool loud;
	pid_t pid;

	if (rq->timeout_nano > 0 && rq->timeout_nano / 1000000 < budget)
		budget = rq->timeout_nano / 1000000;
	if (pipe2(fds, O_CLOEXEC) < 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
		not_decided(c, stream, rq, strerror(errno));
		if (fds[0] >= 0) {
			close(fds[0]);
			close(fds[1]);
		}
		return;
	}
	loud = limit_take(&ctr_lines);
	pid = fork();
	if (pid == 0) {
		sigset_t none;

		close(fds[0]);
		close(c->fd);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		quiet = !loud;
		worker_main(c->ctx, rq->payload, rq->payload_len, fds[1]);
	}
	close(fds[1]);
	if (pid < 0) {
		char *why = orh_xasprintf("fork: %s", strerror(errno));

		close(fds[0]);
		not_decided(c, stream, rq, why);
		free(why);
		return;
	}
	w = &c->w[c->n_w++];
	memset(w, 0, sizeof(*w));
	w->pid = pid;
	w->fd = fds[0];
	w->stream = stream;
	w->deadline = orh_now_ms() + (double)(budget * 3 / 4);
	w->what = orh_xstrdup("a container whose request was not read in time");
}

static void configure(struct conn *c, uint32_t stream, const struct orh_ttrpc_request *rq)
{
	struct orh_nri_configure cf;
	struct orh_err err = { 0 };
	struct orh_buf b = { 0 };

	if (orh_nri_configure_decode(rq->payload, rq->payload_len, &cf, &err) < 0) {
		PEER_LOG(LOG_WARNING, "nri: %s", err.msg);
		memset(&cf, 0, sizeof(cf));
	}
	if (cf.request_timeout_ms > 0)
		c->timeout_ms = cf.request_timeout_ms;
	PEER_LOG(LOG_INFO, "nri: configured by %s %s (request timeout %lld ms): serving "
		 "CreateContainer", cf.runtime_name ? cf.runtime_name : "a runtime",
		 cf.runtime_version ? cf.runtime_version : "", (long long)c->timeout_ms);
	orh_nri_configure_response_encode(&b, ORH_NRI_EVENT_CREATE_CONTAINER);
	respond(c, stream, ORH_RPC_OK, NULL, &b);
	free(b.p);
	orh_nri_configure_free(&cf);
}

/* Plugin service methods answered with an empty message: those of events not subscribed
 * to, should one come. */
static const char *const empty_methods[] = {
	"Shutdown", "RunPodSandbox", "UpdatePodSandbox", "PostUpdatePodSandbox",
	"StopPodSandbox", "RemovePodSandbox", "PostCreateContainer", "StartContainer",
	"PostStartContainer", "UpdateContainer", "PostUpdateContainer", "StopContainer",
	"RemoveContainer", "StateChange",
};

static void request(struct conn *c, const struct orh_ttrpc_msg *m)
{
	struct orh_ttrpc_request rq;
	struct orh_err err = { 0 };
	struct orh_buf b = { 0 };
	bool more = false;

	if (orh_ttrpc_request_decode(m->payload, m->len, &rq, &err) < 0) {
		PEER_LOG(LOG_WARNING, "nri: %s", err.msg);
		respond(c, m->hdr.stream, ORH_RPC_UNKNOWN, err.msg, NULL);
		return;
	}
	if (strcmp(rq.service, ORH_NRI_PLUGIN_SERVICE)) {
		respond(c, m->hdr.stream, ORH_RPC_UNIMPLEMENTED, "no such service", NULL);
	} else if (!strcmp(rq.method, "CreateContainer")) {
		create_container(c, m->hdr.stream, &rq);
	} else if (!strcmp(rq.method, "Configure")) {
		configure(c, m->hdr.stream, &rq);
	} else if (!strcmp(rq.method, "Synchronize")) {
		if (orh_nri_sync_decode(rq.payload, rq.payload_len, &more, &err) < 0)
			PEER_LOG(LOG_WARNING, "nri: %s", err.msg);
		orh_nri_sync_response_encode(&b, more);
		respond(c, m->hdr.stream, ORH_RPC_OK, NULL, &b);
	} else {
		bool known = false;

		for (size_t i = 0; i < ORH_ARRAY_SIZE(empty_methods); i++)
			known |= !strcmp(rq.method, empty_methods[i]);
		if (!strcmp(rq.method, "Shutdown"))
			PEER_LOG(LOG_INFO, "nri: the runtime shuts the plugin down");
		respond(c, m->hdr.stream, known ? ORH_RPC_OK : ORH_RPC_UNIMPLEMENTED,
			known ? NULL : "not implemented by oci-rdma-hook", NULL);
	}
	free(b.p);
	orh_ttrpc_request_free(&rq);
}

/* A message of the runtime's connection: the answer to RegisterPlugin. -1 when it
 * refused the plugin. */
static int response(struct conn *c, const struct orh_ttrpc_msg *m)
{
	struct orh_ttrpc_response rs;
	struct orh_err err = { 0 };
	int r = 0;

	if (m->hdr.type != ORH_TTRPC_RESPONSE || m->hdr.stream != c->register_stream)
		return 0;
	if (orh_ttrpc_response_decode(m->payload, m->len, &rs, &err) < 0) {
		orh_log(LOG_ERR, "nri: registering: %s", err.msg);
		return -1;
	}
	if (rs.code != ORH_RPC_OK) {
		orh_log(LOG_ERR, "nri: the runtime refused the registration: %s (code %d)",
			rs.message ? rs.message : "", rs.code);
		r = -1;
	} else {
		PEER_LOG(LOG_INFO, "nri: registered");
	}
	orh_ttrpc_response_free(&rs);
	return r;
}

/* Read what came into the multiplexer. -1: the connection is done. */
static int on_input(struct conn *c)
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
 * down to OUT_MAX, and a worker is free? */
static bool can_take(const struct conn *c)
{
	return c->out.n <= OUT_MAX && c->n_w < MAX_WORKERS;
}

/* Handle each whole message read, while can_take(). -1: the connection is done. */
static int dispatch(struct conn *c)
{
	struct orh_ttrpc_msg m;
	struct orh_err err = { 0 };
	int r = 0;

	while (can_take(c) && (r = orh_mux_take(&c->in, &m, &err)) > 0) {
		if (m.conn == ORH_MUX_PLUGIN && m.hdr.type == ORH_TTRPC_REQUEST)
			request(c, &m);
		else if (m.conn == ORH_MUX_RUNTIME)
			r = response(c, &m);
		free(m.payload);
		if (r < 0)
			return -1;
	}
	if (r < 0)
		orh_log(LOG_ERR, "nri: %s", err.msg);
	return r < 0 ? -1 : 0;
}

static int on_output(struct conn *c)
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

static void worker_input(struct conn *c, size_t i)
{
	struct worker *w = &c->w[i];
	char buf[65536];
	ssize_t n = read(w->fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n > 0 && w->out.n + (size_t)n <= WORKER_OUT_MAX) {
		orh_buf_add(&w->out, buf, (size_t)n);
		if (!w->head && (w->head = orh_nri_worker_head_get(w->out.p, w->out.n,
								    &w->refuse_late))) {
			free(w->what);
			w->what = orh_xstrdup(w->out.p + 1);
		}
		return;
	}
	if (n > 0) /* more than any answer: not one */
		w->out.n = w->head;
	worker_end(c, i, true, false);
}

/* Serve one connection until it is lost or the plugin is stopped. */
static void serve(struct conn *c, const char *name, const char *idx, const sigset_t *run_mask)
{
	struct orh_buf reg = { 0 };

	orh_nri_register_encode(&reg, name, idx);
	call(c, "RegisterPlugin", &reg);
	free(reg.p);
	while (!stopping) {
		struct pollfd p[1 + MAX_WORKERS];
		double now = orh_now_ms(), next = -1;
		struct timespec ts, *tsp = NULL;
		size_t polled = c->n_w;
		int r;

		p[0] = (struct pollfd){ .fd = c->fd, .events = (can_take(c) ? POLLIN : 0) |
							      (c->out.n ? POLLOUT : 0) };
		for (size_t i = 0; i < c->n_w; i++) {
			p[1 + i] = (struct pollfd){ .fd = c->w[i].fd, .events = POLLIN };
			if (next < 0 || c->w[i].deadline < next)
				next = c->w[i].deadline;
		}
		if (n_dying && (next < 0 || next > now + 1000))
			next = now + 1000; /* look for the killed ones that have ended */
		for (size_t i = 0; i < ORH_ARRAY_SIZE(limits); i++) /* a count to log */
			if (limits[i]->dropped && (next < 0 || next > limits[i]->start + LOG_WINDOW_MS))
				next = limits[i]->start + LOG_WINDOW_MS;
		if (next >= 0) {
			double ms = next > now ? next - now : 0;

			ts.tv_sec = (time_t)(ms / 1000);
			ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
			tsp = &ts;
		}
		r = ppoll(p, 1 + c->n_w, tsp, run_mask);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && (p[0].revents & (POLLERR | POLLNVAL)))
			break;
		if (r > 0 && (p[0].revents & POLLOUT) && on_output(c) < 0)
			break;
		if (r > 0 && (p[0].revents & (POLLIN | POLLHUP)) && on_input(c) < 0)
			break;
		/* from the last polled: worker_end() moves the last into the place it frees,
		 * one polled and seen to already */
		for (size_t i = polled; r > 0 && i-- > 0;)
			if (p[1 + i].revents)
				worker_input(c, i);
		now = orh_now_ms();
		for (size_t i = c->n_w; i-- > 0;)
			if (c->w[i].deadline <= now)
				worker_end(c, i, true, true);
		/* the messages read, as far as the answers waiting and the workers free allow */
		if (dispatch(c) < 0)
			break;
		reap();
		for (size_t i = 0; i < ORH_ARRAY_SIZE(limits); i++)
			limit_flush(limits[i], now, false);
	}
	/* a lost connection takes the decisions under way with it: nobody waits for them */
	while (c->n_w)
		worker_end(c, c->n_w - 1, false, true);
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

/* The nri command's own --config and --sysroot, over the ones before the command. */
static int load_config(struct orh_ctx *ctx, const char *config, const char *sysroot)
{
	if (config) {
		ctx->config_path = config;
		ctx->config_explicit = true;
	}
	if (sysroot)
		ctx->sysroot = ctx->sysroot_opt = sysroot;
	if (reload(ctx) < 0) {
		fprintf(stderr, "oci-rdma-hook: nri: %s\n", ctx->config_err.msg);
		return -1;
	}
	return 0;
}

static const char usage[] =
	"Usage: oci-rdma-hook nri [--socket PATH] [--config FILE] [--sysroot DIR] [--name NAME]\n"
	"                         [--idx NN]\n"
	"Serve as an NRI plugin (default socket " DEFAULT_SOCKET ", name " DEFAULT_NAME
	",\nindex " DEFAULT_IDX "); SIGTERM or SIGINT ends it.\n";

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
	struct sigaction sa = { .sa_handler = on_stop };
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
	if (load_config(ctx, config, sysroot) < 0)
		return ORH_EXIT_USAGE;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &run_mask);
	sigdelset(&run_mask, SIGTERM);
	sigdelset(&run_mask, SIGINT);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* a block of 128 KiB or more is mapped apart and unmapped when freed: the buffers of a
	 * large message or backlog give their memory back (glibc would raise this bound
	 * after the first such block is freed, and keep the next ones in its heap) */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);

	while (!stopping) {
		struct conn c = { .ctx = ctx, .next_stream = 1, .timeout_ms = DEFAULT_TIMEOUT_MS };
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
	for (size_t i = 0; i < ORH_ARRAY_SIZE(limits); i++)
		limit_flush(limits[i], orh_now_ms(), true);
	if (stopping)
		orh_log(LOG_INFO, "nri: stopped");
	return ORH_EXIT_OK;
}
