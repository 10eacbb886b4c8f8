# SPDX-License-Identifier: Apache-2.0
"""3g. Each container path against its floor, within rounds (bench.py calls it after part
3c): the live hook and the runtime shim each beside a program that does the least their
work needs and nothing else (bench/readfiles.c --hook and --shim), in the same rounds, on
the scale node. These are the budgets of the container paths."""

import math
import os
import shutil
import statistics
import subprocess

import envfloor
from report import md_table

BUDGET_HOOK_FLOOR = 1.25  # the live hook's own process vs the floor hook's
BUDGET_SHIM_FLOOR = 1.25  # the shim's own process vs the floor shim's


def median_ci(xs):
    """The median of xs and its 95% confidence interval (order statistics)."""
    xs = sorted(xs)
    n = len(xs)
    half = 0.98 * math.sqrt(n)
    lo = xs[max(0, int(math.floor(n / 2 - half)))]
    hi = xs[min(n - 1, int(math.ceil(n / 2 + half)))]
    return statistics.median(xs), lo, hi


def read_log(path):
    """The wrapper's lines (harness --rss-log): [(rss_kb, wall_us, cpu_us)]."""
    with open(path) as f:
        return [tuple(float(x) for x in line.split()) for line in f if line.strip()]


def device_lines(node):
    """The device nodes the plan gives on the node (every uverbs node and rdma_cm), as the
    floor's "M" lines."""
    d = os.path.join(node, "dev", "infiniband")
    out = []
    for name in sorted(os.listdir(d)):
        if name.startswith("uverbs") or name == "rdma_cm":
            st = os.stat(os.path.join(d, name))
            out.append(("M", "-", f"{name} {os.major(st.st_rdev)} {os.minor(st.st_rdev)}"))
    return out


def fmt3(m, lo, hi, digits=2):
    return f"{m:.{digits}f}x ({lo:.{digits}f}–{hi:.{digits}f})"


def live_hook(b, calls, conf_bytes):
    """The live hook's own process against the floor hook's, each wrapped by the harness
    (its wall and CPU time, rusage), in the same `runc run` rounds with a wrapped no-op."""
    lst = envfloor.write_list(b, "floor-hook.txt",
                              calls + device_lines(b.scale_dev) + [("N", "-", str(conf_bytes))])
    logs = {k: b.p(f"path-{k}.log") for k in ("noop", "floor", "hook")}
    wrap = [b.harness, "harness", "--rss-log"]
    bundles = {
        "noop": b.make_bundle("w-noop", wrap + [logs["noop"], "/bin/true"]),
        "floor": b.make_bundle("w-floor", wrap + [logs["floor"], b.args.readfiles, "--hook", lst]),
        "hook": b.make_bundle("w-hook", wrap + [logs["hook"]] + b.container_hook_argv(b.scale_dev)[:1]
                              + b.container_hook_argv(b.scale_dev)[2:]),
    }
    r = b.harness_run([b.runc_spec("noop", bundles["noop"]),
                       b.runc_spec("floor", bundles["floor"], fresh=True),
                       b.runc_spec("hook", bundles["hook"], fresh=True)],
                      rounds=b.n(300, 30), warmup=3, max_s=b.n(90, 15))
    runs = {k: read_log(p) for k, p in logs.items()}
    n = min(len(v) for v in runs.values())
    res = {}
    for kind, col in (("wall", 1), ("cpu", 2)):
        ratios = [h[col] / f[col] for h, f in zip(runs["hook"][:n], runs["floor"][:n]) if f[col] > 0]
        res[kind] = median_ci(ratios)
        for k in runs:
            res[f"{k}_{kind}_ms"] = statistics.median(x[col] for x in runs[k][:n]) / 1000
    res["rounds"] = n
    res["whole"] = r
    return res


