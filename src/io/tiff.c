/* SPDX-License-Identifier: BSD-3-Clause */
/* tiff.c - TIFF over libtiff: a file's pages as one stack (an ImageJ hyperstack's as its
 * channels, frames and slices), colour as planar channels. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <unistd.h>
#include <zlib.h>

#include "convert.h"
#include "core/elem.h"
#include "formats.h"

enum { MAX_EXTRA = 16, NTEXT = 4 };

/* The ASCII tags kept for the writer, in this order in tiff_meta.text. */
static const uint32_t text_tags[NTEXT] = {TIFFTAG_IMAGEDESCRIPTION, TIFFTAG_SOFTWARE,
                                          TIFFTAG_DATETIME, TIFFTAG_ARTIST};

/* What a TIFF writer takes from a file read before. */
typedef struct tiff_meta {
  ndf_dtype dtype;                   /* the array's dtype as read */
  uint16_t format, bits;             /* the file's sample type (SampleFormat, BitsPerSample) */
  uint16_t photometric, spp, nextra; /* as written back: a palette image becomes RGB */
  uint16_t extra[MAX_EXTRA];
  uint16_t compression, predictor;
  int separate; /* the samples were in planes (PlanarConfiguration 2) */
  int has_res;
  float xres, yres;
  uint16_t unit;
  int has_pos; /* XPosition and YPosition, in the resolution's unit */
  float xpos, ypos;
  double imagej_mm; /* ImageJ's unit= in mm, 0 if none or not a length */
  /* ij: the description's ImageJ counts (channels, frames, slices) gave the array's axes, and
   * ij_chan: its channel axis holds ImageJ's channels, a page each, not samples. */
  int ij, ij_chan;
  double z_mm; /* the slices' spacing as read, 0 if none */
  int64_t pages;
  int ndim; /* the array's shape as read */
  int64_t shape[NDF_MAX_DIMS];
  char *text[NTEXT];
} tiff_meta;

static void meta_free(void *p) {
  tiff_meta *m = p;
  if (!m) return;
  for (int i = 0; i < NTEXT; i++)
    free(m->text[i]);
  free(m);
}

/* ---- libtiff's messages ---- */

/* The messages of one open file, through the handle's own handlers (libtiff >= 4.5), so
 * files may be read and written on several threads at once. The first error since the last
 * reset is kept: libtiff follows the cause with generic ones ("Failed to read directory"). */
typedef struct tlog {
  char msg[256];
  int errors;
} tlog;

static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
  (void)tif;
  (void)module; /* often the file's name, which our messages carry already */
  tlog *l = user;
  if (!l->errors++) vsnprintf(l->msg, sizeof l->msg, fmt, ap);
  return 1; /* handled: the global handlers are not called */
}

static int on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
  (void)tif, (void)user, (void)module, (void)fmt, (void)ap;
  return 1;
}

static void log_reset(tlog *l) {
  l->errors = 0;
  l->msg[0] = 0;
}

static const char *log_msg(const tlog *l) { return l->msg[0] ? l->msg : "libtiff failed"; }

/* The rare messages libtiff sends with no file go to the global handlers: silenced once for
 * the process (the library never prints). */
static void silence(void) {
  TIFFSetErrorHandler(NULL);
  TIFFSetErrorHandlerExt(NULL);
  TIFFSetWarningHandler(NULL);
  TIFFSetWarningHandlerExt(NULL);
}

/* Opens path for writing (fd -1), or reads the file open at fd, named path, whose descriptor
 * libtiff then owns (TIFFClose closes it; on failure it is still the caller's). A reader's
 * single allocations are bounded by the read limit: no part of a file that fits may need more. */
static TIFF *open_tiff(const char *path, int fd, const char *mode, tlog *log) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, silence);
  log_reset(log);
  TIFFOpenOptions *o = TIFFOpenOptionsAlloc();
  if (!o) return NULL;
  TIFFOpenOptionsSetErrorHandlerExtR(o, on_error, log);
  TIFFOpenOptionsSetWarningHandlerExtR(o, on_warning, log);
  if (fd >= 0) {
    int64_t lim = ndf_io_read_limit();
    TIFFOpenOptionsSetMaxSingleMemAlloc(o, lim < INT64_MAX / 2 ? (tmsize_t)lim : 0);
  }
  TIFF *tif = fd >= 0 ? TIFFFdOpenExt(fd, path, mode, o) : TIFFOpenExt(path, mode, o);
  TIFFOpenOptionsFree(o);
  return tif;
}

/* ---- half floats (IEEE binary16) ---- */

