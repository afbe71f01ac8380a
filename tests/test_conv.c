/* test_conv.c - N-dimensional correlate/convolve solvers against the float64 reference, on
 * random shapes (1-4-D), kernels (odd, even, longer than the array), origins, per-axis modes,
 * dtypes, strides, places and in-place calls.
 * usage: test_conv cpu|cuda [method]   (exit 77 = skipped: no usable device) */
#include "common.h"
#include "ref/ref.h"

static double t_tol = 1e-5; /* max |out - ref| / max of the |w| filter on |x| (float outputs) */
static double worst_seen;

typedef struct {
  int nd, conv, strided_in, strided_out, dev_in, dev_out, inplace, reuse;
  int64_t shape[NDF_MAX_DIMS], k[NDF_MAX_DIMS];
  int origin[NDF_MAX_DIMS];
  ndf_mode mode[NDF_MAX_DIMS];
  ndf_dtype idt, odt;
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
  fprintf(stderr, " cval=%g in=%s%s%s out=%s%s%s%s method=%s\n", c->cval, ndf_dtype_name(c->idt),
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
  int64_t nw = 1;
  for (int d = 0; d < c->nd; d++)
    nw *= c->k[d];
  double *w = malloc((size_t)nw * sizeof *w), *aw = malloc((size_t)nw * sizeof *aw);
  const int64_t total = ndf_array_size(&in.hview);
  double *ref = malloc((size_t)total * sizeof *ref), *mag = malloc((size_t)total * sizeof *mag);
  double *absx = malloc((size_t)total * sizeof *absx);
  if (!w || !aw || !ref || !mag || !absx) abort();
  for (int64_t j = 0; j < nw; j++) {
    w[j] = ndf_rand_uniform(r);
    aw[j] = fabs(w[j]);
  }
  for (int64_t i = 0; i < total; i++)
    absx[i] = fabs(ndf__load(in.hview.dtype, in.hview.data, ndf__offset(&in.hview, i)));
  ndf_array ax = ndf_array_contiguous(NDF_F64, c->nd, c->shape, absx);
  ndf_ref_correlate(&in.hview, ref, w, c->k, c->mode, c->cval, c->origin, c->conv);
  ndf_ref_correlate(&ax, mag, aw, c->k, c->mode, fabs(c->cval), c->origin, c->conv);
  void *poisoned = malloc(po->bytes);
  if (!poisoned) abort();
  memcpy(poisoned, po->host, po->bytes);
  t_arr_upload(&in, ctx);
  if (!c->inplace) t_arr_upload(&out, ctx);

  ndf_correlate_opts o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.method = method;
  o.cval = c->cval;
  memcpy(o.mode, c->mode, sizeof o.mode);
  memcpy(o.origin, c->origin, sizeof o.origin);
  ndf_plan *p = NULL;
  ndf_status st = (c->conv ? ndf_plan_convolve : ndf_plan_correlate)(&p, ctx, &in.view, &po->view,
                                                                      w, c->k, &o);
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
  CHECK(!method || !strcmp(method, "direct") || !strcmp(method, "fft") || !strcmp(solver, method),
        "solver %s, asked for %s", solver, method);
  CHECK(cuda == !strncmp(solver, "cuda", 4), "solver %s on the wrong device", solver);
  ndf_plan_destroy(p);
  t_arr_download(po, ctx);

  double scale = 0;
  for (int64_t i = 0; i < total; i++)
    scale = mag[i] > scale ? mag[i] : scale;
  if (scale == 0) scale = 1;
  const int isfloat = c->odt == NDF_F32 || c->odt == NDF_F64;
  const double ibound = 1.0 + t_tol * scale; /* integer outputs: rounding, plus float error */
  double worst = -1;
  int64_t wi = 0, unwritten = 0;
  for (int64_t i = 0; st == NDF_OK && i < total; i++) {
    double v = ndf__load(po->hview.dtype, po->hview.data, ndf__offset(&po->hview, i)), e;
    if (isfloat) {
      if (isnan(v)) unwritten++;
      e = isnan(v) ? INFINITY : fabs(v - ref[i]) / scale;
    } else {
      double lo = c->odt == NDF_I16 ? -32768 : 0,
             hi = c->odt == NDF_U8 ? 255 : c->odt == NDF_U16 ? 65535 : 32767;
      e = fabs(v - ndf__round_clamp(ref[i], lo, hi));
    }
    if (e > worst) {
      worst = e;
      wi = i;
    }
  }
  int bad = st != NDF_OK || (isfloat ? worst > t_tol : worst > ibound);
  if (st == NDF_OK && isfloat && worst > worst_seen) worst_seen = worst;
  int64_t gaps = c->inplace ? 0 : t_gaps_changed(po, poisoned);
  if (bad || unwritten || gaps) {
    t_failures++;
    describe(c, method);
    if (st == NDF_OK)
      fprintf(stderr,
              "  worst element #%lld: got %.9g, reference %.9g, error %.3g (bound %g%s); %lld "
              "unwritten, %lld elements outside the view changed\n",
              (long long)wi, ndf__load(po->hview.dtype, po->hview.data, ndf__offset(&po->hview, wi)),
              ref[wi], worst, isfloat ? t_tol : ibound, isfloat ? " relative" : " absolute",
              (long long)unwritten, (long long)gaps);
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
  const int cuda = !strcmp(dev, "cuda");
  ndf_context *ctx;
  ndf_context_opts co = {sizeof co, dev, 0};
  ndf_status st = ndf_context_create(&ctx, &co);
  if (st != NDF_OK) {
    printf("no usable %s device (%s): skipped\n", dev, ndf_status_str(st));
    return cuda && st == NDF_ENODEV ? SKIP : 1;
  }
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
  printf("device %s\n", ndf_context_device_name(ctx));
  uint64_t r = t_seed();
  t_tol = t_env_double("NDF_TEST_TOL", t_tol);
  const int ncases = (int)t_env_double("NDF_TEST_CASES", 300);
  tcase c;
  for (int k = 0; k < ncases; k++) {
    random_case(&c, &r, cuda);
    run_case(ctx, cuda, method, &c, &r);
  }
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
      c.idt = c.odt = NDF_F32;
      c.dev_in = c.dev_out = cuda;
      c.cval = 0.5;
      run_case(ctx, cuda, method, &c, &r);
    }
  ndf_context_destroy(ctx);
  printf("%d random + %d big cases on %s: worst relative error %.3g (bound %g); %d failures\n",
         ncases, t, dev, worst_seen, t_tol, t_failures);
  return t_failures ? 1 : 0;
}
