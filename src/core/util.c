/* SPDX-License-Identifier: BSD-3-Clause */
/* util.c - status and type names, array descriptions and their validation, messages. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elem.h"
#include "internal.h"

#define NDF_STR2(x) #x
#define NDF_STR(x) NDF_STR2(x)

const char *ndf_version_string(void) {
  return NDF_STR(NDF_VERSION_MAJOR) "." NDF_STR(NDF_VERSION_MINOR) "." NDF_STR(NDF_VERSION_PATCH);
}

const char *ndf_status_str(ndf_status s) {
  switch (s) {
  case NDF_OK: return "ok";
  case NDF_EINVAL: return "invalid argument";
  case NDF_ENOMEM: return "out of memory";
  case NDF_EUNSUPPORTED: return "not supported";
  case NDF_EIO: return "input/output error";
  case NDF_ECUDA: return "CUDA error";
  case NDF_ENODEV: return "no such device";
  }
  return "unknown status";
}

size_t ndf_dtype_size(ndf_dtype t) {
  switch (t) {
  case NDF_U8: return 1;
  case NDF_U16:
  case NDF_I16: return 2;
  case NDF_F32: return 4;
  case NDF_F64: return 8;
  }
  return 0;
}

const char *ndf_dtype_name(ndf_dtype t) {
  static const char *names[] = {NULL, "u8", "u16", "i16", "f32", "f64"};
  return (t >= NDF_U8 && t <= NDF_F64) ? names[t] : NULL;
}

static const struct {
  const char *name;
  ndf_mode mode;
} mode_names[] = {
    {"reflect", NDF_MODE_REFLECT},
    {"constant", NDF_MODE_CONSTANT},
    {"nearest", NDF_MODE_NEAREST},
    {"mirror", NDF_MODE_MIRROR},
    {"wrap", NDF_MODE_WRAP},
    {"grid-mirror", NDF_MODE_REFLECT},
    {"grid-constant", NDF_MODE_CONSTANT},
    {"grid-wrap", NDF_MODE_WRAP},
};

ndf_status ndf_mode_parse(const char *name, ndf_mode *mode) {
  if (!name || !mode) return NDF_EINVAL;
  for (size_t i = 0; i < sizeof mode_names / sizeof mode_names[0]; i++)
    if (!strcmp(name, mode_names[i].name)) {
      *mode = mode_names[i].mode;
      return NDF_OK;
    }
  return NDF_EINVAL;
}

const char *ndf_mode_name(ndf_mode mode) {
  return (mode >= NDF_MODE_REFLECT && mode <= NDF_MODE_WRAP) ? mode_names[mode].name : NULL;
}

void ndf__contiguous_strides(ndf_array *a) {
  int64_t s = 1;
  for (int d = a->ndim - 1; d >= 0; d--) { /* no overflow: past INT64_MAX, the array is invalid */
    a->strides[d] = s;
    s = a->shape[d] > 0 && s <= INT64_MAX / a->shape[d] ? s * a->shape[d] : 0;
  }
}

ndf_array ndf_array_contiguous(ndf_dtype dtype, int ndim, const int64_t *shape, void *data) {
  ndf_array a;
  memset(&a, 0, sizeof a);
  a.dtype = dtype;
  a.data = data;
  if (ndim < 1 || ndim > NDF_MAX_DIMS || !shape) return a; /* ndim 0: invalid */
  a.ndim = ndim;
  for (int d = 0; d < ndim; d++)
    a.shape[d] = shape[d];
  ndf__contiguous_strides(&a);
  return a;
}

int64_t ndf_array_size(const ndf_array *a) {
  if (!a || a->ndim < 1 || a->ndim > NDF_MAX_DIMS) return 0;
  int64_t n = 1;
  for (int d = 0; d < a->ndim; d++) {
    if (a->shape[d] <= 0 || n > INT64_MAX / a->shape[d]) return 0;
    n *= a->shape[d];
  }
  return n;
}

