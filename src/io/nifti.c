/* SPDX-License-Identifier: BSD-3-Clause */
/* nifti.c - NIfTI-1 and NIfTI-2 single files (.nii, .nii.gz) over nifticlib.
 *
 * nifticlib trusts the header it reads: its reader allocates what dim[] and datatype ask
 * for, prints to stderr on errors whatever its debug level, and its data loader zeroes NaN
 * and infinite floats; its znzlib also hides how a gzip stream ended (a missing CRC trailer
 * reads as a clean end). So this reader opens the file itself (a regular file only), reads
 * it through stdio or, for .gz, zlib, checks every header field it uses against the file
 * and the read limit (printing nothing), and only then hands the header to nifticlib
 * (nifti_convert_n?hdr2nim) for the metadata kept for the writer. The voxels are read here
 * and byte-swapped by nifticlib, bit for bit, NaNs included; a gzip stream is read to its
 * end, so that zlib checks its CRC and length. Header extensions are skipped on reading
 * and not written.
 *
 * The writer fills a nifti_image (the read header, or a plain one), lets nifticlib turn it
 * into a NIfTI-1 or NIfTI-2 header (nifti_convert_nim2n?hdr) and writes header, an empty
 * extender and the voxels through znzlib, checking every write (nifti_image_write returns
 * nothing and may print).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <threads.h>
#include <unistd.h>

#include <nifti2_io.h>
#include <zlib.h>

#include "convert.h"
#include "core/elem.h"
#include "formats.h"
#include "gzw.h"

/* The compression level of .nii.gz output (gzw.h: libdeflate's where the build has it). */
#define NDF__NII_GZ_LEVEL 3

/* What a read leaves for the writer: the header as nifticlib holds it (no data, file names
 * or extensions), its version, and what the reader did to the samples. */
typedef struct nifti_meta {
  nifti_image nim;
  int version;    /* 1 or 2 */
  int file_type;  /* the file's NIFTI_TYPE_* */
  ndf_dtype made; /* the dtype the reader made of it */
  int scaled;     /* scl_slope/scl_inter were applied on reading */
  int ndim;       /* NIfTI axes in the array (trailing singleton axes dropped) */
} nifti_meta;

static const char n2_magic[8] = {'n', '+', '2', '\0', '\r', '\n', '\032', '\n'};

static void quiet_once(void) { nifti_set_debug_level(0); }

/* nifticlib's messages off (its default level prints warnings) */
static void quiet(void) {
  static once_flag once = ONCE_FLAG_INIT;
  call_once(&once, quiet_once);
}

static int is_gz(const char *path) {
  size_t n = strlen(path);
  return n > 3 && !strcasecmp(path + n - 3, ".gz");
}

/* ---- sample types ---- */

/* The file type an array dtype is written as, unless the reader widened one. */
static int file_type_of(ndf_dtype t) {
  switch (t) {
  case NDF_U8: return NIFTI_TYPE_UINT8;
  case NDF_U16: return NIFTI_TYPE_UINT16;
  case NDF_I16: return NIFTI_TYPE_INT16;
  case NDF_F32: return NIFTI_TYPE_FLOAT32;
  case NDF_F64: return NIFTI_TYPE_FLOAT64;
  }
  return 0;
}

/* The dtype the reader makes of a file type (kept or widened exactly), or 0. */
static ndf_dtype dtype_of(int ft) {
  switch (ft) {
  case NIFTI_TYPE_UINT8: return NDF_U8;
  case NIFTI_TYPE_UINT16: return NDF_U16;
  case NIFTI_TYPE_INT16:
  case NIFTI_TYPE_INT8: return NDF_I16;
  case NIFTI_TYPE_FLOAT32: return NDF_F32;
  case NIFTI_TYPE_FLOAT64:
  case NIFTI_TYPE_INT32:
  case NIFTI_TYPE_UINT32:
  case NIFTI_TYPE_INT64:
  case NIFTI_TYPE_UINT64: return NDF_F64;
  }
  return 0;
}

/* The file's sample n as a double (exact for every type dtype_of takes but 64-bit
 * integers above 2^53, which the reader refuses). */
static double load_file(int ft, const void *p, int64_t n) {
  switch (ft) {
  case NIFTI_TYPE_UINT8: return ((const uint8_t *)p)[n];
  case NIFTI_TYPE_INT8: return ((const int8_t *)p)[n];
  case NIFTI_TYPE_UINT16: return ((const uint16_t *)p)[n];
  case NIFTI_TYPE_INT16: return ((const int16_t *)p)[n];
  case NIFTI_TYPE_UINT32: return ((const uint32_t *)p)[n];
  case NIFTI_TYPE_INT32: return ((const int32_t *)p)[n];
  case NIFTI_TYPE_UINT64: return (double)((const uint64_t *)p)[n];
  case NIFTI_TYPE_INT64: return (double)((const int64_t *)p)[n];
  case NIFTI_TYPE_FLOAT32: return ((const float *)p)[n];
  case NIFTI_TYPE_FLOAT64: return ((const double *)p)[n];
  }
  return 0;
}

