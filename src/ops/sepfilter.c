/* SPDX-License-Identifier: BSD-3-Clause */
/* sepfilter.c - separable filters: correlate1d/convolve1d and sepfilter. Validation, scipy's
 * convolve-to-correlate flip, and plans; the problem builder the Gaussian's FIR form shares
 * (gaussian.c). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

int ndf__sep_box(const ndf__sep *c, double *v) {
  for (int k = 0; k < c->naxes; k++) {
    const double *w = c->w + c->ax[k].off;
    for (int64_t j = 1; j < c->ax[k].n; j++)
      if (w[j] != w[0]) return 0;
    v[k] = w[0];
  }
  return 1;
}

/* A kernel longer than its wrap axis (len samples) folded modulo the period, in float64, from w
 * into f: tap j reads the sample j - left away, which is the sample m - left' away for
 * m = j - left + left' modulo len, so len taps with left' = left mod len give the same output.
 * The sums of weights that land on one sample, often of opposite signs (a wide derivative), are
 * then made once in float64 rather than by the filter's float32 arithmetic, and there are
 * fewer taps. A box (equal weights) has nothing to cancel and keeps its running sums. */
static int foldable(const ndf__sepaxis *e, const double *w, int64_t len) {
  if (e->mode != NDF_MODE_WRAP || len < 1 || e->n <= len) return 0;
  for (int64_t j = 1; j < e->n; j++)
    if (w[j] != w[0]) return 1;
  return 0;
}

/* The problem's finite_form: its kernels longer than their wrap axes folded. The fold sums in
 * float64 what the filter would sum in float32, but where the input holds NaN or Inf it gives
 * Inf where scipy gives Inf - Inf = NaN. */
static int fold(ndf__problem *pb, ndf__problem *keep) {
  const ndf__sep *c = pb->params;
  int any = 0;
  for (int k = 0; k < c->naxes; k++)
    any |= foldable(&c->ax[k], c->w + c->ax[k].off, pb->in.shape[c->ax[k].axis]);
  if (!any) return 0;
  ndf__sep *f = calloc(1, pb->params_size);
  if (!f) return 0; /* unfolded: the same result, rounded as the filter rounds it */
  f->cval = c->cval;
  f->naxes = c->naxes;
  int64_t off = 0;
  for (int k = 0; k < c->naxes; k++) {
    const ndf__sepaxis *e = &c->ax[k];
    const int64_t len = pb->in.shape[e->axis];
    ndf__sepaxis *g = &f->ax[k];
    *g = *e;
    g->off = off;
    if (foldable(e, c->w + e->off, len)) {
      g->n = len;
      g->left = e->left % len;
      for (int64_t j = 0; j < e->n; j++)
        f->w[off + ((j - e->left + g->left) % len + len) % len] += c->w[e->off + j];
    } else {
      memcpy(f->w + off, c->w + e->off, (size_t)e->n * sizeof(double));
    }
    off += g->n;
  }
  if (keep) {
    *keep = *pb;
  } else {
    free(pb->params);
  }
  pb->params = f;
  return 1;
}

ndf_status ndf__build_sep(ndf__problem *pb, ndf_context *ctx, const ndf_array *in,
                          const ndf_array *out, const ndf__axis_in *ax, double cval, int convolve,
                          const char *what, const char *aliases) {
  ndf_status st = ndf__check_desc(ctx, in, "in");
  if (st == NDF_OK) st = ndf__check_desc(ctx, out, "out");
  if (st == NDF_OK) st = ndf__check_same_shape(ctx, in, out);
  if (st != NDF_OK) return st;
  int64_t total = 0;
  for (int d = 0; d < in->ndim; d++) {
    const ndf__axis_in *a = &ax[d];
    if (a->n == 0) continue;
    if (a->n < 0 || !a->w) return ndf__fail(ctx, NDF_EINVAL, "%s: axis %d has no weights", what, d);
    if (!ndf_mode_name(a->mode))
      return ndf__fail(ctx, NDF_EINVAL, "%s: unknown mode %d on axis %d", what, (int)a->mode, d);
    if (a->origin < -(a->n / 2) || a->origin > (a->n - 1) / 2)
      return ndf__fail(
          ctx, NDF_EINVAL, "%s: origin %d on axis %d outside [%lld, %lld] for %lld weights", what,
          a->origin, d, -(long long)(a->n / 2), (long long)((a->n - 1) / 2), (long long)a->n);
    for (int64_t j = 0; j < a->n; j++)
      if (!isfinite(a->w[j]))
        return ndf__fail(ctx, NDF_EINVAL, "%s: weight %lld on axis %d is not finite", what,
                         (long long)j, d);
    total += a->n;
  }
  size_t sz = sizeof(ndf__sep) + (size_t)total * sizeof(double);
  ndf__sep *s = calloc(1, sz);
  if (!s) return ndf__fail(ctx, NDF_ENOMEM, "%s: out of host memory", what);
  s->cval = cval;
  int64_t off = 0;
  for (int d = 0; d < in->ndim; d++) {
    const ndf__axis_in *a = &ax[d];
    if (a->n == 0) continue;
    ndf__sepaxis *e = &s->ax[s->naxes++];
    e->axis = d;
    e->mode = a->mode;
    e->n = a->n;
    e->off = off;
    int64_t origin = a->origin;
    if (convolve) { /* scipy: reverse, negate origin, one more for even n */
      for (int64_t j = 0; j < a->n; j++)
        s->w[off + j] = a->w[a->n - 1 - j];
      origin = -origin - (a->n % 2 == 0);
    } else {
      memcpy(s->w + off, a->w, (size_t)a->n * sizeof(double));
    }
    e->left = a->n / 2 + origin;
    off += a->n;
  }
  *pb = ndf__problem_make(NDF__OP_SEPFILTER, what, aliases, in, out, s, sz);
  pb->finite_form = fold;
  return NDF_OK;
}

