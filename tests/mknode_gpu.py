# SPDX-License-Identifier: Apache-2.0
"""The GPU and PCI-bridge half of tests/mknode.py: NVIDIA GPUs as the kernel and the nvidia
driver show them, and the bridges above every PCI function, so that a node's PCI
hierarchy (which NIC sits under which switch with which GPU) reads as on a real host.

JSON keys (top level of a node; see tests/mknode.py for the rest):
  "gpu_defaults": {...},           # merged under every GPU
  "gpus": [
    {"pci": "0000:45:00.0",
     "pci_parent": "pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:02.0",
     "numa": 0, "uuid": "GPU-efc0520c-e2ee-e86d-8193-ef5cca3213fb", "minor": 0,
     "vendor": "0x10de", "device": "0x2330", "class": "0x030200",
     "model": "NVIDIA H100 80GB HBM3", "vbios": "96.00.74.00.01",
     "firmware": "535.129.03",     # "GPU Firmware" line; null: none (no GSP)
     "irq": 0, "excluded": false,  # "GPU Excluded: Yes"
     "driver": "nvidia",           # another driver (vfio-pci) or null: no proc entry
     "information": null}          # raw text of the information file instead (null with
  ],                               # a driver of nvidia: no information file)
  "pci_bridges": {                 # attributes of bridges named in pci_parent paths
    "0000:41:00.0": {"vendor": "0x1000", "device": "0xc030"}
  },
  "gpudirect": {                   # what GPUDirect RDMA needs (orh_gpudirect_read)
    "kernel": "6.8.0-49-generic",  # proc/sys/kernel/osrelease
    "driver": "open",              # proc/driver/nvidia/version: "open" (the open kernel
                                   # module's line), "proprietary", or null: no file
    "driver_version": "580.159.04",
    "peermem": ["module", "nv_mem", "nv_mem_nc"]}  # sys/module/nvidia_peermem/version,
                                   # sys/kernel/mm/memory_peers/{nv_mem,nv_mem_nc}/version

What is built:
  sys/devices/<pci_parent>/<pci>/          vendor device class numa_node subsystem_*,
                                           driver -> bus/pci/drivers/<driver>
  sys/bus/pci/devices/<pci>                -> the function, GPUs and bridges alike
  every PCI function in a pci_parent path  a bridge: class 0x060400, vendor/device (root
                                           ports 0x8086, switch ports 0x1000:0xc030 unless
                                           pci_bridges says otherwise), numa_node of the
                                           first function below it, driver pcieport
  proc/driver/nvidia/gpus/<pci>/information  as nv-procfs.c prints it: "Key: \\t value"
                                           lines, e.g. "GPU UUID: \\t GPU-...",
                                           "Bus Location: \\t 0000:45:00.0",
                                           "Device Minor: \\t 0"
  dev/nvidia<minor> (195:<minor>), dev/nvidiactl (195:255)   with --devnodes
  proc/sys/kernel/osrelease, proc/driver/nvidia/version, the peer-memory version files
                                           from "gpudirect", in the driver's formats
"""

import re

GPU_KEYS = {"pci", "pci_parent", "vendor", "device", "class", "numa", "driver", "uuid",
            "minor", "model", "vbios", "firmware", "irq", "excluded", "information",
            "subsystem_vendor", "subsystem_device"}
GPUDIRECT_KEYS = {"kernel", "driver", "driver_version", "peermem"}
PEERMEM_FILES = {"module": "sys/module/nvidia_peermem/version",
                 "nv_mem": "sys/kernel/mm/memory_peers/nv_mem/version",
                 "nv_mem_nc": "sys/kernel/mm/memory_peers/nv_mem_nc/version"}
BRIDGE_KEYS = {"vendor", "device", "class", "driver", "subsystem_vendor", "subsystem_device"}
NVIDIA_MAJOR, NVIDIACTL_MINOR = 195, 255
UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BDF_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class GpuError(Exception):
    pass


def gpu_list(node, merged, check_keys):
    """The node's GPUs, defaults merged and checked."""
    out = []
    seen_minor = {}
    for k, g in enumerate(node.get("gpus", [])):
        g = merged(node.get("gpu_defaults"), g)
        what = f"gpus[{k}]"
        check_keys(g, GPU_KEYS, what)
        if not isinstance(g.get("pci"), str) or not BDF_RE.match(g["pci"]):
            raise GpuError(f"{what}: bad PCI address {g.get('pci')!r}")
        g.setdefault("vendor", "0x10de")
        g.setdefault("device", "0x2330")
        g.setdefault("class", "0x030200")
        g.setdefault("driver", "nvidia")
        if g["driver"] == "nvidia" and "information" not in g:
            if not UUID_RE.match(str(g.get("uuid"))):
                raise GpuError(f"{what}: uuid must look like GPU-xxxxxxxx-xxxx-xxxx-xxxx-"
                               f"xxxxxxxxxxxx, got {g.get('uuid')!r}")
            m = g.get("minor")
            if not isinstance(m, int) or not 0 <= m <= 253:
                raise GpuError(f"{what}: minor must be 0..253")
            if m in seen_minor:
                raise GpuError(f"{what}: minor {m} also used by gpus[{seen_minor[m]}]")
            seen_minor[m] = k
        out.append(g)
    return out


