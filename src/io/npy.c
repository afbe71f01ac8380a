/* SPDX-License-Identifier: BSD-3-Clause */
/* npy.c - numpy .npy reader (C or Fortran order) and atomic writer. */
#include "npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/elem.h"
#include "formats.h"

static const struct {
  const char *descr;
  ndf_dtype t;
} descrs[] = {{"|u1", NDF_U8},  {"<u1", NDF_U8},  {"<u2", NDF_U16},
              {"<i2", NDF_I16}, {"<f4", NDF_F32}, {"<f8", NDF_F64}};

/* Finds the value text after 'key': in the header dict. */
static const char *dict_value(const char *h, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(h, pat);
  if (!p) return NULL;
  p = strchr(p + strlen(pat), ':');
  if (!p) return NULL;
  p++;
  while (*p == ' ')
    p++;
  return p;
}

/* The n elements of es bytes at src, a Fortran-order array of shape (nd axes, the first
 * fastest in src), into their places in dst, the C-order array of that shape; pos[] is the
 * index of src's first element, and moves on past the last. */
static void scatter(char *dst, const char *src, int64_t n, size_t es, int nd, const int64_t *shape,
                    int64_t *pos) {
  int64_t cs[NDF_MAX_DIMS], at = 0, s = 1; /* C-order strides, and pos's offset in dst */
  for (int d = nd - 1; d >= 0; d--) {
    cs[d] = s;
    s *= shape[d];
  }
  for (int d = 0; d < nd; d++)
    at += pos[d] * cs[d];
  for (int64_t i = 0; i < n;) {
    /* along axis 0 (src's fastest, dst's slowest) to the end of its row or of src */
    int64_t run = shape[0] - pos[0] < n - i ? shape[0] - pos[0] : n - i;
    switch (es) {
#define RUN(T)                                                                                     \
  for (int64_t k = 0; k < run; k++)                                                                \
    memcpy(dst + (size_t)(at + k * cs[0]) * sizeof(T), src + (size_t)(i + k) * sizeof(T),          \
           sizeof(T));                                                                             \
  break;
    case 1: RUN(uint8_t)
    case 2: RUN(uint16_t)
    case 4: RUN(uint32_t)
    default: RUN(uint64_t)
#undef RUN
    }
    i += run;
    pos[0] += run;
    at += run * cs[0];
    for (int d = 0; d + 1 < nd && pos[d] == shape[d]; d++) { /* carry */
      at += cs[d + 1] - pos[d] * cs[d];
      pos[d] = 0;
      pos[d + 1]++;
    }
  }
}

/* ndf_npy_read; map (ndf_read_opts.map): a C-order file's samples mapped into *base, *len. */
static ndf_status npy_read(const char *path, ndf_array *a, int map, void **base, size_t *len,
                           char *err, size_t errlen) {
  int fd;
  int64_t size;
  ndf_status st = ndf_io_open_regular(path, &fd, &size, err, errlen);
  if (st != NDF_OK) return st;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    int e = errno;
    close(fd);
    return ndf_io_error(err, errlen, NDF_ENOMEM, path, "cannot read it: %s", strerror(e));
  }
  unsigned char pre[12];
  char *h = NULL, *chunk = NULL;
  void *data = NULL;
  st = NDF_EINVAL;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
    st = ndf_io_error(err, errlen, NDF_EINVAL, path, "not a .npy file (bad magic)");
    goto out;
  }
  size_t hlen;
  if (pre[6] == 1) {
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, f) != 2) {
      st = ndf_io_error(err, errlen, NDF_EINVAL, path, "truncated header");
      goto out;
    }
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  } else {
    st = ndf_io_error(err, errlen, NDF_EINVAL, path, "unsupported .npy version %d.%d", pre[6],
                      pre[7]);
    goto out;
  }
  if (hlen > (1u << 20)) {
    st = ndf_io_error(err, errlen, NDF_EINVAL, path, "header too large");
    goto out;
  }
  h = malloc(hlen + 1);
  if (!h || fread(h, 1, hlen, f) != hlen) {
    st = ndf_io_error(err, errlen, h ? NDF_EINVAL : NDF_ENOMEM, path,
                      h ? "truncated header" : "out of memory");
    goto out;
  }
  h[hlen] = 0;
  const int64_t here = (pre[6] == 1 ? 10 : 12) + (int64_t)hlen;
  const char *d = dict_value(h, "descr"), *fo = dict_value(h, "fortran_order"),
             *sh = dict_value(h, "shape");
  if (!d || !fo || !sh || *d != '\'' || *sh != '(' ||
      (strncmp(fo, "True", 4) && strncmp(fo, "False", 5))) {
    st = ndf_io_error(err, errlen, NDF_EINVAL, path, "malformed header");
    goto out;
  }
  ndf_dtype t = 0;
  for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
    if (!strncmp(d + 1, descrs[i].descr, 3) && d[4] == '\'') t = descrs[i].t;
  if (!t) {
    const char *q = strchr(d + 1, '\'');
    st = ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                      "dtype %.*s not supported (u1, u2, i2, f4, f8 little-endian)",
                      q ? (int)(q - d - 1) : 8, d + 1);
    goto out;
  }
  const int fortran = !strncmp(fo, "True", 4);
  int64_t shape[NDF_MAX_DIMS + 1], n = 1;
  int nd = 0;
  const char *p = sh + 1;
  for (;;) {
    while (*p == ' ' || *p == ',')
      p++;
    if (*p == ')') break;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || v <= 0 || nd == NDF_MAX_DIMS) {
      st = ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path, "%s",
                        end == p ? "malformed shape"
                        : v <= 0 ? "empty arrays are not supported"
                                 : "more than 4 dimensions");
      goto out;
    }
    if (errno == ERANGE || v > INT64_MAX / n) {
      st = ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "the header's shape has more elements than can be (a corrupt header?)");
      goto out;
    }
    shape[nd++] = v;
    n *= v;
    p = end + (*end == 'L'); /* Python 2's long integers: (3L, 4L) */
  }
  if (nd == 0) {
    st = ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path, "0-d array");
    goto out;
  }
  const size_t es = ndf_dtype_size(t);
  if ((uint64_t)n > (uint64_t)INT64_MAX / es) {
    st = ndf_io_error(err, errlen, NDF_EINVAL, path,
                      "the header's shape has more bytes than can be (a corrupt header?)");
    goto out;
  }
  const int64_t bytes = n * (int64_t)es;
  if (bytes > size - here) {
    st = ndf_io_error(err, errlen, NDF_EINVAL, path,
                      "truncated data: the header's shape needs %lld bytes, the file has %lld "
                      "after it",
                      (long long)bytes, (long long)(size - here));
    goto out;
  }
  /* the samples where they lie, aligned to their type (else, or where the file system cannot
   * map them, read) */
  if (map && (!fortran || nd == 1) && here % (int64_t)es == 0 &&
      ndf_io_map(path, here, bytes, map == 2, base, len, err, errlen) == NDF_OK) {
    *a = ndf_array_contiguous(t, nd, shape, (char *)*base + here % sysconf(_SC_PAGESIZE));
    st = NDF_OK;
    goto out;
  }
  st = ndf_io_check_alloc(path, n, es, err, errlen);
  if (st != NDF_OK) goto out;
  data = malloc((size_t)bytes);
  if (!data) {
    st = ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
    goto out;
  }
  if (!fortran || nd == 1) {
    if (fread(data, 1, (size_t)bytes, f) != (size_t)bytes) {
      st = ndf_io_error(err, errlen, NDF_EIO, path, "read failed");
      goto out;
    }
  } else { /* Fortran order: read a chunk at a time into C order */
    enum { CHUNK = 1 << 20 };
    chunk = malloc(CHUNK);
    int64_t pos[NDF_MAX_DIMS] = {0}, per = CHUNK / (int64_t)es;
    for (int64_t i = 0; chunk && i < n; i += per) {
      int64_t m = n - i < per ? n - i : per;
      if (fread(chunk, es, (size_t)m, f) != (size_t)m) {
        st = ndf_io_error(err, errlen, NDF_EIO, path, "read failed");
        goto out;
      }
      scatter(data, chunk, m, es, nd, shape, pos);
    }
    if (!chunk) {
      st = ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
      goto out;
    }
  }
  *a = ndf_array_contiguous(t, nd, shape, data);
  data = NULL;
  st = NDF_OK;
