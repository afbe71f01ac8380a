/* SPDX-License-Identifier: BSD-3-Clause */
/* test_nonfinite.c - NaN and Inf reach exactly the outputs scipy.ndimage's would, under method
 * auto and under every exact solver named: correlate (scipy leaves weights <= DBL_EPSILON out
 * of its sum), separable filters and the Gaussian (every weight counts), filter banks, against
 * the float64 reference on random inputs sprinkled with NaN, +Inf and -Inf (or a NaN slab, as
 * in masked statistics maps). Where auto's solver spreads them (an FFT, the recursive
 * Gaussian under a tolerance) the plan must run its exact twin on such inputs, and only then.
 * usage: test_nonfinite cpu|cuda   (exit 77 = skipped: no usable device) */
#include "common.h"
#include "ref/ref.h"

/* Every output written is poisoned first with a finite value no filter here can produce, so an
 * unwritten element fails whether the reference is finite or not. */
#define POISON 12345.25

static int cases_nonfinite, alt_fft, alt_iir, fft_seen, iir_seen;

/* 0 finite, 1 NaN, 2 +Inf, 3 -Inf */
static int cls(double v) { return isnan(v) ? 1 : isinf(v) ? (v > 0 ? 2 : 3) : 0; }
static const char *cls_name[] = {"finite", "NaN", "+Inf", "-Inf"};

/* Random data in [-1, 1] with a few NaN, +Inf and -Inf, or a NaN slab along axis 0. Returns
 * 1 if any value is not finite. */
static int fill(t_arr *t, uint64_t *r, int mode) {
  t_fill_random(t, r);
  const ndf_array *a = &t->hview;
  const int64_t n = ndf_array_size(a);
  if (mode == 0) return 0;
  if (mode == 2) { /* a slab: the first third of axis 0's planes (the whole array in 1-D) */
    const int64_t per = n / a->shape[0], k = a->ndim > 1 ? (a->shape[0] + 2) / 3 : a->shape[0];
    for (int64_t i = 0; i < k * per && i < n; i++)
      ndf__store(a->dtype, a->data, ndf__offset(a, i), NAN);
    return 1;
  }
  const int64_t m = 1 + n / 200;
  for (int64_t j = 0; j < m; j++) {
    const int64_t i = t_randint(r, 0, n - 1), k = t_randint(r, 0, 2);
    ndf__store(a->dtype, a->data, ndf__offset(a, i), k == 0 ? NAN : k == 1 ? INFINITY : -INFINITY);
  }
  return 1;
}

typedef struct {
  int op;  /* 0 correlate, 1 sepfilter, 2 gaussian */
  int box; /* sepfilter: box weights (one value an axis), long, for auto's running sums */
  int nd, nf, data_mode;
  int64_t shape[NDF_MAX_DIMS], k[NDF_MAX_DIMS];
  ndf_mode mode[NDF_MAX_DIMS];
  double cval, sigma[NDF_MAX_DIMS], tolerance;
  t_layout lay;
} tcase;

static void describe(const tcase *c, const char *method, const char *solver) {
  static const char *ops[] = {"correlate", "sepfilter", "gaussian"};
  fprintf(stderr, "  case: %s%s nf=%d shape=(", ops[c->op], c->nf > 1 ? " bank" : "", c->nf);
  for (int d = 0; d < c->nd; d++)
    fprintf(stderr, "%lld%s", (long long)c->shape[d], d + 1 < c->nd ? "," : "");
  fprintf(stderr, ")");
  for (int d = 0; d < c->nd; d++)
    fprintf(stderr, " [axis %d: k=%lld sigma=%g mode=%s]", d, (long long)c->k[d], c->sigma[d],
            ndf_mode_name(c->mode[d]));
  fprintf(stderr, " cval=%g tolerance=%g data=%s in=%s%s%s out=%s%s%s method=%s solver=%s\n",
          c->cval, c->tolerance,
          c->data_mode == 0   ? "finite"
          : c->data_mode == 1 ? "sprinkled"
                              : "slab",
          ndf_dtype_name(c->lay.idt), c->lay.strided_in ? "/strided" : "",
          c->lay.dev_in ? "/device" : "", ndf_dtype_name(c->lay.odt),
          c->lay.strided_out ? "/strided" : "", c->lay.dev_out ? "/device" : "",
          method ? method : "auto", solver);
}

