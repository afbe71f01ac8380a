/* SPDX-License-Identifier: BSD-3-Clause */
/* test_io_tiffpng.c - TIFF and PNG through src/io: round trips of every type and layout, files
 * made by libtiff and libpng themselves (strips, tiles, codecs, bit depths, palettes,
 * transparency, interlacing, byte orders), metadata kept by same-format writes (sample layout,
 * ImageJ hyperstacks, positions moved by the image's origin), writes from other formats, the
 * read limit, and clear errors on broken files (cut or corrupt compressed data), special files
 * and refused writes, with nothing left behind.
 *
 *   test_io_tiffpng tiff|png IO_CONVERT */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <tiffio.h>
#include <zlib.h>

#include "io/formats.h"
#include "io_test.h"

/* A random image: integers over their whole range, floats in [-1000, 1000]; never all zeros. */
static ndf_image make(uint64_t *r, ndf_dtype t, int nd, const int64_t *shape, int ca) {
  ndf_image img;
  ndf_image_init(&img);
  img.a = ndf_array_contiguous(t, nd, shape, NULL);
  int64_t n = ndf_array_size(&img.a);
  img.a.data = malloc((size_t)n * ndf_dtype_size(t));
  if (!img.a.data) abort();
  for (int64_t i = 0; i < n; i++) {
    double v = t == NDF_U8    ? (double)t_randint(r, 0, 255)
               : t == NDF_U16 ? (double)t_randint(r, 0, 65535)
               : t == NDF_I16 ? (double)t_randint(r, -32768, 32767)
                              : 1000 * ndf_rand_uniform(r);
    ndf__store(t, img.a.data, i, v);
  }
  ndf__store(t, img.a.data, 0, 7); /* at least one non-zero */
  img.channel_axis = ca;
  return img;
}

/* Same dtype, shape and bytes. */
static int same(const ndf_array *a, const ndf_array *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return !memcmp(a->data, b->data, (size_t)ndf_array_size(a) * ndf_dtype_size(a->dtype));
}

static void describe(const ndf_array *a, char *buf, size_t n) {
  int k = snprintf(buf, n, "%s (", ndf_dtype_name(a->dtype));
  for (int d = 0; d < a->ndim; d++)
    k += snprintf(buf + k, n - (size_t)k, "%lld%s", (long long)a->shape[d],
                  d + 1 < a->ndim ? ", " : "");
  snprintf(buf + k, n - (size_t)k, ")");
}

/* A write must fail with status want and leave nothing at path (nor a temporary). */
static void expect_write_fail(const char *path, const ndf_image *img, ndf_status want,
                              const char *needle) {
  char err[512] = "";
  ndf_status st = ndf_image_write(path, img, err, sizeof err);
  CHECK(st == want, "%s: write gave %s, expected %s (%s)", path, ndf_status_str(st),
        ndf_status_str(want), err);
  CHECK(strstr(err, path) && (!needle || strstr(err, needle)),
        "%s: message '%s' lacks the path or '%s'", path, err, needle ? needle : "");
  CHECK(!io_exists(path), "%s: a failed write left the file", path);
  CHECK(!io_leftovers(), "%s: a failed write left a temporary file", path);
}

/* Writes img to name, reads it back into back: 1 on success. */
static int write_read(const char *path, const ndf_image *img, ndf_image *back) {
  char err[512];
  ndf_status st = ndf_image_write(path, img, err, sizeof err);
  CHECK(st == NDF_OK, "write %s: %s", path, err);
  if (st != NDF_OK) return 0;
  st = ndf_image_read(path, NULL, back, err, sizeof err);
  CHECK(st == NDF_OK, "read %s: %s", path, err);
  return st == NDF_OK;
}

/* A file made by libtiff or libpng (label: its spec's name) must read as want with channel
 * axis ca, and a same-format copy (out: label_back + ext) must hold want too. 1 with img and
 * back (the copy) to check further and free; 0 after a failed read or write, nothing held. */
static int read_made(const char *label, const char *path, const char *ext, const ndf_array *want,
                     int ca, char *out, ndf_image *img, ndf_image *back) {
  char name[64], err[512], d1[96], d2[96];
  ndf_status st = ndf_image_read(path, NULL, img, err, sizeof err);
  CHECK(st == NDF_OK, "%s: %s", label, err);
  if (st != NDF_OK) return 0;
  describe(&img->a, d1, sizeof d1);
  describe(want, d2, sizeof d2);
  CHECK(same(&img->a, want), "%s: read %s, expected %s, or the samples differ", label, d1, d2);
  CHECK(img->channel_axis == ca, "%s: channel axis %d", label, img->channel_axis);
  snprintf(name, sizeof name, "%s_back%s", label, ext);
  if (!write_read(io_path(out, name), img, back)) {
    ndf_image_free(img);
    return 0;
  }
  CHECK(same(&back->a, want), "%s: the same-format copy differs", label);
  return 1;
}

static int close_rel(double a, double b, double tol) {
  return fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

/* A write that runs out of room midway (RLIMIT_FSIZE) fails and leaves an existing file alone. */
static void full_disk(const char *ext, const ndf_image *img) {
  char path[IO_PATH], name[32], err[512];
  snprintf(name, sizeof name, "full%s", ext);
  io_path(path, name);
  io_write_file(path, "old", 3);
  ndf_status st = io_write_limited(path, img, 2048, err, sizeof err);
  CHECK(st == NDF_EIO && strstr(err, path), "write past the file size limit: %s (%s)",
        ndf_status_str(st), err);
  size_t n = 0;
  unsigned char *b = io_read_file(path, &n);
  CHECK(b && n == 3 && !memcmp(b, "old", 3), "a failed write changed the existing file");
  free(b);
  CHECK(!io_leftovers(), "a failed write left a temporary file");
  unlink(path);
}

/* The failing writes at the end of tiff_errors and png_errors: large written past a file size
 * limit (full_disk), and io_convert from a broken file (its n bytes) and from an .npy array the
 * format cannot hold (unfit, as name.npy): each fails and leaves nothing. */
static void failing_writes(const char *ext, const ndf_image *large, const char *broken, size_t n,
                           const char *name, const ndf_image *unfit) {
  char in[IO_PATH], out[IO_PATH], file[64], err[512];
  full_disk(ext, large);
  snprintf(file, sizeof file, "broken%s", ext);
  io_write_file(io_path(in, file), broken, n);
  io_convert_fails("", in, io_path(out, "broken_out.npy"));
  snprintf(file, sizeof file, "%s.npy", name);
  CHECK(ndf_image_write(io_path(in, file), unfit, err, sizeof err) == NDF_OK, "%s", err);
  snprintf(file, sizeof file, "%s_out%s", name, ext);
  io_convert_fails("", in, io_path(out, file));
}

/* Every cut of a file: an error naming it, or (ok_from <= cut) the whole image. */
static void cuts(const char *name, const unsigned char *b, size_t n, size_t step, size_t ok_from,
                 const ndf_array *whole) {
  char path[IO_PATH];
  io_path(path, name);
  for (size_t k = 0; k < n; k += step) {
    io_write_file(path, b, k);
    ndf_image img;
    char err[512] = "";
    ndf_status st = ndf_image_read(path, NULL, &img, err, sizeof err);
    if (st == NDF_OK) {
      CHECK(k >= ok_from && same(&img.a, whole), "%s cut at %zu of %zu bytes read without error",
            name, k, n);
      ndf_image_free(&img);
    } else {
      CHECK(strstr(err, path) != NULL, "%s cut at %zu: message '%s' does not name the file", name,
            k, err);
    }
  }
  unlink(path);
}

/* ======================================== TIFF ======================================== */

/* The IEEE half whose bits are h, computed apart from the reader's conversion. */
static double half_value(unsigned h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return h & 0x8000 ? -v : v;
}

/* A TIFF file made by libtiff directly: its layout, and random samples in the file's type. */
typedef struct tspec {
  const char *name;
  uint32_t w, h, pages;
  uint16_t spp, bits, format, photometric, planar, compression, predictor;
  uint32_t tile, rps; /* tile side (0: strips), rows per strip */
  int big_endian;
  uint16_t extra; /* ExtraSamples type for spp beyond the colour's */
} tspec;

static uint64_t random_code(uint64_t *r, const tspec *s) {
  if (s->format == SAMPLEFORMAT_IEEEFP) {
    if (s->bits == 16) {
      uint64_t h;
      do
        h = (uint64_t)t_randint(r, 0, 65535);
      while (((h >> 10) & 31) == 31); /* finite */
      return h;
    }
    double v = ldexp(ndf_rand_uniform(r), (int)t_randint(r, -20, 20));
    if (s->bits == 32) {
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, 4);
      return u;
    }
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
  }
  uint64_t hi = s->bits >= 32 ? 0xffffffffu : (1u << s->bits) - 1;
  return (uint64_t)t_randint(r, 0, (int64_t)hi);
}

/* The array value a sample code stands for (palette: its index). */
static double code_value(const tspec *s, uint64_t c) {
  if (s->format == SAMPLEFORMAT_IEEEFP) {
    if (s->bits == 16) return half_value((unsigned)c);
    if (s->bits == 32) {
      uint32_t u = (uint32_t)c;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    double d;
    memcpy(&d, &c, 8);
    return d;
  }
  if (s->format == SAMPLEFORMAT_INT) {
    if (s->bits == 8) return (int8_t)c;
    if (s->bits == 16) return (int16_t)c;
    return (int32_t)(uint32_t)c;
  }
  return (double)c;
}

static void put_code(unsigned char *buf, uint64_t i, unsigned bits, uint64_t c) {
  if (bits < 8) {
    uint64_t bit = i * bits;
    buf[bit >> 3] |= (unsigned char)(c << (8 - bits - (bit & 7)));
  } else if (bits == 8) {
    buf[i] = (unsigned char)c;
  } else if (bits == 16) {
    uint16_t v = (uint16_t)c;
    memcpy(buf + 2 * i, &v, 2);
  } else if (bits == 32) {
    uint32_t v = (uint32_t)c;
    memcpy(buf + 4 * i, &v, 4);
  } else {
    memcpy(buf + 8 * i, &c, 8);
  }
}

/* Writes the file and returns the array the reader must make of it (want). */
static int tiff_make(const char *path, const tspec *s, uint64_t *r, ndf_array *want) {
  int pal = s->photometric == PHOTOMETRIC_PALETTE, C = pal ? 3 : s->spp;
  ndf_dtype dt = s->format == SAMPLEFORMAT_IEEEFP ? (s->bits == 64 ? NDF_F64 : NDF_F32)
                 : s->bits == 32                  ? NDF_F64
                 : s->format == SAMPLEFORMAT_INT  ? NDF_I16
                 : s->bits == 16                  ? NDF_U16
                                                  : NDF_U8;
  int64_t shape[4], nd = 0;
  if (C > 1) shape[nd++] = C;
  if (s->pages > 1) shape[nd++] = s->pages;
  shape[nd++] = s->h;
  shape[nd++] = s->w;
  *want = ndf_array_contiguous(dt, (int)nd, shape, NULL);
  int64_t plane = (int64_t)s->w * s->h, cs = plane * s->pages;
  want->data = malloc((size_t)ndf_array_size(want) * ndf_dtype_size(dt));
  uint64_t *codes = malloc(sizeof *codes * (size_t)plane * s->spp);
  uint16_t cmap[3][256];
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 256; i++)
      cmap[c][i] = (uint16_t)(257 * t_randint(r, 0, 255));
  TIFF *tif = TIFFOpen(path, s->big_endian ? "wb" : "wl");
  if (!tif || !want->data || !codes) return 0;
  for (uint32_t p = 0; p < s->pages; p++) {
    for (int64_t i = 0; i < plane * s->spp; i++) {
      codes[i] = random_code(r, s);
      int64_t px = i / s->spp, smp = i % s->spp;
      if (pal)
        for (int c = 0; c < 3; c++)
          ndf__store(dt, want->data, c * cs + p * plane + px, cmap[c][codes[i]] / 257);
      else
        ndf__store(dt, want->data, smp * cs + p * plane + px, code_value(s, codes[i]));
    }
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, s->w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, s->h);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, s->spp);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, s->bits);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, s->format);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, s->photometric);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, s->planar);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, s->compression);
    if (s->predictor > 1) TIFFSetField(tif, TIFFTAG_PREDICTOR, s->predictor);
    int base = s->photometric == PHOTOMETRIC_RGB ? 3 : 1;
    if (s->spp > base) {
      uint16_t ex[16];
      for (int i = 0; i < s->spp - base; i++)
        ex[i] = s->extra;
      TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, (uint16_t)(s->spp - base), ex);
    }
    if (pal) {
      uint16_t *m[3];
      for (int c = 0; c < 3; c++) /* 1 << bits entries, the first ones of cmap */
        m[c] = cmap[c];
      TIFFSetField(tif, TIFFTAG_COLORMAP, m[0], m[1], m[2]);
    }
    int sep = s->planar == PLANARCONFIG_SEPARATE, planes = sep ? s->spp : 1, ns = sep ? 1 : s->spp;
    uint32_t bw = s->tile ? s->tile : s->w, bh = s->tile ? s->tile : s->rps;
    if (s->tile) {
      TIFFSetField(tif, TIFFTAG_TILEWIDTH, s->tile);
      TIFFSetField(tif, TIFFTAG_TILELENGTH, s->tile);
    } else {
      TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, s->rps);
    }
    size_t rowbytes = ((size_t)bw * ns * s->bits + 7) / 8;
    unsigned char *buf = malloc(rowbytes * bh);
    for (int pl = 0; pl < planes; pl++)
      for (uint32_t y0 = 0; y0 < s->h; y0 += bh)
        for (uint32_t x0 = 0; x0 < s->w; x0 += bw) {
          memset(buf, 0, rowbytes * bh);
          uint32_t rows = s->tile ? bh : (s->h - y0 < bh ? s->h - y0 : bh);
          for (uint32_t y = 0; y < rows && y0 + y < s->h; y++)
            for (uint32_t x = 0; x < bw && x0 + x < s->w; x++)
              for (int k = 0; k < ns; k++) {
                uint64_t c = codes[((uint64_t)(y0 + y) * s->w + x0 + x) * s->spp + pl + k];
                unsigned char *rb = buf + y * rowbytes;
                put_code(rb, (uint64_t)x * ns + k, s->bits, c);
              }
          tmsize_t n = (tmsize_t)(rowbytes * rows);
          tmsize_t ok =
              s->tile
                  ? TIFFWriteEncodedTile(tif, TIFFComputeTile(tif, x0, y0, 0, (uint16_t)pl), buf, n)
                  : TIFFWriteEncodedStrip(tif, TIFFComputeStrip(tif, y0, (uint16_t)pl), buf, n);
          if (ok < 0) return 0;
        }
    free(buf);
    if (!TIFFWriteDirectory(tif)) return 0;
  }
  TIFFClose(tif);
  free(codes);
  return 1;
}

