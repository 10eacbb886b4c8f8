/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oci-rdma-hook detect [--json] [--verbs]: the node's inventory as a table (the rows of
 * show_gids plus port state, link layer, rate, uverbs node and driver), marking what the
 * plan leaves out and why.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "orh/commands.h"
#include "orh/node.h"
#include "orh/verbs.h"

static const struct orh_port_choice *choice_of(const struct orh_plan *plan, const char *dev,
					       unsigned port)
{
	for (size_t i = 0; i < plan->n_ports; i++)
		if (!strcmp(plan->ports[i].dev, dev) && plan->ports[i].port == port)
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
			const struct orh_port_choice *c = choice_of(plan, dev->name, port->num);

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

static json_t *chardev_json(const struct orh_chardev *cd)
{
	if (!cd->present)
		return json_null();
	return json_pack("{s:s, s:I, s:I}", "name", cd->name, "major", (json_int_t)cd->major,
			 "minor", (json_int_t)cd->minor);
}

static json_t *inventory_json(const struct orh_inventory *inv, const struct orh_plan *plan)
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
			const struct orh_port_choice *c = choice_of(plan, dev->name, port->num);
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
			"{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:o}", "name", dev->name,
			"pci", dev->pci, "vendor", vendor, "device", device, "driver", dev->driver, "node_type", dev->node_type, "numa_node", dev->numa_node,
			"fw_ver", dev->fw_ver, "node_guid", dev->node_guid, "uverbs",
			chardev_json(&dev->uverbs), "ports", ports));
	}
	for (size_t i = 0; i < inv->warnings.n; i++)
		json_array_append_new(warn, json_string(inv->warnings.v[i]));
	for (size_t i = 0; i < plan->warnings.n; i++)
		json_array_append_new(warn, json_string(plan->warnings.v[i]));
	for (size_t i = 0; i < plan->n_env; i++)
		json_array_append_new(env, json_pack("{s:s, s:s, s:s}", "name", plan->env[i].name,
						     "value", plan->env[i].value, "source",
						     plan->env[i].source));
	json_object_set_new(root, "devices", devs);
	json_object_set_new(root, "rdma_cm", chardev_json(&inv->rdma_cm));
	json_object_set_new(root, "default_route", json_string(inv->default_route_if));
	json_object_set_new(root, "preset", json_string(orh_preset_name(plan->preset)));
	json_object_set_new(root, "env", env);
	json_object_set_new(root, "warnings", warn);
	return root;
}

int orh_cmd_detect(struct orh_ctx *ctx, int argc, char **argv)
{
	struct orh_inventory inv;
	struct orh_plan plan;
	struct orh_err err = { 0 };
	bool json = false, verbs = false;
	int rc = ORH_EXIT_OK;

	const struct orh_flag flags[] = { { "--json", &json }, { "--verbs", &verbs } };

	if (orh_parse_flags(argc, argv, flags, ORH_ARRAY_SIZE(flags)))
		return ORH_EXIT_USAGE;
	if (orh_node_plan(&ctx->cfg, ctx->sysroot, ORH_GIDS_ALL, NULL, &inv, &plan, &err) < 0) {
		orh_log(LOG_ERR, "%s", err.msg);
		return ORH_EXIT_FAIL;
	}
	if (json) {
		json_t *root = inventory_json(&inv, &plan);
		if (verbs)
			json_object_set_new(root, "verbs", orh_verbs_compare_json(&inv));
		json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(root);
	} else {
		print_table(&inv, &plan);
		if (verbs)
			orh_verbs_compare_print(&inv, stdout);
		orh_print_warnings(&inv, &plan);
	}
	orh_plan_free(&plan);
	orh_inventory_free(&inv);
	return rc;
}
