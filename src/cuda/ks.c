/* ks.c - host side of the CUDA kernel-superposition solvers (ks_kernel.cu, the scatters;
 * ks_gather_kernel.cu, the gathers): the sigma maps and their radii on the device, the blocks'
 * radius bounds and the gathers' look-up tables, all made when the plan is.
 *
 *  - cuda_ks_gather[_smem1|_smem2]: exact, both index modes, any radius (the shared-memory
 *    ones up to 32), 1-3 axes; bitwise repeatable (the solvers "deterministic" asks for).
 *  - cuda_ks_approx_gather_<lut>[_smem1|_smem2]: da Silva, Ansorge and Jena's look-up-table
 *    gathers, index input, radii up to 64; approximate, so never chosen by auto.
 *  - cuda_ks_scatter_{global_atomic, shared_atomic, sync, threadfence, warpsync, shuffle, quad}:
 *    Eq. 2a (index input), 1-3 axes, any radius. The input's 32 x t_y tiles (128 x t_y for
 *    quad) are grouped by their
 *    largest radius rounded up to 0, 1, 2, 4, 8, 16 or 32, one launch per group; tiles with a
 *    larger radius go to the generic kernel. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "host.h"

#define NB 8
static const int buckets[NB] = {0, 1, 2, 4, 8, 16, 32, 64 /* any: the generic kernel */};

/* The look-up tables' sampling (docs/ks.md gives the errors it makes): erf on [0, 6] at
 * LUT1D_N points (8 KB: a block copies it to shared memory); Eq. 4 at LUT2D_NS sigmas. */
#define LUT1D_N 2048
#define LUT1D_TOP 6.0
#define LUT2D_NS 512
#define LUT_RMAX 64 /* the largest radius the tables serve */

typedef struct {
  int variant; /* -1: a gather */
  int lut, narr, ty, by;
  ndf__ks_geom g;
  float *sig;
  int *rad;
  int *rt;    /* gather: per output tile, 3 radii */
  int *tiles; /* scatter: the input tiles, grouped by bucket */
  int count[NB], first[NB];
  float *tab; /* the gathers' look-up table */
  cudaArray_t arr;
  ndf__ks_lut L;
  size_t smem;
} state;

static void geometry(const ndf__ksp *q, const ndf_array *in, const ndf_array *out,
                     ndf__ks_geom *g) {
  const int pad = 3 - in->ndim;
  memset(g, 0, sizeof *g);
  for (int a = 0; a < 3; a++) {
    const int real = a >= pad;
    g->n[a] = real ? in->shape[a - pad] : 1;
    g->m[a] = real ? out->shape[a - pad] : 1;
    g->off[a] = real && q->extent == NDF_KS_FULL ? q->R : 0;
    g->smap[a] = real ? (q->nsig == 1 ? 0 : a - pad) : -1;
  }
  g->index_output = q->index == NDF_KS_INPUT ? 0 : 1;
  g->nmap = q->n * q->nsig;
  g->scaled = q->normalize;
}

static int shape_built(int ty, int by) {
#define NDF__SHAPE(t, b)                                                                           \
  if (ty == t && by == b) return 1;
  NDF__KS_SHAPES(NDF__SHAPE)
#undef NDF__SHAPE
  return 0;
}

/* The solvers' variants: a scatter's, or a gather's look-up table and shared arrays. */
typedef struct {
  int variant, lut, narr;
} kind;

/* The dynamic shared memory of a gather whose windows have radii up to R on every axis. */
static size_t gather_smem(const ndf__problem *pb, const kind *k, int64_t R) {
  const ndf__ksp *q = pb->params;
  size_t b = k->lut == NDF__KS_LUT1D_SHARED ? (size_t)(LUT1D_N + 1) / 2 * 2 * sizeof(float) : 0;
  if (k->narr > 0) {
    const int nd = pb->in.ndim;
    const int64_t h = nd >= 2 ? q->tile_rows + 2 * R : q->tile_rows, w = nd >= 1 ? 32 + 2 * R : 32;
    b += (size_t)((h * w + 1) / 2 * 2) * sizeof(float);
    if (k->narr > 1) b += (size_t)(q->nsig * h * w) * 2 * sizeof(float);
  }
  return b;
}

