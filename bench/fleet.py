# SPDX-License-Identifier: Apache-2.0
"""The fleet path's parts of the benchmark (bench.py calls them): the state directories on
tmpfs as on a real node (private_run), the floor under the container paths (3c), the time
per step of the live hook and of the shim path (3d), and a pod start through containerd's
CRI (7, bench/cri_bench.py)."""

import json
import os
import shutil
import statistics
import subprocess
import sys

from report import fmt_ms, md_table

HERE = os.path.dirname(os.path.abspath(__file__))
BUDGET_CRI_CPU = 1.03   # a pod start through the handler vs the plain runc handler: CPU
BUDGET_CRI_WALL = 1.05  # and wall time (medians)
CRI_LIMIT = (f"CPU <= +{(BUDGET_CRI_CPU - 1) * 100:.0f}%, wall <= "
             f"+{(BUDGET_CRI_WALL - 1) * 100:.0f}%")
RUN_DIRS = ("/run/oci-rdma-hook", "/run/runc")
STATE = "/run/oci-rdma-hook"


def private_run(argv):
    """On a real node /run is a tmpfs, where runc keeps its state and the hook its state
    directories. Where this machine's is not, re-run the bench in a mount namespace of its
    own with a tmpfs on each of those two (nothing else of /run is hidden, and nothing of it
    is seen outside). Returns the note for the report."""
    if os.environ.get("ORH_BENCH_PRIVATE_RUN") == "1":
        for d in RUN_DIRS:
            os.makedirs(d, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", d], check=True)
        return (f"This machine's /run is not a tmpfs: the bench ran in a mount namespace of "
                f"its own with a tmpfs on {' and '.join(RUN_DIRS)}, as on a real node.")
    if fs_type("/run") == "tmpfs" or not shutil.which("unshare"):
        return ""
    env = dict(os.environ, ORH_BENCH_PRIVATE_RUN="1")
    os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", sys.executable] + argv,
               env)


def fs_type(path):
    out = subprocess.run(["stat", "-f", "-c", "%T", path], stdout=subprocess.PIPE, text=True)
    return out.stdout.strip()


def ms(us):
    return f"{us / 1000:.2f}"


