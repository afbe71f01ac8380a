# SPDX-License-Identifier: BSD-3-Clause
"""Masked and NaN-aware smoothing by normalised convolution: with m the valid samples (mask=,
and not NaN under nan_policy='omit') and f a linear filter, out = f(x m) / f(m), the filter's
weighted mean over the valid samples of each footprint (astropy.convolution's NaN
interpolation, AFNI 3dBlurInMask, smoothing within a brain mask). Samples outside the array
follow the filter's mode (reflected, nearest, wrapped valid or invalid samples); under
'constant' they are valid samples of value cval, as in astropy's boundary='fill' with
nan_treatment='interpolate'. An output whose footprint holds no valid sample (f(m) under 1e-6
of its largest value) is NaN."""
import functools
import inspect

import numpy as np

from . import _is_array, _kind, _np_dtype

NAN_POLICIES = ("propagate", "omit", "raise")


def maskable(f):
    """f (a linear filter with scipy's signature: input first, output and mode/cval among its
    parameters) with the keyword-only mask= and nan_policy=. Without them f runs unchanged."""
    sig = inspect.signature(f)

    @functools.wraps(f)
    def g(input, *args, mask=None, nan_policy="propagate", **kw):
        if mask is None and nan_policy == "propagate":
            return f(input, *args, **kw)
        if nan_policy not in NAN_POLICIES:
            raise ValueError(f"nan_policy must be one of {NAN_POLICIES}, not {nan_policy!r}")
        bound = sig.bind(input, *args, **kw)
        bound.apply_defaults()
        return _normalized(f, bound.arguments, mask, nan_policy)

    g.__doc__ = (f.__doc__ or "") + (
        "\n\n    mask=, nan_policy=: masked and NaN-aware smoothing by normalised convolution: "
        "mask (True: a valid sample; input's shape) and nan_policy ('propagate': scipy's; "
        "'omit': NaN samples left out; 'raise': ValueError on NaN) give f(x m) / f(m), NaN "
        "where no valid sample is in reach (ndfilt._masked).")
    g.__signature__ = sig.replace(parameters=list(sig.parameters.values()) + [
        inspect.Parameter("mask", inspect.Parameter.KEYWORD_ONLY, default=None),
        inspect.Parameter("nan_policy", inspect.Parameter.KEYWORD_ONLY, default="propagate")])
    return g


def _host_or_cupy(a):
    """a as a numpy or CuPy array (torch tensors by their views: numpy on the CPU, CuPy through
    DLPack on a GPU), and its torch-ness."""
    kind = _kind(a)
    if kind == "torch-cpu":
        return a.numpy(), True
    if kind == "torch":
        import cupy
        return cupy.from_dlpack(a), True
    return (a, False) if kind == "cupy" else (np.asarray(a), False)


def _valid(x, xp, mask, nan_policy):
    """The valid samples of x: mask's non-zero ones, less NaN under 'omit' ('raise': an error
    if there is one); None where nothing is left out."""
    valid = None
    if mask is not None:
        m = _host_or_cupy(mask)[0]
        if tuple(m.shape) != tuple(x.shape):
            raise ValueError(f"mask shape {tuple(m.shape)} != input shape {tuple(x.shape)}")
        valid = xp.asarray(m) != 0
    if np.issubdtype(x.dtype, np.floating) and nan_policy != "propagate":
        nan = xp.isnan(x)
        if nan_policy == "raise" and bool(nan.any()):
            raise ValueError("the input holds NaN (nan_policy='raise')")
        if nan_policy == "omit":
            valid = ~nan if valid is None else valid & ~nan
    return valid


def _ratio(xp, num, den):
    """num / den, NaN where den is under 1e-6 of its largest value (no valid sample in reach)."""
    tiny = 1e-6 * float(xp.abs(den).max()) if den.size else 0.0
    ok = xp.abs(den) > tiny
    res = num / xp.where(ok, den, xp.float32(1))
    res[~ok] = np.nan
    return res


def _normalized(f, args, mask, nan_policy):
    x, torch_in = _host_or_cupy(args["input"])
    xp = np if isinstance(x, np.ndarray) else __import__("cupy")
    valid = _valid(x, xp, mask, nan_policy)
    if valid is None:  # nothing left out: the filter itself
        return f(**args)
    call = dict(args)
    call["output"] = None
    call["input"] = xp.where(valid, x.astype(xp.float32, copy=False), xp.float32(0))
    num = f(**call)
    call["input"] = valid.astype(xp.float32)
    if "cval" in call:
        call["cval"] = 1.0  # under 'constant', beyond the edge: valid samples (cval's in num)
    res = _ratio(xp, num, f(**call))
    return _deliver(res, args.get("output"), x, torch_in)


def _deliver(res, out_arg, x, torch_in):
    """res (float32) in output's form: written into the given array; or of the given dtype, or
    the input's (float inputs) or float32 (integer inputs: a mean is no integer); integer
    results rounded and clamped, as every ndfilt output; of the input's kind."""
    xp = np if isinstance(res, np.ndarray) else __import__("cupy")
    if _is_array(out_arg):
        dst, _ = _host_or_cupy(out_arg)
        dst[...] = _cast(xp, res, dst.dtype)
        return out_arg
    if out_arg is not None:
        dt = _np_dtype(out_arg)
    else:
        dt = x.dtype if np.issubdtype(x.dtype, np.floating) else np.dtype(np.float32)
    out = _cast(xp, res, dt)
    if torch_in:
        import torch
        return torch.from_numpy(out) if xp is np else torch.from_dlpack(out)
    return out


def _cast(xp, res, dt):
    dt = np.dtype(dt)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        res = xp.clip(xp.rint(xp.nan_to_num(res)), info.min, info.max)
    return res.astype(dt, copy=False)


def maskable_ks(f):
    """ks with mask= and nan_policy=: the normalised superposition ks(x m) / ks(m), each valid
    pixel's spread weighted by its value over the spread of the valid pixels alone; NaN where
    none reaches (the same sigma maps, index and extent for both sums)."""
    @functools.wraps(f)
    def g(image, sigma, *, mask=None, nan_policy="propagate", **kw):
        if mask is None and nan_policy == "propagate":
            return f(image, sigma, **kw)
        if nan_policy not in NAN_POLICIES:
            raise ValueError(f"nan_policy must be one of {NAN_POLICIES}, not {nan_policy!r}")
        x, torch_in = _host_or_cupy(image)
        xp = np if isinstance(x, np.ndarray) else __import__("cupy")
        valid = _valid(x, xp, mask, nan_policy)
        if valid is None:
            return f(image, sigma, **kw)
        num = f(xp.where(valid, x.astype(xp.float32, copy=False), xp.float32(0)), sigma, **kw)
        res = _ratio(xp, num, f(valid.astype(xp.float32), sigma, **kw))
        return _deliver(res, np.float32, x, torch_in)
    return g
