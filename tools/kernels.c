/* SPDX-License-Identifier: BSD-3-Clause */
/* kernels.c - the CLI's named kernels and .npy kernel files (any numeric dtype, as float64). */
#include "kernels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/image.h"

static const char *const names[] = {"laplace", "sobel-x", "sobel-y", "sobel-z", "quadrature"};
/* The input ndims each name accepts (quadrature is a 3-D bank). */
static const int min_ndim[] = {1, 1, 2, 3, 3},
                 max_ndim[] = {NDF_MAX_DIMS, NDF_MAX_DIMS, NDF_MAX_DIMS, NDF_MAX_DIMS, 3};
enum { K_LAPLACE, K_SOBEL_X, K_SOBEL_Y, K_SOBEL_Z, K_QUAD, K_COUNT };

static int find(const char *name) {
  for (int i = 0; i < K_COUNT; i++)
    if (!strcmp(name, names[i])) return i;
  return -1;
}

int ndf_cli_kernel_is_named(const char *name) { return find(name) >= 0; }

int64_t ndf_cli_kernel_size(const ndf_cli_kernel *k) {
  int64_t n = 1;
  for (int d = 0; d < k->ndim; d++) {
    if (k->shape[d] < 0 || (k->shape[d] && n > INT64_MAX / k->shape[d])) return -1;
    n *= k->shape[d];
  }
  return n;
}

void ndf_cli_kernel_free(ndf_cli_kernel *k) {
  free(k->w);
  k->w = NULL;
}

void ndf_cli_quadrature(double *w) {
  const double s5 = sqrt(5.0), den = sqrt(10.0 + 2.0 * s5), a = 2.0 / den, b = (1.0 + s5) / den;
  const double dir[NDF_QUAD_DIRS][3] = {{a, 0, b},  {-a, 0, b}, {b, a, 0},
                                        {b, -a, 0}, {0, b, a},  {0, b, -a}}; /* x, y, z */
  enum { L = NDF_QUAD_SIZE, n = L * L * L };
  double g[n], sum_g = 0; /* the envelope */
  for (int j = 0; j < n; j++) {
    const int x = j % L - L / 2, y = j / L % L - L / 2, z = j / (L * L) - L / 2; /* [z][y][x] */
    g[j] = exp(-(x * x + y * y + z * z) / (2.0 * NDF_QUAD_SIGMA * NDF_QUAD_SIGMA));
    sum_g += g[j];
  }
  for (int i = 0; i < NDF_QUAD_DIRS; i++) {
    double *even = w + (2 * i) * n, *odd = even + n, sum_gc = 0, ee = 0, oo = 0;
    for (int j = 0; j < n; j++) {
      const int x = j % L - L / 2, y = j / L % L - L / 2, z = j / (L * L) - L / 2;
      const double ph = NDF_QUAD_W0 * (dir[i][0] * x + dir[i][1] * y + dir[i][2] * z);
      even[j] = g[j] * cos(ph);
      odd[j] = g[j] * sin(ph);
      sum_gc += even[j];
    }
    /* Subtracting a multiple of the envelope (not a constant) zeroes the DC response and
     * keeps the kernel's smooth falloff to its edges. */
    for (int j = 0; j < n; j++) {
      even[j] -= sum_gc / sum_g * g[j];
      ee += even[j] * even[j];
      oo += odd[j] * odd[j];
    }
    for (int j = 0; j < n; j++) {
      even[j] /= sqrt(ee);
      odd[j] /= sqrt(oo);
    }
  }
}

/* The names that accept ndim, comma-separated, into buf. */
static void names_for(int ndim, char *buf, size_t len) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < K_COUNT && k < len; i++)
    if (ndim >= min_ndim[i] && ndim <= max_ndim[i])
      k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? ", " : "", names[i]);
}

