/* SPDX-License-Identifier: BSD-3-Clause */
/* iir.c - cpu_iir: the recursive Gaussian (core/iir.h) on the CPU, OpenMP.
 *
 * Every axis is filtered as ndf__iir_line filters one line, in float64, but W lines at a time: W
 * neighbouring lines are gathered into a float64 block X[i][w] (line w, sample i), filtered there
 * with the lanes innermost (so the compiler vectorises across lines; the recursion runs along i),
 * and stored back. The work is done in a buffer B of the array's shape, float32, or float64 for a
 * float64 input (which is then computed in float64 throughout, as scipy computes): the output
 * itself when it has B's dtype and is C-contiguous, else a temporary stored into it at the end
 * (dtype conversion, rounding). The first filtered axis reads the input instead of B, so no pass
 * only copies.
 *
 * Passes over memory, as in section III of Cong, Huang and Zou: where there are enough slabs
 * (the array's last two axes, e.g. z-slices of a volume) for the threads, each thread takes
 * whole slabs and filters their last axis then the one before while the slab is in cache; the
 * other axes get a pass each. A 3-D volume is then read and written twice instead of three
 * times. Lines of one group are neighbours in memory on every axis but the last (W consecutive
 * elements per step), and on the last axis W consecutive rows. Axes are filtered last-first (x,
 * y, then z): the filters are linear and separable, so the order only changes rounding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/elem.h"
#include "../core/internal.h"

/* On x86-64 the line filter is built twice, for AVX2 with FMA and for the baseline, and the
 * loader picks one for the machine (GCC's target_clones, an ifunc): 4 float64 lanes per
 * instruction and fused multiply-adds instead of 2 lanes and separate ones. The clone is
 * x86-64-v3 (a feature level, picked on any CPU that has it), not "arch=haswell": GCC picks a
 * clone named after a CPU only on that very CPU model, and would run the baseline clone on every
 * other CPU. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

#define D NDF_MAX_DIMS
#define W 8 /* lines per group: lanes of the float64 recursion */

#if defined(__GNUC__) && !defined(__clang__)
#define UNROLL _Pragma("GCC unroll 8")
#define INLINE static inline __attribute__((always_inline))
#else
#define UNROLL
#define INLINE static inline
#endif

/* A group's W float64 lanes are G vectors of V lanes (GCC and Clang vector extensions), V = 4:
 * one AVX register. The recursions below run the G vectors as G independent chains, so that a
 * step's FMAs overlap. (A single vector of all W lanes, vector_size(64), GCC keeps on the stack
 * on an AVX2 target, half a register at a time: about 3x slower.) A sample's group is
 * X[i * G .. i * G + G - 1]; lane w of it is ((double *)X)[i * W + w]. */
#define V 4
#define G (W / V)
typedef double vec_t __attribute__((vector_size(V * sizeof(double)), may_alias));

/* One step of an all-pole recursion of order K on the G chains of sample x: x = b0 x - sum a[j]
 * h[j], shifted into h (the newest state enters the sum last, so a step waits for one FMA of
 * the step before). */
INLINE void pole_step(double b0, const double *a, vec_t h[][G], vec_t *x, const int K) {
  UNROLL
  for (int g = 0; g < G; g++) {
    vec_t v = b0 * x[g];
    for (int j = K - 1; j >= 0; j--)
      v -= a[j] * h[j][g];
    for (int j = K - 1; j > 0; j--)
      h[j][g] = h[j - 1][g];
    h[0][g] = x[g] = v;
  }
}

/* The recursions over a block X of n samples of W lanes, K a constant after inlining. */
INLINE void cascade(const ndf__iir *f, vec_t *restrict X, int64_t n, const int K) {
  const double b0 = f->b0;
  double a[NDF__IIR_MAXK];
  vec_t h[NDF__IIR_MAXK][G];
  for (int j = 0; j < K; j++)
    a[j] = f->a[j];
  vec_t first[G], last[G];
  for (int g = 0; g < G; g++) {
    first[g] = X[g];
    last[g] = X[(n - 1) * G + g];
    for (int j = 0; j < K; j++)
      h[j][g] = first[g];
  }
  for (int64_t i = 0; i < n; i++)
    pole_step(b0, a, h, X + i * G, K);
  /* Triggs-Sdika's start of the anticausal pass (iir.h): v at n - 1 - r into h[r] ... */
  for (int g = 0; g < G; g++) {
    vec_t dd[NDF__IIR_MAXK];
    for (int m = 0; m < K; m++)
      dd[m] = (n - 1 - m >= 0 ? X[(n - 1 - m) * G + g] : first[g]) - last[g];
    for (int r = 0; r < K; r++) {
      vec_t v = last[g];
      for (int m = 0; m < K; m++)
        v += f->M[r * K + m] * dd[m];
      h[r][g] = v;
    }
    for (int r = 0; r < K && n - 1 - r >= 0; r++)
      X[(n - 1 - r) * G + g] = h[r][g];
    /* ... and the recursion's state at i = n - K - 1, v[i + 1 + j], is h[K - 1 - j]. */
    for (int j = 0; j < K / 2; j++) {
      const vec_t t = h[j][g];
      h[j][g] = h[K - 1 - j][g];
      h[K - 1 - j][g] = t;
    }
  }
  for (int64_t i = n - K - 1; i >= 0; i--)
    pole_step(b0, a, h, X + i * G, K);
}

