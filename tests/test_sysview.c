/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the sysfs view of a device subset (include/orh/apply/sysview.h): the host's
 * class entries read from a sample node, which of them a plan keeps, the view's directory,
 * and the spec mounts. No root needed. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "node_fixture.h"
#include "orh/apply/sysview.h"

static char root[PATH_MAX];

static void setup(void)
{
	fixture_make_node(root, sizeof(root), "orh-sysview", "seed001-roce");
}

static void teardown(void)
{
	char cmd[PATH_MAX + 32];

	/* the view's directories are read-only */
	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s", root);
	if (system(cmd) != 0)
		fprintf(stderr, "%s failed\n", cmd);
	fixture_remove_node(root);
}

TestSuite(sysview, .init = setup, .fini = teardown);

/* A plan that gives the devices named (their uverbs nodes, owned by them) and rdma_cm. */
static struct orh_device devs[9];
static struct orh_devnode nodes[10];

static struct orh_plan plan_of(const char *const *names, size_t n)
{
	struct orh_plan p;

	memset(&p, 0, sizeof(p));
	memset(devs, 0, sizeof(devs));
	memset(nodes, 0, sizeof(nodes));
	for (size_t i = 0; i < n; i++) {
		snprintf(devs[i].name, sizeof(devs[i].name), "%s", names[i]);
		snprintf(nodes[i].path, sizeof(nodes[i].path), ORH_DEV_DIR "uverbs%zu", i);
		nodes[i].owner = &devs[i];
	}
	snprintf(nodes[n].path, sizeof(nodes[n].path), ORH_DEV_DIR "rdma_cm");
	p.nodes = nodes;
	p.n_nodes = n + 1;
	return p;
}

static const struct orh_sysview_link *link_of(const struct orh_sysview *v, size_t k,
					      const char *name)
{
	for (size_t i = 0; i < v->cls[k].n_links; i++)
		if (!strcmp(v->cls[k].links[i].name, name))
			return &v->cls[k].links[i];
	return NULL;
}

static size_t kept(const struct orh_sysview *v, size_t k)
{
	size_t n = 0;

	for (size_t i = 0; i < v->cls[k].n_links; i++)
		n += v->cls[k].links[i].keep;
	return n;
}

static void read_view(struct orh_sysview *v)
{
	struct orh_err err = { 0 };

	cr_assert_eq(orh_sysview_read(root, v, &err), 0, "%s", err.msg);
}

Test(sysview, the_host_classes_are_read)
{
	struct orh_sysview v;
	const struct orh_sysview_link *l;

	read_view(&v);
	cr_assert(v.cls[0].present && v.cls[1].present && v.cls[2].present);
	cr_assert_eq(v.cls[0].n_links, 9);
	cr_assert_eq(v.cls[1].n_links, 9, "uverbs0..8");
	cr_assert_eq(v.cls[2].n_links, 18, "umad0..8, issm0..8");
	cr_assert_eq(v.cls[1].n_files, 1);
	cr_assert_str_eq(v.cls[1].files[0].name, "abi_version");
	cr_assert_str_eq(v.cls[1].files[0].data, "6\n");
	l = link_of(&v, 1, "uverbs1");
	cr_assert_not_null(l);
	cr_assert_str_eq(l->ibdev, "mlx5_1");
	cr_assert_str_eq(l->target,
			 "../../devices/pci0000:4a/0000:4a:02.0/0000:4b:00.0/infiniband_verbs/uverbs1");
	cr_assert_str_eq(link_of(&v, 0, "mlx5_1")->ibdev, "mlx5_1");
	orh_sysview_free(&v);
}

Test(sysview, a_subset_keeps_only_its_devices_entries)
{
	static const char *const one[] = { "mlx5_1" };
	struct orh_plan p = plan_of(one, 1);
	struct orh_sysview v;

	read_view(&v);
	orh_sysview_decide(&v, &p);
	cr_assert(v.subset);
	cr_assert_eq(v.kept_devs, 1);
	cr_assert_eq(v.all_devs, 9);
	cr_assert_eq(kept(&v, 0), 1);
	cr_assert(link_of(&v, 0, "mlx5_1")->keep);
	cr_assert_eq(kept(&v, 1), 1);
	cr_assert(link_of(&v, 1, "uverbs1")->keep);
	cr_assert_eq(kept(&v, 2), 2);
	cr_assert(link_of(&v, 2, "umad1")->keep && link_of(&v, 2, "issm1")->keep);
	cr_assert_not(link_of(&v, 2, "umad2")->keep);
	orh_sysview_free(&v);
}

