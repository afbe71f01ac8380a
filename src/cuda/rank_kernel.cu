/* SPDX-License-Identifier: BSD-3-Clause */
/* rank_kernel.cu - cuda_rank: rank filters over a footprint, a thread an output. The thread
 * reads the footprint's samples (by offsets where the window lies inside the array, through
 * the modes near its edges) and keeps the smallest or largest as it goes (minimum, maximum),
 * selects the rank among them in local memory (up to 128 samples), or, for larger footprints,
 * finds it by bisection over the samples' order-preserving integer keys: a count of the samples
 * at or below the middle key per step (32 steps for float32, 64 for float64), so any footprint
 * runs in the same few registers.
 *
 * A median of a few samples (MEDIAN_COUNTS: the boxes 3 to 7 wide in 2-D, 3 and 5 in 3-D, and
 * any footprint of as many samples) goes to median_tile instead: a block copies its tile of
 * outputs and their halo into shared memory once, applying the modes there, and each thread
 * selects its outputs' medians in registers by forgetful selection (select.h), the footprint's
 * offsets in the tile being kernel parameters (constant memory, one broadcast a sample). */
#include <stdint.h>

#include "../core/boundary.h"
#include "../core/select.h"
#include "common.cuh"
#include "median_tile.cuh"

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
      decltype(ndf__key_of(T())) lo = 0, hi = ~lo;
      while (lo < hi) {
        const auto mid = lo + (hi - lo) / 2;
        int below = 0;
        for (int j = 0; j < a.count; j++)
          below += ndf__key_of(inside ? a.in[base + a.off[j]] : sample(a, c, j)) <= mid;
        if (below > a.rank)
          hi = mid;
        else
          lo = mid + 1;
      }
      r = ndf__value_of(lo, T());
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

/* The tile for a box k (k[0] = 1) of samples of esize bytes: 32 x (8 py r) x pz outputs, py up
 * to 4 and pz up to 4 where the box spans z, within 48 KiB of shared memory; 0 if even one row
 * of outputs does not fit. */
static size_t median_geometry(const int64_t k[4], int r, size_t esize, int *py, int *pz) {
  for (*pz = k[1] > 1 ? 4 : 1; *pz >= 1; --*pz)
    for (*py = 4; *py >= 1; --*py) {
      const size_t bytes = (size_t)(MEDIAN_TX + k[3] - 1) *
                           (size_t)(MEDIAN_TY * r * *py + k[2] - 1) * (size_t)(*pz + k[1] - 1) *
                           esize;
      if (bytes <= 48 * 1024) return bytes;
    }
  return 0;
}

/* Splits the footprint (count samples at at[4j..4j+3] in the box k) for pairs of neighbours
 * along y: the samples both windows hold (those with a footprint sample before them along y),
 * the first window's own (none before them) and the second's (none after them, one row down),
 * as positions (z, y, x) in the first window's box extended by a row. Returns the count of
 * each window's own, or -1 where the footprint is not one of MEDIAN_PAIRS' or the common samples
 * would not fill the selection's buffer. */