/* A field of a written file's first page, through libtiff. */
static unsigned tiff_field16(const char *path, uint32_t tag) {
  TIFF *tif = TIFFOpen(path, "r");
  uint16_t v = 0;
  if (tif) {
    TIFFGetFieldDefaulted(tif, tag, &v);
    TIFFClose(tif);
  }
  return v;
}

static void tiff_files(uint64_t *r) {
  const uint16_t U = SAMPLEFORMAT_UINT, I = SAMPLEFORMAT_INT, F = SAMPLEFORMAT_IEEEFP;
  const uint16_t MB = PHOTOMETRIC_MINISBLACK, MW = PHOTOMETRIC_MINISWHITE, RGB = PHOTOMETRIC_RGB,
                 PAL = PHOTOMETRIC_PALETTE;
  const uint16_t C1 = PLANARCONFIG_CONTIG, SEP = PLANARCONFIG_SEPARATE;
  const uint16_t NONE = COMPRESSION_NONE, LZW = COMPRESSION_LZW, ZIP = COMPRESSION_ADOBE_DEFLATE,
                 PB = COMPRESSION_PACKBITS;
  const tspec specs[] = {
      {"u8_strips", 37, 29, 1, 1, 8, U, MB, C1, NONE, 1, 0, 5, 0, 0},
      {"u16_tiles_lzw_be", 45, 33, 3, 1, 16, U, MB, C1, LZW, 2, 16, 0, 1, 0},
      {"i16_deflate", 30, 21, 1, 1, 16, I, MB, C1, ZIP, 2, 0, 4, 0, 0},
      {"f32_rgb_tiles_fp", 40, 35, 1, 3, 32, F, RGB, C1, ZIP, 3, 32, 0, 0, 0},
      {"f64_packbits_be", 19, 23, 2, 1, 64, F, MB, C1, PB, 1, 0, 7, 1, 0},
      {"u8_rgba_separate", 26, 18, 1, 4, 8, U, RGB, SEP, LZW, 1, 0, 4, 0, EXTRASAMPLE_UNASSALPHA},
      {"u16_rgb_sep_tiles", 33, 17, 2, 3, 16, U, RGB, SEP, NONE, 1, 16, 0, 1, 0},
      {"i8", 21, 13, 2, 1, 8, I, MB, C1, NONE, 1, 0, 13, 0, 0},
      {"u32_lzw", 17, 19, 1, 1, 32, U, MB, C1, LZW, 2, 0, 6, 0, 0},
      {"i32_be", 23, 11, 1, 1, 32, I, MB, C1, NONE, 1, 0, 3, 1, 0},
      {"f16_deflate", 29, 9, 2, 1, 16, F, MB, C1, ZIP, 1, 0, 4, 0, 0},
      {"bits1_miniswhite", 13, 10, 1, 1, 1, U, MW, C1, PB, 1, 0, 3, 0, 0},
      {"bits2", 11, 7, 2, 1, 2, U, MB, C1, NONE, 1, 0, 2, 1, 0},
      {"bits4_ga", 9, 6, 1, 2, 4, U, MB, C1, LZW, 1, 0, 6, 0, EXTRASAMPLE_UNASSALPHA},
      {"palette8", 25, 14, 1, 1, 8, U, PAL, C1, LZW, 1, 0, 14, 0, 0},
      {"palette4_tiles", 20, 20, 2, 1, 4, U, PAL, C1, NONE, 1, 16, 0, 0, 0},
      {"u8_gray_alpha", 12, 12, 1, 2, 8, U, MB, C1, NONE, 1, 0, 12, 0, EXTRASAMPLE_ASSOCALPHA},
      {"u16_5ch", 14, 10, 1, 5, 16, U, MB, C1, ZIP, 2, 0, 10, 0, EXTRASAMPLE_UNSPECIFIED},
      {"u8_lzma", 31, 9, 1, 1, 8, U, MB, C1, COMPRESSION_LZMA, 1, 0, 9, 0, 0},
      {"u16_zstd", 31, 9, 1, 1, 16, U, MB, C1, COMPRESSION_ZSTD, 1, 0, 4, 0, 0},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    const tspec *s = &specs[i];
    if (!TIFFIsCODECConfigured(s->compression)) {
      printf("tiff: %s skipped (codec not in this libtiff)\n", s->name);
      continue;
    }
    char path[IO_PATH], out[IO_PATH], name[64];
    snprintf(name, sizeof name, "%s.tif", s->name);
    io_path(path, name);
    ndf_array want;
    if (!tiff_make(path, s, r, &want)) {
      CHECK(0, "%s: libtiff could not write the test file", s->name);
      continue;
    }
    ndf_image img, back;
    if (read_made(s->name, path, ".tif", &want, s->photometric == PAL || s->spp > 1 ? 0 : -1, out,
                  &img, &back)) {
      /* written back through the metadata: the file's own sample type and codec */
      unsigned bits = tiff_field16(out, TIFFTAG_BITSPERSAMPLE);
      unsigned fmt = tiff_field16(out, TIFFTAG_SAMPLEFORMAT);
      unsigned comp = tiff_field16(out, TIFFTAG_COMPRESSION);
      unsigned want_comp = s->compression == LZW || s->compression == ZIP ? s->compression : NONE;
      CHECK(s->photometric == PAL ? bits == 8 : bits == s->bits && fmt == s->format,
            "%s: written back as %u-bit format %u, read as %u-bit format %u", s->name, bits, fmt,
            s->bits, s->format);
      CHECK(comp == want_comp, "%s: written back with compression %u, expected %u", s->name, comp,
            want_comp);
      if (s->photometric == MW)
        CHECK(tiff_field16(out, TIFFTAG_PHOTOMETRIC) == MW, "%s: MinIsWhite lost", s->name);
      if (s->photometric != PAL)
        CHECK(tiff_field16(out, TIFFTAG_PLANARCONFIG) == s->planar &&
                  tiff_field16(out, TIFFTAG_SAMPLESPERPIXEL) == s->spp,
              "%s: written back with PlanarConfiguration %u, %u samples; read %u, %u", s->name,
              tiff_field16(out, TIFFTAG_PLANARCONFIG), tiff_field16(out, TIFFTAG_SAMPLESPERPIXEL),
              s->planar, s->spp);
      if (s->spp > 1 && s->extra) CHECK(back.channel_axis == 0, "%s: channel axis lost", s->name);
      ndf_image_free(&back);
      ndf_image_free(&img);
    }
    free(want.data);
  }
}

/* Every dtype and layout through our own writer, with and without the metadata. */
static void tiff_round_trips(uint64_t *r) {
  for (ndf_dtype t = NDF_U8; t <= NDF_F64; t++)
    for (int lay = 0; lay < 4; lay++) {
      int64_t shape[4];
      int nd = 0, ca = lay >= 2 ? 0 : -1;
      if (lay >= 2) shape[nd++] = t_randint(r, 2, 4); /* channels */
      if (lay & 1) shape[nd++] = t_randint(r, 2, 5);  /* pages */
      shape[nd++] = t_randint(r, 1, 40);
      shape[nd++] = t_randint(r, 1, 40);
      ndf_image img = make(r, t, nd, shape, ca);
      img.spacing[nd - 1] = t_randint(r, 1, 5000) * 1e-4;
      img.spacing[nd - 2] = t_randint(r, 1, 5000) * 1e-4;
      char path[IO_PATH], name[64], d[96];
      snprintf(name, sizeof name, "rt_%d_%d.tif", (int)t, lay);
      ndf_image back, again;
      describe(&img.a, d, sizeof d);
      if (write_read(io_path(path, name), &img, &back)) {
        CHECK(same(&back.a, &img.a), "round trip of %s differs", d);
        CHECK(back.format == NDF_FORMAT_TIFF && back.channel_axis == ca, "%s: format %d axis %d", d,
              back.format, back.channel_axis);
        for (int k = nd - 2; k < nd; k++)
          CHECK(close_rel(back.spacing[k], img.spacing[k], 1e-6), "%s: spacing %d: %g, wrote %g", d,
                k, back.spacing[k], img.spacing[k]);
        if (write_read(path, &back, &again)) { /* with its metadata now */
          CHECK(same(&again.a, &img.a), "second round trip of %s differs", d);
          for (int k = 0; k < nd; k++)
            CHECK(again.spacing[k] == back.spacing[k], "%s: spacing %d moved: %.17g, %.17g", d, k,
                  again.spacing[k], back.spacing[k]);
          ndf_image_free(&again);
        }
        ndf_image_free(&back);
      }
      ndf_image_free(&img);
    }
}

/* A JPEG-compressed YCbCr file (read as RGB, within JPEG's error), and a stack whose thumbnail
 * page (a reduced-resolution copy) is left out. */
