#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""io_nifti_check.py - src/io's NIfTI reader and writer against nibabel.

nibabel writes random volumes (3-D and 4-D; uint8, uint16, int16, float32, float64 and the
widened int8, int32, uint32, int64; qform and sform, zooms, mm/micron/meter units, intent,
descrip; NIfTI-1 and NIfTI-2; .nii and .nii.gz; little- and big-endian; scaled int16), and
the real NIfTI files found on this machine (nibabel's test data, nifticlib's example).
io_convert ($IO_CONVERT) turns each into .npy (numpy compares the voxels: our arrays are
nibabel's transposed, x fastest) and into .nii/.nii.gz (nibabel reads back the same data,
dtype, affines and codes, zooms, units, intent and description). An output grown or
cropped about the input's grid (test_io_nifti --grow, beside io_convert) must keep every
voxel's world position: its affines are the input's moved by the origin. Fortran-order .npy
files (nibabel's get_fdata saved) must read as numpy loads them. Corrupt input (a .nii.gz
short of its gzip trailer, or with a wrong CRC, among them) must fail with a message naming
the file and leave no output.

Exit 0 on success, 1 on a mismatch, 77 (skipped) without nibabel. NDF_TEST_SEED repeats a run.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import io_check_common as common  # noqa: E402

np, nib = common.need("numpy", "nibabel")

rng = None  # main's, from the seed
MM = {"meter": 1000.0, "mm": 1.0, "micron": 0.001, "unknown": 1.0}


def fail(what, msg):
    common.fail(f"{what}: {msg}")


def convert(src, dst):
    """io_convert src dst: (return code, stderr)."""
    r = common.run(src, dst)
    return r.returncode, r.stderr.strip()


def random_data(dtype, shape):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = rng.standard_normal(shape) * 100
    else:
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        if dt.itemsize == 8:  # 64-bit integers: within float64's exact range
            lo, hi = max(lo, -(2**53)), min(hi, 2**53)
        a = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64 if dt != np.uint64
                         else np.uint64)
    a = a.astype(dt)
    a.flat[0] = 7  # never all zeros
    return a


def random_rotation():
    q = rng.standard_normal(4)
    q /= np.linalg.norm(q)
    if q[0] < 0:
        q = -q
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def expected_array(img):
    """What our reader makes of a file nibabel reads: x fastest becomes the last axis, trailing
    singleton axes dropped, int8 -> int16, 32/64-bit integers -> float64."""
    a = np.asanyarray(img.dataobj)
    n = a.ndim
    while n > 1 and a.shape[n - 1] == 1:
        n -= 1
    a = a.reshape(a.shape[:n], order="F").T
    kind = {np.dtype(np.int8): np.int16, np.dtype(np.int32): np.float64,
            np.dtype(np.uint32): np.float64, np.dtype(np.int64): np.float64,
            np.dtype(np.uint64): np.float64}
    dt = a.dtype.newbyteorder("=")
    return a.astype(kind.get(dt, dt))


def is_scaled(img):
    """nibabel moves scl_slope/scl_inter from the header to the data proxy on loading."""
    return (float(img.dataobj.slope), float(img.dataobj.inter)) != (1.0, 0.0)


def check_npy(what, src, img, tmp, scaled=False):
    out = os.path.join(tmp, "out.npy")
    rc, err = convert(src, out)
    if rc:
        return fail(what, f"to .npy: {err}")
    got, want = np.load(out), expected_array(img)
    if got.shape != want.shape:
        return fail(what, f".npy shape {got.shape}, nibabel's transposed {want.shape}")
    if scaled:  # float32 (or float64): nibabel may scale in another precision
        if got.dtype != np.float32 and got.dtype != np.float64:
            return fail(what, f"scaled data read as {got.dtype}")
        tol = np.finfo(got.dtype).eps * 4 * max(1.0, float(np.abs(want).max()))
        if not np.allclose(got, want, rtol=0, atol=tol):
            return fail(what, f"scaled voxels differ: {common.differences(got, want)}")
    elif got.dtype != want.dtype or not np.array_equal(got, want, equal_nan=True):
        return fail(what, f".npy {got.dtype} vs nibabel's {want.dtype}: "
                    f"{common.differences(got, want)}")
    os.unlink(out)


