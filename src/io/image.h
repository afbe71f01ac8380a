/* SPDX-License-Identifier: BSD-3-Clause */
/* image.h - images on disk: one interface over every file format ndfilt reads and writes.
 *
 * An image is a host array in C order, slowest axis first (numpy's and the library's
 * order), so a file's x axis (its fastest) is the array's last: a NIfTI volume of
 * dim (nx, ny, nz, nt) is an array of shape (nt, nz, ny, nx).
 *
 * Each format lives in its own file (npy.c, nifti.c, tiff.c, png.c, fits.c, raw.c) over its
 * reference library, behind two functions declared in formats.h. This file dispatches on the
 * file's name (or an explicit format) and owns what they share: the sample types, the
 * voxel size, and writing through a temporary file.
 *
 * Sample types. The array holds one of the library's dtypes (u8, u16, i16, f32, f64). A
 * reader keeps the file's type where it is one of those; otherwise it widens exactly
 * (i8 -> i16, u32/i32 -> f64, ...) and records the file's own type in its metadata. A
 * writer of the same format writes that original type back (rounded and clamped) when
 * the array still has the dtype the reader made of it; otherwise it writes the array's
 * dtype, or refuses with a message naming the types the format can hold.
 */
#ifndef NDF_IO_IMAGE_H
#define NDF_IO_IMAGE_H

#include <stddef.h>

#include "ndf.h"

typedef enum ndf_format {
  NDF_FORMAT_AUTO = 0, /* from the file's name */
  NDF_FORMAT_NPY,      /* .npy */
  NDF_FORMAT_NIFTI,    /* .nii, .nii.gz (NIfTI-1 and NIfTI-2) */
  NDF_FORMAT_TIFF,     /* .tif, .tiff (one page or a stack of pages) */
  NDF_FORMAT_PNG,      /* .png */
  NDF_FORMAT_FITS,     /* .fits, .fit, .fts, also .gz, and tile-compressed .fz; file.fits[HDU] */
  NDF_FORMAT_RAW       /* .raw, .bin, or any name with explicit shape and dtype */
} ndf_format;

typedef struct ndf_image {
  ndf_array a; /* host, C-contiguous, data from malloc */
  ndf_format format;
  /* -1, or the axis whose entries are independent images to be filtered one by one:
   * the colour channels of a PNG or TIFF, or an ImageJ hyperstack's channels (axis 0,
   * planar). Filters never mix along it. */
  int channel_axis;
  /* -1, or the axis that is time (the 4th axis of a NIfTI image, an ImageJ hyperstack's
   * frames): a value given for all axes (a sigma in mm, or a single unitless sigma) leaves
   * it alone, as fslmaths does. */
  int time_axis;
  /* The voxel size along each axis of a in millimetres; 0 where unknown or where the
   * axis is not a length (time, channels); NaN where the file states a size that is not
   * one (zero, negative, NaN or infinite on a spatial axis): a length in mm cannot be
   * converted there. */
  double spacing[NDF_MAX_DIMS];
  /* The index, in the grid the metadata describes, of the array's first voxel along each
   * axis: 0 for an image as read; -R for an output grown by R voxels on every side (ks
   * --output full). Writers move the file's origin (NIfTI affine, FITS CRPIX, TIFF
   * position) by it, so the output overlays the input in space. */
  int64_t origin[NDF_MAX_DIMS];
  /* The format's own header (NIfTI affine, intent, description; TIFF tags; FITS cards;
   * the file's sample type), for a writer of the same format. Owned through meta_free;
   * a borrowed copy (meta_free NULL) may be handed to a writer. */
  void *meta;
  void (*meta_free)(void *meta);
  /* Where a.data lies in a mapping of the file (ndf_read_opts.map): the mapping, unmapped by
   * ndf_image_free; NULL when a.data is from malloc. */
  void *map_base;
  size_t map_len;
} ndf_image;

/* For reading: the format (AUTO: from the name), and for raw files their layout. */
typedef struct ndf_read_opts {
  ndf_format format;
  int ndim;                     /* raw: number of axes, 1..NDF_MAX_DIMS */
  int64_t shape[NDF_MAX_DIMS];  /* raw: the shape, slowest axis first */
  ndf_dtype dtype;              /* raw: sample type (little-endian) */
  int64_t offset;               /* raw: bytes to skip at the start */
  double spacing[NDF_MAX_DIMS]; /* raw: voxel size in mm, 0 if unknown */
  /* 1: map the file's samples instead of reading them where they lie in it as the array
   * holds them (uncompressed .npy in C order, .nii unscaled in the machine's byte order, raw):
   * nothing is allocated for them, pages come from the file as they are touched; 2: the same,
   * writable (writes go to the file). Elsewhere the samples are read as with 0. */
  int map;
} ndf_read_opts;

/* The format a file name implies, or AUTO if none does. */
ndf_format ndf_format_from_name(const char *path);
const char *ndf_format_name(ndf_format f);
/* 1 if this build reads and writes f (a format is left out where its library was missing). */
int ndf_format_built_in(ndf_format f);

/* Reads path (o NULL: format from the name) into img. On failure img is untouched and
 * err holds a message naming the file: NDF_EIO (cannot open or read), NDF_EINVAL
 * (corrupt or truncated), NDF_EUNSUPPORTED (a valid file ndfilt cannot hold). */
