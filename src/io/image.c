/* SPDX-License-Identifier: BSD-3-Clause */
/* image.c - dispatch over the file formats, and what they share. */
#define _DEFAULT_SOURCE /* mkstemps, MAP_ANONYMOUS */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>

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
  img->time_axis = -1;
}

/* ---- read limit ---- */

static int64_t read_limit; /* 0: the default */

void ndf_io_set_read_limit(int64_t bytes) { read_limit = bytes > 0 ? bytes : 0; }

int ndf_io_parse_size(const char *s, int64_t *bytes) {
  if (!s) return 0;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || !(v > 0)) return 0;
  const char *units = "KMGT";
  const char *u = *end ? strchr(units, *end >= 'a' ? *end - 32 : *end) : NULL;
  if (*end) {
    if (!u) return 0;
    for (const char *k = units; k <= u; k++)
      v *= 1024;
    end++;
    if (*end == 'B' || *end == 'b') end++;      /* "2GB" */
    if (*end == 'i' && end[1] == 'B') end += 2; /* "2GiB" */
  }
  if (*end || v >= 9.2e18 || v < 1) return 0;
  *bytes = (int64_t)v;
  return 1;
}

/* Half the physical memory, or 4 GiB where the system does not say. */
static int64_t default_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return (int64_t)4 << 30;
  return (int64_t)((double)pages * (double)page / 2);
}

/* NDF_READ_LIMIT: 1 and its size in *b, 0 where unset, -1 where it is not a size. */
static int env_limit(int64_t *b, const char **text) {
  *text = getenv("NDF_READ_LIMIT");
  if (!*text || !**text) return 0;
  return ndf_io_parse_size(*text, b) ? 1 : -1;
}

int64_t ndf_io_read_limit(void) {
  int64_t b;
  const char *text;
  if (read_limit > 0) return read_limit;
  return env_limit(&b, &text) == 1 ? b : default_limit();
}

/* A byte count for messages: "1.33 GB (1331691520 bytes)". */
static void show_bytes(char *out, size_t n, double b) {
  const char *u[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int k = 0;
  double v = b;
  while (v >= 1024 && k < 6) {
    v /= 1024;
    k++;
  }
  if (k)
    snprintf(out, n, "%.3g %s (%.0f bytes)", v, u[k], b);
  else
    snprintf(out, n, "%.0f bytes", b);
}

ndf_status ndf_io_check_alloc(const char *path, int64_t count, size_t elem, char *err,
                              size_t errlen) {
  const char *env;
  int64_t lim = read_limit;
  const int from_env = lim > 0 ? 0 : env_limit(&lim, &env);
  if (from_env < 0)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "NDF_READ_LIMIT='%s' is not a size (a byte count, or with K, M, G or T)",
                        env);
  if (!from_env && read_limit <= 0) lim = default_limit();
  if (count < 0 || elem == 0 || (uint64_t)count > (uint64_t)INT64_MAX / elem)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "the image's size overflows");
  const int64_t need = count * (int64_t)elem;
  if (need > lim || (uint64_t)need > (uint64_t)SIZE_MAX) {
    char a[64], b[64];
    show_bytes(a, sizeof a, (double)need);
    show_bytes(b, sizeof b, (double)lim);
    return ndf_io_error(err, errlen, NDF_ENOMEM, path,
                        "the image needs %s in memory, over the read limit of %s (raise it with "
                        "--read-limit or NDF_READ_LIMIT)",
                        a, b);
  }
  return NDF_OK;
}

/* ---- threads ---- */

static int io_threads;

void ndf_io_set_threads(int threads) { io_threads = threads > 0 ? threads : 0; }

int ndf_io_threads(void) { return io_threads > 0 ? io_threads : omp_get_max_threads(); }

/* ---- special files ---- */

static ndf_status not_regular(const char *path, mode_t m, char *err, size_t errlen) {
  const char *what = S_ISDIR(m)    ? "a directory"
                     : S_ISFIFO(m) ? "a FIFO (named pipe)"
                     : S_ISSOCK(m) ? "a socket"
                     : S_ISCHR(m)  ? "a character device"
                     : S_ISBLK(m)  ? "a block device"
                                   : "a special file";
  return ndf_io_error(err, errlen, NDF_EIO, path, "is %s, not a regular file%s", what,
                      S_ISDIR(m) ? "" : " (ndfilt reads files only: save a stream to one first)");
}

