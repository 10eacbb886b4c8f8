/* SPDX-License-Identifier: Apache-2.0 */
/* The image reader (src/node/image.c, image_elf.c) on image trees that tests/mkimage_tree.py
 * writes as the field lays them out, and on the host's own loader cache and libraries. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/node/image.h"
#include "orh/base/rootfs.h"

static char root[256];
static int rootfd = -1;
static struct orh_image img;

static void make(const char *layout, bool real)
{
	const char *src = getenv("ORH_SRCDIR");
	char cmd[1024];

	cr_assert_not_null(src, "ORH_SRCDIR is not set (run through meson test)");
	snprintf(root, sizeof(root), "/dev/shm/orh-image-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	snprintf(cmd, sizeof(cmd), "python3 %s/tests/mkimage_tree.py %s %s %s", src,
		 real ? "--real" : "", layout, root);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(rootfd, 0);
}

static void cleanup(void)
{
	char cmd[512];

	orh_image_free(&img);
	if (rootfd >= 0)
		close(rootfd);
	rootfd = -1;
	if (root[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
		if (system(cmd) != 0)
			fprintf(stderr, "cleanup of %s failed\n", root);
	}
	root[0] = '\0';
}

static void read_image(const char *const *providers, size_t n, const char *const *env,
		       size_t n_env)
{
	orh_image_read(rootfd, providers, n, env, n_env, &img);
	cr_assert(img.read);
}

static const struct orh_image_provider *prov(const char *name)
{
	for (size_t i = 0; i < img.n_providers; i++)
		if (!strcmp(img.providers[i].name, name))
			return &img.providers[i];
	cr_assert_fail("provider %s not read", name);
	return NULL;
}

static bool noted(const char *needle)
{
	for (size_t i = 0; i < img.notes.n; i++)
		if (strstr(img.notes.v[i], needle))
			return true;
	return false;
}

static void dump(void)
{
	fprintf(stderr, "%u opens, %.3f ms\n", img.opens, img.ms);
	for (size_t i = 0; i < img.notes.n; i++)
		fprintf(stderr, "note: %s\n", img.notes.v[i]);
}

TestSuite(image, .fini = cleanup);

Test(image, debian_multiarch_with_the_hosts_real_libraries)
{
	static const char *const want[] = { "rxe", "mlx5", "efa", "erdma" };

	make("debian", true);
	read_image(want, 4, NULL, 0);
	dump();
	cr_assert_str_eq(img.verbs, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
	cr_assert(img.verbs_from_cache, "found through the image's ld.so.cache");
	cr_assert_eq(img.abi, 34, "Debian 12's libibverbs defines IBVERBS_PRIVATE_34: %u", img.abi);
	cr_assert_str_eq(img.provider_dir, "/usr/lib/x86_64-linux-gnu/libibverbs");
	cr_assert_eq(prov("rxe")->state, ORH_PROVIDER_FOUND);
	cr_assert_str_eq(prov("rxe")->library,
			 "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so");
	cr_assert_str_eq(prov("rxe")->config, "/etc/libibverbs.d/rxe.driver");
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_FOUND);
	cr_assert_str_eq(prov("mlx5")->config, "/etc/libibverbs.d/mlx5.driver");
	cr_assert_eq(prov("efa")->state, ORH_PROVIDER_NO_LIBRARY);
	cr_assert_str_eq(prov("efa")->library,
			 "/usr/lib/x86_64-linux-gnu/libibverbs/libefa-rdmav34.so");
	cr_assert_eq(prov("erdma")->state, ORH_PROVIDER_NO_CONFIG);
	cr_assert_eq(img.n_driver_files, 3);
	cr_assert_eq(img.n_nccl, 0);
	cr_assert_eq(img.notes.n, 0);
	cr_assert_gt(img.opens, 0);
	cr_assert_leq(img.opens, 64, "a bounded number of opens: %u", img.opens);
}

Test(image, rhel_lib64_without_a_cache)
{
	static const char *const want[] = { "mlx5" };

	make("rhel", false);
	read_image(want, 1, NULL, 0);
	cr_assert_str_eq(img.verbs, "/usr/lib64/libibverbs.so.1");
	cr_assert_not(img.verbs_from_cache);
	cr_assert_eq(img.abi, 34);
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_FOUND);
	cr_assert_str_eq(prov("mlx5")->library, "/usr/lib64/libibverbs/libmlx5-rdmav34.so");
}

Test(image, mofed_lib64_with_its_own_driver_file)
{
	static const char *const want[] = { "mlx5", "rxe" };

	make("mofed", false);
	read_image(want, 2, NULL, 0);
	cr_assert_str_eq(img.verbs, "/usr/lib64/libibverbs.so.1");
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_FOUND);
	cr_assert_str_eq(prov("mlx5")->library, "/usr/lib64/libibverbs/libmlx5-rdmav34.so");
	cr_assert_str_eq(prov("mlx5")->config, "/etc/libibverbs.d/mlx5.driver");
	/* a hidden file is read too, its line indented, with a comment after the name */
	cr_assert_eq(prov("rxe")->state, ORH_PROVIDER_FOUND);
	cr_assert_str_eq(prov("rxe")->config, "/etc/libibverbs.d/.hidden");
}

