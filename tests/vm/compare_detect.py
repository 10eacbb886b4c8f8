# SPDX-License-Identifier: Apache-2.0
"""compare_detect.py DETECT.json RDMA-LINK.json IBV_DEVINFO-V.txt

Run by tests/vm/guest.sh inside the VM: checks `oci-rdma-hook detect --json` field by
field against what the kernel says three ways - sysfs read here directly, `rdma -j link
show` (netlink) and `ibv_devinfo -v` (verbs) - and prints one TAP line a field group.
It ends with "# compared" when every comparison ran.
"""
import ipaddress
import json
import os
import re
import sys

SYS = "/sys/class/infiniband"


def sysfs(path):
    with open(path) as f:
        return f.read().strip()


def sys_gid_format(addr):
    """an IPv6 address as sysfs writes a GID: eight groups of four hex digits"""
    h = ipaddress.IPv6Address(addr).exploded.replace(":", "")
    return ":".join(h[i:i + 4] for i in range(0, 32, 4))


def parse_devinfo(text):
    """{device: {"node_guid": ..., "ports": {n: {field: value, "gids": {i: (gid, type)}}}}}"""
    devs, dev, port = {}, None, None
    for line in text.splitlines():
        m = re.match(r"hca_id:\s+(\S+)", line)
        if m:
            dev = devs.setdefault(m.group(1), {"ports": {}})
            port = None
            continue
        if dev is None:
            continue
        m = re.match(r"\s+node_guid:\s+(\S+)", line)
        if m and port is None:
            dev["node_guid"] = m.group(1)
        m = re.match(r"\s+port:\s+(\d+)", line)
        if m:
            port = dev["ports"].setdefault(int(m.group(1)), {"gids": {}})
            continue
        if port is None:
            continue
        m = re.match(r"\s+(state|phys_state):\s+(\S+) \((\d+)\)", line)
        if m:
            port[m.group(1)] = int(m.group(3))
        m = re.match(r"\s+(link_layer|gid_tbl_len):\s+(\S+)", line)
        if m:
            port[m.group(1)] = m.group(2)
        m = re.match(r"\s+GID\[\s*(\d+)\]:\s+([0-9a-f:.]+), (RoCE v[12]|IB)", line)
        if m:
            port["gids"][int(m.group(1))] = (sys_gid_format(m.group(2)), m.group(3))
    return devs


def devnum(path):
    st = os.stat(path)
    return os.major(st.st_rdev), os.minor(st.st_rdev)


