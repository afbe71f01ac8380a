// SPDX-License-Identifier: BSD-3-Clause
// sep_kernel.cu - one pass of a separable filter on contiguous float32 arrays (cuda_sep).
//
// rows: along the last axis. A block of RT threads filters RP*RT consecutive outputs of
//   one line: it stages the tile and its apron in shared memory (the mode applied once,
//   at staging), then each thread computes RP adjacent outputs from float4 reads (a
//   quarter-warp reads 128 contiguous bytes: no bank conflicts).
// cols: along any slower axis, the array seen as [P][L][Q] with Q contiguous. Threads
//   run across q (coalesced) and each computes CP consecutive outputs along the axis,
//   reading the inputs it needs once from global memory (L1/L2 serve the overlap). Where Q
//   is under a warp's width (interleaved channels: the x pass of [Y][X][3]), a block's
//   threads run across the lines (p, q) of several rows of [P][Q] ('flat'), not one row's Q
//   with the rest of the warp idle.
// Both stream the inputs past per-thread accumulators: input e of a thread feeds
// output p through tap e - p. The taps are kernel parameters and NT, a bound on their
// count n, is a template parameter, so the loop over groups of 8 inputs unrolls
// completely with the taps as uniform-register operands of FFMA. Past tap n, the last
// group or two test j < n (buckets to 64 taps), or a short loop reads the taps from
// global memory (larger buckets). Odd n up to 17 are instantiated exactly (no tests at
// all). Taps past NT = 256 use a generic loop with taps in global memory. Block
// indices come from 2-D/3-D grids: no integer divisions per tile.
#include <cuda_runtime.h>

#include "../core/boundary.h"
#include "common.cuh"