static void tiff_special(uint64_t *r) {
  char path[IO_PATH], out[IO_PATH], err[512];
  enum { W = 32, H = 16 };
  unsigned char rgb[H][W][3];
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      for (int c = 0; c < 3; c++)
        rgb[y][x][c] = (unsigned char)(20 + 3 * x + 2 * y + 30 * c); /* smooth, below 256 */
  if (TIFFIsCODECConfigured(COMPRESSION_JPEG)) {
    TIFF *tif = TIFFOpen(io_path(path, "jpeg.tif"), "w");
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, W);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, H);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_JPEG);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_YCBCR);
    TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    TIFFSetField(tif, TIFFTAG_JPEGQUALITY, 95);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 16);
    for (int y = 0; y < H; y++)
      TIFFWriteScanline(tif, rgb[y], (uint32_t)y, 0);
    TIFFClose(tif);
    ndf_image img, back;
    if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "jpeg: %s", err);
    } else {
      int worst = 0;
      if (img.a.ndim == 3 && img.a.shape[0] == 3 && img.a.shape[1] == H && img.a.shape[2] == W &&
          img.a.dtype == NDF_U8)
        for (int c = 0; c < 3; c++)
          for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
              int d = abs(((uint8_t *)img.a.data)[(c * H + y) * W + x] - rgb[y][x][c]);
              worst = d > worst ? d : worst;
            }
      else
        worst = 999;
      CHECK(worst <= 12 && img.channel_axis == 0, "jpeg: shape or samples off by %d", worst);
      if (write_read(io_path(out, "jpeg_back.tif"), &img, &back)) {
        CHECK(same(&back.a, &img.a), "jpeg: the copy differs");
        CHECK(tiff_field16(out, TIFFTAG_COMPRESSION) == COMPRESSION_NONE &&
                  tiff_field16(out, TIFFTAG_PHOTOMETRIC) == PHOTOMETRIC_RGB,
              "jpeg: the copy is not uncompressed RGB");
        ndf_image_free(&back);
      }
      ndf_image_free(&img);
    }
  }
  /* two pages and a thumbnail between them */
  TIFF *tif = TIFFOpen(io_path(path, "thumb.tif"), "w");
  uint8_t px[2][H * W], small[8 * 4] = {9};
  for (int p = 0; p < 3; p++) {
    int thumb = p == 1;
    if (!thumb)
      for (int i = 0; i < H * W; i++)
        px[p / 2][i] = (uint8_t)t_randint(r, 0, 255);
    TIFFSetField(tif, TIFFTAG_SUBFILETYPE, thumb ? FILETYPE_REDUCEDIMAGE : 0);
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, thumb ? 8 : W);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, thumb ? 4 : H);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFWriteEncodedStrip(tif, 0, thumb ? small : px[p / 2], thumb ? 32 : H * W);
    TIFFWriteDirectory(tif);
  }
  TIFFClose(tif);
  ndf_image img;
  if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
    CHECK(0, "thumbnail: %s", err);
    return;
  }
  CHECK(img.a.ndim == 3 && img.a.shape[0] == 2 && img.a.shape[1] == H && img.a.shape[2] == W &&
            !memcmp(img.a.data, px, sizeof px),
        "thumbnail: the stack is not the two full pages");
  ndf_image_free(&img);
}

/* Tags a file carries to a same-format copy, and the voxel sizes they give. */
static void tiff_metadata(uint64_t *r) {
  static const struct {
    const char *desc;
    uint16_t unit;
    float xres, yres;
    double sx, sy, sz; /* spacing in mm */
  } cases[] = {
      {"plain text", RESUNIT_INCH, 300, 150, 25.4 / 300, 25.4 / 150, 0},
      {"a description", RESUNIT_CENTIMETER, 2000, 4000, 10.0 / 2000, 10.0 / 4000, 0},
      {"no unit", RESUNIT_NONE, 3, 3, 0, 0, 0},
      {"ImageJ=1.53c\nimages=4\nslices=4\nunit=micron\nspacing=2.5\nloop=false\n", RESUNIT_NONE, 2,
       4, 5e-4, 2.5e-4, 2.5e-3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[IO_PATH], out[IO_PATH], name[32], err[512];
    snprintf(name, sizeof name, "meta%zu.tif", i);
    io_path(path, name);
    TIFF *tif = TIFFOpen(path, "w");
    uint16_t px[4 * 6 * 5];
    for (int k = 0; k < 120; k++)
      px[k] = (uint16_t)t_randint(r, 0, 65535);
    for (int p = 0; p < 4; p++) {
      TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 6);
      TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 5);
      TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 16);
      TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
      TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
      TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_LZW);
      TIFFSetField(tif, TIFFTAG_XRESOLUTION, (double)cases[i].xres);
      TIFFSetField(tif, TIFFTAG_YRESOLUTION, (double)cases[i].yres);
      TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, cases[i].unit);
      if (!p) {
        TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, cases[i].desc);
        TIFFSetField(tif, TIFFTAG_SOFTWARE, "test_io_tiffpng");
        TIFFSetField(tif, TIFFTAG_DATETIME, "2024:01:02 03:04:05");
        TIFFSetField(tif, TIFFTAG_ARTIST, "someone");
      }
      TIFFWriteEncodedStrip(tif, 0, px + 30 * p, 60);
      TIFFWriteDirectory(tif);
    }
    TIFFClose(tif);
    ndf_image img, back;
    if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "meta %zu: %s", i, err);
      continue;
    }
    CHECK(img.a.ndim == 3 && img.a.shape[0] == 4 && !memcmp(img.a.data, px, sizeof px),
          "meta %zu: data", i);
    double want[3] = {cases[i].sz, cases[i].sy, cases[i].sx};
    for (int k = 0; k < 3; k++)
      CHECK(close_rel(img.spacing[k], want[k], 1e-6), "meta %zu: spacing %d is %g, expected %g", i,
            k, img.spacing[k], want[k]);
    snprintf(name, sizeof name, "meta%zu_back.tif", i);
    if (write_read(io_path(out, name), &img, &back)) {
      CHECK(same(&back.a, &img.a), "meta %zu: data of the copy", i);
      for (int k = 0; k < 3; k++)
        CHECK(back.spacing[k] == img.spacing[k], "meta %zu: spacing %d of the copy", i, k);
      tif = TIFFOpen(out, "r");
      char *s;
      float xr = 0, yr = 0;
      uint16_t unit = 0, comp = 0;
      static const uint32_t tags[] = {TIFFTAG_IMAGEDESCRIPTION, TIFFTAG_SOFTWARE, TIFFTAG_DATETIME,
                                      TIFFTAG_ARTIST};
      const char *vals[] = {cases[i].desc, "test_io_tiffpng", "2024:01:02 03:04:05", "someone"};
      for (int k = 0; k < 4; k++)
        CHECK(TIFFGetField(tif, tags[k], &s) && !strcmp(s, vals[k]), "meta %zu: tag %u lost", i,
              tags[k]);
      TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xr);
      TIFFGetField(tif, TIFFTAG_YRESOLUTION, &yr);
      TIFFGetFieldDefaulted(tif, TIFFTAG_RESOLUTIONUNIT, &unit);
      TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &comp);
      CHECK(xr == cases[i].xres && yr == cases[i].yres && unit == cases[i].unit,
            "meta %zu: resolution %g %g unit %u", i, xr, yr, unit);
      CHECK(comp == COMPRESSION_LZW, "meta %zu: compression %u", i, comp);
      TIFFClose(tif);
      ndf_image_free(&back);
    }
    if (cases[i].sx > 0) { /* a new voxel size: in the file's unit (ImageJ's where it has one) */
      img.spacing[2] *= 3;
      img.spacing[1] *= 0.5;
      snprintf(name, sizeof name, "meta%zu_resized.tif", i);
      if (write_read(io_path(out, name), &img, &back)) {
        for (int k = 1; k < 3; k++)
          CHECK(close_rel(back.spacing[k], img.spacing[k], 1e-6), "meta %zu: new spacing %d: %g", i,
                k, back.spacing[k]);
        CHECK(tiff_field16(out, TIFFTAG_RESOLUTIONUNIT) == cases[i].unit,
              "meta %zu: the new resolution's unit changed", i);
        ndf_image_free(&back);
      }
    }
    ndf_image_free(&img);
  }
}

/* Offset and entry count of a little-endian classic TIFF's first IFD, and an entry's place. */
static size_t ifd_entry(const unsigned char *b, uint16_t tag) {
  uint32_t off = b[4] | b[5] << 8 | b[6] << 16 | (uint32_t)b[7] << 24;
  unsigned n = b[off] | b[off + 1] << 8;
  for (unsigned i = 0; i < n; i++) {
    size_t e = off + 2 + 12 * i;
    if ((b[e] | b[e + 1] << 8) == tag) return e;
  }
  return 0;
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> 8 * i);
}

static void tiff_errors(uint64_t *r) {
  char path[IO_PATH];
  /* a two-page stack, uncompressed and LZW: every cut */
  int64_t shape[3] = {2, 16, 16};
  ndf_image img = make(r, NDF_U16, 3, shape, -1), back;
  if (!write_read(io_path(path, "whole.tif"), &img, &back)) return;
  size_t n;
  unsigned char *b = io_read_file(path, &n);
  cuts("cut.tif", b, n, 1, n, &img.a);
  ndf_image_free(&back);

  /* bad magic, and header fields patched in a one-page file */
  unsigned char *c = malloc(n);
  memcpy(c, b, n);
  memcpy(c, "XX", 2);
  io_write_file(io_path(path, "magic.tif"), c, n);
  io_read_fails(path, NDF_EINVAL, "bad magic");
  io_write_file(io_path(path, "tiny.tif"), b, 5);
  io_read_fails(path, NDF_EINVAL, "truncated");
  free(b);
  ndf_image one = make(r, NDF_U16, 2, shape + 1, -1);
  if (!write_read(io_path(path, "one.tif"), &one, &back)) return;
  ndf_image_free(&back);
  b = io_read_file(path, &n);
  static const struct {
    const char *name;
    uint16_t tag, type;
    uint32_t value;
    ndf_status st;
    const char *needle;
  } patches[] = {
      {"width0.tif", TIFFTAG_IMAGEWIDTH, 3, 0, 0, NULL},
      {"bits12.tif", TIFFTAG_BITSPERSAMPLE, 3, 12, NDF_EUNSUPPORTED, "12-bit"},
      {"complex.tif", TIFFTAG_SAMPLEFORMAT, 3, SAMPLEFORMAT_COMPLEXINT, NDF_EUNSUPPORTED,
       "complex"},
      {"codec.tif", TIFFTAG_COMPRESSION, 3, 12345, NDF_EUNSUPPORTED, "compression"},
      {"cmyk.tif", TIFFTAG_PHOTOMETRIC, 3, PHOTOMETRIC_SEPARATED, NDF_EUNSUPPORTED, "CMYK"},
      {"offset.tif", TIFFTAG_STRIPOFFSETS, 4, 1u << 30, NDF_EINVAL, "truncated"},
  };
  for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
    memcpy(c, b, n);
    size_t e = ifd_entry(c, patches[i].tag);
    if (!e) {
      CHECK(0, "%s: no tag %u in the test file", patches[i].name, patches[i].tag);
      continue;
    }
    c[e + 2] = (unsigned char)patches[i].type; /* SHORT values sit in the low bytes (LE) */
    put32(c + e + 4, 1);
    put32(c + e + 8, patches[i].value);
    io_write_file(io_path(path, patches[i].name), c, n);
    io_read_fails(path, patches[i].st, patches[i].needle);
  }
  free(b);
  free(c);
  { /* a strip's byte count short of its rows (libtiff mends this only for one-strip files) */
    TIFF *tif = TIFFOpen(io_path(path, "count.tif"), "w");
    uint16_t px[16 * 16];
    for (int i = 0; i < 256; i++)
      px[i] = (uint16_t)t_randint(r, 0, 65535);
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 16);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 16);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 16);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 4);
    for (uint32_t k = 0; k < 4; k++)
      TIFFWriteEncodedStrip(tif, k, px + 64 * k, 128);
    TIFFClose(tif);
    b = io_read_file(path, &n);
    size_t e = ifd_entry(b, TIFFTAG_STRIPBYTECOUNTS);
    CHECK(e && (b[e + 2] == 3 || b[e + 2] == 4), "count.tif: StripByteCounts not found");
    if (e) {
      size_t at = b[e + 8] | b[e + 9] << 8 | b[e + 10] << 16 | (size_t)b[e + 11] << 24;
      size_t es = b[e + 2] == 3 ? 2 : 4; /* SHORT or LONG values, out of line (4 of them) */
      memset(b + at + 3 * es, 0, es); /* the last: libtiff re-estimates when the first two differ */
      b[at + 3 * es] = 100;
      io_write_file(path, b, n);
      io_read_fails(path, NDF_EINVAL, "100 of 128 data bytes");
    }
    free(b);
  }

  { /* a deflate strip of a few bytes claiming 3.6 GB of samples: refused before allocating */
    TIFF *tif = TIFFOpen(io_path(path, "huge.tif"), "w");
    unsigned char px[256] = {0};
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 16);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 16);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 0xffffffffu); /* one strip, whatever the height */
    TIFFWriteEncodedStrip(tif, 0, px, sizeof px);
    TIFFClose(tif);
    b = io_read_file(path, &n);
    size_t w = ifd_entry(b, TIFFTAG_IMAGEWIDTH), h = ifd_entry(b, TIFFTAG_IMAGELENGTH);
    if (w && h) {
      for (int k = 0; k < 2; k++) {
        unsigned char *e = b + (k ? h : w);
        e[2] = 4; /* LONG */
        put32(e + 4, 1);
        put32(e + 8, 60000);
      }
      io_write_file(path, b, n);
      ndf_io_set_read_limit((int64_t)1 << 40); /* within the limit: the codec's bound refuses it */
      io_read_fails(path, NDF_EINVAL, "more than the codec can pack");
      ndf_io_set_read_limit(0);
    }
    free(b);
  }

  /* valid files ndfilt cannot hold */
  static const struct {
    const char *name;
    uint16_t bits, format, photometric;
    const char *needle;
  } refused[] = {{"pal16.tif", 16, SAMPLEFORMAT_UINT, PHOTOMETRIC_PALETTE, "16-bit palette"},
                 {"u64.tif", 64, SAMPLEFORMAT_UINT, PHOTOMETRIC_MINISBLACK, "64-bit integer"},
                 {"lab.tif", 8, SAMPLEFORMAT_UINT, PHOTOMETRIC_CIELAB, "L*a*b*"}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    TIFF *tif = TIFFOpen(io_path(path, refused[i].name), "w");
    int spp = refused[i].photometric == PHOTOMETRIC_CIELAB ? 3 : 1;
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 4);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 2);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, refused[i].bits);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, spp);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, refused[i].format);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, refused[i].photometric);
    if (refused[i].photometric == PHOTOMETRIC_PALETTE) {
      uint16_t *m = calloc(65536, 2);
      TIFFSetField(tif, TIFFTAG_COLORMAP, m, m, m);
      free(m);
    }
    unsigned char px[4 * 2 * 3 * 8] = {1};
    TIFFWriteEncodedStrip(tif, 0, px, 4 * 2 * spp * refused[i].bits / 8);
    TIFFClose(tif);
    io_read_fails(path, NDF_EUNSUPPORTED, refused[i].needle);
  }
  { /* pages of different size */
    TIFF *tif = TIFFOpen(io_path(path, "sizes.tif"), "w");
    unsigned char px[64] = {1, 2, 3};
    for (int p = 0; p < 2; p++) {
      TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 4 + p);
      TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 4);
      TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
      TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
      TIFFWriteEncodedStrip(tif, 0, px, 16 + 4 * p);
      TIFFWriteDirectory(tif);
    }
    TIFFClose(tif);
    io_read_fails(path, NDF_EUNSUPPORTED, "different size");
  }
  io_read_fails(io_path(path, "missing.tif"), NDF_EIO, "No such file");

  /* refused writes leave nothing */
  int64_t s4[4] = {2, 3, 4, 5};
  ndf_image four = make(r, NDF_U8, 4, s4, -1);
  expect_write_fail(io_path(path, "4d.tif"), &four, NDF_EUNSUPPORTED, "4 axes");
  four.channel_axis = 1;
  expect_write_fail(io_path(path, "axis1.tif"), &four, NDF_EUNSUPPORTED, "axis 1");
  four.channel_axis = -1;
  expect_write_fail("/nonexistent/dir/x.tif", &img, NDF_EIO, "cannot create");
  int64_t big[2] = {200, 300};
  ndf_image large = make(r, NDF_F64, 2, big, -1);
  failing_writes(".tif", &large, "II*\0\x08\0\0\0\xff\xff", 10, "four", &four);
  ndf_image_free(&large);
  ndf_image_free(&four);
  ndf_image_free(&one);
  ndf_image_free(&img);
}