def shim(b, calls):
    """The shim against the floor shim, each executing a runtime that does nothing, in the
    same rounds (harness pairs)."""
    noop_rt = b.args.noop
    b_shim = b.make_bundle("alone-shim")
    b_floor = b.make_bundle("alone-floor")
    cid_s, cid_f = f"orhb-{os.getpid()}-alone-shim", f"orhb-{os.getpid()}-alone-floor"
    b.ids += [cid_s, cid_f]
    shim_argv = [b.shim, "--orh-runtime=" + noop_rt, "run", "--bundle"]
    # the shim's own edit of this bundle, once: the text the floor writes
    subprocess.run(shim_argv + [b_shim, cid_s], env=b.shim_env, check=True,
                   stdout=subprocess.DEVNULL)
    edited = b.p("alone-shim.edited.json")
    shutil.copy(os.path.join(b_shim, "config.json"), edited)
    conf = os.path.join(b_shim, "rootfs", "etc", "nccl.conf")
    conf_bytes = os.path.getsize(conf) if os.path.exists(conf) else 0
    lst = envfloor.write_list(b, "floor-shim.txt", calls + [("N", "-", str(conf_bytes))])
    env = [f"@env={k}={b.shim_env[k]}" for k in ("OCI_RDMA_HOOK_CONFIG", "OCI_RDMA_HOOK_SYSROOT")]

    def prep(bundle, cid):
        return (f"@prep=cp {bundle}/config.json.orig {bundle}/config.json && rm -rf "
                f"/run/oci-rdma-hook/{cid} {bundle}/rootfs/etc/nccl.conf")

    r = b.harness_run([("floor", [prep(b_floor, cid_f)],
                        [b.args.readfiles, "--shim", edited, lst, noop_rt, "run", "--bundle",
                         b_floor, cid_f]),
                       ("shim", env + [prep(b_shim, cid_s)], shim_argv + [b_shim, cid_s])],
                      rounds=b.n(300, 30), warmup=3, max_s=b.n(60, 10))
    return r, conf_bytes


