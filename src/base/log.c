/* SPDX-License-Identifier: Apache-2.0 */
/* What the command drivers share: logging (stderr always, syslog for container paths:
 * a runtime often swallows a hook's stderr; control characters escaped).
 *
 * The syslog messages are sent here, not by syslog(3): "<PRI>IDENT[PID]: TEXT" to
 * /dev/log, facility daemon, connected once when the log is opened. The header carries no
 * timestamp (RFC 3164 lets the receiver add one; journald and rsyslog's socket input use
 * the time they receive it anyway): glibc's syslog() reads the node's zone file for it at
 * a process's first message. No /dev/log: stderr alone, and no retry each line. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/base/log.h"
#include "orh/base/util.h"

static bool log_syslog;
static bool log_stderr = true;
static const char *log_ident = "oci-rdma-hook";
static int log_fd = -1;
static pid_t log_pid; /* the process that connected it: only it connects again */
static int log_type; /* SOCK_DGRAM, or SOCK_STREAM (messages end with a NUL) */
static struct sockaddr_un log_addr = { .sun_family = AF_UNIX, .sun_path = "/dev/log" };

static int log_connect(void)
{
	int types[] = { SOCK_DGRAM, SOCK_STREAM };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(types); i++) {
		int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&log_addr, sizeof(log_addr)) == 0) {
			log_type = types[i];
			return fd;
		}
		close(fd);
		if (errno != EPROTOTYPE) /* a stream socket only where a datagram is refused */
			return -1;
	}
	return -1;
}

void orh_log_open(const char *ident, bool use_syslog)
{
	log_ident = ident;
	log_syslog = use_syslog;
	if (use_syslog && log_fd < 0) {
		log_fd = log_connect();
		log_pid = getpid();
	}
}

bool orh_log_stderr(bool on)
{
	bool was = log_stderr;

	log_stderr = on;
	return was;
}

int orh_log_open_socket(const char *ident, const char *path)
{
	if (strlen(path) >= sizeof(log_addr.sun_path))
		return -ENAMETOOLONG;
	if (log_fd >= 0)
		close(log_fd);
	log_fd = -1;
	memcpy(log_addr.sun_path, path, strlen(path) + 1);
	orh_log_open(ident, true);
	return log_fd >= 0 ? 0 : -errno;
}

/* One message to the syslog socket, its header and its text in one datagram; a daemon
 * restarted since (the socket refuses it) is connected again, once, by the process that
 * opened the log (a child may have entered a container's mount namespace, where
 * /dev/log is the container's). */
static void log_send(int priority, const char *text)
{
	char head[128];
	int n = snprintf(head, sizeof(head), "<%d>%s[%d]: ", LOG_DAEMON | LOG_PRI(priority),
			 log_ident, (int)getpid());
	struct iovec iov[] = {
		{ head, n > 0 && (size_t)n < sizeof(head) ? (size_t)n : 0 },
		{ (char *)text, strlen(text) },
		{ (char *)"", 1 }, /* a stream socket's messages end with a NUL */
	};

	for (int attempt = 0; attempt < 2 && log_fd >= 0; attempt++) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = log_type == SOCK_STREAM ? 3 : 2 };
		size_t len = iov[0].iov_len + iov[1].iov_len + (m.msg_iovlen == 3);

		if (sendmsg(log_fd, &m, MSG_NOSIGNAL) == (ssize_t)len)
			return;
		if (errno != ECONNREFUSED && errno != ENOTCONN && errno != EPIPE)
			return;
		close(log_fd);
		log_fd = attempt == 0 && getpid() == log_pid ? log_connect() : -1;
	}
}

void orh_log(int priority, const char *fmt, ...)
{
	char msg[2048];
	_cleanup_free_ char *text = NULL;
	const char *level = priority <= LOG_ERR	      ? "error: "
			    : priority == LOG_WARNING ? "warning: "
						      : "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap); /* longer messages are cut, never split */
	va_end(ap);
	/* what the message quotes (an image's line, an env value, an id) stays text: a
	 * control character can neither end the line nor drive the terminal */
	text = orh_text_escape(msg);
	/* one write a line: lines of parallel hooks must not mix */
	if (log_stderr) {
		struct iovec line[] = {
			{ (char *)log_ident, strlen(log_ident) }, { (char *)": ", 2 },
			{ (char *)level, strlen(level) },        { text, strlen(text) },
			{ (char *)"\n", 1 },
		};

		(void)!writev(STDERR_FILENO, line, ORH_ARRAY_SIZE(line));
	}
	if (log_syslog)
		log_send(priority, text);
}
