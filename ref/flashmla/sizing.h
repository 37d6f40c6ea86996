// File: ref/flashmla/sizing.h
//
// FlashMLA's host sizing around the decode scheduler: how many scheduler rows (`num_sm_parts`)
// a launch plans, which scheduling constants it passes, and the fp32 split accumulators
// (lse_accum, o_accum) the split-KV kernel writes and the combine kernel reads. Models:
//   dense, 9241ae3:  csrc/api/dense_decode.h (dense_attn_decode_interface)
//   dense, 414a2f3:  csrc/flash_api.cpp (get_mla_metadata + mha_fwd_kvcache_mla)
//   sparse, 9241ae3: csrc/api/sparse_decode.h (the Decode_*_Impl::get_meta per architecture)
//   combine (both):  MLA_NUM_SPLITS_SWITCH (csrc/smxx/decode/combine/combine.cu; 414a2f3
//                    csrc/static_switch.h): num_sm_parts <= 160, a request's splits <= bucket.
// Devices are inputs: the SM count is a field, never queried.
#pragma once

#include <cstdint>
#include <vector>

#include "ref/flashmla/sched.h"

namespace mlasim::ref::flashmla {

inline constexpr int32_t kHeadSizeV = 512;         // the only value head_size_v may take
inline constexpr int32_t kHeadBlockM = 64;         // q rows (s_q * h_q / h_k) per CTA row block
inline constexpr int32_t kCombineMaxSplits = 160;  // largest MLA_NUM_SPLITS_SWITCH bucket

enum class Arch : uint8_t {
  kSm90a,   // H100 / H200 / H800
  kSm100f,  // B200 family (sparse decode only)
};

// Sparse-decode implementation classes of sparse_decode.h, chosen from (arch, h_q, d_qk).
enum class SparseImpl : uint8_t {
  kSm90,           // Decode_Sm90_Impl: parts = max(sms / s_q / (h_q / 64), 1), overhead 5
  kSm100Head64,    // Decode_Sm100_Head64_Impl: parts = max(sms / s_q, 1), overhead 5
  kSm100Head64x2,  // Decode_Sm100_Head64x2_Impl (h_q 128, d_qk 576): as head64
  kSm100Head128,   // Decode_Sm100_Head128_Impl (h_q 128, d_qk 512): max(sms / s_q / 2, 1), 3
};
const char* SparseImplName(SparseImpl impl);

// q: [b, s_q, h_q, head_size_k] bf16/fp16, kcache: [num_blocks, page_block_size, h_k, head_size_k].
struct DenseDecodeShape {
  int32_t batch_size = 0;     // b >= 1
  int32_t seqlen_q = 1;       // s_q >= 1 (query tokens per request; > 1 with MTP)
  int32_t num_heads_q = 0;    // h_q >= 1
  int32_t num_heads_k = 1;    // h_k >= 1, divides h_q
  int32_t head_size_k = 576;  // 576 or 512 (9241ae3); 576 (414a2f3)
  int32_t head_size_v = kHeadSizeV;
  int32_t page_block_size = kBlockSizeN;  // must be 64
  int32_t num_sms = 0;                    // device SM count (H200: 132), >= 1
};

// q: [b, s_q, h_q, d_qk] bf16, kv: [num_blocks, page, h_kv, bytes per token] fp8 (9241ae3 only).
struct SparseDecodeShape {
  Arch arch = Arch::kSm90a;
  int32_t batch_size = 0;      // b >= 1
  int32_t seqlen_q = 1;        // s_q >= 1
  int32_t num_heads_q = 64;    // h_q: 64 or 128
  int32_t num_heads_kv = 1;    // h_kv: must be 1 (MQA)
  int32_t head_size_qk = 576;  // 576 (V3.2) or 512 (MODEL1)
  int32_t head_size_v = kHeadSizeV;
  int32_t topk = 0;        // indices.size(-1), > 0
  int32_t extra_topk = 0;  // extra_indices.size(-1), 0 without an extra cache
  int32_t num_sms = 0;     // device SM count, >= 1
};

struct DecodeSizing {
  Revision revision = Revision::k9241ae3;
  int32_t num_sm_parts = 0;  // scheduler rows = grid z of the split-KV kernel
  // Scheduler arguments exactly as the API passes them (GetDecodeSchedMetaParams).
  int32_t block_size_n = kBlockSizeN;
  int32_t fixed_overhead_num_blocks = kFixedOverheadNumBlocks;
  int32_t topk = -1;
  int32_t extra_topk = -1;
  int32_t q_seq_per_hk = 0;      // dense: s_q * h_q / h_k (q rows per KV head); sparse: 0
  int32_t total_num_splits = 0;  // b + num_sm_parts: leading dim of both accumulators
  std::vector<int64_t>
      lse_accum_shape;  // fp32. dense [b+parts, h_k, q_seq_per_hk]; sparse [b+parts, s_q, h_q]
  std::vector<int64_t> o_accum_shape;  // fp32, lse_accum_shape + [head_size_v]
  int64_t lse_accum_bytes = 0;
  int64_t o_accum_bytes = 0;
  int32_t sched_meta_words = 0;    // num_sm_parts * kRowWords int32 (tile_scheduler_metadata)
  int32_t num_splits_len = 0;      // b + 1 int32
  int32_t combine_max_splits = 0;  // MLA_NUM_SPLITS_SWITCH bucket: 32, 64, 96, 128 or 160
};

// The split-count bucket the combine kernel is instantiated with for `num_sm_parts`; OutOfRange
// above 160 (FLASH_ASSERT(false) in MLA_NUM_SPLITS_SWITCH).
StatusOr<int32_t> CombineMaxSplits(int32_t num_sm_parts);

// Dense decode sizing at `revision`. Errors: InvalidArgument naming the field for shapes the
// API refuses (head sizes, page size, b <= 0, h_q % h_k); FailedPrecondition("num_sms") at
// 414a2f3 when num_sm_parts comes out 0 (no max(.., 1) there: the scheduler would divide by
// zero); OutOfRange("num_sms") when num_sm_parts > 160 (combine) .
StatusOr<DecodeSizing> SizeDenseDecode(Revision revision, const DenseDecodeShape& shape);

// Sparse decode sizing (9241ae3). Errors as above, plus the API's sparse checks (h_kv == 1,
// h_q in {64, 128}, topk > 0, topk % 64 on sm90, d_qk 576 / 512, d_v 512).
StatusOr<DecodeSizing> SizeSparseDecode(const SparseDecodeShape& shape);
StatusOr<SparseImpl> SelectSparseImpl(const SparseDecodeShape& shape);

// The scheduler launch the API makes for `sizing`. Dense: pass seqlens_k [b]. Sparse: pass
// topk_length / extra_topk_length (empty = nullptr). The result still goes through
// GetDecodingSchedMeta's validation.
SchedInput DenseSchedInput(const DecodeSizing& sizing, std::vector<int32_t> seqlens_k);
SchedInput SparseSchedInput(const DecodeSizing& sizing, int32_t batch_size,
                            std::vector<int32_t> topk_length,
                            std::vector<int32_t> extra_topk_length);

}  // namespace mlasim::ref::flashmla
