# throwaway: the cluster pass without its L2 round trip (row stores, column loads), and with
# shared memory padded to 3 blocks an SM: an upper bound on keeping a slice in DSMEM
set -u
NVCC=/usr/local/cuda/bin/nvcc
cp .probe/iir_tc_kernel.cu src/cuda/iir_tc_kernel.cu
build() { # name flags
  cmake -S . -B build-$1 -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=$NVCC -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF "-DCMAKE_CUDA_FLAGS=$2" > $OUT/cfg-$1.log 2>&1 && cmake --build build-$1 -j4 --target ndfilt > $OUT/build-$1.log 2>&1
}
build base "" & build rt "-DNDF_PROBE_MEM=4" & build rtpad "-DNDF_PROBE_MEM=4 -DNDF_PROBE_PAD=32768" & build pad "-DNDF_PROBE_PAD=32768" &
wait
ls -la build-*/libndfilt.so
for v in base rt rtpad pad; do KERNELS_FUSED=2 KERNELS_SIZES="${KS:-256 512}" bash scripts/gpu-iir-kernels.sh build-$v; done 2>&1 | tee $OUT/kernels.txt
