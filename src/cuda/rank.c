/* SPDX-License-Identifier: BSD-3-Clause */
/* rank.c - host side of cuda_rank (rank_kernel.cu): rank filters on the GPU, a thread an
 * output, any footprint; the median of a few samples through a tile in shared memory. A rank
 * filter's result is one of its samples: float32 holds every sample of the library's integer dtypes
 * exactly, and float64 device arrays (and uint8, uint16 and int16 ones under a median the tile
 * takes or a box's extreme by extreme_kernel.cu's passes) are filtered as they are (a native plan:
 * nothing staged, strided views through contiguous buffers of their dtype), so the result is exact
 * for every dtype. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../core/dev_switch.h"
#include "../core/elem.h"
#include "host.h"

/* A pass of the kernel: a footprint inside the box k (left: k/2 + origin), its count samples at
 * off[] (device) from the window's start and at[] (device, four per sample) in the window. */
typedef struct {
  int64_t k[4], left[4];
  int64_t *off;
  int *at;
  int count;
  ndf__median_tile *tile; /* the median by median_tile, laid out; else NULL */
  int axis; /* a box's minimum or maximum along this axis by extreme_kernel.cu; else -1 */
} pass;

/* A general footprint is one pass; a box's minimum or maximum is one pass per axis it spans
 * (a 1-D window each, as scipy's separable filter), its cost the sum of the lengths. */
typedef struct {
  pass ps[4];
  int np;
  int64_t n[4];
  int dtype; /* the passes' samples: float32 (staged), or a native plan's dtype */
} state;

/* The median of a few samples through median_tile (rank_kernel.cu), in pairs of outputs where
 * their windows share most samples (2), else alone (1). The development switch
 * NDF_CUDA_RANK_TILE forces one form, or with 0 the general kernel, for the tests. */
static int tile_mode(void) {
  const char *on = ndf__dev_switch("NDF_CUDA_RANK_TILE");
  return on && on[0] >= '0' && on[0] <= '2' ? on[0] - '0' : 2;
}

/* A box's minimum or maximum by extreme_kernel.cu's passes (the samples as they are, a window
 * of one axis each); the development switch NDF_CUDA_EXTREME=0 gives the passes to the general
 * kernel instead, for the tests and comparisons. */
static int extreme_passes(void) {
  const char *on = ndf__dev_switch("NDF_CUDA_EXTREME");
  return !(on && on[0] == '0');
}

static int extreme_of(const ndf__rank *r) {
  return r->rank == 0 ? -1 : r->rank == r->n - 1 ? 1 : 0;
}

/* A box's minimum or maximum: one 1-D pass per axis (scipy's separable filter). */
static int by_axes(const ndf__rank *r) {
  return extreme_of(r) && r->n == r->k[0] * r->k[1] * r->k[2] * r->k[3];
}

/* Whether median_tile takes the problem with samples of esize bytes. */
static int tile_takes(const ndf__problem *pb, int esize) {
  const ndf__rank *r = pb->params;
  return !by_axes(r) && !extreme_of(r) && tile_mode() &&
         ndf__median_tile_plan(NULL, esize, ndf__cuda_view4(&pb->in).shape, r->k, NULL, (int)r->n,
                               (int)r->rank, 0);
}

/* The dtype the passes run in: float64 (native), and uint8, uint16 or int16 device arrays as
 * they are (native) for a median the tile takes or a box's extreme by extreme_passes; else
 * float32 (staged). */
static int work_dtype(const ndf__problem *pb) {
  const ndf_array *in = &pb->in, *out = &pb->out;
  const ndf_dtype t = in->dtype;
  if (t == NDF_F64 || out->dtype == NDF_F64) return NDF_F64;
  if ((t == NDF_U8 || t == NDF_U16 || t == NDF_I16) && out->dtype == t &&
      in->place.kind == NDF_PLACE_CUDA && out->place.kind == NDF_PLACE_CUDA &&
      (by_axes(pb->params) ? extreme_passes() : tile_takes(pb, (int)ndf_dtype_size(t))))
    return (int)t;
  return NDF_F32;
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__rank *r = pb->params;
  const ndf_array *in = &pb->in, *out = &pb->out;
  const int f64 = in->dtype == NDF_F64 || out->dtype == NDF_F64;
  return ctx->place.kind == NDF_PLACE_CUDA && r->n < INT32_MAX &&
         (!f64 || (in->dtype == out->dtype && in->place.kind == NDF_PLACE_CUDA &&
                   out->place.kind == NDF_PLACE_CUDA));
}

