# SPDX-License-Identifier: Apache-2.0
"""What bench/cri_bench.py and bench/nri_bench.py share: their command line, the median
and its confidence interval, and the JSON and summary they write."""
import argparse
import glob
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NODES = os.path.join(REPO, "tests", "nodes")


def log(msg):
    print(f"{os.path.basename(sys.argv[0]).removesuffix('.py')}: {msg}", file=sys.stderr,
          flush=True)


def median_ci(xs):
    """The median and a distribution-free 95% confidence interval of it (order statistics)."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return None, None, None
    k = max(0, math.floor(n / 2 - 0.98 * math.sqrt(n)))
    j = min(n - 1, math.ceil(n / 2 + 0.98 * math.sqrt(n)))
    return statistics.median(s), s[k], s[j]


def parse_args(doc, prog, more=None):
    ap = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()),
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=f"The timed region and the method: see the head of "
                                        f"bench/cri_bench.py.")
    ap.prog = os.path.basename(prog)
    ap.add_argument("--rounds", type=int, metavar="N", help="rounds of one pod a handler (default 30, "
                                               "--quick: 8)")
    ap.add_argument("--quick", action="store_true", help="8 rounds, 1 warm-up pod a handler")
    ap.add_argument("--hook-build", metavar="DIR", default=os.path.join(REPO, "build-bench"),
                    help="meson build directory holding src/oci-rdma-hook (default: "
                         "build-bench, as bench/run.sh builds it)")
    ap.add_argument("--hook", metavar="FILE", help="the oci-rdma-hook binary (instead of --hook-build's)")
    ap.add_argument("--pause", metavar="FILE", help="the static pause binary (default: --hook-build's "
                                    "tests/e2e/cri-pause, else tests/cri/pause.c built here)")
    ap.add_argument("--work", metavar="DIR", help="where the work directory is made (default /var/tmp)")
    ap.add_argument("--node", default="scale", metavar="NAME",
                    choices=sorted(os.path.basename(f)[:-5]
                                   for f in glob.glob(os.path.join(NODES, "*.json"))),
                    help="a sample node of tests/nodes, NAME.json (default: scale)")
    ap.add_argument("--network", choices=("pod", "node"), default="pod",
                    help="the pods' network: CNI bridge (pod, as most pods) or the node's")
    ap.add_argument("--out", metavar="FILE", help="write the JSON here instead of stdout")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    if more:
        more(ap)
    a = ap.parse_args()
    if a.rounds is not None and a.rounds < 1:
        ap.error("--rounds must be at least 1")
    return a


def report(a, b, rounds, res, order, rw, rc_, handlers, started, notes, labels, runtimes):
    """The JSON (stdout or --out) and the summary on stderr: handlers are (baseline,
    measured), res their wall and CPU lists, rw and rc_ the ratios measured/baseline,
    labels and runtimes each handler's name in the summary and its CRI runtime handler."""
    base, other = handlers
    summary = {}
    for h in handlers:
        for k in ("wall_ms", "cpu_ms"):
            if res[h][k]:
                summary[f"{h}_{k}_median"] = round(statistics.median(res[h][k]), 3)
    for k, xs in (("ratio_wall", rw), ("ratio_cpu", rc_)):
        m, lo, hi = median_ci(xs)
        if m is not None:
            summary[f"{k}_median"] = round(m, 4)
            summary[f"{k}_ci95"] = [round(lo, 4), round(hi, 4)]
    out = {"rounds": rounds, base: res[base], other: res[other],
           "ratio_wall": [round(x, 5) for x in rw], "ratio_cpu": [round(x, 5) for x in rc_],
           "order": order, "summary": summary,
           "handlers": {h: runtimes[h] for h in handlers},
           "timed_region": "RunPodSandbox call to StartContainer return",
           "node": a.node, "network": a.network,
           "elapsed_s": round(time.monotonic() - started, 1), "notes": notes}
    for h in handlers:
        for k in ("wall_ms", "cpu_ms"):
            out[h][k] = [round(x, 3) for x in res[h][k]]
    text = json.dumps(out, indent=1) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)

    def pct(k):
        if f"{k}_median" not in summary:
            return "n/a"
        m, (lo, hi) = summary[f"{k}_median"], summary[f"{k}_ci95"]
        return f"{(m - 1) * 100:+.1f}% (95% CI {(lo - 1) * 100:+.1f}…{(hi - 1) * 100:+.1f}%)"

    def med(h, k):
        v = summary.get(f"{h}_{k}_median")
        return "n/a" if v is None else f"{v:.1f}"

    log(f"{rounds} rounds in {b.elapsed_rounds:.0f} s ({out['elapsed_s']:.0f} s in all); "
        f"pod start, RunPodSandbox to StartContainer returned, medians:")
    for h in handlers:
        log(f"  {h + ' (' + labels[h] + '):':<30} wall {med(h, 'wall_ms')} ms, "
            f"CPU {med(h, 'cpu_ms')} ms")
    log(f"  {other} / {base} within a round:  wall {pct('ratio_wall')}, CPU {pct('ratio_cpu')}")
    return 0
