/* SPDX-License-Identifier: BSD-3-Clause */
/* ref.c - float64 references: correlations as a direct sum over the kernel per output element,
 * the recursive Gaussian over lines extended by their end values (in long double). */
#include "ref.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/boundary.h"
#include "../core/elem.h"

/* The direct sum; footprint: weights of magnitude <= DBL_EPSILON left out (scipy's correlate,
 * so no NaN reaches through them), else every weight counts (scipy's correlate1d). */
static void correlate(const ndf_array *in, double *out, const double *w, const int64_t *wshape,
                      const ndf_mode *mode, double cval, const int *origin, int convolve,
                      int footprint) {
  const int nd = in->ndim;
  int64_t total = ndf_array_size(in), wtotal = 1;
  for (int d = 0; d < nd; d++)
    wtotal *= wshape[d];
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t i = 0; i < total; i++) {
    int64_t c[NDF_MAX_DIMS], r = i;
    for (int d = nd - 1; d >= 0; d--) {
      c[d] = r % in->shape[d];
      r /= in->shape[d];
    }
    double acc = 0;
    for (int64_t k = 0; k < wtotal; k++) {
      if (footprint && fabs(w[k]) <= DBL_EPSILON) continue;
      int64_t kr = k, off = 0;
      int outside = 0;
      for (int d = nd - 1; d >= 0; d--) {
        int64_t kd = kr % wshape[d];
        kr /= wshape[d];
        int64_t o = origin ? origin[d] : 0;
        /* correlate: tap kd reads offset kd - k/2 - origin; convolve (scipy:
         * kernel reversed, origin -origin - [k even]) reads k/2 + origin - kd. */
        int64_t at = convolve ? c[d] - kd + wshape[d] / 2 + o : c[d] + kd - wshape[d] / 2 - o;
        int64_t x = ndf__map_index(at, in->shape[d], mode[d]);
        if (x < 0)
          outside = 1;
        else
          off += x * in->strides[d];
      }
      acc += w[k] * (outside ? cval : ndf__load(in->dtype, in->data, off));
    }
    out[i] = acc;
  }
}

void ndf_ref_correlate(const ndf_array *in, double *out, const double *w, const int64_t *wshape,
                       const ndf_mode *mode, double cval, const int *origin, int convolve) {
  correlate(in, out, w, wshape, mode, cval, origin, convolve, 1);
}

void ndf_ref_correlate1d(const ndf_array *in, double *out, const double *w, int64_t n, int axis,
                         ndf_mode mode, double cval, int origin) {
  int64_t wshape[NDF_MAX_DIMS];
  int orig[NDF_MAX_DIMS] = {0};
  for (int d = 0; d < in->ndim; d++)
    wshape[d] = 1;
  wshape[axis] = n;
  orig[axis] = origin;
  ndf_mode modes[NDF_MAX_DIMS];
  for (int d = 0; d < NDF_MAX_DIMS; d++)
    modes[d] = mode;
  correlate(in, out, w, wshape, modes, cval, orig, 0, 0);
}

void ndf_ref_convolve1d(const ndf_array *in, double *out, const double *w, int64_t n, int axis,
                        ndf_mode mode, double cval, int origin) {
  double *r = malloc((size_t)n * sizeof *r);
  if (!r) abort();
  for (int64_t j = 0; j < n; j++)
    r[j] = w[n - 1 - j];
  ndf_ref_correlate1d(in, out, r, n, axis, mode, cval, -origin - (n % 2 == 0));
  free(r);
}

void ndf_ref_sepfilter(const ndf_array *in, double *out, const double *const *w, const int64_t *n,
                       const ndf_mode *mode, double cval, const int *origin, int convolve) {
  const int64_t total = ndf_array_size(in);
  double *tmp = malloc((size_t)total * sizeof *tmp);
  if (!tmp) abort();
  ndf_array cur = *in;
  int first = 1;
  for (int d = 0; d < in->ndim; d++) {
    if (n[d] <= 0) continue;
    if (!first) { /* the previous axis's result is the next one's input */
      memcpy(tmp, out, (size_t)total * sizeof *tmp);
      cur = ndf_array_contiguous(NDF_F64, in->ndim, in->shape, tmp);
    }
    (convolve ? ndf_ref_convolve1d : ndf_ref_correlate1d)(&cur, out, w[d], n[d], d, mode[d], cval,
                                                          origin[d]);
    first = 0;
  }
  if (first) /* nothing filtered: a copy */
    for (int64_t i = 0; i < total; i++)
      out[i] = ndf__load(in->dtype, in->data, ndf__offset(in, i));
  free(tmp);
}

