# gpu-iir-axes.py - development probe for cuda_iir (issue 05): one axis at a time (sigma 0 on
# the others) on long lines and large 2-D images, 20 calls back to back (CUDA events), through
# the library at NDFILT_LIBRARY; TAG labels the lines (bench/results/iir-segments-2026-11-23-h200).
import os, sys, cupy as cp, ndfilt
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'bench'))
from timing import events_ms  # noqa: E402
def t(f):  # one timing of 20 calls back to back, after 3
    return events_ms(f, reps=1, batch=20, warm=3)
for shp, sig in [((2048, 2048), (0, 4.5)), ((2048, 2048), (4.5, 0)), ((1500, 1500), (0, 4.5)), ((1500, 1500), (4.5, 0)),
                 ((1024, 1024), (0, 4.5)), ((1024, 1024), (4.5, 0)), ((1024, 256, 256), (4.5, 0, 0)), ((2048, 128, 128), (4.5, 0, 0)),
                 ((4096, 4096), (0, 4.5)), ((4096, 4096), (4.5, 0)), ((1200, 256, 256), (4.5, 0, 0))]:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    r = t(lambda: ndfilt.gaussian_filter(x, sig, mode='nearest', method='cuda_iir', output=y))
    print(f"{os.environ.get('TAG','')} {shp} sigma {sig}: {r:.4f} ms b2b")
