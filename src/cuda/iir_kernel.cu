// SPDX-License-Identifier: BSD-3-Clause
// iir_kernel.cu - cuda_iir's passes (iir.c): the recursions of core/iir.h along one axis of a
// contiguous float32 array, a thread per line.
//
//  - iir_cols: along the middle axis of [P][L][Q] (every axis but the last): thread q of a
//    block row walks line (p, q), so a warp's loads and stores are 32 neighbours (coalesced).
//    The loads of the next kAhead samples are issued before the recursion runs over the
//    current ones (a thread's only parallelism is the loads: the recursion is serial).
//  - iir_rows: along the last axis of [R][X]: a warp takes 32 rows and walks them in chunks
//    of 32 columns through a shared-memory tile (loaded and stored a row per instruction,
//    coalesced; each lane then runs its row through the tile): section IV.B of Cong, Huang
//    and Zou without a transpose pass. The next chunk's loads are in flight during the recursion.
// Both sweep forward writing the causal result to dst (float32), then backward reading it
// back and writing the final result. (On 256^3 every line's forward sweep ends before the
// backward sweeps start and the array does not fit in L2, so the re-reads come from DRAM: a
// pass moves the array ~5 times, not twice. Keeping the causal result in shared memory
// instead, a warp-wide block per 32 lines, is slower still: 0.19 ms instead of 0.12 ms
// a pass, too few warps per SM to cover the serial recursion.) The parallel form (Deriche, and
// iir_vyv of order 3 or 4 as its twin where its cascade would lose accuracy: core/iir.h) reads
// the input again in the backward sweep, so its src and dst must differ; the cascade may run in
// place. The state is T, double: float32 state measured up to 1.7e-2 off the float64
// reference at sigma 64 (2.6e-4 at 16, 2.8e-6 at 4.5, Deriche) and only 12% faster. The
// Triggs-Sdika start uses the causal state itself (the last K outputs, never rounded to
// float32): its matrix amplifies rounding in them.
#include <cuda_runtime.h>

#include "../core/iir.h"
#include "common.cuh"
#include "launch.h"

