/* SPDX-License-Identifier: BSD-3-Clause */
/* test_io_nifti.c - NIfTI round trips (every dtype, 1-4 axes, .nii and .nii.gz), the
 * header kept through a same-format round trip, the widened and scaled sample types, voxel
 * sizes and the time axis, the affines moved with the array's origin, and clear errors on
 * corrupt files (a gzip stream cut short or with a wrong CRC), on special files and over
 * the read limit. Reference files are built here byte by byte from the NIfTI-1/2 layouts,
 * not by nifticlib.
 *
 *   test_io_nifti                     the checks
 *   test_io_nifti --grow R IN OUT     IN grown by R voxels on each side of its spatial axes
 *                                     (R < 0: cropped by -R), origin -R, written to OUT: for
 *                                     io_nifti_check.py, whose nibabel checks the affines
 */
#include <signal.h>
#include <zlib.h>

#include "io/formats.h"
#include "io/npy.h"
#include "io_test.h"

/* ---- files by hand ---- */

typedef struct thdr {
  int version, big_endian;
  int64_t dim[8];
  int datatype;
  double pixdim[8], vox_offset, slope, inter;
  int xyz_units, time_units, qform, sform;
  double quat[3], qoff[3], srow[3][4];
  int intent_code;
  double intent_p[3];
  const char *intent_name, *descrip, *aux_file, *magic; /* magic NULL: the right one */
  double cal_min, cal_max, toffset, slice_duration;
  int slice_code, slice_start, slice_end, dim_info;
} thdr;

static void put(unsigned char *b, size_t off, const void *v, size_t n, int swap) {
  for (size_t i = 0; i < n; i++)
    b[off + i] = ((const unsigned char *)v)[swap ? n - 1 - i : i];
}

/* put16 ... putd: v as the field's type at byte o of b, byte-swapped when s. */
#define PUT(name, T, A)                                                                            \
  static void name(unsigned char *b, size_t o, A v, int s) {                                       \
    T x = (T)v;                                                                                    \
    put(b, o, &x, sizeof x, s);                                                                    \
  }
PUT(put16, int16_t, int)
PUT(put32, int32_t, int)
PUT(put64, int64_t, int64_t)
PUT(putf, float, double)
PUT(putd, double, double)
#undef PUT

/* get16 ... getd: the field of that type at byte o of b (native order). */
#define GET(name, T)                                                                               \
  static T name(const unsigned char *b, size_t o) {                                                \
    T x;                                                                                           \
    memcpy(&x, b + o, sizeof x);                                                                   \
    return x;                                                                                      \
  }
GET(get16, int16_t)
GET(get32, int32_t)
GET(get64, int64_t)
GET(getf, float)
GET(getd, double)
#undef GET

static int bytes_per(int datatype) {
  switch (datatype) {
  case 2:
  case 256: return 1;
  case 4:
  case 512: return 2;
  case 8:
  case 16:
  case 768: return 4;
  case 32:
  case 64:
  case 1024:
  case 1280: return 8;
  case 128: return 3;
  case 2304: return 4;
  }
  return 1;
}

/* The header (and the 4-byte extender) into b, whose size it returns. */
static size_t make_header(const thdr *h, unsigned char *b) {
  const int s = h->big_endian;
  memset(b, 0, 544);
  if (h->version == 1) {
    put32(b, 0, 348, s);
    for (int i = 0; i < 8; i++) {
      put16(b, 40 + 2 * (size_t)i, (int)h->dim[i], s);
      putf(b, 76 + 4 * (size_t)i, h->pixdim[i], s);
    }
    putf(b, 56, h->intent_p[0], s);
    putf(b, 60, h->intent_p[1], s);
    putf(b, 64, h->intent_p[2], s);
    put16(b, 68, h->intent_code, s);
    put16(b, 70, h->datatype, s);
    put16(b, 72, 8 * bytes_per(h->datatype), s);
    put16(b, 74, h->slice_start, s);
    putf(b, 108, h->vox_offset ? h->vox_offset : 352, s);
    putf(b, 112, h->slope, s);
    putf(b, 116, h->inter, s);
    put16(b, 120, h->slice_end, s);
    b[122] = (unsigned char)h->slice_code;
    b[123] = (unsigned char)(h->xyz_units | h->time_units);
    putf(b, 124, h->cal_max, s);
    putf(b, 128, h->cal_min, s);
    putf(b, 132, h->slice_duration, s);
    putf(b, 136, h->toffset, s);
    b[39] = (unsigned char)h->dim_info;
    if (h->descrip) memcpy(b + 148, h->descrip, strlen(h->descrip));
    if (h->aux_file) memcpy(b + 228, h->aux_file, strlen(h->aux_file));
    put16(b, 252, h->qform, s);
    put16(b, 254, h->sform, s);
    for (int i = 0; i < 3; i++) {
      putf(b, 256 + 4 * (size_t)i, h->quat[i], s);
      putf(b, 268 + 4 * (size_t)i, h->qoff[i], s);
      for (int j = 0; j < 4; j++)
        putf(b, 280 + 16 * (size_t)i + 4 * (size_t)j, h->srow[i][j], s);
    }
    if (h->intent_name) memcpy(b + 328, h->intent_name, strlen(h->intent_name));
    memcpy(b + 344, h->magic ? h->magic : "n+1", 4);
    return 352;
  }
  put32(b, 0, 540, s);
  memcpy(b + 4, h->magic ? h->magic : "n+2\0\r\n\032\n", 8);
  put16(b, 12, h->datatype, s);
  put16(b, 14, 8 * bytes_per(h->datatype), s);
  for (int i = 0; i < 8; i++) {
    put64(b, 16 + 8 * (size_t)i, h->dim[i], s);
    putd(b, 104 + 8 * (size_t)i, h->pixdim[i], s);
  }
  for (int i = 0; i < 3; i++)
    putd(b, 80 + 8 * (size_t)i, h->intent_p[i], s);
  put64(b, 168, h->vox_offset ? (int64_t)h->vox_offset : 544, s);
  putd(b, 176, h->slope, s);
  putd(b, 184, h->inter, s);
  putd(b, 192, h->cal_max, s);
  putd(b, 200, h->cal_min, s);
  putd(b, 208, h->slice_duration, s);
  putd(b, 216, h->toffset, s);
  put64(b, 224, h->slice_start, s);
  put64(b, 232, h->slice_end, s);
  if (h->descrip) memcpy(b + 240, h->descrip, strlen(h->descrip));
  if (h->aux_file) memcpy(b + 320, h->aux_file, strlen(h->aux_file));
  put32(b, 344, h->qform, s);
  put32(b, 348, h->sform, s);
  for (int i = 0; i < 3; i++) {
    putd(b, 352 + 8 * (size_t)i, h->quat[i], s);
    putd(b, 376 + 8 * (size_t)i, h->qoff[i], s);
    for (int j = 0; j < 4; j++)
      putd(b, 400 + 32 * (size_t)i + 8 * (size_t)j, h->srow[i][j], s);
  }
  put32(b, 496, h->slice_code, s);
  put32(b, 500, h->xyz_units | h->time_units, s);
  put32(b, 504, h->intent_code, s);
  if (h->intent_name) memcpy(b + 508, h->intent_name, strlen(h->intent_name));
  b[524] = (unsigned char)h->dim_info;
  return 544;
}

/* A file of header h and the voxels (raw bytes, native order unless big_endian). */
static void write_nifti(const char *path, const thdr *h, const void *vox, size_t nbytes) {
  unsigned char *b = malloc(544 + nbytes);
  size_t hs = make_header(h, b);
  const int es = bytes_per(h->datatype);
  for (size_t i = 0; i < nbytes; i++) /* swap each sample's bytes when big-endian */
    b[hs + i] = ((const unsigned char *)vox)[h->big_endian ? i - i % es + (es - 1 - i % es) : i];
  io_write_file(path, b, hs + nbytes);
  free(b);
}

static thdr base_header(int version, int nd, const int64_t *dims, int datatype) {
  thdr h;
  memset(&h, 0, sizeof h);
  h.version = version;
  h.dim[0] = nd;
  for (int i = 1; i < 8; i++) {
    h.dim[i] = i <= nd ? dims[i - 1] : 1;
    h.pixdim[i] = 1;
  }
  h.datatype = datatype;
  h.xyz_units = 2;
  return h;
}

/* ---- round trips ---- */