/* The sample type of file type ft (one dtype_of takes). */
static ndf_io_type io_type_of(int ft) {
  switch (ft) {
  case NIFTI_TYPE_UINT8: return NDF_IO_U8;
  case NIFTI_TYPE_INT8: return NDF_IO_I8;
  case NIFTI_TYPE_UINT16: return NDF_IO_U16;
  case NIFTI_TYPE_INT16: return NDF_IO_I16;
  case NIFTI_TYPE_UINT32: return NDF_IO_U32;
  case NIFTI_TYPE_INT32: return NDF_IO_I32;
  case NIFTI_TYPE_UINT64: return NDF_IO_U64;
  case NIFTI_TYPE_INT64: return NDF_IO_I64;
  case NIFTI_TYPE_FLOAT32: return NDF_IO_F32;
  }
  return NDF_IO_F64; /* NIFTI_TYPE_FLOAT64 */
}

/* Millimetres per unit of pixdim[1..3]; an unknown unit is taken as mm (as FSL does). */
static double mm_per_unit(int xyz_units) {
  switch (xyz_units) {
  case NIFTI_UNITS_METER: return 1000.0;
  case NIFTI_UNITS_MICRON: return 0.001;
  default: return 1.0;
  }
}

/* ---- reading ---- */

/* The header fields the reader checks and uses, from either version (byte-swapped). */
typedef struct fields {
  int64_t dim[8];
  int datatype;
  double vox_offset, slope, inter, pixdim[8];
  int xyz_units;
} fields;

typedef union header {
  nifti_1_header h1;
  nifti_2_header h2;
  unsigned char b[sizeof(nifti_2_header)];
} header;

/* The file being read, over the descriptor ndf_io_open_regular gave: stdio for .nii, zlib
 * for .nii.gz (which passes plain bytes through). */
typedef struct src {
  FILE *f;
  gzFile z;
} src;

static ndf_status src_open(const char *path, int gz, src *s, int64_t *size, char *err,
                           size_t errlen) {
  memset(s, 0, sizeof *s);
  int fd;
  ndf_status st = ndf_io_open_regular(path, &fd, size, err, errlen);
  if (st != NDF_OK) return st;
  if (gz) {
    s->z = gzdopen(fd, "rb");
    if (s->z) gzbuffer(s->z, 1 << 17);
  } else {
    s->f = fdopen(fd, "rb");
  }
  if (s->z || s->f) return NDF_OK;
  int e = errno;
  close(fd);
  return ndf_io_error(err, errlen, NDF_ENOMEM, path, "cannot read it: %s",
                      e ? strerror(e) : "out of memory");
}

static void src_close(src *s) {
  if (s->z) gzclose_r(s->z);
  if (s->f) fclose(s->f);
}

/* Up to n bytes into buf: how many were read (fewer at the end of the data), or -1 on an
 * error, which src_error describes. */
static int64_t src_read(src *s, void *buf, int64_t n) {
  if (s->f) {
    size_t got = n > 0 ? fread(buf, 1, (size_t)n, s->f) : 0;
    return ferror(s->f) ? -1 : (int64_t)got;
  }
  int64_t done = 0;
  while (done < n) { /* gzread takes an unsigned int */
    unsigned want = n - done < (1 << 30) ? (unsigned)(n - done) : 1u << 30;
    int got = gzread(s->z, (char *)buf + done, want);
    if (got < 0) return -1;
    if (got == 0) break;
    done += got;
  }
  return done;
}

/* Why the data stopped where they did: NDF_OK where the file simply ends there, else an
 * error naming path. zlib reports a gzip stream cut short (its CRC and length trailer
 * missing, or the deflate data before it) only here, as Z_BUF_ERROR; a wrong CRC or length
 * as Z_DATA_ERROR. */
