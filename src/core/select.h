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

/* The median of v[0..n) as scipy defines it (rank n/2, the upper one for even n), reordering v:
 * forgetful selection, for a GPU thread's registers (every index a constant once n is and the
 * loops are unrolled). A buffer of m = n/2 + 2 values holds at least m - 1 above its least
 * value and m - 1 below its largest, so neither is the median (rank n/2 of n); both leave, and
 * the median is of rank one less among the n - 2 others. The next sample takes their place, so
 * the buffer shrinks by one a sample read; the last 3 (odd n) or 4 (even) are sorted. A step
 * sorts the buffer's pairs (v[0], v[1]), (v[2], v[3]), ..., then moves the least of the lows
 * to v[0] and the largest of the highs to v[hi] (an odd one out, v[hi], in both): 3 m / 2
 * compare-exchanges, about (3/16) n^2 for the median. Q: qualifiers; MIN and MAX: the
 * comparisons; UNROLL: what precedes each loop (CUDA's _Pragma("unroll"), or nothing).
 *
 * Defines name(v, n), and its parts for outputs that share samples, with NDF__FORGETFUL_TOP(n)
 * the buffer's last index before the first step (the buffer is v[0..top]): name_steps(v, n,
 * from, to), the steps that read v[from..to) (from > top; after reading v[s - 1] the buffer is
 * v[0..2 top + 1 - s]); name_finish(v, n), the median once every sample is read. Two windows whose
 * first c samples (c > top) are the same and in the same order share the steps up to c: then only
 * the buffer, v[0..2 top + 1 - c], goes on with each window's own samples. */
#define NDF__FORGETFUL_TOP(n) ((n) / 2 + 1 < (n)-1 ? (n) / 2 + 1 : (n)-1)
#define NDF__FORGETFUL_MEDIAN(name, T, Q, MIN, MAX, UNROLL)                                        \
  Q void name##_steps(T *v, const int n, const int from, const int to) {                           \
    const int top = NDF__FORGETFUL_TOP(n);                                                         \
    UNROLL for (int s = from; s < to; s++) {                                                       \
      const int hi = 2 * top + 1 - s;               /* the buffer before this step: v[0..hi] */    \
      UNROLL for (int i = 0; i + 1 <= hi; i += 2) { /* lows at even, highs at odd indices */       \
        const T a = v[i], b = v[i + 1];                                                            \
        v[i] = MIN(a, b);                                                                          \
        v[i + 1] = MAX(a, b);                                                                      \
      }                                                                                            \
      UNROLL for (int i = 2; i <= hi; i += 2) { /* the least to v[0] */                            \
        const T a = v[0], b = v[i];                                                                \
        v[0] = MIN(a, b);                                                                          \
        v[i] = MAX(a, b);                                                                          \
      }                                                                                            \
      UNROLL for (int i = 1; i < hi; i += 2) { /* the largest to v[hi] */                          \
        const T a = v[i], b = v[hi];                                                               \
        v[i] = MIN(a, b);                                                                          \
        v[hi] = MAX(a, b);                                                                         \
      }                                                                                            \
      v[0] = v[s];                                                                                 \
    }                                                                                              \
  }                                                                                                \
  Q T name##_finish(T *v, const int n) {                                                           \
    const int top = NDF__FORGETFUL_TOP(n), steps = n - 1 - top, hi = top - steps;                  \
    UNROLL for (int i = 0; i < hi; i++) /* sort the last ones */                                   \
        UNROLL for (int j = 0; j < hi - i; j++) {                                                  \
      const T a = v[j], b = v[j + 1];                                                              \
      v[j] = MIN(a, b);                                                                            \
      v[j + 1] = MAX(a, b);                                                                        \
    }                                                                                              \
    return v[n / 2 - steps];                                                                       \
  }                                                                                                \
  Q T name(T *v, const int n) {                                                                    \
    name##_steps(v, n, NDF__FORGETFUL_TOP(n) + 1, n);                                              \
    return name##_finish(v, n);                                                                    \
  }

#endif
