/* SPDX-License-Identifier: BSD-3-Clause */
/* ndfilt.c - the ndfilt command-line tool: info, demo, and filters on .npy files. */
#define _DEFAULT_SOURCE /* madvise, MAP_ANONYMOUS: besides POSIX */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "core/elem.h"
#include "io/image.h"
#include "kernels.h"

static const char *usage_main =
    "usage: ndfilt [--device cpu|cuda|cuda:N] [--threads N] [--read-limit SIZE]\n"
    "              [--memory-limit SIZE] [-v] COMMAND [ARGS]\n"
    "       ndfilt --version | --help\n"
    "\n"
    "N-dimensional image filtering on CPUs and CUDA GPUs.\n"
    "\n"
    "commands:\n"
    "  info [FILE]   version, device, CPU threads, solvers; or a file's shape, type, voxel size\n"
    "  demo          filters on a noisy 3-D Shepp-Logan phantom, timings, demo-out/\n"
    "  bench         times the Gaussian filters on this device against each other\n"
    "  gauss         Gaussian filter or derivative (scipy.ndimage.gaussian_filter); sigma in\n"
    "                voxels or mm, or FWHM (fslmaths -s, AFNI 3dmerge -1blur_fwhm)\n"
    "  correlate1d   1-D correlation along an axis (scipy.ndimage.correlate1d)\n"
    "  convolve1d    1-D convolution along an axis (scipy.ndimage.convolve1d)\n"
    "  sepconv       the same 1-D weights along several axes (a separable filter)\n"
    "  conv          N-D convolution with a .npy or named kernel (scipy.ndimage.convolve)\n"
    "  correlate     N-D correlation with a .npy or named kernel (scipy.ndimage.correlate)\n"
    "  ks            spatially varying Gaussian kernel superposition (a sigma map per voxel)\n"
    "  uniform       the mean over a box (scipy.ndimage.uniform_filter; fslmaths -kernel\n"
    "                boxv -fmean)\n"
    "  median, min, max, rank, percentile\n"
    "                rank filters over a box (scipy.ndimage.median_filter, minimum_filter, ...)\n"
    "\n"
    "Run `ndfilt COMMAND --help` for a command's options and examples.\n"
    "The device defaults to $NDF_DEVICE, else the first usable CUDA GPU, else the CPU.\n"
    "--threads (or $NDF_THREADS) sets the CPU threads, at most 1024 and 8 per CPU.\n"
    "--read-limit (or $NDF_READ_LIMIT) caps the memory one image read may take (4G, 512M;\n"
    "default: half the machine's memory): a file that declares or decompresses to more is\n"
    "refused. FIFOs, devices and directories are refused, never waited on.\n"
    "--memory-limit bounds the memory a filter command takes (default: half the machine's\n"
    "memory): an uncompressed .nii, .npy or raw file whose input and output pass it is\n"
    "mapped rather than read, and filtered into an uncompressed .nii, .npy or raw output a\n"
    "slab of the slowest axis at a time (with the kernel's reach of its neighbours: the\n"
    "same result), so files larger than the memory go through (gauss with FIR methods,\n"
    "correlate1d, convolve1d, sepconv, correlate and conv with one kernel, the rank\n"
    "filters).\n"
    "-v prints what was read, the method that ran, each step's time and what was written.\n"
    "\n"
    "files (IN, OUT), by their names:\n"
    "  .nii .nii.gz  NIfTI-1 and -2, 1-D to 4-D; the header (affine, units, intent,\n"
    "                description) is kept\n"
    "  .tif .tiff    TIFF, one page or a stack; gray or RGB(A); resolution tags kept\n"
    "  .png          PNG, 8 or 16 bits, gray or RGB(A)\n"
    "  .fits .fit    FITS primary HDU or an image extension (file.fits[1]); cards kept\n"
    "  .npy          numpy arrays, C or Fortran order\n"
    "  .raw .bin     raw little-endian samples: give --shape Z,Y,X and --dtype (an input\n"
    "                of another name is read raw too when --shape is given)\n"
    "An output name with any other extension is an error (nothing is written).\n"
    "Arrays are in C order, slowest axis first, as numpy's: a NIfTI volume's (x, y, z)\n"
    "is the array's (z, y, x), and per-axis lists (--sigma 1,2,2) follow that order.\n"
    "Colour channels are filtered one by one. OUT keeps IN's sample type (integers\n"
    "rounded and clamped) unless --dtype says otherwise, and is written through a\n"
    "temporary file in its directory, renamed on success: a failure, or a signal\n"
    "(Ctrl-C, SIGTERM, SIGHUP), leaves no output.\n"
    "Results are scipy.ndimage's (NaN and Inf reaching the voxels scipy's would) unless a\n"
    "method is named or gauss --tolerance allows an approximation.\n"
    "\n"
    "exit codes: 0 success, 1 the computation failed, 2 bad usage or arguments,\n"
    "            3 a file could not be read (missing, truncated, corrupt, unsupported)\n"
    "            or written\n"
    "\n"
    "examples:\n"
    "  ndfilt gauss t1.nii.gz t1_s2.nii.gz --sigma 2mm\n"
    "  ndfilt gauss bold.nii.gz bold_s.nii.gz --fwhm 5mm        (4-D: each volume)\n"
    "  ndfilt gauss stack.tif stack_s.tif --sigma 1,2,2 --dtype f32\n"
    "  ndfilt gauss m31.fits m31_s.fits --sigma 3 --method iir\n"
    "  ndfilt --read-limit 16G gauss big.nii.gz big_s.nii.gz --sigma 1mm\n"
    "  ndfilt --memory-limit 8G gauss sheet.npy sheet_s.npy --sigma 2   (a 200 GB stack)\n";

static const char *usage_corr =
    "usage: ndfilt correlate1d|convolve1d IN OUT --weights W1,W2,... [options]\n"
    "\n"
    "options:\n"
    "  --weights LIST  comma-separated filter weights (required)\n"
    "  --axis A        axis to filter along; negative counts from the end (default -1)\n"
    "  --mode M        reflect, constant, nearest, mirror, wrap (default nearest; scipy's\n"
    "                  is reflect)\n"
    "  --cval V        value outside the array for --mode constant (default 0)\n"
    "  --origin O      shift of the filter, as scipy (default 0)\n"
    "  --method M      auto, or a solver from `ndfilt info`\n"
    "  --dtype T       output dtype u8, u16, i16, f32, f64 (default: the input's)\n"
    "  --shape LIST    IN is raw samples of this shape, of type --dtype\n"
    "\n"
    "OUT is written through a temporary file and renamed, so a failure leaves no output.\n"
    "\n"
    "example:\n"
    "  ndfilt correlate1d volume.npy smooth.npy --weights 1,4,6,4,1 --axis 0 --mode nearest\n";

static const char *usage_sepconv =
    "usage: ndfilt sepconv IN OUT --weights W1,W2,... [options]\n"
    "\n"
    "The same 1-D weights along each listed axis, exactly as successive\n"
    "scipy.ndimage.correlate1d (or convolve1d) calls in increasing axis order.\n"
    "The weights are used as given, not normalised. A per-axis LIST holds one value\n"
    "for every listed axis, or one per listed axis (in the order of --axes).\n"
    "\n"
    "options:\n"
    "  --weights LIST  comma-separated filter weights (required)\n"
    "  --axes LIST     axes to filter along; negative counts from the end (default all)\n"
    "  --mode LIST     reflect, constant, nearest, mirror, wrap (default nearest)\n"
    "  --cval V        value outside the array for --mode constant (default 0)\n"
    "  --origin LIST   shift of the filter, as scipy (default 0)\n"
    "  --convolve      convolve (scipy.ndimage.convolve1d) instead of correlate\n"
    "  --method M      auto, or a solver from `ndfilt info` (cpu_sep, cuda_sep, ...)\n"
    "  --dtype T       output dtype u8, u16, i16, f32, f64 (default: the input's)\n"
    "  --shape LIST    IN is raw samples of this shape, of type --dtype\n"
    "\n"
    "OUT is written through a temporary file and renamed, so a failure leaves no output.\n"
    "\n"
    "example:\n"
    "  ndfilt sepconv volume.npy smooth.npy --weights 0.25,0.5,0.25 --axes 1,2\n";

static const char *usage_gauss =
    "usage: ndfilt gauss IN OUT --sigma S[,S...] | --fwhm F[,F...] [options]\n"
    "\n"
    "Gaussian filter, exactly scipy.ndimage.gaussian_filter (except the default mode),\n"
    "unless --method names a recursive filter or --tolerance allows one:\n"
    "along each axis whose sigma is > 0, in increasing axis order, the sampled Gaussian\n"
    "on [-radius, radius], normalised to sum 1, or its derivative of the given order.\n"
    "A LIST holds one value for every axis, or one per axis of IN (comma-separated), in\n"
    "array order (slowest first: z, y, x for a NIfTI volume); colour channels not counted.\n"
    "\n"
    "options:\n"
    "  --sigma LIST     standard deviation, >= 0, in voxels (2) or in mm (2mm; also um, cm)\n"
    "                   by IN's voxel size along each axis; 0 leaves an axis alone. One\n"
    "                   value for all axes, in voxels or mm, leaves the time axis of a\n"
    "                   4-D NIfTI image alone, as fslmaths -s does (list 4 values to\n"
    "                   smooth time). A voxel size the file states as zero, negative,\n"
    "                   NaN or infinite is an error with mm\n"
    "  --fwhm LIST      full width at half maximum instead of sigma (2.3548 sigma), the\n"
    "                   same units (AFNI's -1blur_fwhm)\n"
    "  --order LIST     derivative order, >= 0 (default 0: smoothing)\n"
    "  --truncate T     radius = int(T * sigma + 0.5), T > 0 (default 4.0)\n"
    "  --radius LIST    kernel radius >= 1; overrides --truncate\n"
    "  --mode LIST      reflect, constant, nearest, mirror, wrap (default nearest,\n"
    "                   as fslmaths; scipy's default is reflect)\n"
    "  --cval V         value outside the array for --mode constant (default 0)\n"
    "  --method M       fir, or its solvers cpu_sep, cuda_sep; a recursive method (below);\n"
    "                   or auto (default): fir, scipy's result, unless --tolerance allows\n"
    "                   iir_deriche\n"
    "  --tolerance E    the error auto may add to scipy's result (relative L2); from 1e-3\n"
    "                   on, auto takes iir_deriche where that is cheaper and every filtered\n"
    "                   axis has mode nearest, order 0, sigma >= 2, no --radius; on an image\n"
    "                   holding NaN or Inf, fir all the same (default 0)\n"
    "  --iir-order N    the recursive method's order; 0: its default (below)\n"
    "  --mask FILE      smooth within a mask (its non-zero voxels; IN's shape, or one volume's):\n"
    "                   normalised convolution f(x m) / f(m), NaN where no masked voxel is in\n"
    "                   reach (AFNI 3dBlurInMask, astropy's NaN interpolation)\n"
    "  --nan omit       leave NaN voxels out the same way (default propagate: scipy's)\n"
    "  --dtype T        output dtype u8, u16, i16, f32, f64 (default: the input's)\n"
    "  --shape LIST     IN is raw samples of this shape, of type --dtype\n"
    "\n"
    "recursive (IIR) methods approximate the untruncated Gaussian at a cost independent of\n"
    "sigma; mode nearest only (this command's default), order 0; --truncate and --radius are\n"
    "ignored; a NaN or Inf reaches every voxel. Relative L2 error against the true Gaussian:\n"
    "  iir_deriche      below 1e-3 (--iir-order 4 only); iir, cpu_iir, cuda_iir run it too\n"
    "  iir_vyv          about 1e-2, 4e-3, 1.5e-3 for --iir-order 3 (default), 4, 5;\n"
    "                   order 4 reaches sigma 100, order 5 sigma 40; worse below sigma 2\n"
    "  iir_alvarez      about 0.1 at 3 steps, more at small sigma; --iir-order 1 to 5\n"
    "                   steps (default 3)\n"
    "\n"
    "OUT is written through a temporary file and renamed, so a failure leaves no output.\n"
    "\n"
    "examples:\n"
    "  ndfilt gauss t1.nii.gz t1_smooth.nii.gz --sigma 2mm\n"
    "  ndfilt gauss bold.nii.gz bold_s.nii.gz --fwhm 6mm       (each 3-D volume in turn)\n"
    "  ndfilt gauss cells.tif cells_s.tif --sigma 1,2,2 --dtype f32\n"
    "  ndfilt gauss sky.fits sky_s.fits --sigma 1.5\n"
    "  ndfilt gauss t1.npy t1_smooth.npy --sigma 2\n"
    "  ndfilt gauss t1.npy t1_dz.npy --sigma 1.5 --order 1,0,0 --mode reflect\n"
    "  ndfilt gauss ct.npy ct_s8.npy --sigma 8 --method iir\n";

