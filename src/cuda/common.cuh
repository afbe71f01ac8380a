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

/* Grid for a grid-stride loop over n items. */
static inline unsigned ndf__grid(int64_t n, int block) {
  int64_t g = (n + block - 1) / block;
  return (unsigned)(g > 65535 * 16 ? 65535 * 16 : g);
}

#endif
