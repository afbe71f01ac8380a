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
#include <string.h>

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
/* Compare-exchanges that keep the values as they are (a NaN stays one of them, as in the CPU's
 * networks), not fminf and fmaxf, which would drop it and count the other twice. */
#define KEEP_MIN(a, b) ((b) < (a) ? (b) : (a))
#define KEEP_MAX(a, b) ((b) < (a) ? (a) : (b))
NDF__FORGETFUL_MEDIAN(forgetful_median, float, __device__ __forceinline__, KEEP_MIN, KEEP_MAX,
                      _Pragma("unroll"))
NDF__FORGETFUL_MEDIAN(forgetful_median, double, __device__ __forceinline__, KEEP_MIN, KEEP_MAX,
                      _Pragma("unroll"))

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

/* median_tile: a block of 32 x 8 threads takes a tile of 32 x (8 py r) x pz outputs (x, y, z:
 * the view's last three axes; one index of the first), each thread py x pz of them (r = 1) or of
 * pairs of neighbours along y (r = 2), one column of the tile; the tile and its halo, sx x sy x
 * sz samples, lie in shared memory. A pair's windows share all but the samples along their y
 * edges (42 of 49 for 7 x 7, 100 of 125 for 5^3): the pair takes its common samples through
 * the selection's steps once, then each window goes on from that buffer with its own P. */
enum { MEDIAN_MAXN = 125, MEDIAN_MAXP = 25, MEDIAN_TX = 32, MEDIAN_TY = 8 };
static_assert(MEDIAN_MAXN + MEDIAN_MAXP == NDF__MEDIAN_OFFS, "the plan's offsets are the args'");

template <typename T> struct median_args {
  const T *in;
  T *out;
  int64_t n[4];
  int64_t left[4];
  int mode[4];
  T cval;
  int64_t tiles[3]; /* along x, y, z */
  int sx, sy, sz, py, pz;
  /* each sample's offset in the tile from its window's first: alone, off[0..N); in pairs, the
   * common ones off[0..N - P), the first window's own off[N - P..N), the second's (from the
   * first's window) off[N..N + P) */
  int off[MEDIAN_MAXN + MEDIAN_MAXP];
};

template <typename T, int N, int P>
__global__ void __launch_bounds__(MEDIAN_TX *MEDIAN_TY) median_tile(const median_args<T> a) {
  extern __shared__ __align__(16) unsigned char median_smem[];
  T *tile = reinterpret_cast<T *>(median_smem);
  constexpr int R = P ? 2 : 1, C = N - P;
  int64_t b = blockIdx.x;
  const int64_t x0 = b % a.tiles[0] * MEDIAN_TX;
  b /= a.tiles[0];
  const int64_t y0 = b % a.tiles[1] * (MEDIAN_TY * R * a.py);
  b /= a.tiles[1];
  const int64_t z0 = b % a.tiles[2] * a.pz;
  b /= a.tiles[2]; /* now the index along the first axis */
  const int64_t plane = a.n[1] * a.n[2] * a.n[3];
  const T *in = a.in + b * plane;
  const int t = threadIdx.y * MEDIAN_TX + threadIdx.x, size = a.sx * a.sy * a.sz;
  for (int i = t; i < size; i += MEDIAN_TX * MEDIAN_TY) {
    const int lx = i % a.sx, ly = i / a.sx % a.sy, lz = i / a.sx / a.sy;
    const int64_t x = ndf__map_index(x0 - a.left[3] + lx, a.n[3], a.mode[3]),
                  y = ndf__map_index(y0 - a.left[2] + ly, a.n[2], a.mode[2]),
                  z = ndf__map_index(z0 - a.left[1] + lz, a.n[1], a.mode[1]);
    tile[i] = x < 0 || y < 0 || z < 0 ? a.cval : in[(z * a.n[2] + y) * a.n[3] + x];
  }
  __syncthreads();
  const int64_t x = x0 + threadIdx.x;
  if (x >= a.n[3]) return;
  T *out = a.out + b * plane + x;
  for (int pz = 0; pz < a.pz; pz++) {
    const int64_t z = z0 + pz;
    if (z >= a.n[1]) break;
    for (int py = 0; py < a.py; py++) {
      const int ly = R * (threadIdx.y + MEDIAN_TY * py);
      const int64_t y = y0 + ly;
      if (y >= a.n[2]) break;
      const T *w = tile + (pz * a.sy + ly) * a.sx + threadIdx.x;
      T va[N];
      if constexpr (P == 0) {
#pragma unroll
        for (int j = 0; j < N; j++)
          va[j] = w[a.off[j]];
        out[(z * a.n[2] + y) * a.n[3]] = forgetful_median(va, N);
      } else {
        T vb[N];
#pragma unroll
        for (int j = 0; j < N; j++)
          va[j] = w[a.off[j]];
#pragma unroll
        for (int j = C; j < N; j++)
          vb[j] = w[a.off[j + P]];
        constexpr int top = NDF__FORGETFUL_TOP(N);
        forgetful_median_steps(va, N, top + 1, C);
#pragma unroll
        for (int j = 0; j <= 2 * top + 1 - C; j++)
          vb[j] = va[j];
        forgetful_median_steps(va, N, C, N);
        forgetful_median_steps(vb, N, C, N);
        out[(z * a.n[2] + y) * a.n[3]] = forgetful_median_finish(va, N);
        if (y + 1 < a.n[2]) out[(z * a.n[2] + y + 1) * a.n[3]] = forgetful_median_finish(vb, N);
      }
    }
  }
}

