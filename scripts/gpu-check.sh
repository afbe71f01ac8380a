#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# gpu-check.sh - everything GPU in one call, for the lent GPU machine: build for sm_90 with all
# cores, run every test (CUDA ones must run, not skip), compute-sanitizer memcheck / racecheck /
# synccheck / initcheck over the CUDA tests, the demo, the benchmarks, and a short summary table
# last. Everything goes to $OUT (default gpu-check-out/): the summary (summary.txt, summary.json),
# the step logs (logs.txt), and each benchmark family's results in $OUT/<family>/, laid out as
# bench/results/<family>/ is: to make a run's results the current ones, copy $OUT/<family>/ over
# bench/results/<family>/ and run `python3 bench/report.py`, which writes BENCHMARKS.md.
# GPU_CHECK_PARTS (comma-separated: tests, sanitize, bench, user, auto, dropin, slabs, gpus,
# daskgpu, profile, conv, iir, ks) splits it into calls under the device's 10-minute limit; the default runs tests,
# sanitize and bench.
#   bench    the separable family (bench/peers.py) into $OUT/sep/: sep.json, sep.md,
#            correlate1d.png, gaussian.png.
#   conv     the non-separable convolution benchmark (issue 04, bench/conv.py, about 3 minutes)
#            into $OUT/conv/: conv.json, conv.md, conv_{2d,3d,4d}.png.
#   iir      the recursive Gaussian benchmark (issue 05, bench/iir.py: GPU, CPU threads,
#            accuracy; about 2-4 minutes) into $OUT/iir/: iir.json, iir.md, iir_accuracy.png,
#            iir_sigma.png.
#   ks       the kernel-superposition benchmark (issue 06, bench/ks.py: every solver and tile
#            shape, the peer gather, the CPU twin; about 7 minutes) into $OUT/ks/: ks.json, ks.md
#            and bench/ks_plots.py's fig2_gather.png, fig3_scatter.png, fig6_groups.png. The
#            build has every ks tile shape (NDF_KS_ALL_SHAPES) and the ks tests draw random shapes.
#   user     the user paths (bench/user_paths.py: ks with a new CuPy sigma map each call against a
#            naive gather, numpy Gaussians through the GPU, the CPU and cupyx, the CLI as a
#            process; about 2 minutes) into $OUT/user/: user.json, user.md.
#   dropin   the rest of scipy.ndimage (bench/dropin.py: rank, uniform, derivative and NaN-aware
#            filters against scipy, OpenCV, cupyx and cuCIM (its wheel and scikit-image's carried
#            in .whl/); a few minutes) into $OUT/dropin/.
#   slabs    numpy arrays (pageable and page-locked) past the call's memory limit filtered in
#            slabs of the first axis, beside the pinned bus bandwidth of the same run
#            (bench/slabs.py; GPU_CHECK_SLAB_N, default 1280: N^3 float32; GPU_CHECK_SLAB_LIMIT,
#            default 8 GB; about 2 minutes at 1280, 6 at 2304, which needs about 250 GB of host
#            memory) into $OUT/slabs/: slabs.json, slabs.md.
#   gpus     on a machine of several GPUs: numpy arrays (pageable and page-locked) filtered on
#            1, 2, 4, ... of them in one process (bench/slabs.py --gpus, GPU_CHECK_SHAPES, default
#            1024x1024x1024; about 2 minutes a shape) into $OUT/slabs/: gpus.json, gpus.md.
#   daskgpu  ndfilt.dask against dask-image on CuPy chunks under dask_cuda.LocalCUDACluster, a
#            worker a GPU (bench/dask_bench.py --cuda; dask, distributed, dask-cuda and
#            dask-image must import: carry their wheels, see the device's README) into
#            $OUT/dask/: dask_cuda.json, dask_cuda.md.
#   auto     method auto's choices (bench/auto_choices.py: each case's candidates timed by name
#            beside auto's pick, and the picks the cost models make for other cards' figures;
#            about a minute) into $OUT/auto/: auto.json, auto.md.
#   profile  Nsight Compute metrics of the separable and non-separable (direct, FFT) kernels
#            (bench/ncu.py) into $OUT/ncu/: ncu.json, ncu.md.
set -u
cd "$(dirname "$0")/.."
PARTS=${GPU_CHECK_PARTS:-tests,sanitize,bench}
want() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }
OUT=${OUT:-$PWD/gpu-check-out}
LOG=$(mktemp -d)  # step logs, concatenated into $OUT/logs.txt at the end
mkdir -p "$OUT"
B=${GPU_BUILD:-build-gpu}
# The device machine gets a copy of the tree without .git: pass NDF_COMMIT from outside.
COMMIT=${NDF_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
J=$(nproc)
declare -a rows
fail=0
row() { rows+=("$(printf '%-32s %-6s %s' "$1" "$2" "$3")"); [ "$2" = ok ] || fail=1; }

# Python packages the device lacks (dask, dask-cuda, dask-image, cuCIM, scikit-image) travel as
# wheels in .whl/ (git-ignored; the device's README says how): installed for this run into a
# folder on PYTHONPATH.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/ndf-site .whl/*.whl && export PYTHONPATH=/tmp/ndf-site${PYTHONPATH:+:$PYTHONPATH}
fi

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "gpu: ${gpu:-none}  commit: $COMMIT" | tee "$OUT/env.txt"
"$NVCC" --version | tail -1 >>"$OUT/env.txt"

if cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
     -DCMAKE_CUDA_COMPILER="$NVCC" -DNDF_PYTHON="$(command -v python3)" -DNDF_KS_ALL_SHAPES=ON -DNDF_DEV_SWITCHES=ON \
     -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=ON \
     >"$LOG/configure.log" 2>&1 &&
   cmake --build "$B" -j "$J" >"$LOG/build.log" 2>&1; then
  row build ok "sm_90 + PTX, $(grep -c 'warning' "$LOG/build.log") warnings"
else
  row build FAIL "see build.log"; tail -30 "$LOG/build.log"
  printf '%s\n' "${rows[@]}"; exit 1
fi

# Every ks solver (the approximate look-up-table ones within 1e-3), and those the sanitizers run.
KS_EXACT="scatter_quad scatter_shuffle scatter_warpsync scatter_threadfence scatter_sync scatter_shared_atomic
  scatter_global_atomic gather gather_smem1 gather_smem2"
KS_APPROX=""
for l in lut1d_global lut1d_shared lut1d_texture lut2d_global lut2d_texture; do
  KS_APPROX="$KS_APPROX approx_gather_$l approx_gather_${l}_smem1 approx_gather_${l}_smem2"
done
KS_SAN="scatter_quad scatter_shuffle scatter_warpsync scatter_threadfence scatter_sync gather_smem2
  approx_gather_lut1d_shared_smem2 approx_gather_lut2d_texture_smem1"
export NDF_TEST_KS_SHAPES=all

if want tests; then
(cd "$B" && ctest --output-on-failure -j 4) >"$LOG/ctest.log" 2>&1
res=$?
summary=$(grep -E 'tests passed|tests failed' "$LOG/ctest.log" | tail -1)
# A skipped CUDA test (label cuda) is a failure here; other skips are only reported (this
# machine has no image-format libraries, so cli_formats skips: NDF_REQUIRE_FORMATS=OFF).
cuda_tests=$(cd "$B" && ctest -N -L cuda | sed -n 's/^ *Test *#[0-9]*: //p')
skipped_all=$(sed -n 's/.*Test *#[0-9]*: \([A-Za-z0-9_]*\) .*\*\*\*Skipped.*/\1/p' "$LOG/ctest.log")
skipped=0
for t in $skipped_all; do echo "$cuda_tests" | grep -qx "$t" && skipped=$((skipped + 1)); done
others=$(echo $skipped_all | wc -w)
if [ $res -eq 0 ] && [ "$skipped" -eq 0 ]; then
  row ctest ok "$summary${skipped_all:+ (skipped, not CUDA: $(echo $skipped_all))}"
else row ctest FAIL "$summary; $skipped CUDA tests skipped (of $others)"; grep -E 'FAIL|worst|case:' "$LOG/ctest.log" | head -20; fi
# The binding tests in the open: the CuPy and torch round trips must run, not skip.
if NDFILT_LIBRARY="$PWD/$B/libndfilt.so" python3 python/tests/test_binding.py -v >"$LOG/python.log" 2>&1 &&
   ! grep -q "skipped '" "$LOG/python.log"; then
  row "python binding (numpy/cupy/torch)" ok "$(grep -E '^Ran|^OK' "$LOG/python.log" | tr '\n' ' ')"
else
  row "python binding (numpy/cupy/torch)" FAIL "see python.log"; tail -20 "$LOG/python.log"
fi

# The CUDA suites once more in the open, for their figures (ctest hides passing output).
: >"$LOG/cuda-tests.log"
for run in sep:separable:auto sep:separable:cuda_sep sep:separable:cuda_sep_fused \
           sep:separable:cuda_corr1d conv:correlate:auto conv:correlate:cuda_direct \
           conv:correlate:cuda_fft iir:recursive:auto ks:ks:auto nonfinite:nonfinite:auto \
           $(for v in $KS_EXACT; do echo ks:ks:cuda_ks_$v; done); do
  IFS=: read -r suite what m <<<"$run"
  arg=$m; [ $m = auto ] && arg=
  tol=1e-5; [ $m = cuda_fft ] && tol=1e-4 # float32 FFT error scales with the whole array
  case $m in *approx*) tol=1e-3 ;; esac
  [ $suite = iir ] && tol= # test_iir's own bound (5e-6 of the filter on |x|)
  if env ${tol:+NDF_TEST_TOL=$tol} "$B/tests/test_$suite" cuda $arg >>"$LOG/cuda-tests.log" 2>&1; then
    row "cuda $what ($m)" ok "$(grep -E 'worst|lut report' "$LOG/cuda-tests.log" | tail -1 |
                                sed 's/.*: worst/worst/; s/^lut report [a-z0-9_]*: //')"
  else
    row "cuda $what ($m)" FAIL "see cuda-tests.log"
  fi
