#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/peers.py - the separable family (`sep`): times ndfilt and its peers on the same arrays in
one process, with the machine's ceilings (device-to-device copy bandwidth, FP32 FMA rate)
measured in the same run. Writes sep.json, sep.md, correlate1d.png and gaussian.png to --out:
the layout of bench/results/sep/, from which bench/report.py makes BENCHMARKS.md.
scripts/gpu-check.sh (part `bench`) runs it into $OUT/sep/. Needs SciPy; uses CuPy, PyTorch,
OpenCV and matplotlib when present. Without CuPy or a GPU the GPU families report 'skipped (no
GPU)' and the CPU ones run. Families: correlate1d (here), gaussian, gaussian_sweep, gaussian_cpu,
abramov_2d (bench/gaussian.py, issue 03).

  python3 bench/peers.py --out DIR [--quick] [--families F,..]
  python3 bench/peers.py --md-only DIR      (sep.md again from DIR/sep.json)"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import ndfilt  # noqa: E402
from scipy import ndimage as sndi  # noqa: E402
import gaussian  # noqa: E402  (bench/gaussian.py)
from timing import clean_json, commit, cpu_ms  # noqa: E402  (bench/timing.py)

NO_GPU = None  # why the GPU families are skipped, or None
try:
    import cupy as cp
    import cupyx.scipy.ndimage as cndi
    if cp.cuda.runtime.getDeviceCount() < 1:
        raise RuntimeError("no CUDA device")
except Exception as e:  # ImportError, or CuPy without a driver / device
    cp = cndi = None
    NO_GPU = f"{type(e).__name__}: {e}".split("\n")[0][:200]
if NO_GPU is None and not any(m.startswith("cuda") for ms in ndfilt.solvers().values()
                              for m in ms):
    NO_GPU = "this libndfilt has no CUDA solvers (built without CUDA)"

torch = F = None
if NO_GPU is None:
    try:
        import torch
        if not torch.cuda.is_available():
            torch = None
        else:
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            import torch.nn.functional as F
    except ImportError:
        torch = None
try:
    import cv2
except ImportError:
    cv2 = None

REPS, WARM = 20, 3


def gpu_ms(fn, inputs, reps=REPS):
    """Median ms of fn(x) over CUDA events, after warm-up, rotating the inputs."""
    for i in range(WARM):
        fn(inputs[i % len(inputs)])
    cp.cuda.Device().synchronize()
    ts = []
    for i in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn(inputs[i % len(inputs)])
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


FMA_SRC = r"""
extern "C" __global__ void fma_loop(float *out, int iters) {
  float x = threadIdx.x * 1e-7f, a[8];
  for (int k = 0; k < 8; k++) a[k] = x + k;
  for (int i = 0; i < iters; i++)
    for (int k = 0; k < 8; k++) a[k] = fmaf(a[k], 0.99999f, 1e-6f);
  float s = 0;
  for (int k = 0; k < 8; k++) s += a[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}"""


def ceilings():
    n = 1 << 27  # 512 MiB of float32 per buffer, far beyond L2
    src, dst = cp.ones(n, cp.float32), cp.empty(n, cp.float32)
    ms = gpu_ms(lambda x: dst.__setitem__(Ellipsis, x), [src])
    bw = 2 * src.nbytes / (ms * 1e-3)
    k = cp.RawKernel(FMA_SRC, "fma_loop")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    grid, block, iters = sms * 16, 256, 8192
    out = cp.empty(grid * block, cp.float32)
    ms = gpu_ms(lambda _: k((grid,), (block,), (out, np.int32(iters))), [None])
    fma = 2.0 * 8 * iters * grid * block / (ms * 1e-3)
    del src, dst
    return {"copy_bandwidth_GBs": bw / 1e9, "fp32_fma_TFLOPs": fma / 1e12}


