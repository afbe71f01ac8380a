/* SPDX-License-Identifier: BSD-3-Clause */
/* launch.h - C entry points of the CUDA kernels (.cu files); arrays padded to 4-D views. */
#ifndef NDF_CUDA_LAUNCH_H
#define NDF_CUDA_LAUNCH_H

#include <stdint.h>
#include <stdlib.h>

#include "../core/dev_switch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A strided view padded to 4 axes with leading extent-1 axes. */
typedef struct ndf__view4 {
  int64_t shape[4];
  int64_t strides[4];
} ndf__view4;

/* Each returns a cudaError_t (0 on success) after queuing work on stream. */
int ndf__launch_to_f32(const void *src, int dtype, ndf__view4 v, float *dst, void *stream);
int ndf__launch_from_f32(const float *src, void *dst, int dtype, ndf__view4 v, void *stream);
/* A view v of src (of dtype) gathered into contiguous dst of the same dtype, or contiguous src
 * scattered into the view v of dst. */
int ndf__launch_gather_same(const void *src, int dtype, ndf__view4 v, void *dst, void *stream);
int ndf__launch_scatter_same(const void *src, void *dst, int dtype, ndf__view4 v, void *stream);
int ndf__launch_corr1d_direct(const float *in, ndf__view4 vin, float *out, ndf__view4 vout,
                              int axis4, const float *w, int64_t n, int64_t left, int mode,
                              float cval, void *stream);

/* cuda_sep passes over contiguous float32 arrays: along the last axis of
 * [nrows][X], or along the middle axis of [P][L][Q]. w_host: the n taps (they
 * travel as kernel parameters); w_dev: the same in device memory. */
int ndf__launch_sep_rows(const float *in, float *out, int64_t nrows, int64_t X, const float *w_host,
                         const float *w_dev, int64_t n, int64_t left, int mode, float cval,
                         void *stream);
int ndf__launch_sep_cols(const float *in, float *out, int64_t P, int64_t L, int64_t Q,
                         const float *w_host, const float *w_dev, int64_t n, int64_t left, int mode,
                         float cval, void *stream);
/* cuda_direct (correlate): a contiguous [n0][n1][n2][n3] array correlated with nf
 * [k0][k1][k2][k3] kernels (w_dev: float32 on the device, one after the other) into the
 * contiguous outs[0..nf-1]; left: taps before the output point per axis; mode: per axis;
 * skip_zero: zero weights are left out of the sum (scipy's footprint for NaN and Inf). */
int ndf__launch_corr_direct(const float *in, float *const *outs, int nf, const int64_t n[4],
                            const int64_t k[4], const int64_t left[4], const int mode[4],
                            float cval, const float *w_dev, int skip_zero, void *stream);
/* cuda_direct64: the same over float64 arrays and weights, in float64. */
int ndf__launch_corr_direct64(const double *in, double *const *outs, int nf, const int64_t n[4],
                              const int64_t k[4], const int64_t left[4], const int mode[4],
                              double cval, const double *w_dev, int skip_zero, void *stream);
/* cuda_rank: a contiguous [n0][n1][n2][n3] float32 (f64: float64) array's rank filter into out
 * (contiguous, of the same type):
 * count samples, each at off[j] from the window's start inside the array and at
 * at[4j..4j+3] in the window; extreme -1 or +1: the minimum or maximum, else the value of rank
 * `rank`. */
int ndf__launch_rank(const void *in, void *out, int f64, const int64_t n[4], const int64_t k[4],
                     const int64_t left[4], const int mode[4], double cval, const int64_t *off,
                     const int *at, int count, int rank, int extreme, void *stream);
/* cuda_sep64: one pass along L of a contiguous float64 [P][L][Q] array, in float64: n taps
 * (w_dev, on the device), left of them before the output, the mode's samples past the ends. */
int ndf__launch_sep64(const double *in, double *out, int64_t P, int64_t L, int64_t Q,
                      const double *w_dev, int n, int64_t left, int mode, double cval,
                      void *stream);
