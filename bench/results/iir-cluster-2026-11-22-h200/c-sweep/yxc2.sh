set -u
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF > $OUT/configure.log 2>&1 && cmake --build $B -j16 --target ndfilt test_iir > $OUT/build.log 2>&1 || { grep -E "error" -A5 $OUT/build.log | head -30; exit 1; }
( cd $B/tests && NDF_CUDA_IIR_CLUSTER=16 timeout 200 ./test_iir cuda > $OUT/test_iir_c16.log 2>&1; echo "C=16 test_iir rc=$?"; tail -1 $OUT/test_iir_c16.log; grep -m3 -B2 -A6 FAIL $OUT/test_iir_c16.log )
PROBE_NCU= PROBE_RUNS="$B:1:0 $B:1:2:NDF_CUDA_IIR_CLUSTER=8 $B:1:2:NDF_CUDA_IIR_CLUSTER=16 $B:1:2:NDF_CUDA_IIR_CLUSTER=8 $B:1:2:NDF_CUDA_IIR_CLUSTER=16 $B:1:0" bash scripts/gpu-iir-probe.sh > /dev/null 2>&1
grep -E "==|256, 256, 256|512, 512, 512" $OUT/probe.txt | sed -E 's/rel L2.*//'
for c in 8 16; do NDF_CUDA_IIR_CLUSTER=$c KERNELS_FUSED="2" bash scripts/gpu-iir-kernels.sh build-gpu; mv $OUT/ncu_build-gpu_f2_256.txt $OUT/ncu_c${c}_256.txt; mv $OUT/ncu_build-gpu_f2_512.txt $OUT/ncu_c${c}_512.txt; done
