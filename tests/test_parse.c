/* SPDX-License-Identifier: Apache-2.0 */
/* The sysfs and /proc value parsers. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <string.h>

#include "orh/inventory.h"

Test(parse, port_state)
{
	int n = 0;
	char text[32];

	cr_assert_eq(orh_parse_port_state("4: ACTIVE", &n, text, sizeof(text)), 0);
	cr_assert_eq(n, 4);
	cr_assert_str_eq(text, "ACTIVE");
	cr_assert_eq(orh_parse_port_state("1: DOWN", &n, text, sizeof(text)), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(orh_parse_port_state("5: LinkUp", &n, text, sizeof(text)), 0);
	cr_assert_str_eq(text, "LinkUp");
	cr_assert_eq(orh_parse_port_state("1: CA", &n, NULL, 0), 0);
	cr_assert_eq(n, 1);
	cr_assert_lt(orh_parse_port_state("ACTIVE", &n, text, sizeof(text)), 0);
	cr_assert_lt(orh_parse_port_state("4:", &n, text, sizeof(text)), 0);
	cr_assert_lt(orh_parse_port_state("", &n, text, sizeof(text)), 0);
	cr_assert_lt(orh_parse_port_state("999999999999: X", &n, text, sizeof(text)), 0);
	cr_assert_lt(orh_parse_port_state("4: ACT\x01IVE", &n, text, sizeof(text)), 0);
}

Test(parse, link_layer)
{
	enum orh_link_layer ll;

	cr_assert_eq(orh_parse_link_layer("InfiniBand", &ll), 0);
	cr_assert_eq(ll, ORH_LL_INFINIBAND);
	cr_assert_eq(orh_parse_link_layer("Ethernet", &ll), 0);
	cr_assert_eq(ll, ORH_LL_ETHERNET);
	cr_assert_eq(orh_parse_link_layer("Unknown", &ll), 0);
	cr_assert_eq(ll, ORH_LL_UNKNOWN);
	cr_assert_lt(orh_parse_link_layer("ethernet", &ll), 0);
}

Test(parse, gid_roundtrip_and_ipv4)
{
	uint8_t raw[16];
	char out[40];

	cr_assert_eq(orh_parse_gid("0000:0000:0000:0000:0000:ffff:0a00:3c03", raw), 0);
	cr_assert_eq(raw[10], 0xff);
	cr_assert_eq(raw[12], 10);
	cr_assert_eq(raw[15], 3);
	orh_format_gid(raw, out);
	cr_assert_str_eq(out, "0000:0000:0000:0000:0000:ffff:0a00:3c03");
	cr_assert_eq(orh_parse_gid("fe80:0000:0000:0000:F820:20ff:fe28:c769", raw), 0);
	cr_assert_eq(raw[0], 0xfe);
	cr_assert_eq(raw[8], 0xf8);
}

Test(parse, gid_rejects_garbage)
{
	uint8_t raw[16];

	cr_assert_lt(orh_parse_gid("", raw), 0);
	cr_assert_lt(orh_parse_gid("fe80::1", raw), 0);
	cr_assert_lt(orh_parse_gid("fe80:0000:0000:0000:f820:20ff:fe28:c769:0000", raw), 0);
	cr_assert_lt(orh_parse_gid("fe80:0000:0000:0000:f820:20ff:fe28:c76", raw), 0);
	cr_assert_lt(orh_parse_gid("ge80:0000:0000:0000:f820:20ff:fe28:c769", raw), 0);
	cr_assert_lt(orh_parse_gid("fe80-0000:0000:0000:f820:20ff:fe28:c769", raw), 0);
}

Test(parse, gid_type)
{
	enum orh_gid_type t;

	cr_assert_eq(orh_parse_gid_type("IB/RoCE v1", &t), 0);
	cr_assert_eq(t, ORH_GID_TYPE_IB_ROCE_V1);
	cr_assert_eq(orh_parse_gid_type("RoCE v2", &t), 0);
	cr_assert_eq(t, ORH_GID_TYPE_ROCE_V2);
	cr_assert_lt(orh_parse_gid_type("RoCE v3", &t), 0);
	cr_assert_lt(orh_parse_gid_type("", &t), 0);
}

Test(parse, devnum)
{
	unsigned ma, mi;

	cr_assert_eq(orh_parse_devnum("231:192", &ma, &mi), 0);
	cr_assert_eq(ma, 231);
	cr_assert_eq(mi, 192);
	cr_assert_eq(orh_parse_devnum("10:58", &ma, &mi), 0);
	cr_assert_eq(mi, 58);
	cr_assert_lt(orh_parse_devnum("231", &ma, &mi), 0);
	cr_assert_lt(orh_parse_devnum("231:", &ma, &mi), 0);
	cr_assert_lt(orh_parse_devnum(":1", &ma, &mi), 0);
	cr_assert_lt(orh_parse_devnum("231:-1", &ma, &mi), 0);
	cr_assert_lt(orh_parse_devnum("99999:1", &ma, &mi), 0);
}

Test(parse, hex_id)
{
	unsigned v;

	cr_assert_eq(orh_parse_hex_id("0x15b3", &v), 0);
	cr_assert_eq(v, 0x15b3);
	cr_assert_eq(orh_parse_hex_id("0x1ded", &v), 0);
	cr_assert_eq(v, 0x1ded);
	cr_assert_lt(orh_parse_hex_id("15b3", &v), 0);
	cr_assert_lt(orh_parse_hex_id("0x", &v), 0);
	cr_assert_lt(orh_parse_hex_id("0x123456789", &v), 0);
}

Test(parse, route_lines)
{
	char ifn[IFNAMSIZ];
	bool def;
	unsigned metric;

	cr_assert_eq(orh_parse_route_line("eth0\t00000000\t01003C0A\t0003\t0\t0\t100\t00000000\t0\t0\t0",
					  ifn, &def, &metric), 0);
	cr_assert_str_eq(ifn, "eth0");
	cr_assert(def);
	cr_assert_eq(metric, 100);
	cr_assert_eq(orh_parse_route_line("eth1\t00800B19\t00000000\t0001\t0\t0\t0\t00E0FFFF\t0\t0\t0",
					  ifn, &def, &metric), 0);
	cr_assert_not(def);
	/* a default route that is not up */
	cr_assert_eq(orh_parse_route_line("eth2\t00000000\t01003C0A\t0002\t0\t0\t0\t00000000\t0\t0\t0",
					  ifn, &def, &metric), 0);
	cr_assert_not(def);
	cr_assert_lt(orh_parse_route_line("garbage", ifn, &def, &metric), 0);
	cr_assert_lt(orh_parse_route_line("averyveryverylongifname\t0\t0\t3\t0\t0\t0\t0", ifn, &def, &metric), 0);
}

Test(parse, gid_matching)
{
	struct orh_gid g = { 0 };
	struct orh_gid_want v2ip4 = { .family = AF_INET, .roce_version = 2 };
	struct orh_gid_want v1ip4 = { .family = AF_INET, .roce_version = 1 };
	struct orh_gid_want v2ip6 = { .family = AF_INET6, .roce_version = 2 };

	orh_parse_gid("0000:0000:0000:0000:0000:ffff:0a00:3c03", g.raw);
	g.ipv4_mapped = true;
	g.type = ORH_GID_TYPE_ROCE_V2;
	cr_assert(orh_gid_matches(&g, &v2ip4));
	cr_assert_not(orh_gid_matches(&g, &v1ip4));
	cr_assert_not(orh_gid_matches(&g, &v2ip6));
	orh_parse_gid("fe80:0000:0000:0000:f820:20ff:fe28:c769", g.raw);
	g.ipv4_mapped = false;
	cr_assert(orh_gid_is_link_local(&g));
	cr_assert_not(orh_gid_matches(&g, &v2ip6));
	orh_parse_gid("fd00:0000:0000:0000:f820:20ff:fe28:c769", g.raw);
	cr_assert(orh_gid_matches(&g, &v2ip6));
}
