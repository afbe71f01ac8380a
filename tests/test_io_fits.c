/* SPDX-License-Identifier: BSD-3-Clause */
/* test_io_fits.c - FITS through src/io: round trips of every dtype and shape (plain, gzipped,
 * tile-compressed), the widened types written back, cards and spacing kept, HDU selection, the
 * file's other HDUs and its tile compression kept on writing, CRPIX moved with the origin, time
 * axes, images from other formats, the read limit, and clear errors, with nothing left behind,
 * on bad files (truncated gzip trailers, special files, a source file gone or changed).
 * usage: test_io_fits PATH/TO/io_convert */
#include <fcntl.h>
#include <fitsio.h>

#include "io/formats.h"
#include "io_test.h"

/* Number of samples that differ (bit for bit) between two arrays of the same dtype and size;
 * a's strides are honoured, b is contiguous. */
static int64_t differ(const ndf_array *a, const ndf_array *b) {
  int64_t n = ndf_array_size(a), bad = 0;
  size_t es = ndf_dtype_size(a->dtype);
  for (int64_t i = 0; i < n; i++)
    bad += memcmp((const char *)a->data + ndf__offset(a, i) * (int64_t)es,
                  (const char *)b->data + i * (int64_t)es, es) != 0;
  return bad;
}

static int same_shape(const ndf_array *a, const ndf_array *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* stdout and stderr to a file while the library reads bad input: it must print nothing. */
static int saved_out = -1, saved_err = -1;
static void quiet_begin(void) {
  fflush(stdout);
  fflush(stderr);
  saved_out = dup(1);
  saved_err = dup(2);
  FILE *q = fopen(io_at("quiet.txt"), "w");
  dup2(fileno(q), 1);
  dup2(fileno(q), 2);
  fclose(q);
}
static void quiet_end(void) {
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  size_t n = 0;
  char *b = (char *)io_read_file(io_at("quiet.txt"), &n);
  if (!b) return;
  b[n] = 0;
  /* the test's own FAIL lines pass through; anything else came from the library */
  for (char *line = b, *next; *line; line = next) {
    next = strchr(line, '\n');
    next = next ? next + 1 : line + strlen(line);
    if (!strncmp(line, "FAIL ", 5) || (line > b && line[-1] != '\n'))
      fprintf(stderr, "%.*s", (int)(next - line), line);
    else
      CHECK(0, "the library printed on bad input: %.*s", (int)(next - line), line);
  }
  free(b);
}

/* ---- round trips ---- */

static void round_trip(uint64_t *r, ndf_dtype t, int nd, const char *ext, int strided) {
  int64_t shape[4];
  for (int d = 0; d < nd; d++)
    shape[d] = t_randint(r, 1, nd > 2 ? 6 : 17);
  t_arr src;
  ndf_image img = io_random_image(&src, r, t, nd, shape, strided);
  char name[64], err[512];
  snprintf(name, sizeof name, "rt_%s_%d%s", ndf_dtype_name(t), nd, ext);
  const char *path = io_at(name);
  ndf_status st = ndf_image_write(path, &img, err, sizeof err);
  CHECK(st == NDF_OK, "write %s: %s", name, err);
  ndf_image back;
  st = st == NDF_OK ? ndf_image_read(path, NULL, &back, err, sizeof err) : st;
  CHECK(st == NDF_OK, "read %s: %s", name, err);
  if (st == NDF_OK) {
    CHECK(same_shape(&src.hview, &back.a), "%s: dtype %s ndim %d back", name,
          ndf_dtype_name(back.a.dtype), back.a.ndim);
    if (same_shape(&src.hview, &back.a)) {
      int64_t bad = differ(&src.hview, &back.a);
      CHECK(bad == 0, "%s: %lld samples differ", name, (long long)bad);
    }
    CHECK(back.format == NDF_FORMAT_FITS && back.channel_axis == -1 && back.meta, "%s: fields",
          name);
    /* the same-format writer again (with the reader's meta): still identical */
    const char *again = io_at("again.fits");
    CHECK(ndf_image_write(again, &back, err, sizeof err) == NDF_OK, "rewrite %s: %s", name, err);
    ndf_image b2;
    if (ndf_image_read(again, NULL, &b2, err, sizeof err) == NDF_OK) {
      CHECK(same_shape(&back.a, &b2.a) && !differ(&back.a, &b2.a), "%s: rewrite differs", name);
      ndf_image_free(&b2);
    } else {
      CHECK(0, "reread %s: %s", name, err);
    }
    ndf_image_free(&back);
  }
  t_arr_free(&src, NULL);
}

/* ---- files made with cfitsio itself ---- */

static void fits_check(int st, const char *what) {
  if (st) {
    char text[FLEN_STATUS];
    fits_get_errstatus(st, text);
    fprintf(stderr, "cfitsio in the test (%s): %s\n", what, text);
    abort();
  }
}

/* A new file at path through cfitsio (any old one removed first), its primary HDU an image of
 * *_IMG type `type` (nd 0: none); cfitsio's status in *st. */
static fitsfile *new_fits(const char *path, int type, int nd, const long *naxes, int *st) {
  fitsfile *f = NULL;
  unlink(path);
  fits_create_diskfile(&f, path, st);
  fits_create_img(f, type, nd, (long *)naxes, st);
  return f;
}

/* A primary image of *_IMG type `type` with samples from the doubles v (converted by cfitsio),
 * and optionally BSCALE/BZERO given explicitly (scale != 0) and BLANK. */
static void make_fits(const char *path, int type, int nd, const long *naxes, const double *v,
                      double scale, double zero, long long blank) {
  int st = 0;
  fitsfile *f = new_fits(path, type, nd, naxes, &st);
  if (scale != 0) {
    fits_write_key_dbl(f, "BSCALE", scale, -17, NULL, &st);
    fits_write_key_dbl(f, "BZERO", zero, -17, NULL, &st);
    fits_set_bscale(f, scale, zero, &st);
  }
  if (blank) {
    fits_write_key_lng(f, "BLANK", blank, NULL, &st);
    fits_set_imgnull(f, blank, &st);
  }
  long n = 1;
  for (int d = 0; d < nd; d++)
    n *= naxes[d];
  fits_write_img(f, TDOUBLE, 1, n, (void *)v, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
}

/* BITPIX and BZERO of a file's primary HDU, through cfitsio. */
static void stored_type(const char *path, int *bitpix, double *bzero) {
  fitsfile *f;
  int st = 0;
  fits_open_diskfile(&f, path, READONLY, &st);
  fits_read_key(f, TINT, "BITPIX", bitpix, NULL, &st);
  *bzero = 0;
  int s2 = 0;
  fits_read_key(f, TDOUBLE, "BZERO", bzero, NULL, &s2);
  fits_close_file(f, &st);
  fits_clear_errmsg();
  fits_check(st, path);
}

/* The first n samples of a file's primary image as doubles, through cfitsio. */
static void read_values(const char *path, long n, double *v) {
  fitsfile *f;
  int st = 0;
  fits_open_diskfile(&f, path, READONLY, &st);
  fits_read_img(f, TDOUBLE, 1, n, NULL, v, NULL, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
}

/* The widened types: exact on read, written back in their own type, rounded and clamped. */
static void widened(uint64_t *r) {
  static const struct {
    int type, bitpix;
    double lo, hi, bzero;
    const char *name;
  } cases[] = {{SBYTE_IMG, 8, -128, 127, -128, "i8"},
               {LONG_IMG, 32, -2147483648.0, 2147483647.0, 0, "i32"},
               {ULONG_IMG, 32, 0, 4294967295.0, 2147483648.0, "u32"},
               {LONGLONG_IMG, 64, -9007199254740992.0, 9007199254740992.0, 0, "i64"}};
  char err[512];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    long naxes[3] = {5, 4, 3};
    double v[60];
    for (int i = 0; i < 60; i++)
      v[i] = i == 0   ? cases[c].lo
             : i == 1 ? cases[c].hi
                      : (double)t_randint(r, (int64_t)cases[c].lo / 2, (int64_t)cases[c].hi / 2);
    char name[32];
    snprintf(name, sizeof name, "w_%s.fits", cases[c].name);
    const char *path = io_at(name);
    make_fits(path, cases[c].type, 3, naxes, v, 0, 0, 0);
    ndf_image img;
    if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "%s: %s", name, err);
      continue;
    }
    ndf_dtype want = cases[c].type == SBYTE_IMG ? NDF_I16 : NDF_F64;
    CHECK(img.a.dtype == want && img.a.ndim == 3 && img.a.shape[0] == 3 && img.a.shape[2] == 5,
          "%s: read as %s", name, ndf_dtype_name(img.a.dtype));
    int bad = 0;
    for (int i = 0; i < 60 && img.a.dtype == want; i++)
      bad += ndf__load(want, img.a.data, i) != v[i];
    CHECK(bad == 0, "%s: %d samples not exact", name, bad);
    /* back to its own type */
    const char *out = io_at("w_out.fits");
    CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s write: %s", name, err);
    int bitpix = 0;
    double bzero = 0;
    stored_type(out, &bitpix, &bzero);
    CHECK(bitpix == cases[c].bitpix && bzero == cases[c].bzero, "%s written as BITPIX %d BZERO %g",
          name, bitpix, bzero);
    /* rounding (half to even) and clamping of what a filter made of it; the file's values
     * read back by cfitsio */
    double top = cases[c].type == LONGLONG_IMG ? 9223372036854775807.0 : cases[c].hi,
           bottom = cases[c].type == LONGLONG_IMG ? -9223372036854775808.0 : cases[c].lo;
    double probe[6] = {2.5, -3.5, 1e30, -1e30, NAN, 7.49};
    double expect[6] = {2, bottom < 0 ? -4 : 0, top, bottom, 0, 7};
    for (int i = 0; i < 6; i++)
      ndf__store(want, img.a.data, i, probe[i]); /* an i16 array clamps to its own range */
    if (want == NDF_I16) expect[2] = 127, expect[3] = -128;
    CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s write: %s", name, err);
    double got[6];
    read_values(out, 6, got);
    for (int i = 0; i < 6; i++)
      CHECK(got[i] == expect[i], "%s: %g written as %.17g, not %.17g", name, probe[i], got[i],
            expect[i]);
    /* an array of another dtype is written as that dtype */
    ndf_image conv;
    ndf_image_init(&conv);
    float fv[60];
    for (int i = 0; i < 60; i++)
      fv[i] = (float)i - 0.25f;
    conv.a = ndf_array_contiguous(NDF_F32, 3, img.a.shape, fv);
    conv.format = NDF_FORMAT_FITS;
    conv.meta = img.meta;
    CHECK(ndf_image_write(out, &conv, err, sizeof err) == NDF_OK, "%s as f32: %s", name, err);
    stored_type(out, &bitpix, &bzero);
    CHECK(bitpix == -32, "%s: f32 array written as BITPIX %d", name, bitpix);
    ndf_image_free(&img);
  }

  /* u64 and i64 within 2^53 read; beyond refused with a clear message */
  long n4[1] = {4};
  double big[4] = {0, 1, 9007199254740992.0, 12345};
  make_fits(io_at("u64.fits"), ULONGLONG_IMG, 1, n4, big, 0, 0, 0);
  ndf_image img;
  if (ndf_image_read(io_at("u64.fits"), NULL, &img, err, sizeof err) == NDF_OK) {
    CHECK(img.a.dtype == NDF_F64 && ((double *)img.a.data)[2] == big[2], "u64 read");
    CHECK(ndf_image_write(io_at("u64_out.fits"), &img, err, sizeof err) == NDF_OK, "u64: %s", err);
    int bitpix;
    double bzero;
    stored_type(io_at("u64_out.fits"), &bitpix, &bzero);
    CHECK(bitpix == 64 && bzero == 9223372036854775808.0, "u64 written as %d %g", bitpix, bzero);
    ndf_image_free(&img);
  } else {
    CHECK(0, "u64.fits: %s", err);
  }
  {
    int st = 0;
    long long w[2] = {1, (1ll << 53) + 1};
    fitsfile *f = new_fits(io_at("i64big.fits"), LONGLONG_IMG, 1, (long[]){2}, &st);
    fits_write_img(f, TLONGLONG, 1, 2, w, &st);
    fits_close_file(f, &st);
    fits_check(st, "i64big");
    ndf_status s = ndf_image_read(io_at("i64big.fits"), NULL, &img, err, sizeof err);
    CHECK(s == NDF_EUNSUPPORTED && strstr(err, "2^53") && strstr(err, io_at("i64big.fits")),
          "i64 beyond 2^53: %s", err);
  }

  /* scaled integers: physical values as f32 (8, 16 bits) or f64 (32), BLANK -> NaN; written
   * back as that float type without scaling */
  long n6[1] = {6};
  double phys[6] = {1.5, 2.0, -7.25, 100.5, 0, 3.75}; /* multiples of 0.25 from 10 */
  make_fits(io_at("scaled16.fits"), SHORT_IMG, 1, n6, phys, 0.25, 10, -32768);
  if (ndf_image_read(io_at("scaled16.fits"), NULL, &img, err, sizeof err) == NDF_OK) {
    CHECK(img.a.dtype == NDF_F32, "scaled 16-bit read as %s", ndf_dtype_name(img.a.dtype));
    for (int i = 0; i < 6 && img.a.dtype == NDF_F32; i++)
      CHECK(((float *)img.a.data)[i] == (float)phys[i], "scaled[%d] %g", i,
            ((float *)img.a.data)[i]);
    CHECK(ndf_image_write(io_at("scaled_out.fits"), &img, err, sizeof err) == NDF_OK, "%s", err);
    int bitpix;
    double bzero;
    stored_type(io_at("scaled_out.fits"), &bitpix, &bzero);
    CHECK(bitpix == -32 && bzero == 0, "scaled written as BITPIX %d BZERO %g", bitpix, bzero);
    ndf_image_free(&img);
  } else {
    CHECK(0, "scaled16.fits: %s", err);
  }
  { /* BLANK of scaled data: NaN */
    int st = 0;
    short raw[3] = {5, -32768, 7};
    fitsfile *f = new_fits(io_at("blank.fits"), SHORT_IMG, 1, (long[]){3}, &st);
    fits_write_key_dbl(f, "BSCALE", 2, -17, NULL, &st);
    fits_write_key_dbl(f, "BZERO", 1, -17, NULL, &st);
    fits_write_key_lng(f, "BLANK", -32768, NULL, &st);
    fits_set_bscale(f, 1, 0, &st); /* raw values */
    fits_write_img(f, TSHORT, 1, 3, raw, &st);
    fits_close_file(f, &st);
    fits_check(st, "blank");
    if (ndf_image_read(io_at("blank.fits"), NULL, &img, err, sizeof err) == NDF_OK) {
      float *p = img.a.data;
      CHECK(img.a.dtype == NDF_F32 && p[0] == 11 && isnan(p[1]) && p[2] == 15, "BLANK: %g %g %g",
            p[0], p[1], p[2]);
      ndf_image_free(&img);
    } else {
      CHECK(0, "blank.fits: %s", err);
    }
  }
  /* an unscaled integer image keeps its BLANK values and card for its own type */
  double iv[3] = {5, -99, 7};
  make_fits(io_at("blank_i16.fits"), SHORT_IMG, 1, (long[]){3}, iv, 0, 0, -99);
  if (ndf_image_read(io_at("blank_i16.fits"), NULL, &img, err, sizeof err) == NDF_OK) {
    CHECK(img.a.dtype == NDF_I16 && ((int16_t *)img.a.data)[1] == -99, "unscaled BLANK value");
    CHECK(ndf_image_write(io_at("blank_out.fits"), &img, err, sizeof err) == NDF_OK, "%s", err);
    fitsfile *f;
    int st = 0;
    long long blank = 0;
    fits_open_diskfile(&f, io_at("blank_out.fits"), READONLY, &st);
    fits_read_key(f, TLONGLONG, "BLANK", &blank, NULL, &st);
    fits_close_file(f, &st);
    CHECK(st == 0 && blank == -99, "BLANK card not kept (status %d)", st);
    fits_clear_errmsg();
    ndf_image_free(&img);
  } else {
    CHECK(0, "blank_i16.fits: %s", err);
  }
}

