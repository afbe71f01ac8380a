/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conv.c - N-dimensional correlate/convolve solvers against the float64 reference, on
 * random shapes (1-4-D), kernels (odd, even, longer than the array), origins, per-axis modes,
 * dtypes, strides, places and in-place calls; filter banks against the reference and against
 * one call per kernel.
 * usage: test_conv cpu|cuda [method]   (exit 77 = skipped: no usable device) */
#include "common.h"
#include "ref/ref.h"

static double t_tol = 1e-5; /* max |out - ref| / max of the |w| filter on |x| (float outputs) */
static double worst_seen;

typedef struct {
  int nd, conv;
  t_layout lay; /* dtypes, strides, places, in place, reuse */
  int64_t shape[NDF_MAX_DIMS], k[NDF_MAX_DIMS];
  int origin[NDF_MAX_DIMS];
  ndf_mode mode[NDF_MAX_DIMS];

  double cval;
} tcase;

static void describe(const tcase *c, const char *method) {
  fprintf(stderr, "  case: %s ndim=%d shape=(", c->conv ? "convolve" : "correlate", c->nd);
  for (int d = 0; d < c->nd; d++)
    fprintf(stderr, "%lld%s", (long long)c->shape[d], d + 1 < c->nd ? "," : "");
  fprintf(stderr, ")");
  for (int d = 0; d < c->nd; d++)
    fprintf(stderr, " [axis %d: k=%lld origin=%d mode=%s]", d, (long long)c->k[d], c->origin[d],
            ndf_mode_name(c->mode[d]));
  fprintf(stderr, " cval=%g in=%s%s%s out=%s%s%s%s method=%s\n", c->cval,
          ndf_dtype_name(c->lay.idt), c->lay.strided_in ? "/strided" : "",
          c->lay.dev_in ? "/device" : "", ndf_dtype_name(c->lay.odt),
          c->lay.strided_out ? "/strided" : "", c->lay.dev_out ? "/device" : "",
          c->lay.inplace ? " in-place" : "", method ? method : "auto");
}

static void describe_cb(const void *c, const char *method) { describe(c, method); }

static void run_case(ndf_context *ctx, int cuda, const char *method, const tcase *c, uint64_t *r) {
  t_run t;
  t_run_begin(&t, ctx, r, c->nd, c->shape, &c->lay);
  int64_t nw = 1;
  for (int d = 0; d < c->nd; d++)
    nw *= c->k[d];
  double *w = malloc((size_t)nw * sizeof *w), *aw = malloc((size_t)nw * sizeof *aw);
  if (!w || !aw) abort();
  for (int64_t j = 0; j < nw; j++) {
    w[j] = ndf_rand_uniform(r);
    aw[j] = fabs(w[j]);
  }
  ndf_ref_correlate(&t.in.hview, t.ref, w, c->k, c->mode, c->cval, c->origin, c->conv);
  ndf_ref_correlate(&t.absx, t.mag, aw, c->k, c->mode, fabs(c->cval), c->origin, c->conv);
  t_run_ready(&t, ctx);
  ndf_correlate_opts o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.method = method;
  o.cval = c->cval;
  memcpy(o.mode, c->mode, sizeof o.mode);
  memcpy(o.origin, c->origin, sizeof o.origin);
  ndf_plan *p = NULL;
  ndf_status st = (c->conv ? ndf_plan_convolve : ndf_plan_correlate)(&p, ctx, &t.in.view,
                                                                     &t.po->view, w, c->k, &o);
  /* a float64 input that a float64 solver computes, into float64: float64's rounding (an FFT's
   * spread over the whole array, as float32's is: 1e-12) */
  const int f64 = st == NDF_OK && c->lay.idt == NDF_F64 && c->lay.odt == NDF_F64;
  const char *solver = f64 ? ndf_plan_solver(p) : "";
  const int exact = !strcmp(solver, "cpu_direct") || !strcmp(solver, "cuda_direct64");
  const int exact_fft =
      (!strcmp(solver, "cpu_fft") && getenv("NDF_TEST_FFT_F64")) || !strcmp(solver, "cuda_fft64");
  t_run_finish(&t, ctx, p, st, cuda, method,
               exact       ? 1e-13
               : exact_fft ? 1e-12
                           : t_tol,
               &worst_seen, describe_cb, c);
  free(w);
  free(aw);
}

/* Float64 device arrays only (the solver forced is cuda_direct64 or cuda_fft64, which take
 * nothing else). */
static int f64_only;

