// SPDX-License-Identifier: BSD-3-Clause
// convert.cu - dtype conversion between strided device arrays and contiguous float32 buffers.
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "common.cuh"
#include "ndf.h"

template <typename T> __device__ __forceinline__ T ndf__cast_out(float v);
template <> __device__ __forceinline__ float ndf__cast_out<float>(float v) { return v; }
template <> __device__ __forceinline__ double ndf__cast_out<double>(float v) { return v; }
// Integers as on the CPU: round half to even, clamp, NaN to zero.
template <typename T, int LO, int HI> __device__ __forceinline__ T ndf__cast_int(float v) {
  if (v != v) return 0;
  v = rintf(v);
  return (T)(v < LO ? LO : v > HI ? HI : v);
}
template <> __device__ __forceinline__ uint8_t ndf__cast_out<uint8_t>(float v) {
  return ndf__cast_int<uint8_t, 0, 255>(v);
}
template <> __device__ __forceinline__ uint16_t ndf__cast_out<uint16_t>(float v) {
  return ndf__cast_int<uint16_t, 0, 65535>(v);
}
template <> __device__ __forceinline__ int16_t ndf__cast_out<int16_t>(float v) {
  return ndf__cast_int<int16_t, -32768, 32767>(v);
}

// An element stored from a contiguous buffer: from float32 as on the CPU (ndf__cast_out), one
// of the view's own type as it is (a native plan's buffers).
template <typename D, typename S> __device__ __forceinline__ D store_as(S v) {
  if constexpr (std::is_same<D, S>::value)
    return v;
  else
    return ndf__cast_out<D>(v);
}

// A strided view gathered into a contiguous buffer (converted to its type), and a contiguous
// buffer scattered into a view.
template <typename S, typename D> __global__ void gather(const S *src, ndf__view4 v, D *dst) {
  int64_t n = ndf__vsize(v), c[4];
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = (D)src[ndf__voff(v, i, c)];
}

template <typename S, typename D> __global__ void scatter(const S *src, D *dst, ndf__view4 v) {
  int64_t n = ndf__vsize(v), c[4];
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[ndf__voff(v, i, c)] = store_as<D>(src[i]);
}

// NaN or infinite as float32 arithmetic sees the value (a float64 past float32's range counts).
__device__ __forceinline__ int bad_f32(float v) {
  return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}

