/* SPDX-License-Identifier: BSD-3-Clause */
/* png.c - PNG over libpng: gray as (h, w), colour as planar channels (c, h, w). */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats.h"

/* PNG's 31-bit sizes, and the most samples an image may hold here. */
#define PNG_MAX_SIDE 0x7fffffffu
#define MAX_SAMPLES ((uint64_t)1 << 31)

typedef struct png_txt {
  int compression; /* tEXt, zTXt or iTXt (libpng's PNG_*TEXT_COMPRESSION_*) */
  char *key, *text, *lang, *lang_key;
} png_txt;

/* The colour chunks, kept as they are: libpng, left to parse them, would also report the gamma
 * an sRGB chunk implies as a gAMA chunk, and a copy would gain chunks. */
static const png_byte colour_chunks[] = "gAMA\0cHRM\0sRGB\0iCCP";
enum { NCOLOUR = 4 };

typedef struct png_raw {
  png_byte name[5];
  png_byte *data;
  size_t size;
} png_raw;

/* What a PNG writer takes from a file read before. */
typedef struct png_meta {
  int bit_depth, color_type; /* the file's, before palettes and small depths were expanded */
  int channels;              /* the array's */
  int has_phys, phys_unit;
  png_uint_32 xppm, yppm;
  int has_offs, offs_unit; /* oFFs: the image's place on a page, in pixels or micrometres */
  png_int_32 xoff, yoff;
  int nraw;
  png_raw *raw; /* the colour chunks */
  int ntext;
  png_txt *text;
} png_meta;

static void meta_free(void *p) {
  png_meta *m = p;
  if (!m) return;
  for (int i = 0; i < m->ntext; i++) {
    free(m->text[i].key);
    free(m->text[i].text);
    free(m->text[i].lang);
    free(m->text[i].lang_key);
  }
  free(m->text);
  for (int i = 0; i < m->nraw; i++)
    free(m->raw[i].data);
  free(m->raw);
  free(m);
}

static int little_endian(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one;
}

/* libpng reports errors by calling this, which must not return: the message is kept (the first
 * one, which is the cause) and control goes back to the setjmp of the reader or writer. */
typedef struct msgbuf {
  char msg[256];
} msgbuf;

