/* SPDX-License-Identifier: BSD-3-Clause */
/* sep.c - cpu_sep: separable filtering on the CPU, one cache-friendly pass per axis.
 *
 * Every pass reads one float32 C-contiguous array and writes another. Three kinds:
 * - plane: along a slow axis a, the array as [P][L][Q] with Q = the product of the
 *   axes after a; each output row of Q values is a weighted sum of input rows, so
 *   the inner loop runs along contiguous memory and the compiler vectorises it.
 *   Work is split in (p, block of i, block of q) tasks that keep their rows in cache.
 * - row: along the last axis; each line is copied with its extension into a
 *   buffer and filtered there.
 * - yx: the last two axes fused: per output row, the column filter over the
 *   input rows (a plane pass of one row) goes straight into the line buffer, and
 *   the row filter reads it from cache, so the pair costs one read and one write
 *   of the array instead of two of each.
 * Outputs are computed 32 at a time in registers, one load per FMA; the column
 * filters do two output rows at a time, one load per two FMAs.
 * Inputs other than float32 C-contiguous are converted first; outputs other
 * than that are written through a temporary and converted last. */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"
#include "host.h"

/* Compile the hot loops for AVX-512, AVX2+FMA and the baseline; the loader
 * picks the best the CPU has (GCC function multiversioning). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 &&           \
    !defined(__SANITIZE_ADDRESS__)
#define NDF_VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NDF_VEC
#endif

enum {
  VB = 32,   /* outputs per register block */
  QB = 1024, /* plane pass: values of a row per task */
  IB = 64
}; /* plane pass: output rows per task */

typedef struct {
  float *w;             /* all weights in float32, at each axis's off */
  float *tmp[2];        /* full-size temporaries */
  char *scratch;        /* per thread: line buffer, cval row, row pointers */
  size_t scratch_bytes; /* per thread */
  int64_t line_floats;  /* line buffer length */
  int threads;
  pthread_mutex_t lock; /* the temporaries serve one call at a time */
} state;

typedef struct {
  float *line, *line2; /* line buffers (two rows at a time) */
  float *crow;         /* QB copies of cval */
  const float **rows;  /* input row of each tap */
} scratch;

static scratch scratch_of(const state *s, int t) {
  char *b = s->scratch + (size_t)t * s->scratch_bytes;
  scratch r;
  r.line = (float *)b;
  r.line2 = r.line + s->line_floats;
  r.crow = r.line2 + s->line_floats;
  r.rows = (const float **)(r.crow + QB);
  return r;
}

/* ------------------------------------------------------------------ inner loops */

/* Eight floats as one value (GCC/Clang vector extension): the compiler keeps
 * four of them, the 32 outputs of a block, in registers across the taps,
 * which it does not do reliably for a plain float[32] loop. */
typedef float v8 __attribute__((vector_size(32)));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi" /* v8 never crosses a public ABI */
#endif

static inline v8 ld8(const float *p) {
  v8 v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* o[q] = sum_j w[j] rows[j][q] for q in [0, m). */
NDF_VEC static void combine_rows(float *restrict o, const float *const *rows, const float *w,
                                 int64_t n, int64_t m) {
  int64_t q = 0;
  for (; q + VB <= m; q += VB) {
    v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int64_t j = 0; j < n; j++) {
      const float *r = rows[j] + q;
      const float wj = w[j];
      a0 += wj * ld8(r);
      a1 += wj * ld8(r + 8);
      a2 += wj * ld8(r + 16);
      a3 += wj * ld8(r + 24);
    }
    memcpy(o + q, &a0, sizeof a0);
    memcpy(o + q + 8, &a1, sizeof a1);
    memcpy(o + q + 16, &a2, sizeof a2);
    memcpy(o + q + 24, &a3, sizeof a3);
  }
  for (; q < m; q++) {
    float acc = 0;
    for (int64_t j = 0; j < n; j++)
      acc += w[j] * rows[j][q];
    o[q] = acc;
  }
}

/* Two neighbouring output rows at once, so each input row is loaded once for
 * both: o0[q] = sum_j w[j] rows[j][q] and o1[q] = sum_j w[j] rows[j + 1][q]
 * (rows has n + 1 entries). Halves the loads of combine_rows. */
