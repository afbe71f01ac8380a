/* SPDX-License-Identifier: BSD-3-Clause */
/* boundary.h - scipy.ndimage boundary modes as an index map, for host and device code. */
#ifndef NDF_BOUNDARY_H
#define NDF_BOUNDARY_H

#include <stdint.h>

#include "ndf.h"

#ifdef __CUDACC__
#define NDF_HD static __host__ __device__ __forceinline__
#else
#define NDF_HD static inline
#endif

/* Maps any integer i to an index in [0, n) by the mode's extension, or -1
 * where the value is cval (constant mode). Extensions longer than n repeat
 * the pattern, as scipy does. */
NDF_HD int64_t ndf__map_index(int64_t i, int64_t n, int mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
  case NDF_MODE_NEAREST: return i < 0 ? 0 : n - 1;
  case NDF_MODE_WRAP: {
    int64_t m = i % n;
    return m < 0 ? m + n : m;
  }
  case NDF_MODE_REFLECT: {
    int64_t p = 2 * n, m = i % p;
    if (m < 0) m += p;
    return m < n ? m : p - 1 - m;
  }
  case NDF_MODE_MIRROR: {
    if (n == 1) return 0;
    int64_t p = 2 * n - 2, m = i % p;
    if (m < 0) m += p;
    return m < n ? m : p - m;
  }
  default: return -1; /* constant */
  }
}

#endif /* NDF_BOUNDARY_H */