static const char *usage_ks =
    "usage: ndfilt ks IN OUT --sigma-map S.npy [--sigma-map S1.npy ...] [options]\n"
    "\n"
    "Spatially varying Gaussian kernel superposition: every voxel spread (index input) or\n"
    "gathered (index output) by a Gaussian of its own width, the sigma map's value there in\n"
    "voxels; one map for every axis, or one --sigma-map per axis of IN, in axis order, each\n"
    "of IN's shape. The kernel is the voxel-integrated Gaussian, cut off past\n"
    "ceil(n_sigma * sigma) voxels (include/ndf.h, ndf_ks, has the definition).\n"
    "\n"
    "options:\n"
    "  --sigma-map F    a sigma map (.npy, any dtype; values finite and >= 0) (required)\n"
    "  --index I        input (each voxel's own sigma spreads it; default) or output (each\n"
    "                   output voxel's sigma gathers)\n"
    "  --n-sigma N      cut-off in sigmas, > 0 (default 3)\n"
    "  --output E       same (IN's grid; default) or full (IN grown by the largest radius\n"
    "                   on every side, nothing dropped; the file's origin moved with it, so\n"
    "                   OUT overlays IN)\n"
    "  --normalize      each voxel's truncated kernel sums to 1 (mass-preserving)\n"
    "  --method M       auto, cpu_ks, cuda_ks_gather, cuda_ks_scatter_warpsync, ...\n"
    "                   (ndfilt info lists them; default auto)\n"
    "  --deterministic  a solver whose result is bitwise the same on every run\n"
    "  --dtype T        output dtype u8, u16, i16, f32, f64 (default: the input's)\n"
    "  --shape LIST     IN is raw samples of this shape, of type --dtype\n"
    "\n"
    "OUT is written through a temporary file and renamed, so a failure leaves no output.\n"
    "\n"
    "examples:\n"
    "  ndfilt ks dose.npy dose_blur.npy --sigma-map spread.npy --normalize --output full\n"
    "  ndfilt ks img.npy img_psf.npy --sigma-map sz.npy --sigma-map sy.npy --sigma-map sx.npy\n";

static const char *usage_rank =
    "usage: ndfilt median|min|max IN OUT --size LIST [options]\n"
    "       ndfilt rank IN OUT --rank R --size LIST [options]\n"
    "       ndfilt percentile IN OUT --percentile P --size LIST [options]\n"
    "\n"
    "Rank filters over a box, exactly scipy.ndimage's median_filter, minimum_filter,\n"
    "maximum_filter, rank_filter and percentile_filter: each voxel becomes the value of the\n"
    "given rank among the voxels of the box around it (min: the smallest; median: rank n/2 of\n"
    "n; rank R: 0 the smallest, -1 the largest; percentile P: rank int(n P / 100), 100 the\n"
    "largest). The result is one of the input's values: exact in any dtype. A LIST holds one\n"
    "value for every axis, or one per axis of IN (comma-separated); a length of 1 leaves an\n"
    "axis alone.\n"
    "\n"
    "options:\n"
    "  --size LIST       the box's length along the axes (required)\n"
    "  --rank R          rank (ndfilt rank; required there)\n"
    "  --percentile P    percentile, -100 to 100 (ndfilt percentile; required there)\n"
    "  --mode LIST       reflect, constant, nearest, mirror, wrap (default nearest; scipy's\n"
    "                    is reflect)\n"
    "  --cval V          value outside the array for --mode constant (default 0)\n"
    "  --origin LIST     shift of the box, as scipy (default 0)\n"
    "  --dtype T         output dtype u8, u16, i16, f32, f64 (default: the input's)\n"
    "  --shape LIST      IN is raw samples of this shape, of type --dtype\n"
    "\n"
    "examples:\n"
    "  ndfilt median noisy.nii.gz clean.nii.gz --size 3\n"
    "  ndfilt max mask.nii.gz dilated.nii.gz --size 5,5,1\n"
    "  ndfilt percentile ct.nii.gz p90.nii.gz --percentile 90 --size 7\n";

static const char *usage_uniform =
    "usage: ndfilt uniform IN OUT --size LIST [options]\n"
    "\n"
    "The mean over a box, as scipy.ndimage.uniform_filter: a 1-D mean of --size samples along\n"
    "each axis whose length is above 1, in increasing axis order (into an integer output the\n"
    "mean is rounded once, at the end, where scipy truncates after each axis). A LIST holds one\n"
    "value for every axis, or one per axis of IN (comma-separated); a length of 1 leaves an\n"
    "axis alone.\n"
    "\n"
    "options:\n"
    "  --size LIST       the box's length along the axes (required)\n"
    "  --mode LIST       reflect, constant, nearest, mirror, wrap (default nearest; scipy's\n"
    "                    is reflect)\n"
    "  --cval V          value outside the array for --mode constant (default 0)\n"
    "  --origin LIST     shift of the box, as scipy (default 0)\n"
    "  --method M        auto, or a solver from `ndfilt info` (cpu_box, cpu_sep, cuda_sep, ...)\n"
    "  --dtype T         output dtype u8, u16, i16, f32, f64 (default: the input's; integer\n"
    "                    outputs are rounded and clamped)\n"
    "  --shape LIST      IN is raw samples of this shape, of type --dtype\n"
    "\n"
    "OUT is written through a temporary file and renamed, so a failure leaves no output.\n"
    "\n"
    "example:\n"
    "  ndfilt uniform t1.nii.gz mean5.nii.gz --size 5 --dtype f32\n";

static const char *usage_conv =
    "usage: ndfilt conv|correlate IN OUT --kernel K [options]\n"
    "\n"
    "N-D convolution with a dense kernel, exactly scipy.ndimage.convolve (`conv`, also spelt\n"
    "`convolve`), or correlation, exactly scipy.ndimage.correlate (`correlate`); convolve is\n"
    "correlate with the kernel reversed on every axis. A LIST holds one value for every axis,\n"
    "or one per axis of IN (comma-separated).\n"
    "\n"
    "options:\n"
    "  --kernel K      a .npy file (any integer or float dtype, used as float64) with as many\n"
    "                  axes as IN, or a named kernel (below; a file so named: ./NAME) (required)\n"
    "  --mode LIST     reflect, constant, nearest, mirror, wrap (default nearest; scipy's\n"
    "                  is reflect)\n"
    "  --cval V        value outside the array for --mode constant (default 0)\n"
    "  --origin LIST   shift of the kernel, as scipy (default 0)\n"
    "  --method M      auto, direct, fft, or a solver from `ndfilt info` (default auto;\n"
    "                  auto runs a direct solver on an image holding NaN or Inf, so they\n"
    "                  reach the voxels scipy's would; fft spreads them everywhere)\n"
    "  --dtype T       output dtype u8, u16, i16, f32, f64 (default: the input's; f32 for\n"
    "                  quadrature). Integer outputs are rounded and clamped, so signed\n"
    "                  kernels (laplace, sobel) on an integer input want --dtype f32.\n"
    "  --shape LIST    IN is raw samples of this shape, of type --dtype\n"
    "\n"
    "named kernels, 3 (quadrature 9) long on each of IN's axes. They are convolution kernels:\n"
    "`conv` with them gives scipy's filter; `correlate` reverses them, which negates sobel and\n"
    "quadrature's odd parts.\n"
    "  laplace         scipy.ndimage.laplace: [1,-2,1] along each axis, summed\n"
    "  sobel-x         scipy.ndimage.sobel along the last axis (x): [1,0,-1] along it (the\n"
    "                  reverse of sobel's correlate weights [-1,0,1]) times [1,2,1] along\n"
    "                  each other axis; as scipy in every mode but constant with cval != 0\n"
    "  sobel-y         the same along the second-to-last axis (y), 2 or more axes\n"
    "  sobel-z         the same along the third-to-last axis (z), 3 or more axes\n"
    "  quadrature      3-D only: a bank of 12 kernels 9x9x9, Gabor quadrature pairs (sigma\n"
    "                  1.5 voxels, wavelength 5 voxels) along Knutsson's 6 directions;\n"
    "                  OUT has shape (12, Z, Y, X): direction 0 even, direction 0 odd,\n"
    "                  direction 1 even, ... (directions and norms: tools/kernels.h)\n"
    "\n"
    "OUT is written through a temporary file and renamed, so a failure leaves no output.\n"
    "\n"
    "examples:\n"
    "  ndfilt conv ct.npy edges.npy --kernel laplace --mode nearest --dtype f32\n"
    "  ndfilt correlate img.npy out.npy --kernel psf.npy --mode constant --method fft\n"
    "  ndfilt conv t1.npy q.npy --kernel quadrature\n";

static int usage_error(const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ndfilt: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see ndfilt --help)\n");
  va_end(ap);
  return NDF_EXIT_USAGE;
}

/* Prints "ndfilt: <prefix><msg>" on stderr; a message quoting a corrupt file may hold any
 * bytes: control characters and bytes that are not UTF-8 are shown as \xNN. */
static void say(const char *prefix, const char *msg) {
  fprintf(stderr, "ndfilt: %s", prefix);
  for (const unsigned char *p = (const unsigned char *)msg; *p;) {
    int n = *p < 0x80             ? 1
            : (*p & 0xe0) == 0xc0 ? 2
            : (*p & 0xf0) == 0xe0 ? 3
            : (*p & 0xf8) == 0xf0 ? 4
                                  : 0; /* a UTF-8 sequence's length */
    for (int k = 1; k < n; k++)
      if ((p[k] & 0xc0) != 0x80) n = 0;
    if (n == 1 && (*p >= 0x20 || *p == '\t') && *p != 0x7f) {
      fputc(*p, stderr);
    } else if (n > 1) {
      fwrite(p, 1, (size_t)n, stderr);
    } else {
      fprintf(stderr, "\\x%02x", *p);
      n = 1;
    }
    p += n;
  }
  fputc('\n', stderr);
}

static int parse_int(const char *s, int *v) {
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (errno || end == s || *end || x < -1000000 || x > 1000000) return 0;
  *v = (int)x;
  return 1;
}

static ndf_dtype parse_dtype(const char *s) {
  for (ndf_dtype t = NDF_U8; t <= NDF_F64; t++)
    if (!strcmp(s, ndf_dtype_name(t))) return t;
  return 0;
}

/* ------------------------------------------------------------------ lists */

#define MODE_NAMES "modes (reflect, constant, nearest, mirror, wrap)"

/* Parses item k of a list into dst[k]; 0 rejects it. */
typedef int (*item_fn)(const char *item, int64_t k, void *dst);

static int item_double(const char *s, int64_t k, void *dst) {
  char *end;
  double x = strtod(s, &end);
  if (end == s || *end) return 0;
  ((double *)dst)[k] = x;
  return 1;
}

static int item_int(const char *s, int64_t k, void *dst) { return parse_int(s, (int *)dst + k); }

static int item_order(const char *s, int64_t k, void *dst) {
  return item_int(s, k, dst) && ((int *)dst)[k] >= 0;
}

static int item_radius(const char *s, int64_t k, void *dst) {
  return item_int(s, k, dst) && ((int *)dst)[k] >= 1;
}

static int item_mode(const char *s, int64_t k, void *dst) {
  return ndf_mode_parse(s, (ndf_mode *)dst + k) == NDF_OK;
}

/* Parses a comma-separated list into dst with item(); returns the count, -1
 * if an item is malformed, or -2 if there are more than cap. */
static int64_t parse_list(const char *s, int64_t cap, item_fn item, void *dst) {
  char buf[64];
  for (int64_t k = 0;; k++) {
    size_t len = strcspn(s, ",");
    if (k >= cap) return -2;
    if (len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (!item(buf, k, dst)) return -1;
    if (!s[len]) return k + 1;
    s += len + 1;
  }
}

/* A per-axis option (at most NDF_MAX_DIMS values): parses it into dst and
 * sets *n, or prints a usage error naming the option, saying what each item
 * should be, and returns its code. */
static int parse_axis_list(const char *opt, const char *s, item_fn item, void *dst, int64_t *n,
                           const char *items) {
  *n = parse_list(s, NDF_MAX_DIMS, item, dst);
  if (*n == -2) return usage_error("%s '%s' has more than %d values", opt, s, NDF_MAX_DIMS);
  if (*n < 0) return usage_error("bad %s '%s': expected %s, comma-separated", opt, s, items);
  return NDF_EXIT_OK;
}

/* A per-axis list of n values is one for all naxes axes (those of `of`), or one for each. */
static int check_count(const char *opt, int64_t n, int naxes, const char *of) {
  if (n == 1 || n == naxes) return NDF_EXIT_OK;
  return usage_error("%s has %lld values: give one, or one per axis of %s (%d)", opt, (long long)n,
                     of, naxes);
}

/* --weights: a malloc'd array in *w (freed by the caller) and its length. */
static int parse_weights(const char *s, double **w, int64_t *n) {
  int64_t cap = 1;
  for (const char *p = s; (p = strchr(p, ',')); p++)
    cap++;
  *w = malloc((size_t)cap * sizeof **w);
  if (!*w) {
    fprintf(stderr, "ndfilt: out of memory\n");
    return NDF_EXIT_FAIL;
  }
  *n = parse_list(s, cap, item_double, *w);
  if (*n < 0) {
    free(*w);
    *w = NULL;
    return usage_error("bad --weights '%s'", s);
  }
  return NDF_EXIT_OK;
}

/* ------------------------------------------------------------------ filter commands */

/* Options every filter command takes. */
typedef struct {
  const char *method;
  double cval;
  ndf_dtype dtype; /* 0: the input's (a raw input's type, with --shape) */
  int nshape;      /* > 0: the input is raw, of this shape */
  int64_t shape[NDF_MAX_DIMS];
} common_opts;

static int verbose; /* -v: timings on stderr */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A step that takes more than a second (reading, planning, filtering, writing) shows on a
 * terminal what it is and how long it has run, redrawn five times a second by a thread of
 * its own until step_done clears it. */
static struct {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int running, drawn;
  char what[300];
  double t0;
} tick = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *ticker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&tick.mu);
  while (tick.running) {
    const double t = now_s() - tick.t0, next = t < 1.0 ? 1.0 - t : 0.2;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const double at = (double)ts.tv_nsec * 1e-9 + next;
    ts.tv_sec += (time_t)at;
    ts.tv_nsec = (long)((at - floor(at)) * 1e9);
    pthread_cond_timedwait(&tick.cv, &tick.mu, &ts);
    if (tick.running && now_s() - tick.t0 >= 1.0) {
      static const char spin[] = "|/-\\";
      fprintf(stderr, "\rndfilt: %c %s, %.1f s\033[K", spin[(int)((now_s() - tick.t0) * 5) % 4],
              tick.what, now_s() - tick.t0);
      fflush(stderr);
      tick.drawn = 1;
    }
  }
  pthread_mutex_unlock(&tick.mu);
  return NULL;
}

