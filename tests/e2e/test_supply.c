/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/apply/supply.c: the node's RDMA userspace is made and written only on the
 * container's own storage (docs/security.md, section 3). A root tree with a tmpfs at /vol
 * ("a volume") in a mount namespace of this test's own (root needed: skipped without it),
 * the root bound onto itself as the runtime leaves it; the checks that run before anything
 * is made, live (orh_supply_check_live, this process standing in for the container) and
 * for the spec edit (orh_supply_check_spec), with openat2 and with the component walk.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/apply/apply.h"
#include "orh/apply/supply.h"

static char top[PATH_MAX];      /* T */
static char root[PATH_MAX];     /* T/root, bound onto itself */
static char vol[PATH_MAX + 8];  /* T/root/vol: a tmpfs */
static char src[PATH_MAX + 8];  /* T/node.so: a file of the node */

static void path_of(char *p, size_t size, const char *rel)
{
	snprintf(p, size, "%s/%s", root, rel);
}

static void mk(const char *rel)
{
	char p[PATH_MAX * 2];

	path_of(p, sizeof(p), rel);
	cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
}

static void ln(const char *target, const char *name)
{
	char p[PATH_MAX * 2];

	path_of(p, sizeof(p), name);
	cr_assert_eq(symlink(target, p), 0, "symlink %s: %s", p, strerror(errno));
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	close(fd);
}

static bool exists(const char *rel)
{
	char p[PATH_MAX * 2];
	struct stat st;

	path_of(p, sizeof(p), rel);
	return lstat(p, &st) == 0;
}

/* T/root with a/, a tmpfs at vol/ (vol/sub on it), etc -> /vol, run -> /vol */
static void setup(void)
{
	snprintf(top, sizeof(top), "/tmp/orh-supply.XXXXXX");
	cr_assert_not_null(mkdtemp(top));
	snprintf(root, sizeof(root), "%s/root", top);
	snprintf(vol, sizeof(vol), "%s/vol", root);
	snprintf(src, sizeof(src), "%s/node.so", top);
	cr_assert_eq(mkdir(root, 0755), 0);
	touch(src);
	if (unshare(CLONE_NEWNS) < 0)
		cr_skip_test("no mount namespace of our own here (%s): needs root",
			     strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
	cr_assert_eq(mount(root, root, NULL, MS_BIND, NULL), 0, "%s", strerror(errno));
	mk("a");
	mk("vol");
	cr_assert_eq(mount("tmpfs", vol, "tmpfs", 0, "mode=0755"), 0, "%s", strerror(errno));
	mk("vol/sub");
	ln("/vol", "etc");
	ln("/vol", "run");
}

static void teardown(void)
{
	char cmd[PATH_MAX + 32];

	umount2(root, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
}

/* openat2 fails with ENOSYS from here on: the component walk resolves */
static void openat2_enosys(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

	cr_assert_not_null(ctx);
	cr_assert_eq(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0), 0);
	cr_assert_eq(seccomp_load(ctx), 0);
	seccomp_release(ctx);
}

static struct orh_supply_mount one(const char *dst, const char *from)
{
	struct orh_supply_mount m;

	snprintf(m.src, sizeof(m.src), "%s", from);
	snprintf(m.dst, sizeof(m.dst), "%s", dst);
	return m;
}

/* orh_supply_check_live on one mount at dst (libibverbs given too: verbs): -code, and a
 * message holding want */
static void expect_live(const struct orh_target *t, int rootfd, const char *dst, bool verbs,
			int code, const char *want)
{
	struct orh_supply s = { .wanted = true, .supply = true, .verbs = verbs };
	struct orh_supply_mount m = one(dst, src);
	struct orh_err err = { 0 };
	int r = orh_supply_check_live(t, rootfd, &s, &m, 1, &err);

	cr_assert_eq(r, -code, "%s: got %d (%s), want -%d", dst, r, err.msg, code);
	if (want)
		cr_assert_not_null(strstr(err.msg, want), "%s: '%s' must say '%s'", dst, err.msg,
				   want);
}

static void live_suite(void)
{
	struct orh_err err = { 0 };
	struct orh_target self;
	char p[PATH_MAX * 2], other[PATH_MAX + 16];
	int rootfd = -1;

	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_target_open(getpid(), &self, &err), 0, "%s", err.msg);
	/* on the root's own mount: fine, and nothing is made by the check */
	expect_live(&self, rootfd, "/a/lib/x.so", false, 0, NULL);
	cr_assert_not(exists("a/lib"), "the check makes nothing");
	/* led onto the volume: refused, naming the directory and the mount */
	expect_live(&self, rootfd, "/etc/libibverbs.d/oci-rdma-hook-x.driver", false, EXDEV,
		    "'/etc/libibverbs.d' leads onto another mount than the container's root "
		    "filesystem (mount ");
	expect_live(&self, rootfd, "/run/oci-rdma-hook/lib/x.so", false, EXDEV,
		    "at '/vol') (a volume?)");
	/* libibverbs given: its loader cache is written in /etc, on the volume here */
	expect_live(&self, rootfd, "/a/lib/x.so", true, EXDEV, "'/etc' leads onto another mount");
	cr_assert_not(exists("vol/libibverbs.d") || exists("vol/oci-rdma-hook"),
		      "nothing may be created on the volume");
	/* a file of another mount where a mount point would be: not mounted over, unless it
	 * is the spec's mount of the node's own file */
	touch((path_of(p, sizeof(p), "a/f"), p));
	snprintf(other, sizeof(other), "%s/other", top);
	touch(other);
	cr_assert_eq(mount(other, p, NULL, MS_BIND, NULL), 0, "%s", strerror(errno));
	expect_live(&self, rootfd, "/a/f", false, EXDEV, "/a/f is a file of another mount");
	cr_assert_eq(umount2(p, MNT_DETACH), 0);
	cr_assert_eq(mount(src, p, NULL, MS_BIND, NULL), 0, "%s", strerror(errno));
	expect_live(&self, rootfd, "/a/f", false, 0, NULL);
	cr_assert_eq(umount2(p, MNT_DETACH), 0);
	/* the root's mount shared: a mount in it would reach its peers */
	cr_assert_eq(mount(NULL, root, NULL, MS_SHARED, NULL), 0, "%s", strerror(errno));
	expect_live(&self, rootfd, "/a/lib/x.so", false, EXDEV,
		    "the container's root filesystem is a shared mount");
	orh_target_close(&self);
	close(rootfd);
}

