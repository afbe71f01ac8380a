/* SPDX-License-Identifier: BSD-3-Clause */
/* internal.h - types and helpers shared by the library's files (prefix ndf__). */
#ifndef NDF_INTERNAL_H
#define NDF_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>

#include "iir.h"
#include "ndf.h"

#define NDF__MAX_OPS NDF_MAX_DIMS /* operands beside the image: a sigma map per axis */

/* Operations the planner knows. Adding one: a value here, its name in
 * planner.c, a file in src/ops, and its solvers in the table (solvers.c). */
typedef enum ndf__op {
  NDF__OP_SEPFILTER = 0,
  NDF__OP_CORRELATE,
  NDF__OP_GAUSSIAN,
  NDF__OP_KS,
  NDF__OP_RANK,
  NDF__OP_COUNT
} ndf__op;

/* A problem: operation, the arrays' descriptions (data ignored) and the
 * operation's parameters (owned by the plan once it exists). */
typedef struct ndf__problem {
  ndf__op op;
  const char *label;   /* the operation's name in messages; NULL: the op's */
  const char *aliases; /* more method names the caller accepted, for messages ("fir") */
  ndf_array in, out;   /* out: the first of nout outputs of one description */
  int nout;            /* 1; a filter bank's number of kernels */
  /* Operands given at each execute beside the image (ks's sigma maps): their descriptions,
   * which the executing call's arrays must match in dtype, shape and place. */
  int nops;
  ndf_array ops[NDF__MAX_OPS];
  /* 1: the plan must give scipy's result where the input holds NaN or Inf too (auto's plan
   * for such inputs, or a cval that is not finite): solvers whose finite_only says so are
   * not chosen, and a solver with an exact variant makes that one. */
  int exact;
  /* 0: auto picks the place; else 1 + the ndf_place_kind the plan must run on (an exact twin
   * runs where its primary does, on the arrays the primary staged or not) */
  int pin;
  void *params;
  size_t params_size;
  /* NULL, or the operation's faster form of its params, exact only for finite inputs (a kernel
   * folded over a wrap axis): replaces pb's params by it and returns 1, the original kept in
   * *keep (NULL: freed), or returns 0 leaving pb. The planner gives a float input's plan the
   * original as its exact twin. */
  int (*finite_form)(struct ndf__problem *pb, struct ndf__problem *keep);
} ndf__problem;

/* Parameters of a rank filter over in's axes padded in front to four (k 1, left 0 there): the
 * footprint's box k, its non-zero count n (the box's size: every sample of the box), and
 * fp[] its bytes in C order. */
typedef struct ndf__rank {
  int64_t rank; /* 0 <= rank < n */
  int64_t n;
  int64_t k[NDF_MAX_DIMS];
  int64_t left[NDF_MAX_DIMS]; /* k/2 + origin */
  ndf_mode mode[NDF_MAX_DIMS];
  double cval;
  unsigned char fp[];
} ndf__rank;

/* Parameters of a separable filter (correlate1d is one with one axis), in
 * correlate form (convolve already flipped). Axes in increasing order. */
typedef struct ndf__sepaxis {
  int axis; /* 0 <= axis < ndim */
  ndf_mode mode;
  int64_t n;    /* number of weights */
  int64_t left; /* taps left of the output point: n/2 + origin */
  int64_t off;  /* first weight in w[] */
} ndf__sepaxis;

typedef struct ndf__sep {
  double cval;
  int naxes; /* filtered axes; 0 means a copy */
  ndf__sepaxis ax[NDF_MAX_DIMS];
  double w[];
} ndf__sep;

/* An array of shape[0..ndim) seen as [P][L][Q] about axis a (L its length): P the product of
 * the axes before it, Q of those after (a separable pass's view). */
static inline void ndf__split_axis(const int64_t *shape, int ndim, int a, int64_t *P, int64_t *Q) {
  *P = *Q = 1;
  for (int d = 0; d < a; d++)
    *P *= shape[d];
  for (int d = a + 1; d < ndim; d++)
    *Q *= shape[d];
}

/* The value of a box along each filtered axis of c (all its weights along an axis are that
 * value) into v[k]; 0 if some axis's weights differ (cpu_box's and cuda_box's filters). */
int ndf__sep_box(const ndf__sep *c, double *v);

/* One axis of a separable filter as the caller gave it, before convolve's flip (n == 0: the
 * axis is not filtered). */
