/* SPDX-License-Identifier: BSD-3-Clause */
/* test_ks.c - kernel superposition (ndf.h, "ks") against the float64 reference (src/ref) on
 * random images and sigma maps, plus properties with no oracle: sigma 0 is the identity, a
 * delta gives the outer product of Eq. 4's 1-D kernels, normalize preserves mass, results
 * do not depend on the thread count, and bad arguments are refused with nothing written.
 *
 * With a look-up-table solver forced, the table's error on Eq. 4 is measured and reported too.
 *
 *   test_ks [cpu|cuda] [solver]     (NDF_TEST_SEED, NDF_TEST_CASES, NDF_TEST_TOL;
 *                                    NDF_TEST_KS_SHAPES=all: random tile shapes) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/ks_weight.h"
#include "../src/ref/ref.h"
#include "common.h"

static double t_tol = 1e-6, worst_seen = 0;
static const char *solver = NULL;
static int all_shapes = 0;

/* The forced solver takes index input only (the scatters, the look-up tables). */
static int input_only(void) {
  return solver && (strstr(solver, "scatter") || strstr(solver, "approx"));
}
/* The forced solver takes radii up to 32 (shared-memory gathers) or 64 (look-up tables) only. */
static int short_radii(void) {
  return solver && (strstr(solver, "approx") || strstr(solver, "smem"));
}

typedef struct {
  int nd, nsig, index, full, normalize, kind;
  /* the maps as operands of each execute (2: on the device), with r_max (0: none) */
  int operands;
  int64_t r_max;
  int ty, by; /* the tile shape (0: the default) */
  double n_sigma, smax;
  int64_t shape[NDF_MAX_DIMS];
  ndf_dtype sdt;
  t_layout lay;
} kcase;

static const char *const kinds[] = {"uniform", "clustered", "zeros", "large"};

static void describe(const kcase *c) {
  fprintf(stderr, "  case: ks ndim=%d shape=(", c->nd);
  for (int d = 0; d < c->nd; d++)
    fprintf(stderr, "%lld%s", (long long)c->shape[d], d + 1 < c->nd ? "," : "");
  fprintf(stderr,
          ") maps=%d (%s, %s, sigma < %g) index=%s output=%s normalize=%d n_sigma=%g in=%s%s "
          "out=%s%s%s solver=%s tile=%dx%d maps=%s r_max=%lld\n",
          c->nsig, ndf_dtype_name(c->sdt), kinds[c->kind], c->smax, c->index ? "output" : "input",
          c->full ? "full" : "same", c->normalize, c->n_sigma, ndf_dtype_name(c->lay.idt),
          c->lay.strided_in ? "/strided" : "", ndf_dtype_name(c->lay.odt),
          c->lay.strided_out ? "/strided" : "", c->lay.inplace ? " in-place" : "",
          solver ? solver : "auto", c->ty, c->by,
          c->operands == 2   ? "device operands"
          : c->operands == 1 ? "host operands"
                             : "bound",
          (long long)c->r_max);
}

/* Maps of the case's kind: sigma ~ U[0, smax) as the paper, blocks of a few values (many radii
 * side by side), mostly zeros, or a few large sigmas among small ones. */
static void fill_maps(const kcase *c, t_arr *maps, uint64_t *r) {
  for (int m = 0; m < c->nsig; m++) {
    const ndf_array *a = &maps[m].hview;
    const int64_t n = ndf_array_size(a);
    const double block_v[4] = {0, c->smax * 0.2, c->smax * 0.6, c->smax * 0.95};
    for (int64_t i = 0; i < n; i++) {
      const double u = 0.5 * (ndf_rand_uniform(r) + 1);
      double s = u * c->smax;
      if (c->kind == 1) s = block_v[(i / 5 + m) % 4];
      if (c->kind == 2) s = t_randint(r, 0, 3) ? 0 : s;
      if (c->kind == 3) s = t_randint(r, 0, 9) ? 0.3 * u : c->smax * (1 + u);
      ndf__store(a->dtype, a->data, ndf__offset(a, i), s);
    }
  }
}

static ndf_ks_opts kopts(const kcase *c) {
  ndf_ks_opts o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.method = solver;
  o.index = c->index ? NDF_KS_OUTPUT : NDF_KS_INPUT;
  o.n_sigma = c->n_sigma;
  o.output = c->full ? NDF_KS_FULL : NDF_KS_SAME;
  o.normalize = c->normalize;
  o.tile_rows = c->ty;
  o.block_rows = c->by;
  o.r_max = c->r_max;
  return o;
}

