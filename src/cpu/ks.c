/* SPDX-License-Identifier: BSD-3-Clause */
/* ks.c - cpu_ks: kernel superposition (ndf.h, "ks") on the CPU, OpenMP, float64 arithmetic.
 *
 * The input is read once into a float64 copy (any dtype, any strides, possibly the output
 * itself) and the result accumulated in a float64 array of the output's shape, then stored.
 * Arrays are seen as 4-D, missing leading axes of length 1. The copy's and the accumulator's
 * rows (and planes) are padded to an odd number of cache lines: rows 4 KiB apart share a cache
 * set, and a kernel's rows then evict each other (the scatter ran at half speed on 512 x 512).
 *
 * Kernels. k(d) is even in d; a pixel makes it for |d| <= top only, top the farthest offset it
 * reaches in the output (or the tile), once for each sigma map (an isotropic map serves every
 * axis), stored whole so that the loops below read it in place. Two ways, chosen by
 * c = 1 / (sqrt(2) s) alone, so that k(d) never depends on top:
 *  - c > 1 (s < 0.71, r <= 3 at n_sigma 3): Eq. 4 as written, k(d) = (e[d] - e[d - 1]) / 2
 *    with e[j] = erf((j + 1/2) c) and e[-1] = -e[0], r + 1 erf calls;
 *  - c <= 1: Eq. 4 is 1 / sqrt(pi) times the integral of exp(-t^2) over [x - h, x + h], x = d c,
 *    h = c / 2, and Taylor's series about x makes it
 *      k(d) = (2 h / sqrt(pi)) exp(-x^2) sum_m H_2m(x) h^2m / (2m + 1)!   (Hermite's H_n),
 *    a polynomial in x^2 whose coefficients depend on c alone: made once a pixel, then evaluated
 *    for each d (a loop the compiler vectorises). exp(-x^2) comes from a product
 *    recurrence restarted every HB offsets (its rounding grows with the square of the steps):
 *    one exp a pixel where the erf difference takes r + 1 erf calls. By Cramer's inequality,
 *    |H_n(x)| exp(-x^2 / 2) <= 1.09 sqrt(2^n n!), the terms left out add under 1e-17 for any x.
 *    It is also the more exact of the two: a difference of nearly equal erf values loses
 *    digits at large s (measured over s in [0.7, 3000]: worst error 2e-14 of k(0), against
 *    7e-13 for the difference).
 *
 *  - index input (Eq. 2a), a scatter: each input pixel q adds I(q) times its kernels' product to
 *    its neighbourhood, a rank-one patch added row by row along the last axis (an axpy the
 *    compiler vectorises, four rows at a time). Threads own tiles of the output, split along its
 *    outermost axis longer than 1 (and the next one too where that makes fewer kernels), and
 *    each tile's owner scatters every input pixel that reaches it, clipped to the tile: no two
 *    threads write one element, and each element's sum runs over the input in raster order
 *    whatever the tiles, so the result is bitwise the same for any thread count. A pixel within
 *    R of a tile's edge makes its kernels once per tile it reaches (see tiling()).
 *  - index output (Eq. 2b), a gather: each output pixel p makes its kernels from sigma(p) (the
 *    nearest input pixel's, outside the input's grid) and sums its neighbourhood, a dot product
 *    along the last axis (partial sums in a fixed order, to pipeline the additions); threads
 *    over rows of the output. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/elem.h"
#include "../core/internal.h"

/* The hot loops built for AVX2 and the baseline, the loader picking one for the CPU (GCC's
 * target_clones): the results are the same bit for bit (no reduction changes its order, and ISO
 * C mode fuses no multiply-add). 1.1 to 1.25 times faster on 512^2 (r_max 8 to 32); an AVX-512
 * build is slower on the short rows of small radii. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 &&           \
    !defined(__SANITIZE_ADDRESS__)
#define CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

#define D 4
#define HM 12 /* terms of the series; Cramer's bound leaves under 1e-17 out for c <= 1 */
#define HB 16 /* offsets between restarts of the exp(-x^2) recurrence, even */