/* The parallel form; T: n samples of W lanes, for the input's copy. */
INLINE void parallel(const ndf__iir *f, vec_t *restrict X, vec_t *restrict T, int64_t n,
                     const int K) {
  double a[NDF__IIR_MAXK], bp[NDF__IIR_MAXK], bm[NDF__IIR_MAXK];
  vec_t h[NDF__IIR_MAXK][G];
  for (int j = 0; j < K; j++) {
    a[j] = f->a[j];
    bp[j] = f->bp[j];
    bm[j] = f->bm[j];
  }
  memcpy(T, X, (size_t)n * G * sizeof *T);
  for (int g = 0; g < G; g++)
    for (int j = 0; j < K; j++)
      h[j][g] = f->gp * T[g];
  for (int64_t i = 0; i < n; i++) {
    UNROLL
    for (int g = 0; g < G; g++) {
      vec_t v = bp[0] * T[i * G + g];
      for (int j = 1; j < K; j++)
        v += bp[j] * T[(i - j >= 0 ? i - j : 0) * G + g];
      for (int j = K - 1; j >= 0; j--)
        v -= a[j] * h[j][g];
      for (int j = K - 1; j > 0; j--)
        h[j][g] = h[j - 1][g];
      h[0][g] = X[i * G + g] = v;
    }
  }
  for (int g = 0; g < G; g++)
    for (int j = 0; j < K; j++)
      h[j][g] = f->gm * T[(n - 1) * G + g];
  for (int64_t i = n - 1; i >= 0; i--) {
    UNROLL
    for (int g = 0; g < G; g++) {
      vec_t v = bm[0] * T[(i + 1 < n ? i + 1 : n - 1) * G + g];
      for (int j = 1; j < K; j++)
        v += bm[j] * T[(i + 1 + j < n ? i + 1 + j : n - 1) * G + g];
      for (int j = K - 1; j >= 0; j--)
        v -= a[j] * h[j][g];
      for (int j = K - 1; j > 0; j--)
        h[j][g] = h[j - 1][g];
      h[0][g] = v;
      X[i * G + g] += v;
    }
  }
}

INLINE void filter_block(const ndf__iir *f, vec_t *X, vec_t *T, int64_t n) {
  if (f->form == NDF__IIR_PARALLEL) {
    switch (f->K) { /* Deriche; iir_vyv's twins of order 3 and 4 (ndf__iir_twin_for_accuracy) */
    case 3: parallel(f, X, T, n, 3); return;
    case 4: parallel(f, X, T, n, 4); return;
    default: parallel(f, X, T, n, f->K); return;
    }
  }
  switch (f->K) {
  case 1: cascade(f, X, n, 1); return;
  case 2: cascade(f, X, n, 2); return;
  case 3: cascade(f, X, n, 3); return;
  case 4: cascade(f, X, n, 4); return;
  default: cascade(f, X, n, 5); return;
  }
}

/* Rows (lines along the last axis, contiguous float32): 4 samples of 4 lines at a time, loaded
 * as 4 vectors and transposed in registers (element by element, the x pass takes 1.6 times as
 * long as y). */
typedef float f4_t __attribute__((vector_size(4 * sizeof(float)), may_alias, aligned(4)));

