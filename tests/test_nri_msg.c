/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NRI's messages read through protobuf-c (src/cmd/nri_msg.c): the check before the unpack
 * names a field deep inside a request by the fields that lead to it, counts each element of
 * a packed field, bounds every request, not only CreateContainer's, and steps over unknown
 * fields without reading inside them; a RemoveContainer or StateChange read so too.
 * tests/test_nri.c tests the rest of the codec.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orh/cmd/nri.h"
#include "orh/base/pbwire.h"

static int create(struct orh_buf *b, struct orh_nri_create *req, struct orh_err *err)
{
	int r = orh_nri_create_decode(b->p, b->n, req, err);

	b->n = 0;
	return r;
}

Test(nri_msg_check, a_field_deep_inside_is_named_by_its_path)
{
	struct orh_buf b = { 0 };
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	size_t c, l, d, o;

	c = orh_pb_begin(&b, 2);
	orh_pb_put_string(&b, 1, "id");
	o = orh_pb_begin(&b, 9);
	orh_pb_put_bytes(&b, 4, "ro\0x", 4);
	orh_pb_end(&b, o);
	orh_pb_end(&b, c);
	cr_assert_eq(create(&b, &req, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "CreateContainerRequest: container.mounts field 4 (options): "
			 "a string holding a NUL byte");

	c = orh_pb_begin(&b, 2);
	orh_pb_put_string(&b, 1, "id");
	l = orh_pb_begin(&b, 11);
	d = orh_pb_begin(&b, 2);
	o = orh_pb_begin(&b, 5);
	orh_pb_put_string(&b, 1, "0666");
	orh_pb_end(&b, o);
	orh_pb_end(&b, d);
	orh_pb_end(&b, l);
	orh_pb_end(&b, c);
	cr_assert_eq(create(&b, &req, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "CreateContainerRequest: container.linux.devices.file_mode "
			 "field 1 (value): a length-delimited field where the field takes a varint");

	orh_pb_put_varint(&b, 2, 1);
	cr_assert_eq(create(&b, &req, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "CreateContainerRequest: field 2 (container): a varint where "
			 "the field takes a length-delimited field");
	free(b.p);
}

/* User.additional_gids packed: each gid a field. With the request's field 2, the id, the
 * user and the packed field itself, 65532 gids are the bound. */
Test(nri_msg_check, each_element_of_a_packed_field_is_counted)
{
	struct orh_nri_create req;
	struct orh_err err = { 0 };

	for (size_t extra = 0; extra < 2; extra++) {
		size_t n = ORH_NRI_FIELDS_MAX - 4 + extra;
		struct orh_buf b = { 0 };
		char *gids = malloc(n);
		size_t c, u;
		int r;

		memset(gids, 7, n);
		c = orh_pb_begin(&b, 2);
		orh_pb_put_string(&b, 1, "id");
		u = orh_pb_begin(&b, 21);
		orh_pb_put_bytes(&b, 3, gids, n);
		orh_pb_end(&b, u);
		orh_pb_end(&b, c);
		r = create(&b, &req, &err);
		if (!extra) {
			cr_assert_eq(r, 0, "%s", err.msg);
			cr_assert(req.ctr.n_gids == n && req.ctr.gids[n - 1] == 7);
			orh_nri_create_free(&req);
		} else {
			cr_assert_eq(r, -E2BIG);
			cr_assert_str_eq(err.msg, "CreateContainerRequest: container.user field 3 "
					 "(additional_gids): more than 65536 fields in the message");
		}
		free(gids);
		free(b.p);
	}
}

/* A ConfigureRequest, a SynchronizeRequest and an adjustment are bounded as a CreateContainer
 * is: their unknown fields counted too. */
Test(nri_msg_check, every_request_is_bounded)
{
	struct orh_nri_configure cf;
	struct orh_nri_adjust a;
	struct orh_err err = { 0 };
	bool more = false;

	for (size_t extra = 0; extra < 2; extra++) {
		struct orh_buf b = { 0 };
		int r;

		/* field 8: in none of the three as the plugin reads them */
		for (size_t i = 0; i < ORH_NRI_FIELDS_MAX + extra; i++)
			orh_pb_put_varint(&b, 8, 1);
		r = orh_nri_configure_decode(b.p, b.n, &cf, &err);
		if (!extra) {
			cr_assert_eq(r, 0, "%s", err.msg);
			cr_assert_null(cf.runtime_name);
			orh_nri_configure_free(&cf);
		} else {
			cr_assert_eq(r, -E2BIG);
			cr_assert_str_eq(err.msg, "ConfigureRequest: field 8 (not read): more than "
					 "65536 fields in the message");
		}
		cr_assert_eq(orh_nri_sync_decode(b.p, b.n, &more, &err), extra ? -E2BIG : 0);
		cr_assert_eq(orh_nri_adjust_decode(b.p, b.n, &a, &err), extra ? -E2BIG : 0);
		if (!extra)
			orh_nri_adjust_free(&a);
		free(b.p);
	}
}

/* The pods and containers of a SynchronizeRequest are fields the plugin does not read:
 * stepped over whole, what they hold neither checked nor counted. */
Test(nri_msg_check, unknown_fields_are_stepped_over_whole)
{
	const char garbage[] = "\x0f\xff\x00\x08";
	struct orh_buf b = { 0 };
	struct orh_err err = { 0 };
	bool more = false;

	for (size_t i = 0; i < ORH_NRI_FIELDS_MAX - 1; i++)
		orh_pb_put_bytes(&b, 1, garbage, sizeof(garbage) - 1);
	orh_pb_put_varint(&b, 3, 1);
	cr_assert_eq(orh_nri_sync_decode(b.p, b.n, &more, &err), 0, "%s", err.msg);
	cr_assert(more);
	free(b.p);
}

/* protobuf-c reads a key or a length of 5 bytes at most: a longer one (an overlong varint)
 * is refused before it, naming the field, an unknown one too. */
Test(nri_msg_check, an_overlong_key_or_length_is_refused_first)
{
	static const char key[] = "\x12\x09" "\x8a\x80\x80\x80\x80\x00" "\x02id";
	static const char len[] = "\x12\x0c" "\x0a\x01x" "\xba\x01\x81\x80\x80\x80\x80\x00" "y";
	struct orh_nri_create req;
	struct orh_err err = { 0 };

	cr_assert_eq(orh_nri_create_decode(key, sizeof(key) - 1, &req, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "CreateContainerRequest: container field 1 (id): an overlong "
			 "key or length (over 5 bytes)");
	cr_assert_eq(orh_nri_create_decode(len, sizeof(len) - 1, &req, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "CreateContainerRequest: container field 23 (not read): an "
			 "overlong key or length (over 5 bytes)");
}

/* A message field that is not repeated, sent twice: protobuf-c would merge the second into
 * the first, copying the arrays gathered so far at each one (quadratic in the request);
 * no encoder sends one twice. Refused, naming it; a repeated one is not. */
Test(nri_msg_check, a_singular_message_sent_twice_is_refused)
{
	struct orh_buf b = { 0 };
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	size_t c, l;

	c = orh_pb_begin(&b, 2);
	orh_pb_put_string(&b, 1, "id");
	for (int i = 0; i < 2; i++) {
		l = orh_pb_begin(&b, 11);
		orh_pb_put_bytes(&b, 2, NULL, 0); /* a device */
		orh_pb_end(&b, l);
		orh_pb_put_bytes(&b, 9, NULL, 0); /* a mount: repeated */
	}
	orh_pb_end(&b, c);
	cr_assert_eq(create(&b, &req, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "CreateContainerRequest: container field 11 (linux): sent twice "
			 "(a message, not repeated)");
	free(b.p);
}

/* A RemoveContainerRequest{pod=1, container=2} or StateChangeEvent{event=1, pod=2,
 * container=3}, container {id=1, state=4, created_at=14}; pod: the bytes of its pod field. */
static void removal(struct orh_buf *b, bool event_msg, uint64_t event, const char *pod,
		    uint64_t state, uint64_t created_at)
{
	size_t c;

	if (event_msg)
		orh_pb_put_varint(b, 1, event);
	orh_pb_put_bytes(b, event_msg ? 2 : 1, pod, strlen(pod));
	c = orh_pb_begin(b, event_msg ? 3 : 2);
	orh_pb_put_string(b, 1, "ctr-1");
	orh_pb_put_varint(b, 4, state);
	if (created_at)
		orh_pb_put_varint(b, 14, created_at);
	orh_pb_end(b, c);
}

/* The container of a removal: its id, state and creation time, from RemoveContainer and
 * from a StateChange REMOVE_CONTAINER (11); another event gives no id. The pod is not read:
 * what it holds is not checked. */
Test(nri_msg_removed, the_container_id_state_and_creation_time_are_read)
{
	struct orh_nri_removed rm;
	struct orh_err err = { 0 };

	for (int event_msg = 0; event_msg < 2; event_msg++) {
		for (uint64_t event = 10; event < 12; event++) {
			struct orh_buf b = { 0 };

			removal(&b, event_msg, event, "\x0f\xff", 3, 1700000000123456789ull);
			cr_assert_eq(orh_nri_removed_decode(b.p, b.n, event_msg, &rm, &err), 0,
				     "%s", err.msg);
			if (event_msg && event != 11) {
				cr_assert_null(rm.id);
			} else {
				cr_assert_str_eq(rm.id, "ctr-1");
				cr_assert_eq(rm.state, 3);
				cr_assert_eq(rm.created_at, 1700000000123456789ll);
			}
			free(rm.id);
			b.n = 0;
			removal(&b, event_msg, 11, "", 0, 0);
			cr_assert_eq(orh_nri_removed_decode(b.p, b.n, event_msg, &rm, &err), 0);
			cr_assert_str_eq(rm.id, "ctr-1");
			cr_assert(rm.state == ORH_NRI_STATE_UNKNOWN && rm.created_at == 0);
			free(rm.id);
			free(b.p);
		}
	}
}

/* A removal is checked as every request is, the field named by its path: a state of
 * another wire type, an id holding a NUL, the container sent twice; nothing comes out. */
Test(nri_msg_removed, a_bad_removal_is_refused_naming_the_field)
{
	struct orh_buf b = { 0 };
	struct orh_nri_removed rm;
	struct orh_err err = { 0 };
	size_t c;

	c = orh_pb_begin(&b, 2);
	orh_pb_put_string(&b, 1, "ctr-1");
	orh_pb_put_string(&b, 4, "3");
	orh_pb_end(&b, c);
	cr_assert_eq(orh_nri_removed_decode(b.p, b.n, false, &rm, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "RemoveContainerRequest: container field 4 (state): a "
			 "length-delimited field where the field takes a varint");
	cr_assert_null(rm.id);

	b.n = 0;
	orh_pb_put_varint(&b, 1, 11);
	c = orh_pb_begin(&b, 3);
	orh_pb_put_bytes(&b, 1, "ctr\0x", 5);
	orh_pb_end(&b, c);
	cr_assert_eq(orh_nri_removed_decode(b.p, b.n, true, &rm, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "StateChangeEvent: container field 1 (id): a string holding a "
			 "NUL byte");
	cr_assert_null(rm.id);

	b.n = 0;
	removal(&b, false, 0, "", 0, 0);
	removal(&b, false, 0, "", 0, 0);
	cr_assert_eq(orh_nri_removed_decode(b.p, b.n, false, &rm, &err), -EBADMSG);
	cr_assert_str_eq(err.msg, "RemoveContainerRequest: field 2 (container): sent twice (a "
			 "message, not repeated)");
	cr_assert_null(rm.id);
	free(b.p);
}

/* StartContainer's container id, read without unpacking the request (the plugin's own loop
 * asks it of every container), and its pid with the whole request */
Test(nri_msg_start, the_id_alone_and_the_whole_request_with_its_pid)
{
	struct orh_buf b = { 0 };
	struct orh_nri_create req;
	struct orh_err err = { 0 };
	char *id;
	size_t c;

	c = orh_pb_begin(&b, 1); /* the pod */
	orh_pb_put_string(&b, 1, "pod-1");
	orh_pb_end(&b, c);
	c = orh_pb_begin(&b, 2); /* the container: its env before its id, its pid after */
	orh_pb_put_string(&b, 8, "PATH=/bin");
	orh_pb_put_string(&b, 1, "ctr-1");
	orh_pb_put_varint(&b, 12, 4242);
	orh_pb_end(&b, c);
	id = orh_nri_start_id(b.p, b.n);
	cr_assert_str_eq(id, "ctr-1");
	free(id);
	cr_assert_eq(orh_nri_start_decode(b.p, b.n, &req, &err), 0, "%s", err.msg);
	cr_assert_str_eq(req.ctr.id, "ctr-1");
	cr_assert_eq(req.ctr.pid, 4242);
	orh_nri_create_free(&req);
	free(b.p);

	/* no container, an empty id, an id holding a NUL, a truncated message: none */
	b = (struct orh_buf){ 0 };
	orh_pb_put_string(&b, 1, "pod-only");
	cr_assert_null(orh_nri_start_id(b.p, b.n));
	b.n = 0;
	c = orh_pb_begin(&b, 2);
	orh_pb_put_string(&b, 1, "");
	orh_pb_end(&b, c);
	cr_assert_null(orh_nri_start_id(b.p, b.n));
	b.n = 0;
	c = orh_pb_begin(&b, 2);
	orh_pb_put_bytes(&b, 1, "ctr\0x", 5);
	orh_pb_end(&b, c);
	cr_assert_null(orh_nri_start_id(b.p, b.n));
	cr_assert_null(orh_nri_start_id(b.p, b.n - 3));
	free(b.p);
}
