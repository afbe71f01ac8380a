/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sep.c - separable solvers (correlate1d/convolve1d, sepfilter, gaussian) against the
 * float64 reference, on random shapes, kernels, modes, dtypes, strides and places.
 * usage: test_sep cpu|cuda [method]  (exit 77 = skipped: no usable device)
 * A one-axis method (cpu_corr1d, cuda_corr1d) gets one-axis cases only. */
#include "common.h"
#include "golden_scipy.h"
#include "ref/ref.h"

/* max |out - ref| / max of the same filter with |w| on |x| (float outputs) */
static double t_tol = 1e-5;
static double worst_seen;

enum { API_1D, API_SEP, API_GAUSS };
static const char *const api_names[3] = {"correlate1d", "sepfilter", "gaussian"};

typedef struct {
  int api, nd, conv;
  t_layout lay;            /* dtypes, strides, places, in place, reuse */
  int axis;                /* API_1D: the axis */
  int64_t n[NDF_MAX_DIMS]; /* weights per axis, 0: not filtered */
  int origin[NDF_MAX_DIMS];
  ndf_mode mode[NDF_MAX_DIMS];
  double sigma[NDF_MAX_DIMS]; /* API_GAUSS */
  int order[NDF_MAX_DIMS], radius[NDF_MAX_DIMS];
  double truncate;
  int64_t shape[NDF_MAX_DIMS];

  double cval;
} tcase;

static void describe(const tcase *c, const char *method) {
  fprintf(stderr, "  case: %s%s ndim=%d shape=(", api_names[c->api], c->conv ? " (convolve)" : "",
          c->nd);
  for (int d = 0; d < c->nd; d++)
    fprintf(stderr, "%lld%s", (long long)c->shape[d], d + 1 < c->nd ? "," : "");
  fprintf(stderr, ")");
  for (int d = 0; d < c->nd; d++)
    if (c->n[d]) {
      fprintf(stderr, " [axis %d: n=%lld origin=%d mode=%s", d, (long long)c->n[d], c->origin[d],
              ndf_mode_name(c->mode[d]));
      if (c->api == API_GAUSS)
        fprintf(stderr, " sigma=%.17g order=%d radius=%d truncate=%.17g", c->sigma[d], c->order[d],
                c->radius[d], c->truncate);
      fprintf(stderr, "]");
    }
  fprintf(stderr, " cval=%g in=%s%s%s out=%s%s%s%s method=%s\n", c->cval,
          ndf_dtype_name(c->lay.idt), c->lay.strided_in ? "/strided" : "",
          c->lay.dev_in ? "/device" : "", ndf_dtype_name(c->lay.odt),
          c->lay.strided_out ? "/strided" : "", c->lay.dev_out ? "/device" : "",
          c->lay.inplace ? " in-place" : "", method ? method : "auto");
}

/* Boxes only (the solver forced is cpu_box, the running sums); else one case in four has box
 * weights (one value along each axis: scipy's uniform_filter), which auto may run as cpu_box. */
static int boxes;

/* Float64 device arrays only (the solver forced is cuda_sep64, which takes nothing else). */
static int f64_only;

/* The case's kernels: random weights, boxes, or the reference's Gaussian kernels. */
static void make_weights(const tcase *c, uint64_t *r, double *w[NDF_MAX_DIMS],
                         double *aw[NDF_MAX_DIMS]) {
  const int box = c->api != API_GAUSS && (boxes || t_randint(r, 0, 3) == 0);
  for (int d = 0; d < c->nd; d++) {
    w[d] = aw[d] = NULL;
    if (!c->n[d]) continue;
    w[d] = malloc((size_t)c->n[d] * sizeof(double));
    aw[d] = malloc((size_t)c->n[d] * sizeof(double));
    if (c->api == API_GAUSS) {
      if (ndf_ref_gaussian_kernel(c->sigma[d], c->order[d], (int)(c->n[d] / 2), w[d])) abort();
    } else {
      const double v = ndf_rand_uniform(r);
      for (int64_t j = 0; j < c->n[d]; j++)
        w[d][j] = box ? v : ndf_rand_uniform(r);
    }
    for (int64_t j = 0; j < c->n[d]; j++)
      aw[d][j] = fabs(w[d][j]);
  }
}

