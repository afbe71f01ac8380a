set -u
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=OFF > /dev/null 2>&1
cmake --build $B -j16 --target ndfilt test_iir > $OUT/build.log 2>&1 || { tail $OUT/build.log; exit 1; }
cd $B/tests
for tool in racecheck memcheck synccheck initcheck; do
  NDF_TEST_CASES=4 timeout 130 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 ./test_iir cuda > $OUT/san_$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_$tool.log | tail -1) $(tail -1 $OUT/san_$tool.log)"
done