def path_floors(b):
    calls = envfloor.calls_made(b, b.scale_dev)
    conf = b.p("bundles", "hook-scale", "rootfs", "etc", "nccl.conf")
    conf_bytes = os.path.getsize(conf) if os.path.exists(conf) else 0
    live = live_hook(b, calls, conf_bytes)
    s, shim_conf = shim(b, calls)
    # runc's work for the edit (part 3c, other rounds: a difference of about 1 ms between
    # runs of 25 to 35 ms, which moves between runs) is the same on both sides: shown, not
    # judged
    edit_ms = max(0.0, b.floor["edit_cpu_us"] / 1000)
    edit_wall = max(0.0, b.floor["edit_us"] / 1000)
    sv = s["vs"]["shim"]
    s_ms, f_ms = s["shim"]["cpu_median_us"] / 1000, s["floor"]["cpu_median_us"] / 1000
    s_wall, f_wall = s["shim"]["median_us"] / 1000, s["floor"]["median_us"] / 1000
    shim_total = (s_ms + edit_ms) / (f_ms + edit_ms)
    shim_total_wall = (s_wall + edit_wall) / (f_wall + edit_wall)
    lw, lc = live["wall"], live["cpu"]
    rows = [
        ("live hook: `oci-rdma-hook createRuntime`, its own process (wrapped, inside `runc run`)",
         f"{live['hook_wall_ms']:.2f}", f"{live['hook_cpu_ms']:.2f}", "", ""),
        ("its floor: `readfiles --hook` (the state and spec read and parsed, confinement, the "
         "process and its root, its network, every call `env` makes, the device nodes, their "
         "cgroup rules where mountinfo says the hierarchy is, memlock, /etc/nccl.conf)",
         f"{live['floor_wall_ms']:.2f}", f"{live['floor_cpu_ms']:.2f}",
         fmt3(*lw), fmt3(*lc)),
        ("a no-op hook (`/bin/true`), wrapped alike", f"{live['noop_wall_ms']:.2f}",
         f"{live['noop_cpu_ms']:.2f}", "", ""),
        ("the shim alone: `oci-rdma-runtime run`, executing a runtime that does nothing",
         f"{s_wall:.2f}", f"{s_ms:.2f}", "", ""),
        ("its floor: `readfiles --shim` (config.json read and parsed, every call `env` makes, "
         "the shim's config.json written as the shim writes it, /etc/nccl.conf, the runtime "
         "executed)",
         f"{f_wall:.2f}", f"{f_ms:.2f}",
         f"{sv['ratio']:.2f}x ({sv['ratio_ci_lo']:.2f}–{sv['ratio_ci_hi']:.2f})",
         f"{sv['cpu_ratio']:.2f}x ({sv['cpu_ratio_ci_lo']:.2f}–{sv['cpu_ratio_ci_hi']:.2f})"),
        ("the same with runc's work for the edit (part 3c) added to both sides",
         f"+{edit_wall:.2f}", f"+{edit_ms:.2f}", f"{shim_total_wall:.2f}x",
         f"{shim_total:.2f}x"),
    ]
    b.sections.append(
        f"### 3g. Each container path against its floor, within rounds ({live['rounds']} and "
        f"{int(s['shim']['rounds'])} rounds, scale node)\n\n"
        + md_table(["what", "wall ms (median)", "CPU ms (median)", "path vs floor, wall (95% CI)",
                    "path vs floor, CPU (95% CI)"], rows)
        + "\n\nThe live hook and its floor run as createRuntime hooks of `runc run`, each "
          "wrapped by `harness --rss-log`, which times that process alone (its wall time, "
          "its user and system time with its children's); the three bundles take turns in "
          "every round, and the ratio is the median over rounds of the hook's time over the "
          "floor's in the same round. The shim and its floor each execute a static program "
          "that does nothing in place of runc, and take turns as well. runc's own work for "
          "the edit (the device nodes, their cgroup rules, the memlock limit: part 3c, "
          "measured against plain `runc run` in other rounds) is the same for both; the last "
          "row adds it to both, and the budget leaves it out. The floors are "
          "`bench/readfiles.c`: the least each path's work needs, made by a bare static "
          "program that parses the state and the spec with jansson, as the hook does, and "
          f"makes every other call itself ({len(calls)} calls `env` makes on the scale node; "
          f"/etc/nccl.conf of {conf_bytes} and {shim_conf} bytes).")
    hook_ok = max(lw[0], lc[0]) <= BUDGET_HOOK_FLOOR
    shim_ok = max(sv["ratio"], sv["cpu_ratio"]) <= BUDGET_SHIM_FLOOR
    b.budgets.append(("the live hook vs its floor (part 3g, its own process, within rounds)",
                      f"wall {fmt3(*lw)}, CPU {fmt3(*lc)}", f"<= {BUDGET_HOOK_FLOOR:g}x",
                      hook_ok))
    b.budgets.append(("the runtime shim vs its floor (part 3g, its own process, within rounds)",
                      f"wall {sv['ratio']:.2f}x ({sv['ratio_ci_lo']:.2f}–{sv['ratio_ci_hi']:.2f}), "
                      f"CPU {sv['cpu_ratio']:.2f}x ({sv['cpu_ratio_ci_lo']:.2f}–"
                      f"{sv['cpu_ratio_ci_hi']:.2f}); with runc's work for the edit on both "
                      f"sides CPU {shim_total:.2f}x", f"<= {BUDGET_SHIM_FLOOR:g}x", shim_ok))
    b.path_floor = {"hook_cpu": live["hook_cpu_ms"], "floor_cpu": live["floor_cpu_ms"],
                    "shim_cpu": s_ms, "shim_floor_cpu": f_ms, "edit_cpu": edit_ms,
                    "hook_ratio": lc[0], "shim_ratio": shim_total}
    b.floor_notes.append(
        f"The container paths' floors this run (part 3g, CPU): the floor hook "
        f"{live['floor_cpu_ms']:.2f} ms, the floor shim {f_ms:.2f} ms, runc's work for the "
        f"edit {edit_ms:.2f} ms.")
