/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU discovery on the sample nodes built by tests/mknode.py (dgx-h100, seed001-gpu) and
 * on damaged copies; the driver's information file; NVIDIA_VISIBLE_DEVICES; the PCI
 * topology levels and the NIC affinity choice.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node_fixture.h"
#include "orh/decide/affinity.h"
#include "orh/node/gpu.h"
#include "orh/node/inventory.h"

static char root[256];
static struct orh_gpus gpus;
static struct orh_inventory inv;
static struct orh_err err;

static void make_node(const char *node)
{
	fixture_make_node(root, sizeof(root), "orh-gpu", node);
}

static void cleanup(void)
{
	orh_gpus_free(&gpus);
	orh_inventory_free(&inv);
	fixture_remove_node(root);
}

static void discover_gpus(enum orh_gpu_scan scan)
{
	orh_gpus_free(&gpus);
	cr_assert_eq(orh_discover_gpus(root, scan, &gpus, &err), 0, "%s", err.msg);
}

static void discover_rdma(enum orh_gid_scan mode, bool topology)
{
	struct orh_discover_opts o = {
		.sysroot = root, .gid_scan = mode, .topology = topology,
		.want = { .family = AF_INET, .roce_version = 2 },
	};
	orh_inventory_free(&inv);
	cr_assert_eq(orh_discover(&o, &inv, &err), 0, "%s", err.msg);
}

static size_t dev_at(const char *name)
{
	for (size_t i = 0; i < inv.n_devs; i++)
		if (!strcmp(inv.devs[i].name, name))
			return i;
	cr_assert_fail("device %s not found", name);
	return 0;
}

static bool warned(const struct orh_strv *w, const char *a, const char *b)
{
	for (size_t i = 0; i < w->n; i++)
		if (strstr(w->v[i], a) && (!b || strstr(w->v[i], b)))
			return true;
	return false;
}

static void __attribute__((format(printf, 1, 2))) sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	cr_assert_not_null(f, "open %s", path);
	fputs(text, f);
	fclose(f);
}

/* A PCI function at sys/devices/pci0000:00/<bdf>, linked from sys/bus/pci/devices. */
static void add_function(const char *bdf, const char *vendor, const char *cls)
{
	char rel[256], text[64];

	sh("mkdir -p %s/sys/devices/pci0000:00/%s", root, bdf);
	sh("ln -s ../../../devices/pci0000:00/%s %s/sys/bus/pci/devices/%s", bdf, root, bdf);
	snprintf(rel, sizeof(rel), "sys/devices/pci0000:00/%s/vendor", bdf);
	snprintf(text, sizeof(text), "%s\n", vendor);
	put(rel, text);
	snprintf(rel, sizeof(rel), "sys/devices/pci0000:00/%s/class", bdf);
	snprintf(text, sizeof(text), "%s\n", cls);
	put(rel, text);
}

TestSuite(gpu, .fini = cleanup);

static const char *const dgx_bdf[8] = { "0000:18:00.0", "0000:1b:00.0", "0000:3a:00.0",
					"0000:3d:00.0", "0000:9a:00.0", "0000:9d:00.0",
					"0000:ba:00.0", "0000:bd:00.0" };

static void check_dgx(void)
{
	cr_assert_eq(gpus.n, 8);
	cr_assert_eq(gpus.warnings.n, 0, "unexpected warning: %s",
		     gpus.warnings.n ? gpus.warnings.v[0] : "");
	for (unsigned i = 0; i < 8; i++) {
		cr_assert_eq(gpus.v[i].index, i);
		cr_assert_str_eq(gpus.v[i].bdf, dgx_bdf[i], "GPU %u", i);
		cr_assert_eq(gpus.v[i].minor, (int)i);
		cr_assert_eq(gpus.v[i].numa_node, i < 4 ? 0 : 1, "GPU %u", i);
		cr_assert_eq(gpus.v[i].device_id, 0x2330);
		cr_assert_eq(gpus.v[i].pci_class, 0x030200);
		cr_assert_str_eq(gpus.v[i].model, "NVIDIA H100 80GB HBM3");
	}
	cr_assert_str_eq(gpus.v[0].uuid, "GPU-efc0520c-e2ee-e86d-8193-ef5cca3213fb");
	cr_assert_str_eq(gpus.v[2].uuid, "GPU-8c2f4a61-0d3e-4b7a-a5c9-71e2f03d6a48");
	cr_assert_str_eq(gpus.v[2].pci_path,
			 "devices/pci0000:37/0000:37:01.0/0000:38:00.0/0000:39:00.0/0000:3a:00.0");
	cr_assert_str_eq(gpus.v[7].pci_path,
			 "devices/pci0000:b7/0000:b7:01.0/0000:b8:00.0/0000:b9:03.0/0000:bd:00.0");
}

