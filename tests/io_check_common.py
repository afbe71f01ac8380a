# SPDX-License-Identifier: BSD-3-Clause
"""io_check_common.py - what the io_*_check.py scripts share: the modules they need (ctest's
skip, 77, without them), io_convert ($IO_CONVERT) and its --info, the failures, the seed
(NDF_TEST_SEED repeats a run), a scratch directory, arrays compared in a message, and the real
files this machine has.

A script imports it after putting its own directory first on sys.path, so that it runs from
any working directory:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import io_check_common as common
"""
import glob
import importlib
import os
import random
import subprocess
import sys
import tempfile

SKIP = 77  # ctest's SKIP_RETURN_CODE for these checks
IO_CONVERT = os.environ.get("IO_CONVERT")
failures = []
seed = work = None  # the run's seed and scratch directory, set by main


def need(*names):
    """The modules named, imported (in that order); exit 77 (skipped) where one is missing."""
    try:
        return [importlib.import_module(n) for n in names]
    except ImportError as e:
        print(f"skipped: {e}")
        sys.exit(SKIP)


def optional(name):
    """The module named, or None where it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def fail(msg):
    """Records a failure and prints it."""
    failures.append(msg)
    print("FAIL", msg)


def run(*args):
    """io_convert with these arguments: its CompletedProcess (text stdout and stderr)."""
    return subprocess.run([IO_CONVERT, *args], capture_output=True, text=True)


def convert(src, dst):
    """io_convert src dst: True, or False with the failure recorded (exit code, message)."""
    r = run(src, dst)
    if r.returncode != 0:
        fail(f"io_convert {src} {dst}: exit {r.returncode}: {r.stderr.strip()}")
    return r.returncode == 0


def info(path, report=True):
    """io_convert --info path as {key: [words]} (format, dtype, shape, channel_axis, spacing);
    None where it fails, the failure recorded when report is set."""
    r = run("--info", path)
    if r.returncode != 0:
        if report:
            fail(f"io_convert --info {path}: {r.stderr.strip()}")
        return None
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        out[k] = v.split()
    return out


def differences(got, want):
    """How two arrays differ, for a message: their shapes where those differ, else the number of
    samples and the worst (the largest difference; NaN against a number, or infinities apart,
    before any) with its index and both values. NaN against NaN is no difference."""
    import numpy as np
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"shape {g.shape}, expected {w.shape}"
    gf, wf = g.astype(np.float64), w.astype(np.float64)
    same = (gf == wf) | (np.isnan(gf) & np.isnan(wf))
    with np.errstate(invalid="ignore"):
        d = np.where(same, 0.0, np.abs(gf - wf))
    d[np.isnan(d)] = np.inf
    if same.all():
        return "no sample differs"
    at = np.unravel_index(int(np.argmax(d)), d.shape)
    return (f"{int((~same).sum())} samples differ, the worst at {tuple(int(i) for i in at)}: "
            f"{g[at]}, expected {w[at]}")


def present(paths):
    """The paths that exist, in order; each absent one noted."""
    out = []
    for p in paths:
        if os.path.exists(p):
            out.append(p)
        else:
            print(f"not on this machine: {p}")
    return out


def globbed(*patterns):
    """The files the (glob pattern, at most how many; None: all) pairs match ('**' recursive),
    sorted, each once."""
    found = set()
    for pattern, most in patterns:
        found.update(glob.glob(pattern, recursive=True)[:most])
    return sorted(found)


def main(prefix, body):
    """Runs a check: IO_CONVERT must name the io_convert executable (exit 1 otherwise); the seed
    is printed (NDF_TEST_SEED, else a random one) and kept in seed; body(rng), rng numpy's
    generator from the seed, runs with a fresh temporary directory in work (prefix: the start
    of its name) and returns the summary line, printed. Exits 1 after any failure, else 0."""
    global seed, work
    if not IO_CONVERT or not os.access(IO_CONVERT, os.X_OK):
        print("IO_CONVERT must name the io_convert executable")
        sys.exit(1)
    s = os.environ.get("NDF_TEST_SEED")
    seed = int(s) if s else random.SystemRandom().randrange(2**63)
    print(f"seed: NDF_TEST_SEED={seed}")
    import numpy as np
    with tempfile.TemporaryDirectory(prefix=prefix) as work:
        print(body(np.random.default_rng(seed)))
    sys.exit(1 if failures else 0)