typedef struct ndf__axis_in {
  const double *w;
  int64_t n;
  ndf_mode mode;
  int origin;
} ndf__axis_in;
/* Validates per-axis kernels and builds a separable filter's problem (ops/sepfilter.c); `what`
 * names the operation in messages, `aliases` the method names it takes besides solvers'. */
ndf_status ndf__build_sep(ndf__problem *pb, ndf_context *ctx, const ndf_array *in,
                          const ndf_array *out, const ndf__axis_in *ax, double cval, int convolve,
                          const char *what, const char *aliases);

/* Parameters of an N-dimensional correlation (convolve already flipped):
 * nf kernels (a filter bank; 1 otherwise), each C-contiguous with in's ndim,
 * one after the other in w, and per axis their length k, the taps before the
 * output point (left = k/2 + origin) and the mode. A solver's exec receives
 * nf outputs: out[0..nf-1]. */
typedef struct ndf__corr {
  double cval;
  ndf_mode mode[NDF_MAX_DIMS];
  int64_t k[NDF_MAX_DIMS];
  int64_t left[NDF_MAX_DIMS];
  int64_t nw; /* product of k: weights per kernel */
  int64_t nf; /* kernels */
  double w[];
} ndf__corr;

/* Parameters of a recursive Gaussian (core/iir.h): the filter of each axis, K == 0 where the
 * axis is left alone; axes are filtered in increasing order, 'nearest' boundary. */
typedef struct ndf__iirp {
  ndf__iir ax[NDF_MAX_DIMS];
} ndf__iirp;

/* Parameters of a kernel superposition (ndf.h, "ks"): nsig sigma maps (1: every axis; else one
 * per axis); bound maps as float64, C-contiguous of in's shape, in sigma[]; operand maps (the
 * problem's ops, given at each execute: pb->nops > 0) leave sigma[] empty. The cut-off radii follow
 * from the maps (ndf__ks_radius). R: the full output's margin, the bound maps' largest radius or
 * r_max; r_max: ndf_ks_opts's bound (0: none). */
typedef struct ndf__ksp {
  ndf_ks_index index;
  ndf_ks_extent extent;
  int normalize, deterministic, nsig;
  int tile_rows, block_rows; /* ndf_ks_opts's, 0 made 8 */
  double n_sigma;
  int64_t R, r_max;
  int64_t n; /* elements per map */
  double sigma[];
} ndf__ksp;

/* The largest radius a ks problem's plan may meet: its bound maps', else r_max, else -1 (maps
 * given at each execute, pb->nops of them, without a bound). */
int64_t ndf__ks_bound(const ndf__problem *pb);
/* The radius cost models and work splits plan for: ndf__ks_bound, or 8 where that is unknown. */
int64_t ndf__ks_radius_estimate(const ndf__problem *pb);
/* NDF_EINVAL with the message for sigma map m's pixel i (C order) of value v: not finite, or
 * negative, or of a radius past r_max. */
ndf_status ndf__ks_bad_map(const ndf_context *ctx, double n_sigma, int64_t r_max, int m, int64_t i,
                           double v);
/* The cut-off radius ceil(n_sigma * s) of a sigma s >= 0 (0 for s = 0), capped at 2^40 (as good
 * as infinite on any grid). */
int64_t ndf__ks_radius(double n_sigma, double s);
/* normalize's factor 1 / erf((ceil(n_sigma s) + 1/2) / (sqrt(2) s)), from the uncapped radius;
 * 1 for s = 0. */
double ndf__ks_norm(double n_sigma, double s);

struct ndf_plan;
/* ops: the problem's nops operands (NULL when it has none). */
typedef ndf_status (*ndf__exec_fn)(const struct ndf_plan *p, const ndf_array *in,
                                   const ndf_array *ops, ndf_array *out);

/* A solver: one way to compute an operation. `place` says which arrays its
 * exec receives: host arrays of any dtype (NDF_PLACE_HOST), or device float32
 * arrays on the context's device (NDF_PLACE_CUDA; the planner stages). A family of
 * solvers shares its functions, each entry's `arg` telling them which member they are
 * (applicable and cost get the entry as self, make as p->solver). */
