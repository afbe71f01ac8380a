/* SPDX-License-Identifier: BSD-3-Clause */
/* ndf.h - ndfilt public API: N-dimensional image filtering on CPUs and CUDA GPUs. */
#ifndef NDF_H
#define NDF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NDF_VERSION_MAJOR 0
#define NDF_VERSION_MINOR 1
#define NDF_VERSION_PATCH 0

#if defined(NDF_BUILDING) && defined(__GNUC__)
#define NDF_API __attribute__((visibility("default")))
#else
#define NDF_API
#endif

/* Arrays have 1 to NDF_MAX_DIMS axes. */
#define NDF_MAX_DIMS 4

/* ------------------------------------------------------------------ status */

/* Every fallible call returns one of these; NDF_OK is zero. */
typedef enum ndf_status {
  NDF_OK = 0,
  NDF_EINVAL,       /* an argument is invalid; nothing was written */
  NDF_ENOMEM,       /* a host or device allocation failed */
  NDF_EUNSUPPORTED, /* valid, but this build, device or solver cannot do it */
  NDF_EIO,          /* reading or writing a file failed */
  NDF_ECUDA,        /* the CUDA runtime reported an error */
  NDF_ENODEV        /* the requested device does not exist or is unusable */
} ndf_status;

/* Static string naming a status, e.g. "invalid argument". Never NULL. */
NDF_API const char *ndf_status_str(ndf_status s);

/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
NDF_API const char *ndf_version_string(void);

/* ------------------------------------------------------------------ arrays */

/* Element types. Zero is not a type, so a zeroed ndf_array is invalid. */
typedef enum ndf_dtype { NDF_U8 = 1, NDF_U16, NDF_I16, NDF_F32, NDF_F64 } ndf_dtype;

/* Bytes per element, or 0 for an invalid type. */
NDF_API size_t ndf_dtype_size(ndf_dtype t);
/* "u8", "u16", "i16", "f32", "f64", or NULL. */
NDF_API const char *ndf_dtype_name(ndf_dtype t);

typedef enum ndf_place_kind { NDF_PLACE_HOST = 0, NDF_PLACE_CUDA = 1 } ndf_place_kind;

/* Where an array's memory lives: host memory, or memory of CUDA device
 * `device`. */
typedef struct ndf_place {
  ndf_place_kind kind;
  int device;
} ndf_place;

/* A view of a dense N-D array, C-ordered like numpy: shape[0] is the slowest
 * axis. Strides are in elements (not bytes) and may be negative or, for
 * inputs, zero. The struct only describes memory: the library never allocates
 * or frees `data`; the caller owns it and keeps it alive for each call. */
typedef struct ndf_array {
  ndf_dtype dtype;
  int ndim;
  int64_t shape[NDF_MAX_DIMS];
  int64_t strides[NDF_MAX_DIMS];
  void *data;
  ndf_place place;
} ndf_array;

/* A C-contiguous host array over `data` (which may be NULL for a plan-time
 * description). Fields beyond ndim are zero. */
NDF_API ndf_array ndf_array_contiguous(ndf_dtype dtype, int ndim, const int64_t *shape, void *data);
/* Number of elements (product of the shape), or 0 if the array is invalid. */
NDF_API int64_t ndf_array_size(const ndf_array *a);

/* ------------------------------------------------------------------ modes */

/* Boundary modes, as scipy.ndimage (the default is reflect):
 *   reflect  (d c b a | a b c d | d c b a)
 *   constant (k k k k | a b c d | k k k k)   k = cval
 *   nearest  (a a a a | a b c d | d d d d)
 *   mirror   (d c b   | a b c d |   c b a)
 *   wrap     (a b c d | a b c d | a b c d)  */
typedef enum ndf_mode {
  NDF_MODE_REFLECT = 0,
  NDF_MODE_CONSTANT,
  NDF_MODE_NEAREST,
  NDF_MODE_MIRROR,
  NDF_MODE_WRAP
} ndf_mode;

/* Parses a scipy mode name ("reflect", "constant", "nearest", "mirror",
 * "wrap", and the aliases "grid-mirror", "grid-constant", "grid-wrap"). */
NDF_API ndf_status ndf_mode_parse(const char *name, ndf_mode *mode);
/* The canonical name of a mode, or NULL. */
NDF_API const char *ndf_mode_name(ndf_mode mode);

/* ------------------------------------------------------------------ context */

/* A context fixes the device (CPU, or one or several CUDA devices) and the CPU thread
 * count for the plans made with it. Thread safety: a context may be used by
 * several threads at once; create and destroy it from one. Ownership: the
 * caller destroys it after every plan made with it. */
