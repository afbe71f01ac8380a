/* SPDX-License-Identifier: BSD-3-Clause */
/* demo.c - `ndfilt demo`: Gaussian, Laplacian and quadrature filters on a noisy 3-D Shepp-Logan
 * phantom, timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "io/image.h"
#include "kernels.h"
#include "phantom.h"

/* The quadrature bank (12 kernels of 9^3) runs on a central crop of at most this many voxels
 * per axis: on the whole 256^3 phantom it takes seconds per run on a few CPU cores. */
#define BANK_CROP 96
#define STR_(x) #x
#define STR(x) STR_(x)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median seconds of `reps` runs of a plan (after one warm-up run). */
static ndf_status time_plan(ndf_context *ctx, ndf_plan *p, const ndf_array *in, ndf_array *out,
                            int reps, double *sec) {
  double t[16];
  for (int r = -1; r < reps; r++) {
    double t0 = now();
    ndf_status st = ndf_execute(p, in, out);
    if (st == NDF_OK) st = ndf_context_synchronize(ctx);
    if (st != NDF_OK) return st;
    if (r >= 0) t[r] = now() - t0;
  }
  qsort(t, (size_t)reps, sizeof t[0], cmp_double);
  *sec = t[reps / 2];
  return NDF_OK;
}

/* Correlation options: mode nearest on every axis, the rest defaults. */
static ndf_correlate_opts nearest(void) {
  ndf_correlate_opts o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  for (int d = 0; d < NDF_MAX_DIMS; d++)
    o.mode[d] = NDF_MODE_NEAREST;
  return o;
}

/* The median seconds of `reps` runs of the convolution of a with kernel k into b (mode
 * nearest), and the solver's name (a static string). */
static ndf_status time_convolve(ndf_context *ctx, const ndf_array *a, ndf_array *b,
                                const ndf_cli_kernel *k, int reps, double *sec,
                                const char **solver) {
  const ndf_correlate_opts o = nearest();
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_convolve(&p, ctx, a, b, k->w, k->shape, &o);
  if (st == NDF_OK) st = time_plan(ctx, p, a, b, reps, sec);
  if (st == NDF_OK) *solver = ndf_plan_solver(p);
  ndf_plan_destroy(p);
  return st;
}

typedef struct {
  const char *op, *solver, *note; /* static strings */
  char device[64];                /* copied: the context may be gone when printed */
  double sec, mvox;
  int pipeline; /* several passes and host work: no single GB/s figure */
} row;

static row make_row(const char *op, const char *solver, ndf_context *ctx, const char *note,
                    double sec, double mvox) {
  row r = {op, solver, note, "", sec, mvox, 0};
  snprintf(r.device, sizeof r.device, "%s", ndf_context_device_name(ctx));
  return r;
}

static void print_table(const row *r, int n) {
  printf("\n%-26s %-12s %-30s %10s %10s %9s  %s\n", "operation", "solver", "device", "time ms",
         "Mvox/s", "GB/s", "note");
  for (int i = 0; i < n; i++) {
    char gbs[32] = "-", mvs[32];
    const double mv = r[i].mvox / r[i].sec; /* a 9^3 bank on a CPU makes < 1 */
    if (!r[i].pipeline) snprintf(gbs, sizeof gbs, "%.1f", 8e-3 * mv);
    if (mv >= 10)
      snprintf(mvs, sizeof mvs, "%.0f", mv);
    else
      snprintf(mvs, sizeof mvs, "%.2g", mv);
    printf("%-26s %-12s %-30s %10.2f %10s %9s  %s\n", r[i].op, r[i].solver, r[i].device,
           1e3 * r[i].sec, mvs, gbs, r[i].note);
  }
  printf("(GB/s counts one float32 read and one write per voxel)\n");
}

/* The demo's volumes on the host, n^3 floats each, and c^3 for the bank's. */
typedef struct {
  const float *vol;  /* the noisy phantom */
  float *smooth;     /* Gaussian, sigma 2 */
  float *gradmag;    /* Gaussian gradient magnitude, sigma 1.5 */
  float *comp;       /* scratch: one derivative */
  float *laplace;    /* Laplacian (scipy.ndimage.laplace, mode nearest) */
  const float *crop; /* the phantom's central c^3 */
  float *quadmag;    /* quadrature direction 0: sqrt(even^2 + odd^2) of the crop */
  int64_t n, c;
} volumes;

