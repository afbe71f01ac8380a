/* SPDX-License-Identifier: BSD-3-Clause */
/* npy.h - numpy .npy files (v1-v3), little-endian u8/u16/i16/f32/f64. */
#ifndef NDF_IO_NPY_H
#define NDF_IO_NPY_H

#include <stddef.h>

#include "ndf.h"

/* Reads path into a new C-contiguous host array (data from malloc, freed by
 * the caller): a Fortran-order file is transposed into C order, so the array
 * equals numpy.load(path) in shape and values. Only a regular file is read, and
 * only within the read limit (image.h). On failure writes a message naming the
 * file into err. */
ndf_status ndf_npy_read(const char *path, ndf_array *a, char *err, size_t errlen);

/* Writes a host array (any strides) to path, through a temporary file in the
 * same directory renamed on success: a failure leaves no partial file. */
ndf_status ndf_npy_write(const char *path, const ndf_array *a, char *err, size_t errlen);

#endif
