/* SPDX-License-Identifier: Apache-2.0 */
/* orh_log()'s syslog messages (src/base/log.c), read from a socket of the test's own in
 * place of /dev/log: the header, the escaping, a daemon that restarts, a stream socket. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/base/log.h"

static char dir[] = "/tmp/orh-test-log.XXXXXX";
static char path[256];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/log", dir);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
}

TestSuite(log, .init = setup, .fini = teardown);

static int bound(int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	unlink(path);
	strcpy(sa.sun_path, path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind: %s", strerror(errno));
	if (type == SOCK_STREAM)
		cr_assert_eq(listen(fd, 1), 0);
	return fd;
}

/* The next datagram, as a string. */
static char *next(int fd)
{
	static char buf[16384];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	cr_assert_gt(n, 0, "no message: %s", n < 0 ? strerror(errno) : "empty");
	buf[n] = '\0';
	return buf;
}

Test(log, a_message_has_the_facility_priority_ident_and_pid, .fini = teardown)
{
	int rx = bound(SOCK_DGRAM);
	char want[256];

	cr_assert_eq(orh_log_open_socket("oci-rdma-hook", path), 0);
	orh_log(LOG_WARNING, "container %s: no default route", "c1");
	snprintf(want, sizeof(want), "<28>oci-rdma-hook[%d]: container c1: no default route",
		 (int)getpid());
	cr_assert_str_eq(next(rx), want);
	orh_log(LOG_INFO, "given");
	snprintf(want, sizeof(want), "<30>oci-rdma-hook[%d]: given", (int)getpid());
	cr_assert_str_eq(next(rx), want);
	close(rx);
}

Test(log, what_a_message_quotes_cannot_end_its_line, .fini = teardown)
{
	int rx = bound(SOCK_DGRAM);
	char *m;

	cr_assert_eq(orh_log_open_socket("t", path), 0);
	orh_log(LOG_ERR, "image says: %s", "a\nb\x1b[2J");
	m = next(rx);
	cr_assert_null(strchr(m, '\n'), "%s", m);
	cr_assert_null(strchr(m, '\x1b'), "%s", m);
	cr_assert_not_null(strstr(m, "image says: a"), "%s", m);
	close(rx);
}

Test(log, a_restarted_daemon_gets_the_next_message, .fini = teardown)
{
	int rx = bound(SOCK_DGRAM);
	char want[128];

	cr_assert_eq(orh_log_open_socket("t", path), 0);
	orh_log(LOG_INFO, "one");
	cr_assert_not_null(strstr(next(rx), ": one"));
	close(rx); /* the daemon goes, and comes back on the same path */
	rx = bound(SOCK_DGRAM);
	orh_log(LOG_INFO, "two");
	snprintf(want, sizeof(want), "<30>t[%d]: two", (int)getpid());
	cr_assert_str_eq(next(rx), want);
	close(rx);
}

Test(log, a_stream_socket_gets_messages_ending_in_a_nul, .fini = teardown)
{
	int l = bound(SOCK_STREAM), c;
	char buf[256], want[128];
	ssize_t n;

	cr_assert_eq(orh_log_open_socket("t", path), 0);
	c = accept(l, NULL, NULL);
	cr_assert_geq(c, 0);
	orh_log(LOG_NOTICE, "streamed");
	n = recv(c, buf, sizeof(buf), 0);
	snprintf(want, sizeof(want), "<29>t[%d]: streamed", (int)getpid());
	cr_assert_eq(n, (ssize_t)strlen(want) + 1);
	cr_assert_eq(buf[n - 1], '\0');
	cr_assert_str_eq(buf, want);
	close(c);
	close(l);
}

Test(log, no_socket_leaves_stderr_alone, .fini = teardown)
{
	cr_assert_lt(orh_log_open_socket("t", path), 0); /* nothing bound there */
	orh_log(LOG_INFO, "to stderr only"); /* neither fails nor blocks */
}
