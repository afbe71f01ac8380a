#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/user_paths.py - the "user paths" benchmark family: what users call, timed as they call
it, beside the alternative they have, in one run on one machine.

  python3 bench/user_paths.py [--out DIR] [--quick] [--cli PATH]

writes DIR/user.json and DIR/user.md (bench/results/user/ is that layout; bench/report.py puts
it in BENCHMARKS.md; scripts/gpu-check.sh part `user` runs it into $OUT/user/).

Rows (wall clock per call, the median of several calls after a warm-up call, time.perf_counter around
the Python call and a synchronisation of the device, so transfers and waits count):
  - ks, Python, a CuPy image and a CuPy sigma map (sigma ~ U[0, r_max / 3)): the same map every
    call, and a new map every call (a dose engine: a new spread per beam; the maps made before
    the clock runs, cycled); 512^2 r_max 8 and 32, 2048^2 r_max 8, 128^3 r_max 8. The
    alternative: a naive exact gather (bench/ks.py's peer, a CuPy RawKernel), the same wall
    clock. ndfilt.ks is called with r_max set, as a dose engine knows its largest spread.
  - gaussian_filter of a numpy 256^3 float32, sigma 4.5, mode nearest: ndfilt with the device
    auto, cuda and cpu; cupyx.scipy.ndimage with cp.asarray and .get(); scipy; and the pinned
    host -> device -> host round trip of the 64 MiB (CuPy, pinned buffers) for scale; ndfilt
    with an output given (no allocation).
  - more numpy calls (Gaussians small and large, a 7^3 correlate, a uniform filter): ndfilt
    with the device auto, cuda and cpu, and the first call of each apart.
  - correlate with a CuPy image and CuPy weights (512^2, 7 x 7): ndfilt, cupyx.
  - the CLI as a process (`ndfilt gauss in.npy out.npy --sigma 4.5`, 256^3 float32): the
    default device, --device cpu, --device cuda; the best of 3 runs each.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from timing import clean_json, commit, cpu_ms, gpu_name  # noqa: E402

import ndfilt  # noqa: E402

N_SIGMA = 3.0


def wall_ms(f, sync, reps=15):
    """Median wall-clock ms of f() then sync() (timing.cpu_ms: after a warm-up call)."""
    return cpu_ms(lambda _: (f(), sync()), None, reps)


def ks_rows(cp, quick):
    from ks import PEER, PEER_SRC  # bench/ks.py's naive exact gather
    peer = cp.RawKernel(PEER_SRC, PEER, options=("-use_fast_math",))
    sync = cp.cuda.Device().synchronize
    cases = [((512, 512), 8), ((512, 512), 32), ((2048, 2048), 8), ((128, 128, 128), 8)]
    if quick:
        cases = cases[:1] + cases[2:3]
    rows = []
    for shape, r in cases:
        rng = np.random.default_rng([7, r, *shape])
        img = cp.asarray(rng.random(shape, dtype=np.float32))
        maps = [cp.asarray((rng.random(shape) * (r / N_SIGMA * 0.999)).astype(np.float32))
                for _ in range(4)]
        out = cp.empty_like(img)
        nz, ny, nx = (1,) * (3 - len(shape)) + shape
        grid = ((nx + 31) // 32, (ny + 7) // 8, nz)

        def naive(m):
            peer(grid, (32, 8), (img, m, out, np.int32(nz), np.int32(ny), np.int32(nx),
                                 np.int32(r), np.int32(len(shape) == 3), np.float32(N_SIGMA)))

        k = [0]

        def fresh(fn):
            def call():
                k[0] += 1
                fn(maps[k[0] % len(maps)])
            return call

        ours = lambda m: ndfilt.ks(img, m, r_max=r)  # noqa: E731
        row = {"shape": list(shape), "r_max": r,
               "ndfilt_same_map_ms": wall_ms(lambda: ours(maps[0]), sync),
               "ndfilt_new_map_ms": wall_ms(fresh(ours), sync),
               "naive_gather_ms": wall_ms(fresh(naive), sync),
               "solver": ndfilt.last_solver()}
        # agreement with the naive gather on one map (its fast-math erf: ~1e-6)
        got = ndfilt.ks(img, maps[1], r_max=r)
        naive(maps[1])
        row["max_rel_diff_vs_naive"] = float(cp.abs(got - out).max() / cp.abs(out).max())
        row["speedup_vs_naive"] = row["naive_gather_ms"] / row["ndfilt_new_map_ms"]
        rows.append(row)
        print(f"ks {shape} r{r}: same {row['ndfilt_same_map_ms']:.3f} new "
              f"{row['ndfilt_new_map_ms']:.3f} naive {row['naive_gather_ms']:.3f} ms",
              flush=True)
    return rows


def gaussian_rows(cp, quick):
    from scipy import ndimage as ndi
    shape = (128,) * 3 if quick else (256,) * 3
    x = np.random.default_rng(3).random(shape, dtype=np.float32)
    kw = dict(sigma=4.5, mode="nearest")
    none = lambda: None  # noqa: E731
    res = {"shape": list(shape), "sigma": 4.5, "mode": "nearest"}
    for dev in ["auto", "cuda", "cpu"]:
        try:
            ndfilt.set_device(dev)
            res[f"ndfilt_{dev}_ms"] = wall_ms(lambda: ndfilt.gaussian_filter(x, **kw), none)
            res[f"ndfilt_{dev}_solver"] = ndfilt.last_solver()
        except Exception as e:  # no GPU
            res[f"ndfilt_{dev}_ms"] = None
            res[f"ndfilt_{dev}_error"] = str(e)[:200]
    ndfilt.set_device("cuda" if res.get("ndfilt_cuda_ms") else "cpu")
    out = np.empty_like(x)
    res["ndfilt_given_output_ms"] = wall_ms(lambda: ndfilt.gaussian_filter(x, output=out, **kw),
                                            none)
    ndfilt.set_device("auto")
    res["scipy_ms"] = wall_ms(lambda: ndi.gaussian_filter(x, **kw), none, reps=3)
    if cp is not None:
        import cupyx.scipy.ndimage as cnd
        res["cupyx_roundtrip_ms"] = wall_ms(
            lambda: cnd.gaussian_filter(cp.asarray(x), **kw).get(), none)
        # the pinned round trip of the same bytes, for scale
        nbytes = x.nbytes
        h_in = cp.cuda.alloc_pinned_memory(nbytes)
        h_out = cp.cuda.alloc_pinned_memory(nbytes)
        d = cp.empty(shape, np.float32)
        hin = np.frombuffer(h_in, np.float32, x.size)
        hout = np.frombuffer(h_out, np.float32, x.size)
        hin[:] = x.ravel()

        def trip():
            d.set(hin.reshape(shape))
            d.get(out=hout.reshape(shape))
        res["pinned_roundtrip_ms"] = wall_ms(trip, cp.cuda.Device().synchronize)
    best = min(v for k, v in res.items() if k in ("ndfilt_cuda_ms", "ndfilt_cpu_ms") and v)
    res["auto_over_best"] = res["ndfilt_auto_ms"] / best if res.get("ndfilt_auto_ms") else None
    print(f"gaussian numpy {shape}: " + ", ".join(
        f"{k} {v:.2f}" for k, v in res.items() if k.endswith("_ms") and v), flush=True)
    return res


def numpy_rows(quick):
    """More numpy calls, where the CPU or the GPU is the faster: ndfilt on each device and on
    auto's; the first call of each (planning, and a GPU output's page-locked block) apart."""
    rng = np.random.default_rng(4)
    cases = [("gaussian_filter", (64, 64, 64), dict(sigma=2.0), None),
             ("gaussian_filter", (2048, 2048), dict(sigma=3.0), None),
             ("gaussian_filter", (256, 256, 256), dict(sigma=1.0, mode="nearest"), None),
             ("correlate", (128, 128, 128), {}, rng.uniform(-1, 1, (7, 7, 7))),
             ("uniform_filter", (256, 256, 256), dict(size=9), None)]
    if quick:
        cases = cases[:2]
    none = lambda: None  # noqa: E731
    rows = []
    for name, shape, kw, w in cases:
        x = rng.random(shape, dtype=np.float32)
        f = getattr(ndfilt, name)
        call = (lambda: f(x, w, **kw)) if w is not None else (lambda: f(x, **kw))
        r = {"call": name, "shape": list(shape), "args": dict(kw),
             "weights": list(w.shape) if w is not None else None}
        for dev in ["auto", "cuda", "cpu"]:
            try:
                ndfilt.set_device(dev)
                t0 = time.perf_counter()
                call()
                r[f"{dev}_first_ms"] = (time.perf_counter() - t0) * 1e3
                r[f"{dev}_ms"] = wall_ms(call, none)
                r[f"{dev}_solver"] = ndfilt.last_solver()
            except Exception as e:  # no GPU
                r[f"{dev}_ms"] = None
                r[f"{dev}_error"] = str(e)[:200]
        ndfilt.set_device("auto")
        best = min(v for v in (r["cuda_ms"], r["cpu_ms"]) if v)
        r["auto_over_best"] = r["auto_ms"] / best if r.get("auto_ms") else None
        print(f"numpy {name} {shape}: auto {r['auto_ms']:.2f} ({r['auto_solver']}), cuda "
              f"{r['cuda_ms']}, cpu {r['cpu_ms']:.2f} ms", flush=True)
        rows.append(r)
    return rows


def correlate_row(cp):
    import cupyx.scipy.ndimage as cnd
    rng = np.random.default_rng(5)
    x = cp.asarray(rng.random((512, 512), dtype=np.float32))
    w = cp.asarray(rng.random((7, 7)))
    sync = cp.cuda.Device().synchronize
    res = {"shape": [512, 512], "kernel": [7, 7],
           "ndfilt_ms": wall_ms(lambda: ndfilt.correlate(x, w), sync),
           "cupyx_ms": wall_ms(lambda: cnd.correlate(x, w), sync)}
    print(f"correlate cupy x and w: ndfilt {res['ndfilt_ms']:.3f} cupyx {res['cupyx_ms']:.3f}",
          flush=True)
    return res


def cli_rows(cli, quick):
    shape = (128,) * 3 if quick else (256,) * 3
    res = {"shape": list(shape), "sigma": 4.5}
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.npy"), os.path.join(d, "out.npy")
        np.save(src, np.random.default_rng(4).random(shape, dtype=np.float32))
        for name, extra in [("default", []), ("cpu", ["--device", "cpu"]),
                            ("cuda", ["--device", "cuda"])]:
            ts = []
            for _ in range(3):
                t = time.perf_counter()
                p = subprocess.run([cli, *extra, "gauss", src, dst, "--sigma", "4.5"],
                                   capture_output=True, text=True)
                ts.append(1e3 * (time.perf_counter() - t))
                if p.returncode:
                    res[f"{name}_error"] = p.stderr.strip()[-200:]
                    ts = [None]
                    break
            res[f"{name}_ms"] = min(ts) if ts[0] is not None else None
    ok = [res[k] for k in ("cpu_ms", "cuda_ms") if res.get(k)]
    if res.get("default_ms") and ok:
        res["default_over_best"] = res["default_ms"] / min(ok)
    print("cli: " + ", ".join(f"{k} {v:.0f}" for k, v in res.items()
                              if k.endswith("_ms") and v), flush=True)
    return res


def markdown(doc):
    m = doc["meta"]
    L = [f"## User paths (commit {m['commit']}, {m['gpu']}, {m['cpus']} CPUs)", "",
         "Wall clock per call as users make it (median after warm-up; the device synchronised "
         "in the timing), alternatives in the same run. bench/user_paths.py.", ""]
    if doc.get("ks"):
        L += ["### ks, CuPy image and CuPy sigma map (Python)", "",
              "| shape | r_max | ndfilt, same map (ms) | ndfilt, new map each call (ms) | "
              "naive exact gather (ms) | speed-up | solver | max rel. diff |",
              "|---|---|---|---|---|---|---|---|"]
        for r in doc["ks"]:
            L.append(f"| {'x'.join(map(str, r['shape']))} | {r['r_max']} | "
                     f"{r['ndfilt_same_map_ms']:.3f} | {r['ndfilt_new_map_ms']:.3f} | "
                     f"{r['naive_gather_ms']:.3f} | {r['speedup_vs_naive']:.1f}x | "
                     f"{r['solver']} | {r['max_rel_diff_vs_naive']:.1e} |")
        L.append("")
    g = doc.get("gaussian")
    if g:
        L += [f"### gaussian_filter, numpy {'x'.join(map(str, g['shape']))} float32, sigma 4.5, "
              "nearest", "", "| path | ms per call |", "|---|---|"]
        for k, label in [("ndfilt_auto_ms", "ndfilt, device auto"),
                         ("ndfilt_cuda_ms", "ndfilt, device cuda"),
                         ("ndfilt_cpu_ms", "ndfilt, device cpu"),
                         ("cupyx_roundtrip_ms", "cupyx (cp.asarray, filter, .get())"),
                         ("scipy_ms", "scipy"),
                         ("pinned_roundtrip_ms", "pinned host->device->host copy alone")]:
            if g.get(k) is not None:
                L.append(f"| {label} | {g[k]:.2f} |")
        if g.get("ndfilt_given_output_ms") is not None:
            L.append(f"| ndfilt, the faster device, `output=` given | "
                     f"{g['ndfilt_given_output_ms']:.2f} |")
        if g.get("auto_over_best"):
            L.append(f"\nauto / the faster of ndfilt's cpu and cuda: {g['auto_over_best']:.2f}")
        L += ["", "A new numpy output of a GPU call is page-locked memory from the binding's pool "
              "(a freed output's block serves the next one of its size), which the device "
              "copies into directly.", ""]
    if doc.get("numpy"):
        L += ["### More numpy calls: ndfilt on each device and on auto's", "",
              "| call | shape | auto (ms) | cuda (ms) | cpu (ms) | auto / faster | auto's solver "
              "| first call: auto, cuda, cpu (ms) |", "|---|---|---|---|---|---|---|---|"]
        for r in doc["numpy"]:
            args = ", ".join(f"{k}={v}" for k, v in r["args"].items())
            if r["weights"]:
                args = "x".join(map(str, r["weights"])) + " weights" + (", " + args if args else "")
            def ms(v, f="%.2f"):
                return "–" if v is None else f % v
            first = ", ".join(ms(r.get(d + "_first_ms"), "%.1f") for d in ("auto", "cuda", "cpu"))
            L.append(f"| {r['call']}({args}) | {'x'.join(map(str, r['shape']))} | "
                     f"{r['auto_ms']:.2f} | {ms(r['cuda_ms'])} | {r['cpu_ms']:.2f} | "
                     f"{r['auto_over_best']:.2f} | {r['auto_solver']} | {first} |")
        L.append("")
    c = doc.get("correlate")
    if c:
        L += ["### correlate, CuPy image and CuPy weights (512^2, 7x7)", "",
              f"ndfilt {c['ndfilt_ms']:.3f} ms, cupyx {c['cupyx_ms']:.3f} ms", ""]
    cl = doc.get("cli")
    if cl:
        L += ["### CLI as a process: `ndfilt gauss in.npy out.npy --sigma 4.5`, "
              f"{'x'.join(map(str, cl['shape']))} float32", "", "| device | ms (best of 3) |",
              "|---|---|"]
        for k in ["default", "cpu", "cuda"]:
            if cl.get(f"{k}_ms") is not None:
                L.append(f"| {k} | {cl[f'{k}_ms']:.0f} |")
            elif cl.get(f"{k}_error"):
                L.append(f"| {k} | error: {cl[f'{k}_error']} |")
        if cl.get("default_over_best"):
            L.append(f"\ndefault / the faster of cpu and cuda: {cl['default_over_best']:.2f}")
        L.append("")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="user-out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cli", default=None)
    ap.add_argument("--parts", default="ks,gaussian,numpy,correlate,cli")
    a = ap.parse_args()
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception:
        cp = None
    driver = "?"
    try:
        v = cp.cuda.runtime.driverGetVersion()
        driver = f"CUDA {v // 1000}.{v % 1000 // 10}"
    except Exception:
        pass
    doc = {"meta": {"commit": commit(), "gpu": gpu_name(cp), "driver": driver,
                    "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count()}}
    os.makedirs(a.out, exist_ok=True)
    parts = [("ks", lambda: ks_rows(cp, a.quick)), ("gaussian", lambda: gaussian_rows(cp, a.quick)),
             ("numpy", lambda: numpy_rows(a.quick)), ("correlate", lambda: correlate_row(cp))]
    if a.cli:
        parts.append(("cli", lambda: cli_rows(a.cli, a.quick)))
    for name, fn in parts:
        if name not in a.parts.split(",") or (cp is None and name in ("ks", "correlate")):
            continue
        try:
            doc[name] = fn()
        except Exception as e:
            doc[name + "_error"] = f"{type(e).__name__}: {e}"[:300]
            print(f"{name}: {doc[name + '_error']}", flush=True)
        with open(os.path.join(a.out, "user.json"), "w") as f:
            json.dump(clean_json(doc, 4), f, indent=1)
    with open(os.path.join(a.out, "user.md"), "w") as f:
        f.write(markdown(doc) + "\n")


if __name__ == "__main__":
    main()
