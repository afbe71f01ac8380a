/* SPDX-License-Identifier: BSD-3-Clause */
/* host.h - helpers for the host side of CUDA solvers (src/cuda/stage.c). */
#ifndef NDF_CUDA_HOST_H
#define NDF_CUDA_HOST_H

#include "../core/internal.h"
#include "launch.h"

/* a as a 4-D view for the kernels. */
ndf__view4 ndf__cuda_view4(const ndf_array *a);
/* Whether a float64 solver's native plan takes pb on ctx: float64 in and out, both on the device
 * (cuda_sep64, cuda_direct64, cuda_fft64). The development switch NDF_CUDA_F64=0 turns them all
 * off (the float32 solvers then take float64 arrays, staged), for a benchmark's comparison. */
int ndf__cuda_f64_native(const ndf__problem *pb, const ndf_context *ctx);
/* Contiguous device views for a solver's exec, of the arrays' dtype (float32 for a staged plan,
 * a native plan's own): in and its nout outputs themselves when contiguous, else buffers from
 * the stream-ordered allocator (in gathered into its buffer once; a native plan's strides may
 * change from call to call). ndf__cuda_contig_end scatters dst[f] into out[f] (when err is 0)
 * and frees the buffers; both return a cudaError_t, and end must follow every begin. */
typedef struct {
  const void *src;
  void **dst;  /* nout contiguous outputs */
  void *gin;   /* in's buffer, or NULL */
  void **gout; /* output f's buffer, or NULL where out[f] is contiguous */
  int nout;
  void *dst1, *gout1; /* the arrays when nout is 1 */
} ndf__contig;
int ndf__cuda_contig_begin(ndf__contig *c, const ndf_array *in, int nout, ndf_array *out,
                           void *stream);
int ndf__cuda_contig_end(ndf__contig *c, int err, ndf_array *out, void *stream);

/* Whether cuFFT could be opened (cufft_load.c: on first use, not linked); if not, *reason says
 * why. */
int ndf__cufft_load(const char **reason);

/* NDF_OK for err == 0, else records what failed and maps the CUDA error. */
ndf_status ndf__cuda_check(const ndf_context *ctx, int err, const char *what);

#endif
