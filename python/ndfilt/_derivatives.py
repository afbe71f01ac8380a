# SPDX-License-Identifier: BSD-3-Clause
"""Derivative filters with scipy.ndimage's signatures: sobel, prewitt and laplace each in one
pass of ndfilt's separable or N-D correlation; gaussian_laplace, gaussian_gradient_magnitude
and the generic forms as scipy defines them, a sum over axes of ndfilt filters."""
import functools
import inspect

import numpy as np


def _nf():
    import ndfilt
    return ndfilt


from . import _is_array, _np_dtype  # noqa: E402  (the binding's, defined before this import)


def _producers(f):
    """f, which takes numpy, CuPy and torch arrays, taking DLPack producers (JAX, ...) too:
    their numpy, CuPy or torch view in (callables that f calls get those), a result of their
    kind out (see ndfilt._from_dlpack); output must then be None or a dtype."""
    at = list(inspect.signature(f).parameters).index("output") - 1  # in args past input

    @functools.wraps(f)
    def g(input, *args, **kwargs):
        if type(input) is np.ndarray:  # the common case, without a look-up
            return f(input, *args, **kwargs)
        nf = _nf()
        if nf._kind(input) != "dlpack":
            return f(input, *args, **kwargs)
        nf._no_output_array(args[at] if len(args) > at else kwargs.get("output"))
        x, _, back = nf._from_dlpack(input)
        return back(f(x, *args, **kwargs))

    return g


def _ndim(x):
    return len(x.shape)


def _axis(axis, nd):
    import numbers
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not -nd <= axis < nd:
        raise ValueError(f"axis {axis!r} is out of range for an array of {nd} axes")
    return int(axis) % nd


def _modes(mode, nd):
    return _nf()._per_axis(mode, nd, "mode")


def _moved(x, axis):
    """x with axis first and the others in their order (a view, of numpy, CuPy or torch)."""
    if type(x).__module__.split(".")[0] == "torch":
        return x.movedim(axis, 0)
    return x.swapaxes(0, axis) if axis in (0, 1) else _mod(x).moveaxis(x, axis, 0)


def _mod(x):
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    return np


def _new_like(x, dtype):
    """A new array of x's kind, shape and device, of dtype (None: x's)."""
    kind = type(x).__module__.split(".")[0]
    if kind == "torch":
        import torch
        if dtype is not None and not isinstance(dtype, torch.dtype):
            dtype = getattr(torch, np.dtype(dtype).name)
        return torch.empty(tuple(x.shape), dtype=dtype or x.dtype, device=x.device)
    return _mod(x).empty(x.shape, dtype=dtype or x.dtype)


def _smoothed_derivative(input, axis, output, mode, cval, smooth, method):
    """[-1, 0, 1] along axis, then smooth along the other axes in their order, as scipy's
    passes go (with mode constant the order decides where cval enters): one sepfilter pass
    over views with axis first."""
    nd = _ndim(input)
    axis = _axis(axis, nd)
    modes = _modes(mode, nd)
    out = output if _is_array(output) else _new_like(input, output)
    w = [np.asarray(smooth, np.float64)] * nd
    w[0] = np.array([-1.0, 0.0, 1.0])
    order = [axis] + [a for a in range(nd) if a != axis]
    _nf().sepfilter(_moved(input, axis), w, output=_moved(out, axis),
                    mode=[modes[a] for a in order], cval=cval, method=method)
    return out


@_producers
def sobel(input, axis=-1, output=None, mode="reflect", cval=0.0, *, method="auto"):
    """Sobel derivative along axis, as scipy.ndimage.sobel: [-1, 0, 1] along it and [1, 2, 1]
    along every other axis, in one separable pass. Arrays, dtypes, output and method as
    sepfilter (float32 arithmetic; integer outputs rounded and clamped where scipy's wrap)."""
    return _smoothed_derivative(input, axis, output, mode, cval, [1.0, 2.0, 1.0], method)


@_producers
def prewitt(input, axis=-1, output=None, mode="reflect", cval=0.0, *, method="auto"):
    """Prewitt derivative along axis, as scipy.ndimage.prewitt ([1, 1, 1] smoothing)."""
    return _smoothed_derivative(input, axis, output, mode, cval, [1.0, 1.0, 1.0], method)