static int same_bytes(const ndf_array *a, const ndf_array *b) {
  if (a->dtype != b->dtype || ndf_array_size(a) != ndf_array_size(b)) return 0;
  size_t es = ndf_dtype_size(a->dtype);
  int64_t n = ndf_array_size(a);
  for (int64_t i = 0; i < n; i++)
    if (memcmp((const char *)a->data + ndf__offset(a, i) * (int64_t)es,
               (const char *)b->data + ndf__offset(b, i) * (int64_t)es, es))
      return 0;
  return 1;
}

/* Every dtype, 1-4 axes, .nii and .nii.gz, contiguous and strided arrays without a NIfTI
 * header: bit-exact data, the shape, and the spacing (float32 in NIfTI-1; 0 for time). */
static void round_trips(uint64_t *r) {
  for (ndf_dtype t = NDF_U8; t <= NDF_F64; t++)
    for (int nd = 1; nd <= 4; nd++)
      for (int gz = 0; gz < 2; gz++) {
        int64_t shape[4];
        for (int d = 0; d < nd; d++)
          shape[d] = t_randint(r, d == 0 ? 2 : 1, 9); /* a leading 1 would be dropped */
        t_arr src;
        ndf_image img = io_random_image(&src, r, t, nd, shape, (int)t_randint(r, 0, 1));
        ndf__store(t, src.hview.data, 0, 7); /* never all zeros */
        for (int d = 0; d < nd; d++)
          img.spacing[d] = 0.25 + 3 * (0.5 + 0.5 * ndf_rand_uniform(r));
        char name[64], err[512] = "";
        snprintf(name, sizeof name, "rt_%s_%dd.nii%s", ndf_dtype_name(t), nd, gz ? ".gz" : "");
        const char *path = io_at(name);
        CHECK(ndf_image_write(path, &img, err, sizeof err) == NDF_OK, "write %s: %s", name, err);
        ndf_image back;
        if (ndf_image_read(path, NULL, &back, err, sizeof err) != NDF_OK) {
          CHECK(0, "read %s: %s", name, err);
          t_arr_free(&src, NULL);
          continue;
        }
        CHECK(back.format == NDF_FORMAT_NIFTI && back.channel_axis == -1, "%s: format", name);
        CHECK(back.a.dtype == t && back.a.ndim == nd &&
                  !memcmp(back.a.shape, shape, sizeof(int64_t) * (size_t)nd),
              "%s: dtype %s ndim %d", name, ndf_dtype_name(back.a.dtype), back.a.ndim);
        CHECK(same_bytes(&back.a, &src.hview), "%s: data differ", name);
        for (int d = 0; d < nd; d++) {
          double want = nd == 4 && d == 0 ? 0 : (double)(float)img.spacing[d];
          CHECK(back.spacing[d] == want, "%s: spacing[%d] %.9g, wrote %.9g", name, d,
                back.spacing[d], want);
        }
        if (gz) { /* compressed by the name */
          size_t n;
          unsigned char *b = io_read_file(path, &n);
          CHECK(b && n > 2 && b[0] == 0x1f && b[1] == 0x8b, "%s: not gzip", name);
          free(b);
        }
        /* the same file written again from what was read, header kept */
        snprintf(name, sizeof name, "rt2_%s_%dd.nii%s", ndf_dtype_name(t), nd, gz ? ".gz" : "");
        const char *path2 = io_at(name);
        CHECK(ndf_image_write(path2, &back, err, sizeof err) == NDF_OK, "rewrite %s: %s", name,
              err);
        ndf_image again;
        if (ndf_image_read(path2, NULL, &again, err, sizeof err) == NDF_OK) {
          CHECK(same_bytes(&again.a, &back.a) && again.a.ndim == nd, "%s: reread differs", name);
          CHECK(!memcmp(again.spacing, back.spacing, sizeof again.spacing), "%s: spacing", name);
          ndf_image_free(&again);
        } else {
          CHECK(0, "reread %s: %s", name, err);
        }
        ndf_image_free(&back);
        t_arr_free(&src, NULL);
      }
}

/* A dim above 32767 makes the writer choose NIfTI-2; a leading 1 in the array is a
 * trailing singleton NIfTI axis, dropped on reading. */
static void big_and_singleton(uint64_t *r) {
  int64_t shape[2] = {2, 40000};
  t_arr src;
  ndf_image img = io_random_image(&src, r, NDF_U8, 2, shape, 0);
  char err[512];
  const char *path = io_at("wide.nii");
  CHECK(ndf_image_write(path, &img, err, sizeof err) == NDF_OK, "write wide: %s", err);
  size_t n;
  unsigned char *b = io_read_file(path, &n);
  CHECK(b && get32(b, 0) == 540 && !memcmp(b + 4, "n+2\0\r\n\032\n", 8) && get64(b, 16) == 2 &&
            get64(b, 24) == 40000 && get64(b, 32) == 2 && get64(b, 168) == 544 && n == 544 + 80000,
        "wide: not the NIfTI-2 file expected");
  free(b);
  ndf_image back;
  if (ndf_image_read(path, NULL, &back, err, sizeof err) == NDF_OK) {
    CHECK(same_bytes(&back.a, &src.hview), "wide: data differ");
    ndf_image_free(&back);
  } else {
    CHECK(0, "read wide: %s", err);
  }
  t_arr_free(&src, NULL);

  int64_t s3[3] = {1, 4, 5};
  img = io_random_image(&src, r, NDF_F32, 3, s3, 0);
  path = io_at("lead1.nii");
  CHECK(ndf_image_write(path, &img, err, sizeof err) == NDF_OK, "write lead1: %s", err);
  if (ndf_image_read(path, NULL, &back, err, sizeof err) == NDF_OK) {
    CHECK(back.a.ndim == 2 && back.a.shape[0] == 4 && back.a.shape[1] == 5 &&
              !memcmp(back.a.data, src.hview.data, 80),
          "lead1: read as %d-D", back.a.ndim);
    ndf_image_free(&back);
  } else {
    CHECK(0, "read lead1: %s", err);
  }
  t_arr_free(&src, NULL);
}

/* ---- the header kept ---- */

static thdr rich_header(int version, int nd, const int64_t *dims, int datatype) {
  thdr h = base_header(version, nd, dims, datatype);
  h.pixdim[1] = 500;
  h.pixdim[2] = 750;
  h.pixdim[3] = 1250; /* microns: 0.5, 0.75, 1.25 mm */
  h.pixdim[4] = 2.5;
  h.xyz_units = 3;
  h.time_units = 8; /* seconds */
  h.qform = 1;
  h.sform = 2;
  h.quat[0] = 0.1;
  h.quat[1] = -0.2;
  h.quat[2] = 0.3;
  h.qoff[0] = -10.5;
  h.qoff[1] = 20.25;
  h.qoff[2] = 30;
  h.pixdim[0] = -1; /* qfac */
  double sr[3][4] = {{480, 10, 5, -90}, {-12, 700, 20, -126}, {4, 6, 1200, -72}};
  memcpy(h.srow, sr, sizeof sr);
  h.intent_code = 3; /* ttest */
  h.intent_p[0] = 12;
  h.intent_name = "t-stat";
  h.descrip = "ndfilt nifti test header";
  h.aux_file = "aux.txt";
  h.cal_min = -5;
  h.cal_max = 250;
  h.toffset = 1.5;
  h.slice_duration = 0.04;
  h.slice_code = 1;
  h.slice_start = 0;
  h.slice_end = (int)(nd >= 3 ? dims[2] - 1 : 0);
  h.dim_info = 1 | 2 << 2 | 3 << 4;
  return h;
}

