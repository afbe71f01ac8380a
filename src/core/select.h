/* SPDX-License-Identifier: BSD-3-Clause */
/* select.h - the value of rank r among v[0..n) (reordered): insertion sort for a few values,
 * Hoare's selection for more. One definition for the CPU's rank solver and the GPU's:
 * NDF__SELECT_RANK(name, type, qualifiers) defines `qualifiers type name(type *v, int64_t n,
 * int64_t r)`. */
#ifndef NDF_SELECT_H
#define NDF_SELECT_H

#include <stdint.h>

#define NDF__SELECT_RANK(name, T, Q)                                                               \
  Q T name(T *v, int64_t n, int64_t r) {                                                           \
    if (n <= 16) {                                                                                 \
      for (int64_t i = 1; i < n; i++) {                                                            \
        const T t = v[i];                                                                          \
        int64_t j = i;                                                                             \
        for (; j > 0 && v[j - 1] > t; j--)                                                         \
          v[j] = v[j - 1];                                                                         \
        v[j] = t;                                                                                  \
      }                                                                                            \
      return v[r];                                                                                 \
    }                                                                                              \
    int64_t lo = 0, hi = n - 1;                                                                    \
    while (hi > lo) {                                                                              \
      const T pivot = v[lo + (hi - lo) / 2];                                                       \
      int64_t i = lo, j = hi;                                                                      \
      while (i <= j) {                                                                             \
        while (v[i] < pivot)                                                                       \
          i++;                                                                                     \
        while (v[j] > pivot)                                                                       \
          j--;                                                                                     \
        if (i <= j) {                                                                              \
          const T t = v[i];                                                                        \
          v[i++] = v[j];                                                                           \
          v[j--] = t;                                                                              \
        }                                                                                          \
      }                                                                                            \
      if (r <= j)                                                                                  \
        hi = j;                                                                                    \
      else if (r >= i)                                                                             \
        lo = i;                                                                                    \
      else                                                                                         \
        return v[r];                                                                               \
    }                                                                                              \
    return v[r];                                                                                   \
  }

#endif