/* A stack of n u16 pages of h x w written by libtiff (page k: px + k h w), with desc on page 1
 * (NULL: none), a resolution where unit is not 0, and a position where pos is not NULL. */
static void tiff_stack(const char *path, const char *desc, int n, int h, int w, const uint16_t *px,
                       float xres, float yres, uint16_t unit, const float *pos) {
  TIFF *tif = TIFFOpen(path, "w");
  if (!tif) abort();
  for (int p = 0; p < n; p++) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 16);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    if (unit) {
      TIFFSetField(tif, TIFFTAG_XRESOLUTION, (double)xres);
      TIFFSetField(tif, TIFFTAG_YRESOLUTION, (double)yres);
      TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, unit);
    }
    if (pos) {
      TIFFSetField(tif, TIFFTAG_XPOSITION, (double)pos[0]);
      TIFFSetField(tif, TIFFTAG_YPOSITION, (double)pos[1]);
    }
    if (!p && desc) TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, desc);
    TIFFWriteEncodedStrip(tif, 0, (void *)(px + (size_t)p * h * w), (tmsize_t)h * w * 2);
    TIFFWriteDirectory(tif);
  }
  TIFFClose(tif);
}

/* The description of a file's first page (malloc'd), or NULL. */
static char *tiff_description(const char *path) {
  TIFF *tif = TIFFOpen(path, "r");
  char *s = NULL, *d = NULL;
  if (tif && TIFFGetField(tif, TIFFTAG_IMAGEDESCRIPTION, &s) && s) d = strdup(s);
  if (tif) TIFFClose(tif);
  return d;
}

/* An image over img's metadata (borrowed) with a new array of shape (random samples). */
static ndf_image with_shape(uint64_t *r, const ndf_image *img, int nd, const int64_t *shape) {
  ndf_image v = make(r, img->a.dtype, nd, shape, img->channel_axis);
  v.format = img->format;
  v.meta = img->meta;
  v.time_axis = img->time_axis;
  memcpy(v.spacing, img->spacing, sizeof v.spacing);
  return v;
}

/* ImageJ hyperstacks made by libtiff: their counts give the array's axes (channels first, as
 * colour; frames the time axis; slices with spacing= in unit=), their pages placed by ImageJ's
 * order (channels fastest, then slices, then frames); a copy keeps the description byte for byte,
 * and one of another shape gets ImageJ's counts, spacing and origin updated. */
static void tiff_imagej(uint64_t *r) {
  enum { H = 5, W = 6 };
  static const struct {
    const char *name, *desc;
    int64_t c, t, z; /* the axes the reader must make of the pages (flat: c = t = 1, z = pages) */
    double sz;       /* the slices' spacing in mm */
  } cases[] = {
      {"ij_zyx", "ImageJ=1.53t\nimages=4\nslices=4\nunit=micron\nspacing=2.5\nloop=false\n", 1, 1,
       4, 2.5e-3},
      {"ij_tzyx",
       "ImageJ=1.53t\nimages=6\nslices=3\nframes=2\nhyperstack=true\nunit=micron\n"
       "spacing=2.5\nfinterval=0.5\nloop=false\n",
       1, 2, 3, 2.5e-3},
      {"ij_zcyx",
       "ImageJ=1.53t\nimages=6\nchannels=3\nslices=2\nhyperstack=true\nmode=composite\n"
       "unit=micron\nspacing=2.5\nloop=false\n",
       3, 1, 2, 2.5e-3},
      {"ij_tcyx", "ImageJ=1.11a\nimages=6\nchannels=2\nframes=3\nhyperstack=true\nunit=um", 2, 3, 1,
       0},
      {"ij_tyx_nounit", "ImageJ=1.11a\nimages=4\nframes=4\nloop=false\n", 1, 4, 1, 0},
      /* channels, slices and frames: more axes than an array has, so one axis of pages */
      {"ij_czt", "ImageJ=1.53t\nimages=8\nchannels=2\nslices=2\nframes=2\nunit=micron\n", 1, 1, 8,
       0},
      /* counts that do not multiply to the pages: a plain stack, as ImageJ opens it */
      {"ij_mismatch", "ImageJ=1.53t\nimages=5\nchannels=2\nslices=2\nunit=micron\nspacing=2.5\n", 1,
       1, 5, 2.5e-3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int64_t C = cases[i].c, T = cases[i].t, Z = cases[i].z, P = C * T * Z;
    uint16_t *px = malloc(sizeof *px * (size_t)(P * H * W));
    for (int64_t k = 0; k < P * H * W; k++)
      px[k] = (uint16_t)t_randint(r, 0, 65535);
    char path[IO_PATH], out[IO_PATH], name[64], err[512];
    snprintf(name, sizeof name, "%s.tif", cases[i].name);
    tiff_stack(io_path(path, name), cases[i].desc, (int)P, H, W, px, 2, 4, RESUNIT_NONE, NULL);
    ndf_image img, back;
    if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "%s: %s", cases[i].name, err);
      free(px);
      continue;
    }
    /* the array the pages make: (C, T, Z, H, W) less the axes of 1, page (t Z + z) C + c */
    int64_t shape[4];
    int nd = 0, ta = -1, ca = C > 1 ? 0 : -1;
    if (C > 1) shape[nd++] = C;
    if (T > 1) {
      ta = nd;
      shape[nd++] = T;
    }
    if (Z > 1) shape[nd++] = Z;
    shape[nd++] = H;
    shape[nd++] = W;
    ndf_array want =
        ndf_array_contiguous(NDF_U16, nd, shape, malloc(sizeof *px * (size_t)P * H * W));
    for (int64_t c = 0; c < C; c++)
      for (int64_t q = 0; q < T * Z; q++)
        memcpy((uint16_t *)want.data + (c * T * Z + q) * H * W, px + (q * C + c) * H * W,
               sizeof *px * H * W);
    char d1[96], d2[96];
    describe(&img.a, d1, sizeof d1);
    describe(&want, d2, sizeof d2);
    CHECK(same(&img.a, &want), "%s: read %s, expected %s, or the pages are misplaced",
          cases[i].name, d1, d2);
    CHECK(img.channel_axis == ca && img.time_axis == ta, "%s: channel axis %d, time axis %d",
          cases[i].name, img.channel_axis, img.time_axis);
    double sp[4] = {0, 0, 0, 0}, um = strstr(cases[i].desc, "unit=") ? 1e-3 : 0;
    sp[nd - 1] = um / 2; /* 2 pixels a micron */
    sp[nd - 2] = um / 4;
    if (Z > 1) sp[nd - 3] = cases[i].sz;
    for (int k = 0; k < nd; k++)
      CHECK(close_rel(img.spacing[k], sp[k], 1e-6), "%s: spacing %d is %g, expected %g",
            cases[i].name, k, img.spacing[k], sp[k]);
    snprintf(name, sizeof name, "%s_back.tif", cases[i].name);
    if (write_read(io_path(out, name), &img, &back)) {
      char *d = tiff_description(out);
      CHECK(d && !strcmp(d, cases[i].desc), "%s: the copy's description is '%s'", cases[i].name,
            d ? d : "(none)");
      free(d);
      CHECK(same(&back.a, &img.a) && back.channel_axis == ca && back.time_axis == ta,
            "%s: the copy reads differently", cases[i].name);
      for (int k = 0; k < nd; k++)
        CHECK(back.spacing[k] == img.spacing[k], "%s: the copy's spacing %d", cases[i].name, k);
      CHECK(tiff_field16(out, TIFFTAG_RESOLUTIONUNIT) == RESUNIT_NONE, "%s: unit", cases[i].name);
      ndf_image_free(&back);
    }
    /* another shape (grown by a border, ks --output full), slices twice as far apart */
    if (i == 1 || i == 2) {
      int64_t s2[4];
      memcpy(s2, img.a.shape, sizeof s2);
      s2[nd - 3] += 2;
      s2[nd - 2] += 2;
      s2[nd - 1] += 4;
      ndf_image g = with_shape(r, &img, nd, s2);
      g.spacing[nd - 3] *= 2;
      g.origin[nd - 3] = -1;
      g.origin[nd - 2] = -1;
      g.origin[nd - 1] = -2;
      snprintf(name, sizeof name, "%s_grown.tif", cases[i].name);
      if (write_read(io_path(out, name), &g, &back)) {
        char *d = tiff_description(out), want_d[256];
        if (i == 1)
          snprintf(want_d, sizeof want_d,
                   "ImageJ=1.53t\nimages=10\nslices=5\nframes=2\nhyperstack=true\nunit=micron\n"
                   "spacing=5.0\nfinterval=0.5\nloop=false\nxorigin=2.0\nyorigin=1.0\n"
                   "zorigin=1.0\n");
        else
          snprintf(want_d, sizeof want_d,
                   "ImageJ=1.53t\nimages=12\nchannels=3\nslices=4\nhyperstack=true\n"
                   "mode=composite\nunit=micron\nspacing=5.0\nloop=false\nxorigin=2.0\n"
                   "yorigin=1.0\nzorigin=1.0\n");
        CHECK(d && !strcmp(d, want_d), "%s grown: the description is '%s', expected '%s'",
              cases[i].name, d ? d : "(none)", want_d);
        free(d);
        CHECK(same(&back.a, &g.a) && back.channel_axis == ca && back.time_axis == ta,
              "%s grown: reads differently", cases[i].name);
        for (int k = 0; k < nd; k++)
          CHECK(close_rel(back.spacing[k], g.spacing[k], 1e-6), "%s grown: spacing %d is %g",
                cases[i].name, k, back.spacing[k]);
        ndf_image_free(&back);
      }
      g.meta = NULL;
      ndf_image_free(&g);
    }
    free(want.data);
    free(px);
    ndf_image_free(&img);
  }
}

