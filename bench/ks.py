#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/ks.py - the kernel-superposition (KS) benchmark (seed 000: da Silva, Ansorge and Jena,
"Efficient scatter-based kernel superposition on GPU", sections Benchmarking and Results):

  python3 bench/ks.py [--quick] [--out DIR] [--budget SECONDS] [--cpu-only]
  python3 bench/ks.py --md-only DIR      (ks.md again from DIR/ks.json)
  python3 bench/ks_plots.py DIR          (fig2_gather.png, fig3_scatter.png, fig6_groups.png)

writes DIR/ks.json (every figure; rewritten after each case, so a cut-off run keeps what it
measured) and DIR/ks.md (tables), and prints the short summary table last on stdout. With
ks_plots.py's figures that is the layout of bench/results/ks/, from which bench/report.py makes
BENCHMARKS.md; scripts/gpu-check.sh (part `ks`) runs both into $OUT/ks/.

The seed's protocol: a uniform random image in [0, 1) (float32), sigma ~ U[0, r_max / n_sigma)
with n_sigma 3, index input (Eq. 2a), output 'same'; 512^2 for r_max 1..32 (--quick: 1, 2, 4, 8,
16, 32), also 2048^2 (r_max 1, 2, 4, 8, 16; quick 4, 8) and 128^3 (1, 2, 4, 8; quick 4, 8). For
each case every CUDA ks solver of the build runs at every tile shape (t_y, b_y) in (8, 8),
(16, 8), (32, 8), (16, 16), (32, 16) (ndf_ks_opts tile_rows, block_rows; a build without
NDF_KS_ALL_SHAPES refuses all but (8, 8): "not built"). One plan per (case, solver, shape),
made before the clock runs; ndf_execute is timed by CUDA events: two warm-up calls, then "one
call" = the median of 3-5 single calls from an idle GPU, and "b2b" = the median of 3 batches of
up to 10 calls back to back, per call (the seed's measure: the mean of ten identical calls). A
call over 50 ms is timed once (wall clock), and that solver and shape sit out the larger r_max
of the image size. Inputs are not rotated: the plan binds the sigma map, and repeated identical
calls are the seed's protocol. Cases run in the order 512^2 at the r_max of --quick, 2048^2,
128^3, the other 512^2 r_max; past --budget seconds (default 420) what is left is skipped and
marked ("budget"), as is the GPU part after a CUDA error.

The peer in the same run: "peer_naive_gather", the issue's straightforward exact gather (a CuPy
RawKernel compiled with -use_fast_math: one thread per output pixel, every one of the
(2 r_max + 1)^n neighbours read with its own sigma, Eq. 4 through erff, the per-pixel cut-off
ceil(n_sigma sigma); the issue measured 0.136 / 0.454 / 1.61 / 6.41 ms at r_max 4 / 8 / 16 / 32
on an H200). The CPU twin cpu_ks runs at 1 thread and on all cores (one child process each,
NDF_THREADS and OMP_NUM_THREADS set) on 512^2 r_max 1..32 (powers of two) and 128^3 r_max 4, 8,
time-boxed: a case predicted over 5 s a call is skipped.

Accuracy: every CUDA solver's output (once per case, at the first tile shape that ran) against
cpu_ks (float64, all cores, same arrays) for 512^2 r_max <= 8 and 128^3 r_max <= 4, elsewhere
against the peer: max |out - ref| / max |ref|. The LUT gathers are approximate: reported only.

Groups (the seed's five, Tables 2-3, Fig. 6): exact gather (cuda_ks_gather, with 0/1/2 shared
arrays), 1D gather (lut1d_*), 2D gather (lut2d_*), safe scatter (global_atomic, shared_atomic,
sync: no warp-synchronous execution), warp-sync scatter (threadfence, warpsync, and ndfilt's
shuffle). An implementation's time at an r_max is its best over tile shapes and, for gathers,
shared-array variants; a group's is its best implementation's. Targets (issue): the best exact
solver (exact gathers and scatters) <= 0.03 ms at 512^2 r_max 8 and <= 0.2 ms at r_max 32.