int ndf_ref_gaussian_kernel(double sigma, int order, int radius, double *w) {
  if (order < 0 || order > 2) return -1;
  const double s2 = sigma * sigma;
  double sum = 0;
  for (int i = -radius; i <= radius; i++)
    sum += exp(-0.5 * i * i / s2);
  for (int i = -radius; i <= radius; i++) {
    double g = exp(-0.5 * i * i / s2) / sum, x = i;
    double v = order == 0 ? g : order == 1 ? -x / s2 * g : (x * x / (s2 * s2) - 1 / s2) * g;
    w[radius - i] = v; /* gaussian_filter1d correlates with the reversed kernel */
  }
  return 0;
}

/* Samples after which the all-pole recursion 1 / (1 + sum_j a[j-1] z^-j) has forgotten its
 * start: 32 in a row of its impulse response below 1e-20 of its peak. */
static int64_t iir_memory(const ndf__iir *f) {
  double h[NDF__IIR_MAXK] = {0}, peak = 0;
  int64_t t = 0;
  for (int quiet = 0; quiet < 32; t++) {
    double v = t == 0;
    for (int j = 0; j < f->K; j++)
      v -= f->a[j] * h[j];
    for (int j = f->K - 1; j > 0; j--)
      h[j] = h[j - 1];
    h[0] = v;
    peak = fmax(peak, fabs(v));
    quiet = fabs(v) < 1e-20 * peak ? quiet + 1 : 0;
  }
  return t;
}

/* Filters the extended line e[0..N-1] into y[lo..hi-1] (y, u: N each, u scratch), each pass
 * started from the steady state of a constant history; what only leads to outputs outside lo
 * .. hi-1 is not computed (the anticausal pass below lo; the parallel form's causal part past
 * hi). In long double: the extension is long (about 27000 samples a side for iir_deriche at
 * sigma 1000) and the direct form amplifies the rounding of each step by up to 1 / |1 + sum a|
 * (4e10 there), so in float64 the result drifted by up to 7e-6 of the input's scale from the
 * exact filtering with the same coefficients (computed in __float128), while the solvers, which
 * run only the line itself, are within 2e-11 of it. The steady states hardly matter (the
 * extension forgets them) but are the coefficients' own, from sums in long double. */
static void iir_ext(const ndf__iir *f, const long double *e, long double *y, long double *u,
                    int64_t N, int64_t lo, int64_t hi) {
  const int K = f->K;
  long double sa = 1, sp = 0, sm = 0;
  for (int j = 0; j < K; j++) {
    sa += f->a[j];
    sp += f->bp[j];
    sm += f->bm[j];
  }
  if (f->form == NDF__IIR_CASCADE) {
    const long double g = f->b0 / sa; /* each pass's DC gain (1 within rounding, iir.h) */
    for (int64_t i = 0; i < N; i++) {
      long double v = f->b0 * e[i];
      for (int j = 1; j <= K; j++)
        v -= f->a[j - 1] * (i - j >= 0 ? u[i - j] : g * e[0]);
      u[i] = v;
    }
    for (int64_t i = N - 1; i >= lo; i--) { /* anticausal, from u's value at the far end */
      long double v = f->b0 * u[i];
      for (int j = 1; j <= K; j++)
        v -= f->a[j - 1] * (i + j < N ? y[i + j] : g * u[N - 1]);
      y[i] = v;
    }
    return;
  }
  const long double gp = sp / sa, gm = sm / sa;
  for (int64_t i = 0; i < hi; i++) {
    long double v = 0;
    for (int j = 0; j < K; j++)
      v += f->bp[j] * e[i - j >= 0 ? i - j : 0];
    for (int j = 1; j <= K; j++)
      v -= f->a[j - 1] * (i - j >= 0 ? u[i - j] : gp * e[0]);
    u[i] = v;
  }
  for (int64_t i = N - 1; i >= lo; i--) { /* y holds the anticausal part until the sum below */
    long double v = 0;
    for (int j = 1; j <= K; j++)
      v += f->bm[j - 1] * e[i + j < N ? i + j : N - 1];
    for (int j = 1; j <= K; j++)
      v -= f->a[j - 1] * (i + j < N ? y[i + j] : gm * e[N - 1]);
    y[i] = v;
  }
  for (int64_t i = lo; i < hi; i++)
    y[i] += u[i];
}

