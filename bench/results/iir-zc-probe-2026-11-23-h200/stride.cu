// throwaway: copy bandwidth of the column passes' access pattern (G adjacent lines, 4G bytes a
// sample row, along a strided axis) against a plain copy. [S][L][Q] floats: lines along L
// (stride Q), S slices; a group = G lines (q0 .. q0 + G - 1) of one slice; a block of 4 warps
// takes a group, warp w its rows 128 w .. 128 w + 127 (as iir_tc<0, 8>), 16 pieces a lane at a
// time (loads, then stores). H: the loads' L2 prefetch hint (0 none, 1 128 B, 2 256 B).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
template <int H> __device__ __forceinline__ float4 ld(const float4 *p) {
  float4 v;
  if (H == 1) asm volatile("ld.global.L2::128B.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  else if (H == 2) asm volatile("ld.global.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  else v = *p;
  return v;
}
template <int G, int H>
__global__ void colcopy(const float4 *__restrict__ in, float4 *__restrict__ out, long S, int L, long Q) {
  constexpr int PL = G / 4, RPI = 32 / PL; // pieces a row, rows an instruction
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const long groups = S * (Q / G);
  for (long g = blockIdx.x; g < groups; g += gridDim.x) {
    const long s = g / (Q / G), q0 = (g % (Q / G)) * G;
    const long base = (s * L * Q + q0) / 4 + lane % PL;
    for (int r1 = 0; r1 < 128; r1 += 16 * RPI) {
      const int r0 = 128 * w + r1 + lane / PL;
      float4 v[16];
#pragma unroll
      for (int k = 0; k < 16; k++) v[k] = ld<H>(in + base + (long)(r0 + RPI * k) * Q / 4);
#pragma unroll
      for (int k = 0; k < 16; k++) out[base + (long)(r0 + RPI * k) * Q / 4] = v[k];
    }
  }
}
// V1: a block's 4 warps take 4 adjacent groups of 16 lines (64 B a row each) over the same 128
// rows (a z-quarter): the rows' 256 bytes come from 4 warps at about the same time.
__global__ void warpgroups(const float4 *__restrict__ in, float4 *__restrict__ out, long S, int L, long Q) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const long quads = S * (Q / 64), items = quads * (L / 128);
  for (long it = blockIdx.x; it < items; it += gridDim.x) {
    const long qd = it / (L / 128);
    const int zq = (int)(it % (L / 128));
    const long s = qd / (Q / 64), q0 = (qd % (Q / 64)) * 64 + 16 * w;
    const long base = (s * L * Q + q0) / 4 + lane % 4;
    const int r0 = 128 * zq + lane / 4;
    float4 v[16];
#pragma unroll
    for (int k = 0; k < 16; k++) v[k] = in[base + (long)(r0 + 8 * k) * Q / 4];
#pragma unroll
    for (int k = 0; k < 16; k++) out[base + (long)(r0 + 8 * k) * Q / 4] = v[k];
  }
}
int main() {
  const long N = 512L * 512 * 512;
  float *a, *b;
  cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4);
  cudaMemset(a, 0, N * 4); cudaMemset(b, 0, N * 4);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto time = [&](auto f) {
    for (int i = 0; i < 3; i++) f();
    std::vector<float> t;
    for (int i = 0; i < 15; i++) { cudaEventRecord(e0); f(); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms); }
    std::sort(t.begin(), t.end()); return t[t.size() / 2] * 1000;
  };
  printf("memcpy D2D 512^3: %.1f us\n", time([&] { cudaMemcpyAsync(b, a, N * 4, cudaMemcpyDeviceToDevice); }));
  auto run = [&](auto kern, const char *name) {
    for (int per : {3, 4, 8}) {
      const int grid = per * sms;
      float tz = time([&] { kern<<<grid, 128>>>((float4 *)a, (float4 *)b, 1, 512, 512L * 512); });
      float ty = time([&] { kern<<<grid, 128>>>((float4 *)a, (float4 *)b, 512, 512, 512); });
      printf("%s blocks/SM %d: z (1 MiB stride) %.1f us, y (2 KiB) %.1f us\n", name, per, tz, ty);
    }
  };
  run(warpgroups, "V1 4 warps x 16 lines");
  run(colcopy<16, 0>, "G16 H0"); run(colcopy<16, 1>, "G16 H128"); run(colcopy<16, 2>, "G16 H256");
  run(colcopy<32, 0>, "G32 H0"); run(colcopy<32, 1>, "G32 H128");
  run(colcopy<64, 0>, "G64 H0"); run(colcopy<128, 0>, "G128 H0");
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