ndf_status ndf_cli_kernel_named(const char *name, int ndim, ndf_cli_kernel *k, char *err,
                                size_t errlen) {
  memset(k, 0, sizeof *k);
  const int id = find(name);
  if (id < 0) {
    snprintf(err, errlen, "unknown kernel '%s': the named kernels are %s", name, NDF_KERNEL_NAMES);
    return NDF_EINVAL;
  }
  if (ndim < min_ndim[id] || ndim > max_ndim[id]) {
    char fit[128];
    names_for(ndim, fit, sizeof fit);
    if (min_ndim[id] == max_ndim[id])
      snprintf(err, errlen, "kernel %s needs a %d-D input, not %d-D; for %d-D: %s", name,
               min_ndim[id], ndim, ndim, fit);
    else
      snprintf(err, errlen, "kernel %s needs an input of %d to %d axes, not %d; for %d-D: %s", name,
               min_ndim[id], max_ndim[id], ndim, ndim, fit);
    return NDF_EINVAL;
  }
  const int L = id == K_QUAD ? NDF_QUAD_SIZE : 3;
  k->nf = id == K_QUAD ? 2 * NDF_QUAD_DIRS : 1;
  k->ndim = ndim;
  for (int d = 0; d < ndim; d++)
    k->shape[d] = L;
  const int64_t n = ndf_cli_kernel_size(k);
  k->w = calloc((size_t)(n * k->nf), sizeof *k->w);
  if (!k->w) {
    snprintf(err, errlen, "out of memory for kernel %s", name);
    return NDF_ENOMEM;
  }
  if (id == K_QUAD) {
    ndf_cli_quadrature(k->w);
    return NDF_OK;
  }
  /* 3^ndim kernels: j's digits in base 3 are the per-axis indices 0, 1, 2 (offsets -1..1). */
  static const double smooth[3] = {1, 2, 1}, deriv[3] = {1, 0, -1}; /* convolve form */
  const int axis = id == K_SOBEL_X ? ndim - 1 : id == K_SOBEL_Y ? ndim - 2 : ndim - 3;
  for (int64_t j = 0; j < n; j++) {
    int idx[NDF_MAX_DIMS], off = 0;
    for (int d = ndim - 1, r = (int)j; d >= 0; d--, r /= 3) {
      idx[d] = r % 3;
      off += idx[d] != 1;
    }
    if (id == K_LAPLACE) {
      k->w[j] = off == 0 ? -2.0 * ndim : off == 1 ? 1.0 : 0.0;
    } else {
      double v = 1;
      for (int d = 0; d < ndim; d++)
        v *= d == axis ? deriv[idx[d]] : smooth[idx[d]];
      k->w[j] = v;
    }
  }
  return NDF_OK;
}

/* ------------------------------------------------------------------ .npy kernels */

static ndf_status fail(char *err, size_t n, ndf_status s, const char *path, const char *msg) {
  snprintf(err, n, "%s: %s", path, msg);
  return s;
}

/* The value after 'key': in a .npy header dict, or NULL. */
static const char *header_value(const char *h, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(h, pat);
  if (!p || !(p = strchr(p + strlen(pat), ':'))) return NULL;
  for (p++; *p == ' ';)
    p++;
  return p;
}

/* Element i of raw data of numpy kind 'b', 'i', 'u' or 'f' and `size` bytes, stored in
 * little- (swap 0) or big-endian (swap 1) order, as a double. */
static double element(const unsigned char *raw, int64_t i, char kind, int size, int swap) {
  unsigned char b[8];
  for (int j = 0; j < size; j++)
    b[j] = raw[i * size + (swap ? size - 1 - j : j)];
  uint64_t u = 0;
  for (int j = size - 1; j >= 0; j--)
    u = u << 8 | b[j];
  if (kind == 'f') {
    if (size == 8) {
      double v;
      memcpy(&v, &u, 8);
      return v;
    }
    if (size == 4) {
      uint32_t u32 = (uint32_t)u;
      float v;
      memcpy(&v, &u32, 4);
      return v;
    }
    /* IEEE half: sign, 5 exponent bits (bias 15), 10 fraction bits */
    const int e = (int)(u >> 10 & 31), f = (int)(u & 1023);
    const double m = e == 0    ? ldexp(f, -24)
                     : e == 31 ? (f ? NAN : INFINITY)
                               : ldexp(f + 1024, e - 25);
    return u >> 15 ? -m : m;
  }
  if (kind == 'i' && size < 8 && u >> (8 * size - 1)) u |= ~(uint64_t)0 << (8 * size); /* sign */
  return kind == 'i' ? (double)(int64_t)u : (double)u;
}

