/* SPDX-License-Identifier: Apache-2.0 */
/* What the command drivers share: logging (stderr always, syslog for container paths:
 * a runtime often swallows a hook's stderr; control characters escaped). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "orh/log.h"
#include "orh/util.h"

static bool log_syslog;
static const char *log_ident = "oci-rdma-hook";

void orh_log_open(const char *ident, bool use_syslog)
{
	log_ident = ident;
	log_syslog = use_syslog;
	if (use_syslog)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void orh_log(int priority, const char *fmt, ...)
{
	char msg[2048];
	_cleanup_free_ char *text = NULL;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap); /* longer messages are cut, never split */
	va_end(ap);
	/* what the message quotes (an image's line, an env value, an id) stays text: a
	 * control character can neither end the line nor drive the terminal */
	text = orh_text_escape(msg);
	/* one write a line: stderr is unbuffered, and lines of parallel hooks must not mix */
	fprintf(stderr, "%s: %s%s\n", log_ident,
		priority <= LOG_ERR ? "error: " : priority == LOG_WARNING ? "warning: " : "", text);
	if (log_syslog)
		syslog(priority, "%s", text);
}