@_producers
def laplace(input, output=None, mode="reflect", cval=0.0, *, method="auto"):
    """The discrete Laplacian, as scipy.ndimage.laplace: the sum over axes of [1, -2, 1], in
    one pass of an N-D correlation with the cross-shaped kernel (its zeros skipped); a float64
    numpy array as scipy computes it, one float64 correlate1d an axis, summed in float64."""
    if isinstance(input, np.ndarray) and input.dtype == np.float64 and method == "auto":
        return generic_laplace(input, lambda x, a, o, m, c: _nf().correlate1d(
            x, [1.0, -2.0, 1.0], a, o, mode=m, cval=c), output=output, mode=mode, cval=cval)
    nd = _ndim(input)
    k = np.zeros((3,) * nd)
    c = (1,) * nd
    k[c] = -2.0 * nd
    for a in range(nd):
        for s in (0, 2):
            i = list(c)
            i[a] = s
            k[tuple(i)] = 1.0
    return _nf().correlate(input, k, output=output, mode=_modes(mode, nd), cval=cval,
                           method=method)


def _work_dtype(input, output):
    """The dtype the terms are computed and summed in: float64 for a float64 output or input
    (without an output given), else float32."""
    out_dt = output.dtype if _is_array(output) else output
    dt = _np_dtype(out_dt) if out_dt is not None else None
    src = _np_dtype(input.dtype)
    return np.float64 if dt == np.float64 or (dt is None and src == np.float64) else np.float32


def _finish(acc, input, output):
    """acc (the sum, of the work dtype) as the output scipy gives: into output (an array), or a
    new array of output's dtype (None: the input's). A float target of acc's dtype takes acc;
    others go through ndfilt's own conversion (a correlation with [1]: rounded and clamped to
    integers, as every filter's output)."""
    if _is_array(output):
        return _nf().correlate1d(acc, [1.0], axis=0, output=output)
    dt = output if output is not None else input.dtype
    if str(dt).replace("torch.", "") == str(acc.dtype).replace("torch.", ""):
        return acc
    return _nf().correlate1d(acc, [1.0], axis=0, output=dt)


def _sum_over_axes(input, derivative, output, mode, cval, extra_arguments, extra_keywords,
                   add):
    """acc = add(acc, derivative(input, axis, work dtype, mode, cval, ...), last axis?) over the
    axes from acc = None, in the work dtype (float32; float64 for a float64 output)."""
    nd = _ndim(input)
    modes = _modes(mode, nd)
    kw = dict(extra_keywords or {})
    wd = _work_dtype(input, output)
    acc = None
    for a in range(nd):
        acc = add(acc, derivative(input, a, wd, modes[a], cval, *extra_arguments, **kw),
                  a == nd - 1)
    return acc


@_producers
def generic_laplace(input, derivative2, output=None, mode="reflect", cval=0.0,
                    extra_arguments=(), extra_keywords=None):
    """The sum over axes of derivative2(input, axis, output, mode, cval, *extra_arguments,
    **extra_keywords), as scipy.ndimage.generic_laplace; the terms are taken as float32 (float64
    for a float64 output) and summed so, then converted to the output."""
    acc = _sum_over_axes(input, derivative2, output, mode, cval, extra_arguments, extra_keywords,
                         lambda acc, t, last: t if acc is None else acc + t)
    return _finish(acc, input, output)


@_producers
def generic_gradient_magnitude(input, derivative, output=None, mode="reflect", cval=0.0,
                               extra_arguments=(), extra_keywords=None):
    """sqrt of the sum over axes of derivative(input, axis, ...)**2, as
    scipy.ndimage.generic_gradient_magnitude (terms as generic_laplace's)."""
    acc = _sum_over_axes(input, derivative, output, mode, cval, extra_arguments, extra_keywords,
                         _add_square)
    return _finish(acc, input, output)


@functools.lru_cache(maxsize=None)
def _square_kernels():
    """CuPy kernels: acc + t*t into acc, and the same then its square root (one pass over the
    arrays each, where separate products, sums and roots took one pass each)."""
    import cupy
    opts = ("--fmad=false",)  # the product rounded before the sum, as numpy and scipy round it
    return (cupy.ElementwiseKernel("T t, T a", "T o", "o = a + t * t", "ndfilt_add_square",
                                   options=opts),
            cupy.ElementwiseKernel("T t, T a", "T o", "o = sqrt(a + t * t)", "ndfilt_add_root",
                                   options=opts))


def _add_square(acc, t, last):
    """acc + t*t (t*t for the first term), its square root after the last term; t unchanged (a
    derivative the caller gives may return a view), acc ours to change."""
    if acc is None:
        acc = t * t
    elif _mod(t) is not np and type(acc) is type(t) and acc.dtype == t.dtype and \
            acc.dtype.kind == "f" and acc.shape == t.shape:  # CuPy: one kernel
        return _square_kernels()[int(last)](t, acc, acc)
    else:
        acc += t * t
    return acc ** 0.5 if last else acc


