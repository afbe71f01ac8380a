# gpu-iir-cfg.sh - sourced by the cuda_iir development probes (gpu-iir-probe.sh,
# gpu-iir-variants.sh): NVCC, and CFG, the CMake options of every probe build.
# PROBE_ARCHS: the CUDA architectures (default 90; 90a for wgmma probes).
NVCC=/usr/local/cuda/bin/nvcc
CFG="-DCMAKE_BUILD_TYPE=Release -DNDF_ENABLE_CUDA=ON -DNDF_CUDA_ARCHS=${PROBE_ARCHS:-90}
  -DCMAKE_CUDA_COMPILER=$NVCC -DNDF_PYTHON=$(command -v python3) -DNDF_REQUIRE_FORMATS=OFF
  -DNDF_BUILD_TOOLS=OFF"
