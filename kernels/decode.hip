// decode.hip - persistent MLA decode (one workgroup per cluster walks its work items, aiter's
// §11 contract) and the split-KV reduce (§12), with sentinel tails, poisoned outputs and an
// access log, for the GPU runner. HIP names only; nvcc builds it through hip_compat.h.
//
// Work is done per work item and per 16-row group of its q tile (rows = tokens x heads; with
// heads % 16 == 0 a group is the 16 heads of one token). The group's KV range is walked in chunks
// of keys; an online softmax in fp32 keeps the running max m and sum l per row; P is rounded to
// the operand format (bf16; fp16 for fp8 KV) before P V, the row sum uses the unrounded weights.
// Design notes and measurements: docs/kernels.md, docs/performance.md.
//
// Two implementations of one group:
// - NVIDIA (nvcc, sm_90) for MLA's 576 / 512: mma.sync m16n8k16 with fp32 accumulate. The KV chunks stream
//   into a ring of kStages shared-memory buffers with cp.async (kStages - 1 chunks in flight
//   while one is computed; masked keys are zero-filled, never read). Each of the 8 warps keeps
//   the q fragments of one half of the 576 dimensions in registers for the whole group and
//   computes S for a quarter of the chunk's keys over its half; the two halves meet in shared
//   memory. Every warp then runs the (identical) online softmax for all 16 rows from there and
//   keeps the O accumulator of 64 output columns in registers, so each chunk costs two barriers.
//   Cache rows of the keys are read kStages chunks ahead, so no copy waits on an index load.
//   fp8 e4m3fn KV is staged as bytes and widened to fp16 per chunk (a third barrier).
// - Portable (the AMD build's kernel, compiled for gfx90a/gfx940 in CI, not run on AMD hardware
//   here; on NVIDIA for other head dims and DecodeOptions::tiling = 5): the same online softmax
//   with plain loops over shared memory, one chunk of 64 keys at a time.
#include "kernels/hip_compat.h"  // first: the HIP/CUDA names the other headers use

#include "kernels/gpu_api.h"

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
constexpr int kRows = 16;  // q rows (token x head) per group
constexpr int kMaxD = 576;
constexpr int kMaxDv = 512;

struct DecodeParams {
  const uint16_t* q;   // bf16 [q rows, H, D]
  const uint16_t* kv;  // bf16 [cache rows, D] (kv_fp8 = 0)
  const uint8_t* kv8;  // fp8 e4m3fn [cache rows, D] (kv_fp8 = 1)
  const int32_t* kv_indices;
  const int32_t* kv_indptr;
  const int32_t* lpl;
  const int32_t* qo_indptr;
  const int32_t* topk;  // sparse: [q rows, topk]
  const int32_t* work_indptr;
  const int32_t* work_info;
  uint16_t* o;              // bf16 [rows, H, Dv]
  float* lse;               // [rows, H]
  float* part_o;            // [partial rows, H, Dv]
  float* part_lse;          // [partial rows, H]
  unsigned long long* log;  // [q min, q max + 1, o min, o max + 1]
  int32_t H, D, Dv, page, sparse, causal, batch, variant, kv_fp8;
  int64_t cache_rows;
  float logit_scale, v_scale;
};

// What one 16-row group of a work item covers: keys [p0, p1) (positions into kv_indices, or into
// the token's top-k list), and for the causal rule the request's KV length lk, q length lq, first
// q row req_q0 and the position of p0 within the request (key_first).
struct GroupTask {
  const int32_t* w;  // the work item's 8 ints
  int64_t p0, p1, key_first, lk, lq, req_q0;
  int g;  // group index within the tile
};

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

__device__ inline void log_rows(unsigned long long* log, int slot, int64_t r0, int64_t r1) {
  if (log == nullptr || threadIdx.x != 0 || r1 <= r0) return;
  atomicMin(&log[slot], static_cast<unsigned long long>(r0));
  atomicMax(&log[slot + 1], static_cast<unsigned long long>(r1));
}

// Causal rule (§11): the last key position (relative to the work item's first key) that the
// group's token may see, plus one. INT64_MAX when the call is not causal.
__device__ inline int64_t causal_limit(const DecodeParams& P, const GroupTask& t, int64_t token) {
  return P.causal ? (token - t.req_q0) + t.lk - t.lq + 1 - t.key_first : INT64_MAX;
}

// Flat (row, head) index of the group's first row, and its token.
__device__ inline int64_t group_first_row(const DecodeParams& P, const GroupTask& t) {
  return int64_t{t.w[2]} * P.H + int64_t{t.g} * kRows;
}

// Walks the cluster's work items (blockIdx.x = cluster) and calls fn(GroupTask) per 16-row group.
// The opus variant returns before reading anything for a zero-KV item (§11 variants).
template <class Fn>
__device__ inline void for_each_group(const DecodeParams& P, Fn&& fn) {
  const int c = blockIdx.x;
  const int32_t w0 = P.work_indptr[c], w1 = P.work_indptr[c + 1];
  for (int32_t wi = w0; wi < w1; ++wi) {
    int32_t w[8];
    for (int f = 0; f < 8; ++f) w[f] = P.work_info[int64_t{wi} * 8 + f];
    if (P.variant == static_cast<int>(ZeroKvVariant::kOpus) && w[5] <= w[4]) continue;
    GroupTask t{w, 0, 0, 0, 0, 0, 0, 0};
    if (P.sparse) {
      t.p0 = w[4];
      t.p1 = w[5];
    } else {
      const int64_t page = P.page;
      const int32_t b = w[0];
      t.p0 = int64_t{w[4]} * page;
      t.p1 = (w[6] != 0 || page == 1) ? int64_t{w[5]} * page : int64_t{w[5] - 1} * page + P.lpl[b];
      if (P.causal) {
        const int64_t pages = P.kv_indptr[b + 1] - P.kv_indptr[b];
        t.lk = pages == 0 ? 0 : (pages - 1) * page + P.lpl[b];
        t.lq = P.qo_indptr[b + 1] - P.qo_indptr[b];
        t.req_q0 = P.qo_indptr[b];
        t.key_first = t.p0 - int64_t{P.kv_indptr[b]} * page;
      }
    }
    if (t.p1 < t.p0) t.p1 = t.p0;
    const int groups = (w[3] - w[2]) * P.H / kRows;
    for (t.g = 0; t.g < groups; ++t.g) fn(t);
  }
}

