/* fits.c - FITS images over cfitsio: read an image HDU, write a primary image.
 *
 * Reading takes the primary HDU's image, or the first image extension when the primary is
 * empty (NAXIS = 0, as astropy does), or the HDU the name selects in cfitsio's syntax
 * (file.fits[2], file.fits[SCI]). Gzipped files and tile-compressed (.fz) images are read as
 * cfitsio presents them. NAXIS1, the fastest axis, is the array's last; more than 4 axes are
 * taken only when those beyond the 4th have length 1 (they are dropped).
 *
 * Sample types (the file's equivalent type: BITPIX with the BZERO conventions): 8 -> u8,
 * 16 -> i16, 16 with BZERO 32768 -> u16, -32 -> f32, -64 -> f64; widened exactly and written
 * back as they were: 8 with BZERO -128 (signed bytes) -> i16, 32 (and 32 with BZERO 2^31)
 * -> f64, 64 (and 64 with BZERO 2^63) -> f64 when every value is within 2^53 (else
 * refused). Any other BSCALE/BZERO is applied: f32 from BITPIX 8, 16 or -32, f64 from 32, 64
 * or -64, written back as that float type without scaling; BLANK pixels of scaled integers
 * become NaN. An unscaled integer image keeps its BLANK values, and the card for a writer of
 * its type.
 *
 * Metadata: every card of the HDU but the structural ones (SIMPLE, BITPIX, NAXISn, EXTEND,
 * XTENSION, PCOUNT, GCOUNT, GROUPS, INHERIT, BSCALE, BZERO, CHECKSUM, DATASUM, END and the
 * tile compression's ZQUANTIZ, ZDITHER0, ZHECKSUM, ZDATASUM), in order, COMMENT and HISTORY
 * included; the writer puts them after the structural keywords cfitsio writes, and fresh
 * CHECKSUM/DATASUM when the file had them.
 *
 * Spacing: FITS pixels are usually angles, so an axis's spacing is 0 unless its CUNITi is a
 * length (m, cm, mm, um, nm); then it is |CDi_i| (the CD matrix's diagonal) or else
 * |CDELTi * PCi_i|, in mm. A writer given an image from another format with known spacing
 * writes CDELTi and CUNITi = 'mm' for those axes.
 *
 * Writing: .fits, .fit, .fts; .gz gzipped (the file is made in memory, then compressed);
 * .fz tile-compressed losslessly (RICE for 8 to 32-bit integers, GZIP_2 otherwise, floats not
 * quantized) in the first extension, 1 to 3 axes only (cfitsio's limit), 64-bit integer
 * types as their exact f64 (cfitsio compresses none).
 *
 * Hostile files: cfitsio 4.2 crashes on some corrupt headers and tiles, so before it reads a file
 * the headers it will parse are checked here (check_headers), gzip's size claim too
 * (check_compressed), and before it decompresses an image the tiles' descriptors and Rice
 * streams (check_heap, check_rice); zip, compress and pack files are refused. */
#include <errno.h>
#include <fitsio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>

#include "convert.h"
#include "core/elem.h"
#include "formats.h"

typedef char card_t[FLEN_CARD];

typedef struct fits_meta {
  int type;        /* the file's equivalent sample type (cfitsio's *_IMG) */
  ndf_dtype dtype; /* the dtype the reader made of it */
  int checksum;    /* the HDU had CHECKSUM or DATASUM */
  int ncards;
  card_t *cards; /* non-structural cards in order; BLANK only for an unscaled integer image */
} fits_meta;

static void meta_free(void *p) {
  fits_meta *m = p;
  if (m) free(m->cards);
  free(m);
}

/* ---- cfitsio's errors ---- */

/* Formats "path: what (cfitsio: status text: first message on its stack)" into err, and
 * clears cfitsio's message stack. */
static ndf_status fits_fail(char *err, size_t errlen, ndf_status s, const char *path,
                            const char *what, int st) {
  char text[FLEN_STATUS] = "", msg[FLEN_ERRMSG], first[FLEN_ERRMSG] = "";
  fits_get_errstatus(st, text);
  while (fits_read_errmsg(msg))
    if (!first[0]) memcpy(first, msg, sizeof msg);
  fits_clear_errmsg();
  size_t k = strlen(first); /* cfitsio ends many messages with a colon or a space */
  while (k && (first[k - 1] == ' ' || first[k - 1] == ':'))
    first[--k] = 0;
  if (!first[0]) return ndf_io_error(err, errlen, s, path, "%s (cfitsio: %s)", what, text);
  return ndf_io_error(err, errlen, s, path, "%s (cfitsio: %s: %s)", what, text, first);
}

/* Closes f whatever went before; cfitsio's messages stay for fits_fail when it fails. */
static int close_fits(fitsfile *f) {
  int st = 0;
  if (f) fits_close_file(f, &st);
  if (!st) fits_clear_errmsg();
  return st;
}

/* ---- reading ---- */

/* cfitsio decompresses a gzip file into a buffer of the size its trailer claims; deflate
 * expands at most 1032 times, so a larger claim, or a file too short to hold one, is
 * corrupt. The other whole-file compressions cfitsio would undo (zip, compress, pack, LZH)
 * are refused: their decoders and size guesses are more than ndfilt needs to trust. */
static ndf_status check_compressed(const char *path, const char *name, char *err, size_t errlen) {
  FILE *f = fopen(name, "rb");
  if (!f) return NDF_OK; /* cfitsio says why */
  unsigned char b[4] = {0};
  long long size = -1;
  int gz = 0, other = 0;
  if (fread(b, 1, 2, f) == 2) {
    gz = b[0] == 0x1f && b[1] == 0x8b;
    other = (b[0] == 'P' && b[1] == 'K') ||
            (b[0] == 0x1f && (b[1] == 0x1e || b[1] == 0x9d || b[1] == 0xa0));
  }
  if (gz && fseeko(f, 0, SEEK_END) == 0) size = (long long)ftello(f);
  int have = gz && size >= 18 && fseeko(f, -4, SEEK_END) == 0 && fread(b, 1, 4, f) == 4;
  fclose(f);
  if (other)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "zip, compress or pack files are not read; decompress it, or gzip it");
  if (!gz) return NDF_OK;
  if (!have)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "truncated gzip file (%lld bytes)", size);
  unsigned long long claim = (unsigned long long)b[0] | (unsigned long long)b[1] << 8 |
                             (unsigned long long)b[2] << 16 | (unsigned long long)b[3] << 24;
  if (claim > 1032ull * (unsigned long long)size + 65536)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "corrupt gzip file: it claims %llu bytes uncompressed from %lld bytes",
                        claim, size);
  return NDF_OK;
}

