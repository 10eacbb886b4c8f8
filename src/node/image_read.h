/* SPDX-License-Identifier: Apache-2.0 */
/* The image's files, opened counted, and a library found as the image's loader finds it
 * (src/node/image_read.c): for the image's reader (image.c, image_nccl.c) and the node's
 * stack read for the supply (image_supply.c). */
#ifndef ORH_NODE_IMAGE_READ_H
#define ORH_NODE_IMAGE_READ_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>

#include "orh/node/image.h"

/* One reading of a root: every open counted in img->opens, the notes and the budget in
 * img. */
struct image_reader {
	int rootfd;
	struct orh_image *img;
	const char *ld_library_path;  /* the container's LD_LIBRARY_PATH, or NULL */
	int cachefd;          /* the image's ld.so.cache; -1: none or broken */
	bool cache_tried;
};

/* path in the root, a regular file, open: 0, or -errno (a file that is not regular is
 * noted). */
int orh_image_open_file(struct image_reader *rd, const char *path, int *fd);
/* Is path there (a file, through any link inside the root)? */
bool orh_image_exists(struct image_reader *rd, const char *path);
/* The directory path, open for reading its entries (NULL where it is not there). */
DIR *orh_image_open_dir(struct image_reader *rd, const char *path);
/* Where the image's loader finds name: the container's LD_LIBRARY_PATH, its ld.so.cache,
 * then its own directories; the in-root path into out, *from_cache where the cache named
 * it. */
bool orh_image_loader_find(struct image_reader *rd, const char *name, char *out, size_t size,
			   bool *from_cache);
/* The value of name in env (n entries) as the process gets it, or NULL. */
const char *orh_image_env_get(const char *const *env, size_t n, const char *name);
/* The loader's multiarch triplet, where Debian's layout has one. */
#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#elif defined(__powerpc64__)
#define MULTIARCH "powerpc64le-linux-gnu"
#else
#define MULTIARCH "unknown-linux-gnu"
#endif

#endif
