/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a container's own network namespace holds: its IPv4 addresses and the interface
 * of its default route. The hook never changes namespace: for a running process it reads
 * /proc/<pid>/net, which shows that process's namespace; for a namespace known only by
 * its path (a spec edited before the container exists) a child joins it and asks
 * rtnetlink, which also tells the kind of each address's link (a veth holds no GID). That
 * child shares this process's memory and runs while it waits (CLONE_VM | CLONE_VFORK, as
 * posix_spawn's child does): no page table copied, no page copied on write, nothing to
 * unmap when it ends; setns() moves the child alone, and it writes its answer in place.
 * It calls no allocator (its buffer is the caller's).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/node/inventory.h"
#include "orh/apply/netns.h"
#include "orh/apply/target.h"

#define NL_BUF 32768
/* the reader's stack: its frames and if_indextoname()'s, a few KiB */
#define CHILD_STACK (64 * 1024)

struct netns_args {
	int nsfd;
	struct orh_netns_info *info;
	char *buf;   /* NL_BUF bytes for rtnetlink's answers */
	int rc;      /* the reader's result */
};

static int nl_dump(int sk, uint16_t type, uint8_t family, uint32_t seq)
{
	struct {
		struct nlmsghdr nh;
		struct rtgenmsg g;
	} req;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(req.g));
	req.nh.nlmsg_type = type;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.nh.nlmsg_seq = seq;
	req.g.rtgen_family = family;
	if (sendto(sk, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return 0;
}

static void on_addr(struct nlmsghdr *nh, struct orh_netns_info *info)
{
	struct ifaddrmsg *ifa = NLMSG_DATA(nh);
	int len = (int)IFA_PAYLOAD(nh);
	struct in_addr local = { 0 }, address = { 0 };
	bool have_local = false, have_address = false;

	if (ifa->ifa_family != AF_INET)
		return;
	for (struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (RTA_PAYLOAD(a) < sizeof(struct in_addr))
			continue;
		if (a->rta_type == IFA_LOCAL) {
			memcpy(&local, RTA_DATA(a), sizeof(local));
			have_local = true;
		} else if (a->rta_type == IFA_ADDRESS) {
			memcpy(&address, RTA_DATA(a), sizeof(address));
			have_address = true;
		}
	}
	if (!have_local && !have_address)
		return;
	if (!have_local)
		local = address;
	if ((ntohl(local.s_addr) >> 24) == 127 || info->n_addrs >= ORH_NETNS_MAX_ADDRS)
		return;
	info->ifindex[info->n_addrs] = ifa->ifa_index;
	info->addrs[info->n_addrs++] = local;
}

/* Kinds of link that are never a RoCE net device nor an upper device of one (a VLAN, a
 * macvlan, a bond on it): the kernel gives their addresses no GID entry
 * (roce_gid_mgmt.c). A pod's veth is one: its address is in no GID table. */
static bool kind_has_no_gid(const char *kind)
{
	static const char *const kinds[] = { "veth", "dummy", "vxlan", "geneve", "wireguard",
					     "tun", "ipip", "gre", "sit" };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(kinds); i++)
		if (!strcmp(kind, kinds[i]))
			return true;
	return false;
}

/* A link of a kind that holds no GID: its addresses are marked so. */
static void on_link(struct nlmsghdr *nh, struct orh_netns_info *info)
{
	struct ifinfomsg *ifi = NLMSG_DATA(nh);
	int len = (int)IFLA_PAYLOAD(nh);

	for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		int ilen = (int)RTA_PAYLOAD(a);

		if (a->rta_type != IFLA_LINKINFO)
			continue;
		for (struct rtattr *k = RTA_DATA(a); RTA_OK(k, ilen); k = RTA_NEXT(k, ilen)) {
			char kind[32];

			if (k->rta_type != IFLA_INFO_KIND || RTA_PAYLOAD(k) >= sizeof(kind))
				continue;
			memcpy(kind, RTA_DATA(k), RTA_PAYLOAD(k));
			kind[RTA_PAYLOAD(k)] = '\0';
			for (size_t i = 0; kind_has_no_gid(kind) && i < info->n_addrs; i++)
				if (info->ifindex[i] == (unsigned)ifi->ifi_index)
					info->no_gid[i] = true;
		}
	}
}

