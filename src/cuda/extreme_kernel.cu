/* SPDX-License-Identifier: BSD-3-Clause */
/* extreme_kernel.cu - cuda_rank's minimum or maximum of a box, one pass per axis (scipy's
 * separable filter), over the samples as they are (float32, float64, uint8, uint16, int16).
 *
 * lines: along any axis, the array seen as [P][L][Q] with Q contiguous: a thread per line (p,
 *   q), consecutive threads on consecutive q (coalesced where Q is wide), a segment of S
 *   outputs each; an output reads its window's n samples through L1 (neighbours share all but
 *   one of them).
 * rows: along the last axis of rows at least RS / 4 long: a block stages a row's segment of RS
 *   outputs and its apron in shared memory (coalesced, the mode applied as it loads), a thread
 *   an output.
 * Each window is taken in order from its first sample, r = x > r ? x : r (maximum) or
 * x < r ? x : r (minimum), as the general kernel and the CPU take it, so a NaN counts where
 * theirs does. */
#include <stdint.h>

#include "common.cuh"
#include "ndf.h"

namespace {

constexpr int LT = 128; /* lines: threads a block */
constexpr int RS = 256; /* rows: outputs a block (a thread each) */

template <bool MAX, typename T> __device__ __forceinline__ T keep(T r, T x) {
  return MAX ? (x > r ? x : r) : (x < r ? x : r);
}

template <typename T, bool MAX>
__global__ void __launch_bounds__(LT)
    extreme_lines(const T *in, T *out, int64_t P, int64_t L, int64_t Q, int n, int64_t left,
                  int mode, T cval, int64_t S) {
  const int64_t nseg = (L + S - 1) / S;
  for (int64_t l = blockIdx.x * (int64_t)LT + threadIdx.x; l < P * Q;
       l += (int64_t)gridDim.x * LT) {
    const int64_t base = (l / Q) * L * Q + l % Q;
    for (int64_t sg = blockIdx.y; sg < nseg; sg += gridDim.y) {
      const int64_t i1 = (sg + 1) * S < L ? (sg + 1) * S : L;
      for (int64_t i = sg * S; i < i1; i++) {
        const int64_t s0 = i - left;
        T r;
        if (s0 >= 0 && s0 + n <= L) { /* inside: no mode */
          const T *a = in + base + s0 * Q;
          r = a[0];
          for (int j = 1; j < n; j++)
            r = keep<MAX>(r, a[j * Q]);
        } else {
          r = ndf__line_at(in, base, L, Q, s0, mode, cval);
          for (int j = 1; j < n; j++)
            r = keep<MAX>(r, ndf__line_at(in, base, L, Q, s0 + j, mode, cval));
        }
        out[base + i * Q] = r;
      }
    }
  }
}

template <typename T, bool MAX>
__global__ void __launch_bounds__(RS) extreme_rows(const T *in, T *out, int64_t nrows, int64_t X,
                                                   int n, int64_t left, int mode, T cval) {
  extern __shared__ __align__(16) unsigned char extreme_smem[];
  T *s = reinterpret_cast<T *>(extreme_smem); /* RS + n - 1 samples */
  const int64_t segs = (X + RS - 1) / RS;
  const int len = RS + n - 1;
  for (int64_t b = blockIdx.x; b < nrows * segs; b += gridDim.x) {
    const int64_t row = b / segs, x0 = (b % segs) * RS;
    __syncthreads(); /* the previous segment's readers are done */
    for (int e = threadIdx.x; e < len; e += RS)
      s[e] = ndf__line_at(in, row * X, X, 1, x0 - left + e, mode, cval);
    __syncthreads();
    const int64_t x = x0 + threadIdx.x;
    if (x < X) {
      T r = s[threadIdx.x];
      for (int j = 1; j < n; j++)
        r = keep<MAX>(r, s[threadIdx.x + j]);
      out[row * X + x] = r;
    }
  }
}

template <typename T, bool MAX>
int launch(const T *in, T *out, int64_t P, int64_t L, int64_t Q, int n, int64_t left, int mode,
           double cval, cudaStream_t st) {
  if (P * L * Q == 0) return 0;
  const size_t smem = ((size_t)RS + (size_t)n - 1) * sizeof(T);
  if (Q == 1 && L >= RS / 4 && smem <= 48 * 1024) { /* short rows would idle most threads */
    const int64_t blocks = P * ((L + RS - 1) / RS);
    extreme_rows<T, MAX><<<(unsigned)(blocks < (1LL << 30) ? blocks : (1LL << 30)), RS, smem, st>>>(
        in, out, P, L, n, left, mode, (T)cval);
  } else {
    /* a segment of at least 64 outputs, so that a thread's index arithmetic is shared */
    const int64_t S = 64, lines = (P * Q + LT - 1) / LT, segs = (L + S - 1) / S;
    const dim3 grid((unsigned)(lines < (1LL << 30) ? lines : (1LL << 30)),
                    (unsigned)(segs < 65535 ? segs : 65535));
    extreme_lines<T, MAX><<<grid, LT, 0, st>>>(in, out, P, L, Q, n, left, mode, (T)cval, S);
  }
  return (int)cudaGetLastError();
}

template <typename T>
int launch_t(const void *in, void *out, int64_t P, int64_t L, int64_t Q, int n, int64_t left,
             int mode, double cval, int maximum, cudaStream_t st) {
  return maximum ? launch<T, true>((const T *)in, (T *)out, P, L, Q, n, left, mode, cval, st)
                 : launch<T, false>((const T *)in, (T *)out, P, L, Q, n, left, mode, cval, st);
}

} // namespace

extern "C" int ndf__launch_extreme(const void *in, void *out, int dtype, int64_t P, int64_t L,
                                   int64_t Q, int k, int64_t left, int mode, double cval,
                                   int maximum, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  switch (dtype) {
  case NDF_F32: return launch_t<float>(in, out, P, L, Q, k, left, mode, cval, maximum, st);
  case NDF_F64: return launch_t<double>(in, out, P, L, Q, k, left, mode, cval, maximum, st);
  case NDF_U8: return launch_t<uint8_t>(in, out, P, L, Q, k, left, mode, cval, maximum, st);
  case NDF_U16: return launch_t<uint16_t>(in, out, P, L, Q, k, left, mode, cval, maximum, st);
  case NDF_I16: return launch_t<int16_t>(in, out, P, L, Q, k, left, mode, cval, maximum, st);
  }
  return (int)cudaErrorInvalidValue;
}
