# per-pass increments of the whole call, back to back (gaps between passes and per-call cost)
import cupy as cp, numpy as np, ndfilt
def t(f, n=20):
    for _ in range(5): f()
    s, e = cp.cuda.Event(), cp.cuda.Event(); bs=[]
    for _ in range(7):
        s.record()
        for _ in range(n): f()
        e.record(); e.synchronize(); bs.append(cp.cuda.get_elapsed_time(s, e) / n)
    return float(np.median(bs)) * 1e3
for n in (16, 256, 512):
    x = cp.random.standard_normal((n,n,n), dtype=cp.float32); y = cp.empty_like(x)
    r = [t(lambda: ndfilt.gaussian_filter(x, sg, mode='nearest', method='cuda_iir', output=y))
         for sg in ((0,0,4.5),(0,4.5,0),(4.5,0,0),(0,4.5,4.5),(4.5,4.5,4.5))]
    c = t(lambda: y.__setitem__(Ellipsis, x))
    print(f"{n}^3 b2b us: x {r[0]:.1f}, y {r[1]:.1f}, z {r[2]:.1f}, yx {r[3]:.1f}, zyx {r[4]:.1f}; copy {c:.1f}")
