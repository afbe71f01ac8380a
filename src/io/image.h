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
   * the colour channels of a PNG or TIFF (axis 0, planar). Filters never mix along it. */
  int channel_axis;
  /* The voxel size along each axis of a in millimetres; 0 where unknown or where the
   * axis is not a length (time, channels). */
  double spacing[NDF_MAX_DIMS];
  /* The format's own header (NIfTI affine, intent, description; TIFF tags; FITS cards;
   * the file's sample type), for a writer of the same format. Owned through meta_free;
   * a borrowed copy (meta_free NULL) may be handed to a writer. */
  void *meta;
  void (*meta_free)(void *meta);
} ndf_image;

/* For reading: the format (AUTO: from the name), and for raw files their layout. */
typedef struct ndf_read_opts {
  ndf_format format;
  int ndim;                     /* raw: number of axes, 1..NDF_MAX_DIMS */
  int64_t shape[NDF_MAX_DIMS];  /* raw: the shape, slowest axis first */
  ndf_dtype dtype;              /* raw: sample type (little-endian) */
  int64_t offset;               /* raw: bytes to skip at the start */
  double spacing[NDF_MAX_DIMS]; /* raw: voxel size in mm, 0 if unknown */
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

/* Writes img to path in the format its name implies (raw for any other name), through a
 * temporary file in the same directory renamed on success: on failure nothing is left.
 * img->meta is used when img->format is that format, and ignored otherwise. */
ndf_status ndf_image_write(const char *path, const ndf_image *img, char *err, size_t errlen);

void ndf_image_free(ndf_image *img);

/* An empty image: no data, no metadata, channel_axis -1, spacing unknown. */
void ndf_image_init(ndf_image *img);

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
