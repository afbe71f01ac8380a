/* corr1d_direct.c - correlate1d on the CPU: each line copied with its extension, then a plain dot
 * product. */
#include <stdlib.h>

#include <omp.h>

#include "../core/boundary.h"
#include "../core/elem.h"
#include "../core/internal.h"

typedef struct {
  float *w;    /* weights in float32 */
  float *bufs; /* one extended line per thread */
  int64_t buflen;
  int threads;
} state;

static int applicable(const ndf__problem *pb, const ndf_context *ctx) {
  (void)ctx;
  return pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
}

static double cost(const ndf__problem *pb, const ndf_context *ctx) {
  const ndf__corr1d *c = pb->params;
  return (double)ndf_array_size(&pb->in) * (double)c->n / (2e9 * ctx->threads);
}

static void free_state(void *p) {
  state *s = p;
  if (!s) return;
  free(s->w);
  free(s->bufs);
  free(s);
}

static ndf_status exec(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  const ndf__corr1d *c = p->pb.params;
  const state *s = p->state;
  const int a = c->axis, mode = c->mode;
  const int64_t len = in->shape[a], n = c->n, left = c->left;
  const int64_t nlines = ndf_array_size(in) / len;
  const int64_t sin = in->strides[a], sout = out->strides[a];
  const float cval = (float)c->cval;
  /* The lines are the array with axis a taken out. */
  ndf_array li = *in, lo = *out;
  li.shape[a] = lo.shape[a] = 1;

#pragma omp parallel num_threads(s->threads)
  {
    float *buf = s->bufs + (int64_t)omp_get_thread_num() * s->buflen;
#pragma omp for schedule(static)
    for (int64_t L = 0; L < nlines; L++) {
      const int64_t oi = ndf__offset(&li, L), oo = ndf__offset(&lo, L);
      for (int64_t k = 0; k < len + n - 1; k++) {
        int64_t idx = ndf__map_index(k - left, len, mode);
        buf[k] = idx < 0 ? cval : (float)ndf__load(in->dtype, in->data, oi + idx * sin);
      }
      for (int64_t i = 0; i < len; i++) {
        float acc = 0.f;
        for (int64_t j = 0; j < n; j++)
          acc += s->w[j] * buf[i + j];
        ndf__store(out->dtype, out->data, oo + i * sout, acc);
      }
    }
  }
  return NDF_OK;
}

static ndf_status make(ndf_plan *p) {
  const ndf__corr1d *c = p->pb.params;
  state *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory");
  s->threads = p->ctx->threads;
  s->buflen = p->pb.in.shape[c->axis] + c->n - 1;
  s->w = malloc((size_t)c->n * sizeof(float));
  s->bufs = malloc((size_t)s->buflen * (size_t)s->threads * sizeof(float));
  if (!s->w || !s->bufs) {
    free_state(s);
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_direct: out of host memory for line buffers");
  }
  for (int64_t j = 0; j < c->n; j++)
    s->w[j] = (float)c->w[j];
  p->state = s;
  p->exec = exec;
  p->free_state = free_state;
  return NDF_OK;
}

const ndf__solver ndf__cpu_corr1d_direct = {
    "cpu_direct", NDF__OP_CORRELATE1D, NDF_PLACE_HOST, applicable, cost, make,
};