static int finite_only(const char *solver) {
  const char *u = strrchr(solver, '_');
  return u && (!strcmp(u, "_fft") || !strcmp(u, "_iir") || !strcmp(u, "_box"));
}

/* Runs one case with method (NULL: auto) and checks every output's class and finite value. */
static void run_case(ndf_context *ctx, const char *method, const tcase *c, uint64_t *r) {
  const int nd = c->nd, nf = c->nf;
  t_arr in, out[3];
  t_arr_make(&in, r, c->lay.idt, nd, c->shape, c->lay.strided_in, c->lay.dev_in ? ctx : NULL);
  const int bad_in = fill(&in, r, c->data_mode);
  ndf_array outs[3];
  for (int f = 0; f < nf; f++) {
    t_arr_make(&out[f], r, c->lay.odt, nd, c->shape, c->lay.strided_out,
               c->lay.dev_out ? ctx : NULL);
    const int64_t n = ndf_array_size(&out[f].hview);
    for (int64_t i = 0; i < n; i++)
      ndf__store(c->lay.odt, out[f].hview.data, ndf__offset(&out[f].hview, i), POISON);
    t_arr_upload(&out[f], ctx);
    outs[f] = out[f].view;
  }
  t_arr_upload(&in, ctx);

  /* weights: random, a third of them exact zeros (at least one nonzero per kernel) */
  int64_t nw = 1;
  for (int d = 0; d < nd; d++)
    nw *= c->k[d];
  const int64_t total = ndf_array_size(&in.hview);
  double *w = malloc((size_t)(nw * nf + 4 * 64) * sizeof *w),
         *ref = malloc((size_t)(total * nf) * sizeof *ref);
  if (!w || !ref) abort();
  double scale = 1;
  ndf_plan *p = NULL;
  ndf_status st;
  if (c->op == 0) {
    for (int64_t j = 0; j < nw * nf; j++)
      w[j] = t_randint(r, 0, 2) ? ndf_rand_uniform(r) : 0.0;
    for (int f = 0; f < nf; f++)
      w[f * nw] = 0.5;        /* never all zero */
    if (nw > 1) w[1] = 1e-17; /* below DBL_EPSILON: scipy leaves it out */
    ndf_correlate_opts o = {.struct_size = sizeof o};
    o.method = method;
    o.cval = c->cval;
    memcpy(o.mode, c->mode, sizeof o.mode);
    st = nf > 1 ? ndf_plan_correlate_bank(&p, ctx, &in.view, nf, outs, w, c->k, &o)
                : ndf_plan_correlate(&p, ctx, &in.view, &outs[0], w, c->k, &o);
    for (int f = 0; f < nf; f++)
      ndf_ref_correlate(&in.hview, ref + f * total, w + f * nw, c->k, c->mode, c->cval, NULL, 0);
    double sum = 0;
    for (int64_t j = 0; j < nw * nf; j++)
      sum += fabs(w[j]);
    scale = sum * (1 + (isfinite(c->cval) ? fabs(c->cval) : 0));
  } else {
    const double *wp[NDF_MAX_DIMS] = {0};
    int64_t n[NDF_MAX_DIMS] = {0};
    double *next = w;
    scale = 1;
    for (int d = 0; d < nd; d++) {
      if (c->op == 1) {
        if (!c->k[d]) continue;
        n[d] = c->k[d];
        const int box = c->box; /* one value: auto's cpu_box, whose twin runs on NaN */
        for (int64_t j = 0; j < n[d]; j++)
          next[j] = box ? 0.25 : t_randint(r, 0, 2) ? ndf_rand_uniform(r) : 0.0;
        next[0] = box ? 0.25 : 0.75;
      } else {
        if (c->sigma[d] <= 0) continue;
        const int rad = (int)(4.0 * c->sigma[d] + 0.5);
        n[d] = 2 * rad + 1;
        ndf_gaussian_kernel1d(c->sigma[d], 0, rad, next);
      }
      double s = 0;
      for (int64_t j = 0; j < n[d]; j++)
        s += fabs(next[j]);
      scale *= s;
      wp[d] = next;
      next += n[d];
    }
    const int zero[NDF_MAX_DIMS] = {0};
    ndf_ref_sepfilter(&in.hview, ref, wp, n, c->mode, c->cval, zero, 0);
    if (c->op == 1) {
      ndf_sepfilter_opts o = {.struct_size = sizeof o};
      o.method = method;
      o.cval = c->cval;
      memcpy(o.mode, c->mode, sizeof o.mode);
      st = ndf_plan_sepfilter(&p, ctx, &in.view, &outs[0], wp, n, &o);
    } else {
      ndf_gaussian_opts o = {.struct_size = sizeof o};
      o.method = method;
      o.cval = c->cval;
      o.tolerance = c->tolerance;
      memcpy(o.mode, c->mode, sizeof o.mode);
      memcpy(o.sigma, c->sigma, sizeof o.sigma);
      st = ndf_plan_gaussian(&p, ctx, &in.view, &outs[0], &o);
    }
    scale *= 1 + fabs(c->cval);
  }
  const char *solver = p ? ndf_plan_solver(p) : "?";
  if (st == NDF_OK)
    st = nf > 1 ? ndf_execute_bank(p, &in.view, nf, outs) : ndf_execute(p, &in.view, &outs[0]);
  if (st == NDF_OK) st = ndf_context_synchronize(ctx);
  CHECK(st == NDF_OK, "%s: %s", ndf_status_str(st), ndf_context_message(ctx));
  if (st != NDF_OK) describe(c, method, solver);
  const char *ran = st == NDF_OK ? ndf_plan_last_solver(p) : "?";
  const int iir = st == NDF_OK && strstr(solver, "_iir");
  if (st == NDF_OK && !method && finite_only(solver)) {
    /* auto's FFT or recursive plan: the twin runs on non-finite input, and only there */
    const int is_fft = strstr(solver, "_fft") != NULL;
    *(is_fft ? &fft_seen : &iir_seen) += 1;
    if (bad_in) *(is_fft ? &alt_fft : &alt_iir) += 1;
    CHECK(bad_in == !!strcmp(ran, solver), "%s ran %s on %s input", solver, ran,
          bad_in ? "non-finite" : "finite");
    if (bad_in) CHECK(!finite_only(ran), "the twin %s is not exact", ran);
  }
  if (st == NDF_OK) cases_nonfinite += bad_in;
  /* compare: classes everywhere, values where finite (the recursive filter on finite input
   * within its documented bound, as relative L2) */
  int64_t bad = 0, worst_i = -1;
  double worst = 0, err2 = 0, ref2 = 0;
  for (int f = 0; f < nf && st == NDF_OK; f++) {
    t_arr_download(&out[f], ctx);
    for (int64_t i = 0; i < total; i++) {
      const double x = ndf__load(c->lay.odt, out[f].hview.data, ndf__offset(&out[f].hview, i)),
                   y = ref[f * total + i];
      double e = cls(x) != cls(y) ? INFINITY : cls(x) ? 0 : fabs(x - y) / scale;
      if (iir && !bad_in && cls(x) == cls(y)) {
        err2 += (x - y) * (x - y);
        ref2 += y * y;
        e = 0;
      }
      if (e > 1e-5) bad++;
      if (e > worst || (worst_i < 0 && e > 0)) {
        worst = e;
        worst_i = f * total + i;
      }
    }
  }
  if (iir && !bad_in && ref2 > 0 && sqrt(err2 / ref2) > NDF_GAUSSIAN_IIR_ERROR) bad++;
  if (bad) {
    t_failures++;
    describe(c, method, solver);
    if (worst_i >= 0) {
      const int f = (int)(worst_i / total);
      const int64_t i = worst_i % total;
      const double x = ndf__load(c->lay.odt, out[f].hview.data, ndf__offset(&out[f].hview, i));
      fprintf(stderr,
              "  %lld outputs differ; worst: output %d element #%lld got %.9g (%s), "
              "reference %.9g (%s)\n",
              (long long)bad, f, (long long)i, x, cls_name[cls(x)], ref[worst_i],
              cls_name[cls(ref[worst_i])]);
    } else {
      fprintf(stderr, "  relative L2 error %.3g over the bound %g\n", sqrt(err2 / ref2),
              NDF_GAUSSIAN_IIR_ERROR);
    }
  }
  ndf_plan_destroy(p);
  free(w);
  free(ref);
  t_arr_free(&in, ctx);
  for (int f = 0; f < nf; f++)
    t_arr_free(&out[f], ctx);
}

