/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp-gen: compile the hook's seccomp allow-list (src/base/seccomp-allow.h) into a
 * classic BPF program at build time, with libseccomp, and write it as a C header that
 * src/base/sandbox.c includes. The hook then only hands the bytes to seccomp(2): no
 * libseccomp, no filter generation and no probing at run time.
 *
 *   seccomp-gen [--sanitizer] CPU_FAMILY ENDIAN OUTPUT
 *
 * CPU_FAMILY and ENDIAN are meson's host_machine.cpu_family() and .endian(): the
 * architecture the hook is built for, which need not be the one this program runs on.
 * --sanitizer adds the sanitizer-only system calls (meson's b_sanitize). Default action
 * EPERM; every listed name is allowed as libseccomp knows it on the architecture: by its
 * number, or not at all where it does not exist there (named in a comment of OUTPUT).
 * Exits 1 with a message on any failure, leaving no OUTPUT behind.
 */
#include <errno.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seccomp-allow.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char *const base_names[] = { ORH_SECCOMP_ALLOW };
static const char *const sanitizer_names[] = { ORH_SECCOMP_ALLOW_SANITIZER };

/* meson's cpu family (and endianness) -> libseccomp's architecture name */
static const struct {
	const char *family;
	const char *endian; /* NULL: either */
	const char *arch;
} arch_table[] = {
	{ "x86_64", NULL, "x86_64" },
	{ "x86", NULL, "x86" },
	{ "aarch64", NULL, "aarch64" },
	{ "arm", NULL, "arm" },
	{ "ppc64", "little", "ppc64le" },
	{ "ppc64", "big", "ppc64" },
	{ "ppc", NULL, "ppc" },
	{ "s390x", NULL, "s390x" },
	{ "s390", NULL, "s390" },
	{ "riscv64", NULL, "riscv64" },
	{ "mips", "little", "mipsel" },
	{ "mips", "big", "mips" },
	{ "mips64", "little", "mipsel64" },
	{ "mips64", "big", "mips64" },
	{ "parisc", NULL, "parisc" },
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("seccomp-gen: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("; cannot build the hook's seccomp filter\n", stderr);
	exit(1);
}

static const char *arch_name(const char *family, const char *endian)
{
	for (size_t i = 0; i < ARRAY_SIZE(arch_table); i++) {
		if (strcmp(arch_table[i].family, family) != 0)
			continue;
		if (!arch_table[i].endian || strcmp(arch_table[i].endian, endian) == 0)
			return arch_table[i].arch;
	}
	return family; /* let libseccomp try meson's name as it is */
}

struct gen {
	scmp_filter_ctx ctx;
	uint32_t arch;
	const char *arch_name;
	unsigned int listed;
	char skipped[1024]; /* names without a plain number on the architecture */
};

static void allow(struct gen *g, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	int r;

	/* a name libseccomp knows has a number on the architecture this program runs on,
	 * or a pseudo-number (negative) where it has none; seccomp_rule_add() translates
	 * it for the architecture of the filter, where it may again have none (the rule is
	 * then dropped) or be reached through a multiplexer (socketcall on 32-bit x86) */
	if (nr == __NR_SCMP_ERROR)
		die("'%s' is not a system call libseccomp %u.%u.%u knows", name,
		    seccomp_version()->major, seccomp_version()->minor, seccomp_version()->micro);
	if (seccomp_syscall_resolve_name_arch(g->arch, name) < 0) {
		size_t len = strlen(g->skipped);

		snprintf(g->skipped + len, sizeof(g->skipped) - len, " %s", name);
	}
	g->listed++;
	r = seccomp_rule_add(g->ctx, SCMP_ACT_ALLOW, nr, 0);
	if (r < 0)
		die("allowing %s on %s: %s", name, g->arch_name, strerror(-r));
}

/* The BPF program, exported by libseccomp to a temporary file and read back. */
static struct sock_filter *export_bpf(scmp_filter_ctx ctx, size_t *n)
{
	struct sock_filter *insns;
	FILE *f = tmpfile();
	long size;
	int r;

	if (!f)
		die("tmpfile: %s", strerror(errno));
	r = seccomp_export_bpf(ctx, fileno(f));
	if (r < 0)
		die("seccomp_export_bpf: %s", strerror(-r));
	if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0)
		die("reading the exported filter: %s", strerror(errno));
	if (size == 0 || size % sizeof(*insns) != 0 || size / sizeof(*insns) > BPF_MAXINSNS)
		die("the exported filter is %ld bytes, not 1 to %d instructions", size,
		    BPF_MAXINSNS);
	insns = malloc(size);
	rewind(f);
	if (!insns || fread(insns, 1, size, f) != (size_t)size)
		die("reading the exported filter back: %s", strerror(errno ? errno : EIO));
	fclose(f);
	*n = size / sizeof(*insns);
	return insns;
}

/* libseccomp exports the program in the byte order of its architecture; the header
 * holds numbers, which the compiler for that architecture lays out again. */
static void to_host_order(struct sock_filter *insns, size_t n, const char *endian)
{
	bool little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

	if (strcmp(endian, "little") != 0 && strcmp(endian, "big") != 0)
		die("byte order '%s' is neither little nor big", endian);
	if (little != (strcmp(endian, "little") == 0)) {
		for (size_t i = 0; i < n; i++) {
			insns[i].code = __builtin_bswap16(insns[i].code);
			insns[i].k = __builtin_bswap32(insns[i].k);
		}
	}
	/* every libseccomp filter starts by loading seccomp_data.arch */
	if (insns[0].code != (BPF_LD | BPF_W | BPF_ABS) ||
	    insns[0].k != offsetof(struct seccomp_data, arch))
		die("the exported filter does not start with a load of the architecture "
		    "(0x%04x 0x%08x): a byte order other than '%s'?",
		    insns[0].code, insns[0].k, endian);
}

static void write_header(FILE *out, const struct gen *g, bool sanitizer,
			 const struct sock_filter *insns, size_t n)
{
	const struct scmp_version *v = seccomp_version();

	fprintf(out,
		"/* SPDX-License-Identifier: Apache-2.0 */\n"
		"/* Generated by src/base/seccomp-gen.c with libseccomp %u.%u.%u from "
		"src/base/seccomp-allow.h: do not edit.\n"
		" * For %s: the %u names listed%s are allowed, every other system call\n"
		" * fails with EPERM; a system call through another ABI kills the thread. */\n",
		v->major, v->minor, v->micro, g->arch_name, g->listed,
		sanitizer ? " (the sanitizer's too)" : "");
	if (g->skipped[0]) {
		char list[sizeof(g->skipped)];
		int col = 2;

		fprintf(out,
			"/* Names libseccomp has no plain number for on %s (it left them out,\n"
			" * or allowed them by the numbers it knows them under):\n *",
			g->arch_name);
		snprintf(list, sizeof(list), "%s", g->skipped);
		for (char *save = NULL, *w = strtok_r(list, " ", &save); w;
		     w = strtok_r(NULL, " ", &save)) {
			if (col + 1 + strlen(w) > 88) {
				fputs("\n *", out);
				col = 2;
			}
			col += fprintf(out, " %s", w);
		}
		fputs(". */\n", out);
	}
	fprintf(out,
		"#ifndef ORH_SECCOMP_FILTER_H\n"
		"#define ORH_SECCOMP_FILTER_H\n\n"
		"#include <linux/filter.h>\n\n"
		"#define ORH_SECCOMP_FILTER_ARCH      0x%08xU\n"
		"#define ORH_SECCOMP_FILTER_ARCH_NAME \"%s\"\n"
		"#define ORH_SECCOMP_FILTER_SANITIZER %d\n\n"
		"static const struct sock_filter orh_seccomp_filter[%zu] = {\n",
		g->arch, g->arch_name, sanitizer ? 1 : 0, n);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "\t{ 0x%04x, %3u, %3u, 0x%08x },\n", insns[i].code, insns[i].jt,
			insns[i].jf, insns[i].k);
	fputs("};\n\n#endif\n", out);
}

