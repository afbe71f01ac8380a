/* tiff.c - TIFF over libtiff: a file's pages as one stack, colour as planar channels. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>

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
  int has_res;
  float xres, yres;
  uint16_t unit;
  double imagej_mm; /* ImageJ's unit= in mm (resolution in pixels per unit), 0 if none */
  int separate;     /* the samples were in planes */
  int ndim;         /* the array's shape as read */
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

static TIFF *open_tiff(const char *path, const char *mode, tlog *log) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, silence);
  log_reset(log);
  TIFFOpenOptions *o = TIFFOpenOptionsAlloc();
  if (!o) return NULL;
  TIFFOpenOptionsSetErrorHandlerExtR(o, on_error, log);
  TIFFOpenOptionsSetWarningHandlerExtR(o, on_warning, log);
  TIFF *tif = TIFFOpenExt(path, mode, o);
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
  tmsize_t size = pg->tw ? TIFFTileSize(tif) : TIFFStripSize(tif);
  tmsize_t row = pg->tw ? TIFFTileRowSize(tif) : TIFFScanlineSize(tif);
  if (size <= 0 || row <= 0) {
    snprintf(why, n, "page %lld: %s", (long long)pageno, log_msg(log));
    return NDF_EINVAL;
  }
  unsigned char *buf = malloc((size_t)size);
  if (!buf) {
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
        log_reset(log);
        if (pg->tw)
          got = TIFFReadEncodedTile(tif, TIFFComputeTile(tif, x0, y0, 0, (uint16_t)pl), buf, want);
        else
          got = TIFFReadEncodedStrip(tif, (uint32_t)pl * down + by, buf, want);
        if (got != want) {
          snprintf(why, n, "page %lld, %s at row %u column %u: %s", (long long)pageno,
                   pg->tw ? "tile" : "strip", y0, x0,
                   got < 0 || log->errors ? log_msg(log) : "decoded too few bytes");
          st = NDF_EINVAL;
          break;
        }
        for (uint32_t r = 0; r < rows; r++)
          unpack(pg->k, pg->bits, buf + (size_t)r * (size_t)row, cols, ns,
                 (const uint8_t(*)[256])lut, out,
                 at + pl * cstride + (int64_t)(y0 + r) * pg->w + x0, cstride);
      }
  free(buf);
  return st;
}