// Any element of a strided view not finite: *flag = 1 (the caller zeroed it).
template <typename T> __global__ void nonfinite(const T *src, ndf__view4 v, int *flag) {
  int64_t n = ndf__vsize(v), c[4];
  int bad = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    bad |= bad_f32((float)src[ndf__voff(v, i, c)]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

// The same over n contiguous elements, 16 bytes a load where the start allows.
template <typename T> __global__ void nonfinite_flat(const T *src, int64_t n, int *flag) {
  constexpr int K = 16 / sizeof(T);
  struct alignas(16) pack {
    T v[K];
  };
  const int64_t mis = (int64_t)((16 - (uintptr_t)src % 16) % 16 / sizeof(T)),
                lead = mis < n ? mis : n; // elements before the first 16-byte boundary
  const int64_t nv = (n - lead) / K, step = (int64_t)gridDim.x * blockDim.x,
                t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const pack *p = reinterpret_cast<const pack *>(src + lead);
  int bad = 0;
  for (int64_t i = t; i < nv; i += step) {
    const pack q = p[i];
#pragma unroll
    for (int k = 0; k < K; k++)
      bad |= bad_f32((float)q.v[k]);
  }
  if (t < lead) bad |= bad_f32((float)src[t]);
  for (int64_t i = lead + nv * K + t; i < n; i += step)
    bad |= bad_f32((float)src[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

template <typename T> static int nonfinite_t(const void *src, ndf__view4 v, int *flag, void *s) {
  int64_t n = v.shape[0] * v.shape[1] * v.shape[2] * v.shape[3], step = 1;
  int flat = 1;
  for (int d = 3; d >= 0; d--) {
    if (v.shape[d] > 1 && v.strides[d] != step) flat = 0;
    step *= v.shape[d];
  }
  if (flat) {
    // Enough blocks to fill the device, each thread several loads; the figure per device is
    // found once (a racing thread finds the same).
    static int fill[64];
    int dev = 0;
    cudaGetDevice(&dev);
    int most = dev < 64 ? fill[dev] : 0;
    if (most <= 0) {
      int grid = 0, sms = 0;
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&grid, nonfinite_flat<T>, 256, 0);
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      most = grid * sms > 0 ? grid * sms : 1;
      if (dev < 64) fill[dev] = most;
    }
    int64_t want = (n + 256 * 4 - 1) / (256 * 4);
    if (want > most) want = most;
    nonfinite_flat<T>
        <<<(unsigned)(want > 0 ? want : 1), 256, 0, (cudaStream_t)s>>>((const T *)src, n, flag);
  } else {
    nonfinite<T><<<ndf__grid(n, 256), 256, 0, (cudaStream_t)s>>>((const T *)src, v, flag);
  }
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_nonfinite(const void *src, int dtype, ndf__view4 v, int *flag,
                                     void *stream) {
  switch (dtype) {
  case NDF_F32: return nonfinite_t<float>(src, v, flag, stream);
  case NDF_F64: return nonfinite_t<double>(src, v, flag, stream);
  }
  return 0; /* integers are finite */
}

template <typename S, typename D>
static int gather_t(const void *src, ndf__view4 v, D *dst, void *s) {
  int64_t n = v.shape[0] * v.shape[1] * v.shape[2] * v.shape[3];
  if (n == 0) return 0;
  gather<S, D><<<ndf__grid(n, 256), 256, 0, (cudaStream_t)s>>>((const S *)src, v, dst);
  return (int)cudaGetLastError();
}

template <typename S, typename D>
static int scatter_t(const S *src, void *dst, ndf__view4 v, void *s) {
  int64_t n = v.shape[0] * v.shape[1] * v.shape[2] * v.shape[3];
  if (n == 0) return 0;
  scatter<S, D><<<ndf__grid(n, 256), 256, 0, (cudaStream_t)s>>>(src, (D *)dst, v);
  return (int)cudaGetLastError();
}

extern "C" int ndf__launch_gather_same(const void *src, int dtype, ndf__view4 v, void *dst,
                                       void *stream) {
  switch (dtype) {
  case NDF_U8: return gather_t<uint8_t, uint8_t>(src, v, (uint8_t *)dst, stream);
  case NDF_U16: return gather_t<uint16_t, uint16_t>(src, v, (uint16_t *)dst, stream);
  case NDF_I16: return gather_t<int16_t, int16_t>(src, v, (int16_t *)dst, stream);
  case NDF_F32: return gather_t<float, float>(src, v, (float *)dst, stream);
  case NDF_F64: return gather_t<double, double>(src, v, (double *)dst, stream);
  }
  return (int)cudaErrorInvalidValue;
}

extern "C" int ndf__launch_scatter_same(const void *src, void *dst, int dtype, ndf__view4 v,
                                        void *stream) {
  switch (dtype) {
  case NDF_U8: return scatter_t<uint8_t, uint8_t>((const uint8_t *)src, dst, v, stream);
  case NDF_U16: return scatter_t<uint16_t, uint16_t>((const uint16_t *)src, dst, v, stream);
  case NDF_I16: return scatter_t<int16_t, int16_t>((const int16_t *)src, dst, v, stream);
  case NDF_F32: return scatter_t<float, float>((const float *)src, dst, v, stream);
  case NDF_F64: return scatter_t<double, double>((const double *)src, dst, v, stream);
  }
  return (int)cudaErrorInvalidValue;
}

extern "C" int ndf__launch_to_f32(const void *src, int dtype, ndf__view4 v, float *dst,
                                  void *stream) {
  switch (dtype) {
  case NDF_U8: return gather_t<uint8_t, float>(src, v, dst, stream);
  case NDF_U16: return gather_t<uint16_t, float>(src, v, dst, stream);
  case NDF_I16: return gather_t<int16_t, float>(src, v, dst, stream);
  case NDF_F32: return gather_t<float, float>(src, v, dst, stream);
  case NDF_F64: return gather_t<double, float>(src, v, dst, stream);
  }
  return (int)cudaErrorInvalidValue;
}

extern "C" int ndf__launch_from_f32(const float *src, void *dst, int dtype, ndf__view4 v,
                                    void *stream) {
  switch (dtype) {
  case NDF_U8: return scatter_t<float, uint8_t>(src, dst, v, stream);
  case NDF_U16: return scatter_t<float, uint16_t>(src, dst, v, stream);
  case NDF_I16: return scatter_t<float, int16_t>(src, dst, v, stream);
  case NDF_F32: return scatter_t<float, float>(src, dst, v, stream);
  case NDF_F64: return scatter_t<float, double>(src, dst, v, stream);
  }
  return (int)cudaErrorInvalidValue;
}