static void on_error(png_structp png, png_const_charp msg) {
  msgbuf *b = png_get_error_ptr(png);
  if (!b->msg[0]) snprintf(b->msg, sizeof b->msg, "%s", msg);
  png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* A reader's warnings. libpng only warns of an image data stream with more in it than the
 * image, or data after its end: a corrupt file, refused like one that has too little. */
static void on_read_warning(png_structp png, png_const_charp msg) {
  if (!strncmp(msg, "IDAT", 4)) png_error(png, msg);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* ---- reading ---- */

typedef struct prd {
  msgbuf b; /* first: libpng's error pointer */
  const char *path;
  FILE *f;
  size_t alloc_max; /* the largest block libpng may take */
  uint64_t fsize, pos;
  png_structp png;
  png_infop info;
  unsigned char *data, *buf;
  png_meta *meta;
} prd;

/* libpng's allocations, bounded: a chunk's length over libpng's limit is only a warning to it, so
 * a 100-byte file could have it allocate 2 GB for a text chunk. A chunk refused here is skipped.
 * 16 MB, and once the image's size is checked, enough for two of its rows. */
enum { CHUNK_MAX = 16 << 20 };

static png_voidp bounded_malloc(png_structp png, png_alloc_size_t n) {
  prd *r = png_get_mem_ptr(png);
  return n <= r->alloc_max ? malloc(n) : NULL;
}

static void plain_free(png_structp png, png_voidp p) {
  (void)png;
  free(p);
}

/* libpng's input, so that a short file says where it ends. */
static void read_fn(png_structp png, png_bytep out, size_t n) {
  prd *r = png_get_io_ptr(png);
  size_t got = fread(out, 1, n, r->f);
  r->pos += got;
  if (got != n) {
    snprintf(r->b.msg, sizeof r->b.msg, "truncated: the file ends at byte %llu, %zu more needed",
             (unsigned long long)r->pos, n - got);
    png_error(png, r->b.msg);
  }
}

static ndf_status keep_meta(prd *r, int depth, int ctype, int channels) {
  png_meta *m = calloc(1, sizeof *m);
  if (!m) return NDF_ENOMEM;
  r->meta = m;
  m->bit_depth = depth;
  m->color_type = ctype;
  m->channels = channels;
  png_structp png = r->png;
  png_infop info = r->info;
  m->has_phys = png_get_pHYs(png, info, &m->xppm, &m->yppm, &m->phys_unit) != 0;
  m->has_offs = png_get_oFFs(png, info, &m->xoff, &m->yoff, &m->offs_unit) != 0;
  png_unknown_chunkp u;
  int nu = png_get_unknown_chunks(png, info, &u);
  if (nu > 0) {
    m->raw = calloc((size_t)nu, sizeof *m->raw);
    if (!m->raw) return NDF_ENOMEM;
    for (int i = 0; i < nu; i++) {
      png_raw *k = &m->raw[m->nraw++];
      memcpy(k->name, u[i].name, 5);
      k->size = u[i].size;
      if (k->size && !(k->data = malloc(k->size))) return NDF_ENOMEM;
      if (k->size) memcpy(k->data, u[i].data, k->size);
    }
  }
  png_textp t;
  int n = png_get_text(png, info, &t, NULL);
  if (n > 0) {
    m->text = calloc((size_t)n, sizeof *m->text);
    if (!m->text) return NDF_ENOMEM;
    for (int i = 0; i < n; i++) {
      png_txt *k = &m->text[m->ntext++];
      k->compression = t[i].compression;
      k->key = dup_or_null(t[i].key);
      k->text = strdup(t[i].text ? t[i].text : "");
      k->lang = dup_or_null(t[i].lang);
      k->lang_key = dup_or_null(t[i].lang_key);
      if (!k->key || !k->text || (t[i].lang && !k->lang) || (t[i].lang_key && !k->lang_key))
        return NDF_ENOMEM;
    }
  }
  return NDF_OK;
}

/* w x h pixels of c channels of es bytes, against the read limit. */
static ndf_status check_alloc(const prd *r, png_uint_32 w, png_uint_32 h, int c, size_t es,
                              char *err, size_t errlen) {
  int64_t n = (int64_t)w * h, cap = INT64_MAX / (int64_t)es;
  return ndf_io_check_alloc(r->path, n > cap / c ? cap : n * c, es, err, errlen);
}

/* The decoding; libpng's errors come back to its setjmp. Everything it changes lives in *r (not
 * in locals of this function), so nothing is lost on the way back. */
static ndf_status decode(prd *r, ndf_image *img, char *err, size_t errlen) {
  if (setjmp(png_jmpbuf(r->png))) {
    if (strstr(r->b.msg, "ut of memory"))
      return ndf_io_error(err, errlen, NDF_ENOMEM, r->path, "out of memory");
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path, "%s%s",
                        strncmp(r->b.msg, "truncated", 9) ? "corrupt: " : "", r->b.msg);
  }
  png_structp png = r->png;
  png_infop info = r->info;
  png_set_read_fn(png, r, read_fn);
  png_set_sig_bytes(png, 8);
  png_set_user_limits(png, PNG_MAX_SIDE, PNG_MAX_SIDE); /* our own ceiling below */
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, colour_chunks, NCOLOUR);
  /* a chunk whose CRC is wrong is an error, an ancillary one too (libpng would skip it) */
  png_set_crc_action(png, PNG_CRC_DEFAULT, PNG_CRC_ERROR_QUIT);
  png_read_info(png, info);
  png_uint_32 w, h;
  int depth, ctype, interlace;
  png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
  int file_channels = ctype == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                      : ctype == PNG_COLOR_TYPE_RGB      ? 3
                      : ctype == PNG_COLOR_TYPE_RGBA     ? 4
                                                         : 1;
  /* The array's size, palettes and transparency expanded (png_set_expand below), within the
   * read limit before anything of that size is allocated. */
  int trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  int channels = ctype == PNG_COLOR_TYPE_PALETTE            ? 3 + trns
                 : file_channels == 1 || file_channels == 3 ? file_channels + trns
                                                            : file_channels;
  ndf_status st = check_alloc(r, w, h, channels, depth == 16 ? 2 : 1, err, errlen);
  if (st != NDF_OK) return st;
  /* Deflate packs at most 1032 bytes into one: a larger image than that is a lie. */
  uint64_t raw = (uint64_t)h * (1 + ((uint64_t)w * file_channels * depth + 7) / 8);
  if ((double)raw > 1032.0 * (double)r->fsize + 4096)
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path,
                        "corrupt or truncated: %ux%u pixels need %llu bytes of image data, more "
                        "than a %llu-byte file can hold",
                        w, h, (unsigned long long)raw, (unsigned long long)r->fsize);
  /* libpng's row buffers come with png_read_update_info: at most 4 channels of 2 bytes */
  if (r->alloc_max < 16 * (size_t)w + 4096) r->alloc_max = 16 * (size_t)w + 4096;
  png_set_expand(png); /* palette -> RGB(A), 1/2/4-bit gray -> 8 bits, tRNS -> alpha */
  if (depth == 16 && little_endian()) png_set_swap(png);
  int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  int C = png_get_channels(png, info), bd = png_get_bit_depth(png, info);
  size_t es = bd == 16 ? 2 : 1, rowbytes = png_get_rowbytes(png, info);
  if ((bd != 8 && bd != 16) || C < 1 || C > 4 || rowbytes != (size_t)w * C * es)
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path, "corrupt: unexpected layout");
  if ((st = check_alloc(r, w, h, C, es, err, errlen)) != NDF_OK) return st;
  if ((uint64_t)w * h * C > MAX_SAMPLES)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, r->path,
                        "%ux%u pixels with %d channels is more than 2^31 samples", w, h, C);
  size_t plane = (size_t)w * h;
  r->data = malloc(plane * C * es);
  /* gray: straight into the array; colour: interleaved rows (the whole image if interlaced) */
  if (C > 1) r->buf = malloc(passes > 1 ? plane * C * es : rowbytes);
  if (!r->data || (C > 1 && !r->buf))
    return ndf_io_error(err, errlen, NDF_ENOMEM, r->path, "out of memory");
  for (int p = 0; p < passes; p++)
    for (png_uint_32 y = 0; y < h; y++) {
      unsigned char *row = C == 1       ? r->data + y * rowbytes
                           : passes > 1 ? r->buf + y * rowbytes
                                        : r->buf;
      png_read_row(png, row, NULL);
      if (C == 1 || (passes > 1 && p + 1 < passes)) continue;
      for (png_uint_32 x = 0; x < w; x++)
        for (int c = 0; c < C; c++)
          memcpy(r->data + ((size_t)c * plane + (size_t)y * w + x) * es,
                 row + ((size_t)x * C + c) * es, es);
    }
  png_read_end(png, info);
  if (keep_meta(r, depth, ctype, C) != NDF_OK)
    return ndf_io_error(err, errlen, NDF_ENOMEM, r->path, "out of memory");

  int64_t shape[3] = {C, h, w};
  int nd = C > 1 ? 3 : 2;
  img->a =
      ndf_array_contiguous(bd == 16 ? NDF_U16 : NDF_U8, nd, C > 1 ? shape : shape + 1, r->data);
  r->data = NULL;
  img->format = NDF_FORMAT_PNG;
  img->channel_axis = C > 1 ? 0 : -1;
  png_meta *m = r->meta;
  if (m->has_phys && m->phys_unit == PNG_RESOLUTION_METER) { /* 0 pixels a metre: no size */
    img->spacing[nd - 1] = m->xppm ? 1000.0 / m->xppm : NAN;
    img->spacing[nd - 2] = m->yppm ? 1000.0 / m->yppm : NAN;
  }
  img->meta = m;
  img->meta_free = meta_free;
  r->meta = NULL;
  return NDF_OK;
}

