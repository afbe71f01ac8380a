/* SPDX-License-Identifier: BSD-3-Clause */
/* io_convert.c - reads an image in any format and writes it in any other (or the same),
 * metadata included, through src/io; the tests' bridge to nibabel, astropy and tifffile.
 *
 *   io_convert IN OUT            copy IN to OUT (formats from the names)
 *   io_convert --info IN         print shape, dtype, format, channel axis, spacing
 *
 * Exit 0 on success; 3 with the reader's or writer's message on stderr otherwise. */
#include <stdio.h>
#include <string.h>

#include "io/image.h"

int main(int argc, char **argv) {
  char err[1024];
  ndf_image img;
  if (argc == 3 && !strcmp(argv[1], "--info")) {
    if (ndf_image_read(argv[2], NULL, &img, err, sizeof err) != NDF_OK) {
      fprintf(stderr, "%s\n", err);
      return 3;
    }
    printf("format %s\ndtype %s\nshape", ndf_format_name(img.format), ndf_dtype_name(img.a.dtype));
    for (int d = 0; d < img.a.ndim; d++)
      printf(" %lld", (long long)img.a.shape[d]);
    printf("\nchannel_axis %d\nspacing", img.channel_axis);
    for (int d = 0; d < img.a.ndim; d++)
      printf(" %.9g", img.spacing[d]);
    printf("\n");
    ndf_image_free(&img);
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: io_convert IN OUT | io_convert --info IN\n");
    return 2;
  }
  if (ndf_image_read(argv[1], NULL, &img, err, sizeof err) != NDF_OK) {
    fprintf(stderr, "%s\n", err);
    return 3;
  }
  ndf_status st = ndf_image_write(argv[2], &img, err, sizeof err);
  ndf_image_free(&img);
  if (st != NDF_OK) {
    fprintf(stderr, "%s\n", err);
    return 3;
  }
  return 0;
}
