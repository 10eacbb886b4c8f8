/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim's own /etc/nccl.conf (src/apply/shimconf.c): when it knows the
 * container's network (orh_shimconf_network_known), whether a mount of the spec covers the
 * file in a root filesystem built here (orh_shimconf_covered, orh_rootfs_resolve), the
 * write into a bundle's root and what it refuses (orh_shimconf_write), putting the file
 * back (orh_ncclconf_undo), the edit that leaves the nccl-conf stage out or adds it after
 * all (orh_spec_serve with ORH_SERVE_CONF, orh_edit_add_stage) on the sample RoCE node
 * (tests/nodes/seed001-roce.json), and the record bound to the bundle's config.json in
 * place of a pid (orh_shimconf_record, orh_record_alive). Temporary directories under
 * /tmp; no root needed (no mounts, no chown to another user).
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
#include "orh/commands.h"
#include "orh/edit.h"
#include "orh/ncclconf.h"
#include "orh/record.h"
#include "orh/rootfs.h"
#include "orh/shimconf.h"
#include "orh/spec.h"
#include "plan_check.h"

static char node[256];
static char tmp[256];

static void setup(void)
{
	node[0] = tmp[0] = '\0';
	snprintf(tmp, sizeof(tmp), "/tmp/orh-shimconf-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	fixture_make_node(node, sizeof(node), "orh-shimconf", "seed001-roce");
}

static void cleanup(void)
{
	char cmd[512];

	fixture_remove_node(node);
	if (!tmp[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", tmp);
}

TestSuite(shimconf, .init = setup, .fini = cleanup);

#define CONF "/etc/orh-test/node.conf"
#define BEGIN ORH_NCCL_MARK_BEGIN "\n"
#define END ORH_NCCL_MARK_END "\n"

/* ---- helpers --------------------------------------------------------------------- */

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	cr_assert_not_null(j, "%s: %s", text, jerr.text);
	return j;
}

/* <tmp>/<rel> */
static const char *at_tmp(const char *rel)
{
	static char buf[4][PATH_MAX];
	static int k;
	char *p = buf[k++ % 4];

	snprintf(p, PATH_MAX, "%s/%s", tmp, rel);
	return p;
}

/* mkdir -p <tmp>/<rel> */
static void mkdirs(const char *rel)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	for (char *s = p + strlen(tmp) + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p,
			  strerror(errno));
		*s = '/';
	}
	cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
}

