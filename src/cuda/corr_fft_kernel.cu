// SPDX-License-Identifier: BSD-3-Clause
// corr_fft_kernel.cu - the element-wise kernels around cuFFT for cuda_fft and cuda_fft64
// (fft.c): the mode-extended, zero-padded input in the transform buffer, the spectral product,
// and the crop of the result. All are memory-bound grid-stride loops over 4-D index spaces,
// written once over the real type T (float, double); the entry points take a flag for it.
#include <cuda_runtime.h>

#include "../core/boundary.h"
#include "common.cuh"
#include "launch.h"

namespace {

struct dims4 {
  int64_t v[4];
};

static dims4 d4(const int64_t *a) {
  dims4 r;
  for (int i = 0; i < 4; i++)
    r.v[i] = a[i];
  return r;
}

// A warp per item, an item being a chunk of up to kChunk x-values of one buffer row
// [t0][t1][t2] (a long 1-D row is many items); blocks stride over the items. (A block per row
// spent most of its time on the row's index arithmetic and on block scheduling: ncu showed 11%
// of DRAM bandwidth at 85% issue activity on 256^3.)
constexpr int kWarps = 8, kChunk = 1024;

static __device__ __forceinline__ int64_t first_item() {
  return (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
}

// The complex type of a real type: cuFFT's cufftComplex / cufftDoubleComplex layout.
template <typename T> struct complex_of;
template <> struct complex_of<float> { typedef float2 type; };
template <> struct complex_of<double> { typedef double2 type; };

template <typename T>
__global__ void __launch_bounds__(32 * kWarps)
    pad(const T *__restrict__ src, dims4 n, dims4 left, int m0, int m1, int m2, int m3, T cval,
        dims4 e, T *__restrict__ buf, dims4 L, int64_t rs) {
  const int64_t L12 = L.v[1] * L.v[2];
  const int chunks = (int)((rs + kChunk - 1) / kChunk);
  const int64_t items = L.v[0] * L12 * chunks;
  const int lane = threadIdx.x & 31;
  const int nx = (int)n.v[3], ex = (int)e.v[3], lx = (int)left.v[3];
  for (int64_t it = first_item(); it < items; it += (int64_t)gridDim.x * kWarps) {
    const int64_t r = chunks == 1 ? it : it / chunks;
    const int x0 = (int)(it - r * chunks) * kChunk, x1 = (int)min((int64_t)x0 + kChunk, rs);
    const int64_t t0 = r / L12, rem = r - t0 * L12, t1 = rem / L.v[2], t2 = rem - t1 * L.v[2];
    T *row = buf + r * rs;
    const bool in_e = t0 < e.v[0] && t1 < e.v[1] && t2 < e.v[2];
    if (!in_e) {
      for (int x = x0 + lane; x < x1; x += 32)
        row[x] = T(0);
      continue;
    }
    const int64_t i0 = ndf__map_index(t0 - left.v[0], n.v[0], m0),
                  i1 = ndf__map_index(t1 - left.v[1], n.v[1], m1),
                  i2 = ndf__map_index(t2 - left.v[2], n.v[2], m2);
    const bool cv = i0 < 0 || i1 < 0 || i2 < 0; // the whole row is cval (inside e)
    const T *sr = src + ((cv ? 0 : i0 * n.v[1] + i1) * n.v[2] + (cv ? 0 : i2)) * n.v[3];
    for (int x = x0 + lane; x < x1; x += 32) {
      T v = T(0);
      if (x < ex) {
        const int ix = x - lx;
        if (cv)
          v = cval;
        else if (ix >= 0 && ix < nx)
          v = __ldg(sr + ix);
        else {
          const int64_t jx = ndf__map_index(ix, nx, m3);
          v = jx < 0 ? cval : __ldg(sr + jx);
        }
      }
      row[x] = v;
    }
  }
}

template <typename T>
__global__ void product(const typename complex_of<T>::type *__restrict__ y,
                        const typename complex_of<T>::type *__restrict__ h,
                        typename complex_of<T>::type *__restrict__ z, int64_t count) {
  typedef typename complex_of<T>::type C;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    const C a = y[i], b = __ldg(h + i);
    C p;
    p.x = a.x * b.x + a.y * b.y; // a * conj(b)
    p.y = a.y * b.x - a.x * b.y;
    z[i] = p;
  }
}

template <typename T>
__global__ void __launch_bounds__(32 * kWarps)
    crop(const T *__restrict__ buf, dims4 L, int64_t rs, T *__restrict__ out, dims4 n) {
  const int64_t n12 = n.v[1] * n.v[2];
  const int chunks = (int)((n.v[3] + kChunk - 1) / kChunk);
  const int64_t items = n.v[0] * n12 * chunks;
  const int lane = threadIdx.x & 31;
  for (int64_t it = first_item(); it < items; it += (int64_t)gridDim.x * kWarps) {
    const int64_t r = chunks == 1 ? it : it / chunks;
    const int x0 = (int)(it - r * chunks) * kChunk, x1 = (int)min((int64_t)x0 + kChunk, n.v[3]);
    const int64_t o0 = r / n12, rem = r - o0 * n12, o1 = rem / n.v[2], o2 = rem - o1 * n.v[2];
    const T *sr = buf + ((o0 * L.v[1] + o1) * L.v[2] + o2) * rs;
    T *o = out + r * n.v[3];
    for (int x = x0 + lane; x < x1; x += 32)
      o[x] = sr[x];
  }
}

// Blocks for a warp-per-item kernel over rows of x values: enough to fill the GPU a few times
// over, no more.
static unsigned item_blocks(int64_t rows, int64_t x) {
  const int64_t items = rows * ((x + kChunk - 1) / kChunk), b = (items + kWarps - 1) / kWarps,
                cap = 132 * 32;
  return (unsigned)(b < cap ? b : cap);
}

template <typename T>
static int launch_pad(const void *src, const int64_t n[4], const int64_t left[4], const int mode[4],
                      double cval, const int64_t e[4], void *buf, const int64_t L[4], int64_t rs,
                      cudaStream_t st) {
  const int64_t rows = L[0] * L[1] * L[2];
  pad<T><<<item_blocks(rows, rs), 32 * kWarps, 0, st>>>((const T *)src, d4(n), d4(left), mode[0],
                                                        mode[1], mode[2], mode[3], (T)cval, d4(e),
                                                        (T *)buf, d4(L), rs);
  return (int)cudaGetLastError();
}

template <typename T>
static int launch_product(const void *y, const void *h, void *z, int64_t count, cudaStream_t st) {
  typedef typename complex_of<T>::type C;
  const int64_t b = (count + 255) / 256;
  product<T><<<(unsigned)(b < (1 << 20) ? b : (1 << 20)), 256, 0, st>>>((const C *)y, (const C *)h,
                                                                        (C *)z, count);
  return (int)cudaGetLastError();
}

template <typename T>
static int launch_crop(const void *buf, const int64_t L[4], int64_t rs, void *out,
                       const int64_t n[4], cudaStream_t st) {
  const int64_t rows = n[0] * n[1] * n[2];
  crop<T>
      <<<item_blocks(rows, n[3]), 32 * kWarps, 0, st>>>((const T *)buf, d4(L), rs, (T *)out, d4(n));
  return (int)cudaGetLastError();
}

} // namespace

extern "C" int ndf__launch_fft_pad(const void *src, const int64_t n[4], const int64_t left[4],
                                   const int mode[4], double cval, const int64_t e[4], void *buf,
                                   const int64_t L[4], int64_t rs, int f64, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  return f64 ? launch_pad<double>(src, n, left, mode, cval, e, buf, L, rs, st)
             : launch_pad<float>(src, n, left, mode, cval, e, buf, L, rs, st);
}

extern "C" int ndf__launch_fft_product(const void *y, const void *h, void *z, int64_t count,
                                       int f64, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  return f64 ? launch_product<double>(y, h, z, count, st)
             : launch_product<float>(y, h, z, count, st);
}

extern "C" int ndf__launch_fft_crop(const void *buf, const int64_t L[4], int64_t rs, void *out,
                                    const int64_t n[4], int f64, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  return f64 ? launch_crop<double>(buf, L, rs, out, n, st)
             : launch_crop<float>(buf, L, rs, out, n, st);
}
