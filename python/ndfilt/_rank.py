# SPDX-License-Identifier: BSD-3-Clause
"""Rank filters with scipy.ndimage's signatures, over ndf_plan_rank: minimum_filter(1d),
maximum_filter(1d), median_filter, rank_filter, percentile_filter. Exact in the input's dtype
(the result is one of the samples); a box's minimum or maximum costs the same at any size."""
import ctypes as C
import numbers

import numpy as np


def _nf():
    import ndfilt
    return ndfilt


def _footprint(nd, size, footprint, axes, separable):
    """The footprint over every axis of the input (1 on axes outside `axes`) as a C-contiguous
    uint8 array, the axes, and whether it is a whole box (then no footprint goes to the
    library). As scipy's: a minimum or maximum over a box (separable) takes its lengths in the
    order of `axes`; other footprints, given or of `size`, lie along the axes in increasing
    order (origins and modes follow `axes` in both)."""
    nf = _nf()
    ax = nf._axes(axes, nd)
    if footprint is None:
        if size is None:
            raise RuntimeError("no footprint or filter size provided")
        sizes = [nf._int(s, "size") for s in nf._per_axis(size, len(ax), "size")]
        if any(s < 1 for s in sizes):
            raise ValueError(f"size must be >= 1 on every axis, not {size!r}")
        fp = np.ones(sizes, np.uint8)
    else:
        fp = np.asarray(footprint)
        if fp.dtype != bool:
            fp = fp != 0
        fp = fp.astype(np.uint8)
        if fp.ndim != len(ax):
            raise RuntimeError("footprint array has incorrect shape.")
        if fp.size == 0 or not fp.any():
            raise ValueError("All-zero footprint is not supported.")
    box = bool(fp.all())
    if separable and box:
        fp = np.transpose(fp, np.argsort(ax))  # lengths given in the order of axes
    full = [1] * nd
    for i, a in enumerate(sorted(ax)):
        full[a] = fp.shape[i]
    return np.ascontiguousarray(fp.reshape(full)), ax, box


def _run_rank(input, rank_of, size, footprint, output, mode, cval, origin, axes, name):
    """rank_of(n) gives the rank among n footprint values (negative: from the largest)."""
    nf = _nf()
    src, dst, back, output_arg = nf._inputs(input, output)
    nd = src.desc.ndim
    fp, ax, box = _footprint(nd, size, footprint, axes, name.startswith(("minimum", "maximum")))
    n = int(fp.sum())
    rank = rank_of(n)
    modes = [nf._mode("reflect")] * nd
    origins = [0] * nd
    for a, m, o in zip(ax, nf._per_axis(mode, len(ax), "mode"),
                       nf._per_axis(origin, len(ax), "origin")):
        modes[a] = nf._mode(m)
        origins[a] = nf._int(o, "origin")
        k = fp.shape[a]
        if not -(k // 2) <= origins[a] <= (k - 1) // 2:
            raise ValueError(f"invalid origin {origins[a]} for a footprint of length {k} on "
                             f"axis {a}")
    cval = float(cval)
    ctx = nf._context_of(src)
    fshape = tuple(fp.shape)
    key = ("rank", ctx, nf._place_key(src.desc), nf._place_key(dst.desc), fshape,
           None if box else fp.tobytes(), rank, tuple(modes), tuple(origins), cval)

    def make(h):
        opts = nf._lib.RankOpts(C.sizeof(nf._lib.RankOpts), None)
        opts.cval = cval
        for d in range(nd):
            opts.mode[d], opts.origin[d] = modes[d], origins[d]
        fpp = None if box else fp.ctypes.data_as(C.POINTER(C.c_ubyte))
        return nf.lib.ndf_plan_rank(h, ctx, C.byref(src.desc), C.byref(dst.desc), rank, fpp,
                                    (C.c_int64 * nd)(*fshape), C.byref(opts))

    nf._run(key, ctx, src, dst, make)
    return nf._result(dst, back, output_arg)


def _check_rank(rank, n):
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"rank must be an integer, not {rank!r}")
    r = int(rank) + (n if rank < 0 else 0)
    if not 0 <= r < n:
        raise RuntimeError("rank not within filter footprint size")
    return r


def rank_filter(input, rank, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                origin=0, *, axes=None):
    """scipy.ndimage.rank_filter: the value of rank `rank` (0: the smallest; negative: from the
    largest) among the samples under the footprint (or a box of `size`)."""
    return _run_rank(input, lambda n: _check_rank(rank, n), size, footprint, output, mode, cval,
                     origin, axes, "rank_filter")


def median_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                  origin=0, *, axes=None):
    """scipy.ndimage.median_filter (rank n // 2 of the footprint's n samples)."""
    return _run_rank(input, lambda n: n // 2, size, footprint, output, mode, cval, origin, axes,
                     "median_filter")


def percentile_filter(input, percentile, size=None, footprint=None, output=None,
                      mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.percentile_filter: rank int(n * percentile / 100) (negative percentiles
    plus 100; 100: the largest)."""
    p = float(percentile)
    if p < 0:
        p += 100.0
    if not 0 <= p <= 100:
        raise RuntimeError("invalid percentile")

    def rank_of(n):
        return n - 1 if p == 100.0 else int(float(n) * p / 100.0)
    return _run_rank(input, rank_of, size, footprint, output, mode, cval, origin, axes,
                     "percentile_filter")


def minimum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                   origin=0, *, axes=None):
    """scipy.ndimage.minimum_filter (a box's: van Herk / Gil-Werman passes, any size at one
    cost)."""
    return _run_rank(input, lambda n: 0, size, footprint, output, mode, cval, origin, axes,
                     "minimum_filter")


def maximum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                   origin=0, *, axes=None):
    """scipy.ndimage.maximum_filter."""
    return _run_rank(input, lambda n: n - 1, size, footprint, output, mode, cval, origin, axes,
                     "maximum_filter")


def _filter1d(input, size, axis, output, mode, cval, origin, last):
    size = _nf()._int(size, "size")
    if size < 1:
        raise RuntimeError("incorrect filter size")
    return _run_rank(input, (lambda n: n - 1) if last else (lambda n: 0), size, None, output,
                     mode, cval, origin, [axis], "maximum_filter1d" if last else "minimum_filter1d")


def minimum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.minimum_filter1d."""
    return _filter1d(input, size, axis, output, mode, cval, origin, False)


def maximum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.maximum_filter1d."""
    return _filter1d(input, size, axis, output, mode, cval, origin, True)
