#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cli_formats_check.py - the ndfilt tool on real file formats, checked independently.

Files are written and read back by the field's own Python readers (nibabel, tifffile,
astropy), and every filter result is compared with scipy.ndimage on the same data:
  - gauss --sigma in voxels, in mm (by the file's voxel size) and as FWHM, on NIfTI 3-D and
    4-D (each volume; time not smoothed), with the header (affine, zooms, units, intent,
    description) kept, and on real MRI volumes shipped with nibabel;
  - a TIFF stack, a FITS image, an RGB PNG (each channel alone);
  - exit codes and no output on failure (corrupt and truncated files, bad arguments);
  - info FILE.
usage: NDFILT=path/to/ndfilt python3 cli_formats_check.py
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from scipy import ndimage
except ImportError as e:  # the reference needs them (Debian's python3-numpy, python3-scipy)
    print(f"skipped: {e}")
    sys.exit(77)

NDFILT = os.environ["NDFILT"]
FAIL = []


def run(*args, expect=0):
    env = dict(os.environ, NDF_DEVICE=os.environ.get("NDF_DEVICE", "cpu"))
    p = subprocess.run([NDFILT, *map(str, args)], capture_output=True, text=True, env=env)
    if p.returncode != expect:
        FAIL.append(f"ndfilt {' '.join(map(str, args))}: exit {p.returncode}, expected {expect}\n"
                    f"{p.stderr}")
    return p


def check(cond, msg):
    if not cond:
        FAIL.append(msg)
    return cond


def close(name, got, want, tol):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if not check(got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"):
        return
    err = np.abs(got - want)
    scale = max(np.abs(want).max(), 1e-30)
    i = np.unravel_index(np.argmax(err), err.shape)
    check(err[i] <= tol * scale,
          f"{name}: worst |ndfilt - scipy| {err[i]:.3g} at {i} (ndfilt {got[i]:.8g}, scipy "
          f"{want[i]:.8g}), over {tol:g} of max |scipy| {scale:.3g}")


def gauss_ref(a, sigma):
    return ndimage.gaussian_filter(np.asarray(a, np.float64), sigma, mode="nearest", truncate=4.0)


def nifti_checks(tmp, rng):
    import nibabel as nib
    # 4-D, anisotropic voxels in mm: sigma 2mm smooths each volume by 2/zoom voxels per axis,
    # leaving time alone; the header stays.
    data = rng.standard_normal((20, 18, 12, 3)).astype(np.float32)  # nibabel: x, y, z, t
    aff = np.array([[-1.5, 0.1, 0, 90], [0, 1.2, 0.2, -126], [0, 0, 3.0, -72], [0, 0, 0, 1]])
    img = nib.Nifti1Image(data, aff)
    img.header.set_xyzt_units("mm", "sec")
    img.header["pixdim"][4] = 2.5
    img.header.set_intent("none")
    img.header["descrip"] = b"ndfilt cli check"
    img.set_qform(aff, code=1)
    img.set_sform(aff, code=2)
    src = os.path.join(tmp, "bold.nii.gz")
    nib.save(img, src)
    zooms = img.header.get_zooms()[:3]
    out = os.path.join(tmp, "bold_s.nii.gz")
    run("gauss", src, out, "--sigma", "2mm")
    if os.path.exists(out):
        o = nib.load(out)
        want = np.stack([gauss_ref(data[..., t], [2.0 / z for z in zooms]) for t in range(3)], -1)
        close("nifti 4-D --sigma 2mm", o.get_fdata(), want, 1e-5)
        check(np.allclose(o.affine, img.affine), f"affine changed: {o.affine}")
        check(np.allclose(o.header.get_qform(), img.header.get_qform()), "qform changed")
        check(int(o.header["sform_code"]) == 2, "sform code changed")
        check(np.allclose(o.header.get_zooms(), img.header.get_zooms()),
              f"zooms {o.header.get_zooms()} != {img.header.get_zooms()}")
        check(o.header.get_xyzt_units() == ("mm", "sec"), "units changed")
        check(bytes(o.header["descrip"]).rstrip(b"\0") == b"ndfilt cli check", "descrip changed")
        check(o.get_data_dtype() == np.float32, f"dtype {o.get_data_dtype()}")
    p = run("gauss", src, os.path.join(tmp, "quiet.nii"), "--sigma", "2mm")
    check("\r" not in p.stderr, "a progress bar was drawn on a stderr that is not a terminal")
    # --fwhm in mm, and per-axis sigma in voxels in array order (t, z, y, x)
    out2 = os.path.join(tmp, "bold_f.nii")
    run("gauss", src, out2, "--fwhm", "4mm")
    if os.path.exists(out2):
        s = 4.0 / np.sqrt(8 * np.log(2))
        want = np.stack([gauss_ref(data[..., t], [s / z for z in zooms]) for t in range(3)], -1)
        close("nifti --fwhm 4mm", nib.load(out2).get_fdata(), want, 1e-5)
    out3 = os.path.join(tmp, "bold_v.nii")
    run("gauss", src, out3, "--sigma", "0,1,2,3")
    if os.path.exists(out3):
        want = np.stack([gauss_ref(data[..., t], [3, 2, 1]) for t in range(3)], -1)
        close("nifti --sigma 0,1,2,3 (t, z, y, x)", nib.load(out3).get_fdata(), want, 1e-5)

    # An integer volume stays integer (rounded, clamped) unless --dtype says otherwise.
    vol = rng.integers(0, 1000, (16, 14, 10)).astype(np.int16)
    isrc = os.path.join(tmp, "ct.nii")
    nib.save(nib.Nifti1Image(vol, np.diag([0.8, 0.8, 2.0, 1])), isrc)
    iout = os.path.join(tmp, "ct_s.nii")
    run("gauss", isrc, iout, "--sigma", "1.6mm")
    if os.path.exists(iout):
        o = nib.load(iout)
        check(o.get_data_dtype() == np.int16, f"int16 became {o.get_data_dtype()}")
        want = np.clip(np.rint(gauss_ref(vol, [2, 2, 0.8])), -32768, 32767)
        got = np.asarray(o.dataobj)
        check(np.abs(got.astype(np.float64) - want).max() <= 1,
              "int16 volume: not within 1 of scipy rounded")

    # conv (the Laplacian) and ks (a sigma map, itself a NIfTI file) on a NIfTI volume: conv
    # as scipy's laplace; ks the same as on the .npy copies of the same arrays.
    vol = rng.standard_normal((12, 11, 9)).astype(np.float32)  # nibabel: x, y, z
    nsrc = os.path.join(tmp, "v.nii.gz")
    nib.save(nib.Nifti1Image(vol, np.diag([1.5, 1.5, 2.0, 1])), nsrc)
    out = os.path.join(tmp, "v_lap.nii.gz")
    run("conv", nsrc, out, "--kernel", "laplace")
    if os.path.exists(out):
        close("nifti conv --kernel laplace", nib.load(out).get_fdata(),
              ndimage.laplace(vol.astype(np.float64), mode="nearest"), 1e-5)
    smap = (rng.random(vol.shape) * 1.5).astype(np.float32)
    msrc = os.path.join(tmp, "s.nii.gz")
    nib.save(nib.Nifti1Image(smap, np.diag([1.5, 1.5, 2.0, 1])), msrc)
    np.save(os.path.join(tmp, "v.npy"), np.ascontiguousarray(vol.transpose()))
    np.save(os.path.join(tmp, "s.npy"), np.ascontiguousarray(smap.transpose()))
    ko = os.path.join(tmp, "v_ks.nii.gz")
    run("ks", nsrc, ko, "--sigma-map", msrc, "--normalize")
    run("ks", os.path.join(tmp, "v.npy"), os.path.join(tmp, "v_ks.npy"), "--sigma-map",
        os.path.join(tmp, "s.npy"), "--normalize")
    if os.path.exists(ko) and os.path.exists(os.path.join(tmp, "v_ks.npy")):
        close("nifti ks --sigma-map s.nii.gz (against the .npy run)", nib.load(ko).get_fdata(),
              np.load(os.path.join(tmp, "v_ks.npy")).transpose(), 1e-6)

    # Real MRI volumes that ship with nibabel.
    ddir = os.path.join(os.path.dirname(nib.__file__), "tests", "data")
    for name in ("anatomical.nii", "example4d.nii.gz", "functional.nii"):
        path = os.path.join(ddir, name)
        if not os.path.exists(path):
            print(f"skip real volume {name}: not installed")
            continue
        im = nib.load(path)
        a = im.get_fdata()
        out = os.path.join(tmp, "real_" + name.replace(".nii.gz", ".nii"))
        p = run("gauss", path, out, "--sigma", "3mm", "--dtype", "f32")
        if not os.path.exists(out):
            continue
        zooms = im.header.get_zooms()[:3]
        sig = [3.0 / z for z in zooms]
        if a.ndim == 4:
            want = np.stack([gauss_ref(a[..., t], sig) for t in range(a.shape[3])], -1)
        else:
            want = gauss_ref(a, sig)
        o = nib.load(out)
        close(f"real {name} --sigma 3mm", o.get_fdata(), want, 1e-5)
        check(np.allclose(o.affine, im.affine, atol=1e-5), f"real {name}: affine changed")
        print(f"real {name}: shape {a.shape}, zooms {zooms}, ok")


def progress_check(tmp, rng):
    """A 4-D run longer than a second draws a progress bar when stderr is a terminal."""
    import pty
    import nibabel as nib
    big = os.path.join(tmp, "big4d.nii")
    nib.save(nib.Nifti1Image(rng.standard_normal((80, 80, 48, 24)).astype(np.float32),
                             np.eye(4)), big)
    master, slave = pty.openpty()
    env = dict(os.environ, NDF_DEVICE="cpu")
    p = subprocess.Popen([NDFILT, "gauss", big, os.path.join(tmp, "big4d_s.nii"), "--sigma",
                          "12mm", "--method", "fir"], stderr=slave, stdout=subprocess.DEVNULL,
                         env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    rc = p.wait()
    os.close(master)
    check(rc == 0, f"4-D run on a terminal: exit {rc}")
    text = out.decode(errors="replace")
    if "volumes" not in text:
        print("progress: the run took under a second here; no bar expected" if "ndfilt" not in text
              else f"progress: unexpected stderr {text!r}")
    else:
        check("/24 volumes" in text, f"progress bar without the count: {text!r}")
        print("progress bar seen on the terminal")


def tiff_checks(tmp, rng):
    import tifffile
    stack = rng.integers(0, 60000, (5, 40, 33)).astype(np.uint16)
    src = os.path.join(tmp, "stack.tif")
    tifffile.imwrite(src, stack, resolution=(2.0, 2.0), description="ndfilt stack")
    out = os.path.join(tmp, "stack_s.tif")
    run("gauss", src, out, "--sigma", "1,2,2", "--dtype", "f32")
    if os.path.exists(out):
        close("tiff stack --sigma 1,2,2", tifffile.imread(out), gauss_ref(stack, [1, 2, 2]), 1e-5)
    rgb = rng.integers(0, 255, (30, 31, 3)).astype(np.uint8)
    src = os.path.join(tmp, "rgb.tif")
    tifffile.imwrite(src, rgb, photometric="rgb")
    out = os.path.join(tmp, "rgb_s.tif")
    run("gauss", src, out, "--sigma", "1.5")
    if os.path.exists(out):
        got = tifffile.imread(out)
        want = np.stack([np.rint(gauss_ref(rgb[..., c], 1.5)) for c in range(3)], -1)
        check(got.shape == rgb.shape and np.abs(got.astype(float) - want).max() <= 1,
              "tiff rgb: channels not smoothed one by one")


def fits_checks(tmp, rng):
    from astropy.io import fits
    sky = rng.standard_normal((50, 60)).astype(np.float32)
    hdu = fits.PrimaryHDU(sky)
    hdu.header["OBJECT"] = "M31"
    hdu.header["CTYPE1"] = "RA---TAN"
    src = os.path.join(tmp, "sky.fits")
    hdu.writeto(src)
    out = os.path.join(tmp, "sky_s.fits")
    run("gauss", src, out, "--sigma", "2.5")
    if os.path.exists(out):
        with fits.open(out) as f:
            close("fits --sigma 2.5", f[0].data, gauss_ref(sky, 2.5), 1e-5)
            check(f[0].header.get("OBJECT") == "M31", "fits: OBJECT card lost")
    real = os.path.join(os.path.dirname(fits.__file__), "..", "..", "wcs", "tests", "data",
                        "dss.14.29.56-62.41.05.fits.gz")
    if os.path.exists(real):
        out = os.path.join(tmp, "dss_s.fits")
        run("gauss", real, out, "--sigma", "2", "--dtype", "f32")
        if os.path.exists(out):
            with fits.open(real) as f, fits.open(out) as g:
                close("real DSS image --sigma 2", g[0].data, gauss_ref(f[0].data, 2), 1e-5)
                print(f"real DSS image: shape {f[0].data.shape}, ok")


def png_checks(tmp, rng):
    # An RGB PNG written here by hand (zlib), so no imaging library is needed.
    import struct
    import zlib
    h, w = 21, 25
    rgb = rng.integers(0, 255, (h, w, 3)).astype(np.uint8)
    raw = b"".join(b"\0" + rgb[y].tobytes() for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
           chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    src = os.path.join(tmp, "rgb.png")
    with open(src, "wb") as f:
        f.write(png)
    out = os.path.join(tmp, "rgb_s.npy")
    run("gauss", src, out, "--sigma", "1", "--dtype", "f32")
    if os.path.exists(out):
        got = np.load(out)
        want = np.stack([gauss_ref(rgb[..., c], 1) for c in range(3)], 0)  # planar
        close("png rgb per channel", got, want, 1e-5)


def failure_checks(tmp, rng):
    good = os.path.join(tmp, "good.npy")
    np.save(good, rng.standard_normal((8, 9)).astype(np.float32))
    for name, data in (("trunc.nii", b"\x5c\x01\0\0" + b"\0" * 100),
                       ("bad.tif", b"II*\0\xff\xff\xff\x7f"), ("bad.png", b"\x89PNG\r\n\x1a\nxx"),
                       ("bad.fits", b"SIMPLE  =                    T" + b" " * 50),
                       ("bad.npy", b"\x93NUMPY\x01\0\x10\0{'descr': '<f4'")):
        src = os.path.join(tmp, name)
        with open(src, "wb") as f:
            f.write(data)
        out = os.path.join(tmp, "never_" + name)
        p = run("gauss", src, out, "--sigma", "1", expect=3)
        check(src in p.stderr, f"{name}: the message does not name the file: {p.stderr!r}")
        check(not os.path.exists(out), f"{name}: output written after a failure")
    # raw samples with --shape and --dtype: the filter as scipy's; a size that does not match
    # the file is refused
    vol = rng.integers(0, 65535, (6, 7, 9)).astype("<u2")
    raw = os.path.join(tmp, "vol.raw")
    vol.tofile(raw)
    out = os.path.join(tmp, "vol_s.raw")
    run("gauss", raw, out, "--shape", "6,7,9", "--dtype", "u16", "--sigma", "1")
    if os.path.exists(out):
        got = np.fromfile(out, "<u2").reshape(vol.shape).astype(np.float64)
        check(np.abs(got - np.clip(np.rint(gauss_ref(vol, 1)), 0, 65535)).max() <= 1,
              "raw u16 volume: not within 1 of scipy rounded")
    p = run("gauss", raw, os.path.join(tmp, "never.raw"), "--shape", "6,7,10", "--dtype", "u16",
            "--sigma", "1", expect=3)
    check(raw in p.stderr and "bytes" in p.stderr, f"raw size mismatch message: {p.stderr!r}")
    check(not os.path.exists(os.path.join(tmp, "never.raw")), "raw: output after a failure")
    # bad arguments: exit 2, nothing written
    out = os.path.join(tmp, "never.npy")
    run("gauss", good, out, "--sigma", "2mm", expect=2)  # no voxel size in a .npy
    run("gauss", good, out, "--sigma", "1,2,3", expect=2)
    run("gauss", good, os.path.join(tmp, "no", "such", "dir.npy"), "--sigma", "1", expect=3)
    check(not os.path.exists(out), "output written after a usage error")
    left = [f for f in os.listdir(tmp) if ".tmp" in f]
    check(not left, f"temporary files left behind: {left}")
    p = run("-v", "gauss", good, os.path.join(tmp, "verbose.npy"), "--sigma", "1")
    check("filtered by " in p.stderr and "planned" in p.stderr and "wrote" in p.stderr, f"-v prints no timings: {p.stderr!r}")
    p = run("info", good)
    check("8 9" in p.stdout and "f32" in p.stdout, f"info: {p.stdout!r}")
    p = run("gauss", "--help")
    check("--fwhm" in p.stdout and "examples" in p.stdout, "gauss --help lacks --fwhm or examples")


def main():
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    info = run("info").stdout
    built = next((l.split()[1:] for l in info.splitlines() if l.startswith("formats:")), [])
    ran = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn, mod in (("nifti", nifti_checks, "nibabel"), ("tiff", tiff_checks, "tifffile"),
                              ("fits", fits_checks, "astropy"), ("png", png_checks, None)):
            if name not in built:
                print(f"skip {name}: not built in (its library was missing at build time)")
                continue
            if mod:
                try:
                    __import__(mod)
                except ImportError:
                    print(f"skip {name}: {mod} is not installed")
                    continue
            before = len(FAIL)
            fn(tmp, rng)
            ran += 1
            print(f"{name}: {'ok' if len(FAIL) == before else 'FAILED'}")
        if {"nifti", "tiff", "png", "fits"} <= set(built):
            failure_checks(tmp, rng)
            try:
                progress_check(tmp, rng)
            except ImportError:
                pass
    for f in FAIL:
        print("FAIL", f, file=sys.stderr)
    if not ran:
        return 77
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
