/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image's RDMA userspace and NCCL, as the container's own loader would find them
 * (src/node/image.c; the ELF version tables and the reading's budget: src/node/image_elf.c;
 * the loader's cache: src/node/image_cache.c). Read from the container's root as a
 * directory fd, every path resolved inside it (orh/base/rootfs.h); directory entries of a fixed
 * list of directories only, no tree walked, nothing of the image run, every open counted,
 * every read of a file counted against a budget (struct orh_read_budget).
 */
#ifndef ORH_NODE_IMAGE_H
#define ORH_NODE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "orh/node/inventory.h"
#include "orh/base/util.h"

#define ORH_IMAGE_PATH_MAX 256
#define ORH_IMAGE_MAX_PROVIDERS 8
#define ORH_IMAGE_MAX_NCCL 8
/* the provider config directory: files read at most, bytes of one file at most */
#define ORH_IMAGE_MAX_DRIVER_FILES 64
#define ORH_IMAGE_DRIVER_FILE_MAX 4096
/* entries of one directory looked at, at most */
#define ORH_IMAGE_MAX_DIRENTS 4096
/* the loader's cache: libraries at most, bytes at most (it is read in small pieces); a
 * merged cache (orh_ldcache_merge()) is never larger either */
#define ORH_LDCACHE_MAX_LIBS 65536
#define ORH_LDCACHE_MAX_BYTES (16 << 20)

/* What reading the files of one image may cost: its loader's cache looked up and its ELF
 * files read (image_elf.c), each file on its own budget and all of them on the image's.
 * Counted are pread calls, the bytes they read and the entries walked (cache entries, ELF
 * version entries and their names, dynamic entries). A read that would pass a budget is
 * not made: the file is taken as unreadable, a note names it and the budget; once the
 * image's budget is spent, every file after is. orh_supply_read() reads the node's stack
 * on a budget of the same size, and the image's libc.so.6 on another. */
#define ORH_IMAGE_FILE_READS 128
#define ORH_IMAGE_FILE_BYTES 1048576
#define ORH_IMAGE_FILE_ENTRIES 2048
#define ORH_IMAGE_READS 2048
#define ORH_IMAGE_BYTES 4194304
#define ORH_IMAGE_ENTRIES 8192

struct orh_read_cost {
	unsigned long reads;    /* pread calls */
	unsigned long bytes;    /* bytes they asked for */
	unsigned long entries;  /* entries walked */
};

/* One image's reading: what the file being read cost so far, what all its files did, and
 * the budget a read stopped at ("2048 entries walked in one file"; NULL: none). A zeroed
 * struct is a fresh one; each file read starts the file's count again. */
struct orh_read_budget {
	struct orh_read_cost file;
	struct orh_read_cost all;
	const char *over;
};

/* Whether the image's libibverbs would load a provider. */
enum orh_provider_state {
	ORH_PROVIDER_FOUND = 0,     /* a driver file names it, its library has this ABI */
	ORH_PROVIDER_NO_VERBS,      /* the image has no libibverbs.so.1 */
	ORH_PROVIDER_NO_CONFIG,     /* no file of /etc/libibverbs.d names it */
	ORH_PROVIDER_NO_LIBRARY,    /* named, but no library lib<NAME>-rdmav<N>.so */
	ORH_PROVIDER_ABI_MISMATCH,  /* only a library of another private ABI */
};

struct orh_image_provider {
	char name[32];                     /* "mlx5" */
	enum orh_provider_state state;
	char config[ORH_IMAGE_PATH_MAX];   /* the driver file that names it, or "" */
	char library[ORH_IMAGE_PATH_MAX];  /* the library found, or the first path looked at */
	char other[ORH_IMAGE_PATH_MAX];    /* ABI_MISMATCH: the library of another ABI */
	unsigned other_abi;                /* its ABI (from its name), 0: not told */
};

enum orh_nccl_from {
	ORH_NCCL_LIBRARY = 0,  /* libnccl.so.2 where the loader finds it (apt, a CUDA image) */
	ORH_NCCL_PIP,          /* pip's nvidia-nccl-cuNN in a site-packages directory */
};

struct orh_image_nccl {
	char version[32];                  /* "2.28.3"; "" when not told */
	unsigned v[3];                     /* major, minor, patch */
	char path[ORH_IMAGE_PATH_MAX];     /* the library, or the dist-info directory */
	char package[32];                  /* pip's: "nvidia_nccl_cu12" */
	enum orh_nccl_from from;
	bool pytorch;                      /* the copy a PyTorch job loads */
};

struct orh_image {
	bool read;                         /* orh_image_read() ran */
	char verbs[ORH_IMAGE_PATH_MAX];    /* libibverbs.so.1 as the loader finds it
					    * (LD_LIBRARY_PATH, ld.so.cache, its directories);
					    * "" none */
	bool verbs_from_cache;             /* found through the image's ld.so.cache */
	unsigned abi;                      /* its IBVERBS_PRIVATE_<N>; 0: not told */
	char provider_dir[ORH_IMAGE_PATH_MAX]; /* <its directory>/libibverbs */
	size_t n_driver_files;             /* files of /etc/libibverbs.d read */
	struct orh_image_provider providers[ORH_IMAGE_MAX_PROVIDERS];
	size_t n_providers;
	struct orh_image_nccl nccl[ORH_IMAGE_MAX_NCCL];
	size_t n_nccl;
	struct orh_strv notes;             /* what could not be read or was left, naming it */
	unsigned opens;                    /* files and directories opened (the budget) */
	struct orh_read_budget cost;       /* what its files' reading cost (the budget) */
	char over[ORH_IMAGE_PATH_MAX + 96]; /* the first file whose reading stopped at a
					     * budget, and the budget; "" none */
	double ms;                         /* how long the reading took */
};

/* rdma-core's provider name for a device from what discovery read of it: its kernel
 * driver ("mlx5_core" -> "mlx5"), else its PCI vendor, else, for a device without one
 * (soft-RoCE, siw), its name's prefix; NULL when not known. */
const char *orh_image_provider_of(const struct orh_device *dev);

/* Read the image under rootfd for the providers named (each looked at once, at most
 * ORH_IMAGE_MAX_PROVIDERS) and the container's process environment env ("NAME=VALUE"
 * each; LD_LIBRARY_PATH is where its loader looks first, PATH, VIRTUAL_ENV, PYTHONPATH
 * where its Python looks). Never fails: what
 * cannot be read is a note. Free with orh_image_free(). */
void orh_image_read(int rootfd, const char *const *providers, size_t n_providers,
		    const char *const *env, size_t n_env, struct orh_image *img);
void orh_image_free(struct orh_image *img);
const char *orh_provider_state_name(enum orh_provider_state s);

/* ---- image_elf.c: the loader's cache and the ELF version tables ---- */

/* glibc's order of library names in ld.so.cache (digits compared as numbers): <0, 0, >0. */
int orh_ldcache_cmp(const char *a, const char *b);
/* Each of the three reads one file on budget b (NULL: a fresh one), its file count
 * started again; -EDQUOT: a read would have passed a budget (b->over names it), nothing
 * more was read, the file is to be taken as unreadable. */

/* Look name ("libibverbs.so.1") up in the ld.so.cache open at fd, for this machine's
 * word size and ABI, as the loader does (both formats: the old "ld.so-1.7.0" and the new
 * "glibc-ld.so.cache1.1", alone or after the old one); the path into out. 1: found; 0:
 * not there; -EINVAL (why in *why): not a cache the loader reads; -EDQUOT (*why: the
 * budget). Reads only the header, the entries a binary search visits and their names. */
int orh_ldcache_lookup(int fd, const char *name, char *out, size_t size,
		       struct orh_read_budget *b, const char **why);
/* The N of the first IBVERBS_PRIVATE_<N> version that the ELF file at fd defines
 * (defined: libibverbs) or needs (!defined: a provider); a name whose N is above
 * ORH_ELF_MAX_ABI is no such version. 0 and *abi; -ENOENT: none; -ENOEXEC: not an ELF file
 * this reads (64-bit little-endian), or a broken one; -EDQUOT. The section headers and
 * each section it walks are read once, whole, and walked in memory. */
#define ORH_ELF_MAX_ABI 99999
int orh_elf_private_abi(int fd, bool defined, unsigned *abi, struct orh_read_budget *b);


/* What an ELF library needs (orh_elf_deps()): its DT_NEEDED names, the highest GLIBC_
 * version it needs and the highest it defines (libc.so.6 does), each as X*10000+Y*100+Z
 * (0: none). */
#define ORH_ELF_MAX_NEEDED 16
struct orh_elf_deps {
	char needed[ORH_ELF_MAX_NEEDED][64];
	size_t n_needed;
	unsigned glibc_needs;
	unsigned glibc_defines;
};
/* 0; -ENOEXEC: not an ELF file this reads, or a broken one; -E2BIG: more needed names than
 * ORH_ELF_MAX_NEEDED; -EDQUOT. */
int orh_elf_deps(int fd, struct orh_elf_deps *out, struct orh_read_budget *b);

/* A library the loader's cache must find first: name ("libibverbs.so.1") at path. */
struct orh_ldcache_add {
	const char *name;
	const char *path;
};
/* The ld.so.cache open at fd (-1: none) with the entries of add before any of the same
 * name, as one new-format cache (glibc-ld.so.cache1.1) in *out (malloc'd, *out_len bytes):
 * every entry of the old one kept in the loader's order, except those of glibc-hwcaps
 * subdirectories (their names live in an extension not carried over; the loader takes the
 * plain entry instead), those already naming a path of add, and the repeats of an entry
 * (its name, path, flags and hardware bits). The old cache is read once, whole; each
 * string is written once, whatever number of entries name it. -EINVAL with *why: fd is
 * not a cache the loader reads, or the merged one would be larger than
 * ORH_LDCACHE_MAX_BYTES, the most the loader's reader here takes. */
int orh_ldcache_merge(int fd, const struct orh_ldcache_add *add, size_t n_add, char **out,
		      size_t *out_len, const char **why);

/* ---- supply: the node's own stack for the image (image.c) ---- */

/* Where the supplied libraries are in the container, and its files there. */
#define ORH_SUPPLY_DIR "/run/oci-rdma-hook/lib"
#define ORH_SUPPLY_MAX_DEPS 8

struct orh_supply_file {
	char host[ORH_IMAGE_PATH_MAX];  /* on the node, in its root ("" none) */
	char name[64];                  /* its name in ORH_SUPPLY_DIR */
	unsigned glibc;                 /* the highest GLIBC_ version it needs; 0 none */
	bool of_verbs;                  /* a library libibverbs needs (not only a provider) */
};

/* The node's libibverbs and providers for the providers asked, their libraries, and the
 * image's glibc: what the supply decision needs (orh_supply_read()). */
struct orh_host_stack {
	bool read;
	struct orh_image host;          /* the node's, as its own loader finds them */
	struct orh_supply_file verbs;   /* libibverbs.so.1; host "" where the node has none */
	struct orh_supply_file providers[ORH_IMAGE_MAX_PROVIDERS]; /* host.providers' order */
	struct orh_supply_file deps[ORH_SUPPLY_MAX_DEPS]; /* their libraries, glibc's not */
	size_t n_deps;
	char why[ORH_IMAGE_PATH_MAX + 128]; /* a library that could not be read, or "" */
	char image_libc[ORH_IMAGE_PATH_MAX]; /* the image's libc.so.6; "" none found */
	unsigned image_glibc;           /* the highest GLIBC_ version it defines; 0: not told */
	char image_over[ORH_IMAGE_PATH_MAX + 96]; /* its reading stopped at a budget: the file
						   * and the budget; "" not */
};

/* Read the node's stack under hostfd (its root, or a test's tree) for the providers named,
 * and the image's libc.so.6 under rootfd (as its loader finds it, env's LD_LIBRARY_PATH
 * first). Never fails: what is missing stays empty, why says it. Free with
 * orh_supply_free(). */
void orh_supply_read(int hostfd, int rootfd, const char *const *providers, size_t n,
		     const char *const *env, size_t n_env, struct orh_host_stack *hs);
void orh_supply_free(struct orh_host_stack *hs);

#endif
