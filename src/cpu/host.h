/* SPDX-License-Identifier: BSD-3-Clause */
/* host.h - what the CPU solvers share: their arrays to and from float32 C order. */
#ifndef NDF_CPU_HOST_H
#define NDF_CPU_HOST_H

#include <string.h>

#include "../core/elem.h"

/* a (any dtype and strides) into the C-contiguous float32 f, on `threads` threads. */
static inline void ndf__to_f32(const ndf_array *a, float *f, int threads) {
  const int64_t n = ndf_array_size(a);
  if (a->dtype == NDF_F32 && ndf__is_contiguous(a)) {
    memcpy(f, a->data, (size_t)n * sizeof(float));
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; i++)
    f[i] = (float)ndf__load(a->dtype, a->data, ndf__offset(a, i));
}

/* The C-contiguous float32 f into a (any dtype and strides; integers rounded and clamped). */
static inline void ndf__from_f32(const float *f, ndf_array *a, int threads) {
  const int64_t n = ndf_array_size(a);
  if (a->dtype == NDF_F32 && ndf__is_contiguous(a)) {
    if (a->data != (const void *)f) memcpy(a->data, f, (size_t)n * sizeof(float));
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; i++)
    ndf__store(a->dtype, a->data, ndf__offset(a, i), f[i]);
}

#endif
