/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/apply/rootfs.c: resolution inside a root never leaves it, with openat2 and with
 * the component walk (openat2 made to fail with ENOSYS by a seccomp filter, as on kernels
 * before 5.6). Needs no root, except the tests of resolution tied
 * to a mount, which mount a tmpfs in a mount namespace of their own (skipped without
 * root).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "orh/apply/apply.h"

static char top[PATH_MAX];   /* T */
static char root[PATH_MAX];  /* T/root */
static char outside[PATH_MAX]; /* T/outside: what an escape would reach */

static void mk(const char *rel)
{
	char p[PATH_MAX * 2];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
}

static void ln(const char *target, const char *name)
{
	char p[PATH_MAX * 2];

	snprintf(p, sizeof(p), "%s/%s", root, name);
	cr_assert_eq(symlink(target, p), 0, "symlink %s: %s", p, strerror(errno));
}

static void setup_tree(void)
{
	char p[PATH_MAX * 2];
	int fd;

	snprintf(top, sizeof(top), "/tmp/orh-rootfs.XXXXXX");
	cr_assert_not_null(mkdtemp(top));
	snprintf(root, sizeof(root), "%s/root", top);
	snprintf(outside, sizeof(outside), "%s/outside", top);
	cr_assert_eq(mkdir(root, 0755), 0);
	cr_assert_eq(mkdir(outside, 0755), 0);
	mk("a");
	mk("a/b");
	ln("/a", "abs");                       /* absolute, inside */
	ln(outside, "esc_abs");                /* absolute host path */
	snprintf(p, sizeof(p), "../../../../../../../..%s", outside);
	ln(p, "esc_rel");                      /* climbs above the root */
	ln("../../..", "a/up");                /* .. past the root from a/ */
	ln("loop", "loop");
	ln("/a", "a/b/toabs");                 /* absolute, from a subdirectory */
	ln(outside, "a/b/esc");                /* absolute host path, from a subdirectory */
	snprintf(p, sizeof(p), "%s/file", root);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
}

static void teardown_tree(void)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
}

