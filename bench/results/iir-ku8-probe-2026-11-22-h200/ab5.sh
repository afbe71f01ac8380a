set -u
T=bench/results/iir-stages-probe-2026-11-22-h200/time.py
C="-DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=OFF"
cmake -S . -B build-gpu $C > $OUT/cfg.log 2>&1
( cd .probe-base && cmake -S . -B build-base $C > $OUT/cfg-base.log 2>&1 && cmake --build build-base -j8 --target ndfilt > $OUT/build-base.log 2>&1 ) &
cmake --build build-gpu -j8 --target ndfilt test_iir > $OUT/build.log 2>&1 || { grep -A5 error $OUT/build.log | head -30; exit 1; }
wait
export PYTHONPATH=$PWD/python
for cfg in "1 -" "2 -" "3 8"; do set -- $cfg
  ( cd build-gpu/tests && export NDF_CUDA_IIR_TEAMS=$1; [ $2 = - ] || export NDF_CUDA_IIR_KU=$2
    timeout 200 ./test_iir cuda > $OUT/test_iir_$1.log 2>&1; echo "test_iir T=$1 KU=$2 rc=$? $(tail -1 $OUT/test_iir_$1.log)" )
done
for rep in 1 2 3; do
  NDFILT_LIBRARY=$PWD/.probe-base/build-base/libndfilt.so python3 $T base
  NDF_CUDA_IIR_TEAMS=1 NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so python3 $T new-T1
  NDF_CUDA_IIR_TEAMS=2 NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so python3 $T new-T2
  NDF_CUDA_IIR_KU=8 NDF_CUDA_IIR_TEAMS=3 NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so python3 $T new-KU8-T3
done 2>&1 | tee $OUT/ab.txt
