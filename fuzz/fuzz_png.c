/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_png.c - libFuzzer harness for the PNG reader. A small input may declare a huge image:
 * the read limit refuses one over 256 MB, below libFuzzer's memory limit (-rss_limit_mb). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ndf_io_set_read_limit((int64_t)256 << 20);
  return ndf_fuzz_read(data, size, ".png");
}
