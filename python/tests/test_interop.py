# SPDX-License-Identifier: BSD-3-Clause
"""Interop tests: DLPack producers (numpy, torch, JAX, CuPy, and a bare object with only
__dlpack__ and __dlpack_device__) through every public function, against the numpy path;
sigma in physical units (spacing=) and fwhm= against scipy with the converted sigmas;
ndfilt.sitk over SimpleITK images (geometry kept, values scipy's on the array). What is not
installed (torch, JAX, CuPy, a GPU, SimpleITK) is skipped."""
import math
import os
import subprocess
import sys
import unittest

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # see test_binding.py
import numpy as np  # noqa: E402
from scipy import ndimage as ndi  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import ndfilt  # noqa: E402

SEED = int(os.environ.get("NDF_TEST_SEED", np.random.SeedSequence().entropy % 2**32))
print(f"seed: NDF_TEST_SEED={SEED}", file=sys.stderr)
TOL = 1e-5  # max |ndfilt - reference| / max(|reference|, |input|), float32 arithmetic
FWHM = 2 * math.sqrt(2 * math.log(2))


def _module(name):
    try:
        return __import__(name)
    except Exception:  # absent, or present but broken
        return None


torch = _module("torch")
jax = _module("jax")
if jax is not None:
    import jax.numpy as jnp
sitk = _module("SimpleITK")


def _gpu(mod):
    try:
        if mod == "cupy":
            import cupy
            return cupy.cuda.runtime.getDeviceCount() > 0
        return torch is not None and torch.cuda.is_available()
    except Exception:
        return False


class Producer:
    """An array of a library ndfilt does not know: the DLPack protocol and nothing else (no
    shape, dtype or __array__). Records the streams its consumers ask for."""

    __slots__ = ("_a", "streams")

    def __init__(self, a):
        self._a, self.streams = a, []

    def __dlpack__(self, stream=None, **kw):
        self.streams.append(stream)
        if kw:
            try:
                return self._a.__dlpack__(stream=stream, **kw)
            except TypeError:  # a producer older than the consumer (numpy < 2: no max_version)
                pass
        return self._a.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class NoDevice:
    """__dlpack__ without __dlpack_device__ (and nothing numpy could read)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()


class OldStyle(NoDevice):
    """__dlpack__ without __dlpack_device__, readable through __array__."""

    def __array__(self, dtype=None):
        return self._a


class OnMetal(Producer):
    def __dlpack_device__(self):
        return (8, 0)  # kDLMetal


def worst(got, want):
    """The index, values and error of the largest |got - want| (NaN counted largest)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.abs(got - want)
    err = np.where(np.isnan(err) & ~(np.isnan(got) & np.isnan(want)), np.inf, err)
    err = np.nan_to_num(err, nan=0.0)
    i = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
    return i, got[i] if err.size else None, want[i] if err.size else None, \
        float(err[i]) if err.size else 0.0


def assert_same(tc, got, want, what):
    """got equal to want (the same library path: bit for bit), shapes and dtypes included."""
    got, want = np.asarray(got), np.asarray(want)
    tc.assertEqual(got.shape, want.shape, f"{what}: shape")
    tc.assertEqual(got.dtype, want.dtype, f"{what}: dtype")
    if not np.array_equal(got, want, equal_nan=True):
        i, g, w, e = worst(got, want)
        tc.fail(f"{what}: worst element {i}: got {g!r}, numpy path {w!r}, error {e:.3g}")


def assert_close(tc, got, ref, x, what, tol=TOL):
    """got within tol of the float64 reference, relative to max(|ref|, |x|)."""
    got = np.asarray(got, np.float64)
    tc.assertEqual(got.shape, np.shape(ref), f"{what}: shape")
    scale = max(float(np.abs(ref).max()), float(np.abs(np.asarray(x, np.float64)).max()), 1e-30)
    i, g, w, e = worst(got, ref)
    tc.assertLessEqual(e / scale, tol, f"{what}: worst element {i}: got {g!r}, reference {w!r}, "
                       f"error {e / scale:.3g} of {scale:.3g}")