ndf_status ndf__png_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                         size_t errlen) {
  (void)o;
  prd r;
  memset(&r, 0, sizeof r);
  r.path = path;
  int fd;
  int64_t size;
  ndf_status st = ndf_io_open_regular(path, &fd, &size, err, errlen);
  if (st != NDF_OK) return st;
  if (!(r.f = fdopen(fd, "rb"))) {
    int e = errno;
    close(fd);
    return ndf_io_error(err, errlen, NDF_EIO, path, "%s", strerror(e));
  }
  r.fsize = (uint64_t)size;
  unsigned char sig[8];
  size_t got = fread(sig, 1, 8, r.f);
  r.pos = got;
  if (got >= 4 && png_sig_cmp(sig, 0, got < 8 ? got : 8)) {
    st = ndf_io_error(err, errlen, NDF_EINVAL, path, "not a PNG file (bad signature)");
  } else if (got < 8) {
    st = ndf_io_error(err, errlen, NDF_EINVAL, path,
                      "truncated: %zu bytes, less than a PNG signature", got);
  } else {
    r.alloc_max = CHUNK_MAX;
    r.png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, &r.b, on_error, on_read_warning, &r,
                                     bounded_malloc, plain_free);
    r.info = r.png ? png_create_info_struct(r.png) : NULL;
    st = r.info ? decode(&r, img, err, errlen)
                : ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  }
  if (r.png) png_destroy_read_struct(&r.png, r.info ? &r.info : NULL, NULL);
  fclose(r.f);
  free(r.data);
  free(r.buf);
  meta_free(r.meta);
  return st;
}