typedef struct ndf__solver {
  const char *name;
  ndf__op op;
  ndf_place_kind place;
  int (*applicable)(const struct ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx);
  /* ~ seconds */
  double (*cost)(const struct ndf__solver *self, const ndf__problem *pb, const ndf_context *ctx);
  /* Sets p->state, p->exec and p->free_state (and p->in_place). */
  ndf_status (*make)(struct ndf_plan *p);
  /* NULL, or 1 where the solver's result on pb differs from scipy's in where NaN and Inf in
   * the input reach (an FFT or a recursive filter spreads them over everything; a kernel
   * path that multiplies the zero weights scipy skips): auto then pairs the plan with an
   * exact one (ndf_plan.alt), run instead on inputs that hold them. */
  int (*finite_only)(const ndf__problem *pb);
  /* 1: a float64 input is computed in float64 (else in float32); auto prefers such solvers for
   * float64 inputs */
  int f64;
  const void *arg; /* the family member's parameters, or NULL */
  /* NULL, or a name the solver had before names were unique across operations, which method
   * still takes (as a name or, "<place>_<kind>", through its kind) */
  const char *former;
} ndf__solver;

struct ndf__stage; /* CUDA staging buffers, src/cuda/stage.c */

struct ndf_plan {
  const ndf__solver *solver;
  ndf_context *ctx;
  ndf__problem pb;
  void *state;
  ndf__exec_fn exec;
  void (*free_state)(void *state);
  struct ndf__stage *stage;
  int in_place; /* a CUDA exec that may be given in == out (else the planner copies in) */
  struct ndf__slabs *slabs; /* a plan run in slabs (core/slab.c): exec is the slabs' */
  /* A CUDA exec that takes its device arrays as they are, any dtype and layout: nothing is
   * staged or converted for it (its solver applies to device arrays only); in place, without
   * in_place, it reads a copy of the input. */
  int native;
  /* The exact plan run instead where a float input holds NaN or Inf (see finite_only); it
   * has no staging of its own: a CUDA plan hands it its staged arrays. */
  struct ndf_plan *alt;
  int last_alt; /* the last execute ran alt (read and written atomically) */
};

/* What the cost models know of the context's device, from its properties when it is chosen:
 * multiprocessors, their clock, and the DRAM's peak bandwidth (zero on the CPU). The models'
 * constants are rates measured on one card (NDF__REF_*: an H200); ndf__bw_scale and
 * ndf__rate_scale carry them to the device at hand. */
typedef struct ndf__device_caps {
  int sms;
  double clock_hz; /* the multiprocessors' peak clock */
  double dram_bw;  /* bytes/s: 2 x memory clock x bus width */
} ndf__device_caps;
#define NDF__REF_SMS 132
#define NDF__REF_CLOCK_HZ 1.98e9
#define NDF__REF_DRAM_BW 4.814e12

#define NDF__MAX_DEVICES 64

struct ndf_context {
  ndf_place place; /* on a context of several GPUs, the first's */
  int ndev;        /* CUDA devices the context spreads slabs over (devs), 0 on the CPU */
  int devs[NDF__MAX_DEVICES];
  ndf__device_caps caps;
  /* The device came from "auto" (no device asked, NDF_DEVICE unset): method auto may run a CPU
   * solver on host arrays where that beats the GPU with the transfers counted. */
  int auto_device;
  int threads;
  size_t workspace_limit; /* 0: none */
  size_t memory_limit;    /* ndf_context_opts's */
  char device_name[160];
  void *stream;   /* cudaStream_t */
  int own_stream; /* the stream is the context's own (a slab worker's), destroyed with it */
  int worker;     /* a slab worker's context, whose plans are not slabbed again */
  pthread_mutex_t msg_lock;
  char msg[512];
};

/* The context's device against the models' reference card: DRAM bandwidth, and arithmetic
 * rate (multiprocessors x clock); 1 where the device gave no figure. */
static inline double ndf__bw_scale(const ndf_context *ctx) {
  return ctx && ctx->caps.dram_bw > 0 ? ctx->caps.dram_bw / NDF__REF_DRAM_BW : 1.0;
}
static inline double ndf__rate_scale(const ndf_context *ctx) {
  return ctx && ctx->caps.sms > 0 && ctx->caps.clock_hz > 0
             ? ctx->caps.sms * ctx->caps.clock_hz / (NDF__REF_SMS * NDF__REF_CLOCK_HZ)
             : 1.0;
}