Test(image, ld_library_path_is_searched_first)
{
	static const char *const want[] = { "mlx5" };
	static const char *const env[] = { "LD_LIBRARY_PATH=/nowhere:/opt/rdma/lib" };

	make("ldpath", false);
	read_image(want, 1, NULL, 0);
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_NO_VERBS, "not where the loader looks");
	orh_image_free(&img);
	read_image(want, 1, env, 1);
	cr_assert_str_eq(img.verbs, "/opt/rdma/lib/libibverbs.so.1");
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_FOUND);
	cr_assert_str_eq(prov("mlx5")->library, "/opt/rdma/lib/libibverbs/libmlx5-rdmav34.so");
}

Test(image, no_rdma_libraries_at_all)
{
	static const char *const want[] = { "mlx5" };

	make("empty", false);
	read_image(want, 1, NULL, 0);
	cr_assert_str_eq(img.verbs, "");
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_NO_VERBS);
	cr_assert_eq(img.n_nccl, 0);
	cr_assert_eq(img.notes.n, 0);
	cr_assert_leq(img.opens, 48, "%u opens", img.opens);
}

Test(image, nccl_from_apt_and_from_pip_pips_marked)
{
	static const char *const env[] = { "HOME=/root",
					   "PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin" };

	make("nccl", false);
	read_image(NULL, 0, env, 2);
	dump();
	cr_assert_leq(img.opens, 64, "a bounded number of opens: %u", img.opens);
	cr_assert_eq(img.n_nccl, 3, "%zu copies", img.n_nccl);
	/* sys.path's order: the venv's, then the system's; the loader's last */
	cr_assert_eq(img.nccl[0].from, ORH_NCCL_PIP);
	cr_assert_str_eq(img.nccl[0].version, "2.28.9");
	cr_assert_str_eq(img.nccl[0].package, "nvidia_nccl_cu12");
	cr_assert_str_eq(img.nccl[0].path, "/opt/venv/lib/python3.12/site-packages/"
			 "nvidia_nccl_cu12-2.28.9.dist-info");
	cr_assert(img.nccl[0].pytorch);
	cr_assert_str_eq(img.nccl[1].version, "2.27.7");
	cr_assert_str_eq(img.nccl[1].package, "nvidia_nccl_cu13");
	cr_assert_not(img.nccl[1].pytorch);
	cr_assert_eq(img.nccl[2].from, ORH_NCCL_LIBRARY);
	cr_assert_str_eq(img.nccl[2].version, "2.28.3");
	cr_assert_str_eq(img.nccl[2].path, "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
	cr_assert_eq(img.nccl[2].v[1], 28);
	cr_assert_not(img.nccl[2].pytorch);
}

Test(image, nccl_without_the_venv_on_path_the_system_pip_copy_is_marked)
{
	static const char *const env[] = { "PATH=/usr/bin:/bin" };

	make("nccl", false);
	read_image(NULL, 0, env, 1);
	cr_assert_eq(img.n_nccl, 2);
	cr_assert_str_eq(img.nccl[0].version, "2.27.7");
	cr_assert(img.nccl[0].pytorch);
}

Test(image, virtual_env_and_pythonpath_name_where_python_looks)
{
	static const char *const env[] = { "VIRTUAL_ENV=/opt/venv", "PATH=/usr/bin",
					   "PYTHONPATH=/usr/local/lib/python3.12/dist-packages" };

	make("nccl", false);
	read_image(NULL, 0, env, 3);
	cr_assert_eq(img.n_nccl, 3);
	/* PYTHONPATH's come first in sys.path */
	cr_assert_str_eq(img.nccl[0].version, "2.27.7");
	cr_assert(img.nccl[0].pytorch);
	cr_assert_str_eq(img.nccl[1].version, "2.28.9");
}

Test(image, a_broken_cache_falls_back_to_the_loaders_directories)
{
	static const char *const want[] = { "rxe" };

	make("broken-cache", false);
	read_image(want, 1, NULL, 0);
	cr_assert(noted("/etc/ld.so.cache: truncated"), "the note says so");
	cr_assert_str_eq(img.verbs, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
	cr_assert_not(img.verbs_from_cache);
	cr_assert_eq(prov("rxe")->state, ORH_PROVIDER_FOUND);
}

Test(image, an_abi_mismatch_names_the_library_of_the_other_abi)
{
	static const char *const want[] = { "rxe", "mlx5" };

	make("abi-mismatch", false);
	read_image(want, 2, NULL, 0);
	cr_assert_eq(img.abi, 34);
	cr_assert_eq(prov("rxe")->state, ORH_PROVIDER_ABI_MISMATCH);
	cr_assert_str_eq(prov("rxe")->other,
			 "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav25.so");
	cr_assert_eq(prov("rxe")->other_abi, 25);
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_ABI_MISMATCH);
	cr_assert_eq(prov("mlx5")->other_abi, 33, "the ABI it needs: %u", prov("mlx5")->other_abi);
}

Test(image, hostile_layouts_stay_inside_the_root_and_never_block)
{
	static const char *const want[] = { "rxe", "mlx5" };

	make("hostile", false);
	read_image(want, 2, NULL, 0);
	dump();
	cr_assert(noted("huge.driver' is larger than"), "the huge file is left");
	cr_assert(noted("fifo.driver' is not a regular file"), "the FIFO is left");
	cr_assert(noted("/etc/ld.so.cache' is not a regular file"));
	/* rxe is named only by the huge file, which is not read */
	cr_assert_eq(prov("rxe")->state, ORH_PROVIDER_NO_CONFIG);
	/* the link above the root resolves inside it, to the rxe library */
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_FOUND);
	/* NCCL's link leads out of the root, where nothing is: no copy */
	cr_assert_eq(img.n_nccl, 0);
}