Test(gpu, dgx_h100_gpus_in_bus_order_both_ways)
{
	make_node("dgx-h100");
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	check_dgx();
	cr_assert_eq(gpus.file_reads, 8 * 5, "%lu reads, not information, vendor, class, device "
		     "and numa_node of each GPU", gpus.file_reads);
	discover_gpus(ORH_GPU_SCAN_PCI); /* every function, bridges and NICs included */
	check_dgx();
	cr_assert_gt(gpus.file_reads, 8 * 5);
}

Test(gpu, dgx_h100_rdma_devices_have_their_pci_path)
{
	make_node("dgx-h100");
	discover_rdma(ORH_GIDS_ALL, false);
	cr_assert_eq(inv.warnings.n, 0, "%s", inv.warnings.n ? inv.warnings.v[0] : "");
	cr_assert_str_eq(inv.devs[dev_at("mlx5_2")].pci_path,
			 "devices/pci0000:37/0000:37:01.0/0000:38:00.0/0000:39:01.0/0000:3b:00.0");
	cr_assert_str_eq(inv.devs[dev_at("mlx5_9")].pci_path,
			 "devices/pci0000:a9/0000:a9:01.0/0000:aa:00.0");
	cr_assert_eq(inv.devs[dev_at("mlx5_5")].numa_node, 1);
	/* plan mode reads it only when asked to */
	discover_rdma(ORH_GIDS_PLAN, false);
	cr_assert_str_eq(inv.devs[dev_at("mlx5_2")].pci_path, "");
	cr_assert_eq(inv.devs[dev_at("mlx5_5")].numa_node, -1);
	discover_rdma(ORH_GIDS_PLAN, true);
	cr_assert_str_eq(inv.devs[dev_at("mlx5_2")].pci_path,
			 "devices/pci0000:37/0000:37:01.0/0000:38:00.0/0000:39:01.0/0000:3b:00.0");
	cr_assert_eq(inv.devs[dev_at("mlx5_5")].numa_node, 1);
	cr_assert_eq(inv.warnings.n, 0, "%s", inv.warnings.n ? inv.warnings.v[0] : "");
}

Test(gpu, seed001_gpu_index_is_bus_order_not_minor)
{
	static const char *const bdf[8] = { "0000:4e:00.0", "0000:4f:00.0", "0000:66:00.0",
					    "0000:67:00.0", "0000:a7:00.0", "0000:a8:00.0",
					    "0000:e5:00.0", "0000:e6:00.0" };
	static const int minor[8] = { 2, 3, 0, 1, 6, 7, 4, 5 };
	const struct orh_gpu *g;

	make_node("seed001-gpu");
	discover_gpus(ORH_GPU_SCAN_PCI);
	cr_assert_eq(gpus.n, 8);
	cr_assert_eq(gpus.warnings.n, 0, "%s", gpus.warnings.n ? gpus.warnings.v[0] : "");
	for (unsigned i = 0; i < 8; i++) {
		cr_assert_str_eq(gpus.v[i].bdf, bdf[i]);
		cr_assert_eq(gpus.v[i].index, i);
		cr_assert_eq(gpus.v[i].minor, minor[i], "GPU %u", i);
		cr_assert_eq(gpus.v[i].numa_node, i < 4 ? 0 : 1);
	}
	cr_assert_str_eq(gpus.v[0].uuid, "GPU-2f7a9c41-8e3b-4d06-a1c5-6b0e9d3f7a24");
	cr_assert_str_eq(gpus.v[3].pci_path,
			 "devices/pci0000:62/0000:62:02.0/0000:63:00.0/0000:64:02.0/0000:67:00.0");
	g = orh_gpu_by_minor(&gpus, 0);
	cr_assert_not_null(g);
	cr_assert_eq(g->index, 2, "/dev/nvidia0 is GPU 2 here");
	cr_assert_null(orh_gpu_by_minor(&gpus, 8));
	discover_rdma(ORH_GIDS_ALL, false);
	cr_assert_str_eq(inv.devs[dev_at("mlx5_2")].pci_path,
			 "devices/pci0000:4a/0000:4a:02.0/0000:4b:00.0/0000:4c:00.0/0000:4d:00.1");
	cr_assert_str_eq(inv.devs[dev_at("mlx5_0")].pci_path, "devices/pci0000:1a/0000:1a:00.0");
}

