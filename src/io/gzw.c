/* SPDX-License-Identifier: BSD-3-Clause */
/* gzw.c - gzip output in independent members, compressed in parallel (see gzw.h). */
#include "gzw.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef NDF_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

/* A member's input: large enough that the members' headers and the lost matches across their
 * boundaries cost nothing measurable, small enough that a 2-core machine starts both cores
 * on a volume of a few megabytes. */
enum { CHUNK = 1 << 20 };

struct ndf_gzw {
  FILE *f;
  int level, threads, failed, err;
  unsigned char *in;   /* threads chunks of input */
  size_t fill;         /* bytes of input held */
  unsigned char **out; /* a compressed member per chunk */
  size_t *outlen, outcap;
};

/* The most a chunk of n bytes compresses to, as a whole gzip member. */
static size_t bound(size_t n) {
#ifdef NDF_HAVE_LIBDEFLATE
  return libdeflate_gzip_compress_bound(NULL, n);
#else
  return compressBound((uLong)n) + 32;
#endif
}

/* One chunk into one gzip member: its length, or 0 on failure. */
static size_t member(const unsigned char *in, size_t n, unsigned char *out, size_t cap, int level) {
#ifdef NDF_HAVE_LIBDEFLATE
  struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
  if (!c) return 0;
  size_t k = libdeflate_gzip_compress(c, in, n, out, cap);
  libdeflate_free_compressor(c);
  return k;
#else
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  int r = deflate(&z, Z_FINISH);
  size_t k = r == Z_STREAM_END ? cap - z.avail_out : 0;
  deflateEnd(&z);
  return k;
#endif
}

ndf_gzw *ndf_gzw_open(FILE *f, int level, int threads) {
  ndf_gzw *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->f = f;
  g->level = level < 1 ? 1 : level > 9 ? 9 : level;
  g->threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
  g->outcap = bound(CHUNK);
  g->in = malloc((size_t)g->threads * CHUNK);
  g->out = calloc((size_t)g->threads, sizeof *g->out);
  g->outlen = calloc((size_t)g->threads, sizeof *g->outlen);
  int ok = g->in && g->out && g->outlen;
  for (int t = 0; ok && t < g->threads; t++)
    ok = (g->out[t] = malloc(g->outcap)) != NULL;
  if (!ok) {
    g->failed = 1;
    ndf_gzw_close(g);
    return NULL;
  }
  return g;
}

/* Compresses the held input (its chunks in parallel) and writes the members in order. */
static int flush(ndf_gzw *g) {
  if (!g->fill || g->failed) return g->failed ? -1 : 0;
  const int nchunks = (int)((g->fill + CHUNK - 1) / CHUNK);
  int bad = 0;
#pragma omp parallel for num_threads(nchunks < g->threads ? nchunks : g->threads)                  \
    schedule(static, 1) reduction(|                                                                \
                                  : bad)
  for (int t = 0; t < nchunks; t++) {
    const size_t off = (size_t)t * CHUNK, n = g->fill - off < CHUNK ? g->fill - off : CHUNK;
    g->outlen[t] = member(g->in + off, n, g->out[t], g->outcap, g->level);
    bad |= g->outlen[t] == 0;
  }
  for (int t = 0; !bad && t < nchunks; t++)
    if (fwrite(g->out[t], 1, g->outlen[t], g->f) != g->outlen[t]) {
      g->err = errno;
      bad = 1;
    }
  if (bad && !g->err) g->err = ENOMEM;
  g->fill = 0;
  g->failed |= bad;
  return bad ? -1 : 0;
}

int ndf_gzw_write(ndf_gzw *g, const void *buf, size_t n) {
  const unsigned char *p = buf;
  const size_t cap = (size_t)g->threads * CHUNK;
  while (n && !g->failed) {
    const size_t k = cap - g->fill < n ? cap - g->fill : n;
    memcpy(g->in + g->fill, p, k);
    g->fill += k;
    p += k;
    n -= k;
    if (g->fill == cap && flush(g)) break;
  }
  if (g->failed) errno = g->err ? g->err : EIO;
  return g->failed ? -1 : 0;
}

int ndf_gzw_close(ndf_gzw *g) {
  if (!g) return -1;
  int r = flush(g);
  const int e = g->err;
  for (int t = 0; g->out && t < g->threads; t++)
    free(g->out[t]);
  free(g->out);
  free(g->outlen);
  free(g->in);
  free(g);
  if (r) errno = e ? e : EIO;
  return r;
}
