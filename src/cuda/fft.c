/* SPDX-License-Identifier: BSD-3-Clause */
/* fft.c - cuda_fft and cuda_fft64 for N-dimensional correlation (and filter banks) by cuFFT.
 * cuda_fft computes in float32 (float64 arrays staged to float32); cuda_fft64 is the same
 * solver over float64 device arrays in float64 (cuFFT's D2Z, Z2D, Z2Z), as scipy computes them:
 * a native plan, taking the arrays as they are (strided ones through contiguous float64 views).
 * The development switch NDF_CUDA_F64=0 turns cuda_fft64 off.
 *
 * Per axis the input is extended by the mode to e = n + k - 1 samples (the extended sample
 * t is the input's t - left) and zero-padded to a 2-3-5-smooth L >= e, in the transform
 * buffer (cuFFT's in-place real layout: rows of rs = 2 (L3/2 + 1) reals). What is left is
 * the valid correlation out[i] = sum_j w[j] E[i + j], which is the circular correlation of E
 * with the kernel zero-padded to L: it never wraps for i < n. In the frequency domain that is
 * E^ * conj(W^); W^ is made once per plan, scaled by 1 / prod(L) for the unnormalised
 * inverse. An execute: pad, forward, per kernel (product, inverse, crop), on the context's
 * stream. A bank keeps the input's spectrum and takes each product into a second buffer.
 *
 * cuFFT has no 4-D plan: a 4-D transform is a batch of 3-D real transforms over the last
 * three axes followed by complex 1-D transforms along the first (strided, one per point of
 * a 3-D spectrum); the inverse runs the other way round. cuFFT's work area is allocated by
 * the plan (one for all of its cuFFT plans, which run in turn on one stream). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <cufft.h>

#include "host.h"

#define D 4

typedef struct {
  int64_t n[D], k[D], left[D], e[D], L[D];
  int mode[D];
  int64_t rs;   /* reals per buffer row */
  int64_t ncx;  /* complex values in the buffer */
  int f64;      /* reals are double (cuda_fft64), else float */
  size_t es;    /* bytes per real */
  size_t bytes; /* the buffer's: ncx complex values of 2 es bytes */
  int rank;     /* the array's ndim */
  void *buf;    /* the transform buffer */
  void *buf2;   /* a bank's product buffer */
  void *spec;   /* nf spectra of ncx complex values each */
  void *work;   /* cuFFT's work area */
  /* r2c: real to complex (R2C, or D2Z in float64), c2r its inverse; c2c: 4-D only, the first
   * axis (C2C, or Z2Z) */
  cufftHandle r2c, c2r, c2c;
  int have_r2c, have_c2r, have_c2c;
  pthread_mutex_t lock; /* host-side sequence of one execute (the buffers are the plan's) */
  int lock_ok;
} state;

/* Sizes as 4-D, for reals of float64 (f64) or float32; 0 where a transform would not fit
 * cuFFT's limits. *bytes: the buffer. */
static int sizes(const ndf__problem *pb, int f64, state *s, size_t *bytes) {
  const ndf__corr *c = pb->params;
  const ndf_array *a = &pb->in;
  const int pad = D - a->ndim;
  double total = 1;
  for (int d = 0; d < D; d++) {
    const int q = d - pad;
    s->n[d] = q < 0 ? 1 : a->shape[q];
    s->k[d] = q < 0 ? 1 : c->k[q];
    s->left[d] = q < 0 ? 0 : c->left[q];
    s->mode[d] = q < 0 ? NDF_MODE_REFLECT : (int)c->mode[q];
    s->e[d] = s->n[d] + s->k[d] - 1;
    if (s->e[d] > INT_MAX / 2) return 0;
    /* no factors of 7: cuFFT's radix-7 passes are slow (a 2058^2 transform, 2 * 3 * 7^3, spends
     * 41 us of its ~80 in one 7-14-21 pass on an H200) */
    s->L[d] = ndf__next_smooth(s->e[d], 0);
    total *= d == D - 1 ? (double)(s->L[d] / 2 + 1) : (double)s->L[d];
  }
  s->rank = a->ndim;
  s->rs = 2 * (s->L[3] / 2 + 1);
  s->f64 = f64;
  s->es = f64 ? sizeof(double) : sizeof(float);
  const double cbytes = 2.0 * (double)s->es; /* per complex value */
  total *= cbytes;
  if (total > (double)(SIZE_MAX / 4) || total > (double)(INT64_MAX / 4)) return 0;
  s->ncx = (int64_t)(total / cbytes);
  s->bytes = *bytes = (size_t)total;
  return 1;
}

