#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""io_tiff_check.py - src/io's TIFF reader and writer against tifffile, through io_convert.

tifffile writes files (random data of every sample type it has, gray and RGB(A), single pages and
stacks, strips and tiles, contiguous and planar samples, both byte orders, uncompressed, deflate
with and without a predictor, and LZMA, with resolution and a description). io_convert turns each
into .npy, compared with the data tifffile wrote, and into .tif, which tifffile must read back
with the same data, shape, sample layout (planar or not), sample type, resolution, description and
(deflate, none) compression. ImageJ hyperstacks (z-stacks, time series, channels) must come back
as the same hyperstack with the same ImageJ metadata. The real TIFF files this machine has
(scikit-image's data, Python's test images) go through the same. Where the ndfilt tool sits beside
io_convert's directory, a filter run on a planar stack must keep it planar. Exit 0 on pass, 1 on
failure, 77 when tifffile is missing.

Environment: IO_CONVERT (the io_convert tool), NDF_TEST_SEED (repeat a run)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import io_check_common as common  # noqa: E402
from io_check_common import convert, fail, info  # noqa: E402

np, tifffile = common.need("numpy", "tifffile")


# the dtype src/io holds each file type in (image.h: kept, or widened exactly)
HELD = {"uint8": "uint8", "uint16": "uint16", "int16": "int16", "float32": "float32",
        "float64": "float64", "int8": "int16", "uint32": "float64", "int32": "float64",
        "float16": "float32", "bool": "uint8"}


def canonical(path):
    """The file's data as src/io lays it out: samples (colour) or ImageJ's channels first, then
    pages (ImageJ's frames, then slices), rows, columns."""
    with tifffile.TiffFile(path) as t:
        s = t.series[0]
        a = s.asarray()
        axes = s.axes
    for c in "SC":
        if c in axes and a.shape[axes.index(c)] > 1:
            a = np.moveaxis(a, axes.index(c), 0)
            break
    return a


def tags(path):
    """What the writer must keep: resolution, its unit, description, compression, predictor."""
    with tifffile.TiffFile(path) as t:
        p = t.pages[0]
        g = p.tags

        def val(name):
            return g[name].value if name in g else None

        res = tuple(None if val(k) is None else val(k)[0] / val(k)[1]
                    for k in ("XResolution", "YResolution"))
        unit = val("ResolutionUnit")
        return {"res": res, "unit": (2 if unit is None else int(unit)) if res[0] else None,
                "description": p.description, "compression": int(p.compression),
                "predictor": int(p.predictor), "bits": p.bitspersample,
                "format": int(p.sampleformat), "pages": len(t.pages),
                "samples": 3 if int(p.photometric) == 3 else p.samplesperpixel,
                # tifffile's shape in a second description (libtiff keeps the first) makes 'Q's
                "axes": t.series[0].axes.replace("Q", "I"), "shape": t.series[0].shape,
                "imagej": imagej_description(t),
                "separate": int(p.planarconfig) == 2 and p.samplesperpixel > 1}


# ImageJ's metadata from its private tags (display ranges, LUTs, labels, ROIs), not kept
IJ_TAGS = ("Info", "Labels", "Ranges", "LUTs", "Plot", "ROI", "Overlays", "Properties")


def imagej_description(t):
    """ImageJ's metadata from the description (tifffile's imagej_metadata less its tags'), or
    None."""
    md = t.imagej_metadata
    return None if md is None else {k: v for k, v in md.items() if k not in IJ_TAGS}


def spacing_of(tg):
    """Spacing in mm from the resolution (image.h: 25.4/xres for inch, 10/xres for cm)."""
    if tg["res"][0] is None:
        return 0.0, 0.0
    per = {2: 25.4, 3: 10.0}.get(tg["unit"], 0.0)
    return per / tg["res"][1], per / tg["res"][0]  # y, x


