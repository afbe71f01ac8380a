/* SPDX-License-Identifier: BSD-3-Clause */
/* sep_lines.h - cpu_sep's loops over its precision R (float or double), included for each by
 * sep.c through precisions.h: one text for the float32 filter and the float64 one. VL: values of
 * R in a 32-byte vector; a register block holds 4 vectors (VB values), a column pair 2. */
#define VL ((int)(32 / sizeof(R)))
#define VB (4 * VL)

/* VL values as one value (GCC/Clang vector extension): the compiler keeps four of them, the
 * outputs of a block, in registers across the taps, which it does not do reliably for a plain
 * array loop. */
typedef R X(vec) __attribute__((vector_size(32)));

static inline X(vec) X(ld)(const R *p) {
  X(vec) v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* A thread's scratch: line buffers (two rows at a time), QB copies of cval, the input row of
 * each tap. */
typedef struct {
  R *line, *line2;
  R *crow;
  const R **rows;
} X(scratch);

static X(scratch) X(scratch_of)(const state *s, int t) {
  char *b = s->scratch + (size_t)t * s->scratch_bytes;
  X(scratch) r;
  r.line = (R *)b;
  r.line2 = r.line + s->line_len;
  r.crow = r.line2 + s->line_len;
  r.rows = (const R **)(r.crow + QB);
  return r;
}

/* o[q] = sum_j w[j] rows[j][q] for q in [0, m). */
NDF_VEC static void X(combine_rows)(R *restrict o, const R *const *rows, const R *w, int64_t n,
                                    int64_t m) {
  int64_t q = 0;
  for (; q + VB <= m; q += VB) {
    X(vec) a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int64_t j = 0; j < n; j++) {
      const R *r = rows[j] + q;
      const R wj = w[j];
      a0 += wj * X(ld)(r);
      a1 += wj * X(ld)(r + VL);
      a2 += wj * X(ld)(r + 2 * VL);
      a3 += wj * X(ld)(r + 3 * VL);
    }
    memcpy(o + q, &a0, sizeof a0);
    memcpy(o + q + VL, &a1, sizeof a1);
    memcpy(o + q + 2 * VL, &a2, sizeof a2);
    memcpy(o + q + 3 * VL, &a3, sizeof a3);
  }
  for (; q < m; q++) {
    R acc = 0;
    for (int64_t j = 0; j < n; j++)
      acc += w[j] * rows[j][q];
    o[q] = acc;
  }
}

/* Two neighbouring output rows at once, so each input row is loaded once for both:
 * o0[q] = sum_j w[j] rows[j][q] and o1[q] = sum_j w[j] rows[j + 1][q] (rows has n + 1
 * entries). Halves the loads of combine_rows. */
NDF_VEC static void X(combine_rows2)(R *restrict o0, R *restrict o1, const R *const *rows,
                                     const R *w, int64_t n, int64_t m) {
  int64_t q = 0;
  for (; q + 2 * VL <= m; q += 2 * VL) {
    X(vec) a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
    for (int64_t k = 0; k <= n; k++) {
      const R *r = rows[k] + q;
      const X(vec) x0 = X(ld)(r), x1 = X(ld)(r + VL);
      if (k < n) {
        a0 += w[k] * x0;
        a1 += w[k] * x1;
      }
      if (k > 0) {
        b0 += w[k - 1] * x0;
        b1 += w[k - 1] * x1;
      }
    }
    memcpy(o0 + q, &a0, sizeof a0);
    memcpy(o0 + q + VL, &a1, sizeof a1);
    memcpy(o1 + q, &b0, sizeof b0);
    memcpy(o1 + q + VL, &b1, sizeof b1);
  }
  for (; q < m; q++) {
    R a = 0, b = 0;
    for (int64_t j = 0; j < n; j++) {
      a += w[j] * rows[j][q];
      b += w[j] * rows[j + 1][q];
    }
    o0[q] = a;
    o1[q] = b;
  }
}

