/* iir.c - host side of cuda_iir: the recursive Gaussian (core/iir.h), one pass per filtered
 * axis (iir_kernel.cu), the last axis first, between contiguous float32 device arrays.
 *
 * As cuda_sep, the passes alternate between the output and one temporary so that the last
 * lands in the output. The parallel form (Deriche) reads a pass's input again in its backward
 * sweep, so a pass of that form never writes its own input: when the call is in place and the
 * first pass would, the passes start in the temporary instead and a copy ends them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../core/elem.h"
#include "host.h"

typedef struct {
  float *tmp; /* full-size temporary: two or more passes, or a parallel-form filter */
} state;

static int applicable(const ndf__problem *pb, const ndf_context *ctx) {
  (void)pb;
  return ctx->place.kind == NDF_PLACE_CUDA;
}

/* Per pass, the larger of: the array moved ~5 times at ~3.3 TB/s (the forward sweep's output
 * and, for the parallel form, its input are read again from DRAM: iir_kernel.cu); and the
 * serial recursion, ~120 ns a sample per line for the two sweeps, over the waves of lines
 * (~512 lines resident per SM, 132 SMs). Measured on an H200: 256^3 0.41 ms (model 0.32),
 * 2048^2 1.1 ms (1.0), 512^3 3.0 ms (2.4). */
static double cost(const ndf__problem *pb, const ndf_context *ctx) {
  (void)ctx;
  const ndf__iirp *q = pb->params;
  const double N = (double)ndf_array_size(&pb->in);
  double t = 0;
  for (int d = 0; d < pb->in.ndim; d++) {
    if (!q->ax[d].K) continue;
    const double L = (double)pb->in.shape[d], lines = L > 0 ? N / L : 0;
    const double mem = N * 4 * 5 / 3.3e12, chain = 2 * L * 120e-9 * ceil(lines / (132 * 512.0));
    t += 4e-6 + (mem > chain ? mem : chain);
  }
  return t;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaDeviceSynchronize(); /* a one-shot call may still be running */
  cudaFree(s->tmp);
  free(s);
}

/* The filtered axes, last first. */
static int axes_of(const ndf__iirp *q, int ndim, int *ax) {
  int n = 0;
  for (int d = ndim - 1; d >= 0; d--)
    if (q->ax[d].K) ax[n++] = d;
  return n;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  const ndf__iirp *q = p->pb.params;
  const state *s = p->state;
  ndf_context *ctx = p->ctx;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const int nd = in->ndim;
  int ax[NDF_MAX_DIMS];
  const int np = axes_of(q, nd, ax);
  if (ndf_array_size(in) == 0) return NDF_OK;
  ndf__contig cg;
  cudaError_t e = (cudaError_t)ndf__cuda_contig_begin(&cg, in, 1, out, st);
  const float *src = cg.src;
  float *dst = cg.dst[0];
  /* Targets alternate and end in dst; if the first would be its own input under the parallel
   * form, they start in tmp and a copy ends them. */
  int shift = 0;
  if (src == dst && np % 2 == 1 && q->ax[ax[0]].form == NDF__IIR_PARALLEL) shift = 1;
  for (int k = 0; k < np && e == cudaSuccess; k++) {
    float *to = (np - 1 - k + shift) % 2 == 0 ? dst : s->tmp;
    const int a = ax[k];
    int64_t P = 1, Q = 1;
    for (int d = 0; d < a; d++)
      P *= in->shape[d];
    for (int d = a + 1; d < nd; d++)
      Q *= in->shape[d];
    e = (cudaError_t)ndf__launch_iir(src, to, P, in->shape[a], Q, &q->ax[a], st);
    src = to;
  }
  if (e == cudaSuccess && src != dst)
    e = cudaMemcpyAsync(dst, src, (size_t)ndf_array_size(in) * sizeof(float),
                        cudaMemcpyDeviceToDevice, st);
  e = (cudaError_t)ndf__cuda_contig_end(&cg, e, out, st);
  return e == cudaSuccess ? NDF_OK : ndf__cuda_check(ctx, e, "cuda_iir");
}

static ndf_status make(ndf_plan *p) {
  const ndf__iirp *q = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_iir: out of host memory");
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  int ax[NDF_MAX_DIMS], par = 0;
  const int np = axes_of(q, p->pb.in.ndim, ax);
  for (int k = 0; k < np; k++)
    par |= q->ax[ax[k]].form == NDF__IIR_PARALLEL;
  const size_t bytes = (size_t)ndf_array_size(&p->pb.in) * sizeof(float);
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  if (e == cudaSuccess && (np >= 2 || par) && bytes) e = cudaMalloc((void **)&s->tmp, bytes);
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_iir: out of device memory for a %zu-byte temporary",
                     bytes);
  return ndf__cuda_check(p->ctx, e, "cuda_iir plan");
}

const ndf__solver ndf__cuda_iir = {
    "cuda_iir", NDF__OP_IIR, NDF_PLACE_CUDA, applicable, cost, make,
};
