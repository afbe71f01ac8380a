#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/dask_bench.py - ndfilt.dask against dask-image on the same dask arrays and cluster:

  python3 bench/dask_bench.py [--out DIR] [--workers N] [--quick]

A dask.distributed LocalCluster of N worker processes (default: one a core, one thread each)
on the CPU; float32 volumes in chunks, each filter's graph computed to numpy (wall clock,
median of three after a warm-up run), beside the unchunked single-process ndfilt call and the
largest difference between the two chunked results. Writes DIR/dask.json and DIR/dask.md
(default dask-out/). GPU clusters (dask_cuda) are not run here."""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import timing  # noqa: E402

W5 = np.random.default_rng(5).random((5, 5, 5))  # the correlation's kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="dask-out")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    import dask.array as da
    import distributed
    from dask_image import ndfilters as dif
    import ndfilt
    import ndfilt.dask as nd
    ndfilt.set_device("cpu")
    cluster = distributed.LocalCluster(n_workers=a.workers, threads_per_worker=1,
                                       processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    n = 128 if a.quick else 256
    cases = [
        ("gaussian_filter sigma 4, nearest", lambda m, x: m.gaussian_filter(x, 4.0, mode="nearest"),
         lambda x: ndfilt.gaussian_filter(x, 4.0, mode="nearest")),
        ("gaussian_filter sigma 2, reflect", lambda m, x: m.gaussian_filter(x, 2.0, mode="reflect"),
         lambda x: ndfilt.gaussian_filter(x, 2.0, mode="reflect")),
        ("correlate 5^3, nearest", lambda m, x: m.correlate(x, W5, mode="nearest"),
         lambda x: ndfilt.correlate(x, W5, mode="nearest")),
    ]
    rows = []
    rng = np.random.default_rng(0)
    for chunk in (64, 128):
        x = rng.random((n, n, n), dtype=np.float32)
        d = da.from_array(x, chunks=chunk).persist()
        distributed.wait(d)
        for label, lazy, whole in cases:
            t_nd = timing.wall_ms(lambda: lazy(nd, d).compute(), reps=3)
            t_di = timing.wall_ms(lambda: lazy(dif, d).compute(), reps=3)
            t_one = timing.wall_ms(lambda: whole(x), reps=3)
            diff = float(np.abs(lazy(nd, d).compute().astype(np.float64) -
                                lazy(dif, d).compute()).max())
            rows.append({"case": label, "shape": [n] * 3, "chunks": chunk, "ndfilt_dask_ms": t_nd,
                         "dask_image_ms": t_di, "ndfilt_unchunked_ms": t_one,
                         "max_abs_diff": diff})
            print(rows[-1], flush=True)
    client.close()
    cluster.close()
    meta = {"commit": timing.commit(), "machine": f"{os.cpu_count()} CPUs, no GPU used",
            "workers": a.workers, "gpu": "none (CPU cluster)",
            "date": time.strftime("%Y-%m-%d")}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "dask.json"), "w") as f:
        json.dump(timing.clean_json({"meta": meta, "rows": rows}, 4), f, indent=1)
    lines = [f"## Dask (commit {meta['commit']}, {meta['machine']}, LocalCluster of "
             f"{a.workers} worker processes x 1 thread)", "",
             "The same dask arrays (float32, persisted in the workers), each graph computed "
             "to numpy; wall-clock medians of three. dask-image runs scipy.ndimage on each chunk "
             "(its `gaussian_filter`, `correlate`), ndfilt.dask runs ndfilt's CPU solvers. "
             "bench/dask_bench.py.", "",
             "| case | shape | chunks | ndfilt.dask (ms) | dask-image (ms) | speed-up | "
             "ndfilt unchunked, one process (ms) | max abs diff |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {'x'.join(map(str, r['shape']))} | {r['chunks']}^3 | "
                     f"{r['ndfilt_dask_ms']:.0f} | {r['dask_image_ms']:.0f} | "
                     f"{r['dask_image_ms'] / r['ndfilt_dask_ms']:.1f}x | "
                     f"{r['ndfilt_unchunked_ms']:.0f} | {r['max_abs_diff']:.1e} |")
    with open(os.path.join(a.out, "dask.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
