/* SPDX-License-Identifier: BSD-3-Clause */
/* fft_body.h - cpu_fft's plan and execute, written once over the precision (see fft.c): included
 * with R (float or double), X(name) (name with its suffix) and FW(name) (FFTW's name for it in
 * that precision, fftwf_ or fftw_). */

static int X(threads_ok) = -1; /* FFTW's init_threads' result; -1 before the first plan */

typedef struct {
  int64_t n[D], k[D], e[D], L[D]; /* shape, kernel, extended shape, transform size */
  int64_t rs;                     /* Rs per row of the buffer: 2 * (L[3]/2 + 1) */
  int64_t *map[D];                /* per axis: extended sample -> input index, -1 for cval */
  R *buf;                         /* the transform buffer, in place, L[0]*L[1]*L[2] rows */
  R *buf2;                        /* a bank's second buffer: the input's spectrum stays in buf */
  FW(complex) * spec;             /* the kernels' spectra, scaled by 1 / prod(L), nf of them */
  size_t bytes;                   /* of one buffer or spectrum */
  FW(plan) fwd, inv;
  int threads;
  int lock_ok;
  pthread_mutex_t lock; /* one plan may be executed from several threads: one buffer */
} X(state);

static void X(free_state)(void *p) {
  X(state) *s = p;
  if (!s) return;
  if (s->fwd || s->inv) {
    pthread_mutex_lock(&planner_lock);
    if (s->fwd) FW(destroy_plan)(s->fwd);
    if (s->inv) FW(destroy_plan)(s->inv);
    pthread_mutex_unlock(&planner_lock);
  }
  FW(free)(s->buf);
  FW(free)(s->buf2);
  FW(free)(s->spec);
  for (int d = 0; d < D; d++)
    free(s->map[d]);
  if (s->lock_ok) pthread_mutex_destroy(&s->lock);
  free(s);
}

