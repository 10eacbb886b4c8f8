/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the command drivers share (src/base/log.c): the process's exit codes and logging
 * (their command lines: orh/base/args.h). Only main() and the command drivers log (HACKING.md,
 * the error contract).
 */
#ifndef ORH_BASE_LOG_H
#define ORH_BASE_LOG_H

#include <stdbool.h>
#include <stddef.h>

/* What each command returns as the process's exit code (orh/cmd/commands.h). */
#define ORH_EXIT_OK 0
#define ORH_EXIT_FAIL 1
#define ORH_EXIT_USAGE 2

/* Logging for command drivers: stderr and, for the container paths (hook stages,
 * precreate, the runtime shim), syslog (/dev/log, facility daemon, "<PRI>IDENT[PID]: TEXT"
 * without a timestamp). One line a message: its control characters are escaped
 * (orh_text_escape), whatever their source. */
void orh_log_open(const char *ident, bool use_syslog);
/* orh_log_open() with syslog at the socket path instead of /dev/log (tests); 0, or -errno
 * where it cannot be connected (then stderr alone). */
int orh_log_open_socket(const char *ident, const char *path);
/* Whether orh_log() writes to stderr too (it does until told otherwise); returns the
 * setting it replaces. Syslog is not affected. */
bool orh_log_stderr(bool on);
void orh_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));


#endif
