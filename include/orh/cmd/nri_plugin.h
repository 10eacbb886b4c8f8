/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NRI plugin's parts (the command: src/cmd/cmd_nri.c, the connection and its loop):
 * src/cmd/nri_handle.c answers the runtime's messages, src/cmd/nri_workers.c decides each
 * CreateContainer in a child process (src/cmd/nri_resident.c: the one kept for one request
 * after another, else one of its own), src/cmd/nri_node.c keeps the node those decisions
 * restore, src/cmd/nri_config.c holds the node config the plugin decides with
 * (Configure's, else the node config file), and src/cmd/nri_log.c limits the lines the
 * runtime's requests and the kernel's messages make it log. The messages
 * themselves: orh/cmd/nri.h.
 */
#ifndef ORH_CMD_NRI_PLUGIN_H
#define ORH_CMD_NRI_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "orh/cmd/ctx.h"
#include "orh/cmd/nri.h"
#include "orh/base/ttrpc.h"

#define ORH_NRI_MAX_WORKERS 64
/* the bytes of answers the runtime has not read yet above which its connection is not read
 * (nor another request taken) until they are down to it again */
#define ORH_NRI_OUT_MAX (1u << 20)
/* the runtime's request timeout when Configure does not say (NRI's default) */
#define ORH_NRI_DEFAULT_TIMEOUT_MS 2000

struct orh_nri_worker {
	pid_t pid;
	int fd;                 /* the read end of its pipe */
	uint32_t stream;        /* the request's ttrpc stream */
	double deadline;        /* orh_now_ms() */
	bool refuse_late;       /* a late answer refuses: on_error = fail and it asked */
	char *what;             /* "container ID (NAME, pod NS/NAME)" for the log (orh_log
				 * escapes it), from its header */
	size_t head;            /* the header's bytes in out; 0 until it is whole */
	struct orh_buf out;
	bool resident;          /* the resident worker's request (pid: that worker's): its
				 * generation, */
	unsigned gen;
	struct orh_buf req;     /* and the request, decided again should it die first */
};

struct orh_nri_conn {
	struct orh_ctx *ctx;
	const char *id;         /* the plugin's "IDX-NAME" */
	int fd;
	struct orh_mux_in in;
	struct orh_buf out;     /* frames not written yet */
	uint32_t next_stream;   /* the next stream of ours on the runtime's connection */
	uint32_t register_stream;
	int64_t timeout_ms;     /* the runtime's request timeout */
	struct orh_nri_worker w[ORH_NRI_MAX_WORKERS];
	size_t n_w;
};

/* nri_node.c: the node read for no container in particular, which the decisions use where
 * they would read it alike (ctx->node_cache): read again at this age, or as soon as the
 * kernel says the node changed */
#define ORH_NRI_NODE_MAX_AGE_MS 30000
/* Read the node now (in a child, under a deadline), the config reloaded first; none kept
 * when it cannot be read. */
void orh_nri_node_read(struct orh_ctx *ctx);
/* When it is to be read again (orh_now_ms()), and read it when that time has come. */
double orh_nri_node_due(void);
void orh_nri_node_tick(struct orh_ctx *ctx, double now);
/* The kernel's sockets that say the node changed (on the host's sysfs only), and the
 * handling of what one of them can read: a message that concerns the node drops it, and
 * it is read again soon. */
size_t orh_nri_node_fds(const struct orh_ctx *ctx, int fds[2]);
void orh_nri_node_event(struct orh_ctx *ctx, int fd);

/* nri_log.c: the lines of the runtime's requests (peer), of the containers (ctr) and of the
 * kernel's messages that the node changed (node), at most a few of each kind in a window of
 * ORH_NRI_LOG_WINDOW_MS, the others counted and the count logged when the window ends. */
#define ORH_NRI_LOG_WINDOW_MS 10000
enum orh_nri_lines { ORH_NRI_PEER, ORH_NRI_CTR, ORH_NRI_NODE, ORH_NRI_LINES };
/* May one more line of this kind be logged now? */
bool orh_nri_log_take(enum orh_nri_lines kind);
/* The counts of the windows over at now (all of them, with force) logged; the time the
 * next one is over (-1: no count waits). */
double orh_nri_log_flush(double now, bool force);
#define ORH_NRI_LOG(kind, ...) do { if (orh_nri_log_take(kind)) orh_log(__VA_ARGS__); } while (0)

/* nri_config.c: the node config each CreateContainer decides with. Configure's config
 * (text; NULL or empty: none) replaces the node config file's from now on: parsed as the
 * file is, errors naming "Configure's config"; written for the hook stage the answers
 * register (its --config), under the plugin's ID ("IDX-NAME"). -errno with err for a
 * config that cannot be used (the node config file's is used then). */
int orh_nri_config_set(struct orh_ctx *ctx, const char *id, const char *text,
		       struct orh_err *err);
/* The config as it is now into ctx (read again each time: a file that changed applies to
 * the next container), and the sysroot it names unless --sysroot was given; -errno with
 * ctx->config_err, the defaults kept, when it cannot be read. */
int orh_nri_config_reload(struct orh_ctx *ctx);

/* nri_workers.c: a worker for a CreateContainer request; the caller saw that one is free
 * (c->n_w < ORH_NRI_MAX_WORKERS). The worker answers through c when its pipe ends. */
void orh_nri_worker_start(struct orh_nri_conn *c, uint32_t stream,
			  const struct orh_ttrpc_request *rq);
/* Its pipe readable: its bytes read; at its end the answer queued and the worker gone. */
void orh_nri_worker_input(struct orh_nri_conn *c, size_t i);
/* Worker i ended: killed first when late (or when the connection is lost, answer false),
 * answered when answer. */
void orh_nri_worker_end(struct orh_nri_conn *c, size_t i, bool answer, bool late);
/* Can this plugin run the containers' nccl-conf stage at StartContainer (nri_stage = start)?
 * Probed once, after the plugin's confinement: orh_nri_stage_not_here() is NULL where it
 * can, else why not (the runtime then runs the stage as an OCI hook). */
void orh_nri_stage_probe(void);
const char *orh_nri_stage_not_here(void);
/* Containers answered with hooks: was id one (it is forgotten now)? */
bool orh_nri_hooked_take(const char *id);
/* From now on, under nri_hooks = auto, containers are served without hooks, why in their
 * record (orh_nri_serve_as()). */
void orh_nri_hooks_off(const char *why);
/* nri_resident.c: the resident worker, which decides CreateContainer requests one after
 * another. Started when the plugin is idle and holds a node (tick), ended (stop) when what
 * it was started with changes; take hands it a request (the read end of its answer's pipe,
 * or -1: busy, absent or too large, a one-shot worker decides), done says its answer came
 * (or not: late or dead, it is killed). decide is its side of a request:
 * orh_nri_resident_decide() (nri_workers.c), which the loop hands it. */
typedef void (*orh_nri_decide_fn)(struct orh_ctx *ctx, const uint8_t *p, size_t n, int fd,
				  bool loud);
void orh_nri_resident_tick(struct orh_nri_conn *c, double now, orh_nri_decide_fn decide);
double orh_nri_resident_due(void); /* when a new one may be started; -1: none waits */
void orh_nri_resident_stop(void);
int orh_nri_resident_take(const struct orh_ttrpc_request *rq, bool loud, unsigned *gen,
			  pid_t *pid);
void orh_nri_resident_done(unsigned gen, bool answered);
void orh_nri_resident_decide(struct orh_ctx *ctx, const uint8_t *p, size_t n, int fd, bool loud);
/* In a worker's child, the resident one's or a one-shot one's: the runtime's connection
 * (conn) closed, SIGTERM and SIGINT as by default, no signal blocked. */
void orh_nri_worker_child(int conn);

/* Killed workers not ended yet (reaped by orh_nri_workers_reap()). */
size_t orh_nri_workers_dying(void);
void orh_nri_workers_reap(void);

/* nri_handle.c: each whole message read, while more may be taken (can_take). -1: the
 * connection is done. RemoveContainer of a container answered with hooks that the runtime
 * never created (its state unknown, no creation time, no record of its nccl-conf stage,
 * the node handed to that stage still there): the runtime rejected the hooks (containerd's
 * NRI validator, reject_oci_hook_adjustment); that is logged, with the key to set, and
 * orh_nri_hooks_off() called (under nri_hooks = yes only logged). RemoveContainer of a
 * container served without hooks removes its state directory. */
int orh_nri_dispatch(struct orh_nri_conn *c, bool (*can_take)(const struct orh_nri_conn *));
/* RegisterPlugin, as NAME and IDX, sent on the runtime's connection. */
void orh_nri_register(struct orh_nri_conn *c, const char *name, const char *idx);

#endif
