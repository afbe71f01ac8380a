# gpu-iir-time.py - development probe for cuda_iir (issue 05): the whole filter on 256^2 x 64,
# 256^3 and 512^3 (sigma 4.5, mode nearest) against a device copy, one call (median of 30) and
# 20 calls back to back (per call), CUDA events, and its relative L2 error against a truncate-8
# FIR Gaussian in float64. PROBE_METHOD: the method timed (default cuda_iir); PROBE_ORDER its
# iir_order (steps of iir_alvarez; default the method's); PROBE_SIGMA the sigmas
# (separated by commas or slashes, default 4.5); PROBE_SHAPES the shapes (likewise; default
# 256x256x64,256x256x256,512x512x512); PROBE_PEER=1: cupyx's FIR filter too. The library is
# NDFILT_LIBRARY; run by gpu-iir-probe.sh and gpu-iir-variants.sh once per build.
import os, re, cupy as cp, numpy as np, ndfilt, cupyx.scipy.ndimage as cnd
M = os.environ.get('PROBE_METHOD', 'cuda_iir')  # the gaussian method timed
O = {'iir_order': int(os.environ['PROBE_ORDER'])} if os.environ.get('PROBE_ORDER') else {}
def t(f, n=30):
    for _ in range(5): f()
    s, e = cp.cuda.Event(), cp.cuda.Event(); ts=[]
    for _ in range(n):
        s.record(); f(); e.record(); e.synchronize(); ts.append(cp.cuda.get_elapsed_time(s, e))
    one = float(np.median(ts))
    s.record()
    for _ in range(20): f()
    e.record(); e.synchronize()
    return one, cp.cuda.get_elapsed_time(s, e) / 20
print(cp.cuda.runtime.getDeviceProperties(0)['name'].decode())
S = [float(v) for v in re.split('[,/]', os.environ.get('PROBE_SIGMA', '4.5'))]
SH = [tuple(int(n) for n in v.split('x')) for v in re.split('[,/]', os.environ.get('PROBE_SHAPES', '256x256x64,256x256x256,512x512x512'))]
for shp in SH:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    cpy = t(lambda: y.__setitem__(Ellipsis, x))
    for sig in S:
        r = t(lambda: ndfilt.gaussian_filter(x, sig, mode='nearest', method=M, output=y, **O))
        ref = cnd.gaussian_filter(x.astype(cp.float64), sig, mode='nearest', truncate=8)
        ndfilt.gaussian_filter(x, sig, mode='nearest', method=M, output=y, **O)
        err = float(cp.linalg.norm(y - ref) / cp.linalg.norm(ref))
        print(f"{shp} sigma {sig}: {M}{O.get('iir_order', '')} {r[0]:.4f} ms one call, {r[1]:.4f} b2b; copy {cpy[0]:.4f} / {cpy[1]:.4f} ms; rel L2 vs truncate-8 FIR {err:.2e}")
        if os.environ.get('PROBE_PEER'):  # cupyx's FIR gaussian_filter on the same array
            c = t(lambda: cnd.gaussian_filter(x, sig, mode='nearest', output=y), 10)
            print(f"{shp} sigma {sig}: cupyx {c[0]:.4f} ms one call, {c[1]:.4f} b2b")
