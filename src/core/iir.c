/* SPDX-License-Identifier: BSD-3-Clause */
/* iir.c - design of the recursive Gaussian filters and the float64 line filter (iir.h says
 * what each method is and how its boundary is started). */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "iir.h"

static const char *const names[NDF__IIR_NMETHODS] = {"iir_alvarez", "iir_deriche", "iir_vyv"};

int ndf__iir_method_parse(const char *name) {
  for (int m = 0; name && m < NDF__IIR_NMETHODS; m++)
    if (!strcmp(name, names[m])) return m;
  return -1;
}

const char *ndf__iir_method_name(ndf__iir_method m) {
  return m >= 0 && m < NDF__IIR_NMETHODS ? names[m] : "?";
}

int ndf__iir_default_order(ndf__iir_method m) {
  return m == NDF__IIR_ALVAREZ ? 3 : m == NDF__IIR_DERICHE ? 4 : 3;
}

/* Pushes v onto a recursion's state h[0..K-1] (h[0]: the newest). */
static inline void push(double *h, int K, double v) {
  for (int j = K - 1; j > 0; j--)
    h[j] = h[j - 1];
  h[0] = v;
}

/* a[0..K-1] of prod_k (1 - p_k z^-1) = 1 + a[0] z^-1 + ... (real for conjugate pairs). */
static void expand(const double complex *p, int K, double *a) {
  double complex c[NDF__IIR_MAXK + 1] = {1};
  for (int k = 0; k < K; k++)
    for (int j = k + 1; j >= 1; j--)
      c[j] -= p[k] * c[j - 1];
  for (int j = 1; j <= K; j++)
    a[j - 1] = creal(c[j]);
}

/* The cascade's b0: 1 + sum a of the coefficients as rounded, so that each pass of the recursion
 * actually run has DC gain 1 and the steady state of a constant x is x itself, where every
 * solver starts it (iir.h). prod (1 - p_k), the gain of the poles before rounding, is off from
 * it by the rounding of a relative to 1 + sum a: 2.3e-8 for Alvarez's 3 steps at sigma 1000,
 * 4.6e-8 for VYV's order 3, so solvers starting from it would be that far from the recursion's
 * own steady state, and a short line would keep the offset. The sum, in long double, is exact
 * where it cancels, the poles near 1 (the a are then multiples of 2^-53 below 2^4 in magnitude:
 * 58 bits of the 64; seen exact for every design above sigma 1.6) and within 1e-19 relative
 * below. */
static void unit_gain(ndf__iir *f) {
  long double sa = 1;
  for (int j = 0; j < f->K; j++)
    sa += f->a[j];
  f->b0 = (double)sa;
}

/* Triggs-Sdika's M: column m is the anticausal start that a causal deviation of 1 at u[n-1-m]
 * (the others 0, the input constant past the end) produces. The anticausal pass is
 * v[i] = b0 sum_{t>=0} h[t] u[i+t], h the impulse response of 1 / (1 + sum a_j z^-j); past the
 * end u continues as the causal recursion with no input, so both sequences run forward together
 * until they have decayed. In long double: with poles near 1 the terms grow like t^(K-1)
 * before they decay, and the float64 sums lost up to 3e-3 of the result to cancellation (5
 * Alvarez steps at sigma 100). (The closed form M = b0 (I + sum_j a_j A^j)^-1, A the causal
 * recursion's companion matrix, agrees to 1e-15 at small sigma but is worse conditioned still:
 * the poles are nearly repeated.) */
static inline void push_l(long double *h, int K, long double v) {
  for (int j = K - 1; j > 0; j--)
    h[j] = h[j - 1];
  h[0] = v;
}

static void triggs_sdika(ndf__iir *f) {
  const int K = f->K;
  for (int m = 0; m < K; m++) {
    long double win[NDF__IIR_MAXK]; /* u deviations at t, t-1, ..., t-K+1 (t = 0: n-1) */
    long double hs[NDF__IIR_MAXK] = {0}, S[NDF__IIR_MAXK] = {0};
    for (int j = 0; j < K; j++)
      win[j] = j == m;
    for (int64_t t = 0; t < 100000000; t++) {
      long double h = t == 0 ? 1.0L : 0.0L, mx = 0;
      for (int j = 0; j < K; j++)
        h -= f->a[j] * hs[j];
      push_l(hs, K, h);
      for (int r = 0; r < K; r++) /* v at n-1-r sees u at n-1-r+t: win[r] */
        S[r] += h * win[r];
      long double u = 0;
      for (int j = 0; j < K; j++)
        u -= f->a[j] * win[j];
      push_l(win, K, u);
      for (int j = 0; j < K; j++)
        mx = fmaxl(mx, fmaxl(fabsl(hs[j]), fabsl(win[j])));
      if (t > K && mx < 1e-24L) break;
    }
    for (int r = 0; r < K; r++)
      f->M[r * K + m] = (double)(f->b0 * S[r]);
  }
}

