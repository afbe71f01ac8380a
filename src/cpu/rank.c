/* SPDX-License-Identifier: BSD-3-Clause */
/* rank.c - cpu_rank: rank filters (minimum, maximum, median, any rank) over a footprint.
 *
 * The input is first read into a float64 copy, a uint8 one into bytes, and for a selection a
 * float32, uint16 or int16 one into float32 (each dtype is exact in its copy, and the result is
 * one of the samples, so the filter is exact in any dtype).
 * A box's minimum or maximum is separable, one pass per filtered axis. Across lines, by van
 * Herk / Gil-Werman: the line (extended by the mode) split into blocks of the box's length,
 * running extrema kept from each block's start and from its end, out[i] = op(from_end[i],
 * from_start[i + k - 1]), three comparisons an element whatever k, over blocks of columns side
 * by side. Along the contiguous axis, by doubling spans: log2(k) passes over the extended line,
 * each a vector loop. A uint8 box over the last two axes, uint8 in and out, goes in one pass
 * through a ring of rows (fused_rows_u8). Other ranks and footprints gather the footprint's samples
 * for each output (by precomputed offsets inside the array, through the modes near its edges) and
 * select the rank: up to 128 samples by a selection network (Batcher's odd-even merge sort pruned
 * to what the rank's position depends on) run on 32 outputs side by side where their windows lie
 * inside the array, else by quickselect; any rank of a uint8, uint16 or int16 footprint past 128
 * samples by a histogram sliding along each row (Huang's; two levels of bins for 16 bits; a step
 * takes out the samples that leave the footprint and adds those that enter it). A uint8
 * median of a 3x3 box over the last two axes goes by columns: each column of three sorted once for
 * the three windows that share it, and the median of nine is the median of the largest column
 * minimum, the median of the column medians and the smallest column maximum. */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"
#include "../core/select.h"

/* Byte loops the compiler turns into vector minima and maxima: on x86-64 also in AVX2, chosen
 * when the CPU has it. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define NDF__AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef NDF__AVX2_CLONE
#define NDF__AVX2_CLONE
#endif

enum { QB = 512 }; /* bytes of a row of columns a task in a separable pass, at most */

enum { NB = 32, NET_MAX = 128 }; /* outputs a network block; samples a network takes */

/* A sample of the footprint for the sliding histogram: its line along the last axis (an index
 * into the footprint's lines that hold samples) and its position a3 on it. */
typedef struct {
  int32_t line, a3;
} hentry;

typedef struct {
  double *x;    /* the input in float64, C order (NULL where x8, x32 or x16 holds it) */
  float *x32;   /* a float32, uint16 or int16 input for the selection, in float32 (exact there):
                 * a network's compare-exchange on 32 lanes is half the vector registers */
  int64_t *off; /* the footprint's offsets in x, for outputs whose footprint lies inside */
  int64_t (*at)[NDF_MAX_DIMS]; /* the footprint's offsets per axis (from the window's start) */
  int sep;             /* a box's minimum (-1) or maximum (+1) by separable passes; 0: selection */
  int (*net)[2];       /* selection of up to NET_MAX samples: compare-exchanges, or NULL */
  uint8_t *x8;         /* a uint8 input as it is (the byte paths: networks, columns, histogram, or
                        * separable passes), else NULL */
  uint16_t *x16;       /* a uint16 or int16 input's order-preserving keys (the 16-bit histogram) */
  int med9;            /* a uint8 median of a 3x3 box over the last two axes: by columns */
  int hist;            /* any rank of an 8- or 16-bit integer footprint past NET_MAX samples: a
                        * histogram sliding along rows (x8 or x16) */
  int64_t (*hline)[3]; /* the histogram's lines: (a0, a1, a2) of those that hold samples */
  hentry *hall, *hout, *hin; /* its samples: all (r->n), those leaving and those entering at a
                              * step (nstep each), each list in increasing a3 */
  int64_t nhline, nstep;
  int nnet;
  pthread_mutex_t lock; /* x serves one call at a time */
} state;

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
}

/* Whether the footprint is the whole box. */
static int box(const ndf__rank *r) { return r->n == r->k[0] * r->k[1] * r->k[2] * r->k[3]; }

static int separable(const ndf__rank *r) {
  return box(r) ? (r->rank == 0 ? -1 : r->rank == r->n - 1 ? 1 : 0) : 0;
}

/* Whether any rank of pb's footprint goes by a histogram: past a network's samples, on 8- or
 * 16-bit integers. */
static int histogram(const ndf__problem *pb) {
  const ndf__rank *r = pb->params;
  const ndf_dtype t = pb->in.dtype;
  return (t == NDF_U8 || t == NDF_U16 || t == NDF_I16) && r->n > NET_MAX;
}

/* Footprint sample j (C order over the box k), or 0 outside the box along the last axis. */
static int fp_at(const ndf__rank *r, int64_t line, int64_t a3) {
  return a3 >= 0 && a3 < r->k[3] && r->fp[line * r->k[3] + a3];
}

/* The samples that leave a window (or enter it) as it moves one step along the last axis: those
 * of the footprint with no neighbour before them on their line (or after). A box's: 2 k0 k1 k2. */
static int64_t histogram_edges(const ndf__rank *r) {
  int64_t e = 0;
  for (int64_t l = 0; l < r->k[0] * r->k[1] * r->k[2]; l++)
    for (int64_t a3 = 0; a3 < r->k[3]; a3++)
      e += fp_at(r, l, a3) * (!fp_at(r, l, a3 - 1) + !fp_at(r, l, a3 + 1));
  return e;
}