static ndf_status src_error(src *s, const char *path, char *err, size_t errlen) {
  if (s->f)
    return ferror(s->f) ? ndf_io_error(err, errlen, NDF_EIO, path, "read failed: %s",
                                       errno ? strerror(errno) : "unknown error")
                        : NDF_OK;
  int code;
  const char *msg = gzerror(s->z, &code);
  switch (code) {
  case Z_OK:
  case Z_STREAM_END: return NDF_OK;
  case Z_BUF_ERROR:
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "truncated: the gzip stream ends before its end marker and CRC");
  case Z_ERRNO: return ndf_io_error(err, errlen, NDF_EIO, path, "read failed: %s", strerror(errno));
  case Z_MEM_ERROR: return ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  }
  const char *colon = strrchr(msg, ':'); /* after zlib's "<fd:N>: " */
  msg = colon && colon[1] == ' ' ? colon + 2 : msg;
  const char *what = !strcmp(msg, "incorrect data check")     ? "wrong CRC: "
                     : !strcmp(msg, "incorrect length check") ? "wrong length (ISIZE): "
                                                              : "";
  return ndf_io_error(err, errlen, NDF_EINVAL, path, "corrupt gzip data (%s%s)", what, msg);
}

/* Up to n bytes into buf, *got of them: NDF_OK where they all came or the file simply ends
 * before (the caller says what is missing), else the error that stopped the read. */
static ndf_status src_fill(src *s, void *buf, int64_t n, int64_t *got, const char *path, char *err,
                           size_t errlen) {
  *got = src_read(s, buf, n);
  if (*got == n) return NDF_OK;
  if (*got < 0) *got = 0;
  return src_error(s, path, err, errlen);
}

/* A magic field for a message: printable characters as they are, others as \xNN. */
static const char *show_magic(const unsigned char *m, int n, char *out, size_t len) {
  size_t k = 0;
  out[0] = 0;
  for (int i = 0; i < n && m[i] && k + 5 < len; i++)
    k += (size_t)snprintf(out + k, len - k, m[i] >= 32 && m[i] < 127 ? "%c" : "\\x%02x", m[i]);
  return out;
}

static void get_fields(const header *h, int version, fields *f) {
  memset(f, 0, sizeof *f);
  if (version == 1) {
    const nifti_1_header *p = &h->h1;
    for (int i = 0; i < 8; i++) {
      f->dim[i] = p->dim[i];
      f->pixdim[i] = p->pixdim[i];
    }
    f->datatype = p->datatype;
    f->vox_offset = p->vox_offset;
    f->slope = p->scl_slope;
    f->inter = p->scl_inter;
    f->xyz_units = XYZT_TO_SPACE(p->xyzt_units);
  } else {
    const nifti_2_header *p = &h->h2;
    for (int i = 0; i < 8; i++) {
      f->dim[i] = p->dim[i];
      f->pixdim[i] = p->pixdim[i];
    }
    f->datatype = p->datatype;
    f->vox_offset = (double)p->vox_offset;
    f->slope = p->scl_slope;
    f->inter = p->scl_inter;
    f->xyz_units = XYZT_TO_SPACE(p->xyzt_units);
  }
}

/* Reads and checks the header: its version and byte order, and the raw (unswapped) bytes,
 * which nifticlib's converters want. Leaves f positioned after the header. */
static ndf_status read_header(src *f, const char *path, header *raw, int *version, int *swap,
                              char *err, size_t errlen) {
  memset(raw, 0, sizeof *raw);
  int64_t got;
  ndf_status st = src_fill(f, raw->b, 4, &got, path, err, errlen);
  if (st != NDF_OK) return st;
  if (got == 0) return ndf_io_error(err, errlen, NDF_EINVAL, path, "empty file");
  if (got < 4)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "not a NIfTI file (only %lld bytes)",
                        (long long)got);
  int32_t size;
  memcpy(&size, raw->b, 4);
  *swap = 0;
  if (size != 348 && size != 540) {
    nifti_swap_4bytes(1, &size);
    *swap = 1;
  }
  if (size != 348 && size != 540 && raw->b[0] == 0x1f && raw->b[1] == 0x8b)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "gzip-compressed data in a file not named .gz (rename it .nii.gz)");
  if (size != 348 && size != 540) {
    int32_t native;
    memcpy(&native, raw->b, 4);
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "not a NIfTI file (bad magic: its header size field reads %d; "
                        "NIfTI-1 has 348, NIfTI-2 540)",
                        native);
  }
  st = src_fill(f, raw->b + 4, size - 4, &got, path, err, errlen);
  if (st != NDF_OK) return st;
  if (got < size - 4)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "truncated: %lld of %d header bytes",
                        (long long)got + 4, size);
  const unsigned char *magic =
      size == 348 ? (const unsigned char *)raw->h1.magic : (const unsigned char *)raw->h2.magic;
  char shown[40];
  if (!memcmp(magic, size == 348 ? "ni1" : "ni2", 4))
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "header of a two-file NIfTI pair (magic %s; the voxels are in a .img "
                        "file): only single .nii files are read",
                        size == 348 ? "ni1" : "ni2");
  if (size == 348 && memcmp(magic, "n+1", 4))
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "bad magic %s%s%s (a NIfTI-1 file has \"n+1\"; ANALYZE 7.5 files are "
                        "not read)",
                        magic[0] ? "\"" : "(none)", show_magic(magic, 4, shown, sizeof shown),
                        magic[0] ? "\"" : "");
  if (size == 540 && memcmp(magic, n2_magic, 8))
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "%s",
                        memcmp(magic, n2_magic, 4)
                            ? "bad magic (a NIfTI-2 file has \"n+2\")"
                            : "bad magic: the NIfTI-2 signature's line-end bytes are altered "
                              "(copied as text?)");
  *version = nifti_header_version((const char *)raw->b, (size_t)size);
  if (*version != (size == 348 ? 1 : 2))
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "nifticlib does not take the header");
  return NDF_OK;
}

