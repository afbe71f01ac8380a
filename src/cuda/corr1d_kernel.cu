// SPDX-License-Identifier: BSD-3-Clause
// corr1d_kernel.cu - plain correlate1d kernel: one thread per output element, strided float32.
#include <cuda_runtime.h>

#include "../core/boundary.h"
#include "common.cuh"

__global__ void corr1d_direct(const float *__restrict__ in, ndf__view4 vin, float *__restrict__ out,
                              ndf__view4 vout, int axis, const float *__restrict__ w, int64_t n,
                              int64_t left, int mode, float cval) {
  const int64_t total = ndf__vsize(vout), len = vin.shape[axis], sa = vin.strides[axis];
  int64_t c[4];
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t oo = ndf__voff(vout, i, c);
    const int64_t x = c[axis];
    c[axis] = 0;
    const int64_t base = c[0] * vin.strides[0] + c[1] * vin.strides[1] + c[2] * vin.strides[2] +
                         c[3] * vin.strides[3];
    float acc = 0.f;
    for (int64_t j = 0; j < n; j++) {
      int64_t k = ndf__map_index(x + j - left, len, mode);
      acc += w[j] * (k < 0 ? cval : in[base + k * sa]);
    }
    out[oo] = acc;
  }
}

extern "C" int ndf__launch_corr1d_direct(const float *in, ndf__view4 vin, float *out,
                                         ndf__view4 vout, int axis4, const float *w, int64_t n,
                                         int64_t left, int mode, float cval, void *stream) {
  int64_t total = vout.shape[0] * vout.shape[1] * vout.shape[2] * vout.shape[3];
  corr1d_direct<<<ndf__grid(total, 256), 256, 0, (cudaStream_t)stream>>>(in, vin, out, vout, axis4,
                                                                         w, n, left, mode, cval);
  return (int)cudaGetLastError();
}
