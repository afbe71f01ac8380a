#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/gaussian.py - the separable-convolution and Gaussian FIR families of bench/peers.py
(issue 03), run by peers.py with its timers and peers:

  gaussian        (GPU) ndfilt gaussian_filter(method='cuda_sep') vs cupyx gaussian_filter vs
                  torch conv2d/conv3d (the 1-D kernels as successive passes, no TF32), float32,
                  4096² at sigma 1, 4, 16 and 256³ at sigma 4.5, mode 'constant'.
  gaussian_sweep  (GPU) 4096² throughput vs sigma, ndfilt vs cupyx, mode 'constant'.
  gaussian_cpu    (CPU) 4096² sigma 4, mode 'reflect': ndfilt cpu_sep vs OpenCV GaussianBlur
                  (BORDER_REFLECT) at 1/2/4/8/16 threads (one child process per count, so that
                  NDF_THREADS is read when ndfilt's CPU context is made), and scipy (1 thread).
  abramov_2d      The seed's table (Abramov's slides): radius 8 (17 taps), 400² and 2000²,
                  naive CPU / naive GPU / shared memory / separable / optimised separable.

`python3 bench/gaussian.py --cpu-worker N` is the child of gaussian_cpu: it times ndfilt and
OpenCV with N threads and prints one JSON line."""
import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import ndfilt  # noqa: E402
from timing import cpu_ms, family_status as _status  # noqa: E402  (bench/timing.py)

# torch pads with zeros inside conv2d/conv3d, so 'constant' is the mode all GPU peers compute
# the same way (scipy, cupyx and ndfilt take it too); the seed's separable sample also treats
# the outside as zero.
MODE_GPU = "constant"
# scipy 'reflect' (d c b a | a b c d | d c b a) is OpenCV's BORDER_REFLECT; scipy 'mirror' would
# be BORDER_REFLECT_101.
MODE_CPU = "reflect"
CV_BORDER = {"reflect": "BORDER_REFLECT", "mirror": "BORDER_REFLECT_101",
             "constant": "BORDER_CONSTANT", "nearest": "BORDER_REPLICATE", "wrap": "BORDER_WRAP"}

A_CASES = [((4096, 4096), 1.0), ((4096, 4096), 4.0), ((4096, 4096), 16.0),
           ((256, 256, 256), 4.5)]
A_TARGET_RATIO, A_TARGET_BW_2D = 3.0, 50.0  # issue 03: >= 3x cupyx; >= 50% copy bandwidth (2D)
SWEEP = [0.5, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
SWEEP_QUICK = [0.5, 1, 4, 16, 32]
CPU_N, CPU_SIGMA = 4096, 4.0
THREADS = [1, 2, 4, 8, 16]
SEED_R, SEED_SIGMA = 8, 8.0 / 3.0
SEED_SIZES = [400, 2000]
SEED_STEPS = ["naive CPU", "naive GPU", "shared memory (dense)", "separable",
              "optimised separable"]
SEED_HOW = ["scipy.ndimage.correlate, dense 17×17 (1 thread)",
            "cupyx.scipy.ndimage.correlate, dense 17×17",
            "not in ndfilt until issue 04",
            "ndfilt correlate1d cuda_corr1d, axis 0 then axis 1",
            "ndfilt sepfilter cuda_sep"]
SEED_2011 = {400: [91, 27, 26.9, 3, 1.6], 2000: [2330, 693, 663, 72, 38]}
FAMILIES = ["gaussian", "gaussian_sweep", "gaussian_cpu", "abramov_2d"]


def radius_of(sigma, truncate=4.0):
    return int(truncate * float(sigma) + 0.5)


def kernel1d(sigma, radius=None):
    """scipy.ndimage.gaussian_filter1d's order-0 weights (sampled, normalised), float64."""
    r = radius_of(sigma) if radius is None else radius
    x = np.arange(-r, r + 1, dtype=np.float64)
    w = np.exp(-0.5 / (sigma * sigma) * x * x)
    return w / w.sum()


