#!/usr/bin/env python3
"""Turns a JMH JSON result of the JavaVsC suite into the report's table and charts.

    python3 jmh/report.py <result.json> <chart folder>

Prints a Markdown table (verbs4j, raw FFM, the JNI twin and C: ns/op with JMH's 99.9% error;
verbs4j - raw FFM (the binding's own cost), verbs4j / JNI, verbs4j / C, B/op) and
also the median and best iteration of each, which a busy machine disturbs less than the mean;
writes it next to the JSON (<result>.md); draws SVG charts into the chart folder:
java-vs-c.svg (JMH scores), java-vs-c-median.svg (median iterations) and ffm-floor.svg (a
no-op native call three ways).
Standard library only: the SVG is written by hand, so nothing needs installing.
"""

import json
import math
import statistics
import os
import sys
from html import escape

PREFIX = "io.github.verbs4j.jmh.JavaVsC."

# (benchmark stem, label): <stem>Java is compared with <stem>JavaRawFfm, <stem>Jni and <stem>C
PAIRS = [
    ("sendRecv", "SEND + RECV ping (post_recv, post_send, poll both CQs)"),
    ("write", "RDMA WRITE 64 B, signaled, poll"),
    ("chain16Write", "16 chained WRITEs per post_send (per WRITE)"),
    ("read", "RDMA READ 64 B, signaled, poll"),
    ("fetchAdd", "FETCH_AND_ADD 8 B, signaled, poll"),
    ("pollEmpty", "poll_cq (16) on an empty CQ"),
]
# the charts' row labels
SHORT = {
    "sendRecv": "SEND + RECV ping",
    "write": "RDMA WRITE 64 B + poll",
    "chain16Write": "16 chained WRITEs (per WRITE)",
    "read": "RDMA READ 64 B + poll",
    "fetchAdd": "FETCH_AND_ADD + poll",
    "pollEmpty": "poll_cq on an empty CQ",
}
FLOOR = [
    ("nopC", "C, through a function pointer"),
    ("nopJavaCritical", "Java, critical downcall"),
    ("nopJavaCriticalByAddress", "Java, critical downcall, pointers as long"),
    ("nopJavaCriticalGuarded", "Java, as verbs4j calls: close guard + critical, pointers as long"),
    ("nopJavaCriticalArenaGuarded", "Java, critical, owner a shared arena's segment (the former guard)"),
    ("nopJavaPlain", "Java, plain downcall"),
    ("nopJni", "Java, JNI static native (the JNI twin's shape)"),
]

JAVA_COLOUR = "#e76f24"
C_COLOUR = "#2a6fbb"
RAW_COLOUR = "#f2b134"
JNI_COLOUR = "#5a9e4b"


