/* SPDX-License-Identifier: BSD-3-Clause */
/* context.c - device choice (NDF_DEVICE, auto-detect) and CPU threads. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

#include "internal.h"

/* Parses "cpu", "cuda", "cuda:N", a list "cuda:N,M,..." or "cuda:all" into devs (*ndev of
 * them; *ndev = 0 for "any CUDA device", -1 for "every one"). */
static int parse_device(const char *s, ndf_place_kind *kind, int *devs, int *ndev) {
  *ndev = 0;
  if (!strcmp(s, "cpu")) {
    *kind = NDF_PLACE_HOST;
    return 1;
  }
  *kind = NDF_PLACE_CUDA;
  if (!strcmp(s, "cuda")) return 1;
  if (!strcmp(s, "cuda:all")) {
    *ndev = -1;
    return 1;
  }
  if (strncmp(s, "cuda:", 5) || !s[5]) return 0;
  for (const char *c = s + 5;; c++) {
    char *end;
    if (*c < '0' || *c > '9') return 0;
    long n = strtol(c, &end, 10);
    if (n > 1024 || *ndev == NDF__MAX_DEVICES) return 0;
    for (int i = 0; i < *ndev; i++)
      if (devs[i] == n) return 0; /* a device named twice */
    devs[(*ndev)++] = (int)n;
    if (!*end) return 1;
    if (*end != ',') return 0;
    c = end;
  }
}

static void use_cpu(ndf_context *c) {
  c->place.kind = NDF_PLACE_HOST;
  c->place.device = 0;
  snprintf(c->device_name, sizeof c->device_name, "cpu");
}

/* The first usable device (dev < 0), or device dev. */
static ndf_status pick_cuda(ndf_context *c, int dev, int required) {
  const ndf__device_ops *d = ndf__device();
  if (!d)
    return required ? ndf__fail(c, NDF_ENODEV, "this build of ndfilt has no CUDA support")
                    : NDF_ENODEV;
  int n = d->count();
  if (dev >= 0) {
    if (dev >= n) return ndf__fail(c, NDF_ENODEV, "CUDA device %d requested, %d present", dev, n);
    const ndf_status st = d->select(c, dev);
    if (st == NDF_OK) {
      c->ndev = 1;
      c->devs[0] = dev;
    }
    return st;
  }
  for (int i = 0; i < n; i++)
    if (d->select(c, i) == NDF_OK) {
      c->ndev = 1;
      c->devs[0] = i;
      return NDF_OK;
    }
  return required ? ndf__fail(c, NDF_ENODEV, "no usable CUDA device (%d present)", n) : NDF_ENODEV;
}

/* Several devices (ndev of devs; ndev < 0: every one present): the first is the context's own,
 * the others checked usable; the name lists them all. */
static ndf_status pick_cudas(ndf_context *c, const int *devs, int ndev) {
  const ndf__device_ops *d = ndf__device();
  int all[NDF__MAX_DEVICES];
  if (d && ndev < 0) {
    ndev = d->count() < NDF__MAX_DEVICES ? d->count() : NDF__MAX_DEVICES;
    for (int i = 0; i < ndev; i++)
      all[i] = i;
    devs = all;
    if (!ndev) return ndf__fail(c, NDF_ENODEV, "no CUDA device present");
  }
  ndf_status st = pick_cuda(c, d ? devs[0] : 0, 1);
  if (st != NDF_OK || ndev == 1) return st;
  char names[sizeof c->device_name];
  const char *paren = strchr(c->device_name, '(');
  int at = snprintf(names, sizeof names, "%s", paren ? paren + 1 : "");
  if (at > 0 && names[at - 1] == ')') names[--at] = 0;
  char ids[64];
  int id_at = snprintf(ids, sizeof ids, "%d", devs[0]);
  for (int i = 1; i < ndev; i++) {
    ndf_context other = {0};
    pthread_mutex_init(&other.msg_lock, NULL);
    st = pick_cuda(&other, devs[i], 1);
    if (st != NDF_OK) ndf__fail(c, st, "%s", other.msg);
    pthread_mutex_destroy(&other.msg_lock);
    if (st != NDF_OK) return st;
    c->devs[i] = devs[i];
    paren = strchr(other.device_name, '(');
    if (at >= 0 && (size_t)at < sizeof names)
      at += snprintf(names + at, sizeof names - (size_t)at, ", %.*s",
                     paren ? (int)strcspn(paren + 1, ")") : 0, paren ? paren + 1 : "");
    if (id_at >= 0 && (size_t)id_at < sizeof ids)
      id_at += snprintf(ids + id_at, sizeof ids - (size_t)id_at, ",%d", devs[i]);
  }
  c->ndev = ndev;
  d->set_current(devs[0]); /* the checks made the last one current: the first is the context's */
  snprintf(c->device_name, sizeof c->device_name, "cuda:%.40s (%.110s)", ids, names);
  return NDF_OK;
}