Test(gpu, no_gpus_no_warnings)
{
	make_node("nordma");
	discover_gpus(ORH_GPU_SCAN_PCI);
	cr_assert_eq(gpus.n, 0);
	cr_assert_eq(gpus.warnings.n, 0, "%s", gpus.warnings.n ? gpus.warnings.v[0] : "");
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	cr_assert_eq(gpus.n, 0);
	cr_assert_eq(orh_discover_gpus("/nonexistent-orh", ORH_GPU_SCAN_DRIVER, &gpus, &err),
		     -ENOENT);
	cr_assert(strstr(err.msg, "/nonexistent-orh"), "%s", err.msg);
}

#define INFO "proc/driver/nvidia/gpus/%s/information"

static void put_info(const char *bdf, const char *text)
{
	char rel[128];

	snprintf(rel, sizeof(rel), INFO, bdf);
	put(rel, text);
}

Test(gpu, a_garbled_information_file_costs_its_fields_not_the_gpu)
{
	make_node("dgx-h100");
	put_info("0000:3d:00.0", "Model: \t\t NVIDIA H100\nGPU UUID: \t not-a-uuid\n"
				 "Bus Location: \t 0000:3d:00.0\nDevice Minor: \t x\ngarbage\n");
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	cr_assert_eq(gpus.n, 8);
	cr_assert_str_eq(gpus.v[3].bdf, "0000:3d:00.0");
	cr_assert_str_eq(gpus.v[3].uuid, "");
	cr_assert_eq(gpus.v[3].minor, -1);
	cr_assert_str_eq(gpus.v[3].model, "NVIDIA H100");
	cr_assert(warned(&gpus.warnings, root, "0000:3d:00.0/information': line 2: 'GPU UUID'"),
		  "%s", gpus.warnings.n ? gpus.warnings.v[0] : "none");
	cr_assert(warned(&gpus.warnings, "and more bad lines", NULL));
	cr_assert(warned(&gpus.warnings, "gives no GPU UUID", NULL));
	cr_assert_str_eq(gpus.v[4].uuid, "GPU-5e9c3b27-a1f4-4d62-b08e-93f6c7d2e415");
}

Test(gpu, a_missing_or_oversized_information_file_skips_that_gpu)
{
	char big[6000];

	make_node("dgx-h100");
	sh("rm %s/" INFO, root, "0000:9d:00.0");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put_info("0000:1b:00.0", big);
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	cr_assert_eq(gpus.n, 6);
	cr_assert_str_eq(gpus.v[1].bdf, "0000:3a:00.0", "the indexes close up");
	cr_assert_eq(gpus.v[1].index, 1);
	cr_assert(warned(&gpus.warnings, "0000:9d:00.0/information", "No such file"));
	cr_assert(warned(&gpus.warnings, "0000:1b:00.0/information", "larger than 4 KiB"));
}

Test(gpu, excluded_unbound_and_other_nvidia_functions)
{
	make_node("dgx-h100");
	/* "GPU Excluded: Yes": the driver keeps it out of NVML's list */
	put_info("0000:18:00.0", "GPU UUID: \t GPU-efc0520c-e2ee-e86d-8193-ef5cca3213fb\n"
				 "Device Minor: \t 0\nGPU Excluded:\t Yes\n");
	/* a GPU bound to vfio-pci: no proc entry */
	sh("rm -r %s/proc/driver/nvidia/gpus/%s", root, "0000:bd:00.0");
	/* an NVSwitch-like bridge and an audio function of NVIDIA: not GPUs */
	add_function("0000:00:10.0", "0x10de", "0x068000");
	add_function("0000:00:11.0", "0x10de", "0x040300");
	discover_gpus(ORH_GPU_SCAN_PCI);
	cr_assert_eq(gpus.n, 6);
	cr_assert_str_eq(gpus.v[0].bdf, "0000:1b:00.0");
	cr_assert_eq(gpus.v[0].index, 0);
	cr_assert(warned(&gpus.warnings, "0000:18:00.0", "GPU Excluded: Yes"));
	cr_assert(warned(&gpus.warnings, "1 NVIDIA GPU(s) in sysfs", "0000:bd:00.0"));
	cr_assert_eq(gpus.warnings.n, 2, "the bridge and the audio function are no GPUs: %s",
		     gpus.warnings.n > 2 ? gpus.warnings.v[2] : "");
	/* the driver's view: the unbound GPU is not even looked at */
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	cr_assert_eq(gpus.n, 6);
	cr_assert_eq(gpus.warnings.n, 1);
}

Test(gpu, driver_not_loaded)
{
	make_node("dgx-h100");
	sh("rm -r %s/proc/driver", root);
	discover_gpus(ORH_GPU_SCAN_PCI);
	cr_assert_eq(gpus.n, 0);
	cr_assert_eq(gpus.warnings.n, 1);
	cr_assert(warned(&gpus.warnings, "8 NVIDIA GPU(s)", "no GPU has an index"));
	cr_assert(warned(&gpus.warnings, "devices/0000:18:00.0', ...)", NULL),
		  "the first in bus order: %s", gpus.warnings.v[0]);
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	cr_assert_eq(gpus.n, 0);
	cr_assert_eq(gpus.warnings.n, 0);
}

