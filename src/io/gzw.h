/* SPDX-License-Identifier: BSD-3-Clause */
/* gzw.h - writing gzip files quickly: the data cut into chunks, each compressed on its own
 * thread into a gzip member of its own (RFC 1952 allows any number, and zlib, Python's gzip,
 * nibabel and nifticlib read them all as one stream). libdeflate compresses where the build
 * has it, else zlib. */
#ifndef NDF_IO_GZW_H
#define NDF_IO_GZW_H

#include <stddef.h>
#include <stdio.h>

typedef struct ndf_gzw ndf_gzw;

/* A writer onto f (open for writing; the caller closes it after ndf_gzw_close) at compression
 * level `level` (1 fastest .. 9 smallest), compressing up to `threads` chunks at once.
 * NULL when out of memory. */
ndf_gzw *ndf_gzw_open(FILE *f, int level, int threads);
/* Appends n bytes: 0, or -1 when a write failed (errno says why). */
int ndf_gzw_write(ndf_gzw *g, const void *buf, size_t n);
/* Compresses and writes what is left and frees the writer: 0, or -1 when a write failed, this
 * one or an earlier one (errno says why). */
int ndf_gzw_close(ndf_gzw *g);

#endif
