/* SPDX-License-Identifier: BSD-3-Clause */
/* fft.c - cpu_fft for N-dimensional correlation, by FFTW (threaded; single precision, or
 * double for a float64 input where FFTW's double library is there: fft_body.h, written once
 * over both). The input is copied into an array extended by the kernel on every axis, the modes
 * applied there, exactly as cpu_direct does (direct.c); what is left is the "valid"
 * correlation out[i] = sum_j w[j] * E[i + j]. Both E and the reversed kernel are zero-padded
 * to L[d] >= n[d] + k[d] - 1 points per axis (2-3-5-7-smooth, sizes FFTW does quickly), so
 * the circular convolution of the two equals the linear one where we read it, at offset
 * k[d] - 1. The kernel's spectrum, scaled by 1 / prod(L), is made once per plan; an execute
 * is a copy in, a forward transform, a complex product, an inverse transform and a copy out,
 * in place in one buffer of the plan (r2c layout: the last axis padded to 2 * (L/2 + 1)).
 * Arrays are seen as 4-D with leading axes of length 1, as in direct.c. */
#ifdef NDF_HAVE_FFTW
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <fftw3.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"

#define D NDF_MAX_DIMS

/* FFTW's planner (and plan destruction) shares global state and is not thread-safe; plans of
 * different ndf contexts may be made at once, so every call into it holds this lock. */
static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER;

/* The problem's sizes as 4-D (leading axes of length 1, kernel length 1). Returns 0 where a
 * transform size does not fit FFTW's int or the buffer's size overflows; *bytes is then the
 * buffer's size in bytes (the spectrum takes as much again), of complex samples of 2 es bytes. */
static int sizes(const ndf__problem *pb, int64_t n[D], int64_t k[D], int64_t e[D], int64_t L[D],
                 size_t es, size_t *bytes) {
  const ndf__corr *c = pb->params;
  const ndf_array *a = &pb->in;
  const int pad = D - a->ndim;
  double total = 1;
  for (int d = 0; d < D; d++) {
    n[d] = d < pad ? 1 : a->shape[d - pad];
    k[d] = d < pad ? 1 : c->k[d - pad];
    e[d] = n[d] + k[d] - 1;
    if (e[d] > INT_MAX / 2) return 0;
    L[d] = ndf__next_smooth(e[d], 1);
    if (L[d] > INT_MAX) return 0;
    total *= d == D - 1 ? (double)(L[d] / 2 + 1) : (double)L[d];
  }
  total *= 2 * (double)es;
  if (total > (double)(SIZE_MAX / 4) || total > (double)(INT64_MAX / 4)) return 0;
  *bytes = (size_t)total;
  return 1;
}

/* The work precision's sample size: double for a float64 input where FFTW's double library is
 * there, else float. */
static size_t work_size(const ndf__problem *pb) {
#ifdef NDF_HAVE_FFTW_F64
  if (pb->in.dtype == NDF_F64) return sizeof(double);
#endif
  (void)pb;
  return sizeof(float);
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  int64_t n[D], k[D], e[D], L[D];
  size_t bytes;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST &&
         sizes(pb, n, k, e, L, work_size(pb), &bytes);
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  int64_t n[D], k[D], e[D], L[D];
  size_t bytes;
  if (!sizes(pb, n, k, e, L, work_size(pb), &bytes)) return INFINITY;
  const double N = (double)L[0] * (double)L[1] * (double)L[2] * (double)L[3];
  const double nf = (double)((const ndf__corr *)pb->params)->nf;
  /* A transform ~1.25 ns per point and level per thread, 1 + nf of them, nf products; plus
   * the copies in (of the padded buffer) and out (of the arrays). */
  return (N * ((1 + nf) * log2(N) * 1.25e-9 + nf * 2e-9 + 2e-9) +
          (double)ndf_array_size(&pb->in) * 2e-9 * nf) /
         ctx->threads;
}

/* FFTW_ESTIMATE's threaded plans are sometimes very slow at some sizes and thread counts: a
 * 108^3 r2c took 32 ms with 16 threads and 1.4 ms with 8 on a 16-core machine (112^3 alike,
 * 105^3 and 120^3 not), and FFTW_MEASURE, which avoids that, plans for about a second. So the
 * plans are made for the context's thread count T and for T / 2, one forward and one inverse
 * transform of each is timed, and the faster pair is kept; the choice is remembered for the
 * process (per precision, rank, sizes and T), so later plans of that size make one pair only.
 * Called with s->buf allocated; leaves it dirty. */
#define NDF__FFT_MEMO 64
static struct { int f64, rank, dims[D], threads, best; } memo[NDF__FFT_MEMO];
static unsigned memo_n; /* entries used; then the ring's next slot is memo_n % NDF__FFT_MEMO */

#define R float
#define X(name) name##_f32
#define FW(name) fftwf_##name
#include "fft_body.h"
#undef R
#undef X
#undef FW
#ifdef NDF_HAVE_FFTW_F64
#define R double
#define X(name) name##_f64
#define FW(name) fftw_##name
#include "fft_body.h"
#undef R
#undef X
#undef FW
#define NDF__FFT_F64 1
#else
#define NDF__FFT_F64 0
#endif

static ndf_status make(ndf_plan *p) {
#ifdef NDF_HAVE_FFTW_F64
  if (p->pb.in.dtype == NDF_F64) return make_f64(p);
#endif
  return make_f32(p);
}

const ndf__solver ndf__cpu_fft = {.name = "cpu_fft",
                                  .op = NDF__OP_CORRELATE,
                                  .place = NDF_PLACE_HOST,
                                  .applicable = applicable,
                                  .cost = cost,
                                  .make = make,
                                  .finite_only = ndf__always_finite_only,
                                  .f64 = NDF__FFT_F64};

#endif /* NDF_HAVE_FFTW */
