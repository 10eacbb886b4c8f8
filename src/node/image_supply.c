/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's own RDMA userspace for image_supply (orh_supply_read(), include/orh/node/image.h):
 * its libibverbs and the providers of the devices, each library's needs found as the
 * node's loader finds them, with the glibc version each needs; and the image's glibc, read
 * from its libc.so.6.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "image_elf.h"
#include "image_read.h"


/* glibc's own libraries: the image has them where it has glibc, never supplied */
static bool of_glibc(const char *name)
{
	static const char *const glibc[] = {
		"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
		"libresolv.so.2", "libutil.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
		"ld64.so.2", "ld-linux.so.2",
	};

	for (size_t i = 0; i < ORH_ARRAY_SIZE(glibc); i++)
		if (!strcmp(name, glibc[i]))
			return true;
	return false;
}

/* f->host's needs: its glibc version into f, its other libraries into hs->deps (each
 * once, found as the node's loader finds them), which are read in turn by the caller. */
static bool file_needs(struct image_reader *rd, struct orh_host_stack *hs, struct orh_supply_file *f,
		       bool of_verbs)
{
	_cleanup_close_ int fd = -1;
	struct orh_elf_deps deps;
	int r;

	if (orh_image_open_file(rd, f->host, &fd) < 0) {
		snprintf(hs->why, sizeof(hs->why), "'%s' cannot be opened", f->host);
		return false;
	}
	r = orh_elf_deps(fd, &deps, &rd->img->cost);
	if (r < 0) {
		snprintf(hs->why, sizeof(hs->why), "'%s': %s%s", f->host,
			 r == -E2BIG ? "more libraries needed than are read" : r == -EDQUOT ?
			 "reading stopped at the budget of " : "not an ELF library read here",
			 r == -EDQUOT ? rd->img->cost.over : "");
		orh_image_over(rd->img, r, f->host);
		return false;
	}
	f->glibc = deps.glibc_needs;
	for (size_t i = 0; i < deps.n_needed; i++) {
		const char *name = deps.needed[i];
		struct orh_supply_file *d;
		bool seen = !strcmp(name, "libibverbs.so.1") || of_glibc(name), cache;

		for (size_t k = 0; k < hs->n_deps && !seen; k++) {
			seen = !strcmp(hs->deps[k].name, name);
			hs->deps[k].of_verbs = hs->deps[k].of_verbs || (seen && of_verbs);
		}
		if (seen)
			continue;
		if (hs->n_deps >= ORH_SUPPLY_MAX_DEPS) {
			snprintf(hs->why, sizeof(hs->why), "'%s' needs more than %d libraries",
				 f->host, ORH_SUPPLY_MAX_DEPS);
			return false;
		}
		d = &hs->deps[hs->n_deps];
		if (!orh_image_loader_find(rd, name, d->host, sizeof(d->host), &cache)) {
			snprintf(hs->why, sizeof(hs->why), "'%s' needs %s, which the node's loader "
				 "does not find", f->host, name);
			return false;
		}
		snprintf(d->name, sizeof(d->name), "%s", name);
		d->of_verbs = of_verbs;
		hs->n_deps++;
	}
	return true;
}

void orh_supply_read(int hostfd, int rootfd, const char *const *providers, size_t n,
		     const char *const *env, size_t n_env, struct orh_host_stack *hs)
{
	struct image_reader host = { .rootfd = hostfd, .cachefd = -1 };
	struct image_reader image = { .rootfd = rootfd, .cachefd = -1 };
	struct orh_image scratch = { 0 };
	_cleanup_close_ int fd = -1;
	struct orh_elf_deps deps;
	bool ok, cache;
	int r;

	memset(hs, 0, sizeof(*hs));
	hs->read = true;
	orh_image_read(hostfd, providers, n, NULL, 0, &hs->host);
	host.img = &hs->host;
	if (hs->host.verbs[0]) {
		snprintf(hs->verbs.host, sizeof(hs->verbs.host), "%s", hs->host.verbs);
		snprintf(hs->verbs.name, sizeof(hs->verbs.name), "libibverbs.so.1");
		hs->verbs.of_verbs = true;
	}
	ok = !hs->verbs.host[0] || file_needs(&host, hs, &hs->verbs, true);
	for (size_t i = 0; ok && i < hs->host.n_providers; i++) {
		const struct orh_image_provider *p = &hs->host.providers[i];
		struct orh_supply_file *f = &hs->providers[i];

		if (p->state != ORH_PROVIDER_FOUND || !hs->host.abi)
			continue;
		snprintf(f->host, sizeof(f->host), "%s", p->library);
		snprintf(f->name, sizeof(f->name), "lib%s-rdmav%u.so", p->name, hs->host.abi);
		ok = file_needs(&host, hs, f, false);
	}
	/* the libraries' own: hs->deps grows as it is walked */
	for (size_t i = 0; ok && i < hs->n_deps; i++)
		ok = file_needs(&host, hs, &hs->deps[i], hs->deps[i].of_verbs);
	if (host.cachefd >= 0)
		close(host.cachefd);

	/* the image's glibc: its libc.so.6, as its loader finds it */
	image.img = &scratch;
	image.ld_library_path = orh_image_env_get(env, n_env, "LD_LIBRARY_PATH");
	if (orh_image_loader_find(&image, "libc.so.6", hs->image_libc, sizeof(hs->image_libc), &cache) &&
	    orh_image_open_file(&image, hs->image_libc, &fd) == 0) {
		r = orh_elf_deps(fd, &deps, &scratch.cost);
		if (r == 0)
			hs->image_glibc = deps.glibc_defines;
		orh_image_over(image.img, r, hs->image_libc);
	}
	if (image.cachefd >= 0)
		close(image.cachefd);
	/* the image's libc.so.6, or its cache, past a budget: unreadable, and why */
	snprintf(hs->image_over, sizeof(hs->image_over), "%s", scratch.over);
	hs->host.opens += scratch.opens;
	orh_image_free(&scratch);
}

void orh_supply_free(struct orh_host_stack *hs)
{
	orh_image_free(&hs->host);
	memset(hs, 0, sizeof(*hs));
}