/* ---- cards and spacing ---- */

static int structural_key(const char *card) {
  static const char *keys[] = {"SIMPLE  ", "BITPIX  ", "NAXIS",    "EXTEND  ",
                               "BSCALE  ", "BZERO   ", "CHECKSUM", "DATASUM ",
                               "END     ", "XTENSION", "PCOUNT  ", "GCOUNT  "};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!strncmp(card, keys[i], strlen(keys[i]))) return 1;
  return 0;
}

/* The HDU's non-structural cards, concatenated (80 characters each); a tile-compressed image's
 * as cfitsio decompresses it (less the two COMMENT cards on the standard it adds then). */
static char *cards_of(const char *path, int hdu, int *n) {
  fitsfile *f, *plain;
  int st = 0, nk = 0, more = 0, added = 0;
  fits_open_diskfile(&f, path, READONLY, &st);
  fits_movabs_hdu(f, hdu, NULL, &st);
  if (!st && fits_is_compressed_image(f, &st)) {
    fits_create_file(&plain, "mem://", &st);
    fits_img_decompress(f, plain, &st);
    fits_close_file(f, &st);
    f = plain;
    added = 2;
  }
  fits_get_hdrspace(f, &nk, &more, &st);
  char *all = calloc((size_t)nk + 1, 81);
  *n = 0;
  for (int i = 1; i <= nk && !st; i++) {
    char card[FLEN_CARD];
    fits_read_record(f, i, card, &st);
    if (added && (!strncmp(card, "COMMENT   FITS (Flexible", 24) ||
                  !strncmp(card, "COMMENT   and Astrophysics", 26))) {
      added--;
      continue;
    }
    if (!structural_key(card)) snprintf(all + 80 * (*n)++, 81, "%-80s", card);
  }
  fits_close_file(f, &st);
  fits_check(st, path);
  return all;
}

