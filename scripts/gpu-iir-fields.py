# gpu-iir-fields.py - development probe for cuda_iir (issue 05; METHOD: another method, as
# fir): displacement fields, the components interleaved ([Z][Y][X][C], ITK's layout) and
# planar ([C][Z][Y][X]), every spatial axis smoothed (sigma 0 on the component axis), the
# interleaved field one axis at a time, and 2-D images likewise; 20 calls back to back (CUDA
# events) through the library at NDFILT_LIBRARY, cupyx beside it (PEER=1); CPU=1: cpu_iir too.
import os, sys, cupy as cp, ndfilt
from cupyx.scipy import ndimage as cnd
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'bench'))
from timing import events_ms  # noqa: E402
def t(f):
    return events_ms(f, reps=1, batch=20, warm=3)
s = float(os.environ.get('SIGMA', '4.5'))
m = os.environ.get('METHOD', 'cuda_iir')  # or another GPU method: fir, cuda_sep, auto
tag = os.environ.get('TAG', '')
cases = [((256, 256, 256, 3), (s, s, s, 0)), ((3, 256, 256, 256), (0, s, s, s)),
         ((256, 256, 256, 3), (0, 0, s, 0)), ((256, 256, 256, 3), (0, s, 0, 0)),
         ((256, 256, 256, 3), (s, 0, 0, 0)), ((160, 192, 160, 3), (s, s, s, 0)),
         ((2048, 2048, 2), (s, s, 0)), ((2, 2048, 2048), (0, s, s)),
         ((2048, 2048, 3), (s, s, 0))]
for shp, sig in cases:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    r = t(lambda: ndfilt.gaussian_filter(x, sig, mode='nearest', method=m, output=y))
    ref = cnd.gaussian_filter(x.astype(cp.float64), sig, mode='nearest', truncate=8)
    ndfilt.gaussian_filter(x, sig, mode='nearest', method=m, output=y)
    err = float(cp.linalg.norm(y - ref) / cp.linalg.norm(ref))
    c = t(lambda: cnd.gaussian_filter(x, sig, mode='nearest', output=y)) if os.environ.get('PEER') else float('nan')
    print(f"{tag} {shp} sigma {sig}: {m} {r:.4f} ms b2b, cupyx {c:.4f}, rel L2 {err:.1e}", flush=True)
if os.environ.get('CPU'):  # cpu_iir on the host's threads, numpy arrays, median of 5 calls
    import numpy as np
    from timing import cpu_ms
    ndfilt.set_device("cpu")
    for shp, sig in cases[:2] + cases[6:]:
        x = np.random.standard_normal(shp).astype(np.float32); y = np.empty_like(x)
        r = cpu_ms(lambda a: ndfilt.gaussian_filter(a, sig, mode='nearest', method='cpu_iir', output=y), x)
        print(f"{tag} cpu {shp} sigma {sig}: cpu_iir {r:.2f} ms", flush=True)
