// SPDX-License-Identifier: BSD-3-Clause
// iir_tc_kernel.cu - cuda_iir's pass for the parallel form (Deriche) on tensor cores: the
// chunked recursion of iir_chunk_kernel.cu written as matrix products, one warp to a group of
// lines. The design's figures, and the alternatives they rule out:
// docs/design/recursive-gaussian.md.
//
// With the filter as two first-order complex recursions (iir_chunk.cuh), a chunk of 16
// samples x (a column of X, a line per column) and the states entering it, z (causal, before
// its first sample) and s (anticausal, after its last), give
//     y = T x + U [z; s],    T[i][j] = sum_k Re(rho_k p_k^|i-j|) (- R on the diagonal),
//     U[i] = (Re, -Im of rho_k p_k^(i+1), then of rho_k p_k^(16-i)),
// and its zero-start end states are [E; F] = V x, V = (Re, Im of p_k^(15-j), then of p_k^j).
// The same holds for any 4 real states a direction, z' = A z + b x, output c^T z: iir_alvarez of
// 2 to 4 steps (a pole repeated, no first-order form) runs so as its sections (make_params),
// whose A is not diagonal: its chain (CPL) takes each lane's 2 x 2 blocks of A^16 with its
// partner lane's states, one shuffle a step.
// A warp takes 16 lines and KU chunks (16 KU samples) at a time and computes, per chunk, the
// transposes: the end states x^T V^T (16 lines x 8 states) and y^T = x^T T^T + [z; s]^T U^T,
// each an m16n8k8 TF32 mma.sync with every operand split in two halves (a = a_hi + a_lo,
// a_hi its top 19 bits; a b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi: float32's accuracy,
// test_iir's 1e-5 bound). In the accumulator of x^T V^T a lane holds one complex recursion
// (states 2t, 2t + 1; t = lane % 4) of two lines, so the end states are chained along the
// line in the lane's registers (z' = p^16 z + E), and the chained states are the A operand of
// [z; s]^T U^T as they stand (U^T's rows taken in the order 0, 2, 4, 6, 1, 3, 5, 7). x^T T^T is
// taken with x^T V^T, from one read and split of x, and kept in registers while the states are
// chained (a second read and split would add 6-14 % to a pass's warp instructions). A line of
// up to 1024 samples goes to a team of W = ceil(L / (16 KU)) warps (a block), each chaining its
// own chunks from a zero start, then adding the states entering its range, which the team
// passes through shared memory (one barrier). KU is 4 (128 registers, 16 warps an SM), and 8
// for columns longer than 256 (168 registers, 12 warps an SM: each warp holds twice the
// samples, so an SM has 1.5 times the work in flight). Longer lines are cut in segments of 256
// (iir_tc_seg): one launch exports each segment's leaving states, a small one chains them, and
// a third filters each segment from its entering states.
//
// A team's group is staged in shared memory (cp.async, the next group's copies in flight in a
// second stage while the current one is filtered), written over its stage and stored: all
// loads of a line come before its stores, so the pass may run in place. Each warp loads,
// filters and stores only its own samples, so a team meets only at the exchange.
//
// The fused (y, x) passes run the same groups: a slice's rows, and a little later its columns,
// read back from L2, so the array crosses DRAM once for both axes. iir_tc_yxc (a slice to a
// thread-block cluster; by default on 256 slices or more of up to 512 x 512, iir.c) pays
// because a pass's arithmetic is cheap (0.29-0.42 SM-cycles a sample): most of its time is data
// movement and its latency. iir_tc_yx (tickets) is opt-in: twice the groups on the same teams,
// it is slower than the two passes it replaces.
//
// Every pass is bound by its groups' latency (each group a chain of dependent steps: load,
// split, products, chain, exchange, products, store), not by its issue nor DRAM: fewer
// instructions (ldmatrix / stmatrix for the row fragments), a third copy stage or a cluster of
// blocks as the column team do not make it faster, and more warps an SM cost spills or another
// trip through shared memory. A column group moves 64 bytes a sample row: the long stride
// costs about 35 us at 512^3, in whichever pass it lies.

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

// kMaxL: the longest line of a pass (a team of up to 16 warps of 4 chunks, rows, or 8 warps of 8
// chunks, columns; 148 and 139 KB of shared memory, one team an SM); kMaxYX: of the fused passes
constexpr int kC = 16, kNL = 16, kMaxL = NDF__IIR_TC_LINE, kMaxYX = 512;
constexpr int kXch = 32 * 4; // a warp's floats in a team's exchange buffer
// 4 teams of 4 warps an SM (at 96, 5 teams, the chunks' zero-start responses kept from step 1
// to step 3 spill)
constexpr int kRegs = 128;
// The register cap for KU chunks a warp (KU: see the header; 8: 12 warps an SM)
template <int KU> constexpr int regs_of() { return KU == 8 ? 168 : kRegs; }

// The filter's matrices (row-major: T 16 x 16, V 8 x 16, U 16 x 8) and the chain's constants:
// two complex poles' p^16 and steady states; or, coupled (iir_alvarez of 2 to 4 steps as its
// sections, make_params), each direction's 4 real states chained by a 4 x 4 matrix A^n
// (n = 16, 64, 128: a chunk, a warp of 4 or 8 chunks), whose 2 x 2 blocks M[n][b][0] (rows
// and columns 2b, 2b + 1: lane t's own, b = t % 2) and M[n][b][1] (columns of the other
// block, its partner lane's) are (m00, m01, m10, m11); g the steady states as for the poles.
struct tcparams {
  float T[kC * kC], V[8 * kC], U[kC * 8];
  float2 pC[2], g[2];
  float4 M[3][2][2];
  int coupled;
};

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

__device__ __forceinline__ float2 cmul(float2 a, float2 b) { return cfma(a, b, make_float2(0, 0)); }

// A coupled step (tcparams) of a lane's two states z, its partner lane's q: o z + c q + e.
__device__ __forceinline__ float2 bfma(const float4 &o, const float4 &c, float2 z, float2 q,
                                       float2 e) {
  return make_float2(fmaf(o.x, z.x, fmaf(o.y, z.y, fmaf(c.x, q.x, fmaf(c.y, q.y, e.x)))),
                     fmaf(o.z, z.x, fmaf(o.w, z.y, fmaf(c.z, q.x, fmaf(c.w, q.y, e.y)))));
}
// The partner lane's states (lanes 0 and 1 of a quad hold the causal ones, 2 and 3 the others).
__device__ __forceinline__ float2 partner(float2 z) {
  return make_float2(__shfl_xor_sync(0xffffffffu, z.x, 1), __shfl_xor_sync(0xffffffffu, z.y, 1));
}

