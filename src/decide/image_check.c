/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Can the image use what it is given (include/orh/decide/decide.h, struct orh_image_verdict): each
 * device the plan gives against the provider the image's libibverbs would load for it, the
 * image's NCCL copies against the node's minimum and against the GID selection of NCCL
 * 2.21 to 2.25; and, under image_supply, whether the node's own stack is given to it.
 * Pure: the image and the node's stack were read before (orh_image_read(),
 * orh_supply_read()).
 */
#include <stdio.h>
#include <string.h>

#include "orh/decide/decide.h"

/* NCCL 2.21.0 to 2.26.1 abort when their GID auto-selection reads EINVAL from a GID's type
 * in a container; 2.26.2 skips such entries. */
static const unsigned gid_bug_from[3] = { 2, 21, 0 }, gid_bug_fixed[3] = { 2, 26, 2 };

static int vcmp(const unsigned a[3], const unsigned b[3])
{
	for (int i = 0; i < 3; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

static bool dev_listed(const struct orh_image_verdict *v, const struct orh_device *dev)
{
	for (size_t i = 0; i < v->n_devs; i++)
		if (v->devs[i].dev == dev)
			return true;
	return false;
}

/* A path from the image, safe in a warning (orh_text_escape), into out. */
static const char *esc(const char *s, char out[ORH_IMAGE_PATH_MAX * 4])
{
	_cleanup_free_ char *t = orh_text_escape(s);

	snprintf(out, ORH_IMAGE_PATH_MAX * 4, "%s", t);
	return out;
}

/* Why the image cannot load provider p, and what to install. */
static void why_missing(const struct orh_image *img, const struct orh_image_provider *p,
			char *out, size_t size)
{
	char a[ORH_IMAGE_PATH_MAX * 4], b[ORH_IMAGE_PATH_MAX * 4];

	switch (p->state) {
	case ORH_PROVIDER_NO_VERBS:
		snprintf(out, size, "the image has no provider for %s (it has no "
			 "libibverbs.so.1 where its loader looks); install rdma-core's "
			 "libibverbs and its provider for %s in the image (Debian, Ubuntu: "
			 "libibverbs1 ibverbs-providers; RHEL: libibverbs)", p->name, p->name);
		break;
	case ORH_PROVIDER_NO_CONFIG:
		snprintf(out, size, "the image has no provider for %s (no file of "
			 "/etc/libibverbs.d names it; its libibverbs is %s); install rdma-core's "
			 "provider for %s from the same source as its libibverbs (Debian, "
			 "Ubuntu: ibverbs-providers; RHEL: libibverbs)", p->name,
			 esc(img->verbs, a), p->name);
		break;
	case ORH_PROVIDER_NO_LIBRARY:
		snprintf(out, size, "the image has no provider for %s (%s names it, %s is not "
			 "there); install rdma-core's provider for %s from the same source as "
			 "its libibverbs (Debian, Ubuntu: ibverbs-providers; RHEL: libibverbs)",
			 p->name, esc(p->config, a), esc(p->library, b), p->name);
		break;
	case ORH_PROVIDER_ABI_MISMATCH:
		snprintf(out, size, "the image's provider for %s does not fit its libibverbs "
			 "(%s is of private ABI %u, %s loads ABI %u); install the provider of the "
			 "same rdma-core as its libibverbs", p->name, esc(p->other, a),
			 p->other_abi, esc(img->verbs, b), img->abi);
		break;
	case ORH_PROVIDER_FOUND:
		out[0] = '\0';
		break;
	}
}

static const struct orh_image_provider *image_provider(const struct orh_image *img,
							const char *name)
{
	for (size_t i = 0; name && i < img->n_providers; i++)
		if (!strcmp(img->providers[i].name, name))
			return &img->providers[i];
	return NULL;
}

/* The devices the plan gives (a port of theirs used), each with the provider it needs. */
static void given_devices(const struct orh_image *img, struct orh_decision *d)
{
	struct orh_image_verdict *v = &d->image_verdict;

	for (size_t i = 0; i < d->plan.n_ports && v->n_devs < ORH_IMAGE_MAX_DEVS; i++) {
		const struct orh_device *dev = d->plan.ports[i].dev;
		struct orh_image_dev *e;

		if (!d->plan.ports[i].used || dev_listed(v, dev))
			continue;
		e = &v->devs[v->n_devs++];
		e->dev = dev;
		e->provider = orh_image_provider_of(dev);
		e->found = image_provider(img, e->provider);
		/* a device whose provider is not known here is not judged */
		if (!e->found || e->found->state == ORH_PROVIDER_FOUND)
			v->usable++;
	}
}

/* One warning per provider the image lacks, naming its devices. */
static void warn_devices(const struct orh_image *img, struct orh_image_verdict *v)
{
	for (size_t i = 0; i < img->n_providers; i++) {
		const struct orh_image_provider *p = &img->providers[i];
		char devs[512] = "", why[ORH_CHECK_MAX];
		int n = 0;

		if (p->state == ORH_PROVIDER_FOUND)
			continue;
		for (size_t k = 0; k < v->n_devs; k++)
			if (v->devs[k].found == p && n >= 0 && (size_t)n < sizeof(devs))
				n += snprintf(devs + n, sizeof(devs) - (size_t)n, "%s%s",
					      n ? ", " : "", v->devs[k].dev->name);
		if (!n)
			continue;
		why_missing(img, p, why, sizeof(why));
		orh_strv_pushf(&v->warnings, "NCCL in this container will not use %s: %s", devs,
			       why);
	}
}

static const char *nccl_where(const struct orh_image_nccl *c)
{
	return c->from == ORH_NCCL_PIP ? "pip's, " : "";
}

static void warn_nccl(const struct orh_config *cfg, const struct orh_image *img,
		      const struct orh_decision *d, struct orh_image_verdict *v)
{
	static const unsigned none[3] = { 0, 0, 0 };
	bool roce = false;

	for (size_t i = 0; i < d->plan.n_ports; i++)
		roce = roce || (d->plan.ports[i].used &&
				d->plan.ports[i].port->link_layer == ORH_LL_ETHERNET);
	for (size_t i = 0; i < img->n_nccl; i++) {
		const struct orh_image_nccl *c = &img->nccl[i];
		char path[ORH_IMAGE_PATH_MAX * 4], where[ORH_IMAGE_PATH_MAX * 4 + 64];

		if (!c->version[0])
			continue;
		snprintf(where, sizeof(where), "%s%s%s", nccl_where(c), esc(c->path, path),
			 c->pytorch ? ", the copy PyTorch loads" : "");
		if (vcmp(cfg->nccl_min, none) && vcmp(c->v, cfg->nccl_min) < 0)
			orh_strv_pushf(&v->warnings, "NCCL %s in this image (%s) is older than "
				       "the node's minimum %u.%u.%u (nccl_min): update the "
				       "image's NCCL", c->version, where, cfg->nccl_min[0],
				       cfg->nccl_min[1], cfg->nccl_min[2]);
		/* the plan sets no NCCL_IB_GID_INDEX (the given ports have no index in
		 * common): NCCL selects it, and these versions abort on a type read EINVAL */
		if (roce && d->plan.gid_index < 0 && vcmp(c->v, gid_bug_from) >= 0 &&
		    vcmp(c->v, gid_bug_fixed) < 0)
			orh_strv_pushf(&v->warnings, "NCCL %s in this image (%s) chooses the "
				       "GID index itself here (the given RoCE ports have no index "
				       "in common, so none is set), and NCCL 2.21 to 2.25 abort "
				       "when a GID's type reads EINVAL in a container: use NCCL "
				       "2.26.2 or newer, or give the container fewer devices",
				       c->version, where);
	}
}

bool orh_image_lacks(const struct orh_decision *d)
{
	const struct orh_image_verdict *v = &d->image_verdict;

	for (size_t i = 0; i < v->n_devs; i++)
		if (v->devs[i].found && v->devs[i].found->state != ORH_PROVIDER_FOUND)
			return true;
	return false;
}

static const char *glibc_text(unsigned v, char out[16])
{
	if (v % 100)
		snprintf(out, 16, "%u.%u.%u", v / 10000, v / 100 % 100, v % 100);
	else
		snprintf(out, 16, "%u.%u", v / 10000, v / 100 % 100);
	return out;
}

static void add_file(struct orh_supply *s, const struct orh_supply_file *f)
{
	if (f->host[0] && s->n_files < ORH_SUPPLY_MAX_FILES)
		s->files[s->n_files++] = f;
}

/* The node's files for the image, or why not (s->why_not). */
static void decide_supply(const struct orh_config *cfg, const struct orh_image *img,
			  const struct orh_host_stack *hs, struct orh_decision *d)
{
	const struct orh_image_verdict *v = &d->image_verdict;
	struct orh_supply *s = &d->supply;
	const struct orh_supply_file *worst = NULL;
	char a[16], b[16], esc1[ORH_IMAGE_PATH_MAX * 4], esc2[ORH_IMAGE_PATH_MAX * 4];

	if (!cfg->image_supply || !orh_image_lacks(d))
		return;
	s->wanted = true;
	if (!hs || !hs->read) {
		snprintf(s->why_not, sizeof(s->why_not), "the node's RDMA userspace was not read");
		return;
	}
	if (hs->why[0]) {
		snprintf(s->why_not, sizeof(s->why_not), "the node's RDMA userspace: %s", hs->why);
		return;
	}
	if (!hs->verbs.host[0] || !hs->host.abi) {
		snprintf(s->why_not, sizeof(s->why_not), "the node has no libibverbs.so.1 of a "
			 "known private ABI");
		return;
	}
	/* libibverbs too where the image's is missing or of another ABI than the node's
	 * providers need */
	s->verbs = !img->verbs[0] || !img->abi || img->abi != hs->host.abi;
	if (s->verbs)
		add_file(s, &hs->verbs);
	for (size_t i = 0; i < hs->host.n_providers; i++) {
		const struct orh_image_provider *hp = &hs->host.providers[i];
		bool given = false, lacking = false;

		for (size_t k = 0; k < v->n_devs; k++)
			if (v->devs[k].found && !strcmp(v->devs[k].found->name, hp->name)) {
				given = true;
				lacking = lacking || v->devs[k].found->state != ORH_PROVIDER_FOUND;
			}
		if (!given || (!s->verbs && !lacking))
			continue;
		if (hp->state != ORH_PROVIDER_FOUND) {
			snprintf(s->why_not, sizeof(s->why_not), "the node has no provider for %s "
				 "either (%s)", hp->name, orh_provider_state_name(hp->state));
			s->n_files = s->n_providers = 0;
			s->verbs = false;
			return;
		}
		add_file(s, &hs->providers[i]);
		s->providers[s->n_providers++] = hp->name;
	}
	for (size_t i = 0; i < hs->n_deps; i++)
		if (s->verbs || !hs->deps[i].of_verbs)
			add_file(s, &hs->deps[i]);
	for (size_t i = 0; i < s->n_files; i++)
		if (!worst || s->files[i]->glibc > worst->glibc)
			worst = s->files[i];
	if (!hs->image_glibc) {
		snprintf(s->why_not, sizeof(s->why_not), "the image has no glibc its loader finds "
			 "(libc.so.6 of GLIBC_ versions), which the node's libraries need");
	} else if (worst && worst->glibc > hs->image_glibc) {
		snprintf(s->why_not, sizeof(s->why_not), "the node's %s needs GLIBC_%s, and the "
			 "image's %s has GLIBC_%s at most", esc(worst->host, esc1),
			 glibc_text(worst->glibc, a), esc(hs->image_libc, esc2),
			 glibc_text(hs->image_glibc, b));
	}
	if (s->why_not[0]) {
		s->n_files = s->n_providers = 0;
		s->verbs = false;
		return;
	}
	s->supply = true;
}

void orh_decide_image(const struct orh_config *cfg, const struct orh_image *img,
		      const struct orh_host_stack *hs, struct orh_decision *d)
{
	struct orh_image_verdict *v = &d->image_verdict;
	char esc_over[ORH_IMAGE_PATH_MAX * 4];
	bool asked, closed;

	orh_strv_free(&v->warnings);
	memset(v, 0, sizeof(*v));
	memset(&d->supply, 0, sizeof(d->supply));
	if (!img || !img->read || cfg->image_check == ORH_IMAGE_CHECK_OFF)
		return;
	v->checked = true;
	given_devices(img, d);
	decide_supply(cfg, img, hs, d);
	if (d->supply.supply) {
		/* every device given has the node's provider now */
		v->usable = v->n_devs;
	} else {
		warn_devices(img, v);
		if (d->supply.wanted)
			orh_strv_pushf(&v->warnings, "the node's RDMA userspace is not given to "
				       "this container (image_supply = yes): %s",
				       d->supply.why_not);
	}
	warn_nccl(cfg, img, d, v);
	/* a file whose reading stopped at its budget was taken as unreadable: said */
	if (img->over[0])
		orh_strv_pushf(&v->warnings, "the image was read in part: %s; that file was taken "
			       "as unreadable", esc(img->over, esc_over));
	if (hs && hs->read && hs->image_over[0])
		orh_strv_pushf(&v->warnings, "the image's glibc was not read: %s",
			       esc(hs->image_over, esc_over));
	/* a container that asked and can use none of the devices it is given: refused under
	 * image_check = fail, or on_error = fail where image_check is not set; under
	 * nccl_fail_closed and on_error = fail, one that asked or holds RDMA devices (rule 8)
	 * too, whatever image_check says: its NCCL would otherwise run over sockets */
	asked = d->act == ORH_ACT_REQUESTED &&
		(cfg->image_check == ORH_IMAGE_CHECK_FAIL ||
		 (cfg->image_check == ORH_IMAGE_CHECK_DEFAULT &&
		  cfg->on_error == ORH_ON_ERROR_FAIL));
	closed = cfg->nccl_fail_closed && cfg->on_error == ORH_ON_ERROR_FAIL &&
		 (d->act == ORH_ACT_REQUESTED || d->plan.given_any);
	if (v->n_devs && !v->usable && (asked || closed)) {
		v->refuses = true;
		snprintf(v->refusal, sizeof(v->refusal), "the image can use none of the RDMA "
			 "devices given%s: %s", asked ? "" : " (nccl_fail_closed)",
			 v->warnings.n ? v->warnings.v[0] : "");
	}
}
