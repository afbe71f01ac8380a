/* ks.c - cpu_ks: kernel superposition (ndf.h, "ks") on the CPU, OpenMP, float64 arithmetic.
 *
 * The input is read once into a float64 copy (any dtype, any strides, possibly the output
 * itself) and the result accumulated in a float64 array of the output's shape, then stored.
 * Arrays are seen as 4-D, missing leading axes of length 1.
 *
 *  - index input (Eq. 2a), a scatter: each input pixel q makes its 1-D kernels once (r + 1
 *    erf values per axis: k is even in d and telescopes, k(d) = (e[|d|] - e[|d| - 1]) / 2
 *    with e[j] = erf((j + 1/2) / (sqrt(2) s)) and e[-1] = -e[0]) and adds I(q) times their
 *    product to its neighbourhood, the last axis innermost (a loop the compiler vectorises).
 *    Threads own tiles of the output along its outermost axis longer than 1, and each
 *    tile's owner scatters every input pixel that reaches it, clipped to the tile: no two
 *    threads write one element, and each element's sum runs in the same order on every run
 *    (deterministic), at the price of making a pixel's kernels once per tile it reaches.
 *  - index output (Eq. 2b), a gather: each output pixel p makes its kernels from sigma(p) (the
 *    nearest input pixel's, outside the input's grid) and sums its neighbourhood, threads over
 *    rows of the output. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/elem.h"
#include "../core/internal.h"

#define D 4

typedef struct {
  int64_t n[D], m[D], off[D]; /* input and output shapes, the input's offset in the output */
  int smap[D];                /* the sigma map of each axis; -1: an added axis */
  int tax;                    /* the tile axis: the outermost output axis longer than 1 */
} geom;

static void geometry(const ndf__ksp *q, const ndf_array *in, const ndf_array *out, geom *g) {
  const int pad = D - in->ndim;
  g->tax = D - 1;
  for (int d = 0; d < D; d++) {
    const int real = d >= pad;
    g->n[d] = real ? in->shape[d - pad] : 1;
    g->m[d] = real ? out->shape[d - pad] : 1;
    g->off[d] = real && q->extent == NDF_KS_FULL ? q->R : 0;
    g->smap[d] = real ? (q->nsig == 1 ? 0 : d - pad) : -1;
  }
  for (int d = D - 1; d >= 0; d--)
    if (g->m[d] > 1) g->tax = d;
}

/* k(d) for d in [lo, hi] (|d| <= r) into k[d - lo], for sigma s and radius r (times
 * ndf__ks_norm when norm: the truncated kernel's sum is 1); e: room for max(|lo|, |hi|) + 1
 * values. */
static void kernel(double n_sigma, double s, int64_t r, int norm, int64_t lo, int64_t hi, double *e,
                   double *k) {
  if (lo > hi) return;
  if (r == 0 || s == 0) { /* the identity */
    for (int64_t d = lo; d <= hi; d++)
      k[d - lo] = d == 0;
    return;
  }
  const int64_t top = lo > 0 ? hi : hi < 0 ? -lo : (hi > -lo ? hi : -lo);
  const double c = 1 / (sqrt(2.0) * s);
  for (int64_t j = 0; j <= top; j++)
    e[j] = erf((j + 0.5) * c);
  const double scale = norm ? 0.5 * ndf__ks_norm(n_sigma, s) : 0.5;
  for (int64_t d = lo; d <= hi; d++) {
    const int64_t a = d < 0 ? -d : d;
    k[d - lo] = scale * (e[a] - (a ? e[a - 1] : -e[0]));
  }
}

static int64_t lmin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t lmax(int64_t a, int64_t b) { return a > b ? a : b; }

/* The widest kernel any pixel needs on axis d, clipped to what the output can receive. */
static int64_t span(const ndf__ksp *q, const geom *g, int d) {
  return 2 * lmin(q->R, g->m[d] + g->n[d]) + 1;
}

/* Scatter of input pixels whose tile-axis index is in [a, b) into the output elements whose
 * tile-axis index is in [t0, t1). */
