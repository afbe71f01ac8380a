/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_npy.c - libFuzzer harness for the .npy reader. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return ndf_fuzz_read(data, size, ".npy");
}