/* The card's value with D exponents as E if it is a plain decimal number, else NULL. */
static char *card_number(char *card, char value[FLEN_VALUE]) {
  int st = 0;
  if (fits_parse_value(card, value, NULL, &st) || !value[0]) return NULL;
  size_t k = strspn(value, "+-.0123456789EeDd");
  if (!strpbrk(value, "0123456789") || value[k + strspn(value + k, " ")]) return NULL;
  for (char *p = value; *p; p++)
    if (*p == 'D' || *p == 'd') *p = 'E';
  return value;
}

/* An integer card value as cfitsio reads one (a float is truncated); 0 if it is not a plain
 * decimal number, or an integer beyond long long's range (cfitsio's reads fail on it too). */
static int card_int(char *card, long long *v) {
  char value[FLEN_VALUE], *end;
  if (!card_number(card, value)) return 0;
  errno = 0;
  *v = strtoll(value, &end, 10);
  int in_range = errno != ERANGE;
  while (*end == ' ')
    end++;
  if (!*end) return in_range;
  double d = strtod(value, &end);
  while (*end == ' ')
    end++;
  if (end == value || *end || !(fabs(d) < 9e18)) return 0;
  *v = (long long)d;
  return 1;
}

/* 1 if the card's value is a plain decimal number within double's range, as cfitsio reads a
 * real keyword (BZERO = 2^63, an unsigned 64-bit image's, included). */
static int card_real(char *card) {
  char value[FLEN_VALUE], *end;
  if (!card_number(card, value)) return 0;
  errno = 0;
  strtod(value, &end);
  while (*end == ' ')
    end++;
  return end != value && !*end && errno != ERANGE;
}

/* n if key is root followed by the number n, 1 <= n <= max; else 0. */
static int indexed(const char *key, const char *root, int max) {
  size_t k = strlen(root);
  char *end;
  if (strncmp(key, root, k) || key[k] < '1' || key[k] > '9') return 0;
  long n = strtol(key + k, &end, 10);
  return !*end && n <= max ? (int)n : 0;
}

/* The keyword the FITS standard requires at card pos (0-based) of a header, or NULL. */
static const char *required_key(int hdu, int pos, long long naxis, int table, char buf[24]) {
  if (pos == 0) return hdu ? "XTENSION" : "SIMPLE";
  if (pos == 1) return "BITPIX";
  if (pos == 2) return "NAXIS";
  if (pos < 3 + naxis) {
    snprintf(buf, 24, "NAXIS%d", pos - 2);
    return buf;
  }
  if (!hdu) return NULL;
  if (pos == 3 + naxis) return "PCOUNT";
  if (pos == 4 + naxis) return "GCOUNT";
  return table && pos == 5 + naxis ? "TFIELDS" : NULL;
}

/* 1 for a keyword whose value cfitsio reads as an integer when it reads the header, 2 for one
 * it reads as a real number, else 0. */
static int numeric_key(const char *key, int bintable) {
  static const char *const ints[] = {"BLANK",   "EXTVER", "EXTLEVEL", "THEAP",
                                     "ZBITPIX", "ZNAXIS", "ZBLANK"};
  static const char *const reals[] = {"BSCALE", "BZERO", "ZSCALE", "ZZERO"};
  static const char *const roots[] = {"ZNAXIS", "ZTILE", "ZVAL"};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    if (!strcmp(key, ints[i])) return 1;
  for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
    if (!strcmp(key, reals[i])) return 2;
  for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++)
    if (indexed(key, roots[i], 999)) return 1;
  if (bintable && indexed(key, "TNULL", 999)) return 1;
  return indexed(key, "TSCAL", 999) || indexed(key, "TZERO", 999) ? 2 : 0;
}

/* 1 if cfitsio would overflow a column's name with the card: it copies a table's TTYPEn
 * (1 <= n <= TFIELDS, n as strtol reads the rest of the name) into 70 bytes with strcpy. A quoted
 * string always fits (68 characters at most in a card); an unquoted value is copied whole, and
 * fits_parse_value gives up to 70 characters. name: the card's keyword as cfitsio reads it. */
static int ttype_overflows(char *card, long long tfields, char name[FLEN_KEYWORD]) {
  char value[FLEN_VALUE], *end;
  int len, st = 0;
  if (fits_get_keyname(card, name, &len, &st) || strncmp(name, "TTYPE", 5)) return 0;
  long n = strtol(name + 5, &end, 10);
  if (*end || n < 1 || n > tfields || fits_parse_value(card, value, NULL, &st)) return 0;
  return value[0] != '\'' && strlen(value) >= sizeof((tcolumn *)0)->ttype;
}

/* cfitsio 4.2 trusts headers further than it checks them, as fuzzing found: on some corrupt
 * required keywords it goes on with an uninitialised count; it divides by a tile-compressed
 * image's ZTILEn (SIGFPE for 0) and sizes buffers by them, and divides by a Rice image's
 * BLOCKSIZE; it picks its Rice decoder by BYTEPIX, reading out of bounds for other values
 * than 1, 2, 4; its message on an integer keyword it cannot read overflows a buffer, and so
 * does its copy of a table's unquoted TTYPEn of 70 characters (fortified aborts); it allocates
 * TFIELDS columns, whatever their number. So the headers cfitsio will read are walked here
 * first, only to check those: the required keywords in their places with integer values within
 * long long's range (BITPIX one of the six, NAXIS and TFIELDS up to 999 as the standard says,
 * the others not negative), numbers where cfitsio reads numbers, TTYPEn that fit (see
 * ttype_overflows), 0 < ZTILEn <= ZNAXISn, and a RICE_1 image's BLOCKSIZE 16 or 32 and BYTEPIX 1, 2
 * or 4 as cfitsio takes them: ZVAL1 and ZVAL2 (BYTEPIX 4 without), whatever ZNAMEn say, swapped
 * when ZVAL1 < 16 and ZVAL2 > 8. The walk stops where it cannot follow the file (cfitsio then says
 * what is wrong), and after a primary HDU with data unless all (an HDU chosen by name). name: the
 * file (plain or gzipped). */
