/* vyv_twin.c - iir_vyv of order 3 and 4, sigma 16 to 100, on random lines of 16 to 2000 samples:
 * the float64 cascade, the twin's float64 first-order complex recursions and its float64 direct
 * form, each against the long double reference (ref.h). Build: see README.md. */
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
  static const double sig[] = {16, 40, 64, 80, 100};
  static const int64_t lens[] = {16, 50, 128, 130, 300, 700, 2000};
  srand(1);
  for (int K = 3; K <= 4; K++)
  for (size_t j = 0; j < 5; j++) for (size_t li = 0; li < 7; li++) {
    ndf__iir f, tw; char why[200];
    ndf__iir_design(&f, NDF__IIR_VYV, K, sig[j], why, 200);
    ndf__iir_parallel_twin(&f, &tw);
    int64_t n = lens[li];
    double wc = 0, wt = 0, wd = 0;
    for (int rep = 0; rep < 20; rep++) {
      float *xf = malloc(n * 4); double *x = malloc(n * 8), *c = malloc(n * 8), *d = malloc(n*8), *y = malloc(n*8), *rf = malloc(n*8), *tmp = malloc(n*8);
      for (int64_t i = 0; i < n; i++) { xf[i] = (float)(rand() / (double)RAND_MAX + (i < n / 3 ? 0.5 : 0)); x[i] = c[i] = d[i] = xf[i]; }
      ndf_array a = ndf_array_contiguous(NDF_F32, 1, &n, xf);
      const ndf__iir *fp[1] = {&f};
      ndf_ref_iir_gaussian(&a, rf, fp);
      ndf__iir_line(&f, c, n, NULL);
      ndf__iir_line(&tw, d, n, tmp);
      twin_line(&tw, x, y, n);
      double mag = 0; for (int64_t i = 0; i < n; i++) mag = fmax(mag, fabs(rf[i]));
      for (int64_t i = 0; i < n; i++) { wc = fmax(wc, fabs(c[i]-rf[i])/mag); wt = fmax(wt, fabs(y[i]-rf[i])/mag); wd = fmax(wd, fabs(d[i]-rf[i])/mag);}
      free(xf); free(x); free(c); free(d); free(y); free(rf); free(tmp);
    }
    printf("K %d sigma %5g n %5lld: cascade %.2e  twin recursions %.2e  twin direct %.2e\n", K, sig[j], (long long)n, wc, wt, wd);
  }
}