/* cuda_box: one pass of a box of n samples (weight w) along the last axis of [nrows][X] (rows:
 * the box's apron in shared memory, where ndf__box_takes(n, X)), or along L of [P][L][Q]
 * (lines: any n; Q = 1 the last axis), contiguous float32 to float32. */
int ndf__box_takes(int n, int64_t X);
int ndf__launch_box_rows(const float *in, float *out, int64_t nrows, int64_t X, int n, int64_t left,
                         int mode, float cval, double w, void *stream);
int ndf__launch_box_lines(const float *in, float *out, int64_t P, int64_t L, int64_t Q, int n,
                          int64_t left, int mode, float cval, double w, void *stream);
/* cuda_rank's median of a footprint of a few samples through a tile in shared memory
 * (median_tile.cuh), laid out once for a plan by ndf__median_tile_plan: it says
 * whether the tile takes the problem (a count it is built for, the median's rank, k[0] = 1, the
 * last three extents below 2^30, a tile that fits) and fills *t from the samples at at[4j..4j+3]
 * (as for ndf__launch_rank; NULL: only the answer). pairs: neighbours along y share their common
 * samples' steps where the footprint allows. */
enum { NDF__MEDIAN_OFFS = 150 };
typedef struct {
  int count, own; /* samples; each window's own where outputs go in pairs, else 0 */
  int py, pz;     /* a thread's outputs (pairs of them where own) along y, and along z */
  int sx, sy, sz; /* the tile's extent with its halo */
  size_t smem;
  int off[NDF__MEDIAN_OFFS]; /* the samples' byte offsets in the tile (median_args.off) */
} ndf__median_tile;
int ndf__median_tile_plan(ndf__median_tile *t, int esize, const int64_t n[4], const int64_t k[4],
                          const int *at, int count, int rank, int pairs);
/* cuda_rank: a box's minimum (maximum: 0) or maximum (1) of k samples along L of a contiguous
 * [P][L][Q] array of dtype (NDF_F32, NDF_F64, NDF_U8, NDF_U16 or NDF_I16). */
int ndf__launch_extreme(const void *in, void *out, int dtype, int64_t P, int64_t L, int64_t Q,
                        int k, int64_t left, int mode, double cval, int maximum, void *stream);
/* dtype: NDF_F32 or NDF_F64, or (ndf__launch_median_tile_int) NDF_U8, NDF_U16 or NDF_I16. */
int ndf__launch_median_tile(const void *in, void *out, int dtype, const int64_t n[4],
                            const int64_t left[4], const int mode[4], double cval,
                            const ndf__median_tile *t, void *stream);
int ndf__launch_median_tile_int(const void *in, void *out, int dtype, const int64_t n[4],
                                const int64_t left[4], const int mode[4], double cval,
                                const ndf__median_tile *t, void *stream);
/* 1 into *flag (a device int the caller zeroed) if the strided device array of dtype holds a
 * NaN or an infinity as float32 arithmetic sees it. */
int ndf__launch_nonfinite(const void *src, int dtype, ndf__view4 v, int *flag, void *stream);
/* cuda_fft and cuda_fft64 (correlate), over float (f64 0) or double (f64 1) reals. The
 * transform buffer is [L0][L1][L2][rs] reals (rs = 2 (L3/2 + 1), cuFFT's in-place real layout).
 * fft_pad fills it with src ([n0][n1][n2][n3], contiguous) extended by the modes: element t
 * (t < e per axis) is src at t - left through mode (cval outside in constant mode), every other
 * element 0. fft_product: z = y * conj(h) over count complex values. fft_crop: out[i] = buf[i]
 * for i < n (out contiguous). */
int ndf__launch_fft_pad(const void *src, const int64_t n[4], const int64_t left[4],
                        const int mode[4], double cval, const int64_t e[4], void *buf,
                        const int64_t L[4], int64_t rs, int f64, void *stream);
int ndf__launch_fft_product(const void *y, const void *h, void *z, int64_t count, int f64,
                            void *stream);
int ndf__launch_fft_crop(const void *buf, const int64_t L[4], int64_t rs, void *out,
                         const int64_t n[4], int f64, void *stream);