namespace {

constexpr int RT = 128, RP = 4;        // rows: threads per block, outputs per thread
constexpr int CX = 32, CY = 8, CP = 8; // cols: block CX x CY threads, CP outputs each
constexpr int NT_MAX = 256;            // largest tap bucket

template <int NT> struct Taps { float w[NT]; };

// ------------------------------------------------------------------ rows

// Copies line[lo + e] for e in [0, cnt) into s[e], [lo, lo + cnt) inside [0, X): float4 reads
// where the line is aligned (one conflict-free float4 store where s is too), else scalar.
__device__ __forceinline__ void stage_inside(float *s, const float *line, int64_t X, int64_t lo,
                                             int cnt, int t, int nt) {
  if ((reinterpret_cast<uintptr_t>(line) & 15) == 0) { // whole float4 from global memory
    const int64_t a0 = lo & ~(int64_t)3;               // aligned start at or before lo
    const int sh = (int)(lo - a0), n4 = (cnt + sh + 3) / 4;
    const bool s16 = (reinterpret_cast<uintptr_t>(s) & 15) == 0;
    const float4 *g4 = reinterpret_cast<const float4 *>(line + a0);
    for (int k = t; k < n4; k += nt) {
      const int e = 4 * k - sh;
      if (a0 + 4 * k + 3 < X) {
        const float4 v = __ldg(g4 + k);
        if (sh == 0 && s16 && e + 3 < cnt) {
          reinterpret_cast<float4 *>(s)[k] = v;
          continue;
        }
        if (e >= 0) s[e] = v.x;
        if (e + 1 >= 0 && e + 1 < cnt) s[e + 1] = v.y;
        if (e + 2 >= 0 && e + 2 < cnt) s[e + 2] = v.z;
        if (e + 3 < cnt) s[e + 3] = v.w;
      } else {
        for (int c = 0; c < 4; c++)
          if (e + c >= 0 && e + c < cnt) s[e + c] = __ldg(line + a0 + 4 * k + c);
      }
    }
    return;
  }
  for (int e = t; e < cnt; e += nt)
    s[e] = __ldg(line + lo + e);
}

// Stages line[first + e] for e in [0, len) into s, applying the mode; the RT / rb threads of
// one row of the block (index t) share the work. The samples inside the line are copied as
// stage_inside copies them; only those of the apron past either end go through the mode (on
// a line no longer than a tile, every tile is an edge tile).
__device__ __forceinline__ void stage_line(float *s, const float *line, int64_t X, int64_t first,
                                           int len, int mode, float cval, int t, int nt) {
  const int64_t lo = first > 0 ? first : 0, hi = first + len < X ? first + len : X;
  if (lo < hi) stage_inside(s + (lo - first), line, X, lo, (int)(hi - lo), t, nt);
  const int head = lo < hi ? (int)(lo - first) : len, tail = lo < hi ? (int)(hi - first) : len;
  for (int e = t; e < head; e += nt)
    s[e] = ndf__line_at(line, 0, X, 1, first + e, mode, cval);
  for (int e = tail + t; e < len; e += nt)
    s[e] = ndf__line_at(line, 0, X, 1, first + e, mode, cval);
}

__device__ __forceinline__ void store_rp(float *o, int64_t x, int64_t X, const float *acc) {
  if (x + RP <= X && ((reinterpret_cast<uintptr_t>(o + x) & 15) == 0)) {
    *reinterpret_cast<float4 *>(o + x) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  } else {
#pragma unroll
    for (int p = 0; p < RP; p++)
      if (x + p < X) o[x + p] = acc[p];
  }
}

// Shared-memory floats per row of a block: the tile, its apron, and slack
// for the last group of 8 inputs a thread reads.
__host__ __device__ __forceinline__ int row_len(int tw, int n) { return (tw + n + 7 + 7) & ~3; }

// acc[p] += w[e - p] v[k] for the 8 inputs e = e0 + k of one group, where the
// group holds no input past the last tap of output 0 (e0 + 8 <= n), or n == NT.
template <int NT, int NP>
__device__ __forceinline__ void feed8(float (&acc)[NP], const Taps<NT> &taps, int e0,
                                      const float (&v)[8]) {
#pragma unroll
  for (int k = 0; k < 8; k++)
#pragma unroll
    for (int p = 0; p < NP; p++) {
      const int j = e0 + k - p;
      if (j >= 0 && j < NT) acc[p] = fmaf(taps.w[j], v[k], acc[p]);
    }
}

// As feed8 for a group that reaches past the last tap (e0 + 8 > n): the taps
// j >= n are skipped, not multiplied by zero, so that an Inf or NaN input
// outside an output's window cannot reach it.
template <int NT, int NP>
__device__ __forceinline__ void feed8m(float (&acc)[NP], const Taps<NT> &taps, int e0,
                                       const float (&v)[8], int n) {
#pragma unroll
  for (int k = 0; k < 8; k++)
#pragma unroll
    for (int p = 0; p < NP; p++) {
      const int j = e0 + k - p;
      if (j >= 0 && j < NT && j < n) acc[p] = fmaf(taps.w[j], v[k], acc[p]);
    }
}

// The inputs e in [e0, n + NP - 1) past the unrolled groups: a short runtime
// loop with the taps read from global memory (wg).
template <int NP, typename Load>
__device__ __forceinline__ void feed_tail(float (&acc)[NP], const float *__restrict__ wg, int n,
                                          int e0, Load load) {
  for (int e = e0; e < n + NP - 1; e++) {
    const float v = load(e);
#pragma unroll
    for (int p = 0; p < NP; p++) {
      const int j = e - p;
      if (j >= 0 && j < n) acc[p] = fmaf(__ldg(wg + j), v, acc[p]);
    }
  }
}

// How a bucket (n < NT, not EXACT) ends its inputs: up to 64 taps, the last
// group or two of the unrolled loop test j < n (feed8m); past that, where a
// second copy of every group would crowd the instruction cache, the unrolled
// loop stops at the last whole group below n and feed_tail takes the rest.
template <int NT> __host__ __device__ constexpr bool masked_tail() { return NT <= 64; }

// Number of groups of 8 inputs the unrolled loop takes: all n + NP - 1
// inputs of NP outputs when EXACT (n == NT) or masked, else those below n.
template <int NT, int NP, bool EXACT> __device__ __forceinline__ int whole_groups(int n) {
  return EXACT ? (NT + NP - 1 + 7) / 8 : masked_tail<NT>() ? (n + NP - 1 + 7) / 8 : n / 8;
}

// Along the last axis: a block filters rb rows (rb = 1, 2 or 4 for short
// lines), RT / rb threads and RT * RP / rb outputs per row and tile. Blocks
// run over groups of rb rows in x and tiles of a line in y (no divisions: on
// short filters they cost as much as the arithmetic).
template <int NT, bool EXACT>
__global__ void __launch_bounds__(RT)
    sep_rows(const float *__restrict__ in, float *__restrict__ out, int64_t nrows, int64_t X, int n,
             int64_t left, int mode, float cval, int rb, int64_t groups, int64_t tiles,
             const float *__restrict__ wg, Taps<NT> taps) {
  extern __shared__ float4 smem4[];
  const int nt = RT >> (rb >> 1), tw = nt * RP, len = row_len(tw, n); // rb = 1, 2, 4
  const int r = threadIdx.x / nt, t = threadIdx.x % nt;
  float *s = reinterpret_cast<float *>(smem4) + r * len;
  const int ng = whole_groups<NT, RP, EXACT>(n);
  for (int64_t gq = blockIdx.x; gq < groups; gq += gridDim.x)
    for (int64_t tl = blockIdx.y; tl < tiles; tl += gridDim.y) {
      const int64_t row = gq * rb + r, x0 = tl * tw;
      __syncthreads(); // the previous tile's readers are done
      if (row < nrows) stage_line(s, in + row * X, X, x0 - left, len, mode, cval, t, nt);
      __syncthreads();
      if (row >= nrows) continue;
      float acc[RP];
#pragma unroll
      for (int p = 0; p < RP; p++)
        acc[p] = 0.f;
      const float *st = s + t * RP;
      const float4 *s4 = reinterpret_cast<const float4 *>(st);
#pragma unroll
      for (int g = 0; g < (NT + RP - 1 + 7) / 8; g++) {
        if (g >= ng) break;
        const float4 a = s4[2 * g], c = s4[2 * g + 1];
        const float v[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
        if (EXACT || !masked_tail<NT>() || 8 * g + 8 <= n)
          feed8<NT, RP>(acc, taps, 8 * g, v);
        else
          feed8m<NT, RP>(acc, taps, 8 * g, v, n);
      }
      if (!EXACT && !masked_tail<NT>())
        feed_tail<RP>(acc, wg, n, 8 * ng, [&](int e) { return st[e]; });
      store_rp(out + row * X, x0 + (int64_t)t * RP, X, acc);
    }
}

// Any tap count: taps in global memory, a plain loop.
__global__ void __launch_bounds__(RT)
    sep_rows_any(const float *__restrict__ in, float *__restrict__ out, int64_t nrows, int64_t X,
                 int n, int64_t left, int mode, float cval, const float *__restrict__ w) {
  extern __shared__ float4 smem4[];
  float *s = reinterpret_cast<float *>(smem4);
  const int64_t tiles = (X + RT * RP - 1) / (RT * RP);
  const int len = row_len(RT * RP, n);
  for (int64_t b = blockIdx.x; b < nrows * tiles; b += gridDim.x) {
    const int64_t row = b / tiles, x0 = (b % tiles) * (RT * RP);
    __syncthreads();
    stage_line(s, in + row * X, X, x0 - left, len, mode, cval, threadIdx.x, RT);
    __syncthreads();
    float acc[RP] = {0.f, 0.f, 0.f, 0.f};
    const float *st = s + threadIdx.x * RP;
    for (int j = 0; j < n; j++) {
      const float wj = __ldg(w + j);
#pragma unroll
      for (int p = 0; p < RP; p++)
        acc[p] = fmaf(wj, st[p + j], acc[p]);
    }
    store_rp(out + row * X, x0 + (int64_t)threadIdx.x * RP, X, acc);
  }
}

// ------------------------------------------------------------------ cols

// Input row r (may be outside [0, L)) of column q in plane p, by the mode.
__device__ __forceinline__ float col_in(const float *plane, int64_t r, int64_t L, int64_t Q,
                                        int mode, float cval, bool inside) {
  if (!inside) {
    r = ndf__map_index(r, L, mode);
    if (r < 0) return cval;
  }
  return __ldg(plane + r * Q);
}

// The block's input rows through the mode, shared by its threads: row index,
// or -1 for cval. A block needs CY * CP + n + 7 of them at most.
constexpr int COL_MAP = CY * CP + NT_MAX + 8;

template <int NT, bool EXACT, bool FLAT>
__global__ void __launch_bounds__(CX *CY)
    sep_cols(const float *__restrict__ in, float *__restrict__ out, int64_t NP, int64_t L,
             int64_t Q, int n, int64_t left, int mode, float cval, const float *__restrict__ wg,
             Taps<NT> taps) {
  __shared__ int rows[COL_MAP];
  // the thread's line: q of each of the NP planes (blockIdx.z on); FLAT, line l of the NP rows
  // of [NP][Q], its row r's offset folded into q, and one plane (P) in the grid (a kernel of
  // its own: a runtime flag gave the 64-tap bucket 60 registers instead of 40)
  const int64_t l = (int64_t)blockIdx.x * CX + threadIdx.x,
                r = FLAT ? (uint32_t)l / (uint32_t)Q : 0, // (FLAT: NP Q < 2^31)
      q = l + r * (L - 1) * Q, P = FLAT ? 1 : NP;
  const bool active = FLAT ? r < NP : q < Q;
  const int64_t iblocks = (L + CY * CP - 1) / (CY * CP);
  const int ng = whole_groups<NT, CP, EXACT>(n);
  const int need = CY * CP + n + 7; // rows the loads below may touch
  // Blocks run over chunks of the axis in y and planes in z (no divisions).
  for (int64_t p = blockIdx.z; p < P; p += gridDim.z)
    for (int64_t ib = blockIdx.y; ib < iblocks; ib += gridDim.y) {
      const int64_t ib0 = ib * (CY * CP) - left;
      __syncthreads(); // the previous block's readers are done
      for (int k = threadIdx.y * CX + threadIdx.x; k < need; k += CX * CY)
        rows[k] = (int)ndf__map_index(ib0 + k, L, mode);
      __syncthreads();
      const int i0 = threadIdx.y * CP; // within the block
      if (!active || ib * (CY * CP) + i0 >= L) continue;
      const float *plane = in + p * L * Q + q;
      float acc[CP];
#pragma unroll
      for (int k = 0; k < CP; k++)
        acc[k] = 0.f;
      // The same unrolled loop over either loader: direct rows when all of this
      // thread's rows are inside, else rows through the block's table.
      auto run = [&](auto load) {
#pragma unroll
        for (int g = 0; g < (NT + CP - 1 + 7) / 8; g++) {
          if (g >= ng) break;
          const bool full = !EXACT && (!masked_tail<NT>() || 8 * g + 8 <= n); // rows below n
          float v[8];
#pragma unroll
          for (int k = 0; k < 8; k++) { // rows past n + CP - 2 meet no tap: not read
            const int e = 8 * g + k;
            v[k] = full || e < n + CP - 1 ? load(e) : 0.f;
          }
          if (EXACT || full)
            feed8<NT, CP>(acc, taps, 8 * g, v);
          else
            feed8m<NT, CP>(acc, taps, 8 * g, v, n);
        }
        if (!EXACT && !masked_tail<NT>()) feed_tail<CP>(acc, wg, n, 8 * ng, load);
      };
      const int64_t r0 = ib0 + i0; // input row of e = 0
      if (r0 >= 0 && r0 + n + CP - 1 <= L) {
        const float *x = plane + r0 * Q;
        run([&](int e) { return __ldg(x + e * Q); });
      } else {
        run([&](int e) {
          const int r = rows[i0 + e];
          return r < 0 ? cval : __ldg(plane + (int64_t)r * Q);
        });
      }
      const int64_t o0 = ib * (CY * CP) + i0;
      float *o = out + p * L * Q + q;
#pragma unroll
      for (int k = 0; k < CP; k++)
        if (o0 + k < L) o[(o0 + k) * Q] = acc[k];
    }
}

__global__ void __launch_bounds__(CX *CY)
    sep_cols_any(const float *__restrict__ in, float *__restrict__ out, int64_t P, int64_t L,
                 int64_t Q, int n, int64_t left, int mode, float cval,
                 const float *__restrict__ w) {
  const int64_t q = (int64_t)blockIdx.x * CX + threadIdx.x;
  if (q >= Q) return;
  const int64_t iblocks = (L + CY * CP - 1) / (CY * CP);
  for (int64_t b = blockIdx.y; b < P * iblocks; b += gridDim.y) {
    const int64_t p = b / iblocks, i0 = (b % iblocks) * (CY * CP) + threadIdx.y * CP;
    if (i0 >= L) continue;
    const float *plane = in + p * L * Q + q;
    const int64_t r0 = i0 - left;
    const bool inside = r0 >= 0 && r0 + n + CP - 1 <= L;
    float acc[CP];
#pragma unroll
    for (int k = 0; k < CP; k++)
      acc[k] = 0.f;
    for (int e = 0; e < n + CP - 1; e++) {
      const float v = col_in(plane, r0 + e, L, Q, mode, cval, inside);
#pragma unroll
      for (int k = 0; k < CP; k++) {
        const int j = e - k;
        if (j >= 0 && j < n) acc[k] = fmaf(__ldg(w + j), v, acc[k]);
      }
    }
    float *o = out + p * L * Q + q;
#pragma unroll
    for (int k = 0; k < CP; k++)
      if (i0 + k < L) o[(i0 + k) * Q] = acc[k];
  }
}

// ------------------------------------------------------------------ launch

int64_t capped(int64_t b) { return b < (1LL << 30) ? b : (1LL << 30); }

// ------------------------------------------------------------------ fused yx

// Both of the last two axes in one pass, for equal odd tap counts N <= 17 on
// the two: the array seen as [P][Y][X], a block makes an FY x FX output tile.
// It stages the input tile and its aprons, (FY + N - 1) x FW, once (the modes
// applied through row and column tables), filters along y into FY x FW
// intermediates (columns outside [0, X) in constant mode are cval, as the
// y pass's output padded by the x pass would be), then along x into the
// output. The axes go in the library's order, y then x, so results match the
// two-pass solvers to rounding in every mode.
constexpr int FX = 128, FY = 32, FT = 256; // output tile, threads
constexpr int FCP = 4;                     // y outputs per thread, in float4 columns

constexpr __host__ __device__ int fused_w(int n) { return (FX + n - 1 + 7 + 3) & ~3; }
__host__ __device__ __forceinline__ size_t fused_smem(int n) {
  return ((size_t)(2 * FY + n - 1) * fused_w(n) + fused_w(n) + FY + n - 1) * sizeof(float);
}

template <int N>
__global__ void __launch_bounds__(FT)
    sep_yx(const float *__restrict__ in, float *__restrict__ out, int64_t P, int64_t Y, int64_t X,
           int64_t ly, int64_t lx, int my, int mx, float cval, Taps<N> wy, Taps<N> wx) {
  extern __shared__ float4 smem4[];
  constexpr int W = fused_w(N), W4 = W / 4, RI = FY + N - 1;
  float *sin = reinterpret_cast<float *>(smem4); // RI x W input
  float *mid = sin + RI * W;                     // FY x W after the y filter
  int *cm = reinterpret_cast<int *>(mid + FY * W), *rm = cm + W;
  const int tid = threadIdx.x;
  const int64_t tx = (X + FX - 1) / FX, ty = (Y + FY - 1) / FY;
  for (int64_t b = blockIdx.x; b < P * ty * tx; b += gridDim.x) {
    const int64_t p = b / (ty * tx), y0 = (b / tx % ty) * FY, x0 = (b % tx) * FX;
    const float *plane = in + p * Y * X;
    __syncthreads(); // the previous tile's readers are done
    for (int k = tid; k < W; k += FT)
      cm[k] = (int)ndf__map_index(x0 - lx + k, X, mx);
    for (int k = tid; k < RI; k += FT)
      rm[k] = (int)ndf__map_index(y0 - ly + k, Y, my);
    __syncthreads();
    for (int r = tid / 32; r < RI; r += FT / 32) {
      const int yr = rm[r];
      for (int c = tid % 32; c < W; c += 32) {
        const int xc = cm[c];
        sin[r * W + c] = yr < 0 || xc < 0 ? cval : __ldg(plane + (int64_t)yr * X + xc);
      }
    }
    __syncthreads();
    // y: FCP outputs down one float4 column per item.
    for (int it = tid; it < (FY / FCP) * W4; it += FT) {
      const int c4 = it % W4, o0 = (it / W4) * FCP;
      const float4 *s4 = reinterpret_cast<const float4 *>(sin) + o0 * W4 + c4;
      float4 acc[FCP];
#pragma unroll
      for (int k = 0; k < FCP; k++)
        acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int e = 0; e < N + FCP - 1; e++) {
        const float4 v = s4[e * W4];
#pragma unroll
        for (int k = 0; k < FCP; k++) {
          const int j = e - k;
          if (j >= 0 && j < N) {
            acc[k].x = fmaf(wy.w[j], v.x, acc[k].x);
            acc[k].y = fmaf(wy.w[j], v.y, acc[k].y);
            acc[k].z = fmaf(wy.w[j], v.z, acc[k].z);
            acc[k].w = fmaf(wy.w[j], v.w, acc[k].w);
          }
        }
      }
      const int c = 4 * c4;
#pragma unroll
      for (int k = 0; k < FCP; k++) { // x outside the array in constant mode: cval
        float4 v = acc[k];
        if (cm[c] < 0) v.x = cval;
        if (cm[c + 1] < 0) v.y = cval;
        if (cm[c + 2] < 0) v.z = cval;
        if (cm[c + 3] < 0) v.w = cval;
        reinterpret_cast<float4 *>(mid)[(o0 + k) * W4 + c4] = v;
      }
    }
    __syncthreads();
    // x: RP outputs along a row per item, as sep_rows.
    for (int it = tid; it < FY * (FX / RP); it += FT) {
      const int r = it / (FX / RP), t = it % (FX / RP);
      if (y0 + r >= Y) break; // items go row by row
      float acc[RP];
#pragma unroll
      for (int k = 0; k < RP; k++)
        acc[k] = 0.f;
      const float4 *s4 = reinterpret_cast<const float4 *>(mid + r * W + t * RP);
#pragma unroll
      for (int g = 0; g < (N + RP - 1 + 7) / 8; g++) {
        const float4 a = s4[2 * g], c = s4[2 * g + 1];
        const float v[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
        feed8<N, RP>(acc, wx, 8 * g, v);
      }
      store_rp(out + (p * Y + y0 + r) * X, x0 + (int64_t)t * RP, X, acc);
    }
  }
}

template <int N>
cudaError_t yx_n(const float *in, float *out, int64_t P, int64_t Y, int64_t X, const float *wy,
                 const float *wx, int64_t ly, int64_t lx, int my, int mx, float cval,
                 cudaStream_t st) {
  Taps<N> ty, tx;
  for (int j = 0; j < N; j++) {
    ty.w[j] = wy[j];
    tx.w[j] = wx[j];
  }
  const size_t sm = fused_smem(N);
  if (sm > 48 * 1024) {
    cudaError_t e =
        cudaFuncSetAttribute(sep_yx<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    if (e != cudaSuccess) return e;
  }
  const int64_t blocks = P * ((Y + FY - 1) / FY) * ((X + FX - 1) / FX);
  sep_yx<N>
      <<<(unsigned)capped(blocks), FT, sm, st>>>(in, out, P, Y, X, ly, lx, my, mx, cval, ty, tx);
  return cudaGetLastError();
}

template <int NT, bool EXACT>
cudaError_t rows_nt(const float *in, float *out, int64_t nrows, int64_t X, const float *w,
                    const float *wg, int n, int64_t left, int mode, float cval, cudaStream_t st) {
  Taps<NT> t;
  for (int j = 0; j < NT; j++)
    t.w[j] = j < n ? w[j] : 0.f;
  const int rb = X <= RT * RP / 4 ? 4 : X <= RT * RP / 2 ? 2 : 1, tw = RT * RP / rb;
  size_t sm = (size_t)rb * row_len(tw, n) * sizeof(float);
  const int64_t groups = (nrows + rb - 1) / rb, tiles = (X + tw - 1) / tw;
  const dim3 grid((unsigned)capped(groups), (unsigned)(tiles < 65535 ? tiles : 65535));
  sep_rows<NT, EXACT>
      <<<grid, RT, sm, st>>>(in, out, nrows, X, n, left, mode, cval, rb, groups, tiles, wg, t);
  return cudaGetLastError();
}

template <int NT, bool EXACT>
cudaError_t cols_nt(const float *in, float *out, int64_t P, int64_t L, int64_t Q, const float *w,
                    const float *wg, int n, int64_t left, int mode, float cval, cudaStream_t st) {
  Taps<NT> t;
  for (int j = 0; j < NT; j++)
    t.w[j] = j < n ? w[j] : 0.f;
  // flat: a block's CX threads across the lines of several rows of [P][Q] (sep_cols)
  const int flat = Q < CX && P > 1 && P * Q < (1LL << 31);
  const int64_t gx = ((flat ? P * Q : Q) + CX - 1) / CX, gy = (L + CY * CP - 1) / (CY * CP),
                gz = flat ? 1 : P;
  if (L >= (1LL << 31) || gx >= (1LL << 31)) return cudaErrorNotSupported; /* int row indices */
  const dim3 grid((unsigned)gx, (unsigned)(gy < 65535 ? gy : 65535),
                  (unsigned)(gz < 65535 ? gz : 65535));
  if (flat)
    sep_cols<NT, EXACT, true>
        <<<grid, dim3(CX, CY), 0, st>>>(in, out, P, L, Q, n, left, mode, cval, wg, t);
  else
    sep_cols<NT, EXACT, false>
        <<<grid, dim3(CX, CY), 0, st>>>(in, out, P, L, Q, n, left, mode, cval, wg, t);
  return cudaGetLastError();
}

// One pass: K is rows_nt or cols_nt; picks the exact instantiation for odd n <= 17, else
// the smallest bucket; 0 past the largest (the caller runs the generic kernel).
template <template <int, bool> class K, typename... A> cudaError_t pick(int n, A... a) {
  switch (n) {
  case 3: return K<3, true>::run(n, a...);
  case 5: return K<5, true>::run(n, a...);
  case 7: return K<7, true>::run(n, a...);
  case 9: return K<9, true>::run(n, a...);
  case 11: return K<11, true>::run(n, a...);
  case 13: return K<13, true>::run(n, a...);
  case 15: return K<15, true>::run(n, a...);
  case 17: return K<17, true>::run(n, a...);
  }
  if (n <= 8) return K<8, false>::run(n, a...);
  if (n <= 16) return K<16, false>::run(n, a...);
  if (n <= 32) return K<32, false>::run(n, a...);
  if (n <= 64) return K<64, false>::run(n, a...);
  if (n <= 128) return K<128, false>::run(n, a...);
  if (n <= NT_MAX) return K<NT_MAX, false>::run(n, a...);
  return cudaErrorNotSupported;
}

template <int NT, bool EXACT> struct Rows {
  static cudaError_t run(int n, const float *in, float *out, int64_t nrows, int64_t X,
                         const float *w, const float *wg, int64_t left, int mode, float cval,
                         cudaStream_t st) {
    return rows_nt<NT, EXACT>(in, out, nrows, X, w, wg, n, left, mode, cval, st);
  }
};

template <int NT, bool EXACT> struct Cols {
  static cudaError_t run(int n, const float *in, float *out, int64_t P, int64_t L, int64_t Q,
                         const float *w, const float *wg, int64_t left, int mode, float cval,
                         cudaStream_t st) {
    return cols_nt<NT, EXACT>(in, out, P, L, Q, w, wg, n, left, mode, cval, st);
  }
};

} // namespace

// Filters along the last axis of a contiguous [nrows][X] array.
extern "C" int ndf__launch_sep_rows(const float *in, float *out, int64_t nrows, int64_t X,
                                    const float *w_host, const float *w_dev, int64_t n,
                                    int64_t left, int mode, float cval, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  const int ni = (int)n;
  if (n <= NT_MAX)
    return (int)pick<Rows>(ni, in, out, nrows, X, w_host, w_dev, left, mode, cval, st);
  size_t sm = (size_t)row_len(RT * RP, ni) * sizeof(float);
  if (sm > 48 * 1024) {
    cudaError_t e =
        cudaFuncSetAttribute(sep_rows_any, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    if (e != cudaSuccess) return (int)e;
  }
  sep_rows_any<<<(unsigned)capped(nrows * ((X + RT * RP - 1) / (RT * RP))), RT, sm, st>>>(
      in, out, nrows, X, ni, left, mode, cval, w_dev);
  return (int)cudaGetLastError();
}

// Filters along the middle axis of a contiguous [P][L][Q] array.
extern "C" int ndf__launch_sep_cols(const float *in, float *out, int64_t P, int64_t L, int64_t Q,
                                    const float *w_host, const float *w_dev, int64_t n,
                                    int64_t left, int mode, float cval, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  const int ni = (int)n;
  if (n <= NT_MAX)
    return (int)pick<Cols>(ni, in, out, P, L, Q, w_host, w_dev, left, mode, cval, st);
  dim3 grid((unsigned)((Q + CX - 1) / CX), 1);
  int64_t gy = P * ((L + CY * CP - 1) / (CY * CP));
  grid.y = (unsigned)(gy < 65535 ? gy : 65535);
  sep_cols_any<<<grid, dim3(CX, CY), 0, st>>>(in, out, P, L, Q, ni, left, mode, cval, w_dev);
  return (int)cudaGetLastError();
}

// Filters along the last two axes of a contiguous [P][Y][X] array in one pass
// (sep_yx), y first; n, the tap count on both, odd and at most 17. Returns
// cudaErrorNotSupported for other n.
extern "C" int ndf__launch_sep_yx(const float *in, float *out, int64_t P, int64_t Y, int64_t X,
                                  const float *wy, const float *wx, int64_t n, int64_t ly,
                                  int64_t lx, int my, int mx, float cval, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  if (Y >= (1LL << 31) || X >= (1LL << 31)) return (int)cudaErrorNotSupported;
  switch (n) {
  case 3: return (int)yx_n<3>(in, out, P, Y, X, wy, wx, ly, lx, my, mx, cval, st);
  case 5: return (int)yx_n<5>(in, out, P, Y, X, wy, wx, ly, lx, my, mx, cval, st);
  case 7: return (int)yx_n<7>(in, out, P, Y, X, wy, wx, ly, lx, my, mx, cval, st);
  case 9: return (int)yx_n<9>(in, out, P, Y, X, wy, wx, ly, lx, my, mx, cval, st);
  case 11: return (int)yx_n<11>(in, out, P, Y, X, wy, wx, ly, lx, my, mx, cval, st);
  case 13: return (int)yx_n<13>(in, out, P, Y, X, wy, wx, ly, lx, my, mx, cval, st);
  case 15: return (int)yx_n<15>(in, out, P, Y, X, wy, wx, ly, lx, my, mx, cval, st);
  case 17: return (int)yx_n<17>(in, out, P, Y, X, wy, wx, ly, lx, my, mx, cval, st);
  }
  return (int)cudaErrorNotSupported;
}
