#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/auto_choices.py - what method auto picks on this GPU, and whether it should have:

  python3 bench/auto_choices.py --out DIR     # writes DIR/auto.json, DIR/auto.md
  python3 bench/auto_choices.py --choices     # auto's choice per case as JSON, nothing timed

For each case (device arrays through CuPy; numpy arrays with the device left to auto) the
script runs auto, then every candidate solver by name, and reports each one's median time, auto's
choice and the fastest. The cost models take the card's multiprocessors, clock and DRAM
bandwidth from its properties (ndf__device_caps); NDF_DEVICE_CAPS ("SMs,clock GHz,DRAM TB/s",
read only by a build configured with NDF_DEV_SWITCHES, as scripts/gpu-check.sh's is) gives them
another card's figures instead. --out runs --choices once per card of CARDS in child
processes, so the table shows the choices the models make for those cards beside the measured
card's; those columns are the models' answers, not timings on those cards."""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import timing  # noqa: E402

# card: NDF_DEVICE_CAPS (SMs, boost clock GHz, DRAM TB/s from memory clock x bus width)
CARDS = {"H100 SXM": "132,1.98,3.35", "H100 PCIe": "114,1.755,2.04", "L40S": "142,2.52,0.864"}

# (label, operation, shape, parameters, candidates named); host: numpy input, device left to auto
CASES = [
    ("gaussian 256^3 sigma 2, tolerance 1e-3", "gaussian", (256, 256, 256), 2.0,
     ["cuda_sep", "cuda_iir"]),
    ("gaussian 256^3 sigma 8, tolerance 1e-3", "gaussian", (256, 256, 256), 8.0,
     ["cuda_sep", "cuda_iir"]),
    ("gaussian 4096^2 sigma 16, tolerance 1e-3", "gaussian", (4096, 4096), 16.0,
     ["cuda_sep", "cuda_iir"]),
    ("correlate 256^3 k5", "correlate", (256, 256, 256), 5, ["cuda_direct", "cuda_fft"]),
    ("correlate 256^3 k11", "correlate", (256, 256, 256), 11, ["cuda_direct", "cuda_fft"]),
    ("correlate 256^3 k17", "correlate", (256, 256, 256), 17, ["cuda_direct", "cuda_fft"]),
    ("correlate 2048^2 k31", "correlate", (2048, 2048), 31, ["cuda_direct", "cuda_fft"]),
    ("correlate 2048^2 k63", "correlate", (2048, 2048), 63, ["cuda_direct", "cuda_fft"]),
    ("correlate1d 4096^2 axis 0 k31", "correlate1d", (4096, 4096), 31,
     ["cuda_sep", "cuda_corr1d"]),
    ("numpy gaussian 256^3 sigma 4.5", "host_gaussian", (256, 256, 256), 4.5,
     ["cpu_sep", "cuda_sep"]),
    ("numpy gaussian 64^3 sigma 2", "host_gaussian", (64, 64, 64), 2.0, ["cpu_sep", "cuda_sep"]),
    ("numpy correlate 128^3 k5", "host_correlate", (128, 128, 128), 5,
     ["cpu_direct", "cuda_direct"]),
]


def call(nd, cp, op, x, param, method=None):
    """One call of the case's operation; method None is auto. On numpy input a CPU solver's
    name runs on the CPU device (the way a user asks for it: set_device('cpu'))."""
    if method and method.startswith("cpu_") and op.startswith("host_"):
        nd.set_device("cpu")
        try:
            return call(nd, cp, op, x, param)
        finally:
            nd.set_device("auto")
    kw = {} if method is None else {"method": method}
    if op in ("gaussian", "host_gaussian"):
        tol = {"tolerance": 1e-3} if op == "gaussian" else {}
        return nd.gaussian_filter(x, param, mode="nearest", **tol, **kw)
    if op == "correlate1d":
        w = np.random.default_rng(3).random(param)
        return nd.correlate1d(x, w, axis=0, mode="nearest", **kw)
    w = np.random.default_rng(3).random((param,) * x.ndim)
    return nd.correlate(x, w, mode="nearest", **kw)


def arrays(cp, op, shape):
    x = np.random.default_rng(1).random(shape, dtype=np.float32)
    return x if op.startswith("host_") else cp.asarray(x)


def choices(nd, cp):
    out = {}
    for label, op, shape, param, _ in CASES:
        x = arrays(cp, op, shape)
        call(nd, cp, op, x, param)
        out[label] = nd.last_solver()
        x = None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--choices", action="store_true")
    a = ap.parse_args()
    import ndfilt as nd
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception:
        print("auto_choices: no GPU (CuPy cannot see one); nothing to measure")
        return 0
    if a.choices:
        print(json.dumps(choices(nd, cp)))
        return 0
    rows = []
    for label, op, shape, param, cands in CASES:
        x = arrays(cp, op, shape)
        call(nd, cp, op, x, param)
        chosen = nd.last_solver()
        times = {}
        for m in cands + ["auto"]:
            meth = None if m == "auto" else m
            try:
                if op.startswith("host_"):
                    times[m] = timing.cpu_ms(lambda v: call(nd, cp, op, v, param, meth), x)
                else:
                    times[m] = timing.events_ms(lambda: call(nd, cp, op, x, param, meth), reps=9)
            except Exception as e:  # a candidate that does not apply: reported, not timed
                times[m] = None
                print(f"{label}: {m}: {e}", file=sys.stderr)
        timed = {m: t for m, t in times.items() if t is not None and m != "auto"}
        best = min(timed, key=timed.get) if timed else None
        rows.append({"case": label, "auto": chosen, "auto_ms": times.get("auto"),
                     "fastest": best, "times_ms": times})
        print(f"{label}: auto {chosen} {times.get('auto')}, fastest {best}, {times}", flush=True)
        x = None
        cp.get_default_memory_pool().free_all_blocks()
    modelled = {}
    for card, caps in CARDS.items():
        env = dict(os.environ, NDF_DEVICE_CAPS=caps)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--choices"], env=env,
                           capture_output=True, text=True)
        try:
            modelled[card] = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            print(f"{card}: {r.stderr[-500:]}", file=sys.stderr)
            modelled[card] = {}
    gpu = timing.gpu_name(cp)
    meta = {"gpu": gpu, "commit": timing.commit(), "date": time.strftime("%Y-%m-%d"),
            "cards_modelled": CARDS}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "auto.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "modelled": modelled}, f, indent=1)
    lines = [f"# auto's choices ({gpu}, commit {meta['commit']})", "",
             "## Measured on this card, and the models' choices for others", "",
             "Each case's candidates timed by name (median ms; CUDA events for device arrays, "
             "wall clock for numpy ones), auto's choice here, and the choice the cost models make "
             "given other cards' multiprocessors, clock and DRAM bandwidth (NDF_DEVICE_CAPS; "
             "those columns are modelled, not measured).", "",
             "| case | candidates (ms) | fastest | auto here | " +
             " | ".join(f"auto, {c} (model)" for c in CARDS) + " |",
             "|---|---|---|---|" + "---|" * len(CARDS)]
    for r in rows:
        c = ", ".join(f"{m} {t:.3f}" for m, t in r["times_ms"].items() if t is not None and m != "auto")
        ok = "" if r["auto"] == r["fastest"] else " (not fastest)"
        lines.append(f"| {r['case']} | {c} | {r['fastest']} | {r['auto']}{ok} | " +
                     " | ".join(modelled[k].get(r["case"], "?") for k in CARDS) + " |")
    with open(os.path.join(a.out, "auto.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
