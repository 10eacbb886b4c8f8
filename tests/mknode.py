#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Build a fake sysroot (OUTDIR/sys, OUTDIR/proc/net/route, optionally OUTDIR/dev) from a
JSON node description, laid out and formatted the way the kernel does it, so discovery
can be tested on a machine without RDMA hardware.

Usage:
  python3 tests/mknode.py NODE.json OUTDIR [--force] [--devnodes] [--scale k=v,...]
  python3 tests/mknode.py NODE.json --show-gids [--scale k=v,...]

  --force      OUTDIR may exist and hold an earlier mknode tree (marker file
               OUTDIR/.mknode); it is removed first. A non-empty OUTDIR without the
               marker is refused either way.
  --devnodes   also mknod OUTDIR/dev/infiniband/{uverbsN,rdma_cm,umadN,issmN} and, for the
               node's GPUs, OUTDIR/dev/nvidiaN and nvidiactl (root only).
  --scale      override keys of the node's "scale" object: hcas, ports, gid_tbl_len,
               addrs_per_port (e.g. --scale hcas=4,gid_tbl_len=64,addrs_per_port=2).
  --show-gids  print the rows Mellanox show_gids would print for this node
               ("DEV PORT INDEX GID [IPv4] VER [NDEV]", whitespace separated, no header;
               all-zero and bare fe80:: GIDs skipped) and build nothing unless OUTDIR
               is given.
  -v           print what was built.

What is built (paths relative to OUTDIR; every link is relative, as in sysfs):
  sys/devices/<pci_parent>/<pci>/            vendor device class numa_node subsystem_*,
                                             driver -> ../(..)/bus/pci/drivers/<driver>
    net/<if>/ (or <netdev_subdir>/net/<if>/) address ifindex iflink type mtu operstate
                                             carrier dev_id dev_port addr_len, device -> pci
    infiniband/<ibdev>/                      node_type node_guid sys_image_guid fw_ver
                                             node_desc [hca_type board_id hw_rev],
                                             device -> ../../../<pci>
      ports/<n>/                             state phys_state link_layer rate lid sm_lid
                                             sm_sl lid_mask_count cap_mask
        gids/<i>, gid_attrs/types/<i>, gid_attrs/ndevs/<i>   for every i < gid_tbl_len
    infiniband_verbs/uverbsN/                ibdev dev abi_version, device -> pci
    infiniband_mad/umadN/ issmN/             ibdev port dev, device -> pci
  sys/devices/virtual/{infiniband,infiniband_verbs}/...   devices with "pci": null
  sys/devices/virtual/net/<if>/              virtual netdevs (lo, bonds, ...)
  sys/devices/virtual/misc/rdma_cm/dev       "10:<minor>"
  sys/devices/virtual/mem/{null,kmsg}/dev    "1:3", "1:11" (sys/class/mem/{null,kmsg})
  sys/dev/char/<major>:<minor>               the kernel's reverse map: a link to the device
                                             directory of every character device above
  sys/class/infiniband/<ibdev>, sys/class/infiniband_verbs/uverbsN (+ abi_version "6"),
  sys/class/infiniband_mad/{umadN,issmN} (+ abi_version "5"), sys/class/misc/rdma_cm,
  sys/class/net/<if>, sys/bus/pci/devices/<pci>, sys/bus/pci/drivers/<driver>/
  sys/devices/.../<bridge>/                every PCI function in a pci_parent path: a PCI
                                           bridge (class 0x060400), linked from
                                           sys/bus/pci/devices/ (tests/mknode_gpu.py)
  GPUs and proc/driver/nvidia/gpus/<pci>/information: see tests/mknode_gpu.py
  proc/net/route                             the kernel's fixed format, lines padded to 127
  proc/devices                               "Character devices:" (mem, tty, misc, and with
                                             RDMA 231 infiniband_verbs/_mad and the dynamic
                                             majors 240 infiniband_verbs, 239 infiniband_mad),
                                             then "Block devices:"
  dev/infiniband/...                         with --devnodes

Kernel behaviour mimicked (drivers/infiniband/core/sysfs.c, cache.c, user_mad.c,
uverbs_main.c; net/ipv4/fib_trie.c):
  * an unused GID entry reads as all zeros; reading its gid_attrs/types or ndevs fails
    with EINVAL, and so does ndevs of a GID without a netdev (InfiniBand, EFA). A plain
    file cannot fail a read, so those files are written EMPTY (0 bytes).
  * gid_attrs/types reads "IB/RoCE v1" for InfiniBand (and other non-RoCE) GIDs and for
    RoCE v1, "RoCE v2" for RoCE v2.
  * RoCE GID tables: the default link-local GID fe80::<EUI-64 of the MAC, U/L bit
    flipped> once per supported RoCE version, then for each address of the netdev one
    entry per version (IPv4 as ::ffff:a.b.c.d). mlx5 supports v1+v2 (0 = LL v1,
    1 = LL v2, 2 = addr v1, 3 = addr v2, ...); eRDMA in RoCE mode only v2.
  * uverbsN: dev 231:(192+N) for N < 32, a dynamic major (240 here, minor N-32) beyond.
    umadN: 231:N and issmN: 231:(64+N) for N < 64, a dynamic major (239 here, umad minor
    N-64, issm 8128+N-64) beyond. One umad/issm per port with IB MAD support (IB and
    RoCE; not EFA), N counting across the node. Each has its /sys/dev/char link.
  * node_type: "1: CA", "4: RNIC", "7: unspecified" (EFA).
  * /proc/net/route: header and every line padded with spaces to 127 characters;
    addresses are the network-order value printed with %08X on a little-endian host
    (10.0.60.1 -> "013C000A"); flags RTF_UP(1) | RTF_GATEWAY(2) when there is a gateway
    | RTF_HOST(4) for a /32.
  Files are written 0644 (sysfs uses 0444) so tests can rewrite them to inject faults.