/* Device memory a plan takes, without cuFFT's work area: buffer(s) and spectra. */
static double plan_bytes(const ndf__corr *c, size_t bytes) {
  return (double)bytes * (1.0 + (c->nf > 1) + (double)c->nf);
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  state s;
  size_t bytes;
  return (!self->f64 || ndf__cuda_f64_native(pb, ctx)) && sizes(pb, self->f64, &s, &bytes);
}

/* One transform over the buffer of sizes L, of es-byte reals: cuFFT makes ~one pass over the
 * buffer per axis (two for an axis past 4096), each reading and writing it at ~2.2 TB/s (fitted
 * to H200 float32 profiles: 288^3 takes an r2c pass and two c2c passes of ~85-140 us each). */
static double fft_seconds(const int64_t L[4], double es, double bw) {
  double N = 1, passes = 0;
  for (int d = 0; d < D; d++) {
    N *= (double)L[d];
    if (L[d] > 1) passes += ceil(log2((double)L[d]) / 12.0);
  }
  return 4e-6 + N * 2.0 * es * passes / (2.2e12 * bw);
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  const ndf__corr *c = pb->params;
  state s;
  size_t bytes;
  /* Without cuFFT (cufft_load.c) auto takes any other solver; one named says why in make. */
  if (!sizes(pb, self->f64, &s, &bytes) || !ndf__cufft_load(NULL)) return INFINITY;
  const double N = (double)s.L[0] * (double)s.L[1] * (double)s.L[2] * (double)s.L[3];
  const double nf = (double)c->nf, n = (double)ndf_array_size(&pb->in), bw = ndf__bw_scale(ctx),
               es = (double)s.es, f = fft_seconds(s.L, es, bw), E = 3.5e12 * bw;
  /* pad (read n, write N reals), forward, per kernel: product (~3 N/2 complex), inverse, crop;
   * the element-wise passes at ~3.5 TB/s. Checked in float32 against H200 timings: 256^3 k7..17
   * 0.57-0.70 ms (model 0.59-0.70), 32x128^3 k5..11 4.0-4.7 ms (model 3.2-4.8). In float64 the
   * same model with 8-byte reals: every pass moves twice the bytes, and cuFFT's double
   * transforms, memory-bound as its single ones, run at about half their rate; not fitted. */
  return es * (n + N) / E + f + nf * (f + 3 * es * N / E + 2 * es * n / E + 6e-6);
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  if (s->have_r2c) cufftDestroy(s->r2c);
  if (s->have_c2r) cufftDestroy(s->c2r);
  if (s->have_c2c) cufftDestroy(s->c2c);
  cudaFree(s->buf);
  cudaFree(s->buf2);
  cudaFree(s->spec);
  cudaFree(s->work);
  if (s->lock_ok) pthread_mutex_destroy(&s->lock);
  free(s);
}

static const char *cufft_word(cufftResult r) {
  switch (r) {
  case CUFFT_ALLOC_FAILED: return "allocation failed";
  case CUFFT_INVALID_SIZE: return "invalid size";
  case CUFFT_INVALID_VALUE: return "invalid value";
  case CUFFT_EXEC_FAILED: return "execution failed";
  case CUFFT_SETUP_FAILED: return "setup failed";
  case CUFFT_INTERNAL_ERROR: return "internal error";
  case CUFFT_NOT_SUPPORTED: return "not supported";
  default: return "error";
  }
}

static ndf_status cufft_fail(const ndf_plan *p, cufftResult r, const char *what) {
  return ndf__fail(p->ctx, r == CUFFT_ALLOC_FAILED ? NDF_ENOMEM : NDF_ECUDA,
                   "%s: cuFFT %s: %s (%d)", p->solver->name, what, cufft_word(r), (int)r);
}

