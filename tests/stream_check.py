# SPDX-License-Identifier: BSD-3-Clause
"""The tool on files larger than its memory limit (--memory-limit): a file four times the
limit filtered a slab at a time with its peak resident memory (getrusage of the process) under
the limit plus a small constant, the output the same as the in-memory run's (bitwise where the
arithmetic is the same), for .npy, .nii and raw files, every filter that streams, wrap modes
along the slab axis, 4-D volumes one at a time; and what cannot stream refused with a message
and nothing written. NDFILT names the tool. Exit 77 without numpy or nibabel."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import nibabel as nib
except ImportError as e:
    print(f"stream_check: skipped ({e})")
    sys.exit(77)

TOOL = os.environ.get("NDFILT") or sys.exit("stream_check: set NDFILT to the ndfilt binary")
TIME = "/usr/bin/time"  # GNU time (Debian's time, installed by make deps)
if not os.access(TIME, os.X_OK):
    print("stream_check: skipped (no /usr/bin/time: make deps installs it)")
    sys.exit(77)
SLACK_MB = 24  # the program itself: code, libraries, threads (about 12 MB), and page rounding
failures = 0


def run(args, limit=None):
    """Runs the tool on the CPU under GNU time (a child forked from this process would start
    with its peak resident memory); returns (exit code, stderr, peak RSS in MB)."""
    cmd = [TOOL, "--device", "cpu"] + (["--memory-limit", limit] if limit else []) + args
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run([TIME, "-f", "%M", "-o", t.name] + cmd, capture_output=True, text=True)
        kb = t.read().strip().splitlines()
    return p.returncode, p.stderr, float(kb[-1]) / 1024 if kb and kb[-1].isdigit() else 1e9


def check(what, ok, detail=""):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)
    failures += not ok


def same(a, b, exact):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False, f"shape/dtype {a.shape} {a.dtype} against {b.shape} {b.dtype}"
    if exact:
        d = np.flatnonzero(a != b)
        return d.size == 0, (f"{d.size} values differ, first at {np.unravel_index(d[0], a.shape)}"
                             if d.size else "bitwise")
    err = float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-30))
    return err <= 1e-6, f"max relative difference {err:.2e}"


def streamed(tmp, name, args, infile, limit_mb, load, exact=True, suffix=".npy"):
    """Filters infile in memory and within limit_mb; compares the outputs and the RSS."""
    ref, out = os.path.join(tmp, "ref" + suffix), os.path.join(tmp, "out" + suffix)
    rc, err, rss_ref = run(args[:1] + [infile, ref] + args[1:])
    check(f"{name}: in memory", rc == 0, err.strip()[-300:])
    rc, err, rss = run(["-v"] + args[:1] + [infile, out] + args[1:], f"{limit_mb}M")
    check(f"{name}: within --memory-limit {limit_mb}M", rc == 0 and "in slabs" in err,
          err.strip()[-400:])
    check(f"{name}: peak RSS {rss:.0f} MB <= {limit_mb} + {SLACK_MB} MB (in memory: "
          f"{rss_ref:.0f} MB)", rss <= limit_mb + SLACK_MB)
    if rc == 0:
        ok, why = same(load(out), load(ref), exact)
        check(f"{name}: output as in memory", ok, why)


def main():
    rng = np.random.default_rng(int(os.environ.get("NDF_TEST_SEED", "12345")))
    with tempfile.TemporaryDirectory() as tmp:
        # .npy, 256 MB, four times the limit; every streaming filter
        x = rng.random((1024, 256, 256), dtype=np.float32)
        src = os.path.join(tmp, "in.npy")
        np.save(src, x)
        del x
        streamed(tmp, "gauss .npy", ["gauss", "--sigma", "2,1.5,1", "--mode", "wrap,reflect,mirror"],
                 src, 64, np.load)
        streamed(tmp, "gauss .npy f64 output, order 1", ["gauss", "--sigma", "1.2",
                                                         "--order", "1,0,0", "--dtype", "f64"],
                 src, 64, np.load)
        streamed(tmp, "correlate1d .npy axis 0", ["correlate1d", "--weights", "1,-2,3,1,0.5",
                                                  "--axis", "0", "--origin", "1", "--mode",
                                                  "wrap"], src, 64, np.load)
        streamed(tmp, "sepconv .npy", ["sepconv", "--weights", "1,2,3,2,1", "--mode", "constant",
                                       "--cval", "0.25"], src, 64, np.load)
        box = ",".join(["1"] * 21)  # the running sums (cpu_box): two temporaries a plan
        streamed(tmp, "sepconv .npy box of 21, cpu_box", ["sepconv", "--weights", box, "--axes",
                                                          "0,1", "--mode", "wrap", "--method",
                                                          "cpu_box"], src, 64, np.load)
        k = os.path.join(tmp, "k.npy")
        np.save(k, rng.random((5, 3, 4)))
        streamed(tmp, "correlate .npy 5x3x4 direct", ["correlate", "--kernel", k, "--mode",
                                                      "nearest", "--method", "cpu_direct"],
                 src, 64, np.load)
        # the same through the planner's own choice per slab: within float32 rounding
        streamed(tmp, "conv .npy auto", ["conv", "--kernel", k, "--mode", "wrap"], src, 64,
                 np.load, exact=False)
        os.unlink(src)

        # .nii, 4-D: each volume alone, in slabs; the header kept
        v = rng.random((4, 256, 128, 256), dtype=np.float32).T  # NIfTI (x, y, z, t)
        aff = np.diag([0.8, 0.8, 1.2, 1.0])
        aff[:3, 3] = [-90, 12, 40]
        src = os.path.join(tmp, "in.nii")
        nib.save(nib.Nifti1Image(np.asarray(v), aff), src)
        del v

        def load_nii(p):
            img = nib.load(p)
            return np.asarray(img.dataobj)

        streamed(tmp, "gauss .nii 4-D", ["gauss", "--sigma", "1.5mm"], src, 32, load_nii,
                 suffix=".nii")
        out = os.path.join(tmp, "out.nii")
        if os.path.exists(out):
            check(".nii: affine kept", np.allclose(nib.load(out).affine, aff),
                  str(nib.load(out).affine))
        # a compressed output cannot be written a part at a time: refused, nothing left
        gz = os.path.join(tmp, "out.nii.gz")
        rc, err, _ = run(["gauss", src, gz, "--sigma", "1"], "32M")
        check(".nii.gz output within the limit: refused", rc != 0 and not os.path.exists(gz)
              and "part at a time" in err, err.strip()[-300:])
        os.unlink(src)

        # samples not aligned to their type (vox_offset 353): read, not mapped, still filtered
        m = rng.random((40, 30, 20), dtype=np.float32)
        img = nib.Nifti1Image(m, np.eye(4))
        img.header.set_data_offset(353)
        src = os.path.join(tmp, "mis.nii")
        nib.save(img, src)
        ref, out = os.path.join(tmp, "mis_ref.nii"), os.path.join(tmp, "mis_out.nii")
        rc1, _, _ = run(["gauss", src, ref, "--sigma", "2"])
        rc2, err, _ = run(["gauss", src, out, "--sigma", "2"], "16M")
        check("misaligned .nii samples", rc1 == 0 and rc2 == 0, err.strip()[-300:])
        if rc1 == 0 and rc2 == 0:
            ok, why = same(load_nii(out), load_nii(ref), True)
            check("misaligned .nii: output as in memory", ok, why)

        # raw, with --shape and --dtype
        r = rng.integers(0, 60000, (3072, 128, 128), dtype=np.uint16)
        src = os.path.join(tmp, "in.raw")
        r.tofile(src)
        del r

        def load_raw(p):
            return np.fromfile(p, np.uint16).reshape(3072, 128, 128)

        streamed(tmp, "gauss raw u16", ["gauss", "--shape", "3072,128,128", "--dtype", "u16",
                                        "--sigma", "3"], src, 24, load_raw, suffix=".raw")
        # a limit below one slab and its reach: refused with the size it needs
        rc, err, _ = run(["gauss", "--shape", "3072,128,128", "--dtype", "u16", src,
                          os.path.join(tmp, "x.raw"), "--sigma", "40"], "24M")
        check("limit below a slab's reach: refused", rc == 2 and "too small" in err,
              err.strip()[-300:])
    print("stream_check:", "FAILED" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
