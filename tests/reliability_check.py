#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""reliability_check.py - the ndfilt tool under hostile and careless use: nothing lost,
nothing silently wrong, bounded resources.

Each check runs the tool as a process, as a user or an attacker would:
  - FIFOs, devices and directories given as any input (image, --kernel, --sigma-map) are
    refused at once, never waited on;
  - SIGINT, SIGTERM and SIGHUP during a write leave no temporary file and no output;
  - a write that fails (a file-size limit standing in for a full disk) names the output, not
    the temporary file, and leaves nothing;
  - thread counts: huge ones clamped with a note, bad NDF_THREADS refused with a message;
  - decompression bombs (.nii.gz, .png, .npy) refused under a read limit, in little memory;
  - truncated or corrupt gzip trailers refused;
  - voxel sizes that are not (Inf, NaN, zero, negative) refused when a length needs them;
  - a mistyped output extension is an error, nothing written;
  - a single unitless sigma leaves a 4-D NIfTI's time axis alone (fslmaths -s);
  - ks --output full moves the NIfTI origin with the grid;
  - NaN-masked volumes: the default method gives scipy's NaN footprint, with or without
    --tolerance, for gauss (mm) and conv (a large kernel, where auto would take an FFT);
  - the default gauss on a real MRI volume is scipy's result (integers rounded alike).