static void put_file(const char *rel, const char *text, mode_t mode)
{
	const char *p = at_tmp(rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	cr_assert_geq(fd, 0, "creating %s: %s", p, strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void put_link(const char *rel, const char *target)
{
	cr_assert_eq(symlink(target, at_tmp(rel)), 0, "symlink %s: %s", rel, strerror(errno));
}

/* The text of <tmp>/<rel> (malloc'd), or NULL where it is missing. */
static char *get_file(const char *rel)
{
	const char *p = at_tmp(rel);
	char *text = NULL;
	size_t len = 0;
	int fd = open(p, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		cr_assert_eq(errno, ENOENT, "opening %s: %s", p, strerror(errno));
		return NULL;
	}
	cr_assert_eq(orh_read_fd_all(fd, 1 << 20, &text, &len), 0);
	close(fd);
	return text;
}

static void assert_file(const char *rel, const char *want)
{
	char *text = get_file(rel);

	if (!want)
		cr_assert_null(text, "%s exists, holding:\n%s", rel, text);
	else {
		cr_assert_not_null(text, "%s is missing", rel);
		cr_assert_str_eq(text, want, "%s", rel);
	}
	free(text);
}

static int open_dir(const char *rel, int flags)
{
	int fd = open(at_tmp(rel), flags | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "opening %s: %s", rel, strerror(errno));
	return fd;
}

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

#define M(d) "{\"destination\":\"" d "\",\"type\":\"bind\",\"source\":\"/srv\"}"

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

/* <tmp>/b: a bundle whose root "rootfs" holds /etc and /proc */
static int make_bundle(void)
{
	mkdirs("b/rootfs/etc");
	mkdirs("b/rootfs/proc");
	return open_dir("b", O_RDONLY);
}

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

/* ---- 5. the edit ----------------------------------------------------------------- */

/* a spec as podman proposes it, without NCCL settings of the user */
#define SPEC(hooks, ns)                                                                    \
	"{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"},\"process\":{"           \
	"\"args\":[\"sh\"],\"env\":[\"PATH=/bin\"]},\"mounts\":[" M("/proc") "],"            \
	"\"linux\":{\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}]}" ns "}" \
	hooks "}"
#define NEW_NETNS ",\"namespaces\":[{\"type\":\"mount\"},{\"type\":\"network\"}]"
#define PRESTART ",\"hooks\":{\"prestart\":[{\"path\":\"/usr/libexec/netsetup\"}]}"
#define CREATE_RUNTIME ",\"hooks\":{\"createRuntime\":[{\"path\":\"/usr/libexec/setkey\"}]}"
#define OUR_LIVE_HOOK                                                                      \
	",\"hooks\":{\"createRuntime\":[{\"path\":\"/usr/libexec/oci/hooks.d/oci-rdma-hook\","  \
	"\"args\":[\"oci-rdma-hook\",\"createRuntime\"]}]}"

static void ctx_init(struct orh_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	orh_config_defaults(&ctx->cfg);
	ctx->cfg.activation = ORH_ACTIVATE_ALWAYS;
	ctx->cfg.memlock = 65536;
	ctx->sysroot = ctx->sysroot_opt = node;
	ctx->config_path = CONF;
	ctx->config_explicit = true;
}

/* The last hook of `stage` in spec runs this binary's `what` with --config and --sysroot */
static void assert_self_hook(const json_t *spec, const char *stage, const char *what)
{
	const json_t *hooks = json_object_get(json_object_get(spec, "hooks"), stage);
	const json_t *h = json_array_get(hooks, json_array_size(hooks) - 1);
	const json_t *args = json_object_get(h, "args");
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	cr_assert_gt(n, 0);
	self[n] = '\0';
	cr_assert_not_null(h, "no %s hook", stage);
	cr_assert_str_eq(json_string_value(json_object_get(h, "path")), self);
	cr_assert_eq(json_array_size(args), 6);
	cr_assert_str_eq(json_string_value(json_array_get(args, 0)), ORH_HOOK_NAME);
	cr_assert_str_eq(json_string_value(json_array_get(args, 1)), "--config");
	cr_assert_str_eq(json_string_value(json_array_get(args, 2)), CONF);
	cr_assert_str_eq(json_string_value(json_array_get(args, 3)), "--sysroot");
	cr_assert_str_eq(json_string_value(json_array_get(args, 4)), node);
	cr_assert_str_eq(json_string_value(json_array_get(args, 5)), what);
}

static size_t n_hooks(const json_t *spec, const char *stage)
{
	return json_array_size(json_object_get(json_object_get(spec, "hooks"), stage));
}

/* orh_spec_serve of text into *spec; the result's own_conf */
static bool serve(struct orh_ctx *ctx, const char *text, unsigned flags, json_t **spec,
		  struct orh_edit_result *res)
{
	struct orh_err err = { 0 };

	*spec = parse(text);
	cr_assert_eq(orh_spec_serve(ctx, *spec, flags, res, &err), 0, "%s", err.msg);
	cr_assert_eq(res->activation, ORH_ACT_DEFAULT);
	cr_assert_eq(res->changes.devices, 9, "rdma_cm and uverbs1..8");
	cr_assert_gt(res->edits, 0);
	cr_assert_eq(res->own_conf, res->d != NULL, "own_conf goes with the decision");
	return res->own_conf;
}

Test(shimconf, a_spec_in_a_known_network_gets_no_nccl_conf_stage)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	json_t *spec;

	ctx_init(&ctx);
	/* the runtime's network */
	cr_assert(serve(&ctx, SPEC("", ""), ORH_SERVE_CONF | ORH_SERVE_SNAPSHOT, &spec, &res));
	cr_assert_not_null(res.d);
	cr_assert(res.d->have_plan);
	cr_assert_not_null(plan_value(&res.d->plan, "NCCL_IB_HCA"), "the plan, for the file");
	cr_assert_null(json_object_get(spec, "hooks"), "no hook at all");
	cr_assert_eq(res.changes.hooks, 0);
	cr_assert_null(res.snapshot, "no stage to hand the node to");
	/* the settings stay out of PID 1's environment */
	cr_assert_eq(json_array_size(json_object_get(json_object_get(spec, "process"), "env")),
		     1);
	orh_edit_result_free(&res);
	cr_assert_null(res.d);
	json_decref(spec);

	/* a new namespace that no hook sets up */
	cr_assert(serve(&ctx, SPEC("", NEW_NETNS), ORH_SERVE_CONF, &spec, &res));
	cr_assert_null(json_object_get(spec, "hooks"));
	orh_edit_result_free(&res);
	json_decref(spec);

	/* a poststop hook of someone else's changes nothing */
	cr_assert(serve(&ctx, SPEC(",\"hooks\":{\"poststop\":[{\"path\":\"/bin/true\"}]}",
				   NEW_NETNS), ORH_SERVE_CONF, &spec, &res));
	cr_assert_eq(n_hooks(spec, "poststop"), 1);
	cr_assert_eq(n_hooks(spec, "createRuntime"), 0);
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

Test(shimconf, a_network_set_up_by_an_earlier_hook_keeps_the_stage)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	json_t *spec;

	ctx_init(&ctx);
	cr_assert_not(serve(&ctx, SPEC(PRESTART, NEW_NETNS), ORH_SERVE_CONF, &spec, &res));
	cr_assert_null(res.d);
	cr_assert_eq(res.changes.hooks, 2, "nccl-conf and poststop");
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	assert_self_hook(spec, "poststop", "poststop");
	cr_assert_eq(n_hooks(spec, "prestart"), 1, "the spec's own stays");
	orh_edit_result_free(&res);
	json_decref(spec);

	cr_assert_not(serve(&ctx, SPEC(CREATE_RUNTIME, NEW_NETNS),
			    ORH_SERVE_CONF | ORH_SERVE_NO_POSTSTOP | ORH_SERVE_SNAPSHOT, &spec,
			    &res));
	cr_assert_eq(n_hooks(spec, "createRuntime"), 2, "setkey, then the stage");
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert_eq(n_hooks(spec, "poststop"), 0);
	cr_assert_not_null(res.snapshot, "the node, for the stage");
	orh_edit_result_free(&res);
	json_decref(spec);

	/* a namespace by a path the shim could not read */
	cr_assert_not(serve(&ctx, SPEC("", ",\"namespaces\":[{\"type\":\"network\",\"path\":"
				   "\"/nonexistent/orh-netns\"}]"), ORH_SERVE_CONF, &spec, &res));
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert(strv_mentions(&res.warnings, "'/nonexistent/orh-netns' not read"));
	orh_edit_result_free(&res);
	json_decref(spec);

	/* without ORH_SERVE_CONF: the stage, as before */
	cr_assert_not(serve(&ctx, SPEC("", ""), ORH_SERVE_SNAPSHOT, &spec, &res));
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

Test(shimconf, a_spec_carrying_our_live_hook_is_left_to_it)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	json_t *spec;

	ctx_init(&ctx);
	cr_assert_not(serve(&ctx, SPEC(OUR_LIVE_HOOK, ""), ORH_SERVE_CONF, &spec, &res));
	cr_assert_null(res.d);
	cr_assert_eq(n_hooks(spec, "createRuntime"), 1, "the live hook writes the file");
	cr_assert_str_eq(json_string_value(json_object_get(
		json_array_get(json_object_get(json_object_get(spec, "hooks"), "createRuntime"), 0),
		"path")), "/usr/libexec/oci/hooks.d/oci-rdma-hook");
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

Test(shimconf, the_stage_is_added_after_all_where_the_shim_cannot_write)
{
	const unsigned flags = ORH_SERVE_CONF | ORH_SERVE_SNAPSHOT | ORH_SERVE_NO_POSTSTOP;
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_err err = { 0 };
	json_t *spec, *once;
	int edits;

	ctx_init(&ctx);
	cr_assert(serve(&ctx, SPEC("", ""), flags, &spec, &res));
	cr_assert_null(res.snapshot);
	edits = res.edits;
	cr_assert_eq(orh_edit_add_stage(&ctx, spec, flags, &res, &err), 0, "%s", err.msg);
	cr_assert_not(res.own_conf);
	cr_assert_eq(res.changes.hooks, 1, "nccl-conf alone");
	cr_assert_eq(n_hooks(spec, "createRuntime"), 1);
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert_eq(n_hooks(spec, "poststop"), 0);
	cr_assert_not_null(res.snapshot, "the node, for the stage");
	cr_assert_eq(res.edits, edits + 1, "the hook is an edit: config.json is written");
	/* a second time: no second hook */
	once = json_deep_copy(spec);
	cr_assert_eq(orh_edit_add_stage(&ctx, spec, flags, &res, &err), 0, "%s", err.msg);
	cr_assert(json_equal(spec, once));
	cr_assert_eq(res.changes.hooks, 1);
	json_decref(once);
	orh_edit_result_free(&res);
	json_decref(spec);

	/* without ORH_SERVE_SNAPSHOT: no node handed over */
	cr_assert(serve(&ctx, SPEC("", ""), ORH_SERVE_CONF, &spec, &res));
	cr_assert_eq(orh_edit_add_stage(&ctx, spec, ORH_SERVE_CONF, &res, &err), 0, "%s", err.msg);
	cr_assert_not(res.own_conf);
	assert_self_hook(spec, "createRuntime", "nccl-conf");
	cr_assert_eq(n_hooks(spec, "poststop"), 0, "never a poststop hook");
	cr_assert_null(res.snapshot);
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}

/* ---- 6. the record --------------------------------------------------------------- */

/* <tmp>/<rel>/config.json replaced by a new file (a new inode) */
static void replace_config(const char *rel, const char *text)
{
	char name[PATH_MAX], newname[PATH_MAX];

	snprintf(name, sizeof(name), "%s/config.json", rel);
	snprintf(newname, sizeof(newname), "%s/config.json.new", rel);
	put_file(newname, text, 0600);
	cr_assert_eq(rename(at_tmp(newname), at_tmp(name)), 0);
}

Test(shimconf, the_record_is_bound_to_the_bundles_config_json)
{
	struct orh_ctx ctx;
	struct orh_edit_result res;
	struct orh_ncclconf_result conf;
	struct orh_err err = { 0 };
	struct orh_strv warnings = { 0 };
	struct stat st, before;
	json_t *spec, *rec, *b;
	char *text, bundle[PATH_MAX];
	int bfd = make_bundle(), rootfd = -1;

	/* the shim's way: serve, write the file, write config.json, record */
	ctx_init(&ctx);
	cr_assert(serve(&ctx, SPEC("", ""), ORH_SERVE_CONF | ORH_SERVE_NO_POSTSTOP, &spec, &res));
	cr_assert_eq(orh_shimconf_write(bfd, spec, &res.d->plan, &rootfd, &conf, &err), 0, "%s",
		     err.msg);
	cr_assert_gt(conf.added, 0);
	text = get_file("b/rootfs/etc/nccl.conf");
	cr_assert_not_null(text);
	cr_assert(strstr(text, "\nNCCL_IB_HCA="), "%s", text);
	free(text);
	text = json_dumps(spec, 0);
	put_file("b/config.json", text, 0600);
	free(text);
	snprintf(bundle, sizeof(bundle), "%s/b", tmp);
	cr_assert_eq(stat(at_tmp("b/config.json"), &st), 0);
	cr_assert_eq(orh_shimconf_record(at_tmp("run/ctr1"), &(struct orh_shimconf_rec){
			     .id = "ctr1", .bundle_path = bundle, .sysroot = node,
			     .config_st = &st, .d = res.d, .spec = spec, .conf = &conf,
			     .total_ms = 1.5 }, &warnings, &err), 0, "%s", err.msg);

	rec = orh_record_load_at(AT_FDCWD, at_tmp("run/ctr1/" ORH_RECORD_FILE));
	cr_assert_not_null(rec);
	cr_assert_str_eq(json_string_value(json_object_get(rec, "id")), "ctr1");
	cr_assert_str_eq(json_string_value(json_object_get(rec, "stage")), "runtime shim");
	cr_assert(json_is_integer(json_object_get(rec, "pid")));
	cr_assert_eq(json_integer_value(json_object_get(rec, "pid")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(rec, "node_read")),
			 "by the runtime shim");
	b = json_object_get(rec, "bundle");
	cr_assert_str_eq(json_string_value(json_object_get(b, "path")), bundle);
	cr_assert_eq(json_integer_value(json_object_get(b, "config_dev")), (json_int_t)st.st_dev);
	cr_assert_eq(json_integer_value(json_object_get(b, "config_ino")), (json_int_t)st.st_ino);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(rec, "nccl_conf"),
							   "result")), "written");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(rec, "nccl_conf"),
							"added")), (json_int_t)conf.added);

	/* alive while config.json is the one recorded, rewritten in place or not */
	cr_assert(orh_record_alive(rec, "/proc"));
	put_file("b/config.json", "{}", 0600);
	cr_assert(orh_record_alive(rec, "/proc"), "the same file");
	/* a new config.json: another container in the same bundle */
	before = st;
	replace_config("b", "{}");
	cr_assert_eq(stat(at_tmp("b/config.json"), &st), 0);
	cr_assert_neq(st.st_ino, before.st_ino);
	cr_assert_not(orh_record_alive(rec, "/proc"));
	cr_assert_eq(unlink(at_tmp("b/config.json")), 0);
	cr_assert_not(orh_record_alive(rec, "/proc"), "no config.json");
	/* the bundle gone */
	cr_assert_eq(rename(at_tmp("b"), at_tmp("b.gone")), 0);
	cr_assert_not(orh_record_alive(rec, "/proc"));

	/* a record with no pid and no bundle: never alive */
	json_object_del(rec, "bundle");
	cr_assert_not(orh_record_alive(rec, "/proc"));

	json_decref(rec);
	orh_strv_free(&warnings);
	orh_ncclconf_result_free(&conf);
	close(rootfd);
	close(bfd);
	orh_edit_result_free(&res);
	json_decref(spec);
	orh_config_free(&ctx.cfg);
}
