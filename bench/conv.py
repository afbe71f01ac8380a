#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/conv.py - the non-separable convolution and FFT filtering families (issue 04; the seed
is Eklund's thesis, Figs 1.6/1.8/1.10: throughput against kernel size in 2-D, 3-D and 4-D).
It takes bench/peers.py's timers, peers and measured ceilings:

  python3 bench/conv.py --out DIR [--quick] [--families F,..]

writes DIR/conv.json, DIR/conv.md and DIR/conv_2d.png, conv_3d.png, conv_4d.png (with
matplotlib): the layout of bench/results/conv/, from which bench/report.py makes BENCHMARKS.md.
scripts/gpu-check.sh (part `conv`) runs it into $OUT/conv/.

  conv_2d    (GPU) 2048² float32, k×k kernels, k = 3..17
  conv_3d    (GPU) 256³, k³ kernels, k = 3..17
  conv_4d    (GPU) 32×128³, k⁴ kernels, k = 3..11
  conv_bank  (GPU) 12 kernels of 9³ on 256³: ndfilt correlate_bank (when the binding has it)
             vs 12 ndfilt.correlate calls vs 12 cupyx correlate / fftconvolve calls vs torch
             conv3d with 12 output channels
  conv_cpu   (CPU) 1024² and 96³, k = 3, 7, 11: ndfilt auto / cpu_direct / cpu_fft vs
             scipy.ndimage.correlate (1 thread) and OpenCV filter2D (2-D)

GPU contenders, on the same CuPy arrays (random normal input made once per shape, random
normal kernels), mode 'constant', cval 0: ndfilt.correlate(method='auto' | 'cuda_direct' |
'cuda_fft'), cupyx.scipy.ndimage.correlate, cupyx.scipy.signal.fftconvolve(x, flipped kernel,
mode='same') (its boundary is zero padding = mode 'constant' with cval 0, and convolving with
the flipped kernel is correlating: all compute the same thing), torch conv2d/conv3d (fp32, TF32
off, padding='same', N = C = 1; torch has no 4-D convolution).

