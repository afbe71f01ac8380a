# throwaway: bulk (TMA) stores, rows (1) / rows and columns (3), against the base
set -u
NVCC=/usr/local/cuda/bin/nvcc
cp .probe/iir_tc_kernel.cu src/cuda/iir_tc_kernel.cu
for m in 1 3; do
 ( cmake -S . -B build-b$m -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=$NVCC -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF "-DCMAKE_CUDA_FLAGS=-DNDF_PROBE_BULK=$m" > $OUT/cfg$m.log 2>&1 && cmake --build build-b$m -j6 --target ndfilt test_iir > $OUT/build$m.log 2>&1 || echo build $m failed ) &
done
wait
for m in 3 1; do (cd build-b$m/tests && timeout 200 ./test_iir cuda > $OUT/test_iir_b$m.log 2>&1; echo "test_iir b$m rc=$?"; tail -2 $OUT/test_iir_b$m.log; grep -m3 -A6 FAIL $OUT/test_iir_b$m.log); done
PROBE_NCU= PROBE_RUNS="build-gpu:1 build-b1:1 build-b3:1 build-gpu:1 build-b3:1" bash scripts/gpu-iir-probe.sh 2>&1 | grep -v "^$"
for m in 3 1; do KERNELS_FUSED="2 0" KERNELS_SIZES="512 256" bash scripts/gpu-iir-kernels.sh build-b$m; done