static ndf_status check_headers(const char *path, const char *name, int all, char *err,
                                size_t errlen) {
  enum { BLOCK = 2880, MAXDIM = 999, ZDIM = 6 };
  gzFile g = gzopen(name, "rb");
  if (!g) return NDF_OK;
  long long naxes[MAXDIM + 1];
  char blk[BLOCK];
  ndf_status s = NDF_OK;
  for (int hdu = 0; s == NDF_OK; hdu++) {
    long long bitpix = 0, naxis = 0, pcount = 0, gcount = 1, tfields = 0;
    long long znaxis = 0, zn[ZDIM + 1] = {0}, zt[ZDIM + 1] = {0}, zval[3] = {0};
    int zimage = 0, groups = 0, tiled = 0, table = 0, bintable = 0, ended = 0, rice = 0, zset = 0;
    memset(naxes, 0, sizeof naxes);
    for (int pos = 0; !ended; pos++) {
      if (pos % (BLOCK / 80) == 0 && gzread(g, blk, BLOCK) != BLOCK) goto done;
      char card[FLEN_CARD], key[9], buf[24];
      memcpy(card, blk + 80 * (pos % (BLOCK / 80)), 80);
      card[80] = 0;
      snprintf(key, sizeof key, "%.*s", (int)strcspn(card, " ="), card);
      if (pos == 0 && hdu > 0 && strcmp(key, "XTENSION")) goto done; /* no more HDUs */
      const char *want = required_key(hdu, pos, naxis, table, buf);
      long long v = 0;
      int n;
      if (!hdu && !pos && strcmp(key, "SIMPLE")) {
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "not a FITS file (it does not begin with SIMPLE = T)");
        goto done;
      }
      if (want && (strcmp(key, want) || (pos && !card_int(card, &v)))) {
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "corrupt header in HDU %d: card %d should be %s with an integer value",
                         hdu, pos + 1, want);
        goto done;
      }
      if (want && pos) {
        int bad = pos == 1 ? v != 8 && v != 16 && v != 32 && v != 64 && v != -32 && v != -64
                  : pos == 2 || !strcmp(want, "TFIELDS") ? v < 0 || v > MAXDIM
                                                         : v < 0;
        if (bad) {
          s = ndf_io_error(err, errlen, NDF_EINVAL, path, "corrupt header in HDU %d: %s = %lld",
                           hdu, want, v);
          goto done;
        }
        if (pos == 1)
          bitpix = v;
        else if (pos == 2)
          naxis = v;
        else if ((n = indexed(want, "NAXIS", MAXDIM)))
          naxes[n] = v;
        else if (!strcmp(want, "PCOUNT"))
          pcount = v;
        else if (!strcmp(want, "GCOUNT"))
          gcount = v;
        else if (!strcmp(want, "TFIELDS"))
          tfields = v;
      }
      if (pos == 0 && hdu > 0) {
        table = strstr(card, "TABLE") != NULL;
        bintable = table && strstr(card, "'BINTABLE") != NULL;
      }
      int num = numeric_key(key, bintable);
      if (num && !(num == 1 ? card_int(card, &v) : card_real(card))) {
        const char *val = card + 10;
        while (*val == ' ')
          val++;
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "corrupt header in HDU %d: %s is not a number, or out of range: %.30s",
                         hdu, key, val);
        goto done;
      }
      char kw[FLEN_KEYWORD];
      if (table && ttype_overflows(card, tfields, kw)) {
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "corrupt header in HDU %d: %s is not a quoted string and longer than "
                         "a column name (69 characters)",
                         hdu, kw);
        goto done;
      }
      ended = !strcmp(key, "END");
      if (!strcmp(key, "ZIMAGE")) zimage = strchr(card + 9, 'T') != NULL;
      if (!strcmp(key, "GROUPS")) groups = strchr(card + 9, 'T') != NULL;
      if (!strcmp(key, "ZNAXIS")) card_int(card, &znaxis);
      if ((n = indexed(key, "ZNAXIS", ZDIM))) card_int(card, &zn[n]);
      if ((n = indexed(key, "ZTILE", ZDIM)) && card_int(card, &zt[n])) tiled |= 1 << n;
      if ((n = indexed(key, "ZVAL", 2)) && !(zset & 1 << n) && card_int(card, &zval[n]))
        zset |= 1 << n; /* cfitsio reads the first */
      if (!strcmp(key, "ZCMPTYPE")) rice |= strstr(card, "'RICE_1") || strstr(card, "'RICE_ONE");
    }
    for (int i = 1; hdu > 0 && zimage && i <= znaxis && i <= ZDIM && s == NDF_OK; i++) {
      long long tile = tiled & 1 << i ? zt[i] : i == 1 ? zn[1] : 1;
      if (zn[i] <= 0 || tile <= 0 || tile > zn[i])
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "corrupt tile-compressed image in HDU %d: ZNAXIS%d = %lld, ZTILE%d = %lld",
                         hdu, i, zn[i], i, tile);
    }
    if (hdu > 0 && zimage && rice && zset & 2 && s == NDF_OK) {
      long long block = zval[1], pix = zset & 4 ? zval[2] : 4, t = block;
      if (block < 16 && pix > 8) {
        block = pix;
        pix = t;
      }
      if (block != 16 && block != 32)
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "corrupt tile-compressed image in HDU %d: BLOCKSIZE = %lld", hdu, block);
      else if (pix != 1 && pix != 2 && pix != 4)
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "corrupt tile-compressed image in HDU %d: BYTEPIX = %lld", hdu, pix);
    }
    /* cfitsio moves on only from an empty primary HDU, or to a chosen HDU */
    if (hdu == 0 && naxis > 0 && !all) break;
    /* the data unit's size, as cfitsio computes it, to the next header */
    long long n = naxis > 0 ? 1 : 0;
    for (int i = hdu == 0 && groups && naxes[1] == 0 ? 2 : 1; i <= naxis; i++) {
      if (naxes[i] && n > (1ll << 50) / naxes[i]) goto done;
      n *= naxes[i];
    }
    if (hdu > 0 || groups) {
      if (pcount > (1ll << 50) || (gcount && n + pcount > (1ll << 50) / gcount)) break;
      n = (n + pcount) * gcount;
    }
    long long bytes = (long long)(llabs(bitpix) / 8) * n;
    if (n > (1ll << 50) || bytes < 0 || bytes > (1ll << 53)) break;
    bytes = (bytes + BLOCK - 1) / BLOCK * BLOCK;
    if (bytes && gzseek(g, (z_off_t)bytes, SEEK_CUR) < 0) break;
  }
done:
  gzclose(g);
  fits_clear_errmsg(); /* fits_parse_value's */
  return s;
}

/* Moves from an empty primary HDU to the first extension with image data (tile-compressed
 * images count). Returns 0 if there is none. */
static int first_image(fitsfile *f, int *st) {
  for (;;) {
    int type = 0, naxis = 0;
    if (fits_movrel_hdu(f, 1, &type, st)) {
      if (*st == END_OF_FILE) {
        *st = 0;
        fits_clear_errmsg();
      }
      return 0;
    }
    if (type == IMAGE_HDU && !fits_get_img_dim(f, &naxis, st) && naxis > 0) return 1;
    if (*st) return 0;
  }
}

/* Opens path at its image HDU: the file by its literal name when it exists (brackets and
 * parentheses are then part of the name), else through cfitsio's extended syntax. */
