/* SPDX-License-Identifier: Apache-2.0 */
/* The node config file: keys, defaults, and errors naming file, line and key. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "orh/node/config.h"

static struct orh_config cfg;
static struct orh_err err;

static void setup(void)
{
	orh_config_defaults(&cfg);
	memset(&err, 0, sizeof(err));
}
static void teardown(void)
{
	orh_config_free(&cfg);
}

TestSuite(config, .init = setup, .fini = teardown);

Test(config, defaults)
{
	cr_assert_eq(cfg.preset, ORH_PRESET_AUTO);
	cr_assert(cfg.skip_default_route_nic);
	cr_assert_eq(cfg.gid_family, AF_INET);
	cr_assert_eq(cfg.roce_version, 2);
	cr_assert_eq(cfg.memlock, ORH_MEMLOCK_UNLIMITED);
	cr_assert_eq(cfg.activation, ORH_ACTIVATE_ALWAYS);
	cr_assert_eq(cfg.on_error, ORH_ON_ERROR_WARN);
	cr_assert_str_eq(cfg.runtime, "runc");
	cr_assert_not(cfg.management_devices);
	cr_assert(cfg.request_env);
	cr_assert_eq(cfg.request_scope, ORH_SCOPE_NODE, "nothing changes for existing nodes");
}

Test(config, every_key)
{
	const char *text =
		"# comment\n"
		"[node]\n"
		"preset = roce\n"
		"include = mlx5_1, mlx5_2:1\n"
		"exclude = mlx5_0\n"
		"skip_default_route_nic = no\n"
		"gid_family = ipv6\n"
		"roce_version = 1\n"
		"socket_ifname = bond0\n"
		"memlock = 64G\n"
		"management_devices = yes\n"
		"sysroot = /tmp/node\n"
		"[containers]\n"
		"activation = annotation\n"
		"request_env = no\n"
		"request_scope = allocated\n"
		"on_error = fail\n"
		"runtime = /usr/bin/crun\n"
		"add_ipc_lock = yes\n"
		"[env]\n"
		"NCCL_IB_TC = 136\n"
		"NCCL_IB_TIMEOUT =\n";

	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", text, &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.preset, ORH_PRESET_ROCE);
	cr_assert_eq(cfg.include.n, 2);
	cr_assert_str_eq(cfg.include.v[1], "mlx5_2:1");
	cr_assert_str_eq(cfg.exclude.v[0], "mlx5_0");
	cr_assert_not(cfg.skip_default_route_nic);
	cr_assert_eq(cfg.gid_family, AF_INET6);
	cr_assert_eq(cfg.roce_version, 1);
	cr_assert_str_eq(cfg.socket_ifname, "bond0");
	cr_assert_eq(cfg.memlock, 64ULL << 30);
	cr_assert(cfg.management_devices);
	cr_assert_str_eq(cfg.sysroot, "/tmp/node");
	cr_assert_eq(cfg.activation, ORH_ACTIVATE_ANNOTATION);
	cr_assert_not(cfg.request_env);
	cr_assert_eq(cfg.request_scope, ORH_SCOPE_ALLOCATED);
	cr_assert_eq(cfg.on_error, ORH_ON_ERROR_FAIL);
	cr_assert_str_eq(cfg.runtime, "/usr/bin/crun");
	cr_assert(cfg.add_ipc_lock);
	cr_assert_eq(cfg.n_env, 2);
	cr_assert_str_eq(cfg.env[0].name, "NCCL_IB_TC");
	cr_assert_str_eq(cfg.env[0].value, "136");
	cr_assert_eq(cfg.env[0].line, 21);
	cr_assert_null(cfg.env[1].value);
	cr_assert_eq(cfg.env[1].line, 22);
}

static void expect_error(const char *text, const char *needle)
{
	int r = orh_config_parse_string(&cfg, "node.conf", text, &err);

	cr_assert_lt(r, 0, "accepted: %s", text);
	cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
}

Test(config, errors_name_file_line_and_key)
{
	expect_error("[node]\n\npreset = rocev2\n", "node.conf:3: [node] key 'preset'");
	expect_error("[node]\nbogus = 1\n", "node.conf:2: [node] key 'bogus': unknown key");
	expect_error("[nodes]\npreset = auto\n", "node.conf:2: [nodes] key 'preset': unknown section");
	expect_error("preset = auto\n", "node.conf:1: [] key 'preset'");
	expect_error("[node]\nmemlock = lots\n", "key 'memlock'");
	expect_error("[node]\nmemlock = 0\n", "key 'memlock'");
	expect_error("[node]\ninclude = mlx5_1:x\n", "key 'include'");
	expect_error("[node]\ninclude = ../etc\n", "key 'include'");
	expect_error("[node]\nroce_version = 3\n", "key 'roce_version'");
	expect_error("[node]\ngid_family = inet\n", "key 'gid_family'");
	expect_error("[node]\nsocket_ifname = eth0,eth1\n", "key 'socket_ifname'");
	expect_error("[node]\nsysroot = relative/dir\n", "key 'sysroot'");
	expect_error("[node]\nskip_default_route_nic = maybe\n", "key 'skip_default_route_nic'");
	expect_error("[containers]\nactivation = sometimes\n", "key 'activation'");
	expect_error("[node]\nnic_affinity = close\n", "node.conf:2: [node] key 'nic_affinity': 'close' is not pcie, numa or none");
	expect_error("[node]\nlink_layer = roce\n", "node.conf:2: [node] key 'link_layer': 'roce' is not auto, infiniband or ethernet");
	expect_error("[containers]\non_error = ignore\n", "key 'on_error'");
	expect_error("[containers]\nrequest_env = env\n", "key 'request_env'");
	expect_error("[containers]\n\nrequest_scope = pod\n",
		     "node.conf:3: [containers] key 'request_scope': 'pod' is not node or allocated");
	expect_error("[containers]\nrequest_scope =\n", "node.conf:2: [containers] key 'request_scope'");
	expect_error("[containers]\nrequest_scope = Allocated\n", "key 'request_scope'");
	expect_error("[node]\nrequest_scope = allocated\n",
		     "node.conf:2: [node] key 'request_scope': unknown key");
	expect_error("[env]\nLD_PRELOAD = /x.so\n", "[env] key 'LD_PRELOAD'");
	expect_error("[env]\nnccl_debug = INFO\n", "[env] key 'nccl_debug'");
	expect_error("[env]\nNCCL_DEBUG = INFO\nNCCL_DEBUG = WARN\n", "node.conf:3: [env] key 'NCCL_DEBUG': set twice");
	expect_error("[node]\nthis is not ini\n", "node.conf:2:");
}

Test(config, placement_keys)
{
	struct orh_config c;
	struct orh_err e = { 0 };

	orh_config_defaults(&c);
	cr_assert_eq(c.nic_affinity, ORH_AFFINITY_PCIE);
	cr_assert_eq(c.link_layer, ORH_FABRIC_AUTO);
	cr_assert_eq(orh_config_parse_string(&c, "n.conf", "[node]\nnic_affinity = numa\n"
					     "link_layer = ethernet\n[containers]\n"
					     "activation = devices\n", &e), 0, "%s", e.msg);
	cr_assert_eq(c.nic_affinity, ORH_AFFINITY_NUMA);
	cr_assert_eq(c.link_layer, ORH_FABRIC_ETHERNET);
	cr_assert_eq(c.activation, ORH_ACTIVATE_DEVICES);
	orh_config_free(&c);
}

Test(config, request_scope)
{
	static const struct {
		const char *text;
		enum orh_request_scope want;
	} cases[] = {
		{ "[containers]\nrequest_scope = allocated\n", ORH_SCOPE_ALLOCATED },
		{ "[containers]\nrequest_scope = node\n", ORH_SCOPE_NODE },
		{ "[containers]\nactivation = devices\n", ORH_SCOPE_NODE },
	};

	for (size_t i = 0; i < ORH_ARRAY_SIZE(cases); i++) {
		struct orh_config c;
		struct orh_err e = { 0 };

		orh_config_defaults(&c);
		cr_assert_eq(orh_config_parse_string(&c, "n.conf", cases[i].text, &e), 0,
			     "case %zu: %s", i, e.msg);
		cr_assert_eq(c.request_scope, cases[i].want, "case %zu", i);
		orh_config_free(&c);
	}
}

Test(config, missing_default_file_is_defaults)
{
	cr_assert_eq(orh_config_load(&cfg, "/nonexistent/oci-rdma-hook.conf", false, &err), 0);
	cr_assert_null(cfg.path);
	cr_assert_lt(orh_config_load(&cfg, "/nonexistent/oci-rdma-hook.conf", true, &err), 0);
	cr_assert(strstr(err.msg, "/nonexistent/oci-rdma-hook.conf"));
}

Test(config, file_too_large)
{
	char path[] = "/tmp/orh-conf-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	for (int i = 0; i < ORH_CONFIG_MAX_BYTES / 10 + 10; i++)
		fputs("# padding\n", f);
	fclose(f);
	cr_assert_lt(orh_config_load(&cfg, path, true, &err), 0);
	cr_assert(strstr(err.msg, "larger than"), "%s", err.msg);
	unlink(path);
}

Test(config, env_names_and_values)
{
	cr_assert(orh_env_name_allowed("NCCL_IB_HCA"));
	cr_assert(orh_env_name_allowed("UCX_NET_DEVICES"));
	cr_assert_not(orh_env_name_allowed("PATH"));
	cr_assert_not(orh_env_name_allowed("NCCL_X=Y"));
	cr_assert_not(orh_env_name_allowed("NCCL_a"));
	cr_assert(orh_env_value_allowed("=mlx5_1:1,mlx5_2:1"));
	cr_assert_not(orh_env_value_allowed("a\nNCCL_X=1"));
	cr_assert_not(orh_env_value_allowed("a\rb"));
	/* where each goes: NCCL's own to /etc/nccl.conf, the others to the environment */
	cr_assert(orh_env_nccl_reads("NCCL_IB_HCA"));
	cr_assert_not(orh_env_nccl_reads("UCX_TLS"));
	cr_assert_not(orh_env_nccl_reads("NCCLX_A"));
}

