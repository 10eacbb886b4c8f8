/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NRI plugin's workers (include/orh/cmd/nri_plugin.h): each CreateContainer is decided
 * in a child process while the plugin goes on serving: the resident one (nri_resident.c,
 * which calls orh_nri_resident_decide() for each request it is handed), else one of its
 * own, which exits once it has answered. The child reads the request (the plugin only
 * passes its bytes on: a large one costs the event loop nothing), says which container it
 * is, reads the node config, decides (from the node the plugin keeps, where it can), and
 * hands the node it read to the container's nccl-conf stage (orh/apply/handoff.h) before it
 * answers through its pipe. An answer not ready by three quarters of the runtime's request
 * timeout is given up (the child killed) and the container gets nothing, or is refused
 * when on_error = fail and it asked. A StartContainer whose stage the plugin runs is run by
 * a child of its own (start_main()).
 * Without hooks (nri_hooks = no, or auto once the runtime was seen rejecting them:
 * orh_nri_hooks_off()), the worker writes the container's /etc/nccl.conf and record itself
 * (orh_nri_serve_as()).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/apply/handoff.h"
#include "orh/base/log.h"
#include "orh/base/sandbox.h"
#include "orh/cmd/nri_plugin.h"
#include "orh/apply/record.h"
#include "orh/apply/statedir.h"
#include "orh/apply/sweep.h"
#include "orh/cmd/commands.h"

/* A worker's output: its header (orh_nri_worker_head_put(), the name at most WHAT_MAX
 * bytes), then its answer: one byte (0: the response's payload follows, 1: a refusal's
 * reason follows, 2: the container's id and a NUL, then the payload of a response that
 * gives hooks), then its bytes */
#define WHAT_MAX 512
#define WORKER_OUT_MAX (WHAT_MAX + 2 + NAME_MAX + 1 + ORH_TTRPC_MSG_MAX + 1)

/* Why this plugin cannot run the nccl-conf stage at StartContainer (NULL: it can): the
 * runtime's pids must be its own, and the stage needs the hook's capabilities
 * (orh_nri_stage_probe()) */
static const char *no_start;
/* The proc file system's inode of the initial PID namespace (PROC_PID_INIT_INO) */
#define PID_NS_INIT_INO 0xEFFFFFFCU

void orh_nri_stage_probe(void)
{
	static const unsigned caps[] = { CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_CHROOT,
					 CAP_DAC_OVERRIDE, CAP_FOWNER };
	struct stat st;

	no_start = NULL;
	if (stat("/proc/self/ns/pid", &st) == 0 && st.st_ino != PID_NS_INIT_INO)
		no_start = "the plugin is not in the host's PID namespace (a container without "
			   "hostPID): the runtime's pids do not name its processes";
	else if (!orh_in_initial_userns())
		no_start = "the plugin runs in a user namespace";
	for (size_t i = 0; !no_start && i < ORH_ARRAY_SIZE(caps); i++)
		if (!orh_caps_effective(caps[i]))
			no_start = "the plugin lacks a capability the stage needs (CAP_SYS_ADMIN, "
				   "CAP_SYS_PTRACE, CAP_SYS_CHROOT, CAP_DAC_OVERRIDE, CAP_FOWNER)";
}

const char *orh_nri_stage_not_here(void)
{
	return no_start;
}

/* Why containers are served without hooks under nri_hooks = auto (NULL: they are not): set
 * in the plugin, inherited by the workers it starts after. */
static char *hooks_off;
/* The last containers answered with hooks, the oldest replaced first */
static char *hooked[ORH_NRI_MAX_WORKERS * 4];
static size_t next_hooked;

void orh_nri_hooks_off(const char *why)
{
	orh_nri_resident_stop(); /* it would give hooks still */
	free(hooks_off);
	hooks_off = orh_xstrdup(why);
}

bool orh_nri_hooked_take(const char *id)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(hooked); i++)
		if (hooked[i] && !strcmp(hooked[i], id)) {
			free(hooked[i]);
			hooked[i] = NULL;
			return true;
		}
	return false;
}

static void hooked_add(const char *id)
{
	free(hooked[next_hooked]);
	hooked[next_hooked] = orh_xstrdup(id);
	next_hooked = (next_hooked + 1) % ORH_ARRAY_SIZE(hooked);
}