/* A read of each sample (mostly from cache); a selection among up to 128 makes about log2(n) + 2
 * passes over them in local memory, a larger one 32 (float64: 64) passes of reads: orders of
 * magnitude, not fitted. */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__rank *r = pb->params;
  const int64_t *k = r->k;
  const double n = (double)ndf_array_size(&pb->in),
               m = by_axes(r) ? (double)(k[0] + k[1] + k[2] + k[3]) : (double)r->n;
  const int esize = (int)ndf_dtype_size((ndf_dtype)work_dtype(pb));
  const double bytes = 2.0 * esize;
  /* the tile's forgetful selection: about (3/8) m^2 minimum-or-maximum operations */
  const double per = tile_takes(pb, esize) ? m * m * 0.05e-12
                     : extreme_of(r)       ? m * 0.05e-12
                     : m <= 128            ? m * (m <= 16 ? m / 4 : 6) * 0.1e-12
                                           : m * bytes * 4 * 0.05e-12;
  return 5e-6 + n * (per / ndf__rate_scale(ctx) + bytes / (3e12 * ndf__bw_scale(ctx)));
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  for (int i = 0; i < s->np; i++) {
    cudaFree(s->ps[i].off);
    cudaFree(s->ps[i].at);
    free(s->ps[i].tile);
  }
  free(s);
}

/* The passes from src into dst (never the same memory), through tmp between them. */
static int run(const state *s, const ndf__rank *r, const void *src, void *dst, cudaStream_t st) {
  int mode[4];
  for (int d = 0; d < 4; d++)
    mode[d] = (int)r->mode[d];
  const size_t bytes =
      (size_t)(s->n[0] * s->n[1] * s->n[2] * s->n[3]) * ndf_dtype_size((ndf_dtype)s->dtype);
  void *tmp = NULL;
  int e = s->np > 1 ? (int)cudaMallocAsync(&tmp, bytes, st) : 0;
  for (int i = 0; i < s->np && e == 0; i++) { /* the last pass writes dst */
    const pass *q = &s->ps[i];
    void *to = (s->np - 1 - i) % 2 ? tmp : dst;
    if (q->tile)
      e = ndf__launch_median_tile(src, to, s->dtype, s->n, q->left, mode, r->cval, q->tile, st);
    else if (q->axis >= 0) {
      int64_t P, Q;
      ndf__split_axis(s->n, 4, q->axis, &P, &Q);
      e = ndf__launch_extreme(src, to, s->dtype, P, s->n[q->axis], Q, (int)q->k[q->axis],
                              q->left[q->axis], mode[q->axis], r->cval, extreme_of(r) > 0, st);
    } else if (s->dtype == NDF_F32 || s->dtype == NDF_F64)
      e = ndf__launch_rank(src, to, s->dtype == NDF_F64, s->n, q->k, q->left, mode, r->cval, q->off,
                           q->at, q->count, s->np > 1 ? 0 : (int)r->rank, extreme_of(r), st);
    else /* an integer plan's passes are the tile's or extreme_kernel's (work_dtype) */
      e = (int)cudaErrorInvalidValue;
    src = to;
  }
  if (tmp) cudaFreeAsync(tmp, st);
  return e;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__rank *r = p->pb.params;
  const state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  if (ndf_array_size(in) == 0) return NDF_OK;
  ndf__contig g; /* float32 staged, or a native plan's dtype; any strides */
  int e = ndf__cuda_contig_begin(&g, in, 1, out, st);
  if (e == 0) e = run(s, r, g.src, g.dst[0], st);
  e = ndf__cuda_contig_end(&g, e, out, st);
  return e == 0 ? NDF_OK : ndf__cuda_check(p->ctx, e, "cuda_rank");
}

