/* SPDX-License-Identifier: BSD-3-Clause */
/* rank.c - rank filters (scipy.ndimage.rank_filter, and through it minimum_filter,
 * maximum_filter, median_filter, percentile_filter): validation, the footprint, plans. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

static int integer_dtype(ndf_dtype t) { return t == NDF_U8 || t == NDF_U16 || t == NDF_I16; }

/* cval as a sample of the input's dtype, as scipy casts it: truncated toward zero and wrapped
 * for an integer dtype (the result of a rank filter is one of its samples); a cval no integer
 * holds is refused before (ndf_plan_rank). */
static double sample_of(ndf_dtype t, double v) {
  if (!integer_dtype(t)) return v;
  const int64_t i = (int64_t)v;
  switch (t) {
  case NDF_U8: return (double)(uint8_t)i;
  case NDF_U16: return (double)(uint16_t)i;
  case NDF_I16: return (double)(int16_t)i;
  default: return v;
  }
}

ndf_status ndf_plan_rank(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                         const ndf_array *out, int64_t rank, const unsigned char *footprint,
                         const int64_t *fshape, const ndf_rank_opts *opts) {
  if (!plan) return NDF_EINVAL;
  *plan = NULL;
  if (!ctx) return NDF_EINVAL;
  ndf_rank_opts o;
  ndf_status st = ndf__take_opts(ctx, &o, opts, sizeof o, sizeof o, "rank");
  if (st == NDF_OK) st = ndf__check_desc(ctx, in, "in");
  if (st == NDF_OK) st = ndf__check_desc(ctx, out, "out");
  if (st == NDF_OK) st = ndf__check_same_shape(ctx, in, out);
  if (st != NDF_OK) return st;
  if (!fshape) return ndf__fail(ctx, NDF_EINVAL, "rank: no footprint shape");
  int64_t size = 1;
  for (int d = 0; d < in->ndim; d++) {
    if (fshape[d] < 1 || fshape[d] > (int64_t)1 << 30)
      return ndf__fail(ctx, NDF_EINVAL, "rank: footprint length %lld on axis %d",
                       (long long)fshape[d], d);
    if (size > ((int64_t)1 << 40) / fshape[d])
      return ndf__fail(ctx, NDF_EINVAL, "rank: the footprint's size overflows");
    size *= fshape[d];
    if (!ndf_mode_name(o.mode[d]))
      return ndf__fail(ctx, NDF_EINVAL, "rank: unknown mode %d on axis %d", (int)o.mode[d], d);
    if (o.origin[d] < -(fshape[d] / 2) || o.origin[d] > (fshape[d] - 1) / 2)
      return ndf__fail(ctx, NDF_EINVAL,
                       "rank: origin %d on axis %d outside [%lld, %lld] for a footprint of "
                       "length %lld",
                       o.origin[d], d, -(long long)(fshape[d] / 2),
                       (long long)((fshape[d] - 1) / 2), (long long)fshape[d]);
  }
  if (integer_dtype(in->dtype) && !(fabs(o.cval) < 9.2e18)) /* scipy raises on these too */
    return ndf__fail(ctx, NDF_EINVAL, "rank: cval %g is no sample of an integer input", o.cval);
  int64_t n = size;
  if (footprint) {
    n = 0;
    for (int64_t j = 0; j < size; j++)
      n += footprint[j] != 0;
  }
  if (n == 0) return ndf__fail(ctx, NDF_EINVAL, "rank: the footprint is all zero");
  if (rank < 0) rank += n;
  if (rank < 0 || rank >= n)
    return ndf__fail(ctx, NDF_EINVAL, "rank: rank %lld outside the footprint's %lld values",
                     (long long)(rank < 0 ? rank - n : rank), (long long)n);
  const size_t sz = sizeof(ndf__rank) + (size_t)size;
  ndf__rank *r = calloc(1, sz);
  if (!r) return ndf__fail(ctx, NDF_ENOMEM, "rank: out of host memory for the footprint");
  r->rank = rank;
  r->n = n;
  r->cval = sample_of(in->dtype, o.cval);
  const int pad = NDF_MAX_DIMS - in->ndim; /* four axes, in's last */
  for (int d = 0; d < NDF_MAX_DIMS; d++) {
    const int a = d - pad;
    r->k[d] = a >= 0 ? fshape[a] : 1;
    r->left[d] = a >= 0 ? fshape[a] / 2 + o.origin[a] : 0;
    r->mode[d] = a >= 0 ? o.mode[a] : NDF_MODE_REFLECT;
  }
  for (int64_t j = 0; j < size; j++)
    r->fp[j] = !footprint || footprint[j] != 0;
  ndf__problem pb = ndf__problem_make(NDF__OP_RANK, "rank", NULL, in, out, r, sz);
  return ndf__plan_create(plan, ctx, &pb, o.method);
}

ndf_status ndf_rank(ndf_context *ctx, const ndf_array *in, ndf_array *out, int64_t rank,
                    const unsigned char *footprint, const int64_t *fshape,
                    const ndf_rank_opts *opts) {
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_rank(&p, ctx, in, out, rank, footprint, fshape, opts);
  return ndf__run_once(st, &p, in, 1, out);
}
