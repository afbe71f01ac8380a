/* SPDX-License-Identifier: BSD-3-Clause */
/* planner.c - picks a solver from the table for a problem, makes and runs plans. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const op_names[NDF__OP_COUNT] = {"sepfilter", "correlate", "gaussian", "ks",
                                                    "rank"};

const char *ndf__op_name(ndf__op op) { return op < NDF__OP_COUNT ? op_names[op] : "?"; }

const char *ndf_solver_name(int i, const char **operation) {
  int n;
  const ndf__solver *const *t = ndf__solver_table(&n);
  if (i < 0 || i >= n) return NULL;
  if (operation) *operation = ndf__op_name(t[i]->op);
  return t[i]->name;
}

static const char *place_word(ndf_place_kind k) { return k == NDF_PLACE_CUDA ? "CUDA" : "CPU"; }

static ndf_status check_place(const ndf_context *ctx, const ndf_array *a, const char *what) {
  if (a->place.kind == NDF_PLACE_CUDA &&
      (ctx->place.kind != NDF_PLACE_CUDA || a->place.device != ctx->place.device))
    return ndf__fail(ctx, NDF_EINVAL, "%s is on CUDA device %d but the context is on %s", what,
                     a->place.device, ctx->device_name);
  return NDF_OK;
}

/* Whether every array of pb lies in host memory: then auto may run a CPU solver on a CUDA
 * context, where it is faster than the GPU with the transfers counted. */
static int all_host(const ndf__problem *pb) {
  int host = pb->in.place.kind == NDF_PLACE_HOST && pb->out.place.kind == NDF_PLACE_HOST;
  for (int k = 0; k < pb->nops; k++)
    host &= pb->ops[k].place.kind == NDF_PLACE_HOST;
  return host;
}

/* ndf__staging_cost: a CUDA plan's host arrays go through its pinned buffers: the input
 * packed and copied in chunks, the packing on every core overlapping the copies, the outputs
 * copied back (directly into page-locked outputs). 45 GB/s over the bytes both ways and 40 us a
 * call: on an H200 host (16 cores) the 64 MiB float32 volume's round trip took 2.8 ms besides
 * the filtering, and a 1 MiB one's 0.11 ms, with outputs that were page-locked (the Python
 * binding's) or already touched. A fresh output's first-touch page faults cost more (up to
 * 10 ms for 64 MiB); a caller that reuses its outputs does not pay them. */
double ndf__staging_cost(const ndf__problem *pb) {
  const int hin = pb->in.place.kind == NDF_PLACE_HOST, hout = pb->out.place.kind == NDF_PLACE_HOST;
  if (!hin && !hout) return 0;
  const double bytes = 4.0 * ((hin ? (double)ndf_array_size(&pb->in) : 0) +
                              (hout ? (double)ndf_array_size(&pb->out) * (double)pb->nout : 0));
  return 40e-6 + bytes / 45e9;
}

/* auto's rule: the cheapest solver of pb (NULL if none applies; skip[i]: solver i is out, NULL:
 * none is) in *pick, and its cost, the staging of host arrays counted; for a float64 input, the
 * cheapest of those that compute in float64, unless another is ten times cheaper (never for an
 * exact twin). On a context
 * whose device auto chose, CPU solvers compete for host arrays; a pinned problem takes its
 * place's only. */