def check_spacing(what, src, img):
    d = common.info(src, report=False)
    if d is None:
        return fail(what, "--info failed")
    hdr = img.header
    unit = MM.get(hdr.get_xyzt_units()[0], 1.0)
    zooms = list(hdr.get_zooms())
    n = len(d["shape"])
    want = [z * unit if i < 3 else 0.0 for i, z in enumerate(zooms[:n])][::-1]
    got = [float(s) for s in d["spacing"]]
    if not np.allclose(got, want, rtol=1e-6, atol=0):
        fail(what, f"spacing {got}, nibabel's zooms in mm {want}")


def same_header(what, a, b, data_dtype=True):
    ha, hb = a.header, b.header
    if type(ha) is not type(hb):
        fail(what, f"{type(hb).__name__} written for a {type(ha).__name__}")
    for name, get in (("qform", lambda h: h.get_qform(coded=True)),
                      ("sform", lambda h: h.get_sform(coded=True))):
        (ma, ca), (mb, cb) = get(ha), get(hb)
        if ca != cb or (ma is None) != (mb is None) or (
                ma is not None and not np.allclose(ma, mb, rtol=1e-6, atol=1e-5)):
            fail(what, f"{name} code {cb} {mb} vs {ca} {ma}")
    if not np.array_equal(ha.get_zooms(), hb.get_zooms()):
        fail(what, f"zooms {hb.get_zooms()} vs {ha.get_zooms()}")
    for name in ("get_xyzt_units", "get_intent", "get_data_shape"):
        if getattr(ha, name)() != getattr(hb, name)():
            fail(what, f"{name}: {getattr(hb, name)()} vs {getattr(ha, name)()}")
    for field in ("descrip", "aux_file", "qoffset_x", "quatern_b", "pixdim", "dim_info",
                  "slice_code", "slice_start", "slice_end", "slice_duration", "toffset",
                  "cal_min", "cal_max", "intent_p1", "intent_p2", "intent_p3", "intent_code"):
        if not np.array_equal(ha[field], hb[field]):
            fail(what, f"{field} {hb[field]} vs {ha[field]}")
    if data_dtype and ha.get_data_dtype().newbyteorder("=") != hb.get_data_dtype().newbyteorder("="):
        fail(what, f"data dtype {hb.get_data_dtype()} vs {ha.get_data_dtype()}")


def check_nifti(what, src, img, tmp, ext, scaled=False):
    out = os.path.join(tmp, "out" + ext)
    rc, err = convert(src, out)
    if rc:
        return fail(what, f"to {ext}: {err}")
    back = nib.load(out)
    same_header(what + " -> " + ext, img, back, data_dtype=not scaled)
    a, b = np.asanyarray(img.dataobj), np.asanyarray(back.dataobj)
    if scaled:
        if back.get_data_dtype() not in (np.float32, np.float64):
            fail(what, f"scaled data written as {back.get_data_dtype()}")
        if is_scaled(back):
            fail(what, f"scl_slope/inter {back.dataobj.slope} {back.dataobj.inter} left set")
        tol = np.finfo(b.dtype).eps * 4 * max(1.0, float(np.abs(a).max()))
        ok = a.shape == b.shape and np.allclose(a, b, rtol=0, atol=tol)
    else:
        ok = a.shape == b.shape and a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=") \
            and np.array_equal(a, b, equal_nan=True)
    if not ok:
        fail(what, f"{ext} voxels differ ({b.dtype} {b.shape} vs {a.dtype} {a.shape})")
    with open(out, "rb") as f:
        magic = f.read(2)
    gz = magic == b"\x1f\x8b"
    if gz != ext.endswith(".gz"):
        fail(what, f"{ext} written {'with' if gz else 'without'} gzip")
    os.unlink(out)


