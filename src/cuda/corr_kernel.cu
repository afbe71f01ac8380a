// corr_kernel.cu - cuda_direct for N-dimensional correlation on contiguous float32 arrays.
//
// The arrays are seen as [n0][n1][Y][X]. A block makes a TY x TX output tile of one
// (n0, n1) plane. For every leading kernel index (j0, j1) the matching input plane (through
// the modes; a plane outside in constant mode is all cval) is staged in shared memory with
// the apron of a chunk of at most KC x KC kernel rows and columns, the modes applied once at
// staging; then each thread accumulates its TY/BY x TX/BX outputs from shared memory, the
// weight of each tap a uniform load. 3-D and 4-D kernels are thus accumulated 2-D passes
// over kernel slices, as in the seed (Eklund, sections 1.7-1.8), all in one launch.
#include <cuda_runtime.h>

#include "../core/boundary.h"
#include "common.cuh"

namespace {

constexpr int BX = 32, BY = 8;  // threads
constexpr int PX = 2, PY = 4;   // outputs per thread in x and y
constexpr int TX = BX * PX, TY = BY * PY;
constexpr int KC = 48;          // kernel chunk per axis (shared memory bound)

__global__ void __launch_bounds__(BX *BY)
    corr_tile(const float *__restrict__ in, float *__restrict__ out, int64_t n0, int64_t n1,
              int64_t Y, int64_t X, int64_t k0, int64_t k1, int ky, int kx, int64_t l0,
              int64_t l1, int64_t ly, int64_t lx, int m0, int m1, int my, int mx, float cval,
              const float *__restrict__ w) {
  extern __shared__ float s[];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x0 = (int64_t)blockIdx.x * TX, y0 = (int64_t)blockIdx.y * TY;
  for (int64_t plane = blockIdx.z; plane < n0 * n1; plane += gridDim.z) {
    const int64_t o0 = plane / n1, o1 = plane % n1;
    float acc[PY][PX];
#pragma unroll
    for (int p = 0; p < PY; p++)
#pragma unroll
      for (int q = 0; q < PX; q++)
        acc[p][q] = 0.f;
    for (int64_t j0 = 0; j0 < k0; j0++) {
      const int64_t i0 = ndf__map_index(o0 + j0 - l0, n0, m0);
      for (int64_t j1 = 0; j1 < k1; j1++) {
        const int64_t i1 = ndf__map_index(o1 + j1 - l1, n1, m1);
        const bool outside = i0 < 0 || i1 < 0; // the whole plane is cval
        const float *src = in + ((outside ? 0 : i0 * n1 + i1) * Y) * X;
        for (int cy = 0; cy < ky; cy += KC) {
          const int cyn = min(KC, ky - cy), H = TY + cyn - 1;
          for (int cx = 0; cx < kx; cx += KC) {
            const int cxn = min(KC, kx - cx), W = TX + cxn - 1;
            __syncthreads(); // the previous chunk's readers are done
            for (int r = ty; r < H; r += BY) {
              const int64_t yy = ndf__map_index(y0 + r + cy - ly, Y, my);
              for (int c = tx; c < W; c += BX) {
                const int64_t xx = ndf__map_index(x0 + c + cx - lx, X, mx);
                s[r * W + c] = outside || yy < 0 || xx < 0 ? cval : __ldg(src + yy * X + xx);
              }
            }
            __syncthreads();
            const float *wk = w + ((j0 * k1 + j1) * ky + cy) * (int64_t)kx + cx;
            for (int a = 0; a < cyn; a++)
              for (int b = 0; b < cxn; b++) {
                const float wv = __ldg(wk + (int64_t)a * kx + b);
                const float *sp = s + (ty + a) * W + tx + b;
#pragma unroll
                for (int p = 0; p < PY; p++)
#pragma unroll
                  for (int q = 0; q < PX; q++)
                    acc[p][q] = fmaf(wv, sp[p * BY * W + q * BX], acc[p][q]);
              }
          }
        }
      }
    }
    float *o = out + plane * Y * X;
#pragma unroll
    for (int p = 0; p < PY; p++)
#pragma unroll
      for (int q = 0; q < PX; q++) {
        const int64_t y = y0 + ty + p * BY, x = x0 + tx + q * BX;
        if (y < Y && x < X) o[y * X + x] = acc[p][q];
      }
  }
}

} // namespace

// Correlates a contiguous [n0][n1][Y][X] float32 array with a [k0][k1][ky][kx] kernel
// (w_dev, float32 on the device); l*: taps before the output point, m*: modes.
extern "C" int ndf__launch_corr_direct(const float *in, float *out, const int64_t n[4],
                                       const int64_t k[4], const int64_t left[4],
                                       const int mode[4], float cval, const float *w_dev,
                                       void *stream) {
  const int64_t tiles_x = (n[3] + TX - 1) / TX, tiles_y = (n[2] + TY - 1) / TY;
  const int64_t planes = n[0] * n[1];
  if (tiles_x >= (1LL << 31) || tiles_y > 65535 || k[2] >= (1LL << 31) || k[3] >= (1LL << 31))
    return (int)cudaErrorNotSupported;
  const int ky = (int)k[2], kx = (int)k[3];
  const int cyn = ky < KC ? ky : KC, cxn = kx < KC ? kx : KC;
  const size_t sm = (size_t)(TY + cyn - 1) * (TX + cxn - 1) * sizeof(float);
  cudaError_t e = cudaSuccess;
  if (sm > 48 * 1024)
    e = cudaFuncSetAttribute(corr_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
  if (e != cudaSuccess) return (int)e;
  const dim3 grid((unsigned)tiles_x, (unsigned)tiles_y,
                  (unsigned)(planes < 65535 ? planes : 65535));
  corr_tile<<<grid, dim3(BX, BY), sm, (cudaStream_t)stream>>>(
      in, out, n[0], n[1], n[2], n[3], k[0], k[1], ky, kx, left[0], left[1], left[2], left[3],
      mode[0], mode[1], mode[2], mode[3], cval, w_dev);
  return (int)cudaGetLastError();
}