static void random_case(tcase *c, uint64_t *r, int cuda) {
  static const int64_t maxdim[5] = {0, 300, 48, 16, 8};
  memset(c, 0, sizeof *c);
  c->nd = (int)t_randint(r, 1, 4);
  for (int d = 0; d < c->nd; d++) {
    c->shape[d] = t_randint(r, 0, 5) == 0 ? 1 : t_randint(r, 2, maxdim[c->nd]);
    c->mode[d] = (ndf_mode)t_randint(r, 0, 4);
    switch (t_randint(r, 0, 5)) {
    case 0: c->k[d] = t_randint(r, c->shape[d] + 1, 2 * c->shape[d] + 3); break; /* oversized */
    case 1: c->k[d] = 1; break;
    default: c->k[d] = t_randint(r, 2, c->nd >= 3 ? 7 : 17);
    }
    c->origin[d] = (int)t_randint(r, -(c->k[d] / 2), (c->k[d] - 1) / 2);
  }
  c->cval = 2 * ndf_rand_uniform(r);
  c->conv = (int)t_randint(r, 0, 1);
  t_random_layout(&c->lay, r, cuda);
  if (f64_only) t_f64_layout(&c->lay, r);
}

/* A filter bank of nf random kernels (method forced or auto): each output against the
 * reference, and against a single call with that kernel (same method), which it must equal
 * to float32 rounding. */
static void bank_case(ndf_context *ctx, int cuda, const char *method, uint64_t *r) {
  enum { MAXF = 4 };
  tcase c;
  random_case(&c, r, cuda);
  c.lay.inplace = 0;
  const int nf = (int)t_randint(r, 2, MAXF);
  int64_t nw = 1, total = 1;
  for (int d = 0; d < c.nd; d++) {
    nw *= c.k[d];
    total *= c.shape[d];
  }
  double *w = malloc((size_t)(nw * nf) * sizeof *w), *aw = malloc((size_t)nw * sizeof *aw);
  double *ref = malloc((size_t)(total * nf) * sizeof *ref), *mag = malloc((size_t)total * 8);
  double *ax = malloc((size_t)total * sizeof *ax);
  if (!w || !aw || !ref || !mag || !ax) abort();
  for (int64_t j = 0; j < nw * nf; j++)
    w[j] = ndf_rand_uniform(r);
  t_arr in, outs[MAXF], single;
  t_arr_make(&in, r, c.lay.idt, c.nd, c.shape, c.lay.strided_in, c.lay.dev_in ? ctx : NULL);
  t_fill_random(&in, r);
  for (int64_t i = 0; i < total; i++)
    ax[i] = fabs(ndf__load(in.hview.dtype, in.hview.data, ndf__offset(&in.hview, i)));
  ndf_array absx = ndf_array_contiguous(NDF_F64, c.nd, c.shape, ax);
  for (int f = 0; f < nf; f++)
    ndf_ref_correlate(&in.hview, ref + f * total, w + f * nw, c.k, c.mode, c.cval, c.origin,
                      c.conv);
  ndf_array views[MAXF];
  void *poisoned[MAXF];
  for (int f = 0; f < nf; f++) {
    t_arr_make(&outs[f], r, c.lay.odt, c.nd, c.shape, (int)t_randint(r, 0, 1),
               c.lay.dev_out ? ctx : NULL);
    t_poison(&outs[f]);
    poisoned[f] = malloc(outs[f].bytes);
    if (!poisoned[f]) abort();
    memcpy(poisoned[f], outs[f].host, outs[f].bytes);
    t_arr_upload(&outs[f], ctx);
    views[f] = outs[f].view;
  }
  t_arr_upload(&in, ctx);
  ndf_correlate_opts o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.method = method;
  o.cval = c.cval;
  memcpy(o.mode, c.mode, sizeof o.mode);
  memcpy(o.origin, c.origin, sizeof o.origin);
  ndf_plan *p = NULL;
  ndf_status st = (c.conv ? ndf_plan_convolve_bank : ndf_plan_correlate_bank)(&p, ctx, &in.view, nf,
                                                                              views, w, c.k, &o);
  for (int rep = 0; rep <= c.lay.reuse && st == NDF_OK; rep++)
    st = ndf_execute_bank(p, &in.view, nf, views);
  if (st == NDF_OK) st = ndf_context_synchronize(ctx);
  CHECK(st == NDF_OK, "bank: %s: %s", ndf_status_str(st), ndf_context_message(ctx));
  const char *solver = p ? ndf_plan_solver(p) : "?";
  char bank_solver[32];
  snprintf(bank_solver, sizeof bank_solver, "%s", solver);
  ndf_plan_destroy(p);
  o.method = bank_solver; /* the single calls: the bank's solver */
  for (int f = 0; f < nf && st == NDF_OK; f++) {
    t_arr_download(&outs[f], ctx);
    for (int j = 0; j < nw; j++)
      aw[j] = fabs(w[f * nw + j]);
    ndf_ref_correlate(&absx, mag, aw, c.k, c.mode, fabs(c.cval), c.origin, c.conv);
    t_verdict v = t_judge(&outs[f], ref + f * total, mag, t_tol, 0, poisoned[f]);
    if (v.isfloat && v.worst > worst_seen) worst_seen = v.worst;
    /* the single call, into a fresh array of the same layout */
    t_arr_make(&single, r, c.lay.odt, c.nd, c.shape, 0, c.lay.dev_out ? ctx : NULL);
    t_poison(&single);
    t_arr_upload(&single, ctx);
    ndf_status s1 =
        (c.conv ? ndf_convolve : ndf_correlate)(ctx, &in.view, &single.view, w + f * nw, c.k, &o);
    if (s1 == NDF_OK) s1 = ndf_context_synchronize(ctx);
    t_arr_download(&single, ctx);
    double diff = s1 == NDF_OK ? 0 : INFINITY, scale = 0;
    for (int64_t i = 0; i < total; i++) {
      const double a = ndf__load(outs[f].hview.dtype, outs[f].hview.data,
                                 ndf__offset(&outs[f].hview, i)),
                   b = ndf__load(single.hview.dtype, single.hview.data,
                                 ndf__offset(&single.hview, i));
      diff = fabs(a - b) > diff || isnan(a - b) ? (isnan(a - b) ? INFINITY : fabs(a - b)) : diff;
      scale = mag[i] > scale ? mag[i] : scale;
    }
    const double dbound = v.isfloat ? 1e-6 * (scale > 0 ? scale : 1) : 1;
    if (v.bad || diff > dbound) {
      t_failures++;
      fprintf(stderr, "  bank of %d kernels, output %d (solver %s): %s\n", nf, f, bank_solver,
              diff > dbound ? "differs from the single call" : "wrong");
      fprintf(stderr, "  bank vs single call: max difference %.3g (bound %.3g)%s%s\n", diff, dbound,
              s1 == NDF_OK ? "" : "; single call failed: ",
              s1 == NDF_OK ? "" : ndf_context_message(ctx));
      describe(&c, method);
      t_print_worst(&outs[f], ref + f * total, &v);
    }
    t_arr_free(&single, ctx);
  }
  if (st != NDF_OK) describe(&c, method);
  for (int f = 0; f < nf; f++) {
    t_arr_free(&outs[f], ctx);
    free(poisoned[f]);
  }
  t_arr_free(&in, ctx);
  free(w);
  free(aw);
  free(ref);
  free(mag);
  free(ax);
}