typedef struct {
  int64_t n[D], m[D], off[D]; /* input and output shapes, the input's offset in the output */
  int64_t sx[D], sa[D];       /* strides of the input's copy and of the accumulator (padded) */
  int smap[D];                /* the sigma map of each axis; -1: an added axis */
  int tax[2];                 /* the tile axes: the outermost two longer than 1 (-1: none) */
  int64_t hs;                 /* a kernel's room: k(-(hs - 1)..hs - 1) */
  int64_t R;                  /* the largest radius (operand maps: this call's) */
  const double *sigma;        /* the maps, float64, C-contiguous, one after the other */
  double hc[HM][HM];          /* hc[m][j]: the series' coefficient of x^2j h^2m */
} geom;

static int64_t lmin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t lmax(int64_t a, int64_t b) { return a > b ? a : b; }

/* A stride of at least x elements, an odd number of 64-byte lines when x is long: rows a power
 * of two apart (512 float64, 4 KiB) share a cache set, and a kernel's rows then evict each other
 * (the scatter ran at half speed on 512 x 512). */
static int64_t padded(int64_t x) { return x < 64 ? x : x + (24 - x % 16) % 16; }

static void geometry(const ndf__problem *pb, geom *g) {
  const ndf__ksp *q = pb->params;
  const ndf_array *in = &pb->in, *out = &pb->out;
  const int pad = D - in->ndim;
  const int64_t bound = ndf__ks_bound(pb) < 0 ? INT64_MAX : ndf__ks_bound(pb);
  g->hs = 1;
  g->R = q->R;
  g->sigma = q->sigma;
  for (int d = 0; d < D; d++) {
    const int real = d >= pad;
    g->n[d] = real ? in->shape[d - pad] : 1;
    g->m[d] = real ? out->shape[d - pad] : 1;
    g->off[d] = real && q->extent == NDF_KS_FULL ? q->R : 0;
    g->smap[d] = real ? (q->nsig == 1 ? 0 : d - pad) : -1;
    /* the farthest offset from an input pixel to an output pixel */
    g->hs = lmax(g->hs, lmin(bound, g->m[d] + g->n[d]) + 1);
  }
  g->tax[0] = g->tax[1] = -1;
  for (int d = 0, k = 0; d < D && k < 2; d++)
    if (g->m[d] > 1) g->tax[k++] = d;
  g->sx[D - 1] = g->sa[D - 1] = 1;
  for (int d = D - 2; d >= 0; d--) {
    g->sx[d] = padded(g->n[d + 1] * g->sx[d + 1]);
    g->sa[d] = padded(g->m[d + 1] * g->sa[d + 1]);
  }
  /* H_2m(x) / (2m + 1)! = sum_j (-1)^(m - j) 4^j x^2j / ((2j)! (m - j)! (2m + 1)) */
  for (int m = 0; m < HM; m++)
    for (int j = 0; j < HM; j++) {
      double f = 2 * m + 1;
      for (int i = 2; i <= 2 * j; i++)
        f *= i;
      for (int i = 2; i <= m - j; i++)
        f *= i;
      g->hc[m][j] = j > m ? 0 : ((m - j) % 2 ? -1 : 1) * ldexp(1, 2 * j) / f;
    }
}

/* The series' part of kernel(): k(d) = kc exp(-(d c)^2) sum_j b_j u^j, u = (h d c)^2, for
 * d = 0..top, with the terms m < nm (inlined for each nm, so that the loops unroll); the sum by
 * Horner's rule in u^2 on its even and odd terms apart (two chains of dependent steps, half as
 * long). */
