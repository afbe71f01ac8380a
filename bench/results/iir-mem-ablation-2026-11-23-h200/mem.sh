# throwaway: cluster/single pass kernel times with loads (1) / stores (2) / both (3) removed
set -u
NVCC=/usr/local/cuda/bin/nvcc
cp .probe/iir_tc_kernel.cu src/cuda/iir_tc_kernel.cu
for m in 0 1 2 3; do
 ( FL=""; [ $m -gt 0 ] && FL="-DNDF_PROBE_MEM=$m"
   cmake -S . -B build-m$m -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=$NVCC -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF "-DCMAKE_CUDA_FLAGS=$FL" > $OUT/cfg$m.log 2>&1 && cmake --build build-m$m -j4 --target ndfilt > $OUT/build$m.log 2>&1 ) &
done
wait
ls -la build-m*/libndfilt.so
for m in 0 1 2 3; do KERNELS_FUSED="${KF:-2 0}" KERNELS_SIZES="${KS:-512 256}" bash scripts/gpu-iir-kernels.sh build-m$m; done