static float half_to_float(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
  if (e == 31) {
    u = s | 0x7f800000u | m << 13;
  } else if (e) {
    u = s | (e + 112) << 23 | m << 13;
  } else if (!m) {
    u = s;
  } else { /* subnormal: normalise */
    e = 113;
    while (!(m & 1024)) {
      m <<= 1;
      e--;
    }
    u = s | e << 23 | (m & 1023) << 13;
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Round to nearest even, as numpy's astype(float16). */
static uint16_t float_to_half(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t s = (uint16_t)(u >> 16 & 0x8000);
  uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) /* NaN: its payload's top bits, as a half read in left them */
    return s | 0x7c00 | (a >> 13 & 0x3ff ? (uint16_t)(a >> 13 & 0x3ff) : 0x200);
  if (a >= 0x477ff000) return s | 0x7c00; /* 65520 and up round to infinity */
  if (a < 0x38800000)                     /* below 2^-14: a subnormal or zero, exact scaling */
    return s | (uint16_t)nearbyintf(fabsf(f) * 16777216.0f);
  uint32_t r = a - 0x38000000; /* exponent rebiased from 127 to 15 */
  r += 0xfff + (r >> 13 & 1);
  return s | (uint16_t)(r >> 13);
}

/* ---- reading ---- */

/* How a page's samples become the array's: the file's type, and the dtype it is held in. */
typedef enum kind {
  K_NONE = -1,
  K_BITS,
  K_PALETTE,
  K_U8,
  K_I8,
  K_U16,
  K_I16,
  K_U32,
  K_I32,
  K_F16,
  K_F32,
  K_F64
} kind;

static const ndf_dtype kind_dtype[] = {NDF_U8,  NDF_U8,  NDF_U8,  NDF_I16, NDF_U16, NDF_I16,
                                       NDF_F64, NDF_F64, NDF_F32, NDF_F32, NDF_F64};

typedef struct page {
  uint32_t w, h, tw, th; /* tile size, 0 for strips */
  uint16_t spp, bits, format, photometric, planar, compression, predictor;
  uint16_t nextra, extra[MAX_EXTRA];
  uint32_t subfile;
  kind k;
  int channels; /* of the array: 3 for a palette */
} page;

static const char *codec_name(uint16_t c, char *buf, size_t n) {
  const TIFFCodec *k = TIFFFindCODEC(c);
  if (k && k->name)
    snprintf(buf, n, "%s", k->name);
  else
    snprintf(buf, n, "%u", c);
  return buf;
}

static const char *photometric_name(uint16_t p) {
  switch (p) {
  case PHOTOMETRIC_SEPARATED: return "CMYK (separated)";
  case PHOTOMETRIC_YCBCR: return "YCbCr";
  case PHOTOMETRIC_CIELAB:
  case PHOTOMETRIC_ICCLAB:
  case PHOTOMETRIC_ITULAB: return "L*a*b*";
  case PHOTOMETRIC_LOGL:
  case PHOTOMETRIC_LOGLUV: return "LogLuv";
  case PHOTOMETRIC_MASK: return "transparency mask";
  case PHOTOMETRIC_CFA: return "colour filter array (raw camera)";
  default: return "unknown";
  }
}

/* Reads and checks the current directory's layout: NDF_OK, or a status and why. */
static ndf_status describe(TIFF *tif, page *pg, char *why, size_t n) {
  memset(pg, 0, sizeof *pg);
  uint32_t depth = 1;
  uint16_t *ex = NULL;
  char name[32];
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &pg->w);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &pg->h);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &pg->spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &pg->bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &pg->format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &pg->planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &pg->compression);
  TIFFGetFieldDefaulted(tif, TIFFTAG_IMAGEDEPTH, &depth);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SUBFILETYPE, &pg->subfile);
  if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &pg->photometric))
    pg->photometric = pg->spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
  if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &pg->nextra, &ex) && ex)
    for (int i = 0; i < pg->nextra && i < MAX_EXTRA; i++)
      pg->extra[i] = ex[i];
  pg->predictor = PREDICTOR_NONE;
  if (pg->compression == COMPRESSION_LZW || pg->compression == COMPRESSION_ADOBE_DEFLATE ||
      pg->compression == COMPRESSION_DEFLATE)
    TIFFGetField(tif, TIFFTAG_PREDICTOR, &pg->predictor);
  if (TIFFIsTiled(tif)) {
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &pg->tw);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &pg->th);
    if (!pg->tw || !pg->th) {
      snprintf(why, n, "tile width or length is 0");
      return NDF_EINVAL;
    }
  }
  if (!pg->w || !pg->h) {
    snprintf(why, n, "image width or height is 0");
    return NDF_EINVAL;
  }
  if (!pg->spp) {
    snprintf(why, n, "SamplesPerPixel is 0");
    return NDF_EINVAL;
  }
  if (depth > 1) {
    snprintf(why, n, "3-D images (ImageDepth %u) are not supported", depth);
    return NDF_EUNSUPPORTED;
  }
  if (pg->planar != PLANARCONFIG_CONTIG && pg->planar != PLANARCONFIG_SEPARATE) {
    snprintf(why, n, "unknown PlanarConfiguration %u", pg->planar);
    return NDF_EINVAL;
  }
  if (!TIFFIsCODECConfigured(pg->compression)) {
    snprintf(why, n, "compression %s is not available in this libtiff",
             codec_name(pg->compression, name, sizeof name));
    return NDF_EUNSUPPORTED;
  }
  if (pg->format == SAMPLEFORMAT_VOID) pg->format = SAMPLEFORMAT_UINT;
  unsigned b = pg->bits;
  if (pg->format == SAMPLEFORMAT_UINT) {
    if (b == 64) {
      snprintf(why, n, "64-bit integer samples have no exact type here (u8, u16, i16, f32, f64)");
      return NDF_EUNSUPPORTED;
    }
    pg->k = b == 1 || b == 2 || b == 4 ? K_BITS
            : b == 8                   ? K_U8
            : b == 16                  ? K_U16
            : b == 32                  ? K_U32
                                       : K_NONE;
  } else if (pg->format == SAMPLEFORMAT_INT) {
    if (b == 64) {
      snprintf(why, n, "64-bit integer samples have no exact type here (u8, u16, i16, f32, f64)");
      return NDF_EUNSUPPORTED;
    }
    pg->k = b == 8 ? K_I8 : b == 16 ? K_I16 : b == 32 ? K_I32 : K_NONE;
  } else if (pg->format == SAMPLEFORMAT_IEEEFP) {
    pg->k = b == 16 ? K_F16 : b == 32 ? K_F32 : b == 64 ? K_F64 : K_NONE;
  } else if (pg->format == SAMPLEFORMAT_COMPLEXINT || pg->format == SAMPLEFORMAT_COMPLEXIEEEFP) {
    snprintf(why, n, "complex samples are not supported");
    return NDF_EUNSUPPORTED;
  } else {
    snprintf(why, n, "unknown SampleFormat %u", pg->format);
    return NDF_EINVAL;
  }
  if (pg->k == K_NONE) {
    static const char *fmt[] = {"", "unsigned integer", "signed integer", "floating-point"};
    snprintf(why, n, "%u-bit %s samples are not supported", b, fmt[pg->format]);
    return NDF_EUNSUPPORTED;
  }
  pg->channels = pg->spp;
  switch (pg->photometric) {
  case PHOTOMETRIC_MINISBLACK:
  case PHOTOMETRIC_MINISWHITE: break;
  case PHOTOMETRIC_RGB:
    if (pg->spp < 3) {
      snprintf(why, n, "an RGB image with %u samples per pixel", pg->spp);
      return NDF_EINVAL;
    }
    break;
  case PHOTOMETRIC_PALETTE:
    if (pg->spp != 1 || pg->format != SAMPLEFORMAT_UINT) {
      snprintf(why, n, "a palette image needs one unsigned sample per pixel");
      return NDF_EINVAL;
    }
    if (b > 8) {
      snprintf(why, n, "%u-bit palette images are not supported (8 bits at most)", b);
      return NDF_EUNSUPPORTED;
    }
    pg->k = K_PALETTE;
    pg->channels = 3;
    break;
  case PHOTOMETRIC_YCBCR:
    /* JPEG's usual colour space: libtiff's JPEG codec converts it to RGB */
    if ((pg->compression == COMPRESSION_JPEG || pg->compression == COMPRESSION_OJPEG) &&
        pg->spp == 3 && b == 8 && TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB)) {
      pg->photometric = PHOTOMETRIC_RGB;
      break;
    }
    snprintf(why, n, "YCbCr images are only supported JPEG-compressed");
    return NDF_EUNSUPPORTED;
  default:
    snprintf(why, n,
             "%s images (PhotometricInterpretation %u) are not supported; grayscale, RGB "
             "and palette ones are",
             photometric_name(pg->photometric), pg->photometric);
    return NDF_EUNSUPPORTED;
  }
  return NDF_OK;
}

/* The bytes strile i of the current page decodes to. */
static uint64_t strile_bytes(TIFF *tif, const page *pg, uint32_t i) {
  uint64_t row = TIFFScanlineSize64(tif);
  if (pg->tw) return TIFFTileSize64(tif);
  uint32_t rps = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps);
  if (!rps || rps > pg->h) rps = pg->h;
  uint32_t per_plane = (pg->h - 1) / rps + 1, k = i % per_plane;
  uint32_t rows = k + 1 < per_plane ? rps : pg->h - k * rps;
  return rows * row;
}

/* The most bytes of samples a codec can make of raw bytes: deflate packs at most 1032 into one,
 * LZW about 1400 (12-bit codes of strings up to 4096 bytes), PackBits 64. The others (ZSTD, LZMA,
 * JBIG, WebP, fax, JPEG) have no such limit worth trusting: up to 64 MB for any size, and past it
 * 65536 to one. It only refuses absurd sizes before allocating. */
static double max_decoded(uint16_t c, double raw) {
  switch (c) {
  case COMPRESSION_NONE: return raw;
  case COMPRESSION_PACKBITS: return 64 * raw + 65536;
  case COMPRESSION_ADOBE_DEFLATE:
  case COMPRESSION_DEFLATE: return 1100 * raw + 65536;
  case COMPRESSION_LZW: return 2048 * raw + 65536;
  default: return fmax(65536 * raw, 64.0 * (1 << 20));
  }
}

/* Checks that the current page's data lies within the file and could decode to its size. */
static ndf_status check_data(TIFF *tif, const page *pg, int64_t pageno, uint64_t fsize, char *why,
                             size_t n) {
  uint32_t have = pg->tw ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif), rps = 0;
  double planes = pg->planar == PLANARCONFIG_SEPARATE ? pg->spp : 1, needd;
  if (pg->tw) {
    needd = ((pg->w - 1) / pg->tw + 1.0) * ((pg->h - 1) / pg->th + 1.0) * planes;
  } else {
    TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps);
    if (!rps || rps > pg->h) rps = pg->h;
    needd = ((pg->h - 1) / rps + 1.0) * planes;
  }
  if (have < needd) {
    snprintf(why, n, "page %lld has %u %s, its size needs %.0f", (long long)pageno, have,
             pg->tw ? "tiles" : "strips", needd);
    return NDF_EINVAL;
  }
  uint32_t need = (uint32_t)needd;
  uint64_t raw = 0, decoded = 0;
  for (uint32_t i = 0; i < need; i++) {
    uint64_t off = TIFFGetStrileOffset(tif, i), bc = TIFFGetStrileByteCount(tif, i);
    uint64_t want = strile_bytes(tif, pg, i);
    if (off > fsize || bc > fsize - off) {
      snprintf(why, n, "truncated: page %lld's %s %u lies at bytes %llu-%llu, the file has %llu",
               (long long)pageno, pg->tw ? "tile" : "strip", i, (unsigned long long)off,
               (unsigned long long)(off + bc), (unsigned long long)fsize);
      return NDF_EINVAL;
    }
    if (pg->compression == COMPRESSION_NONE && bc < want) {
      snprintf(why, n, "truncated: page %lld's %s %u holds %llu of %llu data bytes",
               (long long)pageno, pg->tw ? "tile" : "strip", i, (unsigned long long)bc,
               (unsigned long long)want);
      return NDF_EINVAL;
    }
    raw += bc;
    decoded += want;
  }
  if (pg->compression != COMPRESSION_NONE &&
      (double)decoded > max_decoded(pg->compression, (double)raw)) {
    char name[32];
    snprintf(why, n,
             "page %lld claims %llu bytes of samples from %llu bytes of %s data, more than the "
             "codec can pack: the file is corrupt",
             (long long)pageno, (unsigned long long)decoded, (unsigned long long)raw,
             codec_name(pg->compression, name, sizeof name));
    return NDF_EINVAL;
  }
  return NDF_OK;
}

