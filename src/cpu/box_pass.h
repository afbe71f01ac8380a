/* SPDX-License-Identifier: BSD-3-Clause */
/* box_pass.h - cpu_box's passes over the precision R (float or double) of the arrays between
 * them, included for each by box.c through precisions.h; the running sums are float64 either
 * way. */

/* Extended row r of a block (input row r - left, or the mode's row for it): its qb values at
 * in + row * Q, or crow (the block's cval row) where the mode gives cval. */
static inline const R *X(row_of)(const R *in, const R *crow, int64_t r, int64_t L, int64_t Q,
                                 const ndf__sepaxis *ax) {
  int64_t i = r - ax->left;
  if (i < 0 || i >= L) i = ndf__map_index(i, L, ax->mode);
  return i < 0 ? crow : in + i * Q;
}

/* One pass along ax of the [P][L][Q] array src of R into dst, the box's value v: a task is
 * a block of up to QB columns of one p (a line, when Q is 1); the window's entering and leaving
 * rows are read where they lie, added and dropped in float64 with the rounding's loss kept. */
static void X(pass)(const state *s, const R *src, R *dst, int64_t P, int64_t L, int64_t Q,
                    const ndf__sepaxis *ax, double v, double cval) {
  const int64_t n = ax->n, nq = (Q + QB - 1) / QB;
#pragma omp parallel for num_threads(s->threads) schedule(static)
  for (int64_t task = 0; task < P * nq; task++) {
    const int64_t p = task / nq, q0 = task % nq * QB, qb = Q - q0 < QB ? Q - q0 : QB;
    R crow[QB];
    for (int q = 0; q < QB; q++)
      crow[q] = (R)cval;
    const R *in = src + p * L * Q + q0;
    R *out = dst + p * L * Q + q0;
    if (Q == 1) { /* a line: its samples read directly inside, through the mode outside */
      double sum = 0, err = 0;
      for (int64_t r = 0; r < n; r++)
        two_add(&sum, &err, *X(row_of)(in, crow, r, L, 1, ax));
      for (int64_t i = 0; i < L; i++) {
        out[i] = (R)((sum + err) * v);
        const int64_t je = i + n - ax->left, jl = i - ax->left;
        two_add(&sum, &err, je >= 0 && je < L ? in[je] : *X(row_of)(in, crow, i + n, L, 1, ax));
        two_add(&sum, &err,
                -(double)(jl >= 0 && jl < L ? in[jl] : *X(row_of)(in, crow, i, L, 1, ax)));
      }
      continue;
    }
    double sum[QB], err[QB]; /* the window's sum and what its rounding lost */
    for (int q = 0; q < QB; q++)
      sum[q] = err[q] = 0;
    for (int64_t r = 0; r < n; r++) {
      const R *e = X(row_of)(in, crow, r, L, Q, ax);
      for (int64_t q = 0; q < qb; q++)
        two_add(&sum[q], &err[q], e[q]);
    }
    for (int64_t i = 0; i < L; i++) {
      const R *e = X(row_of)(in, crow, i + n, L, Q, ax), *l = X(row_of)(in, crow, i, L, Q, ax);
      R *o = out + i * Q;
      if (qb == QB) /* the full block: a fixed trip count the compiler unrolls and vectorises */
        for (int q = 0; q < QB; q++) {
          o[q] = (R)((sum[q] + err[q]) * v);
          two_add(&sum[q], &err[q], e[q]);
          two_add(&sum[q], &err[q], -(double)l[q]);
        }
      else
        for (int64_t q = 0; q < qb; q++) {
          o[q] = (R)((sum[q] + err[q]) * v);
          two_add(&sum[q], &err[q], e[q]);
          two_add(&sum[q], &err[q], -(double)l[q]);
        }
    }
  }
}

/* The passes of p's filter from in into out, through R arrays. */
static void X(run)(const ndf_plan *p, state *s, const ndf_array *in, ndf_array *out) {
  const ndf__sep *c = p->pb.params;
  const int T = s->threads;
  /* C-contiguous arrays of R are read and written where they lie (in place: through the
   * temporaries); others are converted on the way in and out */
  const int direct_in = in->dtype == RT && ndf__is_contiguous(in);
  const int direct_out =
      out->dtype == RT && ndf__is_contiguous(out) && out->data != in->data && c->naxes > 0;
  const R *src = in->data;
  if (!direct_in) {
    X(ndf__to)(in, s->tmp[0], T);
    src = s->tmp[0];
  }
  int next = 1;
  for (int k = 0; k < c->naxes; k++) {
    const int a = c->ax[k].axis;
    int64_t P, Q;
    ndf__split_axis(in->shape, in->ndim, a, &P, &Q);
    R *dst = k == c->naxes - 1 && direct_out ? (R *)out->data : (R *)s->tmp[next];
    X(pass)(s, src, dst, P, in->shape[a], Q, &c->ax[k], s->v[k], c->cval);
    src = dst;
    next ^= 1;
  }
  if (!direct_out) X(ndf__from)(src, out, T);
}
