/* SPDX-License-Identifier: BSD-3-Clause */
/* median_tile.cuh - cuda_rank's median of a few samples (median_tile), its arguments and its
 * launch over the sample types: included by rank_kernel.cu (float32, float64, and the tile's
 * plan) and median_int_kernel.cu (uint8, uint16, int16: the samples as they are, no float32
 * staging), so the instances compile side by side. */
#ifndef NDF_MEDIAN_TILE_CUH
#define NDF_MEDIAN_TILE_CUH
#include <stdint.h>
#include <string.h>

#include "../core/select.h"
#include "common.cuh"
#include "ndf.h"

namespace {

/* Compare-exchanges that keep the values as they are (a NaN stays one of them, as in the CPU's
 * networks), not fminf and fmaxf, which would drop it and count the other twice. */
#define KEEP_MIN(a, b) ((b) < (a) ? (b) : (a))
#define KEEP_MAX(a, b) ((b) < (a) ? (a) : (b))
NDF__FORGETFUL_MEDIAN(forgetful_median, double, __device__ __forceinline__, KEEP_MIN, KEEP_MAX,
                      _Pragma("unroll"))
NDF__FORGETFUL_MEDIAN(forgetful_median, int, __device__ __forceinline__, KEEP_MIN, KEEP_MAX,
                      _Pragma("unroll"))

/* A sample type's tile (store) and selection (type) forms: key() on staging, value() on the way
 * out. The narrow integers select in 32-bit lanes, which would otherwise be widened again at each
 * compare-exchange (and spill the larger selections). float32 is staged and selected as its
 * order-preserving keys (ndf__key_of, common.cuh; its top bit flipped, so that they order as
 * signed integers), so that a compare-exchange is an integer minimum and maximum, one
 * instruction each, where float's keeps a NaN by a comparison and two selects. */
template <typename T> struct lane {
  using type = T;
  using store = T;
  static __device__ __forceinline__ T key(T x) { return x; }
  static __device__ __forceinline__ T value(T v) { return v; }
};
template <typename T> struct narrow {
  using type = int;
  using store = T;
  static __device__ __forceinline__ T key(T x) { return x; }
  static __device__ __forceinline__ T value(int v) { return (T)v; }
};
template <> struct lane<uint8_t> : narrow<uint8_t> {};
template <> struct lane<uint16_t> : narrow<uint16_t> {};
template <> struct lane<int16_t> : narrow<int16_t> {};
template <> struct lane<float> {
  using type = int;
  using store = int;
  static __device__ __forceinline__ int key(float x) { return (int)(ndf__key_of(x) ^ 0x80000000u); }
  static __device__ __forceinline__ float value(int k) {
    return ndf__value_of((uint32_t)k ^ 0x80000000u, 0.f);
  }
};

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
  /* each sample's offset in the tile from its window's first, in bytes: alone, off[0..N); in
   * pairs, the common ones off[0..N - P), the first window's own off[N - P..N), the second's
   * (from the first's window) off[N..N + P) */
  int off[MEDIAN_MAXN + MEDIAN_MAXP];
};

/* An index within the array's extent n (< 2^30) through the mode; past it, -1 under constant. */
__device__ __forceinline__ int tile_map(int i, int n, int mode) {
  return (unsigned)i < (unsigned)n ? i : (int)ndf__map_index(i, n, mode);
}