/* o[i] = sum_j w[j] b[i + j] for i in [0, m). */
NDF_VEC static void X(filter_line)(R *restrict o, const R *b, const R *w, int64_t n, int64_t m) {
  int64_t i = 0;
  for (; i + VB <= m; i += VB) {
    X(vec) a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int64_t j = 0; j < n; j++) {
      const R *r = b + i + j;
      const R wj = w[j];
      a0 += wj * X(ld)(r);
      a1 += wj * X(ld)(r + VL);
      a2 += wj * X(ld)(r + 2 * VL);
      a3 += wj * X(ld)(r + 3 * VL);
    }
    memcpy(o + i, &a0, sizeof a0);
    memcpy(o + i + VL, &a1, sizeof a1);
    memcpy(o + i + 2 * VL, &a2, sizeof a2);
    memcpy(o + i + 3 * VL, &a3, sizeof a3);
  }
  for (; i < m; i++) {
    R acc = 0;
    for (int64_t j = 0; j < n; j++)
      acc += w[j] * b[i + j];
    o[i] = acc;
  }
}

/* Points rows[j], j < count, at the input row that tap j of output row i
 * reads (row r of the block starting at base with row stride Q), or at the
 * cval row; count n + 1 also covers output row i + 1 (rows[j + 1]). */
static void X(tap_rows)(const R **rows, const R *base, int64_t Q, int64_t i, int64_t count,
                        const ndf__sepaxis *ax, int64_t len, const R *crow) {
  for (int64_t j = 0; j < count; j++) {
    int64_t r = ndf__map_index(i + j - ax->left, len, ax->mode);
    rows[j] = r < 0 ? crow : base + r * Q;
  }
}

/* Fills the line buffer b (len + n - 1 values, b[k] is x = k - left) around
 * its already written interior b[left .. left + len). */
static void X(extend_line)(R *b, int64_t len, const ndf__sepaxis *ax, R cval) {
  const int64_t n = ax->n, left = ax->left;
  for (int64_t k = 0; k < n - 1 + len; k++) {
    int64_t x = k - left;
    if (x >= 0 && x < len) {
      k = left + len - 1; /* skip the interior */
      continue;
    }
    int64_t m = ndf__map_index(x, len, ax->mode);
    b[k] = m < 0 ? cval : b[left + m];
  }
}

/* ------------------------------------------------------------------ passes */

static void X(pass_plane)(const state *s, const R *src, R *dst, const ndf_array *g,
                          const ndf__sepaxis *ax, R cval) {
  const int a = ax->axis;
  const int64_t L = g->shape[a];
  int64_t P, Q;
  ndf__split_axis(g->shape, g->ndim, a, &P, &Q);
  const int64_t nq = (Q + QB - 1) / QB, ni = (L + IB - 1) / IB, tasks = P * nq * ni;
  const R *w = (const R *)s->X(w) + ax->off;
#pragma omp parallel num_threads(s->threads)
  {
    X(scratch) sc = X(scratch_of)(s, omp_get_thread_num());
    for (int k = 0; k < QB; k++)
      sc.crow[k] = cval;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
      const int64_t p = t / (nq * ni), ib = t / nq % ni, qb = t % nq;
      const int64_t q0 = qb * QB, m = Q - q0 < QB ? Q - q0 : QB;
      const R *base = src + p * L * Q + q0;
      const int64_t iend = L < (ib + 1) * IB ? L : (ib + 1) * IB;
      for (int64_t i = ib * IB; i < iend; i += 2) {
        R *o = dst + (p * L + i) * Q + q0;
        if (i + 1 < iend) {
          X(tap_rows)(sc.rows, base, Q, i, ax->n + 1, ax, L, sc.crow);
          X(combine_rows2)(o, o + Q, sc.rows, w, ax->n, m);
        } else {
          X(tap_rows)(sc.rows, base, Q, i, ax->n, ax, L, sc.crow);
          X(combine_rows)(o, sc.rows, w, ax->n, m);
        }
      }
    }
  }
}

