/* SPDX-License-Identifier: BSD-3-Clause */
/* fits.c - FITS images over cfitsio: read an image HDU, write it back in its file's company.
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
 * CHECKSUM/DATASUM when the file had them. The metadata also names the file and the HDU's
 * number in it, where cfitsio read the file itself (no image section or filter in the name).
 *
 * Spacing: FITS pixels are usually angles, so an axis's spacing is 0 unless its CUNITi is a
 * length (m, cm, mm, um, nm); then it is the length of the pixel's step along the axis, from
 * column i of the CD matrix or else of CDELT * PC (|CDi_i| or |CDELTi * PCi_i| when they are
 * diagonal), in mm, over the world axes that are lengths; NaN where that is zero or not a
 * number. A time axis (CTYPEi TIME, UTC, TAI, ...) is the image's time_axis. A writer given
 * an image from another format with known spacing writes CDELTi and CUNITi = 'mm' for those
 * axes.
 *
 * Writing an image read from a FITS file writes that file again with the image in place of
 * the HDU read: the other HDUs (primary header, ERR and DQ images, tables) are copied from the
 * file as they are, so it must still be there, unchanged since it was read. The image's own
 * HDU takes its cards; its CRPIXn (and CRPIXna, LTVn) move with the image's origin, so that
 * each voxel keeps its world coordinates.
 *
 * Compression: .gz names are gzipped as a whole (the file is made in memory, then
 * compressed). The image HDU is tile-compressed where it was (with the same algorithm) and
 * for .fz names (RICE_1 for 8 to 32-bit integers, GZIP_2 otherwise), always losslessly:
 * floats are not quantized, which only GZIP_1 and GZIP_2 can do, so they take GZIP_2 where
 * the HDU had another; PLIO_1 holds integers 0 to 2^24 only, so others take RICE_1; HCOMPRESS_1
 * at scale 0. cfitsio compresses 1 to 3 axes only and no 64-bit integers (written as their
 * exact f64); a .fz file's primary HDU is empty, so an image read from a primary HDU moves
 * to the first extension there.
 *
 * Hostile files: cfitsio 4.2 crashes on some corrupt headers and tiles, so before it reads a file
 * the headers it will parse are checked here (check_headers), and before it decompresses an
 * image the tiles' descriptors and Rice streams (check_heap, check_rice); zip, compress and
 * pack files are refused. cfitsio inflates a gzipped file whole, into memory, without checking
 * the gzip trailer (a file missing its CRC reads as whole), so the stream is first read here to
 * its end (check_gzip): zlib checks its CRC and length, and its size is held to the read
 * limit. The files opened here are regular files only (ndf_io_open_regular). */
#define _DEFAULT_SOURCE /* realpath */
#include <ctype.h>
#include <errno.h>
#include <fitsio.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "convert.h"
#include "core/elem.h"
#include "formats.h"

typedef char card_t[FLEN_CARD];

/* What tells a file from its replacement or an edit of it. */
typedef struct file_id {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
} file_id;

static file_id id_of(const struct stat *sb) {
  return (file_id){sb->st_dev, sb->st_ino, sb->st_size, sb->st_mtim};
}

