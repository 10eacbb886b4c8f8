/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device cgroup grants for a running container.
 *
 * cgroup v1: write "c MAJ:MIN rwm" to devices.allow of the devices controller's cgroup.
 * cgroup v2: device access is decided by BPF_CGROUP_DEVICE programs attached to the
 * cgroup (runc attaches one with BPF_F_ALLOW_MULTI). Each attached program is replaced,
 * atomically, by a copy with an "allow our nodes" block in front of its original
 * instructions, so everything it allowed before stays allowed and nothing else is
 * added. Raw bpf() syscalls; no libbpf.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "orh/apply/cgroup.h"
#include "orh/apply/target.h"

#define MAX_PROGS 64
#define MAX_INSNS 65536
#define VERIFIER_LOG_SIZE 65536
#define PROC_CGROUP_MAX (64 * 1024)
#define MOUNTINFO_MAX (4 * 1024 * 1024)

/* ---- /proc parsing -------------------------------------------------------------- */

static bool has_token(const char *list, const char *tok)
{
	size_t n = strlen(tok);

	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);

		if (len == n && strncmp(p, tok, n) == 0)
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

/* The two files both grants look in, read once. */
struct cg_files {
	char *mountinfo;  /* /proc/self/mountinfo, or NULL when unreadable */
	char *cgroup;     /* /proc/<pid>/cgroup, or NULL (cg_errno says why) */
	int cg_errno;
};

static char *read_small(const char *path, size_t max, int *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	int r;

	if (fd < 0) {
		*e = errno;
		return NULL;
	}
	r = orh_read_fd_all(fd, max, &buf, NULL);
	if (r < 0) {
		*e = -r;
		return NULL;
	}
	return buf;
}

/* Find the mount of a cgroup hierarchy in mountinfo: fstype "cgroup2", or "cgroup" with
 * `controller` among the super options. Copies mount point and root. */
static int find_cgroup_mount(const struct cg_files *cf, const char *fstype,
			     const char *controller, char *mnt, size_t mnt_size, char *root,
			     size_t root_size)
{
	_cleanup_free_ char *buf = NULL;
	char *save = NULL;

	if (!cf->mountinfo)
		return -ENOENT;
	buf = orh_xstrdup(cf->mountinfo); /* tokenized in place */
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[5] = { NULL }, *right = strstr(line, " - ");
		char *type, *super, *save2 = NULL;

		if (!right)
			continue;
		*right = '\0';
		right += 3;
		/* the type and super options first: the fields before them only of the mount
		 * that matches */
		type = strtok_r(right, " ", &save2);
		(void)strtok_r(NULL, " ", &save2); /* source */
		super = strtok_r(NULL, " ", &save2);
		if (!type || strcmp(type, fstype) != 0)
			continue;
		if (controller && (!super || !has_token(super, controller)))
			continue;
		save2 = NULL;
		for (int i = 0; i < 5; i++)
			f[i] = strtok_r(i ? NULL : line, " ", &save2);
		if (!f[4])
			continue;
		orh_unescape_octal(f[3]);
		orh_unescape_octal(f[4]);
		if (orh_strlcpy(mnt, f[4], mnt_size) < 0 || orh_strlcpy(root, f[3], root_size) < 0)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

/* The cgroup path of pid for a v1 controller, or for v2 when controller is NULL. */
static int proc_cgroup_path(const struct cg_files *cf, const char *controller, char *out,
			    size_t size)
{
	_cleanup_free_ char *buf = NULL;
	char *save = NULL;

	if (!cf->cgroup)
		return -cf->cg_errno;
	buf = orh_xstrdup(cf->cgroup);
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2;

		if (!c1 || !(c2 = strchr(c1 + 1, ':')))
			continue;
		*c2 = '\0';
		if (controller ? has_token(c1 + 1, controller)
			       : (c1 - line == 1 && line[0] == '0' && c1[1] == '\0'))
			return orh_strlcpy(out, c2 + 1, size);
	}
	return -ENOENT;
}