def floor(b):
    """3c. What any hook and any shim costs here, whatever it does."""
    b_plain = b.p("bundles", "plain")
    b_noop = b.p("bundles", "noop-hook")
    wrapped = ("wrapped", [], [b.args.execwrap, b.runc, "run", "--bundle", b_plain,
                               f"orhb-{os.getpid()}-wrapped"])
    b.ids.append(wrapped[2][-1])
    b_edited = edited_bundle(b)
    r = b.harness_run([b.runc_spec("runc", b_plain), b.runc_spec("noop", b_noop), wrapped,
                       b.runc_spec("edited", b_edited)],
                      # a difference of about 1 ms between runs of 22 to 35 ms: with 120
                      # rounds its median moved by more than half of itself between runs
                      rounds=b.n(400, 20), warmup=3, max_s=b.n(90, 10))
    # a command the shim passes through, executing a runtime that does nothing: by the fast
    # path (its runtime cache is written by the warm-up runs), and with the runtime on the
    # command line as docker registers it, which the fast path leaves to the ordinary path
    conf = b.p("passthrough.conf")
    with open(conf, "w") as f:
        f.write(f"[containers]\nruntime = {b.args.noop}\n")
    cid = f"orhb-{os.getpid()}-passthrough"
    p = b.harness_run([("true", [], ["/bin/true"]), ("static", [], [b.args.execwrap]),
                       ("version", [], [b.hook, "--version"]),
                       ("fast", [f"@env=OCI_RDMA_HOOK_CONFIG={conf}"], [b.shim, "start", cid]),
                       ("ordinary", [f"@env=OCI_RDMA_HOOK_CONFIG={conf}", "@vs=fast"],
                        [b.shim, "--orh-runtime=" + b.args.noop, "start", cid]),
                       ("noop", [], [b.args.noop])],
                      rounds=b.n(300, 30), warmup=3, max_s=b.n(30, 5))
    pt = p["pairs"][("ordinary", "fast")]
    base = r["runc"]
    hook_cost = r["vs"]["noop"]
    shim_cost = r["vs"]["wrapped"]
    edit_cost = r["vs"]["edited"]
    b.floor = {"hook_us": hook_cost["diff_us"], "hook_cpu_us": hook_cost["cpu_diff_us"],
               "exec_us": shim_cost["diff_us"], "exec_cpu_us": shim_cost["cpu_diff_us"],
               "start_us": p["version"]["median_us"], "start_cpu_us": p["version"]["cpu_median_us"],
               "true_cpu_us": p["true"]["cpu_median_us"], "static_cpu_us": p["static"]["cpu_median_us"],
               "runc_us": base["median_us"], "runc_cpu_us": base["cpu_median_us"],
               "edit_us": edit_cost["diff_us"], "edit_cpu_us": edit_cost["cpu_diff_us"]}
    b.sections.append(
        f"### 3c. The floor under the container paths ({int(base['rounds'])} and "
        f"{int(p['true']['rounds'])} rounds)\n\n"
        + md_table(["what", "wall ms (p10–p90)", "CPU ms (p10–p90)", "over its baseline, ms wall / CPU"],
                   [("`runc run` (busybox `/bin/true`, no hook)", fmt_ms(base), fmt_ms(base, "cpu_"), ""),
                    ("the same with one no-op createRuntime hook (`/bin/true`)", fmt_ms(r["noop"]),
                     fmt_ms(r["noop"], "cpu_"),
                     f"{ms(hook_cost['diff_us'])} / {ms(hook_cost['cpu_diff_us'])}"),
                    ("the same through a static program that only executes runc "
                     "(`bench/execwrap.c`)", fmt_ms(r["wrapped"]), fmt_ms(r["wrapped"], "cpu_"),
                     f"{ms(shim_cost['diff_us'])} / {ms(shim_cost['cpu_diff_us'])}"),
                    ("the same with the config.json the shim wrote, its hook taken out: "
                     "runc making what the edit asks (the plan's device nodes, their cgroup "
                     "rules, the memlock limit)", fmt_ms(r["edited"]), fmt_ms(r["edited"], "cpu_"),
                     f"{ms(edit_cost['diff_us'])} / {ms(edit_cost['cpu_diff_us'])}"),
                    ("`/bin/true` (dynamic)", fmt_ms(p["true"]), fmt_ms(p["true"], "cpu_"), ""),
                    ("a static program that does nothing", fmt_ms(p["static"]),
                     fmt_ms(p["static"], "cpu_"), ""),
                    ("`oci-rdma-hook --version`: the hook's binary started, nothing done",
                     fmt_ms(p["version"]), fmt_ms(p["version"], "cpu_"), ""),
                    ("a static runtime that does nothing (`bench/execwrap.c`, `EXECWRAP_NOOP`)",
                     fmt_ms(p["noop"]), fmt_ms(p["noop"], "cpu_"), ""),
                    ("`oci-rdma-runtime start`, a command the shim passes through, executing "
                     "that runtime: the fast path, before the C library starts (its runtime "
                     "cache written)", fmt_ms(p["fast"]), fmt_ms(p["fast"], "cpu_"), ""),
                    ("the same with the runtime on the command line (docker's `runtimeArgs`), "
                     "which the fast path leaves to the ordinary path",
                     fmt_ms(p["ordinary"]), fmt_ms(p["ordinary"], "cpu_"),
                     f"{ms(pt['diff_us'])} / {ms(pt['cpu_diff_us'])} over the fast path")])
        + "\n\nWhatever it does, a createRuntime hook costs what runc spends running one "
          "(second row), and a shim what one more executed program costs (third row); a shim "
          "that leaves /etc/nccl.conf to a stage has both. The hook's binary starts in the "
          "time of the `--version` row. A command the shim only passes through (`start`, "
          "`state`, `kill`: two of the four runs of the shim in a pod start through the CRI, "
          "part 7) costs what the last two rows show over the runtime alone: the fast path "
          "saves the C library's start, most of it its processor feature probes, each a "
          "trap to the hypervisor on this virtual machine.")


