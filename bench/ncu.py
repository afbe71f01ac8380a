#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""ncu.py - Nsight Compute profile of ndfilt's GPU kernels (family `ncu`): separable (issue 03)
and non-separable direct and FFT (issue 04).

`python3 bench/ncu.py run OP SHAPE PARAM METHOD` runs one call on a random CuPy array (the
process ncu profiles): OP gauss (PARAM = sigma) or corr (PARAM = kernel size per axis).
`python3 bench/ncu.py write DIR CSV...` turns the CSV files of `ncu --csv --metrics METRICS` (one
per case, named CASE.csv) into DIR/ncu.json (the GPU, date and commit, and every figure) and
DIR/ncu.md: the layout of bench/results/ncu/, from which bench/report.py makes BENCHMARKS.md.
`md DIR` writes DIR/ncu.md again from DIR/ncu.json; `table CSV...` prints the table alone.
scripts/gpu-check.sh (part `profile`) runs `cases`, `run` under ncu, then `write` into
$OUT/ncu/."""
import csv
import datetime
import json
import os
import subprocess
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


def rows_of(paths):
    """One dict a kernel launch: case, kernel and each metric's label with its value (None where
    ncu gave none), in METRICS' units."""
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
            row = {"case": case, "kernel": k["kernel"]}
            row.update({lab: k[m] * (s or 1) if m in k else None for m, lab, s in METRICS})
            rows.append(row)
    return rows


def table_lines(rows):
    head = ["case", "kernel"] + [lab for _, lab, _ in METRICS]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join([r["case"], r["kernel"]] + [
            "%.1f" % r[lab] if r.get(lab) is not None else "–" for _, lab, _ in METRICS]) + " |")
    return out


def markdown(doc):
    m = doc["meta"]
    return "\n".join([
        "# Nsight Compute profile of the GPU kernels (bench/ncu.py)", "",
        f"- GPU: {m['gpu']} (driver {m['driver']}); date {m['date']}; ndfilt commit {m['commit']}"]
        + ([f"- note: {m['note']}"] if m.get("note") else []) + [
        "", "One call per case on CuPy arrays, mode constant: gauss = gaussian_filter (sigma), "
        "corr = correlate with a random k^ndim kernel (`bench/ncu.py`, run by "
        "`scripts/gpu-check.sh` part `profile`); every kernel the call launches, cuFFT's "
        "included (a one-shot cuda_fft call also transforms its kernel). FFMA share = warp-level "
        "FFMA instructions / all warp instructions executed: the rest is addressing, staging, "
        "boundary handling and loads. Nsight Compute runs the GPU at its own clocks, so its "
        "times are above the benchmarks' (about 20% on an H200).", ""] + table_lines(doc["rows"])
    ) + "\n"


def _gpu():
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True)
        name, _, driver = q.stdout.strip().split("\n")[0].partition(", ")
        return name or "none", driver or "?"
    except OSError:
        return "none", "?"


def write(out, paths):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from timing import commit  # bench/timing.py: NDF_COMMIT, else git's
    gpu, driver = _gpu()
    doc = {"meta": {"gpu": gpu, "driver": driver, "date": datetime.date.today().isoformat(),
                    "commit": commit(), "metrics": {lab: m for m, lab, _ in METRICS}},
           "rows": rows_of(paths)}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ncu.json"), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
    with open(os.path.join(out, "ncu.md"), "w") as f:
        f.write(markdown(doc))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(*sys.argv[2:6])
    elif sys.argv[1] == "cases":
        for op, shape, param, method in CASES:
            print(f"{op} {shape} {param:g} {method}")
    elif sys.argv[1] == "metrics":
        print(",".join(m for m, _, _ in METRICS))
    elif sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "md":
        with open(os.path.join(sys.argv[2], "ncu.json")) as f:
            text = markdown(json.load(f))
        with open(os.path.join(sys.argv[2], "ncu.md"), "w") as f:
            f.write(text)
    else:
        print("\n".join(table_lines(rows_of(sys.argv[2:]))))
