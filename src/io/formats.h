/* SPDX-License-Identifier: BSD-3-Clause */
/* formats.h - each file format's reader and writer (one .c file each), for image.c.
 *
 * A reader fills img completely (a, format, channel_axis, spacing, meta) or leaves it
 * untouched and returns an error with a message naming the file. A writer writes
 * img->a (host, C-contiguous) to path through ndf_io_write_via_temp, using img->meta only
 * when img->format is its own format. Both validate before writing anything.
 */
#ifndef NDF_IO_FORMATS_H
#define NDF_IO_FORMATS_H

#include "image.h"

#define NDF__IO_FORMAT(name)                                                                       \
  ndf_status ndf__##name##_read(const char *path, const ndf_read_opts *o, ndf_image *img,          \
                                char *err, size_t errlen);                                         \
  ndf_status ndf__##name##_write(const char *path, const ndf_image *img, char *err, size_t errlen);

NDF__IO_FORMAT(npy)
NDF__IO_FORMAT(raw)
#ifdef NDF_HAVE_NIFTI
NDF__IO_FORMAT(nifti)
#endif
#ifdef NDF_HAVE_FITS
NDF__IO_FORMAT(fits)
#endif
#ifdef NDF_HAVE_TIFF
NDF__IO_FORMAT(tiff)
#endif
#ifdef NDF_HAVE_PNG
NDF__IO_FORMAT(png)
#endif

#undef NDF__IO_FORMAT
#endif
