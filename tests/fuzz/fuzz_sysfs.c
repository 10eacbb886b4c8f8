/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: every sysfs and /proc value parser (/proc/devices included). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/node/inventory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	char text[32], ifname[IFNAMSIZ], out[40];
	uint8_t raw[16];
	unsigned a, b;
	int n;
	bool def;
	enum orh_link_layer ll;
	enum orh_gid_type t;
	struct orh_rdma_majors majors;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	orh_parse_port_state(s, &n, text, sizeof(text));
	orh_parse_link_layer(s, &ll);
	if (orh_parse_gid(s, raw) == 0) {
		orh_format_gid(raw, out);
		if (strcasecmp(out, s) != 0)
			abort(); /* the round trip must be exact */
	}
	orh_parse_gid_type(s, &t);
	if (orh_parse_devnum(s, &a, &b) == 0)
		for (int k = ORH_CHARDEV_UVERBS; k <= ORH_CHARDEV_RDMA_CM; k++)
			orh_devnum_is_rdma(k, a, b, NULL);
	if (orh_parse_proc_devices(s, &majors) == 0 && (majors.verbs == 231 || majors.mad == 231))
		abort(); /* 231 is the fixed region, never a dynamic one */
	orh_parse_hex_id(s, &a);
	orh_parse_route_line(s, ifname, &def, &a);
	free(s);
	return 0;
}