/* The last axis, preceded (yx != NULL) by the next-to-last in the same pass. */
static void X(pass_rows)(const state *s, const R *src, R *dst, const ndf_array *g,
                         const ndf__sepaxis *y, const ndf__sepaxis *x, R cval) {
  const int nd = g->ndim;
  const int64_t X = g->shape[nd - 1], Y = y ? g->shape[nd - 2] : 1;
  const int64_t nrows = ndf_array_size(g) / X;
  const R *wx = s->X(w) + x->off, *wy = y ? s->X(w) + y->off : NULL;
#pragma omp parallel num_threads(s->threads)
  {
    X(scratch) sc = X(scratch_of)(s, omp_get_thread_num());
    for (int k = 0; k < QB; k++)
      sc.crow[k] = cval;
    R *mid0 = sc.line + x->left, *mid1 = sc.line2 + x->left;
    /* Work items are pairs of rows of one plane: the column filter does both
     * rows of a pair at once (combine_rows2). Without y, items are rows. */
    const int64_t per_plane = y ? (Y + 1) / 2 : 1, items = y ? nrows / Y * per_plane : nrows;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < items; t++) {
      int64_t r = t, two = 0;
      if (y) {
        const int64_t plane = t / per_plane, i = 2 * (t % per_plane);
        r = plane * Y + i;
        two = i + 1 < Y;
        const R *base = src + plane * Y * X;
        for (int64_t q0 = 0; q0 < X; q0 += QB) { /* cval rows are QB long */
          const int64_t m = X - q0 < QB ? X - q0 : QB;
          X(tap_rows)(sc.rows, base + q0, X, i, y->n + two, y, Y, sc.crow);
          if (two)
            X(combine_rows2)(mid0 + q0, mid1 + q0, sc.rows, wy, y->n, m);
          else
            X(combine_rows)(mid0 + q0, sc.rows, wy, y->n, m);
        }
      } else {
        memcpy(mid0, src + r * X, (size_t)X * sizeof(R));
      }
      X(extend_line)(sc.line, X, x, cval);
      X(filter_line)(dst + r * X, sc.line, wx, x->n, X);
      if (two) {
        X(extend_line)(sc.line2, X, x, cval);
        X(filter_line)(dst + (r + 1) * X, sc.line2, wx, x->n, X);
      }
    }
  }
}

/* The passes (kind[k]: 0 plane, 1 row, 2 yx; first[k]: its first axis) of in into out, through
 * the temporaries where the arrays are not contiguous in R. */
static void X(run)(const state *s, const ndf__sep *c, const ndf_array *in, ndf_array *out, int np,
                   const int *kind, const int *first) {
  const int T = s->threads;
  const R cval = (R)c->cval;
  ndf_array g = *in; /* the geometry; every pass array is contiguous */
  ndf__contiguous_strides(&g);
  const int direct_in = in->dtype == RT && ndf__is_contiguous(in);
  const int direct_out = out->dtype == RT && ndf__is_contiguous(out) &&
                         out->data != in->data; /* in place goes through a temporary */
  const R *src = in->data;
  int next = 0; /* the temporary the next pass writes, unless it is the source */
  if (!direct_in) {
    X(ndf__to)(in, s->tmp[0], T);
    src = s->tmp[0];
    next = 1;
  }
  for (int k = 0; k < np; k++) {
    R *dst = k == np - 1 && direct_out ? (R *)out->data : (R *)s->tmp[next];
    const ndf__sepaxis *ax = &c->ax[first[k]];
    if (kind[k] == 0)
      X(pass_plane)(s, src, dst, &g, ax, cval);
    else if (kind[k] == 1)
      X(pass_rows)(s, src, dst, &g, NULL, ax, cval);
    else
      X(pass_rows)(s, src, dst, &g, ax, ax + 1, cval);
    src = dst;
    next ^= 1;
  }
  if (!direct_out) X(ndf__from)(src, out, T);
}

#undef VB
#undef VL
