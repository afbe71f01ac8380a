/* SPDX-License-Identifier: BSD-3-Clause */
/* test_stage.c - host arrays through a CUDA plan's staging, which moves them in chunks of 2^20
 * elements: arrays of several chunks (and a part one), every dtype in and out, contiguous,
 * strided and reversed views, the plan run twice; a copy (sepfilter with no filtered axis) must
 * give each element converted through float32, exactly, and leave the gaps between a strided
 * output's elements alone. A NaN in the last chunk must still send auto's recursive Gaussian to
 * its exact twin. Page-locked host arrays give the same bits as ordinary ones. The device auto
 * chose takes the CPU for host arrays where that is faster.
 *
 *   test_stage [cuda|cpu]     (NDF_TEST_SEED, NDF_TEST_CASES; cpu: the test's own check) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int cuda;

static void copy_case(ndf_context *ctx, uint64_t *r) {
  const int64_t shape[3] = {t_randint(r, 2, 4), t_randint(r, 300, 520), t_randint(r, 700, 1100)};
  const ndf_dtype idt = (ndf_dtype)t_randint(r, NDF_U8, NDF_F64),
                  odt = (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  const int sin = (int)t_randint(r, 0, 1), sout = (int)t_randint(r, 0, 1);
  t_arr in, out;
  t_arr_make(&in, r, idt, 3, shape, sin, NULL);
  t_arr_make(&out, r, odt, 3, shape, sout, NULL);
  t_fill_random(&in, r);
  t_poison(&out);
  void *before = malloc(out.bytes);
  if (!before) abort();
  memcpy(before, out.host, out.bytes);
  const double *none[3] = {NULL, NULL, NULL};
  const int64_t nw[3] = {0, 0, 0};
  ndf_sepfilter_opts o = {.struct_size = sizeof o};
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_sepfilter(&p, ctx, &in.view, &out.view, none, nw, &o);
  for (int run = 0; run < 2 && st == NDF_OK; run++)
    st = ndf_execute(p, &in.view, &out.view);
  CHECK(st == NDF_OK, "%s", ndf_context_message(ctx));
  CHECK(p && (strncmp(ndf_plan_solver(p), "cuda", 4) == 0) == cuda, "solver %s",
        p ? ndf_plan_solver(p) : "?");
  ndf_plan_destroy(p);
  /* every element of the view as float32 then out's dtype; the parent's other bytes as before */
  const int64_t n = ndf_array_size(&in.hview);
  const size_t es = ndf_dtype_size(odt);
  unsigned char *want = malloc(out.bytes);
  if (!want) abort();
  memcpy(want, before, out.bytes);
  ndf_array wv = out.hview;
  wv.data = want + ((char *)out.hview.data - (char *)out.host);
  for (int64_t i = 0; i < n; i++) {
    const double x = ndf__load(idt, in.hview.data, ndf__offset(&in.hview, i));
    const double v = cuda ? (double)(float)x : x; /* the GPU computes in float32 */
    ndf__store(odt, wv.data, ndf__offset(&wv, i), v);
  }
  for (size_t b = 0; b < out.bytes; b++)
    if (((unsigned char *)out.host)[b] != want[b]) {
      const int64_t e = (int64_t)(b / es);
      fprintf(stderr,
              "  case: copy (%lld,%lld,%lld) %s%s -> %s%s: parent element %lld differs (byte "
              "%zu)\n",
              (long long)shape[0], (long long)shape[1], (long long)shape[2], ndf_dtype_name(idt),
              sin ? "/strided" : "", ndf_dtype_name(odt), sout ? "/strided" : "", (long long)e, b);
      t_failures++;
      break;
    }
  free(want);
  free(before);
  t_arr_free(&in, NULL);
  t_arr_free(&out, NULL);
}

