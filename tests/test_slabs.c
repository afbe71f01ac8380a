/* SPDX-License-Identifier: BSD-3-Clause */
/* test_slabs.c - plans run in slabs of the slowest axis (ndf_context_opts.memory_limit small
 * enough to force them) against the same plans in memory, on host arrays: random 1-4-D
 * shapes, every mode on every axis (wrap on the slab axis too), origins, every dtype in and
 * out, strided and reversed views; separable filters, correlate (direct and FFT), banks, rank
 * filters and ks with operand maps and a bound on the radii. The same solver computes each
 * output row from the same input rows either way: equal within 1e-6 of the output's scale (a
 * box filter's running sums and an FFT's rounding depend on where a line starts), in place too
 * (a slab's neighbours' rows kept as they were). Then recursive Gaussians, in two sweeps.
 *
 * Given several GPUs (a device list, "cuda:all"), the slabs are spread over them; the plan in
 * memory runs on the first.
 *
 *   test_slabs [cpu|cuda|cuda:N,M,...|cuda:all]     (NDF_TEST_SEED, NDF_TEST_CASES) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { SEP, CORR, BANK, RANK, KS, NKIND };
static const char *slab_device = "cpu"; /* the slabbed plans' device (a list spreads them) */
static const char *kind_name[] = {"sepfilter", "correlate", "bank", "rank", "ks"};

typedef struct {
  int kind, nd, nf;
  int64_t shape[NDF_MAX_DIMS], k[NDF_MAX_DIMS];
  ndf_mode mode[NDF_MAX_DIMS];
  int origin[NDF_MAX_DIMS];
  double *w;           /* weights: per axis one after the other (SEP), or nf kernels */
  unsigned char *fp;   /* RANK's footprint */
  int64_t rank, r_max; /* RANK's; KS's bound */
  const char *method;  /* a solver's name, or NULL */
  double sigma_scale;  /* KS: sigmas in [0, sigma_scale) */
} spec;

static ndf_status plan(ndf_plan **p, ndf_context *ctx, const spec *s, const ndf_array *in,
                       const ndf_array *outs, const ndf_array *maps) {
  switch (s->kind) {
  case SEP: {
    ndf_sepfilter_opts o = {.struct_size = sizeof o, .method = s->method, .cval = 0.5};
    const double *w[NDF_MAX_DIMS];
    int64_t off = 0;
    for (int d = 0; d < s->nd; d++) {
      o.mode[d] = s->mode[d];
      o.origin[d] = s->origin[d];
      w[d] = s->w + off;
      off += s->k[d];
    }
    return ndf_plan_sepfilter(p, ctx, in, outs, w, s->k, &o);
  }
  case CORR:
  case BANK: {
    ndf_correlate_opts o = {.struct_size = sizeof o, .method = s->method, .cval = -0.25};
    memcpy(o.mode, s->mode, sizeof o.mode);
    memcpy(o.origin, s->origin, sizeof o.origin);
    if (s->kind == CORR) return ndf_plan_correlate(p, ctx, in, outs, s->w, s->k, &o);
    return ndf_plan_correlate_bank(p, ctx, in, s->nf, outs, s->w, s->k, &o);
  }
  case RANK: {
    ndf_rank_opts o = {.struct_size = sizeof o, .method = s->method, .cval = 2};
    memcpy(o.mode, s->mode, sizeof o.mode);
    memcpy(o.origin, s->origin, sizeof o.origin);
    return ndf_plan_rank(p, ctx, in, outs, s->rank, s->fp, s->k, &o);
  }
  default: {
    ndf_ks_opts o = {.struct_size = sizeof o, .method = s->method, .r_max = s->r_max};
    ndf_array m = maps[0];
    m.data = NULL;
    return ndf_plan_ks(p, ctx, in, outs, &m, 1, &o);
  }
  }
}

