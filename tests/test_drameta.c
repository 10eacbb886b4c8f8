/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DRA device metadata (KEP-5304): the files' paths and text (orh_dra_meta_path(),
 * orh_dra_meta_parse(): every bad input an error naming the file and the field), their read
 * through a container's root (orh_dra_meta_read(): bounded, only a file mounted there, a bad
 * file a warning), the NICs on the PCIe roots of a claim's GPUs (orh_dra_affinity(), pure)
 * and the decision from them on the sample node seed001-gpu (each dual-port card, mlx5_1+2
 * 0000:4d, mlx5_3+4 0000:65, ..., under a PCIe root with two GPUs: 0000:4e:00.0 and
 * 0000:4f:00.0 under pci0000:4a, 0000:66:00.0 under pci0000:62; uverbsN = 231:192+N): the
 * plan, and where each HCA came from in the record.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node_fixture.h"
#include "orh/apply/record.h"
#include "orh/base/rootfs.h"
#include "orh/decide/affinity.h"
#include "orh/decide/decide.h"
#include "orh/decide/oci.h"
#include "orh/node/drameta.h"
#include "plan_check.h"

#define TPL ORH_DRA_META_DIR "/resourceclaimtemplates/rdma"
#define GPU_FILE TPL "/gpu/rdma.orh.test-metadata.json"
#define NIC_FILE TPL "/nic/rdma.orh.test-metadata.json"

/* A DeviceMetadata object of version v: request req, devices of rdma.orh.test "name pci root"
 * separated by ';' (pci or root "-": no such attribute) */
static char *object(const char *v, const char *req, const char *devs)
{
	char *out = orh_xmalloc(4096);
	size_t n = (size_t)snprintf(out, 4096, "{\"apiVersion\":\"metadata.resource.k8s.io/"
				    "%s\",\"kind\":\"DeviceMetadata\",\"metadata\":{\"name\":"
				    "\"x\",\"generation\":1},\"requests\":[{\"name\":\"%s\","
				    "\"devices\":[", v, req);

	for (const char *p = devs; p && *p;) {
		const char *e = strchr(p, ';');
		char one[160], name[64], pci[32], rt[32];

		snprintf(one, sizeof(one), "%.*s", (int)(e ? (size_t)(e - p) : strlen(p)), p);
		cr_assert_eq(sscanf(one, "%63s %31s %31s", name, pci, rt), 3, "%s", one);
		n += (size_t)snprintf(out + n, 4096 - n, "%s{\"name\":\"%s\",\"driver\":"
				      "\"rdma.orh.test\",\"pool\":\"localhost\",\"attributes\":"
				      "{\"hca\":{\"string\":\"x\"}", p == devs ? "" : ",", name);
		if (strcmp(pci, "-"))
			n += (size_t)snprintf(out + n, 4096 - n, ",\"resource.kubernetes.io/"
					      "pciBusID\":{\"string\":\"%s\"}", pci);
		if (strcmp(rt, "-"))
			n += (size_t)snprintf(out + n, 4096 - n, ",\"resource.kubernetes.io/"
					      "pcieRoot\":{\"string\":\"%s\"}", rt);
		n += (size_t)snprintf(out + n, 4096 - n, "}}");
		p = e ? e + 1 : NULL;
	}
	snprintf(out + n, 4096 - n, "]}]}");
	return out;
}

static int parse(const char *file, const char *text, struct orh_dra_meta *m, struct orh_err *err)
{
	struct orh_dra_file f;

	cr_assert(orh_dra_meta_path(file, &f), "%s", file);
	return orh_dra_meta_parse(text, strlen(text), file, &f, m, err);
}

