// kernels/decode/sm90/kernel.h - the warp-specialised persistent MLA decode kernel for MLA's
// 576 / 512 (WsConfig in config.h): one workgroup per cluster, warps 0-7 consume, the warps
// after them produce. The phases live in load.h (producer, q, fp8 widening), attend.h (S, softmax, P V) and
// epilogue.h (stores).
#pragma once

#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/schedule.h"
#include "kernels/decode/sm90/attend.h"
#include "kernels/decode/sm90/epilogue.h"
#include "kernels/decode/sm90/load.h"
#include "kernels/decode/sm90/ptx.h"

namespace mlasim::gpu::decode::sm90 {

// One group on the consumer warps. `chunk` counts the workgroup's chunks over all groups (the
// producer counts the same), `group` the groups (parity of the inv buffer).
template <class C>
__device__ void consume_group(const DecodeParams& P, const WsSmem<C>& s, const GroupTask& t,
                              uint32_t& chunk, uint32_t& group) {
  const int lane = threadIdx.x % 32;
  const int64_t first = group_first_row(P, t), token = first / P.H;
  uint32_t qa[C::kHalfSteps][4];
  load_q_fragments<C>(P, first, threadIdx.x / 128, qa);
  log_rows(P.log, 0, token, token + 1, threadIdx.x == 0);
  const int64_t n = t.p1 - t.p0;
  if (n <= 0 && P.variant != static_cast<int>(ZeroKvVariant::kAsm))
    return;  // hk: read q, write nothing
  const int64_t chunks = n > 0 ? (n + C::kChunk - 1) / C::kChunk : 0;
  const int64_t limit = causal_limit(P, t, token);
  const float scale2 = P.logit_scale * 1.4426950408889634f;
  float oacc[8][4] = {};
  RowState rs;
  for (int64_t i = 0; i < chunks; ++i, ++chunk) {
    const RingSlot<C> slot(chunk);
    mbar_wait(&s.full[slot.stage], slot.parity);
    const uint32_t valid0 = s.valid[2 * slot.stage], valid1 = s.valid[2 * slot.stage + 1];
    const unsigned char* staged = s.stage + static_cast<size_t>(slot.stage) * C::kStageBytes;
    uint32_t kb = smem_u32(staged);
    if constexpr (C::kFp8) {
      named_sync(kConsumerBarrier, C::kConsumers);  // every warp is done with the last conv
      widen_chunk<C>(staged, s.conv);
      __syncwarp();
      if (lane == 0) mbar_arrive(&s.empty[slot.stage]);  // the stage can be refilled already
      named_sync(kConsumerBarrier, C::kConsumers);       // the widened chunk is complete
      kb = smem_u32(s.conv);
    }
    chunk_scores<C>(s, kb, qa, scale2);
    named_sync(kConsumerBarrier, C::kConsumers);  // both halves of S are in shared memory
    chunk_softmax<C>(s, rs, valid0, valid1, limit - i * C::kChunk);
    named_sync(kConsumerBarrier, C::kConsumers);  // P and alpha of every row are ready
    chunk_pv<C>(s, kb, oacc);
    if constexpr (!C::kFp8) {
      __syncwarp();
      if (lane == 0) mbar_arrive(&s.empty[slot.stage]);
    }
  }
  const int parity = static_cast<int>(group++ & 1u);
  publish_rows<C>(P, s, rs, t, first, parity);
  named_sync(kConsumerBarrier, C::kConsumers);  // inv of every row is ready
  store_rows<C>(P, s, oacc, t, first, parity);
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) mla_decode_ws_kernel(DecodeParams P) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const WsSmem<C> s(smem_raw);
  if (threadIdx.x == 0) {
    for (int st = 0; st < C::kStages; ++st) {
      mbar_init(&s.full[st], C::kFullArrivals);    // every producer thread + each producer warp
      mbar_init(&s.empty[st], C::kConsumerWarps);  // one arrive per consumer warp
    }
    fence_mbar_init();
  }
  __syncthreads();
  grid_launch_dependents();  // the reduce may be scheduled; it waits for this grid to finish
  if (threadIdx.x / 32 >= C::kProducerWarp) {
    produce<C>(P, s);
    return;
  }
  uint32_t chunk = 0, group = 0;
  for_each_group(P, [&](const GroupTask& t) { consume_group<C>(P, s, t, chunk, group); });
}

}  // namespace mlasim::gpu::decode::sm90
