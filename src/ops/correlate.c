/* SPDX-License-Identifier: BSD-3-Clause */
/* correlate.c - N-dimensional correlation and convolution with a dense kernel
 * (scipy.ndimage.correlate / convolve): validation, the convolve-to-correlate
 * flip, the "direct" / "fft" method names, and plans. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

/* nf kernels (outs[0..nf-1]); bank: the caller used the bank API. */
static ndf_status plan_corr(ndf_plan **plan, ndf_context *ctx, const ndf_array *in, int nf,
                            const ndf_array *outs, const double *w, const int64_t *wshape,
                            const ndf_correlate_opts *opts, int convolve, int bank) {
  const char *what = bank ? (convolve ? "convolve_bank" : "correlate_bank")
                          : (convolve ? "convolve" : "correlate");
  if (!plan) return NDF_EINVAL;
  *plan = NULL;
  if (!ctx) return NDF_EINVAL;
  ndf_correlate_opts o;
  ndf_status st = ndf__take_opts(ctx, &o, opts, sizeof o, sizeof o, what);
  if (st == NDF_OK) st = ndf__check_desc(ctx, in, "in");
  if (st != NDF_OK) return st;
  if (nf < 1) return ndf__fail(ctx, NDF_EINVAL, "%s: %d kernels (at least 1)", what, nf);
  if (!outs) return ndf__fail(ctx, NDF_EINVAL, "%s: outs is NULL", what);
  for (int f = 0; f < nf && st == NDF_OK; f++) {
    char name[32] = "out";
    if (bank) snprintf(name, sizeof name, "outs[%d]", f);
    st = ndf__check_desc(ctx, &outs[f], name);
    if (st == NDF_OK) st = ndf__check_same_shape(ctx, in, &outs[f]);
    if (st == NDF_OK &&
        (outs[f].dtype != outs[0].dtype || outs[f].place.kind != outs[0].place.kind ||
         outs[f].place.device != outs[0].place.device))
      st = ndf__fail(ctx, NDF_EINVAL, "%s: outs[%d]'s dtype or place differs from outs[0]'s", what,
                     f);
  }
  if (st != NDF_OK) return st;
  if (!w || !wshape) return ndf__fail(ctx, NDF_EINVAL, "%s: no weights", what);
  int64_t nw = 1;
  for (int d = 0; d < in->ndim; d++) {
    if (wshape[d] < 1)
      return ndf__fail(ctx, NDF_EINVAL, "%s: kernel length %lld on axis %d", what,
                       (long long)wshape[d], d);
    if (nw > INT64_MAX / 8 / nf / wshape[d])
      return ndf__fail(ctx, NDF_EINVAL, "%s: the kernel's size overflows", what);
    nw *= wshape[d];
    if (!ndf_mode_name(o.mode[d]))
      return ndf__fail(ctx, NDF_EINVAL, "%s: unknown mode %d on axis %d", what, (int)o.mode[d], d);
    if (o.origin[d] < -(wshape[d] / 2) || o.origin[d] > (wshape[d] - 1) / 2)
      return ndf__fail(ctx, NDF_EINVAL,
                       "%s: origin %d on axis %d outside [%lld, %lld] for a kernel of length %lld",
                       what, o.origin[d], d, -(long long)(wshape[d] / 2),
                       (long long)((wshape[d] - 1) / 2), (long long)wshape[d]);
  }
  for (int64_t j = 0; j < nw * nf; j++)
    if (!isfinite(w[j]))
      return ndf__fail(ctx, NDF_EINVAL, "%s: weight %lld is not finite", what, (long long)j);
  size_t sz = sizeof(ndf__corr) + (size_t)(nw * nf) * sizeof(double);
  ndf__corr *c = calloc(1, sz);
  if (!c) return ndf__fail(ctx, NDF_ENOMEM, "%s: out of host memory for the kernel", what);
  c->cval = o.cval;
  c->nw = nw;
  c->nf = nf;
  for (int d = 0; d < in->ndim; d++) {
    int64_t origin = o.origin[d];
    if (convolve) origin = -origin - (wshape[d] % 2 == 0); /* scipy's flip */
    c->mode[d] = o.mode[d];
    c->k[d] = wshape[d];
    c->left[d] = wshape[d] / 2 + origin;
  }
  /* Reversing every axis of a C-contiguous kernel reverses its elements. scipy leaves weights
   * of magnitude <= DBL_EPSILON out of the sum (its footprint), so they are exact zeros here,
   * which the direct solvers skip: a NaN under one reaches no output. */
  for (int64_t f = 0; f < nf; f++)
    for (int64_t j = 0; j < nw; j++) {
      const double v = convolve ? w[f * nw + nw - 1 - j] : w[f * nw + j];
      c->w[f * nw + j] = fabs(v) > DBL_EPSILON ? v : 0.0;
    }
  ndf__problem pb = ndf__problem_make(NDF__OP_CORRELATE, what, " direct fft", in, outs, c, sz);
  pb.nout = nf;
  for (int d = 0; d < in->ndim; d++) /* a cval that is not finite reaches the borders only */
    pb.exact |= o.mode[d] == NDF_MODE_CONSTANT && !isfinite(o.cval);
  return ndf__plan_create(plan, ctx, &pb, o.method); /* "direct", "fft": the planner */
}

