/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook detect [--json] [--verbs]: the node's inventory as a table (the rows of
 * show_gids plus port state, link layer, rate, uverbs node and driver), marking what the
 * plan leaves out and why; then the node's GPUs, the NICs nearest to each, and the PCI
 * topology between them as `nvidia-smi topo -m` shows it. --verbs runs in
 * oci-rdma-hook-verbs, the build with libibverbs (orh/node/verbs.h says why the hook has none).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "orh-config.h"

#include "orh/base/args.h"
#include "orh/cmd/commands.h"
#include "orh/decide/decide.h"
#include "orh/decide/affinity.h"
#include "orh/node/gpu.h"
#include "orh/node/verbs.h"

/* The plan's choice for a port of the inventory it was made from. */
static const struct orh_port_choice *choice_of(const struct orh_plan *plan,
					       const struct orh_port *port)
{
	for (size_t i = 0; i < plan->n_ports; i++)
		if (plan->ports[i].port == port)
			return &plan->ports[i];
	return NULL;
}

static void print_row(const struct orh_device *d, const struct orh_port *p,
		      const struct orh_gid *g, const struct orh_port_choice *c)
{
	char gid[40] = "-", ip[INET_ADDRSTRLEN] = "", idx[12] = "-", uv[32] = "-";
	const char *ver = "-", *ndev = p->netdev[0] ? p->netdev : "-";
	char planc[256];

	if (g) {
		orh_format_gid(g->raw, gid);
		snprintf(idx, sizeof(idx), "%u", g->index);
		if (g->ipv4_mapped)
			inet_ntop(AF_INET, &g->ipv4, ip, sizeof(ip));
		ver = orh_gid_type_name(g->type);
		ndev = g->ndev[0] ? g->ndev : "-";
	}
	if (d->uverbs.present)
		snprintf(uv, sizeof(uv), "%s(%u:%u)", d->uverbs.name, d->uverbs.major, d->uverbs.minor);
	if (!c)
		snprintf(planc, sizeof(planc), "-");
	else if (!c->used)
		snprintf(planc, sizeof(planc), "left out: %s", c->reason);
	else if (g && c->gid_index >= 0 && (unsigned)c->gid_index == g->index)
		snprintf(planc, sizeof(planc), "used, GID index %d", c->gid_index);
	else
		snprintf(planc, sizeof(planc), "used");
	printf("%-10s %-4u %-5s %-39s %-15s %-3s %-8s %-7s %-10s %-22s %-16s %-10s %s\n", d->name,
	       p->num, idx, gid, ip, ver, ndev, p->state_text[0] ? p->state_text : "?",
	       orh_link_layer_name(p->link_layer), p->rate[0] ? p->rate : "-", uv,
	       d->driver[0] ? d->driver : "-", planc);
}

static void print_table(const struct orh_inventory *inv, const struct orh_plan *plan)
{
	printf("%-10s %-4s %-5s %-39s %-15s %-3s %-8s %-7s %-10s %-22s %-16s %-10s %s\n", "DEV",
	       "PORT", "INDEX", "GID", "IPv4", "VER", "DEV", "STATE", "LINK", "RATE", "UVERBS",
	       "DRIVER", "PLAN");
	for (size_t d = 0; d < inv->n_devs; d++) {
		const struct orh_device *dev = &inv->devs[d];
		for (size_t p = 0; p < dev->n_ports; p++) {
			const struct orh_port *port = &dev->ports[p];
			const struct orh_port_choice *c = choice_of(plan, port);

			if (port->n_gids == 0)
				print_row(dev, port, NULL, c);
			for (size_t g = 0; g < port->n_gids; g++)
				print_row(dev, port, &port->gids[g], c);
		}
	}
	printf("\n");
	printf("default route: %s\n", inv->default_route_if[0] ? inv->default_route_if : "none");
	if (inv->rdma_cm.present)
		printf("rdma_cm: /dev/infiniband/rdma_cm (%u:%u)\n", inv->rdma_cm.major, inv->rdma_cm.minor);
	else
		printf("rdma_cm: missing\n");
	for (size_t i = 0; i < inv->n_netdevs; i++)
		printf("netdev %s: %s\n", inv->netdevs[i].name, inv->netdevs[i].operstate);
	for (size_t d = 0; d < inv->n_devs; d++) {
		const struct orh_device *dev = &inv->devs[d];
		printf("device %s: pci %s vendor 0x%04x device 0x%04x driver %s node_type %d numa %d fw %s\n",
		       dev->name, dev->pci[0] ? dev->pci : "-", dev->vendor, dev->device_id,
		       dev->driver[0] ? dev->driver : "-", dev->node_type, dev->numa_node,
		       dev->fw_ver[0] ? dev->fw_ver : "-");
		for (size_t p = 0; p < dev->n_ports; p++) {
			const struct orh_port *port = &dev->ports[p];
			if (port->umad.present)
				printf("  port %u: %s (%u:%u)%s%s\n", port->num, port->umad.name,
				       port->umad.major, port->umad.minor, port->issm.present ? ", " : "",
				       port->issm.present ? port->issm.name : "");
		}
	}
}