Timing: peers.py's gpu_ms (CUDA events, warm-up, median) with the repetitions fitted to the
first measured call (about BUDGET_S per contender, at least MIN_REPS); calls of SLOW_S or more
are timed by wall clock with a synchronise (MIN_REPS of them); a contender whose call takes
more than SKIP_S is not run at the larger kernels of that sweep. Contenders under
STREAM_MAX_MS are also timed back to back (bench/gaussian.py's stream timer)."""
import argparse
import datetime
import inspect
import json
import math
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import ndfilt  # noqa: E402
import gaussian  # noqa: E402  (bench/gaussian.py: its stream timer)
from timing import family_status as _status  # noqa: E402  (bench/timing.py)

MODE, CVAL = "constant", 0.0
# name: (shape, kernel sizes, kernel sizes with --quick, seed)
SWEEPS = {
    "conv_2d": ((2048, 2048), [3, 5, 7, 9, 11, 13, 15, 17], [3, 9, 17], 21),
    "conv_3d": ((256, 256, 256), [3, 5, 7, 9, 11, 13, 15, 17], [3, 7, 17], 22),
    "conv_4d": ((32, 128, 128, 128), [3, 5, 7, 9, 11], [3, 7, 11], 23),
}
BANK_SHAPE, BANK_N, BANK_K, BANK_SEED = (256, 256, 256), 12, 9, 24
CPU_SHAPES = [((1024, 1024), 25), ((96, 96, 96), 26)]
CPU_KS = [3, 7, 11]
FAMILIES = ["conv_2d", "conv_3d", "conv_4d", "conv_bank", "conv_cpu"]

# Issue 04's targets, on ndfilt 'auto'. ("ms", k, limit) | ("never_slower",) | ("beats_all",)
TARGETS = {
    "conv_2d": [("ms", 3, 0.02), ("ms", 17, 0.06)],
    "conv_3d": [("ms", 7, 0.3), ("ms", 17, 0.7), ("never_slower",)],
    "conv_4d": [("ms", 11, 5.0), ("beats_all",)],
}
FLAG_ERR = 1e-4  # max |a - b| / max |b| above this is flagged

NDF = ["auto", "cuda_direct", "cuda_fft"]
PEERS = ["cupyx_correlate", "cupyx_fftconvolve", "torch"]
LABEL = {"auto": "ndfilt auto", "cuda_direct": "ndfilt cuda_direct",
         "cuda_fft": "ndfilt cuda_fft", "cupyx_correlate": "cupyx correlate",
         "cupyx_fftconvolve": "cupyx fftconvolve", "torch": "torch conv"}

WARM_GPU = 3          # the warm-up calls peers.gpu_ms makes (peers.WARM)
MAX_REPS, MIN_REPS = 20, 3
BUDGET_S = 1.5        # about this much timing per contender and case
SLOW_S = 0.25         # calls this slow: MIN_REPS wall-clock calls instead of gpu_ms
SKIP_S = 2.0          # a call slower than this: the contender sits out the rest of the sweep
STREAM_MAX_MS = 2.0   # contenders faster than this are also timed back to back
CPU_BUDGET_S, CPU_SLOW_S = 1.5, 0.5


# ------------------------------------------------------------------ helpers

def _skipped(H):
    return {"skipped": "no GPU", "why": H.no_gpu}


def _gpu(H):
    """cp, cndi, csig, torch, F: the GPU modules (csig from H when it carries one)."""
    csig = getattr(H, "csig", None)
    if csig is None:
        import cupyx.scipy.signal as csig
    torch, F = H.torch, None
    if torch is not None:
        import torch.nn.functional as F
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    return H.cp, H.cndi, csig, torch, F


def _sync(cp):
    cp.cuda.Device().synchronize()


def _free(H):
    if H.cp is not None:
        try:  # cuFFT plans (fftconvolve) keep work areas; every k has its own
            H.cp.fft.config.get_plan_cache().clear()
        except Exception:
            pass
        H.cp.get_default_memory_pool().free_all_blocks()
    if H.torch is not None:
        H.torch.cuda.empty_cache()


def _why(e, ndf):
    """What a failed contender records: 'n/a: ..' for an ndfilt method the build or the
    problem does not have (ValueError: unknown method, not applicable), else 'error: ..'."""
    msg = str(e).split("\n")[0][:240]
    if ndf and isinstance(e, ValueError):
        return f"n/a: {msg}"
    return f"error: {type(e).__name__}: {msg}"


def time_gpu(H, fn, xs):
    """(ms, how, probe seconds) of fn on the GPU. One untimed call (plans, kernel compiles),
    one wall-clock probe, then peers.gpu_ms with the repetitions fitted to the probe, or
    MIN_REPS synchronised wall-clock calls for slow ones, or the probe alone above SKIP_S."""
    cp = H.cp
    fn(xs[0])
    _sync(cp)
    t = time.perf_counter()
    fn(xs[-1])
    _sync(cp)
    probe = time.perf_counter() - t
    if probe > SKIP_S:
        return 1e3 * probe, "1 call, wall clock", probe
    if probe >= SLOW_S:
        ms = H.cpu_ms(lambda x: (fn(x), _sync(cp)), xs[0], reps=MIN_REPS)
        return ms, f"median of {MIN_REPS}, wall clock + synchronise", probe
    reps = int(min(MAX_REPS, max(MIN_REPS, BUDGET_S / max(probe, 1e-6) - WARM_GPU)))
    return H.gpu_ms(fn, xs, reps=reps), f"median of {reps}, CUDA events", probe


def stream_gpu(H, fn, xs):
    """ms per call of calls issued back to back (bench/gaussian.py's timer), or None."""
    sm = getattr(gaussian, "_stream_ms", None)
    return sm(H, fn, xs) if sm is not None else None


def time_cpu(H, fn, x):
    """(ms, how, last result) on the CPU: one warm-up call, one probe, then bench/timing.py's
    cpu_ms with 3 to 5 repetitions, or the probe alone when it took CPU_SLOW_S or more."""
    fn(x)
    t = time.perf_counter()
    r = fn(x)
    probe = time.perf_counter() - t
    if probe >= CPU_SLOW_S:
        return 1e3 * probe, "1 call", r
    reps = int(min(5, max(3, CPU_BUDGET_S / max(probe, 1e-6) - 1)))
    ms = H.cpu_ms(fn, x, reps=reps)
    return ms, f"median of {reps}", fn(x)


def auto_solver():
    """The solver of the plan that the binding's last correlate(method='auto') call ran
    (ndfilt.last_solver; older bindings: their plan cache). None when that fails."""
    if hasattr(ndfilt, "last_solver"):
        return ndfilt.last_solver()
    try:
        with ndfilt._lock:
            for key, plan in reversed(list(ndfilt._plans.items())):
                if key[0] == "correlate" and key[-1] is None:
                    name = ndfilt._lib.lib.ndf_plan_solver(plan)
                    return name.decode() if name else None
    except Exception:
        pass
    return None


def _solver_by_time(ms, methods):
    """The method whose time is closest to auto's (when the plan cannot say)."""
    got = [(abs(math.log(ms[m] / ms["auto"])), m) for m in methods if m in ms]
    return min(got)[1] if "auto" in ms and got else None


def rel_err(xp, a, b):
    """max |a - b| / max |b| (xp: numpy or cupy)."""
    scale = float(xp.abs(b).max())
    return float(xp.abs(a - b).max()) / (scale if scale > 0 else 1.0)


def _fma_rate(ceil):
    return ceil["fp32_fma_TFLOPs"] * 1e12 / 2  # TFLOP/s counts an FMA as 2 FLOPs


def _metrics(ms, vox, taps, ceil, peer_ms):
    """Per-ndfilt-contender figures: Mvox/s, speed-ups, % of the measured ceilings."""
    d = {"mvox_s": vox / (ms * 1e-3) / 1e6,
         "speedup": {p: v / ms for p, v in peer_ms.items()},
         "speedup_fastest_peer": (min(peer_ms.values()) / ms) if peer_ms else None}
    if ceil:
        d["pct_fma"] = 100.0 * vox * taps / (ms * 1e-3) / _fma_rate(ceil)
        d["pct_copy_bw"] = 100.0 * 8 * vox / (ms * 1e-3) / (ceil["copy_bandwidth_GBs"] * 1e9)
    return d


def _summary(rows, ndf_methods, peers=PEERS, stream=False):
    """auto against the fastest peer and against the better of the other ndfilt methods; with
    stream, each time taken back to back where the row has that time."""
    s = {"auto_never_slower_than_fastest_peer": None, "worst_auto_over_fastest_peer": None,
         "worst_peer_k": None, "auto_within_10pct_of_best_method": None,
         "worst_auto_over_best_method": None, "worst_method_k": None}
    wp, wm = [], []
    for r in rows:
        ms = dict(r["ms"], **r.get("ms_stream", {})) if stream else r["ms"]
        if "auto" not in ms:
            continue
        pm = [ms[p] for p in peers if p in ms]
        if pm:
            wp.append((ms["auto"] / min(pm), r["k"]))
        mm = [ms[m] for m in ndf_methods if m in ms]
        if mm:
            wm.append((ms["auto"] / min(mm), r["k"]))
    if wp:
        v, k = max(wp)
        s.update(auto_never_slower_than_fastest_peer=v <= 1.0, worst_auto_over_fastest_peer=v,
                 worst_peer_k=k)
    if wm:
        v, k = max(wm)
        s.update(auto_within_10pct_of_best_method=v <= 1.10, worst_auto_over_best_method=v,
                 worst_method_k=k)
    return s


def _targets(fam, rows, summ):
    out = []
    for t in TARGETS.get(fam, []):
        if t[0] == "ms":
            _, k, lim = t
            r = next((r for r in rows if r["k"] == k), None)
            d = {"what": f"k={k}: auto ≤ {lim:g} ms", "k": k, "limit_ms": lim}
            if r is None or "auto" not in r["ms"]:
                d.update(met=None, note="not run" if r is None else "auto did not run")
            else:
                d.update(ms=r["ms"]["auto"], ms_stream=r["ms_stream"].get("auto"),
                         met=r["ms"]["auto"] <= lim)
                if d["ms_stream"] is not None:
                    d["met_stream"] = d["ms_stream"] <= lim
        else:
            d = {"what": ("auto never slower than the faster peer at any k"
                          if t[0] == "never_slower" else "auto beats every peer at every k"),
                 "met": summ["auto_never_slower_than_fastest_peer"],
                 "worst_ratio": summ["worst_auto_over_fastest_peer"], "k": summ["worst_peer_k"]}
            if t[0] == "beats_all" and d["worst_ratio"] is not None:
                d["met"] = d["worst_ratio"] < 1.0
        out.append(d)
    return out


def _n_inputs(nbytes):
    """Inputs rotated by the timer: enough to spill the L2 (50-60 MB) when one fits in it."""
    return int(min(4, max(1, math.ceil(120e6 / nbytes))))


# ------------------------------------------------------------------ GPU sweeps

def bench_sweep(H, ceil, quick, fam):
    if H.no_gpu:
        return _skipped(H)
    cp, cndi, csig, torch, F = _gpu(H)
    shape, ks_all, ks_quick, seed = SWEEPS[fam]
    ks = ks_quick if quick else ks_all
    nd, vox = len(shape), float(np.prod(shape))
    rng = np.random.default_rng(seed)
    nin = _n_inputs(4 * vox)
    xs = [cp.asarray(rng.standard_normal(shape, dtype=np.float32)) for _ in range(nin)]
    out_nd, out_cx = cp.empty(shape, cp.float32), cp.empty(shape, cp.float32)
    conv = None
    if torch is not None and nd in (2, 3):
        conv = F.conv2d if nd == 2 else F.conv3d
        txs = [torch.as_tensor(x, device="cuda").view((1, 1) + shape) for x in xs]
    res = {"family": fam, "shape": list(shape), "dtype": "float32", "mode": MODE, "cval": CVAL,
           "inputs_rotated": nin, "ks": ks, "ceilings": ceil,
           "torch": (f"conv{nd}d" if conv else ("no 4-D conv" if torch else "no torch")),
           "rows": []}
    skip = {}  # contender -> why it sits out the rest of the sweep
    for k in ks:
        taps = k ** nd
        w = rng.standard_normal((k,) * nd, dtype=np.float32)
        w64 = w.astype(np.float64)
        wc = cp.asarray(w)
        wf = cp.asarray(np.ascontiguousarray(w[(slice(None, None, -1),) * nd]))
        row = {"k": k, "taps": taps, "ms": {}, "ms_stream": {}, "how": {}, "status": {},
               "rel_err": {}, "mvox_s": {}}
        fns = {"cupyx_correlate": (lambda x: cndi.correlate(x, wc, output=out_cx, mode=MODE,
                                                            cval=CVAL), xs),
               "cupyx_fftconvolve": (lambda x: csig.fftconvolve(x, wf, mode="same"), xs)}
        if conv is not None:
            tw = torch.as_tensor(w, device="cuda").view((1, 1) + (k,) * nd)
            fns["torch"] = (lambda t: conv(t, tw, padding="same"), txs)
        else:
            row["status"]["torch"] = "n/a: " + res["torch"]
        for m in NDF:
            fns[m] = ((lambda x, m=m: ndfilt.correlate(x, w64, output=out_nd, mode=MODE,
                                                       cval=CVAL, method=m)), xs)
        ref = ref_name = None
        for name in PEERS + NDF:
            if name not in fns:
                continue
            if name in skip:
                row["status"][name] = skip[name]
                continue
            fn, ins = fns[name]
            try:
                ms, how, probe = time_gpu(H, fn, ins)
                row["ms"][name], row["how"][name] = ms, how
                if probe > SKIP_S:
                    skip[name] = f"skipped: > {SKIP_S:g} s at k={k}"
                if ms < STREAM_MAX_MS:
                    s = stream_gpu(H, fn, ins)
                    if s is not None:
                        row["ms_stream"][name] = s
                # the output for xs[0], checked against the reference
                got = fn(ins[0])
                if name == "auto":
                    row["auto_solver"] = auto_solver()
                if name in NDF:
                    got = out_nd
                elif name == "cupyx_correlate":
                    got = out_cx
                elif name == "torch":
                    got = cp.asarray(got.view(shape))
                if ref is None and name in ("cupyx_correlate", "cupyx_fftconvolve"):
                    ref, ref_name = got, name  # cupyx correlate, else fftconvolve
                elif ref is not None:
                    row["rel_err"][name] = rel_err(cp, got, ref)
                del got
            except Exception as e:
                row["status"][name] = _why(e, name in NDF)
                row["ms"].pop(name, None)
                _free(H)
        row["ref"] = LABEL.get(ref_name) if ref_name else None
        ref = None
        if row.get("auto_solver") is not None:
            row["auto_solver_how"] = "plan (ndf_plan_solver)"
        else:
            row["auto_solver"] = _solver_by_time(row["ms"], NDF[1:])
            row["auto_solver_how"] = "by time (closest of direct/fft)" if row["auto_solver"] \
                else None
        peer_ms = {p: row["ms"][p] for p in PEERS if p in row["ms"]}
        row["fastest_peer"] = min(peer_ms, key=peer_ms.get) if peer_ms else None
        row["mvox_s"] = {n: vox / (v * 1e-3) / 1e6 for n, v in row["ms"].items()}
        row["ndfilt"] = {m: _metrics(row["ms"][m], vox, taps, ceil, peer_ms)
                         for m in NDF if m in row["ms"]}
        if "auto" in row["ms_stream"]:  # back to back, against peers timed the same way
            ps = {p: row["ms_stream"].get(p, v) for p, v in peer_ms.items()}
            if ps:
                row["ndfilt"]["auto"]["speedup_fastest_peer_stream"] = \
                    min(ps.values()) / row["ms_stream"]["auto"]
        row["flagged"] = sorted(n for n, e in row["rel_err"].items() if e > FLAG_ERR)
        res["rows"].append(row)
        print(f"{fam} k={k}: " + ", ".join(
            f"{n} {v:.3f}" for n, v in row["ms"].items()) + " ms"
            + (f"; auto -> {row['auto_solver']}" if row.get("auto_solver") else "")
            + (f"; FLAGGED rel err: {row['flagged']}" if row["flagged"] else "")
            + "".join(f"; {n}: {s}" for n, s in row["status"].items()), flush=True)
    res["summary"] = _summary(res["rows"], NDF[1:])
    res["summary_stream"] = _summary(res["rows"], NDF[1:], stream=True)
    res["targets"] = _targets(fam, res["rows"], res["summary"])
    xs = txs = out_nd = out_cx = None
    _free(H)
    return res


# ------------------------------------------------------------------ GPU filter bank

BANK = ["ndfilt_bank", "ndfilt_singles", "cupyx_correlate", "cupyx_fftconvolve", "torch"]
BANK_LABEL = {"ndfilt_bank": "ndfilt correlate_bank (one call)",
              "ndfilt_singles": f"ndfilt correlate ×{BANK_N} (auto)",
              "cupyx_correlate": f"cupyx correlate ×{BANK_N}",
              "cupyx_fftconvolve": f"cupyx fftconvolve ×{BANK_N}",
              "torch": f"torch conv3d, {BANK_N} output channels (one call)"}


def bench_bank(H, ceil, quick):
    if H.no_gpu:
        return _skipped(H)
    cp, cndi, csig, torch, F = _gpu(H)
    shape, n, k = BANK_SHAPE, BANK_N, BANK_K
    vox, taps = float(np.prod(shape)), k ** 3
    rng = np.random.default_rng(BANK_SEED)
    x = cp.asarray(rng.standard_normal(shape, dtype=np.float32))
    xs = [x]
    W = rng.standard_normal((n, k, k, k), dtype=np.float32)
    W64 = W.astype(np.float64)
    Wc = [cp.asarray(W[i]) for i in range(n)]
    Wf = [cp.asarray(np.ascontiguousarray(W[i, ::-1, ::-1, ::-1])) for i in range(n)]
    outs = [cp.empty(shape, cp.float32) for _ in range(n)]
    check = (0, n - 1)
    res = {"family": "conv_bank", "shape": list(shape), "n": n, "k": k, "taps": taps,
           "dtype": "float32", "mode": MODE, "cval": CVAL, "ceilings": ceil, "ms": {},
           "ms_stream": {}, "how": {}, "status": {}, "rel_err": {}, "labels": BANK_LABEL}
    # references for kernels 0 and n-1
    try:
        refs = {i: cndi.correlate(x, Wc[i], mode=MODE, cval=CVAL) for i in check}
        res["ref"] = "cupyx correlate"
    except Exception as e:
        res["ref_note"] = f"cupyx correlate failed ({_why(e, False)}): fftconvolve is the reference"
        refs = {i: csig.fftconvolve(x, Wf[i], mode="same") for i in check}
        res["ref"] = "cupyx fftconvolve"

    fns = {}  # name -> (timed fn, its inputs, fn running it on x and giving its n outputs)
    if hasattr(ndfilt, "correlate_bank"):
        try:
            params = inspect.signature(ndfilt.correlate_bank).parameters
        except (TypeError, ValueError):
            params = {}
        bank_out = cp.empty((n,) + shape, cp.float32) if "output" in params else None
        kw = {a: v for a, v in (("output", bank_out), ("mode", MODE), ("cval", CVAL))
              if a in params}

        def bank_fn(a):
            return ndfilt.correlate_bank(a, W64, **kw)

        def bank_outputs():
            r = bank_fn(x)
            return bank_out if bank_out is not None else r
        fns["ndfilt_bank"] = (bank_fn, xs, bank_outputs)
        res["bank_kwargs"] = sorted(kw)
    else:
        res["status"]["ndfilt_bank"] = "not in this build (ndfilt has no correlate_bank)"

    def singles(a):
        for i in range(n):
            ndfilt.correlate(a, W64[i], output=outs[i], mode=MODE, cval=CVAL)
    fns["ndfilt_singles"] = (singles, xs, lambda: (singles(x), outs)[1])

    def cx_corr(a):
        for i in range(n):
            cndi.correlate(a, Wc[i], output=outs[i], mode=MODE, cval=CVAL)
    fns["cupyx_correlate"] = (cx_corr, xs, lambda: (cx_corr(x), outs)[1])

    def cx_fft(a):
        return [csig.fftconvolve(a, Wf[i], mode="same") for i in range(n)]
    fns["cupyx_fftconvolve"] = (cx_fft, xs, lambda: cx_fft(x))
    if torch is not None:
        tx = torch.as_tensor(x, device="cuda").view((1, 1) + shape)
        tW = torch.as_tensor(W, device="cuda").view(n, 1, k, k, k)

        def t_fn(t):
            return F.conv3d(t, tW, padding="same")
        fns["torch"] = (t_fn, [tx], lambda: cp.asarray(t_fn(tx).view((n,) + shape)))
    else:
        res["status"]["torch"] = "n/a: no torch"

    for name in BANK:
        if name not in fns:
            continue
        fn, ins, outputs = fns[name]
        try:
            ms, how, _ = time_gpu(H, fn, ins)
            res["ms"][name], res["how"][name] = ms, how
            if ms < STREAM_MAX_MS:
                s = stream_gpu(H, fn, ins)
                if s is not None:
                    res["ms_stream"][name] = s
            got = outputs()  # runs the contender on x
            if name == "ndfilt_singles":
                res["auto_solver"] = auto_solver()
            try:
                res["rel_err"][name] = max(rel_err(cp, got[i], refs[i]) for i in check)
            except Exception as e:  # e.g. a correlate_bank whose output is laid out otherwise
                res["status"][name] = f"not checked: {type(e).__name__}: {e}"
            del got
        except Exception as e:
            res["status"][name] = _why(e, name.startswith("ndfilt"))
            res["ms"].pop(name, None)
            _free(H)
        print(f"conv_bank {BANK_LABEL[name]}: " + (
            f"{res['ms'][name]:.3f} ms" if name in res["ms"] else res["status"].get(name, "")),
            flush=True)
    res["mvox_s_out"] = {nm: n * vox / (v * 1e-3) / 1e6 for nm, v in res["ms"].items()}
    if ceil:
        res["pct_fma"] = {nm: 100.0 * n * vox * taps / (v * 1e-3) / _fma_rate(ceil)
                          for nm, v in res["ms"].items()}
        res["pct_copy_bw"] = {nm: 100.0 * 8 * n * vox / (v * 1e-3)
                              / (ceil["copy_bandwidth_GBs"] * 1e9)
                              for nm, v in res["ms"].items()}
    for base in ("ndfilt_bank", "ndfilt_singles"):
        if base in res["ms"]:
            res[f"over_{base}"] = {nm: v / res["ms"][base] for nm, v in res["ms"].items()}
    res["flagged"] = sorted(nm for nm, e in res["rel_err"].items() if e > FLAG_ERR)
    x = xs = outs = refs = fns = None
    _free(H)
    return res


# ------------------------------------------------------------------ CPU

CPU_NDF = ["auto", "cpu_direct", "cpu_fft"]
CPU_PEERS = ["scipy", "opencv"]


def bench_cpu(H, ceil, quick):
    sndi, cv2 = H.sndi, H.cv2
    res = {"family": "conv_cpu", "dtype": "float32", "mode": MODE, "cval": CVAL, "ks": CPU_KS,
           "cpu_count": os.cpu_count(), "opencv": cv2.__version__ if cv2 else None,
           "opencv_threads": cv2.getNumThreads() if cv2 else None, "cases": []}
    ndfilt.set_device("cpu")
    try:
        try:
            res["ndfilt_threads"] = int(ndfilt._lib.lib.ndf_context_threads(
                ndfilt._context("cpu")))
        except Exception:  # a private detail of the binding; only reported
            res["ndfilt_threads"] = None
        for shape, seed in CPU_SHAPES:
            rng = np.random.default_rng(seed)
            x = rng.standard_normal(shape, dtype=np.float32)
            out = np.empty_like(x)
            vox = float(x.size)
            rows = []
            for k in CPU_KS:
                w = rng.standard_normal((k,) * x.ndim, dtype=np.float32)
                w64 = w.astype(np.float64)
                row = {"k": k, "taps": k ** x.ndim, "ms": {}, "how": {}, "status": {},
                       "rel_err": {}}
                ms, how, ref = time_cpu(H, lambda a: sndi.correlate(a, w, mode=MODE, cval=CVAL),
                                        x)
                row["ms"]["scipy"], row["how"]["scipy"] = ms, how
                ref = ref.copy()
                if cv2 is not None and x.ndim == 2:
                    ms, how, got = time_cpu(H, lambda a: cv2.filter2D(
                        a, -1, w, borderType=cv2.BORDER_CONSTANT), x)
                    row["ms"]["opencv"], row["how"]["opencv"] = ms, how
                    row["rel_err"]["opencv"] = rel_err(np, got, ref)
                elif cv2 is not None:
                    row["status"]["opencv"] = "n/a: filter2D is 2-D"
                for m in CPU_NDF:
                    try:
                        ms, how, got = time_cpu(H, lambda a, m=m: ndfilt.correlate(
                            a, w64, output=out, mode=MODE, cval=CVAL, method=m), x)
                        if m == "auto":
                            row["auto_solver"] = auto_solver()
                        row["ms"][m], row["how"][m] = ms, how
                        row["rel_err"][m] = rel_err(np, got, ref)
                    except Exception as e:
                        row["status"][m] = _why(e, True)
                if row.get("auto_solver") is not None:
                    row["auto_solver_how"] = "plan (ndf_plan_solver)"
                else:
                    row["auto_solver"] = _solver_by_time(row["ms"], CPU_NDF[1:])
                    row["auto_solver_how"] = "by time" if row["auto_solver"] else None
                peer_ms = {p: row["ms"][p] for p in CPU_PEERS if p in row["ms"]}
                row["ndfilt"] = {m: _metrics(row["ms"][m], vox, row["taps"], None, peer_ms)
                                 for m in CPU_NDF if m in row["ms"]}
                row["flagged"] = sorted(n for n, e in row["rel_err"].items() if e > FLAG_ERR)
                rows.append(row)
                print(f"conv_cpu {'×'.join(map(str, shape))} k={k}: " + ", ".join(
                    f"{n} {v:.2f}" for n, v in row["ms"].items()) + " ms"
                    + (f"; auto -> {row['auto_solver']}" if row.get("auto_solver") else "")
                    + "".join(f"; {n}: {s}" for n, s in row["status"].items()), flush=True)
            res["cases"].append({"shape": list(shape), "rows": rows,
                                 "summary": _summary(rows, CPU_NDF[1:], CPU_PEERS)})
    finally:
        ndfilt.set_device("auto")
    return res


RUNNERS = {"conv_2d": lambda H, c, q: bench_sweep(H, c, q, "conv_2d"),
           "conv_3d": lambda H, c, q: bench_sweep(H, c, q, "conv_3d"),
           "conv_4d": lambda H, c, q: bench_sweep(H, c, q, "conv_4d"),
           "conv_bank": bench_bank, "conv_cpu": bench_cpu}


def run_all(H, ceil, quick, families=FAMILIES):
    """({family: result}, {family: seconds}) for the families asked for; a family that raises
    gets {'error': ...}. Prints the seconds of each family and the total."""
    out, secs, t0 = {}, {}, time.time()
    for fam in families:
        t = time.time()
        try:
            out[fam] = RUNNERS[fam](H, ceil, quick)
        except Exception as e:
            traceback.print_exc()
            out[fam] = {"error": f"{type(e).__name__}: {e}"}
        _free(H)
        secs[fam] = round(time.time() - t, 1)
        print(f"{fam}: {secs[fam]} s (conv so far {time.time() - t0:.0f} s)", flush=True)
    return out, secs


# ------------------------------------------------------------------ markdown

def _f(v, fmt="%.3f"):
    return fmt % v if isinstance(v, (int, float)) and math.isfinite(v) else "–"


def _yes(b):
    return "–" if b is None else ("yes" if b else "**no**")


def _err(e):
    if e is None:
        return "–"
    return "%.1e" % e if e <= FLAG_ERR else "**%.1e (> %.0e)**" % (e, FLAG_ERR)


def _cell(row, name):
    """A time cell: ms (with † when timed by wall clock), or why there is none."""
    if name in row["ms"]:
        return _f(row["ms"][name]) + ("†" if "wall clock" in row["how"].get(name, "") else "")
    st = row["status"].get(name, "")
    return st.split(":")[0] if st else "–"


def _summary_lines(s, peers_text, methods_text):
    L = []
    if s["auto_never_slower_than_fastest_peer"] is not None:
        L.append(f"- auto never slower than the faster peer ({peers_text}): "
                 f"{_yes(s['auto_never_slower_than_fastest_peer'])} (worst auto / fastest peer "
                 f"{s['worst_auto_over_fastest_peer']:.2f} at k={s['worst_peer_k']})")
    else:
        L.append("- auto never slower than the faster peer: – (no peer timed)")
    if s["auto_within_10pct_of_best_method"] is not None:
        L.append(f"- auto within 10% of the better of {methods_text}: "
                 f"{_yes(s['auto_within_10pct_of_best_method'])} (worst auto / best "
                 f"{s['worst_auto_over_best_method']:.2f} at k={s['worst_method_k']})")
    else:
        L.append(f"- auto within 10% of the better of {methods_text}: – (none ran)")
    return L


def _notes(rows):
    """The status messages of the sweep, each once, with the kernel sizes they occurred at."""
    seen = {}
    for r in rows:
        for n, s in r["status"].items():
            seen.setdefault((n, s), []).append(r["k"])
    return [f"- {LABEL.get(n, n)}: {s} (k = {', '.join(map(str, ks))})"
            for (n, s), ks in seen.items()]


def md_sweep(fam, res, img_prefix):
    shape, ks, _, _ = SWEEPS[fam]
    nd = len(shape)
    title = {2: "2-D", 3: "3-D", 4: "4-D"}[nd]
    L = [f"### {fam}: {title} {'×'.join(map(str, shape))} float32, k^{nd} kernel (GPU)", ""]
    st = _status(res)
    if st:
        return L + [st, ""]
    L += [f"Mode `{MODE}`, cval 0, random normal input and kernels; the same CuPy arrays for "
          f"every contender ({res['inputs_rotated']} inputs rotated). torch: {res['torch']}. "
          "Times: one call from an idle GPU (CUDA events, median; † = wall clock with a "
          "synchronise, for slow calls); *stream*: calls back to back, per call. ×peer = peer "
          "ms / ndfilt ms (above 1: ndfilt faster). % FMA = useful FMAs (voxels × taps) at the "
          "measured FP32 FMA rate; % BW = 8 bytes/voxel at the measured copy bandwidth. Rel "
          "err = max|ndfilt − ref| / max|ref|, ref = cupyx correlate (fftconvolve where cupyx "
          f"sat out), flagged above {FLAG_ERR:g}.", ""]
    tg = res.get("targets") or []
    if tg:
        L.append("Targets (issue 04) and measured:")
        for t in tg:
            if "limit_ms" in t:
                if t["met"] is None:
                    L.append(f"- {t['what']}: {t.get('note', '–')}")
                else:
                    s = (f", stream {t['ms_stream']:.3f} ms ({_yes(t.get('met_stream'))})"
                         if t.get("ms_stream") is not None else "")
                    L.append(f"- {t['what']}: measured {t['ms']:.3f} ms, met: {_yes(t['met'])}"
                             + s)
            else:
                w = (f" (worst auto / fastest peer {t['worst_ratio']:.2f} at k={t['k']})"
                     if t["worst_ratio"] is not None else "")
                L.append(f"- {t['what']}: {_yes(t['met'])}{w}")
        L.append("")
    L += ["| k | taps | auto ms | auto chose | cuda_direct ms | cuda_fft ms | cupyx correlate ms "
          "| cupyx fftconvolve ms | torch ms | stream: auto ms | fastest peer ms |",
          "|" + "---|" * 11]
    for r in res["rows"]:
        L.append("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["k"], r["taps"], _cell(r, "auto"), r.get("auto_solver") or "–",
            _cell(r, "cuda_direct"), _cell(r, "cuda_fft"), _cell(r, "cupyx_correlate"),
            _cell(r, "cupyx_fftconvolve"), _cell(r, "torch"), _f(r["ms_stream"].get("auto")),
            _f(min((r["ms"][p] for p in PEERS if p in r["ms"]), default=None))))
    L += ["", "| k | ndfilt | ms | Mvox/s | ×cupyx correlate | ×fftconvolve | ×torch | "
          "×fastest peer | ×fastest peer (stream) | % FP32 FMA | % copy BW | rel err |",
          "|" + "---|" * 12]
    for r in res["rows"]:
        for m in NDF:
            if m not in r["ndfilt"]:
                continue
            d = r["ndfilt"][m]
            sp = d["speedup"]
            L.append("| %d | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["k"], m, _f(r["ms"][m]), d["mvox_s"], _f(sp.get("cupyx_correlate"), "%.2f"),
                _f(sp.get("cupyx_fftconvolve"), "%.2f"), _f(sp.get("torch"), "%.2f"),
                _f(d["speedup_fastest_peer"], "%.2f"),
                _f(d.get("speedup_fastest_peer_stream"), "%.2f"),
                _f(d.get("pct_fma"), "%.1f%%"), _f(d.get("pct_copy_bw"), "%.0f%%"),
                _err(r["rel_err"].get(m))))
    L.append("")
    pe = [f"{LABEL[p]} {_err(max(r['rel_err'][p] for r in res['rows'] if p in r['rel_err']))}"
          for p in PEERS[1:] if any(p in r["rel_err"] for r in res["rows"])]
    if pe:
        L.append("Peers against the reference (worst over k): " + ", ".join(pe) + ".")
    hows = sorted({r.get("auto_solver_how") for r in res["rows"]} - {None})
    if hows:
        L.append("'auto chose': " + "; ".join(hows) + ".")
    peers = "cupyx correlate, cupyx fftconvolve" + (
        ", torch" if res["torch"].startswith("conv") else "")
    L += ["One call each:"] + _summary_lines(res["summary"], peers, "cuda_direct / cuda_fft")
    if res.get("summary_stream"):
        L += [f"Back to back where timed so (calls under {STREAM_MAX_MS:g} ms), else one call:"]
        L += _summary_lines(res["summary_stream"], peers, "cuda_direct / cuda_fft")
    L += _notes(res["rows"])
    L += ["", f"![{fam}]({img_prefix}{fam}.png)", ""]
    return L