static bool same_inode(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static bool outside_empty(void)
{
	char cmd[PATH_MAX + 64];

	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", outside);
	return system(cmd) == 0;
}

static void expect_dir(int rootfd, const char *path, bool create, const char *want_rel)
{
	struct orh_err err = { 0 };
	char want[PATH_MAX * 2];
	int fd = -1;
	int r = orh_rootfs_dir(rootfd, path, create, ORH_MOUNT_ANY, &fd, &err);

	cr_assert_eq(r, 0, "resolving '%s': %s", path, err.msg);
	snprintf(want, sizeof(want), "%s%s%s", root, *want_rel ? "/" : "", want_rel);
	cr_assert(same_inode(fd, want), "'%s' should be '%s'", path, want);
	close(fd);
}

static void expect_err(int rootfd, const char *path, bool create, int code)
{
	struct orh_err err = { 0 };
	int fd = -1;
	int r = orh_rootfs_dir(rootfd, path, create, ORH_MOUNT_ANY, &fd, &err);

	cr_assert_eq(r, -code, "resolving '%s': got %d (%s), want -%d", path, r, err.msg, code);
	cr_assert_eq(fd, -1);
	cr_assert_neq(err.msg[0], '\0', "an error must carry a message");
}

/* The same checks for every mode. */
static void suite(void)
{
	struct orh_err err = { 0 };
	char name[NAME_MAX + 1];
	char p[PATH_MAX * 2];
	int rootfd = -1, dfd = -1;

	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	expect_dir(rootfd, "/", false, "");
	expect_dir(rootfd, "a/b", false, "a/b");
	expect_dir(rootfd, "/abs/b", false, "a/b");
	expect_dir(rootfd, "a/./b/../b", false, "a/b");
	expect_dir(rootfd, "../../..", false, "");
	expect_dir(rootfd, "a/up/a", false, "a");
	expect_dir(rootfd, "a/b/toabs/b", false, "a/b");

	/* escapes: without create they do not exist inside the root */
	expect_err(rootfd, "esc_abs", false, ENOENT);
	expect_err(rootfd, "esc_rel/x", false, ENOENT);
	expect_err(rootfd, "loop/x", true, ELOOP);
	expect_err(rootfd, "file/x", true, ENOTDIR);

	/* with create, the directories are made inside the root */
	snprintf(p, sizeof(p), "%s", outside + 1);
	expect_dir(rootfd, "esc_abs", true, p);
	snprintf(p, sizeof(p), "%s/x", outside + 1);
	expect_dir(rootfd, "esc_rel/x", true, p);
	snprintf(p, sizeof(p), "%s", outside + 1);
	expect_dir(rootfd, "a/b/esc", true, p);
	cr_assert(outside_empty(), "nothing may be created in %s", outside);

	/* parent + final name, never followed */
	cr_assert_eq(orh_rootfs_parent(rootfd, "/esc_abs/nccl.conf", true, ORH_MOUNT_ANY, &dfd,
				       name, &err),
		     0, "%s", err.msg);
	cr_assert_str_eq(name, "nccl.conf");
	snprintf(p, sizeof(p), "%s%s", root, outside);
	cr_assert(same_inode(dfd, p));
	close(dfd);
	cr_assert_eq(orh_rootfs_parent(rootfd, "/esc_abs", false, ORH_MOUNT_ANY, &dfd, name, &err),
		     0);
	cr_assert_str_eq(name, "esc_abs");
	cr_assert(same_inode(dfd, root));
	close(dfd);
	cr_assert_eq(orh_rootfs_parent(rootfd, "/a/..", false, ORH_MOUNT_ANY, &dfd, name, &err),
		     -EINVAL);
	cr_assert(outside_empty());
	close(rootfd);
}

Test(rootfs, openat2, .init = setup_tree, .fini = teardown_tree)
{
	suite();
	cr_assert_not(orh_rootfs_fallback_active(), "openat2 works here: no fallback expected");
}

/* Files to read (orh_rootfs_open_file, orh_rootfs_readlink): links followed inside the
 * root, the last one too; what lies above it is never reached; only a regular file is
 * opened, a FIFO without waiting. */
static void file_suite(void)
{
	struct orh_err err = { 0 };
	char p[PATH_MAX * 2], buf[16];
	struct stat st;
	int rootfd = -1, fd = -1;

	snprintf(p, sizeof(p), "%s/a/b/lib.so", root);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "inside", 6), 6);
	close(fd);
	snprintf(p, sizeof(p), "%s/secret", outside);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	ln("/a/b/lib.so", "lib_abs");
	ln("b/lib.so", "a/lib_rel");
	ln("../lib_rel", "a/b/lib_chain");
	snprintf(p, sizeof(p), "../../../../../../../..%s/secret", outside);
	ln(p, "lib_esc");
	snprintf(p, sizeof(p), "%s/fifo", root);
	cr_assert_eq(mkfifo(p, 0644), 0);
	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);

	fd = -1;
	cr_assert_eq(orh_rootfs_open_file(rootfd, "/lib_abs", &fd, &st), 0);
	cr_assert_eq(read(fd, buf, sizeof(buf)), 6, "the file inside the root is read");
	cr_assert(S_ISREG(st.st_mode));
	close(fd);
	cr_assert_eq(orh_rootfs_open_file(rootfd, "a/b/lib_chain", &fd, &st), 0);
	close(fd);
	fd = -1;
	cr_assert_eq(orh_rootfs_open_file(rootfd, "/lib_esc", &fd, &st), -ENOENT,
		     "a link above the root leads to nothing inside it");
	cr_assert_eq(orh_rootfs_open_file(rootfd, "/esc_abs/secret", &fd, &st), -ENOENT);
	cr_assert_eq(orh_rootfs_open_file(rootfd, "/fifo", &fd, &st), -EINVAL,
		     "a FIFO is not opened");
	cr_assert_eq(orh_rootfs_open_file(rootfd, "/a", &fd, &st), -EISDIR);
	cr_assert_eq(orh_rootfs_open_file(rootfd, "/loop", &fd, &st), -ELOOP);
	cr_assert_eq(fd, -1);
	cr_assert_eq(orh_rootfs_readlink(rootfd, "/lib_abs", p, sizeof(p)), 11);
	cr_assert_str_eq(p, "/a/b/lib.so");
	cr_assert_eq(orh_rootfs_readlink(rootfd, "/abs/lib_rel", p, sizeof(p)), 8,
		     "the link's directory resolved inside the root");
	cr_assert_eq(orh_rootfs_readlink(rootfd, "/file", p, sizeof(p)), -EINVAL);
	close(rootfd);
}