static int applicable_k(const ndf__problem *pb, const ndf_context *ctx, const kind *k) {
  const ndf__ksp *q = pb->params;
  const int nd = pb->in.ndim;
  if (nd > 3 || ndf_array_size(&pb->out) <= 0 || !shape_built(q->tile_rows, q->block_rows))
    return 0;
  if (k->variant >= 0) return q->index == NDF_KS_INPUT && !q->deterministic;
  if (k->lut != NDF__KS_EXACT && (q->index != NDF_KS_INPUT || q->R > LUT_RMAX)) return 0;
  /* the launch grid: z over the slices (3-D), y over the tiles' rows */
  const int64_t m0 = nd == 3 ? pb->out.shape[0] : 1, m1 = nd >= 2 ? pb->out.shape[nd - 2] : 1;
  if (m0 > 65535 || (m1 + q->tile_rows - 1) / q->tile_rows > 65535) return 0;
  if (k->narr == 0 && k->lut != NDF__KS_LUT1D_SHARED) return 1;
  if (k->narr > 0 && q->R > 32) return 0;
  int most = 0;
  if (cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->place.device) !=
      cudaSuccess)
    return 0;
  return gather_smem(pb, k, q->R) <= (size_t)most;
}

static double taps(const ndf__problem *pb) {
  const ndf__ksp *q = pb->params;
  double t = 1;
  for (int d = 0; d < pb->in.ndim; d++)
    t *= 2.0 * (double)(q->R < 1000000 ? q->R : 1000000) + 1;
  return t;
}

/* Relative costs from the benchmark (BENCHMARKS.md, H100, 512^2 to 2048^2 and 128^3, sigma
 * uniform): the scatters beat the exact gather 2-29x; among them warpsync is the fastest up to
 * radius 4 and quad from 5 (1.5x warpsync at 32); the atomic ones are 2-10x slower. The exact
 * gather evaluates erf twice a tap and axis. The look-up tables are approximate, never chosen by
 * auto. */
static double cost_k(const ndf__problem *pb, const ndf_context *ctx, const kind *k) {
  const ndf__ksp *q = pb->params;
  (void)ctx;
  if (k->variant < 0 && k->lut != NDF__KS_EXACT) return INFINITY;
  if (k->variant < 0)
    return 5e-6 + (double)ndf_array_size(&pb->out) * taps(pb) * 2e-11 * (1 + 0.1 * k->narr);
  static const double f[7] = {8, 3, 1.2, 1.6, 1, 1.1, 0.7};
  const double v = k->variant == NDF__KS_QUAD && q->R <= 4 ? 1.2 : f[k->variant];
  return 5e-6 + (double)ndf_array_size(&pb->in) * taps(pb) * 1e-12 * v;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaDeviceSynchronize();
  cudaFree(s->sig);
  cudaFree(s->rad);
  cudaFree(s->rt);
  cudaFree(s->tiles);
  cudaFree(s->tab);
  if (s->L.tex) cudaDestroyTextureObject((cudaTextureObject_t)s->L.tex);
  if (s->arr) cudaFreeArray(s->arr);
  free(s);
}

/* The scatter of a variant and tile shape (one function each, ks_kernel.cu). */
static int scatter(int variant, int rm, int ty, int by, const float *in, float *out,
                   const float *sig, const int *rad, const ndf__ks_geom *g, const int *tiles,
                   int ntiles, void *stream) {
  if (ntiles <= 0) return 0;
#define NDF__CALL(v, t, b)                                                                         \
  if (variant == v && ty == t && by == b)                                                          \
    return NDF__KS_SCATTER_FN(v, t, b)(rm, in, out, sig, rad, g, tiles, ntiles, stream);
#define NDF__CALLS(t, b)                                                                           \
  NDF__CALL(0, t, b)                                                                               \
  NDF__CALL(1, t, b)                                                                               \
  NDF__CALL(2, t, b) NDF__CALL(3, t, b) NDF__CALL(4, t, b) NDF__CALL(5, t, b) NDF__CALL(6, t, b)
  NDF__KS_SHAPES(NDF__CALLS)
#undef NDF__CALLS
#undef NDF__CALL
  return (int)cudaErrorInvalidValue;
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  const state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  ndf__contig cg;
  int e = ndf__cuda_contig_begin(&cg, in, 1, out, st);
  float *dst = cg.dst[0];
  const size_t bout = (size_t)ndf_array_size(out) * sizeof(float);
  if (e == 0 && s->variant < 0) {
    e = ndf__launch_ks_gather(s->lut, s->narr, s->ty, s->by, cg.src, dst, s->sig, s->rad, &s->g,
                              s->rt, &s->L, s->smem, st);
  } else if (e == 0) {
    e = (int)cudaMemsetAsync(dst, 0, bout, st);
    for (int b = 0; b < NB && e == 0; b++)
      e = scatter(s->variant, buckets[b], s->ty, s->by, cg.src, dst, s->sig, s->rad, &s->g,
                  s->tiles + s->first[b], s->count[b], st);
  }
  e = ndf__cuda_contig_end(&cg, e, out, st);
  return ndf__cuda_check(p->ctx, e, p->solver->name);
}

