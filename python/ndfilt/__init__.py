# SPDX-License-Identifier: BSD-3-Clause
"""ndfilt - fast N-dimensional image filtering on CPUs and CUDA GPUs.

scipy.ndimage-compatible functions over libndfilt (through ctypes). numpy arrays
in give numpy arrays out, computed on the current device (NDF_DEVICE, or
set_device()); CuPy arrays and torch CUDA tensors in give the same type out,
computed on their GPU without host copies, on the caller's current stream.
Other DLPack producers (JAX arrays, anything with __dlpack__ and __dlpack_device__)
are read without copies, as numpy arrays on the host and CuPy arrays (torch tensors
where CuPy is missing) on a CUDA GPU, on that device's current CuPy (torch) stream,
which they are asked to order their work before (__dlpack__(stream=...)); results
come back as the producer's kind through its array namespace's from_dlpack (a JAX
array for a JAX array), else as numpy (host) or CuPy (GPU) arrays. Their output= may
only be None or a dtype. Arithmetic is float32 whatever the dtype; integer outputs are
rounded to nearest and clamped to the type's range (scipy truncates and wraps).
"""
import atexit
import collections
import ctypes as C
import math
import numbers
import operator
import struct
import threading

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["correlate1d", "convolve1d", "sepfilter", "gaussian_filter", "gaussian_filter1d",
           "correlate", "convolve", "correlate_bank", "convolve_bank", "ks", "last_solver",
           "set_device", "device", "solvers", "__version__"]
__version__ = lib.ndf_version_string().decode()

_NP_CODE = {np.dtype(np.uint8): _lib.U8, np.dtype(np.uint16): _lib.U16,
            np.dtype(np.int16): _lib.I16, np.dtype(np.float32): _lib.F32,
            np.dtype(np.float64): _lib.F64}

_lock = threading.RLock()
_contexts = {}           # (device string: "auto", "cpu", "cuda:N"; memory limit) -> context
_device = "auto"         # what numpy inputs run on
_memory_limit = 0        # set_memory_limit's: numpy inputs' contexts'
_plans = collections.OrderedDict()  # problem key -> plan pointer (most recent last)
_MAX_PLANS = 32
_gpu_plans = set()       # keys of the cached plans on GPU contexts (which hold device buffers)
_streams = {}            # context pointer -> the stream last set on it


# ----------------------------------------------------------------- errors, contexts

def _raise(st, ctx):
    msg = (lib.ndf_context_message(ctx) or b"").decode() if ctx else ""
    text = f"{lib.ndf_status_str(st).decode()}: {msg}" if msg else lib.ndf_status_str(st).decode()
    if st in (_lib.EINVAL, _lib.EUNSUPPORTED):
        raise ValueError(text)
    if st == _lib.ENOMEM:
        raise MemoryError(text)
    raise RuntimeError(text)


def _context(dev, memory_limit=0):
    with _lock:
        ctx = _contexts.get((dev, memory_limit))
        if ctx is None:
            h = C.c_void_p()
            why = C.create_string_buffer(512)
            opts = _lib.ContextOpts(C.sizeof(_lib.ContextOpts),
                                    None if dev == "auto" else dev.encode(), 0, 0,
                                    C.cast(why, C.c_char_p), len(why), memory_limit)
            st = lib.ndf_context_create(C.byref(h), C.byref(opts))
            if st != _lib.OK:
                text = why.value.decode(errors="replace") or lib.ndf_status_str(st).decode()
                raise (ValueError if st == _lib.EINVAL else RuntimeError)(
                    f"cannot use device {dev!r}: {text}")
            ctx = _contexts[(dev, memory_limit)] = h.value
        return ctx


def set_device(dev="auto"):
    """Device for numpy inputs: 'auto' (NDF_DEVICE, else the first usable
    GPU, else the CPU), 'cpu', 'cuda' or 'cuda:N'; 'cuda:N,M,...' or 'cuda:all' spread
    calls on numpy arrays of 64 MB or more over several GPUs, in slabs of the first axis
    (filters that cannot go by slabs run on the first). GPU arrays always run on their own
    device."""
    global _device
    _context(dev)  # raises if unusable
    _device = dev


def set_memory_limit(nbytes=0):
    """Most bytes a call on numpy arrays may hold for its work at once: its buffers on the GPU
    (0: the device's free memory), its temporaries on the CPU (0: no limit). A filter whose
    arrays need more runs in slabs of the first axis, each with the kernel's reach of rows
    on either side, so arrays larger than the GPU's memory go through it (the Gaussian, the
    separable and N-D correlations and their banks, rank filters, ks with sigma maps and
    r_max; the recursive Gaussian in two sweeps, the other axes in slabs of the first, then
    the first in slabs of the second). With several GPUs, the limit is each one's. In place
    only where a slab reads no rows beside its own. slabs() tells the last call's slab rows."""
    global _memory_limit
    n = _int(nbytes, "nbytes", 0, 2**63 - 1)
    _context(_device, n)  # raises if unusable
    _memory_limit = n


def slabs():
    """Output rows of the first axis a slab of the last call gave (0: it ran whole)."""
    return _of_last_plan(lambda p: int(lib.ndf_plan_slabs(p)), 0)


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
        _pinned.close()
        for p in _plans.values():
            lib.ndf_plan_destroy(p)
        _plans.clear()
        _gpu_plans.clear()
        for c in _contexts.values():
            lib.ndf_context_destroy(c)
        _contexts.clear()
        _cuda_contexts.clear()


# ----------------------------------------------------------------- array adapters

class _Operand:
    """One array as libndfilt sees it, plus what the caller gets back."""

    def __init__(self, arr, kind, desc, dev=None, keep=None):
        self.arr, self.kind, self.desc, self.dev, self.keep = arr, kind, desc, dev, keep
        self.writeback = None  # the caller's output, where arr is an aligned stand-in for it


_KIND_OF_TYPE = {np.ndarray: "numpy"}  # exact types whose kind is the same for every instance
_OTHER_PROTOCOLS = ("__array__", "__array_interface__", "__cuda_array_interface__")


def _kind(x):
    t = type(x)
    k = _KIND_OF_TYPE.get(t)
    if k is not None:
        return k
    mod = t.__module__.split(".")[0]
    if mod == "torch":
        return "torch" if x.is_cuda else "torch-cpu"
    if mod != "cupy" and hasattr(t, "__dlpack__") and (
            hasattr(t, "__dlpack_device__") or not any(hasattr(t, a) for a in _OTHER_PROTOCOLS)):
        # (numpy >= 1.22 has it too: its subclasses; a producer without __dlpack_device__ is
        # read through another protocol it has, else refused by _dl_device)
        k = _KIND_OF_TYPE[t] = "numpy" if issubclass(t, np.ndarray) else "dlpack"
        return k
    if hasattr(x, "__cuda_array_interface__"):  # (cupy builds the interface's dict for this)
        if mod == "cupy" and t.__name__ == "ndarray":
            _KIND_OF_TYPE[t] = "cupy"
        return "cupy" if mod == "cupy" else "cuda"
    return "numpy"


_DIMS_T = C.c_int64 * _lib.MAX_DIMS


def _desc_fields(code, shape, strides_elems, ptr, place_kind, dev):
    return _lib.Array(code, len(shape), _DIMS_T(*shape), _DIMS_T(*strides_elems), ptr,
                      _lib.Place(place_kind, dev))


# ndf_array's bytes as the C compiler lays them out (dtype, ndim, shape[4], strides[4], data,
# place): packed, then copied into the ctypes structure, a call's descriptor costs a third of
# building it field by field (~1 against ~3.4 us). Used only where it gives the same bytes.
_DESC_PACK = struct.Struct(f"@ii{_lib.MAX_DIMS}q{_lib.MAX_DIMS}qPii")
_DESC_PACKED = (_DESC_PACK.size == C.sizeof(_lib.Array) and _DESC_PACK.pack(
    5, 2, 3, 4, 0, 0, 4, 1, 0, 0, 1 << 40, 1, 7) == bytes(_desc_fields(
        5, (3, 4), (4, 1), 1 << 40, 1, 7)))
_PAD = [(0,) * (_lib.MAX_DIMS - n) for n in range(_lib.MAX_DIMS + 1)]


