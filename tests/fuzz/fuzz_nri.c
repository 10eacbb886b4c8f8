/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: what the NRI plugin reads from the runtime's socket. Each input is read
 *  - as a CreateContainerRequest (orh_nri_create_decode): a refusal carries a message; a
 *    request read becomes an OCI spec (orh_nri_spec) that dumps as JSON;
 *  - as a ContainerAdjustment: one read is written again, and what is written reads back
 *    and is written to the same bytes;
 *  - as a RemoveContainerRequest and as a StateChangeEvent (orh_nri_removed_decode): a
 *    refusal carries a message, an id read is a string;
 *  - as the bytes of the socket: frames of the multiplexer, each whole message of either
 *    connection decoded as a ttrpc request (and its payload as a CreateContainerRequest)
 *    and as a response.
 * The reader never reads past its buffer (ASan), and never nests past its bound.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/cmd/nri.h"
#include "orh/base/ttrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void as_request(const uint8_t *data, size_t size)
{
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	json_t *spec;
	char *text;

	if (orh_nri_create_decode(data, size, &req, &err) < 0) {
		if (!err.msg[0])
			abort();
		return;
	}
	spec = orh_nri_spec(&req);
	if (!spec)
		abort();
	text = json_dumps(spec, JSON_COMPACT);
	if (!text)
		abort();
	free(text);
	json_decref(spec);
	orh_nri_create_free(&req);
}

static void as_adjustment(const uint8_t *data, size_t size)
{
	struct orh_nri_adjust a, b;
	struct orh_buf one = { 0 }, two = { 0 };
	struct orh_err err = { 0 };

	if (orh_nri_adjust_decode(data, size, &a, &err) < 0) {
		if (!err.msg[0])
			abort();
		return;
	}
	orh_nri_adjust_encode(&one, &a);
	if (orh_nri_adjust_decode(one.p, one.n, &b, &err) < 0)
		abort(); /* what we write, we read */
	orh_nri_adjust_encode(&two, &b);
	if (one.n != two.n || (one.n && memcmp(one.p, two.p, one.n)))
		abort();
	orh_nri_adjust_free(&a);
	orh_nri_adjust_free(&b);
	free(one.p);
	free(two.p);
}

static void as_removed(const uint8_t *data, size_t size, bool event_msg)
{
	struct orh_nri_removed rm = { 0 };
	struct orh_err err = { 0 };

	if (orh_nri_removed_decode(data, size, event_msg, &rm, &err) < 0) {
		if (!err.msg[0])
			abort();
		return;
	}
	if (rm.id && strlen(rm.id) > size)
		abort(); /* an id is bytes of the message */
	free(rm.id);
}

static void as_socket(const uint8_t *data, size_t size)
{
	struct orh_mux_in in = { 0 };
	struct orh_ttrpc_msg m;
	struct orh_err err = { 0 };
	int r;

	/* in two pieces, as reads may cut it anywhere */
	if (orh_mux_feed(&in, data, size / 2, &err) < 0 ||
	    orh_mux_feed(&in, data + size / 2, size - size / 2, &err) < 0)
		goto out;
	while ((r = orh_mux_take(&in, &m, &err)) > 0) {
		struct orh_ttrpc_request rq;
		struct orh_ttrpc_response rs;

		if (orh_ttrpc_request_decode(m.payload, m.len, &rq, &err) == 0) {
			as_request(rq.payload, rq.payload_len);
			orh_ttrpc_request_free(&rq);
		}
		if (orh_ttrpc_response_decode(m.payload, m.len, &rs, &err) == 0)
			orh_ttrpc_response_free(&rs);
		free(m.payload);
	}
out:
	orh_mux_in_free(&in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	as_request(data, size);
	as_adjustment(data, size);
	as_removed(data, size, false);
	as_removed(data, size, true);
	as_socket(data, size);
	return 0;
}