def check_file(path, label, expect=None, back_compression=None, imagej_z=None):
    """path read through io_convert (.npy and --info), and copied to .tif (read by tifffile)."""
    want = canonical(path) if expect is None else expect
    tg = tags(path)
    tmp = os.path.join(common.work, label)
    if not convert(path, tmp + ".npy"):
        return
    got = np.load(tmp + ".npy")
    held = HELD[str(want.dtype)]
    if got.dtype != held or got.shape != want.shape:
        fail(f"{label}: .npy is {got.dtype} {got.shape}, expected {held} {want.shape}")
    elif not np.array_equal(got, want.astype(held)):
        fail(f"{label}: .npy data differ: {common.differences(got, want.astype(held))}")
    inf = info(path)
    if inf:
        sp = [float(v) for v in inf["spacing"]]
        sy, sx = spacing_of(tg)
        if imagej_z is not None:
            sy, sx = imagej_z[1], imagej_z[2]
        if not (np.isclose(sp[-1], sx, rtol=1e-6) and np.isclose(sp[-2], sy, rtol=1e-6)):
            fail(f"{label}: spacing {sp}, expected y {sy} x {sx} from {tg['res']} unit {tg['unit']}")
        if imagej_z is not None and not np.isclose(sp[-3], imagej_z[0], rtol=1e-6):
            fail(f"{label}: page spacing {sp[-3]}, expected {imagej_z[0]} (ImageJ)")
        colour = tg["samples"] > 1 or ("C" in tg["axes"] and want.ndim > 2)
        if int(inf["channel_axis"][0]) != (0 if colour else -1):
            fail(f"{label}: channel_axis {inf['channel_axis']}")
    if not convert(path, tmp + "_back.tif"):
        return
    back = canonical(tmp + "_back.tif")
    if back.dtype != want.dtype or back.shape != want.shape or not np.array_equal(back, want):
        fail(f"{label}: tifffile reads the copy as {back.dtype} {back.shape}, wrote {want.dtype} "
             f"{want.shape}, or the data differ")
    tb = tags(tmp + "_back.tif")
    for k in ("unit", "description", "bits", "format", "pages", "separate", "axes", "shape",
              "imagej"):
        if tb[k] != tg[k]:
            fail(f"{label}: the copy's {k} is {tb[k]!r}, the file's {tg[k]!r}")
    # libtiff holds a resolution as a float: the copy's rational is within float precision
    if (tb["res"][0] is None) != (tg["res"][0] is None) or (
            tg["res"][0] is not None and not np.allclose(tb["res"], tg["res"], rtol=1e-6)):
        fail(f"{label}: the copy's resolution is {tb['res']}, the file's {tg['res']}")
    wc = back_compression if back_compression is not None else (
        tg["compression"] if tg["compression"] in (1, 5, 8, 32946) else 1)
    if tb["compression"] != wc:
        fail(f"{label}: the copy's compression is {tb['compression']}, expected {wc}")
    if wc != 1 and tb["predictor"] != tg["predictor"]:
        fail(f"{label}: the copy's predictor is {tb['predictor']}, the file's {tg['predictor']}")


def random_data(rng, dtype, shape):
    dt = np.dtype(dtype)
    if dt == bool:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "ui":
        i = np.iinfo(dt)
        return rng.integers(i.min, i.max, shape, dtype=dt, endpoint=True)
    a = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    return a.astype(dt)