static void step_begin(const char *what, const char *name) {
  if (!isatty(2) || tick.running) return;
  snprintf(tick.what, sizeof tick.what, "%s%s%.200s", what, name ? " " : "", name ? name : "");
  tick.t0 = now_s();
  tick.drawn = 0;
  tick.running = 1;
  if (pthread_create(&tick.th, NULL, ticker, NULL) != 0) tick.running = 0;
}

static void step_done(void) {
  if (!tick.running) return;
  pthread_mutex_lock(&tick.mu);
  tick.running = 0;
  pthread_cond_signal(&tick.cv);
  pthread_mutex_unlock(&tick.mu);
  pthread_join(tick.th, NULL);
  if (tick.drawn) fprintf(stderr, "\r\033[K");
}

/* A positional argument: IN, then OUT; anything else is a usage error. */
static int take_path(const char *a, const char **in_path, const char **out_path) {
  if (a[0] == '-' && a[1]) return usage_error("unknown option %s", a);
  if (!*in_path) {
    *in_path = a;
  } else if (!*out_path) {
    /* checked before anything is read: a mistyped extension must not cost a run, nor
     * write headerless samples */
    if (ndf_format_from_name(a) == NDF_FORMAT_AUTO)
      return usage_error("%s: unknown output type (expected .nii, .nii.gz, .tif, .tiff, .png, "
                         ".fits, .fits.gz, .fz, .npy, or .raw/.bin for headerless samples)",
                         a);
    *out_path = a;
  } else
    return usage_error("unexpected argument '%s'", a);
  return NDF_EXIT_OK;
}

/* ------------------------------------------------------------------ option tables */

/* One option of a subcommand: its name, how its value is taken into the command's argument
 * struct (at the field `at`; a per-axis list parses its items with `item` and counts them in the
 * int64_t field `count`), what the values should be (for messages), and whether it is a flag
 * (no value). A command is its table and one call of parse_args. */
typedef struct cli_opt {
  const char *name;
  int (*take)(const struct cli_opt *o, const char *v, char *args);
  size_t at, count;
  item_fn item;
  const char *what;
  int flag;
} cli_opt;

static int take_str(const cli_opt *o, const char *v, char *args) {
  *(const char **)(args + o->at) = v;
  return NDF_EXIT_OK;
}

static int take_flag(const cli_opt *o, const char *v, char *args) {
  (void)v;
  *(int *)(args + o->at) = 1;
  return NDF_EXIT_OK;
}

static int take_int(const cli_opt *o, const char *v, char *args) {
  int *x = (int *)(args + o->at);
  if (parse_int(v, x) && (!o->what || *x >= 0)) return NDF_EXIT_OK;
  return o->what ? usage_error("bad %s '%s': expected %s", o->name, v, o->what)
                 : usage_error("bad %s '%s'", o->name, v);
}

/* A number; what: NULL (any), or the bound it must pass: "a number > 0", "a number >= 0"
 * (finite). */
static int take_number(const cli_opt *o, const char *v, char *args) {
  char *end;
  double *x = (double *)(args + o->at);
  *x = strtod(v, &end);
  int ok = end != v && !*end;
  if (ok && o->what) ok = isfinite(*x) && (strstr(o->what, ">=") ? *x >= 0 : *x > 0);
  if (ok) return NDF_EXIT_OK;
  return o->what ? usage_error("bad %s '%s': expected %s", o->name, v, o->what)
                 : usage_error("bad %s '%s'", o->name, v);
}

static int take_mode(const cli_opt *o, const char *v, char *args) {
  return ndf_mode_parse(v, (ndf_mode *)(args + o->at)) == NDF_OK
             ? NDF_EXIT_OK
             : usage_error("unknown %s '%s'", o->name, v);
}

static int take_list(const cli_opt *o, const char *v, char *args) {
  return parse_axis_list(o->name, v, o->item, args + o->at, (int64_t *)(args + o->count), o->what);
}

/* One of the words in what ("input|output"): its index into the int at `at`. */
static int take_word(const cli_opt *o, const char *v, char *args) {
  const size_t n = strlen(v);
  int k = 0;
  for (const char *w = o->what; *w; k++) {
    const size_t len = strcspn(w, "|");
    if (len == n && !strncmp(w, v, n)) {
      *(int *)(args + o->at) = k;
      return NDF_EXIT_OK;
    }
    w += len + (w[len] == '|');
  }
  return usage_error("bad %s '%s'", o->name, v);
}

/* An option the command refuses with a reason (what). */
static int take_refusal(const cli_opt *o, const char *v, char *args) {
  (void)v;
  (void)args;
  return usage_error("%s", o->what);
}

static int take_dtype(const cli_opt *o, const char *v, char *args) {
  ndf_dtype *t = (ndf_dtype *)(args + o->at);
  return (*t = parse_dtype(v)) ? NDF_EXIT_OK : usage_error("unknown %s '%s'", o->name, v);
}

static int item_extent(const char *s, int64_t k, void *dst) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < 1) return 0;
  ((int64_t *)dst)[k] = v;
  return 1;
}

static int take_shape(const cli_opt *o, const char *v, char *args) {
  common_opts *c = (common_opts *)(args + o->at);
  int64_t n = parse_list(v, NDF_MAX_DIMS, item_extent, c->shape);
  if (n < 1) return usage_error("bad %s '%s': 1 to %d integers >= 1", o->name, v, NDF_MAX_DIMS);
  c->nshape = (int)n;
  return NDF_EXIT_OK;
}

/* The options every filter command takes, for a command whose argument struct T holds its
 * common_opts as `co`. */
#define COMMON_OPTS(T)                                                                             \
  {"--method", take_str, offsetof(T, co.method), 0, NULL, NULL, 0},                                \
      {"--cval", take_number, offsetof(T, co.cval), 0, NULL, NULL, 0},                             \
      {"--dtype", take_dtype, offsetof(T, co.dtype), 0, NULL, NULL, 0}, {                          \
    "--shape", take_shape, offsetof(T, co), 0, NULL, NULL, 0                                       \
  }
#define OPT(T, name, take, field)                                                                  \
  { name, take, offsetof(T, field), 0, NULL, NULL, 0 }
#define OPT_WHAT(T, name, take, field, what)                                                       \
  { name, take, offsetof(T, field), 0, NULL, what, 0 }
#define OPT_FLAG(T, name, field)                                                                   \
  { name, take_flag, offsetof(T, field), 0, NULL, NULL, 1 }
#define OPT_LIST(T, name, field, n, item, what)                                                    \
  { name, take_list, offsetof(T, field), offsetof(T, n), item, what, 0 }
#define NOPTS(t) ((int)(sizeof t / sizeof t[0]))

/* Parses a command's arguments by its table: options (any order), -v, and the paths IN then
 * OUT; -h prints usage. Returns NDF_EXIT_OK, a usage error's code, or -1 after -h (the command
 * then ends successfully). */
static int parse_args(int argc, char **argv, const cli_opt *t, int n, void *args, const char *usage,
                      const char **in, const char **out) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return -1;
    }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      verbose = 1;
      continue;
    }
    const cli_opt *o = NULL;
    for (int k = 0; k < n && !o; k++)
      if (!strcmp(a, t[k].name)) o = &t[k];
    int rc;
    if (!o)
      rc = take_path(a, in, out);
    else if (o->flag)
      rc = o->take(o, NULL, args);
    else if (i + 1 >= argc)
      rc = usage_error("option %s needs a value", a);
    else
      rc = o->take(o, argv[++i], args);
    if (rc != NDF_EXIT_OK) return rc;
  }
  return NDF_EXIT_OK;
}

/* --memory-limit (0: half the machine's memory), in bytes. */
static int64_t memory_limit;

static int64_t limit_bytes(void) {
  if (memory_limit > 0) return memory_limit;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (int64_t)pages * page / 2 : (int64_t)1 << 32;
}

/* Reads an image (any format; raw with co's --shape and --dtype); on failure prints why,
 * naming the file, and returns the exit code. A file that with an output of its size would
 * pass the memory limit is mapped where its format allows (ndf_read_opts.map). */
static int read_input(const char *path, const common_opts *co, ndf_image *img) {
  char err[1024];
  ndf_read_opts ro;
  memset(&ro, 0, sizeof ro);
  struct stat sb;
  ro.map = stat(path, &sb) == 0 && 2 * (int64_t)sb.st_size > limit_bytes();
  const int raw = co && co->nshape > 0;
  if (raw) {
    if (!co->dtype) return usage_error("%s: a raw input needs --dtype with --shape", path);
    ro.format = NDF_FORMAT_RAW;
    ro.ndim = co->nshape;
    memcpy(ro.shape, co->shape, sizeof ro.shape);
    ro.dtype = co->dtype;
  }
  double t0 = now_s();
  step_begin("reading", path);
  ndf_status st = ndf_image_read(path, raw || ro.map ? &ro : NULL, img, err, sizeof err);
  step_done();
  if (st != NDF_OK) {
    say("", err);
    return NDF_EXIT_IO;
  }
  if (verbose)
    fprintf(stderr, "ndfilt: %s %s (%s, %s) in %.1f ms\n", img->map_base ? "mapped" : "read", path,
            ndf_format_name(img->format), ndf_dtype_name(img->a.dtype), 1e3 * (now_s() - t0));
  return NDF_EXIT_OK;
}

/* The axes a command's per-axis lists count: all of the image's, less a colour axis. */
static int lead_axes(const ndf_image *img) { return img->channel_axis == 0; }

/* The shape a filter sees: img's, less a colour axis (no data). */
static ndf_array filtered_view(const ndf_image *img) {
  const int lead = lead_axes(img);
  return ndf_array_contiguous(img->a.dtype, img->a.ndim - lead, img->a.shape + lead, NULL);
}

/* A command's plan for one filter call on arrays described as in and out (data unused):
 * out is nf outputs of in's shape one after the other (a filter bank) when nf > 1. */
/* With no device asked (and NDF_DEVICE unset) the tool plans on the CPU first and starts CUDA,
 * which costs a few tenths of a second, only for work the CPU's plan estimates to take longer
 * than CUDA_WORTH_S; the GPU's context (device auto) then plans again, the transfers counted. */
#define CUDA_WORTH_S 0.3
static int lazy_gpu;
static ndf_context_opts gpu_opts;
static ndf_context *gpu_ctx;

typedef ndf_status (*plan_fn)(ndf_plan **p, ndf_context *ctx, const ndf_array *in,
                              const ndf_array *out, const void *args);

/* The nf outputs in out, each of in's shape, as views into outs[0..nf-1]. */
static void bank_views(const ndf_array *in, const ndf_array *out, int nf, ndf_array *outs) {
  const size_t step = (size_t)ndf_array_size(in) * ndf_dtype_size(out->dtype);
  for (int f = 0; f < nf; f++)
    outs[f] = ndf_array_contiguous(out->dtype, in->ndim, in->shape, (char *)out->data + f * step);
}

/* A progress bar on stderr, drawn only when stderr is a terminal and the work has taken
 * more than a second: k of n parts done. */
static void progress(const char *what, int64_t k, int64_t n, double t0) {
  static int drawn;
  if (!isatty(2)) return;
  double t = now_s() - t0;
  if (k < n && t < 1.0) return;
  if (k == n) {
    if (drawn) fprintf(stderr, "\r\033[K");
    drawn = 0;
    return;
  }
  int w = 30, f = (int)(w * k / n);
  fprintf(stderr, "\rndfilt: [%.*s%*s] %lld/%lld %s, %.1f s", f, "##############################",
          w - f, "", (long long)k, (long long)n, what, t);
  fflush(stderr);
  drawn = 1;
}

