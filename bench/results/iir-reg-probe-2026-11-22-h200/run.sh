# run.sh - the register-resident probe on the GPU machine (from the repository root):
# OUT=... bash bench/results/iir-reg-probe-2026-11-22-h200/run.sh
set -u
D=bench/results/iir-reg-probe-2026-11-22-h200
NVCC=/usr/local/cuda/bin/nvcc
gcc -O2 -std=c11 -c src/core/iir.c -Iinclude -Isrc/core -o /tmp/iir_core.o || exit 1
$NVCC -std=c++17 -arch=sm_90 -O3 -Xptxas -v -Iinclude -Isrc $D/reg.cu /tmp/iir_core.o -o /tmp/reg \
  > $OUT/reg_build.log 2>&1 || { tail -20 $OUT/reg_build.log; exit 1; }
( cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=$NVCC -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF > $OUT/configure.log 2>&1 && cmake --build build-gpu -j16 --target ndfilt \
  > $OUT/build.log 2>&1 ) &
/tmp/reg 4.5 | tee $OUT/reg.txt
/tmp/reg 16 | tee -a $OUT/reg.txt
wait
export NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so PYTHONPATH=$PWD/python
python3 - <<'PY' 2>&1 | tee $OUT/lib.txt
import cupy as cp, numpy as np, ndfilt
def t(f, n=30):
    for _ in range(5): f()
    s, e = cp.cuda.Event(), cp.cuda.Event(); ts=[]
    for _ in range(n):
        s.record(); f(); e.record(); e.synchronize(); ts.append(cp.cuda.get_elapsed_time(s, e))
    bs = []
    for _ in range(5):
        s.record()
        for _ in range(20): f()
        e.record(); e.synchronize(); bs.append(cp.cuda.get_elapsed_time(s, e) / 20)
    return float(np.median(ts)), float(np.median(bs))
print(cp.cuda.runtime.getDeviceProperties(0)['name'].decode())
for shp in [(256,256,256),(64,256,256)]:
    x = cp.random.standard_normal(shp, dtype=cp.float32); y = cp.empty_like(x)
    for name, sig in [("x", (0,0,4.5)), ("y", (0,4.5,0)), ("z", (4.5,0,0)), ("all", 4.5)]:
        r = t(lambda: ndfilt.gaussian_filter(x, sig, mode='nearest', method='cuda_iir', output=y))
        print(f"library {shp} {name}: {r[0]:.4f} ms one call, {r[1]:.4f} b2b")
PY
/usr/local/cuda/bin/ncu --kernel-name regex:reg_cols --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
  --section SchedulerStats /tmp/reg 4.5 > $OUT/ncu_reg.txt 2>&1
grep -E "Duration|Issued Warp|Issue Slots Busy|Achieved Occupancy|DRAM Throughput|Registers|Warp Cycles Per Issued|No Eligible|Compute \(SM\)" $OUT/ncu_reg.txt | head -20
/usr/local/cuda/bin/ncu --kernel-name regex:reg_cols --launch-skip 46 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats /tmp/reg 4.5 \
  > $OUT/ncu_reg_compute_only.txt 2>&1
grep -E "reg_cols|Duration|Issue Slots Busy|Warp Cycles Per Issued|No Eligible" $OUT/ncu_reg_compute_only.txt | head
