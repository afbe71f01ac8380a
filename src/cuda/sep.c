/* SPDX-License-Identifier: BSD-3-Clause */
/* sep.c - host side of cuda_sep: one kernel pass per filtered axis (sep_kernel.cu).
 *
 * The passes run between contiguous float32 device arrays. The last pass writes
 * the output, the one before it a temporary, the one before that the output
 * again, and so on, so one temporary serves any number of axes. Strided views
 * are gathered into, or scattered from, contiguous buffers taken from the
 * stream-ordered allocator for that call.
 *
 * cuda_sep_fused does the last two axes in one pass (sep_yx) when both are
 * filtered with the same odd tap count up to 17: the input tile and its aprons
 * are read once and the intermediate stays in shared memory. It is slower
 * than the two passes: it stalls on its staging and barriers, and the passes
 * are not bound by DRAM, so reading the image once saves little (figures:
 * docs/design/separable.md). So it runs only when asked for by name: the
 * planner never prefers it.
 *
 * cuda_box takes the same passes for a box (one weight along each axis: scipy's uniform filter)
 * by running sums (box_kernel.cu), at a cost that does not grow with the box, where cuda_sep's
 * grows with its taps. A running sum carries a NaN or Inf to the end of its segment, where the
 * direct sum reaches only the window: it is finite-only, and auto runs cuda_sep on inputs that
 * hold them. The development switch NDF_CUDA_BOX=0 turns it off, for a benchmark's
 * comparison. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../core/dev_switch.h"
#include "../core/elem.h"
#include "host.h"

typedef struct {
  float *hw;  /* weights in float32 on the host (kernel parameters) */
  float *dw;  /* the same on the device (taps past the largest bucket) */
  float *tmp; /* full-size temporary, when there are two or more passes */
  int fused;  /* the last two axes go in one sep_yx pass */
  int box;    /* cuda_box: running sums of the values v */
  int rows;   /* cuda_box: the rows kernel along the last axis (else the lines kernel) */
  double v[NDF_MAX_DIMS];
} state;

/* Whether the last two filtered axes are the array's last two, with the same
 * odd tap count from 3 to 17 (the instantiations of sep_yx). */
static int fusable(const ndf__sep *c, int ndim) {
  if (c->naxes < 2) return 0;
  const ndf__sepaxis *y = &c->ax[c->naxes - 2], *x = &c->ax[c->naxes - 1];
  return y->axis == ndim - 2 && x->axis == ndim - 1 && y->n == x->n && x->n % 2 == 1 && x->n >= 3 &&
         x->n <= 17;
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)pb;
  return ctx->place.kind == NDF_PLACE_CUDA;
}

/* A read and a write per pass at ~3 TB/s, FMAs at ~40 TFLOP/s (an H200's rates, scaled to the
 * device). */
static double cost_passes(const ndf__problem *pb, const ndf_context *ctx) {
  const ndf__sep *c = pb->params;
  const double bw = 3e12 * ndf__bw_scale(ctx), flops = 40e12 * ndf__rate_scale(ctx);
  double n = (double)ndf_array_size(&pb->in), t = 5e-6;
  for (int k = 0; k < c->naxes; k++)
    t += n * (8.0 / bw + 2.0 * (double)c->ax[k].n / flops);
  return t;
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  return cost_passes(pb, ctx);
}

/* Boxes along every filtered axis. */
static int applicable_box(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const char *on = ndf__dev_switch("NDF_CUDA_BOX");
  const ndf__sep *c = pb->params;
  double v[NDF_MAX_DIMS];
  int short_box = 1;
  for (int k = 0; k < c->naxes; k++)
    short_box &= c->ax[k].n <= INT32_MAX - 1024; /* the kernels' int sums of n and a segment */
  return !(on && on[0] == '0') && ctx->place.kind == NDF_PLACE_CUDA && short_box &&
         ndf__sep_box(c, v);
}

/* cuda_box, as measured on an H200 (256^3 float32): ~5.5 ns per thousand elements a pass along
 * a slower axis (box_lines, whatever the box) and ~15 along the last (box_rows), where a
 * cuda_sep pass is ~2.8 plus ~0.09 a tap: cuda_sep is the cheaper up to about a hundred taps,
 * this past them. Both are latency-bound, not at the memory's rate (docs/design/
 * scipy-dropin.md). */
static double cost_box(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  double t = 0;
  for (int k = 0; k < c->naxes; k++)
    t += c->ax[k].axis == pb->in.ndim - 1 ? 15e-12 : 5.5e-12;
  return 5e-6 + t * (double)ndf_array_size(&pb->in) / ndf__bw_scale(ctx);
}

static double cost_fused(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  return cost_passes(pb, ctx) + 1e-6; /* measured no faster than cuda_sep */
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  free(s->hw);
  cudaFree(s->dw);
  cudaFree(s->tmp);
  free(s);
}

