/* SPDX-License-Identifier: BSD-3-Clause */
/* gaussian.c - the Gaussian filter (ndf.h, "gaussian"): options, scipy's kernels, and its two
 * forms as candidate problems: the FIR filter (a separable filter of gaussian_filter1d's kernels,
 * scipy's result) and the recursive filters (approximations of the untruncated Gaussian); the
 * planner picks among them by cost within the caller's tolerance (ndf__plan_cheapest). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

/* scipy's _gaussian_kernel1d, reversed as gaussian_filter1d reverses it. The
 * derivative of order k is q_k(x) phi(x) with q_0 = 1 and
 * q_{k+1} = q_k' - x q_k / sigma^2, carried as polynomial coefficients. */
ndf_status ndf_gaussian_kernel1d(double sigma, int order, int radius, double *w) {
  if (!(sigma > 0) || !isfinite(sigma) || order < 0 || radius < 0 || !w) return NDF_EINVAL;
  const double s2 = sigma * sigma;
  const int64_t n = 2 * (int64_t)radius + 1;
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = (double)(i - radius);
    w[i] = exp(-0.5 / s2 * x * x);
    sum += w[i];
  }
  for (int64_t i = 0; i < n; i++)
    w[i] /= sum;
  if (order > 0) {
    double *q = calloc((size_t)order + 1, sizeof *q), *t = calloc((size_t)order + 1, sizeof *t);
    if (!q || !t) {
      free(q);
      free(t);
      return NDF_ENOMEM;
    }
    q[0] = 1;
    for (int k = 0; k < order; k++) {
      for (int e = 0; e <= order; e++) /* t = D q + P q */
        t[e] = (e + 1 <= order ? (e + 1) * q[e + 1] : 0) + (e > 0 ? q[e - 1] / -s2 : 0);
      memcpy(q, t, ((size_t)order + 1) * sizeof *q);
    }
    for (int64_t i = 0; i < n; i++) {
      double x = (double)(i - radius), p = 0, xe = 1;
      for (int e = 0; e <= order; e++, xe *= x)
        p += q[e] * xe;
      w[i] *= p;
    }
    free(q);
    free(t);
  }
  for (int64_t i = 0; i < n / 2; i++) { /* reverse */
    double v = w[i];
    w[i] = w[n - 1 - i];
    w[n - 1 - i] = v;
  }
  return NDF_OK;
}

/* The methods ndf_plan_gaussian knows besides the sepfilter solvers, for messages. */
static const char gauss_aliases[] = " fir iir iir_alvarez iir_deriche iir_vyv";

/* The recursive filter's problem: per filtered axis, method m of `order` (0: its default) at
 * that axis's sigma. With `quiet`, a reason not to use it returns NDF_EUNSUPPORTED without a
 * message (auto's trial). */
static ndf_status build_iir(ndf__problem *pb, ndf_context *ctx, const ndf_array *in,
                            const ndf_array *out, const ndf_gaussian_opts *o, ndf__iir_method m,
                            int quiet) {
  const char *name = ndf__iir_method_name(m);
  ndf_status st = ndf__check_desc(ctx, out, "out");
  if (st == NDF_OK) st = ndf__check_same_shape(ctx, in, out);
  if (st != NDF_OK) return st;
  ndf__iirp *q = calloc(1, sizeof *q);
  if (!q) return ndf__fail(ctx, NDF_ENOMEM, "gaussian: out of host memory");
  int any = 0;
  for (int d = 0; d < in->ndim && st == NDF_OK; d++) {
    if (o->sigma[d] <= 1e-15) continue;
    if (o->order[d] != 0)
      st = quiet ? NDF_EUNSUPPORTED
                 : ndf__fail(ctx, NDF_EUNSUPPORTED,
                             "gaussian: %s computes no derivatives (order %d on axis %d); "
                             "method fir does",
                             name, o->order[d], d);
    else if (o->mode[d] != NDF_MODE_NEAREST)
      st = quiet ? NDF_EUNSUPPORTED
                 : ndf__fail(ctx, NDF_EUNSUPPORTED,
                             "gaussian: %s supports mode nearest only (axis %d has mode %s); "
                             "method fir has every mode",
                             name, d, ndf_mode_name(o->mode[d]));
    if (st != NDF_OK) break;
    char why[200];
    st = ndf__iir_design(&q->ax[d], m, o->iir_order, o->sigma[d], why, (int)sizeof why);
    if (st != NDF_OK && !quiet) st = ndf__fail(ctx, st, "gaussian: axis %d: %s", d, why);
    ndf__iir tw; /* the same filter, better conditioned, where the cascade would lose accuracy */
    if (st == NDF_OK && ndf__iir_twin_for_accuracy(&q->ax[d], &tw)) q->ax[d] = tw;
    any = 1;
  }
  if (st == NDF_OK && !any) st = NDF_EUNSUPPORTED; /* the caller checks there is an axis */
  if (st != NDF_OK) {
    free(q);
    return st;
  }
  *pb = ndf__problem_make(NDF__OP_GAUSSIAN, "gaussian", gauss_aliases, in, out, q, sizeof *q);
  return NDF_OK;
}

