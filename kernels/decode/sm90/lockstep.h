// kernels/decode/sm90/lockstep.h - the lock-step NVIDIA decode kernel (DecodeOptions::tiling 1-4
// and 7): all 8 warps copy KV chunks with cp.async into a ring of kStages buffers, then compute S,
// the online softmax (each warp owns kPassRows / 8 rows; P goes through shared memory) and O += P V
// in lock step, three barriers per chunk (four for fp8 KV widened to fp16 in shared memory).
// fp8 KV can also be read straight from its staging buffers as mma operands (kDirect, tilings 1
// and 2 for fp8): no widened copy and no fourth barrier; each thread widens the bytes of its own
// fragments (cvt e4m3x2 -> f16x2) right before its mma, with the order of the k dimension of each
// mma permuted so that a fragment is one 16-byte (K) or 4-byte (V) shared-memory load (below).
// With fp8 q too (kQ8), S runs on e4m3 mma (m16n8k32) from the fp8 bytes of q and K, unwidened.
// A pass covers kM m16 tiles of q rows (kM x 16 heads of one token): with kM = 2 (tiling 7, heads
// a multiple of 32) every KV chunk brought into shared memory serves 32 rows instead of 16, so a
// token with H heads reads its KV range H / 32 times instead of H / 16, and each B fragment
// loaded from shared memory feeds two mma instead of one. q then lives in shared memory (read
// with ldmatrix per k16 step) instead of registers, which could not hold two tiles.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/fragments.h"
#include "kernels/decode/params.h"
#include "kernels/decode/schedule.h"
#include "kernels/decode/sm90/ptx.h"

namespace mlasim::gpu::decode::sm90::lockstep {

// Tiling of the NVIDIA path, for MLA's head dims (576 / 512, bf16). 8 warps = 4 key quarters x 2
// dimension halves for S = Q K^T; for O += P V each warp owns 64 of the 512 output columns.
template <int kChunkT, int kStagesT, bool kFp8T = false, int kMT = 1, bool kDirectT = false,
          bool kQ8T = false>
struct MmaTiling {
  static constexpr int kD = 576, kDv = 512;
  // fp8 e4m3fn KV: the copies land in kStages fp8 staging buffers (kD bytes per key); unless read
  // directly (kDirect), each chunk is widened (exactly) into one fp16 buffer before the math (a
  // fourth barrier per chunk); the mma runs on fp16 operands either way: q converted from bf16
  // once per group, P rounded to fp16.
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
  // fp8 read directly (kDirect): staged rows keep their fp8 bytes with a stride of kLd8 bytes
  // (576 + 32 = 608 = 96 mod 128: the 4 consecutive rows of one V load hit 4 distinct 32-byte bank
  // windows, and the 2 rows 2 apart of one K load quarter-warp 2 distinct 64-byte windows).
  static constexpr bool kDirect = kDirectT;
  static constexpr int kLd8 = kD + 32;
  // fp8 q (kQ8, with kDirect only): S = Q K^T runs on e4m3 mma (m16n8k32) straight from the fp8
  // bytes of q and K, nothing widened (the products of e4m3 values are exact in fp32); q's A
  // fragments are kQ8Steps k32 steps of the dimension half, in registers for the whole group.
  // P V is as without it (V widened per fragment, P fp16).
  static constexpr bool kQ8 = kQ8T;
  static constexpr int kQ8Steps = kD / 64;
  // 32-bit q fragment words per thread kept in registers: [kQSteps][4]
  static constexpr int kQSteps = kQ8 ? kQ8Steps : kM == 1 ? kHalfSteps : 1;
  static constexpr int kBufBytes = kChunk * kLdk * 2;  // one bf16 chunk buffer
  static constexpr int kStageBytes =
      kDirect ? kChunk * kLd8 : kFp8 ? kChunk * kD : kBufBytes;  // one copy destination
  static constexpr int kConvBytes = kFp8 && !kDirect ? kBufBytes : 0;  // the widened chunk
  // Split softmax: each warp computes the online softmax of kPassRows / 8 rows only
  // (kLanesPerRow lanes per row, kKeysPerLane keys each), writes P (16-bit) and the rows' rescale
  // factors to shared memory, and every warp loads its P fragments from there (a third barrier
  // per chunk). (Every warp computing all rows in registers, without that barrier, was measured
  // slower on the four 16-head shapes compared in one run, and tiling 7 faster than in session 9:
  // 8 times the exponentials and masks; docs/performance.md "Session 10".)
  static constexpr int kRowsPerWarp = kMT * 16 / 8;
  static constexpr int kLanesPerRow = 32 / kRowsPerWarp;
  static constexpr int kKeysPerLane = kChunkT / kLanesPerRow;
  static constexpr int kLdP = kChunkT + 8;  // 16-bit elements per P row: odd x 16 B (ldmatrix)
  static constexpr int kPBytes = kMT * 16 * kLdP * 2;
  static constexpr int kRowStateBytes = 3 * kMT * 16 * 4;  // alpha, inv, lse per row
  // 16-bit element index of P (row, key) (split_softmax writes P through it)
  __host__ __device__ static constexpr int p_index(int row, int k) { return row * kLdP + k; }
  static_assert(kChunk == 32 || kChunk == 64, "chunk of 32 or 64 keys");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kDv == 8 * 64, "8 warps x 64 output columns");
  static_assert(kD * 2 == 2 * 512 + 128 && kD == 512 + 64,
                "KV rows are copied as 512-byte warp runs + a tail");
  static_assert(kM == 1 || (kM == 2 && kChunk == 64 && !kFp8),
                "two m16 tiles per pass: bf16 KV, 64-key chunks");
  static_assert(!kDirect || (kFp8 && kM == 1 && kChunk == 64),
                "direct fp8 operands: fp8 KV, one m16 tile, 64-key chunks (a warp's quarter of "
                "the keys is one k16 step of P V)");
  static_assert(kLd8 % 16 == 0 && kLd8 % 128 == 96, "see kLd8");
  static_assert(!kQ8 || kDirect, "fp8 q: the direct fp8 kernel only");
  static_assert(kKeysPerLane % 2 == 0 && kKeysPerLane <= 8 && (kLdP * 2 / 16) % 2 == 1,
                "split softmax: whole P pairs per lane, at most 8 keys a lane, ldmatrix-friendly "
                "P rows");

