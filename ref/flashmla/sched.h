// File: ref/flashmla/sched.h
//
// FlashMLA's decode scheduler, bit-exact at two revisions, on the CPU:
//   k9241ae3: `get_decoding_sched_meta` (deepseek-ai/FlashMLA 9241ae3, 2026-04,
//             csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu): dense and
//             sparse (top-k) decode, rows are `DecodingSchedMeta` (csrc/params.h) in KV blocks.
//   k414a2f3: `get_mla_metadata_kernel` (FlashMLA 414a2f3, Feb 2025, csrc/flash_fwd_mla_kernel.h,
//             called by `get_mla_metadata` in csrc/flash_api.cpp): dense only, rows are
//             `tile_scheduler_metadata` [begin_idx, begin_seqlen, end_idx, end_seqlen,
//             begin_n_split_idx] in tokens. vLLM's FlashMLA fork still plans this way.
//
// Both are one warp: the lanes sum (blocks + fixed overhead) over the batch, then lane 0 cuts
// the batch greedily into `num_sm_parts` parts of `payload` block units each. Splits of a
// request get consecutive rows of the lse/o accumulators starting at num_splits[request].
// The model runs the same integer arithmetic in the same order; inputs that would make the
// device code divide by zero, overflow int32 or read outside its buffers are refused.
#pragma once

#include <cstdint>
#include <vector>

#include "ref/status.h"