static ndf_status run(ndf_plan *p, const spec *s, const ndf_array *in, ndf_array *outs,
                      const ndf_array *maps) {
  if (s->kind == BANK) return ndf_execute_bank(p, in, s->nf, outs);
  if (s->kind == KS) {
    ndf_array ins[2] = {*in, maps[0]};
    return ndf_execute_n(p, 2, ins, 1, outs);
  }
  return ndf_execute(p, in, outs);
}

/* The bytes per element the slabs count (core/slab.c): the image and outputs in their work
 * dtype (float32, float64 kept), two float32 temporaries, operands in float64; on a GPU float32
 * copies of float64 arrays too. */
static double per_element(const spec *s, ndf_dtype idt, ndf_dtype odt, int cuda) {
  const double ein = idt == NDF_F64 ? 8 : 4, eout = odt == NDF_F64 ? 8 : 4;
  const int nout = s->kind == BANK ? s->nf : 1;
  double b = ein + nout * eout + 8 + (s->kind == KS ? 8.0 : 0);
  if (cuda) b += (ein > 4 ? 4 : 0) + (eout > 4 ? 4.0 * nout : 0);
  return b;
}

static void one_case(ndf_context *ctx, int cuda, uint64_t *r, int c) {
  spec s = {.kind = (int)t_randint(r, 0, NKIND - 1), .nf = 1};
  s.nd = (int)t_randint(r, 1, 4);
  if (s.kind == KS && s.nd > 3) s.nd = 3;
  int64_t n = 1, nw = 1;
  for (int d = 0; d < s.nd; d++) {
    s.shape[d] = d == 0 ? t_randint(r, 24, 90) : t_randint(r, 1, s.nd > 2 ? 9 : 40);
    s.k[d] = t_randint(r, 1, d == 0 ? 9 : 5);
    s.mode[d] = (ndf_mode)t_randint(r, 0, 4);
    s.origin[d] = (int)t_randint(r, -(s.k[d] / 2), (s.k[d] - 1) / 2);
    n *= s.shape[d];
    nw *= s.k[d];
  }
  if (s.kind == SEP) nw = s.k[0] + s.k[1] + s.k[2] + s.k[3];
  if (s.kind == BANK) s.nf = (int)t_randint(r, 2, 3);
  s.w = malloc((size_t)(nw * s.nf) * sizeof *s.w);
  s.fp = malloc((size_t)nw);
  if (!s.w || !s.fp) abort();
  for (int64_t j = 0; j < nw * s.nf; j++)
    s.w[j] = ndf_rand_uniform(r);
  int64_t m = 0;
  for (int64_t j = 0; j < nw; j++)
    m += s.fp[j] = t_randint(r, 0, 3) > 0;
  if (!m) m = s.fp[0] = 1;
  s.rank = t_randint(r, -m, m - 1);
  const int use_fp = s.kind == RANK && t_randint(r, 0, 1);
  if (!use_fp) {
    memset(s.fp, 1, (size_t)nw);
    if (s.kind == RANK) s.rank = t_randint(r, -nw, nw - 1);
  }
  if (s.kind == KS) {
    s.r_max = t_randint(r, 1, 6);
    s.sigma_scale = (double)s.r_max / 3.0;
  }
  static const char *cpu_methods[][3] = {{"cpu_sep", "cpu_box", NULL},
                                         {"cpu_direct", "cpu_fft", NULL},
                                         {"cpu_direct", "cpu_fft", NULL},
                                         {"cpu_rank", NULL, NULL},
                                         {"cpu_ks", NULL, NULL}};
  static const char *cuda_methods[][3] = {{"cuda_sep", "cuda_corr1d", NULL},
                                          {"cuda_direct", "cuda_fft", NULL},
                                          {"cuda_direct", "cuda_fft", NULL},
                                          {"cuda_rank", NULL, NULL},
                                          {"cuda_ks_gather", NULL, NULL}};
  const int which = (int)t_randint(r, 0, 2);
  s.method = (cuda ? cuda_methods : cpu_methods)[s.kind][which];
  if (s.kind == SEP && s.method && !strcmp(s.method, "cuda_corr1d")) s.method = NULL;
  if (s.kind == SEP && s.method && !strcmp(s.method, "cpu_box")) s.method = NULL;
  if (s.kind == KS) s.method = NULL;

  ndf_dtype idt = s.kind == KS ? NDF_F32 : (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  if (cuda && s.kind == RANK && idt == NDF_F64) idt = NDF_F32; /* float64: device arrays only */
  const ndf_dtype odt = s.kind == RANK ? idt : t_randint(r, 0, 1) ? NDF_F32 : NDF_F64;
  t_arr in, maps, outs_a[3], outs_b[3];
  t_arr_make(&in, r, idt, s.nd, s.shape, (int)t_randint(r, 0, 1), NULL);
  t_fill_random(&in, r);
  t_arr_make(&maps, r, NDF_F64, s.nd, s.shape, 0, NULL);
  for (int64_t i = 0; i < n; i++)
    ((double *)maps.hview.data)[i] =
        s.sigma_scale * ndf_rand_uniform(r) * 0.5 + 0.5 * s.sigma_scale;
  ndf_array oa[3], ob[3];
  for (int f = 0; f < s.nf; f++) {
    t_arr_make(&outs_a[f], r, odt, s.nd, s.shape, (int)t_randint(r, 0, 1), NULL);
    t_arr_make(&outs_b[f], r, odt, s.nd, s.shape, 0, NULL);
    t_poison(&outs_a[f]);
    t_poison(&outs_b[f]);
    oa[f] = outs_a[f].view;
    ob[f] = outs_b[f].view;
  }
  /* A limit that leaves the slab axis a few rows past the reach per slab. */
  const int64_t row = n / s.shape[0];
  const int64_t reach = s.kind == KS ? 2 * s.r_max : s.k[0] - 1;
  const int64_t L = reach + t_randint(r, 1, 8);
  const int workers = cuda ? 2 : 1;
  ndf_context_opts co = {.struct_size = sizeof co,
                         .device = slab_device,
                         .memory_limit = (size_t)((double)(workers * L * row + row / 2) *
                                                  per_element(&s, idt, odt, cuda))};
  ndf_context *small = NULL;
  if (ndf_context_create(&small, &co) != NDF_OK) abort();

  ndf_plan *pa = NULL, *pb = NULL;
  ndf_status st = plan(&pa, small, &s, &in.view, oa, &maps.view);
  if (st == NDF_OK) st = plan(&pb, ctx, &s, &in.view, ob, &maps.view);
  CHECK(st == NDF_OK, "case %d (%s): %s / %s", c, kind_name[s.kind], ndf_context_message(small),
        ndf_context_message(ctx));
  const int64_t slabs = ndf_plan_slabs(pa);
  /* in slabs where the whole would pass the limit (a worker's buffer of L rows fits) */
  const int whole =
      (double)(s.shape[0] * row) * per_element(&s, idt, odt, cuda) <= (double)co.memory_limit;
  CHECK(st != NDF_OK || whole || slabs > 0,
        "case %d (%s): %lld rows, %lld per buffer, not in slabs", c, kind_name[s.kind],
        (long long)s.shape[0], (long long)L);
  CHECK(ndf_plan_slabs(pb) == 0, "case %d: the unlimited plan runs in slabs", c);
  if (st == NDF_OK) st = run(pa, &s, &in.view, oa, &maps.view);
  CHECK(st == NDF_OK, "case %d (%s) in slabs: %s", c, kind_name[s.kind],
        ndf_context_message(small));
  if (st == NDF_OK) st = run(pb, &s, &in.view, ob, &maps.view);
  CHECK(st == NDF_OK, "case %d (%s) in memory: %s", c, kind_name[s.kind], ndf_context_message(ctx));
  for (int f = 0; f < s.nf && st == NDF_OK; f++) {
    double scale = 0, worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
      const double b = ndf__load(odt, ob[f].data, ndf__offset(&ob[f], i));
      scale = fmax(scale, fabs(b));
    }
    for (int64_t i = 0; i < n; i++) {
      const double a = ndf__load(odt, oa[f].data, ndf__offset(&oa[f], i));
      const double b = ndf__load(odt, ob[f].data, ndf__offset(&ob[f], i));
      const double e = a == b ? 0 : isnan(a) || isnan(b) ? INFINITY : fabs(a - b);
      if (e > worst) {
        worst = e;
        at = i;
      }
    }
    /* float32 arithmetic: its rounding is relative to the terms' magnitude (the input's
     * largest times the weights' absolute sum), which cancellation can put above the output's */
    double mag = 0, wsum = 1;
    for (int64_t i = 0; i < n; i++)
      mag = fmax(mag, fabs(ndf__load(idt, in.view.data, ndf__offset(&in.view, i))));
    if (s.kind == SEP) {
      for (int d = 0, off = 0; d < s.nd; off += (int)s.k[d], d++) {
        double a = 0;
        for (int j = 0; j < s.k[d]; j++)
          a += fabs(s.w[off + j]);
        wsum *= a;
      }
    } else if (s.kind == CORR || s.kind == BANK) {
      wsum = 0;
      for (int64_t j = 0; j < nw; j++)
        wsum += fabs(s.w[f * nw + j]);
    }
    mag *= wsum;
    const double tol = odt == NDF_F32 || odt == NDF_F64 ? 1e-6 * (fmax(scale, mag) + 1e-30) : 1.0;
    if (worst > tol) {
      fprintf(stderr,
              "  case %d: %s by %s, %dD %lld rows (%lld a slab, reach %lld), %s -> %s, modes "
              "%d %d %d %d: output %d element %lld is %.9g in slabs, %.9g in memory (scale %g)\n",
              c, kind_name[s.kind], ndf_plan_solver(pa), s.nd, (long long)s.shape[0],
              (long long)slabs, (long long)reach, ndf_dtype_name(idt), ndf_dtype_name(odt),
              s.mode[0], s.mode[1], s.mode[2], s.mode[3], f, (long long)at,
              ndf__load(odt, oa[f].data, ndf__offset(&oa[f], at)),
              ndf__load(odt, ob[f].data, ndf__offset(&ob[f], at)), scale);
      t_failures++;
    }
  }
  if (st == NDF_OK && s.kind != BANK && s.kind != KS && slabs > 0) {
    /* in place (the rows a slab reads beside its own kept before any is written): the same
     * result; refused, changing nothing, where the dtypes differ */
    ndf_status ip = ndf_execute(pa, &in.view, &in.view);
    CHECK(idt != odt ? ip == NDF_EINVAL : ip == NDF_OK,
          "case %d (%s): in place in slabs, reach %lld, gave %s: %s", c, kind_name[s.kind],
          (long long)reach, ndf_status_str(ip), ndf_context_message(small));
    double scale = 0;
    for (int64_t i = 0; i < n; i++)
      scale = fmax(scale, fabs(ndf__load(odt, ob[0].data, ndf__offset(&ob[0], i))));
    const double ptol = odt == NDF_F32 || odt == NDF_F64 ? 1e-6 * scale : 1.0;
    for (int64_t i = 0; ip == NDF_OK && idt == odt && i < n; i++) {
      const double a = ndf__load(idt, in.view.data, ndf__offset(&in.view, i));
      const double b = ndf__load(odt, ob[0].data, ndf__offset(&ob[0], i));
      if (a != b && !(fabs(a - b) <= ptol)) {
        CHECK(0,
              "case %d: %s by %s, %dD %lld rows (%lld a slab, reach %lld), modes %d %d %d %d: in "
              "place element %lld is %g, %g out of place",
              c, kind_name[s.kind], ndf_plan_solver(pa), s.nd, (long long)s.shape[0],
              (long long)slabs, (long long)reach, s.mode[0], s.mode[1], s.mode[2], s.mode[3],
              (long long)i, a, b);
        break;
      }
    }
  }
  ndf_plan_destroy(pa);
  ndf_plan_destroy(pb);
  ndf_context_destroy(small);
  for (int f = 0; f < s.nf; f++) {
    t_arr_free(&outs_a[f], NULL);
    t_arr_free(&outs_b[f], NULL);
  }
  t_arr_free(&in, NULL);
  t_arr_free(&maps, NULL);
  free(s.w);
  free(s.fp);
}