typedef struct ndf_context ndf_context;

typedef struct ndf_context_opts {
  size_t struct_size; /* sizeof(ndf_context_opts) */
  /* NULL or "auto": the NDF_DEVICE environment variable if set, else the
   * first usable CUDA device, else the CPU. "cpu", "cuda" (first usable
   * device) or "cuda:N" choose explicitly and fail if unavailable. "cuda:N,M,..." or
   * "cuda:all" (every device present) spread plans on host arrays over several devices, in
   * slabs of the slowest axis (see memory_limit); the first device is the context's own, which
   * device arrays must be on and which filters that cannot go by slabs run on. A CUDA device
   * that auto chose (no device asked, NDF_DEVICE unset) lets method auto run a CPU
   * solver on host arrays where the cost models, with the transfers counted, say the
   * CPU is faster (ndf_plan_solver tells); an explicit device never does. */
  const char *device;
  /* CPU threads; 0 takes NDF_THREADS (a positive integer, else NDF_EINVAL), else OpenMP's
   * default. More than NDF_MAX_THREADS, or 8 times the CPUs present, is clamped to that
   * (ndf_context_threads tells, ndf_context_message says so). */
  int threads;
  /* Most bytes of workspace an FFT plan may hold on the context's device
   * (transform buffers, cached kernel spectra, the cuFFT work area); 0: as
   * much as is free. A plan that would need more fails with NDF_ENOMEM and
   * says how much it needed; method "auto" then plans the next cheapest
   * solver (direct, whose workspace is at most one copy of a slice). A
   * struct_size that ends before this field means 0. */
  size_t workspace_limit;
  /* NULL, or a buffer of message_size bytes that ndf_context_create fills with the reason
   * it failed (there is no context to carry it), e.g. "NDF_DEVICE=cuda: no usable CUDA
   * device". A struct_size that ends before these fields means NULL. */
  char *message;
  size_t message_size;
  /* Most bytes a plan on host arrays may hold for its work at once: its buffers on each GPU
   * (on a CUDA context; 0: 80% of the device's free memory), or its temporaries (on the CPU;
   * 0: none). A filter whose arrays need more runs in slabs of the slowest axis, each with
   * the kernel's reach of its neighbours (ndf_plan_slabs tells); a recursive Gaussian in two
   * sweeps, the other axes in slabs of the slowest, then that axis in slabs of the next; one
   * that cannot (a limit below one slab) plans as before. On a context of several GPUs, a
   * filter with a finite reach on host arrays of 64 MB or more goes by slabs spread over the
   * devices in any case. Page-locked, C-contiguous float32 (float64) arrays are copied to and
   * from the devices directly, the rest through the slabs' page-locked buffers. A
   * struct_size that ends before this field means 0. */
  size_t memory_limit;
} ndf_context_opts;

#define NDF_MAX_THREADS 1024

/* opts may be NULL for all defaults. A bad device name (or NDF_DEVICE) or NDF_THREADS is
 * NDF_EINVAL, and a device that cannot be used NDF_ENODEV; opts->message says why. */
NDF_API ndf_status ndf_context_create(ndf_context **ctx, const ndf_context_opts *opts);
NDF_API void ndf_context_destroy(ndf_context *ctx); /* NULL is a no-op */
/* The device the context computes on. */
NDF_API ndf_place ndf_context_place(const ndf_context *ctx);
/* Human-readable device, e.g. "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)". */
NDF_API const char *ndf_context_device_name(const ndf_context *ctx);
/* The CUDA devices the context computes on (0 on the CPU, else 1, or more for "cuda:N,M,...");
 * the first min(count, cap) go to devices (which may be NULL). */
NDF_API int ndf_context_devices(const ndf_context *ctx, int *devices, int cap);
NDF_API int ndf_context_threads(const ndf_context *ctx);
NDF_API size_t ndf_context_workspace_limit(const ndf_context *ctx); /* 0: none */
NDF_API size_t ndf_context_memory_limit(const ndf_context *ctx);    /* 0: the default */
/* Bytes free now on the context's CUDA devices (the least over them); 0 on the CPU. Plans hold
 * their device buffers until destroyed, so a caller keeping plans can ask this before making a
 * large one (a plan sizes its slabs, or chooses them, by the memory free when it is made). */
NDF_API size_t ndf_context_memory_free(const ndf_context *ctx);
/* Text of the last failure reported through this context ("" if none), or of
 * the last fallback the planner took (method auto: a solver that ran out of
 * memory making its plan, say how much it needed, and the one used instead).
 * When several threads share a context it may describe another thread's call. */