def rel_err(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


def pct_bw(nbytes, passes, ms, ceil):
    """% of the measured copy bandwidth, counting one read + one write of the array per pass."""
    return 100.0 * 2 * nbytes * passes / (ms * 1e-3) / (ceil["copy_bandwidth_GBs"] * 1e9)


def _skipped(H):
    return {"skipped": "no GPU", "why": H.no_gpu}


# ------------------------------------------------------------------ A: gaussian (GPU)

STREAM_CALLS = 20  # calls back to back per timing in _stream_ms


def _stream_ms(H, fn, xs, reps=7):
    """Median ms per call of STREAM_CALLS calls issued back to back between two
    CUDA events: the GPU time when the host keeps ahead (a pipeline), where
    H.gpu_ms times one call from idle, host overhead included."""
    cp = H.cp
    for i in range(3):
        fn(xs[i % len(xs)])
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for i in range(STREAM_CALLS):
            fn(xs[i % len(xs)])
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) / STREAM_CALLS)
    return float(np.median(ts))


def _time_gauss(H, cndi, xs, sigma, out_nd, out_cx, row):
    """ndfilt (cuda_sep, and cuda_sep_fused: the last two axes in one pass) and cupyx
    gaussian_filter timed on the same arrays: one call from idle into row["ms"],
    back-to-back calls into row["ms_stream"]. Both outputs are left holding
    their result for xs[0]."""
    def nd(method):
        return lambda x: ndfilt.gaussian_filter(x, sigma, output=out_nd, mode=MODE_GPU,
                                                method=method)
    fns = {"ndfilt": nd("cuda_sep"), "ndfilt_fused": nd("cuda_sep_fused"),
           "cupyx": lambda x: cndi.gaussian_filter(x, sigma, output=out_cx, mode=MODE_GPU)}
    row["ms_stream"] = {}
    for k, fn in fns.items():
        row["ms"][k] = H.gpu_ms(fn, xs)
        row["ms_stream"][k] = _stream_ms(H, fn, xs)
    fns["ndfilt"](xs[0])
    fns["cupyx"](xs[0])


def bench_gaussian(H, ceil, quick):
    if H.no_gpu:
        return _skipped(H)
    cp, cndi, torch = H.cp, H.cndi, H.torch
    rng = np.random.default_rng(1)
    rows = []
    for shape in dict.fromkeys(s for s, _ in A_CASES):
        hosts = [rng.uniform(0, 1, shape).astype(np.float32) for _ in range(2)]
        xs = [cp.asarray(h) for h in hosts]
        out_nd, out_cx = cp.empty(shape, cp.float32), cp.empty(shape, cp.float32)
        txs = [torch.as_tensor(x, device="cuda").reshape((1, 1) + shape) for x in xs] \
            if torch else None
        for sigma in [s for sh, s in A_CASES if sh == shape]:
            taps = 2 * radius_of(sigma) + 1
            row = {"shape": list(shape), "sigma": sigma, "taps": taps, "mode": MODE_GPU,
                   "dtype": "float32", "passes": len(shape), "ms": {}}
            _time_gauss(H, cndi, xs, sigma, out_nd, out_cx, row)
            scale = float(cp.abs(out_cx).max())
            row["max_rel_diff_vs_cupyx"] = float(cp.abs(out_nd - out_cx).max()) / scale
            if torch:
                w = kernel1d(sigma)
                passes = [H.torch_corr1d(shape, ax, w) for ax in range(len(shape))]

                def t_fn(t, passes=passes):
                    for p in passes:
                        t = p(t)
                    return t
                row["ms"]["torch"] = H.gpu_ms(t_fn, txs)
                tres = cp.asarray(t_fn(txs[0]).reshape(shape))
                row["torch_max_rel_diff_vs_cupyx"] = float(cp.abs(tres - out_cx).max()) / scale
                del tres
            nbytes = out_nd.nbytes
            row["ratio_vs_cupyx"] = row["ms"]["cupyx"] / row["ms"]["ndfilt"]
            if "torch" in row["ms"]:
                row["ratio_vs_torch"] = row["ms"]["torch"] / row["ms"]["ndfilt"]
            row["pct_copy_bw"] = {k: pct_bw(nbytes, len(shape), v, ceil)
                                  for k, v in row["ms"].items()}
            row["pct_copy_bw_stream"] = {k: pct_bw(nbytes, len(shape), v, ceil)
                                         for k, v in row["ms_stream"].items()}
            row["ratio_vs_cupyx_stream"] = row["ms_stream"]["cupyx"] / row["ms_stream"]["ndfilt"]
            row["target"] = {"ratio_vs_cupyx": A_TARGET_RATIO,
                             "met_ratio": row["ratio_vs_cupyx"] >= A_TARGET_RATIO}
            if len(shape) == 2:
                row["target"]["pct_copy_bw"] = A_TARGET_BW_2D
                row["target"]["met_bw"] = row["pct_copy_bw"]["ndfilt"] >= A_TARGET_BW_2D
            got = cp.asnumpy(out_nd)  # ndfilt(xs[0]) from the check above
            ref = H.sndi.gaussian_filter(hosts[0].astype(np.float64), sigma, mode=MODE_GPU)
            row["max_rel_err_vs_scipy_f64"] = rel_err(got, ref)
            del got, ref
            rows.append(row)
            print(f"gaussian {shape} sigma {sigma}: " + ", ".join(
                f"{k} {v:.3f}" for k, v in row["ms"].items())
                + f" ms; x{row['ratio_vs_cupyx']:.2f} vs cupyx, "
                f"{row['pct_copy_bw']['ndfilt']:.0f}% copy bw", flush=True)
        xs = txs = out_nd = out_cx = None  # the next shape's arrays replace these
        cp.get_default_memory_pool().free_all_blocks()
    return rows


