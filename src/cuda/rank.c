/* SPDX-License-Identifier: BSD-3-Clause */
/* rank.c - host side of cuda_rank (rank_kernel.cu): rank filters on the GPU, a thread an
 * output, any footprint. A rank filter's result is one of its samples: float32 holds every sample
 * of the library's integer dtypes exactly, and float64 device arrays are filtered as they are (a
 * native plan: contiguous, nothing staged), so the result is exact for every dtype. */
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "../core/elem.h"
#include "host.h"

typedef struct {
  int64_t *off; /* device: the samples' offsets from the window's start */
  int *at;      /* device: the samples' positions in the window */
  int64_t n[4];
  int extreme;
} state;

static int extreme_of(const ndf__rank *r) {
  return r->rank == 0 ? -1 : r->rank == r->n - 1 ? 1 : 0;
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__rank *r = pb->params;
  const ndf_array *in = &pb->in, *out = &pb->out;
  const int f64 = in->dtype == NDF_F64 || out->dtype == NDF_F64;
  return ctx->place.kind == NDF_PLACE_CUDA && r->n < INT32_MAX &&
         (!f64 ||
          (in->dtype == out->dtype && in->place.kind == NDF_PLACE_CUDA &&
           out->place.kind == NDF_PLACE_CUDA && ndf__is_contiguous(in) && ndf__is_contiguous(out)));
}

/* A read of each sample (mostly from cache); a selection among up to 128 makes about log2(n) + 2
 * passes over them in local memory, a larger one 32 (float64: 64) passes of reads: orders of
 * magnitude, not fitted. */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__rank *r = pb->params;
  const double n = (double)ndf_array_size(&pb->in), m = (double)r->n;
  const double bytes = pb->in.dtype == NDF_F64 ? 16 : 8;
  const double per = extreme_of(r) ? m * 0.05e-12
                     : m <= 128    ? m * (m <= 16 ? m / 4 : 6) * 0.1e-12
                                   : m * bytes * 4 * 0.05e-12;
  return 5e-6 + n * (per / ndf__rate_scale(ctx) + bytes / (3e12 * ndf__bw_scale(ctx)));
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaFree(s->off);
  cudaFree(s->at);
  free(s);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__rank *r = p->pb.params;
  const state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  if (ndf_array_size(in) == 0) return NDF_OK;
  int mode[4];
  for (int d = 0; d < 4; d++)
    mode[d] = (int)r->mode[d];
  int e;
  if (p->native) { /* float64, contiguous; in place through a copy of the input */
    const size_t bytes = (size_t)ndf_array_size(in) * sizeof(double);
    void *src = in->data, *tmp = NULL;
    e = 0;
    if (in->data == out->data) {
      e = (int)cudaMallocAsync(&tmp, bytes, st);
      if (e == 0) e = (int)cudaMemcpyAsync(tmp, in->data, bytes, cudaMemcpyDeviceToDevice, st);
      src = tmp;
    }
    if (e == 0)
      e = ndf__launch_rank(src, out->data, 1, s->n, r->k, r->left, mode, r->cval, s->off, s->at,
                           (int)r->n, (int)r->rank, s->extreme, st);
    if (tmp) cudaFreeAsync(tmp, st);
  } else {
    ndf__contig g;
    e = ndf__cuda_contig_begin(&g, in, 1, out, st);
    if (e == 0)
      e = ndf__launch_rank(g.src, g.dst[0], 0, s->n, r->k, r->left, mode, r->cval, s->off, s->at,
                           (int)r->n, (int)r->rank, s->extreme, st);
    e = ndf__cuda_contig_end(&g, e, out, st);
  }
  return e == 0 ? NDF_OK : ndf__cuda_check(p->ctx, e, "cuda_rank");
}

static ndf_status make(ndf_plan *p) {
  const ndf__rank *r = p->pb.params;
  const ndf_array *a = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_rank: out of host memory");
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  p->native = a->dtype == NDF_F64 || p->pb.out.dtype == NDF_F64;
  s->extreme = extreme_of(r);
  const int pad = 4 - a->ndim;
  for (int d = 0; d < 4; d++)
    s->n[d] = d < pad ? 1 : a->shape[d - pad];
  const int64_t size = r->k[0] * r->k[1] * r->k[2] * r->k[3];
  int64_t *off = malloc((size_t)r->n * sizeof *off);
  int *at = malloc((size_t)r->n * 4 * sizeof *at);
  if (!off || !at) {
    free(off);
    free(at);
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_rank: out of host memory");
  }
  int64_t m = 0;
  for (int64_t j = 0; j < size; j++) {
    if (!r->fp[j]) continue;
    int64_t rest = j, o = 0, cs = 1;
    for (int d = 3; d >= 0; d--) {
      at[4 * m + d] = (int)(rest % r->k[d]);
      rest /= r->k[d];
      o += at[4 * m + d] * cs;
      cs *= s->n[d];
    }
    off[m++] = o;
  }
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->off, (size_t)m * sizeof *off);
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->at, (size_t)m * 4 * sizeof *at);
  if (e == cudaSuccess)
    e = cudaMemcpy(s->off, off, (size_t)m * sizeof *off, cudaMemcpyHostToDevice);
  if (e == cudaSuccess)
    e = cudaMemcpy(s->at, at, (size_t)m * 4 * sizeof *at, cudaMemcpyHostToDevice);
  free(off);
  free(at);
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_rank: out of device memory for the footprint");
  return ndf__cuda_check(p->ctx, e, "cuda_rank plan");
}

const ndf__solver ndf__cuda_rank = {.name = "cuda_rank",
                                    .op = NDF__OP_RANK,
                                    .place = NDF_PLACE_CUDA,
                                    .applicable = applicable,
                                    .cost = cost,
                                    .make = make};