static int same_file(const file_id *a, const file_id *b) {
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

enum { ZMAX = 3 }; /* the axes cfitsio tile-compresses */

typedef struct fits_meta {
  int type;        /* the file's equivalent sample type (cfitsio's *_IMG) */
  ndf_dtype dtype; /* the dtype the reader made of it */
  int checksum;    /* the HDU had CHECKSUM or DATASUM */
  int ncards;
  card_t *cards; /* non-structural cards in order; BLANK only for an unscaled integer image */
  /* The file read (NULL where cfitsio read a section or filtered copy of it), the HDU's
   * number in it (1: primary) and the file's identity then: the writer copies its other
   * HDUs around the image. */
  char *src;
  int hdu;
  file_id id;
  /* A tile-compressed HDU: zcmp its algorithm (RICE_1, GZIP_1, ...; 0 if another), its
   * NAXISn and ZTILEn (FITS order, zdim of them). */
  int compressed, zcmp, zdim;
  long long znaxis[ZMAX];
  long ztile[ZMAX];
} fits_meta;

static void meta_free(void *p) {
  fits_meta *m = p;
  if (m) {
    free(m->cards);
    free(m->src);
  }
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
  /* the required keywords too: cfitsio finds a keyword by name from where it last read, so
   * it may read a repeated one */
  static const char *const ints[] = {"BLANK",   "EXTVER", "EXTLEVEL", "THEAP",
                                     "ZBITPIX", "ZNAXIS", "ZBLANK",   "BITPIX",
                                     "NAXIS",   "PCOUNT", "GCOUNT",   "TFIELDS"};
  static const char *const reals[] = {"BSCALE", "BZERO", "ZSCALE", "ZZERO"};
  static const char *const roots[] = {"ZNAXIS", "ZTILE", "ZVAL", "NAXIS"};
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

/* The bit of a tile compression keyword whose repetition check_headers refuses, or -1 (ZNAMEn
 * may repeat: the Rice parameters are checked by their ZVALn, whatever the names say). */
static int zkey_bit(const char *key) {
  static const char *const once[] = {"ZIMAGE",  "ZCMPTYPE", "ZBITPIX",  "ZNAXIS",
                                     "ZSIMPLE", "ZTENSION", "ZQUANTIZ", "ZDITHER0"};
  int n;
  for (int i = 0; i < (int)(sizeof once / sizeof once[0]); i++)
    if (!strcmp(key, once[i])) return i;
  if ((n = indexed(key, "ZNAXIS", 9))) return 8 + n;
  if ((n = indexed(key, "ZTILE", 9))) return 17 + n;
  if ((n = indexed(key, "ZVAL", 9))) return 26 + n;
  return -1;
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
 * ttype_overflows), 0 < ZTILEn <= ZNAXISn (an HCOMPRESS_1 tile may overhang, its buffer within the
 * read limit), and a RICE_1 image's BLOCKSIZE 16 or 32 and BYTEPIX 1, 2
 * or 4 as cfitsio takes them: ZVAL1 and ZVAL2 (BYTEPIX 4 without), whatever ZNAMEn say, swapped
 * when ZVAL1 < 16 and ZVAL2 > 8. The walk stops where it cannot follow the file (cfitsio then says
 * what is wrong), and after a primary HDU with data unless all (an HDU chosen by name, or every
 * HDU copied by the writer). g: the file from its start (plain or gzipped). */
static ndf_status check_headers(gzFile g, const char *path, int all, char *err, size_t errlen) {
  enum { BLOCK = 2880, MAXDIM = 999, ZDIM = 6 };
  long long naxes[MAXDIM + 1];
  char blk[BLOCK];
  ndf_status s = NDF_OK;
  for (int hdu = 0; s == NDF_OK; hdu++) {
    long long bitpix = 0, naxis = 0, pcount = 0, gcount = 1, tfields = 0;
    long long znaxis = 0, zn[ZDIM + 1] = {0}, zt[ZDIM + 1] = {0}, zval[3] = {0};
    int zimage = 0, groups = 0, tiled = 0, table = 0, bintable = 0, ended = 0, rice = 0, zset = 0,
        hcomp = 0;
    unsigned long long zimage_keys = 0; /* the compression keywords seen (zkey_bit) */
    memset(naxes, 0, sizeof naxes);
    for (int pos = 0; !ended; pos++) {
      if (pos % (BLOCK / 80) == 0 && gzread(g, blk, BLOCK) != BLOCK) goto done;
      char card[FLEN_CARD], key[9], buf[24];
      memcpy(card, blk + 80 * (pos % (BLOCK / 80)), 80);
      card[80] = 0;
      snprintf(key, sizeof key, "%.*s", (int)strcspn(card, " ="), card);
      for (char *p = key; *p; p++) /* cfitsio finds keywords, and reads ZCMPTYPE, in any case */
        *p = (char)toupper((unsigned char)*p);
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
      /* cfitsio looks a keyword up from the card it read last, so of a repeated one it may
       * read any (a ZTILE1 = 0 after a good one is the 0 it divides by): the compression's
       * keywords must each appear once */
      const int zbit = zkey_bit(key);
      if (zbit >= 0 && zimage_keys >> zbit & 1) {
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "corrupt header in HDU %d: %s appears more than once", hdu, key);
        goto done;
      }
      if (zbit >= 0) zimage_keys |= 1ull << zbit;
      if (!strcmp(key, "ZNAXIS")) card_int(card, &znaxis);
      if ((n = indexed(key, "ZNAXIS", ZDIM))) card_int(card, &zn[n]);
      if ((n = indexed(key, "ZTILE", ZDIM)) && card_int(card, &zt[n])) tiled |= 1 << n;
      if ((n = indexed(key, "ZVAL", 2)) && !(zset & 1 << n) && card_int(card, &zval[n]))
        zset |= 1 << n; /* cfitsio reads the first */
      if (!strcmp(key, "ZCMPTYPE")) {
        for (char *p = card; *p; p++)
          *p = (char)toupper((unsigned char)*p);
        rice |= strstr(card, "'RICE_1") || strstr(card, "'RICE_ONE");
        hcomp |= strstr(card, "'HCOMPRESS_1") != NULL;
      }
    }
    long long cells = 1; /* the pixels of a tile, as cfitsio sizes its buffers */
    for (int i = 1; hdu > 0 && zimage && i <= znaxis && i <= ZDIM && s == NDF_OK; i++) {
      long long tile = tiled & 1 << i ? zt[i] : i == 1 ? zn[1] : 1;
      /* astropy's HCOMPRESS_1 tiles of images up to 30 rows are ZNAXIS1 rows high */
      const long long most = hcomp ? 1ll << 31 : zn[i];
      if (zn[i] <= 0 || tile <= 0 || tile > most)
        s = ndf_io_error(err, errlen, NDF_EINVAL, path,
                         "corrupt tile-compressed image in HDU %d: ZNAXIS%d = %lld, ZTILE%d = %lld",
                         hdu, i, zn[i], i, tile);
      else
        cells = cells > (1ll << 40) / tile ? 1ll << 40 : cells * tile;
    }
    if (hdu > 0 && zimage && hcomp && s == NDF_OK)
      s = ndf_io_check_alloc(path, cells, 8, err, errlen);
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
  fits_clear_errmsg(); /* fits_parse_value's */
  return s;
}

/* The size cfitsio allocates to inflate a gzip file of size bytes into: what its last 4 bytes
 * claim, plus 4 GiB until that is at least size where size > 10000. */
static long long gzip_claim(int fd, int64_t size) {
  unsigned char b[4];
  if (pread(fd, b, 4, size - 4) != 4) return -1;
  long long claim =
      (long long)b[0] | (long long)b[1] << 8 | (long long)b[2] << 16 | (long long)b[3] << 24;
  while (size > 10000 && claim < size)
    claim += 1ll << 32;
  return claim;
}

/* Reads the rest of a gzip stream, so that zlib checks its trailer (the CRC of the data and
 * their length), and holds the file's inflated size, and what cfitsio allocates for it (see
 * gzip_claim), to the read limit. A larger claim than deflate's greatest expansion (1032
 * times) is corrupt: data after the stream. */
static ndf_status check_gzip(gzFile g, int fd, int64_t size, const char *path, char *err,
                             size_t errlen) {
  ndf_status s = ndf_io_check_alloc(path, 0, 1, err, errlen); /* NDF_READ_LIMIT well formed */
  if (s != NDF_OK) return s;
  const int64_t limit = ndf_io_read_limit();
  enum { CHUNK = 1 << 16 };
  char *buf = malloc(CHUNK);
  if (!buf) return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  while (gzread(g, buf, CHUNK) > 0 && gztell(g) <= limit)
    ;
  free(buf);
  const long long claim = gzip_claim(fd, size);
  if (gztell(g) > limit || claim > limit)
    return ndf_io_error(err, errlen, NDF_ENOMEM, path,
                        "inflated, the file needs more than the read limit of %lld bytes (raise "
                        "it with --read-limit or NDF_READ_LIMIT)",
                        (long long)limit);
  int code;
  const char *msg = gzerror(g, &code), *colon = strstr(msg, ": ");
  if (colon) msg = colon + 2; /* zlib names the file "<fd:N>" */
  if (code == Z_BUF_ERROR)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "truncated gzip file: the stream ends before its CRC and length");
  if (code == Z_ERRNO)
    return ndf_io_error(err, errlen, NDF_EIO, path, "read failed: %s", strerror(errno));
  if (code == Z_MEM_ERROR) return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  if (!strcmp(msg, "incorrect data check"))
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "corrupt gzip file: the data do not match its CRC");
  if (!strcmp(msg, "incorrect length check"))
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "corrupt gzip file: it claims %lld bytes uncompressed, which its data "
                        "do not hold",
                        claim);
  if (code != Z_OK && code != Z_STREAM_END)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "corrupt gzip file (zlib: %s)", msg);
  if (claim < 0 || claim > 1032ll * size + 65536)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "corrupt gzip file: it claims %lld bytes uncompressed from %lld bytes",
                        claim, (long long)size);
  return NDF_OK;
}

