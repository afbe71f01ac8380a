/* SPDX-License-Identifier: BSD-3-Clause */
/* common.h - test helpers: seeded random data, strided layouts, poison, error reports. */
#ifndef NDF_TEST_COMMON_H
#define NDF_TEST_COMMON_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/elem.h"
#include "ndf.h"
#include "phantom.h"

#define SKIP 77 /* ctest SKIP_RETURN_CODE */

/* The test's context on dev ("cpu" or "cuda"), its name printed: 0, or the exit code to return
 * (SKIP where a CUDA device is asked for and none is usable, else 1). */
static inline int t_open(ndf_context **ctx, const char *dev) {
  ndf_context_opts co = {.struct_size = sizeof co, .device = dev};
  ndf_status st = ndf_context_create(ctx, &co);
  if (st != NDF_OK) {
    printf("no usable %s device (%s): skipped\n", dev, ndf_status_str(st));
    return !strcmp(dev, "cuda") && st == NDF_ENODEV ? SKIP : 1;
  }
  printf("device %s\n", ndf_context_device_name(*ctx));
  return 0;
}

static int t_failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      t_failures++;                                                                                \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

/* A fresh seed per run (NDF_TEST_SEED repeats one), printed for replay. */
static inline uint64_t t_seed(void) {
  const char *s = getenv("NDF_TEST_SEED");
  uint64_t seed = s ? strtoull(s, NULL, 0)
                    : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)clock();
  printf("seed: NDF_TEST_SEED=%llu\n", (unsigned long long)seed);
  return seed;
}

static inline int64_t t_randint(uint64_t *r, int64_t lo, int64_t hi) { /* inclusive */
  double u = 0.5 * (ndf_rand_uniform(r) + 1.0);
  int64_t v = lo + (int64_t)(u * (double)(hi - lo + 1));
  return v > hi ? hi : v;
}

static inline double t_env_double(const char *name, double dflt) {
  const char *s = getenv(name);
  return s ? atof(s) : dflt;
}

/* A test array: a view into a larger "parent" buffer (steps of 1 or 2 per
 * axis, some axes reversed) so strides and untouched gaps get exercised.
 * host[] mirrors the parent; dev is the parent on the device when used. */
typedef struct {
  ndf_array view;  /* what the library sees */
  ndf_array hview; /* the same view over host[] */
  void *host;
  size_t bytes;
  ndf_array dev; /* device parent, or data NULL */
} t_arr;

static inline void t_arr_make(t_arr *t, uint64_t *r, ndf_dtype dt, int nd, const int64_t *shape,
                              int strided, ndf_context *dctx) {
  int64_t pshape[NDF_MAX_DIMS] = {0}, step[NDF_MAX_DIMS] = {0}, rev[NDF_MAX_DIMS] = {0};
  for (int d = 0; d < nd; d++) {
    step[d] = strided ? t_randint(r, 1, 2) : 1;
    rev[d] = strided ? t_randint(r, 0, 3) == 0 : 0;
    pshape[d] = shape[d] * step[d] + (strided ? 1 : 0);
  }
  ndf_array parent = ndf_array_contiguous(dt, nd, pshape, NULL);
  size_t es = ndf_dtype_size(dt);
  t->bytes = (size_t)ndf_array_size(&parent) * es;
  t->host = malloc(t->bytes);
  if (!t->host) abort();
  ndf_array v = ndf_array_contiguous(dt, nd, shape, NULL);
  int64_t off = 0;
  for (int d = 0; d < nd; d++) {
    v.strides[d] = parent.strides[d] * step[d] * (rev[d] ? -1 : 1);
    if (strided) off += parent.strides[d]; /* start one in, leaving a gap */
    if (rev[d]) off += parent.strides[d] * step[d] * (shape[d] - 1);
  }
  t->hview = v;
  t->hview.data = (char *)t->host + off * (int64_t)es;
  t->view = t->hview;
  memset(&t->dev, 0, sizeof t->dev);
  if (dctx) {
    if (ndf_array_alloc(dctx, &t->dev, dt, nd, pshape) != NDF_OK) abort();
    t->view.data = (char *)t->dev.data + off * (int64_t)es;
    t->view.place = t->dev.place;
  }
}

static inline void t_arr_free(t_arr *t, ndf_context *dctx) {
  free(t->host);
  if (t->dev.data) ndf_array_free(dctx, &t->dev);
}