NDF_VEC static void combine_rows2(float *restrict o0, float *restrict o1, const float *const *rows,
                                  const float *w, int64_t n, int64_t m) {
  int64_t q = 0;
  for (; q + 16 <= m; q += 16) {
    v8 a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
    for (int64_t k = 0; k <= n; k++) {
      const float *r = rows[k] + q;
      const v8 x0 = ld8(r), x1 = ld8(r + 8);
      if (k < n) {
        a0 += w[k] * x0;
        a1 += w[k] * x1;
      }
      if (k > 0) {
        b0 += w[k - 1] * x0;
        b1 += w[k - 1] * x1;
      }
    }
    memcpy(o0 + q, &a0, sizeof a0);
    memcpy(o0 + q + 8, &a1, sizeof a1);
    memcpy(o1 + q, &b0, sizeof b0);
    memcpy(o1 + q + 8, &b1, sizeof b1);
  }
  for (; q < m; q++) {
    float a = 0, b = 0;
    for (int64_t j = 0; j < n; j++) {
      a += w[j] * rows[j][q];
      b += w[j] * rows[j + 1][q];
    }
    o0[q] = a;
    o1[q] = b;
  }
}

/* o[i] = sum_j w[j] b[i + j] for i in [0, m). */
NDF_VEC static void filter_line(float *restrict o, const float *b, const float *w, int64_t n,
                                int64_t m) {
  int64_t i = 0;
  for (; i + VB <= m; i += VB) {
    v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int64_t j = 0; j < n; j++) {
      const float *r = b + i + j;
      const float wj = w[j];
      a0 += wj * ld8(r);
      a1 += wj * ld8(r + 8);
      a2 += wj * ld8(r + 16);
      a3 += wj * ld8(r + 24);
    }
    memcpy(o + i, &a0, sizeof a0);
    memcpy(o + i + 8, &a1, sizeof a1);
    memcpy(o + i + 16, &a2, sizeof a2);
    memcpy(o + i + 24, &a3, sizeof a3);
  }
  for (; i < m; i++) {
    float acc = 0;
    for (int64_t j = 0; j < n; j++)
      acc += w[j] * b[i + j];
    o[i] = acc;
  }
}

/* Points rows[j], j < count, at the input row that tap j of output row i
 * reads (row r of the block starting at base with row stride Q), or at the
 * cval row; count n + 1 also covers output row i + 1 (rows[j + 1]). */
static void tap_rows(const float **rows, const float *base, int64_t Q, int64_t i, int64_t count,
                     const ndf__sepaxis *ax, int64_t len, const float *crow) {
  for (int64_t j = 0; j < count; j++) {
    int64_t r = ndf__map_index(i + j - ax->left, len, ax->mode);
    rows[j] = r < 0 ? crow : base + r * Q;
  }
}

/* Fills the line buffer b (len + n - 1 values, b[k] is x = k - left) around
 * its already written interior b[left .. left + len). */
static void extend_line(float *b, int64_t len, const ndf__sepaxis *ax, float cval) {
  const int64_t n = ax->n, left = ax->left;
  for (int64_t k = 0; k < n - 1 + len; k++) {
    int64_t x = k - left;
    if (x >= 0 && x < len) {
      k = left + len - 1; /* skip the interior */
      continue;
    }
    int64_t m = ndf__map_index(x, len, ax->mode);
    b[k] = m < 0 ? cval : b[left + m];
  }
}

/* ------------------------------------------------------------------ passes */

static void pass_plane(const state *s, const float *src, float *dst, const ndf_array *g,
                       const ndf__sepaxis *ax, float cval) {
  const int a = ax->axis;
  int64_t P = 1, Q = 1, L = g->shape[a];
  for (int d = 0; d < a; d++)
    P *= g->shape[d];
  for (int d = a + 1; d < g->ndim; d++)
    Q *= g->shape[d];
  const int64_t nq = (Q + QB - 1) / QB, ni = (L + IB - 1) / IB, tasks = P * nq * ni;
  const float *w = s->w + ax->off;
#pragma omp parallel num_threads(s->threads)
  {
    scratch sc = scratch_of(s, omp_get_thread_num());
    for (int k = 0; k < QB; k++)
      sc.crow[k] = cval;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
      const int64_t p = t / (nq * ni), ib = t / nq % ni, qb = t % nq;
      const int64_t q0 = qb * QB, m = Q - q0 < QB ? Q - q0 : QB;
      const float *base = src + p * L * Q + q0;
      const int64_t iend = L < (ib + 1) * IB ? L : (ib + 1) * IB;
      for (int64_t i = ib * IB; i < iend; i += 2) {
        float *o = dst + (p * L + i) * Q + q0;
        if (i + 1 < iend) {
          tap_rows(sc.rows, base, Q, i, ax->n + 1, ax, L, sc.crow);
          combine_rows2(o, o + Q, sc.rows, w, ax->n, m);
        } else {
          tap_rows(sc.rows, base, Q, i, ax->n, ax, L, sc.crow);
          combine_rows(o, sc.rows, w, ax->n, m);
        }
      }
    }
  }
}