out:
  free(h);
  free(chunk);
  free(data);
  fclose(f);
  return st;
}

ndf_status ndf_npy_read(const char *path, ndf_array *a, char *err, size_t errlen) {
  void *base;
  size_t len;
  return npy_read(path, a, 0, &base, &len, err, errlen);
}

/* The header and the samples into f; 0, or -1 if a write failed. */
static int fill_npy(const ndf_array *a, FILE *f) {
  static const char *names[] = {NULL, "|u1", "<u2", "<i2", "<f4", "<f8"};
  char dict[256];
  int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   names[a->dtype]);
  for (int d = 0; d < a->ndim; d++)
    k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)a->shape[d],
                  d + 1 < a->ndim ? " " : "");
  if (a->ndim > 1) k--; /* numpy writes (3,) but (3, 4) */
  k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
  int total = 10 + k + 1, pad = (64 - total % 64) % 64;
  int hlen = k + pad + 1;
  unsigned char pre[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 255), (unsigned char)(hlen >> 8)};
  fwrite(pre, 1, 10, f);
  fwrite(dict, 1, (size_t)k, f);
  for (int i = 0; i < pad; i++)
    fputc(' ', f);
  fputc('\n', f);
  size_t es = ndf_dtype_size(a->dtype);
  int64_t n = ndf_array_size(a);
  if (ndf__is_contiguous(a)) return fwrite(a->data, es, (size_t)n, f) == (size_t)n ? 0 : -1;
  for (int64_t i = 0; i < n; i++)
    if (fwrite((const char *)a->data + ndf__offset(a, i) * (int64_t)es, es, 1, f) != 1) return -1;
  return 0;
}

static ndf_status write_npy(const char *tmp, void *ctx, char *err, size_t errlen) {
  FILE *f = fopen(tmp, "wb");
  if (!f) return ndf_io_error(err, errlen, NDF_EIO, tmp, "%s", strerror(errno));
  int bad = fill_npy(ctx, f) != 0 || ferror(f);
  bad |= fclose(f) != 0;
  return bad ? ndf_io_error(err, errlen, NDF_EIO, tmp, "write failed: %s", strerror(errno))
             : NDF_OK;
}

ndf_status ndf_npy_write(const char *path, const ndf_array *a, char *err, size_t errlen) {
  if (!a || !a->data || !ndf_array_size(a) || !ndf_dtype_size(a->dtype) ||
      a->place.kind != NDF_PLACE_HOST)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "not a valid host array");
  return ndf_io_write_via_temp(path, write_npy, (void *)a, err, errlen);
}

/* ---- the image interface (formats.h) ---- */

ndf_status ndf__npy_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                         size_t errlen) {
  ndf_status st =
      npy_read(path, &img->a, o ? o->map : 0, &img->map_base, &img->map_len, err, errlen);
  if (st == NDF_OK) img->format = NDF_FORMAT_NPY;
  return st;
}

ndf_status ndf__npy_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  return ndf_npy_write(path, &img->a, err, errlen);
}
