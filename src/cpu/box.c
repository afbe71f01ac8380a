/* box.c - cpu_box: separable filters whose weights along each filtered axis are one value (a
 * box: scipy's uniform_filter), by running sums, at a cost that does not grow with the box.
 *
 * A pass along axis a sees the array as [P][L][Q] (Q: the product of the axes after a) and
 * takes a block of up to QB columns of one p at a time: the block's lines, extended by the
 * axis's mode, go into a float64 buffer, and the window slides down them, each output adding
 * the sample that enters and dropping the one that leaves, in float64 as scipy's
 * uniform_filter1d sums, times the weight. Reads and writes run along rows of the block, which
 * are contiguous. Passes go in increasing axis order through float32 arrays, as cpu_sep's.
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

enum { QB = 32 }; /* columns a task */

typedef struct {
  float *tmp[2];      /* full-size float32 temporaries */
  double *ext;        /* per thread: the block's extended lines */
  size_t ext_doubles; /* per thread */
  int threads;
  pthread_mutex_t lock; /* the temporaries serve one call at a time */
} state;

/* The value of the box along each filtered axis (all its weights are it), or 0 if some axis's
 * weights differ. */
static int box_weights(const ndf__sep *c, double *v) {
  for (int k = 0; k < c->naxes; k++) {
    const double *w = c->w + c->ax[k].off;
    for (int64_t j = 1; j < c->ax[k].n; j++)
      if (w[j] != w[0]) return 0;
    v[k] = w[0];
  }
  return 1;
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  double v[NDF_MAX_DIMS];
  const ndf__sep *c = pb->params;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST &&
         box_weights(c, v);
}

/* ~3 float64 adds and two conversions an element and pass (about 1.5 ns a core), plus a read
 * and a write per pass at ~10 GB/s a core: the box's length does not count. */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  const double n = (double)ndf_array_size(&pb->in);
  return n * (double)c->naxes * (1.5e-9 + 8.0 / 10e9) / ctx->threads;
}

static int finite_only(const ndf__problem *pb) {
  (void)pb;
  return 1;
}

/* The qb columns from in (rows Q apart) of extended row r (input row r - left) into e. */
static inline void fill_row(double *e, const float *in, int64_t r, int64_t L, int64_t Q, int64_t qb,
                            const ndf__sepaxis *ax, double cval) {
  const int64_t i = r - ax->left >= 0 && r - ax->left < L
                        ? r - ax->left
                        : ndf__map_index(r - ax->left, L, ax->mode);
  if (i < 0)
    for (int64_t q = 0; q < qb; q++)
      e[q] = cval;
  else
    for (int64_t q = 0; q < qb; q++)
      e[q] = in[i * Q + q];
}

/* One pass along ax of the [P][L][Q] float32 array src into dst, the box's value v: a task is
 * a block of up to QB columns of one p (a line, when Q is 1). */
static void pass(const state *s, const float *src, float *dst, int64_t P, int64_t L, int64_t Q,
                 const ndf__sepaxis *ax, double v, double cval) {
  const int64_t n = ax->n, E = L + n, nq = (Q + QB - 1) / QB;
#pragma omp parallel for num_threads(s->threads) schedule(static)
  for (int64_t task = 0; task < P * nq; task++) {
    const int64_t p = task / nq, q0 = task % nq * QB, qb = Q - q0 < QB ? Q - q0 : QB;
    double *ext = s->ext + (size_t)omp_get_thread_num() * s->ext_doubles;
    const float *in = src + p * L * Q + q0;
    float *out = dst + p * L * Q + q0;
    for (int64_t r = 0; r < E; r++)
      fill_row(ext + r * qb, in, r, L, Q, qb, ax, cval);
    if (qb == 1) { /* one column (a line, when Q is 1): scalar */
      double acc = 0;
      for (int64_t r = 0; r < n; r++)
        acc += ext[r];
      for (int64_t i = 0; i < L; i++) {
        out[i * Q] = (float)(acc * v);
        acc += ext[i + n] - ext[i];
      }
      continue;
    }
    double acc[QB];
    for (int64_t q = 0; q < qb; q++)
      acc[q] = 0;
    for (int64_t r = 0; r < n; r++)
      for (int64_t q = 0; q < qb; q++)
        acc[q] += ext[r * qb + q];
    for (int64_t i = 0; i < L; i++) {
      const double *enter = ext + (i + n) * qb, *leave = ext + i * qb;
      for (int64_t q = 0; q < qb; q++) {
        out[i * Q + q] = (float)(acc[q] * v);
        acc[q] += enter[q] - leave[q];
      }
    }
  }
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sep *c = p->pb.params;
  state *s = p->state;
  const int T = s->threads;
  double v[NDF_MAX_DIMS];
  box_weights(c, v);
  pthread_mutex_lock(&s->lock);
  const int64_t N = ndf_array_size(in);
  float *src = s->tmp[0];
#pragma omp parallel for num_threads(T) schedule(static)
  for (int64_t i = 0; i < N; i++)
    src[i] = (float)ndf__load(in->dtype, in->data, ndf__offset(in, i));
  int next = 1;
  for (int k = 0; k < c->naxes; k++) {
    const int a = c->ax[k].axis;
    int64_t P = 1, Q = 1;
    for (int d = 0; d < a; d++)
      P *= in->shape[d];
    for (int d = a + 1; d < in->ndim; d++)
      Q *= in->shape[d];
    pass(s, src, s->tmp[next], P, in->shape[a], Q, &c->ax[k], v[k], c->cval);
    src = s->tmp[next];
    next ^= 1;
  }
#pragma omp parallel for num_threads(T) schedule(static)
  for (int64_t i = 0; i < N; i++)
    ndf__store(out->dtype, out->data, ndf__offset(out, i), src[i]);
  pthread_mutex_unlock(&s->lock);
  return NDF_OK;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  free(s->tmp[0]);
  free(s->tmp[1]);
  free(s->ext);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static ndf_status make(ndf_plan *p) {
  const ndf__sep *c = p->pb.params;
  const ndf_array *in = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->threads = p->ctx->threads;
  int64_t E = 1;
  for (int k = 0; k < c->naxes; k++) {
    const int64_t e = in->shape[c->ax[k].axis] + c->ax[k].n; /* the last step reads one more */
    E = e > E ? e : E;
  }
  s->ext_doubles = (size_t)E * QB;
  const double full = (double)ndf_array_size(in) * sizeof(float),
               ext = (double)s->ext_doubles * sizeof(double) * s->threads;
  if (full > 0x1p62 || ext > 0x1p62)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory (%.3g bytes)", full + ext);
  s->tmp[0] = malloc((size_t)full);
  s->tmp[1] = malloc((size_t)full);
  s->ext = malloc((size_t)ext);
  if (!s->tmp[0] || !s->tmp[1] || !s->ext)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_box: out of host memory (%.3g bytes)",
                     2 * full + ext);
  return NDF_OK;
}

const ndf__solver ndf__cpu_box = {.name = "cpu_box",
                                  .op = NDF__OP_SEPFILTER,
                                  .place = NDF_PLACE_HOST,
                                  .applicable = applicable,
                                  .cost = cost,
                                  .make = make,
                                  .finite_only = finite_only};
