/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Will it work (include/orh/decide.h, struct orh_checks): the checks of a container's own
 * context, each on values read (the decision, the node's GPUDirect facts, the container's
 * memlock as its applier finds it). Pure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide.h"

bool orh_check_memlock(uint64_t soft, uint64_t need, char *out, size_t size)
{
	if (soft >= need)
		return false;
	snprintf(out, size,
		 "memlock of the container's process is %" PRIu64 " bytes, below the %" PRIu64
		 " that RDMA needs here (a hard limit the hook cannot raise: rootless, or "
		 "capped by the engine or the spec); registering NCCL's buffers fails",
		 soft, need);
	return true;
}

bool orh_check_gid(const struct orh_decision *d, char *out, size_t size)
{
	const struct orh_plan *p = &d->plan;
	bool roce = false;

	if (!d->facts.own_netns || d->facts.n_addrs == 0)
		return false;
	for (size_t i = 0; i < p->n_ports; i++) {
		if (!p->ports[i].used || p->ports[i].port->link_layer != ORH_LL_ETHERNET)
			continue;
		roce = true;
		if (p->ports[i].gid_from_container)
			return false;
	}
	if (!roce)
		return false;
	snprintf(out, size,
		 "no RoCE port has a GID of the wanted kind for an address of the container's "
		 "network namespace (its interface %s): RDMA traffic cannot use its address",
		 d->facts.netns_default_if[0] ? d->facts.netns_default_if : "unknown");
	return true;
}

bool orh_check_ports_down(const struct orh_decision *d, char *out, size_t size)
{
	const struct orh_plan *p = &d->plan;
	size_t given = 0;
	int n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < p->n_ports; i++) {
		const struct orh_port *port = p->ports[i].port;

		if (!p->ports[i].given) /* rule 8's, given_devices() */
			continue;
		given++;
		if (port->state == ORH_PORT_ACTIVE)
			return false;
		if (n >= 0 && (size_t)n < size)
			n += snprintf(out + n, size - n, "%s%s:%u %s", n ? "; " : "every port of the "
				      "devices the container was given is down: ",
				      p->ports[i].dev->name, port->num,
				      port->state_text[0] ? port->state_text : "unreadable");
	}
	if (!given)
		out[0] = '\0';
	return given > 0;
}

bool orh_check_gpudirect(bool holds_gpus, bool peermem, const char *kernel, char *out,
			 size_t size)
{
	unsigned major = 0, minor = 0;

	if (!holds_gpus || peermem)
		return false;
	if (kernel && sscanf(kernel, "%u.%u", &major, &minor) == 2 &&
	    (major > 5 || (major == 5 && minor >= 12)))
		return false;
	snprintf(out, size,
		 "GPUDirect RDMA unavailable: the container holds GPUs, the nvidia_peermem "
		 "module is not loaded and the kernel (%s) is older than 5.12 (no dma-buf "
		 "for RDMA): NCCL copies through host memory",
		 kernel && *kernel ? kernel : "unknown");
	return true;
}

void orh_decide_checks(const struct orh_config *cfg, const struct orh_gpudirect *gd,
		       struct orh_decision *d)
{
	struct orh_checks *c = &d->checks;

	memset(c, 0, sizeof(*c));
	if (gd && gd->read && orh_facts_hold_gpus(&d->facts))
		orh_check_gpudirect(true, gd->peermem, gd->kernel, c->gpudirect,
				    sizeof(c->gpudirect));
	orh_check_gid(d, c->gid, sizeof(c->gid));
	orh_check_ports_down(d, c->ports_down, sizeof(c->ports_down));
	c->memlock_refuses = cfg->on_error == ORH_ON_ERROR_FAIL && d->act == ORH_ACT_REQUESTED;
}
