/* SPDX-License-Identifier: BSD-3-Clause */
/* slab.c - plans on host arrays whose work does not fit the memory they may use (the GPU's, or
 * the context's memory_limit), run a slab of the slowest axis at a time. A slab is a range of
 * output rows; its buffer holds those rows and the filter's reach of rows on either side (from
 * the other end on a wrap axis), a plan of the buffer's shape filters it, and the slab's own
 * rows are copied out. Every buffer has the same length, the first and last slabs reading
 * further in, where the array's true edges are the buffer's and the filter applies the mode
 * itself: one plan per worker serves every slab, and each output row is computed from the
 * same input rows as in memory.
 *
 * Workers take the next slab from a shared counter. Each owns a context (on a GPU, with a
 * stream of its own), its plan and its buffers (page-locked on a GPU, which the plan's staging
 * copies from and to directly): on a GPU two workers alternate, one copying rows on the CPU
 * while the other's slab crosses the bus and is filtered. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "elem.h"
#include "internal.h"

typedef struct {
  ndf_context *ctx;
  ndf_plan *plan;
  ndf_array ins[1 + NDF__MAX_OPS]; /* the buffers: the image's, the operands' */
  ndf_array *out;                  /* the outputs' (a bank's nout) */
  struct ndf__slabs *S;
  pthread_t thread;
} worker;

struct ndf__slabs {
  int64_t N;       /* rows of axis 0 */
  int64_t L;       /* rows a buffer holds */
  int64_t rows;    /* output rows a slab gives (the last may give fewer) */
  int64_t lo;      /* reach before an output row (the buffer's rows past `rows` the rest) */
  int wrap;        /* axis 0 wraps: every buffer reads lo rows before and hi after, cyclically */
  int nw, threads; /* workers; CPU threads each */
  int nout, nops;
  ndf_context *ctx; /* the plan's */
  worker *w;
  /* one execute's */
  const ndf_array *in, *ops;
  ndf_array *out;
  int64_t next;
  ndf_status st;
  pthread_mutex_t lock; /* next and st */
  pthread_mutex_t run;  /* held by an execute: the workers and buffers serve one at a time */
};

/* Rows of axis 0 an output row reads before (lo) and after (hi) itself, and whether axis 0
 * wraps; 0 where the filter cannot run in slabs (a recursive filter, whose reach is the line,
 * a ks without a bound on its radii or with the full output extent). */
static int reach(const ndf__problem *pb, int64_t *lo, int64_t *hi, int *wrap) {
  ndf_mode m = NDF_MODE_NEAREST;
  *lo = *hi = 0;
  switch (pb->op) {
  case NDF__OP_SEPFILTER: {
    const ndf__sep *c = pb->params;
    for (int i = 0; i < c->naxes; i++)
      if (c->ax[i].axis == 0) {
        *lo = c->ax[i].left;
        *hi = c->ax[i].n - 1 - c->ax[i].left;
        m = c->ax[i].mode;
      }
    break;
  }
  case NDF__OP_CORRELATE: {
    const ndf__corr *c = pb->params;
    *lo = c->left[0];
    *hi = c->k[0] - 1 - c->left[0];
    m = c->mode[0];
    break;
  }
  case NDF__OP_RANK: {
    const ndf__rank *r = pb->params;
    const int d = NDF_MAX_DIMS - pb->in.ndim;
    *lo = r->left[d];
    *hi = r->k[d] - 1 - r->left[d];
    m = r->mode[d];
    break;
  }
  case NDF__OP_KS: {
    const ndf__ksp *k = pb->params;
    const int64_t R = ndf__ks_bound(pb);
    if (R < 0 || k->extent != NDF_KS_SAME || k->nsig == 0 || !pb->nops) return 0;
    *lo = *hi = R;
    break;
  }
  default: return 0;
  }
  /* a reach past the axis counts from the other end under every mode but wrap's */
  *lo = *lo < 0 ? 0 : *lo;
  *hi = *hi < 0 ? 0 : *hi;
  *wrap = m == NDF_MODE_WRAP;
  return 1;
}

