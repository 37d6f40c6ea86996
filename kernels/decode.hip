// decode.hip - persistent MLA decode (one workgroup per cluster walks its work items, aiter's
// §11 contract) and the split-KV reduce (§12), with sentinel tails, poisoned outputs and an
// access log, for the GPU runner. HIP names only; nvcc builds it through hip_compat.h.
//
// Per work item and per 16-row group of its q tile (rows = tokens x heads): the q rows go to
// shared memory, the KV range is walked in chunks of kChunk (64) keys, S = Q K^T and O += P V run
// on tensor cores (nvcc: wmma bf16, fp32 accumulate) or as plain loops (AMD build), with an online
// softmax in fp32; P is rounded to bf16 before P V, the row sum uses the unrounded weights.
// Pipeline per chunk: the cache rows of chunk n+1 are already in shared memory (their index
// loads were issued a chunk earlier, so no load waits on an index load), the 16-byte KV loads of
// chunk n+1 are in flight in registers while chunk n's math runs. Each lane keeps the O
// accumulator of one q row (16 lanes per row, columns sub + 16 k), so the softmax rescale factor
// stays in a register and no per-element division is needed.
#include "kernels/hip_compat.h"
#include "kernels/gpu_api.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <mma.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

namespace mlasim::gpu {
namespace {

constexpr int kBlock = 256;
constexpr int kChunk = 64;           // keys per chunk
constexpr int kRows = 16;            // q rows (token x head) per group
constexpr int kMaxD = 576;
constexpr int kMaxDv = 512;
constexpr int kLanesPerRow = kBlock / kRows;             // 16
constexpr int kAccPerThread = kMaxDv / kLanesPerRow;     // 32 columns of one row
constexpr int kKeysPerLane = kChunk / kLanesPerRow;      // 4
constexpr int kLoadsPerThread = kChunk * kMaxD / 8 / kBlock;  // 18 x 16 bytes
constexpr int kLds = kChunk + 16;    // floats per row of a score part (rows 16 banks apart)
constexpr int kLdp = kChunk + 8;     // bf16 per row of ps
static_assert(kChunk * kMaxD / 8 % kBlock == 0, "loads per thread");
static_assert(kKeysPerLane * kLanesPerRow == kChunk, "softmax lanes");

struct DecodeParams {
  const uint16_t* q;           // bf16 [q rows, H, D]
  const uint16_t* kv;          // bf16 [cache rows, D]
  const int32_t* kv_indices;
  const int32_t* kv_indptr;
  const int32_t* lpl;
  const int32_t* qo_indptr;
  const int32_t* topk;         // sparse: [q rows, topk]
  const int32_t* work_indptr;
  const int32_t* work_info;
  uint16_t* o;                 // bf16 [rows, H, Dv]
  float* lse;                  // [rows, H]
  float* part_o;               // [partial rows, H, Dv]
  float* part_lse;             // [partial rows, H]
  unsigned long long* log;     // [q min, q max + 1, o min, o max + 1]
  int32_t H, D, Dv, page, sparse, causal, batch, variant;
  int64_t cache_rows;
  float logit_scale, v_scale;
};

struct Smem {
  int ldk;  // bf16 elements per row of Qs / Ks
  uint16_t* qs;   // [kRows][ldk]
  uint16_t* ks;   // [kChunk][ldk]
  float* sp;      // [4][kRows][kLds] score parts; aliased by oc [kRows][Dv + 16]
  uint16_t* ps;   // [kRows][kLdp]
  int64_t* krow;  // [2][kChunk] cache row of each key of the current / next chunk, -1 = masked
};

__host__ __device__ inline size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

__host__ __device__ inline size_t smem_bytes(int D, int Dv) {
  const size_t ldk = D + 8;
  const size_t sp = max_sz(4 * kRows * kLds, kRows * (size_t)(Dv + 16)) * 4;
  return kRows * ldk * 2 + kChunk * ldk * 2 + sp + kRows * kLdp * 2 + 2 * kChunk * 8 + 64;
}

#if !defined(__CUDACC__)
__device__ inline float bf2f(uint16_t x) { return __uint_as_float(static_cast<uint32_t>(x) << 16); }
#endif
__device__ inline uint16_t f2bf(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// KV-cache row of position pos in [p0, p1) of a work item; -1 = masked (never read).
__device__ inline int64_t key_row(const DecodeParams& P, int64_t pos, int64_t p1) {
  if (pos >= p1) return -1;
  if (P.sparse) {
    const int64_t r = P.topk[pos];
    return (r < 0 || r >= P.cache_rows) ? -1 : r;
  }
  // 32-bit index math (positions stay below 2^30, ValidatePlanRequest): 64-bit division is slow.
  const int32_t p32 = static_cast<int32_t>(pos);
  const int64_t r = P.page == 1 ? int64_t{P.kv_indices[p32]}
                                : int64_t{P.kv_indices[p32 / P.page]} * P.page + p32 % P.page;
  return (r < 0 || r >= P.cache_rows) ? -1 : r;
}

// Which key (j) and 16-byte column (c) of the chunk each of a thread's loads covers: flat index
// threadIdx.x + i * kBlock over [kChunk][D / 8], walked without divisions.
struct LoadMap {
  int j0, c0, dj, dc, per_key;
};

__device__ inline LoadMap make_load_map(int D) {
  LoadMap m;
  m.per_key = D / 8;
  m.j0 = threadIdx.x / m.per_key;
  m.c0 = threadIdx.x % m.per_key;
  m.dj = kBlock / m.per_key;
  m.dc = kBlock % m.per_key;
  return m;
}

struct Prefetch {
  uint4 v[kLoadsPerThread];
};

// 16-byte loads of one chunk whose cache rows are in krow (shared memory); masked keys read 0.
__device__ inline void load_chunk(const DecodeParams& P, const int64_t* krow, const LoadMap& m, Prefetch& pf) {
  int j = m.j0, c = m.c0;
  const uint4* kv = reinterpret_cast<const uint4*>(P.kv);
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    uint4 val = make_uint4(0, 0, 0, 0);
    if (j < kChunk) {
      const int64_t row = krow[j];
      if (row >= 0) val = kv[row * m.per_key + c];
    }
    pf.v[i] = val;
    j += m.dj;
    c += m.dc;
    if (c >= m.per_key) {
      c -= m.per_key;
      ++j;
    }
  }
}

__device__ inline void store_chunk(const LoadMap& m, const Prefetch& pf, Smem& s) {
  int j = m.j0, c = m.c0;
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    if (j < kChunk) reinterpret_cast<uint4*>(s.ks + j * s.ldk)[c] = pf.v[i];
    j += m.dj;
    c += m.dc;
    if (c >= m.per_key) {
      c -= m.per_key;
      ++j;
    }
  }
}

// sp[part][r][j] = sum over the part's k slices of qs[r] . ks[j]
__device__ inline void scores(const DecodeParams& P, Smem& s) {
#if defined(__CUDACC__)
  using namespace nvcuda;
  // 16 (key tile, k part) combinations over 8 warps: two independent accumulators per warp.
  const int warp = threadIdx.x / 32, nt = warp & 3, part0 = warp >> 2, part1 = part0 + 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc0, acc1;
  wmma::fill_fragment(acc0, 0.0f);
  wmma::fill_fragment(acc1, 0.0f);
  const __nv_bfloat16* qs = reinterpret_cast<const __nv_bfloat16*>(s.qs);
  const __nv_bfloat16* ks = reinterpret_cast<const __nv_bfloat16*>(s.ks) + nt * 16 * s.ldk;
  for (int k0 = 0; k0 < P.D; k0 += 64) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a0, a1;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b0, b1;
    const int ka = k0 + part0 * 16, kb = k0 + part1 * 16;
    if (ka < P.D) {
      wmma::load_matrix_sync(a0, qs + ka, s.ldk);
      wmma::load_matrix_sync(b0, ks + ka, s.ldk);
      wmma::mma_sync(acc0, a0, b0, acc0);
    }
    if (kb < P.D) {
      wmma::load_matrix_sync(a1, qs + kb, s.ldk);
      wmma::load_matrix_sync(b1, ks + kb, s.ldk);
      wmma::mma_sync(acc1, a1, b1, acc1);
    }
  }
  wmma::store_matrix_sync(s.sp + part0 * kRows * kLds + nt * 16, acc0, kLds, wmma::mem_row_major);
  wmma::store_matrix_sync(s.sp + part1 * kRows * kLds + nt * 16, acc1, kLds, wmma::mem_row_major);
#else
  for (int e = threadIdx.x; e < kRows * kChunk; e += kBlock) {
    const int r = e / kChunk, j = e % kChunk;
    float acc = 0;
    for (int d = 0; d < P.D; ++d) acc += bf2f(s.qs[r * s.ldk + d]) * bf2f(s.ks[j * s.ldk + d]);
    s.sp[r * kLds + j] = acc;
    for (int part = 1; part < 4; ++part) s.sp[part * kRows * kLds + r * kLds + j] = 0;
  }
#endif
}