/* Checks the fields against the file and sizes the data: the array's axes, its dtype,
 * where the voxels start and how many bytes they take. */
/* The read limit against the samples as stored and as the array holds them. */
static ndf_status alloc_check(const char *path, int64_t count, int nbyper, ndf_dtype t, char *err,
                              size_t errlen) {
  ndf_status st = ndf_io_check_alloc(path, count, (size_t)nbyper, err, errlen);
  if (st == NDF_OK && ndf_dtype_size(t) > (size_t)nbyper)
    st = ndf_io_check_alloc(path, count, ndf_dtype_size(t), err, errlen);
  return st;
}

static ndf_status check_fields(const fields *h, const char *path, int version, int gz, int map,
                               int64_t file_size, int *nd, ndf_dtype *made, int *scaled,
                               int64_t *offset, int64_t *nvox, char *err, size_t errlen) {
  if (h->dim[0] < 1 || h->dim[0] > 7)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "bad dim[0] = %lld (the number of axes must be 1 to 7)",
                        (long long)h->dim[0]);
  int n = (int)h->dim[0];
  int64_t count = 1;
  for (int i = 1; i <= n; i++) {
    if (h->dim[i] < 1)
      return ndf_io_error(err, errlen, NDF_EINVAL, path,
                          "bad dim[%d] = %lld (axis lengths must be at least 1)", i,
                          (long long)h->dim[i]);
    if (h->dim[i] > INT64_MAX / 32 / count) /* bytes and offsets stay in int64 */
      return ndf_io_error(err, errlen, NDF_EINVAL, path, "bad dim[]: more voxels than can be");
    count *= h->dim[i];
  }
  while (n > 1 && h->dim[n] == 1)
    n--;
  if (n > NDF_MAX_DIMS)
    return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                        "%d-D image (dim[%d] = %lld): ndfilt holds at most 4 axes", n, n,
                        (long long)h->dim[n]);
  ndf_dtype t = dtype_of(h->datatype);
  if (!t) {
    switch (h->datatype) {
    case NIFTI_TYPE_COMPLEX64:
    case NIFTI_TYPE_COMPLEX128:
    case NIFTI_TYPE_COMPLEX256:
    case NIFTI_TYPE_RGB24:
    case NIFTI_TYPE_RGBA32:
    case NIFTI_TYPE_FLOAT128:
    case DT_BINARY:
      return ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                          "%s voxels are not supported (ndfilt reads uint8, int8, uint16, "
                          "int16, int32, uint32, int64, uint64, float32 and float64)",
                          nifti_datatype_string(h->datatype));
    }
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "bad datatype code %d", h->datatype);
  }
  /* As nibabel: a zero or non-finite slope means unscaled data. */
  *scaled = h->slope != 0 && isfinite(h->slope) && (h->slope != 1 || h->inter != 0);
  if (*scaled && !isfinite(h->inter))
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "bad scl_inter %g", h->inter);
  int nbyper, swapsize;
  nifti_datatype_sizes(h->datatype, &nbyper, &swapsize);
  /* Scaled voxels become float32, or float64 where float32 cannot hold the raw values. */
  if (*scaled) t = nbyper > 2 && h->datatype != NIFTI_TYPE_FLOAT32 ? NDF_F64 : NDF_F32;
  int hsize = version == 1 ? 348 : 540;
  if (!(h->vox_offset >= 0) || h->vox_offset > 9e15)
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "bad vox_offset %g", h->vox_offset);
  /* as nifticlib: the voxels start at vox_offset, but never inside the header */
  int64_t off = (int64_t)h->vox_offset < hsize ? hsize : (int64_t)h->vox_offset;
  int64_t bytes = count * nbyper;
  if (!gz && file_size < off + bytes) {
    if (file_size <= off)
      return ndf_io_error(err, errlen, NDF_EINVAL, path,
                          "truncated: the voxels should start at byte %lld, but the file "
                          "has %lld bytes",
                          (long long)off, (long long)file_size);
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "truncated: %lld of %lld data bytes",
                        (long long)(file_size - off), (long long)bytes);
  }
  /* deflate expands at most 1032 times: a header asking for more is truncated or corrupt,
   * and its size is not allocated */
  if (gz && (off + bytes) / 1032 > file_size + 4096)
    return ndf_io_error(err, errlen, NDF_EINVAL, path,
                        "truncated: %lld compressed bytes cannot hold the %lld data bytes "
                        "the header declares",
                        (long long)file_size, (long long)bytes);
  /* the samples as stored, and as the array holds them (widened or scaled); a mapping
   * (map) allocates nothing, and the caller checks where it does not map after all */
  ndf_status st = map ? NDF_OK : alloc_check(path, count, nbyper, t, err, errlen);
  if (st != NDF_OK) return st;
  *nd = n;
  *made = t;
  *offset = off;
  *nvox = count;
  return NDF_OK;
}