/* The failure's reason into the caller's buffer, if any; returns st. */
static ndf_status create_fail(const ndf_context_opts *o, ndf_status st, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static ndf_status create_fail(const ndf_context_opts *o, ndf_status st, const char *fmt, ...) {
  const size_t v3 = offsetof(ndf_context_opts, message_size) + sizeof(size_t);
  if (o && o->struct_size >= v3 && o->message && o->message_size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->message, o->message_size, fmt, ap);
    va_end(ap);
  }
  return st;
}

/* The thread count: asked (> 0), else NDF_THREADS, else OpenMP's default; at most
 * NDF_MAX_THREADS and 8 per CPU, which a request over it is clamped to. */
static ndf_status pick_threads(const ndf_context_opts *o, int *out, char *note, size_t len) {
  long t = o ? o->threads : 0;
  const char *src = "threads";
  const char *env = getenv("NDF_THREADS");
  if (t == 0 && env && *env) {
    char *end;
    errno = 0;
    t = strtol(env, &end, 10);
    while (*end == ' ' || *end == '\n')
      end++;
    if (errno == ERANGE) t = LONG_MAX;
    if (end == env || *end || t < 1)
      return create_fail(o, NDF_EINVAL, "NDF_THREADS='%.40s' is not a positive integer", env);
    src = "NDF_THREADS";
  }
  if (t <= 0) t = omp_get_max_threads();
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  long most = cpus > 0 && 8 * cpus < NDF_MAX_THREADS ? 8 * cpus : NDF_MAX_THREADS;
  if (most < 1) most = 1;
  note[0] = 0;
  if (t > most) {
    snprintf(note, len, "%s %ld clamped to %ld (at most %d, and 8 per CPU: %ld present)", src, t,
             most, NDF_MAX_THREADS, cpus);
    t = most;
  }
  *out = (int)t;
  return NDF_OK;
}

ndf_status ndf_context_create(ndf_context **out, const ndf_context_opts *opts) {
  if (!out) return NDF_EINVAL;
  *out = NULL;
  /* The first version of the struct ended after `threads`. */
  const size_t v1 = offsetof(ndf_context_opts, threads) + sizeof(int);
  if (opts && opts->struct_size < v1) return NDF_EINVAL;
  if (opts && opts->threads < 0)
    return create_fail(opts, NDF_EINVAL, "threads %d is negative", opts->threads);
  int threads = 1;
  char note[200];
  ndf_status st = pick_threads(opts, &threads, note, sizeof note);
  if (st != NDF_OK) return st;
  ndf_context *c = calloc(1, sizeof *c);
  if (!c) return create_fail(opts, NDF_ENOMEM, "out of host memory");
  pthread_mutex_init(&c->msg_lock, NULL);

  const char *dev = opts ? opts->device : NULL, *from = "device";
  if (!dev || !*dev || !strcmp(dev, "auto")) {
    dev = getenv("NDF_DEVICE");
    from = "NDF_DEVICE";
    if (dev && (!*dev || !strcmp(dev, "auto"))) dev = NULL;
  }
  if (!dev) {
    if (pick_cuda(c, -1, 0) != NDF_OK) use_cpu(c);
    c->auto_device = c->place.kind == NDF_PLACE_CUDA;
  } else {
    ndf_place_kind kind;
    int devs[NDF__MAX_DEVICES], ndev;
    if (!parse_device(dev, &kind, devs, &ndev)) {
      st = NDF_EINVAL;
      ndf__fail(c, st, "unknown device (cpu, cuda, cuda:N, cuda:N,M,... or cuda:all)");
    } else if (kind == NDF_PLACE_HOST) {
      use_cpu(c);
    } else if (ndev == 0) {
      st = pick_cuda(c, -1, 1);
    } else {
      st = pick_cudas(c, devs, ndev);
    }
  }
  if (st != NDF_OK) {
    create_fail(opts, st, "%s=%.60s: %s", from, dev, c->msg);
    ndf_context_destroy(c);
    return st;
  }
  c->threads = threads;
  if (note[0]) ndf__fail(c, NDF_OK, "%s", note);
  if (opts && opts->struct_size >= offsetof(ndf_context_opts, workspace_limit) + sizeof(size_t))
    c->workspace_limit = opts->workspace_limit;
  if (opts && opts->struct_size >= offsetof(ndf_context_opts, memory_limit) + sizeof(size_t))
    c->memory_limit = opts->memory_limit;
  *out = c;
  return NDF_OK;
}