static int64_t lmin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t lmax(int64_t a, int64_t b) { return a > b ? a : b; }

/* Per tx x ty tile of a grid of shape e (3-D), the largest of val over the tile's elements
 * (3 per element: one per axis) into t (3 per tile). */
static void tile_max(const int64_t e[3], const int *val, int tx, int ty, int *t) {
  const int64_t ntx = (e[2] + tx - 1) / tx, nty = (e[1] + ty - 1) / ty;
  for (int64_t z = 0; z < e[0]; z++)
    for (int64_t y = 0; y < e[1]; y++)
      for (int64_t x = 0; x < e[2]; x++) {
        const int64_t i = (z * e[1] + y) * e[2] + x, ti = (z * nty + y / ty) * ntx + x / tx;
        for (int a = 0; a < 3; a++)
          if (val[3 * i + a] > t[3 * ti + a]) t[3 * ti + a] = val[3 * i + a];
      }
}

/* The look-up table of s->lut on the device (and its texture): 1-D, erf(i h); 2-D, Eq. 4 at d
 * < nd and sigma j / sinv (float64, rounded once) for the maps' largest sigma smax. */
static int make_lut(state *s, double smax, int64_t rmax) {
  const int one = s->lut <= NDF__KS_LUT1D_TEXTURE;
  ndf__ks_lut *L = &s->L;
  int w, h;
  if (one) {
    L->n = LUT1D_N;
    L->inv_h = (float)((LUT1D_N - 1) / LUT1D_TOP);
    w = LUT1D_N, h = 1;
  } else {
    L->nd = (int)rmax + 1;
    L->ns = LUT2D_NS;
    L->sinv = smax > 0 ? (float)((LUT2D_NS - 1) / smax) : 0.f;
    w = L->nd, h = LUT2D_NS;
  }
  float *t = malloc((size_t)w * (size_t)h * sizeof *t);
  if (!t) return (int)cudaErrorMemoryAllocation;
  for (int j = 0; j < h; j++)
    for (int i = 0; i < w; i++) {
      double v;
      if (one) {
        v = erf(i * (LUT1D_TOP / (LUT1D_N - 1)));
      } else { /* Eq. 4 for d = i, sigma s */
        const double sg = smax * j / (LUT2D_NS - 1), c = 1 / (sqrt(2.0) * sg);
        v = sg == 0  ? i == 0
            : i == 0 ? erf(0.5 * c)
                     : 0.5 * (erfc((i - 0.5) * c) - erfc((i + 0.5) * c));
      }
      t[(size_t)j * w + i] = (float)v;
    }
  const size_t bytes = (size_t)w * (size_t)h * sizeof *t;
  cudaError_t e = cudaMalloc((void **)&s->tab, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(s->tab, t, bytes, cudaMemcpyHostToDevice);
  L->tab = s->tab;
  if (e == cudaSuccess && (s->lut == NDF__KS_LUT1D_TEXTURE || s->lut == NDF__KS_LUT2D_TEXTURE)) {
    const struct cudaChannelFormatDesc f =
        cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    e = cudaMallocArray(&s->arr, &f, (size_t)w, one ? 0 : (size_t)h, 0);
    if (e == cudaSuccess)
      e = cudaMemcpy2DToArray(s->arr, 0, 0, t, (size_t)w * sizeof *t, (size_t)w * sizeof *t,
                              (size_t)h, cudaMemcpyHostToDevice);
    struct cudaResourceDesc rd;
    struct cudaTextureDesc td;
    memset(&rd, 0, sizeof rd);
    memset(&td, 0, sizeof td);
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = s->arr;
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModeLinear; /* 9-bit interpolation weights */
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t tex = 0;
    if (e == cudaSuccess) e = cudaCreateTextureObject(&tex, &rd, &td, NULL);
    L->tex = (unsigned long long)tex;
  }
  free(t);
  return (int)e;
}

static ndf_status make_k(ndf_plan *p, const kind *k) {
  const ndf__ksp *q = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of host memory", p->solver->name);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->variant = k->variant;
  s->lut = k->lut;
  s->narr = k->narr;
  s->ty = q->tile_rows;
  s->by = q->block_rows;
  const int ty = s->ty;
  geometry(q, &p->pb.in, &p->pb.out, &s->g);
  const ndf__ks_geom *g = &s->g;
  const int64_t n = q->n, nm = n * q->nsig;
  /* Radii, clipped to what the grid can hold; per element and axis for the tile bounds. */
  int64_t clip = 0; /* and within int */
  for (int a = 0; a < 3; a++)
    clip = lmax(clip, g->m[a] + g->n[a]);
  clip = lmin(clip, (int64_t)1 << 30);
  float *hs = malloc((size_t)(2 * nm) * sizeof *hs);
  int *hr = malloc((size_t)nm * sizeof *hr), *per = malloc((size_t)(3 * n) * sizeof *per);
  int *ht = NULL, *it = NULL, *bk = NULL, *pr = NULL; /* tile tables and scratch */
  ndf_status rs = NDF_OK;
  double smax = 0;
  int64_t rmax = 0;
  if (!hs || !hr || !per) goto oom;
  for (int64_t i = 0; i < nm; i++) {
    const double sg = q->sigma[i];
    const int64_t r = ndf__ks_radius(q->n_sigma, sg);
    hs[i] = (float)sg;
    hs[nm + i] = q->normalize ? (float)ndf__ks_norm(q->n_sigma, sg) : 1.f;
    hr[i] = (int)lmin(r, clip);
    smax = sg > smax ? sg : smax;
    rmax = lmax(rmax, hr[i]);
  }
  for (int64_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++)
      per[3 * i + a] = g->smap[a] < 0 ? 0 : hr[g->smap[a] * n + i];
  int64_t nt = 0;
  if (k->variant < 0) { /* per output tile */
    const int64_t ntx = (g->m[2] + 31) / 32, nty = (g->m[1] + ty - 1) / ty;
    nt = ntx * nty * g->m[0];
    ht = calloc((size_t)(3 * nt), sizeof *ht);
    if (!ht) goto oom;
    if (g->index_output) { /* the radii at each output element's nearest input pixel */
      pr = malloc((size_t)(3 * ndf_array_size(&p->pb.out)) * sizeof *pr);
      if (!pr) goto oom;
      for (int64_t z = 0; z < g->m[0]; z++)
        for (int64_t y = 0; y < g->m[1]; y++)
          for (int64_t x = 0; x < g->m[2]; x++) {
            const int64_t c[3] = {lmin(lmax(z - g->off[0], 0), g->n[0] - 1),
                                  lmin(lmax(y - g->off[1], 0), g->n[1] - 1),
                                  lmin(lmax(x - g->off[2], 0), g->n[2] - 1)};
            const int64_t i = (c[0] * g->n[1] + c[1]) * g->n[2] + c[2],
                          o = (z * g->m[1] + y) * g->m[2] + x;
            for (int a = 0; a < 3; a++)
              pr[3 * o + a] = per[3 * i + a];
          }
      tile_max(g->m, pr, 32, ty, ht);
    } else { /* input tiles' largest radii, spread over the output tiles they reach */
      const int64_t itx = (g->n[2] + 31) / 32, ity = (g->n[1] + ty - 1) / ty;
      it = calloc((size_t)(3 * itx * ity * g->n[0]), sizeof *it);
      if (!it) goto oom;
      tile_max(g->n, per, 32, ty, it);
      for (int64_t z = 0; z < g->n[0]; z++)
        for (int64_t by = 0; by < ity; by++)
          for (int64_t bx = 0; bx < itx; bx++) {
            const int *r = it + 3 * ((z * ity + by) * itx + bx);
            /* output index range reached on each axis */
            const int64_t z0 = lmax(0, z + g->off[0] - r[0]),
                          z1 = lmin(g->m[0] - 1, z + g->off[0] + r[0]);
            const int64_t y0 = lmax(0, by * ty + g->off[1] - r[1]),
                          y1 = lmin(g->m[1] - 1, (by + 1) * ty - 1 + g->off[1] + r[1]);
            const int64_t x0 = lmax(0, bx * 32 + g->off[2] - r[2]),
                          x1 = lmin(g->m[2] - 1, (bx + 1) * 32 - 1 + g->off[2] + r[2]);
            for (int64_t oz = z0; oz <= z1; oz++)
              for (int64_t oy = y0 / ty; oy <= y1 / ty; oy++)
                for (int64_t ox = x0 / 32; ox <= x1 / 32; ox++) {
                  int *t = ht + 3 * ((oz * nty + oy) * ntx + ox);
                  for (int a = 0; a < 3; a++)
                    if (r[a] > t[a]) t[a] = r[a];
                }
          }
    }
    int64_t wr = 0; /* the widest window */
    for (int64_t i = 0; i < 3 * nt; i++)
      if (i % 3) wr = lmax(wr, ht[i]);
    s->smem = gather_smem(&p->pb, k, wr);
  } else { /* input tiles grouped by bucket */
    const int tw = k->variant == NDF__KS_QUAD ? 128 : 32;
    const int64_t itx = (g->n[2] + tw - 1) / tw, ity = (g->n[1] + ty - 1) / ty;
    nt = itx * ity * g->n[0];
    it = calloc((size_t)(3 * nt), sizeof *it);
    bk = malloc((size_t)nt * sizeof *bk);
    ht = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *ht);
    if (!it || !bk || !ht) goto oom;
    tile_max(g->n, per, tw, ty, it);
    for (int64_t t = 0; t < nt; t++) {
      const int r = it[3 * t] > it[3 * t + 1] ? it[3 * t] : it[3 * t + 1];
      const int rr = r > it[3 * t + 2] ? r : it[3 * t + 2];
      int b = 0;
      while (b < NB - 1 && buckets[b] < rr)
        b++;
      bk[t] = b;
      s->count[b]++;
    }
    for (int b = 1; b < NB; b++)
      s->first[b] = s->first[b - 1] + s->count[b - 1];
    int fill[NB];
    memcpy(fill, s->first, sizeof fill);
    for (int64_t t = 0; t < nt; t++)
      ht[fill[bk[t]]++] = (int)t;
  }
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  size_t want = 0;
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->sig, want = (size_t)(2 * nm) * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->rad, want = (size_t)nm * sizeof(int));
  int **dt = k->variant < 0 ? &s->rt : &s->tiles;
  const size_t tb = (size_t)(k->variant < 0 ? 3 * nt : nt) * sizeof(int);
  if (e == cudaSuccess) e = cudaMalloc((void **)dt, want = tb ? tb : sizeof(int));
  if (e == cudaSuccess)
    e = cudaMemcpy(s->sig, hs, (size_t)(2 * nm) * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess)
    e = cudaMemcpy(s->rad, hr, (size_t)nm * sizeof(int), cudaMemcpyHostToDevice);
  if (e == cudaSuccess && tb) e = cudaMemcpy(*dt, ht, tb, cudaMemcpyHostToDevice);
  if (e == cudaSuccess && k->variant < 0 && k->lut != NDF__KS_EXACT)
    e = (cudaError_t)make_lut(s, smax, rmax);
  if (e == cudaErrorMemoryAllocation)
    rs = ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of device memory for %zu bytes", p->solver->name,
                   want);
  else
    rs = ndf__cuda_check(p->ctx, e, p->solver->name);
done:
  free(hs);
  free(hr);
  free(per);
  free(ht);
  free(it);
  free(bk);
  free(pr);
  return rs;
oom:
  rs = ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of host memory", p->solver->name);
  goto done;
}

/* One solver: its kind, and its applicable, cost and make passing the kind on. */
#define NDF__KS_SOLVER(name, v, l, a)                                                              \
  static const kind kind_##name = {v, l, a};                                                       \
  static int applicable_##name(const ndf__problem *pb, const ndf_context *c) {                     \
    return applicable_k(pb, c, &kind_##name);                                                      \
  }                                                                                                \
  static double cost_##name(const ndf__problem *pb, const ndf_context *c) {                        \
    return cost_k(pb, c, &kind_##name);                                                            \
  }                                                                                                \
  static ndf_status make_##name(ndf_plan *p) { return make_k(p, &kind_##name); }                   \
  const ndf__solver ndf__##name = {                                                                \
      #name, NDF__OP_KS, NDF_PLACE_CUDA, applicable_##name, cost_##name, make_##name, NULL};
NDF__CUDA_KS_SOLVERS(NDF__KS_SOLVER)
