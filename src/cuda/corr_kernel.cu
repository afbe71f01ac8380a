// SPDX-License-Identifier: BSD-3-Clause
// corr_kernel.cu - cuda_direct for N-dimensional correlation on contiguous float32 arrays, and
// cuda_direct64 on float64 ones.
//
// The arrays are seen as [n0][n1][Y][X]. A block makes a TY x TX output tile of one
// (n0, n1) plane. For every leading kernel index (j0, j1) the matching input plane (through
// the modes; a plane outside in constant mode is all cval) is staged in shared memory with
// the apron of a chunk of at most 48 x 48 (float64: 32 x 32) kernel rows and columns, the
// modes applied once at staging; then each thread accumulates its TY/BY x TX/BX outputs from shared
// memory, the weight of each tap a uniform load. 3-D and 4-D kernels are thus accumulated 2-D
// passes over kernel slices, as in Eklund and Dufort (sections 1.7-1.8), all in one launch.
#include <stdint.h>

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "../core/boundary.h"
#include "common.cuh"

namespace {

constexpr int BX = 32, BY = 8; // threads
constexpr int PX = 2, PY = 4;  // outputs per thread in x and y
constexpr int TX = BX * PX, TY = BY * PY;
// Kernel chunk per axis (shared memory bound: 35 KiB of float32, 47 KiB of float64).
template <typename T> __host__ __device__ constexpr int kc() { return sizeof(T) == 4 ? 48 : 32; }

// T: the samples, weights and sums (float32, or float64 for float64 arrays). SKIP: zero weights
// are left out of the sum (scipy's footprint: a NaN or Inf under one does not reach the output);
// a uniform branch, so the other instance keeps the plain loop.
template <typename T, bool SKIP>
__global__ void __launch_bounds__(BX *BY)
    corr_tile(const T *__restrict__ in, T *__restrict__ out, int64_t n0, int64_t n1, int64_t Y,
              int64_t X, int64_t k0, int64_t k1, int ky, int kx, int64_t l0, int64_t l1, int64_t ly,
              int64_t lx, int m0, int m1, int my, int mx, T cval, const T *__restrict__ w) {
  extern __shared__ __align__(16) unsigned char corr_smem[];
  T *s = reinterpret_cast<T *>(corr_smem);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x0 = (int64_t)blockIdx.x * TX, y0 = (int64_t)blockIdx.y * TY;
  for (int64_t plane = blockIdx.z; plane < n0 * n1; plane += gridDim.z) {
    const int64_t o0 = plane / n1, o1 = plane % n1;
    T acc[PY][PX];
#pragma unroll
    for (int p = 0; p < PY; p++)
#pragma unroll
      for (int q = 0; q < PX; q++)
        acc[p][q] = 0;
    for (int64_t j0 = 0; j0 < k0; j0++) {
      const int64_t i0 = ndf__map_index(o0 + j0 - l0, n0, m0);
      for (int64_t j1 = 0; j1 < k1; j1++) {
        const int64_t i1 = ndf__map_index(o1 + j1 - l1, n1, m1);
        const bool outside = i0 < 0 || i1 < 0; // the whole plane is cval
        const T *src = in + ((outside ? 0 : i0 * n1 + i1) * Y) * X;
        for (int cy = 0; cy < ky; cy += kc<T>()) {
          const int cyn = min(kc<T>(), ky - cy), H = TY + cyn - 1;
          for (int cx = 0; cx < kx; cx += kc<T>()) {
            const int cxn = min(kc<T>(), kx - cx), W = TX + cxn - 1;
            __syncthreads(); // the previous chunk's readers are done
            for (int r = ty; r < H; r += BY) {
              const int64_t yy = ndf__map_index(y0 + r + cy - ly, Y, my);
              for (int c = tx; c < W; c += BX) {
                const int64_t xx = ndf__map_index(x0 + c + cx - lx, X, mx);
                s[r * W + c] = outside || yy < 0 || xx < 0 ? cval : __ldg(src + yy * X + xx);
              }
            }
            __syncthreads();
            const T *wk = w + ((j0 * k1 + j1) * ky + cy) * (int64_t)kx + cx;
            for (int a = 0; a < cyn; a++)
              for (int b = 0; b < cxn; b++) {
                const T wv = __ldg(wk + (int64_t)a * kx + b);
                if (SKIP && wv == 0) continue;
                const T *sp = s + (ty + a) * W + tx + b;
#pragma unroll
                for (int p = 0; p < PY; p++)
#pragma unroll
                  for (int q = 0; q < PX; q++)
                    acc[p][q] = fma(wv, sp[p * BY * W + q * BX], acc[p][q]);
              }
          }
        }
      }
    }
    T *o = out + plane * Y * X;
#pragma unroll
    for (int p = 0; p < PY; p++)
#pragma unroll
      for (int q = 0; q < PX; q++) {
        const int64_t y = y0 + ty + p * BY, x = x0 + tx + q * BX;
        if (y < Y && x < X) o[y * X + x] = acc[p][q];
      }
  }
}

// ---------------------------------------------------------------- the specialised path
//
// corr_reg<KX>: x taps fixed at compile time (odd, 3..17), y taps at run time (<= RKY).
// A block of RBX x RBY threads makes an RTY x RTX output tile of one plane; each thread a
// column of RQ rows by RP adjacent outputs (RP = 4: one float4 apart from the next thread,
// so a warp's 128-bit shared loads are conflict-free). For each kernel row a, a thread keeps
// the KX weights in registers (uniform loads, any memory: KX loads per RQ * RP * KX FMAs) and,
// per output row, RP + KX - 1 staged samples (float4 loads), so the inner loop is FFMAs on
// registers. Leading kernel axes are accumulated 2-D passes over staged slices, as corr_tile.
// A filter bank's kernels run in turn over the same tile; in 2-D the tile is staged once for
// all of them.
constexpr int RBX = 32, RBY = 8, RP = 4;
constexpr int RTX = RBX * RP; // 128 outputs wide; RBY * RQ tall (RQ = 8, or 4 for few taps:
                              // more blocks where staging, not FMAs, sets the pace)
constexpr int RKY = 17;       // the most y taps this path stages
constexpr int RMAXF = 16;     // outputs per launch

struct outs_t {
  float *p[RMAXF];
};

// Staged floats per row: the tile, the apron and the last thread's float4 overrun, a multiple
// of 4.
template <int KX> __host__ __device__ constexpr int row_width() {
  return RTX - RP + (RP + KX - 1 + 3) / 4 * 4;
}

// Stages a slice's tile with its apron (H rows of SW floats) into s: asynchronous copies
// (cp.async, 4 bytes each: any alignment) from the input, or stores of cval; the caller
// commits, waits and synchronises.
template <int SW>
__device__ __forceinline__ void
stage_tile(float *s, const float *__restrict__ src, bool cv, bool inside, int64_t y0, int64_t x0,
           int H, int64_t Y, int64_t X, int64_t ly, int64_t lx, int my, int mx, float cval) {
  const int tid = threadIdx.y * RBX + threadIdx.x, total = H * SW;
  if (cv) {
    for (int i = tid; i < total; i += RBX * RBY)
      s[i] = cval;
  } else if (inside) {
    const float *b = src + (y0 - ly) * X + (x0 - lx);
#pragma unroll 4
    for (int i = tid; i < total; i += RBX * RBY) {
      const int r = i / SW, c = i - r * SW;
      __pipeline_memcpy_async(s + i, b + (int64_t)r * X + c, 4);
    }
  } else {
    for (int i = tid; i < total; i += RBX * RBY) {
      const int r = i / SW, c = i - r * SW;
      const int64_t yy = ndf__map_index(y0 + r - ly, Y, my);
      const int64_t xx = ndf__map_index(x0 + c - lx, X, mx);
      if (yy < 0 || xx < 0)
        s[i] = cval;
      else
        __pipeline_memcpy_async(s + i, src + yy * X + xx, 4);
    }
  }
  __pipeline_commit();
}

template <int KX, int RQ>
__global__ void __launch_bounds__(RBX *RBY, KX <= 5   ? 4
                                            : RQ == 4 ? 3
                                                      : 2)
    corr_reg(const float *__restrict__ in, outs_t outs, int nf, int64_t n0, int64_t n1, int64_t Y,
             int64_t X, int64_t k0, int64_t k1, int ky, int64_t l0, int64_t l1, int64_t ly,
             int64_t lx, int m0, int m1, int my, int mx, float cval, const float *__restrict__ w) {
  constexpr int SW = row_width<KX>();
  constexpr int NV = (RP + KX - 1 + 3) / 4; // float4 loads per staged row segment
  constexpr int RTY = RBY * RQ;
  extern __shared__ float4 s4[];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x0 = (int64_t)blockIdx.x * RTX, y0 = (int64_t)blockIdx.y * RTY;
  const int H = RTY + ky - 1;
  float *const buf0 = reinterpret_cast<float *>(s4); // slice buffers: buf0 + (t & 1) * H * SW
  const int64_t nw2 = (int64_t)ky * KX;              // weights per slice
  // Is the tile's apron inside the plane on both axes (no mode mapping)?
  const bool inside = y0 - ly >= 0 && y0 + H - ly <= Y && x0 - lx >= 0 && x0 + SW - lx <= X;
  const int64_t ns = k0 * k1;           // slices per kernel
  const bool once = ns == 1;            // a 2-D kernel: the tile is staged once for every filter
  const int64_t T = once ? 1 : nf * ns; // slices staged per plane
  for (int64_t plane = blockIdx.z; plane < n0 * n1; plane += gridDim.z) {
    const int64_t o0 = plane / n1, o1 = plane % n1;
    // The slice staged at step t (of kernel t / ns, leading index t % ns).
    auto stage = [&](int64_t t) {
      const int64_t j = t % ns, j0 = j / k1, j1 = j % k1;
      const int64_t i0 = ndf__map_index(o0 + j0 - l0, n0, m0);
      const int64_t i1 = ndf__map_index(o1 + j1 - l1, n1, m1);
      const bool cv = i0 < 0 || i1 < 0; // the whole slice is cval
      stage_tile<SW>(buf0 + (t & 1) * H * SW, in + ((cv ? 0 : i0 * n1 + i1) * Y) * X, cv, inside,
                     y0, x0, H, Y, X, ly, lx, my, mx, cval);
    };
    __syncthreads(); // the previous plane's readers are done with both buffers
    stage(0);
    float acc[RQ][RP];
    for (int64_t t = 0; t < nf * ns; t++) {
      const int64_t f = t / ns, j = t % ns;
      if (t < T) { // the next slice into the other buffer, while this one is used
        if (t + 1 < T) stage(t + 1);
        __pipeline_wait_prior(t + 1 < T ? 1 : 0);
        __syncthreads();
      }
      if (j == 0) {
#pragma unroll
        for (int q = 0; q < RQ; q++)
#pragma unroll
          for (int p = 0; p < RP; p++)
            acc[q][p] = 0.f;
      }
      const float *s = buf0 + (once ? 0 : t & 1) * H * SW;
      const float *wk = w + (f * ns + j) * nw2;
      for (int a = 0; a < ky; a++) {
        float wr[KX];
#pragma unroll
        for (int b = 0; b < KX; b++)
          wr[b] = __ldg(wk + a * KX + b);
#pragma unroll
        for (int q = 0; q < RQ; q++) {
          const float4 *row =
              reinterpret_cast<const float4 *>(s + (ty * RQ + q + a) * SW + tx * RP);
          float v[NV * 4];
#pragma unroll
          for (int i = 0; i < NV; i++) {
            const float4 u = row[i];
            v[4 * i] = u.x;
            v[4 * i + 1] = u.y;
            v[4 * i + 2] = u.z;
            v[4 * i + 3] = u.w;
          }
#pragma unroll
          for (int b = 0; b < KX; b++)
#pragma unroll
            for (int p = 0; p < RP; p++)
              acc[q][p] = fmaf(wr[b], v[p + b], acc[q][p]);
        }
      }
      if (t + 1 < T) __syncthreads(); // readers done before the buffer is restaged
      if (j + 1 < ns) continue;
      float *o = outs.p[0]; // selected, not indexed: an index would copy outs to the stack
#pragma unroll
      for (int i = 1; i < RMAXF; i++)
        o = i == f ? outs.p[i] : o;
      o += plane * Y * X;
      const int64_t x = x0 + tx * RP;
#pragma unroll
      for (int q = 0; q < RQ; q++) {
        const int64_t y = y0 + ty * RQ + q;
        if (y >= Y) break;
        float *d = o + y * X + x;
        if (x + RP <= X && (X & 3) == 0 && ((uintptr_t)o & 15) == 0) {
          *reinterpret_cast<float4 *>(d) = make_float4(acc[q][0], acc[q][1], acc[q][2], acc[q][3]);
        } else {
#pragma unroll
          for (int p = 0; p < RP; p++)
            if (x + p < X) d[p] = acc[q][p];
        }
      }
    }
  }
}

template <int KX, int RQ>
static int launch_reg(const float *in, outs_t o, int nf, const int64_t n[4], const int64_t k[4],
                      const int64_t left[4], const int mode[4], float cval, const float *w,
                      cudaStream_t st) {
  constexpr int RTY = RBY * RQ;
  const int bufs = k[0] * k[1] > 1 ? 2 : 1; /* double-buffered slices */
  const size_t sm = (size_t)bufs * (RTY + k[2] - 1) * row_width<KX>() * sizeof(float);
  cudaError_t e = cudaSuccess;
  if (sm > 48 * 1024)
    e = cudaFuncSetAttribute(corr_reg<KX, RQ>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)sm);
  if (e != cudaSuccess) return (int)e;
  const int64_t planes = n[0] * n[1];
  const dim3 grid((unsigned)((n[3] + RTX - 1) / RTX), (unsigned)((n[2] + RTY - 1) / RTY),
                  (unsigned)(planes < 65535 ? planes : 65535));
  corr_reg<KX, RQ><<<grid, dim3(RBX, RBY), sm, st>>>(in, o, nf, n[0], n[1], n[2], n[3], k[0], k[1],
                                                     (int)k[2], left[0], left[1], left[2], left[3],
                                                     mode[0], mode[1], mode[2], mode[3], cval, w);
  return (int)cudaGetLastError();
}

