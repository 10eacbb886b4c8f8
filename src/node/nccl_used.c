// SPDX-License-Identifier: Apache-2.0
/*
 * What NCCL used (orh/node/nccl_used.h): its INFO lines, parsed per communicator, and the
 * capture directory read through the container's root. The lines parsed, as NCCL 2.28.9
 * writes them (src/init.cc, src/transport/{net,p2p,shm,net_ib,net_socket}.cc), each
 * after the prefix "HOST:PID:TID [DEV] NCCL INFO ":
 *   ncclCommInitRank comm 0x... rank R nranks N cudaDev D nvmlDev D busId B commId 0x...
 *     - Init START   (one line)
 *   Using network IB | Socket | <plugin>
 *   NET/IB : Using [0]mlx5_1:1/RoCE [1]mlx5_2:1/IB [RO]; OOB eth0:10.0.0.1<0>
 *   Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA
 *   Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
 *   Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/node/nccl_used.h"
#include "orh/base/rootfs.h"

#define INFO_MARK " NCCL INFO "

/* One file's state: the NET/IB devices its process listed, and its first communicator. */
struct file_state {
	char ib[ORH_NCCL_USED_MAX_HCAS][32];
	size_t n_ib;
	size_t first;   /* index in u->comms of the file's first communicator */
	char network[32]; /* "Using network X" not yet taken by a communicator */
};