/* Checks the file name (path in messages) before cfitsio reads it: a regular file, not zip,
 * compress or pack (cfitsio's decoders and size guesses for those are more than ndfilt needs
 * to trust), its headers (check_headers, all as there), and a gzip stream whole (check_gzip).
 * *id: the file's identity. */
static ndf_status check_file(const char *path, const char *name, int all, file_id *id, char *err,
                             size_t errlen) {
  int fd;
  int64_t size = 0;
  ndf_status s = ndf_io_open_regular(name, &fd, &size, err, errlen);
  if (s != NDF_OK) return s;
  struct stat sb;
  if (fstat(fd, &sb) == 0) *id = id_of(&sb);
  unsigned char b[2] = {0};
  int gz = 0, other = 0;
  if (pread(fd, b, 2, 0) == 2) {
    gz = b[0] == 0x1f && b[1] == 0x8b;
    other = (b[0] == 'P' && b[1] == 'K') ||
            (b[0] == 0x1f && (b[1] == 0x1e || b[1] == 0x9d || b[1] == 0xa0));
  }
  if (other || (gz && size < 18)) {
    close(fd);
    return other ? ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                                "zip, compress or pack files are not read; decompress it, or "
                                "gzip it")
                 : ndf_io_error(err, errlen, NDF_EINVAL, path, "truncated gzip file (%lld bytes)",
                                (long long)size);
  }
  gzFile g = gzdopen(fd, "rb");
  if (!g) {
    close(fd);
    return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  }
  s = check_headers(g, path, all, err, errlen);
  if (s == NDF_OK && gz) s = check_gzip(g, fd, size, path, err, errlen);
  gzclose_r(g);
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

