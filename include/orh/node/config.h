/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-node configuration file, /etc/oci-rdma-hook/oci-rdma-hook.conf
 * (documented in man/oci-rdma-hook.conf.5). Parsed with libinih.
 */
#ifndef ORH_NODE_CONFIG_H
#define ORH_NODE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "orh/base/util.h"

#ifndef ORH_DEFAULT_CONFIG
#define ORH_DEFAULT_CONFIG "/etc/oci-rdma-hook/oci-rdma-hook.conf"
#endif

#define ORH_MEMLOCK_UNLIMITED UINT64_MAX
#define ORH_CONFIG_MAX_BYTES (256 * 1024)
/* libinih's line buffer: a line holds at most ORH_CONFIG_MAX_LINE - 3 bytes before its
 * end of line (with a libinih whose limit cannot be set at run time, that library's
 * own INI_MAX_LINE - 3); a longer line is an error naming it. */
#define ORH_CONFIG_MAX_LINE 4096

enum orh_preset {
	ORH_PRESET_AUTO = 0,  /* chosen from the hardware found */
	ORH_PRESET_NONE,      /* no tuned variables, only the discovered ones */
	ORH_PRESET_INFINIBAND,
	ORH_PRESET_ROCE,
	ORH_PRESET_ERDMA,
};

enum orh_activation {
	ORH_ACTIVATE_ALWAYS = 0,   /* every container on a node with usable RDMA */
	ORH_ACTIVATE_ANNOTATION,   /* only containers that ask: oci-rdma-hook/enable=true (or
				    * OCI_RDMA_HOOK_ENABLE=true in process.env, with request_env) */
	ORH_ACTIVATE_DEVICES,      /* only containers that hold RDMA device nodes already */
};

/* Which containers may be served at all, whatever activation and the request say. */
enum orh_request_scope {
	ORH_SCOPE_NODE = 0,        /* any: a container that asks may get the node's HCAs */
	ORH_SCOPE_ALLOCATED,       /* only one that holds a uverbs node (an allocation): it
				    * gets those devices only (rule 8) */
};

/* Which NICs a container given a subset of the node's GPUs gets (rule 9). */
enum orh_nic_affinity {
	ORH_AFFINITY_PCIE = 0,     /* under the same PCIe switch, else the same NUMA node */
	ORH_AFFINITY_NUMA,         /* on the same NUMA node */
	ORH_AFFINITY_NONE,         /* every usable NIC */
};

/* Which fabric NCCL_IB_HCA holds when the usable ports are of both kinds (rule 10). */
enum orh_fabric {
	ORH_FABRIC_AUTO = 0,       /* the larger group */
	ORH_FABRIC_INFINIBAND,
	ORH_FABRIC_ETHERNET,
};

enum orh_on_error {
	ORH_ON_ERROR_WARN = 0,     /* log and start the container: a failed step is skipped, the
				    * others still run */
	ORH_ON_ERROR_FAIL,         /* fail containers that asked for RDMA (the annotation, or
				    * OCI_RDMA_HOOK_ENABLE with request_env) */
};

/* The image checks (the image's RDMA userspace and NCCL, read from the container's root). */
enum orh_image_check {
	ORH_IMAGE_CHECK_DEFAULT = 0, /* not set: as on_error says (warn, or fail) */
	ORH_IMAGE_CHECK_WARN,      /* each device the image cannot use, an NCCL too old: a warning */
	ORH_IMAGE_CHECK_FAIL,      /* and a container that asked and can use no given device is
				    * refused */
	ORH_IMAGE_CHECK_OFF,       /* the image is not read */
};

/* Whether the NRI plugin answers with OCI hooks (the nccl-conf stage), [containers]
 * nri_hooks. */
enum orh_nri_hooks_mode {
	ORH_NRI_HOOKS_AUTO = 0,    /* with hooks, until the runtime is seen to reject them */
	ORH_NRI_HOOKS_YES,         /* with hooks */
	ORH_NRI_HOOKS_NO,          /* without: the plugin writes /etc/nccl.conf and the record */
};

/* Where the NRI plugin's containers get their nccl-conf stage, [containers] nri_stage
 * (nri_hooks = no: none, the plugin writes /etc/nccl.conf at CreateContainer). */