/* sum over t of h(|t|) for h(t) = sum_k r_k p_k^t (t >= 0), K poles p: h's sum, to scale by. */
static double sum_of(const double complex *p, const double complex *r, int K) {
  double complex total = 0;
  for (int k = 0; k < K; k++)
    total += r[k] * (1 + p[k]) / (1 - p[k]);
  return creal(total);
}

/* pole / res and npar (iir.h) of that h scaled by 1 / S: a real pole, or the upper one of a
 * conjugate pair with twice its part; npar 0 (pole, res zero) past two recursions. */
static void recursions_of(ndf__iir *f, const double complex *p, const double complex *r, int K,
                          double S) {
  int n = 0;
  for (int k = 0; k < K; k++)
    n += cimag(p[k]) >= 0;
  memset(f->pole, 0, sizeof f->pole);
  memset(f->res, 0, sizeof f->res);
  f->npar = 0;
  if (n > 2) return;
  for (int k = 0; k < K; k++) {
    if (cimag(p[k]) < 0) continue;
    const double w = cimag(p[k]) > 0 ? 2 : 1;
    f->pole[f->npar][0] = creal(p[k]);
    f->pole[f->npar][1] = cimag(p[k]);
    f->res[f->npar][0] = w * creal(r[k]) / S;
    f->res[f->npar][1] = w * cimag(r[k]) / S;
    f->npar++;
  }
}

/* The parallel form (iir.h) of h(t) = sum_k r_k p_k^|t| over K distinct poles p (a conjugate
 * pair's residues conjugate), scaled to unit sum: a, bp, bm, gp, gm, and pole / res / npar. */
static void parallel_of(ndf__iir *f, const double complex *p, const double complex *r, int K) {
  expand(p, K, f->a);
  double complex np[NDF__IIR_MAXK] = {0}, nm[NDF__IIR_MAXK + 1] = {0};
  for (int k = 0; k < K; k++) {
    /* prod_{m != k} (1 - p_m z^-1): coefficients c[0..K-1] */
    double complex c[NDF__IIR_MAXK] = {1};
    int deg = 0;
    for (int m = 0; m < K; m++) {
      if (m == k) continue;
      deg++;
      for (int j = deg; j >= 1; j--)
        c[j] -= p[m] * c[j - 1];
    }
    for (int j = 0; j < K; j++) {
      np[j] += r[k] * c[j];            /* causal: x[i-j] */
      nm[j + 1] += r[k] * p[k] * c[j]; /* anticausal: z^(j+1), x[i+j+1] */
    }
  }
  const double S = sum_of(p, r, K);
  recursions_of(f, p, r, K, S);
  /* The steady states of the coefficients as rounded, sums in long double: sum bp cancels to
   * 1.2e-11 from terms near 1e-3 at sigma 1000, and in double it came out 4.4e-9 off there (so
   * did gp, and the causal start with it); in long double these sums are exact. */
  long double sa = 1, sp = 0, sm = 0;
  for (int j = 0; j < K; j++) {
    f->bp[j] = creal(np[j]) / S;
    f->bm[j] = creal(nm[j + 1]) / S;
    sa += f->a[j];
    sp += f->bp[j];
    sm += f->bm[j];
  }
  f->gp = (double)(sp / sa);
  f->gm = (double)(sm / sa);
}

/* A cascade's own poles and residues, kept in pole / res (npar) for its parallel twin: with
 * A(z) = prod_k (1 - p_k z^-1), the cascade is b0^2 / (A(z) A(1/z)), whose response for t >= 0
 * is sum_k r_k p_k^t, r_k = b0^2 p_k^(K-1) / (prod_{j != k} (p_k - p_j) prod_j (1 - p_j p_k))
 * (the residue at z = p_k of the transform times z^(t-1)); b0^2 drops out with the scaling to
 * unit sum. Only distinct poles have this form (one Alvarez step, not two or more). */
static void keep_poles(ndf__iir *f, const double complex *p, int K) {
  double complex r[NDF__IIR_MAXK];
  for (int k = 0; k < K; k++) {
    double complex d = 1;
    for (int j = 1; j < K; j++)
      d *= p[k];
    for (int j = 0; j < K; j++)
      d /= (j == k ? 1 : p[k] - p[j]) * (1 - p[j] * p[k]);
    r[k] = d;
  }
  recursions_of(f, p, r, K, sum_of(p, r, K));
}