// oc[r][d] = sum_j ps[r][j] * ks[j][d] for d < Dv (oc aliases sp)
__device__ inline void pv(const DecodeParams& P, Smem& s) {
  const int ldo = P.Dv + 16;  // rows 16 banks apart
#if defined(__CUDACC__)
  using namespace nvcuda;
  const int warp = threadIdx.x / 32;
  const __nv_bfloat16* ps = reinterpret_cast<const __nv_bfloat16*>(s.ps);
  const __nv_bfloat16* ks = reinterpret_cast<const __nv_bfloat16*>(s.ks);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[kChunk / 16];
#pragma unroll
  for (int t = 0; t < kChunk / 16; ++t) wmma::load_matrix_sync(a[t], ps + t * 16, kLdp);
  for (int nt = warp; nt < P.Dv / 16; nt += kBlock / 32) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int t = 0; t < kChunk / 16; ++t) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
      wmma::load_matrix_sync(b, ks + t * 16 * s.ldk + nt * 16, s.ldk);
      wmma::mma_sync(acc, a[t], b, acc);
    }
    wmma::store_matrix_sync(s.sp + nt * 16, acc, ldo, wmma::mem_row_major);
  }
#else
  for (int e = threadIdx.x; e < kRows * P.Dv; e += kBlock) {
    const int r = e / P.Dv, d = e % P.Dv;
    float acc = 0;
    for (int j = 0; j < kChunk; ++j) acc += bf2f(s.ps[r * kLdp + j]) * bf2f(s.ks[j * s.ldk + d]);
    s.sp[r * ldo + d] = acc;
  }
