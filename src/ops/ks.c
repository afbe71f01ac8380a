/* SPDX-License-Identifier: BSD-3-Clause */
/* ks.c - spatially varying Gaussian kernel superposition (ndf.h, "ks"; da Silva, Ansorge and
 * Jena): option and sigma-map validation, the full output's shape, plans. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/elem.h"
#include "../core/internal.h"

/* Radii past this are as good as infinite on any grid, and keep 2 R + n in range. */
#define RMAX ((int64_t)1 << 40)

int64_t ndf__ks_radius(double n_sigma, double s) {
  const double r = ceil(n_sigma * s);
  return r < (double)RMAX ? (int64_t)r : RMAX;
}

double ndf__ks_norm(double n_sigma, double s) {
  return s > 0 ? 1 / erf((ceil(n_sigma * s) + 0.5) / (sqrt(2.0) * s)) : 1;
}

int64_t ndf__ks_bound(const ndf__problem *pb) {
  const ndf__ksp *q = pb->params;
  return !pb->nops ? q->R : q->r_max ? q->r_max : -1;
}

int64_t ndf__ks_radius_estimate(const ndf__problem *pb) {
  const int64_t b = ndf__ks_bound(pb);
  return b < 0 ? 8 : b;
}

ndf_status ndf__ks_bad_map(const ndf_context *ctx, double n_sigma, int64_t r_max, int m, int64_t i,
                           double v) {
  if (!(v >= 0) || !isfinite(v))
    return ndf__fail(
        ctx, NDF_EINVAL,
        "ks: sigma[%d] at element %lld (C order) is %g; sigmas must be finite and >= 0", m,
        (long long)i, v);
  return ndf__fail(ctx, NDF_EINVAL,
                   "ks: sigma[%d] at element %lld (C order) is %g, radius %lld, past r_max %lld", m,
                   (long long)i, v, (long long)ndf__ks_radius(n_sigma, v), (long long)r_max);
}

/* Checks the maps against in: their number, descriptions and shapes; *operands: every map's
 * data is NULL (they come with each execute), else all must be given and on the host, and
 * their values are checked, *R being the largest radius (a pixel past r_max > 0 is an error). */
static ndf_status check_maps(ndf_context *ctx, const ndf_array *in, const ndf_array *sigma,
                             int nsig, double n_sigma, int64_t r_max, int64_t *R, int *operands) {
  if (!sigma) return ndf__fail(ctx, NDF_EINVAL, "ks: no sigma map");
  if (nsig != 1 && nsig != in->ndim)
    return ndf__fail(ctx, NDF_EINVAL,
                     "ks: %d sigma maps; give 1 (every axis) or %d (one per axis of in)", nsig,
                     in->ndim);
  *R = 0;
  *operands = sigma[0].data == NULL;
  for (int m = 0; m < nsig; m++) {
    char what[32];
    snprintf(what, sizeof what, "sigma[%d]", m);
    ndf_status st = ndf__check_desc(ctx, &sigma[m], what);
    if (st != NDF_OK) return st;
    int same = sigma[m].ndim == in->ndim;
    for (int d = 0; same && d < in->ndim; d++)
      same = sigma[m].shape[d] == in->shape[d];
    if (!same) return ndf__fail(ctx, NDF_EINVAL, "ks: %s's shape differs from in's", what);
    if ((sigma[m].data == NULL) != *operands)
      return ndf__fail(ctx, NDF_EINVAL,
                       "ks: sigma[0]'s data is %s but %s's is %s; give every map's data (the plan "
                       "binds them) or none (they come with each execute)",
                       *operands ? "NULL" : "given", what, *operands ? "given" : "NULL");
    if (*operands) {
      if (sigma[m].place.kind == NDF_PLACE_CUDA &&
          (ctx->place.kind != NDF_PLACE_CUDA || sigma[m].place.device != ctx->place.device))
        return ndf__fail(ctx, NDF_EINVAL, "ks: %s is on CUDA device %d but the context is on %s",
                         what, sigma[m].place.device, ctx->device_name);
      continue;
    }
    if (sigma[m].place.kind != NDF_PLACE_HOST)
      return ndf__fail(ctx, NDF_EINVAL,
                       "ks: %s is on a GPU: a plan binds host maps only; give the maps' "
                       "descriptions (data NULL) and the maps to each execute (ndf_execute_n)",
                       what);
    const int64_t n = ndf_array_size(in);
    for (int64_t i = 0; i < n; i++) {
      const double s = ndf__load(sigma[m].dtype, sigma[m].data, ndf__offset(&sigma[m], i));
      const int64_t r = s >= 0 && isfinite(s) ? ndf__ks_radius(n_sigma, s) : -1;
      if (r < 0 || (r_max > 0 && r > r_max)) return ndf__ks_bad_map(ctx, n_sigma, r_max, m, i, s);
      if (r > *R) *R = r;
    }
  }
  return NDF_OK;
}

