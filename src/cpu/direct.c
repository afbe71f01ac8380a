/* SPDX-License-Identifier: BSD-3-Clause */
/* direct.c - cpu_direct for N-dimensional correlation: the input is copied once into a
 * float32 array extended by the kernel on every axis (the modes applied there, so the loops
 * below have no boundary tests), then each output row accumulates, for every kernel row, a
 * 1-D correlation of the matching extended row: a loop over x the compiler vectorises, on a
 * row accumulator that stays in L1. OpenMP over output rows. Arrays are seen as 4-D, with
 * leading axes of length 1 (and kernel length 1) added. */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"

#define D NDF_MAX_DIMS

typedef struct {
  int64_t n[D], k[D], left[D], e[D]; /* shape, kernel, taps left, extended shape */
  ndf_mode mode[D];
  float *w; /* the kernel in float32, [k0][k1][k2][k3] */
  int threads;
} state;

/* a's shape and strides as 4-D (leading axes of length 1). */
static void as4(const ndf_array *a, int64_t n[D], int64_t s[D]) {
  const int pad = D - a->ndim;
  for (int d = 0; d < D; d++) {
    n[d] = d < pad ? 1 : a->shape[d - pad];
    s[d] = d < pad ? 0 : a->strides[d - pad];
  }
}

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__corr *c = pb->params;
  /* ~4 GFMA/s per thread on the inner loop, plus a copy of the input */
  return (double)ndf_array_size(&pb->in) * ((double)(c->nw * c->nf) / 4e9 + 2e-9) / ctx->threads;
}

static void free_state(void *p) {
  state *s = p;
  if (!s) return;
  free(s->w);
  free(s);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__corr *c = p->pb.params;
  const state *s = p->state;
  int64_t n[D], si[D];
  as4(in, n, si);
  const int64_t *e = s->e, *k = s->k, *left = s->left;
  const int64_t erows = e[0] * e[1] * e[2], ex = e[3];
  const float cval = (float)c->cval;
  if (ndf_array_size(in) == 0) return NDF_OK;
  float *ext = malloc((size_t)(erows * ex) * sizeof(float));
  float *accs = malloc((size_t)(s->threads * n[3]) * sizeof(float)); /* a row per thread */
  int64_t *xmap = malloc((size_t)ex * sizeof(int64_t));
  if (!ext || !xmap || !accs) {
    free(ext);
    free(accs);
    free(xmap);
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory for a %lld-element copy",
                     (long long)(erows * ex));
  }
  for (int64_t x = 0; x < ex; x++)
    xmap[x] = ndf__map_index(x - left[3], n[3], s->mode[3]);

#pragma omp parallel num_threads(s->threads)
  {
    /* 1. The extended input, a row at a time. */
#pragma omp for schedule(static)
    for (int64_t r = 0; r < erows; r++) {
      const int64_t p0 = r / (e[1] * e[2]), p1 = r / e[2] % e[1], p2 = r % e[2];
      const int64_t i0 = ndf__map_index(p0 - left[0], n[0], s->mode[0]);
      const int64_t i1 = ndf__map_index(p1 - left[1], n[1], s->mode[1]);
      const int64_t i2 = ndf__map_index(p2 - left[2], n[2], s->mode[2]);
      float *row = ext + r * ex;
      if (i0 < 0 || i1 < 0 || i2 < 0) {
        for (int64_t x = 0; x < ex; x++)
          row[x] = cval;
        continue;
      }
      const int64_t base = i0 * si[0] + i1 * si[1] + i2 * si[2];
      for (int64_t x = 0; x < ex; x++)
        row[x] = xmap[x] < 0 ? cval : (float)ndf__load(in->dtype, in->data, base + xmap[x] * si[3]);
    }
    /* 2. Output rows, every kernel of a bank while the extended rows are in cache (the
     * implicit barrier above orders them after the copy). */
    float *acc = accs + omp_get_thread_num() * n[3];
    const int64_t orows = n[0] * n[1] * n[2];
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < orows; r++) {
      const int64_t o0 = r / (n[1] * n[2]), o1 = r / n[2] % n[1], o2 = r % n[2];
      for (int64_t f = 0; f < c->nf; f++) {
        for (int64_t x = 0; x < n[3]; x++)
          acc[x] = 0.f;
        const float *w = s->w + f * c->nw;
        for (int64_t j0 = 0; j0 < k[0]; j0++)
          for (int64_t j1 = 0; j1 < k[1]; j1++)
            for (int64_t j2 = 0; j2 < k[2]; j2++, w += k[3]) {
              const float *row =
                  ext + ((o0 + j0) * e[1] * e[2] + (o1 + j1) * e[2] + (o2 + j2)) * ex;
              for (int64_t j3 = 0; j3 < k[3]; j3++) {
                const float wj = w[j3];
                if (wj == 0.f) continue; /* scipy's footprint leaves zero weights out */
                const float *src = row + j3;
                for (int64_t x = 0; x < n[3]; x++)
                  acc[x] += wj * src[x];
              }
            }
        int64_t dummy[D], so[D];
        as4(&out[f], dummy, so);
        const int64_t base = o0 * so[0] + o1 * so[1] + o2 * so[2];
        for (int64_t x = 0; x < n[3]; x++)
          ndf__store(out[f].dtype, out[f].data, base + x * so[3], acc[x]);
      }
    }
  }
  free(ext);
  free(accs);
  free(xmap);
  return NDF_OK;
}

static ndf_status make(ndf_plan *p) {
  const ndf__corr *c = p->pb.params;
  const ndf_array *a = &p->pb.in;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory");
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  s->threads = p->ctx->threads;
  const int pad = D - a->ndim;
  for (int d = 0; d < D; d++) {
    const int q = d - pad;
    s->n[d] = q < 0 ? 1 : a->shape[q];
    s->k[d] = q < 0 ? 1 : c->k[q];
    s->left[d] = q < 0 ? 0 : c->left[q];
    s->mode[d] = q < 0 ? NDF_MODE_REFLECT : c->mode[q];
    s->e[d] = s->n[d] + s->k[d] - 1;
  }
  double ext = 1; /* the extended copy, counted where it cannot wrap */
  for (int d = 0; d < D; d++)
    ext *= (double)s->e[d];
  if (ext * sizeof(float) > 0x1p62 || (double)s->threads * s->n[3] * sizeof(float) > 0x1p62)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: the extended copy needs %.3g bytes",
                     ext * sizeof(float));
  s->w = malloc((size_t)(c->nw * c->nf) * sizeof(float));
  if (!s->w) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory");
  for (int64_t j = 0; j < c->nw * c->nf; j++)
    s->w[j] = (float)c->w[j];
  return NDF_OK;
}

const ndf__solver ndf__cpu_direct = {.name = "cpu_direct",
                                     .op = NDF__OP_CORRELATE,
                                     .place = NDF_PLACE_HOST,
                                     .applicable = applicable,
                                     .cost = cost,
                                     .make = make};