/* Copy the word at s (up to a space or the end, at most size - 1 bytes). */
static void word(const char *s, const char *end, char *out, size_t size)
{
	size_t n = 0;

	while (s + n < end && s[n] != ' ' && s[n] != '\t' && n + 1 < size)
		n++;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* The value after " key " in [s, end): its start, or NULL. */
static const char *after_key(const char *s, const char *end, const char *key)
{
	size_t k = strlen(key);

	for (const char *p = s; p + k + 1 < end; p++)
		if (p[0] == ' ' && !memcmp(p + 1, key, k) && p[k + 1] == ' ')
			return p + k + 2;
	return NULL;
}

static long number_after(const char *s, const char *end, const char *key)
{
	const char *v = after_key(s, end, key);
	char buf[24];

	if (!v)
		return -1;
	word(v, end, buf, sizeof(buf));
	return buf[0] >= '0' && buf[0] <= '9' ? strtol(buf, NULL, 10) : -1;
}

static bool starts(const char *s, const char *end, const char *prefix)
{
	size_t n = strlen(prefix);

	return (size_t)(end - s) >= n && !memcmp(s, prefix, n);
}

/* The prefix "HOST:PID:TID [DEV]" of [line, mark): pid and tid (0 where not read). */
static void prefix_ids(const char *line, const char *mark, unsigned long *pid,
		       unsigned long *tid)
{
	const char *b = mark, *c2 = NULL, *c1 = NULL;

	*pid = *tid = 0;
	while (b > line && b[-1] != ' ')
		b--; /* b: the start of "[DEV]" */
	if (b > line)
		b--;
	for (const char *p = b; p > line; p--) {
		if (p[-1] != ':')
			continue;
		if (!c2)
			c2 = p;
		else {
			c1 = p;
			break;
		}
	}
	if (c2)
		*tid = strtoul(c2, NULL, 10);
	if (c1)
		*pid = strtoul(c1, NULL, 10);
}

/* The communicator a line of thread tid belongs to: the last one the file started on that
 * thread, else the file's last; NULL where the file has none. */
static struct orh_nccl_comm *comm_of(struct orh_nccl_used *u, const struct file_state *f,
				     unsigned long tid)
{
	if (u->n_comms <= f->first)
		return NULL;
	for (size_t i = u->n_comms; i > f->first; i--)
		if (u->comms[i - 1].tid == tid)
			return &u->comms[i - 1];
	return &u->comms[u->n_comms - 1];
}

static void init_start(struct orh_nccl_used *u, struct file_state *f, const char *m,
		       const char *end, unsigned long pid, unsigned long tid)
{
	struct orh_nccl_comm *c;
	const char *v;

	if (u->n_comms == ORH_NCCL_USED_MAX_COMMS) {
		u->comms_dropped++;
		return;
	}
	c = &u->comms[u->n_comms++];
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	c->tid = tid;
	c->rank = number_after(m, end, "rank");
	c->nranks = number_after(m, end, "nranks");
	/* NCCL 2.28.9 says the network before the communicator's Init START line */
	orh_strlcpy(c->network, f->network, sizeof(c->network));
	f->network[0] = '\0';
	v = after_key(m, end, "commId");
	if (v)
		word(v, end, c->comm_id, sizeof(c->comm_id));
}

/* "[0]mlx5_1:1/RoCE [1]mlx5_2:1/IB [RO]; OOB ...": the devices by index */
static void ib_devices(struct file_state *f, const char *s, const char *end)
{
	f->n_ib = 0;
	for (const char *p = s; p < end && *p != ';'; p++) {
		char *e = NULL;
		unsigned long idx;
		size_t n = 0;

		if (*p != '[' || p + 1 >= end || p[1] < '0' || p[1] > '9')
			continue;
		idx = strtoul(p + 1, &e, 10);
		if (!e || e >= end || *e != ']' || idx >= ORH_NCCL_USED_MAX_HCAS)
			continue;
		p = e + 1;
		while (p + n < end && p[n] != '/' && p[n] != ' ' && p[n] != ';' && n + 1 < 32)
			n++;
		memcpy(f->ib[idx], p, n);
		f->ib[idx][n] = '\0';
		if (idx + 1 > f->n_ib)
			f->n_ib = idx + 1;
	}
}

static void add_hca(struct orh_nccl_comm *c, const char *name)
{
	for (size_t i = 0; i < c->n_hcas; i++)
		if (!strcmp(c->hcas[i], name))
			return;
	if (c->n_hcas < ORH_NCCL_USED_MAX_HCAS && name[0])
		orh_strlcpy(c->hcas[c->n_hcas++], name, sizeof(c->hcas[0]));
}

/* "... via X": the transport of one connection */
static void via(struct orh_nccl_comm *c, const struct file_state *f, const char *v,
		const char *end)
{
	char t[96];

	word(v, end, t, sizeof(t));
	c->channels++;
	if (!strncmp(t, "P2P/", 4))
		c->transports |= ORH_NCCL_T_P2P;
	else if (!strncmp(t, "SHM/", 4))
		c->transports |= ORH_NCCL_T_SHM;
	else if (!strncmp(t, "NET/IB/", 7)) {
		char *e = NULL;
		unsigned long dev = strtoul(t + 7, &e, 10);

		c->transports |= strstr(t + 7, "/GDRDMA") ? ORH_NCCL_T_IB_GDR : ORH_NCCL_T_IB;
		if (e && e != t + 7 && dev < f->n_ib)
			add_hca(c, f->ib[dev]);
	} else if (!strncmp(t, "NET/Socket/", 11))
		c->transports |= ORH_NCCL_T_SOCKET;
	else if (!strncmp(t, "NET/", 4)) {
		char *slash = strchr(t + 4, '/');

		if (slash)
			*slash = '\0';
		c->transports |= ORH_NCCL_T_NET_OTHER;
		orh_strlcpy(c->net_other, t + 4, sizeof(c->net_other));
	}
}

static void parse_line(struct orh_nccl_used *u, struct file_state *f, const char *line,
		       const char *end)
{
	const char *mark = NULL, *m, *v;
	size_t k = strlen(INFO_MARK);
	unsigned long pid, tid;
	struct orh_nccl_comm *c;

	for (const char *p = line; p + k <= end; p++)
		if (!memcmp(p, INFO_MARK, k)) {
			mark = p;
			break;
		}
	if (!mark)
		return;
	m = mark + k;
	prefix_ids(line, mark, &pid, &tid);
	if ((size_t)(end - m) > 13 && !memcmp(end - 13, " - Init START", 13)) {
		init_start(u, f, m, end, pid, tid);
		return;
	}
	if (starts(m, end, "NET/IB : Using")) {
		ib_devices(f, m + 14, end);
		return;
	}
	if (starts(m, end, "Using network ")) {
		word(m + 14, end, f->network, sizeof(f->network));
		return;
	}
	c = comm_of(u, f, tid);
	if (!c)
		return;
	if (starts(m, end, "Channel ") && (v = after_key(m, end, "via")))
		via(c, f, v, end);
}

void orh_nccl_used_parse(const char *text, size_t len, struct orh_nccl_used *u)
{
	struct file_state f = { .first = u->n_comms };
	const char *p = text, *end = text + len;

	u->files++;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		if (le > p && le[-1] == '\r')
			parse_line(u, &f, p, le - 1);
		else
			parse_line(u, &f, p, le);
		p = nl ? nl + 1 : end;
	}
	/* a network said after the file's last Init START line (no later one took it) */
	if (f.network[0] && u->n_comms > f.first && !u->comms[u->n_comms - 1].network[0])
		orh_strlcpy(u->comms[u->n_comms - 1].network, f.network,
			    sizeof(u->comms[0].network));
}