static void cards_and_spacing(void) {
  const char *path = io_at("cards.fits");
  int st = 0;
  long naxes[3] = {6, 5, 4};
  fitsfile *f = new_fits(path, FLOAT_IMG, 3, naxes, &st);
  fits_write_key_str(f, "OBJECT", "M31", "target", &st);
  fits_write_key_str(f, "DATE-OBS", "2021-03-04T05:06:07", NULL, &st);
  fits_write_comment(f, "a comment card", &st);
  fits_write_key_str(f, "CTYPE1", "RA---TAN", NULL, &st);
  fits_write_key_str(f, "CUNIT1", "deg", NULL, &st);
  fits_write_key_dbl(f, "CDELT1", -2.5e-4, -12, NULL, &st);
  fits_write_key_str(f, "CUNIT2", "um", NULL, &st);
  fits_write_key_dbl(f, "CD2_2", -250, -12, NULL, &st);
  fits_write_key_str(f, "CUNIT3", "mm  ", NULL, &st);
  fits_write_key_dbl(f, "CDELT3", 0.5, -12, NULL, &st);
  fits_write_key_dbl(f, "PC3_3", 3, -12, NULL, &st);
  fits_write_history(f, "made by test_io_fits", &st);
  fits_write_key_longstr(f, "LONGSTR",
                         "a string longer than one card can hold, so cfitsio "
                         "continues it on the next card with CONTINUE",
                         NULL, &st);
  float v[120];
  for (int i = 0; i < 120; i++)
    v[i] = (float)i * 0.5f + 1;
  fits_write_img(f, TFLOAT, 1, 120, v, &st);
  fits_write_chksum(f, &st);
  fits_close_file(f, &st);
  fits_check(st, path);

  char err[512];
  ndf_image img;
  if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
    CHECK(0, "cards.fits: %s", err);
    return;
  }
  /* axis 2 of the array is FITS axis 1 (degrees), 1 is axis 2 (um), 0 is axis 3 (mm) */
  CHECK(img.spacing[2] == 0 && fabs(img.spacing[1] - 0.25) < 1e-12 &&
            fabs(img.spacing[0] - 1.5) < 1e-12,
        "spacing %g %g %g", img.spacing[0], img.spacing[1], img.spacing[2]);
  const char *out = io_at("cards_out.fits");
  CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write: %s", err);
  int n0, n1;
  char *c0 = cards_of(path, 1, &n0), *c1 = cards_of(out, 1, &n1);
  CHECK(n0 == n1 && !memcmp(c0, c1, (size_t)n0 * 80), "cards differ (%d vs %d):\n%s\n---\n%s", n0,
        n1, c0, c1);
  CHECK(n0 >= 12, "only %d cards", n0);
  free(c0);
  free(c1);
  /* fresh, valid checksums */
  int dataok = 0, hduok = 0;
  fits_open_diskfile(&f, out, READONLY, &st);
  fits_verify_chksum(f, &dataok, &hduok, &st);
  fits_close_file(f, &st);
  CHECK(st == 0 && dataok == 1 && hduok == 1, "checksum %d %d", dataok, hduok);
  ndf_image back;
  if (ndf_image_read(out, NULL, &back, err, sizeof err) == NDF_OK) {
    CHECK(!memcmp(back.spacing, img.spacing, sizeof img.spacing), "spacing not kept");
    ndf_image_free(&back);
  }
  /* through .fz and .gz: the same cards (in the image's HDU, the .fz file's first extension,
   * which stays compressed where it is) */
  for (int k = 0; k < 2; k++) {
    const char *z = io_at(k ? "cards.fits.gz" : "cards.fits.fz");
    CHECK(ndf_image_write(z, &img, err, sizeof err) == NDF_OK, "write %s: %s", z, err);
    if (ndf_image_read(z, NULL, &back, err, sizeof err) == NDF_OK) {
      CHECK(same_shape(&img.a, &back.a) && !differ(&img.a, &back.a), "%s data", z);
      CHECK(ndf_image_write(out, &back, err, sizeof err) == NDF_OK, "%s rewrite: %s", z, err);
      c0 = cards_of(path, 1, &n0);
      c1 = cards_of(out, k ? 1 : 2, &n1);
      CHECK(n0 == n1 && !memcmp(c0, c1, (size_t)n0 * 80), "%s: cards differ:\n%s\n---\n%s", z, c0,
            c1);
      free(c0);
      free(c1);
      ndf_image_free(&back);
    } else {
      CHECK(0, "%s: %s", z, err);
    }
  }
  { /* the files are what they say: gzip magic, a compressed image extension */
    size_t n;
    unsigned char *b = io_read_file(io_at("cards.fits.gz"), &n);
    CHECK(b && n > 2 && b[0] == 0x1f && b[1] == 0x8b, "cards.fits.gz is not gzipped");
    free(b);
    fits_open_diskfile(&f, io_at("cards.fits.fz"), READONLY, &st);
    fits_movabs_hdu(f, 2, NULL, &st);
    CHECK(st == 0 && fits_is_compressed_image(f, &st), "cards.fits.fz: no compressed image");
    fits_close_file(f, &st);
    fits_clear_errmsg();
  }
  ndf_image_free(&img);
}

/* ---- HDUs ---- */

static void hdus(void) {
  const char *path = io_at("multi.fits");
  int st = 0;
  fitsfile *f = new_fits(path, BYTE_IMG, 0, NULL, &st); /* empty primary */
  char *tt[1] = {"X"}, *tf[1] = {"J"};
  fits_create_tbl(f, BINARY_TBL, 2, 1, tt, tf, NULL, "TAB", &st);
  int col[2] = {1, 2};
  fits_write_col(f, TINT, 1, 1, 1, 2, col, &st);
  short a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {-1, -2, -3, -4};
  fits_create_img(f, SHORT_IMG, 2, (long[]){3, 2}, &st);
  fits_write_key_str(f, "EXTNAME", "SCI", NULL, &st);
  fits_write_img(f, TSHORT, 1, 6, a, &st);
  fits_create_img(f, SHORT_IMG, 1, (long[]){4}, &st);
  fits_write_key_str(f, "EXTNAME", "ERR", NULL, &st);
  fits_write_img(f, TSHORT, 1, 4, b, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
  char err[512], name[600];
  ndf_image img;
  /* the first image extension, past the table */
  if (ndf_image_read(path, NULL, &img, err, sizeof err) == NDF_OK) {
    CHECK(img.a.ndim == 2 && img.a.shape[0] == 2 && img.a.shape[1] == 3 &&
              ((int16_t *)img.a.data)[5] == 6,
          "first image extension");
    ndf_image_free(&img);
  } else {
    CHECK(0, "multi.fits: %s", err);
  }
  static const char *sel[] = {"[ERR]", "[3]", "[err]"};
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "%s%s", path, sel[i]);
    CHECK(ndf_format_from_name(name) == NDF_FORMAT_FITS, "%s: format", name);
    if (ndf_image_read(name, NULL, &img, err, sizeof err) == NDF_OK) {
      CHECK(img.a.ndim == 1 && img.a.shape[0] == 4 && ((int16_t *)img.a.data)[3] == -4, "%s", name);
      ndf_image_free(&img);
    } else {
      CHECK(0, "%s: %s", name, err);
    }
  }
  static const char *bad[] = {"[TAB]", "[0]", "[7]", "[NOPE]"};
  quiet_begin();
  for (int i = 0; i < 4; i++) {
    snprintf(name, sizeof name, "%s%s", path, bad[i]);
    err[0] = 0;
    ndf_status s = ndf_image_read(name, NULL, &img, err, sizeof err);
    CHECK(s != NDF_OK && strstr(err, name), "%s: %s", name, err);
  }
  quiet_end();
  /* the file named literally, brackets and all */
  const char *lit = io_at("lit[1].fits");
  rename(path, lit);
  CHECK(ndf_image_read(lit, NULL, &img, err, sizeof err) == NDF_OK, "%s: %s", lit, err);
  if (io_exists(lit) && img.a.data) ndf_image_free(&img);
  /* writing to an HDU selection is refused */
  snprintf(name, sizeof name, "%s[1]", io_at("w.fits"));
  short s1 = 1;
  ndf_image one;
  ndf_image_init(&one);
  one.a = ndf_array_contiguous(NDF_I16, 1, (int64_t[]){1}, &s1);
  CHECK(ndf_image_write(name, &one, err, sizeof err) == NDF_EINVAL && !io_exists(name) &&
            !io_exists(io_at("w.fits")),
        "write to %s: %s", name, err);
  CHECK(ndf_format_from_name("a.npy[1]") == NDF_FORMAT_AUTO, "a.npy[1] is no FITS name");
  CHECK(ndf_format_from_name("a.FITS.GZ") == NDF_FORMAT_FITS, "a.FITS.GZ");
  CHECK(ndf_format_from_name("a.fits.fz") == NDF_FORMAT_FITS, "a.fits.fz");
  CHECK(ndf_format_from_name("a.fts") == NDF_FORMAT_FITS, "a.fts");
}

/* ---- other formats ---- */

static void cross_format(uint64_t *r) {
  char err[512];
  int64_t shape[3] = {4, 7, 9};
  t_arr src;
  ndf_image img = io_random_image(&src, r, NDF_U16, 3, shape, 0);
  CHECK(ndf_image_write(io_at("x.npy"), &img, err, sizeof err) == NDF_OK, "npy: %s", err);
  ndf_image n;
  if (ndf_image_read(io_at("x.npy"), NULL, &n, err, sizeof err) != NDF_OK) {
    CHECK(0, "x.npy: %s", err);
    t_arr_free(&src, NULL);
    return;
  }
  n.spacing[0] = 2.5; /* as a NIfTI reader would give: written as CDELT3 in mm */
  n.spacing[2] = 0.125;
  CHECK(ndf_image_write(io_at("x.fits"), &n, err, sizeof err) == NDF_OK, "npy -> fits: %s", err);
  ndf_image back;
  if (ndf_image_read(io_at("x.fits"), NULL, &back, err, sizeof err) == NDF_OK) {
    CHECK(same_shape(&src.hview, &back.a) && !differ(&src.hview, &back.a), "npy -> fits data");
    CHECK(back.spacing[0] == 2.5 && back.spacing[1] == 0 && back.spacing[2] == 0.125,
          "spacing %g %g %g", back.spacing[0], back.spacing[1], back.spacing[2]);
    /* and FITS meta is ignored by the npy writer; back to npy */
    CHECK(ndf_image_write(io_at("y.npy"), &back, err, sizeof err) == NDF_OK, "fits -> npy: %s",
          err);
    ndf_image_free(&back);
  } else {
    CHECK(0, "x.fits: %s", err);
  }
  /* another format's meta is never taken for FITS cards */
  int not_fits_meta = 42;
  n.format = NDF_FORMAT_NPY;
  n.meta = &not_fits_meta;
  n.meta_free = NULL;
  CHECK(ndf_image_write(io_at("x2.fits"), &n, err, sizeof err) == NDF_OK, "foreign meta: %s", err);
  n.meta = NULL;
  ndf_image_free(&n);
  t_arr_free(&src, NULL);
}

/* ---- the file's other HDUs ---- */

/* The bytes of HDU hdu (1: primary) of a FITS file, header and data (*n of them), through
 * cfitsio's offsets; a .gz file is decompressed first. */
