/* SPDX-License-Identifier: BSD-3-Clause */
/* box.c - host side of cuda_box: a separable filter whose weights along each filtered axis are
 * one value (scipy's uniform_filter) by running sums, one pass per axis (box_kernel.cu), at a
 * cost that does not grow with the box, where cuda_sep's grows with its taps. The passes run
 * between contiguous float32 device arrays as cuda_sep's do (the last pass writes the output,
 * one temporary serves any number of axes). A running sum carries a NaN or Inf to the end of its
 * segment, where the direct sum reaches only the window: the solver is finite-only, and auto
 * runs cuda_sep on inputs that hold them.
 *
 * Off unless the development switch NDF_CUDA_BOX is 1 (gpu-check's build) until the kernels
 * have been checked and timed on a GPU. */
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "../core/dev_switch.h"
#include "../core/elem.h"
#include "host.h"

typedef struct {
  double v[NDF_MAX_DIMS]; /* the box's value along each filtered axis */
  float *tmp;             /* full-size temporary, when there are two or more passes */
} state;

/* Each filtered axis a box the kernels take (the rows pass's apron in shared memory), and the
 * grids within their limits. */
static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const char *on = ndf__dev_switch("NDF_CUDA_BOX");
  const ndf__sep *c = pb->params;
  double v[NDF_MAX_DIMS];
  if (!on || on[0] != '1' || ctx->place.kind != NDF_PLACE_CUDA || c->naxes == 0 ||
      !ndf__sep_box(c, v))
    return 0;
  for (int k = 0; k < c->naxes; k++) {
    const int64_t L = pb->in.shape[c->ax[k].axis];
    if (c->ax[k].n > INT32_MAX || !ndf__box_takes((int)c->ax[k].n) || L / 64 >= 65535) return 0;
  }
  return 1;
}

/* A read and a write per pass at ~3 TB/s, the segments' starts (up to half as many reads again)
 * and two compensated float64 additions (~16 operations) at ~30 TFLOP/s: the box's length does
 * not count. cuda_sep's model is the same bytes and two FMAs a tap, so it is the cheaper up to
 * about 24 taps and this past them. */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  const double bw = 3e12 * ndf__bw_scale(ctx), flops = 30e12 * ndf__rate_scale(ctx);
  const double n = (double)ndf_array_size(&pb->in);
  return 5e-6 + c->naxes * n * (10.0 / bw + 16.0 / flops);
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaFree(s->tmp);
  free(s);
}

static int pass(const ndf__sep *c, const state *s, const ndf_array *g, int k, const float *src,
                float *dst, void *stream) {
  const ndf__sepaxis *ax = &c->ax[k];
  const int a = ax->axis, nd = g->ndim;
  int64_t P, Q;
  ndf__split_axis(g->shape, nd, a, &P, &Q);
  if (a == nd - 1)
    return ndf__launch_box_rows(src, dst, P, g->shape[a], (int)ax->n, ax->left, ax->mode,
                                (float)c->cval, s->v[k], stream);
  return ndf__launch_box_cols(src, dst, P, g->shape[a], Q, (int)ax->n, ax->left, ax->mode,
                              (float)c->cval, s->v[k], stream);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sep *c = p->pb.params;
  const state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  ndf__contig cg;
  int e = ndf__cuda_contig_begin(&cg, in, 1, out, st);
  const float *src = cg.src;
  float *dst = cg.dst[0];
  ndf_array g = *in;
  ndf__contiguous_strides(&g);
  for (int k = 0; k < c->naxes && e == 0; k++) {
    float *to = (c->naxes - 1 - k) % 2 == 0 ? dst : s->tmp;
    e = pass(c, s, &g, k, src, to, st);
    src = to;
  }
  e = ndf__cuda_contig_end(&cg, e, out, st);
  return e == 0 ? NDF_OK : ndf__cuda_check(p->ctx, e, "cuda_box");
}

static ndf_status make(ndf_plan *p) {
  const ndf__sep *c = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_box: out of host memory");
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  ndf__sep_box(c, s->v);
  const size_t bytes = (size_t)ndf_array_size(&p->pb.in) * sizeof(float);
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  if (e == cudaSuccess && c->naxes >= 2 && bytes) e = cudaMalloc((void **)&s->tmp, bytes);
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_box: out of device memory for a %zu-byte temporary",
                     bytes);
  return ndf__cuda_check(p->ctx, e, "cuda_box plan");
}

const ndf__solver ndf__cuda_box = {.name = "cuda_box",
                                   .op = NDF__OP_SEPFILTER,
                                   .place = NDF_PLACE_CUDA,
                                   .applicable = applicable,
                                   .cost = cost,
                                   .make = make,
                                   .finite_only = ndf__always_finite_only};
