/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's RDMA inventory, as read from sysfs and the routing table.
 * Discovery (src/node/discover.c) fills it; after that only the GID source it owns is
 * written, as the planner's reader reads entries (orh_inventory_gids).
 */
#ifndef ORH_NODE_INVENTORY_H
#define ORH_NODE_INVENTORY_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/base/util.h"

#define ORH_NAME_MAX 64
#define ORH_PCI_PATH_MAX 256

enum orh_port_state {
	ORH_PORT_NOP = 0,
	ORH_PORT_DOWN = 1,
	ORH_PORT_INIT = 2,
	ORH_PORT_ARMED = 3,
	ORH_PORT_ACTIVE = 4,
	ORH_PORT_ACTIVE_DEFER = 5,
};

enum orh_link_layer {
	ORH_LL_UNKNOWN = 0, /* "Unknown" (EFA) or unreadable */
	ORH_LL_INFINIBAND,
	ORH_LL_ETHERNET,
};

enum orh_gid_type {
	ORH_GID_TYPE_UNKNOWN = 0, /* unreadable (EINVAL on an IB GID) */
	ORH_GID_TYPE_IB_ROCE_V1,  /* "IB/RoCE v1" */
	ORH_GID_TYPE_ROCE_V2,     /* "RoCE v2" */
};

struct orh_gid {
	unsigned index;
	uint8_t raw[16];
	enum orh_gid_type type;
	char ndev[IFNAMSIZ];   /* empty when unreadable (IB GIDs) */
	bool ipv4_mapped;      /* ::ffff:a.b.c.d */
	struct in_addr ipv4;   /* valid when ipv4_mapped */
};

struct orh_chardev {
	char name[ORH_NAME_MAX]; /* "uverbs0", "umad1", "issm1", "rdma_cm" */
	unsigned major;
	unsigned minor;
	unsigned port;           /* umad/issm: the port number, else 0 */
	bool present;            /* false when the class entry is missing */
};

struct orh_port {
	unsigned num;
	int state;                   /* enum orh_port_state, -1 when unreadable */
	char state_text[32];         /* "ACTIVE" */
	int phys_state;              /* 5 = LinkUp, -1 when unreadable */
	char phys_state_text[32];    /* "LinkUp" */
	enum orh_link_layer link_layer;
	char rate[64];               /* "200 Gb/sec (4X HDR)", empty when unreadable */
	char netdev[IFNAMSIZ];       /* the port's net device (first GID's ndev, else
				      * device/net/) */
	unsigned gid_tbl_len;        /* number of entries in gids/ (0: unknown, plan mode) */
	struct orh_gid *gids;        /* entries in use, ascending index: the whole table
				      * (ORH_GIDS_ALL); none in plan mode, where entries are
				      * read on demand (orh_inventory_gids) */
	size_t n_gids;
	size_t gid_slot;             /* plan mode: the port's place in the inventory's GID
				      * source, 1-based; 0 when it has none */
	struct orh_chardev umad;
	struct orh_chardev issm;
};

struct orh_device {
	char name[ORH_NAME_MAX];     /* "mlx5_1", "rocep26s0" */
	char pci[32];                /* "0000:1a:00.0", empty when not PCI */
	char pci_path[ORH_PCI_PATH_MAX]; /* the real directory of its device link, relative to
				      * <sysroot>/sys: "devices/pci0000:1a/0000:1a:00.0"; empty
				      * when unknown (plan mode without topology) */
	unsigned vendor;             /* 0x15b3 */
	unsigned device_id;          /* 0x101d */
	char driver[32];             /* "mlx5_core", "erdma", "efa" */
	int node_type;               /* 1 = CA, 4 = RNIC, -1 when unreadable */
	int numa_node;               /* -1 when unknown */
	char fw_ver[64];
	char node_guid[32];
	struct orh_chardev uverbs;   /* present=false when the device has no uverbs node */
	struct orh_port *ports;
	size_t n_ports;
};

struct orh_netdev {
	char name[IFNAMSIZ];
	char operstate[16];          /* "up", "down", "unknown" */
};