def md_bank(res):
    shape = "×".join(map(str, res.get("shape", BANK_SHAPE))) if isinstance(res, dict) else ""
    L = [f"### conv_bank: {BANK_N} kernels of {BANK_K}³ on {shape} float32 (GPU)", ""]
    st = _status(res)
    if st:
        return L + [st, ""]
    L += [f"Mode `{MODE}`, cval 0. Mvox/s counts output voxels ({BANK_N} × {shape}); % FMA "
          f"counts {BANK_N} × {shape} × {res['taps']} FMAs; % copy BW counts 8 bytes per "
          "output voxel. "
          f"Reference for the check: {res.get('ref')} of kernels 0 and {BANK_N - 1}. "
          "÷ = this contender's ms / ndfilt's (above 1: ndfilt faster).", "",
          "| contender | ms | stream ms | output Mvox/s | % FP32 FMA | % copy BW | "
          "÷ ndfilt bank | ÷ ndfilt 12 singles | rel err |", "|" + "---|" * 9]
    for nm in BANK:
        if nm in res["ms"]:
            L.append("| %s | %s | %s | %.0f | %s | %s | %s | %s | %s |" % (
                BANK_LABEL[nm], _f(res["ms"][nm]) + ("†" if "wall" in res["how"][nm] else ""),
                _f(res["ms_stream"].get(nm)), res["mvox_s_out"][nm],
                _f(res.get("pct_fma", {}).get(nm), "%.1f%%"),
                _f(res.get("pct_copy_bw", {}).get(nm), "%.0f%%"),
                _f(res.get("over_ndfilt_bank", {}).get(nm), "%.2f"),
                _f(res.get("over_ndfilt_singles", {}).get(nm), "%.2f"),
                _err(res["rel_err"].get(nm))))
        else:
            L.append(f"| {BANK_LABEL[nm]} | {res['status'].get(nm, '–')} | | | | | | | |")
    L.append("")
    ms = res["ms"]
    if "ndfilt_bank" in ms and "ndfilt_singles" in ms:
        L.append(f"- correlate_bank vs {BANK_N} single calls: "
                 f"{ms['ndfilt_singles'] / ms['ndfilt_bank']:.2f}× faster")
    else:
        L.append(f"- correlate_bank vs {BANK_N} single calls: "
                 f"{res['status'].get('ndfilt_bank', 'not timed')}")
    best = "ndfilt_bank" if "ndfilt_bank" in ms else "ndfilt_singles"
    for p in BANK[2:]:
        if best in ms and p in ms:
            L.append(f"- {BANK_LABEL[best]} vs {BANK_LABEL[p]}: {ms[p] / ms[best]:.2f}× faster")
    if res.get("auto_solver"):
        L.append(f"- the single calls' auto chose: {res['auto_solver']}")
    for nm, s in res["status"].items():
        if nm in ms:  # e.g. 'not checked'
            L.append(f"- {BANK_LABEL[nm]}: {s}")
    if res.get("ref_note"):
        L.append(f"- {res['ref_note']}")
    return L + [""]