#if defined(__CUDACC__)
// ---------------------------------------------------------------------------------------------
// NVIDIA: mma.sync + cp.async pipeline
// ---------------------------------------------------------------------------------------------
__device__ inline uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy global -> shared; src_bytes = 0 writes 16 zero bytes (masked key).
__device__ inline void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c += a (16x16 bf16, row major) * b (16x8 bf16, column major), fp32 accumulate.
__device__ inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(  // no side effects: the scheduler may interleave independent mma and loads
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// The same with fp16 operands (the fp8-KV kernel: e4m3fn widens to fp16 in one instruction).
__device__ inline void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <bool kF16>
__device__ inline void mma_k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kF16)
    mma_f16(c, a, b0, b1);
  else
    mma_bf16(c, a, b0, b1);
}
// Two floats to f16x2 (round to nearest even; lo in the low half).
__device__ inline uint32_t pack_f16(float lo, float hi) {
  uint32_t out;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
}
// bf16x2 to f16x2 (exact for |x| in fp16's normal range; bf16 q values beyond it round).
__device__ inline uint32_t bf16x2_to_f16x2(uint32_t v) {
  return pack_f16(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}
__device__ inline uint32_t pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(f2bf(lo)) | (static_cast<uint32_t>(f2bf(hi)) << 16);
}

// Tiling of the NVIDIA path, for MLA's head dims (576 / 512, bf16). 8 warps = 4 key quarters x 2
// dimension halves for S = Q K^T; for O += P V each warp owns 64 of the 512 output columns.
template <int kChunkT, int kStagesT, bool kFp8T = false>
struct MmaTiling {
  static constexpr int kD = 576, kDv = 512;
  // fp8 e4m3fn KV: the copies land in kStages fp8 staging buffers (kD bytes per key) and each
  // chunk is widened (exactly) into one fp16 buffer before the math (a third barrier per chunk);
  // the mma then runs on fp16 operands: q converted from bf16 once per group, P rounded to fp16.
  static constexpr bool kFp8 = kFp8T;
  static constexpr int kKvBytes = kFp8 ? 1 : 2;  // bytes per KV element in global memory
  static constexpr int kLdk = kD + 8;         // bf16 per KV row in shared memory (16 B-odd stride:
                                              // the 8 rows of an ldmatrix hit distinct banks)
  static constexpr int kChunk = kChunkT;      // keys per chunk (32 or 64)
  static constexpr int kStages = kStagesT;    // shared-memory KV buffers
  static constexpr int kSlots = kStages + 1;  // ring of per-chunk cache rows / masks
  static constexpr int kWords = kChunk / 32;  // 32-bit validity words per chunk
  static constexpr int kKeyTiles = kChunk / 32;    // n8 tiles of S per warp (chunk / 4 warps / 8)
  static constexpr int kPvSteps = kChunk / 16;     // k16 steps of P V
  static constexpr int kLdS = kChunk + 8;          // floats per row of a score half
  static constexpr int kHalfSteps = kD / 32;       // k16 steps per dimension half (18)
  static constexpr int kKeysPerWarp = kChunk / 8;  // keys each warp copies per chunk
  static constexpr int kBufBytes = kChunk * kLdk * 2;                 // one bf16 chunk buffer
  static constexpr int kStageBytes = kFp8 ? kChunk * kD : kBufBytes;  // one copy destination
  static_assert(kChunk == 32 || kChunk == 64, "chunk of 32 or 64 keys");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kDv == 8 * 64, "8 warps x 64 output columns");
  static_assert(kD * 2 == 2 * 512 + 128 && kD == 512 + 64,
                "KV rows are copied as 512-byte warp runs + a tail");

  static constexpr size_t smem_bytes() {
    return size_t{kStages} * kStageBytes + (kFp8 ? kBufBytes : 0) + 2 * kRows * kLdS * 4 +
           kSlots * kChunk * 8 + kSlots * kWords * 4;
  }
};

template <class T>
struct MmaSmem {
  uint16_t* ks;     // [kStages][kChunk][kLdk] bf16 KV rows, or (fp8) [kStages][kChunk][kD] bytes
  uint16_t* kconv;  // fp8 only: [kChunk][kLdk] the current chunk widened to fp16
  float* sp;        // [2][kRows][kLdS] S partial sums of the two dimension halves
  int64_t* krow;    // [kSlots][kChunk] cache row of each key, -1 = masked
  uint32_t* valid;  // [kSlots][kWords] bit j = key j is read
};