static ndf_status open_image(const char *path, fitsfile **out, char *err, size_t errlen) {
  struct stat sb;
  fitsfile *f = NULL;
  int st = 0;
  const char *bracket = strchr(path, '[');
  if (stat(path, &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) return ndf_io_error(err, errlen, NDF_EIO, path, "is a directory");
    ndf_status s = check_compressed(path, path, err, errlen);
    if (s == NDF_OK) s = check_headers(path, path, 0, err, errlen);
    if (s != NDF_OK) return s;
    fits_open_diskfile(&f, path, READONLY, &st);
    int naxis = 0;
    if (!st && !fits_get_img_dim(f, &naxis, &st) && naxis == 0 && !first_image(f, &st) && !st) {
      close_fits(f);
      fits_clear_errmsg();
      return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                          "no image: the primary HDU is empty and no image extension follows");
    }
  } else if (bracket && bracket > path) {
    char *base = strndup(path, (size_t)(bracket - path));
    if (!base) return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
    ndf_status s = NDF_OK;
    if (stat(base, &sb) == 0) {
      s = check_compressed(path, base, err, errlen);
      if (s == NDF_OK) s = check_headers(path, base, 1, err, errlen);
    }
    free(base);
    if (s != NDF_OK) return s;
    fits_open_image(&f, path, READONLY, &st);
  } else {
    return ndf_io_error(err, errlen, NDF_EIO, path, "%s", strerror(errno));
  }
  if (st) {
    ndf_status s = NDF_EINVAL;
    const char *what = "not a readable FITS file";
    if (st == FILE_NOT_OPENED || st == URL_PARSE_ERROR || st == BAD_HDU_NUM || st == NOT_IMAGE) {
      s = st == FILE_NOT_OPENED ? NDF_EIO : NDF_EINVAL;
      what = st == NOT_IMAGE ? "the HDU selected is not an image" : "cannot open";
    } else if (st == READ_ERROR || st == END_OF_FILE) {
      what = "truncated header, or not a FITS file";
    } else if (st == NO_SIMPLE || st == BAD_SIMPLE || st == UNKNOWN_REC) {
      what = "not a FITS file (it does not begin with SIMPLE = T)";
    } else if (st == NO_END) {
      what = "corrupt header: no END card";
    }
    ndf_status r = fits_fail(err, errlen, s, path, what, st);
    close_fits(f);
    fits_clear_errmsg();
    return r;
  }
  *out = f;
  return NDF_OK;
}

/* mm per unit of a CUNITi value that is a length, or 0. */
static double unit_mm(const char *u) {
  static const struct {
    const char *name;
    double mm;
  } units[] = {{"m", 1e3}, {"cm", 10}, {"mm", 1}, {"um", 1e-3}, {"nm", 1e-6}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (!strcmp(u, units[i].name)) return units[i].mm;
  return 0;
}

/* A key's value as a double, or dflt when absent or not a number. */
static double key_double(fitsfile *f, const char *key, double dflt) {
  double v = dflt;
  int st = 0;
  if (fits_read_key(f, TDOUBLE, key, &v, NULL, &st) || !isfinite(v)) v = dflt;
  fits_clear_errmsg();
  return v;
}

/* The spacing in mm of FITS axis i (1-based), or 0. */
static double axis_spacing(fitsfile *f, int i) {
  char key[FLEN_KEYWORD], unit[FLEN_VALUE] = "";
  int st = 0;
  snprintf(key, sizeof key, "CUNIT%d", i);
  if (fits_read_key(f, TSTRING, key, unit, NULL, &st)) unit[0] = 0;
  fits_clear_errmsg();
  size_t k = strlen(unit); /* string values may carry trailing blanks */
  while (k && unit[k - 1] == ' ')
    unit[--k] = 0;
  double mm = unit_mm(unit);
  if (mm == 0) return 0;
  snprintf(key, sizeof key, "CD%d_%d", i, i);
  double d = key_double(f, key, NAN);
  if (isnan(d)) {
    snprintf(key, sizeof key, "CDELT%d", i);
    double cdelt = key_double(f, key, 1);
    snprintf(key, sizeof key, "PC%d_%d", i, i);
    d = cdelt * key_double(f, key, 1);
  }
  return fabs(d) * mm;
}

/* 1 if name is prefix followed by digits only. */
static int numbered(const char *name, const char *prefix) {
  size_t k = strlen(prefix);
  if (strncmp(name, prefix, k) || !name[k]) return 0;
  for (const char *p = name + k; *p; p++)
    if (*p < '0' || *p > '9') return 0;
  return 1;
}

/* Keywords the writer makes itself or that describe the stored layout, not the image; and
 * for a tile-compressed image, those of the compression and of its binary table. */
static int structural(const char *name, const card_t card, int compressed) {
  static const char *const keys[] = {"SIMPLE",   "BITPIX",   "NAXIS",   "EXTEND",  "XTENSION",
                                     "PCOUNT",   "GCOUNT",   "GROUPS",  "INHERIT", "BSCALE",
                                     "BZERO",    "CHECKSUM", "DATASUM", "END",     "ZQUANTIZ",
                                     "ZDITHER0", "ZHECKSUM", "ZDATASUM"};
  static const char *const zkeys[] = {"ZIMAGE",   "ZCMPTYPE", "ZBITPIX",  "ZNAXIS",  "ZSIMPLE",
                                      "ZTENSION", "ZEXTEND",  "ZBLOCKED", "ZPCOUNT", "ZGCOUNT",
                                      "ZMASKCMP", "TFIELDS",  "THEAP"};
  static const char *const zseries[] = {"ZNAXIS", "ZTILE", "ZNAME", "ZVAL",  "TTYPE", "TFORM",
                                        "TUNIT",  "TSCAL", "TZERO", "TNULL", "TDIM",  "TDISP"};
  if (numbered(name, "NAXIS")) return 1;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!strcmp(name, keys[i])) return 1;
  if (!compressed) return 0;
  for (size_t i = 0; i < sizeof zkeys / sizeof zkeys[0]; i++)
    if (!strcmp(name, zkeys[i])) return 1;
  for (size_t i = 0; i < sizeof zseries / sizeof zseries[0]; i++)
    if (numbered(name, zseries[i])) return 1;
  /* the name cfitsio gives a compressed HDU when the image had none */
  return !strcmp(name, "EXTNAME") && strstr(card, "'COMPRESSED_IMAGE'");
}

static int is_key(const card_t card, const char *key) {
  size_t k = strlen(key);
  return !strncmp(card, key, k) && (card[k] == ' ' || card[k] == '=' || !card[k]);
}

/* The HDU's cards for the writer. A tile-compressed image's are read from its table's header
 * less the compression's keywords (ZBLANK becoming BLANK), as cfitsio's
 * fits_convert_hdr2str would, which fails on the compressed headers astropy writes. */