/* Open the directory of a cgroup: mount point + (path minus the mount's root). */
static int open_cgroup_dir(const char *mnt, const char *mroot, const char *path, int *out)
{
	_cleanup_close_ int mfd = open(mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
	size_t rl = strlen(mroot);
	const char *rel = path;
	int fd;

	if (mfd < 0)
		return -errno;
	if (strcmp(mroot, "/") != 0) {
		if (strncmp(path, mroot, rl) != 0 || (path[rl] != '/' && path[rl] != '\0'))
			return -ENOENT;
		rel = path + rl;
	}
	while (*rel == '/')
		rel++;
	if (strstr(rel, ".."))
		return -EINVAL;
	fd = openat(mfd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*out = fd;
	return 0;
}

/* ---- cgroup v1 ------------------------------------------------------------------- */

static int grant_v1(const struct cg_files *cf, pid_t pid, const struct orh_devnode *nodes,
		    size_t n, bool *done, struct orh_err *err)
{
	char mnt[PATH_MAX], mroot[PATH_MAX], path[PATH_MAX];
	_cleanup_close_ int cgfd = -1;
	_cleanup_close_ int afd = -1;
	int r;

	if (find_cgroup_mount(cf, "cgroup", "devices", mnt, sizeof(mnt), mroot, sizeof(mroot)) < 0)
		return 0; /* no v1 devices controller mounted */
	r = proc_cgroup_path(cf, "devices", path, sizeof(path));
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return orh_fail_errno(err, r, "reading the devices cgroup of pid %d", (int)pid);
	if (strcmp(path, "/") == 0)
		return 0; /* the root cgroup allows everything */
	r = open_cgroup_dir(mnt, mroot, path, &cgfd);
	if (r < 0)
		return orh_fail_errno(err, r, "opening devices cgroup '%s' under '%s'", path, mnt);
	afd = openat(cgfd, "devices.allow", O_WRONLY | O_CLOEXEC);
	if (afd < 0)
		return orh_fail_errno(err, errno, "opening '%s%s/devices.allow'", mnt, path);
	for (size_t i = 0; i < n; i++) {
		char rule[64];
		/* "c MAJOR:MINOR rwm", by hand: one a node, and snprintf() costs ten times as
		 * many instructions */
		char *e = stpcpy(orh_put_uint(stpcpy(orh_put_uint(stpcpy(rule, "c "),
								  nodes[i].major), ":"),
					      nodes[i].minor), " rwm");
		int len = (int)(e - rule);

		if (write(afd, rule, (size_t)len) != len)
			return orh_fail_errno(err, errno, "writing '%s' to '%s%s/devices.allow'",
					      rule, mnt, path);
	}
	*done = true;
	return 0;
}

/* ---- cgroup v2 ------------------------------------------------------------------- */

static int sys_bpf(int cmd, union bpf_attr *attr)
{
	return (int)syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	return (struct bpf_insn){ .code = code, .dst_reg = dst, .src_reg = src, .off = off,
				  .imm = imm };
}

/* The block put in front: allow (char, major, minor, any access) for each node and
 * return 1; otherwise fall through with r1 (the context) untouched. */
static size_t build_prefix(const struct orh_devnode *nodes, size_t n, struct bpf_insn *p)
{
	size_t k = 0;

	p[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0);  /* access_type */
	p[k++] = insn(BPF_ALU | BPF_MOV | BPF_X, BPF_REG_3, BPF_REG_2, 0, 0);
	p[k++] = insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_3, 0, 0, 0xffff);   /* dev type */
	p[k++] = insn(BPF_ALU | BPF_RSH | BPF_K, BPF_REG_2, 0, 0, 16);       /* access */
	p[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 4, 0); /* major */
	p[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_5, BPF_REG_1, 8, 0); /* minor */
	for (size_t i = 0; i < n; i++) {
		p[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 4, BPF_DEVCG_DEV_CHAR);
		p[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 3, (int32_t)nodes[i].major);
		p[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_5, 0, 2, (int32_t)nodes[i].minor);
		p[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
		p[k++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	}
	return k;
}

/* Can instructions read back from the kernel be loaded again as they are? Refuse
 * map references, calls to other functions and blinded constants (BPF_REG_AX). */
static bool reloadable(const struct bpf_insn *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (in[i].dst_reg > BPF_REG_10 || in[i].src_reg > BPF_REG_10)
			return false;
		if (in[i].code == (BPF_LD | BPF_IMM | BPF_DW) && in[i].src_reg != 0)
			return false;
		if (in[i].code == (BPF_JMP | BPF_CALL) && in[i].src_reg != 0)
			return false;
	}
	return true;
}

/* Open the attached program `id` as *fd. */
static int prog_open(uint32_t id, int *fd, struct orh_err *err)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_id = id;
	attr.open_flags = 0;
	*fd = sys_bpf(BPF_PROG_GET_FD_BY_ID, &attr);
	if (*fd < 0)
		return orh_fail_errno(err, errno, "opening device program id %u", id);
	if (fcntl(*fd, F_SETFD, FD_CLOEXEC) < 0)
		return orh_fail_errno(err, errno, "fcntl");
	return 0;
}

/* How many instructions the kernel gives back for the program open as fd: *nold. */
static int prog_len(int fd, uint32_t id, size_t *nold, struct orh_err *err)
{
	struct bpf_prog_info info;
	union bpf_attr attr;

	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = (uint32_t)fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = (uint64_t)(uintptr_t)&info;
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) < 0)
		return orh_fail_errno(err, errno, "reading device program id %u", id);
	*nold = info.xlated_prog_len / sizeof(struct bpf_insn);
	if (*nold == 0 || *nold > MAX_INSNS)
		return orh_fail(err, EPERM,
				"device program id %u: its instructions cannot be read (%zu)", id,
				*nold);
	return 0;
}

