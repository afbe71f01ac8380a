# probe: one cuda_iir call per shape (P, N, N) (args: N P1 P2 ...); ncu gives each kernel's duration
import sys, cupy as cp, ndfilt
n = int(sys.argv[1])
for p in [int(a) for a in sys.argv[2:]]:
    x = cp.random.standard_normal((p, n, n), dtype=cp.float32); y = cp.empty_like(x)
    ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y)
    cp.cuda.Device().synchronize()
