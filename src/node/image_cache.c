/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loader's cache (include/orh/node/image.h): looked up in small pieces at known offsets
 * (pread), each counted against a budget (image_elf.h), every offset checked against the
 * file's size; merged with the supplied libraries first, the old cache read once, whole,
 * each string written once and each entry kept once.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include "orh/node/image.h"
#include "image_elf.h"

#define NAME_READ 256 /* a library name, read at most */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Names sort as glibc's ldconfig sorts them: runs of digits by their value, the rest by
 * byte, a digit after any other byte. */
int orh_ldcache_cmp(const char *a, const char *b)
{
	while (*a) {
		if (is_digit(*a) && is_digit(*b)) {
			unsigned long va = 0, vb = 0;

			while (is_digit(*a))
				va = va * 10 + (unsigned long)(*a++ - '0');
			while (is_digit(*b))
				vb = vb * 10 + (unsigned long)(*b++ - '0');
			if (va != vb)
				return va < vb ? -1 : 1;
		} else if (is_digit(*a)) {
			return 1;
		} else if (is_digit(*b)) {
			return -1;
		} else if (*a != *b) {
			return (unsigned char)*a - (unsigned char)*b;
		} else {
			a++;
			b++;
		}
	}
	return *b ? -1 : 0;
}

/* ---- ld.so.cache -------------------------------------------------------------- */

#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_MAGIC "glibc-ld.so.cache1.1"
/* The on-disk layouts (glibc's elf/cache.c, sysdeps/generic/dl-cache.h), in the byte
 * order of the machine that wrote them. */
struct old_header {
	char magic[12];          /* OLD_MAGIC, then a NUL */
	uint32_t nlibs;
};
struct old_entry {
	int32_t flags;
	uint32_t key, value;     /* offsets of the name and the path, from the strings */
};
struct new_header {
	char magic[20];          /* NEW_MAGIC: "glibc-ld.so.cache" and the version "1.1" */
	uint32_t nlibs;
	uint32_t len_strings;
	uint8_t flags;           /* 2 little-endian, 3 big-endian */
	uint8_t padding[3];
	uint32_t extension_offset;
	uint32_t unused[3];
};
struct new_entry {
	int32_t flags;
	uint32_t key, value;     /* offsets of the name and the path, from the file's start */
	uint32_t osversion;
	uint64_t hwcap;
};
_Static_assert(sizeof(struct old_header) == 16 && sizeof(struct old_entry) == 12 &&
		       sizeof(struct new_header) == 48 && sizeof(struct new_entry) == 24,
	       "ld.so.cache's layout");
_Static_assert(offsetof(struct new_entry, osversion) == sizeof(struct old_entry),
	       "an old entry is a new one's first fields");
_Static_assert(sizeof(OLD_MAGIC) <= sizeof(((struct old_header *)0)->magic) &&
		       sizeof(NEW_MAGIC) - 1 == sizeof(((struct new_header *)0)->magic),
	       "ld.so.cache's magic");
#define OLD_HEADER ((unsigned)sizeof(struct old_header))
#define OLD_ENTRY ((unsigned)sizeof(struct old_entry))
#define NEW_HEADER ((unsigned)sizeof(struct new_header))
#define NEW_ENTRY ((unsigned)sizeof(struct new_entry))

/* This machine's libraries in the cache: FLAG_ELF_LIBC6 and the word size's flag. */
#if defined(__x86_64__)
#define CACHE_FLAGS 0x0303
#elif defined(__aarch64__)
#define CACHE_FLAGS 0x0a03
#elif defined(__powerpc64__)
#define CACHE_FLAGS 0x0503
#else
#define CACHE_FLAGS 0x0003
#endif

/* A cache read in pieces from fd (mem NULL) on a budget, or held whole in mem. */
struct ldcache {
	int fd;
	const char *mem;
	struct orh_read_budget *b;
	uint64_t size;
	uint64_t entries;   /* offset of the first entry */
	uint32_t nlibs;
	uint32_t entry;     /* an entry's size */
	uint64_t strings;   /* what key and value offsets count from */
};

/* len bytes at off: 0, -EINVAL (not there), -EDQUOT */
static int cget(const struct ldcache *c, void *buf, size_t len, uint64_t off)
{
	if (!c->mem)
		return orh_pread_counted(c->fd, buf, len, off, c->size, c->b);
	if (off > c->size || len > c->size - off)
		return -EINVAL;
	memcpy(buf, c->mem + off, len);
	return 0;
}

