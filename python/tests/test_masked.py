# SPDX-License-Identifier: BSD-3-Clause
"""Masked and NaN-aware smoothing (mask=, nan_policy=) against a float64 reference of the
normalised convolution built from scipy.ndimage, f(x m) / f(m), on random 1-4-D inputs,
every mode, float and integer dtypes, NaN inputs and masks with holes; and against
astropy.convolution's NaN interpolation on the same arrays."""
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
CASES = int(os.environ.get("NDF_TEST_CASES", 40))
MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
TOL = 1e-5


def reference(name, x, valid, args, kw):
    """The normalised convolution in float64 by scipy: num / den, NaN where den is under 1e-6
    of its largest value; under 'constant' the samples beyond the edge are valid, of cval."""
    f = getattr(ndi, name)
    xf = np.where(valid, x.astype(np.float64), 0.0)
    num = f(xf, *args, **kw)
    kd = dict(kw)
    if "cval" in kd:
        kd["cval"] = 1.0
    den = f(valid.astype(np.float64), *args, **kd)
    ok = np.abs(den) > 1e-6 * np.abs(den).max()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, num / den, np.nan), ok


class TestMasked(unittest.TestCase):

    def check(self, got, ref, ok, scale, what):
        got = np.asarray(got, dtype=np.float64)
        self.assertTrue(np.array_equal(np.isnan(got), ~ok),
                        f"{what}: NaN where no valid sample differs "
                        f"({int((np.isnan(got) != ~ok).sum())} elements)")
        err = np.where(ok, np.abs(got - np.where(ok, ref, 0)), 0) / scale
        i = np.unravel_index(np.argmax(err), err.shape)
        self.assertLessEqual(err[i], TOL, f"{what}: worst element {i}: got {got[i]!r}, "
                             f"reference {ref[i]!r}, error {err[i]:.3g}")

    def test_against_reference(self):
        rng = np.random.default_rng(SEED)
        for c in range(CASES):
            nd = int(rng.integers(1, 5))
            shape = tuple(int(rng.integers(1, 14 if nd > 2 else 60)) for _ in range(nd))
            dtype = [np.float32, np.float64, np.uint8, np.int16][rng.integers(4)]
            x = rng.uniform(-1, 1, shape)
            if np.issubdtype(dtype, np.integer):
                x = rng.integers(0 if dtype == np.uint8 else -300, 255, shape)
            x = x.astype(dtype)
            valid = rng.random(shape) > rng.uniform(0, 0.6)
            kw = {}
            use_nan = np.issubdtype(dtype, np.floating) and rng.random() < 0.5
            if use_nan:
                x[~valid] = np.nan
                kw["nan_policy"] = "omit"
            else:
                kw["mask"] = valid
            mode = MODES[rng.integers(len(MODES))]
            cval = float(rng.uniform(-1, 1))
            which = rng.integers(6)
            axis = int(rng.integers(-nd, nd))
            if which == 0:
                name, args, fkw = "gaussian_filter", (float(rng.uniform(0.5, 3)),), {}
            elif which == 1:
                name, args, fkw = "gaussian_filter1d", (float(rng.uniform(0.5, 3)),), {
                    "axis": axis}
            elif which == 2:
                w = rng.uniform(0.1, 1, tuple(int(rng.integers(1, 5)) for _ in range(nd)))
                name, args, fkw = ["correlate", "convolve"][rng.integers(2)], (w,), {}
            elif which == 3:
                w = rng.uniform(0.1, 1, int(rng.integers(1, 7)))
                name, args, fkw = ["correlate1d", "convolve1d"][rng.integers(2)], (w,), {
                    "axis": axis}
            elif which == 4:
                name, args, fkw = "uniform_filter", (int(rng.integers(1, 6)),), {}
            else:
                name, args, fkw = "uniform_filter1d", (int(rng.integers(1, 6)),), {"axis": axis}
            fkw.update(mode=mode, cval=cval)
            xs = np.where(valid, x.astype(np.float64), 0.0)
            ref, ok = reference(name, xs, valid, args, fkw)
            got = getattr(ndfilt, name)(x, *args, **fkw, **kw)
            want_dt = x.dtype if np.issubdtype(dtype, np.floating) else np.float32
            self.assertEqual(got.dtype, want_dt, name)
            scale = max(np.abs(xs).max(), abs(cval), 1e-30)
            self.check(got, ref, ok, scale,
                       f"case {c}: {name} {shape} {np.dtype(dtype)} {mode} "
                       f"{'nan omit' if use_nan else 'mask'}")

    def test_astropy(self):
        try:
            from astropy.convolution import Gaussian2DKernel, convolve
        except ImportError:
            self.skipTest("astropy not installed")
        rng = np.random.default_rng(SEED + 1)
        x = rng.uniform(0, 1, (45, 60))
        x[rng.random(x.shape) < 0.25] = np.nan
        for sigma in (1.0, 2.5):
            r = int(4 * sigma + 0.5)
            k = Gaussian2DKernel(sigma, x_size=2 * r + 1, y_size=2 * r + 1)
            for boundary, mode in (("extend", "nearest"), ("fill", "constant"), ("wrap", "wrap")):
                a = convolve(x, k, boundary=boundary, fill_value=0.0, nan_treatment="interpolate")
                g = ndfilt.gaussian_filter(x, sigma, mode=mode, nan_policy="omit")
                err = np.nanmax(np.abs(a - g))
                self.assertLess(err, 1e-5, f"astropy {boundary} sigma {sigma}: {err:.3g}")

    def test_ks(self):
        """ks(x m) / ks(m) against the definition's float64 superposition (test_binding's)."""
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from test_binding import ks_reference
        rng = np.random.default_rng(SEED + 4)
        for index in ("input", "output"):
            x = rng.uniform(-1, 1, (13, 17))
            s = rng.uniform(0.3, 1.8, x.shape)
            valid = rng.random(x.shape) > 0.3
            xn = np.where(valid, x, np.nan)
            got = ndfilt.ks(xn, s, index=index, nan_policy="omit")
            num = ks_reference(np.where(valid, x, 0), [s], index, 3.0, "same", False)
            den = ks_reference(valid.astype(np.float64), [s], index, 3.0, "same", False)
            ok = np.abs(den) > 1e-6 * np.abs(den).max()
            ref = np.where(ok, num / np.where(ok, den, 1), np.nan)
            self.check(got, ref, ok, np.abs(x).max(), f"ks {index} nan omit")
            got = ndfilt.ks(x, s, index=index, mask=valid)
            self.check(got, ref, ok, np.abs(x).max(), f"ks {index} mask")

    def test_policies_and_outputs(self):
        rng = np.random.default_rng(SEED + 2)
        x = rng.uniform(-1, 1, (30, 40)).astype(np.float32)
        x[5, 7] = np.nan
        spread = ndfilt.gaussian_filter(x, 2.0)  # propagate: scipy's, the NaN spreads
        self.assertTrue(np.isnan(spread[5, 9]))
        with self.assertRaisesRegex(ValueError, "NaN"):
            ndfilt.gaussian_filter(x, 2.0, nan_policy="raise")
        with self.assertRaisesRegex(ValueError, "nan_policy"):
            ndfilt.gaussian_filter(x, 2.0, nan_policy="ignore")
        with self.assertRaisesRegex(ValueError, "mask shape"):
            ndfilt.gaussian_filter(x, 2.0, mask=np.ones((30, 41), bool))
        out = np.empty((30, 40), np.float64)
        r = ndfilt.gaussian_filter(x, 2.0, output=out, nan_policy="omit")
        self.assertIs(r, out)
        self.assertFalse(np.isnan(out).any())
        u8 = rng.integers(0, 255, (30, 40)).astype(np.uint8)
        m = rng.random((30, 40)) > 0.3
        got = ndfilt.uniform_filter(u8, 3, mask=m, output=np.uint8)
        ref, ok = reference("uniform_filter", u8, m, (3,), {})
        self.assertEqual(got.dtype, np.uint8)
        self.assertLessEqual(np.abs(got[ok] - np.rint(ref[ok])).max(), 1)
        self.assertTrue((got[~ok] == 0).all())  # no valid sample: NaN, which integers make 0
        # a mask of all True, no NaN: the plain filter
        np.testing.assert_allclose(ndfilt.gaussian_filter(x[10:], 1.5, mask=np.ones((20, 40))),
                                   ndfilt.gaussian_filter(x[10:], 1.5), rtol=0, atol=1e-6)