static double cheapest(const ndf__solver **pick, const ndf_context *ctx, const ndf__problem *pb,
                       const char *skip) {
  int nsolvers;
  const ndf__solver *const *solvers = ndf__solver_table(&nsolvers);
  double best = INFINITY;
  *pick = NULL;
  const int host = ctx->auto_device && all_host(pb);
  /* a float64 input goes to a solver that computes in float64, unless a float32 one is more
   * than ten times cheaper (an FFT against a direct float64 sum of a large kernel) */
  const ndf__solver *pick64 = NULL;
  double best64 = INFINITY;
  for (int i = 0; i < nsolvers; i++) {
    const ndf__solver *s = solvers[i];
    const int here = pb->pin ? (int)s->place == pb->pin - 1
                             : s->place == ctx->place.kind || (host && s->place == NDF_PLACE_HOST);
    if (s->op != pb->op || !here || (skip && skip[i]) || !s->applicable(s, pb, ctx) ||
        (pb->exact && s->finite_only && s->finite_only(pb)))
      continue;
    double c = s->cost(s, pb, ctx);
    if (host && s->place == NDF_PLACE_CUDA) c += ndf__staging_cost(pb);
    if (!*pick || c < best) {
      *pick = s;
      best = c;
    }
    if (s->f64 && (!pick64 || c < best64)) {
      pick64 = s;
      best64 = c;
    }
  }
  /* an exact twin (inputs holding NaN or Inf) of a float64 input stays in float64: a native
   * plan's twin must take the arrays as they are, which a staged float32 solver cannot */
  if (pb->in.dtype == NDF_F64 && pick64 && (best64 <= 10 * best || pb->exact)) {
    *pick = pick64;
    best = best64;
  }
  return best;
}

/* skip[i]: solver i ran out of memory making this plan; auto picks among the others. */
static ndf_status choose(const ndf__solver **pick, ndf_context *ctx, const ndf__problem *pb,
                         const char *method, const char *skip) {
  const char *op = pb->label ? pb->label : ndf__op_name(pb->op);
  int nsolvers;
  const ndf__solver *const *solvers = ndf__solver_table(&nsolvers);
  if (method && *method && strcmp(method, "auto")) {
    /* A kind without a place ("direct", "fft") names the context's solver of that kind: its
     * float64 twin (cuda_direct64) for a float64 input that the twin takes. */
    char here[48] = "", here64[52];
    if (!strchr(method, '_') && strlen(method) < 32)
      snprintf(here, sizeof here, "%s_%s", ctx->place.kind == NDF_PLACE_CUDA ? "cuda" : "cpu",
               method);
    snprintf(here64, sizeof here64, "%s64", here);
    for (int i = 0; here[0] && pb->in.dtype == NDF_F64 && i < nsolvers; i++) {
      const ndf__solver *s = solvers[i];
      if (s->op == pb->op && s->place == ctx->place.kind && !strcmp(s->name, here64) &&
          s->applicable(s, pb, ctx)) {
        *pick = s;
        return NDF_OK;
      }
    }
    for (int i = 0; i < nsolvers; i++) {
      const ndf__solver *s = solvers[i];
      const int named = !strcmp(s->name, method) || !strcmp(s->name, here) ||
                        (s->former && (!strcmp(s->former, method) || !strcmp(s->former, here)));
      if (s->op != pb->op || !named) continue;
      if (s->place != ctx->place.kind)
        return ndf__fail(ctx, NDF_EUNSUPPORTED, "%s: method %s runs on %s, the context is on %s",
                         op, method, place_word(s->place), ctx->device_name);
      if (!s->applicable(s, pb, ctx))
        return ndf__fail(ctx, NDF_EUNSUPPORTED, "%s: method %s does not apply to this problem", op,
                         method);
      *pick = s;
      return NDF_OK;
    }
    if (here[0] && pb->aliases) { /* a kind the operation has, but not on this device */
      const char *a = strstr(pb->aliases, method);
      const size_t n = strlen(method);
      if (a && a > pb->aliases && a[-1] == ' ' && (a[n] == ' ' || a[n] == 0))
        return ndf__fail(ctx, NDF_EUNSUPPORTED, "%s: no %s solver on %s in this build", op, method,
                         ctx->device_name);
    }
    char list[256] = "";
    if (pb->aliases) strncat(list, pb->aliases, sizeof list - 1);
    for (int i = 0; i < nsolvers; i++)
      if (solvers[i]->op == pb->op) {
        strncat(list, " ", sizeof list - strlen(list) - 1);
        strncat(list, solvers[i]->name, sizeof list - strlen(list) - 1);
      }
    return ndf__fail(ctx, NDF_EINVAL, "%s: unknown method '%s' (this build has: auto%s)", op,
                     method, list);
  }
  cheapest(pick, ctx, pb, skip);
  return *pick ? NDF_OK
               : ndf__fail(ctx, NDF_EUNSUPPORTED, "%s: no solver applies on %s", op,
                           ctx->device_name);
}

