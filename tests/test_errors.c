/* SPDX-License-Identifier: BSD-3-Clause */
/* test_errors.c - bad arguments give the right status and leave the output untouched. */
#include "common.h"

#define N 24
static float inbuf[N], outbuf[N], pattern[N];
static ndf_context *ctx;

static void reset(void) {
  for (int i = 0; i < N; i++) {
    inbuf[i] = (float)i - 7.5f;
    outbuf[i] = pattern[i] = 1000.f + (float)i;
  }
}

/* Runs the one-shot correlate1d and checks status and untouched output. */
static void expect(ndf_status want, ndf_array *in, ndf_array *out, const double *w, int64_t n,
                   int axis, const ndf_correlate1d_opts *o, const char *what) {
  ndf_status st = ndf_correlate1d(ctx, in, out, w, n, axis, o);
  CHECK(st == want, "%s: got %s, want %s", what, ndf_status_str(st), ndf_status_str(want));
  CHECK(!memcmp(outbuf, pattern, sizeof outbuf), "%s: output changed", what);
  CHECK(st == NDF_OK || *ndf_context_message(ctx), "%s: no message", what);
  reset();
}

int main(void) {
  ndf_context_opts co = {.struct_size = sizeof co, .device = "cpu"};
  if (ndf_context_create(&ctx, &co) != NDF_OK) return 1;
  const int64_t shape[2] = {4, 6};
  const double w[3] = {1, 2, 1};
  ndf_correlate1d_opts o = {sizeof o, NULL, NDF_MODE_REFLECT, 0, 0};
  reset();
  ndf_array in = ndf_array_contiguous(NDF_F32, 2, shape, inbuf);
  ndf_array out = ndf_array_contiguous(NDF_F32, 2, shape, outbuf);
  ndf_array a = in, b = out;

  a.ndim = 0;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "ndim 0");
  a = in;
  a.ndim = 5;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "ndim 5");
  a = in;
  a.shape[1] = 0;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "zero size");
  a = in;
  a.shape[0] = -4;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "negative size");
  a = in;
  a.data = NULL;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "NULL input data");
  a = in;
  b.data = NULL;
  expect(NDF_EINVAL, &in, &b, w, 3, 0, &o, "NULL output data");
  b = out;
  b.shape[0] = 3;
  b.shape[1] = 8;
  expect(NDF_EINVAL, &in, &b, w, 3, 0, &o, "shape mismatch");
  b = out;
  b.ndim = 1;
  b.shape[0] = 24;
  expect(NDF_EINVAL, &in, &b, w, 3, 0, &o, "ndim mismatch");
  b = out;
  a.dtype = 0;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "dtype 0");
  a = in;
  a.dtype = 99;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "dtype 99");
  a = in;
  a.place.kind = NDF_PLACE_CUDA;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "device array, CPU context");
  a = in;
  a.place.kind = 7;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "bad place");
  a = in;
  expect(NDF_EINVAL, &in, &out, NULL, 3, 0, &o, "NULL weights");
  expect(NDF_EINVAL, &in, &out, w, 0, 0, &o, "no weights");
  expect(NDF_EINVAL, &in, &out, w, 3, 2, &o, "axis 2 of 2-D");
  expect(NDF_EINVAL, &in, &out, w, 3, -3, &o, "axis -3 of 2-D");
  o.origin = 2;
  expect(NDF_EINVAL, &in, &out, w, 3, 0, &o, "origin 2 with 3 weights");
  o.origin = -2;
  expect(NDF_EINVAL, &in, &out, w, 3, 0, &o, "origin -2 with 3 weights");
  o.origin = 0;
  o.mode = 99;
  expect(NDF_EINVAL, &in, &out, w, 3, 0, &o, "mode 99");
  o.mode = NDF_MODE_REFLECT;
  o.method = "fastest";
  expect(NDF_EINVAL, &in, &out, w, 3, 0, &o, "unknown method");
  o.method = "cuda_direct";
  /* On a CUDA build the solver exists but not on this CPU context; else it is unknown. */
  {
    const char *op;
    int have = 0;
    for (int i = 0; ndf_solver_name(i, &op); i++)
      have |= !strcmp(ndf_solver_name(i, NULL), "cuda_direct");
    expect(have ? NDF_EUNSUPPORTED : NDF_EINVAL, &in, &out, w, 3, 0, &o, "CUDA method on CPU");
  }
  /* the one-axis solvers' former names, "cpu_direct" and the kind "direct", still plan them */
  for (int k = 0; k < 2; k++) {
    o.method = k ? "direct" : "cpu_direct";
    ndf_plan *q = NULL;
    CHECK(ndf_plan_correlate1d(&q, ctx, &in, &out, w, 3, 0, &o) == NDF_OK && q &&
              !strcmp(ndf_plan_solver(q), "cpu_corr1d"),
          "method %s: %s", o.method, q ? ndf_plan_solver(q) : ndf_context_message(ctx));
    ndf_plan_destroy(q);
  }
  o.method = NULL;
  o.struct_size = 8;
  expect(NDF_EINVAL, &in, &out, w, 3, 0, &o, "struct_size too small");
  o.struct_size = sizeof o;
  b.strides[0] = 0;
  expect(NDF_EINVAL, &in, &b, w, 3, 0, &o, "output stride 0");
  b = out;
  b.strides[0] = 3;
  b.strides[1] = 1;
  expect(NDF_EINVAL, &in, &b, w, 3, 0, &o, "overlapping output strides");
  b = out;
  a.data = outbuf + 2;
  a.shape[0] = 2;
  b.shape[0] = 2;
  expect(NDF_EINVAL, &a, &b, w, 3, 0, &o, "partial overlap of in and out");
  a = in;
  b = out;
  /* Data not aligned to its elements (an offset numpy view): refused, never loaded. */
  a.data = (char *)inbuf + 1;
  expect(NDF_EINVAL, &a, &out, w, 3, 0, &o, "unaligned input data");
  a = in;
  b.data = (char *)outbuf + 2;
  b.shape[0] = 3;
  a.shape[0] = 3;
  expect(NDF_EINVAL, &a, &b, w, 3, 0, &o, "unaligned output data");
  a = in;
  b = out;
  /* Shapes whose byte counts wrap int64 or size_t: refused at planning. */
  {
    ndf_array big = ndf_array_contiguous(NDF_F32, 3, (int64_t[]){1LL << 30, 1LL << 30, 4}, NULL);
    ndf_plan *q = NULL;
    ndf_status st = ndf_plan_correlate1d(&q, ctx, &big, &big, w, 3, 0, &o);
    CHECK(st == NDF_EINVAL && !q, "shape (2^30, 2^30, 4): %s", ndf_status_str(st));
    big = ndf_array_contiguous(NDF_F32, 2, (int64_t[]){1LL << 20, 1LL << 20}, NULL);
    big.strides[0] = 1LL << 60;
    st = ndf_plan_correlate1d(&q, ctx, &big, &big, w, 3, 0, &o);
    CHECK(st == NDF_EINVAL && !q, "strides past int64 bytes: %s", ndf_status_str(st));
    ndf_gaussian_opts g = {.struct_size = sizeof g};
    g.sigma[0] = 1;
    g.tolerance = -1;
    st = ndf_plan_gaussian(&q, ctx, &in, &out, &g);
    CHECK(st == NDF_EINVAL && !q, "negative tolerance: %s", ndf_status_str(st));
    g.tolerance = NAN;
    st = ndf_plan_gaussian(&q, ctx, &in, &out, &g);
    CHECK(st == NDF_EINVAL && !q, "NaN tolerance: %s", ndf_status_str(st));
  }

  ndf_mode m;
  CHECK(ndf_mode_parse("bogus", &m) == NDF_EINVAL, "mode 'bogus' parsed");
  CHECK(ndf_mode_parse("grid-wrap", &m) == NDF_OK && m == NDF_MODE_WRAP, "grid-wrap");
  CHECK(ndf_mode_parse(NULL, &m) == NDF_EINVAL, "NULL mode name");

  /* Plans: NULL-safety, and arrays that differ from the plan's. */
  ndf_plan *p = (ndf_plan *)&p;
  CHECK(ndf_plan_correlate1d(&p, NULL, &in, &out, w, 3, 0, &o) == NDF_EINVAL && p == NULL,
        "NULL ctx");
  CHECK(ndf_plan_correlate1d(NULL, ctx, &in, &out, w, 3, 0, &o) == NDF_EINVAL, "NULL plan pointer");
  ndf_plan_destroy(NULL);
  CHECK(ndf_execute(NULL, &in, &out) == NDF_EINVAL, "NULL plan");
  CHECK(ndf_plan_correlate1d(&p, ctx, &in, &out, w, 3, 1, &o) == NDF_OK, "plan");
  CHECK(!strcmp(ndf_plan_solver(p), "cpu_corr1d"), "solver %s", ndf_plan_solver(p));
  b.dtype = NDF_F64;
  CHECK(ndf_execute(p, &in, &b) == NDF_EINVAL, "dtype differs from plan");
  b = out;
  b.shape[0] = 2;
  CHECK(ndf_execute(p, &in, &b) == NDF_EINVAL, "shape differs from plan");
  b = out;
  CHECK(ndf_execute(p, &in, NULL) == NDF_EINVAL, "NULL out");
  CHECK(!memcmp(outbuf, pattern, sizeof outbuf), "output changed by failed executes");
  CHECK(ndf_execute(p, &in, &out) == NDF_OK, "good execute");
  ndf_plan_destroy(p);

  CHECK(ndf_status_str(NDF_OK) && ndf_status_str((ndf_status)1234), "status strings");
  ndf_context_destroy(ctx);
  ndf_context_destroy(NULL);
  printf("bad-argument checks: %d failures\n", t_failures);
  return t_failures ? 1 : 0;
}
