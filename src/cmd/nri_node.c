/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NRI plugin's node (include/orh/cmd/nri_plugin.h): read for no container in particular
 * when the plugin starts, kept, and restored by each CreateContainer decision that would read
 * the node as it was read (orh/node/node.h's cache), so that a pod's start reads only what
 * its own decision adds (the GPUs of a container that holds some, GID entries the first
 * planning did not need). It is read again when it is ORH_NRI_NODE_MAX_AGE_MS old, and,
 * on the host's sysfs, as soon as the kernel says the node changed: a uevent of the RDMA
 * classes, or an rtnetlink message of route_counts(): a link or address message of one of
 * its net devices (an RDMA port's, the default route's) or of a device whose link or
 * master is one, or an address of a device on top of one (a VLAN, a bond, a bridge).
 * Between the message and the new reading the node kept is not used. A fake tree (--sysroot) has no kernel to say it changed: its node is read
 * again by age and SIGHUP only. The reading is a child's, which the plugin waits for 2
 * seconds at most (a few milliseconds on the scale node): a hung sysfs read holds the
 * plugin's loop that long, once, and the plugin then keeps no node (the decisions read it
 * themselves, each under its own deadline).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "orh/base/json.h"
#include "orh/base/log.h"
#include "orh/cmd/commands.h"
#include "orh/cmd/nri_plugin.h"
#include "orh/decide/decide.h"
#include "orh/node/node.h"
#include "orh/node/snapshot.h"

/* the most a reading may take, and the least time between two readings the kernel's
 * messages cause (a link that flaps reads the node at most this often) */
#define READ_DEADLINE_MS 2000
#define READ_EVERY_MIN_MS 250
#define SNAP_MAX (16u << 20)
#define NETDEVS_MAX 256

static struct orh_node_cache cache;
static char *cache_sysroot;
static double due;               /* when to read again */
static double last_try = -1;
/* the net devices of the node kept (its RDMA ports', the default route's), by index and
 * name (the host's sysfs only) */
static unsigned netdev_idx[NETDEVS_MAX];
static char netdev_name[NETDEVS_MAX][IF_NAMESIZE];
static size_t n_netdevs;
static int ev_fd[2] = { -1, -1 };

static void drop(struct orh_ctx *ctx)
{
	orh_nri_resident_stop(); /* it holds the node dropped */
	json_decref(cache.snap);
	cache.snap = NULL;
	ctx->node_cache = NULL;
}

/* The child: the decision of a container on the host network that asked for nothing (as
 * `env` makes it), its node's snapshot written to fd. */
static void __attribute__((noreturn)) reader_main(struct orh_ctx *ctx, int fd)
{
	struct orh_decide_in in = { .cfg = &ctx->cfg, .sysroot = ctx->sysroot,
				    .scan = ORH_GIDS_PLAN };
	struct orh_decision d;
	struct orh_err err = { 0 };
	json_t *snap;
	char *text;
	int r = orh_decide(&in, &d, &err);

	if (r < 0 || !d.node.have_inv)
		_exit(ORH_EXIT_FAIL);
	snap = orh_snapshot_build(&d.node.inv, NULL, NULL);
	text = snap ? json_dumps(snap, JSON_COMPACT) : NULL;
	_exit(text && orh_write_all(fd, text, strlen(text)) == 0 ? ORH_EXIT_OK : ORH_EXIT_FAIL);
}

static void note_netdev(const char *nd)
{
	unsigned idx = nd[0] ? if_nametoindex(nd) : 0;

	for (size_t i = 0; idx && i < n_netdevs; i++)
		if (netdev_idx[i] == idx)
			return;
	if (!idx || n_netdevs == NETDEVS_MAX)
		return;
	netdev_idx[n_netdevs] = idx;
	snprintf(netdev_name[n_netdevs++], IF_NAMESIZE, "%s", nd);
}

/* The net devices of the node kept, its RDMA ports' and the default route's (the kernel's
 * messages about them count). */