/* Both of the last two axes of [P][Y][X] in one pass, y first, with n taps on
 * each (odd, 3 to 17; else cudaErrorNotSupported). wy, wx: host taps. */
int ndf__launch_sep_yx(const float *in, float *out, int64_t P, int64_t Y, int64_t X,
                       const float *wy, const float *wx, int64_t n, int64_t ly, int64_t lx, int my,
                       int mx, float cval, void *stream);
/* cuda_iir: the recursive filter f (core/iir.h) along the middle axis of the contiguous
 * [P][L][Q] (Q == 1: the last axis, rows of length L), float64 state. The parallel form needs
 * src != dst. */
struct ndf__iir;
int ndf__launch_iir(const float *src, float *dst, int64_t P, int64_t L, int64_t Q,
                    const struct ndf__iir *f, void *stream);
/* The parallel form on lines of length L that fit in one block (ndf__iir_chunks_fit): the
 * line in registers, read and written once, float32 state; may run in place. */
int ndf__iir_chunks_fit(const struct ndf__iir *f, int64_t L);
int ndf__launch_iir_chunks(const float *src, float *dst, int64_t P, int64_t L, int64_t Q,
                           const struct ndf__iir *f, void *stream);
/* The same on tensor cores (iir_tc_kernel.cu; ndf__iir_tc_pass_make below), unless
 * NDF_CUDA_IIR_TC=0: lines past 1024 in segments; src and dst 16-byte aligned where given (the
 * fused passes need it; a made pass takes any alignment). */
int ndf__iir_tc_fits(const float *src, const float *dst, int64_t L);
/* The longest line a tensor-core pass takes whole (a team of warps a line); longer ones go in
 * segments. */
#define NDF__IIR_TC_LINE 1024
/* Whether the tensor-core passes take filter f on lines of L (shape aside: ndf__iir_tc_fits):
 * the parallel form, and iir_alvarez of 2 to 4 steps as its sections (core/iir.h,
 * ndf__iir_sections), which only these passes run; up to sigma 256, any L. */
int ndf__iir_tc_filter(const struct ndf__iir *f, int64_t L);
/* Both last axes of [P][Y][X] in one pass under the same filter f (iir_tc_kernel.cu), where
 * ndf__iir_tc_yx_fits: sync is a device buffer of P + 2 counters, zero before the first launch
 * (each launch leaves them zero). */
int ndf__iir_tc_yx_fits(const float *src, const float *dst, int64_t Y, int64_t X);
int ndf__launch_iir_tc_yx(const float *src, float *dst, int64_t P, int64_t Y, int64_t X,
                          const struct ndf__iir *f, unsigned long long *sync, void *stream);
/* A tensor-core pass made once, at plan time (the filter's matrices, the kernel's blocks and
 * shared memory, on the current device), and launched on each call: along L of [P][L][Q]
 * (ndf__iir_tc_pass_make), or both last axes of [P][Y][X] with a slice to a thread-block
 * cluster (ndf__iir_tc_yxc_pass_make; no counters). *out is NULL where the kernel does not take
 * the shape (ndf__iir_tc_fits(NULL, NULL, ...), ndf__iir_tc_yx_fits; the cluster pass also
 * below compute capability 9.0 or where no cluster fits), returning 0, and on error. A pass along
 * one axis takes arrays of any alignment (4- and 8-byte copies where they are not 16-byte
 * aligned); the cluster pass needs 16-byte aligned ones. */
typedef struct ndf__iir_tc_pass ndf__iir_tc_pass;
/* Whether the cluster pass may run on src and dst: its shape was checked when it was made, so a
 * call checks only the arrays' 16-byte alignment. */
static inline int ndf__iir_tc_aligned(const void *src, const void *dst) {
  return ((uintptr_t)src | (uintptr_t)dst) % 16 == 0;
}
int ndf__iir_tc_pass_make(ndf__iir_tc_pass **out, int64_t P, int64_t L, int64_t Q,
                          const struct ndf__iir *f);
