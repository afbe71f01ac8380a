/* SPDX-License-Identifier: BSD-3-Clause */
/* box_kernel.cu - one pass of cuda_box: a box (one weight along the axis: scipy's uniform filter)
 * by running sums, at a cost that does not grow with the box, on contiguous float32 arrays.
 * Each thread slides the window along a segment of outputs, adding the sample that enters and
 * dropping the one that leaves, in float64 as scipy's uniform_filter1d sums and compensated as
 * cpu_box's (Knuth's TwoSum: small values a large one passed over are kept once it leaves),
 * times the weight.
 *
 * cols: along any slower axis, the array seen as [P][L][Q] with Q contiguous: threads across q
 *   (coalesced), a segment of S outputs along the axis each, the samples read through L1/L2
 *   (the one that leaves was read n steps before).
 * rows: along the last axis: a block stages RR rows' segment of RS outputs and its apron in
 *   shared memory (coalesced, the mode applied as it loads), a thread slides along one row
 *   there (an odd pitch: the rows fall in distinct banks), writes its outputs over the samples
 *   it no longer needs, and the block stores the tile's rows back coalesced. */
#include <stdint.h>

#include "../core/boundary.h"
#include "common.cuh"

namespace {

constexpr int CQ = 128; /* cols: threads a block, across q */
constexpr int RR = 64;  /* rows: rows a block, a thread each */
constexpr int RS = 64;  /* rows: outputs a segment */

/* *sum += x, what the rounding lost added to *err. */
__device__ __forceinline__ void two_add(double &sum, double &err, double x) {
  const double t = sum + x, z = t - sum;
  err += (sum - (t - z)) + (x - z);
  sum = t;
}

__device__ __forceinline__ double col_at(const float *in, int64_t base, int64_t L, int64_t Q,
                                         int64_t i, int mode, float cval) {
  const int64_t m = ndf__map_index(i, L, mode);
  return m < 0 ? (double)cval : (double)__ldg(in + base + m * Q);
}

__global__ void __launch_bounds__(CQ)
    box_cols(const float *in, float *out, int64_t P, int64_t L, int64_t Q, int n, int64_t left,
             int mode, float cval, double w, int64_t S) {
  const int64_t q = blockIdx.x * (int64_t)CQ + threadIdx.x;
  if (q >= Q) return;
  const int64_t i0 = blockIdx.y * S, i1 = i0 + S < L ? i0 + S : L;
  for (int64_t p = blockIdx.z; p < P; p += gridDim.z) {
    const int64_t base = p * L * Q + q;
    double sum = 0, err = 0;
    for (int j = 0; j < n; j++)
      two_add(sum, err, col_at(in, base, L, Q, i0 - left + j, mode, cval));
    for (int64_t i = i0; i < i1; i++) {
      out[base + i * Q] = (float)((sum + err) * w);
      if (i + 1 < i1) {
        two_add(sum, err, col_at(in, base, L, Q, i + n - left, mode, cval));
        two_add(sum, err, -col_at(in, base, L, Q, i - left, mode, cval));
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
  for (int e = threadIdx.x; e < RR * len; e += RR) {
    const int rr = e / len, j = e % len;
    float v = cval;
    if (r0 + rr < nrows) {
      const int64_t m = ndf__map_index(x0 - left + j, X, mode);
      if (m >= 0) v = __ldg(in + (r0 + rr) * X + m);
    }
    box_tile[rr * pitch + j] = v;
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

extern "C" int ndf__box_takes(int n) {
  int pitch;
  return n >= 1 && rows_smem(n, &pitch) > 0;
}

extern "C" int ndf__launch_box_rows(const float *in, float *out, int64_t nrows, int64_t X, int n,
                                    int64_t left, int mode, float cval, double w, void *stream) {
  int pitch;
  const size_t smem = rows_smem(n, &pitch);
  if (!smem) return (int)cudaErrorInvalidValue;
  if (nrows == 0 || X == 0) return 0;
  const dim3 grid((unsigned)((nrows + RR - 1) / RR), (unsigned)((X + RS - 1) / RS));
  box_rows<<<grid, RR, smem, (cudaStream_t)stream>>>(in, out, nrows, X, n, left, mode, cval, w,
                                                     pitch);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_box_cols(const float *in, float *out, int64_t P, int64_t L, int64_t Q,
                                    int n, int64_t left, int mode, float cval, double w,
                                    void *stream) {
  if (P == 0 || L == 0 || Q == 0) return 0;
  /* a segment at least twice the box, so that its start's n reads are at most half its own */
  const int64_t S = 2 * (int64_t)n > 64 ? 2 * (int64_t)n : 64;
  const dim3 grid((unsigned)((Q + CQ - 1) / CQ), (unsigned)((L + S - 1) / S),
                  (unsigned)(P < 65535 ? P : 65535));
  box_cols<<<grid, CQ, 0, (cudaStream_t)stream>>>(in, out, P, L, Q, n, left, mode, cval, w, S);
  return (int)cudaGetLastError();
}
