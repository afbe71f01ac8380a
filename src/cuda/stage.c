/* SPDX-License-Identifier: BSD-3-Clause */
/* stage.c - CUDA devices, streams, and staging of host or non-float32 arrays for CUDA solvers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <omp.h>

#include "../core/elem.h"
#include "host.h"
#include "ndf_cuda.h"

/* Host arrays go through pinned buffers in chunks of CHUNK elements: the input is packed chunk
 * by chunk (the cores in parallel) while the chunks before it are already on their way to the
 * device, and the output comes back chunk by chunk, each unpacked while the next ones are still
 * in flight (NEV chunks at a time, an event each). */
#define CHUNK ((int64_t)1 << 20) /* 4 MiB of float32 */
#define NEV 8
/* Threads that pack or unpack a chunk, at most: a plain copy's bandwidth saturates by 16-32
 * (49 GB/s with 8 threads, 58 with 16, 50 with 32 on a 32-core H200 host; packing that checks
 * for NaN gains up to 32), while every thread takes its part in a barrier per chunk. */
#define COPY_THREADS 32

/* Buffers a CUDA plan needs to turn the caller's arrays into device float32
 * arrays and back; which exist depends on the plan's places and dtypes. */
struct ndf__stage {
  float *h_in, *h_out; /* pinned host, contiguous */
  float *d_in, *d_out; /* device, contiguous */
  /* A plan with an exact twin: "the input holds NaN or Inf", written by the device into
   * mapped page-locked memory (v_flag, h_flag as the device sees it), else into d_flag and
   * copied back. */
  int *d_flag, *h_flag, *v_flag;
  cudaEvent_t ev[NEV];  /* a host output's chunks landed */
  pthread_mutex_t lock; /* the buffers serve one call at a time */
};

static ndf_status cuda_fail(const ndf_context *ctx, cudaError_t e, const char *what, size_t bytes) {
  if (e == cudaErrorMemoryAllocation)
    return ndf__fail(ctx, NDF_ENOMEM, "%s: out of memory allocating %zu bytes", what, bytes);
  return ndf__fail(ctx, NDF_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}

static int device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* no driver or no device: not sticky */
    return 0;
  }
  return n;
}

static ndf_status select_device(ndf_context *ctx, int dev) {
  struct cudaDeviceProp prop;
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess) e = cudaFree(NULL); /* creates the context: proves it usable */
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, dev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ndf__fail(ctx, NDF_ENODEV, "CUDA device %d unusable: %s", dev, cudaGetErrorString(e));
  }
  ctx->place.kind = NDF_PLACE_CUDA;
  ctx->place.device = dev;
  snprintf(ctx->device_name, sizeof ctx->device_name, "cuda:%d (%.100s)", dev, prop.name);
  /* The cost models' figures (ndf__device_caps); an attribute the device lacks stays 0. */
  int sms = 0, clock_khz = 0, mem_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) sms = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev) != cudaSuccess) clock_khz = 0;
  if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess) mem_khz = 0;
  if (cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess)
    bus_bits = 0;
  cudaGetLastError();
  ctx->caps = (ndf__device_caps){
      .sms = sms, .clock_hz = clock_khz * 1e3, .dram_bw = 2.0 * mem_khz * 1e3 * bus_bits / 8};
  const char *sim = ndf__dev_switch("NDF_DEVICE_CAPS"); /* "sms,clock GHz,DRAM TB/s" */
  double a, b, c;
  if (sim && sscanf(sim, "%lf,%lf,%lf", &a, &b, &c) == 3)
    ctx->caps = (ndf__device_caps){.sms = (int)a, .clock_hz = b * 1e9, .dram_bw = c * 1e12};
  return NDF_OK;
}

ndf_status ndf_context_set_stream(ndf_context *ctx, cudaStream_t stream) {
  if (!ctx) return NDF_EINVAL;
  if (ctx->place.kind != NDF_PLACE_CUDA)
    return ndf__fail(ctx, NDF_EUNSUPPORTED, "set_stream: the context is on the CPU");
  ctx->stream = stream;
  return NDF_OK;
}