usage: NDFILT=path/to/ndfilt python3 reliability_check.py
"""
import gzip
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

try:
    import numpy as np
    from scipy import ndimage
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)
try:
    import nibabel as nib
except ImportError:
    nib = None

NDFILT = os.environ["NDFILT"]
FAIL = []
# The formats this build has (a machine without a format's library leaves it out).
_info = subprocess.run([NDFILT, "--device", "cpu", "info"], capture_output=True, text=True)
FORMATS = next((ln.split(":", 1)[1].split() for ln in _info.stdout.splitlines()
                if ln.startswith("formats:")), [])


def env_with(**kw):
    e = dict(os.environ, NDF_DEVICE=os.environ.get("NDF_DEVICE", "cpu"))
    for k, v in kw.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def run(*args, expect=0, env=None, timeout=120, preexec=None):
    if preexec is not None and getattr(preexec, "caps_memory", False):
        env = dict(env or env_with(), NDF_DEVICE="cpu")  # CUDA cannot start in 1 GiB
    try:
        p = subprocess.run([NDFILT, *map(str, args)], capture_output=True, text=True,
                           env=env or env_with(), timeout=timeout, preexec_fn=preexec)
    except subprocess.TimeoutExpired:
        FAIL.append(f"ndfilt {' '.join(map(str, args))}: still running after {timeout} s")
        return None
    if expect is not None and p.returncode != expect:
        FAIL.append(f"ndfilt {' '.join(map(str, args))}: exit {p.returncode}, expected {expect}\n"
                    f"{p.stderr}")
    return p


def check(cond, msg):
    if not cond:
        FAIL.append(msg)
    return cond


def leftovers(d):
    return [f for f in os.listdir(d) if ".tmp" in f]


def special_files(tmp):
    """FIFOs, a character device and a directory, as every input the tool reads."""
    good = os.path.join(tmp, "good.npy")
    np.save(good, np.random.default_rng(1).random((8, 9), dtype=np.float32))
    out = os.path.join(tmp, "never.npy")
    os.mkdir(os.path.join(tmp, "adir.npy"))
    exts = {"npy": (".npy",), "nifti": (".nii", ".nii.gz"), "tiff": (".tif",), "png": (".png",),
            "fits": (".fits",), "raw": (".raw",)}
    for ext in [e for f in FORMATS for e in exts.get(f, ())]:
        fifo = os.path.join(tmp, "fifo" + ext)
        os.mkfifo(fifo)
        extra = ("--shape", "8,9", "--dtype", "f32") if ext == ".raw" else ()
        t0 = time.time()
        p = run("gauss", fifo, out, "--sigma", "1", *extra, expect=3, timeout=20)
        if p:
            check(time.time() - t0 < 10, f"FIFO {ext}: took {time.time() - t0:.1f} s")
            check("FIFO" in p.stderr, f"FIFO {ext}: message {p.stderr!r}")
        os.unlink(fifo)
    fifo = os.path.join(tmp, "k.npy")
    os.mkfifo(fifo)
    p = run("conv", good, out, "--kernel", fifo, expect=3, timeout=20)
    check(p is None or "FIFO" in p.stderr, f"--kernel FIFO: {p and p.stderr!r}")
    p = run("ks", good, out, "--sigma-map", fifo, expect=3, timeout=20)
    check(p is None or "FIFO" in p.stderr, f"--sigma-map FIFO: {p and p.stderr!r}")
    p = run("info", fifo, expect=3, timeout=20)
    p = run("gauss", "/dev/zero", out, "--sigma", "1", "--shape", "8,9", "--dtype", "f32",
            expect=3, timeout=20)
    check(p is None or "device" in p.stderr, f"/dev/zero: {p and p.stderr!r}")
    p = run("gauss", os.path.join(tmp, "adir.npy"), out, "--sigma", "1", expect=3, timeout=20)
    check(p is None or "directory" in p.stderr, f"directory: {p and p.stderr!r}")
    check(not os.path.exists(out), "output written from a special file")
    print("special files: ok" if not FAIL else "special files: failures")


def signals(tmp):
    """A signal while the output is written: no temporary file, no output, killed by it."""
    big = os.path.join(tmp, "big.npy")
    np.save(big, np.random.default_rng(2).random((48, 512, 512), dtype=np.float32))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        out = os.path.join(tmp, f"sig{int(sig)}.nii.gz")
        p = subprocess.Popen([NDFILT, "gauss", big, out, "--sigma", "0.7"], env=env_with(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0, seen = time.time(), False
        while time.time() - t0 < 60 and p.poll() is None:
            if leftovers(tmp):
                seen = True
                time.sleep(0.05)  # well into the write
                p.send_signal(sig)
                break
            time.sleep(0.005)
        p.wait(60)
        if not seen:
            print(f"signal {sig.name}: the write ended before the temporary file was seen")
            continue
        check(p.returncode == -sig, f"{sig.name}: exit {p.returncode}, not killed by it")
        check(not leftovers(tmp), f"{sig.name}: temporary files left: {leftovers(tmp)}")
        check(not os.path.exists(out), f"{sig.name}: an output was left")
    os.unlink(big)
    # A write that fails part way (a file-size limit, as a full disk): EFBIG reported against
    # the output's name, nothing left.
    small = os.path.join(tmp, "small.npy")
    np.save(small, np.random.default_rng(3).random((64, 256, 256), dtype=np.float32))
    out = os.path.join(tmp, "full.npy")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    p = run("gauss", small, out, "--sigma", "1", expect=3, preexec=limit)
    if p:
        check(out in p.stderr and ".tmp" not in p.stderr, f"full disk message: {p.stderr!r}")
    check(not leftovers(tmp) and not os.path.exists(out), "full disk: files left")
    print("signals and failed writes: checked")


def threads(tmp):
    good = os.path.join(tmp, "good.npy")
    out = os.path.join(tmp, "t.npy")
    p = run("--threads", "100000", "gauss", good, out, "--sigma", "1")
    check(p is None or "clamped" in p.stderr, f"--threads 100000: {p and p.stderr!r}")
    p = run("gauss", good, out, "--sigma", "1", env=env_with(NDF_THREADS="100000"))
    for bad in ("-5", "abc", "0"):
        p = run("gauss", good, out, "--sigma", "1", expect=2, env=env_with(NDF_THREADS=bad))
        check(p is None or "NDF_THREADS" in p.stderr, f"NDF_THREADS={bad}: {p and p.stderr!r}")
    run("--threads", "0", "info", expect=2)
    run("--threads", "-3", "info", expect=2)
    p = run("info", expect=None, env=env_with(NDF_DEVICE="cuda:77"))
    check(p is None or (p.returncode != 0 and "NDF_DEVICE=cuda:77" in p.stderr),
          f"NDF_DEVICE=cuda:77: {p and p.stderr!r}")
    print("threads and devices: checked")


def nifti_gz_bomb(path, shape):
    """A valid .nii.gz of zeros declaring shape: tiny on disk, huge in memory."""
    hdr = bytearray(348)
    struct.pack_into("<i", hdr, 0, 348)
    dims = [len(shape)] + list(shape) + [1] * (7 - len(shape))
    struct.pack_into("<8h", hdr, 40, *dims)
    struct.pack_into("<h", hdr, 70, 2)  # uint8
    struct.pack_into("<h", hdr, 72, 8)
    struct.pack_into("<8f", hdr, 76, 1, 1, 1, 1, 1, 1, 1, 1)
    struct.pack_into("<f", hdr, 108, 352)
    hdr[344:348] = b"n+1\0"
    n = int(np.prod(shape))
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(bytes(hdr) + b"\0\0\0\0")
        chunk = bytes(1 << 20)
        while n > 0:
            f.write(chunk[:min(n, len(chunk))])
            n -= len(chunk)


def png_bomb(path, w, h):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    comp = zlib.compressobj(9)
    row = b"\0" * (w + 1)
    data = b"".join(comp.compress(row) for _ in range(h)) + comp.flush()
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", data) + chunk(b"IEND", b""))


def bombs(tmp):
    out = os.path.join(tmp, "bomb_out.npy")

    def mem_cap():
        """Were the read limit ignored, the read would fail here, not pass (not under ASan,
        which reserves terabytes of address space)."""
        if os.environ.get("NDF_SANITIZED", "OFF").upper() not in ("ON", "1", "TRUE"):
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    mem_cap.caps_memory = True
    nb = os.path.join(tmp, "bomb.nii.gz")
    nifti_gz_bomb(nb, (1100, 1100, 1100))  # 1.33 GB of zeros in about 1.3 MB
    for how in [] if "nifti" not in FORMATS else (dict(env=env_with(NDF_READ_LIMIT="64M")), dict(args=("--read-limit", "64M"))):
        p = run(*how.get("args", ()), "gauss", nb, out, "--sigma", "1", expect=3,
                env=how.get("env"), preexec=mem_cap, timeout=60)
        check(p is None or "read limit" in p.stderr, f".nii.gz bomb: {p and p.stderr!r}")
    if "png" in FORMATS:
        pb = os.path.join(tmp, "bomb.png")
        png_bomb(pb, 20000, 20000)  # 400 MB of pixels in a few hundred KB
        p = run("gauss", pb, out.replace(".npy", ".png"), "--sigma", "1", expect=3,
                env=env_with(NDF_READ_LIMIT="64M"), preexec=mem_cap, timeout=60)
        check(p is None or "read limit" in p.stderr, f".png bomb: {p and p.stderr!r}")
    npb = os.path.join(tmp, "bomb.npy")  # a header declaring 1e12 elements, no data
    with open(npb, "wb") as f:
        h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (10000, 10000, 10000), }"
        h += b" " * (63 - (10 + len(h)) % 64) + b"\n"
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h)
    run("gauss", npb, out, "--sigma", "1", expect=3, preexec=mem_cap, timeout=60)
    kb = os.path.join(tmp, "kbomb.npy")  # a kernel whose shape's product overflows int64
    with open(kb, "wb") as f:
        h = (b"{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, "
             b"1099511627776, 2, 2), }")
        h += b" " * (63 - (10 + len(h)) % 64) + b"\n"
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h)
    good4 = os.path.join(tmp, "good4.npy")
    np.save(good4, np.ones((3, 4, 5, 6), np.float32))
    p = run("conv", good4, out, "--kernel", kb, expect=2, preexec=mem_cap)
    check(p is None or "too large" in p.stderr, f"kernel shape overflow: {p and p.stderr!r}")
    run("--read-limit", "lots", "info", expect=2)
    p = run("info", os.path.join(tmp, "good.npy"), expect=3, env=env_with(NDF_READ_LIMIT="abc"))
    check(p is None or "NDF_READ_LIMIT" in p.stderr, f"NDF_READ_LIMIT=abc: {p and p.stderr!r}")
    check(not os.path.exists(out), "bomb: an output was written")
    print("decompression bombs: checked")


def nifti_rows(tmp):
    if nib is None or "nifti" not in FORMATS:
        print("nibabel or the NIfTI format missing: NIfTI rows skipped")
        return
    rng = np.random.default_rng(4)
    vol = rng.random((20, 18, 12), dtype=np.float32)
    aff = np.diag([2.0, 2.5, 3.0, 1.0])
    aff[:3, 3] = [-20, 30, 5]
    src = os.path.join(tmp, "v.nii.gz")
    nib.save(nib.Nifti1Image(vol, aff), src)
    out = os.path.join(tmp, "v_out.nii.gz")
    raw = open(src, "rb").read()
    # truncated trailers and a bad CRC
    for k in range(1, 10):
        bad = os.path.join(tmp, f"trunc{k}.nii.gz")
        open(bad, "wb").write(raw[:-k])
        run("gauss", bad, out, "--sigma", "1", expect=3)
        os.unlink(bad)
    bad = os.path.join(tmp, "crc.nii.gz")
    b = bytearray(raw)
    b[-6] ^= 0x55
    open(bad, "wb").write(bytes(b))
    run("gauss", bad, out, "--sigma", "1", expect=3)
    check(not os.path.exists(out), "truncated gzip: an output was written")
    # voxel sizes that are not: a length needs one
    for name, val, two in (("inf", np.inf, False), ("nan2", np.nan, True), ("zero", 0.0, False),
                           ("neg", -2.0, False)):
        img = (nib.Nifti2Image if two else nib.Nifti1Image)(vol, None)
        z = list(img.header["pixdim"])
        z[2] = val
        img.header["pixdim"] = z
        p = os.path.join(tmp, f"pix_{name}.nii")
        img.to_filename(p)
        run("gauss", p, out, "--sigma", "2mm", expect=2)
        run("gauss", p, out, "--fwhm", "3mm", expect=2)
        check(not os.path.exists(out), f"pixdim {name}: an output was written")
        run("gauss", p, os.path.join(tmp, "vox.nii"), "--sigma", "2")  # voxels need none
    # the time axis: one unitless sigma leaves it alone, as fslmaths -s
    v4 = rng.random((10, 9, 8, 5), dtype=np.float32)  # nibabel: x, y, z, t
    p4 = os.path.join(tmp, "bold.nii")
    nib.save(nib.Nifti1Image(v4, np.eye(4)), p4)
    o4 = os.path.join(tmp, "bold_s.nii")
    run("gauss", p4, o4, "--sigma", "1.5")
    if os.path.exists(o4):
        want = ndimage.gaussian_filter(v4.astype(np.float64), (1.5, 1.5, 1.5, 0), mode="nearest")
        got = nib.load(o4).get_fdata()
        check(np.abs(got - want).max() < 1e-5, "4-D --sigma 1.5 smoothed time")
    # ks --output full: the grid grows by R per side, the affine's origin moves with it
    sm = os.path.join(tmp, "s.nii.gz")
    nib.save(nib.Nifti1Image(np.full(vol.shape, 1.2, np.float32), aff), sm)
    ko = os.path.join(tmp, "ks_full.nii.gz")
    run("ks", src, ko, "--sigma-map", sm, "--output", "full")
    if os.path.exists(ko):
        o = nib.load(ko)
        R = (o.shape[0] - vol.shape[0]) // 2
        check(R > 0, "ks full did not grow")
        # output voxel (R, R, R) is input voxel (0, 0, 0): the same world position
        check(np.allclose(o.affine @ [R, R, R, 1], aff @ [0, 0, 0, 1]),
              f"ks full: origin not moved: {o.affine[:3, 3]} vs {aff[:3, 3]} (R {R})")
        check(np.allclose(o.affine[:3, :3], aff[:3, :3]), "ks full: axes changed")
    # a mistyped output name writes nothing and says so
    for name in ("o.nii.gzz", "o.jpg", "o.tiff.gz", "noext"):
        p = run("gauss", src, os.path.join(tmp, name), "--sigma", "1", expect=2)
        check(p is None or "unknown" in p.stderr, f"output {name}: {p and p.stderr!r}")
        check(not os.path.exists(os.path.join(tmp, name)), f"output {name} written")
    print("NIfTI rows: checked")


def nan_footprints(tmp):
    """NaN-masked data: the default method gives scipy's footprint (also with --tolerance)."""
    rng = np.random.default_rng(5)
    a = rng.random((96, 96, 96), dtype=np.float32)
    a[40:48] = np.nan  # a slab, as a masked statistics map
    src = os.path.join(tmp, "masked.npy")
    np.save(src, a)
    want = ndimage.gaussian_filter(a.astype(np.float64), 8, mode="nearest")
    for extra in ((), ("--tolerance", "1e-3")):
        out = os.path.join(tmp, "masked_s.npy")
        p = run("-v", "gauss", src, out, "--sigma", "8", *extra)
        if p and os.path.exists(out):
            got = np.load(out)
            check(np.isnan(got).sum() == np.isnan(want).sum(),
                  f"gauss {extra}: {np.isnan(got).sum()} NaN, scipy {np.isnan(want).sum()}")
            fin = ~np.isnan(want)
            check(np.abs(got[fin] - want[fin]).max() < 1e-5, f"gauss {extra}: values")
            check("_iir" not in p.stderr.split("filtered by")[-1].split()[0],
                  f"gauss {extra} ran the recursive filter on NaN: {p.stderr!r}")
    img = rng.random((128, 128), dtype=np.float32)
    img[60, 70] = np.nan
    img[3, 100] = np.inf
    k = rng.random((31, 31))
    kp = os.path.join(tmp, "k31.npy")
    np.save(kp, k)
    sp = os.path.join(tmp, "img.npy")
    np.save(sp, img)
    out = os.path.join(tmp, "img_c.npy")
    run("correlate", sp, out, "--kernel", kp, "--mode", "reflect")
    if os.path.exists(out):
        want = ndimage.correlate(img.astype(np.float64), k, mode="reflect")
        got = np.load(out)
        check((np.isnan(got) == np.isnan(want)).all() and (np.isinf(got) == np.isinf(want)).all(),
              f"correlate 31x31: {np.isnan(got).sum()} NaN, scipy {np.isnan(want).sum()}")
    print("NaN footprints: checked")