/* The exact solvers of op on this device, by name (FFT, recursive and running-sum ones spread
 * NaN when named: allowed, documented, not tested here). */
static int exact_solvers(const char *op, int cuda, const char **names, int cap) {
  int n = 0;
  const char *o;
  for (int i = 0; ndf_solver_name(i, &o) && n < cap; i++) {
    const char *s = ndf_solver_name(i, NULL);
    if (strcmp(o, op) || (strncmp(s, "cuda", 4) == 0) != cuda || finite_only(s)) continue;
    names[n++] = s;
  }
  return n;
}

int main(int argc, char **argv) {
  const char *dev = argc > 1 ? argv[1] : "cpu";
  ndf_context *ctx;
  int rc = t_open(&ctx, dev);
  if (rc) return rc;
  const int cuda = ndf_context_place(ctx).kind == NDF_PLACE_CUDA;
  uint64_t r = t_seed();
  const int ncases = (int)t_env_double("NDF_TEST_CASES", 48);
  const char *corr[8], *sep[8];
  const int ncorr = exact_solvers("correlate", cuda, corr, 8),
            nsep = exact_solvers("sepfilter", cuda, sep, 8);
  for (int k = 0; k < ncases; k++) {
    tcase c;
    memset(&c, 0, sizeof c);
    c.op = k % 3;
    c.nf = 1;
    c.data_mode = k % 10 == 9 ? 0 : k % 4 == 3 ? 2 : 1;
    t_random_layout(&c.lay, &r, cuda);
    c.lay.idt = t_randint(&r, 0, 1) ? NDF_F32 : NDF_F64;
    c.lay.odt = t_randint(&r, 0, 1) ? NDF_F32 : NDF_F64;
    c.lay.inplace = 0;
    const int big = k % 6 < 3; /* sizes where auto may take an FFT or the recursive filter */
    c.nd = (int)t_randint(&r, 1, 3);
    if (big && c.nd == 1) c.nd = 2;
    for (int d = 0; d < c.nd; d++) {
      c.shape[d] =
          big ? t_randint(&r, c.nd == 3 ? 24 : 64, c.nd == 3 ? 40 : 128) : t_randint(&r, 1, 20);
      c.mode[d] = (ndf_mode)t_randint(&r, 0, 4);
    }
    c.cval = ndf_rand_uniform(&r);
    if (c.op == 0) {
      for (int d = 0; d < c.nd; d++)
        c.k[d] = big ? t_randint(&r, c.nd == 3 ? 7 : 15, c.nd == 3 ? 11 : 25) : t_randint(&r, 1, 6);
      if (!big && c.nd < 3 && t_randint(&r, 0, 3) == 0) c.nf = (int)t_randint(&r, 2, 3);
      if (t_randint(&r, 0, 7) == 0) { /* a cval that is not finite: border outputs are NaN */
        c.cval = NAN;
        c.mode[0] = NDF_MODE_CONSTANT;
      }
    } else if (c.op == 1) {
      c.box = big && t_randint(&r, 0, 1);
      for (int d = 0; d < c.nd; d++)
        c.k[d] = t_randint(&r, 0, 2) ? t_randint(&r, c.box ? 15 : 1, c.box ? 31 : 9) : 0;
      c.k[c.nd - 1] = t_randint(&r, c.box ? 15 : 1, c.box ? 31 : 9);
    } else {
      for (int d = 0; d < c.nd; d++)
        c.sigma[d] = big ? 3 + 5 * 0.5 * (1 + ndf_rand_uniform(&r))
                         : 0.5 + 2 * 0.5 * (1 + ndf_rand_uniform(&r));
      if (big) { /* where auto may recurse: nearest, a tolerance */
        for (int d = 0; d < c.nd; d++)
          c.mode[d] = NDF_MODE_NEAREST;
        c.tolerance = NDF_GAUSSIAN_IIR_ERROR;
      }
    }
    run_case(ctx, NULL, &c, &r);
    /* and each exact solver by name that applies (1-D solvers: one filtered axis) */
    if (c.op == 0 && c.data_mode)
      for (int i = 0; i < ncorr; i++)
        run_case(ctx, corr[i], &c, &r);
    if (c.op == 1 && c.data_mode)
      for (int i = 0; i < nsep; i++) {
        int axes = 0;
        for (int d = 0; d < c.nd; d++)
          axes += c.k[d] > 0;
        if (strstr(sep[i], "corr1d") && axes != 1) continue;
        if (strstr(sep[i], "fused") && c.nd < 2) continue;
        run_case(ctx, sep[i], &c, &r);
      }
  }
  /* Sizes where a GPU's cost models take an FFT or the recursive filter (the random ones above
   * are enough for the CPU's). */
  for (int k = 0; cuda && k < 4; k++) {
    tcase c;
    memset(&c, 0, sizeof c);
    c.op = k < 2 ? 0 : 2;
    c.nf = 1;
    c.data_mode = k % 2 ? 2 : 1;
    t_random_layout(&c.lay, &r, cuda);
    c.lay.idt = c.lay.odt = NDF_F32;
    c.lay.inplace = 0;
    c.cval = 0.25;
    if (c.op == 0) {
      c.nd = 2;
      c.shape[0] = 768;
      c.shape[1] = 640;
      c.k[0] = c.k[1] = 31;
      c.mode[0] = NDF_MODE_REFLECT;
      c.mode[1] = NDF_MODE_WRAP;
    } else {
      c.nd = 3;
      c.shape[0] = c.shape[1] = c.shape[2] = 128;
      for (int d = 0; d < 3; d++) {
        c.sigma[d] = 6;
        c.mode[d] = NDF_MODE_NEAREST;
      }
      c.tolerance = NDF_GAUSSIAN_IIR_ERROR;
    }
    run_case(ctx, NULL, &c, &r);
  }
  printf("%d cases with NaN or Inf; auto's FFT plans %d (twin ran on %d), recursive or "
         "running-sum plans %d (twin ran on %d)\n",
         cases_nonfinite, fft_seen, alt_fft, iir_seen, alt_iir);
  /* the twins must have been exercised: these sizes make auto take them */
  int have_fft = 0;
  const char *o;
  for (int i = 0; ndf_solver_name(i, &o); i++)
    have_fft |= !strcmp(ndf_solver_name(i, NULL), cuda ? "cuda_fft" : "cpu_fft");
  if (ncases >= 24) {
    CHECK(!have_fft || alt_fft > 0, "no case ran an FFT plan's exact twin");
    CHECK(alt_iir > 0, "no case ran a recursive plan's exact twin");
  }
  ndf_context_destroy(ctx);
  printf("nonfinite checks (%s): %d failures\n", dev, t_failures);
  return t_failures ? 1 : 0;
}
