/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The planner: node config x inventory x container facts -> plan. Pure: reads nothing of
 * the node but the GID entries it asks its caller's reader for, writes nothing but the
 * plan. Each numbered rule below is the rule of the same number in man/oci-rdma-hook.conf.5.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "orh/decide/plan.h"

#define VENDOR_ALIBABA_ERDMA 0x1ded
#define NCCL_MAX_HCA 32

/* The bound driver says what the device is; the PCI vendor only when the driver link
 * cannot be read (discovery in plan mode reads the vendor only then). */
static bool dev_is_erdma(const struct orh_device *d)
{
	if (d->driver[0])
		return strcmp(d->driver, "erdma") == 0;
	return d->vendor == VENDOR_ALIBABA_ERDMA;
}

static bool listed(const struct orh_strv *list, const struct orh_device *d, unsigned port)
{
	char both[ORH_NAME_MAX + 8];

	if (!list->n)
		return false; /* the usual case: no snprintf for every port */
	snprintf(both, sizeof(both), "%s:%u", d->name, port);
	return orh_strv_contains(list, d->name) || orh_strv_contains(list, both);
}

static void env_set(struct orh_plan *plan, const char *name, const char *value, const char *source)
{
	size_t i = 0;

	while (i < plan->n_env && strcmp(plan->env[i].name, name))
		i++;
	if (i == plan->n_env) { /* a new name goes last */
		plan->env = orh_xrealloc(plan->env, (plan->n_env + 1) * sizeof(*plan->env));
		plan->env[plan->n_env++] = (struct orh_env_entry){ .name = orh_xstrdup(name) };
	}
	free(plan->env[i].value);
	free(plan->env[i].source);
	plan->env[i].value = orh_xstrdup(value);
	plan->env[i].source = orh_xstrdup(source);
}

static void env_unset(struct orh_plan *plan, const char *name)
{
	for (size_t i = 0; i < plan->n_env; i++)
		if (!strcmp(plan->env[i].name, name)) {
			free(plan->env[i].name);
			free(plan->env[i].value);
			free(plan->env[i].source);
			memmove(&plan->env[i], &plan->env[i + 1],
				(plan->n_env - i - 1) * sizeof(*plan->env));
			plan->n_env--;
			return;
		}
}

/* Add a node for cd (of owner, NULL for rdma_cm) once. */
static void add_node(struct orh_plan *plan, const struct orh_chardev *cd, unsigned mode,
		     enum orh_chardev_kind kind, const struct orh_device *owner)
{
	struct orh_devnode *n;

	for (size_t i = 0; i < plan->n_nodes; i++)
		if (plan->nodes[i].kind == kind && plan->nodes[i].major == cd->major &&
		    plan->nodes[i].minor == cd->minor)
			return;
	plan->nodes = orh_xgrow(plan->nodes, plan->n_nodes, sizeof(*plan->nodes));
	n = &plan->nodes[plan->n_nodes++];
	memset(n, 0, sizeof(*n));
	/* discovery's names are short, printable and have no '/' */
	orh_strlcpy(stpcpy(n->path, ORH_DEV_DIR), cd->name, sizeof(n->path) - strlen(ORH_DEV_DIR));
	n->major = cd->major;
	n->minor = cd->minor;
	n->mode = mode;
	n->kind = kind;
	n->owner = owner;
}

static void choice_init(struct orh_plan *plan, const struct orh_inventory *inv)
{
	size_t n = 0;

	for (size_t d = 0; d < inv->n_devs; d++)
		n += inv->devs[d].n_ports;
	plan->ports = orh_xcalloc(n, sizeof(*plan->ports));
	for (size_t d = 0; d < inv->n_devs; d++)
		for (size_t p = 0; p < inv->devs[d].n_ports; p++) {
			struct orh_port_choice *c = &plan->ports[plan->n_ports++];
			c->dev = &inv->devs[d];
			c->port = &inv->devs[d].ports[p];
			c->gid_index = -1;
		}
}

/* Does the container hold device d (its uverbs node, by number)? */
static bool holds(const struct orh_container_facts *f, const struct orh_device *d)
{
	for (size_t i = 0; i < f->n_devs; i++)
		if (d->uverbs.present && f->devs[i].major == d->uverbs.major &&
		    f->devs[i].minor == d->uverbs.minor)
			return true;
	return false;
}

