# SPDX-License-Identifier: Apache-2.0
"""Parts 1b and 1c of bench/run.sh: the floor under `env`, and what the seccomp filter
costs. What `env` does on the scale node is taken from strace -y and handed to
bench/readfiles.c, which makes the same calls and nothing else: the reads alone, every
call, and every call after the hook's confinement."""

import os
import re
import subprocess
import sys

from report import fmt_ms, md_table, ratio_ci, worst


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def calls_made(b, node):
    """The calls `env` makes on paths under the sysroot, in order (strace -y), as
    bench/readfiles.c's list takes them: [(OP, DIR, PATH)], or None."""
    if not b.strace:
        return None
    out = b.strace_env(node, "strace-y.out", "-y", "-e",
                       "trace=openat,read,getdents64,newfstatat,readlinkat,faccessat2")
    root = os.path.realpath(node)
    calls, by_fd = [], {}  # by_fd: an open fd -> its entry in calls, until it is used
    with open(out) as f:
        for line in f:
            # CALL(DIRFD<dir>, "rel", ...) = RESULT
            m = re.match(r'(openat|newfstatat|readlinkat|faccessat2)\((?:AT_FDCWD|\d+)'
                         r'<([^>]*)>, "([^"]*)", (.*) = (-?\d+)(?:<([^>]*)>)?', line)
            if m:
                call, base, rel, rest, res, _ = m.groups()
                if not os.path.realpath(os.path.join(base, rel)).startswith(root):
                    continue
                if call != "openat":
                    calls.append(({"newfstatat": "s", "readlinkat": "l"}.get(call, "a"),
                                  base, rel))
                elif int(res) < 0:
                    calls.append(("e", base, rel))
                elif "O_PATH" not in rest:
                    # a directory is "d" once listed, else the base of later calls
                    # (readfiles opens those itself); a file "r" once read, else "o"
                    op = "x" if "O_DIRECTORY" in rest else "o"
                    by_fd[res] = len(calls)
                    calls.append((op, base, rel))
                continue
            m = re.match(r"(read|getdents64)\((\d+)<", line)
            if m and m.group(2) in by_fd:
                i = by_fd.pop(m.group(2))
                op, base, rel = calls[i]
                calls[i] = ("r" if op == "o" else "d" if op == "x" else op, base, rel)
    return [c for c in calls if c[0] != "x"]


def files_read(b, node):
    """The files `env` opens and reads under the sysroot, in order (strace -y), as
    readfiles' list takes them: [("r", DIR, PATH)], or None."""
    calls = calls_made(b, node)
    return None if calls is None else [c for c in calls if c[0] == "r"]


def write_list(b, name, calls):
    """The list bench/readfiles.c takes: one "OP<TAB>DIR<TAB>PATH" line a call."""
    lst = b.p(name)
    with open(lst, "w") as f:
        f.write("".join(f"{op}\t{base}\t{rel}\n" for op, base, rel in calls))
    return lst


