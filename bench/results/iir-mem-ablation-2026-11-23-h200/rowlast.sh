# throwaway: the cluster pass's row stores with evict_last (512^3)
set -u
NVCC=/usr/local/cuda/bin/nvcc
cp .probe/iir_tc_kernel.cu src/cuda/iir_tc_kernel.cu
for m in 1 2; do
 ( cmake -S . -B build-r$m -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=$NVCC -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF "-DCMAKE_CUDA_FLAGS=-DNDF_PROBE_RL=$m" > $OUT/cfg$m.log 2>&1 && cmake --build build-r$m -j8 --target ndfilt > $OUT/build$m.log 2>&1 || echo build $m failed ) &
done
wait
PROBE_NCU= PROBE_RUNS="build-gpu:1 build-r1:1 build-r2:1 build-gpu:1 build-r1:1 build-r2:1" bash scripts/gpu-iir-probe.sh 2>&1 | grep -E "==|512"
for m in gpu r1 r2; do KERNELS_FUSED="2" KERNELS_SIZES="512" bash scripts/gpu-iir-kernels.sh build-$m; done