/* The complex transform along the first axis (4-D only), in direction dir, of buf in place. */
static cufftResult transform_c2c(const state *s, void *buf, int dir) {
  if (s->f64)
    return cufftExecZ2Z(s->c2c, (cufftDoubleComplex *)buf, (cufftDoubleComplex *)buf, dir);
  return cufftExecC2C(s->c2c, (cufftComplex *)buf, (cufftComplex *)buf, dir);
}

/* Forward (dir < 0) or inverse transform of buf in place. */
static cufftResult transform(const state *s, void *buf, int dir) {
  cufftResult r = CUFFT_SUCCESS;
  if (dir < 0) {
    r = s->f64 ? cufftExecD2Z(s->r2c, (cufftDoubleReal *)buf, (cufftDoubleComplex *)buf)
               : cufftExecR2C(s->r2c, (cufftReal *)buf, (cufftComplex *)buf);
    if (r == CUFFT_SUCCESS && s->have_c2c) r = transform_c2c(s, buf, CUFFT_FORWARD);
  } else {
    if (s->have_c2c) r = transform_c2c(s, buf, CUFFT_INVERSE);
    if (r == CUFFT_SUCCESS)
      r = s->f64 ? cufftExecZ2D(s->c2r, (cufftDoubleComplex *)buf, (cufftDoubleReal *)buf)
                 : cufftExecC2R(s->c2r, (cufftComplex *)buf, (cufftReal *)buf);
  }
  return r;
}

/* Kernel f's spectrum: bytes apart in spec. */
static void *spectrum(const state *s, int64_t f) { return (char *)s->spec + (size_t)f * s->bytes; }

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__corr *c = p->pb.params;
  state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  if (ndf_array_size(in) == 0) return NDF_OK;
  ndf_status r = NDF_OK;
  pthread_mutex_lock(&s->lock);
  cufftResult fr = cufftSetStream(s->r2c, st);
  if (fr == CUFFT_SUCCESS) fr = cufftSetStream(s->c2r, st);
  if (fr == CUFFT_SUCCESS && s->have_c2c) fr = cufftSetStream(s->c2c, st);
  if (fr != CUFFT_SUCCESS) {
    r = cufft_fail(p, fr, "set stream");
    goto done;
  }
  /* in is read whole by the pad, before anything is written (in may be out[0]). */
  ndf__contig g;
  int e = ndf__cuda_contig_begin(&g, in, (int)c->nf, out, st);
  /* the views are of the arrays' dtype: float32 staged (cuda_fft), float64 (cuda_fft64) */
  if (e == 0)
    e = ndf__launch_fft_pad(g.src, s->n, s->left, s->mode, c->cval, s->e, s->buf, s->L, s->rs,
                            s->f64, st);
  if (e == 0 && (fr = transform(s, s->buf, -1)) != CUFFT_SUCCESS) e = -1;
  for (int64_t f = 0; f < c->nf && e == 0; f++) {
    void *z = c->nf > 1 ? s->buf2 : s->buf;
    e = ndf__launch_fft_product(s->buf, spectrum(s, f), z, s->ncx, s->f64, st);
    if (e == 0 && (fr = transform(s, z, +1)) != CUFFT_SUCCESS) e = -1;
    if (e == 0) e = ndf__launch_fft_crop(z, s->L, s->rs, g.dst[f], s->n, s->f64, st);
  }
  const int cufft_failed = e < 0;
  e = ndf__cuda_contig_end(&g, cufft_failed ? (int)cudaErrorUnknown : e, out, st);
  if (cufft_failed)
    r = cufft_fail(p, fr, "transform");
  else if (e != 0)
    r = ndf__cuda_check(p->ctx, e, p->solver->name);
done:
  pthread_mutex_unlock(&s->lock);
  return r;
}

