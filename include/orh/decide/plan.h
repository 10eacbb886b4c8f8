/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plan: what a container on this node gets (src/decide/plan.c). A function of the
 * node config, the inventory (and the GID entries its reader gives) and the container's
 * facts. Appliers apply it and nothing else.
 */
#ifndef ORH_DECIDE_PLAN_H
#define ORH_DECIDE_PLAN_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/node/config.h"
#include "orh/decide/affinity.h"
#include "orh/node/gpu.h"
#include "orh/node/inventory.h"
#include "orh/base/util.h"

/* A character device's numbers. */
struct orh_devnum {
	unsigned major;
	unsigned minor;
};

/* How many linux.devices entries the facts keep (the rest are counted, not kept). */
#define ORH_FACTS_MAX_DEVS 128
/* The character major of /dev/nvidiaN (N = the GPU's minor; 255 is nvidiactl). */
#define ORH_NVIDIA_MAJOR 195

/* Facts about one container that change the plan, read from its spec
 * (orh_container_facts_read) and its network namespace. Zeroed = host network, no
 * override, nothing given. */
struct orh_container_facts {
	bool own_netns;                     /* the container has its own network namespace */
	char netns_default_if[IFNAMSIZ];    /* that namespace's default route interface */
	bool netns_later;                   /* that namespace is read later, where the
					     * container runs (the nccl-conf stage): rule 5
					     * leaves NCCL_SOCKET_IFNAME to it, unsaid */
	const struct in_addr *addrs;        /* IPv4 addresses held in that namespace */
	size_t n_addrs;
	bool has_preset;                    /* the container picked a preset (its request) */
	enum orh_preset preset;
	/* the character devices the spec gives it already (linux.devices: a device plugin,
	 * docker --device, CDI), by number: rule 8 */
	struct orh_devnum devs[ORH_FACTS_MAX_DEVS];
	size_t n_devs;
	size_t n_devs_dropped;              /* entries past ORH_FACTS_MAX_DEVS */
	/* NVIDIA_VISIBLE_DEVICES of process.env (NULL: unset; points into the spec): rule 9 */
	const char *nvidia_visible;
	/* the facts were read from a spec (a container), and its process.env names an
	 * NCCL_DEBUG* variable: the capture of what NCCL used is left out */
	bool from_spec;
	bool user_nccl_debug;
	/* a Kubernetes pod sandbox (the pause container): never served */
	bool sandbox;
	/* the spec sets RLIMIT_MEMLOCK (process.rlimits): the user's limit wins */
	bool user_memlock;
	/* rule 9's input, set by the decision before the plan from the spec and the node's
	 * GPUs: the container holds a subset of gpus, those with gpus_held[k] (NULL: no
	 * subset, every NIC) */
	const struct orh_gpus *gpus;
	const bool *gpus_held;
	/* rule 9 from DRA claims: the KEP-5304 metadata read from the container's root (it
	 * holds NICs), set by the decision with gpus the node's, unless nic_affinity = none;
	 * orh_dra_affinity() chooses by it where it names a GPU of gpus. NULL: none */
	const struct orh_dra_meta *dra;
	/* the container's root filesystem, a directory fd the caller holds (has_root), set by
	 * the container callback where the way in has it: the image checks read it */
	bool has_root;
	int rootfd;
};

#define ORH_DEV_DIR "/dev/infiniband/"

/* A device node the container gets. */
struct orh_devnode {
	char path[64];      /* ORH_DEV_DIR + name: "/dev/infiniband/uverbs0" */
	unsigned major;
	unsigned minor;
	unsigned mode;      /* 0666; umad and issm 0600 */
	enum orh_chardev_kind kind;
	const struct orh_device *owner; /* the device it belongs to (in the inventory);
					 * NULL for rdma_cm, which every device shares */
};

struct orh_env_entry {
	char *name;
	char *value;
	char *source;       /* "rule 3: chosen ports", "preset roce", "FILE:LINE" */
};

