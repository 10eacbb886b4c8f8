/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading sysfs for discovery (sysfs.h): bounded reads of a value, with a warning
 * naming the file when it cannot be read, directory listings, link names, one GID entry,
 * and where a sysfs path leads. discover.c, discover_chardev.c, discover_gids.c and
 * discover_gpu.c read through these; of each other's functions, only discover.c calls
 * discover_chardev.c's and discover_gids.c's (discover_gpu.c is read on its own:
 * orh_discover_gpus).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "sysfs.h"

void disc_warn(struct scan *sc, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s)
		return;
	/* values quoted from sysfs may hold anything: keep the log one line per warning */
	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	orh_strv_push(sc->warnings, s);
}

ssize_t disc_read_value(struct scan *sc, int dirfd, const char *path, char *buf, size_t max)
{
	(*sc->reads)++;
	return orh_read_line_batch(sc->batch, dirfd, path, buf, max);
}

const char *disc_err_text(ssize_t r)
{
	return r == -EFBIG ? "value too long" : strerror((int)-r);
}

bool disc_read_required(struct scan *sc, int dirfd, const char *where, const char *path,
			char *buf, size_t max)
{
	ssize_t r = disc_read_value(sc, dirfd, path, buf, max);

	if (r < 0) {
		disc_warn(sc, "skipping '%s/%s': %s", where, path, disc_err_text(r));
		return false;
	}
	return true;
}

static int cmp_names(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

static bool push_name(const char *name, void *arg)
{
	if (name[0] != '.')
		orh_strv_push(arg, orh_xstrdup(name));
	return true;
}

int disc_list_dir(int dirfd, const char *path, struct orh_strv *out)
{
	int r = orh_dir_each(dirfd, path, push_name, out);

	if (r < 0)
		return r;
	if (out->n)
		qsort(out->v, out->n, sizeof(char *), cmp_names);
	return 0;
}

bool disc_valid_name(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n >= max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == '/' || s[i] == '=' || s[i] == ',' ||
		    s[i] == ':' || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

void disc_link_basename(int dirfd, const char *path, char *out, size_t size)
{
	char buf[512];
	ssize_t n = readlinkat(dirfd, path, buf, sizeof(buf) - 1);
	const char *base;

	out[0] = '\0';
	if (n <= 0)
		return;
	buf[n] = '\0';
	base = strrchr(buf, '/');
	base = base ? base + 1 : buf;
	for (const char *c = base; *c; c++)
		if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
			return;
	orh_strlcpy(out, base, size);
}

void disc_gid_fill_ipv4(struct orh_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	g->ipv4_mapped = memcmp(g->raw, prefix, sizeof(prefix)) == 0;
	if (g->ipv4_mapped)
		memcpy(&g->ipv4, g->raw + 12, 4);
}

static bool gid_is_zero(const uint8_t raw[16])
{
	for (int i = 0; i < 16; i++)
		if (raw[i])
			return false;
	return true;
}

/* <prefix><dir><idx> into path (at least 48 bytes; prefix is at most 15), by hand: a full
 * scan builds one for each of thousands of entries, and snprintf's cost shows there. */
static const char *entry_path(char *path, const char *prefix, const char *dir, unsigned idx)
{
	orh_put_uint(stpcpy(stpcpy(path, prefix), dir), idx);
	return path;
}

int disc_read_gid(struct scan *sc, int dirfd, const char *prefix, const char *where,
		    unsigned idx, bool need_ndev, struct orh_gid *g)
{
	char path[96], buf[VALUE_MAX];
	size_t plen = strlen(prefix);
	ssize_t n;

	memset(g, 0, sizeof(*g));
	n = disc_read_value(sc, dirfd, entry_path(path, prefix, "gids/", idx), buf, sizeof(buf));
	if (n == -ENOENT)
		return -ENOENT;
	if (n < 0) {
		disc_warn(sc, "skipping '%s/%s': %s", where, path + plen, disc_err_text(n));
		return 0;
	}
	if (orh_parse_gid(buf, g->raw) < 0) {
		disc_warn(sc, "skipping '%s/%s': not a GID: '%.48s'", where, path + plen, buf);
		return 0;
	}
	if (gid_is_zero(g->raw))
		return 0; /* unused entry: its type and ndev reads would fail with EINVAL */
	g->index = idx;
	disc_gid_fill_ipv4(g);
	/* Plan mode: an entry that cannot be the wanted kind needs no type read. */
	if (disc_plan_mode(sc) && sc->opts->gid_wanted &&
	    !sc->opts->gid_wanted(g, &sc->opts->want, false)) {
		g->type = ORH_GID_TYPE_UNKNOWN;
		goto ndev;
	}
	n = disc_read_value(sc, dirfd, entry_path(path, prefix, "gid_attrs/types/", idx), buf,
			    sizeof(buf));
	if (n > 0 && orh_parse_gid_type(buf, &g->type) < 0)
		disc_warn(sc, "ignoring '%s/%s': unknown GID type '%.32s'", where, path + plen,
			  buf);
ndev:
	if (!need_ndev)
		return 1;
	n = disc_read_value(sc, dirfd, entry_path(path, prefix, "gid_attrs/ndevs/", idx), buf,
			    sizeof(buf));
	if (n > 0) {
		if (disc_valid_name(buf, IFNAMSIZ))
			strcpy(g->ndev, buf);
		else
			disc_warn(sc, "ignoring '%s/%s': not an interface name", where,
				  path + plen);
	}
	return 1;
}

int disc_sysfs_path(const char *sysroot, const char *rel, char *out, size_t size)
{
	const char *root = sysroot && *sysroot && strcmp(sysroot, "/") ? sysroot : "";
	_cleanup_free_ char *base = orh_xasprintf("%s/sys", root);
	_cleanup_free_ char *full = orh_xasprintf("%s/%s", root, rel);
	_cleanup_free_ char *sysreal = NULL, *real = NULL;
	size_t n;

	out[0] = '\0';
	sysreal = realpath(base, NULL);
	if (!sysreal)
		return -errno;
	real = realpath(full, NULL);
	if (!real)
		return -errno;
	n = strlen(sysreal);
	if (strncmp(real, sysreal, n) || real[n] != '/')
		return -EXDEV;
	if (orh_strlcpy(out, real + n + 1, size) < 0) {
		out[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