done

# One GPU's slabs on every suite's host arrays (NDF_SLABS=1: wherever a filter may go by slabs,
# however small), against the float64 reference as in memory.
for suite in sep conv rank ks nonfinite; do
  if NDF_SLABS=1 NDF_TEST_TOL=1e-5 "$B/tests/test_$suite" cuda >>"$LOG/cuda-tests.log" 2>&1; then
    row "cuda $suite in slabs (NDF_SLABS=1)" ok "$(grep -E 'cases|worst' "$LOG/cuda-tests.log" | tail -1)"
  else
    row "cuda $suite in slabs (NDF_SLABS=1)" FAIL "see cuda-tests.log"
  fi
done

fi # tests

if want sanitize; then
: >"$LOG/sanitizer.log"
if [ -n "$SAN" ]; then
  for tool in memcheck racecheck synccheck initcheck; do
    extra=
    [ $tool = memcheck ] && extra="--leak-check full"
    { NDF_TEST_CASES=40 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_sep" cuda &&
      NDF_TEST_CASES=30 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_conv" cuda &&
      NDF_TEST_CASES=12 NDF_TEST_TOL=1e-4 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_conv" cuda cuda_fft &&
      NDF_TEST_CASES=20 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_iir" cuda &&
      NDF_TEST_CASES=24 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_nonfinite" cuda &&
      NDF_TEST_CASES=2 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_stage" cuda &&
      NDF_TEST_CASES=30 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_rank" cuda &&
      NDF_TEST_CASES=20 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_slabs" cuda:all &&
      NDF_SLABS=1 NDF_TEST_CASES=20 "$SAN" --tool $tool $extra --error-exitcode 99 \
        "$B/tests/test_sep" cuda &&
      (for ks in $KS_SAN; do
         NDF_TEST_CASES=8 NDF_TEST_TOL=1e-3 "$SAN" --tool $tool $extra --error-exitcode 99 \
           "$B/tests/test_ks" cuda cuda_ks_$ks || exit $?
       done); } >/tmp/san.log 2>&1
    r=$?
    { echo "### $tool (exit $r)"; cat /tmp/san.log; } >>"$LOG/sanitizer.log"
    errs=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1 | sed 's/^=* *//')
    if [ $r -eq 0 ]; then row "compute-sanitizer $tool" ok "${errs:-no summary line}"
    else row "compute-sanitizer $tool" FAIL "exit $r; ${errs}"; tail -20 /tmp/san.log; fi
  done
