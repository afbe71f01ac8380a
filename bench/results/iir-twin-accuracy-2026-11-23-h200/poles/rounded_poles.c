/* rounded_poles.c - Deriche at sigma 64, 160 and 256 on lines of 2 to 500 samples, float64
 * arithmetic: its recursions from the float64 poles, and from the poles rounded to float32 (rho
 * scaled to their DC gain, as iir_chunk.cuh does), against the long double reference. Build: see
 * ../README.md. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ndf.h"
#include "core/iir.h"
#include "ref/ref.h"
static void run(const ndf__iir *tw, const float *x, double *y, int64_t n, int round) {
  for (int64_t i = 0; i < n; i++) y[i] = 0;
  double complex pr[2], rr[2]; double dc = 0;
  for (int k = 0; k < 2; k++) { pr[k] = tw->pole[k][0] + I * tw->pole[k][1]; if (round) pr[k] = (float)creal(pr[k]) + I * (float)cimag(pr[k]);
    dc += creal((tw->res[k][0] + I * tw->res[k][1]) * (1 + pr[k]) / (1 - pr[k])); }
  for (int k = 0; k < 2; k++) {
    double complex p = pr[k], rs = (tw->res[k][0] + I * tw->res[k][1]) / dc;
    double complex z = x[0] / (1 - p), v = x[n - 1] / (1 - p);
    for (int64_t i = 0; i < n; i++) { z = p * z + x[i]; y[i] += creal(rs * z) - creal(rs) * x[i]; }
    for (int64_t i = n - 1; i >= 0; i--) { v = p * v + x[i]; y[i] += creal(rs * v); }
  }
}
int main(void) {
  double sg[] = {64, 160, 256};
  static const int64_t lens[] = {2, 16, 64, 500};
  srand(3);
  for (int q = 0; q < 3; q++) for (int li = 0; li < 4; li++) {
    ndf__iir f; char why[200];
    ndf__iir_design(&f, NDF__IIR_DERICHE, 4, sg[q], why, 200);
    double w[2] = {0, 0}; int64_t n = lens[li];
    for (int rep = 0; rep < 200; rep++) {
      float *xf = malloc(n * 4); double *y = malloc(n*8), *rf = malloc(n*8);
      for (int64_t i = 0; i < n; i++) xf[i] = (float)(2 * rand() / (double)RAND_MAX - 1);
      ndf_array a = ndf_array_contiguous(NDF_F32, 1, &n, xf);
      const ndf__iir *fp[1] = {&f};
      ndf_ref_iir_gaussian(&a, rf, fp);
      double mag = 0; for (int64_t i = 0; i < n; i++) mag = fmax(mag, fabs(rf[i]));
      for (int m = 0; m < 2; m++) { run(&f, xf, y, n, m);
        for (int64_t i = 0; i < n; i++) w[m] = fmax(w[m], fabs(y[i]-rf[i])/mag); }
      free(xf); free(y); free(rf);
    }
    printf("Deriche sigma %g n %lld: exact poles %.2e; float32-rounded poles %.2e\n", sg[q], (long long)n, w[0], w[1]);
  }
}
