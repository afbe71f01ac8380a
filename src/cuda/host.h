/* host.h - helpers for the host side of CUDA solvers (src/cuda/stage.c). */
#ifndef NDF_CUDA_HOST_H
#define NDF_CUDA_HOST_H

#include "../core/internal.h"
#include "launch.h"

/* a as a 4-D view for the kernels. */
ndf__view4 ndf__cuda_view4(const ndf_array *a);
/* NDF_OK for err == 0, else records what failed and maps the CUDA error. */
ndf_status ndf__cuda_check(const ndf_context *ctx, int err, const char *what);

#endif