else
  row compute-sanitizer FAIL "not found"
fi
fi # sanitize

if want tests; then
if "$B/ndfilt" demo --size 256 --out /tmp/ndf-demo >"$LOG/demo.log" 2>&1; then
  row demo ok "table in demo.log"
else
  row demo FAIL "see demo.log"
fi
fi # tests

# A benchmark program of a part: python3 with args, the build's library, its output in
# $LOG/<log>.log; the row says ok with what the command `summary` prints, or FAIL.
bench_part() { # label log summary python-args...
  local label=$1 log=$2 summary=$3
  shift 3
  if NDF_COMMIT=$COMMIT NDFILT_LIBRARY="$PWD/$B/libndfilt.so" PYTHONUNBUFFERED=1 \
       python3 "$@" >"$LOG/$log.log" 2>&1; then
    row "$label" ok "$($summary)"
  else
    row "$label" FAIL "see $log.log"; tail -20 "$LOG/$log.log"
  fi
}

if want bench; then
# Benchmark with peers (same process, same arrays): the separable family into $OUT/sep/.
sum_sep() { echo "sep/: sep.json, sep.md"; }
bench_part benchmark bench sum_sep bench/peers.py --out "$OUT/sep"
fi # bench

if want user; then
# What users call, as they call it, beside their alternatives (bench/user_paths.py).
sum_user() { grep -E '^ks \(512, 512\) r8|^gaussian|^cli' "$LOG/user.log" | tr '\n' ' ' | cut -c1-200; }
bench_part "user paths" user sum_user bench/user_paths.py --out "$OUT/user" --cli "$B/ndfilt"
fi # user

