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
 * stream of its own), its plan and its buffers. On a GPU the plan filters device buffers: a
 * worker copies the slab's rows into a page-locked buffer, sends them up, filters, and brings
 * back only the slab's own rows. Two workers a device take turns on each direction of its bus
 * (one sends up while the other is filtered or brings its rows back, the bus carrying both
 * directions at once), and copy rows on the CPU beside it; two workers sending at once would
 * share the bus, finish together and then leave it idle while both filter. A context of
 * several GPUs has two workers on each, and the counter spreads the slabs by each device's
 * pace. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dev_switch.h"
#include "elem.h"
#include "internal.h"

typedef struct {
  ndf_context *ctx;
  ndf_plan *plan;
  ndf_array ins[1 + NDF__MAX_OPS]; /* what the plan reads: the image's rows, the operands' */
  ndf_array *out;                  /* what it writes (a bank's nout) */
  /* on a GPU, where ins and out are device buffers: page-locked host buffers of the rows in
   * (L) and out (a slab's own rows, nout of them) */
  ndf_array hin[1 + NDF__MAX_OPS];
  ndf_array *hout;
  struct ndf__slabs *S;
  int dev; /* its device's place in the context's list */
  pthread_t thread;
} worker;

struct ndf__slabs {
  int64_t N;       /* rows of axis 0 */
  int64_t L;       /* rows a buffer holds */
  int64_t rows;    /* output rows a slab gives (the last may give fewer) */
  int64_t lo, hi;  /* reach before and after an output row (lo + hi + rows = L) */
  int wrap;        /* axis 0 wraps: every buffer reads lo rows before and hi after, cyclically */
  int nw, threads; /* workers; CPU threads each */
  /* this execute's arrays the devices copy rows from (ins: the image, the operands) and to
   * (outs) directly: page-locked, C-contiguous, of the buffers' dtype */
  char direct_in[1 + NDF__MAX_OPS], *direct_out;
  int nout, nops;
  ndf_context *ctx; /* the plan's */
  worker *w;
  /* A recursive filter along axis 0 (two_sweeps): these slabs (none where no other axis is
   * filtered: nw 0) filter the other axes, `then` filters axis 0 in slabs of axis 1, on views
   * with the two axes swapped; temp: the first sweep's result needs a float32 array of its own
   * (the output's dtype would round it). */
  struct ndf__slabs *then;
  int temp;
  /* one execute's; in place (an image also the output, read around its own rows): `side` holds
   * the image's rows that a slab reads beside its own, as they were before any was written:
   * the lo + hi around each slab's first row, then (no wrap) the first and the last L rows; or,
   * where those would be more, every row (`whole`) */
  ndf_array side;
  int whole;
  const char *twin; /* a worker's plan ran its exact twin (ndf__slabs_twin) */
  const ndf_array *in, *ops;
  ndf_array *out;
  int64_t next;
  ndf_status st;
  pthread_mutex_t lock; /* next and st */
  pthread_mutex_t run;  /* held by an execute: the workers and buffers serve one at a time */
  pthread_mutex_t *bus; /* on a GPU: a device's up (2 d) and down (2 d + 1) copies, one at a time */
};

/* The workers' buffers ins and out are on their devices. */
static int on_gpu(const struct ndf__slabs *S) { return S->ctx->place.kind == NDF_PLACE_CUDA; }

/* Rows of axis 0 an output row reads before (lo) and after (hi) itself, and whether axis 0
 * wraps; 0 where the filter cannot run in slabs so (a recursive filter along axis 0, whose
 * reach is the line: see two_sweeps; a ks without a bound on its radii or with the full output
 * extent). */
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
  case NDF__OP_GAUSSIAN: /* recursive: no finite reach along a filtered axis 0 */
    if (((const ndf__iirp *)pb->params)->ax[0].K) return 0;
    break;
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
 * to dst's dtype, split over threads by runs: the trailing axes along which both arrays are
 * contiguous (copied whole where the dtypes agree), else the last axis. */
