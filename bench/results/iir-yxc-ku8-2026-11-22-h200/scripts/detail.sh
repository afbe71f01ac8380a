set -u
export NDFILT_LIBRARY=$PWD/build-gpu/libndfilt.so PYTHONPATH=$PWD/python
cmake --build build-gpu -j16 --target ndfilt > $OUT/build.log 2>&1 || { grep error -A5 $OUT/build.log | head; exit 1; }
NCU=/usr/local/cuda/bin/ncu
NDF_CUDA_IIR_FUSED=2 $NCU --clock-control none -k regex:iir_tc_yxc --set full -o $OUT/yxc python3 .probe/tail.py 256 > $OUT/ncu_run.txt 2>&1
$NCU -i $OUT/yxc.ncu-rep --page details --print-details all > $OUT/details.txt 2>&1
$NCU -i $OUT/yxc.ncu-rep --page source --csv --print-source sass > $OUT/source.csv 2>&1
ls -la $OUT; grep -E "Issue Slots|Eligible|Active Warps|Warp Cycles Per Issued|Stall|pipe|Pipe" $OUT/details.txt | head -60
gzip $OUT/source.csv; rm -f $OUT/yxc.ncu-rep
