/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ELF version tables and needs (include/orh/node/image.h), and the budget every read of an
 * image's files is counted against (struct orh_read_budget; the loader's cache is
 * image_cache.c). An ELF file's section headers and each section it walks are read once,
 * whole, and walked in memory, every offset checked against what was read, every loop
 * bounded.
 */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include "orh/node/image.h"
#include "image_elf.h"

#define NAME_READ 256 /* a version name, read at most */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* ---- the budget -------------------------------------------------------------------- */

#define TEXT_(x) #x
#define TEXT(x) TEXT_(x)

/* A file's reading starts: its count from zero, a budget it passed forgotten (the image's
 * is found spent again at its first read). */
struct orh_read_budget *orh_budget_file(struct orh_read_budget *b)
{
	memset(&b->file, 0, sizeof(b->file));
	b->over = NULL;
	return b;
}

/* Spend reads, bytes and entries, or, where that would pass a budget, nothing: false. */
bool orh_budget_spend(struct orh_read_budget *b, unsigned long reads, unsigned long bytes,
		      unsigned long entries)
{
	struct orh_read_cost *f = &b->file, *a = &b->all;

	if (b->over)
		return false;
	if (f->reads + reads > ORH_IMAGE_FILE_READS)
		b->over = TEXT(ORH_IMAGE_FILE_READS) " reads of one file";
	else if (f->bytes + bytes > ORH_IMAGE_FILE_BYTES)
		b->over = TEXT(ORH_IMAGE_FILE_BYTES) " bytes read of one file";
	else if (f->entries + entries > ORH_IMAGE_FILE_ENTRIES)
		b->over = TEXT(ORH_IMAGE_FILE_ENTRIES) " entries walked in one file";
	else if (a->reads + reads > ORH_IMAGE_READS)
		b->over = TEXT(ORH_IMAGE_READS) " reads of the image";
	else if (a->bytes + bytes > ORH_IMAGE_BYTES)
		b->over = TEXT(ORH_IMAGE_BYTES) " bytes read of the image";
	else if (a->entries + entries > ORH_IMAGE_ENTRIES)
		b->over = TEXT(ORH_IMAGE_ENTRIES) " entries walked in the image";
	if (b->over)
		return false;
	f->reads += reads;
	f->bytes += bytes;
	f->entries += entries;
	a->reads += reads;
	a->bytes += bytes;
	a->entries += entries;
	return true;
}