// Fragments of m16n8k8 (g = lane / 4, t = lane % 4): A (16 x 8) a0..a3 at (g, t), (g + 8, t),
// (g, t + 4), (g + 8, t + 4); B (8 x 8) b0, b1 at (t, g), (t + 4, g); C (16 x 8) c0..c3 at
// (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). The products' rows, columns and sums
// are taken in orders that put a lane's operands side by side in shared memory:
//   - A row g is line 2g, row g + 8 line 2g + 1 (lines: the rows of x^T, of the end states
//     and of y^T);
//   - the sum over a chunk's samples: k step kk, column t is sample 4t + 2kk, column t + 4
//     sample 4t + 2kk + 1 (a lane's x operands are samples 4t .. 4t + 3 of its two lines);
//   - y^T's columns: n tile nt, column n is sample 4 (n / 2) + 2 nt + n % 2 (a lane's results
//     are the same four samples of the same two lines);
//   - the sum over the states ([z; s]^T U^T): column t is state 2t, column t + 4 state
//     2t + 1 (the accumulator of x^T V^T, read as an A fragment).
// The constant B operands, split ([hi, lo][b0, b1]): T^T per k step and n tile, V^T per k
// step, U^T per n tile, kept in shared memory (a block's table, a lane's 8 x 16 bytes on
// distinct banks: 32 registers fewer a thread, so more warps an SM); and this lane's
// recursion's p^16 and steady-state gain (pole t % 2).
template <int KU> struct frags {
  const uint4 *tab;  // this lane's entry q (Tb kk, nt: 2 kk + nt; Vb kk: 4 + kk; Ub nt: 6 + nt)
  float2 pC, pCw, g; // p^16, p^(16 KU) (a warp's span)
  // coupled: this lane's blocks of A^16 (M[2b], M[2b + 1], b = lane % 2) and of A^(16 KU)
  // (Mw())
  const float4 *M;
  // Fills the block's table (warp 0; every thread of the block calls this, once).
  __device__ __forceinline__ frags(const tcparams &prm, uint4 (*table)[32]) {
    const int lane = threadIdx.x % 32, lg = lane / 4, lt = lane % 4;
    tab = &table[0][lane];
    if (threadIdx.x < 32) {
      const int on[2] = {4 * (lg / 2) + lg % 2, 4 * (lg / 2) + lg % 2 + 2}; // sample of column g
      uint32_t Tb[2][2][2][2], Vb[2][2][2], Ub[2][2][2];
#pragma unroll
      for (int kk = 0; kk < 2; kk++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
          const int k = 4 * lt + 2 * kk + r; // the sample of row t + 4r
#pragma unroll
          for (int nt = 0; nt < 2; nt++)
            split(prm.T[on[nt] * kC + k], Tb[kk][nt][0][r], Tb[kk][nt][1][r]);
          split(prm.V[lg * kC + k], Vb[kk][0][r], Vb[kk][1][r]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int r = 0; r < 2; r++)
          split(prm.U[on[nt] * 8 + 2 * lt + r], Ub[nt][0][r], Ub[nt][1][r]);
      auto put = [&](int q, const uint32_t(&b)[2][2]) {
        table[q][lane] = make_uint4(b[0][0], b[0][1], b[1][0], b[1][1]);
      };
#pragma unroll
      for (int kk = 0; kk < 2; kk++) {
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
          put(2 * kk + nt, Tb[kk][nt]);
        put(4 + kk, Vb[kk]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; nt++)
        put(6 + nt, Ub[nt]);
    }
    __syncthreads();
    pC = prm.pC[lt & 1];
    pCw = pC;
#pragma unroll
    for (int u = 1; u < KU; u++)
      pCw = cmul(pCw, pC);
    g = prm.g[lt & 1];
    M = &prm.M[0][0][0];
  }
  __device__ __forceinline__ const float4 *Mw() const { return M + (KU == 8 ? 8 : 4); }
  __device__ __forceinline__ void get(int q, uint32_t (&b)[2][2]) const {
    const uint4 v = tab[32 * q];
    b[0][0] = v.x, b[0][1] = v.y, b[1][0] = v.z, b[1][1] = v.w;
  }
  __device__ __forceinline__ void T(int kk, int nt, uint32_t (&b)[2][2]) const {
    get(2 * kk + nt, b);
  }
  __device__ __forceinline__ void V(int kk, uint32_t (&b)[2][2]) const { get(4 + kk, b); }
  __device__ __forceinline__ void U(int nt, uint32_t (&b)[2][2]) const { get(6 + nt, b); }
};

// Puts a warp's chunk states in its lane's chain order, or back: the anticausal lanes' reversed.
// The lanes of a warp run both directions, so a branch on the direction would run both orders
// one after the other; selects cost 2 an element, and the chain's loops are the same for all.
template <int KU> __device__ __forceinline__ void chain_order(bool causal, float (&E)[KU][4]) {
#pragma unroll
  for (int u = 0; u < KU / 2; u++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float a = E[u][i], b = E[KU - 1 - u][i];
      E[u][i] = causal ? a : b;
      E[KU - 1 - u][i] = causal ? b : a;
    }
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// All but the last committed group of copies complete, and visible to the warp.
__device__ __forceinline__ void wait_prior1() {
  asm volatile("cp.async.wait_group 1;" ::: "memory");
  __syncwarp();
}
// A 16-byte copy from global memory at gp to shared memory at address sa (cp.async, through L2),
// the L2 fetching the whole 128 bytes around it: a column group's rows are 64 bytes, and the
// next group's lie beside them (128 bytes serve the column passes better than 64 or 256).
__device__ __forceinline__ void cp_async16(uint32_t sa, const float *gp) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(sa), "l"(gp));
}
// The same, the L2 told that the line may go first (pol: createpolicy's evict_first).
__device__ __forceinline__ void cp_async16_ef(uint32_t sa, const float *gp, uint64_t pol) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::128B [%0], [%1], 16, %2;" ::"r"(sa),
               "l"(gp), "l"(pol));
}
__device__ __forceinline__ void st16_ef(float *gp, float4 v, uint64_t pol) {
  asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(gp), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w), "l"(pol)
               : "memory");
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// A team's share of a group of 16 lines of length L (rows: ROW, line l at l L from the
// group's origin; columns: sample i at i Q), staged at xs. Warp w of the block's W takes the
// 4 chunks from u0 = 4w (samples s0 .. s1 - 1 of each line, s0 = 64 w); the first We warps
// have some (a block sized for a longer axis may have more warps than this one needs). The
// samples past L, up to the last warp's last chunk, are the 'nearest' extension: the chain
// runs through them at its steady state. Stage layouts, each putting a fragment's loads on
// distinct banks:
//   rows:    sample i of line l at l RP + i, RP = 8 mod 16;
//   columns: at 16 r(i) + (l ^ 8 ((i >> 3) & 1)), r(i) = i ^ ((i >> 2) & 1).
// The warps a line of length L needs, 16 KU samples each.
template <int KU> __host__ __device__ __forceinline__ int team_of(int L) {
  return (L + KU * kC - 1) / (KU * kC);
}

