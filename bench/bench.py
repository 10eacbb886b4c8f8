#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The oci-rdma-hook benchmark. Run it through bench/run.sh, which builds what it needs.

Every measurement is taken side by side with its baseline in one harness run
(bench/harness.c: the commands take turns, round after round), and the budgets are
checked on the per-round ratios, which hold on a shared, noisy machine where absolute
times drift.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import envfloor
import fleet
import floorpaths
import imageread
from report import fmt_ms, md_table, pct_ci, plural, ratio_ci, worst

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NODES = os.path.join(REPO, "tests", "nodes")
MKNODE = os.path.join(REPO, "tests", "mknode.py")

# Budgets (issue "The benchmark"): the benchmark prints PASS/FAIL against these.
BUDGET_ENV_FLOOR_RATIO = 1.20 # env on the scale node vs its calls made after its confinement (1b)
BUDGET_WORST_RATIO = 1.25     # env with no usable GID vs the bare loop reading its files
BUDGET_RSS_KIB = 4096         # peak RSS of the hook on the scale node
BUDGET_GROWTH_RATIO = 1.10    # hook on a 256-entry table vs a 16-entry one, same used entries
BUDGET_SHELL_SPEEDUP = 10.0   # shell baseline vs the hook on the scale node

SAMPLE_ORDER = ["seed001-roce", "erdma", "ib", "mixed", "nordma", "scale"]


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class Bench:
    budget_env = BUDGET_ENV_FLOOR_RATIO

    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.hook = os.path.abspath(args.hook)
        self.harness = os.path.abspath(args.harness)
        self.readfiles = os.path.abspath(args.readfiles) if args.readfiles else None
        self.floor_notes = []  # text under the budget table
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.work = tempfile.mkdtemp(prefix="orh-bench.", dir=base)
        os.chmod(self.work, 0o755)
        self.ids = []
        self.results = {}
        self.budgets = []   # (name, measured text, budget text, ok)
        self.sections = []  # markdown text blocks
        self.strace = shutil.which("strace")
        self.runc = shutil.which("runc")

    # ------------------------------------------------------------------ helpers
    def p(self, *parts):
        return os.path.join(self.work, *parts)

    def n(self, full, quick):
        return quick if self.quick else full

    def harness_run(self, specs, rounds, warmup=3, max_s=None, min_rounds=5):
        """specs: list of (name, [@opts...], argv). Returns {name: cmd-dict, 'vs': {...}}."""
        cmd = [self.harness, "-n", str(rounds), "-w", str(warmup), "-m", str(min_rounds)]
        if max_s:
            cmd += ["-T", str(max_s)]
        for i, (name, opts, argv) in enumerate(specs):
            if i:
                cmd.append("::")
            cmd += [name] + list(opts) + list(argv)
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if out.returncode != 0:
            raise SystemExit(f"bench: harness failed ({out.returncode}): {' '.join(cmd)}")
        res = {"vs": {}, "pairs": {}}
        for line in out.stdout.splitlines():
            kind, *kv = line.split()
            d = {}
            for item in kv:
                k, v = item.split("=", 1)
                try:
                    d[k] = float(v)
                except ValueError:
                    d[k] = v
            if kind == "cmd":
                res[d["name"]] = d
            elif kind == "vs":
                # "vs": against the first command; "pairs": every pairing (@vs=NAME too)
                res["pairs"][(d["name"], d["base"])] = d
                if d["base"] == specs[0][0]:
                    res["vs"][d["name"]] = d
        return res

    def mknode(self, spec, out, scale=None, devnodes=False):
        cmd = [sys.executable, MKNODE, os.path.join(NODES, spec), out]
        if scale:
            cmd += ["--scale", scale]
        if devnodes:
            cmd.append("--devnodes")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return out

    def hook_argv(self, node, *cmd):
        return [self.hook, "--sysroot", node, "--config", self.p("default.conf"), *cmd]

    def strace_env(self, node, name, *opts):
        """Run `env` on node under strace with opts; the path of its output."""
        out = self.p(name)
        subprocess.run([self.strace, "-qq", *opts, "-o", out] + self.hook_argv(node, "env"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return out

    def sysfs_opens(self, node):
        """Files and directories the hook opens under the sysroot (strace), or None."""
        if not self.strace:
            return None
        n = 0
        with open(self.strace_env(node, "strace.out", "-f", "-e", "trace=openat,open")) as f:
            for line in f:
                if "AT_FDCWD" not in line or node in line:
                    n += 1
        return n

    def syscalls(self, node):
        """System calls of one `env` run (strace -c): (total, [(name, calls)...])."""
        if not self.strace:
            return None
        out = self.p("strace-c.out")
        subprocess.run([self.strace, "-f", "-c", "-o", out] + self.hook_argv(node, "env"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        calls = []
        with open(out) as f:
            for line in f:
                m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
                if m and m.group(2) != "total":
                    calls.append((m.group(2), int(m.group(1))))
        calls.sort(key=lambda x: -x[1])
        return sum(n for _, n in calls), calls

    # ------------------------------------------------------------------ setup
    def setup(self):
        t0 = time.time()
        open(self.p("default.conf"), "w").close()
        hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
        memlock = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard // 1024}K"
        with open(self.p("container.conf"), "w") as f:
            # memlock: the hard limit this machine allows (without CAP_SYS_RESOURCE runc
            # cannot set a higher one from the shim's spec edit)
            f.write(f"[node]\nmemlock = {memlock}\n[containers]\nactivation = always\n")
        self.nodes = {}
        for name in SAMPLE_ORDER:
            self.nodes[name] = self.mknode(name + ".json", self.p("node", name))
        # the growth nodes: --scale overrides of the scale node
        self.growth = {
            "hcas": [("1 HCA (2 ports)", "hcas=1"), ("4 HCAs", "hcas=4"),
                     ("16 HCAs", None)],
            "gids": [("16 entries", "gid_tbl_len=16,addrs_per_port=2"),
                     ("64 entries", "gid_tbl_len=64,addrs_per_port=2"),
                     ("256 entries", "gid_tbl_len=256,addrs_per_port=2")],
            "used": [("2 used (no IPv4: full scan)", "addrs_per_port=0"),
                     ("6 used", "gid_tbl_len=256,addrs_per_port=2"),
                     ("50 used", None),
                     ("242 used", "addrs_per_port=120")],
        }
        self.growth_nodes = {}
        for rows in self.growth.values():
            for _, scale in rows:
                if scale is None:
                    self.growth_nodes[None] = self.nodes["scale"]
                elif scale not in self.growth_nodes:
                    self.growth_nodes[scale] = self.mknode(
                        "scale.json", self.p("node", "scale-" + scale.replace(",", "-").replace("=", "")),
                        scale=scale)
        log(f"built {len(self.nodes) + len(self.growth_nodes) - 1} nodes in {time.time() - t0:.1f} s")

    # ------------------------------------------------------------------ 1 + 4: env
    def bench_env(self):
        log("1. env on each sample node vs /bin/true")
        specs = [("true", [], ["/bin/true"])]
        for name in SAMPLE_ORDER:
            specs.append((name, [], self.hook_argv(self.nodes[name], "env")))
        r = self.harness_run(specs, rounds=self.n(300, 60), warmup=5, max_s=self.n(40, 10))
        self.results["env"] = r
        t = r["true"]
        rows = [("`/bin/true` (baseline)", fmt_ms(t), fmt_ms(t, "cpu_"), "1", "1", "", "",
                 f"{t['rss_kb']:.0f}")]
        for name in SAMPLE_ORDER:
            c, v = r[name], r["vs"][name]
            rows.append((f"`env` on {name}", fmt_ms(c), fmt_ms(c, "cpu_"), ratio_ci(v, 2),
                         ratio_ci(v, 2, "cpu_"), f"{v['ratio_p10']:.2f}–{v['ratio_p90']:.2f}",
                         f"{v['diff_us'] / 1000:.2f} / {v['cpu_diff_us'] / 1000:.2f}",
                         f"{c['rss_kb']:.0f}"))
        self.sections.append(
            f"### 1. `oci-rdma-hook env` vs a no-op process ({int(t['rounds'])} rounds)\n\n"
            + md_table(["command", "wall ms (p10–p90)", "CPU ms (p10–p90)", "wall ratio (95% CI)",
                        "CPU ratio (95% CI)", "wall ratio p10–p90", "own work ms, wall / CPU",
                        "peak RSS KiB"], rows)
            + f"\n\n\"own work\" is the median, over rounds, of the hook's time minus "
              f"`/bin/true`'s in the same round. `/bin/true` is linked {adverb(linking('/bin/true'))} "
              f"and the hook {adverb(linking(self.hook))}, so their startup costs differ "
              f"and \"own work\" can come out below zero on an empty node.")
        sc = self.syscalls(self.nodes["scale"])
        if sc:
            self.sections[-1] += (
                f"\n\n`env` on the scale node makes {sc[0]} system calls (strace -c): "
                + ", ".join(f"{name} {n}" for name, n in sc[1][:8]) + ".")
        envfloor.env_floor(self)

    # ------------------------------------------------------------------ containers
    def make_rootfs(self, d):
        for sub in ("bin", "etc", "dev", "proc", "sys", "tmp"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        shutil.copy2("/bin/busybox", os.path.join(d, "bin", "busybox"))
        for tool in ("true", "sh"):
            os.symlink("busybox", os.path.join(d, "bin", tool))
        with open(os.path.join(d, "etc", "passwd"), "w") as f:
            f.write("root:x:0:0:root:/root:/bin/sh\n")
        return d

    def make_bundle(self, name, hook_argv=None):
        """A busybox bundle running /bin/true; hook_argv: its createRuntime hook."""
        b = self.p("bundles", name)
        os.makedirs(b)
        rootfs = self.make_rootfs(os.path.join(b, "rootfs"))
        subprocess.run([self.runc, "spec"], cwd=b, check=True)
        with open(os.path.join(b, "config.json")) as f:
            c = json.load(f)
        c["root"] = {"path": rootfs, "readonly": False}
        c["process"]["terminal"] = False
        c["process"]["args"] = ["/bin/true"]
        if hook_argv:
            c["hooks"] = {"createRuntime": [{"path": hook_argv[0], "args": hook_argv[1:],
                                             "timeout": 30}]}
        for fn in ("config.json", "config.json.orig"):
            with open(os.path.join(b, fn), "w") as f:
                json.dump(c, f, indent=1)
        return b

    def runc_spec(self, name, bundle, prep=False, runtime=None, env=(), fresh=False):
        """fresh: every run is a new container to the hook (its state directory removed
        before, untimed: each start makes one, and sweeps), on a root as the image left it
        (the /etc/nccl.conf an earlier run wrote removed: each start writes one)."""
        cid = f"orhb-{os.getpid()}-{name}"
        self.ids.append(cid)
        opts = [f"@env={e}" for e in env]
        preps = []
        if prep:  # the shim edits config.json: every run starts from the original
            preps.append(f"cp {bundle}/config.json.orig {bundle}/config.json")
        if fresh:
            preps.append(f"rm -rf /run/oci-rdma-hook/{cid} {bundle}/rootfs/etc/nccl.conf")
        if preps:
            opts.append("@prep=" + " && ".join(preps))
        return (name, opts, [runtime or self.runc, "run", "--bundle", bundle, cid])

    def container_hook_argv(self, node, stage="createRuntime"):
        return [self.hook, "oci-rdma-hook", "--sysroot", node, "--config",
                self.p("container.conf"), stage]

    def bench_containers(self):
        if not self.runc or not os.path.exists("/bin/busybox"):
            raise SystemExit("bench: runc and busybox-static are needed (tests/setup-debian.sh)")
        self.scale_dev = self.mknode("scale.json", self.p("node", "scale-devnodes"), devnodes=True)
        log("2. runc run with the createRuntime hook vs a no-op hook")
        b_noop = self.make_bundle("noop-hook", ["/bin/true", "true"])
        b_hook = self.make_bundle("hook-scale", self.container_hook_argv(self.scale_dev))
        r = self.harness_run([self.runc_spec("noop", b_noop),
                              self.runc_spec("hook", b_hook, fresh=True)],
                             rounds=self.n(300, 30), warmup=3, max_s=self.n(60, 12))
        self.results["start"] = r
        t = r["noop"]
        c, v = r["hook"], r["vs"]["hook"]
        self.sections.append(
            f"### 2. `runc run` (busybox `/bin/true`) with the createRuntime hook vs a no-op hook "
            f"({int(t['rounds'])} rounds)\n\n"
            + md_table(["createRuntime hook", "wall ms (p10–p90)", "CPU ms (p10–p90)",
                        "wall ratio (95% CI)", "CPU ratio (95% CI)", "wall ratio p10–p90",
                        "added ms, wall / CPU"],
                       [("no-op hook (`/bin/true`)", fmt_ms(t), fmt_ms(t, "cpu_"), "1", "1", "", ""),
                        ("`oci-rdma-hook createRuntime`, scale node", fmt_ms(c), fmt_ms(c, "cpu_"),
                         ratio_ci(v, 3), ratio_ci(v, 3, "cpu_"),
                         f"{v['ratio_p10']:.3f}–{v['ratio_p90']:.3f}",
                         f"{v['diff_us'] / 1000:.1f} / {v['cpu_diff_us'] / 1000:.1f}")])
            + "\n\nCPU time is that of `runc run` and every process it waited for (runc init, "
              "the hook, the container).")
        log("3. runc run through the runtime shim vs plain runc")
        shim = self.shim = self.p("bin", "oci-rdma-runtime")
        os.makedirs(os.path.dirname(shim))
        os.symlink(self.hook, shim)
        b_plain = self.make_bundle("plain")
        b_shim = self.make_bundle("shim")
        env = (f"OCI_RDMA_HOOK_CONFIG={self.p('container.conf')}",
               f"OCI_RDMA_HOOK_SYSROOT={self.scale_dev}")
        self.shim_env = dict(os.environ, **dict(e.split("=", 1) for e in env))
        r = self.harness_run([self.runc_spec("runc", b_plain, prep=True),
                              self.runc_spec("shim", b_shim, prep=True, runtime=shim, env=env,
                                             fresh=True)],
                             rounds=self.n(200, 20), warmup=3, max_s=self.n(45, 10))
        self.results["shim"] = r
        t, c, v = r["runc"], r["shim"], r["vs"]["shim"]
        self.sections.append(
            f"### 3. `runc run` through the runtime shim vs plain `runc run` "
            f"({int(t['rounds'])} rounds, scale node)\n\n"
            + md_table(["runtime", "wall ms (p10–p90)", "CPU ms (p10–p90)", "wall ratio (95% CI)",
                        "CPU ratio (95% CI)", "wall ratio p10–p90", "added ms, wall / CPU"],
                       [("`runc run`", fmt_ms(t), fmt_ms(t, "cpu_"), "1", "1", "", ""),
                        ("`oci-rdma-runtime run` (edits config.json, execs runc)", fmt_ms(c),
                         fmt_ms(c, "cpu_"), ratio_ci(v, 3), ratio_ci(v, 3, "cpu_"),
                         f"{v['ratio_p10']:.3f}–{v['ratio_p90']:.3f}",
                         f"{v['diff_us'] / 1000:.1f} / {v['cpu_diff_us'] / 1000:.1f}")])
            + "\n\nThe shim reads the node and plans, parses, edits and rewrites config.json "
              "atomically. The container gets a new network namespace that no hook sets up, "
              "so the shim knows its network: it writes /etc/nccl.conf into the bundle's "
              "root itself and its record, and the edit registers no nccl-conf stage (where "
              "it cannot know the network, the stage decides from the shim's `node.json`). "
              "Part 3d shows each step's time.")
        # peak RSS of the live hook: the harness wraps it and logs wait4's ru_maxrss
        rsslog = self.p("createRuntime.rss")
        b_rss = self.make_bundle("hook-rss", [self.harness, "harness", "--rss-log", rsslog]
                                 + [self.hook, "--sysroot", self.scale_dev, "--config",
                                    self.p("container.conf"), "createRuntime"])
        self.harness_run([self.runc_spec("rss", b_rss)], rounds=self.n(15, 5), warmup=0,
                         min_rounds=1)
        with open(rsslog) as f:
            runs = [line.split() for line in f if line.strip()]
        self.rss_createruntime = max(int(run[0]) for run in runs)
        walls = sorted(float(run[1]) for run in runs)
        self.hook_wall = (walls[len(walls) // 2] / 1000, walls[0] / 1000, walls[-1] / 1000, len(walls))
        self.sections[-2] += (
            f"\n\nThe createRuntime hook's own wall time inside `runc run` (scale node, "
            f"timed by a wrapper in separate runs): median {self.hook_wall[0]:.2f} ms "
            f"(min {self.hook_wall[1]:.2f}, max {self.hook_wall[2]:.2f}, {self.hook_wall[3]} runs).")

    def bench_sync(self):
        """What the shim's durable rewrite of config.json costs where the bundle lives."""
        log("3b. fsync of a rewritten file: the bundles' tmpfs vs a disk directory")
        n = self.n(2000, 300)
        rows = []
        disk = tempfile.mkdtemp(prefix="orh-bench.", dir="/var/tmp")
        try:
            for d in (self.p("bundles"), disk):
                fstype = subprocess.run(["stat", "-f", "-c", "%T", d], capture_output=True,
                                        text=True).stdout.strip()
                fd = os.open(os.path.join(d, "sync-probe"), os.O_CREAT | os.O_WRONLY, 0o600)
                dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
                us = {}
                for name, extra in (("write", lambda: None),
                                    ("write + fsync file + fsync dir",
                                     lambda: (os.fsync(fd), os.fsync(dfd))),
                                    ("write + fstatfs", lambda: os.fstatvfs(dfd))):
                    t = time.perf_counter()
                    for _ in range(n):
                        os.pwrite(fd, b"x" * 4096, 0)
                        extra()
                    us[name] = (time.perf_counter() - t) / n * 1e6
                os.close(fd)
                os.close(dfd)
                rows.append((f"`{'/var/tmp' if d == disk else 'bundles/'}` ({fstype})",)
                            + tuple(f"{v:.1f}" for v in us.values()))
        finally:
            shutil.rmtree(disk, ignore_errors=True)
        self.sections.append(
            f"### 3b. The durable rewrite of config.json where the bundle lives "
            f"({n} rewrites of 4 KiB each)\n\n"
            + md_table(["directory", "write µs", "write + 2 fsync µs", "write + fstatfs µs"],
                       rows)
            + "\n\nThe shim rewrites config.json with a file fsync and a directory fsync "
              "(`orh_write_atomic`). The bench's bundles live on tmpfs, as docker's and "
              "containerd's do under /run; there the two syncs cost what a file system check "
              "before them (`fstatfs`) would, so the shim syncs on every file system and "
              "skips no fsync on tmpfs.")

    # ------------------------------------------------------------------ 4: RSS
    def bench_rss(self):
        env_rss = self.results["env"]["scale"]["rss_kb"]
        true_rss = self.results["env"]["true"]["rss_kb"]
        time_rss = None
        if os.path.exists("/usr/bin/time"):
            out = subprocess.run(["/usr/bin/time", "-v"] + self.hook_argv(self.nodes["scale"], "env"),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
            time_rss = int(m.group(1)) if m else None
        rows = [("`/bin/true`", "wait4 ru_maxrss", f"{true_rss:.0f}"),
                ("`env`, scale node", "wait4 ru_maxrss, max of all runs", f"{env_rss:.0f}")]
        if time_rss:
            rows.append(("`env`, scale node", "`/usr/bin/time -v`", f"{time_rss}"))
        rows.append(("`createRuntime` in `runc run`, scale node",
                     "wait4 ru_maxrss (harness --rss-log wrapper)", f"{self.rss_createruntime}"))
        self.sections.append("### 4. Peak memory (RSS)\n\n"
                             + md_table(["process", "measured with", "peak RSS KiB"], rows)
                             + "\n\nA child's ru_maxrss also counts the pages of the process "
                               "that forked it, up to its exec, so about 1.1 MiB is a floor "
                               "here (the harness, or `time`).")
        peak = max(env_rss, self.rss_createruntime, time_rss or 0)
        self.budgets.append(("peak RSS of the hook on the scale node (env, createRuntime)",
                             f"{peak / 1024:.2f} MiB", f"<= {BUDGET_RSS_KIB / 1024:g} MiB",
                             peak <= BUDGET_RSS_KIB))

    # ------------------------------------------------------------------ 5: growth
    def bench_growth(self):
        log("5. growth: HCAs, GID table length, used entries")
        blocks = []
        titles = {"hcas": "HCAs (dual-port, 256-entry tables, 50 used entries a port)",
                  "gids": "GID table length (16 HCAs, 6 used entries a port: 2 link-local + 2 IPv4 x v1/v2)",
                  "used": "used vs empty entries (16 HCAs, 256-entry tables)"}
        self.opens = {}
        for group in ("hcas", "gids", "used"):
            specs = [("true", [], ["/bin/true"])]
            for i, (label, scale) in enumerate(self.growth[group]):
                specs.append((f"{group}{i}", [], self.hook_argv(self.growth_nodes[scale], "env")))
            r = self.harness_run(specs, rounds=self.n(200, 40), warmup=5, max_s=self.n(20, 6))
            self.results["growth-" + group] = r
            rows = []
            first = None
            for i, (label, scale) in enumerate(self.growth[group]):
                key = f"{group}{i}"
                c, v = r[key], r["vs"][key]
                if scale not in self.opens:
                    self.opens[scale] = self.sysfs_opens(self.growth_nodes[scale])
                opens = self.opens[scale]
                rel = c["median_us"] / first["median_us"] if first else 1.0
                first = first or c
                rows.append((label, fmt_ms(c), f"{v['diff_us'] / 1000:.2f}",
                             f"{v['cpu_diff_us'] / 1000:.2f}", f"{v['ratio']:.2f}",
                             f"{v['cpu_ratio']:.2f}", "n/a" if opens is None else str(opens)))
            blocks.append(f"**{titles[group]}** ({int(r['true']['rounds'])} rounds)\n\n" + md_table(
                ["node", "wall ms (p10–p90)", "own work ms, wall", "own work ms, CPU",
                 "wall vs `/bin/true`", "CPU vs `/bin/true`", "sysfs opens"], rows))
        self.sections.append("### 5. How the hook's cost grows (`env`)\n\n" + "\n\n".join(blocks)
                             + "\n\n\"own work\" is the median, over rounds, of the hook's time "
                               "minus `/bin/true`'s in the same round, in wall and in CPU time. "
                               "\"sysfs opens\" counts the files and directories it opens under "
                               "the sysroot (strace).")
        # budget: 256 entries vs 16, same used entries: a direct side-by-side run
        n16 = self.growth_nodes["gid_tbl_len=16,addrs_per_port=2"]
        n256 = self.growth_nodes["gid_tbl_len=256,addrs_per_port=2"]
        r = self.harness_run([("gid16", [], self.hook_argv(n16, "env")),
                              ("gid256", [], self.hook_argv(n256, "env"))],
                             rounds=self.n(150, 40), warmup=5, max_s=self.n(20, 6))
        v = r["vs"]["gid256"]
        o16 = self.opens["gid_tbl_len=16,addrs_per_port=2"]
        o256 = self.opens["gid_tbl_len=256,addrs_per_port=2"]
        same_opens = o16 is None or o16 == o256
        ok = worst(v) <= BUDGET_GROWTH_RATIO and same_opens
        opens_txt = "" if o16 is None else f", sysfs opens {o256} vs {o16}"
        self.budgets.append(("hook on 256-entry GID tables vs 16-entry, same used entries",
                             f"wall {ratio_ci(v, 2)}, CPU {ratio_ci(v, 2, 'cpu_')}{opens_txt}",
                             f"<= {BUDGET_GROWTH_RATIO:.2f}x, same opens", ok))

    # ------------------------------------------------------------------ 5b: worst case
    def bench_worst(self):
        """No port holds a GID of the wanted kind: every entry of every table is read. Its
        bound (the tables' length) and its cost against the bare loop reading the same files."""
        log("5b. the worst case: no GID of the wanted kind, every entry read")
        key, ref_key = "addrs_per_port=0", "gid_tbl_len=256,addrs_per_port=2"
        node = self.growth_nodes[key]
        with open(os.path.join(NODES, "scale.json")) as f:
            sc = json.load(f)["scale"]
        ports, tbl = sc["hcas"] * sc["ports"], sc["gid_tbl_len"]
        files = envfloor.files_read(self, node)
        lst = envfloor.write_list(self, "worst-files.txt", files)
        r = self.harness_run([("readfiles", [], [self.readfiles, lst]),
                              ("env", [], self.hook_argv(node, "env"))],
                             rounds=self.n(60, 15), warmup=2, max_s=self.n(40, 12))
        f_, e, v = r["readfiles"], r["env"], r["vs"]["env"]
        opens, ref = self.opens[key], self.opens[ref_key]
        bound = ref + ports * tbl
        # what one more entry costs: the node above against the one with the same ports
        # whose tables hold 6 used entries (part 5, same rounds)
        g = self.results["growth-used"]
        extra_us = (g["used0"]["median_us"] - g["used1"]["median_us"]) / max(1, opens - ref)
        rows = [(f"`readfiles`: the {len(files)} files `env` reads there", fmt_ms(f_),
                 fmt_ms(f_, "cpu_"), "1", "1"),
                ("`env`", fmt_ms(e), fmt_ms(e, "cpu_"), ratio_ci(v, 2), ratio_ci(v, 2, "cpu_"))]
        self.sections.append(
            f"### 5b. The worst case: no GID of the wanted kind ({int(r['readfiles']['rounds'])} "
            f"rounds)\n\n"
            f"The scale node with no IPv4 address on any port ({ports} ACTIVE RoCE ports, "
            f"{tbl}-entry tables holding only their 2 link-local entries): `env` reads every "
            f"entry of every table, {opens} sysfs opens against {ref} when the tables hold "
            f"the wanted entries; at most {ref} + {ports} × {tbl} = {bound}, one open an "
            f"entry. It takes {e['median_us'] / 1000:.1f} ms a container start here, "
            f"{extra_us:.1f} µs an entry (part 5, \"used vs empty entries\").\n\n"
            + md_table(["command", "wall ms (p10–p90)", "CPU ms (p10–p90)",
                        "wall vs `readfiles` (95% CI)", "CPU vs `readfiles` (95% CI)"], rows)
            + ("\n\nThe opens count directories and the probes for a port past the last "
               "too. Where `env` takes less than the bare loop, it is because it closes its "
               "files in batches, one `close_range` for up to 64 of them, where the loop "
               "makes a `close` each." if worst(v) < 1 else "")
            + "\n\n**Why nothing sound stops the scan earlier.** The plan must know, of every "
              "ACTIVE RoCE port in `NCCL_IB_HCA`'s window, that its table holds no entry of "
              "the wanted kind, and only reading every entry tells that. In the kernel "
              "(drivers/infiniband/core):\n\n"
              "- `cache.c` gives a new GID the lowest free index past the default GIDs' "
              "reserved ones (`find_gid()` looking for an empty slot) and empties an entry's "
              "slot when its address goes (`del_gid()`, the slot freed when its last user lets "
              "go). A table fills from the bottom, but deletions leave holes anywhere: give "
              "a VLAN or macvlan of the port an address after the port's own, then remove "
              "the port's own, and the only wanted entry sits after unused ones. No run of "
              "unused entries, however long, ends the table; its length does.\n"
              "- `roce_gid_mgmt.c` adds the entries of the IP addresses of the port's net "
              "device and of its upper devices (VLANs, macvlans, a bond), found in every "
              "network namespace (`for_each_net()`). A pod's macvlan on the port adds an entry "
              "for an address that the host's namespace, where the hook runs, does not hold, "
              "and sysfs links no upper device in another namespace: no list of addresses "
              "the hook can read says which entries exist.\n"
              "- `sysfs.c` keeps `gids/N` for every N below `gid_tbl_len`; an unused entry reads "
              "as the zero GID, and its `gid_attrs/types/N` and `gid_attrs/ndevs/N` fail with "
              "EINVAL. No attribute gives the number of used entries or the highest one.\n\n"
              "So the worst case is bounded by the tables' length instead: each entry is read "
              "at most once, one open and one read, and an unused one costs no type or net "
              "device read. `tests/test_discover.c` (`wanted_entries_past_unused_ones_are_found`) "
              "puts the wanted entries after 198 unused ones, and at a table's last index, and "
              "checks that the search finds them, with the plan of the full scan.")
        ok = worst(v) <= BUDGET_WORST_RATIO and opens <= bound
        self.budgets.append((f"worst case, no GID of the wanted kind ({ports} ports x {tbl} "
                             f"entries): opens, and vs the bare loop reading the same files",
                             f"{opens} opens (bound {bound}); wall {ratio_ci(v, 2)}, "
                             f"CPU {ratio_ci(v, 2, 'cpu_')}; {e['median_us'] / 1000:.1f} ms",
                             f"<= {ref} + {ports} x {tbl} opens, <= {BUDGET_WORST_RATIO:g}x", ok))

    # ------------------------------------------------------------------ 6: shell
    def bench_shell(self):
        log("6. the shell baseline on the scale node (tens of seconds a run)")
        node = self.nodes["scale"]
        shell = ["/bin/bash", os.path.join(HERE, "shell-hook.sh"), node]
        a = subprocess.run(shell, stdout=subprocess.PIPE, text=True, check=True).stdout
        b = subprocess.run(self.hook_argv(node, "env"), stdout=subprocess.PIPE, text=True,
                           check=True).stdout
        same = a == b
        rounds = self.n(3, 1)
        r = self.harness_run([("hook", ["@x=20"], self.hook_argv(node, "env")),
                              ("shell", [], shell)], rounds=rounds, warmup=0,
                             min_rounds=min(rounds, 2), max_s=60)
        h, s, v = r["hook"], r["shell"], r["vs"]["shell"]
        self.sections.append(
            f"### 6. The shell way (`bench/shell-hook.sh`: `cat` + show_gids-style GID pick) "
            f"vs the hook, scale node ({plural(int(h['rounds']), 'round')}, 20 hook runs a round)\n\n"
            + md_table(["command", "median ms (p10–p90)", "ratio to the hook", "ratio p10–p90"],
                       [("`oci-rdma-hook env`", fmt_ms(h), "1", ""),
                        ("`bash bench/shell-hook.sh`", fmt_ms(s), f"{v['ratio']:.0f}",
                         f"{v['ratio_p10']:.0f}–{v['ratio_p90']:.0f}")])
            + f"\n\nSame output as the hook: {'yes' if same else 'NO'}.")
        self.budgets.append(("hook vs the shell baseline, scale node", f"{v['ratio']:.0f}x faster",
                             f">= {BUDGET_SHELL_SPEEDUP:g}x", v["ratio"] >= BUDGET_SHELL_SPEEDUP))

    # ------------------------------------------------------------------ report
    def report(self, started, elapsed):
        cpu = ""
        try:
            with open("/proc/cpuinfo") as f:
                m = re.search(r"model name\s*:\s*(.*)", f.read())
                cpu = m.group(1).strip() if m else ""
        except OSError:
            pass
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        cmd = "bash bench/run.sh" + (" --quick" if self.quick else "")
        head = [
            "# Performance",
            "",
            f"Output of `{cmd}` (bench/README.md says what each part measures).",
            "",
            f"- date: {started.strftime('%Y-%m-%d %H:%M:%S %Z').strip()}",
            f"- machine: {os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}, "
            f"load average at the start {self.load_start}, at the end {load}",
            f"- hook: {os.path.relpath(self.hook, REPO)} (meson buildtype=release, "
            f"{linking(self.hook)}), git {git_rev()}",
            f"- took {elapsed:.0f} s",
            "",
            "Medians and p10–p90 over rounds; every ratio is taken within a round (the command "
            "and its baseline run back to back, in turn) and its median over rounds is shown, "
            "with a 95% confidence interval of that median. Wall time is clock_gettime around "
            "fork → wait4; CPU time (user + system, from wait4's rusage) leaves out waits for a "
            "CPU, which on a loaded machine lengthen short commands and their baselines alike "
            "and pull wall-time ratios towards 1. A budget on a ratio must hold for both.",
            *(["", "**--quick**: few rounds; a verdict whose confidence interval straddles its "
               "limit is not reliable. Run without --quick for the record."] if self.quick else []),
            "",
            "## Budgets",
            "",
            md_table(["budget", "measured", "limit", "result"],
                     [(n, m, l, "PASS" if ok else "**FAIL**") for n, m, l, ok in self.budgets]),
            *(["", *self.floor_notes] if self.floor_notes else []),
            "",
            "## Measurements",
            "",
        ]
        return "\n".join(head) + "\n" + "\n\n".join(self.sections) + "\n"

    def cleanup(self):
        for cid in self.ids:
            subprocess.run([self.runc, "delete", "-f", cid], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log(f"kept {self.work}")


def linking(path):
    """"static" or "dynamic": a static executable has no program interpreter."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 16)
        return "dynamic" if b"ld-linux" in data or b"/lib64/ld" in data else "static"
    except OSError:
        return "?"


def adverb(link):
    return {"static": "statically", "dynamic": "dynamically"}.get(link, link)


def git_rev():
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        return rev + (" + uncommitted changes" if dirty else "")
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hook", required=True)
    ap.add_argument("--harness", required=True)
    ap.add_argument("--readfiles", help="bench/readfiles.c, built static: the floor of part 1")
    ap.add_argument("--execwrap", help="bench/execwrap.c, built static: the floor of part 3c")
    ap.add_argument("--filtercost", help="bench/filtercost.c: the seccomp filter's cost (1c)")
    ap.add_argument("--noop", help="bench/execwrap.c built with EXECWRAP_NOOP: a runtime "
                    "that does nothing (part 3g)")
    ap.add_argument("--nri-floor", help="bench/nri_floor.c, built: the floor plugin of part 7c")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--output", default=os.path.join(REPO, "docs", "PERFORMANCE.md"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench: run as root (runc needs it)")
    run_note = fleet.private_run(sys.argv)
    if not shutil.which("strace") or not args.readfiles or not args.execwrap or not args.noop:
        log("strace and bench/readfiles are needed (the floor and the worst case read the "
            "files env reads): run through bench/run.sh on a machine set up by "
            "tests/setup-debian.sh")
        return 2
    started = datetime.datetime.now().astimezone()
    t0 = time.time()
    b = Bench(args)
    b.load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if run_note:
        b.floor_notes.append(run_note)
    try:
        b.setup()
        b.bench_env()
        envfloor.filter_cost(b)
        b.bench_containers()
        b.bench_sync()
        fleet.floor(b)
        floorpaths.path_floors(b)
        imageread.hostile(b)
        fleet.steps(b)
        fleet.sweep(b)
        b.bench_rss()
        b.bench_growth()
        b.bench_worst()
        b.bench_shell()
        fleet.cri(b)
        fleet.nri(b)
        fleet.nri_floor(b)
    finally:
        b.cleanup()
    text = b.report(started, time.time() - t0)
    print(text)
    with open(args.output, "w") as f:
        f.write(text)
    log(f"wrote {os.path.relpath(args.output, REPO)}")
    failed = [n for n, _, _, ok in b.budgets if not ok]
    if failed:
        log(f"{len(failed)} of {len(b.budgets)} budgets FAIL")
        return 1
    log(f"all {len(b.budgets)} budgets pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