def _desc(code, shape, strides_elems, ptr, place_kind, dev):
    n = len(shape)
    if not 1 <= n <= _lib.MAX_DIMS:
        raise ValueError(f"ndfilt handles 1 to {_lib.MAX_DIMS} dimensions, not {n}")
    if _DESC_PACKED:
        return _lib.Array.from_buffer_copy(_DESC_PACK.pack(
            code, n, *shape, *_PAD[n], *strides_elems, *_PAD[n], ptr or 0, place_kind, dev))
    return _desc_fields(code, shape, strides_elems, ptr, place_kind, dev)


def _numpy_operand(a, writable=False):
    """a's operand. An unaligned view (data or strides not on its item size), which the
    library refuses, is copied: an input once, an output through an aligned array that
    _result copies back."""
    if a.dtype.byteorder == ">" or a.dtype not in _NP_CODE:
        raise TypeError(f"dtype {a.dtype} is not supported (uint8, uint16, int16, float32, float64)")
    if writable and not a.flags.writeable:
        raise ValueError("output array is read-only")
    target = None
    if not a.flags.aligned or any(s % a.itemsize for s in a.strides):
        target = a if writable else None
        a = np.empty(a.shape, a.dtype) if writable else np.array(a, order="C")
    st = [s // a.itemsize for s in a.strides]
    op = _Operand(a, "numpy", _desc(_NP_CODE[a.dtype], a.shape, st, a.ctypes.data,
                                    _lib.PLACE_HOST, 0))
    op.writeback = target
    return op


def _check_writable(x, kind):
    """scipy's ValueError for an output that must not be written: a GPU array whose
    __cuda_array_interface__ says it is read-only (CuPy and torch arrays never are)."""
    if kind == "cuda":
        data = x.__cuda_array_interface__.get("data")
        if data and len(data) > 1 and data[1]:
            raise ValueError("output array is read-only")


def _cuda_device_of(x, kind):
    if kind == "torch":
        return x.device.index or 0
    return x.device.id  # cupy


def _cuda_operand(x, kind):
    if kind == "cupy":  # the same facts as the interface below, without building its dict
        dt = x.dtype
        code = _NP_CODE.get(dt)
        if code is not None and not any(s % dt.itemsize for s in x.strides):
            dev = x.data.device_id  # (x.device makes a Device object)
            return _Operand(x, kind, _desc(code, x.shape, [s // dt.itemsize for s in x.strides],
                                           x.data.ptr, _lib.PLACE_CUDA, dev), dev)
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


_cupy = None  # the cupy module, once imported


def _stream_of(kind, dev):
    global _cupy
    if kind == "torch":
        import torch
        return torch.cuda.current_stream(dev).cuda_stream
    if _cupy is None:
        import cupy
        _cupy = cupy
    try:
        return _cupy.cuda.get_current_stream(dev).ptr
    except TypeError:  # CuPy < 11: no device argument
        with _cupy.cuda.Device(dev):
            return _cupy.cuda.get_current_stream().ptr


class _PinnedBlock:
    """Page-locked host memory under a numpy array (its base); back to the pool when the
    array and its views are gone."""

    def __init__(self, pool, ctx, ptr, nbytes, shape, dtype):
        self.pool, self.ctx, self.ptr, self.nbytes = pool, ctx, ptr, nbytes
        self.__array_interface__ = {"shape": shape, "typestr": dtype.str, "version": 3,
                                    "data": (ptr, False)}

    def __del__(self):
        self.pool.release(self.ctx, self.ptr, self.nbytes)


class _PinnedPool:
    """New numpy outputs of calls on a CUDA context, in page-locked memory: the device copies
    results into them directly, where an ordinary array takes them through a staging buffer and
    has its pages first touched during the call. Freed blocks are kept for the next output of
    the same size, as CuPy's pinned memory pool does; all blocks, in use or kept, stay under
    NDFILT_PINNED_LIMIT bytes (default: an eighth of the RAM; 0 turns the pool off)."""

    MIN_BYTES = 1 << 20  # smaller outputs gain nothing worth locking memory for

    def __init__(self):
        import os
        try:
            ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            ram = 8 << 30
        env = os.environ.get("NDFILT_PINNED_LIMIT")
        self.limit = int(env) if env else ram // 8
        self.kept = {}  # nbytes -> [(ctx, pointer)]
        self.total = 0  # bytes locked: in use and kept
        self.closed = False

    def _free(self, ctx, ptr, nbytes):
        lib.ndf_array_free(ctx, C.byref(_desc(_lib.U8, (nbytes,), (1,), ptr, _lib.PLACE_HOST, 0)))
        self.total -= nbytes

    def empty(self, ctx, shape, dtype):
        """A C-contiguous array in page-locked memory, or None where the pool declines."""
        nbytes = math.prod(shape) * dtype.itemsize
        if not _lib.HAVE_HOST_ALLOC or nbytes < self.MIN_BYTES:
            return None
        with _lock:
            if self.closed or nbytes > self.limit:
                return None
            kept = self.kept.get(nbytes)
            if kept:
                ctx, ptr = kept.pop()
            else:
                for size, blocks in list(self.kept.items()):  # make room: drop other sizes
                    while blocks and self.total + nbytes > self.limit:
                        self._free(*blocks.pop(), size)
                if self.total + nbytes > self.limit:
                    return None
                a = _lib.Array()
                if lib.ndf_array_alloc_host(ctx, C.byref(a), _lib.U8, 1,
                                            (C.c_int64 * 1)(nbytes)) != _lib.OK:
                    return None
                ptr = a.data
                self.total += nbytes
        return np.asarray(_PinnedBlock(self, ctx, ptr, nbytes, tuple(shape), dtype))

    def release(self, ctx, ptr, nbytes):
        with _lock:
            if not self.closed:
                self.kept.setdefault(nbytes, []).append((ctx, ptr))

    def close(self):
        """Frees the kept blocks; blocks in use then stay until the process ends."""
        with _lock:
            for size, blocks in self.kept.items():
                for ctx, ptr in blocks:
                    self._free(ctx, ptr, size)
            self.kept.clear()
            self.closed = True


_pinned = _PinnedPool()
_on_cuda = {}  # context pointer -> whether it is a CUDA context


def _host_empty(shape, dtype):
    """A new numpy output for a call on the current device: page-locked when that is a GPU."""
    dtype = np.dtype(dtype)
    ctx = _context(_device)
    cuda = _on_cuda.get(ctx)
    if cuda is None:
        cuda = _on_cuda[ctx] = lib.ndf_context_place(ctx).kind == _lib.PLACE_CUDA
    out = _pinned.empty(ctx, shape, dtype) if cuda else None
    return np.empty(shape, dtype=dtype) if out is None else out


def _empty_like(op, dtype, shape=None):
    """A new C-contiguous output of op's kind and shape (or the given shape)."""
    x = op.arr
    shape = tuple(x.shape) if shape is None else tuple(shape)
    if op.kind == "torch":
        import torch
        tdt = dtype if isinstance(dtype, torch.dtype) else getattr(torch, np.dtype(dtype).name)
        return torch.empty(shape, dtype=tdt, device=x.device)
    if op.kind in ("cupy", "cuda"):
        import cupy
        with cupy.cuda.Device(op.dev):
            return cupy.empty(shape, dtype=dtype)
    return _host_empty(shape, dtype)


def _np_dtype(dt):
    try:
        return np.dtype(dt)
    except TypeError:  # a torch dtype
        return np.dtype(str(dt).replace("torch.", ""))


def _is_array(x):
    return x is not None and not isinstance(x, (type, np.dtype, str)) and (
        hasattr(x, "shape") or hasattr(x, "__dlpack__"))


# ----------------------------------------------------------------- DLPack producers

# DLDeviceType values (dlpack.h): the host's, and a CUDA GPU's
_DL_HOST = {1: "CPU", 3: "CUDA host (pinned)"}
_DL_CUDA = {2: "CUDA", 13: "CUDA managed"}
_ACCEPTED = ("numpy arrays, CuPy arrays, torch tensors, objects with __cuda_array_interface__, "
             "and DLPack producers (JAX arrays, numpy >= 1.22 arrays, anything with both "
             "__dlpack__ and __dlpack_device__) on the CPU or a CUDA GPU")
_gpu_module = None  # what reads a CUDA DLPack producer: the cupy module, else torch's


def _dl_device(x):
    """x's DLPack device as (device type, device number); TypeError where x has none."""
    f = getattr(x, "__dlpack_device__", None)
    if f is None:
        raise TypeError(f"{type(x).__module__}.{type(x).__qualname__} has __dlpack__ but no "
                        f"__dlpack_device__; ndfilt takes {_ACCEPTED}")
    dev = f()
    return int(dev[0]), int(dev[1])


def _gpu_reader():
    """The module that takes in CUDA DLPack producers (its arrays then run as today's): CuPy
    where it is installed, else torch with CUDA."""
    global _gpu_module
    if _gpu_module is None:
        try:
            import cupy
            _gpu_module = cupy
        except ImportError:
            try:
                import torch
            except ImportError:
                torch = None
            if torch is None or not torch.cuda.is_available():
                raise TypeError("a CUDA DLPack array needs CuPy (or torch with CUDA) to be read; "
                                "install cupy, or pass a CuPy array or torch tensor") from None
            _gpu_module = torch
    return _gpu_module


def _from_dlpack(x, gpu=None):
    """x, a DLPack producer, as an array ndfilt runs on: a numpy view on the host, a CuPy
    array (gpu 'torch', or no CuPy: a torch tensor) on a CUDA GPU, taken in on that device's
    current stream, which the producer orders its work before (the protocol's
    __dlpack__(stream=...), passed by cupy.from_dlpack and torch.from_dlpack), and the one
    ndfilt then runs on. Returns it, its kind and back: what turns a result of that kind into
    one of x's (its array namespace's from_dlpack: JAX, ...; else the result as it is)."""
    typ, dev = _dl_device(x)
    try:
        if typ in _DL_HOST:
            a, kind = np.from_dlpack(x), "numpy"
        elif typ in _DL_CUDA:
            m = _gpu_reader()
            if gpu == "torch" or (gpu is None and m.__name__ == "torch"):
                import torch
                a, kind = torch.from_dlpack(x), "torch"
            else:
                with m.cuda.Device(dev):  # that device's current stream
                    a, kind = m.from_dlpack(x), "cupy"
        else:
            raise TypeError(f"{type(x).__qualname__} lies on DLPack device type {typ}; ndfilt "
                            f"runs on the CPU and CUDA GPUs: it takes {_ACCEPTED}")
    except (BufferError, RuntimeError, ValueError) as e:  # a dtype or layout DLPack can't pass
        raise TypeError(f"cannot read {type(x).__qualname__} through DLPack: {e}") from e
    return a, kind, _dl_back(x)


def _dl_back(x):
    """The function that turns a result into an array of x's kind (see _from_dlpack)."""
    ns = getattr(x, "__array_namespace__", None)
    f = getattr(ns(), "from_dlpack", None) if ns is not None else None
    return f if f is not None else _same


def _same(a):
    return a


def _no_output_array(output):
    if _is_array(output):
        raise TypeError("output must be None or a dtype with a DLPack producer's input (JAX, "
                        "...): the result is a new array of its kind")


def _input(input):
    """input's operand, the array it describes (a torch CPU tensor's numpy view, a DLPack
    producer's numpy, CuPy or torch view), its kind and what to turn results back into
    ('torch', a function for a DLPack producer, or None)."""
    kind = _kind(input)
    back = None
    if kind == "torch-cpu":
        input, kind, back = input.numpy(), "numpy", "torch"
    elif kind == "dlpack":
        input, kind, back = _from_dlpack(input)
    if kind == "numpy":
        input = np.asarray(input)
        if input.dtype not in _NP_CODE:
            raise TypeError(f"dtype {input.dtype} is not supported "
                            "(uint8, uint16, int16, float32, float64)")
        return _numpy_operand(input), input, kind, back
    return _cuda_operand(input, kind), input, kind, back


def _inputs(input, output):
    """Operands for input and output (allocated when output is None or a dtype)."""
    src, input, kind, back = _input(input)
    if not _is_array(output):
        dt = _np_dtype(output) if output is not None else _np_dtype(
            input.dtype if kind != "torch" else str(input.dtype).replace("torch.", ""))
        out_arr = _empty_like(src, output if (output is not None and kind == "torch") else dt)
    else:
        if back is not None and back != "torch":
            _no_output_array(output)
        out_arr = output
        if _kind(out_arr) == "torch-cpu":
            out_arr = out_arr.numpy()
        if _kind(out_arr) != kind:
            raise TypeError(f"output is a {_kind(output)} array, input a {kind} array")
        if tuple(out_arr.shape) != tuple(input.shape):
            raise ValueError(f"output shape {tuple(out_arr.shape)} != input shape "
                             f"{tuple(input.shape)}")
    if kind != "numpy":
        _check_writable(out_arr, kind)
    dst = _numpy_operand(out_arr, True) if kind == "numpy" else _cuda_operand(out_arr, kind)
    return src, dst, back, output


_KEY_END = _lib.Array.strides.offset  # dtype, ndim and shape (zero past ndim) end here
_PLACE_AT = slice(_lib.Array.place.offset, _lib.Array.place.offset + C.sizeof(_lib.Place))


def _place_key(a):
    """What a plan depends on in descriptor a (all but its strides and data), as bytes."""
    b = bytes(a)
    return b[:_KEY_END] + b[_PLACE_AT]


# ----------------------------------------------------------------- plans

_cuda_contexts = {}  # device number -> its context (what _context(f"cuda:{n}") gives)


def _context_of(src):
    if src.kind == "numpy":
        return _context(_device, _memory_limit)
    ctx = _cuda_contexts.get(src.dev)
    if ctx is None:
        ctx = _cuda_contexts[src.dev] = _context(f"cuda:{src.dev}")
    return ctx


_last_plan = None  # the plan the last call ran (last_solver)


def _of_last_plan(f, none):
    """f(plan) of the plan the last call ran, while it is cached; else `none`."""
    with _lock:
        if _last_plan is None or _last_plan not in _plans.values():
            return none
        return f(_last_plan)


def last_solver():
    """The solver the last call of this module ran, e.g. 'cuda_fft' after correlate(...,
    method='auto') chose it, or 'cuda_direct' where that plan met an input holding NaN or Inf
    and ran the exact solver instead; None before any call. (With several threads: any
    thread's.)"""
    return _of_last_plan(lambda p: lib.ndf_plan_last_solver(p).decode(), None)


def _drop_plan(key):
    lib.ndf_plan_destroy(_plans.pop(key))
    _gpu_plans.discard(key)


def _make_room(ctx, descs):
    """Before a new plan on the GPU context ctx: destroys the least recently used cached plans
    on GPUs while the device has less free than the new plan's arrays would take there (8
    bytes an element: a float32 copy and a temporary). A plan holds its device buffers until
    destroyed, and a new one sizes its slabs, or chooses them, by what is free when it is made:
    without this, idle plans of earlier large arrays would shrink a new one's slabs to a few
    rows."""
    need = 8 * sum(math.prod(d.shape[:d.ndim]) for d in descs)
    for key in [k for k in _plans if k in _gpu_plans]:  # least recently used first
        if lib.ndf_context_memory_free(ctx) >= need:
            break
        _drop_plan(key)


def _run(key, ctx, src, dst, make, bank=None, ops=None):
    """Executes the cached plan for key, first making it with make(byref(handle)); bank: a
    ctypes array of output descriptors (dst is then the first's operand); ops: the operands
    beside the image (ndf_execute_n)."""
    with _lock:
        if src.kind != "numpy" and _lib.HAVE_STREAMS:  # before planning: a plan may queue work
            stream = _stream_of(src.kind, src.dev)
            if _streams.get(ctx) != stream:
                lib.ndf_context_set_stream(ctx, stream)
                _streams[ctx] = stream
        plan = _plans.get(key)
        if plan is None:
            gpu = lib.ndf_context_devices(ctx, None, 0) > 0
            if gpu:
                _make_room(ctx, [src.desc, dst.desc] + [o.desc for o in ops or ()] +
                           list(bank[1:] if bank is not None else ()))
            h = C.c_void_p()
            st = make(C.byref(h))
            if st != _lib.OK:
                _raise(st, ctx)
            plan = _plans[key] = h.value
            if gpu:
                _gpu_plans.add(key)
            if len(_plans) > _MAX_PLANS:
                _drop_plan(next(iter(_plans)))
        else:
            _plans.move_to_end(key)
        global _last_plan
        _last_plan = plan
        if ops:
            ins = (_lib.Array * (1 + len(ops)))(src.desc, *[o.desc for o in ops])
            st = lib.ndf_execute_n(plan, len(ins), ins, 1, C.byref(dst.desc))
        elif bank is None:
            st = lib.ndf_execute(plan, C.byref(src.desc), C.byref(dst.desc))
        else:
            st = lib.ndf_execute_bank(plan, C.byref(src.desc), len(bank), bank)
    if st != _lib.OK:
        _raise(st, ctx)


def _result(dst, back, output_arg):
    if dst.writeback is not None:
        np.copyto(dst.writeback, dst.arr)
        dst.arr = dst.writeback
    out = dst.arr
    if back is None:
        return out
    if back == "torch":
        if _is_array(output_arg):
            return output_arg
        import torch
        return torch.from_numpy(out)
    return back(out)


def _weights(w):
    """Weights or a kernel as the C side takes them: C-contiguous float64 on the host, from a
    sequence, a numpy array, or a CuPy, torch or DLPack array (copied off its GPU)."""
    if isinstance(w, np.ndarray) or not (hasattr(w, "shape") or hasattr(w, "__dlpack__")):
        return np.ascontiguousarray(w, dtype=np.float64)
    return np.ascontiguousarray(_to_host(w), dtype=np.float64)


def _method(method):
    if method is None or method == "auto":
        return None
    if not isinstance(method, str):
        raise ValueError(f"method must be a string, not {method!r}")
    return method.encode()


def _mode(m):
    if not isinstance(m, str) or m not in _lib.MODES:
        raise ValueError(f"boundary mode not supported: {m!r}")
    return _lib.MODES[m]


def _int(v, name, lo=-2**31, hi=2**31 - 1):
    """v as a Python int in [lo, hi] (a C int), else ValueError."""
    try:
        i = operator.index(v)
    except TypeError:
        raise ValueError(f"{name} must be an integer, not {v!r}") from None
    if not lo <= i <= hi:
        raise ValueError(f"{name} {i} is out of range [{lo}, {hi}]")
    return i


def _per_axis(value, n, name):
    """A scalar repeated n times, or a sequence of exactly n values."""
    if value is None or isinstance(value, (str, bytes)) or np.ndim(value) == 0:
        return [value] * n
    vals = list(value)
    if len(vals) != n:
        raise ValueError(f"{name} has {len(vals)} values; expected a scalar or one per axis ({n})")
    return vals


def _axes(axes, ndim):
    """scipy's axes= (None: all), made non-negative; unique, in the caller's order."""
    if axes is None:
        return list(range(ndim))
    if np.ndim(axes) == 0:
        axes = [axes]
    out = []
    for a in axes:
        a = _int(a, "axis")
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"axes must be unique, not {tuple(axes)}")
    return out


def _permute(op, perm):
    """Reorders op's axes in place (a view: view axis i is axis perm[i])."""
    a, b = op.desc, _lib.Array()
    b.dtype, b.ndim, b.data, b.place = a.dtype, a.ndim, a.data, a.place
    for i, p in enumerate(perm):
        b.shape[i], b.strides[i] = a.shape[p], a.strides[p]
    op.desc = b


# ----------------------------------------------------------------- correlate1d

def _filter1d(conv, input, weights, axis, output, mode, cval, origin, method):
    w = _weights(weights)
    if w.ndim != 1 or w.size < 1:
        raise ValueError("weights must be a non-empty 1-D sequence")
    if not isinstance(mode, str) or mode not in _lib.MODES:
        raise ValueError(f"boundary mode not supported: {mode!r}")
    src, dst, back, output_arg = _inputs(input, output)
    ctx = _context_of(src)
    key = ("convolve1d" if conv else "correlate1d", ctx, _place_key(src.desc),
           _place_key(dst.desc), w.tobytes(), int(axis), mode, float(cval), int(origin), method)

    def make(h):
        opts = _lib.Correlate1dOpts(C.sizeof(_lib.Correlate1dOpts),
                                    None if method in (None, "auto") else method.encode(),
                                    _lib.MODES[mode], float(cval), int(origin))
        f = lib.ndf_plan_convolve1d if conv else lib.ndf_plan_correlate1d
        return f(h, ctx, C.byref(src.desc), C.byref(dst.desc),
                 w.ctypes.data_as(C.POINTER(C.c_double)), w.size, int(axis), C.byref(opts))

    _run(key, ctx, src, dst, make)
    return _result(dst, back, output_arg)


def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
                method="auto"):
    """Correlation along one axis, as scipy.ndimage.correlate1d.

    input: numpy array (any strides), CuPy array, torch tensor or DLPack producer (JAX, ...;
    see the module's help), 1-4 dims, dtype uint8/uint16/int16/float32/float64 (float64 is
    accepted and computed in float32). output: None (same dtype as input), a dtype, or an
    array of the input's kind and shape written in place. mode: 'reflect', 'constant',
    'nearest', 'mirror', 'wrap'. method: 'auto', 'cpu_corr1d' or 'cuda_corr1d' (the former
    names 'cpu_direct', 'cuda_direct' still work).
    """
    return _filter1d(False, input, weights, axis, output, mode, cval, origin, method)


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
               method="auto"):
    """Convolution along one axis, as scipy.ndimage.convolve1d (see correlate1d)."""
    return _filter1d(True, input, weights, axis, output, mode, cval, origin, method)


