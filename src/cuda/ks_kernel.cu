// SPDX-License-Identifier: BSD-3-Clause
// ks_kernel.cu - the scatters of kernel superposition (ndf.h, "ks", Eq. 2a) on the GPU: the
// five variants of da Silva, Ansorge and Jena (Algorithm 1) and a sixth, over arrays seen as 3-D
// [z][y][x]. The gathers are in ks_gather_kernel.cu.
//
// Every kernel evaluates Eq. 4 in float32 by core/ks_weight.h, with the radius r of each pixel
// and axis precomputed in float64 (so the cut-off is the reference's exactly) and normalize's
// scale likewise (ks_prep_kernel.cu). A pixel's weights along x (and y, for the radii held in
// registers) come all at once from ndf__ks_weights, one erfcf each; where one sigma map serves
// y and x, the y weights are the x weights.
//
// ks_scatter<RM, V, TYT, BY>: a block of 32 x BY threads takes a tile of 32 x TYT pixels of one
// input slice (the paper's t_x = b_x = 32, t_y, b_y), each thread TYT / BY pixels, BY rows
// apart. RM (0, 1, 2, 4, 8, 16, 32) bounds the radii of the tile's pixels (blocks are launched
// grouped by it, from lists made on the device; a pixel's own r still cuts its kernel). Each thread
// makes a pixel's 1-D kernels once and adds I * kz * ky * kx over its neighbourhood: into the
// output directly with atomics (V = global atomics), or into a shared tile with a 2 RM halo,
// one z offset at a time (the paper's split of 3-D into 2-D problems), then added to the output
// with atomics. In the shared tile, for a fixed (y, x) offset every thread writes its own
// element; between offsets the variants differ:
//   shared atomics: atomicAdd, no ordering needed;
//   sync: __syncthreads() after every offset;
//   threadfence: the paper's __threadfence_block() after every x offset, which since Volta
//     orders memory but does not keep a warp's lanes together, so __syncwarp() as well;
//     __syncthreads() after every y offset;
//   warpsync: the paper's volatile warp-synchronous version made correct: the lanes of a warp
//     write one row, a step apart, with __syncwarp() between x offsets (the ordering lock-step
//     execution used to give), __syncthreads() after every y offset so that the warps, a row
//     each, never meet;
//   shuffle: a warp adds a whole output row in registers before touching shared memory. For an
//     x offset d each lane makes v = I kz ky kx[d] and passes it d lanes on, both ways, with
//     __shfl_sync; lane l collects what lands at x0 + l, or, when the shift wrapped, at x0 + l
//     +- 32, in three registers (left, middle, right of its tile row), which are added to the
//     shared row once per y offset, the warps' rows apart as in warpsync. One shuffle a tap
//     instead of a shared load and store, and the loops end at the warp's (x) and block's (y)
//     largest radius rather than RM.
// Blocks whose pixels are all zero return at once (__syncthreads_or), as do z offsets where
// every weight is zero. The global atomics make the order of additions, and so the last bits,
// vary between runs.
//
// ks_scatter_big: pixels with radii above 32 (any radius), one per thread, straight to the
// output with atomics; the y weights 32 at a time in registers, each x weight made once per 32
// rows. Slow, but the paper's kernels never reach it.
#include <cuda_runtime.h>

#include <stdint.h>

#include "../core/ks_weight.h"
#include "launch.h"