Test(sysview, every_device_given_or_none_is_no_view)
{
	static const char *const all[] = { "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4",
					   "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8" };
	struct orh_plan p = plan_of(all, 9);
	struct orh_plan none;
	struct orh_sysview v;

	read_view(&v);
	orh_sysview_decide(&v, &p);
	cr_assert_not(v.subset, "a container given every device sees the host's view");
	cr_assert_eq(v.kept_devs, 9);
	memset(&none, 0, sizeof(none));
	orh_sysview_decide(&v, &none);
	cr_assert_not(v.subset, "a container given nothing is not served");
	orh_sysview_free(&v);
}

Test(sysview, the_classes_are_read_only_where_a_device_is_left_out)
{
	static const char *const three[] = { "mlx5_0", "mlx5_1", "mlx5_2" };
	struct orh_plan p = plan_of(three, 3);
	struct orh_plan none;
	struct orh_inventory inv;

	memset(&inv, 0, sizeof(inv));
	inv.devs = devs;
	inv.n_devs = 3;
	cr_assert_not(orh_sysview_may_subset(&p, &inv), "every device of the node given");
	inv.n_devs = 4; /* a fourth device, given no node */
	snprintf(devs[3].name, sizeof(devs[3].name), "mlx5_3");
	cr_assert(orh_sysview_may_subset(&p, &inv), "mlx5_3 left out");
	memset(&none, 0, sizeof(none));
	cr_assert_not(orh_sysview_may_subset(&none, &inv), "nothing given: not served");
}

Test(sysview, the_id_names_what_is_kept)
{
	static const char *const a[] = { "mlx5_1" }, *const b[] = { "mlx5_2" };
	struct orh_plan pa = plan_of(a, 1);
	struct orh_sysview v;
	char id[17];

	read_view(&v);
	orh_sysview_decide(&v, &pa);
	memcpy(id, v.id, sizeof(id));
	cr_assert_eq(strlen(id), 16);
	orh_sysview_decide(&v, &pa);
	cr_assert_str_eq(v.id, id, "the same view, the same id");
	struct orh_plan pb = plan_of(b, 1);

	orh_sysview_decide(&v, &pb);
	cr_assert_str_neq(v.id, id);
	orh_sysview_free(&v);
}

Test(sysview, the_directory_holds_the_kept_entries_read_only)
{
	static const char *const one[] = { "mlx5_1" };
	struct orh_plan p = plan_of(one, 1);
	struct orh_err err = { 0 };
	struct orh_sysview v;
	char base[PATH_MAX], dir[PATH_MAX], path[PATH_MAX * 2], target[PATH_MAX];
	struct stat st;
	ssize_t n;

	read_view(&v);
	orh_sysview_decide(&v, &p);
	snprintf(base, sizeof(base), "%s/views", root);
	cr_assert_eq(orh_sysview_build(&v, base, dir, sizeof(dir), &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/%s", base, v.id);
	cr_assert_str_eq(dir, path);
	snprintf(path, sizeof(path), "%s/infiniband/mlx5_1", dir);
	n = readlink(path, target, sizeof(target) - 1);
	cr_assert_gt(n, 0);
	target[n] = '\0';
	cr_assert_str_eq(target, link_of(&v, 0, "mlx5_1")->target, "the host's relative target");
	snprintf(path, sizeof(path), "%s/infiniband/mlx5_2", dir);
	cr_assert_eq(lstat(path, &st), -1, "another device is not there");
	snprintf(path, sizeof(path), "%s/infiniband_mad/issm1", dir);
	cr_assert_eq(lstat(path, &st), 0);
	snprintf(path, sizeof(path), "%s/infiniband_verbs/abi_version", dir);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0444);
	cr_assert_eq(st.st_size, 2);
	snprintf(path, sizeof(path), "%s/infiniband_verbs", dir);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0555);
	/* made once: a second build finds it */
	cr_assert_eq(orh_sysview_build(&v, base, dir, sizeof(dir), &err), 0, "%s", err.msg);
	orh_sysview_free(&v);
}