/* A recursive Gaussian in slabs (two sweeps: the other axes in slabs of axis 0, then axis 0 in
 * slabs of axis 1) against the same filter in memory: random shapes, sigmas (0 on some axes),
 * dtypes in and out (an integer output needs a float32 array between the sweeps), strided
 * views, in place. */
static void recursive_case(ndf_context *ctx, int cuda, uint64_t *r, int c) {
  const int nd = (int)t_randint(r, 2, 4);
  int64_t shape[NDF_MAX_DIMS] = {0}, n = 1;
  ndf_gaussian_opts go = {.struct_size = sizeof go, .method = "iir"};
  int filtered = 0;
  for (int d = 0; d < nd; d++) {
    shape[d] = t_randint(r, d < 2 ? 6 : 1, d < 2 ? 24 : 6);
    n *= shape[d];
    go.mode[d] = NDF_MODE_NEAREST;
    go.sigma[d] = t_randint(r, 0, 3) ? 3.3 + 2.5 * ndf_rand_uniform(r) : 0;
    filtered |= go.sigma[d] > 0;
  }
  if (!filtered || t_randint(r, 0, 1)) go.sigma[0] = 3 + 2 * ndf_rand_uniform(r);
  const ndf_dtype idt = (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  const ndf_dtype odts[] = {NDF_F32, NDF_F64, NDF_I16};
  const ndf_dtype odt = odts[t_randint(r, 0, 2)];
  t_arr in, oa, ob;
  t_arr_make(&in, r, idt, nd, shape, (int)t_randint(r, 0, 1), NULL);
  t_fill_random(&in, r);
  t_arr_make(&oa, r, odt, nd, shape, (int)t_randint(r, 0, 1), NULL);
  t_arr_make(&ob, r, odt, nd, shape, 0, NULL);
  t_poison(&oa);
  t_poison(&ob);
  /* a limit of a fraction k of the lighter sweep's work (bytes an element as core/slab.c counts
   * them; two workers share a GPU's limit): both sweeps in slabs of a few rows */
  const int64_t k = t_randint(r, cuda ? 3 : 2, (shape[0] < shape[1] ? shape[0] : shape[1]) / 2);
  int others = 0;
  for (int d = 1; d < nd; d++)
    others |= go.sigma[d] > 0;
  const double ein = idt == NDF_F64 ? 8 : 4, eout = odt == NDF_F64 ? 8 : 4;
  const double emid = odt == NDF_F64 ? 8 : 4; /* the output, or a float32 array */
  const double g = cuda ? 1 : 0;
  const double pa_ = ein + emid + 8 + g * ((ein > 4 ? 4 : 0) + (emid > 4 ? 4 : 0));
  const double pb_ = (others ? emid : ein) + eout + 8 +
                     g * (((others ? emid : ein) > 4 ? 4 : 0) + (eout > 4 ? 4 : 0));
  const double least = others && pa_ < pb_ ? pa_ : pb_;
  ndf_context_opts co = {.struct_size = sizeof co,
                         .device = slab_device,
                         .memory_limit =
                             (size_t)(1.01 * least * (double)n * (cuda ? 2 : 1) / (double)k)};
  ndf_context *small = NULL;
  if (ndf_context_create(&small, &co) != NDF_OK) abort();
  ndf_plan *pa = NULL, *pb = NULL;
  ndf_status st = ndf_plan_gaussian(&pa, small, &in.view, &oa.view, &go);
  if (st == NDF_OK) st = ndf_plan_gaussian(&pb, ctx, &in.view, &ob.view, &go);
  CHECK(st == NDF_OK, "recursive case %d: %s / %s", c, ndf_context_message(small),
        ndf_context_message(ctx));
  CHECK(st != NDF_OK || ndf_plan_slabs(pa) > 0, "recursive case %d: %dD, %lld x %lld, not in slabs",
        c, nd, (long long)shape[0], (long long)shape[1]);
  if (st == NDF_OK) st = ndf_execute(pa, &in.view, &oa.view);
  if (st == NDF_OK) st = ndf_execute(pb, &in.view, &ob.view);
  CHECK(st == NDF_OK, "recursive case %d: %s / %s", c, ndf_context_message(small),
        ndf_context_message(ctx));
  double scale = 0, worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < n && st == NDF_OK; i++)
    scale = fmax(scale, fabs(ndf__load(odt, ob.view.data, ndf__offset(&ob.view, i))));
  for (int64_t i = 0; i < n && st == NDF_OK; i++) {
    const double a = ndf__load(odt, oa.view.data, ndf__offset(&oa.view, i));
    const double b = ndf__load(odt, ob.view.data, ndf__offset(&ob.view, i));
    const double e = a == b ? 0 : isnan(a) || isnan(b) ? INFINITY : fabs(a - b);
    if (e > worst) worst = e, at = i;
  }
  const double tol = odt == NDF_I16 ? 1.0 : 1e-6 * (scale + 1e-30);
  if (worst > tol) {
    fprintf(stderr,
            "  recursive case %d: %dD %lld x %lld x %lld x %lld, sigmas %g %g %g %g, %s -> %s, "
            "slabs %lld: element %lld is %g in slabs, %g in memory\n",
            c, nd, (long long)shape[0], (long long)shape[1], (long long)shape[2],
            (long long)shape[3], go.sigma[0], go.sigma[1], go.sigma[2], go.sigma[3],
            ndf_dtype_name(idt), ndf_dtype_name(odt), (long long)ndf_plan_slabs(pa), (long long)at,
            ndf__load(odt, oa.view.data, ndf__offset(&oa.view, at)),
            ndf__load(odt, ob.view.data, ndf__offset(&ob.view, at)));
    t_failures++;
  }
  if (st == NDF_OK && idt == odt) { /* in place: the same result */
    st = ndf_execute(pa, &in.view, &in.view);
    CHECK(st == NDF_OK, "recursive case %d in place: %s", c, ndf_context_message(small));
    for (int64_t i = 0; st == NDF_OK && i < n; i++) {
      const double a = ndf__load(idt, in.view.data, ndf__offset(&in.view, i));
      const double b = ndf__load(odt, ob.view.data, ndf__offset(&ob.view, i));
      if (a != b && !(fabs(a - b) <= tol)) {
        CHECK(0, "recursive case %d in place: element %lld is %g, %g out of place", c, (long long)i,
              a, b);
        break;
      }
    }
  }
  ndf_plan_destroy(pa);
  ndf_plan_destroy(pb);
  ndf_context_destroy(small);
  t_arr_free(&in, NULL);
  t_arr_free(&oa, NULL);
  t_arr_free(&ob, NULL);
}

