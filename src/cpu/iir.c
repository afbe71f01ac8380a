/* iir.c - cpu_iir: the recursive Gaussian (core/iir.h) on the CPU, OpenMP.
 *
 * Every axis is filtered as ndf__iir_line filters one line, in float64, but W lines at a time:
 * W neighbouring lines are gathered into a float64 block X[i][w] (line w, sample i), filtered
 * there with the lanes innermost (so the compiler vectorises across lines; the recursion runs
 * along i), and stored back as float32. The work is done in a float32 buffer B of the array's
 * shape: the output itself when it is float32 and C-contiguous, else a temporary stored into it
 * at the end (dtype conversion, rounding). The first filtered axis reads the input instead of
 * B, so no pass only copies.
 *
 * Passes over memory, as the seed's section III: where there are enough slabs (the array's
 * last two axes, e.g. z-slices of a volume) for the threads, each thread takes whole slabs and
 * filters their last axis then the one before while the slab is in cache; the other axes get a
 * pass each. A 3-D volume is then read and written twice instead of three times. Lines of one
 * group are neighbours in memory on every axis but the last (W consecutive elements per step),
 * and on the last axis W consecutive rows. Axes are filtered last-first (x, y, then z): the
 * filters are linear and separable, so the order only changes rounding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/elem.h"
#include "../core/internal.h"

/* On x86-64 the line filter is built twice, for AVX2 with FMA and for the baseline, and the
 * loader picks one for the machine (GCC's target_clones, an ifunc): 4 float64 lanes per
 * instruction and fused multiply-adds instead of 2 lanes and separate ones. The clone is
 * x86-64-v3 (a feature level, picked on any CPU that has it), not "arch=haswell": GCC picks a
 * clone named after a CPU only on that very CPU model, so until 2026-11-22 every other CPU ran
 * the baseline clone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

#define D NDF_MAX_DIMS
#define W 8 /* lines per group: lanes of the float64 recursion */

#if defined(__GNUC__) && !defined(__clang__)
#define UNROLL _Pragma("GCC unroll 8")
#define INLINE static inline __attribute__((always_inline))
#else
#define UNROLL
#define INLINE static inline
#endif

/* W float64 lanes as one value (GCC and Clang vector extensions: two AVX registers, four SSE
 * ones); arithmetic with a double broadcasts it. */
typedef double lanes_t __attribute__((vector_size(W * sizeof(double))));

/* One step of an all-pole recursion of order K: *x = b0 *x - sum a[j] h[j], shifted into h (the
 * newest state enters the sum last, so a step waits for one FMA of the step before). */
INLINE void pole_step(double b0, const double *a, lanes_t *h, lanes_t *x, const int K) {
  lanes_t v = b0 * *x;
  for (int j = K - 1; j >= 0; j--)
    v -= a[j] * h[j];
  for (int j = K - 1; j > 0; j--)
    h[j] = h[j - 1];
  h[0] = *x = v;
}

/* The recursions over a block X of n samples of W lanes, K a constant after inlining. */
INLINE void cascade(const ndf__iir *f, lanes_t *restrict X, int64_t n, const int K) {
  const double b0 = f->b0;
  double a[NDF__IIR_MAXK];
  lanes_t h[NDF__IIR_MAXK];
  for (int j = 0; j < K; j++)
    a[j] = f->a[j];
  const lanes_t first = X[0], last = X[n - 1];
  for (int j = 0; j < K; j++)
    h[j] = first;
  for (int64_t i = 0; i < n; i++)
    pole_step(b0, a, h, X + i, K);
  /* Triggs-Sdika's start of the anticausal pass (iir.h): v at n - 1 - r into h[r] ... */
  lanes_t dd[NDF__IIR_MAXK];
  for (int m = 0; m < K; m++)
    dd[m] = (n - 1 - m >= 0 ? X[n - 1 - m] : first) - last;
  for (int r = 0; r < K; r++) {
    lanes_t v = last;
    for (int m = 0; m < K; m++)
      v += f->M[r * K + m] * dd[m];
    h[r] = v;
  }
  for (int r = 0; r < K && n - 1 - r >= 0; r++)
    X[n - 1 - r] = h[r];
  /* ... and the recursion's state at i = n - K - 1, v[i + 1 + j], is h[K - 1 - j]. */
  for (int j = 0; j < K / 2; j++) {
    const lanes_t t = h[j];
    h[j] = h[K - 1 - j];
    h[K - 1 - j] = t;
  }
  for (int64_t i = n - K - 1; i >= 0; i--)
    pole_step(b0, a, h, X + i, K);
}

