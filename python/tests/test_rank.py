# SPDX-License-Identifier: BSD-3-Clause
"""Rank filters against scipy.ndimage on random inputs: minimum/maximum (1-D and N-D), median,
rank and percentile filters over boxes and footprints with holes, every mode (and scipy's grid
aliases), origins, sizes even, odd and longer than the axis, every dtype, axes=, a dtype for
the output. Rank filters are exact: the results must be equal, element for element."""
import os
import sys
import unittest

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
import numpy as np  # noqa: E402
from scipy import ndimage as ndi  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ndfilt  # noqa: E402

SEED = int(os.environ.get("NDF_TEST_SEED", np.random.SeedSequence().entropy % 2**32))
print(f"seed: NDF_TEST_SEED={SEED}", file=sys.stderr)
CASES = int(os.environ.get("NDF_TEST_CASES", 60))
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-mirror", "grid-constant",
         "grid-wrap"]
DTYPES = [np.uint8, np.uint16, np.int16, np.float32, np.float64]


def random_input(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)
    x = rng.uniform(-1, 1, size=shape)
    if rng.random() < 0.3:  # ties
        x = np.round(x * 4) / 4
    return x.astype(dtype)


def same(tc, got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    tc.assertEqual(got.dtype, want.dtype, what)
    tc.assertEqual(got.shape, want.shape, what)
    bad = got != want
    if bad.any():
        i = np.unravel_index(np.argmax(bad), bad.shape)
        tc.fail(f"{what}: {int(bad.sum())} elements differ; first {i}: got {got[i]!r}, "
                f"scipy {want[i]!r}")


class TestRank(unittest.TestCase):

    def case(self, rng):
        nd = int(rng.integers(1, 5))
        shape = tuple(int(rng.integers(1, 13 if nd > 2 else 40)) for _ in range(nd))
        dtype = DTYPES[rng.integers(len(DTYPES))]
        x = random_input(rng, shape, dtype)
        mode = MODES[rng.integers(len(MODES))]
        cval = float(rng.integers(-3, 4)) if np.issubdtype(dtype, np.integer) else \
            float(rng.uniform(-1, 1))
        if np.issubdtype(dtype, np.unsignedinteger):
            cval = abs(cval)
        axes = None
        if nd > 1 and rng.random() < 0.25:
            k = int(rng.integers(1, nd + 1))
            axes = tuple(int(a) for a in rng.choice(nd, size=k, replace=False))
        na = nd if axes is None else len(axes)
        # scipy lays a footprint (or a rank filter's box of `size`) along the axes in increasing
        # order but takes origins in the order of `axes`: cases with explicit lengths and
        # origins sort the axes; unsorted ones (below) get one length and origin 0
        unsorted = axes is not None and rng.random() < 0.5
        sizes = tuple(int(rng.integers(1, 8)) for _ in range(na))
        if rng.random() < 0.5:
            fp = rng.random(sizes) < 0.6
            if not fp.any():
                fp.flat[0] = True
            spec = dict(footprint=fp)
        else:
            fp = np.ones(sizes, bool)
            spec = dict(size=sizes if rng.random() < 0.7 else sizes[0])
            if "size" in spec and np.ndim(spec["size"]) == 0:
                fp = np.ones((sizes[0],) * na, bool)
        origin = tuple(int(rng.integers(-(k // 2), (k - 1) // 2 + 1)) for k in fp.shape)
        if unsorted:
            fp = np.ones((sizes[0],) * na, bool)
            spec, origin = dict(size=sizes[0]), 0
        elif axes is not None:
            axes = tuple(sorted(axes))
        kw = dict(mode=mode, cval=cval, origin=origin, **spec)
        if axes is not None:
            kw["axes"] = axes
        return x, fp, kw

    @staticmethod
    def scipy(f, x, *args, **kw):
        """scipy's result; a 1-D input's rank, median or percentile filter through scipy's 2-D
        path (x[None]): scipy's 1-D rank filter (1.17) reads only a footprint's length, not
        its holes, and with mode 'mirror' and a window longer than the array returns zeros,
        where its N-D path gives the definition's result."""
        if "axes" in kw:  # the full form (scipy < 1.11 has no axes=)
            kw = dict(kw)
            axes, nd = kw.pop("axes"), x.ndim
            origin = np.broadcast_to(kw.get("origin", 0), (len(axes),))
            full_origin = [0] * nd
            for a, o in zip(axes, origin):
                full_origin[a] = int(o)
            kw["origin"] = tuple(full_origin)
            if "footprint" in kw or f not in ("minimum_filter", "maximum_filter"):
                fp = kw.pop("footprint", None)
                if fp is None:
                    fp = np.ones(np.broadcast_to(kw.pop("size"), (len(axes),)), bool)
                kw["footprint"] = np.expand_dims(fp, tuple(a for a in range(nd)
                                                           if a not in axes))
            else:
                sizes = [1] * nd
                for a, k in zip(axes, np.broadcast_to(kw["size"], (len(axes),))):
                    sizes[a] = int(k)
                kw["size"] = tuple(sizes)
        if x.ndim == 1 and f in ("rank_filter", "median_filter", "percentile_filter"):
            fp = kw.get("footprint")
            kw = dict(kw, origin=(0, *np.atleast_1d(kw.get("origin", 0))))
            if fp is not None:
                kw["footprint"] = np.asarray(fp)[None]
            else:
                kw["size"] = (1, *np.atleast_1d(kw["size"]))
            return getattr(ndi, f)(x[None], *args, **kw)[0]
        return getattr(ndi, f)(x, *args, **kw)

    def test_against_scipy(self):
        rng = np.random.default_rng(SEED)
        for c in range(CASES):
            x, fp, kw = self.case(rng)
            n = int(fp.sum())
            which = rng.integers(4 if "axes" in kw else 5)  # scipy's percentile: no axes=
            what = f"case {c}: shape {x.shape} {x.dtype} {kw}"
            args = ()
            f = ["minimum_filter", "maximum_filter", "median_filter", "rank_filter",
                 "percentile_filter"][which]
            if which == 3:
                args = (int(rng.integers(-n, n)),)
            elif which == 4:
                args = (float(rng.choice([0, 100, -30, rng.uniform(0, 100)])),)
            what = f"{f}{args} " + what
            got, want = getattr(ndfilt, f)(x, *args, **kw), self.scipy(f, x, *args, **kw)
            same(self, got, want, what)

    def test_1d(self):
        rng = np.random.default_rng(SEED + 1)
        for c in range(CASES // 2):
            nd = int(rng.integers(1, 4))
            shape = tuple(int(rng.integers(1, 30)) for _ in range(nd))
            x = random_input(rng, shape, DTYPES[rng.integers(len(DTYPES))])
            size = int(rng.integers(1, 45))
            axis = int(rng.integers(-nd, nd))
            mode = MODES[rng.integers(len(MODES))]
            origin = int(rng.integers(-(size // 2), (size - 1) // 2 + 1))
            kw = dict(axis=axis, mode=mode, cval=1.0, origin=origin)
            for f in ("minimum_filter1d", "maximum_filter1d"):
                same(self, getattr(ndfilt, f)(x, size, **kw), getattr(ndi, f)(x, size, **kw),
                     f"case {c}: {f} {x.shape} {x.dtype} size {size} {kw}")

    def test_large_boxes(self):
        """van Herk passes on boxes longer than the axes, and the selection path on the same."""
        rng = np.random.default_rng(SEED + 2)
        x = rng.uniform(-1, 1, (23, 37, 11)).astype(np.float32)
        for mode in ("reflect", "mirror", "wrap", "nearest", "constant"):
            for size in ((31, 5, 1), (2, 64, 3), (1, 1, 25)):
                kw = dict(size=size, mode=mode, cval=-0.5)
                same(self, ndfilt.maximum_filter(x, **kw), ndi.maximum_filter(x, **kw),
                     f"maximum {size} {mode}")
                same(self, ndfilt.minimum_filter(x, **kw), ndi.minimum_filter(x, **kw),
                     f"minimum {size} {mode}")
            same(self, ndfilt.median_filter(x, size=(5, 7, 3), mode=mode),
                 ndi.median_filter(x, size=(5, 7, 3), mode=mode), f"median 5x7x3 {mode}")

    def test_byte_boxes_by_rows(self):
        """uint8 minima and maxima of boxes over the last two axes (up to 16 rows tall, any
        width), uint8 in and out: the rows' extremes through a ring of rows on the CPU."""
        rng = np.random.default_rng(SEED + 6)
        for _ in range(CASES):
            nd = int(rng.integers(1, 5))
            shape = tuple(int(v) for v in rng.integers(1, 40, nd))
            x = rng.integers(0, 256, shape).astype(np.uint8)
            size = [1] * nd
            for d in range(max(0, nd - 2), nd):
                size[d] = int(rng.integers(1, 18))
            kw = dict(size=size, mode=MODES[rng.integers(len(MODES))],
                      origin=[int(rng.integers(-(k // 2), (k - 1) // 2 + 1)) for k in size],
                      cval=int(rng.integers(0, 256)))
            f = ["minimum_filter", "maximum_filter"][rng.integers(2)]
            same(self, getattr(ndfilt, f)(x, **kw), getattr(ndi, f)(x, **kw), f"{f} {shape} {kw}")

    def test_integer_histograms(self):
        """Any rank of an 8- or 16-bit integer box or footprint past 128 samples (a sliding
        histogram) is scipy's, for values over the whole range and values about a 256 boundary
        (the 16-bit histogram's coarse bins), every mode, an origin, cval cast to the dtype."""
        rng = np.random.default_rng(SEED + 5)
        for dt in (np.uint8, np.uint16, np.int16):
            info = np.iinfo(dt)
            wide = rng.integers(info.min, info.max, (19, 45), endpoint=True).astype(dt)
            near = (rng.integers(200, 320, (3, 21, 40)) - (dt == np.int16) * 512).astype(dt)
            for x, size in ((wide, (12, 13)), (near, (3, 9, 11))):
                for mode in ("reflect", "mirror", "wrap", "nearest", "constant"):
                    kw = dict(size=size, mode=mode, cval=-3, origin=1)
                    same(self, ndfilt.median_filter(x, **kw), ndi.median_filter(x, **kw),
                         f"median {dt.__name__} {size} {mode}")
                    # not the box's minimum or maximum, which scipy takes by separable
                    # passes comparing the raw cval (scipy-dropin.md)
                    r = int(rng.integers(1, np.prod(size) - 1))
                    same(self, ndfilt.rank_filter(x, r, **kw), ndi.rank_filter(x, r, **kw),
                         f"rank {r} {dt.__name__} {size} {mode}")
            # footprints with holes: a disk of 149 samples, and a ring whose lines hold two
            # runs each
            yy, xx = np.mgrid[-7:8, -7:8]
            disk = xx * xx + yy * yy <= 49
            ring = disk & (xx * xx + yy * yy > 4)  # 136 samples
            for fp in (disk, ring):
                for mode in ("reflect", "constant", "wrap"):
                    kw = dict(footprint=fp, mode=mode, cval=5, origin=(1, -2))
                    same(self, ndfilt.median_filter(wide, **kw), ndi.median_filter(wide, **kw),
                         f"median {dt.__name__} footprint of {fp.sum()} {mode}")
                    r = int(rng.integers(1, fp.sum() - 1))
                    same(self, ndfilt.rank_filter(wide, r, **kw),
                         ndi.rank_filter(wide, r, **kw), f"rank {r} {dt.__name__} {mode}")

    def test_output_and_inplace(self):
        rng = np.random.default_rng(SEED + 3)
        x = rng.integers(0, 200, (30, 40)).astype(np.uint8)
        got = ndfilt.median_filter(x, size=3, output=np.float32)
        same(self, got, ndi.median_filter(x, size=3, output=np.float32), "output float32")
        out = np.empty((30, 40), np.int16)
        r = ndfilt.maximum_filter(x, size=4, output=out)
        self.assertIs(r, out)
        same(self, out, ndi.maximum_filter(x, size=4, output=np.int16), "output array")
        y = x.copy()
        ndfilt.minimum_filter(y, size=5, output=y)
        same(self, y, ndi.minimum_filter(x, size=5), "in place")
        v = x[::2, ::-3]
        same(self, ndfilt.median_filter(v, size=(3, 2)), ndi.median_filter(v, size=(3, 2)),
             "strided view")

    def test_cval_cast(self):
        """An integer input's cval as scipy casts it (truncated; wrapped where out of range, for
        footprints with holes: scipy's box minimum and maximum compare an out-of-range cval
        before casting, a case left out), native dtypes and those filtered through a float64
        copy alike."""
        rng = np.random.default_rng(SEED + 6)
        for dt in (np.uint8, np.int16, np.int32, np.uint32, np.int64):
            x = random_input(rng, (9, 11), dt) if dt in DTYPES else \
                rng.integers(0, 50, (9, 11)).astype(dt)
            for cval in (0.95, -0.95, -1.7, 2.5):
                for f, kw in (("maximum_filter", dict(size=3)),
                              ("minimum_filter", dict(size=(3, 2))),
                              ("maximum_filter", dict(footprint=[[1, 0, 1], [0, 1, 1]])),
                              ("median_filter", dict(footprint=[[1, 0, 1], [0, 1, 1]])),
                              ("minimum_filter1d", dict(size=3))):
                    if cval < -1 and np.dtype(dt).kind == "u" and "footprint" not in kw:
                        continue
                    same(self, getattr(ndfilt, f)(x, mode="constant", cval=cval, **kw),
                         getattr(ndi, f)(x, mode="constant", cval=cval, **kw),
                         f"{f} {np.dtype(dt)} cval {cval}")

    def test_errors(self):
        x = np.zeros((8, 8), np.float32)
        with self.assertRaises(RuntimeError):
            ndfilt.rank_filter(x, 9, size=3)
        with self.assertRaises(RuntimeError):
            ndfilt.rank_filter(x, -10, size=3)
        with self.assertRaises(ValueError):
            ndfilt.median_filter(x, footprint=np.zeros((3, 3)))
        with self.assertRaises(ValueError):
            ndfilt.median_filter(x, size=3, origin=2)
        with self.assertRaises(RuntimeError):
            ndfilt.median_filter(x)
        with self.assertRaises(RuntimeError):
            ndfilt.percentile_filter(x, 150, size=3)
        with self.assertRaises(RuntimeError):
            ndfilt.median_filter(x, footprint=np.ones((3, 3, 3)))
        for cval in (np.nan, np.inf):  # no uint8 sample (scipy raises too)
            with self.assertRaises(ValueError):
                ndfilt.median_filter(x.astype(np.uint8), size=3, mode="constant", cval=cval)
        with self.assertRaises(ValueError):
            ndfilt.minimum_filter1d(x, 3, axis=2)
        with self.assertRaises(RuntimeError):
            ndfilt.minimum_filter1d(x, 0)


@unittest.skipUnless(os.environ.get("NDFILT_CLI"), "NDFILT_CLI (the ndfilt tool) not given")
class TestRankCli(unittest.TestCase):
    """ndfilt median|min|max|rank|percentile|uniform on .npy files against scipy (mode nearest,
    the CLI's default), in memory and streamed in slabs under --memory-limit."""

    def test_cli(self):
        import subprocess
        import tempfile
        rng = np.random.default_rng(SEED + 4)
        x = rng.integers(0, 60000, (60, 30, 40)).astype(np.uint16)
        cases = [(["median", "--size", "3"], lambda: ndi.median_filter(x, 3, mode="nearest")),
                 (["min", "--size", "3,5,1"],
                  lambda: ndi.minimum_filter(x, (3, 5, 1), mode="nearest")),
                 (["max", "--size", "4", "--mode", "wrap"],
                  lambda: ndi.maximum_filter(x, 4, mode="wrap")),
                 (["rank", "--rank", "-2", "--size", "3", "--origin", "1"],
                  lambda: ndi.rank_filter(x, -2, 3, origin=1, mode="nearest")),
                 (["percentile", "--percentile", "30", "--size", "5", "--mode", "constant",
                   "--cval", "7"],
                  lambda: ndi.percentile_filter(x, 30, 5, mode="constant", cval=7))]
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
            np.save(src, x)
            for args, ref in cases:
                for extra in ([],):
                    cmd = [os.environ["NDFILT_CLI"], "--device", "cpu", *extra, args[0], src, dst,
                           *args[1:]]
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                    self.assertEqual(p.returncode, 0, f"{cmd}: {p.stderr}")
                    same(self, np.load(dst), ref(), " ".join(cmd))
            # streamed: input and output (13 MB each) over the limit, a slab at a time
            big = rng.integers(0, 60000, (400, 128, 128)).astype(np.uint16)
            np.save(src, big)
            for args, ref in [(["median", "--size", "3,1,3"],
                               lambda: ndi.median_filter(big, (3, 1, 3), mode="nearest")),
                              (["max", "--size", "5", "--mode", "reflect"],
                               lambda: ndi.maximum_filter(big, 5, mode="reflect"))]:
                cmd = [os.environ["NDFILT_CLI"], "--device", "cpu", "-v", "--memory-limit",
                       "20M", args[0], src, dst, *args[1:]]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                self.assertEqual(p.returncode, 0, f"{cmd}: {p.stderr}")
                self.assertIn("slab", p.stderr.lower(), "not streamed: " + p.stderr)
                same(self, np.load(dst), ref(), " ".join(cmd))
            # ndfilt uniform: scipy's uniform_filter, in float32 or float64 arithmetic, in memory
            # and streamed
            big32 = big.astype(np.float32)
            for args, ref, extra in [
                    (["--size", "5", "--dtype", "f32"],
                     lambda: ndi.uniform_filter(big32, 5, mode="nearest"), []),
                    (["--size", "3,1,4", "--mode", "wrap", "--origin", "1,0,-1", "--dtype", "f64"],
                     lambda: ndi.uniform_filter(big32, (3, 1, 4), mode="wrap", origin=(1, 0, -1)),
                     ["-v", "--memory-limit", "24M"])]:
                cmd = [os.environ["NDFILT_CLI"], "--device", "cpu", *extra, "uniform", src, dst,
                       *args]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                self.assertEqual(p.returncode, 0, f"{cmd}: {p.stderr}")
                if extra:
                    self.assertIn("slab", p.stderr.lower(), "not streamed: " + p.stderr)
                np.testing.assert_allclose(np.load(dst), ref(), rtol=0, atol=60000 * 1e-6,
                                           err_msg=" ".join(cmd))
            p = subprocess.run([os.environ["NDFILT_CLI"], "rank", src, dst, "--size", "3"],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("--rank", p.stderr)


def _cupy():
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:
        return None


@unittest.skipUnless(_cupy(), "CuPy with a GPU not available")
class TestRankCupy(unittest.TestCase):
    """cuda_rank on CuPy arrays against scipy: the same random cases as TestRank (float64 and
    int32 included: the former filtered as it is, the latter through a float64 copy), and
    footprints past 128 samples (the bisection) with holes, in place."""

    def test_against_scipy(self):
        cp = _cupy()
        rng = np.random.default_rng(SEED + 5)
        gen = TestRank()
        for c in range(CASES):
            x, fp, kw = gen.case(rng)
            if c % 7 == 3:
                x = rng.integers(-2**31, 2**31 - 1, x.shape, dtype=np.int32)
            n = int(fp.sum())
            f = ["minimum_filter", "maximum_filter", "median_filter", "rank_filter"][
                rng.integers(4)]
            args = (int(rng.integers(-n, n)),) if f == "rank_filter" else ()
            got = getattr(ndfilt, f)(cp.asarray(x), *args, **kw)
            self.assertIsInstance(got, cp.ndarray)
            self.assertEqual(ndfilt.last_solver(), "cuda_rank")
            same(self, got.get(), TestRank.scipy(f, x, *args, **kw),
                 f"{f}{args} case {c}: shape {x.shape} {x.dtype} {kw}")
        for dt in (np.float32, np.float64, np.uint16):
            x = random_input(rng, (40, 50, 60), dt)
            for size in (3, 5, 9):
                same(self, ndfilt.median_filter(cp.asarray(x), size=size).get(),
                     ndi.median_filter(x, size=size), f"median {size}^3 {dt}")
            fp = rng.random((9, 7, 5)) < 0.7
            for r in (0, 3, int(fp.sum()) // 2, -1):
                same(self, ndfilt.rank_filter(cp.asarray(x), r, footprint=fp).get(),
                     ndi.rank_filter(x, r, footprint=fp), f"rank {r} of {fp.sum()} {dt}")
            y = cp.asarray(x)
            ndfilt.median_filter(y, size=(3, 5, 7), output=y)
            same(self, y.get(), ndi.median_filter(x, size=(3, 5, 7)), f"in place {dt}")
            same(self, ndfilt.maximum_filter(cp.asarray(x), size=31).get(),
                 ndi.maximum_filter(x, size=31), f"maximum 31^3 {dt}")


if __name__ == "__main__":
    unittest.main()