ndf_status ndf_io_check_regular(const char *path, int64_t *size, char *err, size_t errlen) {
  struct stat sb;
  if (stat(path, &sb) != 0) return ndf_io_error(err, errlen, NDF_EIO, path, "%s", strerror(errno));
  if (!S_ISREG(sb.st_mode)) return not_regular(path, sb.st_mode, err, errlen);
  if (size) *size = (int64_t)sb.st_size;
  return NDF_OK;
}

ndf_status ndf_io_open_regular(const char *path, int *fd, int64_t *size, char *err, size_t errlen) {
  *fd = -1;
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f < 0) return ndf_io_error(err, errlen, NDF_EIO, path, "%s", strerror(errno));
  struct stat sb;
  if (fstat(f, &sb) != 0) {
    int e = errno;
    close(f);
    return ndf_io_error(err, errlen, NDF_EIO, path, "%s", strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(f);
    return not_regular(path, sb.st_mode, err, errlen);
  }
  int fl = fcntl(f, F_GETFL);
  if (fl >= 0) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
  *fd = f;
  if (size) *size = (int64_t)sb.st_size;
  return NDF_OK;
}

/* ---- the temporary file of a write in progress ---- */

static char pending[4096];
static volatile sig_atomic_t have_pending;

void ndf_io_remove_pending(void) {
  if (have_pending) unlink(pending);
}

/* Messages name the target, not the hidden temporary file a library may have named. */
static void name_target(char *err, size_t errlen, const char *tmp, const char *path) {
  if (!err || !errlen) return;
  const size_t nt = strlen(tmp), np = strlen(path);
  char *hit = strstr(err, tmp);
  if (!hit) return;
  size_t tail = strlen(hit + nt);
  if ((size_t)(hit - err) + np + tail + 1 > errlen) return;
  memmove(hit + np, hit + nt, tail + 1);
  memcpy(hit, path, np);
}

void ndf_image_free(ndf_image *img) {
  if (!img) return;
  if (img->map_base)
    munmap(img->map_base, img->map_len);
  else
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
  /* Never block on a FIFO or read a device: the file itself (a FITS name's "[HDU]" aside)
   * must be a regular one. Readers that open it themselves check again on their descriptor. */
  const char *b = f == NDF_FORMAT_FITS ? strrchr(path, '[') : NULL;
  char *base =
      b && b > path && path[strlen(path) - 1] == ']' ? strndup(path, (size_t)(b - path)) : NULL;
  ndf_status st = ndf_io_check_regular(base ? base : path, NULL, err, errlen);
  free(base);
  if (st != NDF_OK) return st;
  ndf_image t;
  ndf_image_init(&t);
  st = formats[i].read(path, o, &t, err, errlen);
  if (st == NDF_OK) *img = t;
  return st;
}

ndf_status ndf_image_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  if (!img || !img->a.data || !ndf_array_size(&img->a) || !ndf_dtype_size(img->a.dtype) ||
      img->a.place.kind != NDF_PLACE_HOST)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "not a valid host array");
  ndf_format f = ndf_format_from_name(path);
  if (f == NDF_FORMAT_AUTO)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "unknown output type (expected .nii, .nii.gz, .tif, .tiff, .png, .fits, "
                        ".fits.gz, .fz, .npy, or .raw/.bin for headerless samples)");
  int i = find(f);
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
  /* the pending file: this one, then again the enclosing write's (ndf_image_write_mapped's
   * format writer writes within its temporary file's write) */
  char outer[sizeof pending];
  const int had = have_pending;
  if (had) memcpy(outer, pending, sizeof outer);
  const int track = strlen(tmp) < sizeof pending;
  if (track) {
    have_pending = 0;
    memcpy(pending, tmp, strlen(tmp) + 1);
    have_pending = 1;
  }
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
  if (st != NDF_OK) {
    unlink(tmp);
    name_target(err, errlen, tmp, path);
  }
  if (track) {
    have_pending = 0;
    if (had) {
      memcpy(pending, outer, sizeof outer);
      have_pending = 1;
    }
  }
  free(tmp);
  return st;
}