int ndf__iir_parallel_twin(const ndf__iir *f, ndf__iir *tw) {
  if (f->form != NDF__IIR_CASCADE || !f->npar) return 0;
  double complex p[NDF__IIR_MAXK] = {0}, r[NDF__IIR_MAXK] = {0};
  int K = 0;
  for (int i = 0; i < f->npar; i++) {
    const double complex pi = f->pole[i][0] + I * f->pole[i][1],
                         ri = f->res[i][0] + I * f->res[i][1];
    if (f->pole[i][1] == 0) {
      p[K] = pi, r[K++] = ri;
    } else {
      p[K] = pi, r[K++] = ri / 2;
      p[K] = conj(pi), r[K++] = conj(ri) / 2;
    }
  }
  if (K != f->K) return 0;
  memset(tw, 0, sizeof *tw);
  tw->method = f->method;
  tw->form = NDF__IIR_PARALLEL;
  tw->K = K;
  tw->sigma = f->sigma;
  parallel_of(tw, p, r, K);
  return 1;
}

int ndf__iir_twin_for_accuracy(const ndf__iir *f, ndf__iir *tw) {
  return f->method == NDF__IIR_VYV && f->sigma > (f->K == 4 ? 64 : 300) &&
         ndf__iir_parallel_twin(f, tw);
}

/* iir_alvarez's pole for sigma and S steps (iir.h). */
static double alvarez_nu(double sigma, int S) {
  const double lambda = sigma * sigma / (2.0 * S);
  return (1 + 2 * lambda - sqrt(1 + 4 * lambda)) / (2 * lambda);
}

/* The pole nu repeated S times: h(t) = sum_m A_m C(|t| + m - 1, m - 1) nu^|t| for every t
 * (the causal partial fractions A_m / (1 - nu z^-1)^m, their anticausal mirror and a constant
 * -sum A_m, so that t = 0 counts once). With u = 1 - nu z^-1 the filter is b0^2 (1 - u)^S /
 * (u^S (1 - nu^2 - u)^S), b0 = (1 - nu)^S, whose Laurent series f_k u^(k - S) at u = 0 gives
 * A_m = f_(S - m). Section m's output, scaled to unit gain, is (1 - nu)^m times the m-fold
 * recursion's, so its weight is A_m / (1 - nu)^m. In long double; all the weights are
 * positive (S 2..4, sigma 1 to 256: 0.02 to 0.73), so their sum does not cancel. */
int ndf__iir_sections(const ndf__iir *f, double *nu, double *c) {
  const int S = f->K;
  if (f->method != NDF__IIR_ALVAREZ || f->form != NDF__IIR_CASCADE || S < 2 || S > 4) return 0;
  const long double v = alvarez_nu(f->sigma, S), q = 1 - v * v, b0 = powl(1 - v, S);
  long double bin[2 * NDF__IIR_MAXK][2 * NDF__IIR_MAXK] = {{0}}; /* binomials */
  for (int n = 0; n < 2 * NDF__IIR_MAXK; n++) {
    bin[n][0] = 1;
    for (int k = 1; k <= n; k++)
      bin[n][k] = bin[n - 1][k - 1] + (k < n ? bin[n - 1][k] : 0);
  }
  for (int m = 1; m <= S; m++) {
    const int k = S - m; /* f_k: (1 - u)^S times (q - u)^-S = sum_j C(S + j - 1, j) q^(-S-j) u^j */
    long double fk = 0;
    for (int i = 0; i <= k; i++)
      fk += (i % 2 ? -1 : 1) * bin[S][i] * bin[S + k - i - 1][k - i] * powl(q, -S - (k - i));
    c[m - 1] = (double)(b0 * b0 * fk / powl(1 - v, m));
  }
  *nu = (double)v;
  return S;
}

/* Getreuer's optimised VYV poles for sigma = 2, K = 3, 4, 5 (upper half plane; conjugates
 * follow a complex pole). */
static const double vyv_poles[3][3][2] = {
    {{1.41650, 1.00829}, {1.86543, 0}, {0, 0}},
    {{1.13228, 1.28114}, {1.78534, 0.46763}, {0, 0}},
    {{0.86430, 1.45389}, {1.61433, 0.83134}, {1.87504, 0}},
};

/* The variance of the symmetric filter with the K poles 1 / d0^(1/q) (Young et al. 2002):
 * sum_k 2 d_k / (d_k - 1)^2 with d_k = d0_k^(1/q). */
