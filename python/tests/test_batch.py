# SPDX-License-Identifier: BSD-3-Clause
"""Arrays of 5 and 6 axes, filtered along up to 4 of them (the others a batch), against scipy:
every filter family (axes=, per-axis values that leave axes alone, one axis, N-D and separable
kernels, rank filters, masks), outputs given, and the refusal of more than 4 filtered axes."""
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
CASES = int(os.environ.get("NDF_TEST_CASES", 30))
TOL = 1e-5


class TestBatch(unittest.TestCase):

    def close(self, got, ref, what, exact=False, scale=None):
        """got within TOL of ref relative to scale (default ref's largest value: give the terms'
        size where weights of both signs cancel), or equal (exact)."""
        got = np.asarray(got, np.float64)
        ref = np.asarray(ref, np.float64)
        if scale is None:
            scale = np.abs(ref).max()
        err = np.abs(got - ref) / (1 if exact else max(scale, 1e-30))
        i = np.unravel_index(np.argmax(err), err.shape)
        self.assertLessEqual(err[i], 0 if exact else TOL,
                             f"{what}: worst element {i}: got {got[i]!r}, scipy {ref[i]!r}")

    def test_against_scipy(self):
        rng = np.random.default_rng(SEED)
        for c in range(CASES):
            nd = int(rng.integers(5, 7))
            shape = tuple(int(rng.integers(1, 7)) for _ in range(nd))
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            x64 = x.astype(np.float64)
            k = int(rng.integers(1, 5))
            axes = sorted(int(a) for a in rng.choice(nd, size=k, replace=False))
            mode = ["reflect", "constant", "nearest", "mirror", "wrap"][rng.integers(5)]
            what = f"case {c}: {shape} axes {axes} {mode}"
            which = rng.integers(8)
            if which == 0:  # axes=
                s = [float(rng.uniform(0.5, 2)) for _ in axes]
                full = [0.0] * nd
                for a, v in zip(axes, s):
                    full[a] = v
                self.close(ndfilt.gaussian_filter(x, s, axes=axes, mode=mode),
                           ndi.gaussian_filter(x64, full, mode=mode), "gaussian axes " + what)
            elif which == 1:  # sigma 0 leaves axes alone
                full = [float(rng.uniform(0.5, 2)) if a in axes else 0.0 for a in range(nd)]
                self.close(ndfilt.gaussian_filter(x, full, mode=mode),
                           ndi.gaussian_filter(x64, full, mode=mode), "gaussian sigma 0 " + what)
            elif which == 2:
                a = axes[0]
                self.close(ndfilt.gaussian_filter1d(x, 1.5, axis=a, mode=mode),
                           ndi.gaussian_filter1d(x64, 1.5, axis=a, mode=mode), "gauss1d " + what)
                w = rng.uniform(-1, 1, int(rng.integers(1, 6)))
                self.close(ndfilt.convolve1d(x, w, axis=a, mode=mode),
                           ndi.convolve1d(x64, w, axis=a, mode=mode), "convolve1d " + what)
            elif which == 3:
                wshape = [int(rng.integers(2, 4)) if a in axes else 1 for a in range(nd)]
                w = rng.uniform(-1, 1, wshape)
                self.close(ndfilt.correlate(x, w, mode=mode), ndi.correlate(x64, w, mode=mode),
                           "correlate " + what)
            elif which == 4:
                size = [int(rng.integers(2, 5)) if a in axes else 1 for a in range(nd)]
                self.close(ndfilt.uniform_filter(x, size, mode=mode),
                           ndi.uniform_filter(x64, size, mode=mode), "uniform " + what)
            elif which == 5:
                size = [int(rng.integers(2, 4)) if a in axes else 1 for a in range(nd)]
                f = ["median_filter", "minimum_filter", "maximum_filter"][rng.integers(3)]
                self.close(getattr(ndfilt, f)(x, size, mode=mode),
                           getattr(ndi, f)(x, size, mode=mode), f + " " + what, exact=True)
            elif which == 6:
                ws = [rng.uniform(-1, 1, int(rng.integers(1, 4))) if a in axes else None
                      for a in range(nd)]
                ref, mag = x64, np.abs(x64)  # mag: the terms' size (|w| on |x|)
                for a, w in enumerate(ws):
                    if w is not None:
                        ref = ndi.correlate1d(ref, w, axis=a, mode=mode)
                        mag = ndi.correlate1d(mag, np.abs(w), axis=a, mode=mode)
                self.close(ndfilt.sepfilter(x, ws, mode=mode), ref, "sepfilter " + what,
                           scale=max(np.abs(ref).max(), mag.max()))
            else:
                a = axes[-1]
                self.close(ndfilt.maximum_filter1d(x, 3, axis=a, mode=mode),
                           ndi.maximum_filter1d(x, 3, axis=a, mode=mode), "max1d " + what,
                           exact=True)

    def test_outputs_masks_refusals(self):
        rng = np.random.default_rng(SEED + 1)
        x = rng.uniform(-1, 1, (2, 3, 6, 7, 8)).astype(np.float32)
        out = np.zeros(x.shape, np.float64)
        r = ndfilt.gaussian_filter(x, 1.0, axes=(2, 3, 4), output=out)
        self.assertIs(r, out)
        self.close(out, ndi.gaussian_filter(x.astype(np.float64), (0, 0, 1, 1, 1)), "output")
        y = ndfilt.uniform_filter(x.astype(np.uint8), (1, 1, 3, 3, 3), output=np.float32)
        self.assertEqual(y.dtype, np.float32)
        x[0, 1, 2, 3, 4] = np.nan
        m = ndfilt.gaussian_filter(x, 1.0, axes=(3, 4), nan_policy="omit")
        self.assertFalse(np.isnan(m).any())
        with self.assertRaisesRegex(ValueError, "at most 4 axes"):
            ndfilt.gaussian_filter(x, 1.0)
        with self.assertRaisesRegex(ValueError, "at most 4 axes"):
            ndfilt.correlate(x, np.ones((2, 2, 2, 2, 2)))
        with self.assertRaisesRegex(ValueError, "at most 4 axes"):
            ndfilt.median_filter(x, 3)


if __name__ == "__main__":
    unittest.main()