NDF_API const char *ndf_context_message(const ndf_context *ctx);
/* Waits for the context's queued device work; a no-op on the CPU. */
NDF_API ndf_status ndf_context_synchronize(ndf_context *ctx);

/* Allocates a C-contiguous array of the given shape on the context's device
 * (host memory on a CPU context). The caller frees it with ndf_array_free. */
NDF_API ndf_status ndf_array_alloc(ndf_context *ctx, ndf_array *a, ndf_dtype dtype, int ndim,
                                   const int64_t *shape);
/* Allocates a C-contiguous host array that the context's device reads and writes fastest:
 * page-locked memory on a CUDA context, which plans copy to and from the device directly,
 * without packing it through their staging buffers; plain memory on a CPU context. The
 * caller frees it with ndf_array_free on a context of the same device. */
NDF_API ndf_status ndf_array_alloc_host(ndf_context *ctx, ndf_array *a, ndf_dtype dtype, int ndim,
                                        const int64_t *shape);
NDF_API void ndf_array_free(ndf_context *ctx, ndf_array *a); /* a->data NULL: no-op */
/* Copies src to dst, both C-contiguous with the same dtype and shape, each on
 * the host or the context's device. Returns when the copy is done. */
NDF_API ndf_status ndf_array_copy(ndf_context *ctx, ndf_array *dst, const ndf_array *src);

/* ------------------------------------------------------------------ plans */

/* A plan is one problem (operation, shapes, dtypes, places, options) bound to
 * a solver. Planning validates and allocates; executing allocates nothing
 * (except the temporary copy an in-place CUDA call needs). Thread safety:
 * one plan may be executed from several threads at once. Ownership: the
 * caller destroys it before its context. */
typedef struct ndf_plan ndf_plan;

/* Runs a plan. `in` and `out` must have the dtype, shape and place the plan
 * was made for; data and strides may differ between calls, and data must be aligned to the
 * element size. `out` may be `in`
 * itself (same data and strides) but must not otherwise overlap it. On a
 * CUDA plan, device arrays are used in place and the call returns once the
 * work is queued on the context's stream; host arrays are staged through
 * pinned memory and the call returns when `out` is written. */
NDF_API ndf_status ndf_execute(const ndf_plan *plan, const ndf_array *in, ndf_array *out);
/* Runs a plan whose operation takes operands beside the image, given per call (ks's sigma maps
 * planned from their descriptions): ins[0] is the image, ins[1..nin-1] the operands in the
 * order the planning call described them, each with the dtype, shape and place it was planned
 * for (data and strides free; operands are read only and must not overlap an output); outs:
 * nout outputs (1, or a bank's nf). ndf_execute(p, in, out) is ndf_execute_n(p, 1, in, 1,
 * out). */
NDF_API ndf_status ndf_execute_n(const ndf_plan *plan, int nin, const ndf_array *ins, int nout,
                                 ndf_array *outs);
NDF_API void ndf_plan_destroy(ndf_plan *plan); /* NULL is a no-op */
/* Name of the solver chosen, e.g. "cpu_direct". */
NDF_API const char *ndf_plan_solver(const ndf_plan *plan);
/* Output rows of axis 0 a slab gives when the plan runs in slabs (ndf_context_opts's
 * memory_limit), else 0. */
NDF_API int64_t ndf_plan_slabs(const ndf_plan *plan);
/* The planner's estimate of one execute, in seconds, host arrays' transfers included: a rough
 * model (within a factor of a few), meant for choosing between devices. NaN for NULL. */
NDF_API double ndf_plan_cost(const ndf_plan *plan);
/* Name of the solver the plan's last execute ran: ndf_plan_solver's, or, for a plan of method
 * auto whose solver spreads NaN and Inf differently from scipy (an FFT, a recursive filter),
 * the exact solver it ran instead because the input held NaN or Inf (ndf_context_message then
 * says so). With several threads executing one plan: any one's. */
NDF_API const char *ndf_plan_last_solver(const ndf_plan *plan);

/* Enumerates the solvers this build has: returns the name of solver i and
 * sets *operation to its operation's name, or returns NULL past the end. The operations:
 * "sepfilter" (separable filters, the Gaussian's FIR form among them: ndf_plan_gaussian plans
 * the cheapest of its forms), "correlate", "gaussian" (the Gaussian's recursive solvers), "ks". */
NDF_API const char *ndf_solver_name(int i, const char **operation);

