/* SPDX-License-Identifier: BSD-3-Clause */
/* direct.c - host side of cuda_direct for N-dimensional correlation (corr_kernel.cu):
 * the kernel in float32 on the device, the arrays seen as 4-D, strided views gathered into
 * (or scattered from) contiguous buffers from the stream-ordered allocator for that call.
 * cuda_direct64 is the same solver over float64 device arrays in float64, as scipy computes
 * them (a native plan: the arrays as they are, where cuda_direct stages them to float32). */
#include <math.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "host.h"

typedef struct {
  void *dw; /* the kernel on the device: float32, or float64 for cuda_direct64 */
  int64_t n[4], k[4], left[4];
  int mode[4];
  int skip_zero; /* the generic kernel, skipping zero weights (scipy's footprint) */
} state;

/* 1 if a kernel has weights the op made exactly zero (scipy leaves them out of its sum). */
static int has_zero(const ndf__corr *c) {
  for (int64_t j = 0; j < c->nw * c->nf; j++)
    if (c->w[j] == 0.0) return 1;
  return 0;
}

/* The fast kernels multiply every weight, zeros included: a NaN or Inf under a zero weight
 * would reach outputs scipy's would not; the exact variant skips them. */
static int finite_only(const ndf__problem *pb) { return !pb->exact && has_zero(pb->params); }

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)pb;
  return ctx->place.kind == NDF_PLACE_CUDA;
}

static int applicable64(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  return ndf__cuda_f64_native(pb, ctx);
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  const ndf__corr *c = pb->params;
  const double nf = (double)c->nf;
  const int nd = pb->in.ndim, f64 = self->f64;
  const int64_t kx = c->k[nd - 1], ky = nd > 1 ? c->k[nd - 2] : 1;
  /* FMA rate: corr_reg (float32, odd x taps 3..17, at most 17 y taps, more than 8 rows) keeps
   * ~1.15 TFMA/s per x tap, up to ~20 (fitted to H200 rates: 3-D k5 6.2, k7 8.9, k11 12.6, k17
   * 16.9; 2-D k17 20 TFMA/s); the generic tile path less, and in float64 (shared-memory reads
   * twice as wide) about half that, not fitted. Plus the read and the writes, and a launch. */
  const int reg =
      !f64 && kx % 2 == 1 && kx >= 3 && kx <= 17 && ky <= 17 && nd >= 2 && pb->in.shape[nd - 2] > 8;
  const double rate = (reg   ? fmin(1.15e12 * (double)kx, 2e13)
                       : f64 ? 1.5e12
                             : 3e12) *
                      ndf__rate_scale(ctx),
               es = f64 ? 8 : 4;
  return 5e-6 + (double)ndf_array_size(&pb->in) *
                    ((double)c->nw * nf / rate + es * (1 + nf) / (3e12 * ndf__bw_scale(ctx)));
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaFree(s->dw);
  free(s);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__corr *c = p->pb.params;
  const state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  if (ndf_array_size(in) == 0) return NDF_OK;
  ndf__contig g;
  int e = ndf__cuda_contig_begin(&g, in, (int)c->nf, out, st);
  if (e == 0 && p->solver->f64)
    e = ndf__launch_corr_direct64(g.src, (double *const *)g.dst, (int)c->nf, s->n, s->k, s->left,
                                  s->mode, c->cval, s->dw, s->skip_zero, st);
  else if (e == 0)
    e = ndf__launch_corr_direct(g.src, (float *const *)g.dst, (int)c->nf, s->n, s->k, s->left,
                                s->mode, (float)c->cval, s->dw, s->skip_zero, st);
  e = ndf__cuda_contig_end(&g, e, out, st);
  return e == 0 ? NDF_OK : ndf__cuda_check(p->ctx, e, "cuda_direct (correlate)");
}

static ndf_status make(ndf_plan *p) {
  const ndf__corr *c = p->pb.params;
  const ndf_array *a = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_direct: out of host memory");
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  const int f64 = p->solver->f64;
  p->native = f64;
  const int pad = 4 - a->ndim;
  for (int d = 0; d < 4; d++) {
    const int q = d - pad;
    s->n[d] = q < 0 ? 1 : a->shape[q];
    s->k[d] = q < 0 ? 1 : c->k[q];
    s->left[d] = q < 0 ? 0 : c->left[q];
    s->mode[d] = q < 0 ? NDF_MODE_REFLECT : (int)c->mode[q];
  }
  s->skip_zero = p->pb.exact && has_zero(c);
  const size_t nw = (size_t)(c->nw * c->nf), es = f64 ? sizeof(double) : sizeof(float);
  float *hw = f64 ? NULL : malloc(nw * sizeof(float));
  if (!f64 && !hw) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_direct: out of host memory");
  for (size_t j = 0; hw && j < nw; j++)
    hw[j] = (float)c->w[j];
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  if (e == cudaSuccess) e = cudaMalloc(&s->dw, nw * es);
  if (e == cudaSuccess)
    e = cudaMemcpy(s->dw, hw ? (const void *)hw : (const void *)c->w, nw * es,
                   cudaMemcpyHostToDevice);
  free(hw);
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_direct: out of device memory for the kernel");
  return ndf__cuda_check(p->ctx, e, "cuda_direct plan");
}

const ndf__solver ndf__cuda_direct = {.name = "cuda_direct",
                                      .op = NDF__OP_CORRELATE,
                                      .place = NDF_PLACE_CUDA,
                                      .applicable = applicable,
                                      .cost = cost,
                                      .make = make,
                                      .finite_only = finite_only};

const ndf__solver ndf__cuda_direct64 = {.name = "cuda_direct64",
                                        .op = NDF__OP_CORRELATE,
                                        .place = NDF_PLACE_CUDA,
                                        .applicable = applicable64,
                                        .cost = cost,
                                        .make = make,
                                        .finite_only = finite_only,
                                        .f64 = 1};