/* Page-locked arrays (ndf_array_alloc_host), which the slabs copy to and from the devices
 * directly (but for rows that wrap around): a Gaussian against the same in memory. */
static void page_locked_case(ndf_context *ctx, uint64_t *r, int c) {
  const int64_t shape[3] = {t_randint(r, 40, 80), t_randint(r, 3, 30), t_randint(r, 1, 20)};
  const int64_t n = shape[0] * shape[1] * shape[2];
  const int per_device = strncmp(slab_device, "cuda", 4) ? 1 : 2; /* workers */
  ndf_context_opts co = {.struct_size = sizeof co,
                         .device = slab_device,
                         .memory_limit = (size_t)(per_device * 16 * 16 * shape[1] * shape[2])};
  ndf_context *small = NULL;
  if (ndf_context_create(&small, &co) != NDF_OK) abort();
  ndf_array in, out, ref;
  if (ndf_array_alloc_host(small, &in, NDF_F32, 3, shape) != NDF_OK ||
      ndf_array_alloc_host(small, &out, NDF_F32, 3, shape) != NDF_OK ||
      ndf_array_alloc_host(small, &ref, NDF_F32, 3, shape) != NDF_OK)
    abort();
  for (int64_t i = 0; i < n; i++) {
    ((float *)in.data)[i] = (float)ndf_rand_uniform(r);
    ((float *)out.data)[i] = ((float *)ref.data)[i] = NAN;
  }
  ndf_gaussian_opts go = {.struct_size = sizeof go, .sigma = {1, 1.5, 0.7}}; /* reach 4 + 4 */
  go.mode[0] = t_randint(r, 0, 1) ? NDF_MODE_WRAP : NDF_MODE_REFLECT;
  ndf_plan *pa = NULL, *pb = NULL;
  ndf_status st = ndf_plan_gaussian(&pa, small, &in, &out, &go);
  if (st == NDF_OK) st = ndf_plan_gaussian(&pb, ctx, &in, &ref, &go);
  CHECK(st == NDF_OK && ndf_plan_slabs(pa) > 0, "page-locked case %d: %s, slabs %lld", c,
        ndf_context_message(small), (long long)ndf_plan_slabs(pa));
  if (st == NDF_OK) st = ndf_execute(pa, &in, &out);
  if (st == NDF_OK) st = ndf_execute(pb, &in, &ref);
  CHECK(st == NDF_OK, "page-locked case %d: %s / %s", c, ndf_context_message(small),
        ndf_context_message(ctx));
  for (int64_t i = 0; st == NDF_OK && i < n; i++) {
    const float a = ((float *)out.data)[i], b = ((float *)ref.data)[i];
    if (!(fabsf(a - b) <= 1e-6f)) {
      CHECK(0, "page-locked case %d (%s): element %lld is %g in slabs, %g in memory", c,
            ndf_mode_name(go.mode[0]), (long long)i, a, b);
      break;
    }
  }
  ndf_plan_destroy(pa);
  ndf_plan_destroy(pb);
  ndf_array_free(small, &in);
  ndf_array_free(small, &out);
  ndf_array_free(small, &ref);
  ndf_context_destroy(small);
}

