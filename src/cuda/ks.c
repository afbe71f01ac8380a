/* ks.c - host side of the CUDA kernel-superposition solvers (ks_kernel.cu): the sigma maps and
 * their radii on the device, and the blocks' radius bounds, all made when the plan is.
 *
 *  - cuda_ks_gather: both index modes, any radius, 1-3 axes; bitwise repeatable (the solver
 *    "deterministic" asks for).
 *  - cuda_ks_scatter_{global_atomic, shared_atomic, sync, threadfence, warpsync}: Eq. 2a
 *    (index input), radii up to 32, 1-3 axes. The input's 32 x 8 tiles are grouped by their
 *    largest radius rounded up to 0, 1, 2, 4, 8, 16 or 32, one launch per group. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "host.h"

#define NB 7
static const int buckets[NB] = {0, 1, 2, 4, 8, 16, 32};

typedef struct {
  int variant; /* -1: the gather */
  ndf__ks_geom g;
  float *sig;
  int *rad;
  int *rt;    /* gather: per output tile, 3 radii */
  int *tiles; /* scatter: the input tiles, grouped by bucket */
  int count[NB], first[NB];
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
  g->index_output = q->index == NDF_KS_OUTPUT;
  g->nmap = q->n * q->nsig;
}

static int applicable_gather(const ndf__problem *pb, const ndf_context *ctx) {
  (void)ctx;
  const int nd = pb->in.ndim;
  if (nd > 3 || ndf_array_size(&pb->out) <= 0) return 0;
  /* the launch grid: z over the slices (3-D), y over 8-row tiles */
  const int64_t m0 = nd == 3 ? pb->out.shape[0] : 1, m1 = nd >= 2 ? pb->out.shape[nd - 2] : 1;
  return m0 <= 65535 && (m1 + 7) / 8 <= 65535;
}

static int applicable_scatter(const ndf__problem *pb, const ndf_context *ctx) {
  const ndf__ksp *q = pb->params;
  (void)ctx;
  return pb->in.ndim <= 3 && q->index == NDF_KS_INPUT && q->R <= 32 && !q->deterministic;
}

static double taps(const ndf__problem *pb) {
  const ndf__ksp *q = pb->params;
  double t = 1;
  for (int d = 0; d < pb->in.ndim; d++)
    t *= 2.0 * (double)q->R + 1;
  return t;
}

/* Rough, to be replaced by the benchmark's table: the gather evaluates erf twice a tap and
 * axis; the scatter multiplies and adds, the atomic variants serialising more. */
static double cost_gather(const ndf__problem *pb, const ndf_context *ctx) {
  (void)ctx;
  return 5e-6 + (double)ndf_array_size(&pb->out) * taps(pb) * 2e-11;
}

static double cost_scatter_v(const ndf__problem *pb, int v) {
  static const double f[5] = {8, 3, 2, 1.2, 1};
  return 5e-6 + (double)ndf_array_size(&pb->in) * taps(pb) * 1e-12 * f[v];
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaDeviceSynchronize();
  cudaFree(s->sig);
  cudaFree(s->rad);
  cudaFree(s->rt);
  cudaFree(s->tiles);
  free(s);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  const state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  ndf__contig cg;
  int e = ndf__cuda_contig_begin(&cg, in, 1, out, st);
  float *dst = cg.dst[0];
  const size_t bout = (size_t)ndf_array_size(out) * sizeof(float);
  if (e == 0 && s->variant < 0) {
    e = ndf__launch_ks_gather(cg.src, dst, s->sig, s->rad, &s->g, s->rt, st);
  } else if (e == 0) {
    e = (int)cudaMemsetAsync(dst, 0, bout, st);
    for (int b = 0; b < NB && e == 0; b++)
      e = ndf__launch_ks_scatter(s->variant, buckets[b], cg.src, dst, s->sig, s->rad, &s->g,
                                 s->tiles + s->first[b], s->count[b], st);
  }
  e = ndf__cuda_contig_end(&cg, e, out, st);
  return ndf__cuda_check(p->ctx, e, p->solver->name);
}

static int64_t lmin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t lmax(int64_t a, int64_t b) { return a > b ? a : b; }

