# SPDX-License-Identifier: Apache-2.0
"""The parts of tests/mknode.py that know the kernel's formats: the names and numbers
sysfs and procfs print, the value helpers, and the tree writer. tests/mknode.py holds
the node model and the command line."""

import ipaddress
import os
import stat

MARKER = ".mknode"

STATE_NAMES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_NAMES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
              5: "LinkUp", 6: "LinkErrorRecovery", 7: "Phy Test"}
NODE_TYPE_NAMES = {1: "CA", 2: "switch", 3: "router", 4: "RNIC", 5: "usNIC", 6: "usNIC UDP",
                   7: "unspecified"}
GID_TYPES = {"v1": "IB/RoCE v1", "v2": "RoCE v2", "IB/RoCE v1": "IB/RoCE v1",
             "RoCE v2": "RoCE v2", "": ""}
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

UVERBS_MAJOR, UVERBS_BASE, UVERBS_FIXED, UVERBS_DYN_MAJOR = 231, 192, 32, 240
# user_mad.c: one dynamic region of 2 * (RDMA_MAX_PORTS 8192 - 64) minors, issm in the upper half
UMAD_MAJOR, UMAD_FIXED, UMAD_DYN_MAJOR, UMAD_DYN_ISSM_OFFSET = 231, 64, 239, 8128
MISC_MAJOR = 10
MEM_MAJOR = 1

TOP_KEYS = {"description", "routes", "netdevs", "pci_devices", "rdma_cm_minor",
            "rdma_core_loaded", "uverbs_abi_version", "device_defaults", "port_defaults",
            "devices", "scale", "gpus", "gpu_defaults", "pci_bridges", "gpudirect"}
DEV_KEYS = {"name", "pci", "pci_parent", "vendor", "device", "driver", "class", "node_type",
            "numa", "fw_ver", "node_guid", "sys_image_guid", "node_desc", "hca_type",
            "board_id", "hw_rev", "uverbs", "uverbs_devnode", "netdevs", "netdev_subdir",
            "files", "ports", "subsystem_vendor", "subsystem_device"}
PORT_KEYS = {"num", "state", "phys_state", "link_layer", "rate", "lid", "sm_lid", "sm_sl",
             "lid_mask_count", "cap_mask", "gid_tbl_len", "umad", "roce", "ib", "gids",
             "files"}
ROCE_KEYS = {"netdev", "mac", "addrs", "ipv4", "ipv6", "versions"}
IB_KEYS = {"subnet_prefix", "guid"}
GID_KEYS = {"index", "gid", "ipv4", "type", "ndev"}
NETDEV_KEYS = {"name", "virtual", "address", "operstate", "type", "mtu", "ifindex",
               "dev_port"}
PCI_KEYS = {"pci", "pci_parent", "vendor", "device", "driver", "class", "numa", "netdevs",
            "netdev_subdir", "subsystem_vendor", "subsystem_device"}
ROUTE_KEYS = {"iface", "dest", "gw", "mask", "metric", "flags", "mtu", "window", "irtt"}
SCALE_KEYS = {"hcas", "ports", "gid_tbl_len", "addrs_per_port", "first_pci_bus",
              "netdev_prefix", "first_netdev", "name_prefix", "rate", "subnet_base"}


class NodeError(Exception):
    pass


def check_keys(obj, allowed, what):
    if not isinstance(obj, dict):
        raise NodeError(f"{what}: expected an object, got {type(obj).__name__}")
    bad = sorted(set(obj) - allowed)
    if bad:
        raise NodeError(f"{what}: unknown key(s) {', '.join(bad)}")


# ---------------------------------------------------------------- value helpers

def fmt_gid(raw):
    h = raw.hex()
    return ":".join(h[i:i + 4] for i in range(0, 32, 4))


def gid_raw(text, what):
    """A GID given as 8 colon-separated groups of 4 hex digits, or any IPv6 text form."""
    if text is None:
        return bytes(16)
    parts = text.split(":")
    if len(parts) == 8 and all(len(p) == 4 for p in parts):
        try:
            return bytes.fromhex("".join(parts))
        except ValueError:
            pass
    try:
        return ipaddress.IPv6Address(text).packed
    except ValueError:
        raise NodeError(f"{what}: not a GID: {text!r}") from None