template <typename T, int N, int P>
__global__ void __launch_bounds__(MEDIAN_TX *MEDIAN_TY) median_tile(const median_args<T> a) {
  extern __shared__ __align__(16) unsigned char median_smem[];
  using S = typename lane<T>::store;
  using V = typename lane<T>::type;
  S *tile = reinterpret_cast<S *>(median_smem);
  const S cval = lane<T>::key(a.cval);
  constexpr int R = P ? 2 : 1, C = N - P;
  /* the last three extents are below 2^30 (the plan's condition): coordinates within a volume in
   * 32 bits, offsets in 64 */
  const int nx = (int)a.n[3], ny = (int)a.n[2], nz = (int)a.n[1];
  int64_t b = blockIdx.x;
  const int x0 = (int)(b % a.tiles[0]) * MEDIAN_TX;
  b /= a.tiles[0];
  const int y0 = (int)(b % a.tiles[1]) * (MEDIAN_TY * R * a.py);
  b /= a.tiles[1];
  const int z0 = (int)(b % a.tiles[2]) * a.pz;
  b /= a.tiles[2]; /* now the index along the first axis */
  const int64_t slab = (int64_t)ny * nx, plane = nz * slab;
  const T *in = a.in + b * plane;
  /* The tile row by row, a warp a row: its y and z mapped through the modes once, the lanes
   * along x. A lane's first two x (sx >= 32; the second -2 where past sx) are mapped once for
   * all rows; x past 64 (footprints over 33 wide) are mapped in each row. */
  const int tx = threadIdx.x, left_x = (int)a.left[3];
  const int xa = tile_map(x0 - left_x + tx, nx, a.mode[3]),
            xb = tx + MEDIAN_TX < a.sx ? tile_map(x0 - left_x + tx + MEDIAN_TX, nx, a.mode[3]) : -2;
  for (int lz = 0; lz < a.sz; lz++) {
    const int z = tile_map(z0 - (int)a.left[1] + lz, nz, a.mode[1]);
    const T *zin = in + (z < 0 ? 0 : z * slab);
    for (int ly = threadIdx.y; ly < a.sy; ly += MEDIAN_TY) {
      const int y = tile_map(y0 - (int)a.left[2] + ly, ny, a.mode[2]);
      const bool gone = z < 0 || y < 0; /* a row of cval */
      const T *row = zin + (gone ? 0 : (int64_t)y * nx);
      S *srow = tile + (lz * a.sy + ly) * a.sx;
      srow[tx] = gone || xa < 0 ? cval : lane<T>::key(row[xa]);
      if (xb != -2) srow[tx + MEDIAN_TX] = gone || xb < 0 ? cval : lane<T>::key(row[xb]);
      for (int lx = tx + 2 * MEDIAN_TX; lx < a.sx; lx += MEDIAN_TX) {
        const int x = tile_map(x0 - left_x + lx, nx, a.mode[3]);
        srow[lx] = gone || x < 0 ? cval : lane<T>::key(row[x]);
      }
    }
  }
  __syncthreads();
  const int x = x0 + threadIdx.x;
  if (x >= nx) return;
  T *out = a.out + b * plane + x;
  const unsigned char *base = reinterpret_cast<const unsigned char *>(tile);
  for (int pz = 0; pz < a.pz; pz++) {
    const int z = z0 + pz;
    if (z >= nz) break;
    for (int py = 0; py < a.py; py++) {
      const int ly = R * (threadIdx.y + MEDIAN_TY * py);
      const int y = y0 + ly;
      if (y >= ny) break;
      const unsigned char *w = base + ((pz * a.sy + ly) * a.sx + threadIdx.x) * (int)sizeof(S);
      T *o = out + z * slab + (int64_t)y * nx;
      V va[N];
#pragma unroll
      for (int j = 0; j < N; j++)
        va[j] = *reinterpret_cast<const S *>(w + a.off[j]);
      if constexpr (P == 0) {
        *o = lane<T>::value(forgetful_median(va, N));
      } else {
        V vb[N];
#pragma unroll
        for (int j = C; j < N; j++)
          vb[j] = *reinterpret_cast<const S *>(w + a.off[j + P]);
        constexpr int top = NDF__FORGETFUL_TOP(N);
        forgetful_median_steps(va, N, top + 1, C);
#pragma unroll
        for (int j = 0; j <= 2 * top + 1 - C; j++)
          vb[j] = va[j];
        forgetful_median_steps(va, N, C, N);
        forgetful_median_steps(vb, N, C, N);
        *o = lane<T>::value(forgetful_median_finish(va, N));
        if (y + 1 < ny) o[nx] = lane<T>::value(forgetful_median_finish(vb, N));
      }
    }
  }
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

#endif