/* Rule 8, what the container was given: each port's given (it holds the port's device),
 * and given_any: it holds any uverbs node (of this node's devices, or of a number the
 * kernel gives uverbs), so something (a device plugin, --device, CDI) chose its HCAs. A
 * warning when none of those is a device of this node. */
static void given_devices(const struct orh_container_facts *f, const struct orh_inventory *inv,
			  struct orh_plan *plan)
{
	size_t matched = 0;

	if (!f)
		return;
	for (size_t k = 0; k < plan->n_ports; k++)
		plan->ports[k].given = holds(f, plan->ports[k].dev);
	for (size_t d = 0; d < inv->n_devs; d++)
		matched += holds(f, &inv->devs[d]);
	plan->given_any = matched > 0;
	for (size_t i = 0; i < f->n_devs && !plan->given_any; i++)
		plan->given_any = orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, f->devs[i].major,
						     f->devs[i].minor, NULL);
	if (plan->given_any && matched == 0)
		orh_strv_pushf(&plan->warnings,
			       "the container holds uverbs nodes that are none of this node's "
			       "devices: no HCA of the node is given");
}

#define LEAVE_OUT(c, ...) do { (c)->used = false; snprintf((c)->reason, sizeof((c)->reason), __VA_ARGS__); } while (0)

bool orh_plan_port_usable(const struct orh_port *p)
{
	return p->state == ORH_PORT_ACTIVE && p->link_layer != ORH_LL_UNKNOWN;
}

bool orh_plan_gid_wanted(const struct orh_gid *g, const struct orh_gid_want *want,
			 bool type_known)
{
	if (orh_gid_is_link_local(g) || g->ipv4_mapped != (want->family == AF_INET))
		return false;
	if (!type_known)
		return true;
	if (want->roce_version == 2)
		return g->type == ORH_GID_TYPE_ROCE_V2;
	return g->type == ORH_GID_TYPE_IB_ROCE_V1;
}

/* Rules 1 and 2: which ports are usable. Rule 2 is a guess at which NIC the node keeps for
 * TCP; a container whose devices were chosen for it (rule 8, `given`) is not guessed for. */
static void choose_ports(const struct orh_config *cfg, const struct orh_inventory *inv,
			 bool given, struct orh_plan *plan)
{
	bool off_route = false;

	for (size_t k = 0; k < plan->n_ports; k++) {
		struct orh_port_choice *c = &plan->ports[k];
		const struct orh_port *port = c->port;

		c->used = true;
		if (cfg->include.n && !listed(&cfg->include, c->dev, port->num))
			LEAVE_OUT(c, "not in the config's include list");
		else if (listed(&cfg->exclude, c->dev, port->num))
			LEAVE_OUT(c, "in the config's exclude list");
		else if (port->state != ORH_PORT_ACTIVE)
			LEAVE_OUT(c, "port state %s, not ACTIVE",
				  port->state_text[0] ? port->state_text : "unreadable");
		else if (!orh_plan_port_usable(port))
			LEAVE_OUT(c, "link layer Unknown (not an NCCL IB device)");
		else if (!c->dev->uverbs.present)
			LEAVE_OUT(c, "device has no uverbs node");
		if (c->used && port->netdev[0] && strcmp(port->netdev, inv->default_route_if))
			off_route = true;
	}
	/* Rule 2: the front-end NIC carries the default route; leave it to TCP when the
	 * node has fabric ports besides it. eRDMA devices are the VPC NICs by design. */
	if (!cfg->skip_default_route_nic || !inv->default_route_if[0] || !off_route || given)
		return;
	for (size_t k = 0; k < plan->n_ports; k++) {
		struct orh_port_choice *c = &plan->ports[k];

		if (c->used && !dev_is_erdma(c->dev) &&
		    !strcmp(c->port->netdev, inv->default_route_if) &&
		    !(cfg->include.n && listed(&cfg->include, c->dev, c->port->num)))
			LEAVE_OUT(c, "front-end NIC: %s carries the default route", c->port->netdev);
	}
}

