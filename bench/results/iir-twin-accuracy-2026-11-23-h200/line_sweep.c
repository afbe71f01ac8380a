/* line_sweep.c - each method's float64 line filter (core/iir.h ndf__iir_line) against the long
 * double reference (ref.h) on random lines of 16 to 5000 samples: as cpu_iir runs it (the twin
 * where ndf__iir_twin_for_accuracy says so) and as designed (the cascade). Build from the repository
 * root after building build/: gcc -O2 -std=c11 -fopenmp -Iinclude -Isrc line_sweep.c
 * build/libndfaux.a -Lbuild -lndfilt -Wl,-rpath,$PWD/build -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ndf.h"
#include "core/iir.h"
#include "ref/ref.h"
int main(void) {
  static const double sig[] = {20, 50, 100, 300, 1000, 3000};
  static const int64_t lens[] = {16, 130, 700, 2000, 5000};
  struct { int m, K; } ms[] = {{NDF__IIR_ALVAREZ,1},{NDF__IIR_ALVAREZ,2},{NDF__IIR_ALVAREZ,3},{NDF__IIR_ALVAREZ,4},{NDF__IIR_ALVAREZ,5},{NDF__IIR_DERICHE,4},{NDF__IIR_VYV,3},{NDF__IIR_VYV,4},{NDF__IIR_VYV,5}};
  srand(2);
  for (int q = 0; q < 9; q++) for (int j = 0; j < 6; j++) {
    ndf__iir f, tw; char why[200];
    if (ndf__iir_design(&f, ms[q].m, ms[q].K, sig[j], why, 200)) continue;
    int twin = ndf__iir_twin_for_accuracy(&f, &tw);
    double w = 0, wc = 0; int64_t wn = 0;
    for (int li = 0; li < 5; li++) { int64_t n = lens[li];
    for (int rep = 0; rep < 6; rep++) {
      float *xf = malloc(n * 4); double *c = malloc(n * 8), *d = malloc(n * 8), *rf = malloc(n*8), *tmp = malloc(n*8);
      for (int64_t i = 0; i < n; i++) { xf[i] = (float)(rand() / (double)RAND_MAX + (i < n / 3 ? 0.5 : 0)); c[i] = d[i] = xf[i]; }
      ndf_array a = ndf_array_contiguous(NDF_F32, 1, &n, xf);
      const ndf__iir *fp[1] = {&f};
      ndf_ref_iir_gaussian(&a, rf, fp);
      ndf__iir_line(twin ? &tw : &f, c, n, tmp);
      ndf__iir_line(&f, d, n, tmp);
      double mag = 0; for (int64_t i = 0; i < n; i++) mag = fmax(mag, fabs(rf[i]));
      for (int64_t i = 0; i < n; i++) { if (fabs(c[i]-rf[i])/mag > w) w = fabs(c[i]-rf[i])/mag, wn = n; wc = fmax(wc, fabs(d[i]-rf[i])/mag); }
      free(xf); free(c); free(d); free(rf); free(tmp);
    }}
    printf("%s %d sigma %5g: as run (%s) %.2e (n %lld); as designed %.2e\n", ndf__iir_method_name(ms[q].m), ms[q].K, sig[j], twin ? "twin" : f.form ? "parallel" : "cascade", w, (long long)wn, wc);
  }
}
