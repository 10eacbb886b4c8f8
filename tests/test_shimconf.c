/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim's own /etc/nccl.conf (src/apply/shimconf.c): when it knows the
 * container's network (orh_shimconf_network_known), whether a mount of the spec covers the
 * file in a root filesystem built here (orh_shimconf_covered, orh_rootfs_resolve), the
 * write into a bundle's root and what it refuses (orh_shimconf_write), putting the file
 * back (orh_ncclconf_undo). The edit and the record are test_shimserve.c's. Temporary
 * directories under /tmp; no root needed (no mounts, no chown to another user).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node_fixture.h"
#include "orh/cmd/commands.h"
#include "orh/cmd/serve.h"
#include "orh/apply/ncclconf.h"
#include "orh/apply/record.h"
#include "orh/base/rootfs.h"
#include "orh/apply/shimconf.h"
#include "orh/apply/spec.h"
#include "plan_check.h"

#include "shim_fixture.h"

TestSuite(shimconf, .init = shim_fixture_setup, .fini = shim_fixture_cleanup);

/* ---- 1. the network at createRuntime --------------------------------------------- */

static bool known(const char *spec_text, bool has_netns, const char *nspath, bool netns_read)
{
	json_t *spec = parse(spec_text);
	bool r = orh_shimconf_network_known(spec, has_netns, nspath, netns_read);

	json_decref(spec);
	return r;
}

Test(shimconf, the_network_is_known_where_nothing_sets_it_up_before_createRuntime)
{
	const char *nohooks = "{}";
	const char *prestart = "{\"hooks\":{\"prestart\":[{\"path\":\"/usr/bin/netsetup\"}]}}";
	const char *create = "{\"hooks\":{\"createRuntime\":[{\"path\":\"/usr/bin/setkey\"}]}}";
	const char *poststop = "{\"hooks\":{\"poststop\":[{\"path\":\"/usr/bin/cleanup\"}],"
			       "\"createContainer\":[{\"path\":\"/usr/bin/x\"}],"
			       "\"prestart\":[],\"createRuntime\":[]}}";

	/* the runtime's own network, the shim's: whatever the hooks */
	cr_assert(known(prestart, false, NULL, false));
	cr_assert(known(create, false, NULL, false));
	/* a namespace by its path: known when the shim read it */
	cr_assert(known(prestart, true, "/run/netns/pod", true));
	cr_assert_not(known(nohooks, true, "/run/netns/pod", false));
	cr_assert_not(known(prestart, true, "/run/netns/pod", false));
	/* a new one: empty, unless a hook before the stage sets it up */
	cr_assert(known(nohooks, true, NULL, false));
	cr_assert_not(known(prestart, true, NULL, false));
	cr_assert_not(known(create, true, NULL, false));
	cr_assert(known(poststop, true, NULL, false),
		  "poststop and createContainer hooks run after, empty lists hold none");
}

/* ---- 2. mounts over the file ----------------------------------------------------- */

/* orh_shimconf_covered for a spec with these mounts (a JSON array's members) */
static int covered(int rootfd, const char *mounts, const char **dest)
{
	char text[2048];
	json_t *spec;
	int r;

	snprintf(text, sizeof(text), "{\"mounts\":[%s]}", mounts);
	spec = parse(text);
	*dest = (const char *)1; /* must be set either way */
	r = orh_shimconf_covered(rootfd, spec, dest);
	/* *dest points into spec: copied before it goes */
	if (r > 0 && *dest) {
		static char keep[PATH_MAX];

		snprintf(keep, sizeof(keep), "%s", *dest);
		*dest = keep;
	}
	json_decref(spec);
	return r;
}


/* an image root: /proc, /dev, /etc with hosts and resolv.conf, /var/run -> ../run,
 * /x -> /etc, /up -> /, /opt */