void ndf_ref_iir_gaussian(const ndf_array *in, double *out, const ndf__iir *const *f) {
  const int nd = in->ndim;
  const int64_t total = ndf_array_size(in);
  for (int64_t i = 0; i < total; i++)
    out[i] = ndf__load(in->dtype, in->data, ndf__offset(in, i));
  for (int a = 0; a < nd; a++) {
    if (!f[a]) continue;
    const int64_t n = in->shape[a], P = iir_memory(f[a]) + 64, N = n + 2 * P;
    int64_t inner = 1;
    for (int d = a + 1; d < nd; d++)
      inner *= in->shape[d];
    const int64_t nlines = total / n;
#pragma omp parallel
    {
      long double *e = malloc(3 * (size_t)N * sizeof *e);
      if (!e) abort();
#pragma omp for schedule(dynamic, 4)
      for (int64_t l = 0; l < nlines; l++) {
        double *x = out + l / inner * n * inner + l % inner;
        for (int64_t i = 0; i < N; i++)
          e[i] = x[(i < P ? 0 : i - P < n ? i - P : n - 1) * inner];
        iir_ext(f[a], e, e + N, e + 2 * N, N, P, P + n);
        for (int64_t i = 0; i < n; i++)
          x[i * inner] = (double)e[N + P + i];
      }
      free(e);
    }
  }
}

/* ------------------------------------------------------------------ ks */

static double ks_sigma(const ndf_array *sigma, int m, int64_t flat) {
  const ndf_array *a = &sigma[m];
  return ndf__load(a->dtype, a->data, ndf__offset(a, flat));
}

int64_t ndf_ref_ks_margin(const ndf_array *in, const ndf_array *sigma, int nsig, double n_sigma) {
  int64_t R = 0;
  const int64_t n = ndf_array_size(in);
  for (int m = 0; m < nsig; m++)
    for (int64_t i = 0; i < n; i++) {
      const int64_t r = (int64_t)ceil(n_sigma * ks_sigma(sigma, m, i));
      if (r > R) R = r;
    }
  return R;
}

/* Eq. 4 with the cut-off: the weight of offset d for sigma s. */
static double ks_k(double d, double s, double n_sigma, int normalize) {
  const double r = ceil(n_sigma * s);
  if (fabs(d) > r) return 0;
  if (s == 0) return d == 0;
  const double c = sqrt(2.0) * s;
  double k = 0.5 * (erf((d + 0.5) / c) - erf((d - 0.5) / c));
  if (normalize) {
    double sum = 0;
    for (double j = -r; j <= r; j++)
      sum += 0.5 * (erf((j + 0.5) / c) - erf((j - 0.5) / c));
    k /= sum;
  }
  return k;
}

void ndf_ref_ks(const ndf_array *in, const ndf_array *sigma, int nsig, int index_output,
                double n_sigma, int full, int normalize, double *out) {
  const int nd = in->ndim;
  const int64_t R = full ? ndf_ref_ks_margin(in, sigma, nsig, n_sigma) : 0;
  int64_t m[NDF_MAX_DIMS], nout = 1, nin = ndf_array_size(in);
  for (int d = 0; d < nd; d++) {
    m[d] = in->shape[d] + 2 * R;
    nout *= m[d];
  }
  for (int64_t o = 0; o < nout; o++) {
    int64_t p[NDF_MAX_DIMS], rest = o, pin = 0; /* p: output position; pin: sigma pixel */
    for (int d = nd - 1; d >= 0; d--) {
      p[d] = rest % m[d];
      rest /= m[d];
    }
    for (int d = 0; d < nd; d++) { /* the nearest input pixel to p */
      int64_t c = p[d] - R;
      c = c < 0 ? 0 : c >= in->shape[d] ? in->shape[d] - 1 : c;
      pin = pin * in->shape[d] + c;
    }
    double sum = 0;
    for (int64_t i = 0; i < nin; i++) {
      int64_t qd[NDF_MAX_DIMS], r2 = i;
      for (int d = nd - 1; d >= 0; d--) {
        qd[d] = r2 % in->shape[d];
        r2 /= in->shape[d];
      }
      const int64_t at = index_output ? pin : i;
      double w = 1;
      for (int d = 0; d < nd && w != 0; d++)
        w *= ks_k((double)(p[d] - (qd[d] + R)), ks_sigma(sigma, nsig == 1 ? 0 : d, at), n_sigma,
                  normalize);
      if (w != 0) sum += ndf__load(in->dtype, in->data, ndf__offset(in, i)) * w;
    }
    out[o] = sum;
  }
}