/* NaN and Inf. The direct and separable solvers compute scipy's sums, so a NaN or Inf in the
 * input reaches exactly the outputs whose window holds it under a weight scipy uses (every
 * weight in correlate1d and the separable filters; in correlate, those of magnitude above
 * DBL_EPSILON), as NaN or Inf as scipy's would be. An FFT solver spreads it over every output,
 * a recursive Gaussian over its lines and from there every output: method auto runs those only
 * on inputs free of NaN and Inf (an exact twin runs on others; ndf_plan_last_solver), and a
 * caller who names one gets that spreading. Integer outputs turn NaN into 0. */

/* ------------------------------------------------------------------ correlate1d */

/* Options of correlate1d / convolve1d. Zero-filled (with struct_size set)
 * means scipy's defaults: mode reflect, cval 0, origin 0, method auto. */
typedef struct ndf_correlate1d_opts {
  size_t struct_size; /* sizeof(ndf_correlate1d_opts) */
  /* NULL or "auto", or a solver name: "cpu_corr1d", "cuda_corr1d" (their former names
   * "cpu_direct", "cuda_direct" still work) */
  const char *method;
  ndf_mode mode;
  double cval; /* value outside the array for NDF_MODE_CONSTANT */
  int origin;  /* -(n/2) <= origin <= (n-1)/2 for n weights */
} ndf_correlate1d_opts;

/* correlate1d, exactly scipy.ndimage.correlate1d along `axis` (negative
 * counts from the end): with n weights w, s = n/2 (integer division),
 *   out[i] = sum_{j=0}^{n-1} w[j] * in_ext[i + j - s - origin]
 * where in_ext extends the input by the mode. convolve1d is
 * scipy.ndimage.convolve1d: correlate1d with w reversed and origin -origin
 * (minus one more for even n). Arithmetic is float32; integer outputs are
 * rounded to nearest and clamped to their range. Weights are copied. */
NDF_API ndf_status ndf_plan_correlate1d(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                        const ndf_array *out, const double *weights,
                                        int64_t nweights, int axis,
                                        const ndf_correlate1d_opts *opts);
NDF_API ndf_status ndf_plan_convolve1d(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                       const ndf_array *out, const double *weights,
                                       int64_t nweights, int axis,
                                       const ndf_correlate1d_opts *opts);
/* One-shot forms: plan, execute, destroy. */
NDF_API ndf_status ndf_correlate1d(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                                   const double *weights, int64_t nweights, int axis,
                                   const ndf_correlate1d_opts *opts);
NDF_API ndf_status ndf_convolve1d(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                                  const double *weights, int64_t nweights, int axis,
                                  const ndf_correlate1d_opts *opts);

/* ------------------------------------------------------------------ sepfilter */

/* Options of sepfilter. Zero-filled (with struct_size set) means scipy's
 * defaults: correlate, mode reflect on every axis, cval 0, origin 0, method
 * auto. */
typedef struct ndf_sepfilter_opts {
  size_t struct_size; /* sizeof(ndf_sepfilter_opts) */
  /* NULL or "auto", or a solver name: "cpu_sep", "cuda_sep", or the plain
   * one-axis solvers "cpu_corr1d", "cuda_corr1d" (formerly "cpu_direct", "cuda_direct"). */
  const char *method;
  int convolve;                /* nonzero: convolve1d semantics on every axis */
  ndf_mode mode[NDF_MAX_DIMS]; /* per axis */
  int origin[NDF_MAX_DIMS];    /* per axis, in the range correlate1d allows */
  double cval;                 /* value outside the array for NDF_MODE_CONSTANT */
} ndf_sepfilter_opts;

/* Separable filter: correlate1d (or convolve1d) along each axis d that has
 * weights (weights[d] != NULL and nweights[d] > 0), with that axis's mode and
 * origin, applied in increasing axis order exactly as successive
 * scipy.ndimage.correlate1d calls would be, with float32 intermediates. Any
 * kernel length on any axis, odd or even, longer than the axis too. With no
 * filtered axis it is a copy (with dtype conversion). `weights` and
 * `nweights` have in->ndim entries; the weights are copied. */
NDF_API ndf_status ndf_plan_sepfilter(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                      const ndf_array *out, const double *const *weights,
                                      const int64_t *nweights, const ndf_sepfilter_opts *opts);
NDF_API ndf_status ndf_sepfilter(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                                 const double *const *weights, const int64_t *nweights,
                                 const ndf_sepfilter_opts *opts);

/* ------------------------------------------------------------------ gaussian */