/* Separable: a read, three comparisons and a write an element and filtered axis (~4 ns a
 * core); selection: a gather and about two comparisons per footprint sample (~3 ns); a
 * histogram: the samples leaving and entering per output (~2 ns each) and the rank's walk over the
 * bins (on random samples of every value, ~60 ns for 8 bits and ~500 for 16 on a core of the
 * development machine). */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__rank *r = pb->params;
  const double n = (double)ndf_array_size(&pb->in);
  if (separable(r)) {
    int axes = 0;
    for (int d = 0; d < NDF_MAX_DIMS; d++)
      axes += r->k[d] > 1;
    return n * (2 + 4.0 * axes) * 1e-9 / ctx->threads;
  }
  if (histogram(pb))
    return n * (2 + 2.0 * (double)histogram_edges(r) + (pb->in.dtype == NDF_U8 ? 60 : 500)) * 1e-9 /
           ctx->threads;
  return n * (2 + 3.0 * (double)r->n) * 1e-9 / ctx->threads;
}

/* ---------------------------------------------------------------- separable passes */

/* The passes, written once for float64 samples (_f64) and uint8 ones (_u8): a box's minimum or
 * maximum is one of its samples, so either is exact. */
#define NDF__SEP_PASSES(T, SFX)                                                                    \
  static inline T pick##SFX(T a, T b, int sign) {                                                  \
    return sign < 0 ? (b < a ? b : a) : (b > a ? b : a);                                           \
  }                                                                                                \
                                                                                                   \
  /* Row j of the extended line (input row j - left, the mode's row for it, or cval's) into        \
   * dst, then folded with row `with` (the running extreme next to it; NULL: none). */             \
  static inline void ext_row##SFX(T *dst, const T *base, int64_t j, int64_t left, int64_t L,       \
                                  int64_t Q, int64_t qb, ndf_mode mode, T cval, const T *with,     \
                                  int sign) {                                                      \
    const int64_t i = ndf__map_index(j - left, L, mode);                                           \
    if (i < 0) {                                                                                   \
      for (int64_t c = 0; c < qb; c++)                                                             \
        dst[c] = cval;                                                                             \
    } else {                                                                                       \
      memcpy(dst, base + i * Q, (size_t)qb * sizeof *dst);                                         \
    }                                                                                              \
    if (with)                                                                                      \
      for (int64_t c = 0; c < qb; c++)                                                             \
        dst[c] = pick##SFX(with[c], dst[c], sign);                                                 \
  }                                                                                                \
                                                                                                   \
  /* One pass along an axis of length L seen as [P][L][Q], in place on x: columns q0..q0+qb of     \
   * plane p, by van Herk / Gil-Werman. buf holds 2 (L + k - 1) qb samples. */                     \
  static void pass_block##SFX(T *x, int64_t p, int64_t L, int64_t Q, int64_t q0, int64_t qb,       \
                              int64_t k, int64_t left, ndf_mode mode, T cval, int sign, T *buf) {  \
    const int64_t E = L + k - 1;                                                                   \
    T *g = buf, *h = buf + E * qb; /* from each block's start; from its end */                     \
    T *base = x + p * L * Q + q0;                                                                  \
    for (int64_t j = 0; j < E; j++) /* the extended line, rows of qb */                            \
      ext_row##SFX(g + j * qb, base, j, left, L, Q, qb, mode, cval,                                \
                   j % k ? g + (j - 1) * qb : NULL, sign);                                         \
    /* h from each block's end, read from the raw line again (g no longer holds it) */             \
    for (int64_t j = E - 1; j >= 0; j--)                                                           \
      ext_row##SFX(h + j * qb, base, j, left, L, Q, qb, mode, cval,                                \
                   j % k != k - 1 && j != E - 1 ? h + (j + 1) * qb : NULL, sign);                  \
    for (int64_t i = 0; i < L; i++) {                                                              \
      const T *a = h + i * qb, *b = g + (i + k - 1) * qb;                                          \
      T *o = base + i * Q;                                                                         \
      for (int64_t c = 0; c < qb; c++)                                                             \
        o[c] = pick##SFX(a[c], b[c], sign);                                                        \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  /* One line along the contiguous axis (L samples at x) into y (x itself, or another line): the   \
   * line extended by the mode into e (L + k - 1), then the extreme of spans doubling from 1 to s  \
   * (the largest power of two up to k) between e and f, each step a vector loop; a window is two  \
   * spans of s, overlapping where k is no power of two. */                                        \
  NDF__AVX2_CLONE                                                                                  \
  static void line##SFX(const T *x, T *y, int64_t L, int64_t k, int64_t left, ndf_mode mode,       \
                        T cval, int sign, T *restrict e, T *restrict f) {                          \
    const int64_t E = L + k - 1;                                                                   \
    memcpy(e + left, x, (size_t)L * sizeof *x); /* the line, then the mode's samples beside */     \
    for (int64_t j = 0; j < E; j++) {                                                              \
      if (j == left) j += L;                                                                       \
      if (j >= E) break;                                                                           \
      const int64_t i = ndf__map_index(j - left, L, mode);                                         \
      e[j] = i < 0 ? cval : x[i];                                                                  \
    }                                                                                              \
    int64_t span = 1, V = E; /* e's valid samples */                                               \
    for (; 2 * span <= k; V -= span, span *= 2) {                                                  \
      for (int64_t j = 0; j < V - span; j++)                                                       \
        f[j] = pick##SFX(e[j], e[j + span], sign);                                                 \
      T *t = e;                                                                                    \
      e = f;                                                                                       \
      f = t;                                                                                       \
    }                                                                                              \
    for (int64_t i = 0; i < L; i++)                                                                \
      y[i] = pick##SFX(e[i], e[i + k - span], sign);                                               \
  }                                                                                                \
                                                                                                   \
  static ndf_status separable_passes##SFX(const ndf_plan *p, T *x, int sign,                       \
                                          const int64_t *shape) {                                  \
    const ndf__rank *r = p->pb.params;                                                             \
    const int T_ = p->ctx->threads;                                                                \
    const T cval = (T)r->cval;                                                                     \
    int fail = 0;                                                                                  \
    for (int a = 0; a < NDF_MAX_DIMS; a++) {                                                       \
      const int64_t k = r->k[a], L = shape[a];                                                     \
      if (k == 1) continue;                                                                        \
      int64_t P, Q;                                                                                \
      ndf__split_axis(shape, NDF_MAX_DIMS, a, &P, &Q);                                             \
      /* columns a task: up to QB bytes of them, fewer for long lines (the buffers within ~2 MiB:  \
       * rows of 64 bytes made a uint8 maximum 7x7 of 4096^2 5.1 ms, of 256 bytes 4.1-4.3); the    \
       * contiguous axis a line a task */                                                          \
      const int64_t qmax = QB / (int64_t)sizeof(T);                                                \
      int64_t qb = ((int64_t)1 << 21) / (int64_t)(2 * sizeof(T) * (size_t)(L + k));                \
      qb = qb < 1 ? 1 : qb > qmax ? qmax : qb;                                                     \
      if (qb > Q) qb = Q;                                                                          \
      const int64_t nqb = (Q + qb - 1) / qb, tasks = P * nqb;                                      \
      _Pragma("omp parallel num_threads(T_) reduction(| : fail)") {                                \
        T *buf = malloc((size_t)(2 * (L + k - 1) * qb) * sizeof *buf);                             \
        if (!buf) fail = 1;                                                                        \
        _Pragma("omp for schedule(static)") for (int64_t t = 0; t < tasks; t++) {                  \
          if (!buf) continue;                                                                      \
          const int64_t pp = t / nqb, q0 = t % nqb * qb, w = q0 + qb <= Q ? qb : Q - q0;           \
          if (Q == 1)                                                                              \
            line##SFX(x + pp * L, x + pp * L, L, k, r->left[a], r->mode[a], cval, sign, buf,       \
                      buf + (L + k - 1));                                                          \
          else                                                                                     \
            pass_block##SFX(x, pp, L, Q, q0, w, k, r->left[a], r->mode[a], cval, sign, buf);       \
        }                                                                                          \
        free(buf);                                                                                 \
      }                                                                                            \
      if (fail) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");              \
    }                                                                                              \
    return NDF_OK;                                                                                 \
  }
NDF__SEP_PASSES(double, _f64)
NDF__SEP_PASSES(uint8_t, _u8)

static inline uint8_t min8(uint8_t a, uint8_t b) { return b < a ? b : a; }
static inline uint8_t max8(uint8_t a, uint8_t b) { return b < a ? a : b; }

/* A uint8 box over the last two axes only, at most FUSED_KY rows tall, from a C-contiguous
 * uint8 input straight into a C-contiguous uint8 output, as OpenCV's dilate and erode go: each
 * row's extreme along the contiguous axis (doubling spans) into a ring of the ky rows an output
 * row needs, the output row their extreme (ky - 1 vector loops), a band of rows a task. No copy
 * in or out, and no pass over the whole array per axis (figures in scipy-dropin.md). */
enum { FUSED_KY = 16, FUSED_BAND = 128 };

static int fused_rows(const ndf__rank *r, const ndf_array *in, const ndf_array *out) {
  int same = 0;
  return in->dtype == NDF_U8 && out->dtype == NDF_U8 && ndf__is_contiguous(in) &&
         ndf__is_contiguous(out) && !ndf__overlap(in, out, &same) && r->k[0] == 1 && r->k[1] == 1 &&
         r->k[2] <= FUSED_KY && r->k[2] * r->k[3] > 1;
}

/* o[c] = the extreme of rows[0..n)[c], c < X: 64 columns at a time, kept in registers while
 * the rows go by. */
NDF__AVX2_CLONE
static void column_extreme(const uint8_t *const *rows, int64_t n, int64_t X, int sign, uint8_t *o) {
  enum { W = 64 };
  int64_t c0 = 0;
  for (; c0 + W <= X; c0 += W) {
    uint8_t acc[W];
    memcpy(acc, rows[0] + c0, W);
    for (int64_t m = 1; m < n; m++) {
      const uint8_t *b = rows[m] + c0;
      if (sign > 0)
        for (int c = 0; c < W; c++)
          acc[c] = max8(acc[c], b[c]);
      else
        for (int c = 0; c < W; c++)
          acc[c] = min8(acc[c], b[c]);
    }
    memcpy(o + c0, acc, W);
  }
  for (int64_t c = c0; c < X; c++) {
    uint8_t v = rows[0][c];
    for (int64_t m = 1; m < n; m++)
      v = pick_u8(v, rows[m][c], sign);
    o[c] = v;
  }
}

static ndf_status fused_rows_u8(const ndf_plan *p, const uint8_t *x, uint8_t *y, int sign,
                                const int64_t *shape) {
  const ndf__rank *r = p->pb.params;
  const int64_t Y = shape[2], X = shape[3], ky = r->k[2], kx = r->k[3], ly = r->left[2],
                lx = r->left[3], planes = shape[0] * shape[1];
  const ndf_mode my = r->mode[2], mx = r->mode[3];
  const uint8_t cval = (uint8_t)r->cval;
  const int64_t bands = (Y + FUSED_BAND - 1) / FUSED_BAND, tasks = planes * bands;
  int fail = 0;
#pragma omp parallel num_threads(p->ctx->threads) reduction(| : fail)
  {
    uint8_t *ring = malloc((size_t)(ky * X + 2 * (X + kx - 1)) + 1); /* + 1: never 0 bytes */
    if (!ring) fail = 1;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
      if (!ring) continue;
      const int64_t pl = t / bands, r0 = t % bands * FUSED_BAND,
                    r1 = r0 + FUSED_BAND < Y ? r0 + FUSED_BAND : Y;
      const uint8_t *src = x + pl * Y * X;
      uint8_t *dst = y + pl * Y * X, *e = ring + ky * X, *f = e + (X + kx - 1);
      /* row j of the extended column (input row j - ly through the mode) into slot j mod ky */
      for (int64_t j = r0; j < r1 + ky - 1; j++) {
        uint8_t *h = ring + j % ky * X;
        const int64_t i = ndf__map_index(j - ly, Y, my);
        if (i < 0)
          memset(h, cval, (size_t)X);
        else
          line_u8(src + i * X, h, X, kx, lx, mx, cval, sign, e, f);
        if (j < r0 + ky - 1) continue;
        const uint8_t *rows[FUSED_KY]; /* output row j - ky + 1: slots j - ky + 1 .. j */
        for (int64_t m = 0; m < ky; m++)
          rows[m] = ring + (j - ky + 1 + m) % ky * X;
        column_extreme(rows, ky, X, sign, dst + (j - ky + 1) * X);
      }
    }
    free(ring);
  }
  return fail ? ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory") : NDF_OK;
}