static ndf_status read_cards(fitsfile *f, fits_meta *m, int keep_blank, int compressed,
                             const char *path, char *err, size_t errlen) {
  char *hdr = NULL;
  int nkeys = 0, st = 0;
  if (fits_hdr2str(f, 0, NULL, 0, &hdr, &nkeys, &st)) {
    if (hdr) fits_free_memory(hdr, &(int){0});
    return fits_fail(err, errlen, NDF_EINVAL, path, "cannot read the header", st);
  }
  m->cards = nkeys > 0 ? malloc((size_t)nkeys * sizeof *m->cards) : NULL;
  if (nkeys > 0 && !m->cards) {
    fits_free_memory(hdr, &st);
    return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  }
  for (int i = 0; i < nkeys; i++) {
    card_t c;
    memcpy(c, hdr + 80 * (size_t)i, 80);
    c[80] = 0;
    char name[9];
    int k = 0;
    while (k < 8 && c[k] != ' ' && c[k] != '=') {
      name[k] = c[k];
      k++;
    }
    name[k] = 0;
    if (!strcmp(name, "CHECKSUM") || !strcmp(name, "DATASUM") || !strcmp(name, "ZHECKSUM"))
      m->checksum = 1;
    if (compressed && !strcmp(name, "ZBLANK")) {
      memcpy(c, "BLANK   ", 8);
      strcpy(name, "BLANK");
    }
    if (structural(name, c, compressed) || (!strcmp(name, "BLANK") && !keep_blank)) continue;
    memcpy(m->cards[m->ncards++], c, sizeof c);
  }
  fits_free_memory(hdr, &st);
  fits_clear_errmsg();
  return NDF_OK;
}

static ndf_dtype dtype_of(int type) {
  switch (type) {
  case BYTE_IMG: return NDF_U8;
  case SBYTE_IMG:
  case SHORT_IMG: return NDF_I16;
  case USHORT_IMG: return NDF_U16;
  case FLOAT_IMG: return NDF_F32;
  case LONG_IMG:
  case ULONG_IMG:
  case LONGLONG_IMG:
  case ULONGLONG_IMG:
  case DOUBLE_IMG: return NDF_F64;
  }
  return 0;
}

/* cfitsio's datatype code for reading or writing samples of this *_IMG type. */
static int datatype_of(int type) {
  switch (type) {
  case BYTE_IMG: return TBYTE;
  case SBYTE_IMG: return TSBYTE;
  case SHORT_IMG: return TSHORT;
  case USHORT_IMG: return TUSHORT;
  case LONG_IMG: return TINT;
  case ULONG_IMG: return TUINT;
  case LONGLONG_IMG: return TLONGLONG;
  case ULONGLONG_IMG: return TULONGLONG;
  case FLOAT_IMG: return TFLOAT;
  case DOUBLE_IMG: return TDOUBLE;
  }
  return 0;
}

static const char *type_name(int type) {
  switch (type) {
  case BYTE_IMG: return "u8";
  case SBYTE_IMG: return "i8";
  case SHORT_IMG: return "i16";
  case USHORT_IMG: return "u16";
  case LONG_IMG: return "i32";
  case ULONG_IMG: return "u32";
  case LONGLONG_IMG: return "i64";
  case ULONGLONG_IMG: return "u64";
  case FLOAT_IMG: return "f32";
  case DOUBLE_IMG: return "f64";
  }
  return "?";
}

/* The image's sample type (*_IMG): BITPIX, with BZERO's conventions for unsigned integers
 * and signed bytes; f32 or f64 (*scaled set) for any other BSCALE or BZERO on integers.
 * (cfitsio's fits_get_img_equivtype is not used: it takes any integer BZERO as a wider
 * integer type, and misses the unsigned 64-bit convention.) */
static int sample_type(fitsfile *f, int bitpix, int *scaled) {
  *scaled = 0;
  if (bitpix < 0) return bitpix;
  double bscale = key_double(f, "BSCALE", 1), bzero = key_double(f, "BZERO", 0);
  if (bscale == 1) {
    if (bzero == 0) return bitpix;
    if (bitpix == 8 && bzero == -128) return SBYTE_IMG;
    if (bitpix == 16 && bzero == 32768) return USHORT_IMG;
    if (bitpix == 32 && bzero == 2147483648.0) return ULONG_IMG;
    if (bitpix == 64 && bzero == 9223372036854775808.0) return ULONGLONG_IMG;
  }
  *scaled = 1;
  return bitpix <= 16 ? FLOAT_IMG : DOUBLE_IMG;
}

/* cfitsio sizes a tile's buffer by its row's variable-length descriptor (element count and heap
 * offset) before reading it, so a corrupt descriptor asked it for gigabytes (fuzzing found a
 * 3.5 GB malloc from an 8640-byte file). A tile-compressed image's descriptors must lie in the
 * heap (PCOUNT bytes). */
static ndf_status check_heap(fitsfile *f, const char *path, char *err, size_t errlen) {
  int st = 0, ncols = 0;
  long long rows = 0, heap = 0;
  if (fits_get_num_rowsll(f, &rows, &st) || fits_get_num_cols(f, &ncols, &st) ||
      fits_read_key(f, TLONGLONG, "PCOUNT", &heap, NULL, &st))
    return fits_fail(err, errlen, NDF_EINVAL, path, "corrupt tile-compressed image", st);
  for (int c = 1; c <= ncols; c++) {
    int type = 0;
    long long repeat = 0, width = 0;
    if (fits_get_coltypell(f, c, &type, &repeat, &width, &st))
      return fits_fail(err, errlen, NDF_EINVAL, path, "corrupt tile-compressed image", st);
    if (type >= 0) continue; /* not a variable-length column */
    const int t = abs(type);
    const long long size = t == TSHORT                                       ? 2
                           : t == TLONG || t == TFLOAT || t == TINT32BIT     ? 4
                           : t == TDOUBLE || t == TLONGLONG || t == TCOMPLEX ? 8
                           : t == TDBLCOMPLEX                                ? 16
                                                                             : 1;
    for (long long row = 1; row <= rows; row++) {
      long long n = 0, off = 0;
      if (fits_read_descriptll(f, c, row, &n, &off, &st))
        return fits_fail(err, errlen, NDF_EINVAL, path, "corrupt tile-compressed image", st);
      if (n < 0 || off < 0 || off > heap || n > (heap - off) / size)
        return ndf_io_error(err, errlen, NDF_EINVAL, path,
                            "corrupt tile-compressed image: tile %lld claims %lld elements at "
                            "heap offset %lld of a %lld-byte heap",
                            row, n, off, heap);
    }
  }
  return NDF_OK;
}

/* 1 if a Rice stream of npix pixels of w bytes (1, 2 or 4) in blocks of block pixels ends within
 * its n bytes q. cfitsio's decoder reads a byte only when it needs one of its bits, so the stream
 * fits when its bits do. */
