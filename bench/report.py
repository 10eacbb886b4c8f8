# SPDX-License-Identifier: Apache-2.0
"""How the benchmark's report writes its numbers (bench.py, fleet.py)."""


def ratio_ci(v, digits, kind=""):
    """'3.19x (3.16–3.24)': a paired ratio and its 95% confidence interval."""
    return (f"{v[kind + 'ratio']:.{digits}f}x ({v[kind + 'ratio_ci_lo']:.{digits}f}–"
            f"{v[kind + 'ratio_ci_hi']:.{digits}f})")


def pct_ci(v, kind=""):
    """'+11.9% (+6.9…+15.6%)': a paired ratio as a change, with its 95% CI."""
    return (f"{(v[kind + 'ratio'] - 1) * 100:+.1f}% ({(v[kind + 'ratio_ci_lo'] - 1) * 100:+.1f}…"
            f"{(v[kind + 'ratio_ci_hi'] - 1) * 100:+.1f}%)")


def worst(v):
    """A budget holds in wall time and in CPU time: a loaded machine adds waits for a CPU
    to both commands alike, which pulls wall-time ratios towards 1; CPU time has no such
    waits, and wall time catches what CPU time misses (blocking)."""
    return max(v["ratio"], v["cpu_ratio"])


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def fmt_ms(c, kind=""):
    return (f"{c[kind + 'median_us'] / 1000:.2f} ({c[kind + 'p10_us'] / 1000:.2f}–"
            f"{c[kind + 'p90_us'] / 1000:.2f})")


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(lines)