/* auto's recursive candidate: every filtered axis nearest, order 0, no radius, sigma >= 2, and
 * truncate 4 or more (where iir_deriche is within 6.6e-4 of the true Gaussian and the truncated
 * FIR filter within 1.4e-4, so the two within NDF_GAUSSIAN_IIR_ERROR of each other); no
 * iir_order (a recursive method's parameter). */
static int auto_may_recurse(const ndf_gaussian_opts *o, int ndim) {
  if (o->truncate != 0 && o->truncate < 4) return 0;
  int any = 0;
  for (int d = 0; d < ndim; d++) {
    if (o->sigma[d] <= 1e-15) continue;
    if (o->sigma[d] < 2 || o->order[d] || o->radius[d] || o->mode[d] != NDF_MODE_NEAREST) return 0;
    any = 1;
  }
  return any && !o->iir_order;
}

ndf_status ndf_plan_gaussian(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                             const ndf_array *out, const ndf_gaussian_opts *opts) {
  if (!plan) return NDF_EINVAL;
  *plan = NULL;
  if (!ctx) return NDF_EINVAL;
  ndf_gaussian_opts o;
  ndf_status st =
      ndf__take_opts(ctx, &o, opts, sizeof o, offsetof(ndf_gaussian_opts, iir_order), "gaussian");
  if (st == NDF_OK) st = ndf__check_desc(ctx, in, "in");
  if (st != NDF_OK) return st;
  const char *method = o.method;
  const int is_auto = !method || !*method || !strcmp(method, "auto");
  /* A recursive method, and the IIR solver asked for (NULL: auto's). */
  int iir = -1;
  const char *iir_solver = NULL;
  if (method && !strcmp(method, "iir"))
    iir = NDF__IIR_DERICHE;
  else if (method && (!strcmp(method, "cpu_iir") || !strcmp(method, "cuda_iir")))
    iir = NDF__IIR_DERICHE, iir_solver = method;
  else if (method)
    iir = ndf__iir_method_parse(method);
  if (method && !strcmp(method, "fir")) method = NULL; /* the FIR solvers are sepfilter's */
  double truncate = o.truncate == 0 ? 4.0 : o.truncate;
  if (!(truncate > 0) || !isfinite(truncate))
    return ndf__fail(ctx, NDF_EINVAL, "gaussian: truncate %g must be positive", o.truncate);
  for (int d = 0; d < in->ndim; d++) {
    double sg = o.sigma[d];
    if (!(sg >= 0) || !isfinite(sg))
      return ndf__fail(ctx, NDF_EINVAL, "gaussian: sigma %g on axis %d must be >= 0 and finite", sg,
                       d);
    if (o.order[d] < 0)
      return ndf__fail(ctx, NDF_EINVAL, "gaussian: order %d on axis %d is negative", o.order[d], d);
    if (o.radius[d] < 0)
      return ndf__fail(ctx, NDF_EINVAL, "gaussian: radius %d on axis %d is negative", o.radius[d],
                       d);
    if (sg > 1e-15 && !ndf_mode_name(o.mode[d]))
      return ndf__fail(ctx, NDF_EINVAL, "gaussian: unknown mode %d on axis %d", (int)o.mode[d], d);
  }
  if (o.iir_order && iir < 0 && !is_auto)
    return ndf__fail(ctx, NDF_EINVAL, "gaussian: iir_order %d without a recursive method",
                     o.iir_order);
  if (!(o.tolerance >= 0) || !isfinite(o.tolerance))
    return ndf__fail(ctx, NDF_EINVAL, "gaussian: tolerance %g must be >= 0 and finite",
                     o.tolerance);
  int filtered = 0;
  for (int d = 0; d < in->ndim; d++)
    filtered += o.sigma[d] > 1e-15;
  ndf__problem pr;
  if (iir >= 0 && filtered) {
    st = build_iir(&pr, ctx, in, out, &o, (ndf__iir_method)iir, 0);
    return st == NDF_OK ? ndf__plan_create(plan, ctx, &pr, iir_solver) : st;
  }
  if (iir >= 0) method = NULL; /* no filtered axis: fir's copy */
  /* FIR: gaussian_filter1d's kernel on each filtered axis. */
  ndf__axis_in ax[NDF_MAX_DIMS];
  double *w[NDF_MAX_DIMS] = {NULL};
  memset(ax, 0, sizeof ax);
  for (int d = 0; d < in->ndim && st == NDF_OK; d++) {
    const double sg = o.sigma[d];
    if (sg <= 1e-15) continue; /* scipy skips such axes */
    double r = o.radius[d] > 0 ? o.radius[d] : floor(truncate * sg + 0.5);
    if (r > 1e9) {
      st = ndf__fail(ctx, NDF_EINVAL, "gaussian: kernel radius %.0f on axis %d is too large", r, d);
      continue;
    }
    int64_t n = 2 * (int64_t)r + 1;
    w[d] = malloc((size_t)n * sizeof(double));
    if (!w[d]) {
      st = ndf__fail(ctx, NDF_ENOMEM, "gaussian: out of host memory for a kernel");
      continue;
    }
    st = ndf_gaussian_kernel1d(sg, o.order[d], (int)r, w[d]);
    if (st != NDF_OK) st = ndf__fail(ctx, st, "gaussian: kernel on axis %d", d);
    ax[d] = (ndf__axis_in){w[d], n, o.mode[d], 0};
  }
  ndf__problem pf;
  if (st == NDF_OK)
    st = ndf__build_sep(&pf, ctx, in, out, ax, o.cval, 0, "gaussian", gauss_aliases);
  for (int d = 0; d < NDF_MAX_DIMS; d++)
    free(w[d]);
  if (st != NDF_OK) return st;
  if (!is_auto) return ndf__plan_create(plan, ctx, &pf, method);
  /* auto: scipy's result (the FIR filter), or the recursive filter where the caller's tolerance
   * allows its error and the planner finds it the cheaper; the FIR plan then runs on inputs that
   * hold NaN or Inf (the recursion spreads them along whole lines). */
  ndf__candidate c[2] = {{pf, 0}};
  int n = 1;
  if (auto_may_recurse(&o, in->ndim) &&
      build_iir(&pr, ctx, in, out, &o, NDF__IIR_DERICHE, 1) == NDF_OK)
    c[n++] = (ndf__candidate){pr, NDF_GAUSSIAN_IIR_ERROR};
  return ndf__plan_cheapest(plan, ctx, c, n, o.tolerance);
}

ndf_status ndf_gaussian(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                        const ndf_gaussian_opts *opts) {
  ndf_plan *p = NULL;
  return ndf__run_once(ndf_plan_gaussian(&p, ctx, in, out, opts), &p, in, 1, out);
}