def calls(rng, shape):
    """(name, f(x, wrap)): every public function on input x, its weights and sigma maps passed
    through wrap (the identity for the numpy path)."""
    nd = len(shape)
    w1 = rng.uniform(-1, 1, 5)
    k = rng.uniform(-1, 1, (3,) * nd)
    bank = rng.uniform(-1, 1, (2,) + (3,) * nd)
    smap = rng.uniform(0.2, 1.5, shape).astype(np.float32)
    nf = ndfilt
    return [
        ("gaussian_filter", lambda x, W: nf.gaussian_filter(x, 1.3, order=[0] * (nd - 1) + [1],
                                                            mode="nearest")),
        ("gaussian_filter fwhm spacing",
         lambda x, W: nf.gaussian_filter(x, fwhm=2.5, spacing=[0.8] * (nd - 1) + [1.7])),
        ("gaussian_filter1d", lambda x, W: nf.gaussian_filter1d(x, 0.9, axis=0, mode="wrap")),
        ("correlate1d", lambda x, W: nf.correlate1d(x, W(w1), axis=-1, mode="mirror")),
        ("convolve1d", lambda x, W: nf.convolve1d(x, W(w1), axis=0, origin=1)),
        ("sepfilter", lambda x, W: nf.sepfilter(x, [W(w1)] + [None] * (nd - 1))),
        ("correlate", lambda x, W: nf.correlate(x, W(k), mode="constant", cval=0.5)),
        ("convolve", lambda x, W: nf.convolve(x, W(k))),
        ("correlate_bank", lambda x, W: nf.correlate_bank(x, W(bank))),
        ("convolve_bank", lambda x, W: nf.convolve_bank(x, W(bank), mode="nearest")),
        ("ks", lambda x, W: nf.ks(x, W(smap), method="cpu_ks")),
        ("ks per axis", lambda x, W: nf.ks(x, [W(smap)] * nd, index="output", normalize=True,
                                           method="cpu_ks")),
        ("sobel", lambda x, W: nf.sobel(x, 0)),
        ("prewitt", lambda x, W: nf.prewitt(x, -1, mode="wrap")),
        ("laplace", lambda x, W: nf.laplace(x)),
        ("gaussian_laplace", lambda x, W: nf.gaussian_laplace(x, 1.1)),
        ("gaussian_gradient_magnitude",
         lambda x, W: nf.gaussian_gradient_magnitude(x, 1.0, spacing=[1.0] * (nd - 1) + [2.0])),
        ("generic_laplace", lambda x, W: nf.generic_laplace(
            x, lambda a, axis, out, mode, cval: nf.correlate1d(a, [1, -2, 1], axis, out, mode,
                                                               cval))),
        ("generic_gradient_magnitude", lambda x, W: nf.generic_gradient_magnitude(x, nf.sobel)),
        ("uniform_filter", lambda x, W: nf.uniform_filter(x, 3)),
        ("uniform_filter1d", lambda x, W: nf.uniform_filter1d(x, 4, axis=0)),
    ]