/* XPosition and YPosition of a written file's first page: 1 where both are there. */
static int tiff_position(const char *path, float *x, float *y) {
  TIFF *tif = TIFFOpen(path, "r");
  int ok =
      tif && TIFFGetField(tif, TIFFTAG_XPOSITION, x) && TIFFGetField(tif, TIFFTAG_YPOSITION, y);
  if (tif) TIFFClose(tif);
  return ok;
}

/* A copy keeps the file's position; one whose first pixel lies elsewhere in the file's grid (the
 * image's origin) is moved by as many pixels, so that it overlays the file: added where the file
 * had none, and left out where TIFF cannot hold it (negative). A resolution of 0 pixels a
 * centimetre is no size (NaN), and a copy keeps it as it was. */
static void tiff_origin(uint64_t *r) {
  enum { H = 8, W = 10 };
  uint16_t px[H * W];
  for (int k = 0; k < H * W; k++)
    px[k] = (uint16_t)t_randint(r, 0, 65535);
  static const struct {
    const char *name;
    int has_pos;
    int64_t oy, ox;
    int want_pos; /* the copy has a position */
    float x, y;   /* and this one */
  } cases[] = {
      {"pos_same", 1, 0, 0, 1, 2.0f, 3.0f},      {"pos_grown", 1, -2, -3, 1, 1.97f, 2.98f},
      {"pos_cropped", 1, 4, 5, 1, 2.05f, 3.04f}, {"pos_negative", 1, -1000, 0, 0, 0, 0},
      {"nopos_same", 0, 0, 0, 0, 0, 0},          {"nopos_cropped", 0, 4, 5, 1, 0.05f, 0.04f},
      {"nopos_grown", 0, -4, -5, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[IO_PATH], out[IO_PATH], name[64], err[512];
    const float pos[2] = {2.0f, 3.0f};
    snprintf(name, sizeof name, "%s.tif", cases[i].name);
    tiff_stack(io_path(path, name), "a description", 1, H, W, px, 100, 100, RESUNIT_CENTIMETER,
               cases[i].has_pos ? pos : NULL);
    ndf_image img, back;
    if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "%s: %s", cases[i].name, err);
      continue;
    }
    ndf_image v = img;
    v.meta_free = NULL;
    v.origin[0] = cases[i].oy;
    v.origin[1] = cases[i].ox;
    snprintf(name, sizeof name, "%s_back.tif", cases[i].name);
    if (write_read(io_path(out, name), &v, &back)) {
      float x = -1, y = -1;
      int has = tiff_position(out, &x, &y);
      CHECK(has == cases[i].want_pos &&
                (!has || (close_rel(x, cases[i].x, 1e-6) && close_rel(y, cases[i].y, 1e-6))),
            "%s: the copy's position is %s %g %g, expected %s %g %g", cases[i].name,
            has ? "at" : "none", x, y, cases[i].want_pos ? "at" : "none", cases[i].x, cases[i].y);
      if (!cases[i].oy && !cases[i].ox) { /* a copy of the copy: the same bytes */
        size_t n1 = 0, n2 = 0;
        unsigned char *b1 = io_read_file(out, &n1), *b2 = NULL;
        ndf_image again;
        if (write_read(out, &back, &again)) {
          b2 = io_read_file(out, &n2);
          ndf_image_free(&again);
        }
        CHECK(b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1), "%s: a copy of the copy differs",
              cases[i].name);
        free(b1);
        free(b2);
      }
      ndf_image_free(&back);
    }
    ndf_image_free(&img);
  }
  /* a resolution of 0: no size; the copy keeps the tags */
  char path[IO_PATH], out[IO_PATH], err[512];
  tiff_stack(io_path(path, "res0.tif"), NULL, 1, H, W, px, 0, 4, RESUNIT_CENTIMETER, NULL);
  ndf_image img, back;
  if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
    CHECK(0, "res0: %s", err);
    return;
  }
  CHECK(isnan(img.spacing[1]) && close_rel(img.spacing[0], 2.5, 1e-6),
        "res0: spacing %g %g, expected 2.5 and NaN", img.spacing[0], img.spacing[1]);
  if (write_read(io_path(out, "res0_back.tif"), &img, &back)) {
    TIFF *tif = TIFFOpen(out, "r");
    float xr = -1, yr = -1;
    CHECK(tif && TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xr) &&
              TIFFGetField(tif, TIFFTAG_YRESOLUTION, &yr) && xr == 0 && yr == 4,
          "res0: the copy's resolution is %g %g", xr, yr);
    if (tif) TIFFClose(tif);
    ndf_image_free(&back);
  }
  ndf_image_free(&img);
}

/* The read limit: a file whose samples need more is refused before they are allocated, through
 * NDF_READ_LIMIT or ndf_io_set_read_limit; one within it reads. */
static void limits(uint64_t *r, const char *ext, ndf_dtype t, int64_t side) {
  char path[IO_PATH], name[32], err[512];
  int64_t shape[2] = {side, side}, small[2] = {side / 2, side / 2};
  ndf_image big = make(r, t, 2, shape, -1), half = make(r, t, 2, small, -1), back;
  snprintf(name, sizeof name, "big%s", ext);
  if (!write_read(io_path(path, name), &big, &back)) return;
  ndf_image_free(&back);
  setenv("NDF_READ_LIMIT", "1M", 1);
  io_read_fails(path, NDF_ENOMEM, "over the read limit of 1 MiB");
  setenv("NDF_READ_LIMIT", "lots", 1);
  io_read_fails(path, NDF_EINVAL, "NDF_READ_LIMIT");
  unsetenv("NDF_READ_LIMIT");
  ndf_io_set_read_limit(1 << 20);
  io_read_fails(path, NDF_ENOMEM, "read limit");
  snprintf(name, sizeof name, "half%s", ext);
  if (write_read(io_path(path, name), &half, &back)) { /* a quarter of the size: within it */
    CHECK(same(&back.a, &half.a), "%s: within the read limit, read differently", name);
    ndf_image_free(&back);
  }
  ndf_io_set_read_limit(0);
  ndf_image_free(&big);
  ndf_image_free(&half);
  (void)err;
}

/* A small file declaring a huge image (ImageWidth and ImageLength patched): refused by the read
 * limit before anything of its size is allocated. */
static void tiff_huge_declared(void) {
  char path[IO_PATH];
  static const uint32_t sides[] = {100000, 3000000};
  for (int k = 0; k < 2; k++) {
    TIFF *tif = TIFFOpen(io_path(path, "declared.tif"), "w");
    unsigned char px[256] = {0};
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 16);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 16);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 0xffffffffu);
    TIFFWriteEncodedStrip(tif, 0, px, sizeof px);
    TIFFClose(tif);
    size_t n = 0;
    unsigned char *b = io_read_file(path, &n);
    size_t w = ifd_entry(b, TIFFTAG_IMAGEWIDTH), h = ifd_entry(b, TIFFTAG_IMAGELENGTH);
    CHECK(w && h, "declared.tif: no ImageWidth or ImageLength");
    for (int j = 0; w && h && j < 2; j++) {
      unsigned char *e = b + (j ? h : w);
      e[2] = 4; /* LONG */
      put32(e + 4, 1);
      put32(e + 8, sides[k]);
    }
    io_write_file(path, b, n);
    free(b);
    ndf_io_set_read_limit(1 << 20);
    io_read_fails(path, NDF_ENOMEM, "over the read limit");
    ndf_io_set_read_limit(0);
  }
}

/* Value i of the IFD entry at e (SHORT or LONG, 4 or more of them, out of line), and setting it. */
static uint32_t entry_value(const unsigned char *b, size_t e, int i) {
  size_t at = b[e + 8] | b[e + 9] << 8 | b[e + 10] << 16 | (size_t)b[e + 11] << 24;
  if (b[e + 2] == 3) return b[at + 2 * i] | b[at + 2 * i + 1] << 8;
  at += 4 * (size_t)i;
  return b[at] | b[at + 1] << 8 | b[at + 2] << 16 | (uint32_t)b[at + 3] << 24;
}

static void entry_set(unsigned char *b, size_t e, int i, uint32_t v) {
  size_t at = b[e + 8] | b[e + 9] << 8 | b[e + 10] << 16 | (size_t)b[e + 11] << 24;
  if (b[e + 2] == 3) {
    b[at + 2 * i] = (unsigned char)v;
    b[at + 2 * i + 1] = (unsigned char)(v >> 8);
  } else {
    put32(b + at + 4 * (size_t)i, v);
  }
}

/* A strip or tile of compressed data cut short (its byte count less 1 to 16) or with a byte
 * changed: an error, never other samples. A deflate stream is checked to its end and checksum;
 * LZW has no checksum and libtiff stops at the samples' end, so an LZW strip cut in its end code
 * alone reads whole, with its samples exact. A strile whose bytes go on past its stream (its
 * byte count 1 or 2 more) reads whole. */
static void tiff_cut_data(uint64_t *r) {
  enum { S = 64 };
  static uint16_t px[S * S];
  for (int k = 0; k < S * S; k++)
    px[k] = (uint16_t)t_randint(r, 0, 40); /* compressible */
  static const struct {
    const char *name;
    uint16_t compression, predictor;
    int tiled;
  } cases[] = {{"cut_deflate", COMPRESSION_ADOBE_DEFLATE, PREDICTOR_NONE, 0},
               {"cut_deflate_tiles", COMPRESSION_ADOBE_DEFLATE, PREDICTOR_HORIZONTAL, 1},
               {"cut_lzw", COMPRESSION_LZW, PREDICTOR_NONE, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[IO_PATH], name[64];
    snprintf(name, sizeof name, "%s.tif", cases[i].name);
    TIFF *tif = TIFFOpen(io_path(path, name), "w");
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, S);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, S);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 16);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, cases[i].compression);
    TIFFSetField(tif, TIFFTAG_PREDICTOR, cases[i].predictor);
    if (cases[i].tiled) {
      TIFFSetField(tif, TIFFTAG_TILEWIDTH, S / 2);
      TIFFSetField(tif, TIFFTAG_TILELENGTH, S / 2);
      uint16_t tile[S / 2 * S / 2];
      for (int t = 0; t < 4; t++) {
        for (int y = 0; y < S / 2; y++)
          memcpy(tile + y * S / 2, px + (t / 2 * S / 2 + y) * S + t % 2 * S / 2, S);
        TIFFWriteEncodedTile(tif, (uint32_t)t, tile, sizeof tile);
      }
    } else {
      TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, S / 4);
      for (int t = 0; t < 4; t++)
        TIFFWriteEncodedStrip(tif, (uint32_t)t, px + t * S * S / 4, S * S / 2);
    }
    TIFFClose(tif);
    size_t n = 0;
    unsigned char *b = io_read_file(path, &n), *c = malloc(n);
    ndf_image img;
    char err[512];
    if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "%s: %s", cases[i].name, err);
    } else {
      CHECK(img.a.dtype == NDF_U16 && ndf_array_size(&img.a) == S * S &&
                !memcmp(img.a.data, px, sizeof px),
            "%s: the whole file reads differently", cases[i].name);
      ndf_image_free(&img);
    }
    size_t e = ifd_entry(b, cases[i].tiled ? TIFFTAG_TILEBYTECOUNTS : TIFFTAG_STRIPBYTECOUNTS);
    size_t eo = ifd_entry(b, cases[i].tiled ? TIFFTAG_TILEOFFSETS : TIFFTAG_STRIPOFFSETS);
    CHECK(e && eo, "%s: no byte counts or offsets", cases[i].name);
    if (!e || !eo) {
      free(b);
      free(c);
      continue;
    }
    uint32_t count = entry_value(b, e, 1), off = entry_value(b, eo, 1);
    for (int k = -2; k <= 16; k++) { /* strile 1 less k bytes; k 0: one byte changed */
      memcpy(c, b, n);
      if (k)
        entry_set(c, e, 1, (uint32_t)((int)count - k));
      else if (cases[i].compression == COMPRESSION_LZW)
        continue; /* LZW has no check of its samples */
      else
        c[off + count / 2] ^= 0x10;
      snprintf(name, sizeof name, "%s_%d.tif", cases[i].name, k);
      io_write_file(io_path(path, name), c, n);
      ndf_status st = ndf_image_read(path, NULL, &img, err, sizeof err);
      if (st == NDF_OK) {
        CHECK((k < 0 || cases[i].compression == COMPRESSION_LZW) &&
                  !memcmp(img.a.data, px, sizeof px),
              "%s: a strile %s read without error", cases[i].name,
              k < 0 ? "with bytes after its stream read differently, or"
              : k   ? "cut short"
                    : "with a byte changed");
        ndf_image_free(&img);
      } else {
        CHECK(k >= 0 && st == NDF_EINVAL && strstr(err, path), "%s cut by %d: %s (%s)",
              cases[i].name, k, ndf_status_str(st), err);
      }
    }
    free(b);
    free(c);
  }
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL a reader blocked on a FIFO\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
  _exit(1);
}