Test(rootfs, files_openat2, .init = setup_tree, .fini = teardown_tree)
{
	file_suite();
	cr_assert_not(orh_rootfs_fallback_active());
}

/* openat2 made to fail with ENOSYS by seccomp, in this test's process alone (Criterion
 * runs each test in a process of its own): the kernels without it */
static void openat2_enosys(void)
{
	struct open_how how = { .flags = O_PATH };
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

	cr_assert_not_null(ctx);
	cr_assert_eq(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0), 0);
	cr_assert_eq(seccomp_load(ctx), 0, "seccomp_load failed");
	seccomp_release(ctx);
	errno = 0;
	cr_assert_eq(syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how)), -1);
	cr_assert_eq(errno, ENOSYS, "the filter must make openat2 fail with ENOSYS");
}

Test(rootfs, files_seccomp_enosys, .init = setup_tree, .fini = teardown_tree)
{
	openat2_enosys();
	file_suite();
	cr_assert(orh_rootfs_fallback_active(), "ENOSYS must switch to the fallback");
}

/* Without openat2 the component walk is chosen by itself, and resolves the same way. */
Test(rootfs, seccomp_enosys, .init = setup_tree, .fini = teardown_tree)
{
	openat2_enosys();
	cr_assert_not(orh_rootfs_fallback_active());
	suite();
	cr_assert(orh_rootfs_fallback_active(), "ENOSYS must switch to the fallback");
}

/* ---- resolution tied to a mount ------------------------------------------------ */