/* The NICs rule 9 gives a container holding GPU k alone (orh_plan_near_gpus). */
static void nearest_to(enum orh_nic_affinity mode, const struct orh_inventory *inv,
		       const struct orh_plan *plan, const struct orh_gpus *gpus, size_t k,
		       struct orh_affinity *aff)
{
	_cleanup_free_ bool *held = orh_xcalloc(gpus->n + 1, sizeof(bool));

	held[k] = true;
	orh_plan_near_gpus(mode, plan, inv, gpus, held, NULL, aff);
}

static void print_gpus(enum orh_nic_affinity mode, const struct orh_inventory *inv,
		       const struct orh_plan *plan, const struct orh_gpus *gpus)
{
	if (!gpus->n)
		return;
	printf("\n%-4s %-13s %-41s %-5s %-4s NEAREST NICs (nic_affinity = %s)\n", "GPU", "PCI",
	       "UUID", "MINOR", "NUMA", orh_nic_affinity_name(mode));
	for (size_t k = 0; k < gpus->n; k++) {
		const struct orh_gpu *g = &gpus->v[k];
		struct orh_affinity aff;
		char minor[12] = "-", numa[12] = "-";
		size_t shown = 0;

		if (g->minor >= 0)
			snprintf(minor, sizeof(minor), "%d", g->minor);
		if (g->numa_node >= 0)
			snprintf(numa, sizeof(numa), "%d", g->numa_node);
		printf("%-4u %-13s %-41s %-5s %-4s", g->index, g->bdf, g->uuid[0] ? g->uuid : "-",
		       minor, numa);
		nearest_to(mode, inv, plan, gpus, k, &aff);
		for (size_t i = 0; i < aff.n; i++)
			if (aff.v[i].chosen)
				printf("%s%s", shown++ ? "," : " ", inv->devs[i].name);
		printf("%s\n", shown ? (aff.every ? " (every NIC)" : "") : " -");
		orh_affinity_free(&aff);
	}
	/* the matrix nvidia-smi topo -m prints, GPUs by NICs */
	printf("\n%-6s", "");
	for (size_t i = 0; i < inv->n_devs; i++)
		printf(i + 1 < inv->n_devs ? " %-7s" : " %s", inv->devs[i].name);
	printf("\n");
	for (size_t k = 0; k < gpus->n; k++) {
		printf("GPU%-3u", gpus->v[k].index);
		for (size_t i = 0; i < inv->n_devs; i++)
			printf(i + 1 < inv->n_devs ? " %-7s" : " %s", orh_topo_name(orh_topo_between(
				gpus->v[k].pci_path, gpus->v[k].numa_node, inv->devs[i].pci_path,
				inv->devs[i].numa_node).level));
		printf("\n");
	}
	printf("\nPIX: one PCIe switch between them, PXB: several PCIe bridges, PHB: a PCIe host "
	       "bridge,\nNODE: host bridges of one NUMA node, SYS: across NUMA nodes or unknown\n");
}

static json_t *gpus_json(enum orh_nic_affinity mode, const struct orh_inventory *inv,
			 const struct orh_plan *plan, const struct orh_gpus *gpus)
{
	json_t *arr = json_array();

	for (size_t k = 0; k < gpus->n; k++) {
		const struct orh_gpu *g = &gpus->v[k];
		json_t *topo = json_object(), *near = json_array();
		struct orh_affinity aff;

		nearest_to(mode, inv, plan, gpus, k, &aff);
		for (size_t i = 0; i < inv->n_devs; i++) {
			json_object_set_new(topo, inv->devs[i].name, json_string(orh_topo_name(
				orh_topo_between(g->pci_path, g->numa_node, inv->devs[i].pci_path,
						 inv->devs[i].numa_node).level)));
			if (aff.v[i].chosen)
				json_array_append_new(near, json_string(inv->devs[i].name));
		}
		json_array_append_new(arr, json_pack(
			"{s:I, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:o, s:b}", "index",
			(json_int_t)g->index, "pci", g->bdf, "uuid", g->uuid, "minor", g->minor,
			"numa_node", g->numa_node, "pci_path", g->pci_path, "model", g->model,
			"topology", topo, "nearest", near, "nearest_is_every_nic", aff.every));
		orh_affinity_free(&aff);
	}
	return arr;
}