def md_cpu(res):
    L = ["### conv_cpu: non-separable correlation on the CPU", ""]
    st = _status(res)
    if st:
        return L + [st, ""]
    L += [f"float32, mode `{MODE}`, cval 0, numpy arrays: ndfilt on device cpu "
          f"({res['ndfilt_threads']} threads; this machine has {res['cpu_count']} CPUs) vs "
          "scipy.ndimage.correlate (1 thread; its output is the reference) and OpenCV "
          f"{res['opencv']} filter2D (2-D, BORDER_CONSTANT, {res['opencv_threads']} threads). "
          "Median wall time (one call where a call takes ≥ 0.5 s). ×scipy = scipy ms / auto ms.",
          "", "| shape | k | taps | auto ms | auto chose | cpu_direct ms | cpu_fft ms | scipy ms "
          "| OpenCV ms | auto Mvox/s | ×scipy | ×OpenCV | rel err auto / direct / fft / OpenCV |",
          "|" + "---|" * 13]
    notes = []
    for c in res["cases"]:
        sh = "×".join(map(str, c["shape"]))
        for r in c["rows"]:
            a = r["ndfilt"].get("auto", {})
            sp = a.get("speedup", {})
            L.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                sh, r["k"], r["taps"], _cell(r, "auto"), r.get("auto_solver") or "–",
                _cell(r, "cpu_direct"), _cell(r, "cpu_fft"), _cell(r, "scipy"),
                _cell(r, "opencv"), _f(a.get("mvox_s"), "%.0f"), _f(sp.get("scipy"), "%.1f"),
                _f(sp.get("opencv"), "%.2f"),
                " / ".join(_err(r["rel_err"].get(n)) for n in CPU_NDF + ["opencv"])))
            notes += [f"- {sh} k={r['k']} {n}: {s}" for n, s in r["status"].items()
                      if not s.startswith("n/a: filter2D")]
    L.append("")
    for c in res["cases"]:
        L += [f"{'×'.join(map(str, c['shape']))}:"] + _summary_lines(
            c["summary"], "scipy, OpenCV", "cpu_direct / cpu_fft")
    hows = sorted({r.get("auto_solver_how") for c in res["cases"] for r in c["rows"]} - {None})
    if hows:
        L.append("- 'auto chose': " + "; ".join(hows))
    return L + notes + [""]