/* Compares the header fields of files a (by hand) and b (rewritten), version v. */
static void same_header(const unsigned char *a, const unsigned char *b, int v, const char *what) {
  if (v == 1) {
    static const struct {
      size_t off, n;
      const char *name;
    } f[] = {{40, 16, "dim"},         {56, 12, "intent_p"},   {68, 2, "intent_code"},
             {70, 2, "datatype"},     {74, 2, "slice_start"}, {76, 32, "pixdim"},
             {120, 2, "slice_end"},   {122, 1, "slice_code"}, {123, 1, "xyzt_units"},
             {124, 8, "cal_max/min"}, {132, 4, "slice_dur"},  {136, 4, "toffset"},
             {148, 80, "descrip"},    {228, 24, "aux_file"},  {252, 4, "q/sform_code"},
             {256, 24, "quatern"},    {280, 48, "srow"},      {328, 16, "intent_name"},
             {344, 4, "magic"},       {39, 1, "dim_info"},    {108, 4, "vox_offset"}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
      CHECK(!memcmp(a + f[i].off, b + f[i].off, f[i].n), "%s: NIfTI-1 %s differs", what, f[i].name);
  } else {
    static const struct {
      size_t off, n;
      const char *name;
    } f[] = {{4, 8, "magic"},          {12, 2, "datatype"},
             {16, 64, "dim"},          {80, 24, "intent_p"},
             {104, 64, "pixdim"},      {168, 8, "vox_offset"},
             {192, 16, "cal_max/min"}, {208, 8, "slice_dur"},
             {216, 8, "toffset"},      {224, 16, "slice_start/end"},
             {240, 80, "descrip"},     {320, 24, "aux_file"},
             {344, 8, "q/sform_code"}, {352, 48, "quatern"},
             {400, 96, "srow"},        {496, 4, "slice_code"},
             {500, 4, "xyzt_units"},   {504, 4, "intent_code"},
             {508, 16, "intent_name"}, {524, 1, "dim_info"}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
      CHECK(!memcmp(a + f[i].off, b + f[i].off, f[i].n), "%s: NIfTI-2 %s differs", what, f[i].name);
  }
}

static void metadata(uint64_t *r) {
  for (int v = 1; v <= 2; v++) {
    int64_t dims[4] = {t_randint(r, 2, 8), t_randint(r, 2, 8), t_randint(r, 2, 8), 3};
    int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
    float *vox = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
      vox[i] = (float)ndf_rand_uniform(r);
    thdr h = rich_header(v, 4, dims, 16);
    char name[64], err[512];
    snprintf(name, sizeof name, "meta_v%d.nii", v);
    const char *src = io_at(name);
    write_nifti(src, &h, vox, (size_t)n * 4);
    ndf_image img;
    if (ndf_image_read(src, NULL, &img, err, sizeof err) != NDF_OK) {
      CHECK(0, "read %s: %s", name, err);
      free(vox);
      continue;
    }
    CHECK(img.a.ndim == 4 && img.a.shape[0] == 3 && img.a.shape[3] == dims[0] &&
              img.a.dtype == NDF_F32 && !memcmp(img.a.data, vox, (size_t)n * 4),
          "%s: array", name);
    CHECK(img.spacing[0] == 0 && fabs(img.spacing[1] - 1.25) < 1e-12 &&
              fabs(img.spacing[2] - 0.75) < 1e-12 && fabs(img.spacing[3] - 0.5) < 1e-12,
          "%s: spacing %g %g %g %g (microns to mm; time 0)", name, img.spacing[0], img.spacing[1],
          img.spacing[2], img.spacing[3]);
    for (int gz = 0; gz < 2; gz++) {
      snprintf(name, sizeof name, "meta_v%d_out.nii%s", v, gz ? ".gz" : "");
      const char *out = io_at(name);
      CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write %s: %s", name, err);
      if (gz) continue; /* the python check reads the .gz header with nibabel */
      size_t na = 0, nb = 0;
      unsigned char *a = io_read_file(src, &na), *b = io_read_file(out, &nb);
      CHECK(a && b && na == nb &&
                !memcmp(a + (v == 1 ? 352 : 544), b + (v == 1 ? 352 : 544),
                        na - (v == 1 ? 352 : 544)),
            "%s: file size %zu, source %zu, or voxels differ", name, nb, na);
      if (a && b && nb >= 544) same_header(a, b, v, name);
      free(a);
      free(b);
    }
    /* A changed voxel size: pixdim (in the file's microns) and the sform's column follow. */
    img.spacing[3] = 1.0; /* x: 0.5 -> 1 mm */
    const char *out = io_at(v == 1 ? "meta_v1_x2.nii" : "meta_v2_x2.nii");
    CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write x2: %s", err);
    size_t nb;
    unsigned char *b = io_read_file(out, &nb);
    if (b && v == 1)
      CHECK(getf(b, 80) == 1000 && getf(b, 280) == 960 && getf(b, 296) == -24 &&
                getf(b, 312) == 8 && getf(b, 284) == 10 && getf(b, 84) == 750,
            "x2 v1: pixdim[1] %g srow_x[0] %g", getf(b, 80), getf(b, 280));
    if (b && v == 2)
      CHECK(getd(b, 112) == 1000 && getd(b, 400) == 960 && getd(b, 432) == -24 &&
                getd(b, 464) == 8 && getd(b, 408) == 10,
            "x2 v2: pixdim[1] %g srow_x[0] %g", getd(b, 112), getd(b, 400));
    free(b);
    ndf_image_free(&img);

    /* A 3-D volume grown a leading axis (a filter bank): the new axis is dim[4], pixdim 1. */
    thdr h3 = rich_header(v, 3, dims, 16);
    h3.pixdim[4] = 9;
    snprintf(name, sizeof name, "meta3_v%d.nii", v);
    src = io_at(name);
    write_nifti(src, &h3, vox, (size_t)(dims[0] * dims[1] * dims[2]) * 4);
    if (ndf_image_read(src, NULL, &img, err, sizeof err) == NDF_OK) {
      int64_t shape[4] = {2, img.a.shape[0], img.a.shape[1], img.a.shape[2]};
      ndf_array a4 = ndf_array_contiguous(NDF_F32, 4, shape, calloc((size_t)n, 4));
      ((float *)a4.data)[1] = 3;
      ndf_image grown = img;
      grown.a = a4;
      for (int d = 0; d < 3; d++)
        grown.spacing[d + 1] = img.spacing[d];
      grown.spacing[0] = 0;
      grown.meta_free = NULL; /* borrowed */
      out = io_at(v == 1 ? "grown_v1.nii" : "grown_v2.nii");
      CHECK(ndf_image_write(out, &grown, err, sizeof err) == NDF_OK, "write grown: %s", err);
      b = io_read_file(out, &nb);
      if (b && v == 1)
        CHECK(get16(b, 40) == 4 && get16(b, 48) == 2 && getf(b, 92) == 1 && getf(b, 80) == 500 &&
                  get16(b, 70) == 16,
              "grown v1: dim[0] %d dim[4] %d pixdim[4] %g", get16(b, 40), get16(b, 48),
              getf(b, 92));
      if (b && v == 2)
        CHECK(get64(b, 16) == 4 && get64(b, 48) == 2 && getd(b, 136) == 1 && getd(b, 112) == 500,
              "grown v2: dim[0] %lld dim[4] %lld pixdim[4] %g", (long long)get64(b, 16),
              (long long)get64(b, 48), getd(b, 136));
      free(b);
      free(a4.data);
      ndf_image_free(&img);
    } else {
      CHECK(0, "read %s: %s", name, err);
    }
    free(vox);
  }
}

/* Trailing singleton NIfTI axes (5-D with dim[5] = 1) come back on writing. */
static void singletons(void) {
  int64_t dims[5] = {3, 2, 2, 2, 1};
  thdr h = base_header(1, 5, dims, 2);
  unsigned char vox[24];
  for (int i = 0; i < 24; i++)
    vox[i] = (unsigned char)(i * 7 + 1);
  const char *src = io_at("single5.nii"), *out = io_at("single5_out.nii");
  write_nifti(src, &h, vox, 24);
  ndf_image img;
  char err[512];
  if (ndf_image_read(src, NULL, &img, err, sizeof err) != NDF_OK) {
    CHECK(0, "read single5: %s", err);
    return;
  }
  CHECK(img.a.ndim == 4 && img.a.shape[0] == 2 && img.a.shape[3] == 3 &&
            !memcmp(img.a.data, vox, 24),
        "single5: %d-D", img.a.ndim);
  CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write single5: %s", err);
  size_t n;
  unsigned char *b = io_read_file(out, &n);
  CHECK(b && get16(b, 40) == 5 && get16(b, 50) == 1 && n == 352 + 24, "single5: dim[0] %d",
        b ? get16(b, 40) : -1);
  free(b);
  ndf_image_free(&img);
}

/* ---- sample types ---- */

static double load_any(int code, const void *d, int64_t i) {
  switch (code) {
  case 256: return ((const int8_t *)d)[i];
  case 768: return ((const uint32_t *)d)[i];
  case 8: return ((const int32_t *)d)[i];
  case 1024: return (double)((const int64_t *)d)[i];
  case 1280: return (double)((const uint64_t *)d)[i];
  }
  return NAN;
}

static void widened(uint64_t *r) {
  static const struct {
    int code;
    ndf_dtype made;
    int size;
    const char *name;
  } types[] = {{256, NDF_I16, 1, "int8"},
               {768, NDF_F64, 4, "uint32"},
               {8, NDF_F64, 4, "int32"},
               {1024, NDF_F64, 8, "int64"},
               {1280, NDF_F64, 8, "uint64"}};
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    int64_t dims[3] = {t_randint(r, 2, 6), t_randint(r, 2, 6), t_randint(r, 1, 4)};
    int64_t n = dims[0] * dims[1] * dims[2];
    unsigned char *vox = malloc((size_t)n * 8);
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++) {
      double u = 0.5 * (ndf_rand_uniform(r) + 1);
      switch (types[k].code) {
      case 256: ((int8_t *)vox)[i] = (int8_t)(want[i] = (double)t_randint(r, -128, 127)); break;
      case 768: ((uint32_t *)vox)[i] = (uint32_t)(want[i] = floor(u * 4294967295.0)); break;
      case 8:
        ((int32_t *)vox)[i] = (int32_t)(want[i] = (double)t_randint(r, INT32_MIN, INT32_MAX));
        break;
      case 1024:
        ((int64_t *)vox)[i] = (int64_t)(want[i] = floor((u - 0.5) * 1.8e16)); /* |v| < 2^53 */
        break;
      case 1280: ((uint64_t *)vox)[i] = (uint64_t)(want[i] = floor(u * 9.0e15)); break;
      }
    }
    want[0] = 0; /* one extreme or two: 0 and the type's own ends */
    memset(vox, 0, (size_t)types[k].size);
    for (int be = 0; be < 2; be++) {
      thdr h = base_header(1 + (int)(k % 2), 3, dims, types[k].code);
      h.big_endian = be;
      char name[64], err[512];
      snprintf(name, sizeof name, "w_%s%s.nii", types[k].name, be ? "_be" : "");
      const char *src = io_at(name);
      write_nifti(src, &h, vox, (size_t)n * (size_t)types[k].size);
      ndf_image img;
      if (ndf_image_read(src, NULL, &img, err, sizeof err) != NDF_OK) {
        CHECK(0, "read %s: %s", name, err);
        continue;
      }
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++)
        bad += ndf__load(img.a.dtype, img.a.data, i) != want[i];
      CHECK(img.a.dtype == types[k].made && bad == 0, "%s: dtype %s, %lld values differ", name,
            ndf_dtype_name(img.a.dtype), (long long)bad);
      /* written back as the file's type; out-of-range values clamped, fractions rounded */
      if (img.a.dtype == NDF_I16) {
        ((int16_t *)img.a.data)[0] = 300;
        ((int16_t *)img.a.data)[1] = -300;
      } else {
        ((double *)img.a.data)[0] = -1e30;
        ((double *)img.a.data)[1] = 2.5;
      }
      snprintf(name, sizeof name, "w_%s%s_out.nii", types[k].name, be ? "_be" : "");
      const char *out = io_at(name);
      CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write %s: %s", name, err);
      size_t nb;
      unsigned char *b = io_read_file(out, &nb);
      int v = h.version;
      size_t hs = v == 1 ? 352 : 544;
      if (b && nb == hs + (size_t)n * (size_t)types[k].size) {
        CHECK(get16(b, v == 1 ? 70 : 12) == types[k].code, "%s: datatype %d", name,
              get16(b, v == 1 ? 70 : 12));
        const unsigned char *d = b + hs;
        double v0 = load_any(types[k].code, d, 0), v1 = load_any(types[k].code, d, 1);
        double want0 = types[k].code == 256    ? 127
                       : types[k].code == 8    ? -2147483648.0
                       : types[k].code == 1024 ? -9223372036854775808.0
                                               : 0;
        double want1 = types[k].code == 256 ? -128 : 2; /* 2.5 rounds half to even */
        CHECK(v0 == want0 && v1 == want1, "%s: clamped/rounded to %.17g %.17g, want %.17g %.17g",
              name, v0, v1, want0, want1);
        int64_t diff = 0;
        for (int64_t i = 2; i < n; i++)
          diff += load_any(types[k].code, d, i) != want[i];
        CHECK(diff == 0, "%s: %lld values differ", name, (long long)diff);
      } else {
        CHECK(0, "%s: %zu bytes", name, b ? nb : 0);
      }
      free(b);
      /* a dtype other than the one the reader made is written as it is */
      ndf_image f32 = img;
      f32.a = ndf_array_contiguous(NDF_F32, img.a.ndim, img.a.shape, calloc((size_t)n, 4));
      f32.meta_free = NULL;
      ((float *)f32.a.data)[0] = 1.5f;
      CHECK(ndf_image_write(out, &f32, err, sizeof err) == NDF_OK, "write f32 %s: %s", name, err);
      b = io_read_file(out, &nb);
      CHECK(b && get16(b, v == 1 ? 70 : 12) == 16 && getf(b, hs) == 1.5f, "%s as f32: type %d",
            name, b ? get16(b, v == 1 ? 70 : 12) : -1);
      free(b);
      free(f32.a.data);
      ndf_image_free(&img);
    }
    free(vox);
    free(want);
  }
  /* 64-bit integers beyond 2^53 are refused, not rounded */
  int64_t dims[1] = {3};
  int64_t big[3] = {1, (INT64_C(1) << 53) + 1, 5};
  thdr h = base_header(1, 1, dims, 1024);
  write_nifti(io_at("int64_big.nii"), &h, big, sizeof big);
  io_read_fails(io_at("int64_big.nii"), NDF_EUNSUPPORTED, "2^53");
}