/* The central z-slices of the phantom and of each result side by side, as an 8-bit gray
 * image of shape (n, 5 n + 8) (2-voxel gaps): phantom | smoothed | gradient magnitude |
 * Laplacian | quadrature magnitude (the crop, centred). Each panel is scaled to its own range.
 * Returns NULL if out of memory. */
static uint8_t *montage(const volumes *v, int64_t *h, int64_t *w) {
  const int64_t n = v->n, c = v->c, gap = 2;
  *h = n;
  *w = 5 * n + 4 * gap;
  uint8_t *m = calloc((size_t)(*h * *w), 1);
  if (!m) return NULL;
  const float *panel[5] = {v->vol + (n / 2) * n * n, v->smooth + (n / 2) * n * n,
                           v->gradmag + (n / 2) * n * n, v->laplace + (n / 2) * n * n,
                           v->quadmag + (c / 2) * c * c};
  for (int k = 0; k < 5; k++) {
    const int64_t e = k == 4 ? c : n, o = (n - e) / 2; /* the panel's extent and offset */
    float lo = panel[k][0], hi = panel[k][0];
    for (int64_t i = 0; i < e * e; i++) {
      lo = panel[k][i] < lo ? panel[k][i] : lo;
      hi = panel[k][i] > hi ? panel[k][i] : hi;
    }
    const float scale = hi > lo ? 255.f / (hi - lo) : 0.f;
    for (int64_t y = 0; y < e; y++)
      for (int64_t x = 0; x < e; x++)
        m[(y + o) * *w + k * (n + gap) + x + o] =
            (uint8_t)lrintf((panel[k][y * e + x] - lo) * scale);
  }
  return m;
}

/* g = c^2 (first) or g += c^2; the last call also takes the square root. */
static void add_square(float *g, const float *c, int64_t count, int first, int last, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < count; i++) {
    float s = (first ? 0.f : g[i]) + c[i] * c[i];
    g[i] = last ? sqrtf(s) : s;
  }
}

/* Median seconds of `reps` executions of the quadrature bank's plan (after one warm-up run);
 * *solver gets its solver. */
static ndf_status time_bank(ndf_context *ctx, const ndf_array *in, ndf_array *outs,
                            const ndf_cli_kernel *k, const ndf_correlate_opts *o, int reps,
                            double *sec, const char **solver) {
  double t[16];
  ndf_plan *p = NULL;
  ndf_status st = ndf_plan_convolve_bank(&p, ctx, in, k->nf, outs, k->w, k->shape, o);
  if (st == NDF_OK) *solver = ndf_plan_solver(p);
  for (int r = -1; r < reps && st == NDF_OK; r++) {
    double t0 = now();
    st = ndf_execute_bank(p, in, k->nf, outs);
    if (st == NDF_OK) st = ndf_context_synchronize(ctx);
    if (r >= 0) t[r] = now() - t0;
  }
  ndf_plan_destroy(p);
  if (st != NDF_OK) return st;
  qsort(t, (size_t)reps, sizeof t[0], cmp_double);
  *sec = t[reps / 2];
  return NDF_OK;
}

/* The Laplacian (a dense 3^3 kernel through the N-D convolve planner) of the phantom `a` into
 * `b` and v->laplace, and the quadrature bank on the central crop, direction 0's magnitude into
 * v->quadmag; appends their rows. */
