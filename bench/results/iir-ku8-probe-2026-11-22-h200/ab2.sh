set -u
C="-DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=OFF"
cmake -S . -B build-gpu $C > $OUT/cfg.log 2>&1
if [ -d .probe-base ]; then ( cd .probe-base && cmake -S . -B build-base $C > $OUT/cfg-base.log 2>&1 && cmake --build build-base -j8 --target ndfilt > $OUT/build-base.log 2>&1 ) & fi
cmake --build build-gpu -j8 --target ndfilt test_iir > $OUT/build.log 2>&1 || { grep -A5 error $OUT/build.log | head -30; exit 1; }
wait
export PYTHONPATH=$PWD/python
for ku in default 4 8; do
  ( cd build-gpu/tests && if [ $ku = default ]; then unset NDF_CUDA_IIR_KU; else export NDF_CUDA_IIR_KU=$ku; fi
    timeout 200 ./test_iir cuda > $OUT/test_iir_$ku.log 2>&1; echo "test_iir KU=$ku rc=$? $(tail -1 $OUT/test_iir_$ku.log)" )
done
if [ -n "${AB_SAN:-}" ]; then
  for tool in memcheck racecheck synccheck initcheck; do
    ( cd build-gpu/tests && NDF_TEST_CASES=6 timeout 250 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 ./test_iir cuda > $OUT/san_$tool.log 2>&1
      echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)" )
  done
fi
for rep in 1 2; do
  [ -d .probe-base ] && NDFILT_LIBRARY=$PWD/.probe-base/build-base/libndfilt.so python3 .probe-tmp/time.py base
  NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so python3 .probe-tmp/time.py new-default
  NDF_CUDA_IIR_KU=4 NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so python3 .probe-tmp/time.py new-ku4
done 2>&1 | tee $OUT/ab.txt
if [ -n "${AB_NCU:-}" ]; then
  export NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so
  for n in 256 512; do
    /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --section SpeedOfLight --section Occupancy python3 scripts/gpu-iir-one.py $n > $OUT/ncu_$n.txt 2>&1
    echo "== n=$n"; grep -E "^  [a-z].*iir|Duration|DRAM Throughput|Block Limit Shared|Block Limit Reg" $OUT/ncu_$n.txt | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - - - | tr -s ' '
  done
fi
