/* SPDX-License-Identifier: BSD-3-Clause */
/* box.c - cpu_box: separable filters whose weights along each filtered axis are one value (a
 * box: scipy's uniform_filter), by running sums, at a cost that does not grow with the box.
 *
 * A pass along axis a sees the array as [P][L][Q] (Q: the product of the axes after a) and
 * takes a block of up to QB columns of one p at a time: the window slides down the block's
 * lines, each output adding the row that enters and dropping the one that leaves (read where
 * they lie; past the ends, the row the mode gives, or cval's), in float64 as scipy's
 * uniform_filter1d sums, times the weight. Reads and writes run along rows of the block, which
 * are contiguous. Passes go in increasing axis order through float32 arrays (float64 for a
 * float64 input: box_pass.h, written once over its precision), as cpu_sep's.
 *
 * A running sum carries a NaN or Inf to the end of its line (Inf - Inf), where the direct sum
 * reaches only the window: the solver is finite-only, and auto runs cpu_sep on inputs that
 * hold them. */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"
#include "host.h"

enum { QB = 64 }; /* columns a task */

typedef struct {
  void *tmp[2];           /* full-size temporaries: float32, float64 for a float64 input */
  int f64;                /* the plan's arrays between passes are float64 */
  double v[NDF_MAX_DIMS]; /* the box's value along each filtered axis */
  int threads;
  pthread_mutex_t lock; /* the temporaries serve one call at a time */
} state;

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  double v[NDF_MAX_DIMS];
  const ndf__sep *c = pb->params;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST &&
         ndf__sep_box(c, v);
}

/* Two compensated float64 additions an element and pass (about 3.2 ns a core), plus a read and
 * a write per pass at ~10 GB/s a core: the box's length does not count. Measured (256^3
 * float32, three axes, 2 cores): cpu_box 83 ms at any size; cpu_sep 12 ms at size 9, 37 at 31,
 * 133 at 101, so they cross near size 60. cpu_sep's model reads about twice its times; with
 * this one the choice falls near size 47. */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  const double n = (double)ndf_array_size(&pb->in);
  return n * (double)c->naxes * (3.2e-9 + 8.0 / 10e9) / ctx->threads;
}

static int finite_only(const ndf__problem *pb) {
  (void)pb;
  return 1;
}

/* *sum += x, what the rounding lost added to *err (Knuth's TwoSum): a running sum that keeps
 * small values a large one passed over, which a plain one loses once the large one leaves. */
static inline void two_add(double *sum, double *err, double x) {
  const double t = *sum + x, z = t - *sum;
  *err += (*sum - (t - z)) + (x - z);
  *sum = t;
}

#define NDF__PRECISION_BODY "box_pass.h"
#include "precisions.h"

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  state *s = p->state;
  pthread_mutex_lock(&s->lock);
  if (s->f64)
    run_f64(p, s, in, out);
  else
    run_f32(p, s, in, out);
  pthread_mutex_unlock(&s->lock);
  return NDF_OK;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  free(s->tmp[0]);
  free(s->tmp[1]);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static ndf_status make(ndf_plan *p) {
  const ndf_array *in = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->threads = p->ctx->threads;
  ndf__sep_box(p->pb.params, s->v);
  s->f64 = in->dtype == NDF_F64;
  const double full = (double)ndf_array_size(in) * (s->f64 ? sizeof(double) : sizeof(float));
  if (full > 0x1p62)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory (%.3g bytes)", full);
  s->tmp[0] = malloc((size_t)full);
  s->tmp[1] = malloc((size_t)full);
  if (!s->tmp[0] || !s->tmp[1])
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory (%.3g bytes)", 2 * full);
  return NDF_OK;
}

const ndf__solver ndf__cpu_box = {.name = "cpu_box",
                                  .op = NDF__OP_SEPFILTER,
                                  .place = NDF_PLACE_HOST,
                                  .applicable = applicable,
                                  .cost = cost,
                                  .make = make,
                                  .finite_only = finite_only,
                                  .f64 = 1};