static void run_case(ndf_context *ctx, int cuda, kcase *c, uint64_t *r) {
  t_arr in, out, maps[NDF_MAX_DIMS], other[NDF_MAX_DIMS];
  t_arr_make(&in, r, c->lay.idt, c->nd, c->shape, c->lay.strided_in, c->lay.dev_in ? ctx : NULL);
  t_fill_random(&in, r);
  ndf_array mv[NDF_MAX_DIMS], desc[NDF_MAX_DIMS], ops[NDF_MAX_DIMS], first[NDF_MAX_DIMS];
  ndf_context *mctx = c->operands == 2 ? ctx : NULL;
  for (int m = 0; m < c->nsig; m++) {
    const int strided = (int)t_randint(r, 0, 1);
    t_arr_make(&maps[m], r, c->sdt, c->nd, c->shape, strided, mctx);
    t_arr_make(&other[m], r, c->sdt, c->nd, c->shape, strided, mctx);
    mv[m] = maps[m].hview;
  }
  fill_maps(c, maps, r);
  fill_maps(c, other, r); /* a first execute's maps, where the plan runs twice */
  const double ns = c->n_sigma == 0 ? 3 : c->n_sigma;
  const int64_t Rm = ndf_ref_ks_margin(&in.hview, mv, c->nsig, ns), R = c->full ? Rm : 0;
  if (c->r_max && c->r_max < Rm) c->r_max = Rm; /* a bound the maps keep */
  if (c->operands && c->full) c->r_max = R;     /* the margin; r_max 0 is no bound */
  if (c->operands && c->full && R == 0) c->operands = 0;
  for (int m = 0; m < c->nsig; m++) {
    t_arr_upload(&maps[m], ctx);
    t_arr_upload(&other[m], ctx);
    ops[m] = maps[m].view;
    first[m] = other[m].view;
    desc[m] = c->operands ? maps[m].view : mv[m];
    if (c->operands) desc[m].data = NULL;
    if (c->operands && c->r_max) { /* the other maps within the bound too */
      const ndf_array *a = &other[m].hview;
      for (int64_t i = 0; i < ndf_array_size(a); i++) {
        const double v = ndf__load(a->dtype, a->data, ndf__offset(a, i));
        if (ceil(ns * v) > (double)c->r_max) ndf__store(a->dtype, a->data, ndf__offset(a, i), 0);
      }
      t_arr_upload(&other[m], ctx);
    }
  }
  int64_t oshape[NDF_MAX_DIMS];
  for (int d = 0; d < c->nd; d++)
    oshape[d] = c->shape[d] + 2 * R;
  const int inplace = c->lay.inplace && !c->full;
  t_arr *po = &out;
  if (inplace) {
    po = &in;
  } else {
    t_arr_make(&out, r, c->lay.odt, c->nd, oshape, c->lay.strided_out, c->lay.dev_out ? ctx : NULL);
    t_poison(&out);
  }
  const int64_t nout = ndf_array_size(&po->hview), nin = ndf_array_size(&in.hview);
  double *ref = malloc((size_t)nout * sizeof *ref), *mag = malloc((size_t)nout * sizeof *mag);
  double *ax = malloc((size_t)nin * sizeof *ax);
  if (!ref || !mag || !ax) abort();
  ndf_ref_ks(&in.hview, mv, c->nsig, c->index, ns, c->full, c->normalize, ref);
  for (int64_t i = 0; i < nin; i++)
    ax[i] = fabs(ndf__load(in.hview.dtype, in.hview.data, ndf__offset(&in.hview, i)));
  ndf_array absx = ndf_array_contiguous(NDF_F64, c->nd, c->shape, ax);
  ndf_ref_ks(&absx, mv, c->nsig, c->index, ns, c->full, c->normalize, mag);
  void *poisoned = malloc(po->bytes);
  if (!poisoned) abort();
  memcpy(poisoned, po->host, po->bytes);
  t_arr_upload(&in, ctx);
  if (!inplace) t_arr_upload(&out, ctx);
  ndf_ks_opts o = kopts(c);
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_ks(&p, ctx, &in.view, &po->view, desc, c->nsig, &o);
  if (st == NDF_OK)
    st = t_execute_ops(ctx, p, &in, c->operands ? c->nsig : 0, ops, first, po, poisoned,
                       c->lay.reuse && !inplace);
  CHECK(st == NDF_OK, "%s: %s", ndf_status_str(st), ndf_context_message(ctx));
  const char *used = p ? ndf_plan_solver(p) : "?";
  CHECK(!solver || !strcmp(used, solver), "solver %s, asked for %s", used, solver);
  CHECK(cuda == !strncmp(used, "cuda", 4), "solver %s on the wrong device", used);
  ndf_plan_destroy(p);
  if (st == NDF_OK) {
    t_verdict v = t_judge(po, ref, mag, t_tol, inplace, poisoned);
    if (v.isfloat && v.worst > worst_seen) worst_seen = v.worst;
    if (v.bad) {
      t_failures++;
      describe(c);
      t_print_worst(po, ref, &v);
    }
  } else {
    describe(c);
  }
  free(ref);
  free(mag);
  free(ax);
  free(poisoned);
  for (int m = 0; m < c->nsig; m++) {
    t_arr_free(&maps[m], mctx);
    t_arr_free(&other[m], mctx);
  }
  t_arr_free(&in, ctx);
  if (!inplace) t_arr_free(&out, ctx);
}

static void random_case(kcase *c, uint64_t *r, int cuda) {
  static const int64_t maxdim[5] = {0, 40, 14, 7, 5};
  memset(c, 0, sizeof *c);
  c->nd = (int)(t_randint(r, 0, 9) ? t_randint(r, 2, 3) : t_randint(r, 1, 4) == 4 ? 4 : 1);
  if (cuda && c->nd == 4) c->nd = 3; /* the CUDA solvers take 1 to 3 axes */
  for (int d = 0; d < c->nd; d++)
    c->shape[d] = t_randint(r, 1, maxdim[c->nd]);
  c->nsig = t_randint(r, 0, 1) ? 1 : c->nd;
  c->index = (int)t_randint(r, 0, 1);
  c->full = (int)t_randint(r, 0, 1);
  c->normalize = t_randint(r, 0, 2) == 0;
  static const double nsig[4] = {0, 3, 2, 1.5};
  c->n_sigma = nsig[t_randint(r, 0, 3)];
  c->kind = (int)t_randint(r, 0, 3);
  const int rmax = (int)t_randint(r, 1, c->nd <= 2 ? 5 : 3);
  c->smax = rmax / (c->n_sigma == 0 ? 3 : c->n_sigma);
  c->sdt = t_randint(r, 0, 1) ? NDF_F32 : NDF_F64;
  t_random_layout(&c->lay, r, cuda);
  c->operands = (int)t_randint(r, 0, cuda ? 2 : 1);
  if (c->operands && t_randint(r, 0, 1)) c->r_max = rmax + t_randint(r, 0, 2);
  if (short_radii() && c->operands && !c->r_max) c->r_max = rmax; /* they need a bound */
  if (input_only()) c->index = 0;                                 /* Eq. 2a only */
  if (all_shapes) {                                               /* the seed's five (t_y, b_y) */
    static const int shapes[5][2] = {{8, 8}, {16, 8}, {32, 8}, {16, 16}, {32, 16}};
    const int k = (int)t_randint(r, 0, 4);
    c->ty = shapes[k][0];
    c->by = shapes[k][1];
  }
}