static inline void series(const geom *g, int nm, double c, double kc, int64_t top, double *k) {
  const double c2 = c * c, t = 0.25 * c2, u1 = t * c2, q0 = exp(-c2), rho = q0 * q0;
  const double rho8 = (rho * rho) * (rho * rho);
  double b[HM];
  for (int j = 0; j < nm; j++) {
    double sum = 0;
    for (int m = nm - 1; m >= j; m--)
      sum = sum * t + g->hc[m][j];
    b[j] = sum;
  }
  for (int64_t d0 = 0; d0 <= top; d0 += HB) {
    /* gs[i] = exp(-(d c)^2) at d = d0 + i, in two chains (even and odd d, so that their
     * multiplications overlap): gs[i + 2] = gs[i] f, f = exp(-c^2 (4d + 4)), and f times
     * exp(-8 c^2) from one step to the next */
    double gs[HB], e[2], f[2];
    if (d0 == 0) {
      e[0] = 1;
      e[1] = q0;
      f[0] = rho * rho;
      f[1] = f[0] * f[0];
    } else {
      e[0] = exp(-c2 * (double)d0 * (double)d0);
      e[1] = exp(-c2 * (double)(d0 + 1) * (double)(d0 + 1));
      f[0] = exp(-c2 * (double)(4 * d0 + 4));
      f[1] = f[0] * (rho * rho);
    }
    const int len = (int)lmin(HB, top + 1 - d0);
    for (int i = 0; i < len; i += 2)
      for (int l = 0; l < 2; l++) {
        gs[i + l] = e[l];
        e[l] *= f[l];
        f[l] *= rho8;
      }
#pragma omp simd
    for (int i = 0; i < len; i++) {
      const double dd = (double)d0 + i, u = u1 * dd * dd;
      const double u2 = u * u;
      double se = b[(nm - 1) & ~1], so = b[(nm - 2) | 1];
      for (int j = ((nm - 1) & ~1) - 2; j >= 0; j -= 2)
        se = se * u2 + b[j];
      for (int j = ((nm - 2) | 1) - 2; j >= 1; j -= 2)
        so = so * u2 + b[j];
      k[d0 + i] = kc * gs[i] * (se + u * so);
    }
  }
}

/* k(d) for d = -top..top (top <= r) into k[d], for sigma s and radius r, times ndf__ks_norm when
 * norm (the truncated kernel's sum is 1): made for d >= 0, then mirrored. */
CLONES static void kernel(const geom *g, double n_sigma, int norm, double s, int64_t r, int64_t top,
                          double *k) {
  if (r == 0 || s == 0) { /* the identity */
    k[0] = 1;
    return;
  }
  const double c = 1 / (sqrt(2.0) * s), scale = norm ? 0.5 * ndf__ks_norm(n_sigma, s) : 0.5;
  const double kc = 2 * scale * c * 0.56418958354775628; /* 2 h / sqrt(pi), scaled */
  if (c > 1) {
    double e0 = erf(0.5 * c);
    k[0] = scale * (e0 + e0);
    for (int64_t d = 1; d <= top; d++) {
      const double e1 = erf((d + 0.5) * c);
      k[d] = scale * (e1 - e0);
      e0 = e1;
    }
  } else if (c > 0.5) { /* the terms left out: < 1e-17 (Cramer), and fewer as c falls */
    series(g, 12, c, kc, top, k);
  } else if (c > 0.25) {
    series(g, 9, c, kc, top, k);
  } else if (c > 0.125) {
    series(g, 7, c, kc, top, k);
  } else {
    series(g, 6, c, kc, top, k);
  }
  for (int64_t d = 1; d <= top; d++)
    k[-d] = k[d];
}

/* ndf__ks_radius, without the call while the radius is far below its cap. */
static int64_t radius(double n_sigma, double s) {
  const double r = n_sigma * s;
  return r < 0x1p30 ? (int64_t)ceil(r) : ndf__ks_radius(n_sigma, s);
}

/* The kernels of the input pixel at flat index src, whose offsets on axis d are wanted over
 * [lo[d], hi[d]] (those that land in the output, or the tile): clips lo and hi to the pixel's
 * radii, makes each map's k(d) for |d| <= max(-lo, hi) in work (2 hs values a map) and points
 * k[d] at axis d's k(0). 0 if the pixel reaches none of them. */
