/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the node config file parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct orh_config cfg;
	struct orh_err err = { 0 };
	char *s;

	if (size > ORH_CONFIG_MAX_BYTES)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	orh_config_defaults(&cfg);
	if (orh_config_parse_string(&cfg, "fuzz.conf", s, &err) < 0 && err.msg[0] == '\0')
		abort(); /* every error carries a message */
	for (size_t i = 0; i < cfg.n_env; i++)
		if (!orh_env_name_allowed(cfg.env[i].name) ||
		    (cfg.env[i].value && !orh_env_value_allowed(cfg.env[i].value)))
			abort();
	orh_config_free(&cfg);
	free(s);
	return 0;
}
