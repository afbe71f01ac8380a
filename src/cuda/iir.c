/* SPDX-License-Identifier: BSD-3-Clause */
/* iir.c - host side of cuda_iir: the recursive Gaussian (core/iir.h), one pass per filtered
 * axis, the last axis first, between contiguous float32 device arrays. An axis of length 1 is
 * left alone (every method's DC gain is 1).
 *
 * Deriche (the parallel form) runs chunked: on the tensor cores (iir_tc_kernel.cu; lines past 1024
 * in segments, the array read twice), else on lines up to 2048 long iir_chunk_kernel.cu's FFMA
 * kernel (tc_pass); a line read before it is written, in place; so do iir_vyv of order 3 or 4
 * and one iir_alvarez step, as their parallel twins (filters_run). iir_alvarez of 2 to 4 steps runs
 * on the tensor-core passes only, as its sections (ndf__iir_tc_filter; iir_tc_kernel.cu's coupled
 * chain; lines past 1024 in segments, as Deriche's). Every other pass is iir_kernel.cu's (a thread
 * per line, float64 state). When every pass may write its own input (chunked, or the cascade form),
 * all of them run in the output. Else, as cuda_sep, the passes alternate between the output and one
 * temporary so that the last lands in the output; iir_kernel.cu's parallel form reads a pass's
 * input again in its backward sweep, so when the call is in place and the first pass would write
 * its input, the passes start in the temporary instead and a copy ends them. On 256 slices or more
 * of up to 512 x 512, when the last two axes have the same chunked filter and both fit the
 * tensor-core kernel, one fused pass takes them together (iir_tc_kernel.cu: a slice to a
 * thread-block cluster; the array crosses DRAM once for both): see fused_yx. The plan makes the
 * tensor-core passes (their matrices, blocks and shared memory) once, so that a call only launches
 * them (making them costs about 4 us of host time a pass). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../core/elem.h"
#include "host.h"

typedef struct {
  ndf__iirp q;              /* the filters run (filters_run) */
  float *tmp;               /* full-size temporary, when some pass cannot write its own input */
  unsigned long long *sync; /* the ticketed fused (y, x) pass's counters, when it may run */
  int fused;                /* fused_yx (2 only where clusters are) */
  /* the tensor-core passes, made with the plan (pass k of exec; yxc: the cluster pass), NULL
   * where the kernel does not take the shape */
  ndf__iir_tc_pass *tc[NDF_MAX_DIMS], *yxc;
} state;

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)pb;
  return ctx->place.kind == NDF_PLACE_CUDA;
}

/* The product of shape[from .. to - 1]. */
static int64_t extent(const int64_t *shape, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++)
    n *= shape[d];
  return n;
}

/* Whether a tensor-core pass takes filter f on lines of L (at plan time; it takes arrays of any
 * alignment, ndf__iir_tc_pass_launch). */
static int tc_takes(const ndf__iir *f, int64_t L) {
  return ndf__iir_tc_fits(NULL, NULL, L) && ndf__iir_tc_filter(f, L);
}

/* Whether a pass of f on lines of L runs chunked (on the tensor cores or the FFMA kernel), so
 * reading each sample of a line before it writes it: it may run in place. */
static int chunked(const ndf__iir *f, int64_t L) {
  return ndf__iir_chunks_fit(f, L) || (f->form == NDF__IIR_PARALLEL && tc_takes(f, L));
}

/* Whether exec runs f's pass on lines of L on the tensor cores, the array of `bytes`. On lines of
 * 1025 to 2048 (segments, iir_tc_kernel.cu's iir_tc_seg, past 1024) the FFMA chunked kernel, which
 * takes them whole, is as fast or faster on arrays that the L2 holds, where the segments' two more
 * launches cost more than they save; on larger arrays the segments are faster (figures:
 * docs/design/recursive-gaussian.md). NDF_CUDA_IIR_SEG (a development switch, ndf__dev_switch: a
 * length) forces segments. */
static int tc_pass(const ndf__iir *f, int64_t L, double bytes) {
  return tc_takes(f, L) && (L <= NDF__IIR_TC_LINE || !ndf__iir_chunks_fit(f, L) || bytes > 32e6 ||
                            ndf__dev_switch("NDF_CUDA_IIR_SEG"));
}