# the steps in the order they run (a record's JSON sorts its keys)
HOOK_STEPS = ("config", "seccomp and capabilities", "state and spec",
              "container and its network", "node and plan", "device nodes", "device cgroup",
              "memlock", "/etc/nccl.conf", "sysfs view", "the node's RDMA userspace", "stage")
SHIM_STEPS = ("config", "config.json read", "node, plan and spec edit", "/etc/nccl.conf",
              "config.json write")


def in_order(known, seen):
    """The names seen: the known ones in their order, then any other."""
    rest = [k for k in dict.fromkeys(seen) if k not in known]
    return [k for k in known if k in seen] + rest


def edited_bundle(b):
    """The shim's bundle with the config.json its edit writes, the hook it adds taken out:
    what runc does for the edit (part 3 left its last edit there)."""
    src = b.p("bundles", "shim")
    d = b.p("bundles", "edited")
    os.makedirs(d)
    with open(os.path.join(src, "config.json")) as f:
        c = json.load(f)
    if not any(d.get("path", "").startswith("/dev/infiniband/")
               for d in c.get("linux", {}).get("devices", [])):
        raise SystemExit("bench: the shim's bundle holds no edit (part 3 must run first)")
    c.pop("hooks", None)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    return d


def records(b, runs, argv, cid, prep, full=False):
    """Run a container `runs` times; the record's time_ms of each run (full: the record)."""
    out = []
    for _ in range(runs):
        subprocess.run(["sh", "-c", prep], check=True)
        subprocess.run(argv + [cid], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=b.shim_env)
        with open(os.path.join(STATE, cid, "record.json")) as f:
            rec = json.load(f)
        out.append(rec if full else rec["time_ms"])
    return out


def med(rows, *path):
    vals = []
    for r in rows:
        for k in path:
            r = r.get(k) if isinstance(r, dict) else None
        if isinstance(r, (int, float)):
            vals.append(r)
    return statistics.median(vals) if vals else None


def fmt(v):
    return "" if v is None else f"{v:.3f}"


