/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How the reason for refusing a container reaches what the engine shows (src/apply/
 * refuse.c; its drivers are src/cmd/cmd_refuse.c's). Syslog has every refusal; these
 * make the engine's own error carry it too:
 *   - the runtime shim appends it to runc's --log file in runc's format: containerd (and
 *     so docker and ctr) report the last error of that file;
 *   - precreate hands podman back the spec with a first createRuntime hook,
 *     `oci-rdma-hook refuse REASON`, since podman drops a precreate hook's standard error
 *     and shows only its exit status; the runtime runs that hook, which fails with the
 *     reason on its standard error, and runc puts that in the error podman shows.
 */
#ifndef ORH_APPLY_REFUSE_H
#define ORH_APPLY_REFUSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "orh/base/util.h"

/* One error entry of runc's log as logrus writes it, ending in a newline: with json,
 * {"level":"error","msg":MSG,"time":RFC3339}; otherwise the text form,
 * time="RFC3339" level=error msg="MSG". The time is `now` in UTC. malloc'd. */
char *orh_runc_log_line(bool json, const char *msg, time_t now);

/* Append that line for msg to path (runc's --log; json when format is "json") in one
 * write: O_APPEND|O_CREAT|O_NOFOLLOW, mode 0600 when created, never blocking on a FIFO.
 * 0 or -errno; a caller refusing a container goes on refusing it whatever this returns. */
int orh_runc_log_append(const char *path, const char *format, const char *msg);

/* The spec text `in` with `hook` (taken over, whatever the outcome) put first in
 * hooks.createRuntime. *out is malloc'd. -errno with err filled when `in` is no spec or its
 * hooks are malformed. */
int orh_spec_add_refusal(const char *in, size_t in_len, json_t *hook, char **out,
			 size_t *out_len, struct orh_err *err);

/* A JSON string of msg; bytes that are not UTF-8 (a path, say) become '?'. */
json_t *orh_json_text(const char *msg);


#endif