ndf__problem ndf__problem_make(ndf__op op, const char *label, const char *aliases,
                               const ndf_array *in, const ndf_array *out, void *params,
                               size_t params_size) {
  ndf__problem pb;
  memset(&pb, 0, sizeof pb);
  pb.op = op;
  pb.label = label;
  pb.aliases = aliases;
  pb.in = *in;
  pb.out = *out;
  pb.nout = 1;
  pb.in.data = pb.out.data = NULL;
  pb.params = params;
  pb.params_size = params_size;
  return pb;
}

static int is_auto(const char *method) { return !method || !*method || !strcmp(method, "auto"); }

int ndf__always_finite_only(const ndf__problem *pb) {
  (void)pb;
  return 1;
}

static int is_float(ndf_dtype t) { return t == NDF_F32 || t == NDF_F64; }

/* Does the plan of pb by solver s need an exact twin for inputs holding NaN or Inf? Under
 * auto, whenever s spreads them differently from scipy; when s is named, only where s has an
 * exact variant of its own (cuda_direct's, for kernels with zero weights): a named FFT or
 * recursive filter runs as asked. */
static int needs_alt(const ndf__solver *s, const ndf__problem *pb, const char *method) {
  if (pb->exact || !is_float(pb->in.dtype) || !s->finite_only || !s->finite_only(pb)) return 0;
  if (is_auto(method)) return 1;
  ndf__problem e = *pb;
  e.exact = 1;
  return !s->finite_only(&e);
}

static void free_plan(ndf_plan *p, int quiet);

/* Frees a plan's state, staging and exact twin; quiet: the device has been waited for (a
 * plan with device work waits once, here, for itself and its twin, not once per solver). */
static void destroy_parts(ndf_plan *p, int quiet) {
  const ndf__device_ops *d = ndf__device();
  const int device = (p->solver && p->solver->place == NDF_PLACE_CUDA) ||
                     (p->alt && p->alt->solver->place == NDF_PLACE_CUDA);
  if (d && device && !quiet) d->quiesce(p->ctx);
  if (d) d->stage_destroy(p->stage);
  ndf__slabs_free(p->slabs);
  p->slabs = NULL;
  if (p->free_state) p->free_state(p->state);
  free_plan(p->alt, 1);
  p->stage = NULL;
  p->state = NULL;
  p->exec = NULL;
  p->free_state = NULL;
  p->alt = NULL;
}

/* The exact twin of p (see needs_alt): alt_pb, or p's problem with exact set, by auto (named:
 * p's own solver). A problem no exact solver applies to leaves p without one (the context's
 * message unchanged). */
static ndf_status make_alt(ndf_plan *p, ndf__problem *alt_pb, int named) {
  ndf_context *ctx = p->ctx;
  const ndf__problem *from = alt_pb ? alt_pb : &p->pb; /* copied: a retry makes it again */
  ndf__problem a = *from;
  a.params = malloc(from->params_size);
  if (!a.params) return ndf__fail(ctx, NDF_ENOMEM, "out of host memory for a plan");
  memcpy(a.params, from->params, from->params_size);
  a.exact = 1;
  a.pin = 1 + (int)p->solver->place;
  char keep[sizeof ctx->msg];
  snprintf(keep, sizeof keep, "%s", ndf_context_message(ctx));
  ndf_status st = ndf__plan_make(&p->alt, ctx, &a, named ? p->solver->name : NULL, 1, NULL);
  if (st == NDF_EUNSUPPORTED) {
    ndf__fail(ctx, NDF_OK, "%s", keep);
    return NDF_OK;
  }
  return st;
}