@unittest.skipUnless(os.environ.get("NDFILT_CLI"), "NDFILT_CLI (the ndfilt tool) not given")
class TestMaskedCli(unittest.TestCase):
    """ndfilt gauss --nan omit and --mask on .npy files: the float64 reference (mode nearest,
    the CLI's default), a 4-D series one volume at a time with a 3-D mask; constant refused."""

    def run_cli(self, *args):
        import subprocess
        p = subprocess.run([os.environ["NDFILT_CLI"], "--device", "cpu", *args],
                           capture_output=True, text=True, timeout=120)
        return p

    def test_cli(self):
        import tempfile
        rng = np.random.default_rng(SEED + 3)
        x = rng.uniform(-1, 1, (12, 20, 24)).astype(np.float32)
        valid = rng.random(x.shape) > 0.3
        xn = np.where(valid, x, np.nan).astype(np.float32)
        series = rng.uniform(0, 1, (3, 12, 20, 24)).astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            pa = lambda n: os.path.join(tmp, n)  # noqa: E731
            np.save(pa("xn.npy"), xn)
            np.save(pa("x.npy"), x)
            np.save(pa("m.npy"), valid.astype(np.uint8))
            np.save(pa("s.npy"), series)
            p = self.run_cli("gauss", pa("xn.npy"), pa("y.npy"), "--sigma", "1.5", "--nan", "omit")
            self.assertEqual(p.returncode, 0, p.stderr)
            ref, ok = reference("gaussian_filter", x, valid, (1.5,), {"mode": "nearest"})
            got = np.load(pa("y.npy"))
            self.assertTrue(np.array_equal(np.isnan(got), ~ok))
            self.assertLess(np.nanmax(np.abs(got - ref)), TOL)
            p = self.run_cli("gauss", pa("x.npy"), pa("y.npy"), "--sigma", "1.5", "--mask",
                             pa("m.npy"))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertLess(np.nanmax(np.abs(np.load(pa("y.npy")) - ref)), TOL)
            p = self.run_cli("gauss", pa("s.npy"), pa("y.npy"), "--sigma", "0,1,2,2", "--mask",
                             pa("m.npy"))
            self.assertEqual(p.returncode, 0, p.stderr)
            got = np.load(pa("y.npy"))
            for t in range(3):
                r, _ = reference("gaussian_filter", series[t], valid, ((1, 2, 2),),
                                 {"mode": "nearest"})
                self.assertLess(np.nanmax(np.abs(got[t] - r)), TOL, f"volume {t}")
            p = self.run_cli("gauss", pa("x.npy"), pa("y.npy"), "--sigma", "1", "--mask",
                             pa("m.npy"), "--mode", "constant")
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("constant", p.stderr)
            p = self.run_cli("gauss", pa("s.npy"), pa("y.npy"), "--sigma", "1", "--mask",
                             pa("m.npy"))  # filtered along all 4 axes: the mask must be 4-D
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("shape", p.stderr)


if __name__ == "__main__":
    unittest.main()
