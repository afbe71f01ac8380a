set -u
( cd .probe-head && cmake -S . -B build-head -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) \
    -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=OFF > /dev/null 2>&1 && cmake --build build-head -j8 --target ndfilt > /dev/null 2>&1 ) &
PROBE_NCU= PROBE_TESTS=1 PROBE_TARGETS=test_iir PROBE_RUNS="build-gpu:1" OUT=$OUT bash scripts/gpu-iir-probe.sh | grep -vE "^real|^user|^sys"
wait
( cd build-gpu/tests && NDF_TEST_CASES=4 timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 ./test_iir cuda > $OUT/racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.log | tail -1)" ) &
PROBE_NCU= PROBE_TESTS= PROBE_RUNS="${RUNS}" OUT=$OUT bash scripts/gpu-iir-probe.sh | grep -E "==|512, 512|256, 256, 256"
wait
export PYTHONPATH=$PWD/python
for v in "build-gpu" ".probe-head/build-head"; do
for n in 256 512; do
NDFILT_LIBRARY=$PWD/$v/libndfilt.so /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --metrics gpu__time_duration.sum,smsp__inst_executed.sum python3 .probe/tail.py $n $n 2>&1 | grep -E "^  .*iir_tc|gpu__time|smsp__inst" | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - | tr -s ' ' | sed "s|^|$v |"
NDF_CUDA_IIR_FUSED=0 NDFILT_LIBRARY=$PWD/$v/libndfilt.so /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --metrics gpu__time_duration.sum,smsp__inst_executed.sum python3 .probe/tail.py $n $n 2>&1 | grep -E "^  .*iir_tc|gpu__time|smsp__inst" | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - | tr -s ' ' | sed "s|^|$v unfused |"
done; done
