// probe: wgmma RS tf32 m64n24k8 layout check
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
__device__ uint64_t desc(const void *p, int lbo, int sbo) {
  uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}
__global__ void k(const float *A, const float *B, float *D, int lbo, int sbo, int bstr_nb, int bstr_kb) {
  __shared__ __align__(128) float bs[24 * 8];
  int tid = threadIdx.x;
  for (int i = tid; i < 24 * 8; i += 128) {
    int n = i / 8, kk = i % 8;
    bs[((n / 8) * bstr_nb + (kk / 4) * bstr_kb + (n % 8) * 16 + (kk % 4) * 4) / 4] = B[n * 8 + kk];
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
  uint32_t a[4];
  a[0] = __float_as_uint(A[(16 * w + g) * 8 + t]);
  a[1] = __float_as_uint(A[(16 * w + g + 8) * 8 + t]);
  a[2] = __float_as_uint(A[(16 * w + g) * 8 + t + 4]);
  a[3] = __float_as_uint(A[(16 * w + g + 8) * 8 + t + 4]);
  float d[12];
  for (int i = 0; i < 12; i++) d[i] = 0;
  uint64_t db = desc(bs, lbo, sbo);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %17, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32 "
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, %16, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#else
  d[0] = -12345;
#endif
  for (int e = 0; e < 12; e++) {
    int j = e / 4, s = e % 4;
    int row = 16 * w + g + 8 * (s / 2), col = 8 * j + 2 * t + (s % 2);
    D[row * 24 + col] = d[e];
  }
}
int main() {
  float hA[64 * 8], hB[24 * 8], ref[64 * 24], hD[64 * 24];
  for (int i = 0; i < 64 * 8; i++) hA[i] = (float)((i * 7) % 13 - 6);
  for (int i = 0; i < 24 * 8; i++) hB[i] = (float)((i * 5) % 11 - 5);
  for (int m = 0; m < 64; m++)
    for (int n = 0; n < 24; n++) {
      float s = 0;
      for (int q = 0; q < 8; q++) s += hA[m * 8 + q] * hB[n * 8 + q];
      ref[m * 24 + n] = s;
    }
  float *A, *B, *D;
  cudaMalloc(&A, sizeof hA); cudaMalloc(&B, sizeof hB); cudaMalloc(&D, sizeof hD);
  cudaMemcpy(A, hA, sizeof hA, cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB, sizeof hB, cudaMemcpyHostToDevice);
  // layout: nb stride 256, kb stride 128
  int cfg[2][2] = {{128, 256}, {256, 128}};
  for (int c = 0; c < 2; c++) {
    cudaMemset(D, 0xff, sizeof hD);
    k<<<1, 128>>>(A, B, D, cfg[c][0], cfg[c][1], 256, 128);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(hD, D, sizeof hD, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < 64 * 24; i++) bad += hD[i] != ref[i];
    printf("lbo %d sbo %d: err %s, mismatches %d (d0 %g ref %g)\n", cfg[c][0], cfg[c][1],
           cudaGetErrorString(e), bad, hD[0], ref[0]);
  }
  return 0;
}