# ------------------------------------------------------------------ B: sweep (GPU)

def bench_sweep(H, ceil, quick):
    if H.no_gpu:
        return _skipped(H)
    cp, cndi = H.cp, H.cndi
    shape = (4096, 4096)
    rng = np.random.default_rng(2)
    xs = [cp.asarray(rng.uniform(0, 1, shape).astype(np.float32)) for _ in range(2)]
    out_nd, out_cx = cp.empty(shape, cp.float32), cp.empty(shape, cp.float32)
    rows = []
    npix = float(np.prod(shape))
    for sigma in (SWEEP_QUICK if quick else SWEEP):
        row = {"shape": list(shape), "sigma": sigma, "taps": 2 * radius_of(sigma) + 1,
               "mode": MODE_GPU, "dtype": "float32", "ms": {}}
        _time_gauss(H, cndi, xs, sigma, out_nd, out_cx, row)
        row["max_rel_diff_vs_cupyx"] = float(cp.abs(out_nd - out_cx).max()) / float(
            cp.abs(out_cx).max())
        row["mpix_s"] = {k: npix / (v * 1e-3) / 1e6 for k, v in row["ms"].items()}
        row["pct_copy_bw"] = {k: pct_bw(out_nd.nbytes, 2, v, ceil) for k, v in row["ms"].items()}
        row["pct_copy_bw_stream"] = {k: pct_bw(out_nd.nbytes, 2, v, ceil)
                                     for k, v in row["ms_stream"].items()}
        row["ratio_vs_cupyx"] = row["ms"]["cupyx"] / row["ms"]["ndfilt"]
        rows.append(row)
        print(f"gaussian sweep sigma {sigma}: ndfilt {row['mpix_s']['ndfilt']:.0f} Mpix/s, "
              f"cupyx {row['mpix_s']['cupyx']:.0f} Mpix/s", flush=True)
    return rows


# ------------------------------------------------------------------ C: CPU threads

def _cpu_input():
    return np.random.default_rng(3).uniform(0, 1, (CPU_N, CPU_N)).astype(np.float32)