static ndf_status run_kernels(ndf_context *ctx, const volumes *v, const ndf_array *a, ndf_array *b,
                              int reps, row *rows, int *nrows) {
  const int64_t n = v->n, c = v->c, shape[3] = {n, n, n}, cshape[3] = {c, c, c};
  const int64_t bshape[4] = {2 * NDF_QUAD_DIRS, c, c, c}, ccount = c * c * c;
  const int cuda = ndf_context_place(ctx).kind == NDF_PLACE_CUDA, T = ndf_context_threads(ctx);
  char err[256];
  ndf_cli_kernel lap, quad;
  ndf_status st = ndf_cli_kernel_named("laplace", 3, &lap, err, sizeof err);
  if (st == NDF_OK) st = ndf_cli_kernel_named("quadrature", 3, &quad, err, sizeof err);
  if (st != NDF_OK) {
    fprintf(stderr, "ndfilt demo: %s\n", err);
    ndf_cli_kernel_free(&lap);
    return st;
  }
  const char *solver;
  double sec;
  st = time_convolve(ctx, a, b, &lap, reps, &sec, &solver);
  if (st == NDF_OK)
    rows[(*nrows)++] = make_row("laplacian, 3^3 kernel", solver, ctx, cuda ? "device arrays" : "",
                                sec, (double)(n * n * n) / 1e6);
  ndf_array host_lap = ndf_array_contiguous(NDF_F32, 3, shape, v->laplace);
  if (st == NDF_OK) st = ndf_array_copy(ctx, &host_lap, b);

  /* The bank: the crop and its 12 outputs on the context's device. */
  ndf_array in, out, outs[2 * NDF_QUAD_DIRS];
  ndf_array host_crop = ndf_array_contiguous(NDF_F32, 3, cshape, (void *)v->crop);
  ndf_array host_mag = ndf_array_contiguous(NDF_F32, 3, cshape, v->quadmag);
  ndf_array host_comp = ndf_array_contiguous(NDF_F32, 3, cshape, v->comp);
  in.data = out.data = NULL;
  if (st == NDF_OK) st = ndf_array_alloc(ctx, &in, NDF_F32, 3, cshape);
  if (st == NDF_OK) st = ndf_array_alloc(ctx, &out, NDF_F32, 4, bshape);
  if (st == NDF_OK) st = ndf_array_copy(ctx, &in, &host_crop);
  for (int f = 0; f < quad.nf && st == NDF_OK; f++) {
    outs[f] = ndf_array_contiguous(NDF_F32, 3, cshape, (float *)out.data + f * ccount);
    outs[f].place = out.place;
  }
  const ndf_correlate_opts o = nearest();
  if (st == NDF_OK) st = time_bank(ctx, &in, outs, &quad, &o, reps, &sec, &solver);
  if (st == NDF_OK) {
    static const char *notes[2][2] = {
        {"central " STR(BANK_CROP) "^3 crop; one bank plan",
         "device arrays, central " STR(BANK_CROP) "^3 crop; one bank plan"},
        {"one bank plan", "device arrays; one bank plan"}};
    rows[*nrows] = make_row("quadrature bank, 12 x 9^3", solver, ctx, notes[c == n][cuda], sec,
                            (double)ccount / 1e6);
    rows[(*nrows)++].pipeline = 1;
    st = ndf_array_copy(ctx, &host_mag, &outs[0]);
  }
  if (st == NDF_OK) st = ndf_array_copy(ctx, &host_comp, &outs[1]);
  if (st == NDF_OK) {
    add_square(v->quadmag, v->quadmag, ccount, 1, 0, T);
    add_square(v->quadmag, v->comp, ccount, 0, 1, T);
  }
  ndf_array_free(ctx, &in);
  ndf_array_free(ctx, &out);
  ndf_cli_kernel_free(&lap);
  ndf_cli_kernel_free(&quad);
  return st;
}

/* Runs the demo's filters on one context and appends their rows: the
 * Gaussian (sigma 2) into v->smooth, the gradient magnitude (sigma 1.5:
 * one Gaussian derivative per axis, combined on the host) into v->gradmag,
 * and run_kernels' Laplacian and quadrature bank. */
