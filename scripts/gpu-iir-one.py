# gpu-iir-one.py N - one cuda_iir call on an N^3 float32 cube (sigma 4.5, mode nearest): the
# process that scripts/gpu-iir-probe.sh and gpu-iir-kernels.sh profile under Nsight Compute.
import sys, cupy as cp, ndfilt
n = int(sys.argv[1])
x = cp.random.standard_normal((n, n, n), dtype=cp.float32); y = cp.empty_like(x)
ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y)
cp.cuda.Device().synchronize()
