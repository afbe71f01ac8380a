# gpu-iir-axes.py - development probe for cuda_iir (issue 05): one axis at a time (sigma 0 on
# the others) on long lines and large 2-D images, 20 calls back to back (CUDA events), through
# the library at NDFILT_LIBRARY; TAG labels the lines (bench/results/iir-segments-2026-11-23-h200).
import os, cupy as cp, numpy as np, ndfilt
def t(f, n=20):
    for _ in range(3): f()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    for _ in range(n): f()
    e.record(); e.synchronize()
    return cp.cuda.get_elapsed_time(s, e) / n
for shp, sig in [((2048, 2048), (0, 4.5)), ((2048, 2048), (4.5, 0)), ((1500, 1500), (0, 4.5)), ((1500, 1500), (4.5, 0)),
                 ((1024, 1024), (0, 4.5)), ((1024, 1024), (4.5, 0)), ((1024, 256, 256), (4.5, 0, 0)), ((2048, 128, 128), (4.5, 0, 0)),
                 ((4096, 4096), (0, 4.5)), ((4096, 4096), (4.5, 0)), ((1200, 256, 256), (4.5, 0, 0))]:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    r = t(lambda: ndfilt.gaussian_filter(x, sig, mode='nearest', method='cuda_iir', output=y))
    print(f"{os.environ.get('TAG','')} {shp} sigma {sig}: {r:.4f} ms b2b")