static int image_root(void)
{
	mkdirs("img/proc");
	mkdirs("img/dev");
	mkdirs("img/etc");
	mkdirs("img/run");
	mkdirs("img/var");
	mkdirs("img/opt");
	put_file("img/etc/hosts", "127.0.0.1 localhost\n", 0644);
	put_file("img/etc/resolv.conf", "", 0644);
	put_link("img/var/run", "../run");
	put_link("img/x", "/etc");
	put_link("img/up", "/");
	return open_dir("img", O_PATH);
}

Test(shimconf, a_mount_over_etc_or_the_file_covers_it)
{
	int rootfd = image_root();
	const char *dest;

	cr_assert_eq(covered(rootfd, M("/proc") "," M("/dev") "," M("/etc/hosts") ","
			     M("/etc/resolv.conf"), &dest), 0);
	cr_assert_null(dest);
	cr_assert_eq(covered(rootfd, "", &dest), 0);
	cr_assert_null(dest);

	cr_assert_eq(covered(rootfd, M("/proc") "," M("/etc"), &dest), 1);
	cr_assert_str_eq(dest, "/etc");
	cr_assert_eq(covered(rootfd, M("/etc/"), &dest), 1, "a trailing slash");
	cr_assert_str_eq(dest, "/etc/");
	cr_assert_eq(covered(rootfd, M("/"), &dest), 1);
	cr_assert_str_eq(dest, "/");
	/* the file: missing in the image, then there */
	cr_assert_eq(covered(rootfd, M("/dev") "," M("/etc/nccl.conf"), &dest), 1);
	cr_assert_str_eq(dest, "/etc/nccl.conf");
	put_file("img/etc/nccl.conf", "NCCL_DEBUG=WARN\n", 0644);
	cr_assert_eq(covered(rootfd, M("/etc/nccl.conf"), &dest), 1);
	cr_assert_str_eq(dest, "/etc/nccl.conf");
	/* names that only begin like it */
	cr_assert_eq(covered(rootfd, M("/etc/nccl.conf.d") "," M("/etcetera") "," M("/et"),
			     &dest), 0);
	cr_assert_null(dest);
	close(rootfd);
}

Test(shimconf, a_mount_destination_is_resolved_in_the_root_as_the_runtime_does)
{
	int rootfd = image_root();
	const char *dest;

	/* /var/run/secrets: /run/secrets, nowhere near /etc */
	cr_assert_eq(covered(rootfd, M("/var/run/secrets") "," M("/var/run"), &dest), 0);
	cr_assert_null(dest);
	/* /x leads to /etc */
	cr_assert_eq(covered(rootfd, M("/proc") "," M("/x"), &dest), 1);
	cr_assert_str_eq(dest, "/x");
	/* not there yet: made by the runtime where it is written */
	cr_assert_eq(covered(rootfd, M("/opt/tools/bin") "," M("/srv/data"), &dest), 0);
	cr_assert_null(dest);
	/* one that cannot be resolved counts as covering */
	cr_assert_eq(covered(rootfd, M("/opt/new/../../etc"), &dest), 1, "a '..' not yet made");
	cr_assert_str_eq(dest, "/opt/new/../../etc");
	cr_assert_eq(covered(rootfd, M("srv/data"), &dest), 1, "a relative destination");
	cr_assert_str_eq(dest, "srv/data");
	cr_assert_eq(covered(rootfd, "{\"type\":\"tmpfs\"}", &dest), 1, "no destination");
	cr_assert_str_eq(dest, "(none)");
	close(rootfd);
}