/* ---------------------------------------------------------------- selection */

NDF__SELECT_RANK(select_rank, double, static)

/* Batcher's odd-even merge sort network for n inputs (any n), pruned to the compare-exchanges
 * that the value of rank r depends on (walking back from r: a compare-exchange stays if it
 * writes a position that r, or a later one kept, reads); their count, in order, in net (room
 * for every compare-exchange of the whole network). */
static int prune_network(int n, int r, int (*net)[2]) {
  int m = 0;
  for (int p = 1; p < n; p += p)
    for (int k = p; k > 0; k /= 2)
      for (int j = k % p; j + k < n; j += k + k)
        for (int i = 0; i < k && i + j + k < n; i++)
          if ((i + j) / (p + p) == (i + j + k) / (p + p)) {
            net[m][0] = i + j;
            net[m][1] = i + j + k;
            m++;
          }
  unsigned char need[NET_MAX] = {0};
  need[r] = 1;
  int kept = m;
  for (int c = m - 1; c >= 0; c--) {
    if (need[net[c][0]] || need[net[c][1]]) {
      need[net[c][0]] = need[net[c][1]] = 1;
      kept--;
      net[kept][0] = net[c][0];
      net[kept][1] = net[c][1];
    }
  }
  memmove(net, net + kept, (size_t)(m - kept) * sizeof *net);
  return m - kept;
}

