# SPDX-License-Identifier: BSD-3-Clause
"""ndfilt.dask - ndfilt's filters on dask arrays, through dask's own overlap machinery.

Each function takes a dask array (chunks of numpy or CuPy arrays) and the arguments of the
ndfilt function of the same name, and returns a lazy dask array of the same shape (a bank: a
leading axis of F) whose chunks are the input's, or larger where a chunk is smaller than the
filter's reach. Each chunk is filtered by ndfilt together with a margin of its neighbours
(dask.array.overlap.overlap), and the margin is cut off again, so the result equals the
unchunked call:

- the margin on each axis is the kernel's reach (the recursive Gaussian: the length past which
  its impulse response holds less than 5e-7 of its mass, so that the error stays under 1e-6 of
  the output's scale);
- at the array's true edges nothing is added (dask's boundary 'none'): ndfilt applies scipy's
  mode there itself, every mode included; 'wrap' (and 'grid-wrap') axes take the other end's
  data (dask's 'periodic');
- a chunk smaller than the margin is merged with its neighbours first; an axis shorter than the
  margin becomes one chunk.

The work runs wherever dask runs it: threads, processes, a dask.distributed cluster, or
dask_cuda's workers with CuPy chunks. `output` may be a dtype, not an array. Example (zarr in,
zarr out)::

    import dask.array as da, ndfilt.dask as nd
    x = da.from_zarr("in.zarr")
    nd.gaussian_filter(x, 4.0, mode="nearest").to_zarr("out.zarr")
"""
import math
import numbers

import numpy as np

import dask.array as da
from dask.array.overlap import ensure_minimum_chunksize, overlap
from dask.array.utils import meta_from_array

import ndfilt as _nf
from ndfilt import _per_axis
from ndfilt._derivatives import _axis

__all__ = ["gaussian_filter", "gaussian_filter1d", "correlate1d", "convolve1d", "sepfilter",
           "correlate", "convolve", "correlate_bank", "convolve_bank", "ks"]

_WRAP = ("wrap", "grid-wrap")


def _dask(x):
    if not isinstance(x, da.Array):
        raise TypeError(f"ndfilt.dask takes dask arrays, not {type(x).__name__} (use ndfilt)")
    return x


def _out_dtype(x, output):
    if output is None:
        return x.dtype
    try:
        return np.dtype(output)
    except TypeError:
        raise TypeError("output must be None or a dtype here (dask arrays are not written "
                        "in place)") from None


def _trim(out, depth, periodic, lead, block_info):
    """out (a chunk's result over the chunk and its margins) cut back to the chunk: a margin
    was added on a side that has a neighbour, or on both sides of a periodic axis."""
    info = block_info[0]
    loc, num = info["chunk-location"], info["num-chunks"]
    sl = [slice(None)] * lead
    for a, d in enumerate(depth):
        lo = d if d and (periodic[a] or loc[a] > 0) else 0
        hi = d if d and (periodic[a] or loc[a] < num[a] - 1) else 0
        sl.append(slice(lo, out.shape[lead + a] - hi))
    return out[tuple(sl)]


def _block(*blocks, fn, kwargs, depth, periodic, lead, block_info=None):
    try:
        out = fn(*blocks, **kwargs)
    except ValueError as e:  # say where: ndfilt's element numbers count within the chunk
        info = block_info[0]
        start = []
        for a, d in enumerate(depth):
            i, g0 = info["chunk-location"][a], info["array-location"][a][0]
            pads_before = 2 * i if periodic[a] else max(2 * i - 1, 0)  # margins before it
            start.append(g0 - pads_before * d - (d if periodic[a] or i > 0 else 0))
        raise ValueError(f"{e} (in the chunk whose data, margin included, starts at index "
                         f"{tuple(start)} of the input; periodic margins wrap)") from None
    return _trim(out, depth, periodic, lead, block_info)


def _apply(fn, arrays, depth, modes, kwargs, dtype, bank=0):
    """fn(*chunks, **kwargs) over arrays (the image first; the others chunked like it) with
    margins depth (one per axis) and the image's modes; bank > 0: fn adds a leading axis of
    that length."""
    x = arrays[0]
    nd = x.ndim
    depth = [int(d) for d in depth]
    chunks = list(x.chunks)
    for a in range(nd):
        if depth[a] <= 0:
            depth[a] = 0
        elif depth[a] >= x.shape[a] or len(chunks[a]) == 1:
            chunks[a], depth[a] = (x.shape[a],), 0  # the whole axis in each chunk
        elif min(chunks[a]) < depth[a]:
            chunks[a] = ensure_minimum_chunksize(depth[a], chunks[a])
    chunks = tuple(chunks)
    periodic = [modes[a] in _WRAP and depth[a] > 0 for a in range(nd)]
    boundary = {a: "periodic" if periodic[a] else "none" for a in range(nd)}
    dep = {a: depth[a] for a in range(nd)}
    ins = [overlap(a.rechunk(chunks), depth=dep, boundary=boundary) for a in arrays]
    meta = meta_from_array(x._meta, ndim=nd + (1 if bank else 0), dtype=dtype)
    extra = dict(new_axis=0, chunks=((bank,),) + chunks) if bank else dict(chunks=chunks)
    return da.map_blocks(_block, *ins, fn=fn, kwargs=kwargs, depth=depth, periodic=periodic,
                         lead=1 if bank else 0, dtype=dtype, meta=meta, **extra)