/* ---- files larger than the memory: a slab at a time ---- */

/* How far a command's filter reaches along axis `axis` of its ndim-axis arrays, in elements,
 * plus one (0: not filtered there; -1: it cannot run a slab at a time: a recursive filter, a
 * bank); *wrap: the axis has mode wrap, whose reach comes from the other end. */
typedef int64_t (*reach_fn)(const void *args, int ndim, int axis, int *wrap);

/* A streamed filter: each call's arrays (an entry of axis 0, or the image) in slabs of `rows`
 * rows of their axis 0, each read with h rows more on either side and its own rows kept. */
typedef struct {
  ndf_context *ctx;
  const ndf_image *in;
  ndf_array a, b;  /* one call's arrays (no data) */
  int64_t entries; /* calls */
  plan_fn f;
  const void *args;
  int64_t h, rows;
  int wrap;
  char solver[64]; /* the first slab's */
} slabs;

/* Drops the whole pages of [p, p + n) from the process (a mapping's pages stay in the file
 * and the page cache): what a slab is done with no longer counts against the memory. */
static void release(const void *p, size_t n) {
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t lo = ((uintptr_t)p + page - 1) / page * page,
                  hi = ((uintptr_t)p + n) / page * page;
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static ndf_status slab_fill(void *v, ndf_array *out, char *err, size_t errlen) {
  slabs *S = v;
  const int64_t n0 = S->a.shape[0], row = ndf_array_size(&S->a) / n0;
  const size_t rin = (size_t)row * ndf_dtype_size(S->a.dtype),
               rout = (size_t)row * ndf_dtype_size(S->b.dtype);
  /* Every slab is m rows, so one plan serves the file: the first and last read further in,
   * the others h rows either side of their own (the wrap axis's from the other end). */
  const int64_t m = S->rows + 2 * S->h < n0 ? S->rows + 2 * S->h : n0;
  char *ib = malloc((size_t)m * rin), *ob = malloc((size_t)m * rout);
  ndf_plan *plan = NULL;
  int64_t xs[NDF_MAX_DIMS], ys[NDF_MAX_DIMS];
  memcpy(xs, S->a.shape, sizeof xs);
  memcpy(ys, S->b.shape, sizeof ys);
  xs[0] = ys[0] = m;
  ndf_array x = ndf_array_contiguous(S->a.dtype, S->a.ndim, xs, NULL),
            y = ndf_array_contiguous(S->b.dtype, S->b.ndim, ys, NULL);
  ndf_status st = ib && ob ? S->f(&plan, S->ctx, &x, &y, S->args) : NDF_ENOMEM;
  if (st == NDF_ENOMEM && !(ib && ob))
    snprintf(err, errlen, "out of memory for a slab of %lld rows", (long long)m);
  else if (st != NDF_OK)
    snprintf(err, errlen, "%s: %s", ndf_status_str(st), ndf_context_message(S->ctx));
  else
    snprintf(S->solver, sizeof S->solver, "%s", ndf_plan_solver(plan));
  x.data = ib;
  y.data = ob;
  const double t0 = now_s();
  const int64_t per = (n0 + S->rows - 1) / S->rows, total = per * S->entries;
  for (int64_t k = 0; k < S->entries && st == NDF_OK; k++) {
    const char *src = (const char *)S->in->a.data + (size_t)(k * n0) * rin;
    char *dst = (char *)out->data + (size_t)(k * n0) * rout;
    int64_t freed = 0; /* input rows below this are released */
    for (int64_t z0 = 0; z0 < n0 && st == NDF_OK; z0 += S->rows) {
      const int64_t z1 = z0 + S->rows < n0 ? z0 + S->rows : n0;
      int64_t lo = m == n0 ? 0 : z0 - S->h;
      if (m < n0 && !S->wrap) lo = lo < 0 ? 0 : lo > n0 - m ? n0 - m : lo;
      for (int64_t r = lo; r < lo + m; r++) /* past an end of a wrap axis: the other end's */
        memcpy(ib + (size_t)(r - lo) * rin, src + (size_t)((r % n0 + n0) % n0) * rin, rin);
      st = ndf_execute(plan, &x, &y);
      if (st == NDF_OK) st = ndf_context_synchronize(S->ctx);
      if (st != NDF_OK) {
        snprintf(err, errlen, "%s: %s", ndf_status_str(st), ndf_context_message(S->ctx));
        break;
      }
      memcpy(dst + (size_t)z0 * rout, ob + (size_t)(z0 - lo) * rout, (size_t)(z1 - z0) * rout);
      release(dst + (size_t)z0 * rout, (size_t)(z1 - z0) * rout);
      const int64_t keep = z1 - S->h; /* the next slab reads from about here on */
      if (keep > freed) {
        release(src + (size_t)freed * rin, (size_t)(keep - freed) * rin);
        freed = keep;
      }
      progress("slabs", k * per + z0 / S->rows + 1, total, t0);
    }
    release(src, (size_t)n0 * rin);
  }
  ndf_plan_destroy(plan);
  free(ib);
  free(ob);
  return st;
}

/* Filters the mapped image `in` into out_path (out: its description, no data) a slab at a
 * time within the memory limit, as filter_to_shape would have in one piece. */
/* A row's share of the memory (arrays a, b of one call): its input and output, each in the
 * slab's buffer and as touched pages of the mappings, and the solver's scratch (two float32
 * temporaries); the program takes SLAB_BASE besides. The slab's rows: what the limit leaves
 * past the reach on either side (< 1: no slab fits). */
#define SLAB_BASE (16.0 * (1 << 20))
static double row_bytes(const ndf_array *a, const ndf_array *b) {
  return (double)(ndf_array_size(a) / a->shape[0]) *
         (2.0 * (double)ndf_dtype_size(a->dtype) + 2.0 * (double)ndf_dtype_size(b->dtype) + 8.0);
}
static int64_t slab_rows(const ndf_array *a, const ndf_array *b, int64_t h) {
  const double spare = (double)limit_bytes() - SLAB_BASE;
  const int64_t rows = (spare > 0 ? (int64_t)(spare / row_bytes(a, b)) : 0) - 2 * h;
  return rows > a->shape[0] ? a->shape[0] : rows;
}

static int filter_slabs(ndf_context *ctx, ndf_image *in, ndf_image *out, const ndf_array *a,
                        const ndf_array *b, int split, int64_t h, int64_t rows, int wrap,
                        const char *out_path, plan_fn f, const void *args) {
  char err[1024];
  slabs S = {.ctx = ctx, .in = in, .a = *a, .b = *b, .f = f, .args = args, .h = h, .wrap = wrap};
  S.entries = split ? in->a.shape[0] : 1;
  S.rows = rows;
  const double t0 = now_s();
  step_begin("filtering in slabs into", out_path);
  const ndf_status st = ndf_image_write_mapped(out_path, out, slab_fill, &S, err, sizeof err);
  step_done();
  ndf_image_free(in);
  if (st != NDF_OK) {
    say("", err);
    return st == NDF_EINVAL || st == NDF_EUNSUPPORTED ? NDF_EXIT_USAGE : NDF_EXIT_IO;
  }
  if (verbose)
    fprintf(stderr,
            "ndfilt: filtered by %s in slabs of %lld rows (reach %lld) within %lld bytes and wrote "
            "%s in %.1f ms\n",
            S.solver, (long long)S.rows, (long long)h, (long long)limit_bytes(), out_path,
            1e3 * (now_s() - t0));
  return NDF_EXIT_OK;
}

/* Masked or NaN-aware smoothing (gauss --mask, --nan omit): normalised convolution, f(x m) /
 * f(m) with m the valid samples (the mask's non-zero voxels, not NaN under omit), NaN where no
 * valid sample is in reach (f(m) under 1e-6 of its largest value), as the Python binding's
 * mask= and nan_policy='omit'. mask: float32 0 or 1 of one call's shape, or NULL. */
typedef struct {
  int nan_omit;
  const float *mask;
} masking;

/* One call's masked filtering: a (any dtype) into b (any dtype) through the float32 plan p;
 * xm, m, num, den: float32 buffers of a's size. Without omit, m is the mask's, the same for
 * every call: den is made once (*den_made). */
static ndf_status masked_execute(ndf_plan *p, const masking *mk, const ndf_array *a, ndf_array *b,
                                 float *xm, float *m, float *num, float *den, int *den_made) {
  const int64_t n = ndf_array_size(a);
  for (int64_t i = 0; i < n; i++) {
    const double v = ndf__load(a->dtype, a->data, i);
    const int ok = (!mk->mask || mk->mask[i] != 0) && !(mk->nan_omit && isnan(v));
    m[i] = (float)ok;
    xm[i] = ok ? (float)v : 0.f;
  }
  ndf_array in = ndf_array_contiguous(NDF_F32, a->ndim, a->shape, xm),
            out = ndf_array_contiguous(NDF_F32, a->ndim, a->shape, num);
  ndf_status st = ndf_execute(p, &in, &out);
  in.data = m;
  out.data = den;
  if (st == NDF_OK && !*den_made)
    st = ndf_execute(p, &in, &out); /* host arrays: back when it returns */
  if (st != NDF_OK) return st;
  *den_made = !mk->nan_omit;
  float top = 0;
  for (int64_t i = 0; i < n; i++)
    top = fabsf(den[i]) > top ? fabsf(den[i]) : top;
  for (int64_t i = 0; i < n; i++)
    ndf__store(b->dtype, b->data, i, fabsf(den[i]) > 1e-6f * top ? num[i] / den[i] : NAN);
  return NDF_OK;
}

/* Filters `in` (whose data it frees) into a new host array of dtype `dtype` (0: the
 * input's) and shape `shape` (ndim axes), and writes that atomically to out_path with the
 * input's metadata, its first voxel at `origin` of the input's grid (NULL: the same grid):
 * nothing is written unless every step succeeds. The filter is planned once (f) and run on
 * the whole image, or with `split` on each entry of axis 0 alone (a colour channel, or a
 * volume of a 4-D image), in and out sharing that axis, with a progress bar; nf > 1: a bank
 * of nf kernels, whose outputs make a new leading axis; mk (NULL: none) makes it masked
 * smoothing, in memory. Returns the exit code. */
static int filter_to_shape(ndf_context *ctx, ndf_image *in, int ndim, const int64_t *shape,
                           const masking *mk, const int64_t *origin, ndf_dtype dtype,
                           const char *out_path, int split, int nf, plan_fn f, const void *args,
                           reach_fn reach) {
  char err[1024];
  ndf_image out = *in; /* the input's metadata, borrowed */
  out.meta_free = NULL;
  out.a = ndf_array_contiguous(dtype ? dtype : in->a.dtype, ndim, shape, NULL);
  if (ndim > in->a.ndim) { /* a filter bank's leading axis */
    memmove(out.spacing + 1, in->spacing, (size_t)in->a.ndim * sizeof out.spacing[0]);
    memmove(out.origin + 1, in->origin, (size_t)in->a.ndim * sizeof out.origin[0]);
    out.spacing[0] = 0;
    out.origin[0] = 0;
    out.channel_axis = -1;
    out.time_axis = in->time_axis >= 0 ? in->time_axis + 1 : -1;
  }
  if (origin)
    for (int d = 0; d < ndim; d++)
      out.origin[d] += origin[d];
  const int64_t nbytes = (int64_t)((double)ndf_array_size(&out.a) * ndf_dtype_size(out.a.dtype));
  /* Past the memory limit, a mapped input goes a slab at a time where the filter allows. */
  const double need =
      (double)ndf_array_size(&in->a) * (double)ndf_dtype_size(in->a.dtype) + 2.0 * (double)nbytes;
  if (in->map_base && reach && nf <= 1 && !origin && !mk && need > (double)limit_bytes()) {
    ndf_array a = in->a, b = out.a;
    if (split) {
      a = ndf_array_contiguous(in->a.dtype, in->a.ndim - 1, in->a.shape + 1, NULL);
      b = ndf_array_contiguous(out.a.dtype, ndim - 1, shape + 1, NULL);
    }
    int wrap = 0;
    const int64_t h = reach(args, a.ndim, 0, &wrap), rows = h >= 0 ? slab_rows(&a, &b, h) : 0;
    if (h >= 0 && rows >= 1 && ndf_image_writes_mapped(out_path))
      return filter_slabs(ctx, in, &out, &a, &b, split, h, rows, wrap, out_path, f, args);
    if (h >= 0 && memory_limit > 0) { /* asked for, and impossible: say why (else: in memory) */
      if (rows < 1)
        fprintf(stderr,
                "ndfilt: --memory-limit %lld bytes is too small to filter %s a slab at a time: "
                "one row with the kernel's reach of %lld rows on either side needs about %.0f "
                "MB\n",
                (long long)limit_bytes(), out_path, (long long)h,
                (SLAB_BASE + row_bytes(&a, &b) * (double)(1 + 2 * h)) / (1 << 20));
      else
        fprintf(stderr,
                "ndfilt: %s: within --memory-limit the output is written a part at a time, which "
                "takes .npy, .nii or raw (.raw, .bin), not this format\n",
                out_path);
      ndf_image_free(in);
      return NDF_EXIT_USAGE;
    }
  }
  out.a.data = malloc((size_t)nbytes);
  int rc = NDF_EXIT_OK;
  ndf_plan *p = NULL;
  ndf_status st = NDF_OK;
  /* the arrays of one call: the whole image, or one entry of axis 0 */
  ndf_array a = in->a, b = out.a;
  if (split) {
    a = ndf_array_contiguous(in->a.dtype, in->a.ndim - 1, in->a.shape + 1, NULL);
    b = ndf_array_contiguous(out.a.dtype, ndim - 1, shape + 1, NULL);
  }
  if (nf > 1) /* a bank's calls see in's shape; b holds the nf outputs */
    b = ndf_array_contiguous(b.dtype, a.ndim, a.shape, NULL);
  ndf_array *outs = NULL;
  /* masked: a float32 plan, run twice a call (on x m and on m) over four buffers */
  float *mbuf = NULL;
  const int64_t na = ndf_array_size(&a);
  ndf_array pa = a, pb = b;
  int den_made = 0;
  if (mk) {
    pa = ndf_array_contiguous(NDF_F32, a.ndim, a.shape, NULL);
    pb = ndf_array_contiguous(NDF_F32, b.ndim, b.shape, NULL);
    mbuf = malloc((size_t)(4 * na) * sizeof *mbuf);
  }
  double t0 = now_s(), t_plan = 0;
  if (!out.a.data || (nf > 1 && !(outs = malloc((size_t)nf * sizeof *outs))) || (mk && !mbuf)) {
    fprintf(stderr, "ndfilt: out of memory for the %lld-byte output\n", (long long)nbytes);
    rc = NDF_EXIT_FAIL;
  } else {
    step_begin("planning", NULL);
    st = f(&p, ctx, &pa, &pb, args);
    const double est = st == NDF_OK ? ndf_plan_cost(p) * (split ? (double)in->a.shape[0] : 1) : 0;
    if (st == NDF_OK && lazy_gpu && est > CUDA_WORTH_S) {
      if (!gpu_ctx && ndf_context_create(&gpu_ctx, &gpu_opts) != NDF_OK) gpu_ctx = NULL;
      ndf_plan *q = NULL;
      if (gpu_ctx && ndf_context_place(gpu_ctx).kind == NDF_PLACE_CUDA &&
          f(&q, gpu_ctx, &pa, &pb, args) == NDF_OK) {
        ndf_plan_destroy(p);
        p = q;
        ctx = gpu_ctx;
      }
    }
    step_done();
    t_plan = now_s() - t0;
    if (verbose && st == NDF_OK)
      fprintf(stderr, "ndfilt: planned %s on %s in %.1f ms (estimate %.3g s)\n", ndf_plan_solver(p),
              ndf_context_device_name(ctx), 1e3 * t_plan, est);
    const int64_t n = split ? in->a.shape[0] : 1;
    const size_t sa = (size_t)ndf_array_size(&a) * ndf_dtype_size(a.dtype),
                 sb = (size_t)ndf_array_size(&b) * ndf_dtype_size(b.dtype) *
                      (size_t)(nf > 1 ? nf : 1);
    const char *what = in->channel_axis == 0 ? "channels" : "volumes";
    t0 = now_s();
    int alt = 0;
    if (!split && st == NDF_OK) step_begin("filtering on", ndf_context_device_name(ctx));
    for (int64_t k = 0; k < n && st == NDF_OK; k++) {
      a.data = (char *)in->a.data + (size_t)k * sa;
      b.data = (char *)out.a.data + (size_t)k * sb;
      if (mk) {
        st =
            masked_execute(p, mk, &a, &b, mbuf, mbuf + na, mbuf + 2 * na, mbuf + 3 * na, &den_made);
      } else if (nf > 1) {
        bank_views(&a, &b, nf, outs);
        st = ndf_execute_bank(p, &a, nf, outs);
      } else {
        st = ndf_execute(p, &a, &b);
      }
      alt |= st == NDF_OK && strcmp(ndf_plan_last_solver(p), ndf_plan_solver(p));
      if (split) progress(what, k + 1, n, t0);
    }
    if (st == NDF_OK) st = ndf_context_synchronize(ctx);
    step_done();
    if (verbose && st == NDF_OK) {
      fprintf(stderr, "ndfilt: filtered by %s in %.1f ms\n", ndf_plan_last_solver(p),
              1e3 * (now_s() - t0));
      if (alt) fprintf(stderr, "ndfilt: %s\n", ndf_context_message(ctx));
    }
    if (st != NDF_OK) {
      fprintf(stderr, "ndfilt: %s: %s\n", ndf_status_str(st), ndf_context_message(ctx));
      rc = st == NDF_EINVAL || st == NDF_EUNSUPPORTED ? NDF_EXIT_USAGE : NDF_EXIT_FAIL;
    } else {
      t0 = now_s();
      step_begin("writing", out_path);
      const ndf_status ws = ndf_image_write(out_path, &out, err, sizeof err);
      step_done();
      if (ws != NDF_OK) {
        say("", err);
        rc = NDF_EXIT_IO;
      } else if (verbose) {
        fprintf(stderr, "ndfilt: wrote %s (%s) in %.1f ms\n", out_path, ndf_dtype_name(out.a.dtype),
                1e3 * (now_s() - t0));
      }
    }
  }
  ndf_plan_destroy(p);
  free(outs);
  free(mbuf);
  ndf_image_free(in);
  free(out.a.data);
  return rc;
}

/* filter_to_shape with the input's shape, or with nf > 1 a leading axis of nf (a filter
 * bank's outputs, the caller checked that in has fewer than NDF_MAX_DIMS axes). */
static int filter_to_file(ndf_context *ctx, ndf_image *in, int nf, ndf_dtype dtype,
                          const char *out_path, int split, plan_fn f, const void *args,
                          reach_fn reach, const masking *mk) {
  int64_t shape[NDF_MAX_DIMS] = {nf};
  const int bank = nf > 1;
  memcpy(shape + bank, in->a.shape, (size_t)in->a.ndim * sizeof shape[0]);
  return filter_to_shape(ctx, in, in->a.ndim + bank, shape, mk, NULL, dtype, out_path, split, nf, f,
                         args, reach);
}

/* ------------------------------------------------------------------ info */

/* `info FILE`: what the file holds, as ndfilt reads it. */
static int info_file(const char *path) {
  ndf_image img;
  int rc = read_input(path, NULL, &img);
  if (rc != NDF_EXIT_OK) return rc;
  const ndf_array *a = &img.a;
  printf("%s\n  format:  %s\n  dtype:   %s\n  shape:  ", path, ndf_format_name(img.format),
         ndf_dtype_name(a->dtype));
  for (int d = 0; d < a->ndim; d++)
    printf(" %lld", (long long)a->shape[d]);
  printf("   (C order, slowest axis first%s)\n", img.channel_axis == 0 ? "; axis 0: channels" : "");
  printf("  voxel:  ");
  for (int d = 0; d < a->ndim; d++)
    if (img.spacing[d] > 0)
      printf(" %.6g", img.spacing[d]);
    else
      printf(" -");
  printf("   (mm; -: unknown or not a length)\n");
  const int64_t n = ndf_array_size(a);
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    const double v = ndf__load(a->dtype, a->data, i);
    if (!isfinite(v)) {
      bad++;
      continue;
    }
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    sum += v;
  }
  printf("  values:  min %.6g, max %.6g, mean %.6g", lo, hi, n > bad ? sum / (double)(n - bad) : 0);
  if (bad) printf(", %lld not finite", (long long)bad);
  printf("\n");
  ndf_image_free(&img);
  return NDF_EXIT_OK;
}