/* Makes the cuFFT plans (without work areas); *work: the largest work area they need. */
static cufftResult make_plans(state *s, size_t *work) {
  const int r = s->rank < 4 ? s->rank : 3;
  long long n[3], inem[3], onem[3];
  for (int d = 0; d < r; d++) {
    n[d] = s->L[D - r + d];
    inem[d] = onem[d] = n[d];
  }
  inem[r - 1] = s->rs;     /* real rows padded */
  onem[r - 1] = s->rs / 2; /* complex rows */
  long long rdist = 1, cdist = 1;
  for (int d = 0; d < r; d++) {
    rdist *= inem[d];
    cdist *= onem[d];
  }
  const long long batch = s->rank == 4 ? s->L[0] : 1;
  const cufftType r2c = s->f64 ? CUFFT_D2Z : CUFFT_R2C, c2r = s->f64 ? CUFFT_Z2D : CUFFT_C2R,
                  c2c = s->f64 ? CUFFT_Z2Z : CUFFT_C2C;
  size_t w1 = 0, w2 = 0, w3 = 0;
  cufftResult e = cufftCreate(&s->r2c);
  if (e == CUFFT_SUCCESS) {
    s->have_r2c = 1;
    e = cufftSetAutoAllocation(s->r2c, 0);
  }
  if (e == CUFFT_SUCCESS)
    e = cufftMakePlanMany64(s->r2c, r, n, inem, 1, rdist, onem, 1, cdist, r2c, batch, &w1);
  if (e == CUFFT_SUCCESS) e = cufftCreate(&s->c2r);
  if (e == CUFFT_SUCCESS) {
    s->have_c2r = 1;
    e = cufftSetAutoAllocation(s->c2r, 0);
  }
  if (e == CUFFT_SUCCESS)
    e = cufftMakePlanMany64(s->c2r, r, n, onem, 1, cdist, inem, 1, rdist, c2r, batch, &w2);
  if (e == CUFFT_SUCCESS && s->rank == 4) {
    /* along the first axis: L0 points cdist apart, one transform per point of a 3-D spectrum */
    long long n0 = s->L[0];
    e = cufftCreate(&s->c2c);
    if (e == CUFFT_SUCCESS) {
      s->have_c2c = 1;
      e = cufftSetAutoAllocation(s->c2c, 0);
    }
    if (e == CUFFT_SUCCESS)
      e = cufftMakePlanMany64(s->c2c, 1, &n0, &n0, cdist, 1, &n0, cdist, 1, c2c, cdist, &w3);
  }
  *work = w1 > w2 ? w1 : w2;
  if (w3 > *work) *work = w3;
  return e;
}