/* Parent bytes: host -> device and back (no-ops for host arrays). */
static inline void t_arr_upload(t_arr *t, ndf_context *dctx) {
  if (!t->dev.data) return;
  ndf_array h = t->dev;
  h.data = t->host;
  h.place.kind = NDF_PLACE_HOST;
  if (ndf_array_copy(dctx, &t->dev, &h) != NDF_OK) abort();
}
static inline void t_arr_download(t_arr *t, ndf_context *dctx) {
  if (!t->dev.data) return;
  ndf_array h = t->dev;
  h.data = t->host;
  h.place.kind = NDF_PLACE_HOST;
  if (ndf_array_copy(dctx, &h, &t->dev) != NDF_OK) abort();
}

/* Random non-zero-mean data in the view: floats in [-1, 1], integers over
 * much of their range. */
static inline void t_fill_random(t_arr *t, uint64_t *r) {
  int64_t n = ndf_array_size(&t->hview);
  for (int64_t i = 0; i < n; i++) {
    double v;
    switch (t->hview.dtype) {
    case NDF_U8: v = (double)t_randint(r, 0, 255); break;
    case NDF_U16: v = (double)t_randint(r, 0, 65535); break;
    case NDF_I16: v = (double)t_randint(r, -32768, 32767); break;
    default: v = ndf_rand_uniform(r);
    }
    ndf__store(t->hview.dtype, t->hview.data, ndf__offset(&t->hview, i), v);
  }
}

/* Fills the whole parent with the poison: NaN for floats, 0xA5 bytes else. */
static inline void t_poison(t_arr *t) {
  if (t->hview.dtype == NDF_F32) {
    for (size_t i = 0; i < t->bytes / 4; i++)
      ((float *)t->host)[i] = NAN;
  } else if (t->hview.dtype == NDF_F64) {
    for (size_t i = 0; i < t->bytes / 8; i++)
      ((double *)t->host)[i] = NAN;
  } else {
    memset(t->host, 0xA5, t->bytes);
  }
}

/* Counts parent elements outside the view that lost their poison. */
static inline int64_t t_gaps_changed(const t_arr *t, const void *poisoned_copy) {
  size_t es = ndf_dtype_size(t->hview.dtype);
  int64_t total = (int64_t)(t->bytes / es), n = ndf_array_size(&t->hview), changed = 0;
  unsigned char *in_view = calloc((size_t)total, 1);
  if (!in_view) abort();
  int64_t base = ((const char *)t->hview.data - (const char *)t->host) / (int64_t)es;
  for (int64_t i = 0; i < n; i++)
    in_view[base + ndf__offset(&t->hview, i)] = 1;
  for (int64_t i = 0; i < total; i++)
    if (!in_view[i] && memcmp((const char *)t->host + i * (int64_t)es,
                              (const char *)poisoned_copy + i * (int64_t)es, es))
      changed++;
  free(in_view);
  return changed;
}

/* How a case lays out its arrays: dtypes, strided views, device or host,
 * in place (out is in), and a plan executed twice. */
typedef struct {
  ndf_dtype idt, odt;
  int strided_in, strided_out, dev_in, dev_out, inplace, reuse;
} t_layout;