class TestDLPack(unittest.TestCase):
    """A producer's result equals the numpy path's (the same computation: bit for bit on the
    host) and has the producer's kind."""

    def check_all(self, make, back, kind, what, wrap=None, rng=None, exact=True):
        """make(numpy array) -> producer; back(result) -> numpy; kind: the results' type.
        exact: bit for bit; else within 1e-6 (torch's own arithmetic in the derivatives' sums
        and square roots)."""
        rng = rng or np.random.default_rng(SEED)
        shape = (6, 7, 9)
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        wrap = wrap or make
        for name, f in calls(rng, shape):
            want = f(x, lambda a: a)
            got = f(make(x), wrap)
            self.assertIsInstance(got, kind, f"{what} {name}: result type")
            if exact:
                assert_same(self, back(got), want, f"{what} {name}")
            else:
                assert_close(self, back(got), want.astype(np.float64), x, f"{what} {name}", 1e-6)

    def test_bare_producer(self):
        # on the host: numpy results; weights and sigma maps may be producers too
        self.check_all(Producer, lambda r: r, np.ndarray, "bare producer")
        x = np.random.default_rng(SEED + 1).uniform(-1, 1, (5, 8)).astype(np.float32)
        for dt in [np.uint8, np.uint16, np.int16, np.float64]:
            a = (x * 100).astype(dt) if dt != np.float64 else x.astype(dt)
            assert_same(self, ndfilt.gaussian_filter(Producer(a), 1.5),
                        ndfilt.gaussian_filter(a, 1.5), f"bare producer {np.dtype(dt)}")
        # a strided view, and output naming a dtype
        v = x[::-1, ::2]
        assert_same(self, ndfilt.correlate1d(Producer(v), [1, 2, 3], output=np.float64),
                    ndfilt.correlate1d(v, [1, 2, 3], output=np.float64), "strided view")

    def test_numpy_round_trip(self):
        rng = np.random.default_rng(SEED + 2)
        x = rng.uniform(-1, 1, (16, 20)).astype(np.float32)
        p = Producer(x)
        y = ndfilt.gaussian_filter(p, 2.0)
        self.assertEqual(p.streams, [None])  # a host array: no stream
        z = np.from_dlpack(y)  # numpy's own consumer, without a copy
        self.assertTrue(np.shares_memory(y, z))
        assert_same(self, ndfilt.gaussian_filter(Producer(y), 1.0),
                    ndfilt.gaussian_filter(ndfilt.gaussian_filter(x, 2.0), 1.0), "round trip")
        # numpy arrays and their subclasses stay on numpy's path (they have __dlpack__ too)

        class Sub(np.ndarray):
            pass

        for a in (x, x.view(Sub), np.ascontiguousarray(x[:, ::2])):
            self.assertEqual(ndfilt._kind(a), "numpy", type(a))
        self.assertIs(type(ndfilt.gaussian_filter(x.view(Sub), 1.0)), np.ndarray)
        # __dlpack__ without __dlpack_device__ but with __array__: read as before, by numpy
        assert_same(self, ndfilt.gaussian_filter(OldStyle(x), 1.0),
                    ndfilt.gaussian_filter(x, 1.0), "__array__ beside an old __dlpack__")

    def test_errors(self):
        x = np.ones((4, 5), np.float32)
        with self.assertRaisesRegex(TypeError, "__dlpack_device__.*numpy arrays, CuPy"):
            ndfilt.gaussian_filter(NoDevice(x), 1.0)
        with self.assertRaisesRegex(TypeError, "__dlpack_device__"):
            ndfilt.sobel(NoDevice(x))
        with self.assertRaisesRegex(TypeError, "device type 8"):
            ndfilt.correlate1d(OnMetal(x), [1, 2])
        for f in (lambda o: ndfilt.gaussian_filter(Producer(x), 1.0, output=o),
                  lambda o: ndfilt.correlate_bank(Producer(x), np.ones((2, 3, 3)), output=o),
                  lambda o: ndfilt.sobel(Producer(x), 0, o),
                  lambda o: ndfilt.gaussian_laplace(Producer(x), 1.0, output=o)):
            for out in (np.empty_like(x), Producer(np.empty_like(x))):
                with self.assertRaisesRegex(TypeError, "output must be None or a dtype"):
                    f(out)
        with self.assertRaises(TypeError):  # numpy in, a producer as output
            ndfilt.gaussian_filter(x, 1.0, output=Producer(np.empty_like(x)))
        with self.assertRaisesRegex(TypeError, "not supported"):  # dtypes as numpy's
            ndfilt.gaussian_filter(Producer(np.ones((4, 5), np.int32)), 1.0)

    @unittest.skipIf(torch is None, "torch not installed")
    def test_torch_cpu(self):
        rng = np.random.default_rng(SEED + 3)
        # torch tensors keep their own path (torch out); through a bare producer, numpy out
        self.check_all(torch.from_numpy, lambda r: r.numpy(), torch.Tensor, "torch",
                       wrap=lambda a: a, rng=rng, exact=False)
        self.check_all(lambda a: Producer(torch.from_numpy(a)), lambda r: r, np.ndarray,
                       "producer of torch", wrap=lambda a: Producer(torch.from_numpy(a)), rng=rng)
        x = rng.uniform(-1, 1, (10, 12)).astype(np.float32)
        y = ndfilt.gaussian_filter(Producer(torch.from_numpy(x)), 1.5)
        t = torch.from_dlpack(y)
        self.assertEqual(t.data_ptr(), y.ctypes.data)
        assert_same(self, t.numpy(), ndfilt.gaussian_filter(x, 1.5), "torch.from_dlpack")

    @unittest.skipIf(jax is None, "JAX not installed")
    def test_jax(self):
        cpu = jax.devices("cpu")[0]  # (the default device may be a GPU)
        on_cpu = lambda a: jax.device_put(a, cpu)  # noqa: E731
        self.check_all(on_cpu, np.asarray, jax.Array, "jax")
        x = np.random.default_rng(SEED + 4).uniform(-1, 1, (7, 9)).astype(np.float32)
        with self.assertRaisesRegex(TypeError, "output must be None or a dtype"):
            ndfilt.gaussian_filter(on_cpu(x), 1.0, output=on_cpu(np.zeros(x.shape)))
        u = (x * 100 + 100).astype(np.uint8)
        got = ndfilt.uniform_filter(on_cpu(u), 3)
        self.assertEqual(got.dtype, jnp.uint8)
        assert_same(self, np.asarray(got), ndfilt.uniform_filter(u, 3), "jax uint8")


