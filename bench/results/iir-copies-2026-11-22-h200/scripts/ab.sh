set -u
PROBE_TESTS=1 PROBE_TARGETS=test_iir PROBE_NCU= PROBE_RUNS="build-gpu:1 .probe-base/build-base:1 build-gpu:1 .probe-base/build-base:1 build-gpu:1::NDF_CUDA_IIR_ZEF=3,NDF_CUDA_IIR_PIN=32" OUT=$OUT bash scripts/gpu-iir-probe.sh > $OUT/probe_console.txt 2>&1
grep -E "rc=|==|sigma" $OUT/probe_console.txt | sed -e 's/.*NDF_CUDA_IIR_TC=1 //' -e 's/rel L2.*//'
for lib in build-gpu .probe-base/build-base; do KERNELS_FUSED=2 bash scripts/gpu-iir-kernels.sh $lib; done 2>&1 | tee $OUT/kernels.txt
