/* SPDX-License-Identifier: BSD-3-Clause */
/* box_kernel.cu - one pass of cuda_box: a box (one weight along the axis: scipy's uniform filter)
 * by running sums, at a cost that does not grow with the box, on contiguous float32 arrays.
 * Each thread slides the window along a segment of outputs, adding the sample that enters and
 * dropping the one that leaves, in float64 as scipy's uniform_filter1d sums and compensated as
 * cpu_box's (Knuth's TwoSum: small values a large one passed over are kept once it leaves),
 * times the weight. A thread's sum is a chain of dependent additions, so its reads are issued
 * U at a time ahead of the additions that take them: one read in flight per thread left the
 * passes waiting on memory latency.
 *
 * lines: along any axis, the array seen as [P][L][Q] with Q contiguous: a thread per line
 *   (p, q), consecutive threads on consecutive q (coalesced where Q is wide), a segment of S
 *   outputs along the axis each, the samples read through L1/L2 (the one that leaves was read
 *   n steps before). Along the last axis (Q = 1) this is the pass for boxes past the rows
 *   pass's shared memory.
 * rows: along the last axis: a block stages RR rows' segment of RS outputs and its apron in
 *   shared memory (coalesced, the mode applied as it loads), a thread slides along one row
 *   there (an odd pitch: the rows fall in distinct banks), writes its outputs over the samples
 *   it no longer needs, and the block stores the tile's rows back coalesced. */
#include <stdint.h>

#include "common.cuh"

namespace {

constexpr int CQ = 128; /* lines: threads a block */
constexpr int RR = 64;  /* rows: rows a block, a thread each */
constexpr int RS = 64;  /* rows: outputs a segment */
constexpr int U = 8;    /* reads a thread issues before the additions that take them */

/* *sum += x, what the rounding lost added to *err. */
__device__ __forceinline__ void two_add(double &sum, double &err, double x) {
  const double t = sum + x, z = t - sum;
  err += (sum - (t - z)) + (x - z);
  sum = t;
}

__global__ void __launch_bounds__(CQ)
    box_lines(const float *in, float *out, int64_t P, int64_t L, int64_t Q, int n, int64_t left,
              int mode, float cval, double w, int64_t S) {
  const int64_t nseg = (L + S - 1) / S;
  for (int64_t l = blockIdx.x * (int64_t)CQ + threadIdx.x; l < P * Q;
       l += (int64_t)gridDim.x * CQ) {
    const int64_t base = (l / Q) * L * Q + l % Q;
    for (int64_t sg = blockIdx.y; sg < nseg; sg += gridDim.y) {
      const int64_t i0 = sg * S, i1 = i0 + S < L ? i0 + S : L;
      double sum = 0, err = 0;
      for (int64_t j0 = 0; j0 < n; j0 += U) {
        float v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
          v[u] = j0 + u < n ? ndf__line_at(in, base, L, Q, i0 - left + j0 + u, mode, cval) : 0.f;
#pragma unroll
        for (int u = 0; u < U; u++)
          if (j0 + u < n) two_add(sum, err, v[u]);
      }
      for (int64_t i = i0; i < i1; i += U) {
        float enter[U], leave[U];
        if (i - left >= 0 && i + U + n - left <= L) { /* inside: no mode, straight reads */
          const float *a = in + base + (i - left) * Q;
#pragma unroll
          for (int u = 0; u < U; u++) {
            enter[u] = __ldg(a + ((int64_t)u + n) * Q);
            leave[u] = __ldg(a + u * Q);
          }
        } else {
#pragma unroll
          for (int u = 0; u < U; u++) {
            enter[u] = ndf__line_at(in, base, L, Q, i + u + n - left, mode, cval);
            leave[u] = ndf__line_at(in, base, L, Q, i + u - left, mode, cval);
          }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
          if (i + u >= i1) break;
          out[base + (i + u) * Q] = (float)((sum + err) * w);
          two_add(sum, err, enter[u]);
          two_add(sum, err, -(double)leave[u]);
        }
      }
    }
  }
}

__global__ void __launch_bounds__(RR)
    box_rows(const float *in, float *out, int64_t nrows, int64_t X, int n, int64_t left, int mode,
             float cval, double w, int pitch) {
  extern __shared__ float box_tile[]; /* RR rows of pitch samples */
  const int64_t r0 = blockIdx.x * (int64_t)RR, x0 = blockIdx.y * (int64_t)RS;
  const int len = RS + n - 1, cnt = (int)(X - x0 < RS ? X - x0 : RS);
  for (int e0 = threadIdx.x; e0 < RR * len; e0 += RR * U) {
    float v[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int e = e0 + u * RR, rr = e / len, j = e % len;
      v[u] = cval;
      if (e < RR * len && r0 + rr < nrows)
        v[u] = ndf__line_at(in, (r0 + rr) * X, X, 1, x0 - left + j, mode, cval);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int e = e0 + u * RR;
      if (e < RR * len) box_tile[(e / len) * pitch + e % len] = v[u];
    }
  }
  __syncthreads();
  float *t = box_tile + threadIdx.x * pitch;
  double sum = 0, err = 0;
  for (int j = 0; j < n; j++)
    two_add(sum, err, t[j]);
  for (int i = 0; i < cnt; i++) {
    const float o = (float)((sum + err) * w);
    if (i + 1 < cnt) {
      two_add(sum, err, t[i + n]);
      two_add(sum, err, -(double)t[i]);
    }
    t[i] = o; /* sample i is no longer needed */
  }
  __syncthreads();
  for (int e = threadIdx.x; e < RR * cnt; e += RR) {
    const int rr = e / cnt, i = e % cnt;
    if (r0 + rr < nrows) out[(r0 + rr) * X + x0 + i] = box_tile[rr * pitch + i];
  }
}

/* The rows pass's shared memory for a box of n: RR rows of an odd pitch of at least RS + n - 1
 * samples, or 0 past 48 KiB. */
size_t rows_smem(int n, int *pitch) {
  *pitch = (RS + n - 1) | 1;
  const size_t bytes = (size_t)RR * (size_t)*pitch * sizeof(float);
  return bytes <= 48 * 1024 ? bytes : 0;
}

} // namespace