/* Rule 8: one holding uverbs nodes (given_devices()) gets those: no other HCA's node or grant */
static void keep_given(struct orh_plan *plan)
{
	if (!plan->given_any)
		return;
	for (size_t k = 0; k < plan->n_ports; k++)
		if (plan->ports[k].used && !plan->ports[k].given)
			LEAVE_OUT(&plan->ports[k], "rule 8: not given to this container (it "
				  "holds other RDMA devices)");
}

static const char *fabric_name(enum orh_link_layer ll)
{
	return ll == ORH_LL_INFINIBAND ? "InfiniBand" : "Ethernet";
}

void orh_plan_near_gpus(enum orh_nic_affinity mode, const struct orh_plan *plan,
			const struct orh_inventory *inv, const struct orh_gpus *gpus,
			const bool *held, const struct orh_dra_meta *dra, struct orh_affinity *aff)
{
	_cleanup_free_ bool *candidate = orh_xcalloc(inv->n_devs + 1, sizeof(*candidate));

	for (size_t k = 0; k < plan->n_ports; k++)
		candidate[plan->ports[k].dev - inv->devs] |= plan->ports[k].used;
	if (dra)
		orh_dra_affinity(dra, inv->devs, inv->n_devs, candidate, gpus, aff);
	else
		orh_nic_affinity(mode, inv->devs, inv->n_devs, candidate, gpus, held, aff);
}

/* Rule 9: a container given a subset of the node's GPUs (and no RDMA device of its own) gets,
 * among the ports the rules before left it, those of the NICs nearest to them (affinity.c);
 * one given GPUs and NICs by DRA claims, those on its GPUs' PCIe roots (f->dra). */
static void near_gpus(const struct orh_config *cfg, const struct orh_container_facts *f,
		      const struct orh_inventory *inv, struct orh_plan *plan)
{
	struct orh_affinity aff = { 0 };

	if (!f || (!f->gpus_held && !f->dra) || cfg->nic_affinity == ORH_AFFINITY_NONE)
		return;
	orh_plan_near_gpus(cfg->nic_affinity, plan, inv, f->gpus, f->gpus_held, f->dra, &aff);
	for (size_t k = 0; k < plan->n_ports && !aff.every; k++) {
		struct orh_port_choice *c = &plan->ports[k];
		size_t d = (size_t)(c->dev - inv->devs);

		if (c->used && d < aff.n && !aff.v[d].chosen)
			LEAVE_OUT(c, "rule 9: %s", aff.v[d].reason[0] ? aff.v[d].reason
				  : "not near the container's GPUs");
	}
	orh_affinity_free(&aff);
}

/* Rule 10: one fabric. NCCL_IB_HCA never mixes InfiniBand and Ethernet (RoCE) ports:
 * the config's link_layer, else the larger group (InfiniBand on a tie). */
static void one_fabric(const struct orh_config *cfg, struct orh_plan *plan)
{
	size_t n_ib = 0, n_eth = 0;
	enum orh_link_layer keep;
	char left[512] = "";

	for (size_t k = 0; k < plan->n_ports; k++)
		if (plan->ports[k].used) {
			n_ib += plan->ports[k].port->link_layer == ORH_LL_INFINIBAND;
			n_eth += plan->ports[k].port->link_layer == ORH_LL_ETHERNET;
		}
	if (cfg->link_layer == ORH_FABRIC_AUTO && (n_ib == 0 || n_eth == 0))
		return;
	if (cfg->link_layer == ORH_FABRIC_INFINIBAND)
		keep = ORH_LL_INFINIBAND;
	else if (cfg->link_layer == ORH_FABRIC_ETHERNET)
		keep = ORH_LL_ETHERNET;
	else
		keep = n_ib >= n_eth ? ORH_LL_INFINIBAND : ORH_LL_ETHERNET;
	for (size_t k = 0; k < plan->n_ports; k++) {
		struct orh_port_choice *c = &plan->ports[k];
		size_t len = strlen(left);

		if (!c->used || c->port->link_layer == keep)
			continue;
		LEAVE_OUT(c, "rule 10: %s; NCCL_IB_HCA holds %s ports only",
			  fabric_name(c->port->link_layer), fabric_name(keep));
		snprintf(left + len, sizeof(left) - len, "%s%s:%u", len ? "," : "", c->dev->name,
			 c->port->num);
	}
	if (left[0])
		orh_strv_pushf(&plan->warnings,
			       "the usable ports are InfiniBand (%zu) and Ethernet (%zu): NCCL_IB_HCA "
			       "holds the %s ones (%s); left out: %s", n_ib, n_eth, fabric_name(keep),
			       cfg->link_layer == ORH_FABRIC_AUTO ? "the larger group" : "config link_layer",
			       left);
}

