/* SPDX-License-Identifier: Apache-2.0 */
/* Parsers for the values sysfs, /proc/net/route, /proc/devices and a process's
 * /proc/<pid>/limits and stat hold. Pure; fuzzed (the sysfs ones). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orh/node/inventory.h"

/* "4: ACTIVE" -> 4, "ACTIVE" */
int orh_parse_port_state(const char *s, int *num, char *text, size_t text_size)
{
	unsigned long long v = 0;
	char digits[8];
	size_t n = 0;

	while (s[n] >= '0' && s[n] <= '9') {
		if (n >= sizeof(digits) - 1)
			return -EINVAL;
		digits[n] = s[n];
		n++;
	}
	digits[n] = '\0';
	if (n == 0 || s[n] != ':' || orh_parse_uint(digits, 255, &v) < 0)
		return -EINVAL;
	s += n + 1;
	while (*s == ' ')
		s++;
	if (!*s)
		return -EINVAL;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != ' ')
			return -EINVAL;
	*num = (int)v;
	if (text && orh_strlcpy(text, s, text_size) < 0)
		return -EINVAL;
	return 0;
}

int orh_parse_link_layer(const char *s, enum orh_link_layer *ll)
{
	if (strcmp(s, "InfiniBand") == 0)
		*ll = ORH_LL_INFINIBAND;
	else if (strcmp(s, "Ethernet") == 0)
		*ll = ORH_LL_ETHERNET;
	else if (strcmp(s, "Unknown") == 0)
		*ll = ORH_LL_UNKNOWN;
	else
		return -EINVAL;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly 8 groups of 4 hex digits separated by ':' (the kernel's %pI6 form). */
int orh_parse_gid(const char *s, uint8_t raw[16])
{
	for (int g = 0; g < 8; g++) {
		unsigned v = 0;

		for (int i = 0; i < 4; i++) {
			int h = hexval(*s++);
			if (h < 0)
				return -EINVAL;
			v = (v << 4) | (unsigned)h;
		}
		raw[2 * g] = (uint8_t)(v >> 8);
		raw[2 * g + 1] = (uint8_t)(v & 0xff);
		if (g < 7 && *s++ != ':')
			return -EINVAL;
	}
	return *s == '\0' ? 0 : -EINVAL;
}

void orh_format_gid(const uint8_t raw[16], char out[40])
{
	snprintf(out, 40, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9],
		 raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]);
}

int orh_parse_gid_type(const char *s, enum orh_gid_type *t)
{
	if (strcmp(s, "IB/RoCE v1") == 0)
		*t = ORH_GID_TYPE_IB_ROCE_V1;
	else if (strcmp(s, "RoCE v2") == 0)
		*t = ORH_GID_TYPE_ROCE_V2;
	else
		return -EINVAL;
	return 0;
}

int orh_parse_devnum(const char *s, unsigned *major, unsigned *minor)
{
	char a[12], b[12];
	const char *colon = strchr(s, ':');
	unsigned long long ma, mi;

	if (!colon || (size_t)(colon - s) >= sizeof(a) || strlen(colon + 1) >= sizeof(b))
		return -EINVAL;
	memcpy(a, s, (size_t)(colon - s));
	a[colon - s] = '\0';
	strcpy(b, colon + 1);
	if (orh_parse_uint(a, 4095, &ma) < 0 || orh_parse_uint(b, 1048575, &mi) < 0)
		return -EINVAL;
	*major = (unsigned)ma;
	*minor = (unsigned)mi;
	return 0;
}

int orh_parse_hex_id(const char *s, unsigned *out)
{
	unsigned v = 0;
	size_t n = 0;

	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return -EINVAL;
	for (s += 2; *s; s++, n++) {
		int h = hexval(*s);
		if (h < 0 || n >= 8)
			return -EINVAL;
		v = (v << 4) | (unsigned)h;
	}
	if (n == 0)
		return -EINVAL;
	*out = v;
	return 0;
}

