/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU discovery: the NVIDIA GPUs of the node, read through the sysroot in the kernel's
 * layout (<sysroot>/sys/bus/pci/devices/<bdf>, links into sys/devices/pci.../...) and the
 * driver's (<sysroot>/proc/driver/nvidia/gpus/<bdf>/information), and what a container's
 * NVIDIA_VISIBLE_DEVICES names among them.
 *
 * The index of a GPU is its position in PCI bus order among the GPUs the nvidia driver
 * holds: NVML enumerates them so, and nvidia-smi and libnvidia-container (which resolves
 * NVIDIA_VISIBLE_DEVICES) take their indexes from NVML. The driver's minor numbers follow
 * its probe order instead, which need not be the same: a GPU's /dev/nvidiaN is its minor,
 * not its index.
 *
 * Every value is read with a size limit; a missing or garbled file skips that GPU (or
 * that field) with a warning naming the file, never the rest of the node.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sysfs.h"
#include "orh/node/gpu.h"

#define NVIDIA_VENDOR 0x10de
#define VISIBLE_MAX 4096      /* NVIDIA_VISIBLE_DEVICES: 256 UUIDs fit */
#define NV_MINOR_MAX 253      /* 254 is nvidia-modeset, 255 nvidiactl */

static void __attribute__((format(printf, 2, 0))) vwarn(struct orh_strv *sv, const char *fmt,
							   va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0 || !s)
		return;
	/* quoted values may hold anything: one line per warning */
	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	orh_strv_push(sv, s);
}