def cpu_worker(n, reps):
    """Child of gaussian_cpu: NDF_THREADS / OMP_NUM_THREADS are set by the parent."""
    x = _cpu_input()
    out = np.empty_like(x)
    res = {"threads": n, "ms": {}}
    ndfilt.set_device("cpu")
    try:
        res["ndfilt_threads"] = int(ndfilt._lib.lib.ndf_context_threads(ndfilt._context("cpu")))
    except Exception:  # a private detail of the binding; only reported
        res["ndfilt_threads"] = None
    res["ms"]["ndfilt"] = cpu_ms(lambda a: ndfilt.gaussian_filter(
        a, CPU_SIGMA, output=out, mode=MODE_CPU, method="cpu_sep"), x, reps)
    try:
        import cv2
    except ImportError:
        cv2 = None
    if cv2 is not None:
        cv2.setNumThreads(n)
        res["opencv_threads"] = cv2.getNumThreads()
        k = 2 * radius_of(CPU_SIGMA) + 1
        border = getattr(cv2, CV_BORDER[MODE_CPU])
        res["ms"]["opencv"] = cpu_ms(lambda a: cv2.GaussianBlur(
            a, (k, k), sigmaX=CPU_SIGMA, sigmaY=CPU_SIGMA, dst=out, borderType=border), x, reps)
    print(json.dumps(res), flush=True)


def bench_cpu(H, ceil, quick):
    ncpu = os.cpu_count() or 1
    threads = [t for t in THREADS if t <= ncpu]
    reps = 3 if quick else 5
    res = {"shape": [CPU_N, CPU_N], "sigma": CPU_SIGMA, "taps": 2 * radius_of(CPU_SIGMA) + 1,
           "mode": MODE_CPU, "opencv_border": CV_BORDER[MODE_CPU], "dtype": "float32",
           "cpu_count": ncpu, "rows": [], "opencv": H.cv2.__version__ if H.cv2 else None}
    for n in threads:
        env = dict(os.environ, NDF_THREADS=str(n), OMP_NUM_THREADS=str(n), NDF_DEVICE="cpu")
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--cpu-worker", str(n),
                            "--reps", str(reps)], env=env, capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            raise RuntimeError(f"cpu worker ({n} threads) failed: {p.stderr.strip()[-800:]}")
        row = json.loads(p.stdout.strip().splitlines()[-1])
        if "opencv" in row["ms"]:
            row["ndfilt_over_opencv"] = row["ms"]["ndfilt"] / row["ms"]["opencv"]
        res["rows"].append(row)
        print(f"gaussian cpu {n} threads: " + ", ".join(
            f"{k} {v:.2f}" for k, v in row["ms"].items()) + " ms", flush=True)
    for row in res["rows"]:
        for k, v in row["ms"].items():
            row.setdefault("speedup_vs_1_thread", {})[k] = res["rows"][0]["ms"][k] / v
    # scipy (single-threaded) and the accuracy of both against scipy in float64, in this process
    x = _cpu_input()
    res["scipy_1_thread_ms"] = H.cpu_ms(
        lambda a: H.sndi.gaussian_filter(a, CPU_SIGMA, mode=MODE_CPU), x, reps=2 if quick else 3)
    ref = H.sndi.gaussian_filter(x.astype(np.float64), CPU_SIGMA, mode=MODE_CPU)
    ndfilt.set_device("cpu")
    try:
        got = ndfilt.gaussian_filter(x, CPU_SIGMA, mode=MODE_CPU, method="cpu_sep")
    finally:
        ndfilt.set_device("auto")
    res["max_rel_err_vs_scipy_f64"] = {"ndfilt": rel_err(got, ref)}
    if H.cv2 is not None:
        k = 2 * radius_of(CPU_SIGMA) + 1
        got = H.cv2.GaussianBlur(x, (k, k), sigmaX=CPU_SIGMA, sigmaY=CPU_SIGMA,
                                 borderType=getattr(H.cv2, CV_BORDER[MODE_CPU]))
        res["max_rel_err_vs_scipy_f64"]["opencv"] = rel_err(got, ref)
    top = res["rows"][-1]
    res["target"] = {"threads": top["threads"], "rule": "ndfilt at 16 threads <= OpenCV at 16",
                     "met": ("opencv" in top["ms"]
                             and top["ms"]["ndfilt"] <= top["ms"]["opencv"])}
    if top["threads"] != 16:
        res["target"]["note"] = f"only {ncpu} CPUs: compared at {top['threads']} threads"
    return res