int orh_parse_numa_node(const char *s, int *out)
{
	unsigned long long v;

	/* the kernel prints dev_to_node() with %d: -1 (NUMA_NO_NODE) or a node number */
	if (!strcmp(s, "-1")) {
		*out = -1;
		return 0;
	}
	if (orh_parse_uint(s, ORH_NUMA_NODES_MAX - 1, &v) < 0)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* The next whitespace-separated field of a route line: at most max characters, else NULL. */
static const char *route_field(const char **s, size_t *len, size_t max)
{
	const char *f = *s;

	while (*f == ' ' || *f == '\t')
		f++;
	*len = strcspn(f, " \t\n");
	if (*len == 0 || *len > max)
		return NULL;
	*s = f + *len;
	return f;
}

/* A field of 1 to 8 hex digits (a 32-bit value, as the kernel prints them with %08X). */
static int route_hex(const char **s, unsigned *out)
{
	size_t len;
	const char *f = route_field(s, &len, 8);
	unsigned v = 0;

	if (!f)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		int h = hexval(f[i]);
		if (h < 0)
			return -EINVAL;
		v = (v << 4) | (unsigned)h;
	}
	*out = v;
	return 0;
}

/* A field of 1 to 10 decimal digits that fits 32 bits. */
static int route_dec(const char **s, unsigned *out)
{
	size_t len;
	const char *f = route_field(s, &len, 10);
	unsigned long long v = 0;

	if (!f)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (f[i] < '0' || f[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(f[i] - '0');
	}
	if (v > 0xffffffffULL)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* "eth0\t00000000\t01003C0A\t0003\t0\t0\t0\t00000000\t0\t0\t0": Iface, Destination,
 * Gateway, Flags, RefCnt, Use, Metric, Mask (the rest is not read). A hand-written
 * scanner, not sscanf: every container start parses the whole table. */
int orh_parse_route_line(const char *line, char ifname[IFNAMSIZ], bool *is_default,
			 unsigned *metric)
{
	const char *s = line, *ifn;
	unsigned dest, gw, flags, refcnt, use, met, mask;
	size_t len;

	ifn = route_field(&s, &len, IFNAMSIZ - 1);
	if (!ifn || route_hex(&s, &dest) < 0 || route_hex(&s, &gw) < 0 ||
	    route_hex(&s, &flags) < 0 || route_dec(&s, &refcnt) < 0 || route_dec(&s, &use) < 0 ||
	    route_dec(&s, &met) < 0 || route_hex(&s, &mask) < 0)
		return -EINVAL;
	memcpy(ifname, ifn, len);
	ifname[len] = '\0';
	/* RTF_UP = 0x1 */
	*is_default = dest == 0 && mask == 0 && (flags & 0x1);
	*metric = met;
	return 0;
}

/* drivers/infiniband/core: uverbs_main.c, user_mad.c (RDMA_MAX_PORTS 8192 in core_priv.h) */
#define IB_MAJOR 231
#define UVERBS_BASE_MINOR 192
#define UVERBS_FIXED 32
#define UVERBS_DYNAMIC (8192 - UVERBS_FIXED)
#define UMAD_FIXED 64
#define MAD_DYNAMIC (2 * (8192 - UMAD_FIXED)) /* umad, then issm */
/* include/uapi/linux/major.h, include/linux/miscdevice.h */
#define MISC_MAJOR 10
#define MISC_DYNAMIC_MINOR 255 /* "allocate one": never a device's number */

/* Record a dynamic major for name; -EINVAL when the name already has another one. */
static int dyn_major(unsigned *slot, unsigned long long major)
{
	if (major == IB_MAJOR)
		return 0; /* the fixed region */
	if (*slot && *slot != major)
		return -EINVAL;
	*slot = (unsigned)major;
	return 0;
}

/* One line of the character section, "%3d %s": note it when it is one of RDMA's. A line
 * of another form is not one of ours and is skipped. */
static int proc_devices_line(const char *line, size_t len, struct orh_rdma_majors *out)
{
	char digits[8] = "", name[32] = "";
	unsigned long long major = 0;
	size_t n = 0, i = 0;

	while (i < len && line[i] == ' ')
		i++;
	while (i < len && isdigit((unsigned char)line[i]) && n < sizeof(digits) - 1)
		digits[n++] = line[i++];
	digits[n] = '\0';
	if (i >= len || line[i] != ' ' || len - i - 1 >= sizeof(name) ||
	    orh_parse_uint(digits, 4095, &major) < 0)
		return 0;
	memcpy(name, line + i + 1, len - i - 1);
	name[len - i - 1] = '\0';
	if (!strcmp(name, "infiniband_verbs"))
		return dyn_major(&out->verbs, major);
	if (!strcmp(name, "infiniband_mad"))
		return dyn_major(&out->mad, major);
	return 0;
}

static bool line_is(const char *line, size_t len, const char *text)
{
	return len == strlen(text) && !strncmp(line, text, len);
}

int orh_parse_proc_devices(const char *text, struct orh_rdma_majors *out)
{
	bool in_chars = false, seen = false;

	memset(out, 0, sizeof(*out));
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);

		if (line_is(line, len, "Character devices:")) {
			in_chars = seen = true;
		} else if (in_chars && (len == 0 || line_is(line, len, "Block devices:"))) {
			break; /* the blank line before "Block devices:" (or that line) */
		} else if (in_chars && proc_devices_line(line, len, out) < 0) {
			return -EINVAL;
		}
		line = nl ? nl + 1 : NULL;
	}
	return seen ? 0 : -EINVAL;
}

