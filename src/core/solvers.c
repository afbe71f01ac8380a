/* SPDX-License-Identifier: BSD-3-Clause */
/* solvers.c - the backends' registrations: the table of solvers the planner chooses from, each
 * backend's as it registers them (cpu/backend.c, cuda/backend.c), made once; and the device
 * backend's services (ndf__device). The one place core names a backend. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static const ndf__solver *table[NDF__MAX_SOLVERS];
static int count;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void add(int (*reg)(const ndf__solver **t, int cap)) {
  const int n = reg(table + count, NDF__MAX_SOLVERS - count);
  if (n > NDF__MAX_SOLVERS - count) { /* a build error in all but name: say so loudly */
    fprintf(stderr, "ndfilt: more than %d solvers; raise NDF__MAX_SOLVERS\n", NDF__MAX_SOLVERS);
    abort();
  }
  count += n;
}

static void build(void) {
  add(ndf__cpu_register);
#ifdef NDF_HAVE_CUDA
  add(ndf__cuda_register);
#endif
}

const ndf__device_ops *ndf__device(void) {
#ifdef NDF_HAVE_CUDA
  return ndf__cuda_device_ops();
#else
  return NULL;
#endif
}

const ndf__solver *const *ndf__solver_table(int *n) {
  pthread_once(&once, build);
  *n = count;
  return table;
}
