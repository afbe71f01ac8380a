# z pass (lines along axis 0) against y pass (axis 1), per sample, as the z stride shrinks
import cupy as cp, numpy as np, ndfilt
def b2b(f, n=20):
    for _ in range(3): f()
    s, e = cp.cuda.Event(), cp.cuda.Event(); bs=[]
    for _ in range(5):
        s.record()
        for _ in range(n): f()
        e.record(); e.synchronize(); bs.append(cp.cuda.get_elapsed_time(s, e) / n)
    return float(np.median(bs))
for shp in [(512,512,512),(512,256,512),(512,128,512),(512,64,512),(256,512,512)]:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    z = b2b(lambda: ndfilt.gaussian_filter(x, (4.5,0,0), mode='nearest', method='cuda_iir', output=y))
    yy = b2b(lambda: ndfilt.gaussian_filter(x, (0,4.5,0), mode='nearest', method='cuda_iir', output=y))
    c = b2b(lambda: y.__setitem__(Ellipsis, x))
    n = x.size
    print(f"{shp}: z stride {shp[1]*shp[2]*4>>10} KiB: z {z*1e9/n:.3f} ps/sample, y {yy*1e9/n:.3f}, copy {c*1e9/n:.3f} ({z*1e3:.0f} / {yy*1e3:.0f} / {c*1e3:.0f} us)", flush=True)