ndf_status ndf__fail(const ndf_context *ctx, ndf_status s, const char *fmt, ...) {
  if (!ctx) return s;
  ndf_context *c = (ndf_context *)ctx; /* the message is mutable state */
  pthread_mutex_lock(&c->msg_lock);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&c->msg_lock);
  return s;
}

ndf_status ndf__check_desc(const ndf_context *ctx, const ndf_array *a, const char *what) {
  if (!a) return ndf__fail(ctx, NDF_EINVAL, "%s: NULL array", what);
  if (!ndf_dtype_size(a->dtype))
    return ndf__fail(ctx, NDF_EINVAL, "%s: unknown dtype %d", what, (int)a->dtype);
  if (a->ndim < 1 || a->ndim > NDF_MAX_DIMS)
    return ndf__fail(ctx, NDF_EINVAL, "%s: ndim %d is not in 1..%d", what, a->ndim, NDF_MAX_DIMS);
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] <= 0)
      return ndf__fail(ctx, NDF_EINVAL, "%s: shape[%d] = %lld is not positive", what, d,
                       (long long)a->shape[d]);
  if (!ndf_array_size(a) || ndf__bytes(ndf_array_size(a), sizeof(double)) < 0)
    return ndf__fail(ctx, NDF_EINVAL, "%s: element count overflows", what);
  /* Every element's byte offset, and a float64 copy of the array, fit in int64 and size_t. */
  int64_t span = 0;
  for (int d = 0; d < a->ndim; d++) {
    const int64_t st = a->strides[d] < 0 ? -a->strides[d] : a->strides[d];
    if (a->strides[d] == INT64_MIN || (st && (a->shape[d] - 1 > (INT64_MAX / 8 - span) / st)))
      return ndf__fail(ctx, NDF_EINVAL, "%s: strides make byte offsets overflow", what);
    span += (a->shape[d] - 1) * st;
  }
  if (a->place.kind != NDF_PLACE_HOST && a->place.kind != NDF_PLACE_CUDA)
    return ndf__fail(ctx, NDF_EINVAL, "%s: unknown place kind %d", what, (int)a->place.kind);
  return NDF_OK;
}

ndf_status ndf__check_same_shape(const ndf_context *ctx, const ndf_array *a, const ndf_array *b) {
  int same = a->ndim == b->ndim;
  for (int d = 0; same && d < a->ndim; d++)
    same = a->shape[d] == b->shape[d];
  return same ? NDF_OK : ndf__fail(ctx, NDF_EINVAL, "in and out shapes differ");
}

int ndf__no_self_overlap(const ndf_array *a) {
  /* Sort the axes of extent > 1 by |stride|; each must step past all the
   * elements the smaller ones span. */
  int64_t st[NDF_MAX_DIMS], ext[NDF_MAX_DIMS];
  int k = 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] > 1) {
      int64_t s = a->strides[d] < 0 ? -a->strides[d] : a->strides[d];
      int j = k++;
      while (j > 0 && st[j - 1] > s) {
        st[j] = st[j - 1];
        ext[j] = ext[j - 1];
        j--;
      }
      st[j] = s;
      ext[j] = a->shape[d];
    }
  int64_t span = 0; /* largest offset reached by the axes so far */
  for (int j = 0; j < k; j++) {
    if (st[j] <= span) return 0;
    span += st[j] * (ext[j] - 1);
  }
  return 1;
}

static void byte_range(const ndf_array *a, uintptr_t *lo, uintptr_t *hi) {
  int64_t mn = 0, mx = 0;
  for (int d = 0; d < a->ndim; d++) {
    int64_t e = a->strides[d] * (a->shape[d] - 1);
    if (e < 0)
      mn += e;
    else
      mx += e;
  }
  size_t es = ndf_dtype_size(a->dtype);
  *lo = (uintptr_t)a->data + (intptr_t)(mn * (int64_t)es);
  *hi = (uintptr_t)a->data + (intptr_t)((mx + 1) * (int64_t)es);
}

