/* SPDX-License-Identifier: BSD-3-Clause */
/* sep.c - cpu_sep: separable filtering on the CPU, one cache-friendly pass per axis.
 *
 * Every pass reads one float32 C-contiguous array and writes another. Three kinds:
 * - plane: along a slow axis a, the array as [P][L][Q] with Q = the product of the
 *   axes after a; each output row of Q values is a weighted sum of input rows, so
 *   the inner loop runs along contiguous memory and the compiler vectorises it.
 *   Work is split in (p, block of i, block of q) tasks that keep their rows in cache.
 * - row: along the last axis; each line is copied with its extension into a
 *   buffer and filtered there.
 * - yx: the last two axes fused: per output row, the column filter over the
 *   input rows (a plane pass of one row) goes straight into the line buffer, and
 *   the row filter reads it from cache, so the pair costs one read and one write
 *   of the array instead of two of each.
 * Outputs are computed four vectors at a time in registers, one load per FMA; the column
 * filters do two output rows at a time, one load per two FMAs.
 * A float64 input is computed in float64 (as scipy computes), any other in float32: the loops
 * are written once over their precision (sep_lines.h). Inputs other than C-contiguous in that
 * precision are converted first; outputs other than that are written through a temporary and
 * converted last. */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"
#include "host.h"

/* Compile the hot loops for AVX-512, AVX2+FMA and the baseline; the loader
 * picks the best the CPU has (GCC function multiversioning). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 &&           \
    !defined(__SANITIZE_ADDRESS__)
#define NDF_VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NDF_VEC
#endif

enum {
  QB = 1024, /* plane pass: values of a row per task */
  IB = 64    /* plane pass: output rows per task */
};

typedef struct {
  float *w_f32;         /* all weights, at each axis's off: in float32 */
  double *w_f64;        /* and float64 (a float64 input's) */
  int f64;              /* the plan computes in float64 */
  void *tmp[2];         /* full-size temporaries */
  char *scratch;        /* per thread: line buffers, cval row, row pointers */
  size_t scratch_bytes; /* per thread */
  int64_t line_len;     /* line buffer length */
  int threads;
  pthread_mutex_t lock; /* the temporaries serve one call at a time */
} state;

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi" /* the vectors never cross a public ABI */
#endif

#define NDF__PRECISION_BODY "sep_lines.h"
#include "precisions.h"

/* ------------------------------------------------------------------ solver */

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  double taps = 0;
  for (int k = 0; k < c->naxes; k++)
    taps += (double)c->ax[k].n;
  /* ~16 FMA per ns per core, plus a read and a write per pass at ~10 GB/s per core */
  /* float64 (a float64 input's): half the lanes, twice the bytes */
  const double f64 = pb->in.dtype == NDF_F64 ? 2.0 : 1.0;
  double n = (double)ndf_array_size(&pb->in);
  return n * f64 * (taps / 16e9 + 8.0 * (c->naxes + 1) / 10e9) / ctx->threads;
}

/* The passes of c: the last two axes fuse when both are filtered. */
static int passes(const ndf__sep *c, int ndim, int kind[NDF_MAX_DIMS], int first[NDF_MAX_DIMS]) {
  int np = 0;
  for (int k = 0; k < c->naxes; k++) {
    int a = c->ax[k].axis;
    first[np] = k;
    if (a == ndim - 2 && k + 1 < c->naxes && c->ax[k + 1].axis == ndim - 1) {
      kind[np++] = 2; /* yx */
      k++;
    } else {
      kind[np++] = a == ndim - 1; /* 1 row, 0 plane */
    }
  }
  return np;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sep *c = p->pb.params;
  state *s = p->state;
  int kind[NDF_MAX_DIMS], first[NDF_MAX_DIMS];
  const int np = passes(c, in->ndim, kind, first);
  if (np == 0) { /* a copy with conversion; out == in is a no-op */
    if (in->data == out->data) return NDF_OK;
    const int64_t n = ndf_array_size(in);
#pragma omp parallel for num_threads(s->threads) schedule(static)
    for (int64_t i = 0; i < n; i++)
      ndf__store(out->dtype, out->data, ndf__offset(out, i),
                 ndf__load(in->dtype, in->data, ndf__offset(in, i)));
    return NDF_OK;
  }
  pthread_mutex_lock(&s->lock);
  if (s->f64)
    run_f64(s, c, in, out, np, kind, first);
  else
    run_f32(s, c, in, out, np, kind, first);
  pthread_mutex_unlock(&s->lock);
  return NDF_OK;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  free(s->w_f32);
  free(s->w_f64);
  free(s->tmp[0]);
  free(s->tmp[1]);
  free(s->scratch);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static ndf_status make(ndf_plan *p) {
  const ndf__sep *c = p->pb.params;
  const ndf_array *in = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_sep: out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->threads = p->ctx->threads;
  int64_t nw = 0, maxn = 1;
  for (int k = 0; k < c->naxes; k++) {
    nw += c->ax[k].n;
    if (c->ax[k].n > maxn) maxn = c->ax[k].n;
  }
  /* a float64 input is computed in float64, as scipy computes it */
  s->f64 = in->dtype == NDF_F64;
  const size_t es = s->f64 ? sizeof(double) : sizeof(float);
  const int64_t X = in->shape[in->ndim - 1];
  s->line_len = (X + maxn + 15) / 16 * 16;
  s->scratch_bytes =
      ((size_t)(2 * s->line_len + QB) * es + (size_t)(maxn + 1) * sizeof(void *) + 63) / 64 * 64;
  const size_t full = (size_t)ndf_array_size(in) * es;
  /* sizes past what any machine holds are out of memory, never a wrapped count */
  if ((double)s->scratch_bytes * s->threads > 0x1p62 || (double)nw * sizeof(double) > 0x1p62)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_sep: out of host memory (%.3g bytes of scratch)",
                     (double)s->scratch_bytes * s->threads);
  s->w_f32 = malloc((size_t)(nw ? nw : 1) * sizeof(float));
  s->w_f64 = malloc((size_t)(nw ? nw : 1) * sizeof(double));
  s->scratch = malloc(s->scratch_bytes * (size_t)s->threads);
  int kind[NDF_MAX_DIMS], first[NDF_MAX_DIMS];
  const int np = passes(c, in->ndim, kind, first);
  /* Two temporaries, allocated now; their pages are touched only by the
   * calls that use them (conversions, in place, more than one pass). */
  for (int t = 0; t < 2 && np > 0; t++)
    s->tmp[t] = malloc(full);
  if (!s->w_f32 || !s->w_f64 || !s->scratch || (np > 0 && (!s->tmp[0] || !s->tmp[1])))
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_sep: out of host memory (%zu bytes per temporary)",
                     full);
  for (int64_t j = 0; j < nw; j++) {
    s->w_f32[j] = (float)c->w[j];
    s->w_f64[j] = c->w[j];
  }
  return NDF_OK;
}

const ndf__solver ndf__cpu_sep = {.name = "cpu_sep",
                                  .op = NDF__OP_SEPFILTER,
                                  .place = NDF_PLACE_HOST,
                                  .applicable = applicable,
                                  .cost = cost,
                                  .make = make,
                                  .f64 = 1};
