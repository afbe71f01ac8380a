/* SPDX-License-Identifier: BSD-3-Clause */
/* kernels.h - the CLI's kernels: named ones (laplace, sobel-*, quadrature) and .npy files. */
#ifndef NDF_CLI_KERNELS_H
#define NDF_CLI_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ndf.h"

/* The named kernels, for messages. */
#define NDF_KERNEL_NAMES "laplace, sobel-x, sobel-y, sobel-z, quadrature"

/* The quadrature bank's parameters: Gaussian envelope (voxels), centre frequency (radians per
 * voxel: a wavelength of 5 voxels) and kernel length per axis. */
#define NDF_QUAD_SIGMA 1.5
#define NDF_QUAD_W0 (3.14159265358979323846 / 2.5)
#define NDF_QUAD_SIZE 9
#define NDF_QUAD_DIRS 6

/* nf kernels of one shape, one after the other in w, each C-contiguous of shape
 * shape[0..ndim-1]. Ownership: w is malloc'd; ndf_cli_kernel_free frees it. */
typedef struct {
  int nf, ndim;
  int64_t shape[NDF_MAX_DIMS];
  double *w;
} ndf_cli_kernel;

/* 1 if name is one of NDF_KERNEL_NAMES. */
int ndf_cli_kernel_is_named(const char *name);

/* Builds a named kernel for an input of ndim axes. The kernels are the arrays given to
 * convolve (scipy.ndimage.convolve): convolving with them gives scipy's filter; correlating
 * with them reverses every axis, which negates the antisymmetric ones (sobel-*, the
 * quadrature bank's odd parts).
 *   laplace     3^ndim: -2 ndim at the centre, 1 at its 2 ndim face neighbours; equals
 *               scipy.ndimage.laplace (the sum over axes of [1,-2,1]) in every mode.
 *   sobel-x/y/z 3^ndim: scipy.ndimage.sobel along the last, second-to-last, third-to-last
 *               axis: the outer product of [1,0,-1] along it (the reverse of sobel's
 *               correlate1d weights [-1,0,1]) and [1,2,1] along the others. Equals scipy
 *               in every mode except constant with a non-zero cval (scipy pads each pass's
 *               intermediate result with cval, a dense kernel pads only the input).
 *   quadrature  3-D only: 12 kernels 9x9x9, see ndf_cli_quadrature.
 * Returns NDF_OK, NDF_EINVAL (an unknown name, or an ndim the kernel does not have: err
 * says so and lists the names that fit) or NDF_ENOMEM. */
ndf_status ndf_cli_kernel_named(const char *name, int ndim, ndf_cli_kernel *k, char *err,
                                size_t errlen);

/* Writes the quadrature bank into w (12 * 9^3 doubles): for direction i of Knutsson's
 * hemi-icosahedron (x, y, z components, a = 2 / sqrt(10 + 2 sqrt 5),
 * b = (1 + sqrt 5) / sqrt(10 + 2 sqrt 5)):
 *   (a,0,b) (-a,0,b) (b,a,0) (b,-a,0) (0,b,a) (0,b,-a)
 * kernel 2i is the even part and 2i+1 the odd part of a Gabor pair: with the offset r from the
 * centre voxel, r = (kx - 4, ky - 4, kz - 4) for array index [kz][ky][kx] (axes z, y, x as
 * numpy's C order), and g the Gaussian of sigma NDF_QUAD_SIGMA,
 *   even = g cos(w0 u.r) - c g   (c makes the sum, the DC response, zero)
 *   odd  = g sin(w0 u.r)         (antisymmetric: its sum is zero)
 * each scaled to unit L2 norm (sum of squares 1, so white noise keeps its variance). As
 * convolution kernels, even + i odd passes the frequencies around +w0 u. */
void ndf_cli_quadrature(double *w);

/* Reads a .npy kernel of any integer, boolean or float dtype (either byte order) into
 * float64, nf = 1. Returns NDF_OK; NDF_EIO (cannot open or read: err names the file);
 * NDF_EINVAL (not a .npy file, an unsupported dtype, empty, 0-d or more than NDF_MAX_DIMS
 * axes); NDF_ENOMEM (also: over the read limit, ndf_io_read_limit). C or Fortran order; a
 * FIFO or other special file is refused without blocking. */
ndf_status ndf_cli_kernel_read(const char *path, ndf_cli_kernel *k, char *err, size_t errlen);

void ndf_cli_kernel_free(ndf_cli_kernel *k); /* NULL w is a no-op */

/* Elements per kernel (the product of the shape; -1 if it overflows). */
int64_t ndf_cli_kernel_size(const ndf_cli_kernel *k);

#endif