/* The parallel form; T: n samples of W lanes, for the input's copy. */
INLINE void parallel(const ndf__iir *f, lanes_t *restrict X, lanes_t *restrict T, int64_t n,
                     const int K) {
  double a[NDF__IIR_MAXK], bp[NDF__IIR_MAXK], bm[NDF__IIR_MAXK];
  lanes_t h[NDF__IIR_MAXK];
  for (int j = 0; j < K; j++) {
    a[j] = f->a[j];
    bp[j] = f->bp[j];
    bm[j] = f->bm[j];
  }
  memcpy(T, X, (size_t)n * sizeof *T);
  for (int j = 0; j < K; j++)
    h[j] = f->gp * T[0];
  for (int64_t i = 0; i < n; i++) {
    lanes_t v = bp[0] * T[i];
    for (int j = 1; j < K; j++)
      v += bp[j] * T[i - j >= 0 ? i - j : 0];
    for (int j = K - 1; j >= 0; j--)
      v -= a[j] * h[j];
    for (int j = K - 1; j > 0; j--)
      h[j] = h[j - 1];
    h[0] = X[i] = v;
  }
  for (int j = 0; j < K; j++)
    h[j] = f->gm * T[n - 1];
  for (int64_t i = n - 1; i >= 0; i--) {
    lanes_t v = bm[0] * T[i + 1 < n ? i + 1 : n - 1];
    for (int j = 1; j < K; j++)
      v += bm[j] * T[i + 1 + j < n ? i + 1 + j : n - 1];
    for (int j = K - 1; j >= 0; j--)
      v -= a[j] * h[j];
    for (int j = K - 1; j > 0; j--)
      h[j] = h[j - 1];
    h[0] = v;
    X[i] += v;
  }
}

INLINE void filter_block(const ndf__iir *f, lanes_t *X, lanes_t *T, int64_t n) {
  if (f->form == NDF__IIR_PARALLEL) {
    switch (f->K) {
    case 4: parallel(f, X, T, n, 4); return;
    default: parallel(f, X, T, n, f->K); return;
    }
  }
  switch (f->K) {
  case 1: cascade(f, X, n, 1); return;
  case 2: cascade(f, X, n, 2); return;
  case 3: cascade(f, X, n, 3); return;
  case 4: cascade(f, X, n, 4); return;
  default: cascade(f, X, n, 5); return;
  }
}

/* Where a pass reads: the input (any dtype, its strides) or B (float32, contiguous). */
typedef struct {
  const void *data;
  ndf_dtype dtype;
  int64_t s[D];
} source;

/* The number of lines along `axis` in a 4-D block of shape n. */
static int64_t lines_of(const int64_t n[D], int axis) {
  int64_t nl = 1;
  for (int d = 0; d < D; d++)
    if (d != axis) nl *= n[d];
  return nl;
}

/* Filters the lines along `axis` of the 4-D block of shape n whose first element is at src
 * offset so and B offset bo, groups g0 .. g1 - 1 of W lines (line l: the other axes' indices in
 * C order). X, T: n[axis] * W doubles each. */
CLONES static void lines(const ndf__iir *f, const source *src, int64_t so, float *B,
                         const int64_t bs[D], int64_t bo, const int64_t n[D], int axis, int64_t g0,
                         int64_t g1, lanes_t *X, lanes_t *T) {
  const int64_t L = n[axis], nl = lines_of(n, axis);
  const int64_t sa = src->s[axis], ba = bs[axis];
  for (int64_t g = g0; g < g1; g++) {
    int64_t sb[W] = {0}, bb[W] = {0};
    int lanes = 0;
    for (; lanes < W && g * W + lanes < nl; lanes++) {
      int64_t l = g * W + lanes, s = so, b = bo;
      for (int d = D - 1; d >= 0; d--) {
        if (d == axis) continue;
        const int64_t i = l % n[d];
        l /= n[d];
        s += i * src->s[d];
        b += i * bs[d];
      }
      sb[lanes] = s;
      bb[lanes] = b;
    }
    for (int w = lanes; w < W; w++) /* idle lanes repeat the first line */
      sb[w] = sb[0], bb[w] = bb[0];
    int run = lanes == W; /* the lanes W neighbours in memory, in the source and in B */
    for (int w = 1; w < W && run; w++)
      run = sb[w] == sb[0] + w * src->s[D - 1] && src->s[D - 1] == 1 && bb[w] == bb[0] + w;
    if (src->dtype == NDF_F32 && run) {
      const float *p = (const float *)src->data + sb[0];
      for (int64_t i = 0; i < L; i++)
        for (int w = 0; w < W; w++)
          X[i][w] = p[i * sa + w];
    } else if (src->dtype == NDF_F32) {
      const float *p = src->data;
      for (int64_t i = 0; i < L; i++)
        for (int w = 0; w < W; w++)
          X[i][w] = p[sb[w] + i * sa];
    } else {
      for (int64_t i = 0; i < L; i++)
        for (int w = 0; w < W; w++)
          X[i][w] = ndf__load(src->dtype, src->data, sb[w] + i * sa);
    }
    filter_block(f, X, T, L);
    if (run) {
      float *b = B + bb[0];
      for (int64_t i = 0; i < L; i++)
        for (int w = 0; w < W; w++)
          b[i * ba + w] = (float)X[i][w];
    } else {
      for (int64_t i = 0; i < L; i++)
        for (int w = 0; w < lanes; w++)
          B[bb[w] + i * ba] = (float)X[i][w];
    }
  }
}