static void netdevs_note(const struct orh_node_cache *c)
{
	struct orh_inventory inv = { 0 };
	struct orh_discover_opts o = { .sysroot = c->sysroot, .gid_scan = ORH_GIDS_PLAN,
				       .want = c->want, .mad = c->mad, .topology = c->topology };
	struct orh_gpus g = { 0 };
	struct orh_err err = { 0 };
	char *gerr = NULL;
	bool gread = false;

	n_netdevs = 0;
	if (strcmp(c->sysroot, "/") ||
	    orh_snapshot_restore(c->snap, "the node kept", &o, &inv, &g, &gread, &gerr, &err) < 0)
		return;
	for (size_t i = 0; i < inv.n_devs; i++)
		for (size_t j = 0; j < inv.devs[i].n_ports; j++)
			note_netdev(inv.devs[i].ports[j].netdev);
	note_netdev(inv.default_route_if);
	orh_inventory_free(&inv);
	orh_gpus_free(&g);
	free(gerr);
}

void orh_nri_node_read(struct orh_ctx *ctx)
{
	double now = orh_now_ms();
	int fds[2];
	char *text = NULL;
	size_t len = 0;
	json_t *snap = NULL;
	struct stat st;
	pid_t pid;
	int r = -1;

	last_try = now;
	due = now + ORH_NRI_NODE_MAX_AGE_MS;
	drop(ctx);
	/* the config the workers decide with now: a change reads the node as they will */
	if (orh_nri_config_reload(ctx) < 0 || pipe2(fds, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		reader_main(ctx, fds[1]);
	}
	close(fds[1]);
	if (pid > 0) {
		r = orh_read_fd_all_within(fds[0], SNAP_MAX, READ_DEADLINE_MS, &text, &len);
		if (r < 0)
			kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close(fds[0]);
	if (r == 0 && len)
		snap = json_loadb(text, len, 0, NULL);
	free(text);
	if (!json_is_object(snap) || stat(ctx->sysroot ? ctx->sysroot : "/", &st) < 0) {
		json_decref(snap);
		return;
	}
	free(cache_sysroot);
	cache_sysroot = orh_xstrdup(ctx->sysroot ? ctx->sysroot : "/");
	cache = (struct orh_node_cache){
		.snap = snap, .sysroot = cache_sysroot,
		.want = { .family = ctx->cfg.gid_family, .roce_version = ctx->cfg.roce_version },
		.mad = ctx->cfg.management_devices, .topology = false,
		.root_dev = st.st_dev, .root_ino = st.st_ino,
	};
	cache.read_ms = orh_now_ms();
	ctx->node_cache = &cache;
	netdevs_note(&cache);
}

double orh_nri_node_due(void)
{
	return due;
}

void orh_nri_node_tick(struct orh_ctx *ctx, double now)
{
	if (now >= due)
		orh_nri_node_read(ctx);
}

/* ---- the kernel's messages ---- */

static void events_open(void)
{
	struct sockaddr_nl rt = { .nl_family = AF_NETLINK,
				  .nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR };
	struct sockaddr_nl ue = { .nl_family = AF_NETLINK, .nl_groups = 1 };

	ev_fd[0] = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
	if (ev_fd[0] >= 0 && bind(ev_fd[0], (struct sockaddr *)&rt, sizeof(rt)) < 0) {
		close(ev_fd[0]);
		ev_fd[0] = -1;
	}
	ev_fd[1] = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			  NETLINK_KOBJECT_UEVENT);
	if (ev_fd[1] >= 0 && bind(ev_fd[1], (struct sockaddr *)&ue, sizeof(ue)) < 0) {
		close(ev_fd[1]);
		ev_fd[1] = -1;
	}
}

size_t orh_nri_node_fds(const struct orh_ctx *ctx, int fds[2])
{
	size_t n = 0;

	if (ev_fd[0] < 0 && ev_fd[1] < 0 && ctx->sysroot && !strcmp(ctx->sysroot, "/"))
		events_open();
	for (size_t i = 0; i < 2; i++)
		if (ev_fd[i] >= 0)
			fds[n++] = ev_fd[i];
	return n;
}

static bool kept_index(unsigned idx)
{
	for (size_t i = 0; i < n_netdevs; i++)
		if (netdev_idx[i] == idx)
			return true;
	return false;
}

/* Is the device of this index on top of one of the node's net devices (its lower_NAME link
 * in sysfs names one)? */
static bool above_kept(unsigned idx)
{
	char name[IF_NAMESIZE], path[64];
	struct dirent *e;
	bool r = false;
	DIR *d;

	if (!n_netdevs || !if_indextoname(idx, name))
		return false;
	snprintf(path, sizeof(path), "/sys/class/net/%s", name);
	d = opendir(path);
	if (!d)
		return false;
	while (!r && (e = readdir(d)))
		if (!strncmp(e->d_name, "lower_", 6))
			for (size_t i = 0; i < n_netdevs && !r; i++)
				r = !strcmp(e->d_name + 6, netdev_name[i]);
	closedir(d);
	return r;
}

/* Does an rtnetlink message concern the node kept: a link or address message of one of its
 * net devices, of a device whose lower link (IFLA_LINK) or master is one, or an address of a
 * device on top of one? */
static bool route_counts(const struct nlmsghdr *h, size_t n)
{
	for (; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == RTM_NEWLINK || h->nlmsg_type == RTM_DELLINK) {
			const struct ifinfomsg *ifi = NLMSG_DATA(h);
			size_t alen = IFLA_PAYLOAD(h);

			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
				continue;
			if (kept_index((unsigned)ifi->ifi_index))
				return true;
			for (const struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, alen);
			     a = RTA_NEXT(a, alen))
				if ((a->rta_type == IFLA_LINK || a->rta_type == IFLA_MASTER) &&
				    RTA_PAYLOAD(a) >= sizeof(unsigned) &&
				    kept_index(*(const unsigned *)RTA_DATA(a)))
					return true;
		} else if (h->nlmsg_type == RTM_NEWADDR || h->nlmsg_type == RTM_DELADDR) {
			const struct ifaddrmsg *ifa = NLMSG_DATA(h);

			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)))
				continue;
			if (kept_index(ifa->ifa_index) || above_kept(ifa->ifa_index))
				return true;
		}
	}
	return false;
}