/* A mount namespace of this test's own (Criterion runs each test in its own process). */
static void own_mount_namespace(void)
{
	if (unshare(CLONE_NEWNS) < 0)
		cr_skip_test("no mount namespace of our own here (%s): needs root",
			     strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
}

static char vol[PATH_MAX * 2]; /* T/root/vol: a tmpfs, "a volume" */

/* The tree of setup_tree, and a tmpfs at /vol; /etc -> /vol; /vol/sub on the tmpfs. */
static void setup_volume(void)
{
	setup_tree();
	own_mount_namespace();
	mk("vol");
	snprintf(vol, sizeof(vol), "%s/vol", root);
	cr_assert_eq(mount("tmpfs", vol, "tmpfs", 0, "mode=0755"), 0, "%s", strerror(errno));
	mk("vol/sub");
	ln("/vol", "etc");
	ln("/vol/sub/deeper", "etc_new");
}

static void teardown_volume(void)
{
	umount2(vol, MNT_DETACH);
	teardown_tree();
}

static bool exists(const char *rel)
{
	char p[PATH_MAX * 3];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	return lstat(p, &st) == 0;
}

static void expect_on(int rootfd, const char *path, bool create, uint64_t mnt, int code)
{
	struct orh_err err = { 0 };
	int fd = -1;
	int r = orh_rootfs_dir(rootfd, path, create, mnt, &fd, &err);

	cr_assert_eq(r, -code, "'%s' (create %d): got %d (%s), want -%d", path, create, r,
		     err.msg, code);
	if (code) {
		cr_assert_eq(fd, -1);
		cr_assert_neq(err.msg[0], '\0', "an error must carry a message");
	} else {
		uint64_t id = 0;

		cr_assert_eq(orh_fd_mount_id(fd, &id), 0);
		cr_assert_eq(id, mnt, "'%s' must be on mount %llu", path, (unsigned long long)mnt);
		close(fd);
	}
}

static void mount_suite(void)
{
	struct orh_err err = { 0 };
	uint64_t rootmnt = 0, volmnt = 0;
	int rootfd = -1, volfd = -1;
	bool shared = true;
	struct orh_target self;

	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	volfd = open(vol, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(volfd, 0);
	cr_assert_eq(orh_fd_mount_id(rootfd, &rootmnt), 0);
	cr_assert_eq(orh_fd_mount_id(volfd, &volmnt), 0);
	cr_assert_neq(rootmnt, volmnt, "the tmpfs must be a mount of its own");

	/* on the root's mount: fine; led onto the volume: refused, nothing made there */
	expect_on(rootfd, "a/b", false, rootmnt, 0);
	expect_on(rootfd, "vol", false, rootmnt, EXDEV);
	expect_on(rootfd, "etc", true, rootmnt, EXDEV);
	expect_on(rootfd, "etc/new/x", true, rootmnt, EXDEV);
	cr_assert_not(exists("vol/new"), "nothing may be created on the volume");
	expect_on(rootfd, "etc_new", true, rootmnt, EXDEV);
	cr_assert_not(exists("vol/sub/deeper"), "nothing may be created on the volume");
	/* passing through the volume is no write: only where the result lies counts */
	expect_on(rootfd, "vol/../a/made", true, rootmnt, 0);
	cr_assert(exists("a/made"));
	/* tied to the volume's mount, the same paths are fine and the root's are not */
	expect_on(rootfd, "etc/sub/made", true, volmnt, 0);
	cr_assert(exists("vol/sub/made"));
	expect_on(rootfd, "a", false, volmnt, EXDEV);
	/* any mount */
	expect_dir(rootfd, "etc/sub", false, "vol/sub");

	/* shared or not, as /proc/<pid>/mountinfo says */
	cr_assert_eq(orh_target_open(getpid(), &self, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_mount_is_shared(&self, volmnt, &shared, &err), 0, "%s", err.msg);
	cr_assert_not(shared, "a private tmpfs is not shared");
	cr_assert_eq(mount(NULL, vol, NULL, MS_SHARED, NULL), 0, "%s", strerror(errno));
	cr_assert_eq(orh_mount_is_shared(&self, volmnt, &shared, &err), 0, "%s", err.msg);
	cr_assert(shared, "made shared: shared");
	cr_assert_eq(orh_mount_is_shared(&self, UINT64_MAX, &shared, &err), -ENOENT);
	orh_target_close(&self);
	close(volfd);
	close(rootfd);
}

Test(rootfs_mounts, openat2, .init = setup_volume, .fini = teardown_volume)
{
	mount_suite();
	cr_assert_not(orh_rootfs_fallback_active());
}

Test(rootfs_mounts, seccomp_enosys, .init = setup_volume, .fini = teardown_volume)
{
	openat2_enosys();
	mount_suite();
	cr_assert(orh_rootfs_fallback_active(), "ENOSYS must switch to the fallback");
}

/* orh_rootfs_dir_probe: where orh_rootfs_dir(create) would find or make a directory, with
 * nothing made: the root's mount is fine, a path that leads onto the volume (through a
 * symlink, a dangling one too) is -EXDEV */
static void expect_probe(int rootfd, const char *path, uint64_t mnt, int code, const char *at)
{
	struct orh_err err = { 0 };
	char p[PATH_MAX * 3];
	int fd = -1;
	int r = orh_rootfs_dir_probe(rootfd, path, mnt, &fd, &err);

	cr_assert_eq(r, -code, "probe '%s': got %d (%s), want -%d", path, r, err.msg, code);
	if (code) {
		cr_assert_eq(fd, -1);
		cr_assert_neq(err.msg[0], '\0', "an error must carry a message");
		return;
	}
	snprintf(p, sizeof(p), "%s/%s", root, at);
	cr_assert(same_inode(fd, p), "probe '%s': the directory found is %s", path, at);
	close(fd);
}

static void probe_suite(void)
{
	struct orh_err err = { 0 };
	uint64_t rootmnt = 0, volmnt = 0;
	int rootfd = -1, volfd = -1;

	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	volfd = open(vol, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(volfd, 0);
	cr_assert_eq(orh_fd_mount_id(rootfd, &rootmnt), 0);
	cr_assert_eq(orh_fd_mount_id(volfd, &volmnt), 0);
	ln("/vol/sub/ibd", "a/ibd");
	expect_probe(rootfd, "a/b", rootmnt, 0, "a/b");
	expect_probe(rootfd, "a/new/deeper", rootmnt, 0, "a");
	cr_assert_not(exists("a/new"), "a probe makes nothing");
	expect_probe(rootfd, "etc/libibverbs.d", rootmnt, EXDEV, NULL);
	expect_probe(rootfd, "a/ibd/x", rootmnt, EXDEV, NULL);
	expect_probe(rootfd, "etc_new", rootmnt, EXDEV, NULL);
	expect_probe(rootfd, "vol", rootmnt, EXDEV, NULL);
	cr_assert_not(exists("vol/libibverbs.d") || exists("vol/sub/ibd") ||
		      exists("vol/sub/deeper"), "nothing may be created on the volume");
	/* tied to the volume, or to any mount: found where the walk would make it */
	expect_probe(rootfd, "etc/libibverbs.d", volmnt, 0, "vol");
	expect_probe(rootfd, "a/ibd/x", ORH_MOUNT_ANY, 0, "vol/sub");
	close(volfd);
	close(rootfd);
}

Test(rootfs_mounts, probe_openat2, .init = setup_volume, .fini = teardown_volume)
{
	probe_suite();
	cr_assert_not(orh_rootfs_fallback_active());
}

Test(rootfs_mounts, probe_seccomp_enosys, .init = setup_volume, .fini = teardown_volume)
{
	openat2_enosys();
	probe_suite();
	cr_assert(orh_rootfs_fallback_active(), "ENOSYS must switch to the fallback");
}

/* statx's mount id and the one of /proc/self/fdinfo (used by the walk) agree */
Test(rootfs_mounts, mount_ids_agree, .init = setup_volume, .fini = teardown_volume)
{
	uint64_t a = 0, b = 0;
	int fd = open(vol, O_PATH | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(orh_fd_mount_id(fd, &a), 0);
	/* the first resolution without openat2 switches to the walk, which reads fdinfo */
	openat2_enosys();
	{
		struct orh_err err = { 0 };
		int dfd = -1;

		cr_assert_eq(orh_rootfs_dir(fd, ".", false, ORH_MOUNT_ANY, &dfd, &err), 0, "%s", err.msg);
		close(dfd);
	}
	cr_assert(orh_rootfs_fallback_active());
	cr_assert_eq(orh_fd_mount_id(fd, &b), 0);
	cr_assert_eq(a, b);
	close(fd);
}

/* The container's /dev: the root's own directory, made when missing, never a symlink */
Test(rootfs_mounts, devdir, .init = setup_tree, .fini = teardown_tree)
{
	struct orh_err err = { 0 };
	int rootfd = -1, fd = -1;
	char p[PATH_MAX * 2];

	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_rootfs_devdir(rootfd, &fd, &err), 0, "%s", err.msg);
	snprintf(p, sizeof(p), "%s/dev", root);
	cr_assert(same_inode(fd, p), "a missing /dev is made in the root");
	close(fd);
	cr_assert_eq(rmdir(p), 0);
	ln(outside, "dev");
	fd = -1;
	cr_assert_lt(orh_rootfs_devdir(rootfd, &fd, &err), 0, "a symlinked /dev is refused");
	cr_assert_eq(fd, -1);
	cr_assert(outside_empty());
	close(rootfd);
}
