/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a file of a container image as the image reader meets it (src/node/
 * image_elf.c, image_cache.c): looked up as the loader's ld.so.cache, read as an ELF
 * library for the IBVERBS_PRIVATE_<N> it defines and needs and for its needs, on one
 * budget as an image's files are, and merged as the supply's cache. Whatever the bytes,
 * the lookup ends, a path it finds fits its buffer, an ABI found is the number the version
 * name carries and at most ORH_ELF_MAX_ABI, a budget passed is named, and a merged cache
 * is no larger than the reader takes. Replayed and fuzzed with a time limit per input
 * (docs/fuzzing.md): a slow input is a finding.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "orh/node/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "libibverbs.so.1", "libnccl.so.2", "libc.so.6" };
	struct orh_read_budget budget = { 0 };
	char out[64];
	const char *why = NULL;
	unsigned abi = 0;
	int fd = memfd_create("fuzz-image", MFD_CLOEXEC), r;

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		memset(out, 'x', sizeof(out));
		why = NULL;
		r = orh_ldcache_lookup(fd, names[i], out, sizeof(out), &budget, &why);
		if (r == 1 && !memchr(out, '\0', sizeof(out)))
			abort(); /* a path found is a string within its buffer */
		if (r < 0 && ((r != -EINVAL && r != -EDQUOT) || !why))
			abort(); /* a cache it cannot read says why */
		if (r == -EDQUOT && (!budget.over || strcmp(why, budget.over)))
			abort(); /* a budget passed is named */
		if (r != 0 && r != 1 && r >= 0)
			abort();
	}
	for (int def = 0; def < 2; def++) {
		abi = 0;
		r = orh_elf_private_abi(fd, def, &abi, &budget);
		if (r == 0 && abi > ORH_ELF_MAX_ABI)
			abort();
		if (r < 0 && r != -ENOENT && r != -ENOEXEC && r != -EDQUOT)
			abort();
		if ((r == -EDQUOT) != (budget.over != NULL))
			abort();
	}
	/* what a library needs: names within their buffers, versions as X*10000+Y*100+Z */
	{
		struct orh_elf_deps deps;

		r = orh_elf_deps(fd, &deps, &budget);
		if (r < 0 && r != -ENOEXEC && r != -E2BIG && r != -EDQUOT)
			abort();
		for (size_t i = 0; r == 0 && i < deps.n_needed; i++)
			if (!memchr(deps.needed[i], '\0', sizeof(deps.needed[i])) ||
			    !deps.needed[i][0] || strchr(deps.needed[i], '/'))
				abort();
		if (r == 0 && (deps.n_needed > ORH_ELF_MAX_NEEDED ||
			       deps.glibc_needs > 999999 || deps.glibc_defines > 999999))
			abort();
	}
	/* the cache merged with ours: ours found first in what it writes */
	{
		static const struct orh_ldcache_add add[] = {
			{ "libibverbs.so.1", "/run/oci-rdma-hook/lib/libibverbs.so.1" },
		};
		char *merged = NULL;
		size_t len = 0;
		int mfd;

		why = NULL;
		r = orh_ldcache_merge(fd, add, 1, &merged, &len, &why);
		if (r < 0 && (r != -EINVAL || !why || merged))
			abort();
		if (r == 0) {
			mfd = memfd_create("fuzz-merged", MFD_CLOEXEC);
			if (mfd >= 0 && write(mfd, merged, len) == (ssize_t)len &&
			    (len > ORH_LDCACHE_MAX_BYTES ||
			     orh_ldcache_lookup(mfd, "libibverbs.so.1", out, sizeof(out), NULL,
						&why) != 1 ||
			     strcmp(out, add[0].path)))
				abort();
			if (mfd >= 0)
				close(mfd);
			free(merged);
		}
	}
	close(fd);
	return 0;
}
