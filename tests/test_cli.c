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
    ndf_context_opts co = {sizeof co, "cpu", 0};
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

  /* sepconv: the same weights along the listed axes, in increasing axis order. */
  {
    const double w3[3] = {1, 2, 1};
    const double *w[3] = {w3, NULL, w3};
    const int64_t n[3] = {3, 0, 3};
    const ndf_mode nearest[3] = {NDF_MODE_NEAREST, NDF_MODE_NEAREST, NDF_MODE_NEAREST};
    ref_sep(&x.hview, ref, w, n, nearest, NULL, 0, 0);
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
      {"sepconv %s %s --weights 1,2,1 --axes 0,-3", "--axes"}, /* axis 0 twice */
      {"sepconv %s %s --weights 1,2,1 --axes 3", "--axes"},
      {"sepconv %s %s --weights 1,2,1 --axes 0,1 --mode wrap,wrap,wrap", "--mode"},
      {"sepconv %s %s --weights 1,2,1 --origin 2", "origin"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    unlink(out);
    snprintf(args, sizeof args, bad[k][0], in, out);
    int rc = run(args);
    CHECK(rc == 2 && file_has("stderr", bad[k][1]) && stat(out, &sb) != 0,
          "'%s': exit %d (expected 2), output %s", bad[k][0], rc,
          stat(out, &sb) ? "absent" : "written");
  }
  snprintf(args, sizeof args, "correlate1d %s %s/nodir/out.npy --weights 1", in, dir);
  CHECK(run(args) == 3, "unwritable output");
  /* an existing output survives a failed run */
  FILE *f = fopen(out, "w");
  fputs("keep", f);
  fclose(f);
  snprintf(args, sizeof args, "correlate1d %s %s --weights 1 --mode sideways", in, out);
  CHECK(run(args) == 2 && stat(out, &sb) == 0 && sb.st_size == 4, "existing output clobbered");

  t_arr_free(&x, NULL);
  printf("cli checks: %d failures\n", t_failures);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  return t_failures ? 1 : 0;
}
