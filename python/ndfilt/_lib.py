# SPDX-License-Identifier: BSD-3-Clause
"""ndfilt._lib - finds and loads libndfilt, declares its C types and functions (ctypes)."""
import ctypes as C
import ctypes.util
import os

MAX_DIMS = 4
U8, U16, I16, F32, F64 = 1, 2, 3, 4, 5
PLACE_HOST, PLACE_CUDA = 0, 1
OK, EINVAL, ENOMEM, EUNSUPPORTED, EIO, ECUDA, ENODEV = range(7)
MODES = {"reflect": 0, "constant": 1, "nearest": 2, "mirror": 3, "wrap": 4,
         "grid-mirror": 0, "grid-constant": 1, "grid-wrap": 4}


class Place(C.Structure):
    _fields_ = [("kind", C.c_int), ("device", C.c_int)]


class Array(C.Structure):
    _fields_ = [("dtype", C.c_int), ("ndim", C.c_int), ("shape", C.c_int64 * MAX_DIMS),
                ("strides", C.c_int64 * MAX_DIMS), ("data", C.c_void_p), ("place", Place)]


class ContextOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("device", C.c_char_p), ("threads", C.c_int),
                ("workspace_limit", C.c_size_t), ("message", C.c_char_p),
                ("message_size", C.c_size_t), ("memory_limit", C.c_size_t)]


class Correlate1dOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("method", C.c_char_p), ("mode", C.c_int),
                ("cval", C.c_double), ("origin", C.c_int)]


class SepfilterOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("method", C.c_char_p), ("convolve", C.c_int),
                ("mode", C.c_int * MAX_DIMS), ("origin", C.c_int * MAX_DIMS),
                ("cval", C.c_double)]


class GaussianOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("method", C.c_char_p),
                ("sigma", C.c_double * MAX_DIMS), ("order", C.c_int * MAX_DIMS),
                ("truncate", C.c_double), ("radius", C.c_int * MAX_DIMS),
                ("mode", C.c_int * MAX_DIMS), ("cval", C.c_double), ("iir_order", C.c_int),
                ("tolerance", C.c_double)]


class CorrelateOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("method", C.c_char_p),
                ("mode", C.c_int * MAX_DIMS), ("origin", C.c_int * MAX_DIMS),
                ("cval", C.c_double)]


class KsOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("method", C.c_char_p), ("index", C.c_int),
                ("n_sigma", C.c_double), ("output", C.c_int), ("normalize", C.c_int),
                ("deterministic", C.c_int), ("tile_rows", C.c_int), ("block_rows", C.c_int),
                ("r_max", C.c_int64)]


class RankOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("method", C.c_char_p),
                ("mode", C.c_int * MAX_DIMS), ("origin", C.c_int * MAX_DIMS),
                ("cval", C.c_double)]


KS_INDEX = {"input": 0, "output": 1}  # ndf_ks_index
KS_EXTENT = {"same": 0, "full": 1}    # ndf_ks_extent


def _candidates():
    env = os.environ.get("NDFILT_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libndfilt.so")                       # installed beside the package
    yield os.path.join(here, "..", "..", "build", "libndfilt.so")  # the source tree's build
    found = ctypes.util.find_library("ndfilt")                     # the system path
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return C.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("libndfilt not found; build it (make) or set NDFILT_LIBRARY. Tried: "
                      + ", ".join(tried))