/* GCC before 12 lacks __builtin_shufflevector: rows then go element by element. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector) && __has_builtin(__builtin_convertvector)
#define ROWS_BY_4
#endif
#endif

#ifdef ROWS_BY_4

INLINE void transpose4(vec_t *a0, vec_t *a1, vec_t *a2, vec_t *a3) {
  const vec_t t0 = __builtin_shufflevector(*a0, *a1, 0, 4, 2, 6);
  const vec_t t1 = __builtin_shufflevector(*a0, *a1, 1, 5, 3, 7);
  const vec_t t2 = __builtin_shufflevector(*a2, *a3, 0, 4, 2, 6);
  const vec_t t3 = __builtin_shufflevector(*a2, *a3, 1, 5, 3, 7);
  *a0 = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  *a1 = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  *a2 = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  *a3 = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}

/* X's samples 0 .. L - 1 (lanes w: the rows p + r[w]): returns how many of the first it
 * loaded, a multiple of 4 (none without ROWS_BY_4). */
INLINE int64_t rows_in(vec_t *X, const float *p, const int64_t r[W], int64_t L) {
  int64_t i = 0;
  for (; i + 4 <= L; i += 4)
    for (int g = 0; g < G; g++) {
      vec_t a[4];
      for (int k = 0; k < 4; k++)
        a[k] = __builtin_convertvector(*(const f4_t *)(p + r[g * 4 + k] + i), vec_t);
      transpose4(&a[0], &a[1], &a[2], &a[3]);
      for (int k = 0; k < 4; k++)
        X[(i + k) * G + g] = a[k];
    }
  return i;
}

/* The reverse of rows_in, into the rows q + r[w]. */
INLINE int64_t rows_out(float *q, const int64_t r[W], const vec_t *X, int64_t L) {
  int64_t i = 0;
  for (; i + 4 <= L; i += 4)
    for (int g = 0; g < G; g++) {
      vec_t a[4];
      for (int k = 0; k < 4; k++)
        a[k] = X[(i + k) * G + g];
      transpose4(&a[0], &a[1], &a[2], &a[3]);
      for (int k = 0; k < 4; k++)
        *(f4_t *)(q + r[g * 4 + k] + i) = __builtin_convertvector(a[k], f4_t);
    }
  return i;
}
#else
INLINE int64_t rows_in(vec_t *X, const float *p, const int64_t r[W], int64_t L) {
  (void)X, (void)p, (void)r, (void)L;
  return 0;
}
INLINE int64_t rows_out(float *q, const int64_t r[W], const vec_t *X, int64_t L) {
  (void)q, (void)r, (void)X, (void)L;
  return 0;
}
#endif

/* Where a pass reads: the input (any dtype, its strides) or B (float32, contiguous). */
typedef struct {
  const void *data;
  ndf_dtype dtype;
  int64_t s[D];
} source;

/* The number of lines along `axis` in a 4-D block of shape n. */
static int64_t lines_of(const int64_t n[D], int axis) {
  int64_t nl = 1;
  for (int d = 0; d < D; d++)
    if (d != axis) nl *= n[d];
  return nl;
}

/* Group g's W lines (line l: the other axes' indices of the 4-D block of shape n in C order):
 * where they start in the source (sb, from offset so) and in B (bb, from bo); how many are real
 * (idle lanes repeat the first line); run: the lanes are W neighbours in memory, in both. */
typedef struct {
  int64_t sb[W], bb[W];
  int lanes, run;
} group;

INLINE void group_at(group *q, const source *src, int64_t so, const int64_t bs[D], int64_t bo,
                     const int64_t n[D], int axis, int64_t g, int64_t nl) {
  q->lanes = 0;
  q->sb[0] = so, q->bb[0] = bo;
  for (; q->lanes < W && g * W + q->lanes < nl; q->lanes++) {
    int64_t l = g * W + q->lanes, s = so, b = bo;
    for (int d = D - 1; d >= 0; d--) {
      if (d == axis) continue;
      const int64_t i = l % n[d];
      l /= n[d];
      s += i * src->s[d];
      b += i * bs[d];
    }
    q->sb[q->lanes] = s;
    q->bb[q->lanes] = b;
  }
  for (int w = q->lanes; w < W; w++)
    q->sb[w] = q->sb[0], q->bb[w] = q->bb[0];
  q->run = q->lanes == W && src->s[D - 1] == 1;
  for (int w = 1; w < W && q->run; w++)
    q->run = q->sb[w] == q->sb[0] + w && q->bb[w] == q->bb[0] + w;
}

