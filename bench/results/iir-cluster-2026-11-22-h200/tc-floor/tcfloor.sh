set -u
NVCC=/usr/local/cuda/bin/nvcc
for t in . .probe-tmp; do
 ( cd $t && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=$NVCC -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF > /dev/null 2>&1 && cmake --build build-gpu -j8 --target ndfilt > /dev/null 2>&1 ) &
done
wait
ls -la build-gpu/libndfilt.so .probe-tmp/build-gpu/libndfilt.so || exit 1
KERNELS_FUSED=0 bash scripts/gpu-iir-kernels.sh build-gpu
KERNELS_FUSED=0 bash scripts/gpu-iir-kernels.sh .probe-tmp/build-gpu
