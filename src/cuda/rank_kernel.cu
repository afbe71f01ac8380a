/* SPDX-License-Identifier: BSD-3-Clause */
/* rank_kernel.cu - cuda_rank: rank filters over a footprint, a thread an output. The thread
 * reads the footprint's samples (by offsets where the window lies inside the array, through
 * the modes near its edges) and keeps the smallest or largest as it goes (minimum, maximum),
 * selects the rank among them in local memory (up to 128 samples), or, for larger footprints,
 * finds it by bisection over the samples' order-preserving integer keys: a count of the samples
 * at or below the middle key per step (32 steps for float32, 64 for float64), so any footprint
 * runs in the same few registers. */
#include <stdint.h>

#include "../core/boundary.h"
#include "../core/select.h"
#include "common.cuh"

namespace {

template <typename T> struct rank_args {
  const T *in;
  T *out;
  int64_t n[4], left[4], k[4];
  int mode[4];
  T cval;
  const int64_t *off;       /* each sample's offset in in from the window's start */
  const int *at;            /* each sample's position in the window, four per sample */
  int count, rank, extreme; /* extreme: -1 minimum, +1 maximum, 0 selection */
};

template <typename T>
__device__ __forceinline__ T sample(const rank_args<T> &a, const int64_t c[4], int j) {
  int64_t o = 0, s = 1;
  for (int d = 3; d >= 0; d--) {
    const int64_t i = ndf__map_index(c[d] + a.at[4 * j + d] - a.left[d], a.n[d], a.mode[d]);
    if (i < 0) return a.cval;
    o += i * s;
    s *= a.n[d];
  }
  return a.in[o];
}

NDF__SELECT_RANK(select_rank, float, __device__)
NDF__SELECT_RANK(select_rank, double, __device__)

/* Keys that order as the floats do (-0 before +0, NaN past the infinities by sign). */
__device__ __forceinline__ uint32_t key_of(float x) {
  const uint32_t u = __float_as_uint(x);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ uint64_t key_of(double x) {
  const uint64_t u = (uint64_t)__double_as_longlong(x);
  return u & 0x8000000000000000ull ? ~u : u | 0x8000000000000000ull;
}
__device__ __forceinline__ float value_of(uint32_t k, float) {
  return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k);
}
__device__ __forceinline__ double value_of(uint64_t k, double) {
  return __longlong_as_double(
      (long long)(k & 0x8000000000000000ull ? k & 0x7fffffffffffffffull : ~k));
}

/* MAXN: 0 a running minimum or maximum, -1 bisection over keys, else a selection among at most
 * MAXN samples held in local memory. */
template <typename T, int MAXN> __global__ void rank_kernel(rank_args<T> a) {
  const int64_t total = a.n[0] * a.n[1] * a.n[2] * a.n[3];
  T v[MAXN > 0 ? MAXN : 1];
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t c[4], rest = t;
    for (int d = 3; d >= 0; d--) {
      c[d] = rest % a.n[d];
      rest /= a.n[d];
    }
    bool inside = true;
    int64_t base = 0;
    for (int d = 0; d < 4; d++) {
      const int64_t s = c[d] - a.left[d];
      inside = inside && s >= 0 && s + a.k[d] <= a.n[d];
      base = base * a.n[d] + s;
    }
    T r;
    if (MAXN == 0) { /* minimum or maximum: a running extreme */
      r = inside ? a.in[base + a.off[0]] : sample(a, c, 0);
      for (int j = 1; j < a.count; j++) {
        const T x = inside ? a.in[base + a.off[j]] : sample(a, c, j);
        r = a.extreme < 0 ? (x < r ? x : r) : (x > r ? x : r);
      }
    } else if (MAXN < 0) { /* the least key with more than `rank` samples at or below it */
      decltype(key_of(T())) lo = 0, hi = ~lo;
      while (lo < hi) {
        const auto mid = lo + (hi - lo) / 2;
        int below = 0;
        for (int j = 0; j < a.count; j++)
          below += key_of(inside ? a.in[base + a.off[j]] : sample(a, c, j)) <= mid;
        if (below > a.rank)
          hi = mid;
        else
          lo = mid + 1;
      }
      r = value_of(lo, T());
    } else {
      for (int j = 0; j < a.count; j++)
        v[j] = inside ? a.in[base + a.off[j]] : sample(a, c, j);
      r = select_rank(v, a.count, a.rank);
    }
    a.out[t] = r;
  }
}

template <typename T>
static int launch(const T *in, T *out, const int64_t n[4], const int64_t k[4],
                  const int64_t left[4], const int mode[4], double cval, const int64_t *off,
                  const int *at, int count, int rank, int extreme, cudaStream_t s) {
  rank_args<T> a;
  a.in = in;
  a.out = out;
  for (int d = 0; d < 4; d++) {
    a.n[d] = n[d];
    a.k[d] = k[d];
    a.left[d] = left[d];
    a.mode[d] = mode[d];
  }
  a.cval = (T)cval;
  a.off = off;
  a.at = at;
  a.count = count;
  a.rank = rank;
  a.extreme = extreme;
  const int64_t total = n[0] * n[1] * n[2] * n[3];
  if (total == 0) return 0;
  if (extreme)
    rank_kernel<T, 0><<<ndf__grid(total, 256), 256, 0, s>>>(a);
  else if (count <= 32)
    rank_kernel<T, 32><<<ndf__grid(total, 128), 128, 0, s>>>(a);
  else if (count <= 128)
    rank_kernel<T, 128><<<ndf__grid(total, 128), 128, 0, s>>>(a);
  else
    rank_kernel<T, -1><<<ndf__grid(total, 128), 128, 0, s>>>(a);
  return (int)cudaGetLastError();
}

} // namespace

extern "C" int ndf__launch_rank(const void *in, void *out, int f64, const int64_t n[4],
                                const int64_t k[4], const int64_t left[4], const int mode[4],
                                double cval, const int64_t *off, const int *at, int count, int rank,
                                int extreme, void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (f64)
    return launch((const double *)in, (double *)out, n, k, left, mode, cval, off, at, count, rank,
                  extreme, s);
  return launch((const float *)in, (float *)out, n, k, left, mode, cval, off, at, count, rank,
                extreme, s);
}