/* 1 if an HDU selection ("[...]" at the end of a name) only names an HDU: a number, or
 * EXTNAME with optional EXTVER and XTENSION ("[SCI]", "[2]", "[SCI, 2, IMAGE]"), for which
 * cfitsio reads the file itself; sections and filters ("[1:100,1:50]", "[bin X]") make it
 * a copy in memory. */
static int hdu_only(const char *sel) {
  size_t n = strlen(sel);
  if (n < 3 || sel[0] != '[' || sel[n - 1] != ']') return 0;
  int parts = 0;
  for (const char *p = sel + 1; p < sel + n - 1; parts++) {
    const char *end = memchr(p, ',', (size_t)(sel + n - 1 - p));
    if (!end) end = sel + n - 1;
    while (p < end && *p == ' ')
      p++;
    const char *q = end;
    while (q > p && q[-1] == ' ')
      q--;
    if (q == p) return 0;
    for (; p < q; p++)
      if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-", *p))
        return 0;
    p = end + (*end == ',');
  }
  return parts >= 1 && parts <= 3;
}

/* Opens path at its image HDU: the file by its literal name when it exists (brackets and
 * parentheses are then part of the name), else through cfitsio's extended syntax. *src: the
 * file cfitsio read (malloc'd), where it read the file itself, else NULL; *id its identity. */