extern "C" int ndf__box_takes(int n, int64_t X) {
  int pitch;
  return n >= 1 && rows_smem(n, &pitch) > 0 && (X + RS - 1) / RS < 65535;
}

extern "C" int ndf__launch_box_rows(const float *in, float *out, int64_t nrows, int64_t X, int n,
                                    int64_t left, int mode, float cval, double w, void *stream) {
  int pitch;
  const size_t smem = rows_smem(n, &pitch);
  if (!ndf__box_takes(n, X)) return (int)cudaErrorInvalidValue;
  if (nrows == 0 || X == 0) return 0;
  const dim3 grid((unsigned)((nrows + RR - 1) / RR), (unsigned)((X + RS - 1) / RS));
  box_rows<<<grid, RR, smem, (cudaStream_t)stream>>>(in, out, nrows, X, n, left, mode, cval, w,
                                                     pitch);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_box_lines(const float *in, float *out, int64_t P, int64_t L, int64_t Q,
                                     int n, int64_t left, int mode, float cval, double w,
                                     void *stream) {
  if (P == 0 || L == 0 || Q == 0) return 0;
  /* a segment at least twice the box, so that its start's n reads are at most half its own */
  const int64_t S = 2 * (int64_t)n > 64 ? 2 * (int64_t)n : 64, lines = (P * Q + CQ - 1) / CQ,
                segs = (L + S - 1) / S;
  const dim3 grid((unsigned)(lines < (1LL << 30) ? lines : (1LL << 30)),
                  (unsigned)(segs < 65535 ? segs : 65535));
  box_lines<<<grid, CQ, 0, (cudaStream_t)stream>>>(in, out, P, L, Q, n, left, mode, cval, w, S);
  return (int)cudaGetLastError();
}