/* The view of the one device named, built under base; its id into id. */
static void build_one(const char *base, const char *dev, char id[17])
{
	const char *const one[] = { dev };
	struct orh_plan p = plan_of(one, 1);
	struct orh_err err = { 0 };
	struct orh_sysview v;
	char dir[PATH_MAX];

	read_view(&v);
	orh_sysview_decide(&v, &p);
	cr_assert_eq(orh_sysview_build(&v, base, dir, sizeof(dir), &err), 0, "%s", err.msg);
	memcpy(id, v.id, 17);
	orh_sysview_free(&v);
}

/* base/name's mtime set an hour back */
static void age(const char *base, const char *name)
{
	struct timeval old[2] = { { time(NULL) - 3600, 0 }, { time(NULL) - 3600, 0 } };
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/%s", base, name);
	cr_assert_eq(utimes(path, old), 0, "%s", path);
}

static bool there(const char *base, const char *name)
{
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/%s", base, name);
	return access(path, F_OK) == 0;
}

/* A view made before is used as it is, and its mtime says it was used now. */
Test(sysview, a_view_used_again_is_marked_used)
{
	char base[PATH_MAX], path[PATH_MAX * 2], id[17], again[17];
	struct stat st;

	snprintf(base, sizeof(base), "%s/views", root);
	build_one(base, "mlx5_1", id);
	age(base, id);
	build_one(base, "mlx5_1", again);
	cr_assert_str_eq(again, id);
	snprintf(path, sizeof(path), "%s/%s", base, id);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_gt(st.st_mtime, time(NULL) - 600, "the mtime of a view used again is now");
}

/* The sweep removes a link whose container's state directory is gone, then a view that no
 * link names and that was not used lately, and what a build or a sweep killed before its
 * end left (a temporary view, read-only inside: a build killed at its rename); a view
 * linked from a state directory that is there, one used lately, and a name that is no
 * view's stay. While a build or a link holds the lock it removes nothing. */