/* ---- writing ---- */

typedef struct pwr {
  msgbuf b; /* first: libpng's error pointer */
  const char *path;
  const ndf_image *img;
  const png_meta *m;
  png_uint_32 w, h;
  int C, depth, ctype;
  int has_phys, phys_unit;
  png_uint_32 xppm, yppm;
  int has_offs, offs_unit;
  png_int_32 xoff, yoff;
  FILE *f;
  png_structp png;
  png_infop info;
  unsigned char *row;
  png_textp text;         /* what png_set_text copies from */
  png_unknown_chunkp raw; /* and png_set_unknown_chunks */
} pwr;

static void set_meta(pwr *w) {
  const png_meta *m = w->m;
  png_structp png = w->png;
  png_infop info = w->info;
  if (w->has_phys) png_set_pHYs(png, info, w->xppm, w->yppm, w->phys_unit);
  if (w->has_offs) png_set_oFFs(png, info, w->xoff, w->yoff, w->offs_unit);
  if (!m) return;
  if (m->nraw > 0) {
    png_unknown_chunkp u = w->raw = calloc((size_t)m->nraw, sizeof *u);
    if (!u) png_error(png, "out of memory");
    int n = 0;
    for (int i = 0; i < m->nraw; i++) {
      /* a profile is for gray or for colour: kept while the image stays what it was */
      if (!memcmp(m->raw[i].name, "iCCP", 4) && (m->channels >= 3) != (w->C >= 3)) continue;
      memcpy(u[n].name, m->raw[i].name, 5);
      u[n].data = m->raw[i].data;
      u[n].size = m->raw[i].size;
      u[n++].location = PNG_HAVE_IHDR; /* before PLTE and IDAT, where they belong */
    }
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, colour_chunks, NCOLOUR);
    png_set_unknown_chunks(png, info, u, n);
    for (int i = 0; i < n; i++) /* libpng sets the place from its state; say it again */
      png_set_unknown_chunk_location(png, info, i, PNG_HAVE_IHDR);
  }
  if (m->ntext > 0) {
    png_textp t = w->text = calloc((size_t)m->ntext, sizeof *t);
    if (!t) png_error(png, "out of memory");
    for (int i = 0; i < m->ntext; i++) {
      t[i].compression = m->text[i].compression;
      t[i].key = m->text[i].key;
      t[i].text = m->text[i].text;
      t[i].text_length = strlen(m->text[i].text);
      t[i].lang = m->text[i].lang;
      t[i].lang_key = m->text[i].lang_key;
    }
    png_set_text(png, info, t, m->ntext);
  }
}