def env_floor(b):
    """The env budget: the hook against what reading the scale node's files costs by
    itself (bench/readfiles.c), side by side with /bin/true, ratios within rounds; and
    what the hook's other system calls and its confinement add to that floor."""
    calls = calls_made(b, b.nodes["scale"])
    files = [c for c in calls if c[0] == "r"]
    lst = write_list(b, "scale-files.txt", files)
    all_lst = write_list(b, "scale-calls.txt", calls)
    log("1b. the floor: the same files read by a bare loop")
    r = b.harness_run([("true", [], ["/bin/true"]),
                       ("readfiles", [], [b.readfiles, lst]),
                       ("calls", ["@vs=readfiles"], [b.readfiles, all_lst]),
                       ("confined", ["@vs=readfiles"], [b.readfiles, "--confine", all_lst]),
                       ("env", ["@vs=readfiles"], b.hook_argv(b.nodes["scale"], "env")),
                       # env again, paired with its floor: the calls it makes, confined
                       ("env2", ["@vs=confined"], b.hook_argv(b.nodes["scale"], "env"))],
                      rounds=b.n(300, 60), warmup=5, max_s=b.n(60, 15))
    t, f_, e = r["true"], r["readfiles"], r["env"]
    vf, ve, vr = r["vs"]["readfiles"], r["vs"]["env"], r["pairs"][("env", "readfiles")]
    vc, vk = r["pairs"][("calls", "readfiles")], r["pairs"][("confined", "readfiles")]
    vfl = r["pairs"][("env2", "confined")]
    others = len(calls) - len(files)

    def row(label, name, vs_reads):  # a row of the table, its ratio to the reads
        v = r["vs"][name]
        return (label, fmt_ms(r[name]), fmt_ms(r[name], "cpu_"), ratio_ci(v, 2),
                ratio_ci(v, 2, "cpu_"),
                f"{v['diff_us'] / 1000:.2f} / {v['cpu_diff_us'] / 1000:.2f}",
                ratio_ci(vs_reads, 2) if vs_reads else "1",
                ratio_ci(vs_reads, 2, "cpu_") if vs_reads else "1")
    rows = [("`/bin/true` (baseline)", fmt_ms(t), fmt_ms(t, "cpu_"), "1", "1", "", "", ""),
            row(f"`readfiles`: the {len(files)} files `env` reads, opened, read and closed "
                "by a bare static loop", "readfiles", None),
            row(f"`readfiles`: every call `env` makes on the node ({len(calls)}: the reads "
                f"and {others} others)", "calls", vc),
            row("`readfiles --confine`: the same after the hook's confinement "
                "(capabilities dropped, its seccomp filter loaded)", "confined", vk),
            row("`env` on the scale node", "env", vr)]
    per_file = (vf["diff_us"]) / len(files) if files else 0
    kinds = {"e": "failed opens (probes)", "a": "faccessat (probes)",
             "s": "fstatat (device number checks)", "l": "readlinkat (drivers)",
             "d": "directory listings", "o": "opens not read"}
    counts = ", ".join(f"{sum(1 for c in calls if c[0] == k)} {v}" for k, v in kinds.items()
                       if any(c[0] == k for c in calls))
    b.sections.append(
        f"### 1b. The floor under part 1: the files alone ({int(t['rounds'])} rounds)\n\n"
        + md_table(["command", "wall ms (p10–p90)", "CPU ms (p10–p90)",
                    "wall vs `/bin/true` (95% CI)", "CPU vs `/bin/true` (95% CI)",
                    "over `/bin/true` ms, wall / CPU", "wall vs `readfiles` (95% CI)",
                    "CPU vs `readfiles` (95% CI)"], rows)
        + f"\n\n`bench/readfiles.c` opens, reads and closes the files `env` read on the "
          f"scale node (strace -y), one after the other, by the same paths relative to the "
          f"same directories, and does nothing else; it is linked statically, like the "
          f"hook. Its time over `/bin/true` is what this machine charges for those reads "
          f"alone: {per_file:.1f} µs a file here. The plan needs them: per ACTIVE RoCE port "
          f"its state, link layer and net device, and the GID entry of the chosen index with "
          f"its type; the first port's walk to that index; per device its uverbs node. "
          f"`env`'s ratio to `readfiles` is taken within each round, as every other ratio.\n\n"
          f"The next two rows take `env`'s other work apart. The first makes every system "
          f"call `env` makes on the node, in its order, and nothing else: the reads and "
          f"{counts}. The second does that after the confinement the hook puts itself "
          f"under before it reads a node: the floor of `env`, against which `env` run again "
          f"in the same rounds takes {vfl['ratio']:.2f}x wall, {vfl['cpu_ratio']:.2f}x CPU "
          f"(the budget of part 1). What remains between them is the hook's own code (its "
          f"config, the plan, its output) and the start of a larger binary.")
    b.floor_notes.append(
        f"Floor of the `env` budget on this machine: reading the {len(files)} files the "
        f"plan needs, and nothing else, costs {vf['ratio']:.2f}x `/bin/true` wall "
        f"({vf['cpu_ratio']:.2f}x CPU), {per_file:.1f} µs a file (part 1b); the hook "
        f"takes {ve['ratio']:.2f}x `/bin/true`, {vr['ratio']:.2f}x the floor "
        f"({vr['cpu_ratio']:.2f}x CPU). Its system calls alone take {vc['ratio']:.2f}x the "
        f"floor ({vc['cpu_ratio']:.2f}x CPU), and {vk['ratio']:.2f}x "
        f"({vk['cpu_ratio']:.2f}x CPU) after its confinement.")
    b.budgets.append(("`env` on the scale node vs its floor: the calls it makes on the node, "
                      "made by a bare loop after the hook's confinement (part 1b)",
                      f"wall {ratio_ci(vfl, 2)}, CPU {ratio_ci(vfl, 2, 'cpu_')}",
                      f"<= {b.budget_env:g}x", worst(vfl) <= b.budget_env))


def filter_cost(b):
    """1c. The seccomp filter: its load and what it adds to an allowed system call, the
    hook's and one of the 16 calls a bare reader needs (bench/filtercost.c)."""
    if not b.args.filtercost:
        return
    log("1c. the seccomp filter's load and per-call cost")
    n = str(b.n(400, 40))
    res = {}
    for kind in ("hook", "small"):
        out = subprocess.run([b.args.filtercost, kind, n], stdout=subprocess.PIPE, text=True,
                             check=True).stdout.split()
        res[kind] = {k: float(v) for k, v in (x.split("=") for x in out)}
    h, s = res["hook"], res["small"]
    b.sections.append(
        f"### 1c. The seccomp filter ({n} fresh processes each)\n\n"
        + md_table(["filter", "instructions", "load µs (median)", "load µs (min)",
                    "an allowed call after it, ns more (median)"],
                   [("the hook's (src/base/seccomp-allow.h)", f"{h['len']:.0f}",
                     f"{h['load_us']:.1f}", f"{h['load_min_us']:.1f}", f"{h['call_ns']:.1f}"),
                    ("16 calls, what a bare file reader needs", f"{s['len']:.0f}",
                     f"{s['load_us']:.1f}", f"{s['load_min_us']:.1f}", f"{s['call_ns']:.1f}")])
        + "\n\nBoth are binary trees of system call numbers (libseccomp's "
          "`SCMP_FLTATR_CTL_OPTIMIZE` = 2). The kernel runs a filter once for every system "
          "call number when it is loaded, to fill its action cache; a filter without "
          "argument checks then answers every allowed call from that cache, without running "
          "at all: the per-call cost is lost in the timing's noise, and the load is what the "
          f"filter costs. A filter for `env` alone, which needs about a third of the hook's "
          f"calls, would save about {h['load_us'] - s['load_us']:.0f} µs a run here, at "
          "the price of a second allow-list to keep right.")
