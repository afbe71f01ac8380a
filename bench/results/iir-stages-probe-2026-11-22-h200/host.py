# a call's host cost (small arrays, back to back: host-bound) and one call on 256^3
import sys, cupy as cp, numpy as np, ndfilt
def b2b(f, n=200):
    for _ in range(20): f()
    s, e = cp.cuda.Event(), cp.cuda.Event(); bs=[]
    for _ in range(5):
        s.record()
        for _ in range(n): f()
        e.record(); e.synchronize(); bs.append(cp.cuda.get_elapsed_time(s, e) / n)
    return float(np.median(bs)) * 1e3
def one(f, n=40):
    for _ in range(5): f()
    s, e = cp.cuda.Event(), cp.cuda.Event(); ts=[]
    for _ in range(n):
        cp.cuda.Device().synchronize()
        s.record(); f(); e.record(); e.synchronize(); ts.append(cp.cuda.get_elapsed_time(s, e))
    return float(np.median(ts)) * 1e3
out=[]
x = cp.random.standard_normal((16,16,16), dtype=cp.float32); y = cp.empty_like(x)
for sg in ((0,0,4.5),(4.5,4.5,4.5)):
    out.append(f"16^3 {len([v for v in sg if v])} pass b2b {b2b(lambda: ndfilt.gaussian_filter(x, sg, mode='nearest', method='cuda_iir', output=y)):.1f} us")
x = cp.random.standard_normal((256,256,256), dtype=cp.float32); y = cp.empty_like(x)
out.append(f"256^3 one call {one(lambda: ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y)):.1f} us")
print(sys.argv[1], "; ".join(out), flush=True)