/* the name at off into out: 0, -EINVAL, -EDQUOT */
static int cname(const struct ldcache *c, uint64_t off, char *out, size_t size)
{
	char buf[NAME_READ * 4];
	size_t want = size - 1;
	int r;

	if (c->mem)
		return orh_mem_name(c->mem, c->size, off, out, size) ? 0 : -EINVAL;
	if (off >= c->size || size > sizeof(buf))
		return -EINVAL;
	if (want > c->size - off)
		want = (size_t)(c->size - off);
	r = orh_pread_counted(c->fd, buf, want, off, c->size, c->b);
	if (r < 0)
		return r;
	return orh_mem_name(buf, want, 0, out, size) ? 0 : -EINVAL;
}

/* -EINVAL with why, or the budget's -EDQUOT with why its text */
static int cfail(const struct ldcache *c, int r, const char **why, const char *what)
{
	*why = r == -EDQUOT ? c->b->over : what;
	return r == -EDQUOT ? r : -EINVAL;
}

static int entry_at(const struct ldcache *c, uint32_t i, int32_t *flags, char *key,
		    size_t ksize, uint32_t *value)
{
	uint32_t e[3];
	int r = cget(c, e, sizeof(e), c->entries + (uint64_t)i * c->entry);

	if (r < 0)
		return r;
	if (c->b && !c->mem && !orh_budget_spend(c->b, 0, 0, 1))
		return -EDQUOT;
	*flags = (int32_t)e[0];
	*value = e[2];
	return cname(c, c->strings + e[1], key, ksize);
}

static int ldcache_open(struct ldcache *c, const char **why)
{
	char magic[24];
	uint32_t n = 0;
	int r;

	if (c->size > ORH_LDCACHE_MAX_BYTES) {
		*why = "larger than the limit";
		return -EINVAL;
	}
	r = cget(c, magic, sizeof(magic), 0);
	if (r < 0)
		return cfail(c, r, why, "too short for a header");
	if (!memcmp(magic, OLD_MAGIC, strlen(OLD_MAGIC))) {
		uint64_t next;

		r = cget(c, &n, sizeof(n), offsetof(struct old_header, nlibs));
		if (r < 0 || n > ORH_LDCACHE_MAX_LIBS)
			return cfail(c, r, why, "a bad count of libraries");
		c->nlibs = n;
		c->entries = OLD_HEADER;
		c->entry = OLD_ENTRY;
		c->strings = OLD_HEADER + (uint64_t)n * OLD_ENTRY;
		/* the new format, where ldconfig wrote both, follows aligned to 8: the
		 * loader reads that one */
		next = (c->strings + 7) & ~(uint64_t)7;
		r = cget(c, magic, sizeof(magic), next);
		if (r == -EDQUOT)
			return cfail(c, r, why, NULL);
		if (r < 0 || memcmp(magic, NEW_MAGIC, strlen(NEW_MAGIC))) {
			if (c->strings > c->size) {
				*why = "truncated";
				return -EINVAL;
			}
			return 0;
		}
		c->strings = next;
	} else if (!memcmp(magic, NEW_MAGIC, strlen(NEW_MAGIC))) {
		c->strings = 0;
	} else {
		*why = "no ld.so.cache magic";
		return -EINVAL;
	}
	r = cget(c, &n, sizeof(n), c->strings + offsetof(struct new_header, nlibs));
	if (r < 0 || n > ORH_LDCACHE_MAX_LIBS)
		return cfail(c, r, why, "a bad count of libraries");
	c->nlibs = n;
	c->entries = c->strings + NEW_HEADER;
	c->entry = NEW_ENTRY;
	if (c->entries + (uint64_t)n * NEW_ENTRY > c->size) {
		*why = "truncated";
		return -EINVAL;
	}
	return 0;
}

int orh_ldcache_lookup(int fd, const char *name, char *out, size_t size,
		       struct orh_read_budget *b, const char **why)
{
	struct orh_read_budget fresh = { 0 };
	struct ldcache c = { .fd = fd, .b = orh_budget_file(b ? b : &fresh) };
	char key[NAME_READ];
	int64_t left = 0, right;
	int32_t flags = 0;
	uint32_t value = 0;
	struct stat st;
	int r;

