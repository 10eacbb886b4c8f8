/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/base/atomic.c: the replacement of a directory entry under a temporary name
 * (orh_replace_at) and the file writer built on it (orh_write_atomic). Failures of the
 * system calls are made with seccomp filters, in the test's own process. No root needed;
 * the device node case skips where mknod is not permitted. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "orh/base/atomic.h"

static char dir[64];
static int dfd = -1;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/orh-atomic.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dfd, 0);
}

static void teardown(void)
{
	char cmd[128];

	if (dfd >= 0)
		close(dfd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* The names in the directory, sorted, joined by blanks. */
static char *entries(void)
{
	static char buf[4096];
	struct dirent **list = NULL;
	int n = scandir(dir, &list, NULL, alphasort);

	cr_assert_geq(n, 0);
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(list[i]->d_name, ".") && strcmp(list[i]->d_name, "..")) {
			if (buf[0])
				strcat(buf, " ");
			strcat(buf, list[i]->d_name);
		}
		free(list[i]);
	}
	free(list);
	return buf;
}

static void put(const char *name, const char *text, mode_t mode)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

static char *read_fd(int fd)
{
	static char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	cr_assert_geq(n, 0);
	buf[n] = '\0';
	return buf;
}

static char *slurp(const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	char *s;

	cr_assert_geq(fd, 0, "%s: %s", name, strerror(errno));
	s = read_fd(fd);
	close(fd);
	return s;
}

/* From here on, system call `name` fails with e; only when its flags argument (number
 * flags_arg) has `flag`, when flag is not 0. A name the architecture lacks is skipped. */
static void deny(const char *name, int e, unsigned flags_arg, unsigned flag)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int nr = seccomp_syscall_resolve_name(name);
	int r;

	cr_assert_not_null(ctx);
	if (nr == __NR_SCMP_ERROR || nr < 0) {
		seccomp_release(ctx);
		return;
	}
	if (flag)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(e), nr, 1,
				     SCMP_CMP(flags_arg, SCMP_CMP_MASKED_EQ, flag, flag));
	else
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(e), nr, 0);
	cr_assert_eq(r, 0, "seccomp_rule_add %s", name);
	cr_assert_eq(seccomp_load(ctx), 0, "seccomp_load failed");
	seccomp_release(ctx);
}

static int fill_tail(int fd, void *arg, struct orh_err *err)
{
	int r = orh_write_all(fd, arg, strlen(arg));

	return r < 0 ? orh_fail(err, r, "tail") : 0;
}

static int fill_fails(int fd, void *arg, struct orh_err *err)
{
	(void)arg;
	/* half written when it fails */
	if (orh_write_all(fd, "half", 4) < 0)
		return orh_fail(err, EIO, "cannot even write half");
	return orh_fail(err, EIO, "the callback's own failure");
}

Test(atomic, new_file_with_content_owner_and_mode, .init = setup, .fini = teardown)
{
	struct orh_replace how = {
		.type = S_IFREG, .mode = 0640, .data = "head ", .len = 5,
		.fill = fill_tail, .arg = "tail\n", .chown = true, .uid = geteuid(),
		.gid = getegid(), .durable = true,
	};
	struct orh_err err = { 0 };
	struct stat st;

	cr_assert_eq(orh_replace_at(dfd, "f", &how, &err), 0, "%s", err.msg);
	cr_assert_str_eq(slurp("f"), "head tail\n");
	cr_assert_eq(fstatat(dfd, "f", &st, 0), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0640);
	cr_assert_eq(st.st_uid, geteuid());
	cr_assert_str_eq(entries(), "f", "no temporary left");
	cr_assert_eq(how.create_errno, 0);
}

/* The old inode is never written: a reader that opened it keeps the whole old text, the
 * name leads to the whole new one. */
Test(atomic, target_replaced_atomically, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFREG, .mode = 0644, .data = "new text\n", .len = 9 };
	struct orh_err err = { 0 };
	struct stat before, after;
	int old_fd;

	put("f", "old text, longer than the new one\n", 0644);
	old_fd = openat(dfd, "f", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(old_fd, 0);
	cr_assert_eq(fstat(old_fd, &before), 0);

	cr_assert_eq(orh_replace_at(dfd, "f", &how, &err), 0, "%s", err.msg);
	cr_assert_str_eq(read_fd(old_fd), "old text, longer than the new one\n");
	cr_assert_str_eq(slurp("f"), "new text\n");
	cr_assert_eq(fstatat(dfd, "f", &after, 0), 0);
	cr_assert_neq(after.st_ino, before.st_ino, "a new inode took the name");
	cr_assert_str_eq(entries(), "f");
	close(old_fd);
}

