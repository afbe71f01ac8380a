/* SPDX-License-Identifier: BSD-3-Clause */
/* median_int_kernel.cu - median_tile (median_tile.cuh) on uint8, uint16 and int16 samples as
 * they are: a quarter or half of float32's bytes to read, write and hold in shared memory, and
 * no conversions either side. A translation unit of its own, beside the float instances in
 * rank_kernel.cu. */
#include "median_tile.cuh"

extern "C" int ndf__launch_median_tile_int(const void *in, void *out, int dtype, const int64_t n[4],
                                           const int64_t left[4], const int mode[4], double cval,
                                           const ndf__median_tile *t, void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  switch (dtype) {
  case NDF_U8: return median((const uint8_t *)in, (uint8_t *)out, n, left, mode, cval, t, s);
  case NDF_U16: return median((const uint16_t *)in, (uint16_t *)out, n, left, mode, cval, t, s);
  case NDF_I16: return median((const int16_t *)in, (int16_t *)out, n, left, mode, cval, t, s);
  default: return (int)cudaErrorInvalidValue;
  }
}