struct orh_inventory {
	struct orh_device *devs;
	size_t n_devs;
	struct orh_chardev rdma_cm;  /* present=false when /sys/class/misc/rdma_cm is missing */
	char uverbs_abi[16];         /* class-wide abi_version, empty when missing */
	char default_route_if[IFNAMSIZ]; /* empty when there is no IPv4 default route */
	struct orh_netdev *netdevs;  /* the net devices the ports and the default route name */
	size_t n_netdevs;
	struct orh_strv warnings;    /* one line per skipped entry, naming the file */
	unsigned long file_reads;    /* how many files discovery opened (for tests/bench) */
	struct orh_gid_source *gid_source; /* plan mode: where GID entries are read from, and
					    * what has been read (owned; see orh_inventory_gids) */
};

/*
 * What the caller needs from the GID tables.
 *  ORH_GIDS_ALL  : every used entry (detect).
 *  ORH_GIDS_PLAN : only what the plan asks for. Discovery reads no GID table up front
 *                  (a RoCE port's netdev comes from entry 0's ndev); the planner reads
 *                  the entries its decision needs through the reader the caller passes
 *                  it (orh_inventory_gids), and an entry that cannot be of the wanted
 *                  kind costs no type read.
 */
enum orh_gid_scan {
	ORH_GIDS_ALL = 0,
	ORH_GIDS_PLAN,
};

/* The kind of GID entry the planner wants (rule 4: orh_plan_gid_wanted). */
struct orh_gid_want {
	int family;            /* AF_INET or AF_INET6 */
	int roce_version;      /* 1 or 2 */
};

struct orh_discover_opts {
	const char *sysroot;   /* "/" or a fake tree: <sysroot>/sys, proc/net/route, proc/devices */
	enum orh_gid_scan gid_scan;
	struct orh_gid_want want;
	/* plan mode: may an entry, its type not read yet (type_known false), be of the kind
	 * `want` describes? One that cannot costs no type read. The planner's rule 4 passes
	 * here (orh_plan_gid_wanted), so discovery holds no rule of its own. NULL: every
	 * entry's type is read. */
	bool (*gid_wanted)(const struct orh_gid *g, const struct orh_gid_want *want,
			   bool type_known);
	bool mad;              /* also read umad/issm (detect, or management_devices) */
	bool topology;         /* plan mode: also read each device's pci_path and numa_node
				* (NIC affinity to a container's GPUs); ORH_GIDS_ALL always does */
	/* plan mode: which ports need their net device and GID entries read; a port it
	 * refuses gets its state and link layer only. The planner's rule 1 passes here
	 * (orh_plan_port_usable), so discovery holds no rule of its own. NULL: every port. */
	bool (*port_wanted)(const struct orh_port *p);
};

/* Fill inv. Returns 0 even when entries were skipped (see inv->warnings); -errno only
 * when the sysroot itself cannot be opened. A missing /sys/class/infiniband is an empty
 * inventory, not an error. */
int orh_discover(const struct orh_discover_opts *opts, struct orh_inventory *inv,
		 struct orh_err *err);
void orh_inventory_free(struct orh_inventory *inv);

/*
 * How the planner reads a port's GID table: entry(arg, p, idx, g, warnings) returns 1
 * when entry idx is in use (*g filled), 0 when it is unused or unreadable (a line in
 * warnings names the file), -ENOENT past the end of the table. The planner reads nothing
 * else of the node; its caller chooses the reader.
 */
struct orh_gid_reader {
	int (*entry)(void *arg, const struct orh_port *p, unsigned idx, struct orh_gid *g,
		     struct orh_strv *warnings);
	void *arg;
};

/* The reader for an inventory discovery filled: a complete table answers from p->gids;
 * in plan mode an entry is read from the sysroot the first time it is asked for and kept
 * in the GID source the inventory owns (inv->gid_source, written as entries are read);
 * its devices, ports and tables are never written. */