  // Shared-memory plan (bytes, in this order; MmaSmem's views and smem_bytes() both read it).
  static constexpr size_t kKsOff = 0;
  static constexpr size_t kConvOff = kKsOff + size_t{kStages} * kStageBytes;
  static constexpr size_t kSpOff = kConvOff + kConvBytes;
  static constexpr size_t kQOff = kSpOff + size_t{2} * kPassRows * kLdS * 4;
  static constexpr size_t kPOff = kQOff + kQBytes;
  static constexpr size_t kRowOff = kPOff + kPBytes;
  static constexpr size_t kKrowOff = kRowOff + kRowStateBytes;
  static constexpr size_t kValidOff = kKrowOff + size_t{kSlots} * kChunk * 8;
  static constexpr size_t kSmemBytes = kValidOff + size_t{kSlots} * kWords * 4;
  static_assert(kStageBytes % 16 == 0 && kConvBytes % 16 == 0 && kQBytes % 16 == 0 &&
                    kPBytes % 16 == 0 && kRowStateBytes % 16 == 0,
                "16-byte aligned parts");
  static_assert(kSmemBytes <= kSharedLimit, "shared-memory plan exceeds the sm_90 limit");

  static constexpr size_t smem_bytes() { return kSmemBytes; }
};

template <class T>
struct MmaSmem {
  uint16_t* ks;     // [kStages][kChunk][kLdk] bf16 KV rows, or fp8 [kStages][kChunk][kD] bytes
                    // (kDirect: [kStages][kChunk][kLd8] bytes)
  uint16_t* kconv;  // fp8, not kDirect: [kChunk][kLdk] the current chunk widened to fp16
  float* sp;        // [2][kPassRows][kLdS] S partial sums of the two dimension halves
  uint16_t* q;      // kM > 1 only: [kPassRows][kLdq] bf16 q rows of the pass
  int64_t* krow;    // [kSlots][kChunk] cache row of each key, -1 = masked
  uint32_t* valid;  // [kSlots][kWords] bit j = key j is read
  uint16_t* p;      // [kPassRows][kLdP] P of the chunk (bf16, fp16 for fp8 KV)
  float* alpha;     // [kPassRows] rescale of the chunk, then inv [kPassRows] and
                    // lse [kPassRows] of the finished rows