static json_t *chardev_json(const struct orh_chardev *cd)
{
	if (!cd->present)
		return json_null();
	return json_pack("{s:s, s:I, s:I}", "name", cd->name, "major", (json_int_t)cd->major,
			 "minor", (json_int_t)cd->minor);
}

static json_t *inventory_json(const struct orh_config *cfg, const struct orh_inventory *inv,
			      const struct orh_plan *plan, const struct orh_gpus *gpus)
{
	json_t *root = json_object(), *devs = json_array(), *warn = json_array(), *env = json_array();

	for (size_t d = 0; d < inv->n_devs; d++) {
		const struct orh_device *dev = &inv->devs[d];
		json_t *ports = json_array();
		char vendor[16], device[16];

		snprintf(vendor, sizeof(vendor), "0x%04x", dev->vendor);
		snprintf(device, sizeof(device), "0x%04x", dev->device_id);
		for (size_t p = 0; p < dev->n_ports; p++) {
			const struct orh_port *port = &dev->ports[p];
			const struct orh_port_choice *c = choice_of(plan, port);
			json_t *gids = json_array();
			for (size_t g = 0; g < port->n_gids; g++) {
				const struct orh_gid *gid = &port->gids[g];
				char text[40], ip[INET_ADDRSTRLEN] = "";
				orh_format_gid(gid->raw, text);
				if (gid->ipv4_mapped)
					inet_ntop(AF_INET, &gid->ipv4, ip, sizeof(ip));
				json_array_append_new(gids, json_pack("{s:I, s:s, s:s, s:s, s:s?}",
					"index", (json_int_t)gid->index, "gid", text,
					"type", orh_gid_type_name(gid->type), "ndev", gid->ndev,
					"ipv4", gid->ipv4_mapped ? ip : NULL));
			}
			json_array_append_new(ports, json_pack(
				"{s:I, s:i, s:s, s:i, s:s, s:s, s:s, s:s, s:I, s:o, s:b, s:s, s:i, s:o, s:o}",
				"port", (json_int_t)port->num, "state", port->state, "state_text",
				port->state_text, "phys_state", port->phys_state, "phys_state_text",
				port->phys_state_text, "link_layer", orh_link_layer_name(port->link_layer),
				"rate", port->rate, "netdev", port->netdev, "gid_tbl_len",
				(json_int_t)port->gid_tbl_len, "gids", gids, "used", c && c->used,
				"reason", c ? c->reason : "", "gid_index", c ? c->gid_index : -1,
				"umad", chardev_json(&port->umad), "issm", chardev_json(&port->issm)));
		}
		json_array_append_new(devs, json_pack(
			"{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:o, s:s}", "name", dev->name,
			"pci", dev->pci, "vendor", vendor, "device", device, "driver", dev->driver, "node_type", dev->node_type, "numa_node", dev->numa_node,
			"fw_ver", dev->fw_ver, "node_guid", dev->node_guid, "uverbs",
			chardev_json(&dev->uverbs), "ports", ports, "pci_path", dev->pci_path));
	}
	for (size_t i = 0; i < inv->warnings.n; i++)
		json_array_append_new(warn, json_string(inv->warnings.v[i]));
	for (size_t i = 0; i < plan->warnings.n; i++)
		json_array_append_new(warn, json_string(plan->warnings.v[i]));
	for (size_t i = 0; i < gpus->warnings.n; i++)
		json_array_append_new(warn, json_string(gpus->warnings.v[i]));
	for (size_t i = 0; i < plan->n_env; i++)
		json_array_append_new(env, json_pack("{s:s, s:s, s:s}", "name", plan->env[i].name,
						     "value", plan->env[i].value, "source",
						     plan->env[i].source));
	json_object_set_new(root, "devices", devs);
	json_object_set_new(root, "rdma_cm", chardev_json(&inv->rdma_cm));
	json_object_set_new(root, "default_route", json_string(inv->default_route_if));
	json_object_set_new(root, "preset", json_string(orh_preset_name(plan->preset)));
	/* rule 4: the one GID index of the ports in NCCL_IB_HCA (-1: none, or per device) */
	json_object_set_new(root, "gid_index", json_integer(plan->gid_index));
	json_object_set_new(root, "gid_per_device", json_boolean(plan->gid_per_device));
	json_object_set_new(root, "env", env);
	json_object_set_new(root, "gpus", gpus_json(cfg->nic_affinity, inv, plan, gpus));
	json_object_set_new(root, "warnings", warn);
	return root;
}