# ----------------------------------------------------------------- sepfilter

def sepfilter(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
              convolve=False, method="auto"):
    """Separable filter: correlate1d (convolve1d if convolve) along every axis
    that has weights, in increasing axis order, as successive scipy.ndimage
    calls would do it (with float32 intermediates), in one pass over memory
    where the solver can.

    weights: one entry per axis, each a non-empty 1-D sequence or None (axis
    not filtered); kernels may be odd or even and longer than their axis.
    mode, origin: a scalar or one per axis. With no filtered axis the result is
    a copy. method: 'auto' or a solver name ('cpu_sep', 'cuda_sep', and for one
    filtered axis 'cpu_corr1d', 'cuda_corr1d'). Arrays as correlate1d.
    """
    src, dst, back, output_arg = _inputs(input, output)
    nd = src.desc.ndim
    try:
        ws = list(weights)
    except TypeError:
        raise ValueError("weights must be a sequence with one kernel (or None) per axis") from None
    if len(ws) != nd:
        raise ValueError(f"weights has {len(ws)} entries; expected one per axis ({nd})")
    for d, w in enumerate(ws):
        if w is not None:
            w = ws[d] = _weights(w)
            if w.ndim != 1 or w.size < 1:
                raise ValueError(f"weights[{d}] must be None or a non-empty 1-D sequence")
    modes = [_mode(m) for m in _per_axis(mode, nd, "mode")]
    origins = [_int(o, "origin") for o in _per_axis(origin, nd, "origin")]
    for d in range(nd):  # what an unfiltered axis says does not matter to the plan
        if ws[d] is None:
            modes[d] = origins[d] = 0
    cval, convolve, meth = float(cval), bool(convolve), _method(method)
    ctx = _context_of(src)
    key = ("sepfilter", ctx, _place_key(src.desc), _place_key(dst.desc),
           tuple(None if w is None else w.tobytes() for w in ws), tuple(modes), tuple(origins),
           cval, convolve, meth)

    def make(h):
        wp = (C.POINTER(C.c_double) * _lib.MAX_DIMS)()
        nw = (C.c_int64 * _lib.MAX_DIMS)()
        opts = _lib.SepfilterOpts(C.sizeof(_lib.SepfilterOpts), meth, int(convolve))
        opts.cval = cval
        for d, w in enumerate(ws):
            opts.mode[d], opts.origin[d] = modes[d], origins[d]
            if w is not None:
                wp[d], nw[d] = w.ctypes.data_as(C.POINTER(C.c_double)), w.size
        return lib.ndf_plan_sepfilter(h, ctx, C.byref(src.desc), C.byref(dst.desc), wp, nw,
                                      C.byref(opts))

    _run(key, ctx, src, dst, make)
    return _result(dst, back, output_arg)