# ------------------------------------------------------------------ D: the seed's table

def bench_abramov(H, ceil, quick):
    sndi, cp = H.sndi, H.cp
    w = kernel1d(SEED_SIGMA, SEED_R)
    K = np.outer(w, w)
    rng = np.random.default_rng(4)
    res = {"radius": SEED_R, "taps": 2 * SEED_R + 1, "sigma": SEED_SIGMA, "mode": MODE_GPU,
           "dtype": "float32", "steps": SEED_STEPS, "how": SEED_HOW, "seed_2011_ms": {},
           "sizes": {}}
    for n in SEED_SIZES:
        res["seed_2011_ms"][str(n)] = SEED_2011[n]
        hosts = [rng.uniform(0, 1, (n, n)).astype(np.float32) for _ in range(2)]
        ref = sndi.correlate1d(sndi.correlate1d(hosts[0].astype(np.float64), w, axis=0,
                                                mode=MODE_GPU), w, axis=1, mode=MODE_GPU)
        ms, err = {}, {}
        reps = (1 if quick else 3) if n >= 2000 else 5
        ms["naive CPU"] = H.cpu_ms(lambda a: sndi.correlate(a, K, mode=MODE_GPU), hosts[0],
                                   reps=reps)
        err["naive CPU"] = rel_err(sndi.correlate(hosts[0], K, mode=MODE_GPU), ref)
        ms["shared memory (dense)"] = "n/a (issue 04)"
        if H.no_gpu:
            for s in ("naive GPU", "separable", "optimised separable"):
                ms[s] = "skipped (no GPU)"
        else:
            xs = [cp.asarray(h) for h in hosts]
            out, tmp = cp.empty((n, n), cp.float32), cp.empty((n, n), cp.float32)
            Kc = cp.asarray(K.astype(np.float32))
            fns = {
                "naive GPU": lambda x: H.cndi.correlate(x, Kc, output=out, mode=MODE_GPU),
                "separable": lambda x: (
                    ndfilt.correlate1d(x, w, axis=0, output=tmp, mode=MODE_GPU,
                                       method="cuda_corr1d"),
                    ndfilt.correlate1d(tmp, w, axis=1, output=out, mode=MODE_GPU,
                                       method="cuda_corr1d")),
                "optimised separable": lambda x: ndfilt.sepfilter(
                    x, [w, w], output=out, mode=MODE_GPU, method="cuda_sep")}
            for s, fn in fns.items():
                ms[s] = H.gpu_ms(fn, xs)
                fn(xs[0])
                err[s] = rel_err(cp.asnumpy(out), ref)
        # speed-up of each measured step over the step before it that was measured
        up, prev = {}, None
        for s in SEED_STEPS:
            if isinstance(ms[s], float):
                if prev is not None:
                    up[s] = {"speedup": ms[prev] / ms[s], "over": prev}
                prev = s
        seed, seed_up = SEED_2011[n], {}
        for i in range(1, len(seed)):
            seed_up[SEED_STEPS[i]] = seed[i - 1] / seed[i]
        res["sizes"][str(n)] = {"ms": ms, "speedup": up, "seed_2011_speedup": seed_up,
                                "max_rel_err_vs_scipy_f64": err}
        print(f"abramov {n}²: " + ", ".join(
            f"{s} {v:.3f}" if isinstance(v, float) else f"{s} {v}" for s, v in ms.items())
            + " ms", flush=True)
    return res


RUNNERS = {"gaussian": bench_gaussian, "gaussian_sweep": bench_sweep,
           "gaussian_cpu": bench_cpu, "abramov_2d": bench_abramov}


def run_all(H, ceil, quick, families=FAMILIES):
    """{family: result} for the families asked for; a family that raises gets {'error': ...}.
    Also returns {family: seconds}."""
    out, secs = {}, {}
    for fam in families:
        t = time.time()
        try:
            out[fam] = RUNNERS[fam](H, ceil, quick)
        except Exception as e:
            traceback.print_exc()
            out[fam] = {"error": f"{type(e).__name__}: {e}"}
        if H.cp is not None:  # the family's arrays are gone with its frame
            H.cp.get_default_memory_pool().free_all_blocks()
        secs[fam] = round(time.time() - t, 1)
        print(f"{fam}: {secs[fam]} s", flush=True)
    return out, secs