Test(image, the_hosts_own_cache_finds_its_libibverbs)
{
	char path[512];
	const char *why = NULL;
	unsigned abi = 0;
	int fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
	int lib;

	cr_assert_geq(fd, 0);
	cr_assert_eq(orh_ldcache_lookup(fd, "libibverbs.so.1", path, sizeof(path), NULL, &why), 1,
		     "%s", why ? why : "");
	cr_assert(strstr(path, "/libibverbs.so.1"), "%s", path);
	cr_assert_eq(orh_ldcache_lookup(fd, "libc.so.6", path, sizeof(path), NULL, &why), 1);
	cr_assert_eq(orh_ldcache_lookup(fd, "libnothere.so.7", path, sizeof(path), NULL, &why), 0);
	close(fd);
	lib = open("/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(lib, 0);
	cr_assert_eq(orh_elf_private_abi(lib, false, &abi, NULL), 0);
	cr_assert_eq(abi, 34);
	cr_assert_eq(orh_elf_private_abi(lib, true, &abi, NULL), -ENOENT,
		     "a provider defines none");
	close(lib);
}

Test(image, library_names_sort_as_the_loader_sorts_them)
{
	cr_assert_lt(orh_ldcache_cmp("libibverbs.so.1", "libibverbs.so.10"), 0);
	cr_assert_gt(orh_ldcache_cmp("libibverbs.so.9", "libibverbs.so"), 0);
	cr_assert_gt(orh_ldcache_cmp("libz.so.1", "libibverbs.so.1"), 0);
	cr_assert_eq(orh_ldcache_cmp("libc.so.6", "libc.so.6"), 0);
	cr_assert_gt(orh_ldcache_cmp("lib2", "libx"), 0, "a digit after any other byte");
}

Test(image, the_provider_a_device_needs)
{
	struct orh_device d = { .name = "mlx5_3", .pci = "0000:1a:00.0", .driver = "mlx5_core" };
	struct orh_device rxe = { .name = "rxe0" };
	struct orh_device erdma = { .name = "erdma_0", .pci = "0000:00:05.0", .vendor = 0x1ded };
	struct orh_device odd = { .name = "x0", .pci = "0000:00:05.0", .driver = "odd" };

	cr_assert_str_eq(orh_image_provider_of(&d), "mlx5");
	cr_assert_str_eq(orh_image_provider_of(&rxe), "rxe");
	cr_assert_str_eq(orh_image_provider_of(&erdma), "erdma");
	cr_assert_null(orh_image_provider_of(&odd));
}

/* glibc's old cache format, alone and followed by the new one (ldconfig's compat mode):
 * the old one's names count from its string table, the new one's from its own header. */
static int memfile(const void *data, size_t len)
{
	int fd = memfd_create("ldcache", MFD_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	return fd;
}

Test(image, the_old_cache_format_and_the_compat_one)
{
	static const char strs[] = "libibverbs.so.1\0/lib/libibverbs.so.1\0libc.so.6\0/lib/libc.so.6";
	unsigned char buf[512] = "ld.so-1.7.0";
	uint32_t n = 2, e[6] = { 0x0303, 0, 16, 0x0303, 37, 47 };
	size_t len = 16 + sizeof(e);
	char path[128];
	const char *why = NULL;
	int fd;

	memcpy(buf + 12, &n, 4);
	memcpy(buf + 16, e, sizeof(e));
	memcpy(buf + len, strs, sizeof(strs));
	fd = memfile(buf, len + sizeof(strs));
	cr_assert_eq(orh_ldcache_lookup(fd, "libibverbs.so.1", path, sizeof(path), NULL, &why), 1,
		     "%s", why ? why : "");
	cr_assert_str_eq(path, "/lib/libibverbs.so.1");
	cr_assert_eq(orh_ldcache_lookup(fd, "libc.so.6", path, sizeof(path), NULL, &why), 1);
	cr_assert_str_eq(path, "/lib/libc.so.6");
	close(fd);
	/* a new-format header after the old entries (aligned to 8): the loader reads that one,
	 * here one that holds nothing */
	memset(buf + len, 0, sizeof(buf) - len);
	memcpy(buf + len, "glibc-ld.so.cache1.1", 20);
	fd = memfile(buf, len + 48);
	cr_assert_eq(orh_ldcache_lookup(fd, "libibverbs.so.1", path, sizeof(path), NULL, &why), 0);
	close(fd);
	/* not a cache */
	fd = memfile("ld.so-1.7", 9);
	cr_assert_eq(orh_ldcache_lookup(fd, "libc.so.6", path, sizeof(path), NULL, &why), -EINVAL);
	cr_assert_not_null(why);
	close(fd);
}

/* ---- what the supply reads and writes ------------------------------------------------ */

Test(image, the_hosts_libibverbs_needs_libnl_and_glibc_and_libc_defines_its_versions)
{
	struct orh_elf_deps deps;
	int fd = open("/usr/lib/x86_64-linux-gnu/libibverbs.so.1", O_RDONLY | O_CLOEXEC);
	bool nl = false, nl_route = false;

	cr_assert_geq(fd, 0);
	cr_assert_eq(orh_elf_deps(fd, &deps, NULL), 0);
	close(fd);
	for (size_t i = 0; i < deps.n_needed; i++) {
		nl = nl || !strcmp(deps.needed[i], "libnl-3.so.200");
		nl_route = nl_route || !strcmp(deps.needed[i], "libnl-route-3.so.200");
	}
	cr_assert(nl && nl_route, "DT_NEEDED read: %zu names", deps.n_needed);
	cr_assert_geq(deps.glibc_needs, 20205, "GLIBC_2.2.5 at least: %u", deps.glibc_needs);
	cr_assert_eq(deps.glibc_defines, 0);
	fd = open("/usr/lib/x86_64-linux-gnu/libc.so.6", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(orh_elf_deps(fd, &deps, NULL), 0);
	close(fd);
	/* Debian 12's glibc is 2.36 */
	cr_assert_geq(deps.glibc_defines, 23600, "%u", deps.glibc_defines);
}

Test(image, the_node_stack_read_for_supply_from_the_hosts_root)
{
	const char *providers[] = { "mlx5", "rxe" };
	struct orh_host_stack hs;
	int host = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	bool nl = false;

	make("empty", false);
	orh_supply_read(host, rootfd, providers, 2, NULL, 0, &hs);
	close(host);
	cr_assert(hs.read);
	cr_assert_str_eq(hs.why, "");
	cr_assert_str_eq(hs.verbs.name, "libibverbs.so.1");
	cr_assert_eq(hs.host.abi, 34);
	cr_assert_str_eq(hs.providers[0].name, "libmlx5-rdmav34.so");
	cr_assert_str_eq(hs.providers[1].name, "librxe-rdmav34.so");
	for (size_t i = 0; i < hs.n_deps; i++)
		nl = nl || (!strcmp(hs.deps[i].name, "libnl-3.so.200") && hs.deps[i].of_verbs);
	cr_assert(nl, "libibverbs' libnl-3 among %zu libraries", hs.n_deps);
	/* the empty image has no glibc */
	cr_assert_eq(hs.image_glibc, 0);
	orh_supply_free(&hs);
}

Test(image, a_merged_cache_glibc_reads_with_the_supplied_libibverbs_first)
{
	struct orh_ldcache_add add[] = {
		{ "libibverbs.so.1", "/run/oci-rdma-hook/lib/libibverbs.so.1" },
		{ "libnl-3.so.200", "/run/oci-rdma-hook/lib/libnl-3.so.200" },
	};
	char path[] = "/dev/shm/orh-ldcache-XXXXXX", cmd[256], line[512], found[256];
	const char *why = NULL;
	char *data = NULL;
	size_t len = 0;
	int fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC), out;
	unsigned ours_first = 0, seen = 0;
	FILE *p;

	cr_assert_geq(fd, 0);
	cr_assert_eq(orh_ldcache_merge(fd, add, 2, &data, &len, &why), 0, "%s", why);
	out = mkstemp(path);
	cr_assert_geq(out, 0);
	cr_assert_eq(write(out, data, len), (ssize_t)len);
	/* our own reader: ours, and the host's other libraries where they were */
	lseek(out, 0, SEEK_SET);
	cr_assert_eq(orh_ldcache_lookup(out, "libibverbs.so.1", found, sizeof(found), NULL, &why),
		     1);
	cr_assert_str_eq(found, "/run/oci-rdma-hook/lib/libibverbs.so.1");
	cr_assert_eq(orh_ldcache_lookup(out, "libc.so.6", found, sizeof(found), NULL, &why), 1);
	cr_assert(strstr(found, "libc.so.6"), "%s", found);
	close(out);
	close(fd);
	free(data);
	/* glibc's own: ldconfig -p lists each name's entries in the loader's order */
	snprintf(cmd, sizeof(cmd), "ldconfig -p -C %s", path);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p))
		if (strstr(line, "\tlibibverbs.so.1 (")) {
			ours_first += !seen && strstr(line, "=> /run/oci-rdma-hook/lib/") != NULL;
			seen++;
		}
	cr_assert_eq(pclose(p), 0, "ldconfig -p -C refused the cache");
	unlink(path);
	cr_assert_eq(ours_first, 1, "libibverbs.so.1: %u entries, ours not first", seen);
	cr_assert_eq(seen, 2, "the host's own entry of that name follows ours: %u", seen);
}