def torch_corr1d(shape, axis, w):
    """torch conv2d/conv3d computing correlate1d with zero padding (mode constant)."""
    nd, n = len(shape), len(w)
    ks = [1] * nd
    ks[axis] = n
    kern = torch.tensor(w, dtype=torch.float32, device="cuda").reshape([1, 1] + ks)
    pad = [0] * nd
    pad[axis] = n // 2
    conv = F.conv2d if nd == 2 else F.conv3d

    def run(x):
        return conv(x, kern, padding=tuple(pad))
    return run


def bench_correlate1d(ceil, quick):
    rows = []
    rng = np.random.default_rng(0)
    shapes = [(4096, 4096), (256, 256, 256)]
    radii = [1, 8] if quick else [1, 8, 32]
    for shape in shapes:
        hosts = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(2)]
        xs = [cp.asarray(h) for h in hosts]
        out_nd, out_cx = cp.empty(shape, cp.float32), cp.empty(shape, cp.float32)
        txs = [torch.as_tensor(x, device="cuda").reshape((1, 1) + shape) for x in xs] \
            if torch else None
        for axis in range(len(shape)):
            for r in radii:
                w = rng.uniform(-1, 1, 2 * r + 1)
                row = {"family": "correlate1d", "shape": list(shape), "axis": axis, "radius": r,
                       "taps": 2 * r + 1, "mode": "constant", "dtype": "float32", "ms": {}}
                nd_fn = lambda x: ndfilt.correlate1d(x, w, axis=axis, mode="constant",
                                                     output=out_nd)
                wc = cp.asarray(w)
                cx_fn = lambda x: cndi.correlate1d(x, wc, axis=axis, mode="constant",
                                                   output=out_cx)
                row["gpu_peers"], row["cpu"] = ["cupyx.scipy.ndimage"], []
                row["ms"]["ndfilt"] = gpu_ms(nd_fn, xs)
                row["solver"] = "cuda_corr1d"
                row["ms"]["cupyx.scipy.ndimage"] = gpu_ms(cx_fn, xs)
                nd_fn(xs[0])
                cx_fn(xs[0])
                scale = float(cp.abs(out_cx).max())
                row["max_rel_diff_vs_cupyx"] = float(cp.abs(out_nd - out_cx).max()) / scale
                if torch:
                    tf = torch_corr1d(shape, axis, w)
                    name = "torch conv%dd (fp32, no TF32)" % len(shape)
                    row["ms"][name] = gpu_ms(tf, txs)
                    row["gpu_peers"].append(name)
                vox = float(np.prod(shape))
                floor_bw = 8 * vox / (ceil["copy_bandwidth_GBs"] * 1e9) * 1e3
                floor_fma = 2 * vox * (2 * r + 1) / (ceil["fp32_fma_TFLOPs"] * 1e12) * 1e3
                row["floor_ms"] = max(floor_bw, floor_fma)
                row["floor"] = "bandwidth" if floor_bw >= floor_fma else "fma"
                if r == 8:  # CPU peers on one radius: they are slow
                    h = hosts[0]
                    ref = sndi.correlate1d(h.astype(np.float64), w, axis=axis, mode="constant")
                    got = cp.asnumpy(out_nd)  # holds ndfilt(xs[0]) from the check above
                    row["max_rel_err_vs_scipy_f64"] = float(np.abs(got - ref).max()
                                                            / np.abs(ref).max())
                    row["cpu"] = ["ndfilt cpu", "scipy.ndimage (1 thread)"]
                    ndfilt.set_device("cpu")
                    row["ms"]["ndfilt cpu"] = cpu_ms(
                        lambda x: ndfilt.correlate1d(x, w, axis=axis, mode="constant"), h)
                    ndfilt.set_device("auto")
                    row["ms"]["scipy.ndimage (1 thread)"] = cpu_ms(
                        lambda x: sndi.correlate1d(x, w, axis=axis, mode="constant"), h, reps=3)
                    if cv2 is not None and len(shape) == 2:
                        k = w.astype(np.float32).reshape((-1, 1) if axis == 0 else (1, -1))
                        name = "opencv filter2D (%d threads)" % cv2.getNumThreads()
                        row["ms"][name] = cpu_ms(
                            lambda x: cv2.filter2D(x, -1, k, borderType=cv2.BORDER_CONSTANT), h)
                        row["cpu"].append(name)
                rows.append(row)
                print(f"correlate1d {shape} axis {axis} r {r}: " + ", ".join(
                    f"{k} {v:.3f}" for k, v in row["ms"].items()), flush=True)
        del xs, txs
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def markdown(meta, ceil, rows, gres=None):
    if ceil:
        ceil_line = (f"- ceilings measured in the same run: device-to-device copy "
                     f"{ceil['copy_bandwidth_GBs']:.0f} GB/s (read + write), FP32 FMA "
                     f"{ceil['fp32_fma_TFLOPs']:.1f} TFLOP/s")
    else:
        ceil_line = "- ceilings: not measured (no GPU)"
    L = ["# Separable filtering benchmark (bench/peers.py)", "",
         f"- GPU: {meta['gpu']} (driver {meta['driver']}), CPU threads: {meta['cpu_threads']}",
         f"- date: {meta['date']}, ndfilt commit: {meta['commit']}",
         ceil_line,
         "- GPU times: CUDA events, median of %d after %d warm-ups, two input arrays rotated, "
         "outputs preallocated, no transfers. CPU times: median wall time." % (REPS, WARM),
         "- ratio = best GPU peer time / ndfilt time (above 1: ndfilt is faster; below 1: slower). "
         "% ceiling = floor time / ndfilt time, where the floor is one read + one write at the "
         "copy bandwidth or the FMAs at the FMA rate, whichever is larger.", ""]
    if meta.get("correlate1d_skipped"):
        L += ["## correlate1d", "", f"skipped (no GPU): {meta['correlate1d_skipped']}", ""]
    fams = sorted({r["family"] for r in rows})
    for fam in fams:
        fr = [r for r in rows if r["family"] == fam]
        peers = []
        for r in fr:
            peers += [k for k in r["ms"] if k != "ndfilt" and k not in peers]
        L += [f"## {fam}", "", "| shape | axis | taps | ndfilt ms | " + " | ".join(
            f"{p} ms" for p in peers) + " | ratio | % ceiling | rel diff vs cupyx | rel err vs scipy f64 |",
            "|" + "---|" * (8 + len(peers))]
        for r in fr:
            gpu_peers = [r["ms"][k] for k in r["gpu_peers"]]
            ratio = min(gpu_peers) / r["ms"]["ndfilt"] if gpu_peers else float("nan")
            e64 = r.get("max_rel_err_vs_scipy_f64")
            L.append("| %s | %d | %d | %.3f | %s | %.2f | %.0f%% | %.1e | %s |" % (
                "×".join(map(str, r["shape"])), r["axis"], r["taps"], r["ms"]["ndfilt"],
                " | ".join("%.3f" % r["ms"][p] if p in r["ms"] else "–" for p in peers),
                ratio, 100 * r["floor_ms"] / r["ms"]["ndfilt"], r["max_rel_diff_vs_cupyx"],
                "%.1e" % e64 if e64 is not None else "–"))
        L += ["", f"![{fam}]({fam}.png)", ""]
    if gres:
        L += gaussian.markdown(gres)
    if meta.get("seconds"):
        L += ["Seconds per family: " + ", ".join(f"{k} {v:g}" for k, v in
                                                 meta["seconds"].items()) + ".", ""]
    return "\n".join(L) + "\n"


