# gpu-iir-variants.sh - development probe for cuda_iir (issue 05): variants of a kernel file
# compared in one run on one machine. The library is built once for each value of a probe macro
# (build-v<value>, -D<macro>=<value>), then every build's kernels are profiled with
# gpu-iir-kernels.sh. Output under $OUT.
#   VARIANTS_MACRO  the macro (e.g. NDF_PROBE_MEM); the variants are its #if branches
#   VARIANTS        its values (default "0 1")
#   VARIANTS_FILE   a probe copy of src/cuda/iir_tc_kernel.cu, copied over it first (this changes
#                   the machine's copy of the tree only); unset: the tree as it is
#   VARIANTS_TIMING 1: also time each build's whole filter (gpu-iir-time.py, the builds in turn,
#                   twice)
#   KERNELS_FUSED, KERNELS_SIZES: as gpu-iir-kernels.sh (default here "2" and "512 256")
# bench/results/iir-mem-ablation-2026-11-23-h200 holds the one-off scripts this replaces.
set -u
. scripts/gpu-iir-cfg.sh
M=${VARIANTS_MACRO:?name the probe macro} V=${VARIANTS:-0 1}
[ -n "${VARIANTS_FILE:-}" ] && { cp "$VARIANTS_FILE" src/cuda/iir_tc_kernel.cu || exit 1; }
J=$(( $(nproc) / $(echo $V | wc -w) )); [ $J -gt 0 ] || J=1
for v in $V; do
  ( cmake -S . -B build-v$v $CFG "-DCMAKE_CUDA_FLAGS=-D$M=$v" > $OUT/configure-v$v.log 2>&1 &&
    cmake --build build-v$v -j$J --target ndfilt > $OUT/build-v$v.log 2>&1 ) ||
    { echo "build $M=$v failed"; grep -m5 -A5 error $OUT/build-v$v.log; } &
done
wait
built=""
for v in $V; do
  [ -f build-v$v/libndfilt.so ] || continue
  echo "== $M=$v"
  KERNELS_FUSED="${KERNELS_FUSED:-2}" KERNELS_SIZES="${KERNELS_SIZES:-512 256}" \
    bash scripts/gpu-iir-kernels.sh build-v$v
  built="$built $v"
done
if [ -n "${VARIANTS_TIMING:-}" ]; then
  export PYTHONPATH=$PWD/python
  for v in $built $built; do
    echo "== $M=$v (whole filter)"
    NDFILT_LIBRARY=$PWD/build-v$v/libndfilt.so python3 scripts/gpu-iir-time.py 2>&1 | tee -a $OUT/timing.txt
  done
fi
