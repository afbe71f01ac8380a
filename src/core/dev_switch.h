/* SPDX-License-Identifier: BSD-3-Clause */
/* dev_switch.h - development switches: a value from the environment in a build configured with
 * NDF_DEV_SWITCHES (the GPU check's), NULL in every other build. They force a path for the tests
 * or a benchmark's comparison: cuda_iir's NDF_CUDA_IIR_*; NDF_DEVICE_CAPS, the cost models'
 * device figures (auto's choices for another card); NDF_SLABS, "0" to run host arrays on one
 * GPU in memory wherever they fit, "1" to send them in slabs wherever they may go so;
 * NDF_CUDA_RANK_TILE (the median's tile: "0" off, "1" outputs alone); NDF_CUDA_EXTREME ("0": a
 * box's minimum and maximum by the general kernel, not extreme_kernel.cu's passes);
 * NDF_CUDA_BOX ("0" off,
 * "2" the lines kernel along the last axis too); NDF_CUDA_F64 ("0": float64 in float32). */
#ifndef NDF_DEV_SWITCH_H
#define NDF_DEV_SWITCH_H
#include <stdlib.h>

static inline const char *ndf__dev_switch(const char *name) {
#ifdef NDF_DEV_SWITCHES
  return getenv(name);
#else
  (void)name;
  return NULL;
#endif
}
#endif
