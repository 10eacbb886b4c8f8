/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "orh/base/util.h"

/* err filled from fmt and ap, with ": strerror(code)" after it when with_errno; -code. */
__attribute__((format(printf, 4, 0)))
static int vfail(struct orh_err *err, int code, bool with_errno, const char *fmt, va_list ap)
{
	int n;

	if (code < 0)
		code = -code;
	if (code == 0)
		code = EINVAL;
	if (!err)
		return -code;
	err->code = code;
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	/* what does not fit is cut, the error's text first */
	if (with_errno && n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", strerror(code));
	return -code;
}

int orh_fail(struct orh_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(err, code, false, fmt, ap);
	va_end(ap);
	return r;
}

int orh_fail_errno(struct orh_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(err, code, true, fmt, ap);
	va_end(ap);
	return r;
}

int orh_err_prefix(struct orh_err *err, const char *fmt, ...)
{
	char prefix[ORH_ERR_MAX];
	char old[ORH_ERR_MAX];
	va_list ap;

	if (!err)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
	return -(err->code ? err->code : EINVAL);
}

void orh_err_clear(struct orh_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}

static void *oom_check(void *p)
{
	if (!p) {
		fputs("oci-rdma-hook: out of memory\n", stderr);
		abort();
	}
	return p;
}

void *orh_xmalloc(size_t n)
{
	return oom_check(malloc(n ? n : 1));
}

void *orh_xcalloc(size_t n, size_t size)
{
	return oom_check(calloc(n ? n : 1, size ? size : 1));
}

void *orh_xrealloc(void *p, size_t n)
{
	return oom_check(realloc(p, n ? n : 1));
}

void *orh_xgrow(void *v, size_t n, size_t size)
{
	if (n & (n - 1))
		return v;
	return orh_xrealloc(v, (n ? 2 * n : 2) * size);
}

char *orh_xstrdup(const char *s)
{
	return oom_check(strdup(s ? s : ""));
}

static char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *xvasprintf(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	return oom_check(s);
}

char *orh_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}

void orh_strv_push(struct orh_strv *sv, char *owned)
{
	if (sv->n + 2 > sv->cap) {
		sv->cap = sv->cap ? sv->cap * 2 : 8;
		sv->v = orh_xrealloc(sv->v, sv->cap * sizeof(char *));
	}
	sv->v[sv->n++] = owned;
	sv->v[sv->n] = NULL;
}

void orh_strv_pushf(struct orh_strv *sv, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	orh_strv_push(sv, xvasprintf(fmt, ap));
	va_end(ap);
}

void orh_strv_free(struct orh_strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->cap = 0;
}