/* The last axis, preceded (yx != NULL) by the next-to-last in the same pass. */
static void pass_rows(const state *s, const float *src, float *dst, const ndf_array *g,
                      const ndf__sepaxis *y, const ndf__sepaxis *x, float cval) {
  const int nd = g->ndim;
  const int64_t X = g->shape[nd - 1], Y = y ? g->shape[nd - 2] : 1;
  const int64_t nrows = ndf_array_size(g) / X;
  const float *wx = s->w + x->off, *wy = y ? s->w + y->off : NULL;
#pragma omp parallel num_threads(s->threads)
  {
    scratch sc = scratch_of(s, omp_get_thread_num());
    for (int k = 0; k < QB; k++)
      sc.crow[k] = cval;
    float *mid0 = sc.line + x->left, *mid1 = sc.line2 + x->left;
    /* Work items are pairs of rows of one plane: the column filter does both
     * rows of a pair at once (combine_rows2). Without y, items are rows. */
    const int64_t per_plane = y ? (Y + 1) / 2 : 1, items = y ? nrows / Y * per_plane : nrows;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < items; t++) {
      int64_t r = t, two = 0;
      if (y) {
        const int64_t plane = t / per_plane, i = 2 * (t % per_plane);
        r = plane * Y + i;
        two = i + 1 < Y;
        const float *base = src + plane * Y * X;
        for (int64_t q0 = 0; q0 < X; q0 += QB) { /* cval rows are QB long */
          const int64_t m = X - q0 < QB ? X - q0 : QB;
          tap_rows(sc.rows, base + q0, X, i, y->n + two, y, Y, sc.crow);
          if (two)
            combine_rows2(mid0 + q0, mid1 + q0, sc.rows, wy, y->n, m);
          else
            combine_rows(mid0 + q0, sc.rows, wy, y->n, m);
        }
      } else {
        memcpy(mid0, src + r * X, (size_t)X * sizeof(float));
      }
      extend_line(sc.line, X, x, cval);
      filter_line(dst + r * X, sc.line, wx, x->n, X);
      if (two) {
        extend_line(sc.line2, X, x, cval);
        filter_line(dst + (r + 1) * X, sc.line2, wx, x->n, X);
      }
    }
  }
}

/* Copies a (any dtype and strides) to the contiguous float32 f, or back. */
/* ------------------------------------------------------------------ solver */

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  double taps = 0;
  for (int k = 0; k < c->naxes; k++)
    taps += (double)c->ax[k].n;
  /* ~16 FMA per ns per core, plus a read and a write per pass at ~10 GB/s per core */
  double n = (double)ndf_array_size(&pb->in);
  return n * (taps / 16e9 + 8.0 * (c->naxes + 1) / 10e9) / ctx->threads;
}

