set -u
PROBE_NCU= PROBE_TESTS= PROBE_TARGETS=test_iir PROBE_RUNS="${RUNS}" OUT=$OUT bash scripts/gpu-iir-probe.sh | grep -vE "^real|^user|^sys" | grep -E "==|256, 256|512, 512"
( cd build-gpu/tests && NDF_CUDA_IIR_FUSED=2 NDF_CUDA_IIR_YXKU=8 timeout 200 ./test_iir cuda > $OUT/test_iir_ku8.log 2>&1; echo "test_iir ku8 rc=$?"; tail -1 $OUT/test_iir_ku8.log; grep -m5 -B2 -A8 FAIL $OUT/test_iir_ku8.log )
( cd build-gpu/tests && NDF_CUDA_IIR_FUSED=2 NDF_CUDA_IIR_YXKU=8 NDF_TEST_CASES=4 timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 ./test_iir cuda > $OUT/racecheck.log 2>&1; echo "racecheck ku8 rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.log | tail -1)" ) &
export PYTHONPATH=$PWD/python
for v in "4 8" "8 8" "8 16" "8 4"; do set -- $v
NDF_CUDA_IIR_FUSED=2 NDF_CUDA_IIR_YXKU=$1 NDF_CUDA_IIR_CLUSTER=$2 NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so /usr/local/cuda/bin/ncu --clock-control none -k regex:iir_tc_yxc --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active python3 .probe/tail.py 256 256 2>&1 | grep -E "^  .*iir_tc|gpu__time|dram__|warps_active" | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - - | tr -s ' ' | sed "s|^|ku $1 C $2 |"
done
wait
