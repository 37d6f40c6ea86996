// kernels/decode/portable/kernel.h - the portable decode kernel: plain loops over shared memory,
// one chunk of 64 keys at a time, any head dims (D % 32 == 0, D <= 576, Dv <= 512), bf16 or fp8
// KV. It is the AMD build's kernel (compiled for gfx90a / gfx940 in CI, not run on AMD hardware
// here); on NVIDIA it runs head dims other than MLA's 576 / 512 and DecodeOptions::tiling = 5.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/schedule.h"

namespace mlasim::gpu::decode::portable {

constexpr int kChunk = 64;
constexpr int kLanesPerRow = kBlock / kRows;                  // 16
constexpr int kAccPerThread = kMaxDv / kLanesPerRow;          // 32 columns of one row
constexpr int kKeysPerLane = kChunk / kLanesPerRow;           // 4
constexpr int kLoadsPerThread = kChunk * kMaxD / 8 / kBlock;  // 18 x 16 bytes
constexpr int kLdp = kChunk + 8;                              // floats per row of ps
static_assert(kChunk * kMaxD / 8 % kBlock == 0, "loads per thread");

__host__ __device__ inline size_t max_sz(size_t a, size_t b) {
  return a > b ? a : b;
}
__device__ inline float bf2f(uint16_t x) {
  return __uint_as_float(static_cast<uint32_t>(x) << 16);
}

struct Smem {
  int ldk;        // bf16 elements per row of qs / ks
  uint16_t* qs;   // [kRows][ldk]
  uint16_t* ks;   // [kChunk][ldk]
  float* sp;      // [kRows][kLdp] scores, then probabilities; aliased by oc [kRows][Dv]
  int64_t* krow;  // [2][kChunk] cache row of each key of the current / next chunk, -1 = masked
};

__host__ __device__ inline size_t portable_smem_bytes(int D, int Dv) {
  const size_t ldk = D + 8;
  const size_t sp = max_sz(kRows * kLdp, kRows * size_t(Dv)) * 4;
  return kRows * ldk * 2 + kChunk * ldk * 2 + sp + 2 * kChunk * 8 + 64;
}

struct Prefetch {
  uint4 v[kLoadsPerThread];
};

// 16-byte loads of one chunk whose cache rows are in krow (shared memory); masked keys read 0.
__device__ inline void load_chunk(const DecodeParams& P, const int64_t* krow, Prefetch& pf) {
  const int per_key = P.D / 8;
  const uint4* kv = reinterpret_cast<const uint4*>(P.kv);
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    const int idx = threadIdx.x + i * kBlock, j = idx / per_key, c = idx % per_key;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (j < kChunk && krow[j] >= 0) val = kv[krow[j] * per_key + c];
    pf.v[i] = val;
  }
}

__device__ inline void store_chunk(const DecodeParams& P, const Prefetch& pf, Smem& s) {
  const int per_key = P.D / 8;
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    const int idx = threadIdx.x + i * kBlock, j = idx / per_key, c = idx % per_key;
    if (j < kChunk) reinterpret_cast<uint4*>(s.ks + j * s.ldk)[c] = pf.v[i];
  }
}

// e4m3fn bits to bf16 bits, exactly (subnormals m * 2^-9 normalised; 0x7f / 0xff = NaN).
__device__ inline uint16_t e4m3fn_to_bf16(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 8, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return static_cast<uint16_t>(sign | 0x7fc0u);
  if (e != 0u) return static_cast<uint16_t>(sign | ((e + 120u) << 7) | (m << 4));
  if (m == 0u) return static_cast<uint16_t>(sign);
  const uint32_t lead = m >= 4u ? 2u : m >= 2u ? 1u : 0u;  // bit of the leading 1
  return static_cast<uint16_t>(sign | ((118u + lead) << 7) | ((m << (7u - lead)) & 0x7fu));
}

// fp8 KV: the chunk's rows (cache rows in s.krow) widened to bf16 into s.ks; masked keys 0.
__device__ inline void load_chunk_fp8(const DecodeParams& P, Smem& s) {
  const int runs = P.D / 16;
  for (int idx = threadIdx.x; idx < kChunk * runs; idx += kBlock) {
    const int j = idx / runs, c = idx % runs;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (s.krow[j] >= 0) v = reinterpret_cast<const uint4*>(P.kv8 + s.krow[j] * P.D)[c];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint16_t* dst = s.ks + j * s.ldk + c * 16;
    for (int e = 0; e < 16; ++e) dst[e] = e4m3fn_to_bf16((w[e / 4] >> (8 * (e % 4))) & 0xffu);
  }
}