/* sigma 0 everywhere: out is in, exactly (float32 to float32). */
static void identity(ndf_context *ctx, uint64_t *r) {
  const int64_t shape[3] = {4, 5, 6};
  t_arr in;
  t_arr_make(&in, r, NDF_F32, 3, shape, 0, NULL);
  t_fill_random(&in, r);
  float out[120], zeros[120] = {0};
  ndf_array ov = ndf_array_contiguous(NDF_F32, 3, shape, out),
            sv = ndf_array_contiguous(NDF_F32, 3, shape, zeros);
  for (int index = 0; index < 2; index++) {
    if (index && input_only()) continue; /* Eq. 2a only */
    kcase c = {0};
    c.index = index;
    ndf_ks_opts o = kopts(&c);
    ndf_status st = ndf_ks(ctx, &in.hview, &ov, &sv, 1, &o);
    CHECK(st == NDF_OK, "identity: %s", ndf_context_message(ctx));
    CHECK(!memcmp(out, in.hview.data, sizeof out), "sigma 0 (index %d) is not the identity", index);
  }
  t_arr_free(&in, NULL);
}

/* A delta at (6, 7) of a 13x15 image, sigma 1.3 everywhere: out(p) = k(p0 - 6) k(p1 - 7), Eq. 4
 * evaluated here; and with normalize and output full, the sum of out is 1. */
static void delta(ndf_context *ctx, int cuda) {
  const double exact = cuda ? 1e-6 : 1e-15, mass = cuda ? 1e-5 : 1e-12;
  enum { H = 13, W = 15 };
  static double x[H * W], s[H * W], y[H * W], yf[(H + 10) * (W + 10)];
  const int64_t shape[2] = {H, W};
  for (int i = 0; i < H * W; i++) {
    x[i] = i == 6 * W + 7;
    s[i] = 1.3;
  }
  ndf_array xv = ndf_array_contiguous(NDF_F64, 2, shape, x),
            sv = ndf_array_contiguous(NDF_F64, 2, shape, s),
            yv = ndf_array_contiguous(NDF_F64, 2, shape, y);
  for (int index = 0; index < 2; index++) {
    if (index && input_only()) continue; /* Eq. 2a only */
    kcase c = {0};
    c.index = index;
    ndf_ks_opts o = kopts(&c);
    CHECK(ndf_ks(ctx, &xv, &yv, &sv, 1, &o) == NDF_OK, "delta: %s", ndf_context_message(ctx));
    double worst = 0;
    for (int i = 0; i < H; i++)
      for (int j = 0; j < W; j++) {
        double k[2];
        const int d[2] = {i - 6, j - 7};
        for (int a = 0; a < 2; a++)
          k[a] = abs(d[a]) > 4 ? 0 /* ceil(3 * 1.3) = 4 */
                               : 0.5 * (erf((d[a] + 0.5) / (sqrt(2) * 1.3)) -
                                        erf((d[a] - 0.5) / (sqrt(2) * 1.3)));
        worst = fmax(worst, fabs(y[i * W + j] - k[0] * k[1]));
      }
    CHECK(worst < exact, "delta (index %d): off by %g from Eq. 4's outer product", index, worst);
  }
  kcase c = {0};
  c.full = c.normalize = 1;
  ndf_ks_opts o = kopts(&c);
  int64_t fs[2], R = -1;
  CHECK(ndf_ks_full_shape(ctx, &xv, &sv, 1, 3, fs, &R) == NDF_OK && R == 4 && fs[0] == H + 8 &&
            fs[1] == W + 8,
        "full shape (%lld, %lld), R %lld; want (%d, %d), 4", (long long)fs[0], (long long)fs[1],
        (long long)R, H + 8, W + 8);
  for (int i = 0; i < H * W; i++)
    x[i] = (i * 7919 % 13) / 13.0;
  ndf_array fv = ndf_array_contiguous(NDF_F64, 2, fs, yf);
  CHECK(ndf_ks(ctx, &xv, &fv, &sv, 1, &o) == NDF_OK, "mass: %s", ndf_context_message(ctx));
  double sin = 0, sout = 0;
  for (int i = 0; i < H * W; i++)
    sin += x[i];
  for (int64_t i = 0; i < fs[0] * fs[1]; i++)
    sout += yf[i];
  CHECK(fabs(sin - sout) < mass * sin, "normalize + full: mass %.17g in, %.17g out", sin, sout);
}

/* A CPU context of the given thread count. */
static ndf_context *cpu_context(int threads) {
  ndf_context *c = NULL;
  ndf_context_opts co;
  memset(&co, 0, sizeof co);
  co.struct_size = sizeof co;
  co.device = "cpu";
  co.threads = threads;
  if (ndf_context_create(&c, &co) != NDF_OK) abort();
  return c;
}

