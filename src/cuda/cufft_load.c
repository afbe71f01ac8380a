/* SPDX-License-Identifier: BSD-3-Clause */
/* cufft_load.c - cuFFT opened on first use (dlopen) rather than linked, so that libndfilt loads
 * and runs its other solvers where libcufft is missing (a wheel on a machine with a driver but
 * no CUDA toolkit, or none at all), and a process that never plans cuda_fft or cuda_fft64 never
 * maps cuFFT's few hundred MB. The cuFFT calls fft.c makes are defined here, hidden, each
 * forwarding to the library's own; ndf__cufft_load says whether it could be opened and, if not,
 * why. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The definitions below stay inside libndfilt: not exported, never interposing on a libcufft
 * that the process loads for itself. */
#define CUFFTAPI __attribute__((visibility("hidden")))
#include <cufft.h>

#include "host.h"

#define STR_(x) #x
#define STR(x) STR_(x)
/* The soname of the major version the headers describe: another major may differ in its ABI. */
#define SONAME "libcufft.so." STR(CUFFT_VER_MAJOR)

static struct {
  cufftResult (*create)(cufftHandle *);
  cufftResult (*destroy)(cufftHandle);
  cufftResult (*set_auto_allocation)(cufftHandle, int);
  cufftResult (*make_plan_many64)(cufftHandle, int, long long *, long long *, long long, long long,
                                  long long *, long long, long long, cufftType, long long,
                                  size_t *);
  cufftResult (*set_work_area)(cufftHandle, void *);
  cufftResult (*set_stream)(cufftHandle, cudaStream_t);
  cufftResult (*exec_r2c)(cufftHandle, cufftReal *, cufftComplex *);
  cufftResult (*exec_c2r)(cufftHandle, cufftComplex *, cufftReal *);
  cufftResult (*exec_c2c)(cufftHandle, cufftComplex *, cufftComplex *, int);
  cufftResult (*exec_d2z)(cufftHandle, cufftDoubleReal *, cufftDoubleComplex *);
  cufftResult (*exec_z2d)(cufftHandle, cufftDoubleComplex *, cufftDoubleReal *);
  cufftResult (*exec_z2z)(cufftHandle, cufftDoubleComplex *, cufftDoubleComplex *, int);
} api;
static int loaded;
static char why[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *open_cufft(void) {
  /* By soname first: LD_LIBRARY_PATH, the loader's cache, or the copy a process (CuPy, torch)
   * already has. Then the toolkit the library was built with. */
  void *h = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h) return h;
  snprintf(why, sizeof why, "%s", dlerror());
#ifdef NDF_CUFFT_DIR
  h = dlopen(NDF_CUFFT_DIR "/" SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
  return h;
}

static void load(void) {
  void *h = open_cufft();
  if (!h) return;
  int ok = 1;
#define SYM(field, name)                                                                           \
  do {                                                                                             \
    void *sym = dlsym(h, name); /* a data pointer to a function pointer, as POSIX allows */        \
    memcpy(&api.field, &sym, sizeof sym);                                                          \
    if (!sym && ok) {                                                                              \
      ok = 0;                                                                                      \
      snprintf(why, sizeof why, "%s has no %s", SONAME, name);                                     \
    }                                                                                              \
  } while (0)
  SYM(create, "cufftCreate");
  SYM(destroy, "cufftDestroy");
  SYM(set_auto_allocation, "cufftSetAutoAllocation");
  SYM(make_plan_many64, "cufftMakePlanMany64");
  SYM(set_work_area, "cufftSetWorkArea");
  SYM(set_stream, "cufftSetStream");
  SYM(exec_r2c, "cufftExecR2C");
  SYM(exec_c2r, "cufftExecC2R");
  SYM(exec_c2c, "cufftExecC2C");
  SYM(exec_d2z, "cufftExecD2Z");
  SYM(exec_z2d, "cufftExecZ2D");
  SYM(exec_z2z, "cufftExecZ2Z");
#undef SYM
  if (!ok) {
    dlclose(h);
    return;
  }
  loaded = 1; /* kept open for the process's life, as a linked library would be */
}

int ndf__cufft_load(const char **reason) {
  pthread_once(&once, load);
  if (reason) *reason = loaded ? "" : why;
  return loaded;
}

#define CALL(field, ...) (ndf__cufft_load(NULL) ? api.field(__VA_ARGS__) : CUFFT_SETUP_FAILED)

cufftResult CUFFTAPI cufftCreate(cufftHandle *plan) { return CALL(create, plan); }
cufftResult CUFFTAPI cufftDestroy(cufftHandle plan) { return CALL(destroy, plan); }
cufftResult CUFFTAPI cufftSetAutoAllocation(cufftHandle plan, int a) {
  return CALL(set_auto_allocation, plan, a);
}
cufftResult CUFFTAPI cufftMakePlanMany64(cufftHandle plan, int rank, long long *n,
                                         long long *inembed, long long istride, long long idist,
                                         long long *onembed, long long ostride, long long odist,
                                         cufftType type, long long batch, size_t *work) {
  return CALL(make_plan_many64, plan, rank, n, inembed, istride, idist, onembed, ostride, odist,
              type, batch, work);
}
cufftResult CUFFTAPI cufftSetWorkArea(cufftHandle plan, void *work) {
  return CALL(set_work_area, plan, work);
}
cufftResult CUFFTAPI cufftSetStream(cufftHandle plan, cudaStream_t stream) {
  return CALL(set_stream, plan, stream);
}
cufftResult CUFFTAPI cufftExecR2C(cufftHandle plan, cufftReal *in, cufftComplex *out) {
  return CALL(exec_r2c, plan, in, out);
}
cufftResult CUFFTAPI cufftExecC2R(cufftHandle plan, cufftComplex *in, cufftReal *out) {
  return CALL(exec_c2r, plan, in, out);
}
cufftResult CUFFTAPI cufftExecC2C(cufftHandle plan, cufftComplex *in, cufftComplex *out, int dir) {
  return CALL(exec_c2c, plan, in, out, dir);
}
cufftResult CUFFTAPI cufftExecD2Z(cufftHandle plan, cufftDoubleReal *in, cufftDoubleComplex *out) {
  return CALL(exec_d2z, plan, in, out);
}
cufftResult CUFFTAPI cufftExecZ2D(cufftHandle plan, cufftDoubleComplex *in, cufftDoubleReal *out) {
  return CALL(exec_z2d, plan, in, out);
}
cufftResult CUFFTAPI cufftExecZ2Z(cufftHandle plan, cufftDoubleComplex *in, cufftDoubleComplex *out,
                                  int dir) {
  return CALL(exec_z2z, plan, in, out, dir);
}