/* The network on NB lanes at once, after gathering v[j * NB + b], sample j of output b, from x
 * (the n footprint samples at off[] from start + b); in float64, float32, or bytes for a uint8
 * input (one vector register a compare-exchange). */
#define NDF__RUN_NETWORK(name, T)                                                                  \
  static void name(T *v, const T *x, int64_t start, const int64_t *off, int64_t n,                 \
                   const int(*net)[2], int m) {                                                    \
    for (int64_t j = 0; j < n; j++) /* sample j of the NB windows from x + start, side by side */  \
      memcpy(v + j * NB, x + start + off[j], NB * sizeof *v);                                      \
    for (int c = 0; c < m; c++) {                                                                  \
      T *a = v + net[c][0] * NB, *b = v + net[c][1] * NB;                                          \
      for (int l = 0; l < NB; l++) {                                                               \
        const T lo = b[l] < a[l] ? b[l] : a[l], hi = b[l] < a[l] ? a[l] : b[l];                    \
        a[l] = lo;                                                                                 \
        b[l] = hi;                                                                                 \
      }                                                                                            \
    }                                                                                              \
  }
NDF__RUN_NETWORK(run_network, double)
NDF__RUN_NETWORK(run_network_f32, float)
NDF__RUN_NETWORK(run_network_u8, uint8_t)

/* Sample i of the selection's copy of the input (x8, x32 or x). */
static inline double sample_at(const state *s, const uint8_t *x8, int64_t i) {
  return x8 ? (double)x8[i] : s->x32 ? (double)s->x32[i] : s->x[i];
}

static inline uint8_t med8(uint8_t a, uint8_t b, uint8_t c) {
  return max8(min8(a, b), min8(max8(a, b), c));
}

/* Each of the n columns of rows r0, r1, r2 sorted: into lo, md, hi (plain byte loops, cloned
 * for AVX2). */
NDF__AVX2_CLONE
static void sort_columns(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2, int64_t n,
                         uint8_t *restrict lo, uint8_t *restrict md, uint8_t *restrict hi) {
  for (int64_t c = 0; c < n; c++) {
    const uint8_t a = r0[c], b = r1[c], d = r2[c];
    lo[c] = min8(min8(a, b), d);
    md[c] = med8(a, b, d);
    hi[c] = max8(max8(a, b), d);
  }
}

/* o[x], x < n: the median of the nine samples in the sorted columns x .. x + 2. */
NDF__AVX2_CLONE
static void medians9(const uint8_t *lo, const uint8_t *md, const uint8_t *hi, int64_t n,
                     uint8_t *restrict o) {
  for (int64_t x = 0; x < n; x++)
    o[x] = med8(max8(max8(lo[x], lo[x + 1]), lo[x + 2]), med8(md[x], md[x + 1], md[x + 2]),
                min8(min8(hi[x], hi[x + 1]), hi[x + 2]));
}

/* One output row (its index along axes 0..2 in idx) of a uint8 median of a 3x3 box over the
 * last two axes: its three input rows (the mode's, or cval's row), their columns sorted into
 * buf (three arrays of W + 4, column c at c + 2, the two columns past either end the mode's),
 * the medians into o. */
