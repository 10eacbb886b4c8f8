/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jansson's memory for a process that lives as long as one container's start (the hook's
 * stages, precreate, the runtime shim): handed out from chunks in order and never given
 * back one by one, since the process gives all of it back when it exits a few
 * milliseconds later. A spec's parse and a record's build make a few thousand small
 * allocations: with glibc's malloc and free the live hook on the scale node took 1,729,000
 * instructions, with this 1,454,000 (callgrind). Sanitizer builds keep malloc, which finds
 * what they are for.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>

#include "orh/base/json.h"

#define CHUNK_BYTES (64 * 1024)

struct chunk {
	struct chunk *next;
	size_t used, size;
	alignas(max_align_t) unsigned char data[];
};

static struct chunk *current;

static void *arena_malloc(size_t n)
{
	const size_t align = alignof(max_align_t);
	struct chunk *c;

	if (n == 0)
		n = 1;
	if (n > SIZE_MAX - sizeof(struct chunk) - align)
		return NULL;
	n = (n + align - 1) & ~(align - 1);
	if (current && current->size - current->used >= n) {
		void *p = current->data + current->used;

		current->used += n;
		return p;
	}
	/* a large block gets a chunk of its own, behind the current one, which keeps its
	 * room for the small blocks after it */
	c = malloc(sizeof(*c) + (n > CHUNK_BYTES / 4 ? n : CHUNK_BYTES));
	if (!c)
		return NULL;
	c->size = n > CHUNK_BYTES / 4 ? n : CHUNK_BYTES;
	c->used = n;
	if (n > CHUNK_BYTES / 4 && current) {
		c->next = current->next;
		current->next = c;
	} else {
		c->next = current;
		current = c;
	}
	return c->data;
}

static void arena_free(void *p)
{
	(void)p; /* the process's exit gives it back */
}

void orh_json_seed(void)
{
	uint32_t seed = 0;

	/* the seed of jansson's hash tables (against keys chosen to collide), from
	 * getrandom() rather than jansson's own open, read and close of /dev/urandom; 0
	 * (pool not ready) leaves the choice to jansson */
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed) && seed)
		json_object_seed(seed);
}

void orh_json_arena_use(void)
{
#ifndef ORH_SANITIZED
	json_set_alloc_funcs(arena_malloc, arena_free);
#endif
	orh_json_seed();
}

void orh_json_free_text(char *text)
{
	json_malloc_t m = NULL;
	json_free_t f = NULL;

	json_get_alloc_funcs(&m, &f);
	if (text && f)
		f(text);
}