#endif
}

__device__ inline void log_rows(unsigned long long* log, int slot, int64_t r0, int64_t r1) {
  if (log == nullptr || threadIdx.x != 0 || r1 <= r0) return;
  atomicMin(&log[slot], static_cast<unsigned long long>(r0));
  atomicMax(&log[slot + 1], static_cast<unsigned long long>(r1));
}

// One 16-row group of a work item over keys [p0, p1) (positions). Writes final or partial rows.
__device__ void run_group(const DecodeParams& P, Smem& s, const LoadMap& lm, const int32_t* w, int64_t p0,
                          int64_t p1, int g, int64_t key_first, int64_t lk, int64_t lq, int64_t req_q0) {
  const int H = P.H, D = P.D, Dv = P.Dv;
  const int64_t q0 = w[2];
  const int64_t first = int64_t{q0} * H + int64_t{g} * kRows;  // flat (row, head) index
  const int64_t token = first / H;
  // q rows to shared memory
  for (int idx = threadIdx.x; idx < kRows * D / 8; idx += kBlock) {
    const int r = idx / (D / 8), c = idx % (D / 8);
    reinterpret_cast<uint4*>(s.qs + r * s.ldk)[c] = reinterpret_cast<const uint4*>(P.q + (first + r) * D)[c];
  }
  log_rows(P.log, 0, token, token + 1);
  const bool empty_item = p1 <= p0;
  if (empty_item && P.variant != static_cast<int>(ZeroKvVariant::kAsm)) {
    __syncthreads();
    return;  // hk: read q, write nothing
  }
  int64_t limit = INT64_MAX;
  if (P.causal) limit = (token - req_q0) + lk - lq + 1 - key_first;

  const int row = threadIdx.x / kLanesPerRow, sub = threadIdx.x % kLanesPerRow;  // 16 lanes per row
  float m = -INFINITY, l = 0;
  float acc[kAccPerThread];
#pragma unroll
  for (int i = 0; i < kAccPerThread; ++i) acc[i] = 0;
  const int n_acc = Dv / kLanesPerRow;
  const int ldo = Dv + 16;

  Prefetch pf;
  const int64_t n = p1 - p0;
  // cache rows of chunk 0 to krow[0]; chunk 1's index load in flight in `next_row`
  int64_t next_row = -1;
  if (threadIdx.x < kChunk) {
    s.krow[threadIdx.x] = key_row(P, p0 + threadIdx.x, p1);
    next_row = key_row(P, p0 + kChunk + threadIdx.x, p1);
  }
  __syncthreads();
  if (n > 0) load_chunk(P, s.krow, lm, pf);
  int buf = 0;
  for (int64_t c0 = 0; c0 < n; c0 += kChunk, buf ^= 1) {
    __syncthreads();  // previous chunk's P V done reading ks / oc
    store_chunk(lm, pf, s);
    if (threadIdx.x < kChunk) s.krow[(buf ^ 1) * kChunk + threadIdx.x] = next_row;  // chunk c0 + kChunk
    __syncthreads();
    if (c0 + kChunk < n) load_chunk(P, s.krow + (buf ^ 1) * kChunk, lm, pf);  // in flight during the math
    if (threadIdx.x < kChunk) next_row = key_row(P, p0 + c0 + 2 * kChunk + threadIdx.x, p1);
    scores(P, s);
    __syncthreads();
    // online softmax, 16 lanes per row, keys sub + 16 t
    const int64_t* krow = s.krow + buf * kChunk;
    float sv[kKeysPerLane];
    float mx = -INFINITY;
#pragma unroll
    for (int t = 0; t < kKeysPerLane; ++t) {
      const int j = sub + kLanesPerRow * t;
      float x = 0;
#pragma unroll
      for (int part = 0; part < 4; ++part) x += s.sp[part * kRows * kLds + row * kLds + j];
      x *= P.logit_scale;
      const int64_t kj = c0 + j;
      if (krow[j] < 0 || kj >= limit || kj >= n) x = -INFINITY;
      sv[t] = x;
      mx = fmaxf(mx, x);
    }
    for (int off = kLanesPerRow / 2; off > 0; off >>= 1) mx = fmaxf(mx, compat_shfl_xor(mx, off));
    const float m_new = fmaxf(m, mx);
    float psum = 0;
#pragma unroll
    for (int t = 0; t < kKeysPerLane; ++t) {
      const float pj = m_new == -INFINITY ? 0.f : __expf(sv[t] - m_new);
      psum += pj;
      s.ps[row * kLdp + sub + kLanesPerRow * t] = f2bf(pj);
    }
    for (int off = kLanesPerRow / 2; off > 0; off >>= 1) psum += compat_shfl_xor(psum, off);
    const float alpha = m_new == -INFINITY ? 1.f : __expf(m - m_new);
    l = l * alpha + psum;
    m = m_new;
    __syncthreads();  // ps ready; sp free (oc aliases it)
    pv(P, s);
    __syncthreads();
    const float* oc = s.sp + row * ldo + sub;
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      if (i < n_acc) acc[i] = acc[i] * alpha + oc[i * kLanesPerRow];
    }
  }
  // final row statistics (identical on the 16 lanes of a row)
  const bool empty = m == -INFINITY || l == 0;
  const float inv = empty ? 0.f : 1.f / l;
  const float lse_row = empty ? -INFINITY : m + logf(l);
  const int32_t loc = w[1];
  if (loc < 0) {
    uint16_t* o = P.o + (first + row) * Dv + sub;
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i)
      if (i < n_acc) o[i * kLanesPerRow] = f2bf(acc[i] * inv * P.v_scale);
    if (sub == 0) P.lse[first + row] = lse_row;
    log_rows(P.log, 2, token, token + 1);
  } else {
    const int64_t pfirst = (int64_t{loc} + (token - q0)) * H + (first - token * H);
    float* po = P.part_o + (pfirst + row) * Dv + sub;
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i)
      if (i < n_acc) po[i * kLanesPerRow] = acc[i] * inv * P.v_scale;
    if (sub == 0) P.part_lse[pfirst + row] = lse_row;
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kBlock, 1) mla_decode_kernel(DecodeParams P) {
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
  ptr += max_sz(4 * kRows * kLds, kRows * size_t(P.Dv + 16)) * 4;
  s.ps = reinterpret_cast<uint16_t*>(ptr);
  const LoadMap lm = make_load_map(P.D);

  const int c = blockIdx.x;
  const int32_t w0 = P.work_indptr[c], w1 = P.work_indptr[c + 1];
  for (int32_t wi = w0; wi < w1; ++wi) {
    int32_t w[8];
    for (int f = 0; f < 8; ++f) w[f] = P.work_info[int64_t{wi} * 8 + f];
    const int32_t batch = w[0];
    if (P.variant == static_cast<int>(ZeroKvVariant::kOpus) && w[5] <= w[4]) continue;  // returns first
    int64_t p0, p1, key_first = 0, lk = 0, lq = 0, req_q0 = 0;
    if (P.sparse) {
      p0 = w[4];
      p1 = w[5];
    } else {
      const int64_t page = P.page;
      const int32_t b = batch;
      p0 = int64_t{w[4]} * page;
      p1 = (w[6] != 0 || page == 1) ? int64_t{w[5]} * page : int64_t{w[5] - 1} * page + P.lpl[b];
      if (P.causal) {
        const int64_t pages = P.kv_indptr[b + 1] - P.kv_indptr[b];
        lk = pages == 0 ? 0 : (pages - 1) * page + P.lpl[b];
        lq = P.qo_indptr[b + 1] - P.qo_indptr[b];
        req_q0 = P.qo_indptr[b];
        key_first = p0 - int64_t{P.kv_indptr[b]} * page;
      }
    }
    if (p1 < p0) p1 = p0;
    const int groups = (w[3] - w[2]) * P.H / kRows;
    for (int g = 0; g < groups; ++g) run_group(P, s, lm, w, p0, p1, g, key_first, lk, lq, req_q0);
  }
}

