/* SPDX-License-Identifier: Apache-2.0 */
/*
 * orh_devices_apply (src/apply/devices.c) on a container root filesystem in /dev/shm:
 * nodes made with the plan's numbers and mode, kept when right, replaced (and said) when
 * not; a directory in the way, a /dev/infiniband that leads elsewhere, one on another
 * mount; and where mknod is not permitted, the host's node bound instead, or an error
 * when there is none. Without root the cases that make device nodes are skipped; the
 * refusals run anyway (CAP_MKNOD is dropped where it is held). tests/e2e/hook.sh and
 * security.sh run the same in real containers.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "orh/apply/devices.h"
#include "orh/base/rootfs.h"
#include "orh/apply/target.h"

static char dir[128];   /* /dev/shm/orh-devices-XXXXXX */
static char root[192];  /* dir/root: the container's root filesystem */
static char host[192];  /* dir/host: the host's root, for the bind fallback */
static int rootfd = -1;

/* dir/where/rel */
static const char *at(const char *where, const char *rel)
{
	static char p[512];

	snprintf(p, sizeof(p), "%s/%s/%s", dir, where, rel);
	return p;
}

static void setup(void)
{
	struct orh_err err = { 0 };

	snprintf(dir, sizeof(dir), "/dev/shm/orh-devices-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(host, sizeof(host), "%s/host", dir);
	cr_assert_eq(mkdir(root, 0755), 0);
	cr_assert_eq(mkdir(host, 0755), 0);
	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
	char cmd[256];

	if (rootfd >= 0)
		close(rootfd);
	rootfd = -1;
	/* what a test mounted (in a mount namespace of its own), before the tree goes */
	umount2(at("root", "dev/infiniband/uverbs1"), MNT_DETACH);
	umount2(at("root", "dev/infiniband"), MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system %s", dir);
	if (dir[0] && system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", dir);
}

TestSuite(devices, .init = setup, .fini = teardown);

/* Skip the test: Criterion runs no .fini for a skipped test, so the tree goes first. */
#define skip(...)                                                                          \
	do {                                                                               \
		teardown();                                                                \
		cr_skip_test(__VA_ARGS__);                                                 \
	} while (0)

static const struct orh_devnode uverbs1 = { .path = "/dev/infiniband/uverbs1", .major = 231,
					    .minor = 193, .mode = 0666,
					    .kind = ORH_CHARDEV_UVERBS };
static const struct orh_devnode rdma_cm = { .path = "/dev/infiniband/rdma_cm", .major = 10,
					    .minor = 58, .mode = 0666,
					    .kind = ORH_CHARDEV_RDMA_CM };

/* Is root/rel the character device major:minor, mode 0666, root's? */
static bool is_node(const char *rel, unsigned major, unsigned minor)
{
	struct stat st;

	return lstat(at("root", rel), &st) == 0 && S_ISCHR(st.st_mode) &&
	       st.st_rdev == makedev(major, minor) && (st.st_mode & 07777) == 0666 &&
	       st.st_uid == 0;
}

/* Drop CAP_MKNOD from this test's process (each test runs in a process of its own). */
static void drop_mknod(void)
{
	cap_t caps = cap_get_proc();
	cap_value_t v = CAP_MKNOD;

	cr_assert_not_null(caps);
	cr_assert_eq(cap_set_flag(caps, CAP_EFFECTIVE, 1, &v, CAP_CLEAR), 0);
	cr_assert_eq(cap_set_proc(caps), 0, "%s", strerror(errno));
	cap_free(caps);
}

/* The cases that make nodes: root, and mknod permitted here. */
static void need_mknod(void)
{
	if (geteuid() != 0)
		skip("making device nodes needs root");
	if (mknod(at(".", "probe"), S_IFCHR | 0600, makedev(1, 3)) < 0)
		skip("mknod is not permitted here: %s", strerror(errno));
	unlink(at(".", "probe"));
}

/* A mount namespace of this test's own, where mounts go with the test's process; the
 * root filesystem opened again in it (an fd keeps the mount it was opened on). */
static void own_mount_namespace(void)
{
	struct orh_err err = { 0 };

	if (unshare(CLONE_NEWNS) < 0)
		skip("no mount namespace of our own here: %s", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
	close(rootfd);
	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);
}

static int apply(const struct orh_target *t, const char *host_root,
		 const struct orh_devnode *nodes, size_t n, struct orh_devices_result *res,
		 struct orh_err *err)
{
	*err = (struct orh_err){ 0 };
	return orh_devices_apply(rootfd, t, host_root, nodes, n, res, err);
}

Test(devices, no_node_touches_nothing)
{
	struct orh_devices_result res;
	struct orh_err err;
	struct stat st;

	cr_assert_eq(apply(NULL, NULL, NULL, 0, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.created + res.kept + res.bound, 0);
	cr_assert_neq(lstat(at("root", "dev"), &st), 0, "/dev was made for no node");
}

Test(devices, made_then_kept_then_replaced)
{
	const struct orh_devnode nodes[] = { uverbs1, rdma_cm };
	struct orh_devices_result res;
	struct orh_err err;

	need_mknod();
	cr_assert_eq(apply(NULL, NULL, nodes, 2, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.created, 2);
	cr_assert(is_node("dev/infiniband/uverbs1", 231, 193));
	cr_assert(is_node("dev/infiniband/rdma_cm", 10, 58));
	orh_strv_free(&res.warnings);

	cr_assert_eq(apply(NULL, NULL, nodes, 2, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.kept, 2, "a second run keeps what is right");
	cr_assert_eq(res.created, 0);
	cr_assert_eq(res.warnings.n, 0);

	/* uverbs1 with another spec's numbers, a file where rdma_cm goes */
	cr_assert_eq(unlink(at("root", "dev/infiniband/uverbs1")), 0);
	cr_assert_eq(mknod(at("root", "dev/infiniband/uverbs1"), S_IFCHR | 0600,
			   makedev(231, 250)), 0);
	cr_assert_eq(unlink(at("root", "dev/infiniband/rdma_cm")), 0);
	cr_assert_eq(close(open(at("root", "dev/infiniband/rdma_cm"),
				O_CREAT | O_WRONLY | O_CLOEXEC, 0644)), 0);
	cr_assert_eq(apply(NULL, NULL, nodes, 2, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.created, 2);
	cr_assert(is_node("dev/infiniband/uverbs1", 231, 193));
	cr_assert(is_node("dev/infiniband/rdma_cm", 10, 58));
	cr_assert_eq(res.warnings.n, 1, "only a device node with other numbers is named");
	cr_assert_str_eq(res.warnings.v[0], "'/dev/infiniband/uverbs1' was c 231:250, the node's is "
					    "c 231:193: replaced");
	orh_strv_free(&res.warnings);
}

/* A directory empty when opened needs no look at each name (dir_empty), but a path given
 * twice is made once and then kept, and an entry already there is still seen. */
Test(devices, an_empty_directory_a_path_twice_and_an_entry_already_there)
{
	const struct orh_devnode twice[] = { uverbs1, rdma_cm, uverbs1 };
	const struct orh_devnode one[] = { rdma_cm };
	struct orh_devices_result res;
	struct orh_err err;

	need_mknod();
	cr_assert_eq(apply(NULL, NULL, twice, 3, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.created, 2, "created %u", res.created);
	cr_assert_eq(res.kept, 1, "the path given twice is kept the second time");
	cr_assert(is_node("dev/infiniband/uverbs1", 231, 193));
	orh_strv_free(&res.warnings);

	/* the directory holds uverbs1 now: a file planted at rdma_cm's name is seen */
	cr_assert_eq(unlink(at("root", "dev/infiniband/rdma_cm")), 0);
	cr_assert_eq(mkdir(at("root", "dev/infiniband/rdma_cm"), 0755), 0);
	cr_assert_neq(apply(NULL, NULL, one, 1, &res, &err), 0);
	cr_assert(strstr(err.msg, "a directory is in the way"), "%s", err.msg);
	orh_strv_free(&res.warnings);
}

Test(devices, a_directory_in_the_way_is_an_error)
{
	struct orh_devices_result res;
	struct orh_err err;

	cr_assert_eq(mkdir(at("root", "dev"), 0755), 0);
	cr_assert_eq(mkdir(at("root", "dev/infiniband"), 0755), 0);
	cr_assert_eq(mkdir(at("root", "dev/infiniband/uverbs1"), 0755), 0);
	cr_assert_eq(apply(NULL, NULL, &uverbs1, 1, &res, &err), -EISDIR);
	cr_assert_str_eq(err.msg, "device '/dev/infiniband/uverbs1': a directory is in the way");
	cr_assert_eq(res.created + res.kept + res.bound, 0);
}

Test(devices, a_link_out_of_the_root_is_resolved_inside_it)
{
	struct orh_devices_result res;
	struct orh_err err;
	char target[256];

	need_mknod();
	/* /dev/infiniband -> the host's directory, by its absolute path */
	cr_assert_eq(mkdir(at("host", "dev"), 0755), 0);
	cr_assert_eq(mkdir(at("root", "dev"), 0755), 0);
	snprintf(target, sizeof(target), "%s/host/dev", dir);
	cr_assert_eq(symlink(target, at("root", "dev/infiniband")), 0);
	cr_assert_eq(apply(NULL, NULL, &uverbs1, 1, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.created, 1);
	cr_assert_eq(rmdir(at("host", "dev")), 0, "a node was made in the host's directory");
	/* where the link leads inside the root */
	snprintf(target, sizeof(target), "%s/host/dev/uverbs1", dir + 1);
	cr_assert(is_node(target, 231, 193), "not at root/%s", target);
}

Test(devices, a_directory_on_another_mount_gets_no_node)
{
	struct orh_devices_result res;
	struct orh_err err;
	struct stat st;

	need_mknod();
	own_mount_namespace();
	cr_assert_eq(mkdir(at("root", "dev"), 0755), 0);
	cr_assert_eq(mkdir(at("root", "dev/infiniband"), 0755), 0);
	cr_assert_eq(mount("tmpfs", at("root", "dev/infiniband"), "tmpfs", 0, "mode=0755"),
		     0, "%s", strerror(errno));
	cr_assert_eq(apply(NULL, NULL, &uverbs1, 1, &res, &err), -EXDEV);
	cr_assert(strstr(err.msg, "its directory is on another mount than the container's /dev"),
		  "%s", err.msg);
	cr_assert_neq(lstat(at("root", "dev/infiniband/uverbs1"), &st), 0, "a node was made");
	/* the right node there already (the host's /dev/infiniband as a volume) is kept */
	cr_assert_eq(mknod(at("root", "dev/infiniband/uverbs1"), S_IFCHR | 0666,
			   makedev(231, 193)), 0);
	cr_assert_eq(apply(NULL, NULL, &uverbs1, 1, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.kept, 1);
	umount2(at("root", "dev/infiniband"), MNT_DETACH);
}

Test(devices, without_mknod_and_without_a_host_node_it_fails)
{
	struct orh_devices_result res;
	struct orh_err err;
	DIR *d;
	int entries = 0;

	drop_mknod();
	cr_assert_eq(apply(NULL, NULL, &uverbs1, 1, &res, &err), -EPERM);
	cr_assert_str_eq(err.msg, "mknod '/dev/infiniband/uverbs1': not permitted and no host "
				  "node to bind");
	/* nothing left behind in the directory, not even the temporary name */
	d = opendir(at("root", "dev/infiniband"));
	cr_assert_not_null(d);
	for (struct dirent *e; (e = readdir(d));)
		entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	cr_assert_eq(entries, 0);
}

Test(devices, without_mknod_the_hosts_node_is_bound)
{
	const struct orh_devnode wrong = { .path = "/dev/infiniband/uverbs2", .major = 231,
					   .minor = 194, .mode = 0666 };
	struct orh_devices_result res;
	struct orh_target t;
	struct orh_err err = { 0 };

	need_mknod();
	own_mount_namespace();
	/* the host's nodes, made while CAP_MKNOD is held: uverbs2 with other numbers */
	cr_assert_eq(mkdir(at("host", "dev"), 0755), 0);
	cr_assert_eq(mkdir(at("host", "dev/infiniband"), 0755), 0);
	cr_assert_eq(mknod(at("host", "dev/infiniband/uverbs1"), S_IFCHR | 0666,
			   makedev(231, 193)), 0);
	cr_assert_eq(chmod(at("host", "dev/infiniband/uverbs1"), 0666), 0);
	cr_assert_eq(mknod(at("host", "dev/infiniband/uverbs2"), S_IFCHR | 0666,
			   makedev(231, 250)), 0);
	drop_mknod();
	/* this process stands for the container: the bind is made in its mount namespace */
	cr_assert_eq(orh_target_open(getpid(), &t, &err), 0, "%s", err.msg);
	cr_assert_eq(apply(&t, host, &uverbs1, 1, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.bound, 1);
	cr_assert_eq(res.created, 0);
	cr_assert(is_node("dev/infiniband/uverbs1", 231, 193), "the host's node is not there");
	cr_assert_eq(apply(&t, host, &wrong, 1, &res, &err), -ENODEV);
	cr_assert(strstr(err.msg, "is not the character device 231:194; not binding it"), "%s",
		  err.msg);
	orh_target_close(&t);
	umount2(at("root", "dev/infiniband/uverbs1"), MNT_DETACH);
}