# ------------------------------------------------------------------ markdown

def _f(v, fmt="%.3f"):
    return fmt % v if isinstance(v, (int, float)) else ("–" if v is None else str(v))


def _yes(b):
    return "yes" if b else "**no**"


def md_gaussian(res):
    L = ["## gaussian (GPU)", "",
         f"ndfilt `gaussian_filter(method='cuda_sep')` vs `cupyx.scipy.ndimage.gaussian_filter` vs "
         f"torch (conv2d/conv3d with the sampled 1-D Gaussian, one pass per axis, fp32, no TF32), "
         f"on the same CuPy arrays; float32, mode `{MODE_GPU}`, truncate 4. "
         "×cupyx = cupyx ms / ndfilt ms (issue target ≥ 3 at every σ). % copy BW = one read + one "
         "write of the array per filtered axis at the measured copy bandwidth (target ≥ 50% "
         "in 2-D). *one call*: one Python call from an idle GPU, host overhead included; "
         f"*stream*: {STREAM_CALLS} calls back to back, per call (the GPU's time when the host "
         "keeps ahead). *fused*: ndfilt's `cuda_sep_fused`, which does the last two axes in one "
         "pass for equal odd tap counts ≤ 17 (else the same passes as `cuda_sep`, one per "
         "axis).", ""]
    st = _status(res)
    if st:
        return L + [st, ""]
    L += ["| shape | σ | taps | ndfilt ms | fused ms | cupyx ms | torch ms | ×cupyx | ×torch | "
          "ndfilt % copy BW | cupyx % copy BW | target met | stream: ndfilt ms | fused ms | "
          "cupyx ms | ×cupyx | ndfilt % copy BW | rel diff vs cupyx | rel err vs scipy f64 |",
          "|" + "---|" * 19]
    for r in res:
        t = r["target"]
        met = "≥3×: " + _yes(t["met_ratio"])
        if "met_bw" in t:
            met += ", ≥50% BW: " + _yes(t["met_bw"])
        s = r["ms_stream"]
        L.append("| %s | %g | %d | %.3f | %.3f | %.3f | %s | %.2f | %s | %.0f%% | %.0f%% | %s | "
                 "%.3f | %.3f | %.3f | %.2f | %.0f%% | %.1e | %.1e |" % (
                     "×".join(map(str, r["shape"])), r["sigma"], r["taps"], r["ms"]["ndfilt"],
                     r["ms"]["ndfilt_fused"], r["ms"]["cupyx"], _f(r["ms"].get("torch")),
                     r["ratio_vs_cupyx"], _f(r.get("ratio_vs_torch"), "%.2f"),
                     r["pct_copy_bw"]["ndfilt"], r["pct_copy_bw"]["cupyx"], met, s["ndfilt"],
                     s["ndfilt_fused"], s["cupyx"], r["ratio_vs_cupyx_stream"],
                     r["pct_copy_bw_stream"]["ndfilt"], r["max_rel_diff_vs_cupyx"],
                     r["max_rel_err_vs_scipy_f64"]))
    return L + [""]