static int run_device(ndf_context *ctx, const volumes *v, row *rows, int *nrows) {
  static const char *deriv[3] = {"gaussian d/dz, sigma 1.5", "gaussian d/dy, sigma 1.5",
                                 "gaussian d/dx, sigma 1.5"};
  const int64_t n = v->n, count = n * n * n, shape[3] = {n, n, n};
  const double mvox = (double)count / 1e6;
  const int cuda = ndf_context_place(ctx).kind == NDF_PLACE_CUDA, T = ndf_context_threads(ctx);
  const char *where = cuda ? "device arrays" : "";
  ndf_array host_in = ndf_array_contiguous(NDF_F32, 3, shape, (void *)v->vol);
  ndf_array host_smooth = ndf_array_contiguous(NDF_F32, 3, shape, v->smooth);
  ndf_array host_comp = ndf_array_contiguous(NDF_F32, 3, shape, v->comp);
  ndf_array a, b; /* on the context's device: the phantom, and each filter's output */
  ndf_gaussian_opts o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  for (int d = 0; d < 3; d++) {
    o.sigma[d] = 2.0;
    o.mode[d] = NDF_MODE_NEAREST;
  }
  int reps = cuda ? 9 : 3;
  ndf_plan *p = NULL;
  double sec;
  a.data = b.data = NULL;
  /* Fault the host outputs' pages in now, not in the timed combine. */
  memset(v->gradmag, 0, (size_t)count * sizeof(float));
  memset(v->comp, 0, (size_t)count * sizeof(float));
  ndf_status st = ndf_array_alloc(ctx, &a, NDF_F32, 3, shape);
  if (st == NDF_OK) st = ndf_array_alloc(ctx, &b, NDF_F32, 3, shape);
  if (st == NDF_OK) st = ndf_array_copy(ctx, &a, &host_in);

  /* Smoothing. Timing repeats the filter; every run leaves b = filter(a). */
  if (st == NDF_OK) st = ndf_plan_gaussian(&p, ctx, &a, &b, &o);
  if (st == NDF_OK) st = time_plan(ctx, p, &a, &b, reps, &sec);
  if (st == NDF_OK)
    rows[(*nrows)++] = make_row("gaussian, sigma 2", ndf_plan_solver(p), ctx, where, sec, mvox);
  ndf_plan_destroy(p);
  p = NULL;
  if (st == NDF_OK) st = ndf_array_copy(ctx, &host_smooth, &b);
  if (st == NDF_OK && cuda) {
    /* The same filter from host arrays: transfers included. */
    st = ndf_plan_gaussian(&p, ctx, &host_in, &host_smooth, &o);
    if (st == NDF_OK) st = time_plan(ctx, p, &host_in, &host_smooth, 3, &sec);
    if (st == NDF_OK)
      rows[(*nrows)++] = make_row("gaussian, sigma 2", ndf_plan_solver(p), ctx,
                                  "host arrays, transfers included", sec, mvox);
    ndf_plan_destroy(p);
    p = NULL;
  }

  /* Large-sigma smoothing (a deformation field's regulariser, say): the recursive filter costs
   * the same at any sigma, the FIR one grows with it. */
  for (int k = 0; k < 2 && st == NDF_OK; k++) {
    for (int d = 0; d < 3; d++)
      o.sigma[d] = 16.0;
    o.method = k == 0 ? "iir" : "fir";
    st = ndf_plan_gaussian(&p, ctx, &a, &b, &o);
    if (st == NDF_OK) st = time_plan(ctx, p, &a, &b, reps, &sec);
    if (st == NDF_OK)
      rows[(*nrows)++] = make_row(
          k == 0 ? "gaussian, sigma 16, iir" : "gaussian, sigma 16, fir", ndf_plan_solver(p), ctx,
          k == 0 ? "recursive (Deriche): cost independent of sigma" : "129 taps per axis", sec,
          mvox);
    ndf_plan_destroy(p);
    p = NULL;
  }
  o.method = NULL;

  /* Kernel superposition on the central slice, sigma growing with depth (the row) from 0.3 to
   * 3 voxels, like a proton beam's lateral spread: each voxel spread by its own Gaussian
   * (Eq. 2a), normalised so that no dose is lost but what leaves the slice. */
  float *smap = st == NDF_OK ? malloc((size_t)(n * n) * sizeof *smap) : NULL;
  if (st == NDF_OK && !smap) st = NDF_ENOMEM;
  if (st == NDF_OK) {
    for (int64_t y = 0; y < n; y++)
      for (int64_t x = 0; x < n; x++)
        smap[y * n + x] = (float)(0.3 + 2.7 * (double)y / (double)(n > 1 ? n - 1 : 1));
    const int64_t s2[2] = {n, n};
    ndf_array sa = a, sb = b, sm = ndf_array_contiguous(NDF_F32, 2, s2, smap);
    sa.ndim = sb.ndim = 2;
    for (int d = 0; d < 2; d++) {
      sa.shape[d] = sb.shape[d] = n;
      sa.strides[d] = sb.strides[d] = d ? 1 : n;
    }
    sa.shape[2] = sb.shape[2] = sa.strides[2] = sb.strides[2] = 0;
    sa.data = (float *)a.data + n / 2 * n * n;
    ndf_ks_opts ko;
    memset(&ko, 0, sizeof ko);
    ko.struct_size = sizeof ko;
    ko.normalize = 1;
    st = ndf_plan_ks(&p, ctx, &sa, &sb, &sm, 1, &ko);
    if (st == NDF_OK) st = time_plan(ctx, p, &sa, &sb, reps, &sec);
    if (st == NDF_OK) {
      rows[*nrows] =
          make_row("ks, central slice", ndf_plan_solver(p), ctx,
                   "sigma 0.3-3 by depth, normalized (Eq. 2a)", sec, (double)(n * n) / 1e6);
      rows[(*nrows)++].pipeline = 1; /* compute-bound: no GB/s figure */
    }
    ndf_plan_destroy(p);
    p = NULL;
  }
  free(smap);

  /* Gradient magnitude: sqrt of the sum over axes k of (d/dk Gaussian)^2. */
  double total = 0;
  const char *solver = "";
  for (int k = 0; k < 3 && st == NDF_OK; k++) {
    for (int d = 0; d < 3; d++) {
      o.sigma[d] = 1.5;
      o.order[d] = d == k;
    }
    st = ndf_plan_gaussian(&p, ctx, &a, &b, &o);
    if (st == NDF_OK) st = time_plan(ctx, p, &a, &b, reps, &sec);
    if (st == NDF_OK) {
      solver = ndf_plan_solver(p);
      rows[(*nrows)++] = make_row(deriv[k], solver, ctx, where, sec, mvox);
      double t0 = now();
      st = ndf_array_copy(ctx, &host_comp, &b);
      add_square(v->gradmag, v->comp, count, k == 0, k == 2, T);
      total += sec + (now() - t0);
    }
    ndf_plan_destroy(p);
    p = NULL;
  }
  if (st == NDF_OK) {
    rows[*nrows] = make_row("gradient magnitude, s 1.5", solver, ctx,
                            cuda ? "the 3 above + copies + host sqrt(sum of squares)"
                                 : "the 3 above + host sqrt(sum of squares)",
                            total, mvox);
    rows[(*nrows)++].pipeline = 1;
  }
  if (st == NDF_OK) st = run_kernels(ctx, v, &a, &b, reps, rows, nrows);
  ndf_array_free(ctx, &a);
  ndf_array_free(ctx, &b);
  if (st != NDF_OK) {
    fprintf(stderr, "ndfilt demo: %s: %s\n", ndf_status_str(st), ndf_context_message(ctx));
    return NDF_EXIT_FAIL;
  }
  return NDF_EXIT_OK;
}