/* The work dtype of a buffer for an array of dtype t: float64 stays, the rest is float32 (what
 * the solvers compute in; integers convert exactly, as the solvers read them). */
static ndf_dtype work_dtype(ndf_dtype t) { return t == NDF_F64 ? NDF_F64 : NDF_F32; }

/* a's rows [r, r + n) as an array of n rows (r + n <= its rows). */
static ndf_array rows_of(const ndf_array *a, int64_t r, int64_t n) {
  ndf_array v = *a;
  v.shape[0] = n;
  v.data = (char *)a->data + r * a->strides[0] * (int64_t)ndf_dtype_size(a->dtype);
  return v;
}

/* n rows from src (from row s, cyclically over its N rows) into dst (from row d), converted
 * to dst's dtype, split over threads by rows. */
static void copy_rows(const ndf_array *src, int64_t s, int64_t N, const ndf_array *dst, int64_t d,
                      int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    const ndf_array a = rows_of(src, (s + i) % N, 1), b = rows_of(dst, d + i, 1);
    const int64_t m = ndf_array_size(&a);
    if (a.dtype == b.dtype && ndf__is_contiguous(&a) && ndf__is_contiguous(&b)) {
      memcpy(b.data, a.data, (size_t)m * ndf_dtype_size(a.dtype));
      continue;
    }
    ndf__walker wa, wb;
    ndf__walk_at(&wa, &a, 0);
    ndf__walk_at(&wb, &b, 0);
    for (int64_t j = 0; j < m; j++, ndf__walk_next(&wa, &a), ndf__walk_next(&wb, &b))
      ndf__store(b.dtype, b.data, wb.off, ndf__load(a.dtype, a.data, wa.off));
  }
}

/* Slab k's first output row z0 and count, and the first row its buffer reads (a, possibly
 * negative under wrap, taken modulo N). */
static void slab_rows(const struct ndf__slabs *S, int64_t k, int64_t *z0, int64_t *nz, int64_t *a) {
  *z0 = k * S->rows;
  *nz = S->N - *z0 < S->rows ? S->N - *z0 : S->rows;
  *a = *z0 - S->lo;
  if (!S->wrap) { /* the first and last buffers read further in */
    if (*a > S->N - S->L) *a = S->N - S->L;
    if (*a < 0) *a = 0;
  }
}

/* The first failure stops the workers; its message goes to the plan's context. */
static void fail(struct ndf__slabs *S, ndf_status st, const ndf_context *from) {
  pthread_mutex_lock(&S->lock);
  if (S->st == NDF_OK) {
    S->st = st;
    ndf__fail(S->ctx, st, "%s", ndf_context_message(from));
  }
  pthread_mutex_unlock(&S->lock);
}

static void *work(void *v) {
  worker *w = v;
  struct ndf__slabs *S = w->S;
  const int64_t nslabs = (S->N + S->rows - 1) / S->rows;
  for (;;) {
    pthread_mutex_lock(&S->lock);
    const int64_t k = S->st == NDF_OK && S->next < nslabs ? S->next++ : -1;
    pthread_mutex_unlock(&S->lock);
    if (k < 0) break;
    int64_t z0, nz, a;
    slab_rows(S, k, &z0, &nz, &a);
    const int64_t from = ((a % S->N) + S->N) % S->N;
    copy_rows(S->in, from, S->N, &w->ins[0], 0, S->L, S->threads);
    for (int j = 0; j < S->nops; j++)
      copy_rows(&S->ops[j], from, S->N, &w->ins[1 + j], 0, S->L, S->threads);
    ndf_status st = ndf_execute_n(w->plan, 1 + S->nops, w->ins, S->nout, w->out);
    if (st != NDF_OK) {
      fail(S, st, w->ctx);
      break;
    }
    for (int f = 0; f < S->nout; f++)
      copy_rows(&w->out[f], z0 - a, S->L, &S->out[f], z0, nz, S->threads);
  }
  return NULL;
}