namespace {

constexpr int TX = 32;
constexpr unsigned FULL = 0xffffffffu;

// The tile of id t (x fastest, then y, then z) of tw x ty pixels over an input of shape n.
struct tile_at {
  int64_t z, y0, x0;
  __device__ tile_at(const ndf__ks_geom &g, int t, int ty, int tw = TX) {
    const int64_t ntx = (g.n[2] + tw - 1) / tw, nty = (g.n[1] + ty - 1) / ty;
    z = t / (ntx * nty);
    y0 = (t / ntx) % nty * ty;
    x0 = t % ntx * tw;
  }
};

// Whether the block has no tile of the list (its count first), or the maps were bad.
__device__ __forceinline__ bool done(const ndf__ks_geom &g, const int *__restrict__ tiles) {
  return (int)blockIdx.x >= tiles[0] || *g.bad != 0;
}

// A pixel's sigma, scale and radius on axis a (0, 1, 1 for none or an axis of length 1).
struct pix {
  float s[3], sc[3];
  int r[3];
  __device__ void load(const ndf__ks_geom &g, const float *__restrict__ sig,
                       const int *__restrict__ rad, int64_t q, bool live) {
    const int64_t n = g.n[0] * g.n[1] * g.n[2];
    for (int a = 0; a < 3; a++) {
      const bool has = live && g.smap[a] >= 0;
      s[a] = has ? sig[g.smap[a] * n + q] : 0.f;
      sc[a] = has ? sig[g.nmap + g.smap[a] * n + q] : 1.f;
      r[a] = has ? rad[g.smap[a] * n + q] : 0;
    }
  }
  __device__ float w(int a, int d) const { return ndf__ks_weight(d, s[a], r[a], sc[a]); }
  // All N weights along axis a at once (one erfcf each, ks_weight.h).
  template <int N> __device__ void ws(int a, float (&k)[N]) const {
    ndf__ks_weights(s[a], r[a], sc[a], N, k);
  }
};

// Adds a block's shared tile (h x w, its corner at input (y0, x0)) to the output plane with
// atomics (neighbouring tiles' halos overlap), then waits for the block.
__device__ __forceinline__ void flush(const float *acc, int h, int w, int64_t y0, int64_t x0,
                                      const ndf__ks_geom &g, float *plane, int tid, int nt) {
  for (int i = tid; i < h * w; i += nt) {
    const float v = acc[i];
    const int64_t py = y0 + i / w + g.off[1], px = x0 + i % w + g.off[2];
    if (v != 0.f && py >= 0 && py < g.m[1] && px >= 0 && px < g.m[2])
      atomicAdd(plane + py * g.m[2] + px, v);
  }
  __syncthreads();
}

// Lane l's share of a row: b * kx[|dx|] of every lane's pixel, dx in [-wr, wr], added to the
// shared row (column 0 at x0 - RM) at x0 + l and, where shifts wrapped, x0 + l +- 32.
template <int RM>
__device__ __forceinline__ void row_shuffle(float b, const float (&kx)[RM + 1], int wr, float *row,
                                            int l) {
  float left = 0.f, mid = b * kx[0], right = 0.f;
#pragma unroll
  for (int d = 1; d <= RM; d++) {
    if (d > wr) break;
    const float v = b * kx[d];
    const float up = __shfl_sync(FULL, v, (l - d) & 31), down = __shfl_sync(FULL, v, (l + d) & 31);
    if (l >= d)
      mid += up;
    else
      right += up;
    if (l + d < 32)
      mid += down;
    else
      left += down;
  }
  row[RM + l] += mid;
  if (RM > 0 && l >= 32 - RM) row[RM + l - 32] += left;
  if (RM > 0 && l < RM) row[RM + l + 32] += right;
}

template <int RM, int V, int TYT, int BY>
__global__ void __launch_bounds__(TX *BY)
    ks_scatter(const float *__restrict__ in, float *out, const float *__restrict__ sig,
               const int *__restrict__ rad, ndf__ks_geom g, const int *__restrict__ tiles) {
  constexpr int W = TX + 2 * RM, H = TYT + 2 * RM, PP = TYT / BY;
  __shared__ float acc[V == NDF__KS_GLOBAL_ATOMIC ? 1 : H * W];
  __shared__ int rb[3]; // shuffle: the block's largest radii
  if (done(g, tiles)) return;
  const tile_at t(g, tiles[1 + blockIdx.x], TYT);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x = t.x0 + tx;
  float im[PP];
  bool any = false;
#pragma unroll
  for (int k = 0; k < PP; k++) {
    const int64_t y = t.y0 + ty + k * BY;
    im[k] = x < g.n[2] && y < g.n[1] ? in[(t.z * g.n[1] + y) * g.n[2] + x] : 0.f;
    any |= im[k] != 0.f;
  }
  if (!__syncthreads_or(any)) return;
  int rt[3] = {0, 0, 0}; // the thread's largest radii
#pragma unroll 1
  for (int k = 0; k < PP; k++) {
    pix p;
    p.load(g, sig, rad, (t.z * g.n[1] + t.y0 + ty + k * BY) * g.n[2] + x, im[k] != 0.f);
    for (int a = 0; a < 3; a++)
      rt[a] = max(rt[a], p.r[a]);
  }
  if (V == NDF__KS_SHUFFLE) {
    if (tx < 3 && ty == 0) rb[tx] = 0;
    __syncthreads();
    for (int a = 0; a < 3; a++) {
      const int m = __reduce_max_sync(FULL, rt[a]);
      if (tx == 0 && m) atomicMax(&rb[a], m);
    }
    __syncthreads();
  }
  const int rz = g.smap[0] < 0 ? 0 : V == NDF__KS_SHUFFLE ? min(rb[0], RM) : RM;
  const bool iso = g.smap[1] == g.smap[2]; // one sigma map along y and x: the same weights
  const int ry = V == NDF__KS_SHUFFLE ? min(rb[1], RM) : RM;
  for (int dz = -rz; dz <= rz; dz++) {
    const int64_t oz = t.z + g.off[0] + dz;
    // the same for the whole block: no weight at this z offset, or outside the output
    if (!__syncthreads_or(abs(dz) <= rt[0]) || oz < 0 || oz >= g.m[0]) continue;
    float *plane = out + oz * g.m[1] * g.m[2];
    if (V != NDF__KS_GLOBAL_ATOMIC) {
      for (int i = ty * TX + tx; i < H * W; i += TX * BY)
        acc[i] = 0.f;
      __syncthreads();
    }
#pragma unroll 1
    for (int k = 0; k < PP; k++) {
      const int64_t y = t.y0 + ty + k * BY;
      pix p;
      p.load(g, sig, rad, (t.z * g.n[1] + y) * g.n[2] + x, im[k] != 0.f);
      const float wz = im[k] * p.w(0, dz);
      float kx[RM + 1], ky[RM + 1];
      p.ws(2, kx);
      if (iso) {
#pragma unroll
        for (int d = 0; d <= RM; d++)
          ky[d] = kx[d];
      } else {
        p.ws(1, ky);
      }
      if constexpr (V == NDF__KS_GLOBAL_ATOMIC) {
        if (wz == 0.f) continue;
        const int64_t ox = x + g.off[2], oy = y + g.off[1];
#pragma unroll
        for (int dy = -RM; dy <= RM; dy++) {
          const int64_t py = oy + dy;
          const float wy = wz * ky[dy < 0 ? -dy : dy];
          if (wy == 0.f || py < 0 || py >= g.m[1]) continue;
#pragma unroll
          for (int dx = -RM; dx <= RM; dx++) {
            const int64_t px = ox + dx;
            const float w = wy * kx[dx < 0 ? -dx : dx];
            if (w != 0.f && px >= 0 && px < g.m[2]) atomicAdd(plane + py * g.m[2] + px, w);
          }
        }
      } else if constexpr (V == NDF__KS_SHUFFLE) {
        const int wr = min(__reduce_max_sync(FULL, p.r[2]), RM);
#pragma unroll 1
        for (int dy = -ry; dy <= ry; dy++) {
          const float b = wz * ky[dy < 0 ? -dy : dy];
          if (__any_sync(FULL, b != 0.f))
            row_shuffle<RM>(b, kx, wr, acc + (ty + k * BY + RM + dy) * W, tx);
          __syncthreads();
        }
      } else {
#pragma unroll
        for (int dy = -RM; dy <= RM; dy++) {
          const float wy = wz * ky[dy < 0 ? -dy : dy];
          float *row = acc + (ty + k * BY + RM + dy) * W + tx + RM;
#pragma unroll
          for (int dx = -RM; dx <= RM; dx++) {
            const float w = wy * kx[dx < 0 ? -dx : dx];
            if (V == NDF__KS_SHARED_ATOMIC) {
              atomicAdd(row + dx, w);
            } else {
              row[dx] += w;
              if (V == NDF__KS_SYNC) __syncthreads();
              if (V == NDF__KS_THREADFENCE) __threadfence_block();
              if (V == NDF__KS_THREADFENCE || V == NDF__KS_WARPSYNC) __syncwarp();
            }
          }
          if (V == NDF__KS_THREADFENCE || V == NDF__KS_WARPSYNC) __syncthreads();
        }
      }
    }
    if (V == NDF__KS_GLOBAL_ATOMIC) continue;
    __syncthreads();
    flush(acc, H, W, t.y0 - RM, t.x0 - RM, g, plane, ty * TX + tx, TX * BY);
  }
}

// Any radius: a block of 32 x 8 threads over a tile of tw x ty pixels.
__global__ void __launch_bounds__(256)
    ks_scatter_big(const float *__restrict__ in, float *out, const float *__restrict__ sig,
                   const int *__restrict__ rad, ndf__ks_geom g, const int *__restrict__ tiles,
                   int ty, int tw) {
  constexpr int C = 32;
  if (done(g, tiles)) return;
  const tile_at t(g, tiles[1 + blockIdx.x], ty, tw);
  for (int64_t i = threadIdx.y * TX + threadIdx.x; i < (int64_t)ty * tw; i += 256) {
    const int64_t x = t.x0 + i % tw, y = t.y0 + i / tw;
    if (x >= g.n[2] || y >= g.n[1]) continue;
    const int64_t q = (t.z * g.n[1] + y) * g.n[2] + x;
    const float im = in[q];
    if (im == 0.f) continue;
    pix p;
    p.load(g, sig, rad, q, true);
    const int64_t ox = x + g.off[2], oy = y + g.off[1], oz = t.z + g.off[0];
    // the offsets that land in the output
    const int64_t z0 = max(-(int64_t)p.r[0], -oz), z1 = min((int64_t)p.r[0], g.m[0] - 1 - oz);
    const int64_t y0 = max(-(int64_t)p.r[1], -oy), y1 = min((int64_t)p.r[1], g.m[1] - 1 - oy);
    const int64_t x0 = max(-(int64_t)p.r[2], -ox), x1 = min((int64_t)p.r[2], g.m[2] - 1 - ox);
    for (int64_t dz = z0; dz <= z1; dz++) {
      const float wz = im * p.w(0, (int)dz);
      float *plane = out + (oz + dz) * g.m[1] * g.m[2];
      for (int64_t c = y0; c <= y1; c += C) {
        float ky[C];
#pragma unroll
        for (int j = 0; j < C; j++)
          ky[j] = c + j <= y1 ? wz * p.w(1, (int)(c + j)) : 0.f;
        for (int64_t dx = x0; dx <= x1; dx++) {
          const float wx = p.w(2, (int)dx);
          float *col = plane + (oy + c) * g.m[2] + ox + dx;
#pragma unroll
          for (int j = 0; j < C; j++)
            if (ky[j] * wx != 0.f) atomicAdd(col + j * g.m[2], ky[j] * wx);
        }
      }
    }
  }
}

// The quad scatter: a thread takes 4 neighbouring pixels of a row, a warp 128 columns, a block
// a tile of 128 x TYT; for every y offset each thread adds the four pixels' contributions to
// the aligned quads of the shared row they reach, one 16-byte read and write a quad (16 taps),
// __syncwarp() between quads (the lanes' quads are a step apart, as in warpsync), and
// __syncthreads() between y offsets. Above radius 16 the y weights are made per offset, the
// registers holding the x kernels only.
template <int RM, int TYT, int BY>
__global__ void __launch_bounds__(TX *BY)
    ks_scatter_quad(const float *__restrict__ in, float *out, const float *__restrict__ sig,
                    const int *__restrict__ rad, ndf__ks_geom g, const int *__restrict__ tiles) {
  constexpr int TW = 4 * TX, RA = (RM + 3) / 4 * 4, W = TW + 2 * RA, H = TYT + 2 * RM;
  constexpr int PP = TYT / BY, NQ = RA / 4;
  constexpr int KY = RM <= 16 ? RM + 1 : 1; // y weights in registers up to radius 16
  extern __shared__ float4 acc[];           // H * W floats
  float *accf = reinterpret_cast<float *>(acc);
  if (done(g, tiles)) return;
  const tile_at t(g, tiles[1 + blockIdx.x], TYT, TW);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x = t.x0 + 4 * tx;
  float im[PP][4];
  bool any = false;
  int rt0 = 0; // the thread's largest z radius
#pragma unroll
  for (int k = 0; k < PP; k++) {
    const int64_t y = t.y0 + ty + k * BY;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      im[k][i] = x + i < g.n[2] && y < g.n[1] ? in[(t.z * g.n[1] + y) * g.n[2] + x + i] : 0.f;
      any |= im[k][i] != 0.f;
    }
  }
  if (!__syncthreads_or(any)) return;
  if (g.smap[0] >= 0)
    for (int k = 0; k < PP; k++)
      for (int i = 0; i < 4; i++)
        if (im[k][i] != 0.f)
          rt0 = max(rt0, rad[g.smap[0] * g.n[0] * g.n[1] * g.n[2] +
                             (t.z * g.n[1] + t.y0 + ty + k * BY) * g.n[2] + x + i]);
  const int rz = g.smap[0] < 0 ? 0 : RM;
  const bool iso = g.smap[1] == g.smap[2]; // one sigma map along y and x: the same weights
  for (int dz = -rz; dz <= rz; dz++) {
    const int64_t oz = t.z + g.off[0] + dz;
    if (!__syncthreads_or(abs(dz) <= rt0) || oz < 0 || oz >= g.m[0]) continue;
    float *plane = out + oz * g.m[1] * g.m[2];
    for (int i = ty * TX + tx; i < H * W; i += TX * BY)
      accf[i] = 0.f;
    __syncthreads();
#pragma unroll 1
    for (int k = 0; k < PP; k++) {
      const int64_t y = t.y0 + ty + k * BY;
      pix p[4];
      // ky: the y weights (times wz) up to radius 16; past it they come as the rows are
      // visited, |dy| = 0, 1, 1, 2, 2, ...: each new one from erfc at its voxel's outer edge,
      // the last outer edge's value kept in eo (ndf__ks_weights' differences), kw holding it
      // for -|dy| and +|dy|
      float wz[4], kx[4][RM + 1], ky[4][KY], cy[4], eo[4], kw[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        p[i].load(g, sig, rad, (t.z * g.n[1] + y) * g.n[2] + x + i, im[k][i] != 0.f);
        cy[i] = p[i].s[1] > 0.f ? 0.70710678118654752f / p[i].s[1] : 0.f;
        wz[i] = im[k][i] * p[i].w(0, dz);
        p[i].ws(2, kx[i]);
        if constexpr (KY > 1) {
          if (!iso) p[i].ws(1, ky[i]);
#pragma unroll
          for (int d = 0; d < KY; d++)
            ky[i][d] = wz[i] * (iso ? kx[i][d] : ky[i][d]);
        }
      }
#pragma unroll(KY > 1 ? 2 * RM + 1 : 1)
      for (int q = 0; q <= 2 * RM; q++) { // the rows dy = 0, -1, 1, -2, 2, ...
        const int a = (q + 1) / 2, dy = q & 1 ? -a : a;
        float b[4];
        bool live = false;
#pragma unroll
        for (int i = 0; i < 4; i++) {
          if constexpr (KY > 1) {
            b[i] = ky[i][a];
          } else {
            if (q == 0) {
              kw[i] = erff(0.5f * cy[i]);
              eo[i] = erfcf(0.5f * cy[i]);
            } else if (q & 1) { // (erfc((a - 1/2) c) - erfc((a + 1/2) c)) / 2
              const float e = erfcf(((float)a + 0.5f) * cy[i]);
              kw[i] = 0.5f * (eo[i] - e);
              eo[i] = e;
            }
            const float w = p[i].s[1] == 0.f ? (a == 0 ? 1.f : 0.f) : kw[i];
            b[i] = a <= p[i].r[1] ? wz[i] * w * p[i].sc[1] : 0.f;
          }
          live |= b[i] != 0.f;
        }
        if (__any_sync(FULL, live)) {
          float4 *row = acc + ((ty + k * BY + RM + dy) * W + RA) / 4 + tx;
#pragma unroll
          for (int j = -NQ; j <= NQ; j++) {
            float4 v = row[j];
            float *vc = reinterpret_cast<float *>(&v);
#pragma unroll
            for (int c = 0; c < 4; c++)
#pragma unroll
              for (int i = 0; i < 4; i++) {
                const int dx = 4 * j + c - i; // from pixel i to column c of quad j
                if (dx >= -RM && dx <= RM) vc[c] = fmaf(b[i], kx[i][dx < 0 ? -dx : dx], vc[c]);
              }
            row[j] = v;
            __syncwarp();
          }
        }
        __syncthreads();
      }
    }
    flush(accf, H, W, t.y0 - RM, t.x0 - RA, g, plane, ty * TX + tx, TX * BY);
  }
}