static int rice_fits(const unsigned char *q, long long n, long long npix, int w, int block) {
  const int fsbits = w == 1 ? 3 : w == 2 ? 4 : 5, fsmax = w == 1 ? 6 : w == 2 ? 14 : 25;
  long long bit = 8ll * w, end = 8 * n; /* the first pixel is raw */
  for (long long i = 0; i < npix; i += block) {
    if (bit + fsbits > end) return 0;
    long long at = bit >> 3;
    unsigned win = (unsigned)q[at] << 8 | (at + 1 < n ? q[at + 1] : 0);
    int fs = (int)(win >> (16 - (bit & 7) - fsbits) & ((1u << fsbits) - 1)) - 1;
    long long m = npix - i < block ? npix - i : block;
    bit += fsbits;
    if (fs == fsmax) { /* raw pixels */
      bit += m * 8 * w;
    } else if (fs >= 0) { /* each pixel: zero bits up to a 1, then fs bits */
      for (long long j = 0; j < m && bit <= end; j++) {
        while (bit < end && !(q[bit >> 3] << (bit & 7) & 0x80))
          bit += (bit & 7) == 0 && q[bit >> 3] == 0 ? 8 : 1;
        bit += 1 + fs;
      }
    } /* fs < 0: every pixel equals the last, nothing more */
    if (bit > end) return 0;
  }
  return 1;
}

/* cfitsio 4.2's Rice decoder (fits_rdecomp and its _short and _byte twins) looks for the end of a
 * tile's bytes only after each block of pixels, and a pixel's run of zero bits goes on while the
 * bytes are zero, so a corrupt tile had it read far past its buffer (fuzzing found a SEGV). So
 * each tile of a RICE_1 image is walked here first, as that decoder consumes it, decoding
 * nothing: the first pixel raw (BYTEPIX bytes); then per block of BLOCKSIZE pixels a code of 3,
 * 4 or 5 bits (BYTEPIX 1, 2, 4): 0 when every pixel equals the last, 7, 15 or 26 for raw
 * pixels of 8, 16 or 32 bits, else k + 1 for pixels of zero bits ended by a 1 and k bits more.
 * BLOCKSIZE, BYTEPIX (any but 1 and 2 is 4, whatever ZBITPIX is) and the tiles are those
 * cfitsio read (see check_headers): ZTILEn over ZNAXISn, smaller at the far edges, row 1 + the
 * tile's index with ZNAXIS1 fastest. A tile without COMPRESSED_DATA is read from other
 * columns. */
static ndf_status check_rice(fitsfile *f, const char *path, char *err, size_t errlen) {
  const FITSfile *ff = f->Fptr;
  if (ff->compress_type != RICE_1) return NDF_OK;
  const int w = ff->rice_bytepix == 1 || ff->rice_bytepix == 2 ? ff->rice_bytepix : 4;
  if (ff->rice_blocksize < 1)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "corrupt tile-compressed image: Rice BLOCKSIZE = %d", ff->rice_blocksize);
  for (int d = 0; d < ff->zndim; d++)
    if (ff->znaxis[d] < 1 || ff->tilesize[d] < 1) return NDF_OK; /* check_headers refuses these */
  int st = 0;
  long long rows = 0, cap = 0;
  unsigned char *q = NULL, zero = 0;
  ndf_status s = NDF_OK;
  fits_get_num_rowsll(f, &rows, &st);
  for (long long row = 1; row <= rows && !st && s == NDF_OK; row++) {
    long long npix = 1, r = row - 1, n = 0, off = 0;
    for (int d = 0; d < ff->zndim; d++) {
      long long z = ff->znaxis[d], t = ff->tilesize[d], k = r % ((z - 1) / t + 1);
      r /= (z - 1) / t + 1;
      npix *= z - k * t < t ? z - k * t : t;
    }
    if (fits_read_descriptll(f, ff->cn_compressed, row, &n, &off, &st) || n == 0) continue;
    if (n > ff->logfilesize) {
      s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                       "corrupt tile-compressed image: tile %lld claims %lld bytes of a %lld-byte "
                       "file",
                       row, n, (long long)ff->logfilesize);
      break;
    }
    if (n > cap) {
      unsigned char *p = realloc(q, (size_t)n);
      if (!p) {
        s = ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory (%lld bytes)", n);
        break;
      }
      q = p;
      cap = n;
    }
    if (!fits_read_col(f, TBYTE, ff->cn_compressed, row, 1, n, &zero, q, NULL, &st) &&
        !rice_fits(q, n, npix, w, ff->rice_blocksize))
      s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                       "corrupt tile-compressed image: tile %lld's Rice stream runs past its %lld "
                       "bytes",
                       row, n);
  }
  free(q);
  if (st) return fits_fail(err, errlen, NDF_EINVAL, path, "corrupt tile-compressed image", st);
  return s;
}

