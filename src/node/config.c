/* SPDX-License-Identifier: Apache-2.0 */
/* The node configuration file, parsed with libinih. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <ini.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "orh/node/config.h"

static const char *const preset_names[] = {
	[ORH_PRESET_AUTO] = "auto",
	[ORH_PRESET_NONE] = "none",
	[ORH_PRESET_INFINIBAND] = "infiniband",
	[ORH_PRESET_ROCE] = "roce",
	[ORH_PRESET_ERDMA] = "erdma",
};

int orh_preset_from_string(const char *s, enum orh_preset *p)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(preset_names); i++)
		if (strcmp(s, preset_names[i]) == 0) {
			*p = (enum orh_preset)i;
			return 0;
		}
	return -EINVAL;
}

const char *orh_preset_name(enum orh_preset p)
{
	return (size_t)p < ORH_ARRAY_SIZE(preset_names) ? preset_names[p] : "?";
}

bool orh_env_name_allowed(const char *name)
{
	size_t n = strlen(name);

	if (!orh_startswith(name, "NCCL_") && !orh_startswith(name, "UCX_"))
		return false;
	if (n > 128)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '_'))
			return false;
	return true;
}

bool orh_env_nccl_reads(const char *name)
{
	return orh_startswith(name, "NCCL_");
}

bool orh_env_value_allowed(const char *value)
{
	size_t n = strlen(value);

	if (n > 1023)
		return false;
	for (size_t i = 0; i < n; i++)
		if (value[i] == '\n' || value[i] == '\r' || (unsigned char)value[i] < 0x20 ||
		    value[i] == 0x7f)
			return false;
	return true;
}

void orh_config_defaults(struct orh_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->preset = ORH_PRESET_AUTO;
	cfg->skip_default_route_nic = true;
	cfg->gid_family = AF_INET;
	cfg->roce_version = 2;
	cfg->memlock = ORH_MEMLOCK_UNLIMITED;
	cfg->activation = ORH_ACTIVATE_ALWAYS;
	cfg->request_env = true;
	cfg->nccl_record = false;
	cfg->request_scope = ORH_SCOPE_NODE;
	cfg->on_error = ORH_ON_ERROR_WARN;
	cfg->runtime = orh_xstrdup("runc");
}

void orh_config_free(struct orh_config *cfg)
{
	free(cfg->path);
	free(cfg->sysroot);
	orh_strv_free(&cfg->include);
	orh_strv_free(&cfg->exclude);
	free(cfg->socket_ifname);
	free(cfg->runtime);
	for (size_t i = 0; i < cfg->n_env; i++) {
		free(cfg->env[i].name);
		free(cfg->env[i].value);
	}
	free(cfg->env);
	memset(cfg, 0, sizeof(*cfg));
}

/*
 * libinih reads each line into a buffer of a fixed size (INI_MAX_LINE, 200 bytes in
 * Debian's build) and parses what did not fit as a line of its own: the tail of a long
 * comment would become a key. It reads through line_reader() instead, which hands it one whole
 * line at a time and stops the parse at a line that does not fit, so that every line is
 * parsed whole or refused, naming its number. It also drops each line's leading blanks:
 * libinih would take an indented line as more value for the key above it (and repeat
 * that key cut to 49 characters); here it is a line of its own.
 */
struct line_reader {
	const char *p; /* the text not yet handed over */
	unsigned line; /* number of the line handed over last */
	int too_long;  /* the buffer a line did not fit in (0: none) */
};

struct parse_ctx {
	struct orh_config *cfg;
	struct line_reader rd;
	char msg[ORH_ERR_MAX]; /* first error, without the line */
};