static enum orh_preset auto_preset(const struct orh_plan *plan)
{
	bool erdma = false, eth = false;

	for (size_t k = 0; k < plan->n_ports; k++) {
		if (!plan->ports[k].used)
			continue;
		if (dev_is_erdma(plan->ports[k].dev))
			erdma = true;
		if (plan->ports[k].port->link_layer == ORH_LL_ETHERNET)
			eth = true;
	}
	return erdma ? ORH_PRESET_ERDMA : eth ? ORH_PRESET_ROCE : ORH_PRESET_INFINIBAND;
}

static void apply_preset(struct orh_plan *plan, enum orh_preset preset)
{
	char src[64];

	snprintf(src, sizeof(src), "rule 6: preset %s", orh_preset_name(preset));
	switch (preset) {
	case ORH_PRESET_ERDMA:
		env_set(plan, "NCCL_IB_QPS_PER_CONNECTION", "8", src);
		env_set(plan, "NCCL_MIN_NCHANNELS", "16", src);
		env_set(plan, "NCCL_NET_PLUGIN", "none", src);
		break;
	case ORH_PRESET_ROCE:
		env_set(plan, "NCCL_IB_TIMEOUT", "22", src);
		env_set(plan, "NCCL_IB_QPS_PER_CONNECTION", "8", src);
		break;
	default:
		break;
	}
}

/*
 * Rules 3 and 4 together. NCCL_IB_HCA holds the first 32 usable ports; a RoCE port is
 * usable when its table has a GID of the wanted kind. Rule 4 gives every RoCE port among
 * them one index when one fits them all: the lowest index that holds a GID of the
 * wanted kind on every such port (for a port whose table holds the container's own
 * address, that entry's index only). Entries are asked for in the order this search
 * needs them (through the caller's reader), so on a node whose ports agree, the first port costs a
 * walk to its first wanted entry and every other port one entry.
 */
struct roce {
	size_t k;                 /* index in plan->ports */
	const struct orh_port *port;
	int fixed;                /* the container's address's entry, -1: none */
};

struct gid_search {
	const struct orh_gid_reader *gids;
	struct orh_gid_want want;
	const struct orh_container_facts *facts;
	struct orh_plan *plan;
	const char *family;
	int roce_version;
};

#define NONE (-1)

/* Entry idx of p's table, through the caller's reader: 1 when used, 0 when unused or
 * skipped (with a warning), -ENOENT past the end of the table. */
static int read_entry(struct gid_search *s, const struct orh_port *p, unsigned idx,
		      struct orh_gid *g)
{
	return s->gids->entry(s->gids->arg, p, idx, g, &s->plan->warnings);
}

/* The lowest index >= from that holds a GID of the wanted kind, or NONE. */
static int next_wanted(struct gid_search *s, const struct orh_port *p, unsigned from)
{
	for (unsigned idx = from;; idx++) {
		struct orh_gid g;
		int r = read_entry(s, p, idx, &g);

		if (r < 0)
			return NONE;
		if (r == 1 && orh_plan_gid_wanted(&g, &s->want, true))
			return (int)idx;
	}
}

/* The index of the first wanted entry that holds one of the container's addresses. */
static int container_entry(struct gid_search *s, const struct orh_port *p)
{
	const struct orh_container_facts *f = s->facts;

	if (!f || !f->own_netns || !f->n_addrs)
		return NONE;
	for (int idx = next_wanted(s, p, 0); idx != NONE; idx = next_wanted(s, p, (unsigned)idx + 1)) {
		struct orh_gid g;

		if (read_entry(s, p, (unsigned)idx, &g) != 1 || !g.ipv4_mapped)
			continue;
		for (size_t a = 0; a < f->n_addrs; a++)
			if (g.ipv4.s_addr == f->addrs[a].s_addr)
				return idx;
	}
	return NONE;
}