/* Options of the Gaussian filter, scipy.ndimage.gaussian_filter's arguments.
 * Zero-filled (with struct_size set) means: sigma 0 (no axis filtered),
 * order 0, truncate 4.0, mode reflect, cval 0, method auto. */
typedef struct ndf_gaussian_opts {
  size_t struct_size; /* sizeof(ndf_gaussian_opts), or an older size ending before iir_order */
  /* NULL or "auto": scipy's result (the FIR filter below), unless `tolerance` allows the
   * recursive filter's error: then iir_deriche where the cost models say it is the cheaper and
   * every filtered axis has mode nearest, order 0, sigma >= 2, no radius (truncate 0 or >= 4,
   * iir_order 0); "fir" (the truncated, sampled Gaussian as a separable filter) or a sepfilter
   * solver name ("cpu_sep", "cuda_sep"); a recursive (IIR) method: "iir_alvarez",
   * "iir_deriche", "iir_vyv", or "iir" (the most accurate of them, iir_deriche), or an IIR
   * solver name ("cpu_iir", "cuda_iir": iir_deriche). */
  const char *method;
  double sigma[NDF_MAX_DIMS]; /* per axis, in samples; <= 1e-15 leaves the axis alone */
  int order[NDF_MAX_DIMS];    /* derivative order per axis, >= 0 */
  double truncate;            /* radius = (int)(truncate * sigma + 0.5); 0 means 4.0 */
  int radius[NDF_MAX_DIMS];   /* > 0 overrides truncate on that axis (scipy's radius) */
  ndf_mode mode[NDF_MAX_DIMS];
  double cval;
  /* The recursive methods' order; 0: the method's default. iir_alvarez: the number of
   * implicit heat-equation steps, 1..5 (default 3); iir_vyv: 3..5 (default 3); iir_deriche:
   * 4. (Added in 0.2; a struct_size that ends before it means 0.) */
  int iir_order;
  /* The error auto may add to scipy's result, as the relative L2 norm of the difference
   * (>= 0): 0 keeps scipy's result to float32 rounding; 1e-3 or more lets auto take
   * iir_deriche (within 1e-3 of scipy's FIR filter at truncate >= 4, sigma >= 2) where that
   * is cheaper. On an input that holds NaN or Inf, auto's plan runs the FIR filter all the
   * same, so NaN and Inf reach the outputs scipy's would. (A struct_size that ends before it
   * means 0.) */
  double tolerance;
} ndf_gaussian_opts;

/* The error bound auto's recursive filter meets against scipy's FIR result (see tolerance). */
#define NDF_GAUSSIAN_IIR_ERROR 1e-3

/* Gaussian filter, exactly scipy.ndimage.gaussian_filter: along each axis
 * with sigma > 1e-15, in increasing axis order, gaussian_filter1d's kernel
 * (the sampled Gaussian of that sigma on [-radius, radius], normalised to sum
 * 1, times the order-th derivative's polynomial) applied by correlate1d with
 * the axis's mode. Float32 arithmetic, float64 kernels.
 *
 * The recursive methods approximate the untruncated Gaussian of each sigma instead, at a cost
 * that does not grow with sigma: float32 data, float64 recursion state (iir_vyv of order 4 past
 * sigma 64, and of order 3 past 300, as the same filter's sum of a causal and an anticausal part,
 * where its cascade would lose accuracy; cuda_iir's Deriche up to sigma 256, and there iir_vyv
 * of order 3 or 4 and one iir_alvarez step as that sum: float32 state in the better conditioned
 * form of first-order complex recursions, within about 1e-6 of float64; as chunk-sized matrix
 * products on the tensor cores in split TF32, float32's accuracy (lines past 1024 in segments of
 * 256, whose states are chained between them); iir_alvarez of 2 to 4 steps, whose pole repeats, on
 * those tensor-core passes only, as first-order sections one after the other, to sigma 256, lines
 * past 1024 in segments too). They support mode nearest only (the boundary exact: each line
 * continued by its end values for ever), order 0, and ignore truncate and radius; anything else is
 * NDF_EUNSUPPORTED. Relative L2 error against the true Gaussian on noise, borders included
 * (BENCHMARKS.md, "Recursive Gaussian"): iir_deriche 2.6e-4 to 6.6e-4 for sigma 0.5 to 1000;
 * iir_vyv (sigma >= 0.5) order 3 1e-2 to 2e-2 from sigma 2 (5e-2 at sigma 1, 0.12 at 0.5), order 4
 * 3e-3 to 7e-3 from sigma 2 (3e-2 at 1), order 5 1.2e-3 to 2.5e-3 from sigma 2 (2e-2 at 1; refused
 * past sigma 20, order 4 past 100); iir_alvarez 0.11 to 0.2 at 3 steps for sigma 2 to 64 (0.27 at
 * 1; 4 steps refused past sigma 100, 5 past 50), falling with more steps. */