/* n_sigma as given (0 means 3), or NDF_EINVAL. */
static ndf_status check_n_sigma(ndf_context *ctx, double *n_sigma) {
  if (*n_sigma == 0) *n_sigma = 3;
  if (!(*n_sigma > 0) || !isfinite(*n_sigma))
    return ndf__fail(ctx, NDF_EINVAL, "ks: n_sigma %g; it must be finite and > 0", *n_sigma);
  return NDF_OK;
}

static ndf_status take(ndf_context *ctx, ndf_ks_opts *o, const ndf_ks_opts *opts) {
  ndf_status st = ndf__take_opts(ctx, o, opts, sizeof *o, offsetof(ndf_ks_opts, tile_rows), "ks");
  if (st == NDF_OK) st = check_n_sigma(ctx, &o->n_sigma);
  if (st != NDF_OK) return st;
  if (o->index != NDF_KS_INPUT && o->index != NDF_KS_OUTPUT)
    return ndf__fail(ctx, NDF_EINVAL, "ks: unknown index %d (NDF_KS_INPUT or NDF_KS_OUTPUT)",
                     (int)o->index);
  if (o->output != NDF_KS_SAME && o->output != NDF_KS_FULL)
    return ndf__fail(ctx, NDF_EINVAL, "ks: unknown output %d (NDF_KS_SAME or NDF_KS_FULL)",
                     (int)o->output);
  if (o->r_max < 0)
    return ndf__fail(ctx, NDF_EINVAL, "ks: r_max %lld; it must be >= 0 (0: no bound)",
                     (long long)o->r_max);
  if (o->tile_rows == 0) o->tile_rows = 8;
  if (o->block_rows == 0) o->block_rows = 8;
  const int ty = o->tile_rows, by = o->block_rows;
  if (!((ty == 8 || ty == 16 || ty == 32) && (by == 8 || by == 16) && by <= ty))
    return ndf__fail(ctx, NDF_EINVAL,
                     "ks: tile_rows %d, block_rows %d; the tile is 8, 16 or 32 rows, the block "
                     "8 or 16, at most the tile's",
                     ty, by);
  return NDF_OK;
}

static ndf_status full_shape(ndf_context *ctx, const ndf_array *in, int64_t R, int64_t *shape) {
  int64_t total = 1;
  for (int d = 0; d < in->ndim; d++) {
    shape[d] = in->shape[d] + 2 * R;
    if (total > (INT64_MAX / 16) / shape[d])
      return ndf__fail(ctx, NDF_EINVAL,
                       "ks: the full output (radius %lld on every side) has too many elements",
                       (long long)R);
    total *= shape[d];
  }
  return NDF_OK;
}

ndf_status ndf_ks_full_shape(ndf_context *ctx, const ndf_array *in, const ndf_array *sigma,
                             int nsig, double n_sigma, int64_t *shape, int64_t *R) {
  if (!ctx || !shape) return NDF_EINVAL;
  ndf_status st = ndf__check_desc(ctx, in, "in");
  if (st == NDF_OK) st = check_n_sigma(ctx, &n_sigma);
  if (st != NDF_OK) return st;
  int64_t r = 0;
  int operands = 0;
  st = check_maps(ctx, in, sigma, nsig, n_sigma, 0, &r, &operands);
  if (st == NDF_OK && operands)
    st = ndf__fail(ctx, NDF_EINVAL,
                   "ks_full_shape: the maps' data is NULL; with maps given at "
                   "execute, the full output's margin is r_max");
  if (st == NDF_OK) st = full_shape(ctx, in, r, shape);
  if (st == NDF_OK && R) *R = r;
  return st;
}