Test(shimconf, a_mount_where_etc_leads_covers_the_file)
{
	char out[PATH_MAX];
	const char *dest;
	int rootfd;

	/* an image whose /etc is a symlink to /data: the mount at /data is above the file */
	mkdirs("img2/data");
	mkdirs("img2/proc");
	put_link("img2/etc", "/data");
	rootfd = open_dir("img2", O_PATH);
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/etc/nccl.conf", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/data/nccl.conf");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/etc", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/data");
	cr_assert_eq(covered(rootfd, M("/proc"), &dest), 0);
	cr_assert_null(dest);
	cr_assert_eq(covered(rootfd, M("/proc") "," M("/data"), &dest), 1);
	cr_assert_str_eq(dest, "/data");
	cr_assert_eq(covered(rootfd, M("/etc"), &dest), 1);
	cr_assert_str_eq(dest, "/etc");
	close(rootfd);

	/* an image without /etc: the runtime makes the directory the mount names, through
	 * /up -> / */
	mkdirs("img3/proc");
	put_link("img3/up", "/");
	rootfd = open_dir("img3", O_PATH);
	cr_assert_eq(covered(rootfd, M("/proc") "," M("/up/etc/"), &dest), 1);
	cr_assert_str_eq(dest, "/up/etc/");
	cr_assert_eq(covered(rootfd, M("/up/etcd/"), &dest), 0);
	cr_assert_null(dest);
	close(rootfd);

	/* an image whose /etc is a symlink to a /data that is not there: the runtime would
	 * follow it and make /data, where a mount may land; that cannot be told, so the file
	 * counts as not resolvable (the shim leaves it to the stage) */
	mkdirs("img4/proc");
	put_link("img4/etc", "/data");
	rootfd = open_dir("img4", O_PATH);
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/etc/nccl.conf", out, sizeof(out)), -ELOOP);
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/data/x", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/data/x");
	cr_assert_lt(covered(rootfd, M("/proc") "," M("/data"), &dest), 0);
	close(rootfd);
}

Test(shimconf, a_path_resolves_inside_the_root_with_the_missing_rest_as_written)
{
	char out[PATH_MAX];
	int rootfd = image_root();

	cr_assert_eq(orh_rootfs_resolve(rootfd, "/var/run/secrets/k8s", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/run/secrets/k8s");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/x/hosts", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/etc/hosts");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/x/new/dir", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/etc/new/dir");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/up/new", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/new");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/up/etc/./hosts", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/etc/hosts");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "//etc/./nccl.conf", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/etc/nccl.conf");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/../../etc", out, sizeof(out)), 0,
		     "never above the root");
	cr_assert_str_eq(out, "/etc");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/nope/deeper", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/nope/deeper");
	cr_assert_eq(orh_rootfs_resolve(rootfd, "/nope/../etc", out, sizeof(out)), -EINVAL);
	close(rootfd);
}

/* ---- 3. the write ---------------------------------------------------------------- */

/* two NCCL settings and one for UCX, which NCCL does not read from the file */
static struct orh_env_entry plan_env[] = {
	{ (char *)"NCCL_IB_HCA", (char *)"=mlx5_1,mlx5_2", (char *)"rule 3" },
	{ (char *)"UCX_NET_DEVICES", (char *)"mlx5_1:1", (char *)"rule 3" },
	{ (char *)"NCCL_IB_GID_INDEX", (char *)"3", (char *)"rule 4" },
};
static const struct orh_plan plan = { .env = plan_env, .n_env = 3 };
#define PLAN_TEXT BEGIN "NCCL_IB_HCA==mlx5_1,mlx5_2\nNCCL_IB_GID_INDEX=3\n" END


#define SPEC_ROOT(extra) "{\"root\":{\"path\":\"rootfs\"" extra "},\"mounts\":[" M("/proc") "," \
			 M("/etc/hosts") "]}"

/* orh_shimconf_write of plan for spec text; res is the caller's to free */
static int shim_write(int bundle_fd, const char *spec_text, int *rootfd,
		      struct orh_ncclconf_result *res, struct orh_err *err)
{
	json_t *spec = parse(spec_text);
	int r;

	memset(res, 0, sizeof(*res));
	memset(err, 0, sizeof(*err));
	r = orh_shimconf_write(bundle_fd, spec, &plan, rootfd, res, err);
	json_decref(spec);
	return r;
}

