/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NRI plugin's answers to the runtime (include/orh/cmd/nri_plugin.h): each whole message
 * read from the connection handled. The plugin service's requests: Configure (its config,
 * the runtime's request timeout; the plugin subscribes to CreateContainer and RemoveContainer,
 * and to StartContainer where it can run the nccl-conf stage there), Synchronize,
 * CreateContainer (handed to a worker, nri_workers.c), StartContainer (a worker runs the
 * nccl-conf stage of a container whose mark says the plugin runs it; any other answered at
 * once), RemoveContainer (the
 * runtime's rejection of the hooks seen, a state directory of a container served without
 * hooks removed), the others answered empty; and on the runtime's service, RegisterPlugin
 * sent and its answer read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/base/log.h"
#include "orh/cmd/nri_plugin.h"
#include "orh/apply/handoff.h"
#include "orh/apply/record.h"
#include "orh/apply/statedir.h"

#define PEER_LOG(...) ORH_NRI_LOG(ORH_NRI_PEER, __VA_ARGS__)

static void call(struct orh_nri_conn *c, const char *method, const struct orh_buf *payload)
{
	struct orh_buf b = { 0 };

	orh_ttrpc_request_encode(&b, ORH_NRI_RUNTIME_SERVICE, method, payload->p, payload->n);
	c->register_stream = c->next_stream;
	/* flags 0, as ttrpc's own client sends a unary request */
	orh_mux_put_msg(&c->out, ORH_MUX_RUNTIME, c->next_stream, ORH_TTRPC_REQUEST, 0, b.p, b.n);
	c->next_stream += 2; /* a client's streams are odd and increasing */
	free(b.p);
}

/* Configure: the runtime's request timeout, and the plugin's config where the runtime hands
 * one (a plugin it started, from its plugin_config_path). A config that cannot be used is
 * refused: the runtime reports it and does not use the plugin. The events: CreateContainer
 * and RemoveContainer, and StartContainer where this plugin can run the nccl-conf stage. */
static void configure(struct orh_nri_conn *c, uint32_t stream,
		      const struct orh_ttrpc_request *rq)
{
	struct orh_nri_configure cf;
	struct orh_err err = { 0 };
	struct orh_buf b = { 0 };
	bool start;

	if (orh_nri_configure_decode(rq->payload, rq->payload_len, &cf, &err) < 0) {
		PEER_LOG(LOG_WARNING, "nri: %s", err.msg);
		memset(&cf, 0, sizeof(cf));
	}
	if (cf.request_timeout_ms > 0)
		c->timeout_ms = cf.request_timeout_ms;
	orh_nri_resident_stop(); /* it holds the config it was started with */
	if (orh_nri_config_set(c->ctx, c->id, cf.config, &err) < 0) {
		_cleanup_free_ char *why = orh_text_escape(err.msg);
		_cleanup_free_ char *msg = orh_xasprintf("oci-rdma-hook: %s", why);

		orh_log(LOG_ERR, "nri: %s: the plugin refuses the configuration", err.msg);
		orh_nri_respond(&c->out, stream, ORH_RPC_UNKNOWN, msg, NULL);
		orh_nri_configure_free(&cf);
		return;
	}
	/* StartContainer only where the plugin can run the stage there: a runtime waits on
	 * every event a plugin subscribes to */
	start = !orh_nri_stage_not_here();
	PEER_LOG(LOG_INFO, "nri: configured by %s %s (request timeout %lld ms), the node config "
		 "from %s: serving CreateContainer%s, watching RemoveContainer",
		 cf.runtime_name ? cf.runtime_name : "a runtime",
		 cf.runtime_version ? cf.runtime_version : "", (long long)c->timeout_ms,
		 cf.config && *cf.config ? "Configure's config" : c->ctx->config_path,
		 start ? " and StartContainer" : "");
	orh_nri_configure_response_encode(&b, ORH_NRI_EVENT_CREATE_CONTAINER |
						 (start ? ORH_NRI_EVENT_START_CONTAINER : 0) |
						 ORH_NRI_EVENT_REMOVE_CONTAINER);
	orh_nri_respond(&c->out, stream, ORH_RPC_OK, NULL, &b);
	free(b.p);
	orh_nri_configure_free(&cf);
}