  // The views of a kernel's dynamic shared memory at T's offsets (T::kKsOff ..).
  __device__ explicit MmaSmem(unsigned char* raw)
      : ks(reinterpret_cast<uint16_t*>(raw + T::kKsOff)),
        kconv(reinterpret_cast<uint16_t*>(raw + T::kConvOff)),
        sp(reinterpret_cast<float*>(raw + T::kSpOff)),
        q(reinterpret_cast<uint16_t*>(raw + T::kQOff)),
        krow(reinterpret_cast<int64_t*>(raw + T::kKrowOff)),
        valid(reinterpret_cast<uint32_t*>(raw + T::kValidOff)),
        p(reinterpret_cast<uint16_t*>(raw + T::kPOff)),
        alpha(reinterpret_cast<float*>(raw + T::kRowOff)) {}
};

// Queues the copies of one chunk (cache rows from krow) into the buffer at shared address dst:
// warp w copies keys [w * kKeysPerWarp, +kKeysPerWarp), each row as coalesced runs of lanes x
// 16 B (bf16 1152 B: +0, +512, lanes 0-7 at +1024; fp8 576 B: +0, lanes 0-3 at +512). Masked keys
// are zero-filled.
template <class T>
__device__ inline void issue_chunk(const DecodeParams& P, const int64_t* krow, uint32_t dst) {
  constexpr int kRowBytes = T::kD * T::kKvBytes;
  constexpr int kDstStride = T::kDirect ? T::kLd8 : T::kFp8 ? T::kD : T::kLdk * 2;
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
    uint32_t b[8];
    e4m3x16_to_f16(v, b);
    out[0] = make_uint4(b[0], b[1], b[2], b[3]);
    out[1] = make_uint4(b[4], b[5], b[6], b[7]);
  }
}

// Cache rows of the keys of one chunk to ring slot `slot` (threads < T::kChunk, whole warps):
// krow [slots][kChunk] (the row of key threadIdx.x, -1 = masked), valid [slots][kWords] (bit j =
// key j is read). Every kernel's ring of cache rows (s: any shared-memory view with krow and
// valid).
template <class T, class Smem>
__device__ inline void put_rows(const Smem& s, int slot, int64_t row) {
  s.krow[slot * T::kChunk + threadIdx.x] = row;
  const uint32_t bits = __ballot_sync(0xffffffffu, row >= 0);
  if (threadIdx.x % 32 == 0) s.valid[slot * T::kWords + threadIdx.x / 32] = bits;
}
template <class T>
__device__ inline void put_rows(const MmaSmem<T>& s, int slot, int64_t row) {
  put_rows<T, MmaSmem<T>>(s, slot, row);
}

// Column pair p (0..7) of this thread's 64 output columns in row gq (hi: gq + 8): its first
// column (relative to the warp's col0) and its two values. The n8 tiles of O hold columns 8 p +
// 2 tq (+1); with kDirect (pv_direct) tile 4 cb + e holds 32 cb + 8 tq + e (+4), so the pair 2 r
// of block cb is tiles 4 cb + 2 (r & 1) and + 1, element r >> 1.
template <class T>
__device__ inline int column_pair(const float (&oacc)[8][4], int p, bool hi, int tq, float* v) {
  const int c = hi ? 2 : 0;
  if constexpr (T::kDirect) {
    const int cb = p / 4, r = p % 4, tile = 4 * cb + 2 * (r & 1), e = c + (r >> 1);
    v[0] = oacc[tile][e], v[1] = oacc[tile + 1][e];
    return 32 * cb + 8 * tq + 2 * r;
  } else {
    v[0] = oacc[p][c], v[1] = oacc[p][c + 1];
    return 8 * p + 2 * tq;
  }
}

