/* SPDX-License-Identifier: BSD-3-Clause */
/* iir.h - recursive (IIR) Gaussian smoothing along one axis: the filters' design and the
 * float64 line filter every IIR solver follows (the GPU and CPU designs after Cong, Huang and
 * Zou, "3D Recursive Gaussian IIR on GPUs and FPGAs").
 *
 * Every method filters a line x[0..n-1] with the 'nearest' boundary (x[i] = x[0] for i < 0,
 * x[n-1] for i >= n) exactly: the recursions start from the state an infinitely long constant
 * extension would leave, so only the approximation of the Gaussian itself is inexact.
 *
 * Two forms:
 *  - cascade (iir_alvarez, iir_vyv): a causal then an anticausal all-pole pass,
 *      causal      u[i] = b0 x[i] - sum_{j=1..K} a[j-1] u[i-j],     u[-j] = x[0]
 *      anticausal  v[i] = b0 u[i] - sum_{j=1..K} a[j-1] v[i+j],
 *    with unit DC gain: b0 = 1 + sum a of the a as rounded (summed in long double, where it is
 *    exact; in double it cancels when the poles are near 1, at large sigma), not prod (1 - p_k)
 *    of the poles before rounding, so that x[0] is the steady state of the recursion actually
 *    run. The anticausal pass starts from Triggs and Sdika's
 *    initial values: with d[m] = u[n-1-m] - x[n-1] (m < K; u[i] for i < 0 is x[0]),
 *      v[n-1-r] = x[n-1] + sum_m M[r*K + m] d[m]   for r < K,
 *    M computed from a and b0 (what the causal pass would still produce past the end, fed
 *    through the anticausal pass), then the recursion runs from i = n-1-K down to 0.
 *  - parallel (iir_deriche): y = yp + ym, both from the input:
 *      yp[i] = sum_{j=0..K-1} bp[j] x[i-j] - sum_{j=1..K} a[j-1] yp[i-j],  yp[-j] = gp x[0]
 *      ym[i] = sum_{j=1..K} bm[j-1] x[i+j] - sum_{j=1..K} a[j-1] ym[i+j],  ym[n-1+j] = gm x[n-1]
 *    with gp = sum bp / (1 + sum a), gm = sum bm / (1 + sum a) of the coefficients as rounded
 *    (in long double), the recursions' own steady states. (Their DC gain gp + gm is 1 only
 *    within the rounding of bp, bm and a relative to 1 + sum a: 1 + 1.2e-5 at sigma 1000.)
 *
 * Design (ndf__iir_design), sigma in samples:
 *  - iir_alvarez (Alvarez and Mazorra 1994; Cong et al.'s Figs 1-2), `order` = steps S, 1..5:
 *    each step is one implicit Euler step of the heat equation, (I - lambda Laplacian) u = f,
 *    with lambda = sigma^2 / (2 S) (the step's Green's function has variance 2 lambda, S steps
 *    add to sigma^2). Factoring (1 + 2 lambda) - lambda (z + 1/z) = (lambda / nu)(1 - nu/z)
 *    (1 - nu z) gives nu = (1 + 2 lambda - sqrt(1 + 4 lambda)) / (2 lambda). Cong et al.'s c2 is
 *    nu, their c1 = 1 / (1 - nu) the causal start (the steady state of a constant history), their
 *    scaling c3 = (nu / lambda)^(S * axes) is b0^2 per axis here, with nu / lambda = (1 - nu)^2.
 *    Cong et al. run the S steps one after the other, each starting from its own input's end
 *    values; that is exact for 'nearest' only for S = 1 (an earlier step's output past the end
 *    is not constant). Here the S causal sweeps are one recursion of order K = S (the pole nu
 *    S times, b0 = (1 - nu)^S up to rounding) and the S anticausal sweeps the other, started
 *    Triggs-Sdika's way, so the boundary is exact. Same operator, same sweeps per step.
 *  - iir_vyv (Young and van Vliet 1995, Young, van Vliet and van Ginkel 2002), `order` K in 3..5:
 *    Getreuer's optimised poles for sigma = 2 (IPOL 2013), raised to the power 1/q with q found
 *    by Newton's method so that the filter's variance, sum_k 2 d_k / (d_k - 1)^2, is sigma^2
 *    exactly; a from the expanded product of (1 - z^-1 / d_k).
 *  - iir_deriche (Deriche 1993), K = 4: the impulse response h(t) = (a0 cos(w0 t/s) + a1
 *    sin(w0 t/s)) e^(-b0 t/s) + (c0 cos(w1 t/s) + c1 sin(w1 t/s)) e^(-b1 t/s) with Deriche's
 *    constants, as four complex poles p and residues r (h(t) = sum r p^t, t >= 0); the causal
 *    part takes t >= 0, the anticausal t >= 1, normalised so that sum_t h(|t|) = 1.
 */
#ifndef NDF_IIR_H
#define NDF_IIR_H

#include <stdint.h>

#include "ndf.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NDF__IIR_MAXK 5

