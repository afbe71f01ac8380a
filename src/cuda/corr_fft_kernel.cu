// corr_fft_kernel.cu - the element-wise kernels around cuFFT for cuda_fft (corr_fft.c):
// the mode-extended, zero-padded input in the transform buffer, the spectral product, and
// the crop of the result. All are memory-bound grid-stride loops over 4-D index spaces.
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

// One block row of threads per buffer row [t0][t1][t2]; x strided by the block.
__global__ void pad(const float *__restrict__ src, dims4 n, dims4 left, int m0, int m1, int m2,
                    int m3, float cval, dims4 e, float *__restrict__ buf, dims4 L, int64_t rs) {
  const int64_t rows = L.v[0] * L.v[1] * L.v[2];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t0 = r / (L.v[1] * L.v[2]), t1 = r / L.v[2] % L.v[1], t2 = r % L.v[2];
    float *row = buf + r * rs;
    const bool in_e = t0 < e.v[0] && t1 < e.v[1] && t2 < e.v[2];
    int64_t i0 = -1, i1 = -1, i2 = -1;
    if (in_e) {
      i0 = ndf__map_index(t0 - left.v[0], n.v[0], m0);
      i1 = ndf__map_index(t1 - left.v[1], n.v[1], m1);
      i2 = ndf__map_index(t2 - left.v[2], n.v[2], m2);
    }
    const bool cv = i0 < 0 || i1 < 0 || i2 < 0; // the whole row is cval (inside e)
    const float *s = src + ((cv ? 0 : i0 * n.v[1] + i1) * n.v[2] + (cv ? 0 : i2)) * n.v[3];
    for (int64_t x = threadIdx.x; x < rs; x += blockDim.x) {
      float v = 0.f;
      if (in_e && x < e.v[3]) {
        const int64_t ix = ndf__map_index(x - left.v[3], n.v[3], m3);
        v = cv || ix < 0 ? cval : __ldg(s + ix);
      }
      row[x] = v;
    }
  }
}

__global__ void product(const float2 *__restrict__ y, const float2 *__restrict__ h,
                        float2 *__restrict__ z, int64_t count) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float2 a = y[i], b = __ldg(h + i);
    z[i] = make_float2(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y); // a * conj(b)
  }
}

__global__ void crop(const float *__restrict__ buf, dims4 L, int64_t rs, float *__restrict__ out,
                     dims4 n) {
  const int64_t rows = n.v[0] * n.v[1] * n.v[2];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o0 = r / (n.v[1] * n.v[2]), o1 = r / n.v[2] % n.v[1], o2 = r % n.v[2];
    const float *s = buf + ((o0 * L.v[1] + o1) * L.v[2] + o2) * rs;
    float *o = out + r * n.v[3];
    for (int64_t x = threadIdx.x; x < n.v[3]; x += blockDim.x)
      o[x] = s[x];
  }
}

static unsigned blocks_for(int64_t rows) { return (unsigned)(rows < (1 << 20) ? rows : (1 << 20)); }

} // namespace

extern "C" int ndf__launch_fft_pad(const float *src, const int64_t n[4], const int64_t left[4],
                                   const int mode[4], float cval, const int64_t e[4], float *buf,
                                   const int64_t L[4], int64_t rs, void *stream) {
  const int64_t rows = L[0] * L[1] * L[2];
  const int threads = rs >= 256 ? 256 : rs >= 128 ? 128 : 64;
  pad<<<blocks_for(rows), threads, 0, (cudaStream_t)stream>>>(
      src, d4(n), d4(left), mode[0], mode[1], mode[2], mode[3], cval, d4(e), buf, d4(L), rs);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_fft_product(const void *y, const void *h, void *z, int64_t count,
                                       void *stream) {
  const int64_t b = (count + 255) / 256;
  product<<<(unsigned)(b < (1 << 20) ? b : (1 << 20)), 256, 0, (cudaStream_t)stream>>>(
      (const float2 *)y, (const float2 *)h, (float2 *)z, count);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_fft_crop(const float *buf, const int64_t L[4], int64_t rs, float *out,
                                    const int64_t n[4], void *stream) {
  const int64_t rows = n[0] * n[1] * n[2];
  const int threads = n[3] >= 256 ? 256 : n[3] >= 128 ? 128 : 64;
  crop<<<blocks_for(rows), threads, 0, (cudaStream_t)stream>>>(buf, d4(L), rs, out, d4(n));
  return (int)cudaGetLastError();
}
