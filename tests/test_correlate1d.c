/* test_correlate1d.c - correlate1d/convolve1d solvers against the float64 reference.
 * usage: test_correlate1d cpu|cuda [method]  (exit 77 = skipped: no usable device) */
#include "common.h"
#include "ref/ref.h"

static double t_tol = 1e-6; /* max |out - ref| / max sum |w||x| (float outputs) */
static double worst_seen;

typedef struct {
  int nd, axis, n, origin, mode, conv, strided_in, strided_out, dev_in, dev_out, inplace, reuse;
  int64_t shape[NDF_MAX_DIMS];
  ndf_dtype idt, odt;
  double cval;
} tcase;

static void describe(const tcase *c, const char *method) {
  fprintf(stderr, "  case: %s ndim=%d shape=(", c->conv ? "convolve1d" : "correlate1d", c->nd);
  for (int d = 0; d < c->nd; d++)
    fprintf(stderr, "%lld%s", (long long)c->shape[d], d + 1 < c->nd ? "," : "");
  fprintf(stderr, ") axis=%d n=%d origin=%d mode=%s cval=%g in=%s%s%s out=%s%s%s%s method=%s\n",
          c->axis, c->n, c->origin, ndf_mode_name(c->mode), c->cval, ndf_dtype_name(c->idt),
          c->strided_in ? "/strided" : "", c->dev_in ? "/device" : "", ndf_dtype_name(c->odt),
          c->strided_out ? "/strided" : "", c->dev_out ? "/device" : "",
          c->inplace ? " in-place" : "", method ? method : "auto");
}

static void run_case(ndf_context *ctx, int cuda, const char *method, const tcase *c, uint64_t *r) {
  t_arr in, out, *po = &out;
  t_arr_make(&in, r, c->idt, c->nd, c->shape, c->strided_in, c->dev_in ? ctx : NULL);
  t_fill_random(&in, r);
  if (c->inplace)
    po = &in;
  else {
    t_arr_make(&out, r, c->odt, c->nd, c->shape, c->strided_out, c->dev_out ? ctx : NULL);
    t_poison(&out);
  }
  double *w = malloc((size_t)c->n * sizeof *w), *aw = malloc((size_t)c->n * sizeof *aw);
  for (int j = 0; j < c->n; j++) {
    w[j] = ndf_rand_uniform(r);
    aw[j] = fabs(w[j]);
  }
  int64_t total = ndf_array_size(&in.hview);
  double *ref = malloc((size_t)total * sizeof *ref), *mag = malloc((size_t)total * sizeof *mag);
  double *absx = malloc((size_t)total * sizeof *absx);
  for (int64_t i = 0; i < total; i++)
    absx[i] = fabs(ndf__load(in.hview.dtype, in.hview.data, ndf__offset(&in.hview, i)));
  ndf_array ax = ndf_array_contiguous(NDF_F64, c->nd, c->shape, absx);
  if (c->conv) {
    ndf_ref_convolve1d(&in.hview, ref, w, c->n, c->axis, c->mode, c->cval, c->origin);
    ndf_ref_convolve1d(&ax, mag, aw, c->n, c->axis, c->mode, fabs(c->cval), c->origin);
  } else {
    ndf_ref_correlate1d(&in.hview, ref, w, c->n, c->axis, c->mode, c->cval, c->origin);
    ndf_ref_correlate1d(&ax, mag, aw, c->n, c->axis, c->mode, fabs(c->cval), c->origin);
  }
  void *poisoned = malloc(po->bytes);
  memcpy(poisoned, po->host, po->bytes);
  t_arr_upload(&in, ctx);
  if (!c->inplace) t_arr_upload(&out, ctx);

  ndf_correlate1d_opts o = {sizeof o, method, c->mode, c->cval, c->origin};
  ndf_plan *p = NULL;
  int axis = c->axis - (t_randint(r, 0, 1) ? c->nd : 0); /* negative axes too */
  ndf_status st = c->conv ? ndf_plan_convolve1d(&p, ctx, &in.view, &po->view, w, c->n, axis, &o)
                          : ndf_plan_correlate1d(&p, ctx, &in.view, &po->view, w, c->n, axis, &o);
  if (st == NDF_OK && c->reuse && !c->inplace) { /* run twice: execute must be repeatable */
    st = ndf_execute(p, &in.view, &po->view);
    if (st == NDF_OK) st = ndf_context_synchronize(ctx);
    t_arr_download(po, ctx);
    memcpy(po->host, poisoned, po->bytes);
    t_arr_upload(po, ctx);
  }
  if (st == NDF_OK) st = ndf_execute(p, &in.view, &po->view);
  if (st == NDF_OK) st = ndf_context_synchronize(ctx);
  const char *solver = p ? ndf_plan_solver(p) : "?";
  CHECK(st == NDF_OK, "%s: %s", ndf_status_str(st), ndf_context_message(ctx));
  CHECK(!method || !strcmp(solver, method), "solver %s, asked for %s", solver, method);
  CHECK(cuda == !strncmp(solver, "cuda", 4), "solver %s on the wrong device", solver);
  ndf_plan_destroy(p);
  t_arr_download(po, ctx);

  double scale = 0;
  for (int64_t i = 0; i < total; i++)
    scale = mag[i] > scale ? mag[i] : scale;
  if (scale == 0) scale = 1;
  int isfloat = c->odt == NDF_F32 || c->odt == NDF_F64;
  double worst = -1;
  int64_t wi = 0, unwritten = 0;
  for (int64_t i = 0; st == NDF_OK && i < total; i++) {
    double v = ndf__load(po->hview.dtype, po->hview.data, ndf__offset(&po->hview, i)), e;
    if (isfloat) {
      if (isnan(v)) unwritten++;
      e = isnan(v) ? INFINITY : fabs(v - ref[i]) / scale;
    } else {
      double lo = c->odt == NDF_I16 ? -32768 : 0, hi = c->odt == NDF_U8    ? 255
                                                       : c->odt == NDF_U16 ? 65535
                                                                           : 32767;
      e = fabs(v - ndf__round_clamp(ref[i], lo, hi)); /* float rounding may flip a .5 */
    }
    if (e > worst) {
      worst = e;
      wi = i;
    }
  }
  int bad = st != NDF_OK || (isfloat ? worst > t_tol : worst > 1.0);
  if (st == NDF_OK && isfloat && worst > worst_seen) worst_seen = worst;
  int64_t gaps = c->inplace ? 0 : t_gaps_changed(po, poisoned);
  if (bad || unwritten || gaps) {
    t_failures++;
    describe(c, method);
    if (st == NDF_OK) {
      int64_t rem = wi, co[NDF_MAX_DIMS];
      for (int d = c->nd - 1; d >= 0; d--) {
        co[d] = rem % c->shape[d];
        rem /= c->shape[d];
      }
      fprintf(stderr, "  worst element #%lld (", (long long)wi);
      for (int d = 0; d < c->nd; d++)
        fprintf(stderr, "%lld%s", (long long)co[d], d + 1 < c->nd ? "," : "");
      fprintf(stderr,
              "): got %.9g, reference %.9g, error %.3g (bound %g%s); %lld unwritten, %lld "
              "elements outside the view changed\n",
              ndf__load(po->hview.dtype, po->hview.data, ndf__offset(&po->hview, wi)), ref[wi],
              worst, isfloat ? t_tol : 1.0, isfloat ? " relative" : " absolute",
              (long long)unwritten, (long long)gaps);
    }
  }
  free(w);
  free(aw);
  free(ref);
  free(mag);
  free(absx);
  free(poisoned);
  t_arr_free(&in, ctx);
  if (!c->inplace) t_arr_free(&out, ctx);
}