def synthetic(tmp):
    dtypes = [np.uint8, np.uint16, np.int16, np.float32, np.float64, np.int8, np.int32,
              np.uint32, np.int64]
    units = ["mm", "micron", "meter", "mm"]
    n = 0
    for version in (1, 2):
        for ext in (".nii", ".nii.gz"):
            for dt in dtypes:
                for nd in (3, 4):
                    n += 1
                    shape = tuple(int(s) for s in rng.integers(2, 9, size=nd))
                    data = random_data(dt, shape)
                    zooms = rng.uniform(0.3, 3.0, size=3)
                    rot = random_rotation()
                    qaff = np.eye(4)
                    qaff[:3, :3] = rot * zooms
                    qaff[:3, 3] = rng.uniform(-100, 100, size=3)
                    saff = qaff.copy()
                    saff[:3, :3] += rng.uniform(-0.2, 0.2, size=(3, 3))  # a shear: sform only
                    saff[:3, 3] += rng.uniform(-5, 5, size=3)
                    cls = nib.Nifti1Image if version == 1 else nib.Nifti2Image
                    endian = ">" if n % 5 == 0 else "<"
                    hdr = (nib.Nifti1Header if version == 1 else nib.Nifti2Header)(
                        endianness=endian)
                    img = cls(data, saff, header=hdr, dtype=dt)
                    img.header.set_qform(qaff, code=1)
                    img.header.set_sform(saff, code=int(rng.integers(2, 5)))
                    unit = units[n % len(units)]
                    img.header.set_xyzt_units(unit, "msec" if n % 2 else "sec")
                    if nd == 4:
                        img.header["pixdim"][4] = rng.uniform(0.5, 3)
                    img.header.set_intent("t test", (float(rng.integers(5, 40)),), name="tstat")
                    img.header["descrip"] = f"ndfilt check {n} {np.dtype(dt).name}".encode()
                    img.header["aux_file"] = b"aux"
                    img.header["cal_min"], img.header["cal_max"] = -1, 99
                    img.header.set_dim_info(freq=0, phase=1, slice=2)
                    img.header["slice_end"] = shape[2] - 1
                    img.header["slice_duration"] = 0.05
                    img.header["toffset"] = 0.5
                    what = f"nibabel v{version}{ext} {np.dtype(dt).name} {shape} {unit}{endian}"
                    src = os.path.join(tmp, "src" + ext)
                    nib.save(img, src)
                    img = nib.load(src)
                    if img.header.endianness != endian:
                        fail(what, f"nibabel wrote {img.header.endianness}, asked {endian}")
                    check_npy(what, src, img, tmp)
                    check_spacing(what, src, img)
                    check_nifti(what, src, img, tmp, ext)
                    check_nifti(what, src, img, tmp, ".nii.gz" if ext == ".nii" else ".nii")
    return n


def scaled_and_singletons(tmp):
    # int16 with scl_slope/scl_inter, header and voxels written by nibabel's header object
    raw = random_data(np.int16, (5, 6, 7))
    for version in (1, 2):
        hdr = nib.Nifti1Header() if version == 1 else nib.Nifti2Header()
        hdr.set_data_shape(raw.shape)
        hdr.set_data_dtype(np.int16)
        hdr.set_slope_inter(0.5, -3.0)
        hdr.set_zooms((1.5, 2.0, 2.5))
        hsize = 352 if version == 1 else 544
        hdr["vox_offset"] = hsize
        src = os.path.join(tmp, f"scaled{version}.nii")
        with open(src, "wb") as f:
            hdr.write_to(f)
            f.write(b"\0" * (hsize - f.tell()))
            f.write(raw.tobytes(order="F"))
        img = nib.load(src)
        what = f"scaled int16 v{version}"
        check_npy(what, src, img, tmp, scaled=True)
        check_nifti(what, src, img, tmp, ".nii", scaled=True)
        s_npy = os.path.join(tmp, "s.npy")
        rc, err = convert(src, s_npy)
        if rc or not np.array_equal(np.load(s_npy),
                                    (raw.astype(np.float64) * 0.5 - 3).astype(np.float32).T):
            fail(what, f"not raw * 0.5 - 3 in float32 {err}")
    # trailing singleton axes: read as 3-D, written back as the 5-D file they were
    data = random_data(np.float32, (4, 5, 6, 1, 1))
    img = nib.Nifti1Image(data, np.diag([2, 3, 4, 1]))
    src = os.path.join(tmp, "single.nii")
    nib.save(img, src)
    img = nib.load(src)
    d = common.info(src, report=False)
    if d is None or d["shape"] != ["6", "5", "4"]:
        fail("singleton axes", f"--info {d}")
    check_npy("singleton axes", src, img, tmp)
    check_nifti("singleton axes", src, img, tmp, ".nii")
    # header extensions (skipped by the reader, not written), plain and gzip
    for version, ext in ((1, ".nii"), (2, ".nii.gz")):
        data = random_data(np.int16, (6, 5, 4))
        img = (nib.Nifti1Image if version == 1 else nib.Nifti2Image)(data, np.diag([2, 2, 3, 1]))
        img.header.extensions.append(nib.nifti1.Nifti1Extension("comment", b"x" * 300))
        src = os.path.join(tmp, "ext" + ext)
        nib.save(img, src)
        img = nib.load(src)
        what = f"extension v{version}{ext}"
        if not img.header.extensions:
            fail(what, "nibabel wrote no extension")
        check_npy(what, src, img, tmp)
        check_nifti(what, src, img, tmp, ext)
    # .npy (no NIfTI header) to NIfTI: voxel size 1 mm, orientation codes 0
    arr = random_data(np.uint16, (3, 4, 5))
    np.save(os.path.join(tmp, "plain.npy"), arr)
    out = os.path.join(tmp, "from_npy.nii.gz")
    rc, err = convert(os.path.join(tmp, "plain.npy"), out)
    if rc:
        return fail("npy -> nifti", err)
    back = nib.load(out)
    h = back.header
    if not (np.array_equal(np.asanyarray(back.dataobj), arr.T) and h.get_data_dtype() == np.uint16
            and h["qform_code"] == 0 and h["sform_code"] == 0 and h.get_zooms() == (1, 1, 1)
            and h.get_xyzt_units()[0] == "mm" and isinstance(h, nib.Nifti1Header)):
        fail("npy -> nifti", f"{h.get_data_dtype()} {h.get_zooms()} q{h['qform_code']} "
             f"s{h['sform_code']} {type(h).__name__}")