// M, how the group lies in global memory:
//   0: every piece of 16 bytes aligned, and (columns) all 16 lines live;
//   1 (columns): a group may have fewer live lines (Q % 16, a multiple of 4, so that a piece's
//      4 lines are all live or all not);
//   2: any L and Q, the pieces moved 4 bytes at a time (8 where L, rows, or Q, columns, is
//      even), only their live samples (rows: past L is the next line) or lines (columns).
//   3 (columns, Q < 16: an image's channels, a field's components, interleaved): the lines
//      counted across the rows of [P][Q], none padded, so that a group may span rows (c0, its
//      first line's place in its row); a lane's 4 lines moved 16 bytes at a time where they
//      are one piece (Q % 4 == 0, aligned), else 4 bytes at a time each from its own row.
//      Padded (1 or 2), a group of [Z][Y][X][3]'s x pass would have 3 live lines of 16.
// The column pass has a kernel for each, so that the code for Q % 16 == 0 carries none of the
// others' (sharing a kernel with the partial groups slows the 512^3 z pass by some 15 %).
template <bool ROW, int KU = 4, int M = 0> struct team_group {
  // rows: a line's 16-byte pieces in a warp's span, and the lines a warp instruction covers
  static constexpr int PL = KU * kC / 4, LPI = 32 / PL;
  float *xs;
  int L, RP, W, w, We, nu, s0, s1;
  int LR;           // rows: the step between lines (L, but a segment's is the whole line's: len())
  int ef = 0;       // the L2 told its copies in (bit 0) and its stores (bit 1) may go first
  int c0 = 0;       // (M 3) the group's first line's place in its row of [P][Q]
  uint64_t pol = 0; // (the policy, when ef)
  __device__ __forceinline__ team_group(float *xs_, int L_, int W_, int w_)
      : xs(xs_), L(L_), W(W_), w(w_), LR(L_) {
    We = team_of<KU>(L);
    RP = We * KU * kC + 8;
    nu = w < We ? KU : 0;
    s0 = KU * kC * w;
    s1 = max(s0, min(L, s0 + kC * nu));
  }
  // A segment of Ls samples (iir_tc_seg; no longer than the L made with: the stage's layout
  // stays that of L).
  __device__ __forceinline__ void len(int Ls) {
    L = Ls;
    We = team_of<KU>(Ls);
    nu = w < We ? KU : 0;
    s1 = max(s0, min(Ls, s0 + kC * nu));
  }
  __host__ __device__ static int stage(int L) {
    const int rows = team_of<KU>(L) * KU * kC;
    return ROW ? kNL * (rows + 8) : rows * kNL;
  }
  __device__ __forceinline__ int at(int i, int l) const {
    return ROW ? l * RP + i : (i ^ ((i >> 2) & 1)) * kNL + (l ^ (((i >> 3) & 1) << 3));
  }

  // Copies this warp's samples of the group's first `live` lines, 16 bytes at a time,
  // between the stage and global memory at gm (IN: into the stage, cp.async through L2, not
  // waited for). A lane's pieces: rows, piece lane % PL of lines lane / PL + LPI k; columns,
  // piece lane % 4 of samples s0 + lane / 4 + 8k. The addresses are worked out once: piece k
  // is at a constant offset in the stage, and a global pointer steps along (64-bit products
  // per piece would be over a quarter of the pass's instructions).
  template <bool IN> __device__ __forceinline__ void move(float *gm, int64_t Q, int live) const {
    const int lane = threadIdx.x % 32;
    const uint32_t sb = (uint32_t)__cvta_generic_to_shared(xs);
    int so[2], n; // stage offsets of the even and odd pieces' first (floats), pieces to move
    float *gp;
    int64_t gs; // global step between pieces (floats)
    int ss;     // stage step between pieces (floats)
    if (ROW) {
      const int c = 4 * (lane % PL), r = lane / PL;
      so[0] = so[1] = at(s0 + c, r);
      gp = gm + (int64_t)r * LR + s0 + c;
      gs = LPI * (int64_t)LR;
      ss = LPI * RP;
      n = s0 + c >= s1 ? 0 : live == kNL ? kNL / LPI : (live - r + LPI - 1) / LPI;
      if (M == 2)
        return pieces4<IN>(sb, so, gp, gs, ss, n, min(4, L - (s0 + c)), LR % 2 == 0 && al8(gp));
    } else {
      // at(i0 + 8k, c) = so[k % 2] + k ss: the swizzle's row bit is the same for every k
      // (s0 % 64 == 0, lane / 4 < 8), its column bit flips with k
      const int c = 4 * (lane % 4), i0 = s0 + lane / 4;
      ss = 8 * kNL;
      so[0] = at(i0, c);
      so[1] = at(i0 + 8, c) - ss;
      gp = gm + (int64_t)i0 * Q + c;
      gs = 8 * Q;
      n = M && c >= live ? 0 : s1 - s0 == KU * kC ? KU * kC / 8 : max(0, (s1 - i0 + 7) / 8);
      if (M == 2)
        return pieces4<IN>(sb, so, gp, gs, ss, n, min(4, live - c), Q % 2 == 0 && al8(gp));
      if (M == 3) {
        // line c0 + c + j of the group's first row: row (c0 + c + j) / Q, rows LR Q apart
        int64_t d[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int m = c0 + c + j, r = m / (int)Q;
          d[j] = (int64_t)r * LR * Q + (m - r * Q) - c0 - c;
        }
        if (Q % 4 || (uintptr_t)(gp + d[0]) % 16)
          return flat4<IN>(sb, so, gp, gs, ss, n, live - c, d);
        gp += d[0];
      }
    }
    // A whole span, the common case, goes without a test between its pieces, which would also
    // cost each copy the three no-op loads that ptxas puts before a run of them (an eighth of
    // the cluster pass's warp instructions). Not on 8 chunks a warp: their 16 pieces'
    // addresses, all worked out first, spill.
    if (KU == 8 || n < N || (IN ? ef & 1 : ef & 2))
      pieces<IN, false>(sb, so, gp, gs, ss, n);
    else
      pieces<IN, true>(sb, so, gp, gs, ss, n);
  }
  static constexpr int N = ROW ? kNL / LPI : KU * kC / 8; // pieces a lane moves at most
  // Whether gp is 8-byte aligned (M == 2 takes arrays of any alignment: ndf__iir_tc_pass_launch;
  // with an even step, every piece of a lane is then aligned as its first).
  __device__ __forceinline__ static bool al8(const float *gp) { return (uintptr_t)gp % 8 == 0; }
  // move()'s pieces: the first n (all N where FULL, and no L2 hint)
  template <bool IN, bool FULL>
  __device__ __forceinline__ void pieces(uint32_t sb, const int (&so)[2], float *gp, int64_t gs,
                                         int ss, int n) const {
#pragma unroll
    for (int k = 0; k < N; k++, gp += gs) {
      if (!FULL && k >= n) break;
      const int o = so[ROW ? 0 : k & 1] + k * ss;
      if (IN && !FULL && (ef & 1))
        cp_async16_ef(sb + 4 * o, gp, pol);
      else if (IN)
        cp_async16(sb + 4 * o, gp);
      else if (!FULL && (ef & 2))
        st16_ef(gp, *reinterpret_cast<const float4 *>(xs + o), pol);
      else
        *reinterpret_cast<float4 *>(gp) = *reinterpret_cast<const float4 *>(xs + o);
    }
  }
  // The same 4 bytes at a time (M == 2), the first e samples (rows) or lines (columns) of each;
  // 8 bytes at a time where two (e even, the pairs aligned). (Written once, as a template on
  // the width, the two loops make ptxas spill 4-8 bytes in iir_tc_seg's M 2 kernels.)
  template <bool IN>
  __device__ __forceinline__ void pieces4(uint32_t sb, const int (&so)[2], float *gp, int64_t gs,
                                          int ss, int n, int e, bool two) const {
#pragma unroll 1
    for (int k = 0; k < n; k++, gp += gs) {
      const int o = so[ROW ? 0 : k & 1] + k * ss;
      if (two) {
#pragma unroll
        for (int j = 0; j < 4; j += 2)
          if (j < e) {
            if (IN)
              asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(sb + 4 * (o + j)),
                           "l"(gp + j));
            else
              *reinterpret_cast<float2 *>(gp + j) = *reinterpret_cast<const float2 *>(xs + o + j);
          }
      } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
          if (j < e) copy4<IN>(sb, o + j, gp + j);
      }
    }
  }
  // M 3's 4-byte copies: the first e of the lane's 4 lines, line j at gp + d[j].
  template <bool IN>
  __device__ __forceinline__ void flat4(uint32_t sb, const int (&so)[2], float *gp, int64_t gs,
                                        int ss, int n, int e, const int64_t (&d)[4]) const {
#pragma unroll 1
    for (int k = 0; k < n; k++, gp += gs) {
      const int o = so[k & 1] + k * ss;
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (j < e) copy4<IN>(sb, o + j, gp + d[j]);
    }
  }
  // One float between stage offset o (shared address sb + 4 o) and gp: IN, cp.async into the
  // stage; else a store from it.
  template <bool IN> __device__ __forceinline__ void copy4(uint32_t sb, int o, float *gp) const {
    if (IN)
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sb + 4 * o), "l"(gp));
    else
      *gp = xs[o];
  }
  // This warp's part of a group: its loads issued.
  __device__ __forceinline__ void load(const float *gin, int64_t Q, int live) const {
    move<true>(const_cast<float *>(gin), Q, live);
  }

  // The lane's x operands of chunk u: samples 4t .. 4t + 3 of lines 2g (v) and 2g + 1 (w2),
  // split: a[kk][hl] is k step kk's A fragment. Rows: two 16-byte loads from xb; columns:
  // sample 4t + j of both lines at col(xb, u, j) (xbase).
  struct base {
    float *p[2];
  };
  __device__ __forceinline__ static float *col(const base &xb, int u, int j) {
    return xb.p[j % 2] + kC * kNL * u + 32 * (j / 2);
  }
  __device__ __forceinline__ base xbase() const {
    const int lg = (threadIdx.x % 32) / 4, lt = threadIdx.x % 4;
    if (ROW) return base{{xs + 2 * lg * RP + s0 + 4 * lt, nullptr}};
    float *b = xs + (s0 + 4 * lt) * kNL + ((2 * lg) ^ (8 * (lt >> 1)));
    return base{{b + 16 * (lt & 1), b + 16 - 16 * (lt & 1)}};
  }
  __device__ __forceinline__ void xfrag(const base &xb, int u, uint32_t (&a)[2][2][4]) const {
    float v[4], w2[4];
    if (ROW) {
      const float4 p = *reinterpret_cast<const float4 *>(xb.p[0] + kC * u),
                   q = *reinterpret_cast<const float4 *>(xb.p[0] + kC * u + RP);
      v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w;
      w2[0] = q.x, w2[1] = q.y, w2[2] = q.z, w2[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const float2 p = *reinterpret_cast<const float2 *>(col(xb, u, j));
        v[j] = p.x, w2[j] = p.y;
      }
    }
#pragma unroll
    for (int kk = 0; kk < 2; kk++) {
      split(v[2 * kk], a[kk][0][0], a[kk][1][0]);
      split(w2[2 * kk], a[kk][0][1], a[kk][1][1]);
      split(v[2 * kk + 1], a[kk][0][2], a[kk][1][2]);
      split(w2[2 * kk + 1], a[kk][0][3], a[kk][1][3]);
    }
  }

  // Filters the group staged by load() (its copies complete and visible to the warp) into
  // gout (may be its input): xch, the team's [W][32][4] floats of shared memory for the
  // states crossing between its warps (W > 1).
  // CPL: the coupled chain (tcparams), a kernel of its own so that the other keeps its
  // registers.
  // SEG (iir_tc_seg): the group is a segment of longer lines. Where zuse, the lane's
  // recursion enters it with the states zin (za, zb) instead of the steady state of its end
  // sample. Where zout (the segment's export), nothing is filtered or stored: the lanes of the
  // last warp in their chain order write the states leaving the segment (from zin where zuse)
  // to zout[lane].
  template <bool CPL, bool SEG = false>
  __device__ void run(const frags<KU> &fr, float *gout, int64_t Q, int live, float *xch,
                      float4 zin = float4(), bool zuse = false, float4 *zout = nullptr) const {
    const int lane = threadIdx.x % 32, lg = lane / 4, lt = lane % 4;
    // lines past the last (rows) zero, and the 'nearest' extension past L (columns: a partial
    // group's lines past the last hold what the stage held; every line is filtered on its own,
    // and these are not stored)
    const int span = kC * nu;
    if (ROW && live < kNL)
      for (int e = lane; e < (kNL - live) * span; e += 32)
        xs[at(s0 + e % span, live + e / span)] = 0;
    if (nu > 0 && s1 == L)
      for (int e = lane; e < (s0 + span - L) * kNL; e += 32) {
        const int i = L + e / kNL, l = e % kNL;
        if (!ROW || l < live) xs[at(i, l)] = xs[at(L - 1, l)];
      }
    __syncwarp();
    const base xb = xbase();
    const bool causal = lt < 2;
    float2 za = make_float2(0, 0), zb = za;
    float E[KU][4], y0[KU][2][4]; // y0: the chunks' zero-start responses x^T T^T
    if (nu > 0) {
      // 1. each chunk's zero-start end states x^T V^T (lane (g, t) holds recursion t's for
      // lines 2g and 2g + 1: t < 2 causal, pole t; else anticausal, pole t - 2) and its
      // zero-start response x^T T^T, from one read of its x operands
#pragma unroll
      for (int u = 0; u < KU; u++) {
        uint32_t a[2][2][4];
        xfrag(xb, u, a);
#pragma unroll
        for (int i = 0; i < 4; i++)
          E[u][i] = y0[u][0][i] = y0[u][1][i] = 0;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
          uint32_t b[2][2];
          fr.V(kk, b);
          mma3(E[u], a[kk], b);
          if (SEG && zout) continue; // (an export needs no response)
#pragma unroll
          for (int nt = 0; nt < 2; nt++) {
            fr.T(kk, nt, b);
            mma3(y0[u][nt], a[kk], b);
          }
        }
      }
      // 2. chain: each replaced by the state entering its chunk, in order (causal) or in
      // reverse; the line's first warp starts from the steady state of its end sample
      if (SEG && zuse && (causal ? w == 0 : w == We - 1)) {
        za = make_float2(zin.x, zin.y);
        zb = make_float2(zin.z, zin.w);
      } else if (causal ? w == 0 : w == We - 1) {
        const int i = causal ? 0 : L - 1;
        za = cscale(fr.g, xs[at(i, 2 * lg)]);
        zb = cscale(fr.g, xs[at(i, 2 * lg + 1)]);
      }
      auto step = [&](float(&e)[4]) {
        const float2 ea = make_float2(e[0], e[1]), eb = make_float2(e[2], e[3]);
        e[0] = za.x, e[1] = za.y, e[2] = zb.x, e[3] = zb.y;
        za = cfma(fr.pC, za, ea);
        zb = cfma(fr.pC, zb, eb);
      };
      chain_order(causal, E);
      if (CPL) { // with the partner lane's states
        const int b = lane & 1;
        const float4 o = fr.M[2 * b], c = fr.M[2 * b + 1];
#pragma unroll
        for (int u = 0; u < KU; u++) {
          float(&e)[4] = E[u];
          const float2 ea = make_float2(e[0], e[1]), eb = make_float2(e[2], e[3]);
          const float2 qa = partner(za), qb = partner(zb);
          e[0] = za.x, e[1] = za.y, e[2] = zb.x, e[3] = zb.y;
          za = bfma(o, c, za, qa, ea);
          zb = bfma(o, c, zb, qb, eb);
        }
      } else {
#pragma unroll
        for (int u = 0; u < KU; u++)
          step(E[u]);
      }
    }
    if (W > 1) { // add the states entering this warp's range
      float *x = xch + w * kXch + 4 * lane;
      x[0] = za.x, x[1] = za.y, x[2] = zb.x, x[3] = zb.y;
      __syncthreads();
      if (CPL && nu > 0) {
        // as below, with the partner lane's states: every lane takes every step (the shuffles),
        // keeping those before this warp
        const int b = lane & 1;
        const float4 ow = fr.Mw()[2 * b], cw = fr.Mw()[2 * b + 1], o = fr.M[2 * b],
                     c = fr.M[2 * b + 1];
        float2 ia = make_float2(0, 0), ib = ia;
        for (int k = 0; k < We - 1; k++) {
          const int v = causal ? k : We - 1 - k;
          const float *xv = xch + v * kXch + 4 * lane;
          const float2 qa = partner(ia), qb = partner(ib);
          const float2 na = bfma(ow, cw, ia, qa, make_float2(xv[0], xv[1])),
                       nb = bfma(ow, cw, ib, qb, make_float2(xv[2], xv[3]));
          if (causal ? v < w : v > w) ia = na, ib = nb;
        }
#pragma unroll
        for (int u = 0; u < KU; u++) {
          float(&e)[4] = E[u];
          e[0] += ia.x, e[1] += ia.y, e[2] += ib.x, e[3] += ib.y;
          const float2 qa = partner(ia), qb = partner(ib);
          ia = bfma(o, c, ia, qa, make_float2(0, 0));
          ib = bfma(o, c, ib, qb, make_float2(0, 0));
        }
        if (SEG) { // (as below)
          za.x += ia.x, za.y += ia.y;
          zb.x += ib.x, zb.y += ib.y;
        }
      } else if (!CPL && nu > 0) {
        float2 ia = make_float2(0, 0), ib = ia;
        for (int k = 0; k < We; k++) { // the warps before this one, in chain order
          const int v = causal ? k : We - 1 - k;
          if (v == w) break;
          const float *o = xch + v * kXch + 4 * lane;
          ia = cfma(fr.pCw, ia, make_float2(o[0], o[1]));
          ib = cfma(fr.pCw, ib, make_float2(o[2], o[3]));
        }
        auto add = [&](float(&e)[4]) {
          e[0] += ia.x, e[1] += ia.y, e[2] += ib.x, e[3] += ib.y;
          ia = cmul(fr.pC, ia);
          ib = cmul(fr.pC, ib);
        };
#pragma unroll
        for (int u = 0; u < KU; u++)
          add(E[u]);
        if (SEG) { // the states leaving this warp's range: its own and those entering it
          za.x += ia.x, za.y += ia.y;
          zb.x += ib.x, zb.y += ib.y;
        }
      }
    }
    if (nu == 0) return;
    if (SEG && zout) {
      if (causal ? w == We - 1 : w == 0) zout[lane] = make_float4(za.x, za.y, zb.x, zb.y);
      return;
    }
    // 3. the states back in chunk order; y^T = x^T T^T + [z; s]^T U^T, over the stage (each
    // lane writes the samples it read, and the steady states' samples were read above)
    chain_order(causal, E);
    __syncwarp();