static void random_case(tcase *c, uint64_t *r, int cuda) {
  static const int64_t maxdim[5] = {0, 80, 24, 10, 6};
  memset(c, 0, sizeof *c);
  c->nd = (int)t_randint(r, 1, 4);
  for (int d = 0; d < c->nd; d++)
    c->shape[d] = t_randint(r, 0, 5) == 0 ? 1 : t_randint(r, 2, maxdim[c->nd]);
  c->axis = (int)t_randint(r, 0, c->nd - 1);
  int64_t len = c->shape[c->axis];
  c->n =
      t_randint(r, 0, 4) == 0 ? (int)t_randint(r, len + 1, 2 * len + 6) : (int)t_randint(r, 1, 12);
  c->origin = (int)t_randint(r, -(c->n / 2), (c->n - 1) / 2);
  c->mode = (int)t_randint(r, 0, 4);
  c->cval = 2 * ndf_rand_uniform(r);
  c->conv = (int)t_randint(r, 0, 1);
  c->idt = (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  c->odt = t_randint(r, 0, 2) ? NDF_F32 : (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  c->strided_in = (int)t_randint(r, 0, 1);
  c->strided_out = (int)t_randint(r, 0, 1);
  c->dev_in = cuda && t_randint(r, 0, 1);
  c->dev_out = cuda && t_randint(r, 0, 1);
  c->inplace = t_randint(r, 0, 7) == 0;
  if (c->inplace) {
    c->odt = c->idt;
    c->dev_out = c->dev_in;
    c->strided_out = c->strided_in;
  }
  c->reuse = t_randint(r, 0, 3) == 0;
}

int main(int argc, char **argv) {
  const char *dev = argc > 1 ? argv[1] : "cpu";
  const char *method = argc > 2 ? argv[2] : NULL;
  int cuda = !strcmp(dev, "cuda");
  ndf_context *ctx;
  ndf_context_opts co = {sizeof co, dev, 0};
  ndf_status st = ndf_context_create(&ctx, &co);
  if (st != NDF_OK) {
    printf("no usable %s device (%s): skipped\n", dev, ndf_status_str(st));
    return cuda && st == NDF_ENODEV ? SKIP : 1;
  }
  printf("device %s\n", ndf_context_device_name(ctx));
  uint64_t r = t_seed();
  t_tol = t_env_double("NDF_TEST_TOL", t_tol);
  int ncases = (int)t_env_double("NDF_TEST_CASES", 400);
  tcase c;
  for (int k = 0; k < ncases; k++) {
    random_case(&c, &r, cuda);
    run_case(ctx, cuda, method, &c, &r);
  }
  /* Larger arrays, so that every thread and block has lines to do. */
  const int64_t big[3][4] = {{37, 64, 65}, {5, 7, 33, 129}, {4099}};
  const int bnd[3] = {3, 4, 1};
  for (int b = 0; b < 3; b++)
    for (int axis = 0; axis < bnd[b]; axis++) {
      memset(&c, 0, sizeof c);
      c.nd = bnd[b];
      memcpy(c.shape, big[b], sizeof c.shape);
      c.axis = axis;
      c.n = 9 + axis;
      c.mode = axis % 5;
      c.idt = c.odt = NDF_F32;
      c.dev_in = c.dev_out = cuda;
      run_case(ctx, cuda, method, &c, &r);
    }
  ndf_context_destroy(ctx);
  printf("%d random + big cases on %s: worst relative error %.3g (bound %g); %d failures\n", ncases,
         dev, worst_seen, t_tol, t_failures);
  return t_failures ? 1 : 0;
}