static ndf_status open_image(const char *path, fitsfile **out, char **src, file_id *id, char *err,
                             size_t errlen) {
  struct stat sb;
  fitsfile *f = NULL;
  int st = 0;
  const char *bracket = strchr(path, '[');
  char *file = NULL;
  *src = NULL;
  if (stat(path, &sb) == 0) {
    ndf_status s = check_file(path, path, 0, id, err, errlen);
    if (s != NDF_OK) return s;
    fits_open_diskfile(&f, path, READONLY, &st);
    int naxis = 0;
    if (!st && !fits_get_img_dim(f, &naxis, &st) && naxis == 0 && !first_image(f, &st) && !st) {
      close_fits(f);
      fits_clear_errmsg();
      return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                          "no image: the primary HDU is empty and no image extension follows");
    }
    file = strdup(path);
  } else if (bracket && bracket > path) {
    char *base = strndup(path, (size_t)(bracket - path));
    if (!base) return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
    ndf_status s = check_file(path, base, 1, id, err, errlen);
    if (s != NDF_OK) {
      free(base);
      return s;
    }
    fits_open_image(&f, path, READONLY, &st);
    if (hdu_only(bracket))
      file = base;
    else
      free(base);
  } else {
    return ndf_io_error(err, errlen, NDF_EIO, path, "%s", strerror(errno));
  }
  if (st) {
    free(file);
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
  /* by its full name, so that a writer in another directory finds it */
  char *full = file ? realpath(file, NULL) : NULL;
  if (full) {
    free(file);
    file = full;
  }
  *src = file;
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

/* A key's value in *v: 1 where it is a finite number, 0 where the key is absent, -1 where it
 * is something else. */
static int key_real(fitsfile *f, const char *key, double *v) {
  char card[FLEN_CARD];
  int st = 0, r = 1;
  if (fits_read_card(f, key, card, &st))
    r = 0;
  else if (fits_read_key(f, TDOUBLE, key, v, NULL, &st) || !isfinite(*v))
    r = -1;
  fits_clear_errmsg();
  return r;
}

/* A key's string value without trailing blanks; "" where absent. */
static void key_string(fitsfile *f, const char *key, char value[FLEN_VALUE]) {
  int st = 0;
  if (fits_read_key(f, TSTRING, key, value, NULL, &st)) value[0] = 0;
  fits_clear_errmsg();
  size_t k = strlen(value);
  while (k && value[k - 1] == ' ')
    value[--k] = 0;
}

/* mm per unit of world axis i (1-based): 0 where its CUNITi is not a length. */
static double axis_mm(fitsfile *f, int i) {
  char key[FLEN_KEYWORD], unit[FLEN_VALUE];
  snprintf(key, sizeof key, "CUNIT%d", i);
  key_string(f, key, unit);
  return unit_mm(unit);
}

/* The spacing in mm of FITS axis j of naxis (1-based): 0 unless CUNITj is a length; else the
 * length of a pixel's step along axis j in the world axes that are lengths, from column j of
 * the CD matrix where the header has any of it, else of CDELTi * PCi_j (CDELTi 1, PCi_j the
 * identity's where absent); NaN where that is 0 or a value is not a number. */
static double axis_spacing(fitsfile *f, int j, int naxis) {
  char key[FLEN_KEYWORD];
  double v, sum = 0;
  int cd = 0, bad = 0;
  if (axis_mm(f, j) == 0) return 0;
  for (int i = 1; i <= naxis && !cd; i++) {
    snprintf(key, sizeof key, "CD%d_%d", i, j);
    cd = key_real(f, key, &v) != 0;
  }
  for (int i = 1; i <= naxis; i++) {
    double mm = axis_mm(f, i), step = 0, cdelt = 1, pc = i == j;
    if (mm == 0) continue;
    int k;
    if (cd) {
      snprintf(key, sizeof key, "CD%d_%d", i, j);
      k = key_real(f, key, &step);
    } else {
      snprintf(key, sizeof key, "CDELT%d", i);
      k = key_real(f, key, &cdelt);
      snprintf(key, sizeof key, "PC%d_%d", i, j);
      k = k < 0 ? k : key_real(f, key, &pc);
      step = cdelt * pc;
    }
    bad |= k < 0;
    sum += step * mm * step * mm;
  }
  return bad || !(sum > 0) || !isfinite(sum) ? NAN : sqrt(sum);
}

/* 1 if FITS axis i is time: its CTYPEi one of the time scales of the FITS standard. */
static int axis_is_time(fitsfile *f, int i) {
  static const char *const scales[] = {"TIME", "TAI", "TT",  "TDT", "ET",  "IAT", "UT1",
                                       "UTC",  "GMT", "GPS", "TCG", "TCB", "TDB", "LOCAL"};
  char key[FLEN_KEYWORD], type[FLEN_VALUE];
  snprintf(key, sizeof key, "CTYPE%d", i);
  key_string(f, key, type);
  type[strcspn(type, "-")] = 0;
  for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++)
    if (!strcmp(type, scales[k])) return 1;
  return 0;
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

/* The tile compression of the current HDU, a compressed image of naxis axes nx, for the
 * writer. */
static void read_compression(fitsfile *f, int naxis, const LONGLONG *nx, fits_meta *m) {
  static const struct {
    const char *name;
    int code;
  } names[] = {{"RICE_1", RICE_1}, {"RICE_ONE", RICE_1}, {"GZIP_1", GZIP_1},
               {"GZIP_2", GZIP_2}, {"PLIO_1", PLIO_1},   {"HCOMPRESS_1", HCOMPRESS_1}};
  char type[FLEN_VALUE], key[FLEN_KEYWORD];
  m->compressed = 1;
  key_string(f, "ZCMPTYPE", type);
  for (char *p = type; *p; p++)
    *p = (char)toupper((unsigned char)*p);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(type, names[i].name)) m->zcmp = names[i].code;
  m->zdim = naxis <= ZMAX ? naxis : 0;
  for (int i = 0; i < m->zdim; i++) {
    double t = i == 0 ? (double)nx[0] : 1;
    snprintf(key, sizeof key, "ZTILE%d", i + 1);
    key_real(f, key, &t);
    m->znaxis[i] = nx[i];
    m->ztile[i] = !(t >= 1)           ? (i == 0 ? (long)nx[0] : 1)
                  : t < (double)nx[i] ? (long)t
                                      : (long)nx[i];
  }
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
  size_t es = ndf_dtype_size(dt);
  ndf_status s = ndf_io_check_alloc(path, n, es, err, errlen);
  if (s != NDF_OK) return s;
  fits_meta *m = calloc(1, sizeof *m);
  void *data = m ? malloc((size_t)n * es) : NULL;
  if (!data) {
    meta_free(m);
    return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory (%lld samples)",
                        (long long)n);
  }
  m->type = eq;
  m->dtype = dt;
  m->hdu = hdu;
  if (compressed) read_compression(f, naxis, nx, m);
  s = read_cards(f, m, bitpix > 0 && !scaled, compressed, path, err, errlen);
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
    img->spacing[d] = axis_spacing(f, nd - d, nd);
  for (int d = 0; d < nd && img->time_axis < 0; d++)
    if (axis_is_time(f, nd - d)) img->time_axis = d;
  img->meta = m;
  img->meta_free = meta_free;
  return NDF_OK;
}

ndf_status ndf__fits_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                          size_t errlen) {
  (void)o;
  fitsfile *f = NULL;
  char *src = NULL;
  file_id id = {0};
  ndf_status s = open_image(path, &f, &src, &id, err, errlen);
  if (s != NDF_OK) return s;
  ndf_image t;
  ndf_image_init(&t);
  s = read_image(f, path, &t, err, errlen);
  int st = close_fits(f);
  if (st && s == NDF_OK) s = fits_fail(err, errlen, NDF_EIO, path, "cannot close the file", st);
  fits_clear_errmsg();
  if (s == NDF_OK) {
    fits_meta *m = t.meta;
    m->src = src;
    m->id = id;
    *img = t;
  } else {
    free(src);
    ndf_image_free(&t);
  }
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
  const ndf_image *img;  /* shape, spacing and origin */
  const fits_meta *meta; /* NULL: not from a FITS file */
  int type;              /* *_IMG to write */
  const void *data;      /* samples in type's C type, C order */
  int gz;                /* gzip the whole file */
  int zcmp;              /* the image's tile compression (RICE_1, ...), or 0 */
} wctx;

