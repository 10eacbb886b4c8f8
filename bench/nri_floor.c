/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor of an NRI plugin that serves RDMA pods (bench/nri_bench.py --floor): it
 * registers as oci-rdma-hook nri does, subscribes to the same events (CreateContainer,
 * StartContainer, RemoveContainer), and answers every request at once, doing nothing
 * else: CreateContainer with the bytes of a CreateContainerResponse read from a file when
 * it starts (the adjustment oci-rdma-hook gave a container of the same node), the others
 * empty. What a pod start costs with it connected is what the runtime's side of serving
 * those devices costs (NRI's messages, the adjustment applied, runc's device nodes and
 * limit), with no work of a plugin's: no decision, no node read, no process per request,
 * no nccl-conf stage. It uses the project's own multiplexer and ttrpc framing
 * (src/base/ttrpc.c), as the plugin does.
 *
 *   nri_floor SOCKET ANSWER_FILE [NAME IDX]
 *
 * It prints one line per CreateContainer answered to stdout; SIGTERM ends it (status 0).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "orh/base/pbwire.h"
#include "orh/base/ttrpc.h"

#define RUNTIME_SERVICE "nri.pkg.api.v1alpha1.Runtime"
/* CreateContainer (4), StartContainer (6), RemoveContainer (11): bit event-1 */
#define EVENTS ((1 << 3) | (1 << 5) | (1 << 10))

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static void respond(struct orh_buf *out, uint32_t stream, const void *p, size_t n)
{
	struct orh_buf b = { 0 };

	orh_ttrpc_response_encode(&b, 0, NULL, p, n);
	orh_mux_put_msg(out, ORH_MUX_PLUGIN, stream, ORH_TTRPC_RESPONSE, 0, b.p, b.n);
	free(b.p);
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct orh_mux_in in = { 0 };
	struct orh_buf out = { 0 }, reg = { 0 }, req = { 0 }, cfg = { 0 };
	struct orh_err err = { 0 };
	struct sigaction st = { .sa_handler = on_term };
	char *answer = NULL;
	size_t answer_n = 0;
	unsigned long served = 0;
	int fd, afd;

	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: nri_floor SOCKET ANSWER_FILE [NAME IDX]\n");
		return 2;
	}
	afd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (afd < 0 || orh_read_fd_all(afd, 1 << 20, &answer, &answer_n) < 0) {
		fprintf(stderr, "nri_floor: %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	close(afd);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "nri_floor: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	sigaction(SIGTERM, &st, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* RegisterPluginRequest{plugin_name = 1, plugin_idx = 2} on the runtime's service */
	orh_pb_put_string(&reg, 1, argc == 5 ? argv[3] : "oci-rdma-hook");
	orh_pb_put_string(&reg, 2, argc == 5 ? argv[4] : "50");
	orh_ttrpc_request_encode(&req, RUNTIME_SERVICE, "RegisterPlugin", reg.p, reg.n);
	orh_mux_put_msg(&out, ORH_MUX_RUNTIME, 1, ORH_TTRPC_REQUEST, 0, req.p, req.n);
	/* ConfigureResponse{events = 2} */
	orh_pb_put_varint(&cfg, 2, EVENTS);

	while (!stopping) {
		struct pollfd p = { .fd = fd, .events = POLLIN | (out.n ? POLLOUT : 0) };
		struct orh_ttrpc_msg m;
		char buf[65536];
		ssize_t n;
		int r;

		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p.revents & POLLOUT) {
			n = send(fd, out.p, out.n, MSG_NOSIGNAL);
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				break;
			if (n > 0) {
				memmove(out.p, out.p + n, out.n - (size_t)n);
				out.n -= (size_t)n;
			}
		}
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0 || orh_mux_feed(&in, buf, (size_t)n, &err) < 0)
			break;
		while ((r = orh_mux_take(&in, &m, &err)) > 0) {
			struct orh_ttrpc_request rq;

			if (m.conn != ORH_MUX_PLUGIN || m.hdr.type != ORH_TTRPC_REQUEST)
				continue; /* RegisterPlugin's answer */
			if (orh_ttrpc_request_decode(m.payload, m.len, &rq, &err) < 0)
				return 1;
			if (!strcmp(rq.method, "Configure")) {
				respond(&out, m.hdr.stream, cfg.p, cfg.n);
			} else if (!strcmp(rq.method, "CreateContainer")) {
				respond(&out, m.hdr.stream, answer, answer_n);
				printf("nri_floor: CreateContainer answered (%lu)\n", ++served);
				fflush(stdout);
			} else {
				respond(&out, m.hdr.stream, NULL, 0);
			}
			orh_ttrpc_request_free(&rq);
		}
		if (r < 0)
			break;
	}
	return stopping ? 0 : 1;
}
