set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 -c "
import cupy as cp; p=cp.cuda.runtime.getDeviceProperties(0); print('L2', p['l2CacheSize'], 'persistMax', p['persistingL2CacheMaxSize'], 'window', p['accessPolicyMaxWindowSize'])"
PROBE_NCU= PROBE_RUNS="build-gpu:1 build-gpu:1::NDF_CUDA_IIR_ZEF=3 build-gpu:1::NDF_CUDA_IIR_ZEF=3,NDF_CUDA_IIR_PIN=16 build-gpu:1::NDF_CUDA_IIR_ZEF=3,NDF_CUDA_IIR_PIN=32 build-gpu:1::NDF_CUDA_IIR_ZEF=3,NDF_CUDA_IIR_PIN=40 build-gpu:1::NDF_CUDA_IIR_ZEF=3,NDF_CUDA_IIR_PIN=32,NDF_CUDA_IIR_SETASIDE=36 build-gpu:1::NDF_CUDA_IIR_ZEF=3,NDF_CUDA_IIR_PIN=32,NDF_CUDA_IIR_FEF=7 build-gpu:1::NDF_CUDA_IIR_ZEF=1,NDF_CUDA_IIR_PIN=32 build-gpu:1" OUT=$OUT bash scripts/gpu-iir-probe.sh
grep -E "==|sigma" $OUT/probe.txt | sed -e 's/.*NDF_CUDA_IIR_TC=1 //' > $OUT/short.txt
cat $OUT/short.txt
