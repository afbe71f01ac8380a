#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/ks_plots.py - the kernel-superposition benchmark's figures from bench/ks.py's JSON,
like the seed's Figs. 2, 3 and 6 (time against r_max, log y, 512^2):

  python3 bench/ks_plots.py DIR [--shape 512x512]

reads DIR/ks.json and writes DIR/fig2_gather.png (each gather implementation's best over tile
shapes and shared arrays, and the peer naive gather), DIR/fig3_scatter.png (each scatter's best
over tile shapes) and DIR/fig6_groups.png (each group's best, the peer, the CPU twin cpu_ks at 1
thread and on all cores, and the issue's targets). Times are the b2b figures (per call of a
batch back to back, the seed's measure). Needs matplotlib and the JSON only (not libndfilt)."""
import argparse
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GATHER_GROUPS = ("exact gather", "1D gather", "2D gather")
SCATTER_GROUPS = ("safe scatter", "warp-sync scatter")


def _cases(doc, shape):
    g = doc.get("gpu") or {}
    return sorted((c for c in g.get("cases", []) if "derived" in c and c["shape"] == shape),
                  key=lambda c: c["r_max"])


def _series(cases, get):
    """(r_max list, ms list) where get(case) gives a figure."""
    xs, ys = [], []
    for c in cases:
        v = get(c)
        if v is not None:
            xs.append(c["r_max"])
            ys.append(v)
    return xs, ys


def _impl(metric, impl):
    return lambda c: (c["derived"][metric]["impl_best"].get(impl) or {}).get(metric)


def _group(metric, group):
    return lambda c: (c["derived"][metric]["group_best"].get(group) or {}).get(metric)


def _peer(metric):
    return lambda c: c["peer"].get(metric)


def _axes(ax, title, rs):
    ax.set_yscale("log")
    ax.set_xlabel("r_max")
    ax.set_ylabel("ms per call (log)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    if rs:
        ax.set_xlim(0, max(rs) + 1)
    ax.legend(fontsize=7)


def _save(fig, out, name):
    fig.tight_layout()
    p = os.path.join(out, name)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def plot(doc, out, shape):
    meta = doc["meta"]
    metric = meta.get("metric", "ms_b2b")
    cases = _cases(doc, shape)
    if not cases:
        print(f"ks_plots: no GPU cases of shape {shape} in the JSON", file=sys.stderr)
        return []
    rs = [c["r_max"] for c in cases]
    label = "×".join(map(str, shape))
    where = f"{label} float32, {meta.get('gpu')}, commit {meta.get('commit')}"
    impls = meta["impls"]
    made = []

    def impl_fig(groups, solid, dashed, peer, title, name):
        """One line per implementation of `groups`: `solid`'s as o-, the others as `dashed`."""
        fig, ax = plt.subplots(figsize=(7.5, 5))
        for i, (impl, d) in enumerate(impls.items()):
            if d["group"] in groups:
                xs, ys = _series(cases, _impl(metric, impl))
                if xs:
                    ax.plot(xs, ys, "o-" if d["group"] == solid else dashed, ms=4,
                            color=f"C{i % 10}", label=f"{impl} ({d['group']})")
        xs, ys = _series(cases, _peer(metric)) if peer else ([], [])
        if xs:
            ax.plot(xs, ys, "k--", label="peer naive gather (issue)")
        _axes(ax, f"{title} ({where})", rs)
        made.append(_save(fig, out, name))

    impl_fig(GATHER_GROUPS, "exact gather", ".-", True,
             "Gathers: best over tile shapes and shared arrays", "fig2_gather.png")
    impl_fig(SCATTER_GROUPS, "warp-sync scatter", "s--", False,
             "Scatters: best over tile shapes", "fig3_scatter.png")

    fig, ax = plt.subplots(figsize=(7.5, 5))
    for i, g in enumerate(meta["groups"]):
        xs, ys = _series(cases, _group(metric, g))
        if xs:
            ax.plot(xs, ys, "o-", ms=4, color=f"C{i}", label=g)
    xs, ys = _series(cases, _peer(metric))
    if xs:
        ax.plot(xs, ys, "k--", label="peer naive gather (issue)")
    cpu = doc.get("cpu") or {}
    nall = cpu.get("threads_all")
    for n, style in ((1, "kv"), (nall, "k^")):
        pts = sorted((r["r_max"], r["ms"]) for r in cpu.get("rows", [])
                     if r["shape"] == shape and r["threads"] == n and "ms" in r)
        if pts and n is not None:
            ax.plot(*zip(*pts), style, ms=6, mfc="none",
                    label=f"cpu_ks {n} thread{'s' if n > 1 else ''}")
    if shape == [512, 512]:
        t = meta.get("targets_ms_512", {})
        if t:
            ax.plot([int(k) for k in t], list(t.values()), "r*", ms=11,
                    label="issue targets (best exact)")
        iss = meta.get("issue_naive_ms_512", {})
        if iss:
            ax.plot([int(k) for k in iss], list(iss.values()), "x", color="gray", ms=7,
                    label="issue's naive gather (H200)")
    _axes(ax, f"Best of each group ({where})", rs)
    made.append(_save(fig, out, "fig6_groups.png"))
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--shape", default="512x512", help="the image size plotted (%(default)s)")
    a = ap.parse_args()
    with open(os.path.join(a.dir, "ks.json")) as f:
        doc = json.load(f)
    made = plot(doc, a.dir, [int(v) for v in a.shape.split("x")])
    for p in made:
        print(f"wrote {p}")
    if not made:
        sys.exit(1)


if __name__ == "__main__":
    main()