static void leave_out_no_gid(struct gid_search *s, struct orh_port_choice *c)
{
	LEAVE_OUT(c, "no %s RoCE v%d GID", s->family, s->roce_version);
	orh_strv_pushf(&s->plan->warnings, "%s:%u left out: its GID table has no %s RoCE v%d entry",
		       c->dev->name, c->port->num, s->family, s->roce_version);
}

static void set_index(struct orh_port_choice *c, int index, int fixed)
{
	c->gid_index = index;
	c->gid_from_container = fixed == index;
	/* "GID index N[ (the container's address)]", by hand: once for every RoCE port */
	strcpy(orh_put_uint(stpcpy(c->reason, "GID index "), (unsigned)index),
	       c->gid_from_container ? " (the container's address)" : "");
}

/* The lowest index that fits every port of r[0..n), or NONE. A port with no wanted entry
 * at all is reported in *empty (its position in r) and the search stops there. */
static int lowest_common(struct gid_search *s, const struct roce *r, size_t n, size_t *empty)
{
	unsigned c = 0;
	size_t agree = 0;

	*empty = n;
	if (n == 0)
		return NONE;
	/* Invariant: no index below c fits every port. Visit the ports in turn; each either
	 * holds c, or moves c up to its next wanted entry. */
	for (size_t i = 0;; i = (i + 1) % n) {
		int m;

		if (r[i].fixed != NONE)
			m = (unsigned)r[i].fixed >= c ? r[i].fixed : NONE;
		else
			m = next_wanted(s, r[i].port, c);
		if (m == NONE) {
			if (r[i].fixed == NONE && next_wanted(s, r[i].port, 0) == NONE)
				*empty = i;
			return NONE;
		}
		if ((unsigned)m > c) {
			c = (unsigned)m;
			agree = 0;
		}
		if (++agree == n)
			return (int)c;
	}
}

/* Per port of the plan: its inventory entry, and its container entry once looked up. */
struct hca_ctx {
	struct gid_search s;
	struct orh_plan *plan;
	int *fixed;
	bool *known;
};

static int fixed_of(struct hca_ctx *h, size_t k)
{
	if (!h->known[k]) {
		h->fixed[k] = container_entry(&h->s, h->plan->ports[k].port);
		h->known[k] = true;
	}
	return h->fixed[k];
}

/* NCCL_IB_HCA as things stand (rule 3): the first 32 used ports, in plan order. */
static size_t window(const struct orh_plan *plan, size_t w[NCCL_MAX_HCA])
{
	size_t n = 0;

	for (size_t k = 0; k < plan->n_ports && n < NCCL_MAX_HCA; k++)
		if (plan->ports[k].used)
			w[n++] = k;
	return n;
}

/* Which ports make NCCL_IB_HCA (rule 3) and their GID indices (rule 4). */
static void choose_hca(const struct orh_config *cfg, const struct orh_gid_reader *gids, const struct orh_container_facts *facts,
		       struct orh_plan *plan)
{
	size_t n_alloc = plan->n_ports ? plan->n_ports : 1, w[NCCL_MAX_HCA], nw, n, k = 0, empty;
	struct hca_ctx h = {
		.s = {
			.gids = gids,
			.want = { .family = cfg->gid_family, .roce_version = cfg->roce_version },
			.facts = facts,
			.plan = plan,
			.family = cfg->gid_family == AF_INET ? "IPv4" : "IPv6",
			.roce_version = cfg->roce_version,
		},
		.plan = plan,
		.fixed = orh_xcalloc(n_alloc, sizeof(*h.fixed)),
		.known = orh_xcalloc(n_alloc, sizeof(*h.known)),
	};
	struct roce r[NCCL_MAX_HCA];
	int common;

