// reg.cu - probe (issue 05): Deriche's parallel form along the middle axis of [P][256][Q], a line
// to two lanes whose 128 samples each stay in registers, the second lane's in reverse order. In
// phase 1 every lane runs the recursion from its end of the line (lane 0 of a pair causal from
// sample 0, lane 1 anticausal from sample 255) and leaves its partial sums in shared memory;
// the pair swaps its end states (one shuffle), and in phase 2 every lane runs the other
// direction back over its samples from the exact state its partner handed over. No chunk
// chaining, no correction: ~27 FP instructions a sample for both directions. Standalone, not
// the library's; compared in the same run against the library's tensor-core pass.
extern "C" {
#include "../../../src/core/iir.h"
}
#include "../../../src/cuda/iir_chunk.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using namespace ndf_iir;

constexpr int kH = 128, kL = 2 * kH; // samples a lane, line length

struct rparams {
  float2 p[2], rho[2], g[2];
  float R;
};

#define CK(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                 \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

// One complex step u = p u + x, then acc += Re(rho u).
__device__ __forceinline__ float step(float2 &u, float2 p, float2 rho, float x, float acc) {
  const float ux = fmaf(p.x, u.x, fmaf(-p.y, u.y, x));
  u.y = fmaf(p.x, u.y, p.y * u.x);
  u.x = ux;
  return fmaf(rho.x, u.x, fmaf(-rho.y, u.y, acc));
}

// NW warps a block; a warp takes groups of 16 neighbouring lines (q .. q + 15 of one p).
// COMPUTE_ONLY: no global loads or stores (the samples are made from the lane's index) - the
// floor of the arithmetic and shared-memory traffic alone.
template <int NW, bool COMPUTE_ONLY>
__global__ void __launch_bounds__(32 * NW, (12 / NW > 0 ? 12 / NW : 1)) reg_cols(const float *__restrict__ src,
                                                    float *__restrict__ dst, int64_t P,
                                                    int64_t Q, const rparams f, float *sink) {
  extern __shared__ float part_all[];
  const int lane = threadIdx.x % 32, seg = lane / 16, l = lane % 16;
  float *part = part_all + (threadIdx.x / 32) * kH * 32 + lane;
  const int64_t groups = P * (Q / 16);
  const int64_t gw = (int64_t)blockIdx.x * NW + threadIdx.x / 32, tw = (int64_t)gridDim.x * NW;
  const int step_s = seg ? -(int)Q : (int)Q; // a lane's step between its samples (floats)
  float chk = 0;
  for (int64_t g = gw; g < groups; g += tw) {
    const int64_t p = g / (Q / 16), q0 = (g - p * (Q / 16)) * 16;
    const int64_t base = p * kL * Q + q0 + l + (seg ? (int64_t)(kL - 1) * Q : 0);
    float x[kH];
    if (COMPUTE_ONLY) {
#pragma unroll
      for (int r = 0; r < kH; r++)
        x[r] = __int_as_float(0x3f000000 | ((lane * 131 + r * 17 + (int)g) & 0x7fff));
    } else {
      const float *s = src + base;
#pragma unroll
      for (int r = 0; r < kH; r++)
        x[r] = __ldcs(s + r * step_s);
    }
    // phase 1: from this lane's end of the line
    float2 u[2];
#pragma unroll
    for (int k = 0; k < 2; k++)
      u[k] = cscale(f.g[k], x[0]);
#pragma unroll
    for (int r = 0; r < kH; r++) {
      float acc = 0;
#pragma unroll
      for (int k = 0; k < 2; k++)
        acc = step(u[k], f.p[k], f.rho[k], x[r], acc);
      part[r * 32] = acc;
    }
    // the pair swaps end states: lane 0's causal state after sample 127 is lane 1's start,
    // lane 1's anticausal state at sample 128 is lane 0's
#pragma unroll
    for (int k = 0; k < 2; k++) {
      u[k].x = __shfl_xor_sync(0xffffffffu, u[k].x, 16);
      u[k].y = __shfl_xor_sync(0xffffffffu, u[k].y, 16);
    }
    // phase 2: the other direction, back over the lane's samples
#pragma unroll
    for (int r = kH - 1; r >= 0; r--) {
      float acc = fmaf(-f.R, x[r], part[r * 32]);
#pragma unroll
      for (int k = 0; k < 2; k++)
        acc = step(u[k], f.p[k], f.rho[k], x[r], acc);
      x[r] = acc;
    }
    if (COMPUTE_ONLY) {
#pragma unroll
      for (int r = 0; r < kH; r++)
        chk += x[r];
    } else {
      float *d = dst + base;
#pragma unroll
      for (int r = 0; r < kH; r++)
        __stcs(d + r * step_s, x[r]);
    }
  }
  if (COMPUTE_ONLY && chk == 12345.678f) *sink = chk; // keeps the work
}