Test(config, file_of_exactly_the_limit_is_read)
{
	char path[] = "/tmp/orh-conf-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	long n = 0;

	fputs("[node]\n", f);
	n += 7;
	while (n + 10 <= ORH_CONFIG_MAX_BYTES) {
		fputs("# padding\n", f);
		n += 10;
	}
	while (n < ORH_CONFIG_MAX_BYTES) {
		fputc('\n', f);
		n++;
	}
	fclose(f);
	cr_assert_eq(orh_config_load(&cfg, path, true, &err), 0, "%s", err.msg);
	unlink(path);
}

/* A line of n characters c, then tail and a newline, at the end of text (malloc'd). */
static char *with_long_line(const char *head, char c, size_t n, const char *tail)
{
	size_t hl = strlen(head), tl = strlen(tail);
	char *s = malloc(hl + n + tl + 2);

	cr_assert_not_null(s);
	memcpy(s, head, hl);
	memset(s + hl, c, n);
	memcpy(s + hl + n, tail, tl);
	memcpy(s + hl + n + tl, "\n", 2);
	return s;
}

/* Parse "[containers] activation = always [env]" and a comment of pad 'x' that ends in
 * "NCCL_NET_PLUGIN = /opt/evil.so"; was NCCL_NET_PLUGIN set? */