def steps(b):
    """3d. Where a container start's time goes, per step, from the records (time_ms)."""
    n = b.n(40, 10)
    hook_b = b.p("bundles", "hook-scale")
    shim_b = b.p("bundles", "shim")
    # each a new container on a root as the image left it (no /etc/nccl.conf of a run before)
    live_recs = records(b, n, [b.runc, "run", "--bundle", hook_b],
                        f"orhb-{os.getpid()}-steps-live",
                        f"rm -rf {STATE}/orhb-{os.getpid()}-steps-live "
                        f"{hook_b}/rootfs/etc/nccl.conf", full=True)
    b.ids += [f"orhb-{os.getpid()}-steps-live", f"orhb-{os.getpid()}-steps-shim"]
    shim_recs = records(b, n, [b.shim, "run", "--bundle", shim_b],
                        f"orhb-{os.getpid()}-steps-shim",
                        f"cp {shim_b}/config.json.orig {shim_b}/config.json && "
                        f"rm -rf {STATE}/orhb-{os.getpid()}-steps-shim "
                        f"{shim_b}/rootfs/etc/nccl.conf", full=True)
    live = [r["time_ms"] for r in live_recs]
    shim = [r["time_ms"] for r in shim_recs]
    # the shim serves the bench's container alone (a new network namespace that no hook
    # sets up): its record is the shim's, with no stage after it
    alone = all("until the record" in r.get("shim", {}) for r in shim)
    names = in_order(HOOK_STEPS, [k for rows in (live, shim) for r in rows
                                  for k in r.get("steps", {})])
    shim_names = in_order(SHIM_STEPS, [k for r in shim
                                       for k in r.get("shim", {}).get("steps", {})])
    f = b.floor
    rows = [("runc: running one more hook (part 3c)", ms(f["hook_cpu_us"]) + " CPU",
             "none" if alone else ms(f["hook_cpu_us"]) + " CPU"),
            ("process start of the hook's binary to its `main` (part 3c, `--version`)",
             ms(f["start_us"]), ms(f["start_us"]) + (" (the shim)" if alone else " (the stage) + "
                                                     + ms(f["start_us"]) + " (the shim)")),
            ("the shim: executing runc after it (part 3c, a program that only does that)",
             "", ms(f["exec_us"]))]
    for k in shim_names:
        rows.append((f"the shim: {k}", "", fmt(med(shim, "shim", "steps", k))))
    until = "until the record" if alone else "until the handoff"
    rows.append((f"the shim: in all, from `main` {'to its record' if alone else 'until it handed the node over'}",
                 "", fmt(med(shim, "shim", until))))
    for k in names:
        rows.append((f"the hook: {k}", fmt(med(live, "steps", k)), fmt(med(shim, "steps", k))))
    rows.append(("the hook: in all, from `main` to its record (the checks, the record's "
                 "write and the sweep are the rest)", fmt(med(live, "total")),
                 "" if alone else fmt(med(shim, "total"))))
    # the image checks (the image's RDMA userspace and NCCL read from the container's root):
    # their own time and opens, from the record's image part
    img_opens = (med(live_recs, "image", "opens"), med(shim_recs, "image", "opens"))
    rows.append(("the image checks, within the steps above (the record's `image.time_ms`; "
                 "its opens)",
                 *("" if med(recs, "image", "time_ms") is None else
                   f"{med(recs, 'image', 'time_ms'):.3f} ({(o or 0):.0f} opens)"
                   for recs, o in zip((live_recs, shim_recs), img_opens))))
    b.image_check = {"live_ms": med(live_recs, "image", "time_ms"), "live_opens": img_opens[0],
                     "shim_ms": med(shim_recs, "image", "time_ms"), "shim_opens": img_opens[1]}
    sup = supply_recs(b, n)
    step = "the node's RDMA userspace"
    if sup:
        given = sum(1 for r in sup if r.get("image", {}).get("supply", {}).get("given"))
        times = [r["time_ms"] for r in sup]
        rows.append((f"image_supply = yes, a glibc image without libibverbs ({given} of "
                     f"{len(sup)} given the node's libibverbs, libnl and mlx5 provider): the "
                     f"step `{step}` (6 bind mounts, the loader cache rewritten)",
                     fmt(med(times, "steps", step)), ""))
        rows.append(("image_supply = yes: `node and plan`, which reads the node's stack too "
                     "(the image's own read: `image.time_ms`, its opens)",
                     f"{fmt(med(times, 'steps', 'node and plan'))} (image "
                     f"{med(sup, 'image', 'time_ms'):.3f}, "
                     f"{med(sup, 'image', 'opens') or 0:.0f} opens)", ""))
        rows.append(("image_supply = yes: the hook in all, from `main` to its record",
                     fmt(med(times, "total")), ""))
        b.supply = {"step_ms": med(times, "steps", step), "total_ms": med(times, "total"),
                    "given": given, "n": len(sup)}
    b.step_medians = {"live_total": med(live, "total"), "shim_total": med(shim, "total"),
                      "shim_until": med(shim, "shim", until)}
    b.sections.append(
        f"### 3d. Where the time goes, per step ({n} containers each, scale node)\n\n"
        + md_table(["step", "live hook (createRuntime), ms",
                    "shim path (the shim alone), ms" if alone else
                    "shim path (the shim, then the nccl-conf stage), ms"], rows)
        + "\n\nThe hook's steps are medians of `time_ms` in the records the containers left "
          "(`inspect`), the shim's of the `shim` times in its record; wall time inside each "
          "process. "
          + ("The bench's container gets a new network namespace that no hook sets up, so "
             "the shim knows its network, writes /etc/nccl.conf itself and registers no "
             "nccl-conf stage: nothing runs after it but runc. " if alone else "")
          + "Each container is a new one: its state directory is removed before it starts "
          "(untimed), so every start makes one and sweeps. The rows from part 3c are what a "
          "hook or a shim costs outside itself.")