/* The same case on 1 and on 3 threads: bitwise the same output. */
static void threads_agree(uint64_t *r) {
  ndf_context *c1 = cpu_context(1), *c3 = cpu_context(3);
  enum { H = 37, W = 29 };
  static float x[H * W], s[H * W], y1[H * W], y3[H * W];
  for (int i = 0; i < H * W; i++) {
    x[i] = (float)ndf_rand_uniform(r);
    s[i] = (float)(1.6 * 0.5 * (ndf_rand_uniform(r) + 1));
  }
  const int64_t shape[2] = {H, W};
  ndf_array xv = ndf_array_contiguous(NDF_F32, 2, shape, x),
            sv = ndf_array_contiguous(NDF_F32, 2, shape, s),
            v1 = ndf_array_contiguous(NDF_F32, 2, shape, y1),
            v3 = ndf_array_contiguous(NDF_F32, 2, shape, y3);
  for (int index = 0; index < 2; index++) {
    if (index && input_only()) continue; /* Eq. 2a only */
    kcase c = {0};
    c.index = index;
    ndf_ks_opts o = kopts(&c);
    o.method = NULL;
    o.deterministic = 1;
    CHECK(ndf_ks(c1, &xv, &v1, &sv, 1, &o) == NDF_OK && ndf_ks(c3, &xv, &v3, &sv, 1, &o) == NDF_OK,
          "threads: %s %s", ndf_context_message(c1), ndf_context_message(c3));
    CHECK(!memcmp(y1, y3, sizeof y1), "index %d: 1 and 3 threads differ", index);
  }
  ndf_context_destroy(c1);
  ndf_context_destroy(c3);
}

/* cpu_ks on 1 and on 4 threads, bitwise, on the shapes its tiling treats apart: a 1-D signal
 * (the tiles split its one row), a 2-D image with rows long enough to be padded, a 3-D and a 4-D
 * volume; isotropic and per-axis maps, both index modes, output full, normalize, some zeros. */
static void threads_agree_shapes(uint64_t *r) {
  ndf_context *c1 = cpu_context(1), *c4 = cpu_context(4);
  static const int64_t shapes[4][NDF_MAX_DIMS] = {{300}, {21, 90}, {9, 10, 70}, {4, 5, 6, 70}};
  for (int k = 0; k < 4; k++) {
    const int nd = k + 1, nsig = k % 2 ? nd : 1;
    int64_t n = 1, fs[NDF_MAX_DIMS], R = 0, nout = 1;
    for (int d = 0; d < nd; d++)
      n *= shapes[k][d];
    double *x = malloc((size_t)n * sizeof *x), *s = malloc((size_t)(nsig * n) * sizeof *s);
    if (!x || !s) abort();
    for (int64_t i = 0; i < n; i++)
      x[i] = t_randint(r, 0, 4) ? ndf_rand_uniform(r) : 0;
    for (int64_t i = 0; i < nsig * n; i++)
      s[i] = 2.5 * 0.5 * (ndf_rand_uniform(r) + 1); /* radii up to 8 */
    ndf_array xv = ndf_array_contiguous(NDF_F64, nd, shapes[k], x), mv[NDF_MAX_DIMS];
    for (int m = 0; m < nsig; m++)
      mv[m] = ndf_array_contiguous(NDF_F64, nd, shapes[k], s + m * n);
    CHECK(ndf_ks_full_shape(c1, &xv, mv, nsig, 3, fs, &R) == NDF_OK, "full shape: %s",
          ndf_context_message(c1));
    for (int d = 0; d < nd; d++)
      nout *= fs[d];
    double *y1 = malloc((size_t)nout * sizeof *y1), *y4 = malloc((size_t)nout * sizeof *y4);
    if (!y1 || !y4) abort();
    ndf_array v1 = ndf_array_contiguous(NDF_F64, nd, fs, y1),
              v4 = ndf_array_contiguous(NDF_F64, nd, fs, y4);
    for (int index = 0; index < 2; index++) {
      ndf_ks_opts o;
      memset(&o, 0, sizeof o);
      o.struct_size = sizeof o;
      o.method = "cpu_ks";
      o.index = index ? NDF_KS_OUTPUT : NDF_KS_INPUT;
      o.output = NDF_KS_FULL;
      o.normalize = 1;
      const ndf_status s1 = ndf_ks(c1, &xv, &v1, mv, nsig, &o),
                       s4 = ndf_ks(c4, &xv, &v4, mv, nsig, &o);
      CHECK(s1 == NDF_OK && s4 == NDF_OK, "threads (ndim %d): %s %s", nd, ndf_context_message(c1),
            ndf_context_message(c4));
      CHECK(!memcmp(y1, y4, (size_t)nout * sizeof *y1), "ndim %d, index %d: 1 and 4 threads differ",
            nd, index);
    }
    free(x);
    free(s);
    free(y1);
    free(y4);
  }
  ndf_context_destroy(c1);
  ndf_context_destroy(c4);
}

/* Radii longer than the grid under normalize: the kernel is normalised over its own truncated
 * support (r = ceil(1.5 * 3) = 5), not over the part the grid can hold (a CUDA solver once used
 * the radius it clips to the grid). */