ndf_status ndf__plan_make(ndf_plan **out, ndf_context *ctx, ndf__problem *pb, const char *method,
                          int as_alt, ndf__problem *alt_pb) {
  (void)as_alt; /* only CUDA plans have staging to leave out */
  const ndf__solver *s = NULL;
  char skip[NDF__MAX_SOLVERS] = {0};
  ndf_status st = check_place(ctx, &pb->in, "in");
  if (st == NDF_OK) st = check_place(ctx, &pb->out, "out");
  if (st == NDF_OK) st = choose(&s, ctx, pb, method, skip);
  if (st != NDF_OK) {
    free(pb->params);
    if (alt_pb) free(alt_pb->params);
    return st;
  }
  if (!as_alt) {
    int made = 0;
    st = ndf__slabs_try(out, ctx, pb, s, method, &made);
    if (st != NDF_OK || made) {
      free(pb->params);
      if (alt_pb) free(alt_pb->params);
      return st;
    }
  }
  ndf_plan *p = calloc(1, sizeof *p);
  if (!p) {
    free(pb->params);
    if (alt_pb) free(alt_pb->params);
    return ndf__fail(ctx, NDF_ENOMEM, "out of host memory for a plan");
  }
  p->ctx = ctx;
  p->pb = *pb;
  pb->params = NULL;
  /* the problem's form for finite inputs (the original is a float input's exact twin) */
  ndf__problem original;
  int folded = 0;
  if (!p->pb.exact && !alt_pb && p->pb.finite_form &&
      p->pb.finite_form(&p->pb, is_float(p->pb.in.dtype) ? &original : NULL) &&
      is_float(p->pb.in.dtype)) {
    folded = 1;
    alt_pb = &original;
  }
  for (;;) {
    p->solver = s;
    st = s->make(p);
    if (st == NDF_OK && (folded || needs_alt(s, &p->pb, method)))
      st = make_alt(p, alt_pb, !is_auto(method));
    if (st == NDF_OK && s->place == NDF_PLACE_CUDA && !as_alt) st = ndf__device()->stage_create(p);
    if (st != NDF_ENOMEM || !is_auto(method)) break;
    /* Out of memory (an FFT's buffers, say): auto tries the next cheapest solver, and the
     * context's message says what happened. */
    char why[sizeof ctx->msg];
    snprintf(why, sizeof why, "%s", ndf_context_message(ctx));
    destroy_parts(p, 0);
    int nsolvers;
    const ndf__solver *const *solvers = ndf__solver_table(&nsolvers);
    for (int i = 0; i < nsolvers; i++)
      if (solvers[i] == s) skip[i] = 1;
    const ndf__solver *failed = s;
    if (choose(&s, ctx, &p->pb, method, skip) != NDF_OK) {
      ndf__fail(ctx, NDF_ENOMEM, "%s", why);
      st = NDF_ENOMEM;
      break;
    }
    ndf__fail(ctx, NDF_OK, "%.300s; planned %s instead of %s", why, s->name, failed->name);
  }
  if (alt_pb) free(alt_pb->params); /* the twin's problem (copied by make_alt) */
  if (st != NDF_OK) {
    ndf_plan_destroy(p);
    return st;
  }
  *out = p;
  return NDF_OK;
}

ndf_status ndf__plan_cheapest(ndf_plan **out, ndf_context *ctx, ndf__candidate *c, int n,
                              double tolerance) {
  int k = 0;
  double best = INFINITY;
  for (int i = 0; i < n; i++) {
    const ndf__solver *s = NULL;
    const double cost = c[i].error <= tolerance ? cheapest(&s, ctx, &c[i].pb, NULL) : INFINITY;
    if (s && cost < best) {
      best = cost;
      k = i;
    }
  }
  for (int i = 1; i < n; i++)
    if (i != k) free(c[i].pb.params);
  if (k == 0) return ndf__plan_make(out, ctx, &c[0].pb, NULL, 0, NULL);
  return ndf__plan_make(out, ctx, &c[k].pb, NULL, 0, &c[0].pb);
}