/* Why this container is served without hooks, as the node config says (NULL: with). */
static const char *hookless_why(const struct orh_config *cfg)
{
	if (cfg->nri_hooks == ORH_NRI_HOOKS_NO)
		return "nri_hooks = no in the node config";
	return cfg->nri_hooks == ORH_NRI_HOOKS_AUTO ? hooks_off : NULL;
}

/* In a worker: its lines are not logged (the containers' limit said so when it started). */
static bool quiet;
/* In the resident worker (nri_resident.c): a decision's end goes back to its loop. */
static bool resident;
static jmp_buf resident_next;

#define WORKER_LOG(...) do { if (!quiet) orh_log(__VA_ARGS__); } while (0)
#define CTR_LOG(...) ORH_NRI_LOG(ORH_NRI_CTR, __VA_ARGS__)

static void log_served(const char *what, const struct orh_edit_result *res,
		       const struct orh_nri_adjust *adj, const char *hookless)
{
	size_t hooks = orh_nri_adjust_hooks(adj);

	for (size_t i = 0; i < res->warnings.n; i++)
		WORKER_LOG(LOG_WARNING, "nri: %s: %s", what, res->warnings.v[i]);
	if (orh_nri_adjust_empty(adj)) {
		WORKER_LOG(LOG_INFO, "nri: %s: nothing given: %s", what,
			   res->why[0] ? res->why : "no RDMA device to give");
		return;
	}
	WORKER_LOG(LOG_INFO,
		   "nri: %s: %zu device(s), %zu cgroup rule(s), memlock %s, %zu hook(s), %zu "
		   "environment setting(s), %zu mount(s) given%s%s%s",
		   what, adj->n_devices, adj->n_rules, adj->n_rlimits ? "set" : "unchanged", hooks,
		   adj->env.n, adj->n_mounts, hookless ? ", served without hooks (" : "",
		   hookless ? hookless : "", hookless ? ")" : "");
}

/* The node as the decision read it, for the container's nccl-conf stage, before the answer
 * that registers that stage goes out; one that cannot be written is a warning (the stage
 * then reads the node itself). The first state directory of a container sweeps those of
 * containers gone (at most once a minute). */
static bool hand_off(const struct orh_ctx *ctx, const struct orh_nri_create *req,
		     const char *what, struct orh_edit_result *res)
{
	struct orh_err err = { 0 };
	bool created = false, ok = true;

	if (orh_handoff_write(ORH_RUN_DIR, req->ctr.id, NULL, res->token, ctx->sysroot,
			      TAKE_PTR(res->snapshot), &created, &err) < 0) {
		WORKER_LOG(LOG_WARNING, "nri: %s: %s; its nccl-conf stage reads the node itself",
			   what, err.msg);
		orh_handoff_drop(ORH_RUN_DIR, req->ctr.id);
		ok = false;
	}
	if (created)
		orh_record_sweep(ORH_RUN_DIR, "/proc", req->ctr.id, ORH_RECORD_SWEEP_EVERY);
	return ok;
}

/* nri_stage = start: the stage the edit registered is run by the plugin at StartContainer,
 * and its hooks leave the answer, once the mark that says so is written (after the node it
 * reads); where it cannot be, the hooks stay and the runtime runs the stage. */
static void stage_at_start(const struct orh_nri_create *req, const char *what,
			   const struct orh_edit_result *res, struct orh_nri_adjust *adj,
			   bool handed)
{
	struct orh_err err = { 0 };

	if (!handed)
		orh_fail(&err, EIO, "the node was not handed over");
	else if (orh_handoff_start_mark(ORH_RUN_DIR, req->ctr.id, res->token, &err) == 0) {
		orh_nri_adjust_drop_hooks(adj);
		return;
	}
	WORKER_LOG(LOG_WARNING, "nri: %s: the nccl-conf stage cannot be run at StartContainer "
		   "(%s): given as an OCI hook instead", what, err.msg);
}

/* The answer written: a one-shot worker exits, the resident one closes the answer's pipe
 * and takes the next request. */
static void __attribute__((noreturn)) worker_exit(int fd, const struct orh_buf *out)
{
	int r = out ? orh_write_all(fd, out->p, out->n) : -1;

	if (resident) {
		close(fd);
		if (out)
			free(out->p);
		longjmp(resident_next, 1);
	}
	_exit(r < 0 ? ORH_EXIT_FAIL : ORH_EXIT_OK);
}