JSON node description (keys not listed are rejected, so typos are caught):
{
  "description": "free text",
  "routes": [                      # /proc/net/route (main table), in this order
    {"iface": "eth0", "dest": "0.0.0.0", "gw": "10.0.60.1", "mask": "0.0.0.0",
     "metric": 0},                 # dest may be CIDR ("10.0.60.0/24") instead of mask;
                                   # optional: gw (default 0.0.0.0), flags (int; default
                                   # computed), mtu, window, irtt (default 0)
  ],
  "netdevs": [                     # netdevs not owned by an RDMA device, and attribute
    {"name": "lo", "virtual": true, "type": 772, "operstate": "unknown",
     "address": "00:00:00:00:00:00", "mtu": 65536}
  ],                               # netdev keys: name, virtual, address, operstate
                                   # ("up"), type (1; IPoIB 32), mtu (1500), ifindex
                                   # (sequential), dev_port (0)
  "pci_devices": [                 # PCI functions without RDMA (front-end NICs)
    {"pci": "0000:01:00.0", "vendor": "0x8086", "device": "0x1572", "driver": "i40e",
     "class": "0x020000", "numa": 0, "pci_parent": "pci0000:00/0000:00:01.0",
     "netdev_subdir": "virtio0",   # netdevs under <pci>/virtio0/net (virtio-net)
     "netdevs": ["eth0"]}          # names, or netdev objects as above
  ],
  "rdma_cm_minor": 58,             # absent or null: no rdma_cm
  "rdma_core_loaded": true,        # class dirs + abi_version files; default: devices
  "uverbs_abi_version": 6,         # null: no class-wide abi_version file
  "device_defaults": {...},        # merged under every device (and "scale" devices)
  "port_defaults": {...},          # merged under every port
  "devices": [
    {"name": "mlx5_0", "pci": "0000:1a:00.0",   # null: a virtual (non-PCI) device
     "pci_parent": "pci0000:1a",   # default "pci<domain>:<bus>" of the address
     "vendor": "0x15b3", "device": "0x101d", "driver": "mlx5_core", "class": "0x020000",
     "node_type": "1: CA", "numa": 0, "fw_ver": "22.31.1014",
     "node_guid": "e8eb:d303:00cc:c920", "sys_image_guid": (default node_guid),
     "node_desc": "...", "hca_type": "MT4123", "board_id": "...", "hw_rev": "0x0",
     "uverbs": 0,                  # N of uverbsN; default: next free; null: no uverbs
     "uverbs_devnode": true,       # false: sysfs has uverbsN, --devnodes makes no node
     "netdevs": ["eth0"],          # netdevs on this PCI function (names or objects)
     "netdev_subdir": null,
     "files": {"hw_rev": "0x0\n"}, # raw attribute files (exact bytes; null deletes)
     "ports": [                    # port n = position + 1 unless "num" is given
       {"state": "4: ACTIVE",      # or "ACTIVE"; default ACTIVE
        "phys_state": "5: LinkUp", # or "LinkUp"; default LinkUp if ACTIVE else Disabled
        "link_layer": "Ethernet",  # Ethernet | InfiniBand | Unknown
        "rate": "200 Gb/sec (4X HDR)", "lid": "0x0", "sm_lid": "0x0",
        "gid_tbl_len": 256,        # default 256 Ethernet, 128 InfiniBand, 1 Unknown
        "umad": true,              # default: link_layer != Unknown
        "roce": {"netdev": "eth0", "mac": "fa:20:20:28:c7:69",
                 "addrs": ["2001:db8::1"], "ipv4": ["10.0.60.3"], "ipv6": [],
                 "versions": ["v1", "v2"]},   # entries: addrs, then ipv4, then ipv6
        "ib": {"subnet_prefix": "fe80:0000:0000:0000", "guid": "e8eb:d303:00cc:c920"},
                                   # gid 0 = prefix + port GUID, type IB/RoCE v1, no ndev
        "gids": [{"index": 5, "gid": "::ffff:10.0.0.5", "type": "v2", "ndev": "eth1"},
                 {"index": 7, "ipv4": "10.0.0.7", "type": "RoCE v2", "ndev": "eth1"},
                 {"index": 3, "gid": null}],  # explicit entries override; gid null or
                                   # all-zero = unused; type/ndev "" or absent = empty file
        "files": {"state": "garbage\n"}}      # raw port attribute files (null deletes)
     ]}
  ],
  "gpus": [...], "gpu_defaults": {...}, "pci_bridges": {...}   # see tests/mknode_gpu.py
  "gpudirect": {...}               # the kernel, the NVIDIA driver, peer memory: see
                                   # tests/mknode_gpu.py
  "scale": {"hcas": 16, "ports": 2, "gid_tbl_len": 256, "addrs_per_port": 24,
            "first_pci_bus": 32, "netdev_prefix": "eth", "first_netdev": 1,
            "name_prefix": "mlx5_", "rate": "200 Gb/sec (4X HDR)", "subnet_base": "10.128.0.0"}
                                   # appends hcas generated RoCE HCAs to "devices" and a
                                   # connected /24 route per port (addresses .1 .. .N)
}
"""

import argparse
import ipaddress
import json
import os
import shutil
import stat
import sys

from mknode_gpu import (GpuError, build_bridges, build_gpudirect, build_gpus, gpu_devnodes,
                        gpu_list)

from mknode_tree import (UVERBS_MAJOR, UVERBS_BASE, UVERBS_FIXED, UVERBS_DYN_MAJOR,
                         UMAD_MAJOR, UMAD_FIXED, UMAD_DYN_MAJOR, UMAD_DYN_ISSM_OFFSET,
                         DEV_KEYS, GID_KEYS, GID_TYPES, IB_KEYS, MARKER, MEM_MAJOR,
                         MISC_MAJOR, NETDEV_KEYS, NODE_TYPE_NAMES, NodeError, PCI_KEYS,
                         PHYS_NAMES, PORT_KEYS, ROCE_KEYS, ROUTE_KEYS, SCALE_KEYS,
                         STATE_NAMES, TOP_KEYS, Tree, ZERO_GID, addr_gid, check_keys,
                         fmt_gid, fmt_guid, gid_raw, ipv4_le, link_local_gid, mac_bytes,
                         merged, num_text, pci_dir, proc_devices, state_num)


# ---------------------------------------------------------------- the node model

def parse_scale(text):
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        k, sep, v = item.partition("=")
        if not sep or k not in SCALE_KEYS:
            raise NodeError(f"--scale: bad item {item!r} (keys: {', '.join(sorted(SCALE_KEYS))})")
        try:
            out[k] = int(v, 0)
        except ValueError:
            out[k] = v
    return out


def expand_scale(node, override):
    sc = dict(node.get("scale") or {})
    if override and not node.get("scale"):
        raise NodeError("--scale given but the node has no \"scale\" object")
    sc.update(override or {})
    if not sc:
        return
    check_keys(sc, SCALE_KEYS, "scale")
    hcas = int(sc.get("hcas", 16))
    ports = int(sc.get("ports", 2))
    tbl = int(sc.get("gid_tbl_len", 256))
    naddr = int(sc.get("addrs_per_port", 24))
    bus0 = int(sc.get("first_pci_bus", 0x20))
    prefix = sc.get("netdev_prefix", "eth")
    first_if = int(sc.get("first_netdev", 1))
    name_prefix = sc.get("name_prefix", "mlx5_")
    rate = sc.get("rate", "200 Gb/sec (4X HDR)")
    base = int(ipaddress.IPv4Address(sc.get("subnet_base", "10.128.0.0")))
    if hcas < 0 or ports < 1 or naddr < 0 or naddr > 250:
        raise NodeError("scale: need hcas >= 0, ports >= 1, 0 <= addrs_per_port <= 250")
    if 2 + 2 * naddr > tbl:
        raise NodeError(f"scale: gid_tbl_len {tbl} cannot hold 2 + 2*{naddr} entries")
    devs = node.setdefault("devices", [])
    routes = node.setdefault("routes", [])
    taken = {d.get("name") for d in devs}
    for h in range(hcas):
        name = f"{name_prefix}{h}"
        if name in taken:
            raise NodeError(f"scale: device {name} already listed in \"devices\"")
        slot = bus0 + h
        pci = f"{slot // 256:04x}:{slot % 256:02x}:00.0"
        dev = {"name": name, "pci": pci, "vendor": "0x15b3", "device": "0x101d",
               "driver": "mlx5_core", "node_type": "1: CA",
               "numa": 0 if h < (hcas + 1) // 2 else 1, "fw_ver": "22.36.1010",
               "node_guid": fmt_guid(bytes([0xb8, 0xce, 0xf6, 0x03, 0x00, h >> 8 & 0xff,
                                            h & 0xff, 0x00])),
               "netdevs": [], "ports": []}
        for p in range(ports):
            s = h * ports + p
            ifname = f"{prefix}{first_if + s}"
            mac = f"b8:ce:f6:{h >> 8 & 0xff:02x}:{h & 0xff:02x}:{p:02x}"
            net = base + s * 256
            dev["netdevs"].append({"name": ifname, "address": mac, "dev_port": p})
            dev["ports"].append({
                "state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "Ethernet",
                "rate": rate, "gid_tbl_len": tbl,
                "roce": {"netdev": ifname, "mac": mac,
                         "ipv4": [str(ipaddress.IPv4Address(net + k + 1))
                                  for k in range(naddr)]}})
            routes.append({"iface": ifname, "dest": f"{ipaddress.IPv4Address(net)}/24",
                           "metric": 0})
        devs.append(dev)


class Node:
    def __init__(self, node):
        check_keys(node, TOP_KEYS, "node")
        self.node = node
        self.netdev_attrs = {}      # name -> netdev object (merged)
        self.netdev_home = {}       # name -> directory (relative to root) of its parent
        self.netdev_order = []
        for nd in node.get("netdevs", []):
            self._netdev(nd, None, "netdevs")
        self.devs = []
        dd, pd = node.get("device_defaults"), node.get("port_defaults")
        seen = set()
        for i, d in enumerate(node.get("devices", [])):
            d = merged(dd, d)
            what = f"devices[{i}]"
            check_keys(d, DEV_KEYS, what)
            if "name" not in d:
                raise NodeError(f"{what}: no name")
            what = f"device {d['name']}"
            if d["name"] in seen:
                raise NodeError(f"{what}: listed twice")
            seen.add(d["name"])
            ports = []
            for j, p in enumerate(d.get("ports", [])):
                p = merged(pd, p)
                check_keys(p, PORT_KEYS, f"{what} ports[{j}]")
                p.setdefault("num", j + 1)
                ports.append(p)
            d["ports"] = ports
            self.devs.append(d)
        for k, pdv in enumerate(node.get("pci_devices", [])):
            check_keys(pdv, PCI_KEYS, f"pci_devices[{k}]")
            self._own_netdevs(pdv, f"pci_devices[{k}]")
        for d in self.devs:
            if d.get("pci"):
                self._own_netdevs(d, f"device {d['name']}")
            elif d.get("netdevs"):
                raise NodeError(f"device {d['name']}: a virtual device cannot own netdevs")
        self._assign_chardevs()
        self._fill_macs()
        try:
            self.gpus = gpu_list(node, merged, check_keys)
        except GpuError as e:
            raise NodeError(str(e)) from None

    def _own_netdevs(self, obj, what):
        d = pci_dir(obj, what)
        sub = obj.get("netdev_subdir")
        home = f"{d}/{sub}" if sub else d
        for nd in obj.get("netdevs", []):
            self._netdev(nd, home, f"{what} netdevs")

    def _netdev(self, nd, home, what):
        if isinstance(nd, str):
            nd = {"name": nd}
        check_keys(nd, NETDEV_KEYS, what)
        name = nd.get("name")
        if not name or "/" in name or len(name) > 15:
            raise NodeError(f"{what}: bad netdev name {name!r}")
        cur = self.netdev_attrs.get(name)
        if cur is None:
            cur = self.netdev_attrs[name] = {}
            self.netdev_order.append(name)
        cur.update(nd)
        if home is not None:
            if name in self.netdev_home:
                raise NodeError(f"{what}: netdev {name} belongs to two devices")
            self.netdev_home[name] = home

    def _assign_chardevs(self):
        used = {d["uverbs"] for d in self.devs if isinstance(d.get("uverbs"), int)}
        nxt = 0
        for d in self.devs:
            if "uverbs" not in d:
                while nxt in used:
                    nxt += 1
                d["uverbs"] = nxt
                used.add(nxt)
        seen = set()
        for d in self.devs:
            u = d["uverbs"]
            if u is not None:
                if u in seen:
                    raise NodeError(f"device {d['name']}: uverbs{u} used twice")
                seen.add(u)
        n = 0
        for d in self.devs:
            for p in d["ports"]:
                if p.get("umad", p.get("link_layer", "Ethernet") != "Unknown"):
                    p["_umad"] = n
                    n += 1
                else:
                    p["_umad"] = None

    def _fill_macs(self):
        for d in self.devs:
            for p in d["ports"]:
                r = p.get("roce")
                if r and r.get("netdev") and r.get("mac"):
                    a = self.netdev_attrs.get(r["netdev"])
                    if a is not None and "address" not in a:
                        a["address"] = r["mac"]
                    p.setdefault("_mac_for", {})[r["netdev"]] = r["mac"]

    # -------------------------------------------------------- GID tables

    def port_gids(self, dev, port):
        """index -> (raw gid, type text or '', ndev or '') for the used entries."""
        what = f"device {dev['name']} port {port['num']}"
        tbl = port.get("gid_tbl_len")
        ll = port.get("link_layer", "Ethernet")
        if tbl is None:
            tbl = {"Ethernet": 256, "InfiniBand": 128}.get(ll, 1)
        port["gid_tbl_len"] = tbl
        gids = {}
        nxt = 0
        r = port.get("roce")
        if r:
            check_keys(r, ROCE_KEYS, f"{what} roce")
            vers = [GID_TYPES.get(v) for v in r.get("versions", ["v1", "v2"])]
            if None in vers or "" in vers:
                raise NodeError(f"{what} roce: versions must be v1/v2")
            ndev = r.get("netdev", "")
            entries = []
            if r.get("mac"):
                entries.append(link_local_gid(r["mac"], f"{what} roce mac"))
            for a in r.get("addrs", []) + r.get("ipv4", []) + r.get("ipv6", []):
                entries.append(addr_gid(a, f"{what} roce"))
            for raw in entries:
                for v in vers:
                    gids[nxt] = (raw, v, ndev)
                    nxt += 1
        ib = port.get("ib")
        if ib:
            check_keys(ib, IB_KEYS, f"{what} ib")
            prefix = gid_raw(ib.get("subnet_prefix", "fe80:0000:0000:0000") + ":0000:0000:0000:0000",
                             f"{what} ib subnet_prefix")[:8]
            guid = gid_raw("0000:0000:0000:0000:" + ib["guid"], f"{what} ib guid")[8:]
            gids[0] = (prefix + guid, "IB/RoCE v1", "")
        for k, g in enumerate(port.get("gids", [])):
            check_keys(g, GID_KEYS, f"{what} gids[{k}]")
            if "index" not in g:
                raise NodeError(f"{what} gids[{k}]: no index")
            if "ipv4" in g:
                raw = addr_gid(g["ipv4"], f"{what} gids[{k}]")
            else:
                raw = gid_raw(g.get("gid"), f"{what} gids[{k}]")
            t = GID_TYPES.get(g.get("type", ""))
            if t is None:
                raise NodeError(f"{what} gids[{k}]: unknown type {g.get('type')!r}")
            if raw == bytes(16):
                gids.pop(g["index"], None)
            else:
                gids[g["index"]] = (raw, t, g.get("ndev", ""))
        bad = [i for i in gids if not 0 <= i < tbl]
        if bad:
            raise NodeError(f"{what}: GID index {max(bad)} outside gid_tbl_len {tbl}")
        return gids

    # -------------------------------------------------------- build

    def build(self, tree):
        node = self.node
        loaded = node.get("rdma_core_loaded", bool(self.devs))
        ifindex = [1]

        def next_ifindex():
            used = {a.get("ifindex") for a in self.netdev_attrs.values()}
            while ifindex[0] in used:
                ifindex[0] += 1
            v = ifindex[0]
            ifindex[0] += 1
            return v

        functions = []   # (directory, numa) of every PCI function, for their bridges

        def pci_function(obj, what, default_class):
            d = pci_dir(obj, what)
            functions.append((d, obj.get("numa", -1)))
            tree.mkdir(d)
            tree.attr(f"{d}/vendor", obj.get("vendor", "0x15b3"))
            tree.attr(f"{d}/device", obj.get("device", "0x101d"))
            tree.attr(f"{d}/subsystem_vendor", obj.get("subsystem_vendor", obj.get("vendor", "0x15b3")))
            tree.attr(f"{d}/subsystem_device", obj.get("subsystem_device", "0x0000"))
            tree.attr(f"{d}/class", obj.get("class", default_class))
            tree.attr(f"{d}/numa_node", obj.get("numa", -1))
            drv = obj.get("driver")
            if drv:
                tree.mkdir(f"sys/bus/pci/drivers/{drv}")
                tree.link(f"{d}/driver", f"sys/bus/pci/drivers/{drv}")
            tree.link(f"sys/bus/pci/devices/{obj['pci']}", d)
            return d

        # PCI functions: front-end NICs first, then the RDMA devices
        for k, pdv in enumerate(node.get("pci_devices", [])):
            pci_function(pdv, f"pci_devices[{k}]", "0x020000")
        pcis = [x["pci"] for x in node.get("pci_devices", []) + self.devs + self.gpus
                if x.get("pci")]
        dup = {x for x in pcis if pcis.count(x) > 1}
        if dup:
            raise NodeError(f"PCI address {sorted(dup)[0]} used twice")
        build_gpus(tree, self.gpus, pci_function)
        build_gpudirect(tree, node.get("gpudirect"), check_keys)
        for d in self.devs:
            for p in d["ports"]:
                r = p.get("roce") or {}
                if r.get("netdev") and r["netdev"] not in self.netdev_attrs:
                    raise NodeError(f"device {d['name']} port {p['num']}: roce netdev "
                                    f"{r['netdev']} is not declared (device or top-level "
                                    "\"netdevs\")")
        devdirs = {}
        for d in self.devs:
            what = f"device {d['name']}"
            if d.get("pci"):
                ll = d["ports"][0].get("link_layer") if d["ports"] else "Ethernet"
                devdirs[d["name"]] = pci_function(d, what,
                                                  "0x020700" if ll == "InfiniBand" else "0x020000")
            else:
                devdirs[d["name"]] = None
        bridged = {p for d, _ in functions for p in d.split("/")[3:-1]}
        if bridged & set(pcis):
            raise NodeError(f"PCI address {sorted(bridged & set(pcis))[0]} is both a "
                            "function and a bridge in a pci_parent")
        try:
            build_bridges(tree, functions, node.get("pci_bridges"), check_keys)
        except GpuError as e:
            raise NodeError(str(e)) from None

        # netdevs
        dev_port = {}
        for d in self.devs:
            for p in d["ports"]:
                r = p.get("roce") or {}
                if r.get("netdev"):
                    dev_port.setdefault(r["netdev"], p["num"] - 1)
        for name in self.netdev_order:
            a = self.netdev_attrs[name]
            home = self.netdev_home.get(name)
            if home is None:
                if not a.get("virtual"):
                    raise NodeError(f"netdev {name}: not owned by a PCI device and not virtual")
                nd = f"sys/devices/virtual/net/{name}"
            else:
                if a.get("virtual"):
                    raise NodeError(f"netdev {name}: virtual but owned by a PCI device")
                nd = f"{home}/net/{name}"
            tree.mkdir(nd)
            idx = a.get("ifindex") or next_ifindex()
            a["ifindex"] = idx
            ntype = a.get("type", 772 if name == "lo" else 1)
            addr = a.get("address")
            if addr is None:
                addr = "00:00:00:00:00:00" if ntype == 772 else \
                    "02:00:00:00:%02x:%02x" % (idx >> 8 & 0xff, idx & 0xff)
            oper = a.get("operstate", "unknown" if ntype == 772 else "up")
            tree.attr(f"{nd}/address", addr)
            tree.attr(f"{nd}/addr_len", len(addr.split(":")))
            tree.attr(f"{nd}/ifindex", idx)
            tree.attr(f"{nd}/iflink", idx)
            tree.attr(f"{nd}/type", ntype)
            tree.attr(f"{nd}/mtu", a.get("mtu", 65536 if ntype == 772 else
                                         (2044 if ntype == 32 else 1500)))
            tree.attr(f"{nd}/operstate", oper)
            tree.attr(f"{nd}/carrier", 1 if oper in ("up", "unknown") else 0)
            tree.attr(f"{nd}/dev_id", "0x0")
            tree.attr(f"{nd}/dev_port", a.get("dev_port", dev_port.get(name, 0)))
            if home is not None:
                tree.link(f"{nd}/device", home)
            tree.link(f"sys/class/net/{name}", nd)

        # RDMA devices
        if loaded:
            tree.mkdir("sys/class/infiniband")
            tree.mkdir("sys/class/infiniband_verbs")
            tree.mkdir("sys/class/infiniband_mad")
            abi = node.get("uverbs_abi_version", 6)
            if abi is not None:
                tree.attr("sys/class/infiniband_verbs/abi_version", abi)
            tree.attr("sys/class/infiniband_mad/abi_version", 5)
        elif self.devs:
            raise NodeError("rdma_core_loaded is false but devices are listed")
        self.chardevs = []
        for d in self.devs:
            self._build_device(tree, d, devdirs[d["name"]])
        cm = node.get("rdma_cm_minor")
        if cm is not None:
            tree.attr("sys/devices/virtual/misc/rdma_cm/dev", f"{MISC_MAJOR}:{cm}")
            tree.link("sys/class/misc/rdma_cm", "sys/devices/virtual/misc/rdma_cm")
            tree.link(f"sys/dev/char/{MISC_MAJOR}:{cm}", "sys/devices/virtual/misc/rdma_cm")
            self.chardevs.append(("rdma_cm", MISC_MAJOR, cm, 0o666))
        # a few devices every host has, so that a number of theirs leads somewhere
        for mname, minor in (("null", 3), ("kmsg", 11)):
            md = f"sys/devices/virtual/mem/{mname}"
            tree.attr(f"{md}/dev", f"{MEM_MAJOR}:{minor}")
            tree.link(f"sys/class/mem/{mname}", md)
            tree.link(f"sys/dev/char/{MEM_MAJOR}:{minor}", md)
        tree.write("proc/devices", proc_devices(loaded))

        # routes
        lines = ["%-127s" % "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"]
        for k, rt in enumerate(node.get("routes", [])):
            what = f"routes[{k}]"
            check_keys(rt, ROUTE_KEYS, what)
            dest = rt.get("dest", "0.0.0.0")
            if "/" in dest:
                netw = ipaddress.IPv4Network(dest, strict=False)
                dest, mask = str(netw.network_address), str(netw.netmask)
                if "mask" in rt:
                    raise NodeError(f"{what}: both a CIDR dest and a mask")
            else:
                mask = rt.get("mask", "0.0.0.0" if dest == "0.0.0.0" else "255.255.255.255")
            gw = rt.get("gw", "0.0.0.0")
            flags = rt.get("flags")
            if flags is None:
                flags = 1 | (2 if gw != "0.0.0.0" else 0) | (4 if mask == "255.255.255.255" else 0)
            line = "%s\t%08X\t%08X\t%04X\t%d\t%u\t%d\t%08X\t%d\t%u\t%u" % (
                rt["iface"], ipv4_le(dest, what), ipv4_le(gw, what), flags, 0, 0,
                rt.get("metric", 0), ipv4_le(mask, what), rt.get("mtu", 0),
                rt.get("window", 0), rt.get("irtt", 0))
            lines.append("%-127s" % line)
        tree.write("proc/net/route", "\n".join(lines) + "\n")

    def _build_device(self, tree, d, pdir):
        name = d["name"]
        what = f"device {name}"
        if pdir:
            ib = f"{pdir}/infiniband/{name}"
        else:
            ib = f"sys/devices/virtual/infiniband/{name}"
        tree.mkdir(ib)
        nt = num_text(d.get("node_type", "1: CA"), NODE_TYPE_NAMES, f"{what} node_type")
        guid = d.get("node_guid", "0000:0000:0000:0000")
        tree.attr(f"{ib}/node_type", nt)
        tree.attr(f"{ib}/node_guid", guid)
        tree.attr(f"{ib}/sys_image_guid", d.get("sys_image_guid", guid))
        tree.attr(f"{ib}/fw_ver", d.get("fw_ver", "0.0.0"))
        tree.attr(f"{ib}/node_desc", d.get("node_desc", f"{name} HCA"))
        for opt in ("hca_type", "board_id", "hw_rev"):
            if opt in d:
                tree.attr(f"{ib}/{opt}", d[opt])
        if pdir:
            tree.link(f"{ib}/device", pdir)
        tree.link(f"sys/class/infiniband/{name}", ib)
        for fname, data in (d.get("files") or {}).items():
            tree.write(f"{ib}/{fname}", data)

        for p in d["ports"]:
            self._build_port(tree, d, p, f"{ib}/ports/{p['num']}")

        base = pdir or "sys/devices/virtual"
        u = d.get("uverbs")
        if u is not None:
            ud = f"{base}/infiniband_verbs/uverbs{u}"
            major, minor = (UVERBS_MAJOR, UVERBS_BASE + u) if u < UVERBS_FIXED else \
                (UVERBS_DYN_MAJOR, u - UVERBS_FIXED)
            tree.attr(f"{ud}/ibdev", name)
            tree.attr(f"{ud}/dev", f"{major}:{minor}")
            tree.attr(f"{ud}/abi_version", 1)
            if pdir:
                tree.link(f"{ud}/device", pdir)
            tree.link(f"sys/class/infiniband_verbs/uverbs{u}", ud)
            tree.link(f"sys/dev/char/{major}:{minor}", ud)
            if d.get("uverbs_devnode", True):
                self.chardevs.append((f"uverbs{u}", major, minor, 0o666))
        for p in d["ports"]:
            n = p["_umad"]
            if n is None:
                continue
            if n < UMAD_FIXED:
                um, iss = (UMAD_MAJOR, n), (UMAD_MAJOR, UMAD_FIXED + n)
            else:
                um = (UMAD_DYN_MAJOR, n - UMAD_FIXED)
                iss = (UMAD_DYN_MAJOR, UMAD_DYN_ISSM_OFFSET + n - UMAD_FIXED)
            for kind, (major, minor) in (("umad", um), ("issm", iss)):
                md = f"{base}/infiniband_mad/{kind}{n}"
                tree.attr(f"{md}/ibdev", name)
                tree.attr(f"{md}/port", p["num"])
                tree.attr(f"{md}/dev", f"{major}:{minor}")
                if pdir:
                    tree.link(f"{md}/device", pdir)
                tree.link(f"sys/class/infiniband_mad/{kind}{n}", md)
                tree.link(f"sys/dev/char/{major}:{minor}", md)
                self.chardevs.append((f"{kind}{n}", major, minor, 0o600))

    def _build_port(self, tree, d, p, pd):
        what = f"device {d['name']} port {p['num']}"
        ll = p.get("link_layer", "Ethernet")
        if ll not in ("Ethernet", "InfiniBand", "Unknown"):
            raise NodeError(f"{what}: link_layer must be Ethernet, InfiniBand or Unknown")
        state = num_text(p.get("state", "4: ACTIVE"), STATE_NAMES, f"{what} state")
        phys = p.get("phys_state")
        if phys is None:
            phys = "5: LinkUp" if state_num(state) == 4 else "3: Disabled"
        phys = num_text(phys, PHYS_NAMES, f"{what} phys_state")
        tree.mkdir(pd)
        tree.attr(f"{pd}/state", state)
        tree.attr(f"{pd}/phys_state", phys)
        tree.attr(f"{pd}/link_layer", ll)
        tree.attr(f"{pd}/rate", p.get("rate", "100 Gb/sec (4X EDR)"))
        tree.attr(f"{pd}/lid", p.get("lid", "0x0"))
        tree.attr(f"{pd}/sm_lid", p.get("sm_lid", "0x0"))
        tree.attr(f"{pd}/sm_sl", p.get("sm_sl", 0))
        tree.attr(f"{pd}/lid_mask_count", p.get("lid_mask_count", 0))
        tree.attr(f"{pd}/cap_mask", p.get("cap_mask", "0x04010000" if ll != "InfiniBand"
                                          else "0xa651e848"))
        gids = self.port_gids(d, p)
        tbl = p["gid_tbl_len"]
        zero = ZERO_GID + "\n"
        gdir, tdir, ndir = f"{pd}/gids", f"{pd}/gid_attrs/types", f"{pd}/gid_attrs/ndevs"
        tree.mkdir(gdir)
        tree.mkdir(tdir)
        tree.mkdir(ndir)
        for i in range(tbl):
            g = gids.get(i)
            if g is None:
                tree.write(f"{gdir}/{i}", zero)
                tree.write(f"{tdir}/{i}", "")
                tree.write(f"{ndir}/{i}", "")
            else:
                raw, t, nd = g
                tree.write(f"{gdir}/{i}", fmt_gid(raw) + "\n")
                tree.write(f"{tdir}/{i}", t + "\n" if t else "")
                tree.write(f"{ndir}/{i}", nd + "\n" if nd else "")
        for fname, data in (p.get("files") or {}).items():
            tree.write(f"{pd}/{fname}", data)

    # -------------------------------------------------------- show_gids

    def show_gids(self):
        rows = []
        for d in sorted(self.devs, key=lambda x: x["name"]):
            for p in d["ports"]:
                gids = self.port_gids(d, p)
                for i in sorted(gids):
                    raw, t, nd = gids[i]
                    if raw[8:] == bytes(8) and raw[:8] == bytes.fromhex("fe80000000000000"):
                        continue
                    cols = [d["name"], str(p["num"]), str(i), fmt_gid(raw)]
                    if raw[:12] == bytes(10) + b"\xff\xff":
                        cols.append(str(ipaddress.IPv4Address(raw[12:])))
                    cols.append({"IB/RoCE v1": "v1", "RoCE v2": "v2"}.get(t, ""))
                    if nd:
                        cols.append(nd)
                    rows.append(" ".join(c for c in cols if c))
        return rows


def make_devnodes(root, chardevs, gpu_nodes=()):
    ddir = os.path.join(root, "dev", "infiniband")
    os.makedirs(ddir, exist_ok=True)
    for name, major, minor, mode in chardevs:
        path = os.path.join(ddir, name)
        os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
        os.chmod(path, mode)
    for name, major, minor, mode in gpu_nodes:
        path = os.path.join(root, "dev", name)
        os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
        os.chmod(path, mode)


def prepare_outdir(out, force):
    if os.path.lexists(out) and not os.path.isdir(out):
        raise NodeError(f"{out}: exists and is not a directory")
    if os.path.isdir(out) and os.listdir(out):
        if not os.path.exists(os.path.join(out, MARKER)):
            raise NodeError(f"{out}: not empty and not a mknode tree (no {MARKER}); "
                            "remove it yourself")
        if not force:
            raise NodeError(f"{out}: not empty (an earlier mknode tree); use --force")
        shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)


def main(argv):
    ap = argparse.ArgumentParser(description="Build a fake RDMA sysfs tree from a JSON node.",
                                 epilog="The JSON format is described at the top of this file.")
    ap.add_argument("node")
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--devnodes", action="store_true")
    ap.add_argument("--scale", default="")
    ap.add_argument("--show-gids", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if not args.outdir and not args.show_gids:
        ap.error("OUTDIR is required (unless --show-gids)")
    try:
        with open(args.node) as f:
            raw = json.load(f)
        expand_scale(raw, parse_scale(args.scale))
        node = Node(raw)
        if args.outdir:
            if args.devnodes and os.geteuid() != 0:
                raise NodeError("--devnodes needs root (mknod)")
            prepare_outdir(args.outdir, args.force)
            with open(os.path.join(args.outdir, MARKER), "w") as f:
                f.write(os.path.abspath(args.node) + "\n")
            tree = Tree(args.outdir)
            node.build(tree)
            if args.devnodes:
                make_devnodes(args.outdir, node.chardevs, gpu_devnodes(node.gpus))
            if args.verbose:
                print(f"{args.outdir}: {len(node.devs)} RDMA devices, {len(node.gpus)} GPUs, "
                      f"{tree.nfiles} files, "
                      f"{tree.nlinks} links, {len(tree.dirs)} directories"
                      + (f", {len(node.chardevs) + len(gpu_devnodes(node.gpus))} device nodes"
                         if args.devnodes else ""),
                      file=sys.stderr)
        if args.show_gids:
            for row in node.show_gids():
                print(row)
    except (NodeError, OSError, json.JSONDecodeError, KeyError) as e:
        print(f"mknode: {args.node}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