def _reach(n, origin):
    """The margin a kernel of n taps with origin needs on either side (for correlation and
    convolution alike)."""
    return n // 2 + abs(int(origin)) + 1


_iir_depths = {}


def _iir_depth(sigma, method, iir_order):
    """The recursive Gaussian's margin at sigma: the distance past which its impulse response
    (computed by ndfilt) holds at most 5e-7 of its mass."""
    key = (float(sigma), method, int(iir_order))
    if key not in _iir_depths:
        half = int(math.ceil(40 * sigma)) + 16
        line = np.zeros(2 * half + 1, np.float32)
        line[half] = 1
        h = np.abs(np.asarray(_nf.gaussian_filter1d(line, sigma, mode="nearest", method=method,
                                                    iir_order=iir_order), np.float64))
        by_distance = np.zeros(half + 1)
        np.add.at(by_distance, np.abs(np.arange(line.size) - half), h)
        beyond = h.sum() - np.cumsum(by_distance)  # beyond[d]: the mass further than d
        _iir_depths[key] = int(np.argmax(beyond <= 5e-7 * h.sum()))
    return _iir_depths[key]


# ----------------------------------------------------------------- Gaussian

def _gauss_depths(nd, sigma, truncate, radius, axes, method, iir_order, tolerance):
    """The margins of a Gaussian: the FIR kernel's radius, or the recursive filter's reach
    (auto with a tolerance may run either: the larger)."""
    axes = list(range(nd)) if axes is None else [_axis(a, nd) for a in axes]
    sig = _per_axis(sigma, len(axes), "sigma")
    rad = _per_axis(radius, len(axes), "radius") if radius is not None else [None] * len(axes)
    m = method or "auto"
    fir = m in ("auto", "fir", "cpu_sep", "cuda_sep")
    recursive = not fir or (m == "auto" and tolerance)
    named = "iir_deriche" if m in ("auto", "iir", "cpu_iir", "cuda_iir") else m
    depth = [0] * nd
    for a, s, r in zip(axes, sig, rad):
        s = float(s)
        if not s > 1e-15:
            continue
        d = int(r) if r is not None and r > 0 else int(float(truncate) * s + 0.5)
        if recursive:
            d = max(d if fir else 0, _iir_depth(s, named, 0 if m == "auto" else iir_order))
        depth[a] = max(depth[a], d + 1)
    return depth


def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0,
                    *, radius=None, axes=None, method="auto", iir_order=0, tolerance=0.0):
    """ndfilt.gaussian_filter on a dask array (see the module's notes)."""
    x = _dask(input)
    depth = _gauss_depths(x.ndim, sigma, truncate, radius, axes, method, iir_order, tolerance)
    modes = _per_axis(mode, x.ndim if axes is None else len(axes), "mode")
    if axes is not None:
        full = ["reflect"] * x.ndim
        for a, m in zip(axes, modes):
            full[_axis(a, x.ndim)] = m
        modes = full
    dtype = _out_dtype(x, output)
    kw = dict(sigma=sigma, order=order, output=dtype, mode=mode, cval=cval, truncate=truncate,
              radius=radius, axes=axes, method=method, iir_order=iir_order, tolerance=tolerance)
    return _apply(_nf.gaussian_filter, [x], depth, modes, kw, dtype)


def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None, method="auto", iir_order=0, tolerance=0.0):
    """ndfilt.gaussian_filter1d on a dask array."""
    x = _dask(input)
    ax = _axis(axis, x.ndim)
    depth = _gauss_depths(x.ndim, sigma, truncate, radius, [ax], method, iir_order, tolerance)
    modes = ["reflect"] * x.ndim
    modes[ax] = mode
    dtype = _out_dtype(x, output)
    kw = dict(sigma=sigma, axis=ax, order=order, output=dtype, mode=mode, cval=cval,
              truncate=truncate, radius=radius, method=method, iir_order=iir_order,
              tolerance=tolerance)
    return _apply(_nf.gaussian_filter1d, [x], depth, modes, kw, dtype)


# ----------------------------------------------------------------- separable

def _filter1d(fn, input, weights, axis, output, mode, cval, origin, method):
    x = _dask(input)
    ax = _axis(axis, x.ndim)
    w = np.asarray(weights, dtype=np.float64)
    depth = [0] * x.ndim
    depth[ax] = _reach(w.size, origin)
    modes = ["reflect"] * x.ndim
    modes[ax] = mode
    dtype = _out_dtype(x, output)
    kw = dict(weights=w, axis=ax, output=dtype, mode=mode, cval=cval, origin=origin,
              method=method)
    return _apply(fn, [x], depth, modes, kw, dtype)