bool orh_devnum_is_rdma(enum orh_chardev_kind kind, unsigned major, unsigned minor,
			const struct orh_rdma_majors *dyn)
{
	switch (kind) {
	case ORH_CHARDEV_UVERBS:
		if (major == IB_MAJOR)
			return minor >= UVERBS_BASE_MINOR &&
			       minor < UVERBS_BASE_MINOR + UVERBS_FIXED;
		return dyn && dyn->verbs && major == dyn->verbs && minor < UVERBS_DYNAMIC;
	case ORH_CHARDEV_UMAD:
	case ORH_CHARDEV_ISSM:
		if (major == IB_MAJOR)
			return kind == ORH_CHARDEV_UMAD
				       ? minor < UMAD_FIXED
				       : minor >= UMAD_FIXED && minor < 2 * UMAD_FIXED;
		/* one region for both (umad in its lower half): the reverse map tells which */
		return dyn && dyn->mad && major == dyn->mad && minor < MAD_DYNAMIC;
	case ORH_CHARDEV_RDMA_CM:
		/* a dynamic misc minor: counting down from 127 on older kernels, above 255 on
		 * newer ones (drivers/char/misc.c); the reverse map tells the rest */
		return major == MISC_MAJOR && minor != MISC_DYNAMIC_MINOR;
	}
	return false;
}

const char *orh_chardev_kind_numbers(enum orh_chardev_kind kind)
{
	switch (kind) {
	case ORH_CHARDEV_UVERBS:
		return "231:192-223, or the dynamic infiniband_verbs major of /proc/devices";
	case ORH_CHARDEV_UMAD:
		return "231:0-63, or the dynamic infiniband_mad major of /proc/devices";
	case ORH_CHARDEV_ISSM:
		return "231:64-127, or the dynamic infiniband_mad major of /proc/devices";
	case ORH_CHARDEV_RDMA_CM:
		return "a misc device, 10:<minor>";
	}
	return "?";
}

const char *orh_link_layer_name(enum orh_link_layer ll)
{
	switch (ll) {
	case ORH_LL_INFINIBAND:
		return "InfiniBand";
	case ORH_LL_ETHERNET:
		return "Ethernet";
	default:
		return "Unknown";
	}
}

const char *orh_gid_type_name(enum orh_gid_type t)
{
	switch (t) {
	case ORH_GID_TYPE_IB_ROCE_V1:
		return "v1";
	case ORH_GID_TYPE_ROCE_V2:
		return "v2";
	default:
		return "?";
	}
}

bool orh_gid_is_link_local(const struct orh_gid *g)
{
	return g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80;
}

/* ---- /proc/<pid> values (the record of a container's process) ---- */

static int parse_limit(const char *s, uint64_t *v)
{
	char *end;

	if (!strncmp(s, "unlimited", 9)) {
		*v = UINT64_MAX;
		return 9;
	}
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	return (int)(end - s);
}

int orh_limits_memlock(const char *text, uint64_t *soft, uint64_t *hard)
{
	const char *l = text ? strstr(text, "\nMax locked memory") : NULL;
	int n;

	if (!l)
		return -EINVAL;
	l += strlen("\nMax locked memory");
	l += strspn(l, " ");
	n = parse_limit(l, soft);
	if (n < 0)
		return -EINVAL;
	l += n;
	l += strspn(l, " ");
	return parse_limit(l, hard) < 0 ? -EINVAL : 0;
}

int orh_stat_start_time(const char *text, unsigned long long *out)
{
	/* the command (field 2) may hold spaces and ')': fields 3.. follow its last ')' */
	const char *p = text ? strrchr(text, ')') : NULL;

	if (!p)
		return -EINVAL;
	p++;
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	return sscanf(p, " %llu", out) == 1 ? 0 : -EINVAL;
}
