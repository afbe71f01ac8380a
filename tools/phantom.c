/* SPDX-License-Identifier: BSD-3-Clause */
/* phantom.c - modified 3-D Shepp-Logan phantom (ten ellipsoids) with Gaussian noise. */
#include "phantom.h"

#include <math.h>

double ndf_rand_uniform(uint64_t *s) {
  uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-52 - 1.0;
}

double ndf_rand_normal(uint64_t *s) {
  double u = 0.5 * (ndf_rand_uniform(s) + 1.0), v = 0.5 * (ndf_rand_uniform(s) + 1.0);
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* density, semi-axes (a, b, c) along (x, y, z), centre, rotation about z (deg) */
static const double ellipsoids[10][8] = {
    {1.0, 0.6900, 0.920, 0.810, 0.00, 0.0000, 0.00, 0},
    {-0.8, 0.6624, 0.874, 0.780, 0.00, -0.0184, 0.00, 0},
    {-0.2, 0.1100, 0.310, 0.220, 0.22, 0.0000, 0.00, -18},
    {-0.2, 0.1600, 0.410, 0.280, -0.22, 0.0000, 0.00, 18},
    {0.1, 0.2100, 0.250, 0.410, 0.00, 0.3500, -0.15, 0},
    {0.1, 0.0460, 0.046, 0.050, 0.00, 0.1000, 0.25, 0},
    {0.1, 0.0460, 0.046, 0.050, 0.00, -0.1000, 0.25, 0},
    {0.1, 0.0460, 0.023, 0.050, -0.08, -0.6050, 0.00, 0},
    {0.1, 0.0230, 0.023, 0.020, 0.00, -0.6060, 0.00, 0},
    {0.1, 0.0230, 0.046, 0.020, 0.06, -0.6050, 0.00, 0},
};

void ndf_phantom3d(float *v, int64_t nz, int64_t ny, int64_t nx, double noise, uint64_t seed) {
#pragma omp parallel for schedule(static)
  for (int64_t z = 0; z < nz; z++) {
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + (uint64_t)z * 0xBF58476D1CE4E5B9ull + 1;
    double pz = nz > 1 ? 2.0 * (double)z / (double)(nz - 1) - 1.0 : 0.0;
    for (int64_t y = 0; y < ny; y++) {
      double py = ny > 1 ? 1.0 - 2.0 * (double)y / (double)(ny - 1) : 0.0;
      for (int64_t x = 0; x < nx; x++) {
        double px = nx > 1 ? 2.0 * (double)x / (double)(nx - 1) - 1.0 : 0.0, s = 0;
        for (int e = 0; e < 10; e++) {
          const double *E = ellipsoids[e];
          double ph = E[7] * 3.141592653589793 / 180.0, c = cos(ph), sn = sin(ph);
          double dx = px - E[4], dy = py - E[5], dz = pz - E[6];
          double rx = c * dx + sn * dy, ry = -sn * dx + c * dy;
          if (rx * rx / (E[1] * E[1]) + ry * ry / (E[2] * E[2]) + dz * dz / (E[3] * E[3]) <= 1)
            s += E[0];
        }
        v[(z * ny + y) * nx + x] = (float)(s + noise * ndf_rand_normal(&rng));
      }
    }
  }
}