static int kernels(const ndf__ksp *q, const geom *g, int64_t src, int64_t lo[D], int64_t hi[D],
                   double *work, const double *k[D]) {
  static const double one = 1;
  int64_t top[D] = {-1, -1, -1, -1}, rad[D] = {-1, -1, -1, -1};
  double sig[D];
  for (int d = 0; d < D; d++) {
    const int sm = g->smap[d];
    if (sm >= 0 && rad[sm] < 0) {
      sig[sm] = g->sigma[sm * q->n + src];
      rad[sm] = radius(q->n_sigma, sig[sm]);
    }
    const int64_t r = sm < 0 ? 0 : rad[sm];
    lo[d] = lmax(lo[d], -r);
    hi[d] = lmin(hi[d], r);
    if (lo[d] > hi[d]) return 0;
    if (sm >= 0) top[sm] = lmax(top[sm], lmax(-lo[d], hi[d]));
  }
  for (int sm = 0; sm < D; sm++)
    if (top[sm] >= 0)
      kernel(g, q->n_sigma, q->normalize, sig[sm], rad[sm], top[sm], work + (2 * sm + 1) * g->hs);
  for (int d = 0; d < D; d++)
    k[d] = g->smap[d] < 0 ? &one : work + (2 * g->smap[d] + 1) * g->hs;
  return 1;
}

/* rows[i * stride + j] += w kr[i] kc[j] for i < nr, j < nc: one pixel's kernel on consecutive
 * rows, four rows at a time (each kc[j] loaded once for them). */
CLONES static void patch(double *restrict rows, int64_t stride, double w, const double *kr,
                         int64_t nr, const double *restrict kc, int64_t nc) {
  int64_t i = 0;
  for (; i + 4 <= nr; i += 4) {
    double *restrict r0 = rows + i * stride, *restrict r1 = r0 + stride, *restrict r2 = r1 + stride,
                     *restrict r3 = r2 + stride;
    const double w0 = w * kr[i], w1 = w * kr[i + 1], w2 = w * kr[i + 2], w3 = w * kr[i + 3];
    for (int64_t j = 0; j < nc; j++) {
      const double kj = kc[j];
      r0[j] += w0 * kj;
      r1[j] += w1 * kj;
      r2[j] += w2 * kj;
      r3[j] += w3 * kj;
    }
  }
  for (; i < nr; i++) {
    double *restrict r0 = rows + i * stride;
    const double w0 = w * kr[i];
    for (int64_t j = 0; j < nc; j++)
      r0[j] += w0 * kc[j];
  }
}

/* Scatter into the tile of output elements p with t0[d] <= p[d] < t1[d] of every input pixel
 * that reaches it. */
static void scatter(const ndf__ksp *q, const geom *g, const double *x, double *acc,
                    const int64_t t0[D], const int64_t t1[D], double *work) {
  int64_t i[D], from[D], to[D];
  for (int d = 0; d < D; d++) { /* input index i reaches output i + off + d, |d| <= R */
    from[d] = lmax(0, t0[d] - g->off[d] - g->R);
    to[d] = lmin(g->n[d], t1[d] - g->off[d] + g->R);
  }
  for (i[0] = from[0]; i[0] < to[0]; i[0]++)
    for (i[1] = from[1]; i[1] < to[1]; i[1]++)
      for (i[2] = from[2]; i[2] < to[2]; i[2]++)
        for (i[3] = from[3]; i[3] < to[3]; i[3]++) {
          const double v = x[i[0] * g->sx[0] + i[1] * g->sx[1] + i[2] * g->sx[2] + i[3]];
          if (v == 0) continue;
          const int64_t src = ((i[0] * g->n[1] + i[1]) * g->n[2] + i[2]) * g->n[3] + i[3];
          int64_t lo[D], hi[D], p[D];
          for (int d = 0; d < D; d++) {
            p[d] = i[d] + g->off[d]; /* the pixel's place in the output */
            lo[d] = t0[d] - p[d];
            hi[d] = t1[d] - 1 - p[d];
          }
          const double *k[D];
          if (!kernels(q, g, src, lo, hi, work, k)) continue;
          for (int64_t d0 = lo[0]; d0 <= hi[0]; d0++)
            for (int64_t d1 = lo[1]; d1 <= hi[1]; d1++)
              patch(acc + (p[0] + d0) * g->sa[0] + (p[1] + d1) * g->sa[1] +
                        (p[2] + lo[2]) * g->sa[2] + p[3] + lo[3],
                    g->sa[2], v * k[0][d0] * k[1][d1], k[2] + lo[2], hi[2] - lo[2] + 1,
                    k[3] + lo[3], hi[3] - lo[3] + 1);
        }
}