/* The passes of c: the last two axes fuse when both are filtered. */
static int passes(const ndf__sep *c, int ndim, int kind[NDF_MAX_DIMS], int first[NDF_MAX_DIMS]) {
  int np = 0;
  for (int k = 0; k < c->naxes; k++) {
    int a = c->ax[k].axis;
    first[np] = k;
    if (a == ndim - 2 && k + 1 < c->naxes && c->ax[k + 1].axis == ndim - 1) {
      kind[np++] = 2; /* yx */
      k++;
    } else {
      kind[np++] = a == ndim - 1; /* 1 row, 0 plane */
    }
  }
  return np;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sep *c = p->pb.params;
  state *s = p->state;
  const int T = s->threads;
  const float cval = (float)c->cval;
  int kind[NDF_MAX_DIMS], first[NDF_MAX_DIMS];
  const int np = passes(c, in->ndim, kind, first);
  if (np == 0) { /* a copy with conversion; out == in is a no-op */
    if (in->data == out->data) return NDF_OK;
    const int64_t n = ndf_array_size(in);
#pragma omp parallel for num_threads(T) schedule(static)
    for (int64_t i = 0; i < n; i++)
      ndf__store(out->dtype, out->data, ndf__offset(out, i),
                 ndf__load(in->dtype, in->data, ndf__offset(in, i)));
    return NDF_OK;
  }
  ndf_array g = *in; /* the geometry; every pass array is contiguous float32 */
  ndf__contiguous_strides(&g);
  pthread_mutex_lock(&s->lock);
  const int direct_in = in->dtype == NDF_F32 && ndf__is_contiguous(in);
  const int direct_out = out->dtype == NDF_F32 && ndf__is_contiguous(out) &&
                         out->data != in->data; /* in place goes through a temporary */
  const float *src = in->data;
  int next = 0; /* the temporary the next pass writes, unless it is the source */
  if (!direct_in) {
    ndf__to_f32(in, s->tmp[0], T);
    src = s->tmp[0];
    next = 1;
  }
  for (int k = 0; k < np; k++) {
    float *dst = k == np - 1 && direct_out ? (float *)out->data : s->tmp[next];
    const ndf__sepaxis *ax = &c->ax[first[k]];
    if (kind[k] == 0)
      pass_plane(s, src, dst, &g, ax, cval);
    else if (kind[k] == 1)
      pass_rows(s, src, dst, &g, NULL, ax, cval);
    else
      pass_rows(s, src, dst, &g, ax, ax + 1, cval);
    src = dst;
    next ^= 1;
  }
  if (!direct_out) ndf__from_f32(src, out, T);
  pthread_mutex_unlock(&s->lock);
  return NDF_OK;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  free(s->w);
  free(s->tmp[0]);
  free(s->tmp[1]);
  free(s->scratch);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static ndf_status make(ndf_plan *p) {
  const ndf__sep *c = p->pb.params;
  const ndf_array *in = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_sep: out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->threads = p->ctx->threads;
  int64_t nw = 0, maxn = 1;
  for (int k = 0; k < c->naxes; k++) {
    nw += c->ax[k].n;
    if (c->ax[k].n > maxn) maxn = c->ax[k].n;
  }
  const int64_t X = in->shape[in->ndim - 1];
  s->line_floats = (X + maxn + 15) / 16 * 16;
  s->scratch_bytes = ((size_t)(2 * s->line_floats + QB) * sizeof(float) +
                      (size_t)(maxn + 1) * sizeof(float *) + 63) /
                     64 * 64;
  const size_t full = (size_t)ndf_array_size(in) * sizeof(float);
  /* sizes past what any machine holds are out of memory, never a wrapped count */
  if ((double)s->scratch_bytes * s->threads > 0x1p62 || (double)nw * sizeof(float) > 0x1p62)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_sep: out of host memory (%.3g bytes of scratch)",
                     (double)s->scratch_bytes * s->threads);
  s->w = malloc((size_t)(nw ? nw : 1) * sizeof(float));
  s->scratch = malloc(s->scratch_bytes * (size_t)s->threads);
  int kind[NDF_MAX_DIMS], first[NDF_MAX_DIMS];
  const int np = passes(c, in->ndim, kind, first);
  /* Two temporaries, allocated now; their pages are touched only by the
   * calls that use them (conversions, in place, more than one pass). */
  for (int t = 0; t < 2 && np > 0; t++)
    s->tmp[t] = malloc(full);
  if (!s->w || !s->scratch || (np > 0 && (!s->tmp[0] || !s->tmp[1])))
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_sep: out of host memory (%zu bytes per temporary)",
                     full);
  for (int64_t j = 0; j < nw; j++)
    s->w[j] = (float)c->w[j];
  return NDF_OK;
}

const ndf__solver ndf__cpu_sep = {.name = "cpu_sep",
                                  .op = NDF__OP_SEPFILTER,
                                  .place = NDF_PLACE_HOST,
                                  .applicable = applicable,
                                  .cost = cost,
                                  .make = make};
