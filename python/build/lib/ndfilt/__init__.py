"""ndfilt - fast N-dimensional image filtering on CPUs and CUDA GPUs.

scipy.ndimage-compatible functions over libndfilt (through ctypes). numpy arrays
in give numpy arrays out, computed on the current device (NDF_DEVICE, or
set_device()); CuPy arrays and torch CUDA tensors in give the same type out,
computed on their GPU without host copies, on the caller's current stream.
Arithmetic is float32 whatever the dtype; integer outputs are rounded to
nearest and clamped to the type's range (scipy truncates and wraps).
"""
import atexit
import collections
import ctypes as C
import threading

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["correlate1d", "convolve1d", "set_device", "device", "solvers", "__version__"]
__version__ = lib.ndf_version_string().decode()

_NP_CODE = {np.dtype(np.uint8): _lib.U8, np.dtype(np.uint16): _lib.U16,
            np.dtype(np.int16): _lib.I16, np.dtype(np.float32): _lib.F32,
            np.dtype(np.float64): _lib.F64}

_lock = threading.RLock()
_contexts = {}           # device string ("auto", "cpu", "cuda:N") -> context pointer
_device = "auto"         # what numpy inputs run on
_plans = collections.OrderedDict()  # problem key -> plan pointer (most recent last)
_MAX_PLANS = 32


# ----------------------------------------------------------------- errors, contexts

def _raise(st, ctx):
    msg = (lib.ndf_context_message(ctx) or b"").decode() if ctx else ""
    text = f"{lib.ndf_status_str(st).decode()}: {msg}" if msg else lib.ndf_status_str(st).decode()
    if st in (_lib.EINVAL, _lib.EUNSUPPORTED):
        raise ValueError(text)
    if st == _lib.ENOMEM:
        raise MemoryError(text)
    raise RuntimeError(text)


def _context(dev):
    with _lock:
        ctx = _contexts.get(dev)
        if ctx is None:
            h = C.c_void_p()
            opts = _lib.ContextOpts(C.sizeof(_lib.ContextOpts),
                                    None if dev == "auto" else dev.encode(), 0)
            st = lib.ndf_context_create(C.byref(h), C.byref(opts))
            if st != _lib.OK:
                raise (ValueError if st == _lib.EINVAL else RuntimeError)(
                    f"cannot use device {dev!r}: {lib.ndf_status_str(st).decode()}")
            ctx = _contexts[dev] = h.value
        return ctx


def set_device(dev="auto"):
    """Device for numpy inputs: 'auto' (NDF_DEVICE, else the first usable
    GPU, else the CPU), 'cpu', 'cuda' or 'cuda:N'. GPU arrays always run on
    their own device."""
    global _device
    _context(dev)  # raises if unusable
    _device = dev


def device():
    """Name of the device numpy inputs run on, e.g. 'cpu' or 'cuda:0 (NVIDIA H100...)'."""
    return lib.ndf_context_device_name(_context(_device)).decode()


def solvers():
    """{operation: [solver names]} in this build of libndfilt."""
    out, i, op = {}, 0, C.c_char_p()
    while True:
        name = lib.ndf_solver_name(i, C.byref(op))
        if name is None:
            return out
        out.setdefault(op.value.decode(), []).append(name.decode())
        i += 1


@atexit.register
def _shutdown():
    with _lock:
        for p in _plans.values():
            lib.ndf_plan_destroy(p)
        _plans.clear()
        for c in _contexts.values():
            lib.ndf_context_destroy(c)
        _contexts.clear()


# ----------------------------------------------------------------- array adapters

class _Operand:
    """One array as libndfilt sees it, plus what the caller gets back."""

    def __init__(self, arr, kind, desc, dev=None, keep=None):
        self.arr, self.kind, self.desc, self.dev, self.keep = arr, kind, desc, dev, keep


def _kind(x):
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        return "torch" if x.is_cuda else "torch-cpu"
    if hasattr(x, "__cuda_array_interface__"):
        return "cupy" if mod == "cupy" else "cuda"
    return "numpy"


