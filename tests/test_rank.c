/* SPDX-License-Identifier: BSD-3-Clause */
/* test_rank.c - rank filters (ndf_plan_rank) against a brute-force reference: every output's
 * footprint samples gathered through the modes and sorted, the rank's value taken. Random 1-4-D
 * shapes, every dtype in and out, strided and reversed views, boxes and footprints with holes,
 * every mode and origin, minimum, maximum and any rank, in place too; the results must be
 * equal (a rank filter's result is one of the samples, stored in out's dtype). The tests of
 * the binding compare with scipy itself (python/tests/test_rank.py); this one runs in the
 * sanitizer builds.
 *
 *   test_rank [cpu|cuda] [method]     (NDF_TEST_SEED, NDF_TEST_CASES) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/boundary.h"
#include "core/select.h"

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* On a GPU (cuda) the arrays lie on the device or the host at random; float64 goes to the
 * device, in and out both float64 (cuda_rank filters float64 as it is there and nowhere else),
 * strided now and then (through contiguous buffers). */
static void one_case(ndf_context *ctx, int cuda, const char *method, uint64_t *r, int c) {
  /* every fifth case a uint8 median of a 3x3 box over the last two axes (cpu_rank's columns) */
  const int med9 = c % 5 == 4;
  /* every seventh (else) an 8- or 16-bit integer box past the networks' 128 samples (the
   * sliding histogram) */
  const int big8 = !med9 && c % 7 == 6;
  /* every sixth (else) a median of a box 3 to 7 wide over the last two axes or 3 to 5 over the
   * last three, or of a footprint of 5, 7, 9 or 25 samples in one (cuda_rank's tile) */
  const int medk = !med9 && !big8 && c % 6 == 5, medk3 = medk && t_randint(r, 0, 1);
  /* every eleventh (else) a box's minimum or maximum along rows past one segment of the GPU's
   * row passes (256), the window up to 40 long */
  const int longx = !med9 && !big8 && !medk && c % 11 == 10;
  /* every thirteenth (else) a uint8 box's minimum or maximum over the last two axes, up to 17
   * rows tall, uint8 out, contiguous (cpu_rank's rows through a ring) */
  const int ring8 = !med9 && !big8 && !medk && !longx && c % 13 == 12;
  const int nd = (int)t_randint(r, med9 || big8 || medk ? 2 + medk3 : 1, big8 ? 3 : longx ? 2 : 4);
  int64_t shape[NDF_MAX_DIMS], k[NDF_MAX_DIMS];
  int64_t n = 1, size = 1;
  double cv; /* cval as scipy casts it to an integer input's dtype */
  ndf_rank_opts o = {.struct_size = sizeof o, .method = method};
  for (int d = 0; d < nd; d++) {
    shape[d] = t_randint(r, 1, nd > 2 ? 9 : 30);
    if (d == nd - 1 && t_randint(r, 0, 1)) /* rows long enough for 32 outputs side by side */
      shape[d] = t_randint(r, 33, nd > 2 ? 70 : 120);
    if (medk && d == nd - 2 && t_randint(r, 0, 1)) /* more than one tile of 32 rows */
      shape[d] = t_randint(r, 33, 70);
    if (longx) shape[d] = d == nd - 1 ? t_randint(r, 250, 700) : t_randint(r, 1, 6);
    k[d] = med9    ? (d >= nd - 2 ? 3 : 1)
           : big8  ? (d >= nd - 2 ? t_randint(r, 12, 16) : t_randint(r, 1, 2))
           : medk  ? (d >= nd - 2 - medk3 ? 2 * t_randint(r, 1, medk3 ? 2 : 3) + 1 : 1)
           : longx ? t_randint(r, 1, d == nd - 1 ? 40 : 5)
           : ring8 ? (d >= nd - 2 ? t_randint(r, 1, 17) : 1)
                   : t_randint(r, 1, 5);
    o.mode[d] = (ndf_mode)t_randint(r, 0, 4);
    o.origin[d] = (int)t_randint(r, -(k[d] / 2), (k[d] - 1) / 2);
    n *= shape[d];
    size *= k[d];
  }
  o.cval = (double)t_randint(r, -3, 3);
  const ndf_dtype ints[3] = {NDF_U8, NDF_U16, NDF_I16};
  ndf_dtype idt = med9 || ring8 ? NDF_U8
                  : big8        ? ints[t_randint(r, 0, 2)]
                                : (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  ndf_dtype odt = ring8 || t_randint(r, 0, 2) ? idt : (ndf_dtype)t_randint(r, NDF_U8, NDF_F64);
  const int f64 = cuda && (idt == NDF_F64 || odt == NDF_F64);
  if (f64) idt = odt = NDF_F64;
  ndf_context *din = f64 || (cuda && t_randint(r, 0, 1)) ? ctx : NULL;
  ndf_context *dout = f64 || (cuda && t_randint(r, 0, 1)) ? ctx : NULL;
  cv = idt == NDF_U8    ? (double)(uint8_t)(int64_t)o.cval
       : idt == NDF_U16 ? (double)(uint16_t)(int64_t)o.cval
       : idt == NDF_I16 ? (double)(int16_t)(int64_t)o.cval
                        : o.cval;
  const int holes = !med9 && !longx && !ring8 && t_randint(r, 0, 1),
            inplace = !ring8 && idt == odt && din == dout && t_randint(r, 0, 5) == 0;
  unsigned char *fp = malloc((size_t)size);
  if (!fp) abort();
  int64_t m = 0;
  /* holes: a third of the samples out, a sixth of a big box's (most keep it past the networks,
   * so the histogram takes the footprint) */
  for (int64_t j = 0; j < size; j++)
    m += fp[j] = !holes || t_randint(r, 0, big8 ? 5 : 2) > 0;
  if (m == 0) m += fp[0] = 1;
  if (medk && holes) { /* as many samples as the tile's counts, where the box has them */
    const int64_t counts[4] = {5, 7, 9, 25}, want = counts[t_randint(r, 0, 3)];
    while (m > want && m > 1) {
      const int64_t j = t_randint(r, 0, size - 1);
      m -= fp[j];
      fp[j] = 0;
    }
  }
  const int64_t which = t_randint(r, 0, longx || ring8 ? 1 : 3);
  const int64_t rank = med9         ? 4
                       : medk       ? m / 2
                       : which == 0 ? 0
                       : which == 1 ? -1
                                    : t_randint(r, -m, m - 1);
  const int64_t rk = rank < 0 ? rank + m : rank;

  t_arr in, out;
  t_arr_make(&in, r, idt, nd, shape, !ring8 && t_randint(r, 0, f64 ? 3 : 1) == 1, din);
  t_fill_random(&in, r);
  if (big8 && idt != NDF_U8 && t_randint(r, 0, 1)) /* values about a 256 boundary, with ties */
    for (int64_t i = 0; i < n; i++) {
      const int64_t o_i = ndf__offset(&in.hview, i);
      const double v = ndf__load(idt, in.hview.data, o_i);
      ndf__store(idt, in.hview.data, o_i, 200 + fmod(fabs(v), 120.0) - (idt == NDF_I16) * 512);
    }
  t_arr_upload(&in, ctx);
  if (inplace)
    out = in;
  else
    t_arr_make(&out, r, odt, nd, shape, !ring8 && t_randint(r, 0, f64 ? 3 : 1) == 1, dout);
  double *x = malloc((size_t)n * sizeof *x), *want = malloc((size_t)n * sizeof *want),
         *v = malloc((size_t)m * sizeof *v);
  if (!x || !want || !v) abort();
  for (int64_t i = 0; i < n; i++)
    x[i] = ndf__load(idt, in.hview.data, ndf__offset(&in.hview, i));
  for (int64_t i = 0; i < n; i++) { /* the reference */
    int64_t idx[NDF_MAX_DIMS], rest = i;
    for (int d = nd - 1; d >= 0; d--) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    int64_t cnt = 0;
    for (int64_t j = 0; j < size; j++) {
      if (!fp[j]) continue;
      int64_t jr = j, at = 0, stride = 1, d;
      double val = cv;
      int inside = 1;
      for (d = nd - 1; d >= 0; d--) {
        const int64_t q = jr % k[d];
        jr /= k[d];
        const int64_t s =
            ndf__map_index(idx[d] + q - (k[d] / 2 + o.origin[d]), shape[d], o.mode[d]);
        if (s < 0) inside = 0;
        at += s * stride;
        stride *= shape[d];
      }
      if (inside) val = x[at];
      v[cnt++] = val;
    }
    qsort(v, (size_t)cnt, sizeof *v, cmp);
    want[i] = v[rk];
  }
  if (!inplace) {
    t_poison(&out);
    t_arr_upload(&out, ctx);
  }
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_rank(&p, ctx, &in.view, &out.view, rank, holes ? fp : NULL, k, &o);
  if (st == NDF_OK) st = ndf_execute(p, &in.view, &out.view);
  if (st == NDF_OK) t_arr_download(&out, ctx);
  CHECK(st == NDF_OK, "case %d: %s", c, ndf_context_message(ctx));
  for (int64_t i = 0; i < n && st == NDF_OK; i++) {
    const double got = ndf__load(odt, out.hview.data, ndf__offset(&out.hview, i));
    double w = want[i];
    if (odt != NDF_F32 && odt != NDF_F64) { /* stored as every ndf output: rounded, clamped */
      unsigned char b[8];
      ndf__store(odt, b, 0, w);
      w = ndf__load(odt, b, 0);
    } else if (odt == NDF_F32) {
      w = (float)w;
    }
    if (got != w) {
      fprintf(stderr,
              "  case %d: %dD %s -> %s rank %lld of %lld, %s: element %lld is %g, reference %g\n",
              c, nd, ndf_dtype_name(idt), ndf_dtype_name(odt), (long long)rank, (long long)m,
              holes ? "footprint" : "box", (long long)i, got, w);
      t_failures++;
      break;
    }
  }
  ndf_plan_destroy(p);
  free(x);
  free(want);
  free(v);
  free(fp);
  t_arr_free(&in, ctx);
  if (!inplace) t_arr_free(&out, ctx);
}

/* Bad calls: a rank outside the footprint, an all-zero footprint, an origin off the footprint,
 * a zero length; each refused with NDF_EINVAL. */
static void bad_calls(ndf_context *ctx) {
  float buf[16] = {0};
  const int64_t shape[2] = {4, 4}, k[2] = {3, 3}, k0[2] = {0, 3};
  ndf_array a = ndf_array_contiguous(NDF_F32, 2, shape, buf);
  ndf_array b = ndf_array_contiguous(NDF_F32, 2, shape, buf);
  unsigned char zero[9] = {0};
  ndf_rank_opts o = {.struct_size = sizeof o};
  ndf_plan *p = NULL;
  CHECK(ndf_plan_rank(&p, ctx, &a, &b, 9, NULL, k, &o) == NDF_EINVAL, "rank 9 of 9");
  CHECK(ndf_plan_rank(&p, ctx, &a, &b, -10, NULL, k, &o) == NDF_EINVAL, "rank -10 of 9");
  CHECK(ndf_plan_rank(&p, ctx, &a, &b, 0, zero, k, &o) == NDF_EINVAL, "all-zero footprint");
  CHECK(ndf_plan_rank(&p, ctx, &a, &b, 0, NULL, k0, &o) == NDF_EINVAL, "length 0");
  o.origin[0] = 2;
  CHECK(ndf_plan_rank(&p, ctx, &a, &b, 0, NULL, k, &o) == NDF_EINVAL, "origin 2 of 3");
  o.origin[0] = 0;
  /* a cval no integer holds, for an integer input (scipy raises too); a float input takes it */
  uint8_t bytes[16] = {0};
  ndf_array a8 = ndf_array_contiguous(NDF_U8, 2, shape, bytes);
  const double odd[3] = {NAN, INFINITY, -1e19};
  for (int j = 0; j < 3; j++) {
    o.cval = odd[j];
    CHECK(ndf_plan_rank(&p, ctx, &a8, &a8, 4, NULL, k, &o) == NDF_EINVAL, "uint8, cval %g", odd[j]);
  }
  CHECK(p == NULL, "a refused plan is NULL");
  CHECK(ndf_plan_rank(&p, ctx, &a, &b, 4, NULL, k, &o) == NDF_OK, "float32, cval -1e19");
  ndf_plan_destroy(p);
}

/* The forgetful selection of cuda_rank's median tile (select.h), here in C: the median of 1 to
 * 130 values, with and without ties, against a sort. */
#define FMIN(a, b) ((b) < (a) ? (b) : (a))
#define FMAX(a, b) ((b) < (a) ? (a) : (b))
NDF__FORGETFUL_MEDIAN(forgetful_median, double, static, FMIN, FMAX, )

static void forgetful_checks(uint64_t *r) {
  double v[130], w[130];
  int bad = 0;
  for (int t = 0; t < 20000 && bad < 5; t++) {
    const int n = (int)t_randint(r, 1, 130), range = t % 3 ? 1000 : (int)t_randint(r, 1, 4);
    for (int i = 0; i < n; i++)
      v[i] = w[i] = (double)t_randint(r, 0, range - 1);
    /* a second window b sharing v's first c samples, its own after them: the steps up to c
     * once, then the buffer goes on with each window's samples */
    const int top = NDF__FORGETFUL_TOP(n), c = top + 1 < n ? (int)t_randint(r, top + 1, n) : n;
    double a[130], b[130], wb[130];
    for (int i = 0; i < n; i++) {
      a[i] = v[i];
      b[i] = wb[i] = i < c ? v[i] : (double)t_randint(r, 0, range - 1);
    }
    qsort(w, (size_t)n, sizeof *w, cmp);
    qsort(wb, (size_t)n, sizeof *wb, cmp);
    const double got = forgetful_median(v, n);
    forgetful_median_steps(a, n, top + 1, c);
    for (int i = 0; i <= 2 * top + 1 - c; i++)
      b[i] = a[i];
    forgetful_median_steps(a, n, c, n);
    forgetful_median_steps(b, n, c, n);
    const double ga = forgetful_median_finish(a, n), gb = forgetful_median_finish(b, n);
    if (got != w[n / 2] || ga != w[n / 2] || gb != wb[n / 2]) {
      fprintf(stderr,
              "  forgetful median of %d values (0 to %d): %g, the sort's %g; sharing the first "
              "%d: %g and %g, the sorts' %g and %g\n",
              n, range - 1, got, w[n / 2], c, ga, gb, w[n / 2], wb[n / 2]);
      bad++;
    }
  }
  t_failures += bad;
}

int main(int argc, char **argv) {
  ndf_context *ctx;
  const char *dev = argc > 1 ? argv[1] : "cpu";
  const char *method = argc > 2 ? argv[2] : NULL;
  const int rc = t_open(&ctx, dev);
  if (rc) return rc;
  uint64_t r = t_seed();
  const int ncases = (int)t_env_double("NDF_TEST_CASES", 200);
  for (int c = 0; c < ncases; c++)
    one_case(ctx, !strcmp(dev, "cuda"), method, &r, c);
  bad_calls(ctx);
  forgetful_checks(&r);
  ndf_context_destroy(ctx);
  printf("%d cases; %d failures\n", ncases, t_failures);
  return t_failures ? 1 : 0;
}
