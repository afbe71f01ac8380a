# SPDX-License-Identifier: BSD-3-Clause
"""Every dtype scipy takes. The library reads and writes uint8, uint16, int16, float32 and
float64; a call with another input or output dtype (bool, int8, int32, int64, uint32, uint64,
float16; complex for the linear filters) runs on a float64 copy of the input (float32 for
float16), exact for integers up to 2^53, and the result goes to the output dtype as every
ndfilt output does: integers rounded to nearest and clamped to the type's range (bool: 0 or 1).
A complex input is filtered as its real and imaginary parts, which the linear filters keep
apart."""
import functools
import inspect

import numpy as np

from . import _is_array
from . import _np_dtype as _binding_np_dtype

NATIVE = {np.dtype(t) for t in (np.uint8, np.uint16, np.int16, np.float32, np.float64)}


def _np_dtype(dt):
    return None if dt is None else _binding_np_dtype(dt)


def _module(x):
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        import cupy
        return cupy
    if mod == "torch":
        import torch
        return torch
    return np


def _astype(x, dt):
    xp = _module(x)
    if xp.__name__ == "torch":
        import torch
        return x.to(getattr(torch, np.dtype(dt).name))
    return x.astype(dt)


def _store(res, dt):
    """res (float) as dtype dt: integers (and bool) rounded and clamped."""
    xp = _module(res)
    dt = np.dtype(dt)
    if dt.kind in "biu":
        lo, hi = (0, 1) if dt.kind == "b" else (np.iinfo(dt).min, np.iinfo(dt).max)
        if xp.__name__ == "torch":
            res = res.nan_to_num(0.0).round().clamp(float(lo), float(hi))
        else:
            res = xp.clip(xp.rint(xp.nan_to_num(res)), lo, hi)
    return _astype(res, dt)


def widen(linear, samples=False):
    """f taking every dtype (see the module); linear: complex inputs filtered part by part;
    samples: a rank filter, whose result is one of its samples: an integer input's cval is
    taken in the input's dtype first (truncated, wrapped), as scipy casts it."""
    def deco(f):
        sig = inspect.signature(f)
        names = list(sig.parameters)
        at = names.index("output") if "output" in names else None

        @functools.wraps(f)
        def g(input, *args, **kw):
            dt = getattr(input, "dtype", None)
            out = kw.get("output", args[at - 1] if at is not None and len(args) >= at else None)
            try:
                idt = _np_dtype(dt)
                odt = _np_dtype(getattr(out, "dtype", None) if _is_array(out) else out)
            except TypeError:
                return f(input, *args, **kw)  # a dtype numpy does not know: f says what is wrong
            if (idt is None or idt in NATIVE) and (odt is None or odt in NATIVE):
                return f(input, *args, **kw)
            for d in (idt, odt):
                if d is not None and d.kind not in "biufc":
                    raise TypeError(f"dtype {d} is not supported (bool, integers, floats; "
                                    "complex for the linear filters)")
            b = sig.bind(input, *args, **kw)
            a = b.arguments
            want = odt if odt is not None else idt
            if idt.kind == "c" or (want is not None and want.kind == "c"):
                if not linear:
                    raise TypeError("Complex type not supported")
                a["output"] = None
                a["input"] = _astype(input, np.complex128)
                re = _real(f, a, lambda z: z.real)
                im = _real(f, a, lambda z: z.imag)
                res = re + 1j * im if _module(re).__name__ != "torch" else __import__(
                    "torch").complex(re, im)
                cdt = want if want.kind == "c" else np.dtype(np.complex128)
                res = _astype(res, cdt) if want.kind == "c" else _store(res.real, want)
            else:
                work = np.float32 if idt == np.float16 else np.float64
                if samples and idt.kind in "biu" and "cval" in a:
                    with np.errstate(all="ignore"):
                        a["cval"] = float(np.array(float(a["cval"])).astype(idt))
                a["input"] = _astype(input, work) if idt not in NATIVE else input
                a["output"] = odt if odt in NATIVE else np.dtype(work)
                res = f(**a)
                if odt is None or odt not in NATIVE:
                    res = _store(res, want)
            if _is_array(out):
                if _module(out).__name__ == "torch":
                    out.copy_(res)
                else:
                    out[...] = res
                return out
            return res
        return g
    return deco


def _real(f, a, part):
    c = dict(a)
    c["input"] = part(a["input"])
    c["output"] = np.float64
    return f(**c)
