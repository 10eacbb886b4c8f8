/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the container's network namespace holds: its addresses, the kinds of their links
 * (through rtnetlink only), and its default route interface (src/apply/netns.c).
 */
#ifndef ORH_APPLY_NETNS_H
#define ORH_APPLY_NETNS_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>

#include "orh/apply/target.h"
#include "orh/base/util.h"

#define ORH_NETNS_MAX_ADDRS 64

struct orh_netns_info {
	char default_if[IFNAMSIZ];  /* IPv4 default route's interface, "" when none */
	struct in_addr addrs[ORH_NETNS_MAX_ADDRS]; /* IPv4 addresses (not loopback) */
	size_t n_addrs;
	/* rtnetlink only (orh_netns_read): the address's link, and whether that link is of a
	 * kind the kernel gives no GID entry (a veth; its address is in no GID table) */
	unsigned ifindex[ORH_NETNS_MAX_ADDRS];
	bool no_gid[ORH_NETNS_MAX_ADDRS];
};

/* Read a network namespace's IPv4 addresses and default route (rtnetlink) from a forked
 * child that setns()-es into nspath, with the kind of each address's link (no_gid). */
int orh_netns_read(const char *nspath, struct orh_netns_info *out, struct orh_err *err);
/* The same for the namespace the target is in, from /proc/<pid>/net/route and
 * /proc/<pid>/net/fib_trie: no child, no namespace change. */
int orh_netns_read_target(const struct orh_target *t, struct orh_netns_info *out,
			  struct orh_err *err);
/* Pure parsers of those two files (exported for tests): the local IPv4 addresses
 * ("/32 host LOCAL" entries, loopback left out) and the default route's interface. */
void orh_netns_parse_fib_trie(const char *text, struct orh_netns_info *out);
void orh_netns_parse_route(const char *text, struct orh_netns_info *out);

#endif
