/* demo.c - `ndfilt demo`: every operation on a noisy 3-D Shepp-Logan phantom, timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "io/npy.h"
#include "phantom.h"

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

typedef struct {
  const char *op, *solver, *note; /* static strings */
  char device[64];                /* copied: the context may be gone when printed */
  double sec, mvox;
} row;

static row make_row(const char *op, const char *solver, ndf_context *ctx, const char *note,
                    double sec, double mvox) {
  row r = {op, solver, note, "", sec, mvox};
  snprintf(r.device, sizeof r.device, "%s", ndf_context_device_name(ctx));
  return r;
}

static void print_table(const row *r, int n) {
  printf("\n%-26s %-12s %-30s %10s %10s %9s  %s\n", "operation", "solver", "device", "time ms",
         "Mvox/s", "GB/s", "note");
  for (int i = 0; i < n; i++)
    printf("%-26s %-12s %-30s %10.2f %10.0f %9.1f  %s\n", r[i].op, r[i].solver, r[i].device,
           1e3 * r[i].sec, r[i].mvox / r[i].sec, 8e-3 * r[i].mvox / r[i].sec, r[i].note);
  printf("(GB/s counts one float32 read and one write per voxel)\n");
}

/* Central z-slice of a and b side by side as an 8-bit PGM. */
static int fill_pgm(void *ctx, void *file) {
  float **v = ctx; /* v[0], v[1]: volumes; v[2][0..2]: nz, ny, nx */
  int64_t nz = (int64_t)v[2][0], ny = (int64_t)v[2][1], nx = (int64_t)v[2][2];
  FILE *f = file;
  fprintf(f, "P5\n%lld %lld\n255\n", (long long)(2 * nx), (long long)ny);
  for (int64_t y = 0; y < ny; y++)
    for (int k = 0; k < 2; k++)
      for (int64_t x = 0; x < nx; x++) {
        float s = v[k][((nz / 2) * ny + y) * nx + x];
        int g = (int)(255.f * (s + 0.1f) / 1.2f);
        fputc(g < 0 ? 0 : g > 255 ? 255 : g, f);
      }
  return 0;
}

/* Runs the demo's operations on one context; appends rows. `vol` is the host
 * phantom; the result of the three passes is left in `smooth` (host). */
static int run_device(ndf_context *ctx, const float *vol, float *smooth, int64_t n, row *rows,
                      int *nrows) {
  static const double w[9] = {1 / 256.,  8 / 256.,  28 / 256., 56 / 256., 70 / 256.,
                              56 / 256., 28 / 256., 8 / 256.,  1 / 256.};
  static const char *names[3] = {"correlate1d axis 0 (z)", "correlate1d axis 1 (y)",
                                 "correlate1d axis 2 (x)"};
  const int64_t shape[3] = {n, n, n};
  const double mvox = (double)(n * n * n) / 1e6;
  const int cuda = ndf_context_place(ctx).kind == NDF_PLACE_CUDA;
  ndf_array host_in = ndf_array_contiguous(NDF_F32, 3, shape, (void *)vol);
  ndf_array host_out = ndf_array_contiguous(NDF_F32, 3, shape, smooth);
  ndf_array a, b; /* on the context's device: passes ping-pong between them */
  ndf_correlate1d_opts o = {sizeof o, NULL, NDF_MODE_NEAREST, 0, 0};
  ndf_status st = NDF_OK;
  int reps = cuda ? 9 : 3;
  a.data = b.data = NULL;
  st = ndf_array_alloc(ctx, &a, NDF_F32, 3, shape);
  if (st == NDF_OK) st = ndf_array_alloc(ctx, &b, NDF_F32, 3, shape);
  if (st == NDF_OK) st = ndf_array_copy(ctx, &a, &host_in);
  /* Pass k reads a (k even) or b and writes the other: z, then y, then x. */
  for (int k = 0; k < 3 && st == NDF_OK; k++) {
    ndf_array *src = k % 2 ? &b : &a, *dst = k % 2 ? &a : &b;
    ndf_plan *p;
    st = ndf_plan_correlate1d(&p, ctx, src, dst, w, 9, k, &o);
    if (st != NDF_OK) break;
    double sec;
    /* Timing repeats the pass; the last run leaves dst = pass(src). */
    st = time_plan(ctx, p, src, dst, reps, &sec);
    if (st == NDF_OK)
      rows[(*nrows)++] =
          make_row(names[k], ndf_plan_solver(p), ctx, cuda ? "device arrays" : "", sec, mvox);
    ndf_plan_destroy(p);
  }
  if (st == NDF_OK && cuda) {
    /* The same first pass from host arrays: transfers included. */
    ndf_plan *p;
    st = ndf_plan_correlate1d(&p, ctx, &host_in, &host_out, w, 9, 0, &o);
    double sec;
    if (st == NDF_OK) st = time_plan(ctx, p, &host_in, &host_out, 3, &sec);
    if (st == NDF_OK)
      rows[(*nrows)++] =
          make_row(names[0], ndf_plan_solver(p), ctx, "host arrays, transfers included", sec, mvox);
    ndf_plan_destroy(p);
  }
  if (st == NDF_OK) st = ndf_array_copy(ctx, &host_out, &b); /* after the z, y, x passes */
  ndf_array_free(ctx, &a);
  ndf_array_free(ctx, &b);
  if (st != NDF_OK) {
    fprintf(stderr, "ndfilt demo: %s: %s\n", ndf_status_str(st), ndf_context_message(ctx));
    return NDF_EXIT_FAIL;
  }
  return NDF_EXIT_OK;
}

