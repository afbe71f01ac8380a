#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/dropin.py - the "drop-in" family: the rest of scipy.ndimage's filters (uniform, rank
and median, derivatives, masked smoothing), ndfilt beside the peers a user would otherwise call,
on the same arrays in one run:

  python3 bench/dropin.py [--out DIR] [--quick]

CPU: ndfilt on its CPU path against scipy.ndimage and, where it has the filter, OpenCV
(cv2.medianBlur, cv2.blur, cv2.erode/dilate) with as many threads; wall clock, median of a few
calls after a warm-up (scipy, one thread, once where it takes over a second). GPU (when CuPy
sees one): ndfilt on CuPy arrays against cupyx.scipy.ndimage and cuCIM's copy of it with its
faster kernels (cucim.skimage._vendored.ndimage, scipy's signatures; from its PyPI wheel where
it is installed), CUDA events (a filter that
ndfilt has no GPU solver for yet says so in the row's errors). Each row carries the largest
difference from scipy's result. Writes DIR/dropin.json, DIR/dropin.md and (with matplotlib)
DIR/dropin.png, each call's speed-up over scipy (bench/results/dropin/ is that layout;
scripts/gpu-check.sh part `dropin`)."""
import argparse
import json
import os
import sys
import time

import numpy as np
from scipy import ndimage as ndi

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import timing  # noqa: E402

import ndfilt  # noqa: E402


def cases(quick):
    """(name, array, ndfilt call, scipy call, (OpenCV name, call) or None, cupyx call)."""
    rng = np.random.default_rng(7)
    big2 = (1024, 1024) if quick else (4096, 4096)
    vol = (96,) * 3 if quick else (256,) * 3
    out = []
    u8 = rng.integers(0, 256, big2).astype(np.uint8)
    f3 = rng.random(vol, dtype=np.float32)
    for k in (3, 7):
        out.append((f"median {k}x{k}", u8, lambda x, k=k: ndfilt.median_filter(x, k),
                    lambda x, k=k: ndi.median_filter(x, k),
                    ("medianBlur", lambda cv, x, k=k: cv.medianBlur(x, k)),
                    lambda m, x, k=k: m.median_filter(x, k)))
    f2 = rng.random(big2, dtype=np.float32)
    out.append(("median 3x3 float32", f2, lambda x: ndfilt.median_filter(x, 3),
                lambda x: ndi.median_filter(x, 3), ("medianBlur", lambda cv, x: cv.medianBlur(x, 3)),
                lambda m, x: m.median_filter(x, 3)))
    u16 = rng.integers(0, 65536, (512, 512) if quick else (2048, 2048)).astype(np.uint16)
    out.append(("median 15x15", u16, lambda x: ndfilt.median_filter(x, 15),
                lambda x: ndi.median_filter(x, 15), None,  # medianBlur: 16 bits up to 5x5
                lambda m, x: m.median_filter(x, 15)))
    # a footprint with holes past 128 samples: the histogram on the CPU (OpenCV: boxes only)
    yy, xx = np.mgrid[-7:8, -7:8]
    disk = xx * xx + yy * yy <= 49
    u8d = u8[:512, :512] if quick else u8[:2048, :2048].copy()
    out.append(("median disk r7 (149)", u8d, lambda x: ndfilt.median_filter(x, footprint=disk),
                lambda x: ndi.median_filter(x, footprint=disk), None,
                lambda m, x: m.median_filter(x, footprint=__import__("cupy").asarray(disk))))
    for k in (3, 5):
        out.append((f"median {k}^3", f3, lambda x, k=k: ndfilt.median_filter(x, k),
                    lambda x, k=k: ndi.median_filter(x, k), None,
                    lambda m, x, k=k: m.median_filter(x, k)))
    for k in (3, 31):
        out.append((f"maximum {k}^3", f3, lambda x, k=k: ndfilt.maximum_filter(x, k),
                    lambda x, k=k: ndi.maximum_filter(x, k), None,
                    lambda m, x, k=k: m.maximum_filter(x, k)))
        out.append((f"uniform {k}^3", f3, lambda x, k=k: ndfilt.uniform_filter(x, k),
                    lambda x, k=k: ndi.uniform_filter(x, k), None,
                    lambda m, x, k=k: m.uniform_filter(x, k)))
    out.append(("maximum 7x7", u8, lambda x: ndfilt.maximum_filter(x, 7),
                lambda x: ndi.maximum_filter(x, 7),
                ("dilate", lambda cv, x: cv.dilate(x, np.ones((7, 7), np.uint8),
                                                   borderType=cv.BORDER_REFLECT)),
                lambda m, x: m.maximum_filter(x, 7)))
    out.append(("gaussian_gradient_magnitude s2", f3,
                lambda x: ndfilt.gaussian_gradient_magnitude(x, 2.0),
                lambda x: ndi.gaussian_gradient_magnitude(x, 2.0), None,
                lambda m, x: m.gaussian_gradient_magnitude(x, 2.0)))
    out.append(("sobel axis 0", f3, lambda x: ndfilt.sobel(x, 0), lambda x: ndi.sobel(x, 0),
                None, lambda m, x: m.sobel(x, 0)))
    # float64 computed in float64 (on the GPU cuda_direct64 or cuda_fft64, as the peers do)
    f64 = rng.random((64,) * 3 if quick else (128,) * 3)
    w7 = rng.random((7, 7, 7))
    out.append(("correlate 7^3 float64", f64, lambda x: ndfilt.correlate(x, w7),
                lambda x: ndi.correlate(x, w7), None,
                lambda m, x: m.correlate(x, __import__("cupy").asarray(w7))))
    nanv = np.where(rng.random(vol) < 0.1, np.nan, f3).astype(np.float32)
    out.append(("gaussian s2, nan_policy omit", nanv,
                lambda x: ndfilt.gaussian_filter(x, 2.0, nan_policy="omit"),
                lambda x: _scipy_nan_omit(x, 2.0), None, None))
    return out


def _scipy_nan_omit(x, s):
    v = ~np.isnan(x)
    return ndi.gaussian_filter(np.where(v, x, 0), s) / ndi.gaussian_filter(v.astype(x.dtype), s)


def diff(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ok = ~(np.isnan(a) | np.isnan(b))
    return float(np.abs(a[ok] - b[ok]).max() / max(np.abs(b[ok]).max(), 1e-30)) if ok.any() else 0


def write_md(doc, out):
    """dropin.md: the rows' times in ms, scipy's ratio, and ndfilt's largest difference from
    scipy (the peers' are in the JSON: OpenCV's medianBlur, for one, extends the border its own
    way)."""
    rows = doc["rows"]
    m = doc["meta"]
    cols = sorted({k for r in rows for k in r["ms"]}, key=lambda k: (k != "ndfilt cpu", k))
    L = [f"## The rest of scipy.ndimage (commit {m['commit']}, {m['cpus']} CPUs, GPU {m['gpu']})",
         "", "ms per call (" + m["how"] + "); peers on the same arrays in the same run. "
         "bench/dropin.py.", "",
         "| case | shape | dtype | " + " | ".join(cols) +
         " | scipy / ndfilt cpu | ndfilt's max diff |",
         "|---|---|---|" + "---|" * len(cols) + "---|---|"]
    for r in rows:
        ms = r["ms"]
        L.append(f"| {r['case']} | {'x'.join(map(str, r['shape']))} | {r['dtype']} | " +
                 " | ".join(f"{ms[c]:.2f}" if c in ms else "–" for c in cols) +
                 f" | {ms['scipy'] / ms['ndfilt cpu']:.1f}x | "
                 f"{max(v for k, v in r['diff'].items() if k.startswith('ndfilt')):.1e} |")
    if m["opencv"] is None:
        L += ["", "OpenCV was not installed on this machine; GPU columns need CuPy and a GPU."]
    with open(os.path.join(out, "dropin.md"), "w") as f:
        f.write("\n".join(L) + "\n")


def plot(doc, out):
    """dropin.png: each case's speed-up over scipy for every column that timed it (log)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = doc["rows"]
    cols = sorted({k for r in rows for k in r["ms"] if k != "scipy"},
                  key=lambda k: (not k.startswith("ndfilt"), k))
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) * max(len(cols), 2) / 2 + 1.5))
    h = 0.8 / len(cols)
    for j, c in enumerate(cols):
        ys = [i + (j - (len(cols) - 1) / 2) * h for i, r in enumerate(rows) if c in r["ms"]]
        xs = [r["ms"]["scipy"] / r["ms"][c] for r in rows if c in r["ms"]]
        ax.barh(ys, xs, height=h, color=f"C{j}", label=c)
    ax.set_xscale("log")
    ax.axvline(1, color="k", lw=0.8)
    ax.set_yticks(range(len(rows)), [r["case"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up over scipy.ndimage (log; scipy one thread)")
    m = doc["meta"]
    ax.set_title(f"The rest of scipy.ndimage, {m['commit']}, {m['cpus']} CPUs, GPU {m['gpu']}",
                 fontsize=9)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "dropin.png"), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="dropin-out")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    threads = os.cpu_count()
    try:
        import cv2
        cv2.setNumThreads(threads)
    except ImportError:
        cv2 = None
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
        import cupyx.scipy.ndimage as cndi
    except Exception:
        cp = cndi = None
    try:
        import cucim
        import cucim.skimage._vendored.ndimage as cucim_ndi
        cucim_version = getattr(cucim, "__version__", "unknown")
    except Exception as e:  # not installed, or no GPU
        cucim_ndi = cucim_version = None
        cucim_why = f"{type(e).__name__}: {e}"[:200]
    ndfilt.set_device("cpu")
    rows = []
    for name, x, nf, sp, cv, gpu in cases(a.quick):
        r = {"case": name, "shape": list(x.shape), "dtype": str(x.dtype), "ms": {}, "diff": {}}
        ref = sp(x)
        got = nf(x)
        r["diff"]["ndfilt cpu"] = diff(got, ref)
        r["ms"]["ndfilt cpu"] = timing.wall_ms(lambda: nf(x), budget=1.0)
        r["ms"]["scipy"] = timing.wall_ms(lambda: sp(x), reps=1, budget=1.0)
        if cv2 is not None and cv is not None and x.ndim == 2:
            r["ms"][f"OpenCV {cv[0]}"] = timing.wall_ms(lambda: cv[1](cv2, x), budget=1.0)
            r["diff"][f"OpenCV {cv[0]}"] = diff(cv[1](cv2, x), ref)
        if cp is not None and gpu is not None:
            xd = cp.asarray(x)
            peers = [("ndfilt gpu", lambda: nf(xd)), ("cupyx", lambda: gpu(cndi, xd))]
            if cucim_ndi is not None:
                peers.append(("cuCIM", lambda: gpu(cucim_ndi, xd)))
            for col, fn in peers:
                try:
                    r["diff"][col] = diff(cp.asnumpy(fn()), ref)
                    r["ms"][col] = timing.events_ms(fn, reps=10 if col == "ndfilt gpu" else 5)
                except Exception as e:  # ndfilt: no GPU solver of this filter yet
                    r.setdefault("errors", {})[col] = f"{type(e).__name__}: {e}"[:200]
        print(f"{name}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in r["ms"].items()), flush=True)
        rows.append(r)
    doc = {"meta": {"commit": timing.commit(), "gpu": timing.gpu_name(cp), "cpus": threads,
                    "cucim": cucim_version,
                    "cucim_missing": None if cucim_ndi is not None or cp is None else cucim_why,
                    "date": time.strftime("%Y-%m-%d"), "opencv": cv2.__version__ if cv2 else None,
                    "quick": a.quick,
                    "how": "CPU: wall clock, median of 5 after a warm-up (one call past 1 s); "
                           "GPU: CUDA events; diff: largest |x - scipy| / max |scipy|"},
           "rows": rows}
    with open(os.path.join(a.out, "dropin.json"), "w") as f:
        json.dump(timing.clean_json(doc), f, indent=1)
    write_md(doc, a.out)
    plot(doc, a.out)
    with open(os.path.join(a.out, "dropin.md")) as f:
        print(f.read())


if __name__ == "__main__":
    main()
