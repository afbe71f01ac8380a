/* SPDX-License-Identifier: BSD-3-Clause */
/* sep64.c - host side of cuda_sep64: separable filters (correlate1d, sepfilter, the FIR Gaussian
 * and its derivatives, uniform) of float64 device arrays computed in float64, as scipy computes
 * them, where cuda_sep stages them to float32. A native plan: float64 device arrays in and out,
 * taken as they are (strided ones through contiguous float64 buffers; in place, the staging
 * layer hands it a copy of the input); one pass per filtered axis (sep64_kernel.cu), the last
 * writing the output, one float64 temporary between the others.
 *
 * The development switch NDF_CUDA_F64=0 turns it off (cuda_sep's float32 arithmetic then takes
 * float64 arrays), for a benchmark's comparison. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../core/elem.h"
#include "host.h"

typedef struct {
  double *dw;  /* every axis's weights, at its off, on the device */
  double *tmp; /* full-size temporary, when there are two or more passes */
} state;

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  int short_taps = 1;
  for (int k = 0; k < c->naxes; k++)
    short_taps &= c->ax[k].n <= INT32_MAX;
  return short_taps && ndf__cuda_f64_native(pb, ctx);
}

/* A read and a write of 8 bytes per pass at ~3 TB/s and a float64 FMA a tap at ~30 TFLOP/s (an
 * H200's rates, scaled to the device). */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  const double bw = 3e12 * ndf__bw_scale(ctx), flops = 30e12 * ndf__rate_scale(ctx);
  const double n = (double)ndf_array_size(&pb->in);
  double t = 5e-6;
  for (int k = 0; k < c->naxes; k++)
    t += n * (16.0 / bw + 2.0 * (double)c->ax[k].n / flops);
  return t;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaFree(s->dw);
  cudaFree(s->tmp);
  free(s);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sep *c = p->pb.params;
  const state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  if (ndf_array_size(in) == 0) return NDF_OK;
  ndf__contig g; /* the arrays' strides may differ from the plan's */
  int e = ndf__cuda_contig_begin(&g, in, 1, out, st);
  if (e == 0 && c->naxes == 0 && g.dst[0] != g.src) /* a copy */
    e = (int)cudaMemcpyAsync(g.dst[0], g.src, (size_t)ndf_array_size(in) * sizeof(double),
                             cudaMemcpyDeviceToDevice, st);
  const double *src = g.src;
  for (int k = 0; k < c->naxes && e == 0; k++) {
    const ndf__sepaxis *ax = &c->ax[k];
    double *to = (c->naxes - 1 - k) % 2 == 0 ? g.dst[0] : s->tmp;
    int64_t P, Q;
    ndf__split_axis(in->shape, in->ndim, ax->axis, &P, &Q);
    e = ndf__launch_sep64(src, to, P, in->shape[ax->axis], Q, s->dw + ax->off, (int)ax->n, ax->left,
                          ax->mode, c->cval, st);
    src = to;
  }
  e = ndf__cuda_contig_end(&g, e, out, st);
  return e == 0 ? NDF_OK : ndf__cuda_check(p->ctx, e, "cuda_sep64");
}

static ndf_status make(ndf_plan *p) {
  const ndf__sep *c = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_sep64: out of host memory");
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  p->native = 1;
  int64_t nw = 0;
  for (int k = 0; k < c->naxes; k++)
    nw = c->ax[k].off + c->ax[k].n > nw ? c->ax[k].off + c->ax[k].n : nw;
  const size_t bytes = (size_t)ndf_array_size(&p->pb.in) * sizeof(double);
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  if (e == cudaSuccess && nw) e = cudaMalloc((void **)&s->dw, (size_t)nw * sizeof(double));
  if (e == cudaSuccess && nw)
    e = cudaMemcpy(s->dw, c->w, (size_t)nw * sizeof(double), cudaMemcpyHostToDevice);
  if (e == cudaSuccess && c->naxes >= 2 && bytes) e = cudaMalloc((void **)&s->tmp, bytes);
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM,
                     "cuda_sep64: out of device memory for a %zu-byte temporary", bytes);
  return ndf__cuda_check(p->ctx, e, "cuda_sep64 plan");
}

const ndf__solver ndf__cuda_sep64 = {.name = "cuda_sep64",
                                     .op = NDF__OP_SEPFILTER,
                                     .place = NDF_PLACE_CUDA,
                                     .applicable = applicable,
                                     .cost = cost,
                                     .make = make,
                                     .f64 = 1};