def plot(rows, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    for fam in sorted({r["family"] for r in rows}):
        fr = [r for r in rows if r["family"] == fam]
        names = ["ndfilt"]
        for r in fr:
            names += [k for k in r["gpu_peers"] if k not in names]
        labels = ["%s ax%d r%d" % ("×".join(map(str, r["shape"])), r["axis"], r["radius"])
                  for r in fr]
        fig, ax = plt.subplots(figsize=(max(8, len(fr) * 0.7), 4.5))
        wdt = 0.8 / len(names)
        for i, nme in enumerate(names):
            ax.bar(np.arange(len(fr)) + i * wdt, [r["ms"].get(nme, np.nan) for r in fr], wdt,
                   label=nme)
        ax.plot(np.arange(len(fr)) + 0.4 - wdt / 2, [r["floor_ms"] for r in fr], "k_", ms=14,
                label="floor (bandwidth or FMA)")
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_xticks(np.arange(len(fr)) + 0.4 - wdt / 2, labels, rotation=60, ha="right",
                      fontsize=7)
        ax.set_title(f"{fam}: ndfilt vs peers on the same GPU arrays")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"{fam}.png"), dpi=110)


def helpers():
    """What bench/gaussian.py needs from this module: timers, peers, why there is no GPU."""
    import types
    return types.SimpleNamespace(gpu_ms=gpu_ms, cpu_ms=cpu_ms, torch_corr1d=torch_corr1d,
                                 cp=cp, cndi=cndi, torch=torch, cv2=cv2, sndi=sndi,
                                 no_gpu=NO_GPU)


