/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_common.h - a reader's libFuzzer harness: the input bytes become a file with the
 * format's extension (the libraries read by name), which ndf_image_read must either read
 * or refuse with a message naming it; it must never crash, leak or read out of bounds. */
#ifndef NDF_FUZZ_COMMON_H
#define NDF_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/image.h"

static int ndf_fuzz_read(const uint8_t *data, size_t size, const char *ext) {
  static char path[256];
  if (!path[0]) {
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/ndf_fuzz_%d%s", dir ? dir : "/tmp", (int)getpid(), ext);
    /* what a file may make a reader allocate stays under the fuzzer's memory limit */
    ndf_io_set_read_limit((int64_t)256 << 20);
  }
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  ndf_image img;
  char err[512] = "";
  ndf_status st = ndf_image_read(path, NULL, &img, err, sizeof err);
  if (st == NDF_OK) {
    /* touch every sample: a short read would show up under ASan */
    size_t n = (size_t)ndf_array_size(&img.a) * ndf_dtype_size(img.a.dtype);
    static volatile unsigned char sum;
    for (size_t i = 0; i < n; i++)
      sum ^= ((const unsigned char *)img.a.data)[i];
    (void)sum; /* read back: clang's -Wunused-but-set-variable */
    ndf_image_free(&img);
  } else if (!strstr(err, path)) {
    fprintf(stderr, "error message does not name the file: %s\n", err);
    abort();
  }
  unlink(path);
  return 0;
}

#endif