// Queues the copies of one chunk (cache rows from krow) into the buffer at shared address dst:
// warp w copies keys [w * kKeysPerWarp, +kKeysPerWarp), each row as coalesced runs of lanes x
// 16 B (bf16 1152 B: +0, +512, lanes 0-7 at +1024; fp8 576 B: +0, lanes 0-3 at +512). Masked keys
// are zero-filled.
template <class T>
__device__ inline void issue_chunk(const DecodeParams& P, const int64_t* krow, uint32_t dst) {
  constexpr int kRowBytes = T::kD * T::kKvBytes;
  constexpr int kDstStride = T::kFp8 ? T::kD : T::kLdk * 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const char* kv =
      (T::kFp8 ? reinterpret_cast<const char*>(P.kv8) : reinterpret_cast<const char*>(P.kv)) +
      lane * 16;
#pragma unroll
  for (int kk = 0; kk < T::kKeysPerWarp; ++kk) {
    const int j = warp * T::kKeysPerWarp + kk;
    const int64_t row = krow[j];
    const int bytes = row >= 0 ? 16 : 0;
    const char* src = kv + (row >= 0 ? row : 0) * kRowBytes;
    const uint32_t d = dst + j * kDstStride + lane * 16;
    cp_async16(d, src, bytes);
    if constexpr (T::kFp8) {
      if (lane < 4) cp_async16(d + 512, src + 512, bytes);
    } else {
      cp_async16(d + 512, src + 512, bytes);
      if (lane < 8) cp_async16(d + 1024, src + 1024, bytes);
    }
  }
}

// Two e4m3fn values (low byte first) to f16x2, exactly (every e4m3fn value is an fp16 value;
// NaN stays NaN).
__device__ inline uint32_t e4m3x2_to_f16x2(uint16_t two) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(two));
  return h2;
}

// fp8: widens the staged chunk (kChunk x kD bytes, contiguous) into the fp16 buffer (row stride
// kLdk); each thread converts 16-byte runs.
template <class T>
__device__ inline void widen_chunk(const uint8_t* staged, uint16_t* dst) {
  constexpr int kRuns = T::kChunk * T::kD / 16, kRunsPerKey = T::kD / 16;
#pragma unroll
  for (int idx = threadIdx.x; idx < kRuns; idx += kBlock) {
    const uint4 v = reinterpret_cast<const uint4*>(staged)[idx];
    const int j = idx / kRunsPerKey, c = idx % kRunsPerKey;
    uint4* out = reinterpret_cast<uint4*>(dst + j * T::kLdk + c * 16);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t b[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      b[2 * k] = e4m3x2_to_f16x2(static_cast<uint16_t>(w[k] & 0xffffu));
      b[2 * k + 1] = e4m3x2_to_f16x2(static_cast<uint16_t>(w[k] >> 16));
    }
    out[0] = make_uint4(b[0], b[1], b[2], b[3]);
    out[1] = make_uint4(b[4], b[5], b[6], b[7]);
  }
}

// Cache rows of the keys of one chunk to ring slot `slot` (threads < kChunk, whole warps).
template <class T>
__device__ inline void put_rows(const MmaSmem<T>& s, int slot, int64_t row) {
  s.krow[slot * T::kChunk + threadIdx.x] = row;
  const uint32_t bits = __ballot_sync(0xffffffffu, row >= 0);
  if (threadIdx.x % 32 == 0) s.valid[slot * T::kWords + threadIdx.x / 32] = bits;
}