def information(g):
    """proc/driver/nvidia/gpus/<bdf>/information, with nv_procfs_read_gpu_info()'s format
    strings (kernel-open/nvidia/nv-procfs.c)."""
    lines = ["Model: \t\t %s" % g.get("model", "NVIDIA H100 80GB HBM3"),
             "IRQ:   \t\t %d" % g.get("irq", 0),
             "GPU UUID: \t %s" % g["uuid"],
             "Video BIOS: \t %s" % g.get("vbios", "96.00.74.00.01"),
             "Bus Type: \t PCIe",
             "DMA Size: \t 52 bits",
             "DMA Mask: \t 0xfffffffffffff",
             "Bus Location: \t %s" % g["pci"],
             "Device Minor: \t %u" % g["minor"]]
    fw = g.get("firmware", "535.129.03")
    if fw:
        lines.append("GPU Firmware: \t %s" % fw)
    lines.append("GPU Excluded:\t %s" % ("Yes" if g.get("excluded") else "No"))
    return "\n".join(lines) + "\n"


def build_gpus(tree, gpus, pci_function):
    """Each GPU's PCI function and the driver's information file."""
    for k, g in enumerate(gpus):
        pci_function(g, f"gpus[{k}]", "0x030200")
        info = g.get("information") if "information" in g else \
            (information(g) if g["driver"] == "nvidia" else None)
        if info is not None:
            tree.write(f"proc/driver/nvidia/gpus/{g['pci']}/information", info)


def build_bridges(tree, functions, overrides, check_keys):
    """Every PCI function named in a pci_parent path is a bridge: give it its attributes
    and its sys/bus/pci/devices link. functions: (pci_dir, numa) of every function."""
    done = set()
    for d, numa in functions:
        parts = d.split("/")              # sys devices pciDDDD:BB <bridges...> <function>
        for depth in range(3, len(parts) - 1):
            bdf = parts[depth]
            if bdf in done:
                continue
            if not BDF_RE.match(bdf):
                raise GpuError(f"{'/'.join(parts[:depth + 1])}: {bdf!r} in a pci_parent is "
                               "not a PCI address")
            done.add(bdf)
            o = (overrides or {}).get(bdf, {})
            check_keys(o, BRIDGE_KEYS, f"pci_bridges[{bdf}]")
            root_port = depth == 3
            bd = "/".join(parts[:depth + 1])
            vendor = o.get("vendor", "0x8086" if root_port else "0x1000")
            tree.attr(f"{bd}/vendor", vendor)
            tree.attr(f"{bd}/device", o.get("device", "0x352a" if root_port else "0xc030"))
            tree.attr(f"{bd}/subsystem_vendor", o.get("subsystem_vendor", vendor))
            tree.attr(f"{bd}/subsystem_device", o.get("subsystem_device", "0x0000"))
            tree.attr(f"{bd}/class", o.get("class", "0x060400"))
            tree.attr(f"{bd}/numa_node", numa)
            drv = o.get("driver", "pcieport")
            tree.mkdir(f"sys/bus/pci/drivers/{drv}")
            tree.link(f"{bd}/driver", f"sys/bus/pci/drivers/{drv}")
            tree.link(f"sys/bus/pci/devices/{bdf}", bd)
    unknown = set(overrides or {}) - done
    if unknown:
        raise GpuError(f"pci_bridges: {sorted(unknown)[0]} is in no pci_parent")


def gpu_devnodes(gpus):
    """(name, major, minor, mode) of /dev/nvidiaN and /dev/nvidiactl, as nvidia-modprobe
    makes them."""
    out = [(f"nvidia{g['minor']}", NVIDIA_MAJOR, g["minor"], 0o666)
           for g in gpus if g["driver"] == "nvidia" and isinstance(g.get("minor"), int)]
    if out:
        out.append(("nvidiactl", NVIDIA_MAJOR, NVIDIACTL_MINOR, 0o666))
    return out


def build_gpudirect(tree, g, check_keys):
    """The kernel's release, the NVIDIA driver's version file (the first line as the open
    and the proprietary modules print it, kernel-open/nvidia/nv-procfs.c and the driver's
    own), and the peer-memory version files NCCL looks for."""
    if g is None:
        return
    check_keys(g, GPUDIRECT_KEYS, "gpudirect")
    if g.get("kernel") is not None:
        tree.write("proc/sys/kernel/osrelease", g["kernel"] + "\n")
    ver = g.get("driver_version", "580.159.04")
    if g.get("driver") == "open":
        first = (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {ver}  Release "
                 "Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Oct  2 22:02:46 UTC 2025")
    elif g.get("driver") == "proprietary":
        first = f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {ver}  Sat Aug 19 01:15:15 UTC 2023"
    elif g.get("driver") is None:
        first = None
    else:
        raise GpuError(f"gpudirect: driver {g['driver']!r} is not open, proprietary or null")
    if first:
        tree.write("proc/driver/nvidia/version",
                   first + "\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
    for p in g.get("peermem", []):
        if p not in PEERMEM_FILES:
            raise GpuError(f"gpudirect: peermem {p!r} is not one of {sorted(PEERMEM_FILES)}")
        tree.write(PEERMEM_FILES[p], ver + "\n")