# ----------------------------------------------------------------- gaussian

_TINY_TRUNCATE = 1e-300  # the C radius (int)(truncate * sigma + 0.5) is then 0 (sigma < 5e299)


_parsed = {}  # _gaussian's arguments -> what _gauss_args made of them
_MAX_PARSED = 256


def _typed(v):
    """v with its type, so that 1 and 1.0 stay apart (one level into lists and tuples)."""
    if type(v) is list or type(v) is tuple:
        return type(v), tuple((type(x), x) for x in v)
    return type(v), v


_SCALARS = frozenset((int, float, str, bool, type(None)))


def _hashable(vals):
    """The values (see _typed) as a dict key, or None if one cannot be hashed."""
    types = tuple(map(type, vals))
    if _SCALARS.issuperset(types):  # the common case, cheaply
        return vals, types
    try:
        k = tuple(_typed(v) for v in vals)
        hash(k)
    except TypeError:
        return None
    return k


def _gaussian(input, sigma, order, output, mode, cval, truncate, radius, axes, method,
              iir_order, tolerance, spacing=None, fwhm=None):
    src, dst, back, output_arg = _inputs(input, output)
    nd = src.desc.ndim
    if spacing is not None or fwhm is not None or sigma is None:
        sigma = tuple(_sigma_voxels(nd, _axes(axes, nd), sigma, fwhm, spacing))
    # Repeated calls (a filter in a loop) reuse the checked per-axis arguments.
    k = _hashable((nd, sigma, order, mode, cval, truncate, radius, axes, method, iir_order,
                   tolerance))
    args = _parsed.get(k) if k is not None else None
    if args is None:
        args = _gauss_args(nd, sigma, order, mode, cval, truncate, radius, axes, method,
                           iir_order, tolerance)
        if k is not None:
            if len(_parsed) >= _MAX_PARSED:
                _parsed.clear()
            _parsed[k] = args
    c_sig, c_ord, c_mode, c_rad, c_trunc, cval, meth, iir, tol, perm = args
    if perm is not None:
        _permute(src, perm)
        _permute(dst, perm)
    ctx = _context_of(src)
    key = ("gaussian", ctx, _place_key(src.desc), _place_key(dst.desc), c_sig, c_ord, c_rad,
           c_trunc, c_mode, cval, meth, iir, tol)

    def make(h):
        opts = _lib.GaussianOpts(C.sizeof(_lib.GaussianOpts), meth)
        opts.truncate, opts.cval, opts.iir_order, opts.tolerance = c_trunc, cval, iir, tol
        for d in range(nd):
            opts.sigma[d], opts.order[d] = c_sig[d], c_ord[d]
            opts.radius[d], opts.mode[d] = c_rad[d], c_mode[d]
        return lib.ndf_plan_gaussian(h, ctx, C.byref(src.desc), C.byref(dst.desc),
                                     C.byref(opts))

    _run(key, ctx, src, dst, make)
    return _result(dst, back, output_arg)