static double max_abs_diff(const float *x, const float *y, int64_t count) {
  double m = 0;
  for (int64_t i = 0; i < count; i++)
    m = fmax(m, fabs((double)x[i] - (double)y[i]));
  return m;
}

int ndf_cli_demo(ndf_context *ctx, int argc, char **argv) {
  const char *dir = "demo-out";
  int64_t n = 256;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: ndfilt demo [--size N] [--out DIR]\n\n"
             "Builds a noisy 3-D Shepp-Logan phantom (N^3 voxels, default 256) in memory,\n"
             "smooths it with a Gaussian (sigma 2) and computes its Gaussian gradient\n"
             "magnitude (sigma 1.5), its Laplacian (the 3^3 kernel of `ndfilt conv --kernel\n"
             "laplace`) and, on the central %d^3 voxels (all of them if fewer), the 12-kernel\n"
             "bank of `--kernel quadrature`, all with mode nearest, and a kernel superposition\n"
             "of the central slice (sigma 0.3 to 3 growing with depth), on the chosen device (and\n"
             "on the CPU as well when that is a GPU), prints a table of timings and writes\n"
             "phantom, smoothed, gradmag, laplace and quadmag (the bank's direction 0\n"
             "magnitude sqrt(even^2 + odd^2) on the crop) as .nii.gz, and montage.png (the\n"
             "central slice of each, side by side) to DIR (default demo-out).\n\n"
             "examples:\n  ndfilt demo\n  ndfilt --device cpu demo --size 128 --out /tmp/demo\n",
             BANK_CROP);
      return NDF_EXIT_OK;
    }
    if (i + 1 < argc && !strcmp(argv[i], "--out"))
      dir = argv[++i];
    else if (i + 1 < argc && !strcmp(argv[i], "--size"))
      n = atoll(argv[++i]);
    else {
      fprintf(stderr, "ndfilt demo: unknown argument '%s' (see ndfilt demo --help)\n", argv[i]);
      return NDF_EXIT_USAGE;
    }
  }
  if (n < 8 || n > 1024) {
    fprintf(stderr, "ndfilt demo: --size must be in 8..1024\n");
    return NDF_EXIT_USAGE;
  }
  struct stat sb;
  if (mkdir(dir, 0777) != 0 && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
    fprintf(stderr, "ndfilt demo: cannot create directory %s\n", dir);
    return NDF_EXIT_IO;
  }
  const int64_t c = n < BANK_CROP ? n : BANK_CROP;
  const size_t count = (size_t)(n * n * n), bytes = count * sizeof(float);
  const size_t ccount = (size_t)(c * c * c), cbytes = ccount * sizeof(float);
  /* phantom, smoothed, gradient magnitude, scratch, Laplacian; crop, quadrature magnitude */
  float *buf[7];
  int ok = 1;
  for (int k = 0; k < 7; k++)
    ok &= (buf[k] = malloc(k < 5 ? bytes : cbytes)) != NULL;
  if (!ok) {
    for (int k = 0; k < 7; k++)
      free(buf[k]);
    fprintf(stderr, "ndfilt demo: out of memory\n");
    return NDF_EXIT_FAIL;
  }
  volumes v = {buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6], n, c};
  printf("ndfilt %s demo: noisy Shepp-Logan phantom %lld^3 (float32, %.0f MiB) on %s, %d CPU "
         "threads\n",
         ndf_version_string(), (long long)n, (double)bytes / 1048576.0,
         ndf_context_device_name(ctx), ndf_context_threads(ctx));
  double t0 = now();
  ndf_phantom3d(buf[0], n, n, n, 0.05, 1);
  printf("phantom built in %.0f ms\n", 1e3 * (now() - t0));
  const int64_t c0 = (n - c) / 2; /* the crop's first voxel on each axis */
  for (int64_t z = 0; z < c; z++)
    for (int64_t y = 0; y < c; y++)
      memcpy(buf[5] + (z * c + y) * c, buf[0] + ((z + c0) * n + y + c0) * n + c0,
             (size_t)c * sizeof(float));

  row rows[40];
  double diff[4] = {-1, -1, -1, -1}; /* max |gpu - cpu| of the four results, when both ran */
  int nrows = 0, rc = run_device(ctx, &v, rows, &nrows);
  if (rc == NDF_EXIT_OK && ndf_context_place(ctx).kind == NDF_PLACE_CUDA) {
    /* The CPU twin, into its own buffers, compared with the GPU's results. */
    ndf_context *cpu;
    ndf_context_opts co = {
        .struct_size = sizeof co, .device = "cpu", .threads = ndf_context_threads(ctx)};
    volumes t = {
        buf[0], malloc(bytes), malloc(bytes), buf[3], malloc(bytes), buf[5], malloc(cbytes), n, c};
    if (t.smooth && t.gradmag && t.laplace && t.quadmag &&
        ndf_context_create(&cpu, &co) == NDF_OK) {
      rc = run_device(cpu, &t, rows, &nrows);
      ndf_context_destroy(cpu);
      if (rc == NDF_EXIT_OK) {
        diff[0] = max_abs_diff(v.smooth, t.smooth, (int64_t)count);
        diff[1] = max_abs_diff(v.gradmag, t.gradmag, (int64_t)count);
        diff[2] = max_abs_diff(v.laplace, t.laplace, (int64_t)count);
        diff[3] = max_abs_diff(v.quadmag, t.quadmag, (int64_t)ccount);
      }
    }
    free(t.smooth);
    free(t.gradmag);
    free(t.laplace);
    free(t.quadmag);
  }
  if (rc == NDF_EXIT_OK) {
    print_table(rows, nrows);
    if (diff[0] >= 0)
      printf("max |gpu - cpu|: smoothed %.3g, gradient magnitude %.3g, laplacian %.3g, "
             "quadrature magnitude %.3g\n",
             diff[0], diff[1], diff[2], diff[3]);
    /* the files (NIfTI, 1 mm voxels) and their buffers, then the montage */
    static const char *names[5] = {"phantom", "smoothed", "gradmag", "laplace", "quadmag"};
    /* NIfTI and PNG where this build has them (a build without their libraries: .npy, and
     * the montage as .npy too) */
    const char *ext = ndf_format_built_in(NDF_FORMAT_NIFTI) ? ".nii.gz" : ".npy",
               *mext = ndf_format_built_in(NDF_FORMAT_PNG) ? ".png" : ".npy";
    static const int which[5] = {0, 1, 2, 4, 6};
    char path[4096], err[1024];
    const int64_t shape[3] = {n, n, n}, cshape[3] = {c, c, c};
    ndf_status st = NDF_OK;
    ndf_image img;
    ndf_image_init(&img);
    for (int d = 0; d < 3; d++)
      img.spacing[d] = 1.0;
    for (int k = 0; k < 5 && st == NDF_OK; k++) {
      img.a = ndf_array_contiguous(NDF_F32, 3, k < 4 ? shape : cshape, buf[which[k]]);
      snprintf(path, sizeof path, "%s/%s%s", dir, names[k], ext);
      st = ndf_image_write(path, &img, err, sizeof err);
    }
    int64_t mshape[2];
    uint8_t *m = st == NDF_OK ? montage(&v, &mshape[0], &mshape[1]) : NULL;
    if (st == NDF_OK && !m) {
      snprintf(err, sizeof err, "out of memory");
      st = NDF_ENOMEM;
    }
    if (st == NDF_OK) {
      img.a = ndf_array_contiguous(NDF_U8, 2, mshape, m);
      img.spacing[0] = img.spacing[1] = 0;
      snprintf(path, sizeof path, "%s/montage%s", dir, mext);
      st = ndf_image_write(path, &img, err, sizeof err);
    }
    free(m);
    if (st != NDF_OK) {
      fprintf(stderr, "ndfilt demo: %s\n", err);
      rc = NDF_EXIT_IO;
    } else {
      printf("wrote %s/: phantom%s, smoothed%s (Gaussian, sigma 2), gradmag%s (Gaussian "
             "gradient magnitude, sigma 1.5), laplace%s (Laplacian), quadmag%s (quadrature "
             "direction 0 magnitude, central %lld^3), montage%s (central slices: phantom | "
             "smoothed | gradient magnitude | Laplacian | quadrature)\n",
             dir, ext, ext, ext, ext, ext, (long long)c, mext);
    }
  }
  for (int k = 0; k < 7; k++)
    free(buf[k]);
  return rc;
}

