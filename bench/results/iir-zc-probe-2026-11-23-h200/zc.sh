# throwaway: the cluster column pass (NDF_PROBE_ZC=1) against the committed one, same build
set -u
cp .probe/iir_tc_kernel.cu src/cuda/iir_tc_kernel.cu
B=build-gpu
. scripts/gpu-iir-cfg.sh
cmake -S . -B $B $CFG > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
cmake --build $B -j16 --target ndfilt test_iir > $OUT/build.log 2>&1 || { grep -E "error" -A5 $OUT/build.log | head -40; exit 1; }
export NDFILT_LIBRARY=$PWD/$B/libndfilt.so PYTHONPATH=$PWD/python
for z in 1 0; do
  ( cd $B/tests && NDF_PROBE_ZC=$z timeout 250 ./test_iir cuda > $OUT/test_iir_zc$z.log 2>&1; echo "zc=$z test_iir rc=$?"; tail -2 $OUT/test_iir_zc$z.log; grep -m5 -B2 -A8 FAIL $OUT/test_iir_zc$z.log )
done
if [ -n "${ZC_SAN:-}" ]; then
  for tool in memcheck racecheck synccheck; do
    ( cd $B/tests && NDF_PROBE_ZC=1 NDF_TEST_CASES=4 timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool $tool \
      --error-exitcode 9 ./test_iir cuda > $OUT/san_$tool.log 2>&1
      echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)" )
  done
fi
for z in 1 0 1 0; do echo "== NDF_PROBE_ZC=$z"; NDF_PROBE_ZC=$z python3 scripts/gpu-iir-time.py; done 2>&1 | tee $OUT/time.txt
for z in 1 0; do for n in 256 512; do
  NDF_PROBE_ZC=$z /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --section SpeedOfLight \
    --metrics smsp__inst_executed.sum python3 scripts/gpu-iir-one.py $n > $OUT/ncu_zc${z}_$n.txt 2>&1
  echo "== zc=$z n=$n"; grep -E "^  [a-z].*iir|Duration|DRAM Throughput" $OUT/ncu_zc${z}_$n.txt | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - | tr -s ' '
done; done