template <class T>
__device__ void run_group_mma(const DecodeParams& P, const MmaSmem<T>& s, const GroupTask& t) {
  constexpr int kChunk = T::kChunk, kStages = T::kStages, kSlots = T::kSlots, kLdk = T::kLdk;
  constexpr int kD = T::kD, kDv = T::kDv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int64_t first = group_first_row(P, t), token = first / P.H;
  log_rows(P.log, 0, token, token + 1);

  // q fragments (A of m16n8k16) of this warp's dimension half, kept for the whole group.
  const int kh = warp / 4, quarter = warp % 4;
  uint32_t qa[T::kHalfSteps][4];
  {
    const uint32_t* q_lo =
        reinterpret_cast<const uint32_t*>(P.q + (first + gq) * kD) + kh * (kD / 4) + tq;
    const uint32_t* q_hi =
        reinterpret_cast<const uint32_t*>(P.q + (first + gq + 8) * kD) + kh * (kD / 4) + tq;
#pragma unroll
    for (int st = 0; st < T::kHalfSteps; ++st) {  // 32-bit words of dims 16 st + 2 tq (+1), +8
      qa[st][0] = q_lo[st * 8];
      qa[st][1] = q_hi[st * 8];
      qa[st][2] = q_lo[st * 8 + 4];
      qa[st][3] = q_hi[st * 8 + 4];
      if constexpr (T::kFp8)
        for (int f = 0; f < 4; ++f) qa[st][f] = bf16x2_to_f16x2(qa[st][f]);
    }
  }
  const int64_t n = t.p1 - t.p0;
  if (n <= 0 && P.variant != static_cast<int>(ZeroKvVariant::kAsm))
    return;  // hk: read q, write nothing
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int64_t limit = causal_limit(P, t, token);

  // Prologue: cache rows of chunks 0 .. kStages - 1, copies of chunks 0 .. kStages - 2.
  int64_t next_row = -1;
  if (threadIdx.x < kChunk) {
    int64_t rows[kStages];
#pragma unroll
    for (int c = 0; c < kStages; ++c) rows[c] = key_row(P, t.p0 + c * kChunk + threadIdx.x, t.p1);
    next_row = key_row(P, t.p0 + kStages * kChunk + threadIdx.x, t.p1);
#pragma unroll
    for (int c = 0; c < kStages; ++c) put_rows(s, c, rows[c]);
  }
  __syncthreads();
  const uint32_t ks_u32 = smem_u32(s.ks);
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) {
    if (c < chunks) issue_chunk<T>(P, s.krow + c * kChunk, ks_u32 + c * T::kStageBytes);
    cp_async_commit();
  }

  // Per-lane shared-memory byte offsets of the ldmatrix rows (the chunk's buffer base is added).
  const uint32_t s_lane = [&] {
    if constexpr (T::kKeyTiles == 2)  // x4 = (keys 0-7 | 8-15) x (dims 0-7 | 8-15) of one k16 step
      return ((quarter * 16 + (lane / 16) * 8 + lane % 8) * kLdk + kh * (kD / 2) +
              ((lane / 8) % 2) * 8) *
             2;
    else  // x4 = keys 0-7 x dims 0-7 | 8-15 | 16-23 | 24-31: two k16 steps of one n8 tile
      return ((quarter * 8 + lane % 8) * kLdk + kh * (kD / 2) + (lane / 8) * 8) * 2;
  }();
  const int col0 = warp * 64;  // this warp's output columns
  // x4.trans = (keys 0-7 | 8-15) x (dims 0-7 | 8-15)
  const uint32_t v_lane = ((((lane / 8) % 2) * 8 + lane % 8) * kLdk + col0 + (lane / 16) * 8) * 2;

  float oacc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i) oacc[i][0] = oacc[i][1] = oacc[i][2] = oacc[i][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // rows gq, gq + 8; log2 units
  const float scale2 = P.logit_scale * 1.4426950408889634f;

  for (int64_t i = 0; i < chunks; ++i) {
    cp_async_wait<kStages - 2>();  // chunk i has landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's; chunk i - 1 is fully consumed
    if (threadIdx.x < kChunk) {
      put_rows(s, static_cast<int>((i + kStages) % kSlots), next_row);
      next_row = key_row(P, t.p0 + (i + kStages + 1) * kChunk + threadIdx.x, t.p1);
    }
    if (i + kStages - 1 < chunks) {
      const int64_t c = i + kStages - 1;
      issue_chunk<T>(P, s.krow + (c % kSlots) * kChunk, ks_u32 + (c % kStages) * T::kStageBytes);
    }
    cp_async_commit();
    uint32_t kb;
    if constexpr (T::kFp8) {
      widen_chunk<T>(reinterpret_cast<const uint8_t*>(s.ks) + (i % kStages) * T::kStageBytes,
                     s.kconv);
      __syncthreads();  // the widened chunk is complete
      kb = smem_u32(s.kconv);
    } else {
      kb = ks_u32 + static_cast<uint32_t>(i % kStages) * T::kBufBytes;
    }

    // S partial of this warp: keys [quarter * kChunk / 4, +kChunk / 4), dimensions of half kh.
    // Two accumulator sets (even / odd k16 steps) halve the dependent mma chain.
    float sacc[2][T::kKeyTiles][4];
#pragma unroll
    for (int par = 0; par < 2; ++par)
#pragma unroll
      for (int nt = 0; nt < T::kKeyTiles; ++nt)
        sacc[par][nt][0] = sacc[par][nt][1] = sacc[par][nt][2] = sacc[par][nt][3] = 0.f;
    if constexpr (T::kKeyTiles == 2) {
#pragma unroll
      for (int st = 0; st < T::kHalfSteps; ++st) {
        uint32_t b[4];
        ldmatrix_x4(b, kb + s_lane + st * 32);
        mma_k16<T::kFp8>(sacc[st & 1][0], qa[st], b[0], b[1]);
        mma_k16<T::kFp8>(sacc[st & 1][1], qa[st], b[2], b[3]);
      }
    } else {
#pragma unroll
      for (int st = 0; st < T::kHalfSteps; st += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, kb + s_lane + st * 32);
        mma_k16<T::kFp8>(sacc[0][0], qa[st], b[0], b[1]);
        mma_k16<T::kFp8>(sacc[1][0], qa[st + 1], b[2], b[3]);
      }
    }
    {
      float* sp = s.sp + kh * kRows * T::kLdS + quarter * (kChunk / 4) + 2 * tq;
#pragma unroll
      for (int nt = 0; nt < T::kKeyTiles; ++nt) {
        // scaled once here (logit scale x log2 e), not by every warp that reads it
        *reinterpret_cast<float2*>(sp + gq * T::kLdS + nt * 8) = make_float2(
            (sacc[0][nt][0] + sacc[1][nt][0]) * scale2, (sacc[0][nt][1] + sacc[1][nt][1]) * scale2);
        *reinterpret_cast<float2*>(sp + (gq + 8) * T::kLdS + nt * 8) = make_float2(
            (sacc[0][nt][2] + sacc[1][nt][2]) * scale2, (sacc[0][nt][3] + sacc[1][nt][3]) * scale2);
      }
    }
    __syncthreads();

    // Online softmax for rows gq (lo) and gq + 8 (hi), keys of k16 step ks: 16 ks + 2 tq + {0, 1}
    // and 16 ks + 8 + 2 tq + {0, 1} -- exactly the A fragment of P for P V. A key counts when its
    // cache row is valid and it is before the causal limit; bits shifted so bit b = key 2 tq + b.
    uint32_t keep[T::kWords];
    {
      const int64_t rem = limit - i * kChunk;  // keys of this chunk before the causal limit
#pragma unroll
      for (int w = 0; w < T::kWords; ++w) {
        const int64_t r = rem - 32 * w;
        const uint32_t causal = r >= 32 ? 0xffffffffu : r <= 0 ? 0u : (1u << r) - 1u;
        keep[w] = (s.valid[(i % kSlots) * T::kWords + w] & causal) >> (2 * tq);
      }
    }
    float x[T::kPvSteps][4][2];
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
    const float* sp_lo = s.sp + gq * T::kLdS + 2 * tq;
#pragma unroll
    for (int ks = 0; ks < T::kPvSteps; ++ks) {
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int off = (f & 1) * 8 * T::kLdS + ks * 16 + (f >> 1) * 8;
        const float2 a = *reinterpret_cast<const float2*>(sp_lo + off);
        const float2 b = *reinterpret_cast<const float2*>(sp_lo + kRows * T::kLdS + off);
        const int bit = (ks % 2) * 16 + (f >> 1) * 8;
        const uint32_t word = keep[ks / 2];
        const float x0 = (word >> bit) & 1u ? a.x + b.x : -INFINITY;
        const float x1 = (word >> (bit + 1)) & 1u ? a.y + b.y : -INFINITY;
        x[ks][f][0] = x0;
        x[ks][f][1] = x1;
        if (f & 1)
          mx_hi = fmaxf(mx_hi, fmaxf(x0, x1));
        else
          mx_lo = fmaxf(mx_lo, fmaxf(x0, x1));
      }
    }
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 1));
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 2));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 1));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 2));
    const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
    // exp2(-inf - finite) = 0 handles masked keys; a row with nothing yet (mn = -inf) subtracts 0.
    const float sub_lo = mn_lo == -INFINITY ? 0.f : mn_lo,
                sub_hi = mn_hi == -INFINITY ? 0.f : mn_hi;
    const float alpha_lo = exp2f(m_lo - sub_lo), alpha_hi = exp2f(m_hi - sub_hi);
    float ps_lo = 0.f, ps_hi = 0.f;
    uint32_t pa[T::kPvSteps][4];
