#!/usr/bin/env python3
"""io_fits_check.py - FITS through io_convert against astropy, the reference reader and writer.

astropy writes random images (u8, i8, i16, u16, i32, u32, i64, f32, f64 and scaled i16 with
BLANK; 1-D to 4-D; primary, extension and tile-compressed HDUs; WCS, COMMENT, HISTORY, long
string and HIERARCH cards); io_convert turns them into .npy (the data compared with astropy's,
in the dtype ndfilt's rules give) and into .fits, .fits.gz and .fz (astropy reads back the same
data, dtype and cards). The real images that ship with astropy go through the same checks.

Environment: IO_CONVERT (the io_convert executable), NDF_TEST_SEED to repeat a run.
Exit 0 on success, 1 on a failure, 77 (skipped) without astropy.
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import io_check_common as common  # noqa: E402
from io_check_common import fail, run  # noqa: E402

np, astropy, fits = common.need("numpy", "astropy", "astropy.io.fits")

warnings.simplefilter("ignore")  # astropy's notes on non-standard real files

# Keywords the reader drops (the writer makes its own) or that only describe the storage.
STRUCTURAL = {"SIMPLE", "BITPIX", "NAXIS", "EXTEND", "XTENSION", "PCOUNT", "GCOUNT", "GROUPS",
              "INHERIT", "BSCALE", "BZERO", "CHECKSUM", "DATASUM", "ZQUANTIZ", "ZDITHER0",
              "ZHECKSUM", "ZDATASUM", "END"}


checked = 0


def image_hdu(hdul):
    """The HDU ndfilt reads: the primary's image, else the first image extension with data."""
    for hdu in hdul:
        if hdu.is_image and hdu.header.get("NAXIS", 0) > 0:
            return hdu
    return None


def expected_dtype(h):
    """ndfilt's dtype for an image header (BITPIX, BSCALE, BZERO), and whether the integers
    are scaled (to be read as floats, BLANK as NaN, and written back as floats)."""
    bitpix, bscale, bzero = h["BITPIX"], h.get("BSCALE", 1), h.get("BZERO", 0)
    if bitpix < 0:
        return (np.float32 if bitpix == -32 else np.float64), False
    natural = {(8, 0): np.uint8, (8, -128): np.int16, (16, 0): np.int16, (16, 32768): np.uint16,
               (32, 0): np.float64, (32, 2**31): np.float64, (64, 0): np.float64,
               (64, 2**63): np.float64}
    if bscale == 1 and (bitpix, bzero) in natural:
        return natural[(bitpix, bzero)], False
    return (np.float32 if bitpix <= 16 else np.float64), True


def cards(h, drop_blank=False):
    """The non-structural cards as written (80-column images), in order."""
    out = []
    for c in h.cards:
        k = c.keyword
        if k in STRUCTURAL or k.startswith("NAXIS") or (drop_blank and k == "BLANK"):
            continue
        out.append(c.image.rstrip())
    while out and not out[-1]:  # blank cards before END are free space to cfitsio
        out.pop()
    return out


