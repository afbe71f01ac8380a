# throwaway: the cluster pass without its barrier (1) or with a relaxed one (2): timing only
set -u
NVCC=/usr/local/cuda/bin/nvcc
cp .probe/iir_tc_kernel.cu src/cuda/iir_tc_kernel.cu
for m in 0 1 2; do
 ( cmake -S . -B build-n$m -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=$NVCC -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF "-DCMAKE_CUDA_FLAGS=-DNDF_PROBE_NOBAR=$m" > $OUT/cfg$m.log 2>&1 && cmake --build build-n$m -j5 --target ndfilt > $OUT/build$m.log 2>&1 || echo build $m failed ) &
done
wait
for m in 0 1 2; do KERNELS_FUSED="2" KERNELS_SIZES="512 256" bash scripts/gpu-iir-kernels.sh build-n$m 2>&1 | grep -A1 "==" | grep -v "^--"; done
