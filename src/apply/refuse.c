/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reason for refusing a container, where the engine shows it (include/orh/apply/refuse.h):
 * runc's log file for the runtime shim, and the spec with a refusing createRuntime hook
 * for precreate (src/cmd/cmd_refuse.c drives both of precreate's refusal and the hook).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/base/log.h"
#include "orh/base/json.h"
#include "orh/decide/oci.h"
#include "orh/apply/refuse.h"
#include "orh/apply/spec.h"

/* RFC 3339 in UTC, what Go's time.Time (containerd reads the time of each entry) parses. */
static void rfc3339(time_t now, char *out, size_t size)
{
	struct tm tm;

	if (!gmtime_r(&now, &tm) || strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(out, size, "1970-01-01T00:00:00Z");
}

/* A value as logrus's text formatter writes it: as it is when it is a plain word, else
 * quoted like Go's %q (printable bytes as they are, quotes and backslashes escaped,
 * control characters as escapes). */
static void append_value(FILE *f, const char *s)
{
	if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    "-._/@^+") == strlen(s)) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p == '\r')
			fputs("\\r", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

json_t *orh_json_text(const char *msg)
{
	json_t *j = json_string(msg);
	char *copy = NULL;

	if (j)
		return j;
	copy = orh_xstrdup(msg);
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	j = json_string(copy);
	free(copy);
	return j;
}

char *orh_runc_log_line(bool json, const char *msg, time_t now)
{
	char when[64];
	char *line = NULL, *buf = NULL;
	size_t len = 0;
	FILE *f = NULL;

	rfc3339(now, when, sizeof(when));
	if (json) {
		json_t *o = json_object();

		/* logrus's JSON formatter: keys sorted, one compact object a line */
		json_object_set_new(o, "level", json_string("error"));
		json_object_set_new(o, "msg", orh_json_text(msg));
		json_object_set_new(o, "time", json_string(when));
		line = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(o);
		if (!line)
			abort(); /* jansson fails only when out of memory */
		buf = orh_xasprintf("%s\n", line);
		orh_json_free_text(line);
		return buf;
	}
	f = open_memstream(&buf, &len);
	if (!f)
		abort();
	fprintf(f, "time=\"%s\" level=error msg=", when);
	append_value(f, msg);
	fputc('\n', f);
	if (fclose(f) != 0)
		abort();
	return buf;
}

int orh_runc_log_append(const char *path, const char *format, const char *msg)
{
	_cleanup_free_ char *line = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	if (!path || !*path)
		return -EINVAL;
	line = orh_runc_log_line(format && strcmp(format, "json") == 0, msg, time(NULL));
	/* the caller (the engine, which runs us as its runc) names the file; a link there is
	 * not followed, and a FIFO nobody reads does not hold the refusal up */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
			O_NONBLOCK, 0600);
	if (fd < 0)
		return -errno;
	r = orh_write_all(fd, line, strlen(line));
	return r < 0 ? r : 0;
}

int orh_spec_add_refusal(const char *in, size_t in_len, json_t *hook, char **out,
			 size_t *out_len, struct orh_err *err)
{
	_cleanup_json_ json_t *spec = NULL;
	json_t *hooks = NULL, *list = NULL;
	int r;

	*out = NULL;
	r = orh_spec_parse(in, in_len, "config.json (stdin)", &spec, err);
	if (r < 0) {
		json_decref(hook);
		return r;
	}
	hooks = json_object_get(spec, "hooks");
	if (!hooks || json_is_null(hooks)) {
		hooks = json_object();
		json_object_set_new(spec, "hooks", hooks);
	}
	list = json_object_get(hooks, "createRuntime");
	if (json_is_object(hooks) && (!list || json_is_null(list))) {
		list = json_array();
		json_object_set_new(hooks, "createRuntime", list);
	}
	if (!json_is_object(hooks) || !json_is_array(list)) {
		json_decref(hook);
		return orh_fail(err, EINVAL, "config.json: field 'hooks.createRuntime' is not an array");
	}
	/* first, so that no other hook of the stage acts on a container that is refused */
	json_array_insert_new(list, 0, hook);
	return orh_spec_dump(spec, out, out_len, err);
}