/* Does a uevent concern the RDMA devices (SUBSYSTEM=infiniband, infiniband_verbs,
 * infiniband_mad)? */
static bool uevent_counts(const char *m, size_t n)
{
	for (size_t i = 0; i < n; i += strnlen(m + i, n - i) + 1)
		if (!strncmp(m + i, "SUBSYSTEM=infiniband", 20))
			return true;
	return false;
}

void orh_nri_node_event(struct orh_ctx *ctx, int fd)
{
	char buf[16384] __attribute__((aligned(4)));
	bool counts = false;
	ssize_t n;

	for (;;) {
		struct sockaddr_nl from = { 0 };
		socklen_t fl = sizeof(from);

		n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* the kernel's only: another process's message says nothing of the node */
		if (from.nl_pid == 0 && !counts)
			counts = fd == ev_fd[0] ? route_counts((struct nlmsghdr *)buf, (size_t)n)
						: uevent_counts(buf, (size_t)n);
	}
	if (n < 0 && errno == ENOBUFS) /* messages lost: any may have counted */
		counts = true;
	if (!counts)
		return;
	if (cache.snap)
		ORH_NRI_LOG(ORH_NRI_NODE, LOG_INFO, "nri: the kernel says the node changed (%s): "
			    "reading it again", fd == ev_fd[0] ? "a link or address of its net "
			    "devices" : "a uevent of its RDMA devices");
	drop(ctx);
	due = last_try + READ_EVERY_MIN_MS;
}