def markdown(results, img_prefix=""):
    """The 'Non-separable convolution' section, as a list of lines; images under img_prefix."""
    L = ["## Non-separable convolution (issue 04)", "",
         "`bench/conv.py`: ndfilt.correlate (auto, cuda_direct, cuda_fft) against "
         "cupyx.scipy.ndimage.correlate, cupyx.scipy.signal.fftconvolve and torch conv2d/conv3d "
         "(fp32, no TF32) on the same CuPy arrays; the seed's figures (Eklund, Figs 1.6/1.8/"
         "1.10) plot Mvox/s against kernel size the same way. fftconvolve runs with mode "
         "'same' on the flipped kernel: its boundary is zero padding (= mode 'constant', cval "
         "0) and convolution with the flipped kernel is the correlation, so every contender "
         "computes the same thing (its transforms stay single precision: float32 in, "
         "complex64 spectra). Slow peers get fewer repetitions and sit out the larger "
         f"kernels once a call takes more than {SKIP_S:g} s.", ""]
    for fam in FAMILIES:
        if fam not in results:
            continue
        if fam in SWEEPS:
            L += md_sweep(fam, results[fam], img_prefix)
        elif fam == "conv_bank":
            L += md_bank(results[fam])
        else:
            L += md_cpu(results[fam])
    return L