#pragma unroll
    for (int ks = 0; ks < T::kPvSteps; ++ks) {
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const float sub = (f & 1) ? sub_hi : sub_lo;
        const float p0 = exp2f(x[ks][f][0] - sub), p1 = exp2f(x[ks][f][1] - sub);
        if (f & 1)
          ps_hi += p0 + p1;
        else
          ps_lo += p0 + p1;
        pa[ks][f] = T::kFp8 ? pack_f16(p0, p1) : pack_bf16(p0, p1);
      }
    }
    ps_lo += __shfl_xor_sync(0xffffffffu, ps_lo, 1);
    ps_lo += __shfl_xor_sync(0xffffffffu, ps_lo, 2);
    ps_hi += __shfl_xor_sync(0xffffffffu, ps_hi, 1);
    ps_hi += __shfl_xor_sync(0xffffffffu, ps_hi, 2);
    l_lo = l_lo * alpha_lo + ps_lo;
    l_hi = l_hi * alpha_hi + ps_hi;
    m_lo = mn_lo;
    m_hi = mn_hi;
    // (unconditional: skipping it when no row max moved, behind a warp vote, measured 4 % slower)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      oacc[nt][0] *= alpha_lo;
      oacc[nt][1] *= alpha_lo;
      oacc[nt][2] *= alpha_hi;
      oacc[nt][3] *= alpha_hi;
    }

    // O += P V for columns [col0, col0 + 64)
#pragma unroll
    for (int ks = 0; ks < T::kPvSteps; ++ks) {
#pragma unroll
      for (int pp = 0; pp < 4; ++pp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, kb + v_lane + (ks * 16 * kLdk + pp * 16) * 2);
        mma_k16<T::kFp8>(oacc[2 * pp], pa[ks], b[0], b[1]);
        mma_k16<T::kFp8>(oacc[2 * pp + 1], pa[ks], b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();

  // Final rows (m and l are identical in every warp: same inputs, same operations).
  const float kLn2 = 0.6931471805599453f;
  const bool empty_lo = m_lo == -INFINITY || l_lo == 0, empty_hi = m_hi == -INFINITY || l_hi == 0;
  const float inv_lo = empty_lo ? 0.f : P.v_scale / l_lo,
              inv_hi = empty_hi ? 0.f : P.v_scale / l_hi;
  const float lse_lo = empty_lo ? -INFINITY : (m_lo + log2f(l_lo)) * kLn2;
  const float lse_hi = empty_hi ? -INFINITY : (m_hi + log2f(l_hi)) * kLn2;
  const int32_t loc = t.w[1];
  if (loc < 0) {
    uint16_t* o_lo = P.o + (first + gq) * kDv + col0 + 2 * tq;
    uint16_t* o_hi = P.o + (first + gq + 8) * kDv + col0 + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      *reinterpret_cast<uint32_t*>(o_lo + nt * 8) =
          pack_bf16(oacc[nt][0] * inv_lo, oacc[nt][1] * inv_lo);
      *reinterpret_cast<uint32_t*>(o_hi + nt * 8) =
          pack_bf16(oacc[nt][2] * inv_hi, oacc[nt][3] * inv_hi);
    }
    if (warp == 0 && tq == 0) {
      P.lse[first + gq] = lse_lo;
      P.lse[first + gq + 8] = lse_hi;
    }
    log_rows(P.log, 2, token, token + 1);
  } else {
    const int64_t q0 = t.w[2];
    const int64_t pfirst = (int64_t{loc} + (token - q0)) * P.H + (first - token * P.H);
    float* po_lo = P.part_o + (pfirst + gq) * kDv + col0 + 2 * tq;
    float* po_hi = P.part_o + (pfirst + gq + 8) * kDv + col0 + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      *reinterpret_cast<float2*>(po_lo + nt * 8) =
          make_float2(oacc[nt][0] * inv_lo, oacc[nt][1] * inv_lo);
      *reinterpret_cast<float2*>(po_hi + nt * 8) =
          make_float2(oacc[nt][2] * inv_hi, oacc[nt][3] * inv_hi);
    }
    if (warp == 0 && tq == 0) {
      P.part_lse[pfirst + gq] = lse_lo;
      P.part_lse[pfirst + gq + 8] = lse_hi;
    }
  }
  __syncthreads();  // the next group's prologue rewrites the cache-row ring
}