/* The filters cuda_iir runs, in *q: each cascade's parallel twin (core/iir.h: iir_vyv of order 3
 * or 4, one iir_alvarez step) on the axes where the chunked pass takes it, so that these methods
 * run the chunked and tensor-core passes too; the other filters as they are (where the cascade
 * would lose accuracy the problem carries the twin already: ndf__iir_twin_for_accuracy, iir_vyv
 * of order 4 past sigma 64 and of order 3 past 300; iir_kernel.cu runs it on the other shapes).
 * Past sigma 64 order 4's cascade is up to 6.9e-6 off the reference, the twin within 4.3e-9. */
static void filters_run(const ndf__iirp *in, const int64_t *shape, int nd, ndf__iirp *q) {
  *q = *in;
  for (int d = 0; d < nd; d++) {
    ndf__iir tw;
    if (ndf__iir_parallel_twin(&in->ax[d], &tw) && chunked(&tw, shape[d])) q->ax[d] = tw;
  }
}

/* Per pass. The tensor-core pass (lines up to 1024): the array read and written at ~3.6 TB/s
 * plus ~4 us, fitted to H200 timings: 256^3 36-39 us a pass, 512^3 279-325 (columns on 8 chunks
 * a warp), 64 x 256^2 0.042 ms for the filter back to back. It is slower, and
 * the model does not say so, where rows or columns of a line are not a multiple of 4 long or
 * wide (4- or 8-byte copies: 182 x 218 x 182 0.083 ms against 0.065 for 184 x 218 x 184), on
 * columns of an odd number of lines under 16 a row (interleaved channels, 4-byte copies: the X
 * pass of a 256^3 x 3 field 0.178 ms against 0.12 for its Y or Z pass) and past 512 (one team
 * an SM: 1024 x 256^2 0.48 ms); past 1024, in segments, the array read twice and written once
 * (H200: 4096^2 0.156 ms). Other chunked passes (the FFMA kernel: lines of 1025
 * to 2048 on arrays up to 32 MB, tc_pass; NDF_CUDA_IIR_TC=0): ~2 TB/s (half the copy
 * bandwidth; the chunks' chaining and recursions are not all hidden behind the loads), half that
 * on lines past 512 (64 chunks chained in series); measured on an H200, 256^3 0.08 ms a pass,
 * 512^3 0.45-0.5, 2048^2 0.035. Else the larger of: the array moved ~5 times at ~3.3
 * TB/s (the forward sweep's output and, for the parallel form, its input are read again from
 * DRAM: iir_kernel.cu); and the serial recursion, ~120 ns a sample per line for the two sweeps,
 * over the waves of lines (~512 lines resident per SM, 132 SMs); measured 256^3 0.41 ms (model
 * 0.32), 512^3 3.0 ms (2.4). The rates are the H200's, carried to the device by its bandwidth,
 * multiprocessors and clock (ndf__device_caps). */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  ndf__iirp run;
  filters_run(pb->params, pb->in.shape, pb->in.ndim, &run);
  const ndf__iirp *q = &run;
  const double N = (double)ndf_array_size(&pb->in), bw = ndf__bw_scale(ctx);
  const double lanes = 512.0 * (ctx->caps.sms > 0 ? ctx->caps.sms : NDF__REF_SMS);
  const double sample =
      120e-9 * (ctx->caps.clock_hz > 0 ? NDF__REF_CLOCK_HZ / ctx->caps.clock_hz : 1);
  double t = 0;
  for (int d = 0; d < pb->in.ndim; d++) {
    const int64_t L = pb->in.shape[d];
    if (!q->ax[d].K || L == 1) continue;
    if (tc_pass(&q->ax[d], L, N * 4)) { /* past 1024 in segments: the array read twice */
      t += L > NDF__IIR_TC_LINE ? 1e-5 + N * 12 / (3.6e12 * bw) : 4e-6 + N * 8 / (3.6e12 * bw);
      continue;
    }
    if (ndf__iir_chunks_fit(&q->ax[d], L)) {
      t += 6e-6 + N * 8 / (2e12 * bw) * (L > 512 ? 2 : 1);
      continue;
    }
    const double lines = L > 0 ? N / (double)L : 0;
    const double mem = N * 4 * 5 / (3.3e12 * bw),
                 chain = 2 * (double)L * sample * ceil(lines / lanes);
    t += 4e-6 + (mem > chain ? mem : chain);
  }
  return t;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaFree(s->tmp);
  cudaFree(s->sync);
  for (int k = 0; k < NDF_MAX_DIMS; k++)
    ndf__iir_tc_pass_free(s->tc[k]);
  ndf__iir_tc_pass_free(s->yxc);
  free(s);
}