def _gaussian_derivative(nd, sigma, order, spacing, fwhm, kwargs):
    """derivative(x, axis, output, mode, cval): gaussian_filter of order `order` along axis;
    with spacing, sigma (or fwhm) a length in its units and the derivative per unit length."""
    if spacing is None and fwhm is None and sigma is not None:
        sig = list(sigma) if np.ndim(sigma) else [sigma] * nd
        scale = None
    else:
        nf = _nf()
        sig = nf._sigma_voxels(nd, list(range(nd)), sigma, fwhm, spacing)
        scale = None if spacing is None else [s ** -order for s in nf._spacing(spacing, nd)]

    def derivative(x, axis, out, m, c):
        orders = [0] * nd
        orders[axis] = order
        d = _nf().gaussian_filter(x, sig, orders, out, m, c, **kwargs)
        if scale is not None and scale[axis] != 1:
            d *= scale[axis]  # a new array of the work dtype (float32 or float64)
        return d

    return derivative


@_producers
def gaussian_laplace(input, sigma=None, output=None, mode="reflect", cval=0.0, *, spacing=None,
                     fwhm=None, **kwargs):
    """The Laplacian of the Gaussian, as scipy.ndimage.gaussian_laplace: the sum over axes of
    gaussian_filter with order 2 along that axis; kwargs go to gaussian_filter (truncate,
    radius, method). spacing (the voxel size per axis, or a scalar) makes sigma, or fwhm in its
    place, a length in its units, as gaussian_filter's, and each second derivative one per
    unit length squared (divided by spacing[axis]**2): the Laplacian in physical units, as
    ITK's LaplacianRecursiveGaussian."""
    nd = _ndim(input)
    return generic_laplace.__wrapped__(  # (input is no DLPack producer here)
        input, _gaussian_derivative(nd, sigma, 2, spacing, fwhm, kwargs), output, mode, cval)


@_producers
def gaussian_gradient_magnitude(input, sigma=None, output=None, mode="reflect", cval=0.0, *,
                                spacing=None, fwhm=None, **kwargs):
    """The Gaussian gradient's magnitude, as scipy.ndimage.gaussian_gradient_magnitude: sqrt of
    the sum over axes of gaussian_filter with order 1 along that axis, squared. spacing and
    fwhm as gaussian_laplace's: with spacing, each derivative is per unit length (divided by
    spacing[axis]), the gradient in physical units."""
    nd = _ndim(input)
    return generic_gradient_magnitude.__wrapped__(
        input, _gaussian_derivative(nd, sigma, 1, spacing, fwhm, kwargs), output, mode, cval)


def _sizes(size, nd, name="size"):
    import numbers
    sizes = [size] * nd if np.ndim(size) == 0 else list(size)
    if len(sizes) != nd:
        raise ValueError(f"{name} has {len(sizes)} entries; expected one per axis ({nd})")
    for v in sizes:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be integers >= 1, not {v!r}")
    return [int(v) for v in sizes]


@_producers
def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0, *,
                     method="auto"):
    """The mean over size samples along axis, as scipy.ndimage.uniform_filter1d: on the CPU by
    running sums in float64 (cpu_box: cost independent of size) where the input is finite,
    else, and on the GPU, as a correlation with size weights of 1/size. A NaN or Inf reaches
    the outputs whose window holds it (scipy's running sums carry it to the end of the line)."""
    nd = _ndim(input)
    axis = _axis(axis, nd)
    n = _sizes(size, 1)[0]
    return _nf().correlate1d(input, np.full(n, 1.0 / n), axis, output, mode, cval, origin,
                             method=method)


@_producers
def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *,
                   axes=None, method="auto"):
    """The mean over a box, as scipy.ndimage.uniform_filter: uniform_filter1d along each axis
    of axes (all when None) whose size is above 1, in one separable plan. size, mode and origin:
    one value or one per axis of axes."""
    nd = _ndim(input)
    ax = list(range(nd)) if axes is None else [_axis(a, nd) for a in axes]
    if len(set(ax)) != len(ax):
        raise ValueError(f"axes {axes!r} repeat an axis")
    sizes = _sizes(size, len(ax))
    modes = _modes(mode, len(ax))
    origins = [origin] * len(ax) if np.ndim(origin) == 0 else list(origin)
    if len(origins) != len(ax):
        raise ValueError(f"origin has {len(origins)} entries; expected one per axis ({len(ax)})")
    w, m, o = [None] * nd, ["reflect"] * nd, [0] * nd
    for a, n, md, org in zip(ax, sizes, modes, origins):
        if n > 1:
            w[a], m[a], o[a] = np.full(n, 1.0 / n), md, org
    return _nf().sepfilter(input, w, output=output, mode=m, cval=cval, origin=o, method=method)


__all__ = ["uniform_filter", "uniform_filter1d", "sobel", "prewitt", "laplace", "generic_laplace", "generic_gradient_magnitude",
           "gaussian_laplace", "gaussian_gradient_magnitude"]