ndf_status ndf__nifti_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                           size_t errlen) {
  quiet();
  const int gz = is_gz(path);
  src f;
  int64_t file_size;
  ndf_status st = src_open(path, gz, &f, &file_size, err, errlen);
  if (st != NDF_OK) return st;

  header raw;
  fields h;
  int version = 0, swap = 0, nd = 0, scaled = 0, nbyper = 0, swapsize = 0;
  ndf_dtype made = 0;
  int64_t off = 0, nvox = 0, got = 0;
  void *data = NULL, *out = NULL, *base = NULL;
  size_t len = 0;
  int mapped = 0; /* the samples mapped where they lie (o->map) */
  nifti_meta *meta = NULL;
  st = read_header(&f, path, &raw, &version, &swap, err, errlen);
  if (st == NDF_OK) {
    header sw = raw;
    if (swap && version == 1) nifti_swap_as_nifti1(&sw.h1);
    if (swap && version == 2) nifti_swap_as_nifti2(&sw.h2);
    get_fields(&sw, version, &h);
    st = check_fields(&h, path, version, gz, o && o->map && !gz, file_size, &nd, &made, &scaled,
                      &off, &nvox, err, errlen);
  }
  if (st == NDF_OK) {
    nifti_datatype_sizes(h.datatype, &nbyper, &swapsize);
    /* the samples where they lie, aligned to their type (else, or where the file system
     * cannot map them, read) */
    mapped = o && o->map && !gz && !(swap && swapsize > 1) && !scaled &&
             file_type_of(made) == h.datatype && off % nbyper == 0 &&
             ndf_io_map(path, off, nvox * nbyper, o->map == 2, &base, &len, err, errlen) == NDF_OK;
    if (o && o->map && !gz && !mapped) st = alloc_check(path, nvox, nbyper, made, err, errlen);
  }
  if (st == NDF_OK) {
    data = mapped ? (char *)base + off % sysconf(_SC_PAGESIZE) : malloc((size_t)(nvox * nbyper));
    meta = calloc(1, sizeof *meta);
    if (!data || !meta) st = ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
  }
  if (st == NDF_OK && !mapped) { /* to the voxels: past the extensions, which are not read */
    int64_t at = version == 1 ? 348 : 540;
    if (!gz) {
      if (fseeko(f.f, (off_t)off, SEEK_SET) != 0)
        st = ndf_io_error(err, errlen, NDF_EIO, path, "seek failed: %s", strerror(errno));
    } else {
      char skip[4096];
      while (st == NDF_OK && at < off) {
        int64_t want = off - at < (int64_t)sizeof skip ? off - at : (int64_t)sizeof skip;
        st = src_fill(&f, skip, want, &got, path, err, errlen);
        if (st == NDF_OK && got < want)
          st = ndf_io_error(err, errlen, NDF_EINVAL, path,
                            "truncated: the voxels should start at byte %lld, but the data "
                            "end at %lld",
                            (long long)off, (long long)(at + got));
        at += got;
      }
    }
  }
  if (st == NDF_OK && !mapped) {
    const int64_t bytes = nvox * nbyper;
    st = src_fill(&f, data, bytes, &got, path, err, errlen);
    if (st == NDF_OK && got < bytes)
      st = ndf_io_error(err, errlen, NDF_EINVAL, path, "truncated: %lld of %lld data bytes",
                        (long long)got, (long long)bytes);
  }
  /* gzip checks its CRC and length at the end of the stream: read on to it (any bytes after
   * the voxels are not used) */
  while (st == NDF_OK && gz) {
    char tail[1 << 14];
    st = src_fill(&f, tail, sizeof tail, &got, path, err, errlen);
    if (got < (int64_t)sizeof tail) break;
  }
  src_close(&f);
  if (st == NDF_OK && swap && swapsize > 1) nifti_swap_Nbytes(nvox, swapsize, data);

  /* The samples as the array's dtype: the file's own, widened exactly, or scaled. */
  if (st == NDF_OK && (scaled || file_type_of(made) != h.datatype)) {
    out = malloc((size_t)nvox * ndf_dtype_size(made));
    if (!out) st = ndf_io_error(err, errlen, NDF_ENOMEM, path, "out of memory");
    for (int64_t i = 0; st == NDF_OK && i < nvox; i++) {
      if (!scaled && (h.datatype == NIFTI_TYPE_INT64 || h.datatype == NIFTI_TYPE_UINT64)) {
        uint64_t u = ((const uint64_t *)data)[i];
        int neg = h.datatype == NIFTI_TYPE_INT64 && (int64_t)u < 0;
        uint64_t mag = neg ? 0 - u : u;
        if (mag > (1ull << 53)) {
          st = ndf_io_error(err, errlen, NDF_EUNSUPPORTED, path,
                            "%s voxel %lld is %s%llu, beyond 2^53: float64 cannot hold it "
                            "exactly",
                            h.datatype == NIFTI_TYPE_INT64 ? "int64" : "uint64", (long long)i,
                            neg ? "-" : "", (unsigned long long)mag);
          break;
        }
      }
      double v = load_file(h.datatype, data, i);
      ndf__store(made, out, i, scaled ? v * h.slope + h.inter : v);
    }
    if (st == NDF_OK) {
      free(data);
      data = out;
    } else {
      free(out);
    }
  }

  /* nifticlib's own view of the header, for the writer */
  nifti_image *nim = NULL;
  if (st == NDF_OK) {
    nim = version == 1 ? nifti_convert_n1hdr2nim(raw.h1, NULL)
                       : nifti_convert_n2hdr2nim(raw.h2, NULL);
    if (!nim) st = ndf_io_error(err, errlen, NDF_ENOMEM, path, "nifticlib refused the header");
  }
  if (st != NDF_OK) {
    if (base)
      munmap(base, len);
    else
      free(data);
    free(meta);
    return st;
  }
  meta->nim = *nim;
  nifti_image_free(nim); /* it holds no file names, data or extensions */
  meta->version = version;
  meta->file_type = h.datatype;
  meta->made = made;
  meta->scaled = scaled;
  meta->ndim = nd;

  int64_t shape[NDF_MAX_DIMS];
  for (int k = 0; k < nd; k++)
    shape[k] = h.dim[nd - k];
  img->a = ndf_array_contiguous(made, nd, shape, data);
  img->format = NDF_FORMAT_NIFTI;
  img->channel_axis = -1;
  img->time_axis = nd == 4 ? 0 : -1; /* the 4th NIfTI axis */
  /* pixdim[1..3] in mm; one that is not a length (zero, negative, NaN or infinite) is NaN,
   * the time axis 0 */
  const double unit = mm_per_unit(h.xyz_units);
  for (int k = 0; k < nd; k++) {
    int i = nd - k; /* the NIfTI axis */
    double p = h.pixdim[i];
    img->spacing[k] = i > 3 ? 0 : isfinite(p) && p > 0 ? p * unit : NAN;
  }
  img->meta = meta;
  img->meta_free = free;
  img->map_base = base;
  img->map_len = len;
  return NDF_OK;
}

