# SPDX-License-Identifier: BSD-3-Clause
"""Binding tests: ndfilt against scipy.ndimage on random inputs; argument errors; GPU
round trips (CuPy, torch) without host copies when those are present."""
import inspect
import math
import os
import sys
import unittest

# Idle OpenMP threads sleep instead of spinning: on a loaded machine spinning makes
# this file several times slower. Set before numpy or libndfilt loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
import numpy as np  # noqa: E402
from scipy import ndimage as ndi  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ndfilt  # noqa: E402

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
DTYPES = [np.uint8, np.uint16, np.int16, np.float32, np.float64]
SEED = int(os.environ.get("NDF_TEST_SEED", np.random.SeedSequence().entropy % 2**32))
print(f"seed: NDF_TEST_SEED={SEED}", file=sys.stderr)
TOL = 1e-5  # max |ndfilt - scipy| / max scipy(|x|, |w|), float outputs
SCIPY_AXES = "axes" in inspect.signature(ndi.gaussian_filter).parameters  # scipy >= 1.11


def random_input(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def expected(conv, x, w, axis, mode, cval, origin):
    f = ndi.convolve1d if conv else ndi.correlate1d
    ref = f(x.astype(np.float64), w, axis=axis, mode=mode, cval=cval, origin=origin,
            output=np.float64)
    mag = f(np.abs(x.astype(np.float64)), np.abs(w), axis=axis, mode=mode, cval=abs(cval),
            origin=origin, output=np.float64)
    return ref, max(mag.max(), 1e-30)


def check(tc, got, ref, scale, what, islack=0.0):
    """islack: extra error allowed on integer outputs (float32 error before rounding)."""
    got = np.asarray(got, dtype=np.float64)
    if what[1].startswith("f"):
        err = np.abs(got - ref) / scale
        bound = TOL
    else:
        info = np.iinfo(what[1])
        err = np.abs(got - np.clip(np.rint(ref), info.min, info.max))
        bound = 1.0 + islack
    i = np.unravel_index(np.nanargmax(np.where(np.isnan(err), np.inf, err)), err.shape)
    tc.assertTrue(np.all(err <= bound),
                  f"{what[0]}: worst element {i}: got {got[i]!r}, scipy {ref[i]!r}, "
                  f"error {err[i]:.3g} > {bound}")


class TestAgainstScipy(unittest.TestCase):
    def test_random(self):
        rng = np.random.default_rng(SEED)
        maxdim = {1: 70, 2: 20, 3: 9, 4: 5}
        for k in range(150):
            nd = int(rng.integers(1, 5))
            shape = tuple(int(rng.integers(1, maxdim[nd] + 1)) for _ in range(nd))
            axis = int(rng.integers(-nd, nd))
            length = shape[axis]
            n = int(rng.integers(length + 1, 2 * length + 6)) if rng.integers(4) == 0 \
                else int(rng.integers(1, 12))
            origin = int(rng.integers(-(n // 2), (n - 1) // 2 + 1))
            mode = MODES[int(rng.integers(5))]
            cval = float(rng.uniform(-2, 2))
            conv = bool(rng.integers(2))
            dt = DTYPES[int(rng.integers(5))]
            x = random_input(rng, shape, dt)
            layout = int(rng.integers(3))
            if layout == 1 and nd > 1:  # transposed view
                x = np.ascontiguousarray(x.T).T
            elif layout == 2:  # every other element, some axes reversed
                big = random_input(rng, tuple(2 * s for s in shape), dt)
                x = big[tuple(slice(None, None, 2 if rng.integers(2) else -2) for _ in shape)]
            w = rng.uniform(-1, 1, n)
            f = ndfilt.convolve1d if conv else ndfilt.correlate1d
            what = (f"case {k}: {f.__name__} shape={shape} axis={axis} n={n} origin={origin} "
                    f"mode={mode} dtype={np.dtype(dt).name} layout={layout}",)
            ref, scale = expected(conv, x, w, axis, mode, cval, origin)
            odt = [dt, np.float32][int(rng.integers(2))]
            if odt == dt:
                got = f(x, w, axis=axis, mode=mode, cval=cval, origin=origin)
            else:
                got = f(x, w, axis=axis, mode=mode, cval=cval, origin=origin, output=odt)
            self.assertIsInstance(got, np.ndarray)
            self.assertEqual(got.dtype, np.dtype(odt))
            self.assertEqual(got.shape, x.shape)
            check(self, got, ref, scale, what + (np.dtype(odt).name,))

    def test_output_and_inplace(self):
        rng = np.random.default_rng(SEED + 1)
        x = rng.uniform(-1, 1, (7, 9)).astype(np.float32)
        w = np.array([0.25, 0.5, -0.75, 1.0])
        ref, scale = expected(False, x, w, 0, "wrap", 0.0, 1)
        out = np.full_like(x, np.nan)
        got = ndfilt.correlate1d(x, w, axis=0, mode="wrap", origin=1, output=out)
        self.assertIs(got, out)
        check(self, out, ref, scale, ("output=", "float32"))
        strided = np.full((7, 18), np.nan, np.float32)[:, ::2]  # strided output
        ndfilt.correlate1d(x, w, axis=0, mode="wrap", origin=1, output=strided)
        check(self, strided, ref, scale, ("strided output=", "float32"))
        y = x.copy()
        ndfilt.correlate1d(y, w, axis=0, mode="wrap", origin=1, output=y)
        check(self, y, ref, scale, ("in place", "float32"))
        self.assertEqual(ndfilt.correlate1d(x.astype(np.float64), w).dtype, np.float64)

    def test_bad_arguments(self):
        x = np.ones((4, 5), np.float32)
        cases = [
            (ValueError, dict(weights=[1, 2, 1], mode="bogus")),
            (ValueError, dict(weights=[1, 2, 1], origin=2)),
            (ValueError, dict(weights=[1, 2, 1], axis=2)),
            (ValueError, dict(weights=[])),
            (ValueError, dict(weights=[[1, 2], [3, 4]])),
            (ValueError, dict(weights=[1, 2, 1], method="nope")),
            (ValueError, dict(weights=[1], output=np.ones((5, 4), np.float32))),
        ]
        for exc, kw in cases:
            with self.assertRaises(exc, msg=str(kw)):
                ndfilt.correlate1d(x, **kw)
        with self.assertRaises(TypeError):  # not numbers
            ndfilt.correlate1d(np.array(["a", "b"]), [1])
        with self.assertRaises(ValueError):  # more than 4 filtered axes
            ndfilt.gaussian_filter(np.ones((2,) * 5, np.float32), 1.0)
        with self.assertRaises(ValueError):
            ndfilt.set_device("quantum")

    def test_device_and_solvers(self):
        self.assertIn("cpu_corr1d", ndfilt.solvers()["sepfilter"])
        self.assertTrue(ndfilt.device())
        self.assertTrue(ndfilt.__version__.count(".") == 2)

    def test_device_lists(self):
        """Malformed device lists are refused as such, whatever the machine; a list of GPUs
        works where there are GPUs and fails cleanly where there are none."""
        saved, before = ndfilt._device, ndfilt.device()
        for bad in ("cuda:0,0", "cuda:", "cuda:0,", "cuda:x", "cuda:all,1"):
            with self.assertRaises(ValueError, msg=bad):
                ndfilt.set_device(bad)
        self.assertEqual(ndfilt.device(), before)  # a refused device changes nothing
        try:
            ndfilt.set_device("cuda:all")
        except RuntimeError as e:
            self.assertIn("cuda:all", str(e))
        else:
            self.assertTrue(ndfilt.device().startswith("cuda:0"))
            x = np.random.default_rng(1).random((136, 256, 512), dtype=np.float32)  # 71 MB
            y = ndfilt.gaussian_filter(x, 2.0, mode="wrap")
            ndfilt.set_device("cuda:0")
            np.testing.assert_allclose(y, ndfilt.gaussian_filter(x, 2.0, mode="wrap"),
                                       rtol=0, atol=1e-6)
        finally:
            ndfilt.set_device(saved)


def scipy_nd(f, x, w, mode, cval, origin):
    """scipy.ndimage.correlate or convolve f of x in float64. In mode "reflect" scipy's n-D
    filters read wrong samples (or memory outside the input) once the kernel reaches more
    than about twice an axis's length past its end, where correlate1d extends the same axis
    correctly (the symmetric extension repeats with period 2n). There the reference is
    taken on x padded by numpy's "symmetric" extension, which is the same definition."""
    x = np.asarray(x, np.float64)
    if mode != "reflect":
        return f(x, w, mode=mode, cval=cval, origin=origin)
    pad = max(np.shape(w))
    ref = f(np.pad(x, pad, mode="symmetric"), w, mode="constant", cval=cval, origin=origin)
    return ref[(slice(pad, -pad),) * x.ndim]


def random_array(rng, shape, dt):
    """A random input of dtype dt: contiguous, transposed or strided with reversed axes."""
    x = random_input(rng, shape, dt)
    layout = int(rng.integers(3))
    if layout == 1 and len(shape) > 1:
        x = np.ascontiguousarray(x.T).T
    elif layout == 2:
        big = random_input(rng, tuple(2 * s for s in shape), dt)
        x = big[tuple(slice(None, None, 2 if rng.integers(2) else -2) for _ in shape)]
    return x, layout


def random_shape(rng, maxdim):
    nd = int(rng.integers(1, 5))
    return tuple(int(rng.integers(1, maxdim[nd] + 1)) for _ in range(nd))


def successive(x, steps, cval):
    """Successive scipy filters in float64, steps = [(f, w, axis, mode, origin)], and the
    error scale: the same with |x|, |w| and |cval|."""
    ref = x.astype(np.float64)
    mag = np.abs(ref)
    for f, w, axis, mode, origin in steps:
        ref = f(ref, w, axis=axis, mode=mode, cval=cval, origin=origin, output=np.float64)
        mag = f(mag, np.abs(w), axis=axis, mode=mode, cval=abs(cval), origin=origin,
                output=np.float64)
    return ref, max(mag.max(), 1e-30)


def gauss_weights(sigma, order, radius):
    """scipy's gaussian_filter1d weights (correlate form), from its impulse response."""
    d = np.zeros(2 * radius + 1)
    d[radius] = 1
    return ndi.gaussian_filter1d(d, sigma, order=order, mode="constant", radius=radius)[::-1]


def per_axis(v, n):
    return list(v) if isinstance(v, (list, tuple)) else [v] * n


def gaussian_expected(x, sigma, order, mode, cval, truncate, radius, axes):
    """scipy.ndimage.gaussian_filter in float64 (emulated with gaussian_filter1d, as scipy
    does it, where this scipy lacks axes=), and the error scale."""
    nd = x.ndim
    listed = list(range(nd)) if axes is None else (
        [axes] if np.ndim(axes) == 0 else list(axes))
    listed = [a % nd for a in listed]
    sig, ords, modes, rads = (per_axis(v, len(listed)) for v in (sigma, order, mode, radius))
    steps, calls = [], []
    for a, s, o, m, r in zip(listed, sig, ords, modes, rads):
        if s > 1e-15:
            rr = int(truncate * s + 0.5) if r is None else r
            steps.append((ndi.correlate1d, gauss_weights(s, o, rr), a, m, 0))
            calls.append((a, s, o, m, r))
    _, scale = successive(x, steps, cval)
    x64 = x.astype(np.float64)
    if axes is None or SCIPY_AXES:
        kw = {} if axes is None else dict(axes=axes)
        ref = ndi.gaussian_filter(x64, sigma, order=order, mode=mode, cval=cval,
                                  truncate=truncate, radius=radius, output=np.float64, **kw)
    else:
        ref = x64.copy()
        for a, s, o, m, r in calls:
            ref = ndi.gaussian_filter1d(ref, s, axis=a, order=o, mode=m, cval=cval,
                                        truncate=truncate, radius=r, output=np.float64)
    return ref, scale


def device_solvers():
    """The sepfilter solvers that run on the device numpy arrays use."""
    prefix = "cpu_" if ndfilt.device().startswith("cpu") else "cuda_"
    return [s for s in ndfilt.solvers()["sepfilter"] if s.startswith(prefix)]


class TestGaussian(unittest.TestCase):
    def test_float64_arithmetic(self):
        """float64 inputs through the separable filters and small N-D correlations are computed in
        float64, as scipy computes them: within 1e-13 of scipy on every mode (where a CPU solver
        ran them); the FFT (where FFTW's double library is built in) within 1e-12."""
        rng = np.random.default_rng(SEED + 12)
        for k in range(12):
            shape = tuple(int(v) for v in rng.integers(1, 24, size=int(rng.integers(1, 4))))
            x = rng.standard_normal(shape) * 10 ** float(rng.uniform(-3, 3))
            nd = len(shape)
            ax = int(rng.integers(nd))
            w = rng.standard_normal(int(rng.integers(1, 9)))
            wn = rng.standard_normal(tuple(int(v) for v in rng.integers(1, 5, size=nd)))
            for mode in ("reflect", "mirror", "nearest", "wrap", "constant"):
                cases = [("gaussian_filter", (x, float(rng.uniform(0.5, 4))),
                          dict(order=int(rng.integers(3)))),
                         ("gaussian_filter1d", (x, float(rng.uniform(0.5, 4)), ax),
                          dict(order=int(rng.integers(3)))),
                         ("uniform_filter", (x, int(rng.integers(1, 8))), {}),
                         ("sobel", (x, ax), {}), ("prewitt", (x, ax), {}), ("laplace", (x,), {}),
                         ("gaussian_laplace", (x, 1.5), {}),
                         ("gaussian_gradient_magnitude", (x, 1.2), {}),
                         ("correlate1d", (x, w, ax), dict(origin=int(rng.integers(-(len(w) // 2),
                                                                               (len(w) - 1) // 2 + 1)))),
                         ("convolve1d", (x, w, ax), {}),
                         ("correlate", (x, wn), {}), ("convolve", (x, wn), {})]
                for name, args, kw in cases:
                    got = getattr(ndfilt, name)(*args, mode=mode, cval=0.7, **kw)
                    if ndfilt.last_solver() and ndfilt.last_solver().startswith("cuda"):
                        self.skipTest("float64 on the GPU is still computed in float32")
                    ref = getattr(ndi, name)(*args, mode=mode, cval=0.7, **kw)
                    self.assertEqual(got.dtype, np.float64)
                    scale = max(np.abs(ref).max(), np.abs(x).max())  # the terms' size
                    err = np.abs(got - ref).max() / scale
                    self.assertLess(err, 1e-13, f"{name} {mode} {shape} {kw}: {err:.2e}")
                if "cpu_fft" in ndfilt.solvers().get("correlate", []):  # its rounding spreads
                    got = ndfilt.correlate(x, wn, mode=mode, cval=0.7, method="cpu_fft")
                    ref = ndi.correlate(x, wn, mode=mode, cval=0.7)
                    err = np.abs(got - ref).max() / max(np.abs(ref).max(), np.abs(x).max())
                    self.assertLess(err, 1e-12, f"cpu_fft {mode} {shape}: {err:.2e}")

    def test_wrap_wider_than_axis(self):
        """A kernel longer than its wrap axis is folded modulo the axis in float64: a wide
        derivative's weights of opposite signs landing on one sample cancel exactly, so float32
        data match scipy (which accumulates in double) to float32's rounding."""
        rng = np.random.default_rng(SEED + 11)
        x = rng.random((17, 11, 7, 14)).astype(np.float32)
        for f, kw in ((ndfilt.gaussian_filter1d, dict(sigma=9.5, axis=0, order=1)),
                      (ndfilt.gaussian_filter, dict(sigma=(9.5, 3, 6, 1), order=(1, 0, 2, 0))),
                      (ndfilt.correlate1d, dict(weights=rng.random(41) - 0.5, axis=2, origin=-7)),
                      (ndfilt.convolve1d, dict(weights=rng.random(30) - 0.5, axis=3, origin=5))):
            for mode in ("wrap", "grid-wrap"):
                got = f(x, mode=mode, **kw)
                ref = getattr(ndi, f.__name__)(x.astype(np.float64), mode=mode, **kw)
                err = np.abs(got - ref).max() / np.abs(ref).max()
                self.assertLess(err, 1e-6, f"{f.__name__} {mode} {kw}: {err:.2e}")
        # NaN and Inf reach what scipy's sums give them (Inf under weights of both signs: NaN),
        # through the unfolded kernel that the plan runs on such inputs
        y = x.copy()
        y[5, 3, 2, 7], y[11, 0, 6, 1] = np.inf, -np.inf
        for f, kw in ((ndfilt.gaussian_filter1d, dict(sigma=9.5, axis=0, order=1)),
                      (ndfilt.correlate1d, dict(weights=rng.random(41) - 0.5, axis=2))):
            got = f(y, mode="wrap", **kw)
            ref = getattr(ndi, f.__name__)(y.astype(np.float64), mode="wrap", **kw)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
            np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))
            fin = np.isfinite(ref)  # the unfolded twin sums in float32: 3e-5 here
            self.assertLess(np.abs(got[fin] - ref[fin]).max() / np.abs(ref[fin]).max(), 1e-4)

    def test_random(self):
        rng = np.random.default_rng(SEED + 10)
        for k in range(120):
            shape = random_shape(rng, {1: 60, 2: 18, 3: 8, 4: 5})
            nd = len(shape)
            dt = DTYPES[int(rng.integers(5))]
            x, layout = random_array(rng, shape, dt)
            axes = None
            if rng.integers(3) == 0:
                axes = [int(a) - (nd if rng.integers(2) else 0)
                        for a in rng.permutation(nd)[:int(rng.integers(1, nd + 1))]]
                axes = axes[0] if len(axes) == 1 and rng.integers(2) else tuple(axes)
            m = nd if axes is None else 1 if np.ndim(axes) == 0 else len(axes)

            def pick(f):  # a scalar, or one value per listed axis
                return f() if rng.integers(3) == 0 else [f() for _ in range(m)]
            sigma = pick(lambda: 0.0 if rng.integers(4) == 0 else float(rng.uniform(0.3, 3)))
            order = pick(lambda: int(rng.integers(3)))
            mode = pick(lambda: MODES[int(rng.integers(5))])
            truncate = [4.0, float(rng.uniform(0.5, 3)), 0.0][int(rng.integers(3))]
            radius = None if rng.integers(3) else pick(
                lambda: None if rng.integers(3) == 0 else int(rng.integers(0, 9)))
            cval = float(rng.uniform(-2, 2))
            odt = [dt, np.float32][int(rng.integers(2))]
            kw = dict(order=order, mode=mode, cval=cval, truncate=truncate, radius=radius,
                      axes=axes)
            what = (f"case {k}: gaussian_filter shape={shape} sigma={sigma} {kw} "
                    f"dtype={np.dtype(dt).name} layout={layout}",)
            ref, scale = gaussian_expected(x, sigma, order, mode, cval, truncate, radius, axes)
            got = ndfilt.gaussian_filter(x, sigma, output=None if odt == dt else odt, **kw)
            self.assertIsInstance(got, np.ndarray)
            self.assertEqual(got.dtype, np.dtype(odt))
            self.assertEqual(got.shape, x.shape)
            check(self, got, ref, scale, what + (np.dtype(odt).name,), TOL * scale)

    def test_random_1d(self):
        rng = np.random.default_rng(SEED + 11)
        for k in range(40):
            shape = random_shape(rng, {1: 60, 2: 18, 3: 8, 4: 5})
            x, layout = random_array(rng, shape, np.float32)
            axis = int(rng.integers(-len(shape), len(shape)))
            sigma = float(rng.uniform(0.2, 4))
            kw = dict(order=int(rng.integers(4)), mode=MODES[int(rng.integers(5))],
                      cval=float(rng.uniform(-2, 2)),
                      truncate=[4.0, float(rng.uniform(0.5, 3)), 0.0][int(rng.integers(3))],
                      radius=None if rng.integers(2) else int(rng.integers(0, 12)))
            r = int(kw["truncate"] * sigma + 0.5) if kw["radius"] is None else kw["radius"]
            _, scale = successive(x, [(ndi.correlate1d, gauss_weights(sigma, kw["order"], r),
                                       axis, kw["mode"], 0)], kw["cval"])
            ref = ndi.gaussian_filter1d(x.astype(np.float64), sigma, axis=axis,
                                        output=np.float64, **kw)
            got = ndfilt.gaussian_filter1d(x, sigma, axis=axis, **kw)
            check(self, got, ref, scale, (f"case {k}: gaussian_filter1d shape={shape} "
                                          f"sigma={sigma} axis={axis} {kw}", "float32"))

    def test_radius_zero_and_truncate_zero(self):
        rng = np.random.default_rng(SEED + 12)
        x = rng.uniform(-1, 1, (9, 11, 7))
        cases = [dict(sigma=0.8, truncate=0), dict(sigma=(0.8, 2.0, 0), truncate=0, order=2),
                 dict(sigma=(1.5, 2.0, 1.0), radius=(0, None, 3), order=(0, 1, 2)),
                 dict(sigma=(1.5, 2.0, 1.0), radius=0, order=1),
                 dict(sigma=(1.5, 2.0, 1.0), radius=(2, None, None), truncate=0),
                 dict(sigma=2.5, truncate=0.1), dict(sigma=1.0, truncate=-0.4)]
        for kw in cases:
            full = dict(dict(order=0, mode="reflect", cval=0.0, truncate=4.0, radius=None,
                             axes=None), **kw)
            ref, scale = gaussian_expected(x, **full)
            got = ndfilt.gaussian_filter(x, **kw)
            self.assertEqual(got.dtype, np.float64)
            check(self, got, ref, scale, (f"gaussian_filter {kw}", "float64"))
        # One tap of weight 1: the input itself.
        xf = x.astype(np.float32)
        np.testing.assert_array_equal(ndfilt.gaussian_filter(xf, 3.0, truncate=0.1), xf)
        np.testing.assert_array_equal(ndfilt.gaussian_filter(xf, 3.0, radius=0), xf)

    def test_axes_order_matters(self):
        # With constant padding by cval != 0 and kernels not summing to 1, scipy's result
        # depends on the order the axes are listed in.
        rng = np.random.default_rng(SEED + 13)
        x = rng.uniform(-1, 1, (6, 5, 8)).astype(np.float32)
        for axes in [(2, 0), (-1, 1, 0), (1, -3)]:
            kw = dict(order=1, mode="constant", cval=1.5, truncate=4.0, radius=None)
            sigma = [1.0 + 0.5 * i for i in range(len(axes))]
            ref, scale = gaussian_expected(x, sigma, axes=axes, **kw)
            srt = sorted(range(len(axes)), key=lambda i: axes[i] % 3)
            other, _ = gaussian_expected(x, [sigma[i] for i in srt], axes=[axes[i] for i in srt],
                                         **kw)
            self.assertGreater(np.abs(other - ref).max() / scale, 100 * TOL)
            got = ndfilt.gaussian_filter(x, sigma, axes=axes, **kw)
            check(self, got, ref, scale, (f"axes={axes}", "float32"))
            y = x.copy()  # in place through the permuted views
            ndfilt.gaussian_filter(y, sigma, axes=axes, output=y, **kw)
            check(self, y, ref, scale, (f"in place axes={axes}", "float32"))

    def test_copies_and_outputs(self):
        rng = np.random.default_rng(SEED + 14)
        x = random_input(rng, (5, 6), np.uint8)
        for kw in [dict(sigma=0), dict(sigma=1, axes=()), dict(sigma=(0, 1e-16))]:
            got = ndfilt.gaussian_filter(x, output=np.float32, **kw)
            self.assertEqual(got.dtype, np.float32)
            np.testing.assert_array_equal(got, x.astype(np.float32))
        np.testing.assert_array_equal(ndfilt.gaussian_filter1d(x, 0, axis=0), x)
        xf = rng.uniform(-1, 1, (7, 9)).astype(np.float32)
        ref, scale = gaussian_expected(xf, 1.2, 1, "mirror", 0.0, 4.0, None, None)
        out = np.full_like(xf, np.nan)
        self.assertIs(ndfilt.gaussian_filter(xf, 1.2, 1, output=out, mode="mirror"), out)
        check(self, out, ref, scale, ("output=", "float32"))
        strided = np.full((7, 18), np.nan, np.float32)[:, ::-2]
        ndfilt.gaussian_filter(xf, 1.2, 1, output=strided, mode="mirror")
        check(self, strided, ref, scale, ("strided output=", "float32"))
        y = xf.copy()
        ndfilt.gaussian_filter(y, 1.2, 1, output=y, mode="mirror")
        check(self, y, ref, scale, ("in place", "float32"))
        self.assertEqual(ndfilt.gaussian_filter(xf.astype(np.float64), 1).dtype, np.float64)
        self.assertEqual(ndfilt.gaussian_filter1d(xf.astype(np.float64), 1).dtype, np.float64)
        self.assertEqual(ndfilt.sepfilter(xf.astype(np.float64), [None, [1]]).dtype, np.float64)

    def test_methods_and_plan_cache(self):
        rng = np.random.default_rng(SEED + 15)
        x = rng.uniform(-1, 1, (8, 10)).astype(np.float32)
        base = dict(sigma=1.0, order=0, mode="reflect", cval=0.0, truncate=4.0, radius=None,
                    axes=None)
        # Same shape each time, so a cache key that missed a field would reuse a stale plan.
        variants = [{}, dict(sigma=2.0), dict(sigma=(2.0, 1.0)), dict(order=1),
                    dict(order=(0, 2)), dict(truncate=2.0), dict(truncate=0), dict(radius=2),
                    dict(radius=(2, 0)), dict(mode="constant"), dict(mode="constant", cval=1.0),
                    dict(mode=("wrap", "nearest")), dict(axes=(1,)), dict(axes=(0,))]
        for method in ["auto", "fir"] + [s for s in device_solvers() if s.endswith("_sep")]:
            for v in variants:
                kw = dict(base, **v)
                ref, scale = gaussian_expected(x, **kw)
                sigma = kw.pop("sigma")
                got = ndfilt.gaussian_filter(x, sigma, method=method, **kw)
                check(self, got, ref, scale, (f"method={method} {v}", "float32"))
        self.assertIn("cpu_sep", ndfilt.solvers()["sepfilter"])

    def test_kernel1d(self):
        import ctypes
        for sigma, order, radius in [(1.0, 0, 4), (0.5, 1, 3), (3.0, 2, 20), (2.0, 3, 0),
                                     (1.5, 4, 7)]:
            w = (ctypes.c_double * (2 * radius + 1))()
            self.assertEqual(ndfilt._lib.lib.ndf_gaussian_kernel1d(sigma, order, radius, w), 0)
            ref = gauss_weights(sigma, order, radius)
            np.testing.assert_allclose(np.array(w), ref, rtol=1e-12,
                                       atol=1e-15 * np.abs(ref).max())
        self.assertNotEqual(ndfilt._lib.lib.ndf_gaussian_kernel1d(-1.0, 0, 3, w), 0)

    def test_bad_arguments(self):
        x = np.ones((4, 5), np.float32)
        cases = [dict(sigma=-1), dict(sigma=(1, -0.5)), dict(sigma=float("nan")),
                 dict(sigma=float("inf")), dict(sigma="x"), dict(sigma=1, mode="bogus"),
                 dict(sigma=1, mode=("reflect", "bogus")), dict(sigma=1, mode=["reflect"]),
                 dict(sigma=(1, 2, 3)), dict(sigma=(1,)), dict(sigma=1, order=(0, 1, 2)),
                 dict(sigma=1, radius=(1, 2, 3)), dict(sigma=1, order=-1),
                 dict(sigma=1, order=1.5), dict(sigma=1, radius=-1), dict(sigma=1, radius=1.5),
                 dict(sigma=1, truncate=-2), dict(sigma=1, truncate=float("nan")),
                 dict(sigma=1, axes=(0, 0)), dict(sigma=1, axes=(1, -1)), dict(sigma=1, axes=2),
                 dict(sigma=1, axes=(0, 5)), dict(sigma=(1, 2), axes=(1,)),
                 dict(sigma=1, method="nope"), dict(sigma=1, method=3),
                 dict(sigma=1, output=np.ones((5, 4), np.float32)), dict(sigma=1, order=1.0),
                 dict(sigma=[1, 2], order=[1, 1.0])]
        # Valid calls first: the arguments they leave in the binding's cache must
        # not let the near misses above through.
        ndfilt.gaussian_filter(x, sigma=1, order=1)
        ndfilt.gaussian_filter(x, sigma=[1, 2], order=[1, 1])
        for kw in cases:
            with self.assertRaises(ValueError, msg=f"gaussian_filter {kw}"):
                ndfilt.gaussian_filter(x, **kw)
        cases = [dict(sigma=-1), dict(sigma=(1, 2)), dict(sigma=1, axis=2),
                 dict(sigma=1, axis=(0, 1)), dict(sigma=1, order=-1), dict(sigma=1, mode="x"),
                 dict(sigma=1, radius=(1, 2))]
        for kw in cases:
            with self.assertRaises(ValueError, msg=f"gaussian_filter1d {kw}"):
                ndfilt.gaussian_filter1d(x, **kw)


def rel_l2(got, ref):
    return float(np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(ref))


def true_gaussian(x, sigma, axis=None):
    """The untruncated Gaussian (to float64 precision) with mode nearest, the recursive
    methods' target."""
    x64 = x.astype(np.float64)
    if axis is None:
        return ndi.gaussian_filter(x64, sigma, mode="nearest", truncate=12)
    return ndi.gaussian_filter1d(x64, sigma, axis=axis, mode="nearest", truncate=12)


class TestGaussianIIR(unittest.TestCase):
    # Relative L2 error bounds against the true Gaussian on noise, about twice the largest
    # seen over 200 seeds of test_methods (iir_deriche 6.9e-4, iir_vyv 2.7e-2, 8.7e-3 and
    # 3.3e-3 for orders 3 to 5, iir_alvarez 0.26 for 3 steps and 0.16 for 5).
    BOUND = {("iir", 0): 1.5e-3, ("iir_deriche", 0): 1.5e-3, ("iir_vyv", 0): 6e-2,
             ("iir_vyv", 4): 2e-2, ("iir_vyv", 5): 7e-3, ("iir_alvarez", 0): 0.5,
             ("iir_alvarez", 5): 0.35}

    def test_methods(self):
        rng = np.random.default_rng(SEED + 16)
        prefix = "cpu_" if ndfilt.device().startswith("cpu") else "cuda_"
        bounds = dict(self.BOUND)
        for s in ndfilt.solvers().get("iir", []):  # the device's IIR solver: iir_deriche
            if s.startswith(prefix):
                bounds[s, 0] = bounds["iir_deriche", 0]
        self.assertIn("cpu_iir", ndfilt.solvers()["gaussian"])
        cases = [((200,), 2.0), ((30, 40), (2.5, 4.0)), ((10, 12, 14), 3.0),
                 ((9, 11, 13), (0.0, 2.0, 5.0))]
        for shape, sigma in cases:
            x, layout = random_array(rng, shape, np.float32)
            ref = true_gaussian(x, sigma)
            for (method, iir_order), bound in bounds.items():
                got = ndfilt.gaussian_filter(x, sigma, mode="nearest", method=method,
                                             iir_order=iir_order)
                self.assertEqual(got.dtype, np.float32)
                if method.endswith("_iir"):
                    self.assertEqual(ndfilt.last_solver(), method)
                err = rel_l2(got, ref)
                self.assertLess(err, bound, f"method={method} iir_order={iir_order} "
                                            f"shape={shape} sigma={sigma} layout={layout}")
        # gaussian_filter1d, and the axes a recursive method leaves alone copied.
        x = rng.uniform(-1, 1, (20, 30)).astype(np.float32)
        for (method, iir_order), bound in bounds.items():
            for axis in (0, -1):
                got = ndfilt.gaussian_filter1d(x, 3.0, axis=axis, mode="nearest", method=method,
                                               iir_order=iir_order)
                err = rel_l2(got, true_gaussian(x, 3.0, axis))
                self.assertLess(err, bound, f"gaussian_filter1d method={method} "
                                            f"iir_order={iir_order} axis={axis}")

    def test_iir_order(self):
        # Same shape and arguments but iir_order: a cache that missed it would reuse a plan.
        rng = np.random.default_rng(SEED + 17)
        x = rng.uniform(-1, 1, (40, 50)).astype(np.float32)
        ref = true_gaussian(x, 3.0)
        err = {}
        for method, orders in (("iir_vyv", (0, 3, 4, 5)), ("iir_alvarez", (0, 1, 3, 5))):
            for o in orders:
                got = ndfilt.gaussian_filter(x, 3.0, mode="nearest", method=method, iir_order=o)
                err[method, o] = rel_l2(got, ref)
        self.assertEqual(err["iir_vyv", 0], err["iir_vyv", 3])  # the default order
        self.assertEqual(err["iir_alvarez", 0], err["iir_alvarez", 3])
        self.assertLess(err["iir_vyv", 5], err["iir_vyv", 4])
        self.assertLess(err["iir_vyv", 5], err["iir_vyv", 3] / 3, err)  # seen: 9x at least
        self.assertLess(err["iir_alvarez", 5], err["iir_alvarez", 1] / 2, err)  # seen: 4.5x
        e3 = rel_l2(ndfilt.gaussian_filter1d(x, 3.0, axis=0, mode="nearest", method="iir_vyv"),
                    true_gaussian(x, 3.0, 0))
        e5 = rel_l2(ndfilt.gaussian_filter1d(x, 3.0, axis=0, mode="nearest", method="iir_vyv",
                                             iir_order=5), true_gaussian(x, 3.0, 0))
        self.assertLess(e5, e3 / 3, "gaussian_filter1d iir_order")

    def test_ignored_arguments_and_outputs(self):
        rng = np.random.default_rng(SEED + 18)
        x = rng.uniform(-1, 1, (12, 15)).astype(np.float32)
        base = ndfilt.gaussian_filter(x, 3.0, mode="nearest", method="iir")
        for kw in [dict(truncate=1.0), dict(truncate=0), dict(radius=2), dict(radius=(0, 5)),
                   dict(cval=3.0)]:
            got = ndfilt.gaussian_filter(x, 3.0, mode="nearest", method="iir", **kw)
            np.testing.assert_array_equal(got, base, f"iir ignores {kw}")
        # An axis with sigma 0 is left alone whatever its mode.
        got = ndfilt.gaussian_filter(x, (0, 3.0), mode=("reflect", "nearest"), method="iir")
        np.testing.assert_array_equal(got, ndfilt.gaussian_filter1d(x, 3.0, axis=1,
                                                                    mode="nearest",
                                                                    method="iir"))
        np.testing.assert_array_equal(
            ndfilt.gaussian_filter(x, 0, mode="reflect", method="iir"), x)
        ref = true_gaussian(x, 3.0)
        out = np.full(x.shape, np.nan)
        self.assertIs(ndfilt.gaussian_filter(x, 3.0, output=out, mode="nearest",
                                             method="iir"), out)
        self.assertLess(rel_l2(out, ref), self.BOUND["iir", 0], "output= float64")
        y = x.copy()
        ndfilt.gaussian_filter(y, 3.0, output=y, mode="nearest", method="iir")
        self.assertLess(rel_l2(y, ref), self.BOUND["iir", 0], "in place")
        self.assertLess(rel_l2(ndfilt.gaussian_filter(x.T, 3.0, mode="nearest", method="iir"),
                               ref.T), self.BOUND["iir", 0], "transposed")

    def test_auto(self):
        rng = np.random.default_rng(SEED + 19)
        x = rng.uniform(-1, 1, (12, 14, 16)).astype(np.float32)
        # Not nearest: never recursive, so scipy's result exactly.
        for mode in ["reflect", ("nearest", "nearest", "wrap")]:
            ref, scale = gaussian_expected(x, 6.0, 0, mode, 0.0, 4.0, None, None)
            got = ndfilt.gaussian_filter(x, 6.0, mode=mode)
            self.assertFalse(ndfilt.last_solver().endswith("_iir"), mode)
            check(self, got, ref, scale, (f"auto mode={mode}", "float32"))
        # Nearest, sigma >= 2, no tolerance: scipy's result, never the recursive filter.
        for sigma in (2.0, 6.0, 20.0):
            ref, scale = gaussian_expected(x, sigma, 0, "nearest", 0.0, 4.0, None, None)
            got = ndfilt.gaussian_filter(x, sigma, mode="nearest")
            self.assertFalse(ndfilt.last_solver().endswith("_iir"), sigma)
            check(self, got, ref, scale, (f"auto nearest sigma={sigma}", "float32"))
        # With a tolerance of 1e-3: fir or iir_deriche, both within that of scipy's result.
        for sigma in (2.0, 6.0, 20.0):
            ref = ndi.gaussian_filter(x.astype(np.float64), sigma, mode="nearest")
            got = ndfilt.gaussian_filter(x, sigma, mode="nearest", tolerance=1e-3)
            self.assertLess(rel_l2(got, ref), 1e-3,
                            f"auto nearest sigma={sigma} ({ndfilt.last_solver()})")
        # A derivative, sigma < 2, or iir_order given: never recursive (as documented).
        for kw in [dict(sigma=6.0, order=(0, 1, 0)), dict(sigma=(6.0, 1.5, 6.0)),
                   dict(sigma=20.0, iir_order=5)]:
            ndfilt.gaussian_filter(x, mode="nearest", tolerance=1e-3, **kw)
            self.assertFalse(ndfilt.last_solver().endswith("_iir"), kw)
        with self.assertRaises(ValueError):
            ndfilt.gaussian_filter(x, 2.0, tolerance=-1)

    def test_bad_arguments(self):
        x = np.ones((6, 7), np.float32)
        for method in ["iir", "iir_deriche", "iir_vyv", "iir_alvarez"]:
            for mode in ["reflect", "constant", "wrap", ("nearest", "mirror")]:
                with self.assertRaises(ValueError, msg=f"{method} mode={mode}") as cm:
                    ndfilt.gaussian_filter(x, 2.0, mode=mode, method=method)
                self.assertIn("nearest", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                ndfilt.gaussian_filter1d(x, 2.0, method=method)  # scipy's default mode
            self.assertIn("nearest", str(cm.exception))
        ok = dict(sigma=2.0, mode="nearest")
        ndfilt.gaussian_filter(x, method="iir_vyv", iir_order=3, **ok)  # cached arguments
        cases = [dict(method="iir", order=1), dict(method="iir", order=(0, 2)),
                 dict(method="iir_vyv", iir_order=2), dict(method="iir_vyv", iir_order=6),
                 dict(method="iir_alvarez", iir_order=6), dict(method="iir_deriche", iir_order=3),
                 dict(method="iir_vyv", iir_order=-1), dict(method="iir_vyv", iir_order=3.0),
                 dict(method="iir_vyv", iir_order="3"), dict(method="iir_vyv", iir_order=None),
                 dict(method="iir_vyv", iir_order=2**31), dict(method="fir", iir_order=3),
                 dict(method="iir_bogus"), dict(method="IIR")]
        for kw in cases:
            with self.assertRaises(ValueError, msg=f"gaussian_filter {kw}"):
                ndfilt.gaussian_filter(x, **dict(ok, **kw))
        with self.assertRaises(ValueError) as cm:
            ndfilt.gaussian_filter(x, method="iir_bogus", **ok)
        self.assertIn("iir_deriche", str(cm.exception))  # C's list of the methods
        with self.assertRaises(ValueError):
            ndfilt.gaussian_filter1d(x, 2.0, mode="nearest", method="iir_vyv", iir_order=7)


class TestSepfilter(unittest.TestCase):
    def test_random(self):
        rng = np.random.default_rng(SEED + 20)
        for k in range(120):
            shape = random_shape(rng, {1: 60, 2: 18, 3: 8, 4: 5})
            nd = len(shape)
            dt = DTYPES[int(rng.integers(5))]
            x, layout = random_array(rng, shape, dt)
            ws, origins = [], []
            for d in range(nd):
                if rng.integers(4) == 0:
                    ws.append(None)
                    origins.append(int(rng.integers(-5, 6)))  # ignored
                    continue
                n = int(rng.integers(shape[d] + 1, 2 * shape[d] + 6)) if rng.integers(4) == 0 \
                    else int(rng.integers(1, 12))
                w = rng.uniform(-1, 1, n)
                ws.append(w if rng.integers(2) else list(w))
                origins.append(int(rng.integers(-(n // 2), (n - 1) // 2 + 1)))
            origin = origins if rng.integers(3) else 0
            mode = MODES[int(rng.integers(5))] if rng.integers(3) == 0 else \
                [MODES[int(rng.integers(5))] for _ in range(nd)]
            cval = float(rng.uniform(-2, 2))
            conv = bool(rng.integers(2))
            f = ndi.convolve1d if conv else ndi.correlate1d
            steps = [(f, np.asarray(w, np.float64), d, per_axis(mode, nd)[d],
                      per_axis(origin, nd)[d]) for d, w in enumerate(ws) if w is not None]
            ref, scale = successive(x, steps, cval)
            odt = [dt, np.float32][int(rng.integers(2))]
            got = ndfilt.sepfilter(x, ws, output=None if odt == dt else odt, mode=mode,
                                   cval=cval, origin=origin, convolve=conv)
            self.assertIsInstance(got, np.ndarray)
            self.assertEqual(got.dtype, np.dtype(odt))
            self.assertEqual(got.shape, x.shape)
            lens = [None if w is None else len(w) for w in ws]
            what = (f"case {k}: sepfilter shape={shape} kernel lengths={lens} mode={mode} "
                    f"origin={origin} convolve={conv} dtype={np.dtype(dt).name} "
                    f"layout={layout}", np.dtype(odt).name)
            check(self, got, ref, scale, what, TOL * scale)

    def test_cache_methods_outputs(self):
        rng = np.random.default_rng(SEED + 21)
        x = rng.uniform(-1, 1, (6, 7, 9)).astype(np.float32)
        a, b = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 5)
        variants = [dict(weights=[a, None, b]), dict(weights=[b, None, a]),
                    dict(weights=[None, a, b]), dict(weights=[a, b, None]),
                    dict(weights=[a, None, b], convolve=True),
                    dict(weights=[a, None, b], origin=(1, 0, -2)),
                    dict(weights=[a, None, b], mode="constant", cval=0.5),
                    dict(weights=[a, None, b], mode=("wrap", "reflect", "mirror")),
                    dict(weights=[None, None, b]), dict(weights=[None, None, None])]
        methods = ["auto"] + device_solvers()
        for method in methods:
            for v in variants:
                kw = dict(dict(mode="reflect", cval=0.0, origin=0, convolve=False), **v)
                f = ndi.convolve1d if kw["convolve"] else ndi.correlate1d
                filtered = [d for d, w in enumerate(kw["weights"]) if w is not None]
                if method.endswith(("_corr1d", "_direct")) and len(filtered) != 1:
                    continue
                if method.endswith("_box"):  # box weights only: TestDerivatives.test_uniform
                    continue
                steps = [(f, kw["weights"][d], d, per_axis(kw["mode"], 3)[d],
                          per_axis(kw["origin"], 3)[d]) for d in filtered]
                ref, scale = successive(x, steps, kw["cval"])
                got = ndfilt.sepfilter(x, method=method, **kw)
                check(self, got, ref, scale, (f"method={method} {v}", "float32"))
        steps = [(ndi.correlate1d, a, 0, "wrap", 1), (ndi.correlate1d, b, 2, "wrap", 1)]
        ref, scale = successive(x, steps, 0.0)
        out = np.full_like(x, np.nan)
        self.assertIs(ndfilt.sepfilter(x, [a, None, b], output=out, mode="wrap", origin=1), out)
        check(self, out, ref, scale, ("output=", "float32"))
        y = x.copy()
        ndfilt.sepfilter(y, [a, None, b], output=y, mode="wrap", origin=1)
        check(self, y, ref, scale, ("in place", "float32"))
        got = ndfilt.sepfilter(x[::-1, :, ::2], [a, None, b], mode="wrap", origin=1,
                               output=np.float64)
        ref, scale = successive(x[::-1, :, ::2], steps, 0.0)
        self.assertEqual(got.dtype, np.float64)
        check(self, got, ref, scale, ("strided input", "float64"))

    def test_bad_arguments(self):
        x = np.ones((4, 5), np.float32)
        cases = [dict(weights=[[1, 2, 1]]), dict(weights=[[1], [1], [1]]),
                 dict(weights=[[], None]), dict(weights=[[[1, 2]], None]), dict(weights=5),
                 dict(weights=[[1, np.inf], None]), dict(weights=[[1, 2, 1], None], mode="x"),
                 dict(weights=[[1, 2, 1], None], mode=("reflect",)),
                 dict(weights=[[1, 2, 1], None], mode=("reflect", "x")),
                 dict(weights=[[1, 2, 1], None], origin=(0, 0, 0)),
                 dict(weights=[[1, 2, 1], None], origin=2),
                 dict(weights=[None, [1, 2]], origin=(0, -2)),
                 dict(weights=[[1, 2, 1], None], origin=0.5),
                 dict(weights=[[1, 2, 1], None], method="nope"),
                 dict(weights=[[1, 2, 1], None], output=np.ones((5, 4), np.float32))]
        for kw in cases:
            with self.assertRaises(ValueError, msg=f"sepfilter {kw}"):
                ndfilt.sepfilter(x, **kw)


def _cuda_available(mod):
    try:
        if mod == "cupy":
            import cupy
            return cupy.cuda.runtime.getDeviceCount() > 0
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


class TestCorrelate(unittest.TestCase):
    def test_random(self):
        rng = np.random.default_rng(SEED + 30)
        prefix = "cpu_" if ndfilt.device().startswith("cpu") else "cuda_"
        methods = ["auto", "direct"] + (
            ["fft"] if prefix + "fft" in ndfilt.solvers().get("correlate", []) else [])
        for k in range(90):
            shape = random_shape(rng, {1: 60, 2: 16, 3: 7, 4: 4})
            nd = len(shape)
            dt = DTYPES[int(rng.integers(5))]
            x, layout = random_array(rng, shape, dt)
            kshape = tuple(int(rng.integers(n + 1, 2 * n + 3)) if rng.integers(5) == 0
                           else int(rng.integers(1, 6 if nd >= 3 else 10)) for n in shape)
            w = rng.uniform(-1, 1, kshape)
            origin = [int(rng.integers(-(n // 2), (n - 1) // 2 + 1)) for n in kshape]
            if rng.integers(3) == 0:
                origin = origin[0] if len(set(kshape)) == 1 else 0
            mode = MODES[int(rng.integers(5))]
            cval = float(rng.uniform(-2, 2))
            conv = bool(rng.integers(2))
            method = methods[int(rng.integers(len(methods)))]
            f, g = (ndi.convolve, ndfilt.convolve) if conv else (ndi.correlate, ndfilt.correlate)
            ref = scipy_nd(f, x, w, mode, cval, origin)
            scale = max(float(np.abs(scipy_nd(f, np.abs(x), np.abs(w), mode, abs(cval),
                                              origin)).max()), 1e-300)
            odt = [dt, np.float32][int(rng.integers(2))]
            got = g(x, w if rng.integers(2) else w.tolist(), output=None if odt == dt else odt,
                    mode=mode if rng.integers(2) else [mode] * nd, cval=cval, origin=origin,
                    method=method)
            self.assertEqual(got.dtype, np.dtype(odt))
            what = (f"case {k}: {'convolve' if conv else 'correlate'} shape={shape} "
                    f"kernel={kshape} mode={mode} origin={origin} method={method} "
                    f"dtype={np.dtype(dt).name} layout={layout}", np.dtype(odt).name)
            tol = 1e-4 if method == "fft" else TOL
            err = np.abs(np.asarray(got, np.float64) - ref) / scale
            if np.dtype(odt).kind == "f":
                self.assertLessEqual(float(err.max()), tol, what[0])
            else:
                check(self, got, ref, scale, what, tol * scale)

    def test_bad_arguments(self):
        x = np.ones((4, 5), np.float32)
        for kw in [dict(weights=np.ones(3)), dict(weights=np.ones((3, 3, 3))),
                   dict(weights=np.ones((0, 3))), dict(weights=[[1, float("nan")]]),
                   dict(weights=np.ones((3, 3)), origin=2), dict(weights=np.ones((3, 3)),
                                                                 mode="bogus"),
                   dict(weights=np.ones((3, 3)), method="nope"),
                   dict(weights=np.ones((3, 3)), origin=(0, 0, 0))]:
            with self.assertRaises(ValueError, msg=f"correlate {kw}"):
                ndfilt.correlate(x, **kw)

    def test_bank(self):
        rng = np.random.default_rng(SEED + 31)
        for k in range(12):
            shape = random_shape(rng, {1: 60, 2: 16, 3: 7, 4: 4})
            x, layout = random_array(rng, shape, np.float32)
            nf = int(rng.integers(1, 5))
            kshape = tuple(int(rng.integers(1, 6)) for _ in shape)
            w = rng.uniform(-1, 1, (nf,) + kshape)
            mode, cval, conv = MODES[k % 5], float(rng.uniform(-1, 1)), bool(k % 2)
            f, g = (ndi.convolve, ndfilt.convolve_bank) if conv else \
                (ndi.correlate, ndfilt.correlate_bank)
            out = np.full((nf,) + shape, np.nan, np.float32) if k % 3 == 0 else None
            got = g(x, w, output=out, mode=mode, cval=cval)
            self.assertEqual(got.shape, (nf,) + shape)
            if out is not None:
                self.assertIs(got, out)
            for i in range(nf):
                ref = f(x.astype(np.float64), w[i], mode=mode, cval=cval)
                scale = max(float(np.abs(f(np.abs(x.astype(np.float64)), np.abs(w[i]),
                                           mode=mode, cval=abs(cval))).max()), 1e-300)
                err = float(np.abs(got[i] - ref).max()) / scale
                self.assertLessEqual(err, TOL, f"bank case {k} kernel {i} shape={shape} "
                                               f"kernel={kshape} mode={mode} layout={layout}")
        with self.assertRaises(ValueError):
            ndfilt.correlate_bank(np.ones((4, 5), np.float32), np.ones((3, 3)))  # no F axis
        with self.assertRaises(ValueError):
            ndfilt.correlate_bank(np.ones((4, 5), np.float32), np.ones((2, 3, 3)),
                                  output=np.empty((3, 4, 5), np.float32))


# ----------------------------------------------------------------- ks

SQRT2 = math.sqrt(2.0)
KS_TOL = 1e-6  # max |ndfilt - reference| / max |reference|: the CPU solver computes in double


def ks_tol(solver):
    """The bound for a ks solver: cpu_ks computes in double, the CUDA solvers in float32."""
    return KS_TOL if solver == "cpu_ks" else 1e-5


def ks_k1(d, s, n_sigma, normalize):
    """k(d, s) of ndf.h, straight from the definition: the pixel-integrated Gaussian, 0 past
    r = ceil(n_sigma s), the identity for s = 0, divided by erf((r + 1/2) / (sqrt(2) s)) when
    normalize."""
    if s == 0:
        return 1.0 if d == 0 else 0.0
    r = math.ceil(n_sigma * s)
    if abs(d) > r:
        return 0.0
    v = (math.erf((d + 0.5) / (SQRT2 * s)) - math.erf((d - 0.5) / (SQRT2 * s))) / 2
    return v / math.erf((r + 0.5) / (SQRT2 * s)) if normalize else v


def ks_reference(x, maps, index, n_sigma, output, normalize):
    """ks in float64 by its definition: the full weight matrix W[p, q] = prod_a k(p_a - q_a,
    s_a(q or p)) over output pixels p and input pixels q, times the input."""
    n, nd = x.shape, x.ndim
    S = [np.asarray(m, np.float64) for m in (maps * nd if len(maps) == 1 else maps)]
    R = max(math.ceil(n_sigma * float(v)) for m in S for v in m.flat) if output == "full" else 0
    m = tuple(k + 2 * R for k in n)
    P = np.indices(m).reshape(nd, -1)  # output pixels, input coordinates + R
    Q = np.indices(n).reshape(nd, -1)
    if index == "input":
        at = tuple(Q)
    else:  # outside the input: the nearest input pixel's sigma
        at = tuple(np.clip(P[a] - R, 0, n[a] - 1) for a in range(nd))
    W = np.ones((P.shape[1], Q.shape[1]))
    for a in range(nd):
        u, inv = np.unique(S[a][at], return_inverse=True)
        inv = inv.reshape(-1)
        d = P[a][:, None] - (Q[a][None, :] + R)
        dmax = int(np.abs(d).max())
        table = np.zeros((len(u), 2 * dmax + 1))
        for i, s in enumerate(u):
            r = min(math.ceil(n_sigma * s), dmax)
            for j in range(-r, r + 1):
                table[i, j + dmax] = ks_k1(j, float(s), n_sigma, normalize)
        rows = inv[None, :] if index == "input" else inv[:, None]
        W *= table[rows, d + dmax]
    return (W @ x.astype(np.float64).ravel()).reshape(m)


def ks_maps(rng, shape, count):
    """count random sigma maps, U[0, 2) with about a quarter of the pixels 0."""
    out = []
    for _ in range(count):
        s = rng.uniform(0, 2, shape)
        s[rng.uniform(size=shape) < 0.25] = 0
        out.append(s)
    return out


class TestKs(unittest.TestCase):
    """ks against its definition. The exact checks use cpu_ks (double precision, bitwise
    repeatable) wherever numpy arrays run; test_auto checks the solver 'auto' picks."""

    @staticmethod
    def ks(*args, **kw):
        kw.setdefault("method", "cpu_ks")
        return ndfilt.ks(*args, **kw)

    def assert_close(self, got, ref, what, tol=KS_TOL):
        self.assertEqual(got.shape, ref.shape, what)
        scale = max(float(np.abs(ref).max()), 1e-300)
        err = np.abs(np.asarray(got, np.float64) - ref) / scale
        i = np.unravel_index(np.argmax(np.where(np.isnan(err), np.inf, err)), err.shape)
        self.assertTrue(np.all(err <= tol), f"{what}: worst element {i}: got {got[i]!r}, "
                                            f"reference {ref[i]!r}, error {err[i]:.3g} > {tol}")

    def test_against_reference(self):
        rng = np.random.default_rng(SEED + 40)
        for shape in [(9, 11), (5, 6, 7), (13,)]:
            x = rng.uniform(-1, 1, shape)
            iso = ks_maps(rng, shape, 1)
            aniso = ks_maps(rng, shape, len(shape))
            for index in ["input", "output"]:
                for output in ["same", "full"]:
                    for normalize in [False, True]:
                        for maps in [iso, aniso]:
                            for n_sigma in [3.0, 2.0]:
                                what = (f"ks shape={shape} index={index} output={output} "
                                        f"normalize={normalize} maps={len(maps)} "
                                        f"n_sigma={n_sigma}")
                                sigma = maps[0] if maps is iso else tuple(maps)
                                got = self.ks(x, sigma, index=index, n_sigma=n_sigma,
                                                output=output, normalize=normalize)
                                self.assertIsInstance(got, np.ndarray)
                                self.assertEqual(got.dtype, np.float64)
                                ref = ks_reference(x, maps, index, n_sigma, output, normalize)
                                self.assert_close(got, ref, what)
        self.assertEqual(ndfilt.last_solver(), "cpu_ks")

    def test_dtypes_and_layouts(self):
        rng = np.random.default_rng(SEED + 41)
        shape = (8, 10)
        base = rng.uniform(-1, 1, shape)
        [s64] = ks_maps(rng, shape, 1)
        ref = ks_reference(base, [s64], "input", 3.0, "same", False)
        # Image views with strides: transposed, reversed, every other element.
        views = [np.ascontiguousarray(base.T).T, base[::-1, ::-1].copy()[::-1, ::-1]]
        big = np.zeros((16, 20))
        big[::2, ::-2] = base
        views.append(big[::2, ::-2])
        for v in views:
            self.assert_close(self.ks(v, s64), ref, f"strides {v.strides}")
        # A map with strides, and float32 maps (converted exactly).
        sview = np.ascontiguousarray(s64[::-1])[::-1]
        self.assert_close(self.ks(base, sview), ref, "map with strides")
        # Nested lists: an image, one map of its shape, or one per axis.
        self.assert_close(self.ks(base.tolist(), s64.tolist()), ref, "nested lists")
        self.assert_close(self.ks(base, [s64.tolist(), s64]), ref, "a list of maps")
        s32 = s64.astype(np.float32)
        ref32 = ks_reference(base, [s32], "output", 2.0, "full", True)
        self.assert_close(self.ks(base, s32, index="output", n_sigma=2, output="full",
                                    normalize=True), ref32, "float32 map")
        # Maps of every dtype, the unsupported ones as float64: the same result bitwise.
        ints = rng.integers(0, 3, shape)
        want = self.ks(base, ints.astype(np.float64))
        for dt in [np.uint8, np.uint16, np.int16, np.float32, np.int32, np.int64, np.float16]:
            got = self.ks(base, ints.astype(dt))
            np.testing.assert_array_equal(got, want, err_msg=f"map dtype {np.dtype(dt)}")
        got = self.ks(base, ints.astype(">f8"))  # big-endian
        np.testing.assert_array_equal(got, want, err_msg="big-endian map")
        self.assert_close(want, ks_reference(base, [ints], "input", 3.0, "same", False),
                          "integer map")
        # Image dtypes: float32 within its rounding, integers rounded (within 1).
        got = self.ks(base.astype(np.float32), s64)
        self.assertEqual(got.dtype, np.float32)
        self.assert_close(got, ks_reference(base.astype(np.float32), [s64], "input", 3.0,
                                            "same", False), "float32 image")
        for dt in [np.uint8, np.uint16, np.int16]:
            info = np.iinfo(dt)
            xi = rng.integers(info.min, int(info.max) + 1, shape).astype(dt)
            got = self.ks(xi, s64, output="full")
            self.assertEqual(got.dtype, np.dtype(dt))
            r = np.clip(np.rint(ks_reference(xi, [s64], "input", 3.0, "full", False)),
                        info.min, info.max)
            self.assertEqual(got.shape, r.shape)
            self.assertLessEqual(float(np.abs(got.astype(np.float64) - r).max()), 1.0,
                                 f"image dtype {np.dtype(dt)}")

    def test_new_maps_each_call(self):
        # the plan is made once for the maps' shapes, dtypes and places; each call's maps are
        # its own (a dose engine's new spread per beam)
        rng = np.random.default_rng(SEED + 47)
        x = rng.uniform(-1, 1, (10, 12))
        for method in ["cpu_ks", "auto"]:
            for k in range(3):
                [s] = ks_maps(rng, x.shape, 1)
                got = ndfilt.ks(x, s, method=method)
                ref = ks_reference(x, [s], "input", 3.0, "same", False)
                self.assert_close(got, ref, f"call {k} ({ndfilt.last_solver()})",
                                  ks_tol(ndfilt.last_solver()))

    def test_r_max(self):
        rng = np.random.default_rng(SEED + 48)
        x = rng.uniform(-1, 1, (9, 8))
        [s] = ks_maps(rng, x.shape, 1)
        R = int(np.ceil(3 * s.max()))
        ref = ks_reference(x, [s], "output", 3.0, "full", False)
        got = self.ks(x, s, index="output", output="full", r_max=R)
        self.assert_close(got, ref, "full with r_max the maps' radius")
        wide = self.ks(x, s, index="output", output="full", r_max=R + 2)
        self.assertEqual(wide.shape, (9 + 2 * R + 4, 8 + 2 * R + 4))
        self.assert_close(wide[2:-2, 2:-2], ref, "full with a wider margin")
        same = self.ks(x, s, r_max=R)
        self.assert_close(same, ks_reference(x, [s], "input", 3.0, "same", False), "same, r_max")
        with self.assertRaisesRegex(ValueError, "r_max"):
            self.ks(x, s, r_max=max(R - 1, 1) if R > 1 else 0.5)
        for bad in [-1, 1.5, True, "3"]:
            with self.assertRaisesRegex(ValueError, "r_max"):
                self.ks(x, s, r_max=bad)

    def test_bad_map_values_name_the_pixel(self):
        x = np.ones((6, 7), np.float32)
        for method in ["cpu_ks", "auto"]:
            for v in [-1.0, np.nan, np.inf]:
                s = np.full((6, 7), 0.5)
                s[2, 3] = v
                with self.assertRaisesRegex(ValueError, "element 17"):
                    ndfilt.ks(x, s, method=method)
                # the same plan then runs on good maps
                s[2, 3] = 0.5
                ndfilt.ks(x, s, method=method)

    def test_zero_sigma_is_identity(self):
        rng = np.random.default_rng(SEED + 42)
        for dt in DTYPES:
            x = random_input(rng, (6, 7, 3), dt)
            zero = np.zeros(x.shape)
            for index in ["input", "output"]:
                for output in ["same", "full"]:
                    for sigma in [zero, (zero,) * 3, zero.astype(np.uint8)]:
                        got = self.ks(x, sigma, index=index, output=output, normalize=True)
                        self.assertEqual(got.dtype, x.dtype)
                        np.testing.assert_array_equal(
                            got, x, err_msg=f"sigma 0 dtype={np.dtype(dt)} index={index} "
                                            f"output={output}")

    def test_delta_gives_kernel(self):
        shape, c = (15, 17), (7, 8)
        x = np.zeros(shape)
        x[c] = 1
        for s in [(1.3, 1.3), (0.7, 1.9), (0.0, 0.45)]:
            for n_sigma in [3.0, 2.0]:
                R = max(math.ceil(n_sigma * v) for v in s)
                for index in ["input", "output"]:
                    for output in ["same", "full"]:
                        for normalize in [False, True]:
                            off = R if output == "full" else 0
                            k = [np.array([ks_k1(i - (c[a] + off), s[a], n_sigma, normalize)
                                           for i in range(shape[a] + 2 * off)])
                                 for a in range(2)]
                            want = np.multiply.outer(k[0], k[1])
                            maps = tuple(np.full(shape, v) for v in s)
                            sigma = maps[0] if s[0] == s[1] else maps
                            got = self.ks(x, sigma, index=index, n_sigma=n_sigma,
                                            output=output, normalize=normalize)
                            what = (f"delta s={s} n_sigma={n_sigma} index={index} "
                                    f"output={output} normalize={normalize}")
                            self.assertEqual(got.shape, want.shape, what)
                            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12,
                                                       err_msg=what)
                            if normalize and output == "full":
                                self.assertAlmostEqual(float(got.sum()), 1.0, places=12)

    def test_bad_arguments(self):
        rng = np.random.default_rng(SEED + 43)
        x = rng.uniform(-1, 1, (9, 11))
        good = rng.uniform(0, 2, x.shape)
        neg, nan, inf = good.copy(), good.copy(), good.copy()
        neg[4, 5], nan[2, 3], inf[8, 10] = -0.5, np.nan, np.inf
        cases = [
            ("negative sigma", dict(sigma=neg)),
            ("NaN sigma", dict(sigma=nan)),
            ("infinite sigma", dict(sigma=inf)),
            ("negative sigma on one axis", dict(sigma=(good, neg))),
            ("NaN float32 sigma", dict(sigma=nan.astype(np.float32))),
            ("negative int sigma", dict(sigma=np.full(x.shape, -1, np.int32))),
            ("map shape", dict(sigma=np.ones((9, 10)))),
            ("map shape transposed", dict(sigma=np.ones((11, 9)))),
            ("map with an extra axis", dict(sigma=np.ones((1, 9, 11)))),
            ("scalar map", dict(sigma=1.0)),
            ("one map's shape", dict(sigma=(good, np.ones((9, 10))))),
            ("three maps for two axes", dict(sigma=(good, good, good))),
            ("no maps", dict(sigma=[])),
            ("complex map", dict(sigma=good.astype(np.complex128))),
            ("index", dict(sigma=good, index="inputs")),
            ("index number", dict(sigma=good, index=0)),
            ("output", dict(sigma=good, output="valid")),
            ("output None", dict(sigma=good, output=None)),
            ("n_sigma 0", dict(sigma=good, n_sigma=0)),
            ("n_sigma < 0", dict(sigma=good, n_sigma=-1.0)),
            ("n_sigma NaN", dict(sigma=good, n_sigma=float("nan"))),
            ("n_sigma inf", dict(sigma=good, n_sigma=float("inf"))),
            ("n_sigma string", dict(sigma=good, n_sigma="3")),
            ("unknown method", dict(sigma=good, method="nope")),
            ("another operation's solver", dict(sigma=good, method="cpu_sep")),
        ]
        for what, kw in cases:
            with self.assertRaises(ValueError, msg=f"ks {what}"):
                ndfilt.ks(x, **kw)
        for kw, word in [(dict(index="inputs"), "inputs"), (dict(output="valid"), "valid")]:
            with self.assertRaisesRegex(ValueError, word):
                ndfilt.ks(x, good, **kw)
        with self.assertRaisesRegex(ValueError, "sigma"):
            ndfilt.ks(x, neg)
        with self.assertRaises(ValueError):  # 5 axes
            ndfilt.ks(np.ones((2,) * 5), np.ones((2,) * 5))
        with self.assertRaises(TypeError):  # image dtype
            ndfilt.ks(x.astype(np.int32), good)
        # Still working, and right.
        for output in ["same", "full"]:
            got = self.ks(x, good, output=output, index="output")
            self.assert_close(got, ks_reference(x, [good], "output", 3.0, output, False),
                              f"after the errors ({output})")

    def test_deterministic(self):
        rng = np.random.default_rng(SEED + 44)
        x = rng.uniform(-1, 1, (24, 31))
        maps = ks_maps(rng, x.shape, 2)
        for index in ["input", "output"]:
            for output in ["same", "full"]:
                kw = dict(index=index, output=output, normalize=True)
                a = self.ks(x, maps[0], deterministic=True, **kw)
                b = self.ks(x, maps[0].copy(), deterministic=True, **kw)
                self.assertEqual(a.tobytes(), b.tobytes(), f"index={index} output={output}")
                c = self.ks(x, tuple(maps), deterministic=True, **kw)
                self.ks(x, maps[0], **kw)  # another plan in between
                d = self.ks(x, tuple(maps), deterministic=True, **kw)
                self.assertEqual(c.tobytes(), d.tobytes(), f"anisotropic index={index} "
                                                           f"output={output}")
                e = self.ks(x, maps[0], **kw)
                self.assert_close(e, a.astype(np.float64), "deterministic vs not", 1e-12)

    def test_auto(self):
        """method 'auto' on the device numpy arrays use: a GPU's solver where one applies
        (float32 there: within 1e-5, the C tests' bound), else cpu_ks (4 axes on a GPU)."""
        rng = np.random.default_rng(SEED + 47)
        for shape in [(9, 11), (5, 6, 7), (3, 4, 2, 3)]:
            x = rng.uniform(-1, 1, shape)
            maps = ks_maps(rng, shape, len(shape))
            for index in ["input", "output"]:
                for output in ["same", "full"]:
                    for sigma, ms in [(maps[0], maps[:1]), (tuple(maps), maps)]:
                        what = f"auto ks shape={shape} index={index} output={output}"
                        got = ndfilt.ks(x, sigma, index=index, output=output)
                        solver = ndfilt.last_solver()
                        self.assertIn(solver, ndfilt.solvers()["ks"], what)
                        ref = ks_reference(x, ms, index, 3.0, output, False)
                        self.assert_close(got, ref, f"{what} ({solver})", ks_tol(solver))
                        a = ndfilt.ks(x, sigma, index=index, output=output, deterministic=True)
                        b = ndfilt.ks(x, sigma, index=index, output=output, deterministic=True)
                        self.assertEqual(a.tobytes(), b.tobytes(),
                                         f"{what} deterministic ({ndfilt.last_solver()})")
        if ndfilt.device().startswith("cpu"):
            self.assertEqual(ndfilt.last_solver(), "cpu_ks")


def classes(a):
    """Per element: 0 finite, 1 NaN, 2 +Inf, 3 -Inf."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isnan(a), 1, np.where(np.isposinf(a), 2, np.where(np.isneginf(a), 3, 0)))


class TestNonFinite(unittest.TestCase):
    """NaN and Inf reach the outputs scipy's would under method auto (whichever solver auto
    picks, the FFT and the recursive filter included) and every exact solver named."""

    def same_footprint(self, got, ref, what):
        g, r = classes(got), classes(ref)
        bad = np.argwhere(g != r)
        self.assertEqual(len(bad), 0, f"{what}: {len(bad)} outputs differ in NaN/Inf, first at "
                         f"{tuple(bad[0]) if len(bad) else None}: got {np.ravel(got)[0:0]}"
                         f"{np.asarray(got)[tuple(bad[0])] if len(bad) else ''}, scipy "
                         f"{np.asarray(ref)[tuple(bad[0])] if len(bad) else ''}")
        fin = r == 0
        if fin.any():
            err = np.abs(np.asarray(got, np.float64)[fin] - ref[fin]).max()
            self.assertLess(err, 1e-4 * max(1.0, np.abs(ref[fin]).max()), what)

    def test_gaussian(self):
        rng = np.random.default_rng(SEED + 40)
        x = rng.uniform(-1, 1, (48, 48, 48)).astype(np.float32)
        x[20:24] = np.nan  # a NaN slab, as in a masked statistics map
        x[5, 5, 5] = np.inf
        x[40, 9, 30] = -np.inf
        for kw in (dict(), dict(tolerance=1e-3), dict(method="fir")):
            ref = ndi.gaussian_filter(x.astype(np.float64), 4.0, mode="nearest")
            got = ndfilt.gaussian_filter(x, 4.0, mode="nearest", **kw)
            self.same_footprint(got, ref, f"gaussian {kw} ({ndfilt.last_solver()})")
            self.assertFalse(ndfilt.last_solver().endswith("_iir"), kw)
        # one NaN: only its window, not everything
        y = rng.uniform(-1, 1, (40, 40)).astype(np.float32)
        y[13, 17] = np.nan
        got = ndfilt.gaussian_filter(y, 8.0, mode="nearest", tolerance=1e-3)
        self.same_footprint(got, ndi.gaussian_filter(y.astype(np.float64), 8.0, mode="nearest"),
                            "gaussian one NaN")
        # a finite input under the same plan runs the recursive filter where auto chose it
        y[13, 17] = 0
        ndfilt.gaussian_filter(y, 8.0, mode="nearest", tolerance=1e-3)
        self.assertEqual(ndfilt.last_solver(),
                         ndfilt.lib.ndf_plan_solver(ndfilt._last_plan).decode())

    def test_correlate(self):
        rng = np.random.default_rng(SEED + 41)
        x = rng.uniform(-1, 1, (96, 96)).astype(np.float32)
        x[40, 50] = np.nan
        x[10, 80] = np.inf
        w = rng.uniform(-1, 1, (31, 31))
        w[::3] = 0  # zero weights: scipy leaves them out of its sum
        w[1, 1] = 1e-17
        ref = ndi.correlate(x.astype(np.float64), w, mode="reflect")
        got = ndfilt.correlate(x, w)
        self.same_footprint(got, ref, f"correlate 31x31 auto ({ndfilt.last_solver()})")
        self.assertFalse(ndfilt.last_solver().endswith("_fft"))
        names = [s for s in ndfilt.solvers()["correlate"] if not s.endswith("_fft")]
        place = "cuda" if ndfilt.device().startswith("cuda") else "cpu"
        for m in [n for n in names if n.startswith(place)]:
            got = ndfilt.correlate(x, w, method=m)
            self.same_footprint(got, ref, f"correlate 31x31 {m}")
        k = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], float)  # laplace: zeros in the corners
        got = ndfilt.correlate(x, k, mode="nearest")
        self.same_footprint(got, ndi.correlate(x.astype(np.float64), k, mode="nearest"),
                            "laplace")
        got = ndfilt.correlate(x, w, mode="constant", cval=np.nan)
        self.same_footprint(got, ndi.correlate(x.astype(np.float64), w, mode="constant",
                                               cval=np.nan), "cval NaN")

    def test_correlate1d_and_sepfilter(self):
        rng = np.random.default_rng(SEED + 42)
        x = rng.uniform(-1, 1, (30, 40)).astype(np.float64)
        x[3, 4], x[20, 30], x[7, 39] = np.nan, np.inf, -np.inf
        w = np.array([0.5, 0.0, -1.0, 0.0, 2.0])  # zero weights count in correlate1d
        for axis in (0, 1):
            ref = ndi.correlate1d(x, w, axis=axis, mode="wrap")
            self.same_footprint(ndfilt.correlate1d(x, w, axis=axis, mode="wrap"), ref,
                                f"correlate1d axis {axis}")
        ref = ndi.correlate1d(ndi.correlate1d(x, w, axis=0), w, axis=1)
        self.same_footprint(ndfilt.sepfilter(x, [w, w]), ref, "sepfilter")


class TestOutputs(unittest.TestCase):
    """Outputs that must not be written are refused with scipy's message and left alone;
    unaligned ones are written through a copy."""

    def test_read_only(self):
        import tempfile
        x = np.random.default_rng(SEED + 43).uniform(-1, 1, (16, 16)).astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            p = os.path.join(tmp, "ro.dat")
            np.zeros((16, 16), np.float32).tofile(p)
            mm = np.memmap(p, dtype=np.float32, mode="r", shape=(16, 16))
            frozen = np.zeros((16, 16), np.float32)
            frozen.flags.writeable = False
            buf = np.frombuffer(bytes(16 * 16 * 4), dtype=np.float32).reshape(16, 16)
            for name, out in (("memmap", mm), ("writeable=False", frozen), ("frombuffer", buf)):
                calls = [lambda o: ndfilt.gaussian_filter(x, 1.0, output=o),
                         lambda o: ndfilt.correlate1d(x, [1, 2, 1], output=o),
                         lambda o: ndfilt.correlate(x, np.ones((3, 3)), output=o),
                         lambda o: ndfilt.sepfilter(x, [[1, 1], None], output=o),
                         lambda o: ndfilt.convolve1d(x, [1, 2], output=o),
                         lambda o: ndfilt.gaussian_filter1d(x, 1.0, output=o)]
                for call in calls:
                    with self.assertRaisesRegex(ValueError, "output array is read-only"):
                        call(out)
                    self.assertEqual(np.count_nonzero(np.asarray(out)), 0, name)
            bank_out = np.zeros((2, 16, 16), np.float32)
            bank_out.flags.writeable = False
            with self.assertRaisesRegex(ValueError, "read-only"):
                ndfilt.correlate_bank(x, np.ones((2, 3, 3)), output=bank_out)
            del mm

    def test_unaligned(self):
        x = np.random.default_rng(SEED + 44).uniform(-1, 1, (9, 11))
        raw = np.zeros(9 * 11 * 8 + 1, np.uint8)
        view = np.ndarray((9, 11), np.float64, raw.data, offset=1)
        view[...] = x
        self.assertFalse(view.flags.aligned)
        ref = ndi.gaussian_filter(x, 1.5)
        np.testing.assert_allclose(ndfilt.gaussian_filter(view, 1.5), ref, atol=1e-5)
        raw2 = np.zeros(9 * 11 * 8 + 1, np.uint8)
        out = np.ndarray((9, 11), np.float64, raw2.data, offset=1)
        got = ndfilt.gaussian_filter(x, 1.5, output=out)
        self.assertIs(got, out)
        np.testing.assert_allclose(out, ref, atol=1e-5)


class TestPinnedOutputs(unittest.TestCase):
    """New numpy outputs of GPU calls come from a pool of page-locked blocks: results equal the
    CPU path's, a freed block serves the next output of its size, the pool stays under its
    limit and declines past it. On a CPU context the pool's own logic runs over the library's
    plain host allocation."""

    def pool(self, limit):
        p = ndfilt._PinnedPool()
        p.limit = limit
        return p

    def test_pool(self):
        ctx = ndfilt._context("cpu")
        mb = 1 << 20
        p = self.pool(3 * mb)
        a = p.empty(ctx, (256, 1024), np.dtype(np.float32))  # 1 MiB
        self.assertIsNotNone(a)
        self.assertTrue(a.flags.c_contiguous and a.flags.writeable)
        a[...] = 7
        ptr = a.ctypes.data
        view = a[3:]
        del a
        self.assertEqual(p.kept, {})  # the view keeps the block in use
        del view
        self.assertEqual(p.kept, {mb: [(ctx, ptr)]})
        b = p.empty(ctx, (1024, 256), np.dtype(np.float32))
        self.assertEqual(b.ctypes.data, ptr)  # the kept block, reused
        self.assertIsNone(p.empty(ctx, (4 * mb,), np.dtype(np.uint8)))  # over the limit
        self.assertIsNone(p.empty(ctx, (100,), np.dtype(np.float32)))  # too small to lock
        c = p.empty(ctx, (2 * mb,), np.dtype(np.uint8))
        self.assertIsNotNone(c)
        self.assertEqual(p.total, 3 * mb)
        self.assertIsNone(p.empty(ctx, (mb,), np.dtype(np.uint8)))  # full
        del c
        d = p.empty(ctx, (mb // 2,), np.dtype(np.float64))  # 4 MiB: over the limit alone
        self.assertIsNone(d)
        e = p.empty(ctx, (mb // 4,), np.dtype(np.float64))  # 2 MiB: the kept 2 MiB block
        self.assertIsNotNone(e)
        del b
        f = p.empty(ctx, (3 * mb // 2,), np.dtype(np.uint8))  # room made by dropping the 1 MiB
        self.assertIsNone(f)  # 2 + 1.5 > 3 MiB even so
        self.assertEqual(p.total, 2 * mb)
        del e
        p.close()
        self.assertEqual(p.total, 0)
        self.assertIsNone(p.empty(ctx, (mb,), np.dtype(np.uint8)))  # closed

    def test_results(self):
        if "cuda" not in ndfilt.device():
            self.skipTest("numpy inputs run on the CPU here")
        rng = np.random.default_rng(SEED + 47)
        x = rng.uniform(-1, 1, (40, 130, 150)).astype(np.float32)
        want = np.empty_like(x)
        ndfilt.gaussian_filter(x, 2.5, mode="nearest", output=want)
        got = ndfilt.gaussian_filter(x, 2.5, mode="nearest")
        self.assertIsInstance(got.base, ndfilt._PinnedBlock)
        np.testing.assert_array_equal(got, want)
        ptr = got.ctypes.data
        got2 = ndfilt.gaussian_filter(got, 2.5, mode="nearest")  # page-locked input too
        np.testing.assert_allclose(got2, ndfilt.gaussian_filter(want, 2.5, mode="nearest"),
                                   rtol=0, atol=0)
        del got
        got3 = ndfilt.gaussian_filter(x, 2.5, mode="nearest")
        self.assertEqual(got3.ctypes.data, ptr)
        np.testing.assert_array_equal(got3, want)
        w = rng.uniform(-1, 1, (3, 3, 3, 3))
        bank = ndfilt.correlate_bank(x, w)
        self.assertIsInstance(bank.base, ndfilt._PinnedBlock)
        for f in range(3):
            ref = ndi.correlate(x.astype(np.float64), w[f])
            np.testing.assert_allclose(bank[f], ref, rtol=0, atol=TOL * np.abs(ref).max())


class TestEnvironment(unittest.TestCase):
    """Bad NDF_THREADS and NDF_DEVICE values are errors that say why, in a fresh process."""

    def run_py(self, env, code="import ndfilt; ndfilt.gaussian_filter(__import__('numpy').ones(8), 1)"):
        import subprocess
        e = dict(os.environ, **env)
        pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        e["PYTHONPATH"] = pkg + os.pathsep + e.get("PYTHONPATH", "")
        return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                              timeout=120)

    def test_threads(self):
        for bad in ("-5", "abc", "0", "1.5"):
            p = self.run_py({"NDF_THREADS": bad})
            self.assertNotEqual(p.returncode, 0, bad)
            self.assertIn("NDF_THREADS", p.stderr, bad)
        p = self.run_py({"NDF_THREADS": "100000"}, "import ndfilt, os; "
                        "print(ndfilt.lib.ndf_context_threads(ndfilt._context('cpu')))")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLessEqual(int(p.stdout), 8 * os.cpu_count())

    def test_device(self):
        p = self.run_py({"NDF_DEVICE": "gpu7"})
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("NDF_DEVICE=gpu7", p.stderr)


class TestDerivatives(unittest.TestCase):
    """sobel, prewitt, laplace, gaussian_laplace, gaussian_gradient_magnitude and the generic
    forms against scipy.ndimage in float64 (float32 arithmetic: 1e-5 of the largest output;
    integers: scipy's float64 result rounded and clamped), every mode, random shapes."""

    def cases(self, rng):
        for mode in MODES:
            nd = int(rng.integers(1, 5))
            shape = tuple(int(n) for n in rng.integers(1, 14 if nd > 2 else 40, nd))
            dt = rng.choice([np.float32, np.float64, np.uint8, np.int16])
            yield mode, random_input(rng, shape, dt), float(rng.uniform(-1, 1))

    def compare(self, got, ref, x, what):
        ref = np.asarray(ref, np.float64)
        if np.issubdtype(x.dtype, np.integer):
            info = np.iinfo(x.dtype)
            ref = np.clip(np.rint(ref), info.min, info.max)
            self.assertLessEqual(float(np.abs(got.astype(np.float64) - ref).max()), 1.0, what)
            return
        # against the output's and the input's scale: a derivative of a kernel wider than a
        # wrap axis cancels to far below its terms, which float32 carries to ~1e-7 each
        scale = max(float(np.abs(ref).max()), float(np.abs(x).max()), 1e-30)
        err = float(np.abs(got.astype(np.float64) - ref).max()) / scale
        self.assertLessEqual(err, 1e-5, f"{what}: {err:.2e}")

    def test_against_scipy(self):
        rng = np.random.default_rng(SEED + 77)
        for _ in range(4):
            for mode, x, cval in self.cases(rng):
                xf = x.astype(np.float64)
                axis = int(rng.integers(-x.ndim, x.ndim))
                sig = [float(s) for s in rng.uniform(0.5, 3, x.ndim)]
                what = f"{x.dtype} {x.shape} {mode} axis {axis}"
                for name in ("sobel", "prewitt"):
                    got = getattr(ndfilt, name)(x, axis, mode=mode, cval=cval)
                    self.assertEqual(got.dtype, x.dtype)
                    self.compare(got, getattr(ndi, name)(xf, axis, mode=mode, cval=cval), x,
                                 f"{name} {what}")
                self.compare(ndfilt.laplace(x, mode=mode, cval=cval),
                             ndi.laplace(xf, mode=mode, cval=cval), x, f"laplace {what}")
                self.compare(ndfilt.gaussian_laplace(x, sig, mode=mode, cval=cval),
                             ndi.gaussian_laplace(xf, sig, mode=mode, cval=cval), x,
                             f"gaussian_laplace {what} sigma {sig}")
                self.compare(ndfilt.gaussian_gradient_magnitude(x, sig, mode=mode, cval=cval),
                             ndi.gaussian_gradient_magnitude(xf, sig, mode=mode, cval=cval), x,
                             f"gaussian_gradient_magnitude {what} sigma {sig}")

    def test_uniform(self):
        rng = np.random.default_rng(SEED + 79)
        for _ in range(3):
            for mode, x, cval in self.cases(rng):
                xf = x.astype(np.float64)
                size = [int(n) for n in rng.integers(1, 40, x.ndim)]
                origin = [int(rng.integers(-(n // 2), (n - 1) // 2 + 1)) for n in size]
                what = f"uniform_filter {x.dtype} {x.shape} {mode} size {size} origin {origin}"
                self.compare(ndfilt.uniform_filter(x, size, mode=mode, cval=cval, origin=origin),
                             ndi.uniform_filter(xf, size, mode=mode, cval=cval, origin=origin),
                             x, what)
                axis = int(rng.integers(-x.ndim, x.ndim))
                self.compare(ndfilt.uniform_filter1d(x, size[0], axis, mode=mode, cval=cval,
                                                     origin=origin[0]),
                             ndi.uniform_filter1d(xf, size[0], axis, mode=mode, cval=cval,
                                                  origin=origin[0]), x,
                             f"uniform_filter1d axis {axis} {what}")
        x = rng.uniform(-1, 1, (30, 400)).astype(np.float32)
        got = ndfilt.uniform_filter(x, 151, axes=[1])
        if ndfilt.device() == "cpu":  # a long box: the running sums
            self.assertEqual(ndfilt.last_solver(), "cpu_box")
        self.compare(got, ndi.uniform_filter1d(x.astype(np.float64), 151, 1), x, "axes=[1]")
        # a value far larger than the rest passes over them without losing them
        y = np.ones((64, 64), np.float32)
        y[0] = 1e20
        got = ndfilt.uniform_filter(y, 41, mode="constant", method=None)
        self.compare(got, ndi.uniform_filter(y.astype(np.float64), 41, mode="constant"), y,
                     "a 1e20 row among ones")
        self.assertGreater(float(got.min()), 0)
        # a NaN reaches the outputs whose box holds it (scipy's running sums carry it to the
        # end of the line): auto runs the direct sums on such input
        x[10, 20] = np.nan
        got = ndfilt.uniform_filter(x, 5)
        want = np.zeros(x.shape, bool)
        want[8:13, 18:23] = True
        np.testing.assert_array_equal(np.isnan(got), want)
        with self.assertRaises(ValueError):
            ndfilt.uniform_filter(x, 0)

    def test_generic_and_outputs(self):
        rng = np.random.default_rng(SEED + 78)
        x = rng.uniform(-1, 1, (9, 14, 8)).astype(np.float32)

        def d2(a, axis, output, mode, cval, k):
            return ndfilt.correlate1d(a, [k, -2 * k, k], axis, output, mode, cval)

        def sp(a, axis, output, mode, cval, k):
            return ndi.correlate1d(a, [k, -2 * k, k], axis, output, mode, cval)

        self.compare(ndfilt.generic_laplace(x, d2, mode=["wrap", "nearest", "mirror"],
                                            extra_arguments=(1.5,)),
                     ndi.generic_laplace(x.astype(np.float64), sp,
                                         mode=["wrap", "nearest", "mirror"],
                                         extra_arguments=(1.5,)), x, "generic_laplace")
        self.compare(ndfilt.generic_gradient_magnitude(x, ndfilt.sobel),
                     ndi.generic_gradient_magnitude(x.astype(np.float64), ndi.sobel), x,
                     "generic_gradient_magnitude sobel")
        out = np.full(x.shape, np.nan, np.float64)
        got = ndfilt.gaussian_gradient_magnitude(x, 1.5, output=out)
        self.assertIs(got, out)
        self.compare(out, ndi.gaussian_gradient_magnitude(x.astype(np.float64), 1.5), x,
                     "gaussian_gradient_magnitude into a float64 output")
        out = np.full(x.shape, np.nan, np.float32)
        self.assertIs(ndfilt.sobel(x, 0, output=out), out)
        self.compare(out, ndi.sobel(x.astype(np.float64), 0), x, "sobel into output")
        self.assertEqual(ndfilt.laplace(x, output=np.float64).dtype, np.float64)
        with self.assertRaises(ValueError):
            ndfilt.sobel(x, 3)
        for mod in ("cupy", "torch"):
            if not _cuda_available(mod):
                continue
            if mod == "cupy":
                import cupy as cp
                dx, back = cp.asarray(x), cp.asnumpy
            else:
                import torch
                dx, back = torch.from_numpy(x).cuda(), lambda t: t.cpu().numpy()
            for name in ("sobel", "prewitt"):
                self.compare(back(getattr(ndfilt, name)(dx, 1)),
                             getattr(ndi, name)(x.astype(np.float64), 1), x, f"{mod} {name}")
            self.compare(back(ndfilt.gaussian_gradient_magnitude(dx, 2.0)),
                         ndi.gaussian_gradient_magnitude(x.astype(np.float64), 2.0), x,
                         f"{mod} gaussian_gradient_magnitude")
            self.compare(back(ndfilt.laplace(dx)), ndi.laplace(x.astype(np.float64)), x,
                         f"{mod} laplace")


@unittest.skipUnless(_cuda_available("cupy"), "CuPy with a GPU not available")
class TestCupy(unittest.TestCase):
    def test_roundtrip_no_host_copy(self):
        import cupy as cp
        rng = np.random.default_rng(SEED + 2)
        for mode in MODES:
            x = rng.uniform(-1, 1, (6, 33, 40)).astype(np.float32)
            w = rng.uniform(-1, 1, 7)
            ref, scale = expected(True, x, w, 1, mode, 0.5, -1)
            dx = cp.asarray(x)[:, :, ::-1][:, :, ::-1]  # a view with strides
            out = cp.full(x.shape, cp.nan, dtype=cp.float32)
            ptr = out.data.ptr
            got = ndfilt.convolve1d(dx, w, axis=1, mode=mode, cval=0.5, origin=-1, output=out,
                                    method="cuda_direct")
            self.assertIs(got, out)
            self.assertEqual(got.data.ptr, ptr)  # written in place on the GPU
            check(self, cp.asnumpy(got), ref, scale, (f"cupy {mode}", "float32"))
            fresh = ndfilt.convolve1d(dx, w, axis=1, mode=mode, cval=0.5, origin=-1)
            self.assertIsInstance(fresh, cp.ndarray)
            check(self, cp.asnumpy(fresh), ref, scale, (f"cupy new {mode}", "float32"))

    def test_gpu_weights(self):
        """Weights and kernels as CuPy arrays, as cupyx takes them."""
        import cupy as cp
        rng = np.random.default_rng(SEED + 45)
        x = rng.uniform(-1, 1, (20, 24)).astype(np.float32)
        w1, k = rng.uniform(-1, 1, 5), rng.uniform(-1, 1, (3, 5))
        dx = cp.asarray(x)
        for got, want in ((ndfilt.correlate1d(dx, cp.asarray(w1)), ndfilt.correlate1d(x, w1)),
                          (ndfilt.convolve(dx, cp.asarray(k)), ndfilt.convolve(x, k)),
                          (ndfilt.sepfilter(dx, [cp.asarray(w1), None]),
                           ndfilt.sepfilter(x, [w1, None])),
                          (ndfilt.correlate_bank(dx, cp.asarray(k[None])),
                           ndfilt.correlate_bank(x, k[None]))):
            np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-5, atol=1e-6)

    def test_stream(self):
        import cupy as cp
        x = cp.arange(4096, dtype=cp.float32).reshape(64, 64)
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            y = ndfilt.correlate1d(x, [1, 2, 1], axis=0)
        s.synchronize()
        ref = ndi.correlate1d(cp.asnumpy(x), [1, 2, 1], axis=0)
        np.testing.assert_allclose(cp.asnumpy(y), ref, rtol=1e-6)

    def test_gaussian_and_sepfilter(self):
        import cupy as cp
        rng = np.random.default_rng(SEED + 4)
        x = rng.uniform(-1, 1, (6, 33, 40)).astype(np.float32)
        dx = cp.asarray(np.ascontiguousarray(x[:, ::-1]))[:, ::-1]  # negative strides
        sigma, order, mode = (1.0, 2.0, 0.7), (0, 1, 2), ("reflect", "constant", "wrap")
        ref, scale = gaussian_expected(x, sigma, order, mode, 0.5, 4.0, None, None)
        out = cp.full(x.shape, cp.nan, dtype=cp.float32)
        ptr = out.data.ptr
        got = ndfilt.gaussian_filter(dx, sigma, order, output=out, mode=mode, cval=0.5)
        self.assertIs(got, out)
        self.assertEqual(got.data.ptr, ptr)
        check(self, cp.asnumpy(got), ref, scale, ("cupy gaussian_filter", "float32"))
        ws = [rng.uniform(-1, 1, 4), None, rng.uniform(-1, 1, 50)]
        steps = [(ndi.convolve1d, ws[0], 0, "mirror", 1), (ndi.convolve1d, ws[2], 2, "mirror", 1)]
        ref, scale = successive(x, steps, 0.0)
        fresh = ndfilt.sepfilter(dx, ws, mode="mirror", origin=1, convolve=True)
        self.assertIsInstance(fresh, cp.ndarray)
        check(self, cp.asnumpy(fresh), ref, scale, ("cupy sepfilter", "float32"))

    def test_float64_in_float64(self):
        """float64 device arrays are computed in float64, as scipy computes them: correlate by
        every method (cuda_direct64, cuda_fft64), the separable filters (cuda_sep64)."""
        import cupy as cp
        rng = np.random.default_rng(SEED + 50)
        x = rng.uniform(-1, 1, (12, 17, 20))
        k = rng.uniform(-1, 1, (3, 4, 5))
        dx = cp.asarray(x)[:, ::-1][:, ::-1]  # a view with strides

        def close(got, ref, what):
            self.assertEqual(got.dtype, cp.float64, what)
            err = np.abs(cp.asnumpy(got) - ref).max() / np.abs(ref).max()
            self.assertLess(err, 1e-12, f"{what} ({ndfilt.last_solver()}): {err:.3g}")

        for method in ("auto", "direct", "fft"):
            for mode in MODES:
                close(ndfilt.correlate(dx, k, mode=mode, cval=0.5, method=method),
                      ndi.correlate(x, k, mode=mode, cval=0.5), f"correlate {method} {mode}")
        close(ndfilt.convolve(dx, k, mode="mirror", origin=1),
              ndi.convolve(x, k, mode="mirror", origin=1), "convolve")
        close(ndfilt.gaussian_filter(dx, 1.5, order=(0, 1, 0)),
              ndi.gaussian_filter(x, 1.5, order=(0, 1, 0)), "gaussian_filter")
        close(ndfilt.uniform_filter(dx, 5, mode="wrap"), ndi.uniform_filter(x, 5, mode="wrap"),
              "uniform_filter")

    def test_ks(self):
        import cupy as cp
        rng = np.random.default_rng(SEED + 45)
        x = rng.uniform(-1, 1, (9, 11)).astype(np.float32)
        maps = ks_maps(rng, x.shape, 2)
        ref = ks_reference(x, maps, "output", 3.0, "full", False)
        got = ndfilt.ks(cp.asarray(x)[:, ::-1][:, ::-1], (cp.asarray(maps[0]), maps[1]),
                        index="output", output="full")
        self.assertIsInstance(got, cp.ndarray)
        self.assertEqual(got.dtype, cp.float32)
        self.assertEqual(got.device.id, cp.cuda.Device().id)
        TestKs.assert_close(self, cp.asnumpy(got), ref, f"cupy ks ({ndfilt.last_solver()})",
                            ks_tol(ndfilt.last_solver()))

    def test_ks_device_maps_each_call(self):
        # maps on the GPU, a new one each call, as operands of one plan: float32 and float64,
        # strided, with zeros; bad values refused naming the pixel, the output untouched
        import cupy as cp
        rng = np.random.default_rng(SEED + 49)
        x = rng.uniform(-1, 1, (3, 20, 33)).astype(np.float32)
        dx = cp.asarray(x)
        for k, dt in enumerate([np.float32, np.float64, np.float32, np.float64]):
            [s] = ks_maps(rng, x.shape, 1)
            s[:, ::3] = 0
            ds = cp.asarray(s.astype(dt))
            if k >= 2:
                ds = cp.asarray(s.astype(dt)[:, ::-1].copy())[:, ::-1]
            for index in ["input", "output"]:
                got = ndfilt.ks(dx, ds, index=index, r_max=8 if k % 2 else None)
                ref = ks_reference(x, [s.astype(dt)], index, 3.0, "same", False)
                TestKs.assert_close(self, cp.asnumpy(got), ref,
                                    f"call {k} {index} ({ndfilt.last_solver()})",
                                    ks_tol(ndfilt.last_solver()))
        bad = cp.asarray(np.full(x.shape, 0.5, np.float32))
        bad[1, 2, 3] = cp.nan
        with self.assertRaisesRegex(ValueError, f"element {(1 * 20 + 2) * 33 + 3}"):
            ndfilt.ks(dx, bad)


@unittest.skipUnless(_cuda_available("torch"), "torch with CUDA not available")
class TestTorch(unittest.TestCase):
    def test_roundtrip_no_host_copy(self):
        import torch
        rng = np.random.default_rng(SEED + 3)
        x = rng.uniform(-1, 1, (5, 16, 24)).astype(np.float32)
        w = rng.uniform(-1, 1, 5)
        ref, scale = expected(False, x, w, -1, "mirror", 0.0, 0)
        tx = torch.from_numpy(x).cuda()
        out = torch.full(x.shape, float("nan"), device="cuda")
        ptr = out.data_ptr()
        got = ndfilt.correlate1d(tx, w, axis=-1, mode="mirror", output=out)
        self.assertIs(got, out)
        self.assertEqual(got.data_ptr(), ptr)
        check(self, got.cpu().numpy(), ref, scale, ("torch", "float32"))
        fresh = ndfilt.correlate1d(tx.transpose(0, 2), w, axis=0, mode="mirror")
        self.assertTrue(fresh.is_cuda)
        check(self, fresh.transpose(0, 2).cpu().numpy(), ref, scale, ("torch view", "float32"))

    def test_gpu_weights(self):
        import torch
        rng = np.random.default_rng(SEED + 46)
        x = rng.uniform(-1, 1, (12, 18)).astype(np.float32)
        k = rng.uniform(-1, 1, (3, 3))
        got = ndfilt.correlate(torch.from_numpy(x).cuda(), torch.from_numpy(k).cuda())
        np.testing.assert_allclose(got.cpu().numpy(), ndfilt.correlate(x, k), rtol=1e-5,
                                   atol=1e-6)

    def test_gaussian_filter1d(self):
        import torch
        rng = np.random.default_rng(SEED + 5)
        x = rng.uniform(-1, 1, (5, 16, 24)).astype(np.float32)
        kw = dict(order=1, mode="nearest", truncate=3.0)
        _, scale = successive(x, [(ndi.correlate1d, gauss_weights(1.5, 1, 5), 1, "nearest", 0)],
                              0.0)
        ref = ndi.gaussian_filter1d(x.astype(np.float64), 1.5, axis=1, output=np.float64, **kw)
        got = ndfilt.gaussian_filter1d(torch.from_numpy(x).cuda(), 1.5, axis=1, **kw)
        self.assertTrue(got.is_cuda)
        check(self, got.cpu().numpy(), ref, scale, ("torch gaussian_filter1d", "float32"))

    def test_ks(self):
        import torch
        rng = np.random.default_rng(SEED + 46)
        x = rng.uniform(-1, 1, (5, 6, 7)).astype(np.float32)
        [s] = ks_maps(rng, x.shape, 1)
        ref = ks_reference(x, [s], "input", 2.0, "same", True)
        for tx, ts in [(torch.from_numpy(x).cuda(), torch.from_numpy(s).cuda()),
                       (torch.from_numpy(x), torch.from_numpy(s).float())]:
            got = ndfilt.ks(tx, ts, n_sigma=2, normalize=True)
            self.assertIsInstance(got, torch.Tensor)
            self.assertEqual(got.device, tx.device)
            self.assertEqual(got.dtype, torch.float32)
            # a float32 map: its values, not s's, are the reference's
            r = ref if ts.dtype == torch.float64 else ks_reference(
                x, [s.astype(np.float32)], "input", 2.0, "same", True)
            solver = ndfilt.last_solver()
            TestKs.assert_close(self, got.cpu().numpy(), r, f"torch ks on {tx.device} ({solver})",
                                ks_tol(solver))


class TestPlanCache(unittest.TestCase):
    """Before a new plan on a GPU, cached plans on GPUs are destroyed, least recently used
    first, until the device has room for the new plan's arrays (a plan holds its device buffers,
    and a new one sizes its slabs by the free memory). The device's free memory is played by a
    stand-in, so this runs on the CPU too."""

    def test_least_recent_first_until_room(self):
        real = ndfilt.lib
        frees = []

        class Lib:  # the library, its free device memory the next of `frees`
            def __getattr__(self, name):
                return getattr(real, name)

            def ndf_context_memory_free(self, ctx):
                return frees.pop(0)

        ndfilt.set_device("cpu")
        x = [np.ones((n, 9), np.float32) for n in (5, 6, 7, 8)]
        for a in x[:3]:
            ndfilt.gaussian_filter(a, 1.0)
        keys = list(ndfilt._plans)[-3:]
        ndfilt.gaussian_filter(x[0], 1.0)  # the first becomes the most recent
        saved = ndfilt._gpu_plans  # plans of other tests on a GPU stay out of it
        try:
            ndfilt.lib = Lib()
            ndfilt._gpu_plans = set(keys)
            ctx = ndfilt._context("cpu")
            desc = ndfilt._desc(ndfilt._lib.F32, (100,), (4,), None, ndfilt._lib.PLACE_HOST, 0)
            frees[:] = [0, 10, 800, 0]  # room for 100 elements after two plans go
            ndfilt._make_room(ctx, [desc])
            self.assertEqual(frees, [0], "asked the free memory once a plan dropped, then stopped")
            self.assertEqual([k in ndfilt._plans for k in keys], [True, False, False],
                             "the two least recent went")
            self.assertEqual(ndfilt._gpu_plans, {keys[0]})
            frees[:] = [10**12]  # room at once: nothing goes
            ndfilt._make_room(ctx, [desc])
            self.assertIn(keys[0], ndfilt._plans)
        finally:
            ndfilt.lib = real
            ndfilt._gpu_plans = saved & set(ndfilt._plans)
        np.testing.assert_allclose(ndfilt.gaussian_filter(x[1], 1.0),
                                   ndi.gaussian_filter(x[1], 1.0), rtol=1e-5, atol=1e-6)


class TestSlabs(unittest.TestCase):
    """set_memory_limit: numpy calls whose work passes the limit run in slabs of the first axis
    (slabs() > 0) and give the unlimited call's result, on the CPU and, where present, the GPU,
    in place too."""

    def setUp(self):
        self.prev = ndfilt._device

    def tearDown(self):
        ndfilt.set_memory_limit(0)
        ndfilt.set_device(self.prev)

    def check(self, dev):
        ndfilt.set_device(dev)
        rng = np.random.default_rng(SEED + 71)
        x = rng.random((120, 33, 20)).astype(np.float32)
        m = rng.random(x.shape) * 1.5
        w = rng.random((5, 3, 4))
        calls = [
            ("gaussian", lambda: ndfilt.gaussian_filter(x, (2.0, 1.0, 0.5), mode="wrap")),
            ("gaussian order 1", lambda: ndfilt.gaussian_filter(x, 1.5, order=(1, 0, 0))),
            ("correlate direct", lambda: ndfilt.correlate(x, w, mode="mirror", method="direct")),
            ("correlate fft", lambda: ndfilt.correlate(x, w, origin=(1, 0, -1), method="fft")),
            ("median", lambda: ndfilt.median_filter(x, size=(5, 3, 3), mode="constant", cval=.3)),
            ("maximum", lambda: ndfilt.maximum_filter(x, size=7, mode="wrap")),
            ("ks", lambda: ndfilt.ks(x, m, r_max=6)),
        ]
        for name, f in calls:
            ndfilt.set_memory_limit(0)
            want = f()
            ndfilt.set_memory_limit(2 * x.nbytes)  # slabs of 60 rows
            got = f()
            n = ndfilt.slabs()
            if name != "ks":  # host maps bound to the plan: in memory
                self.assertGreater(n, 0, f"{dev} {name}: not in slabs")
            scale = float(np.abs(want).max())
            err = float(np.abs(got.astype(np.float64) - want).max())
            self.assertLessEqual(err, 1e-6 * scale, f"{dev} {name}: {err:.3g} (slabs of {n})")
        y = x.copy()  # in place: each slab's neighbours' rows kept as they were
        want = ndfilt.correlate(x, w, mode="mirror", method="direct")
        got = ndfilt.correlate(y, w, mode="mirror", output=y, method="direct")
        self.assertIs(got, y)
        self.assertGreater(ndfilt.slabs(), 0, f"{dev}: in place not in slabs")
        err = float(np.abs(y.astype(np.float64) - want).max())
        self.assertLessEqual(err, 1e-6 * float(np.abs(want).max()), f"{dev} in place: {err:.3g}")
        # a slab holding NaN runs the FFT plan's exact twin, and last_solver says so
        wide = rng.random((9, 15, 15))
        ndfilt.correlate(x, wide)
        fast = ndfilt.last_solver()
        z = x.copy()
        z[100, 3, 3] = np.nan
        ndfilt.correlate(z, wide)
        self.assertGreater(ndfilt.slabs(), 0, f"{dev}: NaN case not in slabs")
        if "fft" in fast:
            self.assertNotIn("fft", ndfilt.last_solver(), f"{dev}: {fast} ran on NaN")

    def test_cpu(self):
        self.check("cpu")

    @unittest.skipUnless(_cuda_available("cupy"), "CuPy with a GPU not available")
    def test_gpu(self):
        self.check("cuda")


if __name__ == "__main__":
    unittest.main(verbosity=1)
