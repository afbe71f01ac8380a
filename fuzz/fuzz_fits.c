/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_fits.c - libFuzzer harness for the FITS reader (cfitsio; gzipped and tile-compressed
 * inputs included, as cfitsio detects them by their bytes). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return ndf_fuzz_read(data, size, ".fits");
}
