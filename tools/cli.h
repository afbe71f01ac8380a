/* cli.h - pieces shared by the ndfilt command-line tool's files. */
#ifndef NDF_CLI_H
#define NDF_CLI_H

#include "ndf.h"

/* Exit codes, documented in `ndfilt --help`. */
enum { NDF_EXIT_OK = 0, NDF_EXIT_FAIL = 1, NDF_EXIT_USAGE = 2, NDF_EXIT_IO = 3 };

int ndf_cli_demo(ndf_context *ctx, int argc, char **argv);
int ndf_cli_bench(ndf_context *ctx, int argc, char **argv);

/* A filter bank applied one kernel at a time (ndfilt.c): outs[f] = in convolved (convolve 0:
 * correlated) with kernel f of the nf stacked in w, each C-contiguous of shape wshape, then
 * synchronised. *solver (unless NULL) gets the first kernel's solver. */
ndf_status ndf_cli_run_bank(ndf_context *ctx, const ndf_array *in, int nf, ndf_array *outs,
                            const double *w, const int64_t *wshape, const ndf_correlate_opts *o,
                            int convolve, const char **solver);

#endif
