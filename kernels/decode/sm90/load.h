// kernels/decode/sm90/load.h - the KV and q side of the warp-specialised decode kernel: the
// shared-memory views, the producer warps (cache rows -> cp.async into the stage ring, masked
// keys zero-filled), the consumers' q fragments and the fp8 widening.
#pragma once

#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/schedule.h"
#include "kernels/decode/sm90/ptx.h"

namespace mlasim::gpu::decode::sm90 {

// Views of the shared-memory plan of WsConfig (config.h has the byte map).
template <class C>
struct WsSmem {
  unsigned char* stage;  // [kStages][kChunk][kStageRowBytes]
  uint16_t* conv;        // fp8 only: [kChunk][kLdk] fp16
  float* score;          // [2][kRows][kLdS]
  uint16_t* p;           // [kRows][kLdP]
  float* alpha;          // [kRows]
  float* inv;            // [2][kRows]
  uint32_t* valid;       // [kStages][2]
  uint64_t* full;        // [kStages]
  uint64_t* empty;       // [kStages]

  __device__ explicit WsSmem(unsigned char* base)
      : stage(base + C::kStageOff),
        conv(reinterpret_cast<uint16_t*>(base + C::kConvOff)),
        score(reinterpret_cast<float*>(base + C::kScoreOff)),
        p(reinterpret_cast<uint16_t*>(base + C::kPOff)),
        alpha(reinterpret_cast<float*>(base + C::kAlphaOff)),
        inv(reinterpret_cast<float*>(base + C::kInvOff)),
        valid(reinterpret_cast<uint32_t*>(base + C::kValidOff)),
        full(reinterpret_cast<uint64_t*>(base + C::kFullOff)),
        empty(reinterpret_cast<uint64_t*>(base + C::kEmptyOff)) {}
};

// Position in the stage ring of the workgroup's chunk number `chunk` (counted over all groups,
// so producer and consumers agree without talking).
template <class C>
struct RingSlot {
  int stage;
  uint32_t parity;  // parity of the stage's phase this chunk uses
  __device__ explicit RingSlot(uint32_t chunk)
      : stage(static_cast<int>(chunk % C::kStages)), parity((chunk / C::kStages) & 1u) {}
};

// cp.async producer warp pw (keys 32 pw .. 32 pw + 31; lane l's key has cache row r, -1 =
// masked): waits until the stage is free, stores the warp's validity word and arrives, then
// copies the warp's 32 rows one after another as coalesced 16-byte runs of the whole warp
// (bf16 1152 B: +0, +512, lanes 0-7 at +1024; fp8 576 B: +0, lanes 0-3 at +512; masked keys
// read 0 bytes and land as zeros), and has them counted on `full` when they land.
template <class C>
__device__ inline void fill_stage_cp(const DecodeParams& P, const WsSmem<C>& s, uint32_t chunk,
                                     int pw, int64_t r) {
  const int lane = threadIdx.x % 32;
  const RingSlot<C> slot(chunk);
  const uint32_t v = __ballot_sync(0xffffffffu, r >= 0);
  mbar_wait(&s.empty[slot.stage], slot.parity ^ 1u);  // a fresh barrier passes parity 1 at once
  if (lane == 0) s.valid[2 * slot.stage + pw] = v;
  __syncwarp();
  if (lane == 0) mbar_arrive(&s.full[slot.stage]);  // release: the validity word
  const char* kv =
      (C::kFp8 ? reinterpret_cast<const char*>(P.kv8) : reinterpret_cast<const char*>(P.kv)) +
      lane * 16;
  const uint32_t dst = smem_u32(s.stage + static_cast<size_t>(slot.stage) * C::kStageBytes +
                                (32 * pw) * C::kStageRowBytes + lane * 16);
#pragma unroll 2
  for (int k = 0; k < 32; ++k) {
    const long long row = __shfl_sync(0xffffffffu, static_cast<long long>(r), k);
    const int bytes = row >= 0 ? 16 : 0;
    const char* src = kv + (row >= 0 ? row : 0) * C::kKvRowBytes;
    const uint32_t d = dst + k * C::kStageRowBytes;
    cp_async16(d, src, bytes);
    if constexpr (C::kFp8) {
      if (lane < 4) cp_async16(d + 512, src + 512, bytes);
    } else {
      cp_async16(d + 512, src + 512, bytes);
      if (lane < 8) cp_async16(d + 1024, src + 1024, bytes);
    }
  }
  cp_async_mbar_arrive_noinc(&s.full[slot.stage]);
}

// The producer warps: walk the same groups as the consumers and stream every chunk of every
// group, so the ring stays full across group boundaries. The next chunk's cache rows are loaded
// before waiting for a free stage, which hides the index loads. The first producer warp
// prefetches each group's q rows into L2 for the consumers.
template <class C>
__device__ void produce(const DecodeParams& P, const WsSmem<C>& s) {
  const int lane = threadIdx.x % 32, pw = threadIdx.x / 32 - C::kProducerWarp;
  uint32_t chunk = 0;
  for_each_group(P, [&](const GroupTask& t) {
    const int64_t n = t.p1 - t.p0;
    if (n <= 0) return;  // the consumers run no chunk either
    if (pw == 0) {
      const char* q = reinterpret_cast<const char*>(P.q + group_first_row(P, t) * C::kD);
      for (int line = lane; line < kRows * C::kD * 2 / 128; line += 32) prefetch_l2(q + line * 128);
    }
    const int64_t chunks = (n + C::kChunk - 1) / C::kChunk;
    const int key = 32 * pw + lane;
    int64_t r = key_row(P, t.p0 + key, t.p1);
    for (int64_t i = 0; i < chunks; ++i, ++chunk) {
      const int64_t next = key_row(P, t.p0 + (i + 1) * C::kChunk + key, t.p1);
      fill_stage_cp<C>(P, s, chunk, pw, r);
      r = next;
    }
  });
}

// Consumers: the q fragments (A of m16n8k16) of dimension half kh for the group's 16 rows, kept
// in registers for the whole group: qa[st] = rows gq / gq + 8, dims 16 st + 2 tq (+1), (+8).
template <class C>
__device__ inline void load_q_fragments(const DecodeParams& P, int64_t first, int kh,
                                        uint32_t (&qa)[C::kHalfSteps][4]) {
  const int lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const uint32_t* q_lo =
      reinterpret_cast<const uint32_t*>(P.q + (first + gq) * C::kD) + kh * (C::kD / 4) + tq;
  const uint32_t* q_hi =
      reinterpret_cast<const uint32_t*>(P.q + (first + gq + 8) * C::kD) + kh * (C::kD / 4) + tq;
#pragma unroll
  for (int st = 0; st < C::kHalfSteps; ++st) {
    qa[st][0] = q_lo[st * 8];
    qa[st][1] = q_hi[st * 8];
    qa[st][2] = q_lo[st * 8 + 4];
    qa[st][3] = q_hi[st * 8 + 4];
    if constexpr (C::kFp8)
#pragma unroll
      for (int f = 0; f < 4; ++f) qa[st][f] = bf16x2_to_f16x2(qa[st][f]);
  }
}

// fp8: the consumers widen the staged chunk (kChunk x kD bytes, contiguous) into the fp16 buffer
// (row stride kLdk); each consumer thread converts 16-byte runs.
template <class C>
__device__ inline void widen_chunk(const unsigned char* staged, uint16_t* dst) {
  constexpr int kRuns = C::kChunk * C::kD / 16, kRunsPerKey = C::kD / 16;
  static_assert(kRuns % C::kConsumers == 0, "whole runs per consumer thread");
#pragma unroll
  for (int idx = threadIdx.x; idx < kRuns; idx += C::kConsumers) {
    const uint4 v = reinterpret_cast<const uint4*>(staged)[idx];
    const int j = idx / kRunsPerKey, c = idx % kRunsPerKey;
    uint4* out = reinterpret_cast<uint4*>(dst + j * C::kLdk + c * 16);
    uint32_t b[8];
    e4m3x16_to_f16(v, b);
    out[0] = make_uint4(b[0], b[1], b[2], b[3]);
    out[1] = make_uint4(b[4], b[5], b[6], b[7]);
  }
}

}  // namespace mlasim::gpu::decode::sm90