def translation(v):
    t = np.eye(4)
    t[:3, 3] = v
    return t


def grown(tmp):
    """The output of a filter grown by R voxels a side (`ks --output full`; R < 0: a crop) has
    origin -R: test_io_nifti --grow writes it, and its affines must be the input's moved by
    that many voxels, every input voxel keeping its world position."""
    helper = os.environ.get("NIFTI_GROW") or os.path.join(os.path.dirname(common.IO_CONVERT),
                                                         "test_io_nifti")
    if not os.access(helper, os.X_OK):
        return fail("origin", f"{helper} (built with io_convert, from tests/) is missing")
    n = 0
    for version in (1, 2):
        for ext in (".nii", ".nii.gz"):
            for nd in (3, 4):
                for R in (3, -1):
                    n += 1
                    shape = tuple(int(s) for s in rng.integers(3, 8, size=nd))
                    data = random_data(np.float32, shape)
                    zooms = rng.uniform(0.5, 2.5, size=3)
                    qaff = np.eye(4)
                    rot = random_rotation()
                    if n % 2:
                        rot[:, 2] = -rot[:, 2]  # left-handed: qfac -1
                    qaff[:3, :3] = rot * zooms
                    qaff[:3, 3] = rng.uniform(-100, 100, size=3)
                    saff = qaff.copy()
                    saff[:3, :3] += rng.uniform(-0.2, 0.2, size=(3, 3))
                    saff[:3, 3] += rng.uniform(-5, 5, size=3)
                    cls = nib.Nifti1Image if version == 1 else nib.Nifti2Image
                    img = cls(data, saff, dtype=np.float32)
                    img.header.set_qform(qaff, code=1)
                    img.header.set_sform(saff, code=2)
                    img.header.set_xyzt_units("mm", "sec")
                    what = f"origin v{version}{ext} {nd}-D R={R}"
                    src, out = os.path.join(tmp, "g_in" + ext), os.path.join(tmp, "g_out" + ext)
                    nib.save(img, src)
                    img = nib.load(src)
                    r = subprocess.run([helper, "--grow", str(R), src, out], capture_output=True,
                                       text=True)
                    if r.returncode:
                        fail(what, f"test_io_nifti --grow: {r.stderr.strip()}")
                        continue
                    back = nib.load(out)
                    move = translation([-R, -R, -R])
                    for name, a, b in (("affine", img.affine, back.affine),
                                       ("qform", img.get_qform(), back.get_qform()),
                                       ("sform", img.get_sform(), back.get_sform())):
                        if not np.allclose(b, a @ move, rtol=0, atol=1e-4):
                            fail(what, f"{name}\n{b}\nis not the input's moved by {-R} voxels\n"
                                 f"{a @ move}")
                    h, hb = img.header, back.header
                    if (int(hb["qform_code"]), int(hb["sform_code"])) != (1, 2):
                        fail(what, f"codes {hb['qform_code']} {hb['sform_code']}")
                    a, b = np.asanyarray(img.dataobj), np.asanyarray(back.dataobj)
                    want = tuple(s + 2 * R for s in shape[:3]) + shape[3:]
                    inner = b[R:-R, R:-R, R:-R] if R > 0 else b
                    outer = a if R > 0 else a[-R:R, -R:R, -R:R]
                    if b.shape != want or not np.array_equal(inner, outer):
                        fail(what, f"voxels: shape {b.shape} (want {want}) or values moved")
                    # a voxel's world position, in and out
                    ijk = np.array([1, 2, 1, 1.0])
                    if R > 0 and not np.allclose(img.affine @ ijk, back.affine @ (ijk + [R, R, R, 0]),
                                                 rtol=0, atol=1e-4):
                        fail(what, "voxel (1, 2, 1) moved in the world")
                    if h.get_zooms()[:3] != hb.get_zooms()[:3]:
                        fail(what, f"zooms {hb.get_zooms()} vs {h.get_zooms()}")
    return n