/* Read the nold instructions of the program open as fd into `out`, and check that they
 * can be loaded again as they are. */
static int prog_insns(int fd, uint32_t id, struct bpf_insn *out, size_t nold,
		      struct orh_err *err)
{
	struct bpf_prog_info info;
	union bpf_attr attr;

	memset(&info, 0, sizeof(info));
	info.xlated_prog_len = (uint32_t)(nold * sizeof(struct bpf_insn));
	info.xlated_prog_insns = (uint64_t)(uintptr_t)out;
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = (uint32_t)fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = (uint64_t)(uintptr_t)&info;
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) < 0)
		return orh_fail_errno(err, errno,
				      "reading the instructions of device program id %u", id);
	if (info.xlated_prog_len != nold * sizeof(struct bpf_insn))
		return orh_fail(err, EAGAIN, "device program id %u changed while read", id);
	if (!reloadable(out, nold))
		return orh_fail(err, EOPNOTSUPP,
				"device program id %u uses maps, calls or blinded constants; "
				"cannot extend it",
				id);
	return 0;
}

/* Load the cnt instructions of prog as a device program, *fd; the verifier's log goes to
 * `log` (log_size bytes, zeroed) and into the error message. */
static int prog_load(const struct bpf_insn *prog, size_t cnt, char *log, uint32_t log_size,
		     int *fd, struct orh_err *err)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	attr.insns = (uint64_t)(uintptr_t)prog;
	attr.insn_cnt = (uint32_t)cnt;
	attr.license = (uint64_t)(uintptr_t) "Apache";
	attr.log_buf = (uint64_t)(uintptr_t)log;
	attr.log_size = log_size;
	attr.log_level = 1;
	attr.expected_attach_type = BPF_CGROUP_DEVICE;
	*fd = sys_bpf(BPF_PROG_LOAD, &attr);
	if (*fd < 0 && errno == ENOSPC) {
		/* the verifier log did not fit: load again without it */
		attr.log_buf = 0;
		attr.log_size = 0;
		attr.log_level = 0;
		*fd = sys_bpf(BPF_PROG_LOAD, &attr);
	}
	if (*fd < 0)
		return orh_fail(err, errno, "loading the extended device program: %m%s%.300s",
				log[0] ? "; verifier: " : "", log);
	if (fcntl(*fd, F_SETFD, FD_CLOEXEC) < 0)
		return orh_fail_errno(err, errno, "fcntl");
	return 0;
}

/* Attach newfd to the cgroup in place of oldfd (program `id`). */
static int prog_attach_over(int cgfd, uint32_t id, uint32_t attach_flags, int oldfd,
			    int newfd, struct orh_err *err)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.target_fd = (uint32_t)cgfd;
	attr.attach_bpf_fd = (uint32_t)newfd;
	attr.attach_type = BPF_CGROUP_DEVICE;
	if (attach_flags & BPF_F_ALLOW_MULTI) {
		attr.attach_flags = BPF_F_ALLOW_MULTI | BPF_F_REPLACE;
		attr.replace_bpf_fd = (uint32_t)oldfd;
	} else {
		/* single-program mode: attaching with the same flags replaces it */
		attr.attach_flags = attach_flags;
	}
	if (sys_bpf(BPF_PROG_ATTACH, &attr) < 0)
		return orh_fail_errno(err, errno,
				      "attaching the extended device program over id %u", id);
	return 0;
}

/* Replace the attached program `id` by a copy with the prefix for nodes in front of its
 * instructions, and set *replaced; a program that already is such a copy is left as it is. */
static int replace_prog(int cgfd, uint32_t id, uint32_t attach_flags,
			const struct orh_devnode *nodes, size_t n, bool *replaced,
			struct orh_err *err)
{
	_cleanup_close_ int oldfd = -1;
	_cleanup_close_ int newfd = -1;
	_cleanup_free_ struct bpf_insn *prog = NULL;
	_cleanup_free_ char *log = NULL;
	size_t np = 0, nold = 0;
	int r;