/* ---- the budget ------------------------------------------------------------------------ */

Test(image, a_crafted_image_is_read_once_and_stops_at_its_budgets)
{
	static const char *const want[] = { "mlx5", "rxe", "efa", "erdma",
					    "irdma", "bnxt_re", "qedr", "hns" };
	static const char *const mlx5 = "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so";
	struct orh_read_cost plain;
	struct orh_host_stack hs;
	struct stat st;
	char over[512];
	int host = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	make("libc", false);
	read_image(want, 1, NULL, 0);
	plain = img.cost.all;
	cr_assert_str_eq(img.over, "");
	cleanup();
	make("crafted", false);
	read_image(want, 1, NULL, 0);
	dump();
	fprintf(stderr, "plain: %lu reads, %lu bytes, %lu entries; crafted: %lu, %lu, %lu\n",
		plain.reads, plain.bytes, plain.entries, img.cost.all.reads, img.cost.all.bytes,
		img.cost.all.entries);
	/* its sections read once each, whole: the file's bytes at most, in a few reads */
	cr_assert_eq(fstatat(rootfd, mlx5 + 1, &st, 0), 0);
	cr_assert_leq(img.cost.all.reads, 2 * plain.reads);
	cr_assert_leq(img.cost.all.bytes, plain.bytes + (unsigned long)st.st_size);
	/* its walk stopped at the file's budget, said, the file taken as libibverbs would take
	 * one whose need it cannot tell */
	cr_assert_geq(img.cost.all.entries, ORH_IMAGE_FILE_ENTRIES);
	cr_assert_leq(img.cost.all.entries, plain.entries + ORH_IMAGE_FILE_ENTRIES, "%lu entries",
		      img.cost.all.entries);
	snprintf(over, sizeof(over), "'%s': reading stopped at the budget of 2048 entries walked "
		 "in one file", mlx5);
	cr_assert_str_eq(img.over, over);
	cr_assert_eq(prov("mlx5")->state, ORH_PROVIDER_FOUND);
	/* eight such providers: the image's budget is spent at the fourth, every file after
	 * is unreadable */
	orh_image_free(&img);
	read_image(want, 8, NULL, 0);
	cr_assert_leq(img.cost.all.entries, ORH_IMAGE_ENTRIES);
	cr_assert(noted("libhns-rdmav34.so': reading stopped at the budget of 8192 entries walked "
			"in the image"), "the image's own budget");
	/* the supply: the image's libc.so.6 past its budget is unreadable, and why */
	orh_supply_read(host, rootfd, want, 1, NULL, 0, &hs);
	close(host);
	cr_assert_eq(hs.image_glibc, 0);
	cr_assert_str_eq(hs.image_over, "'/usr/lib/x86_64-linux-gnu/libc.so.6': reading stopped "
			 "at the budget of 2048 entries walked in one file");
	orh_supply_free(&hs);
}

