/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim's pass-through commands, executed before the C library starts
 * (orh/cmd/shimfast.h says why and when). Built apart from the rest (src/meson.build): no
 * stack protector (its canary lives in thread storage the library has not set up yet), no
 * sanitizer, no call the compiler could turn a loop into. Nothing here calls the C
 * library; the system calls are made directly. Nothing here needs relocating (in a static
 * PIE the library's start applies the relocations, after this ran): lists of names are
 * strings, each name ended by a NUL, not tables of pointers, and the object refers to no
 * symbol but the library's _start (tests/shim-fast.sh checks both). The large buffers are
 * static, so that the stack this needs stays small.
 */
#include <fcntl.h>
#include <stdint.h>

#include "orh-config.h"
#include "orh/node/config.h"
#include "orh/decide/oci.h"
#include "orh/apply/record.h"
#include "orh/cmd/shimfast.h"

#define SHIM_NAME "oci-rdma-runtime"
#define CACHE_MAGIC "oci-rdma-runtime cache 2\n"

/* Global options of runc and crun that take a value, each ended by a NUL, an empty name
 * after the last. */
static const char global_with_value[] =
	"root\0log\0log-format\0criu\0rootless\0cgroup-manager\0log-level\0";

/* The annotations of a pod's sandbox, the same way (include/orh/decide/oci.h). */
static const char sandbox_keys[] = ORH_SANDBOX_KEYS_TEXT;

static size_t s_len(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

static bool s_eq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static bool s_prefix(const char *s, const char *prefix)
{
	while (*prefix && *s == *prefix)
		s++, prefix++;
	return !*prefix;
}

static bool name_is(const char *name, size_t len, const char *want)
{
	size_t i = 0;

	for (; i < len && want[i] && name[i] == want[i]; i++)
		;
	return i == len && !want[i];
}

/* An option's name without its one or two dashes, and its length up to an '='. */
static const char *flag_name(const char *arg, size_t *len)
{
	const char *name = arg + (arg[1] == '-' ? 2 : 1);

	for (*len = 0; name[*len] && name[*len] != '='; (*len)++)
		;
	return name;
}

bool orh_shim_global_takes_value(const char *name, size_t len)
{
	for (const char *k = global_with_value; *k; k += s_len(k) + 1)
		if (name_is(name, len, k))
			return true;
	return false;
}

int orh_shim_command(int argc, char *const *argv)
{
	int i = 1;

	for (; i < argc; i++) {
		const char *arg = argv[i], *name;
		size_t len;

		if (arg[0] != '-' || arg[1] == '\0')
			break;
		if (s_eq(arg, "--")) {
			i++;
			break;
		}
		name = flag_name(arg, &len);
		if (orh_shim_global_takes_value(name, len) && name[len] != '=' && i + 1 < argc)
			i++;
	}
	return i < argc ? i : 0;
}

bool orh_shim_passes_through(const char *command)
{
	return !s_eq(command, "create") && !s_eq(command, "run") && !s_eq(command, "delete");
}

const char *orh_shim_bundle(int argc, char *const *argv, int cmd)
{
	const char *bundle = ".";

	for (int i = cmd + 1; i < argc; i++) {
		const char *arg = argv[i], *name, *val = NULL;
		size_t len;

		if (s_eq(arg, "--"))
			break;
		if (arg[0] != '-' || arg[1] == '\0')
			continue;
		name = flag_name(arg, &len);
		if (!name_is(name, len, "bundle") && !name_is(name, len, "b"))
			continue;
		if (name[len] == '=')
			val = name + len + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		if (val && *val)
			bundle = val;
	}
	return bundle;
}

/* ---- is a config.json a pod's sandbox? A scanner that answers yes only when sure ---- */

struct scan {
	const char *p, *end;
};

static void ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static bool take(struct scan *s, char c)
{
	ws(s);
	if (s->p >= s->end || *s->p != c)
		return false;
	s->p++;
	return true;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string: its body between the quotes in [*b, *e), *esc when it holds an escape. */
static bool str(struct scan *s, const char **b, const char **e, bool *esc)
{
	ws(s);
	if (s->p >= s->end || *s->p != '"')
		return false;
	*b = ++s->p;
	*esc = false;
	while (s->p < s->end) {
		unsigned char c = (unsigned char)*s->p;

		if (c == '"') {
			*e = s->p++;
			return true;
		}
		if (c < 0x20)
			return false;
		if (c == '\\') {
			*esc = true;
			if (++s->p >= s->end)
				return false;
			c = (unsigned char)*s->p;
			if (c == 'u') {
				for (int k = 1; k <= 4; k++)
					if (s->p + k >= s->end || !is_hex(s->p[k]))
						return false;
				s->p += 4;
			} else if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' &&
				   c != 'n' && c != 'r' && c != 't') {
				return false;
			}
		}
		s->p++;
	}
	return false;
}

static bool body_is(const char *b, const char *e, const char *want)
{
	for (; b < e && *want && *b == *want; b++, want++)
		;
	return b == e && !*want;
}

static bool literal(struct scan *s, const char *word)
{
	for (; *word; word++, s->p++)
		if (s->p >= s->end || *s->p != *word)
			return false;
	return true;
}

/* A string, true, false, null or a number, skipped. */
static bool scalar(struct scan *s)
{
	const char *b, *e;
	bool esc;

	switch (*s->p) {
	case '"':
		return str(s, &b, &e, &esc);
	case 't':
		return literal(s, "true");
	case 'f':
		return literal(s, "false");
	case 'n':
		return literal(s, "null");
	default:
		b = s->p;
		while (s->p < s->end && ((*s->p >= '0' && *s->p <= '9') || *s->p == '-' ||
					 *s->p == '+' || *s->p == '.' || *s->p == 'e' || *s->p == 'E'))
			s->p++;
		return s->p > b;
	}
}

#define SCAN_DEPTH 256

/* Any value, skipped, without recursion: the arrays and objects open around the scanner
 * are bits (1 an object), at most SCAN_DEPTH of them. */
static bool value(struct scan *s)
{
	uint64_t object[SCAN_DEPTH / 64] = { 0 };
	const char *b, *e;
	unsigned depth = 0;
	bool esc;

	for (;;) {
		ws(s);
		if (s->p >= s->end)
			return false;
		if (*s->p == '{' || *s->p == '[') {
			bool obj = *s->p == '{';

			if (depth == SCAN_DEPTH)
				return false;
			s->p++;
			if (!take(s, obj ? '}' : ']')) {
				if (obj)
					object[depth / 64] |= (uint64_t)1 << (depth % 64);
				else
					object[depth / 64] &= ~((uint64_t)1 << (depth % 64));
				depth++;
				if (obj && (!str(s, &b, &e, &esc) || !take(s, ':')))
					return false;
				continue; /* its first member's value */
			}
		} else if (!scalar(s)) {
			return false;
		}
		/* a value ended: a comma and the next, or the end of what holds it */
		for (;;) {
			bool obj;

			if (!depth)
				return true;
			obj = object[(depth - 1) / 64] >> ((depth - 1) % 64) & 1;
			if (take(s, ',')) {
				if (obj && (!str(s, &b, &e, &esc) || !take(s, ':')))
					return false;
				break;
			}
			if (!take(s, obj ? '}' : ']'))
				return false;
			depth--;
		}
	}
}

/* The annotations object: 1 a sandbox's, 0 not, -1 unsure (a key with an escape, one of
 * the keys twice, malformed). */
static int annotations(struct scan *s)
{
	bool seen[ORH_SANDBOX_KEYS] = { false };
	int found = 0;

	if (!take(s, '{'))
		return -1;
	if (take(s, '}'))
		return 0;
	do {
		const char *b, *e, *vb, *ve, *key = sandbox_keys;
		bool esc, vesc, known = false;

		if (!str(s, &b, &e, &esc) || esc || !take(s, ':'))
			return -1;
		for (size_t k = 0; k < ORH_SANDBOX_KEYS && *key; k++, key += s_len(key) + 1) {
			if (!body_is(b, e, key))
				continue;
			if (seen[k])
				return -1;
			seen[k] = known = true;
			ws(s);
			if (s->p < s->end && *s->p == '"') {
				if (!str(s, &vb, &ve, &vesc))
					return -1;
				found |= !vesc && body_is(vb, ve, "sandbox");
			} else if (!value(s)) {
				return -1;
			}
		}
		if (!known && !value(s))
			return -1;
	} while (take(s, ','));
	return take(s, '}') ? found : -1;
}

bool orh_shim_spec_sandbox(const char *json, size_t len)
{
	struct scan s = { json, json + len };
	int sandbox = 0;
	bool seen = false;

	if (!take(&s, '{'))
		return false;
	if (take(&s, '}'))
		return false;
	do {
		const char *b, *e;
		bool esc;

		if (!str(&s, &b, &e, &esc) || esc || !take(&s, ':'))
			return false;
		ws(&s);
		if (body_is(b, e, "annotations") && s.p < s.end && *s.p == '{') {
			if (seen)
				return false;
			seen = true;
			sandbox = annotations(&s);
			if (sandbox < 0)
				return false;
		} else if (body_is(b, e, "annotations") && seen) {
			return false;
		} else if (!value(&s)) {
			return false;
		}
	} while (take(&s, ','));
	if (!take(&s, '}'))
		return false;
	ws(&s);
	return s.p == s.end && sandbox == 1;
}

const char *orh_shim_config(char *const *envp)
{
	static const char var[] = "OCI_RDMA_HOOK_CONFIG=";

	for (; *envp; envp++)
		if (s_prefix(*envp, var))
			return *envp + sizeof(var) - 1;
	return ORH_DEFAULT_CONFIG;
}

void orh_shim_cache_name(const char *config_path, char *out)
{
	static const char hex[] = "0123456789abcdef";
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	size_t n = 0;

	for (const char *p = config_path; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	for (const char *p = ORH_SHIM_CACHE_PREFIX; *p; p++)
		out[n++] = *p;
	for (int shift = 60; shift >= 0; shift -= 4)
		out[n++] = hex[(h >> shift) & 0xf];
	out[n] = '\0';
}

struct out {
	char *p;
	size_t n, size;
	bool full;
};

static void put(struct out *o, const char *s)
{
	for (; *s; s++) {
		if (o->n + 1 >= o->size) {
			o->full = true;
			return;
		}
		o->p[o->n++] = *s;
	}
}

static void put_u64(struct out *o, uint64_t v, char end)
{
	char digits[24], *d = digits + sizeof(digits) - 1;

	*d = '\0';
	*--d = end;
	do {
		*--d = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(o, d);
}

/* A stat line: TAG and the identity and times the cache keys on, or "-" where the file is
 * not there (st NULL). */
static void put_stat(struct out *o, char tag, const struct stat *st)
{
	char t[3] = { tag, ' ', '\0' };

	if (!st) {
		put(o, "- ");
		return;
	}
	put(o, t);
	put_u64(o, (uint64_t)st->st_dev, ' ');
	put_u64(o, (uint64_t)st->st_ino, ' ');
	put_u64(o, (uint64_t)st->st_size, ' ');
	put_u64(o, (uint64_t)st->st_mtim.tv_sec, ' ');
	put_u64(o, (uint64_t)st->st_mtim.tv_nsec, ' ');
	put_u64(o, (uint64_t)st->st_ctim.tv_sec, ' ');
	put_u64(o, (uint64_t)st->st_ctim.tv_nsec, ' ');
}

static bool has_newline(const char *s)
{
	for (; *s; s++)
		if (*s == '\n')
			return true;
	return false;
}

size_t orh_shim_cache_text(const struct orh_shim_cache *c, char *out, size_t size)
{
	struct out o = { .p = out, .size = size };

	if (!size || c->config_path[0] != '/' || has_newline(c->config_path) ||
	    c->runtime[0] != '/' || has_newline(c->runtime) || c->n_paths > ORH_SHIM_CACHE_PATHS)
		return 0;
	put(&o, CACHE_MAGIC);
	put_stat(&o, 'C', c->config_st);
	put(&o, c->config_path);
	put(&o, "\n");
	for (size_t i = 0; i < c->n_paths; i++) {
		const struct orh_shim_cache_path *p = &c->paths[i];

		if (p->path[0] != '/' || has_newline(p->path) || (p->kind != 'D' && p->kind != 'F'))
			return 0;
		put_stat(&o, p->kind, p->st);
		put(&o, p->path);
		put(&o, "\n");
	}
	put(&o, "R ");
	put(&o, c->runtime);
	put(&o, "\n");
	if (o.full)
		return 0;
	out[o.n] = '\0';
	return o.n;
}

/* Does line (up to its end) say what path's stat says now? */
static bool line_holds(const char *line, const char *end, char tag, const char *path,
		       int (*stat_fn)(const char *, struct stat *, void *), void *arg)
{
	char want[2 + 7 * 21 + 1]; /* the tag, seven numbers of 64 bits, each with a space */
	struct out o = { .p = want, .size = sizeof(want) };
	struct stat st;
	size_t i = 0;

	put_stat(&o, tag, stat_fn(path, &st, arg) == 0 ? &st : NULL);
	if (o.full || (size_t)(end - line) < o.n)
		return false;
	for (; i < o.n; i++)
		if (line[i] != want[i])
			return false;
	return body_is(line + i, end, path);
}

/* The path a stat line names: what follows its fields. */
static char *line_path(char *line, char *end)
{
	int fields = line[0] == '-' ? 1 : 8;
	char *p = line;

	for (int f = 0; f < fields; f++) {
		while (p < end && *p != ' ')
			p++;
		if (p >= end)
			return NULL;
		p++;
	}
	return p < end && *p == '/' ? p : NULL;
}

const char *orh_shim_cache_match(char *text, size_t len, const char *config_path,
				 int (*stat_fn)(const char *, struct stat *, void *), void *arg)
{
	size_t m = s_len(CACHE_MAGIC);
	char *line, *end, *path;
	unsigned paths = 0;

	if (len <= m || text[len - 1] != '\n' || !s_prefix(text, CACHE_MAGIC))
		return NULL;
	for (size_t i = 0; i < len; i++)
		if (text[i] == '\0')
			return NULL;
	/* the config: this path, and its stat as the cache has it */
	line = text + m;
	for (end = line; *end != '\n'; end++)
		;
	path = line_path(line, end);
	if (!path || (line[0] != 'C' && line[0] != '-'))
		return NULL;
	*end = '\0';
	if (!s_eq(path, config_path) || !line_holds(line, end, 'C', config_path, stat_fn, arg))
		return NULL;
	/* the paths the lookup of the runtime depended on, each as it is now; then it */
	for (line = end + 1; line < text + len; line = end + 1) {
		for (end = line; *end != '\n'; end++)
			;
		*end = '\0';
		if (line[0] == 'R' && line[1] == ' ' && line[2] == '/' && end + 1 == text + len)
			return line + 2;
		path = line_path(line, end);
		if (++paths > ORH_SHIM_CACHE_PATHS || !path ||
		    (line[0] != 'D' && line[0] != 'F' && line[0] != '-') ||
		    !line_holds(line, end, line[0] == '-' ? 'D' : line[0], path, stat_fn, arg))
			return NULL;
	}
	return NULL;
}

const char *orh_shim_cache_config(char *text, size_t len)
{
	size_t m = s_len(CACHE_MAGIC);
	char *end, *path;

	if (len <= m || !s_prefix(text, CACHE_MAGIC))
		return NULL;
	for (end = text + m; end < text + len && *end != '\n'; end++)
		;
	if (end >= text + len)
		return NULL;
	path = line_path(text + m, end);
	if (!path)
		return NULL;
	*end = '\0';
	return path;
}

#if defined(__x86_64__)
#include <sys/syscall.h>

static long sys3(long nr, long a, long b, long c)
{
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}

static long sys4(long nr, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return r;
}

static int raw_stat(const char *path, struct stat *st, void *arg)
{
	(void)arg;
	return sys4(SYS_newfstatat, AT_FDCWD, (long)path, (long)st, 0) < 0 ? -1 : 0;
}

/* The fast path's buffers: static, not on the stack (it runs before anything else in the
 * process, once). */
static char cache_text[ORH_SHIM_CACHE_MAX];
static char spec_path[4096];
static char spec_text[65536];

/* The runtime the cache names for this config, read into cache_text; NULL when there is
 * none. */
static const char *cached_runtime(const char *config_path)
{
	char path[sizeof(ORH_RUN_DIR) + 64];
	struct out o = { .p = path, .size = sizeof(path) };
	char name[40];
	struct stat st;
	size_t n = 0, size = sizeof(cache_text);
	long fd, r;

	orh_shim_cache_name(config_path, name);
	put(&o, ORH_RUN_DIR "/");
	put(&o, name);
	if (o.full)
		return NULL;
	path[o.n] = '\0';
	fd = sys4(SYS_openat, AT_FDCWD, (long)path,
		  O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	/* root's, and no one else may write it */
	r = sys3(SYS_fstat, fd, (long)&st, 0);
	if (r == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & 022)) {
		while (n + 1 < size &&
		       (r = sys3(SYS_read, fd, (long)(cache_text + n), (long)(size - 1 - n))) > 0)
			n += (size_t)r;
	} else {
		r = -1;
	}
	sys3(SYS_close, fd, 0, 0);
	if (r < 0 || n + 1 >= size) /* an error, or more than a cache holds */
		return NULL;
	cache_text[n] = '\0';
	return orh_shim_cache_match(cache_text, n, config_path, raw_stat, NULL);
}

/* Is the bundle's config.json a pod's sandbox? A regular file read whole (up to 64 KiB,
 * else no); opened without waiting (a FIFO there is not a config, and no one writes it). */
static bool sandbox_bundle(const char *bundle)
{
	static const char file[] = "/config.json";
	size_t n = 0, blen = s_len(bundle);
	struct stat st;
	long fd, r = 0;

	if (blen + sizeof(file) > sizeof(spec_path))
		return false;
	for (size_t i = 0; i < blen; i++)
		spec_path[i] = bundle[i];
	for (size_t i = 0; i < sizeof(file); i++)
		spec_path[blen + i] = file[i];
	fd = sys4(SYS_openat, AT_FDCWD, (long)spec_path,
		  O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (sys3(SYS_fstat, fd, (long)&st, 0) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size < (long)sizeof(spec_text))
		while (n < sizeof(spec_text) &&
		       (r = sys3(SYS_read, fd, (long)(spec_text + n),
				 (long)(sizeof(spec_text) - n))) > 0)
			n += (size_t)r;
	else
		r = -1;
	sys3(SYS_close, fd, 0, 0);
	return r == 0 && n < sizeof(spec_text) && orh_shim_spec_sandbox(spec_text, n);
}

/* Is the runtime this shim: the file /proc/self/exe names (a link to the shim put where
 * the runtime was)? Yes also when either cannot be looked at: the ordinary path decides. */
static bool runtime_is_self(const char *runtime)
{
	struct stat rt, self;

	if (raw_stat(runtime, &rt, NULL) < 0 || raw_stat("/proc/self/exe", &self, NULL) < 0)
		return true;
	return rt.st_dev == self.st_dev && rt.st_ino == self.st_ino;
}

/* Called by orh_entry with the process's first stack (argc, argv, NULL, envp, NULL):
 * executes the runtime for a command that passes through, or the create of a pod's
 * sandbox, where the cache names it and it is not the shim itself; returns in every other
 * case, and the C library starts as usual. */
void orh_shim_fast(long *sp);
void orh_shim_fast(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1), **envp = argv + argc + 1;
	const char *config = orh_shim_config(envp), *base, *runtime;
	bool passes;
	char *argv0;
	int cmd;

	if (argc < 2 || !argv[0])
		return;
	base = argv[0];
	for (const char *p = argv[0]; *p; p++)
		if (*p == '/')
			base = p + 1;
	if (!s_eq(base, SHIM_NAME) || s_prefix(argv[1], ORH_RUNTIME_ARG))
		return;
	cmd = orh_shim_command(argc, argv);
	if (!cmd)
		return;
	passes = orh_shim_passes_through(argv[cmd]);
	if (!passes && !s_eq(argv[cmd], "create") && !s_eq(argv[cmd], "run"))
		return;
	runtime = *config ? cached_runtime(config) : NULL;
	/* a pod's sandbox is never served: its create passes through as well */
	if (!runtime || (!passes && !sandbox_bundle(orh_shim_bundle(argc, argv, cmd))))
		return;
	/* never this shim again: it would execute itself for ever, or run as another
	 * command; the ordinary path refuses it, or looks further */
	if (runtime_is_self(runtime))
		return;
	argv0 = argv[0];
	argv[0] = (char *)runtime;
	sys3(SYS_execve, (long)runtime, (long)argv, (long)envp);
	argv[0] = argv0; /* it did not start: the ordinary path says why */
}

/* The entry point (the linker's -e): the first stack to orh_shim_fast(), then, where it
 * returns, the C library's own entry with the stack and %rdx (the dynamic linker's
 * finalizer, for a dynamic executable) as the kernel and the loader left them. */
__asm__(".text\n"
	".globl orh_entry\n"
	".type orh_entry, @function\n"
	"orh_entry:\n"
	"	mov %rsp, %rbx\n"
	"	mov %rdx, %r12\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call orh_shim_fast\n"
	"	mov %rbx, %rsp\n"
	"	mov %r12, %rdx\n"
	"	xor %ebp, %ebp\n"
	"	jmp _start\n"
	".size orh_entry, .-orh_entry\n");
#endif
