set -u
T=bench/results/iir-stages-probe-2026-11-22-h200/time.py
C="-DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=OFF"
cmake -S . -B build-gpu $C > $OUT/cfg.log 2>&1
( cd .probe-base && cmake -S . -B build-base $C > $OUT/cfg-base.log 2>&1 && cmake --build build-base -j8 --target ndfilt > $OUT/build-base.log 2>&1 ) &
cmake --build build-gpu -j8 --target ndfilt test_iir > $OUT/build.log 2>&1 || { grep -A5 error $OUT/build.log | head -30; exit 1; }
wait
export PYTHONPATH=$PWD/python
( cd build-gpu/tests && timeout 200 ./test_iir cuda > $OUT/test_iir.log 2>&1; echo "test_iir rc=$? $(tail -1 $OUT/test_iir.log)" )
for rep in 1 2 3; do
  NDFILT_LIBRARY=$PWD/.probe-base/build-base/libndfilt.so python3 $T base
  NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so python3 $T new
done 2>&1 | tee $OUT/ab.txt
for lib in build-gpu .probe-base/build-base; do
  NDFILT_LIBRARY=$PWD/$lib/libndfilt.so /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --section SpeedOfLight python3 scripts/gpu-iir-one.py 512 > $OUT/ncu_$(basename $lib).txt 2>&1
  echo "== $lib"; grep -E "^  [a-z].*iir|Duration|DRAM Throughput" $OUT/ncu_$(basename $lib).txt | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - | tr -s ' '
done
