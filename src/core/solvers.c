/* solvers.c - the table of solvers the planner chooses from. */
#include "internal.h"

const ndf__solver *const ndf__solvers[] = {&ndf__cpu_sep,
                                           &ndf__cpu_corr1d_direct,
                                           &ndf__cpu_corr_direct,
                                           &ndf__cpu_iir,
                                           &ndf__cpu_ks,
#ifdef NDF_HAVE_FFTW
                                           &ndf__cpu_corr_fft,
#endif
#ifdef NDF_HAVE_CUDA
                                           &ndf__cuda_sep,
                                           &ndf__cuda_sep_fused,
                                           &ndf__cuda_corr_direct,
                                           &ndf__cuda_corr_fft,
                                           &ndf__cuda_corr1d_direct,
                                           &ndf__cuda_iir,
#define NDF__KS_ENTRY(name, v, l, a) &ndf__##name,
                                           NDF__CUDA_KS_SOLVERS(NDF__KS_ENTRY)
#undef NDF__KS_ENTRY
#endif
};

const int ndf__nsolvers = (int)(sizeof ndf__solvers / sizeof ndf__solvers[0]);
_Static_assert(sizeof ndf__solvers / sizeof ndf__solvers[0] <= NDF__MAX_SOLVERS,
               "the planner's skip list (planner.c) is shorter than the table");
