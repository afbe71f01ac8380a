/* SPDX-License-Identifier: BSD-3-Clause */
/* backend.c - the CPU backend's solvers, in the order the planner meets them: a solver is its
 * file (defining `const ndf__solver ndf__cpu_<name>`) and its line here. */
#include "../core/internal.h"

#ifdef NDF_HAVE_FFTW
#define NDF__FFT(X) X(cpu_fft)
#else
#define NDF__FFT(X)
#endif
#define NDF__CPU_SOLVERS(X)                                                                        \
  X(cpu_sep) X(cpu_box) X(cpu_corr1d) X(cpu_direct) X(cpu_iir) X(cpu_ks) X(cpu_rank) NDF__FFT(X)

#define NDF__DECLARE(name) extern const ndf__solver ndf__##name;
NDF__CPU_SOLVERS(NDF__DECLARE)
#define NDF__ENTRY(name) &ndf__##name,
static const ndf__solver *const solvers[] = {NDF__CPU_SOLVERS(NDF__ENTRY)};

int ndf__cpu_register(const ndf__solver **t, int cap) {
  const int n = (int)(sizeof solvers / sizeof solvers[0]);
  for (int i = 0; i < n && i < cap; i++)
    t[i] = solvers[i];
  return n;
}
