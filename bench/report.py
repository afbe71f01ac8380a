#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/report.py - BENCHMARKS.md from the current result sets, one per benchmark family:

  python3 bench/report.py [--results DIR] [--out FILE]

reads DIR/<family>/ (default bench/results/): <family>.json (its "meta" gives the GPU, date and
commit of the run), <family>.md (the family's tables) and its PNG plots, and any other part of
the family run apart (<part>.json and <part>.md beside them: slabs/gpus, dask/dask_cuda), and
writes FILE
(default BENCHMARKS.md beside bench/): a header with each family's run, then each family's
Markdown with its headings one level down and its plots. scripts/gpu-check.sh writes the same
layout under $OUT/<family>/: copy that folder over bench/results/<family>/ and run this again.
Standard library only."""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# family: (what it measures, the program, the scripts/gpu-check.sh part that runs it)
FAMILIES = {
    "sep": ("separable filtering: correlate1d, the FIR Gaussian, CPU threads, the seed's 2-D table",
            "bench/peers.py", "bench"),
    "conv": ("non-separable correlation (direct, FFT) in 2-D to 4-D, filter banks, the CPU",
             "bench/conv.py", "conv"),
    "iir": ("the recursive Gaussians: GPU, CPU threads, accuracy", "bench/iir.py", "iir"),
    "ks": ("spatially varying Gaussian kernel superposition", "bench/ks.py, bench/ks_plots.py",
           "ks"),
    "ncu": ("Nsight Compute metrics of the separable and non-separable kernels", "bench/ncu.py",
            "profile"),
    "user": ("what users call: Python with numpy and CuPy arrays, new sigma maps, the CLI",
             "bench/user_paths.py", "user"),
    "auto": ("method auto's choices: measured on this card, modelled for others",
             "bench/auto_choices.py", "auto"),
    "dask": ("ndfilt.dask against dask-image: a CPU LocalCluster (by hand, any machine) and "
             "dask_cuda on several GPUs (gpu-check part daskgpu)", "bench/dask_bench.py", ""),
    "slabs": ("numpy arrays past the GPU call's memory limit, in slabs, beside the bus; several "
              "GPUs in one process (gpu-check part gpus)", "bench/slabs.py", "slabs"),
    "dropin": ("the rest of scipy.ndimage (rank, uniform, derivatives, NaN-aware) against scipy, "
               "OpenCV and cupyx", "bench/dropin.py", "dropin"),
}

IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")


def families(results):
    """The known families first, in FAMILIES' order, then any other folder, by name."""
    found = sorted(d for d in os.listdir(results) if os.path.isdir(os.path.join(results, d))
                   and not d.startswith((".", "_")))
    return [f for f in FAMILIES if f in found] + [f for f in found if f not in FAMILIES]


def _pick(folder, fam, ext):
    """folder/<fam>.<ext>, else the folder's only *.<ext>, else None."""
    own = os.path.join(folder, f"{fam}.{ext}")
    if os.path.isfile(own):
        return own
    any_ = sorted(n for n in os.listdir(folder) if n.endswith("." + ext))
    return os.path.join(folder, any_[0]) if len(any_) == 1 else None


def run_of(folder, fam):
    """(GPU, date, commit) of the family's run from its JSON's meta."""
    path = _pick(folder, fam, "json")
    if path is None:
        return ("no JSON", "–", "–")
    with open(path, encoding="utf-8") as f:
        meta = json.load(f).get("meta") or {}
    gpu = str(meta.get("gpu") or "?")
    if isinstance(meta.get("gpus"), int) and meta["gpus"] > 1:
        gpu = f"{meta['gpus']} x {gpu}"
    if meta.get("driver") and meta["driver"] != "?":
        gpu += f" (driver {meta['driver']})"
    return (gpu, str(meta.get("date") or "?"), str(meta.get("commit") or "?"))


def parts(folder, fam):
    """The family's runs: its own (<fam>.md), then any other <part>.md beside it, by name."""
    stems = sorted(n[:-3] for n in os.listdir(folder) if n.endswith(".md"))
    return ([fam] if fam in stems or not stems else []) + [p for p in stems if p != fam]


def section(folder, fam, rel, plots=True):
    """The family's Markdown, headings one level down, relative image paths made relative to the
    repository root (rel: the folder's path from there), and the plots it does not show."""
    path = _pick(folder, fam, "md")
    if path is None:
        lines = [f"# {fam}", "", f"(no {fam}.md in {rel}/)"]
    else:
        with open(path, encoding="utf-8") as f:
            lines = f.read().rstrip("\n").split("\n")
    out, shown, fence = [], set(), False
    for ln in lines:
        if ln.lstrip().startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,5} ", ln):
            ln = "#" + ln

        def repath(m):
            alt, target = m.group(1), m.group(2)
            if "://" in target or target.startswith(("/", "#", "bench/")):
                return m.group(0)
            shown.add(os.path.basename(target))
            return f"![{alt}]({rel}/{target})"
        out.append(IMAGE.sub(repath, ln))
    extra = sorted(n for n in os.listdir(folder) if plots and n.endswith(".png") and n not in shown)
    for n in extra:
        out += ["", f"![{n[:-4]}]({rel}/{n})"]
    return out