Test(gpu, a_driver_entry_that_is_no_gpu)
{
	make_node("dgx-h100");
	/* the driver names a function sysfs says is a Mellanox NIC */
	sh("mkdir %s/proc/driver/nvidia/gpus/%s", root, "0000:19:00.0");
	put_info("0000:19:00.0", "GPU UUID: \t GPU-00000000-0000-0000-0000-000000000000\n");
	sh("mkdir %s/proc/driver/nvidia/gpus/%s", root, "not-a-bdf");
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	cr_assert_eq(gpus.n, 8);
	cr_assert(warned(&gpus.warnings, "0000:19:00.0", "not an NVIDIA GPU (vendor 0x15b3)"));
	cr_assert(warned(&gpus.warnings, "not-a-bdf", "not a PCI address"));
}

/* ---------------------------------------------------------------- the information file */

Test(gpu, information_real_format)
{
	struct orh_gpu_info info;
	char why[160];
	const char *text = "Model: \t\t NVIDIA H100 80GB HBM3\n"
			   "IRQ:   \t\t 0\n"
			   "GPU UUID: \t GPU-efc0520c-e2ee-e86d-8193-ef5cca3213fb\n"
			   "Video BIOS: \t 96.00.74.00.01\n"
			   "Bus Type: \t PCIe\n"
			   "DMA Size: \t 52 bits\n"
			   "DMA Mask: \t 0xfffffffffffff\n"
			   "Bus Location: \t 0000:00:06.0\n"
			   "Device Minor: \t 0\n"
			   "GPU Firmware: \t 535.129.03\n"
			   "GPU Excluded:\t No\n";

	cr_assert_eq(orh_parse_gpu_info(text, &info, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(info.uuid, "GPU-efc0520c-e2ee-e86d-8193-ef5cca3213fb");
	cr_assert_str_eq(info.bus, "0000:00:06.0");
	cr_assert_eq(info.minor, 0);
	cr_assert_str_eq(info.model, "NVIDIA H100 80GB HBM3");
	cr_assert_not(info.excluded);
	cr_assert_eq(orh_parse_gpu_info("Device Minor: \t 7\r\nGPU Excluded:\t Yes\n", &info, why,
					sizeof(why)), 0, "%s", why);
	cr_assert_eq(info.minor, 7);
	cr_assert(info.excluded);
	cr_assert_str_eq(info.uuid, "");
}

Test(gpu, information_garbage)
{
	struct orh_gpu_info info;
	char why[160];

	cr_assert_eq(orh_parse_gpu_info("", &info, why, sizeof(why)), 0);
	cr_assert_eq(info.minor, -1);
	cr_assert_eq(orh_parse_gpu_info("\n\nno colon here\n", &info, why, sizeof(why)), 1);
	cr_assert_str_eq(why, "line 3: no 'key: value' in 'no colon here'");
	cr_assert_eq(orh_parse_gpu_info("Device Minor: \t 254\n", &info, why, sizeof(why)), 1);
	cr_assert(strstr(why, "'Device Minor' is not a number up to 253: '254'"), "%s", why);
	cr_assert_eq(orh_parse_gpu_info("Device Minor: \t -1\n", &info, why, sizeof(why)), 1);
	cr_assert_eq(orh_parse_gpu_info("GPU UUID: \t GPU-efc0520c-e2ee-e86d-8193-ef5cca3213f\n",
					&info, why, sizeof(why)), 1, "one digit short");
	cr_assert_eq(orh_parse_gpu_info("Bus Location: \t 0000:00:06\n", &info, why,
					sizeof(why)), 1);
	cr_assert_eq(orh_parse_gpu_info("Bus Location: \t 0000:00:06.0\nBus Location: \t "
					"0000:00:07.0\nGPU Excluded:\t maybe\n", &info, why,
					sizeof(why)), 2);
	cr_assert_str_eq(info.bus, "0000:00:06.0", "the first one stands");
	cr_assert(strstr(why, "line 2: 'Bus Location' given twice"), "%s", why);
	cr_assert_eq(orh_parse_gpu_info(":::\n\t:\n", &info, NULL, 0), 0, "unknown keys");
}

/* ---------------------------------------------------------------- NVIDIA_VISIBLE_DEVICES */

static struct orh_strv warns;
static bool held[ORH_GPU_MAX];

static enum orh_gpu_ask ask(const char *value)
{
	orh_strv_free(&warns);
	return orh_gpus_resolve(&gpus, value, held, &warns);
}

static void assert_held(const char *want)
{
	char got[64] = "";

	for (size_t i = 0; i < gpus.n; i++)
		if (held[i])
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%zu",
				 got[0] ? "," : "", i);
	cr_assert_str_eq(got, want);
}

Test(gpu, visible_devices_tokens)
{
	char big[5000];

	make_node("dgx-h100");
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	cr_assert_eq(ask("2,3"), ORH_GPUS_SOME);
	assert_held("2,3");
	cr_assert_eq(warns.n, 0);
	cr_assert_eq(ask(" 3 , ,2 "), ORH_GPUS_SOME);
	assert_held("2,3");
	cr_assert_eq(ask("GPU-8C2F4A61-0D3E-4B7A-A5C9-71E2F03D6A48"), ORH_GPUS_SOME);
	assert_held("2");
	cr_assert_eq(ask("0000:9d:00.0"), ORH_GPUS_SOME);
	assert_held("5");
	cr_assert_eq(ask("MIG-GPU-5e9c3b27-a1f4-4d62-b08e-93f6c7d2e415/1/0,6:2"), ORH_GPUS_SOME);
	assert_held("4,6");
	cr_assert_eq(ask("all"), ORH_GPUS_ALL);
	assert_held("0,1,2,3,4,5,6,7");
	cr_assert_eq(ask("ALL"), ORH_GPUS_ALL);
	cr_assert_eq(ask("0,1,2,3,4,5,6,7"), ORH_GPUS_ALL);
	cr_assert_eq(ask("none"), ORH_GPUS_NONE);
	assert_held("");
	cr_assert_eq(ask("void"), ORH_GPUS_NONE);
	cr_assert_eq(ask(""), ORH_GPUS_NONE);
	cr_assert_eq(ask(NULL), ORH_GPUS_NONE);
	cr_assert_eq(warns.n, 0);

	cr_assert_eq(ask("9,all"), ORH_GPUS_UNKNOWN, "a warning is always UNKNOWN");
	assert_held("0,1,2,3,4,5,6,7");
	cr_assert_eq(ask("all,9"), ORH_GPUS_ALL, "nothing after all is read");
	cr_assert_eq(warns.n, 0);
	cr_assert_eq(ask("2,8"), ORH_GPUS_UNKNOWN);
	assert_held("2");
	cr_assert(warned(&warns, "NVIDIA_VISIBLE_DEVICES: '8': no such GPU on this node", NULL));
	cr_assert_eq(ask("GPU-00000000-0000-0000-0000-000000000000"), ORH_GPUS_UNKNOWN);
	cr_assert_eq(ask("MIG-5e9c3b27-a1f4-4d62-b08e-93f6c7d2e415"), ORH_GPUS_UNKNOWN);
	cr_assert(warned(&warns, "a MIG device UUID", "NVML"));
	cr_assert_eq(ask("3a:00.0"), ORH_GPUS_UNKNOWN, "a PCI address needs its domain");
	cr_assert_eq(ask("bogus\n\x1b[31m"), ORH_GPUS_UNKNOWN);
	cr_assert_eq(warns.n, 1);
	cr_assert_null(strchr(warns.v[0], '\x1b'), "%s", warns.v[0]);
	cr_assert_eq(ask("99999999999999999999999"), ORH_GPUS_UNKNOWN);
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_assert_eq(ask(big), ORH_GPUS_UNKNOWN);
	cr_assert(warned(&warns, "longer than", NULL));
	orh_strv_free(&warns);
}

/* ---------------------------------------------------------------- topology levels */

Test(gpu, topology_levels)
{
	const char *gpu = "devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:02.0/0000:45:00.0";
	struct orh_topo_rel r;

	r = orh_topo_between(gpu, 0, "devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:01.0/"
				     "0000:44:00.1", 0);
	cr_assert_eq(r.level, ORH_TOPO_PIX, "%s", orh_topo_name(r.level));
	cr_assert_eq(r.common, 2);
	/* a switch behind the switch */
	r = orh_topo_between(gpu, 0, "devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:03.0/"
				     "0000:46:00.0/0000:47:00.0/0000:48:00.0", 0);
	cr_assert_eq(r.level, ORH_TOPO_PXB, "%s", orh_topo_name(r.level));
	cr_assert_eq(r.common, 2);
	r = orh_topo_between(gpu, 0, "devices/pci0000:40/0000:40:03.1/0000:50:00.0", 0);
	cr_assert_eq(r.level, ORH_TOPO_PHB, "%s", orh_topo_name(r.level));
	cr_assert_eq(r.common, 0);
	r = orh_topo_between(gpu, 0, "devices/pci0000:60/0000:60:01.1/0000:61:00.0", 0);
	cr_assert_eq(r.level, ORH_TOPO_NODE, "%s", orh_topo_name(r.level));
	r = orh_topo_between(gpu, 0, "devices/pci0000:60/0000:60:01.1/0000:61:00.0", 1);
	cr_assert_eq(r.level, ORH_TOPO_SYS, "%s", orh_topo_name(r.level));
	r = orh_topo_between(gpu, -1, "devices/pci0000:60/0000:60:01.1/0000:61:00.0", -1);
	cr_assert_eq(r.level, ORH_TOPO_SYS, "unknown NUMA nodes are not one node");
	/* soft-RoCE on the GPU's switch: the path ends in its net device */
	r = orh_topo_between(gpu, 0, "devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:01.0/"
				     "0000:44:00.0/net/eth3", 0);
	cr_assert_eq(r.level, ORH_TOPO_PIX, "%s", orh_topo_name(r.level));
	/* a virtual device is known by its NUMA node only */
	r = orh_topo_between(gpu, 0, "devices/virtual/net/eth3", 0);
	cr_assert_eq(r.level, ORH_TOPO_NODE, "%s", orh_topo_name(r.level));
	r = orh_topo_between("", 0, gpu, 0);
	cr_assert_eq(r.level, ORH_TOPO_NODE, "%s", orh_topo_name(r.level));
	/* VMD: a host bridge below a PCI function */
	r = orh_topo_between("devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1a.0/10000:e1:00.0",
			     0, "devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1b.0/"
				"10000:e2:00.0", 0);
	cr_assert_eq(r.level, ORH_TOPO_PHB, "%s", orh_topo_name(r.level));
	cr_assert_eq(r.common, 1);
}

/* ---------------------------------------------------------------- NIC affinity */

static struct orh_affinity aff;

static const char *chosen_names(void)
{
	static char out[256];

	out[0] = '\0';
	for (size_t i = 0; i < aff.n; i++)
		if (aff.v[i].chosen)
			snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s",
				 out[0] ? "," : "", inv.devs[i].name);
	return out;
}