/* A worker's start, for either request (r: its decoding's result, err its error): a request
 * not read, or a node config not read, ends the worker with an empty answer (no config says
 * on_error: the container starts as it would without us), its line saying so (none: what is
 * not done); else the header is written, *refuses saying whether a late answer refuses, and
 * the container's description returned. */
static char *worker_begin(struct orh_ctx *ctx, int fd, int r, const struct orh_nri_create *req,
			  const char *request, const char *none, const struct orh_err *err,
			  bool *refuses)
{
	struct orh_buf out = { 0 };
	char *what;

	if (r < 0) {
		what = orh_xasprintf("a %s request not read", request);
		WORKER_LOG(LOG_ERR, "nri: %s: %s: %s", what, err->msg, none);
		orh_nri_worker_head_put(&out, false, what);
		orh_buf_addc(&out, 0);
		worker_exit(fd, &out);
	}
	what = orh_nri_describe(req, WHAT_MAX);
	if (orh_nri_config_reload(ctx) < 0) {
		WORKER_LOG(LOG_ERR, "nri: %s: %s: %s", what, none, ctx->config_err.msg);
		orh_nri_worker_head_put(&out, false, what);
		orh_buf_addc(&out, 0);
		worker_exit(fd, &out);
	}
	*refuses = orh_nri_refuses(&ctx->cfg, req);
	orh_nri_worker_head_put(&out, *refuses, what);
	if (orh_write_all(fd, out.p, out.n) < 0)
		worker_exit(fd, NULL);
	free(out.p);
	return what;
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
	const char *hookless;
	bool refuses;
	char *what;
	int r = orh_nri_create_decode(p, n, &req, &err);

	what = worker_begin(ctx, fd, r, &req, "CreateContainer", "nothing given", &err, &refuses);
	hookless = hookless_why(&ctx->cfg);
	r = orh_nri_serve_as(ctx, &req, hookless, &adj, &res, &err);
	if (r == 0 && res.snapshot && req.ctr.id) {
		bool handed = hand_off(ctx, &req, what, &res);

		if (!hookless && ctx->cfg.nri_stage == ORH_NRI_STAGE_START && !no_start &&
		    orh_nri_adjust_hooks(&adj))
			stage_at_start(&req, what, &res, &adj, handed);
	}

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
			log_served(what, &res, &adj, hookless);
		if (r == 0 && orh_nri_adjust_hooks(&adj) && req.ctr.id && strlen(req.ctr.id) <= NAME_MAX) {
			/* the plugin watches for the runtime rejecting them */
			orh_buf_addc(&out, 2);
			orh_buf_add(&out, req.ctr.id, strlen(req.ctr.id) + 1);
		} else {
			orh_buf_addc(&out, 0);
		}
		if (r == 0)
			orh_nri_create_response_encode(&out, &adj);
	}
	if (resident) { /* what a one-shot worker leaves to its exit */
		orh_nri_adjust_free(&adj);
		orh_edit_result_free(&res);
		orh_nri_create_free(&req);
		free(what);
	}
	worker_exit(fd, &out);
}

void orh_nri_resident_decide(struct orh_ctx *ctx, const uint8_t *p, size_t n, int fd, bool loud)
{
	resident = true;
	quiet = !loud;
	if (setjmp(resident_next) == 0)
		worker_main(ctx, p, n, fd);
}

/* A StartContainer of a container whose stage the plugin runs (its mark in its state
 * directory): read the request, read the node config, write the header, take the hook's
 * seccomp allow-list, run the nccl-conf stage on the created process (orh_hook_at_start()),
 * answer: empty, or the reason the container is to fail (on_error = fail, and it asked). */
