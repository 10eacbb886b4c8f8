/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NRI plugin's answers to the runtime (include/orh/nri_plugin.h): each whole message
 * read from the connection handled. The plugin service's requests: Configure (its config,
 * the runtime's request timeout; the plugin subscribes to CreateContainer alone),
 * Synchronize, CreateContainer (handed to a worker, nri_workers.c), the others answered
 * empty; and on the runtime's service, RegisterPlugin sent and its answer read.
 */
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "orh/log.h"
#include "orh/nri_plugin.h"

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
 * refused: the runtime reports it and does not use the plugin. */
static void configure(struct orh_nri_conn *c, uint32_t stream,
		      const struct orh_ttrpc_request *rq)
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
	if (orh_nri_config_set(c->ctx, c->id, cf.config, &err) < 0) {
		_cleanup_free_ char *why = orh_text_escape(err.msg);
		_cleanup_free_ char *msg = orh_xasprintf("oci-rdma-hook: %s", why);

		orh_log(LOG_ERR, "nri: %s: the plugin refuses the configuration", err.msg);
		orh_nri_respond(&c->out, stream, ORH_RPC_UNKNOWN, msg, NULL);
		orh_nri_configure_free(&cf);
		return;
	}
	PEER_LOG(LOG_INFO, "nri: configured by %s %s (request timeout %lld ms), the node config "
		 "from %s: serving CreateContainer",
		 cf.runtime_name ? cf.runtime_name : "a runtime",
		 cf.runtime_version ? cf.runtime_version : "", (long long)c->timeout_ms,
		 cf.config && *cf.config ? "Configure's config" : c->ctx->config_path);
	orh_nri_configure_response_encode(&b, ORH_NRI_EVENT_CREATE_CONTAINER);
	orh_nri_respond(&c->out, stream, ORH_RPC_OK, NULL, &b);
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