static bool evil_tail_parsed(size_t pad, int *r, struct orh_err *e)
{
	_cleanup_free_ char *text = with_long_line("[containers]\nactivation = always\n[env]\n# ",
						   'x', pad, "NCCL_NET_PLUGIN = /opt/evil.so");
	struct orh_config c;
	bool set = false;

	orh_config_defaults(&c);
	memset(e, 0, sizeof(*e));
	*r = orh_config_parse_string(&c, "node.conf", text, e);
	for (size_t i = 0; i < c.n_env; i++)
		set |= !strcmp(c.env[i].name, "NCCL_NET_PLUGIN");
	orh_config_free(&c);
	return set;
}

/* A commented-out line longer than libinih's buffer must not be cut in two, its tail
 * parsed as a line of its own (it used to set NCCL_NET_PLUGIN for every container). */
Test(config, long_comment_is_refused_not_split)
{
	int r = 0;

	cr_assert_not(evil_tail_parsed(197, &r, &err), "the tail of the comment was parsed");
	for (size_t pad = 150; pad <= 5000; pad += pad < 300 ? 1 : 997) {
		cr_assert_not(evil_tail_parsed(pad, &r, &err), "pad %zu: the tail was parsed", pad);
		if (r < 0)
			cr_assert(strstr(err.msg, "node.conf:4: "), "pad %zu: %s", pad, err.msg);
	}
}

/* A line over the limit is an error naming the file and its own line, whatever it holds. */
Test(config, over_long_line_names_file_and_line)
{
	_cleanup_free_ char *comment = with_long_line("[node]\npreset = auto\n# ", 'x',
						      ORH_CONFIG_MAX_LINE, "");
	_cleanup_free_ char *value = with_long_line("[env]\nNCCL_A = 1\nNCCL_B = ", 'v',
						    ORH_CONFIG_MAX_LINE, "");

	expect_error(comment, "node.conf:3: line longer than");
	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	expect_error(value, "node.conf:3: line longer than");
}

