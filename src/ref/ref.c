/* ref.c - float64 reference correlations: a direct sum over the kernel per output element. */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/boundary.h"
#include "../core/elem.h"

void ndf_ref_correlate(const ndf_array *in, double *out, const double *w, const int64_t *wshape,
                       const ndf_mode *mode, double cval, const int *origin, int convolve) {
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
  ndf_ref_correlate(in, out, w, wshape, modes, cval, orig, 0);
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
