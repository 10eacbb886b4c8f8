/* SPDX-License-Identifier: Apache-2.0 */
/* The budget of an image's reading (src/node/image_elf.c), for the loader's cache
 * (image_cache.c) and the image's reader (image.c). */
#ifndef ORH_NODE_IMAGE_ELF_H
#define ORH_NODE_IMAGE_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orh/node/image.h"

/* A file's reading starts on b: its count from zero, a budget it passed forgotten (the
 * image's is found spent again at its first read). Returns b. */
struct orh_read_budget *orh_budget_file(struct orh_read_budget *b);
/* Spend reads, bytes and entries, or, where that would pass a budget, nothing (b->over
 * names it): false. */
bool orh_budget_spend(struct orh_read_budget *b, unsigned long reads, unsigned long bytes,
		      unsigned long entries);
/* len bytes at off of fd, a file of size bytes, counted: 0; -EINVAL: not all there;
 * -EDQUOT. */
int orh_pread_counted(int fd, void *buf, size_t len, uint64_t off, uint64_t size,
		      struct orh_read_budget *b);
/* The NUL-terminated string at off of the bytes [0, end) of mem into out (at most size - 1
 * bytes; one that runs to end without a NUL is taken as it is): false when it does not fit
 * or off is past end. */
bool orh_mem_name(const char *mem, uint64_t end, uint64_t off, char *out, size_t size);
/* r -EDQUOT: the reading of path stopped at img->cost's budget, noted in img->notes
 * naming the file and the budget, the first such kept in img->over; true then, the file
 * to be taken as unreadable. */
bool orh_image_over(struct orh_image *img, int r, const char *path);

#endif