	/* One index for the RoCE ports of the window; a port with no wanted entry at all
	 * leaves, and the next used port takes its place. */
	for (;;) {
		nw = window(plan, w);
		n = 0;
		for (size_t i = 0; i < nw; i++)
			if (plan->ports[w[i]].port->link_layer == ORH_LL_ETHERNET)
				r[n++] = (struct roce){ .k = w[i], .port = plan->ports[w[i]].port,
							.fixed = fixed_of(&h, w[i]) };
		common = lowest_common(&h.s, r, n, &empty);
		if (common != NONE || empty == n)
			break;
		leave_out_no_gid(&h.s, &plan->ports[r[empty].k]);
	}
	if (common != NONE) {
		for (size_t i = 0; i < n; i++)
			set_index(&plan->ports[r[i].k], common, r[i].fixed);
	} else {
		/* None fits them all: each RoCE port takes its own (the container's entry, else
		 * its first wanted one); one without any leaves, and the window moves on. */
		bool moved;

		do {
			moved = false;
			nw = window(plan, w);
			for (size_t i = 0; i < nw && !moved; i++) {
				struct orh_port_choice *c = &plan->ports[w[i]];
				int fixed, idx;

				if (c->port->link_layer != ORH_LL_ETHERNET || c->gid_index != NONE)
					continue;
				fixed = fixed_of(&h, w[i]);
				idx = fixed != NONE ? fixed : next_wanted(&h.s, c->port, 0);
				if (idx != NONE) {
					set_index(c, idx, fixed);
				} else {
					leave_out_no_gid(&h.s, c);
					moved = true;
				}
			}
		} while (moved);
	}
	/* Rule 3's limit: used ports past the window are left out, unread. */
	nw = window(plan, w);
	for (k = nw ? w[nw - 1] + 1 : plan->n_ports; k < plan->n_ports; k++) {
		struct orh_port_choice *c = &plan->ports[k];

		if (!c->used)
			continue;
		LEAVE_OUT(c, "NCCL_IB_HCA holds at most %d entries", NCCL_MAX_HCA);
		orh_strv_pushf(&plan->warnings, "%s:%u left out: NCCL_IB_HCA holds at most %d entries",
			       c->dev->name, c->port->num, NCCL_MAX_HCA);
	}
	free(h.fixed);
	free(h.known);
}

/* Rule 4, for the node: one index for every port in NCCL_IB_HCA (plan->gid_index), or
 * NCCL's per-device selection when none fits them all (plan->gid_per_device). */
static void gid_choose(struct orh_plan *plan, bool *from_container)
{
	plan->gid_index = -1;
	*from_container = false;
	for (size_t k = 0; k < plan->n_ports; k++) {
		const struct orh_port_choice *c = &plan->ports[k];

		if (!c->used || c->gid_index < 0)
			continue;
		*from_container |= c->gid_from_container;
		if (plan->gid_index < 0 && !plan->gid_per_device)
			plan->gid_index = c->gid_index;
		else if (plan->gid_index != c->gid_index)
			plan->gid_per_device = true;
	}
	if (plan->gid_per_device)
		plan->gid_index = -1;
}

/* The variables of rule 4, from the plan's fields. */
static void gid_env(const struct orh_config *cfg, struct orh_plan *plan, bool from_container)
{
	const char *per_device =
		"rule 4: no single GID index fits every port; NCCL >= 2.21.5 picks per device";
	char list[1024] = "";

	if (plan->gid_index >= 0) {
		char v[16];

		snprintf(v, sizeof(v), "%d", plan->gid_index);
		env_set(plan, "NCCL_IB_GID_INDEX", v,
			from_container ? "rule 4: GID index of the container's address on every chosen port"
				       : "rule 4: the lowest GID index that fits every chosen port");
		return;
	}
	if (!plan->gid_per_device)
		return; /* no RoCE port */
	env_set(plan, "NCCL_IB_ROCE_VERSION_NUM", cfg->roce_version == 2 ? "2" : "1", per_device);
	env_set(plan, "NCCL_IB_ADDR_FAMILY", cfg->gid_family == AF_INET ? "AF_INET" : "AF_INET6",
		per_device);
	for (size_t k = 0; k < plan->n_ports; k++) {
		const struct orh_port_choice *c = &plan->ports[k];
		size_t len = strlen(list);

		if (c->used && c->gid_index >= 0)
			snprintf(list + len, sizeof(list) - len, "%s%s:%u=%d", len ? ", " : "",
				 c->dev->name, c->port->num, c->gid_index);
	}
	orh_strv_pushf(&plan->warnings,
		       "no single GID index fits every port (%s): NCCL_IB_GID_INDEX left unset, "
		       "NCCL >= 2.21.5 picks per device", list);
}