/* Pass q over the samples of footprint fp (box k, bytes in C order; NULL: all of the box);
 * median >= 0: the median's rank, which the tile takes where tile_mode allows. */
static cudaError_t make_pass(pass *q, const unsigned char *fp, const int64_t n[4], int esize,
                             int median) {
  const int64_t size = q->k[0] * q->k[1] * q->k[2] * q->k[3];
  int64_t *off = malloc((size_t)size * sizeof *off);
  int *at = malloc((size_t)size * 4 * sizeof *at);
  cudaError_t e = off && at ? cudaSuccess : cudaErrorMemoryAllocation;
  int64_t m = 0;
  for (int64_t j = 0; j < size && e == cudaSuccess; j++) {
    if (fp && !fp[j]) continue;
    int64_t rest = j, o = 0, cs = 1;
    for (int d = 3; d >= 0; d--) {
      at[4 * m + d] = (int)(rest % q->k[d]);
      rest /= q->k[d];
      o += at[4 * m + d] * cs;
      cs *= n[d];
    }
    off[m++] = o;
  }
  q->count = (int)m;
  if (e == cudaSuccess) e = cudaMalloc((void **)&q->off, (size_t)m * sizeof *off);
  if (e == cudaSuccess) e = cudaMalloc((void **)&q->at, (size_t)m * 4 * sizeof *at);
  if (e == cudaSuccess)
    e = cudaMemcpy(q->off, off, (size_t)m * sizeof *off, cudaMemcpyHostToDevice);
  if (e == cudaSuccess)
    e = cudaMemcpy(q->at, at, (size_t)m * 4 * sizeof *at, cudaMemcpyHostToDevice);
  if (e == cudaSuccess && median >= 0 && tile_mode()) {
    q->tile = malloc(sizeof *q->tile);
    if (!q->tile) e = cudaErrorMemoryAllocation;
    if (q->tile &&
        !ndf__median_tile_plan(q->tile, esize, n, q->k, at, q->count, median, tile_mode() == 2)) {
      free(q->tile);
      q->tile = NULL;
    }
  }
  free(off);
  free(at);
  return e;
}

static ndf_status make(ndf_plan *p) {
  const ndf__rank *r = p->pb.params;
  const ndf_array *a = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_rank: out of host memory");
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  for (int i = 0; i < 4; i++)
    s->ps[i].axis = -1;
  s->dtype = work_dtype(&p->pb);
  p->native = s->dtype != NDF_F32;
  const int esize = (int)ndf_dtype_size((ndf_dtype)s->dtype);
  memcpy(s->n, ndf__cuda_view4(a).shape, sizeof s->n);
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  if (by_axes(r)) {
    for (int d = 0; d < 4 && e == cudaSuccess; d++) {
      if (r->k[d] == 1 && !(d == 3 && s->np == 0)) continue;
      pass *q = &s->ps[s->np++];
      for (int i = 0; i < 4; i++) {
        q->k[i] = i == d ? r->k[d] : 1;
        q->left[i] = i == d ? r->left[d] : 0;
      }
      if (extreme_passes()) { /* a window along d: no sample tables */
        q->axis = d;
        q->count = (int)q->k[d];
      } else {
        e = make_pass(q, NULL, s->n, esize, -1);
      }
    }
  } else if (e == cudaSuccess) {
    pass *q = &s->ps[s->np++];
    memcpy(q->k, r->k, sizeof q->k);
    memcpy(q->left, r->left, sizeof q->left);
    e = make_pass(q, r->fp, s->n, esize, extreme_of(r) ? -1 : (int)r->rank);
  }
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_rank: out of memory for the footprint");
  return ndf__cuda_check(p->ctx, e, "cuda_rank plan");
}

const ndf__solver ndf__cuda_rank = {.name = "cuda_rank",
                                    .op = NDF__OP_RANK,
                                    .place = NDF_PLACE_CUDA,
                                    .applicable = applicable,
                                    .cost = cost,
                                    .make = make};
