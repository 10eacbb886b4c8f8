/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one decision (src/decide/decide.c): what a container on this node gets, for
 * every way in — the live hook and its nccl-conf and cdi-* stages, precreate, the shim,
 * cdi, env and detect. Each caller hands in what it knows; orh_decide() takes its steps:
 * activation, the container's facts (the caller's callback), once it is activated; the
 * node read (orh_node_read(), orh/node/node.h: discovery through the sysroot, or the snapshot
 * of an earlier decision for the same container, the shim's, for its nccl-conf stage);
 * then the decision from what was read (orh_decide_node()). Appliers apply the result.
 */
#ifndef ORH_DECIDE_DECIDE_H
#define ORH_DECIDE_DECIDE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/node/drameta.h"
#include "orh/node/gpu.h"
#include "orh/node/inventory.h"
#include "orh/decide/activation.h"
#include "orh/node/config.h"
#include "orh/node/image.h"
#include "orh/node/node.h"
#include "orh/decide/oci.h"
#include "orh/decide/plan.h"
#include "orh/decide/sysview_decide.h"
#include "orh/base/util.h"

struct orh_decide_in {
	const struct orh_config *cfg;
	const char *sysroot;              /* "/" or a fake tree */
	enum orh_gid_scan scan;           /* ORH_GIDS_ALL for detect, else ORH_GIDS_PLAN */
	/* the container's spec, or NULL for a container on the host network that asked for
	 * nothing (env, detect, cdi) */
	const json_t *spec;
	const json_t *state_annotations;  /* the OCI state's, used when the spec has none */
	bool requested;                   /* the way in is the request (a CDI device) */
	/* Facts that need the container itself (its network namespace): called once it is
	 * activated, before discovery; NULL when there are none. */
	int (*container_facts)(void *arg, struct orh_container_facts *facts,
			       struct orh_err *err);
	void *arg;
	/* the most memlock the applier can give (a runtime without CAP_SYS_RESOURCE in the
	 * initial user namespace: its hard limit); 0: no ceiling */
	uint64_t memlock_ceiling;
	/* the node as an earlier decision for this container read it (orh/node/snapshot.h), named
	 * `snapshot_what` in errors; NULL: read the node through the sysroot. A snapshot that
	 * cannot be restored is a warning, and the node is read. */
	const json_t *snapshot;
	const char *snapshot_what;
	/* without a snapshot: the node read for no container in particular (the NRI
	 * plugin's, orh/node/node.h), used where this decision reads the node as it was read;
	 * NULL: none */
	const struct orh_node_cache *node_cache;
};

/* The least RLIMIT_MEMLOCK a container's process needs for RDMA, unless the node config
 * sets a smaller memlock (the operator's number then): two of NCCL's 4 MiB buffers
 * (NCCL_BUFFSIZE's default), one connection's send and receive, are registered. */
#define ORH_MEMLOCK_NEED ((uint64_t)8 << 20)

/* The memlock verdict (decide_memlock(), decide.c), the one value every applier applies:
 * the live hook and the cdi-* stages raise the container's process to it (never lowering
 * a limit), the spec edit (precreate, the shim) writes it into process.rlimits. */
struct orh_memlock_verdict {
	bool set;                         /* RLIMIT_MEMLOCK is set to limit */
	uint64_t limit;                   /* ORH_MEMLOCK_UNLIMITED or bytes */
	bool user;                        /* the spec sets RLIMIT_MEMLOCK: the user's limit
					   * wins, left as given (set is false) */
	bool lowered;                     /* limit is the applier's ceiling, below the config's */
	uint64_t need;                    /* what the memlock check holds the container's
					   * soft limit to: ORH_MEMLOCK_NEED, or limit below it */
};

#define ORH_CHECK_MAX (ORH_ERR_MAX - 64)

/* The checks' verdicts (orh_decide_checks(), checks.c): will it work in the container's
 * own context. Each message is a warning for the log and the record, "" where the check
 * passes; the memlock check's value is known to its applier only (the spec's limit, or
 * what the container's process holds after the memlock step): it calls
 * orh_check_memlock() with memlock.need. */
struct orh_checks {
	char gpudirect[ORH_CHECK_MAX];  /* the container holds GPUs and GPUDirect RDMA is
					 * unavailable: the GPUDirect verdict's why
					 * (orh_decide_nccl(), struct orh_nccl_verdict) */
	char gid[ORH_CHECK_MAX];        /* no RoCE port used has a GID of the wanted kind for
					 * an address of the container's network namespace */
	char ports_down[ORH_CHECK_MAX]; /* every port of the devices the container was given
					 * is down: why an empty plan gives it nothing */
	/* a memlock below memlock.need refuses the container (on_error = fail, and it asked:
	 * act REQUESTED); else it is a warning */
	bool memlock_refuses;
};

/* How NCCL's NET/IB would reach the GPUs' memory (the GPUDirect verdict). */
enum orh_gdr_by {
	ORH_GDR_NONE = 0,          /* not at all: NCCL copies through host memory */
	ORH_GDR_PEERMEM,           /* a peer-memory module (nvidia_peermem, nv_peer_mem) */
	ORH_GDR_DMABUF,            /* DMA-BUF: preferred by NCCL where both work */
};
const char *orh_gdr_by_name(enum orh_gdr_by by); /* "none", "peermem", "dmabuf" */

/* The NCCL verdicts (orh_decide_nccl(), checks.c): GPUDirect RDMA, judged for a container
 * that holds GPUs from the node's facts (orh_gpudirect_read()) and the image's NCCL version
 * where it was read, with the settings that follow where NCCL's own default would be
 * wrong; and the fail-closed pin (nccl_fail_closed). The variables are in the plan
 * (orh_plan_env_add()); these say why. */
struct orh_nccl_verdict {
	bool gdr_judged;                  /* the container holds GPUs, the node was read */
	enum orh_gdr_by gdr;
	char gdr_why[ORH_CHECK_MAX];      /* how, or why not */
	char nccl[32];                    /* the image's NCCL judged against (its oldest
					   * copy); "" not known: every version assumed */
	bool dmabuf_off;                  /* NCCL_DMABUF_ENABLE=0 is in the plan */
	bool net_pinned;                  /* NCCL_NET=IB is in the plan (fail closed) */
	/* the record of what NCCL used (nccl_record): NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS and
	 * NCCL_DEBUG_FILE into the capture directory are in the plan (source
	 * ORH_NCCL_RECORD_SOURCE); record_why says why on or off */
	bool record;
	char record_why[192];
};

/* The source of the capture's plan entries; an applier writes them only where the capture
 * directory is a tmpfs mounted in the container (src/apply/ncclconf.c) */
#define ORH_NCCL_RECORD_SOURCE "nccl_record"
/* Is e one of the capture's plan entries? */
bool orh_nccl_record_entry(const struct orh_env_entry *e);
/* What inspect says of what NCCL used, from the record's plan: the container was given
 * RDMA (rdma_given) and a communicator used NET/Socket: a warning into out. */
struct orh_nccl_used;
bool orh_nccl_used_flag(const struct orh_nccl_used *u, bool rdma_given, char *out,
			size_t size);

#define ORH_IMAGE_MAX_DEVS 64

/* One device the plan gives, against the image's userspace. */
struct orh_image_dev {
	const struct orh_device *dev;           /* in the inventory */
	const char *provider;                   /* the provider it needs; NULL: not known */
	const struct orh_image_provider *found; /* the image's (in d->image); NULL: not judged */
};

/* The image checks' verdicts (orh_decide_image(), image_check.c), when the container's root
 * was read (checked): each device the plan gives, with what the image has for it; a
 * warning per provider it lacks (naming the devices and what to install) and per NCCL copy
 * below nccl_min or in 2.21-2.25 where the plan leaves the GID index to NCCL. A container
 * that asked and can use none of its devices is refused (refuses, with refusal) under
 * image_check = fail, or on_error = fail where image_check is not set. */
struct orh_image_verdict {
	bool checked;
	struct orh_image_dev devs[ORH_IMAGE_MAX_DEVS];
	size_t n_devs;
	size_t usable;                          /* devices not judged unusable */
	struct orh_strv warnings;
	bool refuses;
	char refusal[ORH_ERR_MAX - 64];
};

/* The supply verdict (orh_decide_image(), image_check.c): image_supply = yes, and the image
 * cannot load a provider for a device it is given. Supplied only where the node has a
 * provider for every device given and each file's glibc needs are within the image's
 * glibc; else why_not says why, and the image checks' warnings stand. Where the image's
 * libibverbs has the node's private ABI, only the providers are given (their driver files
 * name them by path); else the node's libibverbs too, found first through the loader's
 * cache, which the applier rewrites in the container (verbs). */
#define ORH_SUPPLY_MAX_FILES (1 + ORH_IMAGE_MAX_PROVIDERS + ORH_SUPPLY_MAX_DEPS)
struct orh_supply {
	bool wanted;
	bool supply;
	bool verbs;
	char why_not[ORH_CHECK_MAX];
	/* the files, in *d->host_stack: bind-mounted at ORH_SUPPLY_DIR/<name> */
	const struct orh_supply_file *files[ORH_SUPPLY_MAX_FILES];
	size_t n_files;
	/* a driver file each: /etc/libibverbs.d/oci-rdma-hook-<name>.driver */
	const char *providers[ORH_IMAGE_MAX_PROVIDERS];
	size_t n_providers;
};

struct orh_decision {
	enum orh_activation_result act;
	struct orh_activation_why activation; /* why it is activated or not: the reason */
	char why[192];                    /* its sentence (orh_activation_sentence) */
	bool asked;                       /* it asked: orh_activation_asked() */
	struct orh_container_facts facts;
	/* the node as orh_node_read() read it, the decision's input (when have_plan) */
	struct orh_node node;
	struct orh_plan plan;             /* when have_plan (points into node.inv) */
	bool have_plan;                   /* the node was read: node and plan are the decision's */
	/* the memlock every applier applies (when have_plan); plan.set_memlock and plan.memlock
	 * are rule 7's, the config's limit for a container given something */
	struct orh_memlock_verdict memlock;
	struct orh_checks checks;          /* when have_plan */
	struct orh_nccl_verdict nccl;      /* when have_plan */
	/* the image's userspace and NCCL as read from the container's root (facts.rootfd,
	 * image_check not off, a plan that gives something), and the verdicts on it */
	struct orh_image image;
	struct orh_image_verdict image_verdict;
	/* the node's own stack, read where image_supply wants it (else NULL), and the supply
	 * verdict */
	struct orh_host_stack *host_stack;
	struct orh_supply supply;
	/* the sysfs view's keep-set (decide_sysview(), when have_plan): the RDMA classes of
	 * sysfs, read only where some device of the node is not given
	 * (orh_sysview_may_subset), each entry's keep and the view's subset and id
	 * (orh_sysview_decide). sysview_read false: not read (every device given: the
	 * container sees the host's classes), or not readable: sysview_err says why (its
	 * code 0 otherwise). */
	struct orh_sysview sysview;
	bool sysview_read;
	struct orh_err sysview_err;
	/* the activation's warnings, then the node read's (a snapshot not used), then
	 * discovery's (the inventory's, then the GPUs'), then the plan's, then the decision's
	 * own */
	struct orh_strv warnings;
	/* on failure, the step: "the request" (a bad oci-rdma-hook/ annotation or
	 * OCI_RDMA_HOOK_ variable), "container" (the callback), "discovery" */
	const char *step;
	/* the GPUs the container holds, when a subset of the node's (facts.gpus_held points
	 * here; rule 9) */
	bool *gpus_held;
	/* its DRA claims' KEP-5304 device metadata (decide_dra(): read from its root where it
	 * holds NICs and its spec mounts metadata files; facts.dra points here when it names
	 * a GPU of the node): rule 9's input, and where each HCA given came from (the record) */
	struct orh_dra_meta dra;
};

/* Where the HCA of one port of the plan came from: "claim" (the container holds it, and its
 * DRA claims' metadata names it: *claim that device), "devices" (it holds it, from its
 * spec's linux.devices: a device plugin, --device, CDI without metadata), "node" (chosen
 * here from the node's). */
const char *orh_port_source(const struct orh_decision *d, const struct orh_port_choice *c,
			    const struct orh_dra_device **claim);

/*
 * The node as the decision sees it: read once (orh_node_read(), or built in memory by a
 * test), then only looked at.
 */
struct orh_node_view {
	const struct orh_inventory *inv;
	const struct orh_gid_reader *gids; /* how the planner reads GID entries; NULL: inv's
					    * own tables (orh_gids_in_memory) */
	const struct orh_gpus *gpus;       /* NULL: not read (no GPU subset is possible) */
	const char *gpus_error;            /* why they could not be read, or NULL */
	/* the GPUDirect check's input, when the container holds GPUs (orh_facts_hold_gpus);
	 * NULL: not read */
	const struct orh_gpudirect *gpudirect;
};

/* The decision for an activated container from what was read: the GPUs the container
 * holds (rule 9's input), the plan, every warning (node->inv's first), the memlock verdict
 * (d->memlock: the user's limit wins; never more than memlock_ceiling, 0: no ceiling) and
 * the checks' (d->checks). d->facts is its input, filled by the activation step; d->plan
 * points into node->inv. Reads nothing but GID entries, through node->gids. */
int orh_decide_node(const struct orh_config *cfg, const struct orh_node_view *node,
		    uint64_t memlock_ceiling, struct orh_decision *d, struct orh_err *err);

/* The checks (each a warning into out, and true, when it fails). The memlock of the
 * container's process, soft, below need. */
bool orh_check_memlock(uint64_t soft, uint64_t need, char *out, size_t size);
/* The container has its own network namespace with addresses, the plan uses RoCE ports,
 * and none of them has a GID of the wanted kind for one of its addresses. */
bool orh_check_gid(const struct orh_decision *d, char *out, size_t size);
/* The container was given devices (rule 8) and every port of those is not ACTIVE. */
bool orh_check_ports_down(const struct orh_decision *d, char *out, size_t size);
/* d->checks from the decision (its facts, plan and act), checks.gpudirect from d->nccl. */
void orh_decide_checks(const struct orh_config *cfg, struct orh_decision *d);
/* d->nccl, and the variables it writes into d->plan (a plan that gives something), from
 * the node's GPUDirect facts (gd, or NULL: not read; read only for a container that holds
 * GPUs) and the image (img NULL or not read: its NCCL version not known). Pure. The
 * rules, each from NCCL's sources (docs/nccl-check.md):
 *  - DMA-BUF: kernel 5.12 or newer, the NVIDIA open kernel module, NCCL 2.13 or newer;
 *    NCCL uses it first where it works;
 *  - peermem: a peer-memory entry the image's NCCL looks for: memory_peers/nv_mem (every
 *    version), memory_peers/nv_mem_nc (2.22 and newer), /sys/module/nvidia_peermem (2.23
 *    and newer);
 *  - NCCL_DMABUF_ENABLE=0 where the image's NCCL is 2.13 (its probe takes an unsupported
 *    kernel for a supported one) and DMA-BUF cannot work on this node;
 *  - NCCL_NET=IB under nccl_fail_closed;
 *  - the capture (nccl_record, default yes): NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,
 *    NCCL_DEBUG_FILE=/run/oci-rdma-hook-nccl/nccl.%p, for a container (a spec) the plan
 *    gives RDMA, only where neither its process.env nor the node config's [env] names an
 *    NCCL_DEBUG* variable (the image's /etc/nccl.conf is judged where it is merged:
 *    orh_ncclconf_merge() drops all three where it defines one).
 * Called by orh_decide_node() before the image is read, then again once it is. */
void orh_decide_nccl(const struct orh_config *cfg, const struct orh_gpudirect *gd,
		     const struct orh_image *img, struct orh_decision *d);

/* d->image_verdict from img (read from the container's root; NULL or not read: no
 * verdict), the plan and the config (image_check, nccl_min, on_error); d->supply from the
 * node's stack hs (NULL or not read: nothing supplied) under image_supply. */
void orh_decide_image(const struct orh_config *cfg, const struct orh_image *img,
		      const struct orh_host_stack *hs, struct orh_decision *d);
/* Does the image lack a provider for a device the plan gives (d->image_verdict)? */
bool orh_image_lacks(const struct orh_decision *d);

/* Decide. act == ORH_ACT_SKIP: leave the container as it is (have_plan false). A
 * container is left unchanged too when the plan is empty (orh_plan_is_empty). -errno
 * on failure, out->step naming the step; *out is then partly filled (act, why) and must
 * be freed. */
int orh_decide(const struct orh_decide_in *in, struct orh_decision *out, struct orh_err *err);
void orh_decision_free(struct orh_decision *d);

#endif