/* scl_slope/scl_inter applied on reading (float32; float64 for 32/64-bit and double data),
 * cleared on writing; NaN voxels kept bit for bit. */
static void scaled(uint64_t *r) {
  int64_t dims[2] = {5, 4};
  int16_t vox[20];
  for (int i = 0; i < 20; i++)
    vox[i] = (int16_t)t_randint(r, -32768, 32767);
  thdr h = base_header(1, 2, dims, 4);
  h.slope = 0.5;
  h.inter = -3;
  const char *src = io_at("scaled.nii"), *out = io_at("scaled_out.nii");
  write_nifti(src, &h, vox, sizeof vox);
  ndf_image img;
  char err[512];
  if (ndf_image_read(src, NULL, &img, err, sizeof err) == NDF_OK) {
    int bad = 0;
    for (int i = 0; i < 20; i++)
      bad += ((float *)img.a.data)[i] != (float)(vox[i] * 0.5 - 3);
    CHECK(img.a.dtype == NDF_F32 && !bad, "scaled: dtype %s, %d differ",
          ndf_dtype_name(img.a.dtype), bad);
    CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write scaled: %s", err);
    size_t n;
    unsigned char *b = io_read_file(out, &n);
    CHECK(b && get16(b, 70) == 16 && getf(b, 112) == 0 && getf(b, 116) == 0 &&
              !memcmp(b + 352, img.a.data, 80),
          "scaled out: datatype %d slope %g", b ? get16(b, 70) : 0, b ? getf(b, 112) : 0);
    free(b);
    ndf_image_free(&img);
  } else {
    CHECK(0, "read scaled: %s", err);
  }
  int32_t v32[20];
  for (int i = 0; i < 20; i++)
    v32[i] = (int32_t)t_randint(r, INT32_MIN, INT32_MAX);
  h = base_header(2, 2, dims, 8);
  h.slope = 2;
  h.inter = 0.25;
  write_nifti(src, &h, v32, sizeof v32);
  if (ndf_image_read(src, NULL, &img, err, sizeof err) == NDF_OK) {
    int bad = 0;
    for (int i = 0; i < 20; i++)
      bad += ((double *)img.a.data)[i] != v32[i] * 2.0 + 0.25;
    CHECK(img.a.dtype == NDF_F64 && !bad, "scaled int32: dtype %s, %d differ",
          ndf_dtype_name(img.a.dtype), bad);
    ndf_image_free(&img);
  } else {
    CHECK(0, "read scaled int32: %s", err);
  }
  /* slope 1, intercept 0, or a zero or NaN slope: unscaled, the file's type kept */
  double slopes[3][2] = {{1, 0}, {0, 5}, {NAN, 1}};
  for (int k = 0; k < 3; k++) {
    h = base_header(1, 2, dims, 4);
    h.slope = slopes[k][0];
    h.inter = slopes[k][1];
    write_nifti(src, &h, vox, sizeof vox);
    if (ndf_image_read(src, NULL, &img, err, sizeof err) == NDF_OK) {
      CHECK(img.a.dtype == NDF_I16 && !memcmp(img.a.data, vox, sizeof vox), "slope %g inter %g: %s",
            slopes[k][0], slopes[k][1], ndf_dtype_name(img.a.dtype));
      ndf_image_free(&img);
    } else {
      CHECK(0, "read slope %g: %s", slopes[k][0], err);
    }
  }
  /* NaN and infinities survive (nifticlib's own loader would zero them) */
  float fv[20];
  for (int i = 0; i < 20; i++)
    fv[i] = (float)ndf_rand_uniform(r);
  fv[3] = NAN;
  fv[7] = INFINITY;
  fv[8] = -INFINITY;
  h = base_header(1, 2, dims, 16);
  write_nifti(src, &h, fv, sizeof fv);
  if (ndf_image_read(src, NULL, &img, err, sizeof err) == NDF_OK) {
    CHECK(!memcmp(img.a.data, fv, sizeof fv), "NaN/inf not kept");
    ndf_image_free(&img);
  } else {
    CHECK(0, "read nan: %s", err);
  }
}