int main(int argc, char **argv)
{
	struct gen g = { 0 };
	struct sock_filter *insns;
	bool sanitizer = false;
	char tmp[PATH_MAX];
	size_t n;
	FILE *out;
	int r;

	if (argc > 1 && strcmp(argv[1], "--sanitizer") == 0) {
		sanitizer = true;
		argc--;
		argv++;
	}
	if (argc != 4) {
		fputs("usage: seccomp-gen [--sanitizer] CPU_FAMILY ENDIAN OUTPUT\n", stderr);
		return 2;
	}

	g.arch_name = arch_name(argv[1], argv[2]);
	g.arch = seccomp_arch_resolve_name(g.arch_name);
	if (!g.arch)
		die("libseccomp %u.%u.%u has no architecture '%s' (meson cpu family '%s', %s "
		    "endian)",
		    seccomp_version()->major, seccomp_version()->minor, seccomp_version()->micro,
		    g.arch_name, argv[1], argv[2]);

	g.ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!g.ctx)
		die("seccomp_init failed");
	if (g.arch != seccomp_arch_native()) {
		/* in this order: one filter cannot hold both byte orders */
		r = seccomp_arch_remove(g.ctx, SCMP_ARCH_NATIVE);
		if (r == 0)
			r = seccomp_arch_add(g.ctx, g.arch);
		if (r < 0)
			die("making the filter for %s: %s", g.arch_name, strerror(-r));
	}
	/* a binary tree of system call numbers rather than a linear list: fewer
	 * instructions run per call, and the kernel builds its action cache (one run of
	 * the filter per system call number) several times faster at load */
	r = seccomp_attr_set(g.ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		die("seccomp_attr_set(SCMP_FLTATR_CTL_OPTIMIZE, 2): %s", strerror(-r));

	for (size_t i = 0; i < ARRAY_SIZE(base_names); i++)
		allow(&g, base_names[i]);
	for (size_t i = 0; sanitizer && i < ARRAY_SIZE(sanitizer_names); i++)
		allow(&g, sanitizer_names[i]);

	insns = export_bpf(g.ctx, &n);
	seccomp_release(g.ctx);
	to_host_order(insns, n, argv[2]);

	/* a complete file or none: write aside, then rename */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", argv[3]) >= sizeof(tmp))
		die("output path too long: %s", argv[3]);
	out = fopen(tmp, "w");
	if (!out)
		die("creating %s: %s", tmp, strerror(errno));
	write_header(out, &g, sanitizer, insns, n);
	if (ferror(out) | fclose(out)) {
		r = errno;
		unlink(tmp);
		die("writing %s: %s", tmp, strerror(r));
	}
	if (rename(tmp, argv[3]) < 0) {
		r = errno;
		unlink(tmp);
		die("renaming %s to %s: %s", tmp, argv[3], strerror(r));
	}
	free(insns);
	return 0;
}