static void on_route(struct nlmsghdr *nh, int *best_oif, uint32_t *best_prio)
{
	struct rtmsg *rt = NLMSG_DATA(nh);
	int len = (int)RTM_PAYLOAD(nh);
	uint32_t table = rt->rtm_table, prio = 0;
	int oif = 0;

	if (rt->rtm_family != AF_INET || rt->rtm_dst_len != 0 || rt->rtm_type != RTN_UNICAST)
		return;
	for (struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (RTA_PAYLOAD(a) < sizeof(uint32_t))
			continue;
		if (a->rta_type == RTA_OIF)
			memcpy(&oif, RTA_DATA(a), sizeof(oif));
		else if (a->rta_type == RTA_PRIORITY)
			memcpy(&prio, RTA_DATA(a), sizeof(prio));
		else if (a->rta_type == RTA_TABLE)
			memcpy(&table, RTA_DATA(a), sizeof(table));
	}
	if (table != RT_TABLE_MAIN || oif <= 0)
		return;
	if (*best_oif == 0 || prio < *best_prio) {
		*best_oif = oif;
		*best_prio = prio;
	}
}

/* Read one dump to its NLMSG_DONE, into buf (NL_BUF bytes). */
static int nl_read(int sk, char *buf, uint32_t seq, struct orh_netns_info *info, int *oif,
		   uint32_t *prio)
{
	for (;;) {
		ssize_t n = recv(sk, buf, NL_BUF, 0);
		int len = (int)n;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (unsigned)len);
		     nh = NLMSG_NEXT(nh, len)) {
			if (nh->nlmsg_seq != seq)
				continue;
			if (nh->nlmsg_type == NLMSG_DONE)
				return 0;
			if (nh->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(nh);

				return e->error ? e->error : -EIO;
			}
			if (nh->nlmsg_type == RTM_NEWADDR)
				on_addr(nh, info);
			else if (nh->nlmsg_type == RTM_NEWROUTE)
				on_route(nh, oif, prio);
			else if (nh->nlmsg_type == RTM_NEWLINK)
				on_link(nh, info);
		}
	}
}

static int netns_child(void *p)
{
	struct netns_args *a = p;
	_cleanup_close_ int sk = -1;
	int oif = 0, r;
	uint32_t prio = 0;

	if (setns(a->nsfd, CLONE_NEWNET) < 0)
		return -(1 << 16 | errno);
	sk = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (sk < 0)
		return -(2 << 16 | errno);
	r = nl_dump(sk, RTM_GETADDR, AF_INET, 1);
	if (r == 0)
		r = nl_read(sk, a->buf, 1, a->info, &oif, &prio);
	if (r == 0)
		r = nl_dump(sk, RTM_GETROUTE, AF_INET, 2);
	if (r == 0)
		r = nl_read(sk, a->buf, 2, a->info, &oif, &prio);
	/* after the addresses: the kinds of their links */
	if (r == 0 && a->info->n_addrs > 0)
		r = nl_dump(sk, RTM_GETLINK, AF_UNSPEC, 3);
	if (r == 0 && a->info->n_addrs > 0)
		r = nl_read(sk, a->buf, 3, a->info, &oif, &prio);
	if (r < 0)
		return -(3 << 16 | -r);
	if (oif > 0 && !if_indextoname((unsigned)oif, a->info->default_if))
		a->info->default_if[0] = '\0';
	return 0;
}

static int netns_entry(void *p)
{
	struct netns_args *a = p;

	a->rc = netns_child(a);
	return 0;
}