static const char *pick(enum orh_nic_affinity mode, const char *visible, const bool *cand)
{
	orh_affinity_free(&aff);
	cr_assert_neq(ask(visible), ORH_GPUS_UNKNOWN);
	orh_nic_affinity(mode, inv.devs, inv.n_devs, cand, &gpus, held, &aff);
	cr_assert_eq(aff.n, inv.n_devs);
	return chosen_names();
}

static void dgx_all(void)
{
	make_node("dgx-h100");
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	discover_rdma(ORH_GIDS_PLAN, true);
	cr_assert_eq(inv.n_devs, 10);
}

Test(gpu, affinity_pcie_on_dgx_h100)
{
	size_t i;

	dgx_all();
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "2,3", NULL), "mlx5_2,mlx5_3");
	i = dev_at("mlx5_2");
	cr_assert_str_eq(aff.v[i].reason, "under the same PCIe switch as GPU 2 (0000:3a:00.0) "
					  "(PIX, bridge 0000:38:00.0)");
	cr_assert_eq(aff.v[i].level, ORH_TOPO_PIX);
	cr_assert_eq(aff.v[i].gpu, 2);
	cr_assert_not(aff.every);
	cr_assert_eq(aff.n_chosen, 2);
	cr_assert(strstr(aff.summary, "GPUs 2,3 of 8: the 2 NICs nearest"), "%s", aff.summary);
	i = dev_at("mlx5_0");
	cr_assert(strstr(aff.v[i].reason, "not among the NICs nearest to GPUs 2,3 (NODE to GPU 2"), "%s",
		  aff.v[i].reason);
	cr_assert_eq(aff.v[dev_at("mlx5_4")].level, ORH_TOPO_SYS);
	cr_assert_eq(aff.v[dev_at("mlx5_8")].level, ORH_TOPO_NODE);

	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "0,4", NULL), "mlx5_0,mlx5_1,mlx5_4,mlx5_5");
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "GPU-f60b2d9a-7e13-4c8f-a2d5-0b9e4c7a3f28",
			      NULL), "mlx5_6,mlx5_7");
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "all", NULL),
			 "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9");
	cr_assert(aff.every);
	cr_assert_str_eq(aff.v[0].reason, "the container holds every GPU: every NIC");
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "0,1,2,3,4,5,6,7", NULL),
			 "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9");
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "none", NULL),
			 "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9");
	cr_assert_eq(aff.n_chosen, 10);
	cr_assert_str_eq(aff.summary, "the container holds no GPU: every NIC");
}