static ndf_status plan_case(ndf_plan **p, ndf_context *ctx, const tcase *c, const char *method,
                            const ndf_array *in, const ndf_array *out, double *const *w,
                            uint64_t *r) {
  switch (c->api) {
  case API_1D: {
    ndf_correlate1d_opts o = {sizeof o, method, c->mode[c->axis], c->cval, c->origin[c->axis]};
    int axis = c->axis - (t_randint(r, 0, 1) ? c->nd : 0); /* negative axes too */
    const double *wa = w[c->axis];
    return c->conv ? ndf_plan_convolve1d(p, ctx, in, out, wa, c->n[c->axis], axis, &o)
                   : ndf_plan_correlate1d(p, ctx, in, out, wa, c->n[c->axis], axis, &o);
  }
  case API_SEP: {
    ndf_sepfilter_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.method = method;
    o.convolve = c->conv;
    o.cval = c->cval;
    memcpy(o.mode, c->mode, sizeof o.mode);
    memcpy(o.origin, c->origin, sizeof o.origin);
    return ndf_plan_sepfilter(p, ctx, in, out, (const double *const *)w, c->n, &o);
  }
  default: {
    ndf_gaussian_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.method = method ? method : t_randint(r, 0, 1) ? "fir" : NULL;
    o.truncate = c->truncate;
    o.cval = c->cval;
    memcpy(o.sigma, c->sigma, sizeof o.sigma);
    memcpy(o.order, c->order, sizeof o.order);
    memcpy(o.radius, c->radius, sizeof o.radius);
    memcpy(o.mode, c->mode, sizeof o.mode);
    return ndf_plan_gaussian(p, ctx, in, out, &o);
  }
  }
}

static void describe_cb(const void *c, const char *method) { describe(c, method); }

static void run_case(ndf_context *ctx, int cuda, const char *method, const tcase *c, uint64_t *r) {
  t_run t;
  t_run_begin(&t, ctx, r, c->nd, c->shape, &c->lay);
  double *w[NDF_MAX_DIMS], *aw[NDF_MAX_DIMS];
  make_weights(c, r, w, aw);
  ndf_ref_sepfilter(&t.in.hview, t.ref, (const double *const *)w, c->n, c->mode, c->cval, c->origin,
                    c->conv);
  ndf_ref_sepfilter(&t.absx, t.mag, (const double *const *)aw, c->n, c->mode, fabs(c->cval),
                    c->origin, c->conv);
  t_run_ready(&t, ctx);
  ndf_plan *p = NULL;
  ndf_status st = plan_case(&p, ctx, c, method, &t.in.view, &t.po->view, w, r);
  /* a float64 input that a float64 solver computes, into float64: float64's rounding */
  const int exact =
      st == NDF_OK && c->lay.idt == NDF_F64 && c->lay.odt == NDF_F64 &&
      (!strcmp(ndf_plan_solver(p), "cpu_sep") || !strcmp(ndf_plan_solver(p), "cpu_box") ||
       !strcmp(ndf_plan_solver(p), "cpu_corr1d") || !strcmp(ndf_plan_solver(p), "cuda_sep64"));
  t_run_finish(&t, ctx, p, st, cuda, method, exact ? 1e-13 : t_tol, &worst_seen, describe_cb, c);
  for (int d = 0; d < c->nd; d++) {
    free(w[d]);
    free(aw[d]);
  }
}

/* Kernel length for an axis of length len: mostly short, sometimes longer
 * than the axis, sometimes in the larger tap buckets of the GPU kernels. */
static int64_t random_n(uint64_t *r, int64_t len) {
  switch (t_randint(r, 0, 7)) {
  case 0: return t_randint(r, len + 1, 2 * len + 6);
  case 1: return t_randint(r, 13, 300);
  default: return t_randint(r, 1, 12);
  }
}