/* A symlink at the name is replaced, never followed. */
Test(atomic, symlink_replaced_not_followed, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFREG, .mode = 0600, .data = "x", .len = 1 };
	struct orh_err err = { 0 };
	struct stat st;

	put("victim", "untouched", 0600);
	cr_assert_eq(symlinkat("victim", dfd, "f"), 0);
	cr_assert_eq(orh_replace_at(dfd, "f", &how, &err), 0, "%s", err.msg);
	cr_assert_eq(fstatat(dfd, "f", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_str_eq(slurp("victim"), "untouched");
	cr_assert_str_eq(entries(), "f victim");
}

Test(atomic, failing_callback_leaves_no_temporary, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFREG, .mode = 0644, .fill = fill_fails };
	struct orh_err err = { 0 };
	struct stat before, after;

	put("f", "old\n", 0644);
	cr_assert_eq(fstatat(dfd, "f", &before, 0), 0);
	cr_assert_eq(orh_replace_at(dfd, "f", &how, &err), -EIO);
	cr_assert_str_eq(err.msg, "the callback's own failure");
	cr_assert_str_eq(entries(), "f", "the temporary file is removed");
	cr_assert_str_eq(slurp("f"), "old\n");
	cr_assert_eq(fstatat(dfd, "f", &after, 0), 0);
	cr_assert_eq(after.st_ino, before.st_ino);
}

/* renameat and renameat2 fail (seccomp): the old file is intact, the temporary gone. */
Test(atomic, failing_rename_leaves_old_file, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFREG, .mode = 0644, .data = "new\n", .len = 4,
				   .durable = true };
	struct orh_err err = { 0 };

	put("f", "old\n", 0600);
	deny("renameat", EIO, 0, 0);
	deny("renameat2", EIO, 0, 0);
	deny("rename", EIO, 0, 0);
	cr_assert_eq(orh_replace_at(dfd, "f", &how, &err), -EIO);
	cr_assert(strstr(err.msg, "renaming '.f.orh-") && strstr(err.msg, "' over 'f'"), "%s",
		  err.msg);
	cr_assert_str_eq(slurp("f"), "old\n");
	cr_assert_str_eq(entries(), "f", "the temporary file is removed");
}

/* The temporary cannot be made (a read-only file system): create_errno says why, for the
 * caller that has another way; nothing is left. */
Test(atomic, creation_failure_reported, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFREG, .mode = 0644, .data = "x", .len = 1,
				   .what = "/etc/thing" };
	struct orh_err err = { 0 };

	deny("openat", EROFS, 2, O_CREAT);
	cr_assert_eq(orh_replace_at(dfd, "f", &how, &err), -EROFS);
	cr_assert_eq(how.create_errno, EROFS);
	cr_assert(strstr(err.msg, "'/etc/thing': creating the temporary file"), "%s", err.msg);
	cr_assert_str_eq(entries(), "");
}

/* A failure after the creation is not the creation's: create_errno stays 0. */
Test(atomic, later_failure_not_a_creation_failure, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFREG, .mode = 0644, .data = "x", .len = 1 };
	struct orh_err err = { 0 };

	deny("fchmod", EPERM, 0, 0);
	cr_assert_eq(orh_replace_at(dfd, "f", &how, &err), -EPERM);
	cr_assert_eq(how.create_errno, 0);
	cr_assert(strstr(err.msg, "setting the mode of 'f'"), "%s", err.msg);
	cr_assert_str_eq(entries(), "");
}