int ndf_cli_demo(ndf_context *ctx, int argc, char **argv) {
  const char *dir = "demo-out";
  int64_t n = 256;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: ndfilt demo [--size N] [--out DIR]\n\n"
             "Builds a noisy 3-D Shepp-Logan phantom (N^3 voxels, default 256) in memory,\n"
             "runs every operation on the chosen device (and on the CPU as well when that is\n"
             "a GPU), prints a table of timings and writes phantom.npy, smoothed.npy and\n"
             "slices.pgm (central slice, before | after) to DIR (default demo-out).\n");
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
  size_t count = (size_t)(n * n * n);
  float *vol = malloc(count * sizeof(float)), *smooth = malloc(count * sizeof(float));
  if (!vol || !smooth) {
    free(vol);
    free(smooth);
    fprintf(stderr, "ndfilt demo: out of memory\n");
    return NDF_EXIT_FAIL;
  }
  printf("ndfilt %s demo: noisy Shepp-Logan phantom %lld^3 (float32, %.0f MiB) on %s, %d CPU "
         "threads\n",
         ndf_version_string(), (long long)n, (double)(count * 4) / 1048576.0,
         ndf_context_device_name(ctx), ndf_context_threads(ctx));
  double t0 = now();
  ndf_phantom3d(vol, n, n, n, 0.05, 1);
  printf("phantom built in %.0f ms\n", 1e3 * (now() - t0));

  row rows[16];
  int nrows = 0, rc = run_device(ctx, vol, smooth, n, rows, &nrows);
  if (rc == NDF_EXIT_OK && ndf_context_place(ctx).kind == NDF_PLACE_CUDA) {
    ndf_context *cpu;
    ndf_context_opts co = {sizeof co, "cpu", ndf_context_threads(ctx)};
    float *scratch = malloc(count * sizeof(float));
    if (scratch && ndf_context_create(&cpu, &co) == NDF_OK) {
      rc = run_device(cpu, vol, scratch, n, rows, &nrows);
      ndf_context_destroy(cpu);
    }
    free(scratch);
  }
  if (rc == NDF_EXIT_OK) {
    print_table(rows, nrows);
    char path[4096], err[512];
    const int64_t shape[3] = {n, n, n};
    ndf_array a = ndf_array_contiguous(NDF_F32, 3, shape, vol);
    ndf_array b = ndf_array_contiguous(NDF_F32, 3, shape, smooth);
    float dims[3] = {(float)n, (float)n, (float)n};
    float *pgm[3] = {vol, smooth, dims};
    snprintf(path, sizeof path, "%s/phantom.npy", dir);
    ndf_status st = ndf_npy_write(path, &a, err, sizeof err);
    snprintf(path, sizeof path, "%s/smoothed.npy", dir);
    if (st == NDF_OK) st = ndf_npy_write(path, &b, err, sizeof err);
    snprintf(path, sizeof path, "%s/slices.pgm", dir);
    if (st == NDF_OK) st = ndf_write_atomic(path, fill_pgm, pgm, err, sizeof err);
    if (st != NDF_OK) {
      fprintf(stderr, "ndfilt demo: %s\n", err);
      rc = NDF_EXIT_IO;
    } else {
      printf("wrote %s/phantom.npy, %s/smoothed.npy (binomial-9 blur along z, y, x), "
             "%s/slices.pgm\n",
             dir, dir, dir);
    }
  }
  free(vol);
  free(smooth);
  return rc;
}