__device__ void run_group_portable(const DecodeParams& P, Smem& s, const GroupTask& t) {
  const int H = P.H, D = P.D, Dv = P.Dv;
  const int64_t first = group_first_row(P, t), token = first / H;
  if (P.q_fp8) {  // fp8 q: widened exactly to bf16 (every e4m3fn value is a bf16 value)
    for (int idx = threadIdx.x; idx < kRows * D / 16; idx += kBlock) {
      const int r = idx / (D / 16), c = idx % (D / 16);
      const uint4 v = reinterpret_cast<const uint4*>(P.q8 + (first + r) * D)[c];
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
      uint16_t* dst = s.qs + r * s.ldk + c * 16;
      for (int e = 0; e < 16; ++e) dst[e] = e4m3fn_to_bf16((w[e / 4] >> (8 * (e % 4))) & 0xffu);
    }
  } else {
    for (int idx = threadIdx.x; idx < kRows * D / 8; idx += kBlock) {
      const int r = idx / (D / 8), c = idx % (D / 8);
      reinterpret_cast<uint4*>(s.qs + r * s.ldk)[c] =
          reinterpret_cast<const uint4*>(P.q + (first + r) * D)[c];
    }
  }
  log_rows(P.log, 0, token, token + 1, threadIdx.x == 0);
  if (t.p1 <= t.p0 && P.variant != static_cast<int>(ZeroKvVariant::kAsm)) {
    __syncthreads();
    return;  // hk: read q, write nothing
  }
  const int64_t limit = causal_limit(P, t, token);
  const int row = threadIdx.x / kLanesPerRow, sub = threadIdx.x % kLanesPerRow;
  float m = -INFINITY, l = 0;
  float acc[kAccPerThread];
#pragma unroll
  for (int i = 0; i < kAccPerThread; ++i) acc[i] = 0;
  const int n_acc = Dv / kLanesPerRow;
  const int64_t n = t.p1 - t.p0;
  Prefetch pf;
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    if (threadIdx.x < kChunk) s.krow[threadIdx.x] = key_row(P, t.p0 + c0 + threadIdx.x, t.p1);
    __syncthreads();
    if (P.kv_fp8) {
      load_chunk_fp8(P, s);
    } else {
      load_chunk(P, s.krow, pf);
      store_chunk(P, pf, s);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kRows * kChunk; e += kBlock) {
      const int r = e / kChunk, j = e % kChunk;
      float x = 0;
      for (int d = 0; d < D; ++d) x += bf2f(s.qs[r * s.ldk + d]) * bf2f(s.ks[j * s.ldk + d]);
      x *= P.logit_scale;
      if (s.krow[j] < 0 || c0 + j >= limit) x = -INFINITY;
      s.sp[r * kLdp + j] = x;
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int k = 0; k < kKeysPerLane; ++k)
      mx = fmaxf(mx, s.sp[row * kLdp + sub + kLanesPerRow * k]);
    for (int off = kLanesPerRow / 2; off > 0; off >>= 1) mx = fmaxf(mx, compat_shfl_xor(mx, off));
    const float m_new = fmaxf(m, mx);
    float psum = 0;
    float pj[kKeysPerLane];
    for (int k = 0; k < kKeysPerLane; ++k) {
      pj[k] = m_new == -INFINITY ? 0.f : __expf(s.sp[row * kLdp + sub + kLanesPerRow * k] - m_new);
      psum += pj[k];
    }
    for (int off = kLanesPerRow / 2; off > 0; off >>= 1) psum += compat_shfl_xor(psum, off);
    const float alpha = m_new == -INFINITY ? 1.f : __expf(m - m_new);
    l = l * alpha + psum;
    m = m_new;
    __syncthreads();
    for (int k = 0; k < kKeysPerLane; ++k)
      s.sp[row * kLdp + sub + kLanesPerRow * k] = bf2f(f2bf(pj[k]));
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      if (i >= n_acc) break;
      const int d = sub + kLanesPerRow * i;
      float o = 0;
      for (int j = 0; j < kChunk; ++j) o += s.sp[row * kLdp + j] * bf2f(s.ks[j * s.ldk + d]);
      acc[i] = acc[i] * alpha + o;
    }
    __syncthreads();
  }
  const bool empty = m == -INFINITY || l == 0;
  const float inv = empty ? 0.f : 1.f / l;
  const float lse_row = empty ? -INFINITY : m + logf(l);
  const int32_t loc = t.w[1];
  if (loc < 0) {
    uint16_t* o = P.o + (first + row) * Dv + sub;
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i)
      if (i < n_acc) o[i * kLanesPerRow] = f2bf(acc[i] * inv * P.v_scale);
    if (sub == 0) P.lse[first + row] = lse_row;
    log_rows(P.log, 2, token, token + 1, threadIdx.x == 0);
  } else {
    const int64_t q0 = t.w[2];
    const int64_t pfirst = (int64_t{loc} + (token - q0)) * H + (first - token * H);
    float* po = P.part_o + (pfirst + row) * Dv + sub;
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i)
      if (i < n_acc) po[i * kLanesPerRow] = acc[i] * inv * P.v_scale;
    if (sub == 0) P.part_lse[pfirst + row] = lse_row;
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kBlock, 1) mla_decode_portable_kernel(DecodeParams P) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem s;
  s.ldk = P.D + 8;
  unsigned char* ptr = smem_raw;
  s.krow = reinterpret_cast<int64_t*>(ptr);
  ptr += 2 * kChunk * 8;
  s.qs = reinterpret_cast<uint16_t*>(ptr);
  ptr += size_t{kRows} * s.ldk * 2;
  s.ks = reinterpret_cast<uint16_t*>(ptr);
  ptr += size_t{kChunk} * s.ldk * 2;
  s.sp = reinterpret_cast<float*>(ptr);
  for_each_group(P, [&](const GroupTask& t) { run_group_portable(P, s, t); });
}
}  // namespace mlasim::gpu::decode::portable