lib = _load()
P = C.POINTER
_sig = {
    "ndf_status_str": (C.c_char_p, [C.c_int]),
    "ndf_version_string": (C.c_char_p, []),
    "ndf_context_create": (C.c_int, [P(C.c_void_p), P(ContextOpts)]),
    "ndf_context_destroy": (None, [C.c_void_p]),
    "ndf_context_place": (Place, [C.c_void_p]),
    "ndf_context_device_name": (C.c_char_p, [C.c_void_p]),
    "ndf_context_threads": (C.c_int, [C.c_void_p]),
    "ndf_context_memory_free": (C.c_size_t, [C.c_void_p]),
    "ndf_context_devices": (C.c_int, [C.c_void_p, C.c_void_p, C.c_int]),
    "ndf_context_message": (C.c_char_p, [C.c_void_p]),
    "ndf_context_synchronize": (C.c_int, [C.c_void_p]),
    "ndf_execute": (C.c_int, [C.c_void_p, P(Array), P(Array)]),
    "ndf_plan_destroy": (None, [C.c_void_p]),
    "ndf_plan_solver": (C.c_char_p, [C.c_void_p]),
    "ndf_plan_slabs": (C.c_int64, [C.c_void_p]),
    "ndf_plan_last_solver": (C.c_char_p, [C.c_void_p]),
    "ndf_solver_name": (C.c_char_p, [C.c_int, P(C.c_char_p)]),
    "ndf_plan_correlate1d": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), P(Array),
                                       P(C.c_double), C.c_int64, C.c_int, P(Correlate1dOpts)]),
    "ndf_plan_convolve1d": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), P(Array),
                                      P(C.c_double), C.c_int64, C.c_int, P(Correlate1dOpts)]),
    "ndf_plan_sepfilter": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), P(Array),
                                     P(P(C.c_double)), P(C.c_int64), P(SepfilterOpts)]),
    "ndf_sepfilter": (C.c_int, [C.c_void_p, P(Array), P(Array), P(P(C.c_double)),
                                P(C.c_int64), P(SepfilterOpts)]),
    "ndf_plan_gaussian": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), P(Array),
                                    P(GaussianOpts)]),
    "ndf_gaussian": (C.c_int, [C.c_void_p, P(Array), P(Array), P(GaussianOpts)]),
    "ndf_gaussian_kernel1d": (C.c_int, [C.c_double, C.c_int, C.c_int, P(C.c_double)]),
    "ndf_plan_correlate": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), P(Array),
                                     P(C.c_double), P(C.c_int64), P(CorrelateOpts)]),
    "ndf_plan_convolve": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), P(Array),
                                    P(C.c_double), P(C.c_int64), P(CorrelateOpts)]),
    "ndf_plan_correlate_bank": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), C.c_int,
                                          P(Array), P(C.c_double), P(C.c_int64),
                                          P(CorrelateOpts)]),
    "ndf_plan_convolve_bank": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), C.c_int,
                                         P(Array), P(C.c_double), P(C.c_int64),
                                         P(CorrelateOpts)]),
    "ndf_execute_bank": (C.c_int, [C.c_void_p, P(Array), C.c_int, P(Array)]),
    "ndf_execute_n": (C.c_int, [C.c_void_p, C.c_int, P(Array), C.c_int, P(Array)]),
    "ndf_array_free": (None, [C.c_void_p, P(Array)]),
}
for _name, (_res, _args) in _sig.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args
# Rank filters (libraries that have them).
HAVE_RANK = hasattr(lib, "ndf_plan_rank")
if HAVE_RANK:
    lib.ndf_plan_rank.restype = C.c_int
    lib.ndf_plan_rank.argtypes = [P(C.c_void_p), C.c_void_p, P(Array), P(Array), C.c_int64,
                                  P(C.c_ubyte), P(C.c_int64), P(RankOpts)]
# Page-locked host arrays (libraries that have them).
HAVE_HOST_ALLOC = hasattr(lib, "ndf_array_alloc_host")
if HAVE_HOST_ALLOC:
    lib.ndf_array_alloc_host.restype = C.c_int
    lib.ndf_array_alloc_host.argtypes = [C.c_void_p, P(Array), C.c_int, C.c_int, P(C.c_int64)]
# Only in libraries that have kernel superposition (0.2 on).
HAVE_KS = hasattr(lib, "ndf_plan_ks")
if HAVE_KS:
    for _name, (_res, _args) in {
        "ndf_plan_ks": (C.c_int, [P(C.c_void_p), C.c_void_p, P(Array), P(Array), P(Array),
                                  C.c_int, P(KsOpts)]),
        "ndf_ks": (C.c_int, [C.c_void_p, P(Array), P(Array), P(Array), C.c_int, P(KsOpts)]),
        "ndf_ks_full_shape": (C.c_int, [C.c_void_p, P(Array), P(Array), C.c_int, C.c_double,
                                        P(C.c_int64), P(C.c_int64)]),
    }.items():
        _f = getattr(lib, _name)
        _f.restype, _f.argtypes = _res, _args
# Only in CUDA builds.
HAVE_STREAMS = hasattr(lib, "ndf_context_set_stream")
if HAVE_STREAMS:
    lib.ndf_context_set_stream.restype = C.c_int
    lib.ndf_context_set_stream.argtypes = [C.c_void_p, C.c_void_p]
