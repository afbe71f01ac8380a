/* ks_probe.c - a first timing probe of the kernel-superposition solvers (issue 06), not yet the
 * benchmark the issue asks for (bench/ks.py: peers, the paper's Tables 2-3, plots): the paper's
 * protocol, a uniform random image in [0, 1), sigma ~ U[0, r_max / 3), n_sigma 3, index input,
 * output same, on 512^2 (r_max 1..32), 2048^2 (r_max <= 16) and 128^3 (r_max <= 8); each
 * solver forced by name, device arrays, one call (plan made beforehand) warmed up, the median of
 * 15 wall-clock calls ending in ndf_context_synchronize (launch overhead included).
 *
 *   cc -O2 -Iinclude bench/ks_probe.c -Lbuild -lndfilt -Wl,-rpath,$PWD/build -o ks_probe
 *   ./ks_probe cuda        (or cpu: cpu_ks, 3 calls) */
#include "ndf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
  double x = *(double *)a, y = *(double *)b;
  return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
  const char *dev = argc > 1 ? argv[1] : "cuda";
  ndf_context *ctx;
  ndf_context_opts co = {.struct_size = sizeof co, .device = dev};
  if (ndf_context_create(&ctx, &co)) {
    printf("no ctx\n");
    return 1;
  }
  const char *solvers[] = {"cuda_ks_gather",
                           "cuda_ks_scatter_global_atomic",
                           "cuda_ks_scatter_shared_atomic",
                           "cuda_ks_scatter_sync",
                           "cuda_ks_scatter_threadfence",
                           "cuda_ks_scatter_warpsync",
                           "cpu_ks",
                           NULL};
  int sizes[][3] = {{2, 512, 512}, {2, 2048, 2048}, {3, 128, 128}};
  for (int si = 0; si < 3; si++) {
    int nd = sizes[si][0];
    int64_t shape[3] = {sizes[si][1], sizes[si][2], nd == 3 ? 128 : 0};
    ndf_array h = ndf_array_contiguous(NDF_F32, nd, shape, NULL);
    int64_t n = ndf_array_size(&h);
    float *x = malloc(n * 4), *s = malloc(n * 4);
    srand(1);
    for (int64_t i = 0; i < n; i++)
      x[i] = rand() / (RAND_MAX + 1.0);
    ndf_array hx = ndf_array_contiguous(NDF_F32, nd, shape, x);
    ndf_array din, dout;
    ndf_array_alloc(ctx, &din, NDF_F32, nd, shape);
    ndf_array_alloc(ctx, &dout, NDF_F32, nd, shape);
    ndf_array_copy(ctx, &din, &hx);
    int rms[] = {1, 2, 4, 8, 16, 32};
    for (int ri = 0; ri < 6; ri++) {
      int rm = rms[ri];
      if (nd == 3 && rm > 8) break;
      if (si == 1 && rm > 16) break;
      for (int64_t i = 0; i < n; i++)
        s[i] = rand() / (RAND_MAX + 1.0) * rm / 3.0;
      ndf_array sv = ndf_array_contiguous(NDF_F32, nd, shape, s);
      printf("%dD %lldx%lld rmax %2d:", nd, (long long)shape[0], (long long)shape[1], rm);
      for (int k = 0; solvers[k]; k++) {
        int cpu = !strncmp(solvers[k], "cpu", 3);
        if (cpu != !strcmp(dev, "cpu")) continue;
        if (k == 1 && rm > 8 && si == 1) continue;
        ndf_ks_opts o = {sizeof o, solvers[k], NDF_KS_INPUT, 3, NDF_KS_SAME, 0, 0};
        ndf_plan *p;
        ndf_array *pi = cpu ? &hx : &din;
        float *yo = malloc(n * 4);
        ndf_array ho = ndf_array_contiguous(NDF_F32, nd, shape, yo);
        ndf_array *po = cpu ? &ho : &dout;
        if (ndf_plan_ks(&p, ctx, pi, po, &sv, 1, &o)) {
          printf(" %s:-", solvers[k] + 8);
          free(yo);
          continue;
        }
        double t[15];
        int reps = cpu ? 3 : 15;
        ndf_execute(p, pi, po);
        ndf_context_synchronize(ctx);
        for (int r = 0; r < reps; r++) {
          double t0 = now();
          ndf_execute(p, pi, po);
          ndf_context_synchronize(ctx);
          t[r] = (now() - t0) * 1e3;
        }
        qsort(t, reps, sizeof *t, cmp);
        printf(" %s %.3f", solvers[k] + (cpu ? 0 : 8), t[reps / 2]);
        ndf_plan_destroy(p);
        free(yo);
      }
      printf("\n");
      fflush(stdout);
    }
    ndf_array_free(ctx, &din);
    ndf_array_free(ctx, &dout);
    free(x);
    free(s);
  }
  ndf_context_destroy(ctx);
}
