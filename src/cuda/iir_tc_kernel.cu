// iir_tc_kernel.cu - cuda_iir's pass for the parallel form (Deriche) on tensor cores: the
// chunked recursion of iir_chunk_kernel.cu written as matrix products.
//
// With the filter as two first-order complex recursions (iir_chunk.cuh), a chunk of 16
// samples x (one column of X, a line per column) and the states entering it, z (causal, before
// its first sample) and s (anticausal, after its last), give
//     y = T x + U [z; s],    T[i][j] = sum_k Re(rho_k p_k^|i-j|) (- R on the diagonal),
//     U[i] = (Re, -Im of rho_k p_k^(i+1), then of rho_k p_k^(16-i)),
// and its zero-start end states are [E; F] = V x, V = (Re, Im of p_k^(15-j), then of p_k^j).
// Between the two products the end states are chained along each line (z' = p^16 z + E) in
// shared memory, as in iir_chunk_kernel.cu. T, V and U are constant, held as mma.sync
// fragments for the whole kernel; every 16 samples x 8 lines are m16n8k8 products in TF32,
// each operand split in two halves (a = a_hi + a_lo, a_hi the top 19 bits): a b ~ a_hi b_hi +
// a_hi b_lo + a_lo b_hi, float32's accuracy on TF32 units (test_iir's bound, 1e-5 of the
// largest value, holds as for the FFMA kernel). A warp's unit is 16 samples of 16 lines: 24
// tensor-core instructions and ~40 others for 256 samples, where iir_chunk_kernel.cu issues
// ~2000 (Nsight Compute on an H100, 256^3: 17 M instructions a column pass instead of 41 M;
// the pass at 65% of DRAM bandwidth, 51 us against 48 us for a device copy).
//
// A block takes NL = 32 or 16 lines at a time (rows: NL consecutive rows, L % 4 == 0; columns:
// NL neighbouring lines, Q % NL == 0; 16-byte aligned arrays), all of their L <= 512 samples
// staged in shared memory (cp.async, the next group's in flight while the current one is
// filtered), and writes its results over the stage before storing them: all loads of a line
// come before its stores, so the pass may run in place.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <complex>

#include "../core/iir.h"
#include "iir_chunk.cuh"
#include "launch.h"

