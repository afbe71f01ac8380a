/* SPDX-License-Identifier: BSD-3-Clause */
/* abi_layout.c - the public structs' sizes and field offsets as this compiler lays out ndf.h,
 * one "struct field offset size" line each ("struct - 0 size" for the whole), for the check
 * that the Python binding's ctypes mirrors (python/ndfilt/_lib.py) have not drifted. */
#include <stddef.h>
#include <stdio.h>

#include "ndf.h"

#define S(t) printf("%s - 0 %zu\n", #t, sizeof(t));
#define F(t, f) printf("%s %s %zu %zu\n", #t, #f, offsetof(t, f), sizeof(((t *)0)->f));

int main(void) {
  S(ndf_place);
  F(ndf_place, kind);
  F(ndf_place, device);
  S(ndf_array);
  F(ndf_array, dtype);
  F(ndf_array, ndim);
  F(ndf_array, shape);
  F(ndf_array, strides);
  F(ndf_array, data);
  F(ndf_array, place);
  S(ndf_context_opts);
  F(ndf_context_opts, struct_size);
  F(ndf_context_opts, device);
  F(ndf_context_opts, threads);
  F(ndf_context_opts, workspace_limit);
  F(ndf_context_opts, message);
  F(ndf_context_opts, message_size);
  F(ndf_context_opts, memory_limit);
  S(ndf_correlate1d_opts);
  F(ndf_correlate1d_opts, struct_size);
  F(ndf_correlate1d_opts, method);
  F(ndf_correlate1d_opts, mode);
  F(ndf_correlate1d_opts, cval);
  F(ndf_correlate1d_opts, origin);
  S(ndf_sepfilter_opts);
  F(ndf_sepfilter_opts, struct_size);
  F(ndf_sepfilter_opts, method);
  F(ndf_sepfilter_opts, convolve);
  F(ndf_sepfilter_opts, mode);
  F(ndf_sepfilter_opts, origin);
  F(ndf_sepfilter_opts, cval);
  S(ndf_gaussian_opts);
  F(ndf_gaussian_opts, struct_size);
  F(ndf_gaussian_opts, method);
  F(ndf_gaussian_opts, sigma);
  F(ndf_gaussian_opts, order);
  F(ndf_gaussian_opts, truncate);
  F(ndf_gaussian_opts, radius);
  F(ndf_gaussian_opts, mode);
  F(ndf_gaussian_opts, cval);
  F(ndf_gaussian_opts, iir_order);
  F(ndf_gaussian_opts, tolerance);
  S(ndf_correlate_opts);
  F(ndf_correlate_opts, struct_size);
  F(ndf_correlate_opts, method);
  F(ndf_correlate_opts, mode);
  F(ndf_correlate_opts, origin);
  F(ndf_correlate_opts, cval);
  S(ndf_ks_opts);
  F(ndf_ks_opts, struct_size);
  F(ndf_ks_opts, method);
  F(ndf_ks_opts, index);
  F(ndf_ks_opts, n_sigma);
  F(ndf_ks_opts, output);
  F(ndf_ks_opts, normalize);
  F(ndf_ks_opts, deterministic);
  F(ndf_ks_opts, tile_rows);
  F(ndf_ks_opts, r_max);
  F(ndf_ks_opts, block_rows);
  S(ndf_rank_opts);
  F(ndf_rank_opts, struct_size);
  F(ndf_rank_opts, method);
  F(ndf_rank_opts, mode);
  F(ndf_rank_opts, origin);
  F(ndf_rank_opts, cval);
  return 0;
}