/* hca[len..] = <sep><dev>:<port>, by hand (once for every used port); returns the new
 * length. An entry that would not fit is left out: the buffer holds NCCL_MAX_HCA of them. */
static size_t hca_append(char *hca, size_t size, size_t len, const char *sep, const char *dev,
			 unsigned port)
{
	char num[12];
	size_t sl = strlen(sep), dl = strlen(dev), nl = (size_t)(orh_put_uint(num, port) - num);

	if (len + sl + dl + 1 + nl >= size)
		return len;
	memcpy(hca + len, sep, sl);
	memcpy(hca + len + sl, dev, dl);
	hca[len + sl + dl] = ':';
	memcpy(hca + len + sl + dl + 1, num, nl + 1);
	return len + sl + dl + 1 + nl;
}

/* Rule 3: NCCL_IB_HCA in exact form ("=" + the used ports), and the nodes of those
 * ports. Returns how many ports it holds. */
static size_t hca_and_nodes(const struct orh_config *cfg, struct orh_plan *plan, char *hca,
			    size_t size)
{
	size_t n_hca = 0, hca_len = 1;

	hca[0] = '=';
	hca[1] = '\0';
	for (size_t k = 0; k < plan->n_ports; k++) {
		struct orh_port_choice *c = &plan->ports[k];
		const struct orh_port *port = c->port;

		if (!c->used)
			continue;
		hca_len = hca_append(hca, size, hca_len, n_hca ? "," : "", c->dev->name, port->num);
		n_hca++;
		if (!c->reason[0])
			snprintf(c->reason, sizeof(c->reason), "%s",
				 port->link_layer == ORH_LL_INFINIBAND ? "InfiniBand" : "used");
		add_node(plan, &c->dev->uverbs, 0666, ORH_CHARDEV_UVERBS, c->dev);
		if (cfg->management_devices) {
			if (port->umad.present)
				add_node(plan, &port->umad, 0600, ORH_CHARDEV_UMAD, c->dev);
			if (port->issm.present)
				add_node(plan, &port->issm, 0600, ORH_CHARDEV_ISSM, c->dev);
		}
	}
	return n_hca;
}

/* Rule 5: the socket interface: the config's, else the container network's default route's,
 * else the node's. */
static void socket_ifname(const struct orh_config *cfg, const struct orh_inventory *inv,
			  const struct orh_container_facts *facts, struct orh_plan *plan)
{
	const char *ifname;
	char v[IFNAMSIZ + 2];

	if (cfg->socket_ifname)
		ifname = cfg->socket_ifname;
	else if (facts && facts->own_netns && facts->netns_later)
		return; /* the stage that reads the namespace decides it */
	else if (facts && facts->own_netns)
		ifname = facts->netns_default_if;
	else
		ifname = inv->default_route_if;
	if (!ifname || !ifname[0]) {
		orh_strv_pushf(&plan->warnings, "no default route: NCCL_SOCKET_IFNAME left unset");
		return;
	}
	snprintf(v, sizeof(v), "=%s", ifname);
	env_set(plan, "NCCL_SOCKET_IFNAME", v,
		cfg->socket_ifname ? "rule 5: config socket_ifname"
		: facts && facts->own_netns ? "rule 5: the container network's default route"
					    : "rule 5: the default route's interface");
}

/* Rule 6: the preset (the container's pick, else the config's, else the hardware's), then
 * the config's own variables. */
static void preset_and_config(const struct orh_config *cfg,
			      const struct orh_container_facts *facts, struct orh_plan *plan)
{
	if (facts && facts->has_preset)
		plan->preset = facts->preset;
	else
		plan->preset = cfg->preset;
	if (plan->preset == ORH_PRESET_AUTO)
		plan->preset = auto_preset(plan);
	apply_preset(plan, plan->preset);
	for (size_t i = 0; i < cfg->n_env; i++) {
		char src[512];

		snprintf(src, sizeof(src), "%s:%u", cfg->path ? cfg->path : "config", cfg->env[i].line);
		if (cfg->env[i].value)
			env_set(plan, cfg->env[i].name, cfg->env[i].value, src);
		else
			env_unset(plan, cfg->env[i].name);
	}
}