namespace {

using namespace ndf_iir;

constexpr int kC = 16, kWarps = 8, kThreads = 32 * kWarps, kMaxL = 512, kUnits = 4;

// The filter's matrices (row-major: T 16 x 16, V 8 x 16, U 16 x 8) and the chain's constants.
struct tcparams {
  float T[kC * kC], V[8 * kC], U[kC * 8];
  float2 pC[2], g[2];
};
constexpr int kMats = kC * kC + 8 * kC + kC * 8;

// x = hi + lo, hi in TF32 (x truncated: the tensor core reads a TF32 operand's top 19 bits),
// lo exact in float32, of which it reads 11 significant bits again: 2^-21 of x is lost.
__device__ __forceinline__ void split(float x, uint32_t &hi, uint32_t &lo) {
  hi = __float_as_uint(x) & 0xffffe000u;
  lo = __float_as_uint(x - __uint_as_float(hi));
}

// d += a b, one m16n8k8 TF32 product.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// d += a b in float32's accuracy: a_lo b_hi + a_hi b_lo + a_hi b_hi ([0]: hi, [1]: lo).
__device__ __forceinline__ void mma3(float (&d)[4], const uint32_t (&a)[2][4],
                                     const uint32_t (&b)[2][2]) {
  mma(d, a[1], b[0]);
  mma(d, a[0], b[1]);
  mma(d, a[0], b[0]);
}

// Fragments of m16n8k8 (g = lane / 4, t = lane % 4): A (16 x 8) a0..a3 at (g, t), (g + 8, t),
// (g, t + 4), (g + 8, t + 4); B (8 x 8) b0, b1 at (t, g), (t + 4, g); C (16 x 8) c0..c3 at
// (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). The constant ones, split: T (A, per k
// step), V^T (B, per k step), U (A), from the matrices in shared memory.
struct frags {
  uint32_t Ta[2][2][4], Vb[2][2][2], Ua[2][4];
  __device__ __forceinline__ explicit frags(const float *mats) {
    const int lg = (threadIdx.x % 32) / 4, lt = threadIdx.x % 4;
    const float *T = mats, *V = mats + kC * kC, *U = V + 8 * kC;
#pragma unroll
    for (int kk = 0; kk < 2; kk++) {
      const int c0 = 8 * kk + lt;
      const float a[4] = {T[lg * kC + c0], T[(lg + 8) * kC + c0], T[lg * kC + c0 + 4],
                          T[(lg + 8) * kC + c0 + 4]};
#pragma unroll
      for (int i = 0; i < 4; i++)
        split(a[i], Ta[kk][0][i], Ta[kk][1][i]);
      split(V[lg * kC + c0], Vb[kk][0][0], Vb[kk][1][0]);
      split(V[lg * kC + c0 + 4], Vb[kk][0][1], Vb[kk][1][1]);
    }
    const float u[4] = {U[lg * 8 + lt], U[(lg + 8) * 8 + lt], U[lg * 8 + lt + 4],
                        U[(lg + 8) * 8 + lt + 4]};
#pragma unroll
    for (int i = 0; i < 4; i++)
      split(u[i], Ua[0][i], Ua[1][i]);
  }
};

// A group of NL lines of length L staged in shared memory: sample i of line l at
//   rows (ROW):  l * RP + i, RP = 16 nc + 4 (a fragment's loads on distinct banks);
//   columns:     i * NLP + l, NLP = NL + 8 (the same).
// Then the chain's states [nc][8][NLP] and the lines' first and last samples.
template <int NL, bool ROW> struct group {
  static constexpr int NLP = NL + 8, halves = NL / 16;
  int L, nc, rows, RP;
  float *xs, *car, *x0, *xl;
  __device__ __forceinline__ group(int L_, float *xs_, float *car_) : L(L_), xs(xs_), car(car_) {
    nc = (L + kC - 1) / kC;
    rows = nc * kC;
    RP = rows + 4;
    x0 = car + nc * 8 * NLP;
    xl = x0 + NL;
  }
  __host__ __device__ static int stage(int L) {
    const int rows = (L + kC - 1) / kC * kC;
    return ROW ? NL * (rows + 4) : rows * NLP;
  }
  __host__ __device__ static int rest(int L) { return (L + kC - 1) / kC * 8 * NLP + 2 * NL; }
  __device__ __forceinline__ int at(int i, int l) const { return ROW ? l * RP + i : i * NLP + l; }

  // Copies the group's 16-byte pieces between the stage and global memory at gm (IN: into
  // the stage, cp.async at L2 only, not committed): rows, `live` rows of L / 4 each, row r at
  // gm + r L; columns, L rows of NL / 4, row i at gm + i Q.
  __device__ __forceinline__ void move(float *gm, int64_t Q, int live, bool in) const {
    const int t = threadIdx.x;
    auto one = [&](float *sp, float *gp) {
      if (in)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                         (uint32_t)__cvta_generic_to_shared(sp)),
                     "l"(gp));
      else
        *reinterpret_cast<float4 *>(gp) = *reinterpret_cast<const float4 *>(sp);
    };
    if (ROW) {
      for (tile_walk e(t, kThreads, L / 4); e.r < live; e.next())
        one(xs + e.r * RP + 4 * e.c, gm + (int64_t)e.r * L + 4 * e.c);
    } else {
      constexpr int lw = NL == 32 ? 3 : 2;
      for (int e = t; e < L << lw; e += kThreads) {
        const int r = e >> lw, c = e & ((1 << lw) - 1);
        one(xs + r * NLP + 4 * c, gm + r * Q + 4 * c);
      }
    }
  }

  // Filters the staged group in place (its copies complete and visible to the block); ends
  // with a barrier.
  __device__ void filter(const frags &fr, const tcparams &prm, int live) {
    const int t = threadIdx.x, warp = t / 32, lg = (t % 32) / 4, lt = t % 4;
    const int units = nc * halves;
    // the 'nearest' extension past the end (and zeros on the rows past the last), the ends'
    // values for the steady states
    for (int e = t; e < (rows - L + 1) * NL; e += kThreads) {
      const int i = L - 1 + e / NL, l = e % NL;
      if (ROW && l >= live) {
        if (i == L - 1)
          for (int j = 0; j < rows; j++)
            xs[at(j, l)] = 0;
      } else if (i == L - 1) {
        xl[l] = xs[at(i, l)];
      } else {
        xs[at(i, l)] = xs[at(L - 1, l)];
      }
    }
    __syncthreads();
    for (int l = t; l < NL; l += kThreads)
      x0[l] = xs[at(0, l)];
    // 1. each unit: T x into registers, its zero-start end states x^T V^T into car
    float loc[kUnits][2][4];
#pragma unroll
    for (int j = 0; j < kUnits; j++) {
      const int u = warp + j * kWarps;
      if (u >= units) break;
      const int c = u / halves, n0 = 16 * (u % halves);
      const float *xt = xs + at(c * kC + lt, n0 + lg);
      uint32_t b[2][2][2][2]; // [k step][half][b0, b1][hi, lo]
#pragma unroll
      for (int kk = 0; kk < 2; kk++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int r = 0; r < 2; r++)
            split(xt[ROW ? 8 * h * RP + 8 * kk + 4 * r : (8 * kk + 4 * r) * NLP + 8 * h],
                  b[kk][h][r][0], b[kk][h][r][1]);
      float ends[4] = {0, 0, 0, 0};
#pragma unroll
      for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int i = 0; i < 4; i++)
          loc[j][h][i] = 0;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
          const uint32_t bb[2][2] = {{b[kk][h][0][0], b[kk][h][1][0]},
                                     {b[kk][h][0][1], b[kk][h][1][1]}};
          mma3(loc[j][h], fr.Ta[kk], bb);
        }
      }