static void random_case(tcase *c, uint64_t *r, int cuda, int one_axis) {
  static const int64_t maxdim[5] = {0, 300, 40, 14, 7};
  memset(c, 0, sizeof *c);
  c->api = one_axis ? API_1D : (int)t_randint(r, API_1D, boxes ? API_SEP : API_GAUSS);
  c->nd = (int)t_randint(r, 1, 4);
  for (int d = 0; d < c->nd; d++) {
    c->shape[d] = t_randint(r, 0, 5) == 0 ? 1 : t_randint(r, 2, maxdim[c->nd]);
    c->mode[d] = (ndf_mode)t_randint(r, 0, 4);
  }
  if (c->api == API_1D) {
    c->axis = (int)t_randint(r, 0, c->nd - 1);
    c->n[c->axis] = random_n(r, c->shape[c->axis]);
  } else if (c->api == API_SEP) {
    for (int d = 0; d < c->nd; d++)
      if (t_randint(r, 0, 3)) c->n[d] = random_n(r, c->shape[d]);
    if (c->nd >= 2 && t_randint(r, 0, 2) == 0) /* what cuda_sep fuses: same odd n <= 17 */
      c->n[c->nd - 1] = c->n[c->nd - 2] = 2 * t_randint(r, 1, 8) + 1;
  } else {
    c->truncate = t_randint(r, 0, 1) ? 0 : 1 + 4 * fabs(ndf_rand_uniform(r) * ndf_rand_uniform(r));
    const double tr = c->truncate == 0 ? 4.0 : c->truncate;
    for (int d = 0; d < c->nd; d++) {
      if (t_randint(r, 0, 4) == 0) continue; /* sigma 0: not filtered */
      c->sigma[d] = t_randint(r, 0, 5) == 0 ? 4 + 20 * fabs(ndf_rand_uniform(r))
                                            : 0.3 + 3 * fabs(ndf_rand_uniform(r));
      c->order[d] = (int)t_randint(r, 0, 2);
      if (t_randint(r, 0, 4) == 0) c->radius[d] = (int)t_randint(r, 1, 20);
      int64_t rad = c->radius[d] ? c->radius[d] : (int64_t)(tr * c->sigma[d] + 0.5);
      c->n[d] = 2 * rad + 1;
    }
  }
  for (int d = 0; d < c->nd; d++)
    if (c->n[d] && c->api != API_GAUSS)
      c->origin[d] = (int)t_randint(r, -(c->n[d] / 2), (c->n[d] - 1) / 2);
  c->cval = 2 * ndf_rand_uniform(r);
  c->conv = c->api != API_GAUSS && t_randint(r, 0, 1);
  t_random_layout(&c->lay, r, cuda);
  if (f64_only) t_f64_layout(&c->lay, r);
}

/* The library's gaussian on the CPU against scipy's gaussian_filter outputs. */
static void golden_gaussian(ndf_context *ctx, const char *method) {
  int64_t s2[2] = {5, 4};
  ndf_array x = ndf_array_contiguous(NDF_F64, 2, s2, (void *)golden_x2);
  for (size_t k = 0; k < sizeof golden_gauss / sizeof golden_gauss[0]; k++) {
    const ggauss *g = &golden_gauss[k];
    double y[20];
    ndf_array out = ndf_array_contiguous(NDF_F64, 2, s2, y);
    ndf_gaussian_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.method = method;
    o.truncate = g->truncate;
    o.cval = G_CVAL;
    for (int d = 0; d < 2; d++) {
      o.sigma[d] = g->sigma[d];
      o.order[d] = g->order[d];
      o.mode[d] = (ndf_mode)g->mode[d];
    }
    ndf_status st = ndf_gaussian(ctx, &x, &out, &o);
    double e = 0;
    for (int i = 0; i < 20; i++)
      e = fmax(e, fabs(y[i] - g->y[i]));
    CHECK(st == NDF_OK && e < 1e-5, "gaussian_filter golden case %zu: %s, off by %g", k,
          ndf_status_str(st), e);
  }
}