def _cupy():
    import cupy
    return cupy


@unittest.skipUnless(_gpu("cupy") or _gpu("torch"), "no CUDA GPU with CuPy or torch")
class TestDLPackCuda(unittest.TestCase):
    """CUDA producers: read on the GPU (CuPy, else torch), on the consumer's current stream,
    which the producer is handed; results within float32 rounding of the numpy path (the
    GPU's solvers)."""

    def setUp(self):
        self.cp = _cupy() if _gpu("cupy") else None

    def device_array(self, a):
        if self.cp is not None:
            return self.cp.asarray(a)
        return torch.from_numpy(a).cuda()

    def host(self, r):
        if self.cp is not None and isinstance(r, self.cp.ndarray):
            return self.cp.asnumpy(r)
        return r.cpu().numpy()

    def test_all_functions(self):
        rng = np.random.default_rng(SEED + 5)
        shape = (6, 7, 9)
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        kind = self.cp.ndarray if self.cp is not None else torch.Tensor
        wrap = lambda a: Producer(self.device_array(a))  # noqa: E731
        for name, f in calls(rng, shape):
            want = f(x, lambda a: a).astype(np.float64)
            got = f(wrap(x), wrap)
            self.assertIsInstance(got, kind, f"{name}: result type")
            assert_close(self, self.host(got), want, x, f"cuda producer {name}", 2e-5)

    def test_stream(self):
        x = np.arange(64 * 80, dtype=np.float32).reshape(64, 80)
        want = ndfilt.correlate1d(x, [1, 2, 1], axis=0)
        p = Producer(self.device_array(x))
        if self.cp is not None:
            s = self.cp.cuda.Stream(non_blocking=True)
            with s:
                y = ndfilt.correlate1d(p, [1, 2, 1], axis=0)
            s.synchronize()
            self.assertEqual(p.streams, [s.ptr])
        else:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                y = ndfilt.correlate1d(p, [1, 2, 1], axis=0)
            s.synchronize()
            self.assertEqual(p.streams, [s.cuda_stream])
        assert_close(self, self.host(y), want.astype(np.float64), x, "on a side stream")

    @unittest.skipUnless(_gpu("torch") and _gpu("cupy"), "needs torch and CuPy on a GPU")
    def test_torch_producer(self):
        x = np.random.default_rng(SEED + 6).uniform(-1, 1, (12, 30)).astype(np.float32)
        got = ndfilt.gaussian_filter(Producer(torch.from_numpy(x).cuda()), 2.0)
        self.assertIsInstance(got, self.cp.ndarray)  # a generic GPU producer: CuPy out
        assert_close(self, self.cp.asnumpy(got), ndfilt.gaussian_filter(x, 2.0).astype(
            np.float64), x, "torch CUDA tensor through a bare producer")

    @unittest.skipUnless(jax is not None and any(d.platform == "gpu" for d in (
        jax.devices() if jax is not None else [])), "JAX without a GPU")
    def test_jax_gpu(self):
        x = np.random.default_rng(SEED + 7).uniform(-1, 1, (12, 30)).astype(np.float32)
        got = ndfilt.gaussian_gradient_magnitude(jax.device_put(x, jax.devices("gpu")[0]), 1.5)
        self.assertIsInstance(got, jax.Array)
        assert_close(self, np.asarray(got), ndfilt.gaussian_gradient_magnitude(x, 1.5).astype(
            np.float64), x, "JAX on the GPU")


