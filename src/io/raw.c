/* SPDX-License-Identifier: BSD-3-Clause */
/* raw.c - raw little-endian samples, C order, with the shape and dtype given by the caller. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats.h"

ndf_status ndf__raw_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                         size_t errlen) {
  if (!o || o->ndim < 1 || o->ndim > NDF_MAX_DIMS || !ndf_dtype_size(o->dtype) || o->offset < 0)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "a raw file needs a shape and a dtype");
  ndf_array a = ndf_array_contiguous(o->dtype, o->ndim, o->shape, NULL);
  const int64_t n = ndf_array_size(&a);
  const size_t es = ndf_dtype_size(o->dtype);
  if (n <= 0) return ndf_io_error(err, errlen, NDF_EINVAL, path, "bad --shape");
  if ((uint64_t)n > (uint64_t)(INT64_MAX - o->offset) / es)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "--shape makes more bytes than can be");
  const int64_t bytes = n * (int64_t)es;
  int fd;
  int64_t size;
  ndf_status st = ndf_io_open_regular(path, &fd, &size, err, errlen);
  if (st != NDF_OK) return st;
  if (size != o->offset + bytes)
    st = ndf_io_error(err, errlen, NDF_EINVAL, path,
                      "holds %lld bytes, but offset %lld + the shape and dtype make %lld",
                      (long long)size, (long long)o->offset, (long long)(o->offset + bytes));
  /* the samples where they lie, aligned to their type (else, or where the file system cannot
   * map them, read) */
  if (st == NDF_OK && o->map && o->offset % (int64_t)es == 0 &&
      ndf_io_map(path, o->offset, bytes, o->map == 2, &img->map_base, &img->map_len, err, errlen) ==
          NDF_OK) {
    close(fd);
    a.data = (char *)img->map_base + o->offset % sysconf(_SC_PAGESIZE);
    img->a = a;
    img->format = NDF_FORMAT_RAW;
    for (int d = 0; d < o->ndim; d++)
      img->spacing[d] = o->spacing[d] > 0 ? o->spacing[d] : 0;
    return NDF_OK;
  }
  if (st == NDF_OK) st = ndf_io_check_alloc(path, n, es, err, errlen);
  FILE *f = st == NDF_OK ? fdopen(fd, "rb") : NULL;
  if (st == NDF_OK && !f) st = ndf_io_error(err, errlen, NDF_EIO, path, "%s", strerror(errno));
  void *data = st == NDF_OK ? malloc((size_t)bytes) : NULL;
  if (st == NDF_OK && !data) st = ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  if (st == NDF_OK && (fseeko(f, (off_t)o->offset, SEEK_SET) != 0 ||
                       fread(data, 1, (size_t)bytes, f) != (size_t)bytes))
    st = ndf_io_error(err, errlen, NDF_EIO, path, "read failed");
  if (f)
    fclose(f);
  else
    close(fd);
  if (st != NDF_OK) {
    free(data);
    return st;
  }
  a.data = data;
  img->a = a;
  img->format = NDF_FORMAT_RAW;
  for (int d = 0; d < o->ndim; d++)
    img->spacing[d] = o->spacing[d] > 0 ? o->spacing[d] : 0;
  return NDF_OK;
}

static ndf_status write_raw(const char *tmp, void *ctx, char *err, size_t errlen) {
  const ndf_array *a = ctx;
  FILE *f = fopen(tmp, "wb");
  if (!f) return ndf_io_error(err, errlen, NDF_EIO, tmp, "%s", strerror(errno));
  size_t n = (size_t)ndf_array_size(a), es = ndf_dtype_size(a->dtype);
  int bad = fwrite(a->data, es, n, f) != n;
  bad |= fclose(f) != 0;
  return bad ? ndf_io_error(err, errlen, NDF_EIO, tmp, "write failed: %s", strerror(errno))
             : NDF_OK;
}

ndf_status ndf__raw_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  return ndf_io_write_via_temp(path, write_raw, (void *)&img->a, err, errlen);
}