#pragma unroll
    for (int u = 0; u < KU; u++) {
      uint32_t s[2][4];
      split(E[u][0], s[0][0], s[1][0]);
      split(E[u][2], s[0][1], s[1][1]);
      split(E[u][1], s[0][2], s[1][2]);
      split(E[u][3], s[0][3], s[1][3]);
      float(&y)[2][4] = y0[u];
#pragma unroll
      for (int nt = 0; nt < 2; nt++) {
        uint32_t b[2][2];
        fr.U(nt, b);
        mma3(y[nt], s, b);
      }
      // line 2g: samples 4t .. 4t + 3 are y[0][0], y[0][1], y[1][0], y[1][1]; 2g + 1: [2], [3]
      if (ROW) {
        float *yb = xb.p[0] + kC * u;
        *reinterpret_cast<float4 *>(yb) = make_float4(y[0][0], y[0][1], y[1][0], y[1][1]);
        *reinterpret_cast<float4 *>(yb + RP) = make_float4(y[0][2], y[0][3], y[1][2], y[1][3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
          *reinterpret_cast<float2 *>(col(xb, u, j)) =
              make_float2(y[j / 2][j % 2], y[j / 2][2 + j % 2]);
      }
    }
    __syncwarp();
    move<false>(gout, Q, live);
  }
};

// A team's shared memory: two stages, then (W > 1) two exchange buffers (groups in turn).
template <bool ROW, int KU = 4> size_t smem_of(int L, int W) {
  return sizeof(float) * (2 * team_group<ROW, KU>::stage(L) + (W > 1 ? 2 * W * kXch : 0));
}

// Along L of [P][L][Q] (rows: Q == 1; columns: any Q, team_group's M). The blocks (teams) stay
// resident and take the groups of 16 lines in turn. last: the filter's last pass; a column
// pass then stores with the L2 told that its results may go first, keeping the lines still to
// be read, which the pass before left there (a gain at 256^3, none at 512^3).
template <bool ROW, int KU, bool CPL, int M>
__global__ void __maxnreg__(regs_of<KU>())
    iir_tc(const float *src, float *dst, int64_t lines, int L, int64_t Q, int last,
           const __grid_constant__ tcparams prm) {
  extern __shared__ __align__(16) float smem[];
  const int W = blockDim.x / 32;
  team_group<ROW, KU, M> gr(smem, L, W, threadIdx.x / 32);
  constexpr bool PART = !ROW && (M == 1 || M == 2);
  const int stage = gr.stage(L);
  float *xch = smem + 2 * stage;
  __shared__ uint4 table[8][32];
  const frags<KU> fr(prm, table);
  if (!ROW && last) {
    gr.pol = evict_first_policy();
    gr.ef = 2;
  }
  // groups of 16 lines in turn; columns: a row of [P][Q] in groups of 16, its last one partial
  // where Q % 16 (M 1, 2), as if each row were padded to QP lines (M 3: not padded). A group's
  // first line, (p, q) of [P][QP] (rows: Q == 1), as the groups advance.
  const int64_t QP = ROW || !PART ? Q : (Q + kNL - 1) / kNL * kNL,
                groups = ((ROW || !PART ? lines : lines / Q * QP) + kNL - 1) / kNL;
  walk2<int64_t> l0((int64_t)blockIdx.x * kNL, (int64_t)gridDim.x * kNL, QP);
  auto off = [&]() { return l0.r * L * Q + l0.c; };
  auto live = [&](int64_t gi) {
    return (int)min((int64_t)kNL, ROW || !PART ? lines - gi * kNL : Q - l0.c);
  };
  int64_t gi = blockIdx.x, cur = 0;
  if (M == 3) gr.c0 = (int)l0.c;
  if (gi < groups) gr.load(src + off(), Q, live(gi));
  commit();
  for (int b = 0; gi < groups; gi += gridDim.x, b ^= 1) {
    const int64_t gn = gi + gridDim.x;
    cur = off();
    // (a partial group's live lines come from l0, so before next(); the others' from gi, after
    // it, in code of their own: team_group's M)
    const int lc = PART ? live(gi) : 0, c0 = (int)l0.c;
    l0.next();
    gr.xs = smem + (b ^ 1) * stage; // the next group's copies, into the other stage
    if (M == 3) gr.c0 = (int)l0.c;
    if (gn < groups) gr.load(src + off(), Q, live(gn));
    commit();
    wait_prior1();
    gr.xs = smem + b * stage;
    if (M == 3) gr.c0 = c0;
    gr.template run<CPL>(fr, dst + cur, Q, PART ? lc : live(gi), xch + b * W * kXch);
  }
}

// Along L of [P][L][Q] for lines longer than a team takes (kMaxL): each line in segments of S
// samples (the last shorter), a team to a segment of a group of 16 lines, the items (group,
// segment) taken in turn as iir_tc takes its groups. Three launches (ndf__iir_tc_pass_launch):
// with zb non-NULL and exp, each segment's leaving states, from a zero start (the line's first
// and last from its end samples' steady states) into zb[k][group][lane] (team_group::run);
// iir_tc_chain turns them into the states entering each segment; then,
// exp 0, each segment filtered from those. The array is read twice and written
// once, and a segment reads only its own samples, so the pass may run in place.
// iir_tc_seg's groups of 16 lines: as iir_tc's, each row of [P][Q] padded to whole groups where
// pad (columns of a partial group, M 1 or 2; rows: Q == 1).
__host__ __device__ __forceinline__ int64_t seg_groups(int64_t lines, int64_t Q, bool pad) {
  return ((pad ? lines / Q * ((Q + kNL - 1) / kNL * kNL) : lines) + kNL - 1) / kNL;
}