static int median_split(const int64_t k[4], const int *at, int count, int pos[][3]) {
  unsigned char in[MEDIAN_MAXN * 8] = {0}; /* the footprint over the box, (z, y, x) */
  const int64_t size = k[1] * k[2] * k[3];
  if (size > (int64_t)sizeof in) return -1;
  for (int j = 0; j < count; j++)
    in[(at[4 * j + 1] * k[2] + at[4 * j + 2]) * k[3] + at[4 * j + 3]] = 1;
  int nc = 0, na = 0, nb = 0; /* common, the first's own, the second's own */
  int own_a[MEDIAN_MAXP][3], own_b[MEDIAN_MAXP][3];
  for (int j = 0; j < count; j++) {
    const int z = at[4 * j + 1], y = at[4 * j + 2], xx = at[4 * j + 3];
    const int before = y > 0 && in[(z * k[2] + y - 1) * k[3] + xx],
              after = y + 1 < k[2] && in[(z * k[2] + y + 1) * k[3] + xx];
    if (before) {
      pos[nc][0] = z, pos[nc][1] = y, pos[nc][2] = xx;
      nc++;
    } else {
      if (na < MEDIAN_MAXP) own_a[na][0] = z, own_a[na][1] = y, own_a[na][2] = xx;
      na++;
    }
    if (!after) {
      if (nb < MEDIAN_MAXP) own_b[nb][0] = z, own_b[nb][1] = y + 1, own_b[nb][2] = xx;
      nb++;
    }
  }
  const int np = na; /* as many as nb: each column's runs start and end alike */
  int known = 0;
#define MEDIAN_IS_PAIR(n, p) known |= count == n && np == p;
  MEDIAN_PAIRS(MEDIAN_IS_PAIR)
#undef MEDIAN_IS_PAIR
  if (!known || na != nb || nc < count / 2 + 2) return -1;
  for (int j = 0; j < np; j++)
    for (int d = 0; d < 3; d++) {
      pos[nc + j][d] = own_a[j][d];
      pos[count + j][d] = own_b[j][d];
    }
  return np;
}

} // namespace

extern "C" int ndf__median_tile_plan(ndf__median_tile *t, int esize, const int64_t n[4],
                                     const int64_t k[4], const int *at, int count, int rank,
                                     int pairs) {
  int counted = 0;
#define MEDIAN_IS(c) counted |= count == c;
  MEDIAN_COUNTS(MEDIAN_IS)
#undef MEDIAN_IS
  if (!counted || rank != count / 2 || k[0] != 1 || n[1] >= (1 << 30) || n[2] >= (1 << 30) ||
      n[3] >= (1 << 30))
    return 0;
  int pos[MEDIAN_MAXN + MEDIAN_MAXP][3]; /* each sample's place (z, y, x) in its window */
  int own = pairs && at ? median_split(k, at, count, pos) : 0, py, pz;
  size_t smem = 0;
  if (own > 0) /* pairs where their tile fits, else the outputs alone */
    smem = median_geometry(k, 2, (size_t)esize, &py, &pz);
  if (!smem) {
    own = 0;
    smem = median_geometry(k, 1, (size_t)esize, &py, &pz);
  }
  const int r = own ? 2 : 1;
  const int64_t blocks = (n[3] + MEDIAN_TX - 1) / MEDIAN_TX *
                         ((n[2] + MEDIAN_TY * r * py - 1) / (MEDIAN_TY * r * py)) * n[1] * n[0];
  if (!smem || blocks >= INT32_MAX) return 0;
  if (!at) return 1;
  t->count = count;
  t->own = own;
  t->py = py;
  t->pz = pz;
  t->sx = (int)(MEDIAN_TX + k[3] - 1);
  t->sy = (int)(MEDIAN_TY * r * py + k[2] - 1);
  t->sz = (int)(pz + k[1] - 1);
  t->smem = smem;
  for (int j = 0; j < count + own; j++) {
    const int *q = own ? pos[j] : at + 4 * j + 1;
    t->off[j] = ((q[0] * t->sy + q[1]) * t->sx + q[2]) * esize;
  }
  return 1;
}

extern "C" int ndf__launch_median_tile(const void *in, void *out, int dtype, const int64_t n[4],
                                       const int64_t left[4], const int mode[4], double cval,
                                       const ndf__median_tile *t, void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (n[0] * n[1] * n[2] * n[3] == 0) return 0;
  switch (dtype) {
  case NDF_F32: return median((const float *)in, (float *)out, n, left, mode, cval, t, s);
  case NDF_F64: return median((const double *)in, (double *)out, n, left, mode, cval, t, s);
  default: return ndf__launch_median_tile_int(in, out, dtype, n, left, mode, cval, t, stream);
  }
}

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