#pragma unroll
      for (int kk = 0; kk < 2; kk++) {
        const uint32_t xa[2][4] = {
            {b[kk][0][0][0], b[kk][1][0][0], b[kk][0][1][0], b[kk][1][1][0]},
            {b[kk][0][0][1], b[kk][1][0][1], b[kk][0][1][1], b[kk][1][1][1]}};
        mma(ends, xa[1], fr.Vb[kk][0]);
        mma(ends, xa[0], fr.Vb[kk][1]);
        mma(ends, xa[0], fr.Vb[kk][0]);
      }
      float *ce = car + (c * 8 + 2 * lt) * NLP + n0 + lg;
      ce[0] = ends[0];
      ce[NLP] = ends[1];
      ce[8] = ends[2];
      ce[NLP + 8] = ends[3];
    }
    __syncthreads();
    // 2. chain: 4 NL threads, a recursion and a line each, replace the end states by the
    // states entering each chunk (causal rows 0-3, anticausal rows 4-7)
    for (int u = t; u < 4 * NL; u += kThreads) {
      const int k = u / NL, l = u % NL, kp = k & 1, row = 2 * kp + (k < 2 ? 0 : 4);
      const float xe = k < 2 ? x0[l] : xl[l];
      float2 z = make_float2(prm.g[kp].x * xe, prm.g[kp].y * xe);
      for (int i = 0; i < nc; i++) {
        const int c = k < 2 ? i : nc - 1 - i;
        float *cr = car + (c * 8 + row) * NLP + l, *ci = cr + NLP;
        const float2 e = make_float2(*cr, *ci);
        *cr = z.x;
        *ci = z.y;
        z = cfma(prm.pC[kp], z, e);
      }
    }
    __syncthreads();
    // 3. y = T x + U [z; s], over the stage
#pragma unroll
    for (int j = 0; j < kUnits; j++) {
      const int u = warp + j * kWarps;
      if (u >= units) break;
      const int c = u / halves, n0 = 16 * (u % halves);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float *st = car + (c * 8 + lt) * NLP + n0 + 8 * h + lg;
        uint32_t sb[2][2];
        split(st[0], sb[0][0], sb[1][0]);
        split(st[4 * NLP], sb[0][1], sb[1][1]);
        mma3(loc[j][h], fr.Ua, sb);
        float *y = xs + at(c * kC + lg, n0 + 8 * h + 2 * lt);
        if (ROW) {
          y[0] = loc[j][h][0], y[RP] = loc[j][h][1];
          y[8] = loc[j][h][2], y[RP + 8] = loc[j][h][3];
        } else {
          *reinterpret_cast<float2 *>(y) = make_float2(loc[j][h][0], loc[j][h][1]);
          *reinterpret_cast<float2 *>(y + 8 * NLP) = make_float2(loc[j][h][2], loc[j][h][3]);
        }
      }
    }
    __syncthreads();
  }
};

// Copies the matrices into shared memory.
__device__ __forceinline__ void load_mats(float *mats, const tcparams &prm) {
  for (int i = threadIdx.x; i < kMats; i += kThreads)
    mats[i] = (&prm.T[0])[i];
  __syncthreads();
}