static ndf_status X(exec)(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                          ndf_array *out) {
  (void)ops;
  const ndf__corr *c = p->pb.params;
  X(state) *s = p->state;
  const int pad = D - in->ndim;
  int64_t si[D], so[D];
  for (int d = 0; d < D; d++)
    si[d] = d < pad ? 0 : in->strides[d - pad];
  const int64_t *n = s->n, *k = s->k, *e = s->e, *L = s->L, rs = s->rs;
  int64_t *const *map = s->map;
  const R cval = (R)c->cval;
  const int64_t rows = L[0] * L[1] * L[2];
  const int64_t ncomplex = rows * (L[3] / 2 + 1);
  R *buf = s->buf;

  pthread_mutex_lock(&s->lock);
  /* 1. The extended input, zero-padded to L (every time: the inverse transform overwrote it).
   * in may be out: all of it is read here, before anything is written. */
#pragma omp parallel for schedule(static) num_threads(s->threads)
  for (int64_t r = 0; r < rows; r++) {
    const int64_t p0 = r / (L[1] * L[2]), p1 = r / L[2] % L[1], p2 = r % L[2];
    R *row = buf + r * rs;
    int64_t x = 0;
    if (p0 < e[0] && p1 < e[1] && p2 < e[2]) {
      const int64_t i0 = map[0][p0], i1 = map[1][p1], i2 = map[2][p2];
      if (i0 < 0 || i1 < 0 || i2 < 0) {
        for (; x < e[3]; x++)
          row[x] = cval;
      } else {
        const int64_t base = i0 * si[0] + i1 * si[1] + i2 * si[2];
        for (; x < e[3]; x++)
          row[x] =
              map[3][x] < 0 ? cval : (R)ndf__load(in->dtype, in->data, base + map[3][x] * si[3]);
      }
    }
    for (; x < rs; x++)
      row[x] = 0;
  }
  /* 2. Forward; then per kernel: times its spectrum (into buf2 for a bank, whose input
   * spectrum must survive), inverse, and 3. the valid part, which starts at k - 1 on every
   * axis. */
  FW(execute_dft_r2c)(s->fwd, buf, (FW(complex) *)buf);
  for (int64_t f = 0; f < c->nf; f++) {
    const R *y = buf;
    R *z = c->nf > 1 ? s->buf2 : buf;
    const R *h = (const R *)(s->spec + (size_t)f * (s->bytes / sizeof(FW(complex))));
#pragma omp parallel for schedule(static) num_threads(s->threads)
    for (int64_t i = 0; i < ncomplex; i++) {
      const R a = y[2 * i], b = y[2 * i + 1], hr = h[2 * i], hi = h[2 * i + 1];
      z[2 * i] = a * hr - b * hi;
      z[2 * i + 1] = a * hi + b * hr;
    }
    FW(execute_dft_c2r)(s->inv, (FW(complex) *)z, z);
    const ndf_array *o = &out[f];
    for (int d = 0; d < D; d++)
      so[d] = d < pad ? 0 : o->strides[d - pad];
    const int64_t orows = n[0] * n[1] * n[2];
#pragma omp parallel for schedule(static) num_threads(s->threads)
    for (int64_t r = 0; r < orows; r++) {
      const int64_t o0 = r / (n[1] * n[2]), o1 = r / n[2] % n[1], o2 = r % n[2];
      const R *src =
          z + (((o0 + k[0] - 1) * L[1] + o1 + k[1] - 1) * L[2] + o2 + k[2] - 1) * rs + k[3] - 1;
      const int64_t base = o0 * so[0] + o1 * so[1] + o2 * so[2];
      for (int64_t x = 0; x < n[3]; x++)
        ndf__store(o->dtype, o->data, base + x * so[3], src[x]);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return NDF_OK;
}

static ndf_status X(make_plans)(X(state) * s, int rank, const int *dims) {
  const int T = s->threads;
  int cand[2] = {T, T / 2}, ncand = T >= 4 ? 2 : 1, best = -1;
  pthread_mutex_lock(&planner_lock);
  if (X(threads_ok) < 0) X(threads_ok) = FW(init_threads)() != 0;
  if (!X(threads_ok)) ncand = 1;
  for (unsigned m = 0; m < memo_n && m < NDF__FFT_MEMO && best < 0; m++)
    if (memo[m].f64 == (sizeof(R) == 8) && memo[m].rank == rank && memo[m].threads == T &&
        !memcmp(memo[m].dims, dims, (size_t)rank * sizeof *dims))
      best = memo[m].best;
  if (best > 0) {
    cand[0] = best;
    ncand = 1;
  }
  double best_t = INFINITY;
  for (int c = 0; c < ncand; c++) {
    if (X(threads_ok)) FW(plan_with_nthreads)(cand[c]);
    FW(plan) f = FW(plan_dft_r2c)(rank, dims, s->buf, (FW(complex) *)s->buf, FFTW_ESTIMATE);
    FW(plan) i = FW(plan_dft_c2r)(rank, dims, (FW(complex) *)s->buf, s->buf, FFTW_ESTIMATE);
    double t = 0;
    if (f && i && ncand > 1) {
      memset(s->buf, 0, s->bytes);
      const double t0 = ndf__now();
      FW(execute)(f);
      FW(execute)(i);
      t = ndf__now() - t0;
    }
    if (f && i && t < best_t) {
      if (s->fwd) FW(destroy_plan)(s->fwd);
      if (s->inv) FW(destroy_plan)(s->inv);
      s->fwd = f;
      s->inv = i;
      best_t = t;
      best = cand[c];
    } else {
      if (f) FW(destroy_plan)(f);
      if (i) FW(destroy_plan)(i);
    }
  }
  if (best > 0 && ncand > 1) {
    const unsigned m = memo_n++ % NDF__FFT_MEMO;
    memo[m].f64 = sizeof(R) == 8;
    memo[m].rank = rank;
    memcpy(memo[m].dims, dims, (size_t)rank * sizeof *dims);
    memo[m].threads = T;
    memo[m].best = best;
  }
  pthread_mutex_unlock(&planner_lock);
  return s->fwd && s->inv ? NDF_OK : NDF_EUNSUPPORTED;
}

static ndf_status X(make)(ndf_plan *p) {
  const ndf__corr *c = p->pb.params;
  X(state) *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_fft: out of host memory");
  p->state = s;
  p->exec = X(exec);
  p->free_state = X(free_state);
  if (pthread_mutex_init(&s->lock, NULL))
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_fft: cannot make a mutex");
  s->lock_ok = 1;
  s->threads = p->ctx->threads;
  size_t bytes;
  if (!sizes(&p->pb, s->n, s->k, s->e, s->L, sizeof(R), &bytes)) /* applicable() said it fits */
    return ndf__fail(p->ctx, NDF_EUNSUPPORTED, "cpu_fft: the transform is too large");
  const int64_t *n = s->n, *k = s->k, *L = s->L;
  s->rs = 2 * (L[3] / 2 + 1);
  const int pad = D - p->pb.in.ndim;
  for (int d = 0; d < D; d++) {
    const size_t mb = (size_t)s->e[d] * sizeof(int64_t);
    s->map[d] = malloc(mb);
    if (!s->map[d])
      return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_fft: out of host memory (%zu bytes)", mb);
    const int64_t left = d < pad ? 0 : c->left[d - pad];
    const ndf_mode mode = d < pad ? NDF_MODE_REFLECT : c->mode[d - pad];
    for (int64_t x = 0; x < s->e[d]; x++)
      s->map[d][x] = ndf__map_index(x - left, n[d], mode);
  }
  s->bytes = bytes;
  const size_t nf = (size_t)c->nf;
  if (nf > SIZE_MAX / 2 / bytes)
    return ndf__fail(p->ctx, NDF_ENOMEM, "cpu_fft: %zu spectra of %zu bytes overflow", nf, bytes);
  ndf_status ws = ndf__workspace_check(p->ctx, "cpu_fft", (double)(nf + 1 + (nf > 1)) * bytes);
  if (ws != NDF_OK) return ws;
  s->buf = FW(malloc)(bytes);
  s->buf2 = nf > 1 ? FW(malloc)(bytes) : NULL;
  s->spec = FW(malloc)(nf * bytes);
  if (!s->buf || !s->spec || (nf > 1 && !s->buf2))
    return ndf__fail(p->ctx, NDF_ENOMEM,
                     "cpu_fft: out of host memory for the transform buffers (%zu x %zu bytes)",
                     nf + 1 + (nf > 1), bytes);

  /* The plans, in place, over the array's own axes (the leading ones of length 1 left out). */
  const int rank = p->pb.in.ndim;
  int dims[D];
  for (int d = 0; d < rank; d++)
    dims[d] = (int)L[D - rank + d];
  ndf_status st = X(make_plans)(s, rank, dims);
  if (st != NDF_OK) return ndf__fail(p->ctx, st, "cpu_fft: FFTW made no plan for this size");

  /* The kernels' spectra: each kernel reversed on every axis (a convolution with it is the
   * correlation with w), scaled by 1 / prod(L) for the unnormalised inverse. */
  const double scale = 1.0 / ((double)L[0] * (double)L[1] * (double)L[2] * (double)L[3]);
  for (size_t f = 0; f < nf; f++) {
    memset(s->buf, 0, bytes);
    const double *w = c->w + f * (size_t)c->nw;
    for (int64_t j0 = 0; j0 < k[0]; j0++)
      for (int64_t j1 = 0; j1 < k[1]; j1++)
        for (int64_t j2 = 0; j2 < k[2]; j2++) {
          R *row = s->buf +
                   (((k[0] - 1 - j0) * L[1] + k[1] - 1 - j1) * L[2] + k[2] - 1 - j2) * s->rs +
                   k[3] - 1;
          for (int64_t j3 = 0; j3 < k[3]; j3++)
            row[-j3] = (R)(*w++ * scale);
        }
    FW(execute_dft_r2c)(s->fwd, s->buf, (FW(complex) *)s->buf);
    memcpy((char *)s->spec + f * bytes, s->buf, bytes);
  }
  return NDF_OK;
}