Test(drameta, paths_as_the_protocol_lays_them_out)
{
	struct orh_dra_file f;

	cr_assert(orh_dra_meta_path(NIC_FILE, &f));
	cr_assert(f.template);
	cr_assert_str_eq(f.claim, "rdma");
	cr_assert_str_eq(f.request, "nic");
	cr_assert_str_eq(f.driver, "rdma.orh.test");
	cr_assert(orh_dra_meta_path(ORH_DRA_META_DIR "/resourceclaims/c1/gpu/gpu.example.com"
				    "-metadata.json", &f));
	cr_assert(!f.template);
	cr_assert_str_eq(f.claim, "c1");
	cr_assert_str_eq(f.driver, "gpu.example.com");
	static const char *const not_ones[] = {
		"/var/run/dra-device-attributes/c1/gpu/d-metadata.json",
		ORH_DRA_META_DIR "/resourceclaims/c1/gpu/-metadata.json",
		ORH_DRA_META_DIR "/resourceclaims/c1/gpu/d-metadata.jsonx",
		ORH_DRA_META_DIR "/resourceclaims/c1/gpu/x/d-metadata.json",
		ORH_DRA_META_DIR "/resourceclaims/../gpu/d-metadata.json",
		ORH_DRA_META_DIR "/resourceclaims//gpu/d-metadata.json",
		ORH_DRA_META_DIR "/resourceclaims/c 1/gpu/d-metadata.json",
		ORH_DRA_META_DIR "/resourceslices/c1/gpu/d-metadata.json",
		ORH_DRA_META_DIR "/resourceclaims/c1/gpu",
		NULL,
	};
	for (size_t i = 0; not_ones[i]; i++)
		cr_assert(!orh_dra_meta_path(not_ones[i], &f), "%s", not_ones[i]);
}

/* The metadata files of a spec: the destinations of its mounts that are such paths. */
Test(drameta, the_specs_metadata_mounts)
{
	json_t *spec = json_pack("{s:[{s:s},{s:s},{s:s},{s:i}]}", "mounts",
				 "destination", NIC_FILE, "destination", "/etc/hosts",
				 "destination", GPU_FILE, "destination", 3);
	const char *out[1] = { NULL };

	cr_assert_not_null(spec);
	cr_assert_eq(orh_spec_dra_meta_mounts(spec, NULL, 0), 2);
	cr_assert_eq(orh_spec_dra_meta_mounts(spec, out, 1), 2);
	cr_assert_str_eq(out[0], NIC_FILE);
	json_decref(spec);
}

/* A stream of one object per version: the first version known here is read, an unknown
 * one before it skipped, the objects after it not looked at. */
Test(drameta, the_first_known_version_of_the_stream)
{
	_cleanup_free_ char *v9 = object("v9", "nic", "dev-v9 0000:4d:00.0 pci0000:4a");
	_cleanup_free_ char *b1 = object("v1beta1", "nic", "mlx5-1 0000:4d:00.0 pci0000:4a;"
					 "mlx5-3 0000:65:00.0 -");
	_cleanup_free_ char *a1 = object("v1alpha1", "nic", "dev-a1 0000:4d:00.0 pci0000:4a");
	_cleanup_free_ char *text = orh_xasprintf("%s\n%s %s\n", v9, b1, a1);
	struct orh_dra_meta m = { 0 };
	struct orh_err err = { 0 };

	cr_assert_eq(parse(NIC_FILE, text, &m, &err), 0, "%s", err.msg);
	cr_assert_eq(m.n, 2);
	cr_assert_str_eq(m.v[0].name, "mlx5-1");
	cr_assert_str_eq(m.v[0].pci_bus_id, "0000:4d:00.0");
	cr_assert_str_eq(m.v[0].pcie_root, "pci0000:4a");
	cr_assert_str_eq(m.v[0].from.request, "nic");
	cr_assert_str_eq(m.v[1].name, "mlx5-3");
	cr_assert_str_empty(m.v[1].pcie_root);
	cr_assert_eq(orh_dra_meta_find(&m, "0000:65:00.0"), &m.v[1]);
	cr_assert_null(orh_dra_meta_find(&m, "0000:66:00.0"));
	orh_dra_meta_free(&m);
}

