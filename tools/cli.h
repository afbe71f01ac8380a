/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.h - pieces shared by the ndfilt command-line tool's files. */
#ifndef NDF_CLI_H
#define NDF_CLI_H

#include "ndf.h"

/* Exit codes, documented in `ndfilt --help`. */
enum { NDF_EXIT_OK = 0, NDF_EXIT_FAIL = 1, NDF_EXIT_USAGE = 2, NDF_EXIT_IO = 3 };

int ndf_cli_demo(ndf_context *ctx, int argc, char **argv);
int ndf_cli_bench(ndf_context *ctx, int argc, char **argv);

#endif