void orh_nccl_transports_text(unsigned bits, char *out, size_t size)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {
		{ ORH_NCCL_T_IB_GDR, "NET/IB+GDR" }, { ORH_NCCL_T_IB, "NET/IB" },
		{ ORH_NCCL_T_SOCKET, "NET/Socket" }, { ORH_NCCL_T_NET_OTHER, "NET/other" },
		{ ORH_NCCL_T_P2P, "P2P" },           { ORH_NCCL_T_SHM, "SHM" },
	};
	size_t n = 0;

	if (size)
		out[0] = '\0';
	for (size_t i = 0; i < ORH_ARRAY_SIZE(names); i++)
		if ((bits & names[i].bit) && n < size)
			n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "",
					      names[i].name);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read one file of the directory (no link followed, nothing but a regular file) and parse
 * it; *budget: the bytes left to read in all. */
static void read_one(int dfd, const char *name, size_t *budget, struct orh_nccl_used *u)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
					O_NOCTTY | O_CLOEXEC);
	size_t want = *budget < ORH_NCCL_USED_MAX_FILE_BYTES ? *budget
							      : ORH_NCCL_USED_MAX_FILE_BYTES;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if ((size_t)st.st_size > want)
		u->truncated = true;
	buf = orh_xmalloc(want + 1);
	while (got < want) {
		ssize_t r = read(fd, buf + got, want - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	*budget -= got;
	orh_nccl_used_parse(buf, got, u);
}

int orh_nccl_used_read(int rootfd, struct orh_nccl_used *u, struct orh_err *err)
{
	_cleanup_close_ int pathfd = -1;
	char *names[ORH_NCCL_USED_MAX_FILES];
	size_t n = 0, budget = ORH_NCCL_USED_MAX_BYTES;
	struct dirent *de;
	DIR *dir;
	int dfd, r;

	memset(u, 0, sizeof(*u));
	r = orh_rootfs_dir(rootfd, ORH_NCCL_RECORD_DIR, false, ORH_MOUNT_ANY, &pathfd, err);
	if (r < 0)
		return r;
	dfd = openat(pathfd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	if (dfd < 0)
		return orh_fail_errno(err, errno, "opening '%s' in the container",
				      ORH_NCCL_RECORD_DIR);
	dir = fdopendir(dfd);
	if (!dir) {
		r = errno;
		close(dfd);
		return orh_fail_errno(err, r, "reading '%s' in the container",
				      ORH_NCCL_RECORD_DIR);
	}
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == ORH_NCCL_USED_MAX_FILES) {
			u->truncated = true;
			break;
		}
		names[n++] = orh_xstrdup(de->d_name);
	}
	qsort(names, n, sizeof(names[0]), by_name);
	for (size_t i = 0; i < n; i++) {
		if (budget == 0)
			u->truncated = true;
		else
			read_one(dirfd(dir), names[i], &budget, u);
		free(names[i]);
	}
	closedir(dir);
	return 0;
}