/* The man page allows values of 1023 bytes: they are read whole, with LF or CRLF. */
Test(config, value_of_1023_bytes_is_read_whole)
{
	_cleanup_free_ char *lf = with_long_line("[env]\nNCCL_TEST_LONG_VALUE_NAME = ", 'v', 1023,
						 "");
	_cleanup_free_ char *crlf = with_long_line("[env]\r\nNCCL_TEST_LONG_VALUE_NAME = ", 'v',
						   1023, "\r");
	_cleanup_free_ char *over = with_long_line("[env]\nNCCL_TEST = ", 'v', 1024, "");

	cr_assert_eq(orh_config_parse_string(&cfg, "node.conf", lf, &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.n_env, 1);
	cr_assert_eq(strlen(cfg.env[0].value), 1023);
	cr_assert_eq(cfg.env[0].line, 2);
	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	cr_assert_eq(orh_config_parse_string(&cfg, "node.conf", crlf, &err), 0, "%s", err.msg);
	cr_assert_eq(strlen(cfg.env[0].value), 1023);
	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	expect_error(over, "node.conf:2: [env] key 'NCCL_TEST': value has a control character "
			   "or is longer than 1023 bytes");
}

/* An [env] entry records its own line, also after long lines and for names that are
 * prefixes of one another. */
Test(config, env_lines_are_exact)
{
	_cleanup_free_ char *text = with_long_line("[env]\nNCCL_IB = 1\n# ", 'x', 600,
						   "\nNCCL_IB_HCA = mlx5_1\n\nNCCL_IB_TC = 136");

	cr_assert_eq(orh_config_parse_string(&cfg, "node.conf", text, &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.n_env, 3);
	cr_assert_eq(cfg.env[0].line, 2);
	cr_assert_eq(cfg.env[1].line, 4);
	cr_assert_eq(cfg.env[2].line, 6);
}

/* No continuation lines: an indented line is a line of its own, never more value for the
 * key above it (libinih's multi-line values would take "   none" as a second preset, and
 * repeat a long key cut to 49 characters). */
Test(config, indented_line_stands_alone)
{
	const char *text = "[node]\npreset = roce\n  memlock = 1G\n\t[env]\n    NCCL_IB_TC = 136\n";

	cr_assert_eq(orh_config_parse_string(&cfg, "node.conf", text, &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.preset, ORH_PRESET_ROCE);
	cr_assert_eq(cfg.memlock, 1ULL << 30);
	cr_assert_eq(cfg.n_env, 1);
	cr_assert_eq(cfg.env[0].line, 5);
	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	expect_error("[node]\npreset = roce\n   none\n", "node.conf:3: syntax error");
	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	expect_error("[node]\npreset = roce\n\v\f\rnone\n", "node.conf:3: syntax error");
	orh_config_free(&cfg);
	orh_config_defaults(&cfg);
	expect_error("[env]\nNCCL_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA = 1\n  evil\n",
		     "node.conf:3: syntax error");
}

Test(config, image_check_and_nccl_min)
{
	cr_assert_eq(cfg.image_check, ORH_IMAGE_CHECK_DEFAULT, "as on_error says by default");
	cr_assert_eq(cfg.nccl_min[0] + cfg.nccl_min[1] + cfg.nccl_min[2], 0, "no minimum");
	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", "[containers]\nimage_check = fail\n"
					     "nccl_min = 2.19.3\n", &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.image_check, ORH_IMAGE_CHECK_FAIL);
	cr_assert_eq(cfg.nccl_min[0], 2);
	cr_assert_eq(cfg.nccl_min[1], 19);
	cr_assert_eq(cfg.nccl_min[2], 3);
	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", "[containers]\nimage_check = off\n"
					     "nccl_min = 2.12\n", &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.image_check, ORH_IMAGE_CHECK_OFF);
	cr_assert_eq(cfg.nccl_min[1], 12);
	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", "[containers]\nimage_check = warn\n",
					     &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.image_check, ORH_IMAGE_CHECK_WARN);
	cr_assert_eq(cfg.nccl_min[2], 0);
	expect_error("[containers]\nimage_check = strict\n",
		     "node.conf:2: [containers] key 'image_check': 'strict' is not warn, fail or off");
	expect_error("[containers]\nnccl_min = 2\n",
		     "node.conf:2: [containers] key 'nccl_min': '2' is not a version X.Y or X.Y.Z");
	expect_error("[containers]\nnccl_min = 2.19.3.1\n", "key 'nccl_min'");
	expect_error("[containers]\nnccl_min = v2.19\n", "key 'nccl_min'");
	expect_error("[containers]\nnccl_min = 2.19.\n", "key 'nccl_min'");
	expect_error("[node]\nimage_check = warn\n", "[node] key 'image_check': unknown key");
}

Test(config, image_supply)
{
	cr_assert_not(cfg.image_supply, "off by default: the operator opts in");
	cr_assert_eq(orh_config_parse_string(&cfg, "t.conf", "[containers]\nimage_supply = yes\n",
					     &err), 0, "%s", err.msg);
	cr_assert(cfg.image_supply);
	expect_error("[containers]\nimage_supply = always\n",
		     "node.conf:2: [containers] key 'image_supply': 'always' is not yes or no");
}
