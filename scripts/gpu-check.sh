#!/usr/bin/env bash
# gpu-check.sh - everything GPU in one call, for the lent GPU machine: build for sm_90 with all
# cores, run every test (CUDA ones must run, not skip), compute-sanitizer memcheck / racecheck /
# synccheck over the CUDA tests, the demo, and a short summary table last. Logs go to $OUT.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
B=${GPU_BUILD:-build-gpu}
J=$(nproc)
declare -a rows
fail=0
row() { rows+=("$(printf '%-28s %-6s %s' "$1" "$2" "$3")"); [ "$2" = ok ] || fail=1; }

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "gpu: ${gpu:-none}  commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" | tee "$OUT/env.txt"
"$NVCC" --version | tail -1 >>"$OUT/env.txt"

if cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
     -DCMAKE_CUDA_COMPILER="$NVCC" >"$OUT/configure.log" 2>&1 &&
   cmake --build "$B" -j "$J" >"$OUT/build.log" 2>&1; then
  row build ok "sm_90 + PTX, $(grep -c 'warning' "$OUT/build.log") warnings"
else
  row build FAIL "see build.log"; tail -30 "$OUT/build.log"
  printf '%s\n' "${rows[@]}"; exit 1
fi

(cd "$B" && ctest --output-on-failure -j 4) >"$OUT/ctest.log" 2>&1
res=$?
summary=$(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)
skipped=$(grep -c '\*\*\*Skipped' "$OUT/ctest.log")
if [ $res -eq 0 ] && [ "$skipped" -eq 0 ]; then row ctest ok "$summary"
else row ctest FAIL "$summary; $skipped skipped"; grep -E 'FAIL|worst|case:' "$OUT/ctest.log" | head -20; fi
grep -h "worst relative error" "$OUT/ctest.log" | sed 's/^/  /'
for t in cuda_correlate1d cuda_correlate1d_forced; do
  w=$(sed -n "/Start.*: $t\$/,/Test #/p" "$OUT/ctest.log" | grep -o 'worst relative error [0-9.e+-]*' | head -1)
  [ -n "$w" ] && row "$t" ok "$w (bound 1e-06)"
done

if [ -n "$SAN" ]; then
  for tool in memcheck racecheck synccheck initcheck; do
    extra=
    [ $tool = memcheck ] && extra="--leak-check full"
    NDF_TEST_CASES=60 "$SAN" --tool $tool $extra --error-exitcode 99 \
      "$B/tests/test_correlate1d" cuda >"$OUT/sanitizer-$tool.log" 2>&1
    r=$?
    errs=$(grep -E 'ERROR SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1)
    if [ $r -eq 0 ]; then row "compute-sanitizer $tool" ok "${errs:-no summary line}"
    else row "compute-sanitizer $tool" FAIL "exit $r; ${errs}"; tail -20 "$OUT/sanitizer-$tool.log"; fi
  done
else
  row compute-sanitizer FAIL "not found"
fi

if "$B/ndfilt" demo --size 256 --out /tmp/ndf-demo >"$OUT/demo.log" 2>&1; then
  row demo ok "table in demo.log"
else
  row demo FAIL "see demo.log"
fi

echo
sed -n '/^operation/,$p' "$OUT/demo.log"
echo
echo "== gpu-check summary: ${gpu:-no GPU}, commit $(git rev-parse --short HEAD 2>/dev/null)"
printf '%s\n' "${rows[@]}" | tee "$OUT/summary.txt"
[ $fail -eq 0 ] && echo "gpu-check: PASS" || echo "gpu-check: FAIL"
exit $fail