/* What the plan does with one port of the inventory. */
struct orh_port_choice {
	const struct orh_device *dev;   /* in the inventory */
	const struct orh_port *port;    /* dev's port */
	bool used;
	int gid_index;      /* -1: none (InfiniBand, or not chosen) */
	bool gid_from_container; /* the index is that of the container's own address */
	bool given;         /* rule 8: the container holds this port's device (its uverbs
			     * node, by number): given_devices() */
	char reason[192];   /* why it is left out, or how it was chosen */
};

struct orh_plan {
	struct orh_devnode *nodes;
	size_t n_nodes;
	bool set_memlock;
	uint64_t memlock;   /* ORH_MEMLOCK_UNLIMITED or bytes */
	struct orh_env_entry *env;   /* ordered */
	size_t n_env;
	struct orh_port_choice *ports; /* one per port of the inventory, in its order */
	size_t n_ports;
	/* rule 8: the container holds uverbs nodes (of this node's devices, or of a number the
	 * kernel gives uverbs): something chose its HCAs (given_devices()) */
	bool given_any;
	/* rule 4: the one GID index of every RoCE port in NCCL_IB_HCA (NCCL_IB_GID_INDEX);
	 * -1 when there is none, or when the ports need different ones (gid_per_device) */
	int gid_index;
	bool gid_per_device;         /* no single index fits: NCCL picks per device */
	enum orh_preset preset;      /* the preset applied (never AUTO) */
	struct orh_strv warnings;
};

/* Plan. The planner reads nothing of the node but GID entries, through gids (NULL: the
 * inventory's own tables, orh_gids_in_memory); every warning it gives, those of the GID
 * reads included, is in plan->warnings. The plan points into inv: keep inv while it is
 * used. */
int orh_plan_build(const struct orh_config *cfg, const struct orh_inventory *inv,
		   const struct orh_gid_reader *gids, const struct orh_container_facts *facts,
		   struct orh_plan *plan, struct orh_err *err);
/* Rule 1's test of the port itself: ACTIVE, with a link layer NCCL drives. Discovery is
 * handed it (orh_discover_opts.port_wanted), so it reads nothing more of other ports. */
bool orh_plan_port_usable(const struct orh_port *p);
/* Rule 4: is g a GID of the wanted kind: not link-local, of want's family and RoCE version?
 * type_known false: judged without its type (may it be one?), as discovery asks before
 * reading the type (orh_discover_opts.gid_wanted). */
bool orh_plan_gid_wanted(const struct orh_gid *g, const struct orh_gid_want *want,
			 bool type_known);
/* Rule 9's choice: among the devices with a port the plan uses, the NICs nearest to the
 * GPUs with held[k], as nic_affinity says (orh_nic_affinity); with dra (a container's DRA
 * metadata), those on the PCIe roots of the GPUs it names (orh_dra_affinity). The planner
 * leaves the others out; detect shows it for each GPU alone. Free aff with
 * orh_affinity_free(). */
void orh_plan_near_gpus(enum orh_nic_affinity mode, const struct orh_plan *plan,
			const struct orh_inventory *inv, const struct orh_gpus *gpus,
			const bool *held, const struct orh_dra_meta *dra, struct orh_affinity *aff);
void orh_plan_free(struct orh_plan *plan);
/* True when the plan gives nothing (no usable device). */
bool orh_plan_is_empty(const struct orh_plan *plan);
/* Why an empty plan gives nothing: "no usable RDMA device on this node" (none at all), or
 * "no usable RDMA port on this node (mlx5_0:1: <why it was left out>; ...)", the first
 * four ports named. */
void orh_plan_why_empty(const struct orh_plan *plan, char *out, size_t size);
const struct orh_env_entry *orh_plan_env_get(const struct orh_plan *plan, const char *name);
/* A variable the decision adds after the plan (orh_decide_nccl(): the GPUDirect and
 * fail-closed settings), unless the node config's [env] sets or removes that name. Like
 * every plan variable it reaches NCCL through /etc/nccl.conf, where the container's own
 * environment and the image's lines win. */
void orh_plan_env_add(struct orh_plan *plan, const struct orh_config *cfg, const char *name,
		      const char *value, const char *source);

#endif
