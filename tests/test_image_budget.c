/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What reading a hostile image costs (src/node/image_elf.c, image_cache.c), counted by the
 * kernel: the read system calls of this process (/proc/self/io's syscr) around the
 * reading of an image tree that tests/mkimage_tree.py writes, against a plain one; and
 * the loader's cache merged (orh_ldcache_merge()) from caches of many entries, read back
 * by glibc's `ldconfig -p -C`.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "orh/node/image.h"

static char roots[2][256];
static int fds[2] = { -1, -1 };

/* layout's tree into slot (0: the image, 1: the node's root for the supply) */
static int make(int slot, const char *layout)
{
	const char *src = getenv("ORH_SRCDIR");
	char cmd[1024];

	cr_assert_not_null(src, "ORH_SRCDIR is not set (run through meson test)");
	if (fds[slot] >= 0) {
		close(fds[slot]);
		snprintf(cmd, sizeof(cmd), "rm -rf %s", roots[slot]);
		cr_assert_eq(system(cmd), 0);
	}
	snprintf(roots[slot], sizeof(roots[slot]), "/dev/shm/orh-budget-XXXXXX");
	cr_assert_not_null(mkdtemp(roots[slot]));
	snprintf(cmd, sizeof(cmd), "python3 %s/tests/mkimage_tree.py %s %s", src, layout,
		 roots[slot]);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
	fds[slot] = open(roots[slot], O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fds[slot], 0);
	return fds[slot];
}

static void cleanup(void)
{
	char cmd[512];

	for (int i = 0; i < 2; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
		if (roots[i][0]) {
			snprintf(cmd, sizeof(cmd), "rm -rf %s", roots[i]);
			if (system(cmd) != 0)
				fprintf(stderr, "cleanup of %s failed\n", roots[i]);
		}
		roots[i][0] = '\0';
	}
}

/* read system calls this process made so far (the kernel's count) */
static unsigned long syscr(void)
{
	char line[128];
	unsigned long n = 0;
	FILE *f = fopen("/proc/self/io", "re");

	cr_assert_not_null(f, "/proc/self/io: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "syscr: %lu", &n) == 1)
			break;
	fclose(f);
	cr_assert_gt(n, 0);
	return n;
}

static bool noted(const struct orh_image *img, const char *needle)
{
	for (size_t i = 0; i < img->notes.n; i++)
		if (strstr(img->notes.v[i], needle))
			return true;
	return false;
}

static void dump(const char *what, const struct orh_image *img, unsigned long reads)
{
	fprintf(stderr, "%s: %lu read calls, %u opens\n", what, reads, img->opens);
	for (size_t i = 0; i < img->notes.n; i++)
		fprintf(stderr, "  note: %s\n", img->notes.v[i]);
}

TestSuite(image_budget, .fini = cleanup);

/* The image's reading and the supply's (its libc.so.6, the node's stack from a plain
 * tree): the read calls it took. */
static unsigned long read_both(const char *layout, struct orh_image *img,
			       struct orh_host_stack *hs)
{
	static const char *const want[] = { "mlx5" };
	unsigned long before;
	int root = make(0, layout), host = make(1, "libc");

	before = syscr();
	orh_image_read(root, want, 1, NULL, 0, img);
	orh_supply_read(host, root, want, 1, NULL, 0, hs);
	return syscr() - before;
}

Test(image_budget, a_crafted_provider_and_libc_take_at_most_twice_the_reads_of_a_plain_image)
{
	struct orh_image plain = { 0 }, crafted = { 0 };
	struct orh_host_stack hs_plain = { 0 }, hs_crafted = { 0 };
	unsigned long r_plain = read_both("libc", &plain, &hs_plain);
	unsigned long r_crafted = read_both("crafted", &crafted, &hs_crafted);

	dump("plain", &plain, r_plain);
	dump("crafted", &crafted, r_crafted);
	cr_assert_eq(hs_plain.image_glibc, 23600, "the plain image's glibc: %u",
		     hs_plain.image_glibc);
	cr_assert_leq(r_crafted, 2 * r_plain, "the crafted image took %lu read calls, the plain "
		      "one %lu", r_crafted, r_plain);
	/* the file and the budget named; the file taken as unreadable */
	cr_assert(noted(&crafted, "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so': "
			"reading stopped at the budget of 2048 entries walked in one file"));
	cr_assert_eq(hs_crafted.image_glibc, 0, "its libc.so.6 unreadable: %u",
		     hs_crafted.image_glibc);
	orh_image_free(&plain);
	orh_image_free(&crafted);
	orh_supply_free(&hs_plain);
	orh_supply_free(&hs_crafted);
}

Test(image_budget, a_cache_of_one_name_walked_whole_stops_at_its_budget)
{
	static const char *const want[] = { "mlx5" };
	struct orh_image plain = { 0 }, walk = { 0 };
	unsigned long before, r_plain, r_walk;
	int root = make(0, "debian");

	before = syscr();
	orh_image_read(root, want, 1, NULL, 0, &plain);
	r_plain = syscr() - before;
	root = make(0, "cache-walk");
	before = syscr();
	orh_image_read(root, want, 1, NULL, 0, &walk);
	r_walk = syscr() - before;
	dump("plain", &plain, r_plain);
	dump("cache-walk", &walk, r_walk);
	/* at most the plain image's reads and the cache's budget for one file (128 reads) */
	cr_assert_leq(r_walk, r_plain + 128, "%lu read calls, the plain cache %lu", r_walk,
		      r_plain);
	cr_assert(noted(&walk, "'/etc/ld.so.cache': reading stopped at the budget of 128 reads "
			"of one file"));
	/* unreadable: the loader's own directories were searched */
	cr_assert_str_eq(walk.verbs, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
	cr_assert_not(walk.verbs_from_cache);
	orh_image_free(&plain);
	orh_image_free(&walk);
}

Test(image_budget, a_private_abi_past_the_bound_is_no_abi)
{
	static const char *const want[] = { "rxe" };
	struct orh_image img = { 0 };

	/* IBVERBS_PRIVATE_000000333960: the bound checked before each multiply */
	orh_image_read(make(0, "abi-overflow"), want, 1, NULL, 0, &img);
	dump("abi-overflow", &img, 0);
	cr_assert_eq(img.abi, 0, "%u", img.abi);
	cr_assert(noted(&img, "no IBVERBS_PRIVATE_ version: its private ABI is not told"));
	orh_image_free(&img);
}

/* ---- the merged cache ------------------------------------------------------------- */

#define FLAGS 0x0303

/* A new-format cache of n entries: key and value offsets (into strings) of entry i from
 * at(i); strings placed after the entries. */
static int cache_file(uint32_t n, const char *strings, size_t slen,
		      void (*at)(uint32_t i, uint32_t *key, uint32_t *value))
{
	size_t head = 48 + (size_t)n * 24, len = head + slen;
	char *buf = calloc(1, len);
	int fd = memfd_create("ldcache", MFD_CLOEXEC);
	uint32_t len32 = (uint32_t)slen;

	cr_assert_not_null(buf);
	cr_assert_geq(fd, 0);
	memcpy(buf, "glibc-ld.so.cache1.1", 20);
	memcpy(buf + 20, &n, 4);
	memcpy(buf + 24, &len32, 4);
	buf[28] = 2;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t e[6] = { FLAGS, 0, 0, 0, 0, 0 };

		at(i, &e[1], &e[2]);
		e[1] += (uint32_t)head;
		e[2] += (uint32_t)head;
		memcpy(buf + 48 + (size_t)i * 24, e, sizeof(e));
	}
	memcpy(buf + head, strings, slen);
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
	free(buf);
	return fd;
}

static const struct orh_ldcache_add ours[] = {
	{ "libibverbs.so.1", "/run/oci-rdma-hook/lib/libibverbs.so.1" },
	{ "libnl-3.so.200", "/run/oci-rdma-hook/lib/libnl-3.so.200" },
};

/* data written to a file, listed by `ldconfig -p -C`: the number of entries it says it
 * has, whether ours is the first libibverbs.so.1, and the lines holding needle */
static unsigned long ldconfig_reads(const char *data, size_t len, bool *ours_first,
				    const char *needle, unsigned *with_needle)
{
	char path[] = "/dev/shm/orh-merged-XXXXXX", cmd[256], line[2048];
	unsigned long libs = 0;
	bool seen = false;
	int out = mkstemp(path);
	FILE *p;

	cr_assert_geq(out, 0);
	cr_assert_eq(write(out, data, len), (ssize_t)len);
	close(out);
	snprintf(cmd, sizeof(cmd), "ldconfig -p -C %s", path);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	*ours_first = false;
	*with_needle = 0;
	while (fgets(line, sizeof(line), p)) {
		sscanf(line, "%lu libs found in cache", &libs);
		if (strstr(line, "\tlibibverbs.so.1 (")) {
			*ours_first = *ours_first ||
				      (!seen && strstr(line, "=> /run/oci-rdma-hook/"));
			seen = true;
		}
		*with_needle += needle && strstr(line, needle) != NULL;
	}
	cr_assert_eq(pclose(p), 0, "ldconfig -p -C refused the merged cache");
	unlink(path);
	return libs;
}

static char long_strings[256 + 1024];

/* every entry the same 254-byte name and 1022-byte path, the longest the reader takes */
static void same_entry(uint32_t i, uint32_t *key, uint32_t *value)
{
	(void)i;
	*key = 0;
	*value = 256;
}

Test(ldcache_merge, a_cache_of_one_entry_repeated_merges_to_one_entry)
{
	const char *why = NULL;
	char *data = NULL;
	size_t len = 0;
	bool first = false;
	unsigned lines = 0;
	int fd;

	memset(long_strings, 'k', 254);
	memcpy(long_strings, "libk", 4);
	memset(long_strings + 256, 'v', 1022);
	long_strings[256] = '/';
	/* 65536 entries of 24 bytes: 1.5 MiB */
	fd = cache_file(65536, long_strings, sizeof(long_strings), same_entry);
	cr_assert_eq(orh_ldcache_merge(fd, ours, 2, &data, &len, &why), 0, "%s", why);
	close(fd);
	/* the entry once, each string once */
	cr_assert_leq(len, 48 + 3 * 24 + sizeof(long_strings) + 128, "%zu bytes", len);
	cr_assert_eq(ldconfig_reads(data, len, &first, "libkkkk", &lines), 3);
	cr_assert(first, "ours first");
	cr_assert_eq(lines, 1);
	free(data);
}

#define DISTINCT 20000
static char names[DISTINCT * 2 * 32];
static uint32_t order[DISTINCT];

static int by_name_desc(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	return orh_ldcache_cmp(names + *y * 64, names + *x * 64);
}

/* DISTINCT names, each three times in a row, in the loader's order */
static void thrice(uint32_t i, uint32_t *key, uint32_t *value)
{
	*key = order[i / 3] * 64;
	*value = order[i / 3] * 64 + 24;
}

Test(ldcache_merge, many_entries_each_repeated_are_kept_once_in_the_loaders_order)
{
	const char *why = NULL;
	char *data = NULL;
	size_t len = 0;
	bool first = false;
	unsigned lines = 0;
	int fd;

	for (uint32_t i = 0; i < DISTINCT; i++) {
		snprintf(names + i * 64, 24, "libx%u.so.1", i);
		snprintf(names + i * 64 + 24, 40, "/usr/lib/x/libx%u.so.1", i);
		order[i] = i;
	}
	qsort(order, DISTINCT, sizeof(order[0]), by_name_desc);
	fd = cache_file(DISTINCT * 3, names, sizeof(names), thrice);
	cr_assert_eq(orh_ldcache_merge(fd, ours, 2, &data, &len, &why), 0, "%s", why);
	close(fd);
	cr_assert_leq(len, ORH_LDCACHE_MAX_BYTES);
	/* glibc reads every entry once, ours first */
	cr_assert_eq(ldconfig_reads(data, len, &first, "\tlibx19999.so.1 ", &lines),
		     DISTINCT + 2);
	cr_assert(first);
	cr_assert_eq(lines, 1);
	free(data);
}

static char runs[64 * 1024];

/* 63000 distinct paths: the suffixes of 63 runs of 1022 bytes, 33 MB of them */
static void suffixes(uint32_t i, uint32_t *key, uint32_t *value)
{
	*key = 0;
	*value = (i / 1000 + 1) * 1024 + 1 + i % 1000;
}

Test(ldcache_merge, a_merged_cache_past_the_readers_limit_is_refused)
{
	const char *why = NULL;
	char *data = NULL;
	size_t len = 0;
	int fd;

	memset(runs, '/', sizeof(runs));
	memcpy(runs, "libk.so.1", 10);
	/* each run ends in its own number: no two suffixes alike */
	for (size_t r = 1; r <= 64; r++) {
		snprintf(runs + r * 1024 - 4, 4, "%03zu", r);
		runs[r * 1024 - 1] = '\0';
	}
	fd = cache_file(63000, runs, sizeof(runs), suffixes);
	cr_assert_eq(orh_ldcache_merge(fd, ours, 2, &data, &len, &why), -EINVAL,
		     "merged into %zu bytes (%s)", len, why ? why : "");
	close(fd);
	cr_assert_null(data);
	cr_assert_not_null(why);
	cr_assert(strstr(why, "larger than the limit"), "%s", why);
}
