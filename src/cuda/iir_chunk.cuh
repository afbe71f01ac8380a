// SPDX-License-Identifier: BSD-3-Clause
// iir_chunk.cuh - the chunked recursive pass's pieces (iir_chunk_kernel.cu): Deriche's filter
// as two first-order complex recursions in float32, their parameters for chunks of C samples,
// a chunk's end states, its recursions, the chaining of a line's chunks, and complex
// arithmetic on float2.
#ifndef NDF_CUDA_IIR_CHUNK_CUH
#define NDF_CUDA_IIR_CHUNK_CUH

#include <cuda_runtime.h>

#include <complex>

#include "../core/iir.h"

namespace ndf_iir {

constexpr double kMaxSigma = 256; // float32 state's bound (iir_chunk_kernel.cu)

template <int C> struct chunkp {
  float2 p[2], rho[2], pC[2], g[2]; // pole, residue, pole^C, 1 / (1 - pole)
  float R;
  float2 pw[2][C]; // pole^j
};

__device__ __forceinline__ float2 cfma(float2 a, float2 b, float2 c) { // a b + c
  return make_float2(fmaf(a.x, b.x, fmaf(-a.y, b.y, c.x)), fmaf(a.x, b.y, fmaf(a.y, b.x, c.y)));
}
__device__ __forceinline__ float2 cscale(float2 a, float s) {
  return make_float2(a.x * s, a.y * s);
}

// Filter f's two recursions (poles p, residues rho, R = sum Re rho), rho scaled so that the
// filter's DC gain is 1 with these poles: f's own, or (round) rounded to float32 first, as a
// kernel that steps by p itself in float32 runs them.
inline void recursions(const ndf__iir &f, bool round, std::complex<double> (&p)[2],
                       std::complex<double> (&rho)[2], double &R) {
  typedef std::complex<double> cd;
  double dc = 0;
  for (int k = 0; k < 2; k++) {
    p[k] = round ? cd((float)f.pole[k][0], (float)f.pole[k][1]) : cd(f.pole[k][0], f.pole[k][1]);
    dc += (cd(f.res[k][0], f.res[k][1]) * (1.0 + p[k]) / (1.0 - p[k])).real();
  }
  R = 0;
  for (int k = 0; k < 2; k++) {
    rho[k] = cd(f.res[k][0], f.res[k][1]) / dc;
    R += rho[k].real();
  }
}

template <int C> chunkp<C> params(const ndf__iir &f) {
  typedef std::complex<double> cd;
  chunkp<C> q;
  cd pf[2], rho[2];
  double R;
  recursions(f, true, pf, rho, R); // the poles as the kernel will use them
  for (int k = 0; k < 2; k++) {
    const cd pC = std::pow(pf[k], C), g = 1.0 / (1.0 - pf[k]);
    q.p[k] = make_float2((float)pf[k].real(), (float)pf[k].imag());
    q.rho[k] = make_float2((float)rho[k].real(), (float)rho[k].imag());
    q.pC[k] = make_float2((float)pC.real(), (float)pC.imag());
    q.g[k] = make_float2((float)g.real(), (float)g.imag());
    cd pj = 1;
    for (int j = 0; j < C; j++, pj *= pf[k])
      q.pw[k][j] = make_float2((float)pj.real(), (float)pj.imag());
  }
  q.R = (float)R;
  return q;
}

// A chunk's end states from a zero start, per pole k: causal E_k = sum_j p^(C-1-j) x[j] (the
// state after its last sample), anticausal F_k = sum_j p^j x[j] (before its first).
template <int C>
__device__ __forceinline__ void chunk_ends(const chunkp<C> &f, const float (&x)[C], float2 (&E)[2],
                                           float2 (&F)[2]) {
#pragma unroll
  for (int k = 0; k < 2; k++) {
    E[k] = F[k] = make_float2(0, 0);
#pragma unroll
    for (int j = 0; j < C; j++) {
      E[k].x = fmaf(f.pw[k][C - 1 - j].x, x[j], E[k].x);
      E[k].y = fmaf(f.pw[k][C - 1 - j].y, x[j], E[k].y);
      F[k].x = fmaf(f.pw[k][j].x, x[j], F[k].x);
      F[k].y = fmaf(f.pw[k][j].y, x[j], F[k].y);
    }
  }
}

// Both recursions over a chunk, from the causal states z entering it (before its first
// sample) and the anticausal s (after its last): y[j] = sum_k Re(rho_k (z_k[j] + s_k[j])) -
// R x[j].
template <int C>
__device__ __forceinline__ void chunk_filter(const chunkp<C> &f, const float (&x)[C],
                                             float2 (&z)[2], float2 (&s)[2], float (&y)[C]) {
#pragma unroll
  for (int j = C - 1; j >= 0; j--) {
    float v = -f.R * x[j];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      s[k] = cfma(f.p[k], s[k], make_float2(x[j], 0));
      v = fmaf(f.rho[k].x, s[k].x, fmaf(-f.rho[k].y, s[k].y, v));
    }
    y[j] = v;
  }
#pragma unroll
  for (int j = 0; j < C; j++) {
#pragma unroll
    for (int k = 0; k < 2; k++) {
      z[k] = cfma(f.p[k], z[k], make_float2(x[j], 0));
      y[j] = fmaf(f.rho[k].x, z[k].x, fmaf(-f.rho[k].y, z[k].y, y[j]));
    }
  }
}