def same(a, b):
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def check_file(path, name, want=None, select=None, spacing=None, real=False):
    """io_convert of path (or path[select]) to .npy and back to FITS, against astropy."""
    global checked
    checked += 1
    src = path + (f"[{select}]" if select is not None else "")
    with fits.open(path) as hdul:
        hdu = hdul[select] if select is not None else image_hdu(hdul)
        if hdu is None:
            fail(f"{name}: astropy finds no image")
            return
        header = hdu.header.copy()  # before the data: astropy drops BSCALE/BZERO on scaling
        data = np.array(hdu.data)
    dt, scaled = expected_dtype(header)
    if scaled:
        # astropy scales in float32 for BITPIX 8 and 16; ndfilt (cfitsio) in float64, rounding
        # once: the reference is the latter, from the stored integers
        with fits.open(path, do_not_scale_image_data=True) as hdul:
            raw = np.array((hdul[select] if select is not None else image_hdu(hdul)).data)
        data = raw * float(header.get("BSCALE", 1)) + float(header.get("BZERO", 0))
        if "BLANK" in header:
            data[raw == header["BLANK"]] = np.nan
        data = data.astype(dt)
    if want is not None and not same(data, want):
        fail(f"{name}: astropy's own data differ from what it wrote")
    out = os.path.join(common.work, name + ".npy")
    r = run(src, out)
    if r.returncode != 0:
        fail(f"{name}: io_convert to .npy: {r.stderr.strip()}")
        return
    got = np.load(out)
    ref = data.astype(dt)
    if got.dtype != np.dtype(dt):
        fail(f"{name}: read as {got.dtype}, expected {np.dtype(dt)} (BITPIX {header['BITPIX']})")
    elif not same(got, ref):
        fail(f"{name}: the samples differ from astropy's: {common.differences(got, ref)}")
    if spacing is not None:
        d = common.info(src, report=False)
        sp = [float(x) for x in d["spacing"]] if d else None
        if sp is None or not np.allclose(sp, spacing, rtol=1e-12, atol=0):
            fail(f"{name}: spacing {sp}, expected {spacing}")
    # back to FITS: astropy must read the same data, dtype and cards
    exts = [".fits", ".fits.gz"] + ([".fits.fz"] if data.ndim <= 3 else [])
    for ext in exts:
        back = os.path.join(common.work, name + "_back" + ext)
        r = run(src, back)
        if r.returncode != 0:
            fail(f"{name}: io_convert to {ext}: {r.stderr.strip()}")
            continue
        with fits.open(back) as b:
            bh = image_hdu(b)
            bdata = np.array(bh.data)
            if ext == ".fits.fz" and not isinstance(bh, fits.CompImageHDU):
                fail(f"{name}{ext}: not tile-compressed")
            wdt = dt if scaled else data.dtype.newbyteorder("=")
            if ext == ".fits.fz" and np.dtype(wdt).itemsize == 8 and np.dtype(wdt).kind in "iu":
                wdt = np.float64  # cfitsio compresses no 64-bit integers
            if ext == ".fits.fz" and np.dtype(wdt) == np.int8:
                wdt = np.float32  # astropy 5 reads compressed signed bytes (BZERO -128) so
            if bdata.dtype.newbyteorder("=") != np.dtype(wdt):
                fail(f"{name}{ext}: written as {bdata.dtype}, expected {np.dtype(wdt)}")
            if not same(bdata.astype(np.float64), data.astype(np.float64)):
                fail(f"{name}{ext}: data differ after the round trip")
            if b[0] is not bh and ext != ".fits.fz":
                fail(f"{name}{ext}: the image is not in the primary HDU")
            c0, c1 = cards(header, drop_blank=scaled), cards(bh.header)
            if ext == ".fits.fz":  # astropy's view of a compressed HDU names it itself
                c1 = [c for c in c1 if "COMPRESSED_IMAGE" not in c]
            if real and ext != ".fits":
                continue  # one exact card check per real file; the data checks above suffice
            if c0 != c1:
                diff = [(a, b) for a, b in zip(c0 + [""] * len(c1), c1 + [""] * len(c0))
                        if a != b][:3]
                fail(f"{name}{ext}: cards differ ({len(c0)} vs {len(c1)}): {diff}")
            if "CHECKSUM" in header and bh.header.get("CHECKSUM") is None:
                fail(f"{name}{ext}: CHECKSUM not written anew")


def random_data(rng, kind, shape):
    n = int(np.prod(shape))
    if kind == "f32":
        return rng.standard_normal(n).astype(np.float32).reshape(shape) * 1000
    if kind == "f64":
        return rng.standard_normal(n).reshape(shape) * 1e6
    lo, hi, t = {"u8": (0, 255, np.uint8), "i8": (-128, 127, np.int8),
                 "i16": (-32768, 32767, np.int16), "u16": (0, 65535, np.uint16),
                 "i32": (-2**31, 2**31 - 1, np.int32), "u32": (0, 2**32 - 1, np.uint32),
                 "i64": (-2**53, 2**53, np.int64)}[kind]
    d = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64 if kind != "u32" else np.uint64)
    d[:2] = [lo, hi][:n]  # the extremes, always
    return d.astype(t).reshape(shape)


def add_cards(h, rng, ndim, mm_axis):
    h["OBJECT"] = ("NGC %d" % rng.integers(1, 7000), "target")
    h["DATE-OBS"] = "2021-%02d-%02dT01:02:03.5" % (rng.integers(1, 13), rng.integers(1, 29))
    h["EXPTIME"] = (float(rng.uniform(1, 1000)), "[s]")
    h.add_comment("written by io_fits_check.py")
    for i in range(1, ndim + 1):
        if i == mm_axis:
            h[f"CTYPE{i}"] = "LINEAR"
            h[f"CUNIT{i}"] = "mm"
            h[f"CDELT{i}"] = 0.25 * i
        else:
            h[f"CTYPE{i}"] = ["RA---TAN", "DEC--TAN", "FREQ", "STOKES"][i - 1]
            h[f"CUNIT{i}"] = ["deg", "deg", "Hz", ""][i - 1]
            h[f"CDELT{i}"] = float(rng.uniform(-1e-3, 1e-3))
        h[f"CRPIX{i}"] = float(rng.integers(1, 10))
        h[f"CRVAL{i}"] = float(rng.uniform(0, 100))
    h.add_history("random data, seed in the test's output")
    h["LONGSTR"] = "a long string value: " + "x" * 90  # CONTINUE cards
    h["HIERARCH ESO DET CHIP NAME"] = "chip-%d" % rng.integers(1, 9)