// Along L of [P][L][Q] (rows: Q == 1; columns: Q % NL == 0). The blocks stay resident and
// take the groups in turn, each group's copies issued into the other of two stages while the
// current one is filtered. Shared memory: the matrices, the two stages, the group's rest.
template <int NL, bool ROW>
__global__ void __launch_bounds__(kThreads, 2)
    iir_tc(const float *src, float *dst, int64_t lines, int L, int64_t Q,
           const __grid_constant__ tcparams prm) {
  extern __shared__ __align__(128) float mats[];
  typedef group<NL, ROW> grp;
  const int stage = grp::stage(L);
  float *buf = mats + kMats;
  load_mats(mats, prm);
  const frags fr(mats);
  const int64_t groups = (lines + NL - 1) / NL, col = (int64_t)L * Q;
  // columns: the group's first line, (p, q), as the groups advance
  int64_t g = blockIdx.x, p = g * NL / Q, q = g * NL - p * Q;
  const int64_t step = (int64_t)gridDim.x * NL, dp = step / Q, dq = step - dp * Q;
  auto origin = [&](int64_t gg) { return ROW ? gg * NL * L : p * col + q; };
  auto live_of = [&](int64_t gg) { return (int)min((int64_t)NL, lines - gg * NL); };
  float *src_ = const_cast<float *>(src);
  if (g < groups) {
    grp(L, buf, buf + 2 * stage).move(src_ + origin(g), Q, live_of(g), true);
    __pipeline_commit();
  }
  for (int it = 0; g < groups; g += gridDim.x, it ^= 1) {
    grp gr(L, buf + it * stage, buf + 2 * stage);
    const int64_t off = origin(g), gn = g + gridDim.x;
    const int live = live_of(g);
    if (!ROW) {
      p += dp;
      q += dq;
      if (q >= Q) q -= Q, p++;
    }
    if (gn < groups)
      grp(L, buf + (it ^ 1) * stage, gr.car).move(src_ + origin(gn), Q, live_of(gn), true);
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();
    gr.filter(fr, prm, live);
    gr.move(dst + off, Q, live, false);
    __syncthreads(); // the stage and car are reused
  }
  __pipeline_wait_prior(0);
}