// A finished row's output scale (v_scale / l, 0 for a row without keys) and lse (natural log;
// -inf without keys) from its online-softmax state (m, l in log2 units).
struct RowEnd {
  float inv, lse;
  __device__ RowEnd(const DecodeParams& P, float m, float l) {
    const bool empty = m == -INFINITY || l == 0;
    inv = empty ? 0.f : P.v_scale / l;
    lse = empty ? -INFINITY : (m + log2f(l)) * 0.6931471805599453f;
  }
  __device__ RowEnd(float i, float e) : inv(i), lse(e) {}
};

// Writes one m16 tile's rows [row0, row0 + 16) (flat (token, head) rows of q): o and lse when the
// work item owns its rows (work_info loc < 0), else the partial rows of its split. lo / hi: rows
// gq and gq + 8 of the tile.
template <class T>
__device__ inline void write_rows(const DecodeParams& P, const GroupTask& t, int64_t token,
                                  int64_t row0, const float (&oacc)[8][4], RowEnd lo, RowEnd hi) {
  constexpr int kDv = T::kDv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int col0 = warp * 64;
  const float inv_lo = lo.inv, inv_hi = hi.inv, lse_lo = lo.lse, lse_hi = hi.lse;
  const int32_t loc = t.w[1];
  if (loc < 0) {
    uint16_t* o_lo = P.o + (row0 + gq) * kDv + col0;
    uint16_t* o_hi = P.o + (row0 + gq + 8) * kDv + col0;
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      float v[2];
      int col = column_pair<T>(oacc, p, false, tq, v);
      *reinterpret_cast<uint32_t*>(o_lo + col) = pack_bf16(v[0] * inv_lo, v[1] * inv_lo);
      col = column_pair<T>(oacc, p, true, tq, v);
      *reinterpret_cast<uint32_t*>(o_hi + col) = pack_bf16(v[0] * inv_hi, v[1] * inv_hi);
    }
    if (warp == 0 && tq == 0) {
      P.lse[row0 + gq] = lse_lo;
      P.lse[row0 + gq + 8] = lse_hi;
    }
    log_rows(P.log, 2, token, token + 1, threadIdx.x == 0);
  } else {
    const int64_t q0 = t.w[2];
    const int64_t pfirst = (int64_t{loc} + (token - q0)) * P.H + (row0 - token * P.H);
    float* po_lo = P.part_o + (pfirst + gq) * kDv + col0;
    float* po_hi = P.part_o + (pfirst + gq + 8) * kDv + col0;
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      float v[2];
      int col = column_pair<T>(oacc, p, false, tq, v);
      *reinterpret_cast<float2*>(po_lo + col) = make_float2(v[0] * inv_lo, v[1] * inv_lo);
      col = column_pair<T>(oacc, p, true, tq, v);
      *reinterpret_cast<float2*>(po_hi + col) = make_float2(v[0] * inv_hi, v[1] * inv_hi);
    }
    if (warp == 0 && tq == 0) {
      P.part_lse[pfirst + gq] = lse_lo;
      P.part_lse[pfirst + gq + 8] = lse_hi;
    }
  }
}

// ---- fp8 KV read directly as mma operands (kDirect) ---------------------------------------------
// The k orders (which dims and keys each lane's fragment words hold) are kernels/decode/
// fragments.h's, checked on the CPU (tests/gpu/fragments_test.cpp): S's k16 step st of dimension
// half kh takes dims direct_dim(kD, kh, st, tq) .., its k32 step j (fp8 q) direct_dim_k32; the
// K loads below read exactly those bytes (a block's 16 bytes at direct_dim(.., 4 blk, tq), the
// tail's 8 at direct_dim(.., 16, tq)), the q loads the same dims of q.
template <class T>
__device__ inline int direct_dim(int kh, int st, int tq) {
  return decode::direct_dim(T::kD, kh, st, tq);
}

