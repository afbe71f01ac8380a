// throwaway: host cost of the runtime calls made per launch
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
__global__ void __launch_bounds__(128) k1(float *p, int n) { extern __shared__ float s[]; if (n < 0) p[threadIdx.x] = s[threadIdx.x]; }
template <class F> double us(F f, int n = 20000) {
  for (int i = 0; i < 100; i++) f();
  auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) f();
  cudaDeviceSynchronize();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count() / n;
}
int main() {
  float *p; cudaMalloc(&p, 4096);
  int dev = 0, per = 0, sms = 0;
  printf("cudaGetDevice %.3f us\n", us([&] { cudaGetDevice(&dev); }));
  printf("cudaSetDevice %.3f us\n", us([&] { cudaSetDevice(0); }));
  printf("cudaDeviceGetAttribute(SMs) %.3f us\n", us([&] { cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); }));
  printf("cudaFuncSetAttribute(smem 100 KB) %.3f us\n", us([&] { cudaFuncSetAttribute(k1, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000); }));
  printf("cudaOccupancyMaxActiveBlocksPerMultiprocessor %.3f us\n", us([&] { cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k1, 128, 100000); }));
  printf("launch <<<1,128,100KB>>> %.3f us\n", us([&] { k1<<<1, 128, 100000>>>(p, 1); }, 2000));
  printf("cudaGetLastError %.3f us\n", us([&] { cudaGetLastError(); }));
  return 0;
}