/* A .npy image (no NIfTI header) written as NIfTI: NIfTI-1, pixdim from the spacing (1
 * where unknown), mm, no orientation codes, no scaling. */
static void cross_format(uint64_t *r) {
  int64_t shape[3] = {t_randint(r, 2, 5), t_randint(r, 2, 6), t_randint(r, 2, 7)};
  t_arr src;
  t_arr_make(&src, r, NDF_U16, 3, shape, 0, NULL);
  t_fill_random(&src, r);
  ((uint16_t *)src.hview.data)[0] = 1234;
  char err[512];
  const char *npy = io_at("x.npy"), *nii = io_at("x_from_npy.nii");
  CHECK(ndf_npy_write(npy, &src.hview, err, sizeof err) == NDF_OK, "npy: %s", err);
  ndf_image img;
  if (ndf_image_read(npy, NULL, &img, err, sizeof err) != NDF_OK) {
    CHECK(0, "read npy: %s", err);
    t_arr_free(&src, NULL);
    return;
  }
  img.spacing[2] = 0.8; /* x known, y and z not */
  CHECK(ndf_image_write(nii, &img, err, sizeof err) == NDF_OK, "write from npy: %s", err);
  size_t n;
  unsigned char *b = io_read_file(nii, &n);
  CHECK(b && get32(b, 0) == 348 && !memcmp(b + 344, "n+1", 4) && get16(b, 40) == 3 &&
            get16(b, 42) == shape[2] && get16(b, 46) == shape[0] && get16(b, 70) == 512 &&
            getf(b, 80) == 0.8f && getf(b, 84) == 1 && getf(b, 88) == 1 && b[123] == 2 &&
            get16(b, 252) == 0 && get16(b, 254) == 0 && getf(b, 112) == 0 && getf(b, 108) == 352 &&
            n == 352 + (size_t)ndf_array_size(&src.hview) * 2,
        "from npy: header");
  free(b);
  ndf_image back;
  if (ndf_image_read(nii, NULL, &back, err, sizeof err) == NDF_OK) {
    CHECK(same_bytes(&back.a, &src.hview) && back.spacing[2] == (double)0.8f &&
              back.spacing[0] == 1,
          "from npy: data or spacing");
    /* and back to .npy: the NIfTI header is ignored there */
    CHECK(ndf_image_write(io_at("x_back.npy"), &back, err, sizeof err) == NDF_OK, "npy: %s", err);
    ndf_image_free(&back);
  } else {
    CHECK(0, "read from npy: %s", err);
  }
  ndf_image_free(&img);
  t_arr_free(&src, NULL);
}

/* ---- bad files ---- */

static void corrupt(uint64_t *r) {
  int64_t dims[3] = {6, 5, 4};
  float vox[120];
  for (int i = 0; i < 120; i++)
    vox[i] = (float)ndf_rand_uniform(r);
  thdr good = base_header(1, 3, dims, 16);
  unsigned char file[352 + 480];
  make_header(&good, file);
  memcpy(file + 352, vox, 480);
  char name[64];

  /* truncated at several places */
  static const struct {
    size_t cut;
    const char *needle;
  } cuts[] = {{0, "empty"},
              {2, "not a NIfTI file"},
              {100, "truncated: 100 of 348 header bytes"},
              {347, "truncated: 347 of 348"},
              {348, "truncated"},
              {353, "truncated: 1 of 480 data bytes"},
              {352 + 479, "truncated: 479 of 480 data bytes"}};
  for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
    snprintf(name, sizeof name, "cut%zu.nii", cuts[k].cut);
    io_write_file(io_at(name), file, cuts[k].cut);
    io_read_fails(io_at(name), NDF_EINVAL, cuts[k].needle);
  }
  /* the same through gzip: a valid .nii.gz cut short */
  ndf_image img;
  ndf_image_init(&img);
  int64_t big[3] = {16, 32, 48};
  img.a = ndf_array_contiguous(NDF_F32, 3, big, malloc(16 * 32 * 48 * 4));
  for (int i = 0; i < 16 * 32 * 48; i++)
    ((float *)img.a.data)[i] = (float)ndf_rand_uniform(r);
  char err[512];
  CHECK(ndf_image_write(io_at("whole.nii.gz"), &img, err, sizeof err) == NDF_OK, "gz: %s", err);
  free(img.a.data);
  size_t gzn;
  unsigned char *gzb = io_read_file(io_at("whole.nii.gz"), &gzn);
  size_t gcuts[] = {0, 5, 12, 200, gzn / 2, gzn - 30};
  for (size_t k = 0; gzb && k < sizeof gcuts / sizeof gcuts[0]; k++) {
    snprintf(name, sizeof name, "cut%zu.nii.gz", gcuts[k]);
    io_write_file(io_at(name), gzb, gcuts[k]);
    io_read_fails(io_at(name), NDF_EINVAL, k >= 3 ? "truncated" : NULL);
  }
  /* corrupt deflate data in the middle */
  if (gzb && gzn > 400) {
    memset(gzb + gzn / 3, 0xff, 64);
    io_write_file(io_at("garbled.nii.gz"), gzb, gzn);
    io_read_fails(io_at("garbled.nii.gz"), NDF_EINVAL, NULL);
  }
  free(gzb);
  /* gzip data named .nii, and a plain file named .nii.gz (zlib passes it through) */
  io_write_file(io_at("gz_named.nii"), "\x1f\x8b\x08\x00\x00\x00\x00\x00", 8);
  io_read_fails(io_at("gz_named.nii"), NDF_EINVAL, "rename it .nii.gz");
  io_write_file(io_at("plain.nii.gz"), file, sizeof file);
  if (ndf_image_read(io_at("plain.nii.gz"), NULL, &img, err, sizeof err) == NDF_OK) {
    CHECK(!memcmp(img.a.data, vox, 480), "plain .nii.gz: data");
    ndf_image_free(&img);
  } else {
    CHECK(0, "plain .nii.gz: %s", err);
  }

  /* bad magic and header size */
  thdr h = good;
  h.magic = "n+3";
  write_nifti(io_at("magic.nii"), &h, vox, 480);
  io_read_fails(io_at("magic.nii"), NDF_EINVAL, "bad magic");
  h.magic = "\0\0\0";
  write_nifti(io_at("analyze.nii"), &h, vox, 480);
  io_read_fails(io_at("analyze.nii"), NDF_EINVAL, "bad magic");
  h.magic = "ni1";
  write_nifti(io_at("pair.nii"), &h, vox, 480);
  io_read_fails(io_at("pair.nii"), NDF_EUNSUPPORTED, "two-file");
  h = base_header(2, 3, dims, 16);
  h.magic = "n+2\0\n\n\032\n";
  write_nifti(io_at("magic2.nii"), &h, vox, 480);
  io_read_fails(io_at("magic2.nii"), NDF_EINVAL, "bad magic");
  unsigned char bad[352 + 480];
  memcpy(bad, file, sizeof bad);
  bad[0] = 0x42;
  io_write_file(io_at("size.nii"), bad, sizeof bad);
  io_read_fails(io_at("size.nii"), NDF_EINVAL, "not a NIfTI file");
  io_write_file(io_at("text.nii"), "<nifti_image\n ndim = '3'\n/>\n", 28);
  io_read_fails(io_at("text.nii"), NDF_EINVAL, "not a NIfTI file");

  /* bad header fields, in both versions */
  for (int v = 1; v <= 2; v++) {
    static const struct {
      const char *what;
      int field; /* 0 dim[0], 1 dim[2], 2 datatype, 3 vox_offset, 4 dims 5-D, 5 scl_inter */
      double value;
      ndf_status st;
      const char *needle;
    } cases[] = {{"dim0_0", 0, 0, NDF_EINVAL, "dim[0] = 0"},
                 {"dim0_9", 0, 9, NDF_EINVAL, "dim[0] = 9"},
                 {"dim2_neg", 1, -5, NDF_EINVAL, "dim[2] = -5"},
                 {"dim2_0", 1, 0, NDF_EINVAL, "dim[2] = 0"},
                 {"dt_3", 2, 3, NDF_EINVAL, "datatype"},
                 {"dt_rgb", 2, 128, NDF_EUNSUPPORTED, "RGB24"},
                 {"dt_rgba", 2, 2304, NDF_EUNSUPPORTED, "RGBA32"},
                 {"dt_cplx", 2, 32, NDF_EUNSUPPORTED, "COMPLEX64"},
                 {"dt_f128", 2, 1536, NDF_EUNSUPPORTED, "FLOAT128"},
                 {"dt_bin", 2, 1, NDF_EUNSUPPORTED, "BINARY"},
                 {"off_neg", 3, -16, NDF_EINVAL, "vox_offset"},
                 {"off_nan", 3, NAN, NDF_EINVAL, "vox_offset"},
                 {"off_far", 3, 1e6, NDF_EINVAL, "truncated"},
                 {"dim5", 4, 2, NDF_EUNSUPPORTED, "5-D"},
                 {"inter", 5, INFINITY, NDF_EINVAL, "scl_inter"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      if (v == 2 && cases[k].field == 3 && isnan(cases[k].value)) continue; /* int64 there */
      h = base_header(v, 3, dims, 16);
      switch (cases[k].field) {
      case 0: h.dim[0] = (int64_t)cases[k].value; break;
      case 1: h.dim[2] = (int64_t)cases[k].value; break;
      case 2: h.datatype = (int)cases[k].value; break;
      case 3: h.vox_offset = cases[k].value; break;
      case 4:
        h.dim[0] = 5;
        h.dim[5] = 2;
        break;
      case 5:
        h.slope = 2;
        h.inter = cases[k].value;
        break;
      }
      snprintf(name, sizeof name, "%s_v%d.nii", cases[k].what, v);
      write_nifti(io_at(name), &h, vox, 480);
      io_read_fails(io_at(name), cases[k].st, cases[k].needle);
    }
    /* absurd sizes are refused before anything is allocated */
    h = base_header(v, 3, dims, 64);
    h.dim[1] = h.dim[2] = h.dim[3] = v == 1 ? 32767 : INT64_C(1) << 17;
    snprintf(name, sizeof name, "huge_v%d.nii", v);
    write_nifti(io_at(name), &h, vox, 480);
    io_read_fails(io_at(name), NDF_EINVAL, "truncated");
    snprintf(name, sizeof name, "huge_v%d.nii.gz", v); /* plain bytes, gzip name */
    write_nifti(io_at(name), &h, vox, 480);
    io_read_fails(io_at(name), NDF_EINVAL, "cannot hold");
    if (v == 2) {
      h.dim[1] = h.dim[2] = h.dim[3] = INT64_C(1) << 40;
      write_nifti(io_at("overflow.nii"), &h, vox, 480);
      io_read_fails(io_at("overflow.nii"), NDF_EINVAL, "bad dim");
    }
  }
  ndf_image x;
  CHECK(ndf_image_read(io_at("missing.nii"), NULL, &x, err, sizeof err) == NDF_EIO &&
            strstr(err, "missing.nii"),
        "missing file: %s", err);
  mkdir(io_at("adir.nii"), 0700);
  io_read_fails(io_at("adir.nii"), NDF_EIO, "not a regular file");
}