cudaStream_t ndf_context_stream(const ndf_context *ctx) { return ctx ? ctx->stream : NULL; }

static ndf_status sync_stream(ndf_context *ctx) {
  cudaError_t e = cudaSetDevice(ctx->place.device);
  if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)ctx->stream);
  return e == cudaSuccess ? NDF_OK : cuda_fail(ctx, e, "synchronize", 0);
}

static void stage_destroy(struct ndf__stage *s) {
  if (!s) return;
  cudaFreeHost(s->h_in);
  cudaFreeHost(s->h_out);
  cudaFree(s->d_in);
  cudaFree(s->d_out);
  cudaFree(s->d_flag);
  cudaFreeHost(s->h_flag);
  for (int k = 0; k < NEV; k++)
    if (s->ev[k]) cudaEventDestroy(s->ev[k]);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static ndf_status stage_create(ndf_plan *p) {
  if (p->native && !p->alt) return NDF_OK; /* a native plan with a twin: the flag's buffers */
  const ndf_array *in = &p->pb.in, *out = &p->pb.out;
  size_t bin = (size_t)ndf_array_size(in) * sizeof(float);
  size_t bout = (size_t)ndf_array_size(out) * sizeof(float) * (size_t)p->pb.nout;
  struct ndf__stage *s = calloc(1, sizeof *s);
  if (!s) return ndf__fail(p->ctx, NDF_ENOMEM, "out of host memory");
  pthread_mutex_init(&s->lock, NULL);
  p->stage = s;
  int hin = in->place.kind == NDF_PLACE_HOST, hout = out->place.kind == NDF_PLACE_HOST;
  cudaError_t e = cudaSetDevice(p->ctx->place.device);
  const char *what = "staging";
  size_t bytes = 0;
  if (e == cudaSuccess && hin) e = cudaMallocHost((void **)&s->h_in, bytes = bin);
  if (e == cudaSuccess && hout) e = cudaMallocHost((void **)&s->h_out, bytes = bout);
  if (e == cudaSuccess && !p->native && (hin || in->dtype != NDF_F32))
    e = cudaMalloc((void **)&s->d_in, bytes = bin);
  if (e == cudaSuccess && !p->native && (hout || out->dtype != NDF_F32))
    e = cudaMalloc((void **)&s->d_out, bytes = bout);
  if (e == cudaSuccess && p->alt && !hin) e = cudaMalloc((void **)&s->d_flag, bytes = sizeof(int));
  if (e == cudaSuccess && p->alt && !hin)
    e = cudaHostAlloc((void **)&s->h_flag, bytes = sizeof(int), cudaHostAllocMapped);
  if (e == cudaSuccess && s->h_flag &&
      cudaHostGetDevicePointer((void **)&s->v_flag, s->h_flag, 0) != cudaSuccess) {
    cudaGetLastError();
    s->v_flag = NULL;
  }
  for (int k = 0; k < NEV && e == cudaSuccess && hout; k++)
    e = cudaEventCreateWithFlags(&s->ev[k], cudaEventDisableTiming);
  return e == cudaSuccess ? NDF_OK : cuda_fail(p->ctx, e, what, bytes);
}

int ndf__cuda_f64_native(const ndf__problem *pb, const ndf_context *ctx) {
  const char *on = ndf__dev_switch("NDF_CUDA_F64");
  return !(on && on[0] == '0') && ctx->place.kind == NDF_PLACE_CUDA && pb->in.dtype == NDF_F64 &&
         pb->out.dtype == NDF_F64 && pb->in.place.kind == NDF_PLACE_CUDA &&
         pb->out.place.kind == NDF_PLACE_CUDA;
}

ndf__view4 ndf__cuda_view4(const ndf_array *a) {
  ndf__view4 v;
  int pad = 4 - a->ndim;
  for (int d = 0; d < 4; d++) {
    v.shape[d] = d < pad ? 1 : a->shape[d - pad];
    v.strides[d] = d < pad ? 0 : a->strides[d - pad];
  }
  return v;
}

/* A contiguous float32 device array of a's shape over buf. */
static ndf_array dev_f32(const ndf_array *a, float *buf, int device) {
  ndf_array r = ndf_array_contiguous(NDF_F32, a->ndim, a->shape, buf);
  r.place.kind = NDF_PLACE_CUDA;
  r.place.device = device;
  return r;
}

/* Elements [i0, i1) of a into dst[i0..i1) as float32, the range split over threads; with
 * check, returns 1 if one of them is NaN or infinite. */
static int pack(const ndf_array *a, float *dst, int64_t i0, int64_t i1, int threads, int check) {
  const int contig = ndf__is_contiguous(a), f32 = a->dtype == NDF_F32;
  int bad = 0;
#pragma omp parallel num_threads(threads) reduction(| : bad)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = i0 + (i1 - i0) * t / nt, hi = i0 + (i1 - i0) * (t + 1) / nt;
    int b = 0;
    if (contig && f32) {
      const float *src = a->data;
      if (!check) {
        memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof *dst);
      } else {
        for (int64_t i = lo; i < hi; i++) {
          dst[i] = src[i];
          b |= ndf__f32_nonfinite(&src[i]);
        }
      }
    } else if (lo < hi) {
      ndf__walker w;
      ndf__walk_at(&w, a, lo);
      for (int64_t i = lo; i < hi; i++, ndf__walk_next(&w, a)) {
        const float v = (float)ndf__load(a->dtype, a->data, contig ? i : w.off);
        dst[i] = v;
        b |= check && ndf__f32_nonfinite(&v);
      }
    }
    bad |= b;
  }
  return bad;
}

