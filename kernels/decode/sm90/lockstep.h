// kernels/decode/sm90/lockstep.h - the lock-step NVIDIA decode kernel (DecodeOptions::tiling 1-4
// and 7): all 8 warps copy KV chunks with cp.async into a ring of kStages buffers, then compute S,
// the (redundant, per-warp) online softmax of all rows of the pass and O += P V in lock step, two
// barriers per chunk (three for fp8 KV, which is widened to fp16 in shared memory).
// A pass covers kM m16 tiles of q rows (kM x 16 heads of one token): with kM = 2 (tiling 7, heads
// a multiple of 32) every KV chunk brought into shared memory serves 32 rows instead of 16, so a
// token with H heads reads its KV range H / 32 times instead of H / 16, and each B fragment
// loaded from shared memory feeds two mma instead of one. q then lives in shared memory (read
// with ldmatrix per k16 step) instead of registers, which could not hold two tiles.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/schedule.h"
#include "kernels/decode/sm90/ptx.h"

namespace mlasim::gpu::decode::sm90::lockstep {

// Tiling of the NVIDIA path, for MLA's head dims (576 / 512, bf16). 8 warps = 4 key quarters x 2
// dimension halves for S = Q K^T; for O += P V each warp owns 64 of the 512 output columns.
template <int kChunkT, int kStagesT, bool kFp8T = false, int kMT = 1>
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
  static constexpr int kM = kMT;                   // m16 tiles of q rows per pass
  static constexpr int kPassRows = kM * kRows;     // q rows (heads of one token) per pass
  static constexpr int kLdq = kD + 8;  // bf16 per q row in shared memory (kM > 1): 1168 B, odd x 16
  static constexpr int kQBytes = kM > 1 ? kPassRows * kLdq * 2 : 0;
  static constexpr int kBufBytes = kChunk * kLdk * 2;                 // one bf16 chunk buffer
  static constexpr int kStageBytes = kFp8 ? kChunk * kD : kBufBytes;  // one copy destination
  static_assert(kChunk == 32 || kChunk == 64, "chunk of 32 or 64 keys");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kDv == 8 * 64, "8 warps x 64 output columns");
  static_assert(kD * 2 == 2 * 512 + 128 && kD == 512 + 64,
                "KV rows are copied as 512-byte warp runs + a tail");
  static_assert(kM == 1 || (kM == 2 && kChunk == 64 && !kFp8),
                "two m16 tiles per pass: bf16 KV, 64-key chunks");

  static constexpr size_t smem_bytes() {
    return size_t{kStages} * kStageBytes + (kFp8 ? kBufBytes : 0) + 2 * kPassRows * kLdS * 4 +
           kQBytes + kSlots * kChunk * 8 + kSlots * kWords * 4;
  }
};