	r = prog_open(id, &oldfd, err);
	if (r < 0)
		return r;
	r = prog_len(oldfd, id, &nold, err);
	if (r < 0)
		return r;
	np = 6 + 5 * n;
	prog = orh_xcalloc(np + nold, sizeof(*prog));
	build_prefix(nodes, n, prog);
	r = prog_insns(oldfd, id, prog + np, nold, err);
	if (r < 0)
		return r;
	/* already extended for exactly these nodes (a second run) */
	if (nold >= np && memcmp(prog, prog + np, np * sizeof(*prog)) == 0)
		return 0;

	log = orh_xcalloc(1, VERIFIER_LOG_SIZE);
	r = prog_load(prog, np + nold, log, VERIFIER_LOG_SIZE, &newfd, err);
	if (r < 0)
		return r;
	r = prog_attach_over(cgfd, id, attach_flags, oldfd, newfd, err);
	if (r < 0)
		return r;
	*replaced = true;
	return 0;
}

int orh_cgroup_v2_grant_fd(int cgfd, const struct orh_devnode *nodes, size_t n,
			   unsigned *replaced, bool *open, struct orh_err *err)
{
	uint32_t ids[MAX_PROGS];
	union bpf_attr attr;
	uint32_t count;

	*replaced = 0;
	*open = false;
	memset(&attr, 0, sizeof(attr));
	attr.query.target_fd = (uint32_t)cgfd;
	attr.query.attach_type = BPF_CGROUP_DEVICE;
	attr.query.prog_ids = (uint64_t)(uintptr_t)ids;
	attr.query.prog_cnt = MAX_PROGS;
	if (sys_bpf(BPF_PROG_QUERY, &attr) < 0)
		return orh_fail_errno(err, errno, "querying the cgroup's device programs");
	count = attr.query.prog_cnt;
	if (count == 0) {
		*open = true; /* nothing attached here: no restriction from this cgroup */
		return 0;
	}
	if (count > MAX_PROGS)
		return orh_fail(err, E2BIG, "%u device programs attached; at most %d handled",
				count, MAX_PROGS);
	for (uint32_t i = 0; i < count; i++) {
		bool done = false;
		int r = replace_prog(cgfd, ids[i], attr.query.attach_flags, nodes, n, &done, err);

		if (r < 0)
			return r;
		*replaced += done;
	}
	return 0;
}

static int grant_v2(const struct cg_files *cf, pid_t pid, const struct orh_devnode *nodes,
		    size_t n, struct orh_cgroup_result *res, struct orh_err *err)
{
	char mnt[PATH_MAX], mroot[PATH_MAX], path[PATH_MAX];
	_cleanup_close_ int cgfd = -1;
	int r;

	if (find_cgroup_mount(cf, "cgroup2", NULL, mnt, sizeof(mnt), mroot, sizeof(mroot)) < 0)
		return 0; /* no v2 hierarchy mounted */
	r = proc_cgroup_path(cf, NULL, path, sizeof(path));
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return orh_fail_errno(err, r, "reading the v2 cgroup of pid %d", (int)pid);
	r = open_cgroup_dir(mnt, mroot, path, &cgfd);
	if (r < 0)
		return orh_fail_errno(err, r, "opening cgroup '%s' under '%s'", path, mnt);
	r = orh_cgroup_v2_grant_fd(cgfd, nodes, n, &res->v2_progs, &res->v2_open, err);
	if (r < 0)
		return orh_err_prefix(err, "cgroup v2 '%s%s'", mnt, path);
	return 0;
}

int orh_cgroup_grant(const struct orh_target *t, const struct orh_devnode *nodes, size_t n,
		     struct orh_cgroup_result *res, struct orh_err *err)
{
	struct cg_files cf = { 0 };
	int e = 0, r;

	*res = (struct orh_cgroup_result){ 0 };
	if (n == 0)
		return 0;
	/* the cgroups of the process the hook holds: read, then checked to be its own */
	r = orh_target_read(t, "cgroup", PROC_CGROUP_MAX, &cf.cgroup, err);
	if (r == -ESRCH)
		return r;
	if (r < 0)
		cf.cg_errno = -r;
	cf.mountinfo = read_small("/proc/self/mountinfo", MOUNTINFO_MAX, &e);
	r = grant_v1(&cf, t->pid, nodes, n, &res->v1, err);
	if (r == 0)
		r = grant_v2(&cf, t->pid, nodes, n, res, err);
	free(cf.mountinfo);
	free(cf.cgroup);
	return r;
}
