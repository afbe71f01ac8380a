/* SPDX-License-Identifier: BSD-3-Clause */
/* box.c - cpu_box: separable filters whose weights along each filtered axis are one value (a
 * box: scipy's uniform_filter), by running sums, at a cost that does not grow with the box.
 *
 * A pass along axis a sees the array as [P][L][Q] (Q: the product of the axes after a) and
 * takes a block of up to QB columns of one p at a time: the window slides down the block's
 * lines, each output adding the row that enters and dropping the one that leaves (read where
 * they lie; past the ends, the row the mode gives, or cval's), in float64 as scipy's
 * uniform_filter1d sums, times the weight. Reads and writes run along rows of the block, which
 * are contiguous. Passes go in increasing axis order through float32 arrays, as cpu_sep's.
 *
 * A running sum carries a NaN or Inf to the end of its line (Inf - Inf), where the direct sum
 * reaches only the window: the solver is finite-only, and auto runs cpu_sep on inputs that
 * hold them. */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"
#include "host.h"

enum { QB = 64 }; /* columns a task */

typedef struct {
  float *tmp[2];          /* full-size float32 temporaries */
  double v[NDF_MAX_DIMS]; /* the box's value along each filtered axis */
  int threads;
  pthread_mutex_t lock; /* the temporaries serve one call at a time */
} state;

/* The value of the box along each filtered axis (all its weights are it), or 0 if some axis's
 * weights differ. */
static int box_weights(const ndf__sep *c, double *v) {
  for (int k = 0; k < c->naxes; k++) {
    const double *w = c->w + c->ax[k].off;
    for (int64_t j = 1; j < c->ax[k].n; j++)
      if (w[j] != w[0]) return 0;
    v[k] = w[0];
  }
  return 1;
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  double v[NDF_MAX_DIMS];
  const ndf__sep *c = pb->params;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST &&
         box_weights(c, v);
}

/* Two compensated float64 additions an element and pass (about 3.2 ns a core), plus a read and
 * a write per pass at ~10 GB/s a core: the box's length does not count. Measured (256^3
 * float32, three axes, 2 cores): cpu_box 83 ms at any size; cpu_sep 12 ms at size 9, 37 at 31,
 * 133 at 101, so they cross near size 60. cpu_sep's model reads about twice its times; with
 * this one the choice falls near size 47. */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  const double n = (double)ndf_array_size(&pb->in);
  return n * (double)c->naxes * (3.2e-9 + 8.0 / 10e9) / ctx->threads;
}

static int finite_only(const ndf__problem *pb) {
  (void)pb;
  return 1;
}

/* Extended row r of a block (input row r - left, or the mode's row for it): its qb values at
 * in + row * Q, or crow (the block's cval row) where the mode gives cval. */
static inline const float *row_of(const float *in, const float *crow, int64_t r, int64_t L,
                                  int64_t Q, const ndf__sepaxis *ax) {
  int64_t i = r - ax->left;
  if (i < 0 || i >= L) i = ndf__map_index(i, L, ax->mode);
  return i < 0 ? crow : in + i * Q;
}

/* *sum += x, what the rounding lost added to *err (Knuth's TwoSum): a running sum that keeps
 * small values a large one passed over, which a plain one loses once the large one leaves. */
static inline void two_add(double *sum, double *err, double x) {
  const double t = *sum + x, z = t - *sum;
  *err += (*sum - (t - z)) + (x - z);
  *sum = t;
}

/* One pass along ax of the [P][L][Q] float32 array src into dst, the box's value v: a task is
 * a block of up to QB columns of one p (a line, when Q is 1); the window's entering and leaving
 * rows are read where they lie, added and dropped in float64 with the rounding's loss kept. */
