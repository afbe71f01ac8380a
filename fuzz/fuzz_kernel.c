/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_kernel.c - libFuzzer harness for the CLI's .npy kernel reader (tools/kernels.c): the
 * input bytes become a file, which ndf_cli_kernel_read must read or refuse with a message
 * naming it; it must never crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/image.h"
#include "kernels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[256];
  if (!path[0]) {
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/ndf_fuzz_kernel_%d.npy", dir ? dir : "/tmp", (int)getpid());
    ndf_io_set_read_limit((int64_t)64 << 20); /* a kernel past 64 MiB is refused, not read */
  }
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  ndf_cli_kernel k;
  char err[512] = "";
  ndf_status st = ndf_cli_kernel_read(path, &k, err, sizeof err);
  if (st == NDF_OK) {
    const int64_t n = ndf_cli_kernel_size(&k);
    if (n < 1 || k.nf != 1) abort();
    static volatile double sum;
    for (int64_t i = 0; i < n; i++)
      sum += k.w[i]; /* a short read shows up under ASan */
    ndf_cli_kernel_free(&k);
  } else if (!strstr(err, path)) {
    fprintf(stderr, "error message does not name the file: %s\n", err);
    abort();
  }
  unlink(path);
  return 0;
}
