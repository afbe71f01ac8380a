/* SPDX-License-Identifier: BSD-3-Clause */
/* elem.h - element load/store with dtype conversion, shared by CPU code. */
#ifndef NDF_ELEM_H
#define NDF_ELEM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ndf.h"

static inline double ndf__load(ndf_dtype t, const void *base, int64_t i) {
  switch (t) {
  case NDF_U8: return ((const uint8_t *)base)[i];
  case NDF_U16: return ((const uint16_t *)base)[i];
  case NDF_I16: return ((const int16_t *)base)[i];
  case NDF_F32: return ((const float *)base)[i];
  case NDF_F64: return ((const double *)base)[i];
  }
  return 0;
}

/* Integers: round half to even, clamp to the type's range, NaN to 0. */
static inline double ndf__round_clamp(double v, double lo, double hi) {
  if (!(v == v)) return 0;
  v = nearbyint(v);
  return v < lo ? lo : v > hi ? hi : v;
}

static inline void ndf__store(ndf_dtype t, void *base, int64_t i, double v) {
  switch (t) {
  case NDF_U8: ((uint8_t *)base)[i] = (uint8_t)ndf__round_clamp(v, 0, 255); break;
  case NDF_U16: ((uint16_t *)base)[i] = (uint16_t)ndf__round_clamp(v, 0, 65535); break;
  case NDF_I16: ((int16_t *)base)[i] = (int16_t)ndf__round_clamp(v, -32768, 32767); break;
  case NDF_F32: ((float *)base)[i] = (float)v; break;
  case NDF_F64: ((double *)base)[i] = v; break;
  }
}

/* 1 if a's strides are C-contiguous (extent-1 axes may have any stride). */
static inline int ndf__is_contiguous(const ndf_array *a) {
  int64_t s = 1;
  for (int d = a->ndim - 1; d >= 0; d--) {
    if (a->shape[d] > 1 && a->strides[d] != s) return 0;
    s *= a->shape[d];
  }
  return 1;
}

/* 1 if the float32 (float64) at p is NaN or infinite, by its exponent bits (no floating-point
 * comparison for the compiler to fold under fast math; vectorises). */
static inline int ndf__f32_nonfinite(const float *p) {
  uint32_t u;
  memcpy(&u, p, sizeof u);
  return (u & 0x7f800000u) == 0x7f800000u;
}
static inline int ndf__f64_nonfinite(const double *p) {
  uint64_t u;
  memcpy(&u, p, sizeof u);
  return (u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
}

/* Element offsets of an array in C order from a start, advanced one element at a time: a walk
 * over a strided view without a division per element (ndf__offset's). */
typedef struct ndf__walker {
  int64_t idx[NDF_MAX_DIMS], off;
} ndf__walker;

static inline void ndf__walk_at(ndf__walker *w, const ndf_array *a, int64_t i) {
  w->off = 0;
  for (int d = a->ndim - 1; d >= 0; d--) {
    w->idx[d] = i % a->shape[d];
    i /= a->shape[d];
    w->off += w->idx[d] * a->strides[d];
  }
}

static inline void ndf__walk_next(ndf__walker *w, const ndf_array *a) {
  for (int d = a->ndim - 1; d >= 0; d--) {
    w->off += a->strides[d];
    if (++w->idx[d] < a->shape[d]) return;
    w->off -= a->strides[d] * a->shape[d];
    w->idx[d] = 0;
  }
}

/* Offset in elements of the n-th element (C order) of array a. */
static inline int64_t ndf__offset(const ndf_array *a, int64_t n) {
  int64_t off = 0;
  for (int d = a->ndim - 1; d >= 0; d--) {
    int64_t c = n % a->shape[d];
    n /= a->shape[d];
    off += c * a->strides[d];
  }
  return off;
}

#endif /* NDF_ELEM_H */