static void copy_rows(const ndf_array *src, int64_t s, int64_t N, const ndf_array *dst, int64_t d,
                      int64_t n, int threads) {
  const int nd = src->ndim;
  const int64_t *sh = src->shape, *sa = src->strides, *sb = dst->strides;
  int inner = nd > 1 ? nd - 1 : nd; /* the run spans axes inner..nd-1 */
  int64_t run = nd > 1 ? sh[nd - 1] : 1, ta = nd > 1 ? sa[nd - 1] : 1, tb = nd > 1 ? sb[nd - 1] : 1;
  while (inner > 1 && ta == 1 && tb == 1 && sa[inner - 1] == run && sb[inner - 1] == run)
    run *= sh[--inner];
  int64_t runs = 1; /* a row's runs */
  for (int a = 1; a < inner; a++)
    runs *= sh[a];
  const int same = src->dtype == dst->dtype && ta == 1 && tb == 1;
  const size_t es = ndf_dtype_size(src->dtype);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t k = 0; k < n * runs; k++) {
    int64_t r = k % runs, oa = ((s + k / runs) % N) * sa[0], ob = (d + k / runs) * sb[0];
    for (int a = inner - 1; a >= 1; a--) {
      const int64_t at = r % sh[a];
      r /= sh[a];
      oa += at * sa[a];
      ob += at * sb[a];
    }
    if (same) {
      memcpy((char *)dst->data + ob * (int64_t)es, (const char *)src->data + oa * (int64_t)es,
             (size_t)run * es);
      continue;
    }
    for (int64_t j = 0; j < run; j++)
      ndf__store(dst->dtype, dst->data, ob + j * tb, ndf__load(src->dtype, src->data, oa + j * ta));
  }
}

/* Slab k's first output row z0 and count, and the first row its buffer reads (a, possibly
 * negative under wrap, taken modulo N). A filter without reach along axis 0 reads only the
 * slab's own rows (never rows another slab may be writing in place). */