def _desc(code, shape, strides_elems, ptr, place_kind, dev):
    if not 1 <= len(shape) <= _lib.MAX_DIMS:
        raise ValueError(f"ndfilt handles 1 to {_lib.MAX_DIMS} dimensions, not {len(shape)}")
    a = _lib.Array()
    a.dtype, a.ndim = code, len(shape)
    for d, (n, s) in enumerate(zip(shape, strides_elems)):
        a.shape[d], a.strides[d] = n, s
    a.data = ptr
    a.place = _lib.Place(place_kind, dev)
    return a


def _numpy_operand(a, writable=False):
    if a.dtype.byteorder == ">" or a.dtype not in _NP_CODE:
        raise TypeError(f"dtype {a.dtype} is not supported (uint8, uint16, int16, float32, float64)")
    if any(s % a.itemsize for s in a.strides):
        if writable:
            raise ValueError("output strides are not a multiple of its item size")
        a = np.ascontiguousarray(a)  # unaligned view: copied, since strides are in elements
    st = [s // a.itemsize for s in a.strides]
    return _Operand(a, "numpy", _desc(_NP_CODE[a.dtype], a.shape, st, a.ctypes.data,
                                      _lib.PLACE_HOST, 0))


def _cuda_device_of(x, kind):
    if kind == "torch":
        return x.device.index or 0
    return x.device.id  # cupy


def _cuda_operand(x, kind):
    iface = x.__cuda_array_interface__
    dt = np.dtype(iface["typestr"])
    if dt.byteorder == ">" or dt not in _NP_CODE:
        raise TypeError(f"dtype {dt} is not supported (uint8, uint16, int16, float32, float64)")
    shape = tuple(iface["shape"])
    if iface.get("strides") is None:
        st, acc = [], 1
        for n in reversed(shape):
            st.insert(0, acc)
            acc *= n
    else:
        if any(s % dt.itemsize for s in iface["strides"]):
            raise ValueError("strides are not a multiple of the item size")
        st = [s // dt.itemsize for s in iface["strides"]]
    dev = _cuda_device_of(x, kind)
    return _Operand(x, kind, _desc(_NP_CODE[dt], shape, st, iface["data"][0], _lib.PLACE_CUDA,
                                   dev), dev)


def _stream_of(kind, dev):
    if kind == "torch":
        import torch
        return torch.cuda.current_stream(dev).cuda_stream
    import cupy
    with cupy.cuda.Device(dev):
        return cupy.cuda.get_current_stream().ptr


def _empty_like(op, dtype):
    """A new C-contiguous output of op's kind and shape."""
    x = op.arr
    if op.kind == "torch":
        import torch
        tdt = dtype if isinstance(dtype, torch.dtype) else getattr(torch, np.dtype(dtype).name)
        return torch.empty(tuple(x.shape), dtype=tdt, device=x.device)
    if op.kind in ("cupy", "cuda"):
        import cupy
        with cupy.cuda.Device(op.dev):
            return cupy.empty(tuple(x.shape), dtype=dtype)
    return np.empty(x.shape, dtype=dtype)


def _np_dtype(dt):
    try:
        return np.dtype(dt)
    except TypeError:  # a torch dtype
        return np.dtype(str(dt).replace("torch.", ""))


def _is_array(x):
    return x is not None and not isinstance(x, (type, np.dtype, str)) and hasattr(x, "shape")


def _inputs(input, output):
    """Operands for input and output (allocated when output is None or a dtype)."""
    kind = _kind(input)
    back = None
    if kind == "torch-cpu":
        input, kind, back = input.numpy(), "numpy", "torch"
    if kind == "numpy":
        input = np.asarray(input)
        if input.dtype not in _NP_CODE:
            raise TypeError(f"dtype {input.dtype} is not supported "
                            "(uint8, uint16, int16, float32, float64)")
        src = _numpy_operand(input)
    else:
        src = _cuda_operand(input, kind)
    if not _is_array(output):
        dt = _np_dtype(output) if output is not None else _np_dtype(
            input.dtype if kind != "torch" else str(input.dtype).replace("torch.", ""))
        out_arr = _empty_like(src, output if (output is not None and kind == "torch") else dt)
    else:
        out_arr = output
        if _kind(out_arr) == "torch-cpu":
            out_arr = out_arr.numpy()
        if _kind(out_arr) != kind:
            raise TypeError(f"output is a {_kind(output)} array, input a {kind} array")
        if tuple(out_arr.shape) != tuple(input.shape):
            raise ValueError(f"output shape {tuple(out_arr.shape)} != input shape "
                             f"{tuple(input.shape)}")
    dst = _numpy_operand(out_arr, True) if kind == "numpy" else _cuda_operand(out_arr, kind)
    if kind == "numpy" and dst.arr is not out_arr:
        raise ValueError("output must be a numpy array with element-aligned strides")
    return src, dst, back, output


def _place_key(a):
    return (a.dtype, a.ndim, tuple(a.shape[:a.ndim]), a.place.kind, a.place.device)


# ----------------------------------------------------------------- correlate1d

def _filter1d(conv, input, weights, axis, output, mode, cval, origin, method):
    w = np.ascontiguousarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size < 1:
        raise ValueError("weights must be a non-empty 1-D sequence")
    if not isinstance(mode, str) or mode not in _lib.MODES:
        raise ValueError(f"boundary mode not supported: {mode!r}")
    src, dst, back, output_arg = _inputs(input, output)
    if src.kind == "numpy":
        ctx = _context(_device)
    else:
        ctx = _context(f"cuda:{src.dev}")
    key = ("convolve1d" if conv else "correlate1d", ctx, _place_key(src.desc),
           _place_key(dst.desc), w.tobytes(), int(axis), mode, float(cval), int(origin), method)
    with _lock:
        plan = _plans.get(key)
        if plan is None:
            h = C.c_void_p()
            opts = _lib.Correlate1dOpts(C.sizeof(_lib.Correlate1dOpts),
                                        None if method in (None, "auto") else method.encode(),
                                        _lib.MODES[mode], float(cval), int(origin))
            f = lib.ndf_plan_convolve1d if conv else lib.ndf_plan_correlate1d
            st = f(C.byref(h), ctx, C.byref(src.desc), C.byref(dst.desc),
                   w.ctypes.data_as(C.POINTER(C.c_double)), w.size, int(axis), C.byref(opts))
            if st != _lib.OK:
                _raise(st, ctx)
            plan = _plans[key] = h.value
            if len(_plans) > _MAX_PLANS:
                lib.ndf_plan_destroy(_plans.popitem(last=False)[1])
        else:
            _plans.move_to_end(key)
        if src.kind != "numpy" and _lib.HAVE_STREAMS:
            lib.ndf_context_set_stream(ctx, _stream_of(src.kind, src.dev))
        st = lib.ndf_execute(plan, C.byref(src.desc), C.byref(dst.desc))
    if st != _lib.OK:
        _raise(st, ctx)
    out = dst.arr
    if back == "torch" and not _is_array(output_arg):
        import torch
        out = torch.from_numpy(out)
    elif back == "torch":
        out = output_arg
    return out


def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
                method="auto"):
    """Correlation along one axis, as scipy.ndimage.correlate1d.

    input: numpy array (any strides), CuPy array or torch tensor, 1-4 dims,
    dtype uint8/uint16/int16/float32/float64 (float64 is accepted and computed
    in float32). output: None (same dtype as input), a dtype, or an array of the
    input's kind and shape written in place. mode: 'reflect', 'constant',
    'nearest', 'mirror', 'wrap'. method: 'auto', 'cpu_direct' or 'cuda_direct'.
    """
    return _filter1d(False, input, weights, axis, output, mode, cval, origin, method)


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
               method="auto"):
    """Convolution along one axis, as scipy.ndimage.convolve1d (see correlate1d)."""
    return _filter1d(True, input, weights, axis, output, mode, cval, origin, method)
