/* SPDX-License-Identifier: BSD-3-Clause */
/* direct.c - cpu_direct for N-dimensional correlation: the input is copied once into a
 * float32 array (float64 for a float64 input: direct_exec.h, written once over its precision)
 * extended by the kernel on every axis (the modes applied there, so the loops
 * below have no boundary tests), then each output row accumulates, for every kernel row, a
 * 1-D correlation of the matching extended row: a loop over x the compiler vectorises, on a
 * row accumulator that stays in L1. OpenMP over output rows. Arrays are seen as 4-D, with
 * leading axes of length 1 (and kernel length 1) added. */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"

#define D NDF_MAX_DIMS

typedef struct {
  int64_t n[D], k[D], left[D], e[D]; /* shape, kernel, taps left, extended shape */
  ndf_mode mode[D];
  float *w_f32;  /* the kernel, [k0][k1][k2][k3]: in float32 */
  double *w_f64; /* and float64 */
  int f64;       /* the plan computes in float64 (a float64 input's) */
  int threads;
} state;

/* a's shape and strides as 4-D (leading axes of length 1). */
static void as4(const ndf_array *a, int64_t n[D], int64_t s[D]) {
  const int pad = D - a->ndim;
  for (int d = 0; d < D; d++) {
    n[d] = d < pad ? 1 : a->shape[d - pad];
    s[d] = d < pad ? 0 : a->strides[d - pad];
  }
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__corr *c = pb->params;
  /* ~4 GFMA/s per thread on the inner loop (half in float64), plus a copy of the input */
  const double f64 = pb->in.dtype == NDF_F64 ? 2.0 : 1.0;
  return (double)ndf_array_size(&pb->in) * f64 * ((double)(c->nw * c->nf) / 4e9 + 2e-9) /
         ctx->threads;
}

static void free_state(void *p) {
  state *s = p;
  if (!s) return;
  free(s->w_f32);
  free(s->w_f64);
  free(s);
}

#define NDF__PRECISION_BODY "direct_exec.h"
#include "precisions.h"

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const state *s = p->state;
  return s->f64 ? exec_f64(p, in, out) : exec_f32(p, in, out);
}

static ndf_status make(ndf_plan *p) {
  const ndf__corr *c = p->pb.params;
  const ndf_array *a = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory");
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->threads = p->ctx->threads;
  const int pad = D - a->ndim;
  for (int d = 0; d < D; d++) {
    const int q = d - pad;
    s->n[d] = q < 0 ? 1 : a->shape[q];
    s->k[d] = q < 0 ? 1 : c->k[q];
    s->left[d] = q < 0 ? 0 : c->left[q];
    s->mode[d] = q < 0 ? NDF_MODE_REFLECT : c->mode[q];
    s->e[d] = s->n[d] + s->k[d] - 1;
  }
  double ext = 1; /* the extended copy, counted where it cannot wrap */
  for (int d = 0; d < D; d++)
    ext *= (double)s->e[d];
  s->f64 = a->dtype == NDF_F64;
  const double es = s->f64 ? sizeof(double) : sizeof(float);
  if (ext * es > 0x1p62 || (double)s->threads * s->n[3] * es > 0x1p62)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: the extended copy needs %.3g bytes",
                     ext * es);
  s->w_f32 = malloc((size_t)(c->nw * c->nf) * sizeof(float));
  s->w_f64 = malloc((size_t)(c->nw * c->nf) * sizeof(double));
  if (!s->w_f32 || !s->w_f64)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory");
  for (int64_t j = 0; j < c->nw * c->nf; j++) {
    s->w_f32[j] = (float)c->w[j];
    s->w_f64[j] = c->w[j];
  }
  return NDF_OK;
}

const ndf__solver ndf__cpu_direct = {.name = "cpu_direct",
                                     .op = NDF__OP_CORRELATE,
                                     .place = NDF_PLACE_HOST,
                                     .applicable = applicable,
                                     .cost = cost,
                                     .make = make,
                                     .f64 = 1};