/* Where the current directory ends (past its next-directory offset). libtiff takes a directory
 * whose next offset is cut off for the last one, so a truncated stack would read as fewer pages. */
static uint64_t ifd_end(TIFF *tif) {
  uint64_t off = TIFFCurrentDirOffset(tif), n = 0;
  int big = TIFFIsBigTIFF(tif), be = TIFFIsBigEndian(tif);
  unsigned char b[8];
  size_t k = big ? 8 : 2;
  if (pread(TIFFFileno(tif), b, k, (off_t)off) != (ssize_t)k) return UINT64_MAX;
  for (size_t i = 0; i < k; i++)
    n |= (uint64_t)b[i] << 8 * (be ? k - 1 - i : i);
  return off + k + n * (big ? 20 : 12) + (big ? 8 : 4);
}

/* Stores n pixels of one decoded row (ns samples a pixel, interleaved) into the planar array:
 * sample s of pixel x at out[s * cstride + at + x]. lut: a palette's 8-bit colours. */
static void unpack(kind k, unsigned bits, const unsigned char *row, uint32_t n, int ns,
                   const uint8_t (*lut)[256], void *out, int64_t at, int64_t cstride) {
#define UNPACK(TS, TD, CONV)                                                                       \
  for (uint32_t x = 0; x < n; x++)                                                                 \
    for (int s = 0; s < ns; s++) {                                                                 \
      TS v;                                                                                        \
      memcpy(&v, row + ((size_t)x * ns + s) * sizeof v, sizeof v);                                 \
      ((TD *)out)[s * cstride + at + x] = (TD)CONV(v);                                             \
    }                                                                                              \
  break
#define AS_IS(v) (v)
  switch (k) {
  case K_BITS:
  case K_PALETTE: {
    unsigned mask = (1u << bits) - 1;
    for (uint32_t x = 0; x < n; x++)
      for (int s = 0; s < ns; s++) {
        uint64_t bit = ((uint64_t)x * ns + s) * bits;
        unsigned v = row[bit >> 3] >> (8 - bits - (bit & 7)) & mask;
        if (k == K_BITS)
          ((uint8_t *)out)[s * cstride + at + x] = (uint8_t)v;
        else
          for (int c = 0; c < 3; c++)
            ((uint8_t *)out)[c * cstride + at + x] = lut[c][v];
      }
    break;
  }
  case K_U8: UNPACK(uint8_t, uint8_t, AS_IS);
  case K_I8: UNPACK(int8_t, int16_t, AS_IS);
  case K_U16: UNPACK(uint16_t, uint16_t, AS_IS);
  case K_I16: UNPACK(int16_t, int16_t, AS_IS);
  case K_U32: UNPACK(uint32_t, double, AS_IS);
  case K_I32: UNPACK(int32_t, double, AS_IS);
  case K_F16: UNPACK(uint16_t, float, half_to_float);
  case K_F32: UNPACK(float, float, AS_IS);
  case K_F64: UNPACK(double, double, AS_IS);
  case K_NONE: break;
  }
#undef UNPACK
#undef AS_IS
}

/* A palette's colours in 8 bits. Old writers stored 8-bit values in the 16-bit map. */
static int palette_lut(TIFF *tif, unsigned bits, uint8_t lut[3][256]) {
  uint16_t *map[3];
  if (!TIFFGetField(tif, TIFFTAG_COLORMAP, &map[0], &map[1], &map[2])) return 0;
  unsigned n = 1u << bits, wide = 0;
  for (int c = 0; c < 3; c++)
    for (unsigned i = 0; i < n; i++)
      wide |= map[c][i] > 255;
  for (int c = 0; c < 3; c++)
    for (unsigned i = 0; i < 256; i++)
      lut[c][i] = i >= n ? 0 : wide ? (uint8_t)((map[c][i] * 2u + 257) / 514) : (uint8_t)map[c][i];
  return 1;
}

/* The bytes a deflate stream held for n bytes that libtiff decoded (rows of rb bytes, ns samples
 * a pixel), in place: the horizontal predictor's differences taken again, in the file's byte
 * order. 0 where that is not done here (another predictor, another sample size). */
static int stream_bytes(TIFF *tif, const page *pg, int ns, unsigned char *t, size_t n, size_t rb) {
  const unsigned b = pg->bits;
  if ((pg->predictor != PREDICTOR_NONE && pg->predictor != PREDICTOR_HORIZONTAL) ||
      (b > 8 && b != 16 && b != 32 && b != 64) || (pg->predictor != PREDICTOR_NONE && b < 8))
    return 0;
#define DIFF(T)                                                                                    \
  do {                                                                                             \
    for (size_t r = 0; r + rb <= n; r += rb) {                                                     \
      T *v = (T *)(void *)(t + r);                                                                 \
      for (size_t j = rb / sizeof(T); j-- > (size_t)ns;)                                           \
        v[j] = (T)(v[j] - v[j - ns]);                                                              \
    }                                                                                              \
  } while (0)
  /* each sample less the one ns before it in its row, right to left (rows of whole samples) */
  if (pg->predictor == PREDICTOR_HORIZONTAL) {
    switch (b) {
    case 8: DIFF(uint8_t); break;
    case 16: DIFF(uint16_t); break;
    case 32: DIFF(uint32_t); break;
    default: DIFF(uint64_t); break;
    }
  }
#undef DIFF
  if (TIFFIsByteSwapped(tif) && b == 16) TIFFSwabArrayOfShort((uint16_t *)(void *)t, n / 2);
  if (TIFFIsByteSwapped(tif) && b == 32) TIFFSwabArrayOfLong((uint32_t *)(void *)t, n / 4);
  if (TIFFIsByteSwapped(tif) && b == 64) TIFFSwabArrayOfLong8((uint64_t *)(void *)t, n / 8);
  return 1;
}

/* Whether strile i's deflate stream ends, with its checksum, within its bytes. libtiff stops
 * once it has a strile's samples, and takes a stream cut short (or wrong in its last bytes) for
 * a whole one where its decoder fills the output from what is left. The check: the stream's last
 * 4 bytes are the checksum of what libtiff decoded (dec, n bytes, tmp as large, rows of rb bytes,
 * ns samples a pixel), else the stream is read again from the file, through zlib, to its end (it
 * may be followed by padding, or decoded by a predictor not undone here). 0 with why set where it
 * does not end. */
