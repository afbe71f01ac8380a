# per-sample time of the whole filter: L2-resident small volumes against DRAM-sized ones
import cupy as cp, numpy as np, ndfilt
def t(f, n=20):
    for _ in range(5): f()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    for _ in range(n): f()
    e.record(); e.synchronize()
    return cp.cuda.get_elapsed_time(s, e) / n
for shp in [(32,256,256),(64,256,256),(96,256,256),(256,256,256),(48,512,512)]:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    r = t(lambda: ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y))
    c = t(lambda: y.__setitem__(Ellipsis, x))
    print(f"{shp}: filter {r*1e3:.1f} us = {r*1e9/x.size:.3f} ps/sample; copy {c*1e3:.1f} us = {c*1e9/x.size:.3f} ps/sample")