/* A FIFO and a device given to the format's reader itself (ndf_image_read checks the name
 * before): refused on the descriptor it opens, without blocking or reading. */
static void special_files(const char *ext, ndf_status (*read)(const char *, const ndf_read_opts *,
                                                              ndf_image *, char *, size_t)) {
  char path[IO_PATH], name[32], err[512];
  snprintf(name, sizeof name, "fifo%s", ext);
  if (mkfifo(io_path(path, name), 0600) != 0) {
    CHECK(0, "mkfifo %s: %s", path, strerror(errno));
    return;
  }
  ndf_image img;
  ndf_image_init(&img);
  void (*prev)(int) = signal(SIGALRM, on_alarm);
  alarm(10);
  ndf_status st = read(path, NULL, &img, err, sizeof err);
  CHECK(st == NDF_EIO && strstr(err, path) && strstr(err, "FIFO"), "%s: %s (%s)", path,
        ndf_status_str(st), err);
  st = read("/dev/zero", NULL, &img, err, sizeof err);
  CHECK(st == NDF_EIO && strstr(err, "/dev/zero") && strstr(err, "device"), "/dev/zero: %s (%s)",
        ndf_status_str(st), err);
  alarm(0);
  signal(SIGALRM, prev);
  if (st == NDF_OK) ndf_image_free(&img);
  unlink(path);
}

/* From .npy (no metadata) to TIFF and back. */
static void cross_format(uint64_t *r, const char *ext, ndf_dtype t, int nd, const int64_t *shape,
                         int ca) {
  char npy[IO_PATH], out[IO_PATH], name[64], err[512], d[96];
  ndf_image img = make(r, t, nd, shape, ca), a, b;
  snprintf(name, sizeof name, "x_%d_%d.npy", (int)t, nd);
  describe(&img.a, d, sizeof d);
  if (write_read(io_path(npy, name), &img, &a)) {
    CHECK(a.format == NDF_FORMAT_NPY && a.meta == NULL, "npy read");
    a.channel_axis = ca; /* .npy has none: the caller says which axis is colour */
    snprintf(name, sizeof name, "x_%d_%d%s", (int)t, nd, ext);
    if (write_read(io_path(out, name), &a, &b)) {
      CHECK(same(&b.a, &img.a) && b.channel_axis == ca, "%s from .npy to %s differs", d, ext);
      /* and the image read from TIFF/PNG (with its metadata) to .npy and back */
      snprintf(name, sizeof name, "y_%d_%d.npy", (int)t, nd);
      ndf_image c;
      if (write_read(io_path(npy, name), &b, &c)) {
        CHECK(same(&c.a, &img.a), "%s to .npy differs", d);
        ndf_image_free(&c);
      }
      ndf_image_free(&b);
    }
    ndf_image_free(&a);
  }
  (void)err;
  ndf_image_free(&img);
}

/* ======================================== PNG ======================================== */

typedef struct pspec {
  const char *name;
  uint32_t w, h;
  int depth, ctype, interlace;
  int trns; /* palette: alpha for the first entries; gray/RGB: one transparent colour */
} pspec;

static jmp_buf png_jmp;
static void test_png_error(png_structp png, png_const_charp msg) {
  (void)png;
  fprintf(stderr, "libpng (test writer): %s\n", msg);
  longjmp(png_jmp, 1);
}

/* Writes the file with libpng and returns the array the reader must make of it: palettes and
 * transparency expanded, small gray depths scaled to 8 bits (libpng's png_set_expand). */
static int png_make(const char *path, const pspec *s, uint64_t *r, ndf_array *want) {
  int fc = s->ctype == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
           : s->ctype == PNG_COLOR_TYPE_RGB      ? 3
           : s->ctype == PNG_COLOR_TYPE_RGBA     ? 4
                                                 : 1;
  int pal = s->ctype == PNG_COLOR_TYPE_PALETTE;
  int C = pal ? (s->trns ? 4 : 3) : fc + (s->trns && (fc == 1 || fc == 3));
  int es = s->depth == 16 ? 2 : 1;
  int64_t shape[3] = {C, s->h, s->w}, plane = (int64_t)s->w * s->h;
  *want = ndf_array_contiguous(es == 2 ? NDF_U16 : NDF_U8, C > 1 ? 3 : 2, C > 1 ? shape : shape + 1,
                               NULL);
  want->data = malloc((size_t)ndf_array_size(want) * es);
  size_t rowbytes = ((size_t)s->w * fc * s->depth + 7) / 8;
  unsigned char *img = calloc(s->h, rowbytes);
  png_bytep *rows = malloc(sizeof *rows * s->h);
  png_color palette[256];
  png_byte alpha[256];
  int n = pal ? 1 << s->depth : 0, top = (1 << s->depth) - 1;
  for (int i = 0; i < n; i++) {
    palette[i].red = (png_byte)t_randint(r, 0, 255);
    palette[i].green = (png_byte)t_randint(r, 0, 255);
    palette[i].blue = (png_byte)t_randint(r, 0, 255);
    alpha[i] = (png_byte)t_randint(r, 0, 255);
  }
  int ntrns = pal && s->trns ? (n + 1) / 2 : 0; /* entries past tRNS are opaque */
  png_color_16 tc = {0, 0, 0, 0, 0};
  uint64_t trans[4] = {(uint64_t)t_randint(r, 0, top), (uint64_t)t_randint(r, 0, top),
                       (uint64_t)t_randint(r, 0, top), 0};
  tc.gray = (png_uint_16)trans[0];
  tc.red = (png_uint_16)trans[0];
  tc.green = (png_uint_16)trans[1];
  tc.blue = (png_uint_16)trans[2];
  for (uint32_t y = 0; y < s->h; y++) {
    rows[y] = img + y * rowbytes;
    for (uint32_t x = 0; x < s->w; x++) {
      uint64_t v[4];
      int hit = 1;
      for (int c = 0; c < fc; c++) {
        /* some pixels take the transparent colour */
        v[c] =
            s->trns && !pal && t_randint(r, 0, 3) == 0 ? trans[c] : (uint64_t)t_randint(r, 0, top);
        if (s->trns && !pal && x % 5 == 0) v[c] = trans[c];
        hit &= v[c] == trans[c];
        uint64_t i = (uint64_t)x * fc + c;
        if (s->depth == 16) {
          rows[y][2 * i] = (png_byte)(v[c] >> 8); /* big-endian in the file */
          rows[y][2 * i + 1] = (png_byte)v[c];
        } else {
          put_code(rows[y], i, (unsigned)s->depth, v[c]);
        }
      }
      int64_t at = (int64_t)y * s->w + x;
      if (pal) {
        const png_byte rgb[3] = {palette[v[0]].red, palette[v[0]].green, palette[v[0]].blue};
        for (int c = 0; c < 3; c++)
          ndf__store(want->dtype, want->data, c * plane + at, rgb[c]);
        if (s->trns)
          ndf__store(want->dtype, want->data, 3 * plane + at,
                     (int)v[0] < ntrns ? alpha[v[0]] : 255);
        continue;
      }
      double scale = s->depth < 8 ? 255.0 / top : 1;
      for (int c = 0; c < fc; c++)
        ndf__store(want->dtype, want->data, c * plane + at, (double)v[c] * scale);
      if (C > fc)
        ndf__store(want->dtype, want->data, fc * plane + at, hit ? 0 : (es == 2 ? 65535 : 255));
    }
  }
  FILE *f = fopen(path, "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, test_png_error, NULL);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmp)) {
    fclose(f);
    return 0;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, s->w, s->h, s->depth, s->ctype, s->interlace, PNG_COMPRESSION_TYPE_BASE,
               PNG_FILTER_TYPE_BASE);
  if (pal) png_set_PLTE(png, info, palette, n);
  if (s->trns) png_set_tRNS(png, info, alpha, ntrns, &tc);
  png_write_info(png, info);
  png_write_image(png, rows); /* libpng interlaces */
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  fclose(f);
  free(img);
  free(rows);
  return 1;
}

static void png_files(uint64_t *r) {
  const int G = PNG_COLOR_TYPE_GRAY, GA = PNG_COLOR_TYPE_GRAY_ALPHA, RGB = PNG_COLOR_TYPE_RGB,
            RGBA = PNG_COLOR_TYPE_RGBA, PAL = PNG_COLOR_TYPE_PALETTE, AD7 = PNG_INTERLACE_ADAM7;
  const pspec specs[] = {
      {"g8", 37, 29, 8, G, 0, 0},
      {"g16_adam7", 33, 21, 16, G, AD7, 0},
      {"g1", 13, 9, 1, G, 0, 0},
      {"g2_adam7", 11, 7, 2, G, AD7, 0},
      {"g4", 9, 6, 4, G, 0, 0},
      {"g8_trns", 17, 12, 8, G, 0, 1},
      {"g16_trns", 10, 10, 16, G, 0, 1},
      {"ga8", 21, 14, 8, GA, 0, 0},
      {"ga16_adam7", 19, 18, 16, GA, AD7, 0},
      {"rgb8", 40, 30, 8, RGB, 0, 0},
      {"rgb16", 23, 17, 16, RGB, 0, 0},
      {"rgb8_trns_adam7", 15, 15, 8, RGB, AD7, 1},
      {"rgba8", 31, 22, 8, RGBA, 0, 0},
      {"rgba16_adam7", 9, 33, 16, RGBA, AD7, 0},
      {"pal8", 25, 14, 8, PAL, 0, 0},
      {"pal4_trns", 14, 9, 4, PAL, 0, 1},
      {"pal1", 30, 3, 1, PAL, AD7, 0},
      {"pal2_trns", 7, 12, 2, PAL, 0, 1},
      {"one_pixel", 1, 1, 8, RGB, AD7, 0},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    const pspec *s = &specs[i];
    char path[IO_PATH], out[IO_PATH], name[64];
    snprintf(name, sizeof name, "%s.png", s->name);
    ndf_array want;
    if (!png_make(io_path(path, name), s, r, &want)) {
      CHECK(0, "%s: libpng could not write the test file", s->name);
      continue;
    }
    ndf_image img, back;
    if (read_made(s->name, path, ".png", &want, want.ndim == 3 ? 0 : -1, out, &img, &back)) {
      ndf_image_free(&back);
      ndf_image_free(&img);
    }
    free(want.data);
  }
}

/* A row wider than libpng's default limit (1e6) and longer than 16 MB. */
static void png_wide(void) {
  int64_t shape[3] = {4, 1, 2500000};
  ndf_image img;
  ndf_image_init(&img);
  img.a = ndf_array_contiguous(NDF_U16, 3, shape, malloc(4 * 2500000 * 2));
  img.channel_axis = 0;
  if (!img.a.data) abort();
  for (int64_t i = 0; i < 4 * 2500000; i++)
    ((uint16_t *)img.a.data)[i] = (uint16_t)(i * 2654435761u >> 7);
  char path[IO_PATH];
  ndf_image back;
  if (write_read(io_path(path, "wide.png"), &img, &back)) {
    CHECK(same(&back.a, &img.a), "a 2500000-pixel RGBA row differs");
    ndf_image_free(&back);
  }
  unlink(path);
  ndf_image_free(&img);
}