template <class T>
struct MmaSmem {
  uint16_t* ks;     // [kStages][kChunk][kLdk] bf16 KV rows, or (fp8) [kStages][kChunk][kD] bytes
  uint16_t* kconv;  // fp8 only: [kChunk][kLdk] the current chunk widened to fp16
  float* sp;        // [2][kPassRows][kLdS] S partial sums of the two dimension halves
  uint16_t* q;      // kM > 1 only: [kPassRows][kLdq] bf16 q rows of the pass
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

// Writes one m16 tile's rows [row0, row0 + 16) (flat (token, head) rows of q): o and lse when the
// work item owns its rows (work_info loc < 0), else the partial rows of its split.
template <class T>
__device__ inline void write_rows(const DecodeParams& P, const GroupTask& t, int64_t token,
                                  int64_t row0, const float (&oacc)[8][4], float m_lo, float m_hi,
                                  float l_lo, float l_hi) {
  constexpr int kDv = T::kDv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int col0 = warp * 64;
  const float kLn2 = 0.6931471805599453f;
  const bool empty_lo = m_lo == -INFINITY || l_lo == 0, empty_hi = m_hi == -INFINITY || l_hi == 0;
  const float inv_lo = empty_lo ? 0.f : P.v_scale / l_lo,
              inv_hi = empty_hi ? 0.f : P.v_scale / l_hi;
  const float lse_lo = empty_lo ? -INFINITY : (m_lo + log2f(l_lo)) * kLn2;
  const float lse_hi = empty_hi ? -INFINITY : (m_hi + log2f(l_hi)) * kLn2;
  const int32_t loc = t.w[1];
  if (loc < 0) {
    uint16_t* o_lo = P.o + (row0 + gq) * kDv + col0 + 2 * tq;
    uint16_t* o_hi = P.o + (row0 + gq + 8) * kDv + col0 + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      *reinterpret_cast<uint32_t*>(o_lo + nt * 8) =
          pack_bf16(oacc[nt][0] * inv_lo, oacc[nt][1] * inv_lo);
      *reinterpret_cast<uint32_t*>(o_hi + nt * 8) =
          pack_bf16(oacc[nt][2] * inv_hi, oacc[nt][3] * inv_hi);
    }
    if (warp == 0 && tq == 0) {
      P.lse[row0 + gq] = lse_lo;
      P.lse[row0 + gq + 8] = lse_hi;
    }
    log_rows(P.log, 2, token, token + 1, threadIdx.x == 0);
  } else {
    const int64_t q0 = t.w[2];
    const int64_t pfirst = (int64_t{loc} + (token - q0)) * P.H + (row0 - token * P.H);
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
}

template <class T>
__device__ void run_group_mma(const DecodeParams& P, const MmaSmem<T>& s, const GroupTask& t) {
  constexpr int kChunk = T::kChunk, kStages = T::kStages, kSlots = T::kSlots, kLdk = T::kLdk;
  constexpr int kD = T::kD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  constexpr int kM = T::kM, kPR = T::kPassRows;
  const int64_t first = group_first_row(P, t), token = first / P.H;
  log_rows(P.log, 0, token, token + 1, threadIdx.x == 0);

  // q fragments (A of m16n8k16) of this warp's dimension half, kept in registers for the whole
  // group (kM = 1); with kM = 2 they are loaded from shared memory at each k16 step.
  const int kh = warp / 4, quarter = warp % 4;
  uint32_t qa[kM == 1 ? T::kHalfSteps : 1][4];
  if constexpr (kM == 1) {
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
  if constexpr (kM > 1) {  // q rows [first, first + kPR) to shared memory, 16 bytes a thread
    constexpr int kRunsPerRow = kD / 8;
    for (int idx = threadIdx.x; idx < kPR * kRunsPerRow; idx += kBlock) {
      const int r = idx / kRunsPerRow, c = idx % kRunsPerRow;
      *reinterpret_cast<uint4*>(s.q + r * T::kLdq + c * 8) =
          *reinterpret_cast<const uint4*>(P.q + (first + r) * kD + c * 8);
    }
  }  // visible after the prologue's barrier
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
  // kM > 1: ldmatrix x4 of a 16 x 16 block of q = the A fragment (rows 0-7 | 8-15) x (dims 0-7 |
  // 8-15) of tile 0, dimension half kh; + mt * 16 rows for tile mt, + 32 bytes per k16 step.
  const uint32_t q_lane =
      kM > 1 ? smem_u32(s.q) + ((lane % 16) * T::kLdq + kh * (kD / 2) + (lane / 16) * 8) * 2 : 0;
  const int col0 = warp * 64;  // this warp's output columns
  // x4.trans = (keys 0-7 | 8-15) x (dims 0-7 | 8-15)
  const uint32_t v_lane = ((((lane / 8) % 2) * 8 + lane % 8) * kLdk + col0 + (lane / 16) * 8) * 2;

  float oacc[kM][8][4];
#pragma unroll
  for (int mt = 0; mt < kM; ++mt)
#pragma unroll
    for (int i = 0; i < 8; ++i)
      oacc[mt][i][0] = oacc[mt][i][1] = oacc[mt][i][2] = oacc[mt][i][3] = 0.f;
  // per tile: rows gq (lo) and gq + 8 (hi) of the tile; log2 units
  float m_lo[kM], m_hi[kM], l_lo[kM], l_hi[kM];
#pragma unroll
  for (int mt = 0; mt < kM; ++mt) m_lo[mt] = m_hi[mt] = -INFINITY, l_lo[mt] = l_hi[mt] = 0.f;
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
    float sacc[kM][2][T::kKeyTiles][4];
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int par = 0; par < 2; ++par)
#pragma unroll
        for (int nt = 0; nt < T::kKeyTiles; ++nt)
          sacc[mt][par][nt][0] = sacc[mt][par][nt][1] = sacc[mt][par][nt][2] =
              sacc[mt][par][nt][3] = 0.f;
    if constexpr (T::kKeyTiles == 2) {
#pragma unroll
      for (int st = 0; st < T::kHalfSteps; ++st) {
        uint32_t b[4];
        ldmatrix_x4(b, kb + s_lane + st * 32);
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {  // one B fragment, kM tiles of q
          if constexpr (kM > 1) {
            uint32_t a[4];
            ldmatrix_x4(a, q_lane + mt * 16 * T::kLdq * 2 + st * 32);
            mma_k16<T::kFp8>(sacc[mt][st & 1][0], a, b[0], b[1]);
            mma_k16<T::kFp8>(sacc[mt][st & 1][1], a, b[2], b[3]);
          } else {
            mma_k16<T::kFp8>(sacc[mt][st & 1][0], qa[st], b[0], b[1]);
            mma_k16<T::kFp8>(sacc[mt][st & 1][1], qa[st], b[2], b[3]);
          }
        }
      }
    } else {
#pragma unroll
      for (int st = 0; st < T::kHalfSteps; st += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, kb + s_lane + st * 32);
        mma_k16<T::kFp8>(sacc[0][0][0], qa[st], b[0], b[1]);
        mma_k16<T::kFp8>(sacc[0][1][0], qa[st + 1], b[2], b[3]);
      }
    }
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
      float* sp = s.sp + (kh * kPR + mt * kRows) * T::kLdS + quarter * (kChunk / 4) + 2 * tq;
#pragma unroll
      for (int nt = 0; nt < T::kKeyTiles; ++nt) {
        // scaled once here (logit scale x log2 e), not by every warp that reads it
        const auto& a = sacc[mt];
        *reinterpret_cast<float2*>(sp + gq * T::kLdS + nt * 8) = make_float2(
            (a[0][nt][0] + a[1][nt][0]) * scale2, (a[0][nt][1] + a[1][nt][1]) * scale2);
        *reinterpret_cast<float2*>(sp + (gq + 8) * T::kLdS + nt * 8) = make_float2(
            (a[0][nt][2] + a[1][nt][2]) * scale2, (a[0][nt][3] + a[1][nt][3]) * scale2);
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
    uint32_t pa[kM][T::kPvSteps][4];
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
      float x[T::kPvSteps][4][2];
      float mx_lo = -INFINITY, mx_hi = -INFINITY;
      const float* sp_lo = s.sp + (mt * kRows + gq) * T::kLdS + 2 * tq;
#pragma unroll
      for (int ks = 0; ks < T::kPvSteps; ++ks) {
#pragma unroll
        for (int f = 0; f < 4; ++f) {
          const int off = (f & 1) * 8 * T::kLdS + ks * 16 + (f >> 1) * 8;
          const float2 a = *reinterpret_cast<const float2*>(sp_lo + off);
          const float2 b = *reinterpret_cast<const float2*>(sp_lo + kPR * T::kLdS + off);
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
      const float mn_lo = fmaxf(m_lo[mt], mx_lo), mn_hi = fmaxf(m_hi[mt], mx_hi);
      // exp2(-inf - finite) = 0 handles masked keys; a row with nothing yet (mn = -inf) subtracts 0.
      const float sub_lo = mn_lo == -INFINITY ? 0.f : mn_lo,
                  sub_hi = mn_hi == -INFINITY ? 0.f : mn_hi;
      const float alpha_lo = exp2f(m_lo[mt] - sub_lo), alpha_hi = exp2f(m_hi[mt] - sub_hi);
      float ps_lo = 0.f, ps_hi = 0.f;
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
          pa[mt][ks][f] = T::kFp8 ? pack_f16(p0, p1) : pack_bf16(p0, p1);
        }
      }
      ps_lo += __shfl_xor_sync(0xffffffffu, ps_lo, 1);
      ps_lo += __shfl_xor_sync(0xffffffffu, ps_lo, 2);
      ps_hi += __shfl_xor_sync(0xffffffffu, ps_hi, 1);
      ps_hi += __shfl_xor_sync(0xffffffffu, ps_hi, 2);
      l_lo[mt] = l_lo[mt] * alpha_lo + ps_lo;
      l_hi[mt] = l_hi[mt] * alpha_hi + ps_hi;
      m_lo[mt] = mn_lo;
      m_hi[mt] = mn_hi;
      // (unconditional: skipping it when no row max moved, behind a warp vote, measured 4 % slower)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        oacc[mt][nt][0] *= alpha_lo;
        oacc[mt][nt][1] *= alpha_lo;
        oacc[mt][nt][2] *= alpha_hi;
        oacc[mt][nt][3] *= alpha_hi;
      }
    }

    // O += P V for columns [col0, col0 + 64): one B fragment, kM tiles of P