static double vyv_variance(const double complex *d0, int K, double q) {
  double var = 0;
  for (int k = 0; k < K; k++) {
    const double complex d = cpow(d0[k], 1.0 / q);
    var += creal(2 * d / ((d - 1) * (d - 1)));
  }
  return var;
}

static ndf_status design_vyv(ndf__iir *f, int K, double sigma, char *why, int len) {
  double complex d0[NDF__IIR_MAXK];
  int n = 0;
  for (int i = 0; i < 3 && n < K; i++) {
    const double re = vyv_poles[K - 3][i][0], im = vyv_poles[K - 3][i][1];
    d0[n++] = re + im * I;
    if (im != 0) d0[n++] = re - im * I;
  }
  /* q such that the variance of the poles d0^(1/q) is sigma^2. The variance grows with q (the
   * poles move towards 1), so bisection on a bracket found by doubling finds it; Newton's
   * method alone overshot to q <= 0 at some sigmas below 1. */
  if (!(sigma >= 0.5)) {
    snprintf(why, (size_t)len,
             "iir_vyv: sigma %g is below 0.5, where its poles stop being "
             "accurate; use iir_deriche or fir",
             sigma);
    return NDF_EINVAL;
  }
  double lo = 0, hi = 1;
  while (vyv_variance(d0, K, hi) < sigma * sigma && hi < 1e12)
    hi *= 2;
  for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; it++) {
    const double mid = 0.5 * (lo + hi);
    if (vyv_variance(d0, K, mid) < sigma * sigma)
      lo = mid;
    else
      hi = mid;
  }
  const double q = 0.5 * (lo + hi);
  if (!(q > 0) || !isfinite(q) || hi >= 1e12) {
    snprintf(why, (size_t)len, "iir_vyv: no filter of order %d reaches sigma %g", K, sigma);
    return NDF_EINVAL;
  }
  double complex p[NDF__IIR_MAXK];
  for (int k = 0; k < K; k++)
    p[k] = 1.0 / cpow(d0[k], 1.0 / q);
  expand(p, K, f->a);
  unit_gain(f);
  keep_poles(f, p, K);
  return NDF_OK;
}

/* Deriche's fourth-order approximation of exp(-t^2 / 2) for t >= 0 (1993). */
static void design_deriche(ndf__iir *f, double sigma) {
  const double A[2] = {1.680, -0.6803}, B[2] = {3.735, -0.2598}, b[2] = {1.783, 1.723},
               w[2] = {0.6318, 1.997};
  double complex p[4], r[4];
  for (int i = 0; i < 2; i++) { /* A cos + B sin = Re((A - iB) e^{iwt}) */
    p[2 * i] = cexp((-b[i] + I * w[i]) / sigma);
    p[2 * i + 1] = conj(p[2 * i]);
    r[2 * i] = (A[i] - I * B[i]) / 2;
    r[2 * i + 1] = conj(r[2 * i]);
  }
  parallel_of(f, p, r, 4);
}

ndf_status ndf__iir_design(ndf__iir *f, ndf__iir_method m, int order, double sigma, char *why,
                           int len) {
  memset(f, 0, sizeof *f);
  if (len > 0) why[0] = 0;
  if (!(sigma > 0) || !isfinite(sigma)) {
    snprintf(why, (size_t)len, "sigma %g must be positive and finite", sigma);
    return NDF_EINVAL;
  }
  if (order == 0) order = ndf__iir_default_order(m);
  f->method = m;
  f->sigma = sigma;
  switch (m) {
  case NDF__IIR_ALVAREZ: {
    if (order < 1 || order > NDF__IIR_MAXK) {
      snprintf(why, (size_t)len, "iir_alvarez: %d steps; 1 to %d are possible", order,
               NDF__IIR_MAXK);
      return NDF_EINVAL;
    }
    /* As VYV's below: the direct form of 4 or 5 poles at one point near 1 loses accuracy (5
     * steps at sigma 100: 1e-4 off the float64 reference near the ends). */
    const double amax = order == 5 ? 50 : 100;
    if (order >= 4 && sigma > amax) {
      snprintf(why, (size_t)len,
               "iir_alvarez: %d steps lose accuracy past sigma %g (asked %g); 3 or fewer "
               "have no such limit",
               order, amax, sigma);
      return NDF_EINVAL;
    }
    const double nu = alvarez_nu(sigma, order);
    double complex p[NDF__IIR_MAXK];
    for (int k = 0; k < order; k++)
      p[k] = nu;
    f->form = NDF__IIR_CASCADE;
    f->K = order;
    expand(p, order, f->a);
    unit_gain(f);
    triggs_sdika(f);
    if (order == 1) keep_poles(f, p, 1);
    return NDF_OK;
  }
  case NDF__IIR_VYV: {
    if (order < 3 || order > 5) {
      snprintf(why, (size_t)len, "iir_vyv: order %d; 3, 4 and 5 are possible", order);
      return NDF_EINVAL;
    }
    /* The direct-form recursion of K clustered poles near 1 loses accuracy as sigma grows
     * (relative L2 error on noise, float64: K = 5 9e-3 at sigma 64, K = 4 3e-2 at 200; K = 5
     * at sigma 40 is 3e-5 off the float64 reference near the ends). */
    const double smax = order == 5 ? 20 : order == 4 ? 100 : INFINITY;
    if (sigma > smax) {
      snprintf(why, (size_t)len,
               "iir_vyv: order %d loses accuracy past sigma %g (asked %g); order 3 or "
               "iir_deriche have no such limit",
               order, smax, sigma);
      return NDF_EINVAL;
    }
    f->form = NDF__IIR_CASCADE;
    f->K = order;
    ndf_status st = design_vyv(f, order, sigma, why, len);
    if (st != NDF_OK) return st;
    triggs_sdika(f);
    return NDF_OK;
  }
  case NDF__IIR_DERICHE:
    if (order != 4) {
      snprintf(why, (size_t)len, "iir_deriche: order %d; only 4 is possible", order);
      return NDF_EINVAL;
    }
    f->form = NDF__IIR_PARALLEL;
    f->K = 4;
    design_deriche(f, sigma);
    return NDF_OK;
  default: break;
  }
  snprintf(why, (size_t)len, "unknown IIR method");
  return NDF_EINVAL;
}

