// kernels/decode/config.h - compile-time shapes of the decode kernels: the group size every kernel
// shares, and the tile constants and shared-memory plan of the NVIDIA warp-specialised kernel
// (kernels/decode/sm90/), with the static_asserts that relate them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mlasim::gpu::decode {

constexpr int kRows = 16;             // q rows (token x head) per group; heads % kRows == 0
constexpr int kMaxD = 576;            // largest head_dim_qk any kernel runs
constexpr int kMaxDv = 512;           // largest head_dim_v
constexpr int kBlock = 256;           // threads of the portable decode kernel and of the reduce
constexpr int kSharedLimit = 232448;  // bytes of shared memory one workgroup may use (sm_90)

// The warp-specialised NVIDIA kernel (MLA's 576 / 512 only): 2 producer warps stream 64-key
// chunks of KV rows into a ring of kStages shared-memory stages, one key per lane: each row is
// copied by its warp as 16-byte cp.async runs (masked keys zero-filled by the copy itself), and
// every producer thread's copies complete on the stage's `full` mbarrier
// (cp.async.mbarrier.arrive.noinc), plus one ordinary arrive per producer warp after it has
// stored its validity word. 8 consumer warps compute each chunk and free its stage (`empty`
// mbarrier). (A producer that issued one copy-engine bulk copy per cache row was measured
// slower on the H200, 65 % against 78 % of the copy bandwidth: docs/performance.md.)
// Consumers split S = Q K^T into 4 key quarters x 2 dimension halves (q fragments of one half stay
// in registers), own 2 rows each for the online softmax (no redundant exponentials), and 64
// output columns each for O += P V.
// fp8 e4m3fn KV: the stages hold fp8 rows (half the bytes, a third stage); the consumers widen the
// chunk exactly into one fp16 buffer (`conv`) and free the stage before the math, which then runs
// on fp16 operands.
//
// Shared-memory plan (bytes, in this order, every part 16-byte aligned):
//   stage  [kStages][kChunk][kStageRowBytes]  KV rows as they arrive (bf16 rows padded to kLdk)
//   conv   [kChunk][kLdk] fp16                fp8 only: the current chunk widened
//   score  [2][kRows][kLdS] fp32              S of the two dimension halves (log2 units)
//   p      [kRows][kLdP] bf16 / fp16          P of the chunk, the A operand of P V
//   alpha  [kRows] fp32                       per-row rescale of the chunk
//   inv    [2][kRows] fp32                    v_scale / l per row (by group parity)
//   valid  [kStages][2] u32                   bit j: key j of the stage has a cache row
//   full, empty [kStages] u64                 mbarriers
template <bool kFp8T>
struct WsConfig {
  static constexpr bool kFp8 = kFp8T;
  static constexpr int kD = 576, kDv = 512;
  static constexpr int kChunk = 64;  // keys per chunk
  static constexpr int kConsumerWarps = 8;
  static constexpr int kConsumers = kConsumerWarps * 32;
  static constexpr int kProducerWarps = 2;
  static constexpr int kProducerWarp = kConsumerWarps;  // the first producer warp
  static constexpr int kThreads = kConsumers + 32 * kProducerWarps;
  // arrivals that complete a `full` phase: every producer thread's copies (cp.async.mbarrier
  // .arrive.noinc) plus one arrive per producer warp after its validity word
  static constexpr int kFullArrivals = 32 * kProducerWarps + kProducerWarps;
  static constexpr int kStages = kFp8 ? 3 : 2;
  static constexpr int kLdk = kD + 8;  // 16-bit elements per row of a 16-bit KV buffer: 1168 B,
                                       // an odd multiple of 16 B, so ldmatrix rows hit all banks
  static constexpr int kKvRowBytes = kD * (kFp8 ? 1 : 2);  // one cache row in global memory
  static constexpr int kStageRowBytes = kFp8 ? kD : kLdk * 2;
  static constexpr int kStageBytes = kChunk * kStageRowBytes;
  static constexpr int kConvBytes = kFp8 ? kChunk * kLdk * 2 : 0;
  static constexpr int kLdS = kChunk + 8;     // floats per score row (float2 stores: no conflicts)
  static constexpr int kLdP = kChunk + 8;     // 16-bit elements per P row: 144 B, odd x 16 B
  static constexpr int kHalfSteps = kD / 32;  // k16 steps per dimension half (18)
  static constexpr int kPvSteps = kChunk / 16;

  static constexpr size_t kStageOff = 0;
  static constexpr size_t kConvOff = kStageOff + size_t{kStages} * kStageBytes;
  static constexpr size_t kScoreOff = kConvOff + kConvBytes;
  static constexpr size_t kPOff = kScoreOff + size_t{2} * kRows * kLdS * 4;
  static constexpr size_t kAlphaOff = kPOff + size_t{kRows} * kLdP * 2;
  static constexpr size_t kInvOff = kAlphaOff + size_t{kRows} * 4;
  static constexpr size_t kValidOff = kInvOff + size_t{2} * kRows * 4;
  static constexpr size_t kFullOff = (kValidOff + size_t{kStages} * 8 + 15) / 16 * 16;
  static constexpr size_t kEmptyOff = kFullOff + size_t{kStages} * 8;
  static constexpr size_t kSmemBytes = kEmptyOff + size_t{kStages} * 8;

  static_assert(kConsumerWarps * 64 == kDv, "each consumer warp owns 64 output columns");
  static_assert(kConsumerWarps * 2 == kRows, "each consumer warp owns 2 softmax rows");
  static_assert(kChunk == 64 && kChunk == 2 * 32, "one chunk = 2 validity words = 16 keys x 4");
  static_assert(kProducerWarps * 32 == kChunk, "producers: one key per lane");
  static_assert(kD % 32 == 0 && kD / 2 % 16 == 0, "two dimension halves of k16 steps");
  static_assert(kKvRowBytes % 16 == 0 && kStageRowBytes % 16 == 0,
                "rows are copied as 16-byte runs to 16-byte aligned rows");
  static_assert(kStageBytes % 16 == 0 && kConvBytes % 16 == 0, "16-byte aligned parts");
  static_assert((kLdk * 2 / 16) % 2 == 1 && (kLdP * 2 / 16) % 2 == 1,
                "odd 16-byte row strides: conflict-free ldmatrix");
  static_assert(kSmemBytes <= kSharedLimit, "shared-memory plan exceeds the sm_90 limit");
};

}  // namespace mlasim::gpu::decode
