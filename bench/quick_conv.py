#!/usr/bin/env python3
"""quick_conv.py - ndfilt correlate (cuda_direct, cuda_fft, auto) vs cupyx on a few shapes and
kernel sizes, CuPy arrays, CUDA events, median of REPS (a development probe; the benchmark of
record is bench/conv.py). usage: quick_conv.py [2d|3d|4d ...]"""
import os
import sys

import numpy as np
import cupy as cp
import cupyx.scipy.ndimage as cndi

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ndfilt  # noqa: E402
from timing import events_ms  # noqa: E402  (bench/timing.py)


BATCH = int(os.environ.get("BATCH", "1"))  # calls back to back per timing


def t(f, reps=10):
    return events_ms(f, reps, BATCH, warm=1)


SHAPES = {"2d": ((2048, 2048), (3, 7, 11, 17)), "3d": ((256, 256, 256), (3, 5, 7, 11, 17)),
          "4d": ((32, 128, 128, 128), (3, 5, 7, 11))}
PEER_MAX_MS = float(os.environ.get("PEER_MAX_MS", "50"))
for fam in sys.argv[1:] or ["2d", "3d"]:
    shape, ks = SHAPES[fam]
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    y = cp.empty_like(x)
    peer_ok = True
    for k in ks:
        w = cp.random.standard_normal((k,) * len(shape), dtype=cp.float32)
        wh = cp.asnumpy(w).astype(np.float64)
        row = [f"{fam} k{k:<3}"]
        ref = None
        if peer_ok:
            tp = t(lambda: cndi.correlate(x, w, output=y, mode="constant"), reps=3)
            ref = y.copy()
            row.append(f"cupyx {tp:8.3f}")
            peer_ok = tp < PEER_MAX_MS
        for m in ("cuda_direct", "cuda_fft", "auto"):
            try:
                tm = t(lambda: ndfilt.correlate(x, wh, output=y, mode="constant", method=m))
                err = "" if ref is None else \
                    f" e={float(cp.abs(y - ref).max() / cp.abs(ref).max()):.1e}"
                row.append(f"{m} {tm:8.3f}{err}")
            except Exception as ex:  # noqa: BLE001
                row.append(f"{m} n/a ({str(ex)[:60]})")
        print("  ".join(row), flush=True)
    del x, y
    cp.get_default_memory_pool().free_all_blocks()