class TestSpacing(unittest.TestCase):
    """sigma in physical units (sigma / spacing voxels) and fwhm (sigma = fwhm / 2.3548), as the
    CLI's --sigma 2mm and --fwhm, against scipy with the converted sigmas."""

    def setUp(self):
        rng = np.random.default_rng(SEED + 10)
        self.rng = rng
        self.x = rng.uniform(-1, 1, (9, 12, 15)).astype(np.float32)
        self.x64 = self.x.astype(np.float64)
        self.sp = (2.5, 0.8, 1.3)  # anisotropic, in array order (z, y, x)

    def test_gaussian_filter(self):
        x, x64, sp = self.x, self.x64, self.sp
        cases = [  # (ndfilt keywords, scipy's sigma in voxels)
            (dict(sigma=2.0, spacing=sp), [2.0 / s for s in sp]),
            (dict(sigma=(1.0, 2.0, 3.0), spacing=sp), [1.0 / 2.5, 2.0 / 0.8, 3.0 / 1.3]),
            (dict(sigma=1.5, spacing=2.0), [0.75] * 3),
            (dict(fwhm=4.0, spacing=sp), [4.0 / FWHM / s for s in sp]),
            (dict(fwhm=(3.0, 0.0, 5.0)), [3.0 / FWHM, 0.0, 5.0 / FWHM]),  # voxels
            (dict(fwhm=6.0), [6.0 / FWHM] * 3),
            (dict(sigma=(0.0, 1.0, 2.0), spacing=sp, order=(0, 1, 0), mode="nearest"),
             [0.0, 1.0 / 0.8, 2.0 / 1.3]),
        ]
        for kw, sig in cases:
            order, mode = kw.get("order", 0), kw.get("mode", "reflect")
            ref = ndi.gaussian_filter(x64, sig, order=order, mode=mode, output=np.float64)
            assert_close(self, ndfilt.gaussian_filter(x, **kw), ref, x, f"gaussian_filter {kw}")
        # axes=: spacing still per axis of the array, sigma per axis listed
        got = ndfilt.gaussian_filter(x, (2.0, 1.0), spacing=sp, axes=(2, 0))
        ref = ndi.gaussian_filter(x64, [1.0 / 2.5, 0.0, 2.0 / 1.3], output=np.float64)
        assert_close(self, got, ref, x, "axes=(2, 0)")
        # gaussian_filter1d: a scalar spacing for its axis
        got = ndfilt.gaussian_filter1d(x, 2.0, axis=1, spacing=0.8, mode="mirror")
        ref = ndi.gaussian_filter1d(x64, 2.5, axis=1, mode="mirror", output=np.float64)
        assert_close(self, got, ref, x, "gaussian_filter1d spacing")
        got = ndfilt.gaussian_filter1d(x, fwhm=5.0, axis=-1)
        ref = ndi.gaussian_filter1d(x64, 5.0 / FWHM, axis=-1, output=np.float64)
        assert_close(self, got, ref, x, "gaussian_filter1d fwhm")
        # without spacing and fwhm nothing changes; spacing 1 is voxels
        assert_same(self, ndfilt.gaussian_filter(x, 1.7, spacing=1.0),
                    ndfilt.gaussian_filter(x, 1.7), "spacing 1")
        assert_same(self, ndfilt.gaussian_filter(x, sigma=1.7, spacing=None, fwhm=None),
                    ndfilt.gaussian_filter(x, 1.7), "spacing and fwhm None")

    def test_derivatives(self):
        # per unit length: each axis' derivative divided by spacing ** order
        x, x64, sp = self.x, self.x64, self.sp
        sig = [1.5 / s for s in sp]

        def term(axis, order):
            o = [0] * 3
            o[axis] = order
            return ndi.gaussian_filter(x64, sig, order=o, mode="nearest") / sp[axis] ** order

        ref = sum(term(a, 2) for a in range(3))
        got = ndfilt.gaussian_laplace(x, 1.5, mode="nearest", spacing=sp)
        assert_close(self, got, ref, x, "gaussian_laplace spacing")
        ref = np.sqrt(sum(term(a, 1) ** 2 for a in range(3)))
        got = ndfilt.gaussian_gradient_magnitude(x, 1.5, mode="nearest", spacing=sp)
        assert_close(self, got, ref, x, "gaussian_gradient_magnitude spacing")
        fw = 1.5 * FWHM
        got = ndfilt.gaussian_gradient_magnitude(x, fwhm=fw, mode="nearest", spacing=sp,
                                                 output=np.float64)
        self.assertEqual(got.dtype, np.float64)
        assert_close(self, got, ref, x, "gaussian_gradient_magnitude fwhm")
        got = ndfilt.gaussian_laplace(x, fwhm=fw)  # voxels
        ref = ndi.gaussian_laplace(x64, 1.5)
        assert_close(self, got, ref, x, "gaussian_laplace fwhm in voxels")
        assert_same(self, ndfilt.gaussian_laplace(x, 1.2),
                    ndfilt.gaussian_laplace(x, 1.2, spacing=None), "gaussian_laplace defaults")

    def test_errors(self):
        x = self.x
        value_errors = [
            dict(sigma=1.0, fwhm=2.0), dict(sigma=1.0, spacing=0), dict(sigma=1.0, spacing=-1.0),
            dict(sigma=1.0, spacing=float("nan")), dict(sigma=1.0, spacing=float("inf")),
            dict(sigma=1.0, spacing=(1.0, 0.0, 1.0)), dict(sigma=1.0, spacing=(1.0, 2.0)),
            dict(sigma=1.0, spacing=(1.0, 2.0, 3.0, 4.0)), dict(sigma=(1.0, 2.0), spacing=1.0),
            dict(fwhm=(1.0, 2.0)), dict(fwhm=-1.0), dict(fwhm=float("nan")),
            dict(fwhm=float("inf"), spacing=1.0), dict(sigma=-1.0, spacing=1.0),
            dict(sigma=1e300, spacing=1e-300), dict(sigma=1.0, spacing="x"),
            dict(fwhm="x"), dict(sigma=1.0, spacing=(1.0, 2.0), axes=(0, 1)),
        ]
        for kw in value_errors:
            with self.assertRaises(ValueError, msg=f"gaussian_filter {kw}"):
                ndfilt.gaussian_filter(x, **kw)
        with self.assertRaisesRegex(ValueError, "not both"):
            ndfilt.gaussian_filter(x, 1.0, fwhm=2.0)
        with self.assertRaisesRegex(ValueError, "too large"):
            ndfilt.gaussian_filter(x, 1e300, spacing=1e-300)
        with self.assertRaisesRegex(ValueError, "axis 1"):
            ndfilt.gaussian_filter(x, 1.0, spacing=(1.0, 0.0, 1.0))
        with self.assertRaisesRegex(TypeError, "sigma or fwhm"):
            ndfilt.gaussian_filter(x)
        for kw in [dict(sigma=1.0, spacing=(1.0, 2.0)), dict(fwhm=(1.0, 2.0)),
                   dict(sigma=1.0, fwhm=1.0), dict(sigma=1.0, spacing=0.0)]:
            with self.assertRaises(ValueError, msg=f"gaussian_filter1d {kw}"):
                ndfilt.gaussian_filter1d(x, **kw)
        for f in (ndfilt.gaussian_laplace, ndfilt.gaussian_gradient_magnitude):
            for kw in [dict(sigma=1.0, fwhm=1.0), dict(sigma=1.0, spacing=(1.0, 2.0)),
                       dict(sigma=1.0, spacing=-2.0)]:
                with self.assertRaises(ValueError, msg=f"{f.__name__} {kw}"):
                    f(x, **kw)
            with self.assertRaises(TypeError):
                f(x)


