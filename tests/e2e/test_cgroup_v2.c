/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup v2 device grants (src/apply/cgroup.c) against the kernel: a cgroup with a
 * runc-style BPF device program (allow /dev/null and /dev/zero, deny the rest), a process
 * in it, then orh_cgroup_grant() on that process: the granted node opens with ENXIO (no
 * driver behind the numbers), an ungranted one still fails with EPERM, and what the old
 * program allowed still opens. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_MKNOD).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orh/apply/apply.h"

#define N_PATHS 4

static char cgdir[PATH_MAX];
static char nodedir[PATH_MAX];
static char paths[N_PATHS][PATH_MAX]; /* granted, ungranted, allowed-before, granted #2 */

static void need_root(void)
{
	const char *ci = getenv("CI");

	if (geteuid() == 0)
		return;
	if (ci && strcmp(ci, "true") == 0)
		cr_assert_fail("cannot run: needs root (CI=true)");
	cr_skip_test("needs root");
}

/* Without root the whole binary is a skip for meson (77), unless CI=true. */
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	const char *ci = getenv("CI");

	(void)set;
	if (geteuid() != 0 && !(ci && strcmp(ci, "true") == 0)) {
		fputs("SKIP: needs root\n", stderr);
		exit(77);
	}
}

/* The cgroup2 mount point, from /proc/self/mountinfo. */
static bool cgroup2_mount(char *out, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX];
		char *sep = strstr(line, " - cgroup2 ");

		if (sep && sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1) {
			snprintf(out, size, "%s", mnt);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static struct bpf_insn ins(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	return (struct bpf_insn){ .code = code, .dst_reg = dst, .src_reg = src, .off = off,
				  .imm = imm };
}

/* A device program shaped like runc's: a list of allow rules, deny at the end. */
static int load_runc_like(void)
{
	struct bpf_insn p[32];
	union bpf_attr attr;
	size_t k = 0;
	const int32_t allowed[][2] = { { 1, 3 }, { 1, 5 } };

	p[k++] = ins(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0);
	p[k++] = ins(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff);
	p[k++] = ins(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 4, 0);
	p[k++] = ins(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_5, BPF_REG_1, 8, 0);
	for (size_t i = 0; i < 2; i++) {
		p[k++] = ins(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 4, BPF_DEVCG_DEV_CHAR);
		p[k++] = ins(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 3, allowed[i][0]);
		p[k++] = ins(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_5, 0, 2, allowed[i][1]);
		p[k++] = ins(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
		p[k++] = ins(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	}
	p[k++] = ins(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
	p[k++] = ins(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	attr.insns = (uint64_t)(uintptr_t)p;
	attr.insn_cnt = (uint32_t)k;
	attr.license = (uint64_t)(uintptr_t) "Apache";
	return (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
}

static void attach(int cgfd, int progfd, uint32_t flags)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.target_fd = (uint32_t)cgfd;
	attr.attach_bpf_fd = (uint32_t)progfd;
	attr.attach_type = BPF_CGROUP_DEVICE;
	attr.attach_flags = flags;
	cr_assert_eq(syscall(SYS_bpf, BPF_PROG_ATTACH, &attr, sizeof(attr)), 0,
		     "attaching the test program: %s", strerror(errno));
}

static uint32_t prog_count(int cgfd)
{
	uint32_t ids[8];
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.query.target_fd = (uint32_t)cgfd;
	attr.query.attach_type = BPF_CGROUP_DEVICE;
	attr.query.prog_ids = (uint64_t)(uintptr_t)ids;
	attr.query.prog_cnt = 8;
	cr_assert_eq(syscall(SYS_bpf, BPF_PROG_QUERY, &attr, sizeof(attr)), 0);
	return attr.query.prog_cnt;
}

/* A child in the cgroup that opens the paths on request: 'o' -> N_PATHS errnos. */
struct prober {
	pid_t pid;
	int cmd;   /* write end */
	int res;   /* read end */
};

static struct prober start_prober(void)
{
	int to[2], from[2];
	char procs[PATH_MAX + 32];
	struct prober pr;
	char c = 0;

	cr_assert_eq(pipe2(to, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(from, O_CLOEXEC), 0);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgdir);
	pr.pid = fork();
	cr_assert_geq(pr.pid, 0);
	if (pr.pid == 0) {
		FILE *f;

		close(to[1]);
		close(from[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		f = fopen(procs, "we");

		if (!f || fprintf(f, "0\n") < 0 || fclose(f) != 0)
			_exit(3);
		if (write(from[1], "r", 1) != 1)
			_exit(4);
		while (read(to[0], &c, 1) == 1 && c == 'o') {
			int e[N_PATHS];

			for (int i = 0; i < N_PATHS; i++) {
				int fd = open(paths[i], O_RDWR | O_CLOEXEC | O_NONBLOCK);

				e[i] = fd >= 0 ? 0 : errno;
				if (fd >= 0)
					close(fd);
			}
			if (write(from[1], e, sizeof(e)) != sizeof(e))
				_exit(5);
		}
		_exit(0);
	}
	close(to[0]);
	close(from[1]);
	pr.cmd = to[1];
	pr.res = from[0];
	cr_assert_eq(read(pr.res, &c, 1), 1, "the prober could not join the cgroup");
	return pr;
}

static void probe(struct prober *pr, int e[N_PATHS])
{
	cr_assert_eq(write(pr->cmd, "o", 1), 1);
	cr_assert_eq(read(pr->res, e, sizeof(int) * N_PATHS), (ssize_t)(sizeof(int) * N_PATHS));
}

static void stop_prober(struct prober *pr)
{
	int status = 0;

	close(pr->cmd);
	close(pr->res);
	waitpid(pr->pid, &status, 0);
}

static void setup(void)
{
	char mnt[PATH_MAX];
	const unsigned nums[N_PATHS][2] = { { 231, 193 }, { 231, 194 }, { 1, 3 }, { 10, 58 } };

	need_root();
	cr_assert(cgroup2_mount(mnt, sizeof(mnt)), "no cgroup2 mount in /proc/self/mountinfo");
	snprintf(cgdir, sizeof(cgdir), "%s/orh-test-%d", mnt, (int)getpid());
	cr_assert_eq(mkdir(cgdir, 0755), 0, "mkdir %s: %s", cgdir, strerror(errno));
	snprintf(nodedir, sizeof(nodedir), "/tmp/orh-cgv2.XXXXXX");
	cr_assert_not_null(mkdtemp(nodedir));
	for (int i = 0; i < N_PATHS; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/n%d", nodedir, i);
		cr_assert_eq(mknod(paths[i], S_IFCHR | 0666, makedev(nums[i][0], nums[i][1])), 0);
	}
}

static void teardown(void)
{
	for (int i = 0; i < N_PATHS; i++)
		unlink(paths[i]);
	rmdir(nodedir);
	rmdir(cgdir);
}

static void grant_and_check(uint32_t attach_flags)
{
	const struct orh_devnode grant[] = {
		{ .path = "/dev/infiniband/uverbs1", .major = 231, .minor = 193, .mode = 0666 },
		{ .path = "/dev/infiniband/rdma_cm", .major = 10, .minor = 58, .mode = 0666 },
	};
	struct orh_cgroup_result res;
	struct orh_err err = { 0 };
	struct orh_target t;
	struct prober pr;
	int cgfd, prog, e[N_PATHS];

	cgfd = open(cgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(cgfd, 0);
	prog = load_runc_like();
	cr_assert_geq(prog, 0, "loading the test program: %s", strerror(errno));
	attach(cgfd, prog, attach_flags);
	pr = start_prober();

	probe(&pr, e);
	cr_assert_eq(e[0], EPERM, "before the grant: uverbs1 must be denied, got %s", strerror(e[0]));
	cr_assert_eq(e[2], 0, "before the grant: /dev/null allowed, got %s", strerror(e[2]));

	cr_assert_eq(orh_target_open(pr.pid, &t, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_cgroup_grant(&t, grant, 2, &res, &err), 0, "grant: %s", err.msg);
	cr_assert_eq(res.v2_progs, 1, "one program replaced");
	cr_assert_eq(prog_count(cgfd), 1, "the old program is replaced, not added to");
	probe(&pr, e);
	cr_assert_eq(e[0], ENXIO, "granted uverbs1: want ENXIO, got %s", strerror(e[0]));
	cr_assert_eq(e[1], EPERM, "ungranted 231:194: want EPERM, got %s", strerror(e[1]));
	cr_assert_eq(e[2], 0, "the old program's /dev/null rule still works: %s", strerror(e[2]));
	cr_assert_neq(e[3], EPERM, "granted rdma_cm (10:58) must not be EPERM");

	/* a second run changes nothing */
	cr_assert_eq(orh_cgroup_grant(&t, grant, 2, &res, &err), 0, "regrant: %s", err.msg);
	cr_assert_eq(res.v2_progs, 0, "already granted: no new program");
	cr_assert_eq(prog_count(cgfd), 1);
	probe(&pr, e);
	cr_assert_eq(e[0], ENXIO);
	cr_assert_eq(e[1], EPERM);

	orh_target_close(&t);
	stop_prober(&pr);
	close(prog);
	close(cgfd);
}

Test(cgroup_v2, runc_like_multi, .init = setup, .fini = teardown)
{
	grant_and_check(BPF_F_ALLOW_MULTI);
}

Test(cgroup_v2, single_program_mode, .init = setup, .fini = teardown)
{
	grant_and_check(0);
}

Test(cgroup_v2, no_program_is_open, .init = setup, .fini = teardown)
{
	unsigned replaced = 9;
	bool open_ = false;
	struct orh_err err = { 0 };
	const struct orh_devnode grant[] = { { .path = "/x", .major = 231, .minor = 193 } };
	int cgfd = open(cgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(cgfd, 0);
	cr_assert_eq(orh_cgroup_v2_grant_fd(cgfd, grant, 1, &replaced, &open_, &err), 0, "%s",
		     err.msg);
	cr_assert(open_);
	cr_assert_eq(replaced, 0);
	close(cgfd);
}