// q fragments of rows first + gq / + gq + 8 in the permuted k order above, as f16x2.
template <class T>
__device__ inline void load_q_direct(const DecodeParams& P, int64_t first, int kh,
                                     uint32_t (&qa)[T::kHalfSteps][4]) {
  const int lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const uint32_t* q_lo = reinterpret_cast<const uint32_t*>(P.q + (first + gq) * T::kD);
  const uint32_t* q_hi = reinterpret_cast<const uint32_t*>(P.q + (first + gq + 8) * T::kD);
#pragma unroll
  for (int st = 0; st < T::kHalfSteps; ++st) {
    const int word = direct_dim<T>(kh, st, tq) / 2;
    qa[st][0] = bf16x2_to_f16x2(q_lo[word]);
    qa[st][1] = bf16x2_to_f16x2(q_hi[word]);
    qa[st][2] = bf16x2_to_f16x2(q_lo[word + 1]);
    qa[st][3] = bf16x2_to_f16x2(q_hi[word + 1]);
  }
}

// fp8 q (kQ8): k32 step j of dimension half kh is the k16 steps 2 j and 2 j + 1 above, so its
// B fragments are the words of those steps (physical dims d .. d + 3 and d + 4 .. d + 7, d =
// direct_dim(kh, 2 j, tq): the mma's k 4 tq .. 4 tq + 3 and 16 + 4 tq ..) and its A fragments
// are q's bytes at the same 8 dims of rows first + gq and first + gq + 8 (one 8-byte load each).
template <class T>
__device__ inline void load_q_direct8(const DecodeParams& P, int64_t first, int kh,
                                      uint32_t (&qa)[T::kQ8Steps][4]) {
  const int lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const uint8_t* q_lo = P.q8 + (first + gq) * T::kD;
  const uint8_t* q_hi = P.q8 + (first + gq + 8) * T::kD;
#pragma unroll
  for (int j = 0; j < T::kQ8Steps; ++j) {
    const int d = decode::direct_dim_k32(T::kD, kh, j, tq);
    const uint2 lo = *reinterpret_cast<const uint2*>(q_lo + d);
    const uint2 hi = *reinterpret_cast<const uint2*>(q_hi + d);
    qa[j][0] = lo.x;
    qa[j][1] = hi.x;
    qa[j][2] = lo.y;
    qa[j][3] = hi.y;
  }
}

// The two f16x2 B fragments of one k16 step from one 32-bit word of 4 fp8 dims.
__device__ inline void mma_fp8_word(float (&c)[4], const uint32_t (&a)[4], uint32_t w) {
  mma_k16<true>(c, a, e4m3x2_to_f16x2(static_cast<uint16_t>(w & 0xffffu)),
                e4m3x2_to_f16x2(static_cast<uint16_t>(w >> 16)));
}

// This warp's S partial (keys of quarter `quarter`, dims of half kh) from the fp8 chunk at shared
// address kb (rows kLd8 bytes apart). n8 tile nt's column gq is key 16 quarter + 2 gq + nt. Each
// 16-byte K load feeds four f16 k16 steps (bf16 q widened to fp16 in qa) or, with fp8 q (kQ8),
// two e4m3 k32 steps.
template <class T>
__device__ inline void qk_direct(uint32_t kb, int quarter, int kh,
                                 const uint32_t (&qa)[T::kQSteps][4],
                                 float (&sacc)[2][T::kKeyTiles][4]) {
  const int lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const uint32_t row0 = kb + (quarter * 16 + 2 * gq) * T::kLd8 + kh * (T::kD / 2);
#pragma unroll
  for (int blk = 0; blk < 4; ++blk) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const uint4 v = lds128(row0 + nt * T::kLd8 + direct_dim<T>(0, 4 * blk, tq));
      if constexpr (T::kQ8) {
        mma_e4m3_k32(sacc[0][nt], qa[2 * blk], v.x, v.y);
        mma_e4m3_k32(sacc[1][nt], qa[2 * blk + 1], v.z, v.w);
      } else {
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) mma_fp8_word(sacc[k & 1][nt], qa[4 * blk + k], w[k]);
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {  // the tail: dims 256 .. 287 of the half (k16 steps 16, 17)
    const uint2 v = lds64(row0 + nt * T::kLd8 + direct_dim<T>(0, 16, tq));
    if constexpr (T::kQ8) {
      mma_e4m3_k32(sacc[0][nt], qa[8], v.x, v.y);
    } else {
      mma_fp8_word(sacc[0][nt], qa[16], v.x);
      mma_fp8_word(sacc[1][nt], qa[17], v.y);
    }
  }
}