_SIGMA_PER_FWHM = 1.0 / math.sqrt(8.0 * math.log(2.0))  # FWHM = 2 sqrt(2 ln 2) sigma


def _spacing(spacing, nd):
    """spacing (a scalar, or one value per axis of an nd-dimensional array) as nd floats, each
    finite and > 0, else ValueError."""
    try:
        sp = [float(v) for v in _per_axis(spacing, nd, "spacing")]
    except TypeError:
        raise ValueError(f"spacing must be a number or one number per axis, not {spacing!r}"
                         ) from None
    for d, v in enumerate(sp):
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"spacing must be finite and > 0 along every axis, not {v!r} "
                             f"along axis {d}")
    return sp


def _sigma_voxels(nd, ax, sigma, fwhm, spacing):
    """Per axis of ax (axes of an nd-dimensional array), sigma in voxels from sigma or fwhm
    (one of them: a scalar or one per axis of ax, each finite and >= 0), in spacing's units
    where spacing is given (a scalar or one per axis of the array), else in voxels, as the
    CLI's --sigma 2mm and --fwhm: sigma_voxels = value * (1, or 1 / (2 sqrt(2 ln 2)) for fwhm)
    / spacing."""
    if sigma is not None and fwhm is not None:
        raise ValueError("give sigma or fwhm, not both")
    if sigma is None and fwhm is None:
        raise TypeError("needs sigma or fwhm")
    name, given = ("sigma", sigma) if fwhm is None else ("fwhm", fwhm)
    try:
        vals = [float(v) for v in _per_axis(given, len(ax), name)]
    except TypeError:
        raise ValueError(f"{name} must be a number or one number per axis, not {given!r}"
                         ) from None
    if not all(v >= 0 and math.isfinite(v) for v in vals):
        raise ValueError(f"{name} must be finite numbers >= 0, not {given!r}")
    scale = 1.0 if fwhm is None else _SIGMA_PER_FWHM
    if spacing is None:
        return [v * scale for v in vals]
    sp = _spacing(spacing, nd)
    out = []
    for v, a in zip(vals, ax):
        s = v * scale / sp[a]
        if not math.isfinite(s):
            raise ValueError(f"{name} {v!r} is {s!r} voxels along axis {a} (spacing {sp[a]!r}): "
                             "too large")
        out.append(s)
    return out


def _gauss_args(nd, sigma, order, mode, cval, truncate, radius, axes, method, iir_order,
                tolerance):
    """Checks _gaussian's arguments for an nd-dimensional array; returns per-axis
    sigma, order, mode and radius tuples as the C side takes them, truncate, cval,
    method, iir_order, tolerance, and the axis permutation to apply to the arrays (or None)."""
    ax = _axes(axes, nd)
    k = len(ax)
    try:
        sig = [float(s) for s in _per_axis(sigma, k, "sigma")]
    except TypeError:
        raise ValueError(f"sigma must be a number or one number per axis, not {sigma!r}") from None
    orders = [_int(o, "order", 0) for o in _per_axis(order, k, "order")]
    modes = [_mode(m) for m in _per_axis(mode, k, "mode")]
    radii = [None if r is None else _int(r, "radius", 0) for r in _per_axis(radius, k, "radius")]
    try:
        trunc = float(truncate)
    except TypeError:
        raise ValueError(f"truncate must be a number, not {truncate!r}") from None
    cval, meth = float(cval), _method(method)
    iir = _int(iir_order, "iir_order", 0)  # the C side checks it against the method
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        raise ValueError(f"tolerance must be a number, not {tolerance!r}") from None
    if not (tol >= 0 and math.isfinite(tol)):
        raise ValueError(f"tolerance must be finite and >= 0, not {tolerance!r}")
    # Per axis of the array: sigma 0 (unlisted) leaves an axis alone.
    c_sig, c_ord, c_mode, c_rad = [0.0] * nd, [0] * nd, [0] * nd, [0] * nd
    for a, s, o, m in zip(ax, sig, orders, modes):
        c_sig[a], c_ord[a], c_mode[a] = s, o, m
    filtered = [(a, r) for a, s, r in zip(ax, sig, radii) if s > 1e-15]  # scipy's test
    # The C side takes radius 0 as "use truncate" and truncate 0 as 4.0; then every
    # radius is computed here, as scipy does, and radius 0 made by a tiny truncate.
    c_trunc = trunc
    if not trunc > 0 or any(r == 0 for _, r in filtered):
        c_trunc = 4.0
        for a, r in filtered:
            if r is None:
                try:
                    r = int(trunc * c_sig[a] + 0.5)
                except (ValueError, OverflowError):
                    raise ValueError(f"truncate {truncate!r} and sigma {c_sig[a]} give no "
                                     "kernel radius") from None
                r = _int(r, f"kernel radius (truncate {truncate!r} * sigma {c_sig[a]})", 0)
            if r == 0:
                if c_sig[a] * _TINY_TRUNCATE >= 0.5:
                    raise ValueError(f"radius 0 with sigma {c_sig[a]} is not supported")
                c_trunc = _TINY_TRUNCATE
            c_rad[a] = r
    else:
        for a, r in filtered:
            c_rad[a] = r or 0
    # The library filters in increasing axis order, scipy in the order of axes=. They
    # differ beyond rounding only when constant mode pads with cval != 0; then the
    # arrays are passed as views whose axes put the filtered ones in scipy's order.
    order_ax = [a for a, _ in filtered]
    if order_ax != sorted(order_ax) and cval != 0 and any(
            c_mode[a] == _lib.MODES["constant"] for a in order_ax):
        perm = list(range(nd))
        for pos, a in zip(sorted(order_ax), order_ax):
            perm[pos] = a
        c_sig, c_ord, c_mode, c_rad = ([v[p] for p in perm] for v in (c_sig, c_ord, c_mode, c_rad))
    else:
        perm = None
    return (tuple(c_sig), tuple(c_ord), tuple(c_mode), tuple(c_rad), c_trunc, cval, meth, iir,
            tol, perm)