/* libpng's output, so that a failed write says why. */
static void write_fn(png_structp png, png_bytep data, size_t n) {
  pwr *w = png_get_io_ptr(png);
  if (fwrite(data, 1, n, w->f) != n) {
    snprintf(w->b.msg, sizeof w->b.msg, "%s", strerror(errno));
    png_error(png, w->b.msg);
  }
}

static void flush_fn(png_structp png) {
  pwr *w = png_get_io_ptr(png);
  if (fflush(w->f) != 0) {
    snprintf(w->b.msg, sizeof w->b.msg, "%s", strerror(errno));
    png_error(png, w->b.msg);
  }
}

static ndf_status encode(pwr *w, char *err, size_t errlen) {
  if (setjmp(png_jmpbuf(w->png)))
    return ndf_io_error(err, errlen, NDF_EIO, w->path, "write failed: %s", w->b.msg);
  png_structp png = w->png;
  png_set_write_fn(png, w, write_fn, flush_fn);
  png_set_user_limits(png, PNG_MAX_SIDE, PNG_MAX_SIDE);
  png_set_benign_errors(png, 1); /* a kept chunk libpng finds unfit is dropped, not fatal */
  png_set_IHDR(png, w->info, w->w, w->h, w->depth, w->ctype, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
  set_meta(w);
  png_write_info(png, w->info);
  if (w->depth == 16 && little_endian()) png_set_swap(png);
  size_t es = w->depth / 8, plane = (size_t)w->w * w->h;
  const unsigned char *src = w->img->a.data;
  for (png_uint_32 y = 0; y < w->h; y++) {
    for (png_uint_32 x = 0; x < w->w; x++)
      for (int c = 0; c < w->C; c++)
        memcpy(w->row + ((size_t)x * w->C + c) * es,
               src + ((size_t)c * plane + (size_t)y * w->w + x) * es, es);
    png_write_row(png, w->row);
  }
  png_write_end(png, w->info);
  return NDF_OK;
}

static ndf_status write_tmp(const char *tmp, void *ctx, char *err, size_t errlen) {
  pwr *w = ctx;
  w->b.msg[0] = 0;
  w->f = fopen(tmp, "wb");
  if (!w->f) return ndf_io_error(err, errlen, NDF_EIO, w->path, "%s", strerror(errno));
  w->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w->b, on_error, on_warning);
  w->info = w->png ? png_create_info_struct(w->png) : NULL;
  w->row = malloc((size_t)w->w * w->C * (w->depth / 8));
  ndf_status st = w->info && w->row
                      ? encode(w, err, errlen)
                      : ndf_io_error(err, errlen, NDF_ENOMEM, w->path, "out of memory");
  if (w->png) png_destroy_write_struct(&w->png, w->info ? &w->info : NULL);
  int bad = ferror(w->f);
  bad |= fclose(w->f) != 0;
  if (bad && st == NDF_OK)
    st = ndf_io_error(err, errlen, NDF_EIO, w->path, "write failed: %s", strerror(errno));
  free(w->row);
  free(w->text);
  free(w->raw);
  w->text = NULL;
  w->raw = NULL;
  return st;
}