/* The tile for a box k (k[0] = 1) of T: 32 x (8 py r) x pz outputs, py up to 4 and pz up to 4
 * where the box spans z, within 48 KiB of shared memory; 0 if even one row of outputs does not
 * fit. */
template <typename T> static size_t median_geometry(const int64_t k[4], int r, int *py, int *pz) {
  for (*pz = k[1] > 1 ? 4 : 1; *pz >= 1; --*pz)
    for (*py = 4; *py >= 1; --*py) {
      const size_t bytes = (size_t)(MEDIAN_TX + k[3] - 1) *
                           (size_t)(MEDIAN_TY * r * *py + k[2] - 1) * (size_t)(*pz + k[1] - 1) *
                           sizeof(T);
      if (bytes <= 48 * 1024) return bytes;
    }
  return 0;
}

template <typename T, int N, int P>
static int median_launch(median_args<T> &a, size_t smem, int64_t blocks, cudaStream_t s) {
  median_tile<T, N, P><<<(unsigned)blocks, dim3(MEDIAN_TX, MEDIAN_TY), smem, s>>>(a);
  return (int)cudaGetLastError();
}

/* The counts median_tile is built for (a template instance each), alone and, with the samples
 * of a window's y edge (the boxes'), in pairs. */
#define MEDIAN_COUNTS(X) X(3) X(5) X(7) X(9) X(25) X(27) X(49) X(125)
#define MEDIAN_PAIRS(X) X(9, 3) X(25, 5) X(49, 7) X(27, 9) X(125, 25)

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

template <typename T>
static int median(const T *in, T *out, const int64_t n[4], const int64_t left[4], const int mode[4],
                  double cval, const ndf__median_tile *t, cudaStream_t s) {
  const int r = t->own ? 2 : 1;
  median_args<T> a;
  a.in = in;
  a.out = out;
  for (int d = 0; d < 4; d++) {
    a.n[d] = n[d];
    a.left[d] = left[d];
    a.mode[d] = mode[d];
  }
  a.cval = (T)cval;
  a.py = t->py;
  a.pz = t->pz;
  a.sx = t->sx;
  a.sy = t->sy;
  a.sz = t->sz;
  a.tiles[0] = (n[3] + MEDIAN_TX - 1) / MEDIAN_TX;
  a.tiles[1] = (n[2] + MEDIAN_TY * r * t->py - 1) / (MEDIAN_TY * r * t->py);
  a.tiles[2] = (n[1] + t->pz - 1) / t->pz;
  memcpy(a.off, t->off, sizeof a.off);
  const int64_t blocks = a.tiles[0] * a.tiles[1] * a.tiles[2] * n[0];
#define MEDIAN_PAIR_CASE(c, p)                                                                     \
  if (t->count == c && t->own == p) return median_launch<T, c, p>(a, t->smem, blocks, s);
  MEDIAN_PAIRS(MEDIAN_PAIR_CASE)
#undef MEDIAN_PAIR_CASE
  switch (t->count) {
#define MEDIAN_CASE(c)                                                                             \
  case c: return median_launch<T, c, 0>(a, t->smem, blocks, s);
    MEDIAN_COUNTS(MEDIAN_CASE)
#undef MEDIAN_CASE
  default: return (int)cudaErrorInvalidValue;
  }
}

} // namespace

extern "C" int ndf__median_tile_plan(ndf__median_tile *t, int f64, const int64_t n[4],
                                     const int64_t k[4], const int *at, int count, int rank,
                                     int pairs) {
  int counted = 0;
#define MEDIAN_IS(c) counted |= count == c;
  MEDIAN_COUNTS(MEDIAN_IS)
#undef MEDIAN_IS
  if (!counted || rank != count / 2 || k[0] != 1) return 0;
  int pos[MEDIAN_MAXN + MEDIAN_MAXP][3]; /* each sample's place (z, y, x) in its window */
  int own = pairs && at ? median_split(k, at, count, pos) : 0, py, pz;
  size_t smem = 0;
  if (own > 0) /* pairs where their tile fits, else the outputs alone */
    smem = f64 ? median_geometry<double>(k, 2, &py, &pz) : median_geometry<float>(k, 2, &py, &pz);
  if (!smem) {
    own = 0;
    smem = f64 ? median_geometry<double>(k, 1, &py, &pz) : median_geometry<float>(k, 1, &py, &pz);
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
    t->off[j] = (q[0] * t->sy + q[1]) * t->sx + q[2];
  }
  return 1;
}

extern "C" int ndf__launch_median_tile(const void *in, void *out, int f64, const int64_t n[4],
                                       const int64_t left[4], const int mode[4], double cval,
                                       const ndf__median_tile *t, void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (n[0] * n[1] * n[2] * n[3] == 0) return 0;
  if (f64) return median((const double *)in, (double *)out, n, left, mode, cval, t, s);
  return median((const float *)in, (float *)out, n, left, mode, cval, t, s);
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