/* ---- writing ---- */

typedef struct wctx {
  const char *path;
  const ndf_array *a;
  header hdr;
  int hsize, file_type;
} wctx;

/* The bytes of a NIfTI file as it is written: plainly, or through the parallel gzip writer. */
typedef struct sink {
  FILE *f;
  ndf_gzw *gz;
} sink;

static int sink_write(sink *k, const void *p, size_t n) {
  return k->gz ? ndf_gzw_write(k->gz, p, n) : (fwrite(p, 1, n, k->f) == n ? 0 : -1);
}

static ndf_status write_tmp(const char *tmp, void *ctx, char *err, size_t errlen) {
  const wctx *w = ctx;
  const ndf_array *a = w->a;
  errno = 0;
  sink k = {fopen(tmp, "wb"), NULL};
  if (!k.f)
    return ndf_io_error(err, errlen, NDF_EIO, w->path, "cannot create: %s", strerror(errno));
  /* gzip at a fast level, a member per chunk compressed on its own thread: nibabel writes at
   * zlib's level 1, and a volume should not take longer to write than to filter */
  if (is_gz(tmp) && !(k.gz = ndf_gzw_open(k.f, NDF__NII_GZ_LEVEL, ndf_io_threads()))) {
    fclose(k.f);
    return ndf_io_error(err, errlen, NDF_ENOMEM, w->path, "out of memory");
  }
  static const char extender[4] = {0, 0, 0, 0}; /* no extensions */
  int bad = sink_write(&k, w->hdr.b, (size_t)w->hsize) || sink_write(&k, extender, 4);
  const int64_t n = ndf_array_size(a);
  if (!bad && file_type_of(a->dtype) == w->file_type && ndf__is_contiguous(a)) {
    size_t bytes = (size_t)n * ndf_dtype_size(a->dtype);
    bad = sink_write(&k, a->data, bytes);
  } else if (!bad) { /* converted (or gathered) a block at a time */
    enum { BLOCK = 8192 };
    uint64_t buf[BLOCK]; /* the widest file type */
    int nbyper, swapsize;
    nifti_datatype_sizes(w->file_type, &nbyper, &swapsize);
    const ndf_io_type t = io_type_of(w->file_type); /* rounded and clamped to it */
    for (int64_t i = 0; !bad && i < n; i += BLOCK) {
      int64_t m = n - i < BLOCK ? n - i : BLOCK;
      for (int64_t j = 0; j < m; j++)
        ndf_io_store(t, buf, j, ndf__load(a->dtype, a->data, ndf__offset(a, i + j)));
      bad = sink_write(&k, buf, (size_t)nbyper * (size_t)m);
    }
  }
  int e = errno;
  if (k.gz && ndf_gzw_close(k.gz) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  if (fclose(k.f) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  return bad ? ndf_io_error(err, errlen, NDF_EIO, w->path, "write failed: %s",
                            e ? strerror(e) : "unknown error")
             : NDF_OK;
}

static int fits_short(int64_t v) { return v >= -32768 && v <= 32767; }

/* nifticlib's copies of dim[1..7] and pixdim[1..7] by name (nx..nw, dx..dw), which its header
 * conversion reads. */
static void name_axes(nifti_image *nim) {
  int64_t *n[7] = {&nim->nx, &nim->ny, &nim->nz, &nim->nt, &nim->nu, &nim->nv, &nim->nw};
  double *d[7] = {&nim->dx, &nim->dy, &nim->dz, &nim->dt, &nim->du, &nim->dv, &nim->dw};
  for (int i = 0; i < 7; i++) {
    *n[i] = nim->dim[i + 1];
    *d[i] = nim->pixdim[i + 1];
  }
}

ndf_status ndf__nifti_write(const char *path, const ndf_image *img, char *err, size_t errlen) {
  quiet();
  const ndf_array *a = &img->a;
  const nifti_meta *m = ndf_io_meta(img, NDF_FORMAT_NIFTI);
  if (a->ndim < 1 || a->ndim > NDF_MAX_DIMS || !file_type_of(a->dtype))
    return ndf_io_error(err, errlen, NDF_EINVAL, path, "not a valid array");
  nifti_image nim;
  if (m) {
    nim = m->nim;
  } else { /* no NIfTI header: voxel size from the spacing (else 1 mm), no orientation */
    memset(&nim, 0, sizeof nim);
    for (int i = 0; i < 8; i++)
      nim.pixdim[i] = 1;
    nim.qfac = 1;
    nim.xyz_units = NIFTI_UNITS_MM;
  }
  nim.fname = nim.iname = NULL;
  nim.data = NULL;
  nim.num_ext = 0;
  nim.ext_list = NULL;

  /* The array's axes, fastest first; the singleton axes the reader dropped come back when
   * the array has the axes it made. */
  const int nd = a->ndim, old_nd = m ? m->ndim : 0;
  nim.dim[0] = nim.ndim = m && nd == old_nd && m->nim.dim[0] > nd ? m->nim.dim[0] : nd;
  for (int i = 1; i < 8; i++)
    nim.dim[i] = i <= nd ? a->shape[nd - i] : 1;
  nim.nvox = ndf_array_size(a);

  /* The array's first voxel is voxel `origin` of the grid the header describes: the sform's
   * translation and the qform's offset move to its place in the world, so that every voxel
   * keeps its own (before any change of voxel size below, which scales about voxel 0). */
  double o[3] = {0, 0, 0}; /* i, j, k */
  for (int n = 0; n < 3 && n < nd; n++)
    o[n] = (double)img->origin[nd - 1 - n];
  if (m && (o[0] != 0 || o[1] != 0 || o[2] != 0)) {
    if (nim.sform_code > 0)
      for (int r = 0; r < 3; r++)
        nim.sto_xyz.m[r][3] +=
            nim.sto_xyz.m[r][0] * o[0] + nim.sto_xyz.m[r][1] * o[1] + nim.sto_xyz.m[r][2] * o[2];
    if (nim.qform_code > 0) {
      /* The rotation as the standard gives it, a = sqrt(1 - b^2 - c^2 - d^2) (nibabel and ITK
       * read it so; nifticlib takes a as 0 below 3.2e-4, a rotation up to 6e-4 rad apart) */
      const double b = nim.quatern_b, c = nim.quatern_c, d = nim.quatern_d,
                   q = sqrt(fmax(0.0, 1.0 - (b * b + c * c + d * d))); /* the standard's a */
      const double R[3][3] = {
          {q * q + b * b - c * c - d * d, 2 * (b * c - q * d), 2 * (b * d + q * c)},
          {2 * (b * c + q * d), q * q + c * c - b * b - d * d, 2 * (c * d - q * b)},
          {2 * (b * d - q * c), 2 * (c * d + q * b), q * q + d * d - c * c - b * b}};
      double step[3]; /* voxel steps in mm along i, j, k (a voxel size that is none: 1) */
      for (int n = 0; n < 3; n++) {
        const double z = fabs(nim.pixdim[n + 1]);
        step[n] = o[n] * (isfinite(z) && z > 0 ? z : 1.0);
      }
      if (nim.qfac < 0) step[2] = -step[2];
      double *qo[3] = {&nim.qoffset_x, &nim.qoffset_y, &nim.qoffset_z};
      for (int r = 0; r < 3; r++)
        *qo[r] += R[r][0] * step[0] + R[r][1] * step[1] + R[r][2] * step[2];
      nim.qto_xyz = nifti_quatern_to_dmat44(nim.quatern_b, nim.quatern_c, nim.quatern_d,
                                            nim.qoffset_x, nim.qoffset_y, nim.qoffset_z,
                                            nim.pixdim[1], nim.pixdim[2], nim.pixdim[3], nim.qfac);
    }
  }

  /* The voxel size from the spacing where it is one (positive and finite; in the file's
   * unit), the header's pixdim elsewhere (unknown, 0, or not a size, NaN), 1 on axes the
   * header did not have. A changed size rescales the sform. */
  const double unit = mm_per_unit(nim.xyz_units);
  for (int i = 1; i <= nd; i++) {
    double old = fabs(nim.pixdim[i]), p = i > old_nd ? 1 : old, s = img->spacing[nd - i];
    if (i <= 3 && s > 0 && isfinite(s) && s != old * unit) p = s / unit;
    if (m && nim.sform_code > 0 && i <= 3 && i <= old_nd && old > 0 && p != old)
      for (int r = 0; r < 3; r++)
        nim.sto_xyz.m[r][i - 1] *= p / old;
    nim.pixdim[i] = p;
  }
  if (m && old_nd < 4 && nd >= 4) nim.time_units = NIFTI_UNITS_UNKNOWN; /* not time */
  name_axes(&nim);

  /* The file's own type back when the reader widened it and the array is as it made it.
   * Scaled voxels were applied on reading: they are written as they are, scl_slope
   * cleared (as fslmaths does). */
  wctx w;
  memset(&w, 0, sizeof w);
  w.path = path;
  w.a = a;
  w.file_type = file_type_of(a->dtype);
  if (m && !m->scaled && a->dtype == m->made) w.file_type = m->file_type;
  int swapsize;
  nim.datatype = w.file_type;
  nifti_datatype_sizes(nim.datatype, &nim.nbyper, &swapsize);
  nim.scl_slope = 0;
  nim.scl_inter = 0;

  /* The version read (NIfTI-1 for a new header), NIfTI-2 where NIfTI-1's shorts are too
   * small. */
  int version = m ? m->version : 1;
  for (int i = 1; i <= nd; i++)
    if (!fits_short(nim.dim[i])) version = 2;
  if (!fits_short(nim.intent_code) || !fits_short(nim.qform_code) || !fits_short(nim.sform_code) ||
      !fits_short(nim.slice_start) || !fits_short(nim.slice_end))
    version = 2;
  nim.nifti_type = version == 2 ? NIFTI_FTYPE_NIFTI2_1 : NIFTI_FTYPE_NIFTI1_1;
  nim.iname_offset = version == 2 ? 544 : 352; /* header, 4-byte extender, 16-aligned */
  int bad = version == 2 ? nifti_convert_nim2n2hdr(&nim, &w.hdr.h2)
                         : nifti_convert_nim2n1hdr(&nim, &w.hdr.h1);
  if (bad) return ndf_io_error(err, errlen, NDF_EINVAL, path, "nifticlib cannot make the header");
  if (version == 2) memcpy(w.hdr.h2.magic, n2_magic, 8); /* nifticlib leaves the last 4 zero */
  w.hsize = version == 2 ? 540 : 348;
  return ndf_io_write_via_temp(path, write_tmp, &w, err, errlen);
}