def fortran_npy(tmp):
    """Fortran-ordered .npy files (np.save of np.asfortranarray, as nibabel's get_fdata gives)
    read as numpy loads them: same shape, same values."""
    n = 0
    for dt in (np.uint8, np.uint16, np.int16, np.float32, np.float64):
        for nd in (1, 2, 3, 4):
            n += 1
            shape = tuple(int(s) for s in rng.integers(1, 9, size=nd))
            a = np.asfortranarray(random_data(dt, shape))
            src, out = os.path.join(tmp, "fort.npy"), os.path.join(tmp, "fort_out.npy")
            np.save(src, a)
            what = f"Fortran-order .npy {np.dtype(dt).name} {shape}"
            rc, err = convert(src, out)
            if rc:
                fail(what, err)
                continue
            got, want = np.load(out), np.load(src)
            if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(
                    got, want, equal_nan=True):
                fail(what, f"{got.dtype} {got.shape}: {common.differences(got, want)}")
    # nibabel's data as a float64 array in Fortran order, through NIfTI and back
    data = random_data(np.int16, (7, 6, 5))
    src = os.path.join(tmp, "fdata.nii.gz")
    nib.save(nib.Nifti1Image(data, np.eye(4)), src)
    f = nib.load(src).get_fdata()
    if not f.flags.f_contiguous:
        fail("get_fdata", "not Fortran-ordered: the check checks nothing")
    npy, back = os.path.join(tmp, "fdata.npy"), os.path.join(tmp, "fdata_back.npy")
    np.save(npy, f)
    rc, err = convert(npy, back)
    if rc or not np.array_equal(np.load(back), f):
        fail("get_fdata .npy", err or common.differences(np.load(back), f))
    return n + 1


def bad_files(tmp):
    data = random_data(np.float32, (8, 9, 10))
    src = os.path.join(tmp, "good.nii")
    nib.save(nib.Nifti1Image(data, np.eye(4)), src)
    blob = open(src, "rb").read()
    cases = {"cut.nii": blob[:1000], "short.nii": blob[:100], "magic.nii": blob[:344] + b"n+9\0"
             + blob[348:], "dims.nii": blob[:40] + b"\x09\x00" + blob[42:]}
    # a .nii.gz short of its gzip trailer (CRC32, length) or more, or with a wrong CRC
    gz = os.path.join(tmp, "good.nii.gz")
    nib.save(nib.Nifti1Image(data, np.eye(4)), gz)
    zblob = open(gz, "rb").read()
    for cut in range(1, 10):
        cases[f"cut{cut}.nii.gz"] = zblob[:-cut]
    cases["crc.nii.gz"] = zblob[:-8] + bytes([zblob[-8] ^ 1]) + zblob[-7:]
    for name, b in cases.items():
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(b)
        for out in ("o.nii", "o.nii.gz", "o.npy"):
            target = os.path.join(tmp, out)
            rc, err = convert(path, target)
            if rc != 3 or path not in err:
                fail(name, f"io_convert rc {rc}: '{err}'")
            if os.path.exists(target):
                fail(name, f"a failed io_convert left {out}")
    leftovers = [f for f in os.listdir(tmp) if ".tmp" in f]
    if leftovers:
        fail("bad files", f"temporary files left: {leftovers}")


