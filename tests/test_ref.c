/* SPDX-License-Identifier: BSD-3-Clause */
/* test_ref.c - the float64 reference against scipy.ndimage outputs (tests/golden_scipy.h). */
#include "common.h"
#include "golden_scipy.h"
#include "ref/ref.h"

static double maxdiff(const double *a, const double *b, int n) {
  double m = 0;
  for (int i = 0; i < n; i++)
    m = fmax(m, fabs(a[i] - b[i]));
  return m;
}

int main(void) {
  double y[20];
  int n1 = (int)(sizeof golden1d / sizeof golden1d[0]);
  for (int k = 0; k < n1; k++) {
    const g1d *g = &golden1d[k];
    int64_t shape[1] = {g->len};
    ndf_array x = ndf_array_contiguous(NDF_F64, 1, shape, (void *)g->x);
    if (g->conv)
      ndf_ref_convolve1d(&x, y, g->w, g->n, 0, g->mode, G_CVAL, g->origin);
    else
      ndf_ref_correlate1d(&x, y, g->w, g->n, 0, g->mode, G_CVAL, g->origin);
    double e = maxdiff(y, g->y, g->len);
    CHECK(e < 1e-12,
          "1-D case %d (%s len=%d n=%d origin=%d mode=%s): off by %g (got %g, scipy %g at 0)", k,
          g->conv ? "convolve" : "correlate", g->len, g->n, g->origin, ndf_mode_name(g->mode), e,
          y[0], g->y[0]);
  }
  int64_t s2[2] = {5, 4};
  ndf_array x2 = ndf_array_contiguous(NDF_F64, 2, s2, (void *)golden_x2);
  int n2 = (int)(sizeof golden2d / sizeof golden2d[0]);
  for (int k = 0; k < n2; k++) {
    const g2d *g = &golden2d[k];
    int64_t ks[2] = {g->kh, g->kw};
    int origin[2] = {g->o0, g->o1};
    const ndf_mode modes[2] = {g->mode, g->mode};
    ndf_ref_correlate(&x2, y, g->k, ks, modes, G_CVAL, origin, g->conv);
    double e = maxdiff(y, g->y, 20);
    CHECK(e < 1e-9, "2-D %s case %d (kernel %dx%d origin %d,%d mode %s): off by %g",
          g->conv ? "convolve" : "correlate", k, g->kh, g->kw, g->o0, g->o1, ndf_mode_name(g->mode),
          e);
  }
  const double w4[4] = {1.0, -2.0, 0.5, 3.0};
  for (int m = 0; m < 5; m++) {
    ndf_ref_correlate1d(&x2, y, w4, 4, 0, m, G_CVAL, 1);
    CHECK(maxdiff(y, golden_axis0[m], 20) < 1e-12, "axis-0 correlate1d, mode %s", ndf_mode_name(m));
  }
  /* Gaussian kernels: the reference's closed forms (orders <= 2) and the
   * library's recurrence (any order) against scipy's gaussian_filter1d. */
  int ng = (int)(sizeof golden_gkern / sizeof golden_gkern[0]);
  for (int k = 0; k < ng; k++) {
    const gkern *g = &golden_gkern[k];
    double w[25];
    int n = 2 * g->radius + 1;
    if (g->order <= 2) {
      CHECK(ndf_ref_gaussian_kernel(g->sigma, g->order, g->radius, w) == 0, "ref kernel");
      CHECK(maxdiff(w, g->w, n) < 1e-15, "ref Gaussian kernel sigma %g order %d: off by %g",
            g->sigma, g->order, maxdiff(w, g->w, n));
    }
    CHECK(ndf_gaussian_kernel1d(g->sigma, g->order, g->radius, w) == NDF_OK, "library kernel");
    CHECK(maxdiff(w, g->w, n) < 1e-15, "ndf_gaussian_kernel1d sigma %g order %d: off by %g",
          g->sigma, g->order, maxdiff(w, g->w, n));
  }
  /* gaussian_filter on x2: the reference's separable chain with its kernels. */
  int ngf = (int)(sizeof golden_gauss / sizeof golden_gauss[0]);
  for (int k = 0; k < ngf; k++) {
    const ggauss *g = &golden_gauss[k];
    double wk[2][64];
    const double *wp[2] = {wk[0], wk[1]};
    int64_t n[2] = {0, 0};
    ndf_mode modes[2] = {g->mode[0], g->mode[1]};
    int origin[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
      if (g->sigma[d] <= 1e-15) continue;
      int r = (int)(g->truncate * g->sigma[d] + 0.5);
      n[d] = 2 * r + 1;
      ndf_ref_gaussian_kernel(g->sigma[d], g->order[d], r, wk[d]);
    }
    ndf_ref_sepfilter(&x2, y, wp, n, modes, G_CVAL, origin, 0);
    CHECK(maxdiff(y, g->y, 20) < 1e-12, "gaussian_filter case %d: off by %g", k,
          maxdiff(y, g->y, 20));
  }
  printf("%d 1-D, %d 2-D, 5 axis-0, %d Gaussian kernel and %d gaussian_filter cases against scipy: "
         "%d failures\n",
         n1, n2, ng, ngf, t_failures);
  return t_failures ? 1 : 0;
}