NDF_API ndf_status ndf_plan_gaussian(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                     const ndf_array *out, const ndf_gaussian_opts *opts);
NDF_API ndf_status ndf_gaussian(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                                const ndf_gaussian_opts *opts);
/* Writes scipy's gaussian_filter1d weights (correlate form, 2*radius+1 of
 * them) for sigma > 0, order >= 0, radius >= 0 into w. */
NDF_API ndf_status ndf_gaussian_kernel1d(double sigma, int order, int radius, double *w);

/* ------------------------------------------------------------------ correlate */

/* Options of correlate / convolve. Zero-filled (with struct_size set) means
 * scipy's defaults: mode reflect on every axis, cval 0, origin 0, method auto. */
typedef struct ndf_correlate_opts {
  size_t struct_size; /* sizeof(ndf_correlate_opts) */
  /* NULL or "auto" (a cost model picks; on a float input that holds NaN or Inf, or with a
   * cval that is not finite, a direct solver runs, so they reach exactly the outputs scipy's
   * would); "direct" or "fft" (the context's solver of that kind); or a solver name:
   * "cpu_direct", "cpu_fft", "cuda_direct", "cuda_fft". An FFT spreads a NaN or Inf in the
   * input over every output. */
  const char *method;
  ndf_mode mode[NDF_MAX_DIMS]; /* per axis (scipy takes one for all) */
  int origin[NDF_MAX_DIMS];    /* per axis, -(k/2) <= origin <= (k-1)/2 for k weights */
  double cval;                 /* value outside the array for NDF_MODE_CONSTANT */
} ndf_correlate_opts;

/* N-dimensional correlation, exactly scipy.ndimage.correlate: out[i] =
 * sum over j of w[j] * in[i + j - k/2 - origin] per axis (k the kernel's
 * length on that axis), samples outside the array taken by each axis's mode.
 * As scipy, weights of magnitude <= DBL_EPSILON (2.2e-16) are left out of the
 * sum, so a NaN or Inf under a zero weight does not reach the output.
 * `weights` is a C-contiguous float64 kernel of shape wshape[0..in->ndim-1]
 * (any positive lengths: odd, even, longer than the array), copied by the
 * call; every weight must be finite. Float32 arithmetic. */
NDF_API ndf_status ndf_plan_correlate(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                      const ndf_array *out, const double *weights,
                                      const int64_t *wshape, const ndf_correlate_opts *opts);
NDF_API ndf_status ndf_correlate(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                                 const double *weights, const int64_t *wshape,
                                 const ndf_correlate_opts *opts);
/* scipy.ndimage.convolve: correlate with the kernel reversed on every axis
 * and origin -origin (-origin - 1 on axes of even length). */
NDF_API ndf_status ndf_plan_convolve(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                     const ndf_array *out, const double *weights,
                                     const int64_t *wshape, const ndf_correlate_opts *opts);
NDF_API ndf_status ndf_convolve(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                                const double *weights, const int64_t *wshape,
                                const ndf_correlate_opts *opts);

/* Filter bank: nf kernels of one shape applied to one input, outs[f] = correlate(in,
 * kernel f) (convolve with convolve_bank), in one pass where the solver can: the direct
 * solvers read each input tile once for all kernels, the FFT solvers transform the input
 * once. `weights` holds the nf kernels one after the other, each C-contiguous of shape
 * wshape; outs[0..nf-1] all have in's shape, dtype and place, and overlap neither in nor
 * each other. The same results as nf calls of ndf_correlate (ndf_convolve). */
NDF_API ndf_status ndf_plan_correlate_bank(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                           int nf, const ndf_array *outs, const double *weights,
                                           const int64_t *wshape, const ndf_correlate_opts *opts);
NDF_API ndf_status ndf_plan_convolve_bank(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                          int nf, const ndf_array *outs, const double *weights,
                                          const int64_t *wshape, const ndf_correlate_opts *opts);
/* Executes a bank plan: nf must be the plan's. */
NDF_API ndf_status ndf_execute_bank(const ndf_plan *plan, const ndf_array *in, int nf,
                                    ndf_array *outs);
NDF_API ndf_status ndf_correlate_bank(ndf_context *ctx, const ndf_array *in, int nf,
                                      ndf_array *outs, const double *weights, const int64_t *wshape,
                                      const ndf_correlate_opts *opts);
