set -u
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=OFF > /dev/null 2>&1
cmake --build $B -j16 --target ndfilt test_iir > $OUT/build.log 2>&1 || { tail $OUT/build.log; exit 1; }
export NDFILT_LIBRARY=$PWD/$B/libndfilt.so PYTHONPATH=$PWD/python
for f in default 0 default 0; do
env $( [ $f = 0 ] && echo NDF_CUDA_IIR_FUSED=0 ) python3 - <<'PY' 2>&1 | sed "s/^/fused=$f /" | tee -a $OUT/probe384.txt
import cupy as cp, numpy as np, ndfilt, cupyx.scipy.ndimage as cnd
def t(f):
    for _ in range(5): f()
    s, e = cp.cuda.Event(), cp.cuda.Event(); s.record()
    for _ in range(20): f()
    e.record(); e.synchronize(); return cp.cuda.get_elapsed_time(s, e) / 20
for shp in [(256,384,384),(256,300,500),(512,512,512)]:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    r = t(lambda: ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y))
    ref = cnd.gaussian_filter(x.astype(cp.float64), 4.5, mode='nearest', truncate=8)
    err = float(cp.linalg.norm(y - ref) / cp.linalg.norm(ref))
    print(f"{shp}: cuda_iir {r:.4f} ms b2b; rel L2 vs truncate-8 FIR {err:.2e}")
PY
done
cd $B/tests
for tool in racecheck memcheck synccheck initcheck; do
  NDF_TEST_CASES=4 timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 ./test_iir cuda > $OUT/san_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1) $(tail -1 $OUT/san_$tool.log)"
done
