/* SPDX-License-Identifier: BSD-3-Clause */
/* corr1d.c - host side of cuda_corr1d, the plain one-axis CUDA correlate1d solver (the
 * baseline cuda_sep is measured against). */
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "host.h"

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  return c->naxes == 1 && ctx->place.kind == NDF_PLACE_CUDA;
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  return (double)ndf_array_size(&pb->in) * (double)c->ax[0].n / (2e11 * ndf__rate_scale(ctx));
}

static void free_state(void *w) { cudaFree(w); }

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sepaxis *c = &((const ndf__sep *)p->pb.params)->ax[0];
  const double cval = ((const ndf__sep *)p->pb.params)->cval;
  int axis4 = c->axis + 4 - in->ndim;
  int e = ndf__launch_corr1d_direct(in->data, ndf__cuda_view4(in), out->data, ndf__cuda_view4(out),
                                    axis4, p->state, c->n, c->left, c->mode, (float)cval,
                                    p->ctx->stream);
  return ndf__cuda_check(p->ctx, e, "cuda_direct kernel");
}

static ndf_status make(ndf_plan *p) {
  const ndf__sepaxis *c = &((const ndf__sep *)p->pb.params)->ax[0];
  const double *w = ((const ndf__sep *)p->pb.params)->w + c->off;
  float *hw = malloc((size_t)c->n * sizeof(float)), *dw = NULL;
  if (!hw) return ndf__fail(p->ctx, NDF_ENOMEM, "out of host memory");
  for (int64_t j = 0; j < c->n; j++)
    hw[j] = (float)w[j];
  size_t bytes = (size_t)c->n * sizeof(float);
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  if (e == cudaSuccess) e = cudaMalloc((void **)&dw, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(dw, hw, bytes, cudaMemcpyHostToDevice);
  free(hw);
  if (e != cudaSuccess) {
    cudaFree(dw);
    return ndf__cuda_check(p->ctx, e, "cuda_direct weights");
  }
  p->state = dw;
  p->exec = exec;
  p->free_state = free_state;
  return NDF_OK;
}

const ndf__solver ndf__cuda_corr1d = {.name = "cuda_corr1d",
                                      .op = NDF__OP_SEPFILTER,
                                      .place = NDF_PLACE_CUDA,
                                      .applicable = applicable,
                                      .cost = cost,
                                      .make = make,
                                      .former = "cuda_direct"};