template <bool ROW, int KU, int M, bool CPL>
__global__ void __maxnreg__(regs_of<KU>())
    iir_tc_seg(const float *src, float *dst, int64_t lines, int L, int64_t Q, int S, int exp,
               int last, float4 *zb, const __grid_constant__ tcparams prm) {
  extern __shared__ __align__(16) float smem[];
  const int W = blockDim.x / 32;
  team_group<ROW, KU, M> gr(smem, S, W, threadIdx.x / 32);
  gr.LR = L;
  constexpr bool PART = !ROW && (M == 1 || M == 2);
  const int stage = gr.stage(S), NS = (L + S - 1) / S, lane = threadIdx.x % 32;
  float *xch = smem + 2 * stage;
  __shared__ uint4 table[8][32];
  const frags<KU> fr(prm, table);
  if (!ROW && last && !exp) {
    gr.pol = evict_first_policy();
    gr.ef = 2;
  }
  // groups as iir_tc's (columns: each row of [P][Q] padded to QP lines), each in NS segments
  const int64_t QP = ROW || !PART ? Q : (Q + kNL - 1) / kNL * kNL,
                groups = seg_groups(lines, Q, PART), items = groups * NS;
  struct item {
    int64_t at, gi; // the segment's first sample; its group
    int k, live;    // its segment; the group's live lines
    int c0;         // (columns) the group's first line's place in its row of [P][QP]
  };
  auto item_of = [&](int64_t it) {
    item r;
    r.gi = it / NS;
    r.k = (int)(it - r.gi * NS);
    r.c0 = 0;
    const int64_t l = r.gi * kNL;
    if (ROW) {
      r.at = l * L + (int64_t)r.k * S;
      r.live = (int)min((int64_t)kNL, lines - l);
    } else {
      const int64_t p = l / QP, c = l - p * QP;
      r.at = p * L * Q + c + (int64_t)r.k * S * Q;
      r.live = (int)min((int64_t)kNL, PART ? Q - c : lines - l);
      r.c0 = (int)c;
    }
    return r;
  };
  auto seg_len = [&](const item &r) { return min(S, L - r.k * S); };
  int64_t it = blockIdx.x;
  item cur = item_of(it);
  if (it < items) {
    gr.len(seg_len(cur));
    gr.c0 = cur.c0;
    gr.load(src + cur.at, Q, cur.live);
  }
  commit();
  for (int b = 0; it < items; it += gridDim.x, b ^= 1) {
    const int64_t in = it + gridDim.x;
    const item nx = item_of(in);
    gr.xs = smem + (b ^ 1) * stage; // the next item's copies, into the other stage
    if (in < items) {
      gr.len(seg_len(nx));
      gr.c0 = nx.c0;
      gr.load(src + nx.at, Q, nx.live);
    }
    commit();
    wait_prior1();
    gr.xs = smem + b * stage;
    gr.len(seg_len(cur));
    gr.c0 = cur.c0;
    const int lt = lane % 4;
    // a segment's causal lanes (lt < 2) enter it from the one before, the others from the one after
    const bool zuse = lt < 2 ? cur.k > 0 : cur.k < NS - 1;
    float4 *z = zb + (cur.k * groups + cur.gi) * 32;
    const float4 zin = zuse && !exp ? z[lane] : float4();
    gr.template run<CPL, true>(fr, dst + cur.at, Q, cur.live, xch + b * W * kXch, zin, zuse,
                               exp ? z : nullptr);
    cur = nx;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// The states leaving each segment (iir_tc_seg's export, zb[k][group][lane], n = groups * 32) made
// the states entering it: along the segments in order for the causal lanes (lane % 4 < 2), in
// reverse for the others (the line's first and last segments' entering states, left zero, are
// not used), each step z' = A^S z + e. A line's 4 states a direction lie in two lanes (2m: states
// 0 and 1, 2m + 1: 2 and 3; m even causal, odd anticausal), so a thread takes both, by MS, the
// blocks of A^S as tcparams's M. (Deriche's A is block-diagonal, a 2 x 2 block a pole, so its
// cross blocks are zero: one chain serves every filter.)
struct seg_blocks {
  float4 M[2][2];
};
__global__ void iir_tc_chain(float4 *zb, int64_t n, int NS, const seg_blocks MS) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; // (group, lane pair)
  if (2 * i >= n) return;
  const bool causal = i % 2 == 0;
  float2 a0 = make_float2(0, 0), b0 = a0, a1 = a0, b1 = a0; // lanes 2i (0) and 2i + 1 (1)
  for (int j = 0; j < NS; j++) {
    float4 *z = zb + (int64_t)(causal ? j : NS - 1 - j) * n + 2 * i;
    const float4 e0 = z[0], e1 = z[1];
    z[0] = make_float4(a0.x, a0.y, b0.x, b0.y);
    z[1] = make_float4(a1.x, a1.y, b1.x, b1.y);
    const float2 na0 = bfma(MS.M[0][0], MS.M[0][1], a0, a1, make_float2(e0.x, e0.y)),
                 nb0 = bfma(MS.M[0][0], MS.M[0][1], b0, b1, make_float2(e0.z, e0.w));
    a1 = bfma(MS.M[1][0], MS.M[1][1], a1, a0, make_float2(e1.x, e1.y));
    b1 = bfma(MS.M[1][0], MS.M[1][1], b1, b0, make_float2(e1.z, e1.w));
    a0 = na0, b0 = nb0;
  }
}

// A fused (y, x) pass's block: a team for row groups and one for column groups over the same
// two stages (the larger of their sizes) and exchange buffers.
template <int KU = 4> struct yx_teams {
  float *smem;
  team_group<true, KU> rg;
  team_group<false, KU, 1> cg;
  int W, stage;
  __device__ __forceinline__ yx_teams(float *smem_, int Y, int X)
      : smem(smem_), rg(smem_, X, blockDim.x / 32, threadIdx.x / 32),
        cg(smem_, Y, blockDim.x / 32, threadIdx.x / 32), W(blockDim.x / 32),
        stage(max(rg.stage(X), cg.stage(Y))) {}
  __device__ __forceinline__ void use(int b) { rg.xs = cg.xs = smem + b * stage; }
  __device__ __forceinline__ float *xch(int b) const { return smem + 2 * stage + b * W * kXch; }
};

// The last two axes of [P][Y][X] in one pass (the same filter on both). Per slice its row
// groups (x), then, lag slices later, its column groups (y), taken in ticket order (sync[0])
// by the resident teams. A slice's column groups read what its row groups wrote, from L2,
// once sync[2 + s] counts all of them; they come about two rounds of the resident teams
// behind (at one round the next group's copies wait), so the wait is short, and a team never
// waits on a group not yet handed out (no
// deadlock). A team's next group is copied into its other stage as soon as it may start. The
// rows are read from src, the columns read and written in dst. The last team to finish
// (sync[1] counts them) zeroes the counters for the next launch.
template <bool CPL>
__global__ void __maxnreg__(kRegs)
    iir_tc_yx(const float *src, float *dst, int64_t P, int Y, int X, int lag,
              const __grid_constant__ tcparams prm, unsigned long long *sync) {
  extern __shared__ __align__(16) float smem[];
  __shared__ long long ticket[2];
  yx_teams<> t(smem, Y, X);
  team_group<true> &rg = t.rg;
  team_group<false, 4, 1> &cg = t.cg;
  __shared__ uint4 table[8][32];
  const frags<4> fr(prm, table);
  const int RX = (Y + kNL - 1) / kNL, CY = (X + kNL - 1) / kNL, per = RX + CY;
  const long long total = (P + lag) * per;
  const bool small = total <= UINT32_MAX;
  const int64_t slice = (int64_t)Y * X;
  __shared__ int ready;
  // a ticket's group: kind 0 none, 1 rows (slice s, rows from j 16), 2 columns (slice s,
  // columns from j 16); where it is read from, and its lines
  struct item {
    int kind, j;
    int64_t s;
  };
  auto decode = [&](long long tk) {
    item it{0, 0, 0};
    if (tk >= total) return it;
    // (a 32-bit division where the tickets fit: the 64-bit one is a call of ~70 instructions)
    const int64_t round = small ? (int64_t)((uint32_t)tk / (uint32_t)per) : tk / per;
    const int j = (int)(tk - round * per);
    if (j < RX && round < P) it = item{1, j, round};
    if (j >= RX && round >= lag) it = item{2, j - RX, round - lag};
    return it;
  };
  auto at = [&](const item &it) {
    return it.s * slice + (it.kind == 1 ? (int64_t)it.j * kNL * X : (int64_t)it.j * kNL);
  };
  auto from = [&](const item &it) -> const float * { return (it.kind == 1 ? src : dst) + at(it); };
  auto live = [&](const item &it) { return min(kNL, (it.kind == 1 ? Y : X) - it.j * kNL); };
  int par = 0;
  auto take = [&]() {
    if (threadIdx.x == 0) ticket[par] = (long long)atomicAdd(sync, 1ull);
    __syncthreads();
    const long long tk = ticket[par];
    par ^= 1;
    return tk;
  };
  // whether slice s's rows are all done (wait: until they are)
  auto rows_done = [&](int64_t s, bool wait) {
    if (threadIdx.x == 0) {
      volatile unsigned long long *c = sync + 2 + s;
      if (wait)
        while (*c < (unsigned long long)RX)
          __nanosleep(32);
      ready = *c >= (unsigned long long)RX;
      __threadfence();
    }
    __syncthreads();
    const bool r = ready;
    __syncthreads();
    return r;
  };
  auto issue = [&](const item &it, int b) {
    t.use(b);
    if (it.kind == 1) rg.load(from(it), 1, live(it));
    if (it.kind == 2) cg.load(from(it), X, live(it));
  };
  long long tk = take();
  item cur = decode(tk);
  bool loaded = false; // the current group's copies issued (with the group before)
  for (int b = 0; tk < total; b ^= 1) {
    if (!loaded) {
      if (cur.kind == 2) rows_done(cur.s, true);
      issue(cur, b);
    }
    commit();
    // the next ticket's copies, into the other stage (all warps are past its last group:
    // take's barrier), if its group may start
    const long long tn = take();
    const item nx = decode(tn);
    loaded = nx.kind == 1 || (nx.kind == 2 && rows_done(nx.s, false));
    if (loaded) issue(nx, b ^ 1);
    commit();
    wait_prior1();
    t.use(b);
    float *x = t.xch(b);
    if (cur.kind == 1) {
      rg.template run<CPL>(fr, dst + at(cur), 1, live(cur), x);
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(sync + 2 + cur.s, 1ull);
      }
    } else if (cur.kind == 2) {
      cg.template run<CPL>(fr, dst + at(cur), X, live(cur), x);
    }
    tk = tn;
    cur = nx;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(sync + 1, 1ull) == gridDim.x - 1)
      for (int64_t i = 0; i < P + 2; i++)
        sync[i] = 0;
  }
}