def supply_recs(b, n):
    """The live hook giving the node's stack (image_supply = yes): the scale node's root
    with this machine's libibverbs, libnl and mlx5 provider, a busybox image with this
    machine's loader and libc and no libibverbs; each start on a root as the image left
    it. The records, or [] where this machine has no rdma-core."""
    multi = "usr/lib/x86_64-linux-gnu"
    libs = ["libibverbs.so.1", "libnl-3.so.200", "libnl-route-3.so.200",
            "libibverbs/libmlx5-rdmav34.so"]
    if not all(os.path.exists(f"/{multi}/{lib}") for lib in libs + ["libc.so.6"]):
        return []
    node = b.scale_dev
    for lib in libs:
        dst = os.path.join(node, multi, lib)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.realpath(f"/{multi}/{lib}"), dst)
    os.makedirs(os.path.join(node, "etc", "libibverbs.d"), exist_ok=True)
    with open(os.path.join(node, "etc", "libibverbs.d", "mlx5.driver"), "w") as f:
        f.write("driver mlx5\n")
    conf = b.p("supply.conf")
    with open(b.p("container.conf")) as f, open(conf, "w") as g:
        g.write(f.read() + "image_supply = yes\n")
    bundle = b.make_bundle("hook-supply", [b.hook, "oci-rdma-hook", "--sysroot", node,
                                           "--config", conf, "createRuntime"])
    root = os.path.join(bundle, "rootfs")
    for src, dst in (("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2"),
                     (f"/{multi}/libc.so.6", f"{multi}/libc.so.6")):
        os.makedirs(os.path.dirname(os.path.join(root, dst)), exist_ok=True)
        shutil.copyfile(os.path.realpath(src), os.path.join(root, dst))
    cid = f"orhb-{os.getpid()}-steps-supply"
    b.ids.append(cid)
    return records(b, n, [b.runc, "run", "--bundle", bundle], cid,
                   f"rm -rf {STATE}/{cid} {root}/etc/nccl.conf {root}/etc/ld.so.cache "
                   f"{root}/etc/ld.so.conf.d {root}/etc/libibverbs.d {root}/run", full=True)


def sweep(b):
    """3f. A container start on a node that holds the records of 100 served containers:
    the sweep of a new state directory reads every record; a start sweeps at most once a
    minute (the mtime of .swept)."""
    n = 100
    # a record like the scale node's: one container's, read as soon as it is written (an
    # earlier part's may have been swept since: its container is gone)
    hook_b = b.p("bundles", "hook-scale")
    cid = f"orhb-{os.getpid()}-sweep-sample"
    b.ids.append(cid)
    rec = records(b, 1, [b.runc, "run", "--bundle", hook_b], cid,
                  f"rm -rf {STATE}/{cid}", full=True)[0]
    with open("/proc/1/stat") as f:
        rec["pid"], rec["start_time"] = 1, int(f.read().rsplit(")", 1)[1].split()[19])
    made = []
    for i in range(n):
        d = os.path.join(STATE, f"orhb-{os.getpid()}-alive-{i}")
        os.makedirs(d, mode=0o700, exist_ok=True)
        made.append(d)
        rec["id"] = os.path.basename(d)
        with open(os.path.join(d, "record.json"), "w") as f:
            json.dump(rec, f, separators=(",", ":"))  # compact, as the hook writes it
    hook_b = b.p("bundles", "hook-scale")
    cid = f"orhb-{os.getpid()}-sweep"
    swept = os.path.join(STATE, ".swept")
    fresh = f"rm -rf {STATE}/{cid}"
    r = b.harness_run([("every", [f"@prep={fresh} && rm -f {swept}"],
                        [b.runc, "run", "--bundle", hook_b, cid]),
                       ("minute", [f"@prep={fresh} && touch {swept}"],
                        [b.runc, "run", "--bundle", hook_b, cid])],
                      rounds=b.n(60, 10), warmup=2, max_s=b.n(40, 10))
    b.ids.append(cid)
    for d in made:
        shutil.rmtree(d, ignore_errors=True)
    e, m, v = r["every"], r["minute"], r["vs"]["minute"]
    b.sections.append(
        f"### 3f. A container start beside the records of {n} served containers "
        f"({int(e['rounds'])} rounds, scale node)\n\n"
        + md_table(["the new state directory's sweep", "wall ms (p10–p90)", "CPU ms (p10–p90)",
                    "wall ratio (95% CI)", "CPU ratio (95% CI)"],
                   [("at every start (as before; `.swept` removed before each run)",
                     fmt_ms(e), fmt_ms(e, "cpu_"), "1", "1"),
                    ("at most once a minute (`.swept` just touched: no sweep)", fmt_ms(m),
                     fmt_ms(m, "cpu_"), f"{v['ratio']:.3f}x ({v['ratio_ci_lo']:.3f}–"
                     f"{v['ratio_ci_hi']:.3f})", f"{v['cpu_ratio']:.3f}x "
                     f"({v['cpu_ratio_ci_lo']:.3f}–{v['cpu_ratio_ci_hi']:.3f})")])
        + f"\n\n`runc run` with the live hook; {n} state directories hold a record like the "
          "scale node's (pid 1, alive), which a sweep reads and parses one by one; each run "
          "is a new container. The sweep removes the directories of containers that are gone "
          "(poststop never ran); once a minute is enough for that.")