ndf_status ndf_plan_ks(ndf_plan **plan, ndf_context *ctx, const ndf_array *in, const ndf_array *out,
                       const ndf_array *sigma, int nsig, const ndf_ks_opts *opts) {
  if (!plan) return NDF_EINVAL;
  *plan = NULL;
  if (!ctx) return NDF_EINVAL;
  ndf_ks_opts o;
  ndf_status st = take(ctx, &o, opts);
  if (st == NDF_OK) st = ndf__check_desc(ctx, in, "in");
  if (st == NDF_OK) st = ndf__check_desc(ctx, out, "out");
  int64_t R = 0;
  int operands = 0;
  if (st == NDF_OK) st = check_maps(ctx, in, sigma, nsig, o.n_sigma, o.r_max, &R, &operands);
  if (st != NDF_OK) return st;
  if (operands && o.output == NDF_KS_FULL && o.r_max == 0)
    return ndf__fail(ctx, NDF_EINVAL,
                     "ks: output 'full' with the maps given at execute needs r_max (the margin)");
  if (operands) R = o.r_max;
  int64_t want[NDF_MAX_DIMS];
  if (o.output == NDF_KS_FULL) {
    st = full_shape(ctx, in, R, want);
    if (st != NDF_OK) return st;
  } else {
    memcpy(want, in->shape, sizeof want);
  }
  int same = out->ndim == in->ndim;
  for (int d = 0; same && d < in->ndim; d++)
    same = out->shape[d] == want[d];
  if (!same) {
    char buf[96] = "";
    for (int d = 0; d < in->ndim; d++)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%lld", d ? ", " : "",
               (long long)want[d]);
    return ndf__fail(ctx, NDF_EINVAL, "ks: out must have shape (%s) for output '%s'", buf,
                     o.output == NDF_KS_FULL ? "full" : "same");
  }
  const int64_t n = ndf_array_size(in);
  const size_t sz = sizeof(ndf__ksp) + (operands ? 0 : (size_t)(n * nsig) * sizeof(double));
  ndf__ksp *k = malloc(sz);
  if (!k) return ndf__fail(ctx, NDF_ENOMEM, "ks: out of host memory for the sigma maps");
  k->index = o.index;
  k->extent = o.output;
  k->normalize = o.normalize != 0;
  k->deterministic = o.deterministic != 0;
  k->tile_rows = o.tile_rows;
  k->block_rows = o.block_rows;
  k->nsig = nsig;
  k->n_sigma = o.n_sigma;
  k->R = R;
  k->r_max = o.r_max;
  k->n = n;
  for (int m = 0; m < nsig && !operands; m++)
    for (int64_t i = 0; i < n; i++)
      k->sigma[m * n + i] = ndf__load(sigma[m].dtype, sigma[m].data, ndf__offset(&sigma[m], i));
  ndf__problem pb = ndf__problem_make(NDF__OP_KS, "ks", NULL, in, out, k, sz);
  if (operands) {
    pb.nops = nsig;
    for (int m = 0; m < nsig; m++) {
      pb.ops[m] = sigma[m];
      pb.ops[m].data = NULL;
    }
  }
  return ndf__plan_create(plan, ctx, &pb, o.method);
}

/* The one-shot form binds host maps; maps on a GPU go to the plan as operands. */
ndf_status ndf_ks(ndf_context *ctx, const ndf_array *in, ndf_array *out, const ndf_array *sigma,
                  int nsig, const ndf_ks_opts *opts) {
  int gpu = 0;
  for (int m = 0; sigma && m < nsig && m < NDF_MAX_DIMS; m++)
    gpu |= sigma[m].place.kind == NDF_PLACE_CUDA;
  if (!gpu) {
    ndf_plan *p = NULL;
    ndf_status st = ndf_plan_ks(&p, ctx, in, out, sigma, nsig, opts);
    return ndf__run_once(st, &p, in, 1, out);
  }
  if (!in || !out || nsig < 1 || nsig > NDF_MAX_DIMS)
    return ndf__fail(ctx, NDF_EINVAL, "ks: %d sigma maps", nsig);
  ndf_array ins[1 + NDF_MAX_DIMS], desc[NDF_MAX_DIMS];
  ins[0] = *in;
  for (int m = 0; m < nsig; m++) {
    ins[1 + m] = sigma[m];
    desc[m] = sigma[m];
    desc[m].data = NULL;
  }
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_ks(&p, ctx, in, out, desc, nsig, opts);
  if (st == NDF_OK) st = ndf_execute_n(p, 1 + nsig, ins, 1, out);
  ndf_plan_destroy(p);
  return st;
}