static void long_radius(ndf_context *ctx, int cuda) {
  static double x[2] = {0.3, -0.7}, s[2] = {3, 2.5}, y[2], ref[2];
  const int64_t shape[1] = {2};
  ndf_array xv = ndf_array_contiguous(NDF_F64, 1, shape, x),
            sv = ndf_array_contiguous(NDF_F64, 1, shape, s),
            yv = ndf_array_contiguous(NDF_F64, 1, shape, y);
  for (int index = 0; index < 2; index++) {
    if (index && input_only()) continue; /* Eq. 2a only */
    kcase c = {0};
    c.index = index;
    c.normalize = 1;
    c.n_sigma = 1.5;
    ndf_ks_opts o = kopts(&c);
    CHECK(ndf_ks(ctx, &xv, &yv, &sv, 1, &o) == NDF_OK, "long radius: %s", ndf_context_message(ctx));
    ndf_ref_ks(&xv, &sv, 1, index, 1.5, 0, 1, ref);
    for (int i = 0; i < 2; i++)
      CHECK(fabs(y[i] - ref[i]) < (!cuda                                ? 1e-14
                                   : solver && strstr(solver, "approx") ? t_tol
                                                                        : 1e-6),
            "long radius (index %d): out[%d] %.9g, reference %.9g", index, i, y[i], ref[i]);
  }
}

/* The CUDA solvers' float32 Eq. 4 (core/ks_weight.h) against float64 erf, sigma 0.02 to 5000:
 * the weights' errors add up to under 2e-6 of the kernel's mass, and each weight above 1e-6 is
 * within 1e-5 of its value (a plain erf difference in float32 is 3e-4 off at sigma 1000). */
static void weight_accuracy(void) {
  static const double sig[] = {0.02, 0.3, 0.7, 1, 1.41, 1.42, 2, 3, 7, 33, 100, 1000, 5000};
  for (size_t i = 0; i < sizeof sig / sizeof sig[0]; i++) {
    const double s = sig[i], c = 1 / (sqrt(2.0) * s);
    const int r = (int)ceil(3 * s);
    double sum = 0, worst = 0;
    for (int d = 0; d <= r; d++) {
      const double k = 0.5 * (erf((d + 0.5) * c) - erf((d - 0.5) * c)),
                   e = fabs(ndf__ks_weight(d, (float)s, r, 1.f) - k);
      sum += d ? 2 * e : e;
      if (k > 1e-6 && e / k > worst) worst = e / k;
    }
    CHECK(sum < 2e-6 && worst < 1e-5,
          "float32 Eq. 4 at sigma %g: errors add to %.3g, worst relative %.3g", s, sum, worst);
  }
}

/* The scatters' all-at-once Eq. 4 (ndf__ks_weights: erfc differences) against float64 erf, up
 * to the largest sigma their radius buckets hold (64 / 3): errors add up to under 2e-6 of the
 * kernel's mass, every weight within 2e-7 of its value, and zero past r. */
static void weights_accuracy(void) {
  static const double sig[] = {0.02, 0.3, 0.7, 1, 1.41, 1.42, 2, 3, 7, 10.6, 21.3};
  for (size_t i = 0; i < sizeof sig / sizeof sig[0]; i++) {
    const double s = sig[i], c = 1 / (sqrt(2.0) * s);
    const int r = (int)ceil(3 * s), n = r + 3;
    float k[80];
    ndf__ks_weights((float)s, r, 1.f, n, k);
    double sum = 0, worst = 0;
    for (int d = 0; d < n; d++) {
      const double x = d > r ? 0 : 0.5 * (erf((d + 0.5) * c) - erf((d - 0.5) * c)),
                   e = fabs(k[d] - x);
      sum += d ? 2 * e : e;
      worst = fmax(worst, e);
    }
    CHECK(sum < 2e-6 && worst < 2e-7 && k[n - 1] == 0.f,
          "ndf__ks_weights at sigma %g: errors add to %.3g, worst %.3g", s, sum, worst);
  }
}

/* normalize at a sigma whose radius is past any grid (the solvers cap radii at 2^40): the
 * scale still comes from ceil(n_sigma * sigma). One pixel: out = k(0) / erf((r + 1/2) c). */
static void huge_sigma(ndf_context *ctx, int cuda) {
  static const double sigs[2] = {5e11, 1e13};
  if (short_radii()) return;
  for (int k = 0; k < 2; k++) {
    double x = 1, s = sigs[k], y = NAN;
    const int64_t shape[1] = {1};
    ndf_array xv = ndf_array_contiguous(NDF_F64, 1, shape, &x),
              sv = ndf_array_contiguous(NDF_F64, 1, shape, &s),
              yv = ndf_array_contiguous(NDF_F64, 1, shape, &y);
    kcase c = {0};
    c.normalize = 1;
    ndf_ks_opts o = kopts(&c);
    CHECK(ndf_ks(ctx, &xv, &yv, &sv, 1, &o) == NDF_OK, "huge sigma: %s", ndf_context_message(ctx));
    const double cc = 1 / (sqrt(2.0) * s), want = erf(0.5 * cc) / erf((ceil(3 * s) + 0.5) * cc);
    CHECK(fabs(y / want - 1) < (cuda ? 1e-5 : 1e-12), "normalize at sigma %g: %.9g, want %.9g", s,
          y, want);
  }
}

/* Images of several 32 x 8 tiles (the CUDA solvers' tile radius bounds and bucket lists). */
static void larger(ndf_context *ctx, int cuda, uint64_t *r) {
  static const int64_t shapes[2][NDF_MAX_DIMS] = {{33, 70}, {5, 12, 37}};
  for (int k = 0; k < 4; k++) {
    kcase c;
    memset(&c, 0, sizeof c);
    c.nd = k < 2 ? 2 : 3;
    memcpy(c.shape, shapes[k / 2], sizeof c.shape);
    c.nsig = k == 3 ? c.nd : 1;
    c.index = k % 2 && !input_only();
    c.full = k >= 2;
    c.kind = k % 2;
    c.smax = (k < 2 ? 5.0 : 2.0) / 3;
    c.sdt = NDF_F32;
    c.lay.idt = c.lay.odt = NDF_F32;
    c.lay.dev_in = c.lay.dev_out = cuda;
    run_case(ctx, cuda, &c, r);
  }
}