if want slabs; then
# numpy arrays past the call's memory limit, in slabs, beside the bus (bench/slabs.py).
sum_slabs() { grep -E '^gaussian' "$LOG/slabs.log" | cut -c1-160; }
bench_part slabs slabs sum_slabs bench/slabs.py --out "$OUT/slabs" --pinned \
  --n "${GPU_CHECK_SLAB_N:-1280}" --limit "${GPU_CHECK_SLAB_LIMIT:-8}"
fi # slabs

if want gpus; then
# Several GPUs in one process against one, on the same numpy arrays (bench/slabs.py --gpus).
sum_gpus() { grep -E 'on [0-9]+ GPU' "$LOG/gpus.log" | grep -c . | sed 's/$/ timings/'; }
bench_part "several GPUs" gpus sum_gpus bench/slabs.py --gpus --out "$OUT/slabs" \
  --shapes "${GPU_CHECK_SHAPES:-1024x1024x1024}"
fi # gpus

if want daskgpu; then
# ndfilt.dask beside dask-image on CuPy chunks, a dask_cuda worker a GPU (bench/dask_bench.py).
sum_daskgpu() { grep -c "^{'case'" "$LOG/daskgpu.log" | sed 's/$/ rows/'; }
bench_part "dask on GPUs" daskgpu sum_daskgpu bench/dask_bench.py --cuda --out "$OUT/dask"
fi # daskgpu

if want dropin; then
# The rest of scipy.ndimage against scipy, OpenCV and cupyx (bench/dropin.py).
sum_dropin() { echo "$(grep -c '^|' "$OUT/dropin/dropin.md") table lines"; }
bench_part "drop-in filters" dropin sum_dropin bench/dropin.py --out "$OUT/dropin"
fi # dropin

if want auto; then
# Method auto's choices against each candidate timed by name (bench/auto_choices.py).
sum_auto() {
  python3 -c "import json, sys; r = json.load(open(sys.argv[1]))['rows']
print(sum(x['auto'] != x['fastest'] for x in r), 'of', len(r), 'cases not the fastest')" \
    "$OUT/auto/auto.json"
}
bench_part "auto choices" auto sum_auto bench/auto_choices.py --out "$OUT/auto"
fi # auto

if want conv; then
# Non-separable convolution and FFT filtering vs cupyx / torch (bench/conv.py, standalone: it
# takes peers.py's timers and measures the ceilings itself), into $OUT/conv/.
sum_conv() { sed -n 's/^conv summary: //p' "$LOG/conv.log" | tail -1; }
bench_part "conv benchmark" conv sum_conv bench/conv.py --out "$OUT/conv" --require-gpu
fi # conv

