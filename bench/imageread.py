# SPDX-License-Identifier: Apache-2.0
"""2b. The image's reading against a hostile image (bench.py calls it after part 3g): the
live hook's own process (wrapped by `harness --rss-log`, as in part 3g) on a plain image and
on the same image holding the crafted ELF file of tests/mkimage_tree.py (127 section headers,
version needs that overlap: 16 million reads where each entry is read from the file), in
the same `runc run` rounds, on the scale node with this machine's rdma-core in its root:

- image_check alone: a busybox image with this machine's loader, libc, libibverbs and mlx5
  provider, against the same with the crafted file as its mlx5 provider;
- image_supply = yes: the same images without a provider (the node's is given), against
  the same with the crafted file as its libc.so.6.

The budget: the crafted image's hook at most twice the plain one's, wall and CPU time."""

import os
import shutil
import statistics
import sys

from floorpaths import fmt3, median_ci, read_log
from report import md_table

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import mkimage_tree  # noqa: E402

BUDGET_IMAGE_RATIO = 2.0  # the hook on the crafted image vs on the plain one
MULTI = "usr/lib/x86_64-linux-gnu"
NODE_LIBS = ["libibverbs.so.1", "libnl-3.so.200", "libnl-route-3.so.200",
             "libibverbs/libmlx5-rdmav34.so"]


def copy(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(os.path.realpath(src), dst)


def image(b, bundle, provider, libc):
    """The bundle's root as an image: this machine's loader and libc (or libc's bytes),
    libibverbs, its loader cache, and the mlx5 provider (or its bytes, or none)."""
    root = os.path.join(bundle, "rootfs")
    copy("/lib64/ld-linux-x86-64.so.2", os.path.join(root, "lib64/ld-linux-x86-64.so.2"))
    copy(f"/{MULTI}/libibverbs.so.1", os.path.join(root, MULTI, "libibverbs.so.1"))
    copy("/etc/ld.so.cache", os.path.join(root, "etc/ld.so.cache"))
    for rel, data in ((f"{MULTI}/libc.so.6", libc),
                      (f"{MULTI}/libibverbs/libmlx5-rdmav34.so", provider)):
        if data is None:
            continue
        if data == "host":
            copy("/" + rel, os.path.join(root, rel))
            continue
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(root, "etc/libibverbs.d"), exist_ok=True)
    with open(os.path.join(root, "etc/libibverbs.d/mlx5.driver"), "w") as f:
        f.write("driver mlx5\n")


def hostile(b):
    if not all(os.path.exists(f"/{MULTI}/{lib}") for lib in NODE_LIBS + ["libc.so.6"]):
        b.sections.append("### 2b. The image's reading against a hostile image\n\nNot run: "
                          "this machine has no rdma-core with the mlx5 provider.")
        return
    print("bench: 2b. the live hook on a plain image vs one holding the crafted ELF file",
          file=sys.stderr, flush=True)
    node = b.scale_dev
    for lib in NODE_LIBS:
        copy(f"/{MULTI}/{lib}", os.path.join(node, MULTI, lib))
    os.makedirs(os.path.join(node, "etc", "libibverbs.d"), exist_ok=True)
    with open(os.path.join(node, "etc", "libibverbs.d", "mlx5.driver"), "w") as f:
        f.write("driver mlx5\n")
    conf = {"check": b.p("container.conf"), "supply": b.p("image-supply.conf")}
    with open(conf["check"]) as f, open(conf["supply"], "w") as g:
        g.write(f.read() + "image_supply = yes\n")
    crafted = mkimage_tree.crafted_elf()
    cases = {  # name: (config, provider, libc)
        "check-plain": ("check", "host", "host"),
        "check-crafted": ("check", crafted, "host"),
        "supply-plain": ("supply", None, "host"),
        "supply-crafted": ("supply", None, crafted),
    }
    logs, specs = {}, []
    for name, (cfg, provider, libc) in cases.items():
        logs[name] = b.p(f"image-{name}.log")
        bundle = b.make_bundle(f"image-{name}", [b.harness, "harness", "--rss-log", logs[name],
                                                 b.hook, "--sysroot", node, "--config",
                                                 conf[cfg], "createRuntime"])
        image(b, bundle, provider, libc)
        root = os.path.join(bundle, "rootfs")
        # each start a new container on the image as it was: its state directory and what
        # the hook wrote into the image removed, its loader cache put back (untimed)
        spec = b.runc_spec(name, bundle)
        cid = spec[2][-1]
        spec[1].append(f"@prep=rm -rf /run/oci-rdma-hook/{cid} {root}/etc/nccl.conf "
                       f"{root}/run && cp /etc/ld.so.cache {root}/etc/ld.so.cache")
        specs.append(spec)
    b.harness_run(specs, rounds=b.n(100, 15), warmup=3, max_s=b.n(60, 12))
    runs = {k: read_log(p) for k, p in logs.items()}
    n = min(len(v) for v in runs.values())
    rows, worst = [], 0.0
    for kind in ("check", "supply"):
        plain, bad = runs[f"{kind}-plain"][:n], runs[f"{kind}-crafted"][:n]
        res = {}
        for col, what in ((1, "wall"), (2, "cpu")):
            res[what] = median_ci([x[col] / p[col] for x, p in zip(bad, plain) if p[col] > 0])
            worst = max(worst, res[what][0])
        label = {"check": "image_check alone: the crafted file as the mlx5 provider",
                 "supply": "image_supply = yes: the crafted file as libc.so.6"}[kind]
        rows.append((label, f"{statistics.median(x[1] for x in plain) / 1000:.2f}",
                     f"{statistics.median(x[1] for x in bad) / 1000:.2f}",
                     f"{statistics.median(x[2] for x in plain) / 1000:.2f}",
                     f"{statistics.median(x[2] for x in bad) / 1000:.2f}",
                     fmt3(*res["wall"]), fmt3(*res["cpu"])))
    b.sections.append(
        f"### 2b. The image's reading against a hostile image ({n} rounds, scale node)\n\n"
        + md_table(["case", "plain wall ms", "crafted wall ms", "plain CPU ms",
                    "crafted CPU ms", "crafted vs plain, wall (95% CI)",
                    "crafted vs plain, CPU (95% CI)"], rows)
        + "\n\nThe live hook's own process (`harness --rss-log`), inside `runc run`, the "
          "four bundles taking turns in every round; the ratio is the median over rounds "
          "of the crafted image's hook over the plain one's in the same round. The crafted "
          "file (`tests/mkimage_tree.py`, `crafted_elf()`) is 16 KiB: 127 section headers, "
          "124 version-need sections over the same 8 KiB whose entries and names overlap. "
          "Its reading stops at the budget of one file (`ORH_IMAGE_FILE_ENTRIES`) and the "
          "file is taken as unreadable: a provider whose need is not told is taken as "
          "libibverbs takes it, an unreadable libc.so.6 gives no supply.")
    b.budgets.append(("the live hook on a crafted image vs a plain one (part 2b, its own "
                      "process, within rounds)", f"{worst:.2f}x at most (wall and CPU)",
                      f"<= {BUDGET_IMAGE_RATIO:g}x", worst <= BUDGET_IMAGE_RATIO))
