#!/usr/bin/env python3
"""ncu.py - Nsight Compute profile of ndfilt's GPU kernels: separable (issue 03) and
non-separable direct and FFT (issue 04).

`python3 bench/ncu.py run OP SHAPE PARAM METHOD` runs one call on a random CuPy array (the
process ncu profiles): OP gauss (PARAM = sigma) or corr (PARAM = kernel size per axis).
`python3 bench/ncu.py table CSV...` turns the CSV files of `ncu --csv --metrics METRICS` (one
per case, named CASE.csv) into a Markdown table, and `section TABLE.md` wraps that table as a
BENCHMARKS.md section. scripts/gpu-check.sh (part `profile`) runs both."""
import csv
import os
import sys

import numpy as np

METRICS = [
    ("gpu__time_duration.sum", "time µs", 1e-3),
    ("dram__bytes.sum", "DRAM MB", 1e-6),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM % peak", 1),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM % peak", 1),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue active %", 1),
    ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "FMA pipe %", 1),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy %", 1),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "smem bank conflicts", 1),
    ("lts__t_sector_hit_rate.pct", "L2 hit %", 1),
    ("smsp__inst_executed.sum", "warp instructions M", 1e-6),
    ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "FFMA share %", None),
]
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
CASES = [("gauss", "4096x4096", 1, "cuda_sep"), ("gauss", "4096x4096", 1, "cuda_sep_fused"),
         ("gauss", "4096x4096", 2, "cuda_sep"), ("gauss", "4096x4096", 4, "cuda_sep"),
         ("gauss", "4096x4096", 16, "cuda_sep"), ("gauss", "256x256x256", 4.5, "cuda_sep"),
         ("corr", "2048x2048", 3, "cuda_direct"), ("corr", "2048x2048", 17, "cuda_direct"),
         ("corr", "256x256x256", 3, "cuda_direct"), ("corr", "256x256x256", 7, "cuda_direct"),
         ("corr", "256x256x256", 17, "cuda_fft")]


def run(op, shape, param, method):
    import cupy as cp
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import ndfilt
    shp = tuple(int(v) for v in shape.split("x"))
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.uniform(0, 1, shp).astype(np.float32))
    if op == "gauss":
        ndfilt.gaussian_filter(x, float(param), mode="constant", method=method)
    else:
        w = rng.uniform(-1, 1, (int(param),) * len(shp)).astype(np.float32)
        ndfilt.correlate(x, w, mode="constant", method=method)
    cp.cuda.Device().synchronize()


def _kernel(name):
    """sep_rows<9, true>(...) -> sep_rows<9,true>"""
    base = name.split("(")[0]
    return base.replace(" ", "").replace("(anonymousnamespace)::", "")


def table(paths):
    rows = []
    for p in paths:
        case = os.path.basename(p)[:-4]
        with open(p) as f:
            lines = [ln for ln in f if ln.startswith('"')]
        by_id = {}
        for rec in csv.DictReader(lines):
            k = by_id.setdefault(rec["ID"], {"kernel": _kernel(rec["Kernel Name"])})
            try:
                k[rec["Metric Name"]] = float(rec["Metric Value"].replace(",", ""))
            except ValueError:
                pass
        for k in by_id.values():
            if FFMA in k and k.get("smsp__inst_executed.sum"):  # thread FFMAs / 32 per warp
                k[FFMA] = 100.0 * k[FFMA] / 32.0 / k["smsp__inst_executed.sum"]
            rows.append([case, k["kernel"]] + [
                "%.1f" % (k[m] * (s or 1)) if m in k else "–" for m, _, s in METRICS])
    head = ["case", "kernel"] + [lab for _, lab, _ in METRICS]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    print("\n".join(out))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(*sys.argv[2:6])
    elif sys.argv[1] == "cases":
        for op, shape, param, method in CASES:
            print(f"{op} {shape} {param:g} {method}")
    elif sys.argv[1] == "section":  # the table as a BENCHMARKS.md section
        print("## ncu profile of the GPU kernels\n")
        print("Nsight Compute, one call per case on CuPy arrays, mode constant: gauss = "
              "gaussian_filter (sigma), corr = correlate with a random k^ndim kernel "
              "(`bench/ncu.py`, run by `scripts/gpu-check.sh` part `profile`); every kernel the "
              "call launches, cuFFT's included. FFMA share = "
              "warp-level FFMA instructions / all warp instructions executed: the rest is "
              "addressing, staging, boundary handling and loads.\n")
        with open(sys.argv[2]) as f:
            print(f.read())
    elif sys.argv[1] == "metrics":
        print(",".join(m for m, _, _ in METRICS))
    else:
        table(sys.argv[2:])