#pragma unroll
    for (int ks = 0; ks < T::kPvSteps; ++ks) {
#pragma unroll
      for (int pp = 0; pp < 4; ++pp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, kb + v_lane + (ks * 16 * kLdk + pp * 16) * 2);
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          mma_k16<T::kFp8>(oacc[mt][2 * pp], pa[mt][ks], b[0], b[1]);
          mma_k16<T::kFp8>(oacc[mt][2 * pp + 1], pa[mt][ks], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Final rows (m and l are identical in every warp: same inputs, same operations).
#pragma unroll
  for (int mt = 0; mt < kM; ++mt)
    write_rows<T>(P, t, token, first + mt * kRows, oacc[mt], m_lo[mt], m_hi[mt], l_lo[mt],
                  l_hi[mt]);
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
  ptr += 2 * T::kPassRows * T::kLdS * 4;
  s.q = reinterpret_cast<uint16_t*>(ptr);
  ptr += T::kQBytes;
  s.krow = reinterpret_cast<int64_t*>(ptr);
  ptr += T::kSlots * T::kChunk * 8;
  s.valid = reinterpret_cast<uint32_t*>(ptr);
  for_each_group<T::kPassRows>(P, [&](const GroupTask& t) { run_group_mma<T>(P, s, t); });
}

}  // namespace mlasim::gpu::decode::sm90::lockstep