template <int NW, bool CO>
float run_cols(const float *src, float *dst, int64_t P, int64_t Q, const rparams &f, float *sink,
               int reps, int *blocks_out) {
  const size_t smem = (size_t)NW * kH * 32 * sizeof(float);
  auto k = reg_cols<NW, CO>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int dev = 0, sms = 0, per = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 32 * NW, smem));
  const int64_t groups = P * (Q / 16);
  const int blocks = (int)std::min<int64_t>((int64_t)sms * per, (groups + NW - 1) / NW);
  *blocks_out = per;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int i = 0; i < reps + 3; i++) {
    CK(cudaEventRecord(a));
    k<<<blocks, 32 * NW, smem>>>(src, dst, P, Q, f, sink);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) ts.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

float time_copy(float *dst, const float *src, size_t n, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int i = 0; i < reps + 3; i++) {
    CK(cudaEventRecord(a));
    CK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

int main(int argc, char **argv) {
  const double sigma = argc > 1 ? atof(argv[1]) : 4.5;
  ndf__iir fi;
  char why[200];
  if (ndf__iir_design(&fi, NDF__IIR_DERICHE, 4, sigma, why, sizeof why) != NDF_OK) {
    fprintf(stderr, "design: %s\n", why);
    return 1;
  }
  const chunkp<16> c = params<16>(fi);
  rparams f;
  for (int k = 0; k < 2; k++)
    f.p[k] = c.p[k], f.rho[k] = c.rho[k], f.g[k] = c.g[k];
  f.R = c.R;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int clk = 0;
  CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
  printf("device %s, %d SMs, %.0f MHz; sigma %g\n", prop.name, prop.multiProcessorCount,
         clk / 1e3, sigma);
  const int64_t n3 = (int64_t)kL * kL * kL;
  float *x, *y, *sink;
  CK(cudaMalloc(&x, n3 * sizeof(float)));
  CK(cudaMalloc(&y, n3 * sizeof(float)));
  CK(cudaMalloc(&sink, 4));
  std::vector<float> h(n3);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (auto &v : h)
    v = nd(rng);
  CK(cudaMemcpy(x, h.data(), n3 * sizeof(float), cudaMemcpyHostToDevice));
  // correctness: y pass (P 256, Q 256) and z pass (P 1, Q 65536) against the float64 line
  struct cs {
    const char *name;
    int64_t P, Q;
  } cases[] = {{"y 256^3", kL, kL}, {"z 256^3", 1, (int64_t)kL * kL}, {"y 64x256x256", 64, kL}};
  int per = 0;
  for (const cs &k : cases) {
    CK(cudaMemset(y, 0xff, n3 * sizeof(float))); // poison (NaN)
    run_cols<4, false>(x, y, k.P, k.Q, f, sink, 1, &per);
    CK(cudaDeviceSynchronize());
    std::vector<float> o(k.P * kL * k.Q);
    CK(cudaMemcpy(o.data(), y, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0, big = 0;
    int64_t wl = -1;
    std::vector<double> line(kL), tmp(8 * kL);
    std::mt19937_64 pick(11);
    for (int t = 0; t < 2000; t++) {
      const int64_t p = pick() % k.P, q = pick() % k.Q;
      for (int i = 0; i < kL; i++)
        line[i] = h[(p * kL + i) * k.Q + q];
      ndf__iir_line(&fi, line.data(), kL, tmp.data());
      for (int i = 0; i < kL; i++) {
        const double d = std::fabs(line[i] - (double)o[(p * kL + i) * k.Q + q]);
        big = std::max(big, std::fabs(line[i]));
        if (!(d <= worst)) worst = d, wl = (p * kL + i) * k.Q + q;
      }
    }
    printf("%-14s worst |err| %.3g of max %.3g (%.2e) at element %lld\n", k.name, worst, big,
           worst / big, (long long)wl);
  }
  const int reps = 30;
  printf("\ncase            copy ms   reg ms  (blocks/SM)  reg compute-only ms   ps/sample "
         "SM-cycles/sample (compute-only)\n");
  for (const cs &k : cases) {
    const size_t n = (size_t)k.P * kL * k.Q;
    const float tc = time_copy(y, x, n, reps);
    const float tr = run_cols<4, false>(x, y, k.P, k.Q, f, sink, reps, &per);
    const float to = run_cols<4, true>(x, y, k.P, k.Q, f, sink, reps, &per);
    const double cyc = to * 1e-3 * clk * 1e3 * prop.multiProcessorCount / n;
    printf("%-14s %8.4f %8.4f  (%d)  %8.4f  %8.2f  %.3f\n", k.name, tc, tr, per, to, tr * 1e9 / n,
           cyc);
  }
  // warps a block
  printf("\nwarps a block (y 256^3): ");
  printf("2: %.4f/%.4f  ", run_cols<2, false>(x, y, kL, kL, f, sink, reps, &per),
         run_cols<2, true>(x, y, kL, kL, f, sink, reps, &per));
  printf("(%d/SM)  8: %.4f/%.4f ", per, run_cols<8, false>(x, y, kL, kL, f, sink, reps, &per),
         run_cols<8, true>(x, y, kL, kL, f, sink, reps, &per));
  printf("(%d/SM)\n", per);
  return 0;
}
