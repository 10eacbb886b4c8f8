/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What NRI speaks under its messages (src/base/ttrpc.c): the connection multiplexer of
 * github.com/containerd/nri (pkg/net/multiplex: frames of [u32 BE connection id][u32 BE
 * length] payload over one socket), and ttrpc (github.com/containerd/ttrpc: messages of
 * [u32 BE length][u32 BE stream id][u8 type][u8 flags] payload, each connection a byte
 * stream of them; a request carries Request{service, method, payload, timeout_nano,
 * metadata}, a response Response{status{code, message}, payload}). Pure: bytes in, bytes
 * out; the socket is the caller's.
 */
#ifndef ORH_BASE_TTRPC_H
#define ORH_BASE_TTRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orh/base/util.h"

#define ORH_MUX_HDR 8
/* the multiplexer's connections: the plugin's service (the runtime calls the plugin) and
 * the runtime's (the plugin calls the runtime) */
#define ORH_MUX_PLUGIN 1u
#define ORH_MUX_RUNTIME 2u
/* the payload of a frame we send: the runtime's reader takes a frame through a buffer of
 * this size */
#define ORH_MUX_FRAME_MAX 4096u

#define ORH_TTRPC_HDR 10
/* the longest message, as ttrpc's own default */
#define ORH_TTRPC_MSG_MAX (4u << 20)
/* a connection's stream held once all of it is handed out: larger, its memory is freed */
#define ORH_MUX_KEEP (64u << 10)

enum orh_ttrpc_type {
	ORH_TTRPC_REQUEST = 1,
	ORH_TTRPC_RESPONSE = 2,
	ORH_TTRPC_DATA = 3,
};
/* google.rpc.Code values a plugin answers with */
#define ORH_RPC_OK 0
#define ORH_RPC_UNKNOWN 2
#define ORH_RPC_UNIMPLEMENTED 12

struct orh_ttrpc_hdr {
	uint32_t len;
	uint32_t stream;
	uint8_t type;
	uint8_t flags;
};

void orh_ttrpc_hdr_get(const uint8_t *p, struct orh_ttrpc_hdr *h);
void orh_ttrpc_hdr_put(uint8_t *p, const struct orh_ttrpc_hdr *h);

/* One ttrpc message of a connection, whole: its header and its payload (owned). */
struct orh_ttrpc_msg {
	uint32_t conn;
	struct orh_ttrpc_hdr hdr;
	uint8_t *payload;
	size_t len;
};

/* The multiplexer's reading side: the bytes read from the socket, fed in as they come,
 * are split into frames and each frame's payload appended to its connection's stream
 * (connections 1 and 2; frames of another id are dropped, as the runtime's multiplexer
 * drops those of a connection not opened). A stream all handed out frees its buffer when it
 * grew past ORH_MUX_KEEP (a large message). A zeroed struct is empty. */
struct orh_mux_in {
	uint8_t hdr[ORH_MUX_HDR];
	size_t hdr_n;           /* bytes of a frame's header held */
	uint32_t conn;          /* the frame being read */
	uint32_t left;          /* its payload's bytes still to come */
	struct orh_buf stream[2];
	size_t taken[2];        /* bytes of stream[] already handed out */
};

/* Feed n bytes: 0, or -EPROTO (a frame longer than a ttrpc message can be). */
int orh_mux_feed(struct orh_mux_in *m, const void *p, size_t n, struct orh_err *err);
/* The next whole message of either connection into *msg (its payload the caller's to
 * free): 1, 0 when none is whole yet, or -EMSGSIZE (a message longer than
 * ORH_TTRPC_MSG_MAX: the connection cannot go on). */
int orh_mux_take(struct orh_mux_in *m, struct orh_ttrpc_msg *msg, struct orh_err *err);
void orh_mux_in_free(struct orh_mux_in *m);

/* Append to out the frames of connection conn that carry the ttrpc message (stream, type,
 * flags, payload): ORH_MUX_FRAME_MAX payload bytes a frame at most. */
void orh_mux_put_msg(struct orh_buf *out, uint32_t conn, uint32_t stream, uint8_t type,
		     uint8_t flags, const void *payload, size_t len);

/* ttrpc's Request, decoded: the strings owned, the payload within the buffer decoded. */
struct orh_ttrpc_request {
	char *service;
	char *method;
	const uint8_t *payload;
	size_t payload_len;
	int64_t timeout_nano;
};
int orh_ttrpc_request_decode(const void *p, size_t n, struct orh_ttrpc_request *req,
			     struct orh_err *err);
void orh_ttrpc_request_free(struct orh_ttrpc_request *req);
void orh_ttrpc_request_encode(struct orh_buf *b, const char *service, const char *method,
			      const void *payload, size_t len);

/* ttrpc's Response, decoded: message owned (NULL when none), payload within the buffer. */
struct orh_ttrpc_response {
	int32_t code;
	char *message;
	const uint8_t *payload;
	size_t payload_len;
};
int orh_ttrpc_response_decode(const void *p, size_t n, struct orh_ttrpc_response *res,
			      struct orh_err *err);
void orh_ttrpc_response_free(struct orh_ttrpc_response *res);
/* A response: code ORH_RPC_OK with the payload, or an error code with its message. */
void orh_ttrpc_response_encode(struct orh_buf *b, int32_t code, const char *message,
			       const void *payload, size_t len);

#endif