/* Run netns_child() in a child of the same memory, waiting for its end. */
static int read_in_child(struct netns_args *a, struct orh_err *err)
{
	_cleanup_free_ char *stack = orh_xmalloc(CHILD_STACK);
	int status = 0;
	pid_t pid;

	pid = clone(netns_entry, stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
	if (pid < 0)
		return orh_fail_errno(err, errno, "clone");
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return orh_fail_errno(err, errno, "waitpid");
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return orh_fail(err, EIO, "helper child failed (status 0x%x)", status);
	return 0;
}

int orh_netns_read(const char *nspath, struct orh_netns_info *out, struct orh_err *err)
{
	static const char *const steps[] = { "", "setns", "netlink socket", "netlink dump" };
	_cleanup_close_ int nsfd = open(nspath, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	struct netns_args args;
	int rc, r;

	memset(out, 0, sizeof(*out));
	if (nsfd < 0)
		return orh_fail_errno(err, errno, "opening network namespace '%s'", nspath);
	buf = orh_xmalloc(NL_BUF);
	args = (struct netns_args){ .nsfd = nsfd, .info = out, .buf = buf };
	r = read_in_child(&args, err);
	if (r < 0) {
		memset(out, 0, sizeof(*out));
		return orh_err_prefix(err, "reading network namespace '%s'", nspath);
	}
	rc = args.rc;
	if (rc < 0) {
		unsigned step = ((unsigned)-rc >> 16) & 3;

		memset(out, 0, sizeof(*out));
		return orh_fail_errno(err, (-rc) & 0xffff, "network namespace '%s': %s", nspath,
				      steps[step]);
	}
	out->default_if[IFNAMSIZ - 1] = '\0';
	if (out->n_addrs > ORH_NETNS_MAX_ADDRS)
		out->n_addrs = ORH_NETNS_MAX_ADDRS;
	return 0;
}

static void add_addr(struct orh_netns_info *out, struct in_addr a)
{
	if ((ntohl(a.s_addr) >> 24) == 127 || out->n_addrs >= ORH_NETNS_MAX_ADDRS)
		return;
	for (size_t i = 0; i < out->n_addrs; i++)
		if (out->addrs[i].s_addr == a.s_addr)
			return; /* listed in both the main and the local trie */
	out->addrs[out->n_addrs++] = a;
}

/* fib_trie lists each prefix as a "|-- a.b.c.d" leaf followed by one line per route
 * through it; a local address is a leaf with a "/32 host LOCAL" line. */
void orh_netns_parse_fib_trie(const char *text, struct orh_netns_info *out)
{
	struct in_addr leaf = { 0 };
	bool have_leaf = false;

	out->n_addrs = 0;
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[128];
		const char *t;

		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			t = buf + strspn(buf, " \t");
			if (!strncmp(t, "|-- ", 4)) {
				have_leaf = inet_pton(AF_INET, t + 4, &leaf) == 1;
			} else if (!strncmp(t, "+-- ", 4)) {
				have_leaf = false;
			} else if (have_leaf && !strcmp(t, "/32 host LOCAL")) {
				add_addr(out, leaf);
			}
		}
		line = end ? end + 1 : NULL;
	}
}

void orh_netns_parse_route(const char *text, struct orh_netns_info *out)
{
	unsigned best = ~0u;
	int lineno = 0;

	out->default_if[0] = '\0';
	for (const char *line = text; line && *line; lineno++) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[512], ifname[IFNAMSIZ];
		bool is_default;
		unsigned metric;

		if (lineno > 0 && len < sizeof(buf)) { /* line 0 is the header */
			memcpy(buf, line, len);
			buf[len] = '\0';
			if (orh_parse_route_line(buf, ifname, &is_default, &metric) == 0 && is_default &&
			    metric < best) {
				best = metric;
				memcpy(out->default_if, ifname, IFNAMSIZ);
			}
		}
		line = end ? end + 1 : NULL;
	}
}

#define PROC_NET_MAX (4 * 1024 * 1024)

int orh_netns_read_target(const struct orh_target *t, struct orh_netns_info *out,
			  struct orh_err *err)
{
	static const char *const files[] = { "net/route", "net/fib_trie" };

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < ORH_ARRAY_SIZE(files); i++) {
		_cleanup_free_ char *text = NULL;
		int r = orh_target_read(t, files[i], PROC_NET_MAX, &text, err);

		if (r < 0) {
			memset(out, 0, sizeof(*out));
			return r;
		}
		if (i == 0)
			orh_netns_parse_route(text, out);
		else
			orh_netns_parse_fib_trie(text, out);
	}
	return 0;
}