def pod_bench(b, script, rounds, part, title, extra=()):
    """Run a pod-start bench (bench/cri_bench.py, bench/nri_bench.py) and read its result:
    (the result, its summary), or None with the section saying why it was not measured."""
    out = b.p(script.replace(".py", "-%s.json" % part))
    cmd = [sys.executable, os.path.join(HERE, script), "--hook", b.hook,
           "--rounds", str(rounds), "--out", out, *extra]
    r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        tail = r.stderr.strip().splitlines()[-3:]
        b.sections.append(f"### {part}. {title}\n\nNot measured: " + " / ".join(tail))
        return None
    with open(out) as f:
        res = json.load(f)
    return res, res["summary"]


def pod_row(label, s, name, base=False):
    """A row of part 7 or 7b: the medians of one side, and its ratios unless the base."""
    med = [s.get(f"{name}_{k}_ms_median") for k in ("wall", "cpu")]
    return ((label,) + tuple("" if v is None else f"{v:.1f}" for v in med)
            + (("1", "1") if base else (ci(s, "wall"), ci(s, "cpu"))))


def cri(b):
    """7. A pod start through containerd's CRI with the handler vs the plain runc handler.
    100 rounds: a pod start's CPU time varies by about 12% from round to round here (its
    standard deviation over 60 rounds: 18.7 ms of 150 to 180, whether containerd's garbage
    collector runs or not), and with 60 the 95% interval of the median ratio was still
    about 10 points wide."""
    got = pod_bench(b, "cri_bench.py", b.n(100, 6), "7", "A pod start through containerd's CRI")
    if not got:
        b.budgets.append(("pod start through the CRI with the handler vs the runc handler",
                          "not measured (part 7)", CRI_LIMIT, False))
        return
    res, s = got
    rows = [pod_row("plain runc handler", s, "plain", base=True),
            pod_row("handler `rdma` (oci-rdma-runtime, scale node)", s, "rdma")]
    b.sections.append(
        f"### 7. A pod start through containerd's CRI ({res['rounds']} rounds, "
        "`bench/cri_bench.py`)\n\n"
        + md_table(["runtime handler", "wall ms (median)", "CPU ms (median)",
                    "wall ratio (95% CI)", "CPU ratio (95% CI)"], rows)
        + "\n\n" + res.get("notes", ""))
    ok = ("ratio_wall_median" in s and "ratio_cpu_median" in s and
          s["ratio_wall_median"] <= BUDGET_CRI_WALL and s["ratio_cpu_median"] <= BUDGET_CRI_CPU)
    b.budgets.append(("pod start through containerd's CRI with the handler vs the runc "
                      "handler (scale node, pod network)",
                      f"wall {pct(s, 'wall')}, CPU {pct(s, 'cpu')}",
                      CRI_LIMIT, ok))


