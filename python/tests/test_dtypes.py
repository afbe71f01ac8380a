# SPDX-License-Identifier: BSD-3-Clause
"""Every dtype scipy takes (bool, int8-int64, uint8-uint64, float16/32/64, complex for the
linear filters) in and out, against scipy's float64 results stored as ndfilt stores every
output (integers rounded to nearest and clamped; bool 0 or 1); rank filters exact."""
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
DTYPES = [bool, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64]


def stored(ref, dt):
    dt = np.dtype(dt)
    if dt.kind in "biu":
        lo, hi = (0, 1) if dt.kind == "b" else (np.iinfo(dt).min, np.iinfo(dt).max)
        return np.clip(np.rint(ref), lo, hi)
    return ref


def sample(rng, dt, shape):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -10**4), min(info.max, 10**4)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dt)
    return rng.uniform(-100, 100, shape).astype(dt)


class TestDtypes(unittest.TestCase):

    def near(self, got, ref, dt, what):
        dt = np.dtype(dt)
        self.assertEqual(np.asarray(got).dtype, dt, what)
        want = stored(ref, dt)
        err = np.abs(np.asarray(got, np.float64) - want)
        bound = 1.0 if dt.kind in "biu" else (1e-3 if dt == np.float16 else 1e-5) * max(
            np.abs(ref).max(), 1e-30)
        i = np.unravel_index(np.argmax(err), err.shape)
        self.assertLessEqual(err[i], bound, f"{what}: worst {i}: got {np.asarray(got)[i]!r}, "
                             f"scipy {want[i]!r}")

    def test_linear(self):
        rng = np.random.default_rng(SEED)
        for dt in DTYPES:
            x = sample(rng, dt, (17, 23))
            x64 = x.astype(np.float64)
            self.near(ndfilt.gaussian_filter(x, 1.5), ndi.gaussian_filter(x64, 1.5), dt,
                      f"gaussian {np.dtype(dt)}")
            w = rng.uniform(-1, 1, (3, 4))
            self.near(ndfilt.correlate(x, w, output=np.float64), ndi.correlate(x64, w),
                      np.float64, f"correlate {np.dtype(dt)} -> float64")
            for odt in (np.int32, np.uint64, bool, np.float16):
                self.near(ndfilt.uniform_filter1d(x, 3, output=odt),
                          ndi.uniform_filter1d(x64, 3), odt,
                          f"uniform_filter1d {np.dtype(dt)} -> {np.dtype(odt)}")
            out = np.zeros((17, 23), np.int64)
            r = ndfilt.sobel(x, axis=0, output=out)
            self.assertIs(r, out)
            self.near(out, ndi.sobel(x64, axis=0), np.int64, f"sobel {np.dtype(dt)} into int64")

    def test_rank_exact(self):
        rng = np.random.default_rng(SEED + 1)
        for dt in DTYPES:
            if dt == np.float16:
                continue  # scipy's rank filters refuse float16
            x = sample(rng, dt, (15, 19))
            for f in ("median_filter", "maximum_filter", "minimum_filter"):
                got, want = getattr(ndfilt, f)(x, 3), getattr(ndi, f)(x, 3)
                self.assertEqual(got.dtype, want.dtype)
                self.assertTrue(np.array_equal(got, want), f"{f} {np.dtype(dt)}")
        x = sample(rng, np.float16, (15, 19))
        self.assertTrue(np.array_equal(ndfilt.median_filter(x, 3),
                                       ndi.median_filter(x.astype(np.float32), 3).astype(
                                           np.float16)), "median float16")

    def test_complex(self):
        rng = np.random.default_rng(SEED + 2)
        for dt in (np.complex64, np.complex128):
            z = (rng.uniform(-1, 1, (16, 21)) + 1j * rng.uniform(-1, 1, (16, 21))).astype(dt)
            for f, args in (("gaussian_filter", (1.5,)), ("correlate", (np.ones((3, 2)),)),
                            ("convolve1d", ([1, -2, 3],)), ("uniform_filter", (3,))):
                got = getattr(ndfilt, f)(z, *args)
                want = getattr(ndi, f)(z.astype(np.complex128), *args)
                self.assertEqual(got.dtype, np.dtype(dt), f)
                err = np.abs(got - want).max() / np.abs(want).max()
                self.assertLess(err, 1e-5, f"{f} {np.dtype(dt)}: {err:.3g}")
            with self.assertRaisesRegex(TypeError, "Complex"):
                ndfilt.median_filter(z, 3)


if __name__ == "__main__":
    unittest.main()
