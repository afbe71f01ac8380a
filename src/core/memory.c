/* SPDX-License-Identifier: BSD-3-Clause */
/* memory.c - array allocation and copies on the host or the context's CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "elem.h"
#include "internal.h"

static ndf_status alloc_array(ndf_context *ctx, ndf_array *a, ndf_dtype dtype, int ndim,
                              const int64_t *shape, int host) {
  if (!ctx || !a || !shape) return NDF_EINVAL;
  ndf_array r = ndf_array_contiguous(dtype, ndim, shape, NULL);
  r.place = host ? (ndf_place){NDF_PLACE_HOST, 0} : ctx->place;
  ndf_status st = ndf__check_desc(ctx, &r, "alloc");
  if (st != NDF_OK) return st;
  size_t bytes = (size_t)ndf_array_size(&r) * ndf_dtype_size(dtype);
  if (ctx->place.kind == NDF_PLACE_CUDA && ndf__device()) {
    st = host ? ndf__device()->host_alloc(ctx, &r.data, bytes)
              : ndf__device()->alloc(ctx, &r.data, bytes);
    if (st != NDF_OK) return st;
    *a = r;
    return NDF_OK;
  }
  r.data = malloc(bytes);
  if (!r.data) return ndf__fail(ctx, NDF_ENOMEM, "out of host memory allocating %zu bytes", bytes);
  *a = r;
  return NDF_OK;
}

ndf_status ndf_array_alloc(ndf_context *ctx, ndf_array *a, ndf_dtype dtype, int ndim,
                           const int64_t *shape) {
  return alloc_array(ctx, a, dtype, ndim, shape, 0);
}

ndf_status ndf_array_alloc_host(ndf_context *ctx, ndf_array *a, ndf_dtype dtype, int ndim,
                                const int64_t *shape) {
  return alloc_array(ctx, a, dtype, ndim, shape, 1);
}

void ndf_array_free(ndf_context *ctx, ndf_array *a) {
  if (!a || !a->data) return;
  if (a->place.kind == NDF_PLACE_CUDA && ndf__device())
    ndf__device()->free(ctx, a->data);
  else if (!(ctx && ctx->place.kind == NDF_PLACE_CUDA && ndf__device() &&
             ndf__device()->host_free(ctx, a->data)))
    free(a->data);
  a->data = NULL;
}

ndf_status ndf_array_copy(ndf_context *ctx, ndf_array *dst, const ndf_array *src) {
  if (!ctx) return NDF_EINVAL;
  ndf_status st = ndf__check_desc(ctx, src, "src");
  if (st == NDF_OK) st = ndf__check_desc(ctx, dst, "dst");
  if (st == NDF_OK) st = ndf__check_same_shape(ctx, src, dst);
  if (st != NDF_OK) return st;
  if (!src->data || !dst->data || src->dtype != dst->dtype)
    return ndf__fail(ctx, NDF_EINVAL, "copy: NULL data or dtypes differ");
  if (!ndf__is_contiguous(src) || !ndf__is_contiguous(dst))
    return ndf__fail(ctx, NDF_EUNSUPPORTED, "copy: arrays must be C-contiguous");
  size_t bytes = (size_t)ndf_array_size(src) * ndf_dtype_size(src->dtype);
  if (src->place.kind == NDF_PLACE_HOST && dst->place.kind == NDF_PLACE_HOST) {
    memmove(dst->data, src->data, bytes);
    return NDF_OK;
  }
  if (ctx->place.kind == NDF_PLACE_CUDA && ndf__device() &&
      (src->place.kind == NDF_PLACE_HOST || src->place.device == ctx->place.device) &&
      (dst->place.kind == NDF_PLACE_HOST || dst->place.device == ctx->place.device))
    return ndf__device()->copy(ctx, dst->data, src->data, bytes);
  return ndf__fail(ctx, NDF_EINVAL, "copy: a device array is not on the context's device");
}
