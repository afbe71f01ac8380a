/* fuzz_png.c - libFuzzer harness for the PNG reader. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return ndf_fuzz_read(data, size, ".png");
}
