#!/usr/bin/env python3
"""quick_sep.py - per-pass timings of cuda_sep vs cupyx on CuPy arrays (a development probe;
the benchmark of record is bench/peers.py)."""
import os
import sys

import numpy as np
import cupy as cp
import cupyx.scipy.ndimage as cndi

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ndfilt  # noqa: E402
from timing import events_ms  # noqa: E402  (bench/timing.py)


BATCH = int(os.environ.get("BATCH", "1"))


def t(f, reps=20):
    return events_ms(f, reps, BATCH, warm=3)


def gk(sigma):
    r = int(4 * sigma + 0.5)
    x = np.arange(-r, r + 1)
    w = np.exp(-0.5 * x * x / sigma ** 2)
    return w / w.sum()


x = cp.random.rand(4096, 4096, dtype=cp.float32)
y = cp.empty_like(x)
v = cp.random.rand(256, 256, 256, dtype=cp.float32)
vy = cp.empty_like(v)
cp.copyto(y, x)
copy_ms = t(lambda: cp.copyto(y, x))
gbs = 2 * x.nbytes / copy_ms / 1e6
print(f"copy 4096^2: {copy_ms:.4f} ms = {gbs:.0f} GB/s (read+write)")
for shape_name, a, b in (("4096^2", x, y), ("256^3", v, vy)):
    for sigma in (1, 4, 4.5, 16):
        w = gk(sigma)
        for axis in range(a.ndim):
            for m in ("cuda_sep", "cuda_direct"):
                if m == "cuda_direct" and sigma != 4:
                    continue
                ms = t(lambda: ndfilt.correlate1d(a, w, axis=axis, output=b, mode="constant",
                                                  method=m))
                bw = 2 * a.nbytes / ms / 1e6
                cx = t(lambda: cndi.correlate1d(a, cp.asarray(w), axis=axis, output=b, mode="constant"))
                print(f"{shape_name} sigma={sigma:>4} n={len(w):3d} axis={axis} {m:11s} "
                      f"{ms:.4f} ms ({100 * bw / gbs:5.1f}% copy bw)  cupyx {cx:.4f} ms  "
                      f"x{cx / ms:.2f}")
# correctness spot check vs cupyx
w = gk(4)
for axis in range(2):
    got = ndfilt.correlate1d(x, w, axis=axis, mode="reflect", method="cuda_sep")
    ref = cndi.correlate1d(x, cp.asarray(w), axis=axis, mode="reflect")
    print("axis", axis, "max |diff| vs cupyx", float(cp.abs(got - ref).max()))