/* The keyword of a card, up to 8 characters. */
static void card_key(const char *card, char name[9]) {
  snprintf(name, 9, "%.*s", (int)strcspn(card, " ="), card);
}

/* The FITS axis whose pixel coordinate a keyword holds, or 0: CRPIXn and an alternate WCS's
 * CRPIXna (the reference pixel), LTVn (IRAF's offset from physical to image pixels). */
static int pixel_axis(const char *name) {
  const char *p = !strncmp(name, "CRPIX", 5) ? name + 5
                  : !strncmp(name, "LTV", 3) ? name + 3
                                             : NULL;
  if (!p || *p < '1' || *p > '9') return 0;
  char *end;
  long n = strtol(p, &end, 10);
  int alt = name[0] == 'C' && *end >= 'A' && *end <= 'Z';
  return n <= 99 && !end[alt] ? (int)n : 0;
}

/* The world coordinate system a keyword belongs to: 1 for the primary one, 2 + k for the
 * alternate one lettered 'A' + k, 0 for none. */
static int wcs_of(const char *name) {
  static const char *const one[] = {"CTYPE", "CRVAL", "CDELT", "CRPIX", "CUNIT", "CROTA"};
  static const char *const two[] = {"CD", "PC", "PV", "PS"};
  const char *p = NULL;
  char *end;
  for (size_t i = 0; i < sizeof one / sizeof one[0] && !p; i++)
    if (!strncmp(name, one[i], 5) && name[5] >= '1' && name[5] <= '9') {
      strtol(name + 5, &end, 10);
      p = end;
    }
  for (size_t i = 0; i < sizeof two / sizeof two[0] && !p; i++)
    if (!strncmp(name, two[i], 2) && name[2] >= '1' && name[2] <= '9') {
      strtol(name + 2, &end, 10);
      if (end[0] != '_' || end[1] < '1' || end[1] > '9') return 0;
      strtol(end + 1, &end, 10);
      p = end;
    }
  if (!p && !strncmp(name, "WCSAXES", 7)) p = name + 7;
  if (!p) return 0;
  if (!*p) return 1;
  return *p >= 'A' && *p <= 'Z' && !p[1] ? 2 + (*p - 'A') : 0;
}

/* A card "name = v / comment" in the fixed format, v as the shortest decimal that reads back
 * as it, with a decimal point (a FITS real). */
static void real_card(card_t card, const char *name, double v, const char *comment) {
  char num[40];
  if (v == floor(v) && fabs(v) < 1e15) {
    snprintf(num, sizeof num, "%.1f", v);
  } else {
    for (int p = 1; p <= 17; p++) {
      snprintf(num, sizeof num, "%.*G", p, v);
      if (strtod(num, NULL) == v) break;
    }
    char *e = strchr(num, 'E');
    if (e && !strchr(num, '.')) {
      memmove(e + 1, e, strlen(e) + 1);
      *e = '.';
    }
  }
  snprintf(card, FLEN_CARD, "%-8s= %20s%s%s", name, num, comment[0] ? " / " : "", comment);
}

/* The card of a pixel coordinate moved by -o (its comment kept) into out: 1, or 0 where its
 * value is not a number. */
static int moved_card(const char *card, long long o, card_t out) {
  char c[FLEN_CARD], value[FLEN_VALUE], comment[FLEN_COMMENT] = "", name[9];
  int st = 0;
  snprintf(c, sizeof c, "%s", card);
  if (!card_number(c, value)) return 0;
  double v = strtod(value, NULL);
  fits_parse_value(c, value, comment, &st);
  fits_clear_errmsg();
  card_key(card, name);
  real_card(out, name, v - (double)o, comment);
  return 1;
}

/* origin[d] of the array axis of FITS axis n (1-based), 0 beyond the array's axes. */
static long long axis_origin(const wctx *c, int n) {
  const int nd = c->img->a.ndim;
  return n >= 1 && n <= nd ? (long long)c->img->origin[nd - n] : 0;
}

/* The pixel coordinates an image's header leaves to their default, 0, where it moves: CRPIXna
 * of each world coordinate system the cards describe, and LTVn where they have IRAF's LTM or
 * LTV; appended to the header, moved. */
