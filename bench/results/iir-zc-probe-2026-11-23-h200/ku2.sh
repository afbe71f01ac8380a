# throwaway: 2 chunks a warp (NDF_PROBE_KU2=1) on lines up to 256, register cap 128 and 80
set -u
cp .probe/ku2.cu src/cuda/iir_tc_kernel.cu
. scripts/gpu-iir-cfg.sh
build() { cmake -S . -B build-$1 $CFG "-DCMAKE_CUDA_FLAGS=$2" > $OUT/cfg-$1.log 2>&1 && cmake --build build-$1 -j8 --target ndfilt test_iir > $OUT/build-$1.log 2>&1 || echo "build $1 failed"; }
build k128 "" & build k80 "-DNDF_PROBE_R2=80" &
wait
export PYTHONPATH=$PWD/python
( cd build-k80/tests && NDF_PROBE_KU2=1 timeout 250 ./test_iir cuda > $OUT/test_k80.log 2>&1; echo "k80 test_iir rc=$?"; tail -1 $OUT/test_k80.log; grep -m3 -A6 FAIL $OUT/test_k80.log )
( cd build-k128/tests && NDF_PROBE_KU2=1 timeout 250 ./test_iir cuda > $OUT/test_k128.log 2>&1; echo "k128 test_iir rc=$?"; tail -1 $OUT/test_k128.log )
for r in 1 2; do for v in "k128 0" "k128 1" "k80 1"; do set -- $v
  for s in 64x256x256 128x256x256 256x256x256; do
    echo -n "$1 KU2=$2: "; NDF_PROBE_KU2=$2 NDFILT_LIBRARY=$PWD/build-$1/libndfilt.so python3 .probe/small.py $s t; done; done; done
for v in "k128 0" "k128 1" "k80 1"; do set -- $v; for s in 64x256x256 256x256x256; do
  echo "== $1 KU2=$2 $s"
  NDF_PROBE_KU2=$2 NDFILT_LIBRARY=$PWD/build-$1/libndfilt.so /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --section SpeedOfLight --section Occupancy python3 .probe/small.py $s > $OUT/ncu_$1_$2_$s.txt 2>&1
  grep -E "^  [a-z].*iir|Duration|Achieved Occupancy" $OUT/ncu_$1_$2_$s.txt | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - | tr -s ' '
done; done
