/* SPDX-License-Identifier: BSD-3-Clause */
/* ks.c - host side of the CUDA kernel-superposition solvers (ks_kernel.cu, the scatters;
 * ks_gather_kernel.cu, the gathers; ks_prep_kernel.cu, the maps' preparation): the plan's
 * buffers, and the preparation of the maps on the device (their float32 sigmas, scales and
 * radii, their check, the tiles' radius tables), once when the plan binds them, at each execute
 * when they are operands.
 *
 *  - cuda_ks_gather[_smem1|_smem2]: exact, both index modes, any radius (the shared-memory
 *    ones up to 32), 1-3 axes; bitwise repeatable (the solvers "deterministic" asks for).
 *  - cuda_ks_approx_gather_<lut>[_smem1|_smem2]: da Silva, Ansorge and Jena's look-up-table
 *    gathers, index input, radii up to 64; approximate, so never chosen by auto.
 *  - cuda_ks_scatter_{global_atomic, shared_atomic, sync, threadfence, warpsync, shuffle, quad}:
 *    Eq. 2a (index input), 1-3 axes, any radius. The input's 32 x t_y tiles (128 x t_y for
 *    quad) are listed by their largest radius rounded up to 0, 1, 2, 4, 8, 16 or 32, one launch
 *    per list up to the plan's bound; tiles with a larger radius go to the generic kernel. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <omp.h>

#include "../core/elem.h"
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
  int lut_kind, narr, ty, by, tw;
  ndf__ks_geom g;
  int64_t R;     /* the largest radius the plan may meet, clipped to the grids */
  int64_t nt;    /* the scatter's input tiles; the gather's output tiles */
  int64_t nit;   /* the gather's input tiles (index input) */
  int bmax;      /* the scatter's last bucket that may hold tiles */
  int bmin;      /* its first: on small arrays whose counts are known on the device only, the
                  * tiles of radius up to 4 share bucket 4's launch (the launches cost more than
                  * the smaller kernels save there) */
  int count[NB]; /* bound maps: the scatter's tiles a bucket; -1: known on the device only */
  float *sig;    /* the maps' float32 sigmas, then their scales */
  int *rad;      /* their radii */
  /* ~ the first bad value's index (0: none), on the device (at the head of tab) and pinned;
   * v_bad (a scatter with operand maps; else NULL): h_bad as the device sees it, where ks_bucket
   * writes the verdict. Such a plan keeps its tables clean between calls (ks_prep_kernel.cu);
   * dirty: a call went wrong, clear them all first. */
  unsigned long long *bad, *h_bad, *v_bad;
  int dirty;
  int *tab;             /* bad (2 ints), then the tile tables: zeroed for each preparation */
  int *it, *rt, *lists; /* in tab: input tiles' radii, output tiles' radii, bucket lists */
  size_t tab_bytes;
  double *h_maps, *d_maps; /* host operand maps: packed (pinned) and on the device */
  float *table;            /* the gathers' look-up table */
  cudaArray_t arr;
  ndf__ks_lut L;
  size_t smem;
  pthread_mutex_t lock; /* the buffers serve one call at a time */
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

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  const kind *k = self->arg;
  const ndf__ksp *q = pb->params;
  const int nd = pb->in.ndim;
  if (nd > 3 || ndf_array_size(&pb->out) <= 0 || !shape_built(q->tile_rows, q->block_rows))
    return 0;
  if (k->variant >= 0) return q->index == NDF_KS_INPUT && !q->deterministic;
  const int64_t R = ndf__ks_bound(pb);
  if (k->lut != NDF__KS_EXACT && (q->index != NDF_KS_INPUT || R < 0 || R > LUT_RMAX)) return 0;
  /* the launch grid: z over the slices (3-D), y over the tiles' rows */
  const int64_t m0 = nd == 3 ? pb->out.shape[0] : 1, m1 = nd >= 2 ? pb->out.shape[nd - 2] : 1;
  if (m0 > 65535 || (m1 + q->tile_rows - 1) / q->tile_rows > 65535) return 0;
  if (k->narr == 0 && k->lut != NDF__KS_LUT1D_SHARED) return 1;
  if (k->narr > 0 && (R < 0 || R > 32)) return 0;
  int most = 0;
  if (cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->place.device) !=
      cudaSuccess)
    return 0;
  return gather_smem(pb, k, R < 0 ? 0 : R) <= (size_t)most;
}