ndf_status ndf_io_map(const char *path, int64_t off, int64_t n, int writable, void **base,
                      size_t *len, char *err, size_t errlen) {
  const int64_t page = sysconf(_SC_PAGESIZE), start = off / page * page;
  *base = NULL;
  *len = (size_t)(off - start + n);
  const int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return ndf_io_error(err, errlen, NDF_EIO, path, "cannot open: %s", strerror(errno));
  void *b =
      mmap(NULL, *len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, (off_t)start);
  const int e = errno;
  close(fd);
  if (b == MAP_FAILED)
    return ndf_io_error(err, errlen, NDF_EIO, path, "cannot map its samples: %s", strerror(e));
  *base = b;
  return NDF_OK;
}

/* ---- writing through a mapping ---- */

typedef struct mapped_ctx {
  const ndf_image *img;
  int format;
  ndf_status (*fill)(void *ctx, ndf_array *out, char *err, size_t errlen);
  void *ctx;
} mapped_ctx;

static ndf_status write_mapped_tmp(const char *tmp, void *c, char *err, size_t errlen) {
  const mapped_ctx *m = c;
  const ndf_array *a = &m->img->a;
  const size_t bytes = (size_t)ndf_array_size(a) * ndf_dtype_size(a->dtype);
  /* zeros from untouched anonymous pages: the kernel's zero page, no memory of ours */
  void *zeros = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (zeros == MAP_FAILED)
    return ndf_io_error(err, errlen, NDF_ENOMEM, tmp, "cannot map %zu bytes: %s", bytes,
                        strerror(errno));
  ndf_image z = *m->img;
  z.a = ndf_array_contiguous(a->dtype, a->ndim, a->shape, zeros);
  z.map_base = NULL;
  ndf_status st = formats[m->format].write(tmp, &z, err, errlen);
  munmap(zeros, bytes);
  if (st != NDF_OK) return st;
  ndf_read_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.format = formats[m->format].f;
  ro.map = 2;
  if (ro.format == NDF_FORMAT_RAW) {
    ro.ndim = a->ndim;
    memcpy(ro.shape, a->shape, sizeof ro.shape);
    ro.dtype = a->dtype;
  }
  ndf_image r;
  ndf_image_init(&r);
  st = formats[m->format].read(tmp, &ro, &r, err, errlen);
  if (st != NDF_OK) return st;
  int same = r.map_base && r.a.dtype == a->dtype && r.a.ndim == a->ndim;
  for (int d = 0; same && d < a->ndim; d++)
    same = r.a.shape[d] == a->shape[d];
  if (!same)
    st = ndf_io_error(err, errlen, NDF_EUNSUPPORTED, tmp,
                      "the %s writer stores %s samples otherwise than the array holds them: they "
                      "cannot be written a part at a time",
                      ndf_format_name(ro.format), ndf_dtype_name(a->dtype));
  if (st == NDF_OK) st = m->fill(m->ctx, &r.a, err, errlen);
  if (st == NDF_OK && msync(r.map_base, r.map_len, MS_SYNC) != 0)
    st = ndf_io_error(err, errlen, NDF_EIO, tmp, "write failed: %s", strerror(errno));
  ndf_image_free(&r);
  return st;
}

int ndf_image_writes_mapped(const char *path) {
  const ndf_format f = ndf_format_from_name(path);
  const size_t n = strlen(path);
  const int gz = n > 3 && !strcmp(path + n - 3, ".gz");
  return (f == NDF_FORMAT_NPY || f == NDF_FORMAT_NIFTI || f == NDF_FORMAT_RAW) && !gz &&
         find(f) >= 0;
}

ndf_status ndf_image_write_mapped(const char *path, const ndf_image *img,
                                  ndf_status (*fill)(void *ctx, ndf_array *out, char *err,
                                                     size_t errlen),
                                  void *ctx, char *err, size_t errlen) {
  const ndf_format f = ndf_format_from_name(path);
  if (!ndf_image_writes_mapped(path))
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "written a part at a time only as .npy, .nii or raw (.raw, .bin)");
  const int i = find(f);
  if (i < 0) return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path, "format not built in");
  if (!img || img->a.ndim < 1 || !ndf_array_size(&img->a) || !ndf_dtype_size(img->a.dtype))
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "not a valid image");
  mapped_ctx m = {img, i, fill, ctx};
  return ndf_io_write_via_temp(path, write_mapped_tmp, &m, err, errlen);
}