/* Filters the lines along `axis` of the 4-D block of shape n whose first element is at src
 * offset so and B offset bo, groups g0 .. g1 - 1 of W lines. X, T, X2: n[axis] * W doubles each.
 *
 * Where a line's steps are 64 KB or more apart, two groups side by side in memory (both runs,
 * the second starting where the first ends) are read and written together, 2W neighbours a
 * step: whole 64-byte cache lines. One group a time reads half a line a step and leaves the
 * other half for the next group; along the slowest axis of a 256^3 volume (steps 256 KB apart,
 * a group's lines in one set of the L1 and L2 caches) that half is gone by then, and the z pass
 * takes 3.4-3.9 ns a sample against 2.4-2.5 in pairs (one thread of the CI machine). With
 * shorter steps the other half stays in L2, and the pair's third buffer (48 KB in all for
 * 256-sample lines) costs more than it saves: y on 256^3 1.7 against 2.0 ns. */
CLONES static void lines(const ndf__iir *f, const source *src, int64_t so, const source *dst,
                         int64_t bo, const int64_t n[D], int axis, int64_t g0, int64_t g1, vec_t *X,
                         vec_t *T, vec_t *X2) {
  vec_t *const Xs[2] = {X, X2};
  double(*const xs[2])[W] = {(double(*)[W])X, (double(*)[W])X2}; /* a sample's W lanes */
  double(*x)[W] = xs[0];
  const int64_t L = n[axis], nl = lines_of(n, axis);
  const int64_t *bs = dst->s, sa = src->s[axis], ba = bs[axis];
  float *const B = dst->dtype == NDF_F32 ? (float *)dst->data : NULL;
  double *const B64 = dst->dtype == NDF_F64 ? (double *)dst->data : NULL;
  for (int64_t g = g0; g < g1; g++) {
    group q, q2;
    group_at(&q, src, so, bs, bo, n, axis, g, nl);
    int m = 1; /* groups read and written together: 2 only for runs, side by side */
    if (q.run && src->dtype == NDF_F32 && sa >= 16384 && g + 1 < g1) {
      group_at(&q2, src, so, bs, bo, n, axis, g + 1, nl);
      m = q2.run && q2.sb[0] == q.sb[0] + W && q2.bb[0] == q.bb[0] + W ? 2 : 1;
    }
    if (src->dtype == NDF_F32 && q.run) {
      const float *p = (const float *)src->data + q.sb[0];
      for (int64_t i = 0; i < L; i++)
        for (int k = 0; k < m; k++)
          for (int w = 0; w < W; w++)
            xs[k][i][w] = p[i * sa + k * W + w];
    } else if (src->dtype == NDF_F64 && q.run) { /* W doubles: one whole cache line a step */
      const double *p = (const double *)src->data + q.sb[0];
      for (int64_t i = 0; i < L; i++)
        for (int w = 0; w < W; w++)
          x[i][w] = p[i * sa + w];
    } else if (src->dtype == NDF_F32) {
      const float *p = src->data;
      for (int64_t i = sa == 1 ? rows_in(X, p, q.sb, L) : 0; i < L; i++)
        for (int w = 0; w < W; w++)
          x[i][w] = p[q.sb[w] + i * sa];
    } else {
      for (int64_t i = 0; i < L; i++)
        for (int w = 0; w < W; w++)
          x[i][w] = ndf__load(src->dtype, src->data, q.sb[w] + i * sa);
    }
    for (int k = 0; k < m; k++)
      filter_block(f, Xs[k], T, L);
    if (B64) {
      for (int64_t i = 0; i < L; i++)
        for (int w = 0; w < q.lanes; w++)
          B64[q.bb[w] + i * ba] = x[i][w];
    } else if (q.run) {
      float *b = B + q.bb[0];
      for (int64_t i = 0; i < L; i++)
        for (int k = 0; k < m; k++)
          for (int w = 0; w < W; w++)
            b[i * ba + k * W + w] = (float)xs[k][i][w];
    } else {
      for (int64_t i = ba == 1 && q.lanes == W ? rows_out(B, q.bb, X, L) : 0; i < L; i++)
        for (int w = 0; w < q.lanes; w++)
          B[q.bb[w] + i * ba] = (float)x[i][w];
    }
    g += m - 1;
  }
}

static int64_t groups(const int64_t n[D], int axis) { return (lines_of(n, axis) + W - 1) / W; }

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
}