/* An ini_reader: the next line, with its end of line, into buf (size bytes). */
static char *line_reader(char *buf, int size, void *stream)
{
	struct line_reader *rd = stream;
	const char *eol = NULL;
	size_t len = 0, body = 0, indent = 0;

	if (rd->too_long || !*rd->p)
		return NULL;
	eol = strchr(rd->p, '\n');
	len = eol ? (size_t)(eol - rd->p) + 1 : strlen(rd->p);
	body = len;
	if (body > 0 && rd->p[body - 1] == '\n')
		body--;
	if (body > 0 && rd->p[body - 1] == '\r')
		body--;
	rd->line++;
	/* as libinih counts it: room for "\r\n" and the NUL after the longest line */
	if (size < 3 || body > (size_t)size - 3) {
		rd->too_long = size;
		return NULL;
	}
	while (indent < body && memchr(" \t\v\f\r", rd->p[indent], 5)) /* isspace() in "C" */
		indent++;
	memcpy(buf, rd->p + indent, len - indent);
	buf[len - indent] = '\0';
	rd->p += len;
	return buf;
}

static int set_error(struct parse_ctx *pc, const char *section, const char *key,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int set_error(struct parse_ctx *pc, const char *section, const char *key,
		     const char *fmt, ...)
{
	if (!pc->msg[0]) {
		char what[512];
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(what, sizeof(what), fmt, ap);
		va_end(ap);
		snprintf(pc->msg, sizeof(pc->msg), "[%s] key '%s': %s", section, key, what);
	}
	return 0; /* inih: error on this line */
}

static int parse_bool(const char *v, bool *out)
{
	if (!strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcmp(v, "1") ||
	    !strcasecmp(v, "on"))
		*out = true;
	else if (!strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcmp(v, "0") ||
		 !strcasecmp(v, "off"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

/* "mlx5_1, mlx5_2:1" -> list; each item a device name, optionally ":port". */
static int parse_dev_list(const char *v, struct orh_strv *out)
{
	_cleanup_free_ char *copy = orh_xstrdup(v);
	char *save = NULL;

	orh_strv_free(out);
	for (char *tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		char *colon = strchr(tok, ':');
		size_t n = colon ? (size_t)(colon - tok) : strlen(tok);
		unsigned long long port;

		if (n == 0 || n >= 64)
			return -EINVAL;
		for (size_t i = 0; i < n; i++)
			if (!(tok[i] == '_' || tok[i] == '-' || tok[i] == '.' ||
			      (tok[i] >= 'a' && tok[i] <= 'z') || (tok[i] >= 'A' && tok[i] <= 'Z') ||
			      (tok[i] >= '0' && tok[i] <= '9')))
				return -EINVAL;
		if (colon && (orh_parse_uint(colon + 1, 255, &port) < 0 || port == 0))
			return -EINVAL;
		orh_strv_push(out, orh_xstrdup(tok));
	}
	return 0;
}

static int parse_memlock(const char *v, uint64_t *out)
{
	unsigned long long n, mult = 1;
	char num[32];
	size_t len = strlen(v);

	if (!strcmp(v, "unlimited") || !strcmp(v, "-1")) {
		*out = ORH_MEMLOCK_UNLIMITED;
		return 0;
	}
	if (len == 0 || len >= sizeof(num))
		return -EINVAL;
	strcpy(num, v);
	switch (num[len - 1]) {
	case 'K': case 'k': mult = 1ULL << 10; break;
	case 'M': case 'm': mult = 1ULL << 20; break;
	case 'G': case 'g': mult = 1ULL << 30; break;
	case 'T': case 't': mult = 1ULL << 40; break;
	default: break;
	}
	if (mult != 1)
		num[len - 1] = '\0';
	if (orh_parse_uint(num, UINT64_MAX / mult, &n) < 0 || n == 0)
		return -EINVAL;
	*out = n * mult;
	return 0;
}

static bool ifname_ok(const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n >= 16)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] <= ' ' || v[i] == '/' || v[i] == ',' || v[i] == '=' ||
		    (unsigned char)v[i] >= 0x7f)
			return false;
	return true;
}

static void set_str(char **slot, const char *v)
{
	free(*slot);
	*slot = *v ? orh_xstrdup(v) : NULL;
}

/* ---- the keys: a table for those of one word of a list or yes/no, code for the rest ---- */

struct word {
	const char *name;
	int value;
};
#define WORDS(a) a, ORH_ARRAY_SIZE(a)

static const struct word gid_families[] = { { "ipv4", AF_INET }, { "ipv6", AF_INET6 } };
static const struct word roce_versions[] = { { "1", 1 }, { "2", 2 } };
static const struct word affinities[] = {
	{ "pcie", ORH_AFFINITY_PCIE }, { "numa", ORH_AFFINITY_NUMA }, { "none", ORH_AFFINITY_NONE },
};
static const struct word link_layers[] = {
	{ "auto", ORH_FABRIC_AUTO },
	{ "infiniband", ORH_FABRIC_INFINIBAND },
	{ "ethernet", ORH_FABRIC_ETHERNET },
};
static const struct word activations[] = {
	{ "always", ORH_ACTIVATE_ALWAYS },
	{ "annotation", ORH_ACTIVATE_ANNOTATION },
	{ "devices", ORH_ACTIVATE_DEVICES },
};
static const struct word scopes[] = {
	{ "node", ORH_SCOPE_NODE }, { "allocated", ORH_SCOPE_ALLOCATED },
};
static const struct word on_errors[] = {
	{ "warn", ORH_ON_ERROR_WARN }, { "fail", ORH_ON_ERROR_FAIL },
};
static const struct word image_checks[] = {
	{ "warn", ORH_IMAGE_CHECK_WARN }, { "fail", ORH_IMAGE_CHECK_FAIL },
	{ "off", ORH_IMAGE_CHECK_OFF },
};

/* A key whose value is one word of a list (words, into the int or enum at off) or a
 * boolean (words NULL: the bool at off). */
static const struct table_key {
	const char *section;
	const char *key;
	const struct word *words;
	size_t n_words;
	size_t off;
} table_keys[] = {
	{ "node", "skip_default_route_nic", NULL, 0,
	  offsetof(struct orh_config, skip_default_route_nic) },
	{ "node", "gid_family", WORDS(gid_families), offsetof(struct orh_config, gid_family) },
	{ "node", "roce_version", WORDS(roce_versions), offsetof(struct orh_config, roce_version) },
	{ "node", "management_devices", NULL, 0, offsetof(struct orh_config, management_devices) },
	{ "node", "nic_affinity", WORDS(affinities), offsetof(struct orh_config, nic_affinity) },
	{ "node", "link_layer", WORDS(link_layers), offsetof(struct orh_config, link_layer) },
	{ "containers", "activation", WORDS(activations), offsetof(struct orh_config, activation) },
	{ "containers", "request_env", NULL, 0, offsetof(struct orh_config, request_env) },
	{ "containers", "request_scope", WORDS(scopes), offsetof(struct orh_config, request_scope) },
	{ "containers", "on_error", WORDS(on_errors), offsetof(struct orh_config, on_error) },
	{ "containers", "image_check", WORDS(image_checks),
	  offsetof(struct orh_config, image_check) },
	{ "containers", "image_supply", NULL, 0, offsetof(struct orh_config, image_supply) },
	{ "containers", "add_ipc_lock", NULL, 0, offsetof(struct orh_config, add_ipc_lock) },
	{ "containers", "nccl_fail_closed", NULL, 0,
	  offsetof(struct orh_config, nccl_fail_closed) },
	{ "containers", "nccl_record", NULL, 0, offsetof(struct orh_config, nccl_record) },
};

/* The enums the table writes as int are int-sized (an enum of small constants). */
_Static_assert(sizeof(enum orh_nic_affinity) == sizeof(int) &&
		       sizeof(enum orh_fabric) == sizeof(int) &&
		       sizeof(enum orh_activation) == sizeof(int) &&
		       sizeof(enum orh_request_scope) == sizeof(int) &&
		       sizeof(enum orh_on_error) == sizeof(int) &&
		       sizeof(enum orh_image_check) == sizeof(int),
	       "an enum of the config is not int-sized");

/* A key of table_keys: 1 where set, 0 on a bad value (pc's message: the words), -1 where
 * section.key is none of the table's. */
static int table_key(struct parse_ctx *pc, const char *section, const char *key, const char *v)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(table_keys); i++) {
		const struct table_key *t = &table_keys[i];
		char *field = (char *)pc->cfg + t->off;
		char list[256] = "";
		size_t len = 0;

		if (strcmp(t->section, section) || strcmp(t->key, key))
			continue;
		if (!t->words) {
			if (parse_bool(v, (bool *)field) < 0)
				return set_error(pc, section, key, "'%s' is not yes or no", v);
			return 1;
		}
		for (size_t w = 0; w < t->n_words; w++) {
			if (!strcmp(v, t->words[w].name)) {
				memcpy(field, &t->words[w].value, sizeof(int));
				return 1;
			}
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
						w == 0 ? "" : w + 1 == t->n_words ? " or " : ", ",
						t->words[w].name);
			if (len >= sizeof(list))
				len = sizeof(list) - 1;
		}
		return set_error(pc, section, key, "'%s' is not %s", v, list);
	}
	return -1;
}