static void scatter(const ndf__ksp *q, const geom *g, const double *x, double *acc, int64_t t0,
                    int64_t t1, int64_t a, int64_t b, double *work) {
  const int T = g->tax;
  double *kk[D], *e = work;
  int64_t at = 0;
  for (int d = 0; d < D; d++)
    at += span(q, g, d);
  for (int d = 0; d < D; d++) {
    kk[d] = work + at;
    at += span(q, g, d);
  }
  const int64_t ns = q->n;
  int64_t i[D], from[D], to[D];
  for (int d = 0; d < D; d++) {
    from[d] = d == T ? a : 0;
    to[d] = d == T ? b : g->n[d];
  }
  for (i[0] = from[0]; i[0] < to[0]; i[0]++)
    for (i[1] = from[1]; i[1] < to[1]; i[1]++)
      for (i[2] = from[2]; i[2] < to[2]; i[2]++)
        for (i[3] = from[3]; i[3] < to[3]; i[3]++) {
          const int64_t src = ((i[0] * g->n[1] + i[1]) * g->n[2] + i[2]) * g->n[3] + i[3];
          const double v = x[src];
          if (v == 0) continue;
          int64_t lo[D], hi[D];
          int empty = 0;
          for (int d = 0; d < D; d++) {
            const int sm = g->smap[d];
            const double s = sm < 0 ? 0 : q->sigma[sm * ns + src];
            const int64_t r = sm < 0 ? 0 : ndf__ks_radius(q->n_sigma, s);
            const int64_t p = i[d] + g->off[d]; /* the pixel's place in the output */
            const int64_t o0 = d == T ? t0 : 0, o1 = d == T ? t1 : g->m[d];
            lo[d] = lmax(-r, o0 - p);
            hi[d] = lmin(r, o1 - 1 - p);
            if (lo[d] > hi[d]) {
              empty = 1;
              break;
            }
            kernel(q->n_sigma, s, r, q->normalize, lo[d], hi[d], e, kk[d]);
          }
          if (empty) continue;
          for (int64_t d0 = lo[0]; d0 <= hi[0]; d0++) {
            const double w0 = v * kk[0][d0 - lo[0]];
            const int64_t p0 = i[0] + g->off[0] + d0;
            for (int64_t d1 = lo[1]; d1 <= hi[1]; d1++) {
              const double w1 = w0 * kk[1][d1 - lo[1]];
              const int64_t p1 = p0 * g->m[1] + i[1] + g->off[1] + d1;
              for (int64_t d2 = lo[2]; d2 <= hi[2]; d2++) {
                const double w2 = w1 * kk[2][d2 - lo[2]];
                double *row =
                    acc + (p1 * g->m[2] + i[2] + g->off[2] + d2) * g->m[3] + i[3] + g->off[3];
                const double *k3 = kk[3] - lo[3];
                for (int64_t d3 = lo[3]; d3 <= hi[3]; d3++)
                  row[d3] += w2 * k3[d3];
              }
            }
          }
        }
}

/* Gather: output element p (flat index o, position pp) from sigma at the nearest input pixel. */
static double gather1(const ndf__ksp *q, const geom *g, const double *x, const int64_t pp[D],
                      double *work) {
  const int64_t ns = q->n;
  int64_t c[D], src = 0;
  for (int d = 0; d < D; d++) { /* the nearest input pixel */
    c[d] = lmin(lmax(pp[d] - g->off[d], 0), g->n[d] - 1);
    src = src * g->n[d] + c[d];
  }
  double *e = work, *kk[D];
  int64_t at = 0;
  for (int d = 0; d < D; d++)
    at += span(q, g, d);
  int64_t lo[D], hi[D];
  for (int d = 0; d < D; d++) {
    kk[d] = work + at;
    at += span(q, g, d);
    const int sm = g->smap[d];
    const double s = sm < 0 ? 0 : q->sigma[sm * ns + src];
    const int64_t r = sm < 0 ? 0 : ndf__ks_radius(q->n_sigma, s);
    /* input j contributes with d = pp - (j + off), j in [0, n) */
    const int64_t base = pp[d] - g->off[d];
    lo[d] = lmax(-r, base - (g->n[d] - 1));
    hi[d] = lmin(r, base);
    if (lo[d] > hi[d]) return 0;
    kernel(q->n_sigma, s, r, q->normalize, lo[d], hi[d], e, kk[d]);
  }
  double sum0 = 0;
  for (int64_t d0 = lo[0]; d0 <= hi[0]; d0++) {
    const int64_t j0 = pp[0] - g->off[0] - d0;
    double sum1 = 0;
    for (int64_t d1 = lo[1]; d1 <= hi[1]; d1++) {
      const int64_t j1 = j0 * g->n[1] + pp[1] - g->off[1] - d1;
      double sum2 = 0;
      for (int64_t d2 = lo[2]; d2 <= hi[2]; d2++) {
        const double *row = x + (j1 * g->n[2] + pp[2] - g->off[2] - d2) * g->n[3];
        const int64_t base3 = pp[3] - g->off[3];
        double sum3 = 0;
        for (int64_t d3 = lo[3]; d3 <= hi[3]; d3++)
          sum3 += row[base3 - d3] * kk[3][d3 - lo[3]];
        sum2 += sum3 * kk[2][d2 - lo[2]];
      }
      sum1 += sum2 * kk[1][d1 - lo[1]];
    }
    sum0 += sum1 * kk[0][d0 - lo[0]];
  }
  return sum0;
}

