// SPDX-License-Identifier: BSD-3-Clause
// ks_gather_kernel.cu - the gathers of kernel superposition (ndf.h, "ks") on the GPU: the
// eighteen of da Silva, Ansorge and Jena ("gather approach"), over arrays seen as 3-D [z][y][x].
//
// ks_gather<LUT, NARR, TYT, BY>: a block of 32 x BY threads makes a tile of 32 x TYT outputs
// of one slice, each thread TYT / BY of them, BY rows apart. Each output sums its
// neighbourhood, the loop bounds being the tile's largest radius per axis (rt, made on the device:
// ks_prep_kernel.cu); a neighbour's own radius cuts its kernel (Eq. 2a: the neighbour's sigma; Eq.
// 2b, exact only: the output's, the nearest input pixel's outside the input's grid). Each sum runs
// in a fixed order: the results are bitwise repeatable.
//  - LUT: how Eq. 4 is evaluated:
//      EXACT: core/ks_weight.h (erf or a quadrature per weight), the reference's float32 twin;
//      LUT1D_{GLOBAL,SHARED,TEXTURE}: erf tabulated on [0, 6] (ks_lut: n points, linear
//        interpolation), two look-ups a weight, the table in global memory, copied to shared
//        memory by each block, or in a texture interpolated by the hardware (9-bit weights);
//      LUT2D_{GLOBAL,TEXTURE}: Eq. 4 tabulated for d = 0..nd - 1 at ns sigmas evenly spaced on
//        [0, the map's largest], one interpolation in sigma a weight, in global memory or a
//        2-D texture (too large for shared memory, as in the paper).
//    The LUT ones are approximate (their errors: docs/ks.md) and take index input only.
//  - NARR: how many of the input (1) and the sigma maps with their radii (2) a block first
//    copies, for the tile and its halo, into shared memory, one input slice at a time; 0: each
//    neighbour read from global memory (through the caches).
#include <cuda_runtime.h>

#include <stdint.h>

#include "../core/ks_weight.h"
#include "launch.h"