static int deflate_ends(TIFF *tif, const page *pg, uint32_t i, const unsigned char *dec,
                        unsigned char *tmp, size_t n, size_t rb, int ns, char *why, size_t wn) {
  uint64_t off = TIFFGetStrileOffset(tif, i), left = TIFFGetStrileByteCount(tif, i);
  uint16_t fill = FILLORDER_MSB2LSB;
  unsigned char tail[4];
  TIFFGetFieldDefaulted(tif, TIFFTAG_FILLORDER, &fill);
  memcpy(tmp, dec, n);
  if (fill != FILLORDER_LSB2MSB && left >= 6 && n <= UINT_MAX &&
      pread(TIFFFileno(tif), tail, 4, (off_t)(off + left - 4)) == 4 &&
      stream_bytes(tif, pg, ns, tmp, n, rb)) {
    uLong sum = adler32(adler32(0, NULL, 0), tmp, (uInt)n);
    if (sum == ((uLong)tail[0] << 24 | (uLong)tail[1] << 16 | (uLong)tail[2] << 8 | tail[3]))
      return 1;
  }
  TIFFGetFieldDefaulted(tif, TIFFTAG_FILLORDER, &fill);
  unsigned char in[16384], out[32768];
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit(&z) != Z_OK) {
    snprintf(why, wn, "out of memory");
    return 0;
  }
  int ret = Z_OK;
  while (ret == Z_OK && left) {
    size_t k = left < sizeof in ? (size_t)left : sizeof in;
    ssize_t got = pread(TIFFFileno(tif), in, k, (off_t)off);
    if (got <= 0) break;
    if (fill == FILLORDER_LSB2MSB) TIFFReverseBits(in, (tmsize_t)got);
    off += (uint64_t)got;
    left -= (uint64_t)got;
    z.next_in = in;
    z.avail_in = (uInt)got;
    do {
      z.next_out = out;
      z.avail_out = sizeof out;
      ret = inflate(&z, Z_NO_FLUSH);
    } while (ret == Z_OK && (z.avail_in || !z.avail_out)); /* no output left pending */
    if (ret == Z_BUF_ERROR && z.avail_in == 0) ret = Z_OK; /* wants more input */
  }
  if (ret != Z_STREAM_END)
    snprintf(why, wn, "%s",
             ret == Z_OK || ret == Z_BUF_ERROR ? "its deflate stream is cut short"
             : z.msg                           ? z.msg
                                               : "its deflate stream is corrupt");
  inflateEnd(&z);
  return ret == Z_STREAM_END;
}

/* Decodes the current page into the array: channel c of the page at out[c * cstride + at]. */
static ndf_status read_page(TIFF *tif, const page *pg, int64_t pageno, void *out, int64_t at,
                            int64_t cstride, tlog *log, char *why, size_t n) {
  uint8_t lut[3][256];
  if (pg->k == K_PALETTE && !palette_lut(tif, pg->bits, lut)) {
    snprintf(why, n, "page %lld: a palette image without a colour map", (long long)pageno);
    return NDF_EINVAL;
  }
  int separate = pg->planar == PLANARCONFIG_SEPARATE && pg->spp > 1;
  int planes = separate ? pg->spp : 1, ns = separate ? 1 : pg->spp;
  int deflate =
      pg->compression == COMPRESSION_ADOBE_DEFLATE || pg->compression == COMPRESSION_DEFLATE;
  tmsize_t size = pg->tw ? TIFFTileSize(tif) : TIFFStripSize(tif);
  tmsize_t row = pg->tw ? TIFFTileRowSize(tif) : TIFFScanlineSize(tif);
  if (size <= 0 || row <= 0) {
    snprintf(why, n, "page %lld: %s", (long long)pageno, log_msg(log));
    return NDF_EINVAL;
  }
  unsigned char *buf = malloc((size_t)size), *tmp = deflate ? malloc((size_t)size) : NULL;
  if (!buf || (deflate && !tmp)) {
    free(buf);
    free(tmp);
    snprintf(why, n, "out of memory");
    return NDF_ENOMEM;
  }
  ndf_status st = NDF_OK;
  uint32_t bw = pg->tw ? pg->tw : pg->w, bh = pg->th;
  if (!pg->tw) {
    TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &bh);
    if (!bh || bh > pg->h) bh = pg->h;
  }
  uint32_t across = (pg->w - 1) / bw + 1, down = (pg->h - 1) / bh + 1;
  for (int pl = 0; pl < planes && st == NDF_OK; pl++)
    for (uint32_t by = 0; by < down && st == NDF_OK; by++)
      for (uint32_t bx = 0; bx < across && st == NDF_OK; bx++) {
        uint32_t y0 = by * bh, x0 = bx * bw, rows = pg->h - y0 < bh ? pg->h - y0 : bh;
        uint32_t cols = pg->w - x0 < bw ? pg->w - x0 : bw;
        tmsize_t want = pg->tw ? size : (tmsize_t)rows * row, got;
        uint32_t i =
            pg->tw ? TIFFComputeTile(tif, x0, y0, 0, (uint16_t)pl) : (uint32_t)pl * down + by;
        char bad[128];
        log_reset(log);
        got = pg->tw ? TIFFReadEncodedTile(tif, i, buf, want)
                     : TIFFReadEncodedStrip(tif, i, buf, want);
        if (got != want || (deflate && !deflate_ends(tif, pg, i, buf, tmp, (size_t)want,
                                                     (size_t)row, ns, bad, sizeof bad))) {
          snprintf(why, n, "page %lld, %s at row %u column %u: %s", (long long)pageno,
                   pg->tw ? "tile" : "strip", y0, x0,
                   got != want ? (got < 0 || log->errors ? log_msg(log) : "decoded too few bytes")
                               : bad);
          st = NDF_EINVAL;
          break;
        }
        for (uint32_t r = 0; r < rows; r++)
          unpack(pg->k, pg->bits, buf + (size_t)r * (size_t)row, cols, ns,
                 (const uint8_t(*)[256])lut, out,
                 at + pl * cstride + (int64_t)(y0 + r) * pg->w + x0, cstride);
      }
  free(buf);
  free(tmp);
  return st;
}

/* ImageJ's "key=value" line in its description, or NULL. */
static const char *imagej_value(const char *d, const char *key) {
  size_t k = strlen(key);
  for (const char *p = d; (p = strchr(p, '\n')); p++)
    if (!strncmp(p + 1, key, k) && p[1 + k] == '=') return p + 2 + k;
  return NULL;
}

/* ImageJ's count for key: def where the line is missing, -1 where it is no count. */
static int64_t imagej_count(const char *d, const char *key, int64_t def) {
  const char *v = imagej_value(d, key);
  if (!v) return def;
  char *end;
  errno = 0;
  long long k = strtoll(v, &end, 10);
  if (end == v || errno || k < 1 || (*end && *end != '\n' && *end != '\r')) return -1;
  return k;
}

/* An ImageJ length unit in mm, 0 if none or not a length. */
static double unit_mm(const char *u) {
  static const struct {
    const char *name;
    double mm;
  } units[] = {{"micron", 1e-3}, {"microns", 1e-3},  {"um", 1e-3},   {"\xc2\xb5m", 1e-3},
               {"\xb5m", 1e-3},  {"\\u00B5m", 1e-3}, {"nm", 1e-6},   {"nanometer", 1e-6},
               {"mm", 1},        {"millimeter", 1},  {"cm", 10},     {"centimeter", 10},
               {"m", 1000},      {"meter", 1000},    {"inch", 25.4}, {"in", 25.4}};
  size_t n = strcspn(u, "\r\n");
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strlen(units[i].name) == n && !strncmp(u, units[i].name, n)) return units[i].mm;
  return 0;
}

static int is_imagej(const char *d) { return d && !strncmp(d, "ImageJ=", 7); }

/* tifffile's JSON description, which gives the array's shape. */
static int is_shaped(const char *d) { return d && !strncmp(d, "{\"shape\":", 9); }

/* A description that spells out the file's layout (ImageJ's header, tifffile's shape), which
 * readers trust over the pages. */
static int layout_bound(const char *d) {
  return is_imagej(d) || is_shaped(d) || (d && !strncmp(d, "shape=(", 7));
}

/* The unit of the resolution and of ImageJ's spacing, in mm: ImageJ's unit= where it is a length
 * (ImageJ reads the resolution in it, whatever ResolutionUnit says), else ResolutionUnit's; 0
 * where neither is a length. */
static double length_mm(const tiff_meta *m) {
  if (m->imagej_mm > 0) return m->imagej_mm;
  return m->unit == RESUNIT_INCH ? 25.4 : m->unit == RESUNIT_CENTIMETER ? 10 : 0;
}

/* A voxel size in mm from a resolution (pixels per unit, inverse) or a spacing (units per pixel)
 * in a unit of per mm: 0 where the unit is no length, NaN where the value is no size. */
static double size_mm(double v, double per, int inverse) {
  if (!(per > 0)) return 0;
  if (!(v > 0) || !isfinite(v)) return NAN;
  return inverse ? per / v : per * v;
}