def summary_line(results, secs=None):
    """One line for scripts/gpu-check.sh's row: the targets met / not met / not run."""
    parts = []
    for fam in FAMILIES:
        r = results.get(fam)
        if r is None:
            continue
        st = _status(r)
        if st:
            parts.append(f"{fam} {st.split(':')[0]}")
            continue
        if fam in TARGETS:
            t = r.get("targets", [])
            met = sum(1 for x in t if x["met"])
            parts.append(f"{fam} targets {met}/{len(t)}")
        fl = (r.get("flagged") if fam == "conv_bank" else
              sorted({n for c in (r.get("cases") or [r]) for x in c.get("rows", [])
                      for n in x.get("flagged", [])}))
        if fl:
            parts.append(f"{fam} rel err > {FLAG_ERR:g}: {','.join(fl)}")
    s = "; ".join(parts)
    if secs:
        s += f"; {sum(secs.values()):.0f} s"
    return s


# ------------------------------------------------------------------ plots

def plot(results, out):
    """conv_2d.png, conv_3d.png, conv_4d.png: Mvox/s against k, one line per contender, with
    the copy-bandwidth and FP32-FMA ceilings. Nothing without matplotlib or results."""
    fams = [f for f in SWEEPS if isinstance(results.get(f), dict) and results[f].get("rows")]
    if not fams:
        return []
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    for fam in fams:
        res = results[fam]
        rows, nd = res["rows"], len(res["shape"])
        ks = [r["k"] for r in rows]
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for i, name in enumerate(NDF + PEERS):
            ys = [r["mvox_s"].get(name, np.nan) for r in rows]
            if not np.isfinite(ys).any():
                continue
            lab = LABEL[name] + (f"{nd}d" if name == "torch" else "")
            ax.plot(ks, ys, "o-" if name in NDF else "s--", color=f"C{i}", label=lab)
        vox = float(np.prod(res["shape"]))
        ys = [vox / (r["ms_stream"]["auto"] * 1e-3) / 1e6 if "auto" in r["ms_stream"]
              else np.nan for r in rows]
        if np.isfinite(ys).any():
            ax.plot(ks, ys, "o:", color="C0", alpha=0.6, label="ndfilt auto, back to back")
        ceil = res.get("ceilings")
        if ceil:
            ax.axhline(ceil["copy_bandwidth_GBs"] * 1e9 / 8 / 1e6, color="k", ls="--", lw=1,
                       label="copy bandwidth (8 B/voxel)")
            kk = np.linspace(min(ks), max(ks), 50)
            ax.plot(kk, _fma_rate(ceil) / kk ** nd / 1e6, "k:", lw=1,
                    label="FP32 FMA rate / taps")
        ax.set_yscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel(f"kernel size k (k^{nd} taps)")
        ax.set_ylabel("Mvox/s (log)")
        ax.set_title(f"{nd}-D {'×'.join(map(str, res['shape']))} float32, mode {MODE}, GPU")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out, f"{fam}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


