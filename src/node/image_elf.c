/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loader's cache and the ELF version tables (include/orh/image.h): both read in small
 * pieces at known offsets (pread), never whole, every offset checked against the file's
 * size, every loop bounded.
 */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include "orh/image.h"

#define NAME_READ 256 /* a library name or a version name, read at most */

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

static bool pread_all(int fd, void *buf, size_t len, uint64_t off, uint64_t size)
{
	ssize_t n;

	if (off > size || len > size - off)
		return false;
	n = pread(fd, buf, len, (off_t)off);
	return n == (ssize_t)len;
}

/* The NUL-terminated string at off (below end), into out. */
static bool read_name(int fd, uint64_t off, uint64_t end, char *out, size_t size)
{
	size_t want = size - 1;
	ssize_t n;

	if (off >= end)
		return false;
	if (want > end - off)
		want = (size_t)(end - off);
	n = pread(fd, out, want, (off_t)off);
	if (n <= 0)
		return false;
	out[n] = '\0';
	return memchr(out, '\0', (size_t)n) != NULL || (size_t)n < want;
}

/* ---- ld.so.cache -------------------------------------------------------------- */

#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_MAGIC "glibc-ld.so.cache1.1"
#define OLD_HEADER 16u   /* magic[11], padding, nlibs */
#define OLD_ENTRY 12u    /* flags, key, value */
#define NEW_HEADER 48u   /* magic+version[20], nlibs, len_strings, flags, ..., unused[3] */
#define NEW_ENTRY 24u    /* flags, key, value, osversion, hwcap */

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

struct ldcache {
	int fd;
	uint64_t size;
	uint64_t entries;   /* offset of the first entry */
	uint32_t nlibs;
	uint32_t entry;     /* an entry's size */
	uint64_t strings;   /* what key and value offsets count from */
};

static bool entry_at(const struct ldcache *c, uint32_t i, int32_t *flags, char *key,
		     size_t ksize, uint32_t *value)
{
	uint32_t e[3];

	if (!pread_all(c->fd, e, sizeof(e), c->entries + (uint64_t)i * c->entry, c->size))
		return false;
	*flags = (int32_t)e[0];
	*value = e[2];
	return read_name(c->fd, c->strings + e[1], c->size, key, ksize);
}