namespace {

constexpr int TX = 32;

template <int LUT>
__device__ __forceinline__ float erf_lut(float u, const ndf__ks_lut &L, const float *tab) {
  const float t = u * L.inv_h;
  if (LUT == NDF__KS_LUT1D_TEXTURE) return tex1D<float>(L.tex, t + 0.5f);
  if (t >= (float)(L.n - 1)) return tab[L.n - 1];
  const int i = (int)t;
  const float a = tab[i];
  return fmaf(t - (float)i, tab[i + 1] - a, a);
}

// Eq. 4 at offset d for sigma s, radius r and scale sc, the LUT's way (tab: the 1-D table
// where the block reads it).
template <int LUT>
__device__ __forceinline__ float weight(int d, float s, int r, float sc, const ndf__ks_lut &L,
                                        const float *tab) {
  if (LUT == NDF__KS_EXACT) return ndf__ks_weight(d, s, r, sc);
  d = d < 0 ? -d : d;
  if (d > r) return 0.f;
  if (LUT == NDF__KS_LUT2D_GLOBAL || LUT == NDF__KS_LUT2D_TEXTURE) {
    const float t = s * L.sinv;
    if (LUT == NDF__KS_LUT2D_TEXTURE) return sc * tex2D<float>(L.tex, d + 0.5f, t + 0.5f);
    const int j = min((int)t, L.ns - 2);
    const float a = L.tab[j * L.nd + d];
    return sc * fmaf(t - (float)j, L.tab[(j + 1) * L.nd + d] - a, a);
  }
  if (s == 0.f) return d == 0 ? sc : 0.f;
  const float c = 0.70710678118654752f / s;
  const float hi = erf_lut<LUT>((d + 0.5f) * c, L, tab);
  const float lo = d == 0 ? -hi : erf_lut<LUT>((d - 0.5f) * c, L, tab);
  return 0.5f * sc * (hi - lo);
}

template <int LUT, int NARR, int TYT, int BY>
__global__ void __launch_bounds__(TX *BY)
    ks_gather(const float *__restrict__ in, float *__restrict__ out, const float *__restrict__ sig,
              const int *__restrict__ rad, ndf__ks_geom g, const int *__restrict__ rt,
              ndf__ks_lut L) {
  constexpr int PP = TYT / BY;
  if (*g.bad != 0) return; // bad maps: the output stays as it was
  extern __shared__ float sm[];
  const int tx = threadIdx.x, ty = threadIdx.y, nt = TX * BY, tid = ty * TX + tx;
  const int64_t z = blockIdx.z, ox0 = (int64_t)blockIdx.x * TX, oy0 = (int64_t)blockIdx.y * TYT;
  const int64_t tile = ((int64_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const int r0 = rt[3 * tile], r1 = rt[3 * tile + 1], r2 = rt[3 * tile + 2];
  const int64_t n = g.n[0] * g.n[1] * g.n[2];
  const int nsig = (int)(g.nmap / n);
  // shared memory: the 1-D table, then the input's window, then per map (sigma, radius)
  const float *tab = L.tab;
  float *win = sm;
  if (LUT == NDF__KS_LUT1D_SHARED) {
    for (int i = tid; i < L.n; i += nt)
      sm[i] = L.tab[i];
    tab = sm;
    win = sm + ((L.n + 1) & ~1); // float2 alignment for what follows
    __syncthreads();
  }
  const int W = TX + 2 * r2, H = TYT + 2 * r1;
  float2 *swin = reinterpret_cast<float2 *>(win + ((H * W + 1) & ~1));
  const int64_t wy0 = oy0 - g.off[1] - r1, wx0 = ox0 - g.off[2] - r2; // the window's origin
  // Eq. 2b: each output's sigmas, from the input pixel nearest it
  float os[PP][3], osc[PP][3];
  int orr[PP][3];
  if (g.index_output) {
    for (int k = 0; k < PP; k++) {
      const int64_t p[3] = {z, oy0 + ty + k * BY, ox0 + tx};
      int64_t pin = 0;
      for (int a = 0; a < 3; a++) {
        int64_t c = p[a] - g.off[a];
        c = c < 0 ? 0 : c >= g.n[a] ? g.n[a] - 1 : c;
        pin = pin * g.n[a] + c;
      }
      for (int a = 0; a < 3; a++) {
        const int m = g.smap[a];
        os[k][a] = m < 0 ? 0.f : sig[m * n + pin];
        osc[k][a] = m < 0 ? 1.f : sig[g.nmap + m * n + pin];
        orr[k][a] = m < 0 ? 0 : rad[m * n + pin];
      }
    }
  }
  float acc[PP];
  for (int k = 0; k < PP; k++)
    acc[k] = 0.f;
  for (int d0 = -r0; d0 <= r0; d0++) {
    const int64_t q0 = z - g.off[0] - d0;
    if (q0 < 0 || q0 >= g.n[0]) continue; // the same for the whole block
    if (NARR > 0) {
      __syncthreads();
      for (int i = tid; i < H * W; i += nt) {
        const int64_t qy = wy0 + i / W, qx = wx0 + i % W;
        const bool inside = qy >= 0 && qy < g.n[1] && qx >= 0 && qx < g.n[2];
        const int64_t q = (q0 * g.n[1] + qy) * g.n[2] + qx;
        win[i] = inside ? in[q] : 0.f;
        if (NARR > 1)
          for (int m = 0; m < nsig; m++)
            swin[m * H * W + i] = inside
                                      ? make_float2(sig[m * n + q], __int_as_float(rad[m * n + q]))
                                      : make_float2(0.f, __int_as_float(0));
      }
      __syncthreads();
    }
    for (int k = 0; k < PP; k++) {
      const int64_t y = oy0 + ty + k * BY, x = ox0 + tx;
      float a = acc[k];
      for (int d1 = -r1; d1 <= r1; d1++) {
        const int64_t q1 = y - g.off[1] - d1;
        if (q1 < 0 || q1 >= g.n[1]) continue;
        for (int d2 = -r2; d2 <= r2; d2++) {
          const int64_t q2 = x - g.off[2] - d2;
          if (q2 < 0 || q2 >= g.n[2]) continue;
          const int64_t q = (q0 * g.n[1] + q1) * g.n[2] + q2;
          const int wi = (int)((q1 - wy0) * W + (q2 - wx0));
          const float v = NARR > 0 ? win[wi] : in[q];
          const int d[3] = {d0, d1, d2};
          float w = v;
          for (int ax = 0; ax < 3 && w != 0.f; ax++) {
            const int m = g.smap[ax];
            if (m < 0) continue;
            float s, sc = 1.f;
            int r;
            if (g.index_output) {
              s = os[k][ax], sc = osc[k][ax], r = orr[k][ax];
            } else if (NARR > 1) {
              const float2 e = swin[m * H * W + wi];
              s = e.x, r = __float_as_int(e.y);
              if (g.scaled) sc = sig[g.nmap + m * n + q];
            } else {
              s = sig[m * n + q], r = rad[m * n + q];
              if (g.scaled) sc = sig[g.nmap + m * n + q];
            }
            w *= weight<LUT>(d[ax], s, r, sc, L, tab);
          }
          a += w;
        }
      }
      acc[k] = a;
    }
  }
  for (int k = 0; k < PP; k++) {
    const int64_t y = oy0 + ty + k * BY, x = ox0 + tx;
    if (x < g.m[2] && y < g.m[1]) out[(z * g.m[1] + y) * g.m[2] + x] = acc[k];
  }
}

template <int LUT, int NARR, int TYT, int BY>
int gather(const float *in, float *out, const float *sig, const int *rad, const ndf__ks_geom &g,
           const int *rt, const ndf__ks_lut &L, size_t smem, cudaStream_t st) {
  const dim3 grid((unsigned)((g.m[2] + TX - 1) / TX), (unsigned)((g.m[1] + TYT - 1) / TYT),
                  (unsigned)g.m[0]);
  auto *k = ks_gather<LUT, NARR, TYT, BY>;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
  }
  k<<<grid, dim3(TX, BY), smem, st>>>(in, out, sig, rad, g, rt, L);
  return (int)cudaGetLastError();
}

template <int TYT, int BY>
int gather_shape(int lut, int narr, const float *in, float *out, const float *sig, const int *rad,
                 const ndf__ks_geom &g, const int *rt, const ndf__ks_lut &L, size_t smem,
                 cudaStream_t st) {
#define NDF__G(l, a)                                                                               \
  if (lut == l && narr == a) return gather<l, a, TYT, BY>(in, out, sig, rad, g, rt, L, smem, st);
#define NDF__GL(l) NDF__G(l, 0) NDF__G(l, 1) NDF__G(l, 2)
  NDF__GL(NDF__KS_EXACT)
  NDF__GL(NDF__KS_LUT1D_GLOBAL)
  NDF__GL(NDF__KS_LUT1D_SHARED)
  NDF__GL(NDF__KS_LUT1D_TEXTURE)
  NDF__GL(NDF__KS_LUT2D_GLOBAL)
  NDF__GL(NDF__KS_LUT2D_TEXTURE)
#undef NDF__GL
#undef NDF__G
  return (int)cudaErrorInvalidValue;
}

} // namespace

extern "C" int ndf__launch_ks_gather(int lut, int narr, int ty, int by, const float *in, float *out,
                                     const float *sig, const int *rad, const ndf__ks_geom *g,
                                     const int *rt, const ndf__ks_lut *L, size_t smem,
                                     void *stream) {
  if (g->m[0] == 0 || g->m[1] == 0 || g->m[2] == 0) return 0;
  cudaStream_t st = (cudaStream_t)stream;
#define NDF__SHAPE(t, b)                                                                           \
  if (ty == t && by == b)                                                                          \
    return gather_shape<t, b>(lut, narr, in, out, sig, rad, *g, rt, *L, smem, st);
  NDF__KS_SHAPES(NDF__SHAPE)
#undef NDF__SHAPE
  return (int)cudaErrorInvalidValue;
}