# ------------------------------------------------------------------ alone

def _clean(v):
    """JSON without NaN / Infinity."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--quick", action="store_true", help="fewer kernel sizes")
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help="comma-separated subset of: %(default)s")
    ap.add_argument("--require-gpu", action="store_true",
                    help="exit 1 when the GPU families are skipped (no CuPy, GPU or CUDA build)")
    a = ap.parse_args()
    fams = [f for f in a.families.split(",") if f]
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        ap.error(f"unknown families: {', '.join(bad)}")
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    import peers  # CuPy, torch, the timers and the ceilings (not at module level: peers imports us)
    import timing
    H = peers.helpers()
    secs = {"imports": round(time.time() - t0, 1)}
    t = time.time()
    ceil = peers.ceilings() if H.no_gpu is None else None
    secs["ceilings"] = round(time.time() - t, 1)
    print(f"imports {secs['imports']} s, ceilings {secs['ceilings']} s: {json.dumps(ceil)}",
          flush=True)
    if H.no_gpu:
        print(f"GPU families skipped: {H.no_gpu}", flush=True)
    res, fsecs = run_all(H, ceil, a.quick, fams)
    secs.update(fsecs)
    gpu = timing.gpu_name(H.cp)
    meta = {"gpu": gpu, "date": datetime.date.today().isoformat(),
            "commit": os.environ.get("NDF_COMMIT", "unknown"), "ndfilt": ndfilt.__version__,
            "device": ndfilt.device(), "solvers": ndfilt.solvers(), "no_gpu": H.no_gpu,
            "cupy": H.cp.__version__ if H.cp is not None else None,
            "torch": H.torch.__version__ if H.torch is not None else None,
            "quick": a.quick, "seconds": secs, "has_correlate_bank": hasattr(ndfilt,
                                                                             "correlate_bank")}
    doc = {"meta": meta, "ceilings": ceil}
    doc.update(res)
    with open(os.path.join(a.out, "conv.json"), "w") as f:
        json.dump(_clean(doc), f, indent=1)
    head = [f"# Non-separable convolution benchmark (bench/conv.py{' --quick' if a.quick else ''})",
            "", f"- GPU: {gpu}; date {meta['date']}; ndfilt commit {meta['commit']}; "
            f"CPU threads {os.cpu_count()}",
            ("- ceilings measured in the same run: copy %.0f GB/s (read + write), FP32 FMA "
             "%.1f TFLOP/s" % (ceil["copy_bandwidth_GBs"], ceil["fp32_fma_TFLOPs"]))
            if ceil else "- ceilings: not measured (no GPU)",
            "- seconds: " + ", ".join(f"{k} {v:g}" for k, v in secs.items()), ""]
    with open(os.path.join(a.out, "conv.md"), "w") as f:
        f.write("\n".join(head + markdown(res)) + "\n")
    plots = plot(res, a.out)
    total = time.time() - t0
    print(f"wrote {a.out}/conv.json, conv.md" + "".join(f", {os.path.basename(p)}" for p in plots))
    print(f"conv total: {total:.0f} s")
    print("conv summary: " + summary_line(res, fsecs), flush=True)
    errs = [k for k, v in res.items() if isinstance(v, dict) and "error" in v]
    if errs:
        print("families that failed: " + ", ".join(errs), file=sys.stderr)
    if a.require_gpu and H.no_gpu and any(f != "conv_cpu" for f in fams):
        print(f"--require-gpu: the GPU families were skipped: {H.no_gpu}", file=sys.stderr)
        errs.append("no GPU")
    if errs:
        sys.exit(1)


if __name__ == "__main__":
    main()
