/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NIC affinity: which RDMA devices are nearest to the GPUs a container holds. Pure: it
 * reads only the inventory's devices, the GPUs and what the caller says the container
 * holds, and decides from their sysfs PCI paths and NUMA nodes.
 *
 * The levels are those `nvidia-smi topo -m` prints (NVML's nvmlGpuTopologyLevel_t), told
 * from the paths the kernel gives every PCI function under sys/devices:
 *
 *   devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:02.0/0000:45:00.0
 *           host bridge root port    switch up    switch down  the function
 *
 * Every component after the host bridge (pciDDDD:BB) is a PCI function, and every one but
 * the last is a bridge. The deepest component two paths share is their common ancestor:
 *   - a PCI bridge: the path between them stays below the host bridge. PIX when each sits
 *     at most one bridge below it (the downstream ports of one switch under its upstream
 *     port, or the functions of one card under its root port): one PCIe switch. PXB when
 *     one of them is further down (switches behind switches).
 *   - a host bridge: PHB, the path crosses the CPU's root complex.
 *   - none (different host bridges): NODE when both report the same NUMA node, SYS when
 *     they do not, or when a side does not say (numa_node -1, no PCI path).
 * A path's trailing components that are not PCI functions (a soft-RoCE device under its
 * net device: .../0000:4b:00.0/net/eth1) are dropped first; a path without any is known
 * only by its NUMA node.
 *
 * The choice (nic_affinity), per GPU the container holds, among the caller's candidates:
 *   pcie: the candidates at PIX, else PXB, keeping of those the ones that share the
 *         GPU's deepest common bridge (under two-level switches, the NICs of its own leaf
 *         switch before its neighbours'); none: those on the GPU's NUMA node (PHB and
 *         NODE); none: every candidate;
 *   numa: those on the GPU's NUMA node, else every candidate;
 *   none: every candidate.
 * The container gets the union over its GPUs. Holding every GPU of the node, or none,
 * gets every candidate: no GPU is nearer than another then.
 */
#include <stdio.h>
#include <string.h>

#include "orh/decide/affinity.h"
#include "orh/node/gpu.h"

#define MAX_COMPONENTS 32

const char *orh_topo_name(enum orh_topo t)
{
	static const char *const names[] = { "PIX", "PXB", "PHB", "NODE", "SYS" };

	return (unsigned)t < ORH_ARRAY_SIZE(names) ? names[t] : "?";
}

const char *orh_nic_affinity_name(enum orh_nic_affinity m)
{
	switch (m) {
	case ORH_AFFINITY_PCIE: return "pcie";
	case ORH_AFFINITY_NUMA: return "numa";
	case ORH_AFFINITY_NONE: return "none";
	}
	return "?";
}

/* dddd:bb:dd.f with a domain of 4 to 8 hex digits (a PCI function, as the kernel names
 * it) */
static bool is_function(const char *s, size_t n)
{
	size_t d = 0;

	while (d < n && s[d] != ':')
		d++;
	if (d < 4 || d > 8 || n != d + 8)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');

		if (i == d || i == d + 3 ? s[i] != ':' : i == d + 6 ? s[i] != '.' : !hex)
			return false;
	}
	return true;
}

/* pcidddd:bb: a host bridge */
static bool is_host_bridge(const char *s, size_t n)
{
	return n > 3 && !strncmp(s, "pci", 3) && memchr(s, ':', n) != NULL;
}

struct comps {
	const char *s[MAX_COMPONENTS];
	size_t len[MAX_COMPONENTS];
	size_t n;
};

/* Split a path at '/' and drop what follows its last PCI function. */
static void split(const char *path, struct comps *c)
{
	size_t last_fn = 0;

	c->n = 0;
	for (const char *p = path; p && *p && c->n < MAX_COMPONENTS;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n) {
			c->s[c->n] = p;
			c->len[c->n] = n;
			c->n++;
			if (is_function(p, n))
				last_fn = c->n;
		}
		p = e ? e + 1 : NULL;
	}
	c->n = last_fn;
}

static bool same(const struct comps *a, const struct comps *b, size_t i)
{
	return a->len[i] == b->len[i] && !memcmp(a->s[i], b->s[i], a->len[i]);
}

static enum orh_topo by_numa(int numa_a, int numa_b)
{
	return numa_a >= 0 && numa_a == numa_b ? ORH_TOPO_NODE : ORH_TOPO_SYS;
}

