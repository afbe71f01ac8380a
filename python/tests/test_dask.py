# SPDX-License-Identifier: BSD-3-Clause
"""ndfilt.dask on a dask.distributed LocalCluster (two worker processes): every operation
against the unchunked ndfilt call on random arrays and random chunkings, chunks far smaller
than the kernels included, every mode; the README's zarr example; refusals. Skips (exit 77)
where dask, distributed or zarr are missing."""
import os
import re
import sys
import tempfile
import unittest

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
try:
    import dask.array as da
    import distributed
    import zarr  # noqa: F401
except ImportError as e:
    print(f"test_dask: skipped ({e}; scripts/deps.sh installs dask, distributed and zarr)")
    sys.exit(77)
import ndfilt  # noqa: E402
import ndfilt.dask as nd  # noqa: E402

SEED = int(os.environ.get("NDF_TEST_SEED", np.random.SeedSequence().entropy % 2**32))
if __name__ == "__main__":  # (the workers import this file too)
    print(f"seed: NDF_TEST_SEED={SEED}", file=sys.stderr)
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap", "grid-mirror",
         "grid-constant"]
client = None


def chunking(rng, shape, small=False):
    """Random chunks per axis: tiny ones (1 to 3) or up to the whole axis."""
    out = []
    for n in shape:
        parts, left = [], n
        while left:
            c = int(rng.integers(1, 4 if small else max(2, n // 2 + 1)))
            c = min(c, left)
            parts.append(c)
            left -= c
        out.append(tuple(parts))
    return tuple(out)


class DaskOps(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(SEED + hash(self._testMethodName) % 1000)

    def check(self, what, lazy, ref, bound=1e-6):
        self.assertIsInstance(lazy, da.Array, what)
        got = lazy.compute()
        self.assertEqual(got.shape, ref.shape, what)
        self.assertEqual(got.dtype, ref.dtype, what)
        diff = np.abs(got.astype(np.float64) - ref)
        k = np.unravel_index(np.argmax(diff), diff.shape)
        scale = max(float(np.abs(ref).max()), 1e-30)
        self.assertLessEqual(diff[k] / scale, bound,
                             f"{what}: worst at {k}: {got[k]} against the unchunked {ref[k]}")

    def data(self, shape, dtype=np.float32, small=None):
        x = self.rng.uniform(-1, 1, shape).astype(dtype)
        small = bool(self.rng.integers(2)) if small is None else small
        return x, da.from_array(x, chunks=chunking(self.rng, shape, small))

    def test_gaussian_every_mode(self):
        for mode in MODES:
            shape = tuple(int(n) for n in self.rng.integers(5, 30, 3))
            x, d = self.data(shape)
            sigma = [float(s) for s in self.rng.uniform(0.5, 4, 3)]
            order = [int(o) for o in self.rng.integers(0, 3, 3)]
            kw = dict(mode=mode, cval=0.75, truncate=float(self.rng.choice([2.0, 4.0])))
            self.check(f"gaussian {mode} {shape} chunks {d.chunks} sigma {sigma} order {order}",
                       nd.gaussian_filter(d, sigma, order=order, **kw),
                       ndfilt.gaussian_filter(x, sigma, order=order, **kw))

    def test_gaussian_axes_radius_dtypes(self):
        x, d = self.data((19, 23, 11), np.uint16, small=True)
        x = x.astype(np.uint16)
        d = da.from_array(x, chunks=d.chunks)
        kw = dict(axes=(0, 2), radius=[3, 5], mode=["nearest", "wrap"])
        self.check("gaussian axes/radius uint16", nd.gaussian_filter(d, [2.0, 6.0], **kw),
                   ndfilt.gaussian_filter(x, [2.0, 6.0], **kw))
        self.check("gaussian output float64", nd.gaussian_filter(d, 1.5, output=np.float64),
                   ndfilt.gaussian_filter(x, 1.5, output=np.float64))
        self.check("gaussian_filter1d", nd.gaussian_filter1d(d, 3.0, axis=1, order=2,
                                                             mode="mirror"),
                   ndfilt.gaussian_filter1d(x, 3.0, axis=1, order=2, mode="mirror"))

    def test_gaussian_recursive(self):
        # long lines cut into chunks much shorter than the recursion's reach
        for method, sigma in (("iir_deriche", 3.0), ("iir_vyv", 5.0), ("iir", 8.0)):
            x, d = self.data((301, 13), small=False)
            d = da.from_array(x, chunks=((7,) * 43, (13,)))
            self.check(f"gaussian {method} sigma {sigma}",
                       nd.gaussian_filter(d, sigma, mode="nearest", method=method),
                       ndfilt.gaussian_filter(x, sigma, mode="nearest", method=method))
        x, d = self.data((260, 40))
        self.check("gaussian auto, tolerance 1e-3",
                   nd.gaussian_filter(d, 4.0, mode="nearest", tolerance=1e-3),
                   ndfilt.gaussian_filter(x, 4.0, mode="nearest", tolerance=1e-3))

    def test_correlate_convolve(self):
        for conv in (False, True):
            for mode in MODES:
                shape = tuple(int(n) for n in self.rng.integers(4, 25, 3))
                x, d = self.data(shape)
                k = tuple(int(n) for n in self.rng.integers(1, 8, 3))
                w = self.rng.uniform(-1, 1, k)
                origin = [int(self.rng.integers(-(n // 2), (n - 1) // 2 + 1)) for n in k]
                f, g = (nd.convolve, ndfilt.convolve) if conv else (nd.correlate,
                                                                   ndfilt.correlate)
                self.check(f"{'convolve' if conv else 'correlate'} {mode} {shape} k {k} "
                           f"origin {origin} chunks {d.chunks}",
                           f(d, w, mode=mode, cval=-0.5, origin=origin),
                           g(x, w, mode=mode, cval=-0.5, origin=origin), 1e-5)

    def test_banks(self):
        x, d = self.data((17, 26), small=True)
        w = self.rng.uniform(-1, 1, (4, 5, 6))
        for f, g in ((nd.correlate_bank, ndfilt.correlate_bank),
                     (nd.convolve_bank, ndfilt.convolve_bank)):
            r = f(d, w, mode="reflect", origin=(1, -2))
            self.assertEqual(r.shape, (4, 17, 26))
            self.check(f.__name__, r, g(x, w, mode="reflect", origin=(1, -2)), 1e-5)

    def test_separable(self):
        for mode in MODES:
            x, d = self.data((21, 16, 9))
            axis = int(self.rng.integers(3))
            w = self.rng.uniform(-1, 1, int(self.rng.integers(1, 12)))
            origin = int(self.rng.integers(-(w.size // 2), (w.size - 1) // 2 + 1))
            for f, g in ((nd.correlate1d, ndfilt.correlate1d),
                         (nd.convolve1d, ndfilt.convolve1d)):
                self.check(f"{f.__name__} {mode} axis {axis} n {w.size} origin {origin}",
                           f(d, w, axis=axis, mode=mode, cval=1.0, origin=origin),
                           g(x, w, axis=axis, mode=mode, cval=1.0, origin=origin), 1e-5)
            ws = [self.rng.uniform(-1, 1, 5), None, self.rng.uniform(-1, 1, 10)]
            self.check(f"sepfilter {mode}", nd.sepfilter(d, ws, mode=mode, origin=[1, 0, -2]),
                       ndfilt.sepfilter(x, ws, mode=mode, origin=[1, 0, -2]), 1e-5)

    def test_ks(self):
        x, d = self.data((27, 33))
        s = self.rng.uniform(0, 2, x.shape).astype(np.float32)
        s[self.rng.random(x.shape) < 0.2] = 0
        ds = da.from_array(s, chunks=chunking(self.rng, x.shape, True))
        for index in ("input", "output"):
            self.check(f"ks {index}", nd.ks(d, ds, index=index),
                       ndfilt.ks(x, s, index=index), 1e-6)
            self.check(f"ks {index} r_max 7", nd.ks(d, ds, index=index, r_max=7),
                       ndfilt.ks(x, s, index=index, r_max=7), 1e-6)
        s2 = self.rng.uniform(0, 1, x.shape)
        ds2 = da.from_array(s2, chunks=d.chunks)
        self.check("ks per axis", nd.ks(d, [ds, ds2], normalize=True),
                   ndfilt.ks(x, [s, s2], normalize=True), 1e-6)

    def test_refusals(self):
        x = np.zeros((8, 8), np.float32)
        with self.assertRaises(TypeError):
            nd.gaussian_filter(x, 1.0)
        with self.assertRaises(TypeError):
            nd.gaussian_filter(da.from_array(x), 1.0, output=np.zeros_like(x))
        s = np.ones((8, 8), np.float32)
        s[3, 4] = np.nan  # found by the margin's reduction, before any graph
        with self.assertRaisesRegex(ValueError, "finite and >= 0"):
            nd.ks(da.from_array(x, chunks=4), da.from_array(s, chunks=4))
        s[3, 4] = -1  # found by the chunk's own ks when it runs
        with self.assertRaisesRegex(ValueError, "element"):
            nd.ks(da.from_array(x, chunks=4), da.from_array(s, chunks=4), r_max=3).compute()

    def test_readme_zarr_example(self):
        """The README's example, run as written in a directory holding in.zarr."""
        with open(os.path.join(HERE, "..", "..", "README.md")) as f:
            readme = f.read()
        m = re.search(r"<!-- dask example -->\s*```python\n(.*?)```", readme, re.S)
        self.assertIsNotNone(m, "README.md lacks the dask example")
        x = self.rng.uniform(0, 1, (40, 30, 20)).astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            da.from_array(x, chunks=(10, 15, 20)).to_zarr(os.path.join(tmp, "in.zarr"))
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                exec(compile(m.group(1), "README.md", "exec"), {})
            finally:
                os.chdir(cwd)
            got = da.from_zarr(os.path.join(tmp, "out.zarr")).compute()
        ref = ndfilt.gaussian_filter(x, 4.0, mode="nearest")
        self.assertLessEqual(float(np.abs(got - ref).max()), 1e-6 * float(np.abs(ref).max()))


if __name__ == "__main__":
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        r = unittest.main(exit=False, verbosity=1)
    finally:
        client.close()
        cluster.close()
    sys.exit(0 if r.result.wasSuccessful() else 1)
