set -u
( cd .probe-head && cmake -S . -B build-head -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) \
    -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=OFF > /dev/null 2>&1 && cmake --build build-head -j16 --target ndfilt > /dev/null 2>&1 ) &
PROBE_NCU= PROBE_TESTS=${PROBE_TESTS-1} PROBE_TARGETS=test_iir PROBE_RUNS="build-gpu:1 .probe-base/build-base:1" OUT=$OUT bash scripts/gpu-iir-probe.sh
wait
[ -n "${RACE-1}" ] && ( cd build-gpu/tests && NDF_TEST_CASES=4 timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 ./test_iir cuda > $OUT/racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.log | tail -1)" )
export PYTHONPATH=$PWD/python
for lib in build-gpu .probe-base/build-base .probe-head/build-head; do
NDFILT_LIBRARY=$PWD/$lib/libndfilt.so /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed python3 .probe/tail.py 256 2>&1 | grep -E "^  .*iir_tc|gpu__time|dram__" | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - | tr -s ' ' | sed "s|^|$lib |"
done
PROBE_NCU= PROBE_RUNS="build-gpu:1 .probe-base/build-base:1 .probe-head/build-head:1" OUT=$OUT PROBE_TESTS= bash scripts/gpu-iir-probe.sh 2>&1 | grep -E "==|256, 256, 256"