`python3 bench/ks.py --cpu-worker N --cases SHAPE:R,..;.. --cap S` is the child of the CPU part:
it times cpu_ks with N threads and prints one JSON line a case."""
import argparse
import ctypes as C
import datetime
import json
import math
import os
import re
import subprocess
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import ndfilt  # noqa: E402
from ndfilt import _lib  # noqa: E402
import timing  # noqa: E402  (bench/timing.py: events_ms, family_status)
from timing import family_status as _status  # noqa: E402

lib = _lib.lib

# ------------------------------------------------------------------ settings
SEED = 88652
N_SIGMA = 3.0
R_512 = list(range(1, 33))
R_QUICK = [1, 2, 4, 8, 16, 32]
GPU_CASES = [((512, 512), R_512), ((2048, 2048), [1, 2, 4, 8, 16]),
             ((128, 128, 128), [1, 2, 4, 8])]
GPU_CASES_QUICK = [((512, 512), R_QUICK), ((2048, 2048), [4, 8]), ((128, 128, 128), [4, 8])]
CPU_CASES = [((512, 512), R_QUICK), ((128, 128, 128), [4, 8])]
CPU_CASES_QUICK = [((512, 512), R_QUICK), ((128, 128, 128), [4])]
REF_CPU_MAX_R = {(512, 512): 8, (128, 128, 128): 4}  # cpu_ks is the reference up to this r_max
SHAPES = [(8, 8), (16, 8), (32, 8), (16, 16), (32, 16)]  # (t_y, b_y): tile_rows, block_rows
TARGETS = {8: 0.03, 32: 0.2}  # issue: best exact solver at 512^2, ms
ISSUE_NAIVE_MS = {4: 0.136, 8: 0.454, 16: 1.61, 32: 6.41}  # issue, H200, 512^2

SMEM = ["", "_smem1", "_smem2"]
LUTS = ["lut1d_global", "lut1d_shared", "lut1d_texture", "lut2d_global", "lut2d_texture"]
SCATTERS = ["global_atomic", "shared_atomic", "sync", "threadfence", "warpsync", "shuffle", "quad"]
SAFE = ("global_atomic", "shared_atomic", "sync")
GROUPS = ["exact gather", "1D gather", "2D gather", "safe scatter", "warp-sync scatter"]
EXACT_GROUPS = ("exact gather", "safe scatter", "warp-sync scatter")
SCATTER_GROUPS = ("safe scatter", "warp-sync scatter")
IMPLS = {"gather": ("exact gather", ["cuda_ks_gather" + s for s in SMEM])}
for _v in LUTS:
    IMPLS[_v] = ("1D gather" if _v.startswith("lut1d") else "2D gather",
                 [f"cuda_ks_approx_gather_{_v}{s}" for s in SMEM])
for _v in SCATTERS:
    IMPLS["scatter_" + _v] = ("safe scatter" if _v in SAFE else "warp-sync scatter",
                              ["cuda_ks_scatter_" + _v])
SOLVERS = [s for _, names in IMPLS.values() for s in names]
ONLY = ""  # --only: a regex the CUDA solvers run must match
PEER = "peer_naive_gather"

# timing
SLOW_MS = 50.0            # a call over this is not repeated; the solver sits out larger r_max
SINGLE_S, B2B_S = 0.010, 0.012  # GPU time aimed at for the single calls, and for each batch
MIN_SINGLE, MAX_SINGLE, BATCH, N_BATCHES = 3, 5, 10, 3
METRIC = "ms_b2b"         # the tables' and plots' figure (the seed's: mean of 10 calls)
CPU_MAX_S = 5.0           # a CPU case predicted slower than this a call is skipped
CPU_GROWTH = 1.5          # cpu_ks time ~ (2 r_max + 1)^1.5 (measured: 512^2 r 16->32, 128^3 4->8)
CPU_REPEAT_S = 1.0        # a CPU call slower than this is not repeated
CPU_CAP_S = 120.0         # the CPU part's time box (at most a quarter of --budget)

STATUS = {_lib.OK: "OK", _lib.EINVAL: "EINVAL", _lib.ENOMEM: "ENOMEM",
          _lib.EUNSUPPORTED: "EUNSUPPORTED", _lib.EIO: "EIO", _lib.ECUDA: "ECUDA",
          _lib.ENODEV: "ENODEV"}

PEER_SRC = r"""
extern "C" __global__ void peer_naive_gather(const float *__restrict__ img,
                                             const float *__restrict__ sig,
                                             float *__restrict__ out, int nz, int ny, int nx,
                                             int rmax, int three_d, float n_sigma) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  const int z = blockIdx.z;
  if (x >= nx || y >= ny) return;
  const int rz = three_d ? rmax : 0;
  const float c = 0.70710678118654752f; /* 1 / sqrt(2) */
  float acc = 0.0f;
  for (int dz = -rz; dz <= rz; dz++) {
    const int qz = z + dz;
    if (qz < 0 || qz >= nz) continue;
    for (int dy = -rmax; dy <= rmax; dy++) {
      const int qy = y + dy;
      if (qy < 0 || qy >= ny) continue;
      for (int dx = -rmax; dx <= rmax; dx++) {
        const int qx = x + dx;
        if (qx < 0 || qx >= nx) continue;
        const long long q = ((long long)qz * ny + qy) * nx + qx;
        const float s = sig[q];
        const float r = ceilf(n_sigma * s); /* the neighbour's own cut-off (Eq. 2a) */
        if (fabsf((float)dx) > r || fabsf((float)dy) > r || fabsf((float)dz) > r) continue;
        float w = 1.0f; /* s = 0: the identity (r = 0 leaves only d = 0) */
        if (s > 0.0f) {
          const float a = c / s;
          w = 0.25f * (erff((dx + 0.5f) * a) - erff((dx - 0.5f) * a)) *
              (erff((dy + 0.5f) * a) - erff((dy - 0.5f) * a));
          if (three_d) w *= 0.5f * (erff((dz + 0.5f) * a) - erff((dz - 0.5f) * a));
        }
        acc += img[q] * w;
      }
    }
  }
  out[((long long)z * ny + y) * nx + x] = acc;
}
"""


# ------------------------------------------------------------------ inputs, plans

def case_inputs(shape, r_max):
    """The case's image (U[0, 1) float32) and sigma map (U[0, r_max / n_sigma) float32), the
    same in every process; float32 rounding never lifts ceil(n_sigma * sigma) past r_max."""
    rng = np.random.default_rng([SEED, r_max, *shape])
    img = rng.random(shape, dtype=np.float32)
    sig = (rng.random(shape) * (r_max / N_SIGMA)).astype(np.float32)
    while True:
        bad = np.ceil(N_SIGMA * sig.astype(np.float64)) > r_max
        if not bad.any():
            return img, sig
        sig[bad] = np.nextafter(sig[bad], np.float32(0))


def _shape_str(s):
    return "×".join(map(str, s))


def _skey(ty, by):
    return f"{ty}x{by}"


def _msg(ctx):
    return (lib.ndf_context_message(ctx) or b"").decode()


def plan_ks(ctx, din, dout, sd, method, ty, by):
    """(plan, status, message): ndf_plan_ks of index input, output same, n_sigma 3 with the
    named solver at tile shape (t_y, b_y) (0, 0: the default); plan is None on failure."""
    opts = _lib.KsOpts(C.sizeof(_lib.KsOpts), method.encode(), _lib.KS_INDEX["input"], N_SIGMA,
                       _lib.KS_EXTENT["same"], 0, 0, ty, by)
    h = C.c_void_p()
    st = lib.ndf_plan_ks(C.byref(h), ctx, C.byref(din), C.byref(dout), sd, len(sd),
                         C.byref(opts))
    if st != _lib.OK:
        return None, st, _msg(ctx)
    return h.value, st, ""


def _fail(st, msg):
    return {"status": STATUS.get(st, str(st)), "why": msg[:300]}


# ------------------------------------------------------------------ CPU twin

def cpu_worker(n, cases, cap):
    """Child of the CPU part (NDF_THREADS and OMP_NUM_THREADS set by the parent): cpu_ks on each
    case in order, one JSON line each; a case predicted over CPU_MAX_S a call (from the last
    case of its shape, time ~ (2 r_max + 1)^CPU_GROWTH) or past the time box is skipped."""
    t_end = time.time() + cap
    ctx = ndfilt._context("cpu")
    threads = int(lib.ndf_context_threads(ctx))
    last = {}  # shape -> (r_max, seconds a call)
    for shape, r in cases:
        row = {"shape": list(shape), "r_max": r, "threads": n, "ndfilt_threads": threads}
        pred = None
        if shape in last:
            r0, t0 = last[shape]
            pred = t0 * ((2 * r + 1) / (2 * r0 + 1)) ** CPU_GROWTH
            row["predicted_s"] = pred
        if pred is not None and pred > CPU_MAX_S:
            row["skipped"] = f"predicted {pred:.1f} s a call (over {CPU_MAX_S:g} s)"
        elif pred is not None and pred > t_end - time.time():
            row["skipped"] = "time box"
        else:
            img, sig = case_inputs(shape, r)
            out = np.empty(shape, np.float32)
            din, dout = ndfilt._numpy_operand(img).desc, ndfilt._numpy_operand(out, True).desc
            sd = (_lib.Array * 1)(ndfilt._numpy_operand(sig).desc)
            plan, st, msg = plan_ks(ctx, din, dout, sd, "cpu_ks", 0, 0)
            if plan is None:
                row.update(_fail(st, msg))
            else:
                bi, bo = C.byref(din), C.byref(dout)
                ts = []
                for _ in range(4):  # the first call is the warm-up unless it is slow
                    t = time.perf_counter()
                    st = lib.ndf_execute(plan, bi, bo)
                    ts.append(time.perf_counter() - t)
                    if st != _lib.OK or ts[0] > CPU_REPEAT_S:
                        break
                lib.ndf_plan_destroy(plan)
                if st != _lib.OK:
                    row.update(_fail(st, _msg(ctx)))
                else:
                    ms = 1e3 * (ts[0] if len(ts) == 1 else float(np.median(ts[1:])))
                    row["ms"] = ms
                    row["how"] = ("1 call (over %g s: not repeated)" % CPU_REPEAT_S
                                  if len(ts) == 1 else f"median of {len(ts) - 1} after 1 warm-up")
                    last[shape] = (r, ms / 1e3)
        print(json.dumps(row), flush=True)


def _cases_arg(cases):
    return ";".join(f"{'x'.join(map(str, s))}:{','.join(map(str, rs))}" for s, rs in cases)


def _parse_cases(text):
    out = []
    for part in text.split(";"):
        s, rs = part.split(":")
        out += [(tuple(int(v) for v in s.split("x")), int(r)) for r in rs.split(",")]
    return out


def _child(n, cases, cap):
    """Runs cpu_worker with n threads; the lines it printed, also when the time box cut it."""
    env = dict(os.environ, NDF_THREADS=str(n), OMP_NUM_THREADS=str(n), NDF_DEVICE="cpu")
    cmd = [sys.executable, os.path.abspath(__file__), "--cpu-worker", str(n), "--cases",
           _cases_arg(cases), "--cap", "%.1f" % cap]
    note = None
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=cap + 15)
        text = p.stdout
        if p.returncode != 0:
            note = f"cpu worker ({n} threads) exited {p.returncode}: {p.stderr.strip()[-500:]}"
    except subprocess.TimeoutExpired as e:
        text = e.stdout or ""
        text = text.decode() if isinstance(text, bytes) else text
        note = f"cpu worker ({n} threads) killed at the time box ({cap + 15:.0f} s)"
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows, note


def bench_cpu(quick, cap):
    """cpu_ks at 1 thread and on all cores: {'threads_all', 'rows': [...], 'notes'}."""
    try:
        nall = len(os.sched_getaffinity(0))
    except AttributeError:
        nall = os.cpu_count() or 1
    cases = CPU_CASES_QUICK if quick else CPU_CASES
    res = {"threads_all": nall, "cap_s": cap, "rows": [], "notes": [],
           "max_predicted_s": CPU_MAX_S, "growth": CPU_GROWTH}
    t_end = time.time() + cap
    for n, share in ((1, 0.65), (nall, 1.0)):
        left = t_end - time.time()
        if left < 5:
            res["notes"].append(f"{n} threads: no time left in the CPU time box")
            continue
        rows, note = _child(n, cases, share * left)
        res["rows"] += rows
        if note:
            res["notes"].append(note)
        for r in rows:
            print(f"ks cpu {_shape_str(r['shape'])} r_max {r['r_max']} {n} threads: "
                  + (f"{r['ms']:.1f} ms" if "ms" in r else r.get("skipped", r.get("why", "?"))),
                  file=sys.stderr, flush=True)
        if n == nall:
            break  # a one-core machine
    return res


def cpu_reference(img, sig):
    """cpu_ks (float64, this process's CPU context: all cores) of the case, as float64."""
    ctx = ndfilt._context("cpu")
    out = np.empty(img.shape, np.float64)
    din, dout = ndfilt._numpy_operand(img).desc, ndfilt._numpy_operand(out, True).desc
    sd = (_lib.Array * 1)(ndfilt._numpy_operand(sig).desc)
    plan, st, msg = plan_ks(ctx, din, dout, sd, "cpu_ks", 0, 0)
    if plan is None:
        raise RuntimeError(f"cpu_ks: {STATUS.get(st)}: {msg}")
    st = lib.ndf_execute(plan, C.byref(din), C.byref(dout))
    lib.ndf_plan_destroy(plan)
    if st != _lib.OK:
        raise RuntimeError(f"cpu_ks: {STATUS.get(st)}: {_msg(ctx)}")
    return out


# ------------------------------------------------------------------ GPU

def gpu_modules():
    """(cp, why not): CuPy with a device, and a libndfilt with CUDA ks solvers."""
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as e:  # ImportError, or CuPy without a driver / device
        return None, f"{type(e).__name__}: {e}".split("\n")[0][:200]
    if not any(s.startswith("cuda_") for s in ndfilt.solvers().get("ks", [])):
        return cp, "this libndfilt has no CUDA ks solvers"
    return cp, None


def gpu_time(cp, f):
    """{'ms', 'ms_b2b', ...} of f() (a launch on the current stream): one warm-up call and one
    wall-clock probe, then CUDA events around single calls (median of 3-5) and around batches of
    up to 10 back to back (median of 3, per call); a probe over SLOW_MS is the result itself."""
    dev = cp.cuda.Device()
    f()
    dev.synchronize()
    t = time.perf_counter()
    f()
    dev.synchronize()
    probe = time.perf_counter() - t
    if 1e3 * probe > SLOW_MS:
        return {"ms": 1e3 * probe, "ms_b2b": 1e3 * probe, "slow": True}
    r = {}
    n1 = int(min(MAX_SINGLE, max(MIN_SINGLE, SINGLE_S / probe)))
    batch = int(min(BATCH, max(1, B2B_S / probe)))
    r["ms"] = timing.events_ms(f, reps=n1, batch=1, warm=0)
    r["ms_b2b"] = timing.events_ms(f, reps=N_BATCHES, batch=batch, warm=0)
    r["n"], r["batch"] = n1, batch
    if r["ms"] > SLOW_MS:
        r["slow"] = True
    return r


def _max_rel(cp, got, ref):
    """max |got - ref| / max |ref| (got float32, ref float64, both on the GPU)."""
    if bool(cp.isnan(got).any()):
        return "NaN in the output (pixels not written?)"
    return float(cp.abs(got.astype(cp.float64) - ref).max() / cp.abs(ref).max())


class _CudaDead(Exception):
    """A CUDA error the context may not survive: the GPU part stops."""


def gpu_case(cp, ctx, peer_k, shape, r_max, state):
    """One case: the peer, then every CUDA solver at every tile shape; state carries the
    deadline, the solvers found absent and the smallest r_max at which each (image size,
    solver, shape) took over SLOW_MS (larger r_max are skipped; the cases run out of order)."""
    t_case = time.time()
    img, sig = case_inputs(shape, r_max)
    R = int(np.ceil(N_SIGMA * sig.astype(np.float64)).max())
    c = {"shape": list(shape), "r_max": r_max, "R": R, "ref": None, "peer": {}, "solvers": {}}
    state["case"] = c  # what bench_gpu keeps of a case a CUDA error cut short
    size = tuple(shape)
    d_img, d_sig = cp.asarray(img), cp.asarray(sig)
    d_out, d_peer = cp.empty(shape, cp.float32), cp.empty(shape, cp.float32)
    nz, ny, nx = (1,) * (3 - len(shape)) + tuple(shape)
    grid, block = ((nx + 31) // 32, (ny + 7) // 8, nz), (32, 8, 1)
    pargs = (d_img, d_sig, d_peer, np.int32(nz), np.int32(ny), np.int32(nx), np.int32(r_max),
             np.int32(len(shape) == 3), np.float32(N_SIGMA))

    # the peer, its output the reference where cpu_ks is not
    peer_ok = False
    sk = state["slow"].get((size, PEER, ""), r_max)
    if peer_k is None:
        c["peer"] = {"skipped": state["peer_error"]}
    elif sk < r_max:
        c["peer"] = {"skipped": f"over {SLOW_MS:g} ms at r_max {sk}"}
    else:
        try:
            c["peer"] = gpu_time(cp, lambda: peer_k(grid, block, pargs))
            cp.cuda.Device().synchronize()
            peer_ok = True
            if c["peer"].get("slow"):
                state["slow"][(size, PEER, "")] = min(sk, r_max)
        except Exception as e:
            c["peer"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    ref = None
    if r_max <= REF_CPU_MAX_R.get(size, 0):
        try:
            ref = cp.asarray(cpu_reference(img, sig))
            c["ref"] = "cpu_ks"
            if peer_ok:
                c["peer"]["err"] = _max_rel(cp, d_peer, ref)
        except Exception as e:
            c["ref_error"] = f"{type(e).__name__}: {e}"[:300]
    if ref is None and peer_ok:
        ref = d_peer.astype(cp.float64)
        c["ref"] = PEER

    din = ndfilt._cuda_operand(d_img, "cupy").desc
    dout = ndfilt._cuda_operand(d_out, "cupy").desc
    sd = (_lib.Array * 1)(ndfilt._numpy_operand(sig).desc)
    bi, bo = C.byref(din), C.byref(dout)
    for name in SOLVERS:
        if name in state["absent"]:
            continue
        e = c["solvers"][name] = {"t": {}}
        for ty, by in SHAPES:
            key = _skey(ty, by)
            t = e["t"][key] = {}
            first = (ty, by) == SHAPES[0]
            if time.time() > state["deadline"]:
                t["skipped"] = "budget"
                continue
            sk = state["slow"].get((size, name, key), r_max)
            if sk < r_max:
                t["skipped"] = f"over {SLOW_MS:g} ms at r_max {sk}"
                continue
            d = e["t"].get(_skey(*SHAPES[0]), {})
            if not first and ("status" in d or "error" in d):
                t["skipped"] = f"{_skey(*SHAPES[0])} did not run"
                continue
            plan, st, msg = plan_ks(ctx, din, dout, sd, name, ty, by)
            if plan is None:
                if first and "unknown method" in msg:  # not in this build after all
                    state["absent"].add(name)
                    del c["solvers"][name]
                    break
                t.update(_fail(st, msg))
                if not first and st == _lib.EUNSUPPORTED and "ms" in d:
                    t["not_built"] = True
                continue
            try:
                st = lib.ndf_execute(plan, bi, bo)
                if st == _lib.OK:
                    t.update(gpu_time(cp, lambda: lib.ndf_execute(plan, bi, bo)))
                    st = lib.ndf_context_synchronize(ctx)
                if st != _lib.OK:
                    t.clear()
                    t.update(_fail(st, _msg(ctx)))
                    if st == _lib.ECUDA:
                        raise _CudaDead(f"{name} {key}: {t['why']}")
                    continue
                if t.get("slow"):
                    state["slow"][(size, name, key)] = min(sk, r_max)
                if "err" not in e and ref is not None:
                    d_out.fill(np.nan)
                    lib.ndf_execute(plan, bi, bo)
                    cp.cuda.Device().synchronize()
                    e["err"], e["err_ref"] = _max_rel(cp, d_out, ref), c["ref"]
            except _CudaDead:
                raise
            except Exception as ex:  # CuPy's synchronize raising a fault of the solver's
                t.clear()
                t["error"] = f"{type(ex).__name__}: {ex}"[:300]
                raise _CudaDead(f"{name} {key}: {t['error']}")
            finally:
                lib.ndf_plan_destroy(plan)
    c["seconds"] = round(time.time() - t_case, 2)
    derive(c)
    return c


def bench_gpu(cp, quick, deadline, doc, save):
    """Every GPU case, the 512^2 r_max of --quick first, then 2048^2 and 128^3, then the other
    512^2 r_max (what a short --budget keeps); the results go into doc['gpu'] as they come."""
    ctx = ndfilt._context(f"cuda:{cp.cuda.Device().id}")
    if _lib.HAVE_STREAMS:
        lib.ndf_context_set_stream(ctx, cp.cuda.get_current_stream().ptr)
    have = {s for s in ndfilt.solvers().get("ks", []) if re.search(ONLY, s)}
    state = {"deadline": deadline, "absent": {s for s in SOLVERS if s not in have}, "slow": {},
             "peer_error": None}
    try:
        peer_k = cp.RawKernel(PEER_SRC, PEER, options=("-use_fast_math",))
        if hasattr(peer_k, "compile"):  # else at the first call
            peer_k.compile()
    except Exception as e:
        peer_k = None
        state["peer_error"] = f"{type(e).__name__}: {e}"[:300]
    res = doc["gpu"] = {"cases": [], "absent": sorted(state["absent"]), "not_run": [],
                        "peer_source": PEER_SRC.strip()}
    cases = GPU_CASES_QUICK if quick else GPU_CASES
    first = [(s, r) for s, rs in cases[:1] for r in rs if r in R_QUICK]
    order = first + [(s, r) for s, rs in cases[1:] for r in rs]
    order += [(s, r) for s, rs in cases[:1] for r in rs if r not in R_QUICK]
    for i, (shape, r) in enumerate(order):
        if time.time() > deadline:
            res["not_run"] = [{"shape": list(s), "r_max": q, "why": "budget"}
                              for s, q in order[i:]]
            break
        try:
            c = gpu_case(cp, ctx, peer_k, shape, r, state)
        except _CudaDead as e:
            res["stopped"] = f"CUDA error, the GPU part stopped: {e}"
            c = state["case"]
            c["stopped"] = str(e)
            derive(c)
            res["cases"].append(c)
            res["not_run"] = [{"shape": list(s), "r_max": q, "why": "CUDA error earlier"}
                              for s, q in order[i + 1:]]
            break
        except Exception as e:
            traceback.print_exc()
            c = {"shape": list(shape), "r_max": r, "error": f"{type(e).__name__}: {e}"[:300]}
        res["cases"].append(c)
        res["absent"] = sorted(state["absent"])
        cp.get_default_memory_pool().free_all_blocks()
        save()
        g = c.get("derived", {}).get(METRIC, {}).get("group_best", {})
        p = c.get("peer", {})
        print(f"ks gpu {_shape_str(shape)} r_max {r} ({c.get('seconds', '?')} s): peer "
              + (f"{p['ms_b2b']:.3f}" if "ms_b2b" in p else "-") + "; "
              + ", ".join(f"{k} {v['ms_b2b']:.3f}" for k, v in g.items()) + " ms (b2b)",
              file=sys.stderr, flush=True)
    res["cases"].sort(key=lambda c: (len(c["shape"]), c["shape"], c["r_max"]))
    return res


# ------------------------------------------------------------------ derived figures

def _smem(name):
    return int(name[-1]) if name[-5:-1] == "smem" else 0


def derive(c):
    """c['derived'][metric] for metric 'ms_b2b' and 'ms': each implementation's best over tile
    shapes and shared-array variants ('impl_best'), each group's best ('group_best'), the best
    exact solver, the best of all and the fastest scatter."""
    c["derived"] = {}
    for metric in ("ms_b2b", "ms"):
        ib = {}
        for impl, (group, names) in IMPLS.items():
            for n in names:
                for key, t in c["solvers"].get(n, {}).get("t", {}).items():
                    if t.get(metric) is None or (impl in ib and t[metric] >= ib[impl][metric]):
                        continue
                    ib[impl] = {"solver": n, "shape": key, "smem": _smem(n), "group": group,
                                "ms": t["ms"], "ms_b2b": t["ms_b2b"], "impl": impl}
        gb = {}
        for impl, b in ib.items():
            g = b["group"]
            if g not in gb or b[metric] < gb[g][metric]:
                gb[g] = b
        d = {"impl_best": ib, "group_best": {g: gb[g] for g in GROUPS if g in gb}}
        for what, groups in (("best_exact", EXACT_GROUPS), ("best_any", GROUPS),
                             ("fastest_scatter", SCATTER_GROUPS)):
            v = [gb[g] for g in groups if g in gb]
            d[what] = min(v, key=lambda b: b[metric]) if v else None
        c["derived"][metric] = d


# ------------------------------------------------------------------ markdown

def _f(v, fmt="%.3f"):
    return fmt % v if isinstance(v, (int, float)) and not isinstance(v, bool) else (
        "–" if v is None else str(v))


def _x(v):
    """A ratio with about three significant figures."""
    return "%.0f" % v if v >= 99.5 else "%.1f" % v if v >= 0.95 else "%.2g" % v


def _rng(v):
    """'min–max×' of a list of ratios, '–' when empty."""
    if not v:
        return "–"
    lo, hi = _x(min(v)), _x(max(v))
    return lo + ("" if lo == hi else "–" + hi) + "×"


def _gpu_cases(doc, shape=None):
    g = doc.get("gpu") or {}
    return [c for c in g.get("cases", []) if "derived" in c
            and (shape is None or tuple(c["shape"]) == tuple(shape))]


def _cpu_ms(doc, shape, r, threads):
    for row in (doc.get("cpu") or {}).get("rows", []):
        if (tuple(row["shape"]) == tuple(shape) and row["r_max"] == r
                and row["threads"] == threads and "ms" in row):
            return row["ms"]
    return None


def _sol(b):
    """'solver t_yxb_y' of a best entry."""
    return f"{b['solver'].replace('cuda_ks_', '')} {b['shape']}" if b else "–"


def md_cases(doc):
    """(1) per case: the best exact solver against the peer and the targets."""
    L = ["## Best exact solver per case", "",
         "Exact = the exact gathers and the scatters (not the LUT gathers). Times in ms: *b2b* "
         "per call of a batch back to back (the seed's measure), *1 call* from an idle GPU; the "
         "solver's name without `cuda_ks_`, with its tile shape t_y×b_y. ×peer = peer b2b / "
         "best exact b2b. Targets (issue, 512²): ≤ 0.03 ms at r_max 8, ≤ 0.2 ms at r_max 32. "
         "R: the largest radius ceil(3σ) in the map.", "",
         "| shape | r_max | R | peer b2b | peer 1 call | best exact (b2b) | b2b | 1 call | "
         "best exact 1 call | ×peer | best of all (b2b) | b2b | target |",
         "|" + "---|" * 13]
    for c in _gpu_cases(doc):
        d, d1 = c["derived"][METRIC], c["derived"]["ms"]
        be, b1, ba = d["best_exact"], d1["best_exact"], d["best_any"]
        p = c["peer"]
        x = p["ms_b2b"] / be["ms_b2b"] if be and "ms_b2b" in p else None
        tgt = "–"
        lim = TARGETS.get(c["r_max"]) if tuple(c["shape"]) == (512, 512) else None
        if lim is not None:
            tgt = f"≤ {lim:g}: " + ("met" if be and be["ms_b2b"] <= lim else "**not met**") + (
                " (1 call " + ("met" if b1 and b1["ms"] <= lim else "not met") + ")")
        L.append(f"| {_shape_str(c['shape'])} | {c['r_max']} | {c['R']} | "
                 f"{_f(p.get('ms_b2b'))} | {_f(p.get('ms'))} | {_sol(be)} | "
                 f"{_f(be and be['ms_b2b'])} | {_f(be and be['ms'])} | "
                 f"{_sol(b1)} {_f(b1 and b1['ms'])} | {_f(x, '%.1f×')} | {_sol(ba)} | "
                 f"{_f(ba and ba['ms_b2b'])} | {tgt} |")
    return L + [""]


def _group_series(cases):
    """{r_max: {group or 'peer': ms}} (METRIC) over cases."""
    out = {}
    for c in cases:
        s = {g: b[METRIC] for g, b in c["derived"][METRIC]["group_best"].items()}
        if "ms_b2b" in c["peer"]:
            s["peer"] = c["peer"][METRIC]
        fs = c["derived"][METRIC]["fastest_scatter"]
        if fs:
            s["fastest scatter"] = fs[METRIC]
        out[c["r_max"]] = s
    return out


def md_table2(doc):
    """(2) Table 2: the speed-up range of each group over each other, 512²."""
    cases = _gpu_cases(doc, (512, 512))
    L = ["## Table 2: speed-ups between groups (512²)", ""]
    if not cases:
        return L + ["No 512² GPU figures.", ""]
    ser = _group_series(cases)
    rs = sorted(ser)
    names = GROUPS + ["peer"]
    L += [f"Speed-up of the column over the row, time(row) / time(column) (b2b), min–max over "
          f"r_max {rs[0]}..{rs[-1]} ({len(rs)} values; the seed's Table 2 reads the same way in "
          "its upper triangle). peer = peer_naive_gather (the issue's straightforward exact "
          "gather).", "", "| row \\ column | " + " | ".join(names) + " |",
          "|" + "---|" * (len(names) + 1)]
    for a in names:
        cells = []
        for b in names:
            if a == b:
                cells.append("")
                continue
            cells.append(_rng([s[a] / s[b] for s in ser.values() if a in s and b in s]))
        L.append(f"| **{a}** | " + " | ".join(cells) + " |")
    return L + [""]


def md_table3(doc):
    """(3) Table 3: each group's time relative to the fastest scatter, and the CPU twin."""
    gpu = (doc.get("meta") or {}).get("gpu", "?")
    nall = (doc.get("cpu") or {}).get("threads_all")
    names = GROUPS + ["peer"]
    L = ["## Table 3: time relative to the fastest scatter", "",
         "time(group) / time(fastest scatter at that r_max) (b2b), min–max over r_max; the CPU "
         f"twin cpu_ks (float64) at 1 thread and on all cores ({_f(nall, '%d')}) where it ran "
         "(512² r_max 1..32 powers of two, 128³ r_max 4, 8). The seed's Table 3 has one row a "
         f"GPU; here one row an image size on {gpu}.", "",
         "| image | r_max | " + " | ".join(names) + " | cpu_ks 1 thread | cpu_ks all cores |",
         "|" + "---|" * (len(names) + 4)]
    for shape in [s for s, _ in GPU_CASES]:
        cases = _gpu_cases(doc, shape)
        if not cases:
            continue
        ser = _group_series(cases)
        rs = sorted(ser)
        cells = [_rng([s[g] / s["fastest scatter"] for s in ser.values()
                       if g in s and "fastest scatter" in s]) for g in names]
        for n in (1, nall):
            v = []
            for r, s in ser.items():
                ms = _cpu_ms(doc, shape, r, n)
                if ms is not None and "fastest scatter" in s:
                    v.append(ms / s["fastest scatter"])
            cells.append(_rng(v))
        L.append(f"| {_shape_str(shape)} | {rs[0]}..{rs[-1]} | " + " | ".join(cells) + " |")
    return L + [""]


def md_shapes(doc):
    """(4) the preferred tile shape (and shared arrays) per implementation and r_max (Fig. 5)."""
    cases = _gpu_cases(doc, (512, 512))
    L = ["## Preferred configuration per implementation (512², like the seed's Fig. 5)", ""]
    if not cases:
        return L + ["No 512² GPU figures.", ""]
    impls = list(IMPLS)
    L += ["The tile shape t_y×b_y of each implementation's best b2b time, and for gathers the "
          "shared arrays (s0, s1, s2 = none, image, image and σ).", "",
          "| r_max | " + " | ".join(i.replace("scatter_", "sc_") for i in impls) + " |",
          "|" + "---|" * (len(impls) + 1)]
    for c in cases:
        ib = c["derived"][METRIC]["impl_best"]
        cells = []
        for i in impls:
            b = ib.get(i)
            if b is None:
                cells.append("–")
            elif i.startswith("scatter_"):
                cells.append(b["shape"])
            else:
                cells.append(f"{b['shape']} s{b['smem']}")
        L.append(f"| {c['r_max']} | " + " | ".join(cells) + " |")
    return L + [""]


def md_solvers(doc):
    """(5) every solver's best time over tile shapes at the quick cases; and its accuracy."""
    cases = [c for c in _gpu_cases(doc)
             if tuple(c["shape"]) != (512, 512) or c["r_max"] in R_QUICK]
    L = ["## Every solver (best over tile shapes, b2b ms)", ""]
    if not cases:
        return L + ["No GPU figures.", ""]
    g = doc["gpu"]
    head = [f"{_shape_str(c['shape'])} r{c['r_max']}" for c in cases]
    L += ["At 512² the r_max of --quick; '–' did not run (absent, not applicable, skipped: "
          "ks.json says why). err: max |out − ref| / max |ref| over the cases, against cpu_ks "
          "(float64; 512² r_max ≤ 8, 128³ r_max ≤ 4) and against the peer (elsewhere).", "",
          "| solver | " + " | ".join(head) + " | err vs cpu_ks | err vs peer |",
          "|" + "---|" * (len(head) + 3)]
    rows = [(PEER, None)] + [(s, s) for s in SOLVERS if s not in g.get("absent", [])]
    for label, s in rows:
        cells, ec, ep = [], [], []
        for c in cases:
            if s is None:
                cells.append(_f(c["peer"].get(METRIC)))
                if isinstance(c["peer"].get("err"), float):
                    ec.append(c["peer"]["err"])
                continue
            ts = [t[METRIC] for t in c["solvers"].get(s, {}).get("t", {}).values()
                  if METRIC in t]
            cells.append(_f(min(ts) if ts else None))
            e = c["solvers"].get(s, {})
            if isinstance(e.get("err"), float):
                (ec if e["err_ref"] == "cpu_ks" else ep).append(e["err"])
        L.append(f"| {label.replace('cuda_ks_', '')} | " + " | ".join(cells)
                 + f" | {_f(max(ec) if ec else None, '%.1e')}"
                 + f" | {_f(max(ep) if ep else None, '%.1e')} |")
    if g.get("absent"):
        L += ["", "Absent from this build: " + ", ".join(g["absent"]) + "."]
    nb = {}
    for c in _gpu_cases(doc):
        for s, e in c["solvers"].items():
            for k, t in e["t"].items():
                if t.get("not_built") and k not in nb.setdefault(s, []):
                    nb[s].append(k)
    if nb:
        L += ["", "Tile shapes refused (NDF_EUNSUPPORTED where 8x8 ran: not built, or not "
              "applicable at some r_max): " + "; ".join(
                  f"{s.replace('cuda_ks_', '')} {', '.join(k)}" for s, k in nb.items()) + "."]
    bad = [c for c in g.get("cases", []) if "error" in c]
    if bad:
        L += ["", "Cases that failed: " + "; ".join(
            f"{_shape_str(c['shape'])} r_max {c['r_max']}: {c['error']}" for c in bad) + "."]
    return L + [""]


def md_cpu(doc):
    res = doc.get("cpu")
    L = ["## CPU twin cpu_ks", ""]
    st = _status(res)
    if res is None or st:
        return L + [st or "not run", ""]
    L += [f"float64 inside, float32 in and out; 1 thread and all cores ({res['threads_all']}), "
          "each in its own process; median of 3 calls after a warm-up (one call when over "
          f"{CPU_REPEAT_S:g} s). Time box {res['cap_s']:.0f} s; cases predicted over "
          f"{CPU_MAX_S:g} s a call are skipped. ×scatter = cpu ms / fastest scatter b2b ms.", "",
          "| shape | r_max | 1 thread ms | all cores ms | speed-up | ×scatter (1) | "
          "×scatter (all) |", "|---|---|---|---|---|---|---|"]
    keys = []
    for row in res["rows"]:
        k = (tuple(row["shape"]), row["r_max"])
        if k not in keys:
            keys.append(k)
    fs = {(tuple(c["shape"]), c["r_max"]): c["derived"][METRIC]["fastest_scatter"]
          for c in _gpu_cases(doc)}
    for shape, r in keys:
        t1 = _cpu_ms(doc, shape, r, 1)
        ta = _cpu_ms(doc, shape, r, res["threads_all"])
        s = fs.get((shape, r))
        cells = [_f(t1, "%.1f"), _f(ta, "%.1f"), _f(t1 / ta if t1 and ta else None, "%.1f×"),
                 _f(t1 / s[METRIC] if t1 and s else None, "%.0f×"),
                 _f(ta / s[METRIC] if ta and s else None, "%.0f×")]
        if t1 is None or ta is None:
            why = [row.get("skipped") or row.get("why") for row in res["rows"]
                   if (tuple(row["shape"]), row["r_max"]) == (shape, r) and "ms" not in row]
            if why:
                cells[0 if t1 is None else 1] = why[0] or "–"
        L.append(f"| {_shape_str(shape)} | {r} | " + " | ".join(cells) + " |")
    for n in res["notes"]:
        L.append(f"\n{n}")
    return L + [""]


def summary(doc):
    """The short table printed last: 512² r_max of --quick, each group's best against the peer;
    then the targets."""
    L = ["## ks summary", ""]
    g = doc.get("gpu")
    st = _status(g)
    if g is None or (st and not g.get("cases")):
        L += [f"- GPU: {st or 'not run'}"]
    else:
        if st:
            L += [f"- GPU part: {st}", ""]
        cases = [c for c in _gpu_cases(doc, (512, 512)) if c["r_max"] in R_QUICK]
        L += [f"512², b2b ms on {doc['meta'].get('gpu')}; ×peer = peer / best exact.", "",
              "| r_max | peer (issue H200) | " + " | ".join(GROUPS)
              + " | best exact | ×peer | cpu_ks 1 thread |", "|" + "---|" * (len(GROUPS) + 5)]
        for c in cases:
            d = c["derived"][METRIC]
            gb, be, p = d["group_best"], d["best_exact"], c["peer"]
            x = p["ms_b2b"] / be["ms_b2b"] if be and "ms_b2b" in p else None
            issue = _f(ISSUE_NAIVE_MS.get(c["r_max"]))
            L.append(f"| {c['r_max']} | {_f(p.get('ms_b2b'))} ({issue}) | "
                     + " | ".join(_f(gb[k][METRIC]) if k in gb else "–" for k in GROUPS)
                     + f" | {_f(be and be[METRIC])} {_sol(be)} | {_f(x, '%.1f×')} | "
                     f"{_f(_cpu_ms(doc, (512, 512), c['r_max'], 1), '%.1f')} |")
        L.append("")
        for r, lim in TARGETS.items():
            c = next((c for c in _gpu_cases(doc, (512, 512)) if c["r_max"] == r), None)
            if c is None:
                L.append(f"- target r_max {r} ≤ {lim:g} ms: not measured")
                continue
            be, b1 = c["derived"][METRIC]["best_exact"], c["derived"]["ms"]["best_exact"]
            L.append(f"- target r_max {r} ≤ {lim:g} ms (best exact): b2b {_f(be and be[METRIC])}"
                     f" ({_sol(be)}) " + ("met" if be and be[METRIC] <= lim else "**not met**")
                     + f"; 1 call {_f(b1 and b1['ms'])} ("
                     + ("met" if b1 and b1["ms"] <= lim else "not met") + ")")
        if g.get("not_run"):
            L.append(f"- {len(g['not_run'])} GPU cases not run ("
                     + ", ".join(sorted({n['why'] for n in g['not_run']})) + ")")
        if g.get("stopped"):
            L.append(f"- **{g['stopped']}**")
    cpu = doc.get("cpu") or {}
    st = _status(cpu)
    if st or not cpu:
        L.append(f"- CPU twin: {st or 'not run'}")
    else:
        n = cpu["threads_all"]
        L.append(f"- cpu_ks 512², 1 / {n} threads: " + "; ".join(
            f"r_max {r} {_f(_cpu_ms(doc, (512, 512), r, 1), '%.1f')} / "
            f"{_f(_cpu_ms(doc, (512, 512), r, n), '%.1f')} ms" for r in (8, 32)))
    return L + [""]


def markdown(doc):
    m = doc["meta"]
    L = [f"# Kernel superposition benchmark (bench/ks.py{' --quick' if m['quick'] else ''})", "",
         f"- GPU: {m['gpu']}; date {m['date']}; ndfilt {m['ndfilt']} commit {m['commit']}; "
         f"cupy {m['cupy']}; CPU threads {m['cpu_count']}; budget {m['budget_s']:g} s, "
         f"took {m.get('seconds', '?')} s" + (" (**budget reached**)" if m.get("budget_hit")
                                              else ""),
         "- inputs: image U[0, 1) float32, σ U[0, r_max/3) float32 (seeded), n_sigma 3, index "
         "input (Eq. 2a), output same; times exclude transfers and plan making", ""]
    st = _status(doc.get("gpu"))
    if st:
        L += [f"GPU part: {st}", ""]
    for fn in (md_cases, md_table2, md_table3, md_shapes, md_solvers, md_cpu):
        L += fn(doc)
    return L + summary(doc)


def write_md(doc, out):
    lines = markdown(doc)
    with open(os.path.join(out, "ks.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return summary(doc)


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--quick", action="store_true", help="fewer r_max (see above)")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds; work left after this is skipped and marked (%(default)s)")
    ap.add_argument("--cpu-only", action="store_true", help="only the CPU twin (no GPU part)")
    ap.add_argument("--no-cpu", action="store_true", help="no CPU twin")
    ap.add_argument("--only", default="", help="the CUDA solvers matching this regex only")
    ap.add_argument("--md-only", metavar="DIR", help="rewrite DIR/ks.md from DIR/ks.json")
    ap.add_argument("--cpu-worker", type=int, metavar="N", help=argparse.SUPPRESS)
    ap.add_argument("--cases", help=argparse.SUPPRESS)
    ap.add_argument("--cap", type=float, default=60.0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    global ONLY
    ONLY = a.only
    if a.cpu_worker:
        cpu_worker(a.cpu_worker, _parse_cases(a.cases), a.cap)
        return
    if a.md_only:
        with open(os.path.join(a.md_only, "ks.json")) as f:
            doc = json.load(f)
        print("\n".join(write_md(doc, a.md_only)))
        return
    t0 = time.time()
    deadline = t0 + a.budget
    os.makedirs(a.out, exist_ok=True)
    cp, why = (None, "--cpu-only") if a.cpu_only else gpu_modules()
    gpu = timing.gpu_name(cp)
    meta = {"gpu": gpu, "date": datetime.date.today().isoformat(), "commit": timing.commit(),
            "ndfilt": ndfilt.__version__, "solvers": ndfilt.solvers().get("ks", []),
            "cupy": cp.__version__ if cp is not None else None, "numpy": np.__version__,
            "python": sys.version.split()[0], "cpu_count": os.cpu_count(), "quick": a.quick,
            "budget_s": a.budget, "seed": SEED, "n_sigma": N_SIGMA, "no_gpu": why,
            "tile_shapes": [_skey(*s) for s in SHAPES], "tile_shape_key": "t_y x b_y "
            "(ndf_ks_opts tile_rows x block_rows; the seed's (b_y, t_y) reversed)",
            "impls": {k: {"group": g, "solvers": n} for k, (g, n) in IMPLS.items()},
            "groups": GROUPS, "exact_groups": list(EXACT_GROUPS), "metric": METRIC,
            "targets_ms_512": TARGETS, "issue_naive_ms_512": ISSUE_NAIVE_MS,
            "how": {"ms": f"CUDA events around one call from an idle GPU, median of "
                    f"{MIN_SINGLE}-{MAX_SINGLE} (n), after 2 warm-up calls",
                    "ms_b2b": f"CUDA events around `batch` (up to {BATCH}) calls back to back, "
                    f"per call, median of {N_BATCHES}",
                    "slow": f"one call, wall clock, when a call took over {SLOW_MS:g} ms "
                    "(ms = ms_b2b = that call); the solver and shape then skip larger r_max of "
                    "the image size", "err": "max |out - ref| / max |ref|, once per case at "
                    "the first tile shape that ran; err_ref cpu_ks (float64) or the peer"},
            "complete": False}
    doc = {"meta": meta, "gpu": None, "cpu": None}

    def save():
        meta["seconds"] = round(time.time() - t0, 1)
        with open(os.path.join(a.out, "ks.json"), "w") as f:
            json.dump(timing.clean_json(doc, 4), f, indent=1)

    cap = min(CPU_CAP_S, 0.25 * a.budget)
    try:
        doc["cpu"] = {"skipped": "--no-cpu", "why": ""} if a.no_cpu else bench_cpu(a.quick, cap)
    except Exception as e:
        traceback.print_exc()
        doc["cpu"] = {"error": f"{type(e).__name__}: {e}"}
    save()
    if why:
        doc["gpu"] = {"skipped": "no GPU", "why": why}
        print(f"ks gpu skipped: {why}", file=sys.stderr, flush=True)
    else:
        try:
            bench_gpu(cp, a.quick, deadline, doc, save)
        except Exception as e:
            traceback.print_exc()
            doc["gpu"] = dict(doc.get("gpu") or {}, error=f"{type(e).__name__}: {e}")
    meta["budget_hit"] = time.time() > deadline
    meta["complete"] = True
    save()
    lines = write_md(doc, a.out)
    print(f"wrote {a.out}/ks.json, ks.md; {time.time() - t0:.0f} s", file=sys.stderr)
    print("\n".join(lines), flush=True)
    g = doc["gpu"] or {}
    if "error" in g or "stopped" in g or "error" in (doc["cpu"] or {}):
        sys.exit(1)


if __name__ == "__main__":
    main()