/* auto's recursive Gaussian (tolerance 1e-3) and a NaN in the input's last chunk. */
static void late_nan(ndf_context *ctx) {
  const int64_t shape[3] = {3, 700, 1001}, n = 3 * 700 * 1001;
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  if (!x || !y) abort();
  for (int64_t i = 0; i < n; i++)
    x[i] = (float)(i % 97) / 97.f;
  ndf_array xv = ndf_array_contiguous(NDF_F32, 3, shape, x),
            yv = ndf_array_contiguous(NDF_F32, 3, shape, y);
  ndf_gaussian_opts o = {.struct_size = sizeof o, .tolerance = 1e-3};
  for (int d = 0; d < 3; d++) {
    o.sigma[d] = 3;
    o.mode[d] = NDF_MODE_NEAREST;
  }
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_gaussian(&p, ctx, &xv, &yv, &o);
  CHECK(st == NDF_OK, "%s", ndf_context_message(ctx));
  if (st != NDF_OK) return;
  const char *solver = ndf_plan_solver(p);
  st = ndf_execute(p, &xv, &yv);
  CHECK(st == NDF_OK && !strcmp(ndf_plan_last_solver(p), solver), "finite input ran %s, not %s",
        ndf_plan_last_solver(p), solver);
  x[n - 5] = NAN;
  st = ndf_execute(p, &xv, &yv);
  if (!strcmp(solver, "cuda_iir"))
    CHECK(st == NDF_OK && strcmp(ndf_plan_last_solver(p), solver),
          "a NaN in the last chunk: %s ran", ndf_plan_last_solver(p));
  else
    printf("auto planned %s (no exact twin to check)\n", solver);
  CHECK(isnan(y[n - 5]) && !isnan(y[0]), "the NaN's footprint: y[n-5] %g, y[0] %g", y[n - 5], y[0]);
  ndf_plan_destroy(p);
  free(x);
  free(y);
}

/* Page-locked host arrays (ndf_array_alloc_host), which the plan copies directly: a Gaussian
 * over several chunks with every pairing of page-locked and ordinary input and output must give
 * the same bits as ordinary arrays, and a page-locked output must be written whole. */
static void pinned_case(ndf_context *ctx, uint64_t *r) {
  const int64_t shape[3] = {t_randint(r, 2, 4), t_randint(r, 300, 700), t_randint(r, 700, 1100)};
  const int64_t n = shape[0] * shape[1] * shape[2];
  const size_t bytes = (size_t)n * sizeof(float);
  ndf_array pin[2], ord[2];
  for (int k = 0; k < 2; k++) {
    ndf_status st = ndf_array_alloc_host(ctx, &pin[k], NDF_F32, 3, shape);
    CHECK(st == NDF_OK, "ndf_array_alloc_host: %s", ndf_context_message(ctx));
    if (st != NDF_OK) return;
    CHECK(pin[k].place.kind == NDF_PLACE_HOST, "a host array's place is %d", pin[k].place.kind);
    ord[k] = ndf_array_contiguous(NDF_F32, 3, shape, malloc(bytes));
    if (!ord[k].data) abort();
  }
  float *x = ord[0].data, *want = malloc(bytes);
  if (!want) abort();
  for (int64_t i = 0; i < n; i++)
    x[i] = (float)t_randint(r, -1000, 1000) / 64.f;
  memcpy(pin[0].data, x, bytes);
  ndf_gaussian_opts o = {.struct_size = sizeof o, .sigma = {1.5, 2.5, 3.5}};
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_gaussian(&p, ctx, &ord[0], &ord[1], &o);
  if (st == NDF_OK) st = ndf_execute(p, &ord[0], &ord[1]);
  CHECK(st == NDF_OK, "%s", ndf_context_message(ctx));
  if (st == NDF_OK) memcpy(want, ord[1].data, bytes);
  for (int k = 0; k < 3 && st == NDF_OK; k++) { /* page-locked input, output, or both */
    const ndf_array *in = k == 1 ? &ord[0] : &pin[0];
    ndf_array *out = k == 0 ? &ord[1] : &pin[1];
    memset(out->data, 0xff, bytes); /* NaN: poison */
    st = ndf_execute(p, in, out);
    CHECK(st == NDF_OK, "%s", ndf_context_message(ctx));
    const float *got = out->data;
    for (int64_t i = 0; i < n && st == NDF_OK; i++)
      if (memcmp(&got[i], &want[i], sizeof(float))) {
        fprintf(stderr, "  case: pinned (%lld,%lld,%lld) pairing %d: element %lld is %g, not %g\n",
                (long long)shape[0], (long long)shape[1], (long long)shape[2], k, (long long)i,
                got[i], want[i]);
        t_failures++;
        break;
      }
  }
  ndf_plan_destroy(p);
  for (int k = 0; k < 2; k++) {
    ndf_array_free(ctx, &pin[k]);
    CHECK(pin[k].data == NULL, "ndf_array_free left data set");
    free(ord[k].data);
  }
  free(want);
}