ndf_status ndf_image_read(const char *path, const ndf_read_opts *o, ndf_image *img, char *err,
                          size_t errlen);

/* Writes img to path in the format its name implies (raw only for .raw and .bin: another
 * name is an error, so a mistyped extension cannot lose the header), through a temporary
 * file in the same directory renamed on success: on failure nothing is left, and messages
 * name path, not the temporary file. img->meta is used when img->format is that format,
 * and ignored otherwise. */
ndf_status ndf_image_write(const char *path, const ndf_image *img, char *err, size_t errlen);

void ndf_image_free(ndf_image *img);

/* 1 if ndf_image_write_mapped writes path's format (.npy, .nii, raw), else 0. */
int ndf_image_writes_mapped(const char *path);

/* Writes img (its a.data unused, may be NULL) to path as ndf_image_write would, its samples
 * made by fill: the file is written with zeros through a temporary file, which is mapped
 * (ndf_read_opts.map 2), and fill(ctx, out) writes the samples into out, an array of img's
 * dtype and shape lying in the file; the temporary file is renamed to path only when fill
 * returns NDF_OK. For the formats whose samples lie in the file as the array holds them
 * (.npy, .nii, raw: .raw, .bin), else NDF_EUNSUPPORTED. fill may release pages it is done
 * with (msync, then madvise MADV_DONTNEED): memory stays bounded by what it holds at once. */
ndf_status ndf_image_write_mapped(const char *path, const ndf_image *img,
                                  ndf_status (*fill)(void *ctx, ndf_array *out, char *err,
                                                     size_t errlen),
                                  void *ctx, char *err, size_t errlen);

/* Maps n bytes of the file path from offset off (writable: shared and writable), for a
 * reader given ndf_read_opts.map: *base and *len the mapping (from the page below off), the
 * bytes at (char *)*base + off % page size. NDF_EIO with a message naming path on failure. */
ndf_status ndf_io_map(const char *path, int64_t off, int64_t n, int writable, void **base,
                      size_t *len, char *err, size_t errlen);

/* An empty image: no data, no metadata, channel_axis and time_axis -1, spacing unknown. */
void ndf_image_init(ndf_image *img);

/* ---- bounds on what a file can make a reader allocate ---- */

/* The most bytes a reader allocates for one image's samples (the decoded array, after any
 * widening of its type): a file that declares or decompresses to more is refused with
 * NDF_ENOMEM and a message naming the limit and how to raise it. Default: the environment
 * variable NDF_READ_LIMIT (a byte count with an optional K, M, G or T suffix, powers of
 * 1024), else half the machine's physical memory. ndf_io_set_read_limit(0) restores the
 * default. Not thread-safe against concurrent reads. */
void ndf_io_set_read_limit(int64_t bytes);
int64_t ndf_io_read_limit(void);
/* Parses a size such as "512M", "2G", "1000000" into *bytes (> 0); 0 if malformed. */
int ndf_io_parse_size(const char *s, int64_t *bytes);
/* count elements of elem bytes each, checked for overflow and against the read limit
 * (NDF_READ_LIMIT malformed: NDF_EINVAL): NDF_OK, or an error naming path. */
ndf_status ndf_io_check_alloc(const char *path, int64_t count, size_t elem, char *err,
                              size_t errlen);

/* ---- threads ---- */

/* The threads a writer may compress with (gzip output); 0 (the default): OpenMP's. */
void ndf_io_set_threads(int threads);
int ndf_io_threads(void);

/* ---- special files ---- */

/* Opens path read-only as a regular file: a directory, FIFO, socket or device is refused
 * with a message, without blocking (a FIFO is opened non-blocking, then checked). On
 * success *fd is open (blocking reads) and *size is the file's size. */
ndf_status ndf_io_open_regular(const char *path, int *fd, int64_t *size, char *err, size_t errlen);
/* The same check by name (stat), for libraries that open the file themselves. */
ndf_status ndf_io_check_regular(const char *path, int64_t *size, char *err, size_t errlen);

/* ---- interrupted writes ---- */

/* The temporary file a write in progress would leave behind: ndf_io_write_via_temp records
 * its name while the format writes it. ndf_io_remove_pending() unlinks it and is
 * async-signal-safe: a program's handler for SIGINT, SIGTERM or SIGHUP calls it, then
 * re-raises the signal, so an interrupted write leaves nothing. One write at a time. */
void ndf_io_remove_pending(void);

/* ---- for the format files ---- */

/* img->meta where img was read in format f (its writer may use it), else NULL. */
void *ndf_io_meta(const ndf_image *img, ndf_format f);

/* Writes `path` through a temporary file named like it (same directory, same extension,
 * so libraries that choose compression by the name still do): write_tmp creates the file
 * at tmp by name (replacing the empty file there); on success it is renamed to path with
 * the usual mode (0666 less the umask), on failure removed. */
ndf_status ndf_io_write_via_temp(const char *path,
                                 ndf_status (*write_tmp)(const char *tmp, void *ctx, char *err,
                                                         size_t errlen),
                                 void *ctx, char *err, size_t errlen);

/* Formats "path: message" into err and returns s. */
ndf_status ndf_io_error(char *err, size_t errlen, ndf_status s, const char *path, const char *fmt,
                        ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

#endif
