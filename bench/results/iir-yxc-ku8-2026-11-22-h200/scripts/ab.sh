set -u
PROBE_NCU= PROBE_TESTS=1 PROBE_TARGETS=test_iir PROBE_RUNS="build-gpu:1 .probe-base/build-base:1 build-gpu:1 .probe-base/build-base:1" OUT=$OUT bash scripts/gpu-iir-probe.sh
( cd build-gpu/tests && NDF_TEST_CASES=4 timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 ./test_iir cuda > $OUT/racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.log | tail -1)" )
export PYTHONPATH=$PWD/python
for lib in build-gpu .probe-base/build-base; do
NDFILT_LIBRARY=$PWD/$lib/libndfilt.so /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed python3 .probe/tail.py 256 2>&1 | grep -E "iir_tc|gpu__time|dram__" | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - | tr -s ' ' | sed "s|^|$lib |"
done