namespace mlasim::ref::flashmla {

enum class Revision : uint8_t {
  k414a2f3 = 0,  // Feb 2025, get_mla_metadata_kernel; rows in tokens, 5 words written
  k9241ae3 = 1,  // 2026-04, get_decoding_sched_meta; DecodingSchedMeta in blocks, 7 words written
};
const char* RevisionName(Revision r);  // "414a2f3", "9241ae3"
StatusOr<Revision> ParseRevision(const std::string& name);

// Scheduling constants, named where their owner passes them (never bare literals at call sites).
inline constexpr int32_t kBlockSizeN =
    64;  // tokens per KV block: dense decode page, sparse topk block
inline constexpr int32_t kFixedOverheadNumBlocks =
    5;  // per-request cost, block units (sm90, sm100 head64)
inline constexpr int32_t kSm100Head128FixedOverheadNumBlocks =
    3;                                   // sparse_decode.h Decode_Sm100_Head128_Impl
inline constexpr int32_t kRowWords = 8;  // DecodingSchedMetaSize / 4 == TileSchedulerMetaDataSize
// 414a2f3 keeps its per-request arrays in static shared memory of this many ints and refuses
// batch_size >= it (FLASH_ASSERT in get_mla_metadata_func).
inline constexpr int32_t kMaxBatchSize414a2f3 = 4096;
// Opt-in dynamic shared memory per block on sm90 (H100/H200: 227 KiB). 9241ae3 asks for
// 4 * (5b + 1) bytes; above this cudaFuncSetAttribute fails and CHECK_CUDA exits.
inline constexpr int64_t kSm90MaxDynamicSmemBytes = 232448;
// Bounds this model accepts (allocation proportional to them happens only below them).
inline constexpr int32_t kMaxBatchSize = 1 << 20;
inline constexpr int32_t kMaxNumSmParts = 1 << 16;

// Inputs of one scheduler launch (GetDecodeSchedMetaParams at 9241ae3, Mla_metadata_params at
// 414a2f3). Dense: topk == -1 and seqlens_k holds b lengths. Sparse (9241ae3 only): topk > 0,
// seqlens_k empty (the API passes nullptr).
struct SchedInput {
  Revision revision = Revision::k9241ae3;
  int32_t batch_size = 0;              // b requests, 1..kMaxBatchSize (both APIs refuse b = 0)
  int32_t num_sm_parts = 0;            // rows to fill, 1..kMaxNumSmParts (from sizing.h)
  int32_t block_size_n = kBlockSizeN;  // tokens per block, >= 1
  int32_t fixed_overhead_num_blocks = kFixedOverheadNumBlocks;  // block units per request, >= 0
  std::vector<int32_t> seqlens_k;  // [b] KV tokens per request, >= 0 (dense only)
  int32_t topk = -1;               // 9241ae3: -1 dense, > 0 sparse top-k per query token
  // 9241ae3 sparse: the extra cache's top-k. The kernel tests `if (extra_topk)`, so -1 (the
  // params.h comment's "disabled") counts as present; sparse_decode.h passes 0 when absent.
  int32_t extra_topk = -1;
  std::vector<int32_t> topk_length;        // [b] or empty (nullptr): per-request topk, 0..topk
  std::vector<int32_t> extra_topk_length;  // [b] or empty (nullptr), >= 0
  // Device capacity for 9241ae3's dynamic shared memory request (4 * (5b + 1) bytes).
  int64_t max_dynamic_smem_bytes = kSm90MaxDynamicSmemBytes;
};

// One scheduler row ("sm part"): the contiguous piece of the batch one CTA column decodes.
// Requests [begin_req_idx, end_req_idx] (both inclusive; begin > end: empty part). Positions
// are [begin_pos, end_pos) in the revision's unit: 9241ae3 KV blocks (begin_block_idx,
// end_block_idx), 414a2f3 tokens (begin_seqlen = block * block_size_n, end_seqlen). begin_pos
// applies to begin_req_idx, end_pos to end_req_idx; requests strictly between are whole.
struct SchedRow {
  int32_t begin_req_idx = 0;
  int32_t end_req_idx = 0;
  int32_t begin_pos = 0;
  int32_t end_pos = 0;
  int32_t begin_split_idx = 0;  // split index of begin_req_idx's piece in this row
  // 9241ae3 only (0 at 414a2f3, where the kernel derives NoSplit from the ranges):
  int32_t is_first_req_splitted = 0;  // begin_req_idx's piece is one of several
  int32_t is_last_req_splitted = 0;   // end_req_idx's piece is one of several
};
bool operator==(const SchedRow& a, const SchedRow& b);

// The words of `row` as the kernel stores them, in order: 9241ae3 writes words 0..6 of
// DecodingSchedMeta (begin_req, end_req, begin_block, end_block, begin_split, is_first,
// is_last; word 7 `_pad` is never written); 414a2f3 writes words 0..4 (begin_idx,
// begin_seqlen, end_idx, end_seqlen, begin_n_split_idx; words 5..7 are never written).
std::vector<int32_t> RowWords(Revision revision, const SchedRow& row);
int32_t WrittenRowWords(Revision revision);  // 7 or 5
// Inverse of RowWords: Status InvalidArgument if words.size() != WrittenRowWords(revision).
StatusOr<SchedRow> RowFromWords(Revision revision, const std::vector<int32_t>& words);

struct SchedMeta {
  Revision revision = Revision::k9241ae3;
  std::vector<SchedRow> rows;       // [num_sm_parts] tile_scheduler_metadata
  std::vector<int32_t> num_splits;  // [b + 1] prefix sums of splits per request, [0] = 0
  // What the lanes computed (kept for checkers and reports):
  std::vector<int32_t> seqlen_used;  // [b] tokens the scheduler counts (sparse: topk rule)
  std::vector<int32_t> num_blocks;   // [b] blocks the scheduler counts (9241ae3: >= 1)
  int32_t total_num_blocks = 0;      // sum(num_blocks + fixed_overhead_num_blocks)
  int32_t payload = 0;               // ceil(total / num_sm_parts) + fixed_overhead_num_blocks
  int64_t dynamic_smem_bytes = 0;    // 9241ae3: 4 * (5b + 1); 414a2f3: 0 (static arrays)
};

// Checks every field of `input` for the revision. Errors name the field: InvalidArgument for
// malformed values, OutOfRange for a capacity the device code would exceed (batch beyond
// 414a2f3's 4096 or 9241ae3's shared memory; block totals beyond int32).
Status ValidateSchedInput(const SchedInput& input);

// Runs the revision's scheduler. Errors: those of ValidateSchedInput.
StatusOr<SchedMeta> GetDecodingSchedMeta(const SchedInput& input);

}  // namespace mlasim::ref::flashmla
