/* SPDX-License-Identifier: BSD-3-Clause */
/* common.cuh - device helpers shared by the kernels. */
#ifndef NDF_CUDA_COMMON_CUH
#define NDF_CUDA_COMMON_CUH

#include <stdint.h>

#include "../core/boundary.h"
#include "launch.h"

/* Offset of the n-th element (C order) of a 4-D view; c gets the coordinates. */
__device__ __forceinline__ int64_t ndf__voff(const ndf__view4 &v, int64_t n, int64_t c[4]) {
  int64_t off = 0;
  for (int d = 3; d >= 0; d--) {
    c[d] = n % v.shape[d];
    n /= v.shape[d];
    off += c[d] * v.strides[d];
  }
  return off;
}

__device__ __forceinline__ int64_t ndf__vsize(const ndf__view4 &v) {
  return v.shape[0] * v.shape[1] * v.shape[2] * v.shape[3];
}

/* Sample i of the line of L samples at in + base, Q apart, through the mode (cval past the ends
 * under constant); read through the read-only cache. */
template <typename T>
__device__ __forceinline__ T ndf__line_at(const T *in, int64_t base, int64_t L, int64_t Q,
                                          int64_t i, int mode, T cval) {
  const int64_t m = ndf__map_index(i, L, mode);
  return m < 0 ? cval : __ldg(in + base + m * Q);
}

/* Keys that order as the floats do: unsigned integers, -0 just below +0, and every NaN's sign
 * cleared first, so that its key lies above +Inf's (a NaN stays one of the values and sorts
 * last, where numpy's sort puts it, whatever its sign bit). ndf__value_of turns a key back (a
 * NaN with its sign cleared). */
__device__ __forceinline__ uint32_t ndf__key_of(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) u &= 0x7fffffffu;
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ uint64_t ndf__key_of(double x) {
  uint64_t u = (uint64_t)__double_as_longlong(x);
  if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) u &= 0x7fffffffffffffffull;
  return u & 0x8000000000000000ull ? ~u : u | 0x8000000000000000ull;
}
__device__ __forceinline__ float ndf__value_of(uint32_t k, float) {
  return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k);
}
__device__ __forceinline__ double ndf__value_of(uint64_t k, double) {
  return __longlong_as_double(
      (long long)(k & 0x8000000000000000ull ? k & 0x7fffffffffffffffull : ~k));
}

/* Grid for a grid-stride loop over n items. */
static inline unsigned ndf__grid(int64_t n, int block) {
  int64_t g = (n + block - 1) / block;
  return (unsigned)(g > 65535 * 16 ? 65535 * 16 : g);
}

#endif