/* Per 32 x 8 tile of a grid of shape e (3-D), the largest of val over the tile's elements
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

static ndf_status make_v(ndf_plan *p, int variant) {
  const ndf__ksp *q = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of host memory", p->solver->name);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->variant = variant;
  geometry(q, &p->pb.in, &p->pb.out, &s->g);
  const ndf__ks_geom *g = &s->g;
  const int64_t n = q->n, nm = n * q->nsig;
  int tx, ty;
  ndf__ks_tile_dims(&tx, &ty);
  /* Radii, clipped to what the grid can hold; per element and axis for the tile bounds. */
  int64_t clip = 0; /* and within int */
  for (int a = 0; a < 3; a++)
    clip = lmax(clip, g->m[a] + g->n[a]);
  clip = lmin(clip, (int64_t)1 << 30);
  float *hs = malloc((size_t)(2 * nm) * sizeof *hs);
  int *hr = malloc((size_t)nm * sizeof *hr), *per = malloc((size_t)(3 * n) * sizeof *per);
  int *ht = NULL, *it = NULL, *bk = NULL, *pr = NULL; /* tile tables and scratch */
  ndf_status rs = NDF_OK;
  if (!hs || !hr || !per) goto oom;
  for (int64_t i = 0; i < nm; i++) {
    const double sg = q->sigma[i];
    const int64_t r = ndf__ks_radius(q->n_sigma, sg);
    hs[i] = (float)sg;
    hs[nm + i] = q->normalize ? (float)ndf__ks_norm(q->n_sigma, sg) : 1.f;
    hr[i] = (int)lmin(r, clip);
  }
  for (int64_t i = 0; i < n; i++)
    for (int a = 0; a < 3; a++)
      per[3 * i + a] = g->smap[a] < 0 ? 0 : hr[g->smap[a] * n + i];
  int64_t nt = 0;
  if (variant < 0) { /* per output tile */
    const int64_t ntx = (g->m[2] + tx - 1) / tx, nty = (g->m[1] + ty - 1) / ty;
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
      tile_max(g->m, pr, tx, ty, ht);
    } else { /* input tiles' largest radii, spread over the output tiles they reach */
      const int64_t itx = (g->n[2] + tx - 1) / tx, ity = (g->n[1] + ty - 1) / ty;
      it = calloc((size_t)(3 * itx * ity * g->n[0]), sizeof *it);
      if (!it) goto oom;
      tile_max(g->n, per, tx, ty, it);
      for (int64_t z = 0; z < g->n[0]; z++)
        for (int64_t by = 0; by < ity; by++)
          for (int64_t bx = 0; bx < itx; bx++) {
            const int *r = it + 3 * ((z * ity + by) * itx + bx);
            /* output index range reached on each axis */
            const int64_t z0 = lmax(0, z + g->off[0] - r[0]),
                          z1 = lmin(g->m[0] - 1, z + g->off[0] + r[0]);
            const int64_t y0 = lmax(0, by * ty + g->off[1] - r[1]),
                          y1 = lmin(g->m[1] - 1, (by + 1) * ty - 1 + g->off[1] + r[1]);
            const int64_t x0 = lmax(0, bx * tx + g->off[2] - r[2]),
                          x1 = lmin(g->m[2] - 1, (bx + 1) * tx - 1 + g->off[2] + r[2]);
            for (int64_t oz = z0; oz <= z1; oz++)
              for (int64_t oy = y0 / ty; oy <= y1 / ty; oy++)
                for (int64_t ox = x0 / tx; ox <= x1 / tx; ox++) {
                  int *t = ht + 3 * ((oz * nty + oy) * ntx + ox);
                  for (int a = 0; a < 3; a++)
                    if (r[a] > t[a]) t[a] = r[a];
                }
          }
    }
  } else { /* input tiles grouped by bucket */
    const int64_t itx = (g->n[2] + tx - 1) / tx, ity = (g->n[1] + ty - 1) / ty;
    nt = itx * ity * g->n[0];
    it = calloc((size_t)(3 * nt), sizeof *it);
    bk = malloc((size_t)nt * sizeof *bk);
    ht = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *ht);
    if (!it || !bk || !ht) goto oom;
    tile_max(g->n, per, tx, ty, it);
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
  int **dt = variant < 0 ? &s->rt : &s->tiles;
  const size_t tb = (size_t)(variant < 0 ? 3 * nt : nt) * sizeof(int);
  if (e == cudaSuccess) e = cudaMalloc((void **)dt, want = tb ? tb : sizeof(int));
  if (e == cudaSuccess)
    e = cudaMemcpy(s->sig, hs, (size_t)(2 * nm) * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess)
    e = cudaMemcpy(s->rad, hr, (size_t)nm * sizeof(int), cudaMemcpyHostToDevice);
  if (e == cudaSuccess && tb) e = cudaMemcpy(*dt, ht, tb, cudaMemcpyHostToDevice);
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

static ndf_status make_gather(ndf_plan *p) { return make_v(p, -1); }

const ndf__solver ndf__cuda_ks_gather = {"cuda_ks_gather",  NDF__OP_KS,  NDF_PLACE_CUDA,
                                         applicable_gather, cost_gather, make_gather};

/* One scatter variant's solver: its make and cost pass the variant on. */
#define SCATTER(v, V)                                                                              \
  static ndf_status make_##v(ndf_plan *p) { return make_v(p, V); }                                 \
  static double cost_##v(const ndf__problem *pb, const ndf_context *c) {                           \
    (void)c;                                                                                       \
    return cost_scatter_v(pb, V);                                                                  \
  }                                                                                                \
  const ndf__solver ndf__cuda_ks_scatter_##v = {"cuda_ks_scatter_" #v, NDF__OP_KS, NDF_PLACE_CUDA, \
                                                applicable_scatter,    cost_##v,   make_##v};

SCATTER(global_atomic, NDF__KS_GLOBAL_ATOMIC)
SCATTER(shared_atomic, NDF__KS_SHARED_ATOMIC)
SCATTER(sync, NDF__KS_SYNC)
SCATTER(threadfence, NDF__KS_THREADFENCE)
SCATTER(warpsync, NDF__KS_WARPSYNC)
