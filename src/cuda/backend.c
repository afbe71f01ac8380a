/* SPDX-License-Identifier: BSD-3-Clause */
/* backend.c - the CUDA backend's solvers, in the order the planner meets them: a solver is its
 * file (defining `const ndf__solver ndf__cuda_<name>`) and its line here; the kernel-superposition
 * family is a table of its own (src/cuda/ks.c), registered whole. */
#include "../core/internal.h"

#define NDF__CUDA_SOLVERS(X)                                                                       \
  X(cuda_sep)                                                                                      \
  X(cuda_sep_fused)                                                                                \
  X(cuda_sep64)                                                                                    \
  X(cuda_box)                                                                                      \
  X(cuda_direct)                                                                                   \
  X(cuda_direct64)                                                                                 \
  X(cuda_fft)                                                                                      \
  X(cuda_fft64)                                                                                    \
  X(cuda_corr1d)                                                                                   \
  X(cuda_iir)                                                                                      \
  X(cuda_rank)

#define NDF__DECLARE(name) extern const ndf__solver ndf__##name;
NDF__CUDA_SOLVERS(NDF__DECLARE)
#define NDF__ENTRY(name) &ndf__##name,
static const ndf__solver *const solvers[] = {NDF__CUDA_SOLVERS(NDF__ENTRY)};
extern const ndf__solver ndf__cuda_ks[];
extern const int ndf__cuda_nks;

int ndf__cuda_register(const ndf__solver **t, int cap) {
  int n = 0;
  for (size_t i = 0; i < sizeof solvers / sizeof solvers[0]; i++, n++)
    if (n < cap) t[n] = solvers[i];
  for (int i = 0; i < ndf__cuda_nks; i++, n++)
    if (n < cap) t[n] = &ndf__cuda_ks[i];
  return n;
}