if want iir; then
# Recursive (IIR) Gaussian vs cupyx / scipy, CPU thread scaling and accuracy (bench/iir.py,
# standalone: it measures the copy bandwidth itself), into $OUT/iir/.
sum_iir() { sed -n 's/^iir summary: //p' "$LOG/iir.log" | tail -1; }
bench_part "iir benchmark" iir sum_iir bench/iir.py --out "$OUT/iir" --require-gpu
fi # iir

if want ks; then
# Kernel superposition: every solver and tile shape against the issue's naive gather (a CuPy
# kernel in the same run) and the CPU twin (bench/ks.py), into $OUT/ks/ with its figures.
sum_ks() { tail -3 "$LOG/ks.log" | tr '\n' ' ' | cut -c1-150; }
bench_part "ks benchmark" ks sum_ks bench/ks.py --out "$OUT/ks" --budget "${KS_BUDGET:-400}"
# The figures need only ks.json and matplotlib; a machine without matplotlib leaves them out.
python3 bench/ks_plots.py "$OUT/ks" >>"$LOG/ks.log" 2>&1 || echo "ks_plots: no figures (ks.log)"
fi # ks

if want profile; then
# Nsight Compute over the separable and non-separable kernels, one process per case
# (bench/ncu.py); every kernel of the call (cuFFT's too).
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
mkdir -p /tmp/ncu && rm -f /tmp/ncu/*.csv
: >"$LOG/ncu.log"
if [ -n "$NCU" ]; then
  python3 bench/ncu.py cases | while read -r op shape param method; do
    NDFILT_LIBRARY="$PWD/$B/libndfilt.so" "$NCU" --csv \
      --metrics "$(python3 bench/ncu.py metrics)" \
      python3 bench/ncu.py run "$op" "$shape" "$param" "$method" \
      >"/tmp/ncu/${op}_${shape}_${param}_${method}.csv" 2>>"$LOG/ncu.log"
  done
  if NDF_COMMIT=$COMMIT python3 bench/ncu.py write "$OUT/ncu" /tmp/ncu/*.csv 2>>"$LOG/ncu.log"; then
    row "ncu profile" ok "ncu/: ncu.json, ncu.md"
  else
    row "ncu profile" FAIL "see ncu.log"
  fi
else
  row "ncu profile" FAIL "ncu not found"
fi
fi # profile

echo
[ -f "$LOG/demo.log" ] && sed -n '/^operation/,$p' "$LOG/demo.log" # (the tests part ran the demo)
echo
want bench && sed -n '/^## /,$p' "$OUT/sep/sep.md" 2>/dev/null
want conv && sed -n '/^## /,$p' "$OUT/conv/conv.md" 2>/dev/null
want profile && sed -n '/^| /,$p' "$OUT/ncu/ncu.md" 2>/dev/null
want iir && sed -n '/^## /,$p' "$OUT/iir/iir.md" 2>/dev/null
echo
echo "== gpu-check summary: ${gpu:-no GPU}, commit $COMMIT"
{ cat "$OUT/env.txt"; printf '%s\n' "${rows[@]}"; } >"$OUT/summary.txt"
printf '%s\n' "${rows[@]}"
# The same rows as JSON, for tools.
{
  printf '{"gpu": "%s", "commit": "%s", "pass": %s, "steps": [' "$gpu" "$COMMIT" \
    "$([ $fail -eq 0 ] && echo true || echo false)"
  sep=
  for r in "${rows[@]}"; do
    name=$(echo "${r:0:32}" | sed 's/ *$//'); st=$(echo "${r:33:6}" | sed 's/ *$//')
    detail=$(echo "${r:40}" | sed 's/"/\\"/g')
    printf '%s{"step": "%s", "result": "%s", "detail": "%s"}' "$sep" "$name" "$st" "$detail"
    sep=", "
  done
  printf ']}\n'
} >"$OUT/summary.json"
for f in configure build ctest python cuda-tests sanitizer demo bench user auto conv iir ks ncu; do
  [ -f "$LOG/$f.log" ] && { echo "######## $f"; cat "$LOG/$f.log"; }
done >"$OUT/logs.txt"
rm -rf "$OUT/env.txt" "$LOG"
[ $fail -eq 0 ] && echo "gpu-check: PASS" || echo "gpu-check: FAIL"
exit $fail