Test(supply, live_openat2, .init = setup, .fini = teardown)
{
	live_suite();
	cr_assert_not(orh_rootfs_fallback_active());
}

Test(supply, live_seccomp_enosys, .init = setup, .fini = teardown)
{
	openat2_enosys();
	live_suite();
	cr_assert(orh_rootfs_fallback_active(), "ENOSYS must switch to the fallback");
}

/* Nothing half-done: what orh_supply_mount_live made goes again, its mounts and the mount
 * points it made; on a failure part way, by itself */
Test(supply, mounts_undone, .init = setup, .fini = teardown)
{
	struct orh_supply_mount m[2] = { one("/a/lib/x.so", src), one("/a/lib/y.so", src) };
	struct orh_supply_result res;
	struct orh_err err = { 0 };
	struct orh_target self;
	char p[PATH_MAX * 2];
	struct stat a, b;
	int rootfd = -1;

	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_target_open(getpid(), &self, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_supply_mount_live(&self, rootfd, m, 2, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.mounted, 2);
	path_of(p, sizeof(p), "a/lib/y.so");
	cr_assert(stat(p, &a) == 0 && stat(src, &b) == 0 && a.st_ino == b.st_ino,
		  "the node's file is mounted there");
	orh_supply_undo(&self, rootfd, m, 2, &res);
	cr_assert_not(exists("a/lib/x.so") || exists("a/lib/y.so"),
		      "the mounts and their mount points are gone");
	/* the second mount point is a directory: refused, the first goes again */
	mk("a/lib/dir");
	m[1] = one("/a/lib/dir", src);
	cr_assert_lt(orh_supply_mount_live(&self, rootfd, m, 2, &res, &err), 0);
	cr_assert_not_null(strstr(err.msg, "/a/lib/dir is there and not a regular file"), "%s",
			   err.msg);
	cr_assert_not(exists("a/lib/x.so"), "no mount point is left half-done");
	orh_target_close(&self);
	close(rootfd);
}

/* orh_supply_check_spec on one mount at dst, the spec's text given */
static void expect_spec(int rootfd, const char *spec_text, const char *dst, bool verbs,
			int code, const char *want)
{
	struct orh_supply s = { .wanted = true, .supply = true, .verbs = verbs };
	struct orh_supply_mount m = one(dst, src);
	struct orh_err err = { 0 };
	json_error_t jerr;
	json_t *spec = json_loads(spec_text, 0, &jerr);
	int r;

	cr_assert_not_null(spec, "%s", jerr.text);
	r = orh_supply_check_spec(rootfd, spec, &s, &m, 1, &err);
	json_decref(spec);
	cr_assert_eq(r, -code, "%s: got %d (%s), want -%d", dst, r, err.msg, code);
	if (want)
		cr_assert_not_null(strstr(err.msg, want), "%s: '%s' must say '%s'", dst, err.msg,
				   want);
}

Test(supply, spec_openat2, .init = setup, .fini = teardown)
{
	struct orh_err err = { 0 };
	char spec[PATH_MAX * 2];
	int rootfd = -1;

	/* the volume is not mounted yet where the spec is edited: the spec says where */
	cr_assert_eq(umount2(vol, MNT_DETACH), 0);
	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	expect_spec(rootfd, "{\"mounts\": [{\"destination\": \"/vol\", \"source\": \"/h\"}]}",
		    "/a/lib/x.so", false, 0, NULL);
	cr_assert_not(exists("a/lib"), "the check makes nothing");
	expect_spec(rootfd, "{\"mounts\": [{\"destination\": \"/vol\", \"source\": \"/h\"}]}",
		    "/etc/libibverbs.d/oci-rdma-hook-x.driver", false, EXDEV,
		    "/etc/libibverbs.d/oci-rdma-hook-x.driver leads to "
		    "'/vol/libibverbs.d/oci-rdma-hook-x.driver', in the spec's mount at '/vol'");
	expect_spec(rootfd, "{\"mounts\": [{\"destination\": \"/vol/\", \"source\": \"/h\"}]}",
		    "/run/oci-rdma-hook/lib/x.so", false, EXDEV, "in the spec's mount at '/vol/'");
	/* libibverbs given: /etc/ld.so.cache is checked too */
	expect_spec(rootfd, "{\"mounts\": [{\"destination\": \"/etc\", \"source\": \"/h\"}]}",
		    "/a/lib/x.so", true, EXDEV, "/etc/ld.so.cache leads to '/vol/ld.so.cache'");
	/* a mount of the spec above the destination, or a destination that cannot be told */
	expect_spec(rootfd, "{\"mounts\": [{\"destination\": \"/a\", \"source\": \"/h\"}]}",
		    "/a/lib/x.so", false, EXDEV, "in the spec's mount at '/a'");
	expect_spec(rootfd, "{\"mounts\": [{\"destination\": \"a\", \"source\": \"/h\"}]}",
		    "/a/lib/x.so", false, EXDEV, "in the spec's mount at 'a'");
	/* the supply's own entry (an earlier edit of this spec) is no volume */
	snprintf(spec, sizeof(spec), "{\"mounts\": [{\"destination\": \"/a/lib/x.so\", "
		 "\"source\": \"%s\"}]}", src);
	expect_spec(rootfd, spec, "/a/lib/x.so", false, 0, NULL);
	expect_spec(rootfd, "{\"mounts\": [{\"destination\": \"/a/lib/x.so\", \"source\": "
		    "\"/h\"}]}", "/a/lib/x.so", false, EXDEV, NULL);
	/* a shared root: the runtime's mounts in it would reach the host */
	expect_spec(rootfd, "{\"linux\": {\"rootfsPropagation\": \"rshared\"}}", "/a/lib/x.so",
		    false, EXDEV, "field 'linux.rootfsPropagation' is 'rshared'");
	expect_spec(rootfd, "{\"linux\": {\"rootfsPropagation\": \"rslave\"}}", "/a/lib/x.so",
		    false, 0, NULL);
	close(rootfd);
}

Test(supply, spec_on_another_mount, .init = setup, .fini = teardown)
{
	struct orh_err err = { 0 };
	int rootfd = -1;

	/* a mount inside the root already (not the spec's): its storage is not the root's */
	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	expect_spec(rootfd, "{}", "/etc/libibverbs.d/oci-rdma-hook-x.driver", false, EXDEV,
		    "'/vol/libibverbs.d' leads onto another mount than the container's root "
		    "filesystem");
	close(rootfd);
}

Test(supply, spec_without_openat2, .init = setup, .fini = teardown)
{
	struct orh_err err = { 0 };
	int rootfd = -1;

	/* where a path leads cannot be told without openat2: refused, the stage does it */
	openat2_enosys();
	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
	expect_spec(rootfd, "{}", "/a/lib/x.so", false, ENOSYS,
		    "/a/lib/x.so: where it leads in the container's root cannot be told");
	close(rootfd);
}
