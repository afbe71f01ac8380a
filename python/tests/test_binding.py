"""Binding tests: ndfilt against scipy.ndimage on random inputs; argument errors; GPU
round trips (CuPy, torch) without host copies when those are present."""
import os
import sys
import unittest

import numpy as np
from scipy import ndimage as ndi

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ndfilt  # noqa: E402

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
DTYPES = [np.uint8, np.uint16, np.int16, np.float32, np.float64]
SEED = int(os.environ.get("NDF_TEST_SEED", np.random.SeedSequence().entropy % 2**32))
print(f"seed: NDF_TEST_SEED={SEED}", file=sys.stderr)
TOL = 1e-5  # max |ndfilt - scipy| / max scipy(|x|, |w|), float outputs


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


def check(tc, got, ref, scale, what):
    got = np.asarray(got, dtype=np.float64)
    if what[1].startswith("f"):
        err = np.abs(got - ref) / scale
        bound = TOL
    else:
        info = np.iinfo(what[1])
        err = np.abs(got - np.clip(np.rint(ref), info.min, info.max))
        bound = 1.0
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
        with self.assertRaises(TypeError):
            ndfilt.correlate1d(np.ones(4, np.int64), [1])
        with self.assertRaises(ValueError):
            ndfilt.correlate1d(np.ones((2,) * 5, np.float32), [1])
        with self.assertRaises(ValueError):
            ndfilt.set_device("quantum")

    def test_device_and_solvers(self):
        self.assertIn("cpu_direct", ndfilt.solvers()["sepfilter"])
        self.assertTrue(ndfilt.device())
        self.assertTrue(ndfilt.__version__.count(".") == 2)


def _cuda_available(mod):
    try:
        if mod == "cupy":
            import cupy
            return cupy.cuda.runtime.getDeviceCount() > 0
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


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

    def test_stream(self):
        import cupy as cp
        x = cp.arange(4096, dtype=cp.float32).reshape(64, 64)
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            y = ndfilt.correlate1d(x, [1, 2, 1], axis=0)
        s.synchronize()
        ref = ndi.correlate1d(cp.asnumpy(x), [1, 2, 1], axis=0)
        np.testing.assert_allclose(cp.asnumpy(y), ref, rtol=1e-6)


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


if __name__ == "__main__":
    unittest.main(verbosity=1)