// The last two axes of [P][Y][X] in one pass, a slice to a thread-block cluster of C blocks
// (teams; iir_tc_yx above hands groups out by ticket instead). Block r of a cluster takes the
// slice's row groups r, r + C, ... (read from src), meets the cluster's other blocks at one
// cluster barrier (its stores released to them, theirs acquired), then takes the column groups
// r, r + C, ... (read back from dst: the slice was written a few groups earlier, so from L2).
// The clusters take the slices in turn. A block waits only for the blocks of its own cluster,
// which run at the same time: no counters, no tickets. The next group's copies are in flight
// while a group is filtered, except across the barrier. (The barrier is not hidden by starting
// the next slice's rows, or its first row group, before the columns: two slices a cluster in L2
// and a longer wait between writing rows and reading them back send the column reads to DRAM.)
// KU chunks a warp (yxc_ku): 4 up to 256 x 256, else 8. With 8, the clusters hold some 45
// slices of 512 x 512 at a time, more than the L2 keeps, so the source's rows and the columns
// (read back, then written) are copied and stored with the L2 told they may go first, and the
// rows' results stay for their columns (at 256^3 the hints gain nothing).
template <int KU, bool CPL>
__global__ void __maxnreg__(regs_of<KU>())
    iir_tc_yxc(const float *src, float *dst, int64_t P, int Y, int X,
               const __grid_constant__ tcparams prm) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) float smem[];
  yx_teams<KU> t(smem, Y, X);
  team_group<true, KU> &rg = t.rg;
  team_group<false, KU, 1> &cg = t.cg;
  __shared__ uint4 table[8][32];
  const frags<KU> fr(prm, table);
  if (KU == 8) { // (see above: L2 hints)
    rg.pol = cg.pol = evict_first_policy();
    rg.ef = 1;
    cg.ef = 3;
  }
  unsigned ur, uC, ucid, uncl;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(ur));
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(uC));
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(ucid));
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(uncl));
  const int r = (int)ur, C = (int)uC, RX = (Y + kNL - 1) / kNL, CY = (X + kNL - 1) / kNL;
  const int64_t ncl = uncl, slice = (int64_t)Y * X;
  // an item: kind 1 row group j of slice s, 2 column group j, 0 none; j past the last group:
  // nothing to filter, but the item keeps its place (a block without a column group of the
  // slice still meets the others at the barrier)
  struct item {
    int kind, j;
    int64_t s;
  };
  auto first = [&](int64_t s) -> item {
    if (s >= P) return item{0, 0, s};
    return item{r < RX ? 1 : 2, r, s};
  };
  auto next = [&](const item &it) -> item {
    if (it.kind == 1) return it.j + C < RX ? item{1, it.j + C, it.s} : item{2, r, it.s};
    return it.j + C < CY ? item{2, it.j + C, it.s} : first(it.s + ncl);
  };
  auto at = [&](const item &it) {
    return it.s * slice + (it.kind == 1 ? (int64_t)it.j * kNL * X : (int64_t)it.j * kNL);
  };
  auto live = [&](const item &it) { return min(kNL, (it.kind == 1 ? Y : X) - it.j * kNL); };
  // A warp's samples lie in different parts of a stage under the row and the column layouts,
  // so a stage last filled for the other kind waits for every warp to be done with it.
  unsigned kinds = 0; // the kind last copied into stage b: bits 2b, 2b + 1
  auto issue = [&](const item &it, int b) {
    const bool copies = it.kind == 1 || (it.kind == 2 && it.j < CY);
    if (!copies) return;
    if (((kinds >> (2 * b)) & 3u) != (unsigned)it.kind) __syncthreads();
    kinds = (kinds & ~(3u << (2 * b))) | ((unsigned)it.kind << (2 * b));
    t.use(b);
    if (it.kind == 1) rg.load(src + at(it), 1, live(it));
    if (it.kind == 2) cg.load(dst + at(it), X, live(it));
  };
  item cur = first(ucid);
  bool loaded = false, met = false; // cur's copies issued; cur's slice's barrier passed
  for (int b = 0; cur.kind != 0; b ^= 1) {
    if (cur.kind == 2 && !met) { // the slice's first column group: every row stored
      asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                   "barrier.cluster.wait.acquire.aligned;" ::
                       : "memory");
      met = true;
      loaded = false;
    }
    if (!loaded) issue(cur, b);
    commit();
    // the next group's copies now, unless the barrier comes first
    const item nx = next(cur);
    loaded = nx.kind == 1 || (nx.kind == 2 && cur.kind == 2 && nx.s == cur.s);
    if (loaded) issue(nx, b ^ 1);
    commit();
    wait_prior1();
    t.use(b);
    float *x = t.xch(b);
    if (cur.kind == 1)
      rg.template run<CPL>(fr, dst + at(cur), 1, live(cur), x);
    else if (cur.j < CY)
      cg.template run<CPL>(fr, dst + at(cur), X, live(cur), x);
    if (nx.s != cur.s) met = false;
    cur = nx;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
#else
  __trap(); // (launched only on compute capability 9.0 and later)
#endif
}

typedef double mat4[4][4];

// z = x y (z may be x or y).
void mul(const mat4 &x, const mat4 &y, mat4 &z) {
  mat4 t = {};
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 4; k++)
      for (int j = 0; j < 4; j++)
        t[i][j] += x[i][k] * y[k][j];
  memcpy(z, t, sizeof t);
}
// z = a^n (n >= 1).
void power(const mat4 &a, int n, mat4 &z) {
  mat4 r = {}, b;
  memcpy(b, a, sizeof b);
  for (int i = 0; i < 4; i++)
    r[i][i] = 1;
  for (; n > 0; n >>= 1) {
    if (n & 1) mul(r, b, r);
    mul(b, b, b);
  }
  memcpy(z, r, sizeof r);
}
// The coupled chain's blocks of W (tcparams's M[n]): [k][0] rows and columns 2k, 2k + 1 (lane
// k's own), [k][1] the same rows, the other block's columns (its partner lane's).
seg_blocks blocks_of(const mat4 &W) {
  seg_blocks m;
  for (int k = 0; k < 2; k++)
    for (int o = 0; o < 2; o++) {
      const int r = 2 * k, cc = 2 * (o ? 1 - k : k);
      m.M[k][o] = make_float4((float)W[r][cc], (float)W[r][cc + 1], (float)W[r + 1][cc],
                              (float)W[r + 1][cc + 1]);
    }
  return m;
}
// Filter f's causal part as the state space z' = A z + b x, output c^T z (state_params), and R:
//  - iir_alvarez of S = 2 to 4 steps as its sections (core/iir.h, ndf__iir_sections): the states
//    w_1 .. w_S (then zeros), A[m][k] = nu (1 - nu)^(m-k) (k <= m), b[m] = (1 - nu)^(m+1), c the
//    sections' weights, R = c^T b (t = 0 counted once). Returns S (coupled).
//  - else its two complex recursions (iir_chunk.cuh), poles p: each a 2 x 2 block [[Re p, -Im p],
//    [Im p, Re p]] of A, b = (1, 0), c = (Re rho, -Im rho), R = sum Re rho. Returns 0.
int state_of(const ndf__iir &f, mat4 &A, double (&b)[4], double (&c)[4], double &R,
             std::complex<double> (&p)[2]) {
  double nu = 0, w[4] = {0};
  const int S = ndf__iir_sections(&f, &nu, w);
  memset(A, 0, sizeof(mat4));
  memset(b, 0, sizeof b);
  memset(c, 0, sizeof c);
  R = 0;
  for (int m = 0; m < S; m++) {
    b[m] = std::pow(1 - nu, m + 1);
    c[m] = w[m];
    R += c[m] * b[m];
    for (int k = 0; k <= m; k++)
      A[m][k] = nu * std::pow(1 - nu, m - k);
  }
  if (S) return S;
  std::complex<double> rho[2];
  recursions(f, false, p, rho, R);
  for (int k = 0; k < 2; k++) {
    A[2 * k][2 * k] = A[2 * k + 1][2 * k + 1] = p[k].real();
    A[2 * k][2 * k + 1] = -p[k].imag();
    A[2 * k + 1][2 * k] = p[k].imag();
    b[2 * k] = 1;
    c[2 * k] = rho[k].real();
    c[2 * k + 1] = -rho[k].imag();
  }
  return 0;
}

