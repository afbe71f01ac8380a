// SPDX-License-Identifier: BSD-3-Clause
// iir_chunk_kernel.cu - cuda_iir's pass for the parallel form (Deriche) on lines that fit in
// one block: every line is read once and written once, its chunks held in registers.
//
// The filter is the sum of first-order complex recursions (core/iir.h, pole and res): with
// z_k[i] = p_k z_k[i-1] + x[i] and s_k[i] = p_k s_k[i+1] + x[i],
//     y[i] = sum_k Re(rho_k (z_k[i] + s_k[i])) - R x[i],   R = sum_k Re(rho_k),
// the causal part counting x[i] once and the anticausal part not at all. Unlike the direct
// form, a first-order recursion keeps its accuracy in float32 state: measured 3e-7 of the
// largest value against the float64 direct form from sigma 1 to 200. The state grows as
// 1 / (1 - |p|), about sigma / 1.7 times the input, and its rounding with it (3.6e-5 off at
// sigma 1000), so past sigma 256 the pass is iir_kernel.cu's (float64 state). The float32
// poles are the rounded ones, and rho is rescaled so that the rounded filter's DC gain is 1.
//
// A line of length L is cut into nc = ceil(L / C) chunks of C samples (C = 8, 16, 32 as L
// grows; nc <= 64), one thread per chunk, LB lines per block (thread t: line t % LB, chunk
// t / LB). For each group of LB lines a block:
//  0. stages the group in shared memory (cp.async, issued while the previous group is
//     filtered; rows a row at a time, columns LB neighbouring samples at a time);
//  1. reads its chunk (past the end of the line: the last sample, the 'nearest' extension)
//     and sums it into the recursions' chunk-local end states,
//       E_k = sum_j p^(C-1-j) x[j] (causal),  F_k = sum_j p^j x[j] (anticausal),
//     the first and last chunks adding the constant extensions' steady states;
//  2. posts them to shared memory, where 4 LB threads (a recursion and a line each) chain
//     them in order (z = p^C z + E), leaving each chunk the state that enters it;
//  3. reads its chunk again, runs both recursions over it, writes the result back into the
//     stage, and the block stores the group.
// All loads of a line happen before any store of it, so a pass may run in place.
// Where the tensor cores take the filter (ndf__iir_tc_filter; any L and alignment, lines past
// 1024 in segments) the same recursion runs there instead (iir_tc_kernel.cu, faster: below),
// except lines of 1025 to 2048 on arrays up to 32 MB (iir.c's tc_pass).
// Measured on an H100 (256^3, 16.7 M samples a pass, Nsight Compute): 51-63 us a pass
// against 48 us for a device copy, the schedulers issuing in ~70% of cycles: the pass is
// bound by its instructions, 65 (rows) to 78 (columns) a sample, of which 34 are the
// arithmetic above (FFMA) and the rest addressing, shared-memory traffic and the chaining.
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

// A line group's stage in shared memory: sample i of the group's line l at
//   rows (ROW):    l * pitch + i, pitch = nc C + 4 (rows 4 banks apart, float4-aligned);
//   columns:       (i + i / C) LB + l (a warp's lanes are neighbouring lines; a pad of LB
//                  after every chunk puts the chunks a warp holds on different banks).
template <int C, bool ROW> struct stage_layout {
  int LB, pitch;
  __device__ __forceinline__ int at(int l, int i) const {
    return ROW ? l * pitch + i : (i + i / C) * LB + l;
  }
  // sample j of chunk w of line l: chunk(l, w) + j step()
  __device__ __forceinline__ int chunk(int l, int w) const {
    return ROW ? l * pitch + w * C : w * (C + 1) * LB + l;
  }
  __device__ __forceinline__ int step() const { return ROW ? 1 : LB; }
  __device__ __forceinline__ static int size(int LB, int nc) {
    return ROW ? LB * (nc * C + 4) : (nc * C + nc) * LB;
  }
};

// Moves the 16-byte pieces of a group's tile between global memory and the stage xs (IN:
// into the stage, as cp.async copies), cooperatively: R rows of W pieces, piece (r, c) at
// g + r gs + 4 c and at the stage's row r (sl.at(r, .) for rows, sl.at(., r) for columns) +
// 4 c. Where every thread keeps one column (n % W == 0, and for columns a step of whole
// chunks) the addresses advance by constant steps.
template <bool IN, int C, bool ROW>
__device__ __forceinline__ void move16(float *gm, int64_t gs, float *xs, stage_layout<C, ROW> sl,
                                       int R, int W) {
  const int t = threadIdx.x, n = blockDim.x;
  auto srow = [&](int r) { return ROW ? r * sl.pitch : (r + r / C) * sl.LB; };
  auto one = [&](float *gp, float *sp) {
    if (IN)
      __pipeline_memcpy_async(sp, gp, 16);
    else
      *reinterpret_cast<float4 *>(gp) = *reinterpret_cast<const float4 *>(sp);
  };
  const int dr = n / W;
  if (n % W == 0 && (ROW || dr % C == 0)) {
    const int c = t % W;
    int r = t / W;
    float *gp = gm + r * gs + 4 * c, *sp = xs + srow(r) + 4 * c;
    const int64_t gstep = dr * gs;
    const int sstep = srow(dr);
    for (; r < R; r += dr, gp += gstep, sp += sstep)
      one(gp, sp);
  } else {
    for (tile_walk e(t, n, W); e.r < R; e.next())
      one(gm + e.r * gs + 4 * e.c, xs + srow(e.r) + 4 * e.c);
  }
}