static struct orh_topo_rel topo_between(const char *path_a, int numa_a, const char *path_b,
					int numa_b, char *via, size_t via_size)
{
	struct orh_topo_rel rel = { .level = by_numa(numa_a, numa_b) };
	struct comps a, b;
	size_t k = 0;

	if (via_size)
		via[0] = '\0';
	split(path_a, &a);
	split(path_b, &b);
	if (!a.n || !b.n)
		return rel;
	while (k < a.n && k < b.n && same(&a, &b, k))
		k++;
	if (k == 0)
		return rel;
	for (size_t i = 0; i < k; i++)
		rel.common += is_function(a.s[i], a.len[i]);
	if (via_size)
		snprintf(via, via_size, "%.*s", (int)a.len[k - 1], a.s[k - 1]);
	if (is_function(a.s[k - 1], a.len[k - 1])) {
		/* bridges strictly between each side and the common one */
		size_t below_a = a.n - k > 0 ? a.n - k - 1 : 0;
		size_t below_b = b.n - k > 0 ? b.n - k - 1 : 0;

		rel.level = below_a <= 1 && below_b <= 1 ? ORH_TOPO_PIX : ORH_TOPO_PXB;
	} else if (is_host_bridge(a.s[k - 1], a.len[k - 1])) {
		rel.level = ORH_TOPO_PHB;
	} else if (via_size) {
		via[0] = '\0'; /* "devices": nothing shared */
	}
	return rel;
}

struct orh_topo_rel orh_topo_between(const char *path_a, int numa_a, const char *path_b,
				     int numa_b)
{
	return topo_between(path_a, numa_a, path_b, numa_b, NULL, 0);
}

/* ---------------------------------------------------------------- the choice */

/* "GPU 2 (0000:45:00.0)" */
static void gpu_name(const struct orh_gpu *g, char *out, size_t size)
{
	snprintf(out, size, "GPU %u (%s)", g->index, g->bdf);
}

/* "2,3" of the held GPUs */
static void held_list(const struct orh_gpus *gpus, const bool *held, char *out, size_t size)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t k = 0; k < gpus->n && len + 12 < size; k++)
		if (held[k])
			len += (size_t)snprintf(out + len, size - len, "%s%u", len ? "," : "",
						gpus->v[k].index);
}

static bool is_candidate(const bool *candidate, size_t i)
{
	return !candidate || candidate[i];
}

static void choose(struct orh_affinity *out, size_t i, const char *why)
{
	struct orh_nic_pick *p = &out->v[i];

	if (p->chosen)
		return; /* the first GPU that wants it says why */
	p->chosen = true;
	out->n_chosen++;
	orh_strlcpy(p->reason, why, sizeof(p->reason));
}

/* Every candidate not chosen yet, for `why`. */
static void choose_every(struct orh_affinity *out, const bool *candidate, const char *why)
{
	out->every = true;
	for (size_t i = 0; i < out->n; i++)
		if (is_candidate(candidate, i))
			choose(out, i, why);
}

/* pcie: the candidates under g's PCIe switch, nearest first (see the top). */
static bool choose_by_switch(const struct orh_gpu *g, const char *name,
			     const struct orh_device *devs, const bool *candidate,
			     struct orh_affinity *out)
{
	struct orh_topo_rel best = { .level = ORH_TOPO_SYS };
	char via[32], why[224];
	bool found = false;

	for (size_t i = 0; i < out->n; i++) {
		struct orh_topo_rel r;

		if (!is_candidate(candidate, i))
			continue;
		r = orh_topo_between(g->pci_path, g->numa_node, devs[i].pci_path,
				     devs[i].numa_node);
		if (r.level > ORH_TOPO_PXB)
			continue;
		if (!found || r.level < best.level ||
		    (r.level == best.level && r.common > best.common))
			best = r;
		found = true;
	}
	for (size_t i = 0; found && i < out->n; i++) {
		struct orh_topo_rel r;

		if (!is_candidate(candidate, i))
			continue;
		r = topo_between(g->pci_path, g->numa_node, devs[i].pci_path, devs[i].numa_node,
				 via, sizeof(via));
		if (r.level != best.level || r.common != best.common)
			continue;
		snprintf(why, sizeof(why), "%s %s (%s, bridge %s)",
			 r.level == ORH_TOPO_PIX ? "under the same PCIe switch as"
						 : "behind the same PCIe bridges as",
			 name, orh_topo_name(r.level), via);
		choose(out, i, why);
	}
	return found;
}