/* A context whose device auto chose runs a CPU solver on host arrays where the transfers would
 * cost more than the work (a tiny Gaussian), the GPU where the work dominates (a 7^3 kernel on
 * 96^3); an explicit CUDA context always the GPU. */
static void auto_choice(void) {
  if (getenv("NDF_DEVICE")) return; /* the device then is not auto's */
  ndf_context *a = NULL, *c = NULL;
  ndf_context_opts o = {.struct_size = sizeof o};
  if (ndf_context_create(&a, &o) != NDF_OK) return;
  o.device = "cuda";
  if (ndf_context_create(&c, &o) != NDF_OK) abort();
  const int64_t small[2] = {8, 8}, big[3] = {96, 96, 96}, k[3] = {7, 7, 7};
  ndf_array s = ndf_array_contiguous(NDF_F32, 2, small, NULL),
            b = ndf_array_contiguous(NDF_F32, 3, big, NULL);
  ndf_gaussian_opts g = {.struct_size = sizeof g, .sigma = {1, 1}};
  double *w = calloc(343, sizeof *w);
  if (!w) abort();
  w[171] = 1;
  ndf_plan *p = NULL;
  CHECK(ndf_plan_gaussian(&p, a, &s, &s, &g) == NDF_OK, "%s", ndf_context_message(a));
  CHECK(p && !strncmp(ndf_plan_solver(p), "cpu_", 4), "auto, 8x8 Gaussian: %s",
        p ? ndf_plan_solver(p) : "?");
  CHECK(p && ndf_plan_cost(p) > 0 && ndf_plan_cost(p) < 1e-3, "its estimate %g",
        p ? ndf_plan_cost(p) : 0);
  ndf_plan_destroy(p);
  CHECK(ndf_plan_gaussian(&p, c, &s, &s, &g) == NDF_OK, "%s", ndf_context_message(c));
  CHECK(p && !strncmp(ndf_plan_solver(p), "cuda_", 5), "cuda, 8x8 Gaussian: %s",
        p ? ndf_plan_solver(p) : "?");
  ndf_plan_destroy(p);
  CHECK(ndf_plan_correlate(&p, a, &b, &b, w, k, NULL) == NDF_OK, "%s", ndf_context_message(a));
  CHECK(p && !strncmp(ndf_plan_solver(p), "cuda_", 5), "auto, 96^3 by 7^3: %s",
        p ? ndf_plan_solver(p) : "?");
  ndf_plan_destroy(p);
  free(w);
  ndf_context_destroy(a);
  ndf_context_destroy(c);
}

int main(int argc, char **argv) {
  ndf_context *ctx;
  const char *dev = argc > 1 ? argv[1] : "cuda";
  cuda = !strcmp(dev, "cuda");
  const int rc = t_open(&ctx, dev);
  if (rc) return rc;
  uint64_t r = t_seed();
  const int ncases = (int)t_env_double("NDF_TEST_CASES", 12);
  for (int k = 0; k < ncases; k++)
    copy_case(ctx, &r);
  late_nan(ctx);
  pinned_case(ctx, &r);
  if (cuda) auto_choice();
  ndf_context_destroy(ctx);
  printf("%d copy cases; %d failures\n", ncases, t_failures);
  return t_failures ? 1 : 0;
}