/* src[i0..i1) into elements [i0, i1) of a, converted to its dtype, the range split over
 * threads. */
static void unpack(const float *src, ndf_array *a, int64_t i0, int64_t i1, int threads) {
  const int contig = ndf__is_contiguous(a), f32 = a->dtype == NDF_F32;
#pragma omp parallel num_threads(threads)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = i0 + (i1 - i0) * t / nt, hi = i0 + (i1 - i0) * (t + 1) / nt;
    if (contig && f32) {
      memcpy((float *)a->data + lo, src + lo, (size_t)(hi - lo) * sizeof *src);
    } else if (lo < hi) {
      ndf__walker w;
      ndf__walk_at(&w, a, lo);
      for (int64_t i = lo; i < hi; i++, ndf__walk_next(&w, a))
        ndf__store(a->dtype, a->data, contig ? i : w.off, src[i]);
    }
  }
}

/* The host input packed into h_in and copied to d_in, chunk by chunk; returns 1 if check
 * found a NaN or an infinity. */
static int stage_in(struct ndf__stage *s, const ndf_array *in, int threads, int check,
                    cudaStream_t st, cudaError_t *e) {
  const int64_t n = ndf_array_size(in);
  int bad = 0;
  for (int64_t i0 = 0; i0 < n && *e == cudaSuccess; i0 += CHUNK) {
    const int64_t i1 = i0 + CHUNK < n ? i0 + CHUNK : n;
    bad |= pack(in, s->h_in, i0, i1, threads, check);
    *e = cudaMemcpyAsync(s->d_in + i0, s->h_in + i0, (size_t)(i1 - i0) * sizeof(float),
                         cudaMemcpyHostToDevice, st);
  }
  return bad;
}

/* Maps the pages of the host outputs in (each page written with its own value, so nothing
 * changes) on every thread while the GPU works: a fresh array's first touch (the kernel zeroing
 * each page) costs as much as the copy back, and would otherwise come during it. */
static void prefault(ndf_array *out, int nout, int threads) {
  for (int f = 0; f < nout; f++) {
    if (!ndf__is_contiguous(&out[f])) continue;
    const size_t es = ndf_dtype_size(out[f].dtype), page = 4096;
    const int64_t nbytes = ndf_array_size(&out[f]) * (int64_t)es;
    volatile unsigned char *b = out[f].data;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < nbytes; i += (int64_t)page)
      b[i] = b[i];
  }
}

/* The nout outputs (one after the other in d_out) back into out[], chunk by chunk: up to NEV
 * chunks in flight, each unpacked once its event says it has landed in h_out. */