static int ldcache_open(int fd, struct ldcache *c, const char **why)
{
	struct stat st;
	char magic[24];
	uint32_t n = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	c->fd = fd;
	c->size = (uint64_t)st.st_size;
	if (c->size > ORH_LDCACHE_MAX_BYTES) {
		*why = "larger than the limit";
		return -EINVAL;
	}
	if (!pread_all(fd, magic, sizeof(magic), 0, c->size)) {
		*why = "too short for a header";
		return -EINVAL;
	}
	if (!memcmp(magic, OLD_MAGIC, strlen(OLD_MAGIC))) {
		uint64_t next;

		if (!pread_all(fd, &n, 4, 12, c->size) || n > ORH_LDCACHE_MAX_LIBS) {
			*why = "a bad count of libraries";
			return -EINVAL;
		}
		c->nlibs = n;
		c->entries = OLD_HEADER;
		c->entry = OLD_ENTRY;
		c->strings = OLD_HEADER + (uint64_t)n * OLD_ENTRY;
		/* the new format, where ldconfig wrote both, follows aligned to 8: the
		 * loader reads that one */
		next = (c->strings + 7) & ~(uint64_t)7;
		if (!pread_all(fd, magic, sizeof(magic), next, c->size) ||
		    memcmp(magic, NEW_MAGIC, strlen(NEW_MAGIC))) {
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
	if (!pread_all(fd, &n, 4, c->strings + 20, c->size) || n > ORH_LDCACHE_MAX_LIBS) {
		*why = "a bad count of libraries";
		return -EINVAL;
	}
	c->nlibs = n;
	c->entries = c->strings + NEW_HEADER;
	c->entry = NEW_ENTRY;
	if (c->entries + (uint64_t)n * NEW_ENTRY > c->size) {
		*why = "truncated";
		return -EINVAL;
	}
	return 0;
}

int orh_ldcache_lookup(int fd, const char *name, char *out, size_t size, const char **why)
{
	struct ldcache c = { 0 };
	char key[NAME_READ];
	int64_t left = 0, right;
	int32_t flags = 0;
	uint32_t value = 0;
	int r = ldcache_open(fd, &c, why);

	if (r < 0)
		return r;
	right = (int64_t)c.nlibs - 1;
	/* the entries are sorted by name, highest first (the loader's binary search) */
	while (left <= right) {
		int64_t mid = left + (right - left) / 2;
		int cmp;

		if (!entry_at(&c, (uint32_t)mid, &flags, key, sizeof(key), &value)) {
			*why = "an entry past its end";
			return -EINVAL;
		}
		cmp = orh_ldcache_cmp(name, key);
		if (cmp == 0) {
			/* entries of one name are next to each other: the first of this
			 * machine's kind */
			while (mid > 0 && entry_at(&c, (uint32_t)(mid - 1), &flags, key,
						   sizeof(key), &value) && !strcmp(key, name))
				mid--;
			for (; mid < (int64_t)c.nlibs; mid++) {
				if (!entry_at(&c, (uint32_t)mid, &flags, key, sizeof(key),
					      &value) || strcmp(key, name))
					break;
				if ((flags & 0xffff) != CACHE_FLAGS)
					continue;
				if (!read_name(fd, c.strings + value, c.size, out, size))
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

/* ---- ELF version definitions and needs, and DT_NEEDED ------------------------------ */

#define PRIVATE_PREFIX "IBVERBS_PRIVATE_"
#define MAX_SECTIONS 128
#define MAX_VERSIONS 256

struct strtab {
	uint64_t off, end;
};

/* A section of the file, with the string table it links to; the walker's callback. */
struct section {
	int fd;
	uint64_t size;            /* the file's */
	const Elf64_Shdr *sh;
	struct strtab s;
};
typedef int (*section_fn)(const struct section *sec, void *arg);

/* fn for each section of the types wanted (each on its linked string table) until it
 * returns nonzero: that value; 0 when none did; -ENOEXEC for a file that is not a 64-bit
 * little-endian ELF file, or a broken one. */
static int each_section(int fd, const uint32_t *types, size_t n_types, section_fn fn,
			void *arg)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh, link;
	struct stat st;
	struct section sec = { .fd = fd, .sh = &sh };

	if (fstat(fd, &st) < 0)
		return -errno;
	sec.size = (uint64_t)st.st_size;
	if (!pread_all(fd, &eh, sizeof(eh), 0, sec.size) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > MAX_SECTIONS)
		return -ENOEXEC;
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		bool wanted = false;
		int r;

		if (!pread_all(fd, &sh, sizeof(sh), eh.e_shoff + (uint64_t)i * sizeof(sh), sec.size))
			return -ENOEXEC;
		for (size_t k = 0; k < n_types; k++)
			wanted = wanted || sh.sh_type == types[k];
		if (!wanted)
			continue;
		if (sh.sh_link >= eh.e_shnum ||
		    !pread_all(fd, &link, sizeof(link),
			       eh.e_shoff + (uint64_t)sh.sh_link * sizeof(link), sec.size) ||
		    link.sh_type != SHT_STRTAB)
			return -ENOEXEC;
		sec.s.off = link.sh_offset;
		sec.s.end = link.sh_offset + link.sh_size;
		if (sec.s.end < sec.s.off || sec.s.end > sec.size)
			return -ENOEXEC;
		r = fn(&sec, arg);
		if (r)
			return r;
	}
	return 0;
}

/* fn for each version name a version section defines (past its base entry, the file's
 * own name) or needs, until it returns nonzero: that value, else 0; -ENOEXEC: broken. */
typedef int (*version_fn)(const char *name, void *arg);

static int version_name(const struct section *sec, uint32_t name, version_fn fn, void *arg)
{
	char buf[NAME_READ];

	return read_name(sec->fd, sec->s.off + name, sec->s.end, buf, sizeof(buf)) ?
	       fn(buf, arg) : 0;
}

static int each_version(const struct section *sec, version_fn fn, void *arg)
{
	uint64_t off = sec->sh->sh_offset;
	int r = 0;

	for (unsigned i = 0; i < MAX_VERSIONS && i <= sec->sh->sh_info && !r; i++) {
		if (sec->sh->sh_type == SHT_GNU_verdef) {
			Elf64_Verdef vd;
			Elf64_Verdaux aux;

			if (!pread_all(sec->fd, &vd, sizeof(vd), off, sec->size) ||
			    !pread_all(sec->fd, &aux, sizeof(aux), off + vd.vd_aux, sec->size))
				return -ENOEXEC;
			if (!(vd.vd_flags & VER_FLG_BASE))
				r = version_name(sec, aux.vda_name, fn, arg);
			if (!vd.vd_next)
				break;
			off += vd.vd_next;
		} else {
			Elf64_Verneed vn;
			uint64_t aoff;

			if (!pread_all(sec->fd, &vn, sizeof(vn), off, sec->size))
				return -ENOEXEC;
			aoff = off + vn.vn_aux;
			for (unsigned k = 0; k < vn.vn_cnt && k < MAX_VERSIONS && !r; k++) {
				Elf64_Vernaux va;

				if (!pread_all(sec->fd, &va, sizeof(va), aoff, sec->size))
					return -ENOEXEC;
				r = version_name(sec, va.vna_name, fn, arg);
				if (!va.vna_next)
					break;
				aoff += va.vna_next;
			}
			if (!vn.vn_next)
				break;
			off += vn.vn_next;
		}
	}
	return r;
}

/* name IBVERBS_PRIVATE_<N>: N into *abi, and 1 (the walk stops) */
static int private_abi(const char *name, void *arg)
{
	unsigned long v = 0;
	const char *p = name + strlen(PRIVATE_PREFIX);

	if (strncmp(name, PRIVATE_PREFIX, strlen(PRIVATE_PREFIX)) || !is_digit(*p))
		return 0;
	while (is_digit(*p) && v < 100000)
		v = v * 10 + (unsigned long)(*p++ - '0');
	if (*p)
		return 0;
	*(unsigned *)arg = (unsigned)v;
	return 1;
}

static int private_abi_section(const struct section *sec, void *arg)
{
	return each_version(sec, private_abi, arg);
}

int orh_elf_private_abi(int fd, bool defined, unsigned *abi)
{
	const uint32_t type = defined ? SHT_GNU_verdef : SHT_GNU_verneed;
	int r = each_section(fd, &type, 1, private_abi_section, abi);

	return r < 0 ? r : r ? 0 : -ENOENT;
}

/* "GLIBC_X.Y[.Z]": X*10000 + Y*100 + Z */
static bool glibc_version(const char *name, unsigned *v)
{
	unsigned x = 0, y = 0, z = 0;
	int end = 0;

	if (strncmp(name, "GLIBC_", 6) ||
	    (sscanf(name + 6, "%u.%u%n.%u%n", &x, &y, &end, &z, &end) < 2) ||
	    name[6 + end] != '\0' || x > 99 || y > 99 || z > 99)
		return false;
	*v = x * 10000 + y * 100 + z;
	return true;
}

/* the highest GLIBC_ version into *(unsigned *)arg; the walk goes on */
static int glibc_max(const char *name, void *arg)
{
	unsigned v = 0, *max = arg;

	if (glibc_version(name, &v) && v > *max)
		*max = v;
	return 0;
}

static int deps_section(const struct section *sec, void *arg)
{
	struct orh_elf_deps *out = arg;
	uint64_t n = sec->sh->sh_size / sizeof(Elf64_Dyn);

	if (sec->sh->sh_type == SHT_GNU_verdef)
		return each_version(sec, glibc_max, &out->glibc_defines);
	if (sec->sh->sh_type == SHT_GNU_verneed)
		return each_version(sec, glibc_max, &out->glibc_needs);
	for (uint64_t i = 0; i < n && i < 512; i++) {
		Elf64_Dyn dyn;
		char *name = out->needed[out->n_needed];

		if (!pread_all(sec->fd, &dyn, sizeof(dyn), sec->sh->sh_offset + i * sizeof(dyn),
			       sec->size))
			return -ENOEXEC;
		if (dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_NEEDED)
			continue;
		if (out->n_needed >= ORH_ELF_MAX_NEEDED)
			return -E2BIG;
		if (!read_name(sec->fd, sec->s.off + dyn.d_un.d_val, sec->s.end, name,
			       sizeof(out->needed[0])) || strchr(name, '/') || !name[0])
			return -ENOEXEC;
		out->n_needed++;
	}
	return 0;
}

int orh_elf_deps(int fd, struct orh_elf_deps *out)
{
	static const uint32_t types[] = { SHT_DYNAMIC, SHT_GNU_verdef, SHT_GNU_verneed };

	memset(out, 0, sizeof(*out));
	return each_section(fd, types, ORH_ARRAY_SIZE(types), deps_section, out);
}

/* ---- a cache with the supplied directory's libraries first ------------------------- */

struct centry {
	size_t seq;         /* its place before sorting: ours first, then the cache's order */
	int32_t flags;
	uint32_t osversion;
	uint64_t hwcap;
	char *key, *value;
};

static int centry_cmp(const void *pa, const void *pb)
{
	const struct centry *a = pa, *b = pb;
	int r = orh_ldcache_cmp(b->key, a->key); /* highest name first, as the loader searches */

	if (r)
		return r;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void centries_free(struct centry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].key);
		free(e[i].value);
	}
	free(e);
}

int orh_ldcache_merge(int fd, const struct orh_ldcache_add *add, size_t n_add, char **out,
		      size_t *out_len, const char **why)
{
	struct ldcache c = { 0 };
	struct centry *e = NULL;
	size_t n = 0, strings = 0, off;
	char *buf;
	int r;

	*out = NULL;
	*why = NULL;
	if (fd >= 0) {
		r = ldcache_open(fd, &c, why);
		if (r < 0)
			return r;
	}
	e = orh_xcalloc(c.nlibs + n_add + 1, sizeof(*e));
	/* ours first: the sort keeps them before the image's entries of one name, which the
	 * loader then never reaches */
	for (size_t i = 0; i < n_add; i++) {
		e[n].flags = CACHE_FLAGS;
		e[n].key = orh_xstrdup(add[i].name);
		e[n].value = orh_xstrdup(add[i].path);
		n++;
	}
	for (uint32_t i = 0; i < c.nlibs; i++) {
		uint32_t raw[6] = { 0 };
		char key[NAME_READ], value[NAME_READ * 4];
		bool ours = false;

		if (!pread_all(c.fd, raw, c.entry, c.entries + (uint64_t)i * c.entry, c.size) ||
		    !read_name(c.fd, c.strings + raw[1], c.size, key, sizeof(key)) ||
		    !read_name(c.fd, c.strings + raw[2], c.size, value, sizeof(value))) {
			centries_free(e, n);
			*why = "an entry past its end";
			return -EINVAL;
		}
		e[n].hwcap = c.entry == NEW_ENTRY ? (uint64_t)raw[4] | (uint64_t)raw[5] << 32 : 0;
		/* an entry of a glibc-hwcaps subdirectory names it in the cache's extension,
		 * which is not carried over: the loader then takes the name's plain entry */
		if (e[n].hwcap & (1ull << 62))
			continue;
		for (size_t k = 0; k < n_add; k++)
			ours = ours || !strcmp(add[k].path, value);
		if (ours)
			continue;
		e[n].flags = (int32_t)raw[0];
		e[n].osversion = c.entry == NEW_ENTRY ? raw[3] : 0;
		e[n].key = orh_xstrdup(key);
		e[n].value = orh_xstrdup(value);
		n++;
	}
	/* entries of one name keep their order (seq): ours before the image's */
	for (size_t i = 0; i < n; i++)
		e[i].seq = i;
	qsort(e, n, sizeof(*e), centry_cmp);
	for (size_t i = 0; i < n; i++)
		strings += strlen(e[i].key) + 1 + strlen(e[i].value) + 1;
	*out_len = NEW_HEADER + n * NEW_ENTRY + strings;
	buf = orh_xcalloc(1, *out_len);
	memcpy(buf, NEW_MAGIC, strlen(NEW_MAGIC));
	{
		uint32_t nlibs = (uint32_t)n, len = (uint32_t)strings;

		memcpy(buf + 20, &nlibs, 4);
		memcpy(buf + 24, &len, 4);
		/* glibc's flags: 2 little-endian, 3 big-endian */
		buf[28] = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? 3 : 2;
	}
	/* offsets count from the start of the file (the new format alone) */
	off = NEW_HEADER + n * NEW_ENTRY;
	for (size_t i = 0; i < n; i++) {
		uint32_t ent[6];
		size_t kl = strlen(e[i].key) + 1, vl = strlen(e[i].value) + 1;

		ent[0] = (uint32_t)e[i].flags;
		ent[1] = (uint32_t)off;
		memcpy(buf + off, e[i].key, kl);
		off += kl;
		ent[2] = (uint32_t)off;
		memcpy(buf + off, e[i].value, vl);
		off += vl;
		ent[3] = e[i].osversion;
		ent[4] = (uint32_t)e[i].hwcap;
		ent[5] = (uint32_t)(e[i].hwcap >> 32);
		memcpy(buf + NEW_HEADER + i * NEW_ENTRY, ent, sizeof(ent));
	}
	centries_free(e, n);
	*out = buf;
	return 0;
}
