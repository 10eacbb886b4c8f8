/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PCIe topology between the node's GPUs (orh/node/gpu.h) and its NICs, and the choice of
 * the NICs nearest to a container's GPUs (src/decide/affinity.c: pure). Rule 9 of the plan
 * (orh/decide/plan.h) and detect use it.
 */
#ifndef ORH_DECIDE_AFFINITY_H
#define ORH_DECIDE_AFFINITY_H

#include <stdbool.h>
#include <stddef.h>

#include "orh/node/config.h"
#include "orh/node/drameta.h"
#include "orh/node/gpu.h"
#include "orh/node/inventory.h"

/*
 * How two PCI functions are connected, in `nvidia-smi topo -m`'s words, told from their
 * sysfs paths (orh_gpu.pci_path, orh_device.pci_path) and NUMA nodes:
 *   PIX   at most one PCIe switch between them: their deepest common ancestor is a PCI
 *         bridge (a switch's upstream port, or the root port of a multi-function card) and
 *         each sits at most one bridge (a downstream port) below it;
 *   PXB   their deepest common ancestor is a PCI bridge, further up (switches behind
 *         switches): still no host bridge in between;
 *   PHB   their deepest common ancestor is a host bridge (pciDDDD:BB, the CPU's root
 *         complex): the path goes through it;
 *   NODE  no common ancestor, both on the same NUMA node (across host bridges);
 *   SYS   different NUMA nodes (the SMP interconnect), or a side unknown.
 */
enum orh_topo {
	ORH_TOPO_PIX = 0,
	ORH_TOPO_PXB,
	ORH_TOPO_PHB,
	ORH_TOPO_NODE,
	ORH_TOPO_SYS,
};
struct orh_topo_rel {
	enum orh_topo level;
	unsigned common;          /* PCI functions (bridges) the two paths share: the larger,
				   * the deeper their common bridge and the nearer they are */
};
struct orh_topo_rel orh_topo_between(const char *path_a, int numa_a, const char *path_b,
				     int numa_b);
const char *orh_topo_name(enum orh_topo t); /* "PIX" ... "SYS" */

/*
 * Which NICs a container's GPUs want (config key nic_affinity, enum orh_nic_affinity of
 * orh/node/config.h):
 *  ORH_AFFINITY_PCIE  for each GPU the container holds, the candidates under its PCIe
 *                     switch (PIX, else PXB; among those the ones sharing its deepest
 *                     common bridge), else the candidates on its NUMA node, else every
 *                     candidate; the union over its GPUs.
 *  ORH_AFFINITY_NUMA  for each GPU, the candidates on its NUMA node, else every one.
 *  ORH_AFFINITY_NONE  every candidate.
 * A container that holds every GPU of the node, or none, gets every candidate.
 */
const char *orh_nic_affinity_name(enum orh_nic_affinity m); /* "pcie", "numa", "none" */

struct orh_nic_pick {
	bool chosen;
	enum orh_topo level;       /* to the nearest GPU the container holds (SYS if none) */
	int gpu;                   /* that GPU's position in gpus->v, -1 when none */
	char reason[224];          /* "under the same PCIe switch as GPU 2 (0000:45:00.0)";
				    * empty for a device that was not a candidate */
};
struct orh_affinity {
	struct orh_nic_pick *v;    /* one per device, parallel to the devs given */
	size_t n;
	size_t n_chosen;
	bool every;                /* every candidate chosen, without a topology reason
				    * (mode none, all GPUs or none, a GPU with nothing near) */
	char summary[256];         /* one line for env --explain */
};

/*
 * Choose, among devs[i] with candidate[i] (NULL: every device), the NICs nearest to the
 * GPUs with held[k] (k < gpus->n). Pure: reads only its arguments. The caller frees out
 * with orh_affinity_free(). Returns the number of chosen devices.
 */
size_t orh_nic_affinity(enum orh_nic_affinity mode, const struct orh_device *devs,
			size_t n_devs, const bool *candidate, const struct orh_gpus *gpus,
			const bool *held, struct orh_affinity *out);
void orh_affinity_free(struct orh_affinity *a);

/*
 * The NICs on the PCIe roots of the GPUs a container's DRA claims hold, as their KEP-5304
 * metadata says (orh/node/drameta.h), not as sysfs or a device number suggests: a GPU is a
 * metadata device whose resource.kubernetes.io/pciBusID is one of gpus (the node's), a NIC
 * devs[i] one whose pciBusID is devs[i].pci; each with the resource.kubernetes.io/pcieRoot
 * of its metadata. Chosen: the candidates (candidate[i], NULL: every device) whose
 * metadata pcieRoot is a GPU's. Where no candidate is, every candidate (out->every, with
 * why). Returns the number of GPUs found in the metadata (0: out is left empty, nothing to
 * choose by). Pure; out freed with orh_affinity_free().
 */
size_t orh_dra_affinity(const struct orh_dra_meta *meta, const struct orh_device *devs,
			size_t n_devs, const bool *candidate, const struct orh_gpus *gpus,
			struct orh_affinity *out);
/* "claim rdma (template), request nic, driver rdma.orh.test, device mlx5-1" */
void orh_dra_device_text(const struct orh_dra_device *d, char *out, size_t size);

#endif