/* One GPU's nearest candidates into out. */
static void choose_for_gpu(enum orh_nic_affinity mode, const struct orh_gpu *g,
			   const struct orh_device *devs, const bool *candidate,
			   struct orh_affinity *out)
{
	char name[64], why[224];
	bool found = false;

	gpu_name(g, name, sizeof(name));
	if (mode == ORH_AFFINITY_PCIE && choose_by_switch(g, name, devs, candidate, out))
		return;
	snprintf(why, sizeof(why), "on NUMA node %d with %s%s", g->numa_node, name,
		 mode == ORH_AFFINITY_PCIE ? ", which has no NIC under its PCIe switch" : "");
	for (size_t i = 0; g->numa_node >= 0 && i < out->n; i++)
		if (is_candidate(candidate, i) && devs[i].numa_node == g->numa_node) {
			choose(out, i, why);
			found = true;
		}
	if (found)
		return;
	snprintf(why, sizeof(why), "no NIC near %s (%s): every NIC", name,
		 g->numa_node < 0 ? "its NUMA node is unknown"
		 : mode == ORH_AFFINITY_PCIE ? "none under its PCIe switch or on its NUMA node"
						 : "none on its NUMA node");
	choose_every(out, candidate, why);
}

size_t orh_nic_affinity(enum orh_nic_affinity mode, const struct orh_device *devs,
			size_t n_devs, const bool *candidate, const struct orh_gpus *gpus,
			const bool *held, struct orh_affinity *out)
{
	size_t n_held = 0, n_gpus = gpus ? gpus->n : 0;
	char list[200];

	memset(out, 0, sizeof(*out));
	out->n = n_devs;
	out->v = n_devs ? orh_xcalloc(n_devs, sizeof(*out->v)) : NULL;
	for (size_t k = 0; k < n_gpus; k++)
		n_held += held && held[k];

	/* each device's nearest held GPU, for the reasons and for detect */
	for (size_t i = 0; i < n_devs; i++) {
		struct orh_nic_pick *p = &out->v[i];
		struct orh_topo_rel best = { .level = ORH_TOPO_SYS };

		p->gpu = -1;
		p->level = ORH_TOPO_SYS;
		for (size_t k = 0; k < n_gpus; k++) {
			struct orh_topo_rel r;

			if (!held || !held[k])
				continue;
			r = orh_topo_between(gpus->v[k].pci_path, gpus->v[k].numa_node,
					     devs[i].pci_path, devs[i].numa_node);
			if (p->gpu < 0 || r.level < best.level ||
			    (r.level == best.level && r.common > best.common)) {
				best = r;
				p->gpu = (int)k;
				p->level = r.level;
			}
		}
	}

	if (mode == ORH_AFFINITY_NONE) {
		choose_every(out, candidate, "nic_affinity = none: every NIC");
		snprintf(out->summary, sizeof(out->summary), "nic_affinity = none: every NIC");
		return out->n_chosen;
	}
	if (n_held == 0) {
		choose_every(out, candidate, "the container holds no GPU: every NIC");
		snprintf(out->summary, sizeof(out->summary),
			 "the container holds no GPU: every NIC");
		return out->n_chosen;
	}
	if (n_held == n_gpus) {
		choose_every(out, candidate, "the container holds every GPU: every NIC");
		snprintf(out->summary, sizeof(out->summary),
			 "the container holds every GPU of the node (%zu): every NIC", n_gpus);
		return out->n_chosen;
	}
	for (size_t k = 0; k < n_gpus; k++)
		if (held[k])
			choose_for_gpu(mode, &gpus->v[k], devs, candidate, out);

	held_list(gpus, held, list, sizeof(list));
	for (size_t i = 0; i < n_devs; i++) {
		struct orh_nic_pick *p = &out->v[i];
		char name[64];

		if (p->chosen || !is_candidate(candidate, i))
			continue;
		gpu_name(&gpus->v[p->gpu], name, sizeof(name));
		snprintf(p->reason, sizeof(p->reason),
			 "not among the NICs nearest to GPU%s %s (%s to %s at best)",
			 n_held > 1 ? "s" : "", list, orh_topo_name(p->level), name);
	}
	if (out->every)
		snprintf(out->summary, sizeof(out->summary),
			 "GPU%s %s of %zu: every NIC, one of them has none near (nic_affinity = %s)",
			 n_held > 1 ? "s" : "", list, n_gpus, orh_nic_affinity_name(mode));
	else
		snprintf(out->summary, sizeof(out->summary),
			 "GPU%s %s of %zu: the %zu NIC%s nearest to them (nic_affinity = %s)",
			 n_held > 1 ? "s" : "", list, n_gpus, out->n_chosen,
			 out->n_chosen == 1 ? "" : "s", orh_nic_affinity_name(mode));
	return out->n_chosen;
}