static cudaError_t stage_out(struct ndf__stage *s, ndf_array *out, int nout, int threads,
                             cudaStream_t st) {
  const int64_t nel = ndf_array_size(out), per = (nel + CHUNK - 1) / CHUNK, nc = per * nout;
  cudaError_t e = cudaSuccess;
  int64_t issued = 0, done = 0;
  while (done < nc && e == cudaSuccess) {
    for (; issued < nc && issued - done < NEV && e == cudaSuccess; issued++) {
      const int64_t f = issued / per, i0 = issued % per * CHUNK;
      const int64_t i1 = i0 + CHUNK < nel ? i0 + CHUNK : nel;
      e = cudaMemcpyAsync(s->h_out + f * nel + i0, s->d_out + f * nel + i0,
                          (size_t)(i1 - i0) * sizeof(float), cudaMemcpyDeviceToHost, st);
      if (e == cudaSuccess) e = cudaEventRecord(s->ev[issued % NEV], st);
    }
    if (e == cudaSuccess) e = cudaEventSynchronize(s->ev[done % NEV]);
    if (e != cudaSuccess) break;
    const int64_t f = done / per, i0 = done % per * CHUNK;
    const int64_t i1 = i0 + CHUNK < nel ? i0 + CHUNK : nel;
    unpack(s->h_out + f * nel, &out[f], i0, i1, threads);
    done++;
  }
  if (e != cudaSuccess) cudaStreamSynchronize(st); /* nothing left writing h_out */
  return e;
}

/* Whether the byte at p is page-locked host memory (cudaMallocHost, cudaHostAlloc). */
static int page_locked(const void *p) {
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return at.type == cudaMemoryTypeHost;
}

/* Whether a's elements lie in page-locked host memory as one contiguous float32 block, which
 * a copy reaches directly (its first and last bytes both page-locked). */
static int direct_as(const ndf_array *a, ndf_dtype t) {
  const int64_t bytes = ndf_array_size(a) * (int64_t)ndf_dtype_size(a->dtype);
  return a->dtype == t && bytes > 0 && ndf__is_contiguous(a) && page_locked(a->data) &&
         page_locked((const char *)a->data + bytes - 1);
}

static int direct(const ndf_array *a) { return direct_as(a, NDF_F32); }

/* The device check, the stage lock held. */
static ndf_status device_nonfinite(const ndf_plan *p, const ndf_array *a, int *bad) {
  struct ndf__stage *s = p->stage;
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  *bad = 0;
  if (a->dtype != NDF_F32 && a->dtype != NDF_F64) return NDF_OK;
  if (!s || !s->d_flag) return ndf__fail(p->ctx, NDF_EINVAL, "no buffers for a finiteness check");
  cudaError_t e = cudaSuccess;
  if (s->v_flag) /* no kernel of this plan writes it now: the last call waited for its own */
    *(volatile int *)s->h_flag = 0;
  else
    e = cudaMemsetAsync(s->d_flag, 0, sizeof(int), st);
  if (e == cudaSuccess)
    e = (cudaError_t)ndf__launch_nonfinite(a->data, a->dtype, ndf__cuda_view4(a),
                                           s->v_flag ? s->v_flag : s->d_flag, st);
  if (e == cudaSuccess && !s->v_flag)
    e = cudaMemcpyAsync(s->h_flag, s->d_flag, sizeof(int), cudaMemcpyDeviceToHost, st);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  if (e != cudaSuccess) return cuda_fail(p->ctx, e, "checking the input for NaN and Inf", 0);
  *bad = *(volatile int *)s->h_flag != 0;
  return NDF_OK;
}

/* A native plan's arrays go to its exec as they are; in place, an exec that cannot read and
 * write one array reads a stream-ordered copy of the input's memory span instead. */