// corr_tile over nf kernels in turn.
template <typename T>
static int launch_tile(const T *in, T *const *outs, int nf, const int64_t n[4], const int64_t k[4],
                       const int64_t left[4], const int mode[4], T cval, const T *w_dev,
                       int skip_zero, cudaStream_t st) {
  const int64_t nw = k[0] * k[1] * k[2] * k[3];
  const int ky = (int)k[2], kx = (int)k[3];
  const int cyn = ky < kc<T>() ? ky : kc<T>(), cxn = kx < kc<T>() ? kx : kc<T>();
  const size_t sm = (size_t)(TY + cyn - 1) * (TX + cxn - 1) * sizeof(T);
  cudaError_t e = cudaSuccess;
  auto *tile = skip_zero ? corr_tile<T, true> : corr_tile<T, false>;
  if (sm > 48 * 1024)
    e = cudaFuncSetAttribute(tile, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
  if (e != cudaSuccess) return (int)e;
  const int64_t planes = n[0] * n[1];
  const dim3 grid((unsigned)((n[3] + TX - 1) / TX), (unsigned)((n[2] + TY - 1) / TY),
                  (unsigned)(planes < 65535 ? planes : 65535));
  for (int f = 0; f < nf && e == cudaSuccess; f++) {
    tile<<<grid, dim3(BX, BY), sm, st>>>(in, outs[f], n[0], n[1], n[2], n[3], k[0], k[1], ky, kx,
                                         left[0], left[1], left[2], left[3], mode[0], mode[1],
                                         mode[2], mode[3], cval, w_dev + f * nw);
    e = cudaGetLastError();
  }
  return (int)e;
}

/* The grid's limits. */
static bool tiles_fit(const int64_t n[4], const int64_t k[4]) {
  return (n[3] + TX - 1) / TX < (1LL << 31) && (n[2] + TY - 1) / TY <= 65535 &&
         k[2] < (1LL << 31) && k[3] < (1LL << 31);
}

} // namespace