// P V keys: P V's k16 step ks covers keys 16 ks .. 16 ks + 15 (one warp quarter of S) in the
// order of fragments.h (direct_pv_key, direct_s_column).

// O += P V for this warp's 64 columns [col0, col0 + 64) from the fp8 chunk at kb: per k16 step and
// 32-column block cb, thread (gq, tq) loads columns 32 cb + 4 gq .. + 3 of keys tq + 4 j; n8 tile
// 4 cb + e holds column 32 cb + 4 gq + e as its column gq (its C fragment: columns 32 cb + 8 tq
// + e and + 4 + e, which write_rows places).
template <class T>
__device__ inline void pv_direct(uint32_t kb, int col0, const uint32_t (&pa)[T::kPvSteps][4],
                                 float (&oacc)[8][4]) {
  const int lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
#pragma unroll
  for (int ks = 0; ks < T::kPvSteps; ++ks) {
#pragma unroll
    for (int cb = 0; cb < 2; ++cb) {
      // word j: V row direct_pv_key(tq, j) = tq + 4 j of the step
      const uint32_t a = kb + (16 * ks + direct_pv_key(tq, 0)) * T::kLd8 + col0 + 32 * cb + 4 * gq;
      uint32_t w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) w[j] = lds32(a + (direct_pv_key(0, j)) * T::kLd8);
      // pairs (key tq, key tq + 4) and (tq + 8, tq + 12) of each column: bytes e of w0 / w1
      const uint32_t lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
      const uint32_t lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
      const uint32_t b0[4] = {lo01 & 0xffffu, lo01 >> 16, hi01 & 0xffffu, hi01 >> 16};
      const uint32_t b1[4] = {lo23 & 0xffffu, lo23 >> 16, hi23 & 0xffffu, hi23 >> 16};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        mma_k16<true>(oacc[4 * cb + e], pa[ks], e4m3x2_to_f16x2(static_cast<uint16_t>(b0[e])),
                      e4m3x2_to_f16x2(static_cast<uint16_t>(b1[e])));
    }
  }
}

// ---- split softmax ------------------------------------------------------------------------------
// Chunk key (0 .. kChunk - 1) of the S column `col` (the P V order: direct_s_column's inverse).
template <class T>
__device__ inline int key_of_column(int col) {
  if constexpr (T::kDirect) {
    return direct_key_of_column(col);
  } else {
    return col;
  }
}

// Online softmax of the rows this lane's warp owns: row kRowsPerWarp * warp + lane / kLanesPerRow
// of the pass, S columns k0 .. k0 + kKeysPerLane - 1 (k0 = kKeysPerLane * (lane % kLanesPerRow)).
// A key counts when its cache row is valid (`valid`: the chunk's words) and it lies before the
// causal limit (`rem` keys of this chunk). Writes P (rounded to the operand format) and the row's
// rescale factor alpha; (m, l): the row's running max and sum (log2 units, unrounded weights).
template <class T>
__device__ inline void split_softmax(const MmaSmem<T>& s, const uint32_t* valid, int64_t rem,
                                     float& m, float& l) {
  constexpr int kLpr = T::kLanesPerRow, kKpl = T::kKeysPerLane;
  const int lane = threadIdx.x % 32;
  const int row = T::kRowsPerWarp * (threadIdx.x / 32) + lane / kLpr, k0 = kKpl * (lane % kLpr);
  const float* a = s.sp + row * T::kLdS + k0;
  const float* b = a + T::kPassRows * T::kLdS;
  float x[kKpl];
  float mx = -INFINITY;
#pragma unroll
  for (int e = 0; e < kKpl; e += 2) {
    const float2 u = *reinterpret_cast<const float2*>(a + e);
    const float2 v = *reinterpret_cast<const float2*>(b + e);
    const int k = key_of_column<T>(k0 + e), k1 = key_of_column<T>(k0 + e + 1);
    x[e] = (valid[k / 32] >> (k % 32)) & 1u && k < rem ? u.x + v.x : -INFINITY;
    x[e + 1] = (valid[k1 / 32] >> (k1 % 32)) & 1u && k1 < rem ? u.y + v.y : -INFINITY;
    mx = fmaxf(mx, fmaxf(x[e], x[e + 1]));
  }
#pragma unroll
  for (int off = kLpr / 2; off > 0; off >>= 1)
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const float mn = fmaxf(m, mx);
  // exp2(-inf - finite) = 0 handles masked keys; a row with nothing yet (mn = -inf) subtracts 0.
  const float sub = mn == -INFINITY ? 0.f : mn;
  const float alpha = exp2f(m - sub);
  float ps = 0.f;
  uint32_t packed[kKpl / 2];
#pragma unroll
  for (int e = 0; e < kKpl; e += 2) {
    const float p0 = exp2f(x[e] - sub), p1 = exp2f(x[e + 1] - sub);
    ps += p0 + p1;
    packed[e / 2] = pack_operand<T::kFp8>(p0, p1);
  }
#pragma unroll
  for (int off = kLpr / 2; off > 0; off >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, off);
  l = l * alpha + ps;
  m = mn;
  uint32_t* prow = reinterpret_cast<uint32_t*>(s.p + T::p_index(row, k0));
#pragma unroll
  for (int w = 0; w < kKpl / 2; ++w) prow[w] = packed[w];
  if (lane % kLpr == 0) s.alpha[row] = alpha;
}

