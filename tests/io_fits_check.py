#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""io_fits_check.py - FITS through io_convert against astropy, the reference reader and writer.

astropy writes random images (u8, i8, i16, u16, i32, u32, i64, f32, f64 and scaled i16 with
BLANK; 1-D to 4-D; primary, extension and tile-compressed HDUs; WCS, COMMENT, HISTORY, long
string and HIERARCH cards); io_convert turns them into .npy (the data compared with astropy's,
in the dtype ndfilt's rules give) and into .fits, .fits.gz and .fz (astropy reads back the same
data, dtype and cards, in the HDU read, compressed where it was, with the file's other HDUs
as they were). The real images that ship with astropy go through the same checks. Also: a frame
of several HDUs (SCI, ERR, DQ, a table) written back from one of them, each tile compression
kept (losslessly), gzip files short of their trailer or with a wrong CRC refused, and
NDF_READ_LIMIT.

Environment: IO_CONVERT (the io_convert executable), NDF_TEST_SEED to repeat a run.
Exit 0 on success, 1 on a failure, 77 (skipped) without astropy.
"""
import os
import subprocess
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


def companions(path, k, back, kb, name):
    """The other HDUs of path (the image read from its HDU k) in back (the image written to its
    HDU kb): each as it was, header and data, in its place; before an image moved from the
    primary HDU to the first extension, an empty primary HDU."""
    shift = kb - k
    with fits.open(path) as a, fits.open(back) as b:
        if len(b) != len(a) + shift:
            fail(f"{name}: {len(b)} HDUs, expected {len(a) + shift} (the file's {len(a)})")
            return
        if shift and b[0].header.get("NAXIS", 0) != 0:
            fail(f"{name}: the primary HDU before the compressed image is not empty")
        for i, h in enumerate(a):
            if i == k:
                continue
            g = b[i + shift if i > 0 else i]
            c0, c1 = ([c.image for c in x.header.cards] for x in (h, g))
            for c in (c0, c1):
                while c and not c[-1].strip():  # blank cards before END: free space
                    c.pop()
            if c0 != c1:
                diff = [(x, y) for x, y in zip(c0, c1) if x != y][:2]
                fail(f"{name}: the cards of HDU {i} changed: {diff or (len(c0), len(c1))}")
            if (h.data is None) != (g.data is None):
                fail(f"{name}: HDU {i} lost or gained data")
            elif h.data is not None and h.is_image:
                if not same(np.asarray(h.data), np.asarray(g.data)):
                    fail(f"{name}: the data of HDU {i} changed")
            elif h.data is not None and h.data.tobytes() != g.data.tobytes():
                fail(f"{name}: the table in HDU {i} changed")


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
        k = [i for i, h in enumerate(hdul) if h is hdu][0]  # the HDU's place in the file
        zsrc = isinstance(hdu, fits.CompImageHDU)
        zcmp = hdu._header.get("ZCMPTYPE") if zsrc else None
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
        # the image in the HDU read, compressed where that was and for .fz (a .fz file's
        # primary HDU is empty: an image from the primary HDU moves to the first extension)
        zout = zsrc or ext == ".fits.fz"
        kb = k + 1 if zout and k == 0 else k
        with fits.open(back) as b:
            if len(b) <= kb:
                fail(f"{name}{ext}: {len(b)} HDUs, the image expected in HDU {kb}")
                continue
            bh = b[kb]
            bdata = np.array(bh.data)
            if zout != isinstance(bh, fits.CompImageHDU):
                fail(f"{name}{ext}: tile-compressed {not zout}, expected {zout}")
            wdt = dt if scaled else data.dtype.newbyteorder("=")
            if zout and np.dtype(wdt).itemsize == 8 and np.dtype(wdt).kind in "iu":
                wdt = np.float64  # cfitsio compresses no 64-bit integers
            if zout and np.dtype(wdt) == np.int8:
                wdt = np.float32  # astropy 5 reads compressed signed bytes (BZERO -128) so
            if bdata.dtype.newbyteorder("=") != np.dtype(wdt):
                fail(f"{name}{ext}: written as {bdata.dtype}, expected {np.dtype(wdt)}")
            if not same(bdata.astype(np.float64), data.astype(np.float64)):
                fail(f"{name}{ext}: data differ after the round trip")
            if zsrc and isinstance(bh, fits.CompImageHDU):
                want_z = zcmp if np.dtype(wdt).kind != "f" or zcmp in ("GZIP_1", "GZIP_2") \
                    else "GZIP_2"
                if bh._header.get("ZCMPTYPE") != want_z:
                    fail(f"{name}{ext}: compressed with {bh._header.get('ZCMPTYPE')}, "
                         f"expected {want_z} (the file's {zcmp})")
            companions(path, k, back, kb, f"{name}{ext}")
            c0, c1 = cards(header, drop_blank=scaled), cards(bh.header)
            if zout:  # astropy's view of a compressed HDU names it itself
                c0 = [c for c in c0 if "COMPRESSED_IMAGE" not in c]
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


def mef(rng):
    """A frame of several HDUs (a primary header of the observation, SCI, ERR and DQ images, a
    table), its SCI image written back: the other HDUs as they were, in their places, and the
    SCI image in its own place, as .fits, .fits.gz and .fz."""
    sci = rng.standard_normal((30, 40)).astype(np.float32)
    prim = fits.PrimaryHDU()
    for k, v in (("TELESCOP", "HST"), ("INSTRUME", "WFC3"), ("OBSERVER", "A. Observer"),
                 ("DATE-OBS", "2021-05-06"), ("EXPTIME", 300.0)):
        prim.header[k] = v
    prim.header.add_comment("a comment in the primary header")
    prim.header.add_history("a history card in the primary header")
    hs = fits.ImageHDU(sci, name="SCI")
    hs.header["CRPIX1"], hs.header["CRPIX2"] = 20.5, 15.5
    err = fits.ImageHDU((np.abs(sci) * 0.1).astype(np.float32), name="ERR")
    dq = fits.ImageHDU(rng.integers(0, 16, (30, 40)).astype(np.int16), name="DQ")
    cols = [fits.Column(name="X", format="E", array=np.arange(5, dtype=np.float32)),
            fits.Column(name="NAME", format="8A", array=[f"s{i}" for i in range(5)])]
    tab = fits.BinTableHDU.from_columns(cols, name="CAT")
    path = os.path.join(common.work, "mef.fits")
    fits.HDUList([prim, hs, err, dq, tab]).writeto(path, checksum=True)
    for sel, k in (("SCI", 1), ("2", 2), ("DQ", 3)):  # [2]: cfitsio counts from 0
        for ext in (".fits", ".fits.gz", ".fz"):
            out = os.path.join(common.work, f"mef_{sel}_out{ext}")
            r = run(f"{path}[{sel}]", out)
            if r.returncode != 0:
                fail(f"mef[{sel}] -> {ext}: {r.stderr.strip()}")
                continue
            name = f"mef[{sel}]{ext}"
            with open(out, "rb") as f:
                gz = f.read(2) == b"\x1f\x8b"
            if gz != (ext == ".fits.gz"):
                fail(f"{name}: gzipped {gz}")
            companions(path, k, out, k, name)
            with fits.open(path) as a, fits.open(out, checksum=True) as b:
                if len(b) <= k:
                    continue
                g = b[k]
                if isinstance(g, fits.CompImageHDU) != (ext == ".fz"):
                    fail(f"{name}: tile-compressed {not ext == '.fz'}")
                if g.name != a[k].name or not same(np.asarray(g.data), np.asarray(a[k].data)):
                    fail(f"{name}: the image in HDU {k} is not the file's {a[k].name}")
                if b[0].header.get("TELESCOP") != "HST" or "a history card" not in \
                        str(b[0].header.get("HISTORY")):
                    fail(f"{name}: the primary header was not kept")


def compressed_inputs(rng):
    """A tile-compressed image is written tile-compressed, with the algorithm it had, losslessly
    (floats with GZIP_1 or GZIP_2 unquantized); a plain one stays plain."""
    ints = rng.integers(0, 1000, (24, 32)).astype(np.int16)
    flts = (rng.standard_normal((24, 32)) * 100).astype(np.float32)
    cases = [("rice_i16", ints, dict(compression_type="RICE_1"), "RICE_1"),
             ("gzip1_i16", ints, dict(compression_type="GZIP_1"), "GZIP_1"),
             ("hcomp_i16", ints, dict(compression_type="HCOMPRESS_1", hcomp_scale=0),
              "HCOMPRESS_1"),
             ("plio_i16", ints, dict(compression_type="PLIO_1"), "PLIO_1"),
             ("gzip1_f32", flts, dict(compression_type="GZIP_1", quantize_level=0.0), "GZIP_1"),
             ("gzip2_f32", flts, dict(compression_type="GZIP_2", quantize_level=0.0), "GZIP_2"),
             ("rice_f32", flts, dict(compression_type="RICE_1"), "GZIP_2")]  # quantized there
    for name, data, kw, want in cases:
        path = os.path.join(common.work, f"z_{name}.fits")
        fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, name="SCI", **kw),
                      fits.ImageHDU(data[:3], name="ERR")]).writeto(path)
        with fits.open(path) as a:
            read = np.array(a[1].data)
        for ext in (".fits", ".fits.gz"):
            out = os.path.join(common.work, f"z_{name}_out{ext}")
            r = run(path, out)
            if r.returncode != 0:
                fail(f"{name} -> {ext}: {r.stderr.strip()}")
                continue
            with fits.open(out) as b:
                g = b[1] if len(b) > 1 else b[0]
                got = g._header.get("ZCMPTYPE") if isinstance(g, fits.CompImageHDU) else None
                if got != want:
                    fail(f"{name}{ext}: compressed with {got}, expected {want}")
                elif not same(np.asarray(g.data), read):
                    fail(f"{name}{ext}: not lossless: {common.differences(g.data, read)}")
                if g._header.get("ZQUANTIZ", "NONE") not in ("NONE", "NO_DITHER") and \
                        read.dtype.kind == "f":
                    fail(f"{name}{ext}: quantized ({g._header.get('ZQUANTIZ')})")
    # a plain image stays plain, whatever the file's other HDUs
    path = os.path.join(common.work, "z_plain.fits")
    fits.HDUList([fits.PrimaryHDU(ints), fits.CompImageHDU(ints, name="Z")]).writeto(path)
    out = os.path.join(common.work, "z_plain_out.fits")
    if common.convert(path, out):
        with fits.open(out) as b:
            z = [isinstance(h, fits.CompImageHDU) for h in b]
            if z != [False, True]:
                fail("z_plain.fits: the plain image was compressed, or its compressed companion "
                     "not kept")


def bad_gzip():
    """A .fits.gz short of its last 1 to 9 bytes (the CRC and length trailer), or with a wrong
    CRC or length, is refused with a message naming it, and no output."""
    path = os.path.join(common.work, "gz.fits")
    fits.PrimaryHDU(np.arange(20000, dtype=np.float32).reshape(100, 200)).writeto(path)
    import gzip
    with open(path, "rb") as f:
        z = gzip.compress(f.read())
    cases = [(f"cut{k}", z[:-k], "truncated gzip") for k in range(1, 10)]
    for at, what in ((-8, "CRC"), (-5, "CRC"), (-3, "claims"), (len(z) // 2, None)):
        b = bytearray(z)
        b[at] ^= 0x5a
        cases.append((f"flip{at}", bytes(b), what))
    for name, b, needle in cases:
        bad = os.path.join(common.work, f"bad_{name}.fits.gz")
        with open(bad, "wb") as f:
            f.write(b)
        out = os.path.join(common.work, f"bad_{name}.npy")
        r = run(bad, out)
        if r.returncode != 3 or bad not in r.stderr or os.path.exists(out) or \
                (needle and needle not in r.stderr):
            fail(f"{name}: exit {r.returncode}, '{r.stderr.strip()}'")


def read_limit():
    """NDF_READ_LIMIT bounds what a read allocates: the image's samples, and a gzipped file
    inflated whole."""
    data = np.zeros((512, 520), np.float64)  # 2 MiB
    for ext in (".fits", ".fits.gz", ".fz"):
        path = os.path.join(common.work, "big" + ext)
        if ext == ".fz":
            fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(data, compression_type="GZIP_2",
                                                               quantize_level=0.0)]).writeto(path)
        else:
            fits.PrimaryHDU(data).writeto(path)
        env = dict(os.environ, NDF_READ_LIMIT="1M")
        out = os.path.join(common.work, "big.npy")
        r = subprocess.run([common.IO_CONVERT, path, out], capture_output=True, text=True,
                           env=env)
        if r.returncode != 3 or "read limit" not in r.stderr or path not in r.stderr:
            fail(f"big{ext} over NDF_READ_LIMIT=1M: exit {r.returncode}, '{r.stderr.strip()}'")
        env["NDF_READ_LIMIT"] = "3M"
        r = subprocess.run([common.IO_CONVERT, path, out], capture_output=True, text=True,
                           env=env)
        if r.returncode != 0:
            fail(f"big{ext} under NDF_READ_LIMIT=3M: {r.stderr.strip()}")


def main(rng):
    synthetic(rng)
    real_files()
    corrupt()
    mef(rng)
    compressed_inputs(rng)
    bad_gzip()
    read_limit()
    return f"astropy checks: {checked} files, {len(common.failures)} failures"


if __name__ == "__main__":
    common.main("ndf_fits_py_", main)