static int cmd_info(ndf_context *ctx, int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    fputs("usage: ndfilt info [FILE...]\n\nWithout FILE: the version, the device, CPU threads "
          "and every solver.\nWith FILEs: each one's format, sample type, shape, voxel size and "
          "value range.\n\nexamples:\n  ndfilt info\n  ndfilt info t1.nii.gz stack.tif\n",
          stdout);
    return NDF_EXIT_OK;
  }
  if (argc > 1) {
    int rc = NDF_EXIT_OK;
    for (int i = 1; i < argc; i++) {
      int r = info_file(argv[i]);
      if (r != NDF_EXIT_OK) rc = r;
    }
    return rc;
  }
  printf("ndfilt %s\n", ndf_version_string());
  printf("device:      %s\n", ndf_context_device_name(ctx));
  printf("cpu threads: %d\n", ndf_context_threads(ctx));
  printf("formats:    ");
  for (ndf_format f = NDF_FORMAT_NPY; f <= NDF_FORMAT_RAW; f++)
    if (ndf_format_built_in(f)) printf(" %s", ndf_format_name(f));
  printf("\n");
  printf("solvers:\n");
  const char *op;
  for (int i = 0; ndf_solver_name(i, &op); i++)
    printf("  %-12s %s\n", op, ndf_solver_name(i, NULL));
  return NDF_EXIT_OK;
}

/* ------------------------------------------------------------------ correlate1d */

typedef struct {
  const double *w;
  int64_t n;
  int axis, convolve;
  ndf_correlate1d_opts o;
} corr1d_args;

static ndf_status plan_corr1d(ndf_plan **p, ndf_context *ctx, const ndf_array *in,
                              const ndf_array *out, const void *args) {
  const corr1d_args *c = args;
  return c->convolve ? ndf_plan_convolve1d(p, ctx, in, out, c->w, c->n, c->axis, &c->o)
                     : ndf_plan_correlate1d(p, ctx, in, out, c->w, c->n, c->axis, &c->o);
}

static int64_t reach_corr1d(const void *args, int ndim, int axis, int *wrap) {
  const corr1d_args *c = args;
  if ((c->axis < 0 ? c->axis + ndim : c->axis) != axis) return 0;
  *wrap = c->o.mode == NDF_MODE_WRAP;
  return c->n / 2 + abs(c->o.origin) + 1;
}

typedef struct {
  common_opts co;
  const char *weights;
  int axis, origin;
  ndf_mode mode;
} corr1d_cli;

static const cli_opt corr1d_opts[] = {
    COMMON_OPTS(corr1d_cli),
    OPT(corr1d_cli, "--weights", take_str, weights),
    OPT(corr1d_cli, "--axis", take_int, axis),
    OPT(corr1d_cli, "--mode", take_mode, mode),
    OPT(corr1d_cli, "--origin", take_int, origin),
};

static int cmd_corr1d(ndf_context *ctx, int argc, char **argv, int convolve) {
  const char *in_path = NULL, *out_path = NULL;
  corr1d_cli a = {.axis = -1, .mode = NDF_MODE_NEAREST};
  const int pr =
      parse_args(argc, argv, corr1d_opts, NOPTS(corr1d_opts), &a, usage_corr, &in_path, &out_path);
  if (pr) return pr < 0 ? NDF_EXIT_OK : pr;
  if (!in_path || !out_path) return usage_error("%s", "needs IN and OUT");
  if (!a.weights) return usage_error("%s", "needs --weights");
  const char *wlist = a.weights;
  const common_opts co = a.co;
  corr1d_args c = {NULL, 0, a.axis, convolve, {sizeof c.o, co.method, a.mode, co.cval, a.origin}};

  double *w;
  int rc = parse_weights(wlist, &w, &c.n);
  if (rc != NDF_EXIT_OK) return rc;
  c.w = w;
  ndf_image in;
  rc = read_input(in_path, &co, &in);
  if (rc == NDF_EXIT_OK)
    rc = filter_to_file(ctx, &in, 0, co.dtype, out_path, lead_axes(&in), plan_corr1d, &c,
                        reach_corr1d, NULL);
  free(w);
  return rc;
}

/* ------------------------------------------------------------------ sepconv */

typedef struct {
  const double *w[NDF_MAX_DIMS];
  int64_t n[NDF_MAX_DIMS];
  ndf_sepfilter_opts o;
} sep_args;

static ndf_status plan_sep(ndf_plan **p, ndf_context *ctx, const ndf_array *in,
                           const ndf_array *out, const void *args) {
  const sep_args *s = args;
  return ndf_plan_sepfilter(p, ctx, in, out, s->w, s->n, &s->o);
}

static int64_t reach_sep(const void *args, int ndim, int axis, int *wrap) {
  const sep_args *s = args;
  (void)ndim;
  if (!s->w[axis]) return 0;
  *wrap = s->o.mode[axis] == NDF_MODE_WRAP;
  return s->n[axis] / 2 + abs(s->o.origin[axis]) + 1;
}

typedef struct {
  common_opts co;
  const char *weights;
  int convolve;
  int axes[NDF_MAX_DIMS], origin[NDF_MAX_DIMS];
  ndf_mode mode[NDF_MAX_DIMS];
  int64_t naxes, norigin, nmode; /* 0: not given */
} sepconv_cli;