/* The file's oFFs moved by the image's origin (the index of its first pixel in the file's grid),
 * so that the copy lies where the pixels it holds did: in micrometres through the file's pixel
 * size (pHYs), without which, or out of oFFs's range, it is left out. */
static void offset_out(pwr *w) {
  const png_meta *m = w->m;
  const ndf_image *img = w->img;
  const int nd = img->a.ndim;
  const double ox = (double)img->origin[nd - 1], oy = (double)img->origin[nd - 2];
  if (!m || !m->has_offs) return;
  double x = m->xoff, y = m->yoff;
  if (ox || oy) {
    if (m->offs_unit == PNG_OFFSET_MICROMETER) {
      if (!m->has_phys || m->phys_unit != PNG_RESOLUTION_METER || !m->xppm || !m->yppm) return;
      x += nearbyint(ox * 1e6 / m->xppm);
      y += nearbyint(oy * 1e6 / m->yppm);
    } else {
      x += ox;
      y += oy;
    }
  }
  if (fabs(x) > 0x7fffffff || fabs(y) > 0x7fffffff) return;
  w->has_offs = 1;
  w->offs_unit = m->offs_unit;
  w->xoff = (png_int_32)x;
  w->yoff = (png_int_32)y;
}

ndf_status ndf__png_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  const ndf_array *a = &img->a;
  pwr w;
  memset(&w, 0, sizeof w);
  w.path = path;
  w.img = img;
  w.m = ndf_io_meta(img, NDF_FORMAT_PNG);
  if (a->dtype != NDF_U8 && a->dtype != NDF_U16)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "PNG holds 8- or 16-bit integers, not %s; convert with --dtype u8 or u16",
                        ndf_dtype_name(a->dtype));
  static const int ctypes[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                               PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGBA};
  if (a->ndim == 2 && img->channel_axis == -1) {
    w.C = 1;
  } else if (a->ndim == 3 && img->channel_axis == 0 && a->shape[0] >= 2 && a->shape[0] <= 4) {
    w.C = (int)a->shape[0];
  } else {
    char ax[32] = "no channel axis";
    if (img->channel_axis >= 0) snprintf(ax, sizeof ax, "channel axis %d", img->channel_axis);
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "PNG holds a gray image (h, w) or a colour one with 2, 3 or 4 channels "
                        "first (c, h, w), channel axis 0; this array has %d axes (the first of "
                        "%lld) and %s",
                        a->ndim, (long long)a->shape[0], ax);
  }
  int64_t H = a->shape[a->ndim - 2], W = a->shape[a->ndim - 1];
  if (H > PNG_MAX_SIDE || W > PNG_MAX_SIDE)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "%lld x %lld pixels: PNG's sides are at most 2^31-1", (long long)W,
                        (long long)H);
  w.w = (png_uint_32)W;
  w.h = (png_uint_32)H;
  w.depth = a->dtype == NDF_U16 ? 16 : 8;
  w.ctype = ctypes[w.C];
  double sy = img->spacing[a->ndim - 2], sx = img->spacing[a->ndim - 1];
  if (sx > 0 && sy > 0 && 1000 / sx >= 0.5 && 1000 / sy >= 0.5 && 1000 / sx < PNG_MAX_SIDE &&
      1000 / sy < PNG_MAX_SIDE) {
    w.has_phys = 1;
    w.phys_unit = PNG_RESOLUTION_METER;
    w.xppm = (png_uint_32)(1000 / sx + 0.5);
    w.yppm = (png_uint_32)(1000 / sy + 0.5);
  } else if (w.m && w.m->has_phys && w.m->phys_unit == PNG_RESOLUTION_UNKNOWN) {
    w.has_phys = 1; /* an aspect ratio only */
    w.phys_unit = PNG_RESOLUTION_UNKNOWN;
    w.xppm = w.m->xppm;
    w.yppm = w.m->yppm;
  }
  offset_out(&w);
  return ndf_io_write_via_temp(path, write_tmp, &w, err, errlen);
}
