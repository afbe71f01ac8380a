set -u
PROBE_NCU= PROBE_TESTS= PROBE_RUNS="${RUNS}" OUT=$OUT bash scripts/gpu-iir-probe.sh | grep -vE "^real|^user|^sys" | grep -E "==|256, 256, 256|512, 512"
export PYTHONPATH=$PWD/python
for v in "8 8 0" "8 8 1" "8 4 1" "8 16 1" "4 8 1"; do set -- $v
h=""; [ $3 = 1 ] && h="NDF_CUDA_IIR_HINTS=1"
env $h NDF_CUDA_IIR_FUSED=2 NDF_CUDA_IIR_YXKU=$1 NDF_CUDA_IIR_CLUSTER=$2 NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so /usr/local/cuda/bin/ncu --clock-control none -k regex:iir_tc_yxc --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed python3 .probe/tail.py 512 512 2>&1 | grep -E "^  .*iir_tc|gpu__time|dram__" | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' | paste - - - | tr -s ' ' | sed "s|^|ku $1 C $2 hints $3 |"
done
