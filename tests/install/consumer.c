/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer.c - a program built against an installed ndfilt (tests/install_check.sh): the
 * version, and a Gaussian of an impulse, which sums to one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ndf.h>

int main(void) {
  float in[9 * 9] = {0}, out[9 * 9];
  in[4 * 9 + 4] = 1;
  const int64_t shape[2] = {9, 9};
  ndf_array a = ndf_array_contiguous(NDF_F32, 2, shape, in);
  ndf_array b = ndf_array_contiguous(NDF_F32, 2, shape, out);
  ndf_context_opts co = {sizeof co};
  co.device = "cpu";
  ndf_context *ctx;
  ndf_status st = ndf_context_create(&ctx, &co);
  if (st != NDF_OK) return fprintf(stderr, "context: %s\n", ndf_status_str(st)), 1;
  ndf_gaussian_opts g = {sizeof g};
  g.sigma[0] = g.sigma[1] = 1.0;
  st = ndf_gaussian(ctx, &a, &b, &g);
  double sum = 0;
  for (int i = 0; i < 81; i++)
    sum += out[i];
  ndf_context_destroy(ctx);
  if (st != NDF_OK || fabs(sum - 1) > 1e-5 || !(out[40] > out[41]))
    return fprintf(stderr, "gaussian: %s, sum %g\n", ndf_status_str(st), sum), 1;
  char header[32]; /* the installed header and library agree */
  snprintf(header, sizeof header, "%d.%d.%d", NDF_VERSION_MAJOR, NDF_VERSION_MINOR,
           NDF_VERSION_PATCH);
  printf("consumer: ndfilt %s (header %s), gaussian ok\n", ndf_version_string(), header);
  return strcmp(ndf_version_string(), header) != 0;
}