/* ---------------------------------------------------------------- DRA claims */

void orh_dra_device_text(const struct orh_dra_device *d, char *out, size_t size)
{
	snprintf(out, size, "claim %s%s, request %s, driver %s, device %s", d->from.claim,
		 d->from.template ? " (of a template)" : "", d->from.request, d->from.driver,
		 d->name);
}

static bool is_gpu(const struct orh_gpus *gpus, const char *bdf)
{
	for (size_t k = 0; bdf[0] && k < gpus->n; k++)
		if (!strcmp(gpus->v[k].bdf, bdf))
			return true;
	return false;
}

/* The metadata's GPU whose pcieRoot is root (the first), or NULL. */
static const struct orh_dra_device *gpu_on(const struct orh_dra_meta *meta,
					   const struct orh_gpus *gpus, const char *root)
{
	for (size_t i = 0; root[0] && i < meta->n; i++)
		if (is_gpu(gpus, meta->v[i].pci_bus_id) && !strcmp(meta->v[i].pcie_root, root))
			return &meta->v[i];
	return NULL;
}

size_t orh_dra_affinity(const struct orh_dra_meta *meta, const struct orh_device *devs,
			size_t n_devs, const bool *candidate, const struct orh_gpus *gpus,
			struct orh_affinity *out)
{
	char roots[160] = "", text[600];
	size_t n_gpus = 0, len = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; meta && gpus && i < meta->n; i++) {
		const struct orh_dra_device *g = &meta->v[i];

		if (!is_gpu(gpus, g->pci_bus_id))
			continue;
		n_gpus++;
		if (g->pcie_root[0] && gpu_on(meta, gpus, g->pcie_root) == g &&
		    len + strlen(g->pcie_root) + 3 < sizeof(roots))
			len += (size_t)snprintf(roots + len, sizeof(roots) - len, "%s%s",
						len ? ", " : "", g->pcie_root);
	}
	if (!n_gpus)
		return 0;
	out->n = n_devs;
	out->v = n_devs ? orh_xcalloc(n_devs, sizeof(*out->v)) : NULL;
	for (size_t i = 0; i < n_devs; i++) {
		const struct orh_dra_device *nic = orh_dra_meta_find(meta, devs[i].pci);
		const struct orh_dra_device *g = nic ? gpu_on(meta, gpus, nic->pcie_root) : NULL;
		struct orh_nic_pick *p = &out->v[i];

		p->gpu = -1;
		p->level = ORH_TOPO_SYS;
		if (!is_candidate(candidate, i))
			continue;
		if (!g) {
			snprintf(p->reason, sizeof(p->reason), "not on the PCIe root of a GPU of "
				 "the container's DRA claims (%s), as their metadata says%s",
				 roots[0] ? roots : "none said", nic ? "" : " (none names it)");
			continue;
		}
		orh_dra_device_text(g, text, sizeof(text));
		snprintf(p->reason, sizeof(p->reason), "on PCIe root %s with GPU %s (%.120s), "
			 "as the DRA metadata says", g->pcie_root, g->pci_bus_id, text);
		p->chosen = true;
		out->n_chosen++;
	}
	if (out->n_chosen) {
		snprintf(out->summary, sizeof(out->summary), "%zu GPU%s of DRA claims (PCIe root "
			 "%.100s): the %zu NIC%s on %s, as the claims' metadata says", n_gpus,
			 n_gpus == 1 ? "" : "s", roots[0] ? roots : "none said", out->n_chosen,
			 out->n_chosen == 1 ? "" : "s", n_gpus == 1 ? "its root" : "their roots");
		return n_gpus;
	}
	snprintf(text, sizeof(text), "no NIC on the PCIe root of the GPU%s of the container's "
		 "DRA claims (%.100s): every NIC", n_gpus == 1 ? "" : "s",
		 roots[0] ? roots : "no pcieRoot in their metadata");
	for (size_t i = 0; i < n_devs; i++)
		out->v[i].reason[0] = '\0';
	choose_every(out, candidate, text);
	orh_strlcpy(out->summary, text, sizeof(out->summary));
	return n_gpus;
}

void orh_affinity_free(struct orh_affinity *a)
{
	free(a->v);
	memset(a, 0, sizeof(*a));
}