// After split_softmax and a barrier: O of every tile rescaled by its rows' alpha, and the P
// fragments (A of m16n8k16) of every k16 step loaded from shared memory.
template <class T>
__device__ inline void split_p_fragments(const MmaSmem<T>& s, float (&oacc)[T::kM][8][4],
                                         uint32_t (&pa)[T::kM][T::kPvSteps][4]) {
  const int lane = threadIdx.x % 32, gq = lane / 4;
  // x4 = (rows 0-7 | 8-15) x (keys 0-7 | 8-15) of one k16 step
  const uint32_t p_lane = smem_u32(s.p) + ((lane % 16) * T::kLdP + (lane / 16) * 8) * 2;
#pragma unroll
  for (int mt = 0; mt < T::kM; ++mt) {
    const float al_lo = s.alpha[mt * kRows + gq], al_hi = s.alpha[mt * kRows + gq + 8];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      oacc[mt][nt][0] *= al_lo;
      oacc[mt][nt][1] *= al_lo;
      oacc[mt][nt][2] *= al_hi;
      oacc[mt][nt][3] *= al_hi;
    }
#pragma unroll
    for (int ks = 0; ks < T::kPvSteps; ++ks)
      ldmatrix_x4(pa[mt][ks], p_lane + (mt * kRows * T::kLdP + ks * 16) * 2);
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

  // q fragments (A of m16n8k16; kQ8: of m16n8k32, e4m3) of this warp's dimension half, kept in
  // registers for the whole group (kM = 1); with kM = 2 they are loaded from shared memory at each
  // k16 step.
  const int kh = warp / 4, quarter = warp % 4;
  uint32_t qa[T::kQSteps][4];
  if constexpr (T::kQ8) {
    load_q_direct8<T>(P, first, kh, qa);
  } else if constexpr (T::kDirect) {
    load_q_direct<T>(P, first, kh, qa);
  } else if constexpr (kM == 1) {
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
  // next_row: the row of chunk i + kStages for iteration i; next_index: the index load of chunk
  // i + kStages + 1, issued an iteration before its row is needed (its latency then overlaps an
  // iteration instead of stalling the warps that look rows up: measured on the warpgroup-mma
  // kernel, docs/performance.md "Session 11").
  int64_t next_row = -1;
  int32_t next_index = 0;
  if (threadIdx.x < kChunk) {
    int64_t rows[kStages];
#pragma unroll
    for (int c = 0; c < kStages; ++c) rows[c] = key_row(P, t.p0 + c * kChunk + threadIdx.x, t.p1);
    next_row = key_row(P, t.p0 + kStages * kChunk + threadIdx.x, t.p1);
    next_index = key_index(P, t.p0 + (kStages + 1) * kChunk + threadIdx.x, t.p1);
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
  float m_own = -INFINITY, l_own = 0.f;  // the owned row's state (split_softmax), log2 units
  const float scale2 = P.logit_scale * 1.4426950408889634f;

  for (int64_t i = 0; i < chunks; ++i) {
    cp_async_wait<kStages - 2>();  // chunk i has landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's; chunk i - 1 is fully consumed
    if (threadIdx.x < kChunk) {
      put_rows(s, static_cast<int>((i + kStages) % kSlots), next_row);
      const int64_t pos = t.p0 + (i + kStages + 1) * kChunk + threadIdx.x;
      next_row = key_row_of(P, pos, t.p1, next_index);
      next_index = key_index(P, pos + kChunk, t.p1);
    }
    if (i + kStages - 1 < chunks) {
      const int64_t c = i + kStages - 1;
      issue_chunk<T>(P, s.krow + (c % kSlots) * kChunk, ks_u32 + (c % kStages) * T::kStageBytes);
    }
    cp_async_commit();
    uint32_t kb;
    if constexpr (T::kDirect) {
      kb = ks_u32 + static_cast<uint32_t>(i % kStages) * T::kStageBytes;
    } else if constexpr (T::kFp8) {
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
    if constexpr (T::kDirect) {
      qk_direct<T>(kb, quarter, kh, qa, sacc[0]);
    } else if constexpr (T::kKeyTiles == 2) {
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
    if constexpr (T::kDirect) {  // keys 4 tq + e of the quarter, at their P V columns
      float* sp = s.sp + kh * kPR * T::kLdS + quarter * 16;
      const auto& a = sacc[0];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // C fragment column 2 tq + c of tile nt: key direct_s_key(nt, 2 tq + c) = 4 tq + e
        static_assert(direct_s_keys_are_4tq_plus_e(), "see fragments.h direct_s_key");
        const int nt = e & 1, c = e >> 1, col = direct_s_column(4 * tq + e);
        sp[gq * T::kLdS + col] = (a[0][nt][c] + a[1][nt][c]) * scale2;
        sp[(gq + 8) * T::kLdS + col] = (a[0][nt][2 + c] + a[1][nt][2 + c]) * scale2;
      }
    } else {
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
    }
    __syncthreads();

    // Online softmax of the rows this warp owns, then P fragments and rescale of every row.
    uint32_t pa[kM][T::kPvSteps][4];
    split_softmax<T>(s, s.valid + (i % kSlots) * T::kWords, limit - i * kChunk, m_own, l_own);
    __syncthreads();  // P and alpha of every row
    split_p_fragments<T>(s, oacc, pa);

    // O += P V for columns [col0, col0 + 64): one B fragment, kM tiles of P
    if constexpr (T::kDirect) {
      pv_direct<T>(kb, col0, pa[0], oacc[0]);
    } else {
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
  }
  cp_async_wait<0>();

  // Final rows: each owner's inv and lse through shared memory.
  if (lane % T::kLanesPerRow == 0) {
    const int row = T::kRowsPerWarp * warp + lane / T::kLanesPerRow;
    const RowEnd e(P, m_own, l_own);
    s.alpha[kPR + row] = e.inv;
    s.alpha[2 * kPR + row] = e.lse;
  }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < kM; ++mt) {
    const int lo = mt * kRows + gq, hi = lo + 8;
    write_rows<T>(P, t, token, first + mt * kRows, oacc[mt],
                  RowEnd(s.alpha[kPR + lo], s.alpha[2 * kPR + lo]),
                  RowEnd(s.alpha[kPR + hi], s.alpha[2 * kPR + hi]));
  }
  __syncthreads();  // the next group's prologue rewrites the cache-row ring
}

template <class T>
__global__ void __launch_bounds__(kBlock, 1) mla_decode_mma_kernel(DecodeParams P) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const MmaSmem<T> s(smem_raw);
  for_each_group<T::kPassRows>(P, [&](const GroupTask& t) { run_group_mma<T>(P, s, t); });
}

}  // namespace mlasim::gpu::decode::sm90::lockstep