static int node_key(struct parse_ctx *pc, const char *key, const char *v)
{
	struct orh_config *cfg = pc->cfg;
	const char *s = "node";
	int r = table_key(pc, s, key, v);

	if (r >= 0)
		return r;
	if (!strcmp(key, "sysroot")) {
		if (*v && v[0] != '/')
			return set_error(pc, s, key, "'%s' is not an absolute path", v);
		set_str(&cfg->sysroot, v);
	} else if (!strcmp(key, "include") || !strcmp(key, "exclude")) {
		if (parse_dev_list(v, !strcmp(key, "include") ? &cfg->include : &cfg->exclude) < 0)
			return set_error(pc, s, key, "'%s' is not a list of DEVICE or DEVICE:PORT", v);
	} else if (!strcmp(key, "preset")) {
		if (orh_preset_from_string(v, &cfg->preset) < 0)
			return set_error(pc, s, key,
					 "'%s' is not one of auto, none, infiniband, roce, erdma", v);
	} else if (!strcmp(key, "socket_ifname")) {
		if (*v && !ifname_ok(v))
			return set_error(pc, s, key, "'%s' is not an interface name", v);
		set_str(&cfg->socket_ifname, v);
	} else if (!strcmp(key, "memlock")) {
		if (parse_memlock(v, &cfg->memlock) < 0)
			return set_error(pc, s, key,
					 "'%s' is not 'unlimited' or a size (bytes, or with K/M/G/T)", v);
	} else {
		return set_error(pc, s, key, "unknown key%s", "");
	}
	return 1;
}