def md_sweep(res):
    L = ["## gaussian_sweep (GPU)", "",
         f"4096² float32, mode `{MODE_GPU}`: ndfilt (cuda_sep) vs cupyx across σ. "
         "Mpix/s = 4096² / time; % copy BW counts two passes (one read + one write each). "
         "Times are one call from idle; *stream* as in the gaussian table.", ""]
    st = _status(res)
    if st:
        return L + [st, ""]
    L += ["| σ | taps | ndfilt ms | ndfilt Mpix/s | ndfilt % copy BW | cupyx ms | cupyx Mpix/s | "
          "cupyx % copy BW | ×cupyx | fused ms | stream: ndfilt ms | fused ms | cupyx ms | "
          "ndfilt % copy BW | rel diff vs cupyx |", "|" + "---|" * 15]
    for r in res:
        s = r["ms_stream"]
        L.append("| %g | %d | %.3f | %.0f | %.0f%% | %.3f | %.0f | %.0f%% | %.2f | %.3f | %.3f | "
                 "%.3f | %.3f | %.0f%% | %.1e |" % (
                     r["sigma"], r["taps"], r["ms"]["ndfilt"], r["mpix_s"]["ndfilt"],
                     r["pct_copy_bw"]["ndfilt"], r["ms"]["cupyx"], r["mpix_s"]["cupyx"],
                     r["pct_copy_bw"]["cupyx"], r["ratio_vs_cupyx"], r["ms"]["ndfilt_fused"],
                     s["ndfilt"], s["ndfilt_fused"], s["cupyx"],
                     r["pct_copy_bw_stream"]["ndfilt"], r["max_rel_diff_vs_cupyx"]))
    return L + [""]


def md_cpu(res):
    L = ["## gaussian_cpu", ""]
    st = _status(res)
    if st:
        return L + [st, ""]
    L += [f"{res['shape'][0]}² float32, σ {res['sigma']:g} ({res['taps']} taps), scipy mode "
          f"`{res['mode']}` = OpenCV `{res['opencv_border']}`: ndfilt `gaussian_filter(method="
          f"'cpu_sep')` on numpy arrays (device cpu, NDF_THREADS) vs OpenCV {res['opencv']} "
          f"`GaussianBlur` (ksize {res['taps']}, `cv2.setNumThreads`), each thread count in its "
          f"own process; median wall time. This machine: {res['cpu_count']} CPUs. "
          f"scipy.ndimage.gaussian_filter (1 thread): {res['scipy_1_thread_ms']:.1f} ms.", "",
          "| threads | ndfilt ms | OpenCV ms | ndfilt ms / OpenCV ms | ndfilt speed-up vs 1 "
          "thread | OpenCV speed-up vs 1 thread | scipy (1 thread) ms / ndfilt ms |",
          "|" + "---|" * 7]
    for r in res["rows"]:
        s = r["speedup_vs_1_thread"]
        L.append("| %d | %.2f | %s | %s | %.2f× | %s | %.1f× |" % (
            r["threads"], r["ms"]["ndfilt"], _f(r["ms"].get("opencv"), "%.2f"),
            _f(r.get("ndfilt_over_opencv"), "%.2f"), s["ndfilt"],
            _f(s.get("opencv"), "%.2f×"), res["scipy_1_thread_ms"] / r["ms"]["ndfilt"]))
    t = res["target"]
    e = res["max_rel_err_vs_scipy_f64"]
    L += ["", f"Target (issue 03): ndfilt at 16 threads at least as fast as OpenCV at 16 threads: "
          f"{_yes(t['met'])}" + (f" ({t['note']})" if "note" in t else "") + ". "
          "Max relative error vs scipy in float64: " + ", ".join(
              f"{k} {v:.1e}" for k, v in e.items()) + ".", ""]
    return L


def md_abramov(res):
    L = ["## abramov_2d (the seed's table)", ""]
    st = _status(res)
    if st:
        return L + [st, ""]
    L += [f"Radius {res['radius']} ({res['taps']} taps, Gaussian σ = {res['sigma']:.3g}), "
          f"float32, mode `{res['mode']}`. The 2011 figures are the seed's (Abramov's slides). "
          "Speed-up = the measured step before / this step. GPU times by CUDA events (for 400² "
          "they include the launch overhead of the Python call).", ""]
    for n, d in res["sizes"].items():
        L += [f"### {n}×{n}", "", "| step | here: what runs | ms | speed-up | 2011 ms | "
              "2011 speed-up | rel err vs scipy f64 |", "|" + "---|" * 7]
        for i, s in enumerate(res["steps"]):
            up = d["speedup"].get(s)
            ups = "–" if up is None else "%.1f×" % up["speedup"] + (
                "" if i > 0 and up["over"] == res["steps"][i - 1] else f" (over {up['over']})")
            L.append("| %s | %s | %s | %s | %g | %s | %s |" % (
                s, res["how"][i], _f(d["ms"][s]), ups, res["seed_2011_ms"][n][i],
                _f(d["seed_2011_speedup"].get(s), "%.1f×"),
                _f(d["max_rel_err_vs_scipy_f64"].get(s), "%.1e")))
        L.append("")
    return L