def _sitk_image(rng, shape_xyz, spacing, dtype=np.float32, vector=0):
    """An image of random values with anisotropic spacing, a non-zero origin, a rotated
    direction and a metadata entry."""
    shape = tuple(shape_xyz)[::-1] + ((vector,) if vector else ())
    a = rng.uniform(-1, 1, shape)
    if np.issubdtype(dtype, np.integer):
        a = a * 1000
    img = sitk.GetImageFromArray(a.astype(dtype), isVector=bool(vector))
    nd = len(shape_xyz)
    img.SetSpacing(spacing)
    img.SetOrigin(tuple(10.0 * (i + 1) - 3.5 for i in range(nd)))
    c, s = math.cos(0.4), math.sin(0.4)
    if nd == 3:
        img.SetDirection((c, -s, 0.0, s, c, 0.0, 0.0, 0.0, -1.0))
    else:
        img.SetDirection((c, -s, s, c))
    img.SetMetaData("ndfilt_test", "kept")
    return img


@unittest.skipIf(sitk is None, "SimpleITK not installed")
class TestSimpleITK(unittest.TestCase):
    def setUp(self):
        import ndfilt.sitk
        self.ns = ndfilt.sitk
        self.rng = np.random.default_rng(SEED + 20)

    def assert_geometry(self, out, img, what):
        self.assertEqual(out.GetSize(), img.GetSize(), f"{what}: size")
        self.assertEqual(out.GetOrigin(), img.GetOrigin(), f"{what}: origin")
        self.assertEqual(out.GetSpacing(), img.GetSpacing(), f"{what}: spacing")
        self.assertEqual(out.GetDirection(), img.GetDirection(), f"{what}: direction")
        self.assertEqual(out.GetMetaData("ndfilt_test"), "kept", f"{what}: metadata")

    def test_smooth_anisotropic(self):
        sp_xyz = (0.6, 1.1, 2.7)
        img = _sitk_image(self.rng, (13, 10, 7), sp_xyz)
        a = sitk.GetArrayFromImage(img).astype(np.float64)  # (z, y, x)
        sp = sp_xyz[::-1]
        cases = [  # (call, scipy sigma in voxels, array order)
            (lambda: self.ns.gaussian_filter(img, 2.0), [2.0 / s for s in sp]),
            (lambda: self.ns.smooth(img, (1.0, 2.0, 3.0)),  # (x, y, z)
             [3.0 / 2.7, 2.0 / 1.1, 1.0 / 0.6]),
            (lambda: self.ns.smooth(img, fwhm=5.0), [5.0 / FWHM / s for s in sp]),
            (lambda: self.ns.smooth(img, fwhm=(4.0, 0.0, 6.0)),
             [6.0 / FWHM / 2.7, 0.0, 4.0 / FWHM / 0.6]),
        ]
        for k, (call, sig) in enumerate(cases):
            out = call()
            self.assert_geometry(out, img, f"case {k}")
            self.assertEqual(out.GetPixelID(), img.GetPixelID())
            ref = ndi.gaussian_filter(a, sig, mode="nearest")
            assert_close(self, sitk.GetArrayViewFromImage(out), ref, a, f"sitk case {k} {sig}")
        # mode and order per axis in (x, y, z) too: order along z only
        out = self.ns.gaussian_filter(img, 2.0, order=(0, 0, 1), mode=("wrap", "reflect", "mirror"))
        ref = ndi.gaussian_filter(a, [2.0 / s for s in sp], order=(1, 0, 0),
                                  mode=("mirror", "reflect", "wrap"))
        assert_close(self, sitk.GetArrayViewFromImage(out), ref, a, "order and mode (x, y, z)")
        with self.assertRaises(ValueError):
            self.ns.smooth(img, 1.0, fwhm=2.0)
        with self.assertRaises(ValueError):
            self.ns.smooth(img, (1.0, 2.0))

    def test_derivatives_and_wrappers(self):
        sp_xyz = (0.9, 2.2)
        img = _sitk_image(self.rng, (17, 11), sp_xyz)
        a = sitk.GetArrayFromImage(img)
        a64 = a.astype(np.float64)
        sp = sp_xyz[::-1]
        sig = [1.5 / s for s in sp]

        def term(axis, order):
            o = [0, 0]
            o[axis] = order
            return ndi.gaussian_filter(a64, sig, order=o, mode="nearest") / sp[axis] ** order

        out = self.ns.gaussian_gradient_magnitude(img, 1.5)
        self.assert_geometry(out, img, "gaussian_gradient_magnitude")
        assert_close(self, sitk.GetArrayViewFromImage(out),
                     np.sqrt(term(0, 1) ** 2 + term(1, 1) ** 2), a, "sitk gradient magnitude")
        out = self.ns.gaussian_laplace(img, 1.5)
        assert_close(self, sitk.GetArrayViewFromImage(out), term(0, 2) + term(1, 2), a,
                     "sitk gaussian_laplace")
        # generic wrappers: ndfilt's arguments on the array (z, y, x order, voxels)
        for name, call, want in [
                ("sobel", lambda: self.ns.sobel(img, 0), ndfilt.sobel(a, 0)),
                ("uniform_filter", lambda: self.ns.uniform_filter(img, (3, 5), mode="nearest"),
                 ndfilt.uniform_filter(a, (3, 5), mode="nearest")),
                ("correlate image kernel", lambda: self.ns.correlate(img, img[:3, :3]),
                 ndfilt.correlate(a, a[:3, :3])),
                ("ks image map", lambda: self.ns.ks(img, sitk.Abs(img)),
                 ndfilt.ks(a, np.abs(a))),
                ("wrapped correlate1d", lambda: self.ns.image_filter(ndfilt.correlate1d)(
                    img, [1, 2, 1], 0, np.float64), ndfilt.correlate1d(a, [1, 2, 1], 0,
                                                                      np.float64))]:
            out = call()
            self.assert_geometry(out, img, name)
            assert_same(self, sitk.GetArrayViewFromImage(out), want, f"sitk {name}")
        out = self.ns.correlate_bank(img, np.ones((3, 3, 3)))
        self.assertEqual(out.GetNumberOfComponentsPerPixel(), 3)
        self.assert_geometry(out, img, "correlate_bank")
        assert_same(self, sitk.GetArrayViewFromImage(out)[..., 1],
                    ndfilt.correlate(a, np.ones((3, 3))), "bank component")

    def test_pixel_types(self):
        sp_xyz = (1.5, 0.5, 1.0)
        vec = _sitk_image(self.rng, (9, 8, 5), sp_xyz, vector=2)
        out = self.ns.smooth(vec, 1.0)
        self.assertEqual(out.GetNumberOfComponentsPerPixel(), 2)
        self.assert_geometry(out, vec, "vector")
        a = sitk.GetArrayFromImage(vec).astype(np.float64)
        for c in range(2):
            ref = ndi.gaussian_filter(a[..., c], [1.0 / s for s in sp_xyz[::-1]], mode="nearest")
            assert_close(self, sitk.GetArrayViewFromImage(out)[..., c], ref, a[..., c],
                         f"component {c}")
        i32 = _sitk_image(self.rng, (9, 8, 5), sp_xyz, np.int32)
        out = self.ns.smooth(i32, 1.0)
        self.assertEqual(out.GetPixelID(), sitk.sitkInt32)
        a = sitk.GetArrayFromImage(i32).astype(np.float64)
        ref = ndi.gaussian_filter(a, [1.0 / s for s in sp_xyz[::-1]], mode="nearest")
        got = sitk.GetArrayViewFromImage(out).astype(np.float64)
        self.assertLessEqual(float(np.abs(got - np.rint(ref)).max()), 1.0, "int32 rounded")
        out = self.ns.smooth(i32, 1.0, output=np.float32)
        self.assertEqual(out.GetPixelID(), sitk.sitkFloat32)
        with self.assertRaises(TypeError):
            self.ns.smooth(sitk.Image([4, 4], sitk.sitkComplexFloat32), 1.0)
        with self.assertRaises(TypeError):
            self.ns.smooth(np.ones((4, 4), np.float32), 1.0)
        with self.assertRaises(TypeError):
            self.ns.sobel(i32, 0, np.empty((5, 8, 9), np.float32))
        with self.assertRaises(ValueError):
            self.ns.ks(i32, sitk.Abs(i32), output="full")

    def test_import_is_lazy(self):
        code = "import sys, ndfilt; sys.exit('SimpleITK' in sys.modules)"
        r = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(HERE, ".."),
                           env=dict(os.environ, PYTHONPATH=os.path.join(HERE, "..")))
        self.assertEqual(r.returncode, 0, "import ndfilt imported SimpleITK")


if __name__ == "__main__":
    unittest.main(verbosity=1)