def synthetic(rng):
    n = 0
    dtypes = ["uint8", "uint16", "int16", "float32", "float64", "int8", "uint32", "int32",
              "float16", "bool"]
    layouts = ["gray", "stack", "rgb", "rgb_planar", "rgba", "rgb_stack", "rgb_planar_stack"]
    for dtype in dtypes:
        for layout in layouts:
            if dtype == "bool" and layout != "gray" and layout != "stack":
                continue
            # sides of 1 are left to the C tests: tifffile takes a trailing 1 for samples
            h, w, p = (int(v) for v in rng.integers(2, 40, 3))
            p = max(p % 5, 2)
            c = 4 if layout == "rgba" else 3
            paged = "stack" in layout
            ours = [c] if layout not in ("gray", "stack") else []
            ours += [p] if paged else []
            ours += [h, w]
            data = random_data(rng, dtype, ours)  # src/io's layout: (c, p, h, w)
            kw = {"photometric": "minisblack", "metadata": None}
            if layout in ("rgb", "rgba", "rgb_stack"):
                arr = np.moveaxis(data, 0, -1)  # (p, h, w, c)
                kw["photometric"] = "rgb"
                if layout == "rgba":
                    kw["extrasamples"] = ["unassalpha"]
            elif layout in ("rgb_planar", "rgb_planar_stack"):
                arr = np.moveaxis(data, 0, 1) if paged else data  # (p, c, h, w)
                kw.update(photometric="rgb", planarconfig="separate")
            else:
                arr = data
            variant = int(rng.integers(0, 4)) if dtype != "bool" else 0  # bilevel: uncompressed
            if variant == 1:
                kw["compression"] = "zlib"
            elif variant == 2 and np.dtype(dtype).kind in "ui" and dtype != "bool":
                kw.update(compression="zlib", predictor=True)
            elif variant == 3:
                kw["compression"] = "lzma"
            if dtype != "bool" and rng.integers(0, 2):
                kw["tile"] = (16, 16)
            else:
                kw["rowsperstrip"] = int(rng.integers(1, h + 1))
            if rng.integers(0, 2):
                kw["byteorder"] = ">"
            unit = int(rng.integers(1, 4))
            kw["resolution"] = (float(rng.integers(1, 5000)) / 7, float(rng.integers(1, 5000)) / 3)
            kw["resolutionunit"] = {1: "NONE", 2: "INCH", 3: "CENTIMETER"}[unit]
            if rng.integers(0, 2):
                kw["description"] = f"random {dtype} {layout}, seed {common.seed}"
                kw.pop("metadata")
            label = f"{dtype}_{layout}_{variant}"
            path = os.path.join(common.work, label + ".tif")
            tifffile.imwrite(path, arr, **kw)
            check_file(path, label, expect=data)
            n += 1
            # .npy (no metadata) to TIFF: the array's own dtype, no resolution
            if layout in ("gray", "stack") and dtype in ("uint8", "uint16", "int16", "float32",
                                                          "float64"):
                x = os.path.join(common.work, label + "_x")
                np.save(x + ".npy", data)
                if convert(x + ".npy", x + ".tif"):
                    got = canonical(x + ".tif")
                    if got.dtype != data.dtype or not np.array_equal(got, data):
                        fail(f"{label}: .npy to .tif: tifffile reads {got.dtype} {got.shape}")
    return n


def imagej(rng):
    """ImageJ hyperstacks: a z-stack in microns (z spacing from spacing=, x and y from the
    resolution), a time series of z-stacks, channels of z-stacks, channels alone; each read with
    its axes (channels first: src/io's colour axis) and written back as the same hyperstack, its
    ImageJ metadata unchanged (check_file compares tifffile's imagej_metadata and series)."""
    cases = [("ZYX", (6, 20, 24), {"spacing": 2.0, "unit": "um"}, (2e-3, 0.5e-3, 0.25e-3)),
             ("TZYX", (2, 3, 10, 12), {"spacing": 0.5, "unit": "mm", "finterval": 2.0},
              (0.5, 0.5, 0.25)),
             ("ZCYX", (2, 3, 10, 12), {"spacing": 3.0, "unit": "um"}, (3e-3, 0.5e-3, 0.25e-3)),
             ("CYX", (4, 10, 12), {"unit": "um"}, None),
             ("TYX", (5, 10, 12), {"unit": "um"}, None)]
    for axes, shape, meta, sizes in cases:
        data = random_data(rng, "uint16", shape)
        path = os.path.join(common.work, f"imagej_{axes}.tif")
        unit = 1e-3 if meta["unit"] == "um" else 1.0
        ry, rx = (sizes[1], sizes[2]) if sizes else (0.5 * unit, 0.25 * unit)
        tifffile.imwrite(path, data, imagej=True, resolution=(unit / rx, unit / ry),
                         metadata={**meta, "axes": axes})
        want = np.moveaxis(data, axes.index("C"), 0) if "C" in axes else data
        check_file(path, f"imagej_{axes}", expect=want, imagej_z=sizes or (0.0, ry, rx))
        inf = info(path)
        if inf and [int(v) for v in inf["shape"]] != list(want.shape):
            fail(f"imagej_{axes}: shape {inf['shape']}, expected {want.shape}")
        if inf and "T" in axes and float(inf["spacing"][1 if "C" in axes else 0]) != 0:
            fail(f"imagej_{axes}: the frames axis has a spacing: {inf['spacing']}")