Test(atomic, not_a_plain_name, .init = setup, .fini = teardown)
{
	const char *bad[] = { "", ".", "..", "a/b", "/f" };
	struct orh_replace how = { .type = S_IFREG };
	struct orh_replace fifo = { .type = S_IFIFO };
	struct orh_err err = { 0 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(orh_replace_at(dfd, bad[i], &how, &err), -EINVAL, "'%s'", bad[i]);
	cr_assert_eq(orh_replace_at(dfd, "f", &fifo, &err), -EINVAL);
	cr_assert_str_eq(entries(), "");
}

/* A device node replaces a file, with its numbers and exact mode (umask 0, as the hook
 * sets it), owned by root. */
Test(atomic, device_node, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFCHR, .rdev = makedev(1, 3), .mode = 0666,
				   .chown = true, .what = "/dev/thing" };
	struct orh_err err = { 0 };
	struct stat st;
	mode_t old_umask;
	int r;

	put("null", "a file in the way", 0600);
	old_umask = umask(0);
	r = orh_replace_at(dfd, "null", &how, &err);
	umask(old_umask);
	if (r == -EPERM && how.create_errno == EPERM) {
		cr_assert(strstr(err.msg, "mknod '/dev/thing' (1:3)"), "%s", err.msg);
		cr_assert_str_eq(entries(), "null");
		cr_skip_test("mknod is not permitted here: %s", err.msg);
	}
	cr_assert_eq(r, 0, "%s", err.msg);
	cr_assert_eq(fstatat(dfd, "null", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert(S_ISCHR(st.st_mode));
	cr_assert_eq(st.st_rdev, makedev(1, 3));
	cr_assert_eq(st.st_mode & 07777, 0666);
	cr_assert_eq(st.st_uid, 0);
	cr_assert_eq(st.st_gid, 0);
	cr_assert_str_eq(entries(), "null");
}

Test(atomic, device_node_has_no_content, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFCHR, .rdev = makedev(1, 3), .data = "x",
				   .len = 1 };
	struct orh_err err = { 0 };

	cr_assert_eq(orh_replace_at(dfd, "null", &how, &err), -EINVAL);
	cr_assert_str_eq(entries(), "");
}

/* A symlink replaces a file (and a symlink), with its target as given; one without a
 * target is refused. */
Test(atomic, symlink_entry, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFLNK, .data = "/some/where/else" };
	struct orh_replace none = { .type = S_IFLNK };
	struct orh_err err = { 0 };
	char target[64] = "";

	put("l", "a file in the way", 0600);
	cr_assert_eq(orh_replace_at(dfd, "l", &how, &err), 0, "%s", err.msg);
	cr_assert_eq(readlinkat(dfd, "l", target, sizeof(target) - 1), 16);
	cr_assert_str_eq(target, "/some/where/else");
	how.data = "again";
	cr_assert_eq(orh_replace_at(dfd, "l", &how, &err), 0, "%s", err.msg);
	memset(target, 0, sizeof(target));
	cr_assert_eq(readlinkat(dfd, "l", target, sizeof(target) - 1), 5);
	cr_assert_str_eq(target, "again");
	cr_assert_eq(orh_replace_at(dfd, "m", &none, &err), -EINVAL);
	cr_assert_str_eq(entries(), "l");
}

/* orh_write_atomic keeps the mode of the file it replaces and refuses to replace what is
 * not a regular file. */
Test(atomic, write_atomic_keeps_mode, .init = setup, .fini = teardown)
{
	struct orh_err err = { 0 };
	struct stat st;

	put("config.json", "{}", 0604);
	cr_assert_eq(orh_write_atomic(dfd, "config.json", "{\"a\":1}", 7, 0600, &err), 0, "%s",
		     err.msg);
	cr_assert_str_eq(slurp("config.json"), "{\"a\":1}");
	cr_assert_eq(fstatat(dfd, "config.json", &st, 0), 0);
	cr_assert_eq(st.st_mode & 07777, 0604);
	cr_assert_eq(orh_write_atomic(dfd, "new.json", "x", 1, 0640, &err), 0, "%s", err.msg);
	cr_assert_eq(fstatat(dfd, "new.json", &st, 0), 0);
	cr_assert_eq(st.st_mode & 07777, 0640);

	cr_assert_eq(mkdirat(dfd, "d", 0755), 0);
	cr_assert_eq(orh_write_atomic(dfd, "d", "x", 1, 0600, &err), -EINVAL);
	cr_assert(strstr(err.msg, "'d' exists and is not a regular file"), "%s", err.msg);
	cr_assert_str_eq(entries(), "config.json d new.json");
}

/* What a killed writer left for this name is removed; nothing else. */
Test(atomic, write_atomic_sweeps_stale_temporaries, .init = setup, .fini = teardown)
{
	struct orh_err err = { 0 };

	put(".f.orh-0123456789abcdef", "left by a kill", 0600);
	put(".f.orh-0123", "not our form", 0600);
	put(".g.orh-0123456789abcdef", "another name's", 0600);
	cr_assert_eq(mkdirat(dfd, ".f.orh-fedcba9876543210", 0700), 0);
	cr_assert_eq(orh_write_atomic(dfd, "f", "x", 1, 0600, &err), 0, "%s", err.msg);
	cr_assert_str_eq(entries(), ".f.orh-0123 .f.orh-fedcba9876543210 .g.orh-0123456789abcdef f");
}

/* Without sweep (a rootfs other containers' hooks may write at the same time) another
 * writer's temporary stays. */
Test(atomic, no_sweep_keeps_other_temporaries, .init = setup, .fini = teardown)
{
	struct orh_replace how = { .type = S_IFREG, .mode = 0644, .data = "x", .len = 1 };
	struct orh_err err = { 0 };

	put(".f.orh-0123456789abcdef", "another writer's", 0600);
	cr_assert_eq(orh_replace_at(dfd, "f", &how, &err), 0, "%s", err.msg);
	cr_assert_str_eq(entries(), ".f.orh-0123456789abcdef f");
}
