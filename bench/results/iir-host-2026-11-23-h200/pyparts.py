import timeit, ctypes as C, cupy as cp, ndfilt, sys
from ndfilt import _lib
n0 = 64
x = cp.random.standard_normal((n0, n0, n0), dtype=cp.float32); y = cp.empty_like(x)
ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y)
plan = ndfilt._last_plan
src, dst, back, oa = ndfilt._inputs(x, y)
bs, bd = C.byref(src.desc), C.byref(dst.desc)
ctx = ndfilt._context_of(src)
args = (3, 4.5, 0, 'nearest', 0.0, 4.0, None, None, 'cuda_iir', 0)
def T(name, f, n=20000):
    t = min(timeit.repeat(f, number=n, repeat=5)) / n * 1e6
    print(f"{name:40s} {t:7.2f} us")
cp.cuda.Device().synchronize()
T("_kind(x)", lambda: ndfilt._kind(x))
T("_cuda_operand(x)", lambda: ndfilt._cuda_operand(x, 'cupy'))
T("_desc only", lambda: ndfilt._desc(4, (64, 64, 64), [4096, 64, 1], 12345, 1, 0))
T("x.dtype/strides/shape/ptr/devid", lambda: (x.dtype, x.strides, x.shape, x.data.ptr, x.data.device_id))
T("_inputs(x, y)", lambda: ndfilt._inputs(x, y))
T("_hashable(args)", lambda: ndfilt._hashable(args))
T("_context_of(src)", lambda: ndfilt._context_of(src))
T("_stream_of", lambda: ndfilt._stream_of('cupy', 0))
T("_place_key x2", lambda: (ndfilt._place_key(src.desc), ndfilt._place_key(dst.desc)))
T("byref x2", lambda: (C.byref(src.desc), C.byref(dst.desc)))
T("ndf_execute (GPU-bound?)", lambda: ndfilt.lib.ndf_execute(plan, bs, bd), n=2000)
T("gaussian_filter", lambda: ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y), n=2000)
T("ndf_version_string (ctypes floor)", lambda: ndfilt.lib.ndf_version_string())
cp.cuda.Device().synchronize()
