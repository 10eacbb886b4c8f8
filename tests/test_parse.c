/* SPDX-License-Identifier: Apache-2.0 */
/* The sysfs and /proc value parsers. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "orh/node/inventory.h"
#include "orh/decide/plan.h"

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

Test(parse, numa_node)
{
	int v = 7;

	cr_assert_eq(orh_parse_numa_node("1", &v), 0);
	cr_assert_eq(v, 1);
	cr_assert_eq(orh_parse_numa_node("-1", &v), 0);
	cr_assert_eq(v, -1);
	cr_assert_eq(orh_parse_numa_node("4095", &v), 0);
	cr_assert_eq(v, 4095);
	cr_assert_lt(orh_parse_numa_node("4096", &v), 0);
	cr_assert_lt(orh_parse_numa_node("-2", &v), 0);
	cr_assert_lt(orh_parse_numa_node("1x", &v), 0);
	cr_assert_lt(orh_parse_numa_node("", &v), 0);
	cr_assert_eq(v, 4095, "unchanged on error");
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
	/* the longest name a net device can have, fields separated by blanks of any length */
	cr_assert_eq(orh_parse_route_line("abcdefghijklmno 00000000  01003C0A\t 0003 0 0 7 00000000",
					  ifn, &def, &metric), 0);
	cr_assert_str_eq(ifn, "abcdefghijklmno");
	cr_assert(def);
	cr_assert_eq(metric, 7);
	cr_assert_eq(orh_parse_route_line("eth0\t0\t0\t1\t0\t0\t4294967295\t0", ifn, &def, &metric), 0);
	cr_assert_eq(metric, 4294967295u);
	/* what the kernel never prints is refused, not read in part */
	cr_assert_lt(orh_parse_route_line("abcdefghijklmnop\t0\t0\t3\t0\t0\t0\t0", ifn, &def, &metric), 0);
	cr_assert_lt(orh_parse_route_line("eth0\t000000000\t0\t3\t0\t0\t0\t0", ifn, &def, &metric), 0);
	cr_assert_lt(orh_parse_route_line("eth0\t0x0\t0\t3\t0\t0\t0\t0", ifn, &def, &metric), 0);
	cr_assert_lt(orh_parse_route_line("eth0\t0\t0\t3\t0\t0\t4294967296\t0", ifn, &def, &metric), 0);
	cr_assert_lt(orh_parse_route_line("eth0\t0\t0\t3\t0\t0\t-1\t0", ifn, &def, &metric), 0);
	cr_assert_lt(orh_parse_route_line("eth0\t0\t0\t3\t0\t0\t0", ifn, &def, &metric), 0, "no mask");
	cr_assert_lt(orh_parse_route_line("eth0\t0\t0\t3\tx\t0\t0\t0", ifn, &def, &metric), 0);
	cr_assert_lt(orh_parse_route_line("", ifn, &def, &metric), 0);
}

/* Rule 4 (plan.c): the kind of GID entry wanted, with and without its type read */
Test(parse, gid_wanted)
{
	struct orh_gid g = { 0 };
	struct orh_gid_want v2ip4 = { .family = AF_INET, .roce_version = 2 };
	struct orh_gid_want v1ip4 = { .family = AF_INET, .roce_version = 1 };
	struct orh_gid_want v2ip6 = { .family = AF_INET6, .roce_version = 2 };

	orh_parse_gid("0000:0000:0000:0000:0000:ffff:0a00:3c03", g.raw);
	g.ipv4_mapped = true;
	g.type = ORH_GID_TYPE_ROCE_V2;
	cr_assert(orh_plan_gid_wanted(&g, &v2ip4, true));
	cr_assert_not(orh_plan_gid_wanted(&g, &v1ip4, true));
	cr_assert(orh_plan_gid_wanted(&g, &v1ip4, false), "the type is not judged before it is read");
	cr_assert_not(orh_plan_gid_wanted(&g, &v2ip6, true));
	cr_assert_not(orh_plan_gid_wanted(&g, &v2ip6, false), "the family is judged without the type");
	orh_parse_gid("fe80:0000:0000:0000:f820:20ff:fe28:c769", g.raw);
	g.ipv4_mapped = false;
	cr_assert(orh_gid_is_link_local(&g));
	cr_assert_not(orh_plan_gid_wanted(&g, &v2ip6, true));
	cr_assert_not(orh_plan_gid_wanted(&g, &v2ip6, false));
	orh_parse_gid("fd00:0000:0000:0000:f820:20ff:fe28:c769", g.raw);
	cr_assert(orh_plan_gid_wanted(&g, &v2ip6, true));
	g.type = ORH_GID_TYPE_UNKNOWN;
	cr_assert_not(orh_plan_gid_wanted(&g, &v2ip6, true), "an unreadable type is no RoCE v2");
}

