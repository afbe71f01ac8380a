// iir_chunk_kernel.cu - cuda_iir's pass for the parallel form (Deriche) on lines that fit in
// one block: every line is read once and written once, its chunks held in registers.
//
// The filter is the sum of first-order complex recursions (core/iir.h, pole and res): with
// z_k[i] = p_k z_k[i-1] + x[i] and s_k[i] = p_k s_k[i+1] + x[i],
//     y[i] = sum_k Re(rho_k (z_k[i] + s_k[i])) - R x[i],   R = sum_k Re(rho_k),
// the causal part counting x[i] once and the anticausal part not at all. Unlike the direct
// form, a first-order recursion keeps its accuracy in float32 state: measured 3e-7 of the
// largest value against the float64 direct form from sigma 1 to 200. The state grows as
// 1 / (1 - |p|), about sigma / 1.7 times the input, and its rounding with it: at sigma 1000 a
// test saw 3.6e-5, so past sigma 256 the pass is iir_kernel.cu's (float64 state). The float32
// poles are the rounded ones, and rho is rescaled so that the rounded filter's DC gain is 1.
//
// A line of length L is cut into nc = ceil(L / C) chunks of C samples (C = 8, 16, 32 as L
// grows; nc <= 64), one thread per chunk, LB lines per block (thread t: line t % LB, chunk
// t / LB). For each group of LB lines a block:
//  1. loads its chunks into registers (past the end of the line: the last sample, the
//     'nearest' extension) and sums each into the recursions' chunk-local end states,
//       E_k = sum_j p^(C-1-j) x[j] (causal),  F_k = sum_j p^j x[j] (anticausal),
//     the first and last chunks adding the constant extensions' steady states;
//  2. posts them to shared memory, where 4 LB threads (a recursion and a line each) chain
//     them in order (z = p^C z + E), leaving each chunk the state that enters it;
//  3. runs both recursions over its registers and stores its chunks.
// All loads of a line happen before any store of it, so a pass may run in place.
// Measured on an H200 (256^3, 16.7 M samples a pass): ~0.08 ms a pass, against 0.04 ms for a
// copy: about 45 instructions a sample (33 of them the arithmetic above) and the chaining's
// serial steps are not all hidden behind the memory traffic.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <stdint.h>

#include <complex>

#include "../core/iir.h"
#include "iir_chunk.cuh"
#include "launch.h"