static void median9_line(const ndf__rank *r, const uint8_t *x8, const int64_t *shape,
                         const int64_t *cstride, const int64_t *idx, const uint8_t *cvrow,
                         uint8_t *buf, uint8_t *o) {
  const int64_t W = shape[3], E = W + 4;
  const uint8_t *row[3];
  for (int t = 0; t < 3; t++) {
    const int64_t i = ndf__map_index(idx[2] - r->left[2] + t, shape[2], r->mode[2]);
    row[t] = i < 0 ? cvrow : x8 + idx[0] * cstride[0] + idx[1] * cstride[1] + i * cstride[2];
  }
  uint8_t *lo = buf, *md = buf + E, *hi = buf + 2 * E;
  sort_columns(row[0], row[1], row[2], W, lo + 2, md + 2, hi + 2);
  const int64_t past[4] = {-2, -1, W, W + 1};
  for (int e = 0; e < 4; e++) {
    const int64_t c = past[e] + 2, i = ndf__map_index(past[e], W, r->mode[3]);
    lo[c] = i < 0 ? cvrow[0] : lo[i + 2];
    md[c] = i < 0 ? cvrow[0] : md[i + 2];
    hi[c] = i < 0 ? cvrow[0] : hi[i + 2];
  }
  const int64_t s = 2 - r->left[3];
  medians9(lo + s, md + s, hi + s, W, o);
}

/* One output row (idx along axes 0..2) of rank r->rank of an integer footprint of more samples
 * than a network takes (Huang's sliding histogram), written once for 8-bit keys (_u8: 256 bins)
 * and 16-bit ones (_u16: 65536 bins, and 256 coarse bins counting 256 of them each): the
 * window's samples counted by key, the rank's key m kept with the count of samples below it;
 * moving one output along the row takes the samples that leave the footprint out (s->hout; a
 * box's first column) and those that enter it in (s->hin; the next column), then m moves to
 * where the count below it reaches the rank, a whole coarse bin a step where it may. lines: room
 * for s->nhline offsets; h and hc: the bins and coarse bins (hc unused for 8-bit keys), zero,
 * and left zero. Writes the row's W keys into o. */
#define NDF__HISTOGRAM_ROW(T, SFX, NBINS)                                                          \
  /* samples e[0..ne) of the window whose position 0 on the last axis is x0, counted by delta */   \
  static inline void count##SFX(const T *xk, T cv, const int64_t *lines, const hentry *e,          \
                                int64_t ne, int64_t x0, int64_t W, ndf_mode mode, int delta,       \
                                int32_t *h, int32_t *hc, int64_t m, int64_t *below) {              \
    int64_t a3 = -1, i3 = -1;                                                                      \
    for (int64_t j = 0; j < ne; j++) {                                                             \
      if (e[j].a3 != a3) i3 = ndf__map_index(x0 + (a3 = e[j].a3), W, mode);                        \
      const int64_t l = lines[e[j].line];                                                          \
      const T v = i3 < 0 || l < 0 ? cv : xk[l + i3];                                               \
      h[v] += delta;                                                                               \
      if (NBINS > 256) hc[v >> 8] += delta;                                                        \
      *below += v < m ? delta : 0;                                                                 \
    }                                                                                              \
  }                                                                                                \
  static void histogram_row##SFX(const ndf__rank *r, const state *s, const T *xk, T cv,            \
                                 const int64_t *shape, const int64_t *cstride, const int64_t *idx, \
                                 int64_t *lines, int32_t *h, int32_t *hc, T *o) {                  \
    const int64_t W = shape[3], rank = r->rank, left = r->left[3];                                 \
    const ndf_mode mode = r->mode[3];                                                              \
    for (int64_t l = 0; l < s->nhline; l++) { /* the lines' offsets, -1 for cval's */              \
      int64_t i[3], o3 = 0;                                                                        \
      for (int d = 0; d < 3; d++) {                                                                \
        i[d] = ndf__map_index(idx[d] - r->left[d] + s->hline[l][d], shape[d], r->mode[d]);         \
        o3 += i[d] * cstride[d];                                                                   \
      }                                                                                            \
      lines[l] = i[0] < 0 || i[1] < 0 || i[2] < 0 ? -1 : o3;                                       \
    }                                                                                              \
    int64_t m = 0, below = 0;                                                                      \
    count##SFX(xk, cv, lines, s->hall, r->n, -left, W, mode, 1, h, hc, m, &below);                 \
    for (int64_t x = 0; x < W; x++) {                                                              \
      if (x) {                                                                                     \
        count##SFX(xk, cv, lines, s->hout, s->nstep, x - 1 - left, W, mode, -1, h, hc, m, &below); \
        count##SFX(xk, cv, lines, s->hin, s->nstep, x - left, W, mode, 1, h, hc, m, &below);       \
      }                                                                                            \
      while (below > rank) {                                                                       \
        if (NBINS > 256 && (m & 255) == 0 && below - hc[(m >> 8) - 1] > rank)                      \
          below -= hc[(m >> 8) - 1], m -= 256;                                                     \
        else                                                                                       \
          below -= h[--m];                                                                         \
      }                                                                                            \
      while (below + h[m] <= rank) {                                                               \
        if (NBINS > 256 && (m & 255) == 0 && below + hc[m >> 8] <= rank)                           \
          below += hc[m >> 8], m += 256;                                                           \
        else                                                                                       \
          below += h[m++];                                                                         \
      }                                                                                            \
      o[x] = (T)m;                                                                                 \
    }                                                                                              \
    /* the last window out: the bins zero again */                                                 \
    count##SFX(xk, cv, lines, s->hall, r->n, W - 1 - left, W, mode, -1, h, hc, m, &below);         \
  }
NDF__HISTOGRAM_ROW(uint8_t, _u8, 256)
NDF__HISTOGRAM_ROW(uint16_t, _u16, 65536)
#undef NDF__HISTOGRAM_ROW