/* The record of the container's state directory: 1 where it is there (stage: its stage,
 * malloc'd), 0 where not, -1 where it is there and cannot be read; *handoff: the node
 * handed to its nccl-conf stage is there (no stage took it and ended: poststop removes the
 * directory). */
static int record_of(const char *id, char **stage, bool *handoff)
{
	_cleanup_free_ char *dir = orh_state_dir_path(ORH_RUN_DIR, id);
	_cleanup_close_ int fd = -1;
	json_t *rec;

	*stage = NULL;
	*handoff = false;
	if (!dir || (fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return 0;
	*handoff = faccessat(fd, ORH_HANDOFF_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	if (faccessat(fd, ORH_RECORD_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (!(rec = orh_record_load_at(fd, ORH_RECORD_FILE)))
		return -1;
	if (json_string_value(json_object_get(rec, "stage")))
		*stage = orh_xstrdup(json_string_value(json_object_get(rec, "stage")));
	json_decref(rec);
	return 1;
}

/* The runtime rejected the hooks given to container id: said, and the containers after it
 * served without them. */
static void hooks_rejected(const char *id, const char *why)
{
	orh_log(LOG_ERR, "nri: container %s, answered with OCI hooks (the nccl-conf "
		"stage), was removed without ever being created: the runtime rejected the "
		"container for its hooks, most likely containerd's NRI validator with "
		"[plugins.\"io.containerd.nri.v1.nri\".default_validator] "
		"reject_oci_hook_adjustment = true; the containers from now on are served "
		"without hooks (the plugin writes their /etc/nccl.conf and record); set "
		"[containers] nri_hooks = no in the node config to serve so from the start, "
		"or allow the plugin's hooks in the validator", id);
	orh_nri_hooks_off(why);
}

/* RemoveContainer: a container answered with hooks that the runtime never created had them
 * rejected: no state but unknown, no creation time (containerd has no status of it: its
 * CreateContainer undone), no record from its stage while the node handed to that stage is
 * still there (a container that ran had its directory removed by poststop). One served
 * without hooks leaves its state directory to the plugin. */
static void removed(struct orh_nri_conn *c, const struct orh_ttrpc_request *rq, bool event_msg)
{
	_cleanup_free_ char *stage = NULL, *id = NULL;
	struct orh_nri_removed rm;
	struct orh_err err = { 0 };
	bool handoff;
	int rec;

	if (orh_nri_removed_decode(rq->payload, rq->payload_len, event_msg, &rm, &err) < 0) {
		PEER_LOG(LOG_WARNING, "nri: %s", err.msg);
		return;
	}
	id = rm.id;
	if (!id || !orh_state_id_usable(id))
		return;
	rec = record_of(id, &stage, &handoff);
	if (orh_nri_hooked_take(id) && rm.state == ORH_NRI_STATE_UNKNOWN && !rm.created_at &&
	    rec == 0 && handoff) {
		_cleanup_free_ char *why = orh_xasprintf(
			"the runtime rejected the OCI hooks given to container %s: containerd's NRI "
			"validator with reject_oci_hook_adjustment = true, most likely", id);

		orh_state_dir_remove(ORH_RUN_DIR, id); /* the node handed to the stage */
		if (orh_nri_config_reload(c->ctx) == 0 && c->ctx->cfg.nri_hooks == ORH_NRI_HOOKS_YES)
			orh_log(LOG_ERR, "nri: container %s, answered with OCI hooks, was removed "
				"without ever being created: the runtime most likely rejected its "
				"hooks (containerd's NRI validator, reject_oci_hook_adjustment = "
				"true); nri_hooks = yes in the node config: the plugin goes on giving "
				"hooks (set nri_hooks = no or auto to serve without them)", id);
		else
			hooks_rejected(id, why);
	} else if ((rec > 0 && stage && !strcmp(stage, "NRI plugin")) ||
		   orh_handoff_start_marked(ORH_RUN_DIR, id)) {
		/* served without hooks, or its stage run here: no poststop hook removes it */
		orh_state_dir_remove(ORH_RUN_DIR, id);
	}
}

/* StartContainer: a container whose nccl-conf stage the plugin runs (its mark in its state
 * directory) has it run by a worker before the answer; any other is answered at once. */
static void started(struct orh_nri_conn *c, uint32_t stream, const struct orh_ttrpc_request *rq)
{
	_cleanup_free_ char *id = orh_nri_start_id(rq->payload, rq->payload_len);

	if (id && orh_handoff_start_marked(ORH_RUN_DIR, id))
		orh_nri_worker_start(c, stream, rq);
	else
		orh_nri_respond(&c->out, stream, ORH_RPC_OK, NULL, NULL);
}

/* Plugin service methods answered with an empty message: those of events not subscribed
 * to, should one come. */
static const char *const empty_methods[] = {
	"Shutdown", "RunPodSandbox", "UpdatePodSandbox", "PostUpdatePodSandbox",
	"StopPodSandbox", "RemovePodSandbox", "PostCreateContainer",
	"PostStartContainer", "UpdateContainer", "PostUpdateContainer", "StopContainer",
};

static void request(struct orh_nri_conn *c, const struct orh_ttrpc_msg *m)
{
	struct orh_ttrpc_request rq;
	struct orh_err err = { 0 };
	struct orh_buf b = { 0 };
	bool more = false;

	if (orh_ttrpc_request_decode(m->payload, m->len, &rq, &err) < 0) {
		PEER_LOG(LOG_WARNING, "nri: %s", err.msg);
		orh_nri_respond(&c->out, m->hdr.stream, ORH_RPC_UNKNOWN, err.msg, NULL);
		return;
	}
	if (strcmp(rq.service, ORH_NRI_PLUGIN_SERVICE)) {
		orh_nri_respond(&c->out, m->hdr.stream, ORH_RPC_UNIMPLEMENTED, "no such service",
				NULL);
	} else if (!strcmp(rq.method, "CreateContainer")) {
		orh_nri_worker_start(c, m->hdr.stream, &rq);
	} else if (!strcmp(rq.method, "StartContainer")) {
		started(c, m->hdr.stream, &rq);
	} else if (!strcmp(rq.method, "RemoveContainer") || !strcmp(rq.method, "StateChange")) {
		/* RemoveContainer's own call, or the StateChange of runtimes before it */
		removed(c, &rq, !strcmp(rq.method, "StateChange"));
		orh_nri_respond(&c->out, m->hdr.stream, ORH_RPC_OK, NULL, NULL);
	} else if (!strcmp(rq.method, "Configure")) {
		configure(c, m->hdr.stream, &rq);
	} else if (!strcmp(rq.method, "Synchronize")) {
		if (orh_nri_sync_decode(rq.payload, rq.payload_len, &more, &err) < 0)
			PEER_LOG(LOG_WARNING, "nri: %s", err.msg);
		orh_nri_sync_response_encode(&b, more);
		orh_nri_respond(&c->out, m->hdr.stream, ORH_RPC_OK, NULL, &b);
	} else {
		bool known = false;

		for (size_t i = 0; i < ORH_ARRAY_SIZE(empty_methods); i++)
			known |= !strcmp(rq.method, empty_methods[i]);
		if (!strcmp(rq.method, "Shutdown"))
			PEER_LOG(LOG_INFO, "nri: the runtime shuts the plugin down");
		orh_nri_respond(&c->out, m->hdr.stream, known ? ORH_RPC_OK : ORH_RPC_UNIMPLEMENTED,
			known ? NULL : "not implemented by oci-rdma-hook", NULL);
	}
	free(b.p);
	orh_ttrpc_request_free(&rq);
}

/* A message of the runtime's connection: the answer to RegisterPlugin. -1 when it
 * refused the plugin. */
static int response(struct orh_nri_conn *c, const struct orh_ttrpc_msg *m)
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

/* Handle each whole message read, while can_take(c). -1: the connection is done. */
int orh_nri_dispatch(struct orh_nri_conn *c,
		     bool (*can_take)(const struct orh_nri_conn *))
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

void orh_nri_register(struct orh_nri_conn *c, const char *name, const char *idx)
{
	struct orh_buf reg = { 0 };

	orh_nri_register_encode(&reg, name, idx);
	call(c, "RegisterPlugin", &reg);
	free(reg.p);
}
