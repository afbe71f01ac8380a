"""bench/timing.py - the CPU timer bench/peers.py and bench/gaussian.py share (the latter also
in its child processes, which do not import peers.py)."""
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
