#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/slabs.py - the "slabs" family: numpy arrays larger than the memory a GPU call may use
(ndfilt.set_memory_limit), filtered in slabs of the first axis, beside the host<->device
bandwidth measured in the same run:

  python3 bench/slabs.py [--out DIR] [--n N] [--limit GB]
  python3 bench/slabs.py --gpus [--out DIR] [--shapes 1024x1024x1024,...] [--counts 1,2,4]
                        [--memories pageable,page-locked]

For an N^3 float32 numpy array (default 1280: 8.4 GB in and as much out) under a limit of
--limit GB (default 8): ndfilt's Gaussian sigma 4 (nearest) and correlate 7^3, wall clock per
call, against the time the bus needs for the bytes (input up and output down at the pinned
bandwidth measured here, each direction alone and both at once), the same call with no limit
on the GPU (arrays of 1 GB or more go in slabs there too, as large as the GPU takes) and on
the CPU. The result under the limit is compared with the one with none. --pinned: page-locked
arrays (`cupyx.empty_pinned`) as well as numpy's own. Writes DIR/slabs.json and DIR/slabs.md
(bench/results/slabs/).

--gpus: the same calls on numpy arrays of each shape, pageable and page-locked, on 1, 2, 4, ...
of the machine's GPUs (set_device("cuda:0,1,...")), beside each GPU's pinned bandwidth and the
largest difference from the one-GPU result (the recursive Gaussian's two sweeps forced by a
limit, on the first shape). Writes DIR/gpus.json and DIR/gpus.md."""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import timing  # noqa: E402

import ndfilt  # noqa: E402


def bandwidth(cp, devices, nbytes=1 << 30):
    """Pinned host->device, device->host, and both at once (a stream each), on every GPU of
    `devices` at the same time, summed over them, in GB/s: one GPU's bus, or what the host gives
    several buses together."""
    bufs = []
    for g in devices:
        with cp.cuda.Device(g):
            pin = cp.cuda.alloc_pinned_memory
            bufs.append((g, pin(nbytes), pin(nbytes), cp.cuda.alloc(nbytes), cp.cuda.alloc(nbytes),
                         cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)))

    def go(up, down):
        for g, h, h2, d, d2, s1, s2 in bufs:
            with cp.cuda.Device(g):
                if up:
                    d.copy_from_host_async(h.ptr, nbytes, s1)
                if down:
                    d2.copy_to_host_async(h2.ptr, nbytes, s2)
        for g in devices:
            cp.cuda.Device(g).synchronize()

    def timed(up, down):
        go(up, down)
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            go(up, down)
            ts.append(time.perf_counter() - t)
        return float(np.median(ts))

    n = len(devices) * nbytes
    return n / timed(1, 0) / 1e9, n / timed(0, 1) / 1e9, 2 * n / timed(1, 1) / 1e9


def kernel7():
    """The correlation's kernel: 7^3 random weights summing to 1."""
    w = np.random.default_rng(4).random((7, 7, 7))
    return w / w.sum()


def rel_diff(out, ref):
    """The largest difference of out from ref, relative to ref's largest value (in blocks of
    the first axis, on every core: these arrays are tens of GB)."""
    from concurrent.futures import ThreadPoolExecutor

    def block(i):
        o, r = out[i:i + 16], ref[i:i + 16]
        return float(np.abs(o - r).max()), float(np.abs(r).max())
    with ThreadPoolExecutor(os.cpu_count()) as ex:
        d, m = zip(*ex.map(block, range(0, out.shape[0], 16)))
    return max(d) / max(max(m), 1e-30)


def random_array(shape, seed=3):
    """A float32 numpy array of uniform random values, made on the GPU 64 rows at a time."""
    import cupy as cp
    x = np.empty(shape, np.float32)
    rng = cp.random.default_rng(seed)
    for i in range(0, shape[0], 64):
        rng.random((min(64, shape[0] - i),) + tuple(shape[1:]), dtype=cp.float32).get(out=x[i:i + 64])
    return x


