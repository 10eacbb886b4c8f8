/* SPDX-License-Identifier: Apache-2.0 */
/* Logging for the command drivers: stderr always, syslog for container paths
 * (a runtime often swallows a hook's stderr). */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "orh/commands.h"

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
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: %s", log_ident,
		priority <= LOG_ERR ? "error: " : priority == LOG_WARNING ? "warning: " : "");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	if (log_syslog) {
		va_start(ap, fmt);
		vsyslog(priority, fmt, ap);
		va_end(ap);
	}
}