static void png_round_trips(uint64_t *r) {
  for (ndf_dtype t = NDF_U8; t <= NDF_U16; t++)
    for (int C = 1; C <= 4; C++) {
      int64_t shape[3] = {C, t_randint(r, 1, 50), t_randint(r, 1, 50)};
      int nd = C > 1 ? 3 : 2;
      ndf_image img = make(r, t, nd, C > 1 ? shape : shape + 1, C > 1 ? 0 : -1);
      uint32_t ppm[2] = {(uint32_t)t_randint(r, 1, 100000), (uint32_t)t_randint(r, 1, 100000)};
      img.spacing[nd - 2] = 1000.0 / ppm[0];
      img.spacing[nd - 1] = 1000.0 / ppm[1];
      char path[IO_PATH], name[64], d[96];
      snprintf(name, sizeof name, "rt_%d_%d.png", (int)t, C);
      describe(&img.a, d, sizeof d);
      ndf_image back, again;
      if (write_read(io_path(path, name), &img, &back)) {
        CHECK(same(&back.a, &img.a), "round trip of %s differs", d);
        CHECK(back.format == NDF_FORMAT_PNG && back.channel_axis == img.channel_axis,
              "%s: format %d axis %d", d, back.format, back.channel_axis);
        for (int k = 0; k < nd; k++)
          CHECK(back.spacing[k] == img.spacing[k], "%s: spacing %d: %.17g, wrote %.17g", d, k,
                back.spacing[k], img.spacing[k]);
        if (write_read(path, &back, &again)) {
          CHECK(same(&again.a, &img.a), "second round trip of %s differs", d);
          ndf_image_free(&again);
        }
        ndf_image_free(&back);
      }
      ndf_image_free(&img);
    }
}

/* A small ICC profile for libpng's checks: a header, a white point as its one tag, and noise
 * (libpng 1.6.39 drops an iCCP chunk shorter than 92 bytes as "too short"). */
enum { ICC_LEN = 256 };
static void icc_profile(unsigned char p[ICC_LEN], int gray) {
  memset(p, 0, ICC_LEN);
  p[2] = ICC_LEN >> 8; /* size */
  p[3] = ICC_LEN & 255;
  p[8] = 2; /* version 2.1 */
  p[9] = 0x10;
  memcpy(p + 12, "mntr", 4);                 /* display device */
  memcpy(p + 16, gray ? "GRAY" : "RGB ", 4); /* colour space */
  memcpy(p + 20, "XYZ ", 4);                 /* connection space */
  memcpy(p + 36, "acsp", 4);
  static const unsigned char d50[12] = {0, 0, 0xf6, 0xd6, 0, 1, 0, 0, 0, 0, 0xd3, 0x2d};
  memcpy(p + 68, d50, 12); /* illuminant */
  p[131] = 1;              /* one tag: wtpt at 144, 20 bytes */
  memcpy(p + 132, "wtpt", 4);
  p[139] = 144;
  p[143] = 20;
  memcpy(p + 144, "XYZ ", 4);
  memcpy(p + 152, d50, 12);
  for (uint32_t i = 164, x = 1; i < ICC_LEN; i++)
    p[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 24);
}

/* The metadata test file: 16-bit gray with pHYs, text of the three kinds, and the sRGB chunks
 * (variant 0) or an ICC profile (variant 1). */
static int meta_write(const char *path, int variant, const uint16_t *px, const unsigned char *icc,
                      png_text *t) {
  FILE *f = fopen(path, "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, test_png_error, NULL);
  png_infop info = png_create_info_struct(png);
  if (!f || setjmp(png_jmp)) {
    if (f) fclose(f);
    png_destroy_write_struct(&png, &info);
    return 0;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, 7, 5, 16, PNG_COLOR_TYPE_GRAY, 0, 0, 0);
  png_set_pHYs(png, info, 3937, 7874, PNG_RESOLUTION_METER);
  png_set_text(png, info, t, 3);
  if (variant)
    png_set_iCCP(png, info, "test profile", 0, icc, ICC_LEN);
  else
    png_set_sRGB_gAMA_and_cHRM(png, info, PNG_sRGB_INTENT_PERCEPTUAL);
  png_write_info(png, info);
  for (int y = 0; y < 5; y++) {
    unsigned char row[14];
    for (int x = 0; x < 7; x++) {
      row[2 * x] = (unsigned char)(px[y * 7 + x] >> 8);
      row[2 * x + 1] = (unsigned char)px[y * 7 + x];
    }
    png_write_row(png, row);
  }
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  fclose(f);
  return 1;
}

/* What a same-format copy of the metadata test file holds, through libpng. */
static void meta_check(const char *path, int variant, const unsigned char *icc, const png_text *t) {
  FILE *f = fopen(path, "rb");
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, test_png_error, NULL);
  png_infop info = png_create_info_struct(png);
  if (!f || setjmp(png_jmp)) {
    CHECK(0, "libpng could not read the copy %s", path);
    if (f) fclose(f);
    png_destroy_read_struct(&png, &info, NULL);
    return;
  }
  png_init_io(png, f);
  png_read_info(png, info);
  png_uint_32 xp = 0, yp = 0;
  int unit = -1, intent = -1, comp;
  png_get_pHYs(png, info, &xp, &yp, &unit);
  CHECK(xp == 3937 && yp == 7874 && unit == PNG_RESOLUTION_METER, "pHYs %u %u %d", xp, yp, unit);
  png_textp tt;
  int n = png_get_text(png, info, &tt, NULL);
  CHECK(n == 3, "%d text chunks, wrote 3", n);
  for (int i = 0; i < n && i < 3; i++)
    CHECK(!strcmp(tt[i].key, t[i].key) && !strcmp(tt[i].text, t[i].text) &&
              tt[i].compression == t[i].compression,
          "text chunk %d: %s=%s (%d)", i, tt[i].key, tt[i].text, tt[i].compression);
  if (n == 3)
    CHECK(tt[2].lang && !strcmp(tt[2].lang, "en") && tt[2].lang_key &&
              !strcmp(tt[2].lang_key, "Beschreibung"),
          "iTXt language lost");
  if (variant) {
    png_charp name;
    png_bytep prof;
    png_uint_32 len = 0;
    CHECK(png_get_iCCP(png, info, &name, &comp, &prof, &len) && len == ICC_LEN &&
              !strcmp(name, "test profile") && !memcmp(prof, icc, ICC_LEN),
          "iCCP lost");
  } else {
    double g = 0;
    CHECK(png_get_sRGB(png, info, &intent) && intent == PNG_sRGB_INTENT_PERCEPTUAL, "sRGB lost");
    CHECK(png_get_gAMA(png, info, &g) && fabs(g - 0.45455) < 1e-5, "gAMA lost (%g)", g);
  }
  png_destroy_read_struct(&png, &info, NULL);
  fclose(f);
}

static void png_metadata(uint64_t *r) {
  char path[IO_PATH], out[IO_PATH], err[512];
  png_text t[3];
  memset(t, 0, sizeof t);
  t[0].compression = PNG_TEXT_COMPRESSION_NONE;
  t[0].key = "Title";
  t[0].text = "a test";
  t[1].compression = PNG_TEXT_COMPRESSION_zTXt;
  t[1].key = "Comment";
  t[1].text = "compressed comment, compressed comment, compressed comment";
  t[2].compression = PNG_ITXT_COMPRESSION_NONE;
  t[2].key = "Description";
  t[2].text = "UTF-8: \xc2\xb5m";
  t[2].lang = "en";
  t[2].lang_key = "Beschreibung";
  unsigned char icc[ICC_LEN];
  icc_profile(icc, 1);
  for (int variant = 0; variant < 2; variant++) {
    uint16_t px[35];
    for (int i = 0; i < 35; i++)
      px[i] = (uint16_t)t_randint(r, 0, 65535);
    if (!meta_write(io_path(path, variant ? "meta_icc.png" : "meta.png"), variant, px, icc, t)) {
      CHECK(0, "libpng could not write %s", path);
      continue;
    }
    ndf_image img, back;
    if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "%s", err);
      continue;
    }
    CHECK(img.a.dtype == NDF_U16 && img.a.ndim == 2 && !memcmp(img.a.data, px, sizeof px),
          "metadata file: data");
    CHECK(img.spacing[1] == 1000.0 / 3937 && img.spacing[0] == 1000.0 / 7874, "pHYs: spacing %g %g",
          img.spacing[0], img.spacing[1]);
    if (write_read(io_path(out, variant ? "meta_icc_back.png" : "meta_back.png"), &img, &back)) {
      CHECK(same(&back.a, &img.a), "metadata copy: data");
      CHECK(back.spacing[0] == img.spacing[0] && back.spacing[1] == img.spacing[1],
            "metadata copy: spacing");
      ndf_image_free(&back);
      meta_check(out, variant, icc, t);
    }
    ndf_image_free(&img);
  }
}

/* A chunk's CRC over its type and data. */
static void fix_crc(unsigned char *chunk) {
  uint32_t len = (uint32_t)chunk[0] << 24 | chunk[1] << 16 | chunk[2] << 8 | chunk[3];
  uLong crc = crc32(0, chunk + 4, 4 + len);
  unsigned char *p = chunk + 8 + len;
  p[0] = (unsigned char)(crc >> 24), p[1] = (unsigned char)(crc >> 16);
  p[2] = (unsigned char)(crc >> 8), p[3] = (unsigned char)crc;
}

/* Appends a chunk (its length, type, data and CRC, the CRC wrong where bad) at p: its end. */
static unsigned char *put_chunk(unsigned char *p, const char *type, const void *data, uint32_t n,
                                int bad) {
  const unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                                (unsigned char)(n >> 8), (unsigned char)n};
  memcpy(p, len, 4);
  memcpy(p + 4, type, 4);
  if (n) memcpy(p + 8, data, n);
  uLong crc = crc32(0, p + 4, 4 + n) ^ (bad ? 1 : 0);
  p += 8 + n;
  for (int k = 0; k < 4; k++)
    *p++ = (unsigned char)(crc >> (24 - 8 * k));
  return p;
}

/* A gray 8-bit PNG of w x h pixels (at most 64 x 64) whose image data is the zlib stream z (n
 * bytes), with the chunks pre (each written as given) before it: its size in out. */
static size_t png_file(unsigned char *out, uint32_t w, uint32_t h, const unsigned char *pre,
                       size_t npre, const unsigned char *z, size_t n) {
  const unsigned char ihdr[13] = {0, 0, 0, (unsigned char)w, 0, 0, 0, (unsigned char)h, 8, 0};
  unsigned char *p = out;
  memcpy(p, "\x89PNG\r\n\x1a\n", 8);
  p = put_chunk(p + 8, "IHDR", ihdr, 13, 0);
  if (npre) memcpy(p, pre, npre);
  p = put_chunk(p + npre, "IDAT", z, (uint32_t)n, 0);
  p = put_chunk(p, "IEND", NULL, 0, 0);
  return (size_t)(p - out);
}

/* Image data cut short, with more than the image in it, with bytes after its stream, or with
 * its checksum wrong (each in chunks whose CRCs are right), and an ancillary chunk whose CRC is
 * wrong: each an error, never an image. */
static void png_streams(uint64_t *r) {
  enum { W = 40, H = 30 };
  unsigned char raw[H * (W + 1) + 64], z[8192], file[16384], pre[64];
  for (int y = 0; y < H; y++) {
    raw[y * (W + 1)] = 0;
    for (int x = 0; x < W; x++)
      raw[y * (W + 1) + 1 + x] = (unsigned char)t_randint(r, 0, 255);
  }
  uLongf zn = sizeof z;
  if (compress(z, &zn, raw, sizeof raw - 64) != Z_OK) abort();
  char path[IO_PATH];
  ndf_image img;
  char err[512];
  size_t n = png_file(file, W, H, NULL, 0, z, zn);
  io_write_file(io_path(path, "stream.png"), file, n);
  CHECK(ndf_image_read(path, NULL, &img, err, sizeof err) == NDF_OK, "stream.png: %s", err);
  if (img.a.data) ndf_image_free(&img);
  for (int cut = 1; cut <= 8; cut++) { /* the checksum, then the data's last bytes */
    n = png_file(file, W, H, NULL, 0, z, zn - (uLongf)cut);
    io_write_file(io_path(path, "stream_cut.png"), file, n);
    io_read_fails(path, NDF_EINVAL, "corrupt");
  }
  n = png_file(file, W, H, NULL, 0, z, zn / 2);
  io_write_file(io_path(path, "stream_half.png"), file, n);
  io_read_fails(path, NDF_EINVAL, "Not enough image data");
  z[zn - 1] ^= 1;
  n = png_file(file, W, H, NULL, 0, z, zn);
  io_write_file(io_path(path, "stream_adler.png"), file, n);
  io_read_fails(path, NDF_EINVAL, "incorrect data check");
  z[zn - 1] ^= 1;
  memcpy(z + zn, "junk", 4);
  n = png_file(file, W, H, NULL, 0, z, zn + 4);
  io_write_file(io_path(path, "stream_junk.png"), file, n);
  io_read_fails(path, NDF_EINVAL, "Extra compressed data");
  uLongf zn2 = sizeof z;
  if (compress(z, &zn2, raw, sizeof raw) != Z_OK) abort(); /* two rows too many */
  n = png_file(file, W, H, NULL, 0, z, zn2);
  io_write_file(io_path(path, "stream_long.png"), file, n);
  io_read_fails(path, NDF_EINVAL, "Too much image data");
  zn = sizeof z;
  if (compress(z, &zn, raw, sizeof raw - 64) != Z_OK) abort();
  size_t np = (size_t)(put_chunk(pre, "tEXt", "Title\0a title", 13, 1) - pre);
  n = png_file(file, W, H, pre, np, z, zn);
  io_write_file(io_path(path, "text_crc.png"), file, n);
  io_read_fails(path, NDF_EINVAL, "CRC");
}