def number(value):
    """JMH writes "NaN" (a string) for the error of fewer than 2 iterations."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if v != v else v


def load(path):
    with open(path) as f:
        data = json.load(f)
    results = {}
    for entry in data:
        name = entry["benchmark"]
        if not name.startswith(PREFIX):
            continue
        primary = entry["primaryMetric"]
        iterations = [number(v) for fork in primary["rawData"] for v in fork]
        if primary["scoreUnit"] != "ns/op":
            raise SystemExit(f"{name}: expected ns/op, got {primary['scoreUnit']}")
        norm = entry.get("secondaryMetrics", {}).get("gc.alloc.rate.norm")
        results[name[len(PREFIX):]] = {
            "score": number(primary["score"]),
            "error": number(primary["scoreError"]),
            # the fastest measurement iteration: on a shared machine, the least disturbed one
            "best": min(iterations),
            # the median iteration: robust against the few iterations a busy machine disturbs
            "median": statistics.median(iterations),
            "bytes": None if norm is None else number(norm["score"]),
        }
    return results


def fmt_ns(r):
    return f"{r['score']:.1f} ± {r['error']:.1f}"


def fmt_bytes(r):
    if r["bytes"] is None:
        return "n/a (run with -prof gc)"
    return f"{r['bytes']:.3f}"


def row(results, stem):
    """verbs4j, raw FFM, JNI, C results of one verb (None where not measured)."""
    return (results.get(stem + "Java"), results.get(stem + "JavaRawFfm"), results.get(stem + "Jni"),
            results.get(stem + "C"))


def diff(a, b, key, ratio=False):
    if not a or not b:
        return "—"
    return f"{a[key] / b[key]:.2f}" if ratio else f"{a[key] - b[key]:.1f}"


def table(results):
    lines = [
        "JMH score (mean of the iterations ± 99.9% confidence interval):",
        "",
        "| operation | verbs4j ns/op | raw FFM ns/op | JNI ns/op | C ns/op | verbs4j − raw FFM ns | verbs4j / JNI | verbs4j / C | verbs4j B/op | C B/op |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for stem, label in PAIRS:
        j, raw, jni, c = row(results, stem)
        if not j or not c:
            continue
        lines.append(f"| {label} | {fmt_ns(j)} | {fmt_ns(raw) if raw else '—'} | {fmt_ns(jni) if jni else '—'} | "
                     f"{fmt_ns(c)} | {diff(j, raw, 'score')} | {diff(j, jni, 'score', True)} | "
                     f"{diff(j, c, 'score', True)} | {fmt_bytes(j)} | {fmt_bytes(c)} |")
    lines += [
        "",
        "Median iteration (best iteration in parentheses):",
        "",
        "| operation | verbs4j ns/op | raw FFM ns/op | JNI ns/op | C ns/op | verbs4j − raw FFM ns | verbs4j / JNI | verbs4j / C |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def mb(r):
        return f"{r['median']:.1f} ({r['best']:.1f})" if r else "—"

    for stem, label in PAIRS:
        j, raw, jni, c = row(results, stem)
        if not j or not c:
            continue
        lines.append(f"| {label} | {mb(j)} | {mb(raw)} | {mb(jni)} | {mb(c)} | {diff(j, raw, 'median')} | "
                     f"{diff(j, jni, 'median', True)} | {diff(j, c, 'median', True)} |")
    lines += [
        "",
        "| no-op native call (`bl_nop`, shaped like `ops.post_send`) | ns/call (JMH score) | median (best) iteration | B/op |",
        "|---|---:|---:|---:|",
    ]
    for stem, label in FLOOR:
        r = results.get(stem)
        if r:
            lines.append(f"| {label} | {fmt_ns(r)} | {r['median']:.1f} ({r['best']:.1f}) | {fmt_bytes(r)} |")
    return "\n".join(lines) + "\n"


def nice_step(raw):
    """The smallest of 1, 2, 2.5, 5 x 10^n that is at least raw."""
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


def bars_svg(title, rows, series, unit, note):
    """rows: [(label, [value per series], [error per series])]; series: [(name, colour)]."""
    width, left, right, top = 900, 250, 70, 60
    bar, gap = 16, 14
    group = bar * len(series) + gap
    height = top + group * len(rows) + 60
    # the scale follows the scores; error bars longer than the plot are clipped at its edge
    vmax = 1.1 * max(v for _, values, _ in rows for v in values if v is not None) or 1.0
    step = nice_step(vmax / 5)
    vmax = step * -(-vmax // step)
    plot = width - left - right

    def x(v):
        return left + plot * v / vmax

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{escape(title)}</text>']
    # legend
    lx = left
    for name, colour in series:
        out.append(f'<rect x="{lx}" y="34" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{lx + 16}" y="44">{escape(name)}</text>')
        lx += 40 + 7 * len(name)
    # grid
    steps = round(vmax / step)
    for i in range(steps + 1):
        v = step * i
        gx = x(v)
        out.append(f'<line x1="{gx:.1f}" y1="{top - 4}" x2="{gx:.1f}" y2="{height - 40}" stroke="#ddd"/>')
        out.append(f'<text x="{gx:.1f}" y="{height - 26}" text-anchor="middle" fill="#555">{v:g}</text>')
    out.append(f'<text x="{left + plot / 2}" y="{height - 8}" text-anchor="middle" fill="#555">{escape(unit)}</text>')
    for i, (label, values, errors) in enumerate(rows):
        y0 = top + i * group
        out.append(f'<text x="{left - 8}" y="{y0 + bar * len(series) / 2 + 4}" text-anchor="end">{escape(label)}</text>')
        for k, ((name, colour), v, e) in enumerate(zip(series, values, errors)):
            y = y0 + k * bar
            if v is None:
                continue
            out.append(f'<rect x="{left}" y="{y}" width="{max(x(v) - left, 1):.1f}" height="{bar - 2}" fill="{colour}">'
                       f'<title>{escape(name)}: {v:.1f} ± {e:.1f} {escape(unit)}</title></rect>')
            if e > 0:
                out.append(f'<line x1="{x(max(v - e, 0)):.1f}" y1="{y + bar / 2 - 1}" x2="{x(min(v + e, vmax)):.1f}" '
                           f'y2="{y + bar / 2 - 1}" stroke="#333" stroke-width="0.8"/>')
            out.append(f'<text x="{x(v) + 4:.1f}" y="{y + bar - 5}" fill="#111" stroke="white" stroke-width="3" '
                       f'paint-order="stroke">{v:.1f}</text>')
    out.append(f'<text x="{width - 6}" y="{height - 8}" text-anchor="end" fill="#777" font-size="10">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    path, folder = argv[1], argv[2]
    results = load(path)
    if not results:
        raise SystemExit(f"{path}: no {PREFIX}* results")
    note = "source: " + os.path.basename(path) + " (scripts/benchmarks)"
    md = table(results)
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write(md)
    print(md)
    os.makedirs(folder, exist_ok=True)
    written = []
    series = [("Java, verbs4j", JAVA_COLOUR), ("Java, raw FFM downcalls", RAW_COLOUR), ("Java, JNI twin", JNI_COLOUR),
              ("C, libibverbs", C_COLOUR)]
    for key, file, title in (("score", "java-vs-c.svg", "verbs4j vs raw FFM vs JNI vs C on softrdma: JMH score per operation (lower is better)"),
                             ("median", "java-vs-c-median.svg", "verbs4j vs raw FFM vs JNI vs C on softrdma: median iteration per operation (lower is better)")):
        rows = []
        for stem, label in PAIRS:
            measured = row(results, stem)
            j, c = measured[0], measured[3]
            if j and c:
                values = [r[key] if r else None for r in measured]
                errors = [r["error"] if r and key == "score" else 0.0 for r in measured]
                rows.append((SHORT[stem], values, errors))
        if rows:
            with open(os.path.join(folder, file), "w") as f:
                f.write(bars_svg(title, rows, series, "ns/op", note))
            written.append(file)
    floor = [(label, [results[stem]["score"], results[stem]["median"]], [results[stem]["error"], 0.0])
             for stem, label in FLOOR if stem in results]
    if floor:
        with open(os.path.join(folder, "ffm-floor.svg"), "w") as f:
            f.write(bars_svg("One no-op native call (lower is better)", floor,
                             [("JMH score", "#6a4c93"), ("median iteration", "#b39ddb")], "ns/call", note))
        written.append("ffm-floor.svg")
    print(f"charts in {folder}: {', '.join(written) or 'none'}; table: {os.path.splitext(path)[0]}.md")


if __name__ == "__main__":
    main(sys.argv)