namespace {

// The filter's coefficients in the state's type, made once per thread from the kernel
// parameter (core/iir.h names).
template <typename T, int K> struct coef {
  T a[K], b0, bp[K], bm[K], gp, gm;
  __device__ __forceinline__ explicit coef(const ndf__iir &f) {
#pragma unroll
    for (int j = 0; j < K; j++) {
      a[j] = (T)f.a[j];
      bp[j] = (T)f.bp[j];
      bm[j] = (T)f.bm[j];
    }
    b0 = (T)f.b0;
    gp = (T)f.gp;
    gm = (T)f.gm;
  }
};

// The causal recursion's state: h[j] the output j + 1 samples back; for the parallel form
// also xr[j], the input j samples back (x[i - j], x[0] before the line).
template <typename T, int K, bool PAR> struct causal {
  T h[K], xr[K];
  __device__ __forceinline__ void start(const coef<T, K> &c, T first) {
#pragma unroll
    for (int j = 0; j < K; j++) {
      h[j] = PAR ? c.gp * first : first;
      xr[j] = first;
    }
  }
  __device__ __forceinline__ T step(const coef<T, K> &c, T x) {
    T v;
    if (PAR) {
#pragma unroll
      for (int j = K - 1; j > 0; j--)
        xr[j] = xr[j - 1];
      xr[0] = x;
      v = c.bp[K - 1] * xr[K - 1];
#pragma unroll
      for (int j = K - 2; j >= 0; j--)
        v = fma(c.bp[j], xr[j], v);
    } else {
      v = c.b0 * x;
    }
#pragma unroll
    for (int j = K - 1; j >= 0; j--) // the newest state last: one FMA's latency per step
      v = fma(-c.a[j], h[j], v);
#pragma unroll
    for (int j = K - 1; j > 0; j--)
      h[j] = h[j - 1];
    h[0] = v;
    return v;
  }
};

// The anticausal recursion. Cascade: v[i] = b0 u[i] - sum a v[i + j], its first K outputs
// (at n - 1 ... n - K) given by Triggs-Sdika (pend[], taken in order). Parallel: ym[i] =
// sum bm[j - 1] x[i + j] - sum a ym[i + j], with x past the end = last. step() takes the
// sample at i (u or x) and returns v (cascade) or ym (parallel).
template <typename T, int K, bool PAR> struct anticausal {
  T h[K], xr[K], pend[K];
  int npend;
  // Cascade: tail[m] = u[n - 1 - m] (x[0] where n - 1 - m < 0): the causal state.
  __device__ __forceinline__ void start(const ndf__iir &f, const coef<T, K> &c, T last,
                                        const T *tail) {
    if (PAR) {
#pragma unroll
      for (int j = 0; j < K; j++) {
        h[j] = c.gm * last;
        xr[j] = last;
      }
      npend = 0;
    } else {
#pragma unroll
      for (int r = 0; r < K; r++) {
        double v = (double)last;
#pragma unroll
        for (int m = 0; m < K; m++)
          v = fma(f.M[r * K + m], (double)tail[m] - (double)last, v);
        pend[r] = (T)v;
      }
      npend = K;
    }
  }
  __device__ __forceinline__ void push(T v) {
#pragma unroll
    for (int j = K - 1; j > 0; j--)
      h[j] = h[j - 1];
    h[0] = v;
  }
  __device__ __forceinline__ T step(const coef<T, K> &c, T x) {
    T v;
    if (PAR) {
      v = c.bm[K - 1] * xr[K - 1];
#pragma unroll
      for (int j = K - 2; j >= 0; j--)
        v = fma(c.bm[j], xr[j], v);
#pragma unroll
      for (int j = K - 1; j > 0; j--)
        xr[j] = xr[j - 1];
      xr[0] = x;
    } else if (npend > 0) { // Triggs-Sdika's outputs enter the state like computed ones
      v = pend[0];
#pragma unroll
      for (int j = 0; j < K - 1; j++)
        pend[j] = pend[j + 1];
      npend--;
      push(v);
      return v;
    } else {
      v = c.b0 * x;
    }
#pragma unroll
    for (int j = K - 1; j >= 0; j--)
      v = fma(-c.a[j], h[j], v);
    push(v);
    return v;
  }
};

constexpr int kColsBlock = 128, kAhead = 16;

// Lines along L of [P][L][Q]; block (x: q, y: p, striding over p).
template <typename T, int K, bool PAR>
__global__ void __launch_bounds__(kColsBlock)
    iir_cols(const float *src, float *dst, int64_t P, int64_t L, int64_t Q,
             const __grid_constant__ ndf__iir f) {
  const int64_t q = (int64_t)blockIdx.x * kColsBlock + threadIdx.x;
  if (q >= Q) return;
  const coef<T, K> cf(f);
  for (int64_t p = blockIdx.y; p < P; p += gridDim.y) {
    const float *s = src + p * L * Q + q;
    float *d = dst + p * L * Q + q;
    const T first = s[0];
    T last = first;
    causal<T, K, PAR> c;
    c.start(cf, first);
    float x[kAhead], nx[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; u++)
      x[u] = u < L ? s[u * Q] : 0.f;
    for (int64_t i0 = 0; i0 < L; i0 += kAhead) {
#pragma unroll
      for (int u = 0; u < kAhead; u++)
        nx[u] = i0 + kAhead + u < L ? s[(i0 + kAhead + u) * Q] : 0.f;
#pragma unroll
      for (int u = 0; u < kAhead; u++)
        if (i0 + u < L) {
          last = x[u];
          d[(i0 + u) * Q] = (float)c.step(cf, (T)x[u]);
        }
#pragma unroll
      for (int u = 0; u < kAhead; u++)
        x[u] = nx[u];
    }
    anticausal<T, K, PAR> a;
    a.start(f, cf, last, c.h);
    // Backward in batches: y (the causal result) and, for the parallel form, x again.
    float y[kAhead], ny[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; u++) {
      const int64_t i = L - 1 - u;
      y[u] = i >= 0 ? d[i * Q] : 0.f;
      x[u] = PAR && i >= 0 ? s[i * Q] : 0.f;
    }
    for (int64_t i1 = L; i1 > 0; i1 -= kAhead) { // samples i1 - 1 down to i1 - kAhead
#pragma unroll
      for (int u = 0; u < kAhead; u++) {
        const int64_t i = i1 - kAhead - 1 - u;
        ny[u] = i >= 0 ? d[i * Q] : 0.f;
        nx[u] = PAR && i >= 0 ? s[i * Q] : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kAhead; u++) {
        const int64_t i = i1 - 1 - u;
        if (i >= 0)
          d[i * Q] = PAR ? (float)((T)y[u] + a.step(cf, (T)x[u])) : (float)a.step(cf, (T)y[u]);
      }
#pragma unroll
      for (int u = 0; u < kAhead; u++) {
        y[u] = ny[u];
        x[u] = nx[u];
      }
    }
  }
}

constexpr int kRowsWarps = 4;

// Lines along X of [R][X]: warp w of the grid takes rows 32 w .. 32 w + 31 (lane l: row
// 32 w + l) and walks them through a 32 x 33 tile (two for the parallel form's backward sweep).
template <typename T, int K, bool PAR>
__global__ void __launch_bounds__(32 * kRowsWarps)
    iir_rows(const float *src, float *dst, int64_t R, int64_t X,
             const __grid_constant__ ndf__iir f) {
  __shared__ float tiles[kRowsWarps][PAR ? 2 : 1][32][33];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float(*t)[33] = tiles[warp][0];
  float(*tx)[33] = tiles[warp][PAR ? 1 : 0];
  const int64_t r0 = ((int64_t)blockIdx.x * kRowsWarps + warp) * 32;
  if (r0 >= R) return;
  const int rows = (int)min((int64_t)32, R - r0);
  const bool mine = lane < rows;
  const coef<T, K> cf(f);
  const T first = src[(r0 + (mine ? lane : 0)) * X];
  T last = first;
  causal<T, K, PAR> c;
  c.start(cf, first);
  // pf[r]: row r0 + r at the next chunk's column c0 + lane.
  float pf[32];
#pragma unroll
  for (int r = 0; r < 32; r++)
    pf[r] = r < rows && lane < X ? src[(r0 + r) * X + lane] : 0.f;
  for (int64_t c0 = 0; c0 < X; c0 += 32) {
    const int n = (int)min((int64_t)32, X - c0);
#pragma unroll
    for (int r = 0; r < 32; r++)
      t[r][lane] = pf[r];
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 32; r++)
      pf[r] = r < rows && c0 + 32 + lane < X ? src[(r0 + r) * X + c0 + 32 + lane] : 0.f;
    if (mine) {
#pragma unroll
      for (int j = 0; j < 32; j++)
        if (j < n) {
          const float x = t[lane][j];
          last = x;
          t[lane][j] = (float)c.step(cf, (T)x);
        }
    }
    __syncwarp();
    for (int r = 0; r < rows; r++)
      if (lane < n) dst[(r0 + r) * X + c0 + lane] = t[r][lane];
    __syncwarp();
  }
  anticausal<T, K, PAR> a;
  a.start(f, cf, last, c.h);
  const int64_t cl = (X - 1) / 32 * 32; // the last chunk's first column
  // Backward: pf (and px for the parallel form) hold the chunk below the current one.
  float px[PAR ? 32 : 1];
#pragma unroll
  for (int r = 0; r < 32; r++) {
    pf[r] = r < rows && cl + lane < X ? dst[(r0 + r) * X + cl + lane] : 0.f;
    if (PAR) px[PAR ? r : 0] = r < rows && cl + lane < X ? src[(r0 + r) * X + cl + lane] : 0.f;
  }
  for (int64_t c0 = cl; c0 >= 0; c0 -= 32) {
    const int n = (int)min((int64_t)32, X - c0);
#pragma unroll
    for (int r = 0; r < 32; r++) {
      t[r][lane] = pf[r];
      if (PAR) tx[r][lane] = px[PAR ? r : 0];
    }
    __syncwarp();
    if (c0 > 0) {
#pragma unroll
      for (int r = 0; r < 32; r++) {
        pf[r] = r < rows ? dst[(r0 + r) * X + c0 - 32 + lane] : 0.f;
        if (PAR) px[PAR ? r : 0] = r < rows ? src[(r0 + r) * X + c0 - 32 + lane] : 0.f;
      }
    }
    if (mine) {
#pragma unroll
      for (int j = 31; j >= 0; j--)
        if (j < n) {
          if (PAR)
            t[lane][j] = (float)((T)t[lane][j] + a.step(cf, (T)tx[lane][j]));
          else
            t[lane][j] = (float)a.step(cf, (T)t[lane][j]);
        }
    }
    __syncwarp();
    for (int r = 0; r < rows; r++)
      if (lane < n) dst[(r0 + r) * X + c0 + lane] = t[r][lane];
    __syncwarp();
  }
}