static void __attribute__((format(printf, 2, 3))) warn(struct orh_strv *sv, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(sv, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- PCI addresses */

struct bdf {
	unsigned domain, bus, dev, fn;
};

/* "0000:45:00.0" as the kernel names a PCI function (dev_name(): %04x:%02x:%02x.%d), with
 * a domain of 4 to 8 hex digits (VMD domains are 10000 and up); lower case only. */
static bool parse_bdf(const char *s, struct bdf *b)
{
	unsigned long long v[4] = { 0 };
	static const unsigned char widths[4] = { 0, 2, 2, 1 }; /* 0: 4..8 digits */
	static const char seps[4] = { ':', ':', '.', '\0' };

	for (int f = 0; f < 4; f++) {
		size_t n = 0;

		for (; isxdigit((unsigned char)s[n]) && !isupper((unsigned char)s[n]); n++)
			v[f] = v[f] * 16 + (unsigned)(isdigit((unsigned char)s[n]) ? s[n] - '0'
									: s[n] - 'a' + 10);
		if (widths[f] ? n != widths[f] : n < 4 || n > 8)
			return false;
		if (s[n] != seps[f])
			return false;
		s += n + (seps[f] ? 1 : 0);
	}
	if (v[2] > 0x1f || v[3] > 7)
		return false;
	if (b)
		*b = (struct bdf){ (unsigned)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3] };
	return true;
}

static int cmp_bdf(const struct bdf *x, const struct bdf *y)
{
	const unsigned a[4] = { x->domain, x->bus, x->dev, x->fn };
	const unsigned b[4] = { y->domain, y->bus, y->dev, y->fn };

	for (int i = 0; i < 4; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

static int cmp_gpus(const void *a, const void *b)
{
	struct bdf x, y;

	parse_bdf(((const struct orh_gpu *)a)->bdf, &x);
	parse_bdf(((const struct orh_gpu *)b)->bdf, &y);
	return cmp_bdf(&x, &y);
}

/* ---------------------------------------------------------------- information file */

/* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as NVML prints a GPU's UUID */
static bool valid_uuid(const char *s, const char *prefix)
{
	static const char form[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
	size_t p = strlen(prefix);

	if (strncasecmp(s, prefix, p) || strlen(s + p) != sizeof(form) - 1)
		return false;
	for (size_t i = 0; form[i]; i++)
		if (form[i] == '-' ? s[p + i] != '-' : !isxdigit((unsigned char)s[p + i]))
			return false;
	return true;
}

static char *trim_blanks(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

int orh_parse_gpu_info(const char *text, struct orh_gpu_info *out, char *why, size_t why_size)
{
	_cleanup_free_ char *copy = orh_xstrdup(text);
	bool seen_uuid = false, seen_bus = false, seen_minor = false;
	char *line;
	int bad = 0, lineno = 0;

	memset(out, 0, sizeof(*out));
	out->minor = -1;
	if (why_size)
		why[0] = '\0';
#define BAD(...)                                                                      \
	do {                                                                           \
		if (bad++ == 0 && why_size)                                            \
			snprintf(why, why_size, __VA_ARGS__);                          \
	} while (0)
	/* strsep, not strtok: line numbers count empty lines too */
	for (char *rest = copy; (line = strsep(&rest, "\n"));) {
		char *colon, *key, *val;

		lineno++;
		if (!*trim_blanks(line))
			continue;
		colon = strchr(line, ':');
		if (!colon) {
			BAD("line %d: no 'key: value' in '%.48s'", lineno, line);
			continue;
		}
		*colon = '\0';
		key = trim_blanks(line);
		val = trim_blanks(colon + 1);
		if (!strcmp(key, "GPU UUID")) {
			if (seen_uuid)
				BAD("line %d: 'GPU UUID' given twice", lineno);
			else if (!valid_uuid(val, "GPU-"))
				BAD("line %d: 'GPU UUID' is not a GPU UUID: '%.48s'", lineno, val);
			else
				strcpy(out->uuid, val);
			seen_uuid = true;
		} else if (!strcmp(key, "Bus Location")) {
			if (seen_bus)
				BAD("line %d: 'Bus Location' given twice", lineno);
			else if (!parse_bdf(val, NULL) || strlen(val) >= sizeof(out->bus))
				BAD("line %d: 'Bus Location' is not a PCI address: '%.48s'", lineno,
				    val);
			else
				strcpy(out->bus, val);
			seen_bus = true;
		} else if (!strcmp(key, "Device Minor")) {
			unsigned long long m;

			if (seen_minor)
				BAD("line %d: 'Device Minor' given twice", lineno);
			else if (orh_parse_uint(val, NV_MINOR_MAX, &m) < 0)
				BAD("line %d: 'Device Minor' is not a number up to %d: '%.48s'",
				    lineno, NV_MINOR_MAX, val);
			else
				out->minor = (int)m;
			seen_minor = true;
		} else if (!strcmp(key, "Model")) {
			orh_strlcpy(out->model, val, sizeof(out->model));
			for (char *c = out->model; *c; c++)
				if ((unsigned char)*c < 0x20 || *c == 0x7f)
					*c = '?';
		} else if (!strcmp(key, "GPU Excluded")) {
			if (!strcmp(val, "Yes"))
				out->excluded = true;
			else if (strcmp(val, "No"))
				BAD("line %d: 'GPU Excluded' is neither Yes nor No: '%.48s'", lineno,
				    val);
		}
	}
#undef BAD
	return bad;
}

/* ---------------------------------------------------------------- discovery */

struct gscan {
	const char *sysroot;
	const char *rootname;      /* sysroot, or "" for "/": the prefix of warnings' paths */
	int root;
	struct orh_gpus *out;
	struct orh_readbatch batch;
	size_t not_held;           /* GPUs in sysfs without the driver's entry */
	char not_held_first[16];
};

static ssize_t gread(struct gscan *gs, int dirfd, const char *path, char *buf, size_t max)
{
	gs->out->file_reads++;
	return orh_read_line_batch(&gs->batch, dirfd, path, buf, max);
}

/* vendor and class of a PCI function; false (and a warning when unreadable) otherwise */
static bool read_ids(struct gscan *gs, int devfd, const char *where, unsigned *vendor,
		     unsigned *cls)
{
	char buf[VALUE_MAX];
	ssize_t r = gread(gs, devfd, "vendor", buf, sizeof(buf));

	if (r < 0 || orh_parse_hex_id(buf, vendor) < 0) {
		warn(&gs->out->warnings, "skipping '%s/vendor': %s", where,
		     r < 0 ? disc_err_text(r) : "not a hex id");
		return false;
	}
	if (*vendor != NVIDIA_VENDOR)
		return true;
	r = gread(gs, devfd, "class", buf, sizeof(buf));
	if (r < 0 || orh_parse_hex_id(buf, cls) < 0) {
		warn(&gs->out->warnings, "skipping '%s/class': %s", where,
		     r < 0 ? disc_err_text(r) : "not a hex id");
		return false;
	}
	return true;
}

static bool is_gpu_class(unsigned cls)
{
	return (cls >> 8) == 0x0300 || (cls >> 8) == 0x0302;
}

/* The driver's information file of one GPU into g; false when the GPU is not counted. */
static bool read_info(struct gscan *gs, struct orh_gpu *g, bool must)
{
	char path[96], where[512], buf[ORH_GPU_INFO_MAX_BYTES], why[160];
	struct orh_gpu_info info;
	ssize_t r;
	int bad;

	snprintf(path, sizeof(path), "proc/driver/nvidia/gpus/%s/information", g->bdf);
	snprintf(where, sizeof(where), "%s/%s", gs->rootname, path);
	gs->out->file_reads++;
	r = orh_read_file_at(gs->root, path, buf, sizeof(buf));
	if (r < 0) {
		if (must || r != -ENOENT)
			warn(&gs->out->warnings, "skipping GPU %s: '%s': %s", g->bdf, where,
			     r == -EFBIG ? "larger than 4 KiB" : strerror((int)-r));
		return false;
	}
	if (strlen(buf) != (size_t)r) {
		warn(&gs->out->warnings, "skipping GPU %s: '%s': holds a NUL byte", g->bdf, where);
		return false;
	}
	bad = orh_parse_gpu_info(buf, &info, why, sizeof(why));
	if (bad)
		warn(&gs->out->warnings, "'%s': %s%s", where, why,
		     bad > 1 ? " (and more bad lines; the good ones are taken)" : "");
	if (info.excluded) {
		warn(&gs->out->warnings, "GPU %s: '%s' says 'GPU Excluded: Yes': no index", g->bdf,
		     where);
		return false;
	}
	if (info.bus[0] && strcmp(info.bus, g->bdf))
		warn(&gs->out->warnings, "'%s': 'Bus Location' %s is not %s", where, info.bus,
		     g->bdf);
	if (!info.uuid[0])
		warn(&gs->out->warnings, "GPU %s: '%s' gives no GPU UUID", g->bdf, where);
	if (info.minor < 0)
		warn(&gs->out->warnings, "GPU %s: '%s' gives no device minor", g->bdf, where);
	strcpy(g->uuid, info.uuid);
	strcpy(g->model, info.model);
	g->minor = info.minor;
	return true;
}

/* One PCI function that may be a GPU. from_driver: the driver's proc entry named it. */
static void scan_function(struct gscan *gs, const char *bdf, bool from_driver)
{
	char rel[96], where[512], buf[VALUE_MAX];
	_cleanup_close_ int devfd = -1;
	struct orh_gpu g = { .minor = -1, .numa_node = -1 };
	unsigned vendor = 0, cls = 0;
	int r;

	snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s", bdf);
	snprintf(where, sizeof(where), "%s/%s", gs->rootname, rel);
	devfd = openat(gs->root, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (devfd < 0) {
		warn(&gs->out->warnings, "skipping '%s': %s", where, strerror(errno));
		return;
	}
	if (!read_ids(gs, devfd, where, &vendor, &cls))
		return;
	if (vendor != NVIDIA_VENDOR || !is_gpu_class(cls)) {
		if (from_driver && vendor != NVIDIA_VENDOR)
			warn(&gs->out->warnings, "skipping '%s': the nvidia driver lists it, but "
			     "it is not an NVIDIA GPU (vendor 0x%04x)", where, vendor);
		else if (from_driver)
			warn(&gs->out->warnings, "skipping '%s': the nvidia driver lists it, but "
			     "it is not an NVIDIA GPU (class 0x%06x)", where, cls);
		return;
	}
	strcpy(g.bdf, bdf);
	g.pci_class = cls;
	if (!read_info(gs, &g, from_driver)) {
		struct bdf x, first;

		/* the first in bus order names them all */
		if (!from_driver && (gs->not_held++ == 0 ||
				     (parse_bdf(bdf, &x) && parse_bdf(gs->not_held_first, &first) &&
				      cmp_bdf(&x, &first) < 0)))
			strcpy(gs->not_held_first, bdf);
		return;
	}
	if (gread(gs, devfd, "device", buf, sizeof(buf)) >= 0 &&
	    orh_parse_hex_id(buf, &g.device_id) < 0)
		warn(&gs->out->warnings, "ignoring '%s/device': garbled value '%.32s'", where, buf);
	if (gread(gs, devfd, "numa_node", buf, sizeof(buf)) > 0 &&
	    orh_parse_numa_node(buf, &g.numa_node) < 0)
		warn(&gs->out->warnings, "ignoring '%s/numa_node': garbled value '%.32s'", where,
		     buf);
	r = disc_sysfs_path(gs->sysroot, rel, g.pci_path, sizeof(g.pci_path));
	if (r < 0)
		warn(&gs->out->warnings, "ignoring the PCI path of '%s': %s", where,
		     r == -EXDEV ? "it leads outside sys/" : strerror(-r));
	if (gs->out->n >= ORH_GPU_MAX) {
		warn(&gs->out->warnings, "skipping '%s': more than %d GPUs", where, ORH_GPU_MAX);
		return;
	}
	gs->out->v = orh_xrealloc(gs->out->v, (gs->out->n + 1) * sizeof(*gs->out->v));
	gs->out->v[gs->out->n++] = g;
}

/* Why GPUs in sysfs have no index: one line, not one per GPU. */
static void report_not_held(struct gscan *gs, bool have_driver)
{
	char first[600];

	if (!gs->not_held)
		return;
	snprintf(first, sizeof(first), "%s/sys/bus/pci/devices/%s", gs->rootname,
		 gs->not_held_first);
	if (!have_driver)
		warn(&gs->out->warnings,
		     "%zu NVIDIA GPU(s) in sysfs ('%s'%s) but no '%s/proc/driver/nvidia/gpus': "
		     "the nvidia driver holds none of them; no GPU has an index", gs->not_held,
		     first, gs->not_held > 1 ? ", ..." : "", gs->rootname);
	else
		warn(&gs->out->warnings,
		     "%zu NVIDIA GPU(s) in sysfs ('%s'%s) that the nvidia driver does not hold "
		     "(bound to another driver, or not probed): not counted in GPU indexes",
		     gs->not_held, first, gs->not_held > 1 ? ", ..." : "");
}

int orh_discover_gpus(const char *sysroot, enum orh_gpu_scan scan, struct orh_gpus *out,
		      struct orh_err *err)
{
	struct gscan gs = { .out = out, .root = -1 };
	struct orh_strv names = { 0 };
	bool have_driver;
	int r;

	memset(out, 0, sizeof(*out));
	if (!sysroot || !*sysroot)
		sysroot = "/";
	gs.sysroot = sysroot;
	gs.rootname = strcmp(sysroot, "/") ? sysroot : "";
	gs.root = open(sysroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (gs.root < 0)
		return orh_fail_errno(err, errno, "opening sysroot '%s'", sysroot);

	r = disc_list_dir(gs.root, "proc/driver/nvidia/gpus", &names);
	if (r < 0 && r != -ENOENT)
		warn(&out->warnings, "skipping '%s/proc/driver/nvidia/gpus': %s", gs.rootname,
		     strerror(-r));
	have_driver = r == 0;
	if (scan == ORH_GPU_SCAN_DRIVER) {
		for (size_t i = 0; i < names.n; i++) {
			if (!parse_bdf(names.v[i], NULL) || strlen(names.v[i]) >= 16)
				warn(&out->warnings,
				     "skipping '%s/proc/driver/nvidia/gpus/%s': not a PCI address",
				     gs.rootname, names.v[i]);
			else
				scan_function(&gs, names.v[i], true);
		}
	} else {
		struct orh_strv fns = { 0 };

		r = disc_list_dir(gs.root, "sys/bus/pci/devices", &fns);
		if (r < 0 && r != -ENOENT)
			warn(&out->warnings, "skipping '%s/sys/bus/pci/devices': %s", gs.rootname,
			     strerror(-r));
		for (size_t i = 0; i < fns.n; i++)
			if (parse_bdf(fns.v[i], NULL) && strlen(fns.v[i]) < 16)
				scan_function(&gs, fns.v[i], orh_strv_contains(&names, fns.v[i]));
		/* the driver's entries that sysfs has no GPU for */
		for (size_t i = 0; i < names.n; i++)
			if (!orh_strv_contains(&fns, names.v[i]))
				warn(&out->warnings,
				     "ignoring '%s/proc/driver/nvidia/gpus/%s': no such PCI function "
				     "in '%s/sys/bus/pci/devices'", gs.rootname, names.v[i],
				     gs.rootname);
		orh_strv_free(&fns);
		report_not_held(&gs, have_driver);
	}
	orh_strv_free(&names);
	orh_readbatch_flush(&gs.batch);
	close(gs.root);

	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), cmp_gpus);
	for (size_t i = 0; i < out->n; i++) {
		out->v[i].index = (unsigned)i;
		for (size_t j = 0; j < i; j++)
			if (out->v[i].minor >= 0 && out->v[i].minor == out->v[j].minor)
				warn(&out->warnings, "GPUs %s and %s both give device minor %d",
				     out->v[j].bdf, out->v[i].bdf, out->v[i].minor);
	}
	return 0;
}

void orh_gpudirect_parse_driver(const char *text, struct orh_gpudirect *g)
{
	char line[512];
	const char *km, *w;
	size_t n;

	g->driver = true;
	g->driver_open = false;
	g->driver_version[0] = '\0';
	n = strcspn(text, "\n");
	if (n >= sizeof(line))
		n = sizeof(line) - 1;
	memcpy(line, text, n);
	line[n] = '\0';
	g->driver_open = strstr(line, "Open Kernel Module") != NULL;
	km = strstr(line, "Kernel Module");
	/* the first word after it that is a version: "for x86_64" comes before it in the
	 * open module's line */
	for (w = km ? km + strlen("Kernel Module") : NULL; w && *w;) {
		size_t len;

		w += strspn(w, " \t");
		len = strcspn(w, " \t");
		if (len && len < sizeof(g->driver_version) && isdigit((unsigned char)*w) &&
		    strspn(w, "0123456789.") == len && memchr(w, '.', len)) {
			memcpy(g->driver_version, w, len);
			g->driver_version[len] = '\0';
			break;
		}
		w += len;
	}
}

void orh_gpudirect_read(const char *sysroot, struct orh_gpudirect *g)
{
	char path[PATH_MAX], text[1024];

	memset(g, 0, sizeof(*g));
	/* the files NCCL's ncclIbGdrSupport() looks for (net_ib.cc) */
	snprintf(path, sizeof(path), "%s/sys/kernel/mm/memory_peers/nv_mem/version", sysroot);
	g->nv_mem = access(path, F_OK) == 0;
	snprintf(path, sizeof(path), "%s/sys/kernel/mm/memory_peers/nv_mem_nc/version", sysroot);
	g->nv_mem_nc = access(path, F_OK) == 0;
	snprintf(path, sizeof(path), "%s/sys/module/nvidia_peermem/version", sysroot);
	g->peermem_module = access(path, F_OK) == 0;
	g->peermem = g->nv_mem || g->nv_mem_nc || g->peermem_module;
	snprintf(path, sizeof(path), "%s/proc/driver/nvidia/version", sysroot);
	if (orh_read_file_at(AT_FDCWD, path, text, sizeof(text)) >= 0)
		orh_gpudirect_parse_driver(text, g);
	snprintf(path, sizeof(path), "%s/proc/sys/kernel/osrelease", sysroot);
	if (orh_read_file_at(AT_FDCWD, path, g->kernel, sizeof(g->kernel)) < 0) {
		g->kernel[0] = '\0';
		return;
	}
	g->kernel[strcspn(g->kernel, "\n")] = '\0';
	g->read = true;
}

void orh_gpus_free(struct orh_gpus *g)
{
	free(g->v);
	orh_strv_free(&g->warnings);
	memset(g, 0, sizeof(*g));
}

const struct orh_gpu *orh_gpu_by_minor(const struct orh_gpus *g, unsigned minor)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->v[i].minor >= 0 && (unsigned)g->v[i].minor == minor)
			return &g->v[i];
	return NULL;
}

/* ---------------------------------------------------------------- NVIDIA_VISIBLE_DEVICES */

static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

static const struct orh_gpu *by_uuid(const struct orh_gpus *g, const char *uuid, size_t n)
{
	for (size_t i = 0; i < g->n; i++)
		if (strlen(g->v[i].uuid) == n && !strncasecmp(g->v[i].uuid, uuid, n))
			return &g->v[i];
	return NULL;
}

static const struct orh_gpu *by_index(const struct orh_gpus *g, const char *s, size_t n)
{
	unsigned long long v = 0;

	for (size_t i = 0; i < n; i++) {
		v = v * 10 + (unsigned)(s[i] - '0');
		if (v >= g->n)
			return NULL;
	}
	return v < g->n ? &g->v[v] : NULL;
}

/* One token: the GPU it names, or NULL with *why saying why not. */
static const struct orh_gpu *resolve_token(const struct orh_gpus *g, const char *tok,
					   const char **why)
{
	size_t n = strlen(tok);
	const char *colon = strchr(tok, ':');

	*why = "no such GPU on this node";
	if (!strncasecmp(tok, "GPU-", 4))
		return by_uuid(g, tok, n);
	if (!strncasecmp(tok, "MIG-GPU-", 8)) {
		/* before R470: MIG-GPU-<parent uuid>/<gi>/<ci> */
		const char *slash = strchr(tok, '/');

		return by_uuid(g, tok + 4, slash ? (size_t)(slash - tok - 4) : n - 4);
	}
	if (!strncasecmp(tok, "MIG-", 4)) {
		*why = "a MIG device UUID: which GPU holds it is known to NVML, not to the "
		       "node's files";
		return NULL;
	}
	if (all_digits(tok, n))
		return by_index(g, tok, n);
	if (colon && all_digits(tok, (size_t)(colon - tok)) && all_digits(colon + 1, strlen(colon + 1)))
		return by_index(g, tok, (size_t)(colon - tok)); /* <gpu>:<mig>: its parent */
	{
		/* a PCI address, <domain>:<bus>:<device>.<function>, any case and width */
		unsigned d, b, s, f;
		char tail;

		if (sscanf(tok, "%x:%x:%x.%x%c", &d, &b, &s, &f, &tail) == 4) {
			struct bdf want = { d, b, s, f };

			for (size_t i = 0; i < g->n; i++) {
				struct bdf have;

				if (parse_bdf(g->v[i].bdf, &have) && !cmp_bdf(&have, &want))
					return &g->v[i];
			}
			return NULL;
		}
	}
	*why = "not a GPU index, UUID, PCI address or MIG device name";
	return NULL;
}

enum orh_gpu_ask orh_gpus_resolve(const struct orh_gpus *g, const char *value, bool *held,
				  struct orh_strv *warnings)
{
	_cleanup_free_ char *copy = NULL;
	char *whole, *tok;
	size_t n_held = 0;
	bool unknown = false;

	if (g->n)
		memset(held, 0, g->n * sizeof(*held));
	if (!value)
		return ORH_GPUS_NONE;
	if (strlen(value) > VISIBLE_MAX) {
		warn(warnings, "NVIDIA_VISIBLE_DEVICES: longer than %d bytes, not read: every NIC",
		     VISIBLE_MAX);
		return ORH_GPUS_UNKNOWN;
	}
	copy = orh_xstrdup(value);
	whole = orh_strstrip(copy);
	if (!*whole || !strcasecmp(whole, "none") || !strcasecmp(whole, "void"))
		return ORH_GPUS_NONE;
	for (char *rest = whole; (tok = strsep(&rest, ","));) {
		const struct orh_gpu *gpu;
		const char *why = NULL;

		tok = orh_strstrip(tok);
		if (!*tok)
			continue;
		if (!strcasecmp(tok, "all")) {
			/* libnvidia-container stops here too */
			for (size_t i = 0; i < g->n; i++)
				held[i] = true;
			return unknown ? ORH_GPUS_UNKNOWN : ORH_GPUS_ALL;
		}
		gpu = resolve_token(g, tok, &why);
		if (!gpu) {
			warn(warnings, "NVIDIA_VISIBLE_DEVICES: '%.80s': %s (%zu GPUs)", tok, why,
			     g->n);
			unknown = true;
			continue;
		}
		held[gpu - g->v] = true;
	}
	for (size_t i = 0; i < g->n; i++)
		n_held += held[i];
	if (unknown)
		return ORH_GPUS_UNKNOWN;
	if (n_held == 0)
		return ORH_GPUS_NONE;
	return n_held == g->n ? ORH_GPUS_ALL : ORH_GPUS_SOME;
}