static void slab_rows(const struct ndf__slabs *S, int64_t k, int64_t *z0, int64_t *nz, int64_t *a) {
  *z0 = k * S->rows;
  *nz = S->N - *z0 < S->rows ? S->N - *z0 : S->rows;
  *a = *z0 - S->lo;
  if (!S->wrap && S->L != S->rows) { /* the first and last buffers read further in */
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

/* Bytes of n rows of a (of its dtype, contiguous). */
static size_t rows_bytes(const ndf_array *a, int64_t n) {
  return (size_t)(n * (a->shape[0] ? ndf_array_size(a) / a->shape[0] : 0)) *
         ndf_dtype_size(a->dtype);
}

/* A worker's page-locked buffer b, made on its first use: a caller's page-locked arrays go to
 * and from the device directly, and never need one. */
static ndf_status host_buffer(worker *w, ndf_array *b) {
  if (b->data) return NDF_OK;
  return ndf_array_alloc_host(w->ctx, b, b->dtype, b->ndim, b->shape);
}

/* Slab k's buffer b (rows from a) in place: its own rows from the image (no other slab writes
 * them), the rows around its first and last from `side`, the rest (past its reach) zeros; a
 * buffer moved in from the array's edge (whose mode may reflect its rows further than the
 * reach) all from `side`. */
static void in_place_rows(const struct ndf__slabs *S, int64_t k, int64_t z0, int64_t nz, int64_t a,
                          ndf_array *b) {
  const int64_t nslabs = (S->N + S->rows - 1) / S->rows, r = S->lo + S->hi;
  if (a != z0 - S->lo) {
    copy_rows(&S->side, nslabs * r + (a ? S->L : 0), S->side.shape[0], b, 0, S->L, S->threads);
    return;
  }
  memset(b->data, 0, rows_bytes(b, S->L));
  copy_rows(S->in, z0, S->N, b, z0 - a, nz, S->threads);
  for (int e = 0; e < 2; e++) { /* the boundary at z0, then the one at z0 + nz */
    const int64_t kb = k + e, i0 = (e ? z0 + nz : z0) - S->lo - a;
    if (!S->wrap && (kb == 0 || kb == nslabs)) continue;
    const int64_t t0 = i0 < 0 ? -i0 : 0, t1 = i0 + r > S->L ? S->L - i0 : r;
    if (t1 > t0)
      copy_rows(&S->side, kb % nslabs * r + t0, S->side.shape[0], b, i0 + t0, t1 - t0, S->threads);
  }
}

static void *work(void *v) {
  worker *w = v;
  struct ndf__slabs *S = w->S;
  const ndf__device_ops *dev = on_gpu(S) ? ndf__device() : NULL;
  ndf_array *hin = on_gpu(S) ? w->hin : w->ins;
  const int64_t nslabs = (S->N + S->rows - 1) / S->rows;
  for (;;) {
    pthread_mutex_lock(&S->lock);
    const int64_t k = S->st == NDF_OK && S->next < nslabs ? S->next++ : -1;
    pthread_mutex_unlock(&S->lock);
    if (k < 0) break;
    int64_t z0, nz, a;
    slab_rows(S, k, &z0, &nz, &a);
    const int64_t from = ((a % S->N) + S->N) % S->N;
    ndf_status st = NDF_OK;
    /* the rows read: L, or a short last slab's own rows (no reach), the rest of the buffer
     * zeros, whose outputs are not kept */
    const int64_t nin = S->L == S->rows ? nz : S->L;
    const void *rows[1 + NDF__MAX_OPS];
    for (int j = 0; j <= S->nops && st == NDF_OK; j++) {
      const ndf_array *src = j ? &S->ops[j - 1] : S->whole ? &S->side : S->in;
      if (dev && S->direct_in[j] && from + nin <= S->N && nin == S->L) {
        rows[j] = rows_of(src, from, 1).data;
      } else if ((st = host_buffer(w, &hin[j])) != NDF_OK) {
        break;
      } else if (!j && S->side.data && !S->whole) {
        rows[j] = hin[j].data;
        in_place_rows(S, k, z0, nz, a, &hin[j]);
      } else {
        rows[j] = hin[j].data;
        copy_rows(src, from, S->N, &hin[j], 0, nin, S->threads);
        if (nin < S->L) memset(rows_of(&hin[j], nin, 1).data, 0, rows_bytes(&hin[j], S->L - nin));
      }
    }
    const int locked = dev && st == NDF_OK;
    if (locked) pthread_mutex_lock(&S->bus[2 * w->dev]);
    for (int j = 0; dev && j <= S->nops && st == NDF_OK; j++)
      st = dev->copy(w->ctx, w->ins[j].data, rows[j], rows_bytes(&hin[j], S->L));
    if (locked) pthread_mutex_unlock(&S->bus[2 * w->dev]);
    if (st == NDF_OK) st = ndf_execute_n(w->plan, 1 + S->nops, w->ins, S->nout, w->out);
    if (st == NDF_OK && ndf_plan_last_solver(w->plan) != ndf_plan_solver(w->plan))
      __atomic_store_n(&S->twin, ndf_plan_last_solver(w->plan), __ATOMIC_RELAXED);
    for (int f = 0; f < S->nout && st == NDF_OK; f++) {
      ndf_array mine = rows_of(&w->out[f], z0 - a, nz); /* the slab's own rows */
      if (dev) {
        const int direct = S->direct_out[f];
        if (!direct && (st = host_buffer(w, &w->hout[f])) != NDF_OK) break;
        pthread_mutex_lock(&S->bus[2 * w->dev + 1]);
        st = dev->copy(w->ctx, direct ? rows_of(&S->out[f], z0, 1).data : w->hout[f].data,
                       mine.data, rows_bytes(&mine, nz));
        pthread_mutex_unlock(&S->bus[2 * w->dev + 1]);
        if (direct) continue;
        mine = rows_of(&w->hout[f], 0, nz);
      }
      if (st == NDF_OK) copy_rows(&mine, 0, nz, &S->out[f], z0, nz, S->threads);
    }
    if (st != NDF_OK) {
      fail(S, st, w->ctx);
      break;
    }
  }
  return NULL;
}

/* In place: the image's rows that slabs read beside their own, as they are before any is
 * written, into S->side (see struct ndf__slabs). */
static ndf_status keep_side(struct ndf__slabs *S, const ndf_array *in) {
  const int64_t nslabs = (S->N + S->rows - 1) / S->rows, r = S->lo + S->hi;
  const ndf_array *like = on_gpu(S) ? &S->w[0].hin[0] : &S->w[0].ins[0];
  int64_t shape[NDF_MAX_DIMS];
  memcpy(shape, in->shape, sizeof shape);
  const int64_t edges = S->wrap ? 0 : 2 * S->L; /* the first and last buffers' rows */
  S->whole = nslabs * r + edges >= S->N;
  shape[0] = S->whole ? S->N : nslabs * r + edges;
  S->side = ndf_array_contiguous(like->dtype, in->ndim, shape, NULL);
  S->side.data = malloc(rows_bytes(&S->side, shape[0]));
  if (!S->side.data)
    return ndf__fail(S->ctx, NDF_ENOMEM, "in place in slabs: out of host memory for %lld rows",
                     (long long)shape[0]);
  const int threads = S->threads * S->nw;
  if (S->whole)
    copy_rows(in, 0, S->N, &S->side, 0, S->N, threads);
  else {
    for (int64_t k = 0; k < nslabs; k++)
      copy_rows(in, ((k * S->rows - S->lo) % S->N + S->N) % S->N, S->N, &S->side, k * r, r,
                threads);
    if (edges) {
      copy_rows(in, 0, S->N, &S->side, nslabs * r, S->L, threads);
      copy_rows(in, S->N - S->L, S->N, &S->side, nslabs * r + S->L, S->L, threads);
    }
  }
  return NDF_OK;
}

/* One run of the slabs S: in (and ops) to out; same: in is out. */
static ndf_status run(struct ndf__slabs *S, const ndf_array *in, const ndf_array *ops,
                      ndf_array *out, int same) {
  if (same && S->L != S->rows) {
    const ndf_status st = keep_side(S, in);
    if (st != NDF_OK) return st;
  }
  for (int j = 0; on_gpu(S) && j <= S->nops; j++) /* `side` is never page-locked */
    S->direct_in[j] = !(j == 0 && S->side.data) &&
                      ndf__device()->direct(j ? &ops[j - 1] : in, S->w[0].ins[j].dtype);
  for (int f = 0; on_gpu(S) && f < S->nout; f++)
    S->direct_out[f] = ndf__device()->direct(&out[f], S->w[0].out[f].dtype);
  S->in = in;
  S->ops = ops;
  S->out = out;
  S->next = 0;
  S->st = NDF_OK;
  S->twin = NULL;
  int started = 0;
  for (int i = 1; i < S->nw; i++, started++)
    if (pthread_create(&S->w[i].thread, NULL, work, &S->w[i])) break;
  work(&S->w[0]);
  for (int i = 1; i <= started; i++)
    pthread_join(S->w[i].thread, NULL);
  free(S->side.data);
  S->side.data = NULL;
  S->whole = 0;
  return S->st;
}

/* a with its axes 0 and 1 swapped */
static ndf_array swap01(const ndf_array *a) {
  ndf_array v = *a;
  v.shape[0] = a->shape[1];
  v.shape[1] = a->shape[0];
  v.strides[0] = a->strides[1];
  v.strides[1] = a->strides[0];
  return v;
}

/* A recursive filter along axis 0: the other axes in slabs of axis 0 (S, if any is filtered)
 * into the output (or a float32 array), then axis 0 in slabs of axis 1 from there into the
 * output. Neither sweep reads another slab's rows, so each may write where it reads. */
static ndf_status two_sweeps(const ndf_plan *p, struct ndf__slabs *S, const ndf_array *in,
                             ndf_array *out) {
  ndf_array mid = *out;
  ndf_status st = NDF_OK;
  if (S->temp) {
    mid = ndf_array_contiguous(NDF_F32, in->ndim, in->shape, NULL);
    mid.data = malloc((size_t)ndf_array_size(&mid) * sizeof(float));
    if (!mid.data)
      return ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of host memory for the first sweep's result",
                       p->pb.label ? p->pb.label : ndf__op_name(p->pb.op));
  }
  if (S->nw) st = run(S, in, NULL, &mid, 0);
  if (st == NDF_OK) {
    const ndf_array a = swap01(S->nw ? &mid : in);
    ndf_array b = swap01(out);
    st = run(S->then, &a, NULL, &b, 0);
  }
  if (S->temp) free(mid.data);
  return st;
}

ndf_status ndf__slabs_execute(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                              ndf_array *out, int same) {
  struct ndf__slabs *S = p->slabs;
  pthread_mutex_lock(&S->run);
  const ndf_status st = S->then ? two_sweeps(p, S, in, out) : run(S, in, ops, out, same);
  pthread_mutex_unlock(&S->run);
  return st;
}

static void free_bufs(worker *w, int nout, int nops) {
  for (int j = 0; j <= nops; j++) {
    ndf_array_free(w->ctx, &w->ins[j]);
    ndf_array_free(w->ctx, &w->hin[j]);
  }
  for (int f = 0; f < nout; f++) {
    if (w->out) ndf_array_free(w->ctx, &w->out[f]);
    if (w->hout) ndf_array_free(w->ctx, &w->hout[f]);
  }
  free(w->out);
  free(w->hout);
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
  free(S->direct_out);
  for (int d = 0; S->bus && d < 2 * S->ctx->ndev; d++)
    pthread_mutex_destroy(&S->bus[d]);
  free(S->bus);
  ndf__slabs_free(S->then);
  pthread_mutex_destroy(&S->lock);
  pthread_mutex_destroy(&S->run);
  free(S);
}

/* A buffer of n rows like a, of dtype t: in the worker's host memory (on the CPU), on its
 * device (dev), or (lazy, on a GPU) described only, to be made page-locked on first use
 * (host_buffer). */
static ndf_status buffer(worker *w, ndf_array *b, const ndf_array *a, ndf_dtype t, int64_t n,
                         int dev, int lazy) {
  int64_t shape[NDF_MAX_DIMS];
  memcpy(shape, a->shape, sizeof shape);
  shape[0] = n;
  if (lazy) {
    *b = ndf_array_contiguous(t, a->ndim, shape, NULL);
    return NDF_OK;
  }
  return (dev ? ndf_array_alloc : ndf_array_alloc_host)(w->ctx, b, t, a->ndim, shape);
}

/* A worker on device `device` (the CPU's: any): its context, buffers of L rows and the plan of
 * their shape (q: pb's problem, its params a copy for the plan to take). */
static ndf_status make_worker(worker *w, ndf_context *ctx, const ndf__problem *pb,
                              const ndf__solver *s, const char *method, int device) {
  struct ndf__slabs *S = w->S;
  const int gpu = on_gpu(S);
  const int64_t L = S->L;
  const ndf_array *a = &pb->in;
  ndf_status st = ndf__context_child(&w->ctx, ctx, S->threads, device);
  if (st != NDF_OK) return st;
  w->out = calloc((size_t)pb->nout, sizeof *w->out);
  w->hout = gpu ? calloc((size_t)pb->nout, sizeof *w->hout) : NULL;
  ndf__problem q = *pb;
  q.params = malloc(pb->params_size);
  if (!w->out || (gpu && !w->hout) || !q.params) {
    free(q.params);
    return ndf__fail(ctx, NDF_ENOMEM, "out of host memory for slabs");
  }
  for (int j = 0; j <= pb->nops && st == NDF_OK; j++) {
    const ndf_array *o = j ? &pb->ops[j - 1] : a;
    const ndf_dtype t = j ? o->dtype : work_dtype(a->dtype);
    st = buffer(w, &w->ins[j], o, t, L, gpu, 0);
    if (st == NDF_OK && gpu) st = buffer(w, &w->hin[j], o, t, L, 0, 1);
  }
  for (int f = 0; f < pb->nout && st == NDF_OK; f++) {
    st = buffer(w, &w->out[f], &pb->out, work_dtype(pb->out.dtype), L, gpu, 0);
    if (st == NDF_OK && gpu)
      st = buffer(w, &w->hout[f], &pb->out, work_dtype(pb->out.dtype), S->rows, 0, 1);
  }
  if (st != NDF_OK) {
    free(q.params);
    return ndf__fail(ctx, st, "slabs of %lld rows on %s: %s", (long long)L, w->ctx->device_name,
                     ndf_context_message(w->ctx));
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
    ndf__fail(ctx, st, "a slab of %lld rows on %s: %s", (long long)L, w->ctx->device_name,
              ndf_context_message(w->ctx));
  return st;
}

/* The bytes a plan's work holds per element of the image, as the CLI's slabs count them: the
 * image and outputs in their work dtype (float32, or float64 kept), the operands in theirs,
 * two float32 temporaries of the solver; on a GPU, whose solvers compute in float32, float32
 * copies of a float64 image and outputs too. */
static double bytes_per_element(const ndf__problem *pb, int gpu) {
  const double ein = (double)ndf_dtype_size(work_dtype(pb->in.dtype));
  const double eout = (double)ndf_dtype_size(work_dtype(pb->out.dtype));
  double b = ein + pb->nout * eout + 8.0;
  for (int j = 0; j < pb->nops; j++)
    b += (double)ndf_dtype_size(pb->ops[j].dtype);
  if (gpu) b += (ein > 4 ? 4.0 : 0) + (eout > 4 ? 4.0 * pb->nout : 0);
  return b;
}

/* The rows a slab buffer of pb holds when its host arrays go by slabs (reach lo, hi along
 * axis 0), its workers in *nw; 0 where they do not: the work fits the memory the context may use
 * and one device is to do it (no several devices, or not may_spread), or no slab fits the
 * limit. */
static int64_t slab_length(const ndf_context *ctx, const ndf__problem *pb, int64_t lo, int64_t hi,
                           int may_spread, int *nw) {
  const ndf_array *a = &pb->in;
  const int gpu = ctx->place.kind == NDF_PLACE_CUDA;
  const int ndev = gpu ? ctx->ndev : 1, per_dev = gpu ? 2 : 1;
  *nw = ndev * per_dev;
  const int64_t N = a->shape[0], row = N ? ndf_array_size(a) / N : 0;
  const double per_row = (double)row * bytes_per_element(pb, gpu), work = per_row * (double)N;
  /* Several GPUs share a filter on host arrays past the cost of setting their workers up. One
   * GPU takes a host array of 1 GB or more in slabs too, where four slabs of at least four
   * times the reach fit: its workers' copies up and down then overlap, which in memory follow
   * each other (the development switch NDF_SLABS: "1" slabs wherever they may go, "0" never). */
  const char *sw = ndf__dev_switch("NDF_SLABS");
  const double bytes = (double)ndf_array_size(a) * ndf_dtype_size(a->dtype);
  const int spread =
      may_spread && gpu &&
      (sw ? *sw == '1' : bytes >= 64e6 && (ndev > 1 || (bytes >= 1e9 && N >= 16 * (lo + hi + 1))));
  double cap = (double)ctx->memory_limit;        /* each device's */
  if (cap == 0 && gpu && (spread || work > 1e9)) /* asked only where it may matter */
    cap = 0.8 * (double)ndf_context_memory_free(ctx);
  if (N < 2 || row == 0 || (!spread && (cap <= 0 || work <= cap))) return 0;
  int64_t L = cap > 0 ? (int64_t)(cap / (per_dev * per_row)) : N;
  if (spread) { /* two slabs a worker, each at least four times the reach: the reach's rows
                 * cross the bus for both slabs they border (forced by the switch: any size) */
    int64_t rows = (N + 2 * *nw - 1) / (2 * *nw);
    if (!sw && rows < 4 * (lo + hi)) rows = 4 * (lo + hi);
    if (L > rows + lo + hi) L = rows + lo + hi;
  }
  return L - lo - hi < 1 || L >= N ? 0 : L; /* no slab fits, or no need */
}

static struct ndf__slabs *slabs_new(ndf_context *ctx) {
  struct ndf__slabs *S = calloc(1, sizeof *S);
  if (!S) {
    ndf__fail(ctx, NDF_ENOMEM, "out of host memory for slabs");
    return NULL;
  }
  pthread_mutex_init(&S->lock, NULL);
  pthread_mutex_init(&S->run, NULL);
  S->ctx = ctx;
  return S;
}

/* Slabs of pb's host arrays, L rows a buffer, by nw workers (spread over the context's
 * devices) with plans of solver s's place. */
static ndf_status make_slabs(struct ndf__slabs **out, ndf_context *ctx, const ndf__problem *pb,
                             const ndf__solver *s, const char *method, int64_t L, int nw,
                             int64_t lo, int64_t hi, int wrap) {
  const int gpu = ctx->place.kind == NDF_PLACE_CUDA;
  struct ndf__slabs *S = *out = slabs_new(ctx);
  if (!S) return NDF_ENOMEM;
  S->N = pb->in.shape[0];
  S->L = L;
  S->rows = L - lo - hi;
  S->lo = lo;
  S->hi = hi;
  S->wrap = wrap;
  S->threads = gpu ? (ctx->threads / nw > 0 ? ctx->threads / nw : 1) : ctx->threads;
  S->nout = pb->nout;
  S->nops = pb->nops;
  S->w = calloc((size_t)nw, sizeof *S->w);
  S->direct_out = calloc((size_t)pb->nout, 1);
  S->bus = gpu ? malloc(2 * (size_t)ctx->ndev * sizeof *S->bus) : NULL;
  for (int d = 0; S->bus && d < 2 * ctx->ndev; d++)
    pthread_mutex_init(&S->bus[d], NULL);
  if (!S->w || !S->direct_out || (gpu && !S->bus))
    return ndf__fail(ctx, NDF_ENOMEM, "out of host memory for slabs");
  ndf_status st = NDF_OK;
  for (int i = 0; i < nw && st == NDF_OK; i++, S->nw++) {
    S->w[i].S = S;
    S->w[i].dev = gpu ? i % ctx->ndev : 0;
    st = make_worker(&S->w[i], ctx, pb, s, method, gpu ? ctx->devs[S->w[i].dev] : 0);
  }
  return st;
}

/* A recursive filter along axis 0 (see two_sweeps): the first sweep's problem (the other axes,
 * into the output or a float32 array) and the second's (axis 0 alone, on views with axes 0 and
 * 1 swapped), each in slabs, where both may go by slabs. */
static ndf_status two_sweeps_try(struct ndf__slabs **out, ndf_context *ctx, const ndf__problem *pb,
                                 const ndf__solver *s, const char *method) {
  const ndf__iirp *q = pb->params;
  const ndf_array *a = &pb->in;
  if (a->ndim < 2) return NDF_OK;
  const int temp = pb->out.dtype != NDF_F32 && pb->out.dtype != NDF_F64;
  ndf__iirp qa = *q, qb = {0};
  qa.ax[0] = (ndf__iir){0};
  qb.ax[1] = q->ax[0];
  int others = 0;
  for (int d = 1; d < a->ndim; d++)
    others |= q->ax[d].K != 0;
  ndf__problem pa = *pb, pq = *pb;
  pa.params = &qa;
  if (temp) pa.out = ndf_array_contiguous(NDF_F32, a->ndim, a->shape, NULL);
  pq.params = &qb;
  pq.in = swap01(others ? &pa.out : a);
  pq.out = swap01(&pb->out);
  int nwa = 0, nwb = 0;
  /* two sweeps move the data twice: only where the filter does not fit, not to share it */
  const int64_t La = others ? slab_length(ctx, &pa, 0, 0, 0, &nwa) : 0;
  const int64_t Lb = slab_length(ctx, &pq, 0, 0, 0, &nwb);
  if ((others && !La) || !Lb) return NDF_OK;
  ndf_status st = NDF_OK;
  if (others)
    st = make_slabs(out, ctx, &pa, s, method, La, nwa, 0, 0, 0);
  else if (!(*out = slabs_new(ctx)))
    return NDF_ENOMEM;
  if (st == NDF_OK) {
    (*out)->temp = temp && others;
    st = make_slabs(&(*out)->then, ctx, &pq, s, method, Lb, nwb, 0, 0, 0);
  }
  return st;
}

ndf_status ndf__slabs_try(ndf_plan **out, ndf_context *ctx, ndf__problem *pb, const ndf__solver *s,
                          const char *method, int *made) {
  *made = 0;
  int64_t lo, hi;
  int wrap = 0;
  const ndf_array *a = &pb->in;
  if (ctx->worker || a->ndim < 1 || a->place.kind != NDF_PLACE_HOST ||
      pb->out.place.kind != NDF_PLACE_HOST || s->place != ctx->place.kind)
    return NDF_OK;
  for (int j = 0; j < pb->nops; j++)
    if (pb->ops[j].place.kind != NDF_PLACE_HOST || pb->ops[j].ndim != a->ndim ||
        pb->ops[j].shape[0] != a->shape[0])
      return NDF_OK;
  struct ndf__slabs *S = NULL;
  ndf_status st = NDF_OK;
  /* asking devices their memory and making workers on them changes the current device */
  const int current = ctx->place.kind == NDF_PLACE_CUDA ? ndf__device()->current() : -1;
  if (reach(pb, &lo, &hi, &wrap)) {
    int nw = 0;
    const int64_t L = slab_length(ctx, pb, lo, hi, 1, &nw);
    if (L) st = make_slabs(&S, ctx, pb, s, method, L, nw, lo, hi, wrap);
  } else if (pb->op == NDF__OP_GAUSSIAN) {
    st = two_sweeps_try(&S, ctx, pb, s, method);
  }
  if (current >= 0) ndf__device()->set_current(current);
  if (st != NDF_OK) {
    ndf__slabs_free(S);
    return st;
  }
  if (!S) return NDF_OK;
  ndf_plan *p = calloc(1, sizeof *p);
  if (!p) {
    ndf__slabs_free(S);
    return ndf__fail(ctx, NDF_ENOMEM, "out of host memory for a plan");
  }
  p->ctx = ctx;
  p->pb = *pb;
  pb->params = NULL;
  p->solver = (S->nw ? S : S->then)->w[0].plan->solver;
  p->slabs = S;
  *out = p;
  *made = 1;
  return NDF_OK;
}

const char *ndf__slabs_twin(const struct ndf__slabs *S) {
  const char *t = __atomic_load_n(&S->twin, __ATOMIC_RELAXED);
  return t || !S->then ? t : ndf__slabs_twin(S->then);
}

int64_t ndf_plan_slabs(const ndf_plan *p) {
  if (!p || !p->slabs) return 0;
  return p->slabs->nw ? p->slabs->rows : p->slabs->then->rows;
}