static int pass(const ndf__sep *c, const state *s, const ndf_array *g, int k, const float *src,
                float *dst, void *stream) {
  const ndf__sepaxis *ax = &c->ax[k];
  const int a = ax->axis, nd = g->ndim;
  int64_t P, Q;
  ndf__split_axis(g->shape, nd, a, &P, &Q);
  if (s->box && a == nd - 1 && s->rows && ndf__box_takes((int)ax->n, g->shape[a]))
    return ndf__launch_box_rows(src, dst, P, g->shape[a], (int)ax->n, ax->left, ax->mode,
                                (float)c->cval, s->v[k], stream);
  if (s->box)
    return ndf__launch_box_lines(src, dst, P, g->shape[a], Q, (int)ax->n, ax->left, ax->mode,
                                 (float)c->cval, s->v[k], stream);
  if (a == nd - 1)
    return ndf__launch_sep_rows(src, dst, P, g->shape[a], s->hw + ax->off, s->dw + ax->off, ax->n,
                                ax->left, ax->mode, (float)c->cval, stream);
  return ndf__launch_sep_cols(src, dst, P, g->shape[a], Q, s->hw + ax->off, s->dw + ax->off, ax->n,
                              ax->left, ax->mode, (float)c->cval, stream);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sep *c = p->pb.params;
  const state *s = p->state;
  ndf_context *ctx = p->ctx;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const size_t bytes = (size_t)ndf_array_size(in) * sizeof(float);
  const int cin = ndf__is_contiguous(in), cout = ndf__is_contiguous(out);
  float *gin = NULL; /* a copy between two strided views goes through it */
  cudaError_t e = cudaSuccess;
  ndf_status r = NDF_OK;
  if (c->naxes == 0) { /* a copy */
    if (in->data == out->data) return NDF_OK;
    if (cout)
      e = (cudaError_t)ndf__launch_to_f32(in->data, NDF_F32, ndf__cuda_view4(in), out->data, st);
    else if (cin)
      e = (cudaError_t)ndf__launch_from_f32(in->data, out->data, NDF_F32, ndf__cuda_view4(out), st);
    else {
      e = cudaMallocAsync((void **)&gin, bytes, st);
      if (e == cudaSuccess)
        e = (cudaError_t)ndf__launch_to_f32(in->data, NDF_F32, ndf__cuda_view4(in), gin, st);
      if (e == cudaSuccess)
        e = (cudaError_t)ndf__launch_from_f32(gin, out->data, NDF_F32, ndf__cuda_view4(out), st);
    }
    goto done;
  }
  ndf__contig cg;
  e = (cudaError_t)ndf__cuda_contig_begin(&cg, in, 1, out, st);
  const float *src = cg.src;
  float *dst = cg.dst[0];
  ndf_array g = *in;
  ndf__contiguous_strides(&g);
  const int np = c->naxes - s->fused; /* passes */
  for (int k = 0; k < np && e == cudaSuccess; k++) {
    float *to = (np - 1 - k) % 2 == 0 ? dst : s->tmp;
    if (s->fused && k == np - 1) {
      const ndf__sepaxis *y = &c->ax[k], *x = &c->ax[k + 1];
      const int nd = g.ndim;
      e = (cudaError_t)ndf__launch_sep_yx(
          src, to, ndf_array_size(&g) / (g.shape[nd - 2] * g.shape[nd - 1]), g.shape[nd - 2],
          g.shape[nd - 1], s->hw + y->off, s->hw + x->off, x->n, y->left, x->left, y->mode, x->mode,
          (float)c->cval, st);
    } else {
      e = (cudaError_t)pass(c, s, &g, k, src, to, st);
    }
    src = to;
  }
  e = (cudaError_t)ndf__cuda_contig_end(&cg, e, out, st);
done:
  if (e != cudaSuccess) r = ndf__cuda_check(ctx, e, "cuda_sep");
  if (gin) cudaFreeAsync(gin, st);
  return r;
}

/* fuse: the last two axes in one pass where they can (cuda_sep_fused); box: running sums
 * (cuda_box). */
static ndf_status make_state(ndf_plan *p, int fuse, int box) {
  const ndf__sep *c = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_sep: out of host memory");
  s->fused = fuse && fusable(c, p->pb.in.ndim) && ndf_array_size(&p->pb.in) > 0;
  s->box = box && ndf__sep_box(c, s->v);
  const char *sw = ndf__dev_switch("NDF_CUDA_BOX");
  s->rows = !(sw && sw[0] == '2');
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  int64_t nw = 0;
  for (int k = 0; k < c->naxes; k++)
    nw += c->ax[k].n;
  s->hw = malloc((size_t)(nw ? nw : 1) * sizeof(float));
  if (!s->hw) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_sep: out of host memory");
  for (int64_t j = 0; j < nw; j++)
    s->hw[j] = (float)c->w[j];
  size_t bytes = (size_t)ndf_array_size(&p->pb.in) * sizeof(float);
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  if (e == cudaSuccess && nw) e = cudaMalloc((void **)&s->dw, (size_t)nw * sizeof(float));
  if (e == cudaSuccess && nw)
    e = cudaMemcpy(s->dw, s->hw, (size_t)nw * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess && c->naxes - s->fused >= 2) e = cudaMalloc((void **)&s->tmp, bytes);
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_sep: out of device memory for a %zu-byte temporary",
                     bytes);
  return ndf__cuda_check(p->ctx, e, "cuda_sep plan");
}

static ndf_status make(ndf_plan *p) { return make_state(p, 0, 0); }
static ndf_status make_fused(ndf_plan *p) { return make_state(p, 1, 0); }
static ndf_status make_box(ndf_plan *p) { return make_state(p, 0, 1); }

const ndf__solver ndf__cuda_sep = {.name = "cuda_sep",
                                   .op = NDF__OP_SEPFILTER,
                                   .place = NDF_PLACE_CUDA,
                                   .applicable = applicable,
                                   .cost = cost,
                                   .make = make};
const ndf__solver ndf__cuda_sep_fused = {.name = "cuda_sep_fused",
                                         .op = NDF__OP_SEPFILTER,
                                         .place = NDF_PLACE_CUDA,
                                         .applicable = applicable,
                                         .cost = cost_fused,
                                         .make = make_fused};
const ndf__solver ndf__cuda_box = {.name = "cuda_box",
                                   .op = NDF__OP_SEPFILTER,
                                   .place = NDF_PLACE_CUDA,
                                   .applicable = applicable_box,
                                   .cost = cost_box,
                                   .make = make_box,
                                   .finite_only = ndf__always_finite_only};