/* The axes of a stack of P pages of C samples each. ImageJ's counts, where its description has
 * them and they multiply to P, give channels (pages of one sample), frames and slices, the file's
 * pages in the order channels fastest, then slices, then frames (without counts, its pages are
 * slices); else the pages are one axis of slices, as ImageJ opens such a stack. Returns 1 for
 * counts a writer can follow, 0 otherwise; *zspace says whether the pages' axis of slices is one
 * (ImageJ's spacing applies to it): not where colour samples and channel pages would need more
 * axes than an array has. */
static int imagej_axes(const char *d, int64_t P, int64_t C, int64_t *c, int64_t *t, int64_t *z,
                       int *zspace) {
  *c = *t = 1;
  *z = P;
  *zspace = is_imagej(d);
  if (!is_imagej(d)) return 0;
  int64_t ch = imagej_count(d, "channels", 0), fr = imagej_count(d, "frames", 0),
          sl = imagej_count(d, "slices", 0);
  if (ch < 0 || fr < 0 || sl < 0) return 0;
  if (!ch && !fr && !sl) sl = P;
  ch += !ch;
  fr += !fr;
  sl += !sl;
  if ((double)ch * (double)fr * (double)sl != (double)P) return 0;
  if ((C > 1 && ch > 1) || 2 + (C > 1 || ch > 1) + (fr > 1) + (sl > 1) > NDF_MAX_DIMS) {
    *zspace = 0;
    return 0;
  }
  *c = ch;
  *t = fr;
  *z = sl;
  return 1;
}

typedef struct rd {
  const char *path;
  TIFF *tif;
  tlog log;
  unsigned char *use; /* per directory: a page of the stack (reduced-resolution copies are not) */
  size_t ndirs, cap;
  void *data;
  tiff_meta *meta;
} rd;

static ndf_status fail(rd *r, ndf_status st, const char *why, char *err, size_t errlen) {
  return ndf_io_error(err, errlen, st, r->path, "%s", why);
}

/* Keeps page 1's tags for the writer and the voxel size. */
static ndf_status keep_meta(rd *r, const page *pg) {
  tiff_meta *m = calloc(1, sizeof *m);
  if (!m) return NDF_ENOMEM;
  r->meta = m;
  m->dtype = kind_dtype[pg->k];
  m->format = pg->format;
  m->bits = pg->k == K_PALETTE ? 8 : pg->bits;
  m->photometric = pg->k == K_PALETTE ? PHOTOMETRIC_RGB : pg->photometric;
  m->spp = (uint16_t)pg->channels;
  m->nextra = pg->k == K_PALETTE ? 0 : pg->nextra;
  memcpy(m->extra, pg->extra, sizeof m->extra);
  m->compression = pg->compression;
  m->predictor = pg->predictor;
  m->separate = pg->planar == PLANARCONFIG_SEPARATE && pg->spp > 1;
  m->has_res = TIFFGetField(r->tif, TIFFTAG_XRESOLUTION, &m->xres) &&
               TIFFGetField(r->tif, TIFFTAG_YRESOLUTION, &m->yres);
  TIFFGetFieldDefaulted(r->tif, TIFFTAG_RESOLUTIONUNIT, &m->unit);
  m->has_pos = TIFFGetField(r->tif, TIFFTAG_XPOSITION, &m->xpos) &&
               TIFFGetField(r->tif, TIFFTAG_YPOSITION, &m->ypos);
  for (int i = 0; i < NTEXT; i++) {
    char *s = NULL;
    if (TIFFGetField(r->tif, text_tags[i], &s) && s && !(m->text[i] = strdup(s))) return NDF_ENOMEM;
  }
  const char *u = is_imagej(m->text[0]) ? imagej_value(m->text[0], "unit") : NULL;
  m->imagej_mm = u ? unit_mm(u) : 0;
  return NDF_OK;
}

/* a * b, or cap where that is more. */
static int64_t mul_capped(int64_t a, int64_t b, int64_t cap) {
  return a && b > cap / a ? cap : a * b > cap ? cap : a * b;
}

static ndf_status read_all(rd *r, const ndf_read_opts *o, ndf_image *img, char *err,
                           size_t errlen) {
  (void)o;
  char why[320];
  int fd;
  int64_t size;
  ndf_status st = ndf_io_open_regular(r->path, &fd, &size, err, errlen);
  if (st != NDF_OK) return st;
  uint64_t fsize = (uint64_t)size;
  unsigned char magic[8];
  ssize_t got = pread(fd, magic, 8, 0);
  if (got < 0) {
    int e = errno;
    close(fd);
    return ndf_io_error(err, errlen, NDF_EIO, r->path, "%s", strerror(e));
  }
  if (got >= 4 &&
      !((!memcmp(magic, "II", 2) && magic[3] == 0 && (magic[2] == 42 || magic[2] == 43)) ||
        (!memcmp(magic, "MM", 2) && magic[2] == 0 && (magic[3] == 42 || magic[3] == 43)))) {
    close(fd);
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path,
                        "not a TIFF file (bad magic: it starts neither II*. nor MM.*)");
  }
  if (got < 8) {
    close(fd);
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path,
                        "truncated: %zd bytes, less than a TIFF header", got);
  }
  r->tif = open_tiff(r->path, fd, "r", &r->log);
  if (!r->tif) {
    close(fd);
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path, "corrupt or truncated: %s",
                        log_msg(&r->log));
  }

  /* Pass 1: every page's layout, checked against the first and the read limit before anything
   * is allocated. */
  page first, pg;
  memset(&first, 0, sizeof first);
  int64_t pages = 0;
  for (;;) {
    if (r->ndirs == r->cap) {
      size_t cap = r->cap ? 2 * r->cap : 16;
      unsigned char *u = realloc(r->use, cap);
      if (!u) return ndf_io_error(err, errlen, NDF_ENOMEM, r->path, "out of memory");
      r->use = u;
      r->cap = cap;
    }
    st = describe(r->tif, &pg, why, sizeof why);
    /* reduced-resolution copies (thumbnails) and transparency masks are not pages of the stack */
    int use = !pages || !(pg.subfile & (FILETYPE_REDUCEDIMAGE | FILETYPE_MASK));
    if (st != NDF_OK && use)
      return ndf_io_error(err, errlen, st, r->path, "page %lld: %s", (long long)pages + 1, why);
    uint64_t end = ifd_end(r->tif);
    if (end > fsize)
      return ndf_io_error(err, errlen, NDF_EINVAL, r->path,
                          "truncated: page %lld's directory ends at byte %llu, the file has %llu",
                          (long long)pages + 1, (unsigned long long)end, (unsigned long long)fsize);
    if (use && pages &&
        (pg.w != first.w || pg.h != first.h || pg.channels != first.channels || pg.k != first.k ||
         pg.bits != first.bits || (pg.photometric != first.photometric && pg.k != K_PALETTE)))
      return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, r->path,
                          "page %lld is %ux%u with %d %u-bit samples a pixel, page 1 is %ux%u "
                          "with %d %u-bit: pages of different size or type are not supported",
                          (long long)pages + 1, pg.w, pg.h, pg.channels, pg.bits, first.w, first.h,
                          first.channels, first.bits);
    if (use) {
      size_t es = ndf_dtype_size(kind_dtype[pg.k]);
      int64_t cap = INT64_MAX / (int64_t)es, n = mul_capped(pages + 1, pg.h, cap);
      n = mul_capped(mul_capped(n, pg.w, cap), pg.channels, cap);
      st = ndf_io_check_alloc(r->path, n, es, err, errlen);
      if (st != NDF_OK) return st;
      if (!pages) {
        first = pg;
        if (keep_meta(r, &pg) != NDF_OK)
          return ndf_io_error(err, errlen, NDF_ENOMEM, r->path, "out of memory");
      }
      st = check_data(r->tif, &pg, pages + 1, fsize, why, sizeof why);
      if (st != NDF_OK) return fail(r, st, why, err, errlen);
      pages++;
    }
    r->use[r->ndirs++] = (unsigned char)use;
    if (TIFFLastDirectory(r->tif)) break;
    log_reset(&r->log);
    if (!TIFFReadDirectory(r->tif))
      return ndf_io_error(err, errlen, NDF_EINVAL, r->path,
                          "corrupt or truncated after page %lld: %s", (long long)pages,
                          log_msg(&r->log));
  }

  /* The pages' axes: ImageJ's channels, frames and slices, or one axis of pages. */
  tiff_meta *m = r->meta;
  int64_t C = first.channels, P = pages, H = first.h, W = first.w, ic, it, iz;
  int zspace;
  m->ij = imagej_axes(m->text[0], P, C, &ic, &it, &iz, &zspace);
  m->ij_chan = ic > 1;
  m->pages = P;
  ndf_dtype dt = kind_dtype[first.k];
  r->data = malloc((size_t)(C * P * H * W) * ndf_dtype_size(dt));
  if (!r->data) return ndf_io_error(err, errlen, NDF_ENOMEM, r->path, "out of memory");

  /* Pass 2: the samples, page by page. */
  log_reset(&r->log);
  if (!TIFFSetDirectory(r->tif, 0))
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path, "%s", log_msg(&r->log));
  int64_t p = 0;
  for (size_t d = 0; d < r->ndirs; d++) {
    if (d) {
      log_reset(&r->log);
      if (!TIFFReadDirectory(r->tif))
        return ndf_io_error(err, errlen, NDF_EINVAL, r->path, "page %lld: %s", (long long)p + 1,
                            log_msg(&r->log));
    }
    if (!r->use[d]) continue;
    /* page p's place: ImageJ's channel c of page p is the array's (c, p / ic) */
    int64_t at = (ic > 1 ? p % ic * (P / ic) + p / ic : p) * H * W;
    st = describe(r->tif, &pg, why, sizeof why); /* again: it sets the JPEG colour mode */
    if (st == NDF_OK)
      st = read_page(r->tif, &pg, p + 1, r->data, at, P * H * W, &r->log, why, sizeof why);
    if (st != NDF_OK) return fail(r, st, why, err, errlen);
    p++;
  }

  int64_t shape[NDF_MAX_DIMS];
  int nd = 0;
  img->channel_axis = C > 1 || ic > 1 ? 0 : -1;
  if (C > 1 || ic > 1) shape[nd++] = ic > 1 ? ic : C;
  if (it > 1) {
    img->time_axis = nd;
    shape[nd++] = it;
  }
  if (iz > 1) shape[nd++] = iz;
  shape[nd++] = H;
  shape[nd++] = W;
  m->ndim = nd;
  memcpy(m->shape, shape, sizeof shape);
  img->a = ndf_array_contiguous(dt, nd, shape, r->data);
  r->data = NULL;
  img->format = NDF_FORMAT_TIFF;
  double per = length_mm(m);
  if (m->has_res) {
    img->spacing[nd - 1] = size_mm(m->xres, per, 1);
    img->spacing[nd - 2] = size_mm(m->yres, per, 1);
  }
  const char *z = iz > 1 && zspace ? imagej_value(m->text[0], "spacing") : NULL;
  if (z) {
    char *end;
    double v = strtod(z, &end);
    m->z_mm = size_mm(end == z ? NAN : v, per, 0);
    img->spacing[nd - 3] = m->z_mm;
  }
  img->meta = m;
  img->meta_free = meta_free;
  r->meta = NULL;
  return NDF_OK;
}