/* build_sep, then plans it. */
static ndf_status plan_sep(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                           const ndf_array *out, const ndf__axis_in *ax, double cval, int convolve,
                           const char *method, const char *what, const char *aliases) {
  ndf__problem pb;
  ndf_status st = ndf__build_sep(&pb, ctx, in, out, ax, cval, convolve, what, aliases);
  return st == NDF_OK ? ndf__plan_create(plan, ctx, &pb, method) : st;
}

/* ------------------------------------------------------------------ correlate1d */

static ndf_status plan1d(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                         const ndf_array *out, const double *w, int64_t n, int axis,
                         const ndf_correlate1d_opts *opts, int convolve) {
  if (!plan) return NDF_EINVAL;
  *plan = NULL;
  if (!ctx) return NDF_EINVAL;
  ndf_correlate1d_opts o;
  ndf_status st = ndf__take_opts(ctx, &o, opts, sizeof o, sizeof o, "correlate1d");
  if (st == NDF_OK) st = ndf__check_desc(ctx, in, "in");
  if (st != NDF_OK) return st;
  if (!w || n < 1) return ndf__fail(ctx, NDF_EINVAL, "correlate1d: no weights");
  if (axis < -in->ndim || axis >= in->ndim)
    return ndf__fail(ctx, NDF_EINVAL, "correlate1d: axis %d out of range for ndim %d", axis,
                     in->ndim);
  ndf__axis_in ax[NDF_MAX_DIMS];
  memset(ax, 0, sizeof ax);
  int a = axis < 0 ? axis + in->ndim : axis;
  ax[a] = (ndf__axis_in){w, n, o.mode, o.origin};
  return plan_sep(plan, ctx, in, out, ax, o.cval, convolve, o.method, "correlate1d", NULL);
}

ndf_status ndf_plan_correlate1d(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                const ndf_array *out, const double *w, int64_t n, int axis,
                                const ndf_correlate1d_opts *opts) {
  return plan1d(plan, ctx, in, out, w, n, axis, opts, 0);
}

ndf_status ndf_plan_convolve1d(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                               const ndf_array *out, const double *w, int64_t n, int axis,
                               const ndf_correlate1d_opts *opts) {
  return plan1d(plan, ctx, in, out, w, n, axis, opts, 1);
}

ndf_status ndf_correlate1d(ndf_context *ctx, const ndf_array *in, ndf_array *out, const double *w,
                           int64_t n, int axis, const ndf_correlate1d_opts *opts) {
  ndf_plan *p = NULL;
  return ndf__run_once(plan1d(&p, ctx, in, out, w, n, axis, opts, 0), &p, in, 1, out);
}

ndf_status ndf_convolve1d(ndf_context *ctx, const ndf_array *in, ndf_array *out, const double *w,
                          int64_t n, int axis, const ndf_correlate1d_opts *opts) {
  ndf_plan *p = NULL;
  return ndf__run_once(plan1d(&p, ctx, in, out, w, n, axis, opts, 1), &p, in, 1, out);
}

/* ------------------------------------------------------------------ sepfilter */

ndf_status ndf_plan_sepfilter(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                              const ndf_array *out, const double *const *weights,
                              const int64_t *nweights, const ndf_sepfilter_opts *opts) {
  if (!plan) return NDF_EINVAL;
  *plan = NULL;
  if (!ctx) return NDF_EINVAL;
  ndf_sepfilter_opts o;
  ndf_status st = ndf__take_opts(ctx, &o, opts, sizeof o, sizeof o, "sepfilter");
  if (st == NDF_OK) st = ndf__check_desc(ctx, in, "in");
  if (st != NDF_OK) return st;
  if (!weights || !nweights) return ndf__fail(ctx, NDF_EINVAL, "sepfilter: no weights");
  ndf__axis_in ax[NDF_MAX_DIMS];
  memset(ax, 0, sizeof ax);
  for (int d = 0; d < in->ndim; d++) {
    if (!weights[d] || nweights[d] == 0) continue;
    ax[d] = (ndf__axis_in){weights[d], nweights[d], o.mode[d], o.origin[d]};
  }
  return plan_sep(plan, ctx, in, out, ax, o.cval, o.convolve, o.method, "sepfilter", NULL);
}

ndf_status ndf_sepfilter(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                         const double *const *weights, const int64_t *nweights,
                         const ndf_sepfilter_opts *opts) {
  ndf_plan *p = NULL;
  return ndf__run_once(ndf_plan_sepfilter(&p, ctx, in, out, weights, nweights, opts), &p, in, 1,
                       out);
}