ndf_status ndf_plan_correlate(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                              const ndf_array *out, const double *weights, const int64_t *wshape,
                              const ndf_correlate_opts *opts) {
  return plan_corr(plan, ctx, in, 1, out, weights, wshape, opts, 0, 0);
}

ndf_status ndf_plan_convolve(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                             const ndf_array *out, const double *weights, const int64_t *wshape,
                             const ndf_correlate_opts *opts) {
  return plan_corr(plan, ctx, in, 1, out, weights, wshape, opts, 1, 0);
}

ndf_status ndf_plan_correlate_bank(ndf_plan **plan, ndf_context *ctx, const ndf_array *in, int nf,
                                   const ndf_array *outs, const double *weights,
                                   const int64_t *wshape, const ndf_correlate_opts *opts) {
  return plan_corr(plan, ctx, in, nf, outs, weights, wshape, opts, 0, 1);
}

ndf_status ndf_plan_convolve_bank(ndf_plan **plan, ndf_context *ctx, const ndf_array *in, int nf,
                                  const ndf_array *outs, const double *weights,
                                  const int64_t *wshape, const ndf_correlate_opts *opts) {
  return plan_corr(plan, ctx, in, nf, outs, weights, wshape, opts, 1, 1);
}

ndf_status ndf_correlate(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                         const double *weights, const int64_t *wshape,
                         const ndf_correlate_opts *opts) {
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_correlate(&p, ctx, in, out, weights, wshape, opts);
  return ndf__run_once(st, &p, in, 1, out);
}

ndf_status ndf_convolve(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                        const double *weights, const int64_t *wshape,
                        const ndf_correlate_opts *opts) {
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_convolve(&p, ctx, in, out, weights, wshape, opts);
  return ndf__run_once(st, &p, in, 1, out);
}

ndf_status ndf_correlate_bank(ndf_context *ctx, const ndf_array *in, int nf, ndf_array *outs,
                              const double *weights, const int64_t *wshape,
                              const ndf_correlate_opts *opts) {
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_correlate_bank(&p, ctx, in, nf, outs, weights, wshape, opts);
  return ndf__run_once(st, &p, in, nf, outs);
}

ndf_status ndf_convolve_bank(ndf_context *ctx, const ndf_array *in, int nf, ndf_array *outs,
                             const double *weights, const int64_t *wshape,
                             const ndf_correlate_opts *opts) {
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_convolve_bank(&p, ctx, in, nf, outs, weights, wshape, opts);
  return ndf__run_once(st, &p, in, nf, outs);
}