ndf_status ndf__tiff_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                          size_t errlen) {
  rd r;
  memset(&r, 0, sizeof r);
  r.path = path;
  ndf_status st = read_all(&r, o, img, err, errlen);
  if (r.tif) TIFFClose(r.tif);
  free(r.use);
  free(r.data);
  meta_free(r.meta);
  return st;
}

/* ---- writing ---- */

typedef struct wr {
  const char *path; /* the target, for messages */
  const ndf_image *img;
  const tiff_meta *m;       /* NULL unless the image was read from a TIFF */
  int64_t C, T, Z, P, H, W; /* channels, frames, slices; pages */
  int chan_pages;           /* the channels are pages (ImageJ's), not samples */
  uint16_t spp, planar;
  uint16_t format, bits, photometric, nextra, compression, predictor;
  uint16_t extra[MAX_EXTRA];
  int has_res, has_pos;
  float xres, yres, xpos, ypos;
  uint16_t unit;
  char *desc; /* the ImageDescription, NULL for none */
} wr;

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* The same voxel size (NaN, a size that is none, is the same as NaN). */
static int same_size(double a, double b) { return (isnan(a) && isnan(b)) || close_to(a, b); }

/* One row of ns samples a pixel in the file's type: sample c of pixel x from the array's
 * element at + c * cs + x. */
static void pack(const wr *w, int64_t at, int64_t cs, int ns, unsigned char *row) {
  const ndf_array *a = &w->img->a;
  const void *src = a->data;
  if (w->bits < 8) {
    unsigned mask = (1u << w->bits) - 1;
    memset(row, 0, (size_t)((w->W * ns * w->bits + 7) / 8));
    for (int64_t x = 0; x < w->W; x++)
      for (int c = 0; c < ns; c++) {
        unsigned v = ((const uint8_t *)src)[at + c * cs + x];
        uint64_t bit = (uint64_t)(x * ns + c) * w->bits;
        row[bit >> 3] |= (unsigned char)((v > mask ? mask : v) << (8 - w->bits - (bit & 7)));
      }
    return;
  }
#define PACK(TS, TD, CONV)                                                                         \
  do {                                                                                             \
    for (int64_t x = 0; x < w->W; x++)                                                             \
      for (int c = 0; c < ns; c++) {                                                               \
        TD v = CONV(((const TS *)src)[at + c * cs + x]);                                           \
        memcpy(row + (size_t)(x * ns + c) * sizeof v, &v, sizeof v);                               \
      }                                                                                            \
    return;                                                                                        \
  } while (0)
#define AS_IS(v) (v)
  unsigned es = w->bits / 8;
  if (es == ndf_dtype_size(a->dtype) &&
      (w->format == SAMPLEFORMAT_IEEEFP) == (a->dtype == NDF_F32 || a->dtype == NDF_F64)) {
    switch (es) { /* the array's own type */
    case 1: PACK(uint8_t, uint8_t, AS_IS);
    case 2: PACK(uint16_t, uint16_t, AS_IS);
    case 4: PACK(uint32_t, uint32_t, AS_IS);
    default: PACK(uint64_t, uint64_t, AS_IS);
    }
  }
  if (a->dtype == NDF_F32) PACK(float, uint16_t, float_to_half);
#undef PACK
#undef AS_IS
  /* the exact widenings back: i16 to i8, f64 to u32 or i32 */
  ndf_io_type t = a->dtype == NDF_I16              ? NDF_IO_I8
                  : w->format == SAMPLEFORMAT_UINT ? NDF_IO_U32
                                                   : NDF_IO_I32;
  for (int64_t x = 0; x < w->W; x++)
    for (int c = 0; c < ns; c++)
      ndf_io_store(t, row, x * ns + c, ndf__load(a->dtype, src, at + c * cs + x));
}