// mla_reduce_v1: one workgroup per tile with >= 2 pieces.
__global__ void __launch_bounds__(kBlock)
    mla_reduce_kernel(const int32_t* reduce_indptr, const int32_t* final_map, const int32_t* partial_map,
                      const float* part_o, const float* part_lse, uint16_t* o, float* lse, int H, int Dv,
                      unsigned long long* log) {
  const int t = blockIdx.x;
  const int32_t g0 = reduce_indptr[t], g1 = reduce_indptr[t + 1];
  if (g1 - g0 <= 1) return;
  const int32_t q0 = final_map[2 * t], q1 = final_map[2 * t + 1];
  log_rows(log, 2, q0, q1);
  for (int64_t pair = 0; pair < int64_t{q1 - q0} * H; ++pair) {
    const int64_t srow = pair / H, h = pair % H;
    float M = -INFINITY;
    for (int32_t i = g0; i < g1; ++i) M = fmaxf(M, part_lse[(int64_t{partial_map[i]} + srow) * H + h]);
    float S = 0;
    for (int32_t i = g0; i < g1; ++i) S += expf(part_lse[(int64_t{partial_map[i]} + srow) * H + h] - M);
    const float L = (S == 0.f || S != S) ? INFINITY : M + logf(S);
    for (int d = threadIdx.x; d < Dv; d += kBlock) {
      float acc = 0;
      for (int32_t i = g0; i < g1; ++i) {
        const int64_t prow = (int64_t{partial_map[i]} + srow) * H + h;
        acc += expf(part_lse[prow] - L) * part_o[prow * Dv + d];
      }
      o[((int64_t{q0} + srow) * H + h) * Dv + d] = f2bf(acc);
    }
    if (threadIdx.x == 0) lse[(int64_t{q0} + srow) * H + h] = L;
  }
}