int main(int argc, char **argv) {
  ndf_context *ctx;
  const char *dev = argc > 1 ? argv[1] : "cpu";
  const int cuda = !strncmp(dev, "cuda", 4);
  const int rc = t_open(&ctx, cuda ? "cuda" : "cpu");
  if (rc) return rc;
  slab_device = dev;
  if (cuda) { /* the one the list puts first */
    ndf_context *multi = NULL;
    ndf_context_opts co = {.struct_size = sizeof co, .device = dev};
    if (ndf_context_create(&multi, &co) != NDF_OK) {
      printf("no usable %s: skipped\n", dev);
      ndf_context_destroy(ctx);
      return strcmp(dev, "cuda") ? SKIP : 1;
    }
    printf("slabs on %s\n", ndf_context_device_name(multi));
    ndf_context_destroy(ctx);
    ctx = NULL;
    char first[16];
    int d0 = 0;
    ndf_context_devices(multi, &d0, 1);
    snprintf(first, sizeof first, "cuda:%d", d0);
    ndf_context_destroy(multi);
    if (t_open(&ctx, first)) return 1;
  }
  uint64_t r = t_seed();
  const int ncases = (int)t_env_double("NDF_TEST_CASES", 120);
  for (int c = 0; c < ncases; c++)
    one_case(ctx, cuda, &r, c);
  for (int c = 0; c < ncases / 3; c++)
    recursive_case(ctx, cuda, &r, c);
  for (int c = 0; c < ncases / 10; c++)
    page_locked_case(ctx, &r, c);
  ndf_context_destroy(ctx);
  printf("%d cases; %d failures\n", ncases, t_failures);
  return t_failures ? 1 : 0;
}