/* Fitted to one core of the CI machine (x86-64 with AVX2 and AVX-512, 256^2 x 64):
 * about 1.0 + 0.12 K ns per sample and axis for a cascade of order K (VYV 3-5: 1.38-1.59) and
 * 1.0 + 0.25 K for the parallel form (Deriche: 1.96), gathering and storing included. On the
 * same core cpu_sep took 2.8 ns at sigma 4.5 (37 taps), so FIR is the cheaper below sigma ~ 2-3;
 * with a tolerance, auto takes whichever the models make the cheaper (ops/gaussian.c). */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__iirp *q = pb->params;
  double t = 0;
  for (int d = 0; d < pb->in.ndim; d++)
    if (q->ax[d].K)
      t += 1.0e-9 + (q->ax[d].form == NDF__IIR_PARALLEL ? 0.25e-9 : 0.12e-9) * q->ax[d].K;
  return 2e-6 + (double)ndf_array_size(&pb->in) * t / ctx->threads;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__iirp *q = p->pb.params;
  const int pad = D - in->ndim, threads = p->ctx->threads;
  int64_t n[D], bs[D];
  const ndf__iir *f[D];
  source sin = {in->data, in->dtype, {0}};
  int64_t nmax = 1;
  for (int d = 0; d < D; d++) {
    n[d] = d < pad ? 1 : in->shape[d - pad];
    sin.s[d] = d < pad ? 0 : in->strides[d - pad];
    f[d] = d >= pad && q->ax[d - pad].K ? &q->ax[d - pad] : NULL;
    if (f[d] && n[d] > nmax) nmax = n[d];
  }
  bs[D - 1] = 1;
  for (int d = D - 2; d >= 0; d--)
    bs[d] = bs[d + 1] * n[d + 1];
  const int64_t N = bs[0] * n[0];
  if (N == 0) return NDF_OK;
  const ndf_dtype bt = in->dtype == NDF_F64 ? NDF_F64 : NDF_F32; /* B's */
  const size_t esize = bt == NDF_F64 ? sizeof(double) : sizeof(float);
  const int direct = out->dtype == bt && ndf__is_contiguous(out);
  void *B = direct ? out->data : malloc((size_t)N * esize);
  if (!B)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_iir: out of host memory (%lld elements)",
                     (long long)N);
  const source sb = {B, bt, {bs[0], bs[1], bs[2], bs[3]}};
  const int64_t slabs = n[0] * n[1];
  const int slab = (f[2] || f[3]) && slabs >= 2 * threads;
  int fail = 0;
#pragma omp parallel num_threads(threads)
  {
    vec_t *X = aligned_alloc(sizeof(vec_t), (size_t)nmax * 3 * G * sizeof(vec_t));
    int from_in = 1;
    if (!X) {
#pragma omp atomic write
      fail = 1;
    }
#pragma omp barrier
    if (!fail && slab) {
      const int64_t sn[D] = {1, 1, n[2], n[3]};
#pragma omp for schedule(dynamic, 1)
      for (int64_t s = 0; s < slabs; s++) {
        const int64_t so = s / n[1] * sin.s[0] + s % n[1] * sin.s[1], bo = s * bs[1];
        int first = 1;
        for (int a = D - 1; a >= 2; a--) {
          if (!f[a]) continue;
          lines(f[a], first ? &sin : &sb, first ? so : bo, &sb, bo, sn, a, 0, groups(sn, a), X,
                X + nmax * G, X + 2 * nmax * G);
          first = 0;
        }
      }
      from_in = 0;
    }
    for (int a = slab ? 1 : D - 1; a >= 0 && !fail; a--) {
      if (!f[a]) continue;
      const int64_t ng = groups(n, a);
#pragma omp for schedule(static)
      for (int64_t h = 0; h < (ng + 1) / 2; h++) /* pairs of groups (lines) */
        lines(f[a], from_in ? &sin : &sb, 0, &sb, 0, n, a, 2 * h, 2 * h + 2 < ng ? 2 * h + 2 : ng,
              X, X + nmax * G, X + 2 * nmax * G);
      from_in = 0;
    }
    free(X);
  }
  if (!fail && !direct) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < N; i++)
      ndf__store(out->dtype, out->data, ndf__offset(out, i),
                 bt == NDF_F64 ? ((const double *)B)[i] : ((const float *)B)[i]);
  }
  if (!direct) free(B);
  return fail ? ndf__fail(p->ctx, NDF_ENOMEM, "cpu_iir: out of host memory for line buffers")
              : NDF_OK;
}

static ndf_status make(ndf_plan *p) {
  p->state = NULL;
  p->exec = exec;
  p->free_state = NULL;
  return NDF_OK;
}

const ndf__solver ndf__cpu_iir = {.name = "cpu_iir",
                                  .op = NDF__OP_GAUSSIAN,
                                  .place = NDF_PLACE_HOST,
                                  .applicable = applicable,
                                  .cost = cost,
                                  .make = make,
                                  .finite_only = ndf__always_finite_only,
                                  .f64 = 1};
