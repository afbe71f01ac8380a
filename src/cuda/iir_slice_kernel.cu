// iir_slice_kernel.cu - cuda_iir's fused pass over the two fastest axes (y, x) of [P][Y][X]
// for Deriche's filter (iir_chunk.cuh): each Y x X slice is read once and written once for
// both axes, where iir_chunk_kernel.cu reads and writes it once per axis.
//
// A slice does not fit in one SM's shared memory (256 x 256 floats are 256 KiB), so a
// thread-block cluster of CS CTAs holds it, CTA b the band of rows [b RB, (b + 1) RB). Per
// slice each CTA
//  1. loads its band into shared memory;
//  2. filters its rows along x as iir_chunk_kernel.cu does (chunks of C samples, their
//     zero-start end states chained per row, then both recursions over every chunk), in
//     place;
//  3. filters its columns along y in chunks of C rows: the chunks' end states are chained
//     within the band from a zero start, and the band's leaving states are posted for the
//     other CTAs (distributed shared memory). After a cluster barrier each CTA chains the
//     posts of the bands before it (causal) and after it (anticausal) into the states that
//     enter its band, adds their propagation (p^(C i) times the entering state) to its
//     chunks' entering states, and runs both recursions over every chunk;
//  4. stores its band.
// The 'nearest' boundary states enter at the slice's first row (CTA 0) and last row (the last
// CTA; a band past the slice's end is filled with the last row, which leaves the anticausal
// steady state unchanged). Clusters are persistent and take slices in turn.
#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <stdint.h>

#include "iir_chunk.cuh"
#include "launch.h"

namespace cg = cooperative_groups;