enum orh_nri_stage_mode {
	ORH_NRI_STAGE_START = 0,   /* run by the plugin at StartContainer: no OCI hook */
	ORH_NRI_STAGE_HOOK,        /* an OCI hook in the adjustment, run by the runtime */
};

struct orh_env_setting {
	char *name;
	char *value;   /* NULL: remove the variable from the plan */
	unsigned line; /* line of the config file that set it */
};

struct orh_config {
	char *path;                 /* the file read; NULL when built-in defaults */
	/* [node] */
	char *sysroot;              /* NULL: "/" */
	struct orh_strv include;    /* "dev" or "dev:port"; empty: all */
	struct orh_strv exclude;
	enum orh_preset preset;
	bool skip_default_route_nic;
	int gid_family;             /* AF_INET or AF_INET6 */
	int roce_version;           /* 1 or 2 */
	char *socket_ifname;        /* NULL: the default route's interface */
	uint64_t memlock;           /* bytes, or ORH_MEMLOCK_UNLIMITED */
	bool management_devices;    /* umad/issm too */
	enum orh_nic_affinity nic_affinity;
	enum orh_fabric link_layer;
	/* [containers] */
	enum orh_activation activation;
	bool request_env;           /* also read the request from process.env (OCI_RDMA_HOOK_*) */
	enum orh_request_scope request_scope; /* who may be served at all (an allocation) */
	enum orh_on_error on_error;
	char *runtime;              /* the runtime the shim execs; default "runc" (a first
				     * argument ORH_RUNTIME_ARG of the shim wins over it) */
	bool add_ipc_lock;          /* precreate/shim add CAP_IPC_LOCK */
	enum orh_image_check image_check;
	/* image_supply = yes: where the image cannot load a provider for a given device, the
	 * node's libibverbs, providers and their libraries are bind-mounted into it (read
	 * only), with a driver file and, where libibverbs itself is given, the loader's entry */
	bool image_supply;
	unsigned nccl_min[3];       /* the least NCCL version an image should have; 0.0.0: none */
	/* nccl_fail_closed = yes: NCCL does not fall back to sockets where RDMA was given:
	 * NCCL_NET=IB where the plan uses ports, and a container the image cannot use any given
	 * device of is refused under on_error = fail (orh_decide_nccl(), orh_decide_image()) */
	bool nccl_fail_closed;
	enum orh_nri_hooks_mode nri_hooks;
	enum orh_nri_stage_mode nri_stage;
	/* nccl_record = yes: NCCL's debug output captured for the record of what NCCL used
	 * (orh_decide_nccl(); default no: an NCCL_DEBUG the workload exports after it starts
	 * would go to the capture, not to its terminal) */
	bool nccl_record;
	/* [env] */
	struct orh_env_setting *env;
	size_t n_env;
};

void orh_config_defaults(struct orh_config *cfg);
/* Load path. When must_exist is false and the file does not exist, keep the defaults.
 * Errors name the file, the line and the key: "FILE:LINE: key 'x': ...". */
int orh_config_load(struct orh_config *cfg, const char *path, bool must_exist,
		    struct orh_err *err);
/* Parse a config held in memory (name is used in messages). */
int orh_config_parse_string(struct orh_config *cfg, const char *name, const char *text,
			    struct orh_err *err);
void orh_config_free(struct orh_config *cfg);

int orh_preset_from_string(const char *s, enum orh_preset *p);
const char *orh_preset_name(enum orh_preset p);
/* Is NAME one the config may set (NCCL_* or UCX_*, [A-Z0-9_]+)? */
bool orh_env_name_allowed(const char *name);
/* Does NCCL itself read NAME (NCCL_*)? The others the config may set (UCX_*) are read by
 * their own libraries from the process environment: the spec-edit paths put them into
 * PID 1's environment, and /etc/nccl.conf holds them only where the environment cannot be
 * changed (the live hook, CDI), for NCCL to export into its own process. */
bool orh_env_nccl_reads(const char *name);
/* Is VALUE acceptable in /etc/nccl.conf and in an environment (no newline, CR, NUL,
 * at most 1023 bytes)? */
bool orh_env_value_allowed(const char *value);

/* Where the shim looks for a runtime named without a path (never the caller's PATH), and
 * where configure looks for the one it will find. */
#define ORH_RUNTIME_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The shim's first argument that names its runtime for one engine's registration. */
#define ORH_RUNTIME_ARG "--orh-runtime="

#endif