static int applicable(const ndf__problem *pb, const ndf_context *ctx) {
  (void)ctx;
  return pb->op == NDF__OP_KS;
}

/* ~1 ns a multiply-add over each pixel's truncated kernel (the mean radius taken as R / 2). */
static double cost(const ndf__problem *pb, const ndf_context *ctx) {
  const ndf__ksp *q = pb->params;
  double taps = 1;
  for (int d = 0; d < pb->in.ndim; d++)
    taps *= (double)q->R + 1;
  return (double)ndf_array_size(&pb->in) * (taps * 1e-9 + 2e-8) / ctx->threads;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  const ndf__ksp *q = p->pb.params;
  const int threads = p->ctx->threads;
  geom g;
  geometry(q, in, out, &g);
  const int64_t nin = ndf_array_size(in), nout = ndf_array_size(out);
  int64_t work = 0;
  for (int d = 0; d < D; d++)
    work += 2 * span(q, &g, d);
  double *x = malloc((size_t)nin * sizeof *x), *acc = calloc((size_t)nout, sizeof *acc);
  double *wk = malloc((size_t)(work * threads) * sizeof *wk);
  if (!x || !acc || !wk) {
    free(x);
    free(acc);
    free(wk);
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_ks: out of host memory (%lld-element buffers)",
                     (long long)(nin + nout));
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < nin; i++)
    x[i] = ndf__load(in->dtype, in->data, ndf__offset(in, i));
  if (q->index == NDF_KS_INPUT) {
    /* Tiles of h output indices along the tile axis, about four per thread. */
    const int T = g.tax;
    const int64_t h = lmax(1, (g.m[T] + 4 * threads - 1) / (4 * threads));
    const int64_t tiles = (g.m[T] + h - 1) / h;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t t = 0; t < tiles; t++) {
      const int64_t t0 = t * h, t1 = lmin(g.m[T], t0 + h);
      /* input pixels that reach [t0, t1): output index i + off + d, |d| <= R */
      const int64_t a = lmax(0, t0 - g.off[T] - q->R), b = lmin(g.n[T], t1 - g.off[T] + q->R);
      scatter(q, &g, x, acc, t0, t1, a, b, wk + work * omp_get_thread_num());
    }
  } else {
    const int64_t rows = nout / g.m[D - 1];
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4)
    for (int64_t row = 0; row < rows; row++) {
      double *w = wk + work * omp_get_thread_num();
      int64_t pp[D], rest = row;
      for (int d = D - 2; d >= 0; d--) {
        pp[d] = rest % g.m[d];
        rest /= g.m[d];
      }
      for (pp[D - 1] = 0; pp[D - 1] < g.m[D - 1]; pp[D - 1]++)
        acc[row * g.m[D - 1] + pp[D - 1]] = gather1(q, &g, x, pp, w);
    }
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < nout; i++)
    ndf__store(out->dtype, out->data, ndf__offset(out, i), acc[i]);
  free(x);
  free(acc);
  free(wk);
  return NDF_OK;
}

static ndf_status make(ndf_plan *p) {
  p->exec = exec;
  return NDF_OK;
}

const ndf__solver ndf__cpu_ks = {
    "cpu_ks", NDF__OP_KS, NDF_PLACE_HOST, applicable, cost, make,
};