template <typename T, int K, bool PAR>
int launch(const float *src, float *dst, int64_t P, int64_t L, int64_t Q, const ndf__iir &f,
           cudaStream_t st) {
  if (Q == 1) { // the last axis: rows of length L
    const int64_t R = P, warps = (R + 31) / 32;
    const int64_t blocks = (warps + kRowsWarps - 1) / kRowsWarps;
    if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
    iir_rows<T, K, PAR><<<(unsigned)blocks, 32 * kRowsWarps, 0, st>>>(src, dst, R, L, f);
  } else {
    const int64_t bx = (Q + kColsBlock - 1) / kColsBlock;
    if (bx > 0x7fffffff) return cudaErrorInvalidConfiguration;
    const unsigned by = (unsigned)(P < 65535 ? P : 65535);
    iir_cols<T, K, PAR><<<dim3((unsigned)bx, by), kColsBlock, 0, st>>>(src, dst, P, L, Q, f);
  }
  return (int)cudaGetLastError();
}

template <typename T>
int launch_t(const float *src, float *dst, int64_t P, int64_t L, int64_t Q, const ndf__iir &f,
             cudaStream_t st) {
  if (f.form == NDF__IIR_PARALLEL) // Deriche; iir_vyv's twins (order 3 past sigma 300, 4 past 64)
    switch (f.K) {
    case 3: return launch<T, 3, true>(src, dst, P, L, Q, f, st);
    case 4: return launch<T, 4, true>(src, dst, P, L, Q, f, st);
    default: return (int)cudaErrorNotSupported;
    }
  switch (f.K) {
  case 1: return launch<T, 1, false>(src, dst, P, L, Q, f, st);
  case 2: return launch<T, 2, false>(src, dst, P, L, Q, f, st);
  case 3: return launch<T, 3, false>(src, dst, P, L, Q, f, st);
  case 4: return launch<T, 4, false>(src, dst, P, L, Q, f, st);
  case 5: return launch<T, 5, false>(src, dst, P, L, Q, f, st);
  default: return (int)cudaErrorNotSupported;
  }
}

} // namespace

extern "C" int ndf__launch_iir(const float *src, float *dst, int64_t P, int64_t L, int64_t Q,
                               const ndf__iir *f, void *stream) {
  if (P <= 0 || L <= 0 || Q <= 0) return 0;
  return launch_t<double>(src, dst, P, L, Q, *f, (cudaStream_t)stream);
}