Test(shimconf, the_shim_writes_the_plans_nccl_settings_in_place)
{
	struct orh_ncclconf_result res;
	struct orh_err err;
	int bfd = make_bundle(), rootfd = -2;
	struct stat st;

	cr_assert_eq(shim_write(bfd, SPEC_ROOT(""), &rootfd, &res, &err), 0, "%s", err.msg);
	cr_assert_geq(rootfd, 0, "the root, open for the undo");
	assert_file("b/rootfs/etc/nccl.conf", PLAN_TEXT);
	cr_assert_eq(res.added, 2, "the UCX_ setting is not NCCL's");
	cr_assert_eq(res.kept.n, 0);
	cr_assert(res.in_place);
	cr_assert_null(res.was, "there was no file");
	cr_assert_not(res.bind_mounted);
	cr_assert_str_eq(res.generated, "");
	cr_assert_eq(stat(at_tmp("b/rootfs/etc/nccl.conf"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0644);
	orh_ncclconf_result_free(&res);
	close(rootfd);

	/* once more: the file holds it already, nothing is replaced */
	cr_assert_eq(shim_write(bfd, SPEC_ROOT(""), &rootfd, &res, &err), 0, "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", PLAN_TEXT);
	cr_assert_not(res.in_place, "nothing to put back");
	cr_assert_eq(res.added, 2);
	orh_ncclconf_result_free(&res);
	close(rootfd);
	close(bfd);
}

Test(shimconf, the_images_own_lines_are_kept)
{
	static const char image[] = "# the image's\nNCCL_IB_HCA=mine\nNCCL_DEBUG=INFO\n";
	struct orh_ncclconf_result res;
	struct orh_err err;
	int bfd = make_bundle(), rootfd = -1;
	struct stat st;

	put_file("b/rootfs/etc/nccl.conf", image, 0640);
	cr_assert_eq(shim_write(bfd, SPEC_ROOT(",\"readonly\":false"), &rootfd, &res, &err), 0,
		     "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", "# the image's\nNCCL_IB_HCA=mine\nNCCL_DEBUG=INFO\n"
		    BEGIN "NCCL_IB_GID_INDEX=3\n" END);
	cr_assert_eq(res.added, 1);
	cr_assert_eq(res.kept.n, 1);
	cr_assert_str_eq(res.kept.v[0], "NCCL_IB_HCA=mine");
	cr_assert(res.in_place);
	cr_assert_not_null(res.was);
	cr_assert_str_eq(res.was, image);
	cr_assert_eq(stat(at_tmp("b/rootfs/etc/nccl.conf"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0640, "the image's mode, %o", st.st_mode & 07777);
	orh_ncclconf_result_free(&res);
	cr_assert_null(res.was);
	close(rootfd);
	close(bfd);
}

Test(shimconf, a_read_only_root_or_a_mount_over_the_file_leaves_the_root_untouched)
{
	static const char image[] = "NCCL_DEBUG=INFO\n";
	struct orh_ncclconf_result res;
	struct orh_err err;
	int bfd = make_bundle(), rootfd = 7;

	/* no file there */
	cr_assert_eq(shim_write(bfd, SPEC_ROOT(",\"readonly\":true"), &rootfd, &res, &err),
		     -EROFS);
	cr_assert_eq(err.code, EROFS);
	cr_assert(strstr(err.msg, "read-only"), "%s", err.msg);
	cr_assert_eq(rootfd, -1);
	cr_assert_not(res.in_place);
	assert_file("b/rootfs/etc/nccl.conf", NULL);
	orh_ncclconf_result_free(&res);

	cr_assert_eq(shim_write(bfd, "{\"root\":{\"path\":\"rootfs\"},\"mounts\":[" M("/proc") ","
				M("/etc") "]}", &rootfd, &res, &err), -EXDEV);
	cr_assert_eq(err.code, EXDEV);
	cr_assert(strstr(err.msg, "'/etc'"), "%s", err.msg);
	cr_assert_not(res.in_place);
	assert_file("b/rootfs/etc/nccl.conf", NULL);
	orh_ncclconf_result_free(&res);
	if (rootfd >= 0)
		close(rootfd);

	/* an image's file */
	put_file("b/rootfs/etc/nccl.conf", image, 0644);
	cr_assert_eq(shim_write(bfd, SPEC_ROOT(",\"readonly\":true"), &rootfd, &res, &err),
		     -EROFS);
	assert_file("b/rootfs/etc/nccl.conf", image);
	orh_ncclconf_result_free(&res);

	cr_assert_eq(shim_write(bfd, "{\"root\":{\"path\":\"rootfs\"},\"mounts\":["
				M("/etc/nccl.conf") "]}", &rootfd, &res, &err), -EXDEV);
	cr_assert(strstr(err.msg, "'/etc/nccl.conf'"), "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", image);
	orh_ncclconf_result_free(&res);
	if (rootfd >= 0)
		close(rootfd);

	/* no root at all */
	cr_assert_eq(shim_write(bfd, "{\"mounts\":[]}", &rootfd, &res, &err), -EINVAL);
	cr_assert(strstr(err.msg, "root.path"), "%s", err.msg);
	cr_assert_eq(rootfd, -1);
	close(bfd);
}

/* ---- 4. the undo ----------------------------------------------------------------- */

Test(shimconf, the_undo_puts_back_the_text_the_file_held)
{
	/* no newline at the end, a CR: byte for byte */
	static const char image[] = "# image\r\nNCCL_IB_HCA=mine\nNCCL_DEBUG=INFO";
	struct orh_ncclconf_result res;
	struct orh_err err;
	int bfd = make_bundle(), rootfd = -1;
	struct stat st;

	put_file("b/rootfs/etc/nccl.conf", image, 0600);
	cr_assert_eq(shim_write(bfd, SPEC_ROOT(""), &rootfd, &res, &err), 0, "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", "# image\r\nNCCL_IB_HCA=mine\nNCCL_DEBUG=INFO\n"
		    BEGIN "NCCL_IB_GID_INDEX=3\n" END);
	cr_assert(res.in_place);
	cr_assert_eq(orh_ncclconf_undo(rootfd, &res, &err), 0, "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", image);
	cr_assert_eq(stat(at_tmp("b/rootfs/etc/nccl.conf"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_not(res.in_place, "put back once");
	/* a second undo does nothing */
	put_file("b/rootfs/etc/nccl.conf", "changed since\n", 0600);
	cr_assert_eq(orh_ncclconf_undo(rootfd, &res, &err), 0, "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", "changed since\n");
	orh_ncclconf_result_free(&res);
	close(rootfd);
	close(bfd);
}

Test(shimconf, the_undo_removes_a_file_that_was_not_there)
{
	struct orh_ncclconf_result res;
	struct orh_err err;
	int bfd = make_bundle(), rootfd = -1;

	cr_assert_eq(shim_write(bfd, SPEC_ROOT(""), &rootfd, &res, &err), 0, "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", PLAN_TEXT);
	cr_assert_eq(orh_ncclconf_undo(rootfd, &res, &err), 0, "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", NULL);
	cr_assert_eq(access(at_tmp("b/rootfs/etc"), F_OK), 0, "/etc stays");
	orh_ncclconf_result_free(&res);
	close(rootfd);

	/* a write that replaced nothing (the file held the text): the undo leaves it */
	put_file("b/rootfs/etc/nccl.conf", PLAN_TEXT, 0644);
	cr_assert_eq(shim_write(bfd, SPEC_ROOT(""), &rootfd, &res, &err), 0, "%s", err.msg);
	cr_assert_not(res.in_place);
	cr_assert_eq(orh_ncclconf_undo(rootfd, &res, &err), 0, "%s", err.msg);
	assert_file("b/rootfs/etc/nccl.conf", PLAN_TEXT);
	orh_ncclconf_result_free(&res);
	close(rootfd);
	close(bfd);
}