static inline void t_random_layout(t_layout *l, uint64_t *r, int cuda) {
  l->idt = (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  l->odt = t_randint(r, 0, 2) ? NDF_F32 : (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  l->strided_in = (int)t_randint(r, 0, 1);
  l->strided_out = (int)t_randint(r, 0, 1);
  l->dev_in = cuda && t_randint(r, 0, 1);
  l->dev_out = cuda && t_randint(r, 0, 1);
  l->inplace = t_randint(r, 0, 7) == 0;
  if (l->inplace) {
    l->odt = l->idt;
    l->dev_out = l->dev_in;
    l->strided_out = l->strided_in;
  }
  l->reuse = t_randint(r, 0, 3) == 0;
}

/* Float64 device arrays only (for a forced float64 GPU solver, which takes nothing else),
 * strided or in place now and then. */
static inline void t_f64_layout(t_layout *l, uint64_t *r) {
  l->idt = l->odt = NDF_F64;
  l->strided_in = t_randint(r, 0, 3) == 0;
  l->strided_out = t_randint(r, 0, 3) == 0;
  l->dev_in = l->dev_out = 1;
  l->inplace = !l->strided_in && !l->strided_out && t_randint(r, 0, 4) == 0;
}

/* Executes plan p on in -> po (twice when reuse, the output re-poisoned in
 * between: an execute must be repeatable), synchronises, and downloads po. */
/* One execute of p on in and the nops operands ops (ndf_execute_n; none: ndf_execute). */
static inline ndf_status t_exec1(ndf_plan *p, t_arr *in, int nops, const ndf_array *ops,
                                 t_arr *po) {
  if (!nops) return ndf_execute(p, &in->view, &po->view);
  ndf_array ins[1 + NDF_MAX_DIMS];
  ins[0] = in->view;
  for (int k = 0; k < nops; k++)
    ins[1 + k] = ops[k];
  return ndf_execute_n(p, 1 + nops, ins, 1, &po->view);
}

/* Executes p (twice with reuse, the output poisoned again between) and downloads the output;
 * first_ops: the operands of the first of two runs (NULL: ops). */
static inline ndf_status t_execute_ops(ndf_context *ctx, ndf_plan *p, t_arr *in, int nops,
                                       const ndf_array *ops, const ndf_array *first_ops, t_arr *po,
                                       const void *poisoned, int reuse) {
  ndf_status st = NDF_OK;
  if (reuse) {
    st = t_exec1(p, in, nops, first_ops ? first_ops : ops, po);
    if (st == NDF_OK) st = ndf_context_synchronize(ctx);
    t_arr_download(po, ctx);
    memcpy(po->host, poisoned, po->bytes);
    t_arr_upload(po, ctx);
  }
  if (st == NDF_OK) st = t_exec1(p, in, nops, ops, po);
  if (st == NDF_OK) st = ndf_context_synchronize(ctx);
  t_arr_download(po, ctx);
  return st;
}

static inline ndf_status t_execute(ndf_context *ctx, ndf_plan *p, t_arr *in, t_arr *po,
                                   const void *poisoned, int reuse) {
  return t_execute_ops(ctx, p, in, 0, NULL, NULL, po, poisoned, reuse);
}

/* The output against the float64 reference. Float outputs: max |out - ref| /
 * scale, scale = max of mag (the filter with |w| on |x|), bound tol; NaN (the
 * poison) counts as unwritten. Integer outputs: |out - ref rounded and
 * clamped|, bound 1 + tol * scale (a .5 may flip, and float32 error of up to
 * tol * scale on large sums of 16-bit values may move it further). */
typedef struct {
  int bad, isfloat;
  double worst, bound;
  int64_t wi, unwritten, gaps;
} t_verdict;

static inline t_verdict t_judge(const t_arr *po, const double *ref, const double *mag, double tol,
                                int inplace, const void *poisoned) {
  const int64_t total = ndf_array_size(&po->hview);
  const ndf_dtype odt = po->hview.dtype;
  t_verdict v = {0, odt == NDF_F32 || odt == NDF_F64, -1, 0, 0, 0, 0};
  double scale = 0;
  for (int64_t i = 0; i < total; i++)
    scale = mag[i] > scale ? mag[i] : scale;
  if (scale == 0) scale = 1;
  const double lo = odt == NDF_I16 ? -32768 : 0, hi = odt == NDF_U8    ? 255
                                                      : odt == NDF_U16 ? 65535
                                                                       : 32767;
  for (int64_t i = 0; i < total; i++) {
    double x = ndf__load(odt, po->hview.data, ndf__offset(&po->hview, i)), e;
    if (v.isfloat) {
      if (isnan(x)) v.unwritten++;
      e = isnan(x) ? INFINITY : fabs(x - ref[i]) / scale;
    } else {
      e = fabs(x - ndf__round_clamp(ref[i], lo, hi));
    }
    if (e > v.worst) {
      v.worst = e;
      v.wi = i;
    }
  }
  v.bound = v.isfloat ? tol : 1.0 + tol * scale;
  v.gaps = inplace ? 0 : t_gaps_changed(po, poisoned);
  v.bad = v.worst > v.bound || v.unwritten || v.gaps;
  return v;
}

/* The worst element of a verdict, with its coordinates, on stderr. */
static inline void t_print_worst(const t_arr *po, const double *ref, const t_verdict *v) {
  const ndf_array *a = &po->hview;
  int64_t rem = v->wi, co[NDF_MAX_DIMS];
  for (int d = a->ndim - 1; d >= 0; d--) {
    co[d] = rem % a->shape[d];
    rem /= a->shape[d];
  }
  fprintf(stderr, "  worst element #%lld (", (long long)v->wi);
  for (int d = 0; d < a->ndim; d++)
    fprintf(stderr, "%lld%s", (long long)co[d], d + 1 < a->ndim ? "," : "");
  fprintf(stderr,
          "): got %.9g, reference %.9g, error %.3g (bound %g%s); %lld unwritten, %lld elements "
          "outside the view changed\n",
          ndf__load(a->dtype, a->data, ndf__offset(a, v->wi)), ref[v->wi], v->worst, v->bound,
          v->isfloat ? " relative" : " absolute", (long long)v->unwritten, (long long)v->gaps);
}

/* One case's arrays: in (random data) and out (poisoned; out is in when in
 * place), float64 buffers for the reference (ref) and for the same filter
 * with |w| on |x| (mag, the error's scale), |x| itself (absx, contiguous), and
 * a poisoned copy of out's parent for the gap check. */
typedef struct {
  t_arr in, out, *po;
  double *ref, *mag;
  ndf_array absx;
  void *poisoned;
  t_layout lay;
} t_run;

/* Makes the arrays; the caller then fills ref and mag and calls t_run_ready. */
static inline void t_run_begin(t_run *t, ndf_context *ctx, uint64_t *r, int nd,
                               const int64_t *shape, const t_layout *lay) {
  t->lay = *lay;
  t_arr_make(&t->in, r, lay->idt, nd, shape, lay->strided_in, lay->dev_in ? ctx : NULL);
  t_fill_random(&t->in, r);
  t->po = &t->out;
  if (lay->inplace) {
    t->po = &t->in;
  } else {
    t_arr_make(&t->out, r, lay->odt, nd, shape, lay->strided_out, lay->dev_out ? ctx : NULL);
    t_poison(&t->out);
  }
  const int64_t total = ndf_array_size(&t->in.hview);
  t->ref = malloc((size_t)total * sizeof *t->ref);
  t->mag = malloc((size_t)total * sizeof *t->mag);
  double *ax = malloc((size_t)total * sizeof *ax);
  if (!t->ref || !t->mag || !ax) abort();
  for (int64_t i = 0; i < total; i++)
    ax[i] = fabs(ndf__load(t->in.hview.dtype, t->in.hview.data, ndf__offset(&t->in.hview, i)));
  t->absx = ndf_array_contiguous(NDF_F64, nd, shape, ax);
  t->poisoned = NULL;
}

/* Keeps the poisoned output for the gap check and uploads device arrays. */
static inline void t_run_ready(t_run *t, ndf_context *ctx) {
  t->poisoned = malloc(t->po->bytes);
  if (!t->poisoned) abort();
  memcpy(t->poisoned, t->po->host, t->po->bytes);
  t_arr_upload(&t->in, ctx);
  if (!t->lay.inplace) t_arr_upload(&t->out, ctx);
}

/* Frees a case's arrays and buffers. */
static inline void t_run_free(t_run *t, ndf_context *ctx) {
  free(t->ref);
  free(t->mag);
  free(t->absx.data);
  free(t->poisoned);
  t_arr_free(&t->in, ctx);
  if (!t->lay.inplace) t_arr_free(&t->out, ctx);
}

/* Executes plan p (st: how planning went), checks the solver (method: a
 * solver's name, a kind such as "fft" that a solver's name ends with, or NULL) and
 * the output against ref, counts and reports a failure (describe(c, method)
 * first), destroys p and frees the case. *worst_seen tracks float errors; with
 * NDF_TEST_NEAR=e set, a passing case whose error is over e is described too. */
static inline void t_run_finish(t_run *t, ndf_context *ctx, ndf_plan *p, ndf_status st, int cuda,
                                const char *method, double tol, double *worst_seen,
                                void (*describe)(const void *c, const char *method),
                                const void *c) {
  if (st == NDF_OK)
    st = t_execute(ctx, p, &t->in, t->po, t->poisoned, t->lay.reuse && !t->lay.inplace);
  const char *solver = p ? ndf_plan_solver(p) : "?";
  CHECK(st == NDF_OK, "%s: %s", ndf_status_str(st), ndf_context_message(ctx));
  const char *kind = strchr(solver, '_'); /* "fft" asks for any *_fft */
  CHECK(!method || !strcmp(solver, method) ||
            (!strchr(method, '_') && kind && !strcmp(kind + 1, method)),
        "solver %s, asked for %s", solver, method);
  CHECK(cuda == !strncmp(solver, "cuda", 4), "solver %s on the wrong device", solver);
  ndf_plan_destroy(p);
  if (st == NDF_OK) {
    t_verdict v = t_judge(t->po, t->ref, t->mag, tol, t->lay.inplace, t->poisoned);
    if (v.isfloat && v.worst > *worst_seen) *worst_seen = v.worst;
    const double near = t_env_double("NDF_TEST_NEAR", 0); /* (development: what comes close) */
    if (v.bad) {
      t_failures++;
      describe(c, method);
      t_print_worst(t->po, t->ref, &v);
    } else if (v.isfloat && near > 0 && v.worst > near) {
      fprintf(stderr, "near the bound (NDF_TEST_NEAR=%g), not a failure:\n", near);
      describe(c, method);
      t_print_worst(t->po, t->ref, &v);
    }
  } else {
    describe(c, method);
  }
  t_run_free(t, ctx);
}

#endif