// Correlates a contiguous [n0][n1][Y][X] float32 array with nf [k0][k1][ky][kx] kernels
// (w_dev: float32 on the device, one after the other) into outs[0..nf-1]; l*: taps before the
// output point, m*: modes. Odd x taps 3..17 with at most RKY y taps take the specialised path,
// unless skip_zero asks for zero weights to be left out of the sum (the generic path does it).
extern "C" int ndf__launch_corr_direct(const float *in, float *const *outs, int nf,
                                       const int64_t n[4], const int64_t k[4],
                                       const int64_t left[4], const int mode[4], float cval,
                                       const float *w_dev, int skip_zero, void *stream) {
  const cudaStream_t st = (cudaStream_t)stream;
  if (!tiles_fit(n, k)) return (int)cudaErrorNotSupported;
  const int64_t nw = k[0] * k[1] * k[2] * k[3];
  if (k[2] <= RKY && n[2] > 8 && !skip_zero) {
    for (int f0 = 0; f0 < nf; f0 += RMAXF) {
      outs_t o;
      const int m = nf - f0 < RMAXF ? nf - f0 : RMAXF;
      for (int i = 0; i < m; i++)
        o.p[i] = outs[f0 + i];
      const float *w = w_dev + f0 * nw;
      int e = -1;
      // (a list of macro calls clang-format cannot lay out)
      // clang-format off
      switch (k[3]) {
#define NDF_REG(KX)                                                                                \
  case KX: e = launch_reg<KX, (KX <= 7 ? 4 : 8)>(in, o, m, n, k, left, mode, cval, w, st); break;
        NDF_REG(3) NDF_REG(5) NDF_REG(7) NDF_REG(9) NDF_REG(11) NDF_REG(13) NDF_REG(15) NDF_REG(17)
#undef NDF_REG
      default: break;
      }
      // clang-format on
      if (e > 0) return e;
      if (e < 0) break; /* not specialised: the generic path */
      if (f0 + m == nf) return 0;
    }
  }
  return launch_tile(in, outs, nf, n, k, left, mode, cval, w_dev, skip_zero, st);
}

// The same correlation of a float64 array in float64 (weights float64 on the device), by the
// generic path: a sum of fused multiply-adds in the kernel's order for each output.
extern "C" int ndf__launch_corr_direct64(const double *in, double *const *outs, int nf,
                                         const int64_t n[4], const int64_t k[4],
                                         const int64_t left[4], const int mode[4], double cval,
                                         const double *w_dev, int skip_zero, void *stream) {
  if (!tiles_fit(n, k)) return (int)cudaErrorNotSupported;
  return launch_tile(in, outs, nf, n, k, left, mode, cval, w_dev, skip_zero, (cudaStream_t)stream);
}