static int64_t groups(const int64_t n[D], int axis) { return (lines_of(n, axis) + W - 1) / W; }

static int applicable(const ndf__problem *pb, const ndf_context *ctx) {
  (void)ctx;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
}

/* Measured on one core of the CI machine (x86-64 with AVX2, 256^2 x 64): about 1.5 + 0.9 K ns
 * per sample and axis for a cascade of order K, 1.5 + 1.0 K for the parallel form, gathering
 * and storing included (cpu_sep's model alike: FIR is cheaper at 256^3 up to sigma ~ 9). */
static double cost(const ndf__problem *pb, const ndf_context *ctx) {
  const ndf__iirp *q = pb->params;
  double t = 0;
  for (int d = 0; d < pb->in.ndim; d++)
    if (q->ax[d].K)
      t += 1.5e-9 + (q->ax[d].form == NDF__IIR_PARALLEL ? 1.0e-9 : 0.9e-9) * q->ax[d].K;
  return 2e-6 + (double)ndf_array_size(&pb->in) * t / ctx->threads;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  const ndf__iirp *q = p->pb.params;
  const int pad = D - in->ndim, threads = p->ctx->threads;
  int64_t n[D], bs[D];
  const ndf__iir *f[D];
  source sin = {in->data, in->dtype, {0}};
  int64_t nmax = 1;
  for (int d = 0; d < D; d++) {
    n[d] = d < pad ? 1 : in->shape[d - pad];
    sin.s[d] = d < pad ? 0 : in->strides[d - pad];
    f[d] = d >= pad && q->ax[d - pad].K ? &q->ax[d - pad] : NULL;
    if (f[d] && n[d] > nmax) nmax = n[d];
  }
  bs[D - 1] = 1;
  for (int d = D - 2; d >= 0; d--)
    bs[d] = bs[d + 1] * n[d + 1];
  const int64_t N = bs[0] * n[0];
  if (N == 0) return NDF_OK;
  const int direct = out->dtype == NDF_F32 && ndf__is_contiguous(out);
  float *B = direct ? out->data : malloc((size_t)N * sizeof(float));
  if (!B)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_iir: out of host memory (%lld floats)", (long long)N);
  const source sb = {B, NDF_F32, {bs[0], bs[1], bs[2], bs[3]}};
  const int64_t slabs = n[0] * n[1];
  const int slab = (f[2] || f[3]) && slabs >= 2 * threads;
  int fail = 0;
#pragma omp parallel num_threads(threads)
  {
    lanes_t *X = aligned_alloc(sizeof(lanes_t), (size_t)nmax * 2 * sizeof(lanes_t));
    int from_in = 1;
    if (!X) {
#pragma omp atomic write
      fail = 1;
    }
#pragma omp barrier
    if (!fail && slab) {
      const int64_t sn[D] = {1, 1, n[2], n[3]};
#pragma omp for schedule(dynamic, 1)
      for (int64_t s = 0; s < slabs; s++) {
        const int64_t so = s / n[1] * sin.s[0] + s % n[1] * sin.s[1], bo = s * bs[1];
        int first = 1;
        for (int a = D - 1; a >= 2; a--) {
          if (!f[a]) continue;
          lines(f[a], first ? &sin : &sb, first ? so : bo, B, bs, bo, sn, a, 0, groups(sn, a), X,
                X + nmax);
          first = 0;
        }
      }
      from_in = 0;
    }
    for (int a = slab ? 1 : D - 1; a >= 0 && !fail; a--) {
      if (!f[a]) continue;
      const int64_t ng = groups(n, a);
#pragma omp for schedule(static)
      for (int64_t g = 0; g < ng; g++)
        lines(f[a], from_in ? &sin : &sb, 0, B, bs, 0, n, a, g, g + 1, X, X + nmax);
      from_in = 0;
    }
    free(X);
  }
  if (!fail && !direct) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < N; i++)
      ndf__store(out->dtype, out->data, ndf__offset(out, i), B[i]);
  }
  if (!direct) free(B);
  return fail ? ndf__fail(p->ctx, NDF_ENOMEM, "cpu_iir: out of host memory for line buffers")
              : NDF_OK;
}

static ndf_status make(ndf_plan *p) {
  p->state = NULL;
  p->exec = exec;
  p->free_state = NULL;
  return NDF_OK;
}

const ndf__solver ndf__cpu_iir = {
    "cpu_iir", NDF__OP_IIR, NDF_PLACE_HOST, applicable, cost, make,
};