def planar(rng):
    """An RGB stack of planar samples stays planar, with the shape tifffile reads: io_convert's
    copy, and (where the tool is built beside io_convert) ndfilt gauss's output."""
    data = random_data(rng, "uint8", (2, 3, 10, 10))
    path = os.path.join(common.work, "planar_rgb.tif")
    tifffile.imwrite(path, data, photometric="rgb", planarconfig="separate")
    check_file(path, "planar_rgb", expect=np.moveaxis(data, 1, 0))
    ndfilt = os.path.join(os.path.dirname(os.path.abspath(common.IO_CONVERT)), "..", "ndfilt")
    if not os.access(ndfilt, os.X_OK):
        print(f"note: no ndfilt at {ndfilt}: the filtered planar stack is not checked")
        return
    out = os.path.join(common.work, "planar_rgb_gauss.tif")
    r = subprocess.run([ndfilt, "gauss", path, out, "--sigma", "1"], capture_output=True,
                              text=True)
    if r.returncode != 0:
        fail(f"ndfilt gauss {path}: exit {r.returncode}: {r.stderr.strip()}")
        return
    with tifffile.TiffFile(out) as t:
        got, sep = t.series[0].asarray(), int(t.pages[0].planarconfig) == 2
    if got.shape != data.shape or not sep or got.dtype != data.dtype:
        fail(f"ndfilt gauss of a planar RGB stack: tifffile reads {got.dtype} {got.shape}, "
             f"planar {sep}; the input is {data.dtype} {data.shape}, planar")


def real_files():
    found = common.globbed(("/usr/lib/python3/dist-packages/skimage/data/*.tif", None),
                           ("/usr/lib/python3/dist-packages/skimage/data/*.tiff", None),
                           ("/usr/share/**/*.tif", 20),
                           ("/usr/lib/python3*/test/**/*.tif*", 2),
                           ("/root/.pyenv/versions/*/lib/python*/test/**/*.tiff", 2))
    n = 0
    for path in found:
        label = "real_" + os.path.basename(path).replace(".", "_")
        try:
            canonical(path)
        except Exception as e:  # not a file tifffile reads either
            print(f"note: {path}: tifffile cannot read it ({e}); skipped")
            continue
        r = common.run("--info", path)
        if r.returncode != 0:
            fail(f"{path}: io_convert cannot read it: {r.stderr.strip()}")
            continue
        check_file(path, label)
        n += 1
        print(f"real file {path}: {r.stdout.split(chr(10))[2]}")
    return n


def main(rng):
    n = synthetic(rng)
    imagej(rng)
    planar(rng)
    m = real_files()
    if m == 0:
        print("note: no real TIFF files found on this machine")
    return (f"{n} tifffile files, 5 ImageJ hyperstacks, 1 planar stack, {m} real files: "
            f"{len(common.failures)} failures")


if __name__ == "__main__":
    common.main("ndf_tiff_check_", main)