Test(sysview, the_sweep_removes_unused_views_and_leftovers)
{
	char base[PATH_MAX], path[PATH_MAX * 2], cmd[PATH_MAX * 2], used_id[17], old_id[17],
	     young_id[17], gone_id[17];
	struct orh_err err = { 0 };
	int fd, runfd = open(root, O_RDONLY | O_DIRECTORY);

	snprintf(base, sizeof(base), "%s/views", root);
	build_one(base, "mlx5_1", used_id);
	build_one(base, "mlx5_2", old_id);
	build_one(base, "mlx5_3", young_id);
	build_one(base, "mlx5_4", gone_id);
	age(base, used_id);
	age(base, old_id);
	age(base, gone_id);
	snprintf(path, sizeof(path), "%s/ctr-a", root);
	cr_assert_eq(mkdir(path, 0700), 0, "a state directory");
	cr_assert_eq(orh_sysview_link(base, "ctr-a", used_id, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_sysview_link(base, "ctr-gone", gone_id, &err), 0, "%s", err.msg);
	snprintf(cmd, sizeof(cmd), "d=%s/.tmp-12345/infiniband; mkdir -p $d && touch $d/x && "
		 "chmod 555 $d", base);
	cr_assert_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/.dead-1", base);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/notaview", base);
	cr_assert_eq(mkdir(path, 0755), 0);
	age(base, "notaview");

	fd = open(base, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(flock(fd, LOCK_SH), 0);
	cr_assert_eq(orh_sysview_sweep(runfd, "views", 600), 0, "a build is at work");
	cr_assert(there(base, old_id) && there(base, ".tmp-12345"));
	cr_assert(there(base, ORH_SYSVIEW_LINKS "/ctr-gone"));
	close(fd);

	cr_assert_eq(orh_sysview_sweep(runfd, "views", 600), 4);
	cr_assert(there(base, used_id), "linked");
	cr_assert(there(base, ORH_SYSVIEW_LINKS "/ctr-a"));
	cr_assert(there(base, young_id), "used lately");
	cr_assert(there(base, "notaview"));
	cr_assert_not(there(base, old_id), "unused");
	cr_assert_not(there(base, gone_id), "its container's state directory is gone");
	cr_assert_not(there(base, ORH_SYSVIEW_LINKS "/ctr-gone"));
	cr_assert_not(there(base, ".tmp-12345"), "a killed build's");
	cr_assert_not(there(base, ".dead-1"), "a killed sweep's");
	close(runfd);
}

/* ---- the spec mounts ---- */

static const char *exists_yes[4];

static bool fake_exists(void *arg, const char *path)
{
	(void)arg;
	for (size_t i = 0; i < ORH_ARRAY_SIZE(exists_yes) && exists_yes[i]; i++)
		if (!strcmp(path, exists_yes[i]))
			return true;
	return false;
}

static json_t *spec_with(const char *mounts)
{
	char text[2048];
	json_error_t je;
	json_t *j;

	snprintf(text, sizeof(text), "{\"mounts\":[%s]}", mounts);
	j = json_loads(text, 0, &je);
	cr_assert_not_null(j, "%s", je.text);
	return j;
}

static int spec_mounts(json_t *spec, struct orh_sysview *v)
{
	struct orh_sysview_probe probe = { .exists = fake_exists };
	struct orh_err err = { 0 };
	int r = orh_sysview_spec_mounts(spec, v, "/run/v/0123", &probe, &err);

	cr_assert_geq(r, 0, "%s", err.msg);
	return r;
}

#define SYSFS "{\"destination\":\"/sys\",\"type\":\"sysfs\",\"source\":\"sysfs\"}"

Test(sysview, spec_mounts_follow_the_sysfs_mount)
{
	static const char *const one[] = { "mlx5_1" };
	struct orh_plan p = plan_of(one, 1);
	struct orh_sysview v;
	json_t *spec = spec_with(SYSFS), *m;

	read_view(&v);
	orh_sysview_decide(&v, &p);
	memset(exists_yes, 0, sizeof(exists_yes));
	cr_assert_eq(spec_mounts(spec, &v), 0, "the host's /sys has no such class: no mount");
	exists_yes[0] = "/sys/class/infiniband";
	exists_yes[1] = "/sys/class/infiniband_verbs";
	exists_yes[2] = "/sys/class/infiniband_mad";
	cr_assert_eq(spec_mounts(spec, &v), 3);
	m = json_array_get(json_object_get(spec, "mounts"), 2);
	cr_assert_str_eq(json_string_value(json_object_get(m, "destination")),
			 "/sys/class/infiniband_verbs");
	cr_assert_str_eq(json_string_value(json_object_get(m, "source")),
			 "/run/v/0123/infiniband_verbs");
	cr_assert_str_eq(json_string_value(json_object_get(m, "type")), "bind");
	cr_assert_eq(json_array_size(json_object_get(m, "options")), 5);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(m, "options"), 1)),
			 "ro");
	cr_assert_eq(spec_mounts(spec, &v), 0, "a second edit adds nothing");
	cr_assert_eq(json_array_size(json_object_get(spec, "mounts")), 4);
	json_decref(spec);
	orh_sysview_free(&v);
}

Test(sysview, spec_mounts_follow_a_bind_over_sys_class)
{
	static const char *const one[] = { "mlx5_1" };
	struct orh_plan p = plan_of(one, 1);
	struct orh_sysview v;
	json_t *spec = spec_with(SYSFS ",{\"destination\":\"/sys/class/\",\"type\":\"none\","
				       "\"source\":\"/fix/class\",\"options\":[\"rbind\"]},"
				       "{\"destination\":\"/sys/class/infiniband_mad\","
				       "\"type\":\"tmpfs\",\"source\":\"tmpfs\"}");

	read_view(&v);
	orh_sysview_decide(&v, &p);
	memset(exists_yes, 0, sizeof(exists_yes));
	exists_yes[0] = "/fix/class/infiniband";
	exists_yes[1] = "/sys/class/infiniband_verbs"; /* the host's: covered by the bind */
	cr_assert_eq(spec_mounts(spec, &v), 1, "infiniband only: the bind's source has it, "
					       "the spec mounts infiniband_mad itself");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(spec, "mounts"), 3), "destination")),
			 "/sys/class/infiniband");
	json_decref(spec);
	orh_sysview_free(&v);
}