Test(image, a_cache_lookup_past_its_budget_says_which)
{
	struct orh_read_budget b = { 0 };
	char path[256];
	const char *why = NULL;
	struct stat st;
	int fd;

	make("cache-walk", false);
	cr_assert_eq(orh_rootfs_open_file(rootfd, "/etc/ld.so.cache", &fd, &st), 0);
	cr_assert_eq(orh_ldcache_lookup(fd, "libibverbs.so.1", path, sizeof(path), &b, &why),
		     -EDQUOT);
	cr_assert_str_eq(why, "128 reads of one file");
	cr_assert_str_eq(b.over, why);
	cr_assert_eq(b.file.reads, ORH_IMAGE_FILE_READS, "%lu", b.file.reads);
	/* a name looked up apart from the repeated one: a few reads, on the file's new count */
	cr_assert_eq(orh_ldcache_lookup(fd, "libc.so.6", path, sizeof(path), &b, &why), 0);
	cr_assert_null(b.over);
	cr_assert_leq(b.file.reads, 2 * 17 + 4, "%lu", b.file.reads);
	close(fd);
}

Test(image, the_private_abi_is_bounded_before_its_multiply)
{
	static const struct {
		const char *file;
		int r;
		unsigned abi;
	} cases[] = {
		{ "/abi/0034", 0, 34 },          { "/abi/99999", 0, ORH_ELF_MAX_ABI },
		{ "/abi/100000", -ENOENT, 0 },   { "/abi/000000333960", -ENOENT, 0 },
		{ "/abi/4294967296", -ENOENT, 0 },
	};

	make("abi-overflow", false);
	for (size_t i = 0; i < ORH_ARRAY_SIZE(cases); i++) {
		unsigned abi = 0;
		struct stat st;
		int fd = -1;

		cr_assert_eq(orh_rootfs_open_file(rootfd, cases[i].file, &fd, &st), 0);
		cr_assert_eq(orh_elf_private_abi(fd, true, &abi, NULL), cases[i].r, "%s",
			     cases[i].file);
		cr_assert_eq(abi, cases[i].abi, "%s: %u", cases[i].file, abi);
		close(fd);
	}
}