def report(results, rel_results):
    fams = families(results)
    L = ["# Benchmarks", "",
         "Generated by `bench/report.py` from the result sets under `bench/results/<family>/`; "
         "do not edit by hand. Each set is one run of its family's benchmark through "
         "`scripts/gpu-check.sh`, which writes it under `$OUT/<family>/`: to refresh a family, "
         "copy that folder over `bench/results/<family>/` and run `python3 bench/report.py`. "
         "The designs these figures measure, and what earlier runs and probes taught, are in "
         "docs/design/.", "",
         "The families were measured at different commits and on different machines of a kind "
         "(a lent GPU's copy bandwidth and host vary from one machine to the next): compare "
         "figures within one family's run.", "",
         "| family | what | program (gpu-check part) | GPU | date | commit |",
         "|---|---|---|---|---|---|"]
    for fam in fams:
        what, prog, part = FAMILIES.get(fam, ("", "", ""))
        for stem in parts(os.path.join(results, fam), fam):
            gpu, date, commit = run_of(os.path.join(results, fam), stem)
            name = fam if stem == fam else f"{fam}/{stem}"
            L.append(f"| {name} | {what if stem == fam else ''} | "
                     f"{prog}{f' ({part})' if part else ''} | {gpu} | {date} | {commit} |")
    L.append("")
    for fam in fams:
        folder = os.path.join(results, fam)
        rel = fam if rel_results == "." else f"{rel_results}/{fam}"
        for i, stem in enumerate(parts(folder, fam)):
            gpu, date, commit = run_of(folder, stem)
            body = section(folder, stem, rel, plots=i == 0)
            if not body[0].startswith("## "):  # a family's Markdown opens with its title
                body = [f"## {fam if stem == fam else f'{fam}: {stem}'}", ""] + body
            L += [body[0], "", f"*{rel}/{'' if stem == fam else stem + '.json'}: {gpu}, {date}, "
                  f"commit {commit}.*"] + body[1:] + [""]
    return "\n".join(L).rstrip("\n") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(HERE, "results"),
                    help="the folder of result sets (default: bench/results)")
    ap.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"),
                    help="the file written (default: BENCHMARKS.md; '-': standard output)")
    a = ap.parse_args()
    results = os.path.abspath(a.results)
    if not os.path.isdir(results):
        ap.error(f"no folder {a.results}")
    base = ROOT if a.out == "-" else os.path.dirname(os.path.abspath(a.out))
    text = report(results, os.path.relpath(results, base).replace(os.sep, "/"))
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(a.out + ".tmp", a.out)
        print(f"wrote {a.out}: {', '.join(families(results))}")


if __name__ == "__main__":
    main()