static void add_moved_defaults(fitsfile *f, const wctx *c, int *st) {
  enum { NWCS = 28 };
  unsigned have[NWCS] = {0}, ltv = 0; /* per system, the axes with CRPIX; the axes with LTV */
  int wcs[NWCS] = {0}, iraf = 0;
  for (int i = 0; i < c->meta->ncards; i++) {
    char name[9];
    card_key(c->meta->cards[i], name);
    int w = wcs_of(name), n = pixel_axis(name);
    wcs[w] |= w > 0;
    if (!strncmp(name, "LTM", 3) || !strncmp(name, "LTV", 3)) iraf = 1;
    if (n && n <= NDF_MAX_DIMS && name[0] == 'C') have[w] |= 1u << n;
    if (n && n <= NDF_MAX_DIMS && name[0] == 'L') ltv |= 1u << n;
  }
  const int nd = c->img->a.ndim;
  for (int n = 1; n <= nd && !*st; n++) {
    long long o = axis_origin(c, n);
    if (!o) continue;
    card_t card;
    char name[FLEN_KEYWORD];
    for (int w = 1; w < NWCS && !*st; w++) {
      if (!wcs[w] || have[w] & 1u << n) continue;
      const char alt[2] = {w > 1 ? (char)('A' + w - 2) : 0, 0};
      snprintf(name, sizeof name, "CRPIX%d%s", n, alt);
      real_card(card, name, -(double)o, "pixel coordinate of the reference point");
      fits_write_record(f, card, st);
    }
    if (iraf && !(ltv & 1u << n)) {
      snprintf(name, sizeof name, "LTV%d", n);
      real_card(card, name, -(double)o, "offset of the image from physical pixels");
      fits_write_record(f, card, st);
    }
  }
}

/* The image's HDU: created after the file's current one (as the primary in an empty file; a
 * compressed image then after an empty primary), with the meta's cards. */