// The last two axes of [P][Y][X] in one pass (the same filter on both), opt-in (iir.c): on an
// H100 (256^3, sigma 4.5) it takes 112 us against 2 x 52 us for the two passes it replaces.
// It moves the array through DRAM once instead of twice (39% of DRAM bandwidth), but each
// group still takes ~12k cycles of barriers and latency, as in the separate passes, and twice
// as many groups pass through each block: it needs more groups in flight per SM (fewer
// registers or a single stage) before it pays.
// per slice, its row
// groups (x) and then its column groups (y), taken in ticket order from sync[0] by the
// resident blocks. A slice's column groups read what its row groups wrote (from L2: a few
// slices are in flight) once sync[1 + s] counts all of them; they come `lag` slices behind
// (about as many slices as the resident blocks take at once), so the wait is short, and
// never on a group that has not been handed out (no deadlock). A block
// takes its next ticket while it filters the current group and issues the next group's
// copies into its other stage at once if they may start (rows always, columns once their
// slice's rows are done). sync is zeroed before the launch. The rows are read from src, and
// the columns read and written in dst.
template <int NL>
__global__ void __launch_bounds__(kThreads, 2)
    iir_tc_yx(const float *src, float *dst, int64_t P, int Y, int X, int lag,
              const __grid_constant__ tcparams prm, unsigned long long *sync) {
  extern __shared__ __align__(128) float mats[];
  typedef group<NL, true> rgrp;
  typedef group<NL, false> cgrp;
  const int stage = max(rgrp::stage(X), cgrp::stage(Y));
  float *buf = mats + kMats, *rest = buf + 2 * stage;
  load_mats(mats, prm);
  const frags fr(mats);
  __shared__ long long next_ticket;
  __shared__ int ready;
  const int RX = (Y + NL - 1) / NL, CY = X / NL, per = RX + CY;
  const long long total = (P + lag) * per;
  float *src_ = const_cast<float *>(src);
  const int64_t slice = (int64_t)Y * X;
  // a ticket's group: kind 0 none, 1 rows (slice s, rows from j NL), 2 columns (slice s,
  // columns from j NL)
  struct item {
    int kind, j;
    int64_t s;
  };
  auto decode = [&](long long tk) {
    item it{0, 0, 0};
    if (tk >= total) return it;
    const int64_t round = tk / per;
    const int j = (int)(tk - round * per);
    if (j < RX && round < P) it = item{1, j, round};
    if (j >= RX && round >= lag) it = item{2, j - RX, round - lag};
    return it;
  };
  auto take = [&]() {
    if (threadIdx.x == 0) next_ticket = (long long)atomicAdd(sync, 1ull);
    __syncthreads();
    const long long tk = next_ticket;
    __syncthreads();
    return tk;
  };
  // whether slice s's rows are all done (block-wide; wait: until they are)
  auto rows_done = [&](int64_t s, bool wait) {
    if (threadIdx.x == 0) {
      volatile unsigned long long *c = sync + 1 + s;
      if (wait)
        while (*c < (unsigned long long)RX)
          __nanosleep(64);
      ready = *c >= (unsigned long long)RX;
      __threadfence();
    }
    __syncthreads();
    const bool r = ready;
    __syncthreads();
    return r;
  };
  auto fetch = [&](const item &it, float *xs) {
    if (it.kind == 1)
      rgrp(X, xs, rest)
          .move(src_ + it.s * slice + (int64_t)it.j * NL * X, 1, min(NL, Y - it.j * NL), true);
    else if (it.kind == 2)
      cgrp(Y, xs, rest).move(dst + it.s * slice + (int64_t)it.j * NL, X, NL, true);
  };
  long long tk = take();
  bool fetched = false; // the current group's copies issued
  for (int b = 0; tk < total; b ^= 1) {
    const item cur = decode(tk);
    float *xs = buf + b * stage;
    if (!fetched && cur.kind) {
      if (cur.kind == 2) rows_done(cur.s, true);
      fetch(cur, xs);
    }
    __pipeline_commit();
    // the next ticket, its copies issued now if they may start
    const long long tn = take();
    const item nx = decode(tn);
    fetched = nx.kind == 1 || (nx.kind == 2 && rows_done(nx.s, false));
    if (fetched) fetch(nx, buf + (b ^ 1) * stage);
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();
    if (cur.kind == 1) {
      rgrp gr(X, xs, rest);
      const int live = min(NL, Y - cur.j * NL);
      gr.filter(fr, prm, live);
      gr.move(dst + cur.s * slice + (int64_t)cur.j * NL * X, 1, live, false);
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(sync + 1 + cur.s, 1ull);
      }
    } else if (cur.kind == 2) {
      cgrp gr(Y, xs, rest);
      gr.filter(fr, prm, NL);
      gr.move(dst + cur.s * slice + (int64_t)cur.j * NL, X, NL, false);
      __syncthreads();
    }
    tk = tn;
  }
  __pipeline_wait_prior(0);
}

tcparams make_params(const ndf__iir &f) {
  typedef std::complex<double> cd;
  const chunkp<kC> c = params<kC>(f); // the poles and residues the other passes use
  tcparams q;
  memset(&q, 0, sizeof q);
  cd p[2], rho[2];
  for (int k = 0; k < 2; k++) {
    p[k] = cd(c.p[k].x, c.p[k].y);
    rho[k] = cd(c.rho[k].x, c.rho[k].y);
    q.pC[k] = c.pC[k];
    q.g[k] = c.g[k];
  }
  for (int i = 0; i < kC; i++) {
    for (int j = 0; j < kC; j++) {
      double v = i == j ? -c.R : 0;
      for (int k = 0; k < 2; k++) {
        if (i >= j) v += (rho[k] * std::pow(p[k], i - j)).real();
        if (j >= i) v += (rho[k] * std::pow(p[k], j - i)).real();
      }
      q.T[i * kC + j] = (float)v;
    }
    for (int k = 0; k < 2; k++) {
      const cd e = std::pow(p[k], kC - 1 - i), s = std::pow(p[k], i); // column i of V
      q.V[(2 * k) * kC + i] = (float)e.real();
      q.V[(2 * k + 1) * kC + i] = (float)e.imag();
      q.V[(4 + 2 * k) * kC + i] = (float)s.real();
      q.V[(5 + 2 * k) * kC + i] = (float)s.imag();
      const cd a = rho[k] * std::pow(p[k], i + 1), b = rho[k] * std::pow(p[k], kC - i);
      q.U[i * 8 + 2 * k] = (float)a.real();
      q.U[i * 8 + 2 * k + 1] = (float)-a.imag();
      q.U[i * 8 + 4 + 2 * k] = (float)b.real();
      q.U[i * 8 + 5 + 2 * k] = (float)-b.imag();
    }
  }
  return q;
}

} // namespace