static ndf_status native_execute(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                                 ndf_array *out, int same) {
  if (!same || p->in_place || ndf_array_size(in) == 0) return p->exec(p, in, ops, out);
  cudaStream_t st = (cudaStream_t)p->ctx->stream;
  const int64_t es = (int64_t)ndf_dtype_size(in->dtype);
  int64_t lo = 0, hi = 0; /* the span's first and last element, from in->data */
  for (int d = 0; d < in->ndim; d++) {
    const int64_t ext = (in->shape[d] - 1) * in->strides[d];
    if (ext < 0)
      lo += ext;
    else
      hi += ext;
  }
  const size_t bytes = (size_t)((hi - lo + 1) * es);
  char *tmp = NULL;
  cudaError_t e = cudaMallocAsync((void **)&tmp, bytes, st);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(tmp, (const char *)in->data + lo * es, bytes, cudaMemcpyDeviceToDevice, st);
  if (e != cudaSuccess) {
    if (tmp) cudaFreeAsync(tmp, st);
    return cuda_fail(p->ctx, e, "in-place copy", bytes);
  }
  ndf_array copy = *in;
  copy.data = tmp - lo * es;
  const ndf_status r = p->exec(p, &copy, ops, out);
  cudaFreeAsync(tmp, st);
  return r;
}

static ndf_status execute(const ndf_plan *p, const ndf_array *in, const ndf_array *ops,
                          ndf_array *out, int same) {
  ndf_context *ctx = p->ctx;
  struct ndf__stage *s = p->stage;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const int dev = ctx->place.device, T = ctx->threads < COPY_THREADS ? ctx->threads : COPY_THREADS;
  const int hin = in->place.kind == NDF_PLACE_HOST, hout = out->place.kind == NDF_PLACE_HOST;
  const size_t bin = (size_t)ndf_array_size(in) * sizeof(float);
  float *tmp = NULL;
  ndf_array din = *in, dout1, *dout = &dout1;
  ndf_status r = NDF_OK;

  cudaError_t e = cudaSetDevice(dev);
  if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaSetDevice", 0);
  if (p->native && !p->alt) return native_execute(p, in, ops, out, same);
  pthread_mutex_lock(&s->lock);
  if (p->native) { /* its twin runs on inputs that hold NaN or Inf, native too where it is */
    int bad = 0;
    r = device_nonfinite(p, in, &bad);
    pthread_mutex_unlock(&s->lock);
    if (r != NDF_OK) return r;
    const ndf_plan *q = bad && p->alt->native ? p->alt : p;
    ndf__note_alt(p, q != p);
    return native_execute(q, in, ops, out, same);
  }
  /* A plan with an exact twin runs the twin on inputs that hold NaN or Inf: a host input is
   * checked while it is packed, a device one by a reduction before anything else. */
  int bad = 0;
  if (hin && !p->alt && direct(in))
    e = cudaMemcpyAsync(s->d_in, in->data, bin, cudaMemcpyHostToDevice, st);
  else if (hin)
    bad = stage_in(s, in, T, p->alt != NULL, st, &e);
  else if (p->alt && (r = device_nonfinite(p, in, &bad)) != NDF_OK)
    goto done;
  const ndf_plan *q = bad ? p->alt : p;
  ndf__note_alt(p, bad);
  if (q->native) { /* a native twin takes the caller's device arrays, not the staged ones */
    r = native_execute(q, in, ops, out, same);
    goto done;
  }
  const int inplace_dev = same && !hin && !(q->in_place && in->dtype == NDF_F32);
  if (hin) {
    din = dev_f32(in, s->d_in, dev);
  } else if (inplace_dev || in->dtype != NDF_F32) {
    float *buf = s->d_in;
    if (inplace_dev && in->dtype == NDF_F32) { /* the plan has no input buffer */
      e = cudaMallocAsync((void **)&tmp, bin, st);
      if (e != cudaSuccess) {
        r = cuda_fail(ctx, e, "in-place copy", bin);
        goto done;
      }
      buf = tmp;
    }
    e = (cudaError_t)ndf__launch_to_f32(in->data, in->dtype, ndf__cuda_view4(in), buf, st);
    din = dev_f32(in, buf, dev);
  }
  /* A bank's outputs, staged, lie one after the other in d_out (and h_out). */
  const int nout = p->pb.nout;
  const int64_t nel = ndf_array_size(out);
  if (nout > 1 && !(dout = malloc((size_t)nout * sizeof *dout))) {
    r = ndf__fail(ctx, NDF_ENOMEM, "out of host memory");
    goto done;
  }
  for (int f = 0; f < nout; f++)
    dout[f] = hout || out->dtype != NDF_F32 ? dev_f32(out, s->d_out + f * nel, dev) : out[f];
  if (e != cudaSuccess) {
    r = cuda_fail(ctx, e, "staging the input", 0);
    goto done;
  }
  r = q->exec(q, &din, ops, dout);
  if (r != NDF_OK) goto done;
  int direct_out = hout;
  for (int f = 0; f < nout && direct_out; f++)
    direct_out = direct(&out[f]);
  if (direct_out) {
    for (int f = 0; f < nout && e == cudaSuccess; f++)
      e = cudaMemcpyAsync(out[f].data, s->d_out + f * nel, (size_t)nel * sizeof(float),
                          cudaMemcpyDeviceToHost, st);
    cudaError_t e2 = cudaStreamSynchronize(st);
    if (e == cudaSuccess) e = e2;
  } else if (hout) {
    prefault(out, nout, T);
    e = stage_out(s, out, nout, T, st);
  } else if (out->dtype != NDF_F32) {
    for (int f = 0; f < nout && e == cudaSuccess; f++)
      e = (cudaError_t)ndf__launch_from_f32(s->d_out + f * nel, out[f].data, out[f].dtype,
                                            ndf__cuda_view4(&out[f]), st);
  }
  if (e != cudaSuccess) r = cuda_fail(ctx, e, "returning the output", 0);
done:
  if (dout != &dout1) free(dout);
  if (tmp) cudaFreeAsync(tmp, st);
  if (hin && !hout) cudaStreamSynchronize(st); /* h_in is reused by the next call */
  pthread_mutex_unlock(&s->lock);
  return r;
}