static ndf_status write_image(fitsfile *f, const wctx *c, char *err, size_t errlen) {
  const ndf_array *a = &c->img->a;
  int st = 0, nd = a->ndim;
  LONGLONG nx[NDF_MAX_DIMS], first[NDF_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    nx[i] = a->shape[nd - 1 - i];
    first[i] = 1;
  }
  if (c->zcmp) {
    fits_set_compression_type(f, c->zcmp, &st);
    if (c->type == FLOAT_IMG || c->type == DOUBLE_IMG) fits_set_quantize_level(f, 0, &st);
    if (c->zcmp == HCOMPRESS_1) fits_set_hcomp_scale(f, 0, &st);
    const fits_meta *m = c->meta;
    if (m && m->compressed && m->zdim == nd) {
      /* the file's tiles; one as long as its axis stays so (whole rows stay whole) */
      long t[ZMAX];
      for (int i = 0; i < nd; i++)
        t[i] = m->ztile[i] == m->znaxis[i] || m->ztile[i] > nx[i] ? (long)nx[i] : m->ztile[i];
      fits_set_tile_dim(f, nd, t, &st);
    }
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
      card_key(card, own[nown++]);
    }
    for (int i = 0; i < c->meta->ncards && !st; i++) {
      const char *card = c->meta->cards[i];
      if (is_key(card, "BLANK") && c->type != c->meta->type) continue;
      char name[9];
      card_key(card, name);
      card_t moved;
      long long o = axis_origin(c, pixel_axis(name));
      if (o && moved_card(card, o, moved)) card = moved;
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
    add_moved_defaults(f, c, &st);
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
  if (st) return fits_fail(err, errlen, NDF_EIO, c->path, "cannot write", st);
  return NDF_OK;
}

/* The file the image was read from, again, with the image in place of the HDU read: the other
 * HDUs copied from it as they are. It must be the file read, unchanged. */
static ndf_status write_around(fitsfile *out, const wctx *c, char *err, size_t errlen) {
  const fits_meta *m = c->meta;
  struct stat sb;
  if (stat(m->src, &sb) != 0)
    return ndf_io_error(err, errlen, NDF_EIO, c->path,
                        "the file the image was read from, %s, is gone (%s): its other HDUs "
                        "cannot be copied",
                        m->src, strerror(errno));
  char why[1024] = "";
  file_id now = {0};
  ndf_status s = check_file(m->src, m->src, 1, &now, why, sizeof why);
  if (s != NDF_OK)
    return ndf_io_error(err, errlen, s, c->path,
                        "cannot copy the other HDUs of the file the image was read from: %s", why);
  fitsfile *in = NULL;
  int st = 0, n = 0;
  fits_open_diskfile(&in, m->src, READONLY, &st);
  fits_get_num_hdus(in, &n, &st);
  if (!same_file(&now, &m->id) || (!st && n < m->hdu)) {
    close_fits(in);
    fits_clear_errmsg();
    return ndf_io_error(err, errlen, NDF_EIO, c->path,
                        "the file the image was read from, %s, has changed since: its other "
                        "HDUs cannot be copied (read it again)",
                        m->src);
  }
  for (int i = 1; i <= n && !st && s == NDF_OK; i++) {
    if (i == m->hdu) {
      s = write_image(out, c, err, errlen);
    } else if (fits_movabs_hdu(in, i, NULL, &st) || fits_copy_hdu(in, out, 0, &st)) {
      snprintf(why, sizeof why, "cannot copy HDU %d of %s", i - 1, m->src);
      s = fits_fail(err, errlen, NDF_EIO, c->path, why, st);
    }
  }
  if (st && s == NDF_OK) s = fits_fail(err, errlen, NDF_EIO, c->path, "cannot read", st);
  int cst = close_fits(in);
  if (cst && s == NDF_OK) s = fits_fail(err, errlen, NDF_EIO, c->path, "cannot read", cst);
  fits_clear_errmsg();
  return s;
}

/* The reallocator of cfitsio's file in memory: it zeroes what it adds, since cfitsio reads
 * some bytes there before it writes them (a block's padding, the descriptors of a compressed
 * image's tiles), and realloc leaves them undefined. A block's size goes before it. */
enum { MEMHEAD = 16 };

static void *zeroed_realloc(void *p, size_t n) {
  char *b = p ? (char *)p - MEMHEAD : NULL;
  size_t old = 0;
  if (b) memcpy(&old, b, sizeof old);
  if (n > SIZE_MAX - MEMHEAD) return NULL;
  char *q = realloc(b, n + MEMHEAD);
  if (!q) return NULL;
  if (n > old) memset(q + MEMHEAD + old, 0, n - old);
  memcpy(q, &n, sizeof n);
  return q + MEMHEAD;
}

static void zeroed_free(void *p) {
  if (p) free((char *)p - MEMHEAD);
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
    fits_create_memfile(&f, &mem, &memsize, 2880 * 16, zeroed_realloc, &st);
  else
    fits_create_diskfile(&f, tmp, &st);
  if (st) {
    ndf_status s = fits_fail(err, errlen, NDF_EIO, c->path, "cannot create the file", st);
    zeroed_free(mem);
    return s;
  }
  ndf_status s =
      c->meta && c->meta->src ? write_around(f, c, err, errlen) : write_image(f, c, err, errlen);
  /* the file's size, for a file in memory (whose buffer may be larger): its last HDU's end */
  LONGLONG end = 0, head = 0, start = 0;
  int nh = 0;
  if (s == NDF_OK && c->gz &&
      (fits_flush_file(f, &st) || fits_get_num_hdus(f, &nh, &st) ||
       fits_movabs_hdu(f, nh, NULL, &st) || fits_get_hduaddrll(f, &head, &start, &end, &st)))
    s = fits_fail(err, errlen, NDF_EIO, c->path, "cannot write", st);
  st = close_fits(f);
  if (s == NDF_OK && st) s = fits_fail(err, errlen, NDF_EIO, c->path, "cannot finish writing", st);
  fits_clear_errmsg();
  if (s == NDF_OK && c->gz) {
    if (end <= 0 || (size_t)end > memsize)
      s = ndf_io_error(err, errlen, NDF_EIO, c->path,
                       "cannot write: the file in memory has %zu bytes, its last HDU ends at "
                       "%lld",
                       memsize, (long long)end);
    else
      s = write_gz(tmp, c->path, mem, (size_t)end, err, errlen);
  }
  zeroed_free(mem);
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

/* 1 if every sample is an integer PLIO_1 holds (0 to 2^24 - 1). */
static int plio_holds(const wctx *c) {
  const int64_t n = ndf_array_size(&c->img->a);
  for (int64_t i = 0; i < n; i++) {
    long long v;
    switch (c->type) {
    case BYTE_IMG: v = ((const uint8_t *)c->data)[i]; break;
    case SBYTE_IMG: v = ((const int8_t *)c->data)[i]; break;
    case SHORT_IMG: v = ((const int16_t *)c->data)[i]; break;
    case USHORT_IMG: v = ((const uint16_t *)c->data)[i]; break;
    case LONG_IMG: v = ((const int32_t *)c->data)[i]; break;
    case ULONG_IMG: v = ((const uint32_t *)c->data)[i]; break;
    default: return 0;
    }
    if (v < 0 || v >= 1 << 24) return 0;
  }
  return 1;
}

/* The lossless tile compression of the image (see the file's comment). */
static int compression(const wctx *c) {
  int z = c->meta && c->meta->compressed ? c->meta->zcmp : 0;
  if (c->type == FLOAT_IMG || c->type == DOUBLE_IMG) return z == GZIP_1 ? GZIP_1 : GZIP_2;
  if (!z || (z == PLIO_1 && !plio_holds(c))) return RICE_1;
  return z;
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
            0};
  if (c.meta && c.meta->dtype == a->dtype && dtype_of(c.meta->type) == a->dtype)
    c.type = c.meta->type;
  /* tile-compressed where the HDU was, or for .fz; cfitsio compresses no more than 3 axes, and
   * no 64-bit integers: their exact f64 values go instead */
  const int tiled = (fz || (c.meta && c.meta->compressed)) && a->ndim <= ZMAX;
  if (tiled && (c.type == LONGLONG_IMG || c.type == ULONGLONG_IMG)) c.type = DOUBLE_IMG;
  void *buf = NULL;
  if (convert(a, c.type, &c.data, &buf) != NDF_OK)
    return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  if (tiled) c.zcmp = compression(&c);
  ndf_status s = ndf_io_write_via_temp(path, write_tmp, &c, err, errlen);
  free(buf);
  return s;
}