def write_gpus(out_dir, meta, rows, counts):
    """gpus.json and gpus.md of the rows so far. A row may carry the commit of the run it
    came from (rows of several runs on the same machine kind); meta's bandwidth is its own
    run's, each row's run in meta["runs"] where there are several."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gpus.json"), "w") as fh:
        json.dump(timing.clean_json({"meta": meta, "rows": rows}), fh, indent=1)
    ngpu = meta["gpus"]
    runs = meta.get("runs", [meta])
    bus = " ".join(
        f"Run {r['commit']}: " + "; ".join(
            f"{g}: {v['up']:.0f}/{v['down']:.0f}/{v['both']:.0f}"
            for g, v in enumerate(r["bandwidth_gbs"])) +
        "; every GPU at once (sums): " + "/".join(
            f"{r['bandwidth_all_gbs'][k]:.0f}" for k in ("up", "down", "both")) + "."
        for r in runs)
    md = [f"# Several GPUs in one process ({ngpu} x {meta['gpu']}, {meta['threads']} host cores, "
          f"{', '.join(r['commit'] for r in runs)})", "",
          "float32 numpy arrays in and out (pageable: numpy's own memory; page-locked: "
          "`cupyx.empty_pinned`), wall clock per call (median of three after a warm-up), "
          "`set_device('cuda:0,1,...')`: slabs of the first axis spread over the GPUs (one GPU "
          "takes arrays of 1 GB or more in slabs too, its copies up and down overlapping; the "
          "recursive Gaussian, which fits one GPU, stays on the first). Speed-up against one "
          "GPU on the same arrays; the difference is from one GPU's result. Pinned bandwidth "
          "per GPU (up/down/both, GB/s). " + bus, "",
          "| case | array | memory | " +
          " | ".join(f"{c} GPU{'s' if c > 1 else ''}" for c in counts) +
          " | largest rel. diff | run |", "|---|---|---|" + "---|" * len(counts) + "---|---|"]
    for r in rows:
        cells = [f"{run['s']:.3f} s ({run['speedup']:.2f}x)" for run in r["runs"]]
        diff = max(run.get("max_diff", 0) for run in r["runs"])
        run_of = r.get("commit", meta["commit"])
        md.append(f"| {r['case']} | {'x'.join(map(str, r['shape']))} ({r['gb_in']:.1f} GB) | "
                  f"{r['memory']} | " + " | ".join(cells) + f" | {diff:.1e} | {run_of} |")
        if "two_sweeps" in r:
            md.append(f"| {r['case']}, two sweeps forced | | {r['memory']} | " +
                      " | ".join(f"{v['s']:.3f} s ({v['speedup']:.2f}x)" for v in r["two_sweeps"])
                      + " | | |")
    with open(os.path.join(out_dir, "gpus.md"), "w") as fh:
        fh.write("\n".join(md) + "\n")


class HostArrays:
    """An input and an output float32 array of a shape for each kind of host memory asked for:
    "pageable" (numpy's own; the input random, made first) or "page-locked"
    (`cupyx.empty_pinned`, the input a copy of the pageable one), each pair made when first
    asked for."""

    def __init__(self, shape):
        self.shape, self.pairs = shape, {}

    def __getitem__(self, memory):
        if memory not in self.pairs:
            import cupyx
            if memory == "pageable":
                self.pairs[memory] = (random_array(self.shape), np.empty(self.shape, np.float32))
            else:
                x = cupyx.empty_pinned(self.shape, np.float32)
                x[...] = self["pageable"][0]
                self.pairs[memory] = (x, cupyx.empty_pinned(self.shape, np.float32))
        return self.pairs[memory]


def gpus(a):
    """Several GPUs against one on the same numpy arrays (see the module's text)."""
    import cupy as cp
    ngpu = cp.cuda.runtime.getDeviceCount()
    counts = sorted({c for c in (1, 2, 4, 8, ngpu) if c <= ngpu}) if not a.counts else \
        [int(c) for c in a.counts.split(",")]
    bw = []
    for g in range(ngpu):
        bw.append(bandwidth(cp, [g]))
        print(f"GPU {g}: pinned up {bw[-1][0]:.1f} GB/s, down {bw[-1][1]:.1f}, both "
              f"{bw[-1][2]:.1f}", flush=True)
    bw_all = bandwidth(cp, list(range(ngpu))) if ngpu > 1 else bw[0]
    print(f"all {ngpu} GPUs at once: pinned up {bw_all[0]:.1f} GB/s, down {bw_all[1]:.1f}, both "
          f"{bw_all[2]:.1f} (sums)", flush=True)
    w = kernel7()

    def write():
        meta = {"commit": timing.commit(), "gpu": timing.gpu_name(cp), "gpus": ngpu,
                "date": time.strftime("%Y-%m-%d"), "threads": os.cpu_count(),
                "bandwidth_gbs": [{"up": u, "down": d, "both": b} for u, d, b in bw],
                "bandwidth_all_gbs": {"up": bw_all[0], "down": bw_all[1], "both": bw_all[2]}}
        write_gpus(a.out, meta, rows, counts)

    rows = []
    for first, shape in enumerate(tuple(int(v) for v in t.split("x")) for t in a.shapes.split(",")):
        first = first == 0
        arrays = HostArrays(shape)
        refs = {}  # each case's result on one GPU from the first kind of memory
        gb = 4 * math.prod(shape) / 1e9
        for memory in a.memories.split(","):
            x, out = arrays[memory]
            cases = [("gaussian sigma 4", lambda **k: ndfilt.gaussian_filter(
                          x, 4.0, mode="nearest", output=out, **k)),
                     ("gaussian sigma 4, recursive", lambda **k: ndfilt.gaussian_filter(
                          x, 4.0, mode="nearest", output=out, method="iir", **k)),
                     ("correlate 7^3", lambda **k: ndfilt.correlate(
                          x, w, mode="nearest", output=out, method="direct", **k))]
            for name, f in cases:
                r = {"case": name, "memory": memory, "shape": list(shape), "gb_in": gb, "runs": []}
                ndfilt.set_memory_limit(0)
                for c in counts:
                    ndfilt.set_device("cuda:" + ",".join(str(g) for g in range(c)))
                    t = timing.wall_ms(f, reps=3) / 1e3
                    run = {"gpus": c, "s": t, "gb_per_s": 2 * gb / t, "slab_rows": ndfilt.slabs(),
                           "solver": ndfilt.last_solver()}
                    if c == 1 and name not in refs:
                        refs[name] = out.copy()
                    else:
                        run["max_diff"] = rel_diff(out, refs[name])
                    r["runs"].append(run)
                    print(f"{name} {'x'.join(map(str, shape))} {memory} on {c} GPU(s): {t:.3f} s "
                          f"({2 * gb / t:.1f} GB/s in+out), slab rows {run['slab_rows']}, "
                          f"{run['solver']}, diff {run.get('max_diff')}", flush=True)
                one = r["runs"][0]["s"]
                for run in r["runs"]:
                    run["speedup"] = one / run["s"]
                if "recursive" in name and first:  # two sweeps forced by a limit, every count
                    ndfilt.set_memory_limit(x.nbytes)
                    r["two_sweeps"] = []
                    for c in counts:
                        ndfilt.set_device("cuda:" + ",".join(str(g) for g in range(c)))
                        t = timing.wall_ms(f, reps=3) / 1e3
                        r["two_sweeps"].append({"gpus": c, "s": t, "speedup": one / t,
                                                "slab_rows": ndfilt.slabs()})
                        print(f"  two sweeps on {c} GPU(s): {t:.3f} s", flush=True)
                    ndfilt.set_memory_limit(0)
                rows.append(r)
                write()  # after each case: a call that runs out of time keeps what it measured
        del arrays, x, out, refs

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "results", "slabs"))
    ap.add_argument("--n", type=int, default=1280)
    ap.add_argument("--limit", type=float, default=8.0)
    ap.add_argument("--pinned", action="store_true", help="page-locked arrays too")
    ap.add_argument("--gpus", action="store_true")
    ap.add_argument("--shapes", default="1024x1024x1024")
    ap.add_argument("--counts", default="", help="GPU counts (default 1, 2, 4, ... up to all)")
    ap.add_argument("--memories", default="pageable,page-locked", help="--gpus: host memory kinds")
    a = ap.parse_args()
    if a.gpus:
        return gpus(a)
    import cupy as cp
    up, down, both = bandwidth(cp, [cp.cuda.Device().id])
    print(f"pinned bandwidth: up {up:.1f} GB/s, down {down:.1f}, both at once {both:.1f}")
    n = a.n
    arrays = HostArrays((n, n, n))
    gb = 4 * n ** 3 / 1e9
    ideal_serial = gb / up + gb / down   # one direction at a time
    ideal_duplex = 2 * gb / both         # both directions at once
    w = kernel7()
    meta = {"commit": timing.commit(), "gpu": timing.gpu_name(cp),
            "date": time.strftime("%Y-%m-%d"), "threads": os.cpu_count(),
            "bandwidth_gbs": {"up": up, "down": down, "both": both}}
    rows, refs = [], {}  # each case's result with no limit, from pageable arrays

    def call(name, x, out):
        if name.startswith("g"):
            return lambda: ndfilt.gaussian_filter(x, 4.0, mode="nearest", output=out)
        return lambda: ndfilt.correlate(x, w, mode="nearest", output=out, method="direct")

    for name in ("gaussian sigma 4", "correlate 7^3"):
        for memory in ("pageable", "page-locked") if a.pinned else ("pageable",):
            x, out = arrays[memory]
            f = call(name, x, out)
            r = {"case": name, "memory": memory, "shape": [n] * 3, "gb_in": gb,
                 "limit_gb": a.limit}
            ndfilt.set_device("cuda")
            ndfilt.set_memory_limit(0)
            try:
                r["gpu_no_limit_s"] = timing.wall_ms(f, reps=3) / 1e3
                if memory == "pageable":
                    refs[name] = out.copy()
            except Exception as e:  # more than the GPU holds
                r["gpu_no_limit_s"] = None
                r["gpu_no_limit_error"] = str(e)[:200]
            ndfilt.set_memory_limit(int(a.limit * 1e9))
            r["slabs_s"] = timing.wall_ms(f, reps=3) / 1e3
            r["slab_rows"] = ndfilt.slabs()
            r["solver"] = ndfilt.last_solver()
            if name in refs:
                r["max_diff"] = rel_diff(out, refs[name])
            ndfilt.set_memory_limit(0)
            ndfilt.set_device("cpu")  # the Gaussian of pageable arrays, up to 2048^3
            r["cpu_s"] = timing.wall_ms(f, reps=1, budget=5) / 1e3 \
                if name.startswith("g") and memory == "pageable" and n < 2048 else None
            r["bus_serial_s"], r["bus_duplex_s"] = ideal_serial, ideal_duplex
            r["of_serial_bus"] = ideal_serial / r["slabs_s"]
            r["of_duplex_bus"] = ideal_duplex / r["slabs_s"]
            rows.append(r)
            print(f"{name} {memory}: slabs {r['slabs_s']:.2f} s ({r['slab_rows']} rows a slab), "
                  f"{100 * r['of_serial_bus']:.0f}% of the one-way bus time {ideal_serial:.2f} s, "
                  f"{100 * r['of_duplex_bus']:.0f}% of the duplex {ideal_duplex:.2f} s; no limit "
                  f"{r['gpu_no_limit_s']}, cpu {r['cpu_s']} s, diff {r.get('max_diff')}",
                  flush=True)
            write_slabs(a, meta, rows, n)