ndf_status ndf__slabs_execute(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                              ndf_array *out, int same) {
  struct ndf__slabs *S = p->slabs;
  if (same)
    return ndf__fail(p->ctx, NDF_EINVAL,
                     "%s: in place on an array filtered in slabs (its rows are read after "
                     "others are written): give another output",
                     p->pb.label ? p->pb.label : ndf__op_name(p->pb.op));
  pthread_mutex_lock(&S->run);
  S->in = in;
  S->ops = ops;
  S->out = out;
  S->next = 0;
  S->st = NDF_OK;
  int started = 0;
  for (int i = 1; i < S->nw; i++, started++)
    if (pthread_create(&S->w[i].thread, NULL, work, &S->w[i])) break;
  work(&S->w[0]);
  for (int i = 1; i <= started; i++)
    pthread_join(S->w[i].thread, NULL);
  const ndf_status st = S->st;
  pthread_mutex_unlock(&S->run);
  return st;
}

static void free_bufs(worker *w, int nout, int nops) {
  ndf_array_free(w->ctx, &w->ins[0]);
  for (int j = 0; j < nops; j++)
    ndf_array_free(w->ctx, &w->ins[1 + j]);
  for (int f = 0; w->out && f < nout; f++)
    ndf_array_free(w->ctx, &w->out[f]);
  free(w->out);
}

void ndf__slabs_free(struct ndf__slabs *S) {
  if (!S) return;
  for (int i = 0; i < S->nw; i++) {
    worker *w = &S->w[i];
    ndf_plan_destroy(w->plan);
    if (w->ctx) free_bufs(w, S->nout, S->nops);
    ndf_context_destroy(w->ctx);
  }
  free(S->w);
  pthread_mutex_destroy(&S->lock);
  pthread_mutex_destroy(&S->run);
  free(S);
}

/* A buffer of n rows like a, of dtype t, in the worker's memory (page-locked on a GPU). */
static ndf_status buffer(worker *w, ndf_array *b, const ndf_array *a, ndf_dtype t, int64_t n) {
  int64_t shape[NDF_MAX_DIMS];
  memcpy(shape, a->shape, sizeof shape);
  shape[0] = n;
  return ndf_array_alloc_host(w->ctx, b, t, a->ndim, shape);
}

/* The bytes a plan's work holds per element of the image, as the CLI's slabs count them: the
 * image and outputs as float32 (staged, or the buffers), operands, and two float32
 * temporaries of the solver. */
static double bytes_per_element(const ndf__problem *pb) {
  return 4.0 * (1 + pb->nout + 2) + 8.0 * pb->nops;
}