/* Reads the current image HDU of f into img. */
static ndf_status read_image(fitsfile *f, const char *path, ndf_image *img, char *err,
                             size_t errlen) {
  enum { MAXAXES = 999 };
  LONGLONG nx[MAXAXES] = {0};
  int bitpix = 0, naxis = 0, eq = 0, st = 0;
  if (fits_get_img_paramll(f, MAXAXES, &bitpix, &naxis, nx, &st))
    return fits_fail(err, errlen, NDF_EINVAL, path, "corrupt image header", st);
  int hdu = 0;
  fits_get_hdu_num(f, &hdu);
  if (naxis <= 0)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path, "HDU %d holds no image (NAXIS = 0)",
                        hdu - 1);
  int nd = naxis < NDF_MAX_DIMS ? naxis : NDF_MAX_DIMS;
  for (int i = 0; i < naxis; i++) {
    if (nx[i] <= 0)
      return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path, "empty image: NAXIS%d = %lld", i + 1,
                          (long long)nx[i]);
    if (i >= NDF_MAX_DIMS && nx[i] != 1)
      return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                          "%d axes (NAXIS%d = %lld): ndfilt holds at most %d, and axes beyond "
                          "them must have length 1",
                          naxis, i + 1, (long long)nx[i], NDF_MAX_DIMS);
  }
  int scaled = 0;
  eq = sample_type(f, bitpix, &scaled);
  ndf_dtype dt = dtype_of(eq);
  if (!dt)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path, "unsupported BITPIX %d", bitpix);
  /* the sample count, and the bytes the file and the array need, without overflow */
  int64_t shape[NDF_MAX_DIMS], n = 1;
  const int64_t limit = INT64_MAX / 8;
  for (int d = 0; d < nd; d++) {
    shape[d] = (int64_t)nx[nd - 1 - d];
    if (shape[d] > limit / n)
      return ndf_io_error(err, errlen, NDF_EINVAL, path, "image size overflows (%d axes)", nd);
    n *= shape[d];
  }
  int compressed = fits_is_compressed_image(f, &st);
  long long need = n * (long long)(abs(bitpix) / 8), have = f->Fptr->logfilesize;
  if (!compressed) {
    LONGLONG head = 0, start = 0, end = 0;
    if (fits_get_hduaddrll(f, &head, &start, &end, &st))
      return fits_fail(err, errlen, NDF_EINVAL, path, "corrupt header", st);
    if (have - start < need)
      return ndf_io_error(err, errlen, NDF_EINVAL, path, "truncated: %lld of %lld data bytes",
                          have > start ? have - start : 0LL, need);
  } else {
    ndf_status hs = check_heap(f, path, err, errlen);
    if (hs == NDF_OK) hs = check_rice(f, path, err, errlen);
    if (hs != NDF_OK) return hs;
  }
  if (compressed && need > (64ll << 20) && need / 4096 > have) {
    /* tile compression does not shrink data 4096 times: a corrupt header */
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "corrupt compressed image: %lld bytes of pixels from a %lld-byte file",
                        need, have);
  }
  fits_meta *m = calloc(1, sizeof *m);
  size_t es = ndf_dtype_size(dt);
  void *data = m ? malloc((size_t)n * es) : NULL;
  if (!data) {
    meta_free(m);
    return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory (%lld samples)",
                        (long long)n);
  }
  m->type = eq;
  m->dtype = dt;
  ndf_status s = read_cards(f, m, bitpix > 0 && !scaled, compressed, path, err, errlen);
  if (s != NDF_OK) {
    free(data);
    meta_free(m);
    return s;
  }
  LONGLONG first[MAXAXES];
  for (int i = 0; i < naxis; i++)
    first[i] = 1;
  int anynul = 0, wide64 = eq == LONGLONG_IMG || eq == ULONGLONG_IMG;
  /* scaled integers: BLANK -> NaN; others: no null checks, so stored values stay */
  double dnan = NAN;
  float fnan = NAN;
  void *nulval = !scaled ? NULL : eq == FLOAT_IMG ? (void *)&fnan : (void *)&dnan;
  /* signed bytes arrive as shorts, 32-bit integers as doubles (exactly) */
  int datatype = eq == SBYTE_IMG                     ? TSHORT
                 : eq == LONG_IMG || eq == ULONG_IMG ? TDOUBLE
                                                     : datatype_of(eq);
  if (fits_read_pixll(f, datatype, first, (LONGLONG)n, nulval, data, &anynul, &st)) {
    free(data);
    meta_free(m);
    return fits_fail(err, errlen, NDF_EINVAL, path,
                     st == END_OF_FILE || st == READ_ERROR ? "truncated data" : "corrupt data", st);
  }
  if (wide64) { /* 64-bit integers become doubles only where exact */
    for (int64_t i = 0; i < n; i++) {
      double v;
      if (eq == LONGLONG_IMG) {
        int64_t x;
        memcpy(&x, (char *)data + 8 * i, 8);
        v = (double)x;
        if (x > (1ll << 53) || x < -(1ll << 53)) v = NAN;
      } else {
        uint64_t x;
        memcpy(&x, (char *)data + 8 * i, 8);
        v = x > (1ull << 53) ? NAN : (double)x;
      }
      if (isnan(v)) {
        free(data);
        meta_free(m);
        return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                            "%s samples beyond 2^53 (sample %lld) cannot be held exactly as "
                            "f64",
                            type_name(eq), (long long)i);
      }
      memcpy((char *)data + 8 * i, &v, 8);
    }
  }
  img->a = ndf_array_contiguous(dt, nd, shape, data);
  img->format = NDF_FORMAT_FITS;
  img->channel_axis = -1;
  for (int d = 0; d < nd; d++)
    img->spacing[d] = axis_spacing(f, nd - d);
  img->meta = m;
  img->meta_free = meta_free;
  return NDF_OK;
}

ndf_status ndf__fits_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                          size_t errlen) {
  (void)o;
  fitsfile *f = NULL;
  ndf_status s = open_image(path, &f, err, errlen);
  if (s != NDF_OK) return s;
  ndf_image t;
  ndf_image_init(&t);
  s = read_image(f, path, &t, err, errlen);
  int st = close_fits(f);
  if (st && s == NDF_OK) s = fits_fail(err, errlen, NDF_EIO, path, "cannot close the file", st);
  fits_clear_errmsg();
  if (s == NDF_OK)
    *img = t;
  else
    ndf_image_free(&t);
  return s;
}

/* ---- writing ---- */

static int default_type(ndf_dtype t) {
  switch (t) {
  case NDF_U8: return BYTE_IMG;
  case NDF_U16: return USHORT_IMG;
  case NDF_I16: return SHORT_IMG;
  case NDF_F32: return FLOAT_IMG;
  case NDF_F64: return DOUBLE_IMG;
  }
  return 0;
}

typedef struct {
  const char *path;      /* the user's name, for messages */
  const ndf_image *img;  /* shape and spacing */
  const fits_meta *meta; /* NULL: not from a FITS file */
  int type;              /* *_IMG to write */
  const void *data;      /* samples in type's C type, C order */
  int gz, fz;
} wctx;

static ndf_status write_fits(fitsfile *f, const wctx *c, LONGLONG *end, char *err, size_t errlen) {
  const ndf_array *a = &c->img->a;
  int st = 0, nd = a->ndim;
  if (c->fz) {
    int isfloat = c->type == FLOAT_IMG || c->type == DOUBLE_IMG;
    int wide = isfloat || c->type == LONGLONG_IMG || c->type == ULONGLONG_IMG;
    fits_set_compression_type(f, wide ? GZIP_2 : RICE_1, &st);
    if (isfloat) fits_set_quantize_level(f, 0, &st); /* lossless */
  }
  LONGLONG nx[NDF_MAX_DIMS], first[NDF_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    nx[i] = a->shape[nd - 1 - i];
    first[i] = 1;
  }
  fits_create_imgll(f, c->type, nd, nx, &st);
  if (c->meta) {
    /* the cards come with their own comments: not cfitsio's on the FITS standard too */
    int nk = 0, more = 0;
    fits_get_hdrspace(f, &nk, &more, &st);
    for (int i = nk; i >= 1 && !st; i--) {
      char card[FLEN_CARD];
      if (!fits_read_record(f, i, card, &st) && !strncmp(card, "COMMENT ", 8))
        fits_delete_record(f, i, &st);
    }
    /* a keyword cfitsio wrote already (EXTNAME of a compressed HDU) is replaced, once;
     * repeated keywords of the file are all kept */
    enum { MAXOWN = 64 };
    char own[MAXOWN][9];
    int nown = 0;
    fits_get_hdrspace(f, &nk, &more, &st);
    for (int i = 1; i <= nk && nown < MAXOWN && !st; i++) {
      char card[FLEN_CARD];
      fits_read_record(f, i, card, &st);
      snprintf(own[nown++], 9, "%.*s", (int)strcspn(card, " ="), card);
    }
    for (int i = 0; i < c->meta->ncards && !st; i++) {
      const char *card = c->meta->cards[i];
      if (is_key(card, "BLANK") && c->type != c->meta->type) continue;
      int j = 0;
      while (j < nown && !(own[j][0] && is_key(card, own[j]) && card[8] == '='))
        j++;
      if (j < nown) {
        fits_update_card(f, own[j], card, &st);
        own[j][0] = 0;
      } else {
        fits_write_record(f, card, &st);
      }
    }
  } else {
    for (int i = 1; i <= nd && !st; i++) {
      double sp = c->img->spacing[nd - i];
      if (!(sp > 0) || !isfinite(sp)) continue;
      char key[FLEN_KEYWORD];
      snprintf(key, sizeof key, "CDELT%d", i);
      fits_write_key_dbl(f, key, sp, -15, "pixel spacing", &st);
      snprintf(key, sizeof key, "CUNIT%d", i);
      fits_write_key_str(f, key, "mm", "unit of CDELT", &st);
    }
  }
  fits_write_pixll(f, datatype_of(c->type), first, (LONGLONG)ndf_array_size(a), (void *)c->data,
                   &st);
  if (c->meta && c->meta->checksum) fits_write_chksum(f, &st);
  /* the file's size, for a file in memory (whose buffer may be larger) */
  LONGLONG head = 0, start = 0;
  if (end) fits_get_hduaddrll(f, &head, &start, end, &st);
  if (st) return fits_fail(err, errlen, NDF_EIO, c->path, "cannot write", st);
  return NDF_OK;
}