int main(int argc, char **argv) {
  const char *dev = argc > 1 ? argv[1] : "cpu";
  const char *method = argc > 2 ? argv[2] : NULL;
  const int cuda = !strcmp(dev, "cuda");
  const int one_axis = method && (strstr(method, "corr1d") || strstr(method, "direct"));
  boxes = method && strstr(method, "box");
  f64_only = method && strstr(method, "sep64");
  ndf_context *ctx;
  const int rc = t_open(&ctx, dev);
  if (rc) return rc;
  uint64_t r = t_seed();
  t_tol = t_env_double("NDF_TEST_TOL", t_tol);
  int ncases = (int)t_env_double("NDF_TEST_CASES", 400);
  tcase c;
  for (int k = 0; k < ncases; k++) {
    random_case(&c, &r, cuda, one_axis);
    run_case(ctx, cuda, method, &c, &r);
  }
  /* Larger arrays, so that every thread and block has lines to do, with
   * kernels in each tap bucket of the GPU kernels and past the largest; the last two
   * interleaved (3 and 2 channels last: cuda_sep's column pass across rows of [P][Q]). */
  static const int64_t big[6][4] = {{37, 64, 65}, {5, 7, 33, 129}, {4099},
                                    {67, 1031},   {301, 67, 3},    {9, 40, 130, 2}};
  static const int bnd[6] = {3, 4, 1, 2, 3, 4};
  static const int64_t taps[] = {3, 9, 16, 33, 64, 65, 129, 200, 256, 257, 301};
  int t = 0;
  for (int b = 0; b < 6; b++)
    for (int axis = 0; axis < bnd[b]; axis++)
      for (int rep = 0; rep < (b == 3 ? 6 : 1); rep++, t++) {
        memset(&c, 0, sizeof c);
        c.nd = bnd[b];
        memcpy(c.shape, big[b], sizeof c.shape);
        c.api = one_axis ? API_1D : API_SEP;
        c.axis = axis;
        for (int d = 0; d < c.nd; d++) {
          c.mode[d] = (ndf_mode)((axis + d + rep) % 5);
          if (d == axis || (!one_axis && b == 3)) c.n[d] = taps[(t + d) % 11];
        }
        c.lay.idt = c.lay.odt = NDF_F32;
        c.lay.dev_in = c.lay.dev_out = cuda;
        if (f64_only) t_f64_layout(&c.lay, &r);
        c.cval = 0.5;
        run_case(ctx, cuda, method, &c, &r);
      }
  /* The last two axes in one pass (cuda_sep's sep_yx): tiles cut by the
   * array's edges, every mode on each axis, origins, cval != 0. */
  static const int64_t fz[3][3] = {{67, 1031}, {130, 129}, {3, 45, 200}};
  for (int b = 0; b < 3 && !one_axis; b++)
    for (int n = 3; n <= 17; n += 2, t++) {
      memset(&c, 0, sizeof c);
      c.nd = b == 2 ? 3 : 2;
      memcpy(c.shape, fz[b], sizeof fz[b]);
      c.api = API_SEP;
      for (int d = 0; d < c.nd; d++) {
        c.mode[d] = (ndf_mode)((n + 2 * d + b) % 5);
        c.n[d] = d == 0 && c.nd == 3 ? 0 : n;
        c.origin[d] = c.n[d] ? (int)t_randint(&r, -(n / 2), n / 2) : 0;
      }
      c.conv = n % 4 == 1;
      c.lay.idt = c.lay.odt = NDF_F32;
      c.lay.dev_in = c.lay.dev_out = cuda;
      if (f64_only) t_f64_layout(&c.lay, &r);
      c.cval = 0.5;
      run_case(ctx, cuda, method, &c, &r);
    }
  if (!cuda && !one_axis && !boxes) golden_gaussian(ctx, method);
  ndf_context_destroy(ctx);
  printf("%d random + %d big cases on %s: worst relative error %.3g (bound %g); %d failures\n",
         ncases, t, dev, worst_seen, t_tol, t_failures);
  return t_failures ? 1 : 0;
}