static unsigned char *hdu_bytes(const char *path, int hdu, size_t *n) {
  char plain[IO_PATH + 16], cmd[2 * IO_PATH + 40];
  const char *file = path;
  size_t k = strlen(path);
  if (k > 3 && !strcmp(path + k - 3, ".gz")) {
    snprintf(plain, sizeof plain, "%s.plain", path);
    snprintf(cmd, sizeof cmd, "gzip -dc '%s' > '%s'", path, plain);
    if (system(cmd) != 0) return NULL;
    file = plain;
  }
  fitsfile *f;
  int st = 0;
  LONGLONG head = 0, start = 0, end = 0;
  fits_open_diskfile(&f, file, READONLY, &st);
  fits_movabs_hdu(f, hdu, NULL, &st);
  fits_get_hduaddrll(f, &head, &start, &end, &st);
  fits_close_file(f, &st);
  fits_clear_errmsg();
  size_t all = 0;
  unsigned char *b = st ? NULL : io_read_file(file, &all), *out = NULL;
  if (b && (size_t)end <= all && head < end) {
    *n = (size_t)(end - head);
    out = malloc(*n);
    memcpy(out, b + head, *n);
  }
  free(b);
  if (file != path) unlink(file);
  return out;
}

/* 1 if HDU i of a and HDU j of b are the same bytes. */
static int same_hdu(const char *a, int i, const char *b, int j) {
  size_t na = 0, nb = 0;
  unsigned char *x = hdu_bytes(a, i, &na), *y = hdu_bytes(b, j, &nb);
  int same = x && y && na == nb && !memcmp(x, y, na);
  free(x);
  free(y);
  return same;
}

static int num_hdus(const char *path) {
  fitsfile *f;
  int st = 0, n = 0;
  fits_open_diskfile(&f, path, READONLY, &st);
  fits_get_num_hdus(f, &n, &st);
  fits_close_file(f, &st);
  fits_clear_errmsg();
  return st ? -1 : n;
}

/* Keyword key of HDU hdu as a double (NAN where absent), and whether it is a compressed
 * image. */
static double key_of(const char *path, int hdu, const char *key, int *compressed) {
  fitsfile *f;
  int st = 0, s2 = 0;
  double v = NAN;
  if (compressed) *compressed = 0;
  if (fits_open_diskfile(&f, path, READONLY, &st)) {
    fits_clear_errmsg();
    return NAN;
  }
  fits_movabs_hdu(f, hdu, NULL, &st);
  if (st || fits_read_key(f, TDOUBLE, key, &v, NULL, &s2)) v = NAN;
  if (compressed) *compressed = !st && fits_is_compressed_image(f, &st);
  fits_close_file(f, &st);
  fits_clear_errmsg();
  return v;
}

/* A frame as instruments write them: a primary header of the observation (no data), SCI (f32,
 * 6 x 5), ERR (f32), DQ (i16 with BLANK) and a table, with checksums. */