/* /proc/devices as chrdev_show() prints it: RDMA's fixed major 231 and one dynamic major
 * per region; a dynamic major named in the block section does not count. */
Test(parse, proc_devices)
{
	struct orh_rdma_majors m;

	cr_assert_eq(orh_parse_proc_devices("Character devices:\n  1 mem\n 10 misc\n"
					    "231 infiniband_verbs\n231 infiniband_mad\n"
					    "236 infiniband_mad\n237 infiniband_verbs\n\n"
					    "Block devices:\n  7 loop\n259 infiniband_verbs\n", &m), 0);
	cr_assert_eq(m.verbs, 237);
	cr_assert_eq(m.mad, 236);
	/* no RDMA module: nothing dynamic */
	cr_assert_eq(orh_parse_proc_devices("Character devices:\n  1 mem\n\nBlock devices:\n", &m), 0);
	cr_assert_eq(m.verbs, 0);
	cr_assert_eq(m.mad, 0);
	/* the fixed region alone */
	cr_assert_eq(orh_parse_proc_devices("Character devices:\n231 infiniband_verbs\n", &m), 0);
	cr_assert_eq(m.verbs, 0);
	/* names are whole: a prefix or a longer name is another driver */
	cr_assert_eq(orh_parse_proc_devices("Character devices:\n240 infiniband_verbsX\n"
					    "241 infiniband_mad \n242 infiniband\n", &m), 0);
	cr_assert_eq(m.verbs, 0);
	cr_assert_eq(m.mad, 0);
	/* the block section ends the character one, blank line or not */
	cr_assert_eq(orh_parse_proc_devices("Character devices:\n  1 mem\nBlock devices:\n"
					    "240 infiniband_verbs\n", &m), 0);
	cr_assert_eq(m.verbs, 0);
	/* garbled lines are skipped */
	cr_assert_eq(orh_parse_proc_devices("Character devices:\nx infiniband_verbs\n"
					    "99999 infiniband_verbs\n250\tinfiniband_verbs\n"
					    "245 infiniband_verbs\n", &m), 0);
	cr_assert_eq(m.verbs, 245);
	/* two dynamic majors for one region cannot be told apart: refused */
	cr_assert_eq(orh_parse_proc_devices("Character devices:\n240 infiniband_verbs\n"
					    "241 infiniband_verbs\n", &m), -EINVAL);
	cr_assert_eq(orh_parse_proc_devices("Character devices:\n240 infiniband_verbs\n"
					    "240 infiniband_verbs\n", &m), 0);
	/* not /proc/devices at all */
	cr_assert_eq(orh_parse_proc_devices("", &m), -EINVAL);
	cr_assert_eq(orh_parse_proc_devices("Block devices:\n240 infiniband_verbs\n", &m), -EINVAL);
}

/* The numbers the kernel gives each kind (uverbs_main.c, user_mad.c, ucma.c). */
Test(parse, rdma_device_numbers)
{
	const struct orh_rdma_majors dyn = { .verbs = 240, .mad = 239 };

	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 231, 192, NULL));
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 231, 223, NULL));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 231, 191, NULL), "umad/issm's");
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 231, 224, NULL));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 1, 11, &dyn), "/dev/kmsg");
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 1, 3, &dyn), "/dev/null");
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 10, 58, &dyn), "a misc device");
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 240, 0, &dyn));
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 240, 8159, &dyn));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 240, 8160, &dyn));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 240, 0, NULL), "majors unknown");
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, 239, 0, &dyn), "the mad region");

	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_UMAD, 231, 0, NULL));
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_UMAD, 231, 63, NULL));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UMAD, 231, 64, NULL), "issm0's");
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_ISSM, 231, 64, NULL));
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_ISSM, 231, 127, NULL));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_ISSM, 231, 0, NULL), "umad0's");
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_ISSM, 231, 192, NULL), "uverbs0's");
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_UMAD, 239, 0, &dyn));
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_ISSM, 239, 8128, &dyn));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_ISSM, 239, 16256, &dyn));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_UMAD, 240, 0, &dyn), "the verbs region");

	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_RDMA_CM, 10, 58, NULL));
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_RDMA_CM, 10, 124, NULL));
	cr_assert(orh_devnum_is_rdma(ORH_CHARDEV_RDMA_CM, 10, 256, NULL));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_RDMA_CM, 10, 255, NULL), "MISC_DYNAMIC_MINOR");
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_RDMA_CM, 1, 11, &dyn));
	cr_assert_not(orh_devnum_is_rdma(ORH_CHARDEV_RDMA_CM, 231, 192, &dyn));
}