/* ---- gzip streams cut short or corrupt ---- */

/* A .nii.gz without the last 1 to 9 bytes of its gzip stream (the CRC32 and length trailer,
 * then the deflate data) is truncated; a wrong CRC or length is corrupt. zlib reports these
 * only through gzerror, so each is a case of its own. */
static void gzip_trailer(uint64_t *r) {
  int64_t shape[3] = {6, 10, 12};
  t_arr src;
  ndf_image img = io_random_image(&src, r, NDF_F32, 3, shape, 0);
  char err[512], name[64];
  const char *whole = io_at("trailer.nii.gz");
  CHECK(ndf_image_write(whole, &img, err, sizeof err) == NDF_OK, "write: %s", err);
  t_arr_free(&src, NULL);
  size_t n;
  unsigned char *b = io_read_file(whole, &n);
  if (!b || n < 40) {
    CHECK(0, "trailer.nii.gz: %zu bytes", b ? n : 0);
    free(b);
    return;
  }
  ndf_image back;
  if (ndf_image_read(whole, NULL, &back, err, sizeof err) == NDF_OK)
    ndf_image_free(&back);
  else
    CHECK(0, "the whole stream: %s", err);
  for (size_t cut = 1; cut <= 9; cut++) {
    snprintf(name, sizeof name, "trailer_cut%zu.nii.gz", cut);
    io_write_file(io_at(name), b, n - cut);
    io_read_fails(io_at(name), NDF_EINVAL, "truncated: the gzip stream ends before");
  }
  static const struct {
    size_t from_end;
    const char *name, *needle;
  } flips[] = {{8, "crc0", "wrong CRC"}, {5, "crc3", "wrong CRC"}, {4, "isize", "wrong length"}};
  for (size_t k = 0; k < sizeof flips / sizeof flips[0]; k++) {
    b[n - flips[k].from_end] ^= 0x10;
    snprintf(name, sizeof name, "trailer_%s.nii.gz", flips[k].name);
    io_write_file(io_at(name), b, n);
    io_read_fails(io_at(name), NDF_EINVAL, flips[k].needle);
    b[n - flips[k].from_end] ^= 0x10;
  }
  /* bytes after the stream are not gzip data: ignored, as zlib does */
  unsigned char *more = malloc(n + 3);
  memcpy(more, b, n);
  memcpy(more + n, "\0\0\0", 3);
  io_write_file(io_at("trailer_more.nii.gz"), more, n + 3);
  if (ndf_image_read(io_at("trailer_more.nii.gz"), NULL, &back, err, sizeof err) == NDF_OK)
    ndf_image_free(&back);
  else
    CHECK(0, "bytes after the stream: %s", err);
  free(more);
  free(b);
}

/* ---- the read limit ---- */

/* A small .nii.gz of zeros whose header declares 32 MiB (as deflate can hold them, so the
 * ratio guard lets it pass) is refused under a 1 MiB limit before anything is allocated;
 * the widened copy of a file's samples counts. */
