// SPDX-License-Identifier: BSD-3-Clause
// ks_prep_kernel.cu - the device side of a kernel-superposition plan's preparation (ndf.h, "ks"):
// the sigma maps checked and turned into the solvers' float32 sigmas, scales and radii, and the
// tiles' radius tables the scatters and gathers launch by, all on the GPU, so that maps given
// with each execute never travel to the host. Arrays are seen as 3-D [z][y][x] (ks_kernel.cu).
//
// ks_maps: a thread per input pixel, every map at that pixel: a value that is not finite, is
// negative, or whose radius passes r_max records its flat index (map m's pixel i as m n + i)
// in *bad, complemented, by atomicMax (0: none), so the host can name the first one. With a tile
// table, each warp (32 pixels of a row, inside one tile) adds its largest radius per axis to its
// tile by atomicMax.
//
// Between calls of a plan whose maps are operands the scatters keep their tables clean instead of
// clearing them with a memset: ks_bucket clears each tile's radii once it has read them, and the
// next ks_maps clears the lists' counts before ks_bucket fills them; *bad stays 0 while calls
// are good (the host clears the whole table after a bad or failed call).
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "launch.h"

namespace {

constexpr unsigned FULL = 0xffffffffu;
constexpr int NB = 8; // ks.c's radius buckets: 0, 1, 2, 4, 8, 16, 32, any

__device__ __forceinline__ double load(const void *p, int dtype, int64_t o) {
  switch (dtype) {
  case 1: return static_cast<const uint8_t *>(p)[o];
  case 2: return static_cast<const uint16_t *>(p)[o];
  case 3: return static_cast<const int16_t *>(p)[o];
  case 4: return static_cast<const float *>(p)[o];
  default: return static_cast<const double *>(p)[o];
  }
}

// The largest of v over the warp, every lane taking part.
__device__ __forceinline__ int warp_max(int v) { return __reduce_max_sync(FULL, v); }

__global__ void __launch_bounds__(256)
    ks_maps(ndf__ks_maps M, ndf__ks_geom g, float *sig, int *rad, unsigned long long *bad, int *t,
            int tw, int ty, int *lists, int64_t nt) {
  if (lists && blockIdx.x + blockIdx.y + blockIdx.z == 0 && threadIdx.y == 0 && threadIdx.x < NB)
    lists[threadIdx.x * (nt + 1)] = 0;
  const int64_t x = (int64_t)blockIdx.x * 32 + threadIdx.x,
                y = (int64_t)blockIdx.y * 8 + threadIdx.y;
  const int64_t z = blockIdx.z;
  const bool live = x < g.n[2] && y < g.n[1];
  const int64_t n = M.n, i = (z * g.n[1] + y) * g.n[2] + x;
  int r[NDF_MAX_MAPS] = {0, 0, 0, 0};
  if (live)
    for (int m = 0; m < M.nsig; m++) {
      const ndf__view4 &v = M.v[m];
      const double s =
          load(M.data[m], M.dtype[m], z * v.strides[1] + y * v.strides[2] + x * v.strides[3]);
      const double c = ceil(M.n_sigma * s);
      const int64_t rr = c < 0x1p40 ? (int64_t)c : ((int64_t)1 << 40);
      const bool ok = s >= 0 && !isinf(s) && (M.r_max == 0 || rr <= M.r_max);
      if (!ok) atomicMax(bad, ~(unsigned long long)(m * n + i)); // the smallest index
      sig[m * n + i] = ok ? (float)s : 0.f;
      sig[g.nmap + m * n + i] =
          ok && M.normalize && s > 0 ? (float)(1 / erf((c + 0.5) / (1.4142135623730951 * s))) : 1.f;
      r[m] = ok ? (int)(rr < M.clip ? rr : M.clip) : 0;
      rad[m * n + i] = r[m];
    }
  if (!t) return;
  const int64_t ntx = (g.n[2] + tw - 1) / tw, nty = (g.n[1] + ty - 1) / ty;
  const int64_t tile = (z * nty + y / ty) * ntx + x / tw;
  for (int a = 0; a < 3; a++) {
    const int m = warp_max(g.smap[a] < 0 ? 0 : r[g.smap[a]]);
    if (threadIdx.x == 0 && live && m) atomicMax(&t[3 * tile + a], m);
  }
}

// The radii at each output pixel's nearest input pixel, their largest per 32 x ty output tile.
__global__ void __launch_bounds__(256)
    ks_out_tiles(ndf__ks_geom g, const int *rad, int *t, int ty) {
  const int64_t x = (int64_t)blockIdx.x * 32 + threadIdx.x,
                y = (int64_t)blockIdx.y * 8 + threadIdx.y;
  const int64_t z = blockIdx.z;
  const bool live = x < g.m[2] && y < g.m[1];
  const int64_t cz = min(max(z - g.off[0], (int64_t)0), g.n[0] - 1);
  const int64_t cy = min(max(y - g.off[1], (int64_t)0), g.n[1] - 1);
  const int64_t cx = min(max(x - g.off[2], (int64_t)0), g.n[2] - 1);
  const int64_t i = (cz * g.n[1] + cy) * g.n[2] + cx, n = g.n[0] * g.n[1] * g.n[2];
  const int64_t ntx = (g.m[2] + 31) / 32, nty = (g.m[1] + ty - 1) / ty;
  const int64_t tile = (z * nty + y / ty) * ntx + x / 32;
  for (int a = 0; a < 3; a++) {
    const int m = warp_max(live && g.smap[a] >= 0 ? rad[g.smap[a] * n + i] : 0);
    if (threadIdx.x == 0 && live && m) atomicMax(&t[3 * tile + a], m);
  }
}

// Each input tile's radii (it) over the output tiles its pixels reach (rt).
__global__ void ks_spread(ndf__ks_geom g, const int *it, int *rt, int ty, int64_t nit) {
  const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= nit) return;
  const int64_t itx = (g.n[2] + 31) / 32, ity = (g.n[1] + ty - 1) / ty;
  const int64_t ntx = (g.m[2] + 31) / 32, nty = (g.m[1] + ty - 1) / ty;
  const int64_t z = k / (itx * ity), by = k / itx % ity, bx = k % itx;
  const int *r = it + 3 * k;
  const int64_t z0 = max((int64_t)0, z + g.off[0] - r[0]),
                z1 = min(g.m[0] - 1, z + g.off[0] + r[0]);
  const int64_t y0 = max((int64_t)0, by * ty + g.off[1] - r[1]);
  const int64_t y1 = min(g.m[1] - 1, (by + 1) * ty - 1 + g.off[1] + r[1]);
  const int64_t x0 = max((int64_t)0, bx * 32 + g.off[2] - r[2]);
  const int64_t x1 = min(g.m[2] - 1, (bx + 1) * 32 - 1 + g.off[2] + r[2]);
  for (int64_t oz = z0; oz <= z1; oz++)
    for (int64_t oy = y0 / ty; oy <= y1 / ty; oy++)
      for (int64_t ox = x0 / 32; ox <= x1 / 32; ox++) {
        int *o = rt + 3 * ((oz * nty + oy) * ntx + ox);
        for (int a = 0; a < 3; a++)
          if (r[a] > o[a]) atomicMax(&o[a], r[a]);
      }
}