def real_files(tmp):
    data_dir = os.path.join(os.path.dirname(nib.__file__), "tests", "data")
    files = [os.path.join(data_dir, f) for f in
             ("anatomical.nii", "example4d.nii.gz", "example_nifti2.nii.gz", "standard.nii.gz",
              "functional.nii", "reoriented_anat_moved.nii", "resampled_anat_moved.nii")]
    files.append("/usr/share/doc/libnifti2-2/examples/ATestReferenceImageForReadingAndWriting.nii.gz")
    done = 0
    for src in common.present(files):
        img = nib.load(src)
        what = os.path.basename(src)
        shape = img.shape
        n = len(shape)
        while n > 1 and shape[n - 1] == 1:
            n -= 1
        if n > 4:  # ndfilt holds 4 axes: refused with a message, nothing written
            for out in ("r.nii.gz", "r.npy"):
                target = os.path.join(tmp, out)
                rc, err = convert(src, target)
                if rc != 3 or f"{n}-D" not in err or os.path.exists(target):
                    fail(what, f"a {n}-D file: rc {rc}, '{err}'")
            print(f"{what}: {n}-D, refused as expected")
            done += 1
            continue
        scaled = is_scaled(img)
        check_npy(what, src, img, tmp, scaled=scaled)
        check_spacing(what, src, img)
        check_nifti(what, src, img, tmp, ".nii.gz", scaled=scaled)
        check_nifti(what, src, img, tmp, ".nii", scaled=scaled)
        print(f"{what}: {img.header.__class__.__name__} {shape} {img.get_data_dtype()}"
              f"{' scaled' if scaled else ''}: ok")
        done += 1
    return done


def large_gz(tmp):
    """A .nii.gz over several of the writer's 1 MiB gzip members (compressed in parallel, one
    member each): nibabel, Python's gzip and our reader read it whole and equal, through
    .nii.gz -> .nii.gz too."""
    data = random_data(np.float32, (96, 87, 70))  # 2.3 MB of voxels: 3 members
    data[:, :, :20] = 0  # a run zlib and libdeflate compress differently
    img = nib.Nifti1Image(data, np.diag([1.5, 1.5, 2.0, 1.0]))
    src = os.path.join(tmp, "large.nii")
    nib.save(img, src)
    img = nib.load(src)
    check_nifti("large", src, img, tmp, ".nii.gz")
    gz, gz2 = os.path.join(tmp, "large.nii.gz"), os.path.join(tmp, "large2.nii.gz")
    if convert(src, gz)[0] == 0 and convert(gz, gz2)[0] == 0:
        import gzip
        raw = gzip.open(gz2).read()
        members = open(gz2, "rb").read().count(b"\x1f\x8b\x08")
        if members < 2:
            fail("large", f"{members} gzip member(s): the writer did not split it")
        back = nib.load(gz2)
        if not np.array_equal(np.asanyarray(back.dataobj), np.asanyarray(img.dataobj)):
            fail("large", "voxels differ after .nii.gz -> .nii.gz")
        if len(raw) != 352 + data.nbytes:
            fail("large", f"gzip.open reads {len(raw)} bytes, not {352 + data.nbytes}")


def main(run_rng):
    global rng
    rng = run_rng
    tmp = common.work
    n = synthetic(tmp)
    large_gz(tmp)
    scaled_and_singletons(tmp)
    g = grown(tmp)
    f = fortran_npy(tmp)
    bad_files(tmp)
    real = real_files(tmp)
    return (f"{n} nibabel-written files, {g} grown or cropped, {f} Fortran-order .npy, {real} "
            f"real files: {len(common.failures)} failures")


if __name__ == "__main__":
    common.main("ndf_nifti_check_", main)
