#include <cstdio>
#include <chrono>
#include <cuda_runtime.h>
struct big { float v[512]; };
struct small { const float *p; };
__global__ void kb(float *o, const __grid_constant__ big b) { if (threadIdx.x == 0 && blockIdx.x == 0 && o) o[0] = b.v[7]; }
__global__ void ks(float *o, small s) { if (threadIdx.x == 0 && blockIdx.x == 0 && o) o[0] = s.p ? s.p[7] : 0; }
template <class F> double per(F f, int n = 2000) {
  for (int i = 0; i < 100; i++) f();
  cudaDeviceSynchronize();
  auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) f();
  double h = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count() / n;
  cudaDeviceSynchronize();
  return h;
}
int main() {
  big b = {}; small s = {nullptr};
  cudaFuncSetAttribute(kb, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000);
  cudaFuncSetAttribute(ks, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000);
  printf("big params, 0 smem, 132x128: %.2f us\n", per([&] { kb<<<132, 128>>>(nullptr, b); }));
  printf("small params, 0 smem, 132x128: %.2f us\n", per([&] { ks<<<132, 128>>>(nullptr, s); }));
  printf("big params, 100KB smem, 396x128: %.2f us\n", per([&] { kb<<<396, 128, 100000>>>(nullptr, b); }));
  printf("small params, 100KB smem, 396x128: %.2f us\n", per([&] { ks<<<396, 128, 100000>>>(nullptr, s); }));
  cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim.x = 8; at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(496); cfg.blockDim = dim3(128); cfg.dynamicSmemBytes = 100000; cfg.attrs = at; cfg.numAttrs = 1;
  printf("cluster 8, big params, 100KB: %.2f us\n", per([&] { cudaLaunchKernelEx(&cfg, kb, (float *)nullptr, b); }));
  printf("cluster 8, small params, 100KB: %.2f us\n", per([&] { cudaLaunchKernelEx(&cfg, ks, (float *)nullptr, s); }));
  int per_ = 0, dev = 0, sms = 0;
  printf("setattr+occupancy+getdev+attr: %.2f us\n", per([&] { cudaFuncSetAttribute(ks, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000); cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_, ks, 128, 100000); }));
  printf("cudaSetDevice: %.2f us\n", per([&] { cudaSetDevice(0); }));
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