ndf_status ndf__plan_create(ndf_plan **out, ndf_context *ctx, ndf__problem *pb,
                            const char *method) {
  return ndf__plan_make(out, ctx, pb, method, 0, NULL);
}

ndf_status ndf__plan_create_alt(ndf_plan **out, ndf_context *ctx, ndf__problem *pb,
                                const char *method, ndf__problem *alt_pb) {
  return ndf__plan_make(out, ctx, pb, method, 0, alt_pb);
}

static void free_plan(ndf_plan *p, int quiet) {
  if (!p) return;
  destroy_parts(p, quiet);
  free(p->pb.params);
  free(p);
}

void ndf_plan_destroy(ndf_plan *p) { free_plan(p, 0); }

void ndf__note_alt(const ndf_plan *p, int used) {
  ndf_plan *m = (ndf_plan *)p; /* last_alt is the one field execute writes */
  if (__atomic_load_n(&m->last_alt, __ATOMIC_RELAXED) != used)
    __atomic_store_n(&m->last_alt, used, __ATOMIC_RELAXED);
  const char *op = p->pb.label ? p->pb.label : ndf__op_name(p->pb.op);
  if (used && p->alt->solver == p->solver)
    ndf__fail(p->ctx, NDF_OK, "%s: the input holds NaN or Inf: %s ran its exact variant", op,
              p->solver->name);
  else if (used)
    ndf__fail(p->ctx, NDF_OK,
              "%s: the input holds NaN or Inf: ran %s, which keeps scipy's result there, instead "
              "of %s",
              op, p->alt->solver->name, p->solver->name);
}

const char *ndf_plan_last_solver(const ndf_plan *p) {
  if (!p) return NULL;
  const char *twin = p->slabs ? ndf__slabs_twin(p->slabs) : NULL;
  if (twin) return twin;
  return p->alt && __atomic_load_n(&p->last_alt, __ATOMIC_RELAXED) ? p->alt->solver->name
                                                                   : p->solver->name;
}

const char *ndf_plan_solver(const ndf_plan *p) { return p ? p->solver->name : NULL; }

double ndf_plan_cost(const ndf_plan *p) {
  if (!p) return NAN;
  const double c = p->solver->cost(p->solver, &p->pb, p->ctx);
  return p->solver->place == NDF_PLACE_CUDA ? c + ndf__staging_cost(&p->pb) : c;
}

static ndf_status check_exec_array(const ndf_plan *p, const ndf_array *a, const ndf_array *want,
                                   const char *what) {
  const ndf_context *ctx = p->ctx;
  ndf_status st = ndf__check_desc(ctx, a, what);
  if (st != NDF_OK) return st;
  if (!a->data) return ndf__fail(ctx, NDF_EINVAL, "%s: data is NULL", what);
  if ((uintptr_t)a->data % ndf_dtype_size(a->dtype))
    return ndf__fail(ctx, NDF_EINVAL, "%s: data is not aligned to its %zu-byte elements", what,
                     ndf_dtype_size(a->dtype));
  if (a->dtype != want->dtype)
    return ndf__fail(ctx, NDF_EINVAL, "%s: dtype %s, the plan was made for %s", what,
                     ndf_dtype_name(a->dtype), ndf_dtype_name(want->dtype));
  int same = a->ndim == want->ndim;
  for (int d = 0; same && d < a->ndim; d++)
    same = a->shape[d] == want->shape[d];
  if (!same) return ndf__fail(ctx, NDF_EINVAL, "%s: shape differs from the plan's", what);
  if (a->place.kind != want->place.kind || a->place.device != want->place.device)
    return ndf__fail(ctx, NDF_EINVAL, "%s: place differs from the plan's", what);
  return NDF_OK;
}