/* Radii above 32 among small ones (the scatters' generic kernel), 2-D and 3-D. */
static void big_radii(ndf_context *ctx, int cuda, uint64_t *r) {
  static const int64_t shapes[2][NDF_MAX_DIMS] = {{40, 80}, {3, 12, 50}};
  if (short_radii()) return;
  for (int k = 0; k < 2; k++) {
    kcase c;
    memset(&c, 0, sizeof c);
    c.nd = k + 2;
    memcpy(c.shape, shapes[k], sizeof c.shape);
    c.nsig = 1;
    c.index = 0;
    c.kind = 3; /* one pixel in 10 with sigma in [smax, 2 smax) */
    c.smax = k ? 12 : 7.5;
    c.sdt = NDF_F64;
    c.lay.idt = c.lay.odt = NDF_F32;
    c.lay.dev_in = c.lay.dev_out = cuda;
    run_case(ctx, cuda, &c, r);
  }
}

/* A look-up-table solver's error on Eq. 4, as the seed reports it: deltas with sigma spread
 * over (0, 32 / 3] (the benchmark's r_max 32), each output the weight of one d <= r; mean and
 * largest relative error over the weights >= 1e-6 (smaller ones may underflow in float32), and
 * the largest absolute error. The seed sampled its tables for a mean under 1%; ours are denser. */
static void lut_report(ndf_context *ctx) {
  if (!solver || !strstr(solver, "approx")) return;
  enum { NS = 1500, GAP = 70 };
  const int64_t len = (int64_t)NS * GAP;
  double *x = calloc((size_t)len, sizeof *x), *s = calloc((size_t)len, sizeof *s);
  double *y = malloc((size_t)len * sizeof *y);
  if (!x || !s || !y) abort();
  for (int j = 0; j < NS; j++) {
    x[(int64_t)j * GAP + GAP / 2] = 1;
    s[(int64_t)j * GAP + GAP / 2] = (32.0 / 3) * (j + 1) / NS;
  }
  ndf_array xv = ndf_array_contiguous(NDF_F64, 1, &len, x),
            sv = ndf_array_contiguous(NDF_F64, 1, &len, s),
            yv = ndf_array_contiguous(NDF_F64, 1, &len, y);
  kcase c = {0};
  ndf_ks_opts o = kopts(&c);
  const ndf_status st = ndf_ks(ctx, &xv, &yv, &sv, 1, &o);
  CHECK(st == NDF_OK, "lut report: %s", ndf_context_message(ctx));
  double sum = 0, worst = 0, wabs = 0, ws = 0;
  int64_t count = 0, wd = 0;
  for (int j = 0; j < NS && st == NDF_OK; j++) {
    const double sg = s[(int64_t)j * GAP + GAP / 2], cc = 1 / (sqrt(2.0) * sg);
    const int64_t rr = (int64_t)ceil(3 * sg);
    for (int64_t d = -rr; d <= rr; d++) {
      const int64_t a = d < 0 ? -d : d;
      const double k = a == 0 ? erf(0.5 * cc) : 0.5 * (erfc((a - 0.5) * cc) - erfc((a + 0.5) * cc));
      const double got = y[(int64_t)j * GAP + GAP / 2 + d], e = fabs(got - k);
      if (e > wabs) wabs = e;
      if (k < 1e-6) continue;
      sum += e / k;
      count++;
      if (e / k > worst) worst = e / k, ws = sg, wd = d;
    }
  }
  const double mean = count ? sum / count : 0;
  printf("lut report %s: sigma (0, %.4g], %lld weights >= 1e-6: mean relative error %.3g, "
         "largest %.3g (sigma %.4g, d %lld); largest absolute error %.3g\n",
         solver, 32.0 / 3, (long long)count, mean, worst, ws, (long long)wd, wabs);
  CHECK(mean < 1e-2, "lut report: mean relative error %.3g (the seed's bound is 1%%)", mean);
  free(x);
  free(s);
  free(y);
}

/* deterministic = 1 under auto: a repeatable solver, and two runs agree bitwise. */
static void determinism(ndf_context *ctx) {
  enum { H = 300, W = 200 };
  static float x[H * W], s[H * W], y1[H * W], y2[H * W];
  uint64_t r = 12345;
  for (int i = 0; i < H * W; i++) {
    x[i] = (float)(0.5 * (ndf_rand_uniform(&r) + 1));
    s[i] = (float)(8.0 / 3 * 0.5 * (ndf_rand_uniform(&r) + 1));
  }
  const int64_t shape[2] = {H, W};
  ndf_array xv = ndf_array_contiguous(NDF_F32, 2, shape, x),
            sv = ndf_array_contiguous(NDF_F32, 2, shape, s),
            v1 = ndf_array_contiguous(NDF_F32, 2, shape, y1),
            v2 = ndf_array_contiguous(NDF_F32, 2, shape, y2);
  kcase c = {0};
  ndf_ks_opts o = kopts(&c);
  o.method = NULL;
  o.deterministic = 1;
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_ks(&p, ctx, &xv, &v1, &sv, 1, &o);
  if (st == NDF_OK) st = ndf_execute(p, &xv, &v1);
  if (st == NDF_OK) st = ndf_execute(p, &xv, &v2);
  CHECK(st == NDF_OK, "determinism: %s", ndf_context_message(ctx));
  if (p)
    CHECK(!strcmp(ndf_plan_solver(p), "cpu_ks") || !strcmp(ndf_plan_solver(p), "cuda_ks_gather"),
          "deterministic chose %s", ndf_plan_solver(p));
  CHECK(!memcmp(y1, y2, sizeof y1), "deterministic: two runs differ");
  ndf_plan_destroy(p);
}

