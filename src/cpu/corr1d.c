/* SPDX-License-Identifier: BSD-3-Clause */
/* corr1d.c - cpu_corr1d, plain one-axis correlate1d on the CPU: each line copied with its
 * extension, then a dot product per output, in float32, or in float64 for a float64 input.
 * The baseline cpu_sep is measured against. */
#include <stdlib.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"

typedef struct {
  void *w;    /* weights in the work precision (float, or double for a float64 input) */
  void *bufs; /* one extended line per thread */
  int64_t buflen;
  int threads;
} state;

/* The lines of one correlation in precision R (suffix SFX): each with its extension into the
 * thread's buffer, then a dot product per output. */
#define NDF__CORR1D_LINES(R, SFX)                                                                  \
  static void lines##SFX(const state *s, const ndf_array *in, ndf_array *out, int a, int mode,     \
                         int64_t n, int64_t left, double cval) {                                   \
    const int64_t len = in->shape[a], nlines = ndf_array_size(in) / len;                           \
    const int64_t sin = in->strides[a], sout = out->strides[a];                                    \
    const R *w = s->w;                                                                             \
    /* The lines are the array with axis a taken out. */                                           \
    ndf_array li = *in, lo = *out;                                                                 \
    li.shape[a] = lo.shape[a] = 1;                                                                 \
    _Pragma("omp parallel num_threads(s->threads)") {                                              \
      R *buf = (R *)s->bufs + (int64_t)omp_get_thread_num() * s->buflen;                           \
      _Pragma("omp for schedule(static)") for (int64_t L = 0; L < nlines; L++) {                   \
        const int64_t oi = ndf__offset(&li, L), oo = ndf__offset(&lo, L);                          \
        for (int64_t k = 0; k < len + n - 1; k++) {                                                \
          int64_t idx = ndf__map_index(k - left, len, mode);                                       \
          buf[k] = idx < 0 ? (R)cval : (R)ndf__load(in->dtype, in->data, oi + idx * sin);          \
        }                                                                                          \
        for (int64_t i = 0; i < len; i++) {                                                        \
          R acc = 0;                                                                               \
          for (int64_t j = 0; j < n; j++)                                                          \
            acc += w[j] * buf[i + j];                                                              \
          ndf__store(out->dtype, out->data, oo + i * sout, acc);                                   \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }
NDF__CORR1D_LINES(float, _f32)
NDF__CORR1D_LINES(double, _f64)

static int applicable(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  (void)ctx;
  const ndf__sep *c = pb->params;
  return c->naxes == 1 && pb->in.place.kind == NDF_PLACE_HOST &&
         pb->out.place.kind == NDF_PLACE_HOST;
}

static double cost(const ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx) {
  (void)self;
  const ndf__sep *c = pb->params;
  return (double)ndf_array_size(&pb->in) * (double)c->ax[0].n / (2e9 * ctx->threads);
}

static void free_state(void *p) {
  state *s = p;
  if (!s) return;
  free(s->w);
  free(s->bufs);
  free(s);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                       ndf_array *out) {
  (void)ops;
  const ndf__sep *c = p->pb.params;
  const state *s = p->state;
  (p->pb.in.dtype == NDF_F64 ? lines_f64 : lines_f32)(s, in, out, c->ax[0].axis, c->ax[0].mode,
                                                      c->ax[0].n, c->ax[0].left, c->cval);
  return NDF_OK;
}

static ndf_status make(ndf_plan *p) {
  const ndf__sep *c = p->pb.params;
  const ndf__sepaxis *ax = &c->ax[0];
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory");
  s->threads = p->ctx->threads;
  s->buflen = p->pb.in.shape[ax->axis] + ax->n - 1;
  const size_t es = p->pb.in.dtype == NDF_F64 ? sizeof(double) : sizeof(float);
  const double bytes = (double)s->buflen * s->threads * (double)es;
  if (bytes > 0x1p62) {
    free_state(s);
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: line buffers of %.3g bytes", bytes);
  }
  s->w = malloc((size_t)ax->n * es);
  s->bufs = malloc((size_t)s->buflen * (size_t)s->threads * es);
  if (!s->w || !s->bufs) {
    free_state(s);
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory for line buffers");
  }
  for (int64_t j = 0; j < ax->n; j++)
    if (es == sizeof(double))
      ((double *)s->w)[j] = c->w[ax->off + j];
    else
      ((float *)s->w)[j] = (float)c->w[ax->off + j];
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  return NDF_OK;
}

const ndf__solver ndf__cpu_corr1d = {.name = "cpu_corr1d",
                                     .op = NDF__OP_SEPFILTER,
                                     .place = NDF_PLACE_HOST,
                                     .applicable = applicable,
                                     .cost = cost,
                                     .make = make,
                                     .former = "cpu_direct",
                                     .f64 = 1};
