/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the nvidia driver's information file, NVIDIA_VISIBLE_DEVICES against a node
 * of 8 GPUs, and the PCI topology of two sysfs paths (the input's first two lines).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orh/decide/affinity.h"
#include "orh/node/gpu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool uuid_ok(const char *u)
{
	static const char form[] = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

	if (!u[0])
		return true;
	if (strlen(u) != sizeof(form) - 1)
		return false;
	for (size_t i = 0; form[i]; i++)
		if (form[i] == 'x' ? !isxdigit((unsigned char)u[i]) : i >= 4 && u[i] != '-')
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct orh_gpu v[8] = { { .bdf = "0000:18:00.0" } };
	struct orh_gpus g = { .v = v, .n = 8 };
	struct orh_strv warnings = { 0 };
	struct orh_gpu_info info;
	struct orh_topo_rel rel;
	bool held[8];
	char why[160], *s, *nl;
	size_t n_held = 0;
	int bad, numa;

	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	bad = orh_parse_gpu_info(s, &info, why, sizeof(why));
	if (bad < 0 || (bad > 0 && !why[0]) || !uuid_ok(info.uuid) || info.minor < -1 ||
	    info.minor > 253 || strlen(info.bus) >= sizeof(info.bus))
		abort();
	for (char *c = info.model; *c; c++)
		if ((unsigned char)*c < 0x20)
			abort(); /* the model is printed: no control characters */

	for (unsigned i = 0; i < 8; i++) {
		v[i].index = i;
		v[i].minor = (int)i;
		snprintf(v[i].bdf, sizeof(v[i].bdf), "0000:%02x:00.0", 0x18 + i);
		snprintf(v[i].uuid, sizeof(v[i].uuid), "GPU-%08x-0000-0000-0000-000000000000", i);
	}
	switch (orh_gpus_resolve(&g, s, held, &warnings)) {
	case ORH_GPUS_NONE:
	case ORH_GPUS_SOME:
	case ORH_GPUS_ALL:
		if (warnings.n)
			abort(); /* a warning means a token named no GPU: UNKNOWN */
		break;
	case ORH_GPUS_UNKNOWN:
		if (!warnings.n)
			abort();
		break;
	}
	for (unsigned i = 0; i < 8; i++)
		n_held += held[i];
	for (size_t i = 0; i < warnings.n; i++)
		for (char *c = warnings.v[i]; *c; c++)
			if ((unsigned char)*c < 0x20)
				abort(); /* warnings are logged one line each */
	orh_strv_free(&warnings);
	(void)n_held;

	nl = strchr(s, '\n');
	if (nl)
		*nl = '\0';
	rel = orh_topo_between(s, 0, nl ? nl + 1 : "", 0);
	if (rel.level > ORH_TOPO_SYS)
		abort();
	orh_parse_numa_node(s, &numa);
	free(s);
	return 0;
}