static const cli_opt sepconv_opts[] = {
    COMMON_OPTS(sepconv_cli),
    OPT(sepconv_cli, "--weights", take_str, weights),
    OPT_FLAG(sepconv_cli, "--convolve", convolve),
    OPT_LIST(sepconv_cli, "--axes", axes, naxes, item_int, "integers"),
    OPT_LIST(sepconv_cli, "--mode", mode, nmode, item_mode, MODE_NAMES),
    OPT_LIST(sepconv_cli, "--origin", origin, norigin, item_int, "integers"),
};

static int cmd_sepconv(ndf_context *ctx, int argc, char **argv) {
  const char *in_path = NULL, *out_path = NULL;
  sepconv_cli a = {0};
  const int pr = parse_args(argc, argv, sepconv_opts, NOPTS(sepconv_opts), &a, usage_sepconv,
                            &in_path, &out_path);
  if (pr) return pr < 0 ? NDF_EXIT_OK : pr;
  if (!in_path || !out_path) return usage_error("%s", "needs IN and OUT");
  if (!a.weights) return usage_error("%s", "needs --weights");
  const char *wlist = a.weights;
  const common_opts co = a.co;
  int *axes = a.axes, *origin = a.origin, convolve = a.convolve;
  ndf_mode *mode = a.mode;
  int64_t naxes = a.naxes, norigin = a.norigin, nmode = a.nmode;

  double *w;
  int64_t n;
  int rc = parse_weights(wlist, &w, &n);
  if (rc != NDF_EXIT_OK) return rc;
  ndf_image img;
  rc = read_input(in_path, &co, &img);
  if (rc != NDF_EXIT_OK) {
    free(w);
    return rc;
  }
  /* The axes the lists count: a colour axis is never filtered. */
  const int lead = lead_axes(&img);
  const ndf_array in = filtered_view(&img);
  const char *of = naxes ? "--axes" : in_path; /* what per-axis lists count */
  if (naxes == 0)
    for (int d = 0; d < in.ndim; d++)
      axes[naxes++] = d;
  sep_args s;
  memset(&s, 0, sizeof s);
  s.o.struct_size = sizeof s.o;
  s.o.method = co.method;
  s.o.cval = co.cval;
  s.o.convolve = convolve;
  if (nmode) rc = check_count("--mode", nmode, (int)naxes, of);
  if (rc == NDF_EXIT_OK && norigin) rc = check_count("--origin", norigin, (int)naxes, of);
  for (int k = 0; k < naxes && rc == NDF_EXIT_OK; k++) {
    int d = axes[k] < 0 ? axes[k] + in.ndim : axes[k];
    if (d < 0 || d >= in.ndim) {
      rc = usage_error("--axes: axis %d is out of range for %s with %d axes", axes[k], in_path,
                       in.ndim);
      break;
    }
    if (s.w[d]) {
      rc = usage_error("--axes: axis %d is listed twice", d);
      break;
    }
    s.w[d] = w;
    s.n[d] = n;
    s.o.mode[d] = nmode ? mode[nmode == 1 ? 0 : k] : NDF_MODE_NEAREST;
    s.o.origin[d] = norigin ? origin[norigin == 1 ? 0 : k] : 0;
  }
  /* A 4-D image not filtered along axis 0 goes one volume at a time, with a progress bar. */
  int split = lead || (in.ndim == NDF_MAX_DIMS && !s.w[0]);
  if (split && !lead) {
    memmove(s.w, s.w + 1, (NDF_MAX_DIMS - 1) * sizeof s.w[0]);
    memmove(s.n, s.n + 1, (NDF_MAX_DIMS - 1) * sizeof s.n[0]);
    memmove(s.o.mode, s.o.mode + 1, (NDF_MAX_DIMS - 1) * sizeof s.o.mode[0]);
    memmove(s.o.origin, s.o.origin + 1, (NDF_MAX_DIMS - 1) * sizeof s.o.origin[0]);
  }
  if (rc == NDF_EXIT_OK)
    rc = filter_to_file(ctx, &img, 0, co.dtype, out_path, split, plan_sep, &s, reach_sep, NULL);
  else
    ndf_image_free(&img);
  free(w);
  return rc;
}

/* ------------------------------------------------------------------ gauss */

static ndf_status plan_gauss(ndf_plan **p, ndf_context *ctx, const ndf_array *in,
                             const ndf_array *out, const void *args) {
  return ndf_plan_gaussian(p, ctx, in, out, args);
}

/* The FIR kernel's radius; the recursive filters (named, or allowed by a tolerance) have no
 * finite reach. */
static int64_t reach_gauss(const void *args, int ndim, int axis, int *wrap) {
  const ndf_gaussian_opts *o = args;
  (void)ndim;
  const char *m = o->method;
  const int fir = !m || !strcmp(m, "auto") || !strcmp(m, "fir") || !strcmp(m, "cpu_sep") ||
                  !strcmp(m, "cuda_sep");
  if (!fir || (o->tolerance > 0 && (!m || !strcmp(m, "auto")))) return -1;
  if (!(o->sigma[axis] > 1e-15)) return 0;
  *wrap = o->mode[axis] == NDF_MODE_WRAP;
  const double t = o->truncate > 0 ? o->truncate : 4.0;
  return (o->radius[axis] > 0 ? o->radius[axis] : (int64_t)(t * o->sigma[axis] + 0.5)) + 1;
}

/* A length in voxels (mm 0), or in millimetres times mm (1 for "2mm", 1e-3 for "500um"). */
typedef struct {
  double v, mm;
} length;

static int item_length(const char *s, int64_t k, void *dst) {
  char *end;
  length *l = (length *)dst + k;
  l->v = strtod(s, &end);
  if (end == s || !(l->v >= 0) || !isfinite(l->v)) return 0;
  if (!*end || !strcmp(end, "vox"))
    l->mm = 0;
  else if (!strcmp(end, "mm"))
    l->mm = 1;
  else if (!strcmp(end, "um"))
    l->mm = 1e-3;
  else if (!strcmp(end, "cm"))
    l->mm = 10;
  else
    return 0;
  return 1;
}

/* Per-axis sigmas in voxels from --sigma or --fwhm values (n of them: one for all nd axes,
 * or one each), converting lengths by the image's voxel size. A single value for all axes
 * leaves alone the time axis (time_axis, or -1), as fslmaths does, and a single length the
 * axes whose voxel size is unknown where another's is known (not lengths). A length needs a
 * voxel size: one the file states wrongly (spacing NaN: zero, negative, NaN or infinite) is
 * refused. Returns the exit code, having said what is wrong. */
static int sigmas_in_voxels(const char *opt, const length *l, int64_t n, int nd,
                            const double *spacing, int time_axis, double scale, const char *path,
                            double *sigma) {
  int any = 0;
  for (int d = 0; d < nd; d++)
    any |= spacing[d] > 0 && d != time_axis;
  for (int d = 0; d < nd; d++) {
    const length *x = &l[n == 1 ? 0 : d];
    if (n == 1 && d == time_axis) {
      sigma[d] = 0;
    } else if (!x->mm) {
      sigma[d] = x->v * scale;
    } else if (isnan(spacing[d])) {
      return usage_error("%s: %s states no valid voxel size along axis %d (zero, negative, NaN "
                         "or infinite): give %s in voxels",
                         opt, path, d, opt);
    } else if (spacing[d] > 0) {
      sigma[d] = x->v * x->mm * scale / spacing[d];
      if (!isfinite(sigma[d]))
        return usage_error("%s: %g%s is %g voxels along axis %d of %s: too large", opt, x->v,
                           x->mm == 1 ? "mm" : "", sigma[d], d, path);
    } else if (n == 1 && any) {
      sigma[d] = 0;
    } else {
      return usage_error("%s: %s has no voxel size along axis %d: give %s in voxels", opt, path, d,
                         opt);
    }
  }
  return NDF_EXIT_OK;
}

typedef struct {
  common_opts co;
  const char *sopt; /* --sigma or --fwhm, whichever was given */
  length slen[NDF_MAX_DIMS];
  int order[NDF_MAX_DIMS], radius[NDF_MAX_DIMS], iir_order;
  ndf_mode mode[NDF_MAX_DIMS];
  double truncate, tolerance;
  int64_t nsigma, norder, nradius, nmode; /* 0: not given */
  const char *mask, *nan;
} gauss_cli;

/* --sigma or --fwhm (one of them), per axis, lengths in voxels or with a unit. */
static int take_sigma(const cli_opt *o, const char *v, char *args) {
  gauss_cli *g = (gauss_cli *)args;
  if (g->sopt && strcmp(g->sopt, o->name))
    return usage_error("%s", "give --sigma or --fwhm, not both");
  g->sopt = o->name;
  return parse_axis_list(o->name, v, item_length, g->slen, &g->nsigma, o->what);
}

#define SIGMA_WHAT "numbers >= 0, in voxels or with a unit (2mm, 500um)"
static const cli_opt gauss_opts[] = {
    COMMON_OPTS(gauss_cli),
    {"--sigma", take_sigma, 0, 0, NULL, SIGMA_WHAT, 0},
    {"--fwhm", take_sigma, 0, 0, NULL, SIGMA_WHAT, 0},
    OPT_LIST(gauss_cli, "--order", order, norder, item_order, "integers >= 0"),
    OPT_LIST(gauss_cli, "--radius", radius, nradius, item_radius, "integers >= 1"),
    OPT_LIST(gauss_cli, "--mode", mode, nmode, item_mode, MODE_NAMES),
    OPT_WHAT(gauss_cli, "--truncate", take_number, truncate, "a number > 0"),
    OPT_WHAT(gauss_cli, "--tolerance", take_number, tolerance, "a number >= 0"),
    OPT_WHAT(gauss_cli, "--iir-order", take_int, iir_order, "an integer >= 0"),
    OPT(gauss_cli, "--mask", take_str, mask),
    OPT(gauss_cli, "--nan", take_str, nan),
};

static int cmd_gauss(ndf_context *ctx, int argc, char **argv) {
  const char *in_path = NULL, *out_path = NULL;
  gauss_cli a = {.truncate = 4.0};
  const int pr =
      parse_args(argc, argv, gauss_opts, NOPTS(gauss_opts), &a, usage_gauss, &in_path, &out_path);
  if (pr) return pr < 0 ? NDF_EXIT_OK : pr;
  if (!in_path || !out_path) return usage_error("%s", "needs IN and OUT");
  if (!a.nsigma) return usage_error("%s", "needs --sigma or --fwhm");
  const common_opts co = a.co;
  const char *sopt = a.sopt;
  const length *slen = a.slen;
  const int *order = a.order, *radius = a.radius, iir_order = a.iir_order;
  const ndf_mode *mode = a.mode;
  const double truncate = a.truncate, tolerance = a.tolerance;
  const int64_t nsigma = a.nsigma, norder = a.norder, nradius = a.nradius, nmode = a.nmode;

  ndf_image img;
  int rc = read_input(in_path, &co, &img);
  if (rc != NDF_EXIT_OK) return rc;
  const int lead = lead_axes(&img), nd = img.a.ndim - lead; /* a colour axis is not filtered */
  double sigma[NDF_MAX_DIMS];
  rc = check_count(sopt, nsigma, nd, in_path);
  if (rc == NDF_EXIT_OK && norder) rc = check_count("--order", norder, nd, in_path);
  if (rc == NDF_EXIT_OK && nradius) rc = check_count("--radius", nradius, nd, in_path);
  if (rc == NDF_EXIT_OK && nmode) rc = check_count("--mode", nmode, nd, in_path);
  if (rc == NDF_EXIT_OK) /* FWHM = 2 sqrt(2 ln 2) sigma */
    rc =
        sigmas_in_voxels(sopt, slen, nsigma, nd, img.spacing + lead,
                         img.time_axis >= lead ? img.time_axis - lead : -1,
                         strcmp(sopt, "--fwhm") ? 1.0 : 1.0 / sqrt(8.0 * log(2.0)), in_path, sigma);
  if (rc != NDF_EXIT_OK) {
    ndf_image_free(&img);
    return rc;
  }
  ndf_gaussian_opts o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.method = co.method;
  o.truncate = truncate;
  o.cval = co.cval;
  o.iir_order = iir_order;
  o.tolerance = tolerance;
  /* A 4-D image not filtered along axis 0 goes one volume at a time, with a progress bar. */
  const int split = lead || (nd == NDF_MAX_DIMS && sigma[0] == 0 && !(norder && order[0]));
  const int skip = split && !lead; /* the list entry of the axis split off */
  for (int d = skip; d < nd; d++) {
    o.sigma[d - skip] = sigma[d];
    o.order[d - skip] = norder ? order[norder == 1 ? 0 : d] : 0;
    o.radius[d - skip] = nradius ? radius[nradius == 1 ? 0 : d] : 0;
    o.mode[d - skip] = nmode ? mode[nmode == 1 ? 0 : d] : NDF_MODE_NEAREST;
  }
  if (a.nan && strcmp(a.nan, "omit") && strcmp(a.nan, "propagate")) {
    ndf_image_free(&img);
    return usage_error("bad --nan '%s': expected omit or propagate", a.nan);
  }
  masking mk = {.nan_omit = a.nan && !strcmp(a.nan, "omit")};
  const int masked = mk.nan_omit || a.mask;
  if (masked) {
    for (int d = 0; d < nd - skip; d++)
      if (o.mode[d] == NDF_MODE_CONSTANT) {
        ndf_image_free(&img);
        return usage_error("%s", "--mask and --nan omit take the modes reflect, nearest, mirror "
                                 "and wrap, not constant");
      }
  }
  float *mask = NULL;
  if (a.mask) { /* one call's shape: the image's, less a split-off axis */
    ndf_image mi;
    common_opts mo = {0};
    rc = read_input(a.mask, &mo, &mi);
    if (rc != NDF_EXIT_OK) {
      ndf_image_free(&img);
      return rc;
    }
    const int first = split ? 1 : 0;
    int same = mi.a.ndim == img.a.ndim - first;
    for (int d = 0; same && d < mi.a.ndim; d++)
      same = mi.a.shape[d] == img.a.shape[d + first];
    const int64_t nm = ndf_array_size(&mi.a);
    if (same) mask = malloc((size_t)(nm > 0 ? nm : 1) * sizeof *mask);
    for (int64_t i = 0; mask && i < nm; i++)
      mask[i] = ndf__load(mi.a.dtype, mi.a.data, ndf__offset(&mi.a, i)) != 0;
    ndf_image_free(&mi);
    if (!same) {
      ndf_image_free(&img);
      return usage_error("--mask %s: its shape must be %s's%s", a.mask, in_path,
                         split ? " less its first axis (one volume or channel)" : "");
    }
    if (!mask) {
      ndf_image_free(&img);
      fprintf(stderr, "ndfilt: out of memory for the mask\n");
      return NDF_EXIT_FAIL;
    }
  }
  mk.mask = mask;
  if (verbose) {
    fprintf(stderr, "ndfilt: sigma (voxels, axis order)");
    for (int d = 0; d < nd; d++)
      fprintf(stderr, " %.4g", sigma[d]);
    fprintf(stderr, "\n");
  }
  rc = filter_to_file(ctx, &img, 0, co.dtype, out_path, split, plan_gauss, &o, reach_gauss,
                      masked ? &mk : NULL);
  free(mask);
  return rc;
}

