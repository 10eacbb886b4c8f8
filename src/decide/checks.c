/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Will it work (include/orh/decide/decide.h, struct orh_checks): the checks of a container's own
 * context, each on values read (the decision, the container's memlock as its applier finds
 * it); and the NCCL verdicts (struct orh_nccl_verdict): GPUDirect RDMA from the node's
 * facts and the image's NCCL, the settings that follow, the fail-closed pin. Pure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide/decide.h"
#include "orh/node/nccl_used.h"

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

/* ---------------------------------------------------------------- NCCL: GPUDirect */

/* The NCCL versions each rule comes from (docs/nccl-check.md: net_ib.cc, init.cc) */
static const unsigned dmabuf_from[3] = { 2, 13, 0 };  /* NET/IB's DMA-BUF */
static const unsigned dmabuf_probe_fixed[3] = { 2, 14, 0 }; /* EPROTONOSUPPORT, errno set */
static const unsigned nv_mem_nc_from[3] = { 2, 22, 0 };
static const unsigned module_from[3] = { 2, 23, 0 };  /* sys/module/nvidia_peermem */

static int vcmp(const unsigned a[3], const unsigned b[3])
{
	for (int i = 0; i < 3; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

const char *orh_gdr_by_name(enum orh_gdr_by by)
{
	return by == ORH_GDR_DMABUF ? "dmabuf" : by == ORH_GDR_PEERMEM ? "peermem" : "none";
}

/* The image's oldest NCCL copy with a version, or NULL. */
static const struct orh_image_nccl *oldest_nccl(const struct orh_image *img)
{
	const struct orh_image_nccl *o = NULL;

	for (size_t i = 0; img && img->read && i < img->n_nccl; i++)
		if (img->nccl[i].version[0] && (!o || vcmp(img->nccl[i].v, o->v) < 0))
			o = &img->nccl[i];
	return o;
}

static bool at_least(const struct orh_image_nccl *n, const unsigned v[3])
{
	return !n || vcmp(n->v, v) >= 0; /* not known: every version assumed */
}

/* Can DMA-BUF work on the node's side? If not, why into out. */
static bool dmabuf_node(const struct orh_gpudirect *gd, char *out, size_t size)
{
	unsigned major = 0, minor = 0;

	if (sscanf(gd->kernel, "%u.%u", &major, &minor) != 2 ||
	    !(major > 5 || (major == 5 && minor >= 12))) {
		snprintf(out, size, "the kernel (%s) is older than 5.12 (no DMA-BUF import for "
			 "RDMA memory)", gd->kernel[0] ? gd->kernel : "unknown");
		return false;
	}
	if (!gd->driver) {
		snprintf(out, size, "no NVIDIA driver version file (/proc/driver/nvidia/version)");
		return false;
	}
	if (!gd->driver_open) {
		snprintf(out, size, "the NVIDIA driver %s is the proprietary kernel module "
			 "(DMA-BUF export of GPU memory needs the open one)",
			 gd->driver_version[0] ? gd->driver_version : "(version unknown)");
		return false;
	}
	return true;
}

/* Does the image's NCCL find a peer-memory entry of the node? If not, why into out. */
static bool peermem_seen(const struct orh_gpudirect *gd, const struct orh_image_nccl *n,
			 char *out, size_t size)
{
	if (gd->nv_mem || (gd->nv_mem_nc && at_least(n, nv_mem_nc_from)) ||
	    (gd->peermem_module && at_least(n, module_from)))
		return true;
	if (!gd->peermem)
		snprintf(out, size, "no peer-memory module is loaded (nvidia_peermem, "
			 "nv_peer_mem)");
	else
		snprintf(out, size, "%s is there, but NCCL %s looks only for %s: update the "
			 "image's NCCL to 2.23.4 or newer",
			 gd->nv_mem_nc ? "/sys/kernel/mm/memory_peers/nv_mem_nc/version"
				       : "/sys/module/nvidia_peermem/version", n->version,
			 at_least(n, nv_mem_nc_from) ? "memory_peers/nv_mem and nv_mem_nc"
						     : "memory_peers/nv_mem");
	return false;
}

static void judge_gdr(const struct orh_gpudirect *gd, const struct orh_image_nccl *n,
		      struct orh_nccl_verdict *v)
{
	char node[256] = "", peer[320] = "";
	bool dmabuf = dmabuf_node(gd, node, sizeof(node));
	bool peermem = peermem_seen(gd, n, peer, sizeof(peer));

	if (dmabuf && !at_least(n, dmabuf_from)) {
		snprintf(node, sizeof(node), "NCCL %s predates NET/IB's DMA-BUF (2.13)",
			 n->version);
		dmabuf = false;
	}
	v->gdr_judged = true;
	if (dmabuf) {
		v->gdr = ORH_GDR_DMABUF;
		snprintf(v->gdr_why, sizeof(v->gdr_why), "by DMA-BUF: kernel %s, the NVIDIA open "
			 "kernel module %s, NCCL %s%s", gd->kernel, gd->driver_version,
			 n ? n->version : "of any version since 2.13",
			 peermem ? " (a peer-memory module is loaded too; NCCL takes DMA-BUF first)"
				 : "");
	} else if (peermem) {
		v->gdr = ORH_GDR_PEERMEM;
		snprintf(v->gdr_why, sizeof(v->gdr_why), "by the peer-memory module (%s); not "
			 "DMA-BUF: %s", gd->nv_mem ? "memory_peers/nv_mem"
			 : gd->nv_mem_nc && at_least(n, nv_mem_nc_from) ? "memory_peers/nv_mem_nc"
									 : "nvidia_peermem",
			 node);
	} else {
		v->gdr = ORH_GDR_NONE;
		snprintf(v->gdr_why, sizeof(v->gdr_why), "%s; not DMA-BUF: %s", peer, node);
	}
}

/* The capture of what NCCL used: only for a container given RDMA, never where the user or
 * the operator set any NCCL_DEBUG* (their output stays where they send it) */
static void decide_record(const struct orh_config *cfg, bool gives, struct orh_decision *d)
{
	static const char *const names[][2] = {
		{ "NCCL_DEBUG", "INFO" },
		{ "NCCL_DEBUG_SUBSYS", ORH_NCCL_RECORD_SUBSYS },
		{ "NCCL_DEBUG_FILE", ORH_NCCL_RECORD_FILE },
	};
	struct orh_nccl_verdict *v = &d->nccl;
	const char *off = NULL;

	for (size_t i = 0; i < cfg->n_env && !off; i++)
		if (orh_nccl_debug_name(cfg->env[i].name, strlen(cfg->env[i].name)))
			off = "the node config's [env] names an NCCL_DEBUG variable";
	if (!cfg->nccl_record)
		off = "nccl_record = no";
	else if (!gives)
		off = "no RDMA given";
	else if (!d->facts.from_spec)
		off = "no container spec";
	else if (d->facts.user_nccl_debug)
		off = "the container's process.env sets an NCCL_DEBUG variable";
	/* nothing to say where nothing is given or there is no container */
	if (off && gives && d->facts.from_spec)
		snprintf(v->record_why, sizeof(v->record_why), "off: %s", off);
	if (off)
		return;
	for (size_t i = 0; i < ORH_ARRAY_SIZE(names); i++)
		orh_plan_env_add(&d->plan, cfg, names[i][0], names[i][1],
				 ORH_NCCL_RECORD_SOURCE ": what NCCL used, for inspect");
	v->record = true;
	snprintf(v->record_why, sizeof(v->record_why), "on: NCCL's INFO lines of %s into %s "
		 "(a tmpfs the hook mounts in the container)", ORH_NCCL_RECORD_SUBSYS,
		 ORH_NCCL_RECORD_DIR);
}

void orh_decide_nccl(const struct orh_config *cfg, const struct orh_gpudirect *gd,
		     const struct orh_image *img, struct orh_decision *d)
{
	struct orh_nccl_verdict *v = &d->nccl;
	const struct orh_image_nccl *n = oldest_nccl(img);
	bool gives = !orh_plan_is_empty(&d->plan);
	char why[256];

	memset(v, 0, sizeof(*v));
	d->checks.gpudirect[0] = '\0';
	if (n)
		orh_strlcpy(v->nccl, n->version, sizeof(v->nccl));
	if (gd && gd->read && orh_facts_hold_gpus(&d->facts)) {
		judge_gdr(gd, n, v);
		if (v->gdr == ORH_GDR_NONE)
			snprintf(d->checks.gpudirect, sizeof(d->checks.gpudirect),
				 "GPUDirect RDMA unavailable: the container holds GPUs, and %s: "
				 "NCCL copies through host memory", v->gdr_why);
		/* NCCL 2.13 counts only EOPNOTSUPP as "no DMA-BUF" (and with an rdma-core
		 * lacking ibv_reg_dmabuf_mr reads a stale errno): where DMA-BUF cannot work it
		 * may take it for working, and its registrations fail */
		if (gives && n && vcmp(n->v, dmabuf_from) >= 0 &&
		    vcmp(n->v, dmabuf_probe_fixed) < 0 && !dmabuf_node(gd, why, sizeof(why))) {
			const struct orh_env_entry *e;

			orh_plan_env_add(&d->plan, cfg, "NCCL_DMABUF_ENABLE", "0",
					 "GPUDirect: NCCL 2.13's DMA-BUF probe, and no DMA-BUF "
					 "here");
			e = orh_plan_env_get(&d->plan, "NCCL_DMABUF_ENABLE");
			v->dmabuf_off = e && !strcmp(e->value, "0");
		}
	}
	if (cfg->nccl_fail_closed && gives) {
		const struct orh_env_entry *e;

		orh_plan_env_add(&d->plan, cfg, "NCCL_NET", "IB",
				 "nccl_fail_closed: RDMA given, no fall back to sockets");
		e = orh_plan_env_get(&d->plan, "NCCL_NET");
		v->net_pinned = e && !strcmp(e->value, "IB");
	}
	decide_record(cfg, gives, d);
}

bool orh_nccl_record_entry(const struct orh_env_entry *e)
{
	return e->source && !strncmp(e->source, ORH_NCCL_RECORD_SOURCE,
				     strlen(ORH_NCCL_RECORD_SOURCE));
}

bool orh_nccl_used_flag(const struct orh_nccl_used *u, bool rdma_given, char *out,
			size_t size)
{
	size_t socket = 0;

	for (size_t i = 0; i < u->n_comms; i++)
		socket += (u->comms[i].transports & ORH_NCCL_T_SOCKET) != 0;
	if (!rdma_given || socket == 0)
		return false;
	snprintf(out, size, "the container was given RDMA, and NCCL used NET/Socket in %zu of "
		 "%zu communicators: it fell back to TCP", socket, u->n_comms);
	return true;
}

void orh_decide_checks(const struct orh_config *cfg, struct orh_decision *d)
{
	struct orh_checks *c = &d->checks;

	memset(c, 0, sizeof(*c));
	orh_check_gid(d, c->gid, sizeof(c->gid));
	orh_check_ports_down(d, c->ports_down, sizeof(c->ports_down));
	c->memlock_refuses = cfg->on_error == ORH_ON_ERROR_FAIL && d->act == ORH_ACT_REQUESTED;
}
