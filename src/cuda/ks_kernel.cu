// ks_kernel.cu - kernel superposition (ndf.h, "ks") on the GPU: the exact gather and the five
// scatter variants of the seed (000, Algorithm 1), over arrays seen as 3-D [z][y][x].
//
// Every kernel evaluates Eq. 4 in float32 by core/ks_weight.h (erf, erfc or a quadrature of the
// Gaussian, whichever keeps the digits), with the radius r of each pixel and axis precomputed
// on the host in float64 (ceil(n_sigma * sigma) of the caller's sigma, so the cut-off is the
// reference's exactly) and normalize's scale from the host too.
//
//  - ks_gather: a thread per output element sums its neighbourhood, evaluating the kernel per
//    neighbour (the paper's naive gather: Eq. 2a takes each neighbour's sigma; Eq. 2b the
//    output's, the nearest input pixel's outside the input's grid). The loop bound of a
//    block is its tile's largest radius (rt, from the host); each output's sum runs in a
//    fixed order, so the result is bitwise repeatable.
//  - ks_scatter<RM, V>: Eq. 2a. A block of 32 x 8 threads takes a 32 x 8 tile of one input
//    slice; RM (0, 1, 2, 4, 8, 16, 32) bounds the radii of the tile's pixels (blocks are
//    launched grouped by it, from the host's lists; a pixel's own r still cuts its kernel).
//    Each thread makes its 1-D kernels once and adds I * kz * ky * kx over its neighbourhood:
//    into the output directly with atomics (V = global atomics), or into a shared tile with a
//    2 RM halo, one z offset at a time (the paper's split of 3-D into 2-D problems), then added
//    to the output with atomics. In the shared tile, for a fixed (y, x) offset every thread
//    writes its own element; between offsets the variants differ:
//      shared atomics: atomicAdd, no ordering needed;
//      sync: __syncthreads() after every offset;
//      threadfence: the paper's __threadfence_block() after every x offset, which since Volta
//        orders memory but does not keep a warp's lanes together, so __syncwarp() as well;
//        __syncthreads() after every y offset;
//      warpsync: the paper's volatile warp-synchronous version made correct: the lanes of a
//        warp write one row, a step apart, with __syncwarp() between x offsets (the ordering
//        lock-step execution used to give), __syncthreads() after every y offset so that the
//        warps, a row each, never meet.
//    Blocks whose pixels are all zero return at once (__syncthreads_or), as do z offsets where
//    every weight is zero. The global atomics make the order of additions, and so the last
//    bits, vary between runs.
#include <cuda_runtime.h>

#include <stdint.h>

#include "../core/ks_weight.h"
#include "launch.h"