int ndf__iir_tc_yxc_pass_make(ndf__iir_tc_pass **out, int64_t P, int64_t Y, int64_t X,
                              const struct ndf__iir *f);
int ndf__iir_tc_pass_launch(const ndf__iir_tc_pass *p, const float *src, float *dst, int last,
                            void *stream);
void ndf__iir_tc_pass_free(ndf__iir_tc_pass *p);

/* ks (ks_kernel.cu): arrays as 3-D [z][y][x] (missing leading axes of length 1): input n,
 * output m, the input's offset in the output off; smap[a]: the sigma map of axis a (-1: none);
 * sig: the nmap sigmas of the maps (n elements each, one after the other), then nmap scales of
 * the kernels (normalize's, else 1); rad: the maps' radii, clipped to the grids. */
typedef struct ndf__ks_geom {
  int64_t n[3], m[3], off[3];
  int64_t nmap;
  int smap[3];
  int index_output;
  int scaled; /* normalize: the scales are not all 1 */
  /* The complement of the smallest flat index of a bad map value (0: none), on the device;
   * the kernels do nothing where there is one, so that bad maps leave the output as it was. */
  const unsigned long long *bad;
} ndf__ks_geom;
/* The sigma maps as ks_prep_kernel.cu reads them: nsig strided views (padded to 4-D) of dtype
 * (ndf_dtype's values) on the device, n pixels each; radii past clip are clipped, and past
 * r_max (> 0) are bad. */
#define NDF_MAX_MAPS 4
typedef struct ndf__ks_maps {
  const void *data[NDF_MAX_MAPS];
  int dtype[NDF_MAX_MAPS];
  ndf__view4 v[NDF_MAX_MAPS];
  int nsig, normalize;
  int64_t n, r_max, clip;
  double n_sigma;
} ndf__ks_maps;
/* The maps into sig (their float32 sigmas, then their scales: normalize's, else 1) and rad
 * (radii), each bad value's flat index (map m's pixel i: m n + i) complemented into *bad by
 * atomicMax (the caller zeroes it first: the smallest index wins); with tiles (zeroed by the
 * caller), the largest radius per axis of each tw x ty input tile (tw 32 or 128, 3 ints a tile).
 * With lists (ndf__launch_ks_bucket's, of nt tiles), their counts are zeroed. */
int ndf__launch_ks_maps(const ndf__ks_maps *M, const ndf__ks_geom *g, float *sig, int *rad,
                        unsigned long long *bad, int *tiles, int tw, int ty, int *lists, int64_t nt,
                        void *stream);
/* The largest radii per 32 x ty output tile at each output pixel's nearest input pixel (index
 * output); rt zeroed by the caller. */
int ndf__launch_ks_out_tiles(const ndf__ks_geom *g, const int *rad, int *rt, int ty, void *stream);
/* The 32 x ty input tiles' radii it spread over the output tiles their pixels reach (index
 * input's gather); rt zeroed by the caller. */
int ndf__launch_ks_spread(const ndf__ks_geom *g, const int *it, int *rt, int ty, void *stream);
/* Unless *bad records a bad map value: the nt input tiles of radii it into the scatters' lists,
 * one a radius bucket (0, 1, 2, 4, 8, 16, 32, any; none below bucket bmin): list b at lists + b
 * (nt + 1), its count first (zeroed before); it cleared; out[0..nout) = 0 (out may be NULL, nout
 * 0). verdict (NULL, or host memory the device can write): *bad, for the caller to read after
 * the stream's work. */
int ndf__launch_ks_bucket(int *it, int64_t nt, int *lists, int bmin, float *out, int64_t nout,
                          const unsigned long long *bad, unsigned long long *verdict, void *stream);
