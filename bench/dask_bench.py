#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/dask_bench.py - ndfilt.dask against dask-image on the same dask arrays and cluster:

  python3 bench/dask_bench.py [--out DIR] [--workers N] [--quick]
  python3 bench/dask_bench.py --cuda [--out DIR] [--n N]

A dask.distributed LocalCluster of N worker processes (default: one a core, one thread each)
on the CPU; float32 volumes in chunks, each filter's graph computed to numpy (wall clock,
median of three after a warm-up run), beside the unchunked single-process ndfilt call and the
largest difference between the two chunked results. Writes DIR/dask.json and DIR/dask.md
(default dask-out/).

--cuda: dask_cuda.LocalCUDACluster on 1 and on every GPU of the machine (a worker a GPU), an
N^3 float32 array (default 1024) of CuPy chunks of N/4 rows made and kept on the workers; each
filter's result summed on the workers (wall clock, median of three after a warm-up), ndfilt.dask
beside dask-image (cupyx.scipy.ndimage on each chunk) and one unchunked ndfilt call on one GPU.
Writes DIR/dask_cuda.json and DIR/dask_cuda.md."""
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


def task_times(distributed, client, f):
    """Where one run of f spends its time on the workers: seconds summed over tasks by the
    task's name and what the worker did (compute, transfer of its inputs from another worker,
    disk), the largest first, beside the run's wall clock."""
    t = time.perf_counter()
    with distributed.get_task_stream(client) as ts:
        f()
    sums = {"wall": time.perf_counter() - t}
    for task in ts.data:
        name = str(task["key"][0] if isinstance(task["key"], tuple) else task["key"])
        name = name.rsplit("-", 1)[0] if "-" in name else name
        for ss in task.get("startstops", ()):
            k = f"{ss['action']} {name}"
            sums[k] = sums.get(k, 0.0) + ss["stop"] - ss["start"]
    return dict(sorted(sums.items(), key=lambda kv: -kv[1])[:8])


