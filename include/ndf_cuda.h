/* SPDX-License-Identifier: BSD-3-Clause */
/* ndf_cuda.h - CUDA-only extras of ndfilt: streams. Include after ndf.h. */
#ifndef NDF_CUDA_H
#define NDF_CUDA_H

#include "ndf.h"
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the stream the context's CUDA plans run on (default: the legacy
 * default stream). The caller owns the stream and keeps it alive while the
 * context uses it. NDF_EUNSUPPORTED on a CPU context. */
NDF_API ndf_status ndf_context_set_stream(ndf_context *ctx, cudaStream_t stream);
NDF_API cudaStream_t ndf_context_stream(const ndf_context *ctx);

#ifdef __cplusplus
}
#endif
#endif /* NDF_CUDA_H */