Test(gpu, affinity_falls_back_to_the_numa_node_then_to_every_nic)
{
	bool cand[10];
	size_t i;

	dgx_all();
	for (i = 0; i < 10; i++)
		cand[i] = true;
	cand[dev_at("mlx5_2")] = cand[dev_at("mlx5_3")] = false; /* GPU 2's switch: no NIC */
	cand[dev_at("mlx5_8")] = cand[dev_at("mlx5_9")] = false; /* front-end, left out */
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "2", cand), "mlx5_0,mlx5_1");
	i = dev_at("mlx5_0");
	cr_assert_str_eq(aff.v[i].reason, "on NUMA node 0 with GPU 2 (0000:3a:00.0), which has "
					  "no NIC under its PCIe switch");
	cr_assert_str_eq(aff.v[dev_at("mlx5_2")].reason, "", "not a candidate: the caller's "
							     "reason stands");
	/* GPU 2's own switch keeps GPU 0 to its NICs; GPU 2 adds its NUMA node's */
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "0,2", cand), "mlx5_0,mlx5_1");
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "2,4", cand), "mlx5_0,mlx5_1,mlx5_4,mlx5_5");

	/* the same from the tree: switch 1's NICs gone */
	sh("rm %s/sys/class/infiniband/mlx5_2 %s/sys/class/infiniband/mlx5_3", root, root);
	discover_rdma(ORH_GIDS_PLAN, true);
	cr_assert_eq(inv.n_devs, 8);
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "3", NULL), "mlx5_0,mlx5_1,mlx5_8");

	/* a GPU whose NUMA node is unknown and whose switch has no NIC: every NIC */
	gpus.v[3].numa_node = -1;
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "3", NULL),
			 "mlx5_0,mlx5_1,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9");
	cr_assert(aff.every);
	cr_assert(strstr(aff.v[0].reason, "no NIC near GPU 3 (0000:3d:00.0) (its NUMA node is "
					  "unknown): every NIC"), "%s", aff.v[0].reason);
}

