/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli.c - the ndfilt tool end to end: commands, exit codes, no output on failure.
 * usage: test_cli PATH/TO/ndfilt */
#include <sys/stat.h>
#include <sys/wait.h>

#include "common.h"
#include "io/npy.h"
#include "ref/ref.h"

static const char *exe;
static char dir[] = "/tmp/ndf_cli_XXXXXX";

static int run(const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "NDF_DEVICE=cpu '%s' %s >%s/stdout 2>%s/stderr", exe, args, dir, dir);
  int s = system(cmd);
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

static int file_has(const char *name, const char *needle) {
  char path[512], buf[8192];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strstr(buf, needle) != NULL;
}

/* src/ref's separable filter; axes with w[d] == NULL are not filtered. */
static void ref_sep(const ndf_array *in, double *ref, const double *const *w, const int64_t *n,
                    const ndf_mode *mode, const int *origin, double cval, int convolve) {
  int64_t nn[NDF_MAX_DIMS] = {0};
  int zero[NDF_MAX_DIMS] = {0};
  for (int d = 0; d < in->ndim; d++)
    nn[d] = w[d] ? n[d] : 0;
  ndf_ref_sepfilter(in, ref, w, nn, mode, cval, origin ? origin : zero, convolve);
}

/* Float64 reference of scipy.ndimage.gaussian_filter with o's parameters
 * (truncate 0 meaning 4, radius 0 meaning truncate's). */
static void ref_gauss(const ndf_array *in, double *ref, const ndf_gaussian_opts *o) {
  double *w[NDF_MAX_DIMS] = {NULL};
  int64_t n[NDF_MAX_DIMS] = {0};
  const double truncate = o->truncate ? o->truncate : 4.0;
  for (int d = 0; d < in->ndim; d++) {
    if (o->sigma[d] <= 1e-15) continue;
    int r = o->radius[d] > 0 ? o->radius[d] : (int)(truncate * o->sigma[d] + 0.5);
    n[d] = 2 * r + 1;
    w[d] = malloc((size_t)n[d] * sizeof(double));
    if (!w[d] || ndf_gaussian_kernel1d(o->sigma[d], o->order[d], r, w[d]) != NDF_OK) abort();
  }
  ref_sep(in, ref, (const double *const *)w, n, o->mode, NULL, o->cval, 0);
  for (int d = 0; d < NDF_MAX_DIMS; d++)
    free(w[d]);
}

/* Largest |out - ref| of a float32 output file; -1 if unreadable or not f32. */
static double worst_error(const char *path, const double *ref, int64_t count, int64_t *at) {
  char err[512];
  ndf_array y;
  if (ndf_npy_read(path, &y, err, sizeof err) != NDF_OK) return -1;
  double worst = y.dtype == NDF_F32 && ndf_array_size(&y) == count ? 0 : -1;
  for (int64_t i = 0; i < count && worst >= 0; i++) {
    double e = fabs(((float *)y.data)[i] - ref[i]);
    if (e > worst) worst = e, *at = i;
  }
  free(y.data);
  return worst;
}

/* Writes a .npy file of raw little-endian data of numpy dtype `descr` (e.g. "<i8", which
 * ndf_npy_write does not write) and shape[0..nd-1]. */
static int write_npy_raw(const char *path, const char *descr, int nd, const int64_t *shape,
                         const void *data, size_t bytes) {
  char dict[192];
  int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int d = 0; d < nd; d++)
    k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld, ", (long long)shape[d]);
  k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
  while ((10 + k + 1) % 64)
    dict[k++] = ' ';
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc((k + 1) & 255, f);
  fputc((k + 1) >> 8, f);
  fwrite(dict, 1, (size_t)k, f);
  fputc('\n', f);
  fwrite(data, 1, bytes, f);
  return fclose(f) == 0;
}

/* Reads a float32 .npy of `count` elements into a malloc'd array; NULL if it is not one. */
static float *read_f32(const char *path, int64_t count, ndf_array *y) {
  char err[512];
  if (ndf_npy_read(path, y, err, sizeof err) != NDF_OK) return NULL;
  if (y->dtype == NDF_F32 && ndf_array_size(y) == count) return y->data;
  free(y->data);
  return NULL;
}

/* Relative L2 difference of two float32 .npy files of `count` elements; -1 if either is not
 * one. */
static double rel_l2_files(const char *a, const char *b, int64_t count) {
  ndf_array ya, yb;
  float *u = read_f32(a, count, &ya), *v = u ? read_f32(b, count, &yb) : NULL;
  double num = 0, den = 0;
  for (int64_t i = 0; v && i < count; i++) {
    num += ((double)u[i] - v[i]) * ((double)u[i] - v[i]);
    den += (double)v[i] * v[i];
  }
  free(u);
  free(v);
  return v && den > 0 ? sqrt(num / den) : -1;
}

/* Writes a float32 volume to path. */
static int write_f32(const char *path, int nd, const int64_t *shape, float *v) {
  char err[512];
  ndf_array a = ndf_array_contiguous(NDF_F32, nd, shape, v);
  return ndf_npy_write(path, &a, err, sizeof err) == NDF_OK;
}

/* conv and correlate: .npy kernels against the library and src/ref, the named kernels
 * against their definitions (scipy's laplace and sobel) and analytic values, the
 * quadrature bank's properties. x (5x6x7) is in `in`. */
