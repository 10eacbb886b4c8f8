/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the OCI state a hook reads on stdin, and activation from its annotations. */
#include <stdint.h>
#include <stdlib.h>

#include "orh/decide/activation.h"
#include "orh/decide/oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct orh_oci_state st = { 0 };
	struct orh_err err = { 0 };
	struct orh_config cfg;
	struct orh_container_facts facts = { 0 };
	enum orh_activation_result act;

	if (orh_oci_state_parse((const char *)data, size, &st, &err) == 0) {
		orh_config_defaults(&cfg);
		orh_activation_decide(&cfg, st.annotations, NULL, &act, NULL, &facts, NULL, &err);
		orh_config_free(&cfg);
		orh_oci_state_free(&st);
	} else if (err.msg[0] == '\0') {
		abort();
	}
	return 0;
}