static void pass(const state *s, const float *src, float *dst, int64_t P, int64_t L, int64_t Q,
                 const ndf__sepaxis *ax, double v, double cval) {
  const int64_t n = ax->n, nq = (Q + QB - 1) / QB;
#pragma omp parallel for num_threads(s->threads) schedule(static)
  for (int64_t task = 0; task < P * nq; task++) {
    const int64_t p = task / nq, q0 = task % nq * QB, qb = Q - q0 < QB ? Q - q0 : QB;
    float crow[QB];
    for (int q = 0; q < QB; q++)
      crow[q] = (float)cval;
    const float *in = src + p * L * Q + q0;
    float *out = dst + p * L * Q + q0;
    if (Q == 1) { /* a line: its samples read directly inside, through the mode outside */
      double sum = 0, err = 0;
      for (int64_t r = 0; r < n; r++)
        two_add(&sum, &err, *row_of(in, crow, r, L, 1, ax));
      for (int64_t i = 0; i < L; i++) {
        out[i] = (float)((sum + err) * v);
        const int64_t je = i + n - ax->left, jl = i - ax->left;
        two_add(&sum, &err, je >= 0 && je < L ? in[je] : *row_of(in, crow, i + n, L, 1, ax));
        two_add(&sum, &err, -(double)(jl >= 0 && jl < L ? in[jl] : *row_of(in, crow, i, L, 1, ax)));
      }
      continue;
    }
    double sum[QB], err[QB]; /* the window's sum and what its rounding lost */
    for (int q = 0; q < QB; q++)
      sum[q] = err[q] = 0;
    for (int64_t r = 0; r < n; r++) {
      const float *e = row_of(in, crow, r, L, Q, ax);
      for (int64_t q = 0; q < qb; q++)
        two_add(&sum[q], &err[q], e[q]);
    }
    for (int64_t i = 0; i < L; i++) {
      const float *e = row_of(in, crow, i + n, L, Q, ax), *l = row_of(in, crow, i, L, Q, ax);
      float *o = out + i * Q;
      if (qb == QB) /* the full block: a fixed trip count the compiler unrolls and vectorises */
        for (int q = 0; q < QB; q++) {
          o[q] = (float)((sum[q] + err[q]) * v);
          two_add(&sum[q], &err[q], e[q]);
          two_add(&sum[q], &err[q], -(double)l[q]);
        }
      else
        for (int64_t q = 0; q < qb; q++) {
          o[q] = (float)((sum[q] + err[q]) * v);
          two_add(&sum[q], &err[q], e[q]);
          two_add(&sum[q], &err[q], -(double)l[q]);
        }
    }
  }
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sep *c = p->pb.params;
  state *s = p->state;
  const int T = s->threads;
  pthread_mutex_lock(&s->lock);
  /* float32 C-contiguous arrays are read and written where they lie (in place: through the
   * temporaries); others are converted on the way in and out */
  const int direct_in = in->dtype == NDF_F32 && ndf__is_contiguous(in);
  const int direct_out =
      out->dtype == NDF_F32 && ndf__is_contiguous(out) && out->data != in->data && c->naxes > 0;
  const float *src = in->data;
  if (!direct_in) {
    ndf__to_f32(in, s->tmp[0], T);
    src = s->tmp[0];
  }
  int next = 1;
  for (int k = 0; k < c->naxes; k++) {
    const int a = c->ax[k].axis;
    int64_t P = 1, Q = 1;
    for (int d = 0; d < a; d++)
      P *= in->shape[d];
    for (int d = a + 1; d < in->ndim; d++)
      Q *= in->shape[d];
    float *dst = k == c->naxes - 1 && direct_out ? (float *)out->data : s->tmp[next];
    pass(s, src, dst, P, in->shape[a], Q, &c->ax[k], s->v[k], c->cval);
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
  free(s->tmp[0]);
  free(s->tmp[1]);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static ndf_status make(ndf_plan *p) {
  const ndf_array *in = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->threads = p->ctx->threads;
  box_weights(p->pb.params, s->v);
  const double full = (double)ndf_array_size(in) * sizeof(float);
  if (full > 0x1p62)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory (%.3g bytes)", full);
  s->tmp[0] = malloc((size_t)full);
  s->tmp[1] = malloc((size_t)full);
  if (!s->tmp[0] || !s->tmp[1])
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory (%.3g bytes)", 2 * full);
  return NDF_OK;
}

const ndf__solver ndf__cpu_box = {.name = "cpu_box",
                                  .op = NDF__OP_SEPFILTER,
                                  .place = NDF_PLACE_HOST,
                                  .applicable = applicable,
                                  .cost = cost,
                                  .make = make,
                                  .finite_only = finite_only};