namespace {

using namespace ndf_iir;

constexpr int C = 16, T = 512;
constexpr int kMaxX = 2048; // chunks chained per row: 128

struct geom {
  int cs, rb, ncx, ncb, pitch;
  size_t smem;
};

// The cluster size and band for a Y x X slice: the smallest cluster whose CTAs need at most
// `cap` bytes of shared memory.
geom plan(int Y, int X, int cs) {
  geom g;
  g.cs = cs;
  g.rb = ((Y + cs - 1) / cs + C - 1) / C * C;
  g.ncx = (X + C - 1) / C;
  g.ncb = g.rb / C;
  g.pitch = g.ncx * C + 4; // rows 4 banks apart, float4-aligned
  const size_t carx = (size_t)4 * g.rb * g.ncx, cary = (size_t)4 * X * g.ncb;
  g.smem = (size_t)g.rb * g.pitch * sizeof(float) + (size_t)4 * X * sizeof(float2) +
           (carx > cary ? carx : cary) * sizeof(float2) + (size_t)X * sizeof(float);
  return g;
}

template <bool VEC>
__global__ void __launch_bounds__(T, 1)
    iir_slice(const float *src, float *dst, int64_t P, int Y, int X, int rb,
              const chunkp<C> fy, const chunkp<C> fx) {
  cg::cluster_group cl = cg::this_cluster();
  const int b = (int)cl.block_rank(), cs = (int)cl.num_blocks();
  const int t = threadIdx.x, ncx = (X + C - 1) / C, ncb = rb / C, pitch = ncx * C + 4;
  extern __shared__ float4 sh4[];
  float *tile = reinterpret_cast<float *>(sh4);                  // [rb][pitch]
  float2 *post = reinterpret_cast<float2 *>(tile + rb * pitch); // [4][X]: the band's leaving states
  float2 *car = post + 4 * X;                                    // chunks' states
  const int ncar = max(4 * rb * ncx, 4 * X * ncb);
  float *xlast = reinterpret_cast<float *>(car + ncar); // [X]: each column's last sample
  const int r0 = b * rb, rows = min(rb, Y - r0);                 // rows >= 1 (plan)
  const bool first = b == 0, last = b == cs - 1;
  const int64_t nclusters = gridDim.x / cs;
  for (int64_t sl = blockIdx.x / cs; sl < P; sl += nclusters) {
    // 1. load the band
    const float *s0 = src + (sl * Y + r0) * (int64_t)X;
    if (VEC) {
      const int m = rows * X / 4;
      for (int e = t; e < m; e += T) {
        const int r = 4 * e / X, c = 4 * e - r * X;
        __pipeline_memcpy_async(tile + r * pitch + c, s0 + 4 * e, 16);
      }
    } else {
      for (int e = t; e < rows * X; e += T) {
        const int r = e / X;
        __pipeline_memcpy_async(tile + r * pitch + e - r * X, s0 + e, 4);
      }
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();

    // 2. along x: item i is row i % rows, chunk i / rows
    const int nix = rows * ncx;
    for (int i = t; i < nix; i += T) {
      const int r = i % rows, w = i / rows, i0 = w * C;
      const float *row = tile + r * pitch;
      const float xe = w == ncx - 1 ? row[X - 1] : 0; // only the last chunk pads
      float x[C];
#pragma unroll
      for (int j = 0; j < C; j++)
        x[j] = i0 + j < X ? row[i0 + j] : xe;
      float2 E[2], F[2];
      chunk_ends<C>(fx, x, E, F);
#pragma unroll
      for (int k = 0; k < 2; k++) {
        if (w == 0) E[k] = cfma(fx.pC[k], cscale(fx.g[k], x[0]), E[k]);
        if (w == ncx - 1) F[k] = cfma(fx.pC[k], cscale(fx.g[k], xe), F[k]);
        car[k * nix + i] = E[k];
        car[(2 + k) * nix + i] = F[k];
      }
    }
    __syncthreads();
    for (int u = t; u < 4 * rows; u += T)
      chain(car + (u / rows) * nix + u % rows, rows, ncx, fx.pC[(u / rows) & 1], u < 2 * rows);
    __syncthreads();
    for (int i = t; i < nix; i += T) {
      const int r = i % rows, w = i / rows, i0 = w * C;
      float *row = tile + r * pitch;
      const float xe = w == ncx - 1 ? row[X - 1] : 0; // its own chunk's: not yet overwritten
      float x[C], y[C];
#pragma unroll
      for (int j = 0; j < C; j++)
        x[j] = i0 + j < X ? row[i0 + j] : xe;
      float2 z[2], s[2];
#pragma unroll
      for (int k = 0; k < 2; k++) {
        z[k] = w == 0 ? cscale(fx.g[k], x[0]) : car[k * nix + i];
        s[k] = w == ncx - 1 ? cscale(fx.g[k], xe) : car[(2 + k) * nix + i];
      }
      chunk_filter<C>(fx, x, z, s, y);
#pragma unroll
      for (int j = 0; j < C; j++) // the row's padding (up to ncx C) is scratch
        row[i0 + j] = y[j];
    }
    __syncthreads();

    // 3. along y: item i is column i % X, chunk i / X of the band (rows past `rows`: the
    // slice's last row, which only the last CTA has)
    const int niy = X * ncb;
    for (int i = t; i < niy; i += T) {
      const int c = i % X, ch = i / X, i0 = ch * C;
      const float xe = tile[(rows - 1) * pitch + c];
      if (ch == 0) xlast[c] = xe; // for the recursions, after that row is overwritten
      float x[C];
#pragma unroll
      for (int j = 0; j < C; j++)
        x[j] = i0 + j < rows ? tile[(i0 + j) * pitch + c] : xe;
      float2 E[2], F[2];
      chunk_ends<C>(fy, x, E, F);
#pragma unroll
      for (int k = 0; k < 2; k++) {
        if (first && ch == 0) E[k] = cfma(fy.pC[k], cscale(fy.g[k], x[0]), E[k]);
        if (last && ch == ncb - 1) F[k] = cfma(fy.pC[k], cscale(fy.g[k], xe), F[k]);
        car[k * niy + i] = E[k];
        car[(2 + k) * niy + i] = F[k];
      }
    }
    __syncthreads();
    for (int u = t; u < 4 * X; u += T) {
      const int k = u / X, c = u % X;
      post[u] = chain(car + k * niy + c, X, ncb, fy.pC[k & 1], k < 2);
    }
    cl.sync(); // every band's posts are out
    for (int u = t; u < 4 * X; u += T) {
      const int k = u / X, c = u % X;
      const float2 pC = fy.pC[k & 1];
      float2 pB = make_float2(1, 0); // pole^(C ncb): across a whole band
      for (int j = 0; j < ncb; j++)
        pB = cfma(pB, pC, make_float2(0, 0));
      float2 z = make_float2(0, 0); // the state entering this band
      if (k < 2) {
        for (int j = 0; j < b; j++)
          z = cfma(pB, z, cl.map_shared_rank(post, j)[u]);
      } else {
        for (int j = cs - 1; j > b; j--)
          z = cfma(pB, z, cl.map_shared_rank(post, j)[u]);
      }
      float2 *cc = car + k * niy + c;
      for (int j = 0; j < ncb; j++) { // add its propagation to every chunk's entering state
        float2 *ci = cc + (k < 2 ? j : ncb - 1 - j) * X;
        *ci = cfma(z, make_float2(1, 0), *ci);
        z = cfma(pC, z, make_float2(0, 0));
      }
    }
    cl.sync(); // the posts are read (they are rewritten next slice); car is complete
    for (int i = t; i < niy; i += T) {
      const int c = i % X, ch = i / X, i0 = ch * C;
      const float xe = xlast[c];
      float x[C], y[C];
#pragma unroll
      for (int j = 0; j < C; j++)
        x[j] = i0 + j < rows ? tile[(i0 + j) * pitch + c] : xe;
      float2 z[2], s[2];
#pragma unroll
      for (int k = 0; k < 2; k++) {
        z[k] = first && ch == 0 ? cscale(fy.g[k], x[0]) : car[k * niy + i];
        s[k] = last && ch == ncb - 1 ? cscale(fy.g[k], xe) : car[(2 + k) * niy + i];
      }
      chunk_filter<C>(fy, x, z, s, y);
      // an item reads only its own chunk of the tile (and xlast), so it may overwrite it;
      // rows past `rows` are not stored
#pragma unroll
      for (int j = 0; j < C; j++)
        if (i0 + j < rows) tile[(i0 + j) * pitch + c] = y[j];
    }
    __syncthreads();

    // 4. store the band
    float *d0 = dst + (sl * Y + r0) * (int64_t)X;
    if (VEC) {
      const int m = rows * X / 4;
      for (int e = t; e < m; e += T) {
        const int r = 4 * e / X, c = 4 * e - r * X;
        reinterpret_cast<float4 *>(d0)[e] = *reinterpret_cast<const float4 *>(tile + r * pitch + c);
      }
    } else {
      for (int e = t; e < rows * X; e += T) {
        const int r = e / X;
        d0[e] = tile[r * pitch + e - r * X];
      }
    }
    __syncthreads(); // the tile is reloaded
  }
}

typedef void (*kernel_t)(const float *, float *, int64_t, int, int, int, const chunkp<C>,
                         const chunkp<C>);

// The cluster for a Y x X slice: the smallest (1 to 16 CTAs) whose CTAs fit twice in an SM,
// else the smallest that fits once; 0 if none (geom g filled).
int choose(int Y, int X, geom *g) {
  int dev = 0, optin = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  for (int pass = 0; pass < 2; pass++)
    for (int cs = 1; cs <= 16; cs *= 2) {
      const geom q = plan(Y, X, cs);
      if ((cs - 1) * q.rb >= Y) break; // a CTA would hold no row
      const size_t cap = pass == 0 ? (size_t)optin / 2 - 1024 : (size_t)optin;
      if (q.smem <= cap) {
        *g = q;
        return cs;
      }
    }
  return 0;
}

} // namespace

extern "C" int ndf__iir_slice_fit(const ndf__iir *fy, const ndf__iir *fx, int64_t Y, int64_t X) {
  if (fy->form != NDF__IIR_PARALLEL || fx->form != NDF__IIR_PARALLEL) return 0;
  if (fy->sigma > kMaxSigma || fx->sigma > kMaxSigma) return 0;
  if (Y < 2 || X < 2 || X > kMaxX || Y > 4096) return 0;
  geom g;
  return choose((int)Y, (int)X, &g) > 0;
}

extern "C" int ndf__launch_iir_slice(const float *src, float *dst, int64_t P, int64_t Y, int64_t X,
                                     const ndf__iir *fy, const ndf__iir *fx, void *stream) {
  if (P <= 0) return 0;
  geom g;
  if (!ndf__iir_slice_fit(fy, fx, Y, X) || !choose((int)Y, (int)X, &g))
    return (int)cudaErrorNotSupported;
  const bool vec = X % 4 == 0 && ((uintptr_t)src | (uintptr_t)dst) % 16 == 0;
  kernel_t k = vec ? iir_slice<true> : iir_slice<false>;
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)g.smem);
  if (e == cudaSuccess && g.cs > 8)
    e = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e != cudaSuccess) return (int)e;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = (unsigned)g.cs;
  attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cfg.blockDim = dim3(T);
  cfg.dynamicSmemBytes = g.smem;
  cfg.stream = (cudaStream_t)stream;
  int clusters = 0;
  cfg.gridDim = dim3((unsigned)g.cs);
  e = cudaOccupancyMaxActiveClusters(&clusters, k, &cfg);
  if (e != cudaSuccess) return (int)e;
  if (clusters < 1) return (int)cudaErrorNotSupported;
  const int64_t n = P < clusters ? P : clusters;
  cfg.gridDim = dim3((unsigned)(n * g.cs));
  const chunkp<C> qy = params<C>(*fy), qx = params<C>(*fx);
  e = cudaLaunchKernelEx(&cfg, k, src, dst, P, (int)Y, (int)X, g.rb, qy, qx);
  return (int)e;
}