template <class T>
__global__ void __launch_bounds__(kBlock, 1) mla_decode_mma_kernel(DecodeParams P) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  MmaSmem<T> s;
  unsigned char* ptr = smem_raw;
  s.ks = reinterpret_cast<uint16_t*>(ptr);
  ptr += size_t{T::kStages} * T::kStageBytes;
  s.kconv = reinterpret_cast<uint16_t*>(ptr);
  if (T::kFp8) ptr += T::kBufBytes;
  s.sp = reinterpret_cast<float*>(ptr);
  ptr += 2 * kRows * T::kLdS * 4;
  s.krow = reinterpret_cast<int64_t*>(ptr);
  ptr += T::kSlots * T::kChunk * 8;
  s.valid = reinterpret_cast<uint32_t*>(ptr);
  for_each_group(P, [&](const GroupTask& t) { run_group_mma<T>(P, s, t); });
}
#endif  // __CUDACC__

// ---------------------------------------------------------------------------------------------
// Portable path: plain loops over shared memory, one chunk of 64 keys at a time, any head dims
// (D % 32 == 0, D <= 576, Dv <= 512). The AMD build's kernel; on NVIDIA it runs head dims other
// than MLA's 576 / 512 and DecodeOptions::tiling = 5.
// ---------------------------------------------------------------------------------------------
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
  for (int idx = threadIdx.x; idx < kRows * D / 8; idx += kBlock) {
    const int r = idx / (D / 8), c = idx % (D / 8);
    reinterpret_cast<uint4*>(s.qs + r * s.ldk)[c] =
        reinterpret_cast<const uint4*>(P.q + (first + r) * D)[c];
  }
  log_rows(P.log, 0, token, token + 1);
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
    log_rows(P.log, 2, token, token + 1);
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

// mla_reduce_v1 (§12): one workgroup per tile with >= 2 pieces; each warp combines one
// (row, head) pair at a time: L = log sum exp of the pieces' LSE, o = sum of exp(lse_i - L) x
// partial_o_i, its lanes holding 4 consecutive columns per 16-byte load.
__global__ void __launch_bounds__(kBlock)
    mla_reduce_kernel(const int32_t* reduce_indptr, const int32_t* final_map,
                      const int32_t* partial_map, const float* part_o, const float* part_lse,
                      uint16_t* o, float* lse, int H, int Dv, unsigned long long* log) {
  const int t = blockIdx.x;
  const int32_t g0 = reduce_indptr[t], g1 = reduce_indptr[t + 1];
  if (g1 - g0 <= 1) return;
  const int32_t q0 = final_map[2 * t], q1 = final_map[2 * t + 1];
  log_rows(log, 2, q0, q1);
  constexpr int kWarps = kBlock / COMPAT_WARP_SIZE;
  constexpr int kQuads = kMaxDv / 4 / COMPAT_WARP_SIZE;  // float4 column groups per lane
  const int warp = threadIdx.x / COMPAT_WARP_SIZE, lane = threadIdx.x % COMPAT_WARP_SIZE;
  const int dv4 = Dv / 4;
  for (int64_t pair = warp; pair < int64_t{q1 - q0} * H; pair += kWarps) {
    const int64_t srow = pair / H, h = pair % H;
    float M = -INFINITY;
    for (int32_t i = g0; i < g1; ++i)
      M = fmaxf(M, part_lse[(int64_t{partial_map[i]} + srow) * H + h]);
    float S = 0;
    for (int32_t i = g0; i < g1; ++i)
      S += expf(part_lse[(int64_t{partial_map[i]} + srow) * H + h] - M);
    const float L = (S == 0.f || S != S) ? INFINITY : M + logf(S);
    float4 acc[kQuads];
#pragma unroll
    for (int k = 0; k < kQuads; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int32_t i = g0; i < g1; ++i) {
      const int64_t prow = (int64_t{partial_map[i]} + srow) * H + h;
      const float wgt = expf(part_lse[prow] - L);
      const float4* po = reinterpret_cast<const float4*>(part_o + prow * Dv);
#pragma unroll
      for (int k = 0; k < kQuads; ++k) {
        const int d4 = lane + k * COMPAT_WARP_SIZE;
        if (d4 < dv4) {
          const float4 v = po[d4];
          acc[k].x += wgt * v.x;
          acc[k].y += wgt * v.y;
          acc[k].z += wgt * v.z;
          acc[k].w += wgt * v.w;
        }
      }
    }
    uint2* out = reinterpret_cast<uint2*>(o + ((int64_t{q0} + srow) * H + h) * Dv);
#pragma unroll
    for (int k = 0; k < kQuads; ++k) {
      const int d4 = lane + k * COMPAT_WARP_SIZE;
      if (d4 < dv4)
        out[d4] = make_uint2(
            static_cast<uint32_t>(f2bf(acc[k].x)) | (static_cast<uint32_t>(f2bf(acc[k].y)) << 16),
            static_cast<uint32_t>(f2bf(acc[k].z)) | (static_cast<uint32_t>(f2bf(acc[k].w)) << 16));
    }
    if (lane == 0) lse[(int64_t{q0} + srow) * H + h] = L;
  }
}

// The decode kernel a run uses: DecodeOptions::tiling picks among the NVIDIA tilings (chunk keys
// x shared-memory stages); the AMD build has the portable kernel only.
struct DecodeKernel {
  void (*fn)(DecodeParams);
  size_t smem;  // dynamic shared memory, bytes
  const char* name;
};