NDF_API ndf_status ndf_convolve_bank(ndf_context *ctx, const ndf_array *in, int nf, ndf_array *outs,
                                     const double *weights, const int64_t *wshape,
                                     const ndf_correlate_opts *opts);

/* ------------------------------------------------------------------ ks */

/* Spatially varying Gaussian kernel superposition (KS; da Silva, Ansorge and Jena, "Efficient
 * scatter-based kernel superposition on GPU"): each pixel has its own Gaussian width, one
 * sigma map for every axis (isotropic) or one map per axis (anisotropic). With I the input,
 * sigma_a the map of axis a and p, q pixel positions,
 *   index NDF_KS_INPUT  (Eq. 2a):  out(p) = sum_q I(q) prod_a k(p_a - q_a, sigma_a(q))
 *   index NDF_KS_OUTPUT (Eq. 2b):  out(p) = sum_q I(q) prod_a k(p_a - q_a, sigma_a(p))
 * where k is the pixel-integrated Gaussian (Eq. 4)
 *   k(d, s) = (erf((d + 1/2) / (sqrt(2) s)) - erf((d - 1/2) / (sqrt(2) s))) / 2
 * for |d| <= r = ceil(n_sigma * s) and 0 beyond (s = 0: k(0) = 1, the identity). The cut-off
 * is per pixel and axis; how a solver groups pixels into blocks never changes the result.
 * normalize divides each truncated 1-D kernel by its sum, erf((r + 1/2) / (sqrt(2) s)), so
 * that every pixel's kernel sums to 1 (mass-preserving). Output extent:
 *   NDF_KS_SAME: the input's grid; contributions falling outside it are dropped;
 *   NDF_KS_FULL: the input's shape plus 2 R on every axis, R the largest r over the image and
 *     the axes (ndf_ks_full_shape), input pixel q at q + R; with NDF_KS_OUTPUT a pixel p outside
 *     the input's grid takes the sigma of the nearest input pixel.
 * Pixels outside the input contribute nothing (no boundary mode). */
typedef enum ndf_ks_index { NDF_KS_INPUT = 0, NDF_KS_OUTPUT = 1 } ndf_ks_index;
typedef enum ndf_ks_extent { NDF_KS_SAME = 0, NDF_KS_FULL = 1 } ndf_ks_extent;

/* Options of ndf_ks. Zero-filled (with struct_size set) means: index input, n_sigma 3, output
 * same, no normalisation, method auto. */
typedef struct ndf_ks_opts {
  size_t struct_size; /* sizeof(ndf_ks_opts) */
  /* NULL or "auto", or a solver name: "cpu_ks" (float64, any ndim); on a CUDA context, 1 to 3
   * axes, float32:
   *  - the exact gathers "cuda_ks_gather", "cuda_ks_gather_smem1", "cuda_ks_gather_smem2" (the
   *    kernel evaluated per neighbour; both index modes, any radius, repeatable; smem1 stages
   *    the input's tile and halo in shared memory, smem2 the sigma maps too, for radii <= 32);
   *  - the approximate gathers "cuda_ks_approx_gather_<lut>[_smem1|_smem2]", <lut> one of
   *    lut1d_global, lut1d_shared, lut1d_texture (erf tabulated, two interpolations a weight),
   *    lut2d_global, lut2d_texture (Eq. 4 tabulated over d and sigma, one interpolation; the
   *    texture ones interpolate in hardware): index input, radii <= 64; never chosen by auto;
   *    their errors are in docs/ks.md;
   *  - the scatters of index input, "cuda_ks_scatter_global_atomic", "..._shared_atomic",
   *    "..._sync", "..._threadfence", "..._warpsync", "..._shuffle" (atomic additions: the last
   *    bits vary between runs), any radius (above 32 through a generic path). */
  const char *method;
  ndf_ks_index index;
  double n_sigma; /* cut-off in sigmas, > 0; 0 means 3 */
  ndf_ks_extent output;
  int normalize;
  /* nonzero: a solver whose result is bitwise the same on every run (no order-dependent atomic
   * additions): cpu_ks or cuda_ks_gather */
  int deterministic;
  /* The CUDA solvers' tile (the paper's t_y rows of 32 pixels) and thread block (b_y rows of 32
   * threads): 0 and 0 (8 and 8), or (t_y, b_y) in (8, 8), (16, 8), (32, 8), (16, 16),
   * (32, 16); builds without NDF_KS_ALL_SHAPES have only (8, 8) (others: NDF_EUNSUPPORTED). */
  int tile_rows, block_rows;
  /* 0, or a bound on every pixel's radius ceil(n_sigma * sigma): a pixel past it is NDF_EINVAL.
   * With the maps as operands it is NDF_KS_FULL's margin R, and lets the CUDA solvers size
   * their work (the shared-memory gathers need r_max <= 32, the look-up tables <= 64). A
   * struct_size that ends before it means 0. */
  int64_t r_max;
} ndf_ks_opts;