/* len bytes at off of a file of size bytes: 0; -EINVAL: not all there; -EDQUOT. */
int orh_pread_counted(int fd, void *buf, size_t len, uint64_t off, uint64_t size,
		      struct orh_read_budget *b)
{
	if (off > size || len > size - off)
		return -EINVAL;
	if (!orh_budget_spend(b, 1, len, 0))
		return -EDQUOT;
	return pread(fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -EINVAL;
}

/* The NUL-terminated string at off of the bytes [0, end) of mem into out (at most size - 1
 * bytes; one that runs to end without a NUL is taken as it is): false when it does not fit
 * or off is past end. */
bool orh_mem_name(const char *mem, uint64_t end, uint64_t off, char *out, size_t size)
{
	size_t want = size - 1, n;
	const char *nul;

	if (off >= end)
		return false;
	if (want > end - off)
		want = (size_t)(end - off);
	nul = memchr(mem + off, '\0', want);
	if (!nul && want == size - 1)
		return false;
	n = nul ? (size_t)(nul - (mem + off)) : want;
	memcpy(out, mem + off, n);
	out[n] = '\0';
	return true;
}

bool orh_image_over(struct orh_image *img, int r, const char *path)
{
	if (r != -EDQUOT)
		return false;
	orh_strv_pushf(&img->notes, "'%s': reading stopped at the budget of %s: taken as "
		       "unreadable", path, img->cost.over);
	if (!img->over[0])
		snprintf(img->over, sizeof(img->over), "'%s': reading stopped at the budget of "
			 "%s", path, img->cost.over);
	return true;
}

/* ---- ELF version definitions and needs, and DT_NEEDED ------------------------------ */

#define PRIVATE_PREFIX "IBVERBS_PRIVATE_"
#define MAX_SECTIONS 128
#define MAX_VERSIONS 256
#define MAX_HELD 8       /* sections held in memory at once */

/* An ELF file being read: its section headers, and the sections read so far (each range
 * of the file read once while held; the oldest let go past MAX_HELD). */
struct elf {
	int fd;
	uint64_t size;
	struct orh_read_budget *b;
	unsigned shnum;
	Elf64_Shdr sh[MAX_SECTIONS];
	struct {
		uint64_t off, len;
		char *data;
	} held[MAX_HELD];
	size_t n_held;
};

/* The bytes [off, off + len) of the file, read once: 0; -ENOEXEC: not in the file;
 * -EDQUOT. */
static int hold(struct elf *e, uint64_t off, uint64_t len, const char **data)
{
	size_t slot = e->n_held % MAX_HELD;
	char *buf;

	for (size_t i = 0; i < e->n_held && i < MAX_HELD; i++)
		if (e->held[i].off == off && e->held[i].len == len) {
			*data = e->held[i].data;
			return 0;
		}
	if (off > e->size || len > e->size - off)
		return -ENOEXEC;
	if (!orh_budget_spend(e->b, 1, len, 0))
		return -EDQUOT;
	buf = orh_xmalloc(len ? (size_t)len : 1);
	if (pread(e->fd, buf, (size_t)len, (off_t)off) != (ssize_t)len) {
		free(buf);
		return -ENOEXEC;
	}
	free(e->held[slot].data);
	e->held[slot].off = off;
	e->held[slot].len = len;
	e->held[slot].data = buf;
	e->n_held++;
	*data = buf;
	return 0;
}

static void elf_close(struct elf *e)
{
	for (size_t i = 0; i < MAX_HELD; i++)
		free(e->held[i].data);
}

/* The header and the section headers, in two reads: 0; -ENOEXEC: not a 64-bit
 * little-endian ELF file, or a broken one; -EDQUOT. */
static int elf_open(struct elf *e, int fd, struct orh_read_budget *b)
{
	Elf64_Ehdr eh;
	struct stat st;
	int r;

	memset(e, 0, sizeof(*e));
	e->fd = fd;
	e->b = b;
	if (fstat(fd, &st) < 0)
		return -errno;
	e->size = (uint64_t)st.st_size;
	r = orh_pread_counted(fd, &eh, sizeof(eh), 0, e->size, b);
	if (r < 0)
		return r == -EDQUOT ? r : -ENOEXEC;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    eh.e_shnum > MAX_SECTIONS)
		return -ENOEXEC;
	e->shnum = eh.e_shnum;
	r = orh_pread_counted(fd, e->sh, e->shnum * sizeof(Elf64_Shdr), eh.e_shoff, e->size, b);
	return r == -EDQUOT ? r : r < 0 ? -ENOEXEC : 0;
}

/* A section held in memory, with the string table it links to; the walker's callback. */
struct section {
	const Elf64_Shdr *sh;
	const char *data, *str;
	uint64_t len, slen;
	struct orh_read_budget *b;
};
typedef int (*section_fn)(const struct section *sec, void *arg);

/* n bytes at off of the section into out */
static bool sec_at(const struct section *sec, uint64_t off, void *out, size_t n)
{
	if (off > sec->len || n > sec->len - off)
		return false;
	memcpy(out, sec->data + off, n);
	return true;
}

/* fn for each section of the types wanted (each on its linked string table) until it
 * returns nonzero: that value; 0 when none did; -ENOEXEC for a file that is not a 64-bit
 * little-endian ELF file, or a broken one; -EDQUOT. */
static int each_section(int fd, struct orh_read_budget *b, const uint32_t *types,
			size_t n_types, section_fn fn, void *arg)
{
	struct elf *e = orh_xmalloc(sizeof(*e));
	int r = elf_open(e, fd, b);

	for (unsigned i = 0; r == 0 && i < e->shnum; i++) {
		const Elf64_Shdr *sh = &e->sh[i], *link;
		struct section sec = { .sh = sh, .b = b };
		bool wanted = false;

		for (size_t k = 0; k < n_types; k++)
			wanted = wanted || sh->sh_type == types[k];
		if (!wanted)
			continue;
		if (sh->sh_link >= e->shnum || e->sh[sh->sh_link].sh_type != SHT_STRTAB) {
			r = -ENOEXEC;
			break;
		}
		link = &e->sh[sh->sh_link];
		r = hold(e, sh->sh_offset, sh->sh_size, &sec.data);
		if (r == 0)
			r = hold(e, link->sh_offset, link->sh_size, &sec.str);
		/* the section again: a string table read after it may have let it go */
		if (r == 0)
			r = hold(e, sh->sh_offset, sh->sh_size, &sec.data);
		if (r < 0)
			break;
		sec.len = sh->sh_size;
		sec.slen = link->sh_size;
		r = fn(&sec, arg);
	}
	elf_close(e);
	free(e);
	return r;
}

/* fn for each version name a version section defines (past its base entry, the file's
 * own name) or needs, until it returns nonzero: that value, else 0; -ENOEXEC: broken;
 * -EDQUOT. */
typedef int (*version_fn)(const char *name, void *arg);