/* "X.Y" or "X.Y.Z", each a number below 1000. */
static int parse_version(const char *v, unsigned out[3])
{
	unsigned n[3] = { 0, 0, 0 };
	int end = 0, got = sscanf(v, "%3u.%3u%n.%3u%n", &n[0], &n[1], &end, &n[2], &end);

	if (got < 2 || v[end] != '\0' || !isdigit((unsigned char)v[0]) ||
	    strspn(v, "0123456789.") != strlen(v))
		return -EINVAL;
	memcpy(out, n, sizeof(n));
	return 0;
}

static int containers_key(struct parse_ctx *pc, const char *key, const char *v)
{
	struct orh_config *cfg = pc->cfg;
	const char *s = "containers";
	int r = table_key(pc, s, key, v);

	if (r >= 0)
		return r;
	if (!strcmp(key, "runtime")) {
		if (!*v || strchr(v, '\n'))
			return set_error(pc, s, key, "'%s' is not a program name or path", v);
		set_str(&cfg->runtime, v);
	} else if (!strcmp(key, "nccl_min")) {
		if (parse_version(v, cfg->nccl_min) < 0)
			return set_error(pc, s, key, "'%s' is not a version X.Y or X.Y.Z", v);
	} else if (!strcmp(key, "nri_hooks")) {
		/* a boolean, or auto */
		bool on = false;

		if (!strcmp(v, "auto"))
			cfg->nri_hooks = ORH_NRI_HOOKS_AUTO;
		else if (parse_bool(v, &on) == 0)
			cfg->nri_hooks = on ? ORH_NRI_HOOKS_YES : ORH_NRI_HOOKS_NO;
		else
			return set_error(pc, s, key, "'%s' is not yes, no or auto", v);
	} else if (!strcmp(key, "nri_stage")) {
		if (!strcmp(v, "start"))
			cfg->nri_stage = ORH_NRI_STAGE_START;
		else if (!strcmp(v, "hook"))
			cfg->nri_stage = ORH_NRI_STAGE_HOOK;
		else
			return set_error(pc, s, key, "'%s' is not start or hook", v);
	} else {
		return set_error(pc, s, key, "unknown key%s", "");
	}
	return 1;
}