// Issues the copies of line group g into the stage xs, cooperatively, and commits them as
// one group. Rows: `rows` contiguous rows of length L at src + g LB L. Columns: at src + off,
// VEC: the group's LB neighbouring lines (16-byte aligned), else the thread's own line.
template <int C, bool ROW, bool VEC>
__device__ __forceinline__ void fetch(const float *src, float *xs, stage_layout<C, ROW> sl,
                                      int64_t g, int rows, int L, int64_t Q, int64_t off,
                                      bool live) {
  const int t = threadIdx.x, n = blockDim.x;
  float *s = const_cast<float *>(src) + (ROW ? g * sl.LB * L : off);
  if (VEC) {
    move16<true, C, ROW>(s, ROW ? L : Q, xs, sl, ROW ? rows : L, ROW ? L / 4 : sl.LB / 4);
  } else if (ROW) {
    for (tile_walk e(t, n, L); e.r < rows; e.next())
      __pipeline_memcpy_async(xs + sl.at(e.r, e.c), s + (int64_t)e.r * L + e.c, 4);
  } else if (live) {
    const int l = t % sl.LB;
    for (int i = t / sl.LB; i < L; i += n / sl.LB)
      __pipeline_memcpy_async(xs + sl.at(l, i), s + i * Q, 4);
  }
  __pipeline_commit();
}

// Stores line group g from the stage xs (the counterpart of fetch).
template <int C, bool ROW, bool VEC>
__device__ __forceinline__ void store(float *dst, float *xs, stage_layout<C, ROW> sl, int64_t g,
                                      int rows, int L, int64_t Q, int64_t off, bool live) {
  const int t = threadIdx.x, n = blockDim.x;
  float *d = dst + (ROW ? g * sl.LB * L : off);
  if (VEC) {
    move16<false, C, ROW>(d, ROW ? L : Q, xs, sl, ROW ? rows : L, ROW ? L / 4 : sl.LB / 4);
  } else if (ROW) {
    for (tile_walk e(t, n, L); e.r < rows; e.next())
      d[(int64_t)e.r * L + e.c] = xs[sl.at(e.r, e.c)];
  } else if (live) {
    const int l = t % sl.LB;
    for (int i = t / sl.LB; i < L; i += n / sl.LB)
      d[i * Q] = xs[sl.at(l, i)];
  }
}