/* The filtered axes longer than 1, last first. */
static int axes_of(const ndf__iirp *q, const ndf_array *a, int *ax) {
  int n = 0;
  for (int d = a->ndim - 1; d >= 0; d--)
    if (q->ax[d].K && a->shape[d] > 1) ax[n++] = d;
  return n;
}

/* Whether every pass may write its own input: the chunked parallel form, and the cascade. */
static int all_in_place(const ndf__iirp *q, const int64_t *shape, const int *ax, int np) {
  for (int k = 0; k < np; k++) {
    const ndf__iir *f = &q->ax[ax[k]];
    if (f->form == NDF__IIR_PARALLEL && !chunked(f, shape[ax[k]])) return 0;
  }
  return 1;
}

/* Whether the two last axes go through a fused (y, x) pass, and which: 0 none, 1 by ticket
 * (iir_tc_yx), 2 a slice to a thread-block cluster (iir_tc_yxc). Both need the same chunked
 * filter on both axes, every pass in place, and the tensor-core kernel fitting both (alignment
 * aside: exec checks the arrays, ndf__iir_tc_aligned; NDF_CUDA_IIR_TC=0, which turns the
 * tensor-core kernels off, turns them off too). The cluster pass runs by default on 256 slices
 * or more of up to 512 x 512, where it saves a tenth of the three passes' time at 256^3 and a
 * little at 512^3; on 64 or 128 slices of 256^2 it is no faster (figures:
 * docs/design/recursive-gaussian.md). NDF_CUDA_IIR_FUSED=0, 1 or 2 picks one (a development
 * switch, ndf__dev_switch); the ticketed pass, bound by its groups' latency (iir_tc_kernel.cu), is
 * slower than the passes it replaces. */
static int fused_yx(const ndf__iirp *q, const int64_t *shape, int nd, const int *ax, int np) {
  if (np < 2 || ax[0] != nd - 1 || ax[1] != nd - 2) return 0;
  const ndf__iir *fx = &q->ax[nd - 1], *fy = &q->ax[nd - 2];
  if (!(memcmp(fx, fy, sizeof *fx) == 0 && ndf__iir_tc_filter(fx, shape[nd - 1]) &&
        ndf__iir_tc_filter(fy, shape[nd - 2]) && all_in_place(q, shape, ax, np) &&
        ndf__iir_tc_yx_fits(NULL, NULL, shape[nd - 2], shape[nd - 1])))
    return 0;
  const char *fused = ndf__dev_switch("NDF_CUDA_IIR_FUSED");
  if (fused && (fused[0] == '0' || fused[0] == '1' || fused[0] == '2')) return fused[0] - '0';
  return shape[nd - 1] <= 512 && shape[nd - 2] <= 512 && extent(shape, 0, nd - 2) >= 256 ? 2 : 0;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const state *s = p->state;
  const ndf__iirp *q = &s->q;
  ndf_context *ctx = p->ctx;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const int nd = in->ndim;
  int ax[NDF_MAX_DIMS];
  const int np = axes_of(q, in, ax);
  if (ndf_array_size(in) == 0) return NDF_OK;
  ndf__contig cg;
  cudaError_t e = (cudaError_t)ndf__cuda_contig_begin(&cg, in, 1, out, st);
  const float *src = cg.src;
  float *dst = cg.dst[0];
  /* Every pass into dst when all may run in place; else the targets alternate and end in dst,
   * and if the first would be its own input under the unchunked parallel form, they start in
   * tmp and a copy ends them. */
  const int inplace = all_in_place(q, in->shape, ax, np);
  int shift = 0;
  if (!inplace && src == dst && np % 2 == 1 && q->ax[ax[0]].form == NDF__IIR_PARALLEL) shift = 1;
  int k0 = 0;
  if (s->fused && ndf__iir_tc_aligned(src, dst)) { /* (make checked the shape) */
    const int64_t P = extent(in->shape, 0, nd - 2), Y = in->shape[nd - 2], X = in->shape[nd - 1];
    if (s->fused == 1)
      e = (cudaError_t)ndf__launch_iir_tc_yx(src, dst, P, Y, X, &q->ax[nd - 1], s->sync, st);
    else
      e = (cudaError_t)ndf__iir_tc_pass_launch(s->yxc, src, dst, 0, st);
    src = dst;
    k0 = 2;
  }
  for (int k = k0; k < np && e == cudaSuccess; k++) {
    float *to = inplace || (np - 1 - k + shift) % 2 == 0 ? dst : s->tmp;
    const int a = ax[k];
    const ndf__iir *f = &q->ax[a];
    const int64_t P = extent(in->shape, 0, a), Q = extent(in->shape, a + 1, nd);
    /* the last pass, unless a copy out of tmp follows it */
    const int last = k == np - 1 && to == dst;
    if (s->tc[k]) /* (any alignment) */
      e = (cudaError_t)ndf__iir_tc_pass_launch(s->tc[k], src, to, last, st);
    else if (ndf__iir_chunks_fit(f, in->shape[a]))
      e = (cudaError_t)ndf__launch_iir_chunks(src, to, P, in->shape[a], Q, f, st);
    else
      e = (cudaError_t)ndf__launch_iir(src, to, P, in->shape[a], Q, f, st);
    src = to;
  }
  if (e == cudaSuccess && src != dst)
    e = cudaMemcpyAsync(dst, src, (size_t)ndf_array_size(in) * sizeof(float),
                        cudaMemcpyDeviceToDevice, st);
  e = (cudaError_t)ndf__cuda_contig_end(&cg, e, out, st);
  return e == cudaSuccess ? NDF_OK : ndf__cuda_check(ctx, e, "cuda_iir");
}

