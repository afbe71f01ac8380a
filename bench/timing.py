# SPDX-License-Identifier: BSD-3-Clause
"""bench/timing.py - the CPU timer bench/peers.py and bench/gaussian.py share (the latter also
in its child processes, which do not import peers.py), the CUDA-event timer of bench/iir.py and
bench/ks.py; the bench scripts' line for a family that did not run, the commit and GPU they
report, and their JSON's cleaning."""
import math
import os
import subprocess
import time

import numpy as np


def cpu_ms(fn, x, reps=5):
    """Median wall-clock ms of fn(x) over reps calls, after one warm-up call."""
    fn(x)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn(x)
        ts.append(1e3 * (time.perf_counter() - t))
    return float(np.median(ts))


def wall_ms(f, reps=5, budget=float("inf")):
    """Median wall-clock ms of f() over reps calls after a warm-up call; the warm-up call's
    time alone where it took over budget seconds."""
    t = time.perf_counter()
    f()
    first = time.perf_counter() - t
    if first > budget:
        return 1e3 * first
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return 1e3 * float(np.median(ts))


def events_ms(f, reps=20, batch=1, warm=3):
    """Median ms per call of f() on the current CuPy stream, CUDA events around `batch` calls
    back to back, over reps timings after `warm` calls."""
    import cupy as cp
    for _ in range(warm):
        f()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps):
        s.record()
        for _ in range(batch):
            f()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / batch)
    return float(np.median(ts))


def commit():
    """The commit under test: NDF_COMMIT (the GPU machine's copy has no .git), else git's."""
    c = os.environ.get("NDF_COMMIT")
    if c:
        return c
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                              cwd=os.path.dirname(os.path.abspath(__file__)),
                              capture_output=True, text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def gpu_name(cp):
    """The current CuPy device's name; "none" without CuPy (cp None), "?" if it cannot say."""
    if cp is None:
        return "none"
    try:
        name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return "?"


def family_status(res):
    """A Markdown line for a benchmark family that did not run (its result holds "skipped" or
    "error"), else None: the bench scripts' common report of a skipped family."""
    if isinstance(res, dict) and "skipped" in res:
        return f"skipped ({res['skipped']}): {res.get('why', '')}"
    if isinstance(res, dict) and "error" in res:
        return f"**error**: {res['error']}"
    return None


def clean_json(v, sig=None):
    """v with NaN and infinities as None, numpy scalars as Python numbers, tuples as lists and
    keys as strings, so json.dump writes strict JSON; floats to sig significant figures when
    given."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        return float("%.*g" % (sig, v)) if sig else v
    if isinstance(v, dict):
        return {str(k): clean_json(x, sig) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean_json(x, sig) for x in v]
    if isinstance(v, np.generic):
        return clean_json(v.item(), sig)
    return v