/* Bad arguments: refused, with a message, the output untouched. */
static void refusals(ndf_context *ctx) {
  enum { N = 6 * 7 };
  static float x[N], s[N], s2[N], y[N], poison[N];
  const int64_t shape[2] = {6, 7}, wrong[2] = {7, 6};
  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    s[i] = s2[i] = 1;
    y[i] = poison[i] = NAN;
  }
  ndf_array xv = ndf_array_contiguous(NDF_F32, 2, shape, x),
            yv = ndf_array_contiguous(NDF_F32, 2, shape, y),
            wv = ndf_array_contiguous(NDF_F32, 2, wrong, y);
  ndf_array maps[2] = {ndf_array_contiguous(NDF_F32, 2, shape, s),
                       ndf_array_contiguous(NDF_F32, 2, shape, s2)};
  for (int k = 0; k < 9; k++) {
    kcase c = {0};
    ndf_ks_opts o = kopts(&c);
    int nsig = 1;
    ndf_array *out = &yv;
    ndf_array m1 = maps[0];
    const char *what = "?";
    s[3] = 1;
    switch (k) {
    case 0: s[3] = -1, what = "a negative sigma"; break;
    case 1: s[3] = NAN, what = "a NaN sigma"; break;
    case 2: s[3] = INFINITY, what = "an infinite sigma"; break;
    case 3: nsig = 3, what = "3 maps for 2 axes"; break;
    case 4: m1 = ndf_array_contiguous(NDF_F32, 2, wrong, s), what = "a map of another shape"; break;
    case 5: o.output = NDF_KS_FULL, what = "a same-shaped out for output full"; break;
    case 6: out = &wv, what = "out of another shape"; break;
    case 7: o.n_sigma = -2, what = "n_sigma -2"; break;
    default: o.index = (ndf_ks_index)7, what = "index 7"; break;
    }
    ndf_array ms[2] = {m1, maps[1]};
    ndf_status st = ndf_ks(ctx, &xv, out, ms, nsig, &o);
    CHECK(st == NDF_EINVAL, "%s: status %s", what, ndf_status_str(st));
    CHECK(*ndf_context_message(ctx), "%s: no message", what);
    CHECK(!memcmp(y, poison, sizeof y) || (y[0] != y[0] && y[N - 1] != y[N - 1]),
          "%s: the output was written", what);
    for (int i = 0; i < N; i++)
      CHECK(isnan(y[i]), "%s: out[%d] written", what, i);
  }
  s[3] = 1;
}

/* Maps given at execute: bad values, a radius past r_max, a wrong operand count or kind are
 * refused with a message naming the pixel where there is one, the output untouched; with
 * cuda, the maps on the device as well as on the host. */