static double taps(const ndf__problem *pb) {
  const int64_t R = ndf__ks_radius_estimate(pb);
  double t = 1;
  for (int d = 0; d < pb->in.ndim; d++)
    t *= 2.0 * (double)(R < 1000000 ? R : 1000000) + 1;
  return t;
}

/* Relative costs from the benchmark (BENCHMARKS.md, H100, 512^2 to 2048^2 and 128^3, sigma
 * uniform): the scatters beat the exact gather 2-29x; among them warpsync is the fastest up to
 * radius 4 and quad from 5 (1.5x warpsync at 32); the atomic ones are 2-10x slower. The exact
 * gather evaluates erf twice a tap and axis. The look-up tables are approximate, never chosen by
 * auto. The absolute figures scale with the device's multiprocessors x clock. */
static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  const kind *k = self->arg;
  const ndf__ksp *q = pb->params;
  const double rate = ndf__rate_scale(ctx);
  if (k->variant < 0 && k->lut != NDF__KS_EXACT) return INFINITY;
  if (k->variant < 0)
    return 5e-6 + (double)ndf_array_size(&pb->out) * taps(pb) * 2e-11 * (1 + 0.1 * k->narr) / rate;
  static const double f[7] = {8, 3, 1.2, 1.6, 1, 1.1, 0.7};
  const double v = k->variant == NDF__KS_QUAD && q->R <= 4 ? 1.2 : f[k->variant];
  return 5e-6 + (double)ndf_array_size(&pb->in) * taps(pb) * 1e-12 * v / rate;
}

