set -u
( cd .probe-tmp && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF > /dev/null 2>&1 && cmake --build build-gpu -j16 --target test_iir > /dev/null 2>&1 ) || { echo variant build failed; exit 1; }
cd .probe-tmp/build-gpu/tests
for i in 1 2 3; do timeout 120 ./test_iir cuda > $OUT/nowait_test_$i.log 2>&1; echo "no-wait variant test_iir rc=$? $(tail -1 $OUT/nowait_test_$i.log)"; grep -m2 -A3 FAIL $OUT/nowait_test_$i.log | cut -c1-200; done
NDF_TEST_CASES=4 timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 ./test_iir cuda > $OUT/nowait_racecheck.log 2>&1; echo "no-wait variant racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/nowait_racecheck.log | tail -1)"