def real_mri(tmp):
    """The default gauss on real integer MRI volumes is scipy's result, rounded alike; also on
    a larger u8 volume at a sigma where a recursive filter would be the cheaper."""
    if nib is None or "nifti" not in FORMATS:
        return
    ddir = os.path.join(os.path.dirname(nib.__file__), "tests", "data")
    big = os.path.join(tmp, "u8vol.nii.gz")
    vol = np.random.default_rng(6).integers(0, 256, (112, 128, 96)).astype(np.uint8)
    nib.save(nib.Nifti1Image(vol, np.eye(4)), big)
    for name in ("anatomical.nii", "example4d.nii.gz", big):
        path = os.path.join(ddir, name)
        if not os.path.exists(path):
            continue
        im = nib.load(path)
        if im.get_data_dtype().kind not in "iu":
            continue
        out = os.path.join(tmp, "mri_" + os.path.basename(name))
        run("gauss", path, out, "--sigma", "4mm")  # sigma >= 2 voxels: where IIR was tempting
        if not os.path.exists(out):
            continue
        a = np.asarray(im.dataobj).astype(np.float64)
        zooms = im.header.get_zooms()[:3]
        sig = [4.0 / z for z in zooms] + [0] * (a.ndim - 3)
        want = ndimage.gaussian_filter(a, sig, mode="nearest")
        info = np.iinfo(im.get_data_dtype())
        rounded = np.clip(np.rint(want), info.min, info.max)
        got = np.asarray(nib.load(out).dataobj).astype(np.float64)
        off = np.abs(got - rounded)
        # float32 arithmetic: a voxel may round the other way only where scipy's value lies
        # within float32's resolution of a half (about 1e-3 at 1e4)
        tie = np.abs(np.abs(want - np.floor(want)) - 0.5) <= 1e-6 * np.maximum(np.abs(want), 1)
        check(off.max() <= 1 and not (off > 0)[~tie].any(),
              f"real {name}: {((off > 0) & ~tie).sum()} voxels off away from a tie, worst "
              f"{off.max()}")
        print(f"real {name}: {(off > 0).sum()} of {off.size} voxels off by one, all at ties "
              "float32 cannot resolve")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        special_files(tmp)
        threads(tmp)
        bombs(tmp)
        nifti_rows(tmp)
        nan_footprints(tmp)
        real_mri(tmp)
        signals(tmp)
        check(not leftovers(tmp), f"temporary files left: {leftovers(tmp)}")
    for f in FAIL:
        print("FAIL", f)
    print(f"reliability checks: {len(FAIL)} failures")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