// Along L of [P][L][Q]. The blocks stay resident and take line groups in turn, each group
// staged through shared memory: its copies (cp.async) issued into the other of two stage
// buffers while the current group is filtered. ROW (Q == 1): the group's LB rows are one
// contiguous piece. Columns: LB neighbouring lines, a warp's copies rows of LB samples. VEC:
// 16-byte copies (rows: L % 4 == 0; columns: Q % LB == 0 and LB % 4 == 0; 16-byte aligned
// arrays); else 4-byte ones.
template <int C, bool ROW, bool VEC>
__global__ void __launch_bounds__(kMaxThreads, C <= 16 ? 2 : 1)
    iir_chunks(const float *src, float *dst, int64_t lines, int L, int64_t Q, int LB,
               const chunkp<C> f) {
  // [4][nc][LB] float2: causal pole 0, 1, anticausal pole 0, 1; then two stages
  extern __shared__ float4 sh4[];
  float2 *car = reinterpret_cast<float2 *>(sh4);
  const int t = threadIdx.x, l = t % LB, w = t / LB, n = blockDim.x, nc = n / LB;
  const int i0 = w * C;
  stage_layout<C, ROW> sl;
  sl.LB = LB;
  sl.pitch = nc * C + 4;
  const int stage = stage_layout<C, ROW>::size(LB, nc);
  float *buf = reinterpret_cast<float *>(car + 4 * n);
  const int64_t groups = (lines + LB - 1) / LB, step = (int64_t)gridDim.x * LB;
  int64_t g = blockIdx.x;
  // columns: the group's first line (VEC) or the thread's own, as the groups advance
  walk2<int64_t> lw(g * LB + (VEC ? 0 : l), step, ROW ? 1 : Q);
  auto origin = [&]() { return lw.r * L * Q + lw.c; }; // (p, q) = (lw.r, lw.c)
  auto rows_of = [&](int64_t gg) { return (int)min((int64_t)LB, lines - gg * LB); };
  if (g < groups)
    fetch<C, ROW, VEC>(src, buf, sl, g, rows_of(g), L, Q, origin(), g * LB + l < lines);
  for (int it = 0; g < groups; g += gridDim.x, it ^= 1) {
    float *xs = buf + it * stage;
    const bool live = g * LB + l < lines;
    const int64_t off = ROW ? 0 : origin(), gn = g + gridDim.x;
    if (!ROW) lw.next();
    if (gn < groups)
      fetch<C, ROW, VEC>(src, buf + (it ^ 1) * stage, sl, gn, rows_of(gn), L, Q, origin(),
                         gn * LB + l < lines);
    else
      __pipeline_commit(); // an empty group keeps the count
    __pipeline_wait_prior(1);
    __syncthreads(); // the stage came from every thread's copies
    // the chunk from the stage (again in step 3: x is not kept across the barriers)
    float x[C], xe = 0, *const xc = xs + sl.chunk(l, w);
    auto load_x = [&]() {
      if (!live) {
#pragma unroll
        for (int j = 0; j < C; j++)
          x[j] = 0;
      } else if (i0 + C <= L) { // the whole chunk in the line (all but a line's last)
#pragma unroll
        for (int j = 0; j < C; j += 4) {
          if (ROW) {
            const float4 v = *reinterpret_cast<const float4 *>(xc + j);
            x[j] = v.x, x[j + 1] = v.y, x[j + 2] = v.z, x[j + 3] = v.w;
          } else {
            x[j] = xc[j * LB], x[j + 1] = xc[(j + 1) * LB];
            x[j + 2] = xc[(j + 2) * LB], x[j + 3] = xc[(j + 3) * LB];
          }
        }
        xe = x[C - 1];
      } else {
        xe = xs[sl.at(l, L - 1)];
#pragma unroll
        for (int j = 0; j < C; j++)
          x[j] = i0 + j < L ? xc[j * sl.step()] : xe;
      }
    };
    load_x();
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
    __syncthreads();
    // 2. chain the chunks: 4 LB threads (or all), one a recursion and line, replace each
    // chunk's end state by the state entering it (causal: before its first sample;
    // anticausal: after its last)
    for (int u = t; u < 4 * LB; u += n) {
      const int k = u / LB, cl = u % LB;
      chain(car + k * n + cl, LB, nc, f.pC[k & 1], k < 2);
    }
    __syncthreads();
    load_x();
    float2 z[2], s[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      z[k] = w == 0 ? cscale(f.g[k], x[0]) : car[k * n + t];
      s[k] = w == nc - 1 ? cscale(f.g[k], xe) : car[(2 + k) * n + t];
    }
    // 3. the recursions over the chunk, back into the stage
    float y[C];
    chunk_filter<C>(f, x, z, s, y);
    if (live && i0 + C <= L) {
#pragma unroll
      for (int j = 0; j < C; j += 4) {
        if (ROW) {
          *reinterpret_cast<float4 *>(xc + j) = make_float4(y[j], y[j + 1], y[j + 2], y[j + 3]);
        } else {
          xc[j * LB] = y[j], xc[(j + 1) * LB] = y[j + 1];
          xc[(j + 2) * LB] = y[j + 2], xc[(j + 3) * LB] = y[j + 3];
        }
      }
    } else if (live) {
#pragma unroll
      for (int j = 0; j < C; j++)
        if (i0 + j < L) xc[j * sl.step()] = y[j];
    }
    __syncthreads();
    store<C, ROW, VEC>(dst, xs, sl, g, rows_of(g), L, Q, off, live);
    __syncthreads(); // xs and car are reused
  }
  __pipeline_wait_prior(0);
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
  const size_t stage = Q == 1 ? (size_t)LB * (nc * C + 4) : (size_t)(nc * C + nc) * LB;
  const size_t smem = (size_t)4 * n * sizeof(float2) + 2 * stage * sizeof(float);
  const chunkp<C> q = params<C>(f);
  const bool aligned = ((uintptr_t)src | (uintptr_t)dst) % 16 == 0;
  const bool vec = aligned && (Q == 1 ? L % 4 == 0 : Q % LB == 0 && LB % 4 == 0);
  void (*k)(const float *, float *, int64_t, int, int64_t, int, const chunkp<C>) =
      Q > 1 ? (vec ? iir_chunks<C, false, true> : iir_chunks<C, false, false>)
      : vec ? iir_chunks<C, true, true>
            : iir_chunks<C, true, false>;
  return launch_resident(k, n, smem, groups, st, src, dst, lines, (int)L, Q, LB, q);
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