Test(gpu, affinity_numa_and_none_on_dgx_h100)
{
	bool cand[10];

	dgx_all();
	cr_assert_str_eq(pick(ORH_AFFINITY_NUMA, "2", NULL),
			 "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_8");
	cr_assert_str_eq(aff.v[dev_at("mlx5_8")].reason, "on NUMA node 0 with GPU 2 (0000:3a:00.0)");
	cr_assert_str_eq(pick(ORH_AFFINITY_NUMA, "5,6", NULL),
			 "mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_9");
	for (size_t i = 0; i < 10; i++)
		cand[i] = i != dev_at("mlx5_9");
	cr_assert_str_eq(pick(ORH_AFFINITY_NUMA, "5,6", cand), "mlx5_4,mlx5_5,mlx5_6,mlx5_7");
	cr_assert_str_eq(pick(ORH_AFFINITY_NONE, "2", cand),
			 "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8");
	cr_assert(aff.every);
	cr_assert_str_eq(aff.summary, "nic_affinity = none: every NIC");
	orh_affinity_free(&aff);
}

Test(gpu, affinity_on_seed001_gpu)
{
	make_node("seed001-gpu");
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	discover_rdma(ORH_GIDS_ALL, false);
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "0,1", NULL), "mlx5_1,mlx5_2");
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "2", NULL), "mlx5_3,mlx5_4");
	cr_assert_str_eq(pick(ORH_AFFINITY_PCIE, "7", NULL), "mlx5_7,mlx5_8");
	cr_assert(strstr(aff.v[dev_at("mlx5_7")].reason, "bridge 0000:e2:00.0"), "%s",
		  aff.v[dev_at("mlx5_7")].reason);
	cr_assert_str_eq(pick(ORH_AFFINITY_NUMA, "7", NULL), "mlx5_5,mlx5_6,mlx5_7,mlx5_8");
	orh_affinity_free(&aff);
}

Test(gpu, affinity_mode_names)
{
	cr_assert_str_eq(orh_nic_affinity_name(ORH_AFFINITY_PCIE), "pcie");
	cr_assert_str_eq(orh_nic_affinity_name(ORH_AFFINITY_NUMA), "numa");
	cr_assert_str_eq(orh_nic_affinity_name(ORH_AFFINITY_NONE), "none");
	cr_assert_str_eq(orh_topo_name(ORH_TOPO_PXB), "PXB");
	cr_assert_str_eq(orh_topo_name(ORH_TOPO_NODE), "NODE");
}

/* Switches behind switches, built in memory: the NIC that shares the GPU's deepest bridge
 * wins, and a farther one serves when it is not a candidate. */