/* A context whose FFT workspace limit is too small: forced fft fails with NDF_ENOMEM and says
 * how much it needed, writing nothing; auto, which picks fft without the limit, plans the
 * direct solver instead, says so, and is right. */
/* A kind without a place names the float64 twin for float64 device arrays ("direct":
 * cuda_direct64, "fft": cuda_fft64), the float32 solver for float32 ones. */
static void kind_names_twin(ndf_context *ctx, uint64_t *r) {
  const int64_t shape[2] = {12, 9}, k[2] = {3, 3};
  double w[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  static const char *kinds[2][3] = {{"direct", "cuda_direct64", "cuda_direct"},
                                    {"fft", "cuda_fft64", "cuda_fft"}};
  for (int f64 = 0; f64 < 2; f64++) {
    t_arr a, b;
    const ndf_dtype dt = f64 ? NDF_F64 : NDF_F32;
    t_arr_make(&a, r, dt, 2, shape, 0, ctx);
    t_arr_make(&b, r, dt, 2, shape, 0, ctx);
    for (int j = 0; j < 2; j++) {
      ndf_correlate_opts o = {sizeof o, kinds[j][0], {0}, {0}, 0};
      ndf_plan *p = NULL;
      const ndf_status st = ndf_plan_correlate(&p, ctx, &a.view, &b.view, w, k, &o);
      const char *want = kinds[j][f64 ? 1 : 2], *got = st == NDF_OK ? ndf_plan_solver(p) : "-";
      CHECK(!strcmp(got, want), "method %s on %s device arrays: %s, not %s", kinds[j][0],
            f64 ? "float64" : "float32", got, want);
      ndf_plan_destroy(p);
    }
    t_arr_free(&a, ctx);
    t_arr_free(&b, ctx);
  }
}

/* A float64 device input holding a NaN under auto, a kernel large enough for an FFT: the FFT's
 * exact twin computes in float64 too (a native plan's twin takes the arrays as they are; a
 * float32 one would leave the FFT to spread the NaN over every output), so the NaN reaches only
 * the outputs whose window holds it, as in scipy. */
static void nan_f64_twin(ndf_context *ctx, uint64_t *r) {
  const int64_t shape[2] = {2048, 2048}, k[2] = {17, 17};
  double w[17 * 17];
  for (int j = 0; j < 17 * 17; j++)
    w[j] = ndf_rand_uniform(r);
  t_arr a, b;
  t_arr_make(&a, r, NDF_F64, 2, shape, 0, ctx);
  t_arr_make(&b, r, NDF_F64, 2, shape, 0, ctx);
  t_fill_random(&a, r);
  ((double *)a.hview.data)[1000 * 2048 + 1000] = NAN;
  t_arr_upload(&a, ctx);
  ndf_correlate_opts o = {sizeof o, NULL, {0}, {0}, 0};
  ndf_status st = ndf_correlate(ctx, &a.view, &b.view, w, k, &o);
  if (st == NDF_OK) st = ndf_context_synchronize(ctx);
  t_arr_download(&b, ctx);
  int64_t nan = 0;
  for (int64_t i = 0; i < shape[0] * shape[1]; i++)
    nan += isnan(((const double *)b.hview.data)[i]);
  CHECK(st == NDF_OK && nan == 17 * 17, "float64 NaN under auto: %s, %lld NaN outputs (want %d)",
        ndf_context_message(ctx), (long long)nan, 17 * 17);
  t_arr_free(&a, ctx);
  t_arr_free(&b, ctx);
}

static void workspace_case(ndf_context *ctx, const char *dev, int cuda, uint64_t *r) {
  tcase c;
  memset(&c, 0, sizeof c);
  c.nd = 2;
  c.shape[0] = 300; /* large enough that the GPU's auto picks fft too */
  c.shape[1] = 400;
  c.k[0] = c.k[1] = 51;
  c.mode[0] = NDF_MODE_REFLECT;
  c.mode[1] = NDF_MODE_WRAP;
  c.lay.idt = c.lay.odt = NDF_F32;
  c.lay.dev_in = c.lay.dev_out = cuda;
  ndf_context *lim;
  ndf_context_opts co = {.struct_size = sizeof co, .device = dev, .workspace_limit = 4096};
  ndf_status st = ndf_context_create(&lim, &co);
  CHECK(st == NDF_OK && ndf_context_workspace_limit(lim) == 4096, "limited context: %s",
        ndf_status_str(st));
  if (st != NDF_OK) return;
  for (int pass = 0; pass < 3; pass++) { /* unlimited auto, limited fft, limited auto */
    ndf_context *x = pass ? lim : ctx;
    const char *method = pass == 1 ? "fft" : NULL;
    t_run t;
    t_run_begin(&t, x, r, c.nd, c.shape, &c.lay);
    double *w = malloc(51 * 51 * sizeof *w), *aw = malloc(51 * 51 * sizeof *aw);
    if (!w || !aw) abort();
    for (int j = 0; j < 51 * 51; j++)
      aw[j] = fabs(w[j] = ndf_rand_uniform(r) - 0.5);
    ndf_ref_correlate(&t.in.hview, t.ref, w, c.k, c.mode, 0, c.origin, 0);
    ndf_ref_correlate(&t.absx, t.mag, aw, c.k, c.mode, 0, c.origin, 0);
    t_run_ready(&t, x);
    ndf_correlate_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.method = method;
    memcpy(o.mode, c.mode, sizeof o.mode);
    ndf_plan *p = NULL;
    st = ndf_plan_correlate(&p, x, &t.in.view, &t.po->view, w, c.k, &o);
    const char *solver = p ? ndf_plan_solver(p) : "";
    const char *msg = ndf_context_message(x);
    if (pass == 0) {
      CHECK(st == NDF_OK && strstr(solver, "_fft"),
            "auto chose %s for a 51x51 kernel, so the workspace limit is not exercised", solver);
    } else if (pass == 1) {
      CHECK(st == NDF_ENOMEM && strstr(msg, "workspace limit of 4096") && strstr(msg, "needs"),
            "fft over the workspace limit: %s, \"%s\"", ndf_status_str(st), msg);
      t_arr_download(t.po, x);
      CHECK(!memcmp(t.po->host, t.poisoned, t.po->bytes), "a failed plan wrote its output");
      printf("over the limit: %s\n", msg);
    } else {
      CHECK(st == NDF_OK && strstr(solver, "_direct") && strstr(msg, "instead of"),
            "auto under the workspace limit: %s, solver %s, \"%s\"", ndf_status_str(st), solver,
            msg);
      printf("auto under the limit: %s\n", msg);
    }
    if (pass == 1) {
      ndf_plan_destroy(p);
      t_run_free(&t, x);
    } else {
      t_run_finish(&t, x, p, st, cuda, pass ? "direct" : "fft", t_tol, &worst_seen, describe_cb,
                   &c);
    }
    free(w);
    free(aw);
  }
  ndf_context_destroy(lim);
}

int main(int argc, char **argv) {
  const char *dev = argc > 1 ? argv[1] : "cpu";
  const char *method = argc > 2 ? argv[2] : NULL;
  const int cuda = !strcmp(dev, "cuda");
  f64_only = method && strstr(method, "64");
  ndf_context *ctx;
  const int rc = t_open(&ctx, dev);
  if (rc) return rc;
  if (method) { /* a method this build lacks (e.g. an FFT solver without FFTW) skips */
    ndf_plan *p = NULL;
    float x[4] = {0};
    int64_t s1[1] = {4}, k1[1] = {3};
    double w3[3] = {1, 2, 3};
    ndf_array a = ndf_array_contiguous(NDF_F32, 1, s1, x);
    ndf_correlate_opts o = {sizeof o, method, {0}, {0}, 0};
    if (!cuda && ndf_plan_correlate(&p, ctx, &a, &a, w3, k1, &o) == NDF_EINVAL &&
        strstr(ndf_context_message(ctx), "unknown method")) {
      printf("method %s not in this build: skipped\n", method);
      ndf_context_destroy(ctx);
      return SKIP;
    }
    ndf_plan_destroy(p);
  }
  uint64_t r = t_seed();
  t_tol = t_env_double("NDF_TEST_TOL", t_tol);
  const int ncases = (int)t_env_double("NDF_TEST_CASES", 300);
  tcase c;
  for (int k = 0; k < ncases; k++) {
    random_case(&c, &r, cuda);
    run_case(ctx, cuda, method, &c, &r);
  }
  const int nbank = ncases / 6;
  for (int k = 0; k < nbank; k++)
    bank_case(ctx, cuda, method, &r);
  /* Larger arrays in each dimensionality, every mode, odd and even kernels. */
  static const int64_t big[4][4] = {{4099}, {131, 257}, {19, 37, 70}, {5, 9, 17, 33}};
  static const int64_t kbig[4][4] = {{31}, {9, 16}, {5, 4, 7}, {3, 3, 2, 5}};
  int t = 0;
  for (int b = 0; b < 4; b++)
    for (int rep = 0; rep < 2; rep++, t++) {
      memset(&c, 0, sizeof c);
      c.nd = b + 1;
      memcpy(c.shape, big[b], sizeof c.shape);
      memcpy(c.k, kbig[b], sizeof c.k);
      for (int d = 0; d < c.nd; d++) {
        c.mode[d] = (ndf_mode)((d + rep + b) % 5);
        c.origin[d] = rep ? (int)((c.k[d] - 1) / 2) : -(int)(c.k[d] / 2);
      }
      c.conv = rep;
      c.lay.idt = c.lay.odt = NDF_F32;
      c.lay.dev_in = c.lay.dev_out = cuda;
      if (f64_only) t_f64_layout(&c.lay, &r);
      c.cval = 0.5;
      run_case(ctx, cuda, method, &c, &r);
    }
  if (!method) workspace_case(ctx, dev, cuda, &r);
  if (!method && cuda) {
    kind_names_twin(ctx, &r);
    nan_f64_twin(ctx, &r);
  }
  ndf_context_destroy(ctx);
  printf("%d random + %d bank + %d big cases on %s: worst relative error %.3g (bound %g); "
         "%d failures\n",
         ncases, nbank, t, dev, worst_seen, t_tol, t_failures);
  return t_failures ? 1 : 0;
}