static void check_conv(const ndf_array *x, const char *in, const char *out) {
  char args[1024], path[300], err[512];
  const int64_t *shape = x->shape, count = 210;
  double ref[210], tmp[210];
  ndf_array y;
  CHECK(run("conv --help") == 0 && file_has("stdout", "--kernel") &&
            file_has("stdout", "quadrature") && file_has("stdout", "example"),
        "conv --help");

  /* A float64 kernel of odd and even lengths, per-axis modes and origins. */
  const int64_t ks[3] = {3, 2, 4};
  double w[24];
  uint64_t r = 12345;
  for (int j = 0; j < 24; j++)
    w[j] = ndf_rand_uniform(&r);
  snprintf(path, sizeof path, "%s/k.npy", dir);
  ndf_array ka = ndf_array_contiguous(NDF_F64, 3, ks, w);
  CHECK(ndf_npy_write(path, &ka, err, sizeof err) == NDF_OK, "%s", err);
  const ndf_mode modes[3] = {NDF_MODE_WRAP, NDF_MODE_CONSTANT, NDF_MODE_MIRROR};
  const int origin[3] = {1, 0, -2};
  for (int convolve = 0; convolve < 2; convolve++) {
    ndf_ref_correlate(x, ref, w, ks, modes, 0.5, origin, convolve);
    unlink(out);
    snprintf(args, sizeof args,
             "%s %s %s --kernel %s --mode wrap,constant,mirror --cval 0.5 --origin 1,0,-2",
             convolve ? "conv" : "correlate", in, out, path);
    int rc = run(args);
    int64_t at = 0;
    double worst = worst_error(out, ref, count, &at);
    CHECK(rc == 0 && worst >= 0 && worst < 24 * 1e-5, "%s .npy kernel: exit %d, off by %g at %lld",
          convolve ? "conv" : "correlate", rc, worst, (long long)at);
  }
  /* The CLI passes kernel and options through unchanged: the library called directly. */
  {
    ndf_context *ctx;
    ndf_context_opts co = {.struct_size = sizeof co, .device = "cpu"};
    ndf_correlate_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.method = "direct";
    o.mode[0] = NDF_MODE_NEAREST, o.mode[1] = o.mode[2] = NDF_MODE_REFLECT;
    o.origin[2] = 1;
    float lib[210];
    ndf_array ya = ndf_array_contiguous(NDF_F32, 3, shape, lib);
    CHECK(ndf_context_create(&ctx, &co) == NDF_OK && ndf_convolve(ctx, x, &ya, w, ks, &o) == NDF_OK,
          "ndf_convolve");
    ndf_context_destroy(ctx);
    snprintf(args, sizeof args,
             "conv %s %s --kernel %s --mode nearest,reflect,reflect --origin 0,0,1 "
             "--method direct",
             in, out, path);
    float *v = run(args) == 0 ? read_f32(out, count, &y) : NULL;
    CHECK(v && !memcmp(v, lib, sizeof lib), "conv differs from ndf_convolve called directly");
    free(v);
  }
  /* An int64 kernel file (numpy's default integer), converted to float64. */
  {
    const int64_t ki[6] = {1, -2, 3, 0, 5, -1}, kshape[3] = {3, 1, 2};
    const double kd[6] = {1, -2, 3, 0, 5, -1};
    snprintf(path, sizeof path, "%s/ki8.npy", dir);
    CHECK(write_npy_raw(path, "<i8", 3, kshape, ki, sizeof ki), "writing %s", path);
    const ndf_mode refl[3] = {NDF_MODE_REFLECT, NDF_MODE_REFLECT, NDF_MODE_REFLECT};
    ndf_ref_correlate(x, ref, kd, kshape, refl, 0, NULL, 1);
    snprintf(args, sizeof args, "conv %s %s --kernel %s", in, out, path);
    int rc = run(args);
    int64_t at = 0;
    double worst = worst_error(out, ref, count, &at);
    CHECK(rc == 0 && worst >= 0 && worst < 12 * 1e-5, "int64 kernel: exit %d, off by %g", rc,
          worst);
  }

  /* laplace, as scipy.ndimage.laplace: the sum over axes of correlate1d with [1,-2,1]. */
  {
    static const char *mname[] = {"reflect", "constant", "nearest", "mirror", "wrap"};
    const double l3[3] = {1, -2, 1};
    for (int m = 0; m < 5; m++) {
      for (int64_t i = 0; i < count; i++)
        ref[i] = 0;
      for (int d = 0; d < 3; d++) {
        ndf_ref_correlate1d(x, tmp, l3, 3, d, (ndf_mode)m, 0.25, 0);
        for (int64_t i = 0; i < count; i++)
          ref[i] += tmp[i];
      }
      snprintf(args, sizeof args, "conv %s %s --kernel laplace --mode %s --cval 0.25", in, out,
               mname[m]);
      int rc = run(args);
      int64_t at = 0;
      double worst = worst_error(out, ref, count, &at);
      CHECK(rc == 0 && worst >= 0 && worst < 8 * 1e-5, "laplace --mode %s: exit %d, off by %g",
            mname[m], rc, worst);
    }
  }
  /* laplace on quadratics: 2 z^2 + y^2 + 3 x^2 (3-D) has 2 (2 + 1 + 3) = 12 in the interior
   * whatever the mode, x^2 - 2 y^2 (2-D) has 2 - 4 = -2; small integers, so exact. */
  {
    float q[210], q2[42];
    const int64_t s2[2] = {6, 7};
    for (int64_t i = 0; i < count; i++) {
      const int64_t z = i / 42, yy = i / 7 % 6, xx = i % 7;
      q[i] = (float)(2 * z * z + yy * yy + 3 * xx * xx);
    }
    for (int64_t i = 0; i < 42; i++)
      q2[i] = (float)((i % 7) * (i % 7) - 2 * (i / 7) * (i / 7));
    snprintf(path, sizeof path, "%s/q.npy", dir);
    CHECK(write_f32(path, 3, shape, q), "writing %s", path);
    snprintf(args, sizeof args, "conv %s %s --kernel laplace --mode nearest", path, out);
    float *v = run(args) == 0 ? read_f32(out, count, &y) : NULL;
    int bad = !v;
    for (int64_t z = 1; z < 4 && v; z++)
      for (int64_t yy = 1; yy < 5; yy++)
        for (int64_t xx = 1; xx < 6; xx++)
          bad += v[(z * 6 + yy) * 7 + xx] != 12.0f;
    CHECK(!bad, "laplace of 2z^2 + y^2 + 3x^2: %d interior values are not 12", bad);
    free(v);
    CHECK(write_f32(path, 2, s2, q2), "writing %s", path);
    snprintf(args, sizeof args, "correlate %s %s --kernel laplace --mode wrap", path, out);
    v = run(args) == 0 ? read_f32(out, 42, &y) : NULL;
    bad = !v;
    for (int64_t yy = 1; yy < 5 && v; yy++)
      for (int64_t xx = 1; xx < 6; xx++)
        bad += v[yy * 7 + xx] != -2.0f;
    CHECK(!bad, "2-D laplace of x^2 - 2y^2: %d interior values are not -2", bad);
    free(v);
  }

  /* sobel-x/y/z, as scipy.ndimage.sobel: correlate1d with [-1,0,1] along the axis, then
   * [1,2,1] along the others; `correlate` gives its negative. */
  {
    static const char *names[3] = {"sobel-z", "sobel-y", "sobel-x"};
    const double dw[3] = {-1, 0, 1}, sw[3] = {1, 2, 1};
    const ndf_mode near[3] = {NDF_MODE_NEAREST, NDF_MODE_NEAREST, NDF_MODE_NEAREST};
    for (int a = 0; a < 3; a++) {
      const double *ws[3] = {sw, sw, sw};
      const int64_t n3[3] = {3, 3, 3};
      ws[a] = dw;
      ref_sep(x, ref, ws, n3, near, NULL, 0, 0);
      for (int convolve = 0; convolve < 2; convolve++) {
        for (int64_t i = 0; i < count; i++)
          tmp[i] = convolve ? ref[i] : -ref[i];
        snprintf(args, sizeof args, "%s %s %s --kernel %s --mode nearest",
                 convolve ? "conv" : "correlate", in, out, names[a]);
        int rc = run(args);
        int64_t at = 0;
        double worst = worst_error(out, tmp, count, &at);
        CHECK(rc == 0 && worst >= 0 && worst < 16 * 1e-5, "%s %s: exit %d, off by %g at %lld",
              convolve ? "conv" : "correlate", names[a], rc, worst, (long long)at);
      }
    }
    /* A linear ramp 2x + 3y - z: [-1,0,1] gives twice the slope, each [1,2,1] 4 times the
     * value (the ramp is linear), so sobel-x = 2*2*16 = 64, sobel-y = 96, sobel-z = -32 in
     * the interior. */
    float ramp[210];
    for (int64_t i = 0; i < count; i++)
      ramp[i] = (float)(2 * (i % 7) + 3 * (i / 7 % 6) - i / 42);
    snprintf(path, sizeof path, "%s/ramp.npy", dir);
    CHECK(write_f32(path, 3, shape, ramp), "writing %s", path);
    const float expect[3] = {-32, 96, 64};
    for (int a = 0; a < 3; a++) {
      snprintf(args, sizeof args, "conv %s %s --kernel %s", path, out, names[a]);
      float *v = run(args) == 0 ? read_f32(out, count, &y) : NULL;
      int bad = !v;
      for (int64_t z = 1; z < 4 && v; z++)
        for (int64_t yy = 1; yy < 5; yy++)
          for (int64_t xx = 1; xx < 6; xx++)
            bad += v[(z * 6 + yy) * 7 + xx] != expect[a];
      CHECK(!bad, "%s of 2x + 3y - z: %d interior values are not %g", names[a], bad, expect[a]);
      free(v);
    }
  }

  /* quadrature: 12 outputs (float32 whatever the input), zero on a constant input (the even
   * kernels have no DC response, the odd ones are antisymmetric; reflect keeps it constant). */
  {
    const int64_t qs[3] = {10, 11, 12}, qn = 10 * 11 * 12;
    float *c = malloc((size_t)qn * sizeof *c);
    for (int64_t i = 0; i < qn; i++)
      c[i] = 3.0f;
    snprintf(path, sizeof path, "%s/const.npy", dir);
    CHECK(write_f32(path, 3, qs, c), "writing %s", path);
    unlink(out);
    snprintf(args, sizeof args, "conv %s %s --kernel quadrature", path, out);
    int rc = run(args), ok = 0;
    double worst = -1;
    if (rc == 0 && ndf_npy_read(out, &y, err, sizeof err) == NDF_OK) {
      ok = y.dtype == NDF_F32 && y.ndim == 4 && y.shape[0] == 12 && y.shape[1] == 10 &&
           y.shape[2] == 11 && y.shape[3] == 12;
      worst = 0;
      for (int64_t i = 0; ok && i < 12 * qn; i++)
        worst = fmax(worst, fabs(((float *)y.data)[i]));
      free(y.data);
    }
    /* |kernel| sums to at most sqrt(729) with unit L2 norm: float32 error 27 * 3 * eps */
    CHECK(ok && worst < 1e-4, "quadrature on a constant: exit %d, shape ok %d, max |out| %g", rc,
          ok, worst);
    free(c);

    /* The impulse response is the kernel: even symmetric with zero sum, odd antisymmetric,
     * both of unit L2 norm. */
    const int64_t is[3] = {11, 11, 11}, in_ = 11 * 11 * 11;
    float *imp = calloc((size_t)in_, sizeof *imp);
    imp[in_ / 2] = 1;
    snprintf(path, sizeof path, "%s/impulse.npy", dir);
    CHECK(write_f32(path, 3, is, imp), "writing %s", path);
    free(imp);
    snprintf(args, sizeof args, "conv %s %s --kernel quadrature --mode constant", path, out);
    float *v = run(args) == 0 ? read_f32(out, 12 * in_, &y) : NULL;
    for (int f = 0; f < 12 && v; f++) {
      const float *o = v + f * in_;
      double sum = 0, ss = 0, asym = 0;
      for (int64_t i = 0; i < in_; i++) {
        sum += o[i];
        ss += (double)o[i] * o[i];
        asym = fmax(asym, fabs(o[i] - (f % 2 ? -1 : 1) * o[in_ - 1 - i]));
      }
      CHECK(fabs(sum) < 1e-5 && fabs(ss - 1) < 1e-5 && asym < 1e-7,
            "quadrature kernel %d: sum %g, sum of squares %g, (anti)symmetry off by %g", f, sum, ss,
            asym);
    }
    CHECK(v != NULL, "quadrature impulse response");
    free(v);

    /* Directions, axes z, y, x: a plane wave cos(w0 u.r) along direction 3, (b,-a,0) in (x,y,z),
     * gives direction 3's pair a near-constant magnitude sqrt(even^2 + odd^2) away from the
     * borders, several times any other direction's. */
    const double s5 = sqrt(5.0), den = sqrt(10 + 2 * s5), ua = 2 / den, ub = (1 + s5) / den;
    const int64_t ws[3] = {20, 20, 20}, wn = 8000;
    float *wave = malloc((size_t)wn * sizeof *wave);
    for (int64_t i = 0; i < wn; i++)
      wave[i] = (float)cos(3.14159265358979 / 2.5 * (ub * (i % 20) - ua * (i / 20 % 20)) + 0.3);
    snprintf(path, sizeof path, "%s/wave.npy", dir);
    CHECK(write_f32(path, 3, ws, wave), "writing %s", path);
    free(wave);
    snprintf(args, sizeof args, "conv %s %s --kernel quadrature --mode reflect", path, out);
    v = run(args) == 0 ? read_f32(out, 12 * wn, &y) : NULL;
    double lo[6], hi[6];
    for (int d = 0; d < 6; d++)
      lo[d] = INFINITY, hi[d] = 0;
    for (int64_t i = 0; i < wn && v; i++) {
      const int64_t z = i / 400, yy = i / 20 % 20, xx = i % 20;
      if (z < 6 || z >= 14 || yy < 6 || yy >= 14 || xx < 6 || xx >= 14) continue;
      for (int d = 0; d < 6; d++) {
        const double e = v[2 * d * wn + i], o = v[(2 * d + 1) * wn + i], m = sqrt(e * e + o * o);
        lo[d] = fmin(lo[d], m), hi[d] = fmax(hi[d], m);
      }
    }
    int ok3 = v && hi[3] < 1.1 * lo[3];
    for (int d = 0; d < 6 && ok3; d++)
      ok3 = d == 3 || hi[d] * 4 < lo[3];
    CHECK(ok3, "quadrature directions: direction 3's magnitude in [%g, %g], others' up to %g %g",
          lo[3], hi[3], hi[0], hi[4]);
    free(v);
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || !mkdtemp(dir)) return 1;
  exe = argv[1];
  uint64_t r = t_seed();
  char args[1024], in[256], out[256], err[512];
  snprintf(in, sizeof in, "%s/in.npy", dir);
  snprintf(out, sizeof out, "%s/out.npy", dir);

  CHECK(run("--version") == 0 && file_has("stdout", ndf_version_string()), "--version");
  CHECK(run("--help") == 0 && file_has("stdout", "exit codes"), "--help");
  CHECK(run("info") == 0 && file_has("stdout", "cpu_direct") && file_has("stdout", "device:"),
        "info");
  CHECK(run("correlate1d --help") == 0 && file_has("stdout", "--weights"), "correlate1d --help");
  CHECK(run("demo --help") == 0 && file_has("stdout", "phantom"), "demo --help");
  CHECK(run("frobnicate") == 2 && file_has("stderr", "unknown command"), "unknown command");
  CHECK(run("--device nowhere info") == 2, "bad device");

  int64_t shape[3] = {5, 6, 7};
  t_arr x;
  t_arr_make(&x, &r, NDF_F32, 3, shape, 0, NULL);
  t_fill_random(&x, &r);
  CHECK(ndf_npy_write(in, &x.hview, err, sizeof err) == NDF_OK, "%s", err);
  const double w[4] = {0.25, -1, 2, 0.5};
  double ref[210];
  ndf_array y;
  ndf_ref_convolve1d(&x.hview, ref, w, 4, 1, NDF_MODE_WRAP, 0, -1);
  snprintf(args, sizeof args,
           "convolve1d %s %s --weights 0.25,-1,2,0.5 --axis -2 --mode wrap --origin -1", in, out);
  CHECK(run(args) == 0, "convolve1d run");
  if (ndf_npy_read(out, &y, err, sizeof err) == NDF_OK) {
    double worst = 0;
    for (int i = 0; i < 210; i++)
      worst = fmax(worst, fabs(((float *)y.data)[i] - ref[i]));
    CHECK(y.dtype == NDF_F32 && worst < 1e-5, "convolve1d output off by %g", worst);
    free(y.data);
  } else {
    CHECK(0, "output unreadable: %s", err);
  }
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1,2,1 --dtype f64", in, out);
  CHECK(run(args) == 0 && ndf_npy_read(out, &y, err, sizeof err) == NDF_OK && y.dtype == NDF_F64,
        "--dtype f64");
  free(y.data);

  /* The subcommands' option tables: every command's help, a missing value, an unknown option,
   * each kind of bad value, refusals, in any order with the paths; nothing is written. */
  {
    static const char *const bad[][2] = {
        {"correlate1d IN OUT --weights 1,2,1 --axis", "needs a value"},
        {"correlate1d IN OUT --weights 1,2,1 --frobnicate 3", "unknown option --frobnicate"},
        {"correlate1d IN OUT --weights 1,2,1 --axis x", "bad --axis 'x'"},
        {"correlate1d IN OUT --weights 1,2,1 --mode sideways", "unknown --mode 'sideways'"},
        {"correlate1d IN OUT --weights 1,2,1 --dtype f16", "unknown --dtype 'f16'"},
        {"correlate1d IN OUT --weights 1,2,1 --cval nan1", "bad --cval 'nan1'"},
        {"correlate1d IN OUT --weights 1,2,1 --shape 3,0", "bad --shape '3,0'"},
        {"sepconv IN OUT --weights 1,2,1 --axes 0,1,2,3,4", "has more than 4 values"},
        {"sepconv IN OUT --weights 1,2,1 --mode reflect,bogus", "bad --mode 'reflect,bogus'"},
        {"gauss IN OUT --sigma 2 --fwhm 3", "not both"},
        {"gauss IN OUT --sigma 2 --truncate 0", "expected a number > 0"},
        {"gauss IN OUT --sigma 2 --tolerance -1", "expected a number >= 0"},
        {"gauss IN OUT --sigma 2 --iir-order -2", "expected an integer >= 0"},
        {"gauss IN OUT --sigma 2 --order 1,-1", "integers >= 0"},
        {"gauss IN OUT --sigma 2mile", "with a unit"},
        {"conv IN OUT --kernel sobel --origin 1,x", "bad --origin '1,x'"},
        {"ks IN OUT --sigma-map M --cval 1", "ks has no --cval"},
        {"ks IN OUT --sigma-map M --index sideways", "bad --index 'sideways'"},
        {"ks IN OUT --sigma-map M --n-sigma 0", "expected a number > 0"},
        {"ks IN OUT --sigma-map M --sigma-map M --sigma-map M --sigma-map M --sigma-map M "
         "--sigma-map M",
         "more than 4 --sigma-map"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      char line[512];
      const char *t = bad[k][0];
      size_t o = 0;
      for (; *t && o + 200 < sizeof line; t++) { /* IN, OUT and M: the test's files */
        if (!strncmp(t, "IN", 2) || !strncmp(t, "OUT", 3) || (t[0] == 'M' && t[-1] == ' ')) {
          o += (size_t)snprintf(line + o, sizeof line - o, "%s",
                                t[0] == 'O' ? "/nonexistent/x.npy" : in);
          t += t[0] == 'O' ? 2 : t[0] == 'I' ? 1 : 0;
        } else {
          line[o++] = *t;
        }
      }
      line[o] = 0;
      CHECK(run(line) == 2 && file_has("stderr", bad[k][1]), "'%s': want exit 2 and '%s'",
            bad[k][0], bad[k][1]);
    }
    CHECK(run("conv --help") == 0 && run("ks --help") == 0 && run("convolve --help") == 0, "help");
    snprintf(args, sizeof args, "sepconv --convolve --weights 1,2,1 %s -v %s --axes 2", in, out);
    CHECK(run(args) == 0 && file_has("stderr", "filtered by"), "a flag, -v, paths between options");
  }

  /* gauss: against a float64 correlate1d chain with ndf_gaussian_kernel1d's
   * kernels; the CLI's default mode is nearest. */
  CHECK(run("gauss --help") == 0 && file_has("stdout", "--sigma") &&
            file_has("stdout", "example") && file_has("stdout", "nearest"),
        "gauss --help");
  CHECK(run("sepconv --help") == 0 && file_has("stdout", "--axes") && file_has("stdout", "example"),
        "sepconv --help");
  {
    /* gauss's options, and the same as ndf_gaussian_opts for the reference */
    const ndf_mode N = NDF_MODE_NEAREST, C = NDF_MODE_CONSTANT;
    const struct {
      const char *opts;
      ndf_gaussian_opts o;
    } g[] = {
        {"--sigma 1.5", {.sigma = {1.5, 1.5, 1.5}, .mode = {N, N, N}}},
        /* per-axis lists; sigma 0 skips axis 0; axis 2's kernel (17) outgrows the axis (7) */
        {"--sigma 0,1,2.5 --order 2,1,0 --mode wrap,mirror,reflect --truncate 3.3",
         {.sigma = {0, 1, 2.5},
          .order = {2, 1, 0},
          .truncate = 3.3,
          .mode = {NDF_MODE_WRAP, NDF_MODE_MIRROR, NDF_MODE_REFLECT}}},
        {"--sigma 2,0.8,3 --radius 1,2,3 --order 0,0,1 --mode constant --cval 0.5",
         {.sigma = {2, 0.8, 3},
          .order = {0, 0, 1},
          .radius = {1, 2, 3},
          .mode = {C, C, C},
          .cval = 0.5}},
    };
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
      ref_gauss(&x.hview, ref, &g[k].o);
      unlink(out);
      snprintf(args, sizeof args, "gauss %s %s %s", in, out, g[k].opts);
      int rc = run(args);
      int64_t at = 0;
      double worst = worst_error(out, ref, 210, &at);
      CHECK(rc == 0 && worst >= 0 && worst < 1e-5, "gauss %s: exit %d, off by %g at %lld",
            g[k].opts, rc, worst, (long long)at);
    }
    /* The CLI passes its options through unchanged: the library called directly. */
    ndf_context *ctx;
    ndf_context_opts co = {.struct_size = sizeof co, .device = "cpu"};
    ndf_gaussian_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.sigma[0] = 0.7, o.sigma[1] = 1.2, o.sigma[2] = 1.2, o.order[1] = 1;
    o.mode[0] = NDF_MODE_REFLECT, o.mode[1] = o.mode[2] = NDF_MODE_NEAREST;
    float lib[210];
    ndf_array ya = ndf_array_contiguous(NDF_F32, 3, shape, lib);
    CHECK(ndf_context_create(&ctx, &co) == NDF_OK && ndf_gaussian(ctx, &x.hview, &ya, &o) == NDF_OK,
          "ndf_gaussian");
    ndf_context_destroy(ctx);
    snprintf(args, sizeof args,
             "gauss %s %s --sigma 0.7,1.2,1.2 --order 0,1,0 --mode reflect,nearest,nearest "
             "--method fir",
             in, out);
    int same = run(args) == 0 && ndf_npy_read(out, &y, err, sizeof err) == NDF_OK;
    if (same) {
      same = y.dtype == NDF_F32 && !memcmp(y.data, lib, sizeof lib);
      free(y.data);
    }
    CHECK(same, "gauss differs from ndf_gaussian called directly");
    snprintf(args, sizeof args, "gauss %s %s --sigma 1 --dtype f64", in, out);
    CHECK(run(args) == 0 && ndf_npy_read(out, &y, err, sizeof err) == NDF_OK && y.dtype == NDF_F64,
          "gauss --dtype f64");
    free(y.data);
  }
  /* gauss --method iir (the CLI's default mode, nearest, is the one it supports): close to the
   * FIR filter, truncated at 8 sigma (iir_deriche is within 1e-3 of the true Gaussian);
   * --iir-order reaches the library (iir_vyv of order 5 is closer than order 3). */
  {
    char fir[300], iir[300];
    const int64_t s2[2] = {30, 40}, n2 = 1200;
    float *img = malloc((size_t)n2 * sizeof *img);
    for (int64_t i = 0; i < n2; i++)
      img[i] = (float)ndf_rand_uniform(&r);
    snprintf(fir, sizeof fir, "%s/fir.npy", dir);
    snprintf(iir, sizeof iir, "%s/img.npy", dir);
    CHECK(write_f32(iir, 2, s2, img), "writing %s", iir);
    free(img);
    snprintf(args, sizeof args, "gauss %s %s --sigma 3 --method fir --truncate 8", iir, fir);
    CHECK(run(args) == 0, "gauss --method fir --truncate 8");
    CHECK(run("gauss --help") == 0 && file_has("stdout", "--iir-order") &&
              file_has("stdout", "iir_deriche") && file_has("stdout", "--method iir"),
          "gauss --help on the recursive methods");
    static const char *const iir_opts[] = {"--method iir", "--method iir_deriche",
                                           "--method iir_vyv --iir-order 3",
                                           "--method iir_vyv --iir-order 5"};
    double e[4];
    for (int k = 0; k < 4; k++) {
      unlink(out);
      snprintf(args, sizeof args, "gauss %s %s --sigma 3 %s", iir, out, iir_opts[k]);
      int rc = run(args);
      e[k] = rc == 0 ? rel_l2_files(out, fir, n2) : -1;
      CHECK(e[k] >= 0 && e[k] < (k < 2 ? 2e-3 : 6e-2), "gauss %s: exit %d, rel L2 to fir %g",
            iir_opts[k], rc, e[k]);
    }
    CHECK(e[3] < e[2] / 3, "gauss --method iir_vyv: --iir-order 5 off by %g, order 3 by %g", e[3],
          e[2]);
    /* Unsupported: a nonzero exit, the reason on stderr, no output. */
    struct stat sb;
    unlink(out);
    snprintf(args, sizeof args, "gauss %s %s --sigma 3 --method iir --mode reflect", iir, out);
    int rc = run(args);
    CHECK(rc > 0 && file_has("stderr", "nearest") && stat(out, &sb) != 0,
          "gauss --method iir --mode reflect: exit %d (expected nonzero), output %s", rc,
          stat(out, &sb) ? "absent" : "written");
  }

  /* ks: against src/ref's definition (same and full, per-axis maps), mass kept by --normalize
   * --output full, and a bad map refused with exit 2 and no output. */
  {
    char img[300], sm[2][300], full[300], kargs[1400];
    const int64_t s2[2] = {9, 13}, n2 = 117;
    float v[117], sg[2][117];
    for (int64_t i = 0; i < n2; i++) {
      v[i] = (float)ndf_rand_uniform(&r);
      for (int m = 0; m < 2; m++)
        sg[m][i] = (float)(0.5 * (ndf_rand_uniform(&r) + 1) * 1.7);
    }
    snprintf(img, sizeof img, "%s/ks_in.npy", dir);
    snprintf(full, sizeof full, "%s/ks_full.npy", dir);
    CHECK(write_f32(img, 2, s2, v), "writing %s", img);
    for (int m = 0; m < 2; m++) {
      snprintf(sm[m], sizeof sm[m], "%s/ks_s%d.npy", dir, m);
      CHECK(write_f32(sm[m], 2, s2, sg[m]), "writing %s", sm[m]);
    }
    CHECK(run("ks --help") == 0 && file_has("stdout", "--sigma-map") &&
              file_has("stdout", "--normalize") && file_has("stdout", "examples"),
          "ks --help");
    ndf_array xv = ndf_array_contiguous(NDF_F32, 2, s2, v);
    ndf_array maps[2] = {ndf_array_contiguous(NDF_F32, 2, s2, sg[0]),
                         ndf_array_contiguous(NDF_F32, 2, s2, sg[1])};
    double kref[117];
    ndf_ref_ks(&xv, maps, 2, 1, 3, 0, 0, kref);
    unlink(out);
    snprintf(kargs, sizeof kargs, "ks %s %s --sigma-map %s --sigma-map %s --index output", img, out,
             sm[0], sm[1]);
    int64_t at = 0;
    int rc = run(kargs);
    double e = rc == 0 ? worst_error(out, kref, n2, &at) : -1;
    CHECK(e >= 0 && e < 1e-6, "ks --index output: exit %d, worst error %g at %lld", rc, e,
          (long long)at);
    snprintf(kargs, sizeof kargs, "ks %s %s --sigma-map %s --output full --normalize", img, full,
             sm[0]);
    rc = run(kargs);
    ndf_array yf;
    char ferr[512];
    double sum = 0, sin = 0, sabs = 0;
    const int64_t R = ndf_ref_ks_margin(&xv, maps, 1, 3);
    if (rc == 0 && ndf_npy_read(full, &yf, ferr, sizeof ferr) == NDF_OK) {
      CHECK(yf.ndim == 2 && yf.shape[0] == 9 + 2 * R && yf.shape[1] == 13 + 2 * R,
            "ks --output full: shape (%lld, %lld), R %lld", (long long)yf.shape[0],
            (long long)yf.shape[1], (long long)R);
      for (int64_t i = 0; i < ndf_array_size(&yf); i++)
        sum += ((float *)yf.data)[i];
      free(yf.data);
    }
    for (int64_t i = 0; i < n2; i++)
      sin += v[i], sabs += fabs(v[i]);
    CHECK(rc == 0 && fabs(sum - sin) < 1e-5 * sabs,
          "ks --output full --normalize: exit %d, mass %g in, %g out", rc, sin, sum);
    sg[1][5] = -1;
    CHECK(write_f32(sm[1], 2, s2, sg[1]), "writing %s", sm[1]);
    unlink(out);
    snprintf(kargs, sizeof kargs, "ks %s %s --sigma-map %s", img, out, sm[1]);
    struct stat sb;
    rc = run(kargs);
    CHECK(rc == 2 && file_has("stderr", ">= 0") && stat(out, &sb) != 0,
          "ks with a negative sigma: exit %d (expected 2), output %s", rc,
          stat(out, &sb) ? "absent" : "written");
  }

  /* sepconv: the same weights along the listed axes, in increasing axis order. */
  {
    const double w3[3] = {1, 2, 1};
    const double *ws[3] = {w3, NULL, w3};
    const int64_t n[3] = {3, 0, 3};
    const ndf_mode nearest[3] = {NDF_MODE_NEAREST, NDF_MODE_NEAREST, NDF_MODE_NEAREST};
    ref_sep(&x.hview, ref, ws, n, nearest, NULL, 0, 0);
    unlink(out);
    snprintf(args, sizeof args, "sepconv %s %s --weights 1,2,1 --axes 0,-1", in, out);
    int rc = run(args);
    int64_t at = 0;
    double worst = worst_error(out, ref, 210, &at);
    CHECK(rc == 0 && worst >= 0 && worst < 16 * 1e-5, "sepconv: exit %d, off by %g at %lld", rc,
          worst, (long long)at);

    const double w4[4] = {0.25, -1, 2, 0.5};
    const double *wc[3] = {w4, NULL, w4};
    const int64_t nc[3] = {4, 0, 4};
    const ndf_mode modes[3] = {NDF_MODE_REFLECT, NDF_MODE_NEAREST, NDF_MODE_WRAP};
    const int origin[3] = {1, 0, -1};
    ref_sep(&x.hview, ref, wc, nc, modes, origin, 0, 1);
    unlink(out);
    snprintf(args, sizeof args,
             "sepconv %s %s --weights 0.25,-1,2,0.5 --axes 2,0 --convolve --mode wrap,reflect "
             "--origin -1,1",
             in, out);
    rc = run(args);
    worst = worst_error(out, ref, 210, &at);
    CHECK(rc == 0 && worst >= 0 && worst < 3.75 * 3.75 * 1e-5,
          "sepconv --convolve: exit %d, off by %g at %lld", rc, worst, (long long)at);
  }

  check_conv(&x.hview, in, out);

  /* Failures: the right code, a message naming the problem, no output written. */
  unlink(out);
  struct stat sb;
  snprintf(args, sizeof args, "correlate1d %s/missing.npy %s --weights 1", dir, out);
  CHECK(run(args) == 3 && file_has("stderr", "missing.npy") && stat(out, &sb) != 0,
        "missing input");
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1,x", in, out);
  CHECK(run(args) == 2 && stat(out, &sb) != 0, "bad weights");
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1,2,3 --origin 5", in, out);
  CHECK(run(args) == 2 && file_has("stderr", "origin") && stat(out, &sb) != 0, "bad origin");
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1 --axis 3", in, out);
  CHECK(run(args) == 2 && file_has("stderr", "axis"), "bad axis");
  /* gauss and sepconv: bad lists are usage errors that write nothing. */
  static const char *const bad[][2] = {
      {"gauss %s %s --sigma x", "--sigma"},
      {"gauss %s %s --sigma -1", "--sigma"},
      {"gauss %s %s --sigma 1,2", "--sigma"}, /* the input has 3 axes */
      {"gauss %s %s --sigma 1,2,3,4,5", "--sigma"},
      {"gauss %s %s --sigma 1 --order 1,2", "--order"},
      {"gauss %s %s --sigma 1 --truncate 0", "--truncate"},
      {"gauss %s %s --order 1", "--sigma"},
      {"gauss %s %s --sigma 2 --method iir --iir-order x", "--iir-order"},
      {"gauss %s %s --sigma 2 --method iir --iir-order -1", "--iir-order"},
      {"gauss %s %s --sigma 2 --method iir_vyv --iir-order 2", "iir_vyv"}, /* the library's */
      {"gauss %s %s --sigma 2 --method fir --iir-order 3", "iir_order"},
      {"sepconv %s %s --weights 1,2,1 --axes 0,-3", "--axes"}, /* axis 0 twice */
      {"sepconv %s %s --weights 1,2,1 --axes 3", "--axes"},
      {"sepconv %s %s --weights 1,2,1 --axes 0,1 --mode wrap,wrap,wrap", "--mode"},
      {"sepconv %s %s --weights 1,2,1 --origin 2", "origin"},
      {"conv %s %s --kernel lapalce", "laplace, sobel-x"}, /* lists the names */
      {"conv %s %s --mode reflect", "--kernel"},
      {"correlate %s %s --kernel laplace --origin 2", "origin"},
      {"conv %s %s --kernel laplace --mode wrap,wrap", "--mode"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    unlink(out);
    snprintf(args, sizeof args, bad[k][0], in, out);
    int rc = run(args);
    CHECK(rc == 2 && file_has("stderr", bad[k][1]) && stat(out, &sb) != 0,
          "'%s': exit %d (expected 2), output %s", bad[k][0], rc,
          stat(out, &sb) ? "absent" : "written");
  }
  /* Kernels: wrong ndim, not finite (usage errors), a missing file (an I/O error). */
  {
    char kpath[300];
    const int64_t k2[2] = {3, 3}, k3[3] = {1, 1, 2};
    double kw[9] = {0};
    snprintf(kpath, sizeof kpath, "%s/k2d.npy", dir);
    ndf_array ka = ndf_array_contiguous(NDF_F64, 2, k2, kw);
    CHECK(ndf_npy_write(kpath, &ka, err, sizeof err) == NDF_OK, "%s", err);
    unlink(out);
    snprintf(args, sizeof args, "conv %s %s --kernel %s", in, out, kpath);
    CHECK(run(args) == 2 && file_has("stderr", "k2d.npy") && file_has("stderr", "axes") &&
              stat(out, &sb) != 0,
          "a 2-D kernel for a 3-D input");
    kw[1] = NAN;
    ka = ndf_array_contiguous(NDF_F64, 3, k3, kw);
    snprintf(kpath, sizeof kpath, "%s/knan.npy", dir);
    CHECK(ndf_npy_write(kpath, &ka, err, sizeof err) == NDF_OK, "%s", err);
    snprintf(args, sizeof args, "correlate %s %s --kernel %s", in, out, kpath);
    CHECK(run(args) == 2 && file_has("stderr", "finite") && stat(out, &sb) != 0,
          "a non-finite kernel");
    kw[1] = 0;
    ka = ndf_array_contiguous(NDF_F64, 2, k2, kw); /* now an input */
    snprintf(kpath, sizeof kpath, "%s/in2d.npy", dir);
    CHECK(ndf_npy_write(kpath, &ka, err, sizeof err) == NDF_OK, "%s", err);
    snprintf(args, sizeof args, "conv %s %s --kernel quadrature", kpath, out);
    CHECK(run(args) == 2 && file_has("stderr", "3-D") && stat(out, &sb) != 0,
          "quadrature on a 2-D input");
    snprintf(args, sizeof args, "conv %s %s --kernel %s/nokernel.npy", in, out, dir);
    CHECK(run(args) == 3 && file_has("stderr", "nokernel.npy") && stat(out, &sb) != 0,
          "a missing kernel file");
  }
  snprintf(args, sizeof args, "correlate1d %s %s/nodir/out.npy --weights 1", in, dir);
  CHECK(run(args) == 3, "unwritable output");
  /* an existing output survives a failed run */
  FILE *f = fopen(out, "w");
  fputs("keep", f);
  fclose(f);
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1 --mode sideways", in, out);
  CHECK(run(args) == 2 && stat(out, &sb) == 0 && sb.st_size == 4, "existing output clobbered");
  snprintf(args, sizeof args, "conv %s %s --kernel sobel-q", in, out);
  CHECK(run(args) == 2 && stat(out, &sb) == 0 && sb.st_size == 4,
        "existing output clobbered by conv");

  t_arr_free(&x, NULL);
  printf("cli checks: %d failures\n", t_failures);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  return t_failures ? 1 : 0;
}