/* Every bad input: an error naming the file and the field, nothing of the file kept. */
Test(drameta, bad_inputs_name_the_file_and_the_field)
{
#define V1B1 "{\"apiVersion\":\"metadata.resource.k8s.io/v1beta1\",\"kind\":\"DeviceMetadata\","
#define NIC_REQ "\"requests\":[{\"name\":\"nic\",\"devices\":["
#define DEV_D "{\"name\":\"d\",\"driver\":\"rdma.orh.test\","
#define ATTR "\"attributes\":{\"resource.kubernetes.io/"
	static const struct {
		const char *text, *says;
	} cases[] = {
		{ "", "no DeviceMetadata object of a known apiVersion" },
		{ "{\"apiVersion\":\"metadata.resource.k8s.io/v9\",\"kind\":\"DeviceMetadata\"}",
		  "no DeviceMetadata object of a known apiVersion" },
		{ V1B1, "object 1: not JSON" },
		{ "[1]", "object 1: not a DeviceMetadata" },
		{ "{\"apiVersion\":\"metadata.resource.k8s.io/v1beta1\",\"kind\":\"Pod\"}",
		  "object 1: not a DeviceMetadata" },
		{ V1B1 "\"requests\":{}}", "field 'requests': not an array" },
		{ V1B1 "\"requests\":[{\"name\":\"gpu\"}]}",
		  "field 'requests[0].name': not the request the file's path says" },
		{ V1B1 NIC_REQ "{\"name\":\"d\",\"driver\":\"x.y\"}]}]}",
		  "field 'requests[0].devices[0].driver': not the driver the file's name says" },
		{ V1B1 NIC_REQ "{\"driver\":\"rdma.orh.test\"}]}]}",
		  "field 'requests[0].devices[0].name': missing" },
		{ V1B1 NIC_REQ "{\"name\":\"d\\u001b[2J\",\"driver\":\"rdma.orh.test\"}]}]}",
		  "field 'requests[0].devices[0].name': not a name" },
		{ V1B1 NIC_REQ DEV_D ATTR "pciBusID\":{\"string\":\"4d:00.0\"}}}]}]}",
		  "field 'requests[0].devices[0].attributes[\"resource.kubernetes.io/pciBusID\"]"
		  ".string': not a PCI bus ID" },
		{ V1B1 NIC_REQ DEV_D ATTR "pcieRoot\":{\"int\":4}}}]}]}",
		  "[\"resource.kubernetes.io/pcieRoot\"].string': not a string attribute" },
		{ V1B1 NIC_REQ DEV_D ATTR "pcieRoot\":{\"string\":\"pci0000:4a/0000:4a:02.0\"}}}"
		  "]}]}", "not a PCIe root (pcidddd:bb)" },
	};
	for (size_t i = 0; i < ORH_ARRAY_SIZE(cases); i++) {
		struct orh_dra_meta m = { 0 };
		struct orh_err err = { 0 };

		cr_assert_eq(parse(NIC_FILE, cases[i].text, &m, &err), -EINVAL, "case %zu", i);
		cr_assert(strstr(err.msg, "DRA device metadata '" NIC_FILE "'"), "%s", err.msg);
		cr_assert(strstr(err.msg, cases[i].says), "case %zu: %s", i, err.msg);
		cr_assert_eq(m.n, 0);
		orh_dra_meta_free(&m);
	}
	/* bounded: objects in the stream */
	{
		struct orh_dra_meta m = { 0 };
		struct orh_err err = { 0 };
		char text[2048] = "";

		for (int i = 0; i <= ORH_DRA_META_MAX_OBJECTS; i++)
			strcat(text, "{\"apiVersion\":\"v9\",\"kind\":\"DeviceMetadata\"}");
		cr_assert_eq(parse(NIC_FILE, text, &m, &err), -EINVAL);
		cr_assert(strstr(err.msg, "more than 8 objects"), "%s", err.msg);
	}
}

/* ---------------------------------------------------------------- read through a root */

static char root[256];

