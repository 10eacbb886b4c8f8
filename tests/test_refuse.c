/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/apply/refuse.c and src/cmd/cmd_refuse.c: runc's log line and the
 * refusing hook. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/apply/refuse.h"

/* 2024-02-29T13:14:15Z */
#define WHEN ((time_t)1709212455)

Test(refuse, json_line_is_logrus_json)
{
	char *line = orh_runc_log_line(true, "a \"quoted\" <reason>\nsecond line", WHEN);

	cr_assert_str_eq(line, "{\"level\":\"error\",\"msg\":\"a \\\"quoted\\\" <reason>\\nsecond "
			       "line\",\"time\":\"2024-02-29T13:14:15Z\"}\n");
	free(line);
}

Test(refuse, json_line_of_bytes_that_are_not_utf8)
{
	char *line = orh_runc_log_line(true, "path '/x/\xff\xfe'", WHEN);
	json_error_t jerr;
	json_t *j = json_loads(line, 0, &jerr);

	cr_assert_not_null(j, "%s: %s", line, jerr.text);
	cr_assert_str_eq(json_string_value(json_object_get(j, "msg")), "path '/x/?" "?'");
	json_decref(j);
	free(line);
}

Test(refuse, text_line_is_logrus_text)
{
	char *line = orh_runc_log_line(false, "say \"no\" \\ now\n\ttab\x01", WHEN);

	cr_assert_str_eq(line, "time=\"2024-02-29T13:14:15Z\" level=error "
			       "msg=\"say \\\"no\\\" \\\\ now\\n\\ttab\\x01\"\n");
	free(line);
}

Test(refuse, append_adds_one_line_and_keeps_what_was_there)
{
	char dir[] = "/tmp/orh-test-refuse.XXXXXX";
	char path[64], buf[512];
	struct stat st;
	ssize_t n;
	int fd;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/log.json", dir);
	cr_assert_eq(orh_runc_log_append(path, "json", "first"), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(orh_runc_log_append(path, "text", "second"), 0);
	fd = open(path, O_RDONLY);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	cr_assert(strstr(buf, "\"msg\":\"first\"") && strstr(buf, "msg=second\n"), "%s", buf);
	cr_assert_eq(strchr(buf, '\n') - buf + 1 + strlen(strchr(buf, '\n') + 1), (size_t)n);
	unlink(path);
	cr_assert_eq(symlink("/nonexistent-orh", path), 0);
	cr_assert_eq(orh_runc_log_append(path, "json", "x"), -ELOOP);
	unlink(path);
	cr_assert_eq(orh_runc_log_append("", "json", "x"), -EINVAL);
	rmdir(dir);
}

/* the hook precreate makes: orh_self_hook()'s entry, the reason appended */
static json_t *hook(const char *path, const char *reason)
{
	return json_pack("{s:s, s:[s, s, s], s:i}", "path", path, "args", "oci-rdma-hook",
			 "refuse", reason, "timeout", 30);
}

Test(refuse, refusing_hook_goes_first)
{
	const char *in = "{\"ociVersion\":\"1.0.2\",\"process\":{\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\","
			 "\"hard\":18446744073709551615,\"soft\":1}]},\"hooks\":{\"createRuntime\":"
			 "[{\"path\":\"/bin/true\"}],\"poststop\":[{\"path\":\"/bin/false\"}]}}";
	struct orh_err err = { 0 };
	char *out = NULL;
	size_t len = 0;

	cr_assert_eq(orh_spec_add_refusal(in, strlen(in), hook("/usr/bin/oci-rdma-hook", "why\"not"),
					  &out, &len, &err), 0, "%s", err.msg);
	cr_assert_eq(strlen(out), len);
	cr_assert(strstr(out, "18446744073709551615"), "%s", out); /* the u64 survives */
	cr_assert(strstr(out, "\"createRuntime\":[{\"path\":\"/usr/bin/oci-rdma-hook\",\"args\":"
			      "[\"oci-rdma-hook\",\"refuse\",\"why\\\"not\"],\"timeout\":30},"
			      "{\"path\":\"/bin/true\"}]"),
		  "%s", out);
	cr_assert(strstr(out, "\"poststop\":[{\"path\":\"/bin/false\"}]"), "%s", out);
	free(out);
}

Test(refuse, refusing_hook_without_hooks_and_with_bad_ones)
{
	const char *none = "{\"ociVersion\":\"1.0.2\",\"hooks\":null}";
	const char *bad = "{\"ociVersion\":\"1.0.2\",\"hooks\":{\"createRuntime\":{}}}";
	struct orh_err err = { 0 };
	char *out = NULL;
	size_t len = 0;

	cr_assert_eq(orh_spec_add_refusal(none, strlen(none), hook("/h", "r"), &out, &len, &err), 0);
	cr_assert(strstr(out, "\"hooks\":{\"createRuntime\":[{\"path\":\"/h\""), "%s", out);
	free(out);
	out = NULL;
	cr_assert_eq(orh_spec_add_refusal(bad, strlen(bad), hook("/h", "r"), &out, &len, &err),
		     -EINVAL);
	cr_assert(strstr(err.msg, "hooks.createRuntime"), "%s", err.msg);
	cr_assert_null(out);
}