ndf_status ndf__cuda_check(const ndf_context *ctx, int err, const char *what) {
  return err == 0 ? NDF_OK : cuda_fail(ctx, (cudaError_t)err, what, 0);
}

static ndf_status alloc(ndf_context *ctx, void **p, size_t bytes) {
  cudaError_t e = cudaSetDevice(ctx->place.device);
  if (e == cudaSuccess) e = cudaMalloc(p, bytes);
  return e == cudaSuccess ? NDF_OK : cuda_fail(ctx, e, "ndf_array_alloc", bytes);
}

static void free_device(ndf_context *ctx, void *p) {
  cudaSetDevice(ctx ? ctx->place.device : 0);
  cudaFree(p);
}

/* Portable: page-locked for every device's context, not only the allocating one's. */
static ndf_status host_alloc(ndf_context *ctx, void **p, size_t bytes) {
  cudaError_t e = cudaSetDevice(ctx->place.device);
  if (e == cudaSuccess) e = cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocPortable);
  return e == cudaSuccess ? NDF_OK : cuda_fail(ctx, e, "ndf_array_alloc_host", bytes);
}

static int host_free(ndf_context *ctx, void *p) {
  (void)ctx;
  if (!page_locked(p)) return 0;
  cudaFreeHost(p);
  return 1;
}

static ndf_status copy(ndf_context *ctx, void *dst, const void *src, size_t bytes) {
  cudaError_t e = cudaSetDevice(ctx->place.device);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)ctx->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)ctx->stream);
  return e == cudaSuccess ? NDF_OK : cuda_fail(ctx, e, "ndf_array_copy", bytes);
}

/* A contiguous stream-ordered buffer for the view a, of a's dtype (float32 staged, or a native
 * exec's own), into *buf, holding a's elements where fill. */
static cudaError_t view_buffer(const ndf_array *a, int fill, void **buf, cudaStream_t st) {
  cudaError_t e = cudaMallocAsync(buf, (size_t)ndf_array_size(a) * ndf_dtype_size(a->dtype), st);
  if (e == cudaSuccess && fill)
    e = (cudaError_t)ndf__launch_gather_same(a->data, a->dtype, ndf__cuda_view4(a), *buf, st);
  return e;
}

