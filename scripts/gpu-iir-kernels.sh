# gpu-iir-kernels.sh - development probe for cuda_iir: each kernel's duration and DRAM
# throughput under Nsight Compute (256^3 and 512^3, sigma 4.5), fused (y, x) pass off and on,
# for the library in $1 (default build-gpu). Output under $OUT.
set -u
LIB=${1:-build-gpu}
export NDFILT_LIBRARY=$PWD/$LIB/libndfilt.so PYTHONPATH=$PWD/python
tag=$(echo $LIB | tr / _)
for f in ${KERNELS_FUSED:-0 1}; do for n in ${KERNELS_SIZES:-256 512}; do
  NDF_CUDA_IIR_FUSED=$f /usr/local/cuda/bin/ncu --clock-control none -k regex:iir \
    --section SpeedOfLight --metrics smsp__inst_executed.sum,sm__inst_issued.avg.pct_of_peak_sustained_active \
    python3 scripts/gpu-iir-one.py $n > $OUT/ncu_${tag}_f${f}_$n.txt 2>&1
  echo "== $LIB fused=$f n=$n (duration, DRAM %, issue % of active cycles, warp instructions)"
  grep -E "^  [a-z].*iir|Duration|DRAM Throughput|sm__inst_issued.avg.pct|smsp__inst_executed.sum" \
    $OUT/ncu_${tag}_f${f}_$n.txt | sed -E 's/\(const float.*\) \(/(/; s/, Context.*//' |
    paste - - - - - | tr -s ' '
done; done
if [ -n "${KERNELS_DETAIL:-}" ]; then # stall reasons and pipe use of the 256^3 passes, unfused
  NDF_CUDA_IIR_FUSED=0 /usr/local/cuda/bin/ncu --clock-control none -k regex:iir \
    --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
    --print-details all --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active \
    python3 scripts/gpu-iir-one.py 256 > $OUT/ncu_${tag}_detail.txt 2>&1
  grep -E "^  [a-z].*iir|stalled_[a-z_]+_per_issue_active.ratio +[0-9.]+|hmma|pipe_lsu|Issue Slots Busy|Pipe" $OUT/ncu_${tag}_detail.txt |
    awk '$NF+0 >= 0.2 || /iir/ || /hmma|lsu|Issue/' | sed -E 's/\(const float.*//; s/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -80
fi