DecodeKernel pick_decode_kernel(int D, int Dv, int tiling, bool kv_fp8) {
  const DecodeKernel portable{&mla_decode_portable_kernel, portable_smem_bytes(D, Dv), "portable"};
#if defined(__CUDACC__)
  using T32x4 = MmaTiling<32, 4>;
  using T32x5 = MmaTiling<32, 5>;
  using T32x6 = MmaTiling<32, 6>;
  using T64x2 = MmaTiling<64, 2>;
  using F64x2 = MmaTiling<64, 2, true>;
  using F64x3 = MmaTiling<64, 3, true>;
  if (tiling == 5 || D != T64x2::kD || Dv != T64x2::kDv) return portable;
  if (kv_fp8) {  // 64 keys; 3 fp8 stages (default) or 2 (tiling 4)
    if (tiling == 4)
      return {&mla_decode_mma_kernel<F64x2>, F64x2::smem_bytes(), "mma fp8 64 keys x 2 stages"};
    return {&mla_decode_mma_kernel<F64x3>, F64x3::smem_bytes(), "mma fp8 64 keys x 3 stages"};
  }
  switch (tiling) {
    case 1: return {&mla_decode_mma_kernel<T32x4>, T32x4::smem_bytes(), "mma 32 keys x 4 stages"};
    case 2: return {&mla_decode_mma_kernel<T32x5>, T32x5::smem_bytes(), "mma 32 keys x 5 stages"};
    case 3: return {&mla_decode_mma_kernel<T32x6>, T32x6::smem_bytes(), "mma 32 keys x 6 stages"};
    // default: 64 x 2 measured fastest on the H200 (docs/performance.md): fewer, larger chunks beat
    // deeper prefetch because the per-chunk softmax and barriers, not memory latency, bound it
    default: return {&mla_decode_mma_kernel<T64x2>, T64x2::smem_bytes(), "mma 64 keys x 2 stages"};
  }
#else
  (void)tiling;
  (void)kv_fp8;
  return portable;
#endif
}

__global__ void fill_u8_kernel(unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = v;
}

// A device buffer of `rows` rows of `row_bytes` plus `tail_rows` sentinel rows.
struct TailedBuffer {
  std::string name;
  unsigned char* p = nullptr;
  int64_t rows = 0, row_bytes = 0, tail_rows = 0;
  bool guarded = false;  // placed by device_alloc_guarded: no tail, the next byte is unmapped
  GuardedAllocation guard;
  TailedBuffer(std::string n, int64_t r, int64_t rb, int64_t tail, bool guard_pages = false)
      : name(std::move(n)),
        rows(r),
        row_bytes(rb),
        tail_rows(guard_pages && r > 0 ? 0 : tail),
        guarded(guard_pages && r > 0) {
    if (guarded) {
      guard = device_alloc_guarded(static_cast<std::size_t>(bytes()));
      p = static_cast<unsigned char*>(guard.ptr);
      return;
    }
    HIP_CHECK(
        hipMalloc(reinterpret_cast<void**>(&p), std::max<int64_t>(bytes() + tail_bytes(), 16)));
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
    hipLaunchKernelGGL(fill_u8_kernel, dim3(1024), dim3(256), 0, 0, p, static_cast<size_t>(bytes()),
                       v);
    HIP_CHECK(hipGetLastError());
  }
  void scan(std::vector<TailDamage>& out) const {
    const SentinelScan sc = scan_sentinel(p + bytes(), tail_bytes());
    if (sc.bad_bytes == 0) return;
    out.push_back(TailDamage{name, rows, rows + sc.first_bad_byte / row_bytes,
                             rows + sc.last_bad_byte / row_bytes, sc.bad_bytes});
  }
};

uint16_t host_f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// The e4m3fn encoding of f when f is an e4m3fn value (NaN included); false otherwise (no
// rounding: the caller's inputs are already quantised, ref::RoundTo).
bool host_e4m3fn_exact(float f, uint8_t* out) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return *out = sign | 0x7f, true;  // NaN
  if (a == 0) return *out = sign, true;
  const int e = static_cast<int>(a >> 23) - 127;
  const uint32_t man = a & 0x7fffffu;
  if (e >= -6) {  // normal: 3 fraction bits, exponent -6..8, 448 the largest
    if (e > 8 || (man & 0xfffffu) != 0) return false;
    const uint32_t m = man >> 20, E = static_cast<uint32_t>(e + 7);
    if (E == 15 && m == 7) return false;
    return *out = static_cast<uint8_t>(sign | (E << 3) | m), true;
  }
  if (e < -9 || (a >> 23) == 0) return false;  // below 2^-9, or an fp32 subnormal
  const int sh = e + 9;                        // subnormal m * 2^-9, m = 1..7
  const uint32_t full = 0x800000u | man;
  if ((full & ((1u << (23 - sh)) - 1)) != 0) return false;
  return *out = static_cast<uint8_t>(sign | (full >> (23 - sh))), true;
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