ndf_status ndf_cli_kernel_read(const char *path, ndf_cli_kernel *k, char *err, size_t errlen) {
  memset(k, 0, sizeof *k);
  int fd;
  ndf_status st = ndf_io_open_regular(path, &fd, NULL, err, errlen);
  if (st != NDF_OK) return st;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return fail(err, errlen, NDF_EIO, path, strerror(errno));
  }
  unsigned char pre[12], *raw = NULL;
  char *h = NULL, msg[160];
  st = NDF_EINVAL;
  size_t hlen = 0;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
    st = fail(err, errlen, NDF_EINVAL, path, "not a .npy file (bad magic)");
    goto out;
  }
  if (pre[6] == 1) {
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  } else if ((pre[6] == 2 || pre[6] == 3) && fread(pre + 10, 1, 2, f) == 2) {
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  } else {
    st = fail(err, errlen, NDF_EINVAL, path, "unsupported .npy version or truncated header");
    goto out;
  }
  if (hlen > (1u << 20) || !(h = malloc(hlen + 1)) || fread(h, 1, hlen, f) != hlen) {
    st = fail(err, errlen, NDF_EINVAL, path, "truncated or oversized header");
    goto out;
  }
  h[hlen] = 0;
  const char *d = header_value(h, "descr"), *fo = header_value(h, "fortran_order"),
             *sh = header_value(h, "shape");
  if (!d || !fo || !sh || *d != '\'' || *sh != '(' || strnlen(d, 4) < 4) {
    st = fail(err, errlen, NDF_EINVAL, path, "malformed header");
    goto out;
  }
  /* descr: byte order '<', '>', '|' or '=', kind, size in bytes, e.g. '<i8' */
  char order = d[1], kind = d[2], *end;
  long size = strtol(d + 3, &end, 10);
  int ok = strchr("<>|=", order) && order && *end == '\'' &&
           ((kind == 'b' && size == 1) ||
            ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
            (kind == 'f' && (size == 2 || size == 4 || size == 8)));
  if (!ok) {
    const char *q = strchr(d + 1, '\'');
    snprintf(msg, sizeof msg, "kernel dtype %.*s not supported (bool, integers, f2, f4, f8)",
             q ? (int)(q - d - 1) : 8, d + 1);
    st = fail(err, errlen, NDF_EINVAL, path, msg);
    goto out;
  }
  const int fortran = !strncmp(fo, "True", 4);
  if (!fortran && strncmp(fo, "False", 5)) {
    st = fail(err, errlen, NDF_EINVAL, path, "malformed header (fortran_order)");
    goto out;
  }
  const char *p = sh + 1;
  for (;;) {
    while (*p == ' ' || *p == ',')
      p++;
    if (*p == ')') break;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || k->ndim == NDF_MAX_DIMS || v > (1LL << 40)) {
      st = fail(err, errlen, NDF_EINVAL, path,
                end == p          ? "malformed shape"
                : v < 0           ? "negative length"
                : v > (1LL << 40) ? "kernel too large"
                                  : "kernel has more than 4 axes");
      goto out;
    }
    k->shape[k->ndim++] = v;
    p = end;
  }
  int64_t n = ndf_cli_kernel_size(k);
  if (k->ndim == 0 || n == 0 || n < 0 || n > (1LL << 40)) {
    st = fail(err, errlen, NDF_EINVAL, path,
              k->ndim == 0 ? "0-d kernel"
              : n          ? "kernel too large"
                           : "empty kernel");
    goto out;
  }
  /* The float64 weights (and the raw samples, at most as large) within the read limit. */
  if ((st = ndf_io_check_alloc(path, n, 2 * sizeof(double), err, errlen)) != NDF_OK) goto out;
  st = NDF_EINVAL;
  raw = malloc((size_t)n * (size_t)size);
  k->w = malloc((size_t)n * sizeof *k->w);
  if (!raw || !k->w) {
    st = fail(err, errlen, NDF_ENOMEM, path, "out of memory");
    goto out;
  }
  if (fread(raw, (size_t)size, (size_t)n, f) != (size_t)n) {
    st = fail(err, errlen, ferror(f) ? NDF_EIO : NDF_EINVAL, path, "truncated data");
    goto out;
  }
  /* Fortran order: element i of the file is at C index sum_d c_d * stride_d, with c the file
   * index's digits, the first axis fastest. */
  int64_t cstride[NDF_MAX_DIMS], acc = 1;
  for (int ax = k->ndim - 1; ax >= 0; ax--) {
    cstride[ax] = acc;
    acc *= k->shape[ax];
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t at = i;
    if (fortran) {
      int64_t r = i;
      at = 0;
      for (int ax = 0; ax < k->ndim; ax++) {
        at += r % k->shape[ax] * cstride[ax];
        r /= k->shape[ax];
      }
    }
    k->w[at] = element(raw, i, kind, (int)size, order == '>');
  }
  k->nf = 1;
  st = NDF_OK;
out:
  if (st != NDF_OK) ndf_cli_kernel_free(k);
  free(raw);
  free(h);
  fclose(f);
  return st;
}