static void line_cascade(const ndf__iir *f, double *x, int64_t n) {
  const int K = f->K;
  const double b0 = f->b0;
  {
    const double first = x[0], last = x[n - 1];
    double h[NDF__IIR_MAXK];
    for (int j = 0; j < K; j++)
      h[j] = first;
    for (int64_t i = 0; i < n; i++) {
      double v = b0 * x[i];
      for (int j = 0; j < K; j++)
        v -= f->a[j] * h[j];
      push(h, K, v);
      x[i] = v;
    }
    /* the anticausal start at n-1 .. n-K (u before the line's start is its steady state) */
    double d[NDF__IIR_MAXK], w[NDF__IIR_MAXK];
    for (int m = 0; m < K; m++)
      d[m] = (n - 1 - m >= 0 ? x[n - 1 - m] : first) - last;
    for (int r = 0; r < K; r++) {
      double v = last;
      for (int m = 0; m < K; m++)
        v += f->M[r * K + m] * d[m];
      w[K - 1 - r] = v; /* w[j] = v at n-K+j */
      if (n - 1 - r >= 0) x[n - 1 - r] = v;
    }
    /* w as the recursion's state: w[j] = v[i+1+j] for i = n-K-1 */
    double s[NDF__IIR_MAXK];
    for (int j = 0; j < K; j++)
      s[j] = w[j];
    for (int64_t i = n - K - 1; i >= 0; i--) {
      double v = b0 * x[i];
      for (int j = 0; j < K; j++)
        v -= f->a[j] * s[j];
      push(s, K, v);
      x[i] = v;
    }
  }
}

static void line_parallel(const ndf__iir *f, double *x, int64_t n, double *t) {
  const int K = f->K;
  memcpy(t, x, (size_t)n * sizeof *t);
  const double first = t[0], last = t[n - 1];
  double h[NDF__IIR_MAXK];
  for (int j = 0; j < K; j++)
    h[j] = f->gp * first;
  for (int64_t i = 0; i < n; i++) {
    double v = 0;
    for (int j = 0; j < K; j++)
      v += f->bp[j] * t[i - j >= 0 ? i - j : 0];
    for (int j = 0; j < K; j++)
      v -= f->a[j] * h[j];
    push(h, K, v);
    x[i] = v;
  }
  for (int j = 0; j < K; j++)
    h[j] = f->gm * last;
  for (int64_t i = n - 1; i >= 0; i--) {
    double v = 0;
    for (int j = 1; j <= K; j++)
      v += f->bm[j - 1] * t[i + j < n ? i + j : n - 1];
    for (int j = 0; j < K; j++)
      v -= f->a[j] * h[j];
    push(h, K, v);
    x[i] += v;
  }
}

void ndf__iir_line(const ndf__iir *f, double *x, int64_t n, double *tmp) {
  if (n <= 0) return;
  if (f->form == NDF__IIR_CASCADE)
    line_cascade(f, x, n);
  else
    line_parallel(f, x, n, tmp);
}