static void put(const char *path, const char *text)
{
	char full[512], cmd[700];
	int fd;

	snprintf(full, sizeof(full), "%s%s", root, path);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", full);
	cr_assert_eq(system(cmd), 0);
	fd = open(full, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0, "%s", full);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static bool warned(const struct orh_strv *w, const char *a, const char *b)
{
	for (size_t i = 0; i < w->n; i++)
		if (strstr(w->v[i], a) && strstr(w->v[i], b))
			return true;
	return false;
}

Test(drameta, read_through_the_root_bounded)
{
	_cleanup_free_ char *nic = object("v1beta1", "nic", "mlx5-1 0000:4d:00.0 pci0000:4a");
	_cleanup_free_ char *big = orh_xmalloc(ORH_DRA_META_MAX_BYTES + 2);
	const char *paths[] = { NIC_FILE, NIC_FILE, TPL "/big/rdma.orh.test-metadata.json",
				TPL "/gone/rdma.orh.test-metadata.json",
				TPL "/link/rdma.orh.test-metadata.json", "/etc/passwd" };
	struct orh_strv w = { 0 };
	struct orh_dra_meta m = { 0 };
	_cleanup_close_ int rootfd = -1;
	struct orh_err err = { 0 };
	uint64_t mnt = 0;
	char link[512];

	snprintf(root, sizeof(root), "/dev/shm/orh-drameta-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	put(NIC_FILE, nic);
	memset(big, ' ', ORH_DRA_META_MAX_BYTES + 1);
	big[ORH_DRA_META_MAX_BYTES + 1] = '\0';
	put(TPL "/big/rdma.orh.test-metadata.json", big);
	/* a link out of the root leads to the root's own /etc/passwd, which is not there */
	put(TPL "/link/.keep", "");
	snprintf(link, sizeof(link), "%s" TPL "/link/rdma.orh.test-metadata.json", root);
	cr_assert_eq(symlink("/etc/passwd", link), 0);
	cr_assert_eq(orh_rootfs_open(root, &rootfd, &err), 0, "%s", err.msg);

	/* any mount: the file read once, the bad ones one warning each naming the file */
	orh_dra_meta_read(rootfd, ORH_MOUNT_ANY, paths, ORH_ARRAY_SIZE(paths), &m, &w);
	cr_assert_eq(m.n, 1);
	cr_assert_eq(m.n_files, 1);
	cr_assert_str_eq(m.v[0].name, "mlx5-1");
	cr_assert(warned(&w, TPL "/big/", "larger than 65536 bytes"));
	cr_assert(warned(&w, TPL "/gone/", "opening it in the container"));
	cr_assert(warned(&w, TPL "/link/", "opening it in the container"));
	cr_assert_eq(w.n, 3, "the path that is no metadata file's is not looked at");
	orh_dra_meta_free(&m);
	orh_strv_free(&w);

	/* the root's own mount: a file of the image, not one mounted there */
	cr_assert_eq(orh_fd_mount_id(rootfd, &mnt), 0);
	orh_dra_meta_read(rootfd, mnt, paths, 1, &m, &w);
	cr_assert_eq(m.n, 0);
	cr_assert(warned(&w, NIC_FILE, "not a file mounted there"), "%s", w.n ? w.v[0] : "");
	orh_dra_meta_free(&m);
	orh_strv_free(&w);
	fixture_remove_node(root);
}

/* ---------------------------------------------------------------- the choice */

static char node[256];
static struct orh_inventory inv;
static struct orh_gpus gpus;
static struct orh_dra_meta meta;
static struct orh_affinity aff;

static void make(void)
{
	/* as the decision reads it: plan mode, the topology read for the GPUs */
	struct orh_discover_opts o = {
		.sysroot = node, .gid_scan = ORH_GIDS_PLAN, .topology = true,
		.want = { .family = AF_INET, .roce_version = 2 },
	};
	struct orh_err err = { 0 };

	fixture_make_node(node, sizeof(node), "orh-drameta", "seed001-gpu");
	cr_assert_eq(orh_discover(&o, &inv, &err), 0, "%s", err.msg);
	cr_assert_eq(orh_discover_gpus(node, ORH_GPU_SCAN_DRIVER, &gpus, &err), 0, "%s", err.msg);
	cr_assert_eq(gpus.n, 8);
}

static void unmake(void)
{
	orh_affinity_free(&aff);
	orh_dra_meta_free(&meta);
	orh_gpus_free(&gpus);
	orh_inventory_free(&inv);
	fixture_remove_node(node);
}

TestSuite(dra_affinity, .init = make, .fini = unmake);

/* The claim's GPU and NIC files (devices as object() takes them) */
static void claim(const char *gpu_devs, const char *nic_devs)
{
	_cleanup_free_ char *g = object("v1beta1", "gpu", gpu_devs);
	_cleanup_free_ char *n = object("v1beta1", "nic", nic_devs);
	struct orh_err err = { 0 };

	orh_dra_meta_free(&meta);
	cr_assert_eq(parse(GPU_FILE, g, &meta, &err), 0, "%s", err.msg);
	cr_assert_eq(parse(NIC_FILE, n, &meta, &err), 0, "%s", err.msg);
}

static size_t dev_at(const char *name)
{
	for (size_t i = 0; i < inv.n_devs; i++)
		if (!strcmp(inv.devs[i].name, name))
			return i;
	cr_assert_fail("no %s", name);
	return 0;
}

static const char *chosen(const bool *cand)
{
	static char out[256];

	orh_affinity_free(&aff);
	out[0] = '\0';
	if (!orh_dra_affinity(&meta, inv.devs, inv.n_devs, cand, &gpus, &aff))
		return "no GPU";
	for (size_t i = 0; i < aff.n; i++)
		if (aff.v[i].chosen)
			snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s",
				 out[0] ? "," : "", inv.devs[i].name);
	return out;
}

Test(dra_affinity, the_nic_on_the_gpus_pcie_root)
{
	claim("gpu-4e 0000:4e:00.0 pci0000:4a", "mlx5-1 0000:4d:00.0 pci0000:4a;"
	      "mlx5-3 0000:65:00.0 pci0000:62");
	cr_assert_str_eq(chosen(NULL), "mlx5_1");
	cr_assert(!aff.every);
	cr_assert(strstr(aff.v[dev_at("mlx5_1")].reason, "on PCIe root pci0000:4a with GPU "
		  "0000:4e:00.0 (claim rdma (of a template), request gpu, driver rdma.orh.test, "
		  "device gpu-4e)"), "%s", aff.v[dev_at("mlx5_1")].reason);
	cr_assert(strstr(aff.v[dev_at("mlx5_3")].reason, "not on the PCIe root of a GPU of the "
		  "container's DRA claims (pci0000:4a)"), "%s", aff.v[dev_at("mlx5_3")].reason);
	/* two GPUs on two roots: a NIC on each */
	claim("gpu-4e 0000:4e:00.0 pci0000:4a;gpu-66 0000:66:00.0 pci0000:62",
	      "mlx5-1 0000:4d:00.0 pci0000:4a;mlx5-3 0000:65:00.0 pci0000:62;"
	      "mlx5-5 0000:a6:00.0 pci0000:a3");
	cr_assert_str_eq(chosen(NULL), "mlx5_1,mlx5_3");
	cr_assert(strstr(aff.summary, "pci0000:4a, pci0000:62"), "%s", aff.summary);
}

/* The roots are the metadata's, not sysfs' (where mlx5_3 is under pci0000:62); a NIC with
 * no pcieRoot in its metadata, or none at all, is on no GPU's root. */
Test(dra_affinity, the_metadata_says_not_sysfs)
{
	bool cand[16] = { 0 };

	claim("gpu-4e 0000:4e:00.0 pci0000:4a", "mlx5-3 0000:65:00.0 pci0000:4a;"
	      "mlx5-2 0000:4d:00.1 -");
	cr_assert_str_eq(chosen(NULL), "mlx5_3");
	cr_assert(strstr(aff.v[dev_at("mlx5_2")].reason, "not on the PCIe root"));
	cr_assert(strstr(aff.v[dev_at("mlx5_1")].reason, "(none names it)"),
		  "%s", aff.v[dev_at("mlx5_1")].reason);
	/* only candidates are chosen: with mlx5_3's port not used, none is, and every
	 * candidate stays */
	cand[dev_at("mlx5_2")] = true;
	cr_assert_str_eq(chosen(cand), "mlx5_2");
	cr_assert(aff.every);
	cr_assert(strstr(aff.summary, "no NIC on the PCIe root of the GPU of the container's "
			 "DRA claims (pci0000:4a): every NIC"), "%s", aff.summary);
}

/* No GPU of the node in the metadata (a device of another kind, a bus ID no GPU has):
 * nothing to choose by */
Test(dra_affinity, no_gpu_no_choice)
{
	claim("fpga-1 0000:1a:00.0 pci0000:4a;gpu-x 0000:4e:00.1 pci0000:4a",
	      "mlx5-1 0000:4d:00.0 pci0000:4a");
	cr_assert_str_eq(chosen(NULL), "no GPU");
	cr_assert_eq(aff.n, 0);
}

/* The decision for a container given mlx5_1 and mlx5_3 (their uverbs nodes) with the
 * metadata of its claims, under nic_affinity mode; *d to be freed (the metadata is meta's) */
static void decide(enum orh_nic_affinity mode, struct orh_decision *d)
{
	struct orh_config cfg;
	struct orh_gid_reader reader = orh_inventory_gids(&inv);
	struct orh_node_view view = { .inv = &inv, .gids = &reader, .gpus = &gpus };
	struct orh_err err = { 0 };

	orh_config_defaults(&cfg);
	cfg.nic_affinity = mode;
	memset(d, 0, sizeof(*d));
	d->act = ORH_ACT_DEFAULT;
	d->facts.devs[0] = (struct orh_devnum){ 231, 193 };
	d->facts.devs[1] = (struct orh_devnum){ 231, 195 };
	d->facts.n_devs = 2;
	d->dra = meta;
	cr_assert_eq(orh_decide_node(&cfg, &view, 0, d, &err), 0, "%s", err.msg);
	d->have_plan = true;
	orh_config_free(&cfg);
}

static void decision_free(struct orh_decision *d)
{
	d->dra = (struct orh_dra_meta){ 0 };
	orh_decision_free(d);
}

/* A GPU under pci0000:4a by its claims: mlx5_1 alone (rule 9), and the record says which
 * claim each HCA came from; under nic_affinity = none, both. */
Test(dra_affinity, the_decision_and_the_record)
{
	struct orh_decision d;
	struct orh_record_in rec = { .id = "c0ffee", .stage = "nccl-conf", .nodes_created = -1,
				     .nodes_kept = -1, .nodes_bound = -1, .spec_devices = -1,
				     .d = &d };
	_cleanup_free_ char *text = NULL;
	json_t *j, *ports, *p;
	size_t len, i;
	int seen = 0;

	claim("gpu-4e 0000:4e:00.0 pci0000:4a", "mlx5-1 0000:4d:00.0 pci0000:4a;"
	      "mlx5-3 0000:65:00.0 pci0000:62");
	decide(ORH_AFFINITY_NONE, &d);
	cr_assert_str_eq(plan_value(&d.plan, "NCCL_IB_HCA"), "=mlx5_1:1,mlx5_3:1");
	decision_free(&d);

	decide(ORH_AFFINITY_PCIE, &d);
	cr_assert_str_eq(plan_value(&d.plan, "NCCL_IB_HCA"), "=mlx5_1:1");
	cr_assert_eq(d.facts.dra, &d.dra);
	text = orh_record_text(&rec, &len);
	cr_assert_not_null(text);
	j = json_loads(text, 0, NULL);
	cr_assert_not_null(j, "%s", text);
	ports = json_object_get(json_object_get(j, "plan"), "ports");
	json_array_foreach(ports, i, p) {
		const char *hca = json_string_value(json_object_get(p, "hca"));
		const char *from = json_string_value(json_object_get(p, "from"));
		const json_t *c = json_object_get(p, "claim");
		bool one = !strcmp(hca, "mlx5_1");

		if (!one && strcmp(hca, "mlx5_3")) {
			cr_assert_str_eq(from, "node", "%s", hca);
			cr_assert_null(c);
			continue;
		}
		seen++;
		cr_assert_str_eq(from, "claim", "%s", hca);
		cr_assert_str_eq(json_string_value(json_object_get(c, "name")), "rdma");
		cr_assert(json_is_true(json_object_get(c, "template")));
		cr_assert_str_eq(json_string_value(json_object_get(c, "request")), "nic");
		cr_assert_str_eq(json_string_value(json_object_get(c, "driver")), "rdma.orh.test");
		cr_assert_str_eq(json_string_value(json_object_get(c, "device")),
				 one ? "mlx5-1" : "mlx5-3");
		cr_assert_eq(json_is_true(json_object_get(p, "used")), one, "%s", hca);
		if (!one)
			cr_assert(strstr(json_string_value(json_object_get(p, "reason")),
					 "rule 9: not on the PCIe root"), "%s",
				  json_string_value(json_object_get(p, "reason")));
	}
	cr_assert_eq(seen, 2);
	json_decref(j);
	decision_free(&d);
}