/* oFFs and pHYs chunk data. */
static size_t offs_phys(unsigned char *pre, int32_t x, int32_t y, int unit, uint32_t ppm) {
  unsigned char o[9], ph[9];
  for (int k = 0; k < 4; k++) {
    o[k] = (unsigned char)((uint32_t)x >> (24 - 8 * k));
    o[4 + k] = (unsigned char)((uint32_t)y >> (24 - 8 * k));
    ph[k] = ph[4 + k] = (unsigned char)(ppm >> (24 - 8 * k));
  }
  o[8] = (unsigned char)unit;
  ph[8] = 1; /* metres */
  unsigned char *p = put_chunk(pre, "oFFs", o, 9, 0);
  if (ppm != 1) p = put_chunk(p, "pHYs", ph, 9, 0);
  return (size_t)(p - pre);
}

/* A copy keeps the file's oFFs; one whose first pixel lies elsewhere in the file's grid (the
 * image's origin) moves it by as many pixels (micrometres through pHYs); without pHYs a
 * micrometre offset cannot move and is left out. pHYs of 0 pixels a metre is no size (NaN). */
static void png_offsets(uint64_t *r) {
  enum { W = 12, H = 9 };
  unsigned char raw[H * (W + 1)], z[2048], file[4096], pre[64];
  for (int i = 0; i < H * (W + 1); i++)
    raw[i] = i % (W + 1) ? (unsigned char)t_randint(r, 0, 255) : 0;
  uLongf zn = sizeof z;
  if (compress(z, &zn, raw, sizeof raw) != Z_OK) abort();
  static const struct {
    const char *name;
    int unit;
    uint32_t ppm; /* 1: no pHYs */
    int64_t oy, ox;
    int want; /* the copy has oFFs */
    int32_t x, y;
  } cases[] = {
      {"offs_px", PNG_OFFSET_PIXEL, 1, 0, 0, 1, 100, -50},
      {"offs_px_grown", PNG_OFFSET_PIXEL, 1, -2, -3, 1, 97, -52},
      {"offs_um", PNG_OFFSET_MICROMETER, 2000, 0, 0, 1, 100, -50},
      {"offs_um_grown", PNG_OFFSET_MICROMETER, 2000, -2, -3, 1, 100 - 1500, -50 - 1000},
      {"offs_um_nophys", PNG_OFFSET_MICROMETER, 1, -2, -3, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[IO_PATH], out[IO_PATH], name[64], err[512];
    size_t np = offs_phys(pre, 100, -50, cases[i].unit, cases[i].ppm);
    size_t n = png_file(file, W, H, pre, np, z, zn);
    snprintf(name, sizeof name, "%s.png", cases[i].name);
    io_write_file(io_path(path, name), file, n);
    ndf_image img, back;
    if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "%s: %s", cases[i].name, err);
      continue;
    }
    ndf_image v = img;
    v.meta_free = NULL;
    v.origin[0] = cases[i].oy;
    v.origin[1] = cases[i].ox;
    snprintf(name, sizeof name, "%s_back.png", cases[i].name);
    if (write_read(io_path(out, name), &v, &back)) {
      CHECK(same(&back.a, &img.a), "%s: the copy's samples", cases[i].name);
      FILE *f = fopen(out, "rb");
      png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, test_png_error, NULL);
      png_infop info = png_create_info_struct(png);
      png_int_32 x = 0, y = 0;
      int unit = -1;
      volatile int has = -1; /* set under setjmp */
      if (f && !setjmp(png_jmp)) {
        png_init_io(png, f);
        png_read_info(png, info);
        has = png_get_oFFs(png, info, &x, &y, &unit) != 0;
      }
      png_destroy_read_struct(&png, &info, NULL);
      if (f) fclose(f);
      CHECK(has == cases[i].want &&
                (!has || (x == cases[i].x && y == cases[i].y && unit == cases[i].unit)),
            "%s: the copy's oFFs is %s %d %d (%d), expected %s %d %d", cases[i].name,
            has ? "at" : "none", x, y, unit, cases[i].want ? "at" : "none", cases[i].x, cases[i].y);
      ndf_image_free(&back);
    }
    ndf_image_free(&img);
  }
  /* pHYs of 0 pixels a metre */
  char path[IO_PATH], err[512];
  size_t np = offs_phys(pre, 0, 0, 0, 0);
  size_t n = png_file(file, W, H, pre, np, z, zn);
  io_write_file(io_path(path, "phys0.png"), file, n);
  ndf_image img;
  if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
    CHECK(0, "phys0: %s", err);
    return;
  }
  CHECK(isnan(img.spacing[0]) && isnan(img.spacing[1]), "phys0: spacing %g %g, expected NaN",
        img.spacing[0], img.spacing[1]);
  ndf_image_free(&img);
}

static void png_errors(uint64_t *r) {
  char path[IO_PATH];
  int64_t shape[3] = {3, 20, 24};
  ndf_image img = make(r, NDF_U8, 3, shape, 0), back;
  if (!write_read(io_path(path, "whole.png"), &img, &back)) return;
  ndf_image_free(&back);
  size_t n;
  unsigned char *b = io_read_file(path, &n), *c = malloc(n);
  cuts("cut.png", b, n, 1, n, &img.a); /* every cut fails: IEND is required */
  memcpy(c, b, n);
  c[1] = 'X';
  io_write_file(io_path(path, "magic.png"), c, n);
  io_read_fails(path, NDF_EINVAL, "bad signature");
  io_write_file(io_path(path, "tiny.png"), b, 6);
  io_read_fails(path, NDF_EINVAL, "truncated");
  /* IHDR at byte 8: length, "IHDR", width, height, depth, colour type, ... */
  static const struct {
    const char *name;
    int at;
    uint32_t value;
    int bytes;
    const char *needle;
  } patches[] = {
      {"width0.png", 16, 0, 4, "corrupt"},        {"depth3.png", 24, 3, 1, "corrupt"},
      {"rgb_depth4.png", 24, 4, 1, "corrupt"},    {"ctype7.png", 25, 7, 1, "corrupt"},
      {"huge.png", 16, 100000, 4, "more than a"},
  };
  ndf_io_set_read_limit((int64_t)1 << 40); /* within the limit: the file's size refuses huge.png */
  for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
    memcpy(c, b, n);
    for (int k = 0; k < patches[i].bytes; k++)
      c[patches[i].at + k] = (unsigned char)(patches[i].value >> 8 * (patches[i].bytes - 1 - k));
    if (!strcmp(patches[i].name, "huge.png")) /* and as tall */
      for (int k = 0; k < 4; k++)
        c[20 + k] = c[16 + k];
    fix_crc(c + 8);
    io_write_file(io_path(path, patches[i].name), c, n);
    io_read_fails(path, NDF_EINVAL, patches[i].needle);
  }
  ndf_io_set_read_limit(1 << 20); /* over it: refused by the limit before anything else */
  io_read_fails(io_path(path, "huge.png"), NDF_ENOMEM, "over the read limit");
  ndf_io_set_read_limit(0);
  { /* a text chunk claiming 2 GB in a small file: refused without allocating it (fuzz find) */
    static const unsigned char big[12] = {0x7f, 0xff, 0, 0, 't', 'E', 'X', 't', 'k', 0, 'v', 'v'};
    memcpy(c, b, 33);
    memcpy(c + 33, big, sizeof big);
    io_write_file(io_path(path, "hugetext.png"), c, 33 + sizeof big);
    io_read_fails(path, NDF_EINVAL, "truncated");
  }
  memcpy(c, b, n);
  c[n - 12 - 1] ^= 0x55; /* the last IDAT's CRC */
  io_write_file(io_path(path, "crc.png"), c, n);
  io_read_fails(path, NDF_EINVAL, "CRC");
  free(b);
  free(c);
  io_read_fails(io_path(path, "missing.png"), NDF_EIO, "No such file");

  /* refused writes leave nothing */
  ndf_image f32 = make(r, NDF_F32, 2, shape + 1, -1);
  expect_write_fail(io_path(path, "f32.png"), &f32, NDF_EUNSUPPORTED, "--dtype u8 or u16");
  ndf_image i16 = make(r, NDF_I16, 2, shape + 1, -1);
  expect_write_fail(io_path(path, "i16.png"), &i16, NDF_EUNSUPPORTED, "8- or 16-bit");
  img.channel_axis = -1;
  expect_write_fail(io_path(path, "stack.png"), &img, NDF_EUNSUPPORTED, "no channel axis");
  img.channel_axis = 0;
  int64_t s5[3] = {5, 4, 4}, s4[4] = {2, 3, 4, 5};
  ndf_image five = make(r, NDF_U8, 3, s5, 0), four = make(r, NDF_U16, 4, s4, 0);
  expect_write_fail(io_path(path, "five.png"), &five, NDF_EUNSUPPORTED, "the first of 5");
  expect_write_fail(io_path(path, "four.png"), &four, NDF_EUNSUPPORTED, "4 axes");
  expect_write_fail("/nonexistent/dir/x.png", &img, NDF_EIO, "No such file");
  int64_t big[3] = {4, 300, 300};
  ndf_image large = make(r, NDF_U16, 3, big, 0);
  failing_writes(".png", &large, "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16, "f32", &f32);
  ndf_image_free(&large);
  ndf_image_free(&f32);
  ndf_image_free(&i16);
  ndf_image_free(&five);
  ndf_image_free(&four);
  ndf_image_free(&img);
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "tiff") && strcmp(argv[1], "png"))) {
    fprintf(stderr, "usage: test_io_tiffpng tiff|png IO_CONVERT\n");
    return 2;
  }
  io_convert_at = argv[2];
  if (io_dir_make("tiffpng")) return 1;
  uint64_t r = t_seed();
  if (!strcmp(argv[1], "tiff")) {
    tiff_round_trips(&r);
    tiff_files(&r);
    tiff_special(&r);
    tiff_metadata(&r);
    int64_t s2[2] = {t_randint(&r, 1, 30), t_randint(&r, 1, 30)};
    int64_t s4[4] = {3, 2, t_randint(&r, 1, 30), t_randint(&r, 1, 30)};
    for (ndf_dtype t = NDF_U8; t <= NDF_F64; t++) {
      cross_format(&r, ".tif", t, 2, s2, -1);
      cross_format(&r, ".tiff", t, 4, s4, 0);
    }
    tiff_errors(&r);
    tiff_imagej(&r);
    tiff_origin(&r);
    limits(&r, ".tif", NDF_U16, 1024);
    tiff_huge_declared();
    tiff_cut_data(&r);
    special_files(".tif", ndf__tiff_read);
  } else {
    png_round_trips(&r);
    png_wide();
    png_files(&r);
    png_metadata(&r);
    int64_t s2[2] = {t_randint(&r, 1, 30), t_randint(&r, 1, 30)};
    int64_t s3[3] = {4, t_randint(&r, 1, 30), t_randint(&r, 1, 30)};
    for (ndf_dtype t = NDF_U8; t <= NDF_U16; t++) {
      cross_format(&r, ".png", t, 2, s2, -1);
      cross_format(&r, ".png", t, 3, s3, 0);
    }
    png_errors(&r);
    png_streams(&r);
    png_offsets(&r);
    limits(&r, ".png", NDF_U8, 1500);
    special_files(".png", ndf__png_read);
  }
  return io_finish(argv[1], 1);
}
