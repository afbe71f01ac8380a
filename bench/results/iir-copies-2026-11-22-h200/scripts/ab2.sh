set -u
( cd probe-tmp/v4 && cmake -S . -B build-v4 -DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=90 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF -DNDF_BUILD_TOOLS=OFF > $OUT/cfg-v4.log 2>&1 && cmake --build build-v4 -j16 --target ndfilt > $OUT/build-v4.log 2>&1 ) &
PROBE_NCU= PROBE_RUNS="none:1" OUT=$OUT bash scripts/gpu-iir-probe.sh > $OUT/probe_console0.txt 2>&1
wait
PROBE_NCU= PROBE_RUNS="probe-tmp/v4/build-v4:1 build-gpu:1 .probe-base/build-base:1 probe-tmp/v4/build-v4:1" OUT=$OUT bash scripts/gpu-iir-probe.sh > $OUT/probe_console.txt 2>&1
grep -E "rc=|==|sigma" $OUT/probe_console.txt | sed -e 's/.*NDF_CUDA_IIR_TC=1 //' -e 's/rel L2.*//' -e 's/NDF_CUDA_IIR_FUSED=default//'
for lib in build-gpu probe-tmp/v4/build-v4 .probe-base/build-base; do KERNELS_FUSED=2 bash scripts/gpu-iir-kernels.sh $lib; done 2>&1 | sed -e 's/sm__inst_issued.avg.pct_of_peak_sustained_active/issue/; s/smsp__inst_executed.sum inst/inst/; s/DRAM Throughput/DRAM/' | tee $OUT/kernels.txt