__global__ void fill_u8_kernel(unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) p[i] = v;
}

// A device buffer of `rows` rows of `row_bytes` plus `tail_rows` sentinel rows.
struct TailedBuffer {
  std::string name;
  unsigned char* p = nullptr;
  int64_t rows = 0, row_bytes = 0, tail_rows = 0;
  bool guarded = false;  // placed by device_alloc_guarded: no tail, the next byte is unmapped
  GuardedAllocation guard;
  TailedBuffer(std::string n, int64_t r, int64_t rb, int64_t tail, bool guard_pages = false)
      : name(std::move(n)), rows(r), row_bytes(rb), tail_rows(guard_pages && r > 0 ? 0 : tail),
        guarded(guard_pages && r > 0) {
    if (guarded) {
      guard = device_alloc_guarded(static_cast<std::size_t>(bytes()));
      p = static_cast<unsigned char*>(guard.ptr);
      return;
    }
    HIP_CHECK(hipMalloc(reinterpret_cast<void**>(&p), std::max<int64_t>(bytes() + tail_bytes(), 16)));
    fill_sentinel(p + bytes(), tail_bytes());
  }
  ~TailedBuffer() {
    if (guarded) {
      try {
        device_free_guarded(p);
      } catch (...) {  // a destructor must not throw; the process is ending after a fault anyway
      }
    } else {
      (void)hipFree(p);
    }
  }
  TailedBuffer(const TailedBuffer&) = delete;
  TailedBuffer& operator=(const TailedBuffer&) = delete;
  int64_t bytes() const { return rows * row_bytes; }
  int64_t tail_bytes() const { return tail_rows * row_bytes; }
  void poison(unsigned char v) {
    if (bytes() == 0) return;
    hipLaunchKernelGGL(fill_u8_kernel, dim3(1024), dim3(256), 0, 0, p, static_cast<size_t>(bytes()), v);
    HIP_CHECK(hipGetLastError());
  }
  void scan(std::vector<TailDamage>& out) const {
    const SentinelScan sc = scan_sentinel(p + bytes(), tail_bytes());
    if (sc.bad_bytes == 0) return;
    out.push_back(TailDamage{name, rows, rows + sc.first_bad_byte / row_bytes, rows + sc.last_bad_byte / row_bytes,
                             sc.bad_bytes});
  }
};

