/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the node config file parser. Every error carries a message; every accepted
 * [env] entry is a legal name and value, and was read whole from the line it names; a
 * config with a line over the limit is never accepted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/node/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Line n (1-based) of s, its length in *len without the end of line; NULL past the end. */
static const char *nth_line(const char *s, unsigned n, size_t *len)
{
	for (unsigned i = 1; *s; i++) {
		const char *eol = strchr(s, '\n');
		size_t l = eol ? (size_t)(eol - s) : strlen(s);

		if (i == n) {
			*len = l;
			return s;
		}
		s += l + (eol ? 1 : 0);
	}
	return NULL;
}

static bool has_over_long_line(const char *s)
{
	while (*s) {
		const char *eol = strchr(s, '\n');
		size_t len = eol ? (size_t)(eol - s) : strlen(s);
		size_t body = len > 0 && s[len - 1] == '\r' ? len - 1 : len;

		if (body > ORH_CONFIG_MAX_LINE - 3)
			return true;
		s += len + (eol ? 1 : 0);
	}
	return false;
}

/* The entry's name starts its line (after blanks) and its value is in that line. */
static bool read_whole_from_its_line(const char *s, const struct orh_env_setting *e)
{
	size_t len = 0, n = strlen(e->name);
	const char *l = nth_line(s, e->line, &len);

	if (!l)
		return false;
	while (len > 0 && memchr(" \t\v\f\r", *l, 5)) {
		l++;
		len--;
	}
	if (len < n || memcmp(l, e->name, n) != 0)
		return false;
	return !e->value || memmem(l + n, len - n, e->value, strlen(e->value)) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct orh_config cfg;
	struct orh_err err = { 0 };
	char *s;
	int r;

	if (size > ORH_CONFIG_MAX_BYTES)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	orh_config_defaults(&cfg);
	r = orh_config_parse_string(&cfg, "fuzz.conf", s, &err);
	if (r < 0 && err.msg[0] == '\0')
		abort(); /* every error carries a message */
	if (r == 0 && has_over_long_line(s))
		abort(); /* a line over the limit is never accepted */
	for (size_t i = 0; r == 0 && i < cfg.n_env; i++)
		if (!orh_env_name_allowed(cfg.env[i].name) ||
		    (cfg.env[i].value && !orh_env_value_allowed(cfg.env[i].value)) ||
		    !read_whole_from_its_line(s, &cfg.env[i]))
			abort();
	orh_config_free(&cfg);
	free(s);
	return 0;
}