/* Sum of a[j] b[j] over j < n: eight interleaved partial sums (the additions pipeline, in
 * vectors or not), then the tail's, added in a fixed order whatever the build. */
static inline double dot(const double *restrict a, const double *restrict b, int64_t n) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, tail = 0;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++)
      s[l] += a[j + l] * b[j + l];
  for (; j < n; j++)
    tail += a[j] * b[j];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

/* Gather: output element at position pp from sigma at the nearest input pixel. */
static inline double gather1(const ndf__ksp *q, const geom *g, const double *x, const int64_t pp[D],
                             double *work) {
  int64_t src = 0, base[D], lo[D], hi[D];
  for (int d = 0; d < D; d++) {
    base[d] = pp[d] - g->off[d]; /* input j contributes with offset base - j, j in [0, n) */
    src = src * g->n[d] + lmin(lmax(base[d], 0), g->n[d] - 1); /* the nearest input pixel */
    lo[d] = base[d] - (g->n[d] - 1);
    hi[d] = base[d];
  }
  const double *k[D];
  if (!kernels(q, g, src, lo, hi, work, k)) return 0;
  /* the last axis's input j = base - hi + i has weight k(hi - i) = k(i - hi) */
  const double *k3 = k[3] - hi[3];
  const int64_t n3 = hi[3] - lo[3] + 1;
  double sum0 = 0;
  for (int64_t d0 = lo[0]; d0 <= hi[0]; d0++) {
    const double *x0 = x + (base[0] - d0) * g->sx[0];
    double sum1 = 0;
    for (int64_t d1 = lo[1]; d1 <= hi[1]; d1++) {
      const double *x1 = x0 + (base[1] - d1) * g->sx[1];
      double sum2 = 0;
      for (int64_t d2 = lo[2]; d2 <= hi[2]; d2++) {
        const double *row = x1 + (base[2] - d2) * g->sx[2] + base[3] - hi[3];
        sum2 += dot(row, k3, n3) * k[2][d2];
      }
      sum1 += sum2 * k[1][d1];
    }
    sum0 += sum1 * k[0][d0];
  }
  return sum0;
}

/* Gather of one output row (flat row index row, over the first D - 1 axes) into ar. */
CLONES static void gather_row(const ndf__ksp *q, const geom *g, const double *x, int64_t row,
                              double *ar, double *work) {
  int64_t pp[D];
  for (int d = D - 2; d >= 0; d--) {
    pp[d] = row % g->m[d];
    row /= g->m[d];
  }
  for (pp[D - 1] = 0; pp[D - 1] < g->m[D - 1]; pp[D - 1]++)
    ar[pp[D - 1]] = gather1(q, g, x, pp, work);
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  return pb->op == NDF__OP_KS;
}

/* ~0.3 ns a multiply-add over each pixel's truncated kernel (the mean radius taken as R / 2) and
 * ~70 ns a pixel for its kernels (512^2, one core). */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  double taps = 1;
  for (int d = 0; d < pb->in.ndim; d++)
    taps *= (double)ndf__ks_radius_estimate(pb) + 1;
  return (double)ndf_array_size(&pb->in) * (taps * 3e-10 + 7e-8) / ctx->threads;
}

/* Input rows that k tiles along tile axis a reach, over the axis's input rows: a tile's owner
 * makes the kernels of every input pixel within R of it. */