def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
                method="auto"):
    """ndfilt.correlate1d on a dask array."""
    return _filter1d(_nf.correlate1d, input, weights, axis, output, mode, cval, origin, method)


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
               method="auto"):
    """ndfilt.convolve1d on a dask array."""
    return _filter1d(_nf.convolve1d, input, weights, axis, output, mode, cval, origin, method)


def sepfilter(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
              convolve=False, method="auto"):
    """ndfilt.sepfilter on a dask array."""
    x = _dask(input)
    ws = [None if w is None else np.asarray(w, dtype=np.float64) for w in weights]
    if len(ws) != x.ndim:
        raise ValueError(f"weights has {len(ws)} entries; expected one per axis ({x.ndim})")
    origins = _per_axis(origin, x.ndim, "origin")
    depth = [0 if w is None else _reach(w.size, o) for w, o in zip(ws, origins)]
    modes = _per_axis(mode, x.ndim, "mode")
    dtype = _out_dtype(x, output)
    kw = dict(weights=ws, output=dtype, mode=mode, cval=cval, origin=origin, convolve=convolve,
              method=method)
    return _apply(_nf.sepfilter, [x], depth, modes, kw, dtype)


# ----------------------------------------------------------------- correlate / convolve

def _filterNd(fn, input, weights, output, mode, cval, origin, method, bank=False):
    x = _dask(input)
    w = np.asarray(weights, dtype=np.float64)
    kshape = w.shape[1:] if bank else w.shape
    if len(kshape) != x.ndim:
        raise ValueError(f"weights has {len(kshape)} kernel axes; the input has {x.ndim}")
    origins = _per_axis(origin, x.ndim, "origin")
    depth = [_reach(n, o) for n, o in zip(kshape, origins)]
    modes = _per_axis(mode, x.ndim, "mode")
    dtype = _out_dtype(x, output)
    kw = dict(weights=w, output=dtype, mode=mode, cval=cval, origin=origin, method=method)
    return _apply(fn, [x], depth, modes, kw, dtype, bank=w.shape[0] if bank else 0)


def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
              method="auto"):
    """ndfilt.correlate on a dask array."""
    return _filterNd(_nf.correlate, input, weights, output, mode, cval, origin, method)


def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
             method="auto"):
    """ndfilt.convolve on a dask array."""
    return _filterNd(_nf.convolve, input, weights, output, mode, cval, origin, method)


def correlate_bank(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
                   method="auto"):
    """ndfilt.correlate_bank on a dask array: shape (F,) + input.shape, each chunk's input
    read once for the F kernels."""
    return _filterNd(_nf.correlate_bank, input, weights, output, mode, cval, origin, method,
                     bank=True)


def convolve_bank(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
                  method="auto"):
    """ndfilt.convolve_bank on a dask array."""
    return _filterNd(_nf.convolve_bank, input, weights, output, mode, cval, origin, method,
                     bank=True)


# ----------------------------------------------------------------- ks

def _ks_block(image, *maps, kwargs):
    return _nf.ks(image, list(maps) if len(maps) > 1 else maps[0], **kwargs)


def ks(image, sigma, *, index="input", n_sigma=3.0, normalize=False, method="auto",
       deterministic=False, r_max=None):
    """ndfilt.ks on a dask array with sigma maps chunked like it (dask arrays of the image's
    shape: one, or one per axis), output 'same'. The margin is the largest radius
    ceil(n_sigma * sigma): r_max when given (a pixel past it is an error when its chunk
    runs), else computed from the maps (one reduction over them before the graph is built)."""
    x = _dask(image)
    per_axis = isinstance(sigma, (list, tuple))
    maps = [da.asarray(m) for m in (sigma if per_axis else [sigma])]
    for m in maps:
        if m.shape != x.shape:
            raise ValueError(f"a sigma map has shape {m.shape}, the image {x.shape}")
    if r_max is None:
        top = max(float(m.max().compute()) for m in maps)
        if not (math.isfinite(top) and top >= 0):
            raise ValueError("sigma maps must be finite and >= 0")
        r = int(math.ceil(float(n_sigma) * top))
    else:
        if isinstance(r_max, bool) or not isinstance(r_max, numbers.Integral) or r_max < 0:
            raise ValueError(f"r_max must be an integer >= 0, not {r_max!r}")
        r = int(r_max)
    kw = dict(index=index, n_sigma=n_sigma, normalize=normalize, method=method,
              deterministic=deterministic, r_max=r or None)
    return _apply(_ks_block, [x] + maps, [r] * x.ndim, ["constant"] * x.ndim, {"kwargs": kw},
                  x.dtype)