static ndf_status execute(const ndf_plan *p, const ndf_array *in, int nops, const ndf_array *ops,
                          int nout, ndf_array *out) {
  ndf_status st = check_exec_array(p, in, &p->pb.in, "in");
  if (st != NDF_OK) return st;
  if (nops != p->pb.nops)
    return ndf__fail(p->ctx, NDF_EINVAL, "execute: %d operands beside the image; the plan takes %d",
                     nops, p->pb.nops);
  int same = 0, dummy;
  for (int k = 0; k < nops; k++) {
    char what[32];
    snprintf(what, sizeof what, "operand %d", k + 1);
    st = check_exec_array(p, &ops[k], &p->pb.ops[k], what);
    if (st != NDF_OK) return st;
  }
  for (int f = 0; f < nout; f++) {
    char what[32] = "out";
    if (p->pb.nout > 1) snprintf(what, sizeof what, "outs[%d]", f);
    st = check_exec_array(p, &out[f], &p->pb.out, what);
    if (st != NDF_OK) return st;
    if (!ndf__no_self_overlap(&out[f]))
      return ndf__fail(p->ctx, NDF_EINVAL, "%s: strides make elements overlap", what);
    if (ndf__overlap(in, &out[f], &same) && (!same || nout > 1))
      return ndf__fail(p->ctx, NDF_EINVAL, "in and %s overlap%s", what,
                       nout > 1 ? "" : " without being the same array");
    for (int g = 0; g < f; g++)
      if (ndf__overlap(&out[g], &out[f], &dummy))
        return ndf__fail(p->ctx, NDF_EINVAL, "outs[%d] and outs[%d] overlap", g, f);
    for (int k = 0; k < nops; k++)
      if (ndf__overlap(&ops[k], &out[f], &dummy))
        return ndf__fail(p->ctx, NDF_EINVAL, "operand %d and %s overlap", k + 1, what);
  }
  if (!nops) ops = NULL;
  if (p->slabs) return ndf__slabs_execute(p, in, ops, out, same);
  if (p->solver->place == NDF_PLACE_CUDA) return ndf__device()->execute(p, in, ops, out, same);
  const int alt = p->alt && ndf__host_nonfinite(in, p->ctx->threads);
  ndf__note_alt(p, alt);
  const ndf_plan *q = alt ? p->alt : p;
  return q->exec(q, in, ops, out);
}

static const char *arity(const ndf_plan *p) {
  return p->pb.nops ? "ndf_execute_n (it takes operands beside the image)" : "ndf_execute_bank";
}

ndf_status ndf_execute(const ndf_plan *p, const ndf_array *in, ndf_array *out) {
  if (!p) return NDF_EINVAL;
  if (p->pb.nout != 1 || p->pb.nops)
    return ndf__fail(p->ctx, NDF_EINVAL, "this plan runs with %s", arity(p));
  return execute(p, in, 0, NULL, 1, out);
}

ndf_status ndf_execute_bank(const ndf_plan *p, const ndf_array *in, int nf, ndf_array *outs) {
  if (!p) return NDF_EINVAL;
  if (p->pb.nops) return ndf__fail(p->ctx, NDF_EINVAL, "this plan runs with %s", arity(p));
  if (nf != p->pb.nout)
    return ndf__fail(p->ctx, NDF_EINVAL, "execute_bank: %d outputs, the plan was made for %d", nf,
                     p->pb.nout);
  if (!outs) return ndf__fail(p->ctx, NDF_EINVAL, "execute_bank: outs is NULL");
  return execute(p, in, 0, NULL, nf, outs);
}

ndf_status ndf_execute_n(const ndf_plan *p, int nin, const ndf_array *ins, int nout,
                         ndf_array *outs) {
  if (!p) return NDF_EINVAL;
  if (!ins || !outs) return ndf__fail(p->ctx, NDF_EINVAL, "execute_n: ins or outs is NULL");
  if (nin < 1) return ndf__fail(p->ctx, NDF_EINVAL, "execute_n: nin %d; ins[0] is the image", nin);
  if (nout != p->pb.nout)
    return ndf__fail(p->ctx, NDF_EINVAL, "execute_n: %d outputs, the plan was made for %d", nout,
                     p->pb.nout);
  return execute(p, &ins[0], nin - 1, ins + 1, nout, outs);
}
