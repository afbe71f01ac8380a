/* SPDX-License-Identifier: BSD-3-Clause */
/* ref.h - float64 reference implementations, slow on purpose: the test oracle. */
#ifndef NDF_REF_H
#define NDF_REF_H

#include "../core/iir.h"
#include "ndf.h"

/* All take a host input of any dtype and write a C-contiguous double array of
 * the input's shape. Definitions are scipy.ndimage's. */

/* correlate1d along axis (0 <= axis < ndim) with n weights and origin. */
void ndf_ref_correlate1d(const ndf_array *in, double *out, const double *w, int64_t n, int axis,
                         ndf_mode mode, double cval, int origin);

/* convolve1d: scipy's definition through correlate1d (weights reversed,
 * origin negated, minus one more for an even count). */
void ndf_ref_convolve1d(const ndf_array *in, double *out, const double *w, int64_t n, int axis,
                        ndf_mode mode, double cval, int origin);

/* Dense N-D correlate (scipy.ndimage.correlate; convolve when `convolve`):
 * w has in->ndim axes of extent wshape[d] (C order); mode[d] and origin[d]
 * per axis (origin NULL for zeros). Weights of magnitude <= DBL_EPSILON are
 * left out, as scipy's footprint does. out: contiguous. */
void ndf_ref_correlate(const ndf_array *in, double *out, const double *w, const int64_t *wshape,
                       const ndf_mode *mode, double cval, const int *origin, int convolve);

/* Separable filter: correlate1d (convolve1d if convolve) along each axis d
 * with n[d] > 0 weights w[d], mode[d] and origin[d], in increasing axis
 * order, all in float64. */
void ndf_ref_sepfilter(const ndf_array *in, double *out, const double *const *w, const int64_t *n,
                       const ndf_mode *mode, double cval, const int *origin, int convolve);

/* gaussian_filter1d's correlate-form weights (2 radius + 1 of them) for
 * order 0, 1 or 2, from the closed-form derivatives of the Gaussian (scipy
 * builds them by a polynomial recurrence instead): returns 0, or -1 for
 * another order. */
int ndf_ref_gaussian_kernel(double sigma, int order, int radius, double *w);

/* The recursive Gaussian of core/iir.h: along each axis d with f[d] != NULL, in increasing axis
 * order, the recursions of f[d] over every line continued by its end values ('nearest'). It
 * shares the filters' coefficients with the solvers but not their boundary handling: each line
 * is extended on both sides until the recursion's memory has died (its impulse response below
 * 1e-20 of its peak), both passes start from the steady state of the extension's end value,
 * and the middle is kept; no Triggs-Sdika start. The recursions run in long double (the only
 * reference here that does): over the long extensions the direct form's rounding, amplified by
 * 1 / |1 + sum a|, left float64 up to 7e-6 off at sigma 1000. The output is float64. */
void ndf_ref_iir_gaussian(const ndf_array *in, double *out, const ndf__iir *const *f);

/* Kernel superposition (ndf.h, "ks") by its definition: for every pair of pixels in range, the
 * product over axes of the pixel-integrated Gaussian, erf evaluated per tap. sigma: nsig host
 * maps (1, or in->ndim) of in's shape; index_output: Eq. 2b (else 2a); full: the output is in's
 * shape plus 2 R per axis (R: ndf_ref_ks_margin), else in's; returns nothing, writes out
 * (C-contiguous float64 of the output's shape). */
void ndf_ref_ks(const ndf_array *in, const ndf_array *sigma, int nsig, int index_output,
                double n_sigma, int full, int normalize, double *out);
/* The largest ceil(n_sigma * s) over the maps. */
int64_t ndf_ref_ks_margin(const ndf_array *in, const ndf_array *sigma, int nsig, double n_sigma);

#endif
