/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_nifti.c - libFuzzer harness for the NIfTI reader: input that starts as gzip data does
 * (1f 8b) is read as a .nii.gz, through zlib, the rest as a .nii. */
#include "fuzz_common.h"

/* ndf_fuzz_read for a .nii.gz (its file name is fixed by the first call, so this one keeps
 * a name of its own). */
static void read_gz(const uint8_t *data, size_t size) {
  static char path[256];
  if (!path[0]) {
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/ndf_fuzz_%d.nii.gz", dir ? dir : "/tmp", (int)getpid());
  }
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  ndf_image img;
  char err[512] = "";
  if (ndf_image_read(path, NULL, &img, err, sizeof err) == NDF_OK) {
    size_t n = (size_t)ndf_array_size(&img.a) * ndf_dtype_size(img.a.dtype);
    static volatile unsigned char sum;
    for (size_t i = 0; i < n; i++)
      sum ^= ((const unsigned char *)img.a.data)[i];
    (void)sum;
    ndf_image_free(&img);
  } else if (!strstr(err, path)) {
    fprintf(stderr, "error message does not name the file: %s\n", err);
    abort();
  }
  unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    read_gz(data, size);
    return 0;
  }
  return ndf_fuzz_read(data, size, ".nii");
}
