/* sep.c - host side of cuda_sep: one kernel pass per filtered axis (sep_kernel.cu).
 *
 * The passes run between contiguous float32 device arrays. The last pass writes
 * the output, the one before it a temporary, the one before that the output
 * again, and so on, so one temporary serves any number of axes. Strided views
 * are gathered into, or scattered from, contiguous buffers taken from the
 * stream-ordered allocator for that call. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../core/elem.h"
#include "host.h"

typedef struct {
  float *hw;  /* weights in float32 on the host (kernel parameters) */
  float *dw;  /* the same on the device (taps past the largest bucket) */
  float *tmp; /* full-size temporary, when there are two or more passes */
} state;

static int applicable(const ndf__problem *pb, const ndf_context *ctx) {
  (void)pb;
  return ctx->place.kind == NDF_PLACE_CUDA;
}

static double cost(const ndf__problem *pb, const ndf_context *ctx) {
  (void)ctx;
  const ndf__sep *c = pb->params;
  double n = (double)ndf_array_size(&pb->in), t = 5e-6;
  for (int k = 0; k < c->naxes; k++) /* a read and a write at ~3 TB/s, FMAs at ~40 TFLOP/s */
    t += n * (8.0 / 3e12 + 2.0 * (double)c->ax[k].n / 40e12);
  return t;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaDeviceSynchronize(); /* a one-shot call may still be running */
  free(s->hw);
  cudaFree(s->dw);
  cudaFree(s->tmp);
  free(s);
}

static int pass(const ndf__sep *c, const state *s, const ndf_array *g, int k, const float *src,
                float *dst, void *stream) {
  const ndf__sepaxis *ax = &c->ax[k];
  const int a = ax->axis, nd = g->ndim;
  int64_t P = 1, Q = 1;
  for (int d = 0; d < a; d++)
    P *= g->shape[d];
  for (int d = a + 1; d < nd; d++)
    Q *= g->shape[d];
  if (a == nd - 1)
    return ndf__launch_sep_rows(src, dst, P, g->shape[a], s->hw + ax->off, s->dw + ax->off, ax->n,
                                ax->left, ax->mode, (float)c->cval, stream);
  return ndf__launch_sep_cols(src, dst, P, g->shape[a], Q, s->hw + ax->off, s->dw + ax->off, ax->n,
                              ax->left, ax->mode, (float)c->cval, stream);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  const ndf__sep *c = p->pb.params;
  const state *s = p->state;
  ndf_context *ctx = p->ctx;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const size_t bytes = (size_t)ndf_array_size(in) * sizeof(float);
  const int cin = ndf__is_contiguous(in), cout = ndf__is_contiguous(out);
  float *gin = NULL, *gout = NULL; /* per-call contiguous copies of strided views */
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
  const float *src = in->data;
  float *dst = out->data;
  if (!cin) {
    e = cudaMallocAsync((void **)&gin, bytes, st);
    if (e == cudaSuccess)
      e = (cudaError_t)ndf__launch_to_f32(in->data, NDF_F32, ndf__cuda_view4(in), gin, st);
    src = gin;
  }
  if (e == cudaSuccess && !cout) {
    e = cudaMallocAsync((void **)&gout, bytes, st);
    dst = gout;
  }
  if (e != cudaSuccess) goto done;
  ndf_array g = *in;
  ndf__contiguous_strides(&g);
  for (int k = 0; k < c->naxes && e == cudaSuccess; k++) {
    float *to = (c->naxes - 1 - k) % 2 == 0 ? dst : s->tmp;
    e = (cudaError_t)pass(c, s, &g, k, src, to, st);
    src = to;
  }
  if (e == cudaSuccess && !cout)
    e = (cudaError_t)ndf__launch_from_f32(gout, out->data, NDF_F32, ndf__cuda_view4(out), st);
done:
  if (e != cudaSuccess) r = ndf__cuda_check(ctx, e, "cuda_sep");
  if (gin) cudaFreeAsync(gin, st);
  if (gout) cudaFreeAsync(gout, st);
  return r;
}

static ndf_status make(ndf_plan *p) {
  const ndf__sep *c = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_sep: out of host memory");
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
  if (e == cudaSuccess && c->naxes >= 2) e = cudaMalloc((void **)&s->tmp, bytes);
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_sep: out of device memory for a %zu-byte temporary",
                     bytes);
  return ndf__cuda_check(p->ctx, e, "cuda_sep plan");
}

const ndf__solver ndf__cuda_sep = {
    "cuda_sep", NDF__OP_SEPFILTER, NDF_PLACE_CUDA, applicable, cost, make,
};