// Walks a row-major index r W + c from i in steps of n without a division in the loop: the
// elements of an R x W tile a thread copies (tile_walk), or a line (p, q) of [P][L][Q] as the
// line groups advance.
template <typename T> struct walk2 {
  T r, c, dr, dc, W;
  __device__ __forceinline__ walk2(T i, T n, T W_) : W(W_) {
    r = i / W;
    c = i - r * W;
    dr = n / W;
    dc = n - dr * W;
  }
  __device__ __forceinline__ void next() {
    r += dr;
    c += dc;
    if (c >= W) {
      c -= W;
      r++;
    }
  }
};
typedef walk2<int> tile_walk;

// Sets kernel k's shared-memory limit (to smem, or to most where larger) and gives in *n how
// many blocks of `threads` and smem bytes stay resident on the device.
template <typename K>
cudaError_t resident_blocks(K k, int threads, size_t smem, int64_t *n, size_t most = 0) {
  const cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)(most > smem ? most : smem));
  if (err != cudaSuccess) return err;
  int dev = 0, sms = 0, per = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, threads, smem);
  *n = (int64_t)sms * (per > 0 ? per : 1);
  return cudaSuccess;
}

// Launches k on as many blocks as stay resident (at most `groups`), the blocks taking the
// groups in turn.
template <typename K, typename... A>
int launch_resident(K k, int threads, size_t smem, int64_t groups, cudaStream_t st, A... args) {
  int64_t resident = 0;
  const cudaError_t err = resident_blocks(k, threads, smem, &resident);
  if (err != cudaSuccess) return (int)err;
  k<<<(unsigned)(groups < resident ? groups : resident), threads, smem, st>>>(args...);
  return (int)cudaGetLastError();
}

// Chains a line's chunks: c[0], c[st], ..., c[(nc - 1) st] hold their zero-start end states
// for one recursion (pole^C = pC); each is replaced by the state entering that chunk from a
// zero start of the line, in order (causal) or in reverse (anticausal). Returns the state
// leaving the line.
__device__ __forceinline__ float2 chain(float2 *c, int st, int nc, float2 pC, bool causal) {
  float2 z = make_float2(0, 0);
  for (int i = 0; i < nc; i++) {
    float2 *ci = c + (causal ? i : nc - 1 - i) * st;
    const float2 e = *ci;
    *ci = z;
    z = cfma(pC, z, e);
  }
  return z;
}

} // namespace ndf_iir

#endif
