/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's NVIDIA GPUs (src/node/discover_gpu.c) and the GPUs a container names in
 * NVIDIA_VISIBLE_DEVICES. Discovery reads through the sysroot like orh_discover(); the
 * rest is pure. The RDMA devices nearest to them: orh/decide/affinity.h (the decision's).
 */
#ifndef ORH_NODE_GPU_H
#define ORH_NODE_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "orh/node/config.h"
#include "orh/node/inventory.h"
#include "orh/base/util.h"

#define ORH_GPU_MAX 256            /* the nvidia driver's minors stop far below this */
#define ORH_GPU_INFO_MAX_BYTES 4096 /* proc/driver/nvidia/gpus/<bdf>/information: ~400 */
#define ORH_GPU_UUID_MAX 64

struct orh_gpu {
	char bdf[16];              /* "0000:45:00.0", as sys/bus/pci/devices names it */
	char uuid[ORH_GPU_UUID_MAX]; /* "GPU-efc0520c-e2ee-e86d-8193-ef5cca3213fb"; empty when
				    * the driver's information file does not say */
	int minor;                 /* N of /dev/nvidiaN, -1 when unknown */
	unsigned index;            /* position in PCI bus order: the driver's enumeration,
				    * nvidia-smi's and NVIDIA_VISIBLE_DEVICES' index */
	int numa_node;             /* -1 when unknown */
	char pci_path[ORH_PCI_PATH_MAX]; /* "devices/pci0000:40/0000:40:01.1/.../0000:45:00.0":
				    * the device's real directory, relative to <sysroot>/sys;
				    * empty when it cannot be resolved inside it */
	unsigned device_id;        /* 0x2330 */
	unsigned pci_class;        /* 0x030200 */
	char model[64];            /* "NVIDIA H100 80GB HBM3", empty when unknown */
};

struct orh_gpus {
	struct orh_gpu *v;         /* the GPUs the nvidia driver holds, in index order */
	size_t n;
	struct orh_strv warnings;  /* one line per skipped or doubtful entry, naming the file */
	unsigned long file_reads;  /* files opened (tests, bench) */
};

/*
 * Which PCI functions are looked at:
 *  ORH_GPU_SCAN_DRIVER: the GPUs the nvidia driver lists in proc/driver/nvidia/gpus/, each
 *                       checked against its sysfs entry (vendor, class): the GPUs that
 *                       have an index, at a cost that does not grow with the node's other
 *                       PCI functions.
 *  ORH_GPU_SCAN_PCI:    every function under sys/bus/pci/devices, so that an NVIDIA GPU the
 *                       driver does not hold (vfio-pci, excluded, driver not loaded) gets a
 *                       warning saying why it has no index (detect). Same result otherwise.
 */
enum orh_gpu_scan {
	ORH_GPU_SCAN_DRIVER = 0,
	ORH_GPU_SCAN_PCI,
};

/*
 * Fill out with the node's GPUs: PCI functions with vendor 0x10de and class 0x0300xx (VGA)
 * or 0x0302xx (3D controller) that the nvidia driver holds and has not excluded, in PCI
 * bus order (domain, bus, device, function), which gives each its index. UUID, minor and
 * model come from <sysroot>/proc/driver/nvidia/gpus/<bdf>/information; numa_node and
 * pci_path from sysfs. Returns 0 even when entries were skipped (see out->warnings);
 * -errno only when the sysroot itself cannot be opened. A node without NVIDIA GPUs, or
 * without sysfs' PCI bus, is an empty list.
 */
int orh_discover_gpus(const char *sysroot, enum orh_gpu_scan scan, struct orh_gpus *out,
		      struct orh_err *err);
void orh_gpus_free(struct orh_gpus *g);

/* What GPUDirect RDMA needs of the node (the GPUDirect verdict's input, orh_decide_nccl()):
 * the peer-memory entries NCCL looks for, each apart (the versions of NCCL that look for
 * each differ: docs/nccl-check.md), the kernel's release (DMA-BUF import for RDMA memory
 * came in 5.12) and whether the NVIDIA driver is its open kernel module (DMA-BUF export
 * of GPU memory). Read through a sysroot; a file that is not there is a fact, never an
 * error. */
struct orh_gpudirect {
	bool read;                 /* the kernel's release was read */
	bool peermem;              /* any of the three below */
	bool nv_mem;               /* sys/kernel/mm/memory_peers/nv_mem/version */
	bool nv_mem_nc;            /* sys/kernel/mm/memory_peers/nv_mem_nc/version */
	bool peermem_module;       /* sys/module/nvidia_peermem/version */
	char kernel[128];          /* proc/sys/kernel/osrelease, its first line */
	bool driver;               /* proc/driver/nvidia/version was read */
	bool driver_open;          /* it says "Open Kernel Module" */
	char driver_version[32];   /* "580.159.04": the word after "Kernel Module" */
};
/* Read it through sysroot. */
void orh_gpudirect_read(const char *sysroot, struct orh_gpudirect *g);
/* The driver's version file's text (proc/driver/nvidia/version) into g's driver fields:
 * "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
 * (the open module) or "... UNIX x86_64 Kernel Module  535.104.05  Sat Aug ..." (the
 * proprietary one). Pure; for tests. */
void orh_gpudirect_parse_driver(const char *text, struct orh_gpudirect *g);

/* What one information file says. Fields it does not hold stay empty (minor -1). */
struct orh_gpu_info {
	char uuid[ORH_GPU_UUID_MAX];
	char bus[16];              /* "Bus Location", "0000:45:00.0" */
	int minor;                 /* "Device Minor" */
	char model[64];
	bool excluded;             /* "GPU Excluded: Yes" */
};
/* Parse the text of proc/driver/nvidia/gpus/<bdf>/information: "Key: \t value" lines, as
 * nv-procfs.c prints them; keys it does not know are ignored. Returns the number of bad
 * lines (0 when none), and describes the first in why ("line 3: 'Device Minor' is not a
 * number: 'x'"); every good line is still taken. Pure; for tests and fuzzers. */
int orh_parse_gpu_info(const char *text, struct orh_gpu_info *out, char *why, size_t why_size);

/* A GPU by minor number (a /dev/nvidiaN node in a spec), or NULL. */
const struct orh_gpu *orh_gpu_by_minor(const struct orh_gpus *g, unsigned minor);

/*
 * What NVIDIA_VISIBLE_DEVICES asks for, resolved against the node's GPUs the way
 * libnvidia-container does it: a comma-separated list (empty items skipped) of
 *   "all" (any case)                 every GPU; ends the list
 *   "none", "void", or an empty value  no GPU (the caller tells unset from empty)
 *   GPU-<uuid>                       that GPU (whole UUID, any case)
 *   <domain>:<bus>:<dev>.0           the GPU at that PCI address
 *   <index>                          the GPU at that position in PCI bus order
 *   MIG-GPU-<uuid>/<gi>/<ci>         a MIG device by its pre-R470 name: its parent GPU
 *   <index>:<mig index>              a MIG device by index: its parent GPU
 *   MIG-<uuid>                       a MIG device by its R470+ UUID: the node's files do
 *                                    not say which GPU holds it (only NVML does)
 * held[] (g->n entries) is set for every GPU named. A token that names no GPU of this
 * node adds a warning (the token quoted) and the result is ORH_GPUS_UNKNOWN: the caller
 * then gives every NIC; nothing fails because of it.
 */
enum orh_gpu_ask {
	ORH_GPUS_NONE = 0,   /* no GPU: none, void, empty */
	ORH_GPUS_SOME,       /* a subset of the node's GPUs: held[] */
	ORH_GPUS_ALL,        /* every GPU: "all", or each one named */
	ORH_GPUS_UNKNOWN,    /* some token names no GPU of this node (held[] has the rest) */
};
enum orh_gpu_ask orh_gpus_resolve(const struct orh_gpus *g, const char *value, bool *held,
				  struct orh_strv *warnings);

#endif