/* Writes the finished file in memory to tmp through zlib. */
static ndf_status write_gz(const char *tmp, const char *path, const void *p, size_t n, char *err,
                           size_t errlen) {
  gzFile g = gzopen(tmp, "wb");
  if (!g) return ndf_io_error(err, errlen, NDF_EIO, path, "cannot create: %s", strerror(errno));
  int bad = 0;
  for (size_t off = 0; off < n && !bad;) {
    unsigned k = n - off > (1u << 30) ? 1u << 30 : (unsigned)(n - off);
    bad = gzwrite(g, (const char *)p + off, k) != (int)k;
    off += k;
  }
  bad |= gzclose(g) != Z_OK;
  return bad ? ndf_io_error(err, errlen, NDF_EIO, path, "gzip write failed") : NDF_OK;
}

static ndf_status write_tmp(const char *tmp, void *ctx, char *err, size_t errlen) {
  const wctx *c = ctx;
  fitsfile *f = NULL;
  int st = 0;
  void *mem = NULL;
  size_t memsize = 0;
  /* disk files by their literal name (no extended syntax: the directory may hold brackets),
   * created anew: ndf_io_write_via_temp removed its placeholder, so no '!' is needed */
  if (c->gz)
    fits_create_memfile(&f, &mem, &memsize, 2880 * 16, realloc, &st);
  else
    fits_create_diskfile(&f, tmp, &st);
  if (st) {
    ndf_status s = fits_fail(err, errlen, NDF_EIO, c->path, "cannot create the file", st);
    free(mem);
    return s;
  }
  LONGLONG end = 0;
  ndf_status s = write_fits(f, c, c->gz ? &end : NULL, err, errlen);
  st = close_fits(f);
  if (s == NDF_OK && st) s = fits_fail(err, errlen, NDF_EIO, c->path, "cannot finish writing", st);
  fits_clear_errmsg();
  if (s == NDF_OK && c->gz) {
    if (end <= 0 || (size_t)end > memsize)
      s = ndf_io_error(err, errlen, NDF_EIO, c->path,
                       "cannot write: the file in memory has %zu bytes, its image ends at %lld",
                       memsize, (long long)end);
    else
      s = write_gz(tmp, c->path, mem, (size_t)end, err, errlen);
  }
  free(mem);
  return s;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcasecmp(s + n - k, suffix);
}

/* The sample type of an exact widening's *_IMG type, written back rounded and clamped; -1
 * for the types of the array dtypes. */
static int widened_type(int type) {
  switch (type) {
  case SBYTE_IMG: return NDF_IO_I8;
  case LONG_IMG: return NDF_IO_I32;
  case ULONG_IMG: return NDF_IO_U32;
  case LONGLONG_IMG: return NDF_IO_I64;
  case ULONGLONG_IMG: return NDF_IO_U64;
  }
  return -1;
}

/* The array's samples as C type of the *_IMG type (rounded and clamped for the exact
 * widenings written back), C order; *buf is what to free. */
static ndf_status convert(const ndf_array *a, int type, const void **out, void **buf) {
  int64_t n = ndf_array_size(a);
  int contiguous = ndf__is_contiguous(a);
  *buf = NULL;
  if (type == default_type(a->dtype) && contiguous) {
    *out = a->data;
    return NDF_OK;
  }
  size_t es = type == SBYTE_IMG                               ? 1
              : type == LONG_IMG || type == ULONG_IMG         ? 4
              : type == LONGLONG_IMG || type == ULONGLONG_IMG ? 8
                                                              : ndf_dtype_size(a->dtype);
  char *b = malloc((size_t)n * es);
  if (!b) return NDF_ENOMEM;
  const int t = widened_type(type);
  for (int64_t i = 0; i < n; i++) {
    int64_t off = ndf__offset(a, i);
    if (t >= 0)
      ndf_io_store((ndf_io_type)t, b, i, ndf__load(a->dtype, a->data, off));
    else
      memcpy(b + (size_t)i * es, (const char *)a->data + off * (int64_t)es, es);
  }
  *out = b;
  *buf = b;
  return NDF_OK;
}

ndf_status ndf__fits_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  const ndf_array *a = &img->a;
  if (a->ndim < 1 || a->ndim > NDF_MAX_DIMS || !default_type(a->dtype))
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "not a valid array (ndim %d, dtype %d)",
                        a->ndim, (int)a->dtype);
  if (ends_with(path, "]"))
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "an HDU selection ([...]) names something to read; write a plain .fits "
                        "name");
  int fz = ends_with(path, ".fz");
  if (fz && a->ndim > 3)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "tile compression (.fz) holds at most 3 axes, not %d; write .fits or "
                        ".fits.gz",
                        a->ndim);
  wctx c = {path,
            img,
            ndf_io_meta(img, NDF_FORMAT_FITS),
            default_type(a->dtype),
            NULL,
            ends_with(path, ".gz"),
            ends_with(path, ".fz")};
  if (c.meta) {
    if (c.meta->dtype == a->dtype && dtype_of(c.meta->type) == a->dtype) c.type = c.meta->type;
    /* cfitsio compresses no 64-bit integers: their exact f64 values go instead */
    if (fz && (c.type == LONGLONG_IMG || c.type == ULONGLONG_IMG)) c.type = DOUBLE_IMG;
  }
  void *buf = NULL;
  if (convert(a, c.type, &c.data, &buf) != NDF_OK)
    return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  ndf_status s = ndf_io_write_via_temp(path, write_tmp, &c, err, errlen);
  free(buf);
  return s;
}
