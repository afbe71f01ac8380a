/* image.c - dispatch over the file formats, and what they share. */
#define _DEFAULT_SOURCE /* mkstemps */
#include "image.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats.h"

typedef ndf_status (*read_fn)(const char *, const ndf_read_opts *, ndf_image *, char *, size_t);
typedef ndf_status (*write_fn)(const char *, const ndf_image *, char *, size_t);

static const struct {
  ndf_format f;
  const char *name;
  const char *suffixes; /* space-separated, matched case-insensitively at the name's end */
  read_fn read;
  write_fn write;
} formats[] = {
    {NDF_FORMAT_NPY, "npy", ".npy", ndf__npy_read, ndf__npy_write},
#ifdef NDF_HAVE_NIFTI
    {NDF_FORMAT_NIFTI, "nifti", ".nii .nii.gz", ndf__nifti_read, ndf__nifti_write},
#endif
    {NDF_FORMAT_RAW, "raw", ".raw .bin", ndf__raw_read, ndf__raw_write},
#ifdef NDF_HAVE_FITS
    {NDF_FORMAT_FITS, "fits", ".fits .fit .fts .fits.gz .fit.gz .fts.gz .fz", ndf__fits_read,
     ndf__fits_write},
#endif
#ifdef NDF_HAVE_TIFF
    {NDF_FORMAT_TIFF, "tiff", ".tif .tiff", ndf__tiff_read, ndf__tiff_write},
#endif
#ifdef NDF_HAVE_PNG
    {NDF_FORMAT_PNG, "png", ".png", ndf__png_read, ndf__png_write},
#endif
};
enum { NFORMATS = sizeof formats / sizeof formats[0] };

static int ends_with(const char *s, const char *suffix, size_t k) {
  size_t n = strlen(s);
  return n > k && !strncasecmp(s + n - k, suffix, k);
}

ndf_format ndf_format_from_name(const char *path) {
  for (int i = 0; i < NFORMATS; i++)
    for (const char *p = formats[i].suffixes; *p;) {
      size_t k = strcspn(p, " ");
      if (ends_with(path, p, k)) return formats[i].f;
      p += k + (p[k] == ' ');
    }
  /* "file.fits[SCI]": cfitsio's HDU selection after a FITS name */
  const char *b = strrchr(path, '[');
  size_t n = strlen(path);
  if (b && b > path && path[n - 1] == ']') {
    char *base = strndup(path, (size_t)(b - path));
    ndf_format f = base ? ndf_format_from_name(base) : NDF_FORMAT_AUTO;
    free(base);
    if (f == NDF_FORMAT_FITS) return f;
  }
  return NDF_FORMAT_AUTO;
}

const char *ndf_format_name(ndf_format f) {
  for (int i = 0; i < NFORMATS; i++)
    if (formats[i].f == f) return formats[i].name;
  return "auto";
}

int ndf_format_built_in(ndf_format f) {
  for (int i = 0; i < NFORMATS; i++)
    if (formats[i].f == f) return 1;
  return 0;
}

ndf_status ndf_io_error(char *err, size_t errlen, ndf_status s, const char *path, const char *fmt,
                        ...) {
  if (err && errlen) {
    int k = snprintf(err, errlen, "%s: ", path);
    if (k >= 0 && (size_t)k < errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
      va_end(ap);
    }
  }
  return s;
}

void *ndf_io_meta(const ndf_image *img, ndf_format f) {
  return img->format == f ? img->meta : NULL;
}

void ndf_image_init(ndf_image *img) {
  memset(img, 0, sizeof *img);
  img->channel_axis = -1;
}

void ndf_image_free(ndf_image *img) {
  if (!img) return;
  free(img->a.data);
  if (img->meta && img->meta_free) img->meta_free(img->meta);
  ndf_image_init(img);
}

static int find(ndf_format f) {
  for (int i = 0; i < NFORMATS; i++)
    if (formats[i].f == f) return i;
  return -1;
}

ndf_status ndf_image_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                          size_t errlen) {
  ndf_format f = o && o->format ? o->format : ndf_format_from_name(path);
  if (f == NDF_FORMAT_AUTO) {
    if (o && o->ndim > 0)
      f = NDF_FORMAT_RAW;
    else
      return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                          "unknown file type (expected .nii, .nii.gz, .tif, .tiff, .png, .fits, "
                          ".npy, or a raw file with --shape and --dtype)");
  }
  int i = find(f);
  if (i < 0) return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path, "format not built in");
  if (f == NDF_FORMAT_RAW && !(o && o->ndim > 0))
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "a raw file needs its shape and dtype (--shape, --dtype)");
  ndf_image t;
  ndf_image_init(&t);
  ndf_status st = formats[i].read(path, o, &t, err, errlen);
  if (st == NDF_OK) *img = t;
  return st;
}

ndf_status ndf_image_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  if (!img || !img->a.data || !ndf_array_size(&img->a) || !ndf_dtype_size(img->a.dtype) ||
      img->a.place.kind != NDF_PLACE_HOST)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "not a valid host array");
  ndf_format f = ndf_format_from_name(path);
  int i = find(f == NDF_FORMAT_AUTO ? NDF_FORMAT_RAW : f);
  if (i < 0) return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path, "format not built in");
  return formats[i].write(path, img, err, errlen);
}

/* The extension a temporary file must keep: ".nii.gz" for "a/b.nii.gz", ".tif" for
 * "a/b.c.tif", "" for none. */
static const char *extension(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  if (!dot || dot == base) return "";
  if (!strcasecmp(dot, ".gz") || !strcasecmp(dot, ".bz2") || !strcasecmp(dot, ".fz")) {
    const char *p = dot;
    while (p > base && p[-1] != '.')
      p--;
    if (p > base + 1) return p - 1;
  }
  return dot;
}

ndf_status ndf_io_write_via_temp(const char *path,
                                 ndf_status (*write_tmp)(const char *, void *, char *, size_t),
                                 void *ctx, char *err, size_t errlen) {
  const char *ext = extension(path), *slash = strrchr(path, '/');
  size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0, n = strlen(path) + 32;
  char *tmp = malloc(n);
  if (!tmp) return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  /* "<dir>/.<base>.tmpXXXXXX<ext>": hidden, in the target's directory (so rename is atomic) */
  snprintf(tmp, n, "%.*s.%.*s.tmpXXXXXX%s", (int)dirlen, path,
           (int)(strlen(path) - dirlen - strlen(ext)), path + dirlen, ext);
  int fd = mkstemps(tmp, (int)strlen(ext));
  if (fd < 0) {
    ndf_status s =
        ndf_io_error(err, errlen, NDF_EIO, path, "cannot create a file there: %s", strerror(errno));
    free(tmp);
    return s;
  }
  close(fd);
  /* Libraries create the file by name; some refuse to overwrite, so the placeholder goes.
   * Its name stays ours: mkstemps picked one nobody else uses in this directory. */
  unlink(tmp);
  ndf_status st = write_tmp(tmp, ctx, err, errlen);
  if (st == NDF_OK) {
    mode_t mask = umask(0);
    umask(mask);
    chmod(tmp, 0666 & ~mask);
    if (rename(tmp, path) != 0)
      st = ndf_io_error(err, errlen, NDF_EIO, path, "cannot rename the written file: %s",
                        strerror(errno));
  }
  if (st != NDF_OK) unlink(tmp);
  free(tmp);
  return st;
}
