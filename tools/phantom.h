/* SPDX-License-Identifier: BSD-3-Clause */
/* phantom.h - the demo's test volume: a noisy 3-D Shepp-Logan head phantom. */
#ifndef NDF_PHANTOM_H
#define NDF_PHANTOM_H

#include <stdint.h>

/* Fills v (nz*ny*nx floats, C order) with the modified 3-D Shepp-Logan
 * phantom plus Gaussian noise of standard deviation `noise` (seeded, so the
 * same arguments give the same volume). */
void ndf_phantom3d(float *v, int64_t nz, int64_t ny, int64_t nx, double noise, uint64_t seed);

/* Deterministic uniform numbers in [-1, 1) for tests: xorshift64*. */
double ndf_rand_uniform(uint64_t *state);
double ndf_rand_normal(uint64_t *state);

#endif