static void __attribute__((noreturn))
start_main(struct orh_ctx *ctx, const uint8_t *p, size_t n, int fd)
{
	char token[ORH_HANDOFF_TOKEN_LEN + 1], why[ORH_ERR_MAX] = "";
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	struct orh_buf out = { 0 };
	bool refuses;
	json_t *spec;
	char *what;
	int r = orh_nri_start_decode(p, n, &req, &err);

	/* the stage's own lines too: off while the containers' lines are limited */
	if (quiet)
		orh_log_stderr(false);
	what = worker_begin(ctx, fd, r, &req, "StartContainer", "its nccl-conf stage not run",
			    &err, &refuses);
	if (!req.ctr.pid)
		snprintf(why, sizeof(why), "the runtime's StartContainer names no process");
	else if (!orh_handoff_start_token(ORH_RUN_DIR, req.ctr.id, token))
		snprintf(why, sizeof(why), "its mark in its state directory holds no token");
	/* the stage reads the image (its ELF files among it) under the hook's seccomp
	 * allow-list, as the hook does */
	else if (orh_seccomp_confine(&err) < 0)
		snprintf(why, sizeof(why), "%s", err.msg);
	if (why[0]) {
		WORKER_LOG(refuses ? LOG_ERR : LOG_WARNING, "nri: %s: its nccl-conf stage not run: "
			   "%s%s", what, why, refuses ? "; refused (on_error = fail)" : "");
		r = refuses ? ORH_EXIT_FAIL : ORH_EXIT_OK;
	} else {
		spec = orh_nri_spec(&req);
		r = orh_hook_at_start(ctx, req.ctr.id, (pid_t)req.ctr.pid, spec, token, why,
				      sizeof(why));
		json_decref(spec);
	}
	if (r == ORH_EXIT_FAIL) {
		_cleanup_free_ char *msg = orh_text_escape(why);

		orh_buf_addc(&out, 1);
		orh_buf_add(&out, msg, strlen(msg));
	} else {
		orh_buf_addc(&out, 0);
	}
	worker_exit(fd, &out);
}

static void worker_answer(struct orh_nri_conn *c, struct orh_nri_worker *w, bool late)
{
	char *ans = w->out.p + w->head;
	size_t n = w->head ? w->out.n - w->head : 0;

	if (late || n == 0) {
		/* killed, or it died before answering */
		CTR_LOG(LOG_ERR, "nri: %s: %s: %s", w->what,
			late ? "no decision within the runtime's request timeout" : "no decision",
			w->refuse_late ? "refused (on_error = fail)" : "nothing given");
		if (w->refuse_late)
			orh_nri_respond(&c->out, w->stream, ORH_RPC_UNKNOWN,
				late ? "oci-rdma-hook: no decision in time for a container that "
				       "asked for RDMA (on_error = fail)" :
				       "oci-rdma-hook: no decision for a container that asked for "
				       "RDMA (on_error = fail)", NULL);
		else
			orh_nri_respond(&c->out, w->stream, ORH_RPC_OK, NULL, NULL);
		return;
	}
	if (ans[0] == 2) {
		size_t id = strnlen(ans + 1, n - 1);

		if (id >= n - 1) { /* no NUL: not an answer */
			w->head = 0;
			worker_answer(c, w, false);
			return;
		}
		hooked_add(ans + 1);
		orh_nri_respond(&c->out, w->stream, ORH_RPC_OK, NULL,
				&(struct orh_buf){ .p = ans + 2 + id, .n = n - 2 - id });
		return;
	}
	if (ans[0] == 1) {
		char *msg = orh_xasprintf("oci-rdma-hook: %s", ans + 1);

		orh_nri_respond(&c->out, w->stream, ORH_RPC_UNKNOWN, msg, NULL);
		free(msg);
		return;
	}
	orh_nri_respond(&c->out, w->stream, ORH_RPC_OK, NULL,
			&(struct orh_buf){ .p = ans + 1, .n = n - 1 });
}

/* Workers killed that have not ended yet: one in an uninterruptible sleep (a read of a
 * hung file system) dies only when it leaves it, and nobody waits for it. Each is reaped
 * when it has ended (orh_nri_workers_reap()); until then it is a zombie at most, so its pid
 * is never another process's when it is signalled. */
static pid_t dying[256];
static size_t n_dying;

void orh_nri_workers_reap(void)
{
	for (size_t i = n_dying; i-- > 0;)
		if (waitpid(dying[i], NULL, WNOHANG) != 0)
			dying[i] = dying[--n_dying];
}

