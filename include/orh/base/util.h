/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small helpers shared by every module of oci-rdma-hook.
 *
 * Error contract (see HACKING.md):
 *   - functions return 0 (or a non-negative count) on success and -errno on failure;
 *   - a function that fails fills a struct orh_err with a message that names what it was
 *     doing ("reading '/sys/.../state'"); callers on the way up may prepend context with
 *     orh_err_prefix();
 *   - only main(), the command drivers and precreate's refusal (orh_precreate_refuse) log;
 *     helpers never print, but for the one parser of the commands' command lines
 *     (orh_args_parse(), args.h), which prints a command's usage for --help and names a
 *     bad argument on stderr with that usage, as every command would.
 */
#ifndef ORH_BASE_UTIL_H
#define ORH_BASE_UTIL_H

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define ORH_ERR_MAX 1024

struct orh_err {
	int code;               /* positive errno, 0 when no error */
	char msg[ORH_ERR_MAX];  /* human-readable, no trailing newline */
};

/* Record an error and return -code. code may be given positive or negative. */
int orh_fail(struct orh_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* orh_fail() with ": <the text of code>" (strerror) appended: the one way a message adds
 * the errno's text. */
int orh_fail_errno(struct orh_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prepend "context: " to an existing error message; returns -err->code. */
int orh_err_prefix(struct orh_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void orh_err_clear(struct orh_err *err);

/* Cleanup helpers (gcc/clang attribute). */
static inline void orh_freep(void *p)
{
	free(*(void **)p);
}
static inline void orh_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
static inline void orh_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}
static inline void orh_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define _cleanup_free_ __attribute__((cleanup(orh_freep)))
#define _cleanup_dir_ __attribute__((cleanup(orh_closedirp)))
#define _cleanup_file_ __attribute__((cleanup(orh_fclosep)))
#define _cleanup_close_ __attribute__((cleanup(orh_closep)))

static inline void *orh_take_ptr(void *pp)
{
	void **p = pp;
	void *v = *p;
	*p = NULL;
	return v;
}
#define TAKE_PTR(p) orh_take_ptr(&(p))
static inline int orh_take_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}
#define TAKE_FD(fd) orh_take_fd(&(fd))

#define ORH_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Allocation that aborts on out-of-memory: a hook that cannot allocate a few KiB
 * has nothing sensible left to do. */
void *orh_xmalloc(size_t n);
void *orh_xcalloc(size_t n, size_t size);
void *orh_xrealloc(void *p, size_t n);
/* Room in v (an array of n elements of `size`, grown only by this) for one more: it
 * doubles when n is 0 or a power of two, so that appending one at a time copies and
 * touches little memory (a first touch of a page costs a fault). */
void *orh_xgrow(void *v, size_t n, size_t size);
char *orh_xstrdup(const char *s);
char *orh_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable, NULL-terminated vector of owned strings. */
struct orh_strv {
	char **v;
	size_t n;
	size_t cap;
};
void orh_strv_push(struct orh_strv *sv, char *owned);
void orh_strv_pushf(struct orh_strv *sv, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void orh_strv_free(struct orh_strv *sv);
bool orh_strv_contains(const struct orh_strv *sv, const char *s);

/* A growing buffer of bytes, NUL-terminated after each add (the JSON writers' output). */
struct orh_buf {
	char *p;
	size_t n;   /* bytes held, the NUL not counted */
	size_t cap;
};

/* Room for more bytes and the NUL after them. */
static inline void orh_buf_reserve(struct orh_buf *b, size_t more)
{
	if (b->cap - b->n >= more + 1)
		return;
	b->cap = (b->n + more + 1) * 2;
	b->p = orh_xrealloc(b->p, b->cap);
}

static inline void orh_buf_add(struct orh_buf *b, const char *s, size_t n)
{
	orh_buf_reserve(b, n);
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static inline void orh_buf_addc(struct orh_buf *b, char c)
{
	orh_buf_reserve(b, 1);
	b->p[b->n++] = c;
	b->p[b->n] = '\0';
}

/* Bounded reads.
 *
 * orh_read_file_at() reads at most max-1 bytes of dirfd/path (path relative to dirfd,
 * or absolute when dirfd is AT_FDCWD) into buf and NUL-terminates it. A file that holds
 * more than max-1 bytes is reported as -EFBIG (the size limit is part of the contract:
 * every value the hook reads is bounded). Returns the number of bytes read or -errno.
 * It never follows a FIFO into a block: files are opened O_NONBLOCK and must be
 * regular files or sysfs attributes.
 */
ssize_t orh_read_file_at(int dirfd, const char *path, char *buf, size_t max);

/* Many small reads in a row (discovery): the files are opened O_NOATIME where the
 * kernel allows it, and their descriptors are closed together, with close_range() over
 * runs of consecutive numbers, when the batch fills or is flushed. Otherwise as
 * orh_read_file_at(), with the white space around the value stripped.
 * A zeroed struct is an empty batch. */
struct orh_readbatch {
	int fds[64];
	size_t n;
	bool no_noatime;  /* O_NOATIME was refused (not the files' owner): stop asking */
};
ssize_t orh_read_line_batch(struct orh_readbatch *b, int dirfd, const char *path, char *buf,
			    size_t max);
void orh_readbatch_flush(struct orh_readbatch *b);
/* The entries of the directory dirfd/path ("." for dirfd itself), "." and ".." left
 * out, each name to fn until it returns false, listed with getdents64 into a 2 KiB stack
 * buffer (opendir() allocates 32 KiB and makes three calls more). 0, also when fn
 * stopped it; -errno where it cannot be opened or listed; -EIO for a garbled record. */
int orh_dir_each(int dirfd, const char *path, bool (*fn)(const char *name, void *arg),
		 void *arg);
/* Read a whole stream/file into a malloc'd, NUL-terminated buffer of at most max bytes.
 * -EFBIG when larger. */
int orh_read_fd_all(int fd, size_t max, char **out, size_t *len);
/* The same within timeout_ms for the whole read, however the data comes: -ETIMEDOUT
 * when fd has not reached its end by then (a writer that holds it open and silent, or
 * sends a byte at a time). */
int orh_read_fd_all_within(int fd, size_t max, unsigned timeout_ms, char **out, size_t *len);

/* s as text that is safe on a terminal and in a log: each control character (C0, DEL, and
 * C1 as UTF-8 encodes it) and each byte that is not part of well-formed UTF-8 becomes
 * \xHH; the rest is copied. A new string (4 bytes a byte at most). */
char *orh_text_escape(const char *s);

/* Decode the octal escapes of a /proc/<pid>/mountinfo field (\040 = space) in place. */
void orh_unescape_octal(char *s);

/* Write all of data to fd, retrying on EINTR and short writes. 0 or -errno. */
int orh_write_all(int fd, const void *data, size_t len);

/* v in decimal at p, NUL-terminated; returns the NUL (room for 11 bytes needed). For
 * paths built once per file read, where snprintf's cost shows ("ports/" + "1"). */
char *orh_put_uint(char *p, unsigned v);

/* Does a process that is about to exit give its memory back first? Only in sanitizer
 * builds (ORH_SANITIZED), whose leak check needs it: elsewhere the exit gives it all back
 * at once, and a hook's decision and parsed spec freed piece by piece cost it time for
 * nothing. */
static inline bool orh_free_at_exit(void)
{
#ifdef ORH_SANITIZED
	return true;
#else
	return false;
#endif
}

/* Safe string copy: always NUL-terminates; returns -ENAMETOOLONG when truncated. */
int orh_strlcpy(char *dst, const char *src, size_t size);
bool orh_startswith(const char *s, const char *prefix);
char *orh_strstrip(char *s);

/* Parse a decimal unsigned integer that fills the whole string. */
int orh_parse_uint(const char *s, unsigned long long max, unsigned long long *out);

/* CLOCK_MONOTONIC in milliseconds (the record's step times). */
double orh_now_ms(void);

#endif