static ndf_status make(ndf_plan *p) {
  const ndf__corr *c = p->pb.params;
  const char *name = p->solver->name, *why;
  char what[48]; /* CUDA errors' context */
  snprintf(what, sizeof what, "%s plan", name);
  if (!ndf__cufft_load(&why))
    return ndf__fail(p->ctx, NDF_EUNSUPPORTED, "%s: cuFFT cannot be loaded: %s", name, why);
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of host memory", name);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  p->native = p->solver->f64; /* cuda_fft64 takes its float64 device arrays as they are */
  if (pthread_mutex_init(&s->lock, NULL))
    return ndf__fail(p->ctx, NDF_ENOMEM, "%s: cannot make a mutex", name);
  s->lock_ok = 1;
  size_t bytes;
  if (!sizes(&p->pb, p->solver->f64, s, &bytes))
    return ndf__fail(p->ctx, NDF_EUNSUPPORTED, "%s: the transform is too large", name);
  cudaError_t ce = cudaSetDevice(p->ctx->place.device);
  if (ce != cudaSuccess) return ndf__cuda_check(p->ctx, (int)ce, what);

  size_t work = 0;
  cufftResult fr = make_plans(s, &work);
  if (fr != CUFFT_SUCCESS) return cufft_fail(p, fr, "plan");
  /* Say how much memory it needs before failing for the lack of it. */
  const double need = plan_bytes(c, bytes) + (double)work;
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && need > (double)free_b)
    return ndf__fail(p->ctx, NDF_ENOMEM,
                     "%s: needs %.0f bytes of device memory (transform buffers and %lld "
                     "spectra of %zu bytes, cuFFT work area %zu), %zu are free; the direct "
                     "method needs none",
                     name, need, (long long)c->nf, bytes, work, free_b);
  ndf_status ws = ndf__workspace_check(p->ctx, name, need);
  if (ws != NDF_OK) return ws;
  const size_t nf = (size_t)c->nf;
  ce = cudaMalloc(&s->buf, bytes);
  if (ce == cudaSuccess && nf > 1) ce = cudaMalloc(&s->buf2, bytes);
  if (ce == cudaSuccess) ce = cudaMalloc(&s->spec, nf * bytes);
  if (ce == cudaSuccess && work) ce = cudaMalloc(&s->work, work);
  if (ce == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of device memory (needs %.0f bytes)", name, need);
  if (ce != cudaSuccess) return ndf__cuda_check(p->ctx, (int)ce, what);
  fr = cufftSetWorkArea(s->r2c, s->work);
  if (fr == CUFFT_SUCCESS) fr = cufftSetWorkArea(s->c2r, s->work);
  if (fr == CUFFT_SUCCESS && s->have_c2c) fr = cufftSetWorkArea(s->c2c, s->work);
  if (fr != CUFFT_SUCCESS) return cufft_fail(p, fr, "work area");

  /* The kernels' spectra, on the legacy default stream (synchronous with the copies): each
   * kernel, scaled, in the plan's reals (float64 for cuda_fft64), zero-padded by the same pad as
   * the input (constant mode, cval 0). */
  const int64_t nw = c->nw;
  const size_t wbytes = (size_t)nw * s->es;
  void *hw = malloc(wbytes);
  void *dw = NULL;
  if (!hw) return ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of host memory", name);
  const double scale =
      1.0 / ((double)s->L[0] * (double)s->L[1] * (double)s->L[2] * (double)s->L[3]);
  const int64_t zero[D] = {0, 0, 0, 0};
  const int cmode[D] = {NDF_MODE_CONSTANT, NDF_MODE_CONSTANT, NDF_MODE_CONSTANT, NDF_MODE_CONSTANT};
  ce = cudaMalloc(&dw, wbytes);
  int e = (int)ce;
  for (size_t f = 0; f < nf && e == 0; f++) {
    const double *w = c->w + f * (size_t)nw;
    for (int64_t j = 0; j < nw; j++) {
      if (s->f64)
        ((double *)hw)[j] = w[j] * scale;
      else
        ((float *)hw)[j] = (float)(w[j] * scale);
    }
    e = (int)cudaMemcpy(dw, hw, wbytes, cudaMemcpyHostToDevice);
    if (e == 0)
      e = ndf__launch_fft_pad(dw, s->k, zero, cmode, 0.0, s->k, s->buf, s->L, s->rs, s->f64, 0);
    if (e == 0) {
      fr = cufftSetStream(s->r2c, 0);
      if (fr == CUFFT_SUCCESS && s->have_c2c) fr = cufftSetStream(s->c2c, 0);
      if (fr == CUFFT_SUCCESS) fr = transform(s, s->buf, -1);
      if (fr != CUFFT_SUCCESS) e = -1;
    }
    if (e == 0)
      e = (int)cudaMemcpy(spectrum(s, (int64_t)f), s->buf, bytes, cudaMemcpyDeviceToDevice);
  }
  free(hw);
  cudaFree(dw);
  if (e < 0) return cufft_fail(p, fr, "kernel transform");
  if (e == 0) e = (int)cudaDeviceSynchronize();
  return ndf__cuda_check(p->ctx, e, what);
}

const ndf__solver ndf__cuda_fft = {.name = "cuda_fft",
                                   .op = NDF__OP_CORRELATE,
                                   .place = NDF_PLACE_CUDA,
                                   .applicable = applicable,
                                   .cost = cost,
                                   .make = make,
                                   .finite_only = ndf__always_finite_only};

const ndf__solver ndf__cuda_fft64 = {.name = "cuda_fft64",
                                     .op = NDF__OP_CORRELATE,
                                     .place = NDF_PLACE_CUDA,
                                     .applicable = applicable,
                                     .cost = cost,
                                     .make = make,
                                     .finite_only = ndf__always_finite_only,
                                     .f64 = 1};