static ndf_status write_tmp(const char *tmp, void *ctx, char *err, size_t errlen) {
  const wr *w = ctx;
  const tiff_meta *m = w->m;
  double bytes = (double)w->spp * w->P * w->H * w->W * w->bits / 8;
  tlog log;
  TIFF *tif = open_tiff(tmp, -1, bytes > 3.5 * 0x1p30 ? "w8" : "w", &log);
  if (!tif) return ndf_io_error(err, errlen, NDF_EIO, w->path, "cannot create: %s", log_msg(&log));
  const int planes = w->planar == PLANARCONFIG_SEPARATE ? w->spp : 1, ns = w->spp / planes;
  const int64_t plane = w->H * w->W;
  size_t rowbytes = (size_t)((w->W * ns * w->bits + 7) / 8);
  unsigned char *row = malloc(rowbytes);
  ndf_status st = row ? NDF_OK : NDF_ENOMEM;
  for (int64_t p = 0; p < w->P && st == NDF_OK; p++) {
    /* page p's first sample in the array, its next ones cs further (ImageJ's channel c of page p
     * is the array's (c, p / C)) */
    int64_t cs = w->P * plane;
    int64_t at = (w->chan_pages ? p % w->C * (w->P / w->C) + p / w->C : p) * plane;
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, (uint32_t)w->W);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, (uint32_t)w->H);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, w->spp);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, w->bits);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, w->format);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, w->photometric);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, w->planar);
    if (w->nextra) TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, w->nextra, w->extra);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, w->compression);
    if (w->predictor != PREDICTOR_NONE) TIFFSetField(tif, TIFFTAG_PREDICTOR, w->predictor);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, TIFFDefaultStripSize(tif, 0));
    if (w->has_res) {
      TIFFSetField(tif, TIFFTAG_XRESOLUTION, (double)w->xres);
      TIFFSetField(tif, TIFFTAG_YRESOLUTION, (double)w->yres);
      TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, w->unit);
    }
    if (w->has_pos) {
      TIFFSetField(tif, TIFFTAG_XPOSITION, (double)w->xpos);
      TIFFSetField(tif, TIFFTAG_YPOSITION, (double)w->ypos);
    }
    if (!p && w->desc) TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, w->desc);
    if (!p && m)
      for (int i = 1; i < NTEXT; i++)
        if (m->text[i]) TIFFSetField(tif, text_tags[i], m->text[i]);
    if ((size_t)TIFFScanlineSize64(tif) != rowbytes) {
      st = ndf_io_error(err, errlen, NDF_EIO, w->path, "libtiff: %s", log_msg(&log));
      break;
    }
    for (int s = 0; s < planes && st == NDF_OK; s++) /* planar: all of sample 0, then 1, ... */
      for (int64_t y = 0; y < w->H; y++) {
        pack(w, at + s * cs + y * w->W, cs, ns, row);
        if (TIFFWriteScanline(tif, row, (uint32_t)y, (uint16_t)s) < 0) {
          st = ndf_io_error(err, errlen, NDF_EIO, w->path, "write failed: %s", log_msg(&log));
          break;
        }
      }
    if (st == NDF_OK && !TIFFWriteDirectory(tif))
      st = ndf_io_error(err, errlen, NDF_EIO, w->path, "write failed: %s", log_msg(&log));
  }
  if (st == NDF_ENOMEM) ndf_io_error(err, errlen, st, w->path, "out of memory");
  TIFFClose(tif);
  if (st == NDF_OK && log.errors)
    st = ndf_io_error(err, errlen, NDF_EIO, w->path, "write failed: %s", log_msg(&log));
  free(row);
  return st;
}

/* A number as ImageJ and tifffile read it back: a float keeps its point ("2.0"). */
static int put_number(char *out, double v, int integer) {
  if (integer) return sprintf(out, "%lld", (long long)v);
  int n = sprintf(out, "%.15g", v);
  if (!strpbrk(out, ".eEni")) n += sprintf(out + n, ".0");
  return n;
}

/* One line of ImageJ's description to set: key=v, or with delta key=(its value less v). */
typedef struct ij_line {
  const char *key;
  double v;
  int set, integer, delta, add; /* add: write it where the description lacks it */
} ij_line;

/* ImageJ's description d with the lines set: a line whose value stays keeps its text (so an image
 * written as read gets its description back byte for byte), one missing is added at the end.
 * NULL where out of memory. */
static char *imagej_update(const char *d, ij_line *ln, int n) {
  size_t len = strlen(d);
  char *out = malloc(len + 64 * (size_t)(n + 1)), *o = out;
  if (!out) return NULL;
  int seen[16] = {0};
  for (const char *p = d; *p;) {
    const char *eol = strchr(p, '\n'), *end = eol ? eol : p + strlen(p);
    int k = -1;
    for (int i = 0; i < n; i++) {
      size_t kl = strlen(ln[i].key);
      if (ln[i].set && !seen[i] && (size_t)(end - p) > kl && !strncmp(p, ln[i].key, kl) &&
          p[kl] == '=')
        k = i;
    }
    double old = k >= 0 ? strtod(p + strlen(ln[k].key) + 1, NULL) : 0;
    double v = k >= 0 ? (ln[k].delta ? old - ln[k].v : ln[k].v) : 0;
    if (k >= 0 && (old != v || !isfinite(old))) {
      o += sprintf(o, "%s=", ln[k].key);
      o += put_number(o, v, ln[k].integer);
    } else {
      memcpy(o, p, (size_t)(end - p));
      o += end - p;
    }
    if (k >= 0) seen[k] = 1;
    if (eol) *o++ = '\n';
    p = eol ? eol + 1 : end;
  }
  for (int i = 0; i < n; i++)
    if (ln[i].set && ln[i].add && !seen[i]) {
      if (o > out && o[-1] != '\n') *o++ = '\n';
      o += sprintf(o, "%s=", ln[i].key);
      o += put_number(o, ln[i].delta ? -ln[i].v : ln[i].v, ln[i].integer);
    }
  if (len && d[len - 1] == '\n' && o[-1] != '\n') *o++ = '\n';
  *o = 0;
  return out;
}

/* The file's order of a page's samples, rows and columns: (s, h, w) planar, (h, w, s)
 * interleaved, (h, w) for one sample. Their number. */
static int page_dims(int64_t s, int64_t h, int64_t w, int planar, int64_t *out) {
  int n = 0;
  if (s > 1 && planar) out[n++] = s;
  out[n++] = h;
  out[n++] = w;
  if (s > 1 && !planar) out[n++] = s;
  return n;
}

/* tifffile's description {"shape": [...], ...} with the written shape: its pages' axes as they
 * were where their count stays (else one of them, where it had at most one), then the page's.
 * 1 with *out set (NULL where out of memory), 0 where it does not match the file read. */
static int shape_update(const char *d, const tiff_meta *m, const wr *w, char **out) {
  *out = NULL;
  const char *b = strchr(d, '['), *e = b ? strchr(b, ']') : NULL;
  int64_t v[40], t[4], old = 1;
  int n = 0;
  const char *p = b ? b + 1 : NULL;
  while (p && p < e && n < 40) {
    char *q;
    long long k = strtoll(p, &q, 10);
    if (q == p || k < 0) return 0;
    v[n++] = k;
    p = q + strspn(q, " ,");
  }
  if (!p || p != e) return 0;
  int nt = page_dims(m->spp, m->shape[m->ndim - 2], m->shape[m->ndim - 1], m->separate, t);
  if (n < nt || memcmp(v + n - nt, t, (size_t)nt * sizeof *t)) return 0;
  for (int i = 0; i < n - nt; i++)
    old *= v[i];
  if (old != m->pages) return 0;
  int lead = n - nt;
  if (w->P != m->pages) {
    if (lead > 1) return 0;
    lead = w->P > 1 || lead;
    v[0] = w->P;
  }
  n = lead + page_dims(w->spp, w->H, w->W, w->planar == PLANARCONFIG_SEPARATE, v + lead);
  char *s = *out = malloc(strlen(d) + 24 * (size_t)n + 2);
  if (!s) return 1;
  s += sprintf(s, "%.*s[", (int)(b - d), d);
  for (int i = 0; i < n; i++)
    s += sprintf(s, "%s%lld", i ? ", " : "", (long long)v[i]);
  sprintf(s, "]%s", e + 1);
  return 1;
}

/* The description to write (w->desc): ImageJ's with the counts, slice spacing and origin of the
 * stack written where the pages follow its axes; tifffile's shape set to the written one; any other
 * as it was, where it does not spell out a layout, or the layout stays. */
static ndf_status describe_out(wr *w, int ij, int same, int zi) {
  const tiff_meta *m = w->m;
  const char *d = m ? m->text[0] : NULL;
  const ndf_image *img = w->img;
  const int nd = img->a.ndim;
  if (!d) return NDF_OK;
  if (ij) {
    double z = zi >= 0 ? img->spacing[zi] : 0, per = length_mm(m);
    double oz = zi >= 0 ? (double)img->origin[zi] : 0;
    double ox = (double)img->origin[nd - 1], oy = (double)img->origin[nd - 2];
    int64_t ch = w->chan_pages ? w->C : 1;
    ij_line ln[] = {
        {"images", (double)w->P, 1, 1, 0, w->P > 1},
        {"channels", (double)ch, 1, 1, 0, ch > 1},
        {"slices", (double)w->Z, 1, 1, 0, w->Z > 1},
        {"frames", (double)w->T, 1, 1, 0, w->T > 1},
        {"spacing", z / per, z > 0 && per > 0 && !same_size(z, m->z_mm), 0, 0, 1},
        /* ImageJ's origin is the pixel index of coordinate 0: it moves against the first voxel */
        {"xorigin", ox, ox != 0, 0, 1, 1},
        {"yorigin", oy, oy != 0, 0, 1, 1},
        {"zorigin", oz, oz != 0, 0, 1, 1},
    };
    w->desc = imagej_update(d, ln, (int)(sizeof ln / sizeof ln[0]));
    return w->desc ? NDF_OK : NDF_ENOMEM;
  }
  if (same || !layout_bound(d)) {
    w->desc = strdup(d);
    return w->desc ? NDF_OK : NDF_ENOMEM;
  }
  if (is_shaped(d) && shape_update(d, m, w, &w->desc) && !w->desc) return NDF_ENOMEM;
  return NDF_OK;
}