def gaussian_filter(input, sigma=None, order=0, output=None, mode="reflect", cval=0.0,
                    truncate=4.0, *, radius=None, axes=None, method="auto", iir_order=0,
                    tolerance=0.0, spacing=None, fwhm=None):
    """Gaussian filter, as scipy.ndimage.gaussian_filter (scipy >= 1.11's axes=).

    sigma, order (derivative order, >= 0), mode and radius: a scalar or one per
    axis of axes (all axes when axes is None); an axis whose sigma is <= 1e-15
    is left alone, and a negative sigma is an error. The kernel radius is
    int(truncate * sigma + 0.5) unless radius gives it. Arrays, dtypes and
    output as correlate1d.

    Physical units, as the CLI's --sigma 2mm and --fwhm: spacing, the voxel size along
    each axis of the array (a scalar: every axis; each finite and > 0), makes sigma a length
    in its units (mm, say): sigma / spacing voxels along each axis. fwhm, the full width at
    half maximum instead of sigma (not both), in the same units (voxels without spacing):
    sigma = fwhm / (2 sqrt(2 ln 2)) = fwhm / 2.3548. Lengths are finite and >= 0. order's
    derivatives stay per voxel (as scipy's and the CLI's --order): divide by
    spacing**order for per unit length. Without spacing and fwhm, scipy's definitions.

    method: 'auto' (default): scipy's result, the FIR filter below, unless
    tolerance allows more error; 'fir' (the truncated sampled Gaussian as a
    separable filter, as scipy), or a solver of it ('cpu_sep', 'cuda_sep'); a
    recursive (IIR) method: 'iir_deriche', 'iir_vyv', 'iir_alvarez', 'iir'
    (iir_deriche, the most accurate), or an IIR solver ('cpu_iir', 'cuda_iir':
    iir_deriche).

    tolerance: the error 'auto' may add to scipy's result, as a relative L2
    norm (default 0: scipy's result to float32 rounding). From 1e-3 on, 'auto'
    takes iir_deriche (within 1e-3 of scipy's filter) where every filtered axis
    has mode 'nearest', order 0, sigma >= 2 and no radius, and the cost models
    make it the cheaper. NaN and Inf keep scipy's meaning under 'auto' whatever
    the tolerance: on an input that holds any, the FIR filter runs (last_solver()
    tells which ran), so they reach only the outputs within the kernel's radius.

    The recursive methods approximate the untruncated Gaussian at a cost that
    does not grow with sigma. They support mode 'nearest' only (exact at the
    borders) and order 0, else ValueError, and ignore truncate and radius. A NaN
    or Inf in the input reaches every output of its line, and from there every
    output, when one of them is named. Relative L2 error against the true
    Gaussian on noise: iir_deriche below 1e-3; iir_vyv about 1e-2, 4e-3, 1.5e-3
    for iir_order 3, 4, 5 at sigma >= 3 (several times more at sigma 1);
    iir_alvarez about 0.3, 0.1, 0.06 for 1, 3, 5 steps at sigma >= 5 (up to 0.4,
    0.27, 0.23 at sigma 1). iir_order: the recursive method's order, 0 for its
    default: iir_alvarez's steps 1..5 (3), iir_vyv 3..5 (3; order 4 reaches sigma
    100, order 5 sigma 20), iir_deriche 4. 'auto' given a nonzero iir_order uses
    fir.
    """
    return _gaussian(input, sigma, order, output, mode, cval, truncate, radius, axes, method,
                     iir_order, tolerance, spacing, fwhm)


def gaussian_filter1d(input, sigma=None, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None, method="auto", iir_order=0, tolerance=0.0,
                      spacing=None, fwhm=None):
    """Gaussian filter along one axis, as scipy.ndimage.gaussian_filter1d (see
    gaussian_filter, also for method, iir_order and tolerance: the recursive methods need
    mode 'nearest'). sigma 0 gives a copy, where scipy divides by zero. spacing: the voxel
    size along axis (a scalar), making sigma or fwhm lengths in its units, as
    gaussian_filter's."""
    for name, v in (("sigma", sigma), ("order", order), ("radius", radius), ("axis", axis),
                    ("spacing", spacing), ("fwhm", fwhm)):
        if v is not None and not isinstance(v, str) and np.ndim(v) != 0:
            raise ValueError(f"{name} must be a scalar, not {v!r}")
    return _gaussian(input, sigma, order, output, mode, cval, truncate, radius, [axis], method,
                     iir_order, tolerance, spacing, fwhm)


# ----------------------------------------------------------------- correlate / convolve

def _bank_outputs(input, src, output, nf):
    """The output of a bank: an array of shape (nf,) + input's (allocated when output is None
    or a dtype), its operand per kernel, and a ctypes array of their descriptors."""
    shape = (nf,) + tuple(input.shape)
    if _is_array(output):
        out = output
        if _kind(out) != _kind(input):
            raise TypeError(f"output is a {_kind(output)} array, input a {_kind(input)} array")
        if tuple(out.shape) != shape:
            raise ValueError(f"output shape {tuple(out.shape)} != {shape} (kernels, *input)")
    else:
        kind = src.kind
        dt = output if output is not None else input.dtype
        if kind == "torch":
            import torch
            tdt = dt if isinstance(dt, torch.dtype) else getattr(torch, _np_dtype(dt).name)
            out = torch.empty(shape, dtype=tdt, device=input.device)
        elif kind == "torch-cpu" or (kind == "numpy" and _kind(input) == "torch-cpu"):
            import torch
            out = torch.empty(shape, dtype=input.dtype)
        elif kind in ("cupy", "cuda"):
            import cupy
            with cupy.cuda.Device(src.dev):
                out = cupy.empty(shape, dtype=_np_dtype(dt))
        else:
            out = _host_empty(shape, _np_dtype(dt))
    ops = []
    for f in range(nf):
        o = out[f]
        k = _kind(o)
        if k == "torch-cpu":
            o, k = o.numpy(), "numpy"
        if k != "numpy":
            _check_writable(o, k)
        op = _numpy_operand(o, True) if k == "numpy" else _cuda_operand(o, k)
        ops.append(op)
    descs = (_lib.Array * nf)(*[op.desc for op in ops])
    return out, ops, descs


def _filterNd(conv, input, weights, output, mode, cval, origin, method, bank=False):
    w = _weights(weights)
    if bank:
        back = None
        if _kind(input) == "dlpack":
            _no_output_array(output)
            input, _, back = _from_dlpack(input)
        src = _input(input)[0]
        if w.ndim < 2 or w.shape[0] < 1:
            raise ValueError(f"weights of a bank must have shape (kernels, *kernel), not {w.shape}")
        nf = w.shape[0]
        out, ops, descs = _bank_outputs(input, src, output, nf)
        dst, wk = ops[0], w[0]
    else:
        src, dst, back, output_arg = _inputs(input, output)
        wk = w
    nd = src.desc.ndim
    if wk.ndim != nd or w.size < 1:
        raise ValueError(f"weights must have the input's {nd} dimensions and no zero length, "
                         f"not shape {w.shape}")
    modes = [_mode(m) for m in _per_axis(mode, nd, "mode")]
    origins = [_int(o, "origin") for o in _per_axis(origin, nd, "origin")]
    cval, meth = float(cval), _method(method)
    ctx = _context_of(src)
    key = ("convolve" if conv else "correlate", ctx, _place_key(src.desc), _place_key(dst.desc),
           w.shape, w.tobytes(), tuple(modes), tuple(origins), cval, meth, bank)

    def make(h):
        opts = _lib.CorrelateOpts(C.sizeof(_lib.CorrelateOpts), meth)
        opts.cval = cval
        for d in range(nd):
            opts.mode[d], opts.origin[d] = modes[d], origins[d]
        shape = (C.c_int64 * nd)(*wk.shape)
        wp = w.ctypes.data_as(C.POINTER(C.c_double))
        if bank:
            f = lib.ndf_plan_convolve_bank if conv else lib.ndf_plan_correlate_bank
            return f(h, ctx, C.byref(src.desc), nf, descs, wp, shape, C.byref(opts))
        f = lib.ndf_plan_convolve if conv else lib.ndf_plan_correlate
        return f(h, ctx, C.byref(src.desc), C.byref(dst.desc), wp, shape, C.byref(opts))

    if bank:
        _run(key, ctx, src, dst, make, descs)
        for op in ops:
            if op.writeback is not None:
                np.copyto(op.writeback, op.arr)
        return out if back is None else back(out)
    _run(key, ctx, src, dst, make)
    return _result(dst, back, output_arg)


