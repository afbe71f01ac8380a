/* float32.c - the first-order complex recursions in float32, run serially over a line (the
 * chunked GPU passes chain chunks of 16 instead), against the long double reference: Deriche at
 * sigma 64 to 256 and iir_vyv's twins at 64 to 256. Build: see README.md. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ndf.h"
#include "core/iir.h"
#include "ref/ref.h"
/* the twin's first-order recursions in float32, chunks of 16 chained as z = p^16 z + E */
static void twin_f32(const ndf__iir *tw, const float *x, double *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = 0;
  for (int k = 0; k < tw->npar; k++) {
    const float complex p = (float)tw->pole[k][0] + I * (float)tw->pole[k][1], rs = (float)tw->res[k][0] + I * (float)tw->res[k][1];
    float complex z = x[0] / (1 - p), v = x[n - 1] / (1 - p);
    float *o = malloc(n * 4);
    for (int64_t i = 0; i < n; i++) { z = p * z + x[i]; o[i] = crealf(rs * z) - crealf(rs) * x[i]; }
    for (int64_t i = n - 1; i >= 0; i--) { v = p * v + x[i]; o[i] += crealf(rs * v); y[i] += o[i]; }
    free(o);
  }
}
int main(void) {
  struct { int m, K; double s; } cs[] = {{NDF__IIR_DERICHE,4,64},{NDF__IIR_DERICHE,4,100},{NDF__IIR_DERICHE,4,256},{NDF__IIR_VYV,4,64},{NDF__IIR_VYV,4,100},{NDF__IIR_VYV,3,100},{NDF__IIR_VYV,3,256}};
  static const int64_t lens[] = {64, 128, 130, 256, 512};
  srand(3);
  for (int q = 0; q < 7; q++) {
    ndf__iir f, tw; char why[200];
    ndf__iir_design(&f, cs[q].m, cs[q].K, cs[q].s, why, 200);
    const ndf__iir *g = &f; if (f.form == NDF__IIR_CASCADE) { ndf__iir_parallel_twin(&f, &tw); g = &tw; }
    double w = 0; int64_t wn = 0;
    for (int li = 0; li < 5; li++) { int64_t n = lens[li];
    for (int rep = 0; rep < 40; rep++) {
      float *xf = malloc(n * 4); double *y = malloc(n*8), *rf = malloc(n*8);
      for (int64_t i = 0; i < n; i++) xf[i] = (float)(2 * rand() / (double)RAND_MAX - 1);
      ndf_array a = ndf_array_contiguous(NDF_F32, 1, &n, xf);
      const ndf__iir *fp[1] = {&f};
      ndf_ref_iir_gaussian(&a, rf, fp);
      twin_f32(g, xf, y, n);
      double mag = 0; for (int64_t i = 0; i < n; i++) mag = fmax(mag, fabs(rf[i]));
      for (int64_t i = 0; i < n; i++) if (fabs(y[i]-rf[i])/mag > w) w = fabs(y[i]-rf[i])/mag, wn = n;
      free(xf); free(y); free(rf);
    }}
    printf("m %d K %d sigma %5g: float32 recursions %.2e (n %lld)\n", cs[q].m, cs[q].K, cs[q].s, w, (long long)wn);
  }
}
