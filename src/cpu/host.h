/* SPDX-License-Identifier: BSD-3-Clause */
/* host.h - what the CPU solvers share: their arrays to and from float32 C order. */
#ifndef NDF_CPU_HOST_H
#define NDF_CPU_HOST_H

#include <string.h>

#include "../core/elem.h"

/* ndf__to_<suffix>(a, f, threads): a (any dtype and strides) into the C-contiguous array f of
 * R, on `threads` threads; ndf__from_<suffix>(f, a, threads): back (integers rounded and
 * clamped). For float32 (f32) and float64 (f64). */
/* clang-format off */
#define NDF__HOST_CONVERT(R, SUF, DT)                                                              \
  static inline void ndf__to_##SUF(const ndf_array *a, R *f, int threads) {                        \
    const int64_t n = ndf_array_size(a);                                                           \
    if (a->dtype == DT && ndf__is_contiguous(a)) {                                                 \
      memcpy(f, a->data, (size_t)n * sizeof(R));                                                   \
      return;                                                                                      \
    }                                                                                              \
    _Pragma("omp parallel for num_threads(threads) schedule(static)")                              \
    for (int64_t i = 0; i < n; i++)                                                                \
      f[i] = (R)ndf__load(a->dtype, a->data, ndf__offset(a, i));                                   \
  }                                                                                                \
  static inline void ndf__from_##SUF(const R *f, ndf_array *a, int threads) {                      \
    const int64_t n = ndf_array_size(a);                                                           \
    if (a->dtype == DT && ndf__is_contiguous(a)) {                                                 \
      if (a->data != (const void *)f) memcpy(a->data, f, (size_t)n * sizeof(R));                   \
      return;                                                                                      \
    }                                                                                              \
    _Pragma("omp parallel for num_threads(threads) schedule(static)")                              \
    for (int64_t i = 0; i < n; i++)                                                                \
      ndf__store(a->dtype, a->data, ndf__offset(a, i), f[i]);                                      \
  }
/* clang-format on */
NDF__HOST_CONVERT(float, f32, NDF_F32)
NDF__HOST_CONVERT(double, f64, NDF_F64)

#endif