/* The order-preserving 16-bit key of a uint16 or int16 sample, and the sample of a key. */
static inline uint16_t key16(ndf_dtype t, double v) {
  return t == NDF_I16 ? (uint16_t)((uint16_t)(int16_t)v ^ 0x8000u) : (uint16_t)v;
}
static inline double of_key16(ndf_dtype t, uint16_t k) {
  return t == NDF_I16 ? (double)(int16_t)(uint16_t)(k ^ 0x8000u) : (double)k;
}

/* x8: a uint8 input's samples (C order), else NULL */
static ndf_status selection(const ndf_plan *p, const state *s, const uint8_t *x8,
                            const int64_t *shape, ndf_array *out) {
  const ndf__rank *r = p->pb.params;
  const int T = p->ctx->threads;
  const int64_t n = r->n, rows = shape[0] * shape[1] * shape[2], W = shape[3];
  int64_t cstride[NDF_MAX_DIMS];
  cstride[3] = 1;
  for (int d = 2; d >= 0; d--)
    cstride[d] = cstride[d + 1] * shape[d + 1];
  int fail = 0;
#pragma omp parallel num_threads(T) reduction(| : fail)
  {
    double *v = malloc((size_t)n * sizeof *v), *vb = NULL;
    float *vb32 = NULL;
    uint8_t *vb8 = NULL;
    if (s->net && !x8 && !s->x32 && !(vb = malloc((size_t)n * NB * sizeof *vb))) fail = 1;
    if (s->net && s->x32 && !(vb32 = malloc((size_t)n * NB * sizeof *vb32))) fail = 1;
    if (s->net && x8 && !(vb8 = malloc((size_t)n * NB))) fail = 1;
    /* median9_line's columns, its output row, a row of cval */
    uint8_t *cols = s->med9 ? malloc((size_t)(W + 4) * 3 + 2 * (size_t)W) : NULL;
    if (cols) memset(cols + (W + 4) * 3 + W, (uint8_t)r->cval, (size_t)W);
    /* histogram_row's line offsets, bins (zero) and output row */
    int64_t *lines = s->hist ? malloc((size_t)s->nhline * sizeof *lines) : NULL;
    const size_t nbins = s->x16 ? 65536 + 256 : 256;
    int32_t *bins = s->hist ? calloc(nbins, sizeof *bins) : NULL;
    uint16_t *hrow = s->hist ? malloc((size_t)W * sizeof *hrow) : NULL;
    if (!v || (s->med9 && !cols) || (s->hist && (!lines || !bins || !hrow))) fail = 1;
    ndf__walker w;
#pragma omp for schedule(dynamic, 16)
    for (int64_t row = 0; row < rows; row++) {
      if (!v) continue;
      int64_t idx[NDF_MAX_DIMS] = {row / (shape[1] * shape[2]), row / shape[2] % shape[1],
                                   row % shape[2], 0};
      int inner = 1; /* the window inside the array on axes 0..2 */
      for (int d = 0; d < 3; d++)
        inner &= idx[d] - r->left[d] >= 0 && idx[d] - r->left[d] + r->k[d] <= shape[d];
      ndf__walk_at(&w, out, row * W);
      if (cols) { /* the whole row by columns */
        const int bytes = out->dtype == NDF_U8 && out->strides[3] == 1;
        uint8_t *o = bytes ? (uint8_t *)out->data + w.off : cols + (W + 4) * 3;
        median9_line(r, x8, shape, cstride, idx, cols + (W + 4) * 3 + W, cols, o);
        for (int64_t x = 0; !bytes && x < W; x++, ndf__walk_next(&w, out))
          ndf__store(out->dtype, out->data, w.off, o[x]);
        continue;
      }
      if (lines && bins && hrow) { /* the whole row by a sliding histogram, its keys in hrow */
        const ndf_dtype t = p->pb.in.dtype;
        uint8_t *h8 = (uint8_t *)hrow;
        if (s->x16)
          histogram_row_u16(r, s, s->x16, key16(t, r->cval), shape, cstride, idx, lines, bins,
                            bins + 65536, hrow);
        else
          histogram_row_u8(r, s, x8, (uint8_t)r->cval, shape, cstride, idx, lines, bins, NULL, h8);
        for (int64_t x = 0; x < W; x++, ndf__walk_next(&w, out))
          ndf__store(out->dtype, out->data, w.off, s->x16 ? of_key16(t, hrow[x]) : h8[x]);
        continue;
      }
      for (int64_t x = 0; x < W; x++, ndf__walk_next(&w, out)) {
        idx[3] = x;
        double res;
        /* outputs x .. xe - 1 have their windows inside the row */
        const int64_t xe = W - r->k[3] + r->left[3] + 1;
        if ((vb || vb32 || vb8) && inner && x >= r->left[3] && xe - r->left[3] >= NB && x < xe) {
          /* NB outputs whose windows lie inside: their samples side by side, one network; the
           * row's last block starts early enough to be whole and keeps its new outputs only */
          const int64_t x0 = x + NB <= xe ? x : xe - NB, skip = x - x0;
          const int64_t start = (idx[0] - r->left[0]) * cstride[0] +
                                (idx[1] - r->left[1]) * cstride[1] +
                                (idx[2] - r->left[2]) * cstride[2] + (x0 - r->left[3]);
          const int(*net)[2] = (const int(*)[2])s->net;
          if (vb8)
            run_network_u8(vb8, x8, start, s->off, n, net, s->nnet);
          else if (vb32)
            run_network_f32(vb32, s->x32, start, s->off, n, net, s->nnet);
          else
            run_network(vb, s->x, start, s->off, n, net, s->nnet);
          if (vb8 && out->dtype == NDF_U8 && out->strides[3] == 1) { /* bytes to bytes */
            memcpy((uint8_t *)out->data + w.off, vb8 + r->rank * NB + skip, (size_t)(NB - skip));
            w.idx[3] += NB - 1 - skip; /* the last of them, in this row */
            w.off += NB - 1 - skip;
          } else {
            for (int64_t b = skip; b < NB; b++) {
              const double res_b = vb8    ? vb8[r->rank * NB + b]
                                   : vb32 ? vb32[r->rank * NB + b]
                                          : vb[r->rank * NB + b];
              ndf__store(out->dtype, out->data, w.off, res_b);
              if (b < NB - 1) ndf__walk_next(&w, out);
            }
          }
          x = x0 + NB - 1;
          continue;
        }
        if (inner && x - r->left[3] >= 0 && x - r->left[3] + r->k[3] <= W) {
          const int64_t start = (idx[0] - r->left[0]) * cstride[0] +
                                (idx[1] - r->left[1]) * cstride[1] +
                                (idx[2] - r->left[2]) * cstride[2] + (x - r->left[3]);
          for (int64_t j = 0; j < n; j++)
            v[j] = sample_at(s, x8, start + s->off[j]);
        } else {
          for (int64_t j = 0; j < n; j++) {
            int64_t at = 0, d;
            for (d = 0; d < NDF_MAX_DIMS; d++) {
              const int64_t i =
                  ndf__map_index(idx[d] + s->at[j][d] - r->left[d], shape[d], r->mode[d]);
              if (i < 0) break;
              at += i * cstride[d];
            }
            v[j] = d < NDF_MAX_DIMS ? r->cval : sample_at(s, x8, at);
          }
        }
        res = select_rank(v, n, r->rank);
        ndf__store(out->dtype, out->data, w.off, res);
      }
    }
    free(v);
    free(vb);
    free(vb32);
    free(vb8);
    free(cols);
    free(lines);
    free(bins);
    free(hrow);
  }
  return fail ? ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory") : NDF_OK;
}