	if (fstat(fd, &st) < 0)
		return -errno;
	c.size = (uint64_t)st.st_size;
	r = ldcache_open(&c, why);
	if (r < 0)
		return r;
	right = (int64_t)c.nlibs - 1;
	/* the entries are sorted by name, highest first (the loader's binary search) */
	while (left <= right) {
		int64_t mid = left + (right - left) / 2;
		int cmp;

		r = entry_at(&c, (uint32_t)mid, &flags, key, sizeof(key), &value);
		if (r < 0)
			return cfail(&c, r, why, "an entry past its end");
		cmp = orh_ldcache_cmp(name, key);
		if (cmp == 0) {
			/* entries of one name are next to each other: the first of this
			 * machine's kind */
			while (mid > 0 && (r = entry_at(&c, (uint32_t)(mid - 1), &flags, key,
							sizeof(key), &value)) == 0 &&
			       !strcmp(key, name))
				mid--;
			if (r == -EDQUOT)
				return cfail(&c, r, why, NULL);
			for (; mid < (int64_t)c.nlibs; mid++) {
				r = entry_at(&c, (uint32_t)mid, &flags, key, sizeof(key), &value);
				if (r == -EDQUOT)
					return cfail(&c, r, why, NULL);
				if (r < 0 || strcmp(key, name))
					break;
				if ((flags & 0xffff) != CACHE_FLAGS)
					continue;
				r = cname(&c, c.strings + value, out, size);
				if (r == -EDQUOT)
					return cfail(&c, r, why, NULL);
				if (r < 0)
					break;
				return 1;
			}
			return 0;
		}
		if (cmp < 0)
			left = mid + 1;
		else
			right = mid - 1;
	}
	return 0;
}

/* ---- a cache with the supplied directory's libraries first ------------------------- */

/* An entry of the merged cache: its strings as offsets into the strings written. */
struct centry {
	size_t seq;         /* its place before sorting: ours first, then the cache's order */
	int32_t flags;
	uint32_t osversion;
	uint64_t hwcap;
	uint32_t key, value;
};

/* The merged cache's strings, each written once, and the entries, each kept once: open
 * addressing on a hash of the text, and of an entry's fields. */
struct merge {
	struct orh_buf str;
	uint32_t *sslot;    /* a string's offset + 1; 0: empty */
	size_t nsslot;
	struct centry *e;
	size_t n;
	uint32_t *eslot;    /* an entry's index + 1 */
	size_t neslot;
};

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ull;
	return h;
}

/* s's offset among the strings, written where it is new; false past the size limit */
static bool intern(struct merge *m, const char *s, uint32_t *off)
{
	size_t len = strlen(s), i;

	i = (size_t)hash_bytes(1469598103934665603ull, s, len) & (m->nsslot - 1);
	for (; m->sslot[i]; i = (i + 1) & (m->nsslot - 1))
		if (!strcmp(m->str.p + m->sslot[i] - 1, s)) {
			*off = m->sslot[i] - 1;
			return true;
		}
	if (m->str.n + len + 1 > ORH_LDCACHE_MAX_BYTES)
		return false;
	*off = (uint32_t)m->str.n;
	orh_buf_add(&m->str, s, len + 1);
	m->sslot[i] = *off + 1;
	return true;
}

/* The entry of key and value: added unless the same one is there already. */
static bool add_entry(struct merge *m, int32_t flags, const char *key, const char *value,
		      uint32_t osversion, uint64_t hwcap)
{
	struct centry c = { .flags = flags, .osversion = osversion, .hwcap = hwcap };
	uint64_t h = 1469598103934665603ull;
	size_t i;

	if (!intern(m, key, &c.key) || !intern(m, value, &c.value))
		return false;
	h = hash_bytes(h, &c.flags, sizeof(c.flags));
	h = hash_bytes(h, &c.osversion, sizeof(c.osversion));
	h = hash_bytes(h, &c.hwcap, sizeof(c.hwcap));
	h = hash_bytes(h, &c.key, sizeof(c.key));
	h = hash_bytes(h, &c.value, sizeof(c.value));
	for (i = (size_t)h & (m->neslot - 1); m->eslot[i]; i = (i + 1) & (m->neslot - 1)) {
		const struct centry *o = &m->e[m->eslot[i] - 1];

		if (o->flags == c.flags && o->osversion == c.osversion && o->hwcap == c.hwcap &&
		    o->key == c.key && o->value == c.value)
			return true;
	}
	c.seq = m->n;
	m->e[m->n] = c;
	m->eslot[i] = (uint32_t)++m->n;
	return true;
}