static void read_limit(void) {
  int64_t dims[3] = {256, 256, 128};
  thdr h = base_header(1, 3, dims, 16);
  unsigned char hb[544];
  size_t hs = make_header(&h, hb);
  const char *big = io_at("zeros_32M.nii.gz");
  gzFile z = gzopen(big, "wb9");
  CHECK(z && gzwrite(z, hb, (unsigned)hs) == (int)hs, "gzopen %s", big);
  unsigned char *zeros = calloc(1, 1 << 20);
  for (int i = 0; z && i < 32; i++)
    CHECK(gzwrite(z, zeros, 1 << 20) == 1 << 20, "gzwrite");
  free(zeros);
  CHECK(z && gzclose(z) == Z_OK, "gzclose");
  struct stat sb;
  CHECK(stat(big, &sb) == 0 && sb.st_size < (1 << 20) / 16, "zeros_32M.nii.gz: %lld bytes",
        (long long)sb.st_size);
  setenv("NDF_READ_LIMIT", "1M", 1);
  io_read_fails(big, NDF_ENOMEM, "read limit");
  setenv("NDF_READ_LIMIT", "lots", 1);
  io_read_fails(big, NDF_EINVAL, "NDF_READ_LIMIT");
  unsetenv("NDF_READ_LIMIT");
  ndf_io_set_read_limit(1 << 20);
  io_read_fails(big, NDF_ENOMEM, "read limit");

  /* exactly at the limit: read; one byte under: refused. int8 widens to int16. */
  int64_t small[3] = {10, 10, 10};
  int8_t v8[1000];
  for (int i = 0; i < 1000; i++)
    v8[i] = (int8_t)(i % 251 - 125);
  thdr h8 = base_header(2, 3, small, 256);
  const char *i8 = io_at("limit_i8.nii"), *f32 = io_at("limit_f32.nii.gz");
  write_nifti(i8, &h8, v8, sizeof v8);
  int64_t dims32[3] = {10, 10, 10};
  ndf_image img;
  ndf_image_init(&img);
  img.a = ndf_array_contiguous(NDF_F32, 3, dims32, calloc(1000, 4));
  char err[512];
  CHECK(ndf_image_write(f32, &img, err, sizeof err) == NDF_OK, "write: %s", err);
  free(img.a.data);
  static const struct {
    const char *which;
    int64_t limit;
    int ok;
  } cases[] = {{"i8", 1999, 0}, {"i8", 2000, 1}, {"f32", 3999, 0}, {"f32", 4000, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const char *path = cases[k].which[0] == 'i' ? i8 : f32;
    ndf_io_set_read_limit(cases[k].limit);
    if (!cases[k].ok) {
      io_read_fails(path, NDF_ENOMEM, "read limit");
    } else if (ndf_image_read(path, NULL, &img, err, sizeof err) == NDF_OK) {
      ndf_image_free(&img);
    } else {
      CHECK(0, "%s under a limit of %lld: %s", path, (long long)cases[k].limit, err);
    }
  }
  ndf_io_set_read_limit(0);
}

/* ---- special files ---- */

/* The reader opens the file itself: a FIFO is refused without blocking (the alarm fails a
 * reader that waits for a writer), as are a device and a directory, whatever their name. */
static void special_files(void) {
  alarm(20);
  mkfifo(io_at("fifo.nii"), 0600);
  mkfifo(io_at("fifo.nii.gz"), 0600);
  symlink("/dev/null", io_at("null.nii"));
  mkdir(io_at("dir.nii.gz"), 0700);
  static const struct {
    const char *name, *needle;
  } cases[] = {{"fifo.nii", "a FIFO"},
               {"fifo.nii.gz", "a FIFO"},
               {"null.nii", "a character device"},
               {"dir.nii.gz", "a directory"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const char *path = io_at(cases[k].name);
    ndf_image img;
    ndf_image_init(&img);
    char err[512] = "";
    ndf_status st = ndf__nifti_read(path, NULL, &img, err, sizeof err);
    CHECK(st == NDF_EIO && strstr(err, path) && strstr(err, cases[k].needle),
          "%s: %s, '%s' (expected '%s')", cases[k].name, ndf_status_str(st), err, cases[k].needle);
    if (st == NDF_OK) ndf_image_free(&img);
    io_read_fails(path, NDF_EIO, cases[k].needle); /* and by name, through the dispatch */
  }
  alarm(0);
}

/* ---- voxel sizes and the time axis ---- */

/* A pixdim[1..3] that is zero, negative, NaN or infinite is not a voxel size: NaN. The 4th
 * NIfTI axis (the array's axis 0) is time: spacing 0, time_axis 0. Both versions. A header
 * with such sizes is written back usable, as is an image of NaN spacing and no header. */
static void voxel_sizes(void) {
  int64_t dims[4] = {4, 3, 2, 5};
  float vox[120] = {0};
  char err[512], name[64];
  for (int v = 1; v <= 2; v++) {
    static const double bad[2][3] = {{0, -1.5, NAN}, {INFINITY, -INFINITY, 0.5}};
    for (int k = 0; k < 2; k++) {
      thdr h = base_header(v, 3, dims, 16);
      for (int i = 0; i < 3; i++)
        h.pixdim[i + 1] = bad[k][i];
      snprintf(name, sizeof name, "badpix%d_v%d.nii", k, v);
      const char *path = io_at(name);
      write_nifti(path, &h, vox, 24 * 4);
      ndf_image img;
      if (ndf_image_read(path, NULL, &img, err, sizeof err) != NDF_OK) {
        CHECK(0, "read %s: %s", name, err);
        continue;
      }
      for (int d = 0; d < 3; d++) { /* array axis d is NIfTI axis 3 - d */
        double p = bad[k][2 - d], want = isfinite(p) && p > 0 ? p : NAN;
        CHECK(isnan(want) ? isnan(img.spacing[d]) : img.spacing[d] == want,
              "%s: spacing[%d] %g for pixdim %g", name, d, img.spacing[d], p);
      }
      CHECK(img.time_axis == -1, "%s: time_axis %d", name, img.time_axis);
      /* written back: positive finite pixdims (nifticlib's repair of the header's), and
       * read as voxel sizes again */
      snprintf(name, sizeof name, "badpix%d_v%d_out.nii", k, v);
      const char *out = io_at(name);
      CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write %s: %s", name, err);
      ndf_image back;
      if (ndf_image_read(out, NULL, &back, err, sizeof err) == NDF_OK) {
        for (int d = 0; d < 3; d++)
          CHECK(isfinite(back.spacing[d]) && back.spacing[d] > 0, "%s: spacing[%d] %g", name, d,
                back.spacing[d]);
        CHECK(same_bytes(&back.a, &img.a), "%s: data", name);
        ndf_image_free(&back);
      } else {
        CHECK(0, "read %s: %s", name, err);
      }
      ndf_image_free(&img);
    }
    /* 4-D: time */
    thdr h = base_header(v, 4, dims, 16);
    h.pixdim[1] = 1.5;
    h.pixdim[2] = 2;
    h.pixdim[3] = 2.5;
    h.pixdim[4] = 3;
    snprintf(name, sizeof name, "time_v%d.nii", v);
    write_nifti(io_at(name), &h, vox, sizeof vox);
    ndf_image img;
    if (ndf_image_read(io_at(name), NULL, &img, err, sizeof err) == NDF_OK) {
      CHECK(img.a.ndim == 4 && img.time_axis == 0 && img.spacing[0] == 0 && img.spacing[1] == 2.5 &&
                img.spacing[2] == 2 && img.spacing[3] == 1.5,
            "%s: time_axis %d spacing %g %g %g %g", name, img.time_axis, img.spacing[0],
            img.spacing[1], img.spacing[2], img.spacing[3]);
      ndf_image_free(&img);
    } else {
      CHECK(0, "read %s: %s", name, err);
    }
  }
  /* no header, NaN spacing: pixdim 1 */
  int64_t shape[3] = {2, 3, 4};
  ndf_image img;
  ndf_image_init(&img);
  img.a = ndf_array_contiguous(NDF_F32, 3, shape, vox);
  img.spacing[0] = img.spacing[1] = NAN;
  img.spacing[2] = 0.5;
  const char *out = io_at("nan_spacing.nii");
  CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write nan spacing: %s", err);
  size_t n;
  unsigned char *b = io_read_file(out, &n);
  CHECK(b && getf(b, 80) == 0.5f && getf(b, 84) == 1 && getf(b, 88) == 1,
        "nan spacing: pixdim %g %g %g", b ? getf(b, 80) : 0, b ? getf(b, 84) : 0,
        b ? getf(b, 88) : 0);
  free(b);
}

/* ---- the origin ---- */

/* The world position of voxel (i, j, k) under the qform of quaternion (b, c, d), offset q,
 * voxel size p and qfac (the NIfTI-1 formula, method 2). */
static void qform_at(const double bcd[3], const double q[3], const double p[3], double qfac,
                     const double ijk[3], double out[3]) {
  double b = bcd[0], c = bcd[1], d = bcd[2], a = 1 - b * b - c * c - d * d;
  a = a > 0 ? sqrt(a) : 0;
  double R[3][3] = {{a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)},
                    {2 * (b * c + a * d), a * a + c * c - b * b - d * d, 2 * (c * d - a * b)},
                    {2 * (b * d - a * c), 2 * (c * d + a * b), a * a + d * d - c * c - b * b}};
  double s[3] = {ijk[0] * p[0], ijk[1] * p[1], ijk[2] * p[2] * (qfac < 0 ? -1 : 1)};
  for (int r = 0; r < 3; r++)
    out[r] = R[r][0] * s[0] + R[r][1] * s[1] + R[r][2] * s[2] + q[r];
}

/* A nonzero origin moves the sform's translation and the qform's offset to the world
 * position of voxel origin (i, j, k) of the read grid; origin 0 leaves the header as read. */
static void origin_moves(uint64_t *r) {
  for (int v = 1; v <= 2; v++)
    for (int nd = 3; nd <= 4; nd++) {
      int64_t dims[4] = {t_randint(r, 3, 7), t_randint(r, 3, 7), t_randint(r, 3, 7), 2};
      int64_t n = dims[0] * dims[1] * dims[2] * (nd == 4 ? 2 : 1);
      float *vox = calloc((size_t)n, 4);
      thdr h = rich_header(v, nd, dims, 16);
      char name[64], err[512];
      snprintf(name, sizeof name, "orig_v%d_%dd.nii", v, nd);
      const char *src = io_at(name);
      write_nifti(src, &h, vox, (size_t)n * 4);
      ndf_image img;
      if (ndf_image_read(src, NULL, &img, err, sizeof err) != NDF_OK) {
        CHECK(0, "read %s: %s", name, err);
        free(vox);
        continue;
      }
      /* origin 0: the header as it was */
      snprintf(name, sizeof name, "orig_v%d_%dd_0.nii", v, nd);
      const char *out0 = io_at(name);
      CHECK(ndf_image_write(out0, &img, err, sizeof err) == NDF_OK, "write %s: %s", name, err);
      size_t na = 0, nb = 0;
      unsigned char *a = io_read_file(src, &na), *b = io_read_file(out0, &nb);
      CHECK(a && b && na == nb, "%s: %zu bytes, source %zu", name, nb, na);
      if (a && b && nb >= 544) same_header(a, b, v, name);
      free(b);
      /* i, j, k = -2, 3, -1 */
      const double ijk[3] = {-2, 3, -1};
      img.origin[nd - 1] = -2;
      img.origin[nd - 2] = 3;
      img.origin[nd - 3] = -1;
      snprintf(name, sizeof name, "orig_v%d_%dd_moved.nii", v, nd);
      const char *out = io_at(name);
      CHECK(ndf_image_write(out, &img, err, sizeof err) == NDF_OK, "write %s: %s", name, err);
      b = io_read_file(out, &nb);
      if (a && b && nb == na) {
        double got_s[3], got_q[3], want_s[3], want_q[3];
        const double p[3] = {h.pixdim[1], h.pixdim[2], h.pixdim[3]};
        qform_at(h.quat, h.qoff, p, h.pixdim[0], ijk, want_q);
        for (int i = 0; i < 3; i++) {
          want_s[i] =
              h.srow[i][0] * ijk[0] + h.srow[i][1] * ijk[1] + h.srow[i][2] * ijk[2] + h.srow[i][3];
          got_s[i] =
              v == 1 ? getf(b, 280 + 16 * (size_t)i + 12) : getd(b, 400 + 32 * (size_t)i + 24);
          got_q[i] = v == 1 ? getf(b, 268 + 4 * (size_t)i) : getd(b, 376 + 8 * (size_t)i);
          double tol = v == 1 ? 1e-3 : 1e-9; /* float32 fields near 1e3 */
          CHECK(fabs(got_s[i] - want_s[i]) <= tol && fabs(got_q[i] - want_q[i]) <= tol,
                "%s: row %d: srow offset %.9g (want %.9g), qoffset %.9g (want %.9g)", name, i,
                got_s[i], want_s[i], got_q[i], want_q[i]);
        }
        /* the rest of the header is the source's */
        if (v == 1) {
          CHECK(!memcmp(a + 256, b + 256, 12) && !memcmp(a + 76, b + 76, 32),
                "%s: quatern or pixdim", name);
          for (int i = 0; i < 3; i++)
            CHECK(!memcmp(a + 280 + 16 * i, b + 280 + 16 * i, 12), "%s: srow %d", name, i);
        } else {
          CHECK(!memcmp(a + 352, b + 352, 24) && !memcmp(a + 104, b + 104, 64),
                "%s: quatern or pixdim", name);
          for (int i = 0; i < 3; i++)
            CHECK(!memcmp(a + 400 + 32 * i, b + 400 + 32 * i, 24), "%s: srow %d", name, i);
        }
      } else {
        CHECK(0, "%s: %zu bytes, source %zu", name, b ? nb : 0, a ? na : 0);
      }
      free(a);
      free(b);
      ndf_image_free(&img);
      free(vox);
    }
}

/* `--grow R IN OUT`: IN grown by R voxels on each side of its spatial axes (its last three),
 * or cropped by -R, the samples at their places, origin -R. 0, or 1 with a message. */
static int grow_file(int64_t R, const char *in, const char *out) {
  ndf_image img;
  char err[512];
  if (ndf_image_read(in, NULL, &img, err, sizeof err) != NDF_OK) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  const ndf_array *a = &img.a;
  int64_t shape[NDF_MAX_DIMS];
  int spatial[NDF_MAX_DIMS] = {0};
  for (int d = 0; d < a->ndim; d++) {
    spatial[d] = d >= a->ndim - 3 && img.time_axis != d;
    shape[d] = a->shape[d] + (spatial[d] ? 2 * R : 0);
    if (shape[d] < 1) {
      fprintf(stderr, "%s: too small to crop by %lld\n", in, (long long)-R);
      ndf_image_free(&img);
      return 1;
    }
  }
  const size_t es = ndf_dtype_size(a->dtype);
  ndf_array b = ndf_array_contiguous(a->dtype, a->ndim, shape, NULL);
  const int64_t n = ndf_array_size(&b);
  b.data = calloc((size_t)n, es);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, at = 0, inside = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
      int64_t c = rest % shape[d] - (spatial[d] ? R : 0);
      rest /= shape[d];
      inside &= c >= 0 && c < a->shape[d];
      at += c * a->strides[d];
    }
    if (inside)
      memcpy((char *)b.data + i * (int64_t)es, (const char *)a->data + at * (int64_t)es, es);
  }
  ndf_image o = img;
  o.a = b;
  for (int d = 0; d < a->ndim; d++)
    o.origin[d] = spatial[d] ? -R : 0;
  ndf_status st = ndf_image_write(out, &o, err, sizeof err);
  if (st != NDF_OK) fprintf(stderr, "%s\n", err);
  free(b.data);
  ndf_image_free(&img);
  return st != NDF_OK;
}