def cuda_main(a):
    import cupy as cp
    import dask.array as da
    import distributed
    from dask_cuda import LocalCUDACluster
    from dask_image import ndfilters as dif
    import ndfilt
    import ndfilt.dask as nd
    n = a.n
    ngpu = cp.cuda.runtime.getDeviceCount()
    w7 = np.random.default_rng(4).random((7, 7, 7)).astype(np.float32)
    w7 /= w7.sum()
    cases = [("gaussian_filter sigma 4, nearest", lambda m, x: m.gaussian_filter(x, 4.0, mode="nearest")),
             ("correlate 7^3, nearest",  # cupyx takes CuPy weights only
              lambda m, x: m.correlate(x, w7 if m is nd else cp.asarray(w7), mode="nearest"))]
    xg = cp.random.default_rng(0).random((n, n, n), dtype=cp.float32)
    one = {}
    for label, lazy in cases:
        f = (lambda: ndfilt.gaussian_filter(xg, 4.0, mode="nearest")) if "gauss" in label else \
            (lambda: ndfilt.correlate(xg, w7, mode="nearest"))
        one[label] = timing.wall_ms(lambda: (f(), cp.cuda.Device().synchronize()), reps=3)
    del xg
    cp.get_default_memory_pool().free_all_blocks()
    rows = []
    for workers in sorted({1, ngpu}):
        cluster = LocalCUDACluster(n_workers=workers, CUDA_VISIBLE_DEVICES=list(range(workers)),
                                   dashboard_address=None)
        client = distributed.Client(cluster)
        rs = da.random.RandomState(RandomState=cp.random.RandomState)
        x = rs.random_sample((n, n, n), chunks=(n // 4, n, n)).astype(np.float32).persist()
        distributed.wait(x)
        held = {}  # how many of x's chunks each worker holds (uneven: tasks move whole chunks)
        for ws in client.who_has(x).values():
            for w in ws:
                held[w] = held.get(w, 0) + 1
        placement = sorted(held.values(), reverse=True)
        for label, lazy in cases:
            # each chunk's result reduced to its sum on its worker: the filter runs every time
            # (a persisted result would be reused where a graph's keys repeat) and nothing
            # larger than a number leaves the GPUs
            t_nd = timing.wall_ms(lambda: lazy(nd, x).sum().compute(), reps=3)
            t_di = timing.wall_ms(lambda: lazy(dif, x).sum().compute(), reps=3)
            diff = float(abs(lazy(nd, x) - lazy(dif, x)).max().compute())
            rows.append({"case": label, "shape": [n] * 3, "chunks": [n // 4, n, n],
                         "workers": workers, "ndfilt_dask_ms": t_nd, "dask_image_ms": t_di,
                         "ndfilt_one_gpu_unchunked_ms": one[label], "max_abs_diff": diff,
                         "placement": placement,
                         "ndfilt_dask_tasks": task_times(distributed, client,
                                                         lambda: lazy(nd, x).sum().compute()),
                         "dask_image_tasks": task_times(distributed, client,
                                                        lambda: lazy(dif, x).sum().compute())})
            print(rows[-1], flush=True)
        client.close()
        cluster.close()
    meta = {"commit": timing.commit(), "gpu": timing.gpu_name(cp), "gpus": ngpu,
            "machine": f"{ngpu} x {timing.gpu_name(cp)}, {os.cpu_count()} host cores",
            "date": time.strftime("%Y-%m-%d")}
    write_cuda(a.out, meta, rows)


def write_cuda(out_dir, meta, rows):
    """dask_cuda.json and dask_cuda.md: the timings, and where the workers' time went."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "dask_cuda.json"), "w") as f:
        json.dump(timing.clean_json({"meta": meta, "rows": rows}, 4), f, indent=1)

    def spent(t):  # the three largest sums of task time, in seconds
        top = [(k, v) for k, v in t.items() if k != "wall"][:3]
        return "; ".join(f"{k} {v:.2f}" for k, v in top)
    lines = [f"## Dask on GPUs (commit {meta['commit']}, {meta['machine']}, "
             "dask_cuda.LocalCUDACluster, a worker a GPU)", "",
             "The same dask array of CuPy chunks (float32, made and kept on the workers), each "
             "result summed on the workers (the filter runs every time, only numbers leave the "
             "GPUs); wall-clock medians of three. dask-image runs "
             "cupyx.scipy.ndimage on each chunk, ndfilt.dask ndfilt's CUDA solvers; the last "
             "column is one ndfilt call on the whole CuPy array on one GPU. "
             "bench/dask_bench.py --cuda.", "",
             "| case | shape | chunks | GPUs | ndfilt.dask (ms) | dask-image (ms) | speed-up | "
             "ndfilt, one GPU, unchunked (ms) | max abs diff |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {'x'.join(map(str, r['shape']))} | "
                     f"{'x'.join(map(str, r['chunks']))} | {r['workers']} | "
                     f"{r['ndfilt_dask_ms']:.0f} | {r['dask_image_ms']:.0f} | "
                     f"{r['dask_image_ms'] / r['ndfilt_dask_ms']:.1f}x | "
                     f"{r['ndfilt_one_gpu_unchunked_ms']:.0f} | {r['max_abs_diff']:.1e} |")
    lines += ["", "Where one more run's time went: seconds summed over the workers' tasks by "
              "what they did (compute; transfer: fetching a task's inputs from another worker) "
              "and the task's name, the three largest, beside the run's wall clock. Compute "
              "returns when a CUDA call is queued, so a chunk's filter shows as little there.",
              "", "| case | GPUs | library | wall (s) | largest sums (s) |", "|---|---|---|---|---|"]
    for r in rows:
        for lib, k in (("ndfilt.dask", "ndfilt_dask_tasks"), ("dask-image", "dask_image_tasks")):
            if k in r:
                lines.append(f"| {r['case']} | {r['workers']} | {lib} | {r[k]['wall']:.2f} | "
                             f"{spent(r[k])} |")
    if any("placement" in r for r in rows):
        lines += ["", "Chunks of the input on each worker: " + "; ".join(
            f"{r['workers']} workers: {r['placement']}" for r in rows if "placement" in r
            and r["case"] == rows[0]["case"])]
    with open(os.path.join(out_dir, "dask_cuda.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="dask-out")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--n", type=int, default=1024)
    a = ap.parse_args()
    if a.cuda:
        return cuda_main(a)
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