def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
              method="auto"):
    """N-dimensional correlation, as scipy.ndimage.correlate.

    weights: a kernel with the input's number of dimensions, any lengths (odd,
    even, longer than the input). mode and origin: one value or one per axis.
    method: 'auto' (a cost model picks), 'direct', 'fft', or a solver name
    ('cpu_direct', 'cpu_fft', 'cuda_direct', 'cuda_fft'; 'cuda_direct64' and
    'cuda_fft64' compute float64 device arrays in float64). Arrays, dtypes and
    output as correlate1d. NaN and Inf reach the outputs scipy's would under
    'auto' (on an input that holds any, a direct solver runs: last_solver()
    tells); a named FFT method spreads them over every output. As scipy,
    weights of magnitude <= 2.2e-16 are left out of the sum.
    """
    return _filterNd(False, input, weights, output, mode, cval, origin, method)


def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
             method="auto"):
    """N-dimensional convolution, as scipy.ndimage.convolve (see correlate)."""
    return _filterNd(True, input, weights, output, mode, cval, origin, method)


def correlate_bank(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
                   method="auto"):
    """A filter bank: F kernels of one shape on one input, in one pass where the solver can
    (the input is read once per tile, or transformed once).

    weights: shape (F, *kernel), the kernel with the input's number of dimensions. Returns
    (or writes into output, an array of the input's kind) shape (F, *input.shape); out[f]
    equals correlate(input, weights[f], ...). Other arguments as correlate.
    """
    return _filterNd(False, input, weights, output, mode, cval, origin, method, bank=True)


def convolve_bank(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *,
                  method="auto"):
    """convolve with each of F kernels (see correlate_bank)."""
    return _filterNd(True, input, weights, output, mode, cval, origin, method, bank=True)


# ----------------------------------------------------------------- ks

def _to_host(x):
    """x (a numpy, CuPy or torch array, a DLPack producer, anything with
    __cuda_array_interface__, or an array-like) as a numpy array in host memory."""
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        t = x.detach().cpu()
        try:
            return t.numpy()
        except TypeError:  # a dtype numpy lacks (bfloat16)
            return t.double().numpy()
    if mod == "cupy":
        return x.get()
    if _kind(x) == "dlpack":
        return _to_host(_from_dlpack(x)[0])
    if hasattr(x, "__cuda_array_interface__"):
        import cupy
        return cupy.asarray(x).get()
    return np.asarray(x)


def _ks_map(m, shape, what, gpu):
    """One sigma map as it goes to the library: a numpy, CuPy or torch array of image's shape
    where libndfilt has its dtype (any strides, on the host or a GPU), else converted to
    float64 where it lies. A DLPack producer's map on a GPU is read with gpu ('cupy' or
    'torch': the image's module, on whose stream ndfilt runs) where given."""
    kind = _kind(m)
    if kind == "dlpack":
        m, kind, _ = _from_dlpack(m, gpu)
    if kind == "torch-cpu":
        m, kind = m.numpy(), "numpy"
    if kind == "numpy":
        m = np.asarray(m)
    dt = _np_dtype(m.dtype) if kind != "torch" else _np_dtype(str(m.dtype).replace("torch.", ""))
    if tuple(m.shape) != tuple(shape):
        raise ValueError(f"{what} has shape {tuple(m.shape)}; a sigma map must have the image's "
                         f"shape {tuple(shape)}")
    if dt not in _NP_CODE or dt.byteorder == ">":
        if dt.kind not in "biuf":
            raise ValueError(f"{what} must hold real numbers, not dtype {dt}")
        m = m.double() if kind == "torch" else m.astype(np.float64)
    return m, kind


def _ks_per_axis(sigma, shape):
    """Whether sigma is a list or tuple of maps, one per axis, rather than one map (an array,
    or nested lists of the image's shape: never both, the shapes' lengths differ)."""
    if not isinstance(sigma, (list, tuple)) or any(_is_array(m) for m in sigma):
        return isinstance(sigma, (list, tuple))
    try:
        return np.shape(sigma) != tuple(shape)
    except ValueError:  # ragged
        return True


class _NoKsSolver(Exception):
    """No ks solver of the device applies to the problem."""


_ks_cuda = None  # whether this build has a CUDA ks solver
_ks_nodev = set()  # ks plan keys on a GPU that no solver there applies to


def _ks_context(src, meth):
    """The context ks runs on for operand src: the CPU's where method names a CPU solver or,
    for 'auto', where the build has no ks solver on src's GPU; else src's own."""
    global _ks_cuda
    ctx = _context_of(src)
    if lib.ndf_context_place(ctx).kind != _lib.PLACE_CUDA:
        return ctx
    if meth is None:
        if _ks_cuda is None:
            _ks_cuda = any(s.startswith("cuda_") for s in solvers().get("ks", []))
        if _ks_cuda:
            return ctx
    elif not meth.startswith(b"cpu_"):
        return ctx
    return _context("cpu")


def _ks_back(out, gpu):
    """The host result out as an array of the kind and device of the GPU operand gpu."""
    if gpu.kind == "torch":
        import torch
        return torch.from_numpy(out).to(gpu.arr.device)
    import cupy
    with cupy.cuda.Device(gpu.dev):
        return cupy.asarray(out)