static int centry_cmp(const void *pa, const void *pb, void *strings)
{
	const struct centry *a = pa, *b = pb;
	const char *s = strings;
	/* highest name first, as the loader searches */
	int r = orh_ldcache_cmp(s + b->key, s + a->key);

	if (r)
		return r;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static size_t pow2_above(size_t n)
{
	size_t p = 16;

	while (p < n * 2)
		p *= 2;
	return p;
}

/* The old cache's entries after add's, read from mem (the whole file); -EINVAL with why. */
static int merge_old(struct merge *m, const struct ldcache *c,
		     const struct orh_ldcache_add *add, size_t n_add, const char **why)
{
	for (uint32_t i = 0; i < c->nlibs; i++) {
		/* an old entry is the new one's first fields, the rest left 0 */
		struct new_entry e = { 0 };
		char key[NAME_READ], value[NAME_READ * 4];
		uint64_t hwcap;
		bool ours = false;

		if (cget(c, &e, c->entry, c->entries + (uint64_t)i * c->entry) < 0 ||
		    cname(c, c->strings + e.key, key, sizeof(key)) < 0 ||
		    cname(c, c->strings + e.value, value, sizeof(value)) < 0) {
			*why = "an entry past its end";
			return -EINVAL;
		}
		hwcap = e.hwcap;
		/* an entry of a glibc-hwcaps subdirectory names it in the cache's extension,
		 * which is not carried over: the loader then takes the name's plain entry */
		if (hwcap & (1ull << 62))
			continue;
		for (size_t k = 0; k < n_add; k++)
			ours = ours || !strcmp(add[k].path, value);
		if (ours)
			continue;
		if (!add_entry(m, e.flags, key, value, e.osversion, hwcap)) {
			*why = "the merged cache would be larger than the limit";
			return -EINVAL;
		}
	}
	return 0;
}

/* the whole file at fd into *mem (at most ORH_LDCACHE_MAX_BYTES): 0, -EINVAL with why */
static int read_whole(int fd, struct ldcache *c, char **mem, const char **why)
{
	struct stat st;
	size_t done = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	c->size = (uint64_t)st.st_size;
	if (c->size > ORH_LDCACHE_MAX_BYTES) {
		*why = "larger than the limit";
		return -EINVAL;
	}
	*mem = orh_xmalloc(c->size + 1);
	while (done < c->size) {
		ssize_t n = pread(fd, *mem + done, c->size - done, (off_t)done);

		if (n <= 0) {
			*why = "not readable whole";
			return -EINVAL;
		}
		done += (size_t)n;
	}
	c->mem = *mem;
	return 0;
}

int orh_ldcache_merge(int fd, const struct orh_ldcache_add *add, size_t n_add, char **out,
		      size_t *out_len, const char **why)
{
	struct ldcache c = { .fd = -1 };
	struct merge m = { 0 };
	_cleanup_free_ char *mem = NULL;
	size_t head, total;
	char *buf;
	int r = 0;

	*out = NULL;
	*why = NULL;
	if (fd >= 0) {
		r = read_whole(fd, &c, &mem, why);
		if (r == 0)
			r = ldcache_open(&c, why);
		if (r < 0)
			return r;
	}
	m.e = orh_xcalloc(c.nlibs + n_add + 1, sizeof(*m.e));
	m.neslot = pow2_above(c.nlibs + n_add + 1);
	m.eslot = orh_xcalloc(m.neslot, sizeof(*m.eslot));
	m.nsslot = pow2_above(2 * (c.nlibs + n_add) + 1);
	m.sslot = orh_xcalloc(m.nsslot, sizeof(*m.sslot));
	orh_buf_reserve(&m.str, 4096);
	/* ours first: the sort keeps them before the image's entries of one name, which the
	 * loader then never reaches */
	for (size_t i = 0; i < n_add && r == 0; i++)
		if (!add_entry(&m, CACHE_FLAGS, add[i].name, add[i].path, 0, 0)) {
			*why = "the merged cache would be larger than the limit";
			r = -EINVAL;
		}
	if (r == 0 && fd >= 0)
		r = merge_old(&m, &c, add, n_add, why);
	head = NEW_HEADER + m.n * NEW_ENTRY;
	total = head + m.str.n;
	if (r == 0 && total > ORH_LDCACHE_MAX_BYTES) {
		*why = "the merged cache would be larger than the limit";
		r = -EINVAL;
	}
	if (r < 0)
		goto done;
	/* entries of one name keep their order (seq): ours before the image's */
	qsort_r(m.e, m.n, sizeof(*m.e), centry_cmp, m.str.p);
	buf = orh_xcalloc(1, total);
	{
		struct new_header h = {
			.nlibs = (uint32_t)m.n,
			.len_strings = (uint32_t)m.str.n,
			.flags = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? 3 : 2,
		};

		memcpy(h.magic, NEW_MAGIC, sizeof(h.magic));
		memcpy(buf, &h, sizeof(h));
	}
	/* offsets count from the start of the file (the new format alone) */
	for (size_t i = 0; i < m.n; i++) {
		struct new_entry ent = {
			.flags = m.e[i].flags,
			.key = (uint32_t)(head + m.e[i].key),
			.value = (uint32_t)(head + m.e[i].value),
			.osversion = m.e[i].osversion,
			.hwcap = m.e[i].hwcap,
		};

		memcpy(buf + NEW_HEADER + i * NEW_ENTRY, &ent, sizeof(ent));
	}
	memcpy(buf + head, m.str.p, m.str.n);
	*out = buf;
	*out_len = total;
done:
	free(m.str.p);
	free(m.sslot);
	free(m.eslot);
	free(m.e);
	return r;
}