def write_md(doc, out):
    """sep.md from the JSON document (what main writes, or DIR/sep.json again)."""
    gres = {k: doc[k] for k in gaussian.FAMILIES if k in doc}
    md = markdown(doc["meta"], doc["ceilings"], doc["results"], gres)
    with open(os.path.join(out, "sep.md"), "w") as f:
        f.write(md)
    return md


def main():
    fams = ["correlate1d"] + gaussian.FAMILIES
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--quick", action="store_true", help="fewer cases")
    ap.add_argument("--families", default=",".join(fams),
                    help="comma-separated subset of: %(default)s")
    ap.add_argument("--md-only", metavar="DIR", help="rewrite DIR/sep.md from DIR/sep.json")
    a = ap.parse_args()
    if a.md_only:
        with open(os.path.join(a.md_only, "sep.json")) as f:
            print(write_md(json.load(f), a.md_only))
        return
    want = [f for f in a.families.split(",") if f]
    bad = [f for f in want if f not in fams]
    if bad:
        ap.error(f"unknown families: {', '.join(bad)}")
    os.makedirs(a.out, exist_ok=True)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True
                             ).stdout.strip().split("\n")[0].split(", ")
    except OSError:
        smi = [""]
    meta = {"gpu": smi[0] or "none", "driver": smi[1] if len(smi) > 1 else "?",
            "date": datetime.date.today().isoformat(),
            "commit": commit(),
            "cpu_threads": os.cpu_count(), "ndfilt": ndfilt.__version__,
            "cupy": cp.__version__ if cp else None, "torch": torch.__version__ if torch else None,
            "opencv": cv2.__version__ if cv2 else None, "device": ndfilt.device(),
            "no_gpu": NO_GPU, "seconds": {}}
    t = time.time()
    ceil = ceilings() if NO_GPU is None else None
    meta["seconds"]["ceilings"] = round(time.time() - t, 1)
    print("ceilings:", json.dumps(ceil), flush=True)
    rows = []
    if "correlate1d" in want:
        t = time.time()
        if NO_GPU is None:
            rows = bench_correlate1d(ceil, a.quick)
        else:
            meta["correlate1d_skipped"] = NO_GPU
            print(f"correlate1d: skipped (no GPU): {NO_GPU}", flush=True)
        meta["seconds"]["correlate1d"] = round(time.time() - t, 1)
    gres, secs = gaussian.run_all(helpers(), ceil, a.quick,
                                  [f for f in gaussian.FAMILIES if f in want])
    meta["seconds"].update(secs)
    doc = {"meta": meta, "ceilings": ceil, "results": rows}
    doc.update(gres)  # one top-level key per family of bench/gaussian.py
    with open(os.path.join(a.out, "sep.json"), "w") as f:
        json.dump(clean_json(doc), f, indent=1)  # strict JSON: NaN as null
    md = write_md(doc, a.out)
    plot(rows, a.out)
    gaussian.plot(gres, a.out)
    print(md)
    errs = [k for k, v in gres.items() if isinstance(v, dict) and "error" in v]
    if errs:
        print("families that failed: " + ", ".join(errs), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