static double reach(const geom *g, int a, int64_t k, int64_t R) {
  if (a < 0) return 1;
  const int64_t h = (g->m[a] + k - 1) / k;
  return (double)k * (double)lmin(h + 2 * R, g->n[a]) / (double)g->n[a];
}

/* The output's tiles for the scatter, nt[0] x nt[1] along the tile axes: at least one a thread,
 * up to four (dynamically scheduled, against uneven maps) while that makes at most a quarter
 * more kernels; split along the first axis alone where that is enough, else the grid making the
 * fewest kernels (on 16 threads, 512^2 and R = 32: 4 x 4 tiles, 2.25 times the kernels, where
 * 16 stripes make 3 times). */
static void tiling(const geom *g, int64_t R, int threads, int64_t nt[2]) {
  const int a0 = g->tax[0], a1 = g->tax[1];
  nt[0] = nt[1] = 1;
  if (threads == 1 || a0 < 0) return;
  const int64_t m0 = g->m[a0], m1 = a1 < 0 ? 1 : g->m[a1];
  for (int per = 4; per >= 1; per /= 2) {
    const int64_t want = (int64_t)per * threads;
    int64_t k0 = lmin(want, m0), k1 = 1;
    double best = reach(g, a0, k0, R);
    for (int64_t j0 = lmin(want, m0); j0 >= 1 && best > 1.25; j0--) {
      const int64_t j1 = lmin(m1, (want + j0 - 1) / j0);
      const double c = reach(g, a0, j0, R) * reach(g, a1, j1, R);
      if (j0 * j1 >= lmin(want, m0 * m1) && c < best) {
        best = c;
        k0 = j0;
        k1 = j1;
      }
    }
    if (best <= 1.25 || per == 1) {
      nt[0] = k0;
      nt[1] = k1;
      return;
    }
  }
}

/* Offset of row `row` (in C order over the first D - 1 axes of shape) for these strides. */
static int64_t row_offset(const int64_t shape[D], const int64_t stride[D], int64_t row) {
  int64_t off = 0;
  for (int d = D - 2; d >= 0; d--) {
    off += row % shape[d] * stride[d];
    row /= shape[d];
  }
  return off;
}

/* A plan's buffers, made at planning and reused: allocating per call cost a fifth of the time
 * on two threads (each free unmapped them, and every thread's TLB was flushed). */
typedef struct {
  geom g;
  int threads;
  int64_t nt[2];        /* the scatter's tiles */
  int64_t work;         /* wk's values a thread */
  double *x, *acc, *wk; /* the input's copy, the accumulator, each thread's kernels */
  double *maps;         /* operand maps: this call's, as float64 */
  pthread_mutex_t lock; /* the buffers serve one call at a time */
} state;

/* The operand maps into s->maps as float64, checked, and this call's largest radius into
 * s->g.R; the state's lock held. */