static void operand_refusals(ndf_context *ctx, int cuda) {
  enum { N = 6 * 7 };
  static float x[N], s[N], y[N], poison[N];
  const int64_t shape[2] = {6, 7};
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 5) + 1;
    s[i] = 1;
    poison[i] = NAN;
  }
  for (int dev = 0; dev <= cuda; dev++)
    for (int k = 0; k < 7; k++) {
      kcase c = {0};
      ndf_ks_opts o = kopts(&c);
      const char *what = "?", *needle = NULL;
      for (int i = 0; i < N; i++)
        s[i] = 1;
      o.r_max = k == 3 || short_radii() ? 3 : 0; /* the forced solver may need a bound */
      int nin = 2, plain = 0;
      switch (k) {
      case 0: s[17] = -1, what = "a negative sigma", needle = "element 17"; break;
      case 1: s[40] = NAN, what = "a NaN sigma", needle = "element 40"; break;
      case 2: s[0] = INFINITY, what = "an infinite sigma", needle = "element 0"; break;
      case 3: s[23] = 1.5, what = "a radius past r_max", needle = "r_max 3"; break;
      case 4: nin = 1, what = "no operand"; break;
      case 5: nin = 3, what = "two operands for one map"; break;
      default: plain = 1, what = "ndf_execute on a plan with operands"; break;
      }
      ndf_array xv = ndf_array_contiguous(NDF_F32, 2, shape, x),
                yv = ndf_array_contiguous(NDF_F32, 2, shape, y),
                sv = ndf_array_contiguous(NDF_F32, 2, shape, s);
      ndf_array dx = {0}, dy = {0}, ds = {0};
      if (dev) {
        if (ndf_array_alloc(ctx, &dx, NDF_F32, 2, shape) ||
            ndf_array_alloc(ctx, &dy, NDF_F32, 2, shape) ||
            ndf_array_alloc(ctx, &ds, NDF_F32, 2, shape) || ndf_array_copy(ctx, &dx, &xv) ||
            ndf_array_copy(ctx, &ds, &sv))
          abort();
        xv = dx;
        sv = ds;
      }
      memcpy(y, poison, sizeof y);
      ndf_array out = dev ? dy : yv;
      if (dev && ndf_array_copy(ctx, &dy, &yv)) abort();
      ndf_array desc = sv;
      desc.data = NULL;
      ndf_plan *p = NULL;
      ndf_status st = ndf_plan_ks(&p, ctx, &xv, &out, &desc, 1, &o);
      CHECK(st == NDF_OK, "%s: planning: %s", what, ndf_context_message(ctx));
      ndf_array ins[3] = {xv, sv, sv};
      if (st == NDF_OK)
        st = plain ? ndf_execute(p, &xv, &out) : ndf_execute_n(p, nin, ins, 1, &out);
      CHECK(st == NDF_EINVAL, "%s (maps on the %s): status %s", what, dev ? "GPU" : "host",
            ndf_status_str(st));
      CHECK(!needle || strstr(ndf_context_message(ctx), needle), "%s: message '%s' lacks '%s'",
            what, ndf_context_message(ctx), needle);
      if (dev) {
        ndf_array h = yv;
        if (ndf_array_copy(ctx, &h, &dy)) abort();
      }
      for (int i = 0; i < N; i++)
        CHECK(isnan(y[i]), "%s: out[%d] written", what, i);
      /* the plan still works after a refusal */
      for (int i = 0; i < N; i++)
        s[i] = 0.5f;
      if (dev &&
          ndf_array_copy(
              ctx, &ds,
              &(ndf_array){
                  .dtype = NDF_F32, .ndim = 2, .shape = {6, 7}, .strides = {7, 1}, .data = s}))
        abort();
      ndf_array good[2] = {xv, sv};
      st = p ? ndf_execute_n(p, 2, good, 1, &out) : NDF_EINVAL;
      if (st == NDF_OK) st = ndf_context_synchronize(ctx);
      CHECK(st == NDF_OK, "%s: the next execute: %s", what, ndf_context_message(ctx));
      if (st == NDF_OK) { /* and gives the right result (no table left over from the refusal) */
        static double ref[N];
        ndf_array h = yv, xh = ndf_array_contiguous(NDF_F32, 2, shape, x),
                  sh = ndf_array_contiguous(NDF_F32, 2, shape, s);
        if (dev && ndf_array_copy(ctx, &h, &dy)) abort();
        ndf_ref_ks(&xh, &sh, 1, 0, o.n_sigma > 0 ? o.n_sigma : 3, 0, 0, ref);
        int worst = 0;
        for (int i = 1; i < N; i++)
          if (fabs(y[i] - ref[i]) > fabs(y[worst] - ref[worst])) worst = i;
        CHECK(fabs(y[worst] - ref[worst]) <=
                  (solver && strstr(solver, "approx") ? t_tol : 1e-5) * 5,
              "%s: the next execute: out[%d] %.9g, reference %.9g", what, worst, y[worst],
              ref[worst]);
      }
      ndf_plan_destroy(p);
      if (dev) {
        ndf_array_free(ctx, &dx);
        ndf_array_free(ctx, &dy);
        ndf_array_free(ctx, &ds);
      }
    }
  /* planning: full output without r_max, maps half given */
  ndf_array xv = ndf_array_contiguous(NDF_F32, 2, shape, x),
            sv = ndf_array_contiguous(NDF_F32, 2, shape, s);
  ndf_array desc[2] = {sv, sv};
  desc[0].data = NULL;
  kcase c = {0};
  ndf_ks_opts o = kopts(&c);
  ndf_plan *p = NULL;
  int64_t big[2] = {6 + 2, 7 + 2};
  ndf_array yf = ndf_array_contiguous(NDF_F32, 2, big, NULL);
  o.output = NDF_KS_FULL;
  CHECK(ndf_plan_ks(&p, ctx, &xv, &yf, desc, 1, &o) == NDF_EINVAL, "full output without r_max");
  o.r_max = 1;
  CHECK(ndf_plan_ks(&p, ctx, &xv, &yf, desc, 1, &o) == NDF_OK, "full output, r_max 1: %s",
        ndf_context_message(ctx));
  ndf_plan_destroy(p);
  o.output = NDF_KS_SAME;
  o.r_max = 0;
  CHECK(ndf_plan_ks(&p, ctx, &xv, &xv, desc, 2, &o) == NDF_EINVAL, "maps half given");
  o.r_max = -1;
  CHECK(ndf_plan_ks(&p, ctx, &xv, &xv, desc, 1, &o) == NDF_EINVAL, "r_max -1");
}

int main(int argc, char **argv) {
  const char *dev = argc > 1 ? argv[1] : "cpu";
  const int cuda = !strcmp(dev, "cuda");
  solver = argc > 2 ? argv[2] : NULL;
  ndf_context *ctx;
  const int rc = t_open(&ctx, dev);
  if (rc) return rc;
  uint64_t r = t_seed();
  t_tol = t_env_double("NDF_TEST_TOL", t_tol);
  const char *shapes = getenv("NDF_TEST_KS_SHAPES");
  all_shapes = shapes && !strcmp(shapes, "all");
  const int ncases = (int)t_env_double("NDF_TEST_CASES", 150);
  for (int k = 0; k < ncases; k++) {
    kcase c;
    random_case(&c, &r, cuda);
    run_case(ctx, cuda, &c, &r);
  }
  printf("%d random cases on %s: worst relative error %.3g (bound %g)\n", ncases, dev, worst_seen,
         t_tol);
  identity(ctx, &r);
  delta(ctx, cuda);
  long_radius(ctx, cuda);
  weight_accuracy();
  weights_accuracy();
  huge_sigma(ctx, cuda);
  larger(ctx, cuda, &r);
  big_radii(ctx, cuda, &r);
  lut_report(ctx);
  determinism(ctx);
  refusals(ctx);
  operand_refusals(ctx, cuda);
  if (!cuda) threads_agree(&r);
  if (!cuda) threads_agree_shapes(&r);
  ndf_context_destroy(ctx);
  printf("%d failures\n", t_failures);
  return t_failures ? 1 : 0;
}