def nri(b):
    """7b. A pod start through NRI (oci-rdma-hook nri connected, runc) vs runc with no
    plugin, on containerd 2.x, under the CRI budget's limits (issue: the NRI way costs
    what the handler's does). 100 rounds, as part 7: with 30, the 95% interval of the median
    CPU ratio was about 10 points wide, more than three times the budget."""
    got = pod_bench(b, "nri_bench.py", b.n(100, 6), "7b", "A pod start through NRI")
    name = ("pod start through NRI with `oci-rdma-hook nri` connected vs no plugin "
            "(containerd 2.x, scale node, pod network)")
    if not got:
        b.budgets.append((name, "not measured (part 7b)", CRI_LIMIT, False))
        return
    res, s = got
    rows = [pod_row("runc, no NRI plugin", s, "plain", base=True),
            pod_row("runc, `oci-rdma-hook nri` connected (scale node)", s, "nri")]
    b.sections.append(
        f"### 7b. A pod start through NRI ({res['rounds']} rounds, `bench/nri_bench.py`)\n\n"
        + md_table(["containerd 2.x, runc handler", "wall ms (median)", "CPU ms (median)",
                    "wall ratio (95% CI)", "CPU ratio (95% CI)"], rows)
        + "\n\n" + res.get("notes", ""))
    ok = ("ratio_wall_median" in s and "ratio_cpu_median" in s and
          s["ratio_wall_median"] <= BUDGET_CRI_WALL and s["ratio_cpu_median"] <= BUDGET_CRI_CPU)
    b.budgets.append((name, f"wall {pct(s, 'wall')}, CPU {pct(s, 'cpu')}", CRI_LIMIT, ok))


def nri_floor(b):
    """7c. What part 7b's budget leaves a plugin: a pod start with the floor plugin
    (bench/nri_floor.c) connected vs no plugin. The floor registers as oci-rdma-hook nri
    does, subscribes to the same events, and answers each at once, CreateContainer with
    oci-rdma-hook nri's answer for a container of the scale node: what the runtime's side of
    serving those devices costs (NRI's messages, the adjustment applied, runc's device
    nodes and limit), with no plugin's work. Not a budget: it says how much of 7b's is the
    runtime's."""
    floor = getattr(b.args, "nri_floor", None)
    if not floor:
        b.sections.append("### 7c. The floor of a pod start through NRI\n\nNot measured: "
                          "no --nri-floor (bench/run.sh builds bench/nri_floor.c)")
        return
    got = pod_bench(b, "nri_bench.py", b.n(100, 6), "7c", "The floor of a pod start through "
                    "NRI", extra=("--floor", floor))
    if not got:
        return
    res, s = got
    rows = [pod_row("runc, no NRI plugin", s, "plain", base=True),
            pod_row("runc, the floor plugin connected (oci-rdma-hook nri's answer, scale "
                    "node)", s, "nri")]
    b.sections.append(
        f"### 7c. The floor of a pod start through NRI ({res['rounds']} rounds, "
        f"`bench/nri_bench.py --floor`)\n\n"
        + md_table(["containerd 2.x, runc handler", "wall ms (median)", "CPU ms (median)",
                    "wall ratio (95% CI)", "CPU ratio (95% CI)"], rows)
        + "\n\nThe ratio is the runtime's side of serving the scale node's devices through "
          "NRI; part 7b's ratio above it is what oci-rdma-hook nri's own work costs. "
        + res.get("notes", ""))


def ci(s, kind):
    if f"ratio_{kind}_median" not in s:
        return ""
    lo, hi = s[f"ratio_{kind}_ci95"]
    return f"{s[f'ratio_{kind}_median']:.3f}x ({lo:.3f}–{hi:.3f})"


def pct(s, kind):
    if f"ratio_{kind}_median" not in s:
        return "not measured"
    lo, hi = s[f"ratio_{kind}_ci95"]
    m = s[f"ratio_{kind}_median"]
    return f"{(m - 1) * 100:+.1f}% ({(lo - 1) * 100:+.1f}…{(hi - 1) * 100:+.1f}%)"