def main():
    detect = json.load(open(sys.argv[1]))
    links = {(l["ifname"], l["port"]): l for l in json.load(open(sys.argv[2]))}
    devinfo = parse_devinfo(open(sys.argv[3]).read())
    results = []

    def check(what, got, want):
        results.append((got == want, what if got == want else f"{what}: detect {got!r}, kernel {want!r}"))

    names = sorted(d["name"] for d in detect["devices"])
    check("detect: the device list is sysfs's", names, sorted(os.listdir(SYS)))
    check("detect: the device list is rdma link show's", names, sorted({n for n, _ in links}))
    check("detect: the device list is ibv_devinfo's", names, sorted(devinfo))

    for d in detect["devices"]:
        n = d["name"]
        base = f"{SYS}/{n}"
        vi = devinfo.get(n, {"ports": {}})
        check(f"detect: {n} node_guid (sysfs)", d["node_guid"], sysfs(f"{base}/node_guid"))
        check(f"detect: {n} node_guid (ibv_devinfo)", d["node_guid"], vi.get("node_guid"))
        check(f"detect: {n} node_type (sysfs)", d["node_type"], int(sysfs(f"{base}/node_type").split(":")[0]))
        uv = [u for u in os.listdir("/sys/class/infiniband_verbs")
              if u.startswith("uverbs") and sysfs(f"/sys/class/infiniband_verbs/{u}/ibdev") == n]
        check(f"detect: {n} uverbs name (sysfs ibdev)", [d["uverbs"]["name"]], uv)
        if uv:
            maj, mnr = sysfs(f"/sys/class/infiniband_verbs/{uv[0]}/dev").split(":")
            check(f"detect: {n} uverbs numbers (sysfs dev)",
                  (d["uverbs"]["major"], d["uverbs"]["minor"]), (int(maj), int(mnr)))
            check(f"detect: {n} uverbs numbers (/dev/infiniband/{uv[0]})",
                  (d["uverbs"]["major"], d["uverbs"]["minor"]), devnum(f"/dev/infiniband/{uv[0]}"))
        ports = sorted(int(p) for p in os.listdir(f"{base}/ports"))
        check(f"detect: {n} port list (sysfs)", [p["port"] for p in d["ports"]], ports)
        for p in d["ports"]:
            pn = p["port"]
            pb = f"{base}/ports/{pn}"
            tag = f"{n}/{pn}"
            vp = vi["ports"].get(pn, {"gids": {}})
            link = links.get((n, pn), {})
            st_num, st_text = sysfs(f"{pb}/state").split(": ")
            check(f"detect: {tag} state (sysfs)", (p["state"], p["state_text"]), (int(st_num), st_text))
            check(f"detect: {tag} state (rdma link show)", p["state_text"], link.get("state"))
            check(f"detect: {tag} state (ibv_devinfo)", p["state"], vp.get("state"))
            ph_num, ph_text = sysfs(f"{pb}/phys_state").split(": ")
            check(f"detect: {tag} phys_state (sysfs)", (p["phys_state"], p["phys_state_text"]),
                  (int(ph_num), ph_text))
            check(f"detect: {tag} phys_state (ibv_devinfo)", p["phys_state"], vp.get("phys_state"))
            check(f"detect: {tag} link layer (sysfs)", p["link_layer"], sysfs(f"{pb}/link_layer"))
            check(f"detect: {tag} link layer (ibv_devinfo)", p["link_layer"], vp.get("link_layer"))
            check(f"detect: {tag} rate (sysfs)", p["rate"], sysfs(f"{pb}/rate"))
            check(f"detect: {tag} netdev (rdma link show)", p["netdev"], link.get("netdev"))
            check(f"detect: {tag} GID table length (ibv_devinfo)", str(p["gid_tbl_len"]),
                  vp.get("gid_tbl_len"))
            # every valid entry, as sysfs has it: index, GID, type, ndev
            want = []
            for i in sorted(int(x) for x in os.listdir(f"{pb}/gids")):
                g = sysfs(f"{pb}/gids/{i}")
                if g == sys_gid_format("::"):
                    continue
                try:
                    t = sysfs(f"{pb}/gid_attrs/types/{i}")
                    nd = sysfs(f"{pb}/gid_attrs/ndevs/{i}")
                except OSError:
                    continue  # freed between the two reads
                want.append((i, g, t, nd))
            got = [(e["index"], e["gid"], {"v1": "IB/RoCE v1", "v2": "RoCE v2"}.get(e["type"], e["type"]),
                    e["ndev"]) for e in p["gids"]]
            check(f"detect: {tag} GID entries: index, GID, type, ndev (sysfs)", got, want)
            check(f"detect: {tag} GID entries: index, GID, type (ibv_devinfo)",
                  [(i, g, t) for i, g, t, _ in got],
                  [(i, g, t.replace("IB/RoCE v1", "RoCE v1")) for i, (g, t) in sorted(vp["gids"].items())])
            ipv4 = [e["ipv4"] for e in p["gids"]]
            mapped = [ipaddress.IPv6Address(g).ipv4_mapped for _, g, _, _ in want]
            want4 = [str(a) if a else None for a in mapped]
            check(f"detect: {tag} GID entries: IPv4 addresses", ipv4, want4)

    cm = detect.get("rdma_cm") or {}
    maj, mnr = sysfs("/sys/class/misc/rdma_cm/dev").split(":")
    check("detect: rdma_cm numbers (sysfs)", (cm.get("major"), cm.get("minor")), (int(maj), int(mnr)))
    check("detect: rdma_cm numbers (/dev/infiniband/rdma_cm)", (cm.get("major"), cm.get("minor")),
          devnum("/dev/infiniband/rdma_cm"))

    for good, what in results:
        print(("ok - " if good else "not ok - ") + what)
    print("# compared")


if __name__ == "__main__":
    main()