def ks(image, sigma, *, index="input", n_sigma=3.0, output="same", normalize=False,
       method="auto", deterministic=False, r_max=None):
    """Spatially varying Gaussian kernel superposition (KS; da Silva, Ansorge and Jena):
    each pixel blurred with its own Gaussian width. With I the image, s_a the sigma map of
    axis a and p, q pixel positions:

      index='input'  (Eq. 2a, scatter): out(p) = sum_q I(q) prod_a k(p_a - q_a, s_a(q))
      index='output' (Eq. 2b, gather):  out(p) = sum_q I(q) prod_a k(p_a - q_a, s_a(p))

    k(d, s) = (erf((d + 1/2) / (sqrt(2) s)) - erf((d - 1/2) / (sqrt(2) s))) / 2 is the
    pixel-integrated Gaussian, cut off at |d| > ceil(n_sigma * s) per pixel and axis (s = 0:
    the identity). normalize divides each truncated 1-D kernel by its sum, so that every
    pixel's kernel sums to 1. Pixels outside the image contribute nothing (no boundary mode).

    image: numpy array (any strides), CuPy array, torch tensor or DLPack producer (so may
    the maps be), 1-4 axes, dtype uint8/uint16/int16/float32/float64. sigma: one array of
    image's shape (isotropic: every axis), or a list or tuple of image.ndim such arrays (one
    per axis); maps may be any real
    dtype (non-native ones are converted to float64) and on the host or the image's GPU; they
    are operands of a plan made once for their shapes, dtypes and places, checked and prepared
    on the device that runs it (every value finite and >= 0, else ValueError naming the first
    bad pixel), so a new map each call costs no host round trip. output: 'same' (the image's
    grid; what falls outside is dropped) or 'full' (shape + 2 R on every axis, R = r_max if
    given, else the largest ceil(n_sigma * s) over the maps; image pixel q lands at q + R;
    with index='output' a pixel outside the image takes the nearest image pixel's sigma).
    r_max: None, or a bound on every pixel's radius ceil(n_sigma * s) (a pixel past it is a
    ValueError): it lets the GPU solvers size their work (and plan the shared-memory and
    look-up-table gathers) and, with output='full', fixes the margin. n_sigma: the cut-off in
    sigmas, finite and > 0. deterministic: a solver whose result is bitwise the same on every
    run (cpu_ks always is; on a GPU it rules out the scatters' atomic additions). method:
    'auto' (a solver of the image's device, or of the current device for numpy arrays, where
    one applies, else cpu_ks) or a solver name (ndfilt.solvers()['ks']: 'cpu_ks', and in CUDA
    builds the exact 'cuda_ks_gather*' and 'cuda_ks_scatter_*' and the approximate look-up-table
    'cuda_ks_approx_gather_*', never chosen by 'auto'; docs/ks.md lists them and their errors).
    last_solver() names the one used.

    Returns a new array of the image's dtype and kind, on its GPU for GPU inputs (computed on
    the CPU through host copies when cpu_ks runs). cpu_ks computes in float64 (the CUDA
    solvers are tested to 1e-5 of the largest output); integer outputs are rounded to nearest
    and clamped to the type's range.
    """
    if not _lib.HAVE_KS:
        raise NotImplementedError(f"this libndfilt ({__version__}) has no ks")
    if not isinstance(index, str) or index not in _lib.KS_INDEX:
        raise ValueError(f"index must be 'input' or 'output', not {index!r}")
    if not isinstance(output, str) or output not in _lib.KS_EXTENT:
        raise ValueError(f"output must be 'same' or 'full', not {output!r}")
    try:
        if isinstance(n_sigma, (str, bytes)) or np.ndim(n_sigma) != 0:
            raise TypeError
        ns = float(n_sigma)
    except (TypeError, ValueError):
        raise ValueError(f"n_sigma must be a number, not {n_sigma!r}") from None
    if not (ns > 0 and math.isfinite(ns)):
        raise ValueError(f"n_sigma must be finite and > 0, not {n_sigma!r}")
    meth = _method(method)
    idx, ext = _lib.KS_INDEX[index], _lib.KS_EXTENT[output]
    normalize, deterministic = bool(normalize), bool(deterministic)

    if r_max is not None and (isinstance(r_max, bool) or not isinstance(r_max, numbers.Integral)
                              or r_max < 0):
        raise ValueError(f"r_max must be an integer >= 0 (0: no bound), not {r_max!r}")
    src, arr, kind, back = _input(image)
    nd = src.desc.ndim
    shape = tuple(src.desc.shape[:nd])
    gpu = kind if kind in ("cupy", "torch") else None
    if _ks_per_axis(sigma, shape):
        if len(sigma) != nd:
            raise ValueError(f"sigma has {len(sigma)} maps; give one array (every axis) or a "
                             f"list or tuple of {nd} (one per axis)")
        maps = [_ks_map(m, shape, f"sigma[{a}]", gpu) for a, m in enumerate(sigma)]
    else:
        maps = [_ks_map(sigma, shape, "sigma", gpu)]
    nsig = len(maps)
    bound = int(r_max or 0)
    if ext == _lib.KS_EXTENT["full"] and not bound:
        # the margin: the largest radius over the maps (a reduction where they lie)
        top = max(float(m.max()) for m, _ in maps)
        bound = math.ceil(ns * top) if math.isfinite(top) and top >= 0 else 1
    # every sigma zero: 'full' has no margin, and is 'same'
    ext_run = ext if bound or ext != _lib.KS_EXTENT["full"] else _lib.KS_EXTENT["same"]
    problem = (nsig, idx, ns, ext_run, normalize, meth, deterministic, bound)

    def run(ctx, fallback):
        """ks on ctx (a GPU image staged through the host if ctx is the CPU's); fallback: no
        ks solver applying there raises _NoKsSolver instead of ValueError."""
        on_gpu = lib.ndf_context_place(ctx).kind == _lib.PLACE_CUDA
        staged = kind != "numpy" and not on_gpu
        s = _numpy_operand(_to_host(arr)) if staged else src
        ops = []
        for m, mk in maps:
            if mk == "numpy" or not on_gpu:
                ops.append(_numpy_operand(_to_host(m)))
            else:
                o = _cuda_operand(m, mk)
                if o.dev != src.dev:
                    raise ValueError(f"a sigma map is on GPU {o.dev}, the image on GPU {src.dev}")
                ops.append(o)
        oshape = tuple(n + 2 * bound for n in shape) if ext_run else shape
        if s.kind == "numpy":
            dst = _numpy_operand(np.empty(oshape, s.arr.dtype), True)
        else:
            dst = _cuda_operand(_empty_like(s, arr.dtype, oshape), kind)
        key = (("ks", ctx, _place_key(s.desc), _place_key(dst.desc))
               + tuple(_place_key(o.desc) for o in ops) + problem)

        def make(hp):
            opts = _lib.KsOpts(C.sizeof(_lib.KsOpts), meth, idx, ns, ext_run, int(normalize),
                               int(deterministic), 0, 0, bound)
            descs = (_lib.Array * nsig)(*[_lib.Array.from_buffer_copy(o.desc) for o in ops])
            for d in descs:
                d.data = None  # the maps come with each call
            st = lib.ndf_plan_ks(hp, ctx, C.byref(s.desc), C.byref(dst.desc), descs, nsig,
                                 C.byref(opts))
            if st == _lib.EUNSUPPORTED and fallback:
                _ks_nodev.add(key)
                raise _NoKsSolver
            return st

        with _lock:
            if fallback and key in _ks_nodev:
                raise _NoKsSolver
            if len(_ks_nodev) > _MAX_PARSED:
                _ks_nodev.clear()
            _run(key, ctx, s, dst, make, ops=ops)
        if staged:
            out = _ks_back(dst.arr, src)
            return out if back is None else back(out)
        return _result(dst, back, None)

    ctx = _ks_context(src, meth)
    if meth is None and lib.ndf_context_place(ctx).kind == _lib.PLACE_CUDA:
        try:
            return run(ctx, True)
        except _NoKsSolver:  # none of the GPU's applies (say 4 axes): the CPU's
            pass
        ctx = _context("cpu")
    return run(ctx, False)


# scipy.ndimage's derivative filters, over the filters above
from ._derivatives import (gaussian_gradient_magnitude, gaussian_laplace,  # noqa: E402,F401
                           generic_gradient_magnitude, generic_laplace, laplace, prewitt, sobel,
                           uniform_filter, uniform_filter1d)
# scipy.ndimage's rank filters
from ._rank import (maximum_filter, maximum_filter1d, median_filter,  # noqa: E402,F401
                    minimum_filter, minimum_filter1d, percentile_filter, rank_filter)
# Arrays of more than 4 axes: filtered along up to 4, the others a batch
from . import _batch  # noqa: E402
gaussian_filter = _batch.axes_style(("sigma", "order", "mode", "radius", "fwhm"),
                                    _batch.gaussian_trivial)(gaussian_filter)
uniform_filter = _batch.axes_style(("size", "mode", "origin"), _batch.size_trivial)(uniform_filter)
minimum_filter, maximum_filter, median_filter, rank_filter, percentile_filter = [
    _batch.axes_style(("size", "mode", "origin"), _batch.size_trivial)(_f) for _f in (
        minimum_filter, maximum_filter, median_filter, rank_filter, percentile_filter)]
gaussian_filter1d, correlate1d, convolve1d, uniform_filter1d, minimum_filter1d, \
    maximum_filter1d = [_batch.axis_style(_f) for _f in (
        gaussian_filter1d, correlate1d, convolve1d, uniform_filter1d, minimum_filter1d,
        maximum_filter1d)]
correlate, convolve = _batch.kernel_style(correlate), _batch.kernel_style(convolve)
sepfilter = _batch.weights_per_axis_style(sepfilter)
# mask= and nan_policy= on the linear filters: normalised convolution
from ._masked import maskable as _maskable  # noqa: E402
gaussian_filter = _maskable(gaussian_filter)
gaussian_filter1d = _maskable(gaussian_filter1d)
correlate = _maskable(correlate)
convolve = _maskable(convolve)
correlate1d = _maskable(correlate1d)
convolve1d = _maskable(convolve1d)
uniform_filter = _maskable(uniform_filter)
uniform_filter1d = _maskable(uniform_filter1d)
from ._masked import maskable_ks as _maskable_ks  # noqa: E402
if _lib.HAVE_KS:
    ks = _maskable_ks(ks)
# Every dtype scipy takes: others through a float64 copy, complex part by part (linear filters)
from ._dtypes import widen as _widen  # noqa: E402
(gaussian_filter, gaussian_filter1d, correlate, convolve, correlate1d, convolve1d, sepfilter,
 uniform_filter, uniform_filter1d, sobel, prewitt, laplace, gaussian_laplace,
 generic_laplace) = [_widen(True)(_f) for _f in (
     gaussian_filter, gaussian_filter1d, correlate, convolve, correlate1d, convolve1d, sepfilter,
     uniform_filter, uniform_filter1d, sobel, prewitt, laplace, gaussian_laplace,
     generic_laplace)]
(gaussian_gradient_magnitude, generic_gradient_magnitude) = [
    _widen(False)(_f) for _f in (gaussian_gradient_magnitude, generic_gradient_magnitude)]
(minimum_filter, maximum_filter, median_filter, rank_filter, percentile_filter, minimum_filter1d,
 maximum_filter1d) = [_widen(False, samples=True)(_f) for _f in (
     minimum_filter, maximum_filter, median_filter, rank_filter, percentile_filter,
     minimum_filter1d, maximum_filter1d)]