/* out[0..n) = 0, unless *bad records a bad map value (is not 0). */
int ndf__launch_ks_zero(float *out, int64_t n, const unsigned long long *bad, void *stream);
enum {
  NDF__KS_GLOBAL_ATOMIC = 0,
  NDF__KS_SHARED_ATOMIC,
  NDF__KS_SYNC,
  NDF__KS_THREADFENCE,
  NDF__KS_WARPSYNC,
  NDF__KS_SHUFFLE,
  NDF__KS_QUAD /* tiles of 128 x ty, the others' 32 x ty */
};
/* The tile shapes (t_y rows of 32 pixels, b_y rows of 32 threads) built: all five of da Silva,
 * Ansorge and Jena's with NDF_KS_ALL_SHAPES (the benchmark's build), else the default. X(ty, by)
 * per shape. */
#ifdef NDF_KS_ALL_SHAPES
#define NDF__KS_SHAPES(X) X(8, 8) X(16, 8) X(32, 8) X(16, 16) X(32, 16)
#else
#define NDF__KS_SHAPES(X) X(8, 8)
#endif
/* How the gathers evaluate Eq. 4 (ks_gather_kernel.cu): exactly, or by a look-up table. */
enum {
  NDF__KS_EXACT = 0,
  NDF__KS_LUT1D_GLOBAL,
  NDF__KS_LUT1D_SHARED,
  NDF__KS_LUT1D_TEXTURE,
  NDF__KS_LUT2D_GLOBAL,
  NDF__KS_LUT2D_TEXTURE
};
/* A look-up table on the device. 1-D: erf(i h), i < n, inv_h = 1 / h, in tab (and tex, a
 * linearly filtered 1-D texture of it). 2-D: Eq. 4 at d < nd and sigma j / sinv, j < ns, in tab
 * row by row (a sigma a row), and tex, a 2-D texture of it. */
typedef struct ndf__ks_lut {
  const float *tab;
  unsigned long long tex; /* cudaTextureObject_t */
  int n, nd, ns;
  float inv_h, sinv;
} ndf__ks_lut;
/* A gather (lut, narr shared arrays, tile ty x 32 and block by x 32) into contiguous out; rt:
 * per output tile (x fastest, then y, then z) the largest radius per axis, 3 ints; smem: the
 * dynamic shared memory bytes (the table, the largest window, its sigma pairs). */
int ndf__launch_ks_gather(int lut, int narr, int ty, int by, const float *in, float *out,
                          const float *sig, const int *rad, const ndf__ks_geom *g, const int *rt,
                          const ndf__ks_lut *L, size_t smem, void *stream);
/* A scatter variant over the input tiles (32 x ty; 128 x ty for quad) listed in tiles (its
 * count, then ids x fastest, then y, then z; blocks past the count return), on a grid of
 * ntiles blocks (at least the count), whose radii are all <= rm (0, 1, 2, 4, 8, 16 or 32; any other
 * value: the generic kernel for any radius), adding into out (zeroed by the caller). ks.c
 * dispatches to the function of the variant and shape, ndf__ks_scatter_<variant>_<ty>_<by>
 * (ks_kernel.cu). */
#define NDF__KS_SCATTER_FN3(v, t, b) ndf__ks_scatter_##v##_##t##_##b
#define NDF__KS_SCATTER_FN(v, t, b) NDF__KS_SCATTER_FN3(v, t, b)
#define NDF__KS_SCATTER_DECL(v, t, b)                                                              \
  int NDF__KS_SCATTER_FN(v, t, b)(int rm, const float *in, float *out, const float *sig,           \
                                  const int *rad, const ndf__ks_geom *g, const int *tiles,         \
                                  int ntiles, void *stream);
#define NDF__KS_SCATTER_DECLS(t, b)                                                                \
  NDF__KS_SCATTER_DECL(0, t, b)                                                                    \
  NDF__KS_SCATTER_DECL(1, t, b)                                                                    \
  NDF__KS_SCATTER_DECL(2, t, b)                                                                    \
  NDF__KS_SCATTER_DECL(3, t, b)                                                                    \
  NDF__KS_SCATTER_DECL(4, t, b) NDF__KS_SCATTER_DECL(5, t, b) NDF__KS_SCATTER_DECL(6, t, b)
NDF__KS_SHAPES(NDF__KS_SCATTER_DECLS)

#ifdef __cplusplus
}
#endif
#endif /* NDF_CUDA_LAUNCH_H */