def write_slabs(a, meta, rows, n):
    """slabs.json and slabs.md of the rows so far (a call that runs out of time keeps them)."""
    up, down, both = (meta["bandwidth_gbs"][k] for k in ("up", "down", "both"))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "slabs.json"), "w") as fh:
        json.dump(timing.clean_json({"meta": meta, "rows": rows}), fh, indent=1)
    md = [f"# Slabs: numpy arrays past the GPU call's memory limit ({meta['gpu']}, "
          f"{meta['commit']})", "",
          f"Pinned bandwidth in the same run: up {up:.1f} GB/s, down {down:.1f} GB/s, both at "
          f"once {both:.1f} GB/s. Bus time: the input up and the output down at those rates, "
          "one way at a time or both at once; the slabbed call's share of it is the figure "
          "(100% = the bus's pace). GPU, no limit: the same call with no memory limit (one GPU "
          "takes arrays of 1 GB or more in slabs too, as large as its free memory allows); the "
          "difference is from that call's result on pageable arrays.", "",
          "| case | array | memory | limit | slabs | bus one-way | bus duplex | slab rows | "
          "GPU, no limit | CPU | rel. diff |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mem = f"{r['gpu_no_limit_s']:.2f} s" if r["gpu_no_limit_s"] else "does not fit"
        md.append(f"| {r['case']} | {n}^3 f32 ({r['gb_in']:.1f} GB) | {r['memory']} | "
                  f"{r['limit_gb']:g} GB | "
                  f"{r['slabs_s']:.2f} s | {100 * r['of_serial_bus']:.0f}% | "
                  f"{100 * r['of_duplex_bus']:.0f}% | {r['slab_rows']} | {mem} | "
                  f"{'-' if r['cpu_s'] is None else '%.2f s' % r['cpu_s']} | "
                  f"{r.get('max_diff', float('nan')):.1e} |")
    with open(os.path.join(a.out, "slabs.md"), "w") as fh:
        fh.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