/* The buffer buf scattered into the view a unless e is an error, then freed. */
static cudaError_t view_unbuffer(void *buf, ndf_array *a, cudaError_t e, cudaStream_t st) {
  if (e == cudaSuccess)
    e = (cudaError_t)ndf__launch_scatter_same(buf, a->data, a->dtype, ndf__cuda_view4(a), st);
  cudaFreeAsync(buf, st);
  return e;
}

int ndf__cuda_contig_begin(ndf__contig *c, const ndf_array *in, int nout, ndf_array *out,
                           void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  cudaError_t e = cudaSuccess;
  c->src = in->data;
  c->gin = NULL;
  c->nout = nout;
  c->dst = &c->dst1;
  c->gout = &c->gout1;
  c->gout1 = NULL;
  if (nout > 1) {
    c->dst = calloc((size_t)nout, sizeof *c->dst);
    c->gout = calloc((size_t)nout, sizeof *c->gout);
    if (!c->dst || !c->gout) {
      free(c->dst);
      free(c->gout);
      c->nout = 0; /* nothing for end to scatter or free */
      c->dst = &c->dst1;
      c->gout = &c->gout1;
      return (int)cudaErrorMemoryAllocation;
    }
  }
  if (!ndf__is_contiguous(in)) {
    e = view_buffer(in, 1, &c->gin, st);
    c->src = c->gin;
  }
  for (int f = 0; f < nout; f++) {
    c->dst[f] = out[f].data;
    if (e == cudaSuccess && !ndf__is_contiguous(&out[f])) {
      e = view_buffer(&out[f], 0, &c->gout[f], st);
      c->dst[f] = c->gout[f];
    }
  }
  return (int)e;
}

int ndf__cuda_contig_end(ndf__contig *c, int err, ndf_array *out, void *stream) {
  cudaStream_t st = (cudaStream_t)stream;
  cudaError_t e = (cudaError_t)err;
  for (int f = 0; f < c->nout; f++)
    if (c->gout[f]) e = view_unbuffer(c->gout[f], &out[f], e, st);
  if (c->gin) cudaFreeAsync(c->gin, st);
  if (c->dst != &c->dst1) free(c->dst);
  if (c->gout != &c->gout1) free(c->gout);
  c->gin = NULL;
  c->nout = 0;
  c->dst = &c->dst1;
  c->gout = &c->gout1;
  return (int)e;
}

/* A plan's parts are freed after its device work: one wait for the whole device (a one-shot
 * call may still be running, on any stream the context has had). */
static void quiesce(ndf_context *ctx) {
  if (cudaSetDevice(ctx->place.device) == cudaSuccess) cudaDeviceSynchronize();
}

static size_t mem_free(ndf_context *ctx) {
  size_t fr = 0, total = 0;
  if (cudaSetDevice(ctx->place.device) != cudaSuccess ||
      cudaMemGetInfo(&fr, &total) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return fr;
}

static ndf_status stream_create(ndf_context *ctx) {
  cudaStream_t s = NULL;
  cudaError_t e = cudaSetDevice(ctx->place.device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_fail(ctx, e, "creating a stream", 0);
  ctx->stream = s;
  ctx->own_stream = 1;
  return NDF_OK;
}

static void stream_destroy(ndf_context *ctx) {
  if (cudaSetDevice(ctx->place.device) == cudaSuccess && ctx->stream)
    cudaStreamDestroy((cudaStream_t)ctx->stream);
  ctx->stream = NULL;
  ctx->own_stream = 0;
}

static int current(void) {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

static void set_current(int device) {
  if (device >= 0 && cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
}

static const ndf__device_ops ops = {.count = device_count,
                                    .select = select_device,
                                    .alloc = alloc,
                                    .free = free_device,
                                    .host_alloc = host_alloc,
                                    .host_free = host_free,
                                    .direct = direct_as,
                                    .copy = copy,
                                    .sync = sync_stream,
                                    .stage_create = stage_create,
                                    .stage_destroy = stage_destroy,
                                    .quiesce = quiesce,
                                    .execute = execute,
                                    .mem_free = mem_free,
                                    .stream_create = stream_create,
                                    .stream_destroy = stream_destroy,
                                    .current = current,
                                    .set_current = set_current};

const ndf__device_ops *ndf__cuda_device_ops(void) { return &ops; }