int orh_plan_build(const struct orh_config *cfg, const struct orh_inventory *inv,
		   const struct orh_gid_reader *gids, const struct orh_container_facts *facts,
		   struct orh_plan *plan, struct orh_err *err)
{
	static const struct orh_gid_reader in_memory = { .entry = orh_gids_in_memory };
	char hca[NCCL_MAX_HCA * (ORH_NAME_MAX + 8) + 2];
	bool gid_from_container;

	memset(plan, 0, sizeof(*plan));
	choice_init(plan, inv);
	given_devices(facts, inv, plan);
	choose_ports(cfg, inv, plan->given_any, plan);
	keep_given(plan);
	one_fabric(cfg, plan);
	choose_hca(cfg, gids ? gids : &in_memory, facts, plan);
	near_gpus(cfg, facts, inv, plan);
	gid_choose(plan, &gid_from_container);
	/* Rule 7: nothing usable, nothing given. */
	if (hca_and_nodes(cfg, plan, hca, sizeof(hca)) == 0) {
		plan->preset = ORH_PRESET_NONE;
		return 0;
	}
	if (inv->rdma_cm.present)
		add_node(plan, &inv->rdma_cm, 0666, ORH_CHARDEV_RDMA_CM, NULL);
	else
		orh_strv_pushf(&plan->warnings, "no rdma_cm device (is the rdma_ucm module loaded?): "
			       "librdmacm users will fail");
	plan->set_memlock = true;
	plan->memlock = cfg->memlock;
	/* Env order: HCA, then rule 4, the socket, the preset, the config. */
	env_set(plan, "NCCL_IB_HCA", hca, "rule 3: the usable ports, exact names");
	gid_env(cfg, plan, gid_from_container);
	socket_ifname(cfg, inv, facts, plan);
	preset_and_config(cfg, facts, plan);
	(void)err;
	return 0;
}

void orh_plan_free(struct orh_plan *plan)
{
	for (size_t i = 0; i < plan->n_env; i++) {
		free(plan->env[i].name);
		free(plan->env[i].value);
		free(plan->env[i].source);
	}
	free(plan->env);
	free(plan->nodes);
	free(plan->ports);
	orh_strv_free(&plan->warnings);
	memset(plan, 0, sizeof(*plan));
}

bool orh_plan_is_empty(const struct orh_plan *plan)
{
	return plan->n_nodes == 0 && plan->n_env == 0 && !plan->set_memlock;
}

void orh_plan_why_empty(const struct orh_plan *plan, char *out, size_t size)
{
	size_t n = 0;
	int w;

	if (plan->n_ports == 0) {
		snprintf(out, size, "no usable RDMA device on this node");
		return;
	}
	w = snprintf(out, size, "no usable RDMA port on this node (");
	n = w > 0 && (size_t)w < size ? (size_t)w : size - 1;
	for (size_t k = 0; k < plan->n_ports && n + 1 < size; k++) {
		const struct orh_port_choice *c = &plan->ports[k];

		if (k == 4) {
			w = snprintf(out + n, size - n, "; %zu more", plan->n_ports - k);
			n += w > 0 && (size_t)w < size - n ? (size_t)w : size - n - 1;
			break;
		}
		w = snprintf(out + n, size - n, "%s%s:%u: %s", k ? "; " : "", c->dev->name,
			     c->port->num, c->reason[0] ? c->reason : "left out");
		n += w > 0 && (size_t)w < size - n ? (size_t)w : size - n - 1;
	}
	snprintf(out + n, size - n, ")");
}

const struct orh_env_entry *orh_plan_env_get(const struct orh_plan *plan, const char *name)
{
	for (size_t i = 0; i < plan->n_env; i++)
		if (!strcmp(plan->env[i].name, name))
			return &plan->env[i];
	return NULL;
}

void orh_plan_env_add(struct orh_plan *plan, const struct orh_config *cfg, const char *name,
		      const char *value, const char *source)
{
	for (size_t i = 0; i < cfg->n_env; i++)
		if (!strcmp(cfg->env[i].name, name))
			return; /* the node config's [env] names it: the operator's word stands */
	env_set(plan, name, value, source);
}