bool orh_strv_contains(const struct orh_strv *sv, const char *s)
{
	for (size_t i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return true;
	return false;
}

/* Read what fd holds, under the contract of orh_read_file_at(). */
static ssize_t read_bounded(int fd, char *buf, size_t max)
{
	ssize_t r;

	do
		r = read(fd, buf, max - 1);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EAGAIN ? -EINVAL : -errno;
	buf[r] = '\0';
	/* sysfs hands out a whole attribute in one read, and a regular file reads short
	 * only at its end: only a full buffer needs a second look. */
	if ((size_t)r == max - 1) {
		char c;
		if (read(fd, &c, 1) > 0)
			return -EFBIG;
	}
	return r;
}

/* O_NONBLOCK: a FIFO planted where a value should be cannot block us. A directory fails
 * the read with EISDIR. */
#define READ_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

ssize_t orh_read_file_at(int dirfd, const char *path, char *buf, size_t max)
{
	_cleanup_close_ int fd = -1;

	if (max < 2)
		return -EINVAL;
	buf[0] = '\0';
	fd = openat(dirfd, path, READ_FLAGS);
	if (fd < 0)
		return -errno;
	return read_bounded(fd, buf, max);
}

static ssize_t strip_line(char *buf, ssize_t r)
{
	char *s;
	size_t n;

	if (r < 0)
		return r;
	s = orh_strstrip(buf);
	n = strlen(s);
	memmove(buf, s, n + 1);
	return (ssize_t)n;
}

void orh_readbatch_flush(struct orh_readbatch *b)
{
	size_t i = 0;

	/* descriptors come lowest-free first, so the batch is mostly one ascending run */
	while (i < b->n) {
		size_t j = i;

		while (j + 1 < b->n && b->fds[j + 1] == b->fds[j] + 1)
			j++;
		if (j == i || close_range((unsigned)b->fds[i], (unsigned)b->fds[j], 0) < 0)
			for (size_t k = i; k <= j; k++)
				close(b->fds[k]);
		i = j + 1;
	}
	b->n = 0;
}

int orh_dir_each(int dirfd, const char *path, bool (*fn)(const char *name, void *arg),
		 void *arg)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* a class directory's dozens of entries fit; more take another getdents64. Small:
	 * every stack page a hook first touches costs it a fault */
	char buf[2048] __attribute__((aligned(8)));
	ssize_t n;

	if (fd < 0)
		return -errno;
	while ((n = getdents64(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *de = (const struct dirent64 *)(buf + off);

			if (de->d_reclen == 0 || off + de->d_reclen > n)
				return -EIO;
			off += de->d_reclen;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (!fn(de->d_name, arg))
				return 0;
		}
	}
	return n < 0 ? -errno : 0;
}

ssize_t orh_read_line_batch(struct orh_readbatch *b, int dirfd, const char *path, char *buf,
			    size_t max)
{
	int fd = -1;

	if (max < 2)
		return -EINVAL;
	buf[0] = '\0';
	if (!b->no_noatime) {
		fd = openat(dirfd, path, READ_FLAGS | O_NOATIME);
		if (fd < 0 && errno == EPERM)
			b->no_noatime = true;
		else if (fd < 0)
			return -errno;
	}
	if (fd < 0 && (fd = openat(dirfd, path, READ_FLAGS)) < 0)
		return -errno;
	if (b->n == ORH_ARRAY_SIZE(b->fds))
		orh_readbatch_flush(b);
	b->fds[b->n++] = fd;
	return strip_line(buf, read_bounded(fd, buf, max));
}

/* Wait until fd can be read (data or its end) or the deadline (CLOCK_MONOTONIC, in ms)
 * has passed: 0, -ETIMEDOUT or -errno. A negative deadline returns 0 at once: the read
 * itself then waits. */
static int wait_readable(int fd, int64_t deadline_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (deadline_ms < 0)
		return 0;
	for (;;) {
		struct timespec now;
		int64_t left;
		int r;

		if (clock_gettime(CLOCK_MONOTONIC, &now) < 0)
			return -errno;
		left = deadline_ms - ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (r > 0)
			return 0; /* readable, at its end (POLLHUP) or in error: read() says */
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static ssize_t read_within(int fd, void *buf, size_t n, int64_t deadline_ms)
{
	for (;;) {
		int w = wait_readable(fd, deadline_ms);
		ssize_t r;

		if (w < 0)
			return w;
		r = read(fd, buf, n);
		if (r >= 0)
			return r;
		/* EAGAIN: a non-blocking fd that poll() said was readable; with no
		 * deadline nothing polls, and the caller gets -EAGAIN */
		if (errno != EINTR && (errno != EAGAIN || deadline_ms < 0))
			return -errno;
	}
}

static int read_all(int fd, size_t max, int64_t deadline_ms, char **out, size_t *len)
{
	size_t cap = 4096, got = 0;
	char *buf = orh_xmalloc(cap + 1);

	for (;;) {
		ssize_t r;

		if (got == cap) {
			if (cap >= max) {
				char c;
				ssize_t extra = read_within(fd, &c, 1, deadline_ms);

				if (extra == 0)
					break; /* exactly max bytes */
				free(buf);
				return extra < 0 ? (int)extra : -EFBIG;
			}
			cap = cap * 2 > max ? max : cap * 2;
			buf = orh_xrealloc(buf, cap + 1);
		}
		r = read_within(fd, buf + got, cap - got, deadline_ms);
		if (r < 0) {
			free(buf);
			return (int)r;
		}
		if (r == 0)
			break;
		got += (size_t)r;
		if (got > max) {
			free(buf);
			return -EFBIG;
		}
	}
	buf[got] = '\0';
	*out = buf;
	if (len)
		*len = got;
	return 0;
}

int orh_read_fd_all(int fd, size_t max, char **out, size_t *len)
{
	return read_all(fd, max, -1, out, len);
}

int orh_read_fd_all_within(int fd, size_t max, unsigned timeout_ms, char **out, size_t *len)
{
	struct timespec now;

	if (clock_gettime(CLOCK_MONOTONIC, &now) < 0)
		return -errno;
	return read_all(fd, max, (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + timeout_ms,
			out, len);
}

/* The length of the well-formed UTF-8 sequence at p that is not a control character (C1
 * is U+0080 to U+009F); 0 for any other. A NUL ends a sequence early: it is no
 * continuation byte. */
static size_t utf8_text_len(const unsigned char *p)
{
	static const unsigned min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	unsigned cp;
	size_t n;

	if (p[0] < 0x80)
		return p[0] < 0x20 || p[0] == 0x7f ? 0 : 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if ((p[0] & 0xf0) == 0xe0)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f)
		return 0;
	return n;
}

char *orh_text_escape(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char *out = orh_xmalloc(strlen(s) * 4 + 1), *o = out;

	while (*p) {
		size_t n = utf8_text_len(p);

		if (n == 0) {
			o += sprintf(o, "\\x%02x", *p++);
			continue;
		}
		memcpy(o, p, n);
		o += n;
		p += n;
	}
	*o = '\0';
	return out;
}

void orh_unescape_octal(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

int orh_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

char *orh_put_uint(char *p, unsigned v)
{
	char tmp[10];
	size_t n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*p++ = tmp[--n];
	*p = '\0';
	return p;
}

int orh_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size == 0)
		return -ENAMETOOLONG;
	if (n >= size) {
		memcpy(dst, src, size - 1);
		dst[size - 1] = '\0';
		return -ENAMETOOLONG;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

bool orh_startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

char *orh_strstrip(char *s)
{
	char *end;

	while (*s && isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

int orh_parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	unsigned long long v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (v > (ULLONG_MAX - (unsigned)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

double orh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