namespace {

using namespace ndf_iir;

constexpr int kMaxThreads = 512, kMaxChunks = 64;

// Issues the copies of line group g's rows (LB contiguous rows) into the stage buffer xs
// (xs[r * pitch + c]), cooperatively.
template <bool VEC>
__device__ __forceinline__ void fetch_rows(const float *src, float *xs, int64_t g, int64_t lines,
                                           int L, int LB, int pitch) {
  const int t = threadIdx.x, n = blockDim.x;
  const int64_t r0 = g * LB;
  const int rows = (int)min((int64_t)LB, lines - r0);
  const float *s = src + r0 * L;
  if (VEC) {
    const int m = rows * L / 4;
    for (int e = t; e < m; e += n) {
      const int r = 4 * e / L, c = 4 * e - r * L;
      __pipeline_memcpy_async(xs + r * pitch + c, s + 4 * e, 16);
    }
  } else {
    const int m = rows * L;
    for (int e = t; e < m; e += n) {
      const int r = e / L;
      __pipeline_memcpy_async(xs + r * pitch + e - r * L, s + e, 4);
    }
  }
  __pipeline_commit();
}

// Loads thread t's chunk of line group g along a column ([P][L][Q], Q > 1) into x, past the
// line's end (and on no line) the last sample (0); xe: the last sample of the last chunk.
template <int C>
__device__ __forceinline__ void load_col(const float *src, int64_t g, int64_t lines, int L,
                                         int64_t Q, int LB, float (&x)[C], float &xe) {
  const int t = threadIdx.x, l = t % LB, i0 = t / LB * C;
  const int64_t line = g * LB + l;
  xe = 0;
  if (line >= lines) {
#pragma unroll
    for (int j = 0; j < C; j++)
      x[j] = 0;
    return;
  }
  const int64_t p = line / Q;
  const float *s = src + p * L * Q + (line - p * Q) + i0 * Q;
  if (i0 + C >= L) xe = s[(L - 1 - i0) * Q];
#pragma unroll
  for (int j = 0; j < C; j++)
    x[j] = i0 + j < L ? s[j * Q] : xe;
}

// Along L of [P][L][Q]. The blocks stay resident and take line groups in turn, the next
// group's loads in flight while the current one is filtered. ROW (Q == 1): the block's LB rows
// are one contiguous piece, staged through shared memory (cp.async into the other of two
// stage buffers; VEC: 16-byte copies, L % 4 == 0 and 16-byte aligned arrays). Else each
// thread loads its chunk into registers (a warp's loads are LB neighbouring columns), the next
// group's into xn while the current one is filtered.
template <int C, bool ROW, bool VEC>
__global__ void __launch_bounds__(kMaxThreads, C <= 16 ? 2 : 1)
    iir_chunks(const float *src, float *dst, int64_t lines, int L, int64_t Q, int LB,
               const chunkp<C> f) {
  // [4][nc][LB] float2: causal pole 0, 1, anticausal pole 0, 1; then two stage buffers of
  // `stage` floats
  extern __shared__ float4 sh4[];
  float2 *car = reinterpret_cast<float2 *>(sh4);
  const int t = threadIdx.x, l = t % LB, w = t / LB, n = blockDim.x, nc = n / LB;
  const int i0 = w * C;
  const int pitch = nc * C + 4; // ROW: rows 4 banks apart, float4-aligned
  const int stage = LB * pitch;
  float *buf = reinterpret_cast<float *>(car + 4 * n);
  const int64_t groups = (lines + LB - 1) / LB;
  int64_t g = blockIdx.x;
  float x[C], xn[C], xe = 0, xen = 0; // xn, xen: the next group's (columns)
  if (g < groups) {
    if (ROW)
      fetch_rows<VEC>(src, buf, g, lines, L, LB, pitch);
    else
      load_col<C>(src, g, lines, L, Q, LB, xn, xen);
  }
  for (int it = 0; g < groups; g += gridDim.x, it ^= 1) {
    float *xs = buf + it * stage;
    const int64_t line = g * LB + l;
    const bool live = line < lines;
    if (ROW) {
      if (g + gridDim.x < groups)
        fetch_rows<VEC>(src, buf + (it ^ 1) * stage, g + gridDim.x, lines, L, LB, pitch);
      else
        __pipeline_commit(); // an empty group keeps the count
      __pipeline_wait_prior(1);
      __syncthreads(); // the rows came from every thread's copies
    } else {
#pragma unroll
      for (int j = 0; j < C; j++)
        x[j] = xn[j];
      xe = xen;
    }
    if (ROW) {
      if (live) {
        const float *row = xs + l * pitch;
        xe = row[L - 1];
#pragma unroll
        for (int j = 0; j < C; j += 4) {
          const float4 v = *reinterpret_cast<const float4 *>(row + i0 + j);
          x[j] = i0 + j < L ? v.x : xe;
          x[j + 1] = i0 + j + 1 < L ? v.y : xe;
          x[j + 2] = i0 + j + 2 < L ? v.z : xe;
          x[j + 3] = i0 + j + 3 < L ? v.w : xe;
        }
      } else {
#pragma unroll
        for (int j = 0; j < C; j++)
          x[j] = 0;
      }
    }
    // 1. chunk-local end states
    {
      float2 E[2], F[2];
      chunk_ends<C>(f, x, E, F);
#pragma unroll
      for (int k = 0; k < 2; k++) {
        if (w == 0) E[k] = cfma(f.pC[k], cscale(f.g[k], x[0]), E[k]);
        if (w == nc - 1) F[k] = cfma(f.pC[k], cscale(f.g[k], xe), F[k]);
        car[k * n + t] = E[k];
        car[(2 + k) * n + t] = F[k];
      }
    }
    if (!ROW && g + gridDim.x < groups) load_col<C>(src, g + gridDim.x, lines, L, Q, LB, xn, xen);
    __syncthreads();
    // 2. chain the chunks: 4 LB threads (or all), one a recursion and line, replace each
    // chunk's end state by the state entering it (causal: before its first sample;
    // anticausal: after its last)
    for (int u = t; u < 4 * LB; u += n) {
      const int k = u / LB, cl = u % LB;
      chain(car + k * n + cl, LB, nc, f.pC[k & 1], k < 2);
    }
    __syncthreads();
    float2 z[2], s[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      z[k] = w == 0 ? cscale(f.g[k], x[0]) : car[k * n + t];
      s[k] = w == nc - 1 ? cscale(f.g[k], xe) : car[(2 + k) * n + t];
    }
    // 3. the recursions over the chunk
    float y[C];
    chunk_filter<C>(f, x, z, s, y);
    if (ROW) {
      if (live) {
        float *row = xs + l * pitch;
#pragma unroll
        for (int j = 0; j < C; j += 4)
          *reinterpret_cast<float4 *>(row + i0 + j) =
              make_float4(y[j], y[j + 1], y[j + 2], y[j + 3]);
      }
      __syncthreads();
      const int64_t r0 = g * LB;
      const int rows = (int)min((int64_t)LB, lines - r0);
      float *d = dst + r0 * L;
      if (VEC) {
        const int m = rows * L / 4;
        for (int e = t; e < m; e += n) {
          const int r = 4 * e / L, c = 4 * e - r * L;
          reinterpret_cast<float4 *>(d)[e] = *reinterpret_cast<const float4 *>(xs + r * pitch + c);
        }
      } else {
        const int m = rows * L;
        for (int e = t; e < m; e += n) {
          const int r = e / L;
          d[e] = xs[r * pitch + e - r * L];
        }
      }
    } else if (live) {
      const int64_t p = line / Q;
      float *d = dst + p * L * Q + (line - p * Q) + (int64_t)i0 * Q;
#pragma unroll
      for (int j = 0; j < C; j++)
        if (i0 + j < L) d[j * Q] = y[j];
    }
    __syncthreads(); // xs (ROW) and car are reused
  }
  if (ROW) __pipeline_wait_prior(0);
}

// The chunk length for lines of length L: short chunks keep more lines per block.
int chunk_len(int64_t L) { return L <= 128 ? 8 : L <= 512 ? 16 : 32; }

template <int C>
int launch(const float *src, float *dst, int64_t P, int64_t L, int64_t Q, const ndf__iir &f,
           cudaStream_t st) {
  const int nc = (int)((L + C - 1) / C);
  int LB = 32;
  while (LB > 1 && LB * nc > kMaxThreads)
    LB /= 2;
  const int64_t lines = P * Q, groups = (lines + LB - 1) / LB;
  const int n = LB * nc;
  const size_t stage = Q == 1 ? (size_t)LB * (nc * C + 4) : 0;
  const size_t smem = (size_t)4 * n * sizeof(float2) + 2 * stage * sizeof(float);
  const chunkp<C> q = params<C>(f);
  const bool vec = Q == 1 && L % 4 == 0 && ((uintptr_t)src | (uintptr_t)dst) % 16 == 0;
  void (*k)(const float *, float *, int64_t, int, int64_t, int, const chunkp<C>) =
      Q > 1 ? iir_chunks<C, false, false>
      : vec ? iir_chunks<C, true, true>
            : iir_chunks<C, true, false>;
  const cudaError_t err =
      cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return (int)err;
  int dev = 0, sms = 0, per = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, n, smem);
  const int64_t resident = (int64_t)sms * (per > 0 ? per : 1);
  k<<<(unsigned)(groups < resident ? groups : resident), n, smem, st>>>(src, dst, lines, (int)L, Q,
                                                                        LB, q);
  return (int)cudaGetLastError();
}

} // namespace

extern "C" int ndf__iir_chunks_fit(const ndf__iir *f, int64_t L) {
  return f->form == NDF__IIR_PARALLEL && f->sigma <= kMaxSigma && L > 0 &&
         (L + chunk_len(L) - 1) / chunk_len(L) <= kMaxChunks;
}

extern "C" int ndf__launch_iir_chunks(const float *src, float *dst, int64_t P, int64_t L, int64_t Q,
                                      const ndf__iir *f, void *stream) {
  if (P <= 0 || L <= 0 || Q <= 0) return 0;
  if (!ndf__iir_chunks_fit(f, L)) return (int)cudaErrorNotSupported;
  cudaStream_t st = (cudaStream_t)stream;
  switch (chunk_len(L)) {
  case 8: return launch<8>(src, dst, P, L, Q, *f, st);
  case 16: return launch<16>(src, dst, P, L, Q, *f, st);
  default: return launch<32>(src, dst, P, L, Q, *f, st);
  }
}