namespace {

constexpr int TX = 32, TY = 8;

// Gather: out (contiguous [m0][m1][m2]) from in ([n0][n1][n2]); sig/rad: nsig maps of in's
// shape; smap[a]: the map of axis a (-1: an axis of length 1 everywhere); off: the input's
// offset in the output; rt: per output tile (32 x 8 of a slice) the largest radius per axis.
__global__ void __launch_bounds__(TX *TY)
    ks_gather(const float *__restrict__ in, float *__restrict__ out, const float *__restrict__ sig,
              const int *__restrict__ rad, ndf__ks_geom g, const int *__restrict__ rt) {
  const int64_t x = (int64_t)blockIdx.x * TX + threadIdx.x,
                y = (int64_t)blockIdx.y * TY + threadIdx.y, z = blockIdx.z;
  const int64_t tile = ((int64_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const int r0 = rt[3 * tile], r1 = rt[3 * tile + 1], r2 = rt[3 * tile + 2];
  if (x >= g.m[2] || y >= g.m[1]) return;
  const int64_t p[3] = {z, y, x};
  const int64_t n = g.n[0] * g.n[1] * g.n[2];
  int64_t pin = 0; // Eq. 2b: the input pixel nearest p
  for (int a = 0; a < 3; a++) {
    int64_t c = p[a] - g.off[a];
    c = c < 0 ? 0 : c >= g.n[a] ? g.n[a] - 1 : c;
    pin = pin * g.n[a] + c;
  }
  float acc = 0;
  for (int d0 = -r0; d0 <= r0; d0++) {
    const int64_t q0 = z - g.off[0] - d0;
    if (q0 < 0 || q0 >= g.n[0]) continue;
    for (int d1 = -r1; d1 <= r1; d1++) {
      const int64_t q1 = y - g.off[1] - d1;
      if (q1 < 0 || q1 >= g.n[1]) continue;
      for (int d2 = -r2; d2 <= r2; d2++) {
        const int64_t q2 = x - g.off[2] - d2;
        if (q2 < 0 || q2 >= g.n[2]) continue;
        const int64_t q = (q0 * g.n[1] + q1) * g.n[2] + q2, at = g.index_output ? pin : q;
        const int d[3] = {d0, d1, d2};
        float w = 1;
        for (int a = 0; a < 3 && w != 0.f; a++) {
          const int m = g.smap[a];
          if (m < 0) continue;
          w *= ndf__ks_weight(d[a], sig[m * n + at], rad[m * n + at], sig[g.nmap + m * n + at]);
        }
        acc = fmaf(in[q], w, acc);
      }
    }
  }
  out[(z * g.m[1] + y) * g.m[2] + x] = acc;
}

template <int RM, int V>
__global__ void __launch_bounds__(TX *TY)
    ks_scatter(const float *__restrict__ in, float *out, const float *__restrict__ sig,
               const int *__restrict__ rad, ndf__ks_geom g, const int *__restrict__ tiles) {
  constexpr int W = TX + 2 * RM, H = TY + 2 * RM;
  __shared__ float acc[V == NDF__KS_GLOBAL_ATOMIC ? 1 : H * W];
  const int tile = tiles[blockIdx.x];
  const int64_t ntx = (g.n[2] + TX - 1) / TX, nty = (g.n[1] + TY - 1) / TY;
  const int64_t z = tile / (ntx * nty), ty0 = (tile / ntx) % nty * TY, tx0 = tile % ntx * TX;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x = tx0 + tx, y = ty0 + ty, n = g.n[0] * g.n[1] * g.n[2];
  const bool live = x < g.n[2] && y < g.n[1];
  const int64_t q = (z * g.n[1] + y) * g.n[2] + x;
  const float im = live ? in[q] : 0.f;
  if (!__syncthreads_or(im != 0.f)) return;
  float sa[3] = {0, 0, 0}, na[3] = {1, 1, 1};
  int ra[3] = {0, 0, 0};
  for (int a = 0; a < 3; a++)
    if (live && g.smap[a] >= 0) {
      sa[a] = sig[g.smap[a] * n + q];
      na[a] = sig[g.nmap + g.smap[a] * n + q];
      ra[a] = rad[g.smap[a] * n + q];
    }
  float kx[RM + 1], ky[RM + 1];
#pragma unroll
  for (int d = 0; d <= RM; d++) {
    kx[d] = ndf__ks_weight(d, sa[2], ra[2], na[2]);
    ky[d] = ndf__ks_weight(d, sa[1], ra[1], na[1]);
  }
  const int rz = g.smap[0] >= 0 ? RM : 0; // a 3-D image spreads over z (also from one slice)
  const int64_t ox = x + g.off[2], oy = y + g.off[1];
  for (int dz = -rz; dz <= rz; dz++) {
    const float wz = im * ndf__ks_weight(dz, sa[0], ra[0], na[0]);
    const int64_t oz = z + g.off[0] + dz;
    if (!__syncthreads_or(wz != 0.f && oz >= 0 && oz < g.m[0])) continue;
    float *plane = out + oz * g.m[1] * g.m[2];
    if constexpr (V == NDF__KS_GLOBAL_ATOMIC) {
      if (wz == 0.f) continue;
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
    } else {
      for (int i = ty * TX + tx; i < H * W; i += TX * TY)
        acc[i] = 0.f;
      __syncthreads();
#pragma unroll
      for (int dy = -RM; dy <= RM; dy++) {
        const float wy = wz * ky[dy < 0 ? -dy : dy];
        float *row = acc + (ty + RM + dy) * W + tx + RM;
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
      __syncthreads();
      for (int i = ty * TX + tx; i < H * W; i += TX * TY) {
        const float v = acc[i];
        const int64_t py = ty0 - RM + i / W + g.off[1], px = tx0 - RM + i % W + g.off[2];
        if (v != 0.f && py >= 0 && py < g.m[1] && px >= 0 && px < g.m[2])
          atomicAdd(plane + py * g.m[2] + px, v);
      }
      __syncthreads();
    }
  }
}

template <int V>
int scatter_rm(int rm, const float *in, float *out, const float *sig, const int *rad,
               const ndf__ks_geom &g, const int *tiles, int ntiles, cudaStream_t st) {
  const dim3 b(TX, TY);
  switch (rm) {
  case 0: ks_scatter<0, V><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
  case 1: ks_scatter<1, V><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
  case 2: ks_scatter<2, V><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
  case 4: ks_scatter<4, V><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
  case 8: ks_scatter<8, V><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
  case 16: ks_scatter<16, V><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
  case 32: ks_scatter<32, V><<<ntiles, b, 0, st>>>(in, out, sig, rad, g, tiles); break;
  default: return (int)cudaErrorInvalidValue;
  }
  return (int)cudaGetLastError();
}

} // namespace

extern "C" int ndf__launch_ks_gather(const float *in, float *out, const float *sig, const int *rad,
                                     const ndf__ks_geom *g, const int *rt, void *stream) {
  const dim3 grid((unsigned)((g->m[2] + TX - 1) / TX), (unsigned)((g->m[1] + TY - 1) / TY),
                  (unsigned)g->m[0]);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;
  ks_gather<<<grid, dim3(TX, TY), 0, (cudaStream_t)stream>>>(in, out, sig, rad, *g, rt);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_ks_scatter(int variant, int rm, const float *in, float *out,
                                      const float *sig, const int *rad, const ndf__ks_geom *g,
                                      const int *tiles, int ntiles, void *stream) {
  if (ntiles <= 0) return 0;
  cudaStream_t st = (cudaStream_t)stream;
  switch (variant) {
  case NDF__KS_GLOBAL_ATOMIC:
    return scatter_rm<NDF__KS_GLOBAL_ATOMIC>(rm, in, out, sig, rad, *g, tiles, ntiles, st);
  case NDF__KS_SHARED_ATOMIC:
    return scatter_rm<NDF__KS_SHARED_ATOMIC>(rm, in, out, sig, rad, *g, tiles, ntiles, st);
  case NDF__KS_SYNC: return scatter_rm<NDF__KS_SYNC>(rm, in, out, sig, rad, *g, tiles, ntiles, st);
  case NDF__KS_THREADFENCE:
    return scatter_rm<NDF__KS_THREADFENCE>(rm, in, out, sig, rad, *g, tiles, ntiles, st);
  default: return scatter_rm<NDF__KS_WARPSYNC>(rm, in, out, sig, rad, *g, tiles, ntiles, st);
  }
}

extern "C" int ndf__ks_tile_dims(int *tx, int *ty) {
  *tx = TX;
  *ty = TY;
  return 0;
}