def addr_gid(addr, what):
    """The GID the kernel derives from an IP address: ::ffff:a.b.c.d for IPv4."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        raise NodeError(f"{what}: not an IP address: {addr!r}") from None
    if ip.version == 4:
        return bytes(10) + b"\xff\xff" + ip.packed
    return ip.packed


def mac_bytes(mac, what):
    try:
        b = bytes(int(x, 16) for x in mac.split(":"))
    except (ValueError, AttributeError):
        raise NodeError(f"{what}: not a MAC address: {mac!r}") from None
    if len(b) != 6:
        raise NodeError(f"{what}: not a MAC address: {mac!r}")
    return b


def link_local_gid(mac, what):
    """fe80::/64 + modified EUI-64 of the MAC (U/L bit flipped), as make_default_gid()."""
    m = mac_bytes(mac, what)
    return bytes.fromhex("fe80000000000000") + bytes([m[0] ^ 2, m[1], m[2], 0xff, 0xfe,
                                                      m[3], m[4], m[5]])


def ipv4_le(addr, what):
    try:
        return int.from_bytes(ipaddress.IPv4Address(addr).packed, "little")
    except ValueError:
        raise NodeError(f"{what}: not an IPv4 address: {addr!r}") from None


def num_text(value, names, what):
    """'4: ACTIVE', 'ACTIVE' or 4 -> '4: ACTIVE'."""
    if isinstance(value, int):
        return f"{value}: {names.get(value, '<unknown>')}"
    if isinstance(value, str):
        if ":" in value:
            return value
        for k, v in names.items():
            if v == value:
                return f"{k}: {v}"
    raise NodeError(f"{what}: unknown value {value!r}")


def state_num(text):
    try:
        return int(text.split(":")[0])
    except ValueError:
        return -1


def merged(defaults, obj):
    out = dict(defaults or {})
    out.update(obj)
    return out


def pci_dir(obj, what):
    """sys/devices/<pci_parent>/<pci address>; pci_parent defaults to pci<domain>:<bus>."""
    pci = obj.get("pci")
    parts = pci.split(":") if isinstance(pci, str) else []
    if len(parts) != 3 or len(parts[0]) != 4 or len(parts[1]) != 2 or len(parts[2]) != 4:
        raise NodeError(f"{what}: bad PCI address {pci!r}")
    parent = obj.get("pci_parent") or f"pci{parts[0]}:{parts[1]}"
    return f"sys/devices/{parent}/{pci}"


def proc_devices(loaded):
    """/proc/devices as chrdev_show() and blkdev_show() print it ("%3d %s"): the RDMA
    modules register 231 for their fixed minors and one dynamic major each beyond."""
    chars = [(1, "mem"), (4, "/dev/vc/0"), (4, "tty"), (5, "/dev/tty"), (5, "/dev/console"),
             (5, "/dev/ptmx"), (10, "misc")]
    if loaded:
        chars += [(UVERBS_MAJOR, "infiniband_verbs"), (UMAD_MAJOR, "infiniband_mad"),
                  (UMAD_DYN_MAJOR, "infiniband_mad"), (UVERBS_DYN_MAJOR, "infiniband_verbs")]
    lines = ["Character devices:"] + ["%3d %s" % c for c in sorted(chars, key=lambda c: c[0])]
    lines += ["", "Block devices:", "%3d %s" % (7, "loop"), "%3d %s" % (8, "sd")]
    return "\n".join(lines) + "\n"


def fmt_guid(raw8):
    h = raw8.hex()
    return ":".join(h[i:i + 4] for i in range(0, 16, 4))


# ---------------------------------------------------------------- the tree writer

class Tree:
    def __init__(self, root):
        self.root = root
        self.dirs = set()
        self.nfiles = 0
        self.nlinks = 0

    def mkdir(self, rel):
        if rel in self.dirs:
            return
        os.makedirs(os.path.join(self.root, rel), exist_ok=True)
        d = rel
        while d and d not in self.dirs:
            self.dirs.add(d)
            d = os.path.dirname(d)

    def write(self, rel, data):
        """Write exact text (no newline added); None removes a file written earlier."""
        path = os.path.join(self.root, rel)
        if data is None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            return
        self.mkdir(os.path.dirname(rel))
        self.nfiles += 1
        if not data:
            try:
                os.mknod(path, stat.S_IFREG | 0o644)   # one syscall; most GID attrs are empty
                return
            except FileExistsError:
                pass
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if data:
                os.write(fd, data.encode())
        finally:
            os.close(fd)

    def attr(self, rel, value):
        """A sysfs attribute: value + newline."""
        self.write(rel, f"{value}\n")

    def link(self, rel, target):
        """Symlink at rel pointing to target (both relative to the root), made relative
        the way kernfs_get_target_path() does it: climb from the link's directory until
        reaching an ancestor of the target's parent, then descend. So a link to an
        ancestor is spelled "../../../0000:4b:00.0", not "../..", as on a real system."""
        d = os.path.dirname(rel)
        self.mkdir(d)
        base = d.split("/")
        tparts = target.split("/")
        tparent = tparts[:-1]
        while base and tparent[:len(base)] != base:
            base.pop()
        ups = len(d.split("/")) - len(base)
        text = "../" * ups + "/".join(tparts[len(base):])
        os.symlink(text, os.path.join(self.root, rel))
        self.nlinks += 1