/* A failed write leaves nothing at the target (and an existing file there intact). */
static void failed_writes(uint64_t *r) {
  int64_t shape[3] = {8, 64, 64};
  t_arr src;
  ndf_image img = io_random_image(&src, r, NDF_F64, 3, shape, 0);
  char err[512];
  CHECK(ndf_image_write("/nonexistent/dir/y.nii", &img, err, sizeof err) == NDF_EIO &&
            strstr(err, "/nonexistent/dir/y.nii"),
        "write to a missing dir: %s", err);
  /* the file system refuses mid-write: a file size limit */
  const char *keep = io_at("keep.nii");
  io_write_file(keep, "keep", 4);
  for (int gz = 0; gz < 2; gz++) {
    const char *path = io_at(gz ? "limited.nii.gz" : "limited.nii");
    ndf_status st = io_write_limited(path, &img, 4096, err, sizeof err);
    ndf_status st2 = io_write_limited(keep, &img, 4096, err, sizeof err);
    CHECK(st == NDF_EIO && st2 == NDF_EIO && strstr(err, "keep.nii") && strstr(err, "write"),
          "limited write: %s / %s: %s", ndf_status_str(st), ndf_status_str(st2), err);
    CHECK(!io_exists(path), "a failed write left %s", path);
  }
  size_t n;
  unsigned char *b = io_read_file(keep, &n);
  CHECK(b && n == 4 && !memcmp(b, "keep", 4), "a failed write clobbered an existing file");
  free(b);
  CHECK(io_leftovers() == 0, "temporary files left behind");
  /* a read that fails writes nothing (io_convert's sequence) */
  ndf_image in;
  const char *out = io_at("never.nii");
  if (ndf_image_read(io_at("cut100.nii"), NULL, &in, err, sizeof err) == NDF_OK) {
    CHECK(0, "cut100 read");
    ndf_image_write(out, &in, err, sizeof err);
    ndf_image_free(&in);
  }
  CHECK(!io_exists(out), "never.nii exists");
  t_arr_free(&src, NULL);
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--grow")) return grow_file(atoll(argv[2]), argv[3], argv[4]);
  if (io_dir_make("nifti")) return 1;
  uint64_t r = t_seed();
  round_trips(&r);
  big_and_singleton(&r);
  metadata(&r);
  singletons();
  widened(&r);
  scaled(&r);
  cross_format(&r);
  corrupt(&r);
  failed_writes(&r);
  gzip_trailer(&r);
  read_limit();
  special_files();
  voxel_sizes();
  origin_moves(&r);
  return io_finish("nifti", 1);
}