uint16_t host_f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
double host_bf2d(uint16_t x) {
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class T>
T* upload(const std::vector<T>& v, std::vector<void*>& owned) {
  T* p = static_cast<T*>(device_alloc(std::max<size_t>(v.size(), 1) * sizeof(T)));
  owned.push_back(p);
  copy_to_device(p, v.data(), v.size() * sizeof(T));
  return p;
}

float time_launches(int iterations, const std::function<void()>& f) {
  hipEvent_t e0, e1;
  HIP_CHECK(hipEventCreate(&e0));
  HIP_CHECK(hipEventCreate(&e1));
  f();  // warm-up
  HIP_CHECK(hipEventRecord(e0, 0));
  for (int i = 0; i < iterations; ++i) f();
  HIP_CHECK(hipEventRecord(e1, 0));
  HIP_CHECK(hipEventSynchronize(e1));
  float ms = 0;
  HIP_CHECK(hipEventElapsedTime(&ms, e0, e1));
  (void)hipEventDestroy(e0);
  (void)hipEventDestroy(e1);
  return 1000.f * ms / iterations;
}

}  // namespace

DecodeResult run_mla_decode(const ref::MlaInputs& in, const ref::Plan& plan, const DecodeOptions& opt) {
  const int H = in.num_heads, D = in.head_dim_qk, Dv = in.head_dim_v;
  if (H % kRows != 0 || D % 16 != 0 || D > kMaxD || Dv % 16 != 0 || Dv > kMaxDv || Dv > D || Dv * kRows % kBlock != 0)
    throw std::invalid_argument("run_mla_decode: needs heads % 16 == 0, head dims multiples of 16, D <= 576, Dv <= 512");
  if (plan.derived.fold_ratio != 1) throw std::invalid_argument("run_mla_decode: head-folded plans are not run");
  const bool sparse = in.topk >= 0;
  const int64_t q_rows = in.q_rows();
  const int64_t q_alloc = opt.q_alloc_rows >= 0 ? opt.q_alloc_rows : q_rows;
  const int64_t o_alloc = opt.o_alloc_rows >= 0 ? opt.o_alloc_rows : q_rows;
  int32_t max_q = 1;
  for (size_t b = 0; b + 1 < in.qo_indptr.size(); ++b) max_q = std::max(max_q, in.qo_indptr[b + 1] - in.qo_indptr[b]);
  const int64_t partial_rows = std::max<int64_t>(plan.reduce_partial_map.size(), 1) * max_q;

  std::vector<void*> owned;
  struct Free {
    std::vector<void*>& v;
    ~Free() {
      for (void* p : v) (void)hipFree(p);
    }
  } free_all{owned};

  if (!opt.guard_buffer.empty() && opt.guard_buffer != "q" && opt.guard_buffer != "o")
    throw std::invalid_argument("run_mla_decode: guard_buffer must be \"q\", \"o\" or empty");
  TailedBuffer q("q", q_alloc, int64_t{H} * D * 2, opt.tail_rows, opt.guard_buffer == "q");
  TailedBuffer o("o", o_alloc, int64_t{H} * Dv * 2, opt.tail_rows, opt.guard_buffer == "o");
  TailedBuffer lse("lse", o_alloc, int64_t{H} * 4, opt.tail_rows);
  TailedBuffer po("partial_o", partial_rows, int64_t{H} * Dv * 4, opt.tail_rows);
  TailedBuffer pl("partial_lse", partial_rows, int64_t{H} * 4, opt.tail_rows);
  {
    std::vector<uint16_t> qh(static_cast<size_t>(q_alloc) * H * D, 0);
    for (size_t i = 0; i < in.q.size() && i < qh.size(); ++i) qh[i] = host_f2bf(in.q[i]);
    copy_to_device(q.p, qh.data(), qh.size() * 2);
  }
  std::vector<uint16_t> kvh(in.kv_cache.size());
  for (size_t i = 0; i < kvh.size(); ++i) kvh[i] = host_f2bf(in.kv_cache[i]);

  DecodeParams P{};
  P.q = reinterpret_cast<const uint16_t*>(q.p);
  P.kv = upload(kvh, owned);
  P.kv_indices = upload(in.kv_indices, owned);
  P.kv_indptr = upload(in.kv_indptr, owned);
  P.lpl = upload(in.kv_last_page_lens, owned);
  P.qo_indptr = upload(in.qo_indptr, owned);
  P.topk = upload(in.topk_indices, owned);
  P.work_indptr = upload(plan.work_indptr.data, owned);
  P.work_info = upload(plan.work_info.data, owned);
  const int32_t* ri = upload(plan.reduce_indptr.data, owned);
  const int32_t* fm = upload(plan.reduce_final_map.data, owned);
  const int32_t* pm = upload(plan.reduce_partial_map.data, owned);
  P.o = reinterpret_cast<uint16_t*>(o.p);
  P.lse = reinterpret_cast<float*>(lse.p);
  P.part_o = reinterpret_cast<float*>(po.p);
  P.part_lse = reinterpret_cast<float*>(pl.p);
  std::vector<unsigned long long> log_init = {~0ull, 0, ~0ull, 0};
  unsigned long long* log = upload(log_init, owned);
  P.log = log;
  P.H = H, P.D = D, P.Dv = Dv, P.page = in.page_size, P.sparse = sparse, P.causal = in.is_causal && !sparse;
  P.batch = in.num_requests();
  P.variant = static_cast<int>(opt.variant);
  P.cache_rows = int64_t{in.num_pages} * in.page_size;
  P.logit_scale = static_cast<float>(in.effective_sm_scale() * in.q_scale * in.kv_scale);
  P.v_scale = static_cast<float>(in.kv_scale);

  const size_t smem = smem_bytes(D, Dv);
  HIP_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(&mla_decode_kernel),
                                hipFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int clusters = static_cast<int>(plan.work_indptr.data.size()) - 1;
  const int tiles = static_cast<int>(plan.reduce_indptr.data.size()) - 1;
  auto decode = [&] {
    if (clusters > 0) hipLaunchKernelGGL(mla_decode_kernel, dim3(clusters), dim3(kBlock), smem, 0, P);
    HIP_CHECK(hipGetLastError());
  };
  auto reduce = [&] {
    if (opt.run_reduce && tiles > 0)
      hipLaunchKernelGGL(mla_reduce_kernel, dim3(tiles), dim3(kBlock), 0, 0, ri, fm, pm, P.part_o, P.part_lse, P.o,
                         P.lse, H, Dv, log);
    HIP_CHECK(hipGetLastError());
  };
  o.poison(0xFF);  // bf16 / fp32 NaN
  lse.poison(0xFF);
  po.poison(0xFF);
  pl.poison(0xFF);
  decode();
  reduce();
  HIP_CHECK(hipDeviceSynchronize());

  DecodeResult res;
  if (q.guarded) res.guard = q.guard;
  if (o.guarded) res.guard = o.guard;
  for (const TailedBuffer* b : {&q, &o, &lse, &po, &pl}) b->scan(res.tails);
  unsigned long long lg[4];
  copy_to_host(lg, log, sizeof lg);
  if (lg[1] != 0) res.q_rows_read_min = static_cast<int64_t>(lg[0]), res.q_rows_read_max = static_cast<int64_t>(lg[1]) - 1;
  if (lg[3] != 0) res.o_rows_written_min = static_cast<int64_t>(lg[2]), res.o_rows_written_max = static_cast<int64_t>(lg[3]) - 1;
  const int64_t out_rows = std::min(q_rows, o_alloc);
  std::vector<uint16_t> oh(static_cast<size_t>(out_rows) * H * Dv);
  std::vector<float> lh(static_cast<size_t>(out_rows) * H);
  copy_to_host(oh.data(), o.p, oh.size() * 2);
  copy_to_host(lh.data(), lse.p, lh.size() * 4);
  res.o.resize(oh.size());
  res.lse.resize(lh.size());
  for (size_t i = 0; i < oh.size(); ++i) res.o[i] = host_bf2d(oh[i]);
  for (size_t i = 0; i < lh.size(); ++i) res.lse[i] = lh[i];

  if (opt.timing_iterations > 0) {
    P.log = nullptr;
    res.decode_us = time_launches(opt.timing_iterations, decode);
    res.reduce_us = time_launches(opt.timing_iterations, reduce);
  }
  return res;
}

double measure_copy_bandwidth(std::size_t bytes, int iterations) {
  void* a = device_alloc(bytes);
  void* b = device_alloc(bytes);
  HIP_CHECK(hipMemset(a, 1, bytes));
  const float us = time_launches(iterations, [&] { HIP_CHECK(hipMemcpy(b, a, bytes, hipMemcpyDeviceToDevice)); });
  device_free(a);
  device_free(b);
  return 2.0 * bytes / (us * 1e-6) / 1e9;
}

}  // namespace mlasim::gpu