// Unless the maps were bad: the input tiles into one list per radius bucket from bmin on (list b
// at lists + b (nt + 1), its count first, zeroed before), each tile's radii cleared once read, and
// out[0..nout) = 0. The verdict (*bad) goes to *verdict (host memory) when given.
__global__ void ks_bucket(int *it, int64_t nt, int *lists, int bmin, float *out, int64_t nout,
                          const unsigned long long *bad, unsigned long long *verdict) {
  const unsigned long long b0 = *bad;
  if (verdict && blockIdx.x == 0 && threadIdx.x == 0) *verdict = b0;
  if (b0) return;
  const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (k < nt) {
    const int r = max(it[3 * k], max(it[3 * k + 1], it[3 * k + 2]));
    it[3 * k] = it[3 * k + 1] = it[3 * k + 2] = 0;
    int b = bmin;
    while (b < NB - 1 && (b == 0 ? 0 : 1 << (b - 1)) < r)
      b++;
    int *l = lists + b * (nt + 1);
    l[1 + atomicAdd(l, 1)] = (int)k;
  }
  for (int64_t i = k; i < nout; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = 0.f;
}

// out[0..n) = 0, unless the maps were bad.
__global__ void ks_zero(float *out, int64_t n, const unsigned long long *bad) {
  if (*bad) return;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = 0.f;
}

dim3 pixels(const int64_t e[3]) {
  return dim3((unsigned)((e[2] + 31) / 32), (unsigned)((e[1] + 7) / 8), (unsigned)e[0]);
}

} // namespace

extern "C" int ndf__launch_ks_maps(const ndf__ks_maps *M, const ndf__ks_geom *g, float *sig,
                                   int *rad, unsigned long long *bad, int *tiles, int tw, int ty,
                                   int *lists, int64_t nt, void *stream) {
  ks_maps<<<pixels(g->n), dim3(32, 8), 0, (cudaStream_t)stream>>>(*M, *g, sig, rad, bad, tiles, tw,
                                                                  ty, lists, nt);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_ks_out_tiles(const ndf__ks_geom *g, const int *rad, int *rt, int ty,
                                        void *stream) {
  ks_out_tiles<<<pixels(g->m), dim3(32, 8), 0, (cudaStream_t)stream>>>(*g, rad, rt, ty);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_ks_spread(const ndf__ks_geom *g, const int *it, int *rt, int ty,
                                     void *stream) {
  const int64_t nit = (g->n[2] + 31) / 32 * ((g->n[1] + ty - 1) / ty) * g->n[0];
  ks_spread<<<(unsigned)((nit + 127) / 128), 128, 0, (cudaStream_t)stream>>>(*g, it, rt, ty, nit);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_ks_bucket(int *it, int64_t nt, int *lists, int bmin, float *out,
                                     int64_t nout, const unsigned long long *bad,
                                     unsigned long long *verdict, void *stream) {
  const int64_t zb = nout > 0 ? (nout + 255) / 256 : 0, tb = (nt + 255) / 256;
  const int64_t b = tb > (zb < 4096 ? zb : 4096) ? tb : (zb < 4096 ? zb : 4096);
  ks_bucket<<<(unsigned)(b > 0 ? b : 1), 256, 0, (cudaStream_t)stream>>>(it, nt, lists, bmin, out,
                                                                         nout, bad, verdict);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_ks_zero(float *out, int64_t n, const unsigned long long *bad,
                                   void *stream) {
  const int64_t b = (n + 255) / 256;
  ks_zero<<<(unsigned)(b < 4096 ? (b > 0 ? b : 1) : 4096), 256, 0, (cudaStream_t)stream>>>(out, n,
                                                                                           bad);
  return (int)cudaGetLastError();
}
