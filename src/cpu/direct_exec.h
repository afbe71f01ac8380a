/* SPDX-License-Identifier: BSD-3-Clause */
/* direct_exec.h - cpu_direct's execution over its precision R (float or double), included for
 * each by direct.c through precisions.h: the extended copy, the row accumulators and the sums
 * are of R. */

static ndf_status X(exec)(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  const ndf__corr *c = p->pb.params;
  const state *s = p->state;
  int64_t n[D], si[D];
  as4(in, n, si);
  const int64_t *e = s->e, *k = s->k, *left = s->left;
  const int64_t erows = e[0] * e[1] * e[2], ex = e[3];
  const R cval = (R)c->cval;
  if (ndf_array_size(in) == 0) return NDF_OK;
  R *ext = malloc((size_t)(erows * ex) * sizeof(R));
  R *accs = malloc((size_t)(s->threads * n[3]) * sizeof(R)); /* a row per thread */
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
      R *row = ext + r * ex;
      if (i0 < 0 || i1 < 0 || i2 < 0) {
        for (int64_t x = 0; x < ex; x++)
          row[x] = cval;
        continue;
      }
      const int64_t base = i0 * si[0] + i1 * si[1] + i2 * si[2];
      for (int64_t x = 0; x < ex; x++)
        row[x] = xmap[x] < 0 ? cval : (R)ndf__load(in->dtype, in->data, base + xmap[x] * si[3]);
    }
    /* 2. Output rows, every kernel of a bank while the extended rows are in cache (the
     * implicit barrier above orders them after the copy). */
    R *acc = accs + omp_get_thread_num() * n[3];
    const int64_t orows = n[0] * n[1] * n[2];
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < orows; r++) {
      const int64_t o0 = r / (n[1] * n[2]), o1 = r / n[2] % n[1], o2 = r % n[2];
      for (int64_t f = 0; f < c->nf; f++) {
        for (int64_t x = 0; x < n[3]; x++)
          acc[x] = 0;
        const R *w = s->X(w) + f * c->nw;
        for (int64_t j0 = 0; j0 < k[0]; j0++)
          for (int64_t j1 = 0; j1 < k[1]; j1++)
            for (int64_t j2 = 0; j2 < k[2]; j2++, w += k[3]) {
              const R *row = ext + ((o0 + j0) * e[1] * e[2] + (o1 + j1) * e[2] + (o2 + j2)) * ex;
              for (int64_t j3 = 0; j3 < k[3]; j3++) {
                const R wj = w[j3];
                if (wj == 0) continue; /* scipy's footprint leaves zero weights out */
                const R *src = row + j3;
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