/* ---------------------------------------------------------------- exec, plan */

/* a's shape and strides padded to four axes in front */
static ndf_array view4(const ndf_array *a) {
  ndf_array v = *a;
  const int pad = NDF_MAX_DIMS - a->ndim;
  v.ndim = NDF_MAX_DIMS;
  for (int d = 0; d < NDF_MAX_DIMS; d++) {
    v.shape[d] = d < pad ? 1 : a->shape[d - pad];
    v.strides[d] = d < pad ? 0 : a->strides[d - pad];
  }
  return v;
}

/* The n elements of a (C order) into x as float64 (in), or x into them in a's dtype; or, with
 * x8, a uint8 array's into x8 as they are (in), or x8 into a in its dtype. */
static void copy(const ndf_array *a, double *x, uint8_t *x8, int64_t n, int in, int threads) {
#pragma omp parallel num_threads(threads)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    if (lo < hi && x8 && a->dtype == NDF_U8 && ndf__is_contiguous(a)) {
      if (in)
        memcpy(x8 + lo, (const uint8_t *)a->data + lo, (size_t)(hi - lo));
      else
        memcpy((uint8_t *)a->data + lo, x8 + lo, (size_t)(hi - lo));
    } else if (lo < hi) {
      ndf__walker w;
      ndf__walk_at(&w, a, lo);
      for (int64_t i = lo; i < hi; i++, ndf__walk_next(&w, a)) {
        if (x8 && in)
          x8[i] = ((const uint8_t *)a->data)[w.off];
        else if (x8)
          ndf__store(a->dtype, a->data, w.off, x8[i]);
        else if (in)
          x[i] = ndf__load(a->dtype, a->data, w.off);
        else
          ndf__store(a->dtype, a->data, w.off, x[i]);
      }
    }
  }
}

/* The n elements of a (C order) into the selection's narrow copy: a 16-bit integer array's
 * keys into x16, or a float32, uint16 or int16 array's values into x32 (exact). */
static void copy_narrow(const ndf_array *a, uint16_t *x16, float *x32, int64_t n, int threads) {
#pragma omp parallel num_threads(threads)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    if (lo < hi && x32 && a->dtype == NDF_F32 && ndf__is_contiguous(a)) {
      memcpy(x32 + lo, (const float *)a->data + lo, (size_t)(hi - lo) * sizeof *x32);
    } else if (lo < hi) {
      ndf__walker w;
      ndf__walk_at(&w, a, lo);
      for (int64_t i = lo; i < hi; i++, ndf__walk_next(&w, a)) {
        const double v = ndf__load(a->dtype, a->data, w.off);
        if (x16)
          x16[i] = key16(a->dtype, v);
        else
          x32[i] = (float)v;
      }
    }
  }
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  state *s = p->state;
  const int T = p->ctx->threads;
  const ndf_array in4 = view4(in);
  ndf_array out4 = view4(out);
  const int64_t n = ndf_array_size(in);
  pthread_mutex_lock(&s->lock);
  ndf_status st;
  if (s->sep && fused_rows(p->pb.params, &in4, &out4)) {
    st = fused_rows_u8(p, in4.data, out4.data, s->sep, in4.shape);
  } else if (s->sep) { /* in bytes for a uint8 input, else in float64 */
    copy(&in4, s->x, s->x8, n, 1, T);
    st = s->x8 ? separable_passes_u8(p, s->x8, s->sep, in4.shape)
               : separable_passes_f64(p, s->x, s->sep, in4.shape);
    if (st == NDF_OK) copy(&out4, s->x, s->x8, n, 0, T);
  } else {
    /* a uint8 input as it is where it is C-contiguous and not written by this call, else into
     * x8; the selection reads only that */
    int same = 0;
    const int direct = s->x8 && ndf__is_contiguous(in) && !ndf__overlap(in, out, &same);
    const uint8_t *x8 = direct ? in->data : s->x8;
    if (s->x16 || s->x32)
      copy_narrow(&in4, s->x16, s->x32, n, T);
    else if (!direct)
      copy(&in4, s->x, s->x8, n, 1, T);
    st = selection(p, s, x8, in4.shape, &out4);
  }
  pthread_mutex_unlock(&s->lock);
  return st;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  free(s->x);
  free(s->x32);
  free(s->off);
  free(s->at);
  free(s->net);
  free(s->x8);
  free(s->x16);
  free(s->hline);
  free(s->hall);
  free(s->hout);
  free(s->hin);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