static ndf_status make(ndf_plan *p) {
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_iir: out of host memory");
  p->state = s;
  filters_run(p->pb.params, p->pb.in.shape, p->pb.in.ndim, &s->q);
  const ndf__iirp *q = &s->q;
  p->exec = exec;
  p->free_state = free_state;
  int ax[NDF_MAX_DIMS], par = 0;
  const int np = axes_of(q, &p->pb.in, ax);
  for (int k = 0; k < np; k++)
    par |= q->ax[ax[k]].form == NDF__IIR_PARALLEL;
  const size_t bytes = (size_t)ndf_array_size(&p->pb.in) * sizeof(float);
  const int64_t *sh = p->pb.in.shape;
  const int nd = p->pb.in.ndim;
  p->in_place = all_in_place(q, sh, ax, np);
  const int need = !p->in_place && (np >= 2 || par);
  cudaError_t e = cudaSetDevice(p->ctx->place.device), passes = cudaSuccess;
  if (e == cudaSuccess && need && bytes) e = cudaMalloc((void **)&s->tmp, bytes);
  s->fused = fused_yx(q, sh, nd, ax, np);
  if (e == cudaSuccess && s->fused == 2) { /* the cluster pass, where clusters are */
    passes = e = (cudaError_t)ndf__iir_tc_yxc_pass_make(&s->yxc, extent(sh, 0, nd - 2), sh[nd - 2],
                                                        sh[nd - 1], &q->ax[nd - 1]);
    if (!s->yxc) s->fused = 0;
  }
  /* the tensor-core passes that exec runs one axis at a time */
  for (int k = s->fused ? 2 : 0; k < np && e == cudaSuccess; k++) {
    const int a = ax[k];
    if (tc_pass(&q->ax[a], sh[a], (double)bytes))
      passes = e = (cudaError_t)ndf__iir_tc_pass_make(&s->tc[k], extent(sh, 0, a), sh[a],
                                                      extent(sh, a + 1, nd), &q->ax[a]);
  }
  if (passes == cudaErrorMemoryAllocation) /* (a pass's host memory) */
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_iir: out of host memory");
  if (e == cudaSuccess && s->fused == 1) {
    const int64_t P = extent(sh, 0, nd - 2);
    e = cudaMalloc((void **)&s->sync, (size_t)(P + 2) * sizeof *s->sync);
    if (e == cudaSuccess) e = cudaMemset(s->sync, 0, (size_t)(P + 2) * sizeof *s->sync);
    if (e == cudaSuccess) e = cudaStreamSynchronize(0); /* before work on any stream */
  }
  if (e == cudaErrorMemoryAllocation && need && bytes && !s->tmp)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cuda_iir: out of device memory for a %zu-byte temporary",
                     bytes);
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM,
                     "cuda_iir: out of device memory for the fused pass's counters");
  return ndf__cuda_check(p->ctx, e, "cuda_iir plan");
}

const ndf__solver ndf__cuda_iir = {.name = "cuda_iir",
                                   .op = NDF__OP_GAUSSIAN,
                                   .place = NDF_PLACE_CUDA,
                                   .applicable = applicable,
                                   .cost = cost,
                                   .make = make,
                                   .finite_only = ndf__always_finite_only};
