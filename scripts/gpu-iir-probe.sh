# gpu-iir-probe.sh - development probe for cuda_iir (issue 05): build the library, time the
# recursive Gaussian against a device copy on 256^3 and 512^3, and profile its kernels with
# Nsight Compute (speed of light, occupancy, warp states, instructions by opcode). A directory
# .probe-base holding another tree (`git archive BASE | tar -x -C .probe-base`) is built and
# timed too, in the same run (A/B on one machine). Output under $OUT.
# PROBE_ARCHS: the CUDA architectures of both builds (default 90; 90a for wgmma probes).
set -u
B=build-gpu
. scripts/gpu-iir-cfg.sh # NVCC, CFG: the configuration of both builds
cmake -S . -B $B $CFG > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
( time cmake --build $B -j16 --target ndfilt ${PROBE_TARGETS:-} ) > $OUT/build.log 2>&1 ||
  { grep -E "error" -A5 $OUT/build.log | head -40; exit 1; }
tail -3 $OUT/build.log
if [ -d .probe-base ]; then # the base tree (git archive of the commit compared against)
  ( cd .probe-base && cmake -S . -B build-base $CFG > $OUT/configure-base.log 2>&1 &&
    cmake --build build-base -j16 --target ndfilt > $OUT/build-base.log 2>&1 ) || echo "base build failed"
fi
export NDFILT_LIBRARY=$PWD/$B/libndfilt.so PYTHONPATH=$PWD/python
if [ -n "${PROBE_TESTS:-}" ]; then
  ( cd $B/tests && timeout 200 ./test_iir cuda > $OUT/test_iir.log 2>&1; echo "test_iir rc=$?"; tail -2 $OUT/test_iir.log; grep -m5 -B2 -A8 FAIL $OUT/test_iir.log )
fi
if [ -n "${PROBE_SAN:-}" ]; then # compute-sanitizer over test_iir (few random cases, every long line)
  for tool in memcheck racecheck synccheck initcheck; do
    ( cd $B/tests && NDF_TEST_CASES=8 timeout 250 /usr/local/cuda/bin/compute-sanitizer --tool $tool \
      --error-exitcode 9 ./test_iir cuda > $OUT/san_$tool.log 2>&1
      echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1)" )
  done
fi
# library:TC[:FUSED[:ENV]], ENV more settings for that run, comma-separated (a development knob
# added for the probe, e.g. build-gpu:1::NDF_CUDA_IIR_STAGES=3), so probes need no script of their own
for run in ${PROBE_RUNS:-$B:1 .probe-base/build-base:1 $B:1}; do
IFS=: read -r dir tc fused extra <<< "$run"
lib=$PWD/$dir/libndfilt.so
[ -f $lib ] || continue
echo "== $lib NDF_CUDA_IIR_TC=$tc NDF_CUDA_IIR_FUSED=${fused:-default} ${extra//,/ }" | tee -a $OUT/probe.txt
env ${extra//,/ } NDF_CUDA_IIR_TC=$tc NDF_CUDA_IIR_FUSED=${fused:-} NDFILT_LIBRARY=$lib python3 scripts/gpu-iir-time.py 2>&1 | tee -a $OUT/probe.txt
done
if [ -n "${PROBE_NCU-1}" ]; then
for n in ${PROBE_NCU_SIZES:-256 512}; do
  /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis \
    python3 scripts/gpu-iir-one.py $n > $OUT/ncu_$n.txt 2>&1
  echo "ncu $n rc=$?"
  [ $n = 256 ] && /usr/local/cuda/bin/ncu --clock-control none --metrics smsp__inst_executed.sum,sass__inst_executed_per_opcode \
    --print-metric-instances details -k regex:iir python3 scripts/gpu-iir-one.py $n > $OUT/ncu_op_$n.txt 2>&1
  grep -E "^  [a-z_<>:, 0-9A-Za-z()]+\(|Duration|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Memory Throughput|No Eligible" $OUT/ncu_$n.txt | head -60
done
fi