DecodeResult run_mla_decode(const ref::MlaInputs& in, const ref::Plan& plan,
                            const DecodeOptions& opt) {
  const int H = in.num_heads, D = in.head_dim_qk, Dv = in.head_dim_v;
  if (H % kRows != 0 || D % 32 != 0 || D > kMaxD || Dv % 16 != 0 || Dv > kMaxDv || Dv > D ||
      Dv * kRows % kBlock != 0)
    throw std::invalid_argument(
        "run_mla_decode: needs heads % 16 == 0, head_dim_qk a multiple of 32 and <= 576, "
        "head_dim_v a multiple of 16 "
        "and <= min(512, head_dim_qk)");
  if (plan.derived.fold_ratio != 1)
    throw std::invalid_argument("run_mla_decode: head-folded plans are not run");
  // The kernels read work_info rows [work_indptr[c], work_indptr[c + 1]) per cluster and, per tile
  // with two or more pieces, reduce_final_map[2t..2t+1] and reduce_partial_map[g0..g1). A plan
  // whose values point past its own buffers (a class-D sizing overflow, or a poisoned start
  // before a written end) would make the device read past them: refused here, naming the cell.
  {
    const int64_t rows = plan.work_info.size() / 8;
    const auto& wi = plan.work_indptr.data;
    for (size_t c = 0; c + 1 < wi.size(); ++c)
      if (wi[c] < wi[c + 1] && (wi[c] < 0 || wi[c + 1] > rows))
        throw std::invalid_argument("run_mla_decode: work_indptr[" + std::to_string(c) + ".." +
                                    std::to_string(c + 1) + "] = " + std::to_string(wi[c]) + ".." +
                                    std::to_string(wi[c + 1]) + " lies outside work_info (" +
                                    std::to_string(rows) + " rows)");
    const auto& ri = plan.reduce_indptr.data;
    for (size_t t = 0; t + 1 < ri.size(); ++t) {
      if (ri[t + 1] - int64_t{ri[t]} < 2) continue;
      if (ri[t] < 0 || ri[t + 1] > plan.reduce_partial_map.size() ||
          int64_t(2 * t + 1) >= plan.reduce_final_map.size())
        throw std::invalid_argument("run_mla_decode: reduce tile " + std::to_string(t) +
                                    " points past reduce_partial_map or reduce_final_map");
      for (int32_t i = ri[t]; i < ri[t + 1]; ++i)
        if (plan.reduce_partial_map.data[i] < 0)
          throw std::invalid_argument("run_mla_decode: reduce_partial_map[" + std::to_string(i) +
                                      "] is negative");
    }
  }
  const bool sparse = in.topk >= 0;
  const int64_t q_rows = in.q_rows();
  const int64_t q_alloc = opt.q_alloc_rows >= 0 ? opt.q_alloc_rows : q_rows;
  const int64_t o_alloc = opt.o_alloc_rows >= 0 ? opt.o_alloc_rows : q_rows;
  int32_t max_q = 1;
  for (size_t b = 0; b + 1 < in.qo_indptr.size(); ++b)
    max_q = std::max(max_q, in.qo_indptr[b + 1] - in.qo_indptr[b]);
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
  const bool kv_fp8 = opt.kv_format == ref::NumFormat::kFp8E4m3fn;
  if (!kv_fp8 && opt.kv_format != ref::NumFormat::kBf16)
    throw std::invalid_argument("run_mla_decode: kv_format must be bf16 or fp8_e4m3fn");
  std::vector<uint16_t> kvh;
  std::vector<uint8_t> kv8h;
  if (kv_fp8) {
    kv8h.resize(in.kv_cache.size());
    for (size_t i = 0; i < kv8h.size(); ++i)
      if (!host_e4m3fn_exact(in.kv_cache[i], &kv8h[i]))
        throw std::invalid_argument(
            "run_mla_decode: kv_cache[" + std::to_string(i) +
            "] = " + std::to_string(in.kv_cache[i]) +
            " is not an fp8_e4m3fn value (build the inputs with kv_format fp8_e4m3fn)");
  } else {
    kvh.resize(in.kv_cache.size());
    for (size_t i = 0; i < kvh.size(); ++i) kvh[i] = host_f2bf(in.kv_cache[i]);
  }

  DecodeParams P{};
  P.q = reinterpret_cast<const uint16_t*>(q.p);
  P.kv = upload(kvh, owned);
  P.kv8 = upload(kv8h, owned);
  P.kv_fp8 = kv_fp8;
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
  P.H = H, P.D = D, P.Dv = Dv, P.page = in.page_size, P.sparse = sparse,
  P.causal = in.is_causal && !sparse;
  P.batch = in.num_requests();
  P.variant = static_cast<int>(opt.variant);
  P.cache_rows = int64_t{in.num_pages} * in.page_size;
  P.logit_scale = static_cast<float>(in.effective_sm_scale() * in.q_scale * in.kv_scale);
  P.v_scale = static_cast<float>(in.kv_scale);

  const DecodeKernel dk =
      pick_decode_kernel(D, Dv, opt.tiling, opt.kv_format == ref::NumFormat::kFp8E4m3fn);
  const size_t smem = dk.smem;
  HIP_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(dk.fn),
                                hipFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(smem)));
  const int clusters = static_cast<int>(plan.work_indptr.data.size()) - 1;
  const int tiles = static_cast<int>(plan.reduce_indptr.data.size()) - 1;
  auto decode = [&] {
    if (clusters > 0) hipLaunchKernelGGL(dk.fn, dim3(clusters), dim3(kBlock), smem, 0, P);
    HIP_CHECK(hipGetLastError());
  };
  auto reduce = [&] {
    if (opt.run_reduce && tiles > 0)
      hipLaunchKernelGGL(mla_reduce_kernel, dim3(tiles), dim3(kBlock), 0, 0, ri, fm, pm, P.part_o,
                         P.part_lse, P.o, P.lse, H, Dv, log);
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
  res.kernel = dk.name;
  if (q.guarded) res.guard = q.guard;
  if (o.guarded) res.guard = o.guard;
  for (const TailedBuffer* b : {&q, &o, &lse, &po, &pl}) b->scan(res.tails);
  unsigned long long lg[4];
  copy_to_host(lg, log, sizeof lg);
  if (lg[1] != 0)
    res.q_rows_read_min = static_cast<int64_t>(lg[0]),
    res.q_rows_read_max = static_cast<int64_t>(lg[1]) - 1;
  if (lg[3] != 0)
    res.o_rows_written_min = static_cast<int64_t>(lg[2]),
    res.o_rows_written_max = static_cast<int64_t>(lg[3]) - 1;
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
  const float us = time_launches(
      iterations, [&] { HIP_CHECK(hipMemcpy(b, a, bytes, hipMemcpyDeviceToDevice)); });
  device_free(a);
  device_free(b);
  return 2.0 * bytes / (us * 1e-6) / 1e9;
}

}  // namespace mlasim::gpu
