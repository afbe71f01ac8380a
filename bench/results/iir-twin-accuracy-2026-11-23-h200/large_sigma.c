/* large_sigma.c - Deriche and iir_vyv 3 (its twin) at sigma 300 to 10000: the float64 direct
 * parallel form (ndf__iir_line) and the float64 first-order complex recursions against the long
 * double reference. Build: see README.md. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ndf.h"
#include "core/iir.h"
#include "ref/ref.h"
static void twin_line(const ndf__iir *tw, const double *x, double *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = 0;
  for (int k = 0; k < tw->npar; k++) {
    const double complex p = tw->pole[k][0] + I * tw->pole[k][1], rs = tw->res[k][0] + I * tw->res[k][1];
    double complex z = x[0] / (1 - p), v = x[n - 1] / (1 - p);
    for (int64_t i = 0; i < n; i++) { z = p * z + x[i]; y[i] += creal(rs * z) - creal(rs) * x[i]; }
    for (int64_t i = n - 1; i >= 0; i--) { v = p * v + x[i]; y[i] += creal(rs * v); }
  }
}
int main(void) {
  static const double sig[] = {300, 1000, 3000, 10000};
  static const int64_t lens[] = {16, 130, 700, 2000, 5000};
  struct { int m, K; } ms[] = {{NDF__IIR_DERICHE,4},{NDF__IIR_VYV,3},{NDF__IIR_VYV,4}};
  srand(2);
  for (int q = 0; q < 3; q++) for (int j = 0; j < 4; j++) {
    ndf__iir f, tw; char why[200];
    if (ndf__iir_design(&f, ms[q].m, ms[q].K, sig[j], why, 200)) continue;
    const ndf__iir *g = &f; if (f.form == NDF__IIR_CASCADE) { ndf__iir_parallel_twin(&f, &tw); g = &tw; }
    double w = 0, wd = 0; int64_t wn = 0;
    for (int li = 0; li < 5; li++) { int64_t n = lens[li];
    for (int rep = 0; rep < 4; rep++) {
      float *xf = malloc(n * 4); double *x = malloc(n*8), *c = malloc(n * 8), *y = malloc(n*8), *rf = malloc(n*8), *tmp = malloc(n*8);
      for (int64_t i = 0; i < n; i++) { xf[i] = (float)(rand() / (double)RAND_MAX + (i < n / 3 ? 0.5 : 0)); x[i] = c[i] = xf[i]; }
      ndf_array a = ndf_array_contiguous(NDF_F32, 1, &n, xf);
      const ndf__iir *fp[1] = {&f};
      ndf_ref_iir_gaussian(&a, rf, fp);
      ndf__iir_line(g, c, n, tmp);
      twin_line(g, x, y, n);
      double mag = 0; for (int64_t i = 0; i < n; i++) mag = fmax(mag, fabs(rf[i]));
      for (int64_t i = 0; i < n; i++) { if (fabs(y[i]-rf[i])/mag > w) w = fabs(y[i]-rf[i])/mag, wn = n; wd = fmax(wd, fabs(c[i]-rf[i])/mag); }
      free(xf); free(x); free(c); free(y); free(rf); free(tmp);
    }}
    printf("m %d K %d sigma %5g: parallel direct %.2e, first-order recursions %.2e (n %lld)\n", ms[q].m, ms[q].K, sig[j], wd, w, (long long)wn);
  }
}