static int env_key(struct parse_ctx *pc, const char *key, const char *v)
{
	struct orh_config *cfg = pc->cfg;
	struct orh_env_setting *e = NULL;

	if (!orh_env_name_allowed(key))
		return set_error(pc, "env", key,
				 "only NCCL_* and UCX_* variables (A-Z, 0-9, _) may be set%s", "");
	if (!orh_env_value_allowed(v))
		return set_error(pc, "env", key,
				 "value has a control character or is longer than 1023 bytes%s", "");
	for (size_t i = 0; i < cfg->n_env; i++)
		if (!strcmp(cfg->env[i].name, key))
			return set_error(pc, "env", key, "set twice%s", "");
	cfg->env = orh_xrealloc(cfg->env, (cfg->n_env + 1) * sizeof(*cfg->env));
	e = &cfg->env[cfg->n_env++];
	e->name = orh_xstrdup(key);
	e->value = *v ? orh_xstrdup(v) : NULL;
	e->line = pc->rd.line;
	return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse_ctx *pc = user;

	if (!name) /* a section line (INI_CALL_HANDLER_ON_NEW_SECTION) */
		return 1;
	if (!strcmp(section, "node"))
		return node_key(pc, name, value);
	if (!strcmp(section, "containers"))
		return containers_key(pc, name, value);
	if (!strcmp(section, "env"))
		return env_key(pc, name, value);
	if (!section[0])
		return set_error(pc, "", name, "key outside a section (use [node], [containers] or [env])%s", "");
	return set_error(pc, section, name, "unknown section%s", "");
}

/* Lines of up to ORH_CONFIG_MAX_LINE - 3 bytes, where libinih lets its callers say so
 * (Debian's build: meson.build checks for ini_max_line). Elsewhere its own limit
 * stands, and line_reader() refuses what does not fit. */
static void inih_line_limit(void)
{
#ifdef ORH_INIH_RUNTIME_OPTIONS
	ini_use_stack = true;   /* one buffer of ini_max_line bytes for every line */
	ini_allow_realloc = false;
	ini_max_line = ORH_CONFIG_MAX_LINE;
#endif
}

int orh_config_parse_string(struct orh_config *cfg, const char *name, const char *text,
			    struct orh_err *err)
{
	struct parse_ctx pc = { .cfg = cfg, .rd = { .p = text } };
	int line;

	inih_line_limit();
	line = ini_parse_stream(line_reader, &pc.rd, handler, &pc);
	if (line < 0)
		return orh_fail(err, ENOMEM, "%s: cannot parse", name);
	if (line > 0) {
		if (!pc.msg[0])
			snprintf(pc.msg, sizeof(pc.msg), "syntax error (expected 'key = value' or '[section]')");
		return orh_fail(err, EINVAL, "%s:%d: %s", name, line, pc.msg);
	}
	if (pc.rd.too_long)
		return orh_fail(err, EINVAL, "%s:%u: line longer than %d bytes", name, pc.rd.line,
				pc.rd.too_long - 3);
	free(cfg->path);
	cfg->path = orh_xstrdup(name);
	return 0;
}

int orh_config_load(struct orh_config *cfg, const char *path, bool must_exist,
		    struct orh_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r;

	if (fd < 0) {
		if (errno == ENOENT && !must_exist)
			return 0;
		return orh_fail_errno(err, errno, "%s: cannot open", path);
	}
	r = orh_read_fd_all(fd, ORH_CONFIG_MAX_BYTES, &text, &len);
	if (r == -EFBIG)
		return orh_fail(err, EFBIG, "%s: larger than %d bytes", path, ORH_CONFIG_MAX_BYTES);
	if (r < 0)
		return orh_fail_errno(err, r, "%s: cannot read", path);
	if (memchr(text, '\0', len))
		return orh_fail(err, EINVAL, "%s: not a text file", path);
	return orh_config_parse_string(cfg, path, text, err);
}