def synthetic(rng):
    kinds = ["u8", "i8", "i16", "u16", "i32", "u32", "i64", "f32", "f64", "scaled"]
    for k, kind in enumerate(kinds):
        for ndim in range(1, 5):
            shape = tuple(int(x) for x in rng.integers(1, 9 if ndim > 2 else 40, size=ndim))
            where = ["primary", "extension", "compressed"][(k + ndim) % 3]
            if where == "compressed" and (ndim > 3 or kind in ("i64", "u8", "i8")):
                where = "extension"  # cfitsio and astropy compress 1-3 axes; no 64-bit RICE
            mm_axis = int(rng.integers(1, ndim + 1))
            if kind == "scaled":
                raw = random_data(rng, "i16", shape)
                raw.flat[0] = -32768  # BLANK
                hdu = (fits.PrimaryHDU if where == "primary" else fits.ImageHDU)(raw)
                hdu.header["BSCALE"] = 0.5
                hdu.header["BZERO"] = 100.0
                hdu.header["BLANK"] = -32768
                want = None
            else:
                want = random_data(rng, kind, shape)
                if where == "compressed":
                    hdu = fits.CompImageHDU(want, name="SCI", compression_type="GZIP_2",
                                            quantize_level=0.0)
                elif where == "primary":
                    hdu = fits.PrimaryHDU(want)
                else:
                    hdu = fits.ImageHDU(want, name="SCI")
            add_cards(hdu.header, rng, ndim, mm_axis)
            name = f"syn_{kind}_{ndim}d_{where}"
            path = os.path.join(common.work, name + ".fits")
            hdul = fits.HDUList([hdu] if where == "primary" else [fits.PrimaryHDU(), hdu])
            hdul.writeto(path, checksum=bool(k % 2), output_verify="silentfix")
            spacing = [0.0] * ndim
            spacing[ndim - mm_axis] = 0.25 * mm_axis
            check_file(path, name, want=want, spacing=spacing)
            if where != "primary":  # the HDU chosen by name and by number, too
                check_file(path, name + "_byname", select="SCI" if kind != "scaled" else 1)


def real_files():
    """Real images shipped with astropy (sky survey, HST), where this install has them."""
    root = os.path.dirname(astropy.__file__)
    rels = ["wcs/tests/data/dss.14.29.56-62.41.05.fits.gz",  # Digitized Sky Survey
            "io/fits/tests/data/o4sp040b0_raw.fits",  # HST STIS raw, u16 in extensions
            "io/fits/tests/data/comp.fits",  # tile-compressed i16
            "io/fits/tests/data/fixed-1890.fits",
            "io/fits/tests/data/test0.fits",
            "io/fits/tests/data/checksum.fits",
            "io/fits/tests/data/arange.fits",  # BITPIX 32
            "io/fits/tests/data/scale.fits",
            "io/fits/tests/data/double_ext.fits",
            "io/fits/tests/data/compressed_float_bzero.fits",
            "nddata/tests/data/sip-wcs.fits",
            "modeling/tests/data/1904-66_AZP.fits",
            "wcs/tests/data/dist_lookup.fits.gz",
            "wcs/tests/data/ie6d07ujq_wcs.fits"]
    found = common.present([os.path.join(root, rel) for rel in rels])
    for path in found:
        check_file(path, "real_" + os.path.basename(path).split(".fits")[0], real=True)
    # an empty image (NAXIS2 = 0) is refused with a message naming the file
    path = os.path.join(root, "io/fits/tests/data/zerowidth.fits")
    if os.path.exists(path):
        out = os.path.join(common.work, "zw.npy")
        r = run(path, out)
        if r.returncode != 3 or path not in r.stderr or os.path.exists(out):
            fail(f"zerowidth.fits: exit {r.returncode}, '{r.stderr.strip()}'")
    print(f"{len(found)} real files checked")


def corrupt():
    """A truncated file and a non-FITS file: exit 3, a message naming the file, no output."""
    path = os.path.join(common.work, "cut.fits")
    fits.PrimaryHDU(np.arange(4000, dtype=np.int16)).writeto(path)
    with open(path, "rb") as f:
        b = f.read()
    for cut in (0, 100, 2880, 5000):
        with open(path, "wb") as f:
            f.write(b[:cut])
        out = os.path.join(common.work, "cut_out.fits")
        r = run(path, out)
        if r.returncode != 3 or path not in r.stderr or os.path.exists(out):
            fail(f"cut at {cut}: exit {r.returncode}, '{r.stderr.strip()}', "
                 f"output left: {os.path.exists(out)}")


def main(rng):
    synthetic(rng)
    real_files()
    corrupt()
    return f"astropy checks: {checked} files, {len(common.failures)} failures"


if __name__ == "__main__":
    common.main("ndf_fits_py_", main)