Test(gpu, affinity_prefers_the_deepest_common_bridge)
{
	static const char *const top = "devices/pci0000:40/0000:40:01.1/0000:41:00.0";
	struct orh_device devs[3] = { { .name = "near" }, { .name = "far" }, { .name = "other" } };
	struct orh_gpu g[2] = { { .bdf = "0000:45:00.0", .index = 0, .numa_node = 0 },
				{ .bdf = "0000:80:00.0", .index = 1, .numa_node = 1 } };
	struct orh_gpus two = { .v = g, .n = 2 };
	bool only0[2] = { true, false }, cand[3] = { false, true, true };

	/* GPU 0 two switches down; "near" below its leaf switch's sibling port's switch */
	snprintf(g[0].pci_path, sizeof(g[0].pci_path), "%s/0000:42:00.0/0000:43:00.0/"
		 "0000:44:01.0/0000:45:00.0", top);
	snprintf(devs[0].pci_path, sizeof(devs[0].pci_path), "%s/0000:42:00.0/0000:43:00.0/"
		 "0000:44:02.0/0000:46:00.0/0000:47:00.0/0000:48:00.0", top);
	snprintf(devs[1].pci_path, sizeof(devs[1].pci_path), "%s/0000:42:01.0/0000:50:00.0", top);
	snprintf(devs[2].pci_path, sizeof(devs[2].pci_path), "devices/pci0000:70/0000:70:01.0/"
		 "0000:71:00.0");
	snprintf(g[1].pci_path, sizeof(g[1].pci_path), "devices/pci0000:7f/0000:7f:01.0/"
		 "0000:80:00.0");
	devs[0].numa_node = devs[1].numa_node = 0;
	devs[2].numa_node = 1;
	cr_assert_eq(orh_topo_between(g[0].pci_path, 0, devs[0].pci_path, 0).level, ORH_TOPO_PXB);
	cr_assert_eq(orh_topo_between(g[0].pci_path, 0, devs[1].pci_path, 0).level, ORH_TOPO_PXB);

	cr_assert_eq(orh_nic_affinity(ORH_AFFINITY_PCIE, devs, 3, NULL, &two, only0, &aff), 1);
	cr_assert(aff.v[0].chosen);
	cr_assert_str_eq(aff.v[0].reason, "behind the same PCIe bridges as GPU 0 (0000:45:00.0) "
					  "(PXB, bridge 0000:43:00.0)");
	cr_assert_not(aff.v[1].chosen);
	orh_affinity_free(&aff);
	cr_assert_eq(orh_nic_affinity(ORH_AFFINITY_PCIE, devs, 3, cand, &two, only0, &aff), 1);
	cr_assert(aff.v[1].chosen, "the nearer one is not a candidate");
	cr_assert(strstr(aff.v[1].reason, "bridge 0000:41:00.0"), "%s", aff.v[1].reason);
	cr_assert_not(aff.v[0].chosen);
	cr_assert_str_eq(aff.v[0].reason, "");
	orh_affinity_free(&aff);
	/* GPU 1 has no NIC under it and "other" on its NUMA node */
	cr_assert_eq(orh_nic_affinity(ORH_AFFINITY_PCIE, devs, 3, NULL, &two,
				      (bool[]){ false, true }, &aff), 1);
	cr_assert(aff.v[2].chosen);
	orh_affinity_free(&aff);
	/* no GPU list at all: every NIC */
	cr_assert_eq(orh_nic_affinity(ORH_AFFINITY_PCIE, devs, 3, NULL, NULL, NULL, &aff), 3);
	cr_assert(aff.every);
	orh_affinity_free(&aff);
}

/* A link that leads out of the sysroot's sys/ gives no PCI path, and says so. */
Test(gpu, a_pci_path_outside_sys_is_not_taken)
{
	make_node("dgx-h100");
	sh("mkdir %s/elsewhere && cd %s/sys/bus/pci/devices/0000:3a:00.0 && "
	   "cp vendor class device numa_node %s/elsewhere/", root, root, root);
	sh("rm %s/sys/bus/pci/devices/0000:3a:00.0 && ln -s %s/elsewhere "
	   "%s/sys/bus/pci/devices/0000:3a:00.0", root, root, root);
	discover_gpus(ORH_GPU_SCAN_DRIVER);
	cr_assert_eq(gpus.n, 8);
	cr_assert_str_eq(gpus.v[2].pci_path, "");
	cr_assert_eq(gpus.v[2].numa_node, 0, "its attributes are still read");
	cr_assert(warned(&gpus.warnings, "0000:3a:00.0'", "leads outside sys/"), "%s",
		  gpus.warnings.n ? gpus.warnings.v[0] : "none");
	cr_assert_eq(gpus.warnings.n, 1);
}