/* ImageJ's "key=value" line in its description, or NULL. */
static const char *imagej_value(const char *d, const char *key) {
  size_t k = strlen(key);
  for (const char *p = d; (p = strchr(p, '\n')); p++)
    if (!strncmp(p + 1, key, k) && p[1 + k] == '=') return p + 2 + k;
  return NULL;
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

/* A description that spells out the file's layout (ImageJ's header, tifffile's shape), which
 * readers trust over the pages: it stays true only for the same shape, samples interleaved. */
static int layout_bound(const char *d) {
  return is_imagej(d) || (d && (!strncmp(d, "{\"shape\":", 9) || !strncmp(d, "shape=(", 7)));
}

/* A resolution (pixels per unit) as a pixel's size in mm, 0 where unknown. */
static double res_mm(float res, uint16_t unit, double imagej_mm) {
  if (!(res > 0) || !isfinite(res)) return 0;
  double per = unit == RESUNIT_INCH ? 25.4 : unit == RESUNIT_CENTIMETER ? 10 : imagej_mm;
  return per / res;
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
  for (int i = 0; i < NTEXT; i++) {
    char *s = NULL;
    if (TIFFGetField(r->tif, text_tags[i], &s) && s && !(m->text[i] = strdup(s))) return NDF_ENOMEM;
  }
  const char *u = is_imagej(m->text[0]) ? imagej_value(m->text[0], "unit") : NULL;
  m->imagej_mm = u ? unit_mm(u) : 0;
  return NDF_OK;
}

static ndf_status read_all(rd *r, const ndf_read_opts *o, ndf_image *img, char *err,
                           size_t errlen) {
  (void)o;
  char why[320];
  struct stat sb;
  if (stat(r->path, &sb) != 0)
    return ndf_io_error(err, errlen, NDF_EIO, r->path, "%s", strerror(errno));
  uint64_t fsize = (uint64_t)sb.st_size;
  FILE *f = fopen(r->path, "rb");
  if (!f) return ndf_io_error(err, errlen, NDF_EIO, r->path, "%s", strerror(errno));
  unsigned char magic[8];
  size_t got = fread(magic, 1, 8, f);
  fclose(f);
  if (got >= 4 &&
      !((!memcmp(magic, "II", 2) && magic[3] == 0 && (magic[2] == 42 || magic[2] == 43)) ||
        (!memcmp(magic, "MM", 2) && magic[2] == 0 && (magic[3] == 42 || magic[3] == 43))))
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path,
                        "not a TIFF file (bad magic: it starts neither II*. nor MM.*)");
  if (got < 8)
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path,
                        "truncated: %zu bytes, less than a TIFF header", got);
  r->tif = open_tiff(r->path, "r", &r->log);
  if (!r->tif)
    return ndf_io_error(err, errlen, NDF_EINVAL, r->path, "corrupt or truncated: %s",
                        log_msg(&r->log));

  /* Pass 1: every page's layout, checked against the first before anything is allocated. */
  page first, pg;
  memset(&first, 0, sizeof first);
  int64_t pages = 0;
  ndf_status st;
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

  int64_t C = first.channels, P = pages, H = first.h, W = first.w;
  ndf_dtype dt = kind_dtype[first.k];
  double bytes = (double)C * (double)P * (double)H * (double)W * (double)ndf_dtype_size(dt);
  if (bytes > 0x1p46 || bytes > (double)SIZE_MAX / 2)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, r->path,
                        "%lld pages of %lldx%lld with %lld channels is too large to hold",
                        (long long)P, (long long)W, (long long)H, (long long)C);
  r->data = malloc((size_t)bytes);
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
    st = describe(r->tif, &pg, why, sizeof why); /* again: it sets the JPEG colour mode */
    if (st == NDF_OK)
      st = read_page(r->tif, &pg, p + 1, r->data, p * H * W, P * H * W, &r->log, why, sizeof why);
    if (st != NDF_OK) return fail(r, st, why, err, errlen);
    p++;
  }

  tiff_meta *m = r->meta;
  int64_t shape[NDF_MAX_DIMS];
  int nd = 0;
  if (C > 1) shape[nd++] = C;
  if (P > 1) shape[nd++] = P;
  shape[nd++] = H;
  shape[nd++] = W;
  m->ndim = nd;
  memcpy(m->shape, shape, sizeof shape);
  img->a = ndf_array_contiguous(dt, nd, shape, r->data);
  r->data = NULL;
  img->format = NDF_FORMAT_TIFF;
  img->channel_axis = C > 1 ? 0 : -1;
  if (m->has_res) {
    img->spacing[nd - 1] = res_mm(m->xres, m->unit, m->imagej_mm);
    img->spacing[nd - 2] = res_mm(m->yres, m->unit, m->imagej_mm);
  }
  if (P > 1 && is_imagej(m->text[0]) && m->imagej_mm > 0) {
    const char *s = imagej_value(m->text[0], "spacing");
    double z = s ? strtod(s, NULL) : 0;
    if (z > 0 && isfinite(z)) img->spacing[nd - 3] = z * m->imagej_mm;
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
  const tiff_meta *m; /* NULL unless the image was read from a TIFF */
  int64_t C, P, H, W;
  uint16_t format, bits, photometric, nextra, compression, predictor;
  uint16_t extra[MAX_EXTRA];
  int has_res;
  float xres, yres;
  uint16_t unit;
  int layout_ok; /* a layout-bound description still describes the array */
} wr;

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* One row of page p: the planar array's samples interleaved, in the file's type. */
static void pack(const wr *w, int64_t p, int64_t y, unsigned char *row) {
  const ndf_array *a = &w->img->a;
  int64_t cs = w->P * w->H * w->W, at = (p * w->H + y) * w->W, C = w->C;
  const void *src = a->data;
  if (w->bits < 8) {
    unsigned mask = (1u << w->bits) - 1;
    memset(row, 0, (size_t)((w->W * C * w->bits + 7) / 8));
    for (int64_t x = 0; x < w->W; x++)
      for (int64_t c = 0; c < C; c++) {
        unsigned v = ((const uint8_t *)src)[c * cs + at + x];
        uint64_t bit = (uint64_t)(x * C + c) * w->bits;
        row[bit >> 3] |= (unsigned char)((v > mask ? mask : v) << (8 - w->bits - (bit & 7)));
      }
    return;
  }
#define PACK(TS, TD, CONV)                                                                         \
  do {                                                                                             \
    for (int64_t x = 0; x < w->W; x++)                                                             \
      for (int64_t c = 0; c < C; c++) {                                                            \
        TD v = CONV(((const TS *)src)[c * cs + at + x]);                                           \
        memcpy(row + (size_t)(x * C + c) * sizeof v, &v, sizeof v);                                \
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
    for (int64_t c = 0; c < C; c++)
      ndf_io_store(t, row, x * C + c, ndf__load(a->dtype, src, c * cs + at + x));
}

static ndf_status write_tmp(const char *tmp, void *ctx, char *err, size_t errlen) {
  const wr *w = ctx;
  const tiff_meta *m = w->m;
  double bytes = (double)w->C * w->P * w->H * w->W * w->bits / 8;
  tlog log;
  TIFF *tif = open_tiff(tmp, bytes > 3.5 * 0x1p30 ? "w8" : "w", &log);
  if (!tif) return ndf_io_error(err, errlen, NDF_EIO, w->path, "cannot create: %s", log_msg(&log));
  size_t rowbytes = (size_t)((w->W * w->C * w->bits + 7) / 8);
  unsigned char *row = malloc(rowbytes);
  ndf_status st = row ? NDF_OK : NDF_ENOMEM;
  for (int64_t p = 0; p < w->P && st == NDF_OK; p++) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, (uint32_t)w->W);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, (uint32_t)w->H);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)w->C);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, w->bits);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, w->format);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, w->photometric);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    if (w->nextra) TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, w->nextra, w->extra);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, w->compression);
    if (w->predictor != PREDICTOR_NONE) TIFFSetField(tif, TIFFTAG_PREDICTOR, w->predictor);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, TIFFDefaultStripSize(tif, 0));
    if (w->has_res) {
      TIFFSetField(tif, TIFFTAG_XRESOLUTION, (double)w->xres);
      TIFFSetField(tif, TIFFTAG_YRESOLUTION, (double)w->yres);
      TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, w->unit);
    }
    if (!p && m)
      for (int i = 0; i < NTEXT; i++)
        if (m->text[i] && (i || !layout_bound(m->text[0]) || w->layout_ok))
          TIFFSetField(tif, text_tags[i], m->text[i]);
    if ((size_t)TIFFScanlineSize64(tif) != rowbytes) {
      st = ndf_io_error(err, errlen, NDF_EIO, w->path, "libtiff: %s", log_msg(&log));
      break;
    }
    for (int64_t y = 0; y < w->H; y++) {
      pack(w, p, y, row);
      if (TIFFWriteScanline(tif, row, (uint32_t)y, 0) < 0) {
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

ndf_status ndf__tiff_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  const ndf_array *a = &img->a;
  wr w;
  memset(&w, 0, sizeof w);
  w.path = path;
  w.img = img;
  w.m = ndf_io_meta(img, NDF_FORMAT_TIFF);
  const tiff_meta *m = w.m;
  int nd = a->ndim, ca = img->channel_axis;
  w.C = w.P = 1;
  if (ca == 0 && (nd == 3 || nd == 4)) {
    w.C = a->shape[0];
    if (nd == 4) w.P = a->shape[1];
  } else if (ca == -1 && (nd == 2 || nd == 3)) {
    if (nd == 3) w.P = a->shape[0];
  } else if (ca > 0) {
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "TIFF holds colour channels as axis 0, not axis %d", ca);
  } else {
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "TIFF holds (h, w) images, (pages, h, w) stacks, and colour ones with "
                        "the channels first, (c, h, w) or (c, pages, h, w); this array has %d "
                        "axes%s",
                        nd, ca < 0 ? " and no channel axis" : "");
  }
  w.H = a->shape[nd - 2];
  w.W = a->shape[nd - 1];
  if (w.H > UINT32_MAX || w.W > UINT32_MAX || w.C > 65535 || w.P > 65535)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "too large for TIFF: at most 2^32-1 rows and columns, 65535 channels "
                        "and pages");

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

  /* Colour: the file's where the channel count is the same. */
  uint16_t base;
  if (m && m->spp == w.C) {
    w.photometric = m->photometric;
    base = (uint16_t)(w.photometric == PHOTOMETRIC_RGB ? 3 : 1);
  } else {
    w.photometric = w.C == 3 || w.C == 4 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
    base = (uint16_t)(w.photometric == PHOTOMETRIC_RGB ? 3 : 1);
  }
  w.nextra = (uint16_t)(w.C - base);
  for (int i = 0; i < w.nextra && i < MAX_EXTRA; i++)
    w.extra[i] = m && m->spp == w.C && i < m->nextra ? m->extra[i]
                 : (w.C == 2 || w.C == 4) && !i      ? EXTRASAMPLE_UNASSALPHA
                                                     : EXTRASAMPLE_UNSPECIFIED;
  if (w.nextra > MAX_EXTRA) w.nextra = 0; /* many unspecified extra samples: the tag is optional */

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

  w.layout_ok = m && !m->separate && m->ndim == nd;
  for (int d = 0; w.layout_ok && d < nd; d++)
    w.layout_ok = m->shape[d] == a->shape[d];

  /* Resolution: the file's where the voxel size is still what it gave, else from the spacing (in
   * ImageJ's unit where its description goes along, which readers take it in). */
  double sy = img->spacing[nd - 2], sx = img->spacing[nd - 1];
  if (m && m->has_res && close_to(res_mm(m->xres, m->unit, m->imagej_mm), sx) &&
      close_to(res_mm(m->yres, m->unit, m->imagej_mm), sy)) {
    w.has_res = 1;
    w.xres = m->xres;
    w.yres = m->yres;
    w.unit = m->unit;
  } else if (sx > 0 && sy > 0) {
    int imagej = m && m->imagej_mm > 0 && m->unit == RESUNIT_NONE && w.layout_ok;
    w.has_res = 1;
    w.unit = imagej                         ? RESUNIT_NONE
             : m && m->unit == RESUNIT_INCH ? RESUNIT_INCH
                                            : RESUNIT_CENTIMETER;
    double per = imagej ? m->imagej_mm : w.unit == RESUNIT_INCH ? 25.4 : 10;
    w.xres = (float)(per / sx);
    w.yres = (float)(per / sy);
  }
  return ndf_io_write_via_temp(path, write_tmp, &w, err, errlen);
}