// A quad launch: its shared tile may need more than the default 48 KB.
template <int RM, int TYT, int BY>
int quad(int ntiles, dim3 b, cudaStream_t st, const float *in, float *out, const float *sig,
         const int *rad, const ndf__ks_geom &g, const int *tiles) {
  constexpr int RA = (RM + 3) / 4 * 4;
  constexpr size_t smem = sizeof(float) * (4 * TX + 2 * RA) * (TYT + 2 * RM);
  auto *k = ks_scatter_quad<RM, TYT, BY>;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
  }
  k<<<ntiles, b, smem, st>>>(in, out, sig, rad, g, tiles);
  return 0;
}

template <int V, int TYT, int BY>
int scatter_rm(int rm, const float *in, float *out, const float *sig, const int *rad,
               const ndf__ks_geom &g, const int *tiles, int ntiles, cudaStream_t st) {
  const dim3 b(TX, BY);
  if constexpr (V == NDF__KS_QUAD) {
    // (a list of macro calls clang-format cannot lay out)
    // clang-format off
    switch (rm) {
#define NDF__Q(r)                                                                                  \
  case r: {                                                                                        \
    const int e = quad<r, TYT, BY>(ntiles, b, st, in, out, sig, rad, g, tiles);                    \
    if (e) return e;                                                                               \
    break;                                                                                         \
  }
      NDF__Q(0) NDF__Q(1) NDF__Q(2) NDF__Q(4) NDF__Q(8) NDF__Q(16) NDF__Q(32)
#undef NDF__Q
    default: ks_scatter_big<<<ntiles, dim3(TX, 8), 0, st>>>(in, out, sig, rad, g, tiles, TYT, 4 * TX);
    }
    // clang-format on
    return (int)cudaGetLastError();
  } else {
    switch (rm) {
    case 0: ks_scatter<0, V, TYT, BY><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
    case 1: ks_scatter<1, V, TYT, BY><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
    case 2: ks_scatter<2, V, TYT, BY><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
    case 4: ks_scatter<4, V, TYT, BY><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
    case 8: ks_scatter<8, V, TYT, BY><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
    case 16: ks_scatter<16, V, TYT, BY><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
    case 32: ks_scatter<32, V, TYT, BY><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
    default: ks_scatter_big<<<ntiles, dim3(TX, 8), 0, st>>>(in, out, sig, rad, g, tiles, TYT, TX);
    }
    return (int)cudaGetLastError();
  }
}

} // namespace

// One variant and tile shape per translation unit (CMake writes a file per pair that defines
// them and includes this one), so that a build of every shape compiles in parallel.
extern "C" int NDF__KS_SCATTER_FN(NDF_KS_V, NDF_KS_TY,
                                  NDF_KS_BY)(int rm, const float *in, float *out, const float *sig,
                                             const int *rad, const ndf__ks_geom *g,
                                             const int *tiles, int ntiles, void *stream) {
  return scatter_rm<NDF_KS_V, NDF_KS_TY, NDF_KS_BY>(rm, in, out, sig, rad, *g, tiles, ntiles,
                                                    (cudaStream_t)stream);
}