extern "C" int ndf__iir_tc_fits(const float *src, const float *dst, int64_t L, int64_t Q) {
  const char *env = getenv("NDF_CUDA_IIR_TC"); // "0": the FFMA kernel everywhere
  return !(env && env[0] == '0') && L > 0 && L <= kMaxL && (Q == 1 ? L % 4 == 0 : Q % 16 == 0) &&
         ((uintptr_t)src | (uintptr_t)dst) % 16 == 0;
}

extern "C" int ndf__launch_iir_tc(const float *src, float *dst, int64_t P, int64_t L, int64_t Q,
                                  const ndf__iir *f, void *stream) {
  if (P <= 0 || L <= 0 || Q <= 0) return 0;
  if (!ndf__iir_tc_fits(src, dst, L, Q)) return (int)cudaErrorNotSupported;
  const int NL = L <= 256 && (Q == 1 || Q % 32 == 0) ? 32 : 16;
  const int li = (int)L;
  const size_t smem =
      sizeof(float) *
      (kMats +
       2 * (size_t)(Q == 1
                        ? (NL == 32 ? group<32, true>::stage(li) : group<16, true>::stage(li))
                        : (NL == 32 ? group<32, false>::stage(li) : group<16, false>::stage(li))) +
       (NL == 32 ? group<32, false>::rest(li) : group<16, false>::rest(li)));
  const tcparams q = make_params(*f);
  const int64_t lines = P * Q, groups = (lines + NL - 1) / NL;
  cudaStream_t st = (cudaStream_t)stream;
  if (Q == 1)
    return NL == 32 ? launch_resident(iir_tc<32, true>, kThreads, smem, groups, st, src, dst, lines,
                                      li, Q, q)
                    : launch_resident(iir_tc<16, true>, kThreads, smem, groups, st, src, dst, lines,
                                      li, Q, q);
  return NL == 32 ? launch_resident(iir_tc<32, false>, kThreads, smem, groups, st, src, dst, lines,
                                    li, Q, q)
                  : launch_resident(iir_tc<16, false>, kThreads, smem, groups, st, src, dst, lines,
                                    li, Q, q);
}

extern "C" int ndf__iir_tc_yx_fits(const float *src, const float *dst, int64_t Y, int64_t X) {
  return ndf__iir_tc_fits(src, dst, X, 1) && ndf__iir_tc_fits(src, dst, Y, X);
}

extern "C" int ndf__launch_iir_tc_yx(const float *src, float *dst, int64_t P, int64_t Y, int64_t X,
                                     const ndf__iir *f, unsigned long long *sync, void *stream) {
  if (P <= 0 || Y <= 0 || X <= 0) return 0;
  if (!ndf__iir_tc_yx_fits(src, dst, Y, X)) return (int)cudaErrorNotSupported;
  cudaStream_t st = (cudaStream_t)stream;
  cudaError_t err = cudaMemsetAsync(sync, 0, (size_t)(P + 1) * sizeof *sync, st);
  if (err != cudaSuccess) return (int)err;
  const int NL = X <= 256 && Y <= 256 && X % 32 == 0 ? 32 : 16;
  const int x = (int)X, y = (int)Y;
  auto smem_of = [&](int stage, int rest) { return sizeof(float) * (kMats + 2 * stage + rest); };
  const tcparams q = make_params(*f);
  const int per = (y + NL - 1) / NL + x / NL;
  const size_t smem = NL == 32 ? smem_of(max(group<32, true>::stage(x), group<32, false>::stage(y)),
                                         max(group<32, true>::rest(x), group<32, false>::rest(y)))
                               : smem_of(max(group<16, true>::stage(x), group<16, false>::stage(y)),
                                         max(group<16, true>::rest(x), group<16, false>::rest(y)));
  void (*k)(const float *, float *, int64_t, int, int, int, const tcparams, unsigned long long *) =
      NL == 32 ? iir_tc_yx<32> : iir_tc_yx<16>;
  int64_t resident = 0;
  err = resident_blocks(k, kThreads, smem, &resident);
  if (err != cudaSuccess) return (int)err;
  const int64_t grid = std::min(resident, P * per);
  const int lag = (int)std::min<int64_t>(P, 3 * (grid + per - 1) / per + 2);
  k<<<(unsigned)grid, kThreads, smem, st>>>(src, dst, P, y, x, lag, q, sync);
  return (int)cudaGetLastError();
}
