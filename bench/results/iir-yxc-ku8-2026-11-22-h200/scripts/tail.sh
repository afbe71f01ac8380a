set -u
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF \
  -DNDF_BUILD_TOOLS=OFF > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
cmake --build $B -j16 --target ndfilt > $OUT/build.log 2>&1 || { grep error -A5 $OUT/build.log | head; exit 1; }
export NDFILT_LIBRARY=$PWD/$B/libndfilt.so PYTHONPATH=$PWD/python
SH="62 124 186 248 249 256 272 310"
NDF_CUDA_IIR_FUSED=2 /usr/local/cuda/bin/ncu --clock-control none -k regex:iir --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.max \
  python3 .probe/tail.py $SH > $OUT/ncu_tail.txt 2>&1
grep -E "iir_tc|gpu__time|sm__cycles" $OUT/ncu_tail.txt | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - - | awk '{print $1, $2, $NF, $(NF-4), $(NF-8)}'
echo "shapes: $SH"