ndf_status ndf__context_child(ndf_context **out, const ndf_context *parent, int threads,
                              int device) {
  ndf_context *c = calloc(1, sizeof *c);
  if (!c) return ndf__fail(parent, NDF_ENOMEM, "out of host memory");
  pthread_mutex_init(&c->msg_lock, NULL);
  c->place = parent->place;
  c->caps = parent->caps;
  c->threads = threads;
  c->workspace_limit = parent->workspace_limit;
  c->worker = 1;
  snprintf(c->device_name, sizeof c->device_name, "%s", parent->device_name);
  if (c->place.kind == NDF_PLACE_CUDA) {
    ndf_status st = device == c->place.device ? NDF_OK : ndf__device()->select(c, device);
    c->ndev = 1;
    c->devs[0] = c->place.device;
    if (st == NDF_OK) st = ndf__device()->stream_create(c);
    if (st != NDF_OK) {
      ndf__fail(parent, st, "%s", c->msg);
      ndf_context_destroy(c);
      return st;
    }
  }
  *out = c;
  return NDF_OK;
}

void ndf_context_destroy(ndf_context *c) {
  if (!c) return;
  if (c->own_stream && ndf__device()) ndf__device()->stream_destroy(c);
  pthread_mutex_destroy(&c->msg_lock);
  free(c);
}

ndf_place ndf_context_place(const ndf_context *c) {
  ndf_place p = {NDF_PLACE_HOST, 0};
  return c ? c->place : p;
}

const char *ndf_context_device_name(const ndf_context *c) { return c ? c->device_name : ""; }

int ndf_context_devices(const ndf_context *c, int *devices, int cap) {
  if (!c || c->place.kind != NDF_PLACE_CUDA) return 0;
  for (int i = 0; devices && i < c->ndev && i < cap; i++)
    devices[i] = c->devs[i];
  return c->ndev;
}
int ndf_context_threads(const ndf_context *c) { return c ? c->threads : 0; }
size_t ndf_context_workspace_limit(const ndf_context *c) { return c ? c->workspace_limit : 0; }
size_t ndf_context_memory_limit(const ndf_context *c) { return c ? c->memory_limit : 0; }

size_t ndf_context_memory_free(const ndf_context *c) {
  if (!c || c->place.kind != NDF_PLACE_CUDA || !ndf__device()) return 0;
  size_t least = 0;
  for (int i = 0; i < (c->ndev ? c->ndev : 1); i++) {
    ndf_context on = *c;
    if (c->ndev) on.place.device = c->devs[i];
    const size_t fr = ndf__device()->mem_free(&on);
    if (i == 0 || fr < least) least = fr;
  }
  return least;
}

ndf_status ndf__workspace_check(const ndf_context *c, const char *solver, double need) {
  if (!c->workspace_limit || need <= (double)c->workspace_limit) return NDF_OK;
  return ndf__fail(c, NDF_ENOMEM,
                   "%s: needs %.0f bytes of workspace, over the context's workspace limit of %zu; "
                   "the direct method needs none",
                   solver, need, c->workspace_limit);
}
const char *ndf_context_message(const ndf_context *c) { return c ? c->msg : ""; }

ndf_status ndf_context_synchronize(ndf_context *c) {
  if (!c) return NDF_EINVAL;
  if (c->place.kind == NDF_PLACE_CUDA && ndf__device()) return ndf__device()->sync(c);
  return NDF_OK;
}