/* XPosition and YPosition of the first voxel: the file's moved by the image's origin (in pixels
 * of the file's resolution), kept where the resolution's unit stays; added where the file had
 * none and the origin moves the image to the right or down; none where they would be negative,
 * which TIFF cannot hold. */
static void position_out(wr *w) {
  const tiff_meta *m = w->m;
  const ndf_image *img = w->img;
  const int nd = img->a.ndim;
  const int64_t ox = img->origin[nd - 1], oy = img->origin[nd - 2];
  if (!m || (!m->has_pos && !ox && !oy)) return;
  if (w->has_res ? w->unit != m->unit : m->has_res) return;
  double x = m->has_pos ? m->xpos : 0, y = m->has_pos ? m->ypos : 0;
  if (ox || oy) {
    if (!m->has_res || !(m->xres > 0 && m->yres > 0 && isfinite(m->xres) && isfinite(m->yres)))
      return;
    x += (double)ox / m->xres;
    y += (double)oy / m->yres;
  }
  if (!(x >= 0 && y >= 0 && x < 3e38 && y < 3e38)) return;
  w->has_pos = 1;
  w->xpos = (float)x;
  w->ypos = (float)y;
}

ndf_status ndf__tiff_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  const ndf_array *a = &img->a;
  wr w;
  memset(&w, 0, sizeof w);
  w.path = path;
  w.img = img;
  w.m = ndf_io_meta(img, NDF_FORMAT_TIFF);
  const tiff_meta *m = w.m;
  int nd = a->ndim, ca = img->channel_axis, ta = img->time_axis, lead = ca == 0;
  if (ca > 0)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "TIFF holds colour channels as axis 0, not axis %d", ca);
  w.C = lead ? a->shape[0] : 1;
  /* ImageJ's description follows the stack where the file read was its hyperstack, and its
   * channels are pages still, or samples as many as before */
  int ij =
      m && m->ij && is_imagej(m->text[0]) && !m->separate && (!lead || m->ij_chan || w.C == m->spp);
  w.chan_pages = ij && lead && m->ij_chan;
  int rest = nd - lead, zi = -1;
  if (rest < 2 || rest > 4 || (rest == 4 && !(ij && ta == lead)))
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "TIFF holds (h, w) images, (pages, h, w) stacks, and colour ones with "
                        "the channels first, (c, h, w) or (c, pages, h, w) (an ImageJ hyperstack "
                        "also (frames, slices, h, w)); this array has %d axes%s",
                        nd, ca < 0 ? " and no channel axis" : "");
  w.T = w.Z = 1;
  if (rest == 4) {
    w.T = a->shape[lead];
    w.Z = a->shape[zi = lead + 1];
  } else if (rest == 3 && ta == lead) {
    w.T = a->shape[lead];
  } else if (rest == 3) {
    w.Z = a->shape[zi = lead];
  }
  w.H = a->shape[nd - 2];
  w.W = a->shape[nd - 1];
  w.P = w.T * w.Z * (w.chan_pages ? w.C : 1);
  if (w.H > UINT32_MAX || w.W > UINT32_MAX || (w.chan_pages ? 1 : w.C) > 65535 || w.P > 65535)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "too large for TIFF: at most 2^32-1 rows and columns, 65535 channels "
                        "and pages");
  w.spp = (uint16_t)(w.chan_pages ? 1 : w.C);

  /* Sample type: the file's own where the array still has the dtype read from it. */
  static const uint16_t fmt[] = {0,
                                 SAMPLEFORMAT_UINT,
                                 SAMPLEFORMAT_UINT,
                                 SAMPLEFORMAT_INT,
                                 SAMPLEFORMAT_IEEEFP,
                                 SAMPLEFORMAT_IEEEFP};
  w.format = fmt[a->dtype];
  w.bits = (uint16_t)(8 * ndf_dtype_size(a->dtype));
  if (m && m->dtype == a->dtype) {
    w.format = m->format;
    w.bits = m->bits;
  }

  /* Layout: the file's (colour, extra samples, planes) where the sample count is the same. */
  uint16_t base;
  if (m && m->spp == w.spp) {
    w.photometric = m->photometric;
    base = (uint16_t)(w.photometric == PHOTOMETRIC_RGB ? 3 : 1);
  } else {
    w.photometric = w.spp == 3 || w.spp == 4 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
    base = (uint16_t)(w.photometric == PHOTOMETRIC_RGB ? 3 : 1);
  }
  w.nextra = (uint16_t)(w.spp - base);
  for (int i = 0; i < w.nextra && i < MAX_EXTRA; i++)
    w.extra[i] = m && m->spp == w.spp && i < m->nextra ? m->extra[i]
                 : (w.spp == 2 || w.spp == 4) && !i    ? EXTRASAMPLE_UNASSALPHA
                                                       : EXTRASAMPLE_UNSPECIFIED;
  if (w.nextra > MAX_EXTRA) w.nextra = 0; /* many unspecified extra samples: the tag is optional */
  w.planar = m && m->separate && w.spp > 1 ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG;

  /* Compression: the file's where libtiff writes it here (LZW, deflate), else none. */
  w.compression = COMPRESSION_NONE;
  w.predictor = PREDICTOR_NONE;
  if (m && (m->compression == COMPRESSION_LZW || m->compression == COMPRESSION_ADOBE_DEFLATE ||
            m->compression == COMPRESSION_DEFLATE)) {
    w.compression = m->compression;
    int isfloat = w.format == SAMPLEFORMAT_IEEEFP;
    if ((m->predictor == PREDICTOR_HORIZONTAL && !isfloat && w.bits >= 8) ||
        (m->predictor == PREDICTOR_FLOATINGPOINT && isfloat))
      w.predictor = m->predictor;
  }

  int same = m && m->ndim == nd && m->separate == (w.planar == PLANARCONFIG_SEPARATE) &&
             m->ij_chan == w.chan_pages;
  for (int d = 0; same && d < nd; d++)
    same = m->shape[d] == a->shape[d];
  if (describe_out(&w, ij, same, zi) != NDF_OK)
    return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  const int ij_out = is_imagej(w.desc);

  /* Resolution: the file's where the voxel size is still what it gave and its unit still known
   * (ImageJ's goes with its description), else from the spacing (in ImageJ's unit where its
   * description goes along, which readers take it in). */
  double sy = img->spacing[nd - 2], sx = img->spacing[nd - 1], per = m ? length_mm(m) : 0;
  if (m && m->has_res && (ij_out || !(m->imagej_mm > 0)) &&
      same_size(size_mm(m->xres, per, 1), sx) && same_size(size_mm(m->yres, per, 1), sy)) {
    w.has_res = 1;
    w.xres = m->xres;
    w.yres = m->yres;
    w.unit = m->unit;
  } else if (sx > 0 && sy > 0) {
    int imagej = m && m->imagej_mm > 0 && ij_out;
    w.has_res = 1;
    w.unit = imagej ? m->unit : m && m->unit == RESUNIT_INCH ? RESUNIT_INCH : RESUNIT_CENTIMETER;
    double u = imagej ? m->imagej_mm : w.unit == RESUNIT_INCH ? 25.4 : 10;
    w.xres = (float)(u / sx);
    w.yres = (float)(u / sy);
  }
  position_out(&w);
  ndf_status st = ndf_io_write_via_temp(path, write_tmp, &w, err, errlen);
  free(w.desc);
  return st;
}