static void free_state(void *v) {
  state *s = v;
  if (!s) return;
  cudaFree(s->sig);
  cudaFree(s->rad);
  cudaFreeHost(s->h_bad);
  cudaFree(s->tab);
  cudaFreeHost(s->h_maps);
  cudaFree(s->d_maps);
  cudaFree(s->table);
  if (s->L.tex) cudaDestroyTextureObject((cudaTextureObject_t)s->L.tex);
  if (s->arr) cudaFreeArray(s->arr);
  pthread_mutex_destroy(&s->lock);
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

/* A view of n float64 values, contiguous, of in's shape, on the device. */
static ndf__view4 flat_view(const ndf_array *in) {
  ndf_array a = ndf_array_contiguous(NDF_F64, in->ndim, in->shape, NULL);
  return ndf__cuda_view4(&a);
}

/* Queues the preparation of the maps (nsig device views, or the plan's copy of host ones):
 * their sigmas, scales and radii, the check, and the tile tables. */
static int prepare(const ndf_plan *p, state *s, const ndf__ks_maps *M, cudaStream_t st) {
  const ndf__ksp *q = p->pb.params;
  const ndf__ks_geom *g = &s->g;
  const int same_grid = q->extent == NDF_KS_SAME;
  if (!s->v_bad || s->dirty) { /* bad, then the tables */
    cudaError_t e = cudaMemsetAsync(s->tab, 0, s->tab_bytes, st);
    if (e != cudaSuccess) return (int)e;
  }
  if (s->variant >= 0) { /* v_bad: ks_bucket runs with the output, at exec */
    int r = ndf__launch_ks_maps(M, g, s->sig, s->rad, s->bad, s->it, s->tw, s->ty,
                                s->v_bad ? s->lists : NULL, s->nt, st);
    return r || s->v_bad
               ? r
               : ndf__launch_ks_bucket(s->it, s->nt, s->lists, 0, NULL, 0, s->bad, NULL, st);
  }
  if (!g->index_output) {
    int r = ndf__launch_ks_maps(M, g, s->sig, s->rad, s->bad, s->it, 32, s->ty, NULL, 0, st);
    return r ? r : ndf__launch_ks_spread(g, s->it, s->rt, s->ty, st);
  }
  if (same_grid)
    return ndf__launch_ks_maps(M, g, s->sig, s->rad, s->bad, s->rt, 32, s->ty, NULL, 0, st);
  int r = ndf__launch_ks_maps(M, g, s->sig, s->rad, s->bad, NULL, 32, s->ty, NULL, 0, st);
  return r ? r : ndf__launch_ks_out_tiles(g, s->rad, s->rt, s->ty, st);
}

/* The maps' description for prepare: ops (the execute's maps; NULL: the plan's bound maps, in
 * d_maps), host ones packed into h_maps and copied to d_maps first. */
static int maps_of(const ndf_plan *p, state *s, const ndf_array *ops, ndf__ks_maps *M,
                   cudaStream_t st) {
  const ndf__ksp *q = p->pb.params;
  const int64_t n = q->n;
  memset(M, 0, sizeof *M);
  M->nsig = q->nsig;
  M->normalize = q->normalize;
  M->n = n;
  M->r_max = q->r_max;
  M->clip = s->R;
  M->n_sigma = q->n_sigma;
  cudaError_t e = cudaSuccess;
  for (int m = 0; m < q->nsig && e == cudaSuccess; m++) {
    const ndf_array *a = ops ? &ops[m] : NULL;
    if (a && a->place.kind == NDF_PLACE_CUDA) {
      M->data[m] = a->data;
      M->dtype[m] = (int)a->dtype;
      M->v[m] = ndf__cuda_view4(a);
      continue;
    }
    if (a) {
      double *h = s->h_maps + m * n;
      const int T = p->ctx->threads;
#pragma omp parallel num_threads(T)
      { /* each thread a range, walked without a division per element */
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        ndf__walker w;
        ndf__walk_at(&w, a, lo);
        for (int64_t i = lo; i < hi; i++, ndf__walk_next(&w, a))
          h[i] = ndf__load(a->dtype, a->data, w.off);
      }
      e = cudaMemcpyAsync(s->d_maps + m * n, h, (size_t)n * sizeof(double), cudaMemcpyHostToDevice,
                          st);
    }
    M->data[m] = s->d_maps + m * n;
    M->dtype[m] = NDF_F64;
    M->v[m] = flat_view(&p->pb.in);
  }
  return (int)e;
}

/* The message for the bad value at flat index k of the maps (ops, or the bound ones). */
static ndf_status bad_value(const ndf_plan *p, const ndf_array *ops, unsigned long long k) {
  const ndf__ksp *q = p->pb.params;
  const int m = (int)(k / (unsigned long long)q->n);
  const int64_t i = (int64_t)(k % (unsigned long long)q->n);
  double v = NAN;
  if (ops && ops[m].place.kind == NDF_PLACE_CUDA) {
    const size_t es = ndf_dtype_size(ops[m].dtype);
    unsigned char buf[8];
    if (cudaMemcpy(buf, (const char *)ops[m].data + ndf__offset(&ops[m], i) * (int64_t)es, es,
                   cudaMemcpyDeviceToHost) == cudaSuccess)
      v = ndf__load(ops[m].dtype, buf, 0);
  } else if (ops) {
    v = ndf__load(ops[m].dtype, ops[m].data, ndf__offset(&ops[m], i));
  }
  return ndf__ks_bad_map(p->ctx, q->n_sigma, q->r_max, m, i, v);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  state *s = p->state;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  pthread_mutex_lock(&s->lock);
  ndf__ks_maps M;
  int e = 0;
  if (p->pb.nops) {
    e = maps_of(p, s, ops, &M, st);
    if (e == 0) e = prepare(p, s, &M, st);
  }
  ndf__contig cg;
  e = e ? e : ndf__cuda_contig_begin(&cg, in, 1, out, st);
  const int begun = e == 0;
  float *dst = begun ? cg.dst[0] : NULL;
  const ndf__ks_geom *g = &s->g;
  if (e == 0 && s->variant < 0) {
    e = ndf__launch_ks_gather(s->lut_kind, s->narr, s->ty, s->by, cg.src, dst, s->sig, s->rad, g,
                              s->rt, &s->L, s->smem, st);
  } else if (e == 0 && s->v_bad) { /* the lists, and the output zeroed */
    e = ndf__launch_ks_bucket(s->it, s->nt, s->lists, s->bmin, dst, ndf_array_size(out), s->bad,
                              s->v_bad, st);
  } else if (e == 0) {
    e = ndf__launch_ks_zero(dst, ndf_array_size(out), s->bad, st);
  }
  if (e == 0 && s->variant >= 0) {
    for (int b = s->bmin; b <= s->bmax && e == 0; b++) {
      const int grid = s->count[b] >= 0 ? s->count[b] : (int)s->nt;
      e = scatter(s->variant, buckets[b], s->ty, s->by, cg.src, dst, s->sig, s->rad, g,
                  s->lists + b * (s->nt + 1), grid, st);
    }
  }
  unsigned long long badk = 0;
  if (p->pb.nops && e == 0) { /* the check's verdict, before anything leaves the plan */
    if (!s->v_bad)
      e = (int)cudaMemcpyAsync(s->h_bad, s->bad, sizeof *s->h_bad, cudaMemcpyDeviceToHost, st);
    if (e == 0) e = (int)cudaStreamSynchronize(st);
    if (e == 0) badk = *(volatile unsigned long long *)s->h_bad;
  }
  s->dirty = e != 0 || badk != 0;
  if (begun) e = ndf__cuda_contig_end(&cg, badk && e == 0 ? -1 : e, out, st);
  ndf_status r = badk ? bad_value(p, ops, ~badk) : ndf__cuda_check(p->ctx, e, p->solver->name);
  pthread_mutex_unlock(&s->lock);
  return r;
}

/* The look-up table of s->lut_kind on the device (and its texture): 1-D, erf(i h); 2-D, Eq. 4 at d
 * < nd and sigma j / sinv (float64, rounded once) for sigmas up to smax. */
static int make_lut(state *s, double smax, int64_t rmax) {
  const int one = s->lut_kind <= NDF__KS_LUT1D_TEXTURE;
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
  cudaError_t e = cudaMalloc((void **)&s->table, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(s->table, t, bytes, cudaMemcpyHostToDevice);
  L->tab = s->table;
  if (e == cudaSuccess &&
      (s->lut_kind == NDF__KS_LUT1D_TEXTURE || s->lut_kind == NDF__KS_LUT2D_TEXTURE)) {
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

static int64_t lmin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t lmax(int64_t a, int64_t b) { return a > b ? a : b; }

/* The bucket of radius r: the first of buckets[] at least r, the last past 32. */
static int bucket_of(int64_t r) {
  int b = 0;
  while (b < NB - 1 && buckets[b] < r)
    b++;
  return b;
}

static ndf_status make(ndf_plan *p) {
  const kind *k = p->solver->arg;
  const ndf__ksp *q = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of host memory", p->solver->name);
  pthread_mutex_init(&s->lock, NULL);
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->variant = k->variant;
  s->lut_kind = k->lut;
  s->narr = k->narr;
  s->ty = q->tile_rows;
  s->by = q->block_rows;
  s->tw = k->variant == NDF__KS_QUAD ? 128 : 32;
  geometry(q, &p->pb.in, &p->pb.out, &s->g);
  ndf__ks_geom *g = &s->g;
  const int64_t n = q->n, nm = n * q->nsig, ty = s->ty;
  /* Radii are clipped to what the grids can hold, and kept within int. */
  int64_t clip = 0;
  for (int a = 0; a < 3; a++)
    clip = lmax(clip, g->m[a] + g->n[a]);
  clip = lmin(clip, (int64_t)1 << 30);
  const int64_t bound = ndf__ks_bound(&p->pb);
  s->R = bound < 0 ? clip : lmin(bound, clip);
  const int64_t itx = (g->n[2] + s->tw - 1) / s->tw, ity = (g->n[1] + ty - 1) / ty;
  const int64_t nit = itx * ity * g->n[0];
  size_t tab = 0; /* ints */
  if (k->variant >= 0) {
    s->nt = nit;
    tab = (size_t)(3 * nit + NB * (nit + 1));
    s->bmax = bucket_of(s->R);
  } else {
    s->nt = (g->m[2] + 31) / 32 * ((g->m[1] + ty - 1) / ty) * g->m[0];
    s->nit = g->index_output ? 0 : nit;
    tab = (size_t)(3 * s->nt + 3 * s->nit);
    s->smem = gather_smem(&p->pb, k, s->R);
  }
  s->tab_bytes = (tab + 2) * sizeof(int);
  for (int b = 0; b < NB; b++)
    s->count[b] = -1;
  const int operands = p->pb.nops > 0;
  int any_host = !operands;
  for (int m = 0; m < q->nsig && operands; m++)
    any_host |= p->pb.ops[m].place.kind == NDF_PLACE_HOST;
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  size_t want = 0;
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->sig, want = (size_t)(2 * nm) * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->rad, want = (size_t)nm * sizeof(int));
  if (e == cudaSuccess) e = cudaMallocHost((void **)&s->h_bad, want = sizeof *s->h_bad);
  if (e == cudaSuccess && k->variant >= 0 && operands &&
      cudaHostGetDevicePointer((void **)&s->v_bad, s->h_bad, 0) != cudaSuccess)
    s->v_bad = NULL; /* an unmapped h_bad: the verdict comes by copy */
  cudaGetLastError();
  s->dirty = 1;
  if (s->v_bad && n <= ((int64_t)1 << 20))
    s->bmin = s->bmax < bucket_of(4) ? s->bmax : bucket_of(4);
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->tab, want = s->tab_bytes);
  if (e == cudaSuccess && any_host)
    e = cudaMalloc((void **)&s->d_maps, want = (size_t)nm * sizeof(double));
  if (e == cudaSuccess && any_host && operands)
    e = cudaMallocHost((void **)&s->h_maps, want = (size_t)nm * sizeof(double));
  if (e == cudaSuccess) {
    s->it = s->tab + 2;
    s->rt = k->variant >= 0 ? NULL : s->it + 3 * s->nit;
    s->lists = k->variant >= 0 ? s->it + 3 * nit : NULL;
    s->bad = (unsigned long long *)s->tab;
    g->bad = s->bad;
  }
  if (e == cudaSuccess && k->variant < 0 && k->lut != NDF__KS_EXACT) {
    /* bound maps: their largest sigma; operands: the largest a radius up to r_max allows (r_max,
     * not the radius the grids clip to: a sigma past that still meets the table) */
    double smax = (double)(operands ? bound : s->R) / q->n_sigma;
    for (int64_t i = 0; i < nm && !operands; i++)
      smax = i == 0 || q->sigma[i] > smax ? q->sigma[i] : smax;
    e = (cudaError_t)make_lut(s, smax, s->R);
  }
  if (e == cudaSuccess && !operands) { /* bound maps: prepared once, here */
    ndf__ks_maps M;
    cudaStream_t st = (cudaStream_t)p->ctx->stream;
    e = cudaMemcpy(s->d_maps, q->sigma, (size_t)nm * sizeof(double), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = (cudaError_t)maps_of(p, s, NULL, &M, st);
    if (e == cudaSuccess) e = (cudaError_t)prepare(p, s, &M, st);
    int counts[NB];
    for (int b = 0; b < NB && e == cudaSuccess && k->variant >= 0; b++)
      e = cudaMemcpyAsync(&counts[b], s->lists + b * (s->nt + 1), sizeof(int),
                          cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    for (int b = 0; b < NB && e == cudaSuccess && k->variant >= 0; b++)
      s->count[b] = counts[b];
    if (e == cudaSuccess) {
      cudaFree(s->d_maps);
      s->d_maps = NULL;
    }
  }
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(p->ctx, NDF_ENOMEM, "%s: out of device memory for %zu bytes", p->solver->name,
                     want);
  return ndf__cuda_check(p->ctx, e, p->solver->name);
}

/* The family: a scatter variant, or a gather's way of evaluating Eq. 4 and its shared arrays,
 * each entry one solver, in the order the planner meets them. */
static const kind kinds[] = {
    {NDF__KS_QUAD, NDF__KS_EXACT, 0},
    {NDF__KS_SHUFFLE, NDF__KS_EXACT, 0},
    {NDF__KS_WARPSYNC, NDF__KS_EXACT, 0},
    {NDF__KS_THREADFENCE, NDF__KS_EXACT, 0},
    {NDF__KS_SYNC, NDF__KS_EXACT, 0},
    {NDF__KS_SHARED_ATOMIC, NDF__KS_EXACT, 0},
    {NDF__KS_GLOBAL_ATOMIC, NDF__KS_EXACT, 0},
    {-1, NDF__KS_EXACT, 0},
    {-1, NDF__KS_EXACT, 1},
    {-1, NDF__KS_EXACT, 2},
    {-1, NDF__KS_LUT1D_GLOBAL, 0},
    {-1, NDF__KS_LUT1D_GLOBAL, 1},
    {-1, NDF__KS_LUT1D_GLOBAL, 2},
    {-1, NDF__KS_LUT1D_SHARED, 0},
    {-1, NDF__KS_LUT1D_SHARED, 1},
    {-1, NDF__KS_LUT1D_SHARED, 2},
    {-1, NDF__KS_LUT1D_TEXTURE, 0},
    {-1, NDF__KS_LUT1D_TEXTURE, 1},
    {-1, NDF__KS_LUT1D_TEXTURE, 2},
    {-1, NDF__KS_LUT2D_GLOBAL, 0},
    {-1, NDF__KS_LUT2D_GLOBAL, 1},
    {-1, NDF__KS_LUT2D_GLOBAL, 2},
    {-1, NDF__KS_LUT2D_TEXTURE, 0},
    {-1, NDF__KS_LUT2D_TEXTURE, 1},
    {-1, NDF__KS_LUT2D_TEXTURE, 2},
};

#define K(i, n)                                                                                    \
  {                                                                                                \
    .name = n, .op = NDF__OP_KS, .place = NDF_PLACE_CUDA, .applicable = applicable, .cost = cost,  \
    .make = make, .arg = &kinds[i]                                                                 \
  }
const ndf__solver ndf__cuda_ks[] = {
    K(0, "cuda_ks_scatter_quad"),
    K(1, "cuda_ks_scatter_shuffle"),
    K(2, "cuda_ks_scatter_warpsync"),
    K(3, "cuda_ks_scatter_threadfence"),
    K(4, "cuda_ks_scatter_sync"),
    K(5, "cuda_ks_scatter_shared_atomic"),
    K(6, "cuda_ks_scatter_global_atomic"),
    K(7, "cuda_ks_gather"),
    K(8, "cuda_ks_gather_smem1"),
    K(9, "cuda_ks_gather_smem2"),
    K(10, "cuda_ks_approx_gather_lut1d_global"),
    K(11, "cuda_ks_approx_gather_lut1d_global_smem1"),
    K(12, "cuda_ks_approx_gather_lut1d_global_smem2"),
    K(13, "cuda_ks_approx_gather_lut1d_shared"),
    K(14, "cuda_ks_approx_gather_lut1d_shared_smem1"),
    K(15, "cuda_ks_approx_gather_lut1d_shared_smem2"),
    K(16, "cuda_ks_approx_gather_lut1d_texture"),
    K(17, "cuda_ks_approx_gather_lut1d_texture_smem1"),
    K(18, "cuda_ks_approx_gather_lut1d_texture_smem2"),
    K(19, "cuda_ks_approx_gather_lut2d_global"),
    K(20, "cuda_ks_approx_gather_lut2d_global_smem1"),
    K(21, "cuda_ks_approx_gather_lut2d_global_smem2"),
    K(22, "cuda_ks_approx_gather_lut2d_texture"),
    K(23, "cuda_ks_approx_gather_lut2d_texture_smem1"),
    K(24, "cuda_ks_approx_gather_lut2d_texture_smem2"),
};
#undef K
const int ndf__cuda_nks = (int)(sizeof ndf__cuda_ks / sizeof ndf__cuda_ks[0]);
_Static_assert(sizeof ndf__cuda_ks / sizeof ndf__cuda_ks[0] == sizeof kinds / sizeof kinds[0],
               "a kind for every solver");
