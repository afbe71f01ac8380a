/* SPDX-License-Identifier: BSD-3-Clause */
/* ks_weight.h - Eq. 4 of the kernel superposition (ndf.h, "ks") in float32, the one formula the
 * CUDA solvers use (ks_kernel.cu), kept here so that tests can check it on any machine.
 *
 * k(d, s) = (erf((d + 1/2) c) - erf((d - 1/2) c)) / 2, c = 1 / (sqrt(2) s), for |d| <= r. A
 * difference of two erf values loses float32 digits when they are close: near the centre at
 * large sigma, and in the tails (near 1). So:
 *  - c <= 1/2 (sigma >= 1.42): k = (1 / sqrt(pi)) * integral of exp(-t^2) over [(d - 1/2) c,
 *    (d + 1/2) c], by 3-point Gauss-Legendre (exact for degree 5; the error is below 1e-9 of
 *    the kernel's mass at c = 1/2 and falls as c^7);
 *  - else the erf difference, or the erfc difference where (d - 1/2) c >= 1 (the tails).
 * scale: 1, or normalize's 1 / erf((r + 1/2) c), made by the caller in float64. */
#ifndef NDF_KS_WEIGHT_H
#define NDF_KS_WEIGHT_H

#include <math.h>

#ifdef __CUDACC__
#define NDF__HD __host__ __device__ __forceinline__
#else
#define NDF__HD static inline
#endif

NDF__HD float ndf__ks_weight(int d, float s, int r, float scale) {
  d = d < 0 ? -d : d;
  if (d > r) return 0.f;
  if (s == 0.f) return d == 0 ? scale : 0.f;
  const float c = 0.70710678118654752f / s;
  float k;
  if (c <= 0.5f) {
    const float m = (float)d * c, h = 0.38729833462074169f * c; /* c/2 sqrt(3/5) */
    const float e0 = expf(-(m - h) * (m - h)), e1 = expf(-m * m), e2 = expf(-(m + h) * (m + h));
    k = 0.28209479177387814f * c * (5.f / 9.f * (e0 + e2) + 8.f / 9.f * e1); /* c/2 / sqrt(pi) */
  } else if (d == 0) {
    k = erff(0.5f * c);
  } else if ((d - 0.5f) * c >= 1.f) {
    k = 0.5f * (erfcf((d - 0.5f) * c) - erfcf((d + 0.5f) * c));
  } else {
    k = 0.5f * (erff((d + 0.5f) * c) - erff((d - 0.5f) * c));
  }
  return k * scale;
}

/* The weights k(0) .. k(n - 1) of one sigma at once, for the scatters (which need them all):
 * k(d) = (erfc((d - 1/2) c) - erfc((d + 1/2) c)) / 2 for d >= 1, k(0) = erf(c / 2), so each
 * erfc value serves two weights: one erfcf a weight, where ndf__ks_weight spends two erff or
 * three expf. Zero past r. Each weight is off by under about 1e-7 (erfcf's error near 1: a
 * weight's relative error grows with sigma, to ~1e-5 at sigma 20, the largest a scatter's
 * radius bucket holds), and the tails keep their relative accuracy (erfc, not erf). */
NDF__HD void ndf__ks_weights(float s, int r, float scale, int n, float *k) {
  if (s == 0.f) {
    for (int d = 0; d < n; d++)
      k[d] = d == 0 ? scale : 0.f;
    return;
  }
  const float c = 0.70710678118654752f / s;
  float e = erfcf(0.5f * c);
  k[0] = erff(0.5f * c) * scale;
  for (int d = 1; d < n; d++) {
    const float e1 = erfcf(((float)d + 0.5f) * c);
    k[d] = d <= r ? 0.5f * (e - e1) * scale : 0.f;
    e = e1;
  }
}

#endif