typedef enum {
  NDF__IIR_ALVAREZ = 0,
  NDF__IIR_DERICHE,
  NDF__IIR_VYV,
  NDF__IIR_NMETHODS
} ndf__iir_method;
typedef enum { NDF__IIR_CASCADE = 0, NDF__IIR_PARALLEL } ndf__iir_form;

typedef struct ndf__iir {
  ndf__iir_method method;
  ndf__iir_form form;
  int K; /* recursion order, 1..NDF__IIR_MAXK */
  double sigma;
  double a[NDF__IIR_MAXK]; /* a[j-1] multiplies the output j samples back (forward) */
  double b0;               /* cascade: numerator, 1 + sum a (exact, long double) */
  double M[NDF__IIR_MAXK * NDF__IIR_MAXK]; /* cascade: Triggs-Sdika, row-major K x K */
  double bp[NDF__IIR_MAXK];                /* parallel: causal numerator on x[i], x[i-1], ... */
  double bm[NDF__IIR_MAXK]; /* parallel: anticausal numerator on x[i+1], x[i+2], ... */
  double gp, gm;            /* parallel: steady-state gains of the two parts */
  /* the same filter as npar first-order complex recursions, h(t) = sum_k Re(res[k] pole[k]^t)
   * for t >= 0 over its real poles and those of positive imaginary part ({re, im} pairs; res
   * includes a conjugate's half and the normalisation); npar 0 where that takes more than two
   * recursions or the poles repeat. Deriche: 2; a cascade keeps its own here for its parallel
   * twin (ndf__iir_parallel_twin): VYV of order 3 or 4, one Alvarez step. */
  double pole[2][2], res[2][2];
  int npar;
} ndf__iir;

/* Method names: "iir_alvarez", "iir_deriche", "iir_vyv"; -1 if none. */
int ndf__iir_method_parse(const char *name);
const char *ndf__iir_method_name(ndf__iir_method m);
/* The default order of a method (0 in ndf_gaussian_opts.iir_order): Alvarez 3 steps, Deriche 4,
 * VYV 3. */
int ndf__iir_default_order(ndf__iir_method m);

/* Designs the filter; NDF_EINVAL (and a message in why[len]) for an order the method lacks or
 * a sigma it cannot reach (sigma must be > 0 and finite; VYV needs sigma >= 0.5). */
ndf_status ndf__iir_design(ndf__iir *f, ndf__iir_method m, int order, double sigma, char *why,
                           int len);

/* The parallel form of cascade f, where it has one (npar: iir_vyv of order 3 or 4, iir_alvarez
 * of one step), in *tw, returning 1; else 0. Both filter a line to the same result up to
 * rounding: each is the doubly infinite filter on the line's constant extension (the cascade
 * through Triggs-Sdika's start, the parallel form through its steady states). cuda_iir runs
 * the twin, so that these take its chunked and tensor-core passes. */
int ndf__iir_parallel_twin(const ndf__iir *f, ndf__iir *tw);

/* Whether cascade f is to run as its parallel twin (in *tw, returning 1) for accuracy, whatever
 * the solver (ndf_plan_gaussian's problem carries the twin then): iir_vyv of order 4 past sigma 64
 * and of order 3 past 300. There the cascade's float64 rounding (the direct form of poles near 1,
 * and Triggs-Sdika's start) grows fast. Against the long double reference (ref.h), on random
 * lines of 16 to 5000 samples: order 4 up to 2.8e-7 at sigma 64, 1.2e-6 at 80 and 6.9e-6 at
 * 100; order 3 3.3e-8 at 300, 1.3e-6 at 600, 1.05e-5 at 1000 and 2.2e-4 at 3000. The twin's
 * float64 direct form stays within 4.3e-9 (order 4 to sigma 100), 4.9e-8 (order 3 at 1000) and
 * 1.4e-6 (3000). The other cascades run as they are: within 3.8e-7 up to sigma 1000 (iir_vyv of
 * order 5 to its 20, iir_alvarez's steps to theirs). */
int ndf__iir_twin_for_accuracy(const ndf__iir *f, ndf__iir *tw);

/* iir_alvarez of S = 2 to 4 steps as S first-order sections, the first on x, each next on the
 * one before, w_m[i] = nu w_m[i-1] + (1 - nu) w_(m-1)[i] (w_0 = x), whose causal part is
 * sum_m c[m-1] w_m and whose anticausal part is that mirrored, t = 0 counted once: h(t) =
 * sum_m c[m-1] (1 - nu)^m C(|t| + m - 1, m - 1) nu^|t|. A pole repeated has no first-order
 * complex form, but these sections have their own, well scaled, chunked state (cuda_iir's
 * tensor-core passes). Returns S, with nu and c[0..S-1]; else 0. */
int ndf__iir_sections(const ndf__iir *f, double *nu, double *c);

/* Filters x[0..n-1] in place ('nearest' boundary). tmp: n doubles (the parallel form's input
 * copy); unused by the cascade form (may be NULL). */
void ndf__iir_line(const ndf__iir *f, double *x, int64_t n, double *tmp);

#ifdef __cplusplus
}
#endif

#endif