/* ------------------------------------------------------------------ conv, correlate */

typedef struct {
  ndf_cli_kernel k;
  ndf_correlate_opts o;
  int convolve;
} conv_args;

static ndf_status plan_conv(ndf_plan **p, ndf_context *ctx, const ndf_array *in,
                            const ndf_array *out, const void *args) {
  const conv_args *c = args;
  const int nf = c->k.nf;
  if (nf == 1)
    return c->convolve ? ndf_plan_convolve(p, ctx, in, out, c->k.w, c->k.shape, &c->o)
                       : ndf_plan_correlate(p, ctx, in, out, c->k.w, c->k.shape, &c->o);
  ndf_array *outs = malloc((size_t)nf * sizeof *outs);
  if (!outs) return NDF_ENOMEM;
  bank_views(in, out, nf, outs); /* descriptions: data is not read */
  ndf_status st = c->convolve
                      ? ndf_plan_convolve_bank(p, ctx, in, nf, outs, c->k.w, c->k.shape, &c->o)
                      : ndf_plan_correlate_bank(p, ctx, in, nf, outs, c->k.w, c->k.shape, &c->o);
  free(outs);
  return st;
}

static int64_t reach_conv(const void *args, int ndim, int axis, int *wrap) {
  const conv_args *c = args;
  (void)ndim;
  if (c->k.nf > 1) return -1;
  *wrap = c->o.mode[axis] == NDF_MODE_WRAP;
  return c->k.shape[axis] / 2 + abs(c->o.origin[axis]) + 1;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

/* --kernel K for an input `in` read from in_path: a named kernel for in's ndim, else a .npy
 * file with in's ndim and finite weights, into k (freed by the caller, also on failure).
 * Returns the exit code, having said what is wrong. */
static int load_kernel(const char *spec, const ndf_array *in, const char *in_path,
                       ndf_cli_kernel *k) {
  char err[512];
  struct stat sb;
  if (ndf_cli_kernel_is_named(spec)) {
    ndf_status st = ndf_cli_kernel_named(spec, in->ndim, k, err, sizeof err);
    if (st == NDF_OK) return NDF_EXIT_OK;
    if (st == NDF_EINVAL) return usage_error("--kernel: %s", err);
    say("", err);
    return NDF_EXIT_FAIL;
  }
  /* A bare word naming no file is more likely a misspelt name than a missing file. */
  if (!strchr(spec, '/') && !ends_with(spec, ".npy") && stat(spec, &sb) != 0) {
    memset(k, 0, sizeof *k);
    return usage_error("unknown --kernel '%s': not a file, nor a named kernel (%s)", spec,
                       NDF_KERNEL_NAMES);
  }
  ndf_status st = ndf_cli_kernel_read(spec, k, err, sizeof err);
  if (st != NDF_OK) {
    say("--kernel: ", err);
    return st == NDF_EIO ? NDF_EXIT_IO : st == NDF_EINVAL ? NDF_EXIT_USAGE : NDF_EXIT_FAIL;
  }
  if (k->ndim != in->ndim)
    return usage_error("kernel %s is %d-D but %s is %d-D: their numbers of axes must match", spec,
                       k->ndim, in_path, in->ndim);
  const int64_t n = ndf_cli_kernel_size(k);
  for (int64_t j = 0; j < n; j++)
    if (!isfinite(k->w[j]))
      return usage_error("kernel %s: weight %lld (C order) is %g, not finite", spec, (long long)j,
                         k->w[j]);
  return NDF_EXIT_OK;
}

typedef struct {
  common_opts co;
  const char *kernel;
  int origin[NDF_MAX_DIMS];
  ndf_mode mode[NDF_MAX_DIMS];
  int64_t norigin, nmode; /* 0: not given */
} conv_cli;

static const cli_opt conv_opts[] = {
    COMMON_OPTS(conv_cli),
    OPT(conv_cli, "--kernel", take_str, kernel),
    OPT_LIST(conv_cli, "--mode", mode, nmode, item_mode, MODE_NAMES),
    OPT_LIST(conv_cli, "--origin", origin, norigin, item_int, "integers"),
};

static int cmd_conv(ndf_context *ctx, int argc, char **argv, int convolve) {
  const char *in_path = NULL, *out_path = NULL;
  conv_cli a = {0};
  const int pr =
      parse_args(argc, argv, conv_opts, NOPTS(conv_opts), &a, usage_conv, &in_path, &out_path);
  if (pr) return pr < 0 ? NDF_EXIT_OK : pr;
  if (!in_path || !out_path) return usage_error("%s", "needs IN and OUT");
  if (!a.kernel) return usage_error("%s", "needs --kernel (a .npy file or " NDF_KERNEL_NAMES ")");
  const char *kspec = a.kernel;
  const common_opts co = a.co;
  const int *origin = a.origin;
  const ndf_mode *mode = a.mode;
  const int64_t norigin = a.norigin, nmode = a.nmode;

  ndf_image img;
  int rc = read_input(in_path, &co, &img);
  if (rc != NDF_EXIT_OK) return rc;
  const int lead = lead_axes(&img); /* a colour axis is not filtered */
  const ndf_array in = filtered_view(&img);
  const int nd = in.ndim;
  conv_args c;
  memset(&c, 0, sizeof c);
  c.o.struct_size = sizeof c.o;
  c.o.method = co.method;
  c.o.cval = co.cval;
  c.convolve = convolve;
  if (nmode) rc = check_count("--mode", nmode, nd, in_path);
  if (rc == NDF_EXIT_OK && norigin) rc = check_count("--origin", norigin, nd, in_path);
  if (rc == NDF_EXIT_OK) rc = load_kernel(kspec, &in, in_path, &c.k);
  if (rc == NDF_EXIT_OK) {
    for (int d = 0; d < nd; d++) {
      c.o.mode[d] = nmode ? mode[nmode == 1 ? 0 : d] : NDF_MODE_NEAREST;
      c.o.origin[d] = norigin ? origin[norigin == 1 ? 0 : d] : 0;
    }
    /* A bank's outputs get a leading axis (the named banks are 3-D: room for it), and are
     * float32 by default: the odd parts are signed whatever the input. */
    const int bank = c.k.nf > 1;
    if (bank && lead) {
      ndf_image_free(&img);
      rc = usage_error("%s: a filter bank needs a gray image, not colour channels", in_path);
    } else {
      rc = filter_to_file(ctx, &img, bank ? c.k.nf : 0, bank && !co.dtype ? NDF_F32 : co.dtype,
                          out_path, lead, plan_conv, &c, reach_conv, NULL);
    }
  } else {
    ndf_image_free(&img);
  }
  ndf_cli_kernel_free(&c.k);
  return rc;
}

/* ------------------------------------------------------------------ rank filters */

typedef struct {
  int64_t rank, fshape[NDF_MAX_DIMS];
  ndf_rank_opts o;
} rank_args;

static ndf_status plan_rank(ndf_plan **p, ndf_context *ctx, const ndf_array *in,
                            const ndf_array *out, const void *args) {
  const rank_args *r = args;
  return ndf_plan_rank(p, ctx, in, out, r->rank, NULL, r->fshape, &r->o);
}

static int64_t reach_rank(const void *args, int ndim, int axis, int *wrap) {
  const rank_args *r = args;
  (void)ndim;
  *wrap = r->o.mode[axis] == NDF_MODE_WRAP;
  return r->fshape[axis] / 2 + abs(r->o.origin[axis]) + 1;
}

typedef struct {
  common_opts co;
  int size[NDF_MAX_DIMS], origin[NDF_MAX_DIMS], rank, has_rank;
  ndf_mode mode[NDF_MAX_DIMS];
  int64_t nsize, norigin, nmode; /* 0: not given */
  double percentile;
  int has_percentile;
} rank_cli;

static int take_rank(const cli_opt *o, const char *v, char *args) {
  rank_cli *r = (rank_cli *)args;
  r->has_rank = 1;
  return parse_int(v, &r->rank) ? NDF_EXIT_OK : usage_error("bad %s '%s'", o->name, v);
}

static int take_percentile(const cli_opt *o, const char *v, char *args) {
  rank_cli *r = (rank_cli *)args;
  char *end;
  r->percentile = strtod(v, &end);
  r->has_percentile = 1;
  if (end != v && !*end && r->percentile >= -100 && r->percentile <= 100) return NDF_EXIT_OK;
  return usage_error("bad %s '%s': expected a number from -100 to 100", o->name, v);
}

static const cli_opt rank_opts[] = {
    COMMON_OPTS(rank_cli),
    OPT_LIST(rank_cli, "--size", size, nsize, item_radius, "integers >= 1"),
    OPT_LIST(rank_cli, "--mode", mode, nmode, item_mode, MODE_NAMES),
    OPT_LIST(rank_cli, "--origin", origin, norigin, item_int, "integers"),
    {"--rank", take_rank, 0, 0, NULL, NULL, 0},
    {"--percentile", take_percentile, 0, 0, NULL, NULL, 0},
};

/* The mean over the box r (scipy's uniform_filter): a separable filter of 1 / n along each axis
 * whose length n is above 1. */
static int run_uniform(ndf_context *ctx, ndf_image *img, const rank_args *r, int nd, int lead,
                       ndf_dtype dtype, const char *out_path) {
  sep_args s;
  memset(&s, 0, sizeof s);
  s.o.struct_size = sizeof s.o;
  s.o.method = r->o.method;
  s.o.cval = r->o.cval;
  double *box[NDF_MAX_DIMS] = {NULL};
  int rc = NDF_EXIT_OK;
  for (int d = 0; d < nd && rc == NDF_EXIT_OK; d++) {
    const int64_t n = r->fshape[d];
    if (n <= 1) continue;
    box[d] = malloc((size_t)n * sizeof *box[d]);
    if (!box[d]) {
      fprintf(stderr, "ndfilt: out of memory for a box of %lld\n", (long long)n);
      rc = NDF_EXIT_FAIL;
      break;
    }
    for (int64_t j = 0; j < n; j++)
      box[d][j] = 1.0 / (double)n;
    s.w[d] = box[d];
    s.n[d] = n;
    s.o.mode[d] = r->o.mode[d];
    s.o.origin[d] = r->o.origin[d];
  }
  if (rc == NDF_EXIT_OK)
    rc = filter_to_file(ctx, img, 0, dtype, out_path, lead, plan_sep, &s, reach_sep, NULL);
  else
    ndf_image_free(img);
  for (int d = 0; d < NDF_MAX_DIMS; d++)
    free(box[d]);
  return rc;
}

/* cmd: median, min, max, rank, percentile, or uniform (the mean over the box) */
static int cmd_rank(ndf_context *ctx, int argc, char **argv, const char *cmd) {
  const char *in_path = NULL, *out_path = NULL;
  rank_cli a = {0};
  const int is_uniform = !strcmp(cmd, "uniform");
  const int pr = parse_args(argc, argv, rank_opts, NOPTS(rank_opts), &a,
                            is_uniform ? usage_uniform : usage_rank, &in_path, &out_path);
  if (pr) return pr < 0 ? NDF_EXIT_OK : pr;
  if (!in_path || !out_path) return usage_error("%s", "needs IN and OUT");
  if (!a.nsize) return usage_error("%s", "needs --size");
  const int is_rank = !strcmp(cmd, "rank"), is_pct = !strcmp(cmd, "percentile");
  if (is_rank != a.has_rank)
    return usage_error("%s", is_rank ? "rank needs --rank" : "--rank belongs to `ndfilt rank`");
  if (is_pct != a.has_percentile)
    return usage_error("%s", is_pct ? "percentile needs --percentile"
                                    : "--percentile belongs to `ndfilt percentile`");
  ndf_image img;
  int rc = read_input(in_path, &a.co, &img);
  if (rc != NDF_EXIT_OK) return rc;
  const int lead = lead_axes(&img); /* a colour axis is not filtered */
  const ndf_array in = filtered_view(&img);
  const int nd = in.ndim;
  rank_args r;
  memset(&r, 0, sizeof r);
  r.o.struct_size = sizeof r.o;
  r.o.method = a.co.method;
  r.o.cval = a.co.cval;
  rc = check_count("--size", a.nsize, nd, in_path);
  if (rc == NDF_EXIT_OK && a.nmode) rc = check_count("--mode", a.nmode, nd, in_path);
  if (rc == NDF_EXIT_OK && a.norigin) rc = check_count("--origin", a.norigin, nd, in_path);
  int64_t n = 1;
  for (int d = 0; d < nd && rc == NDF_EXIT_OK; d++) {
    r.fshape[d] = a.size[a.nsize == 1 ? 0 : d];
    r.o.mode[d] = a.nmode ? a.mode[a.nmode == 1 ? 0 : d] : NDF_MODE_NEAREST;
    r.o.origin[d] = a.norigin ? a.origin[a.norigin == 1 ? 0 : d] : 0;
    n *= r.fshape[d];
  }
  if (rc != NDF_EXIT_OK) {
    ndf_image_free(&img);
    return rc;
  }
  if (is_uniform) return run_uniform(ctx, &img, &r, nd, lead, a.co.dtype, out_path);
  if (!strcmp(cmd, "median"))
    r.rank = n / 2;
  else if (!strcmp(cmd, "min"))
    r.rank = 0;
  else if (!strcmp(cmd, "max"))
    r.rank = n - 1;
  else if (is_rank)
    r.rank = a.rank;
  else { /* scipy's percentile_filter */
    const double p = a.percentile < 0 ? a.percentile + 100 : a.percentile;
    r.rank = p == 100 ? n - 1 : (int64_t)((double)n * p / 100.0);
  }
  return filter_to_file(ctx, &img, 0, a.co.dtype, out_path, lead, plan_rank, &r, reach_rank, NULL);
}

/* ------------------------------------------------------------------ ks */

typedef struct {
  const ndf_array *maps;
  int nmaps;
  ndf_ks_opts o;
} ks_args;

static ndf_status plan_ks(ndf_plan **p, ndf_context *ctx, const ndf_array *in, const ndf_array *out,
                          const void *args) {
  const ks_args *k = args;
  return ndf_plan_ks(p, ctx, in, out, k->maps, k->nmaps, &k->o);
}

typedef struct {
  common_opts co;
  const char *maps[NDF_MAX_DIMS + 1];
  int nmaps, index, output, normalize, deterministic;
  double n_sigma;
} ks_cli;

static int take_map(const cli_opt *o, const char *v, char *args) {
  ks_cli *k = (ks_cli *)args;
  if (k->nmaps > NDF_MAX_DIMS) return usage_error("more than %d %s", NDF_MAX_DIMS, o->name);
  k->maps[k->nmaps++] = v;
  return NDF_EXIT_OK;
}

static const cli_opt ks_opts[] = {
    OPT_WHAT(ks_cli, "--cval", take_refusal, co, "ks has no --cval"), /* before the common one */
    COMMON_OPTS(ks_cli),
    {"--sigma-map", take_map, 0, 0, NULL, NULL, 0},
    OPT_WHAT(ks_cli, "--index", take_word, index, "input|output"), /* NDF_KS_INPUT, _OUTPUT */
    OPT_WHAT(ks_cli, "--output", take_word, output, "same|full"),  /* NDF_KS_SAME, _FULL */
    OPT_WHAT(ks_cli, "--n-sigma", take_number, n_sigma, "a number > 0"),
    OPT_FLAG(ks_cli, "--normalize", normalize),
    OPT_FLAG(ks_cli, "--deterministic", deterministic),
};

static int cmd_ks(ndf_context *ctx, int argc, char **argv) {
  const char *in_path = NULL, *out_path = NULL;
  ks_cli a = {0};
  const int pr = parse_args(argc, argv, ks_opts, NOPTS(ks_opts), &a, usage_ks, &in_path, &out_path);
  if (pr) return pr < 0 ? NDF_EXIT_OK : pr;
  if (!in_path || !out_path) return usage_error("%s", "needs IN and OUT");
  if (!a.nmaps) return usage_error("%s", "needs --sigma-map");
  const common_opts co = a.co;
  const char *const *map_path = a.maps;
  const int nmaps = a.nmaps;
  ks_args k;
  memset(&k, 0, sizeof k);
  k.o.struct_size = sizeof k.o;
  k.o.index = (ndf_ks_index)a.index;
  k.o.output = (ndf_ks_extent)a.output;
  k.o.normalize = a.normalize;
  k.o.deterministic = a.deterministic;
  k.o.n_sigma = a.n_sigma;
  k.o.method = co.method;
  ndf_image img, mimg[NDF_MAX_DIMS + 1];
  ndf_array maps[NDF_MAX_DIMS + 1];
  ndf_image_init(&img);
  int rc = read_input(in_path, &co, &img), got = 0;
  const ndf_array in = img.a;
  if (rc == NDF_EXIT_OK && lead_axes(&img))
    rc = usage_error("%s: ks needs a gray image, not colour channels", in_path);
  for (; rc == NDF_EXIT_OK && got < nmaps; got++) {
    if ((rc = read_input(map_path[got], NULL, &mimg[got])) != NDF_EXIT_OK) break;
    maps[got] = mimg[got].a;
  }
  if (rc == NDF_EXIT_OK && nmaps != 1 && nmaps != in.ndim)
    rc = usage_error("%d --sigma-map: give 1, or one per axis of %s (%d)", nmaps, in_path, in.ndim);
  for (int m = 0; rc == NDF_EXIT_OK && m < nmaps; m++) {
    int same = maps[m].ndim == in.ndim;
    for (int d = 0; same && d < in.ndim; d++)
      same = maps[m].shape[d] == in.shape[d];
    if (!same) rc = usage_error("%s's shape differs from %s's", map_path[m], in_path);
  }
  int64_t shape[NDF_MAX_DIMS], R = 0, origin[NDF_MAX_DIMS] = {0};
  memcpy(shape, in.shape, sizeof shape);
  if (rc == NDF_EXIT_OK && k.o.output == NDF_KS_FULL &&
      ndf_ks_full_shape(ctx, &in, maps, nmaps, k.o.n_sigma, shape, &R) != NDF_OK)
    rc = usage_error("%s", ndf_context_message(ctx));
  for (int d = 0; d < in.ndim; d++) /* the full grid starts R voxels before the input's */
    origin[d] = -R;
  k.maps = maps;
  k.nmaps = nmaps;
  if (rc == NDF_EXIT_OK)
    rc = filter_to_shape(ctx, &img, in.ndim, shape, NULL, origin, co.dtype, out_path, 0, 1, plan_ks,
                         &k, NULL);
  ndf_image_free(&img); /* empty once filter_to_shape has taken it */
  for (int m = 0; m < got; m++)
    ndf_image_free(&mimg[m]);
  return rc;
}

/* A signal that ends the program while it writes an output removes the temporary file first,
 * then ends it as the signal would have. */
static void on_signal(int sig) {
  ndf_io_remove_pending();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void catch_signals(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&sa.sa_mask, sigs[i]);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction old;
    /* a signal the caller ignores (nohup) stays ignored */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(sigs[i], &sa, NULL);
  }
  /* Past a file-size limit (ulimit -f) a write fails with EFBIG, which is reported, instead
   * of the process being killed mid-write. */
  signal(SIGXFSZ, SIG_IGN);
}

