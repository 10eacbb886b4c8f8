/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the bundle's config.json reader and the questions asked of it. */
#include <stdint.h>
#include <stdlib.h>

#include "orh/oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *spec = NULL;
	struct orh_err err = { 0 };
	struct orh_config cfg;
	struct orh_container_facts facts = { 0 };
	enum orh_activation_result act;
	bool has_netns = false;
	const char *path = NULL;

	if (orh_spec_parse((const char *)data, size, "config.json", &spec, &err) < 0) {
		if (err.msg[0] == '\0')
			abort();
		return 0;
	}
	orh_config_defaults(&cfg);
	orh_activation_decide(&cfg, json_object_get(spec, "annotations"), &act, &facts, &err);
	orh_spec_env_has(spec, "NCCL_IB_HCA");
	orh_spec_netns(spec, &has_netns, &path);
	orh_config_free(&cfg);
	json_decref(spec);
	return 0;
}
