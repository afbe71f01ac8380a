# SPDX-License-Identifier: BSD-3-Clause
"""Arrays of more than 4 axes (OME-Zarr's t, c, z, y, x): filtered along up to 4 of them, the
others a batch. The library takes up to 4 axes; a call on more runs the filter on 4-axis views
(the filtered axes and, to make each view large, others that it leaves alone) for each index of
the remaining axes, into views of one output. A call that filters along more than 4 axes is
refused, saying so. Arrays of up to 4 axes go straight to the filter."""
import functools
import inspect
import itertools

import numpy as np

from . import _is_array, _np_dtype
from . import _per_axis as _list
from ._derivatives import _axis

MAX = 4


def _kind_empty(x, shape, dtype):
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        import cupy
        with cupy.cuda.Device(x.device.id):
            return cupy.empty(shape, dtype=dtype)
    if mod == "torch":
        import torch
        if not isinstance(dtype, torch.dtype):
            dtype = getattr(torch, np.dtype(dtype).name)
        return torch.empty(shape, dtype=dtype, device=x.device)
    from . import _host_empty  # page-locked where the current device is a GPU
    return _host_empty(shape, dtype)


def _too_many(name, axes):
    raise ValueError(f"{name}: ndfilt filters along at most {MAX} axes of an array at once, "
                     f"here {len(axes)} ({tuple(axes)}); the other axes of a larger array are "
                     "a batch: pass axes= (or per-axis values that leave the rest alone)")


def _views(shape, keep):
    """Index tuples of the views with the axes keep whole, over every index of the others."""
    batch = [a for a in range(len(shape)) if a not in keep]
    for idx in itertools.product(*[range(shape[b]) for b in batch]):
        t = [slice(None)] * len(shape)
        for b, i in zip(batch, idx):
            t[b] = i
        yield tuple(t)


def _fill(nd, filtered):
    """The axes each view keeps: the filtered ones and, up to 4, the last of the others (the
    fastest, so each view is large and contiguous)."""
    keep = set(filtered)
    for a in range(nd - 1, -1, -1):
        if len(keep) >= MAX:
            break
        keep.add(a)
    return sorted(keep)


def _run(x, out_arg, keep, call):
    """f on each view of x keeping the axes keep; call(view_in, view_out) -> f's result."""
    if _is_array(out_arg):
        out = out_arg
        if tuple(out.shape) != tuple(x.shape):
            raise ValueError(f"output shape {tuple(out.shape)} != input shape {tuple(x.shape)}")
    else:
        out = _kind_empty(x, tuple(x.shape), _np_dtype(x.dtype) if out_arg is None else out_arg)
    for t in _views(tuple(x.shape), keep):
        call(x[t], out[t])
    return out


# ---------------------------------------------------------------- adapters by signature

def axes_style(per_axis, trivial):
    """Filters with axes= (gaussian_filter, uniform_filter, the rank filters): per_axis names
    the parameters given per filtered axis (in the order of axes); trivial(args, nd) gives, when
    axes is None, the axes the call leaves alone."""
    def plan(a, nd, name):
        axes = a.get("axes")
        if axes is None:
            skip = trivial(a, nd)
            axes = [d for d in range(nd) if d not in skip]
            if a.get("footprint") is not None:  # its axes: all the array's; keep F's
                fp = np.asarray(a["footprint"])
                a["footprint"] = fp.reshape([fp.shape[d] for d in axes])
            for p in per_axis:
                if p in a and not (a[p] is None or isinstance(a[p], str) or np.ndim(a[p]) == 0):
                    a[p] = [_list(a[p], nd, p)[d] for d in axes]
        else:
            axes = [_axis(d, nd) for d in ([axes] if np.ndim(axes) == 0 else axes)]
        if len(axes) > MAX:
            _too_many(name, axes)
        keep = _fill(nd, axes)
        a["axes"] = [keep.index(d) for d in axes]
        if a.get("spacing") is not None and np.ndim(a["spacing"]) != 0:
            a["spacing"] = [_list(a["spacing"], nd, "spacing")[d] for d in keep]
        return keep
    return lambda f: _batched(f, plan)


def _batched(f, plan):
    """f with arrays of more than 4 axes: plan(a, nd) (a: the call's arguments, defaults
    included) returns the axes each view keeps, having rewritten a for the views."""
    sig = inspect.signature(f)

    @functools.wraps(f)
    def g(input, *args, **kw):
        nd = len(getattr(input, "shape", ()))
        if nd <= MAX:
            return f(input, *args, **kw)
        b = sig.bind(input, *args, **kw)
        b.apply_defaults()
        a = dict(b.arguments)
        keep = plan(a, nd, f.__name__)
        x, out_arg = a.pop("input"), a.pop("output")
        return _run(x, out_arg, keep, lambda vi, vo: f(vi, output=vo, **a))
    return g


def _views_of(a, nd, keep, names):
    """The per-axis values among names (one per axis of the array, or a scalar) for the views."""
    for p in names:
        if not (isinstance(a[p], str) or np.ndim(a[p]) == 0):
            a[p] = [_list(a[p], nd, p)[d] for d in keep]


def axis_style(f):
    """Filters along one axis (the 1-D forms): the views keep it and three more."""
    def plan(a, nd, name):
        axis = _axis(a["axis"], nd)
        keep = _fill(nd, [axis])
        a["axis"] = keep.index(axis)
        return keep
    return _batched(f, plan)


def kernel_style(f):
    """correlate and convolve: an N-D kernel with the array's axes; those of length 1 are
    left alone (a factor only), the others filtered."""
    def plan(a, nd, name):
        from . import _weights  # the binding's reading of weights (numpy, CuPy, DLPack...)
        w = _weights(a["weights"])
        if w.ndim != nd:
            raise ValueError(f"weights must have the input's {nd} dimensions, not shape {w.shape}")
        axes = [d for d in range(nd) if w.shape[d] > 1]
        if len(axes) > MAX:
            _too_many(name, axes)
        keep = _fill(nd, axes)
        a["weights"] = w.reshape([w.shape[d] for d in keep])
        _views_of(a, nd, keep, ("mode", "origin"))
        return keep
    return _batched(f, plan)


def weights_per_axis_style(f):
    """sepfilter: one kernel (or None) per axis; the axes with one are filtered."""
    def plan(a, nd, name):
        ws = list(a["weights"])
        if len(ws) != nd:
            raise ValueError(f"weights: one kernel (or None) per axis ({nd}), not {len(ws)}")
        axes = [d for d in range(nd) if ws[d] is not None]
        if len(axes) > MAX:
            _too_many(name, axes)
        keep = _fill(nd, axes)
        a["weights"] = [ws[d] for d in keep]
        _views_of(a, nd, keep, ("mode", "origin"))
        return keep
    return _batched(f, plan)


# ---------------------------------------------------------------- which axes a call leaves alone

def gaussian_trivial(a, nd):
    sig = a.get("sigma") if a.get("fwhm") is None else a.get("fwhm")
    s, o = _list(sig, nd, "sigma"), _list(a.get("order", 0), nd, "order")
    return {d for d in range(nd) if (s[d] is None or float(s[d]) == 0) and int(o[d]) == 0}


def size_trivial(a, nd):
    if a.get("footprint") is not None:
        fp = np.asarray(a["footprint"])
        if fp.ndim != nd:
            raise RuntimeError("footprint array has incorrect shape.")
        return {d for d in range(nd) if fp.shape[d] == 1}
    s = _list(a.get("size"), nd, "size")
    return {d for d in range(nd) if s[d] is not None and int(s[d]) == 1}