void orh_nri_worker_end(struct orh_nri_conn *c, size_t i, bool answer, bool late)
{
	struct orh_nri_worker *w = &c->w[i];
	struct orh_ttrpc_request again = { .method = (char *)"CreateContainer" };
	bool retry = false;

	if (w->resident) {
		/* the resident worker goes on (nri_resident.c); killed when late or dead. Dead
		 * before it answered, in time: a worker of its own decides the request again */
		bool got = !late && w->head && w->out.n > w->head;

		if (late) /* one ended meanwhile is reaped by nri_resident.c: a zombie at most */
			kill(w->pid, SIGKILL);
		orh_nri_resident_done(w->gen, got);
		retry = answer && !got && !late && w->req.p;
	} else if (late) {
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
	if (answer && !retry)
		worker_answer(c, w, late);
	close(w->fd);
	free(w->what);
	free(w->out.p);
	if (retry) {
		uint32_t stream = w->stream;
		struct orh_buf req = w->req;

		/* what is left of the budget, at least 1 ms */
		again.payload = (const uint8_t *)req.p;
		again.payload_len = req.n;
		again.timeout_nano = (int64_t)((w->deadline - orh_now_ms()) * 4 / 3 * 1e6);
		if (again.timeout_nano < 1000000)
			again.timeout_nano = 1000000;
		c->w[i] = c->w[--c->n_w];
		orh_nri_worker_start(c, stream, &again);
		free(req.p);
		return;
	}
	free(w->req.p);
	c->w[i] = c->w[--c->n_w];
}

/* No worker could be started (no pipe, no fork): the request is read here, bounded as a
 * worker reads it, and answered at once as a decision not made. */
static void not_decided(struct orh_nri_conn *c, uint32_t stream,
			const struct orh_ttrpc_request *rq, const char *why)
{
	struct orh_nri_worker none = { .stream = stream };
	struct orh_nri_create req;
	struct orh_err err = { 0 };

	if (orh_nri_create_decode(rq->payload, rq->payload_len, &req, &err) < 0) {
		none.what = orh_xasprintf("a CreateContainer request not read (%s)", err.msg);
	} else {
		none.what = orh_nri_describe(&req, WHAT_MAX);
		/* no config to say on_error: the container starts as it would without us */
		none.refuse_late = orh_nri_config_reload(c->ctx) == 0 &&
				   orh_nri_refuses(&c->ctx->cfg, &req);
		orh_nri_create_free(&req);
	}
	CTR_LOG(LOG_ERR, "nri: %s: not decided: %s", none.what, why);
	worker_answer(c, &none, false);
	free(none.what);
}

/* A worker's place: the read end of its answer's pipe, the request's stream, its deadline
 * (three quarters of the budget, in ms). */
static struct orh_nri_worker *slot_add(struct orh_nri_conn *c, int fd, uint32_t stream,
				       int64_t budget)
{
	struct orh_nri_worker *w = &c->w[c->n_w++];

	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->stream = stream;
	w->deadline = orh_now_ms() + (double)(budget * 3 / 4);
	w->what = orh_xstrdup("a container whose request was not read in time");
	return w;
}

void orh_nri_worker_start(struct orh_nri_conn *c, uint32_t stream,
			  const struct orh_ttrpc_request *rq)
{
	int64_t budget = c->timeout_ms;
	int fds[2] = { -1, -1 };
	struct orh_nri_worker *w;
	unsigned gen;
	bool loud;
	pid_t pid;

	if (rq->timeout_nano > 0 && rq->timeout_nano / 1000000 < budget)
		budget = rq->timeout_nano / 1000000;
	loud = orh_nri_log_take(ORH_NRI_CTR);
	if (!strcmp(rq->method, "CreateContainer") &&
	    (fds[0] = orh_nri_resident_take(rq, loud, &gen, &pid)) >= 0) {
		w = slot_add(c, fds[0], stream, budget);
		w->pid = pid;
		w->resident = true;
		w->gen = gen;
		orh_buf_add(&w->req, (const char *)rq->payload, rq->payload_len);
		return;
	}
	if (pipe2(fds, O_CLOEXEC) < 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
		not_decided(c, stream, rq, strerror(errno));
		if (fds[0] >= 0) {
			close(fds[0]);
			close(fds[1]);
		}
		return;
	}
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		orh_nri_worker_child(c->fd);
		quiet = !loud;
		if (!strcmp(rq->method, "StartContainer"))
			start_main(c->ctx, rq->payload, rq->payload_len, fds[1]);
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
	w = slot_add(c, fds[0], stream, budget);
	w->pid = pid;
}

void orh_nri_worker_input(struct orh_nri_conn *c, size_t i)
{
	struct orh_nri_worker *w = &c->w[i];
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
	orh_nri_worker_end(c, i, true, false);
}

size_t orh_nri_workers_dying(void)
{
	return n_dying;
}