/* ------------------------------------------------------------------ bench */

int ndf_cli_bench(ndf_context *ctx, int argc, char **argv) {
  int64_t shape[3] = {256, 256, 256};
  double sigma = 4.5;
  const int cuda = ndf_context_place(ctx).kind == NDF_PLACE_CUDA;
  int reps = cuda ? 15 : 3;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      printf("usage: ndfilt bench [--shape Z,Y,X] [--sigma S] [--repeat N]\n\n"
             "Times the Gaussian filter's methods (fir, and the recursive iir_deriche, iir_vyv,\n"
             "iir_alvarez) and the 3^3 Laplacian on a noisy phantom of the given shape (default\n"
             "256,256,256; float32, mode nearest, sigma default 4.5) held on the device: the\n"
             "median of N runs (default 15 on a GPU, 3 on the CPU) after a warm-up, wall clock\n"
             "around each run and its synchronisation. bench/ has the peers' comparisons.\n\n"
             "examples:\n  ndfilt bench\n  ndfilt --device cpu --threads 8 bench --sigma 16\n");
      return NDF_EXIT_OK;
    }
    if (!v) {
      fprintf(stderr, "ndfilt bench: option %s needs a value\n", a);
      return NDF_EXIT_USAGE;
    }
    i++;
    if (!strcmp(a, "--shape")) {
      long long z, y, x;
      int k = 0;
      if (sscanf(v, "%lld,%lld,%lld%n", &z, &y, &x, &k) != 3 || v[k] || z < 1 || y < 1 || x < 1)
        end = (char *)v;
      shape[0] = z, shape[1] = y, shape[2] = x;
    } else if (!strcmp(a, "--sigma")) {
      sigma = strtod(v, &end);
      end = *end || !(sigma > 0) ? (char *)v : NULL;
    } else if (!strcmp(a, "--repeat")) {
      reps = (int)strtol(v, &end, 10);
      end = *end || reps < 1 || reps > 15 ? (char *)v : NULL;
    } else {
      fprintf(stderr, "ndfilt bench: unknown option %s (see ndfilt bench --help)\n", a);
      return NDF_EXIT_USAGE;
    }
    if (end) {
      fprintf(stderr, "ndfilt bench: bad %s '%s' (see ndfilt bench --help)\n", a, v);
      return NDF_EXIT_USAGE;
    }
  }
  const int64_t count = shape[0] * shape[1] * shape[2];
  float *host = malloc((size_t)count * sizeof *host);
  if (!host) {
    fprintf(stderr, "ndfilt bench: out of memory\n");
    return NDF_EXIT_FAIL;
  }
  ndf_phantom3d(host, shape[0], shape[1], shape[2], 0.05, 7);
  printf("ndfilt %s bench: %lld x %lld x %lld float32 on %s, %d CPU threads\n",
         ndf_version_string(), (long long)shape[0], (long long)shape[1], (long long)shape[2],
         ndf_context_device_name(ctx), ndf_context_threads(ctx));
  ndf_array h = ndf_array_contiguous(NDF_F32, 3, shape, host), a, b;
  a.data = b.data = NULL;
  ndf_status st = ndf_array_alloc(ctx, &a, NDF_F32, 3, shape);
  if (st == NDF_OK) st = ndf_array_alloc(ctx, &b, NDF_F32, 3, shape);
  if (st == NDF_OK) st = ndf_array_copy(ctx, &a, &h);
  static const char *methods[4] = {"fir", "iir_deriche", "iir_vyv", "iir_alvarez"};
  static char ops[4][48];
  row rows[8];
  int nrows = 0;
  const double mvox = (double)count / 1e6;
  for (int m = 0; m < 4 && st == NDF_OK; m++) {
    ndf_gaussian_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.method = methods[m];
    for (int d = 0; d < 3; d++) {
      o.sigma[d] = sigma;
      o.mode[d] = NDF_MODE_NEAREST;
    }
    ndf_plan *p = NULL;
    double sec;
    st = ndf_plan_gaussian(&p, ctx, &a, &b, &o);
    if (st == NDF_OK) st = time_plan(ctx, p, &a, &b, reps, &sec);
    if (st == NDF_OK) {
      snprintf(ops[m], sizeof ops[m], "%s, sigma %g", methods[m], sigma);
      rows[nrows++] = make_row(ops[m], ndf_plan_solver(p), ctx, "", sec, mvox);
    }
    ndf_plan_destroy(p);
  }
  ndf_cli_kernel k;
  char err[256];
  memset(&k, 0, sizeof k);
  if (st == NDF_OK) st = ndf_cli_kernel_named("laplace", 3, &k, err, sizeof err);
  if (st == NDF_OK) {
    const char *solver;
    double sec;
    st = time_convolve(ctx, &a, &b, &k, reps, &sec, &solver);
    if (st == NDF_OK) rows[nrows++] = make_row("laplace 3^3", solver, ctx, "", sec, mvox);
  }
  ndf_cli_kernel_free(&k);
  ndf_array_free(ctx, &a);
  ndf_array_free(ctx, &b);
  free(host);
  if (st != NDF_OK) {
    fprintf(stderr, "ndfilt bench: %s: %s\n", ndf_status_str(st), ndf_context_message(ctx));
    return NDF_EXIT_FAIL;
  }
  print_table(rows, nrows);
  printf("(median of %d runs after a warm-up)\n", reps);
  return NDF_EXIT_OK;
}