// The tensor-core parameters (T, V, U and the blocks M) of the filter whose causal part is the
// state space z' = A z + b x, output c^T z (4 states), and whose anticausal part is its mirror,
// R off T's diagonal (what of x[i] both parts count): T[i][j] = c^T A^|i-j| b (twice on the
// diagonal, less R), V's columns A^(15-j) b (causal end states) and A^j b (anticausal), U's rows
// c^T A^(i+1) and c^T A^(16-i). The caller sets g, pC and coupled.
tcparams state_params(const mat4 &A, const double *b, const double *c, double R) {
  tcparams q;
  memset(&q, 0, sizeof q);
  mat4 P[kC + 1] = {};
  for (int i = 0; i < 4; i++)
    P[0][i][i] = 1;
  for (int n = 1; n <= kC; n++)
    mul(P[n - 1], A, P[n]);
  double cA[kC + 1][4] = {}, Ab[kC + 1][4] = {}; // c^T A^n, A^n b
  for (int n = 0; n <= kC; n++)
    for (int i = 0; i < 4; i++)
      for (int k = 0; k < 4; k++) {
        cA[n][i] += c[k] * P[n][k][i];
        Ab[n][i] += P[n][i][k] * b[k];
      }
  auto h = [&](int t) { // c^T A^t b
    double v = 0;
    for (int i = 0; i < 4; i++)
      v += cA[t][i] * b[i];
    return v;
  };
  for (int i = 0; i < kC; i++) {
    for (int j = 0; j < kC; j++)
      q.T[i * kC + j] = (float)(i == j ? 2 * h(0) - R : h(i > j ? i - j : j - i));
    for (int m = 0; m < 4; m++) {
      q.V[m * kC + i] = (float)Ab[kC - 1 - i][m];
      q.V[(4 + m) * kC + i] = (float)Ab[i][m];
      q.U[i * 8 + m] = (float)cA[i + 1][m];
      q.U[i * 8 + 4 + m] = (float)cA[kC - i][m];
    }
  }
  mat4 W[3]; // A^16, A^64, A^128
  memcpy(W[0], P[kC], sizeof(mat4));
  power(A, 4 * kC, W[1]);
  power(A, 8 * kC, W[2]);
  for (int n = 0; n < 3; n++) {
    const seg_blocks m = blocks_of(W[n]);
    memcpy(q.M[n], m.M, sizeof m.M);
  }
  return q;
}

// tcparams for filter f (state_of):
//  - iir_alvarez of 2 to 4 steps as its sections, every state's steady state 1; coupled.
//  - else its two complex recursions. From f's float64 poles: every entry is worked out in float64
//    and rounded once, and the chain steps by p^16. (iir_chunk.cuh's FFMA passes step by p, so
//    they round the poles first and scale rho to them; at large sigma the rounded poles alone
//    move the filter by several 1e-6 of the largest output, too near test_iir's bound of 1e-5.)
tcparams make_params(const ndf__iir &f) {
  mat4 A;
  double b[4], c[4], R;
  std::complex<double> p[2];
  const int S = state_of(f, A, b, c, R, p);
  tcparams q = state_params(A, b, c, R);
  if (S) {
    for (int k = 0; k < 2; k++)
      q.g[k] = make_float2(2 * k < S ? 1.f : 0.f, 2 * k + 1 < S ? 1.f : 0.f);
    q.coupled = 1;
    return q;
  }
  for (int k = 0; k < 2; k++) {
    const std::complex<double> pC = std::pow(p[k], kC), g = 1.0 / (1.0 - p[k]);
    q.pC[k] = make_float2((float)pC.real(), (float)pC.imag());
    q.g[k] = make_float2((float)g.real(), (float)g.imag());
  }
  return q;
}

} // namespace

// A pass made once and launched many times (launch.h): the filter's matrices, the kernel and its
// launch. tc: along L of [P][L][Q]; else yxc: the last two axes of [P][L][Q] on clusters.
// tca, sega: the kernels for arrays not 16-byte aligned (M 2; M 3, columns of Q < 16, takes any
// alignment itself, and is both). seg: lines longer than kMaxL, in
// segments of S (NS of them, groups groups of lines; zb their states, on the device), chained
// by MS (iir_tc_chain).
struct ndf__iir_tc_pass {
  tcparams q;
  void (*tc)(const float *, float *, int64_t, int, int64_t, int, const tcparams),
      (*tca)(const float *, float *, int64_t, int, int64_t, int, const tcparams);
  void (*yxc)(const float *, float *, int64_t, int, int, const tcparams);
  void (*seg)(const float *, float *, int64_t, int, int64_t, int, int, int, float4 *,
              const tcparams),
      (*sega)(const float *, float *, int64_t, int, int64_t, int, int, int, float4 *,
              const tcparams);
  float4 *zb;
  seg_blocks MS; // the segments' chain: the blocks of A^S
  int S, NS;
  int64_t P, L, Q, groups;
  unsigned grid, threads, cluster;
  size_t smem;
};

namespace {
// A kernel's shared-memory limit is set to the most it takes on any shape (its lines of kMaxL),
// not to one plan's need, so that a plan made later for a shorter line cannot lower it under
// another's. (A pass is made once because making the matrices and querying the occupancy would
// take about 4 us of host time a pass launched on each call.)
template <bool ROW, int KU> cudaError_t tc_init(ndf__iir_tc_pass &p, int64_t lines, int L) {
  const int W = team_of<KU>(L);
  constexpr int M1 = ROW ? 0 : 1, M3 = ROW ? 2 : 3; // (team_group's M; rows have no 1 or 3)
  const bool flat = !ROW && p.Q < kNL;              // (M 3: any alignment)
  if (flat)
    p.tc = p.q.coupled ? iir_tc<ROW, KU, true, M3> : iir_tc<ROW, KU, false, M3>;
  else if (ROW ? L % 4 : p.Q % 4)
    p.tc = p.q.coupled ? iir_tc<ROW, KU, true, 2> : iir_tc<ROW, KU, false, 2>;
  else if (!ROW && p.Q % kNL)
    p.tc = p.q.coupled ? iir_tc<ROW, KU, true, M1> : iir_tc<ROW, KU, false, M1>;
  else
    p.tc = p.q.coupled ? iir_tc<ROW, KU, true, 0> : iir_tc<ROW, KU, false, 0>;
  p.tca = flat ? p.tc : p.q.coupled ? iir_tc<ROW, KU, true, 2> : iir_tc<ROW, KU, false, 2>;
  p.threads = 32 * W;
  p.smem = smem_of<ROW, KU>(L, W);
  int64_t resident = 0, ra = 0;
  const size_t most = smem_of<ROW, KU>(kMaxL, team_of<KU>(kMaxL));
  cudaError_t e = resident_blocks(p.tc, p.threads, p.smem, &resident, most);
  if (e == cudaSuccess && p.tca != p.tc) // (its shared-memory limit set)
    e = resident_blocks(p.tca, p.threads, p.smem, &ra, most);
  p.grid = (unsigned)std::min(resident, (lines + kNL - 1) / kNL);
  return e;
}

// Segments of kSeg samples for lines past kMaxL: a team of 4 warps, as the 256^3 passes
// (iir_tc_seg).
constexpr int kSeg = 256;
template <bool ROW, bool CPL> void seg_kernels(ndf__iir_tc_pass &p, bool full, bool flat) {
  constexpr int KU = 4, M3 = ROW ? 2 : 3; // (team_group's M: columns, Q < 16, any alignment)
  p.seg = flat   ? iir_tc_seg<ROW, KU, M3, CPL>
          : full ? iir_tc_seg<ROW, KU, 0, CPL>
                 : iir_tc_seg<ROW, KU, 2, CPL>;
  p.sega = flat ? iir_tc_seg<ROW, KU, M3, CPL> : iir_tc_seg<ROW, KU, 2, CPL>;
}
template <bool ROW> cudaError_t seg_init(ndf__iir_tc_pass &p, int64_t lines, const ndf__iir &f) {
  constexpr int KU = 4, S = kSeg;
  const bool full = ROW ? p.L % 4 == 0 : p.Q % kNL == 0, flat = !ROW && p.Q < kNL;
  if (p.q.coupled)
    seg_kernels<ROW, true>(p, full, flat);
  else
    seg_kernels<ROW, false>(p, full, flat);
  p.S = S;
  p.NS = (int)((p.L + S - 1) / S);
  p.groups = seg_groups(lines, p.Q, !ROW && !full && !flat);
  mat4 A, AS;
  double b[4], c[4], R;
  std::complex<double> pole[2];
  state_of(f, A, b, c, R, pole);
  power(A, S, AS);
  p.MS = blocks_of(AS);
  p.threads = 32 * team_of<KU>(S);
  p.smem = smem_of<ROW, KU>(S, team_of<KU>(S));
  int64_t resident = 0, ra = 0;
  cudaError_t e = resident_blocks(p.seg, p.threads, p.smem, &resident);
  if (e == cudaSuccess && p.sega != p.seg) // (its shared-memory limit set)
    e = resident_blocks(p.sega, p.threads, p.smem, &ra);
  if (e == cudaSuccess)
    e = cudaMalloc((void **)&p.zb, (size_t)p.NS * p.groups * 32 * sizeof(float4));
  p.grid = (unsigned)std::min(resident, p.groups * p.NS);
  return e;
}

// A launch of grid blocks of `threads`, smem bytes of shared memory each, on st; in clusters of
// C blocks where C > 0 (at: the cluster shape, filled here).
cudaLaunchConfig_t launch_config(unsigned grid, unsigned threads, size_t smem, unsigned C,
                                 cudaStream_t st, cudaLaunchAttribute (&at)[1]) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  if (C > 0) {
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = C;
    at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
  }
  return cfg;
}

// ndf__iir_tc_pass_make's work.
cudaError_t pass_init(ndf__iir_tc_pass &p, int64_t P, int64_t L, int64_t Q, const ndf__iir &f) {
  memset(&p, 0, sizeof p);
  p.q = make_params(f);
  p.P = P, p.L = L, p.Q = Q;
  // columns longer than 256: 8 chunks a warp (a tenth faster on 512^3's y and z passes; rows of
  // 512 and all of 256^3 are as fast or faster with 4)
  const int li = (int)L;
  const char *senv =
      ndf__dev_switch("NDF_CUDA_IIR_SEG"); // development switch: segments past this length
  if (L > (senv && atoi(senv) > 0 ? std::min(atoi(senv), kMaxL) : kMaxL))
    return Q == 1 ? seg_init<true>(p, P, f) : seg_init<false>(p, P * Q, f);
  if (Q == 1) return tc_init<true, 4>(p, P * Q, li);
  if (li <= 256) return tc_init<false, 4>(p, P * Q, li);
  return tc_init<false, 8>(p, P * Q, li);
}

} // namespace

