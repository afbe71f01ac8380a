/* correlate1d.c - correlate1d/convolve1d: validation, scipy's convolve-to-correlate, plans. */
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

static ndf_status plan1d(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                         const ndf_array *out, const double *w, int64_t n, int axis,
                         const ndf_correlate1d_opts *opts, int convolve) {
  if (!plan) return NDF_EINVAL;
  *plan = NULL;
  if (!ctx) return NDF_EINVAL;
  ndf_correlate1d_opts o;
  memset(&o, 0, sizeof o);
  if (opts) {
    if (opts->struct_size < sizeof o)
      return ndf__fail(ctx, NDF_EINVAL, "correlate1d: opts.struct_size is %zu, expected %zu",
                       opts->struct_size, sizeof o);
    memcpy(&o, opts, sizeof o);
  }
  ndf_status st = ndf__check_desc(ctx, in, "in");
  if (st == NDF_OK) st = ndf__check_desc(ctx, out, "out");
  if (st == NDF_OK) st = ndf__check_same_shape(ctx, in, out);
  if (st != NDF_OK) return st;
  if (!w || n < 1) return ndf__fail(ctx, NDF_EINVAL, "correlate1d: no weights");
  if (axis < -in->ndim || axis >= in->ndim)
    return ndf__fail(ctx, NDF_EINVAL, "correlate1d: axis %d out of range for ndim %d", axis,
                     in->ndim);
  if (!ndf_mode_name(o.mode))
    return ndf__fail(ctx, NDF_EINVAL, "correlate1d: unknown mode %d", (int)o.mode);
  if (o.origin < -(n / 2) || o.origin > (n - 1) / 2)
    return ndf__fail(ctx, NDF_EINVAL,
                     "correlate1d: origin %d outside [%lld, %lld] for %lld weights", o.origin,
                     -(long long)(n / 2), (long long)((n - 1) / 2), (long long)n);

  size_t sz = sizeof(ndf__corr1d) + (size_t)n * sizeof(double);
  ndf__corr1d *c = malloc(sz);
  if (!c) return ndf__fail(ctx, NDF_ENOMEM, "correlate1d: out of host memory");
  c->axis = axis < 0 ? axis + in->ndim : axis;
  c->mode = o.mode;
  c->cval = o.cval;
  c->n = n;
  int64_t origin = o.origin;
  if (convolve) { /* scipy: reverse, negate origin, one more for even n */
    for (int64_t j = 0; j < n; j++)
      c->w[j] = w[n - 1 - j];
    origin = -origin - (n % 2 == 0);
  } else {
    memcpy(c->w, w, (size_t)n * sizeof(double));
  }
  c->left = n / 2 + origin;

  ndf__problem pb;
  memset(&pb, 0, sizeof pb);
  pb.op = NDF__OP_CORRELATE1D;
  pb.in = *in;
  pb.out = *out;
  pb.in.data = pb.out.data = NULL;
  pb.params = c;
  pb.params_size = sz;
  return ndf__plan_create(plan, ctx, &pb, o.method);
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

static ndf_status oneshot(ndf_context *ctx, const ndf_array *in, ndf_array *out, const double *w,
                          int64_t n, int axis, const ndf_correlate1d_opts *opts, int convolve) {
  ndf_plan *p;
  ndf_status st = plan1d(&p, ctx, in, out, w, n, axis, opts, convolve);
  if (st != NDF_OK) return st;
  st = ndf_execute(p, in, out);
  ndf_plan_destroy(p);
  return st;
}

ndf_status ndf_correlate1d(ndf_context *ctx, const ndf_array *in, ndf_array *out, const double *w,
                           int64_t n, int axis, const ndf_correlate1d_opts *opts) {
  return oneshot(ctx, in, out, w, n, axis, opts, 0);
}

ndf_status ndf_convolve1d(ndf_context *ctx, const ndf_array *in, ndf_array *out, const double *w,
                          int64_t n, int axis, const ndf_correlate1d_opts *opts) {
  return oneshot(ctx, in, out, w, n, axis, opts, 1);
}