ndf_status ndf__slabs_try(ndf_plan **out, ndf_context *ctx, ndf__problem *pb, const ndf__solver *s,
                          const char *method, int *made) {
  *made = 0;
  int64_t lo, hi;
  int wrap;
  const ndf_array *a = &pb->in;
  if (ctx->worker || a->ndim < 1 || a->place.kind != NDF_PLACE_HOST ||
      pb->out.place.kind != NDF_PLACE_HOST || s->place != ctx->place.kind ||
      !reach(pb, &lo, &hi, &wrap))
    return NDF_OK;
  for (int j = 0; j < pb->nops; j++)
    if (pb->ops[j].place.kind != NDF_PLACE_HOST || pb->ops[j].ndim != a->ndim ||
        pb->ops[j].shape[0] != a->shape[0])
      return NDF_OK;
  const int gpu = ctx->place.kind == NDF_PLACE_CUDA;
  const int64_t N = a->shape[0], row = N ? ndf_array_size(a) / N : 0;
  const double per_row = (double)row * bytes_per_element(pb);
  double cap = (double)ctx->memory_limit;
  if (cap == 0 && gpu && per_row * (double)N > 1e9) /* asked only where it may matter */
    cap = 0.8 * (double)ndf__device()->mem_free(ctx);
  if (cap <= 0 || N < 2 || row == 0 || per_row * (double)N <= cap) return NDF_OK;
  const int nw = gpu ? 2 : 1;
  int64_t L = (int64_t)(cap / (nw * per_row));
  if (L - lo - hi < 1 || L >= N) return NDF_OK; /* no slab fits, or no need */

  struct ndf__slabs *S = calloc(1, sizeof *S);
  if (!S) return ndf__fail(ctx, NDF_ENOMEM, "out of host memory for slabs");
  pthread_mutex_init(&S->lock, NULL);
  pthread_mutex_init(&S->run, NULL);
  S->N = N;
  S->L = L;
  S->rows = L - lo - hi;
  S->lo = lo;
  S->wrap = wrap;
  S->nw = nw;
  S->threads = ctx->threads / nw > 0 ? ctx->threads / nw : 1;
  S->nout = pb->nout;
  S->nops = pb->nops;
  S->ctx = ctx;
  S->w = calloc((size_t)nw, sizeof *S->w);
  ndf_status st = S->w ? NDF_OK : ndf__fail(ctx, NDF_ENOMEM, "out of host memory for slabs");
  for (int i = 0; i < nw && st == NDF_OK; i++) {
    worker *w = &S->w[i];
    w->S = S;
    st = ndf__context_child(&w->ctx, ctx, gpu ? S->threads : ctx->threads);
    if (st != NDF_OK) break;
    w->out = calloc((size_t)pb->nout, sizeof *w->out);
    if (!w->out) st = ndf__fail(ctx, NDF_ENOMEM, "out of host memory for slabs");
    /* the buffers, and the problem of their shape */
    ndf__problem q = *pb;
    q.params = malloc(pb->params_size);
    if (!q.params) st = ndf__fail(ctx, NDF_ENOMEM, "out of host memory for slabs");
    if (st == NDF_OK) st = buffer(w, &w->ins[0], a, work_dtype(a->dtype), L);
    for (int j = 0; j < pb->nops && st == NDF_OK; j++)
      st = buffer(w, &w->ins[1 + j], &pb->ops[j], pb->ops[j].dtype, L);
    for (int f = 0; f < pb->nout && st == NDF_OK; f++)
      st = buffer(w, &w->out[f], &pb->out, work_dtype(pb->out.dtype), L);
    if (st != NDF_OK) {
      free(q.params);
      ndf__fail(ctx, st, "slabs of %lld rows: %s", (long long)L, ndf_context_message(w->ctx));
      break;
    }
    memcpy(q.params, pb->params, pb->params_size);
    q.in = w->ins[0];
    q.out = w->out[0];
    for (int j = 0; j < pb->nops; j++)
      q.ops[j] = w->ins[1 + j];
    q.in.data = q.out.data = NULL;
    if (pb->op == NDF__OP_KS) ((ndf__ksp *)q.params)->n = ndf_array_size(&q.in);
    q.pin = 1 + (int)s->place;
    st = ndf__plan_create(&w->plan, w->ctx, &q, method);
    if (st != NDF_OK)
      ndf__fail(ctx, st, "a slab of %lld rows: %s", (long long)L, ndf_context_message(w->ctx));
  }
  if (st != NDF_OK) {
    ndf__slabs_free(S);
    return st;
  }
  ndf_plan *p = calloc(1, sizeof *p);
  if (!p) {
    ndf__slabs_free(S);
    return ndf__fail(ctx, NDF_ENOMEM, "out of host memory for a plan");
  }
  p->ctx = ctx;
  p->pb = *pb;
  pb->params = NULL;
  p->solver = S->w[0].plan->solver;
  p->slabs = S;
  *out = p;
  *made = 1;
  return NDF_OK;
}

int64_t ndf_plan_slabs(const ndf_plan *p) { return p && p->slabs ? p->slabs->rows : 0; }