/* Records a message on the context (ctx may be NULL) and returns s. */
ndf_status ndf__fail(const ndf_context *ctx, ndf_status s, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* NDF_ENOMEM, with a message naming the solver and the bytes, when a plan's workspace of `need`
 * bytes exceeds the context's workspace limit (ndf_context_opts.workspace_limit); else NDF_OK. */
ndf_status ndf__workspace_check(const ndf_context *ctx, const char *solver, double need);
/* A context like parent (limits) with `threads` threads and, on a GPU, CUDA device `device`
 * (one of parent's) and a stream of its own: a slab worker's (ctx->worker). */
ndf_status ndf__context_child(ndf_context **out, const ndf_context *parent, int threads,
                              int device);

/* Slabs (core/slab.c). ndf__slabs_try makes *out a plan of pb run in slabs of axis 0 by
 * solver s's place (method as asked) when pb's host arrays need more memory than the context
 * allows and the filter has a finite reach along axis 0 (*made 1; pb's params taken), else
 * leaves pb and sets *made 0. */
struct ndf__slabs;
ndf_status ndf__slabs_try(ndf_plan **out, ndf_context *ctx, ndf__problem *pb, const ndf__solver *s,
                          const char *method, int *made);
ndf_status ndf__slabs_execute(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                              ndf_array *out, int same);
void ndf__slabs_free(struct ndf__slabs *S);
/* The solver a slab of the last execute ran in place of the plan's (its exact twin, on a slab
 * holding NaN or Inf), or NULL. */
const char *ndf__slabs_twin(const struct ndf__slabs *S);

/* Validation. `what` names the array in messages ("in", "out"). */
ndf_status ndf__check_desc(const ndf_context *ctx, const ndf_array *a, const char *what);
ndf_status ndf__check_same_shape(const ndf_context *ctx, const ndf_array *a, const ndf_array *b);
/* 1 if no two indices of `a` address the same element. */
int ndf__no_self_overlap(const ndf_array *a);
/* 1 if a and b touch a common byte range; *same set if they are the same view. */
int ndf__overlap(const ndf_array *a, const ndf_array *b, int *same);
/* Fills C-contiguous strides for a's shape (elem.h's ndf__is_contiguous checks them). */
void ndf__contiguous_strides(ndf_array *a);

/* A problem over in and out (their descriptions; data is dropped) with the
 * operation's params (malloc'd, params_size bytes). */
ndf__problem ndf__problem_make(ndf__op op, const char *label, const char *aliases,
                               const ndf_array *in, const ndf_array *out, void *params,
                               size_t params_size);
/* Planner: picks a solver for pb (method NULL/"auto" or a solver name) and
 * makes the plan; takes ownership of pb->params in every case. */
ndf_status ndf__plan_create(ndf_plan **out, ndf_context *ctx, ndf__problem *pb, const char *method);
/* The same, where auto may take a solver of pb whose result differs from scipy's on NaN and
 * Inf (a recursive Gaussian): alt_pb (owned likewise; NULL: pb without such solvers) is
 * planned as the exact plan run instead on inputs that hold them. */
ndf_status ndf__plan_create_alt(ndf_plan **out, ndf_context *ctx, ndf__problem *pb,
                                const char *method, ndf__problem *alt_pb);
/* One form of a call for ndf__plan_cheapest: its problem, and the error its solvers' results
 * may have against the exact form's (0: the exact form itself). */
typedef struct ndf__candidate {
  ndf__problem pb;
  double error;
} ndf__candidate;
/* Method auto over several forms of one call (c[0] the exact one, error 0): plans the form whose
 * cheapest solver, by the same rule as choose's (transfers counted), costs least among those
 * whose error is within tolerance; an approximate form's plan runs c[0]'s as its exact twin on
 * inputs that hold NaN or Inf. Takes ownership of every candidate's params. */
ndf_status ndf__plan_cheapest(ndf_plan **out, ndf_context *ctx, ndf__candidate *c, int n,
                              double tolerance);
/* The planner's one function: as_alt makes a plan without staging, run only as another's
 * exact twin. */
ndf_status ndf__plan_make(ndf_plan **out, ndf_context *ctx, ndf__problem *pb, const char *method,
                          int as_alt, ndf__problem *alt_pb);
/* Records whether an execute of p ran its exact twin (and says so in the context's message). */
void ndf__note_alt(const ndf_plan *p, int used);
/* A solver's finite_only that always says so (FFTs, recursive filters). */
int ndf__always_finite_only(const ndf__problem *pb);
/* 1 if a float array (host, any strides) holds a NaN or an infinity; integers never do. */
int ndf__host_nonfinite(const ndf_array *a, int threads);
/* Bytes in count elements of elem bytes each; -1 if that overflows int64 or size_t. */
int64_t ndf__bytes(int64_t count, size_t elem);
#define NDF__MAX_SOLVERS 64 /* the planner's table (solvers.c) holds at most these */
/* The planner's table: every backend's solvers, in their registration order; *n its length. */
const ndf__solver *const *ndf__solver_table(int *n);
/* A backend's registration (cpu/backend.c, cuda/backend.c): its solvers into t, at most cap of
 * them; returns how many it has (more than cap: the table is too short). */
int ndf__cpu_register(const ndf__solver **t, int cap);
#ifdef NDF_HAVE_CUDA
int ndf__cuda_register(const ndf__solver **t, int cap);
#endif
const char *ndf__op_name(ndf__op op);

/* A device backend's services to core, which calls the backend through them only: devices,
 * memory, a CUDA plan's staging and execution, waiting. */
typedef struct ndf__device_ops {
  int (*count)(void);                                 /* devices present (0: none usable) */
  ndf_status (*select)(ndf_context *ctx, int device); /* checks it usable, names it in ctx */
  ndf_status (*alloc)(ndf_context *ctx, void **p, size_t bytes);
  void (*free)(ndf_context *ctx, void *p);
  /* page-locked host memory; host_free frees p and returns 1 if it is such memory, else 0 */
  ndf_status (*host_alloc)(ndf_context *ctx, void **p, size_t bytes);
  int (*host_free)(ndf_context *ctx, void *p);
  /* a is host memory the devices copy from and to directly, as one block of dtype t: page-locked
   * from its first byte to its last, C-contiguous, not empty */
  int (*direct)(const ndf_array *a, ndf_dtype t);
  /* bytes between host memory and the context's device, or within it; synchronous */
  ndf_status (*copy)(ndf_context *ctx, void *dst, const void *src, size_t bytes);
  ndf_status (*sync)(ndf_context *ctx); /* waits for the context's stream */
  /* a device plan's staging buffers (p->stage), made after its solver's make */
  ndf_status (*stage_create)(ndf_plan *p);
  void (*stage_destroy)(struct ndf__stage *s);
  /* waits for everything a plan may have queued, once before its parts are freed */
  void (*quiesce)(ndf_context *ctx);
  /* executes a device plan: out is p->pb.nout arrays; same: out is in itself (checked) */
  ndf_status (*execute)(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                        ndf_array *out, int same);
  size_t (*mem_free)(ndf_context *ctx); /* the device's free bytes (0: unknown) */
  /* a stream of the context's own, which waits for no other (ctx->stream, own_stream) */
  ndf_status (*stream_create)(ndf_context *ctx);
  void (*stream_destroy)(ndf_context *ctx);
  /* the calling thread's current device, and setting it back (planning on several devices
   * leaves the caller's as it found it) */
  int (*current)(void);
  void (*set_current)(int device);
} ndf__device_ops;
/* The device backend's services, or NULL in a build without one (solvers.c, beside the
 * registration). */
const ndf__device_ops *ndf__device(void);
#ifdef NDF_HAVE_CUDA
const ndf__device_ops *ndf__cuda_device_ops(void);
#endif

/* Copies the caller's options (NULL: all zero, the defaults) into o, `size` bytes, after
 * checking opts' leading size_t struct_size is at least min (the size of the struct's first
 * version); fields past a smaller struct_size are zero. */
ndf_status ndf__take_opts(ndf_context *ctx, void *o, const void *opts, size_t size, size_t min,
                          const char *what);
/* A one-shot call: st is the planning call's status, *p its plan, which is
 * executed on in and out (nout outputs), then destroyed. */
ndf_status ndf__run_once(ndf_status st, ndf_plan **p, const ndf_array *in, int nout,
                         ndf_array *out);

/* The smallest 2^a 3^b 5^c 7^d >= m (m >= 1; d = 0 unless seven): a transform size FFTW and
 * cuFFT like. */
int64_t ndf__next_smooth(int64_t m, int seven);

/* Seconds on a monotonic clock. */
double ndf__now(void);

#endif /* NDF_INTERNAL_H */
