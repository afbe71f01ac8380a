# gpu-iir-lag.py - development probe: cuda_iir on 256^3 and 512^3 (sigma 4.5, ms back to back)
# under the environment it is given (NDF_CUDA_IIR_FUSED, NDF_CUDA_IIR_LAG: how many slices the
# fused (y, x) pass's column groups trail its row groups). The library reads them when it
# plans, so each setting needs a process of its own.
import os, cupy as cp, ndfilt
def t(f, n=20):
    for _ in range(3): f()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    for _ in range(n): f()
    e.record(); e.synchronize()
    return cp.cuda.get_elapsed_time(s, e) / n
out = []
for shp in [(256, 256, 256), (512, 512, 512)]:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    out.append(f"{shp[0]}^3 {t(lambda: ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y)):.4f}")
print(f"FUSED={os.environ.get('NDF_CUDA_IIR_FUSED', '-')} LAG={os.environ.get('NDF_CUDA_IIR_LAG', '-')}:", ", ".join(out), "ms")