static ndf_status take_maps(const ndf_plan *p, state *s, const ndf_array *ops) {
  const ndf__ksp *q = p->pb.params;
  const int64_t n = q->n, nm = n * q->nsig;
  int64_t bad = nm, R = 0;
#pragma omp parallel for num_threads(s->threads) schedule(static) reduction(min                    \
                                                                            : bad) reduction(max   \
                                                                                             : R)
  for (int64_t i = 0; i < nm; i++) {
    const ndf_array *a = &ops[i / n];
    const double v = ndf__load(a->dtype, a->data, ndf__offset(a, i % n));
    s->maps[i] = v;
    const int64_t r = v >= 0 && isfinite(v) ? ndf__ks_radius(q->n_sigma, v) : -1;
    if (r < 0 || (q->r_max && r > q->r_max)) bad = i < bad ? i : bad;
    R = r > R ? r : R;
  }
  if (bad < nm)
    return ndf__ks_bad_map(p->ctx, q->n_sigma, q->r_max, (int)(bad / n), bad % n, s->maps[bad]);
  s->g.R = R;
  return NDF_OK;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  const ndf__ksp *q = p->pb.params;
  state *s = p->state;
  const geom *g = &s->g;
  const int threads = s->threads;
  const int64_t rin = ndf_array_size(in) / g->n[D - 1], rout = ndf_array_size(out) / g->m[D - 1];
  const int cin = ndf__is_contiguous(in), cout = ndf__is_contiguous(out);
  double *x = s->x, *acc = s->acc, *wk = s->wk;
  pthread_mutex_lock(&s->lock);
  if (p->pb.nops) {
    const ndf_status st = take_maps(p, s, ops);
    if (st != NDF_OK) {
      pthread_mutex_unlock(&s->lock);
      return st;
    }
  }
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rin; row++) {
      double *xr = x + row_offset(g->n, g->sx, row);
      for (int64_t j = 0, i = row * g->n[D - 1]; j < g->n[D - 1]; j++, i++)
        xr[j] = ndf__load(in->dtype, in->data, cin ? i : ndf__offset(in, i));
    }
    if (q->index == NDF_KS_INPUT) {
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rout; row++)
        memset(acc + row_offset(g->m, g->sa, row), 0, (size_t)g->m[D - 1] * sizeof *acc);
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < s->nt[0] * s->nt[1]; t++) {
        int64_t t0[D], t1[D];
        int empty = 0;
        for (int d = 0; d < D; d++) {
          t0[d] = 0;
          t1[d] = g->m[d];
        }
        for (int k = 0; k < 2; k++)
          if (g->tax[k] >= 0) {
            const int a = g->tax[k];
            const int64_t h = (g->m[a] + s->nt[k] - 1) / s->nt[k];
            t0[a] = (k ? t % s->nt[1] : t / s->nt[1]) * h;
            t1[a] = lmin(g->m[a], t0[a] + h);
            empty |= t0[a] >= t1[a];
          }
        if (!empty) scatter(q, g, x, acc, t0, t1, wk + s->work * omp_get_thread_num());
      }
    } else {
#pragma omp for schedule(dynamic, 4)
      for (int64_t row = 0; row < rout; row++)
        gather_row(q, g, x, row, acc + row_offset(g->m, g->sa, row),
                   wk + s->work * omp_get_thread_num());
    }
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rout; row++) {
      const double *ar = acc + row_offset(g->m, g->sa, row);
      for (int64_t j = 0, i = row * g->m[D - 1]; j < g->m[D - 1]; j++, i++)
        ndf__store(out->dtype, out->data, cout ? i : ndf__offset(out, i), ar[j]);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return NDF_OK;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  free(s->x);
  free(s->acc);
  free(s->wk);
  free(s->maps);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static ndf_status make(ndf_plan *p) {
  const ndf__ksp *q = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_ks: out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  geom *g = &s->g;
  geometry(&p->pb, g);
  s->threads = p->ctx->threads;
  s->work = 2 * D * g->hs;
  tiling(g, ndf__ks_radius_estimate(&p->pb), s->threads, s->nt);
  if (p->pb.nops) {
    s->maps = malloc((size_t)(q->n * q->nsig) * sizeof *s->maps);
    if (!s->maps) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_ks: out of host memory for the maps");
    g->sigma = s->maps;
  }
  const size_t nx = (size_t)(g->n[0] * g->sx[0]), na = (size_t)(g->m[0] * g->sa[0]);
  s->x = malloc(nx * sizeof *s->x);
  s->acc = malloc(na * sizeof *s->acc);
  s->wk = malloc((size_t)(s->work * s->threads) * sizeof *s->wk);
  if (!s->x || !s->acc || !s->wk)
    return ndf__fail(p->ctx, NDF_ENOMEM,
                     "cpu_ks: out of host memory (buffers of %zu float64 values)", nx + na);
  return NDF_OK;
}

const ndf__solver ndf__cpu_ks = {.name = "cpu_ks",
                                 .op = NDF__OP_KS,
                                 .place = NDF_PLACE_HOST,
                                 .applicable = applicable,
                                 .cost = cost,
                                 .make = make,
                                 .f64 = 1};