static int version_name(const struct section *sec, uint32_t name, version_fn fn, void *arg)
{
	char buf[NAME_READ];

	return orh_mem_name(sec->str, sec->slen, name, buf, sizeof(buf)) ? fn(buf, arg) : 0;
}

static int each_version(const struct section *sec, version_fn fn, void *arg)
{
	uint64_t off = 0;
	int r = 0;

	for (unsigned i = 0; i < MAX_VERSIONS && i <= sec->sh->sh_info && !r; i++) {
		if (!orh_budget_spend(sec->b, 0, 0, 1))
			return -EDQUOT;
		if (sec->sh->sh_type == SHT_GNU_verdef) {
			Elf64_Verdef vd;
			Elf64_Verdaux aux;

			if (!sec_at(sec, off, &vd, sizeof(vd)) ||
			    !sec_at(sec, off + vd.vd_aux, &aux, sizeof(aux)))
				return -ENOEXEC;
			if (!(vd.vd_flags & VER_FLG_BASE))
				r = version_name(sec, aux.vda_name, fn, arg);
			if (!vd.vd_next)
				break;
			off += vd.vd_next;
		} else {
			Elf64_Verneed vn;
			uint64_t aoff;

			if (!sec_at(sec, off, &vn, sizeof(vn)))
				return -ENOEXEC;
			aoff = off + vn.vn_aux;
			for (unsigned k = 0; k < vn.vn_cnt && k < MAX_VERSIONS && !r; k++) {
				Elf64_Vernaux va;

				if (!orh_budget_spend(sec->b, 0, 0, 1))
					return -EDQUOT;
				if (!sec_at(sec, aoff, &va, sizeof(va)))
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

/* name IBVERBS_PRIVATE_<N>, N at most ORH_ELF_MAX_ABI (leading zeros allowed): N into
 * *abi, and 1 (the walk stops) */
static int private_abi(const char *name, void *arg)
{
	unsigned long v = 0;
	const char *p = name + strlen(PRIVATE_PREFIX);

	if (strncmp(name, PRIVATE_PREFIX, strlen(PRIVATE_PREFIX)) || !is_digit(*p))
		return 0;
	for (; is_digit(*p); p++) {
		unsigned long d = (unsigned long)(*p - '0');

		/* the bound before the multiply: v * 10 + d stays at most the bound */
		if (v > (ORH_ELF_MAX_ABI - d) / 10)
			return 0;
		v = v * 10 + d;
	}
	if (*p)
		return 0;
	*(unsigned *)arg = (unsigned)v;
	return 1;
}

static int private_abi_section(const struct section *sec, void *arg)
{
	return each_version(sec, private_abi, arg);
}

int orh_elf_private_abi(int fd, bool defined, unsigned *abi, struct orh_read_budget *b)
{
	struct orh_read_budget fresh = { 0 };
	const uint32_t type = defined ? SHT_GNU_verdef : SHT_GNU_verneed;
	int r = each_section(fd, orh_budget_file(b ? b : &fresh), &type, 1, private_abi_section,
			     abi);

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
	uint64_t n = sec->len / sizeof(Elf64_Dyn);

	if (sec->sh->sh_type == SHT_GNU_verdef)
		return each_version(sec, glibc_max, &out->glibc_defines);
	if (sec->sh->sh_type == SHT_GNU_verneed)
		return each_version(sec, glibc_max, &out->glibc_needs);
	for (uint64_t i = 0; i < n && i < 512; i++) {
		Elf64_Dyn dyn;
		char *name = out->needed[out->n_needed];

		if (!orh_budget_spend(sec->b, 0, 0, 1))
			return -EDQUOT;
		if (!sec_at(sec, i * sizeof(dyn), &dyn, sizeof(dyn)))
			return -ENOEXEC;
		if (dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_NEEDED)
			continue;
		if (out->n_needed >= ORH_ELF_MAX_NEEDED)
			return -E2BIG;
		if (!orh_mem_name(sec->str, sec->slen, dyn.d_un.d_val, name,
				  sizeof(out->needed[0])) || strchr(name, '/') || !name[0])
			return -ENOEXEC;
		out->n_needed++;
	}
	return 0;
}

int orh_elf_deps(int fd, struct orh_elf_deps *out, struct orh_read_budget *b)
{
	static const uint32_t types[] = { SHT_DYNAMIC, SHT_GNU_verdef, SHT_GNU_verneed };
	struct orh_read_budget fresh = { 0 };

	memset(out, 0, sizeof(*out));
	return each_section(fd, orh_budget_file(b ? b : &fresh), types, ORH_ARRAY_SIZE(types),
			    deps_section, out);
}