static void make_frame(const char *path) {
  int st = 0;
  fitsfile *f = new_fits(path, BYTE_IMG, 0, NULL, &st);
  fits_write_key_str(f, "TELESCOP", "HST", "telescope", &st);
  fits_write_key_str(f, "OBSERVER", "A. Observer", NULL, &st);
  fits_write_key_str(f, "DATE-OBS", "2021-05-06T07:08:09", NULL, &st);
  fits_write_comment(f, "a comment in the primary header", &st);
  fits_write_history(f, "a history card in the primary header", &st);
  fits_write_chksum(f, &st);
  float sci[30], err[30];
  short dq[30];
  for (int i = 0; i < 30; i++) {
    sci[i] = (float)i * 0.75f - 3;
    err[i] = 0.5f + (float)i / 64;
    dq[i] = (short)(i % 4 ? i % 7 : -1);
  }
  fits_create_img(f, FLOAT_IMG, 2, (long[]){6, 5}, &st);
  fits_write_key_str(f, "EXTNAME", "SCI", NULL, &st);
  fits_write_key_dbl(f, "CRPIX1", 3.5, -10, NULL, &st);
  fits_write_img(f, TFLOAT, 1, 30, sci, &st);
  fits_write_chksum(f, &st);
  fits_create_img(f, FLOAT_IMG, 2, (long[]){6, 5}, &st);
  fits_write_key_str(f, "EXTNAME", "ERR", NULL, &st);
  fits_write_img(f, TFLOAT, 1, 30, err, &st);
  fits_create_img(f, SHORT_IMG, 2, (long[]){6, 5}, &st);
  fits_write_key_str(f, "EXTNAME", "DQ", NULL, &st);
  fits_write_key_lng(f, "BLANK", -1, NULL, &st);
  fits_write_img(f, TSHORT, 1, 30, dq, &st);
  char *tt[2] = {"X", "NAME"}, *tf[2] = {"E", "8A"};
  fits_create_tbl(f, BINARY_TBL, 3, 2, tt, tf, NULL, "CAT", &st);
  float x[3] = {1, 2, 3};
  char *names[3] = {"a", "bb", "ccc"};
  fits_write_col(f, TFLOAT, 1, 1, 1, 3, x, &st);
  fits_write_col(f, TSTRING, 2, 1, 1, 3, names, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
}

/* A read of path that must succeed. */
static int read_ok(const char *path, ndf_image *img) {
  char err[512];
  ndf_status st = ndf_image_read(path, NULL, img, err, sizeof err);
  CHECK(st == NDF_OK, "read %s: %s", path, err);
  return st == NDF_OK;
}

static void companions(void) {
  char err[512], sel[IO_PATH + 16];
  const char *frame = io_at("frame.fits");
  make_frame(frame);
  ndf_image img;
  /* SCI, filtered (doubled), written back: the other HDUs byte for byte, SCI in its place */
  static const char *outs[] = {"frame_out.fits", "frame_out.fits.gz"};
  for (int k = 0; k < 2; k++) {
    snprintf(sel, sizeof sel, "%s[SCI]", frame);
    if (!read_ok(sel, &img)) return;
    for (int i = 0; i < 30; i++)
      ((float *)img.a.data)[i] *= 2;
    char out[IO_PATH];
    io_path(out, outs[k]);
    CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s: %s", out, err);
    CHECK(num_hdus(out) == 5, "%s: %d HDUs, not the file's 5", out, num_hdus(out));
    for (int h = 1; h <= 5; h++)
      CHECK(h == 2 || same_hdu(frame, h, out, h), "%s: HDU %d differs from the file's", out, h - 1);
    int n0, n1;
    char *c0 = cards_of(frame, 2, &n0), *c1 = cards_of(out, 2, &n1);
    CHECK(n0 == n1 && !memcmp(c0, c1, (size_t)n0 * 80), "%s: SCI's cards differ", out);
    free(c0);
    free(c1);
    ndf_image back;
    snprintf(sel, sizeof sel, "%s[SCI]", out);
    if (read_ok(sel, &back)) {
      CHECK(same_shape(&img.a, &back.a) && !differ(&img.a, &back.a), "%s: SCI's data", out);
      ndf_image_free(&back);
    }
    size_t n;
    unsigned char *b = io_read_file(out, &n);
    CHECK(b && n > 2 && (b[0] == 0x1f && b[1] == 0x8b) == k, "%s: gzipped %d", out, !k);
    free(b);
    /* fresh checksums where the HDU had them */
    fitsfile *f;
    int st = 0, dataok = 0, hduok = 0;
    fits_open_diskfile(&f, out, READONLY, &st);
    fits_movabs_hdu(f, 2, NULL, &st);
    fits_verify_chksum(f, &dataok, &hduok, &st);
    fits_close_file(f, &st);
    CHECK(st == 0 && dataok == 1 && hduok == 1, "%s: checksum %d %d", out, dataok, hduok);
    ndf_image_free(&img);
  }
  /* the DQ image as f32 (a filter's output type): its HDU as f32, without BLANK */
  snprintf(sel, sizeof sel, "%s[DQ]", frame);
  if (read_ok(sel, &img)) {
    ndf_image f32;
    ndf_image_init(&f32);
    float v[30];
    for (int i = 0; i < 30; i++)
      v[i] = (float)((int16_t *)img.a.data)[i] + 0.25f;
    f32.a = ndf_array_contiguous(NDF_F32, 2, img.a.shape, v);
    f32.format = NDF_FORMAT_FITS;
    f32.meta = img.meta; /* borrowed */
    const char *out = io_at("dq_out.fits");
    CHECK(ndf_image_write(out, &f32, err, sizeof err) == NDF_OK, "%s: %s", out, err);
    CHECK(num_hdus(out) == 5, "%s: %d HDUs", out, num_hdus(out));
    CHECK(key_of(out, 4, "BITPIX", NULL) == -32 && isnan(key_of(out, 4, "BLANK", NULL)) &&
              isnan(key_of(out, 4, "BZERO", NULL)),
          "%s: DQ as f32: BITPIX %g, BLANK %g", out, key_of(out, 4, "BITPIX", NULL),
          key_of(out, 4, "BLANK", NULL));
    for (int h = 1; h <= 5; h++)
      CHECK(h == 4 || same_hdu(frame, h, out, h), "%s: HDU %d differs", out, h - 1);
    ndf_image_free(&img);
  }
  /* an image in the primary HDU stays there, its extensions after it; .fz: after an empty
   * primary HDU */
  {
    const char *prim = io_at("prim.fits");
    int st = 0;
    short a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    fitsfile *f = new_fits(prim, SHORT_IMG, 2, (long[]){4, 3}, &st);
    fits_write_key_str(f, "TELESCOP", "JWST", NULL, &st);
    fits_write_img(f, TSHORT, 1, 12, a, &st);
    fits_create_img(f, SHORT_IMG, 1, (long[]){3}, &st);
    fits_write_key_str(f, "EXTNAME", "ERR", NULL, &st);
    fits_write_img(f, TSHORT, 1, 3, a, &st);
    fits_close_file(f, &st);
    fits_check(st, prim);
    if (read_ok(prim, &img)) {
      const char *out = io_at("prim_out.fits");
      CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s: %s", out, err);
      CHECK(num_hdus(out) == 2 && same_hdu(prim, 1, out, 1) && same_hdu(prim, 2, out, 2),
            "%s: not the file again", out);
      out = io_at("prim_out.fits.fz");
      CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s: %s", out, err);
      int z = 0;
      CHECK(num_hdus(out) == 3 && key_of(out, 1, "NAXIS", NULL) == 0 &&
                (key_of(out, 2, "TELESCOP", &z), z) && same_hdu(prim, 2, out, 3),
            "%s: not empty primary, compressed image, ERR", out);
      ndf_image_free(&img);
    }
    /* an image section is a copy cfitsio makes: written alone */
    snprintf(sel, sizeof sel, "%s[2:3,1:2]", prim);
    if (read_ok(sel, &img)) {
      const char *out = io_at("section_out.fits");
      CHECK(img.a.shape[0] == 2 && img.a.shape[1] == 2, "section shape");
      CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s: %s", out, err);
      CHECK(num_hdus(out) == 1, "%s: %d HDUs", out, num_hdus(out));
      ndf_image_free(&img);
    }
  }
  /* the file gone, or changed, since it was read: refused, nothing written */
  quiet_begin();
  static const char *how[] = {"gone", "replaced", "touched", "fifo"};
  for (int k = 0; k < 4; k++) {
    const char *src = io_at("src.fits");
    make_frame(src);
    snprintf(sel, sizeof sel, "%s[SCI]", src);
    if (!read_ok(sel, &img)) break;
    if (k == 0) unlink(src);
    if (k == 1) { /* another file by that name, the same bytes */
      make_frame(io_at("src2.fits"));
      rename(io_at("src2.fits"), src);
    }
    if (k == 2) {
      struct timespec t[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
      utimensat(AT_FDCWD, src, t, 0);
    }
    if (k == 3) {
      unlink(src);
      mkfifo(src, 0600);
    }
    char out[IO_PATH];
    io_path(out, "src_out.fits");
    alarm(20); /* a FIFO must not block the writer */
    ndf_status s = ndf_image_write(out, &img, err, sizeof err);
    alarm(0);
    CHECK(s == NDF_EIO && strstr(err, out) && strstr(err, src) &&
              strstr(err, k == 0   ? "is gone"
                          : k == 3 ? "FIFO"
                                   : "has changed"),
          "source %s: %s: %s", how[k], ndf_status_str(s), err);
    CHECK(!io_exists(out) && !io_leftovers(), "source %s: output left", how[k]);
    unlink(src);
    ndf_image_free(&img);
  }
  quiet_end();
}

/* ---- tile compression kept ---- */

/* A file: an empty primary HDU, the image (f32 or i16, 12 x 9, tiles of 6 x 9) compressed
 * with ctype (quantized floats unless lossless), and a plain ERR image. */
static void make_compressed(const char *path, int ctype, int type, int lossless, const void *v) {
  int st = 0;
  fitsfile *f = new_fits(path, BYTE_IMG, 0, NULL, &st);
  fits_set_compression_type(f, ctype, &st);
  fits_set_tile_dim(f, 2, (long[]){6, 9}, &st);
  if (lossless) fits_set_quantize_level(f, 0, &st);
  fits_create_img(f, type, 2, (long[]){12, 9}, &st);
  fits_write_key_str(f, "EXTNAME", "SCI", NULL, &st);
  fits_write_img(f, type == FLOAT_IMG ? TFLOAT : TSHORT, 1, 108, (void *)v, &st);
  fits_set_compression_type(f, 0, &st);
  fits_create_img(f, SHORT_IMG, 1, (long[]){3}, &st);
  fits_write_key_str(f, "EXTNAME", "ERR", NULL, &st);
  fits_write_img(f, TSHORT, 1, 3, (void *)v, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
}

/* The ZCMPTYPE of HDU hdu ("" if none). */
static void zcmptype(const char *path, int hdu, char type[FLEN_VALUE]) {
  fitsfile *f;
  int st = 0;
  type[0] = 0;
  fits_open_diskfile(&f, path, READONLY, &st);
  fits_movabs_hdu(f, hdu, NULL, &st);
  if (fits_read_key(f, TSTRING, "ZCMPTYPE", type, NULL, &st)) type[0] = 0;
  fits_close_file(f, &st);
  fits_clear_errmsg();
}

static void compression_kept(uint64_t *r) {
  static const struct {
    int ctype, type, lossless, negative;
    const char *name, *want;
  } cases[] = {{RICE_1, SHORT_IMG, 0, 1, "rice_i16", "RICE_1"},
               {GZIP_1, SHORT_IMG, 0, 1, "gzip1_i16", "GZIP_1"},
               {HCOMPRESS_1, SHORT_IMG, 0, 1, "hcomp_i16", "HCOMPRESS_1"},
               {PLIO_1, SHORT_IMG, 0, 0, "plio_i16", "PLIO_1"},
               {PLIO_1, SHORT_IMG, 0, 1, "plio_neg_i16", "RICE_1"},
               {GZIP_1, FLOAT_IMG, 1, 1, "gzip1_f32", "GZIP_1"},
               {GZIP_2, FLOAT_IMG, 1, 1, "gzip2_f32", "GZIP_2"},
               {RICE_1, FLOAT_IMG, 0, 1, "rice_f32", "GZIP_2"},
               {HCOMPRESS_1, FLOAT_IMG, 0, 1, "hcomp_f32", "GZIP_2"}};
  char err[512];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    short iv[108];
    float fv[108];
    for (int i = 0; i < 108; i++) {
      iv[i] = (short)t_randint(r, 0, 500);
      fv[i] = (float)t_randint(r, -1000, 1000) / 7.0f;
    }
    const int isf = cases[c].type == FLOAT_IMG;
    char name[64];
    snprintf(name, sizeof name, "z_%s.fits", cases[c].name);
    const char *path = io_at(name);
    make_compressed(path, cases[c].ctype, cases[c].type, cases[c].lossless,
                    isf ? (void *)fv : (void *)iv);
    ndf_image img;
    if (!read_ok(path, &img)) continue;
    /* a filter's values: floats no quantization holds, integers of the file's range */
    for (int i = 0; i < 108; i++) {
      if (isf)
        ((float *)img.a.data)[i] = ((float *)img.a.data)[i] * 1.0001f + 1e-3f * (float)i;
      else
        ((int16_t *)img.a.data)[i] = (int16_t)((i * 37) % 400 - (cases[c].negative ? 100 : 0));
    }
    for (int k = 0; k < 2; k++) {
      snprintf(name, sizeof name, "z_%s_out.fits%s", cases[c].name, k ? ".gz" : "");
      const char *out = io_at(name);
      CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s: %s", out, err);
      char plain[IO_PATH + 16], type[FLEN_VALUE];
      snprintf(plain, sizeof plain, "%s.plain", out);
      if (k) {
        char cmd[2 * IO_PATH + 64];
        snprintf(cmd, sizeof cmd, "gzip -dc '%s' > '%s'", out, plain);
        CHECK(system(cmd) == 0, "%s: not gzipped", out);
      }
      const char *file = k ? plain : out;
      zcmptype(file, 2, type);
      CHECK(!strcmp(type, cases[c].want), "%s: compressed with '%s', not %s", out, type,
            cases[c].want);
      CHECK(num_hdus(file) == 3 && same_hdu(path, 3, file, 3), "%s: ERR not kept", out);
      double t1 = key_of(file, 2, "ZTILE1", NULL), t2 = key_of(file, 2, "ZTILE2", NULL);
      CHECK(t1 == 6 && t2 == 9, "%s: tiles %g x %g, not the file's 6 x 9", out, t1, t2);
      ndf_image back;
      if (read_ok(out, &back)) {
        CHECK(same_shape(&img.a, &back.a) && !differ(&img.a, &back.a), "%s: not lossless", out);
        ndf_image_free(&back);
      }
      if (k) unlink(plain);
    }
    ndf_image_free(&img);
  }
  /* a plain image stays plain, a compressed neighbour stays compressed */
  const char *path = io_at("z_mixed.fits");
  int st = 0;
  short v[108] = {0};
  fitsfile *f = new_fits(path, SHORT_IMG, 2, (long[]){12, 9}, &st);
  fits_write_img(f, TSHORT, 1, 108, v, &st);
  fits_set_compression_type(f, RICE_1, &st);
  fits_create_img(f, SHORT_IMG, 2, (long[]){12, 9}, &st);
  fits_write_img(f, TSHORT, 1, 108, v, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
  ndf_image img;
  if (read_ok(path, &img)) {
    const char *out = io_at("z_mixed_out.fits");
    int z1 = 1, z2 = 0;
    CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s: %s", out, err);
    key_of(out, 1, "NAXIS", &z1);
    key_of(out, 2, "NAXIS", &z2);
    CHECK(!z1 && z2 && same_hdu(path, 2, out, 2), "%s: compressed %d %d", out, z1, z2);
    ndf_image_free(&img);
  }
}

/* ---- the image's origin in its file's grid ---- */

static void origin_moves_crpix(void) {
  const char *path = io_at("wcs.fits");
  int st = 0;
  float v[20] = {0};
  fitsfile *f = new_fits(path, FLOAT_IMG, 2, (long[]){5, 4}, &st);
  fits_write_key_str(f, "CTYPE1", "RA---TAN", NULL, &st);
  fits_write_key_str(f, "CTYPE2", "DEC--TAN", NULL, &st);
  fits_write_key_dbl(f, "CRPIX1", 10.5, -12, "reference pixel x", &st);
  fits_write_key_dbl(f, "CRPIX2", 20, -12, "reference pixel y", &st);
  fits_write_key_dbl(f, "CRVAL1", 150, -12, NULL, &st);
  fits_write_key_dbl(f, "CDELT1", -1e-4, -12, NULL, &st);
  fits_write_key_str(f, "CTYPE1A", "LINEAR", NULL, &st);
  fits_write_key_dbl(f, "CRPIX1A", 3, -12, NULL, &st);
  fits_write_key_dbl(f, "CRPIX2A", 0.25, -12, NULL, &st);
  fits_write_key_str(f, "CTYPE2B", "LINEAR", NULL, &st); /* CRPIXnB: 0 */
  fits_write_key_dbl(f, "LTV1", 5, -12, NULL, &st);
  fits_write_key_dbl(f, "LTM1_1", 1, -12, NULL, &st);
  fits_write_img(f, TFLOAT, 1, 20, v, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
  ndf_image img;
  if (!read_ok(path, &img)) return;
  char err[512];
  const char *out = io_at("wcs_out.fits");
  /* origin 0: the cards as they were */
  CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s: %s", out, err);
  CHECK(same_hdu(path, 1, out, 1), "origin 0: the HDU changed");
  /* grown by 3 rows and 2 columns before (ks --output full), then cropped by 1 */
  static const struct {
    int64_t o[2];
    double crpix1, crpix2, crpix1a, crpix2a, crpix1b, crpix2b, ltv1, ltv2;
  } cases[] = {{{-3, -2}, 12.5, 23, 5, 3.25, 2, 3, 7, 3},
               {{1, 1}, 9.5, 19, 2, -0.75, -1, -1, 4, -1}};
  for (int c = 0; c < 2; c++) {
    img.origin[0] = cases[c].o[0];
    img.origin[1] = cases[c].o[1];
    CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "%s: %s", out, err);
    static const char *keys[] = {"CRPIX1",  "CRPIX2",  "CRPIX1A", "CRPIX2A",
                                 "CRPIX1B", "CRPIX2B", "LTV1",    "LTV2"};
    const double *want = &cases[c].crpix1;
    for (int k = 0; k < 8; k++) {
      double got = key_of(out, 1, keys[k], NULL);
      CHECK(got == want[k], "origin %lld, %lld: %s = %.17g, not %.17g", (long long)cases[c].o[0],
            (long long)cases[c].o[1], keys[k], got, want[k]);
    }
    /* the rest as it was, and the comments kept */
    int n0, n1;
    char *c0 = cards_of(path, 1, &n0), *c1 = cards_of(out, 1, &n1);
    CHECK(n1 == n0 + 3 && strstr(c1, "/ reference pixel x") && strstr(c1, "CRVAL1  ="),
          "origin: %d cards, not %d + 3:\n%s", n1, n0, c1);
    free(c0);
    free(c1);
  }
  ndf_image_free(&img);
}

/* ---- bounds and special files ---- */

static void limits(void) {
  char err[512];
  double *v = calloc(512 * 520, sizeof *v); /* 2 MiB */
  ndf_image img;
  ndf_image_init(&img);
  img.a = ndf_array_contiguous(NDF_F64, 2, (int64_t[]){512, 520}, v);
  static const char *names[] = {"lim.fits", "lim.fits.gz", "lim.fits.fz"};
  for (int k = 0; k < 3; k++)
    CHECK(ndf_image_write(io_at(names[k]), &img, err, sizeof err) == NDF_OK, "%s", err);
  quiet_begin();
  setenv("NDF_READ_LIMIT", "1M", 1);
  for (int k = 0; k < 3; k++)
    io_read_fails(io_at(names[k]), NDF_ENOMEM, "read limit");
  setenv("NDF_READ_LIMIT", "1 megabyte", 1);
  io_read_fails(io_at(names[0]), NDF_EINVAL, "NDF_READ_LIMIT");
  unsetenv("NDF_READ_LIMIT");
  ndf_io_set_read_limit(1 << 20);
  io_read_fails(io_at(names[0]), NDF_ENOMEM, "read limit");
  ndf_io_set_read_limit(3 << 20);
  ndf_image back;
  for (int k = 0; k < 3; k++)
    if (read_ok(io_at(names[k]), &back)) ndf_image_free(&back);
  ndf_io_set_read_limit(1 << 20);
  /* a tile-compressed image declaring 2000 x 2000 pixels in a small file: refused before
   * cfitsio decompresses */
  {
    const char *path = io_at("declared.fits");
    int st = 0;
    short s[16] = {0};
    fitsfile *f = new_fits(path, BYTE_IMG, 0, NULL, &st);
    fits_set_compression_type(f, GZIP_1, &st);
    fits_set_tile_dim(f, 2, (long[]){4, 4}, &st);
    fits_create_img(f, SHORT_IMG, 2, (long[]){4, 4}, &st);
    fits_write_img(f, TSHORT, 1, 16, s, &st);
    fits_close_file(f, &st);
    fits_check(st, path);
    size_t n;
    char *b = (char *)io_read_file(path, &n);
    static const char *keys[] = {"ZNAXIS1 =", "ZNAXIS2 =", "ZTILE1  =", "ZTILE2  ="};
    for (int k = 0; k < 4; k++) {
      char *c = NULL;
      for (size_t i = 0; b && i + 80 <= n && !c; i += 80)
        if (!strncmp(b + i, keys[k], 9)) c = b + i;
      CHECK(c != NULL, "no %s in %s", keys[k], path);
      if (c) memcpy(c + 10, "                2000", 20);
    }
    io_write_file(path, b, n);
    free(b);
    io_read_fails(path, NDF_ENOMEM, "read limit");
  }
  ndf_io_set_read_limit(0);
  /* a FIFO or a directory is refused by the reader itself, without blocking */
  const char *fifo = io_at("pipe.fits");
  mkfifo(fifo, 0600);
  ndf_image t;
  ndf_image_init(&t);
  alarm(20);
  CHECK(ndf__fits_read(fifo, NULL, &t, err, sizeof err) == NDF_EIO && strstr(err, "FIFO") &&
            strstr(err, fifo),
        "FIFO: %s", err);
  char sel[IO_PATH + 8];
  snprintf(sel, sizeof sel, "%s[1]", fifo);
  CHECK(ndf__fits_read(sel, NULL, &t, err, sizeof err) == NDF_EIO && strstr(err, "FIFO"),
        "FIFO[1]: %s", err);
  alarm(0);
  mkdir(io_at("dir.fits"), 0700);
  CHECK(ndf__fits_read(io_at("dir.fits"), NULL, &t, err, sizeof err) == NDF_EIO &&
            strstr(err, "directory"),
        "directory: %s", err);
  quiet_end();
  free(v);
}

/* A gzipped file short of its last 1 to 9 bytes (the CRC and length), or with a byte of them
 * or of the data changed: cfitsio reads some of these as whole; refused here. */
static void gzip_trailer(void) {
  char err[512];
  int16_t v[3000];
  for (int i = 0; i < 3000; i++)
    v[i] = (int16_t)(i * 13);
  ndf_image img;
  ndf_image_init(&img);
  img.a = ndf_array_contiguous(NDF_I16, 2, (int64_t[]){60, 50}, v);
  const char *path = io_at("trail.fits.gz");
  CHECK(ndf_image_write(path, &img, err, sizeof err) == NDF_OK, "%s", err);
  size_t n;
  unsigned char *gz = io_read_file(path, &n);
  if (!gz) return;
  quiet_begin();
  for (size_t k = 1; k <= 9; k++) {
    char name[32];
    snprintf(name, sizeof name, "trail_cut%zu.fits.gz", k);
    io_write_file(io_at(name), gz, n - k);
    io_read_fails(io_at(name), NDF_EINVAL, "truncated gzip");
  }
  static const struct {
    long at;
    const char *needle;
  } flips[] = {{-8, "CRC"}, {-5, "CRC"}, {-4, "claims"}, {-1, "claims"}, {-400, NULL}};
  for (size_t k = 0; k < sizeof flips / sizeof flips[0]; k++) {
    char name[32];
    snprintf(name, sizeof name, "trail_flip%zu.fits.gz", k);
    gz[(long)n + flips[k].at] ^= 0x21;
    io_write_file(io_at(name), gz, n);
    gz[(long)n + flips[k].at] ^= 0x21;
    io_read_fails(io_at(name), NDF_EINVAL, flips[k].needle);
  }
  quiet_end();
  free(gz);
}

/* ---- spacing and time ---- */

static void spacing_and_time(void) {
  const char *path = io_at("cube.fits");
  int st = 0;
  float v[60] = {0};
  fitsfile *f = new_fits(path, FLOAT_IMG, 3, (long[]){5, 4, 3}, &st);
  /* x and y rotated by 90 degrees (the CD matrix's diagonal is 0), 0.5 mm pixels; time */
  fits_write_key_str(f, "CUNIT1", "mm", NULL, &st);
  fits_write_key_str(f, "CUNIT2", "mm", NULL, &st);
  fits_write_key_dbl(f, "CD1_1", 0, -12, NULL, &st);
  fits_write_key_dbl(f, "CD1_2", -0.5, -12, NULL, &st);
  fits_write_key_dbl(f, "CD2_1", 0.5, -12, NULL, &st);
  fits_write_key_dbl(f, "CD2_2", 0, -12, NULL, &st);
  fits_write_key_str(f, "CTYPE3", "UTC", NULL, &st);
  fits_write_key_str(f, "CUNIT3", "s", NULL, &st);
  fits_write_img(f, TFLOAT, 1, 60, v, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
  ndf_image img;
  if (read_ok(path, &img)) {
    CHECK(img.time_axis == 0 && img.spacing[0] == 0 && fabs(img.spacing[1] - 0.5) < 1e-15 &&
              fabs(img.spacing[2] - 0.5) < 1e-15,
          "rotated: time_axis %d, spacing %g %g %g", img.time_axis, img.spacing[0], img.spacing[1],
          img.spacing[2]);
    ndf_image_free(&img);
  }
  /* a length axis with a zero pixel size: NaN, not 0 (unknown) */
  f = new_fits(path, FLOAT_IMG, 2, (long[]){5, 4}, &st);
  fits_write_key_str(f, "CUNIT1", "mm", NULL, &st);
  fits_write_key_dbl(f, "CDELT1", 0, -12, NULL, &st);
  fits_write_key_str(f, "CUNIT2", "deg", NULL, &st);
  fits_write_img(f, TFLOAT, 1, 20, v, &st);
  fits_close_file(f, &st);
  fits_check(st, path);
  if (read_ok(path, &img)) {
    CHECK(isnan(img.spacing[1]) && img.spacing[0] == 0 && img.time_axis == -1,
          "zero CDELT1: spacing %g %g, time_axis %d", img.spacing[0], img.spacing[1],
          img.time_axis);
    ndf_image_free(&img);
  }
}

/* ---- bad files ---- */

/* A FITS file of the given header cards (END added) followed by nbytes of data. */
static void write_header(const char *path, const char *const *cards, int ncards, size_t nbytes) {
  size_t hbytes = (size_t)((ncards + 1) * 80 + 2879) / 2880 * 2880;
  size_t total = hbytes + (nbytes + 2879) / 2880 * 2880;
  char *b = malloc(total);
  memset(b, ' ', hbytes);
  memset(b + hbytes, 0, total - hbytes);
  for (int i = 0; i < ncards; i++)
    memcpy(b + 80 * i, cards[i], strlen(cards[i]));
  memcpy(b + 80 * ncards, "END", 3);
  io_write_file(path, b, total);
  free(b);
}

#define CARD(k, v) k "= " v

/* Overwrites the 80-character card at p with text, padded with blanks. */
static void set_card(char *p, const char *text) {
  memset(p, ' ', 80);
  memcpy(p, text, strlen(text));
}

static void bad_files(void) {
  /* a good file, cut at several points */
  int16_t v[3000];
  for (int i = 0; i < 3000; i++)
    v[i] = (int16_t)(i * 7 - 5000);
  ndf_image img;
  ndf_image_init(&img);
  img.a = ndf_array_contiguous(NDF_I16, 2, (int64_t[]){60, 50}, v);
  char err[512];
  CHECK(ndf_image_write(io_at("good.fits"), &img, err, sizeof err) == NDF_OK, "good: %s", err);
  img.a = ndf_array_contiguous(NDF_I16, 2, (int64_t[]){60, 50}, v);
  CHECK(ndf_image_write(io_at("good.fits.gz"), &img, err, sizeof err) == NDF_OK, "good.gz: %s",
        err);
  size_t n, ngz;
  unsigned char *good = io_read_file(io_at("good.fits"), &n),
                *gz = io_read_file(io_at("good.fits.gz"), &ngz);
  CHECK(good && n == 2880 * 4, "good.fits is %zu bytes", n);
  quiet_begin();
  size_t cuts[] = {0, 1, 8, 80, 2000, 2879, 2880, 2881, 5000, 8759, 8760};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    char name[64];
    snprintf(name, sizeof name, "cut%zu.fits", cuts[i]);
    io_write_file(io_at(name), good, cuts[i]);
    io_read_fails(io_at(name), NDF_EINVAL, cuts[i] >= 2880 ? "truncated: " : NULL);
  }
  io_write_file(io_at("cutgz.fits.gz"), gz, ngz / 2);
  io_read_fails(io_at("cutgz.fits.gz"), NDF_EINVAL, NULL);
  io_write_file(io_at("cutgz2.fits.gz"), gz, 10);
  io_read_fails(io_at("cutgz2.fits.gz"), NDF_EINVAL, "truncated gzip");
  /* a gzip trailer claiming 4 GB: refused before cfitsio allocates it */
  memset(gz + ngz - 4, 0xff, 4);
  io_write_file(io_at("bomb.fits.gz"), gz, ngz);
  io_read_fails(io_at("bomb.fits.gz"), NDF_EINVAL, "claims 4294967295 bytes");
  /* bad magic */
  memcpy(good, "SIMPLX", 6);
  io_write_file(io_at("magic.fits"), good, n);
  io_read_fails(io_at("magic.fits"), NDF_EINVAL, "not a FITS file");
  io_write_file(io_at("text.fits"), "hello, world\n", 13);
  io_read_fails(io_at("text.fits"), NDF_EINVAL, NULL);
  free(good);
  free(gz);
  /* bad header fields */
  const char *simple = CARD("SIMPLE  ", "                   T"),
             *b16 = CARD("BITPIX  ", "                  16"),
             *n2 = CARD("NAXIS   ", "                   2"),
             *x4 = CARD("NAXIS1  ", "                   4"),
             *y3 = CARD("NAXIS2  ", "                   3");
  write_header(io_at("bitpix.fits"),
               (const char *[]){simple, CARD("BITPIX  ", "                  12"), n2, x4, y3}, 5,
               24);
  io_read_fails(io_at("bitpix.fits"), NDF_EINVAL, NULL);
  write_header(io_at("naxis_neg.fits"),
               (const char *[]){simple, b16, CARD("NAXIS   ", "                  -1")}, 3, 0);
  io_read_fails(io_at("naxis_neg.fits"), NDF_EINVAL, NULL);
  write_header(io_at("naxis1_0.fits"),
               (const char *[]){simple, b16, n2, CARD("NAXIS1  ", "                   0"), y3}, 5,
               0);
  io_read_fails(io_at("naxis1_0.fits"), NDF_EUNSUPPORTED, "empty image: NAXIS1 = 0");
  write_header(io_at("naxis5.fits"),
               (const char *[]){simple, b16, CARD("NAXIS   ", "                   5"), x4, y3,
                                CARD("NAXIS3  ", "                   1"),
                                CARD("NAXIS4  ", "                   1"),
                                CARD("NAXIS5  ", "                   2")},
               8, 96);
  io_read_fails(io_at("naxis5.fits"), NDF_EUNSUPPORTED, "at most 4");
  write_header(io_at("huge.fits"),
               (const char *[]){simple, b16, n2, CARD("NAXIS1  ", "          1000000000"),
                                CARD("NAXIS2  ", "          1000000000")},
               5, 24);
  io_read_fails(io_at("huge.fits"), NDF_EINVAL, "truncated: ");
  write_header(io_at("overflow.fits"),
               (const char *[]){simple, b16, CARD("NAXIS   ", "                   3"),
                                CARD("NAXIS1  ", " 9000000000000000000"),
                                CARD("NAXIS2  ", " 9000000000000000000"),
                                CARD("NAXIS3  ", "                   2")},
               6, 24);
  io_read_fails(io_at("overflow.fits"), 0, NULL);
  write_header(io_at("empty.fits"),
               (const char *[]){simple, b16, CARD("NAXIS   ", "                   0")}, 3, 0);
  io_read_fails(io_at("empty.fits"), NDF_EUNSUPPORTED, "no image");
  write_header(io_at("nosimple.fits"), (const char *[]){b16, n2, x4, y3}, 4, 24);
  io_read_fails(io_at("nosimple.fits"), NDF_EINVAL, NULL);
  { /* no END card at all */
    char blk[2880];
    memset(blk, ' ', sizeof blk);
    memcpy(blk, simple, strlen(simple));
    io_write_file(io_at("noend.fits"), blk, sizeof blk);
    io_read_fails(io_at("noend.fits"), NDF_EINVAL, NULL);
  }
  { /* a tile-compressed image with a tile of 0 rows (cfitsio 4.2 divides by it) */
    ndf_image small;
    ndf_image_init(&small);
    small.a = ndf_array_contiguous(NDF_I16, 2, (int64_t[]){6, 7}, v);
    CHECK(ndf_image_write(io_at("tiles.fits.fz"), &small, err, sizeof err) == NDF_OK, "%s", err);
    size_t nz;
    char *z = (char *)io_read_file(io_at("tiles.fits.fz"), &nz), *t = NULL;
    for (size_t i = 0; z && i + 80 <= nz && !t; i += 80)
      if (!strncmp(z + i, "ZTILE2  =", 9)) t = z + i;
    CHECK(t != NULL, "no ZTILE2 card in tiles.fits.fz");
    if (t) {
      memcpy(t + 10, "                   0", 20);
      io_write_file(io_at("tile0.fits"), z, nz);
      io_read_fails(io_at("tile0.fits"), NDF_EINVAL, "ZTILE2 = 0");
      memcpy(t + 10, "                  99", 20);
      io_write_file(io_at("tile99.fits"), z, nz);
      io_read_fails(io_at("tile99.fits"), NDF_EINVAL, "ZTILE2 = 99");
      memcpy(t + 10, "                   1", 20);
      { /* a tile's descriptor past the heap (cfitsio would size its buffer by it) */
        size_t end = 0, seen = 0;
        for (size_t i = 0; i + 80 <= nz && !end; i += 80)
          if (!strncmp(z + i, "END     ", 8) && ++seen == 2) end = (i / 2880 + 1) * 2880;
        const char *tf = strstr(z, "TFORM1  = '1");
        CHECK(end && end + 8 <= nz && tf, "no table data in tiles.fits.fz");
        if (end && end + 8 <= nz && tf) {
          char keep[8];
          memcpy(keep, z + end, 8);
          /* the element count: 32 bits (P) or 64 (Q), big-endian */
          memset(z + end, 0, 8);
          memset(z + end + (tf[12] == 'Q' ? 4 : 0), 0x7f, 1);
          io_write_file(io_at("descriptor.fits"), z, nz);
          io_read_fails(io_at("descriptor.fits"), NDF_EINVAL, "heap offset");
          memcpy(z + end, keep, 8);
          /* the first tile's bytes cut to 3 (cfitsio's Rice decoder would read on past them) */
          z[end + (tf[12] == 'Q' ? 7 : 3)] = 3;
          io_write_file(io_at("rice_cut.fits"), z, nz);
          io_read_fails(io_at("rice_cut.fits"), NDF_EINVAL,
                        "tile 1's Rice stream runs past its 3 bytes");
          memcpy(z + end, keep, 8);
        }
      }
      char *bp = strstr(z, "ZVAL2   =                    2"); /* BYTEPIX of i16 */
      CHECK(bp && strstr(z, "ZNAME2  = 'BYTEPIX"), "no BYTEPIX in tiles.fits.fz");
      if (bp) {
        bp[29] = '3';
        io_write_file(io_at("bytepix3.fits"), z, nz);
        io_read_fails(io_at("bytepix3.fits"), NDF_EINVAL, "BYTEPIX = 3");
        bp[29] = '2';
      }
      /* BLOCKSIZE 0 under another name: cfitsio takes ZVAL1 whatever ZNAME1 says, and divides
       * by it */
      char *bs = strstr(z, "ZVAL1   =                   32"), *bn = strstr(z, "'BLOCKSIZE'");
      CHECK(bs && bn, "no BLOCKSIZE in tiles.fits.fz");
      if (bs && bn) {
        memcpy(bn, "'BLOCKSIZ ", 10);
        memcpy(bs + 28, " 0", 2);
        io_write_file(io_at("blocksize0.fits"), z, nz);
        io_read_fails(io_at("blocksize0.fits"), NDF_EINVAL, "BLOCKSIZE = 0");
        memcpy(bn, "'BLOCKSIZE", 10);
        memcpy(bs + 28, "32", 2);
      }
      /* a long unquoted string where cfitsio reads an integer (its message overflows) */
      char *zb = strstr(z, "ZBITPIX =");
      CHECK(zb != NULL, "no ZBITPIX in tiles.fits.fz");
      if (zb) {
        char keep[80];
        memcpy(keep, zb, 80);
        memcpy(zb + 10, "'a long string that does not end in a quote", 44);
        io_write_file(io_at("zbitpix.fits"), z, nz);
        io_read_fails(io_at("zbitpix.fits"), NDF_EINVAL, "ZBITPIX is not a number");
        memcpy(zb, keep, 80);
      }
      char sel[600];
      snprintf(sel, sizeof sel, "%s[1]", io_at("tile99.fits"));
      err[0] = 0;
      CHECK(ndf_image_read(sel, NULL, &small, err, sizeof err) == NDF_EINVAL &&
                strstr(err, "ZTILE2 = 99"),
            "%s: %s", sel, err);
    }
    free(z);
  }
  /* fuzzing's find: a Rice stream whose runs of zero bits go on past its tile's bytes */
  io_read_fails(NDF_SOURCE_DIR "/fuzz/corpus/fits/rice-overrun.fits", NDF_EINVAL,
                "tile 3's Rice stream runs past its 14 bytes");
  /* fuzzing's finds: a binary table's unquoted TTYPE1 of 70 characters, which cfitsio copies
   * into its 70-byte column name (a fortified abort); TFIELDS = 7777777777777777777777, which
   * reached cfitsio as LONG_MAX and sized its calloc of columns */
  io_read_fails(NDF_SOURCE_DIR "/fuzz/corpus/fits/ttype-unquoted70.fits", NDF_EINVAL,
                "HDU 1: TTYPE1 is not a quoted string and longer than a column name");
  io_read_fails(NDF_SOURCE_DIR "/fuzz/corpus/fits/tfields-overflow.fits", NDF_EINVAL,
                "HDU 1: card 8 should be TFIELDS with an integer value");
  /* fuzzing's find: a repeated PCOUNT card not a number, which cfitsio's search by name found
   * before the first (its message on it overflows a buffer) */
  io_read_fails(NDF_SOURCE_DIR "/fuzz/corpus/fits/pcount-repeated.fits", NDF_EINVAL,
                "HDU 1: PCOUNT is not a number");
  /* and ZTILE2 = 0 behind a keyword in lower case (cfitsio finds keywords in any case) */
  io_read_fails(NDF_SOURCE_DIR "/fuzz/corpus/fits/ztile0-lowercase.fits", NDF_EINVAL, "ZTILE2 = 0");
  { /* an extension's required keywords out of place, or not integers */
    int st = 0;
    fitsfile *f = new_fits(io_at("ext.fits"), BYTE_IMG, 0, NULL, &st);
    fits_create_img(f, SHORT_IMG, 2, (long[]){3, 2}, &st);
    fits_write_img(f, TSHORT, 1, 6, v, &st);
    fits_close_file(f, &st);
    fits_check(st, "ext.fits");
    size_t ne;
    char *e = (char *)io_read_file(io_at("ext.fits"), &ne);
    set_card(e + 2880 + 80, "BITPIX  = (                  16");
    io_write_file(io_at("ext_bitpix.fits"), e, ne);
    io_read_fails(io_at("ext_bitpix.fits"), NDF_EINVAL, "card 2 should be BITPIX");
    set_card(e + 2880 + 80, "NAXIS   =                    2");
    io_write_file(io_at("ext_order.fits"), e, ne);
    io_read_fails(io_at("ext_order.fits"), NDF_EINVAL, "card 2 should be BITPIX");
    set_card(e + 2880 + 80, "BITPIX  =                   16");
    set_card(e + 2880 + 240, "NAXIS1  =                    3END of the value");
    io_write_file(io_at("ext_naxis1.fits"), e, ne);
    io_read_fails(io_at("ext_naxis1.fits"), NDF_EINVAL, "card 4 should be NAXIS1");
    free(e);
  }
  {
    static const char zip[] = "PK\x03\x04 not a zip file really, but zip's magic";
    io_write_file(io_at("zip.fits"), zip, sizeof zip - 1);
  }
  io_read_fails(io_at("zip.fits"), NDF_EUNSUPPORTED, "zip");
  io_read_fails(io_at("missing.fits"), NDF_EIO, "No such file");
  mkdir(io_at("adir.fits"), 0700);
  io_read_fails(io_at("adir.fits"), NDF_EIO, "directory");
  quiet_end();
}

/* ---- failed writes ---- */

/* Writes img to path in a child whose files may not grow past limit bytes; its status. */
static int write_limited(const char *path, const ndf_image *img, long limit) {
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &rl);
    char err[512];
    _exit(ndf_image_write(path, img, err, sizeof err) == NDF_OK ? 0 : 3);
  }
  int s = 0;
  waitpid(pid, &s, 0);
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

static void failed_writes(uint64_t *r) {
  char err[512];
  int64_t shape[2] = {100, 100};
  t_arr src;
  ndf_image img = io_random_image(&src, r, NDF_F64, 2, shape, 0);
  quiet_begin();
  CHECK(ndf_image_write("/nonexistent/dir/y.fits", &img, err, sizeof err) == NDF_EIO &&
            strstr(err, "/nonexistent/dir/y.fits"),
        "write to a missing directory: %s", err);
  /* a write that fails part way (the file may not grow past 10 000 bytes) */
  static const char *names[] = {"big.fits", "big.fits.gz", "big.fits.fz"};
  for (int i = 0; i < 3; i++) {
    CHECK(write_limited(io_at(names[i]), &img, 10000) == 3, "%s: limited write succeeded",
          names[i]);
    CHECK(!io_exists(io_at(names[i])), "%s left after a failed write", names[i]);
  }
  CHECK(io_files_with(".big") == 0, "temporary files left behind");
  /* an existing file survives a failed write */
  io_write_file(io_at("keep.fits"), "keep", 4);
  CHECK(write_limited(io_at("keep.fits"), &img, 10000) == 3, "keep: limited write succeeded");
  size_t n = 0;
  unsigned char *b = io_read_file(io_at("keep.fits"), &n);
  CHECK(b && n == 4 && !memcmp(b, "keep", 4), "existing file clobbered");
  free(b);
  ndf_image four = img; /* tile compression takes 3 axes at most */
  four.a = ndf_array_contiguous(NDF_F64, 4, (int64_t[]){2, 5, 10, 100}, img.a.data);
  CHECK(ndf_image_write(io_at("four.fits.fz"), &four, err, sizeof err) == NDF_EUNSUPPORTED &&
            strstr(err, "at most 3 axes") && !io_exists(io_at("four.fits.fz")),
        "4-d .fz: %s", err);
  ndf_image bad = img;
  bad.a.dtype = (ndf_dtype)0;
  CHECK(ndf_image_write(io_at("bad.fits"), &bad, err, sizeof err) != NDF_OK &&
            !io_exists(io_at("bad.fits")),
        "invalid array written");
  quiet_end();
  /* io_convert: a corrupt input, and a write that fails part way, leave no output */
  CHECK(ndf_image_write(io_at("in.npy"), &img, err, sizeof err) == NDF_OK, "in.npy: %s", err);
  io_convert_fails("", io_at("magic.fits"), io_at("o1.fits"));
  io_convert_fails("trap '' XFSZ; ulimit -f 16; exec", io_at("in.npy"), io_at("o2.fits"));
  t_arr_free(&src, NULL);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_io_fits PATH/TO/io_convert\n");
    return 2;
  }
  io_convert_at = argv[1];
  if (io_dir_make("fits")) return 1;
  uint64_t r = t_seed();
  for (ndf_dtype t = NDF_U8; t <= NDF_F64; t++)
    for (int nd = 1; nd <= 4; nd++) {
      round_trip(&r, t, nd, ".fits", nd == 3);
      round_trip(&r, t, nd, nd == 2 || nd == 3 ? ".fits.fz" : ".fits.gz", 0);
    }
  widened(&r);
  cards_and_spacing();
  hdus();
  companions();
  compression_kept(&r);
  origin_moves_crpix();
  limits();
  gzip_trailer();
  spacing_and_time();
  cross_format(&r);
  bad_files();
  failed_writes(&r);
  return io_finish("fits", 0);
}
