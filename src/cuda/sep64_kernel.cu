/* SPDX-License-Identifier: BSD-3-Clause */
/* sep64_kernel.cu - one pass of cuda_sep64: a separable filter's pass along one axis of a
 * contiguous float64 array, computed in float64 (as scipy computes a float64 input). The array is
 * seen as [P][L][Q] about the axis; a thread an output sums the taps in order (fused
 * multiply-adds), reading the samples through L1/L2: across q for a slow axis and along i for the
 * last, a warp's reads of one tap are neighbours in memory either way. Outputs whose window
 * lies inside the line read by offsets, the others through the mode. */
#include <stdint.h>

#include "common.cuh"

namespace {

constexpr int B64 = 256; /* threads a block */

__global__ void __launch_bounds__(B64)
    sep64_pass(const double *in, double *out, int64_t P, int64_t L, int64_t Q, const double *w,
               int n, int64_t left, int mode, double cval) {
  const int64_t total = P * L * Q;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t q = t % Q, i = t / Q % L, p = t / Q / L;
    const double *line = in + p * L * Q + q;
    double acc = 0;
    if (i - left >= 0 && i - left + n <= L) {
      const double *x = line + (i - left) * Q;
      for (int j = 0; j < n; j++)
        acc = fma(__ldg(w + j), __ldg(x + j * Q), acc);
    } else {
      for (int j = 0; j < n; j++)
        acc = fma(__ldg(w + j), ndf__line_at(line, 0, L, Q, i - left + j, mode, cval), acc);
    }
    out[t] = acc;
  }
}

} // namespace

extern "C" int ndf__launch_sep64(const double *in, double *out, int64_t P, int64_t L, int64_t Q,
                                 const double *w_dev, int n, int64_t left, int mode, double cval,
                                 void *stream) {
  const int64_t total = P * L * Q;
  if (total == 0) return 0;
  sep64_pass<<<ndf__grid(total, B64), B64, 0, (cudaStream_t)stream>>>(in, out, P, L, Q, w_dev, n,
                                                                      left, mode, cval);
  return (int)cudaGetLastError();
}