struct orh_gid_reader orh_inventory_gids(const struct orh_inventory *inv);
/* The files read: by discovery, and since by the inventory's reader. */
unsigned long orh_inventory_reads(const struct orh_inventory *inv);
/* Answers from p->gids only (complete tables: ORH_GIDS_ALL, or built in memory). */
int orh_gids_in_memory(void *arg, const struct orh_port *p, unsigned idx, struct orh_gid *g,
		       struct orh_strv *warnings);

/* Is g an IPv6 link-local address (fe80::/10)? */
bool orh_gid_is_link_local(const struct orh_gid *g);

/* Value parsers (pure; exported for tests and fuzzers). All return 0 or -EINVAL. */
int orh_parse_port_state(const char *s, int *num, char *text, size_t text_size); /* "4: ACTIVE" */
int orh_parse_link_layer(const char *s, enum orh_link_layer *ll);
int orh_parse_gid(const char *s, uint8_t raw[16]);          /* 8 groups of 4 hex digits */
void orh_format_gid(const uint8_t raw[16], char out[40]);   /* same form back */
int orh_parse_gid_type(const char *s, enum orh_gid_type *t);
int orh_parse_devnum(const char *s, unsigned *major, unsigned *minor); /* "231:192" */
int orh_parse_hex_id(const char *s, unsigned *out);        /* "0x15b3" */
#define ORH_NUMA_NODES_MAX 4096
int orh_parse_numa_node(const char *s, int *out);          /* "1", "-1" (no node) */
/* One /proc/net/route data line: sets *is_default when it is an up default route. */
int orh_parse_route_line(const char *line, char ifname[IFNAMSIZ], bool *is_default,
			 unsigned *metric);

/*
 * The character-device numbers the kernel gives RDMA (drivers/infiniband/core/
 * uverbs_main.c, user_mad.c, ucma.c): uverbs 231:192..223 for the first 32 devices
 * (IB_UVERBS_NUM_FIXED_MINOR), the rest in a region of a dynamic major registered as
 * "infiniband_verbs"; umad 231:0..63 and issm 231:64..127, the rest in one region of a
 * dynamic major registered as "infiniband_mad"; rdma_cm is a misc device, 10:<dynamic>.
 * Discovery takes a number only when it is one of these and the kernel's reverse map
 * (/sys/dev/char/MAJ:MIN) leads back to the class entry that names it.
 */
enum orh_chardev_kind {
	ORH_CHARDEV_UVERBS = 0,
	ORH_CHARDEV_UMAD,
	ORH_CHARDEV_ISSM,
	ORH_CHARDEV_RDMA_CM,
};

/* The dynamic majors /proc/devices lists for RDMA's regions; 0 when not registered. */
struct orh_rdma_majors {
	unsigned verbs;        /* "infiniband_verbs", other than 231 */
	unsigned mad;          /* "infiniband_mad", other than 231 */
};

/* /proc/devices: the majors of the "Character devices:" section ("%3d %s" lines) that
 * hold RDMA's dynamic regions. -EINVAL when there is no such section, or when one name
 * has two dynamic majors (the kernel registers one region each). */
int orh_parse_proc_devices(const char *text, struct orh_rdma_majors *out);
/* RLIMIT_MEMLOCK from the text of /proc/<pid>/limits: 0 or -EINVAL. */
int orh_limits_memlock(const char *text, uint64_t *soft, uint64_t *hard);
/* Field 22 (starttime) of the text of /proc/<pid>/stat: 0 or -EINVAL. */
int orh_stat_start_time(const char *text, unsigned long long *out);
/* Is major:minor a number the kernel gives a device of this kind? dyn may be NULL
 * (dynamic majors unknown: only the fixed numbers pass). */
bool orh_devnum_is_rdma(enum orh_chardev_kind kind, unsigned major, unsigned minor,
			const struct orh_rdma_majors *dyn);
/* The numbers of a kind, for messages: "231:192-223, or the dynamic infiniband_verbs major". */
const char *orh_chardev_kind_numbers(enum orh_chardev_kind kind);

const char *orh_link_layer_name(enum orh_link_layer ll);
const char *orh_gid_type_name(enum orh_gid_type t); /* "v1", "v2", "?" */

#endif