extern "C" int ndf__iir_tc_fits(const float *src, const float *dst, int64_t L) {
  const char *env = ndf__dev_switch("NDF_CUDA_IIR_TC"); // "0": the FFMA kernel everywhere
  return !(env && env[0] == '0') && L > 0 && L <= INT32_MAX / 2 && ndf__iir_tc_aligned(src, dst);
}

extern "C" int ndf__iir_tc_filter(const ndf__iir *f, int64_t L) {
  double nu, c[4];
  return f->sigma <= kMaxSigma && L > 0 &&
         (f->form == NDF__IIR_PARALLEL || ndf__iir_sections(f, &nu, c));
}

extern "C" int ndf__iir_tc_pass_make(ndf__iir_tc_pass **out, int64_t P, int64_t L, int64_t Q,
                                     const ndf__iir *f) {
  *out = NULL;
  if (P <= 0 || L <= 0 || Q <= 0 || !ndf__iir_tc_fits(NULL, NULL, L) || !ndf__iir_tc_filter(f, L))
    return 0;
  ndf__iir_tc_pass *p = (ndf__iir_tc_pass *)malloc(sizeof *p);
  if (!p) return (int)cudaErrorMemoryAllocation;
  const cudaError_t e = pass_init(*p, P, L, Q, *f);
  if (e != cudaSuccess) {
    ndf__iir_tc_pass_free(p);
    return (int)e;
  }
  *out = p;
  return 0;
}

extern "C" int ndf__iir_tc_pass_launch(const ndf__iir_tc_pass *p, const float *src, float *dst,
                                       int last, void *stream) {
  cudaLaunchAttribute at[1];
  cudaStream_t st = (cudaStream_t)stream;
  const cudaLaunchConfig_t cfg =
      launch_config(p->grid, p->threads, p->smem, p->yxc ? p->cluster : 0, st, at);
  const bool al = ndf__iir_tc_aligned(src, dst);
  cudaError_t e;
  if (p->seg) {
    const auto k = al ? p->seg : p->sega;
    const int64_t lines = p->P * p->Q, n = p->groups * 32;
    const int L = (int)p->L, S = p->S;
    e = cudaLaunchKernelEx(&cfg, k, src, dst, lines, L, p->Q, S, 1, 0, p->zb, p->q);
    if (e == cudaSuccess) {
      iir_tc_chain<<<(unsigned)((n / 2 + 255) / 256), 256, 0, st>>>(p->zb, n, p->NS, p->MS);
      e = cudaGetLastError();
    }
    if (e == cudaSuccess)
      e = cudaLaunchKernelEx(&cfg, k, src, dst, lines, L, p->Q, S, 0, last, p->zb, p->q);
  } else if (p->tc) {
    e = cudaLaunchKernelEx(&cfg, al ? p->tc : p->tca, src, dst, p->P * p->Q, (int)p->L, p->Q, last,
                           p->q);
  } else {
    if (!al) return (int)cudaErrorMisalignedAddress; // (the cluster pass: exec checks)
    e = cudaLaunchKernelEx(&cfg, p->yxc, src, dst, p->P, (int)p->L, (int)p->Q, p->q);
  }
  return (int)(e != cudaSuccess ? e : cudaGetLastError());
}

extern "C" void ndf__iir_tc_pass_free(ndf__iir_tc_pass *p) {
  if (p && p->zb) cudaFree(p->zb);
  free(p);
}

extern "C" int ndf__iir_tc_yx_fits(const float *src, const float *dst, int64_t Y, int64_t X) {
  return X % 4 == 0 && X <= kMaxYX && Y <= kMaxYX && ndf__iir_tc_fits(src, dst, X) &&
         ndf__iir_tc_fits(src, dst, Y);
}

namespace {
// A fused (y, x) pass's block (yx_teams): its warps, and its dynamic shared memory.
template <int KU = 4> int yx_warps(int y, int x) {
  return std::max(team_of<KU>(x), team_of<KU>(y));
}
template <int KU = 4> size_t yx_smem(int y, int x) {
  const int W = yx_warps<KU>(y, x);
  return std::max(smem_of<true, KU>(x, W), smem_of<false, KU>(y, W));
}
// The cluster pass's chunks a warp: 8 on slices past 256 x 256 (as the columns of iir_tc), so
// that a 512-sample line takes a team of 4 warps, 3 teams an SM.
int yxc_ku(int y, int x) { return y > 256 || x > 256 ? 8 : 4; }
// The cluster pass's kernel, block and shared memory for slices of y x x, and the most shared
// memory the kernel takes on any slice (its limit: see tc_init).
struct yxc_config {
  void (*kern)(const float *, float *, int64_t, int, int, const tcparams);
  int warps;
  size_t smem, most;
};
yxc_config yxc_config_of(int y, int x, bool cpl) {
  if (yxc_ku(y, x) == 8)
    return {cpl ? iir_tc_yxc<8, true> : iir_tc_yxc<8, false>, yx_warps<8>(y, x), yx_smem<8>(y, x),
            yx_smem<8>(kMaxYX, kMaxYX)};
  return {cpl ? iir_tc_yxc<4, true> : iir_tc_yxc<4, false>, yx_warps<4>(y, x), yx_smem<4>(y, x),
          yx_smem<4>(256, 256)};
}
} // namespace

extern "C" int ndf__launch_iir_tc_yx(const float *src, float *dst, int64_t P, int64_t Y, int64_t X,
                                     const ndf__iir *f, unsigned long long *sync, void *stream) {
  if (P <= 0 || Y <= 0 || X <= 0) return 0;
  if (!ndf__iir_tc_yx_fits(src, dst, Y, X)) return (int)cudaErrorNotSupported;
  const int x = (int)X, y = (int)Y, W = yx_warps(y, x);
  const size_t smem = yx_smem(y, x);
  const tcparams q = make_params(*f);
  const int per = (y + kNL - 1) / kNL + x / kNL;
  int64_t resident = 0;
  const auto kern = q.coupled ? iir_tc_yx<true> : iir_tc_yx<false>;
  const cudaError_t err = resident_blocks(kern, 32 * W, smem, &resident);
  if (err != cudaSuccess) return (int)err;
  const int64_t grid = std::min(resident, P * per);
  const char *lenv = ndf__dev_switch("NDF_CUDA_IIR_LAG"); // development switch: slices behind
  const int64_t lag = lenv ? atoll(lenv) : 2 * ((grid + per - 1) / per) + 1;
  kern<<<(unsigned)grid, 32 * W, smem, (cudaStream_t)stream>>>(
      src, dst, P, y, x, (int)std::min<int64_t>(P, lag), q, sync);
  return (int)cudaGetLastError();
}

namespace {
// The cluster pass's blocks a cluster (*cluster) and clusters resident at once (*clusters) for
// kernel k on the current device, with its shared-memory limit set; both 0 where clusters are
// not (compute capability below 9.0, or too large).
cudaError_t yxc_plan(const yxc_config &k, int *cluster, int *clusters) {
  *cluster = *clusters = 0;
  int dev = 0, major = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e != cudaSuccess || major < 9) return e; // (below 9.0: no clusters)
  // 8 blocks a cluster: 2, 4 and 16 are slower at 256^3, 4 and 16 at 512^3
  const char *cenv = ndf__dev_switch("NDF_CUDA_IIR_CLUSTER"); // development switch
  const int C = cenv && atoi(cenv) > 0 ? atoi(cenv) : 8;
  e = cudaFuncSetAttribute(k.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k.most);
  if (e == cudaSuccess && C > 8)
    e = cudaFuncSetAttribute(k.kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute at[1];
  const cudaLaunchConfig_t cfg = launch_config(C, 32 * k.warps, k.smem, C, nullptr, at);
  e = cudaOccupancyMaxActiveClusters(clusters, k.kern, &cfg);
  if (e != cudaSuccess || *clusters < 1) {
    *clusters = 0;
    return e;
  }
  *cluster = C;
  return cudaSuccess;
}
} // namespace

extern "C" int ndf__iir_tc_yxc_pass_make(ndf__iir_tc_pass **out, int64_t P, int64_t Y, int64_t X,
                                         const ndf__iir *f) {
  *out = NULL;
  int cluster = 0, clusters = 0;
  if (P <= 0 || !ndf__iir_tc_yx_fits(NULL, NULL, Y, X)) return 0;
  const tcparams q = make_params(*f);
  const yxc_config k = yxc_config_of((int)Y, (int)X, q.coupled != 0);
  if (yxc_plan(k, &cluster, &clusters) != cudaSuccess) {
    (void)cudaGetLastError(); // a query refused: no cluster pass
    return 0;
  }
  if (!clusters) return 0;
  ndf__iir_tc_pass *p = (ndf__iir_tc_pass *)malloc(sizeof *p);
  if (!p) return (int)cudaErrorMemoryAllocation;
  memset(p, 0, sizeof *p);
  p->q = q;
  p->yxc = k.kern;
  p->P = P, p->L = Y, p->Q = X;
  p->threads = 32 * k.warps;
  p->smem = k.smem;
  p->cluster = (unsigned)cluster;
  p->grid = (unsigned)(cluster * std::min<int64_t>(clusters, P));
  *out = p;
  return 0;
}