/* The histogram's lines and its lists of samples (all, leaving, entering), each in increasing
 * a3 (count_ then maps a position once for the samples that share it). */
static int by_a3(const void *a, const void *b) {
  const hentry *x = a, *y = b;
  return x->a3 != y->a3 ? (x->a3 > y->a3) - (x->a3 < y->a3)
                        : (x->line > y->line) - (x->line < y->line);
}
static ndf_status histogram_samples(const ndf__rank *r, state *s) {
  const int64_t nl = r->k[0] * r->k[1] * r->k[2], step = histogram_edges(r) / 2;
  s->hline = malloc((size_t)nl * sizeof *s->hline);
  s->hall = malloc((size_t)r->n * sizeof *s->hall);
  s->hout = malloc((size_t)step * sizeof *s->hout);
  s->hin = malloc((size_t)step * sizeof *s->hin);
  if (!s->hline || !s->hall || !s->hout || !s->hin) return NDF_ENOMEM;
  int64_t na = 0, no = 0, ni = 0; /* as many leave as enter: a run's first and last samples */
  for (int64_t l = 0; l < nl; l++) {
    int any = 0;
    for (int64_t a3 = 0; a3 < r->k[3]; a3++) {
      if (!fp_at(r, l, a3)) continue;
      const hentry e = {(int32_t)s->nhline, (int32_t)a3};
      s->hall[na++] = e;
      if (!fp_at(r, l, a3 - 1)) s->hout[no++] = e;
      if (!fp_at(r, l, a3 + 1)) s->hin[ni++] = e;
      any = 1;
    }
    if (!any) continue;
    s->hline[s->nhline][0] = l / (r->k[1] * r->k[2]);
    s->hline[s->nhline][1] = l / r->k[2] % r->k[1];
    s->hline[s->nhline++][2] = l % r->k[2];
  }
  s->nstep = step;
  qsort(s->hall, (size_t)r->n, sizeof *s->hall, by_a3);
  qsort(s->hout, (size_t)step, sizeof *s->hout, by_a3);
  qsort(s->hin, (size_t)step, sizeof *s->hin, by_a3);
  return NDF_OK;
}

static ndf_status make(ndf_plan *p) {
  const ndf__rank *r = p->pb.params;
  const ndf_array in4 = view4(&p->pb.in);
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->sep = separable(r);
  const int64_t n = ndf_array_size(&p->pb.in);
  if (s->sep && p->pb.in.dtype == NDF_U8) {
    s->x8 = malloc((size_t)(n > 0 ? n : 1));
    return s->x8 ? NDF_OK : ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  }
  if (s->sep) {
    s->x = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->x);
    return s->x ? NDF_OK : ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  }
  /* the footprint's samples: offsets per axis from the window's start, and in the float64
   * copy (C order over in's shape) */
  s->off = malloc((size_t)r->n * sizeof *s->off);
  s->at = malloc((size_t)r->n * sizeof *s->at);
  if (!s->off || !s->at) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  const int64_t *k = r->k;
  int64_t size = k[0] * k[1] * k[2] * k[3], m = 0;
  for (int64_t j = 0; j < size; j++) {
    if (!r->fp[j]) continue;
    int64_t rest = j, off = 0, cs = 1;
    for (int d = NDF_MAX_DIMS - 1; d >= 0; d--) {
      s->at[m][d] = rest % k[d];
      rest /= k[d];
      off += s->at[m][d] * cs;
      cs *= in4.shape[d];
    }
    s->off[m++] = off;
  }
  if (r->n <= NET_MAX && r->n > 1) { /* a few samples: a selection network, NB outputs at once */
    s->net = malloc(sizeof *s->net * NET_MAX * 64);
    if (!s->net) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
    s->nnet = prune_network((int)r->n, (int)r->rank, s->net);
    s->med9 = p->pb.in.dtype == NDF_U8 && r->n == 9 && r->rank == 4 && r->k[0] == 1 &&
              r->k[1] == 1 && r->k[2] == 3 && r->k[3] == 3;
    if (p->pb.in.dtype == NDF_U8 && !(s->x8 = malloc((size_t)(n > 0 ? n : 1))))
      return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  }
  const ndf_dtype t = p->pb.in.dtype;
  s->hist = histogram(&p->pb);
  if (s->hist && histogram_samples(r, s) != NDF_OK)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  if (s->hist && t == NDF_U8 && !(s->x8 = malloc((size_t)(n > 0 ? n : 1))))
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  if (s->hist && t != NDF_U8 && !(s->x16 = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->x16)))
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  if (!s->x8 && !s->x16 && (t == NDF_F32 || t == NDF_U16 || t == NDF_I16) &&
      !(s->x32 = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->x32)))
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  if (!s->x8 && !s->x16 && !s->x32 && !(s->x = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->x)))
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_rank: out of host memory");
  return NDF_OK;
}

const ndf__solver ndf__cpu_rank = {.name = "cpu_rank",
                                   .op = NDF__OP_RANK,
                                   .place = NDF_PLACE_HOST,
                                   .applicable = applicable,
                                   .cost = cost,
                                   .make = make};