int ndf__overlap(const ndf_array *a, const ndf_array *b, int *same) {
  *same = 0;
  if (a->place.kind != b->place.kind || a->place.device != b->place.device) return 0;
  uintptr_t alo, ahi, blo, bhi;
  byte_range(a, &alo, &ahi);
  byte_range(b, &blo, &bhi);
  if (ahi <= blo || bhi <= alo) return 0;
  *same = a->data == b->data && a->dtype == b->dtype && a->ndim == b->ndim;
  for (int d = 0; *same && d < a->ndim; d++)
    *same = a->shape[d] == b->shape[d] && (a->strides[d] == b->strides[d] || a->shape[d] == 1);
  return 1;
}

double ndf__now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The one-shot forms: st is the planning call's status, *p its plan. (The
 * plan is passed by address: argument evaluation order is unspecified.) */
ndf_status ndf__run_once(ndf_status st, ndf_plan **p, const ndf_array *in, int nout,
                         ndf_array *out) {
  if (st != NDF_OK) return st;
  st = (*p)->pb.nout == 1 ? ndf_execute(*p, in, out) : ndf_execute_bank(*p, in, nout, out);
  ndf_plan_destroy(*p);
  return st;
}

/* Copies the caller's options (NULL: all zero, the defaults) into o, which
 * is `size` bytes, after checking that they are at least that large; every
 * options struct starts with its size_t struct_size. */
ndf_status ndf__take_opts(ndf_context *ctx, void *o, const void *opts, size_t size, size_t min,
                          const char *what) {
  memset(o, 0, size);
  if (!opts) return NDF_OK;
  size_t given = *(const size_t *)opts;
  if (given < min)
    return ndf__fail(ctx, NDF_EINVAL, "%s: opts.struct_size is %zu, expected %zu", what, given,
                     size);
  memcpy(o, opts, given < size ? given : size);
  *(size_t *)o = size;
  return NDF_OK;
}

/* The smallest 2^a 3^b 5^c 7^d >= m (m >= 1; d = 0 unless seven): the sizes FFTW and cuFFT
 * transform quickly. */
int64_t ndf__next_smooth(int64_t m, int seven) {
  int64_t best = 1;
  while (best < m)
    best *= 2;
  for (int64_t p7 = 1; p7 < best; p7 *= seven ? 7 : best)
    for (int64_t p5 = p7; p5 < best; p5 *= 5)
      for (int64_t p3 = p5; p3 < best; p3 *= 3) {
        int64_t q = p3;
        while (q < m)
          q *= 2;
        if (q < best) best = q;
      }
  return best;
}

int64_t ndf__bytes(int64_t count, size_t elem) {
  if (count < 0 || elem == 0) return count == 0 ? 0 : -1;
  if ((uint64_t)count > (uint64_t)INT64_MAX / elem || (uint64_t)count * elem > (uint64_t)SIZE_MAX)
    return -1;
  return count * (int64_t)elem;
}

/* The exponent bits all set: NaN or an infinity. */
int ndf__host_nonfinite(const ndf_array *a, int threads) {
  if (a->dtype != NDF_F32 && a->dtype != NDF_F64) return 0;
  /* as [rows][X]: the last axis in a loop the compiler vectorises where it is contiguous */
  const int nd = a->ndim;
  const int64_t X = a->shape[nd - 1], sx = a->strides[nd - 1], rows = ndf_array_size(a) / X;
  const int f32 = a->dtype == NDF_F32;
  int bad = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : bad)
  for (int64_t r = 0; r < rows; r++) {
    if (bad) continue;
    int64_t off = 0, k = r;
    for (int d = nd - 2; d >= 0; d--) {
      off += k % a->shape[d] * a->strides[d];
      k /= a->shape[d];
    }
    int b = 0;
    if (f32) {
      const float *row = (const float *)a->data + off;
      if (sx == 1)
        for (int64_t x = 0; x < X; x++)
          b |= ndf__f32_nonfinite(row + x);
      else
        for (int64_t x = 0; x < X; x++)
          b |= ndf__f32_nonfinite(row + x * sx);
    } else {
      const double *row = (const double *)a->data + off;
      for (int64_t x = 0; x < X; x++)
        b |= ndf__f64_nonfinite(row + x * sx);
    }
    bad |= b;
  }
  return bad;
}