/* detect --verbs in a binary without libibverbs: the same command, run by the build that
 * has it: next to this binary (a build tree), else where it is installed. Returns only
 * when there is none, or it cannot be executed (detect then says so and goes on). */
static void exec_verbs_build(const struct orh_ctx *ctx, int argc, char **argv)
{
	char self[PATH_MAX], sibling[PATH_MAX + 32] = "";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const char *paths[] = { sibling, ORH_VERBS_HELPER };
	char **args = orh_xcalloc((size_t)argc + 6, sizeof(*args));
	int k = 0;

	if (n > 0) {
		self[n] = '\0';
		snprintf(sibling, sizeof(sibling), "%s/oci-rdma-hook-verbs", dirname(self));
	}
	args[k++] = "oci-rdma-hook-verbs";
	if (ctx->config_explicit) {
		args[k++] = "--config";
		args[k++] = (char *)ctx->config_path;
	}
	if (ctx->sysroot_opt) {
		args[k++] = "--sysroot";
		args[k++] = (char *)ctx->sysroot_opt;
	}
	for (int i = 0; i < argc; i++)
		args[k++] = argv[i];
	fflush(stdout);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(paths); i++) {
		if (!paths[i][0] || access(paths[i], X_OK) < 0)
			continue;
		execv(paths[i], args);
		orh_log(LOG_WARNING, "detect --verbs: cannot execute '%s': %s", paths[i],
			strerror(errno));
	}
	free(args);
}

int orh_cmd_detect(struct orh_ctx *ctx, int argc, char **argv)
{
	/* exactly the decision a container on the host network gets, with every GID entry
	 * read for the table (the plan is the same either way: test_discover's comparison) */
	struct orh_decide_in in = {
		.cfg = &ctx->cfg, .sysroot = ctx->sysroot, .scan = ORH_GIDS_ALL,
	};
	struct orh_decision d;
	struct orh_gpus gpus;
	struct orh_err err = { 0 };
	bool json = false, verbs = false;
	int rc = ORH_EXIT_OK;

	const struct orh_opt opts[] = { { "--json", NULL, &json }, { "--verbs", NULL, &verbs } };
	const struct orh_args a = { .cmd = "detect" };

	if (orh_args_parse(&a, argc, argv, 1, opts, ORH_ARRAY_SIZE(opts), NULL))
		return ORH_EXIT_USAGE;
	if (verbs && !orh_verbs_linked())
		exec_verbs_build(ctx, argc, argv);
	if (orh_decide(&in, &d, &err) < 0) {
		orh_log(LOG_ERR, "%s", err.msg);
		orh_decision_free(&d);
		return ORH_EXIT_FAIL;
	}
	if (orh_discover_gpus(ctx->sysroot, ORH_GPU_SCAN_PCI, &gpus, &err) < 0) {
		orh_log(LOG_ERR, "%s", err.msg);
		orh_decision_free(&d);
		return ORH_EXIT_FAIL;
	}
	if (json) {
		json_t *root = inventory_json(&ctx->cfg, &d.node.inv, &d.plan, &gpus);
		if (verbs)
			json_object_set_new(root, "verbs", orh_verbs_compare_json(&d.node.inv));
		json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(root);
	} else {
		print_table(&d.node.inv, &d.plan);
		print_gpus(ctx->cfg.nic_affinity, &d.node.inv, &d.plan, &gpus);
		if (verbs)
			orh_verbs_compare_print(&d.node.inv, stdout);
		for (size_t i = 0; i < d.warnings.n; i++)
			fprintf(stderr, "warning: %s\n", d.warnings.v[i]);
		for (size_t i = 0; i < gpus.warnings.n; i++)
			fprintf(stderr, "warning: %s\n", gpus.warnings.v[i]);
	}
	orh_gpus_free(&gpus);
	orh_decision_free(&d);
	return rc;
}