def markdown(results):
    mk = {"gaussian": md_gaussian, "gaussian_sweep": md_sweep, "gaussian_cpu": md_cpu,
          "abramov_2d": md_abramov}
    L = []
    for fam in FAMILIES:
        if fam in results:
            L += mk[fam](results[fam])
    if _plottable(results):
        L += ["![gaussian](gaussian.png)", "",
              "gaussian.png: left, gaussian_sweep's throughput vs σ on the GPU; right, "
              "gaussian_cpu's times vs threads.", ""]
    return L


# ------------------------------------------------------------------ plot

def _plottable(results):
    cpu = results.get("gaussian_cpu")
    return isinstance(results.get("gaussian_sweep"), list) or (
        isinstance(cpu, dict) and "rows" in cpu)


def _blank(ax, title, why):
    ax.set_title(title)
    ax.text(0.5, 0.5, textwrap.fill(why, 50), ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def plot(results, out):
    """gaussian.png: throughput vs sigma (GPU) and CPU thread scaling, side by side."""
    sweep, cpu = results.get("gaussian_sweep"), results.get("gaussian_cpu")
    if not _plottable(results):
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    if isinstance(sweep, list):
        sig = [r["sigma"] for r in sweep]
        npix = float(np.prod(sweep[0]["shape"]))
        for k, c in (("ndfilt", "C0"), ("cupyx", "C1")):
            a1.plot(sig, [r["mpix_s"][k] for r in sweep], "o-", color=c, label=k + ", one call")
            a1.plot(sig, [npix / (r["ms_stream"][k] * 1e3) for r in sweep], "s--", color=c,
                    label=k + f", {STREAM_CALLS} calls back to back")
        r0 = sweep[0]
        ceil_mpix = r0["mpix_s"]["ndfilt"] * 100.0 / r0["pct_copy_bw"]["ndfilt"]
        a1.axhline(ceil_mpix, color="k", ls="--", lw=1, label="copy bandwidth, 2 passes")
        a1.axhline(ceil_mpix / 2, color="k", ls=":", lw=1, label="50% of it (target)")
        a1.set_xscale("log")
        a1.set_yscale("log")
        a1.set_xticks(sig, [f"{s:g}" for s in sig])
        a1.set_xlabel("σ (log)")
        a1.set_ylabel("Mpix/s (log)")
        a1.legend(fontsize=8)
        a1.set_title(f"Gaussian 4096² float32 on the GPU, mode {MODE_GPU}")
    else:
        _blank(a1, "gaussian_sweep (GPU)", _status(sweep) or "not run")
    if isinstance(cpu, dict) and "rows" in cpu:
        th = [r["threads"] for r in cpu["rows"]]
        for k, lab in (("ndfilt", "ndfilt cpu_sep"), ("opencv", "OpenCV GaussianBlur")):
            ys = [r["ms"].get(k, np.nan) for r in cpu["rows"]]
            a2.plot(th, ys, "o-", label=lab)
        a2.plot([1], [cpu["scipy_1_thread_ms"]], "k^", label="scipy (1 thread)")
        a2.set_xscale("log", base=2)
        a2.set_yscale("log")
        a2.set_xticks(th, [str(t) for t in th])
        a2.set_xlabel("threads")
        a2.set_ylabel("ms (log)")
        a2.legend(fontsize=8)
        a2.set_title(f"CPU: 4096² float32, σ {cpu['sigma']:g}, mode {cpu['mode']}")
    else:
        _blank(a2, "gaussian_cpu", _status(cpu) or "not run")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "gaussian.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-worker", type=int, metavar="N", required=True,
                    help="time gaussian_cpu with N threads and print one JSON line")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    cpu_worker(a.cpu_worker, a.reps)