int main(int argc, char **argv) {
  char why[512] = "";
  ndf_context_opts co = {.struct_size = sizeof co, .message = why, .message_size = sizeof why};
  catch_signals();
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--version")) {
      printf("ndfilt %s\n", ndf_version_string());
      return NDF_EXIT_OK;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_main, stdout);
      return NDF_EXIT_OK;
    }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      verbose = 1;
      continue;
    }
    if ((!strcmp(a, "--device") || !strcmp(a, "--threads") || !strcmp(a, "--read-limit") ||
         !strcmp(a, "--memory-limit")) &&
        i + 1 >= argc)
      return usage_error("option %s needs a value", a);
    if (!strcmp(a, "--device")) {
      co.device = argv[++i];
    } else if (!strcmp(a, "--threads")) {
      if (!parse_int(argv[++i], &co.threads) || co.threads < 1)
        return usage_error("bad --threads '%s': expected an integer from 1 to %d", argv[i],
                           NDF_MAX_THREADS);
    } else if (!strcmp(a, "--read-limit")) {
      int64_t lim;
      if (!ndf_io_parse_size(argv[++i], &lim))
        return usage_error("bad --read-limit '%s': expected a size such as 4G, 512M or 1000000",
                           argv[i]);
      ndf_io_set_read_limit(lim);
    } else if (!strcmp(a, "--memory-limit")) {
      if (!ndf_io_parse_size(argv[++i], &memory_limit))
        return usage_error("bad --memory-limit '%s': expected a size such as 4G, 512M or 1000000",
                           argv[i]);
    } else {
      return usage_error("unknown option %s", a);
    }
  }
  if (i >= argc) {
    fputs(usage_main, stderr);
    return NDF_EXIT_USAGE;
  }
  const char *cmd = argv[i];
  const int conv = !strcmp(cmd, "conv") || !strcmp(cmd, "convolve"),
            corr = !strcmp(cmd, "correlate"),
            rank = !strcmp(cmd, "median") || !strcmp(cmd, "min") || !strcmp(cmd, "max") ||
                   !strcmp(cmd, "rank") || !strcmp(cmd, "percentile") || !strcmp(cmd, "uniform");
  int known = !strcmp(cmd, "info") || !strcmp(cmd, "demo") || !strcmp(cmd, "bench") ||
              !strcmp(cmd, "correlate1d") || !strcmp(cmd, "convolve1d") ||
              !strcmp(cmd, "sepconv") || !strcmp(cmd, "gauss") || !strcmp(cmd, "ks") || conv ||
              corr || rank;
  if (!known) return usage_error("unknown command '%s'", cmd);

  ndf_context *ctx;
  const char *env = getenv("NDF_DEVICE");
  ndf_context_opts first = co;
  if (!co.device && (!env || !*env || !strcmp(env, "auto")) && strcmp(cmd, "info") &&
      strcmp(cmd, "demo") && strcmp(cmd, "bench")) {
    lazy_gpu = 1;
    gpu_opts = co;
    first.device = "cpu";
  }
  ndf_status st = ndf_context_create(&ctx, &first);
  if (st != NDF_OK) {
    fprintf(stderr, "ndfilt: cannot create a context: %s\n", why[0] ? why : ndf_status_str(st));
    return st == NDF_EINVAL ? NDF_EXIT_USAGE : NDF_EXIT_FAIL;
  }
  if (ndf_context_message(ctx)[0]) /* a thread count clamped */
    fprintf(stderr, "ndfilt: note: %s\n", ndf_context_message(ctx));
  ndf_io_set_threads(ndf_context_threads(ctx)); /* compressed output: as many threads */
  int rc;
  if (!strcmp(cmd, "info"))
    rc = cmd_info(ctx, argc - i, argv + i);
  else if (!strcmp(cmd, "demo"))
    rc = ndf_cli_demo(ctx, argc - i, argv + i);
  else if (!strcmp(cmd, "bench"))
    rc = ndf_cli_bench(ctx, argc - i, argv + i);
  else if (!strcmp(cmd, "sepconv"))
    rc = cmd_sepconv(ctx, argc - i, argv + i);
  else if (!strcmp(cmd, "gauss"))
    rc = cmd_gauss(ctx, argc - i, argv + i);
  else if (!strcmp(cmd, "ks"))
    rc = cmd_ks(ctx, argc - i, argv + i);
  else if (conv || corr)
    rc = cmd_conv(ctx, argc - i, argv + i, conv);
  else if (rank)
    rc = cmd_rank(ctx, argc - i, argv + i, cmd);
  else
    rc = cmd_corr1d(ctx, argc - i, argv + i, !strcmp(cmd, "convolve1d"));
  ndf_context_destroy(ctx);
  ndf_context_destroy(gpu_ctx);
  return rc;
}