/* The sigma maps: nsig arrays, 1 (every axis) or in->ndim (axis a's in sigma[a]), each of in's
 * shape, any dtype, every value finite and >= 0 (else NDF_EINVAL, naming the first bad pixel).
 * Either the plan binds them (their data given: host memory, copied; their radii and the
 * CUDA solvers' tables made once), or, with every map's data NULL, they are operands of each
 * execute (ndf_execute_n: ins[1..nsig]), on the host or, for a CUDA plan, on its device, of the
 * dtype and place planned: the plan holds all it needs, a CUDA plan checks the maps and makes
 * its tables on the device, and an execute that finds a bad value changes no output (a CUDA
 * execute with operand maps returns when its work is done, to report them). out has in's shape
 * (NDF_KS_SAME) or, for NDF_KS_FULL, in's plus 2 R: R the maps' largest radius when bound
 * (ndf_ks_full_shape), r_max when they are operands (which NDF_KS_FULL then needs). in has 1 to
 * 4 axes (the CUDA solvers take 1 to 3). The CPU computes in float64, the GPU in float32 (Eq. 4
 * through erfc in the tails; within 1e-5 of the largest output value, tests measure ~3e-7). */
NDF_API ndf_status ndf_plan_ks(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                               const ndf_array *out, const ndf_array *sigma, int nsig,
                               const ndf_ks_opts *opts);
NDF_API ndf_status ndf_ks(ndf_context *ctx, const ndf_array *in, ndf_array *out,
                          const ndf_array *sigma, int nsig, const ndf_ks_opts *opts);
/* The NDF_KS_FULL output's shape for these maps (in's ndim entries) and R. */
NDF_API ndf_status ndf_ks_full_shape(ndf_context *ctx, const ndf_array *in, const ndf_array *sigma,
                                     int nsig, double n_sigma, int64_t *shape, int64_t *R);

/* ------------------------------------------------------------ rank filters */

/* Options of the rank filters. Zero-filled (with struct_size set) means scipy's defaults:
 * mode reflect on every axis, cval 0, origin 0, method auto. */
typedef struct ndf_rank_opts {
  size_t struct_size;          /* sizeof(ndf_rank_opts) */
  const char *method;          /* NULL or "auto"; or the solver's name: "cpu_rank", "cuda_rank" */
  ndf_mode mode[NDF_MAX_DIMS]; /* per axis (scipy's minimum and maximum filters take one each) */
  int origin[NDF_MAX_DIMS];    /* per axis, -(k/2) <= origin <= (k-1)/2 for a footprint of k */
  /* value outside the array for NDF_MODE_CONSTANT, taken in the input's dtype as scipy casts
   * it (an integer dtype's: truncated toward zero, wrapped) */
  double cval;
} ndf_rank_opts;

/* scipy.ndimage.rank_filter: out[i] is the value of rank `rank` (0: the smallest) among the
 * samples in[i + j - k/2 - origin] for the offsets j where the footprint is non-zero (samples
 * outside the array taken by each axis's mode), negative ranks counting from the largest as
 * scipy's (-1: the largest). minimum_filter is rank 0, maximum_filter rank n - 1,
 * median_filter rank n / 2 (n: the footprint's non-zero count). `footprint` is a C-contiguous
 * array of fshape[0..in->ndim-1] bytes, copied by the call, or NULL for the whole box fshape.
 * Exact in any dtype: the result is one of the samples (or cval), stored in out's dtype. A box's
 * minimum or maximum costs the same at any size (van Herk / Gil-Werman). NaN: unspecified. */
NDF_API ndf_status ndf_plan_rank(ndf_plan **plan, ndf_context *ctx, const ndf_array *in,
                                 const ndf_array *out, int64_t rank, const unsigned char *footprint,
                                 const int64_t *fshape, const ndf_rank_opts *opts);
NDF_API ndf_status ndf_rank(ndf_context *ctx, const ndf_array *in, ndf_array *out, int64_t rank,
                            const unsigned char *footprint, const int64_t *fshape,
                            const ndf_rank_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* NDF_H */
