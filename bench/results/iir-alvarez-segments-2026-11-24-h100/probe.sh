#!/usr/bin/env bash
# probe: iir_alvarez 2-4 steps on lines past 1024 in segments (coupled chain), A/B against HEAD
. scripts/gpu-iir-cfg.sh
(cmake -S . -B build-gpu $CFG >/dev/null && cmake --build build-gpu -j10 --target ndfilt test_iir >/dev/null 2>&1; echo new $?) &
(cd .probe-base && cmake -S . -B build-base $CFG >/dev/null && cmake --build build-base -j6 --target ndfilt >/dev/null 2>&1; echo base $?) &
wait
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/timing.txt
SH=4096x4096,8192x8192,2048x2048,3x3000x3000
for o in 3 4; do for B in .probe-base/build-base build-gpu; do
  NDFILT_LIBRARY=$PWD/$B/libndfilt.so PYTHONPATH=$PWD/python PROBE_METHOD=iir_alvarez PROBE_ORDER=$o PROBE_SIGMA=4.5,50 PROBE_SHAPES=$SH python3 scripts/gpu-iir-time.py 2>&1 | grep -v "^NVIDIA" | sed "s|^|${B##*/} |"
done; done | tee -a $OUT/timing.txt
NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so PYTHONPATH=$PWD/python PROBE_SIGMA=4.5,50 PROBE_SHAPES=$SH PROBE_PEER=1 python3 scripts/gpu-iir-time.py 2>&1 | grep -v "^NVIDIA" | sed "s|^|deriche |" | tee -a $OUT/timing.txt
cd build-gpu/tests
for tool in memcheck synccheck initcheck racecheck; do
  (NDF_TEST_CASES=8 timeout 400 compute-sanitizer --tool $tool --error-exitcode 9 ./test_iir cuda > $OUT/san-$tool.txt 2>&1; echo "$tool rc $?") &
done; wait
for tool in memcheck synccheck initcheck racecheck; do tail -3 $OUT/san-$tool.txt; done
